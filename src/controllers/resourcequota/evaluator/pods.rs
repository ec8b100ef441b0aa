//! The pod evaluator (upstream `pods.go`): compute resources, hugepages and extended
//! resources of pods that still count, and the pod scopes (Terminating, BestEffort,
//! PriorityClass, CrossNamespacePodAffinity). The resource arithmetic and QoS are in
//! `pod_resources.rs`.

use k8s_openapi::api::core::v1::PodAffinityTerm;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::pod_resources::{ParsedPod, QOS_BEST_EFFORT, pod_qos_class, resize_infeasible};
use super::{Evaluator, EvaluatorInputs, QuotaGates};
use crate::controllers::resourcequota::names::{
    CPU, HUGEPAGES_PREFIX, MEMORY, REQUESTS_PREFIX, is_dra_extended_resource_name,
    is_extended_resource_name_for_quota,
};
use crate::controllers::resourcequota::scope::{QuotaScope, ScopeError, ScopeRequirement};
use crate::controllers::resourcequota::usage::{
    ResourceList, Usage, intersection, one, time_nanos,
};
use crate::k8s::view::{ContainerStatus, Pod, PodStatus, ResourceRequirements};

/// The object-count name of pods.
pub const POD_COUNT: &str = "count/pods";
const PODS: &str = "pods";
const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
const REQUESTS_HUGEPAGES_PREFIX: &str = "requests.hugepages-";

/// The compute resources a pod is charged under three names each: plain, `requests.` and
/// `limits.`. Spelled out rather than formatted: this runs at every pod change a quota counts.
const COMPUTE_NAMES: [(&str, &str, &str); 3] = [
    (CPU, "requests.cpu", "limits.cpu"),
    (MEMORY, "requests.memory", "limits.memory"),
    (
        EPHEMERAL_STORAGE,
        "requests.ephemeral-storage",
        "limits.ephemeral-storage",
    ),
];

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

/// upstream `podEvaluator`.
#[derive(Default)]
pub struct Pods {
    gates: QuotaGates,
}

impl Evaluator for Pods {
    type Object = Pod;
    type Context = ();
    const RESOURCE: &'static str = PODS;

    fn with_gates(gates: QuotaGates) -> Self {
        Self { gates }
    }

    fn matching(&self, names: &[String], _: &EvaluatorInputs) -> Vec<String> {
        pod_matching(names)
    }

    fn covers(&self, name: &str, _: &EvaluatorInputs) -> bool {
        pod_covers(name)
    }

    fn matches(&self, pod: &Pod, scope: &QuotaScope) -> bool {
        pod_matches_scope(pod, scope, self.gates)
    }

    fn usage(&self, pod: &Pod, at: &EvaluatorInputs) -> Usage {
        pod_usage(pod, &at.now, self.gates)
    }

    fn left_out(&self, pod: &Pod, at: &EvaluatorInputs) -> Option<String> {
        pod_quota_exclusion(pod, &at.now).map(|why| why.to_string())
    }

    /// Only a pod with a deletionTimestamp can stop counting as time passes.
    fn volatile(&self, pod: &Pod) -> bool {
        pod.metadata.deletion_timestamp.is_some()
    }

    /// A readiness flip (most pod updates) changes only conditions.
    fn same_charge(&self, old: &Pod, new: &Pod) -> bool {
        !self.volatile(old)
            && !self.volatile(new)
            && old.spec == new.spec
            && match (&old.status, &new.status) {
                (Some(a), Some(b)) => same_charged_status(a, b),
                (a, b) => a.is_none() && b.is_none(),
            }
    }

    /// upstream's DefaultUpdateFilter for pods: usage may have changed.
    fn update_matters(&self, old: &Pod, new: &Pod, at: &EvaluatorInputs) -> bool {
        let same_resources = match (status_resources(old), status_resources(new)) {
            (Some(a), Some(b)) => a.eq(b),
            (a, b) => a.is_none() && b.is_none(),
        };
        pod_counts_for_quota(old, &at.now) != pod_counts_for_quota(new, &at.now)
            || pod_is_terminating(old) != pod_is_terminating(new)
            || !same_resources
    }
}

