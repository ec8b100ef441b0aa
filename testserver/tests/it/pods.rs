//! What the pod registry adds, as kube-apiserver v1.36 has it: `pods/binding`, the eviction
//! subresource with its PodDisruptionBudget checks, and graceful deletion, which leaves a
//! bound pod terminating until the kubelet (here the test) deletes it again with grace 0.

use crate::common;

use common::{DEADLINE, eventually, http_request};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, WatchEvent, WatchParams};
use kube::core::Status;
use kube_testserver::testing::RawResponse;
use kube_testserver::{TestServer, UserInfo};
use serde_json::{Value, json};

const VIOLATES: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

fn pods(server: &TestServer, ns: &str) -> Api<Pod> {
    Api::namespaced(server.client(), ns)
}

fn api_error(err: kube::Error) -> Status {
    match err {
        kube::Error::Api(status) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A pod in `default`, bound to `node` when given, Running and Ready (or not) when bound.
fn seed_pod(server: &TestServer, name: &str, node: Option<&str>, ready: bool) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": "default", "labels": { "app": "web" } },
        "spec": { "containers": [{ "name": "c", "image": "i" }] },
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
        let ready = if ready { "True" } else { "False" };
        pod["status"] = json!({ "phase": "Running", "conditions": [
            { "type": "Ready", "status": ready, "lastProbeTime": null,
              "lastTransitionTime": "2026-01-01T00:00:00Z" },
        ] });
    }
    (*server.seed(pod).unwrap()).clone()
}

/// A budget over `app=web` in `default` with this status (observedGeneration 1 unless given).
fn seed_budget(server: &TestServer, name: &str, spec: Value, status: Value) {
    let mut budget = json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": { "name": name, "namespace": "default" },
        "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "web" } } },
        "status": { "observedGeneration": 1, "expectedPods": 2 },
    });
    json_patch::merge(&mut budget["spec"], &spec);
    json_patch::merge(&mut budget["status"], &status);
    server.seed(budget).unwrap();
}

/// A server with pod `web-1` running on `n1`, Ready or not, under budget `web` (spec and
/// status as given over the defaults of [`seed_budget`]).
async fn under_budget(ready: bool, spec: Value, status: Value) -> TestServer {
    let server = TestServer::start().await;
    seed_pod(&server, "web-1", Some("n1"), ready);
    seed_budget(&server, "web", spec, status);
    server
}

/// An answer to a POST: status code, header block and JSON body.
struct Answer {
    code: u16,
    head: String,
    body: Value,
}

impl Answer {
    /// The status code and the message of the Status answered.
    fn refusal(&self) -> (u16, &str) {
        (self.code, self.body["message"].as_str().unwrap_or_default())
    }

    fn succeeded(&self) -> bool {
        self.code == 201 && self.body == success()
    }
}

async fn post(server: &TestServer, path: &str, body: &Value) -> Answer {
    let RawResponse { status, head, body } =
        http_request(server.addr(), "POST", path, Some(&body.to_string()))
            .await
            .expect("the server answers");
    let body = serde_json::from_str(&body).unwrap_or(Value::Null);
    Answer {
        code: status,
        head,
        body,
    }
}

async fn bind(server: &TestServer, pod: &str, body: Value) -> Answer {
    let path = format!("/api/v1/namespaces/default/pods/{pod}/binding");
    post(server, &path, &body).await
}

/// A Binding of the pod to the node, as the scheduler posts it.
fn binding(pod: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": { "name": pod },
        "target": { "apiVersion": "v1", "kind": "Node", "name": node },
    })
}

async fn evict(server: &TestServer, pod: &str, query: &str) -> Answer {
    let eviction = json!({
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": { "name": pod, "namespace": "default" },
    });
    let path = format!("/api/v1/namespaces/default/pods/{pod}/eviction{query}");
    post(server, &path, &eviction).await
}

fn success() -> Value {
    json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201 })
}

fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

async fn pod_json(server: &TestServer, name: &str) -> Value {
    serde_json::to_value(pods(server, "default").get(name).await.unwrap()).unwrap()
}

async fn budget_json(server: &TestServer, name: &str) -> Value {
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(server.client(), "default");
    serde_json::to_value(budgets.get(name).await.unwrap()).unwrap()
}

