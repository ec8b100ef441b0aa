//! The simulator against kube-testserver: nodes, binding, readiness, Jobs' pods finishing and
//! graceful deletion, as the kubelet and the scheduler would do them.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kcm_nodesim::{Config, EXIT_CODE_ANNOTATION, READY_ANNOTATION, RUN_FOR_ANNOTATION, Simulator};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
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
        retry: Duration::from_millis(200),
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

fn condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

fn condition_status(pod: &Pod, kind: &str) -> Option<String> {
    condition(pod, kind).map(|c| c.status.clone())
}

fn phase(pod: &Pod) -> Option<String> {
    pod.status.as_ref()?.phase.clone()
}

fn node_name(pod: &Pod) -> Option<String> {
    pod.spec.as_ref()?.node_name.clone()
}

async fn phase_becomes(client: &Client, name: &str, want: &str) -> Pod {
    eventually_some(&format!("pod {name} {want}"), DEADLINE, || async {
        get(client, name)
            .await
            .filter(|p| phase(p).as_deref() == Some(want))
    })
    .await
}

/// Waits until the pod says it fits nowhere, and returns the scheduler's message.
async fn unschedulable(client: &Client, name: &str) -> String {
    let pod = eventually_some(&format!("pod {name} unschedulable"), DEADLINE, || async {
        get(client, name).await.filter(|p| {
            condition(p, "PodScheduled")
                .is_some_and(|c| c.reason.as_deref() == Some("Unschedulable"))
        })
    })
    .await;
    assert_eq!(node_name(&pod), None, "{name} is not bound");
    assert_eq!(phase(&pod).as_deref(), Some("Pending"));
    let scheduled = condition(&pod, "PodScheduled").unwrap();
    assert_eq!(scheduled.status, "False");
    scheduled.message.clone().unwrap_or_default()
}

/// The message of the pod's PodScheduled condition.
async fn scheduler_message(client: &Client, name: &str) -> Option<String> {
    let pod = get(client, name).await?;
    condition(&pod, "PodScheduled")?.message.clone()
}

async fn patch_node(client: &Client, name: &str, patch: Value) {
    Api::<Node>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap_or_else(|e| panic!("patch node {name}: {e}"));
}

async fn renew_time(leases: &Api<Lease>, node: &str) -> String {
    let lease = leases.get(node).await.expect("a lease");
    let renewed = lease.spec.and_then(|s| s.renew_time).expect("renewed");
    renewed.0.to_string()
}

#[tokio::test]
async fn nodes_register_ready_with_capacity_and_renewed_leases() {
    let (_server, client, sim) = start(2).await;
    assert_eq!(sim.nodes(), ["sim-0", "sim-1"]);
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get("sim-1").await.expect("node sim-1");
    assert_eq!(node.labels()["kubernetes.io/hostname"], "sim-1");
    assert_eq!(node.labels()["kubernetes.io/os"], "linux");
    assert_eq!(node.labels()["kubernetes.io/arch"], "amd64");
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    assert!(
        taints
            .iter()
            .all(|t| t.key != "node.kubernetes.io/not-ready"),
        "the not-ready taint is lifted: {taints:?}"
    );
    let status = node.status.expect("a status");
    let conditions = status.conditions.unwrap_or_default();
    for (kind, want) in [
        ("Ready", "True"),
        ("MemoryPressure", "False"),
        ("DiskPressure", "False"),
        ("PIDPressure", "False"),
    ] {
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == kind && c.status == want),
            "{kind} {want}: {conditions:?}"
        );
    }
    let allocatable = status.allocatable.unwrap();
    assert_eq!(allocatable["pods"].0, "110");
    assert_eq!(allocatable["cpu"].0, "8");
    assert!(allocatable.contains_key("ephemeral-storage"));
    assert_eq!(status.node_info.unwrap().kubelet_version, "v1.36.2");
    let addresses = status.addresses.unwrap_or_default();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == "100.64.0.1")
    );

    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease = leases.get("sim-0").await.expect("a lease");
    let spec = lease.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("sim-0"));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    assert_eq!(lease.owner_references()[0].kind, "Node");
    let first = renew_time(&leases, "sim-0").await;
    eventually("the lease is renewed", DEADLINE, || async {
        renew_time(&leases, "sim-0").await != first
    })
    .await;
    sim.shutdown().await;
}

