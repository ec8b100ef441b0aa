//! A PodDisruptionBudget: the disruption controller's plan (`plan_budget`, or the fail-safe
//! status), each selected pod as `countHealthyPods` sees it, where `expectedPods` comes from
//! and the arithmetic of `desiredHealthy` and `disruptionsAllowed`.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;

use super::{Difference, ExplainError, Explanation, Reads, Reasons, differences};
use crate::controllers::disruption::plan::budget::{
    BudgetError, Unhealthy, disrupted_pods, fail_safe_status, needs_controller_scale, pod_health,
    scaled_value,
};
use crate::controllers::disruption::plan::{PlanError, plan_budget, pod_selector};
use crate::controllers::disruption::scale::{
    ControllerScale, ExpectedScale, ScaleError, ScaleFinder,
};
use crate::k8s::view::Pod;

/// One selected pod.
#[derive(Debug, Clone, Serialize)]
pub struct PodCount {
    pub name: String,
    pub healthy: bool,
    /// Why it is not counted healthy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Its controller (`Kind/name`), or `none`.
    pub owner: String,
}

/// When kcm cannot compute the status and writes `disruptionsAllowed: 0`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailSafe {
    /// The condition's message: upstream's text of the failure.
    pub reason: String,
    pub ends_when: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PdbReasons {
    pub pods: Vec<PodCount>,
    pub expected_pods: i32,
    pub expected_from: String,
    pub controllers: Vec<ControllerScale>,
    /// Selected pods no controller owns.
    pub unmanaged: Vec<String>,
    /// Terminating pods whose controller is gone, counted with scale 0 where upstream fails
    /// the budget (kubernetes#130723).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub controller_gone: Vec<String>,
    /// How `desiredHealthy` and `disruptionsAllowed` come about.
    pub arithmetic: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_safe: Option<FailSafe>,
}

fn owner_of(pod: &Pod) -> String {
    match pod.controller() {
        Some(owner) => format!("{}/{}", owner.kind, owner.name),
        None => "none".into(),
    }
}

fn unhealthy_text(why: &Unhealthy) -> String {
    match why {
        Unhealthy::Terminating => "terminating".into(),
        Unhealthy::NotReady => "not ready".into(),
        Unhealthy::Disrupted { until } => {
            format!("evicted (in disruptedPods): not counted until {until}")
        }
    }
}

/// What would end a fail-safe status.
fn ends_when(err: &PlanError) -> String {
    match err {
        PlanError::Selector(_) => "spec.selector is a valid label selector".into(),
        PlanError::Scale(ScaleError::NoController { pod }) => format!(
            "pod {pod}'s controller exists (or the pod is deleted, or loses its owner reference)"
        ),
        PlanError::Scale(_) => {
            "the scale of the pods' controller can be read (its /scale subresource)".into()
        }
        PlanError::Budget(BudgetError::BothSet) => {
            "only one of minAvailable and maxUnavailable is set".into()
        }
        PlanError::Budget(_) => {
            "minAvailable / maxUnavailable is a valid count or percentage".into()
        }
    }
}

