//! Usage evaluators of the resourcequota controller: what one object charges against a
//! quota, which quota resource names each evaluator tracks, and scope matching.
//!
//! Ported from upstream v1.36 `pkg/quota/v1/evaluator/core` (pods, services, PVCs,
//! ResourceClaims), `k8s.io/apiserver/pkg/quota/v1{,/generic}` and the helpers they
//! call (`component-helpers/resource`, `qos`, `extendedresourcecache`). Everything here
//! is pure: the controller lists the objects and passes them in.
//!
//! Quantities that fail to parse cannot exist upstream (decoding would fail), nor can
//! negative ones (validation refuses them); here they are skipped one value at a time and
//! reported in [`Usage::problems`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodAffinityTerm, ScopeSelector, Service};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use crate::runtime::quantity::{Format, Quantity};
use crate::runtime::view::{Container, ContainerStatus, Pod};

/// A resource list with parsed quantities, keyed by resource name.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Usage of one object (or a sum of objects) plus the values that had to be skipped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    pub list: ResourceList,
    pub problems: Vec<String>,
}

/// Object-count names of the built-in evaluators.
pub const POD_COUNT: &str = "count/pods";
pub const SERVICE_COUNT: &str = "count/services";
pub const PVC_COUNT: &str = "count/persistentvolumeclaims";
pub const CLAIM_COUNT: &str = "count/resourceclaims.resource.k8s.io";

/// Annotation the scheduler puts on claims it creates for extended resources.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";

const PODS: &str = "pods";
const CPU: &str = "cpu";
const MEMORY: &str = "memory";
const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
const STORAGE: &str = "storage";
const SERVICES: &str = "services";
const SERVICES_NODE_PORTS: &str = "services.nodeports";
const SERVICES_LOAD_BALANCERS: &str = "services.loadbalancers";
const PERSISTENT_VOLUME_CLAIMS: &str = "persistentvolumeclaims";
const REQUESTS_STORAGE: &str = "requests.storage";
const REQUESTS_PREFIX: &str = "requests.";
const HUGEPAGES_PREFIX: &str = "hugepages-";
const REQUESTS_HUGEPAGES_PREFIX: &str = "requests.hugepages-";
const DEFAULT_NAMESPACE_PREFIX: &str = "kubernetes.io/";
const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";
const REQUESTS_DEVICE_CLASS_PREFIX: &str = "requests.deviceclass.resource.kubernetes.io/";
const CLAIMS_PER_CLASS: &str = ".deviceclass.resource.k8s.io/devices";
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";
const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// `resourceapi.AllocationResultsMaxSize`: the worst case charged for allocation mode All.
const ALLOCATION_RESULTS_MAX_SIZE: i64 = 32;

const POD_RESOURCES: [&str; 11] = [
    POD_COUNT,
    CPU,
    MEMORY,
    EPHEMERAL_STORAGE,
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    PODS,
];
const SERVICE_RESOURCES: [&str; 4] = [
    SERVICE_COUNT,
    SERVICES,
    SERVICES_NODE_PORTS,
    SERVICES_LOAD_BALANCERS,
];
const PVC_RESOURCES: [&str; 2] = [PERSISTENT_VOLUME_CLAIMS, REQUESTS_STORAGE];

// ---------------------------------------------------------------------------------------
// Scopes
// ---------------------------------------------------------------------------------------

/// `core.ResourceQuotaScope` values.
const KNOWN_SCOPES: [&str; 7] = [
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
];

/// One scope requirement of a quota: an entry of `spec.scopes` (operator `Exists`) or of
/// `spec.scopeSelector.matchExpressions`, in that order.
#[derive(Clone, Debug, PartialEq)]
pub struct ScopeRequirement {
    pub scope_name: String,
    pub operator: String,
    pub values: Vec<String>,
    /// Upstream builds a label selector from the requirement each time it needs one;
    /// building it once gives the same answer, error included.
    selector: Result<LabelRequirement, String>,
}

/// The scopes an object must match for a quota to charge it (`spec.scopes` plus
/// `spec.scopeSelector`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuotaScope {
    requirements: Vec<ScopeRequirement>,
}

impl QuotaScope {
    /// True when the quota has neither scopes nor selector expressions.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn requirements(&self) -> &[ScopeRequirement] {
        &self.requirements
    }

    /// Requirements whose label selector upstream cannot build, with the reason. Such a
    /// requirement makes the evaluators that need the selector (PriorityClass for pods,
    /// VolumeAttributesClass for PVCs) count nothing; worth a log line, not an error. So is
    /// a scope name validation would refuse: it matches no object.
    pub fn selector_problems(&self) -> Vec<String> {
        self.requirements
            .iter()
            .filter_map(|r| match &r.selector {
                Err(e) => Some(format!("{}: {e}", r.scope_name)),
                Ok(_) if !KNOWN_SCOPES.contains(&r.scope_name.as_str()) => Some(format!(
                    "{:?} is not a known quota scope; it matches no object",
                    r.scope_name
                )),
                Ok(_) => None,
            })
            .collect()
    }
}

/// Builds the quota's scope requirements. Never fails: upstream only notices a bad
/// selector when an evaluator uses it, and then the evaluator counts nothing (its
/// `CalculateUsageStats` returns the zeros it started with), which the match functions
/// here reproduce by matching no object.
pub fn parse_scope(scopes: &[String], selector: Option<&ScopeSelector>) -> QuotaScope {
    let from_scopes = scopes
        .iter()
        .map(|s| ScopeRequirement::new(s, "Exists", &[]));
    let from_selector = selector
        .and_then(|s| s.match_expressions.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|e| {
            ScopeRequirement::new(
                &e.scope_name,
                &e.operator,
                e.values.as_deref().unwrap_or_default(),
            )
        });
    QuotaScope {
        requirements: from_scopes.chain(from_selector).collect(),
    }
}

impl ScopeRequirement {
    fn new(scope_name: &str, operator: &str, values: &[String]) -> Self {
        Self {
            scope_name: scope_name.to_string(),
            operator: operator.to_string(),
            values: values.to_vec(),
            selector: scoped_requirement_as_selector(scope_name, operator, values),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LabelOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// A single-requirement label selector over the key `scope_name`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct LabelRequirement {
    op: LabelOp,
    values: Vec<String>,
}

impl LabelRequirement {
    /// `labels.Requirement.Matches` against a set that holds the key with `value`, or
    /// lacks the key when `value` is `None`.
    fn matches(&self, value: Option<&str>) -> bool {
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.op {
            LabelOp::In => value.is_some_and(has),
            LabelOp::NotIn => value.is_none_or(|v| !has(v)),
            LabelOp::Exists => value.is_some(),
            LabelOp::DoesNotExist => value.is_none(),
        }
    }
}

/// `helper.ScopedResourceSelectorRequirementsAsSelector` with the checks of
/// `labels.NewRequirement`.
fn scoped_requirement_as_selector(
    scope_name: &str,
    operator: &str,
    values: &[String],
) -> Result<LabelRequirement, String> {
    let op = match operator {
        "In" => LabelOp::In,
        "NotIn" => LabelOp::NotIn,
        "Exists" => LabelOp::Exists,
        "DoesNotExist" => LabelOp::DoesNotExist,
        other => return Err(format!("{other:?} is not a valid scope selector operator")),
    };
    let mut errors = Vec::new();
    if !is_qualified_name(scope_name) {
        errors.push(format!(
            "key: Invalid value: {scope_name:?}: not a qualified name"
        ));
    }
    match op {
        LabelOp::In | LabelOp::NotIn if values.is_empty() => {
            errors.push("values: for 'in', 'notin' operators, values set can't be empty".into());
        }
        LabelOp::Exists | LabelOp::DoesNotExist if !values.is_empty() => {
            errors.push("values: values set must be empty for exists and does not exist".into());
        }
        _ => {}
    }
    for value in values {
        if !is_valid_label_value(value) {
            errors.push(format!(
                "values: Invalid value: {value:?}: not a valid label value"
            ));
        }
    }
    if errors.is_empty() {
        Ok(LabelRequirement {
            op,
            values: values.to_vec(),
        })
    } else {
        Err(errors.join(", "))
    }
}

/// `MatchesNoScopeFunc` semantics (services, ResourceClaims, object counts): any scope
/// requirement at all makes the object not count.
pub fn unscoped_matches(scope: &QuotaScope) -> bool {
    scope.is_empty()
}

// ---------------------------------------------------------------------------------------
// Name validation helpers (k8s.io/apimachinery/pkg/util/validation)
// ---------------------------------------------------------------------------------------

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, the name part of a qualified name and
/// the body of a label value.
fn is_qualified_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            is_alnum(first)
                && is_alnum(last)
                && bytes
                    .iter()
                    .all(|&b| is_alnum(b) || b == b'-' || b == b'_' || b == b'.')
        }
        _ => false,
    }
}

fn is_dns1123_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    let lower_alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            lower_alnum(first)
                && lower_alnum(last)
                && bytes.iter().all(|&b| lower_alnum(b) || b == b'-')
        }
        _ => false,
    }
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// `validation.IsQualifiedName`.
fn is_qualified_name(value: &str) -> bool {
    let mut parts = value.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, None) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => return false,
    };
    if prefix.is_some_and(|p| p.is_empty() || !is_dns1123_subdomain(p)) {
        return false;
    }
    name.len() <= 63 && is_qualified_name_part(name)
}

/// `validation.IsValidLabelValue`: empty, or up to 63 characters of the name pattern.
fn is_valid_label_value(value: &str) -> bool {
    value.is_empty() || (value.len() <= 63 && is_qualified_name_part(value))
}

/// `helper.IsNativeResource`: unprefixed, or anywhere in `*kubernetes.io/` (upstream
/// checks `Contains`, not a prefix).
fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains(DEFAULT_NAMESPACE_PREFIX)
}

/// `helper.IsExtendedResourceName`.
fn is_extended_resource_name(name: &str) -> bool {
    !is_native_resource(name)
        && !name.starts_with(REQUESTS_PREFIX)
        && is_qualified_name(&format!("{REQUESTS_PREFIX}{name}"))
}

/// `schedutil.IsDRAExtendedResourceName`: an extended resource, or the implicit
/// `deviceclass.resource.kubernetes.io/<class>` name.
fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.starts_with(DEVICE_CLASS_PREFIX)
}

/// pods.go `isExtendedResourceNameForQuota`.
fn is_extended_resource_name_for_quota(name: &str) -> bool {
    (!is_native_resource(name) || name.starts_with(REQUESTS_DEVICE_CLASS_PREFIX))
        && name.starts_with(REQUESTS_PREFIX)
}

// ---------------------------------------------------------------------------------------
// Resource list arithmetic (quota/v1 resources.go and component-helpers)
// ---------------------------------------------------------------------------------------

/// How a problem ends when arithmetic for one resource name left the exact range: the
/// name's total is then wrong and must not be written ([`out_of_range_names`]).
const OUT_OF_RANGE: &str = "is out of range; its total is not written";

/// The resource names whose totals went out of range, from the problems of a usage.
pub fn out_of_range_names<'a>(problems: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
    problems
        .into_iter()
        .filter(|p| p.ends_with(OUT_OF_RANGE))
        // Quantities print without ": ", so the last one ends the name.
        .filter_map(|p| p.rsplit_once(": "))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// Go `Add` on two quantities; on overflow (past ~1.7e29 units, far beyond real quotas)
/// keeps `a` and reports the name as out of range.
fn add_quantity(a: &Quantity, b: &Quantity, name: &str, problems: &mut Vec<String>) -> Quantity {
    a.checked_add(b).unwrap_or_else(|| {
        problems.push(format!("{name}: sum of {a} and {b} {OUT_OF_RANGE}"));
        a.clone()
    })
}

/// component-helpers `addResourceList`: copies new names, adds to existing ones.
fn add_into(list: &mut ResourceList, new: &ResourceList, problems: &mut Vec<String>) {
    for (name, quantity) in new {
        let sum = match list.get(name) {
            Some(value) => add_quantity(value, quantity, name, problems),
            None => quantity.clone(),
        };
        list.insert(name.clone(), sum);
    }
}

/// component-helpers `maxResourceList`: replaces only on strictly greater, so ties keep
/// the existing value (and its format).
fn max_into(list: &mut ResourceList, new: &ResourceList) {
    for (name, quantity) in new {
        if list.get(name).is_none_or(|value| quantity > value) {
            list.insert(name.clone(), quantity.clone());
        }
    }
}

/// `quota.Add`: `a + b` per name; a name only in `b` is copied.
pub fn add_lists(a: &ResourceList, b: &ResourceList) -> Usage {
    let mut problems = Vec::new();
    let mut list = a.clone();
    add_into(&mut list, b, &mut problems);
    Usage { list, problems }
}

