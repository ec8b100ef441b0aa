//! What kcm runs with: the command line checked and resolved (by `cli::Options::validate`)
//! into plain data that the wiring (`app`), the controllers and the runtime read without
//! knowing about flags.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use crate::features::FeatureGates;
use crate::runtime::protobuf::ContentType;
use crate::runtime::watching::listwatch::InitialList;
pub use crate::serving::options::SecureServing;

/// The kube-controller-manager controllers kcm implements, in canonical order. The list is
/// here, below the controllers, because the settings say which run; all else about one (its
/// names, gates, RBAC, how it runs) is in its `Descriptor` (`crate::controllers`).
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
}

/// Everything the command line says, checked and resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub kubeconfig: Option<PathBuf>,
    /// `--master`: the API server URL, overriding the kubeconfig's (scheme defaulted to https).
    pub master: Option<http::Uri>,
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
    pub log_format: LogFormat,
    pub verbosity: u8,
    /// `--vmodule`: per-file verbosity, first match wins.
    pub vmodule: Vec<VmoduleRule>,
    /// `--use-service-account-credentials`: each controller acts as its own service account.
    pub use_service_account_credentials: bool,
    /// `--controller-start-interval`: the wait between starting two controllers.
    pub controller_start_interval: Duration,
    /// `--controller-shutdown-timeout`: how long running reconciles may take after SIGTERM.
    pub controller_shutdown_timeout: Duration,
    /// `--min-resync-period`: each shared store replays its objects to its handlers at a
    /// random period in [min, 2 x min); zero disables the replay.
    pub min_resync_period: Duration,
    /// How the shared informers and metadata watches get their initial state: streamed
    /// (gate `WatchListClient`, on by default) or listed in pages.
    pub initial_list: InitialList,
    /// `--kube-api-content-type`: pods and nodes are read in protobuf (upstream's default), or
    /// in JSON.
    pub content_type: ContentType,
    /// `--profiling`: `/debug/pprof/` on the serving ports.
    pub profiling: bool,
    /// `--disabled-metrics`: families neither registered nor served.
    pub disabled_metrics: Vec<String>,
    /// Flags given on the command line that kcm accepts but does not use, as `--name`.
    pub unused_flags: Vec<String>,
    /// Said once at start, at info level.
    pub notes: Vec<String>,
    /// Said once at start, at warning level (e.g. an unrecognized feature gate).
    pub warnings: Vec<String>,
}

/// Validated leader-election timing (client-go's rules hold) and Lease location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    pub resource_namespace: String,
    pub resource_name: String,
    /// `--warm-standby`: while not leading, keep the enabled controllers' shared stores
    /// synced (watches only: no queue, no write), so a takeover starts on synced stores.
    pub warm_standby: bool,
}

/// `--logging-format` (and kcm's older `--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// One `--vmodule` entry: events from source files matching `pattern` (klog's glob over the
/// file name without its extension, or over the path when the pattern has a `/`) log up to
/// verbosity `level`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmoduleRule {
    pub pattern: String,
    pub level: u8,
}

impl VmoduleRule {
    /// Whether the rule covers the source file `file` (a path as `tracing` records it, e.g.
    /// `src/controllers/ttl/sync.rs`). As klog: without a `/` the pattern is matched against
    /// the file name without its extension; with one, against the path without extension,
    /// here from any directory boundary on (Rust paths start at the crate, klog's at `/`).
    /// `*` matches any run of characters but `/`, `?` one such character.
    pub fn matches(&self, file: &str) -> bool {
        let stem = file.strip_suffix(".rs").unwrap_or(file);
        if !self.pattern.contains('/') {
            let name = stem.rsplit('/').next().unwrap_or(stem);
            return glob(self.pattern.as_bytes(), name.as_bytes());
        }
        std::iter::once(0)
            .chain(stem.match_indices('/').map(|(at, _)| at + 1))
            .any(|start| glob(self.pattern.as_bytes(), &stem.as_bytes()[start..]))
    }
}

/// `filepath.Match` without character classes: `*` and `?` never match `/`.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => {
            // Try every split of the run `*` may take, shortest first.
            let run = text.iter().take_while(|byte| **byte != b'/').count();
            (0..=run).any(|taken| glob(rest, &text[taken..]))
        }
        Some((b'?', rest)) => text
            .split_first()
            .is_some_and(|(first, tail)| *first != b'/' && glob(rest, tail)),
        Some((literal, rest)) => text
            .split_first()
            .is_some_and(|(first, tail)| first == literal && glob(rest, tail)),
    }
}

/// The verbosity a source file logs at: the first `--vmodule` rule covering it, else `-v`.
pub fn verbosity_for(file: Option<&str>, verbosity: u8, vmodule: &[VmoduleRule]) -> u8 {
    file.and_then(|file| vmodule.iter().find(|rule| rule.matches(file)))
        .map_or(verbosity, |rule| rule.level)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(pattern: &str) -> VmoduleRule {
        VmoduleRule {
            pattern: pattern.to_owned(),
            level: 4,
        }
    }

    #[test]
    fn vmodule_patterns_match_like_klog() {
        let file = "src/controllers/ttl/sync.rs";
        for pattern in [
            "sync",
            "s*",
            "*",
            "sy?c",
            "ttl/sync",
            "controllers/*/sync",
            "src/controllers/ttl/*",
        ] {
            assert!(rule(pattern).matches(file), "{pattern}");
        }
        for pattern in [
            "syn",
            "sync.rs",
            "ttl",
            "ttl/*/sync",
            "*/sync/",
            "?",
            "rollers/ttl/sync",
        ] {
            assert!(!rule(pattern).matches(file), "{pattern}");
        }
        let rules = [
            rule("informer*"),
            VmoduleRule {
                pattern: "*".into(),
                level: 1,
            },
        ];
        assert_eq!(
            verbosity_for(Some("src/runtime/watching/informer.rs"), 0, &rules),
            4
        );
        assert_eq!(verbosity_for(Some("src/app/lease.rs"), 0, &rules), 1);
        assert_eq!(verbosity_for(None, 2, &rules), 2);
        assert_eq!(verbosity_for(Some("src/app/lease.rs"), 2, &[]), 2);
    }
}
