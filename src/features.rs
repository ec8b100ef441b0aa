//! Feature gates as kube-controller-manager v1.36 knows them: every gate its `--help` lists
//! plus the GA and deprecated gates of `pkg/features` that v1.36 still accepts, each with its
//! stage, default, lock and dependencies; and `--feature-gates` applied to them with
//! component-base's rules and messages.
//!
//! Controllers and the runtime read the gates they care about through [`FeatureGate`] and
//! [`FeatureGates::enabled`]; the command line only produces a [`FeatureGates`].

use std::fmt;

/// A gate's maturity at v1.36 (component-base's `prerelease`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Alpha,
    Beta,
    Ga,
    Deprecated,
}

/// One gate of upstream's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateSpec {
    pub name: &'static str,
    pub stage: Stage,
    pub default: bool,
    /// `LockToDefault`: the other value is refused.
    pub locked: bool,
    /// Gates that must be on while this one is (upstream's `AddDependencies`).
    pub depends_on: &'static [&'static str],
}

const fn spec(
    name: &'static str,
    stage: Stage,
    default: bool,
    locked: bool,
    depends_on: &'static [&'static str],
) -> GateSpec {
    GateSpec {
        name,
        stage,
        default,
        locked,
        depends_on,
    }
}

use Stage::{Alpha, Beta, Deprecated, Ga};