#[tokio::test]
async fn a_second_simulator_takes_the_nodes_and_pods_over() {
    let (_server, client, first) = start(1).await;
    create_pod(&client, "kept", json!({}), json!({})).await;
    let running = phase_becomes(&client, "kept", "Running").await;
    first.shutdown().await;
    let second = Simulator::start(client.clone(), config(1))
        .await
        .expect("a second simulator registers the same nodes");
    create_pod(&client, "new", json!({}), json!({})).await;
    let new = phase_becomes(&client, "new", "Running").await;
    let kept = get(&client, "kept").await.unwrap();
    let ip = |p: &Pod| p.status.as_ref().and_then(|s| s.pod_ip.clone());
    assert_eq!(ip(&kept), ip(&running), "a running pod keeps its address");
    assert_ne!(ip(&new), ip(&kept), "and no other pod gets it");
    second.shutdown().await;
}

#[tokio::test]
async fn pending_pods_are_bound_where_they_fit() {
    let (_server, client, sim) = start(2).await;
    let requests = |cpu: &str| {
        json!({ "containers": [{ "name": "c", "image": "pause",
                  "resources": { "requests": { "cpu": cpu } } }] })
    };
    patch_node(
        &client,
        "sim-0",
        json!({ "spec": { "unschedulable": true } }),
    )
    .await;
    // A pod no node matches: its message shows when the scheduler has seen the cordon.
    let mut nowhere = requests("100m");
    nowhere["nodeSelector"] = json!({ "disk": "none" });
    create_pod(&client, "nowhere", nowhere, json!({})).await;
    let cordoned = "0/2 nodes are available: 1 node(s) didn't match Pod's node \
                    affinity/selector, 1 node(s) were unschedulable.";
    eventually("nowhere's message names the cordon", DEADLINE, || async {
        scheduler_message(&client, "nowhere").await.as_deref() == Some(cordoned)
    })
    .await;
    let mut selected = requests("100m");
    selected["nodeSelector"] = json!({ "kubernetes.io/hostname": "sim-0" });
    create_pod(&client, "selected", selected, json!({})).await;
    assert_eq!(unschedulable(&client, "selected").await, cordoned);

    create_pod(&client, "fits", requests("6"), json!({})).await;
    let bound = phase_becomes(&client, "fits", "Running").await;
    assert_eq!(
        condition_status(&bound, "PodScheduled").as_deref(),
        Some("True")
    );
    assert_eq!(
        node_name(&bound).as_deref(),
        Some("sim-1"),
        "sim-0 is cordoned"
    );
    let status = bound.status.as_ref().unwrap();
    assert_eq!(status.host_ip.as_deref(), Some("100.64.0.1"));
    assert!(
        status
            .pod_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("10.128.1.")),
        "an address of sim-1's /24: {:?}",
        status.pod_ip
    );

    // 6 of sim-1's 8 CPUs are taken and sim-0 is cordoned: 4 fit nowhere.
    create_pod(&client, "too-big", requests("4"), json!({})).await;
    assert_eq!(
        unschedulable(&client, "too-big").await,
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable."
    );

    // A taint keeps out the pods that do not tolerate it; the waiting pod's message changes
    // once the scheduler has seen it.
    let taint = json!([{ "key": "dedicated", "value": "batch", "effect": "NoSchedule" }]);
    patch_node(&client, "sim-1", json!({ "spec": { "taints": taint } })).await;
    let tainted = "0/2 nodes are available: 1 node(s) had untolerated taint(s), \
                   1 node(s) were unschedulable.";
    eventually("too-big's message names the taint", DEADLINE, || async {
        scheduler_message(&client, "too-big").await.as_deref() == Some(tainted)
    })
    .await;
    create_pod(&client, "plain", requests("100m"), json!({})).await;
    assert_eq!(unschedulable(&client, "plain").await, tainted);
    let mut tolerant = requests("100m");
    tolerant["tolerations"] =
        json!([{ "key": "dedicated", "operator": "Equal", "value": "batch" }]);
    create_pod(&client, "tolerant", tolerant, json!({})).await;
    let tolerant = phase_becomes(&client, "tolerant", "Running").await;
    assert_eq!(node_name(&tolerant).as_deref(), Some("sim-1"));

    // Uncordoned, sim-0 takes the three that waited.
    patch_node(
        &client,
        "sim-0",
        json!({ "spec": { "unschedulable": false } }),
    )
    .await;
    for name in ["too-big", "selected", "plain"] {
        let pod = phase_becomes(&client, name, "Running").await;
        assert_eq!(node_name(&pod).as_deref(), Some("sim-0"), "{name}");
        assert_eq!(
            condition_status(&pod, "PodScheduled").as_deref(),
            Some("True")
        );
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn pods_go_to_the_least_allocated_ready_node() {
    let (_server, client, sim) = start(2).await;
    let requests = json!({ "containers": [{ "name": "c", "image": "pause",
        "resources": { "requests": { "cpu": "1", "memory": "1Gi" } } }] });
    for name in ["a", "b", "c", "d"] {
        create_pod(&client, name, requests.clone(), json!({})).await;
    }
    let mut per_node = std::collections::BTreeMap::<String, usize>::new();
    for name in ["a", "b", "c", "d"] {
        let pod = phase_becomes(&client, name, "Running").await;
        *per_node.entry(node_name(&pod).unwrap()).or_default() += 1;
    }
    assert_eq!(
        per_node.values().copied().collect::<Vec<_>>(),
        [2, 2],
        "{per_node:?}"
    );

    // A node that reports NotReady gets nothing, though its Lease is renewed.
    sim.set_node_ready("sim-1", false).await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get("sim-1").await.unwrap();
    let ready = node.status.unwrap().conditions.unwrap();
    let ready = ready.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("KubeletNotReady"))
    );
    for name in ["e", "f"] {
        create_pod(&client, name, requests.clone(), json!({})).await;
        let pod = phase_becomes(&client, name, "Running").await;
        assert_eq!(node_name(&pod).as_deref(), Some("sim-0"), "{name}");
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let before = renew_time(&leases, "sim-1").await;
    eventually("the NotReady node's lease is renewed", DEADLINE, || async {
        renew_time(&leases, "sim-1").await != before
    })
    .await;
    sim.set_node_ready("sim-1", true).await.unwrap();
    create_pod(&client, "g", requests, json!({})).await;
    let pod = phase_becomes(&client, "g", "Running").await;
    assert_eq!(
        node_name(&pod).as_deref(),
        Some("sim-1"),
        "4 CPUs taken on sim-0, 2 on sim-1"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn readiness_waits_for_the_probe_delay_and_gates() {
    let (_server, client, sim) = start(1).await;
    let probe = |delay: i32| {
        json!({ "containers": [
            { "name": "slow", "image": "pause",
              "readinessProbe": { "httpGet": { "port": 8080 }, "initialDelaySeconds": delay } },
            { "name": "plain", "image": "pause" } ] })
    };
    create_pod(&client, "slow", probe(2), json!({})).await;
    let running = phase_becomes(&client, "slow", "Running").await;
    assert_eq!(
        condition_status(&running, "Ready").as_deref(),
        Some("False")
    );
    let statuses = running
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap();
    let ready: Vec<(&str, bool)> = statuses
        .iter()
        .map(|s| (s.name.as_str(), s.ready))
        .collect();
    assert_eq!(
        ready,
        [("slow", false), ("plain", true)],
        "a container without a probe is ready at once"
    );
    assert!(statuses.iter().all(|s| {
        s.state.as_ref().is_some_and(|st| st.running.is_some())
            && s.started == Some(true)
            && s.restart_count == 0
            && s.container_id.is_some()
            && s.image_id.contains("@sha256:")
    }));
    let ready = eventually_some("slow turns Ready", DEADLINE, || async {
        get(&client, "slow")
            .await
            .filter(|p| condition_status(p, "Ready").as_deref() == Some("True"))
    })
    .await;
    let ready_condition = condition(&ready, "Ready").unwrap();
    assert_eq!(
        (&ready_condition.reason, &ready_condition.message),
        (&None, &None),
        "the reason it was not ready is gone"
    );
    let started = ready.status.as_ref().unwrap().start_time.clone().unwrap().0;
    let ready_at = condition(&ready, "Ready")
        .unwrap()
        .last_transition_time
        .clone()
        .unwrap()
        .0;
    let waited = ready_at.duration_since(started);
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
        assert_eq!(
            condition_status(&pod, "Ready").as_deref(),
            Some("False"),
            "{name}"
        );
    }
    let gated = get(&client, "gated").await.unwrap();
    assert_eq!(
        condition_status(&gated, "ContainersReady").as_deref(),
        Some("True")
    );
    assert_eq!(
        condition(&gated, "Ready").unwrap().reason.as_deref(),
        Some("ReadinessGatesNotReady")
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
                .is_some_and(|p| condition_status(&p, "Ready").as_deref() == Some("True"))
        })
        .await;
    }
    // And the annotation back flips a Running pod not Ready.
    let set = json!({ "metadata": { "annotations": { READY_ANNOTATION: "false" } } });
    pods.patch("told", &PatchParams::default(), &Patch::Merge(set))
        .await
        .unwrap();
    eventually("told turns not Ready again", DEADLINE, || async {
        get(&client, "told")
            .await
            .is_some_and(|p| condition_status(&p, "Ready").as_deref() == Some("False"))
    })
    .await;
    let never = get(&client, "never").await.unwrap();
    assert_eq!(condition_status(&never, "Ready").as_deref(), Some("False"));
    sim.shutdown().await;
}

