//! The resourceclaim controller's decisions. Its syncs as plans: from what the stores hold
//! (`Stores`), what a pod sync (`syncPod`/`handleClaim`) or a claim sync (`syncClaim`) is to
//! write, built from the decisions on single pods and claims in [`claims`]. No I/O: `sync.rs`
//! performs the plans, in upstream's order.

pub mod claims;

use std::sync::Arc;

use k8s_openapi::api::core::v1::PodResourceClaim;
use k8s_openapi::api::resource::v1::{
    ResourceClaim, ResourceClaimConsumerReference, ResourceClaimTemplate,
};
use kube::ResourceExt;

use self::claims::{
    ClaimOwner, Features, Membership, RESERVED_FOR_MAX, Release, ResolveError, Resolved, bind_to,
    claim_from_template, claims_to_release, delete_unused, find_orphan, foreign_claims,
    group_needs_work, group_resolved_names, is_for_group, is_for_pod, is_group_consumer,
    is_pod_consumer, keep_group_reservation, keep_pod_reservation, needs_reservation, owning_pod,
    pod_claims, pod_group_name, pod_is_done, pod_may_get_claims, pod_needs_claims, pod_needs_work,
    release, reserved_for, reserved_for_consumer, resolve, resolve_group, uses_claims,
};
use super::error::ClaimError;
use crate::k8s::podgroup::PodGroup;
use crate::k8s::validation::is_dns1123_subdomain;
use crate::k8s::view::Pod;
use crate::runtime::watching::stored::{Stored, join_key, key_of, split_key};

/// What a plan reads: the stores, as this controller knows them.
pub trait Stores {
    /// The claim as this controller last knows it: the store, or its own newer write.
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>>;
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
    fn template(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaimTemplate>>;
    /// The PodGroup; always `None` with DRAWorkloadResourceClaims off (nothing watches them).
    fn pod_group(&self, namespace: &str, name: &str) -> Option<Arc<PodGroup>>;
    /// The claims the pod or PodGroup with this UID controls, including ones created a moment
    /// ago.
    fn owned_claims(&self, namespace: &str, owner_uid: &str) -> Vec<Arc<ResourceClaim>>;
    /// Whether the deletion of the pod or PodGroup with this UID was seen.
    fn deleted(&self, uid: &str) -> bool;
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

/// The PodGroup the pod names (`getPodGroup`), with DRAWorkloadResourceClaims on: `Err`
/// with its name when the store does not have it.
fn pod_group<'a>(
    pod: &'a Pod,
    stores: &impl Stores,
    features: Features,
) -> Result<Option<Arc<PodGroup>>, &'a str> {
    let Some(name) = pod_group_name(pod).filter(|_| features.workload_claims) else {
        return Ok(None);
    };
    let namespace = pod.namespace().unwrap_or_default();
    stores.pod_group(&namespace, name).map(Some).ok_or(name)
}

fn membership<'a>(found: &'a Result<Option<Arc<PodGroup>>, &'a str>) -> Membership<'a> {
    match found {
        Ok(Some(group)) => Membership::In(group),
        Ok(None) => Membership::Alone,
        Err(_) => Membership::Missing,
    }
}

/// `getPodGroup`'s lister error, as upstream's `syncPod` returns it.
fn group_not_found(pod: &Pod, group: &str) -> ClaimError {
    ClaimError::GetPodGroup {
        pod: key_of(pod),
        group: group.to_string(),
    }
}

/// `enqueuePod`: the claims of a pod that no longer needs them, and the pod itself when it
/// needs work; a pod that cannot get its claims because others hold their names is reported.
pub fn plan_pod_change(
    pod: &Pod,
    deleted: bool,
    stores: &impl Stores,
    features: Features,
) -> PodChange {
    let mut plan = PodChange::default();
    if !uses_claims(pod) {
        return plan;
    }
    let namespace = pod.namespace().unwrap_or_default();
    if !pod_needs_claims(pod, deleted) {
        let names = claims_to_release(pod).into_iter();
        plan.claims = names.map(|name| join_key(&namespace, name)).collect();
    }
    let claim = |name: &str| stores.claim(&namespace, name);
    let found = pod_group(pod, stores, features);
    if pod_needs_work(pod, membership(&found), features, claim) {
        plan.pod = true;
    } else if pod_may_get_claims(pod) {
        for problem in foreign_claims(pod, features, claim) {
            let message =
                format!("{problem}; it must be deleted before a claim is created for the pod");
            plan.problems
                .push(Problem::new(pod, "claim-not-owned", message));
        }
    }
    plan
}

