//! upstream's `TestSyncResourceQuota` (pkg/controller/resourcequota/
//! resource_quota_controller_test.go), every case, driving the real `plan_sync` with the real
//! evaluators over plain objects instead of listers. Each case checks, as upstream: whether
//! the sync writes a status (upstream's update action), the written `status.hard` and
//! `status.used` as exact strings (upstream compares `Quantity.String()` and the list
//! lengths), and the error it fails with.
//!
//! Ported cases: `non-matching-best-effort-scoped-quota`, `matching-best-effort-scoped-quota`,
//! `non-matching-priorityclass-scoped-quota-OpExists`,
//! `matching-priorityclass-scoped-quota-OpExists`, `matching-priorityclass-scoped-quota-OpIn`,
//! `matching-priorityclass-scoped-quota-OpIn-high`,
//! `matching-priorityclass-scoped-quota-OpIn-low`,
//! `matching-priorityclass-scoped-quota-OpNotIn-low`,
//! `non-matching-priorityclass-scoped-quota-OpIn`,
//! `non-matching-priorityclass-scoped-quota-OpNotIn`,
//! `matching-priorityclass-scoped-quota-OpDoesNotExist`, `pods`, `quota-spec-hard-updated`,
//! `quota-unchanged`, `quota-missing-status-with-calculation-error`,
//! `quota-missing-status-with-partial-calculation-error`.
//!
//! Adapted: upstream's two calculation-error cases give the pod evaluator a lister whose
//! `List` fails with "error listing"; here the registry holds a pod evaluator whose usage
//! fails with the one error a kcm evaluator has, a count not known yet (kcm's evaluators
//! read stores, which cannot fail), and the
//! `configmaps` lister of the partial case is a synced object count with no configmaps.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ResourceQuota;
use serde_json::{Value, json};

use super::super::evaluator::object_count::ObjectCount;
use super::super::evaluator::persistentvolumeclaims::PersistentVolumeClaims;
use super::super::evaluator::pods::Pods;
use super::super::evaluator::resourceclaims::ResourceClaims;
use super::super::evaluator::services::Services;
use super::super::evaluator::{AnyEvaluator, Evaluator, EvaluatorInputs};
use super::super::registry::{IncrementalEvaluator, Objects};
use super::super::scope::QuotaScope;
use super::super::testing::{from, now};
use super::super::usage::Usage;
use super::*;
use crate::controllers::joined;
use crate::k8s::view::Pod;
use crate::runtime::watching::counter::ObjectCounter;
use crate::runtime::watching::stored::Stored;

/// A type's objects as a plain list instead of an informer.
struct Listed<K>(Vec<Arc<K>>);

impl<K: Stored> Objects<K> for Listed<K> {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let found = self.0.iter().find(|o| o.place() == (namespace, name));
        found.cloned()
    }

    fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        let objects = self.0.iter();
        let objects = objects.filter(|o| o.place().0 == namespace);
        objects.cloned().collect()
    }
}

/// The real evaluator `E`, with its real usage totals, over `objects`.
fn listed<E: Evaluator>(objects: Vec<E::Object>) -> Arc<dyn AnyEvaluator> {
    IncrementalEvaluator::<E>::over(
        E::default(),
        Arc::new(Listed(objects.into_iter().map(Arc::new).collect())),
    )
}

/// An evaluator that covers what `of` covers and cannot compute it yet (upstream's
/// `errorLister`).
struct Failing {
    of: Arc<dyn AnyEvaluator>,
}

impl AnyEvaluator for Failing {
    fn matching(&self, names: &[String], at: &EvaluatorInputs) -> Vec<String> {
        self.of.matching(names, at)
    }

    fn usage(
        &self,
        _: &str,
        _: &QuotaScope,
        names: &[String],
        _: &EvaluatorInputs,
    ) -> Result<Usage, UsageError> {
        Err(UsageError::CountNotKnown {
            names: names.to_vec(),
        })
    }

    fn listed(&self) -> bool {
        false
    }
}

/// The registry of a case, in upstream's order: the typed evaluators, the pods listed (or
/// failing), then the object counts.
fn registry(
    pods: Option<Vec<Pod>>,
    counts: Vec<Arc<dyn AnyEvaluator>>,
) -> Vec<Arc<dyn AnyEvaluator>> {
    let pod_evaluator = match pods {
        Some(pods) => listed::<Pods>(pods),
        None => Arc::new(Failing {
            of: listed::<Pods>(Vec::new()),
        }),
    };
    let mut evaluators = vec![
        pod_evaluator,
        listed::<Services>(Vec::new()),
        listed::<PersistentVolumeClaims>(Vec::new()),
        listed::<ResourceClaims>(Vec::new()),
    ];
    evaluators.extend(counts);
    evaluators
}

