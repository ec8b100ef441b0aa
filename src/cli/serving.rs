//! Upstream's Secure serving, Authentication and Authorization sections, plus kcm's
//! plain-HTTP `--port`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values::{
    GoDuration, Int32List, NamedCertKey, go_int, go_int32_list, go_ip, named_cert_key,
};
use super::{CliError, GO_BOOL};
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

    #[command(flatten)]
    pub unused: UnusedServingFlags,
}

unused_flags! {
    /// TLS tuning, HTTP/2 (kcm serves HTTP/1.1) and front-proxy request headers.
    #[command(next_help_heading = "Secure serving and authentication flags accepted, not used by kcm")]
    pub struct UnusedServingFlags {
        disable_http2_serving: bool = "false", value_name = GO_BOOL;
        http2_max_streams_per_connection: i64 = "0", value_parser = go_int;
        permit_address_sharing: bool = "false", value_name = GO_BOOL;
        permit_port_sharing: bool = "false", value_name = GO_BOOL;
        tls_cipher_suites: Vec<String> = "[]", value_delimiter = ',';
        tls_curve_preferences: Vec<Int32List> = "[]", value_parser = go_int32_list;
        tls_min_version: String = "\"\"";
        tls_sni_cert_key: Vec<NamedCertKey> = "[]", value_parser = named_cert_key;
        authentication_tolerate_lookup_failure: bool = "false", value_name = GO_BOOL;
        requestheader_allowed_names: Vec<String> = "[]", value_delimiter = ',';
        requestheader_client_ca_file: String = "\"\"";
        requestheader_extra_headers_prefix: Vec<String> = "[x-remote-extra-]", value_delimiter = ',';
        requestheader_group_headers: Vec<String> = "[x-remote-group]", value_delimiter = ',';
        requestheader_uid_headers: Vec<String> = "[]", value_delimiter = ',';
        requestheader_username_headers: Vec<String> = "[x-remote-user]", value_delimiter = ',';
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
        Ok(Some(SecureServing {
            addr: SocketAddr::new(self.bind_address, port),
            cert_dir: self.cert_dir.clone(),
            cert_key,
            client_ca_file: self.client_ca_file.clone(),
            authentication_kubeconfig: self.authentication_kubeconfig.clone(),
            authorization_kubeconfig: self.authorization_kubeconfig.clone(),
            authentication_skip_lookup: self.authentication_skip_lookup,
            token_cache_ttl: self.authentication_token_webhook_cache_ttl.0,
            authorized_cache_ttl: self.authorization_webhook_cache_authorized_ttl.0,
            unauthorized_cache_ttl: self.authorization_webhook_cache_unauthorized_ttl.0,
            always_allow_paths,
        }))
    }
}
