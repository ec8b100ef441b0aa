//! The secure port's settings (`SecureServing`), and its TLS and front-proxy parts, as plain
//! data with upstream's value syntax (k8s.io/apiserver's `SecureServingOptions`,
//! `RequestHeaderAuthenticationOptions`, and component-base's cipher-suite, TLS-version and
//! namedCertKey flags), checked when parsed.
//!
//! kcm's TLS is rustls with the ring provider, which implements fewer suites, versions and
//! curves than Go's crypto/tls: a value Go accepts but rustls lacks is refused with a message
//! that names what kcm supports, rather than silently weakened or ignored.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The secure port and its delegated authentication and authorization, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureServing {
    pub addr: SocketAddr,
    /// `None`: the self-signed certificate stays in memory.
    pub cert_dir: Option<PathBuf>,
    /// `--tls-cert-file` and `--tls-private-key-file`; `None`: self-signed.
    pub cert_key: Option<(PathBuf, PathBuf)>,
    pub client_ca_file: Option<PathBuf>,
    pub authentication_kubeconfig: Option<PathBuf>,
    pub authorization_kubeconfig: Option<PathBuf>,
    pub authentication_skip_lookup: bool,
    pub tolerate_lookup_failure: bool,
    pub tls: TlsOptions,
    pub request_header: RequestHeaderOptions,
    pub token_cache_ttl: Duration,
    pub authorized_cache_ttl: Duration,
    pub unauthorized_cache_ttl: Duration,
    pub always_allow_paths: Vec<String>,
}

/// Go's `tls.CipherSuites()` (the secure list): TLS 1.3, ECDHE with CBC-SHA, ECDHE with AEAD.
const GO_SECURE: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
];

/// Go's `tls.InsecureCipherSuites()`: RC4, 3DES, CBC-SHA256 and RSA key exchange.
const GO_INSECURE: &[&str] = &[
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// A cipher suite kcm serves: Go's name (component-base's spelling) and rustls's suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CipherSuite {
    Tls13Aes128GcmSha256,
    Tls13Aes256GcmSha384,
    Tls13Chacha20Poly1305Sha256,
    EcdheEcdsaAes128GcmSha256,
    EcdheEcdsaAes256GcmSha384,
    EcdheEcdsaChacha20Poly1305Sha256,
    EcdheRsaAes128GcmSha256,
    EcdheRsaAes256GcmSha384,
    EcdheRsaChacha20Poly1305Sha256,
}

impl CipherSuite {
    pub const ALL: [CipherSuite; 9] = [
        Self::Tls13Aes128GcmSha256,
        Self::Tls13Aes256GcmSha384,
        Self::Tls13Chacha20Poly1305Sha256,
        Self::EcdheEcdsaAes128GcmSha256,
        Self::EcdheEcdsaAes256GcmSha384,
        Self::EcdheEcdsaChacha20Poly1305Sha256,
        Self::EcdheRsaAes128GcmSha256,
        Self::EcdheRsaAes256GcmSha384,
        Self::EcdheRsaChacha20Poly1305Sha256,
    ];