/// Every gate, sorted by name (looked up by binary search). Read from v1.36.2's `--help`
/// (alpha and beta gates) and `pkg/features/kube_features.go` (stages at 1.36, locks,
/// dependencies on other gates of this table).
pub static GATES: &[GateSpec] = &[
    spec("APIResponseCompression", Beta, true, false, &[]),
    spec("APIServerIdentity", Beta, true, false, &[]),
    spec("APIServingWithRoutine", Alpha, false, false, &[]),
    spec("AllAlpha", Alpha, false, false, &[]),
    spec("AllBeta", Beta, false, false, &[]),
    spec("AllowDNSOnlyNodeCSR", Deprecated, false, false, &[]),
    spec(
        "AllowInsecureKubeletCertificateSigningRequests",
        Deprecated,
        false,
        false,
        &[],
    ),
    spec(
        "AllowOverwriteTerminationGracePeriodSeconds",
        Deprecated,
        true,
        true,
        &[],
    ),
    spec("AllowParsingUserUIDFromCertAuth", Beta, true, false, &[]),
    spec("AllowServiceExternalIPs", Ga, true, false, &[]),
    spec(
        "AllowUnsafeMalformedObjectDeletion",
        Alpha,
        false,
        false,
        &[],
    ),
    spec("AnyVolumeDataSource", Ga, true, true, &[]),
    spec("AtomicFIFO", Beta, true, false, &[]),
    spec("AuthorizeNodeWithSelectors", Ga, true, true, &[]),
    spec(
        "AuthorizePodWebsocketUpgradeCreatePermission",
        Beta,
        true,
        false,
        &[],
    ),
    spec("CBORServingAndStorage", Alpha, false, false, &[]),
    spec("CPUManagerPolicyAlphaOptions", Alpha, false, false, &[]),
    spec("CPUManagerPolicyBetaOptions", Beta, true, false, &[]),
    spec("CPUManagerPolicyOptions", Ga, true, true, &[]),
    spec("CRDObservedGenerationTracking", Beta, true, false, &[]),
    spec("CRIListStreaming", Alpha, false, false, &[]),
    spec("CSIServiceAccountTokenSecrets", Ga, true, true, &[]),
    spec("CSIVolumeHealth", Alpha, false, false, &[]),
    spec(
        "ChangeContainerStatusOnKubeletRestart",
        Deprecated,
        false,
        false,
        &[],
    ),
    spec(
        "ClearingNominatedNodeNameAfterBinding",
        Beta,
        true,
        false,
        &[],
    ),
    spec("ClientsAllowCARotation", Beta, true, false, &[]),
    spec("ClientsAllowCBOR", Alpha, false, false, &[]),
    spec("ClientsAllowTLSCacheGC", Beta, true, false, &[]),
    spec("ClientsPreferCBOR", Alpha, false, false, &[]),
    spec(
        "CloudControllerManagerWatchBasedRoutesReconciliation",
        Alpha,
        false,
        false,
        &[],
    ),
    spec("CloudControllerManagerWebhook", Alpha, false, false, &[]),
    spec("ClusterTrustBundle", Beta, false, false, &[]),
    spec(
        "ClusterTrustBundleProjection",
        Beta,
        false,
        false,
        &["ClusterTrustBundle"],
    ),
    spec("ComponentFlagz", Beta, true, false, &[]),
    spec("ComponentStatusz", Beta, true, false, &[]),
    spec("ConcurrentWatchObjectDecode", Beta, false, false, &[]),
    spec("ConstrainedImpersonation", Beta, true, false, &[]),
    spec("ContainerCheckpoint", Beta, true, false, &[]),
    spec("ContainerRestartRules", Beta, true, false, &[]),
    spec("ContainerStopSignals", Alpha, false, false, &[]),
    spec("ContextualLogging", Beta, true, false, &[]),
    spec(
        "ControllerManagerReleaseLeaderElectionLockOnExit",
        Alpha,
        false,
        false,
        &[],
    ),
    spec("CoordinatedLeaderElection", Beta, false, false, &[]),
    spec("CrossNamespaceVolumeDataSource", Alpha, false, false, &[]),
    spec("CustomCPUCFSQuotaPeriod", Ga, true, false, &[]),
    spec(
        "DRAAdminAccess",
        Ga,
        true,
        true,
        &["DynamicResourceAllocation"],
    ),
    spec(
        "DRAConsumableCapacity",
        Beta,
        true,
        false,
        &["DynamicResourceAllocation"],
    ),
    spec(
        "DRADeviceBindingConditions",
        Beta,
        true,
        false,
        &["DynamicResourceAllocation", "DRAResourceClaimDeviceStatus"],
    ),
    spec(
        "DRADeviceTaintRules",
        Beta,
        false,
        false,
        &["DRADeviceTaints"],
    ),
    spec(
        "DRADeviceTaints",
        Beta,
        true,
        false,
        &["DynamicResourceAllocation"],
    ),
    spec(
        "DRAExtendedResource",
        Beta,
        true,
        false,
        &["DynamicResourceAllocation"],
    ),
    spec(
        "DRAListTypeAttributes",
        Alpha,
        false,
        false,
        &["DynamicResourceAllocation"],
    ),
    spec(
        "DRANodeAllocatableResources",
        Alpha,
        false,
        false,
        &["DynamicResourceAllocation"],
    ),
    spec(
        "DRAPartitionableDevices",
        Beta,
        true,
        false,
        &["DynamicResourceAllocation"],
    ),
    spec(
        "DRAPrioritizedList",
        Ga,
        true,
        false,
        &["DynamicResourceAllocation"],
    ),
    spec("DRAResourceClaimDeviceStatus", Beta, true, false, &[]),
    spec(
        "DRAResourceClaimGranularStatusAuthorization",
        Beta,
        true,
        false,
        &["DynamicResourceAllocation", "DRAResourceClaimDeviceStatus"],
    ),
    spec(
        "DRAResourcePoolStatus",
        Alpha,
        false,
        false,
        &["DynamicResourceAllocation"],
    ),
    spec(
        "DRASchedulerFilterTimeout",
        Beta,
        true,
        false,
        &["DynamicResourceAllocation"],
    ),
    spec(
        "DRAWorkloadResourceClaims",
        Alpha,
        false,
        false,
        &["DynamicResourceAllocation", "GenericWorkload"],
    ),
    spec("DeclarativeValidationBeta", Beta, true, false, &[]),
    spec(
        "DeploymentReplicaSetTerminatingReplicas",
        Beta,
        true,
        false,
        &[],
    ),
    spec("DetectCacheInconsistency", Beta, true, false, &[]),
    spec(
        "DisableAllocatorDualWrite",
        Ga,
        true,
        true,
        &["MultiCIDRServiceAllocator"],
    ),
    spec(
        "DisableCPUQuotaWithExclusiveCPUs",
        Deprecated,
        true,
        false,
        &[],
    ),
    spec("DisableNodeKubeProxyVersion", Deprecated, true, true, &[]),
    spec("DynamicResourceAllocation", Ga, true, true, &[]),
    spec("EnvFiles", Beta, true, false, &[]),
    spec("EventedPLEG", Alpha, false, false, &[]),
    spec("ExecProbeTimeout", Ga, true, true, &[]),
    spec(
        "ExtendWebSocketsToKubelet",
        Beta,
        true,
        false,
        &["NodeDeclaredFeatures"],
    ),
    spec("ExternalServiceAccountTokenSigner", Ga, true, true, &[]),
    spec("GangScheduling", Alpha, false, false, &["GenericWorkload"]),
    spec("GenericWorkload", Alpha, false, false, &[]),
    spec("GitRepoVolumeDriver", Deprecated, true, true, &[]),
    spec("GracefulNodeShutdown", Beta, true, false, &[]),
    spec(
        "GracefulNodeShutdownBasedOnPodPriority",
        Beta,
        true,
        false,
        &["GracefulNodeShutdown"],
    ),
    spec("HPAConfigurableTolerance", Beta, true, false, &[]),
    spec("HPAScaleToZero", Alpha, false, false, &[]),
    spec("HostnameOverride", Beta, true, false, &[]),
    spec("ImageMaximumGCAge", Ga, true, true, &[]),
    spec("ImageVolume", Ga, true, true, &[]),
    spec(
        "ImageVolumeWithDigest",
        Alpha,
        false,
        false,
        &["ImageVolume"],
    ),
    spec("InOrderInformersBatchProcess", Beta, true, false, &[]),
    spec(
        "InPlacePodLevelResourcesVerticalScaling",
        Beta,
        true,
        false,
        &[
            "InPlacePodVerticalScaling",
            "PodLevelResources",
            "NodeDeclaredFeatures",
        ],
    ),
    spec("InPlacePodVerticalScaling", Ga, true, true, &[]),
    spec(
        "InPlacePodVerticalScalingExclusiveCPUs",
        Alpha,
        false,
        false,
        &["InPlacePodVerticalScaling"],
    ),
    spec(
        "InPlacePodVerticalScalingExclusiveMemory",
        Alpha,
        false,
        false,
        &["InPlacePodVerticalScaling"],
    ),
    spec(
        "InPlacePodVerticalScalingInitContainers",
        Beta,
        true,
        false,
        &["InPlacePodVerticalScaling", "NodeDeclaredFeatures"],
    ),
    spec("JobBackoffLimitPerIndex", Ga, true, true, &[]),
    spec("JobManagedBy", Ga, true, true, &[]),
    spec("JobPodReplacementPolicy", Ga, true, true, &[]),
    spec("JobSuccessPolicy", Ga, true, true, &[]),
    spec("KubeletCgroupDriverFromCRI", Ga, true, true, &[]),
    spec("KubeletCrashLoopBackOffMax", Beta, true, false, &[]),
    spec("KubeletEnsureSecretPulledImages", Beta, true, false, &[]),
    spec("KubeletFineGrainedAuthz", Ga, true, true, &[]),
    spec("KubeletInUserNamespace", Alpha, false, false, &[]),
    spec("KubeletPSI", Ga, true, true, &[]),
    spec("KubeletPodResourcesDynamicResources", Ga, true, true, &[]),
    spec("KubeletPodResourcesGet", Ga, true, true, &[]),
    spec(
        "KubeletPodResourcesListUseActivePods",
        Deprecated,
        true,
        false,
        &[],
    ),
    spec(
        "KubeletRegistrationGetOnExistsOnly",
        Deprecated,
        false,
        false,
        &[],
    ),
    spec("KubeletSeparateDiskGC", Beta, true, false, &[]),
    spec(
        "KubeletServiceAccountTokenForCredentialProviders",
        Beta,
        true,
        false,
        &[],
    ),
    spec("KubeletTracing", Ga, true, true, &[]),
    spec("ListFromCacheSnapshot", Beta, true, false, &[]),
    spec(
        "LocalStorageCapacityIsolationFSQuotaMonitoring",
        Beta,
        false,
        false,
        &[],
    ),
    spec("LogarithmicScaleDown", Ga, true, true, &[]),
    spec("LoggingAlphaOptions", Alpha, false, false, &[]),
    spec("LoggingBetaOptions", Beta, true, false, &[]),
    spec(
        "ManifestBasedAdmissionControlConfig",
        Alpha,
        false,
        false,
        &[],
    ),
    spec("MatchLabelKeysInPodAffinity", Ga, true, true, &[]),
    spec("MatchLabelKeysInPodTopologySpread", Beta, true, false, &[]),
    spec(
        "MatchLabelKeysInPodTopologySpreadSelectorMerge",
        Beta,
        true,
        false,
        &["MatchLabelKeysInPodTopologySpread"],
    ),
    spec("MaxUnavailableStatefulSet", Beta, false, false, &[]),
    spec("MemoryQoS", Alpha, false, false, &[]),
    spec("MinimumKubeletVersion", Alpha, false, false, &[]),
    spec("MultiCIDRServiceAllocator", Ga, true, true, &[]),
    spec("MutableCSINodeAllocatableCount", Ga, true, true, &[]),
    spec("MutablePVNodeAffinity", Alpha, false, false, &[]),
    spec(
        "MutablePodResourcesForSuspendedJobs",
        Beta,
        true,
        false,
        &[],
    ),
    spec(
        "MutableSchedulingDirectivesForSuspendedJobs",
        Beta,
        true,
        false,
        &[],
    ),
    spec("NFTablesProxyMode", Ga, true, true, &[]),
    spec("NativeHistograms", Alpha, false, false, &[]),
    spec("NodeDeclaredFeatures", Beta, true, false, &[]),
    spec(
        "NodeInclusionPolicyInPodTopologySpread",
        Ga,
        true,
        true,
        &[],
    ),
    spec("NodeLogQuery", Ga, true, true, &[]),
    spec("NodeSwap", Ga, true, true, &[]),
    spec("NominatedNodeNameForExpectation", Beta, true, false, &[]),
    spec("OpenAPIEnums", Beta, true, false, &[]),
    spec("OpportunisticBatching", Beta, true, false, &[]),
    spec("OrderedNamespaceDeletion", Ga, true, true, &[]),
    spec("PLEGOnDemandRelist", Beta, true, false, &[]),
    spec(
        "PersistentVolumeClaimUnusedSinceTime",
        Alpha,
        false,
        false,
        &[],
    ),
    spec("PodAndContainerStatsFromCRI", Alpha, false, false, &[]),
    spec(
        "PodCertificateRequest",
        Beta,
        false,
        false,
        &["AuthorizeNodeWithSelectors"],
    ),
    spec("PodDeletionCost", Beta, true, false, &[]),
    spec(
        "PodLevelResourceManagers",
        Alpha,
        false,
        false,
        &["PodLevelResources"],
    ),
    spec("PodLevelResources", Beta, true, false, &[]),
    spec("PodLifecycleSleepAction", Ga, true, true, &[]),
    spec(
        "PodLifecycleSleepActionAllowZero",
        Ga,
        true,
        true,
        &["PodLifecycleSleepAction"],
    ),
    spec("PodLogsQuerySplitStreams", Alpha, false, false, &[]),
    spec("PodObservedGenerationTracking", Ga, true, true, &[]),
    spec("PodReadyToStartContainersCondition", Beta, true, false, &[]),
    spec("PodSchedulingReadiness", Ga, true, true, &[]),
    spec("PodTopologyLabelsAdmission", Beta, true, false, &[]),
    spec("PodsAPI", Alpha, false, false, &[]),
    spec("PortForwardWebsockets", Beta, true, false, &[]),
    spec("PreferSameTrafficDistribution", Ga, true, true, &[]),
    spec("PreventStaticPodAPIReferences", Beta, true, false, &[]),
    spec("ProcMountType", Ga, true, true, &["UserNamespacesSupport"]),
    spec("QOSReserved", Alpha, false, false, &[]),
    spec("RecoverVolumeExpansionFailure", Ga, true, true, &[]),
    spec("RecursiveReadOnlyMounts", Ga, true, true, &[]),
    spec(
        "ReduceDefaultCrashLoopBackOffDecay",
        Alpha,
        false,
        false,
        &[],
    ),
    spec("RelaxedDNSSearchValidation", Ga, true, true, &[]),
    spec("RelaxedEnvironmentVariableValidation", Ga, true, true, &[]),
    spec("RelaxedServiceNameValidation", Beta, true, false, &[]),
    spec("ReloadKubeletClientCAFile", Beta, true, false, &[]),
    spec("ReloadKubeletServerCertificateFile", Beta, true, false, &[]),
    spec("RemoteRequestHeaderUID", Beta, true, false, &[]),
    spec(
        "ResourceHealthStatus",
        Beta,
        true,
        false,
        &["DynamicResourceAllocation"],
    ),
    spec(
        "ResourceHealthStatusMessage",
        Beta,
        true,
        false,
        &["ResourceHealthStatus"],
    ),
    spec(
        "RestartAllContainersOnContainerExits",
        Beta,
        true,
        false,
        &["ContainerRestartRules", "NodeDeclaredFeatures"],
    ),
    spec("RotateKubeletServerCertificate", Beta, true, false, &[]),
    spec("RouteExternalCertificate", Alpha, false, false, &[]),
    spec("RuntimeClassInImageCriApi", Alpha, false, false, &[]),
    spec("SELinuxChangePolicy", Ga, true, true, &[]),
    spec("SELinuxMount", Beta, false, false, &[]),
    spec("SELinuxMountReadWriteOncePod", Ga, true, true, &[]),
    spec("SchedulerAsyncAPICalls", Beta, false, false, &[]),
    spec("SchedulerAsyncPreemption", Beta, true, false, &[]),
    spec("SchedulerPopFromBackoffQ", Beta, true, false, &[]),
    spec("SchedulerQueueingHints", Ga, true, true, &[]),
    spec("SeparateTaintEvictionController", Ga, true, true, &[]),
    spec(
        "ServiceAccountNodeAudienceRestriction",
        Beta,
        true,
        false,
        &[],
    ),
    spec("ServiceAccountTokenJTI", Ga, true, true, &[]),
    spec(
        "ServiceAccountTokenNodeBinding",
        Ga,
        true,
        true,
        &["ServiceAccountTokenNodeBindingValidation"],
    ),
    spec(
        "ServiceAccountTokenNodeBindingValidation",
        Ga,
        true,
        true,
        &[],
    ),
    spec("ServiceAccountTokenPodNodeInfo", Ga, true, true, &[]),
    spec("ServiceCIDRStatusFieldWiping", Deprecated, true, false, &[]),
    spec("ShardedListAndWatch", Alpha, false, false, &[]),
    spec("SidecarContainers", Ga, true, true, &[]),
    spec("SizeBasedListCostEstimate", Beta, true, false, &[]),
    spec(
        "StaleControllerConsistencyDaemonSet",
        Beta,
        true,
        false,
        &[],
    ),
    spec("StaleControllerConsistencyJob", Beta, true, false, &[]),
    spec(
        "StaleControllerConsistencyReplicaSet",
        Beta,
        true,
        false,
        &[],
    ),
    spec(
        "StaleControllerConsistencyStatefulSet",
        Beta,
        true,
        false,
        &[],
    ),
    spec(
        "StatefulSetSemanticRevisionComparison",
        Beta,
        true,
        false,
        &[],
    ),
    spec("StorageCapacityScoring", Alpha, false, false, &[]),
    spec("StorageNamespaceIndex", Deprecated, true, false, &[]),
    spec("StoragePerformantSecurityPolicy", Alpha, false, false, &[]),
    spec("StorageVersionAPI", Alpha, false, false, &[]),
    spec("StorageVersionHash", Beta, true, false, &[]),
    spec("StorageVersionMigrator", Beta, false, false, &[]),
    spec("StreamingCollectionEncodingToJSON", Ga, true, true, &[]),
    spec("StreamingCollectionEncodingToProtobuf", Ga, true, true, &[]),
    spec("StrictIPCIDRValidation", Beta, true, false, &[]),
    spec(
        "StructuredAuthenticationConfigurationEgressSelector",
        Beta,
        true,
        false,
        &[],
    ),
    spec(
        "StructuredAuthenticationConfigurationJWKSMetrics",
        Beta,
        true,
        false,
        &[],
    ),
    spec("SupplementalGroupsPolicy", Ga, true, true, &[]),
    spec(
        "TaintTolerationComparisonOperators",
        Alpha,
        false,
        false,
        &[],
    ),
    spec(
        "TokenRequestServiceAccountUIDValidation",
        Beta,
        true,
        false,
        &[],
    ),
    spec(
        "TopologyAwareWorkloadScheduling",
        Alpha,
        false,
        false,
        &["GenericWorkload"],
    ),
    spec(
        "TopologyManagerPolicyAlphaOptions",
        Alpha,
        false,
        false,
        &[],
    ),
    spec("TopologyManagerPolicyBetaOptions", Beta, true, false, &[]),
    spec("TopologyManagerPolicyOptions", Ga, true, true, &[]),
    spec(
        "TranslateStreamCloseWebsocketRequests",
        Beta,
        true,
        false,
        &[],
    ),
    spec("UnauthenticatedHTTP2DOSMitigation", Beta, true, false, &[]),
    spec(
        "UnknownVersionInteroperabilityProxy",
        Beta,
        true,
        false,
        &[],
    ),
    spec("UnlockWhileProcessingFIFO", Beta, true, false, &[]),
    spec(
        "UserNamespacesHostNetworkSupport",
        Alpha,
        false,
        false,
        &["UserNamespacesSupport", "NodeDeclaredFeatures"],
    ),
    spec("UserNamespacesSupport", Ga, true, true, &[]),
    spec("VolumeAttributesClass", Ga, true, true, &[]),
    spec("VolumeLimitScaling", Alpha, false, false, &[]),
    spec(
        "WatchCacheInitializationPostStartHook",
        Beta,
        true,
        false,
        &[],
    ),
    spec("WatchList", Beta, true, false, &[]),
    spec("WatchListClient", Beta, true, false, &[]),
    spec("WinDSR", Ga, true, true, &[]),
    spec("WinOverlay", Ga, true, true, &[]),
    spec("WindowsCPUAndMemoryAffinity", Alpha, false, false, &[]),
    spec(
        "WindowsGracefulNodeShutdown",
        Beta,
        true,
        false,
        &["GracefulNodeShutdown"],
    ),
    spec("WindowsHostNetwork", Deprecated, false, false, &[]),
    spec(
        "WorkloadAwarePreemption",
        Alpha,
        false,
        false,
        &["GangScheduling"],
    ),
    spec("WorkloadWithJob", Alpha, false, false, &["GenericWorkload"]),
];