/// `quota.Mask`: keeps only `names`.
pub fn mask_list<S: AsRef<str>>(list: &ResourceList, names: &[S]) -> ResourceList {
    list.iter()
        .filter(|(k, _)| names.iter().any(|n| n.as_ref() == k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `quota.Intersection`: names of `input` in `known`, deduplicated and sorted.
fn intersection<S: AsRef<str>>(input: &[S], known: &[&str]) -> Vec<String> {
    let mut result: Vec<String> = input
        .iter()
        .map(AsRef::as_ref)
        .filter(|n| known.contains(n))
        .map(str::to_string)
        .collect();
    result.sort();
    result.dedup();
    result
}

/// Parses a raw resource list, skipping (and reporting) malformed values. An empty
/// result is `None`: the API server never sends empty maps (JSON omits them, protobuf
/// decodes them as nil), so upstream's `!= nil` checks mean "non-empty".
/// Reads a PVC's `BTreeMap` and a pod view's [`ResourceMap`](crate::runtime::view::ResourceMap) alike.
fn parse_list<'a, N: AsRef<str> + fmt::Display>(
    raw: Option<impl IntoIterator<Item = (N, &'a K8sQuantity)>>,
    what: &str,
    problems: &mut Vec<String>,
) -> Option<ResourceList> {
    let mut list = ResourceList::new();
    for (name, raw_quantity) in raw? {
        match Quantity::try_from(raw_quantity) {
            // API validation refuses negative resource quantities; counted, one would lower
            // the usage charged for everything else.
            Ok(q) if q.is_negative() => problems.push(format!(
                "{what}[{name}]: negative quantity {:?}; skipped",
                raw_quantity.0
            )),
            Ok(q) => {
                list.insert(name.as_ref().to_string(), q);
            }
            Err(e) => problems.push(format!(
                "{what}[{name}]: invalid quantity {:?}: {e}; skipped",
                raw_quantity.0
            )),
        }
    }
    (!list.is_empty()).then_some(list)
}

fn one() -> Quantity {
    Quantity::from_integer(1, Format::DecimalSI)
}

fn object_label(meta: &ObjectMeta, kind: &str) -> String {
    format!(
        "{kind} {}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

fn time_nanos(t: Option<&Time>) -> Option<i128> {
    t.map(|t| t.0.as_nanosecond())
}

// ---------------------------------------------------------------------------------------
// CalculateUsageStats
// ---------------------------------------------------------------------------------------

/// `generic.CalculateUsageStats` over already-listed objects: every name in `names`
/// starts at `0` (DecimalSI), then the usage of each matching object is added with
/// `quota.Add`, in iteration order.
///
/// Like upstream the sum is NOT masked to `names`: object usage names outside `names`
/// are kept, and `CalculateUsage` adds evaluator results together and masks only at
/// the end (to the surviving candidate names), so an unmasked name from one evaluator
/// can add to a name tracked by another. Use [`add_lists`] and [`mask_list`] for that.
pub fn sum_usage<'a, T: 'a>(
    objects: impl IntoIterator<Item = &'a T>,
    names: &[String],
    mut usage: impl FnMut(&T) -> Usage,
    mut matches: impl FnMut(&T) -> bool,
) -> Usage {
    let mut list: ResourceList = names
        .iter()
        .map(|n| (n.clone(), Quantity::zero()))
        .collect();
    let mut problems = Vec::new();
    for object in objects {
        if !matches(object) {
            continue;
        }
        let one = usage(object);
        problems.extend(one.problems);
        add_into(&mut list, &one.list, &mut problems);
    }
    Usage { list, problems }
}

// ---------------------------------------------------------------------------------------
// Object counts
// ---------------------------------------------------------------------------------------

/// `generic.ObjectCountQuotaResourceNameFor`.
pub fn object_count_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }
}

/// registry.go `legacyObjectCountAliases`.
pub fn legacy_object_count_alias(group: &str, resource: &str) -> Option<&'static str> {
    if !group.is_empty() {
        return None;
    }
    match resource {
        "configmaps" => Some("configmaps"),
        "resourcequotas" => Some("resourcequotas"),
        "replicationcontrollers" => Some("replicationcontrollers"),
        "secrets" => Some("secrets"),
        _ => None,
    }
}

/// The names an object-count evaluator tracks: `count/...` plus the legacy alias.
pub fn object_count_names(group: &str, resource: &str) -> Vec<String> {
    let mut names = vec![object_count_name(group, resource)];
    names.extend(legacy_object_count_alias(group, resource).map(str::to_string));
    names
}

/// Object-count `MatchingResources`: `quota.Intersection(input, tracked)`.
pub fn object_count_matching<S: AsRef<str>>(tracked: &[String], names: &[S]) -> Vec<String> {
    let known: Vec<&str> = tracked.iter().map(String::as_str).collect();
    intersection(names, &known)
}

/// Object-count `Usage`: 1 for every tracked name.
pub fn object_count_usage(tracked: &[String]) -> Usage {
    Usage {
        list: tracked.iter().map(|n| (n.clone(), one())).collect(),
        problems: Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------
// Pods
// ---------------------------------------------------------------------------------------

/// Pod `MatchingResources`: the fixed names (sorted), then hugepages-prefixed names and
/// extended resources for quota in input order.
pub fn pod_matching<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    let mut result = intersection(names, &POD_RESOURCES);
    for name in names.iter().map(AsRef::as_ref) {
        if name.starts_with(HUGEPAGES_PREFIX) || name.starts_with(REQUESTS_HUGEPAGES_PREFIX) {
            result.push(name.to_string());
        }
        if is_extended_resource_name_for_quota(name) {
            result.push(name.to_string());
        }
    }
    result
}

/// `QuotaV1Pod`: false for terminal pods and pods past `deletionTimestamp +
/// deletionGracePeriodSeconds`; such pods only count in `count/pods`.
pub fn pod_counts_for_quota(pod: &Pod, now: &Time) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Failed" | "Succeeded")) {
        return false;
    }
    let meta = &pod.metadata;
    if let (Some(deleted), Some(grace)) = (
        time_nanos(meta.deletion_timestamp.as_ref()),
        meta.deletion_grace_period_seconds,
    ) {
        // Go computes time.Duration(grace) * time.Second in int64, wrapping on overflow.
        let grace_nanos = i128::from(grace.wrapping_mul(1_000_000_000));
        if now.0.as_nanosecond() > deleted.saturating_add(grace_nanos) {
            return false;
        }
    }
    true
}

/// pods.go `IsTerminating`: `activeDeadlineSeconds >= 0`.
pub fn pod_is_terminating(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.active_deadline_seconds)
        .is_some_and(|d| d >= 0)
}

/// `PodUsageFunc`: `count/pods` always; the compute usage only while the pod counts.
pub fn pod_usage(pod: &Pod, now: &Time) -> Usage {
    let mut list = ResourceList::from([(POD_COUNT.to_string(), one())]);
    let mut problems = Vec::new();
    if !pod_counts_for_quota(pod, now) {
        return Usage { list, problems };
    }
    let parsed = ParsedPod::new(pod, &mut problems);
    let requests = parsed.requests(&mut problems);
    let limits = parsed.limits(&mut problems);
    // No overlap with count/pods, so quota.Add is a plain union.
    list.extend(pod_compute_usage(&requests, &limits));
    Usage { list, problems }
}

/// `podComputeUsageHelper`.
fn pod_compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut result = ResourceList::from([(PODS.to_string(), one())]);
    for name in [CPU, MEMORY, EPHEMERAL_STORAGE] {
        if let Some(request) = requests.get(name) {
            result.insert(name.to_string(), request.clone());
            result.insert(format!("{REQUESTS_PREFIX}{name}"), request.clone());
        }
        if let Some(limit) = limits.get(name) {
            result.insert(format!("limits.{name}"), limit.clone());
        }
    }
    for (name, request) in requests {
        if name.starts_with(HUGEPAGES_PREFIX) {
            result.insert(name.clone(), request.clone());
            result.insert(format!("{REQUESTS_PREFIX}{name}"), request.clone());
        }
        if is_dra_extended_resource_name(name) {
            result.insert(format!("{REQUESTS_PREFIX}{name}"), request.clone());
        }
    }
    result
}

struct ParsedContainer<'p> {
    name: &'p str,
    restartable: bool,
    requests: Option<ResourceList>,
    limits: Option<ResourceList>,
}

struct ParsedStatus<'p> {
    name: &'p str,
    /// `status.resources.requests`/`.limits`; `None` also when `resources` is absent.
    requests: Option<ResourceList>,
    limits: Option<ResourceList>,
    allocated: Option<ResourceList>,
}

/// The pod's resource lists, parsed once.
struct ParsedPod<'p> {
    containers: Vec<ParsedContainer<'p>>,
    init_containers: Vec<ParsedContainer<'p>>,
    /// Container statuses, then init container statuses: `findContainerStatus` order.
    statuses: Vec<ParsedStatus<'p>>,
    /// Whether `spec.resources` is set at all (the QoS computation looks at that).
    has_pod_resources: bool,
    pod_requests: Option<ResourceList>,
    pod_limits: Option<ResourceList>,
    overhead: Option<ResourceList>,
    resize_infeasible: bool,
}

/// Where `aggregateContainerResourcesByFn` takes each container's list from.
#[derive(Clone, Copy)]
enum Source {
    SpecRequests,
    AllocatedRequests,
    ActuatedRequests,
    SpecLimits,
    ActuatedLimits,
}

impl<'p> ParsedPod<'p> {
    fn new(pod: &'p Pod, problems: &mut Vec<String>) -> Self {
        let label = object_label(&pod.metadata, "pod");
        let spec = pod.spec.as_ref();
        let status = pod.status.as_ref();
        let containers = |list: Option<&'p [Container]>,
                          field: &str,
                          problems: &mut Vec<String>|
         -> Vec<ParsedContainer<'p>> {
            list.unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let res = c.resources.as_ref();
                    let at = format!("{label}: spec.{field}[{i}].resources");
                    ParsedContainer {
                        name: &c.name,
                        restartable: c.restart_policy.as_deref() == Some("Always"),
                        requests: parse_list(
                            res.and_then(|r| r.requests.as_ref()),
                            &format!("{at}.requests"),
                            problems,
                        ),
                        limits: parse_list(
                            res.and_then(|r| r.limits.as_ref()),
                            &format!("{at}.limits"),
                            problems,
                        ),
                    }
                })
                .collect()
        };
        let statuses = |list: Option<&'p [ContainerStatus]>,
                        field: &str,
                        problems: &mut Vec<String>|
         -> Vec<ParsedStatus<'p>> {
            list.unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(i, cs)| {
                    let res = cs.resources.as_ref();
                    let at = format!("{label}: status.{field}[{i}]");
                    ParsedStatus {
                        name: &cs.name,
                        requests: parse_list(
                            res.and_then(|r| r.requests.as_ref()),
                            &format!("{at}.resources.requests"),
                            problems,
                        ),
                        limits: parse_list(
                            res.and_then(|r| r.limits.as_ref()),
                            &format!("{at}.resources.limits"),
                            problems,
                        ),
                        allocated: parse_list(
                            cs.allocated_resources.as_ref(),
                            &format!("{at}.allocatedResources"),
                            problems,
                        ),
                    }
                })
                .collect()
        };
        let parsed_containers = containers(spec.map(|s| &*s.containers), "containers", problems);
        let parsed_init = containers(
            spec.and_then(|s| s.init_containers.as_deref()),
            "initContainers",
            problems,
        );
        let mut parsed_statuses = statuses(
            status.and_then(|s| s.container_statuses.as_deref()),
            "containerStatuses",
            problems,
        );
        parsed_statuses.extend(statuses(
            status.and_then(|s| s.init_container_statuses.as_deref()),
            "initContainerStatuses",
            problems,
        ));
        let pod_resources = spec.and_then(|s| s.resources.as_ref());
        let resize_infeasible = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| &*c.type_ == "PodResizePending"))
            .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"));
        Self {
            containers: parsed_containers,
            init_containers: parsed_init,
            statuses: parsed_statuses,
            has_pod_resources: pod_resources.is_some(),
            pod_requests: parse_list(
                pod_resources.and_then(|r| r.requests.as_ref()),
                &format!("{label}: spec.resources.requests"),
                problems,
            ),
            pod_limits: parse_list(
                pod_resources.and_then(|r| r.limits.as_ref()),
                &format!("{label}: spec.resources.limits"),
                problems,
            ),
            overhead: parse_list(
                spec.and_then(|s| s.overhead.as_ref()),
                &format!("{label}: spec.overhead"),
                problems,
            ),
            resize_infeasible,
        }
    }

    fn find_status(&self, name: &str) -> Option<&ParsedStatus<'p>> {
        self.statuses.iter().find(|s| s.name == name)
    }

    /// `containerSpecRequests` / `containerAllocatedRequests` / ... for one container.
    fn pick<'a>(
        &'a self,
        source: Source,
        container: &'a ParsedContainer<'p>,
    ) -> Option<&'a ResourceList> {
        let status = self.find_status(container.name);
        let allocated = status.and_then(|s| s.allocated.as_ref());
        let infeasible = self.resize_infeasible;
        match source {
            Source::SpecRequests => container.requests.as_ref(),
            Source::SpecLimits => container.limits.as_ref(),
            Source::AllocatedRequests => match allocated {
                Some(a) => Some(a),
                None if infeasible => None,
                None => container.requests.as_ref(),
            },
            Source::ActuatedRequests => match (status.and_then(|s| s.requests.as_ref()), allocated)
            {
                (Some(actuated), _) => Some(actuated),
                (None, Some(a)) => Some(a),
                (None, None) if infeasible => None,
                (None, None) => container.requests.as_ref(),
            },
            Source::ActuatedLimits => match status.and_then(|s| s.limits.as_ref()) {
                Some(actuated) => Some(actuated),
                None if infeasible => None,
                None => container.limits.as_ref(),
            },
        }
    }

    /// `aggregateContainerResourcesByFn`: sum of regular and restartable init
    /// containers, against the largest "init container plus sidecars before it".
    fn aggregate(&self, source: Source, problems: &mut Vec<String>) -> ResourceList {
        let mut result = ResourceList::new();
        for container in &self.containers {
            if let Some(list) = self.pick(source, container) {
                add_into(&mut result, list, problems);
            }
        }
        let mut sidecars = ResourceList::new();
        let mut init_max = ResourceList::new();
        for container in &self.init_containers {
            let list = self.pick(source, container);
            if container.restartable {
                if let Some(list) = list {
                    add_into(&mut result, list, problems);
                    add_into(&mut sidecars, list, problems);
                }
                max_into(&mut init_max, &sidecars);
            } else {
                let mut combined = ResourceList::new();
                if let Some(list) = list {
                    add_into(&mut combined, list, problems);
                }
                add_into(&mut combined, &sidecars, problems);
                max_into(&mut init_max, &combined);
            }
        }
        max_into(&mut result, &init_max);
        result
    }

    /// `IsPodLevelRequestsSet`.
    fn pod_level_requests_set(&self) -> bool {
        self.pod_requests
            .as_ref()
            .is_some_and(|r| r.keys().any(|k| is_supported_pod_level_resource(k)))
    }

    /// `IsPodLevelResourcesSet`.
    fn pod_level_resources_set(&self) -> bool {
        [&self.pod_requests, &self.pod_limits]
            .into_iter()
            .flatten()
            .any(|l| l.keys().any(|k| is_supported_pod_level_resource(k)))
    }

    /// `resourcehelper.PodRequests` with UseStatusResources (InPlacePodVerticalScaling,
    /// GA) and pod-level resources (PodLevelResources, beta on); the alpha
    /// InPlacePodLevelResourcesVerticalScaling and DRA node-allocatable options are off.
    fn requests(&self, problems: &mut Vec<String>) -> ResourceList {
        let spec = self.aggregate(Source::SpecRequests, problems);
        let allocated = self.aggregate(Source::AllocatedRequests, problems);
        let actuated = self.aggregate(Source::ActuatedRequests, problems);
        let mut requests = if self.resize_infeasible {
            max_of(actuated, &[&allocated])
        } else {
            max_of(spec, &[&actuated, &allocated])
        };
        if self.pod_level_requests_set() {
            for (name, quantity) in self.pod_requests.iter().flatten() {
                if is_supported_pod_level_resource(name) {
                    requests.insert(name.clone(), quantity.clone());
                }
            }
        }
        if let Some(overhead) = &self.overhead {
            add_into(&mut requests, overhead, problems);
        }
        requests
    }

    /// `resourcehelper.PodLimits` with the same options as [`ParsedPod::requests`].
    fn limits(&self, problems: &mut Vec<String>) -> ResourceList {
        let actuated = self.aggregate(Source::ActuatedLimits, problems);
        let mut limits = if self.resize_infeasible {
            actuated
        } else {
            let spec = self.aggregate(Source::SpecLimits, problems);
            max_of(spec, &[&actuated])
        };
        if self.pod_level_resources_set() {
            for (name, quantity) in self.pod_limits.iter().flatten() {
                if is_supported_pod_level_resource(name) {
                    limits.insert(name.clone(), quantity.clone());
                }
            }
        }
        // Overhead only raises limits that are set and non-zero.
        for (name, quantity) in self.overhead.iter().flatten() {
            if let Some(value) = limits.get(name).filter(|v| !v.is_zero()) {
                let sum = add_quantity(value, quantity, name, problems);
                limits.insert(name.clone(), sum);
            }
        }
        limits
    }

    /// `qos.ComputePodQOS` (with PodLevelResources on).
    fn compute_qos(&self) -> &'static str {
        if self.has_pod_resources {
            return resource_qos(self.pod_requests.as_ref(), self.pod_limits.as_ref());
        }
        let mut pod_qos: Option<&'static str> = None;
        for c in self.init_containers.iter().chain(&self.containers) {
            let qos = resource_qos(c.requests.as_ref(), c.limits.as_ref());
            match pod_qos {
                _ if qos == QOS_BURSTABLE => return QOS_BURSTABLE,
                None => pod_qos = Some(qos),
                Some(existing) if existing != qos => return QOS_BURSTABLE,
                Some(_) => {}
            }
        }
        pod_qos.unwrap_or(QOS_BEST_EFFORT)
    }
}

