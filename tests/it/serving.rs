//! Secure serving over real HTTPS: the kcm binary against kube-testserver, which answers the
//! TokenReviews and SubjectAccessReviews from the tables each test sets.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use kcm_testsupport::{DEADLINE, eventually, free_port};
use kube_testserver::{RequestRecord, TestServer};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The kcm binary, killed when dropped.
struct Kcm {
    child: Child,
    log: tempfile::NamedTempFile,
    /// kcm's `TMPDIR`: the CPU profiler keeps a temporary file open for the process's life,
    /// which a killed kcm cannot remove; this directory goes with the test.
    _tmp: tempfile::TempDir,
}

impl Kcm {
    fn start(args: &[String]) -> Self {
        let log = tempfile::NamedTempFile::new().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_kcm"))
            .args(args)
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .expect("kcm starts");
        Self {
            child,
            log,
            _tmp: tmp,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Waits for kcm to exit by itself: its exit code and log.
    async fn exit(self) -> (Option<i32>, String) {
        tokio::task::spawn_blocking(move || {
            let mut kcm = self;
            let status = kcm.child.wait().unwrap();
            (status.code(), kcm.log())
        })
        .await
        .unwrap()
    }
}

impl Drop for Kcm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server refuses, as RBAC would, reviews and client-CA reads that the built-in roles
/// deploy/ binds (`system:auth-delegator`, `extension-apiserver-authentication-reader`) do not
/// allow; the other requests are the controllers', checked by the other suites.
fn enforce_serving_rbac(server: &TestServer) {
    use kcm::runtime::rbac::{AUTH_DELEGATOR, AUTHENTICATION_READER};
    use kube_testserver::rbac::allows;
    let cluster: Vec<_> = AUTH_DELEGATOR.iter().map(|r| r.policy_rule()).collect();
    let reader: Vec<_> = AUTHENTICATION_READER
        .iter()
        .map(|r| r.policy_rule())
        .collect();
    server.authorize(Box::new(move |info, user_agent| {
        // The tests' own requests (fixtures) are not kcm's.
        if !user_agent.contains("kcm/") {
            return Ok(());
        }
        let request = info.rbac();
        let serving = matches!(
            info.resource.as_str(),
            "tokenreviews" | "subjectaccessreviews" | "configmaps"
        );
        if !serving
            || allows(&cluster, &request)
            || (info.namespace == "kube-system" && allows(&reader, &request))
        {
            Ok(())
        } else {
            Err(format!("{info:?} is not granted to the secure port"))
        }
    }));
}

/// kcm on a free secure port of 127.0.0.1, reviews delegated to `server`.
fn start_secure(server: &TestServer, extra: &[&str]) -> (Kcm, SocketAddr) {
    enforce_serving_rbac(server);
    let port = free_port();
    let kubeconfig = server.kubeconfig_path().display().to_string();
    let mut args = vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--leader-elect=false".into(),
        "--controllers=ttl".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    (Kcm::start(&args), ([127, 0, 0, 1], port).into())
}

/// Accepts any server certificate (`curl -k`) and keeps the one presented.
#[derive(Debug, Default)]
struct AnyServer(Mutex<Option<CertificateDer<'static>>>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.0.lock().unwrap() = Some(end_entity.clone().into_owned());
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// How the test client connects: whom it trusts, and which certificate it presents.
#[derive(Clone)]
struct Client {
    config: Arc<rustls::ClientConfig>,
    seen: Arc<AnyServer>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Client {
    /// Trusts any server, like `curl -k`; presents `identity` when given.
    fn insecure(identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>) -> Self {
        let seen = Arc::new(AnyServer::default());
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(seen.clone());
        let mut config = match identity {
            Some((chain, key)) => builder.with_client_auth_cert(chain, key).unwrap(),
            None => builder.with_no_client_auth(),
        };
        // Full handshakes only, so every connection shows the certificate served now.
        config.resumption = rustls::client::Resumption::disabled();
        Self {
            config: Arc::new(config),
            seen,
        }
    }

    /// Verifies the server against `ca`, for the name `localhost`.
    fn trusting(ca: CertificateDer<'static>) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Self {
            config: Arc::new(config),
            seen: Arc::default(),
        }
    }

    /// The same client, offering these ALPN protocols.
    fn offering(&self, protocols: &[&[u8]]) -> Self {
        let mut config = (*self.config).clone();
        config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        Self {
            config: Arc::new(config),
            seen: self.seen.clone(),
        }
    }

    /// A TLS connection asking for `name` by SNI.
    async fn connect(
        &self,
        addr: SocketAddr,
        name: &str,
    ) -> Option<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
        let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let name = ServerName::try_from(name.to_string()).unwrap();
        connector.connect(name, tcp).await.ok()
    }

    /// The CN of the certificate the server presented last.
    fn served_cn(&self) -> String {
        let seen = self.seen.0.lock().unwrap().clone().expect("a certificate");
        let (_, cert) = x509_parser::parse_x509_certificate(&seen).unwrap();
        let cn = cert.subject().iter_common_name().next().unwrap();
        cn.as_str().unwrap().to_string()
    }

    /// `GET path` over a fresh TLS connection: (status, body), or `None` when the connection
    /// or handshake fails.
    async fn get(
        &self,
        addr: SocketAddr,
        path: &str,
        token: Option<&str>,
    ) -> Option<(u16, String)> {
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        self.get_with(addr, path, &auth).await
    }

    /// `GET path` with extra header lines (each ending in CRLF).
    async fn get_with(&self, addr: SocketAddr, path: &str, headers: &str) -> Option<(u16, String)> {
        let (status, body) = self.get_bytes(addr, path, headers).await?;
        Some((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// `GET path`: the status and the body as sent (a length-delimited, not chunked, body).
    async fn get_bytes(
        &self,
        addr: SocketAddr,
        path: &str,
        headers: &str,
    ) -> Option<(u16, Vec<u8>)> {
        let mut tls = self.connect(addr, "localhost").await?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n");
        tls.write_all(request.as_bytes()).await.ok()?;
        let mut raw = Vec::new();
        // A server that refused the client certificate ends the connection here.
        tls.read_to_end(&mut raw).await.ok()?;
        let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&raw[..split]);
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((status, raw[split + 4..].to_vec()))
    }

    async fn status(&self, addr: SocketAddr, path: &str, token: Option<&str>) -> Option<u16> {
        self.get(addr, path, token).await.map(|(status, _)| status)
    }
}

async fn wait_serving(client: &Client, addr: SocketAddr, kcm: &Kcm) {
    eventually("kcm serves HTTPS", DEADLINE, || async {
        client.status(addr, "/healthz", None).await == Some(200)
    })
    .await;
    assert!(kcm.log().contains("serving /metrics"), "{}", kcm.log());
}

/// The body of the last SubjectAccessReview kcm sent.
fn last_access_review(server: &TestServer) -> serde_json::Value {
    server
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.info.resource == "subjectaccessreviews")
        .and_then(|r| r.body)
        .unwrap()
}

fn reviews_of(server: &TestServer, resource: &str) -> usize {
    server.count(|r: &RequestRecord| r.info.resource == resource && r.info.verb == "create")
}

#[tokio::test]
async fn default_flags_serve_only_https_on_10257() {
    let server = TestServer::start().await;
    let kcm = Kcm::start(&[
        format!("--kubeconfig={}", server.kubeconfig_path().display()),
        "--controllers=ttl".into(),
    ]);
    let client = Client::insecure(None);
    let addr: SocketAddr = ([127, 0, 0, 1], 10257).into();
    wait_serving(&client, addr, &kcm).await;
    for path in ["/healthz", "/livez"] {
        assert_eq!(client.status(addr, path, None).await, Some(200), "{path}");
    }
    eventually("ready", DEADLINE, || async {
        client.status(addr, "/readyz", None).await == Some(200)
    })
    .await;
    // Outside a cluster and without the kubeconfigs, nothing can be reviewed: refused.
    assert_eq!(client.status(addr, "/metrics", None).await, Some(401));
    assert_eq!(client.status(addr, "/metrics", Some("t")).await, Some(401));
    // The self-signed certificate is upstream's: localhost@<unix time>.
    let seen = client
        .seen
        .0
        .lock()
        .unwrap()
        .clone()
        .expect("a certificate");
    let (_, cert) = x509_parser::parse_x509_certificate(&seen).unwrap();
    let cn = cert.subject().iter_common_name().next().unwrap();
    assert!(cn.as_str().unwrap().starts_with("localhost@"));
    // No plain HTTP: neither the old 10258 nor plain HTTP on the secure port.
    assert!(kcm_testsupport::http_get(10258, "/healthz").await.is_none());
    let plain = kcm_testsupport::http_get(10257, "/healthz").await;
    assert!(
        plain.as_ref().is_none_or(|(status, _)| *status != 200),
        "{plain:?}"
    );
}

#[tokio::test]
async fn metrics_need_a_token_the_api_server_authenticates_and_authorizes() {
    let server = TestServer::start().await;
    server
        .reviews()
        .add_token("allowed-token", "prometheus", &["monitoring"]);
    server.reviews().add_token("denied-token", "intruder", &[]);
    server.reviews().allow("monitoring", "get", "/metrics");
    let (kcm, addr) = start_secure(&server, &["--authentication-skip-lookup"]);
    let client = Client::insecure(None);
    wait_serving(&client, addr, &kcm).await;
    assert_eq!(
        reviews_of(&server, "tokenreviews"),
        0,
        "health needs no review"
    );

    assert_eq!(
        client.status(addr, "/metrics", Some("unknown")).await,
        Some(401)
    );
    let body = guarded(&client, addr, "/metrics").await;
    // A metric registered at start: store metrics appear only once the stores list.
    assert!(
        body.contains("# TYPE process_cpu_seconds_total counter"),
        "{body}"
    );
    // The always-allowed paths answer with a token too, without a review.
    let reviews_before = reviews_of(&server, "subjectaccessreviews");
    // (Ready once the stores have synced, which may be a moment after serving starts.)
    eventually("ready, with an unknown token", DEADLINE, || async {
        client.status(addr, "/readyz", Some("unknown")).await == Some(200)
    })
    .await;
    assert_eq!(reviews_of(&server, "subjectaccessreviews"), reviews_before);
    // What the SubjectAccessReview asked.
    let review = last_access_review(&server);
    assert_eq!(review["spec"]["user"], "prometheus");
    assert_eq!(
        review["spec"]["groups"],
        serde_json::json!(["monitoring", "system:authenticated"])
    );
    assert_eq!(
        review["spec"]["nonResourceAttributes"],
        serde_json::json!({ "path": "/metrics", "verb": "get" })
    );
}

#[tokio::test]
async fn reviews_are_cached_for_their_ttls() {
    let server = TestServer::start().await;
    server
        .reviews()
        .add_token("allowed-token", "prometheus", &[]);
    server.reviews().add_token("denied-token", "intruder", &[]);
    server.reviews().allow("prometheus", "get", "/metrics");
    let (kcm, addr) = start_secure(&server, &["--authentication-skip-lookup"]);
    let client = Client::insecure(None);
    wait_serving(&client, addr, &kcm).await;

    for token in ["allowed-token", "denied-token", "unknown"] {
        let first = client.status(addr, "/metrics", Some(token)).await;
        let tokens = reviews_of(&server, "tokenreviews");
        let accesses = reviews_of(&server, "subjectaccessreviews");
        // Within the 10 s TTLs: the same answer, and no new review of either kind.
        assert_eq!(
            client.status(addr, "/metrics", Some(token)).await,
            first,
            "{token}"
        );
        assert_eq!(reviews_of(&server, "tokenreviews"), tokens, "{token}");
        assert_eq!(
            reviews_of(&server, "subjectaccessreviews"),
            accesses,
            "{token}"
        );
    }
    assert_eq!(reviews_of(&server, "tokenreviews"), 3);
    assert_eq!(
        reviews_of(&server, "subjectaccessreviews"),
        2,
        "unknown tokens get none"
    );

    // With zero TTLs every request is reviewed again.
    let (kcm, addr) = start_secure(
        &server,
        &[
            "--authentication-skip-lookup",
            "--authentication-token-webhook-cache-ttl=0s",
            "--authorization-webhook-cache-authorized-ttl=0s",
            "--authorization-webhook-cache-unauthorized-ttl=0s",
        ],
    );
    wait_serving(&client, addr, &kcm).await;
    let (tokens, accesses) = (
        reviews_of(&server, "tokenreviews"),
        reviews_of(&server, "subjectaccessreviews"),
    );
    for _ in 0..2 {
        assert_eq!(
            client.status(addr, "/metrics", Some("allowed-token")).await,
            Some(200)
        );
    }
    assert_eq!(reviews_of(&server, "tokenreviews"), tokens + 2);
    assert_eq!(reviews_of(&server, "subjectaccessreviews"), accesses + 2);
}

/// A CA, and a client certificate it signs for `cn` in organization `org`.
fn client_identity(
    cn: &str,
    org: &str,
) -> (String, Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let (ca, mut clients) = ca_and_clients(&[cn], org);
    let (chain, key) = clients.pop().unwrap();
    (ca, chain, key)
}

#[tokio::test]
async fn client_certificates_from_client_ca_file_authenticate() {
    let server = TestServer::start().await;
    server.reviews().allow("metrics-readers", "get", "/metrics");
    let (ca_pem, chain, key) = client_identity("carol", "metrics-readers");
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, &ca_pem).unwrap();
    let (kcm, addr) = start_secure(
        &server,
        &[&format!("--client-ca-file={}", ca_file.display())],
    );
    wait_serving(&Client::insecure(None), addr, &kcm).await;

    let carol = Client::insecure(Some((chain, key.clone_key())));
    assert_eq!(carol.status(addr, "/metrics", None).await, Some(200));
    assert_eq!(
        reviews_of(&server, "tokenreviews"),
        0,
        "a certificate needs no TokenReview"
    );
    let review = server
        .requests()
        .into_iter()
        .find(|r| r.info.resource == "subjectaccessreviews")
        .and_then(|r| r.body)
        .unwrap();
    assert_eq!(review["spec"]["user"], "carol");
    assert_eq!(
        review["spec"]["groups"],
        serde_json::json!(["metrics-readers", "system:authenticated"])
    );

    // Same names, another CA: refused.
    let (_, chain, key) = client_identity("carol", "metrics-readers");
    let impostor = Client::insecure(Some((chain, key)));
    assert_ne!(impostor.status(addr, "/metrics", None).await, Some(200));
}

#[tokio::test]
async fn the_client_ca_is_looked_up_in_the_cluster_unless_skipped() {
    let server = TestServer::start().await;
    server.reviews().allow("dave", "get", "/metrics");
    let (ca_pem, chain, key) = client_identity("dave", "ops");
    server
        .seed(serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": "extension-apiserver-authentication", "namespace": "kube-system" },
            "data": { "client-ca-file": ca_pem },
        }))
        .unwrap();
    let dave = Client::insecure(Some((chain, key)));