fn configmap_count() -> Arc<dyn AnyEvaluator> {
    Arc::new(ObjectCount::new(
        "",
        "configmaps",
        ObjectCounter::listed(&[]),
    ))
}

/// upstream's `getResourceRequirements(getResourceList(cpu, memory), getResourceList("", ""))`.
fn pod(name: &str, phase: &str, cpu: &str, memory: &str, priority_class: Option<&str>) -> Pod {
    let mut requests = serde_json::Map::new();
    if !cpu.is_empty() {
        requests.insert("cpu".into(), json!(cpu));
    }
    if !memory.is_empty() {
        requests.insert("memory".into(), json!(memory));
    }
    let mut spec = json!({
        "volumes": [{ "name": "vol" }],
        "containers": [{ "name": "ctr", "image": "image", "resources": { "requests": requests } }],
    });
    if let Some(class) = priority_class {
        spec["priorityClassName"] = json!(class);
    }
    from(json!({
        "metadata": { "name": name, "namespace": "testing" },
        "spec": spec,
        "status": { "phase": phase },
    }))
}

/// upstream's `newTestPods`.
fn test_pods() -> Vec<Pod> {
    vec![
        pod("pod-running", "Running", "100m", "1Gi", None),
        pod("pod-running-2", "Running", "100m", "1Gi", None),
        pod("pod-failed", "Failed", "100m", "1Gi", None),
    ]
}

/// upstream's `newBestEffortTestPods`.
fn best_effort_test_pods() -> Vec<Pod> {
    vec![
        pod("pod-running", "Running", "", "", None),
        pod("pod-running-2", "Running", "", "", None),
        pod("pod-failed", "Failed", "100m", "1Gi", None),
    ]
}

/// upstream's `newTestPodsWithPriorityClasses`.
fn test_pods_with_priority_classes() -> Vec<Pod> {
    vec![
        pod("pod-running", "Running", "500m", "50Gi", Some("high")),
        pod("pod-running-2", "Running", "100m", "1Gi", Some("low")),
        pod("pod-failed", "Failed", "100m", "1Gi", None),
    ]
}

/// The quota `testing/quota` (cpu 3, memory 100Gi, pods 5) with `scope` in its spec.
fn testing_quota(scope: Value) -> ResourceQuota {
    let mut spec = json!({ "hard": { "cpu": "3", "memory": "100Gi", "pods": "5" } });
    if let (Some(spec), Some(scope)) = (spec.as_object_mut(), scope.as_object()) {
        spec.extend(scope.clone());
    }
    from(json!({ "metadata": { "name": "quota", "namespace": "testing" }, "spec": spec }))
}

fn priority_class(operator: &str, values: &[&str]) -> Value {
    let mut expression = json!({ "scopeName": "PriorityClass", "operator": operator });
    if !values.is_empty() {
        expression["values"] = json!(values);
    }
    json!({ "scopeSelector": { "matchExpressions": [expression] } })
}

/// The quota `default/rq` with `spec.hard` and `status`.
fn rq(hard: Value, status: Value) -> ResourceQuota {
    from(json!({
        "metadata": { "name": "rq", "namespace": "default" },
        "spec": { "hard": hard },
        "status": status,
    }))
}

type List = BTreeMap<String, String>;

