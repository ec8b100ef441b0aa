//! `trySync`'s plan from plain objects: the events (reason, object and upstream's text), the
//! status written or the failure that makes the fail-safe status, and the recheck delay.

use serde_json::{Value, json};

use super::*;
use crate::controllers::disruption::plan::budget::{BOTH_SET, needs_controller_scale};
use crate::controllers::disruption::scale::TERMINATING_POD_WITHOUT_CONTROLLER;

const NOW: &str = "2026-01-01T00:00:00Z";

fn at(ts: &str) -> Time {
    Time(ts.parse().expect("timestamp"))
}

fn now() -> Time {
    at(NOW)
}

/// The text of a failed plan's error (what the fail-safe condition carries).
fn failure(plan: &BudgetPlan) -> String {
    plan.status.as_ref().expect_err("a failed plan").to_string()
}

/// One ReplicaSet wanting `replicas`, and the pods no controller owns.
fn scale(replicas: i32, unmanaged: &[&str]) -> ExpectedScale {
    ExpectedScale {
        controllers: vec![crate::controllers::disruption::scale::ControllerScale {
            kind: "ReplicaSet".into(),
            name: "rs".into(),
            replicas,
        }],
        unmanaged: unmanaged.iter().map(|n| n.to_string()).collect(),
        controller_gone: vec![],
    }
}

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("valid test object")
}

fn pdb(spec: Value, status: Value) -> PodDisruptionBudget {
    from(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": { "name": "budget", "namespace": "ns", "generation": 1, "uid": "pdb-uid" },
        "spec": spec,
        "status": status,
    }))
}

fn ready_pod(name: &str) -> Pod {
    let pod: k8s_openapi::api::core::v1::Pod = from(json!({
        "metadata": { "name": name, "namespace": "ns", "uid": format!("{name}-uid"), "labels": { "app": "web" } },
        "status": { "conditions": [{ "type": "Ready", "status": "True" }] },
    }));
    Pod::from(&pod)
}

/// An [`events`] entry about the test's PDB, `budget`.
fn on_budget(reason: &str, warning: bool, note: String) -> (&str, bool, String, String, String) {
    (
        reason,
        warning,
        "PodDisruptionBudget".into(),
        "budget".into(),
        note,
    )
}

/// (reason, warning, kind and name of the object, note).
fn events(plan: &BudgetPlan) -> Vec<(&str, bool, String, String, String)> {
    plan.events
        .iter()
        .map(|e| {
            (
                e.reason,
                e.warning,
                e.regarding.kind.clone().unwrap_or_default(),
                e.regarding.name.clone().unwrap_or_default(),
                e.note.clone(),
            )
        })
        .collect()
}

fn counts(
    status: &PodDisruptionBudgetStatus,
) -> (Option<i32>, Option<i32>, Option<i32>, Option<i32>) {
    (
        status.disruptions_allowed,
        status.current_healthy,
        status.desired_healthy,
        status.expected_pods,
    )
}

#[test]
fn an_invalid_selector_fails_with_a_no_pods_warning() {
    let pdb = pdb(
        json!({ "minAvailable": 1, "selector": { "matchExpressions": [{ "key": "app", "operator": "Near" }] } }),
        json!(null),
    );
    let Err(plan) = pod_selector(&pdb) else {
        panic!("the selector must not parse");
    };
    let err = r#""Near" is not a valid label selector operator"#;
    assert_eq!(failure(&plan), err);
    assert_eq!(
        events(&plan),
        [on_budget(
            "NoPods",
            true,
            format!("Failed to get pods: {err}")
        )]
    );
}

#[test]
fn no_pods_is_a_normal_event_and_a_status() {
    let pdb = pdb(json!({ "minAvailable": 1, "selector": {} }), json!(null));
    let plan = plan_budget(&pdb, &[], None, &now());
    assert_eq!(
        events(&plan),
        [on_budget(
            "NoPods",
            false,
            "No matching pods found".to_string()
        )]
    );
    let status = plan.status.unwrap().expect("a first status");
    assert_eq!(counts(&status), (Some(0), Some(0), Some(1), Some(0)));
    assert_eq!(plan.recheck, None);
}

#[test]
fn unmanaged_pods_are_a_warning_and_the_scale_counts() {
    let pdb = pdb(
        json!({ "maxUnavailable": 1, "selector": { "matchLabels": { "app": "web" } } }),
        json!(null),
    );
    assert!(needs_controller_scale(pdb.spec.as_ref().unwrap()));
    let pods = [ready_pod("a"), ready_pod("b"), ready_pod("c")];
    let refs: Vec<&Pod> = pods.iter().collect();
    let plan = plan_budget(&pdb, &refs, Some(Ok(scale(4, &["c"]))), &now());
    assert_eq!(
        events(&plan),
        [on_budget(
            "UnmanagedPods",
            true,
            messages::unmanaged_pods(pdb.spec.as_ref().unwrap().selector.as_ref())
        )]
    );
    // expected 4 (the scale), desired 3, healthy 3: no disruption allowed.
    let status = plan.status.unwrap().expect("a first status");
    assert_eq!(counts(&status), (Some(0), Some(3), Some(3), Some(4)));
}