    /// Go's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tls13Aes128GcmSha256 => "TLS_AES_128_GCM_SHA256",
            Self::Tls13Aes256GcmSha384 => "TLS_AES_256_GCM_SHA384",
            Self::Tls13Chacha20Poly1305Sha256 => "TLS_CHACHA20_POLY1305_SHA256",
            Self::EcdheEcdsaAes128GcmSha256 => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            Self::EcdheEcdsaAes256GcmSha384 => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            Self::EcdheEcdsaChacha20Poly1305Sha256 => {
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
            }
            Self::EcdheRsaAes128GcmSha256 => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            Self::EcdheRsaAes256GcmSha384 => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            Self::EcdheRsaChacha20Poly1305Sha256 => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        }
    }

    /// TLS 1.3 suites: Go does not let `--tls-cipher-suites` restrict them (its
    /// `Config.CipherSuites` applies to TLS 1.0-1.2 only), so neither does kcm.
    pub fn is_tls13(self) -> bool {
        matches!(
            self,
            Self::Tls13Aes128GcmSha256
                | Self::Tls13Aes256GcmSha384
                | Self::Tls13Chacha20Poly1305Sha256
        )
    }

    /// Go's name, or one of the two legacy names component-base still accepts.
    fn parse(name: &str) -> Result<Self, CipherSuiteRefusal> {
        let canonical = match name {
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => {
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
            }
            other => other,
        };
        if let Some(suite) = Self::ALL.into_iter().find(|s| s.name() == canonical) {
            return Ok(suite);
        }
        Err(if GO_INSECURE.contains(&name) {
            CipherSuiteRefusal::Insecure
        } else if GO_SECURE.contains(&name) {
            CipherSuiteRefusal::NotInRustls
        } else {
            CipherSuiteRefusal::Unknown
        })
    }
}

/// Why a `--tls-cipher-suites` value is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CipherSuiteRefusal {
    /// Upstream's own refusal.
    Unknown,
    /// Go implements it but lists it as insecure; rustls implements none of those.
    Insecure,
    /// A CBC-SHA suite Go still lists as secure; rustls implements only AEAD suites.
    NotInRustls,
}

impl fmt::Display for CipherSuiteRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unknown => "not supported or doesn't exist",
            Self::Insecure => "insecure, and not implemented by kcm's TLS library (rustls)",
            Self::NotInRustls => {
                "a CBC suite, not implemented by kcm's TLS library (rustls implements AEAD suites only)"
            }
        })
    }
}

/// `--tls-min-version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsVersion {
    /// Upstream's default (`DefaultTLSVersion`).
    #[default]
    Tls12,
    Tls13,
}

/// A `--tls-curve-preferences` entry: Go's `tls.CurveID` that rustls's ring provider has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Curve {
    P256,
    P384,
    X25519,
}

