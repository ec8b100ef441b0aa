//! A ResourceClaim: the resourceclaim controller's claim sync (`plan_claim`, then
//! `plan_cleanup` on the claim as the release leaves it), each `reservedFor` entry and
//! whether its pod or PodGroup still needs it. A pod: its claims, each explained, and what
//! its own sync would do (create, record, reserve).

use std::sync::Arc;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::ResourceExt;
use serde::Serialize;

use super::{Difference, ExplainError, Explanation, Reads, Reasons, differences};
use crate::controllers::resourceclaim::plan::claims::{
    Features, Release, Resolved, StaleReservation, group_reservation, owner_uid, pod_claims,
    pod_reservation, reserved_for, resolve, resolved_names,
};
use crate::controllers::resourceclaim::plan::{
    ClaimStep, Cleanup, Consumer, Fetched, Reservation, Stores, plan_claim, plan_cleanup, plan_pod,
    plan_reservations,
};
use crate::k8s::podgroup::PodGroup;
use crate::k8s::view::Pod;
use crate::runtime::watching::informer::Informers;

/// The stores as the controller's plans read them. No deleted-objects cache: a consumer the
/// store does not have is gone.
struct Listed<'a> {
    informers: &'a Informers,
    features: Features,
}

impl Stores for Listed<'_> {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.informers
            .get::<ResourceClaim>()
            .store()
            .get(namespace, name)
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.informers.get::<Pod>().store().get(namespace, name)
    }

    fn template(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaimTemplate>> {
        let templates = self.informers.get::<ResourceClaimTemplate>();
        templates.store().get(namespace, name)
    }

    fn pod_group(&self, namespace: &str, name: &str) -> Option<Arc<PodGroup>> {
        if !self.features.workload_claims {
            return None;
        }
        self.informers
            .get::<PodGroup>()
            .store()
            .get(namespace, name)
    }

    fn owned_claims(&self, namespace: &str, owner: &str) -> Vec<Arc<ResourceClaim>> {
        let mut owned = self
            .informers
            .get::<ResourceClaim>()
            .in_namespace(namespace);
        owned.retain(|c| owner_uid(c) == Some(owner));
        owned
    }

    fn deleted(&self, _uid: &str) -> bool {
        false
    }

    fn pods_using(&self, namespace: &str, claim: &str) -> Vec<String> {
        let mut pods: Vec<String> = self
            .informers
            .get::<Pod>()
            .in_namespace(namespace)
            .iter()
            .filter(|pod| resolved_names(pod).contains(&claim))
            .map(|pod| format!("{namespace}/{}", pod.name_any()))
            .collect();
        pods.sort();
        pods
    }
}

/// One `reservedFor` entry.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservedFor {
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub still_needed: bool,
    pub why: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimReasons {
    /// Its controlling owner (`Kind/name`), or `none`.
    pub owner: String,
    pub allocated: bool,
    pub reserved_for: Vec<ReservedFor>,
    /// The pods whose claim entries name it.
    pub used_by: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// One claim entry of a pod.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodClaim {
    pub entry: String,
    /// The claim it names, when it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim: Option<Box<Explanation>>,
    /// What the entry stands at when it names no claim in the store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReasons {
    pub claims: Vec<PodClaim>,
    /// What the pod's own sync would do: claims to create, record or reserve.
    pub steps: Vec<String>,
}

fn stale_text(why: StaleReservation, what: &str) -> String {
    match why {
        StaleReservation::Gone => format!("the {what} is gone"),
        StaleReservation::Replaced => format!("the {what} was replaced (another UID)"),
        StaleReservation::Done => {
            format!("the {what} is done: succeeded, failed, or deleted before it ran")
        }
    }
}

fn reservation(stores: &Listed, ns: &str, claim: &ResourceClaim) -> Vec<ReservedFor> {
    reserved_for(claim)
        .iter()
        .map(|entry| {
            let found = match Consumer::of(entry, stores.features) {
                Some(Consumer::Pod) => Some((
                    "pod",
                    pod_reservation(entry, stores.pod(ns, &entry.name).as_deref()),
                )),
                Some(Consumer::PodGroup) => Some((
                    "PodGroup",
                    group_reservation(entry, stores.pod_group(ns, &entry.name).as_deref()),
                )),
                None => None,
            };
            let (still_needed, why) = match found {
                Some((what, Ok(()))) => (true, format!("the {what} still needs it")),
                Some((what, Err(stale))) => (false, stale_text(stale, what)),
                None => (true, "kept as it is (not a pod or PodGroup)".to_string()),
            };
            ReservedFor {
                kind: entry.resource.clone(),
                name: entry.name.clone(),
                uid: entry.uid.clone(),
                still_needed,
                why,
            }
        })
        .collect()
}

