//! The simulator against kube-testserver: nodes, binding, readiness, Jobs' pods finishing and
//! graceful deletion, as the kubelet and the scheduler would do them.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kcm_nodesim::{Config, EXIT_CODE_ANNOTATION, READY_ANNOTATION, RUN_FOR_ANNOTATION, Simulator};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kube_testserver::TestServer;
use kube_testserver::testing::{eventually, eventually_some};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(20);

fn config(nodes: usize) -> Config {
    Config {
        nodes,
        lease_renew: Duration::from_millis(200),
        shutdown: Duration::from_millis(200),
        ..Config::default()
    }
}

async fn start(nodes: usize) -> (TestServer, Client, Simulator) {
    let server = TestServer::start().await;
    let client = server.client();
    let sim = Simulator::start(client.clone(), config(nodes))
        .await
        .expect("the simulator starts");
    (server, client, sim)
}

async fn create_pod(client: &Client, name: &str, spec: Value, annotations: Value) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{ "name": "c", "image": "registry.k8s.io/pause:3.10" }]);
    }
    let pod = json!({ "metadata": { "name": name, "annotations": annotations }, "spec": spec });
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap_or_else(|e| panic!("create pod {name}: {e}"))
}

async fn get(client: &Client, name: &str) -> Option<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .get_opt(name)
        .await
        .expect("get pod")
}

fn condition(pod: &Pod, kind: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
}

fn phase(pod: &Pod) -> Option<String> {
    pod.status.as_ref()?.phase.clone()
}

async fn phase_becomes(client: &Client, name: &str, want: &str) -> Pod {
    eventually_some(&format!("pod {name} {want}"), DEADLINE, || async {
        get(client, name)
            .await
            .filter(|p| phase(p).as_deref() == Some(want))
    })
    .await
}

