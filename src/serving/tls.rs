//! TLS for the secure port: the serving certificate (given, or self-signed at start as
//! kube-controller-manager does), SNI certificates, client-certificate verification against
//! the client CA and the front-proxy (request-header) CA, and the TLS settings of the
//! `--tls-*` flags. A [`TlsConfig`] is one complete configuration; reloads build a new one and
//! swap it in ([`Current`]), so new connections get the new certificates and CAs while open
//! ones keep theirs. All TLS is rustls (ring provider, as kube's client).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, ServerConnection, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use super::identity::{HeaderNames, Peer, User};
use super::options::{CipherSuite, Curve, TlsOptions, TlsVersion};
use crate::lock::lock;

/// Upstream's `PairName` for kube-controller-manager: `<cert-dir>/kube-controller-manager.{crt,key}`.
pub const PAIR_NAME: &str = "kube-controller-manager";

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} holds no certificate")]
    NoCertificate(String),
    #[error("private key {path}: {source}")]
    Key {
        path: PathBuf,
        source: rustls::Error,
    },
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

/// A certificate chain and its key, parsed.
pub struct ServingCert {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// Where the serving certificate comes from.
pub enum ServingSource {
    /// `--tls-cert-file`/`--tls-private-key-file`, or the pair kept in `--cert-dir`: reloaded
    /// when the files change.
    Files(PathBuf, PathBuf),
    /// Generated at start and kept in memory only.
    Generated(ServingCert),
}

/// Reads a file whole, for parsing and for noticing that it changed.
pub fn read_file(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    })
}

impl ServingCert {
    /// A PEM chain (leaf first) and a PEM private key: PKCS#1 or PKCS#8 RSA, SEC1 or PKCS#8
    /// ECDSA, or PKCS#8 Ed25519.
    pub fn from_pem(
        cert: &Path,
        cert_pem: &[u8],
        key: &Path,
        key_pem: &[u8],
    ) -> Result<Self, TlsError> {
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| TlsError::Read {
                path: cert.to_path_buf(),
                source,
            })?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate(cert.display().to_string()));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|source| TlsError::Read {
            path: key.to_path_buf(),
            source,
        })?;
        Ok(Self { chain, key })
    }

    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        Self::from_pem(cert, &read_file(cert)?, key, &read_file(key)?)
    }

    /// The chain with its signing key; refuses a key that does not match the certificate.
    pub fn certified(self, key_path: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
        CertifiedKey::from_der(
            self.chain,
            self.key,
            &rustls::crypto::ring::default_provider(),
        )
        .map(Arc::new)
        .map_err(|source| TlsError::Key {
            path: key_path.to_path_buf(),
            source,
        })
    }

    /// What upstream's `MaybeDefaultWithSelfSignedCerts("localhost", nil, [127.0.0.1])` makes:
    /// a CA `localhost-ca@<unix>` and a server certificate `localhost@<unix>` it signs, valid
    /// from an hour ago for a year, for `localhost`, `127.0.0.1` and the bind address (when it
    /// is not 0.0.0.0/::). With `cert_dir` the pair is kept in `<cert_dir>/kube-controller-manager.{crt,key}`
    /// and reused by the next start (and reloaded like given files, as upstream); without it,
    /// it lives in memory only. Upstream uses RSA 2048; ring cannot generate RSA keys, so
    /// these are ECDSA P-256.
    pub fn self_signed(
        bind: std::net::IpAddr,
        cert_dir: Option<&Path>,
    ) -> Result<ServingSource, TlsError> {
        let files = cert_dir.map(|dir| {
            (
                dir.join(format!("{PAIR_NAME}.crt")),
                dir.join(format!("{PAIR_NAME}.key")),
            )
        });
        if let Some((cert, key)) = files.clone()
            && cert.exists()
            && key.exists()
        {
            tracing::info!(cert = %cert.display(), key = %key.display(), "using the self-signed certificate from --cert-dir");
            return Ok(ServingSource::Files(cert, key));
        }
        let (cert_pem, key_pem) = generate_self_signed(bind)?;
        if let Some((cert, key)) = files {
            write(&cert, &cert_pem, 0o644)?;
            write(&key, &key_pem, 0o600)?;
            tracing::info!(cert = %cert.display(), key = %key.display(), "generated a self-signed certificate");
            return Ok(ServingSource::Files(cert, key));
        }
        tracing::info!("generated a self-signed certificate in memory");
        let generated = Path::new("generated certificate");
        Ok(ServingSource::Generated(Self::from_pem(
            generated,
            cert_pem.as_bytes(),
            generated,
            key_pem.as_bytes(),
        )?))
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

/// Parses a PEM bundle of CA certificates (`--client-ca-file`, `--requestheader-client-ca-file`,
/// or a key of the cluster's `extension-apiserver-authentication` ConfigMap).
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
    // Checked as the trust store will take them, so that a bundle with a malformed
    // certificate is refused here and never becomes part of the material every later
    // configuration is built from.
    let mut roots = RootCertStore::empty();
    for ca in &certs {
        roots.add(ca.clone())?;
    }
    Ok(certs)
}