/// Position of `name` in [`GATES`] (exact, case-sensitive, as Kubernetes matches).
fn gate_index(name: &str) -> Option<usize> {
    GATES.binary_search_by(|gate| gate.name.cmp(name)).ok()
}

/// The gates kcm's code reads (a typed handle into [`GATES`]).
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

    /// Its row of [`GATES`]; every variant has one (a unit test checks).
    pub fn spec(self) -> &'static GateSpec {
        &GATES[self.index()]
    }

    fn index(self) -> usize {
        gate_index(self.name()).unwrap_or_else(|| unreachable!("{} is in GATES", self.name()))
    }

    pub fn default_enabled(self) -> bool {
        self.spec().default
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

/// Effective value of every gate of [`GATES`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    // Indexed like GATES.
    enabled: [bool; GATE_COUNT],
}

const GATE_COUNT: usize = 226;

impl Default for FeatureGates {
    fn default() -> Self {
        let mut enabled = [false; GATE_COUNT];
        for (slot, gate) in enabled.iter_mut().zip(GATES) {
            *slot = gate.default;
        }
        Self { enabled }
    }
}

/// Only the gates that differ from their defaults: the whole table would drown a log line.
impl fmt::Debug for FeatureGates {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_map()
            .entries(
                GATES
                    .iter()
                    .zip(self.enabled)
                    .filter(|(gate, enabled)| gate.default != *enabled)
                    .map(|(gate, enabled)| (gate.name, enabled)),
            )
            .finish()
    }
}

