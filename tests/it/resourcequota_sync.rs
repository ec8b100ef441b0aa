//! upstream's `TestSyncResourceQuota` table (pkg/controller/resourcequota/
//! resource_quota_controller_test.go), case by case, against kube-testserver: the same pods and
//! quota (with its pre-existing status, if the case has one) are seeded into a fresh server,
//! kcm runs with only the resourcequota controller, and `status.hard` / `status.used` must
//! become upstream's expected lists exactly — same names, same strings.
//!
//! Upstream calls `syncResourceQuota` once against fake listers; here the real controller
//! computes from its watch caches, so each case waits (with a deadline) for the written status.
//! Objects are seeded, not created: like upstream's fake listers this bypasses API validation
//! (a real API server rejects `cpu`/`memory` under the `BestEffort` scope, and would want the
//! priority classes to exist).
//!
//! Not run here — a server cannot reproduce them faithfully; they are ported as unit tests of
//! the planning code instead (src/controllers/resourcequota/plan/tests.rs), with an evaluator
//! whose usage fails:
//! - `quota-missing-status-with-calculation-error` and
//!   `quota-missing-status-with-partial-calculation-error`: upstream gives the pod evaluator a
//!   lister whose `List` fails and expects a status write that leaves out the pod names
//!   (`hard` = the spec, `used` = only the names that did compute, `{}` and `{configmaps: 0}`).
//!   kcm's pod evaluator reads its pod informer's cache, which cannot fail at sync time; a failing
//!   pod *watch and list* on the server (`Fault::error(500)` on both, for pods) instead keeps
//!   the pod informer from ever syncing, so the controller never starts its workers and writes
//!   no status at all. (The partial-failure rule is also exercised end to end with a failing
//!   `count/…` type in tests/it/resourcequota.rs.)

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kcm_testsupport::{DEADLINE, InProcess};
use kube::api::Api;
use kube_testserver::TestServer;
use serde_json::{Value, json};

type List = BTreeMap<String, String>;

/// One row of upstream's table.
struct Case {
    /// upstream's key in `testCases`.
    name: &'static str,
    /// The pods in the namespace (upstream's `items`).
    pods: Vec<Value>,
    /// The quota as it is before the sync: metadata, spec, and status if it has one.
    quota: Value,
    /// upstream's expected `status`.
    hard: List,
    used: List,
}

fn list(pairs: &[(&str, &str)]) -> List {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// upstream's `getResourceRequirements(getResourceList(cpu, memory), getResourceList("", ""))`:
/// requests only; empty lists are left out, as the API serializes them.
fn pod(name: &str, phase: &str, cpu: &str, memory: &str, priority_class: Option<&str>) -> Value {
    let mut requests = serde_json::Map::new();
    if !cpu.is_empty() {
        requests.insert("cpu".into(), json!(cpu));
    }
    if !memory.is_empty() {
        requests.insert("memory".into(), json!(memory));
    }
    let mut resources = serde_json::Map::new();
    if !requests.is_empty() {
        resources.insert("requests".into(), Value::Object(requests));
    }
    let mut spec = json!({
        "volumes": [{ "name": "vol" }],
        "containers": [{ "name": "ctr", "image": "image", "resources": resources }],
    });
    if let Some(class) = priority_class {
        spec["priorityClassName"] = json!(class);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "testing" },
        "spec": spec,
        "status": { "phase": phase },
    })
}

/// upstream's `newTestPods`.
fn test_pods() -> Vec<Value> {
    vec![
        pod("pod-running", "Running", "100m", "1Gi", None),
        pod("pod-running-2", "Running", "100m", "1Gi", None),
        pod("pod-failed", "Failed", "100m", "1Gi", None),
    ]
}

/// upstream's `newBestEffortTestPods`.
fn best_effort_test_pods() -> Vec<Value> {
    vec![
        pod("pod-running", "Running", "", "", None),
        pod("pod-running-2", "Running", "", "", None),
        pod("pod-failed", "Failed", "100m", "1Gi", None),
    ]
}