fn seconds(text: &Value) -> i64 {
    text.as_str()
        .unwrap()
        .parse::<jiff::Timestamp>()
        .unwrap()
        .as_second()
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// What the kubelet does once a terminating pod's containers stopped.
async fn kubelet_removes(server: &TestServer, name: &str) {
    pods(server, "default")
        .delete(name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
}

#[tokio::test]
async fn binding_assigns_the_node_and_schedules_the_pod() {
    let server = TestServer::start().await;
    server
        .seed(
            json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": "n1", "labels": {
            "topology.kubernetes.io/zone": "z1", "kubernetes.io/hostname": "n1",
        } } }),
        )
        .unwrap();
    seed_pod(&server, "p", None, false);
    let before = pod_json(&server, "p").await;

    assert!(bind(&server, "p", binding("p", "n1")).await.succeeded());

    let pod = pod_json(&server, "p").await;
    assert_eq!(pod["spec"]["nodeName"], "n1");
    let scheduled = condition(&pod, "PodScheduled").unwrap();
    assert_eq!(scheduled["status"], "True");
    assert!(scheduled["lastTransitionTime"].is_string());
    // Storage is written directly: no strategy, so no new generation.
    assert_eq!(
        pod["metadata"]["generation"],
        before["metadata"]["generation"]
    );
    // The PodTopologyLabels admission plugin copies the node's topology labels, and only those.
    assert_eq!(
        pod["metadata"]["labels"],
        json!({ "app": "web", "topology.kubernetes.io/zone": "z1" })
    );
    let logged = server.requests();
    let request = logged
        .iter()
        .find(|r| r.path.ends_with("/binding"))
        .unwrap();
    assert_eq!(
        (request.info.verb.as_str(), request.info.resource.as_str()),
        ("create", "pods")
    );
    assert_eq!(request.info.subresource, "binding");
}

#[tokio::test]
async fn binding_is_refused_as_the_binding_rest_refuses_it() {
    let server = TestServer::start().await;
    seed_pod(&server, "bound", Some("n1"), true);
    let refused = bind(&server, "bound", binding("bound", "n2")).await;
    assert_eq!(
        refused.refusal(),
        (
            409,
            "Operation cannot be fulfilled on pods/binding \"bound\": pod bound is already assigned to node \"n1\""
        )
    );
    assert_eq!(refused.body["reason"], "Conflict");
    assert_eq!(
        refused.body["details"],
        json!({ "name": "bound", "kind": "pods/binding" })
    );
    assert_eq!(
        bind(&server, "ghost", binding("ghost", "n1"))
            .await
            .refusal(),
        (404, "pods \"ghost\" not found")
    );

    // A pod being deleted (held by a finalizer) cannot be bound.
    seed_pod(&server, "held", None, false);
    common::merge_patch(
        &pods(&server, "default"),
        "held",
        None,
        json!({ "metadata": { "finalizers": ["example.com/hold"] } }),
    )
    .await
    .unwrap();
    pods(&server, "default")
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        bind(&server, "held", binding("held", "n1")).await.refusal(),
        (
            409,
            "Operation cannot be fulfilled on pods/binding \"held\": pod held is being deleted, cannot be assigned to a host"
        )
    );

    seed_pod(&server, "free", None, false);
    assert_eq!(
        bind(&server, "free", binding("other", "n1"))
            .await
            .refusal(),
        (400, "name in URL does not match name in Binding object")
    );
    // Validation errors are returned unconverted: 500 with no reason.
    let no_target = json!({ "metadata": { "name": "free" }, "target": { "kind": "Pod" } });
    let refused = bind(&server, "free", no_target).await;
    assert_eq!(
        refused.refusal(),
        (
            500,
            "[target.kind: Unsupported value: \"Pod\": supported values: \"Node\", \"<empty>\", target.name: Required value]"
        )
    );
    assert!(refused.body.get("reason").is_none(), "{}", refused.body);
    let pod = pod_json(&server, "free").await;
    assert!(pod["spec"]["nodeName"].is_null());
}