fn exit_code(pod: &Pod) -> i32 {
    let status = &pod
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0];
    let state = status.state.as_ref().unwrap();
    state.terminated.as_ref().expect("terminated").exit_code
}

#[tokio::test]
async fn pods_that_do_not_restart_finish_after_their_run() {
    let (_server, client, sim) = start(1).await;
    create_pod(
        &client,
        "done",
        json!({ "restartPolicy": "Never" }),
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
    assert_eq!(exit_code(&done), 0);
    assert_eq!(condition_status(&done, "Ready").as_deref(), Some("False"));
    assert_eq!(
        condition(&done, "Ready").unwrap().reason.as_deref(),
        Some("PodCompleted")
    );
    let broken = phase_becomes(&client, "broken", "Failed").await;
    assert_eq!(exit_code(&broken), 3);
    assert_eq!(
        condition(&broken, "Ready").unwrap().reason.as_deref(),
        Some("PodFailed")
    );
    // restartPolicy Always runs until deleted, whatever the annotation says: it is still
    // Running after the others, which ran longer, have finished.
    let server = get(&client, "server").await.unwrap();
    assert_eq!(phase(&server).as_deref(), Some("Running"));
    sim.shutdown().await;
}

/// Watches pod `name` from now until it is deleted: every version seen, once the watch has
/// listed.
async fn watch_until_deleted(pods: &Api<Pod>, name: &str) -> tokio::task::JoinHandle<Vec<Pod>> {
    let (listed, on_list) = tokio::sync::oneshot::channel();
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let events = watcher(pods.clone(), config).default_backoff();
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        let mut listed = Some(listed);
        let mut seen = Vec::new();
        while let Some(event) = events.next().await {
            match event.expect("watch") {
                watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => seen.push(pod),
                watcher::Event::InitDone => {
                    listed.take().map(|l| l.send(()));
                }
                watcher::Event::Delete(_) => break,
                watcher::Event::Init => {}
            }
        }
        seen
    });
    on_list.await.expect("the watch lists");
    task
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
    let watch = watch_until_deleted(&pods, "web").await;
    let deleting = pods
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete")
        .left()
        .expect("a bound pod stays while it terminates");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_eq!(deleting.metadata.deletion_grace_period_seconds, Some(30));
    // Gone after the simulator's shutdown time, well before the 30 s grace period.
    let seen = tokio::time::timeout(DEADLINE, watch)
        .await
        .expect("the pod is removed")
        .expect("the watch task");
    // Its containers were stopped in status before it went.
    let last = seen.last().expect("versions seen");
    assert!(last.metadata.deletion_timestamp.is_some());
    assert_eq!(
        phase(last).as_deref(),
        Some("Succeeded"),
        "a server exits 0 on SIGTERM"
    );
    assert_eq!(exit_code(last), 0);
    assert_eq!(condition_status(last, "Ready").as_deref(), Some("False"));
    assert_eq!(get(&client, "web").await, None);

    // A pod made again under the same name is another pod: the UID precondition spares it.
    create_pod(&client, "web", json!({}), json!({})).await;
    let again = phase_becomes(&client, "web", "Running").await;
    assert_ne!(again.uid(), running.uid());
    sim.shutdown().await;
}

