//! The resourceclaim controller's syncs as plans: from what the stores hold (`Stores`), what
//! a pod sync (`syncPod`/`handleClaim`) or a claim sync (`syncClaim`) is to write, built from
//! the decisions of `claims.rs`. No I/O: `sync.rs` performs the plans, in upstream's order.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PodResourceClaim;
use k8s_openapi::api::resource::v1::{
    ResourceClaim, ResourceClaimConsumerReference, ResourceClaimTemplate,
};
use kube::ResourceExt;

use super::claims::{
    Features, RESERVED_FOR_MAX, Release, ResolveError, Resolved, claim_from_template,
    claims_to_release, delete_unused, find_orphan, foreign_claims, is_for_pod, is_pod_consumer,
    keep_pod_reservation, needs_reservation, owning_pod, pod_claims, pod_is_done,
    pod_may_get_claims, pod_needs_claims, pod_needs_work, release, reserved_for, reserved_for_pod,
    resolve, uses_claims,
};
use super::error::ClaimError;
use crate::runtime::selector::is_dns1123_subdomain;
use crate::runtime::stored::{Stored, key_of, split_key};
use crate::runtime::view::Pod;

/// What a plan reads: the stores, as this controller knows them.
pub trait Stores {
    /// The claim as this controller last knows it: the store, or its own newer write.
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>>;
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
    fn template(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaimTemplate>>;
    /// The claims the pod controls, including ones created a moment ago.
    fn owned_claims(&self, pod: &Pod) -> Vec<Arc<ResourceClaim>>;
    /// Whether the deletion of the pod with this UID was seen.
    fn deleted_pod(&self, uid: &str) -> bool;
    /// The keys of the pods whose claim entries resolve to `namespace/claim`.
    fn pods_using(&self, namespace: &str, claim: &str) -> Vec<String>;
}

/// Bad input met while planning: reported once per object version, and metered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `namespace/name` of the object at fault.
    pub object: String,
    pub version: String,
    /// The metric label.
    pub reason: &'static str,
    pub message: String,
    /// The reason of a warning event on the pod, recorded the first time it is reported.
    pub event: Option<&'static str>,
}

impl Problem {
    fn new<K: Stored>(object: &K, reason: &'static str, message: String) -> Self {
        Self::at(key_of(object), object, reason, message)
    }

    fn at<K: Stored>(key: String, object: &K, reason: &'static str, message: String) -> Self {
        Self {
            object: key,
            version: object.version().unwrap_or_default().to_string(),
            reason,
            message,
            event: None,
        }
    }
}

/// What a pod change enqueues (`enqueuePod`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PodChange {
    /// The keys of the claims a pod that no longer needs them releases.
    pub claims: Vec<String>,
    /// Whether the pod itself needs a sync.
    pub pod: bool,
    pub problems: Vec<Problem>,
}

/// `enqueuePod`: the claims of a pod that no longer needs them, and the pod itself when it
/// needs work; a pod that cannot get its claims because others hold their names is reported.
pub fn plan_pod_change(pod: &Pod, deleted: bool, stores: &impl Stores) -> PodChange {
    let mut plan = PodChange::default();
    if !uses_claims(pod) {
        return plan;
    }
    let namespace = pod.namespace().unwrap_or_default();
    if !pod_needs_claims(pod, deleted) {
        let names = claims_to_release(pod).into_iter();
        plan.claims = names.map(|name| format!("{namespace}/{name}")).collect();
    }
    let claim = |name: &str| stores.claim(&namespace, name);
    if pod_needs_work(pod, claim) {
        plan.pod = true;
    } else if pod_may_get_claims(pod) {
        for problem in foreign_claims(pod, claim) {
            let message =
                format!("{problem}; it must be deleted before a claim is created for the pod");
            plan.problems
                .push(Problem::new(pod, "claim-not-owned", message));
        }
    }
    plan
}

/// What one claim entry of a pod needs.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimStep {
    /// Create this claim from the entry's template, then record the name it is given.
    Create(Box<ResourceClaim>),
    /// Record this claim, created for the entry earlier but never recorded.
    Record(String),
}

/// `syncPod`'s first part: the claims to create or record.
#[derive(Debug, Default)]
pub struct PodPlan {
    pub problems: Vec<Problem>,
    /// The entries that need something, in spec order: the entry's name and its step, or
    /// why it fails.
    pub entries: Vec<(String, Result<ClaimStep, ClaimError>)>,
}