#[tokio::test]
async fn rbac_names_binding_and_eviction_as_pod_subresources() {
    let server = TestServer::start().await;
    seed_pod(&server, "p", None, false);
    server.enforce_rbac();
    server
        .reviews()
        .add_user_token("scheduler-token", UserInfo::new("scheduler", &[]));
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.auth_info.token = Some("scheduler-token".to_string().into());
    let scheduler = kube::Client::try_from(config).unwrap();
    let as_scheduler = |path: &str, body: &Value| {
        let request = http::Request::post(path)
            .header("Content-Type", "application/json")
            .body(body.to_string().into_bytes())
            .unwrap();
        let scheduler = scheduler.clone();
        async move { scheduler.request::<Value>(request).await }
    };
    let binding =
        json!({ "metadata": { "name": "p" }, "target": { "kind": "Node", "name": "n1" } });
    let path = "/api/v1/namespaces/default/pods/p/binding";
    let refused = api_error(as_scheduler(path, &binding).await.unwrap_err());
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        "pods \"p\" is forbidden: User \"scheduler\" cannot create resource \"pods/binding\" in API group \"\" in the namespace \"default\""
    );
    server
        .seed(
            json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": "binder" },
            "rules": [{ "apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"] }] }),
        )
        .unwrap();
    server
        .seed(json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": { "name": "scheduler-binds" },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "binder" },
            "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "scheduler" }] }))
        .unwrap();
    assert_eq!(as_scheduler(path, &binding).await.unwrap(), success());

    let eviction =
        json!({ "apiVersion": "policy/v1", "kind": "Eviction", "metadata": { "name": "p" } });
    let path = "/api/v1/namespaces/default/pods/p/eviction";
    let refused = api_error(as_scheduler(path, &eviction).await.unwrap_err());
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        "pods \"p\" is forbidden: User \"scheduler\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"default\""
    );
}

#[tokio::test]
async fn an_eviction_within_the_budget_takes_a_disruption_and_deletes_gracefully() {
    let server = under_budget(
        true,
        json!({}),
        json!({ "disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1 }),
    )
    .await;

    assert!(evict(&server, "web-1", "").await.succeeded());

    let budget = budget_json(&server, "web").await;
    assert_eq!(budget["status"]["disruptionsAllowed"], 0);
    let taken_at = seconds(&budget["status"]["disruptedPods"]["web-1"]);
    assert!((now() - taken_at).abs() <= 2, "{budget}");
    let allowed = condition(&budget, "DisruptionAllowed").unwrap();
    assert_eq!(
        (&allowed["status"], &allowed["reason"]),
        (&json!("False"), &json!("InsufficientPods"))
    );
    assert_eq!(allowed["observedGeneration"], 1);

    // Bound and running: the pod terminates for its grace period, marked as evicted.
    let pod = pod_json(&server, "web-1").await;
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 30);
    let target = condition(&pod, "DisruptionTarget").unwrap();
    assert_eq!(
        (&target["status"], &target["reason"], &target["message"]),
        (
            &json!("True"),
            &json!("EvictionByEvictionAPI"),
            &json!("Eviction API: evicting")
        )
    );
    kubelet_removes(&server, "web-1").await;
    assert_eq!(
        api_error(pods(&server, "default").get("web-1").await.unwrap_err()).code,
        404
    );
}

#[tokio::test]
async fn an_eviction_beyond_the_budget_is_refused_with_429() {
    let server = under_budget(
        true,
        json!({}),
        json!({ "disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2 }),
    )
    .await;
    let before = pod_json(&server, "web-1").await;
    let refused = evict(&server, "web-1", "").await;
    assert_eq!(refused.code, 429);
    assert!(
        !refused.head.to_ascii_lowercase().contains("retry-after"),
        "{}",
        refused.head
    );
    assert_eq!(
        refused.body,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": VIOLATES, "reason": "TooManyRequests", "code": 429,
            "details": { "causes": [{ "reason": "DisruptionBudget",
                "message": "The disruption budget web needs 2 healthy pods and has 2 currently" }] },
        })
    );
    assert_eq!(pod_json(&server, "web-1").await, before);
    assert_eq!(
        budget_json(&server, "web").await["status"]["disruptionsAllowed"],
        0
    );
}

#[tokio::test]
async fn a_pod_under_two_budgets_is_not_evicted() {
    let server = TestServer::start().await;
    seed_pod(&server, "web-1", Some("n1"), true);
    let before = pod_json(&server, "web-1").await;
    let plenty = json!({ "disruptionsAllowed": 5, "currentHealthy": 2, "desiredHealthy": 1 });
    seed_budget(&server, "web", json!({}), plenty.clone());
    seed_budget(
        &server,
        "all",
        json!({ "selector": { "matchLabels": null } }),
        plenty,
    );
    let refused = evict(&server, "web-1", "").await;
    assert_eq!(refused.code, 500);
    assert_eq!(
        refused.body,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            "code": 500,
        })
    );
    assert_eq!(pod_json(&server, "web-1").await, before);
}