/// Why `--feature-gates` was refused; the messages are component-base's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    #[error("missing bool value for {name}")]
    MissingBool { name: String },
    #[error(
        "invalid value of {name}={value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax"
    )]
    InvalidBool { name: String, value: String },
    #[error("component not registered: {component}")]
    UnknownComponent { component: String },
    #[error(
        "set kube feature gates with default empty prefix or kube: prefix consistently, do not mix use"
    )]
    MixedPrefixes,
    #[error("cannot set feature gate {name} to {value}, feature is locked to {locked_to}")]
    Locked {
        name: String,
        value: bool,
        locked_to: bool,
    },
    #[error("{name} is enabled, but depends on features that are disabled: [{}]", .disabled.join(" "))]
    DependencyDisabled {
        name: &'static str,
        disabled: Vec<&'static str>,
    },
    /// Several errors at once, printed as apimachinery's `utilerrors.Aggregate` does.
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Several(Vec<FeatureGateError>),
}

/// What upstream logs while applying the gates, and kcm logs at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeatureGateWarning {
    Unrecognized(String),
    /// Setting a GA or deprecated gate, which upstream will remove.
    Removable {
        name: &'static str,
        stage: Stage,
        value: bool,
    },
}

impl fmt::Display for FeatureGateWarning {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FeatureGateWarning::Unrecognized(name) => {
                write!(formatter, "unrecognized feature gate: {name}")
            }
            FeatureGateWarning::Removable { name, stage, value } => {
                let stage = if *stage == Stage::Deprecated {
                    "deprecated"
                } else {
                    "GA"
                };
                write!(
                    formatter,
                    "Warning: setting {stage} feature gate. It will be removed in a future \
                     release. featureGate=\"{name}\" value={value}"
                )
            }
        }
    }
}

