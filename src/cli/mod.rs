//! Command-line options with kube-controller-manager v1.36's flag names, syntax, types and
//! defaults, so kcm can replace it without changing manifests.
//!
//! [`Options`] is what clap parses, in upstream's sections (one file per group); the flags
//! kcm does not use are parsed and type-checked as upstream does, then only named at start.
//! [`Options::validate`] checks what clap cannot (cross-flag rules, controller names,
//! feature gates) and resolves everything into [`Settings`].

use std::num::NonZeroU32;
use std::time::Duration;

use clap::{Arg, ArgAction, Parser};

use crate::runtime::protobuf::ContentType;
use crate::runtime::watching::listwatch::InitialList;

/// Declares a group of flags kcm accepts but does not use: each is an `Option` (set only when
/// given, so the start-up line can name exactly those), with upstream's default in its help,
/// and `given()` lists the ones on the command line.
macro_rules! unused_flags {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($field:ident: $ty:ty = $default:literal $(, $key:ident = $value:expr)*;)*
        }
    ) => {
        #[derive(clap::Args, Debug, Clone, Default, PartialEq)]
        $(#[$meta])*
        pub struct $name {
            $(
                #[arg(
                    long,
                    help = concat!("Accepted, not used by kcm [upstream default: ", $default, "]")
                    $(, $key = $value)*
                )]
                pub $field: Option<$ty>,
            )*
        }

        impl $name {
            /// The flags of this group given on the command line, as `--name`.
            pub fn given(&self) -> Vec<String> {
                let mut given = Vec::new();
                $(
                    if self.$field.is_some() {
                        given.push($crate::cli::flag_name(stringify!($field)));
                    }
                )*
                given
            }
        }
    };
}

pub mod controllers;
pub mod explain;
pub mod generic;
pub mod logs_metrics;
pub mod serving;
pub mod values;

pub use self::generic::select_controllers;
pub use self::serving::DEFAULT_SECURE_PORT;
pub use self::values::{DurationParseError, GoDuration, parse_go_bool, parse_go_duration};
pub use crate::controllers::Controller;
pub use crate::features::{FeatureGate, FeatureGateError, FeatureGates};
pub use crate::settings::{LeaderElection, LogFormat, SecureServing, Settings};

use self::controllers::ControllerFlags;
use self::generic::{
    GenericFlags, check_resource_lock, master_url, quoted_list, valid_controller_names_list,
};
use self::logs_metrics::LogsMetricsFlags;
use self::serving::ServingFlags;

/// The value name that marks a Go boolean flag (see [`pflag_syntax`]).
const GO_BOOL: &str = "BOOL";

/// The content types kcm reads from the API server (`--kube-api-content-type`).
const JSON: &str = "application/json";
const PROTOBUF: &str = crate::runtime::protobuf::PROTOBUF;

/// `--flag-name` of a field `flag_name`.
pub(crate) fn flag_name(field: &str) -> String {
    format!("--{}", field.replace('_', "-"))
}

/// kube-controller-manager's command line.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "kcm",
    version,
    // `--version` is upstream's: `--version[=true|false|raw]` (see `Options::version`).
    disable_version_flag = true,
    about = "Kubernetes controller-manager in Rust: a drop-in for kube-controller-manager's \
             resourcequota, resourceclaim, disruption, ttl and \
             storageversion-garbage-collector controllers",
    // pflag: a repeated flag takes its last value (lists append).
    args_override_self = true,
    mut_args = pflag_syntax
)]
pub struct Options {
    #[command(flatten)]
    pub generic: GenericFlags,
    #[command(flatten)]
    pub serving: ServingFlags,
    #[command(flatten)]
    pub controllers: ControllerFlags,
    #[command(flatten)]
    pub logs_metrics: LogsMetricsFlags,

    /// Print the version and exit (=raw adds what kcm is a drop-in for)
    #[arg(
        long,
        value_name = "true|false|raw",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = version_flag
    )]
    pub version: Option<VersionFlag>,
}

/// component-base's `--version` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionFlag {
    False,
    True,
    Raw,
}

fn version_flag(text: &str) -> Result<VersionFlag, values::ValueError> {
    if text == "raw" {
        return Ok(VersionFlag::Raw);
    }
    Ok(match parse_go_bool(text)? {
        true => VersionFlag::True,
        false => VersionFlag::False,
    })
}

impl Options {
    /// What `--version` asks to print before anything else, if anything.
    pub fn version_text(&self) -> Option<String> {
        let version = env!("CARGO_PKG_VERSION");
        match self.version? {
            VersionFlag::False => None,
            VersionFlag::True => Some(format!("kcm v{version}")),
            VersionFlag::Raw => Some(format!(
                "kcm v{version}: the flags and feature gates of kube-controller-manager v1.36"
            )),
        }
    }
}

