//! Command-line options with kube-controller-manager's flag names, defaults and semantics,
//! so kcm can replace it without changing manifests.
//!
//! [`Options`] is what clap parses; [`Options::validate`] checks what clap cannot (cross-flag
//! rules, controller names, feature gates) and resolves everything into [`Settings`].

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::{Arg, ArgAction, Parser, ValueEnum};

use crate::controllers::{CONTROLLERS, Descriptor};
use crate::runtime::serving;

/// --controllers' help, naming each controller and its aliases as its descriptor does.
fn controllers_help() -> String {
    let names: Vec<String> = Controller::ALL
        .iter()
        .map(|c| format!("{} ({})", c.canonical_name(), c.aliases().join(", ")))
        .collect();
    format!(
        "Controllers to run, comma-separated. '*' enables all; NAME enables and -NAME disables \
         one; the first entry naming a controller wins. Names (aliases in parentheses): {}",
        names.join(", ")
    )
}

const SECURE_PORT_HELP: &str = "Port of the HTTPS listener (/metrics needs a client \
certificate or bearer token the API server authenticates and authorizes; the always-allowed \
paths need nothing); 0 disables it. Off by default when --port is given [default: 10257]";

/// kube-controller-manager's `--secure-port` default.
pub const DEFAULT_SECURE_PORT: u16 = 10257;

const FEATURE_GATES_HELP: &str = "Feature gates as comma-separated NAME=BOOL pairs; may be \
repeated. Known gates: APIServerIdentity (default true), DRAAdminAccess (default true), \
DRAConsumableCapacity (default true), DRADeviceBindingConditions (default true), \
DRAExtendedResource (default true), DRAPrioritizedList (default true), \
DRAResourceClaimGranularStatusAuthorization (default true), DRAWorkloadResourceClaims \
(default false), GenericWorkload (default false), InPlacePodVerticalScaling (default true), \
PodLevelResources (default true), StorageVersionAPI (default false), WatchListClient \
(default true)";

/// kube-controller-manager's command line, as far as kcm's controllers need it.
#[derive(Parser, Debug, Clone)]
// The lint takes each `mut_arg(.., go_bool)` for a repeat of the first.
#[allow(clippy::duplicated_attributes)]
#[command(
    name = "kcm",
    version,
    about = "Kubernetes controller-manager in Rust: a drop-in for kube-controller-manager's \
             resourcequota, resourceclaim, disruption, ttl and \
             storageversion-garbage-collector controllers",
    mut_arg("leader_elect", go_bool),
    mut_arg("authentication_skip_lookup", go_bool),
    mut_arg("authentication_tolerate_lookup_failure", go_bool),
    mut_arg("permit_address_sharing", go_bool),
    mut_arg("permit_port_sharing", go_bool),
    mut_arg("disable_http2_serving", go_bool),
    mut_arg("shadow", go_bool),
    mut_arg("use_service_account_credentials", go_bool)
)]
pub struct Options {
    /// Path to a kubeconfig file; if unset, the in-cluster config is used, else the usual
    /// kubeconfig lookup ($KUBECONFIG, then ~/.kube/config)
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        // pflag takes `--controllers -ttl` as the value, so clap must not read it as a flag.
        allow_hyphen_values = true,
        default_value = "*",
        help = controllers_help()
    )]
    pub controllers: Vec<String>,

    /// Resource quotas synced concurrently (must be > 0)
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub concurrent_resource_quota_syncs: u32,

    /// Period of the full resync of every resource quota; 0 disables it
    #[arg(long, value_name = "DURATION", default_value_t = GoDuration(Duration::from_secs(300)))]
    pub resource_quota_sync_period: GoDuration,

    /// Resource claims synced concurrently (must be > 0)
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub concurrent_resourceclaim_syncs: u32,

    /// Disruption budgets synced concurrently (must be > 0)
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub concurrent_disruption_syncs: u32,

    #[arg(long, value_name = "GATES", help = FEATURE_GATES_HELP)]
    pub feature_gates: Vec<String>,

    /// Elect a leader before running controllers, so replicas can run for high availability
    // A Go bool flag: `go_bool`, set on the command.
    #[arg(long, default_value_t = true)]
    pub leader_elect: bool,

    /// How long non-leaders wait after the last renewal before trying to take the lease
    #[arg(long, value_name = "DURATION", default_value_t = GoDuration(Duration::from_secs(15)))]
    pub leader_elect_lease_duration: GoDuration,

    /// How long the leader keeps retrying to renew before it gives up leadership
    #[arg(long, value_name = "DURATION", default_value_t = GoDuration(Duration::from_secs(10)))]
    pub leader_elect_renew_deadline: GoDuration,

    /// Wait between attempts to acquire or renew the lease
    #[arg(long, value_name = "DURATION", default_value_t = GoDuration(Duration::from_secs(2)))]
    pub leader_elect_retry_period: GoDuration,

    /// Namespace of the leader-election Lease
    #[arg(long, value_name = "NAMESPACE", default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,

    /// Name of the leader-election Lease
    #[arg(long, value_name = "NAME", default_value = "kcm")]
    pub leader_elect_resource_name: String,

    /// Address the secure port (and --port) listen on; 0.0.0.0 or :: for all interfaces
    #[arg(long, value_name = "IP", default_value = "0.0.0.0")]
    pub bind_address: IpAddr,

    #[arg(long, value_name = "PORT", help = SECURE_PORT_HELP)]
    pub secure_port: Option<u16>,

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
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    pub tls_curve_preferences: Vec<i32>,

    /// `cert,key[:name1,name2]`: a certificate served to clients asking for those names (else
    /// the certificate's own) by SNI; repeatable
    #[arg(long, value_name = "CERT,KEY[:NAMES]")]
    pub tls_sni_cert_key: Vec<serving::options::NamedCertKey>,

    /// SO_REUSEADDR on the secure port's socket
    // A Go bool flag: `go_bool`, set on the command.
    #[arg(long, default_value_t = false)]
    pub permit_address_sharing: bool,

    /// SO_REUSEPORT on the secure port's socket, so several processes can bind it
    // A Go bool flag: `go_bool`, set on the command.
    #[arg(long, default_value_t = false)]
    pub permit_port_sharing: bool,

    /// HTTP/2 streams a client may open on one connection; 0: upstream's default, 100
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub http2_max_streams_per_connection: i64,

    /// Serve HTTP/1.1 only
    // A Go bool flag: `go_bool`, set on the command.
    #[arg(long, default_value_t = false)]
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
    // A Go bool flag: `go_bool`, set on the command.
    #[arg(long, default_value_t = false)]
    pub authentication_tolerate_lookup_failure: bool,

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
    // A Go bool flag: `go_bool`, set on the command.
    #[arg(long, default_value_t = false)]
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

    /// Port of a plain-HTTP listener without TLS or authentication, for development; off
    /// unless given (0 also off). With it, the secure port runs only if --secure-port is given
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,

    /// Sustained queries per second to the API server (must be > 0)
    #[arg(long, value_name = "QPS", default_value_t = 20.0)]
    pub kube_api_qps: f32,

    /// Queries allowed in a burst above --kube-api-qps (must be > 0)
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub kube_api_burst: u32,

    /// Compute everything but never write to the API server; implies no leader election
    // A Go bool flag: `go_bool`, set on the command.
    #[arg(long, default_value_t = false)]
    pub shadow: bool,

    /// If true, use individual service account credentials for each controller
    // A Go bool flag: `go_bool`, set on the command.
    #[arg(long, default_value_t = false)]
    pub use_service_account_credentials: bool,

    /// Log line format
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log verbosity level (klog's -v)
    #[arg(short = 'v', long = "v", value_name = "LEVEL", default_value_t = 0)]
    pub verbosity: u8,
}

/// A pflag string slice given as `--flag=` is empty, not one empty string.
fn non_empty(values: &[String]) -> Vec<String> {
    match values {
        [only] if only.is_empty() => Vec::new(),
        _ => values.to_vec(),
    }
}