    let (kcm, addr) = start_secure(&server, &[]);
    wait_serving(&Client::insecure(None), addr, &kcm).await;
    assert_eq!(dave.status(addr, "/metrics", None).await, Some(200));
    assert_eq!(
        server.count(|r| r.info.resource == "configmaps" && r.code == 403),
        0,
        "the lookup stays within extension-apiserver-authentication-reader"
    );
    drop(kcm);

    let (kcm, addr) = start_secure(&server, &["--authentication-skip-lookup"]);
    wait_serving(&Client::insecure(None), addr, &kcm).await;
    // The certificate is not asked for, so dave is anonymous.
    assert_eq!(dave.status(addr, "/metrics", None).await, Some(401));
}

#[tokio::test]
async fn cert_dir_keeps_a_certificate_valid_for_localhost() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (kcm, addr) = start_secure(&server, &[&format!("--cert-dir={}", dir.path().display())]);
    wait_serving(&Client::insecure(None), addr, &kcm).await;
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(dir.path().join("kube-controller-manager.crt"))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    assert_eq!(chain.len(), 2);
    let verified = Client::trusting(chain[1].clone());
    assert_eq!(verified.status(addr, "/healthz", None).await, Some(200));

    // Given files win over generation.
    let (kcm, addr) = start_secure(
        &server,
        &[
            &format!(
                "--tls-cert-file={}",
                dir.path().join("kube-controller-manager.crt").display()
            ),
            &format!(
                "--tls-private-key-file={}",
                dir.path().join("kube-controller-manager.key").display()
            ),
        ],
    );
    wait_serving(&Client::insecure(None), addr, &kcm).await;
    assert_eq!(verified.status(addr, "/healthz", None).await, Some(200));
}