/// A `--tls-sni-cert-key` certificate with the names it was given (empty: its own).
#[derive(Clone)]
pub struct SniCert {
    pub names: Vec<String>,
    pub key: Arc<CertifiedKey>,
}

/// The front-proxy trust: its CA, and which headers carry the user.
#[derive(Clone)]
pub struct RequestHeader {
    pub ca: Vec<CertificateDer<'static>>,
    pub names: Arc<HeaderNames>,
}

/// The certificates and CAs in force, loaded; [`TlsConfig::build`] turns them into a
/// configuration.
#[derive(Clone)]
pub struct Material {
    pub serving: Arc<CertifiedKey>,
    pub sni: Vec<SniCert>,
    pub client_ca: Option<Vec<CertificateDer<'static>>>,
    pub request_header: Option<RequestHeader>,
}

/// One complete TLS configuration, built: rustls's, and the verifiers that tell what a client
/// certificate is. A connection keeps the one it was accepted with, so its client certificate
/// is classified against the CAs its handshake checked.
pub struct TlsConfig {
    pub rustls: Arc<rustls::ServerConfig>,
    client_ca: Option<Arc<dyn ClientCertVerifier>>,
    front_proxy: Option<(Arc<dyn ClientCertVerifier>, Arc<HeaderNames>)>,
}

/// The configuration new connections use; reloads replace it.
pub type Current = Arc<Mutex<Arc<TlsConfig>>>;

pub fn current(config: TlsConfig) -> Current {
    Arc::new(Mutex::new(Arc::new(config)))
}

pub fn load(current: &Current) -> Arc<TlsConfig> {
    lock(current).clone()
}

pub fn swap(current: &Current, config: TlsConfig) {
    *lock(current) = Arc::new(config);
}

/// ring's provider narrowed to `--tls-cipher-suites` (TLS 1.2 suites only: Go always offers
/// all TLS 1.3 suites) and ordered by `--tls-curve-preferences`.
fn provider(options: &TlsOptions) -> CryptoProvider {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(wanted) = &options.cipher_suites {
        provider.cipher_suites.retain(|suite| {
            matches!(suite, rustls::SupportedCipherSuite::Tls13(_))
                || wanted
                    .iter()
                    .any(|w| !w.is_tls13() && rustls_suite(*w) == suite.suite())
        });
    }
    if let Some(curves) = &options.curve_preferences {
        let available = std::mem::take(&mut provider.kx_groups);
        provider.kx_groups = curves
            .iter()
            .filter_map(|curve| {
                available
                    .iter()
                    .find(|group| group.name() == named_group(*curve))
                    .copied()
            })
            .collect();
    }
    provider
}

fn rustls_suite(suite: CipherSuite) -> rustls::CipherSuite {
    use rustls::CipherSuite as R;
    match suite {
        CipherSuite::Tls13Aes128GcmSha256 => R::TLS13_AES_128_GCM_SHA256,
        CipherSuite::Tls13Aes256GcmSha384 => R::TLS13_AES_256_GCM_SHA384,
        CipherSuite::Tls13Chacha20Poly1305Sha256 => R::TLS13_CHACHA20_POLY1305_SHA256,
        CipherSuite::EcdheEcdsaAes128GcmSha256 => R::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        CipherSuite::EcdheEcdsaAes256GcmSha384 => R::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        CipherSuite::EcdheEcdsaChacha20Poly1305Sha256 => {
            R::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        }
        CipherSuite::EcdheRsaAes128GcmSha256 => R::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        CipherSuite::EcdheRsaAes256GcmSha384 => R::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        CipherSuite::EcdheRsaChacha20Poly1305Sha256 => {
            R::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
        }
    }
}

fn named_group(curve: Curve) -> rustls::NamedGroup {
    match curve {
        Curve::P256 => rustls::NamedGroup::secp256r1,
        Curve::P384 => rustls::NamedGroup::secp384r1,
        Curve::X25519 => rustls::NamedGroup::X25519,
    }
}