/// `--log-format` values.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Everything [`Options`] says, checked and resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub kubeconfig: Option<PathBuf>,
    /// Controllers to start, in canonical ([`Controller::ALL`]) order.
    pub enabled_controllers: Vec<Controller>,
    /// Controllers selected by --controllers but not started because a required gate is off,
    /// with the first such gate (kube-controller-manager logs these and carries on).
    pub skipped_for_gates: Vec<(Controller, &'static str)>,
    pub feature_gates: FeatureGates,
    pub concurrent_resource_quota_syncs: NonZeroU32,
    /// `None`: the periodic full resync is disabled (`--resource-quota-sync-period=0`).
    pub resource_quota_sync_period: Option<Duration>,
    pub concurrent_resourceclaim_syncs: NonZeroU32,
    pub concurrent_disruption_syncs: NonZeroU32,
    /// `None` when `--leader-elect=false` or `--shadow`.
    pub leader_election: Option<LeaderElection>,
    /// The plain-HTTP listener: `None` unless `--port` is given and not 0.
    pub http_listener: Option<SocketAddr>,
    /// The HTTPS listener: `None` with `--secure-port=0`, or with `--port` and no `--secure-port`.
    pub secure_serving: Option<SecureServing>,
    /// Finite and > 0.
    pub kube_api_qps: f32,
    pub kube_api_burst: NonZeroU32,
    pub shadow: bool,
    /// Each controller's client authenticates as ServiceAccount `kube-system/<its name>`.
    pub use_service_account_credentials: bool,
    pub log_format: LogFormat,
    pub verbosity: u8,
}

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
    pub tls: serving::options::TlsOptions,
    pub request_header: serving::options::RequestHeaderOptions,
    pub token_cache_ttl: Duration,
    pub authorized_cache_ttl: Duration,
    pub unauthorized_cache_ttl: Duration,
    pub always_allow_paths: Vec<String>,
}

/// Validated leader-election timing (client-go's rules hold) and Lease location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    pub resource_namespace: String,
    pub resource_name: String,
}

/// Why the command line was rejected; the binary prints it and exits 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CliError {
    #[error("{flag} must be greater than 0, got {value}")]
    NotPositive { flag: &'static str, value: String },

    #[error("{flag} must not be empty")]
    Empty { flag: &'static str },

    #[error("malformed pair {pair:?} in --feature-gates, expect NAME=BOOL")]
    MalformedFeatureGatePair { pair: String },

    #[error(
        "unrecognized feature gate: {name} (known gates: {})",
        known_gates_list()
    )]
    UnrecognizedFeatureGate { name: String },

    #[error(
        "invalid value of {name}: {value:?}, expect true or false (known gates: {})",
        known_gates_list()
    )]
    InvalidFeatureGateValue { name: String, value: String },

    #[error(
        "unknown controller(s) in --controllers: {}; valid names: {}",
        quoted_list(.names),
        valid_controller_names_list()
    )]
    UnknownControllers { names: Vec<String> },

    #[error(
        "--leader-elect-lease-duration ({lease_duration}) must be at least 1s: the Lease \
         stores whole seconds"
    )]
    LeaseDurationBelowOneSecond { lease_duration: GoDuration },

    #[error(
        "--leader-elect-lease-duration ({lease_duration}) must be greater than \
         --leader-elect-renew-deadline ({renew_deadline})"
    )]
    LeaseDurationNotAboveRenewDeadline {
        lease_duration: GoDuration,
        renew_deadline: GoDuration,
    },

    #[error(
        "--leader-elect-renew-deadline ({renew_deadline}) must be greater than \
         --leader-elect-retry-period ({retry_period}) x 1.2 jitter ({jittered_retry_period})"
    )]
    RenewDeadlineNotAboveJitteredRetryPeriod {
        renew_deadline: GoDuration,
        retry_period: GoDuration,
        jittered_retry_period: GoDuration,
    },

    #[error(
        "invalid boolean {value:?}: expect true or false (or 1, 0, t, f, TRUE, FALSE, True, False)"
    )]
    InvalidBool { value: String },

    #[error("--tls-cert-file and --tls-private-key-file must be given together")]
    TlsPairIncomplete,

    #[error("--authorization-always-allow-paths: only a trailing * is allowed in {path:?}")]
    AlwaysAllowPathWildcard { path: String },

    #[error(transparent)]
    Tls(#[from] serving::options::TlsOptionError),

    #[error(transparent)]
    RequestHeader(#[from] serving::options::BlankRequestHeaderValue),
}

impl Options {
    /// Checks what clap cannot and resolves the options into [`Settings`].
    pub fn validate(&self) -> Result<Settings, CliError> {
        let concurrent_resource_quota_syncs = positive(
            "--concurrent-resource-quota-syncs",
            self.concurrent_resource_quota_syncs,
        )?;
        let concurrent_resourceclaim_syncs = positive(
            "--concurrent-resourceclaim-syncs",
            self.concurrent_resourceclaim_syncs,
        )?;
        let concurrent_disruption_syncs = positive(
            "--concurrent-disruption-syncs",
            self.concurrent_disruption_syncs,
        )?;
        // Rejects NaN and infinity too: neither is a usable client rate.
        if !(self.kube_api_qps.is_finite() && self.kube_api_qps > 0.0) {
            return Err(CliError::NotPositive {
                flag: "--kube-api-qps",
                value: self.kube_api_qps.to_string(),
            });
        }
        let kube_api_burst = positive("--kube-api-burst", self.kube_api_burst)?;

        let feature_gates = FeatureGates::from_flag_values(&self.feature_gates)?;
        let selection = select_controllers(&self.controllers, &feature_gates)?;

        // Shadow mode never writes, so several shadows may run beside the real leader.
        let leader_election = if self.leader_elect && !self.shadow {
            Some(self.leader_election()?)
        } else {
            None
        };

        let sync_period = self.resource_quota_sync_period.0;
        Ok(Settings {
            kubeconfig: self.kubeconfig.clone(),
            enabled_controllers: selection.enabled,
            skipped_for_gates: selection.skipped_for_gates,
            feature_gates,
            concurrent_resource_quota_syncs,
            resource_quota_sync_period: (!sync_period.is_zero()).then_some(sync_period),
            concurrent_resourceclaim_syncs,
            concurrent_disruption_syncs,
            leader_election,
            http_listener: self
                .port
                .filter(|&port| port != 0)
                .map(|port| SocketAddr::new(self.bind_address, port)),
            secure_serving: self.secure_serving()?,
            kube_api_qps: self.kube_api_qps,
            kube_api_burst,
            shadow: self.shadow,
            use_service_account_credentials: self.use_service_account_credentials,
            log_format: self.log_format,
            verbosity: self.verbosity,
        })
    }

    fn secure_serving(&self) -> Result<Option<SecureServing>, CliError> {
        // Plain HTTP asked for (development): HTTPS only when asked for too.
        let port = match (self.secure_port, self.port) {
            (Some(port), _) => port,
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
        let tls = serving::options::TlsOptions {
            cipher_suites: serving::options::parse_cipher_suites(&self.tls_cipher_suites)?,
            min_version: serving::options::parse_min_version(&self.tls_min_version)?,
            curve_preferences: serving::options::parse_curves(&self.tls_curve_preferences)?,
            sni_cert_keys: self.tls_sni_cert_key.clone(),
            permit_address_sharing: self.permit_address_sharing,
            permit_port_sharing: self.permit_port_sharing,
            http2_max_streams_per_connection: serving::options::parse_http2_max_streams(
                self.http2_max_streams_per_connection,
            )?,
            disable_http2: self.disable_http2_serving,
        };
        let request_header = serving::options::RequestHeaderOptions {
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

    fn leader_election(&self) -> Result<LeaderElection, CliError> {
        let lease_duration = self.leader_elect_lease_duration.0;
        let renew_deadline = self.leader_elect_renew_deadline.0;
        let retry_period = self.leader_elect_retry_period.0;
        validate_leader_election_timing(lease_duration, renew_deadline, retry_period)?;
        if self.leader_elect_resource_namespace.is_empty() {
            return Err(CliError::Empty {
                flag: "--leader-elect-resource-namespace",
            });
        }
        if self.leader_elect_resource_name.is_empty() {
            return Err(CliError::Empty {
                flag: "--leader-elect-resource-name",
            });
        }
        Ok(LeaderElection {
            lease_duration,
            renew_deadline,
            retry_period,
            resource_namespace: self.leader_elect_resource_namespace.clone(),
            resource_name: self.leader_elect_resource_name.clone(),
        })
    }
}

fn positive(flag: &'static str, value: u32) -> Result<NonZeroU32, CliError> {
    NonZeroU32::new(value).ok_or(CliError::NotPositive {
        flag,
        value: value.to_string(),
    })
}

/// client-go's `leaderelection.JitterFactor`, as a ratio so the check stays exact.
const JITTER_NUMERATOR: u32 = 12;
const JITTER_DENOMINATOR: u32 = 10;

/// client-go's `NewLeaderElector` rules: lease > renew deadline > retry period x 1.2, all > 0.
pub fn validate_leader_election_timing(
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
) -> Result<(), CliError> {
    for (flag, value) in [
        ("--leader-elect-lease-duration", lease_duration),
        ("--leader-elect-renew-deadline", renew_deadline),
        ("--leader-elect-retry-period", retry_period),
    ] {
        if value.is_zero() {
            return Err(CliError::NotPositive {
                flag,
                value: GoDuration(value).to_string(),
            });
        }
    }
    // The Lease stores whole seconds: a shorter duration would read as 0, always expired.
    if lease_duration < Duration::from_secs(1) {
        return Err(CliError::LeaseDurationBelowOneSecond {
            lease_duration: GoDuration(lease_duration),
        });
    }
    if lease_duration <= renew_deadline {
        return Err(CliError::LeaseDurationNotAboveRenewDeadline {
            lease_duration: GoDuration(lease_duration),
            renew_deadline: GoDuration(renew_deadline),
        });
    }
    // Saturating: a retry period so long that x 1.2 overflows can never be below the deadline.
    let jittered_retry_period = retry_period
        .checked_mul(JITTER_NUMERATOR)
        .map_or(Duration::MAX, |scaled| scaled / JITTER_DENOMINATOR);
    if renew_deadline <= jittered_retry_period {
        return Err(CliError::RenewDeadlineNotAboveJitteredRetryPeriod {
            renew_deadline: GoDuration(renew_deadline),
            retry_period: GoDuration(retry_period),
            jittered_retry_period: GoDuration(jittered_retry_period),
        });
    }
    Ok(())
}

/// A boolean flag as Go's pflag reads it: a bare `--flag` or `--flag=BOOL` (see
/// [`parse_go_bool`]), never `--flag BOOL`. Set on the command for each such field.
fn go_bool(arg: Arg) -> Arg {
    arg.value_name("BOOL")
        .num_args(0..=1)
        .default_missing_value("true")
        .require_equals(true)
        .action(ArgAction::Set)
        .value_parser(parse_go_bool)
}

/// Go's `strconv.ParseBool`, which pflag uses for boolean flags and feature gates.
pub fn parse_go_bool(text: &str) -> Result<bool, CliError> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(CliError::InvalidBool {
            value: text.to_owned(),
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Controllers

/// The kube-controller-manager controllers kcm implements, in canonical order; what each is
/// lives in its [`Descriptor`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Controller {
    ResourceQuota,
    ResourceClaim,
    Disruption,
    Ttl,
    StorageVersionGc,
}

impl Controller {
    pub const ALL: [Controller; 5] = [
        Controller::ResourceQuota,
        Controller::ResourceClaim,
        Controller::Disruption,
        Controller::Ttl,
        Controller::StorageVersionGc,
    ];

    /// Its name, aliases, gates, RBAC and constructor.
    pub fn descriptor(self) -> &'static Descriptor {
        &CONTROLLERS[self as usize]
    }

    /// kube-controller-manager's name, as accepted by --controllers.
    pub fn canonical_name(self) -> &'static str {
        self.descriptor().name
    }

    /// Older names kube-controller-manager still accepts.
    pub fn aliases(self) -> &'static [&'static str] {
        self.descriptor().aliases
    }

    /// Gates that must all be on for the controller to start, checked in this order.
    pub fn required_gates(self) -> &'static [FeatureGate] {
        self.descriptor().required_gates
    }

    /// Looks up a canonical name or an alias (exact match, as kube-controller-manager does).
    pub fn from_name(name: &str) -> Option<Controller> {
        Controller::ALL.into_iter().find(|controller| {
            controller.canonical_name() == name || controller.aliases().contains(&name)
        })
    }
}

impl fmt::Display for Controller {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.canonical_name())
    }
}