#[tokio::test]
async fn a_missing_certificate_file_fails_at_start() {
    let server = TestServer::start().await;
    let (kcm, _) = start_secure(
        &server,
        &[
            "--tls-cert-file=/nonexistent/tls.crt",
            "--tls-private-key-file=/nonexistent/tls.key",
        ],
    );
    let (code, log) = kcm.exit().await;
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("/nonexistent/tls.crt"), "{log}");
}

/// Plain HTTP only where asked for: `--port` alone serves no HTTPS.
#[tokio::test]
async fn port_alone_serves_plain_http_only() {
    let server = TestServer::start().await;
    let kcm = kcm_testsupport::Kcm::start(
        server.kubeconfig_path(),
        &["--leader-elect=false", "--controllers=ttl"],
    );
    eventually("plain HTTP", DEADLINE, || async {
        kcm.get("/healthz").await.is_some_and(|(s, _)| s == 200)
    })
    .await;
    assert_eq!(kcm.get("/metrics").await.map(|(s, _)| s), Some(200));
    assert!(!kcm.log().contains("over HTTPS"), "{}", kcm.log());
}

/// A self-signed serving certificate for `cn` (DNS SANs `sans`) with `key`, written as
/// `<dir>/<file>.crt` and `<dir>/<file>.key` (the key as `key_pem`, or `key`'s own PEM).
fn write_serving_pair(
    dir: &std::path::Path,
    file: &str,
    cn: &str,
    sans: &[&str],
    key: &KeyPair,
    key_pem: Option<&str>,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let mut params =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    let cert = params.self_signed(key).unwrap();
    let (cert_path, key_path) = (
        dir.join(format!("{file}.crt")),
        dir.join(format!("{file}.key")),
    );
    // Written beside and renamed in, as cert-manager and kubelet's volumes swap files.
    let staged = dir.join(format!(".{file}.staged"));
    std::fs::write(
        &staged,
        key_pem
            .map(String::from)
            .unwrap_or_else(|| key.serialize_pem()),
    )
    .unwrap();
    std::fs::rename(&staged, &key_path).unwrap();
    std::fs::write(&staged, cert.pem()).unwrap();
    std::fs::rename(&staged, &cert_path).unwrap();
    (cert_path, key_path)
}