#[tokio::test]
async fn a_deleted_batch_pod_fails_as_sigterm_ends_it() {
    let (_server, client, sim) = start(1).await;
    let job_pod = json!({ "restartPolicy": "Never", "terminationGracePeriodSeconds": 30 });
    create_pod(
        &client,
        "step",
        job_pod,
        json!({ RUN_FOR_ANNOTATION: "1h" }),
    )
    .await;
    phase_becomes(&client, "step", "Running").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let watch = watch_until_deleted(&pods, "step").await;
    pods.delete("step", &DeleteParams::default()).await.unwrap();
    let seen = tokio::time::timeout(DEADLINE, watch)
        .await
        .expect("the pod is removed")
        .expect("the watch task");
    let last = seen.last().expect("versions seen");
    assert_eq!(phase(last).as_deref(), Some("Failed"));
    assert_eq!(exit_code(last), 143);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_stopped_node_leaves_its_pods_until_it_starts_again() {
    let (_server, client, sim) = start(2).await;
    for (name, node) in [("on-0", "sim-0"), ("on-1", "sim-1")] {
        create_pod(&client, name, json!({ "nodeName": node }), json!({})).await;
        phase_becomes(&client, name, "Running").await;
    }
    sim.stop_node("sim-0").await.unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let stopped_at = renew_time(&leases, "sim-0").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["on-0", "on-1"] {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    for (name, node) in [("new-0", "sim-0"), ("new-1", "sim-1")] {
        create_pod(&client, name, json!({ "nodeName": node }), json!({})).await;
    }
    // sim-1's kubelet has done its part; sim-0's, dead, did nothing.
    eventually("on-1 is removed", DEADLINE, || async {
        get(&client, "on-1").await.is_none()
    })
    .await;
    phase_becomes(&client, "new-1", "Running").await;
    let left = get(&client, "on-0")
        .await
        .expect("on-0 stays while its kubelet is dead");
    assert_eq!(phase(&left).as_deref(), Some("Running"));
    let waiting = get(&client, "new-0").await.unwrap();
    assert_eq!(
        phase(&waiting).as_deref(),
        Some("Pending"),
        "a dead kubelet starts nothing"
    );
    assert_eq!(
        renew_time(&leases, "sim-0").await,
        stopped_at,
        "nor renews its lease"
    );

    sim.start_node("sim-0").await.unwrap();
    phase_becomes(&client, "new-0", "Running").await;
    eventually("on-0 is removed", DEADLINE, || async {
        get(&client, "on-0").await.is_none()
    })
    .await;
    eventually("the lease is renewed again", DEADLINE, || async {
        renew_time(&leases, "sim-0").await != stopped_at
    })
    .await;
    assert!(sim.stop_node("sim-9").await.is_err(), "no such node");
    sim.shutdown().await;
}

#[tokio::test]
async fn pods_of_another_scheduler_are_left_pending() {
    let (_server, client, sim) = start(1).await;
    create_pod(
        &client,
        "theirs",
        json!({ "schedulerName": "other" }),
        json!({}),
    )
    .await;
    create_pod(&client, "ours", json!({}), json!({})).await;
    phase_becomes(&client, "ours", "Running").await;
    let theirs = get(&client, "theirs").await.unwrap();
    assert_eq!(node_name(&theirs), None);
    assert_eq!(
        condition(&theirs, "PodScheduled"),
        None,
        "nothing written for it"
    );
    sim.shutdown().await;
}