/// Each container status's name and resources, compared without copying them.
fn status_resources(
    pod: &Pod,
) -> Option<impl Iterator<Item = (&str, &Option<ResourceRequirements>)>> {
    pod.status.as_ref().map(|s| {
        s.container_statuses
            .as_deref()
            .into_iter()
            .chain(s.init_container_statuses.as_deref())
            .flatten()
            .map(|c| (c.name.as_str(), &c.resources))
    })
}

/// Whether two statuses agree on all a pod's charge can depend on. Spelled out field by
/// field, so a field added to the view must be placed on one side or the other. Of the
/// conditions only an infeasible resize counts; of the phase only whether it is terminal
/// (Pending → Running charges the same); of the container statuses only those carrying
/// resources (one without is read as if absent).
fn same_charged_status(a: &PodStatus, b: &PodStatus) -> bool {
    let PodStatus {
        conditions: _,
        container_statuses: _,
        extended_resource_claim_status,
        init_container_statuses: _,
        phase: _,
        qos_class,
        resource_claim_statuses,
    } = a;
    let same_statuses = match (charged_statuses(a), charged_statuses(b)) {
        (Some(a), Some(b)) => a == b,
        _ => {
            a.container_statuses == b.container_statuses
                && a.init_container_statuses == b.init_container_statuses
        }
    };
    same_statuses
        && resize_infeasible(a) == resize_infeasible(b)
        && *extended_resource_claim_status == b.extended_resource_claim_status
        && a.is_terminal() == b.is_terminal()
        && *qos_class == b.qos_class
        && *resource_claim_statuses == b.resource_claim_statuses
}

/// The container statuses, then the init container statuses, that carry resources: the only
/// ones the charge reads, as long as no name recurs (the first status of a name is read, so
/// one without resources could hide a later one). `None` when a name recurs.
fn charged_statuses(status: &PodStatus) -> Option<Vec<&ContainerStatus>> {
    let all: Vec<&ContainerStatus> = [&status.container_statuses, &status.init_container_statuses]
        .into_iter()
        .flat_map(|list| list.as_deref().unwrap_or_default())
        .collect();
    let unique = all
        .iter()
        .enumerate()
        .all(|(i, c)| all[..i].iter().all(|earlier| earlier.name != c.name));
    unique.then(|| {
        all.into_iter()
            .filter(|c| c.resources.is_some() || c.allocated_resources.is_some())
            .collect()
    })
}

/// Pod `MatchingResources`: the fixed names (sorted), then hugepages-prefixed names and
/// extended resources for quota in input order.
pub fn pod_matching<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    let mut result = intersection(names, &POD_RESOURCES);
    for name in names.iter().map(AsRef::as_ref) {
        if is_hugepages(name) {
            result.push(name.to_string());
        }
        if is_extended_resource_name_for_quota(name) {
            result.push(name.to_string());
        }
    }
    result
}

/// Whether [`pod_matching`] keeps `name`.
fn pod_covers(name: &str) -> bool {
    POD_RESOURCES.contains(&name) || is_hugepages(name) || is_extended_resource_name_for_quota(name)
}

fn is_hugepages(name: &str) -> bool {
    name.starts_with(HUGEPAGES_PREFIX) || name.starts_with(REQUESTS_HUGEPAGES_PREFIX)
}

/// `QuotaV1Pod`: false for terminal pods and pods past `deletionTimestamp +
/// deletionGracePeriodSeconds`; such pods only count in `count/pods`.
pub fn pod_counts_for_quota(pod: &Pod, now: &Time) -> bool {
    pod_quota_exclusion(pod, now).is_none()
}