/// Result of resolving --controllers against the feature gates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSelection {
    /// In canonical order.
    pub enabled: Vec<Controller>,
    /// Selected but held back by the named (first disabled) required gate.
    pub skipped_for_gates: Vec<(Controller, &'static str)>,
}

enum ControllerEntry {
    All,
    Enable(Controller),
    Disable(Controller),
}

/// Applies kube-controller-manager's --controllers rules to the flag's entries (each may itself
/// be comma-separated): the first entry naming a controller
/// (enable or `-` disable) decides; otherwise `*` enables it (none of kcm's controllers is
/// disabled by default); without `*` it stays off.
pub fn select_controllers<S: AsRef<str>>(
    entries: &[S],
    gates: &FeatureGates,
) -> Result<ControllerSelection, CliError> {
    let mut parsed = Vec::new();
    let mut unknown_names = Vec::new();
    // Splitting again is harmless after clap's split and lets callers pass the raw flag text.
    let split_entries = entries
        .iter()
        .flat_map(|entry| entry.as_ref().split(','))
        .map(str::trim);
    for entry in split_entries {
        if entry.is_empty() {
            continue;
        }
        if entry == "*" {
            parsed.push(ControllerEntry::All);
            continue;
        }
        let (name, disable) = match entry.strip_prefix('-') {
            Some(name) => (name, true),
            None => (entry, false),
        };
        match Controller::from_name(name) {
            Some(controller) if disable => parsed.push(ControllerEntry::Disable(controller)),
            Some(controller) => parsed.push(ControllerEntry::Enable(controller)),
            None => unknown_names.push(name.to_owned()),
        }
    }
    if !unknown_names.is_empty() {
        return Err(CliError::UnknownControllers {
            names: unknown_names,
        });
    }

    let mut selection = ControllerSelection {
        enabled: Vec::new(),
        skipped_for_gates: Vec::new(),
    };
    for controller in Controller::ALL {
        if !is_selected(controller, &parsed) {
            continue;
        }
        let first_disabled_gate = controller
            .required_gates()
            .iter()
            .find(|gate| !gates.enabled(**gate));
        match first_disabled_gate {
            Some(gate) => selection.skipped_for_gates.push((controller, gate.name())),
            None => selection.enabled.push(controller),
        }
    }
    Ok(selection)
}

fn is_selected(controller: Controller, entries: &[ControllerEntry]) -> bool {
    let mut star_seen = false;
    for entry in entries {
        match entry {
            ControllerEntry::Enable(named) if *named == controller => return true,
            ControllerEntry::Disable(named) if *named == controller => return false,
            ControllerEntry::All => star_seen = true,
            _ => {}
        }
    }
    star_seen
}

fn valid_controller_names_list() -> String {
    let mut names = vec!["*".to_owned()];
    for controller in Controller::ALL {
        names.push(controller.canonical_name().to_owned());
        names.extend(controller.aliases().iter().map(|alias| (*alias).to_owned()));
    }
    names.join(", ")
}