fn list(pairs: &[(&str, &str)]) -> List {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn testing_hard() -> List {
    list(&[("cpu", "3"), ("memory", "100Gi"), ("pods", "5")])
}

fn used3(cpu: &str, memory: &str, pods: &str) -> List {
    list(&[("cpu", cpu), ("memory", memory), ("pods", pods)])
}

/// One row of upstream's table.
struct Case {
    name: &'static str,
    quota: ResourceQuota,
    evaluators: Vec<Arc<dyn AnyEvaluator>>,
    /// The status written (upstream's `status`); `None`: no update action at all.
    status: Option<(List, List)>,
    /// What the error contains (upstream's `expectedError`); empty: no error.
    error: &'static str,
}

fn strings(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> List {
    list.into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

fn check(case: Case) {
    let plan = plan_sync(&case.quota, &case.evaluators, &EvaluatorInputs::at(now()));
    let written = plan
        .status
        .as_ref()
        .map(|s| (strings(s.hard.as_ref()), strings(s.used.as_ref())));
    assert_eq!(written, case.status, "{}: status written", case.name);
    let errors = joined(&plan.errors);
    if case.error.is_empty() {
        assert!(
            errors.is_empty(),
            "{}: unexpected error {errors}",
            case.name
        );
    } else {
        assert!(
            errors.contains(case.error),
            "{}: error {errors:?} does not contain {:?}",
            case.name,
            case.error
        );
    }
}

fn pods_case(name: &'static str, pods: Vec<Pod>, scope: Value, used: List) -> Case {
    Case {
        name,
        quota: testing_quota(scope),
        evaluators: registry(Some(pods), Vec::new()),
        status: Some((testing_hard(), used)),
        error: "",
    }
}

#[test]
fn sync_resource_quota_scoped_and_unscoped_pods() {
    let cases = [
        pods_case(
            "non-matching-best-effort-scoped-quota",
            test_pods(),
            json!({ "scopes": ["BestEffort"] }),
            used3("0", "0", "0"),
        ),
        pods_case(
            "matching-best-effort-scoped-quota",
            best_effort_test_pods(),
            json!({ "scopes": ["BestEffort"] }),
            used3("0", "0", "2"),
        ),
        pods_case(
            "non-matching-priorityclass-scoped-quota-OpExists",
            test_pods(),
            priority_class("Exists", &[]),
            used3("0", "0", "0"),
        ),
        pods_case(
            "matching-priorityclass-scoped-quota-OpExists",
            test_pods_with_priority_classes(),
            priority_class("Exists", &[]),
            used3("600m", "51Gi", "2"),
        ),
        pods_case(
            "matching-priorityclass-scoped-quota-OpIn",
            test_pods_with_priority_classes(),
            priority_class("In", &["high", "low"]),
            used3("600m", "51Gi", "2"),
        ),
        pods_case(
            "matching-priorityclass-scoped-quota-OpIn-high",
            test_pods_with_priority_classes(),
            priority_class("In", &["high"]),
            used3("500m", "50Gi", "1"),
        ),
        pods_case(
            "matching-priorityclass-scoped-quota-OpIn-low",
            test_pods_with_priority_classes(),
            priority_class("In", &["low"]),
            used3("100m", "1Gi", "1"),
        ),
        pods_case(
            "matching-priorityclass-scoped-quota-OpNotIn-low",
            test_pods_with_priority_classes(),
            priority_class("NotIn", &["high"]),
            used3("100m", "1Gi", "1"),
        ),
        pods_case(
            "non-matching-priorityclass-scoped-quota-OpIn",
            test_pods_with_priority_classes(),
            priority_class("In", &["random"]),
            used3("0", "0", "0"),
        ),
        pods_case(
            "non-matching-priorityclass-scoped-quota-OpNotIn",
            test_pods(),
            priority_class("NotIn", &["random"]),
            used3("200m", "2Gi", "2"),
        ),
        pods_case(
            "matching-priorityclass-scoped-quota-OpDoesNotExist",
            test_pods(),
            priority_class("DoesNotExist", &[]),
            used3("200m", "2Gi", "2"),
        ),
        pods_case("pods", test_pods(), json!({}), used3("200m", "2Gi", "2")),
    ];
    for case in cases {
        check(case);
    }
}

#[test]
fn sync_resource_quota_spec_hard_updated() {
    check(Case {
        name: "quota-spec-hard-updated",
        quota: rq(
            json!({ "cpu": "4" }),
            json!({ "hard": { "cpu": "3" }, "used": { "cpu": "0" } }),
        ),
        evaluators: registry(Some(Vec::new()), Vec::new()),
        status: Some((list(&[("cpu", "4")]), list(&[("cpu", "0")]))),
        error: "",
    });
}

#[test]
fn sync_resource_quota_unchanged() {
    // upstream's name: usage is unchanged, but status.hard lags the spec, so it is written.
    check(Case {
        name: "quota-unchanged",
        quota: rq(json!({ "cpu": "4" }), json!({ "hard": { "cpu": "0" } })),
        evaluators: registry(Some(Vec::new()), Vec::new()),
        status: Some((list(&[("cpu", "4")]), list(&[("cpu", "0")]))),
        error: "",
    });
}

#[test]
fn sync_resource_quota_missing_status_with_calculation_error() {
    // The status is written all the same: the limits, and no usage for the failed names.
    check(Case {
        name: "quota-missing-status-with-calculation-error",
        quota: rq(json!({ "pods": "1" }), json!({})),
        evaluators: registry(None, Vec::new()),
        status: Some((list(&[("pods", "1")]), list(&[]))),
        error: "the count of pods is not known yet",
    });
}

#[test]
fn sync_resource_quota_missing_status_with_partial_calculation_error() {
    check(Case {
        name: "quota-missing-status-with-partial-calculation-error",
        quota: rq(json!({ "pods": "1", "configmaps": "1" }), json!({})),
        evaluators: registry(None, vec![configmap_count()]),
        status: Some((
            list(&[("configmaps", "1"), ("pods", "1")]),
            list(&[("configmaps", "0")]),
        )),
        error: "the count of pods is not known yet",
    });
}

/// kubernetes#133737: a status written while a counted type is not listed is one upstream
/// would not write (its workers wait for every type), so it is marked; without a failing
/// type, or with nothing to write, it is not.
#[test]
fn a_status_written_while_a_type_is_not_listed_is_marked_as_the_fix() {
    let quota = rq(json!({ "pods": "1", "configmaps": "1" }), json!({}));
    let plan = plan_sync(
        &quota,
        &registry(None, vec![configmap_count()]),
        &EvaluatorInputs::at(now()),
    );
    assert!(plan.status.is_some());
    assert_eq!(plan.fix, Some(QUOTAS_KEPT_WHILE_A_TYPE_FAILS));
    let listed = registry(Some(Vec::new()), vec![configmap_count()]);
    let plan = plan_sync(&quota, &listed, &EvaluatorInputs::at(now()));
    assert!(plan.status.is_some());
    assert_eq!(plan.fix, None);
    let mut written = quota.clone();
    written.status = plan.status;
    let plan = plan_sync(
        &written,
        &registry(None, vec![configmap_count()]),
        &EvaluatorInputs::at(now()),
    );
    assert_eq!((plan.status, plan.fix), (None, None));
}

#[test]
fn sync_resource_quota_in_sync_writes_nothing() {
    // upstream's older TestSyncResourceQuotaNoChange: no update action when nothing is dirty.
    check(Case {
        name: "no-change",
        quota: rq(
            json!({ "cpu": "4" }),
            json!({ "hard": { "cpu": "4" }, "used": { "cpu": "0" } }),
        ),
        evaluators: registry(Some(Vec::new()), Vec::new()),
        status: None,
        error: "",
    });
}

#[test]
fn a_failed_evaluator_keeps_the_previous_usage_of_its_names() {
    let quota = rq(
        json!({ "pods": "2", "configmaps": "1" }),
        json!({ "hard": { "pods": "2", "configmaps": "1" }, "used": { "pods": "1", "configmaps": "3" } }),
    );
    check(Case {
        name: "previous usage kept",
        quota,
        evaluators: registry(None, vec![configmap_count()]),
        status: Some((
            list(&[("configmaps", "1"), ("pods", "2")]),
            list(&[("configmaps", "0"), ("pods", "1")]),
        )),
        error: "the count of pods is not known yet",
    });
}

#[test]
fn bad_limits_and_selectors_are_reported_and_still_copied() {
    let quota: ResourceQuota = from(json!({
        "metadata": { "name": "q", "namespace": "testing" },
        "spec": {
            "hard": { "pods": "lots" },
            "scopeSelector": { "matchExpressions": [
                { "scopeName": "PriorityClass", "operator": "In" },
            ]},
        },
    }));
    let plan = plan_sync(
        &quota,
        &registry(Some(test_pods()), Vec::new()),
        &EvaluatorInputs::at(now()),
    );
    let reasons: Vec<&str> = plan.problems.iter().map(|(reason, _)| *reason).collect();
    assert_eq!(reasons, ["invalid-scope-selector", "invalid-quantity"]);
    assert!(
        plan.problems[1]
            .1
            .starts_with(r#"spec.hard[pods]: invalid quantity "lots": "#),
        "{:?}",
        plan.problems
    );
    let status = plan.status.expect("a first status");
    assert_eq!(strings(status.hard.as_ref()), list(&[("pods", "lots")]));
}