/// What a PodGroup change enqueues (`enqueuePodGroup`; its member pods are enqueued too).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GroupChange {
    /// The keys of the claims a deleted group releases.
    pub claims: Vec<String>,
    /// Whether the group itself needs a sync.
    pub group: bool,
}

/// `enqueuePodGroup`: a deleted group's claims, and the group itself when it needs work.
pub fn plan_group_change(group: &PodGroup, deleted: bool, stores: &impl Stores) -> GroupChange {
    let mut plan = GroupChange::default();
    if group.claims().is_empty() {
        return plan;
    }
    let namespace = group.metadata.namespace.as_deref().unwrap_or_default();
    if deleted {
        plan.claims = group_resolved_names(group)
            .into_iter()
            .map(|name| join_key(namespace, name))
            .collect();
    }
    plan.group = group_needs_work(group, |name| stores.claim(namespace, name));
    plan
}

/// What one claim entry of a pod (or PodGroup) needs.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimStep {
    /// Create this claim from the entry's template, then record the name it is given.
    Create(Box<ResourceClaim>),
    /// Record this claim, created for the entry earlier but never recorded.
    Record(String),
}

/// `syncPod`'s (or `syncPodGroup`'s) first part: the claims to create or record.
#[derive(Debug, Default)]
pub struct PodPlan {
    pub problems: Vec<Problem>,
    /// The entries that need something, in spec order: the entry's name and its step, or
    /// why it fails.
    pub entries: Vec<(String, Result<ClaimStep, ClaimError>)>,
}

/// The claims to create or record for the pod; `None` when the pod gets none at all. A pod
/// whose PodGroup the store does not have fails, as upstream.
pub fn plan_pod(
    pod: &Pod,
    stores: &impl Stores,
    features: Features,
) -> Result<Option<PodPlan>, ClaimError> {
    if !pod_may_get_claims(pod) {
        return Ok(None);
    }
    let group = pod_group(pod, stores, features).map_err(|name| group_not_found(pod, name))?;
    let mut plan = PodPlan::default();
    for pod_claim in pod_claims(pod) {
        if let Some(step) = plan_entry(
            pod,
            group.as_deref(),
            pod_claim,
            stores,
            features,
            &mut plan.problems,
        )
        .transpose()
        {
            plan.entries.push((pod_claim.name.clone(), step));
        }
    }
    Ok(Some(plan))
}

/// The claims to create or record for the PodGroup; `None` when it is being deleted.
pub fn plan_group(group: &PodGroup, stores: &impl Stores, features: Features) -> Option<PodPlan> {
    if group.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let mut plan = PodPlan::default();
    for entry in group.claims() {
        if let Some(step) = plan_group_entry(group, entry, stores, features).transpose() {
            plan.entries.push((entry.name.clone(), step));
        }
    }
    Some(plan)
}

/// `handlePodGroupClaim`: what the group's `entry` needs; `None` when its claim is there (or
/// not the group's to make).
fn plan_group_entry(
    group: &PodGroup,
    entry: &PodResourceClaim,
    stores: &impl Stores,
    features: Features,
) -> Result<Option<ClaimStep>, ClaimError> {
    let namespace = group.metadata.namespace.as_deref().unwrap_or_default();
    match resolve_group(group, entry) {
        Err(err) if err.not_created_yet() => {}
        Err(err) => return Err(err.into()),
        Ok(Resolved::NotNeeded) => return Ok(None),
        Ok(Resolved::Claim { name, check_owner }) => {
            if let Some(claim) = stores.claim(namespace, name) {
                match is_for_group(group, &claim) {
                    Err(err) if check_owner => tracing::warn!(
                        podgroup = key_of(group),
                        error = %err,
                        "claim recorded for the PodGroup is not owned by it; creating a new one"
                    ),
                    _ => return Ok(None),
                }
            }
        }
    }
    create_or_record(&ClaimOwner::group(group), entry, stores, features)
}

