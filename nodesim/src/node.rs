//! A node's side of the kubelet: registration, the status it posts, its Lease.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kcm::k8s::quantity::Quantity;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::{Config, Error, KUBELET_VERSION, Shared};

/// Where the kubelets' Leases live.
const LEASE_NAMESPACE: &str = "kube-node-lease";
/// Added by the API server's `TaintNodesByCondition` admission to every new node; the node
/// lifecycle controller lifts it once the node is Ready.
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
const FIELD_MANAGER: &str = "kcm-nodesim";

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

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn now_micro() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string()
}

/// The namespace of node Leases exists on kube-apiserver (it makes it at start); a test
/// server may lack it.
pub(crate) async fn ensure_lease_namespace(client: &kube::Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = serde_json::from_value(json!({ "metadata": { "name": LEASE_NAMESPACE } }))
        .expect("a valid namespace");
    if let Err(e) = namespaces.create(&PostParams::default(), &namespace).await
        && !matches!(&e, kube::Error::Api(s) if s.code == 409)
    {
        tracing::warn!(error = %e, "creating namespace {LEASE_NAMESPACE}");
    }
}

/// The pod CIDR of node `index`: `10.<128 + index / 256>.<index % 256>.0/24`.
pub(crate) fn pod_subnet(index: usize) -> String {
    format!("10.{}.{}", 128 + index / 256, index % 256)
}

/// How long registration keeps retrying answers that say "not now" (an API server still
/// starting answers 503 for a while, a busy one 429).
const REGISTER_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs `call` until it succeeds, fails for good, or [`REGISTER_PATIENCE`] has passed.
async fn patiently<T, F, Fut>(mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = tokio::time::Instant::now() + REGISTER_PATIENCE;
    let mut pause = std::time::Duration::from_millis(100);
    loop {
        match call().await {
            Err(e) if crate::is_transient(&e) && tokio::time::Instant::now() < deadline => {
                tracing::debug!(error = %e, "registration retried");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(2));
            }
            answer => return answer,
        }
    }
}

/// Creates node `name` as the kubelet registers it (or takes the one there), posts its
/// status Ready, lifts the not-ready taint, and takes its Lease.
pub(crate) async fn register(
    shared: &Shared,
    capacity: &Capacity,
    index: usize,
    name: &str,
) -> Result<(), Error> {
    let config = &shared.config;
    let nodes: Api<Node> = Api::all(shared.client.clone());
    let mut labels = json!({
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    });
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
    });
    let node: Node = serde_json::from_value(body).expect("a valid node");
    let create = PostParams::default();
    let registered = match patiently(|| nodes.create(&create, &node)).await {
        Ok(node) => node,
        Err(kube::Error::Api(s)) if s.code == 409 => patiently(|| nodes.get(name))
            .await
            .map_err(|source| register_error(name, source))?,
        Err(source) => return Err(register_error(name, source)),
    };
    let uid = registered.metadata.uid.unwrap_or_default();
    let addresses = json!([
        { "type": "InternalIP", "address": format!("100.64.{}.{}", index / 256, index % 256) },
        { "type": "Hostname", "address": name },
    ]);
    patiently(|| post_status_with(shared, name, capacity, Some(addresses.clone())))
        .await
        .map_err(|source| register_error(name, source))?;
    lift_not_ready_taint(&nodes, name).await;
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

/// Posts node `name` Ready (with its capacity and pressure conditions); a failure is logged
/// and the next heartbeat tries again.
pub(crate) async fn post_status(shared: &Shared, name: &str, capacity: &Capacity) {
    if let Err(e) = post_status_with(shared, name, capacity, None).await {
        tracing::warn!(node = name, error = %e, "posting node status");
    }
}

async fn post_status_with(
    shared: &Shared,
    name: &str,
    capacity: &Capacity,
    addresses: Option<Value>,
) -> Result<(), kube::Error> {
    let now = now();
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({ "type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": now, "lastTransitionTime": now })
    };
    let mut status = json!({
        "capacity": capacity.resources,
        "allocatable": capacity.resources,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                      "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                      "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID",
                      "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "daemonEndpoints": { "kubeletEndpoint": { "Port": 10250 } },
        "nodeInfo": {
            "machineID": name, "systemUUID": name, "bootID": name,
            "kernelVersion": "6.1.0", "osImage": "kcm-nodesim",
            "containerRuntimeVersion": "containerd://2.1.0",
            "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
            "operatingSystem": "linux", "architecture": "amd64",
        },
    });
    if let Some(addresses) = addresses {
        status["addresses"] = addresses;
    }
    // A condition whose status holds keeps its transition time, as the kubelet keeps it.
    let nodes: Api<Node> = Api::all(shared.client.clone());
    let current = nodes.get_status(name).await?;
    if let Some(conditions) = current.status.as_ref().and_then(|s| s.conditions.as_ref()) {
        for written in status["conditions"].as_array_mut().into_iter().flatten() {
            if let Some(old) = conditions
                .iter()
                .find(|c| c.type_ == written["type"] && c.status == written["status"])
                && let Some(since) = &old.last_transition_time
            {
                written["lastTransitionTime"] = json!(since.0.to_string());
            }
        }
    }
    nodes
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Strategic(json!({ "status": status })),
        )
        .await
        .map(drop)
}

/// Removes the not-ready taint (with the node's resourceVersion, so a concurrent change wins
/// and the taint is left to whoever changed it).
async fn lift_not_ready_taint(nodes: &Api<Node>, name: &str) {
    let Ok(node) = nodes.get(name).await else {
        return;
    };
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    if !taints.iter().any(|t| t.key == NOT_READY_TAINT) {
        return;
    }
    let kept: Vec<_> = taints
        .into_iter()
        .filter(|t| t.key != NOT_READY_TAINT)
        .collect();
    let patch = json!({
        "metadata": { "resourceVersion": node.metadata.resource_version },
        "spec": { "taints": kept },
    });
    if let Err(e) = nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        tracing::debug!(node = name, error = %e, "lifting the not-ready taint");
    }
}

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
            "renewTime": now_micro(),
        },
    });
    let lease: Lease = serde_json::from_value(lease).expect("a valid lease");
    match leases.create(&PostParams::default(), &lease).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => renew_lease(&leases, name).await,
        Err(e) => Err(e),
    }
}

async fn renew_lease(leases: &Api<Lease>, name: &str) -> Result<(), kube::Error> {
    let patch = json!({ "spec": { "holderIdentity": name, "renewTime": now_micro() } });
    leases
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(drop)
}

/// Renews the Leases of the live nodes every `lease_renew`, and posts their status every
/// `status_report`.
pub(crate) async fn heartbeat(shared: std::sync::Arc<Shared>, capacity: Capacity) {
    let leases: Api<Lease> = Api::namespaced(shared.client.clone(), LEASE_NAMESPACE);
    let mut renew = tokio::time::interval(shared.config.lease_renew);
    renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_report = tokio::time::Instant::now();
    loop {
        renew.tick().await;
        let alive: Vec<String> = shared
            .lock_alive()
            .iter()
            .filter(|(_, alive)| **alive)
            .map(|(name, _)| name.clone())
            .collect();
        let report = last_report.elapsed() >= shared.config.status_report;
        if report {
            last_report = tokio::time::Instant::now();
        }
        for name in alive {
            if let Err(e) = renew_lease(&leases, &name).await {
                tracing::warn!(node = name, error = %e, "renewing the node lease");
            }
            if report {
                post_status(&shared, &name, &capacity).await;
            }
        }
    }
}