/// Why a pod counts only in `count/pods`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodExclusion {
    #[error("terminal (phase {0})")]
    Terminal(String),
    #[error("deleted, past its grace period")]
    PastGracePeriod,
}

/// [`pod_counts_for_quota`]'s reason when it is false.
pub fn pod_quota_exclusion(pod: &Pod, now: &Time) -> Option<PodExclusion> {
    if let Some(status) = pod.status.as_ref().filter(|s| s.is_terminal()) {
        let phase = status.phase.as_deref().unwrap_or_default();
        return Some(PodExclusion::Terminal(phase.to_string()));
    }
    let meta = &pod.metadata;
    if let (Some(deleted), Some(grace)) = (
        time_nanos(meta.deletion_timestamp.as_ref()),
        meta.deletion_grace_period_seconds,
    ) {
        // Go computes time.Duration(grace) * time.Second in int64, wrapping on overflow.
        let grace_nanos = i128::from(grace.wrapping_mul(1_000_000_000));
        if now.0.as_nanosecond() > deleted.saturating_add(grace_nanos) {
            return Some(PodExclusion::PastGracePeriod);
        }
    }
    None
}

/// pods.go `IsTerminating`: `activeDeadlineSeconds >= 0`.
pub fn pod_is_terminating(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.active_deadline_seconds)
        .is_some_and(|d| d >= 0)
}

/// `PodUsageFunc`: `count/pods` always; the compute usage only while the pod counts.
pub fn pod_usage(pod: &Pod, now: &Time, gates: QuotaGates) -> Usage {
    let mut list = ResourceList::from([(POD_COUNT.to_string(), one())]);
    let mut problems = Vec::new();
    if !pod_counts_for_quota(pod, now) {
        return Usage { list, problems };
    }
    let parsed = ParsedPod::new(pod, gates, &mut problems);
    let requests = parsed.requests(&mut problems);
    let limits = parsed.limits(&mut problems);
    // No overlap with count/pods, so quota.Add is a plain union: added into the same list.
    add_pod_compute_usage(&mut list, &requests, &limits);
    Usage { list, problems }
}