fn quoted_list(items: &[String]) -> String {
    items
        .iter()
        .map(|item| format!("{item:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// Feature gates

/// The feature gates kcm's controllers consult.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FeatureGate {
    StorageVersionApi,
    ApiServerIdentity,
    DraAdminAccess,
    DraPrioritizedList,
    DraWorkloadResourceClaims,
    PodLevelResources,
    DraExtendedResource,
    InPlacePodVerticalScaling,
    DraResourceClaimGranularStatusAuthorization,
    DraDeviceBindingConditions,
    DraConsumableCapacity,
    GenericWorkload,
    WatchListClient,
}

impl FeatureGate {
    pub const ALL: [FeatureGate; 13] = [
        FeatureGate::StorageVersionApi,
        FeatureGate::ApiServerIdentity,
        FeatureGate::DraAdminAccess,
        FeatureGate::DraPrioritizedList,
        FeatureGate::DraWorkloadResourceClaims,
        FeatureGate::PodLevelResources,
        FeatureGate::DraExtendedResource,
        FeatureGate::InPlacePodVerticalScaling,
        FeatureGate::DraResourceClaimGranularStatusAuthorization,
        FeatureGate::DraDeviceBindingConditions,
        FeatureGate::DraConsumableCapacity,
        FeatureGate::GenericWorkload,
        FeatureGate::WatchListClient,
    ];

    /// Kubernetes' spelling, as used in --feature-gates.
    pub fn name(self) -> &'static str {
        match self {
            FeatureGate::StorageVersionApi => "StorageVersionAPI",
            FeatureGate::ApiServerIdentity => "APIServerIdentity",
            FeatureGate::DraAdminAccess => "DRAAdminAccess",
            FeatureGate::DraPrioritizedList => "DRAPrioritizedList",
            FeatureGate::DraWorkloadResourceClaims => "DRAWorkloadResourceClaims",
            FeatureGate::PodLevelResources => "PodLevelResources",
            FeatureGate::DraExtendedResource => "DRAExtendedResource",
            FeatureGate::InPlacePodVerticalScaling => "InPlacePodVerticalScaling",
            FeatureGate::DraResourceClaimGranularStatusAuthorization => {
                "DRAResourceClaimGranularStatusAuthorization"
            }
            FeatureGate::DraDeviceBindingConditions => "DRADeviceBindingConditions",
            FeatureGate::DraConsumableCapacity => "DRAConsumableCapacity",
            FeatureGate::GenericWorkload => "GenericWorkload",
            FeatureGate::WatchListClient => "WatchListClient",
        }
    }

    pub fn default_enabled(self) -> bool {
        match self {
            FeatureGate::StorageVersionApi => false,
            FeatureGate::ApiServerIdentity => true,
            FeatureGate::DraAdminAccess => true,
            FeatureGate::DraPrioritizedList => true,
            FeatureGate::DraWorkloadResourceClaims => false,
            FeatureGate::PodLevelResources => true,
            FeatureGate::DraExtendedResource => true,
            FeatureGate::InPlacePodVerticalScaling => true,
            FeatureGate::DraResourceClaimGranularStatusAuthorization => true,
            FeatureGate::DraDeviceBindingConditions => true,
            FeatureGate::DraConsumableCapacity => true,
            FeatureGate::GenericWorkload => false,
            FeatureGate::WatchListClient => true,
        }
    }

    /// Exact, case-sensitive lookup, as Kubernetes does.
    pub fn from_name(name: &str) -> Option<FeatureGate> {
        FeatureGate::ALL
            .into_iter()
            .find(|gate| gate.name() == name)
    }
}

impl fmt::Display for FeatureGate {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// Effective value of every known gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    // Indexed by the gate's position in `FeatureGate::ALL`, which matches declaration order.
    enabled: [bool; FeatureGate::ALL.len()],
}

impl Default for FeatureGates {
    fn default() -> Self {
        Self {
            enabled: FeatureGate::ALL.map(FeatureGate::default_enabled),
        }
    }
}

impl FeatureGates {
    pub fn enabled(&self, gate: FeatureGate) -> bool {
        self.enabled[gate as usize]
    }

    pub fn set(&mut self, gate: FeatureGate, enabled: bool) {
        self.enabled[gate as usize] = enabled;
    }

    /// Every gate with its effective value, in `FeatureGate::ALL` order.
    pub fn iter(&self) -> impl Iterator<Item = (FeatureGate, bool)> + '_ {
        FeatureGate::ALL
            .into_iter()
            .map(|gate| (gate, self.enabled(gate)))
    }

    /// Applies `--feature-gates` values (`A=true,B=false`) over the defaults; a later
    /// occurrence of a gate wins, as with Kubernetes' repeated flags.
    pub fn from_flag_values<S: AsRef<str>>(values: &[S]) -> Result<FeatureGates, CliError> {
        let mut gates = FeatureGates::default();
        for value in values {
            for pair in value.as_ref().split(',') {
                if pair.trim().is_empty() {
                    continue;
                }
                let Some((name, setting)) = pair.split_once('=') else {
                    return Err(CliError::MalformedFeatureGatePair {
                        pair: pair.to_owned(),
                    });
                };
                let (name, setting) = (name.trim(), setting.trim());
                let enabled =
                    parse_go_bool(setting).map_err(|_| CliError::InvalidFeatureGateValue {
                        name: name.to_owned(),
                        value: setting.to_owned(),
                    })?;
                let gate = FeatureGate::from_name(name).ok_or_else(|| {
                    CliError::UnrecognizedFeatureGate {
                        name: name.to_owned(),
                    }
                })?;
                gates.set(gate, enabled);
            }
        }
        Ok(gates)
    }
}

fn known_gates_list() -> String {
    let mut gates = FeatureGate::ALL;
    gates.sort_by_key(|gate| gate.name());
    gates
        .iter()
        .map(|gate| {
            format!(
                "{}=true|false (default {})",
                gate.name(),
                gate.default_enabled()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// Go durations

/// A `std::time::Duration` read and printed like Go's `time.Duration`, so flag values and
/// help text look exactly as they do for kube-controller-manager (`5m0s`, `1.5s`, `300ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(pub Duration);

impl From<GoDuration> for Duration {
    fn from(duration: GoDuration) -> Duration {
        duration.0
    }
}

/// Why a duration string was rejected; messages follow Go's `time.ParseDuration`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationParseError {
    #[error("invalid duration {0:?}")]
    Invalid(String),
    #[error("missing unit in duration {0:?} (use ns, us, ms, s, m or h)")]
    MissingUnit(String),
    #[error("unknown unit {unit:?} in duration {text:?} (use ns, us, ms, s, m or h)")]
    UnknownUnit { unit: String, text: String },
    #[error("negative duration {0:?} is not allowed")]
    Negative(String),
    #[error("duration {0:?} is out of range")]
    OutOfRange(String),
}

/// Go's `time.Duration` range; larger values are errors in Go, so they are here too.
const MAX_GO_DURATION_NANOS: u128 = i64::MAX as u128;

/// Fraction digits beyond this cannot change the result at nanosecond precision even for
/// hours (3.6e12 ns), and bounding them keeps the arithmetic from overflowing.
const MAX_FRACTION_DIGITS: usize = 18;

impl FromStr for GoDuration {
    type Err = DurationParseError;

    /// Go's `time.ParseDuration` grammar: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` or a bare `0`;
    /// units ns, us (µs, μs), ms, s, m, h. Negative values are rejected; fractional
    /// nanoseconds are truncated as in Go.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || DurationParseError::Invalid(text.to_owned());
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        if unsigned == "0" {
            return Ok(GoDuration(Duration::ZERO));
        }
        if unsigned.is_empty() {
            return Err(invalid());
        }

        let mut total_nanos: u128 = 0;
        let mut rest = unsigned;
        while !rest.is_empty() {
            let (whole_digits, after_whole) = split_leading_digits(rest);
            let (fraction_digits, after_number) = match after_whole.strip_prefix('.') {
                Some(after_dot) => split_leading_digits(after_dot),
                None => ("", after_whole),
            };
            if whole_digits.is_empty() && fraction_digits.is_empty() {
                return Err(invalid());
            }
            let unit_len = after_number
                .find(|character: char| character == '.' || character.is_ascii_digit())
                .unwrap_or(after_number.len());
            let (unit, after_unit) = after_number.split_at(unit_len);
            let unit_nanos: u128 = match unit {
                "" => return Err(DurationParseError::MissingUnit(text.to_owned())),
                "ns" => 1,
                "us" | "µs" | "μs" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                _ => {
                    return Err(DurationParseError::UnknownUnit {
                        unit: unit.to_owned(),
                        text: text.to_owned(),
                    });
                }
            };

            let out_of_range = || DurationParseError::OutOfRange(text.to_owned());
            let whole = parse_bounded_digits(whole_digits).ok_or_else(out_of_range)?;
            let kept_fraction = &fraction_digits[..fraction_digits.len().min(MAX_FRACTION_DIGITS)];
            let fraction_nanos = match parse_bounded_digits(kept_fraction) {
                Some(fraction) if !kept_fraction.is_empty() => {
                    let scale = 10u128.pow(kept_fraction.len() as u32);
                    fraction * unit_nanos / scale
                }
                _ => 0,
            };
            total_nanos = whole
                .checked_mul(unit_nanos)
                .and_then(|nanos| nanos.checked_add(fraction_nanos))
                .and_then(|nanos| nanos.checked_add(total_nanos))
                .filter(|nanos| *nanos <= MAX_GO_DURATION_NANOS)
                .ok_or_else(out_of_range)?;
            rest = after_unit;
        }

        if negative && total_nanos != 0 {
            return Err(DurationParseError::Negative(text.to_owned()));
        }
        // Bounded by MAX_GO_DURATION_NANOS above, so the conversion cannot fail.
        let nanos = u64::try_from(total_nanos).map_err(|_| invalid())?;
        Ok(GoDuration(Duration::from_nanos(nanos)))
    }
}

fn split_leading_digits(text: &str) -> (&str, &str) {
    let digit_count = text.bytes().take_while(u8::is_ascii_digit).count();
    text.split_at(digit_count)
}

/// Decimal digits as a number no larger than Go's duration range; `None` past it.
fn parse_bounded_digits(digits: &str) -> Option<u128> {
    digits.bytes().try_fold(0u128, |value, digit| {
        value
            .checked_mul(10)?
            .checked_add(u128::from(digit - b'0'))
            .filter(|value| *value <= MAX_GO_DURATION_NANOS)
    })
}

/// Parses a Go duration string into a `std::time::Duration`.
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationParseError> {
    text.parse::<GoDuration>().map(Duration::from)
}

impl fmt::Display for GoDuration {
    /// Go's `Duration.String`: `0s`, `300ms`, `1.5µs`, `15s`, `1m30s`, `5m0s`, `1h0m0s`.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NANOS_PER_SECOND: u128 = 1_000_000_000;
        const NANOS_PER_MINUTE: u128 = 60 * NANOS_PER_SECOND;
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return formatter.write_str("0s");
        }
        if nanos < NANOS_PER_SECOND {
            let (fraction_digits, unit) = match nanos {
                0..1_000 => (0, "ns"),
                1_000..1_000_000 => (3, "µs"),
                _ => (6, "ms"),
            };
            return write!(formatter, "{}{unit}", decimal(nanos, fraction_digits));
        }
        let minutes = nanos / NANOS_PER_MINUTE;
        if minutes >= 60 {
            write!(formatter, "{}h", minutes / 60)?;
        }
        if minutes > 0 {
            write!(formatter, "{}m", minutes % 60)?;
        }
        write!(formatter, "{}s", decimal(nanos % NANOS_PER_MINUTE, 9))
    }
}