/// component-helpers `max(a, b...)`: a copy of `a`, raised by each of `others`.
fn max_of(a: ResourceList, others: &[&ResourceList]) -> ResourceList {
    let mut result = a;
    for other in others {
        max_into(&mut result, other);
    }
    result
}

/// `IsSupportedPodLevelResource`: cpu, memory and hugepages.
fn is_supported_pod_level_resource(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with(HUGEPAGES_PREFIX)
}

const QOS_BEST_EFFORT: &str = "BestEffort";
const QOS_BURSTABLE: &str = "Burstable";
const QOS_GUARANTEED: &str = "Guaranteed";

/// qos.go `resourceQOS` for one set of requirements.
fn resource_qos(requests: Option<&ResourceList>, limits: Option<&ResourceList>) -> &'static str {
    if requests.is_none_or(BTreeMap::is_empty) && limits.is_none_or(BTreeMap::is_empty) {
        return QOS_BEST_EFFORT;
    }
    let zero = Quantity::zero();
    let mut qos: Option<&'static str> = None;
    for name in [CPU, MEMORY] {
        let request = requests.and_then(|r| r.get(name)).unwrap_or(&zero);
        let limit = limits.and_then(|l| l.get(name)).unwrap_or(&zero);
        if request != limit {
            return QOS_BURSTABLE;
        }
        let best_effort = request.is_zero() && limit.is_zero();
        match qos {
            None => {
                qos = Some(if best_effort {
                    QOS_BEST_EFFORT
                } else {
                    QOS_GUARANTEED
                })
            }
            Some(existing) if best_effort != (existing == QOS_BEST_EFFORT) => {
                return QOS_BURSTABLE;
            }
            Some(_) => {}
        }
    }
    qos.unwrap_or(QOS_BEST_EFFORT)
}

/// `qos.GetPodQOS`: `status.qosClass` when set, computed otherwise.
pub fn pod_qos_class(pod: &Pod) -> String {
    if let Some(class) = pod
        .status
        .as_ref()
        .and_then(|s| s.qos_class.as_deref())
        .filter(|c| !c.is_empty())
    {
        return class.to_string();
    }
    // Parse problems are reported by pod_usage; the QoS answer just skips bad values.
    let mut ignored = Vec::new();
    ParsedPod::new(pod, &mut ignored).compute_qos().to_string()
}

fn cross_namespace_term(term: &PodAffinityTerm) -> bool {
    term.namespaces.as_ref().is_some_and(|n| !n.is_empty()) || term.namespace_selector.is_some()
}

/// pods.go `usesCrossNamespacePodAffinity`.
fn uses_cross_namespace_pod_affinity(pod: &Pod) -> bool {
    let Some(affinity) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else {
        return false;
    };
    let affinity_terms = affinity.pod_affinity.as_ref().map(|a| {
        (
            &a.required_during_scheduling_ignored_during_execution,
            &a.preferred_during_scheduling_ignored_during_execution,
        )
    });
    let anti_terms = affinity.pod_anti_affinity.as_ref().map(|a| {
        (
            &a.required_during_scheduling_ignored_during_execution,
            &a.preferred_during_scheduling_ignored_during_execution,
        )
    });
    [affinity_terms, anti_terms]
        .into_iter()
        .flatten()
        .any(|(required, preferred)| {
            required.iter().flatten().any(cross_namespace_term)
                || preferred
                    .iter()
                    .flatten()
                    .any(|w| cross_namespace_term(&w.pod_affinity_term))
        })
}

/// `podMatchesScopeFunc` for one requirement; `Err` when upstream cannot build the
/// selector it needs.
fn pod_matches_requirement(pod: &Pod, req: &ScopeRequirement) -> Result<bool, String> {
    let best_effort = || pod_qos_class(pod) == QOS_BEST_EFFORT;
    Ok(match req.scope_name.as_str() {
        "Terminating" => pod_is_terminating(pod),
        "NotTerminating" => !pod_is_terminating(pod),
        "BestEffort" => best_effort(),
        "NotBestEffort" => !best_effort(),
        "PriorityClass" => {
            let class = pod
                .spec
                .as_ref()
                .and_then(|s| s.priority_class_name.as_deref())
                .filter(|c| !c.is_empty());
            if req.operator == "Exists" {
                class.is_some()
            } else {
                req.selector.as_ref().map_err(Clone::clone)?.matches(class)
            }
        }
        "CrossNamespacePodAffinity" => uses_cross_namespace_pod_affinity(pod),
        _ => false,
    })
}

/// Whether the pod matches every scope requirement. A requirement upstream cannot turn
/// into a selector matches nothing: upstream aborts the sum on the first pod with no
/// error, and the failure does not depend on the pod, so the result is all zeros.
pub fn pod_matches_scope(pod: &Pod, scope: &QuotaScope) -> bool {
    let mut all = true;
    for req in &scope.requirements {
        match pod_matches_requirement(pod, req) {
            Ok(matched) => all = all && matched,
            Err(_) => return false,
        }
    }
    all
}

// ---------------------------------------------------------------------------------------
// Services
// ---------------------------------------------------------------------------------------

/// Service `MatchingResources`.
pub fn service_matching<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    intersection(names, &SERVICE_RESOURCES)
}

/// `GetQuotaServiceType`: `NodePort`, `LoadBalancer`, or `""` for anything else.
pub fn quota_service_type(svc: &Service) -> &'static str {
    match svc.spec.as_ref().and_then(|s| s.type_.as_deref()) {
        Some("NodePort") => "NodePort",
        Some("LoadBalancer") => "LoadBalancer",
        _ => "",
    }
}