fn arg(flag: &str, path: &std::path::Path) -> String {
    format!("{flag}={}", path.display())
}

/// kcm's exit code and log when it refuses to start.
async fn refused(server: &TestServer, extra: &[&str]) -> (Option<i32>, String) {
    start_secure(server, extra).0.exit().await
}

#[tokio::test]
async fn insecure_or_unsupported_tls_values_are_refused_at_start_with_clear_messages() {
    let server = TestServer::start().await;
    for (flag, message) in [
        (
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_RSA_WITH_RC4_128_SHA",
            "--tls-cipher-suites: TLS_RSA_WITH_RC4_128_SHA: insecure, and not implemented by kcm's TLS library (rustls); kcm supports TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        ),
        (
            "--tls-min-version=VersionTLS10",
            "--tls-min-version=VersionTLS10: TLS 1.0 and 1.1 are not available in kcm (rustls implements TLS 1.2 and 1.3 only); use VersionTLS12 or VersionTLS13",
        ),
        (
            "--tls-curve-preferences=29,25",
            "--tls-curve-preferences: 25 (CurveP521) is not supported by kcm's TLS library (rustls with ring); supported: 23 (CurveP256), 24 (CurveP384), 29 (X25519)",
        ),
    ] {
        let (code, log) = refused(&server, &[flag]).await;
        assert_eq!(code, Some(1), "{flag}: {log}");
        assert!(log.contains(message), "{flag}: {log}");
    }
}

#[tokio::test]
async fn tls_settings_limit_versions_and_suites() {
    let server = TestServer::start().await;
    let (kcm, addr) = start_secure(
        &server,
        &[
            "--authentication-skip-lookup",
            "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "--tls-curve-preferences=24",
        ],
    );
    let any = Client::insecure(None);
    wait_serving(&any, addr, &kcm).await;
    // A TLS 1.2 client gets the one suite allowed, over P-384.
    let tls12 = |suites: Vec<rustls::SupportedCipherSuite>| {
        let mut provider = rustls::crypto::ring::default_provider();
        provider.cipher_suites = suites;
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(&[&rustls::version::TLS12])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer::default()))
            .with_no_client_auth();
        Client {
            config: Arc::new(config),
            seen: Arc::default(),
        }
    };
    use rustls::crypto::ring::cipher_suite as suites;
    let allowed = tls12(vec![suites::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]);
    let tls = allowed.connect(addr, "localhost").await.expect("handshake");
    assert_eq!(
        tls.get_ref().1.negotiated_cipher_suite().map(|s| s.suite()),
        Some(rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384)
    );
    assert_eq!(
        tls.get_ref()
            .1
            .negotiated_key_exchange_group()
            .map(|g| g.name()),
        Some(rustls::NamedGroup::secp384r1)
    );
    let other = tls12(vec![suites::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]);
    assert!(other.connect(addr, "localhost").await.is_none());
    drop(kcm);

    // --tls-min-version=VersionTLS13 refuses TLS 1.2 clients.
    let (kcm, addr) = start_secure(
        &server,
        &[
            "--authentication-skip-lookup",
            "--tls-min-version=VersionTLS13",
        ],
    );
    wait_serving(&any, addr, &kcm).await;
    let all_tls12 = tls12(rustls::crypto::ring::default_provider().cipher_suites);
    assert!(all_tls12.connect(addr, "localhost").await.is_none());
}