/// `podComputeUsageHelper`, into `result`.
fn add_pod_compute_usage(
    result: &mut ResourceList,
    requests: &ResourceList,
    limits: &ResourceList,
) {
    result.insert(PODS.to_string(), one());
    for (name, requests_name, limits_name) in COMPUTE_NAMES {
        if let Some(request) = requests.get(name) {
            result.insert(name.to_string(), request.clone());
            result.insert(requests_name.to_string(), request.clone());
        }
        if let Some(limit) = limits.get(name) {
            result.insert(limits_name.to_string(), limit.clone());
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
fn pod_matches_requirement(
    pod: &Pod,
    req: &ScopeRequirement,
    gates: QuotaGates,
) -> Result<bool, ScopeError> {
    let best_effort = || pod_qos_class(pod, gates) == QOS_BEST_EFFORT;
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

/// Whether the pod matches every scope requirement ([`QuotaScope::all_match`]).
pub fn pod_matches_scope(pod: &Pod, scope: &QuotaScope, gates: QuotaGates) -> bool {
    scope.all_match(|req| pod_matches_requirement(pod, req, gates))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ScopedResourceSelectorRequirement;
    use serde_json::{Value, json};

    use super::*;
    use crate::controllers::resourcequota::scope::parse_scope;
    use crate::controllers::resourcequota::testing::{
        Pairs, container, from, now, pod, scope_of, selector, strings, want,
    };
    use crate::controllers::resourcequota::usage::sum_usage;

    fn status(name: &str, resources: Value, allocated: Value) -> Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": true, "restartCount": 0,
               "resources": resources, "allocatedResources": allocated})
    }

    #[test]
    fn compute_names_are_the_prefixed_names() {
        for (name, requests_name, limits_name) in COMPUTE_NAMES {
            assert_eq!(requests_name, format!("{REQUESTS_PREFIX}{name}"));
            assert_eq!(limits_name, format!("limits.{name}"));
            assert!(POD_RESOURCES.contains(&requests_name) && POD_RESOURCES.contains(&limits_name));
        }
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
            let usage = pod_usage(&pod, &now(), QuotaGates::default());
            assert_eq!(strings(&usage.list), want(&expected), "{name}");
            assert!(usage.problems.is_empty(), "{name}: {:?}", usage.problems);
        }
    }

    /// A pod whose statuses report no resources is charged its spec's sums alone; the same pod
    /// with statuses reporting exactly its spec's resources takes the whole computation (the
    /// larger of spec, actuated and allocated) and must be charged the same, formats included.
    #[test]
    fn statuses_reporting_the_spec_charge_as_the_spec() {
        let regular = [
            (
                "web",
                json!({"cpu": "250m", "memory": "256Mi"}),
                json!({"memory": "512Mi"}),
            ),
            (
                "log",
                json!({"cpu": "100m", "memory": "64Mi"}),
                json!({"cpu": "1", "memory": "128Mi"}),
            ),
        ];
        // An init container, then a sidecar (restartable).
        let init = [
            (
                "setup",
                json!({"cpu": "2", "memory": "512Mi"}),
                json!({"cpu": "2"}),
            ),
            (
                "proxy",
                json!({"cpu": "50m"}),
                json!({"cpu": "100m", "memory": "32Mi"}),
            ),
        ];
        let containers = |list: &[(&str, Value, Value)]| -> Vec<Value> {
            list.iter()
                .map(|(name, requests, limits)| container(name, requests.clone(), limits.clone()))
                .collect()
        };
        let mut init_containers = containers(&init);
        init_containers[1]["restartPolicy"] = json!("Always");
        let spec = json!({
            "containers": containers(&regular),
            "initContainers": init_containers,
            "overhead": {"cpu": "10m", "memory": "16Mi"},
        });
        let mirrored = |list: &[(&str, Value, Value)]| -> Vec<Value> {
            list.iter()
                .map(|(name, requests, limits)| {
                    status(
                        name,
                        json!({"requests": requests, "limits": limits}),
                        requests.clone(),
                    )
                })
                .collect()
        };
        let unreported = |list: &[(&str, Value, Value)]| -> Vec<Value> {
            list.iter()
                .map(|(name, _, _)| status(name, json!(null), json!(null)))
                .collect()
        };
        let with = |statuses: Vec<Value>, init_statuses: Vec<Value>| -> Pod {
            from(json!({
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": spec,
                "status": {"phase": "Running", "containerStatuses": statuses,
                    "initContainerStatuses": init_statuses},
            }))
        };
        let by_spec = pod_usage(
            &with(unreported(&regular), unreported(&init)),
            &now(),
            QuotaGates::default(),
        );
        let by_status = pod_usage(
            &with(mirrored(&regular), mirrored(&init)),
            &now(),
            QuotaGates::default(),
        );
        assert!(by_spec.problems.is_empty(), "{:?}", by_spec.problems);
        assert_eq!(strings(&by_spec.list), strings(&by_status.list));
        // The init container's 2 CPU and 512Mi outweigh the rest; the overhead is added, and
        // raises the limits that are set.
        let charged = strings(&by_spec.list);
        assert_eq!(
            [
                &charged["requests.cpu"],
                &charged["requests.memory"],
                &charged["limits.cpu"],
                &charged["limits.memory"]
            ],
            ["2010m", "528Mi", "2010m", "688Mi"]
        );
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
                strings(&pod_usage(&pod, &now(), QuotaGates::default()).list),
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
        let usage = pod_usage(&p, &now(), QuotaGates::default());
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
            usage.problems[0].starts_with(
                r#"pod ns/p: spec.containers[0].resources.requests[cpu]: invalid quantity "abc": "#
            ),
            "{:?}",
            usage.problems
        );
    }

    /// Each kind of place a problem can be in, spelled out: init containers, statuses,
    /// pod-level resources and overhead.
    #[test]
    fn pod_usage_names_where_each_problem_is() {
        let p = from(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "containers": [container("a", json!({}), json!(null))],
                "initContainers": [container("i", json!(null), json!({"memory": "-1"}))],
                "resources": {"requests": {"cpu": "x"}},
                "overhead": {"cpu": "y"},
            },
            "status": {"containerStatuses": [{
                "name": "a",
                "allocatedResources": {"cpu": "z"},
            }]},
        }));
        let gates = QuotaGates {
            pod_level_resources: true,
            ..QuotaGates::default()
        };
        let mut places: Vec<String> = pod_usage(&p, &now(), gates)
            .problems
            .iter()
            .map(|p| p.split(": ").take(2).collect::<Vec<_>>().join(": "))
            .collect();
        places.sort();
        places.dedup();
        assert_eq!(
            places,
            [
                "pod ns/p: spec.initContainers[0].resources.limits[memory]",
                "pod ns/p: spec.overhead[cpu]",
                "pod ns/p: spec.resources.requests[cpu]",
                "pod ns/p: status.containerStatuses[0].allocatedResources[cpu]",
            ]
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

    /// What may change without a new charge: conditions only. Anything else the charge
    /// reads, or a deletion in progress, means evaluating again.
    #[test]
    fn same_charge_only_when_conditions_alone_changed() {
        let pods = Pods::default();
        let version = |ready: &str, phase: &str, cpu: &str, status_cpu: &str| -> Pod {
            from(json!({
                "metadata": {"name": "p", "resourceVersion": "1"},
                "spec": {"containers": [container("c", json!({"cpu": cpu}), json!({}))]},
                "status": {"phase": phase,
                    "conditions": [{"type": "Ready", "status": ready}],
                    "containerStatuses": [status("c", json!({"requests": {"cpu": status_cpu}}), json!({}))]},
            }))
        };
        let base = version("True", "Running", "1", "1");
        assert!(pods.same_charge(&base, &version("False", "Running", "1", "1")));
        assert!(pods.same_charge(&base, &base.clone()));
        assert!(!pods.same_charge(&base, &version("True", "Succeeded", "1", "1")));
        assert!(!pods.same_charge(&base, &version("True", "Running", "2", "1")));
        assert!(!pods.same_charge(&base, &version("True", "Running", "1", "2")));
        let mut deleting = base.clone();
        deleting.metadata.deletion_timestamp = Some(now());
        assert!(!pods.same_charge(&base, &deleting));
        assert!(!pods.same_charge(&deleting, &deleting.clone()));
        let mut no_status = base.clone();
        no_status.status = None;
        assert!(!pods.same_charge(&base, &no_status));
    }

    #[test]
    fn same_charge_when_a_started_pod_gets_statuses_without_resources() {
        let pods = Pods::default();
        let version = |status: Value| -> Pod {
            from(json!({
                "metadata": {"name": "p", "resourceVersion": "1"},
                "spec": {"containers": [container("c", json!({"cpu": "1"}), json!({}))]},
                "status": status,
            }))
        };
        let created = version(json!({"phase": "Pending", "qosClass": "Burstable"}));
        let started = version(json!({"phase": "Running", "qosClass": "Burstable",
            "containerStatuses": [{"name": "c"}]}));
        assert!(pods.same_charge(&created, &started));
        let usage = |pod: &Pod| pod_usage(pod, &now(), QuotaGates::default()).list;
        assert_eq!(usage(&created), usage(&started));
        let resized = version(json!({"phase": "Running", "qosClass": "Burstable",
            "containerStatuses": [status("c", json!({"requests": {"cpu": "2"}}), json!({}))]}));
        assert!(!pods.same_charge(&started, &resized));
        // The first status of a name is the one read: an empty one can hide a later one, so
        // these two differ though the statuses carrying resources are the same.
        let resized_init = |hiding: Value| {
            version(json!({"phase": "Running", "qosClass": "Burstable",
                "containerStatuses": hiding,
                "initContainerStatuses": [status("c", json!({"requests": {"cpu": "2"}}), json!({}))]}))
        };
        assert!(!pods.same_charge(
            &resized_init(json!([])),
            &resized_init(json!([{"name": "c"}]))
        ));
        let infeasible = version(json!({"phase": "Running", "qosClass": "Burstable",
            "containerStatuses": [{"name": "c"}],
            "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]}));
        assert!(!pods.same_charge(&started, &infeasible));
        let failed = version(json!({"phase": "Failed", "qosClass": "Burstable",
            "containerStatuses": [{"name": "c"}]}));
        assert!(!pods.same_charge(&started, &failed));
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
                |p| pod_usage(p, &now(), QuotaGates::default()),
                |p| pod_matches_scope(p, &scope, QuotaGates::default()),
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
                .filter(|s| {
                    pod_matches_scope(&p, &scope_of(&[], vec![s.clone()]), QuotaGates::default())
                })
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
                pod_matches_scope(&with_class, &scope, QuotaGates::default()),
                pod_matches_scope(&without, &scope, QuotaGates::default()),
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
        assert!(pod_matches_scope(
            &with_class,
            &scopes,
            QuotaGates::default()
        ));
        assert!(!pod_matches_scope(&without, &scopes, QuotaGates::default()));
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
            |p| pod_usage(p, &now(), QuotaGates::default()),
            |p| pod_matches_scope(p, &scope, QuotaGates::default()),
        );
        assert_eq!(strings(&got.list), want(&[("pods", "0")]));
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
        // The replenishment filter keeps exactly the names matching keeps.
        for name in input {
            assert_eq!(
                pod_covers(name),
                !pod_matching(&[name]).is_empty(),
                "{name}"
            );
        }
        assert!(pod_covers("requests.cpu") && pod_covers("hugepages-1Gi"));
        assert!(!pod_covers("services") && !pod_covers("example.com/dongle"));
    }

    /// PodLevelResources: `spec.resources` sets the pod's requests, limits and QoS class
    /// when on; when off it is not read at all, as upstream's `SkipPodLevelResources` and
    /// `ComputePodQOS`.
    #[test]
    fn pod_level_resources_gate() {
        let on = QuotaGates::default();
        assert!(on.pod_level_resources, "on by default in v1.36");
        let off = QuotaGates {
            pod_level_resources: false,
            ..on
        };
        let p = pod(json!({
            "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
            "containers": [container("", json!({"cpu": "500m"}), json!(null))],
        }));
        let usage = |gates| strings(&pod_usage(&p, &now(), gates).list);
        assert_eq!(
            usage(on),
            want(&[
                ("count/pods", "1"),
                ("pods", "1"),
                ("cpu", "2"),
                ("requests.cpu", "2"),
                ("limits.cpu", "2"),
                ("memory", "1Gi"),
                ("requests.memory", "1Gi"),
                ("limits.memory", "1Gi"),
            ])
        );
        assert_eq!(
            usage(off),
            want(&[
                ("count/pods", "1"),
                ("pods", "1"),
                ("cpu", "500m"),
                ("requests.cpu", "500m"),
            ])
        );
        // QoS: Guaranteed by its pod-level resources; without them, by its containers.
        let bare = pod(json!({
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            "containers": [container("", json!(null), json!(null))],
        }));
        let best_effort = scope_of(&["BestEffort"], vec![]);
        for (gates, expected) in [(on, false), (off, true)] {
            let evaluator = Pods::with_gates(gates);
            assert_eq!(
                evaluator.matches(&bare, &best_effort),
                expected,
                "{gates:?}"
            );
        }
    }
}
