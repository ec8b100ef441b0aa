//! The ResourceClaim evaluator (upstream `resource_claims.go`, DRAExtendedResource on):
//! claims and devices per device class, mirrored as the extended resources the classes map
//! (`extended_resource_cache.rs`), less what the pod a claim was made for already pays.
//! Claims match no scope.

use std::sync::Arc;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::extended_resource_cache::ExtendedResourceCache;
use super::pods::pod_usage;
use super::{Evaluator, EvaluatorInputs, QuotaGates};
use crate::controllers::resourcequota::names::{
    REQUESTS_DEVICE_CLASS_PREFIX, REQUESTS_PREFIX, is_extended_resource_name_for_quota,
};
use crate::controllers::resourcequota::scope::{QuotaScope, unscoped_matches};
use crate::controllers::resourcequota::usage::{
    OUT_OF_RANGE, ResourceList, Usage, add_into, add_quantity, one, time_nanos,
};
use crate::k8s::quantity::{Format, Quantity};
use crate::k8s::view::Pod;
use crate::runtime::watching::informer::Informers;
use crate::runtime::watching::stored::controller_of;

/// The object-count name of ResourceClaims.
pub const CLAIM_COUNT: &str = "count/resourceclaims.resource.k8s.io";
/// Annotation the scheduler puts on claims it creates for extended resources.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";
const CLAIMS_PER_CLASS: &str = ".deviceclass.resource.k8s.io/devices";
/// `resourceapi.AllocationResultsMaxSize`: the worst case charged for allocation mode All.
const ALLOCATION_RESULTS_MAX_SIZE: i64 = 32;

/// upstream `claimEvaluator`.
pub struct ResourceClaims {
    /// Without DRAExtendedResource upstream starts no DeviceClass informer and no pod
    /// lister, and a claim charges its count and devices per class only.
    gates: QuotaGates,
}

impl Default for ResourceClaims {
    fn default() -> Self {
        Self::with_gates(QuotaGates::default())
    }
}

impl ResourceClaims {
    /// The device classes' extended resources: none without DRAExtendedResource (the
    /// DeviceClass store is not even read then).
    fn classes<'s>(&self, at: &'s EvaluatorInputs) -> Option<&'s ExtendedResourceCache> {
        self.gates.dra_extended_resource.then(|| at.classes())
    }
}

impl Evaluator for ResourceClaims {
    type Object = ResourceClaim;
    type Context = ExtendedResourceCache;
    const RESOURCE: &'static str = "resourceclaims.resource.k8s.io";
    const API_VERSION: &'static str = "resource.k8s.io/v1";

    fn with_gates(gates: QuotaGates) -> Self {
        Self { gates }
    }

    /// The device classes, read at every computation ([`EvaluatorInputs::classes`]).
    fn start_reads(&self, informers: &Informers) {
        if self.gates.dra_extended_resource {
            informers.get::<DeviceClass>();
        }
    }

    fn context(&self, at: &EvaluatorInputs) -> ExtendedResourceCache {
        self.classes(at).cloned().unwrap_or_default()
    }

    /// With no classes, only the claim count and the devices per class match.
    fn matching(&self, names: &[String], at: &EvaluatorInputs) -> Vec<String> {
        claim_matching(
            names,
            self.classes(at).unwrap_or(&ExtendedResourceCache::new()),
        )
    }

    fn matches(&self, _: &ResourceClaim, scope: &QuotaScope) -> bool {
        unscoped_matches(scope)
    }

    fn usage(&self, claim: &ResourceClaim, at: &EvaluatorInputs) -> Usage {
        let Some(classes) = self.classes(at) else {
            return claim_usage(
                claim,
                &ExtendedResourceCache::new(),
                self.gates,
                &NoClaimLookup,
                &at.now,
            );
        };
        // Only a claim made for a pod's extended resources looks up the namespace's pods and
        // claims (the stores' own Arcs, no copies).
        let (pods, claims) = match extended_claim_pod_owner(claim) {
            Some((ns, _)) => (at.in_namespace(&ns), at.in_namespace(&ns)),
            None => Default::default(),
        };
        let lookup = SliceClaimLookup {
            pods: &pods,
            claims: &claims,
        };
        claim_usage(claim, classes, self.gates, &lookup, &at.now)
    }

    /// A pod's extended-resource claim is offset by the pod's usage (which can change with
    /// the pod and the clock); any other claim's usage depends on itself and the classes.
    fn volatile(&self, claim: &ResourceClaim) -> bool {
        self.gates.dra_extended_resource && extended_claim_pod_owner(claim).is_some()
    }

