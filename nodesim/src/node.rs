//! A node's side of the kubelet: registration, the status it posts, its Lease.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, NodeCondition};
use kcm_values::quantity::Quantity;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::{Config, Error, KUBELET_VERSION, Shared, is_code, is_transient, timestamp};

/// Where the kubelets' Leases live.
const LEASE_NAMESPACE: &str = "kube-node-lease";
/// Added by the API server's `TaintNodesByCondition` admission to every new node; the node
/// lifecycle controller lifts it once the node is Ready.
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
const FIELD_MANAGER: &str = "kcm-nodesim";
/// How many Leases are renewed at once.
const RENEWALS_IN_FLIGHT: usize = 8;

/// A node's capacity, checked once.
#[derive(Debug, Clone)]
pub(crate) struct Capacity {
    pub resources: Value,
}

impl Capacity {
    pub fn of(config: &Config) -> Result<Self, Error> {
        for (field, value) in [("cpu", &config.cpu), ("memory", &config.memory)] {
            value.parse::<Quantity>().map_err(|e| Error::Capacity {
                field,
                value: value.clone(),
                reason: e.to_string(),
            })?;
        }
        Ok(Self {
            resources: json!({
                "cpu": config.cpu,
                "memory": config.memory,
                "pods": config.max_pods.to_string(),
                "ephemeral-storage": "100Gi",
            }),
        })
    }
}

/// The namespace of node Leases exists on kube-apiserver (it makes it at start); a test
/// server may lack it.
pub(crate) async fn ensure_lease_namespace(client: &kube::Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = serde_json::from_value(json!({ "metadata": { "name": LEASE_NAMESPACE } }))
        .expect("a valid namespace");
    let create = PostParams::default();
    if let Err(e) = patiently(|| namespaces.create(&create, &namespace)).await
        && !is_code(&e, 409)
    {
        tracing::warn!(error = %e, "creating namespace {LEASE_NAMESPACE}");
    }
}

/// The first three octets of node `index`'s pod subnet: `10.<128 + index / 256>.<index % 256>`.
pub(crate) fn pod_subnet(index: usize) -> String {
    format!("10.{}.{}", 128 + index / 256, index % 256)
}

/// Node `index`'s InternalIP.
pub(crate) fn host_ip(index: usize) -> String {
    format!("100.64.{}.{}", index / 256, index % 256)
}

/// How long registration keeps retrying answers that say "not now" (an API server still
/// starting answers 503 for a while, a busy one 429).
const REGISTER_PATIENCE: Duration = Duration::from_secs(60);

/// Runs `call` until it succeeds, fails for good, or [`REGISTER_PATIENCE`] has passed, with
/// the kubelet's registration backoff (from 100 ms, doubling, at most 7 s).
async fn patiently<T, F, Fut>(mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let deadline = tokio::time::Instant::now() + REGISTER_PATIENCE;
    let mut pause = Duration::from_millis(100);
    loop {
        match call().await {
            Err(e) if is_transient(&e) && tokio::time::Instant::now() < deadline => {
                tracing::debug!(error = %e, "registration retried");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(7));
            }
            answer => return answer,
        }
    }
}

/// The labels the kubelet sets itself (`initialNode`) and puts back on a node it finds
/// registered (`updateDefaultLabels`).
fn default_labels(name: &str) -> Value {
    json!({
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    })
}