#[tokio::test]
async fn nodes_register_ready_with_capacity_and_renewed_leases() {
    let (_server, client, sim) = start(2).await;
    assert_eq!(sim.nodes(), ["sim-0", "sim-1"]);
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get("sim-1").await.expect("node sim-1");
    assert_eq!(node.labels()["kubernetes.io/hostname"], "sim-1");
    let status = node.status.expect("a status");
    let ready = status.conditions.unwrap_or_default();
    assert!(
        ready
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert_eq!(status.allocatable.unwrap()["pods"].0, "110");
    assert_eq!(status.node_info.unwrap().kubelet_version, "v1.36.2");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let first = leases
        .get("sim-0")
        .await
        .expect("a lease")
        .spec
        .unwrap()
        .renew_time;
    eventually("the lease is renewed", DEADLINE, || async {
        leases.get("sim-0").await.unwrap().spec.unwrap().renew_time != first
    })
    .await;
    sim.shutdown().await;
}

#[tokio::test]
async fn pending_pods_are_bound_where_they_fit() {
    let (_server, client, sim) = start(2).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let cordon = json!({ "spec": { "unschedulable": true } });
    nodes
        .patch("sim-0", &PatchParams::default(), &Patch::Merge(cordon))
        .await
        .unwrap();
    let requests = |cpu: &str| {
        json!({ "containers": [{ "name": "c", "image": "pause",
                  "resources": { "requests": { "cpu": cpu } } }] })
    };
    create_pod(&client, "fits", requests("6"), json!({})).await;
    let bound = phase_becomes(&client, "fits", "Running").await;
    assert_eq!(condition(&bound, "PodScheduled").as_deref(), Some("True"));
    assert_eq!(
        bound.spec.unwrap().node_name.as_deref(),
        Some("sim-1"),
        "sim-0 is cordoned"
    );
    // 6 of sim-1's 8 CPUs are taken and sim-0 is cordoned: 4 fit nowhere.
    create_pod(&client, "too-big", requests("4"), json!({})).await;
    let mut selected = requests("100m");
    selected["nodeSelector"] = json!({ "kubernetes.io/hostname": "sim-0" });
    create_pod(&client, "selected", selected, json!({})).await;
    let mut tolerant = requests("100m");
    tolerant["tolerations"] = json!([{ "operator": "Exists" }]);
    create_pod(&client, "small", tolerant, json!({})).await;
    phase_becomes(&client, "small", "Running").await;
    // Uncordoned, sim-0 takes the two that waited.
    let uncordon = json!({ "spec": { "unschedulable": false } });
    nodes
        .patch("sim-0", &PatchParams::default(), &Patch::Merge(uncordon))
        .await
        .unwrap();
    for name in ["too-big", "selected"] {
        let pod = phase_becomes(&client, name, "Running").await;
        assert_eq!(
            pod.spec.unwrap().node_name.as_deref(),
            Some("sim-0"),
            "{name}"
        );
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn readiness_waits_for_the_probe_delay_and_gates() {
    let (_server, client, sim) = start(1).await;
    let probe = |delay: i32| {
        json!({ "containers": [{ "name": "c", "image": "pause",
            "readinessProbe": { "httpGet": { "port": 8080 }, "initialDelaySeconds": delay } }] })
    };
    create_pod(&client, "slow", probe(2), json!({})).await;
    let running = phase_becomes(&client, "slow", "Running").await;
    assert_eq!(condition(&running, "Ready").as_deref(), Some("False"));
    let ready = eventually_some("slow turns Ready", DEADLINE, || async {
        get(&client, "slow")
            .await
            .filter(|p| condition(p, "Ready").as_deref() == Some("True"))
    })
    .await;
    let status = ready.status.unwrap();
    let started = status.start_time.unwrap().0;
    let ready_at = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    let waited = ready_at
        .last_transition_time
        .unwrap()
        .0
        .duration_since(started);
    assert!(waited.as_secs() >= 2, "Ready {waited:?} after the start");

    let mut never = probe(0);
    never["containers"][0]["readinessProbe"] = json!({ "exec": { "command": ["false"] } });
    create_pod(&client, "never", never, json!({})).await;
    let mut gated = probe(0);
    gated["readinessGates"] = json!([{ "conditionType": "example.com/lb" }]);
    create_pod(&client, "gated", gated, json!({})).await;
    create_pod(
        &client,
        "told",
        probe(0),
        json!({ READY_ANNOTATION: "false" }),
    )
    .await;
    for name in ["never", "gated", "told"] {
        let pod = phase_becomes(&client, name, "Running").await;
        assert_eq!(condition(&pod, "Ready").as_deref(), Some("False"), "{name}");
    }
    let gated = get(&client, "gated").await.unwrap();
    assert_eq!(
        condition(&gated, "ContainersReady").as_deref(),
        Some("True")
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let gate =
        json!({ "status": { "conditions": [{ "type": "example.com/lb", "status": "True" }] } });
    pods.patch_status("gated", &PatchParams::default(), &Patch::Strategic(gate))
        .await
        .unwrap();
    let unset = json!({ "metadata": { "annotations": { READY_ANNOTATION: null } } });
    pods.patch("told", &PatchParams::default(), &Patch::Merge(unset))
        .await
        .unwrap();
    for name in ["gated", "told"] {
        eventually(&format!("{name} turns Ready"), DEADLINE, || async {
            get(&client, name)
                .await
                .is_some_and(|p| condition(&p, "Ready").as_deref() == Some("True"))
        })
        .await;
    }
    let never = get(&client, "never").await.unwrap();
    assert_eq!(condition(&never, "Ready").as_deref(), Some("False"));
    sim.shutdown().await;
}

#[tokio::test]
async fn pods_that_do_not_restart_finish_after_their_run() {
    let (_server, client, sim) = start(1).await;
    let never = json!({ "restartPolicy": "Never" });
    create_pod(
        &client,
        "done",
        never.clone(),
        json!({ RUN_FOR_ANNOTATION: "500ms" }),
    )
    .await;
    create_pod(
        &client,
        "broken",
        json!({ "restartPolicy": "OnFailure" }),
        json!({ RUN_FOR_ANNOTATION: "300ms", EXIT_CODE_ANNOTATION: "3" }),
    )
    .await;
    create_pod(
        &client,
        "server",
        json!({}),
        json!({ RUN_FOR_ANNOTATION: "100ms" }),
    )
    .await;
    let done = phase_becomes(&client, "done", "Succeeded").await;
    let state = &done
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        state
            .state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        0
    );
    assert_eq!(condition(&done, "Ready").as_deref(), Some("False"));
    let broken = phase_becomes(&client, "broken", "Failed").await;
    let state = &broken.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(
        state
            .state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        3
    );
    // restartPolicy Always runs until deleted, whatever the annotation says.
    let server = get(&client, "server").await.unwrap();
    assert_eq!(phase(&server).as_deref(), Some("Running"));
    sim.shutdown().await;
}

#[tokio::test]
async fn deleted_pods_terminate_and_are_removed() {
    let (_server, client, sim) = start(1).await;
    create_pod(
        &client,
        "web",
        json!({ "terminationGracePeriodSeconds": 30 }),
        json!({}),
    )
    .await;
    let running = phase_becomes(&client, "web", "Running").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let deleting = pods
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete")
        .left()
        .expect("a bound pod stays while it terminates");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_eq!(deleting.metadata.deletion_grace_period_seconds, Some(30));
    eventually(
        "the pod is removed after its containers stop",
        DEADLINE,
        || async { get(&client, "web").await.is_none() },
    )
    .await;
    // A pod recreated under the same name is a new pod: the UID precondition protects it.
    create_pod(&client, "web", json!({}), json!({})).await;
    let again = phase_becomes(&client, "web", "Running").await;
    assert_ne!(again.uid(), running.uid());
    sim.shutdown().await;
}

#[tokio::test]
async fn a_stopped_node_leaves_its_pods_until_it_starts_again() {
    let (_server, client, sim) = start(1).await;
    sim.stop_node("sim-0").await.unwrap();
    let pinned = json!({ "nodeName": "sim-0" });
    create_pod(&client, "waits", pinned, json!({})).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let stopped_at = leases.get("sim-0").await.unwrap().spec.unwrap().renew_time;
    let waiting = get(&client, "waits").await.unwrap();
    assert_eq!(
        phase(&waiting).as_deref(),
        Some("Pending"),
        "a dead kubelet starts nothing"
    );
    sim.start_node("sim-0").await.unwrap();
    phase_becomes(&client, "waits", "Running").await;
    eventually("the lease is renewed again", DEADLINE, || async {
        leases.get("sim-0").await.unwrap().spec.unwrap().renew_time != stopped_at
    })
    .await;
    assert!(sim.stop_node("sim-9").await.is_err(), "no such node");
    sim.shutdown().await;
}
