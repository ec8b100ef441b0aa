//! The resourceclaim controller's effects. The one executor of its plans (`plan.rs`): it
//! performs their writes through `Effects`, in upstream's order, and turns failures into the
//! sync's error. The controller's `Effects` (`sync/effects.rs`) go through the writer; the
//! unit tests' record what they get.

mod effects;

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Resource;

use super::error::ClaimError;
use super::plan::claims::{
    Features, Release, finalizer_removed, pod_claim_statuses, pod_claims, statuses_to_record,
};
use super::plan::{
    ClaimStep, Cleanup, Consumer, Fetched, PodPlan, Problem, Reservation, Stores,
    consumers_to_fetch, plan_claim, plan_cleanup, plan_group, plan_pod, plan_reservations,
};
use super::{Key, ResourceClaims};
use crate::controllers::ControllerError;
use crate::k8s::podgroup::PodGroup;
use crate::k8s::view::Pod;
use crate::runtime::watching::stored::{join_key, key_of, split_key};

impl ResourceClaims {
    /// The sync a work item's key names.
    pub(super) async fn sync(&self, key: Key) -> Result<(), ControllerError> {
        match &key {
            Key::Pod(pod) => sync_pod(self, pod).await,
            Key::Claim(claim) => sync_claim(self, claim).await,
            Key::PodGroup(group) => sync_group(self, group).await,
        }
        .map_err(ControllerError::from)
    }
}