/// Service `Usage`.
pub fn service_usage(svc: &Service) -> Usage {
    let spec = svc.spec.as_ref();
    let ports = spec.and_then(|s| s.ports.as_deref()).unwrap_or_default();
    let count =
        |n: usize| Quantity::from_integer(i64::try_from(n).unwrap_or(i64::MAX), Format::DecimalSI);
    let mut list = ResourceList::from([
        (SERVICE_COUNT.to_string(), one()),
        (SERVICES.to_string(), one()),
        (SERVICES_LOAD_BALANCERS.to_string(), Quantity::zero()),
        (SERVICES_NODE_PORTS.to_string(), Quantity::zero()),
    ]);
    match quota_service_type(svc) {
        "NodePort" => {
            list.insert(SERVICES_NODE_PORTS.to_string(), count(ports.len()));
        }
        "LoadBalancer" => {
            // Without node-port allocation only ports that name a node port take one.
            let node_ports =
                if spec.and_then(|s| s.allocate_load_balancer_node_ports) == Some(false) {
                    ports
                        .iter()
                        .filter(|p| p.node_port.is_some_and(|n| n != 0))
                        .count()
                } else {
                    ports.len()
                };
            list.insert(SERVICES_NODE_PORTS.to_string(), count(node_ports));
            list.insert(SERVICES_LOAD_BALANCERS.to_string(), one());
        }
        _ => {}
    }
    Usage {
        list,
        problems: Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------
// PersistentVolumeClaims
// ---------------------------------------------------------------------------------------

/// PVC `MatchingResources` (input order, like upstream).
pub fn pvc_matching<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    names
        .iter()
        .map(AsRef::as_ref)
        .filter(|name| {
            *name == PVC_COUNT
                || PVC_RESOURCES.contains(name)
                || PVC_RESOURCES
                    .iter()
                    .any(|r| name.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{r}")))
        })
        .map(str::to_string)
        .collect()
}

/// `storagehelpers.GetPersistentVolumeClaimClass`: the beta annotation wins, even empty.
pub fn pvc_storage_class(pvc: &PersistentVolumeClaim) -> String {
    if let Some(class) = pvc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
    {
        return class.clone();
    }
    pvc.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// PVC `Usage`.
pub fn pvc_usage(pvc: &PersistentVolumeClaim) -> Usage {
    let mut problems = Vec::new();
    let class = pvc_storage_class(pvc);
    let mut list = ResourceList::from([
        (PERSISTENT_VOLUME_CLAIMS.to_string(), one()),
        (PVC_COUNT.to_string(), one()),
    ]);
    if !class.is_empty() {
        list.insert(
            format!("{class}{STORAGE_CLASS_SUFFIX}{PERSISTENT_VOLUME_CLAIMS}"),
            one(),
        );
    }
    if let Some(storage) = pvc_storage_usage(pvc, &mut problems) {
        if !class.is_empty() {
            list.insert(
                format!("{class}{STORAGE_CLASS_SUFFIX}{REQUESTS_STORAGE}"),
                storage.clone(),
            );
        }
        list.insert(REQUESTS_STORAGE.to_string(), storage);
    }
    Usage { list, problems }
}

/// `getStorageUsage`: the spec request rounded up to whole bytes, or the allocated size
/// (also rounded up) when that is larger (RecoverVolumeExpansionFailure, GA).
fn pvc_storage_usage(pvc: &PersistentVolumeClaim, problems: &mut Vec<String>) -> Option<Quantity> {
    let label = object_label(&pvc.metadata, "persistentvolumeclaim");
    let requests = parse_list(
        pvc.spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref()),
        &format!("{label}: spec.resources.requests"),
        problems,
    );
    let requested = requests.as_ref()?.get(STORAGE)?.round_up_to_integer();
    let allocated = parse_list(
        pvc.status
            .as_ref()
            .and_then(|s| s.allocated_resources.as_ref()),
        &format!("{label}: status.allocatedResources"),
        problems,
    );
    match allocated.as_ref().and_then(|a| a.get(STORAGE)) {
        Some(a) if *a > requested => Some(a.round_up_to_integer()),
        _ => Some(requested),
    }
}

/// The VolumeAttributesClass names a PVC refers to: spec, current and target.
fn pvc_vac_names(pvc: &PersistentVolumeClaim) -> Vec<&str> {
    let status = pvc.status.as_ref();
    let mut names: Vec<&str> = [
        pvc.spec
            .as_ref()
            .and_then(|s| s.volume_attributes_class_name.as_deref()),
        status.and_then(|s| s.current_volume_attributes_class_name.as_deref()),
        status
            .and_then(|s| s.modify_volume_status.as_ref())
            .and_then(|m| m.target_volume_attributes_class_name.as_deref()),
    ]
    .into_iter()
    .flatten()
    .filter(|n| !n.is_empty())
    .collect();
    names.sort_unstable();
    names.dedup();
    names
}

fn pvc_matches_requirement(
    pvc: &PersistentVolumeClaim,
    req: &ScopeRequirement,
) -> Result<bool, String> {
    if req.scope_name != "VolumeAttributesClass" {
        return Ok(false);
    }
    let names = pvc_vac_names(pvc);
    if req.operator == "Exists" {
        return Ok(!names.is_empty());
    }
    let selector = req.selector.as_ref().map_err(Clone::clone)?;
    if names.is_empty() {
        return Ok(selector.matches(None));
    }
    Ok(names.iter().any(|n| selector.matches(Some(n))))
}

/// Whether the PVC matches every scope requirement; only VolumeAttributesClass can
/// match. A selector upstream cannot build matches nothing (see [`pod_matches_scope`]).
pub fn pvc_matches_scope(pvc: &PersistentVolumeClaim, scope: &QuotaScope) -> bool {
    let mut all = true;
    for req in &scope.requirements {
        match pvc_matches_requirement(pvc, req) {
            Ok(matched) => all = all && matched,
            Err(_) => return false,
        }
    }
    all
}

// ---------------------------------------------------------------------------------------
// ResourceClaims
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
struct ClassRef {
    name: String,
    created: Option<i128>,
}

/// Upstream `extendedresourcecache.ExtendedResourceCache`: extended resource name ->
/// DeviceClass, and DeviceClass -> its `spec.extendedResourceName`. Feed it the
/// DeviceClass informer events in order; its quirks (older class losing a name clash,
/// delete dropping a name another class won) are kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtendedResourceCache {
    resource_to_class: BTreeMap<String, ClassRef>,
    class_to_resource: BTreeMap<String, String>,
}

fn class_name(class: &DeviceClass) -> &str {
    class.metadata.name.as_deref().unwrap_or_default()
}

fn class_extended_name(class: &DeviceClass) -> Option<&str> {
    class
        .spec
        .as_ref()
        .and_then(|s| s.extended_resource_name.as_deref())
}

impl ExtendedResourceCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache that has seen an add event for each class, in order.
    pub fn from_classes<'a>(classes: impl IntoIterator<Item = &'a DeviceClass>) -> Self {
        let mut cache = Self::new();
        for class in classes {
            cache.on_add(class);
        }
        cache
    }

    pub fn on_add(&mut self, class: &DeviceClass) {
        self.update_resource_to_class(class, None);
        self.update_class_to_resource(class);
    }

    pub fn on_update(&mut self, old: &DeviceClass, new: &DeviceClass) {
        self.update_resource_to_class(new, Some(old));
        self.update_class_to_resource(new);
    }

    pub fn on_delete(&mut self, class: &DeviceClass) {
        let name = class_name(class);
        self.resource_to_class
            .remove(&format!("{DEVICE_CLASS_PREFIX}{name}"));
        if let Some(extended) = class_extended_name(class) {
            self.resource_to_class.remove(extended);
        }
        self.class_to_resource.remove(name);
    }

    /// `GetDeviceClass`: the class that serves `resource_name`, if any.
    pub fn device_class(&self, resource_name: &str) -> Option<&str> {
        self.resource_to_class
            .get(resource_name)
            .map(|c| c.name.as_str())
    }

    /// `GetExtendedResource`: the class's explicit extended resource name, if any.
    pub fn extended_resource(&self, class_name: &str) -> Option<&str> {
        self.class_to_resource
            .get(class_name)
            .map(String::as_str)
            .filter(|n| !n.is_empty())
    }

    fn update_resource_to_class(&mut self, new: &DeviceClass, old: Option<&DeviceClass>) {
        let new_ref = ClassRef {
            name: class_name(new).to_string(),
            created: time_nanos(new.metadata.creation_timestamp.as_ref()),
        };
        // On a name clash the newer class wins, the lower name on a tie. Upstream
        // returns before touching any mapping when the new class loses.
        if let Some(existing) = class_extended_name(new).and_then(|n| self.resource_to_class.get(n))
        {
            match new_ref.created.cmp(&existing.created) {
                std::cmp::Ordering::Less => return,
                std::cmp::Ordering::Equal if new_ref.name >= existing.name => return,
                _ => {}
            }
        }
        if let Some(old) = old {
            self.resource_to_class
                .remove(&format!("{DEVICE_CLASS_PREFIX}{}", class_name(old)));
            if let Some(extended) = class_extended_name(old) {
                self.resource_to_class.remove(extended);
            }
        }
        if let Some(extended) = class_extended_name(new) {
            self.resource_to_class
                .insert(extended.to_string(), new_ref.clone());
        }
        self.resource_to_class
            .insert(format!("{DEVICE_CLASS_PREFIX}{}", new_ref.name), new_ref);
    }

    fn update_class_to_resource(&mut self, class: &DeviceClass) {
        let name = class_name(class).to_string();
        match class_extended_name(class) {
            Some(extended) => {
                self.class_to_resource.insert(name, extended.to_string());
            }
            None => {
                self.class_to_resource.remove(&name);
            }
        }
    }
}

/// What the ResourceClaim evaluator looks up besides the claim: upstream's pod lister
/// and its index of extended-resource claims by owning pod.
pub trait ClaimLookup {
    /// The pod `namespace/name`, if the lister has it.
    fn pod(&self, namespace: &str, name: &str) -> Option<&Pod>;
    /// Claims whose [`extended_claim_pod_owner`] is `(namespace, pod_uid)`.
    fn owned_claims(&self, namespace: &str, pod_uid: &str) -> Vec<&ResourceClaim>;
}

/// No pod lister (upstream `podsGetter == nil`): claims are never offset by pod usage.
pub struct NoClaimLookup;

impl ClaimLookup for NoClaimLookup {
    fn pod(&self, _namespace: &str, _name: &str) -> Option<&Pod> {
        None
    }

    fn owned_claims(&self, _namespace: &str, _pod_uid: &str) -> Vec<&ResourceClaim> {
        Vec::new()
    }
}

/// A [`ClaimLookup`] over plain slices (linear scans).
pub struct SliceClaimLookup<'a> {
    pub pods: &'a [Arc<Pod>],
    pub claims: &'a [Arc<ResourceClaim>],
}

impl ClaimLookup for SliceClaimLookup<'_> {
    fn pod(&self, namespace: &str, name: &str) -> Option<&Pod> {
        self.pods
            .iter()
            .find(|p| {
                p.metadata.namespace.as_deref().unwrap_or_default() == namespace
                    && p.metadata.name.as_deref().unwrap_or_default() == name
            })
            .map(Arc::as_ref)
    }

    fn owned_claims(&self, namespace: &str, pod_uid: &str) -> Vec<&ResourceClaim> {
        self.claims
            .iter()
            .filter(|c| {
                extended_claim_pod_owner(c)
                    .is_some_and(|(ns, uid)| ns == namespace && uid == pod_uid)
            })
            .map(Arc::as_ref)
            .collect()
    }
}

/// `metav1.GetControllerOfNoCopy`.
fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|r| r.controller == Some(true))
}

fn is_extended_resource_claim(claim: &ResourceClaim) -> bool {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// Upstream's `extendedResourceClaimPodUIDOwner` index key: `(namespace, pod UID)` for
/// an extended-resource claim controlled by a v1 Pod.
pub fn extended_claim_pod_owner(claim: &ResourceClaim) -> Option<(String, String)> {
    if !is_extended_resource_claim(claim) {
        return None;
    }
    let owner =
        controller_of(&claim.metadata).filter(|r| r.kind == "Pod" && r.api_version == "v1")?;
    Some((
        claim.metadata.namespace.clone().unwrap_or_default(),
        owner.uid.clone(),
    ))
}

/// ResourceClaim `MatchingResources` (DRAExtendedResource on).
pub fn claim_matching<S: AsRef<str>>(names: &[S], classes: &ExtendedResourceCache) -> Vec<String> {
    names
        .iter()
        .map(AsRef::as_ref)
        .filter(|name| {
            if *name == CLAIM_COUNT || name.ends_with(CLAIMS_PER_CLASS) {
                return true;
            }
            if name
                .strip_prefix(REQUESTS_DEVICE_CLASS_PREFIX)
                .is_some_and(|class| classes.extended_resource(class).is_some())
            {
                return true;
            }
            is_extended_resource_name_for_quota(name)
                && name
                    .strip_prefix(REQUESTS_PREFIX)
                    .is_some_and(|r| classes.device_class(r).is_some())
        })
        .map(str::to_string)
        .collect()
}

/// Devices one (sub)request may get: its count, 32 for All, 0 for unknown modes.
fn device_count(mode: Option<&str>, count: Option<i64>) -> Quantity {
    let n = match mode.unwrap_or_default() {
        "ExactCount" => count.unwrap_or_default(),
        "All" => ALLOCATION_RESULTS_MAX_SIZE,
        _ => 0,
    };
    Quantity::from_integer(n, Format::DecimalSI)
}

/// ResourceClaim `Usage` (DRAExtendedResource on).
pub fn claim_usage(
    claim: &ResourceClaim,
    classes: &ExtendedResourceCache,
    lookup: &dyn ClaimLookup,
    now: &Time,
) -> Usage {
    let mut problems = Vec::new();
    let mut list = ResourceList::from([(CLAIM_COUNT.to_string(), one())]);
    let zero = Quantity::zero();
    let requests = claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.requests.as_deref())
        .unwrap_or_default();
    for request in requests {
        let sub_requests = request.first_available.as_deref().unwrap_or_default();
        if !sub_requests.is_empty() {
            // Worst case per device class over the alternatives.
            let mut max_by_class = ResourceList::new();
            for sub in sub_requests {
                let key = format!("{}{CLAIMS_PER_CLASS}", sub.device_class_name);
                let q = device_count(sub.allocation_mode.as_deref(), sub.count);
                if q > *max_by_class.get(&key).unwrap_or(&zero) {
                    max_by_class.insert(key, q);
                }
            }
            add_into(&mut list, &max_by_class, &mut problems);
        } else if let Some(exactly) = &request.exactly {
            let key = format!("{}{CLAIMS_PER_CLASS}", exactly.device_class_name);
            let q = device_count(exactly.allocation_mode.as_deref(), exactly.count);
            let sum = add_quantity(list.get(&key).unwrap_or(&zero), &q, &key, &mut problems);
            list.insert(key, sum);
        }
        // Any other request kind is unknown to quota.
    }
    let pod_usage = verified_pod_usage(claim, lookup, now);
    let pod_list = pod_usage.as_ref().map(|u| &u.list);
    if let Some(u) = &pod_usage {
        problems.extend(u.problems.iter().cloned());
    }
    add_extended_resource_quota(&mut list, classes, pod_list, &mut problems);
    Usage { list, problems }
}

/// `getVerifiedPodUsage`: the usage of the pod an extended-resource claim was created
/// for, when that pod is known to be charged for the same devices already.
fn verified_pod_usage(
    claim: &ResourceClaim,
    lookup: &dyn ClaimLookup,
    now: &Time,
) -> Option<Usage> {
    if !is_extended_resource_claim(claim) {
        return None;
    }
    let owner =
        controller_of(&claim.metadata).filter(|r| r.kind == "Pod" && r.api_version == "v1")?;
    let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    let claim_name = claim.metadata.name.as_deref().unwrap_or_default();
    let pod = lookup.pod(namespace, &owner.name)?;
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    if owner.uid != pod_uid {
        return None;
    }
    match pod
        .status
        .as_ref()
        .and_then(|s| s.extended_resource_claim_status.as_ref())
    {
        Some(status) if status.resource_claim_name != claim_name => return None,
        Some(_) => {}
        None => {
            // Without the pod naming its claim, only the oldest owned claim (lowest
            // name on a tie) is offset.
            let created = time_nanos(claim.metadata.creation_timestamp.as_ref());
            for other in lookup.owned_claims(namespace, pod_uid) {
                let other_created = time_nanos(other.metadata.creation_timestamp.as_ref());
                match other_created.cmp(&created) {
                    std::cmp::Ordering::Less => return None,
                    std::cmp::Ordering::Equal
                        if other.metadata.name.as_deref().unwrap_or_default() < claim_name =>
                    {
                        return None;
                    }
                    _ => {}
                }
            }
        }
    }
    Some(pod_usage(pod, now))
}

