//! Upstream's Generic, Debugging, Leader-migration and Misc sections (the client, the
//! controllers to run, leader election, feature gates), plus kcm's `--shadow`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values::{GoDuration, go_float32, go_int32};
use super::{CliError, GO_BOOL};
use crate::controllers::Controller;
use crate::features::FeatureGates;

/// --controllers' help, naming each controller and its aliases as its descriptor does.
pub(super) fn controllers_help() -> String {
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

pub(super) const FEATURE_GATES_HELP: &str = "Comma-separated Name=bool pairs, optionally \
prefixed with the component 'kube:' (the default); may be repeated. Every gate of \
kube-controller-manager v1.36 is known: an unknown one is a warning, a locked one refuses the \
other value. kcm reads StorageVersionAPI and APIServerIdentity (storageversion-gc), \
DRAAdminAccess, DRAPrioritizedList and DRAWorkloadResourceClaims (resourceclaim)";

/// The client, the controllers, leader election and feature gates.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Generic flags")]
pub struct GenericFlags {
    /// Path to a kubeconfig file; if unset, the in-cluster config is used, else the usual
    /// kubeconfig lookup ($KUBECONFIG, then ~/.kube/config)
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// The API server's address; overrides the kubeconfig's server (https:// when no scheme)
    #[arg(long, value_name = "URL")]
    pub master: Option<String>,

    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "*",
        help = controllers_help()
    )]
    pub controllers: Vec<String>,

    #[arg(long, value_name = "GATES", help = FEATURE_GATES_HELP)]
    pub feature_gates: Vec<String>,

    /// Sustained queries per second to the API server, per client (must be > 0)
    #[arg(long, value_name = "QPS", value_parser = go_float32, default_value_t = 20.0)]
    pub kube_api_qps: f32,

    /// Queries allowed in a burst above --kube-api-qps (must be > 0)
    #[arg(long, value_name = "N", value_parser = go_int32, default_value_t = 30)]
    pub kube_api_burst: i32,

    /// Content type kcm reads pods and nodes in: application/vnd.kubernetes.protobuf (JSON
    /// accepted when the server answers so) or application/json [default:
    /// application/vnd.kubernetes.protobuf]
    #[arg(long, value_name = "TYPE")]
    pub kube_api_content_type: Option<String>,

    /// Each controller uses its own service account's credentials (upstream's
    /// `system:serviceaccount:kube-system:<controller>` identities)
    #[arg(long, value_name = GO_BOOL, default_value_t = false)]
    pub use_service_account_credentials: bool,

    /// Wait between starting two controllers
    #[arg(long, value_name = "DURATION", default_value_t = GoDuration(Duration::ZERO))]
    pub controller_start_interval: GoDuration,

    /// How long running reconciles may take to finish after SIGTERM
    #[arg(long, value_name = "DURATION", default_value_t = GoDuration(Duration::from_secs(10)))]
    pub controller_shutdown_timeout: GoDuration,

    /// Each shared store replays its objects to its controllers at a random period between
    /// this and twice this (as upstream's informer resync); 0 disables it
    #[arg(long, value_name = "DURATION", default_value_t = GoDuration(Duration::from_secs(12 * 3600)))]
    pub min_resync_period: GoDuration,

    /// Elect a leader before running controllers, so replicas can run for high availability
    #[arg(long, value_name = GO_BOOL, default_value_t = true)]
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

    /// The lock object's kind; only 'leases' (upstream removed the others)
    #[arg(long, value_name = "KIND", default_value = "leases")]
    pub leader_elect_resource_lock: String,

    /// Namespace of the leader-election Lease
    #[arg(long, value_name = "NAMESPACE", default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,

    /// Name of the leader-election Lease (kcm's own, so kcm and kube-controller-manager can
    /// both run) [upstream default: kube-controller-manager]
    #[arg(long, value_name = "NAME", default_value = "kcm")]
    pub leader_elect_resource_name: String,

    /// While not leading, keep the shared stores synced (one watch per type, as much memory as
    /// the leader; no queue, no write), so a takeover writes at once instead of listing
    /// everything first; false: a standby opens no watch until it leads
    #[arg(long, value_name = GO_BOOL, default_value_t = true)]
    pub warm_standby: bool,

    /// Serve a CPU profile and heap statistics at /debug/pprof/ (authorized as /metrics)
    #[arg(long, value_name = GO_BOOL, default_value_t = true)]
    pub profiling: bool,

    /// Compute everything but never write to the API server; implies no leader election
    #[arg(long, value_name = GO_BOOL, default_value_t = false)]
    pub shadow: bool,

    #[command(flatten)]
    pub unused: UnusedGenericFlags,
}

unused_flags! {
    /// Generic, Debugging, Leader-migration and Misc flags of controllers, cloud and
    /// compatibility features kcm does not have.
    #[command(next_help_heading = "Generic flags accepted, not used by kcm")]
    pub struct UnusedGenericFlags {
        contention_profiling: bool = "false", value_name = GO_BOOL;
        enable_leader_migration: bool = "false", value_name = GO_BOOL;
        leader_migration_config: String = "\"\"";
        allocate_node_cidrs: bool = "false", value_name = GO_BOOL;
        cidr_allocator_type: String = "RangeAllocator";
        cloud_config: String = "\"\"";
        cloud_provider: String = "\"\"";
        cluster_cidr: String = "\"\"";
        cluster_name: String = "kubernetes";
        configure_cloud_routes: bool = "true", value_name = GO_BOOL;
        emulated_version: Vec<String> = "[]", value_delimiter = ',';
        external_cloud_volume_plugin: String = "\"\"";
        min_compatibility_version: Vec<String> = "[]", value_delimiter = ',';
        node_monitor_period: GoDuration = "5s";
        route_reconciliation_period: GoDuration = "10s";
        unsupported_kube_api_over_localhost: bool = "false", value_name = GO_BOOL;
    }
}

/// client-go's `resourcelock.New`: only leases remain; its messages for the removed kinds.
pub(super) fn check_resource_lock(lock: &str) -> Result<(), CliError> {
    let message = match lock {
        "leases" => return Ok(()),
        "" => "--leader-elect-resource-lock: Required value".to_owned(),
        "endpoints" | "configmaps" | "endpointsleases" => {
            format!("{lock} lock is removed, migrate to leases")
        }
        // Upstream's wording differs for this one.
        "configmapsleases" => "configmapsleases lock is removed, migrated to leases".to_owned(),
        _ => format!("Invalid lock-type {lock}"),
    };
    Err(CliError::ResourceLock(message))
}

/// `--master` as client-go's `DefaultServerURL` reads it: a URL, https:// when no scheme.
pub(super) fn master_url(master: &str) -> Result<http::Uri, CliError> {
    let url = if master.contains("://") {
        master.to_owned()
    } else {
        format!("https://{master}")
    };
    match url.parse::<http::Uri>() {
        Ok(uri) if uri.host().is_some() && matches!(uri.scheme_str(), Some("http" | "https")) => {
            Ok(uri)
        }
        _ => Err(CliError::Master(master.to_owned())),
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

pub(super) fn valid_controller_names_list() -> String {
    let mut names = vec!["*".to_owned()];
    for controller in Controller::ALL {
        names.push(controller.canonical_name().to_owned());
        names.extend(controller.aliases().iter().map(|alias| (*alias).to_owned()));
    }
    names.join(", ")
}

pub(super) fn quoted_list(items: &[String]) -> String {
    items
        .iter()
        .map(|item| format!("{item:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}
