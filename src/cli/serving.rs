//! Upstream's Secure serving, Authentication and Authorization sections, plus kcm's
//! plain-HTTP `--port`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values::{GoDuration, Int32List, go_int, go_int32_list, go_ip};
use super::{CliError, GO_BOOL};
use crate::serving::options::{
    self as tls_options, NamedCertKey, RequestHeaderOptions, TlsOptions,
};
use crate::settings::SecureServing;

/// kube-controller-manager's `--secure-port` default.
pub const DEFAULT_SECURE_PORT: u16 = 10257;

const SECURE_PORT_HELP: &str = "Port of the HTTPS listener (/metrics and /debug/pprof/ need a \
client certificate or bearer token the API server authenticates and authorizes; the \
always-allowed paths need nothing); 0 disables it. Off by default when --port is given \
[default: 10257]";

/// The HTTPS listener and who may use it.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Secure serving, authentication and authorization flags")]
pub struct ServingFlags {
    /// Address the secure port (and --port) listen on; 0.0.0.0 or :: for all interfaces
    #[arg(long, value_name = "IP", value_parser = go_ip, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,

    #[arg(long, value_name = "PORT", value_parser = go_int, help = SECURE_PORT_HELP)]
    pub secure_port: Option<i64>,

    /// Directory of the self-signed serving certificate (kube-controller-manager.crt/.key),
    /// generated at start when missing; unset keeps it in memory. Ignored with --tls-cert-file
    #[arg(long, value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,

    /// PEM serving certificate (then intermediates) for the secure port; with
    /// --tls-private-key-file. Without both, a self-signed certificate is generated
    #[arg(long, value_name = "PATH")]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key of --tls-cert-file
    #[arg(long, value_name = "PATH")]
    pub tls_private_key_file: Option<PathBuf>,

    /// Client certificates signed by these CAs authenticate as their CommonName (groups:
    /// Organizations). Without it, the cluster's extension-apiserver-authentication ConfigMap
    /// is read (unless skipped, see below)
    #[arg(long, value_name = "PATH")]
    pub client_ca_file: Option<PathBuf>,

    /// kubeconfig allowed to create tokenreviews.authentication.k8s.io; unset: the in-cluster
    /// config, else bearer tokens are refused
    #[arg(long, value_name = "PATH")]
    pub authentication_kubeconfig: Option<PathBuf>,

    /// kubeconfig allowed to create subjectaccessreviews.authorization.k8s.io; unset: the
    /// in-cluster config, else only the always-allowed paths are served
    #[arg(long, value_name = "PATH")]
    pub authorization_kubeconfig: Option<PathBuf>,

    /// Do not look up the client CA in the cluster (--client-ca-file stays in effect)
    #[arg(long, value_name = GO_BOOL, default_value_t = false)]
    pub authentication_skip_lookup: bool,

    /// How long TokenReview answers are cached
    #[arg(long, value_name = "DURATION", default_value_t = GoDuration(Duration::from_secs(10)))]
    pub authentication_token_webhook_cache_ttl: GoDuration,

    /// How long 'authorized' SubjectAccessReview answers are cached
    #[arg(long, value_name = "DURATION", default_value_t = GoDuration(Duration::from_secs(10)))]
    pub authorization_webhook_cache_authorized_ttl: GoDuration,

    /// How long 'unauthorized' SubjectAccessReview answers are cached
    #[arg(long, value_name = "DURATION", default_value_t = GoDuration(Duration::from_secs(10)))]
    pub authorization_webhook_cache_unauthorized_ttl: GoDuration,