#[tokio::test]
async fn http2_is_negotiated_by_alpn_and_off_with_disable_http2_serving() {
    let server = TestServer::start().await;
    let (kcm, addr) = start_secure(
        &server,
        &[
            "--authentication-skip-lookup",
            "--http2-max-streams-per-connection=7",
        ],
    );
    let client = Client::insecure(None).offering(&[b"h2", b"http/1.1"]);
    wait_serving(&Client::insecure(None), addr, &kcm).await;
    let tls = client.connect(addr, "localhost").await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (sender, connection) = h2::client::handshake(tls).await.unwrap();
    tokio::spawn(connection);
    let mut sender = sender.ready().await.unwrap();
    let request = http::Request::get("https://localhost/healthz")
        .body(())
        .unwrap();
    let (response, _) = sender.send_request(request, true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(sender.current_max_send_streams(), 7);
    // An HTTP/1.1-only client still gets HTTP/1.1.
    let http1 = Client::insecure(None).offering(&[b"http/1.1"]);
    assert_eq!(http1.status(addr, "/healthz", None).await, Some(200));
    drop(kcm);

    let (kcm, addr) = start_secure(
        &server,
        &["--authentication-skip-lookup", "--disable-http2-serving"],
    );
    wait_serving(&Client::insecure(None), addr, &kcm).await;
    let tls = client.connect(addr, "localhost").await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
}

#[tokio::test]
async fn sni_chooses_the_certificate_and_rsa_ecdsa_ed25519_keys_serve() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pkcs8 = include_str!("../data/serving/rsa-pkcs8.key");
    let pkcs1 = include_str!("../data/serving/rsa-pkcs1.key");
    let rsa = KeyPair::from_pem(pkcs8).unwrap();
    // The default certificate: RSA, its key in PKCS#1 ("BEGIN RSA PRIVATE KEY").
    let (cert, key) = write_serving_pair(
        dir.path(),
        "default",
        "rsa-pkcs1",
        &["localhost"],
        &rsa,
        Some(pkcs1),
    );
    let (rsa8_cert, rsa8_key) =
        write_serving_pair(dir.path(), "rsa8", "rsa-pkcs8", &["rsa8.test"], &rsa, None);
    let ed = KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let (ed_cert, ed_key) =
        write_serving_pair(dir.path(), "ed", "ed25519", &["ed.test"], &ed, None);
    let p384 = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
    let (ec_cert, ec_key) = write_serving_pair(
        dir.path(),
        "ec",
        "ecdsa-p384",
        &["ignored.test"],
        &p384,
        None,
    );
    let (kcm, addr) = start_secure(
        &server,
        &[
            "--authentication-skip-lookup",
            &arg("--tls-cert-file", &cert),
            &arg("--tls-private-key-file", &key),
            &format!(
                "--tls-sni-cert-key={},{}",
                rsa8_cert.display(),
                rsa8_key.display()
            ),
            &format!(
                "--tls-sni-cert-key={},{}",
                ed_cert.display(),
                ed_key.display()
            ),
            // Explicit names replace the certificate's own.
            &format!(
                "--tls-sni-cert-key={},{}:*.wild.test,ec.test",
                ec_cert.display(),
                ec_key.display()
            ),
        ],
    );
    let client = Client::insecure(None);
    wait_serving(&client, addr, &kcm).await;
    for (name, cn) in [
        ("localhost", "rsa-pkcs1"),
        ("unknown.test", "rsa-pkcs1"),
        ("rsa8.test", "rsa-pkcs8"),
        ("ed.test", "ed25519"),
        ("ec.test", "ecdsa-p384"),
        ("a.wild.test", "ecdsa-p384"),
        ("ignored.test", "rsa-pkcs1"),
    ] {
        assert!(client.connect(addr, name).await.is_some(), "{name}");
        assert_eq!(client.served_cn(), cn, "{name}");
    }
}