fn show(value: &IntOrString) -> String {
    match value {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// How the counts of `status` come from the spec.
fn arithmetic(pdb: &PodDisruptionBudget, status: &PodDisruptionBudgetStatus) -> Vec<String> {
    let spec = pdb.spec.clone().unwrap_or_default();
    let expected = status.expected_pods.unwrap_or(0);
    let desired = status.desired_healthy.unwrap_or(0);
    let healthy = status.current_healthy.unwrap_or(0);
    let allowed = status.disruptions_allowed.unwrap_or(0);
    let mut lines = Vec::new();
    match (&spec.max_unavailable, &spec.min_available) {
        (Some(IntOrString::Int(max)), _) => lines.push(format!(
            "desiredHealthy = expectedPods {expected} - maxUnavailable {max} = {desired}"
        )),
        (Some(max), _) => {
            let unavailable = scaled_value(max, expected, true).unwrap_or(0);
            lines.push(format!(
                "desiredHealthy = expectedPods {expected} - maxUnavailable {} of {expected} rounded up ({unavailable}) = {desired}",
                show(max)
            ));
        }
        (None, Some(IntOrString::Int(min))) => {
            lines.push(format!("desiredHealthy = minAvailable = {min}"));
        }
        (None, Some(percent)) => lines.push(format!(
            "desiredHealthy = minAvailable {} of expectedPods {expected}, rounded up = {desired}",
            show(percent)
        )),
        (None, None) => {
            lines.push("desiredHealthy = 0 (neither minAvailable nor maxUnavailable)".into())
        }
    }
    let difference = healthy.wrapping_sub(desired);
    let mut line = format!(
        "disruptionsAllowed = currentHealthy {healthy} - desiredHealthy {desired} = {difference}"
    );
    if expected <= 0 {
        line.push_str(&format!(" -> {allowed} (expectedPods is 0)"));
    } else if difference != allowed {
        line.push_str(&format!(" -> {allowed} (never below 0)"));
    }
    lines.push(line);
    lines
}

pub async fn explain(reads: &Reads<'_>, ns: &str, name: &str) -> Result<Explanation, ExplainError> {
    let informers = reads.informers;
    let pdb = informers
        .get::<PodDisruptionBudget>()
        .store()
        .get(ns, name)
        .ok_or_else(|| ExplainError::NotFound {
            kind: "PodDisruptionBudget",
            name: format!("{ns}/{name}"),
        })?;
    let now = &reads.now;
    let spec = pdb.spec.clone().unwrap_or_default();
    let mut pods: Vec<Arc<Pod>> = Vec::new();
    let mut scale_found = ExpectedScale::default();
    let plan = match pod_selector(&pdb) {
        Err(failed) => *failed,
        Ok(selector) => {
            pods = informers.get::<Pod>().in_namespace(ns);
            pods.retain(|p| selector.matches(&p.labels));
            pods.sort_by_key(|p| p.name_any());
            let refs: Vec<&Pod> = pods.iter().map(Arc::as_ref).collect();
            let scale = if needs_controller_scale(&spec) {
                let finder = ScaleFinder::new(
                    reads.client.clone(),
                    informers.get::<ReplicationController>().store().clone(),
                    informers.get::<ReplicaSet>().store().clone(),
                    informers.get::<Deployment>().store().clone(),
                    informers.get::<StatefulSet>().store().clone(),
                );
                let scale = finder.expected_scale(&refs).await;
                if let Ok(found) = &scale {
                    scale_found = found.clone();
                }
                Some(scale)
            } else {
                None
            };
            plan_budget(&pdb, &refs, scale, now)
        }
    };
    let stored = pdb.status.clone().unwrap_or_default();
    let (desired, fail_safe) = match &plan.status {
        Ok(status) => (status.clone().unwrap_or_else(|| stored.clone()), None),
        Err(err) => {
            let reason = err.to_string();
            let status = fail_safe_status(&pdb, &reason, now).unwrap_or_else(|| stored.clone());
            let ends_when = ends_when(err);
            (status, Some(FailSafe { reason, ends_when }))
        }
    };
    let disrupted = disrupted_pods(
        &pods.iter().map(Arc::as_ref).collect::<Vec<_>>(),
        pdb.status.as_ref(),
        now,
    );
    let counts = pods
        .iter()
        .map(|pod| {
            let health = pod_health(pod, &disrupted.map, now);
            PodCount {
                name: pod.name_any(),
                healthy: health.is_ok(),
                why: health.err().as_ref().map(unhealthy_text),
                owner: owner_of(pod),
            }
        })
        .collect();
    let expected_from = match (&spec.max_unavailable, &spec.min_available) {
        (None, Some(IntOrString::Int(_))) => {
            "the selected pods (minAvailable is a number)".to_string()
        }
        (None, None) => "nothing (neither minAvailable nor maxUnavailable)".to_string(),
        _ => "the scale of the pods' controllers".to_string(),
    };
    let diffs: Vec<Difference> = differences(&pdb.status, &Some(&desired));
    let in_sync = diffs.is_empty();
    let next = if in_sync {
        "keep the status".to_string()
    } else {
        "write the status".to_string()
    };
    Ok(Explanation {
        kind: "PodDisruptionBudget",
        namespace: ns.to_string(),
        name: name.to_string(),
        in_sync,
        differences: diffs,
        next,
        reasons: Reasons::PodDisruptionBudget(PdbReasons {
            pods: counts,
            expected_pods: desired.expected_pods.unwrap_or(0),
            expected_from,
            controllers: scale_found.controllers,
            unmanaged: scale_found.unmanaged,
            controller_gone: scale_found.controller_gone,
            arithmetic: if fail_safe.is_some() {
                Vec::new()
            } else {
                arithmetic(&pdb, &desired)
            },
            fail_safe,
        }),
    })
}