    /// Paths served on the secure port without authentication or authorization, comma-separated;
    /// a trailing '*' matches a prefix
    #[arg(
        long,
        value_name = "PATHS",
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez"
    )]
    pub authorization_always_allow_paths: Vec<String>,

    /// Port of a plain-HTTP listener without TLS or authentication, for development (kcm's
    /// own flag); off unless given (0 also off). With it, the secure port runs only if
    /// --secure-port is given
    #[arg(long, value_name = "PORT", value_parser = go_int)]
    pub port: Option<i64>,

    /// Cipher suites (Go names), comma-separated; TLS 1.3 suites are always on, as in Go.
    /// Empty: rustls's defaults. Supported: TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,
    /// TLS_CHACHA20_POLY1305_SHA256, TLS_ECDHE_{ECDSA,RSA}_WITH_AES_{128_GCM_SHA256,256_GCM_SHA384},
    /// TLS_ECDHE_{ECDSA,RSA}_WITH_CHACHA20_POLY1305_SHA256
    #[arg(long, value_name = "SUITES", value_delimiter = ',')]
    pub tls_cipher_suites: Vec<String>,

    /// Minimum TLS version: VersionTLS12 (default) or VersionTLS13
    #[arg(long, value_name = "VERSION", default_value = "")]
    pub tls_min_version: String,

    /// Key-exchange curves by Go CurveID, comma-separated: 23 (P-256), 24 (P-384), 29 (X25519)
    #[arg(long, value_name = "IDS", value_parser = go_int32_list)]
    pub tls_curve_preferences: Vec<Int32List>,

    /// `cert,key[:name1,name2]`: a certificate served to clients asking for those names (else
    /// the certificate's own) by SNI; repeatable
    #[arg(long, value_name = "CERT,KEY[:NAMES]")]
    pub tls_sni_cert_key: Vec<NamedCertKey>,

    /// SO_REUSEADDR on the secure port's socket
    #[arg(long, value_name = GO_BOOL, default_value_t = false)]
    pub permit_address_sharing: bool,

    /// SO_REUSEPORT on the secure port's socket, so several processes can bind it
    #[arg(long, value_name = GO_BOOL, default_value_t = false)]
    pub permit_port_sharing: bool,

    /// HTTP/2 streams a client may open on one connection; 0: upstream's default, 100
    #[arg(long, value_name = "N", value_parser = go_int, default_value_t = 0)]
    pub http2_max_streams_per_connection: i64,

    /// Serve HTTP/1.1 only
    #[arg(long, value_name = GO_BOOL, default_value_t = false)]
    pub disable_http2_serving: bool,

    /// CA bundle verifying front proxies' client certificates; with it, the headers below name
    /// the user. Unset: all the requestheader settings come from the cluster's
    /// extension-apiserver-authentication ConfigMap (unless --authentication-skip-lookup)
    #[arg(long, value_name = "PATH")]
    pub requestheader_client_ca_file: Option<PathBuf>,

    /// Front-proxy certificate CNs allowed to name users in headers; empty: any the CA verifies
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,

    /// Headers naming the user (the first non-empty wins)
    #[arg(
        long,
        value_name = "HEADERS",
        value_delimiter = ',',
        default_value = "x-remote-user"
    )]
    pub requestheader_username_headers: Vec<String>,

    /// Headers naming the user's groups
    #[arg(
        long,
        value_name = "HEADERS",
        value_delimiter = ',',
        default_value = "x-remote-group"
    )]
    pub requestheader_group_headers: Vec<String>,

    /// Header prefixes whose headers carry the user's extras
    #[arg(
        long,
        value_name = "PREFIXES",
        value_delimiter = ',',
        default_value = "x-remote-extra-"
    )]
    pub requestheader_extra_headers_prefix: Vec<String>,

    /// Headers naming the user's UID
    #[arg(long, value_name = "HEADERS", value_delimiter = ',')]
    pub requestheader_uid_headers: Vec<String>,

    /// Start even when the cluster lookup of the client CA and front-proxy settings fails
    #[arg(long, value_name = GO_BOOL, default_value_t = false)]
    pub authentication_tolerate_lookup_failure: bool,
}