#[tokio::test]
async fn a_budget_its_controller_has_not_seen_yet_refuses() {
    let server = under_budget(
        true,
        json!({}),
        json!({ "disruptionsAllowed": 3, "currentHealthy": 2, "desiredHealthy": 1 }),
    )
    .await;
    // A spec change bumps the generation past what the status observed.
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(server.client(), "default");
    common::merge_patch(
        &budgets,
        "web",
        None,
        json!({ "spec": { "minAvailable": 2 } }),
    )
    .await
    .unwrap();
    let refused = evict(&server, "web-1", "").await;
    assert_eq!(refused.refusal(), (429, VIOLATES));
    assert!(
        refused
            .head
            .to_ascii_lowercase()
            .contains("retry-after: 10"),
        "{}",
        refused.head
    );
    assert_eq!(
        refused.body["details"],
        json!({ "retryAfterSeconds": 10, "causes": [{ "reason": "DisruptionBudget",
            "message": "The disruption budget web is still being processed by the server." }] })
    );
    assert_eq!(
        budget_json(&server, "web").await["status"]["disruptionsAllowed"],
        3
    );
}

#[tokio::test]
async fn always_allow_evicts_a_running_unready_pod_without_taking_a_disruption() {
    let server = under_budget(
        false,
        json!({ "unhealthyPodEvictionPolicy": "AlwaysAllow" }),
        json!({ "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 2 }),
    )
    .await;
    let budget_before = budget_json(&server, "web").await;
    assert!(evict(&server, "web-1", "").await.succeeded());
    assert_eq!(budget_json(&server, "web").await, budget_before);
    let pod = pod_json(&server, "web-1").await;
    assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");
    assert!(condition(&pod, "DisruptionTarget").is_some());
}

#[tokio::test]
async fn if_healthy_budget_spares_an_unready_pod_only_while_the_budget_is_healthy() {
    // The default policy (IfHealthyBudget), the budget short of healthy pods.
    let server = under_budget(
        false,
        json!({}),
        json!({ "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 2 }),
    )
    .await;
    let refused = evict(&server, "web-1", "").await;
    assert_eq!(refused.refusal(), (429, VIOLATES));
    assert_eq!(
        refused.body["details"]["causes"],
        json!([{ "reason": "DisruptionBudget",
            "message": "The disruption budget web needs 2 healthy pods and has 1 currently" }])
    );

    // Healthy again: the unready pod goes, and the budget keeps its disruptions.
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(server.client(), "default");
    common::merge_patch(
        &budgets,
        "web",
        Some("status"),
        json!({ "status": { "currentHealthy": 2 } }),
    )
    .await
    .unwrap();
    assert!(evict(&server, "web-1", "").await.succeeded());
    let budget = budget_json(&server, "web").await;
    assert_eq!(budget["status"]["disruptionsAllowed"], 0);
    assert!(budget["status"]["disruptedPods"].is_null(), "{budget}");
    let pod = pod_json(&server, "web-1").await;
    assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");
}

#[tokio::test]
async fn pending_and_terminal_pods_are_evicted_whatever_the_budget() {
    let server = TestServer::start().await;
    seed_pod(&server, "pending", None, false);
    let done = json!({ "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "done", "namespace": "default", "labels": { "app": "web" } },
        "spec": { "nodeName": "n1", "containers": [{ "name": "c", "image": "i" }] },
        "status": { "phase": "Succeeded" } });
    server.seed(done).unwrap();
    seed_budget(
        &server,
        "web",
        json!({}),
        json!({ "disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 2 }),
    );
    for name in ["pending", "done"] {
        assert!(evict(&server, name, "").await.succeeded(), "{name}");
        // Unbound or terminal: no grace period.
        assert_eq!(
            api_error(pods(&server, "default").get(name).await.unwrap_err()).code,
            404
        );
    }
    assert_eq!(
        evict(&server, "ghost", "").await.refusal(),
        (404, "pods \"ghost\" not found")
    );
}

#[tokio::test]
async fn a_dry_run_eviction_changes_nothing() {
    let server = under_budget(
        true,
        json!({}),
        json!({ "disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1 }),
    )
    .await;
    let pod_before = pod_json(&server, "web-1").await;
    let budget_before = budget_json(&server, "web").await;
    assert!(evict(&server, "web-1", "?dryRun=All").await.succeeded());
    assert_eq!(pod_json(&server, "web-1").await, pod_before);
    assert_eq!(budget_json(&server, "web").await, budget_before);
}

// Several threads, so the evictions' writes of the budget can race and conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_evictions_take_no_more_than_the_budget_allows() {
    let server = TestServer::start().await;
    for name in ["web-1", "web-2", "web-3"] {
        seed_pod(&server, name, Some("n1"), true);
    }
    seed_budget(
        &server,
        "web",
        json!({}),
        json!({ "disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2 }),
    );
    let (a, b, c) = tokio::join!(
        evict(&server, "web-1", ""),
        evict(&server, "web-2", ""),
        evict(&server, "web-3", "")
    );
    let mut codes = vec![a.code, b.code, c.code];
    codes.sort_unstable();
    assert_eq!(codes, [201, 429, 429]);
    let budget = budget_json(&server, "web").await;
    assert_eq!(budget["status"]["disruptionsAllowed"], 0);
    assert_eq!(
        budget["status"]["disruptedPods"].as_object().unwrap().len(),
        1
    );
}

#[tokio::test]
async fn v1beta1_evictions_are_accepted_and_bodies_checked() {
    let server = TestServer::start().await;
    seed_pod(&server, "p", None, false);
    let path = "/api/v1/namespaces/default/pods/p/eviction";
    let wrong_name =
        json!({ "apiVersion": "policy/v1", "kind": "Eviction", "metadata": { "name": "q" } });
    assert_eq!(
        post(&server, path, &wrong_name).await.refusal(),
        (400, "name in URL does not match name in Eviction object")
    );
    let beta = json!({ "apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": { "name": "p" },
        "deleteOptions": { "gracePeriodSeconds": 0 } });
    assert!(post(&server, path, &beta).await.succeeded());
}

#[tokio::test]
async fn a_bound_pod_terminates_for_its_grace_period() {
    let server = TestServer::start().await;
    let api = pods(&server, "default");
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "p", "namespace": "default" },
        "spec": { "nodeName": "n1", "terminationGracePeriodSeconds": 45,
                  "containers": [{ "name": "c", "image": "i" }] },
        "status": { "phase": "Running" },
    });
    server.seed(pod.take()).unwrap();
    let before = pod_json(&server, "p").await;

    api.delete("p", &DeleteParams::default()).await.unwrap();
    let marked = pod_json(&server, "p").await;
    let at = seconds(&marked["metadata"]["deletionTimestamp"]);
    assert!((at - (now() + 45)).abs() <= 2, "{marked}");
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 45);
    assert_eq!(
        marked["metadata"]["generation"],
        before["metadata"]["generation"].as_i64().unwrap() + 1
    );

    // Again, or with a longer period: nothing changes.
    api.delete("p", &DeleteParams::default()).await.unwrap();
    api.delete("p", &DeleteParams::default().grace_period(60))
        .await
        .unwrap();
    assert_eq!(pod_json(&server, "p").await, marked);

    // A shorter period moves the timestamp back by the difference.
    api.delete("p", &DeleteParams::default().grace_period(10))
        .await
        .unwrap();
    let shortened = pod_json(&server, "p").await;
    assert_eq!(shortened["metadata"]["deletionGracePeriodSeconds"], 10);
    assert_eq!(
        seconds(&shortened["metadata"]["deletionTimestamp"]),
        at - 35
    );

    // The kubelet's status update of a terminating pod keeps it; its delete with 0 ends it.
    common::merge_patch(
        &api,
        "p",
        Some("status"),
        json!({ "status": { "phase": "Succeeded" } }),
    )
    .await
    .unwrap();
    assert!(pod_json(&server, "p").await["metadata"]["deletionTimestamp"].is_string());
    kubelet_removes(&server, "p").await;
    assert_eq!(api_error(api.get("p").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn a_pod_without_its_own_period_gets_the_defaulted_thirty_seconds() {
    let server = TestServer::start().await;
    seed_pod(&server, "p", Some("n1"), true);
    pods(&server, "default")
        .delete("p", &DeleteParams::default())
        .await
        .unwrap();
    let pod = pod_json(&server, "p").await;
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 30);
    let at = seconds(&pod["metadata"]["deletionTimestamp"]);
    assert!((at - (now() + 30)).abs() <= 2, "{pod}");
}

#[tokio::test]
async fn unbound_and_terminal_pods_go_at_once_seen_marked_then_deleted() {
    let server = TestServer::start().await;
    let api = pods(&server, "default");
    seed_pod(&server, "unbound", None, false);
    let done = json!({ "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "done", "namespace": "default" },
        "spec": { "nodeName": "n1", "containers": [{ "name": "c", "image": "i" }] },
        "status": { "phase": "Failed" } });
    server.seed(done).unwrap();
    let rv = api
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = api
        .watch(&WatchParams::default().fields("metadata.name=unbound"), &rv)
        .await
        .unwrap()
        .boxed();
    api.delete("unbound", &DeleteParams::default())
        .await
        .unwrap();
    api.delete("done", &DeleteParams::default()).await.unwrap();
    for name in ["unbound", "done"] {
        assert_eq!(api_error(api.get(name).await.unwrap_err()).code, 404);
    }
    // The registry writes the mark before it removes the pod.
    let Some(Ok(WatchEvent::Modified(marked))) = events.next().await else {
        panic!("the mark comes first");
    };
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(0));
    assert!(marked.metadata.deletion_timestamp.is_some());
    let Some(Ok(WatchEvent::Deleted(gone))) = events.next().await else {
        panic!("then the removal");
    };
    assert_eq!(gone.metadata.deletion_grace_period_seconds, Some(0));
}

#[tokio::test]
async fn finalizers_hold_a_pod_past_its_grace_period() {
    let server = TestServer::start().await;
    let api = pods(&server, "default");
    seed_pod(&server, "p", Some("n1"), true);
    common::merge_patch(
        &api,
        "p",
        None,
        json!({ "metadata": { "finalizers": ["example.com/hold"] } }),
    )
    .await
    .unwrap();
    api.delete("p", &DeleteParams::default()).await.unwrap();
    // The finalizer gone during the grace period: the pod still waits for the kubelet.
    common::merge_patch(
        &api,
        "p",
        None,
        json!({ "metadata": { "finalizers": null } }),
    )
    .await
    .unwrap();
    assert_eq!(
        pod_json(&server, "p").await["metadata"]["deletionGracePeriodSeconds"],
        30
    );
    common::merge_patch(
        &api,
        "p",
        None,
        json!({ "metadata": { "finalizers": ["example.com/hold"] } }),
    )
    .await
    .unwrap();
    kubelet_removes(&server, "p").await;
    let held = pod_json(&server, "p").await;
    assert_eq!(held["metadata"]["deletionGracePeriodSeconds"], 0);
    common::merge_patch(
        &api,
        "p",
        None,
        json!({ "metadata": { "finalizers": null } }),
    )
    .await
    .unwrap();
    assert_eq!(api_error(api.get("p").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn a_deleted_namespace_waits_for_its_terminating_pods() {
    let server = TestServer::start().await;
    let namespaces: Api<Namespace> = Api::all(server.client());
    server
        .seed(json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "shop" } }))
        .unwrap();
    server
        .seed(json!({ "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "web", "namespace": "shop" },
            "spec": { "nodeName": "n1", "containers": [{ "name": "c", "image": "i" }] },
            "status": { "phase": "Running" } }))
        .unwrap();
    server
        .seed(json!({ "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "queued", "namespace": "shop" },
            "spec": { "containers": [{ "name": "c", "image": "i" }] } }))
        .unwrap();
    namespaces
        .delete("shop", &DeleteParams::default())
        .await
        .unwrap();
    let in_shop = pods(&server, "shop");
    assert_eq!(
        api_error(in_shop.get("queued").await.unwrap_err()).code,
        404
    );
    let web = in_shop.get("web").await.unwrap();
    assert_eq!(web.metadata.deletion_grace_period_seconds, Some(30));
    let shop = namespaces.get("shop").await.unwrap();
    assert_eq!(shop.status.unwrap().phase.as_deref(), Some("Terminating"));

    in_shop
        .delete("web", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually("the namespace goes", DEADLINE, || async {
        namespaces.get_opt("shop").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn delete_preconditions_read_as_the_registrys() {
    let server = TestServer::start().await;
    let pod = seed_pod(&server, "p", Some("n1"), true);
    let wrong_uid = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let refused = api_error(
        pods(&server, "default")
            .delete("p", &wrong_uid)
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 409);
    assert_eq!(
        refused.message,
        format!(
            "Operation cannot be fulfilled on Pod \"p\": the UID in the precondition (other) does not match the UID in record ({}). The object might have been deleted and then recreated",
            pod["metadata"]["uid"].as_str().unwrap()
        )
    );
}