#[tokio::test]
async fn a_rotated_certificate_is_served_without_restart_and_a_broken_one_is_not() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = KeyPair::generate().unwrap();
    let (cert, key_file) =
        write_serving_pair(dir.path(), "tls", "first", &["localhost"], &key, None);
    let (ca_pem, chain, admin_key) = client_identity("admin", "system:masters");
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, &ca_pem).unwrap();
    let (kcm, addr) = start_secure(
        &server,
        &[
            "--authentication-skip-lookup",
            &arg("--tls-cert-file", &cert),
            &arg("--tls-private-key-file", &key_file),
            &arg("--client-ca-file", &ca_file),
        ],
    );
    let admin = Client::insecure(Some((chain, admin_key)));
    wait_serving(&admin, addr, &kcm).await;
    assert_eq!(admin.served_cn(), "first");

    let next = KeyPair::generate().unwrap();
    write_serving_pair(dir.path(), "tls", "second", &["localhost"], &next, None);
    eventually("the rotated certificate is served", DEADLINE, || async {
        admin.status(addr, "/healthz", None).await == Some(200) && admin.served_cn() == "second"
    })
    .await;

    // A certificate that does not match its key: the previous pair stays in use.
    let (_, _) = write_serving_pair(
        dir.path(),
        "other",
        "third",
        &["localhost"],
        &KeyPair::generate().unwrap(),
        None,
    );
    std::fs::rename(dir.path().join("other.crt"), &cert).unwrap();
    let label = format!(
        "kcm_serving_reload_errors_total{{file=\"{}\"}} 1",
        cert.display()
    );
    eventually("the broken pair is reported", DEADLINE, || async {
        admin
            .get(addr, "/metrics", None)
            .await
            .is_some_and(|(status, body)| status == 200 && body.contains(&label))
    })
    .await;
    assert!(kcm.log().contains("cannot reload"), "{}", kcm.log());
    assert_eq!(admin.status(addr, "/healthz", None).await, Some(200));
    assert_eq!(admin.served_cn(), "second");
}

/// A CA (PEM) and a client certificate it signs for each of `cns`, in organization `org`.
fn ca_and_clients(
    cns: &[&str],
    org: &str,
) -> (
    String,
    Vec<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) {
    let mut ca = CertificateParams::default();
    ca.distinguished_name = rcgen::DistinguishedName::new();
    ca.distinguished_name
        .push(DnType::CommonName, "front-proxy-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let clients = cns
        .iter()
        .map(|cn| {
            let mut leaf = CertificateParams::default();
            leaf.distinguished_name = rcgen::DistinguishedName::new();
            leaf.distinguished_name.push(DnType::CommonName, *cn);
            leaf.distinguished_name.push(DnType::OrganizationName, org);
            leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
            let key = KeyPair::generate().unwrap();
            let cert = leaf.signed_by(&key, &issuer).unwrap();
            let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
            (vec![cert.der().clone()], key)
        })
        .collect();
    (ca_pem, clients)
}

#[tokio::test]
async fn front_proxy_headers_authenticate_only_from_an_allowed_front_proxy_certificate() {
    let server = TestServer::start().await;
    server.reviews().allow("proxied-group", "get", "/metrics");
    server.reviews().allow("mallory", "get", "/metrics");
    let (proxy_ca, mut proxies) =
        ca_and_clients(&["front-proxy-client", "not-allowed"], "front-proxies");
    let (stranger_chain, stranger_key) = proxies.pop().unwrap();
    let (proxy_chain, proxy_key) = proxies.pop().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("front-proxy-ca.crt");
    std::fs::write(&ca_file, &proxy_ca).unwrap();
    let (kcm, addr) = start_secure(
        &server,
        &[
            "--authentication-skip-lookup",
            &arg("--requestheader-client-ca-file", &ca_file),
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-uid-headers=X-Remote-Uid",
        ],
    );
    wait_serving(&Client::insecure(None), addr, &kcm).await;
    let headers = "X-Remote-User: mallory\r\nX-Remote-Group: proxied-group\r\nX-Remote-Uid: u-7\r\nX-Remote-Extra-Scopes: read\r\n";

    // Spoofed headers from a client without the front-proxy certificate are ignored.
    let spoofer = Client::insecure(None);
    assert_eq!(
        spoofer
            .get_with(addr, "/metrics", headers)
            .await
            .map(|r| r.0),
        Some(401)
    );

    let proxy = Client::insecure(Some((proxy_chain, proxy_key)));
    let (status, _) = proxy.get_with(addr, "/metrics", headers).await.unwrap();
    assert_eq!(status, 200);
    let review = last_access_review(&server);
    assert_eq!(review["spec"]["user"], "mallory");
    assert_eq!(review["spec"]["uid"], "u-7");
    assert_eq!(
        review["spec"]["groups"],
        serde_json::json!(["proxied-group", "system:authenticated"])
    );
    assert_eq!(
        review["spec"]["extra"],
        serde_json::json!({ "scopes": ["read"] })
    );
    assert_eq!(reviews_of(&server, "tokenreviews"), 0);

    // The same CA, a CN not in --requestheader-allowed-names: headers ignored.
    let stranger = Client::insecure(Some((stranger_chain, stranger_key)));
    assert_eq!(
        stranger
            .get_with(addr, "/metrics", headers)
            .await
            .map(|r| r.0),
        Some(401)
    );
}

#[tokio::test]
async fn front_proxy_settings_and_client_ca_follow_the_configmap() {
    let server = TestServer::start().await;
    server.reviews().allow("carol", "get", "/metrics");
    let (proxy_ca, mut proxies) = ca_and_clients(&["aggregator"], "front-proxies");
    let (proxy_chain, proxy_key) = proxies.pop().unwrap();
    let configmap = |data: serde_json::Value| {
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": "extension-apiserver-authentication", "namespace": "kube-system" },
            "data": data,
        })
    };
    server
        .seed(configmap(serde_json::json!({
            "requestheader-client-ca-file": proxy_ca,
            "requestheader-allowed-names": "[\"aggregator\"]",
            "requestheader-username-headers": "[\"X-Proxied-User\"]",
            "requestheader-group-headers": "[]",
            "requestheader-extra-headers-prefix": "[]",
        })))
        .unwrap();
    let (kcm, addr) = start_secure(&server, &[]);
    wait_serving(&Client::insecure(None), addr, &kcm).await;
    let proxy = Client::insecure(Some((proxy_chain, proxy_key)));
    assert_eq!(
        proxy
            .get_with(addr, "/metrics", "X-Proxied-User: carol\r\n")
            .await
            .map(|r| r.0),
        Some(200)
    );
    assert_eq!(
        proxy
            .get_with(addr, "/metrics", "X-Remote-User: carol\r\n")
            .await
            .map(|r| r.0),
        Some(401),
        "only the ConfigMap's headers count"
    );

    // The API server publishes a client CA: its certificates are accepted without a restart.
    let (client_ca, chain, key) = client_identity("carol", "ops");
    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(server.client(), "kube-system");
    configmaps
        .patch(
            "extension-apiserver-authentication",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                serde_json::json!({ "data": { "client-ca-file": client_ca } }),
            ),
        )
        .await
        .unwrap();
    let carol = Client::insecure(Some((chain, key)));
    eventually("the new client CA is in use", DEADLINE, || async {
        carol.status(addr, "/metrics", None).await == Some(200)
    })
    .await;
    assert_eq!(
        server.count(|r| r.info.resource == "configmaps" && r.code == 403),
        0,
        "the watch stays within extension-apiserver-authentication-reader"
    );
}

