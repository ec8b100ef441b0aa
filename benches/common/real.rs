//! The scale bench's world on a real control plane (etcd and kube-apiserver from
//! `KUBEBUILDER_ASSETS`, see `tests/common/envtest.rs`): seeded, checked and churned through
//! the API, so the API server's own CPU and memory can be measured while a controller manager
//! (kcm, or upstream's kube-controller-manager) converges on it.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::world::{
    Model, PodModel, TTL_ANNOTATION, expected_ttl, node_json, node_name, ns_name, pdb_json,
    pod_json, quota_json, secs,
};

#[path = "../../tests/common/envtest.rs"]
pub mod envtest;

/// Requests in flight while seeding and churning.
const IN_FLIGHT: usize = 32;

async fn create<K>(api: &Api<K>, body: Value) -> K
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let object: K = serde_json::from_value(body.clone()).expect("a valid object");
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {}: {e}", object.name_any()))
}

/// A pod created, then given the status its JSON has (the API server drops a created
/// object's status).
async fn create_pod(client: &Client, ns: &str, pod: &PodModel, node: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let body = pod_json(ns, pod, node);
    let status = body["status"].clone();
    create(&api, body).await;
    api.patch_status(
        &pod.name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap_or_else(|e| panic!("status of {ns}/{}: {e}", pod.name));
}

/// Seeds `model`'s world through the API.
pub async fn seed(client: &Client, model: &Model) {
    let started = Instant::now();
    let nodes: Api<Node> = Api::all(client.clone());
    futures::stream::iter(0..model.size.nodes)
        .map(|i| {
            let nodes = nodes.clone();
            async move {
                create(&nodes, node_json(&node_name(i))).await;
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for n in 0..model.namespaces.len() {
        let ns = ns_name(n);
        create(
            &namespaces,
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }),
        )
        .await;
        let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &ns);
        create(&quotas, quota_json(&ns)).await;
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
        create(&pdbs, pdb_json(&ns, model.min_available)).await;
    }
    let pods: Vec<(String, &PodModel, String)> = model
        .namespaces
        .iter()
        .enumerate()
        .flat_map(|(n, pods)| {
            pods.iter()
                .enumerate()
                .map(move |(j, pod)| (ns_name(n), pod, model.node_of(n, j)))
        })
        .collect();
    futures::stream::iter(pods.iter())
        .map(|(ns, pod, node)| create_pod(client, ns, pod, node))
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    println!("seeded through the API in {}", secs(started.elapsed()));
}

/// The index of namespace `ns-<n>`.
fn ns_index(ns: &str) -> Option<usize> {
    ns.strip_prefix("ns-")?.parse().ok()
}

/// How many quotas, PDBs and node TTLs are right now, read through the API.
pub async fn right(client: &Client, model: &Model) -> [usize; 3] {
    let params = ListParams::default();
    let quotas = Api::<ResourceQuota>::all(client.clone())
        .list(&params)
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let quotas_right = quotas
        .iter()
        .filter(|q| {
            ns_index(&q.namespace().unwrap_or_default())
                .is_some_and(|n| model.quota_right(n, &serde_json::to_value(q).unwrap_or_default()))
        })
        .count();
    let pdbs = Api::<PodDisruptionBudget>::all(client.clone())
        .list(&params)
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let pdbs_right = pdbs
        .iter()
        .filter(|p| {
            ns_index(&p.namespace().unwrap_or_default())
                .is_some_and(|n| model.pdb_right(n, &serde_json::to_value(p).unwrap_or_default()))
        })
        .count();
    let ttl = expected_ttl(model.size.nodes);
    let nodes = Api::<kube::core::PartialObjectMeta<Node>>::all(client.clone())
        .list_metadata(&params)
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let nodes_right = nodes
        .iter()
        .filter(|n| n.annotations().get(TTL_ANNOTATION).map(String::as_str) == Some(ttl))
        .count();
    [quotas_right, pdbs_right, nodes_right]
}

/// Polls [`right`] until every quota, PDB and node is right, or `timeout`: when each kind
/// was first all right, from `start`.
pub async fn converge(
    client: &Client,
    model: &Model,
    start: Instant,
    timeout: Duration,
) -> [Option<Duration>; 3] {
    let want = [
        model.namespaces.len(),
        model.namespaces.len(),
        model.size.nodes,
    ];
    let mut done = [None; 3];
    while start.elapsed() < timeout && done.iter().any(Option::is_none) {
        let now = right(client, model).await;
        for i in 0..3 {
            if done[i].is_none() && now[i] >= want[i] {
                done[i] = Some(start.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    done
}

/// The scale bench's churn through the API: every tenth pod deleted and replaced (see
/// `Model::churn`); returns how many.
pub async fn churn(client: &Client, model: &mut Model) -> usize {
    let per_ns = model.size.pods / model.size.namespaces;
    let mut deletes = Vec::new();
    let mut creates = Vec::new();
    for (n, ns_pods) in model.namespaces.iter_mut().enumerate() {
        for (j, pod) in ns_pods.iter_mut().enumerate() {
            if !(n * per_ns + j).is_multiple_of(10) {
                continue;
            }
            deletes.push((ns_name(n), pod.name.clone()));
            *pod = PodModel {
                name: format!("c-{j}"),
                cpu_milli: pod.cpu_milli.max(200) + 50,
                memory_mi: 96,
                ready: !pod.ready,
            };
            creates.push((n, j));
        }
    }
    futures::stream::iter(deletes.iter())
        .map(|(ns, name)| async move {
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            let zero = DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            };
            api.delete(name, &zero).await.map(|_| ())
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await
        .unwrap_or_else(|e| panic!("churn delete: {e}"));
    let model = &*model;
    futures::stream::iter(creates.iter())
        .map(|(n, j)| {
            let ns = ns_name(*n);
            async move {
                create_pod(
                    client,
                    &ns,
                    &model.namespaces[*n][*j],
                    &model.node_of(*n, *j),
                )
                .await
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    deletes.len()
}

/// Resets a process's peak RSS (VmHWM) to its current RSS (`/proc/<pid>/clear_refs`), so the
/// peak of a window can be read at its end.
pub fn reset_peak(pid: u32) {
    if let Err(e) = std::fs::write(format!("/proc/{pid}/clear_refs"), "5") {
        println!("(could not reset the peak RSS of {pid}: {e})");
    }
}

/// The API server's status writes and node patches so far: quota, PDB, node.
pub async fn apiserver_writes(plane: &envtest::ControlPlane) -> [f64; 3] {
    let text = plane.metrics().await;
    let count = |verb: &str, resource: &str, subresource: &str| {
        envtest::sample_sum(
            &text,
            "apiserver_request_total",
            &[
                ("verb", verb),
                ("resource", resource),
                ("subresource", subresource),
            ],
        )
    };
    [
        count("PUT", "resourcequotas", "status"),
        count("PUT", "poddisruptionbudgets", "status"),
        count("PATCH", "nodes", ""),
    ]
}