/// A template entry's claim, not there: the one made for it earlier but never recorded (an
/// orphan the owner controls), or a new one from the template.
fn create_or_record(
    owner: &ClaimOwner,
    entry: &PodResourceClaim,
    stores: &impl Stores,
    features: Features,
) -> Result<Option<ClaimStep>, ClaimError> {
    let Some(template_name) = entry.resource_claim_template_name.as_deref() else {
        return Ok(None);
    };
    let namespace = owner.namespace.as_deref().unwrap_or_default();
    let owned = stores.owned_claims(namespace, &owner.reference.uid);
    if let Some(orphan) = find_orphan(&entry.name, &owned) {
        return Ok(Some(ClaimStep::Record(orphan.name_any())));
    }
    let template = stores
        .template(namespace, template_name)
        .ok_or_else(|| ClaimError::TemplateNotFound(template_name.to_string()))?;
    let claim = claim_from_template(owner, entry, &template, features)?;
    Ok(Some(ClaimStep::Create(Box::new(claim))))
}

/// `handleClaim`: what `pod_claim` needs; `None` when its claim is there (or not ours).
fn plan_entry(
    pod: &Pod,
    group: Option<&PodGroup>,
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
        Err(err) if err.not_created_yet() => {}
        Err(err) => return Err(err.into()),
        Ok(Resolved::NotNeeded) => return Ok(None),
        Ok(Resolved::Claim { name, check_owner }) => {
            if let Some(claim) = stores.claim(&namespace, name) {
                match is_for_pod(pod, &claim, features.workload_claims) {
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
    if pod_claim.resource_claim_template_name.is_none() {
        return Ok(None);
    }
    // A claim the pod shares with its group is the group's to create: the pod records it
    // once it is there.
    let to = bind_to(pod, group, pod_claim)?;
    if let Some(group) = group.filter(|_| is_group_consumer(&to)) {
        let uid = group.metadata.uid.as_deref().unwrap_or_default();
        let owned = stores.owned_claims(&namespace, uid);
        return Ok(find_orphan(&pod_claim.name, &owned).map(|c| ClaimStep::Record(c.name_any())));
    }
    create_or_record(&ClaimOwner::pod(pod), pod_claim, stores, features)
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

/// The reservations the pod (as the status apply left it) needs on its allocated claims:
/// for the pod, or for its PodGroup where the group shares the claim.
pub fn plan_reservations(pod: &Pod, stores: &impl Stores, features: Features) -> Reservations {
    let mut steps = Vec::new();
    let outcome = reservations(pod, stores, features, &mut steps);
    Reservations { steps, outcome }
}

fn reservations(
    pod: &Pod,
    stores: &impl Stores,
    features: Features,
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
    let group = pod_group(pod, stores, features).map_err(|name| group_not_found(pod, name))?;
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
            is_for_pod(pod, &claim, features.workload_claims)?;
        }
        if !needs_reservation(pod, &claim, features.workload_claims) {
            continue;
        }
        let consumer = bind_to(pod, group.as_deref(), pod_claim)?;
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
        let desired = Box::new(reserved_for_consumer(&claim, consumer));
        steps.push(Reservation::Reserve {
            live: claim,
            desired,
        });
    }
    Ok(())
}

/// The consumers in `reservedFor` this controller checks: pods, and PodGroups with
/// DRAWorkloadResourceClaims on. Any other entry is kept as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumer {
    Pod,
    PodGroup,
}

impl Consumer {
    pub fn of(entry: &ResourceClaimConsumerReference, features: Features) -> Option<Self> {
        if is_pod_consumer(entry) {
            Some(Self::Pod)
        } else if features.workload_claims && is_group_consumer(entry) {
            Some(Self::PodGroup)
        } else {
            None
        }
    }

    fn in_store(self, stores: &impl Stores, namespace: &str, name: &str) -> bool {
        match self {
            Self::Pod => stores.pod(namespace, name).is_some(),
            Self::PodGroup => stores.pod_group(namespace, name).is_some(),
        }
    }
}

/// The reservations of the claim whose pod or PodGroup neither the store nor the
/// deleted-objects cache knows: the API server is asked for them before their entries are
/// dropped.
pub fn consumers_to_fetch(
    claim: &ResourceClaim,
    stores: &impl Stores,
    features: Features,
) -> Vec<(Consumer, String)> {
    let namespace = claim.namespace().unwrap_or_default();
    reserved_for(claim)
        .iter()
        .filter_map(|entry| {
            let kind = Consumer::of(entry, features)?;
            (is_dns1123_subdomain(&entry.name)
                && !stores.deleted(&entry.uid)
                && !kind.in_store(stores, &namespace, &entry.name))
            .then(|| (kind, entry.name.clone()))
        })
        .collect()
}

/// The pods and PodGroups the API server returned for [`consumers_to_fetch`] (one asked for
/// and not returned is gone).
#[derive(Debug, Default)]
pub struct Fetched {
    pub pods: Vec<Pod>,
    pub groups: Vec<PodGroup>,
}

/// `syncClaim`'s first part: the reservations dropped, and what that makes to write.
#[derive(Debug)]
pub struct ClaimPlan {
    pub problems: Vec<Problem>,
    pub release: Release,
}

/// The claim with key `key`, given the pods and PodGroups `fetched` from the API server.
pub fn plan_claim(
    key: &str,
    claim: &ResourceClaim,
    stores: &impl Stores,
    fetched: &Fetched,
    features: Features,
) -> ClaimPlan {
    let (namespace, _) = split_key(key);
    let mut problems = Vec::new();
    let mut remaining = Vec::new();
    for entry in reserved_for(claim) {
        let Some(kind) = Consumer::of(entry, features) else {
            remaining.push(entry.clone());
            continue;
        };
        // No pod or PodGroup can have a name that is no DNS subdomain: the entry is stale,
        // and asking for it would fail (an empty name: upstream stays stuck on the claim) or
        // fetch something else (`a/status`, `a?b`).
        if !is_dns1123_subdomain(&entry.name) {
            let what = match kind {
                Consumer::Pod => "pod",
                Consumer::PodGroup => "PodGroup",
            };
            problems.push(Problem::at(
                key.to_string(),
                claim,
                "invalid-reservation",
                format!(
                    "reservedFor names {what} {:?}, which no {what} can be called; dropped",
                    entry.name
                ),
            ));
            continue;
        }
        if keeps_reservation(namespace, entry, kind, stores, fetched) {
            remaining.push(entry.clone());
        }
    }
    ClaimPlan {
        problems,
        release: release(claim, remaining),
    }
}

/// Whether a pod or PodGroup reservation still holds: a deleted UID drops it; one missing
/// from the store is looked for among those fetched from the API server.
fn keeps_reservation(
    namespace: &str,
    entry: &ResourceClaimConsumerReference,
    kind: Consumer,
    stores: &impl Stores,
    fetched: &Fetched,
) -> bool {
    if stores.deleted(&entry.uid) {
        return false;
    }
    let name = entry.name.as_str();
    match kind {
        Consumer::Pod => match stores.pod(namespace, name) {
            Some(pod) => keep_pod_reservation(entry, Some(&pod)),
            None => keep_pod_reservation(entry, fetched.pods.iter().find(|p| p.name_any() == name)),
        },
        Consumer::PodGroup => match stores.pod_group(namespace, name) {
            Some(group) => keep_group_reservation(entry, Some(&group)),
            None => keep_group_reservation(
                entry,
                fetched
                    .groups
                    .iter()
                    .find(|g| g.metadata.name.as_deref() == Some(name)),
            ),
        },
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