/// The writes, reads and reports a plan needs performed.
pub(super) trait Effects: Stores {
    fn features(&self) -> Features;
    /// Creates the claim; the API server returns it named (under `--shadow`, unnamed).
    async fn create_claim(&self, claim: &ResourceClaim) -> kube::Result<ResourceClaim>;
    /// Applies `status.resourceClaimStatuses` (pod claim name, claim name) to the pod.
    async fn record_claims(&self, pod: &Pod, entries: &[(String, String)]) -> kube::Result<Pod>;
    /// Applies `status.resourceClaimStatuses` (entry name, claim name) to the PodGroup.
    async fn record_group_claims(
        &self,
        group: &PodGroup,
        entries: &[(String, String)],
    ) -> kube::Result<()>;
    /// UpdateStatus of the claim.
    async fn write_claim_status(
        &self,
        live: &ResourceClaim,
        desired: &ResourceClaim,
    ) -> kube::Result<ResourceClaim>;
    /// Writes `desired`'s finalizers, conflicting with a concurrent change.
    async fn write_finalizers(
        &self,
        live: &ResourceClaim,
        desired: &ResourceClaim,
    ) -> kube::Result<ResourceClaim>;
    /// Deletes the claim (this UID only); a claim already gone is no error.
    async fn delete_claim(&self, claim: &ResourceClaim) -> kube::Result<()>;
    /// The pod as the API server has it.
    async fn get_pod(&self, namespace: &str, name: &str) -> kube::Result<Option<Pod>>;
    /// The PodGroup as the API server has it.
    async fn get_pod_group(&self, namespace: &str, name: &str) -> kube::Result<Option<PodGroup>>;
    /// Reports bad input; true the first time this problem is seen.
    fn report(&self, problem: &Problem) -> bool;
    /// Records a warning event on the pod or PodGroup; never blocks or fails the sync.
    fn warn(&self, object: ObjectReference, reason: &'static str, note: String);
}

fn report_on(fx: &impl Effects, problem: &Problem, object: &ObjectReference) {
    if fx.report(problem)
        && let Some(reason) = problem.event
    {
        fx.warn(object.clone(), reason, problem.message.clone());
    }
}

/// Reports the plan's problems, and creates or records each entry's claim: the (entry name,
/// claim name) pairs to record, and the failures, each also a `FailedResourceClaimCreation`
/// event on `object` ("<what> <entry>: <err>") and wrapped by `wrap` (entry name, error).
async fn create_claims(
    fx: &impl Effects,
    plan: PodPlan,
    object: &ObjectReference,
    what: &str,
    wrap: impl Fn(String, ClaimError) -> ClaimError,
) -> (Vec<(String, String)>, Vec<ClaimError>) {
    for problem in &plan.problems {
        report_on(fx, problem, object);
    }
    let mut recorded = Vec::new();
    let mut errors = Vec::new();
    for (entry, step) in plan.entries {
        let claim = match step {
            Ok(step) => perform(fx, step).await,
            Err(err) => Err(err),
        };
        match claim {
            Ok(Some(claim)) => recorded.push((entry, claim)),
            Ok(None) => {}
            Err(err) => {
                fx.warn(
                    object.clone(),
                    "FailedResourceClaimCreation",
                    format!("{what} {entry}: {err}"),
                );
                errors.push(wrap(entry, err));
            }
        }
    }
    (recorded, errors)
}

/// `syncPod`: every claim of the pod exists and is recorded in its status; a pod already
/// on a node is reserved on its allocated claims.
pub(super) async fn sync_pod(fx: &impl Effects, key: &str) -> Result<(), ClaimError> {
    let (namespace, name) = split_key(key);
    let Some(pod) = fx.pod(namespace, name) else {
        return Ok(());
    };
    let Some(plan) = plan_pod(&pod, fx, fx.features())? else {
        return Ok(());
    };
    let (recorded, mut errors) = create_claims(
        fx,
        plan,
        &pod.object_ref(),
        "PodResourceClaim",
        |pod_claim, err| ClaimError::PodClaim {
            pod: key.to_string(),
            pod_claim,
            source: Box::new(err),
        },
    )
    .await;
    let mut pod = pod;
    if !recorded.is_empty() {
        // The new entries, plus the ones already recorded, so the apply removes none.
        let entries = statuses_to_record(pod_claims(&pod), pod_claim_statuses(&pod), &recorded);
        match fx.record_claims(&pod, &entries).await {
            Ok(updated) => pod = Arc::new(updated),
            Err(source) => errors.push(ClaimError::RecordStatuses {
                pod: key.to_string(),
                source,
            }),
        }
    }
    if !errors.is_empty() {
        return Err(ClaimError::Several(errors));
    }
    reserve(fx, &pod).await
}

/// `syncPodGroup`: every claim the PodGroup makes from a template exists and is recorded in
/// its status (reservations are made for its pods, in `sync_pod`).
pub(super) async fn sync_group(fx: &impl Effects, key: &str) -> Result<(), ClaimError> {
    let (namespace, name) = split_key(key);
    let Some(group) = fx.pod_group(namespace, name) else {
        return Ok(());
    };
    let Some(plan) = plan_group(&group, fx, fx.features()) else {
        return Ok(());
    };
    let (recorded, mut errors) = create_claims(
        fx,
        plan,
        &group.object_ref(&()),
        "PodGroupResourceClaim",
        |claim, err| ClaimError::GroupClaim {
            group: key.to_string(),
            claim,
            source: Box::new(err),
        },
    )
    .await;
    if !recorded.is_empty() {
        let entries = statuses_to_record(group.claims(), group.claim_statuses(), &recorded);
        if let Err(source) = fx.record_group_claims(&group, &entries).await {
            errors.push(ClaimError::RecordGroupStatuses {
                group: key.to_string(),
                source,
            });
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ClaimError::Several(errors))
    }
}

/// Creates a claim, or just names the one to record: the claim name to record, if any.
async fn perform(fx: &impl Effects, step: ClaimStep) -> Result<Option<String>, ClaimError> {
    match step {
        ClaimStep::Record(claim) => Ok(Some(claim)),
        ClaimStep::Create(claim) => match fx.create_claim(&claim).await {
            // Under --shadow nothing was created, so there is no name to record.
            Ok(created) => Ok(created.metadata.name),
            Err(err) => Err(ClaimError::Create(err)),
        },
    }
}

/// Reserves the allocated claims of a pod bound to a node without the scheduler.
async fn reserve(fx: &impl Effects, pod: &Pod) -> Result<(), ClaimError> {
    let plan = plan_reservations(pod, fx, fx.features());
    let object = pod.object_ref();
    for step in plan.steps {
        match step {
            Reservation::Reserve { live, desired } => {
                fx.write_claim_status(&live, &desired)
                    .await
                    .map_err(|source| ClaimError::Reserve {
                        claim: key_of(live.as_ref()),
                        source,
                    })?;
            }
            Reservation::Full(problem) => report_on(fx, &problem, &object),
        }
    }
    plan.outcome
}

/// `syncClaim`: stale reservations dropped, the claim deallocated and its finalizer
/// removed when it fell out of use, and a generated claim deleted when its pod is done.
pub(super) async fn sync_claim(fx: &impl Effects, key: &str) -> Result<(), ClaimError> {
    let (namespace, name) = split_key(key);
    let Some(mut claim) = fx.claim(namespace, name) else {
        return Ok(());
    };
    let features = fx.features();
    let mut fetched = Fetched::default();
    for (kind, name) in consumers_to_fetch(&claim, fx, features) {
        let key = join_key(namespace, &name);
        match kind {
            Consumer::Pod => fetched.pods.extend(
                fx.get_pod(namespace, &name)
                    .await
                    .map_err(|source| ClaimError::GetPod { pod: key, source })?,
            ),
            Consumer::PodGroup => fetched.groups.extend(
                fx.get_pod_group(namespace, &name)
                    .await
                    .map_err(|source| ClaimError::GetGroup { group: key, source })?,
            ),
        }
    }
    let plan = plan_claim(key, &claim, fx, &fetched, features);
    for problem in &plan.problems {
        fx.report(problem);
    }
    match plan.release {
        Release::Nothing => {}
        Release::Status(status) => {
            let mut desired = (*claim).clone();
            desired.status = Some(status);
            claim = write_status(fx, &claim, &desired).await?;
            claim = remove_finalizer(fx, claim).await?;
        }
        Release::Finalize { clear_allocation } => {
            if clear_allocation {
                let mut desired = (*claim).clone();
                if let Some(status) = desired.status.as_mut() {
                    status.allocation = None;
                }
                claim = write_status(fx, &claim, &desired).await?;
            }
            claim = remove_finalizer(fx, claim).await?;
        }
    }
    match plan_cleanup(key, &claim, fx) {
        Cleanup::Keep => {}
        Cleanup::InUse(problem) => {
            fx.report(&problem);
        }
        Cleanup::Delete => fx
            .delete_claim(&claim)
            .await
            .map_err(|source| ClaimError::Delete {
                claim: key.to_string(),
                source,
            })?,
    }
    Ok(())
}

async fn write_status(
    fx: &impl Effects,
    live: &ResourceClaim,
    desired: &ResourceClaim,
) -> Result<Arc<ResourceClaim>, ClaimError> {
    fx.write_claim_status(live, desired)
        .await
        .map(Arc::new)
        .map_err(|source| ClaimError::WriteStatus {
            claim: key_of(live),
            source,
        })
}

/// Removes the builtin finalizer from an unallocated claim.
async fn remove_finalizer(
    fx: &impl Effects,
    claim: Arc<ResourceClaim>,
) -> Result<Arc<ResourceClaim>, ClaimError> {
    let Some(desired) = finalizer_removed(&claim) else {
        return Ok(claim);
    };
    fx.write_finalizers(&claim, &desired)
        .await
        .map(Arc::new)
        .map_err(|source| ClaimError::RemoveFinalizer {
            claim: key_of(claim.as_ref()),
            source,
        })
}