impl Curve {
    const ALL: [(i32, &'static str, Option<Curve>); 7] = [
        (23, "CurveP256", Some(Curve::P256)),
        (24, "CurveP384", Some(Curve::P384)),
        (25, "CurveP521", None),
        (29, "X25519", Some(Curve::X25519)),
        (4587, "SecP256r1MLKEM768", None),
        (4588, "X25519MLKEM768", None),
        (4589, "SecP384r1MLKEM1024", None),
    ];

    fn supported_list() -> String {
        Self::ALL
            .iter()
            .filter(|(_, _, c)| c.is_some())
            .map(|(id, name, _)| format!("{id} ({name})"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One `--tls-sni-cert-key`: `cert,key[:name1,name2]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedCertKey {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Empty: the certificate's own names (CN and DNS SANs).
    pub names: Vec<String>,
}

impl std::str::FromStr for NamedCertKey {
    type Err = String;

    /// component-base's `NamedCertKey.Set`, with its messages.
    fn from_str(value: &str) -> Result<Self, String> {
        let (pair, names) = match value.split_once(':') {
            Some((pair, names)) => {
                let names = names.trim();
                if names.is_empty() {
                    return Err("empty names list is not allowed".into());
                }
                (
                    pair,
                    names.split(',').map(|n| n.trim().to_string()).collect(),
                )
            }
            None => (value, Vec::new()),
        };
        let files: Vec<&str> = pair.trim().split(',').collect();
        let [cert, key] = files[..] else {
            return Err("expected comma separated certificate and key file paths".into());
        };
        Ok(Self {
            cert: cert.trim().into(),
            key: key.trim().into(),
            names,
        })
    }
}

/// What `--tls-*`, `--permit-*-sharing` and the HTTP/2 flags ask of the secure port.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsOptions {
    /// `None`: rustls's defaults (all [`CipherSuite::ALL`]).
    pub cipher_suites: Option<Vec<CipherSuite>>,
    pub min_version: TlsVersion,
    /// `None`: rustls's defaults (X25519, P-256, P-384).
    pub curve_preferences: Option<Vec<Curve>>,
    pub sni_cert_keys: Vec<NamedCertKey>,
    /// SO_REUSEADDR.
    pub permit_address_sharing: bool,
    /// SO_REUSEPORT.
    pub permit_port_sharing: bool,
    /// As upstream: 0 means the default, 100 streams.
    pub http2_max_streams_per_connection: u32,
    pub disable_http2: bool,
}

/// Upstream's HTTP/2 stream limit when `--http2-max-streams-per-connection` is 0: the
/// client's initial limit, so a misbehaving client can open few streams (golang/net's fix
/// for CVE-2023-44487).
pub const DEFAULT_HTTP2_MAX_STREAMS: u32 = 100;

impl TlsOptions {
    pub fn http2_max_streams(&self) -> u32 {
        match self.http2_max_streams_per_connection {
            0 => DEFAULT_HTTP2_MAX_STREAMS,
            n => n,
        }
    }
}

/// A TLS flag value kcm cannot honour.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsOptionError {
    #[error(
        "--tls-cipher-suites: {name}: {why}; kcm supports {}",
        CipherSuite::ALL.map(CipherSuite::name).join(", ")
    )]
    CipherSuite {
        name: String,
        why: CipherSuiteRefusal,
    },
    #[error(
        "--tls-min-version={value}: TLS 1.0 and 1.1 are not available in kcm (rustls implements TLS 1.2 and 1.3 only); use VersionTLS12 or VersionTLS13"
    )]
    ObsoleteVersion { value: String },
    #[error(
        "--tls-min-version: unknown tls version {value:?}; possible values: VersionTLS12, VersionTLS13"
    )]
    UnknownVersion { value: String },
    #[error(
        "--tls-curve-preferences: {id} ({name}) is not supported by kcm's TLS library (rustls with ring); supported: {}",
        Curve::supported_list()
    )]
    UnsupportedCurve { id: i32, name: &'static str },
    #[error(
        "--tls-curve-preferences: unknown curve ID {id}; supported: {}",
        Curve::supported_list()
    )]
    UnknownCurve { id: i32 },
    #[error("--http2-max-streams-per-connection must not be negative, got {value}")]
    NegativeStreams { value: i64 },
}

/// `--tls-cipher-suites`: `None` when empty (the defaults).
pub fn parse_cipher_suites(names: &[String]) -> Result<Option<Vec<CipherSuite>>, TlsOptionError> {
    let names: Vec<&str> = names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    names
        .into_iter()
        .map(|name| {
            CipherSuite::parse(name).map_err(|why| TlsOptionError::CipherSuite {
                name: name.to_string(),
                why,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `--tls-min-version`: empty is upstream's default, TLS 1.2.
pub fn parse_min_version(value: &str) -> Result<TlsVersion, TlsOptionError> {
    match value {
        "" | "VersionTLS12" => Ok(TlsVersion::Tls12),
        "VersionTLS13" => Ok(TlsVersion::Tls13),
        "VersionTLS10" | "VersionTLS11" => Err(TlsOptionError::ObsoleteVersion {
            value: value.to_string(),
        }),
        _ => Err(TlsOptionError::UnknownVersion {
            value: value.to_string(),
        }),
    }
}

/// `--tls-curve-preferences`: `None` when empty (the defaults).
pub fn parse_curves(ids: &[i32]) -> Result<Option<Vec<Curve>>, TlsOptionError> {
    if ids.is_empty() {
        return Ok(None);
    }
    ids.iter()
        .map(
            |&id| match Curve::ALL.iter().find(|(known, _, _)| *known == id) {
                Some((_, _, Some(curve))) => Ok(*curve),
                Some((_, name, None)) => Err(TlsOptionError::UnsupportedCurve { id, name }),
                None => Err(TlsOptionError::UnknownCurve { id }),
            },
        )
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `--http2-max-streams-per-connection` (a Go int).
pub fn parse_http2_max_streams(value: i64) -> Result<u32, TlsOptionError> {
    if value < 0 {
        return Err(TlsOptionError::NegativeStreams { value });
    }
    Ok(u32::try_from(value).unwrap_or(u32::MAX))
}

/// Front-proxy (request-header) authentication from the flags. With `client_ca_file`
/// unset, all of it comes from the cluster's `extension-apiserver-authentication` ConfigMap
/// instead (unless `--authentication-skip-lookup`), as upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaderOptions {
    pub client_ca_file: Option<PathBuf>,
    /// Empty: any certificate the CA verifies.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_headers_prefix: Vec<String>,
}

impl Default for RequestHeaderOptions {
    /// Upstream's defaults (`NewDelegatingAuthenticationOptions`).
    fn default() -> Self {
        Self {
            client_ca_file: None,
            allowed_names: Vec::new(),
            username_headers: vec!["x-remote-user".into()],
            uid_headers: Vec::new(),
            group_headers: vec!["x-remote-group".into()],
            extra_headers_prefix: vec!["x-remote-extra-".into()],
        }
    }
}

/// A `--requestheader-*` list with a blank entry (upstream's `checkForWhiteSpaceOnly`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("empty value in \"{flag}\"")]
pub struct BlankRequestHeaderValue {
    pub flag: &'static str,
}

impl RequestHeaderOptions {
    /// Trims every entry and refuses blank ones, as upstream's validation; warns, as upstream
    /// does, when a list leaves out the standard header API aggregation relies on.
    pub fn checked(mut self) -> Result<Self, BlankRequestHeaderValue> {
        let lists: [(&'static str, &mut Vec<String>, Option<&str>); 5] = [
            (
                "requestheader-username-headers",
                &mut self.username_headers,
                Some("X-Remote-User"),
            ),
            (
                "requestheader-group-headers",
                &mut self.group_headers,
                Some("X-Remote-Group"),
            ),
            (
                "requestheader-extra-headers-prefix",
                &mut self.extra_headers_prefix,
                Some("X-Remote-Extra-"),
            ),
            ("requestheader-allowed-names", &mut self.allowed_names, None),
            (
                "requestheader-uid-headers",
                &mut self.uid_headers,
                Some("X-Remote-Uid"),
            ),
        ];
        for (flag, list, standard) in lists {
            for entry in list.iter_mut() {
                *entry = entry.trim().to_string();
                if entry.is_empty() {
                    return Err(BlankRequestHeaderValue { flag });
                }
            }
            if let Some(standard) = standard
                && !list.is_empty()
                && !list.iter().any(|h| h.eq_ignore_ascii_case(standard))
            {
                tracing::warn!(
                    "--{flag} is set without specifying the standard {standard} header - API aggregation will not work"
                );
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cipher_suites_take_go_names_and_refuse_what_rustls_lacks_naming_the_supported_ones() {
        assert_eq!(parse_cipher_suites(&[]), Ok(None));
        assert_eq!(
            parse_cipher_suites(&strings(&[
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
                "TLS_AES_256_GCM_SHA384"
            ])),
            Ok(Some(vec![
                CipherSuite::EcdheRsaAes128GcmSha256,
                CipherSuite::EcdheEcdsaChacha20Poly1305Sha256,
                CipherSuite::Tls13Aes256GcmSha384
            ]))
        );
        let supported = "kcm supports TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, \
TLS_CHACHA20_POLY1305_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, \
TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, \
TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, \
TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256";
        for (name, why) in [
            (
                "TLS_RSA_WITH_RC4_128_SHA",
                "insecure, and not implemented by kcm's TLS library (rustls)",
            ),
            (
                "TLS_RSA_WITH_AES_128_GCM_SHA256",
                "insecure, and not implemented by kcm's TLS library (rustls)",
            ),
            (
                "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
                "a CBC suite, not implemented by kcm's TLS library (rustls implements AEAD suites only)",
            ),
            ("TLS_FOO", "not supported or doesn't exist"),
        ] {
            let err = parse_cipher_suites(&strings(&["TLS_AES_128_GCM_SHA256", name])).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("--tls-cipher-suites: {name}: {why}; {supported}")
            );
        }
    }

    #[test]
    fn min_version_is_tls12_or_tls13() {
        assert_eq!(parse_min_version(""), Ok(TlsVersion::Tls12));
        assert_eq!(parse_min_version("VersionTLS12"), Ok(TlsVersion::Tls12));
        assert_eq!(parse_min_version("VersionTLS13"), Ok(TlsVersion::Tls13));
        assert_eq!(
            parse_min_version("VersionTLS11").unwrap_err().to_string(),
            "--tls-min-version=VersionTLS11: TLS 1.0 and 1.1 are not available in kcm (rustls implements TLS 1.2 and 1.3 only); use VersionTLS12 or VersionTLS13"
        );
        assert_eq!(
            parse_min_version("TLS1.2").unwrap_err().to_string(),
            "--tls-min-version: unknown tls version \"TLS1.2\"; possible values: VersionTLS12, VersionTLS13"
        );
    }

    #[test]
    fn curves_are_go_curve_ids() {
        assert_eq!(parse_curves(&[]), Ok(None));
        assert_eq!(
            parse_curves(&[29, 23, 24]),
            Ok(Some(vec![Curve::X25519, Curve::P256, Curve::P384]))
        );
        assert_eq!(
            parse_curves(&[25]).unwrap_err().to_string(),
            "--tls-curve-preferences: 25 (CurveP521) is not supported by kcm's TLS library (rustls with ring); supported: 23 (CurveP256), 24 (CurveP384), 29 (X25519)"
        );
        assert_eq!(
            parse_curves(&[7]).unwrap_err().to_string(),
            "--tls-curve-preferences: unknown curve ID 7; supported: 23 (CurveP256), 24 (CurveP384), 29 (X25519)"
        );
    }

    #[test]
    fn named_cert_keys_have_upstreams_syntax() {
        let parsed: NamedCertKey = "a.crt, a.key : *.foo.com, foo.com".parse().unwrap();
        assert_eq!(
            parsed,
            NamedCertKey {
                cert: "a.crt".into(),
                key: "a.key".into(),
                names: strings(&["*.foo.com", "foo.com"]),
            }
        );
        let bare: NamedCertKey = "b.crt,b.key".parse().unwrap();
        assert!(bare.names.is_empty());
        assert_eq!(
            "b.crt,b.key:".parse::<NamedCertKey>().unwrap_err(),
            "empty names list is not allowed"
        );
        assert_eq!(
            "b.crt".parse::<NamedCertKey>().unwrap_err(),
            "expected comma separated certificate and key file paths"
        );
    }

    #[test]
    fn http2_streams_default_to_upstreams_100() {
        let mut options = TlsOptions::default();
        assert_eq!(options.http2_max_streams(), 100);
        options.http2_max_streams_per_connection = 1000;
        assert_eq!(options.http2_max_streams(), 1000);
        assert_eq!(parse_http2_max_streams(0), Ok(0));
        assert_eq!(parse_http2_max_streams(250), Ok(250));
        assert!(parse_http2_max_streams(-1).is_err());
    }

    #[test]
    fn request_header_lists_are_trimmed_and_blank_entries_refused() {
        let options = RequestHeaderOptions {
            username_headers: strings(&[" X-Remote-User "]),
            ..Default::default()
        }
        .checked()
        .unwrap();
        assert_eq!(options.username_headers, ["X-Remote-User"]);
        let err = RequestHeaderOptions {
            group_headers: strings(&["x-remote-group", " "]),
            ..Default::default()
        }
        .checked()
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "empty value in \"requestheader-group-headers\""
        );
    }
}