    /// Upstream's update filter has no case for claims: only creations and deletions.
    fn update_matters(&self, _: &ResourceClaim, _: &ResourceClaim, _: &EvaluatorInputs) -> bool {
        false
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

/// ResourceClaim `Usage`: the claim count and devices per class, and with
/// DRAExtendedResource their extended-resource mirrors.
pub fn claim_usage(
    claim: &ResourceClaim,
    classes: &ExtendedResourceCache,
    gates: QuotaGates,
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
    if gates.dra_extended_resource {
        let pod_usage = verified_pod_usage(claim, lookup, now, gates);
        let pod_list = pod_usage.as_ref().map(|u| &u.list);
        if let Some(u) = &pod_usage {
            problems.extend(u.problems.iter().cloned());
        }
        add_extended_resource_quota(&mut list, classes, pod_list, &mut problems);
    }
    Usage { list, problems }
}

/// `getVerifiedPodUsage`: the usage of the pod an extended-resource claim was created
/// for, when that pod is known to be charged for the same devices already.
fn verified_pod_usage(
    claim: &ResourceClaim,
    lookup: &dyn ClaimLookup,
    now: &Time,
    gates: QuotaGates,
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
    Some(pod_usage(pod, now, gates))
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
    use serde_json::{Value, json};

    use super::*;
    use crate::controllers::resourcequota::testing::{Pairs, container, from, now, strings, want};

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
                claim_usage(&claim, &classes, QuotaGates::default(), &lookup, &now())
            } else {
                claim_usage(
                    &claim,
                    &empty,
                    QuotaGates::default(),
                    &NoClaimLookup,
                    &now(),
                )
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
            !claim_usage(&verified, &classes, QuotaGates::default(), &lookup, &now())
                .list
                .contains_key(implicit)
        );
        // The pod names another claim.
        let other_name = resource_claim("bar", Some("pod-implicit"), requests.clone());
        assert!(
            claim_usage(
                &other_name,
                &classes,
                QuotaGates::default(),
                &lookup,
                &now()
            )
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
            claim_usage(&wrong_uid, &classes, QuotaGates::default(), &lookup, &now())
                .list
                .contains_key(implicit)
        );
        // No annotation.
        let mut plain = verified.clone();
        plain.metadata.annotations = None;
        assert!(
            claim_usage(&plain, &classes, QuotaGates::default(), &lookup, &now())
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
            claim_usage(&verified, &classes, QuotaGates::default(), &lookup, &now())
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

    /// DRAExtendedResource: on, claims also match and charge the implicit and mapped
    /// extended-resource names; off, only their count and devices per class, and the
    /// DeviceClass store is not read.
    #[test]
    fn dra_extended_resource_gate() {
        let on = QuotaGates::default();
        assert!(on.dra_extended_resource, "on by default in v1.36");
        let off = QuotaGates {
            dra_extended_resource: false,
            ..on
        };
        let classes = ExtendedResourceCache::from_classes([&device_class(
            "gpu",
            Some("example.com/gpu"),
            None,
        )]);
        let names: Vec<String> = [
            "count/resourceclaims.resource.k8s.io",
            "gpu.deviceclass.resource.k8s.io/devices",
            "requests.example.com/gpu",
            "requests.deviceclass.resource.kubernetes.io/gpu",
        ]
        .map(String::from)
        .to_vec();
        let claim = resource_claim(
            "c",
            None,
            json!([exactly("req-0", "gpu", "ExactCount", Some(2))]),
        );
        let at = EvaluatorInputs::with_classes(now(), classes);
        let with = ResourceClaims::with_gates(on);
        assert_eq!(with.matching(&names, &at), names);
        assert_eq!(
            strings(&with.usage(&claim, &at).list),
            want(&[
                ("count/resourceclaims.resource.k8s.io", "1"),
                ("gpu.deviceclass.resource.k8s.io/devices", "2"),
                ("requests.deviceclass.resource.kubernetes.io/gpu", "2"),
                ("requests.example.com/gpu", "2"),
            ])
        );
        let without = ResourceClaims::with_gates(off);
        assert_eq!(without.matching(&names, &at), names[..2].to_vec());
        assert_eq!(
            strings(&without.usage(&claim, &at).list),
            want(&[
                ("count/resourceclaims.resource.k8s.io", "1"),
                ("gpu.deviceclass.resource.k8s.io/devices", "2"),
            ])
        );
        assert_eq!(without.context(&at), ExtendedResourceCache::new());
    }
}
