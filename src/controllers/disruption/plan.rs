//! The disruption controller's pure decisions. `trySync` as a plan: from a PDB, its matching
//! pods and (when the budget needs it) the controllers' scale, the status to write, the events
//! to record and when to look again, built from the status arithmetic of [`budget`]. No I/O:
//! `sync.rs` fetches the pods and the scale, and performs the plan.

pub mod budget;

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Resource, ResourceExt};

use self::budget::{BudgetError, count_healthy, disrupted_pods, expected_and_desired, new_status};
use super::messages;
use super::scale::{ExpectedScale, ScaleError};
use crate::k8s::selector::{self, Selector, SelectorError};
use crate::k8s::view::Pod;
use crate::runtime::writing::writer::UpstreamFix;

/// An event to record; events never block or fail a sync.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub regarding: ObjectReference,
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
}

impl Event {
    fn warning(regarding: ObjectReference, reason: &'static str, note: String) -> Self {
        Self {
            regarding,
            warning: true,
            reason,
            note,
        }
    }
}

/// Why a PDB's status cannot be computed; its text, upstream's, becomes the fail-safe
/// condition's message.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Selector(#[from] SelectorError),
    #[error(transparent)]
    Scale(#[from] ScaleError),
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

/// What one sync of a PDB is to do.
#[derive(Debug)]
pub struct BudgetPlan {
    pub events: Vec<Event>,
    /// The status to write (`None`: nothing changed), or why the budget cannot be computed
    /// (the fail-safe status is then written).
    pub status: Result<Option<PodDisruptionBudgetStatus>, PlanError>,
    /// When a disrupted-pod entry expires and the PDB must be synced again.
    pub recheck: Option<Duration>,
    /// The fix that makes this status differ from upstream's, if one does.
    pub fix: Option<UpstreamFix>,
}

impl BudgetPlan {
    fn failed(events: Vec<Event>, err: impl Into<PlanError>) -> Self {
        Self {
            events,
            status: Err(err.into()),
            recheck: None,
            fix: None,
        }
    }
}

/// The PDB's pod selector, or the failed plan when it does not parse.
pub fn pod_selector(pdb: &PodDisruptionBudget) -> Result<Selector, Box<BudgetPlan>> {
    let selector = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
    selector::from_label_selector(selector).map_err(|err| {
        let note = format!("Failed to get pods: {err}");
        let event = Event::warning(pdb.object_ref(&()), "NoPods", note);
        Box::new(BudgetPlan::failed(vec![event], err))
    })
}

/// The scale of the pods' controllers (`getExpectedScale`), or why it could not be found.
pub type Scale = Result<ExpectedScale, ScaleError>;

/// `trySync` once the pods matching the PDB are known, and the scale when
/// `needs_controller_scale` (`None` otherwise).
pub fn plan_budget(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    scale: Option<Scale>,
    now: &Time,
) -> BudgetPlan {
    let spec = pdb.spec.clone().unwrap_or_default();
    let pdb_ref = pdb.object_ref(&());
    let mut events = Vec::new();
    if pods.is_empty() {
        events.push(Event {
            regarding: pdb_ref.clone(),
            warning: false,
            reason: "NoPods",
            note: "No matching pods found".into(),
        });
    }
    let count_failed = |err: &dyn std::fmt::Display| {
        Event::warning(
            pdb_ref.clone(),
            "CalculateExpectedPodCountFailed",
            format!("Failed to calculate the number of expected pods: {err}"),
        )
    };
    let mut fix = None;
    let scale = match scale {
        None => None,
        Some(Ok(expected)) => {
            if !expected.unmanaged.is_empty() {
                let note = messages::unmanaged_pods(spec.selector.as_ref());
                events.push(Event::warning(pdb_ref.clone(), "UnmanagedPods", note));
            }
            fix = expected.divergence();
            Some(expected.total())
        }
        Some(Err(err)) => {
            events.push(count_failed(&err));
            return BudgetPlan::failed(events, err);
        }
    };
    let matching = i32::try_from(pods.len()).unwrap_or(i32::MAX);
    let (expected, desired_healthy) = match expected_and_desired(&spec, matching, scale) {
        Ok(counts) => counts,
        Err(err) => {
            events.push(count_failed(&err));
            return BudgetPlan::failed(events, err);
        }
    };
    let disrupted = disrupted_pods(pods, pdb.status.as_ref(), now);
    let pdb_ns = pdb.namespace().unwrap_or_default();
    for name in &disrupted.expired {
        if let Some(pod) = pods.iter().find(|p| &p.name_any() == name) {
            let note = messages::not_deleted(&pdb_ns);
            events.push(Event::warning(pod.object_ref(), "NotDeleted", note));
        }
    }
    let healthy = count_healthy(pods, &disrupted.map, now);
    let status = new_status(pdb, healthy, desired_healthy, expected, &disrupted.map, now);
    BudgetPlan {
        events,
        status: Ok(status),
        recheck: disrupted.recheck_at.map(|at| {
            let wait = at.0.duration_since(now.0);
            Duration::try_from(wait).unwrap_or_default()
        }),
        fix,
    }
}

#[cfg(test)]
mod tests;