/// Creates node `name` as the kubelet registers it, with its status (NotReady: the runtime
/// not checked yet), or takes the one there with its default labels put back; then posts it
/// Ready, lifts the not-ready taint and takes its Lease.
pub(crate) async fn register(shared: &Shared, index: usize, name: &str) -> Result<(), Error> {
    let config = &shared.config;
    let nodes: Api<Node> = Api::all(shared.client.clone());
    let mut labels = default_labels(name);
    for (key, value) in &config.labels {
        labels[key] = json!(value);
    }
    let mut spec = json!({});
    if !config.taints.is_empty() {
        spec["taints"] = serde_json::to_value(&config.taints).expect("taints serialize");
    }
    let body = json!({
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": { "volumes.kubernetes.io/controller-managed-attach-detach": "true" },
        },
        "spec": spec,
        "status": status(shared, name, index, false, &[]),
    });
    let node: Node = serde_json::from_value(body).expect("a valid node");
    let create = PostParams::default();
    let registered = match patiently(|| nodes.create(&create, &node)).await {
        Ok(node) => node,
        Err(e) if is_code(&e, 409) => {
            let labels = Patch::Merge(json!({ "metadata": { "labels": default_labels(name) } }));
            let params = PatchParams::default();
            patiently(|| nodes.patch(name, &params, &labels))
                .await
                .map_err(|source| register_error(name, source))?
        }
        Err(source) => return Err(register_error(name, source)),
    };
    patiently(|| post_status_with(shared, name, true))
        .await
        .map_err(|source| register_error(name, source))?;
    lift_not_ready_taint(&nodes, name).await;
    let uid = registered.metadata.uid.unwrap_or_default();
    patiently(|| take_lease(shared, name, &uid))
        .await
        .map_err(|source| register_error(name, source))
}

fn register_error(node: &str, source: kube::Error) -> Error {
    Error::Register {
        node: node.to_string(),
        source,
    }
}

/// Posts node `name`'s status, Ready or not, and once Ready lifts the not-ready taint; a
/// failure is logged and the next heartbeat posts again.
pub(crate) async fn report(shared: &Shared, name: &str, ready: bool) {
    if let Err(e) = post_status_with(shared, name, ready).await {
        tracing::warn!(node = name, error = %e, "posting node status");
        return;
    }
    if ready {
        lift_not_ready_taint(&Api::all(shared.client.clone()), name).await;
    }
}

/// Node `name`'s status: capacity, addresses, nodeInfo and the conditions, each stamped now
/// but keeping the transition time of the same condition in `previous` whose status holds.
fn status(
    shared: &Shared,
    name: &str,
    index: usize,
    ready: bool,
    previous: &[NodeCondition],
) -> Value {
    let now = timestamp(jiff::Timestamp::now());
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        let since = previous
            .iter()
            .find(|c| c.type_ == kind && c.status == status)
            .and_then(|c| c.last_transition_time.as_ref())
            .map_or_else(|| now.clone(), |t| timestamp(t.0));
        json!({ "type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": now, "lastTransitionTime": since })
    };
    let ready = if ready {
        condition(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        )
    } else {
        condition(
            "Ready",
            "False",
            "KubeletNotReady",
            "container runtime network not ready: NetworkReady=false \
             reason:NetworkPluginNotReady message:Network plugin returns error: \
             cni plugin not initialized",
        )
    };
    let capacity = &shared.capacity.resources;
    json!({
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                      "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                      "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID",
                      "kubelet has sufficient PID available"),
            ready,
        ],
        "addresses": [
            { "type": "InternalIP", "address": host_ip(index) },
            { "type": "Hostname", "address": name },
        ],
        "daemonEndpoints": { "kubeletEndpoint": { "Port": 10250 } },
        "nodeInfo": {
            "machineID": name, "systemUUID": name, "bootID": name,
            "kernelVersion": "6.1.0", "osImage": "kcm-nodesim",
            "containerRuntimeVersion": "containerd://2.1.0",
            "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
            "operatingSystem": "linux", "architecture": "amd64",
        },
    })
}

async fn post_status_with(shared: &Shared, name: &str, ready: bool) -> Result<(), kube::Error> {
    let Some(state) = shared.node(name) else {
        return Ok(());
    };
    let nodes: Api<Node> = Api::all(shared.client.clone());
    let current = nodes.get_status(name).await?;
    let previous = current
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    let status = status(shared, name, state.index, ready, &previous);
    nodes
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Strategic(json!({ "status": status })),
        )
        .await
        .map(drop)
}

/// How often lifting the taint meets a concurrent change before it leaves it be.
const TAINT_ATTEMPTS: usize = 5;