/// upstream's `newTestPodsWithPriorityClasses`.
fn test_pods_with_priority_classes() -> Vec<Value> {
    vec![
        pod("pod-running", "Running", "500m", "50Gi", Some("high")),
        pod("pod-running-2", "Running", "100m", "1Gi", Some("low")),
        pod("pod-failed", "Failed", "100m", "1Gi", None),
    ]
}

/// The `quota` of the scoped cases: cpu 3, memory 100Gi, pods 5 in `testing`, with `scope`
/// merged into the spec.
fn testing_quota(scope: Value) -> Value {
    let mut spec = json!({ "hard": { "cpu": "3", "memory": "100Gi", "pods": "5" } });
    if let (Some(spec), Some(scope)) = (spec.as_object_mut(), scope.as_object()) {
        spec.extend(scope.clone());
    }
    json!({
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": { "name": "quota", "namespace": "testing" },
        "spec": spec,
    })
}

fn priority_class_selector(operator: &str, values: &[&str]) -> Value {
    let mut expression = json!({ "scopeName": "PriorityClass", "operator": operator });
    if !values.is_empty() {
        expression["values"] = json!(values);
    }
    json!({ "scopeSelector": { "matchExpressions": [expression] } })
}

/// The expected `status.hard` of the scoped cases.
fn testing_hard() -> List {
    list(&[("cpu", "3"), ("memory", "100Gi"), ("pods", "5")])
}

fn used3(cpu: &str, memory: &str, pods: &str) -> List {
    list(&[("cpu", cpu), ("memory", memory), ("pods", pods)])
}

fn case(name: &'static str) -> Case {
    let (pods, quota, hard, used) = match name {
        "non-matching-best-effort-scoped-quota" => (
            test_pods(),
            testing_quota(json!({ "scopes": ["BestEffort"] })),
            testing_hard(),
            used3("0", "0", "0"),
        ),
        "matching-best-effort-scoped-quota" => (
            best_effort_test_pods(),
            testing_quota(json!({ "scopes": ["BestEffort"] })),
            testing_hard(),
            used3("0", "0", "2"),
        ),
        "non-matching-priorityclass-scoped-quota-OpExists" => (
            test_pods(),
            testing_quota(priority_class_selector("Exists", &[])),
            testing_hard(),
            used3("0", "0", "0"),
        ),
        "matching-priorityclass-scoped-quota-OpExists" => (
            test_pods_with_priority_classes(),
            testing_quota(priority_class_selector("Exists", &[])),
            testing_hard(),
            used3("600m", "51Gi", "2"),
        ),
        "matching-priorityclass-scoped-quota-OpIn" => (
            test_pods_with_priority_classes(),
            testing_quota(priority_class_selector("In", &["high", "low"])),
            testing_hard(),
            used3("600m", "51Gi", "2"),
        ),
        "matching-priorityclass-scoped-quota-OpIn-high" => (
            test_pods_with_priority_classes(),
            testing_quota(priority_class_selector("In", &["high"])),
            testing_hard(),
            used3("500m", "50Gi", "1"),
        ),
        "matching-priorityclass-scoped-quota-OpIn-low" => (
            test_pods_with_priority_classes(),
            testing_quota(priority_class_selector("In", &["low"])),
            testing_hard(),
            used3("100m", "1Gi", "1"),
        ),
        "matching-priorityclass-scoped-quota-OpNotIn-low" => (
            test_pods_with_priority_classes(),
            testing_quota(priority_class_selector("NotIn", &["high"])),
            testing_hard(),
            used3("100m", "1Gi", "1"),
        ),
        "non-matching-priorityclass-scoped-quota-OpIn" => (
            test_pods_with_priority_classes(),
            testing_quota(priority_class_selector("In", &["random"])),
            testing_hard(),
            used3("0", "0", "0"),
        ),
        "non-matching-priorityclass-scoped-quota-OpNotIn" => (
            test_pods(),
            testing_quota(priority_class_selector("NotIn", &["random"])),
            testing_hard(),
            used3("200m", "2Gi", "2"),
        ),
        "matching-priorityclass-scoped-quota-OpDoesNotExist" => (
            test_pods(),
            testing_quota(priority_class_selector("DoesNotExist", &[])),
            testing_hard(),
            used3("200m", "2Gi", "2"),
        ),
        "pods" => (
            test_pods(),
            testing_quota(json!({})),
            testing_hard(),
            used3("200m", "2Gi", "2"),
        ),
        "quota-spec-hard-updated" => (
            vec![],
            json!({
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": { "name": "rq", "namespace": "default" },
                "spec": { "hard": { "cpu": "4" } },
                "status": { "hard": { "cpu": "3" }, "used": { "cpu": "0" } },
            }),
            list(&[("cpu", "4")]),
            list(&[("cpu", "0")]),
        ),
        "quota-unchanged" => (
            vec![],
            json!({
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": { "name": "rq", "namespace": "default" },
                "spec": { "hard": { "cpu": "4" } },
                "status": { "hard": { "cpu": "0" } },
            }),
            list(&[("cpu", "4")]),
            list(&[("cpu", "0")]),
        ),
        other => panic!("no upstream case {other}"),
    };
    Case {
        name,
        pods,
        quota,
        hard,
        used,
    }
}

