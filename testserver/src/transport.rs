//! The server's connections: plain HTTP, or HTTPS as a cluster's API server serves it
//! ([`crate::Options::tls`]), and a log of every accepted TCP connection, so a test or bench
//! can tell whether a client reuses its connections or opens one per request.
//!
//! Under TLS the server has a CA of its own that signs the serving certificate (for
//! 127.0.0.1 and localhost) and the admin's client certificate its kubeconfig carries. A
//! client certificate is requested, not required (bearer tokens need none); one the CA signed
//! authenticates as the API server's x509 authenticator reads it: the subject's CN is the
//! user, its organizations are the groups. ALPN offers HTTP/2 and HTTP/1.1.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::reviews::{SUPERUSERS, UserInfo};

/// A handshake that has not finished by then is dropped, so a silent client holds nothing.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// One accepted TCP connection.
#[derive(Debug, Clone)]
pub struct Connection {
    pub peer: SocketAddr,
    pub tls: bool,
    /// The user agent of its first request; empty until one came.
    pub user_agent: String,
    /// Whether its first request came over HTTP/2.
    pub http2: bool,
}

/// Every connection the server accepted, in order.
#[derive(Default)]
pub(crate) struct Connections {
    log: Mutex<Vec<Connection>>,
}

impl Connections {
    fn lock(&self) -> MutexGuard<'_, Vec<Connection>> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn opened(&self, peer: SocketAddr, tls: bool) -> usize {
        let mut log = self.lock();
        log.push(Connection {
            peer,
            tls,
            user_agent: String::new(),
            http2: false,
        });
        log.len() - 1
    }

    /// Notes the first request on connection `id`.
    pub(crate) fn request(&self, id: usize, user_agent: &str, http2: bool) {
        if let Some(conn) = self.lock().get_mut(id)
            && conn.user_agent.is_empty()
        {
            conn.user_agent = user_agent.to_string();
            conn.http2 = http2;
        }
    }

    pub(crate) fn all(&self) -> Vec<Connection> {
        self.lock().clone()
    }
}

/// What a request knows of its connection (axum's `ConnectInfo`).
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub id: usize,
    /// Who its client certificate names, when it sent one the server's CA signed.
    pub certificate_user: Option<UserInfo>,
}

impl Connected<IncomingStream<'_, Listener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Listener>) -> Self {
        stream.remote_addr().clone()
    }
}

/// A plain or TLS stream.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

type Handshake = Pin<Box<dyn Future<Output = Option<(Box<dyn Io>, Peer)>> + Send>>;

/// axum's listener over TCP, TLS or not: it logs each connection and runs TLS handshakes
/// side by side, so one slow client never holds up the others' connections.
pub(crate) struct Listener {
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
    handshakes: FuturesUnordered<Handshake>,
    connections: Arc<Connections>,
}

impl Listener {
    pub fn new(tcp: TcpListener, tls: Option<&Credentials>, connections: Arc<Connections>) -> Self {
        Self {
            tcp,
            tls: tls.map(|c| TlsAcceptor::from(c.server_config.clone())),
            handshakes: FuturesUnordered::new(),
            connections,
        }
    }

    fn handshake(&self, stream: TcpStream, peer: SocketAddr) -> Handshake {
        let _ = stream.set_nodelay(true);
        let id = self.connections.opened(peer, self.tls.is_some());
        let Some(acceptor) = self.tls.clone() else {
            let plain = Peer {
                id,
                certificate_user: None,
            };
            return Box::pin(async move { Some((Box::new(stream) as Box<dyn Io>, plain)) });
        };
        Box::pin(async move {
            let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                .await
                .ok()?
                .inspect_err(|err| tracing::debug!(%peer, %err, "TLS handshake failed"))
                .ok()?;
            let certificate_user = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(certificate_user);
            let peer = Peer {
                id,
                certificate_user,
            };
            Some((Box::new(stream) as Box<dyn Io>, peer))
        })
    }
}

impl axum::serve::Listener for Listener {
    type Io = Box<dyn Io>;
    type Addr = Peer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                accepted = self.tcp.accept() => match accepted {
                    Ok((stream, peer)) => self.handshakes.push(self.handshake(stream, peer)),
                    // Out of file descriptors and the like: as axum's own listener, wait.
                    Err(err) => {
                        tracing::error!(%err, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(done) = self.handshakes.next(), if !self.handshakes.is_empty() => {
                    if let Some(ready) = done {
                        return ready;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(Peer {
            id: usize::MAX,
            certificate_user: None,
        })
    }
}

/// The API server's x509 authenticator: the subject's CN is the user name, its organizations
/// are the groups; a certificate without a CN names no one.
fn certificate_user(der: &CertificateDer<'_>) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?;
    if name.is_empty() {
        return None;
    }
    let groups: Vec<&str> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .collect();
    Some(UserInfo::new(name, &groups))
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("client certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

impl From<TlsError> for std::io::Error {
    fn from(err: TlsError) -> Self {
        std::io::Error::other(err)
    }
}

/// The certificates of a TLS server and its kubeconfig.
pub(crate) struct Credentials {
    pub ca_pem: String,
    /// The admin's client certificate and key (CN `system:admin`, O `system:masters`).
    pub admin_cert_pem: String,
    pub admin_key_pem: String,
    server_config: Arc<rustls::ServerConfig>,
}

impl Credentials {
    pub fn generate() -> Result<Self, TlsError> {
        use rcgen::{
            BasicConstraints, CertificateParams, DistinguishedName, DnType,
            ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let named = |cn: &str, orgs: &[&str]| {
            let mut params = CertificateParams::default();
            params.distinguished_name = DistinguishedName::new();
            params.distinguished_name.push(DnType::CommonName, cn);
            for org in orgs {
                params
                    .distinguished_name
                    .push(DnType::OrganizationName, *org);
            }
            params
        };
        let mut ca = named("kube-testserver-ca", &[]);
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let mut server = named("kube-testserver", &[]);
        server.subject_alt_names = vec![
            SanType::DnsName("localhost".try_into()?),
            SanType::IpAddress([127, 0, 0, 1].into()),
        ];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate()?;
        let server_cert = server.signed_by(&server_key, &issuer)?;

        // The admin of [`UserInfo::admin`], as a client certificate names it.
        let mut client = named(&UserInfo::admin().name, &[SUPERUSERS]);
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_key = KeyPair::generate()?;
        let client_cert = client.signed_by(&client_key, &issuer)?;

        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca_cert.der().clone())?;
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![server_cert.der().clone()], key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Self {
            ca_pem: ca_cert.pem(),
            admin_cert_pem: client_cert.pem(),
            admin_key_pem: client_key.serialize_pem(),
            server_config: Arc::new(config),
        })
    }
}