#[test]
fn a_scale_that_cannot_be_found_fails_with_a_warning() {
    let pdb = pdb(
        json!({ "maxUnavailable": "50%", "selector": {} }),
        json!(null),
    );
    let pods = [ready_pod("a")];
    let refs: Vec<&Pod> = pods.iter().collect();
    let no_controller = ScaleError::NoController { pod: "a".into() };
    let plan = plan_budget(&pdb, &refs, Some(Err(no_controller)), &now());
    let err = r#"found no controllers for pod "a""#;
    assert_eq!(failure(&plan), err);
    assert_eq!(
        events(&plan),
        [on_budget(
            "CalculateExpectedPodCountFailed",
            true,
            format!("Failed to calculate the number of expected pods: {err}")
        )]
    );
}

/// kubernetes#130723: a rollout deleted the old ReplicaSet while its pod "old" terminates.
/// Upstream fails the sync (`found no controllers for pod "old"`, the fail-safe status, every
/// eviction refused); kcm counts "old" with scale 0, as upstream does while the old
/// ReplicaSet exists at 0 replicas, and computes the budget from the pods that remain.
#[test]
fn a_terminating_pod_whose_controller_is_gone_does_not_block_the_budget() {
    let pdb = pdb(
        json!({ "maxUnavailable": 1, "selector": { "matchLabels": { "app": "web" } } }),
        json!(null),
    );
    let mut old = ready_pod("old");
    old.metadata.deletion_timestamp = Some(now());
    let pods = [ready_pod("a"), ready_pod("b"), ready_pod("c"), old];
    let refs: Vec<&Pod> = pods.iter().collect();
    // The new ReplicaSet's Deployment wants 3; "old" adds nothing.
    let scale = ExpectedScale {
        controller_gone: vec!["old".into()],
        ..scale(3, &[])
    };
    let plan = plan_budget(&pdb, &refs, Some(Ok(scale)), &now());
    assert!(
        events(&plan).is_empty(),
        "no CalculateExpectedPodCountFailed"
    );
    // expected 3, desired 2, healthy 3 (the terminating pod is not healthy): one may go.
    let status = plan.status.unwrap().expect("a first status");
    assert_eq!(counts(&status), (Some(1), Some(3), Some(2), Some(3)));
    assert_eq!(plan.fix, Some(TERMINATING_POD_WITHOUT_CONTROLLER));
}

#[test]
fn both_limits_fail_with_a_warning() {
    let pdb = pdb(
        json!({ "minAvailable": 1, "maxUnavailable": 1, "selector": {} }),
        json!(null),
    );
    let pods = [ready_pod("a")];
    let refs: Vec<&Pod> = pods.iter().collect();
    let plan = plan_budget(&pdb, &refs, Some(Ok(scale(1, &[]))), &now());
    assert_eq!(failure(&plan), BOTH_SET);
    assert_eq!(plan.events[0].reason, "CalculateExpectedPodCountFailed");
    assert_eq!(
        plan.events[0].note,
        format!("Failed to calculate the number of expected pods: {BOTH_SET}")
    );
}

#[test]
fn disrupted_pods_expire_with_a_warning_or_set_the_recheck() {
    // "a" was disrupted 3 minutes ago (past the 2-minute timeout), "b" 30 seconds ago.
    let status = json!({
        "disruptedPods": { "a": "2025-12-31T23:57:00Z", "b": "2025-12-31T23:59:30Z" },
        "observedGeneration": 1,
    });
    let pdb = pdb(json!({ "minAvailable": 1, "selector": {} }), status);
    let pods = [ready_pod("a"), ready_pod("b")];
    let refs: Vec<&Pod> = pods.iter().collect();
    let plan = plan_budget(&pdb, &refs, None, &now());
    assert_eq!(
        events(&plan),
        [(
            "NotDeleted",
            true,
            "Pod".into(),
            "a".into(),
            "Pod was expected by PDB ns/ns to be deleted but it wasn't".into()
        )]
    );
    // "b" expires at 00:01:30.
    assert_eq!(plan.recheck, Some(Duration::from_secs(90)));
    let status = plan.status.unwrap().expect("a status");
    // "b" is still disrupted: one healthy pod, none may go.
    assert_eq!(counts(&status), (Some(0), Some(1), Some(1), Some(2)));
    let kept: Vec<&String> = status
        .disrupted_pods
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(kept, ["b"]);
}

#[test]
fn a_status_already_written_is_not_written_again() {
    let pdb = pdb(json!({ "minAvailable": 1, "selector": {} }), json!(null));
    let pods = [ready_pod("a"), ready_pod("b")];
    let refs: Vec<&Pod> = pods.iter().collect();
    let first = plan_budget(&pdb, &refs, None, &now());
    let mut written = pdb.clone();
    written.status = first.status.unwrap();
    assert!(written.status.is_some());
    let again = plan_budget(&written, &refs, None, &now());
    assert!(matches!(again.status, Ok(None)));
    assert!(again.events.is_empty());
}