/// pflag's syntax on every flag: a flag with a value takes the next word as it even when it
/// starts with '-' (so `--kube-api-qps -5` is the value -5, and `--controllers -ttl` a
/// list); a Go boolean (value name [`GO_BOOL`]) is a bare `--flag` or `--flag=BOOL`, never
/// `--flag BOOL`, read by Go's `strconv.ParseBool`.
fn pflag_syntax(arg: Arg) -> Arg {
    let go_bool = arg
        .get_value_names()
        .is_some_and(|names| names.len() == 1 && names[0] == GO_BOOL);
    if go_bool {
        return arg
            .num_args(0..=1)
            .default_missing_value("true")
            .require_equals(true)
            .action(ArgAction::Set)
            .value_parser(parse_go_bool);
    }
    if arg.get_action().takes_values() {
        return arg.allow_hyphen_values(true);
    }
    arg
}

/// Why the command line was rejected; the binary prints it and exits 1, as upstream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CliError {
    #[error("{flag} must be greater than 0, got {value}")]
    NotPositive { flag: &'static str, value: String },

    #[error("{flag} must not be empty")]
    Empty { flag: &'static str },

    #[error("{flag} {value} must be between 0 and 65535, inclusive; 0 turns it off")]
    PortRange { flag: &'static str, value: i64 },

    #[error(transparent)]
    FeatureGates(#[from] FeatureGateError),

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

    /// client-go's message for a lock kind other than leases.
    #[error("{0}")]
    ResourceLock(String),

    #[error("--master: {0:?} is not an http(s) URL")]
    Master(String),

    #[error("--tls-cert-file and --tls-private-key-file must be given together")]
    TlsPairIncomplete,

    #[error("--authorization-always-allow-paths: only a trailing * is allowed in {path:?}")]
    AlwaysAllowPathWildcard { path: String },

    #[error(transparent)]
    Tls(#[from] crate::serving::options::TlsOptionError),

    #[error(transparent)]
    RequestHeader(#[from] crate::serving::options::BlankRequestHeaderValue),
}

impl Options {
    /// Checks what clap cannot and resolves the options into [`Settings`].
    pub fn validate(&self) -> Result<Settings, CliError> {
        let generic = &self.generic;
        let controllers = &self.controllers;
        let logs = &self.logs_metrics;
        let concurrent_resource_quota_syncs = positive(
            "--concurrent-resource-quota-syncs",
            controllers.concurrent_resource_quota_syncs,
        )?;
        let concurrent_resourceclaim_syncs = positive(
            "--concurrent-resourceclaim-syncs",
            controllers.concurrent_resourceclaim_syncs,
        )?;
        let concurrent_disruption_syncs = positive(
            "--concurrent-disruption-syncs",
            controllers.concurrent_disruption_syncs,
        )?;
        // Rejects NaN and infinity too: neither is a usable client rate.
        if !(generic.kube_api_qps.is_finite() && generic.kube_api_qps > 0.0) {
            return Err(CliError::NotPositive {
                flag: "--kube-api-qps",
                value: generic.kube_api_qps.to_string(),
            });
        }
        let kube_api_burst = positive("--kube-api-burst", generic.kube_api_burst)?;

        let gates = FeatureGates::parse(&generic.feature_gates)?;
        let selection = select_controllers(&generic.controllers, &gates.gates)?;

        // Shadow mode never writes, so several shadows may run beside the real leader.
        let leader_election = if generic.leader_elect && !generic.shadow {
            Some(self.leader_election()?)
        } else {
            None
        };
        let master = generic.master.as_deref().map(master_url).transpose()?;

        let mut notes = Vec::new();
        let content_type = match generic.kube_api_content_type.as_deref() {
            None | Some(PROTOBUF) => ContentType::Protobuf,
            Some(JSON) => ContentType::Json,
            Some(other) => {
                notes.push(format!(
                    "--kube-api-content-type={other}: kcm reads {PROTOBUF} or {JSON}; reading {JSON}"
                ));
                ContentType::Json
            }
        };
        let mut unused_flags = generic.unused.given();
        unused_flags.extend(controllers.unused.given());
        unused_flags.extend(logs.unused.given());
        unused_flags.sort();

        let sync_period = controllers.resource_quota_sync_period.0;
        Ok(Settings {
            kubeconfig: generic.kubeconfig.clone(),
            master,
            enabled_controllers: selection.enabled,
            skipped_for_gates: selection.skipped_for_gates,
            feature_gates: gates.gates,
            concurrent_resource_quota_syncs,
            resource_quota_sync_period: (!sync_period.is_zero()).then_some(sync_period),
            concurrent_resourceclaim_syncs,
            concurrent_disruption_syncs,
            leader_election,
            http_listener: self.serving.http_listener()?,
            secure_serving: self.serving.secure_serving()?,
            kube_api_qps: generic.kube_api_qps,
            kube_api_burst,
            shadow: generic.shadow,
            log_format: logs.logging_format.or(logs.log_format).unwrap_or_default(),
            // klog levels are int32; below 0 logs as 0, above 255 as everything.
            verbosity: logs.verbosity.clamp(0, i32::from(u8::MAX)) as u8,
            vmodule: logs
                .vmodule
                .clone()
                .map(|rules| rules.0)
                .unwrap_or_default(),
            use_service_account_credentials: generic.use_service_account_credentials,
            controller_start_interval: generic.controller_start_interval.0,
            controller_shutdown_timeout: generic.controller_shutdown_timeout.0,
            min_resync_period: generic.min_resync_period.0,
            initial_list: if gates.gates.enabled(FeatureGate::WatchListClient) {
                InitialList::Streaming
            } else {
                InitialList::Paginated
            },
            content_type,
            profiling: generic.profiling,
            disabled_metrics: logs
                .disabled_metrics
                .iter()
                .filter(|name| !name.is_empty())
                .cloned()
                .collect(),
            unused_flags,
            notes,
            warnings: gates.warnings.iter().map(ToString::to_string).collect(),
        })
    }

    fn leader_election(&self) -> Result<LeaderElection, CliError> {
        let generic = &self.generic;
        let lease_duration = generic.leader_elect_lease_duration.0;
        let renew_deadline = generic.leader_elect_renew_deadline.0;
        let retry_period = generic.leader_elect_retry_period.0;
        validate_leader_election_timing(lease_duration, renew_deadline, retry_period)?;
        check_resource_lock(&generic.leader_elect_resource_lock)?;
        if generic.leader_elect_resource_namespace.is_empty() {
            return Err(CliError::Empty {
                flag: "--leader-elect-resource-namespace",
            });
        }
        if generic.leader_elect_resource_name.is_empty() {
            return Err(CliError::Empty {
                flag: "--leader-elect-resource-name",
            });
        }
        Ok(LeaderElection {
            lease_duration,
            renew_deadline,
            retry_period,
            resource_namespace: generic.leader_elect_resource_namespace.clone(),
            resource_name: generic.leader_elect_resource_name.clone(),
            warm_standby: generic.warm_standby,
        })
    }
}

fn positive(flag: &'static str, value: i32) -> Result<NonZeroU32, CliError> {
    u32::try_from(value)
        .ok()
        .and_then(NonZeroU32::new)
        .ok_or(CliError::NotPositive {
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::generic::controllers_help;
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
        assert_eq!(options.generic.kubeconfig, None);
        assert_eq!(options.generic.controllers, vec!["*"]);
        assert_eq!(options.generic.leader_elect_resource_name, "kcm");

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
                warm_standby: true,
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
            assert_eq!(options.generic.leader_elect, *leader_elect, "{args:?}");
            assert_eq!(options.generic.shadow, *shadow, "{args:?}");
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
        assert_eq!(
            settings(&["--concurrent-disruption-syncs=-1"])
                .unwrap_err()
                .to_string(),
            "--concurrent-disruption-syncs must be greater than 0, got -1"
        );
        assert_eq!(
            settings(&["--port=70000"]).unwrap_err().to_string(),
            "--port 70000 must be between 0 and 65535, inclusive; 0 turns it off"
        );
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
            assert_eq!(parse(&args).unwrap().logs_metrics.verbosity, 2);
        }
        assert_eq!(parse(&["--v=3"]).unwrap().logs_metrics.verbosity, 3);
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
        assert!(settings(&["--secure-port=70000"]).is_err());
        assert!(settings(&["--secure-port=-1"]).is_err());
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
    fn feature_gates_through_the_command_line() {
        let on = settings(&["--feature-gates=StorageVersionAPI=true"]).unwrap();
        assert!(on.feature_gates.enabled(FeatureGate::StorageVersionApi));
        assert_eq!(on.enabled_controllers, Controller::ALL.to_vec());
        assert!(on.warnings.is_empty());

        let prefixed = settings(&[
            "--feature-gates=kube:StorageVersionAPI=true",
            "--feature-gates",
            "kube:Nope=true",
        ])
        .unwrap();
        assert!(
            prefixed
                .feature_gates
                .enabled(FeatureGate::StorageVersionApi)
        );
        assert_eq!(prefixed.warnings, ["unrecognized feature gate: Nope"]);

        assert_eq!(on.initial_list, InitialList::Streaming);
        let listed = settings(&["--feature-gates=WatchListClient=false"]).unwrap();
        assert_eq!(listed.initial_list, InitialList::Paginated);

        assert_eq!(
            settings(&["--feature-gates=DRAAdminAccess=false"])
                .unwrap_err()
                .to_string(),
            "cannot set feature gate DRAAdminAccess to false, feature is locked to true"
        );
    }

    #[test]
    fn tls_and_front_proxy_flags_resolve() {
        use crate::serving::options::{CipherSuite, Curve, NamedCertKey, TlsVersion};
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
}