/// A pflag string slice given as `--flag=` is empty, not one empty string.
fn non_empty(values: &[String]) -> Vec<String> {
    match values {
        [only] if only.is_empty() => Vec::new(),
        _ => values.to_vec(),
    }
}

/// A port flag's value: 0 to 65535 (upstream's check of `--secure-port`).
fn port(flag: &'static str, value: i64) -> Result<u16, CliError> {
    u16::try_from(value).map_err(|_| CliError::PortRange { flag, value })
}

impl ServingFlags {
    /// The plain-HTTP listener: only with `--port` not 0.
    pub(super) fn http_listener(&self) -> Result<Option<SocketAddr>, CliError> {
        let Some(value) = self.port else {
            return Ok(None);
        };
        let port = port("--port", value)?;
        Ok((port != 0).then(|| SocketAddr::new(self.bind_address, port)))
    }

    pub(super) fn secure_serving(&self) -> Result<Option<SecureServing>, CliError> {
        // Plain HTTP asked for (development): HTTPS only when asked for too.
        let port = match (self.secure_port, self.port) {
            (Some(value), _) => port("--secure-port", value)?,
            (None, Some(_)) => 0,
            (None, None) => DEFAULT_SECURE_PORT,
        };
        if port == 0 {
            return Ok(None);
        }
        let cert_key = match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
            (None, None) => None,
            _ => return Err(CliError::TlsPairIncomplete),
        };
        let always_allow_paths: Vec<String> = self
            .authorization_always_allow_paths
            .iter()
            .filter(|p| !p.is_empty())
            .cloned()
            .collect();
        if let Some(path) = always_allow_paths
            .iter()
            .find(|p| p.find('*').is_some_and(|at| at != p.len() - 1))
        {
            return Err(CliError::AlwaysAllowPathWildcard { path: path.clone() });
        }
        let curves: Vec<i32> = self
            .tls_curve_preferences
            .iter()
            .flat_map(|list| list.0.iter().copied())
            .collect();
        let tls = TlsOptions {
            cipher_suites: tls_options::parse_cipher_suites(&self.tls_cipher_suites)?,
            min_version: tls_options::parse_min_version(&self.tls_min_version)?,
            curve_preferences: tls_options::parse_curves(&curves)?,
            sni_cert_keys: self.tls_sni_cert_key.clone(),
            permit_address_sharing: self.permit_address_sharing,
            permit_port_sharing: self.permit_port_sharing,
            http2_max_streams_per_connection: tls_options::parse_http2_max_streams(
                self.http2_max_streams_per_connection,
            )?,
            disable_http2: self.disable_http2_serving,
        };
        let request_header = RequestHeaderOptions {
            client_ca_file: self.requestheader_client_ca_file.clone(),
            allowed_names: non_empty(&self.requestheader_allowed_names),
            username_headers: non_empty(&self.requestheader_username_headers),
            uid_headers: non_empty(&self.requestheader_uid_headers),
            group_headers: non_empty(&self.requestheader_group_headers),
            extra_headers_prefix: non_empty(&self.requestheader_extra_headers_prefix),
        }
        .checked()?;
        Ok(Some(SecureServing {
            addr: SocketAddr::new(self.bind_address, port),
            cert_dir: self.cert_dir.clone(),
            cert_key,
            client_ca_file: self.client_ca_file.clone(),
            authentication_kubeconfig: self.authentication_kubeconfig.clone(),
            authorization_kubeconfig: self.authorization_kubeconfig.clone(),
            authentication_skip_lookup: self.authentication_skip_lookup,
            tolerate_lookup_failure: self.authentication_tolerate_lookup_failure,
            tls,
            request_header,
            token_cache_ttl: self.authentication_token_webhook_cache_ttl.0,
            authorized_cache_ttl: self.authorization_webhook_cache_authorized_ttl.0,
            unauthorized_cache_ttl: self.authorization_webhook_cache_unauthorized_ttl.0,
            always_allow_paths,
        }))
    }
}