/// The gates resolved from `--feature-gates`, with what to warn about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedFeatureGates {
    pub gates: FeatureGates,
    pub warnings: Vec<FeatureGateWarning>,
}

/// The component prefix kube-controller-manager registers; an unprefixed pair means it too.
const KUBE_COMPONENT: &str = "kube";

impl FeatureGates {
    pub fn enabled(&self, gate: FeatureGate) -> bool {
        self.enabled[gate.index()]
    }

    /// A gate by its Kubernetes name; `None` for a name not in [`GATES`].
    pub fn enabled_by_name(&self, name: &str) -> Option<bool> {
        gate_index(name).map(|index| self.enabled[index])
    }

    pub fn set(&mut self, gate: FeatureGate, enabled: bool) {
        self.enabled[gate.index()] = enabled;
    }

    /// Every gate kcm's code reads, with its effective value, in `FeatureGate::ALL` order.
    pub fn iter(&self) -> impl Iterator<Item = (FeatureGate, bool)> + '_ {
        FeatureGate::ALL
            .into_iter()
            .map(|gate| (gate, self.enabled(gate)))
    }

    /// [`FeatureGates::parse`] without the warnings.
    pub fn from_flag_values<S: AsRef<str>>(values: &[S]) -> Result<FeatureGates, FeatureGateError> {
        Self::parse(values).map(|parsed| parsed.gates)
    }

    /// Applies `--feature-gates` values over the defaults as component-base does: each value
    /// is `[component:]Name=bool,...` (`kube:` is the only component and the default; mixing
    /// prefixed and unprefixed pairs is refused); a later pair for a gate wins; an unknown
    /// gate is a warning; a locked gate refuses the other value; `AllAlpha`/`AllBeta` set
    /// every gate of their stage not set by name; then every enabled gate's dependencies
    /// must be enabled.
    pub fn parse<S: AsRef<str>>(values: &[S]) -> Result<ParsedFeatureGates, FeatureGateError> {
        // ColonSeparatedMultimapStringString with an allowed empty key.
        let mut unprefixed = Vec::new();
        let mut prefixed = Vec::new();
        let mut other_components = Vec::new();
        for pair in values
            .iter()
            .flat_map(|value| value.as_ref().split(','))
            .filter(|pair| !pair.is_empty())
        {
            match pair.split_once(':') {
                None => unprefixed.push(pair.trim()),
                Some((component, pair)) if component.trim() == KUBE_COMPONENT => {
                    prefixed.push(pair.trim())
                }
                Some((component, _)) => other_components.push(component.trim().to_owned()),
            }
        }
        if !unprefixed.is_empty() && !prefixed.is_empty() {
            return Err(FeatureGateError::MixedPrefixes);
        }
        if let Some(component) = other_components.into_iter().min() {
            return Err(FeatureGateError::UnknownComponent { component });
        }

        // featureGate.Set: every pair must be NAME=bool; the last pair for a name wins.
        let mut requested: Vec<(&str, bool)> = Vec::new();
        for pair in unprefixed.into_iter().chain(prefixed) {
            if pair.is_empty() {
                continue;
            }
            let Some((name, value)) = pair.split_once('=') else {
                return Err(FeatureGateError::MissingBool {
                    name: pair.trim().to_owned(),
                });
            };
            let (name, value) = (name.trim(), value.trim());
            let value = crate::k8s::golang::parse_bool(value).ok_or_else(|| {
                FeatureGateError::InvalidBool {
                    name: name.to_owned(),
                    value: value.to_owned(),
                }
            })?;
            requested.retain(|(seen, _)| *seen != name);
            requested.push((name, value));
        }
        // Upstream walks a map; sorting makes the order of warnings and errors stable.
        requested.sort_by_key(|(name, _)| *name);

        let mut gates = FeatureGates::default();
        let mut explicit = [false; GATE_COUNT];
        let mut warnings = Vec::new();
        let mut errors = Vec::new();
        let mut all_stage = Vec::new();
        for (name, value) in requested {
            let Some(index) = gate_index(name) else {
                warnings.push(FeatureGateWarning::Unrecognized(name.to_owned()));
                continue;
            };
            let spec = &GATES[index];
            if spec.locked && spec.default != value {
                errors.push(FeatureGateError::Locked {
                    name: name.to_owned(),
                    value,
                    locked_to: spec.default,
                });
                continue;
            }
            gates.enabled[index] = value;
            explicit[index] = true;
            match spec.name {
                "AllAlpha" => all_stage.push((Stage::Alpha, value)),
                "AllBeta" => all_stage.push((Stage::Beta, value)),
                _ if matches!(spec.stage, Stage::Ga | Stage::Deprecated) => {
                    warnings.push(FeatureGateWarning::Removable {
                        name: spec.name,
                        stage: spec.stage,
                        value,
                    })
                }
                _ => {}
            }
        }
        match errors.len() {
            0 => {}
            1 => return Err(errors.remove(0)),
            _ => return Err(FeatureGateError::Several(errors)),
        }
        for (stage, value) in all_stage {
            for (index, gate) in GATES.iter().enumerate() {
                if gate.stage == stage && !explicit[index] {
                    gates.enabled[index] = value;
                }
            }
        }

        let mut errors: Vec<FeatureGateError> = GATES
            .iter()
            .zip(gates.enabled)
            .filter(|(_, enabled)| *enabled)
            .filter_map(|(gate, _)| {
                let disabled: Vec<&'static str> = gate
                    .depends_on
                    .iter()
                    .copied()
                    .filter(|dependency| gates.enabled_by_name(dependency) == Some(false))
                    .collect();
                (!disabled.is_empty()).then_some(FeatureGateError::DependencyDisabled {
                    name: gate.name,
                    disabled,
                })
            })
            .collect();
        match errors.len() {
            0 => Ok(ParsedFeatureGates { gates, warnings }),
            1 => Err(errors.remove(0)),
            _ => Err(FeatureGateError::Several(errors)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(values: &[&str]) -> Result<ParsedFeatureGates, String> {
        FeatureGates::parse(values).map_err(|error| error.to_string())
    }

    #[test]
    fn the_table_is_sorted_and_complete() {
        assert_eq!(GATES.len(), GATE_COUNT);
        assert!(GATES.windows(2).all(|pair| pair[0].name < pair[1].name));
        for gate in GATES {
            for dependency in gate.depends_on {
                assert!(gate_index(dependency).is_some(), "{dependency}");
            }
            if gate.locked {
                assert!(
                    matches!(gate.stage, Stage::Ga | Stage::Deprecated),
                    "{}",
                    gate.name
                );
            }
        }
        for gate in FeatureGate::ALL {
            assert_eq!(gate.spec().name, gate.name());
            assert_eq!(FeatureGate::from_name(gate.name()), Some(gate));
        }
        let locked = |name: &str| GATES[gate_index(name).unwrap()];
        for name in [
            "DRAAdminAccess",
            "InPlacePodVerticalScaling",
            "DynamicResourceAllocation",
        ] {
            assert!(locked(name).locked && locked(name).default, "{name}");
        }
        // GA in v1.36 but only locked from v1.37.
        assert!(!locked("DRAPrioritizedList").locked);
        assert_eq!(locked("DRAPrioritizedList").stage, Stage::Ga);
    }

    #[test]
    fn defaults() {
        let gates = FeatureGates::default();
        for gate in FeatureGate::ALL {
            assert_eq!(gates.enabled(gate), gate.default_enabled(), "{gate}");
        }
        assert!(!gates.enabled(FeatureGate::StorageVersionApi));
        assert!(gates.enabled(FeatureGate::ApiServerIdentity));
        assert!(gates.enabled(FeatureGate::DraAdminAccess));
        assert!(gates.enabled(FeatureGate::DraPrioritizedList));
        assert!(!gates.enabled(FeatureGate::DraWorkloadResourceClaims));
        assert!(gates.enabled(FeatureGate::WatchListClient));
        assert_eq!(format!("{gates:?}"), "{}");
        assert_eq!(parse(&[]).unwrap().gates, gates);
    }

    #[test]
    fn values_parse_like_component_base() {
        let parsed = parse(&[
            " StorageVersionAPI = true ,DRAWorkloadResourceClaims=F,GenericWorkload=true",
            "DRAWorkloadResourceClaims=1,Bogus=false",
        ])
        .unwrap();
        assert!(parsed.gates.enabled(FeatureGate::StorageVersionApi));
        assert!(parsed.gates.enabled(FeatureGate::DraWorkloadResourceClaims));
        assert_eq!(
            parsed.warnings,
            vec![FeatureGateWarning::Unrecognized("Bogus".into())]
        );
        assert_eq!(
            parsed.warnings[0].to_string(),
            "unrecognized feature gate: Bogus"
        );
        assert_eq!(
            format!("{:?}", parsed.gates),
            "{\"DRAWorkloadResourceClaims\": true, \"GenericWorkload\": true, \"StorageVersionAPI\": true}"
        );

        let prefixed =
            parse(&["kube:StorageVersionAPI=true", "kube:GenericWorkload=true"]).unwrap();
        assert!(prefixed.gates.enabled(FeatureGate::StorageVersionApi));
        assert!(prefixed.gates.enabled(FeatureGate::GenericWorkload));

        let errors: &[(&[&str], &str)] = &[
            (
                &["StorageVersionAPI"],
                "missing bool value for StorageVersionAPI",
            ),
            (
                &["StorageVersionAPI=yes"],
                "invalid value of StorageVersionAPI=yes, err: strconv.ParseBool: parsing \"yes\": invalid syntax",
            ),
            (&["wardle:Foo=true"], "component not registered: wardle"),
            (
                &["kube:StorageVersionAPI=true,APIServerIdentity=true"],
                "set kube feature gates with default empty prefix or kube: prefix consistently, do not mix use",
            ),
            (
                &["DRAWorkloadResourceClaims=true"],
                "DRAWorkloadResourceClaims is enabled, but depends on features that are disabled: [GenericWorkload]",
            ),
            (
                &["DRAAdminAccess=false"],
                "cannot set feature gate DRAAdminAccess to false, feature is locked to true",
            ),
            (
                &["kube:InPlacePodVerticalScaling=false"],
                "cannot set feature gate InPlacePodVerticalScaling to false, feature is locked to true",
            ),
            (
                &["DRAAdminAccess=false,InPlacePodVerticalScaling=false"],
                "[cannot set feature gate DRAAdminAccess to false, feature is locked to true, \
                 cannot set feature gate InPlacePodVerticalScaling to false, feature is locked to true]",
            ),
            (
                &["DRAResourceClaimDeviceStatus=false"],
                "[DRADeviceBindingConditions is enabled, but depends on features that are disabled: \
                 [DRAResourceClaimDeviceStatus], DRAResourceClaimGranularStatusAuthorization is \
                 enabled, but depends on features that are disabled: [DRAResourceClaimDeviceStatus]]",
            ),
        ];
        for (values, expected) in errors {
            assert_eq!(parse(values).unwrap_err(), *expected, "{values:?}");
        }
        // The locked value itself is fine, with upstream's GA warning.
        let same = parse(&["DRAAdminAccess=true"]).unwrap();
        assert_eq!(
            same.warnings[0].to_string(),
            "Warning: setting GA feature gate. It will be removed in a future release. \
             featureGate=\"DRAAdminAccess\" value=true"
        );
        // GA but not locked in v1.36.
        let prioritized = parse(&["DRAPrioritizedList=false"]).unwrap();
        assert!(!prioritized.gates.enabled(FeatureGate::DraPrioritizedList));
    }

    #[test]
    fn all_alpha_and_all_beta() {
        let all_alpha = parse(&["AllAlpha=true,StorageVersionAPI=false"])
            .unwrap()
            .gates;
        assert!(all_alpha.enabled(FeatureGate::GenericWorkload));
        assert!(all_alpha.enabled(FeatureGate::DraWorkloadResourceClaims));
        assert!(
            !all_alpha.enabled(FeatureGate::StorageVersionApi),
            "named gates win"
        );
        // A named gate that AllAlpha's gates depend on stays as named, and they fail.
        let broken = parse(&["AllAlpha=true,GenericWorkload=false"]).unwrap_err();
        assert!(
            broken.starts_with("[DRAWorkloadResourceClaims is enabled, but depends on"),
            "{broken}"
        );
        let no_beta = parse(&["AllBeta=false,WatchListClient=true"])
            .unwrap()
            .gates;
        assert!(!no_beta.enabled(FeatureGate::ApiServerIdentity));
        assert!(no_beta.enabled(FeatureGate::WatchListClient));
    }
}
