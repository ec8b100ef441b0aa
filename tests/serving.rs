//! Secure serving over real HTTPS: the kcm binary against kube-testserver, which answers the
//! TokenReviews and SubjectAccessReviews from the tables each test sets.

mod common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use common::{DEADLINE, eventually, free_port};
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
}

impl Kcm {
    fn start(args: &[String]) -> Self {
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_kcm"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .expect("kcm starts");
        Self { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
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
    use kcm::runtime::rbac::{AUTH_DELEGATOR, AUTHENTICATION_READER, allows};
    let cluster: Vec<_> = AUTH_DELEGATOR.iter().map(|r| r.policy_rule()).collect();
    let reader: Vec<_> = AUTHENTICATION_READER
        .iter()
        .map(|r| r.policy_rule())
        .collect();
    server.authorize(Box::new(move |info, _| {
        let request = common::rbac_request(info);
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
        let config = match identity {
            Some((chain, key)) => builder.with_client_auth_cert(chain, key).unwrap(),
            None => builder.with_no_client_auth(),
        };
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

    /// `GET path` over a fresh TLS connection: (status, body), or `None` when the connection
    /// or handshake fails.
    async fn get(
        &self,
        addr: SocketAddr,
        path: &str,
        token: Option<&str>,
    ) -> Option<(u16, String)> {
        let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = connector.connect(name, tcp).await.ok()?;
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n");
        tls.write_all(request.as_bytes()).await.ok()?;
        let mut raw = Vec::new();
        // A server that refused the client certificate ends the connection here.
        tls.read_to_end(&mut raw).await.ok()?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n")?;
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((status, body.to_string()))
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
    assert!(common::http_get(10258, "/healthz").await.is_none());
    let plain = common::http_get(10257, "/healthz").await;
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

    assert_eq!(client.status(addr, "/metrics", None).await, Some(401));
    assert_eq!(
        client.status(addr, "/metrics", Some("unknown")).await,
        Some(401)
    );
    let (status, body) = client
        .get(addr, "/metrics", Some("denied-token"))
        .await
        .unwrap();
    assert_eq!(status, 403);
    assert!(
        body.starts_with("forbidden: User \"intruder\" cannot get path \"/metrics\""),
        "{body}"
    );
    let (status, body) = client
        .get(addr, "/metrics", Some("allowed-token"))
        .await
        .unwrap();
    assert_eq!(status, 200);
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
    let review = server
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.info.resource == "subjectaccessreviews")
        .and_then(|r| r.body)
        .unwrap();
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
    let mut ca = CertificateParams::default();
    ca.distinguished_name = rcgen::DistinguishedName::new();
    ca.distinguished_name
        .push(DnType::CommonName, "test-client-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let mut leaf = CertificateParams::default();
    leaf.distinguished_name = rcgen::DistinguishedName::new();
    leaf.distinguished_name.push(DnType::CommonName, cn);
    leaf.distinguished_name.push(DnType::OrganizationName, org);
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &Issuer::new(ca, ca_key)).unwrap();
    let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
    (ca_pem, vec![cert.der().clone()], key)
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
    let status = tokio::task::spawn_blocking(move || {
        let mut kcm = kcm;
        let status = kcm.child.wait().unwrap();
        (status, kcm.log())
    })
    .await
    .unwrap();
    assert_eq!(status.0.code(), Some(1), "{}", status.1);
    assert!(status.1.contains("/nonexistent/tls.crt"), "{}", status.1);
}

/// Plain HTTP only where asked for: `--port` alone serves no HTTPS.
#[tokio::test]
async fn port_alone_serves_plain_http_only() {
    let server = TestServer::start().await;
    let kcm = common::Kcm::start(
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

    assert_eq!(
        client.status(addr, "/debug/pprof/heap", None).await,
        Some(401)
    );
    let (status, body) = client
        .get(addr, "/debug/pprof/heap", Some("denied-token"))
        .await
        .unwrap();
    assert_eq!(status, 403);
    assert!(
        body.starts_with("forbidden: User \"intruder\" cannot get path \"/debug/pprof/heap\""),
        "{body}"
    );

    let (status, index) = client
        .get(addr, "/debug/pprof/", Some("allowed-token"))
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert!(
        index.contains("profile") && index.contains("heap"),
        "{index}"
    );
    let (status, heap) = client
        .get(addr, "/debug/pprof/heap", Some("allowed-token"))
        .await
        .unwrap();
    assert_eq!(status, 200, "{heap}");
    let allocated: u64 = heap
        .lines()
        .find_map(|line| line.strip_prefix("# allocated = "))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no allocated bytes in {heap}"));
    assert!(allocated > 0, "{heap}");
    let (status, profile) = client
        .get(
            addr,
            "/debug/pprof/profile?seconds=1",
            Some("allowed-token"),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{profile}");
    assert!(!profile.is_empty(), "a protobuf profile");
}

#[tokio::test]
async fn profiling_false_serves_no_pprof() {
    let server = TestServer::start().await;
    let kcm = common::Kcm::start(
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