fn strings(list: Option<BTreeMap<String, Quantity>>) -> List {
    list.unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect()
}

/// Seeds the case into a fresh server, runs kcm, and waits for upstream's expected status.
async fn run(case: Case) {
    let server = TestServer::start().await;
    server
        .seed(json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "testing" } }))
        .expect("namespace testing");
    for pod in &case.pods {
        server.seed(pod.clone()).expect("pod seeds");
    }
    server.seed(case.quota.clone()).expect("quota seeds");
    let ns = case.quota["metadata"]["namespace"].as_str().unwrap();
    let name = case.quota["metadata"]["name"].as_str().unwrap();
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), ns);

    let kcm = InProcess::start(&server, &["--controllers=resourcequota"]).await;
    let want = (case.hard.clone(), case.used.clone());
    let deadline = Instant::now() + DEADLINE;
    loop {
        let status = quotas
            .get(name)
            .await
            .expect("quota")
            .status
            .unwrap_or_default();
        let last = (strings(status.hard), strings(status.used));
        if last == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}: wanted hard {:?} used {:?}; last saw hard {:?} used {:?}",
            case.name,
            want.0,
            want.1,
            last.0,
            last.1
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    kcm.stop().await;
}

/// One test per upstream case, named after it.
macro_rules! upstream_cases {
    ($($(#[$attr:meta])* $test:ident => $name:literal,)*) => {
        $(
            $(#[$attr])*
            #[tokio::test]
            async fn $test() {
                run(case($name)).await;
            }
        )*
    };
}

upstream_cases! {
    non_matching_best_effort_scoped_quota => "non-matching-best-effort-scoped-quota",
    matching_best_effort_scoped_quota => "matching-best-effort-scoped-quota",
    non_matching_priorityclass_scoped_quota_op_exists =>
        "non-matching-priorityclass-scoped-quota-OpExists",
    matching_priorityclass_scoped_quota_op_exists => "matching-priorityclass-scoped-quota-OpExists",
    matching_priorityclass_scoped_quota_op_in => "matching-priorityclass-scoped-quota-OpIn",
    matching_priorityclass_scoped_quota_op_in_high =>
        "matching-priorityclass-scoped-quota-OpIn-high",
    matching_priorityclass_scoped_quota_op_in_low => "matching-priorityclass-scoped-quota-OpIn-low",
    matching_priorityclass_scoped_quota_op_not_in_low =>
        "matching-priorityclass-scoped-quota-OpNotIn-low",
    non_matching_priorityclass_scoped_quota_op_in =>
        "non-matching-priorityclass-scoped-quota-OpIn",
    non_matching_priorityclass_scoped_quota_op_not_in =>
        "non-matching-priorityclass-scoped-quota-OpNotIn",
    matching_priorityclass_scoped_quota_op_does_not_exist =>
        "matching-priorityclass-scoped-quota-OpDoesNotExist",
    pods => "pods",
    quota_spec_hard_updated => "quota-spec-hard-updated",
    quota_unchanged => "quota-unchanged",
}