/// Removes the not-ready NoSchedule taint, with the node's resourceVersion as a precondition,
/// so a concurrent change (a node lifecycle controller's) is read again, never overwritten.
async fn lift_not_ready_taint(nodes: &Api<Node>, name: &str) {
    for _ in 0..TAINT_ATTEMPTS {
        let node = match nodes.get(name).await {
            Ok(node) => node,
            Err(e) => {
                tracing::debug!(node = name, error = %e, "reading the node's taints");
                return;
            }
        };
        let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
        let not_ready = |t: &k8s_openapi::api::core::v1::Taint| {
            t.key == NOT_READY_TAINT && t.effect == "NoSchedule"
        };
        if !taints.iter().any(not_ready) {
            return;
        }
        let kept: Vec<_> = taints.into_iter().filter(|t| !not_ready(t)).collect();
        let patch = json!({
            "metadata": { "resourceVersion": node.metadata.resource_version },
            "spec": { "taints": kept },
        });
        match nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => return,
            Err(e) if is_code(&e, 409) || is_transient(&e) => {
                tracing::debug!(node = name, error = %e, "lifting the not-ready taint, again");
            }
            Err(e) => {
                tracing::warn!(node = name, error = %e, "lifting the not-ready taint");
                return;
            }
        }
    }
}

fn micro_time(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()
}

/// Creates node `name`'s Lease (owned by the node, so it goes with it), or renews the one
/// there.
async fn take_lease(shared: &Shared, name: &str, uid: &str) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(shared.client.clone(), LEASE_NAMESPACE);
    let lease = json!({
        "metadata": {
            "name": name,
            "ownerReferences": [{ "apiVersion": "v1", "kind": "Node", "name": name, "uid": uid }],
        },
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": shared.config.lease_duration.as_secs(),
            "renewTime": micro_time(jiff::Timestamp::now()),
        },
    });
    let lease: Lease = serde_json::from_value(lease).expect("a valid lease");
    match leases.create(&PostParams::default(), &lease).await {
        Ok(_) => Ok(()),
        Err(e) if is_code(&e, 409) => renew_lease(&leases, shared, name).await,
        Err(e) => Err(e),
    }
}

async fn renew_lease(leases: &Api<Lease>, shared: &Shared, name: &str) -> Result<(), kube::Error> {
    let patch = json!({ "spec": {
        "holderIdentity": name,
        "leaseDurationSeconds": shared.config.lease_duration.as_secs(),
        "renewTime": micro_time(jiff::Timestamp::now()),
    } });
    leases
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(drop)
}

/// Renews node `name`'s Lease, making it again if it is gone, as the kubelet's lease
/// controller does; a failure is logged and the next tick tries again.
pub(crate) async fn renew(shared: &Shared, name: &str) {
    let leases: Api<Lease> = Api::namespaced(shared.client.clone(), LEASE_NAMESPACE);
    let result = match renew_lease(&leases, shared, name).await {
        Err(e) if is_code(&e, 404) => {
            match Api::<Node>::all(shared.client.clone()).get(name).await {
                Ok(node) => {
                    let uid = node.metadata.uid.unwrap_or_default();
                    take_lease(shared, name, &uid).await
                }
                Err(e) => Err(e),
            }
        }
        result => result,
    };
    if let Err(e) = result {
        tracing::warn!(node = name, error = %e, "renewing the node lease");
    }
}

/// Renews the Leases of the live nodes every `lease_renew`, and posts their status every
/// `status_report`.
pub(crate) async fn heartbeat(shared: Arc<Shared>) {
    let mut renew_tick = tokio::time::interval(shared.config.lease_renew);
    renew_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_report = tokio::time::Instant::now();
    loop {
        renew_tick.tick().await;
        let _beating = shared.heartbeat.lock().await;
        let alive: Vec<(String, bool)> = shared
            .lock_nodes()
            .iter()
            .filter(|(_, state)| state.alive)
            .map(|(name, state)| (name.clone(), state.ready))
            .collect();
        let report_due = last_report.elapsed() >= shared.config.status_report;
        if report_due {
            last_report = tokio::time::Instant::now();
        }
        let shared = &shared;
        futures::stream::iter(alive)
            .for_each_concurrent(RENEWALS_IN_FLIGHT, |(name, ready)| async move {
                renew(shared, &name).await;
                if report_due {
                    report(shared, &name, ready).await;
                }
            })
            .await;
    }
}