fn verifier(
    cas: &[CertificateDer<'static>],
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = RootCertStore::empty();
    for ca in cas {
        roots.add(ca.clone())?;
    }
    // Requested, not required: bearer tokens need no certificate.
    Ok(
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .allow_unauthenticated()
            .build()?,
    )
}

impl TlsConfig {
    /// The rustls configuration for `material` under `options`. Client certificates are
    /// requested (not required) when a client CA or front-proxy CA is known, and accepted when
    /// either verifies them; `sessions` is shared across configurations, so reloads keep resumption.
    pub fn build(
        material: &Material,
        options: &TlsOptions,
        sessions: &Arc<dyn rustls::server::StoresServerSessions>,
    ) -> Result<Self, TlsError> {
        let provider = Arc::new(provider(options));
        let versions: &[&rustls::SupportedProtocolVersion] = match options.min_version {
            TlsVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
            TlsVersion::Tls13 => &[&rustls::version::TLS13],
        };
        let client_ca = material
            .client_ca
            .as_deref()
            .map(|cas| verifier(cas, &provider))
            .transpose()?;
        let front_proxy = material
            .request_header
            .as_ref()
            .map(|rh| verifier(&rh.ca, &provider).map(|v| (v, rh.names.clone())))
            .transpose()?;
        let builder = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)?;
        let mut verifiers = client_ca
            .iter()
            .chain(front_proxy.iter().map(|(v, _)| v))
            .cloned();
        let builder = match (verifiers.next(), verifiers.next()) {
            (None, _) => builder.with_no_client_auth(),
            (Some(only), None) => builder.with_client_cert_verifier(only),
            (Some(first), Some(second)) => {
                builder.with_client_cert_verifier(Arc::new(AnyOf::new(first, vec![second])))
            }
        };
        let mut config = builder.with_cert_resolver(Arc::new(SniResolver::new(material)));
        config.alpn_protocols = if options.disable_http2 {
            vec![b"http/1.1".to_vec()]
        } else {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        };
        config.session_storage = sessions.clone();
        Ok(Self {
            rustls: Arc::new(config),
            client_ca,
            front_proxy,
        })
    }

    /// Who the client certificate of `connection` names, and whether it is a front proxy's.
    pub fn peer(&self, addr: SocketAddr, connection: &ServerConnection) -> Peer {
        let mut peer = Peer {
            addr,
            certificate_user: None,
            front_proxy: None,
        };
        let Some((leaf, intermediates)) = connection
            .peer_certificates()
            .and_then(|chain| chain.split_first())
        else {
            return peer;
        };
        let now = UnixTime::now();
        let verified = |verifier: &Arc<dyn ClientCertVerifier>| {
            verifier
                .verify_client_cert(leaf, intermediates, now)
                .is_ok()
        };
        let user = certificate_user(leaf);
        if let Some((verifier, names)) = &self.front_proxy
            && verified(verifier)
        {
            // Upstream's request-header authenticator: the CN must be allowed, when a list is
            // given.
            let cn = user.as_ref().map(|u| u.name.as_str()).unwrap_or_default();
            if names.allowed_names.is_empty() || names.allowed_names.iter().any(|n| n == cn) {
                peer.front_proxy = Some(names.clone());
            } else {
                tracing::debug!(client = %addr, cn, "front-proxy certificate's CN is not in the allowed list");
            }
        }
        if let Some(verifier) = &self.client_ca
            && verified(verifier)
        {
            peer.certificate_user = user;
        }
        peer
    }
}

/// Accepts a client certificate any of its verifiers accepts (the client CA's, the front
/// proxy's), advertising all their CAs.
#[derive(Debug)]
struct AnyOf {
    first: Arc<dyn ClientCertVerifier>,
    others: Vec<Arc<dyn ClientCertVerifier>>,
    hints: Vec<DistinguishedName>,
}

impl AnyOf {
    fn new(first: Arc<dyn ClientCertVerifier>, others: Vec<Arc<dyn ClientCertVerifier>>) -> Self {
        let hints = std::iter::once(&first)
            .chain(&others)
            .flat_map(|v| v.root_hint_subjects().iter().cloned())
            .collect();
        Self {
            first,
            others,
            hints,
        }
    }

    fn first(&self) -> &Arc<dyn ClientCertVerifier> {
        &self.first
    }
}

impl ClientCertVerifier for AnyOf {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let mut result = self
            .first
            .verify_client_cert(end_entity, intermediates, now);
        for verifier in &self.others {
            if result.is_ok() {
                break;
            }
            result = verifier.verify_client_cert(end_entity, intermediates, now);
        }
        result
    }

    // The signature checks are the provider's, the same in every verifier.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.first().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.first().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.first().supported_verify_schemes()
    }
}

