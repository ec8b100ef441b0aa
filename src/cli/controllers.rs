//! Upstream's per-controller sections: the flags of kcm's controllers, and those of the
//! controllers kcm does not run (accepted and type-checked as upstream parses them).

use std::time::Duration;

use clap::Args;

use super::GO_BOOL;
use super::values::{GoDuration, go_float32, go_float64, go_int32};

/// Flags of the controllers kcm runs.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Controller flags")]
pub struct ControllerFlags {
    /// Resource quotas synced concurrently (must be > 0)
    #[arg(long, value_name = "N", value_parser = go_int32, default_value_t = 5)]
    pub concurrent_resource_quota_syncs: i32,

    /// Period of the full resync of every resource quota; 0 disables it
    #[arg(long, value_name = "DURATION", default_value_t = GoDuration(Duration::from_secs(300)))]
    pub resource_quota_sync_period: GoDuration,

    /// Resource claims synced concurrently (must be > 0)
    #[arg(long, value_name = "N", value_parser = go_int32, default_value_t = 50)]
    pub concurrent_resourceclaim_syncs: i32,

    /// Disruption budgets synced concurrently (must be > 0; kcm's own flag, upstream runs one
    /// worker)
    #[arg(long, value_name = "N", value_parser = go_int32, default_value_t = 1)]
    pub concurrent_disruption_syncs: i32,

    #[command(flatten)]
    pub unused: UnusedControllerFlags,
}

unused_flags! {
    /// Flags of the controllers kcm does not run.
    #[command(next_help_heading = "Flags of controllers kcm does not run (accepted, not used)")]
    pub struct UnusedControllerFlags {
        concurrent_service_syncs: i32 = "1", value_parser = go_int32;
        attach_detach_reconcile_sync_period: GoDuration = "1m0s";
        disable_attach_detach_reconcile_sync: bool = "false", value_name = GO_BOOL;
        disable_force_detach_on_timeout: bool = "false", value_name = GO_BOOL;
        cluster_signing_cert_file: String = "\"\"";
        cluster_signing_duration: GoDuration = "8760h0m0s";
        cluster_signing_key_file: String = "\"\"";
        cluster_signing_kube_apiserver_client_cert_file: String = "\"\"";
        cluster_signing_kube_apiserver_client_key_file: String = "\"\"";
        cluster_signing_kubelet_client_cert_file: String = "\"\"";
        cluster_signing_kubelet_client_key_file: String = "\"\"";
        cluster_signing_kubelet_serving_cert_file: String = "\"\"";
        cluster_signing_kubelet_serving_key_file: String = "\"\"";
        cluster_signing_legacy_unknown_cert_file: String = "\"\"";
        cluster_signing_legacy_unknown_key_file: String = "\"\"";
        concurrent_deployment_syncs: i32 = "5", value_parser = go_int32;
        concurrent_device_taint_eviction_syncs: i32 = "8", value_parser = go_int32;
        concurrent_statefulset_syncs: i32 = "5", value_parser = go_int32;
        concurrent_daemonset_syncs: i32 = "2", value_parser = go_int32;
        concurrent_endpoint_syncs: i32 = "5", value_parser = go_int32;
        endpoint_updates_batch_period: GoDuration = "0s";
        concurrent_service_endpoint_syncs: i32 = "5", value_parser = go_int32;
        endpointslice_updates_batch_period: GoDuration = "0s";
        max_endpoints_per_slice: i32 = "100", value_parser = go_int32;
        mirroring_concurrent_service_endpoint_syncs: i32 = "5", value_parser = go_int32;
        mirroring_endpointslice_updates_batch_period: GoDuration = "0s";
        mirroring_max_endpoints_per_subset: i32 = "1000", value_parser = go_int32;
        concurrent_ephemeralvolume_syncs: i32 = "5", value_parser = go_int32;
        concurrent_gc_syncs: i32 = "20", value_parser = go_int32;
        enable_garbage_collector: bool = "true", value_name = GO_BOOL;
        concurrent_horizontal_pod_autoscaler_syncs: i32 = "5", value_parser = go_int32;
        horizontal_pod_autoscaler_cpu_initialization_period: GoDuration = "5m0s";
        horizontal_pod_autoscaler_downscale_stabilization: GoDuration = "5m0s";
        horizontal_pod_autoscaler_initial_readiness_delay: GoDuration = "30s";
        horizontal_pod_autoscaler_sync_period: GoDuration = "15s";
        horizontal_pod_autoscaler_tolerance: f64 = "0.1", value_parser = go_float64;
        concurrent_job_syncs: i32 = "5", value_parser = go_int32;
        concurrent_cron_job_syncs: i32 = "5", value_parser = go_int32;
        legacy_service_account_token_clean_up_period: GoDuration = "8760h0m0s";
        concurrent_namespace_syncs: i32 = "10", value_parser = go_int32;
        namespace_sync_period: GoDuration = "5m0s";
        node_cidr_mask_size: i32 = "0", value_parser = go_int32;
        node_cidr_mask_size_ipv4: i32 = "0", value_parser = go_int32;
        node_cidr_mask_size_ipv6: i32 = "0", value_parser = go_int32;
        service_cluster_ip_range: String = "\"\"";
        large_cluster_size_threshold: i32 = "50", value_parser = go_int32;
        node_eviction_rate: f32 = "0.1", value_parser = go_float32;
        node_monitor_grace_period: GoDuration = "50s";
        node_startup_grace_period: GoDuration = "1m0s";
        secondary_node_eviction_rate: f32 = "0.01", value_parser = go_float32;
        unhealthy_zone_threshold: f32 = "0.55", value_parser = go_float32;
        enable_dynamic_provisioning: bool = "true", value_name = GO_BOOL;
        enable_hostpath_provisioner: bool = "false", value_name = GO_BOOL;
        flex_volume_plugin_dir: String = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/";
        pv_recycler_increment_timeout_nfs: i32 = "30", value_parser = go_int32;
        pv_recycler_minimum_timeout_hostpath: i32 = "60", value_parser = go_int32;
        pv_recycler_minimum_timeout_nfs: i32 = "300", value_parser = go_int32;
        pv_recycler_pod_template_filepath_hostpath: String = "\"\"";
        pv_recycler_pod_template_filepath_nfs: String = "\"\"";
        pv_recycler_timeout_increment_hostpath: i32 = "30", value_parser = go_int32;
        pvclaimbinder_sync_period: GoDuration = "15s";
        terminated_pod_gc_threshold: i32 = "12500", value_parser = go_int32;
        concurrent_replicaset_syncs: i32 = "5", value_parser = go_int32;
        concurrent_rc_syncs: i32 = "5", value_parser = go_int32;
        concurrent_serviceaccount_token_syncs: i32 = "5", value_parser = go_int32;
        root_ca_file: String = "\"\"";
        service_account_private_key_file: String = "\"\"";
        concurrent_ttl_after_finished_syncs: i32 = "5", value_parser = go_int32;
        concurrent_validating_admission_policy_status_syncs: i32 = "5", value_parser = go_int32;
    }
}
