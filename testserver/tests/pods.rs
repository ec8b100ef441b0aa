//! What the pod registry adds, as kube-apiserver v1.36 has it: `pods/binding` and graceful
//! deletion, which leaves a bound pod terminating until the kubelet (here the test) deletes it
//! again with grace 0.

mod common;

use common::{DEADLINE, eventually, http_request};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::core::Status;
use kube_testserver::testing::RawResponse;
use kube_testserver::{TestServer, UserInfo};
use serde_json::{Value, json};

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

/// An answer to a POST: status code and JSON body.
struct Answer {
    code: u16,
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
    let RawResponse { status, body, .. } =
        http_request(server.addr(), "POST", path, Some(&body.to_string()))
            .await
            .expect("the server answers");
    let body = serde_json::from_str(&body).unwrap_or(Value::Null);
    Answer { code: status, body }
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
    pods(&server, "default")
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "finalizers": ["example.com/hold"] } })),
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
async fn rbac_names_binding_as_a_pod_subresource() {
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
    api.patch_status(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": { "phase": "Succeeded" } })),
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
    api.patch(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": ["example.com/hold"] } })),
    )
    .await
    .unwrap();
    api.delete("p", &DeleteParams::default()).await.unwrap();
    // The finalizer gone during the grace period: the pod still waits for the kubelet.
    api.patch(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
    )
    .await
    .unwrap();
    assert_eq!(
        pod_json(&server, "p").await["metadata"]["deletionGracePeriodSeconds"],
        30
    );
    api.patch(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": ["example.com/hold"] } })),
    )
    .await
    .unwrap();
    kubelet_removes(&server, "p").await;
    let held = pod_json(&server, "p").await;
    assert_eq!(held["metadata"]["deletionGracePeriodSeconds"], 0);
    api.patch(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
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