/// `addExtendedResourceQuota`: mirrors each `<class>.deviceclass.resource.k8s.io/devices`
/// as `requests.deviceclass.resource.kubernetes.io/<class>` and, when the class maps
/// one, `requests.<extended resource>`, less what the pod already pays; set only if
/// the rest is positive. Two classes mapping one name collide upstream in random map
/// order; here the later class name wins.
fn add_extended_resource_quota(
    list: &mut ResourceList,
    classes: &ExtendedResourceCache,
    pod_usage: Option<&ResourceList>,
    problems: &mut Vec<String>,
) {
    let mut extended = ResourceList::new();
    for (name, quantity) in list.iter() {
        let Some(class) = name
            .strip_suffix(CLAIMS_PER_CLASS)
            .filter(|c| !c.is_empty())
        else {
            continue;
        };
        extended.insert(
            format!("{REQUESTS_DEVICE_CLASS_PREFIX}{class}"),
            quantity.clone(),
        );
        if let Some(resource) = classes.extended_resource(class) {
            extended.insert(format!("{REQUESTS_PREFIX}{resource}"), quantity.clone());
        }
    }
    for (name, quantity) in extended {
        let rest = match pod_usage.and_then(|u| u.get(&name)) {
            Some(paid) => quantity.checked_sub(paid).unwrap_or_else(|| {
                problems.push(format!("{name}: {quantity} - {paid} {OUT_OF_RANGE}"));
                quantity.clone()
            }),
            None => quantity,
        };
        if rest > Quantity::zero() {
            list.insert(name, rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ScopedResourceSelectorRequirement;
    use serde_json::{Value, json};

    fn from<T: k8s_openapi::serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).expect("valid test object")
    }

    fn now() -> Time {
        Time("2026-01-01T00:00:00Z".parse().expect("timestamp"))
    }

    fn strings(list: &ResourceList) -> BTreeMap<String, String> {
        list.iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect()
    }

    /// Expected usage as (name, canonical string) pairs.
    type Pairs<'a> = Vec<(&'a str, &'a str)>;

    fn want(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn container(name: &str, requests: Value, limits: Value) -> Value {
        json!({"name": name, "resources": {"requests": requests, "limits": limits}})
    }

    fn pod(spec: Value) -> Pod {
        from(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}))
    }

    fn status(name: &str, resources: Value, allocated: Value) -> Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": true, "restartCount": 0,
               "resources": resources, "allocatedResources": allocated})
    }

    #[test]
    fn pod_evaluator_usage() {
        let one_m = |r: &str| json!({r: "1m"});
        let cases: Vec<(&str, Pod, Pairs)> = vec![
            (
                "init container CPU",
                pod(
                    json!({"containers": [], "initContainers": [container("", one_m("cpu"), json!({"cpu": "2m"}))]}),
                ),
                vec![
                    ("requests.cpu", "1m"),
                    ("limits.cpu", "2m"),
                    ("pods", "1"),
                    ("cpu", "1m"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "init container MEM",
                pod(
                    json!({"containers": [], "initContainers": [container("", one_m("memory"), json!({"memory": "2m"}))]}),
                ),
                vec![
                    ("requests.memory", "1m"),
                    ("limits.memory", "2m"),
                    ("pods", "1"),
                    ("memory", "1m"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "init container local ephemeral storage",
                pod(
                    json!({"containers": [], "initContainers": [container("", json!({"ephemeral-storage": "32Mi"}), json!({"ephemeral-storage": "64Mi"}))]}),
                ),
                vec![
                    ("ephemeral-storage", "32Mi"),
                    ("requests.ephemeral-storage", "32Mi"),
                    ("limits.ephemeral-storage", "64Mi"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "init container hugepages",
                pod(
                    json!({"containers": [], "initContainers": [container("", json!({"hugepages-2Mi": "100Mi"}), json!(null))]}),
                ),
                vec![
                    ("hugepages-2Mi", "100Mi"),
                    ("requests.hugepages-2Mi", "100Mi"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "init container extended resources",
                pod(
                    json!({"containers": [], "initContainers": [container("", json!({"example.com/dongle": "3"}), json!({"example.com/dongle": "3"}))]}),
                ),
                vec![
                    ("requests.example.com/dongle", "3"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "container CPU",
                pod(json!({"containers": [container("", one_m("cpu"), json!({"cpu": "2m"}))]})),
                vec![
                    ("requests.cpu", "1m"),
                    ("limits.cpu", "2m"),
                    ("pods", "1"),
                    ("cpu", "1m"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "container MEM",
                pod(
                    json!({"containers": [container("", one_m("memory"), json!({"memory": "2m"}))]}),
                ),
                vec![
                    ("requests.memory", "1m"),
                    ("limits.memory", "2m"),
                    ("pods", "1"),
                    ("memory", "1m"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "container local ephemeral storage",
                pod(
                    json!({"containers": [container("", json!({"ephemeral-storage": "32Mi"}), json!({"ephemeral-storage": "64Mi"}))]}),
                ),
                vec![
                    ("ephemeral-storage", "32Mi"),
                    ("requests.ephemeral-storage", "32Mi"),
                    ("limits.ephemeral-storage", "64Mi"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "container hugepages",
                pod(
                    json!({"containers": [container("", json!({"hugepages-2Mi": "100Mi"}), json!(null))]}),
                ),
                vec![
                    ("hugepages-2Mi", "100Mi"),
                    ("requests.hugepages-2Mi", "100Mi"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "container extended resources",
                pod(
                    json!({"containers": [container("", json!({"example.com/dongle": "3"}), json!({"example.com/dongle": "3"}))]}),
                ),
                vec![
                    ("requests.example.com/dongle", "3"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "terminated generic count still appears",
                from(
                    json!({"spec": {"containers": [container("", json!({"example.com/dongle": "3"}), json!({"example.com/dongle": "3"}))]},
                            "status": {"phase": "Succeeded"}}),
                ),
                vec![("count/pods", "1")],
            ),
            (
                "init container maximums override sum of containers",
                pod(json!({
                    "initContainers": [
                        container("", json!({"cpu": "4", "memory": "100M", "example.com/dongle": "4"}), json!({"cpu": "8", "memory": "200M", "example.com/dongle": "4"})),
                        container("", json!({"cpu": "1", "memory": "50M", "example.com/dongle": "2"}), json!({"cpu": "2", "memory": "100M", "example.com/dongle": "2"})),
                    ],
                    "containers": [
                        container("", json!({"cpu": "1", "memory": "50M", "example.com/dongle": "1"}), json!({"cpu": "2", "memory": "100M", "example.com/dongle": "1"})),
                        container("", json!({"cpu": "2", "memory": "25M", "example.com/dongle": "2"}), json!({"cpu": "5", "memory": "50M", "example.com/dongle": "2"})),
                    ],
                })),
                vec![
                    ("requests.cpu", "4"),
                    ("requests.memory", "100M"),
                    ("limits.cpu", "8"),
                    ("limits.memory", "200M"),
                    ("pods", "1"),
                    ("cpu", "4"),
                    ("memory", "100M"),
                    ("requests.example.com/dongle", "4"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "pod deletion timestamp exceeded",
                from(json!({
                    "metadata": {"deletionTimestamp": "2025-12-31T23:59:00Z", "deletionGracePeriodSeconds": 30},
                    "status": {"reason": "NodeLost"},
                    "spec": {"terminationGracePeriodSeconds": 30, "containers": [container("", json!({"cpu": "1", "memory": "50M"}), json!({"cpu": "2", "memory": "100M"}))]},
                })),
                vec![("count/pods", "1")],
            ),
            (
                "pod deletion timestamp not exceeded",
                from(json!({
                    "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30},
                    "status": {"reason": "NodeLost"},
                    "spec": {"containers": [container("", json!({"cpu": "1"}), json!({"cpu": "2"}))]},
                })),
                vec![
                    ("requests.cpu", "1"),
                    ("limits.cpu", "2"),
                    ("pods", "1"),
                    ("cpu", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "count pod overhead as usage",
                pod(
                    json!({"overhead": {"cpu": "1"}, "containers": [container("", json!({"cpu": "1"}), json!({"cpu": "2"}))]}),
                ),
                vec![
                    ("requests.cpu", "2"),
                    ("limits.cpu", "3"),
                    ("pods", "1"),
                    ("cpu", "2"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "pod-level CPU",
                pod(
                    json!({"containers": [], "resources": {"requests": {"cpu": "1m"}, "limits": {"cpu": "2m"}}}),
                ),
                vec![
                    ("requests.cpu", "1m"),
                    ("limits.cpu", "2m"),
                    ("pods", "1"),
                    ("cpu", "1m"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "pod-level Memory",
                pod(
                    json!({"containers": [], "resources": {"requests": {"memory": "1Mi"}, "limits": {"memory": "2Mi"}}}),
                ),
                vec![
                    ("requests.memory", "1Mi"),
                    ("limits.memory", "2Mi"),
                    ("pods", "1"),
                    ("memory", "1Mi"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "pod-level memory with container-level ephemeral storage",
                pod(json!({
                    "resources": {"requests": {"memory": "1Mi"}, "limits": {"memory": "2Mi"}},
                    "containers": [container("", json!({"ephemeral-storage": "32Mi"}), json!({"ephemeral-storage": "64Mi"}))],
                })),
                vec![
                    ("ephemeral-storage", "32Mi"),
                    ("requests.ephemeral-storage", "32Mi"),
                    ("limits.ephemeral-storage", "64Mi"),
                    ("pods", "1"),
                    ("requests.memory", "1Mi"),
                    ("limits.memory", "2Mi"),
                    ("memory", "1Mi"),
                    ("count/pods", "1"),
                ],
            ),
            // Not upstream cases: sums, sidecars, pod-level overrides, DRA names.
            (
                "container sums keep the first format",
                pod(json!({"containers": [
                    container("a", json!({"cpu": "500m", "memory": "512Mi"}), json!(null)),
                    container("b", json!({"cpu": "1", "memory": "1Gi"}), json!(null)),
                ]})),
                vec![
                    ("requests.cpu", "1500m"),
                    ("cpu", "1500m"),
                    ("requests.memory", "1536Mi"),
                    ("memory", "1536Mi"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "sidecar before init container adds to it",
                pod(json!({
                    "initContainers": [
                        {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                        container("init", json!({"cpu": "2"}), json!(null)),
                    ],
                    "containers": [container("main", json!({"cpu": "1"}), json!(null))],
                })),
                vec![
                    ("requests.cpu", "3"),
                    ("cpu", "3"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "sidecar after init container only adds to the sum",
                pod(json!({
                    "initContainers": [
                        container("init", json!({"cpu": "2"}), json!(null)),
                        {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                    ],
                    "containers": [container("main", json!({"cpu": "1"}), json!(null))],
                })),
                vec![
                    ("requests.cpu", "2"),
                    ("cpu", "2"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "pod-level requests override container sums, hugepages too",
                pod(json!({
                    "resources": {"requests": {"cpu": "3", "hugepages-2Mi": "4Mi"}, "limits": {"cpu": "4"}},
                    "overhead": {"cpu": "250m"},
                    "containers": [container("a", json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1"}))],
                })),
                vec![
                    ("requests.cpu", "3250m"),
                    ("cpu", "3250m"),
                    ("limits.cpu", "4250m"),
                    ("requests.memory", "1Gi"),
                    ("memory", "1Gi"),
                    ("hugepages-2Mi", "4Mi"),
                    ("requests.hugepages-2Mi", "4Mi"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "overhead does not raise a missing or zero limit",
                pod(
                    json!({"overhead": {"cpu": "1", "memory": "1Mi"}, "containers": [container("a", json!({"cpu": "1"}), json!({"memory": "0"}))]}),
                ),
                vec![
                    ("requests.cpu", "2"),
                    ("cpu", "2"),
                    ("requests.memory", "1Mi"),
                    ("memory", "1Mi"),
                    ("limits.memory", "0"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "implicit DRA extended resource and native prefixed names",
                pod(
                    json!({"containers": [container("a", json!({"deviceclass.resource.kubernetes.io/gpu": "2", "foo.kubernetes.io/bar": "1"}), json!(null))]}),
                ),
                vec![
                    ("requests.deviceclass.resource.kubernetes.io/gpu", "2"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
        ];
        for (name, pod, expected) in cases {
            let usage = pod_usage(&pod, &now());
            assert_eq!(strings(&usage.list), want(&expected), "{name}");
            assert!(usage.problems.is_empty(), "{name}: {:?}", usage.problems);
        }
    }

    #[test]
    fn pod_evaluator_usage_resource_resize() {
        let with_status = |req: Value, lim: Value, status_requests: Value| {
            from::<Pod>(json!({
                "spec": {"containers": [container("", req, lim)]},
                "status": {"containerStatuses": [status("", json!({"requests": status_requests}), json!(null))]},
            }))
        };
        let cases = vec![
            (
                "verify Max(Container.Spec.Requests, ContainerStatus.Resources) for memory resource",
                with_status(
                    json!({"memory": "200Mi"}),
                    json!({"memory": "400Mi"}),
                    json!({"memory": "150Mi"}),
                ),
                vec![
                    ("requests.memory", "200Mi"),
                    ("limits.memory", "400Mi"),
                    ("pods", "1"),
                    ("memory", "200Mi"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "verify Max(Container.Spec.Requests, ContainerStatus.Resources) for CPU resource",
                with_status(
                    json!({"cpu": "100m"}),
                    json!({"cpu": "200m"}),
                    json!({"cpu": "150m"}),
                ),
                vec![
                    ("requests.cpu", "150m"),
                    ("limits.cpu", "200m"),
                    ("pods", "1"),
                    ("cpu", "150m"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "verify Max(Container.Spec.Requests, ContainerStatus.Resources) for CPU and memory resource",
                with_status(
                    json!({"cpu": "100m", "memory": "200Mi"}),
                    json!({"cpu": "200m", "memory": "400Mi"}),
                    json!({"cpu": "150m", "memory": "250Mi"}),
                ),
                vec![
                    ("requests.cpu", "150m"),
                    ("limits.cpu", "200m"),
                    ("requests.memory", "250Mi"),
                    ("limits.memory", "400Mi"),
                    ("pods", "1"),
                    ("cpu", "150m"),
                    ("memory", "250Mi"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "verify Max(Container.Spec.Requests, ContainerStatus.Resources==nil) for CPU and memory resource",
                from(json!({
                    "spec": {"containers": [container("", json!({"cpu": "100m", "memory": "200Mi"}), json!({"cpu": "200m", "memory": "400Mi"}))]},
                    "status": {"containerStatuses": [status("", json!(null), json!(null))]},
                })),
                vec![
                    ("requests.cpu", "100m"),
                    ("limits.cpu", "200m"),
                    ("requests.memory", "200Mi"),
                    ("limits.memory", "400Mi"),
                    ("pods", "1"),
                    ("cpu", "100m"),
                    ("memory", "200Mi"),
                    ("count/pods", "1"),
                ],
            ),
            // Not upstream: an infeasible resize ignores the spec, allocated counts.
            (
                "infeasible resize uses actuated and allocated",
                from(json!({
                    "spec": {"containers": [container("a", json!({"cpu": "4"}), json!({"cpu": "8"}))]},
                    "status": {
                        "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
                        "containerStatuses": [status("a", json!({"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}), json!({"cpu": "1500m"}))],
                    },
                })),
                vec![
                    ("requests.cpu", "1500m"),
                    ("cpu", "1500m"),
                    ("limits.cpu", "2"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
            (
                "allocated larger than spec during a resize",
                from(json!({
                    "spec": {"containers": [container("a", json!({"cpu": "1"}), json!(null))]},
                    "status": {"containerStatuses": [status("a", json!(null), json!({"cpu": "2"}))]},
                })),
                vec![
                    ("requests.cpu", "2"),
                    ("cpu", "2"),
                    ("pods", "1"),
                    ("count/pods", "1"),
                ],
            ),
        ];
        for (name, pod, expected) in cases {
            assert_eq!(
                strings(&pod_usage(&pod, &now()).list),
                want(&expected),
                "{name}"
            );
        }
    }

    #[test]
    fn pod_usage_skips_malformed_quantities() {
        let p = pod(
            json!({"containers": [container("a", json!({"cpu": "abc", "memory": "1Gi"}), json!(null))]}),
        );
        let usage = pod_usage(&p, &now());
        assert_eq!(
            strings(&usage.list),
            want(&[
                ("requests.memory", "1Gi"),
                ("memory", "1Gi"),
                ("pods", "1"),
                ("count/pods", "1")
            ])
        );
        assert_eq!(usage.problems.len(), 1, "{:?}", usage.problems);
        assert!(
            usage
                .problems
                .iter()
                .all(|p| p.contains("spec.containers[0].resources.requests[cpu]"))
        );
    }

    fn make_pod(name: &str, class: &str, cpu: Option<&str>, phase: &str) -> Pod {
        let resources = cpu.map_or(
            json!({}),
            |c| json!({"requests": {"cpu": c}, "limits": {"cpu": c}}),
        );
        from(json!({
            "metadata": {"name": name},
            "spec": {"priorityClassName": class, "containers": [{"name": "", "resources": resources}]},
            "status": {"phase": phase},
        }))
    }

    fn selector(scope: &str, op: &str, values: &[&str]) -> ScopedResourceSelectorRequirement {
        ScopedResourceSelectorRequirement {
            scope_name: scope.to_string(),
            operator: op.to_string(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn scope_of(scopes: &[&str], exprs: Vec<ScopedResourceSelectorRequirement>) -> QuotaScope {
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        let sel = ScopeSelector {
            match_expressions: Some(exprs),
        };
        parse_scope(&scopes, Some(&sel))
    }

    #[test]
    fn pod_evaluator_usage_stats() {
        let high_in = || vec![selector("PriorityClass", "In", &["high-priority"])];
        let cases: Vec<(&str, Vec<Pod>, QuotaScope, Pairs)> = vec![
            ("nil case", vec![], QuotaScope::default(), vec![]),
            (
                "all pods in running state",
                vec![
                    make_pod("p1", "", Some("1"), "Running"),
                    make_pod("p2", "", Some("1"), "Running"),
                ],
                QuotaScope::default(),
                vec![
                    ("pods", "2"),
                    ("count/pods", "2"),
                    ("cpu", "2"),
                    ("requests.cpu", "2"),
                    ("limits.cpu", "2"),
                ],
            ),
            (
                "one pods in terminal state",
                vec![
                    make_pod("p1", "", Some("1"), "Running"),
                    make_pod("p2", "", Some("1"), "Succeeded"),
                ],
                QuotaScope::default(),
                vec![
                    ("pods", "1"),
                    ("count/pods", "2"),
                    ("cpu", "1"),
                    ("requests.cpu", "1"),
                    ("limits.cpu", "1"),
                ],
            ),
            (
                "partial pods matching quotaScopeSelector",
                vec![
                    make_pod("p1", "high-priority", Some("1"), "Running"),
                    make_pod("p2", "high-priority", Some("1"), "Succeeded"),
                    make_pod("p3", "low-priority", Some("1"), "Running"),
                ],
                scope_of(&[], high_in()),
                vec![
                    ("pods", "1"),
                    ("count/pods", "2"),
                    ("cpu", "1"),
                    ("requests.cpu", "1"),
                    ("limits.cpu", "1"),
                ],
            ),
            (
                "partial pods matching quotaScopeSelector - w/ scopeName specified",
                vec![
                    make_pod("p1", "high-priority", Some("1"), "Running"),
                    make_pod("p2", "high-priority", Some("1"), "Succeeded"),
                    make_pod("p3", "low-priority", Some("1"), "Running"),
                ],
                scope_of(&["PriorityClass"], high_in()),
                vec![
                    ("pods", "1"),
                    ("count/pods", "2"),
                    ("cpu", "1"),
                    ("requests.cpu", "1"),
                    ("limits.cpu", "1"),
                ],
            ),
            (
                "partial pods matching quotaScopeSelector - w/ multiple scopeNames specified",
                vec![
                    make_pod("p1", "high-priority", Some("1"), "Running"),
                    make_pod("p2", "high-priority", Some("1"), "Succeeded"),
                    make_pod("p3", "low-priority", Some("1"), "Running"),
                    make_pod("p4", "high-priority", None, "Failed"),
                ],
                scope_of(&["PriorityClass", "BestEffort"], high_in()),
                vec![("count/pods", "1")],
            ),
        ];
        for (name, pods, scope, expected) in cases {
            let got = sum_usage(
                &pods,
                &[],
                |p| pod_usage(p, &now()),
                |p| pod_matches_scope(p, &scope),
            );
            assert_eq!(strings(&got.list), want(&expected), "{name}");
        }
    }

    #[test]
    fn pod_evaluator_matching_scopes() {
        let all = || {
            vec![
                selector("Terminating", "", &[]),
                selector("NotTerminating", "", &[]),
                selector("BestEffort", "", &[]),
                selector("NotBestEffort", "", &[]),
                selector("PriorityClass", "In", &["class1"]),
                selector("CrossNamespacePodAffinity", "", &[]),
            ]
        };
        let deadline = |affinity: Value| {
            pod(json!({"containers": [], "activeDeadlineSeconds": 30, "affinity": affinity}))
        };
        let cases: Vec<(&str, Pod, Vec<ScopedResourceSelectorRequirement>, Vec<&str>)> = vec![
            (
                "EmptyPod",
                pod(json!({"containers": []})),
                all(),
                vec!["NotTerminating", "BestEffort"],
            ),
            (
                "PriorityClass",
                pod(json!({"containers": [], "priorityClassName": "class1"})),
                all(),
                vec!["NotTerminating", "BestEffort", "PriorityClass"],
            ),
            (
                "NotBestEffort",
                pod(
                    json!({"containers": [container("", json!({"cpu": "1", "memory": "50M", "example.com/dongle": "1"}), json!({"cpu": "2", "memory": "100M", "example.com/dongle": "1"}))]}),
                ),
                all(),
                vec!["NotTerminating", "NotBestEffort"],
            ),
            (
                "Terminating",
                deadline(json!(null)),
                all(),
                vec!["Terminating", "BestEffort"],
            ),
            (
                "OnlyTerminating",
                deadline(json!(null)),
                vec![selector("Terminating", "", &[])],
                vec!["Terminating"],
            ),
            (
                "CrossNamespaceRequiredAffinity",
                deadline(
                    json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {}, "namespaces": ["ns1"], "namespaceSelector": {}, "topologyKey": ""}]}}),
                ),
                all(),
                vec!["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
            ),
            (
                "CrossNamespaceRequiredAffinityWithSlice",
                deadline(
                    json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {}, "namespaces": ["ns1"], "topologyKey": ""}]}}),
                ),
                all(),
                vec!["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
            ),
            (
                "CrossNamespacePreferredAffinity",
                deadline(
                    json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"labelSelector": {}, "namespaces": ["ns2"], "namespaceSelector": {}, "topologyKey": ""}}]}}),
                ),
                all(),
                vec!["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
            ),
            (
                "CrossNamespacePreferredAffinityWithSelector",
                deadline(
                    json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"labelSelector": {}, "namespaceSelector": {}, "topologyKey": ""}}]}}),
                ),
                all(),
                vec!["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
            ),
            (
                "CrossNamespacePreferredAntiAffinity",
                deadline(
                    json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"labelSelector": {}, "namespaceSelector": {}, "topologyKey": ""}}]}}),
                ),
                all(),
                vec!["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
            ),
            (
                "CrossNamespaceRequiredAntiAffinity",
                deadline(
                    json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {}, "namespaces": ["ns3"], "topologyKey": ""}]}}),
                ),
                all(),
                vec!["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
            ),
        ];
        for (name, p, selectors, expected) in cases {
            let got: Vec<String> = selectors
                .into_iter()
                .filter(|s| pod_matches_scope(&p, &scope_of(&[], vec![s.clone()])))
                .map(|s| s.scope_name)
                .collect();
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn pod_priority_class_operators_and_bad_selectors() {
        let with_class = pod(json!({"containers": [], "priorityClassName": "high"}));
        let without = pod(json!({"containers": []}));
        let check = |sel: ScopedResourceSelectorRequirement| {
            let scope = scope_of(&[], vec![sel]);
            (
                pod_matches_scope(&with_class, &scope),
                pod_matches_scope(&without, &scope),
            )
        };
        assert_eq!(
            check(selector("PriorityClass", "In", &["high"])),
            (true, false)
        );
        assert_eq!(
            check(selector("PriorityClass", "NotIn", &["high"])),
            (false, true)
        );
        assert_eq!(
            check(selector("PriorityClass", "NotIn", &["low"])),
            (true, true)
        );
        assert_eq!(
            check(selector("PriorityClass", "Exists", &[])),
            (true, false)
        );
        assert_eq!(
            check(selector("PriorityClass", "DoesNotExist", &[])),
            (false, true)
        );
        // spec.scopes entries are Exists requirements.
        let scopes = parse_scope(&["PriorityClass".to_string()], None);
        assert!(pod_matches_scope(&with_class, &scopes));
        assert!(!pod_matches_scope(&without, &scopes));
        // Selectors upstream cannot build match nothing, even for DoesNotExist-like cases.
        assert_eq!(check(selector("PriorityClass", "In", &[])), (false, false));
        assert_eq!(
            check(selector("PriorityClass", "DoesNotExist", &["x"])),
            (false, false)
        );
        assert_eq!(
            check(selector("PriorityClass", "NotIn", &["not a label value"])),
            (false, false)
        );
        assert_eq!(
            check(selector("PriorityClass", "Bogus", &["high"])),
            (false, false)
        );
        assert_eq!(
            scope_of(&[], vec![selector("PriorityClass", "Bogus", &[])])
                .selector_problems()
                .len(),
            1
        );
        // Other scopes ignore the operator; unknown scopes never match.
        assert_eq!(
            check(selector("NotTerminating", "Bogus", &[])),
            (true, true)
        );
        assert_eq!(
            check(selector("VolumeAttributesClass", "Exists", &[])),
            (false, false)
        );
        // Sum with a broken selector: every name stays at zero.
        let pods = vec![with_class.clone(), without.clone()];
        let scope = scope_of(&[], vec![selector("PriorityClass", "In", &[])]);
        let got = sum_usage(
            &pods,
            &["pods".to_string()],
            |p| pod_usage(p, &now()),
            |p| pod_matches_scope(p, &scope),
        );
        assert_eq!(strings(&got.list), want(&[("pods", "0")]));
    }

    #[test]
    fn pod_qos_prefers_status() {
        let guaranteed = pod(
            json!({"containers": [container("", json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1", "memory": "1Gi"}))]}),
        );
        assert_eq!(pod_qos_class(&guaranteed), "Guaranteed");
        let mut labelled = guaranteed.clone();
        labelled.status = Some(from(json!({"qosClass": "BestEffort"})));
        assert_eq!(pod_qos_class(&labelled), "BestEffort");
        let burstable =
            pod(json!({"containers": [container("", json!({"cpu": "1"}), json!(null))]}));
        assert_eq!(pod_qos_class(&burstable), "Burstable");
        let pod_level = pod(
            json!({"resources": {}, "containers": [container("", json!({"cpu": "1"}), json!(null))]}),
        );
        assert_eq!(pod_qos_class(&pod_level), "BestEffort");
    }

    #[test]
    fn pod_evaluator_matching_resources() {
        let input = [
            "count/pods",
            "pods",
            "cpu",
            "limits.memory",
            "requests.storage",
            "services",
            "hugepages-2Mi",
            "requests.hugepages-1Gi",
            "requests.example.com/dongle",
            "requests.deviceclass.resource.kubernetes.io/gpu",
            "requests.foo.kubernetes.io/bar",
            "example.com/dongle",
            "configmaps",
        ];
        assert_eq!(
            pod_matching(&input),
            vec![
                "count/pods",
                "cpu",
                "limits.memory",
                "pods",
                "hugepages-2Mi",
                "requests.hugepages-1Gi",
                "requests.example.com/dongle",
                "requests.deviceclass.resource.kubernetes.io/gpu",
            ]
        );
    }

    fn service(spec: Value) -> Service {
        from(json!({"metadata": {"name": "s"}, "spec": spec}))
    }

    #[test]
    fn service_evaluator_usage() {
        let cases = vec![
            ("loadbalancer", json!({"type": "LoadBalancer"}), ("0", "1")),
            (
                "loadbalancer_ports",
                json!({"type": "LoadBalancer", "ports": [{"port": 27443}]}),
                ("1", "1"),
            ),
            ("clusterip", json!({"type": "ClusterIP"}), ("0", "0")),
            (
                "nodeports",
                json!({"type": "NodePort", "ports": [{"port": 27443}]}),
                ("1", "0"),
            ),
            (
                "multi-nodeports",
                json!({"type": "NodePort", "ports": [{"port": 27443}, {"port": 27444}]}),
                ("2", "0"),
            ),
            (
                "nodeports-disabled",
                json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false, "ports": [{"port": 27443}, {"port": 27444}]}),
                ("0", "1"),
            ),
            (
                "nodeports-default-enabled",
                json!({"type": "LoadBalancer", "ports": [{"port": 27443, "nodePort": 32001}, {"port": 27444}]}),
                ("2", "1"),
            ),
            (
                "nodeports-explicitly-enabled",
                json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": true, "ports": [{"port": 27443}, {"port": 27444}]}),
                ("2", "1"),
            ),
            (
                "nodeports-disabled-but-specified",
                json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false,
                       "ports": [{"port": 27443, "nodePort": 32001}, {"port": 27444, "nodePort": 0}, {"port": 27445}]}),
                ("1", "1"),
            ),
            (
                "externalname",
                json!({"type": "ExternalName", "ports": [{"port": 1}]}),
                ("0", "0"),
            ),
        ];
        for (name, spec, (node_ports, lbs)) in cases {
            let got = service_usage(&service(spec));
            assert_eq!(
                strings(&got.list),
                want(&[
                    ("count/services", "1"),
                    ("services", "1"),
                    ("services.nodeports", node_ports),
                    ("services.loadbalancers", lbs)
                ]),
                "{name}"
            );
        }
    }

    #[test]
    fn service_evaluator_matches_resources() {
        let input = [
            "configmaps",
            "cpu",
            "services",
            "services.nodeports",
            "services.loadbalancers",
            "services",
        ];
        assert_eq!(
            service_matching(&input),
            vec!["services", "services.loadbalancers", "services.nodeports"]
        );
        assert_eq!(
            service_matching(&["count/services"]),
            vec!["count/services"]
        );
        let svc = service(json!({"type": "NodePort"}));
        assert_eq!(quota_service_type(&svc), "NodePort");
        assert!(unscoped_matches(&QuotaScope::default()));
        assert!(!unscoped_matches(&parse_scope(
            &["BestEffort".to_string()],
            None
        )));
    }

    fn pvc(v: Value) -> PersistentVolumeClaim {
        from(v)
    }

    fn claim_with(storage: &str, class: Option<&str>) -> PersistentVolumeClaim {
        pvc(json!({
            "metadata": {"name": "foo", "namespace": "ns"},
            "spec": {
                "selector": {"matchExpressions": [{"key": "key2", "operator": "Exists"}]},
                "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                "resources": {"requests": {"storage": storage}},
                "storageClassName": class,
            },
        }))
    }

    fn pvc_with_allocated(size: &str, allocated: &str) -> PersistentVolumeClaim {
        pvc(json!({
            "metadata": {"name": "foo", "namespace": "ns"},
            "spec": {"resources": {"requests": {"storage": size}}},
            "status": {"allocatedResources": {"storage": allocated}},
        }))
    }

    #[test]
    fn persistent_volume_claim_evaluator_usage() {
        let cases = vec![
            (
                "pvc-usage",
                claim_with("10Gi", None),
                vec![
                    ("requests.storage", "10Gi"),
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            (
                "pvc-usage-by-class",
                claim_with("10Gi", Some("gold")),
                vec![
                    ("requests.storage", "10Gi"),
                    ("persistentvolumeclaims", "1"),
                    ("gold.storageclass.storage.k8s.io/requests.storage", "10Gi"),
                    (
                        "gold.storageclass.storage.k8s.io/persistentvolumeclaims",
                        "1",
                    ),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            (
                "pvc-usage-rounded",
                claim_with("1001m", None),
                vec![
                    ("requests.storage", "2"),
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            (
                "pvc-usage-by-class-rounded",
                claim_with("1001m", Some("gold")),
                vec![
                    ("requests.storage", "2"),
                    ("persistentvolumeclaims", "1"),
                    ("gold.storageclass.storage.k8s.io/requests.storage", "2"),
                    (
                        "gold.storageclass.storage.k8s.io/persistentvolumeclaims",
                        "1",
                    ),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            (
                "pvc-usage-higher-allocated-resource",
                pvc_with_allocated("5G", "10G"),
                vec![
                    ("requests.storage", "10G"),
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            (
                "pvc-usage-lower-allocated-resource",
                pvc_with_allocated("10G", "5G"),
                vec![
                    ("requests.storage", "10G"),
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            // Not upstream: rounding of the allocated size, the beta annotation.
            (
                "allocated size rounded up too",
                pvc_with_allocated("1", "1500m"),
                vec![
                    ("requests.storage", "2"),
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            (
                "beta annotation wins over storageClassName",
                pvc(json!({
                    "metadata": {"name": "foo", "annotations": {"volume.beta.kubernetes.io/storage-class": "silver"}},
                    "spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1Gi"}}},
                })),
                vec![
                    ("requests.storage", "1Gi"),
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                    ("silver.storageclass.storage.k8s.io/requests.storage", "1Gi"),
                    (
                        "silver.storageclass.storage.k8s.io/persistentvolumeclaims",
                        "1",
                    ),
                ],
            ),
            (
                "no storage request, allocated ignored",
                pvc(
                    json!({"metadata": {"name": "foo"}, "spec": {}, "status": {"allocatedResources": {"storage": "1Gi"}}}),
                ),
                vec![
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
        ];
        for (name, claim, expected) in cases {
            let got = pvc_usage(&claim);
            assert_eq!(strings(&got.list), want(&expected), "{name}");
            assert!(got.problems.is_empty(), "{name}");
        }
        let bad = pvc(
            json!({"metadata": {"name": "foo"}, "spec": {"resources": {"requests": {"storage": "ten"}}}}),
        );
        let got = pvc_usage(&bad);
        assert_eq!(
            strings(&got.list),
            want(&[
                ("persistentvolumeclaims", "1"),
                ("count/persistentvolumeclaims", "1")
            ])
        );
        assert_eq!(got.problems.len(), 1);
    }

    #[test]
    fn persistent_volume_claim_evaluator_matching_resources() {
        let supported = [
            "count/persistentvolumeclaims",
            "requests.storage",
            "persistentvolumeclaims",
            "gold.storageclass.storage.k8s.io/requests.storage",
            "gold.storageclass.storage.k8s.io/persistentvolumeclaims",
        ];
        assert_eq!(pvc_matching(&supported), supported.to_vec());
        let unsupported = [
            "storage",
            "ephemeral-storage",
            "bronze.storageclass.storage.k8s.io/storage",
            "gold.storage.k8s.io/requests.storage",
        ];
        assert!(pvc_matching(&unsupported).is_empty());
    }

    #[test]
    fn persistent_volume_claim_volume_attributes_class_scopes() {
        let with_vac = |spec: Option<&str>, current: Option<&str>, target: Option<&str>| {
            pvc(json!({
                "metadata": {"name": "foo"},
                "spec": {"volumeAttributesClassName": spec},
                "status": {"currentVolumeAttributesClassName": current,
                           "modifyVolumeStatus": target.map(|t| json!({"status": "InProgress", "targetVolumeAttributesClassName": t}))},
            }))
        };
        let none = with_vac(None, None, None);
        let gold = with_vac(Some("gold"), None, None);
        let moving = with_vac(Some("gold"), Some("silver"), Some("gold"));
        let check = |sel: ScopedResourceSelectorRequirement| {
            let scope = scope_of(&[], vec![sel]);
            [&none, &gold, &moving].map(|c| pvc_matches_scope(c, &scope))
        };
        assert_eq!(
            check(selector("VolumeAttributesClass", "Exists", &[])),
            [false, true, true]
        );
        assert_eq!(
            check(selector("VolumeAttributesClass", "DoesNotExist", &[])),
            [true, false, false]
        );
        assert_eq!(
            check(selector("VolumeAttributesClass", "In", &["silver"])),
            [false, false, true]
        );
        // Any referenced class matching is enough.
        assert_eq!(
            check(selector("VolumeAttributesClass", "NotIn", &["gold"])),
            [true, false, true]
        );
        assert_eq!(
            check(selector("VolumeAttributesClass", "In", &[])),
            [false, false, false]
        );
        assert_eq!(
            check(selector("PriorityClass", "Exists", &[])),
            [false, false, false]
        );
        let scopes = parse_scope(&["VolumeAttributesClass".to_string()], None);
        assert!(pvc_matches_scope(&gold, &scopes) && !pvc_matches_scope(&none, &scopes));
        assert!(pvc_matches_scope(&none, &QuotaScope::default()));
    }

    fn device_class(name: &str, extended: Option<&str>, created: Option<&str>) -> DeviceClass {
        from(
            json!({"metadata": {"name": name, "creationTimestamp": created}, "spec": {"extendedResourceName": extended}}),
        )
    }

    fn resource_claim(
        name: &str,
        extended_for_pod: Option<&str>,
        requests: Value,
    ) -> ResourceClaim {
        let mut meta = json!({"name": name, "namespace": "ns"});
        if let Some(pod) = extended_for_pod {
            meta["annotations"] = json!({EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"});
            meta["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": "uid", "controller": true}]);
        }
        from(json!({"metadata": meta, "spec": {"devices": {"requests": requests}}}))
    }

    fn exactly(name: &str, class: &str, mode: &str, count: Option<i64>) -> Value {
        json!({"name": name, "exactly": {"deviceClassName": class, "allocationMode": mode, "count": count}})
    }

    fn first_available(subs: Vec<(&str, &str, Option<i64>)>) -> Value {
        let subs: Vec<Value> = subs
            .into_iter()
            .enumerate()
            .map(|(i, (class, mode, count))| {
                json!({"name": format!("subreq-{i}"), "deviceClassName": class, "allocationMode": mode, "count": count})
            })
            .collect();
        json!({"name": "req-0", "firstAvailable": subs})
    }

    fn claim_pod(name: &str, init: Vec<Value>, containers: Vec<Value>, claim_status: bool) -> Pod {
        let status = if claim_status {
            json!({"extendedResourceClaimStatus": {"resourceClaimName": "foo", "requestMappings": []}})
        } else {
            json!({})
        };
        from(json!({
            "metadata": {"namespace": "ns", "name": name, "uid": "uid"},
            "spec": {"initContainers": init, "containers": containers},
            "status": status,
        }))
    }

    #[test]
    fn resource_claim_evaluator_usage() {
        let gpu1 = || exactly("req-0", "gpu", "ExactCount", Some(1));
        let implicit = || json!({"deviceclass.resource.kubernetes.io/gpu": "1"});
        let explicit = || json!({"example.com/gpu": "1"});
        let both =
            || json!({"example.com/gpu": "1", "deviceclass.resource.kubernetes.io/gpu": "1"});
        let pods = vec![
            claim_pod(
                "pod-implicit",
                vec![],
                vec![container("", implicit(), json!(null))],
                true,
            ),
            claim_pod(
                "pod-explicit",
                vec![container("", explicit(), json!(null))],
                vec![],
                true,
            ),
            claim_pod(
                "pod-hybrid",
                vec![container("", both(), json!(null))],
                vec![container("", both(), json!(null))],
                true,
            ),
            claim_pod(
                "pod-nil-status",
                vec![container("", explicit(), json!(null))],
                vec![container("", implicit(), json!(null))],
                false,
            ),
            claim_pod(
                "pod-init",
                vec![
                    container("init-container-1", both(), json!(null)),
                    container("init-container-2", both(), json!(null)),
                ],
                vec![container("container-1", both(), json!(null))],
                true,
            ),
        ];
        let classes = ExtendedResourceCache::from_classes([&device_class(
            "gpu",
            Some("example.com/gpu"),
            None,
        )]);
        let two_gpu = || {
            json!([
                exactly("container-1-request-0", "gpu", "ExactCount", Some(1)),
                exactly("container-1-request-1", "gpu", "ExactCount", Some(1))
            ])
        };
        let nil_status_other = resource_claim("foo", Some("pod-nil-status"), two_gpu());
        let none: &[ResourceClaim] = &[];
        let with_other = std::slice::from_ref(&nil_status_other);
        let count = ("count/resourceclaims.resource.k8s.io", "1");
        let devices = |n| ("gpu.deviceclass.resource.k8s.io/devices", n);
        let implicit_req = |n| ("requests.deviceclass.resource.kubernetes.io/gpu", n);
        let explicit_req = |n| ("requests.example.com/gpu", n);
        // (name, claim, uses the class mapping and pods, other owned claims, usage)
        let cases: Vec<(&str, ResourceClaim, bool, &[ResourceClaim], Pairs)> = vec![
            (
                "implicit-extended-resource-claim",
                resource_claim(
                    "foo",
                    Some("pod-implicit"),
                    json!([exactly(
                        "container-0-request-0",
                        "gpu",
                        "ExactCount",
                        Some(1)
                    )]),
                ),
                true,
                none,
                vec![count, devices("1"), explicit_req("1")],
            ),
            (
                "explicit-extended-resource-claim",
                resource_claim(
                    "foo",
                    Some("pod-explicit"),
                    json!([exactly(
                        "container-0-request-0",
                        "gpu",
                        "ExactCount",
                        Some(1)
                    )]),
                ),
                true,
                none,
                vec![count, devices("1"), implicit_req("1")],
            ),
            (
                "hybrid-extended-resource-claim",
                resource_claim("foo", Some("pod-hybrid"), two_gpu()),
                true,
                none,
                vec![count, devices("2"), implicit_req("1"), explicit_req("1")],
            ),
            (
                "nil-status-extended-resource-claim",
                resource_claim("foo-copy", Some("pod-nil-status"), two_gpu()),
                true,
                none,
                vec![count, devices("2"), implicit_req("1"), explicit_req("1")],
            ),
            (
                "nil-status-two-extended-resource-claims",
                resource_claim("foo-copy", Some("pod-nil-status"), two_gpu()),
                true,
                with_other,
                vec![count, devices("2"), implicit_req("2"), explicit_req("2")],
            ),
            (
                "init-extended-resource-claim",
                resource_claim(
                    "foo",
                    Some("pod-init"),
                    json!([
                        exactly("container-2-request-0", "gpu", "ExactCount", Some(1)),
                        exactly("container-2-request-1", "gpu", "ExactCount", Some(1)),
                    ]),
                ),
                true,
                none,
                vec![count, devices("2"), implicit_req("1"), explicit_req("1")],
            ),
            (
                "simple",
                resource_claim("foo", None, json!([gpu1()])),
                false,
                none,
                vec![count, devices("1"), implicit_req("1")],
            ),
            (
                "many-requests",
                resource_claim("foo", None, json!([gpu1(), gpu1(), gpu1(), gpu1(), gpu1()])),
                false,
                none,
                vec![count, devices("5"), implicit_req("5")],
            ),
            (
                "count",
                resource_claim(
                    "foo",
                    None,
                    json!([exactly("req-0", "gpu", "ExactCount", Some(5))]),
                ),
                false,
                none,
                vec![count, devices("5"), implicit_req("5")],
            ),
            (
                "all",
                resource_claim(
                    "foo",
                    None,
                    json!([exactly("req-0", "gpu", "All", Some(1))]),
                ),
                false,
                none,
                vec![count, devices("32"), implicit_req("32")],
            ),
            (
                "unknown-count-mode",
                resource_claim(
                    "foo",
                    None,
                    json!([exactly("req-0", "gpu", "future-mode", Some(1))]),
                ),
                false,
                none,
                vec![count, devices("0")],
            ),
            (
                "admin",
                resource_claim(
                    "foo",
                    None,
                    json!([{"name": "req-0", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1, "adminAccess": true}}]),
                ),
                false,
                none,
                vec![count, devices("1"), implicit_req("1")],
            ),
            (
                "prioritized-list",
                resource_claim(
                    "foo",
                    None,
                    json!([first_available(vec![("gpu", "ExactCount", Some(1))])]),
                ),
                false,
                none,
                vec![count, devices("1"), implicit_req("1")],
            ),
            (
                "prioritized-list-multiple-subrequests",
                resource_claim(
                    "foo",
                    None,
                    json!([first_available(vec![
                        ("gpu", "ExactCount", Some(2)),
                        ("gpu", "ExactCount", Some(1))
                    ])]),
                ),
                false,
                none,
                vec![count, devices("2"), implicit_req("2")],
            ),
            (
                "prioritized-list-multiple-subrequests-allocation-mode-all",
                resource_claim(
                    "foo",
                    None,
                    json!([first_available(vec![
                        ("gpu", "ExactCount", Some(1)),
                        ("gpu", "All", None)
                    ])]),
                ),
                false,
                none,
                vec![count, devices("32"), implicit_req("32")],
            ),
            (
                "prioritized-list-multiple-subrequests-different-device-classes",
                resource_claim(
                    "foo",
                    None,
                    json!([first_available(vec![
                        ("gpu", "ExactCount", Some(1)),
                        ("tpu", "All", None)
                    ])]),
                ),
                false,
                none,
                vec![
                    count,
                    devices("1"),
                    implicit_req("1"),
                    ("tpu.deviceclass.resource.k8s.io/devices", "32"),
                    ("requests.deviceclass.resource.kubernetes.io/tpu", "32"),
                ],
            ),
            // Not upstream: an unknown mode alone in firstAvailable leaves no entry.
            (
                "prioritized-list-unknown-mode-only",
                resource_claim(
                    "foo",
                    None,
                    json!([first_available(vec![("gpu", "future-mode", Some(1))])]),
                ),
                false,
                none,
                vec![count],
            ),
        ];
        let empty = ExtendedResourceCache::new();
        for (name, claim, mapped, others, expected) in cases {
            let lookup = SliceClaimLookup {
                pods: &arcs(&pods),
                claims: &arcs(others),
            };
            let got = if mapped {
                claim_usage(&claim, &classes, &lookup, &now())
            } else {
                claim_usage(&claim, &empty, &NoClaimLookup, &now())
            };
            assert_eq!(strings(&got.list), want(&expected), "{name}");
            assert!(got.problems.is_empty(), "{name}: {:?}", got.problems);
        }
    }

    /// The lookup reads the stores' `Arc`s.
    fn arcs<T: Clone>(objects: &[T]) -> Vec<Arc<T>> {
        objects.iter().cloned().map(Arc::new).collect()
    }

    #[test]
    fn resource_claim_offset_needs_a_verified_owner() {
        let pods = vec![claim_pod(
            "pod-implicit",
            vec![],
            vec![container(
                "",
                json!({"deviceclass.resource.kubernetes.io/gpu": "1"}),
                json!(null),
            )],
            true,
        )];
        let lookup = SliceClaimLookup {
            pods: &arcs(&pods),
            claims: &[],
        };
        let classes = ExtendedResourceCache::new();
        let requests = json!([exactly("r", "gpu", "ExactCount", Some(1))]);
        let verified = resource_claim("foo", Some("pod-implicit"), requests.clone());
        let implicit = "requests.deviceclass.resource.kubernetes.io/gpu";
        assert!(
            !claim_usage(&verified, &classes, &lookup, &now())
                .list
                .contains_key(implicit)
        );
        // The pod names another claim.
        let other_name = resource_claim("bar", Some("pod-implicit"), requests.clone());
        assert!(
            claim_usage(&other_name, &classes, &lookup, &now())
                .list
                .contains_key(implicit)
        );
        // Wrong owner UID.
        let mut wrong_uid = verified.clone();
        if let Some(r) = wrong_uid
            .metadata
            .owner_references
            .as_mut()
            .and_then(|r| r.first_mut())
        {
            r.uid = "other".into();
        }
        assert!(
            claim_usage(&wrong_uid, &classes, &lookup, &now())
                .list
                .contains_key(implicit)
        );
        // No annotation.
        let mut plain = verified.clone();
        plain.metadata.annotations = None;
        assert!(
            claim_usage(&plain, &classes, &lookup, &now())
                .list
                .contains_key(implicit)
        );
        // A terminal pod pays nothing, so the claim is charged in full.
        let mut done = pods.clone();
        if let Some(p) = done.first_mut() {
            p.status.get_or_insert_with(Default::default).phase = Some("Succeeded".into());
        }
        let lookup = SliceClaimLookup {
            pods: &arcs(&done),
            claims: &[],
        };
        assert!(
            claim_usage(&verified, &classes, &lookup, &now())
                .list
                .contains_key(implicit)
        );
        assert_eq!(
            extended_claim_pod_owner(&verified),
            Some(("ns".to_string(), "uid".to_string()))
        );
        assert_eq!(extended_claim_pod_owner(&plain), None);
    }

    #[test]
    fn resource_claim_evaluator_matching_resources() {
        let classes = ExtendedResourceCache::from_classes([&device_class(
            "gpu",
            Some("example.com/gpu"),
            None,
        )]);
        let supported = [
            "count/resourceclaims.resource.k8s.io",
            "gpu.deviceclass.resource.k8s.io/devices",
            "requests.example.com/gpu",
            "requests.deviceclass.resource.kubernetes.io/gpu",
        ];
        assert_eq!(claim_matching(&supported, &classes), supported.to_vec());
        let unsupported = [
            "resourceclaims",
            "storage",
            "ephemeral-storage",
            "bronze.deviceclass.resource.k8s.io/storage",
            "gpu.storage.k8s.io/requests.storage",
        ];
        assert!(claim_matching(&unsupported, &classes).is_empty());
        // Implicit names need an existing class; explicit ones a mapping.
        let plain = ExtendedResourceCache::from_classes([&device_class("tpu", None, None)]);
        assert_eq!(
            claim_matching(
                &[
                    "requests.deviceclass.resource.kubernetes.io/tpu",
                    "requests.deviceclass.resource.kubernetes.io/npu",
                    "requests.example.com/gpu"
                ],
                &plain
            ),
            vec!["requests.deviceclass.resource.kubernetes.io/tpu"]
        );
    }

    #[test]
    fn extended_resource_cache_clashes() {
        let old = device_class(
            "a-old",
            Some("example.com/gpu"),
            Some("2025-01-01T00:00:00Z"),
        );
        let new = device_class(
            "z-new",
            Some("example.com/gpu"),
            Some("2025-06-01T00:00:00Z"),
        );
        // Newer wins in either event order; an older class that loses gets no mapping at all.
        let c1 = ExtendedResourceCache::from_classes([&old, &new]);
        let c2 = ExtendedResourceCache::from_classes([&new, &old]);
        assert_eq!(c1.device_class("example.com/gpu"), Some("z-new"));
        assert_eq!(c2.device_class("example.com/gpu"), Some("z-new"));
        assert_eq!(
            c1.device_class("deviceclass.resource.kubernetes.io/a-old"),
            Some("a-old")
        );
        assert_eq!(
            c2.device_class("deviceclass.resource.kubernetes.io/a-old"),
            None
        );
        assert_eq!(c2.extended_resource("a-old"), Some("example.com/gpu"));
        // Same age: lower name wins.
        let b = device_class("b", Some("x.io/r"), None);
        let a = device_class("a", Some("x.io/r"), None);
        assert_eq!(
            ExtendedResourceCache::from_classes([&b, &a]).device_class("x.io/r"),
            Some("a")
        );
        assert_eq!(
            ExtendedResourceCache::from_classes([&a, &b]).device_class("x.io/r"),
            Some("a")
        );
        // Deleting the loser drops the name the winner holds (upstream quirk).
        let mut c = ExtendedResourceCache::from_classes([&a, &b]);
        c.on_delete(&b);
        assert_eq!(c.device_class("x.io/r"), None);
        assert_eq!(c.extended_resource("b"), None);
        // Update that removes the explicit name.
        let mut c = ExtendedResourceCache::from_classes([&device_class("g", Some("e.io/g"), None)]);
        c.on_update(
            &device_class("g", Some("e.io/g"), None),
            &device_class("g2", None, None),
        );
        assert_eq!(c.device_class("e.io/g"), None);
        assert_eq!(
            c.device_class("deviceclass.resource.kubernetes.io/g2"),
            Some("g2")
        );
    }

    #[test]
    fn sum_usage_starts_at_zero_and_adds_in_order() {
        let pods = vec![
            pod(
                json!({"containers": [container("a", json!({"cpu": "500m", "memory": "512Mi"}), json!(null))]}),
            ),
            pod(
                json!({"containers": [container("a", json!({"cpu": "1", "memory": "1Gi"}), json!(null))]}),
            ),
        ];
        let names: Vec<String> = ["requests.cpu", "requests.memory", "limits.cpu", "pods"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let got = sum_usage(&pods, &names, |p| pod_usage(p, &now()), |_| true);
        let masked = mask_list(&got.list, &names);
        assert_eq!(
            strings(&masked),
            want(&[
                ("requests.cpu", "1500m"),
                ("requests.memory", "1536Mi"),
                ("limits.cpu", "0"),
                ("pods", "2")
            ])
        );
        // Unmasked: names outside `names` are kept, like upstream.
        assert_eq!(
            got.list
                .get("count/pods")
                .map(ToString::to_string)
                .as_deref(),
            Some("2")
        );
        let nothing = sum_usage(&pods, &names, |p| pod_usage(p, &now()), |_| false);
        assert_eq!(
            strings(&nothing.list),
            want(&[
                ("requests.cpu", "0"),
                ("requests.memory", "0"),
                ("limits.cpu", "0"),
                ("pods", "0")
            ])
        );
        let total = add_lists(&got.list, &nothing.list);
        assert_eq!(
            total
                .list
                .get("requests.cpu")
                .map(ToString::to_string)
                .as_deref(),
            Some("1500m")
        );
    }

    #[test]
    fn object_counts() {
        assert_eq!(
            object_count_names("", "configmaps"),
            vec!["count/configmaps", "configmaps"]
        );
        assert_eq!(
            object_count_names("apps", "deployments"),
            vec!["count/deployments.apps"]
        );
        assert_eq!(
            object_count_names("", "secrets"),
            vec!["count/secrets", "secrets"]
        );
        let tracked = object_count_names("", "replicationcontrollers");
        assert_eq!(
            object_count_matching(
                &tracked,
                &[
                    "pods",
                    "replicationcontrollers",
                    "count/replicationcontrollers"
                ]
            ),
            vec!["count/replicationcontrollers", "replicationcontrollers"]
        );
        assert_eq!(
            strings(&object_count_usage(&tracked).list),
            want(&[
                ("count/replicationcontrollers", "1"),
                ("replicationcontrollers", "1")
            ])
        );
        assert_eq!(
            legacy_object_count_alias("", "resourcequotas"),
            Some("resourcequotas")
        );
        assert_eq!(legacy_object_count_alias("apps", "secrets"), None);
    }
}
