//! The scale bench's world on a real control plane (etcd and kube-apiserver from
//! `KUBEBUILDER_ASSETS`, see kcm_testsupport::envtest): seeded, checked and churned through
//! the API, so the API server's own CPU and memory can be measured while a controller manager
//! (kcm, or upstream's kube-controller-manager) converges on it.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kcm_testsupport::envtest;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::world::{
    Model, PodModel, TTL_ANNOTATION, expected_ttl, node_json, node_name, ns_index, ns_name,
    pdb_json, pod_json, quota_json, secs,
};

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
pub async fn create_pod(client: &Client, ns: &str, pod: &PodModel, node: &str) {
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

/// Waits until the API server serves `pods` pods from its watch cache (a list at resource
/// version 0): after a start on a seeded etcd, the cache fills before anything is measured.
pub async fn await_pods_cached(client: &Client, pods: usize) {
    let api: Api<PartialObjectMeta<Pod>> = Api::all(client.clone());
    let started = Instant::now();
    loop {
        match api.list_metadata(&ListParams::default().match_any()).await {
            Ok(list) if list.items.len() == pods => break,
            Ok(list) => panic!("the API server holds {} pods, not {pods}", list.items.len()),
            Err(e) => println!("(pods not served yet: {e})"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!(
        "{pods} pods served from the cache after {}",
        secs(started.elapsed())
    );
}

/// The namespace/name keys of the objects a watch shows as right, kept through the watcher's
/// relists: a relist's objects are gathered apart and replace the set at its end, so objects
/// deleted while the watch was down drop out.
#[derive(Default)]
struct RightKeys {
    now: HashSet<String>,
    relist: HashSet<String>,
}

impl RightKeys {
    fn apply<K: ResourceExt>(&mut self, event: watcher::Event<K>, is_right: impl Fn(&K) -> bool) {
        let key = |o: &K| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
        match event {
            watcher::Event::Apply(o) if is_right(&o) => {
                self.now.insert(key(&o));
            }
            watcher::Event::Apply(o) | watcher::Event::Delete(o) => {
                self.now.remove(&key(&o));
            }
            watcher::Event::Init => self.relist.clear(),
            watcher::Event::InitApply(o) => {
                if is_right(&o) {
                    self.relist.insert(key(&o));
                }
            }
            watcher::Event::InitDone => self.now = std::mem::take(&mut self.relist),
        }
    }
}

/// Follows one watch until `want` of its objects are right at once: when that was, from
/// `start`. Watch errors are retried with kube's default backoff, never final.
async fn first_all_right<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    is_right: impl Fn(&K) -> bool,
    want: usize,
    start: Instant,
) -> Duration
where
    K: ResourceExt,
{
    let mut events = std::pin::pin!(events);
    let mut right = RightKeys::default();
    loop {
        match events.next().await {
            Some(Ok(event)) => right.apply(event, &is_right),
            Some(Err(e)) => println!("(checker watch error, retrying: {e})"),
            None => panic!("a watcher stream with backoff does not end"),
        }
        if right.now.len() >= want {
            return start.elapsed();
        }
    }
}

/// When every quota, PDB and node TTL was first right, from `start` (`None`: not within
/// `timeout` of `start`). One JSON watch per kind (node metadata only), each kept until its
/// kind is all right, instead of polling lists, so the check costs the API server little
/// beside what is measured.
pub async fn converge(
    client: &Client,
    model: &Model,
    start: Instant,
    timeout: Duration,
) -> [Option<Duration>; 3] {
    let deadline = tokio::time::Instant::from_std(start + timeout);
    let config = watcher::Config::default();
    let quotas = first_all_right(
        watcher(Api::<ResourceQuota>::all(client.clone()), config.clone()).default_backoff(),
        |q: &ResourceQuota| in_model_namespace(q, |n, v| model.quota_right(n, v)),
        model.namespaces.len(),
        start,
    );
    let pdbs = first_all_right(
        watcher(
            Api::<PodDisruptionBudget>::all(client.clone()),
            config.clone(),
        )
        .default_backoff(),
        |p: &PodDisruptionBudget| in_model_namespace(p, |n, v| model.pdb_right(n, v)),
        model.namespaces.len(),
        start,
    );
    let ttl = expected_ttl(model.size.nodes);
    let nodes = first_all_right(
        watcher(Api::<PartialObjectMeta<Node>>::all(client.clone()), config).default_backoff(),
        |n: &PartialObjectMeta<Node>| {
            n.annotations().get(TTL_ANNOTATION).map(String::as_str) == Some(ttl)
        },
        model.size.nodes,
        start,
    );
    let (quotas, pdbs, nodes) = tokio::join!(
        tokio::time::timeout_at(deadline, quotas),
        tokio::time::timeout_at(deadline, pdbs),
        tokio::time::timeout_at(deadline, nodes),
    );
    [quotas.ok(), pdbs.ok(), nodes.ok()]
}

/// Whether `object`, in namespace `ns-<n>` of the model, is `right` there as JSON.
fn in_model_namespace<K>(object: &K, right: impl Fn(usize, &Value) -> bool) -> bool
where
    K: ResourceExt + serde::Serialize,
{
    object
        .namespace()
        .as_deref()
        .and_then(ns_index)
        .is_some_and(|n| right(n, &serde_json::to_value(object).unwrap_or_default()))
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

/// Counts by name, from the API server's metrics (see `apiserver_traffic`).
pub type Traffic = std::collections::BTreeMap<String, f64>;

/// One class of requests' durations as the API server's histogram
/// (`apiserver_request_duration_seconds`) counts them, summed over resources: each bucket's
/// upper bound in microseconds (`u64::MAX`: `+Inf`) → the requests that took at most that.
pub type Histogram = std::collections::BTreeMap<u64, f64>;

/// What the API server has served so far, by its own metrics.
pub struct Served {
    pub traffic: Traffic,
    /// Reads (GET, LIST) and writes (POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION);
    /// watches and other long-running requests are not timed by the histogram's SLO view.
    pub latency: [Histogram; 2],
}

/// The class (0: read, 1: write) of a verb as the request-duration histogram labels it.
fn latency_class(verb: &str) -> Option<usize> {
    match verb {
        "GET" | "LIST" => Some(0),
        "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE" | "DELETECOLLECTION" => Some(1),
        _ => None,
    }
}

/// What the API server has served so far, by what it counts: requests by verb and resource,
/// watch events and their bytes by resource, response bytes by verb and resource, and the
/// requests' durations. The bench's own seeding, churn and checker are the same for every
/// run, so two runs' differences are the controller managers'.
pub async fn apiserver_traffic(plane: &envtest::ControlPlane) -> Served {
    let text = plane.metrics().await;
    let mut traffic = Traffic::new();
    let mut latency: [Histogram; 2] = Default::default();
    for (name, labels, value) in envtest::samples(&text) {
        let label = |key: &str| {
            labels
                .iter()
                .find(|(k, _)| k == key)
                .map_or("", |(_, v)| v.as_str())
        };
        let resource = match label("subresource") {
            "" => label("resource").to_string(),
            sub => format!("{}/{sub}", label("resource")),
        };
        let key = match name {
            "apiserver_request_total" => format!("requests {} {resource}", label("verb")),
            "apiserver_response_sizes_sum" => {
                format!("response bytes {} {resource}", label("verb"))
            }
            // Labelled by resource in current releases, by kind in older ones.
            "apiserver_watch_events_total" => {
                format!("watch events {}{}", label("resource"), label("kind"))
            }
            "apiserver_watch_events_sizes_sum" => {
                format!("watch event bytes {}{}", label("resource"), label("kind"))
            }
            "apiserver_request_duration_seconds_bucket" => {
                if let Some(class) = latency_class(label("verb")) {
                    let bound = match label("le") {
                        "+Inf" => u64::MAX,
                        le => le.parse::<f64>().map_or(u64::MAX, |s| (s * 1e6) as u64),
                    };
                    *latency[class].entry(bound).or_insert(0.0) += value;
                }
                continue;
            }
            _ => continue,
        };
        *traffic.entry(key).or_insert(0.0) += value;
    }
    Served { traffic, latency }
}

/// The `q` quantile, in seconds, of the requests counted between two readings of one
/// histogram, interpolated within its bucket as Prometheus' `histogram_quantile` does; with
/// how many there were.
fn quantile(before: &Histogram, after: &Histogram, q: f64) -> (Option<f64>, f64) {
    let grown: Vec<(u64, f64)> = after
        .iter()
        .map(|(bound, count)| (*bound, count - before.get(bound).copied().unwrap_or(0.0)))
        .collect();
    let total = grown.last().map_or(0.0, |(_, count)| *count);
    if total <= 0.0 {
        return (None, total);
    }
    let rank = q * total;
    let (mut lower, mut below) = (0u64, 0.0);
    for (bound, count) in grown {
        if count >= rank {
            if bound == u64::MAX {
                return (Some(lower as f64 / 1e6), total);
            }
            let within = if count > below {
                (rank - below) / (count - below)
            } else {
                0.0
            };
            return (
                Some((lower as f64 + (bound - lower) as f64 * within) / 1e6),
                total,
            );
        }
        (lower, below) = (bound, count);
    }
    (None, total)
}

/// `reads p50 / p99 (n); writes p50 / p99 (n)` of the requests the API server served between
/// two readings, in milliseconds.
pub fn latency_between(before: &Served, after: &Served) -> String {
    let class = |i: usize, name: &str| {
        let (p50, total) = quantile(&before.latency[i], &after.latency[i], 0.50);
        let (p99, _) = quantile(&before.latency[i], &after.latency[i], 0.99);
        let ms = |s: Option<f64>| s.map_or_else(|| "-".into(), |s| format!("{:.0}", s * 1e3));
        format!("{name} {} / {} ms ({total:.0})", ms(p50), ms(p99))
    };
    format!("{}; {}", class(0, "reads"), class(1, "writes"))
}

/// The counts that grew between two `apiserver_traffic` readings, one per line.
pub fn traffic_between(before: &Traffic, after: &Traffic) -> String {
    after
        .iter()
        .filter_map(|(key, value)| {
            let grew = value - before.get(key).copied().unwrap_or(0.0);
            (grew > 0.0).then(|| format!("  {key}: {grew:.0}\n"))
        })
        .collect()
}

/// The status writes and node patches of an `apiserver_traffic` reading: quota, PDB, node.
pub fn writes(traffic: &Traffic) -> [f64; 3] {
    let count = |key: &str| traffic.get(key).copied().unwrap_or(0.0);
    [
        count("requests PUT resourcequotas/status"),
        count("requests PUT poddisruptionbudgets/status"),
        count("requests PATCH nodes"),
    ]
}