/// The claims to create or record for the pod; `None` when the pod gets none at all.
pub fn plan_pod(pod: &Pod, stores: &impl Stores, features: Features) -> Option<PodPlan> {
    if !pod_may_get_claims(pod) {
        return None;
    }
    let mut plan = PodPlan::default();
    for pod_claim in pod_claims(pod) {
        if let Some(step) =
            plan_entry(pod, pod_claim, stores, features, &mut plan.problems).transpose()
        {
            plan.entries.push((pod_claim.name.clone(), step));
        }
    }
    Some(plan)
}

/// `handleClaim`: what `pod_claim` needs; `None` when its claim is there (or not ours).
fn plan_entry(
    pod: &Pod,
    pod_claim: &PodResourceClaim,
    stores: &impl Stores,
    features: Features,
    problems: &mut Vec<Problem>,
) -> Result<Option<ClaimStep>, ClaimError> {
    let namespace = pod.namespace().unwrap_or_default();
    if pod_claim.resource_claim_name.is_some() && pod_claim.resource_claim_template_name.is_some() {
        problems.push(Problem::new(
            pod,
            "pod-claim-both-sources",
            format!(
                "spec.resourceClaims {:?} sets both resourceClaimName and resourceClaimTemplateName; using resourceClaimName",
                pod_claim.name
            ),
        ));
    }
    match resolve(pod, pod_claim) {
        Err(ResolveError::NotCreatedYet { .. }) => {}
        Err(err) => return Err(err.into()),
        Ok(Resolved::NotNeeded) => return Ok(None),
        Ok(Resolved::Claim { name, check_owner }) => {
            if let Some(claim) = stores.claim(&namespace, name) {
                match is_for_pod(pod, &claim) {
                    Err(err) if check_owner => tracing::warn!(
                        pod = key_of(pod),
                        error = %err,
                        "claim recorded for the pod is not owned by it; creating a new one"
                    ),
                    _ => return Ok(None),
                }
            }
        }
    }
    let Some(template_name) = pod_claim.resource_claim_template_name.as_deref() else {
        return Ok(None);
    };
    if let Some(orphan) = find_orphan(&pod_claim.name, &stores.owned_claims(pod)) {
        return Ok(Some(ClaimStep::Record(orphan.name_any())));
    }
    let template = stores
        .template(&namespace, template_name)
        .ok_or_else(|| ClaimError::TemplateNotFound(template_name.to_string()))?;
    let claim = claim_from_template(pod, pod_claim, &template, features)?;
    Ok(Some(ClaimStep::Create(Box::new(claim))))
}

/// A reservation of a claim for a pod on a node.
#[derive(Debug, Clone, PartialEq)]
pub enum Reservation {
    /// UpdateStatus of `live` to `desired`, which has the pod added to `reservedFor`.
    Reserve {
        live: Arc<ResourceClaim>,
        desired: Box<ResourceClaim>,
    },
    /// `reservedFor` is at its limit: skipped and reported.
    Full(Problem),
}

/// `syncPod`'s second part, for a pod bound to a node without the scheduler.
#[derive(Debug)]
pub struct Reservations {
    pub steps: Vec<Reservation>,
    /// What the sync ends with once the steps are done.
    pub outcome: Result<(), ClaimError>,
}

/// The reservations the pod (as the status apply left it) needs on its allocated claims.
pub fn plan_reservations(pod: &Pod, stores: &impl Stores) -> Reservations {
    let mut steps = Vec::new();
    let outcome = reservations(pod, stores, &mut steps);
    Reservations { steps, outcome }
}

fn reservations(
    pod: &Pod,
    stores: &impl Stores,
    steps: &mut Vec<Reservation>,
) -> Result<(), ClaimError> {
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
        .is_empty()
    {
        return Ok(());
    }
    let namespace = pod.namespace().unwrap_or_default();
    for pod_claim in pod_claims(pod) {
        let (name, check_owner) = match resolve(pod, pod_claim) {
            // Only under --shadow, where nothing was created or recorded.
            Err(ResolveError::NotCreatedYet { .. }) => continue,
            Err(err) => return Err(err.into()),
            Ok(Resolved::NotNeeded) => continue,
            Ok(Resolved::Claim { name, check_owner }) => (name, check_owner),
        };
        let Some(claim) = stores.claim(&namespace, name) else {
            return Ok(());
        };
        if check_owner {
            is_for_pod(pod, &claim)?;
        }
        if !needs_reservation(pod, &claim) {
            continue;
        }
        if reserved_for(&claim).len() >= RESERVED_FOR_MAX {
            let message = format!(
                "cannot reserve ResourceClaim {namespace}/{name} for pod {}: reservedFor is at its limit of {RESERVED_FOR_MAX}",
                key_of(pod),
            );
            let mut problem = Problem::new(claim.as_ref(), "reserved-for-full", message);
            problem.event = Some("FailedResourceClaimReservation");
            steps.push(Reservation::Full(problem));
            continue;
        }
        let desired = Box::new(reserved_for_pod(&claim, pod));
        steps.push(Reservation::Reserve {
            live: claim,
            desired,
        });
    }
    Ok(())
}

