//! TLS for the secure port: the serving certificate (given, or self-signed at start as
//! kube-controller-manager does), the client-CA verification, and an axum listener that
//! completes handshakes off the accept loop and hands each connection over with the identity
//! of its verified client certificate. All TLS is rustls (ring provider, as kube's client).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::auth::User;

/// Upstream's `PairName` for kube-controller-manager: `<cert-dir>/kube-controller-manager.{crt,key}`.
pub const PAIR_NAME: &str = "kube-controller-manager";

/// A client that does not finish its handshake in this time is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{0} holds no certificate")]
    NoCertificate(String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot generate the self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("client CA: {0}")]
    ClientCa(#[from] rustls::server::VerifierBuilderError),
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The serving certificate chain and its key.
pub struct ServingCert {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl ServingCert {
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let read = |path: &Path| {
            let path = path.to_path_buf();
            move |source| TlsError::Read { path, source }
        };
        let chain = CertificateDer::pem_file_iter(cert)
            .map_err(read(cert))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(read(cert))?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate(cert.display().to_string()));
        }
        let key = PrivateKeyDer::from_pem_file(key).map_err(read(key))?;
        Ok(Self { chain, key })
    }

    /// What upstream's `MaybeDefaultWithSelfSignedCerts("localhost", nil, [127.0.0.1])` makes:
    /// a CA `localhost-ca@<unix>` and a server certificate `localhost@<unix>` it signs, valid
    /// from an hour ago for a year, for `localhost`, `127.0.0.1` and the bind address (when it
    /// is not 0.0.0.0/::). With `cert_dir` the pair is kept in `<cert_dir>/kube-controller-manager.{crt,key}`
    /// and reused by the next start; without it, it lives in memory only. Upstream uses RSA
    /// 2048; ring cannot generate RSA keys, so these are ECDSA P-256.
    pub fn self_signed(bind: std::net::IpAddr, cert_dir: Option<&Path>) -> Result<Self, TlsError> {
        let files = cert_dir.map(|dir| {
            (
                dir.join(format!("{PAIR_NAME}.crt")),
                dir.join(format!("{PAIR_NAME}.key")),
            )
        });
        if let Some((cert, key)) = &files
            && cert.exists()
            && key.exists()
        {
            tracing::info!(cert = %cert.display(), key = %key.display(), "using the self-signed certificate from --cert-dir");
            return Self::from_files(cert, key);
        }
        let (cert_pem, key_pem) = generate_self_signed(bind)?;
        if let Some((cert, key)) = &files {
            write(cert, &cert_pem, 0o644)?;
            write(key, &key_pem, 0o600)?;
            tracing::info!(cert = %cert.display(), key = %key.display(), "generated a self-signed certificate");
        } else {
            tracing::info!("generated a self-signed certificate in memory");
        }
        let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| TlsError::Read {
                path: "generated certificate".into(),
                source,
            })?;
        let key =
            PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|source| TlsError::Read {
                path: "generated key".into(),
                source,
            })?;
        Ok(Self { chain, key })
    }
}

fn write(path: &Path, contents: &str, mode: u32) -> Result<(), TlsError> {
    let fail = |source| TlsError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    use std::io::Write;
    options
        .open(path)
        .and_then(|mut f| f.write_all(contents.as_bytes()))
        .map_err(fail)
}

/// (certificate chain PEM: server then CA, key PEM), as upstream's certutil writes them.
fn generate_self_signed(bind: std::net::IpAddr) -> Result<(String, String), TlsError> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose, SanType,
    };
    let host = "localhost";
    let now = time::OffsetDateTime::now_utc();
    let valid_from = now - time::Duration::HOUR;
    let valid_to = valid_from + time::Duration::days(365);
    let unix = now.unix_timestamp();

    let mut ca = CertificateParams::default();
    ca.distinguished_name = rcgen::DistinguishedName::new();
    ca.distinguished_name
        .push(DnType::CommonName, format!("{host}-ca@{unix}"));
    ca.not_before = valid_from;
    ca.not_after = valid_to;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
    ];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;

    let mut names = vec![SanType::DnsName(host.try_into()?)];
    let mut ips = vec![std::net::IpAddr::from([127, 0, 0, 1])];
    if !bind.is_unspecified() && !ips.contains(&bind) {
        ips.push(bind);
    }
    names.extend(ips.into_iter().map(SanType::IpAddress));
    let mut server = CertificateParams::default();
    server.distinguished_name = rcgen::DistinguishedName::new();
    server
        .distinguished_name
        .push(DnType::CommonName, format!("{host}@{unix}"));
    server.not_before = valid_from;
    server.not_after = valid_to;
    server.subject_alt_names = names;
    server.key_usages = vec![
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::DigitalSignature,
    ];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate()?;
    let issuer = Issuer::new(ca, ca_key);
    let server_cert = server.signed_by(&server_key, &issuer)?;
    Ok((
        format!("{}{}", server_cert.pem(), ca_cert.pem()),
        server_key.serialize_pem(),
    ))
}

