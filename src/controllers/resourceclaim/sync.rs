//! The one executor of the resourceclaim controller's plans (`plan.rs`): it performs their
//! writes through `Effects`, in upstream's order, and turns failures into the sync's error.
//! The controller's `Effects` go through the writer; the unit tests' record what they get.

use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;

use super::claims::{Features, Release, finalizer_removed, statuses_to_record};
use super::error::ClaimError;
use super::plan::{
    ClaimStep, Cleanup, Problem, Reservation, Stores, plan_claim, plan_cleanup, plan_pod,
    plan_reservations, pods_to_fetch,
};
use crate::runtime::stored::{key_of, split_key};
use crate::runtime::view::Pod;

/// The writes, reads and reports a plan needs performed.
pub(super) trait Effects: Stores {
    fn features(&self) -> Features;
    /// Creates the claim; the API server returns it named (under `--shadow`, unnamed).
    async fn create_claim(&self, claim: &ResourceClaim) -> kube::Result<ResourceClaim>;
    /// Applies `status.resourceClaimStatuses` (pod claim name, claim name) to the pod.
    async fn record_claims(&self, pod: &Pod, entries: &[(String, String)]) -> kube::Result<Pod>;
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
    /// Reports bad input; true the first time this problem is seen.
    fn report(&self, problem: &Problem) -> bool;
    /// Records a warning event on the pod; never blocks or fails the sync.
    fn warn(&self, pod: &Pod, reason: &'static str, note: String);
}

fn report_on(fx: &impl Effects, problem: &Problem, pod: &Pod) {
    if fx.report(problem)
        && let Some(reason) = problem.event
    {
        fx.warn(pod, reason, problem.message.clone());
    }
}

/// `syncPod`: every claim of the pod exists and is recorded in its status; a pod already
/// on a node is reserved on its allocated claims.
pub(super) async fn sync_pod(fx: &impl Effects, key: &str) -> Result<(), ClaimError> {
    let (namespace, name) = split_key(key);
    let Some(pod) = fx.pod(namespace, name) else {
        return Ok(());
    };
    let Some(plan) = plan_pod(&pod, fx, fx.features()) else {
        return Ok(());
    };
    for problem in &plan.problems {
        report_on(fx, problem, &pod);
    }
    let mut recorded = Vec::new();
    let mut errors = Vec::new();
    for (pod_claim, step) in plan.entries {
        let claim = match step {
            Ok(step) => perform(fx, step).await,
            Err(err) => Err(err),
        };
        match claim {
            Ok(Some(claim)) => recorded.push((pod_claim, claim)),
            Ok(None) => {}
            Err(err) => {
                fx.warn(
                    &pod,
                    "FailedResourceClaimCreation",
                    format!("PodResourceClaim {pod_claim}: {err}"),
                );
                errors.push(ClaimError::PodClaim {
                    pod: key.to_string(),
                    pod_claim,
                    source: Box::new(err),
                });
            }
        }
    }
    let mut pod = pod;
    if !recorded.is_empty() {
        // The new entries, plus the ones already recorded, so the apply removes none.
        let entries = statuses_to_record(&pod, &recorded);
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
    let plan = plan_reservations(pod, fx);
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
            Reservation::Full(problem) => report_on(fx, &problem, pod),
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
    let mut fetched = Vec::new();
    for pod in pods_to_fetch(&claim, fx) {
        let live = fx
            .get_pod(namespace, &pod)
            .await
            .map_err(|source| ClaimError::GetPod {
                pod: format!("{namespace}/{pod}"),
                source,
            })?;
        fetched.extend(live);
    }
    let plan = plan_claim(key, &claim, fx, &fetched);
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