/// The pod reservations of the claim whose pod the store does not have: the API server is
/// asked for them before their entries are dropped.
pub fn pods_to_fetch(claim: &ResourceClaim, stores: &impl Stores) -> Vec<String> {
    let namespace = claim.namespace().unwrap_or_default();
    reserved_for(claim)
        .iter()
        .filter(|entry| {
            is_pod_consumer(entry)
                && is_dns1123_subdomain(&entry.name)
                && !stores.deleted_pod(&entry.uid)
                && stores.pod(&namespace, &entry.name).is_none()
        })
        .map(|entry| entry.name.clone())
        .collect()
}

/// `syncClaim`'s first part: the reservations dropped, and what that makes to write.
#[derive(Debug)]
pub struct ClaimPlan {
    pub problems: Vec<Problem>,
    pub release: Release,
}

/// The claim with key `key`, given the pods `fetched` from the API server (see
/// `pods_to_fetch`; a pod asked for and not returned is gone).
pub fn plan_claim(
    key: &str,
    claim: &ResourceClaim,
    stores: &impl Stores,
    fetched: &[Pod],
) -> ClaimPlan {
    let (namespace, _) = split_key(key);
    let mut problems = Vec::new();
    let mut remaining = Vec::new();
    for entry in reserved_for(claim) {
        // No pod can have a name that is no DNS subdomain: the entry is stale, and asking
        // for it would fail (an empty name: upstream stays stuck on the claim) or fetch
        // something else (`a/status`, `a?b`).
        if is_pod_consumer(entry) && !is_dns1123_subdomain(&entry.name) {
            problems.push(Problem::at(
                key.to_string(),
                claim,
                "invalid-reservation",
                format!(
                    "reservedFor names pod {:?}, which no pod can be called; dropped",
                    entry.name
                ),
            ));
            continue;
        }
        if !is_pod_consumer(entry) || keeps_reservation(namespace, entry, stores, fetched) {
            remaining.push(entry.clone());
        }
    }
    ClaimPlan {
        problems,
        release: release(claim, remaining),
    }
}

/// Whether a pod reservation still holds: a deleted UID drops it; a pod missing from the
/// store is looked for among the pods fetched from the API server.
fn keeps_reservation(
    namespace: &str,
    entry: &ResourceClaimConsumerReference,
    stores: &impl Stores,
    fetched: &[Pod],
) -> bool {
    if stores.deleted_pod(&entry.uid) {
        return false;
    }
    match stores.pod(namespace, &entry.name) {
        Some(pod) => keep_pod_reservation(entry, Some(&pod)),
        None => keep_pod_reservation(entry, fetched.iter().find(|p| p.name_any() == entry.name)),
    }
}

/// `syncClaim`'s last part: whether the claim (as the release left it) is deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    Keep,
    Delete,
    /// Unused by its owner, but a pod still names it: kept and reported.
    InUse(Problem),
}

/// Upstream deletes a generated claim once its owner was replaced or is done. Not while a
/// pod that will still run names this very claim: nothing would make it again.
pub fn plan_cleanup(key: &str, claim: &ResourceClaim, stores: &impl Stores) -> Cleanup {
    let (namespace, name) = split_key(key);
    let owner = owning_pod(claim).and_then(|(pod, _)| stores.pod(namespace, pod));
    if !delete_unused(claim, owner.as_deref()) {
        return Cleanup::Keep;
    }
    match user_by_name(namespace, name, stores) {
        None => Cleanup::Delete,
        Some(user) => Cleanup::InUse(Problem::at(
            key.to_string(),
            claim,
            "claim-in-use",
            format!(
                "generated claim {key} lost its owner pod, but pod {user} uses it by name; not deleted"
            ),
        )),
    }
}

/// A pod that is not done and names the claim in `resourceClaimName`.
fn user_by_name(namespace: &str, claim: &str, stores: &impl Stores) -> Option<String> {
    stores
        .pods_using(namespace, claim)
        .into_iter()
        .find(|pod_key| {
            let (ns, name) = split_key(pod_key);
            stores.pod(ns, name).is_some_and(|pod| {
                !pod_is_done(&pod)
                    && pod_claims(&pod)
                        .iter()
                        .any(|pc| pc.resource_claim_name.as_deref() == Some(claim))
            })
        })
}