/// Picks the certificate by SNI as upstream's dynamic serving certificates do: an exact
/// (lowercased) name, else the name with its first label replaced by `*`, else the default.
#[derive(Debug)]
struct SniResolver {
    default: Arc<CertifiedKey>,
    by_name: HashMap<String, Arc<CertifiedKey>>,
}

impl SniResolver {
    /// Upstream's `getNamedCertificateMap`: names read from the certificates (CN when it is a
    /// DNS name or wildcard, and the DNS SANs; IPs are never SNI) first, then the names given
    /// with the flag, which win; among either kind, earlier flags win.
    fn new(material: &Material) -> Self {
        let mut by_name = HashMap::new();
        for sni in material.sni.iter().rev().filter(|s| s.names.is_empty()) {
            for name in certificate_names(&sni.key) {
                by_name.insert(name.to_ascii_lowercase(), sni.key.clone());
            }
        }
        for sni in material.sni.iter().rev() {
            for name in &sni.names {
                by_name.insert(name.to_ascii_lowercase(), sni.key.clone());
            }
        }
        Self {
            default: material.serving.clone(),
            by_name,
        }
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let Some(name) = hello.server_name() else {
            return Some(self.default.clone());
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let wildcard = match name.split_once('.') {
            Some((_, rest)) => format!("*.{rest}"),
            None => "*".to_string(),
        };
        let chosen = self
            .by_name
            .get(&name)
            .or_else(|| self.by_name.get(&wildcard))
            .unwrap_or(&self.default);
        Some(chosen.clone())
    }
}

/// The CN (when it is a DNS name, possibly wildcarded) and the DNS SANs of a certificate.
fn certificate_names(key: &CertifiedKey) -> Vec<String> {
    let Some(der) = key.cert.first() else {
        return Vec::new();
    };
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    let mut names: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .filter(|cn| *cn == "*" || is_dns_subdomain(cn.strip_prefix("*.").unwrap_or(cn)))
        .map(String::from)
        .collect();
    if let Ok(Some(sans)) = cert.subject_alternative_name() {
        names.extend(sans.value.general_names.iter().filter_map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(dns) => Some(dns.to_string()),
            _ => None,
        }));
    }
    names
}

/// Kubernetes' `IsDNS1123Subdomain`: lowercase alphanumerics, `-` and `.`, starting and
/// ending alphanumeric, at most 253 characters.
fn is_dns_subdomain(name: &str) -> bool {
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    name.len() <= 253
        && edge_ok(name.chars().next())
        && edge_ok(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}

/// Upstream's x509 `CommonNameUserConversion`: the subject's CN is the user name, its
/// organizations are the groups. A certificate without a CN names no one.
fn certificate_user(der: &CertificateDer<'_>) -> Option<User> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_bundle_with_a_malformed_certificate_is_refused_when_read() {
        // Valid PEM, but the DER inside is no certificate: refused here, so a reload keeps
        // the previous CA instead of storing one that breaks every later configuration.
        let pem = "-----BEGIN CERTIFICATE-----\nAAECAwQFBgcICQ==\n-----END CERTIFICATE-----\n";
        let err = parse_ca_bundle("ca.crt", pem.as_bytes()).unwrap_err();
        assert!(matches!(err, TlsError::Config(_)), "{err}");
    }

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
        let cert = dir.path().join("kube-controller-manager.crt");
        let key = dir.path().join("kube-controller-manager.key");
        let files = |source| match source {
            ServingSource::Files(cert, key) => (cert, key),
            ServingSource::Generated(_) => panic!("kept in memory"),
        };
        let first = files(ServingCert::self_signed(unspecified, Some(dir.path())).unwrap());
        assert_eq!(first, (cert.clone(), key.clone()));
        let written = std::fs::read(&cert).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&key).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let second = files(ServingCert::self_signed(unspecified, Some(dir.path())).unwrap());
        assert_eq!(second, first);
        assert_eq!(
            std::fs::read(&cert).unwrap(),
            written,
            "the second start reuses the pair"
        );
        assert!(
            ServingCert::from_files(&cert, &key)
                .unwrap()
                .certified(&key)
                .is_ok()
        );
    }

    #[test]
    fn a_bundle_without_certificates_is_an_error() {
        let err = parse_ca_bundle("--client-ca-file", b"not a certificate").unwrap_err();
        assert_eq!(err.to_string(), "--client-ca-file holds no certificate");
    }
}