/// Parses a PEM bundle of CA certificates (`--client-ca-file`, or the cluster's
/// `extension-apiserver-authentication` ConfigMap).
pub fn parse_ca_bundle(what: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Read {
            path: what.into(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(what.to_string()));
    }
    Ok(certs)
}

/// The rustls server configuration: HTTP/1.1, and with a client CA, client certificates are
/// requested and verified against it but not required (bearer tokens need none).
pub fn server_config(
    cert: ServingCert,
    client_ca: Option<Vec<CertificateDer<'static>>>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        Some(cas) => {
            let mut roots = RootCertStore::empty();
            for ca in cas {
                roots.add(ca)?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(cert.chain, cert.key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The remote end of a TLS connection: its address and, when it presented a certificate the
/// client CA verified, the user that certificate names.
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    pub certificate_user: Option<User>,
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, TlsListener>) -> Self {
        stream.remote_addr().clone()
    }
}

/// Upstream's x509 `CommonNameUserConversion`: the subject's CN is the user name, its
/// organizations are the groups. A certificate without a CN names no one.
fn certificate_user(stream: &TlsStream<TcpStream>) -> Option<User> {
    let der = stream.get_ref().1.peer_certificates()?.first()?;
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    if name.is_empty() {
        return None;
    }
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect();
    Some(User {
        name,
        uid: String::new(),
        groups,
        extra: Default::default(),
    })
}

/// A TCP listener whose connections arrive TLS-terminated. Handshakes run in their own tasks,
/// so a slow or silent client never holds up the others.
pub struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, Peer)>,
}

impl TlsListener {
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, ready) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (tcp, addr) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %err, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    return;
                }
                let acceptor = acceptor.clone();
                let handed = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let peer = Peer {
                                addr,
                                certificate_user: certificate_user(&tls),
                            };
                            let _ = handed.send((tls, peer)).await;
                        }
                        Ok(Err(err)) => {
                            tracing::debug!(client = %addr, error = %err, "TLS handshake failed");
                        }
                        Err(_) => tracing::debug!(client = %addr, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Self { local, ready })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = Peer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop only ends when this receiver is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(Peer {
            addr: self.local,
            certificate_user: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_certificate_names_localhost_and_the_bind_address_as_upstream() {
        let (cert_pem, key_pem) = generate_self_signed("10.0.0.7".parse().unwrap()).unwrap();
        let chain = parse_ca_bundle("generated", cert_pem.as_bytes()).unwrap();
        assert_eq!(chain.len(), 2, "server certificate, then its CA");
        let (_, server) = x509_parser::parse_x509_certificate(&chain[0]).unwrap();
        let (_, ca) = x509_parser::parse_x509_certificate(&chain[1]).unwrap();
        let cn = |c: &x509_parser::certificate::X509Certificate<'_>| {
            c.subject()
                .iter_common_name()
                .next()
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        };
        assert!(cn(&server).starts_with("localhost@"), "{}", cn(&server));
        assert!(cn(&ca).starts_with("localhost-ca@"), "{}", cn(&ca));
        assert_eq!(server.issuer(), ca.subject());
        assert!(ca.is_ca());
        let sans = server.subject_alternative_name().unwrap().unwrap();
        let names: Vec<String> = sans
            .value
            .general_names
            .iter()
            .map(|n| n.to_string())
            .collect();
        // x509-parser prints IP addresses as hex bytes: 127.0.0.1, then 10.0.0.7.
        assert_eq!(
            names,
            [
                "DNSName(localhost)",
                "IPAddress(7f:00:00:01)",
                "IPAddress(0a:00:00:07)"
            ]
        );
        let validity = server.validity().time_to_expiration().unwrap();
        assert!(validity.whole_days() >= 364 && validity.whole_days() <= 365);
        assert!(PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).is_ok());
    }

    #[test]
    fn the_self_signed_pair_is_kept_in_cert_dir_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let unspecified = "0.0.0.0".parse().unwrap();
        let first = ServingCert::self_signed(unspecified, Some(dir.path())).unwrap();
        let cert = dir.path().join("kube-controller-manager.crt");
        let key = dir.path().join("kube-controller-manager.key");
        assert!(cert.exists() && key.exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&key).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let second = ServingCert::self_signed(unspecified, Some(dir.path())).unwrap();
        assert_eq!(
            first.chain, second.chain,
            "the second start reuses the pair"
        );
    }

    #[test]
    fn a_bundle_without_certificates_is_an_error() {
        let err = parse_ca_bundle("--client-ca-file", b"not a certificate").unwrap_err();
        assert_eq!(err.to_string(), "--client-ca-file holds no certificate");
    }
}