fn claim_of(stores: &Listed, ns: &str, name: &str) -> Result<Explanation, ExplainError> {
    let claim = stores
        .claim(ns, name)
        .ok_or_else(|| ExplainError::NotFound {
            kind: "ResourceClaim",
            name: format!("{ns}/{name}"),
        })?;
    let key = format!("{ns}/{name}");
    let plan = plan_claim(&key, &claim, stores, &Fetched::default(), stores.features);
    let mut after = (*claim).clone();
    let mut next = Vec::new();
    match &plan.release {
        Release::Nothing => {}
        Release::Status(status) => {
            let dropped =
                reserved_for(&claim).len() - status.reserved_for.as_ref().map_or(0, Vec::len);
            next.push(format!("release {dropped} reservation(s)"));
            if status.allocation.is_none()
                && claim
                    .status
                    .as_ref()
                    .is_some_and(|s| s.allocation.is_some())
            {
                next.push("deallocate".into());
            }
            after.status = Some(status.clone());
        }
        Release::Finalize { clear_allocation } => {
            if *clear_allocation {
                next.push("deallocate".into());
                if let Some(status) = after.status.as_mut() {
                    status.allocation = None;
                }
            }
            next.push("remove the finalizer (it is being deleted)".into());
        }
    }
    let mut problems: Vec<String> = plan.problems.iter().map(|p| p.message.clone()).collect();
    let mut diffs: Vec<Difference> = differences(&claim.status, &after.status);
    match plan_cleanup(&key, &after, stores) {
        Cleanup::Keep => {}
        Cleanup::Delete => {
            next.push("delete (its pod is done or was replaced)".into());
            diffs.push(Difference {
                field: "(object)".into(),
                stored: "exists".into(),
                desired: "deleted".into(),
            });
        }
        Cleanup::InUse(problem) => problems.push(problem.message),
    }
    let owner = claim
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map_or_else(|| "none".to_string(), |o| format!("{}/{}", o.kind, o.name));
    let in_sync = diffs.is_empty();
    Ok(Explanation {
        kind: "ResourceClaim",
        namespace: ns.to_string(),
        name: name.to_string(),
        in_sync,
        differences: diffs,
        next: if next.is_empty() {
            "keep".into()
        } else {
            next.join(", ")
        },
        reasons: Reasons::ResourceClaim(ClaimReasons {
            owner,
            allocated: claim
                .status
                .as_ref()
                .is_some_and(|s| s.allocation.is_some()),
            reserved_for: reservation(stores, ns, &claim),
            used_by: stores.pods_using(ns, name),
            problems,
        }),
    })
}

fn listed<'a>(reads: &'a Reads<'_>) -> Result<Listed<'a>, ExplainError> {
    if !reads.informers.is_started::<ResourceClaim>() {
        return Err(ExplainError::NotWatched("resourceclaims"));
    }
    Ok(Listed {
        informers: reads.informers,
        features: Features::of(reads.gates),
    })
}

pub fn explain_claim(reads: &Reads<'_>, ns: &str, name: &str) -> Result<Explanation, ExplainError> {
    claim_of(&listed(reads)?, ns, name)
}

pub fn explain_pod(reads: &Reads<'_>, ns: &str, name: &str) -> Result<Explanation, ExplainError> {
    let stores = listed(reads)?;
    let pod = stores.pod(ns, name).ok_or_else(|| ExplainError::NotFound {
        kind: "Pod",
        name: format!("{ns}/{name}"),
    })?;
    let mut claims = Vec::new();
    for entry in pod_claims(&pod) {
        let (claim, note) = match resolve(&pod, entry) {
            Ok(Resolved::Claim { name, .. }) => match claim_of(&stores, ns, name) {
                Ok(explained) => (Some(Box::new(explained)), None),
                Err(err) => (None, Some(err.to_string())),
            },
            Ok(Resolved::NotNeeded) => (None, Some("no claim is needed".into())),
            Err(err) => (None, Some(err.to_string())),
        };
        claims.push(PodClaim {
            entry: entry.name.clone(),
            claim,
            note,
        });
    }
    let mut steps = Vec::new();
    match plan_pod(&pod, &stores, stores.features) {
        Ok(None) => {}
        Ok(Some(plan)) => {
            for (entry, step) in plan.entries {
                steps.push(match step {
                    Ok(ClaimStep::Create(_)) => {
                        let template = pod_claims(&pod)
                            .iter()
                            .find(|c| c.name == entry)
                            .and_then(|c| c.resource_claim_template_name.clone())
                            .unwrap_or_default();
                        format!("create the claim of entry {entry} from template {template}")
                    }
                    Ok(ClaimStep::Record(claim)) => {
                        format!("record claim {claim} for entry {entry} in the pod's status")
                    }
                    Err(err) => format!("entry {entry}: {err}"),
                });
            }
        }
        Err(err) => steps.push(err.to_string()),
    }
    let reservations = plan_reservations(&pod, &stores, stores.features);
    for step in &reservations.steps {
        steps.push(match step {
            Reservation::Reserve { live, .. } => {
                format!("reserve claim {} for the pod", live.name_any())
            }
            Reservation::Full(problem) => problem.message.clone(),
        });
    }
    if let Err(err) = &reservations.outcome {
        steps.push(err.to_string());
    }
    let in_sync = steps.is_empty()
        && claims
            .iter()
            .all(|c| c.claim.as_ref().is_none_or(|e| e.in_sync));
    let mut differences = Vec::new();
    for claim in claims.iter().filter_map(|c| c.claim.as_ref()) {
        differences.extend(claim.differences.iter().map(|d| Difference {
            field: format!("resourceclaim {}: {}", claim.name, d.field),
            ..d.clone()
        }));
    }
    Ok(Explanation {
        kind: "Pod",
        namespace: ns.to_string(),
        name: name.to_string(),
        in_sync,
        differences,
        next: if steps.is_empty() {
            "nothing for the pod itself".into()
        } else {
            steps.join("; ")
        },
        reasons: Reasons::Pod(PodReasons { claims, steps }),
    })
}