#[tokio::test]
async fn a_failed_lookup_stops_the_start_unless_tolerated() {
    let server = TestServer::start().await;
    let reader_denied = |server: &TestServer| {
        server.authorize(Box::new(|info, _| {
            if info.resource == "configmaps" {
                Err("configmaps is forbidden".to_string())
            } else {
                Ok(())
            }
        }));
    };
    reader_denied(&server);
    let port = free_port();
    let kubeconfig = server.kubeconfig_path().display().to_string();
    let base = [
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--leader-elect=false".into(),
        "--controllers=ttl".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
    ];
    let kcm = Kcm::start(&base);
    let (code, log) = kcm.exit().await;
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("unable to load configmap based request-header-client-ca-file"),
        "{log}"
    );

    let mut tolerant = base.to_vec();
    tolerant.push("--authentication-tolerate-lookup-failure".into());
    let kcm = Kcm::start(&tolerant);
    wait_serving(&Client::insecure(None), ([127, 0, 0, 1], port).into(), &kcm).await;
    assert!(
        kcm.log()
            .contains("Continuing without authentication configuration"),
        "{}",
        kcm.log()
    );
}

#[tokio::test]
async fn permit_port_sharing_lets_another_socket_bind_the_port() {
    let server = TestServer::start().await;
    let (kcm, addr) = start_secure(
        &server,
        &["--authentication-skip-lookup", "--permit-port-sharing"],
    );
    wait_serving(&Client::insecure(None), addr, &kcm).await;
    let shared = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    shared.set_reuse_port(true).unwrap();
    shared
        .bind(&addr.into())
        .expect("SO_REUSEPORT on both sides");
    drop(kcm);

    let (kcm, addr) = start_secure(&server, &["--authentication-skip-lookup"]);
    wait_serving(&Client::insecure(None), addr, &kcm).await;
    let refused = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    refused.set_reuse_port(true).unwrap();
    assert!(refused.bind(&addr.into()).is_err());
}

#[tokio::test]
async fn a_rotated_client_ca_file_is_trusted_without_restart_and_a_broken_one_is_not() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("client-ca.crt");
    let (old_ca, old_chain, old_key) = client_identity("old-admin", "system:masters");
    std::fs::write(&ca_file, &old_ca).unwrap();
    let (kcm, addr) = start_secure(
        &server,
        &[
            "--authentication-skip-lookup",
            &arg("--client-ca-file", &ca_file),
        ],
    );
    let old = Client::insecure(Some((old_chain, old_key)));
    wait_serving(&old, addr, &kcm).await;
    assert_eq!(old.status(addr, "/metrics", None).await, Some(200));

    let (new_ca, new_chain, new_key) = client_identity("new-admin", "system:masters");
    let staged = dir.path().join(".staged");
    std::fs::write(&staged, &new_ca).unwrap();
    std::fs::rename(&staged, &ca_file).unwrap();
    let new = Client::insecure(Some((new_chain, new_key)));
    eventually("the new client CA is trusted", DEADLINE, || async {
        new.status(addr, "/metrics", None).await == Some(200)
    })
    .await;
    assert_ne!(old.status(addr, "/metrics", None).await, Some(200));

    std::fs::write(&staged, "not a certificate").unwrap();
    std::fs::rename(&staged, &ca_file).unwrap();
    let counted = format!(
        "kcm_serving_reload_errors_total{{file=\"{}\"}} 1",
        ca_file.display()
    );
    eventually("the broken CA is reported", DEADLINE, || async {
        new.get(addr, "/metrics", None)
            .await
            .is_some_and(|(status, body)| status == 200 && body.contains(&counted))
    })
    .await;
    assert!(
        kcm.log()
            .contains(&format!("{} holds no certificate", ca_file.display())),
        "{}",
        kcm.log()
    );
}