/// `value / 10^fraction_digits` printed without trailing fractional zeros.
fn decimal(value: u128, fraction_digits: u32) -> String {
    let scale = 10u128.pow(fraction_digits);
    let (whole, fraction) = (value / scale, value % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let width = fraction_digits as usize;
    let fraction = format!("{fraction:0width$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Options::try_parse_from(std::iter::once("kcm").chain(args.iter().copied()))
    }

    fn settings(args: &[&str]) -> Result<Settings, CliError> {
        parse(args)
            .unwrap_or_else(|error| panic!("clap rejected {args:?}: {error}"))
            .validate()
    }

    fn secs(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn defaults_match_kube_controller_manager() {
        let options = parse(&[]).unwrap();
        assert_eq!(options.kubeconfig, None);
        assert_eq!(options.controllers, vec!["*"]);
        assert_eq!(options.leader_elect_resource_name, "kcm");

        let settings = options.validate().unwrap();
        assert_eq!(settings.enabled_controllers, Controller::ALL[..4].to_vec());
        assert_eq!(
            settings.skipped_for_gates,
            vec![(Controller::StorageVersionGc, "StorageVersionAPI")]
        );
        assert_eq!(settings.feature_gates, FeatureGates::default());
        assert_eq!(settings.concurrent_resource_quota_syncs.get(), 5);
        assert_eq!(settings.resource_quota_sync_period, Some(secs(300)));
        assert_eq!(settings.concurrent_resourceclaim_syncs.get(), 50);
        assert_eq!(settings.concurrent_disruption_syncs.get(), 1);
        assert_eq!(
            settings.leader_election,
            Some(LeaderElection {
                lease_duration: secs(15),
                renew_deadline: secs(10),
                retry_period: secs(2),
                resource_namespace: "kube-system".to_owned(),
                resource_name: "kcm".to_owned(),
            })
        );
        assert_eq!(settings.http_listener, None, "no plain HTTP by default");
        assert_eq!(
            settings.secure_serving,
            Some(SecureServing {
                addr: "0.0.0.0:10257".parse().unwrap(),
                cert_dir: None,
                cert_key: None,
                client_ca_file: None,
                authentication_kubeconfig: None,
                authorization_kubeconfig: None,
                authentication_skip_lookup: false,
                tolerate_lookup_failure: false,
                tls: Default::default(),
                request_header: Default::default(),
                token_cache_ttl: secs(10),
                authorized_cache_ttl: secs(10),
                unauthorized_cache_ttl: secs(10),
                always_allow_paths: vec!["/healthz".into(), "/readyz".into(), "/livez".into()],
            })
        );
        assert_eq!(settings.kube_api_qps, 20.0);
        assert_eq!(settings.kube_api_burst.get(), 30);
        assert!(!settings.shadow);
        assert!(!settings.use_service_account_credentials);
        assert_eq!(settings.log_format, LogFormat::Text);
        assert_eq!(settings.verbosity, 0);
    }

    #[test]
    fn help_shows_go_style_defaults() {
        use clap::CommandFactory;
        let help = Options::command().render_long_help().to_string();
        for expected in [
            "[default: 5m0s]",
            "[default: 15s]",
            "[default: 10s]",
            "[default: 2s]",
            "[default: *]",
            "[default: 10257]",
            "[default: true]",
            "[default: text]",
        ] {
            assert!(help.contains(expected), "missing {expected} in:\n{help}");
        }
        for gate in FeatureGate::ALL {
            let described = format!("{} (default {})", gate.name(), gate.default_enabled());
            assert!(FEATURE_GATES_HELP.contains(&described), "{described}");
        }
        assert_eq!(
            controllers_help(),
            "Controllers to run, comma-separated. '*' enables all; NAME enables and -NAME \
             disables one; the first entry naming a controller wins. Names (aliases in \
             parentheses): resourcequota-controller (resourcequota), resourceclaim-controller \
             (resource-claim-controller), disruption-controller (disruption), ttl-controller \
             (ttl), storageversion-garbage-collector-controller (storage-version-gc)"
        );
        for controller in Controller::ALL {
            assert!(controllers_help().contains(controller.canonical_name()));
            for alias in controller.aliases() {
                assert!(controllers_help().contains(&format!("({alias})")));
            }
        }
    }

    #[test]
    fn pflag_style_booleans() {
        let cases: &[(&[&str], bool, bool)] = &[
            (&[], true, false),
            (&["--leader-elect"], true, false),
            (&["--leader-elect=false"], false, false),
            (&["--leader-elect=true"], true, false),
            (&["--leader-elect=0"], false, false),
            (&["--shadow"], true, true),
            (&["--shadow=false"], true, false),
            (&["--shadow=T"], true, true),
        ];
        for (args, leader_elect, shadow) in cases {
            let options = parse(args).unwrap();
            assert_eq!(options.leader_elect, *leader_elect, "{args:?}");
            assert_eq!(options.shadow, *shadow, "{args:?}");
        }
        for (args, want) in [
            (&["--use-service-account-credentials"][..], true),
            (&["--use-service-account-credentials=true"], true),
            (&["--use-service-account-credentials=false"], false),
        ] {
            let options = parse(args).unwrap();
            assert_eq!(options.use_service_account_credentials, want, "{args:?}");
        }
        // Like pflag, the value must be attached with '='.
        assert!(parse(&["--leader-elect", "false"]).is_err());
        assert!(parse(&["--leader-elect=nope"]).is_err());
    }

    #[test]
    fn leader_election_is_off_when_disabled_or_shadowing() {
        assert_eq!(
            settings(&["--leader-elect=false"]).unwrap().leader_election,
            None
        );
        let shadow = settings(&["--shadow"]).unwrap();
        assert!(shadow.shadow);
        assert_eq!(shadow.leader_election, None);
        // Timing is only checked when leader election will actually run.
        let unused_bad_timing = ["--leader-elect=false", "--leader-elect-lease-duration=1s"];
        assert!(settings(&unused_bad_timing).is_ok());
    }

    #[test]
    fn leader_election_timing_rules() {
        let cases: &[(u64, u64, u64, Option<&str>)] = &[
            (15_000, 10_000, 2_000, None),
            (
                10_000,
                10_000,
                2_000,
                Some(
                    "--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)",
                ),
            ),
            (
                9_000,
                10_000,
                2_000,
                Some("must be greater than --leader-elect-renew-deadline"),
            ),
            (
                15_000,
                2_400,
                2_000,
                Some(
                    "--leader-elect-renew-deadline (2.4s) must be greater than --leader-elect-retry-period (2s) x 1.2 jitter (2.4s)",
                ),
            ),
            (15_000, 2_401, 2_000, None),
            (
                900,
                800,
                100,
                Some("--leader-elect-lease-duration (900ms) must be at least 1s"),
            ),
            (
                15_000,
                10_000,
                0,
                Some("--leader-elect-retry-period must be greater than 0, got 0s"),
            ),
            (
                0,
                10_000,
                2_000,
                Some("--leader-elect-lease-duration must be greater than 0"),
            ),
            (
                15_000,
                0,
                2_000,
                Some("--leader-elect-renew-deadline must be greater than 0"),
            ),
        ];
        for (lease, renew, retry, expected_error) in cases {
            let result = validate_leader_election_timing(
                Duration::from_millis(*lease),
                Duration::from_millis(*renew),
                Duration::from_millis(*retry),
            );
            match (result, expected_error) {
                (Ok(()), None) => {}
                (Err(error), Some(expected)) => {
                    assert!(
                        error.to_string().contains(expected),
                        "{error} vs {expected}"
                    )
                }
                (result, _) => panic!("{lease}/{renew}/{retry}: unexpected {result:?}"),
            }
        }
        let huge_retry = validate_leader_election_timing(Duration::MAX, secs(10), Duration::MAX);
        assert!(huge_retry.is_err());

        let error = settings(&["--leader-elect-renew-deadline=20s"]).unwrap_err();
        assert!(matches!(
            error,
            CliError::LeaseDurationNotAboveRenewDeadline { .. }
        ));
        let error = settings(&["--leader-elect-resource-name="]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "--leader-elect-resource-name must not be empty"
        );
    }

    #[test]
    fn zero_or_invalid_rates_are_rejected() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["--concurrent-resource-quota-syncs=0"],
                "--concurrent-resource-quota-syncs must be greater than 0, got 0",
            ),
            (
                &["--concurrent-resourceclaim-syncs=0"],
                "--concurrent-resourceclaim-syncs must be greater than 0",
            ),
            (
                &["--concurrent-disruption-syncs", "0"],
                "--concurrent-disruption-syncs must be greater than 0",
            ),
            (
                &["--kube-api-qps=0"],
                "--kube-api-qps must be greater than 0",
            ),
            (
                &["--kube-api-qps=-1"],
                "--kube-api-qps must be greater than 0",
            ),
            (
                &["--kube-api-qps=NaN"],
                "--kube-api-qps must be greater than 0",
            ),
            (
                &["--kube-api-qps=inf"],
                "--kube-api-qps must be greater than 0",
            ),
            (
                &["--kube-api-burst=0"],
                "--kube-api-burst must be greater than 0",
            ),
        ];
        for (args, expected) in cases {
            let error = settings(args).unwrap_err().to_string();
            assert!(error.contains(expected), "{args:?}: {error}");
        }
        assert!(parse(&["--concurrent-disruption-syncs=-1"]).is_err());
        assert!(parse(&["--port=70000"]).is_err());
    }

    #[test]
    fn other_flags_resolve() {
        let settings = settings(&[
            "--kubeconfig=/etc/kubernetes/kcm.conf",
            "--resource-quota-sync-period=0",
            "--bind-address=127.0.0.1",
            "--port=0",
            "--kube-api-qps=50.5",
            "--log-format=json",
            "-v=4",
        ])
        .unwrap();
        assert_eq!(
            settings.kubeconfig,
            Some(PathBuf::from("/etc/kubernetes/kcm.conf"))
        );
        assert_eq!(settings.resource_quota_sync_period, None);
        assert_eq!(settings.http_listener, None);
        assert_eq!(settings.kube_api_qps, 50.5);
        assert_eq!(settings.log_format, LogFormat::Json);
        assert_eq!(settings.verbosity, 4);

        for args in [["-v", "2"], ["--v", "2"]] {
            assert_eq!(parse(&args).unwrap().verbosity, 2);
        }
        assert_eq!(parse(&["--v=3"]).unwrap().verbosity, 3);
        assert_eq!(
            parse(&["--bind-address=::1", "--port=9000"])
                .unwrap()
                .validate()
                .unwrap()
                .http_listener,
            Some("[::1]:9000".parse().unwrap())
        );
        assert!(parse(&["--log-format=xml"]).is_err());
        assert!(parse(&["--resource-quota-sync-period=5"]).is_err());
        assert!(parse(&["--resource-quota-sync-period=-5s"]).is_err());
    }

    #[test]
    fn tls_and_front_proxy_flags_resolve() {
        use serving::options::{CipherSuite, Curve, NamedCertKey, TlsVersion};
        let secure = |args: &[&str]| settings(args).unwrap().secure_serving.unwrap();
        let defaults = secure(&[]);
        assert_eq!(defaults.tls, Default::default());
        assert_eq!(defaults.request_header, Default::default());
        assert!(!defaults.tolerate_lookup_failure);
        let custom = secure(&[
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "--tls-cipher-suites",
            "TLS_AES_128_GCM_SHA256",
            "--tls-min-version=VersionTLS13",
            "--tls-curve-preferences=29,23",
            "--tls-sni-cert-key=a.crt,a.key:a.example",
            "--tls-sni-cert-key=b.crt,b.key",
            "--permit-address-sharing",
            "--permit-port-sharing=true",
            "--http2-max-streams-per-connection=1000",
            "--disable-http2-serving",
            "--requestheader-client-ca-file=/etc/kcm/front-proxy-ca.crt",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User,X-Other-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-uid-headers=X-Remote-Uid",
            "--authentication-tolerate-lookup-failure",
        ]);
        assert_eq!(
            custom.tls.cipher_suites,
            Some(vec![
                CipherSuite::EcdheRsaAes128GcmSha256,
                CipherSuite::Tls13Aes128GcmSha256
            ])
        );
        assert_eq!(custom.tls.min_version, TlsVersion::Tls13);
        assert_eq!(
            custom.tls.curve_preferences,
            Some(vec![Curve::X25519, Curve::P256])
        );
        assert_eq!(
            custom.tls.sni_cert_keys,
            [
                NamedCertKey {
                    cert: "a.crt".into(),
                    key: "a.key".into(),
                    names: vec!["a.example".into()],
                },
                NamedCertKey {
                    cert: "b.crt".into(),
                    key: "b.key".into(),
                    names: vec![],
                },
            ]
        );
        assert!(custom.tls.permit_address_sharing && custom.tls.permit_port_sharing);
        assert_eq!(custom.tls.http2_max_streams(), 1000);
        assert!(custom.tls.disable_http2);
        let rh = &custom.request_header;
        assert_eq!(
            rh.client_ca_file,
            Some(PathBuf::from("/etc/kcm/front-proxy-ca.crt"))
        );
        assert_eq!(rh.allowed_names, ["front-proxy-client"]);
        assert_eq!(rh.username_headers, ["X-Remote-User", "X-Other-User"]);
        assert_eq!(rh.uid_headers, ["X-Remote-Uid"]);
        assert!(custom.tolerate_lookup_failure);
        // `--flag=` empties a list, as pflag's string slices.
        assert!(
            secure(&["--requestheader-group-headers="])
                .request_header
                .group_headers
                .is_empty()
        );
        for (args, message) in [
            (
                &["--tls-min-version=VersionTLS11"][..],
                "--tls-min-version=VersionTLS11: TLS 1.0 and 1.1 are not available in kcm (rustls implements TLS 1.2 and 1.3 only); use VersionTLS12 or VersionTLS13",
            ),
            (
                &["--requestheader-username-headers=X-Remote-User, "][..],
                "empty value in \"requestheader-username-headers\"",
            ),
            (
                &["--http2-max-streams-per-connection=-1"][..],
                "--http2-max-streams-per-connection must not be negative, got -1",
            ),
        ] {
            assert_eq!(settings(args).unwrap_err().to_string(), message, "{args:?}");
        }
        let sni = parse(&["--tls-sni-cert-key=only.crt"])
            .unwrap_err()
            .to_string();
        assert!(
            sni.contains("expected comma separated certificate and key file paths"),
            "{sni}"
        );
    }

    #[test]
    fn serving_flags_resolve() {
        let secure = |args: &[&str]| settings(args).unwrap().secure_serving;
        // --port alone is development mode: plain HTTP only.
        assert_eq!(secure(&["--port=10258"]), None);
        assert_eq!(
            settings(&["--port=10258"]).unwrap().http_listener,
            Some("0.0.0.0:10258".parse().unwrap())
        );
        assert_eq!(secure(&["--secure-port=0"]), None);
        let both = secure(&["--port=0", "--secure-port=9443", "--bind-address=127.0.0.1"]).unwrap();
        assert_eq!(both.addr, "127.0.0.1:9443".parse().unwrap());

        let custom = secure(&[
            "--cert-dir=/var/run/kcm",
            "--tls-cert-file=/etc/kcm/tls.crt",
            "--tls-private-key-file=/etc/kcm/tls.key",
            "--client-ca-file=/etc/kcm/ca.crt",
            "--authentication-kubeconfig=/etc/kcm/authn.conf",
            "--authorization-kubeconfig=/etc/kcm/authz.conf",
            "--authentication-skip-lookup",
            "--authentication-token-webhook-cache-ttl=1m",
            "--authorization-webhook-cache-authorized-ttl=5s",
            "--authorization-webhook-cache-unauthorized-ttl=0s",
            "--authorization-always-allow-paths=/healthz,/debug/*",
        ])
        .unwrap();
        assert_eq!(custom.cert_dir, Some(PathBuf::from("/var/run/kcm")));
        assert_eq!(
            custom.cert_key,
            Some((
                PathBuf::from("/etc/kcm/tls.crt"),
                PathBuf::from("/etc/kcm/tls.key")
            ))
        );
        assert_eq!(
            custom.client_ca_file,
            Some(PathBuf::from("/etc/kcm/ca.crt"))
        );
        assert_eq!(
            custom.authentication_kubeconfig,
            Some(PathBuf::from("/etc/kcm/authn.conf"))
        );
        assert_eq!(
            custom.authorization_kubeconfig,
            Some(PathBuf::from("/etc/kcm/authz.conf"))
        );
        assert!(custom.authentication_skip_lookup);
        assert_eq!(custom.token_cache_ttl, secs(60));
        assert_eq!(custom.authorized_cache_ttl, secs(5));
        assert_eq!(custom.unauthorized_cache_ttl, secs(0));
        assert_eq!(custom.always_allow_paths, ["/healthz", "/debug/*"]);
        let none = secure(&["--authorization-always-allow-paths="]).unwrap();
        assert!(none.always_allow_paths.is_empty());

        for (args, expected) in [
            (
                &["--tls-cert-file=/a.crt"][..],
                "--tls-cert-file and --tls-private-key-file must be given together",
            ),
            (
                &["--tls-private-key-file=/a.key"][..],
                "--tls-cert-file and --tls-private-key-file must be given together",
            ),
            (
                &["--authorization-always-allow-paths=/a*b"][..],
                "only a trailing * is allowed in \"/a*b\"",
            ),
        ] {
            let error = settings(args).unwrap_err().to_string();
            assert!(error.contains(expected), "{args:?}: {error}");
        }
        assert!(parse(&["--secure-port=70000"]).is_err());
        assert!(parse(&["--authentication-skip-lookup", "true"]).is_err());
    }

    #[test]
    fn controllers_flag_table() {
        use Controller::*;
        let gates_on = "StorageVersionAPI=true,APIServerIdentity=true";
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            Vec<Controller>,
            Vec<(Controller, &'a str)>,
        );
        let cases: Vec<Case> = vec![
            (
                "*",
                None,
                vec![ResourceQuota, ResourceClaim, Disruption, Ttl],
                vec![(StorageVersionGc, "StorageVersionAPI")],
            ),
            ("*", Some(gates_on), Controller::ALL.to_vec(), vec![]),
            (
                "*,-ttl",
                None,
                vec![ResourceQuota, ResourceClaim, Disruption],
                vec![(StorageVersionGc, "StorageVersionAPI")],
            ),
            (
                "-ttl,*",
                None,
                vec![ResourceQuota, ResourceClaim, Disruption],
                vec![(StorageVersionGc, "StorageVersionAPI")],
            ),
            ("ttl", None, vec![Ttl], vec![]),
            ("ttl-controller", None, vec![Ttl], vec![]),
            ("-ttl,ttl", None, vec![], vec![]),
            ("ttl,-ttl", None, vec![Ttl], vec![]),
            ("-ttl", None, vec![], vec![]),
            ("", None, vec![], vec![]),
            (" ttl , , disruption ", None, vec![Disruption, Ttl], vec![]),
            (
                "storage-version-gc",
                Some(gates_on),
                vec![StorageVersionGc],
                vec![],
            ),
            (
                "storage-version-gc",
                None,
                vec![],
                vec![(StorageVersionGc, "StorageVersionAPI")],
            ),
            (
                "storage-version-gc",
                Some("APIServerIdentity=false,StorageVersionAPI=true"),
                vec![],
                vec![(StorageVersionGc, "APIServerIdentity")],
            ),
            (
                "storage-version-gc",
                Some("APIServerIdentity=false"),
                vec![],
                vec![(StorageVersionGc, "APIServerIdentity")],
            ),
            (
                "*,-storage-version-gc",
                None,
                vec![ResourceQuota, ResourceClaim, Disruption, Ttl],
                vec![],
            ),
            (
                "resourcequota,resource-claim-controller",
                None,
                vec![ResourceQuota, ResourceClaim],
                vec![],
            ),
        ];
        for (list, gates, enabled, skipped) in cases {
            let gate_values: Vec<&str> = gates.into_iter().collect();
            let gates = FeatureGates::from_flag_values(&gate_values).unwrap();
            let selection = select_controllers(&[list], &gates).unwrap();
            assert_eq!(
                selection.enabled, enabled,
                "--controllers={list:?} gates {gates:?}"
            );
            assert_eq!(
                selection.skipped_for_gates, skipped,
                "--controllers={list:?}"
            );
        }

        // Through clap too: comma-splitting, repetition and the canonical order of the result.
        let settings = settings(&[
            "--controllers=ttl",
            "--controllers",
            "disruption,resourcequota",
        ]);
        assert_eq!(
            settings.unwrap().enabled_controllers,
            vec![ResourceQuota, Disruption, Ttl]
        );
        let hyphen_value = parse(&["--controllers", "-ttl,*"])
            .unwrap()
            .validate()
            .unwrap();
        assert!(!hyphen_value.enabled_controllers.contains(&Ttl));
    }

    #[test]
    fn unknown_controller_names_are_listed_with_the_valid_ones() {
        let error = select_controllers(
            &["*", "-bogus", "ttl", "nope", "-*"],
            &FeatureGates::default(),
        )
        .unwrap_err();
        assert_eq!(
            error,
            CliError::UnknownControllers {
                names: vec!["bogus".to_owned(), "nope".to_owned(), "*".to_owned()]
            }
        );
        assert_eq!(
            error.to_string(),
            "unknown controller(s) in --controllers: \"bogus\", \"nope\", \"*\"; valid names: *, \
             resourcequota-controller, resourcequota, resourceclaim-controller, \
             resource-claim-controller, disruption-controller, disruption, ttl-controller, ttl, \
             storageversion-garbage-collector-controller, storage-version-gc"
        );
        assert!(settings(&["--controllers=TTL"]).is_err());
    }

    #[test]
    fn controller_names_and_aliases_round_trip() {
        for controller in Controller::ALL {
            assert_eq!(
                Controller::from_name(controller.canonical_name()),
                Some(controller)
            );
            for alias in controller.aliases() {
                assert_eq!(Controller::from_name(alias), Some(controller));
            }
            assert_eq!(controller.to_string(), controller.canonical_name());
        }
        assert_eq!(Controller::from_name("*"), None);
        assert_eq!(Controller::from_name(""), None);
        let mut sorted = Controller::ALL;
        sorted.sort();
        assert_eq!(sorted, Controller::ALL);
    }

    #[test]
    fn feature_gates_parse_like_kubernetes() {
        let gates = FeatureGates::from_flag_values(&[
            " StorageVersionAPI = true ,DRAAdminAccess=F,",
            "DRAWorkloadResourceClaims=1,DRAAdminAccess=TRUE",
        ])
        .unwrap();
        assert!(gates.enabled(FeatureGate::StorageVersionApi));
        assert!(gates.enabled(FeatureGate::ApiServerIdentity));
        assert!(gates.enabled(FeatureGate::DraAdminAccess));
        assert!(gates.enabled(FeatureGate::DraPrioritizedList));
        assert!(gates.enabled(FeatureGate::DraWorkloadResourceClaims));
        assert_eq!(gates.iter().count(), FeatureGate::ALL.len());

        let defaults = FeatureGates::from_flag_values::<&str>(&[]).unwrap();
        for gate in FeatureGate::ALL {
            assert_eq!(defaults.enabled(gate), gate.default_enabled(), "{gate}");
            assert_eq!(FeatureGate::from_name(gate.name()), Some(gate));
        }

        let unknown = FeatureGates::from_flag_values(&["Bogus=true"]).unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "unrecognized feature gate: Bogus (known gates: APIServerIdentity=true|false (default \
             true), DRAAdminAccess=true|false (default true), DRAConsumableCapacity=true|false \
             (default true), DRADeviceBindingConditions=true|false (default true), \
             DRAExtendedResource=true|false (default true), DRAPrioritizedList=true|false \
             (default true), DRAResourceClaimGranularStatusAuthorization=true|false (default \
             true), DRAWorkloadResourceClaims=true|false (default false), \
             GenericWorkload=true|false (default false), InPlacePodVerticalScaling=true|false \
             (default true), PodLevelResources=true|false (default true), \
             StorageVersionAPI=true|false (default false), WatchListClient=true|false (default \
             true))"
        );
        let wrong_case = FeatureGates::from_flag_values(&["storageversionapi=true"]);
        assert!(matches!(
            wrong_case,
            Err(CliError::UnrecognizedFeatureGate { .. })
        ));

        let not_bool = FeatureGates::from_flag_values(&["StorageVersionAPI=yes"]).unwrap_err();
        assert!(
            not_bool
                .to_string()
                .starts_with("invalid value of StorageVersionAPI: \"yes\", expect true or false (known gates: APIServerIdentity")
        );
        let no_value = FeatureGates::from_flag_values(&["StorageVersionAPI"]).unwrap_err();
        assert!(matches!(
            no_value,
            CliError::MalformedFeatureGatePair { .. }
        ));

        let through_clap = settings(&["--feature-gates=StorageVersionAPI=true"]).unwrap();
        assert!(
            through_clap
                .feature_gates
                .enabled(FeatureGate::StorageVersionApi)
        );
        assert_eq!(through_clap.enabled_controllers, Controller::ALL.to_vec());
        assert!(settings(&["--feature-gates=Nope=true"]).is_err());
    }

    #[test]
    fn go_bools() {
        for text in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(text), Ok(true), "{text}");
        }
        for text in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(text), Ok(false), "{text}");
        }
        for text in ["", "yes", "tRUE", " true", "2"] {
            assert!(parse_go_bool(text).is_err(), "{text}");
        }
    }

    #[test]
    fn duration_parsing_table() {
        let nanos = Duration::from_nanos;
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("+0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("-0s", Duration::ZERO),
            ("300ms", Duration::from_millis(300)),
            ("15s", secs(15)),
            ("+15s", secs(15)),
            ("1m30s", secs(90)),
            ("5m0s", secs(300)),
            ("1h", secs(3600)),
            ("1h0m0s", secs(3600)),
            ("1.5s", Duration::from_millis(1500)),
            (".5s", Duration::from_millis(500)),
            ("1.s", secs(1)),
            ("1.5h", secs(5400)),
            ("2h45m", secs(9900)),
            ("1ns", nanos(1)),
            ("1us", nanos(1_000)),
            ("1µs", nanos(1_000)),
            ("1μs", nanos(1_000)),
            ("1.0000000019s", nanos(1_000_000_001)),
            ("0.5h", secs(1800)),
            ("0.333333333333333333333333s", nanos(333_333_333)),
            ("10s5s", secs(15)),
            ("9223372036854775807ns", nanos(i64::MAX as u64)),
            ("2562047h47m16.854775807s", nanos(i64::MAX as u64)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_go_duration(text).as_ref(), Ok(expected), "{text}");
        }

        let errors: &[(&str, DurationParseError)] = &[
            ("", DurationParseError::Invalid(String::new())),
            ("-", DurationParseError::Invalid("-".to_owned())),
            ("+", DurationParseError::Invalid("+".to_owned())),
            (".", DurationParseError::Invalid(".".to_owned())),
            (".s", DurationParseError::Invalid(".s".to_owned())),
            ("s", DurationParseError::Invalid("s".to_owned())),
            ("1.5.s", DurationParseError::MissingUnit("1.5.s".to_owned())),
            ("5", DurationParseError::MissingUnit("5".to_owned())),
            ("1h5", DurationParseError::MissingUnit("1h5".to_owned())),
            ("00", DurationParseError::MissingUnit("00".to_owned())),
            (
                "3x",
                DurationParseError::UnknownUnit {
                    unit: "x".to_owned(),
                    text: "3x".to_owned(),
                },
            ),
            (
                "1 s",
                DurationParseError::UnknownUnit {
                    unit: " s".to_owned(),
                    text: "1 s".to_owned(),
                },
            ),
            (
                "1S",
                DurationParseError::UnknownUnit {
                    unit: "S".to_owned(),
                    text: "1S".to_owned(),
                },
            ),
            ("-1s", DurationParseError::Negative("-1s".to_owned())),
            ("--1s", DurationParseError::Invalid("--1s".to_owned())),
            (
                "9223372036854775808ns",
                DurationParseError::OutOfRange("9223372036854775808ns".to_owned()),
            ),
            (
                "2562048h",
                DurationParseError::OutOfRange("2562048h".to_owned()),
            ),
            (
                "99999999999999999999999999999999999999999s",
                DurationParseError::OutOfRange(
                    "99999999999999999999999999999999999999999s".to_owned(),
                ),
            ),
        ];
        for (text, expected) in errors {
            assert_eq!(parse_go_duration(text).as_ref(), Err(expected), "{text:?}");
        }
    }

    #[test]
    fn durations_display_the_go_way() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1), "1ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_micros(2), "2µs"),
            (Duration::from_millis(300), "300ms"),
            (Duration::from_nanos(1_500_000), "1.5ms"),
            (secs(1), "1s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(2400), "2.4s"),
            (secs(15), "15s"),
            (secs(90), "1m30s"),
            (secs(300), "5m0s"),
            (secs(3600), "1h0m0s"),
            (secs(9900) + Duration::from_millis(500), "2h45m0.5s"),
            (
                Duration::from_nanos(i64::MAX as u64),
                "2562047h47m16.854775807s",
            ),
            (Duration::MAX, "5124095576030431h0m15.999999999s"),
        ];
        for (duration, expected) in cases {
            let shown = GoDuration(*duration).to_string();
            assert_eq!(shown, *expected);
            if duration.as_nanos() <= MAX_GO_DURATION_NANOS {
                assert_eq!(parse_go_duration(&shown), Ok(*duration), "{shown}");
            }
        }
    }
}