/// `path` on the secure port: 401 without credentials, 403 with the authorizer's message for
/// `denied-token` (user `intruder`); returns what `allowed-token` gets (200).
async fn guarded(client: &Client, addr: SocketAddr, path: &str) -> String {
    assert_eq!(client.status(addr, path, None).await, Some(401), "{path}");
    let (status, body) = client.get(addr, path, Some("denied-token")).await.unwrap();
    assert_eq!(status, 403, "{path}");
    assert!(
        body.starts_with(&format!(
            "forbidden: User \"intruder\" cannot get path \"{path}\""
        )),
        "{body}"
    );
    let (status, body) = client.get(addr, path, Some("allowed-token")).await.unwrap();
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// `--profiling` (on by default, as upstream): Go's `/debug/pprof/` paths, each authorized by
/// a SubjectAccessReview of its path, as `/metrics` is.
#[tokio::test]
async fn pprof_is_served_behind_the_same_authorization_as_metrics() {
    let server = TestServer::start().await;
    server
        .reviews()
        .add_token("allowed-token", "profiler", &["profilers"]);
    server.reviews().add_token("denied-token", "intruder", &[]);
    for path in ["/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile"] {
        server.reviews().allow("profilers", "get", path);
    }
    let (kcm, addr) = start_secure(&server, &["--authentication-skip-lookup"]);
    let client = Client::insecure(None);
    wait_serving(&client, addr, &kcm).await;

    let heap = guarded(&client, addr, "/debug/pprof/heap").await;
    let (status, index) = client
        .get(addr, "/debug/pprof/", Some("allowed-token"))
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert!(
        index.contains("profile") && index.contains("heap"),
        "{index}"
    );
    let allocated: u64 = heap
        .lines()
        .find_map(|line| line.strip_prefix("# allocated = "))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no allocated bytes in {heap}"));
    assert!(allocated > 0, "{heap}");
    // kcm hands freed pages back after 1 s, not jemalloc's 10 (`opt.` is the start-up value).
    assert!(
        heap.contains("# arenas.dirty_decay_ms = 1000\n")
            && heap.contains("# opt.dirty_decay_ms = 10000\n"),
        "{heap}"
    );
    let (status, profile) = client
        .get_bytes(
            addr,
            "/debug/pprof/profile?seconds=1",
            "Authorization: Bearer allowed-token\r\n",
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&profile));
    // pprof's protobuf, as `go tool pprof` reads it.
    use pprof::protos::Message;
    let profile = pprof::protos::Profile::decode(profile.as_slice()).expect("a pprof profile");
    let types: Vec<&str> = profile
        .sample_type
        .iter()
        .map(|sample| profile.string_table[sample.ty as usize].as_str())
        .collect();
    assert_eq!(types, ["samples", "cpu"]);
}

#[tokio::test]
async fn profiling_false_serves_no_pprof() {
    let server = TestServer::start().await;
    let kcm = kcm_testsupport::Kcm::start(
        server.kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--controllers=ttl",
            "--profiling=false",
        ],
    );
    eventually("plain HTTP", DEADLINE, || async {
        kcm.get("/healthz").await.is_some_and(|(s, _)| s == 200)
    })
    .await;
    assert_eq!(
        kcm.get("/debug/pprof/heap").await.map(|(s, _)| s),
        Some(404)
    );
    assert_eq!(kcm.get("/metrics").await.map(|(s, _)| s), Some(200));
}

/// `/debug/explain/…` answers from the leader's stores behind the same authorization as
/// `/metrics`: a SubjectAccessReview of its path.
#[tokio::test]
async fn explain_is_served_behind_the_same_authorization_as_metrics() {
    let server = TestServer::start().await;
    server
        .seed(
            serde_json::json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": "n1" } }),
        )
        .unwrap();
    let path = "/debug/explain/node/n1";
    server
        .reviews()
        .add_token("allowed-token", "operator", &["operators"]);
    server.reviews().add_token("denied-token", "intruder", &[]);
    server.reviews().allow("operators", "get", path);
    let (kcm, addr) = start_secure(&server, &["--authentication-skip-lookup"]);
    let client = Client::insecure(None);
    wait_serving(&client, addr, &kcm).await;
    eventually("the node's TTL explained", DEADLINE, || async {
        let (status, body) = client.get(addr, path, Some("allowed-token")).await.unwrap();
        status == 200 && body.starts_with("Node n1: in sync; next: keep the annotation\n")
    })
    .await;
    let body = guarded(&client, addr, path).await;
    assert!(body.contains("1 nodes: TTL 0s"), "{body}");
}
