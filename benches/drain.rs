//! What a drain costs on the living cluster (kcm_testsupport::living: kube-apiserver v1.36,
//! kube-scheduler, upstream's workload controllers, `kcm-nodesim`'s kubelets), with upstream's
//! five controllers and then kcm's in the same run. The cluster first holds `KCM_DRAIN_PODS`
//! background pods (default 10 000; 100 a namespace, one `minAvailable: 1` PDB over each
//! namespace's pods), left Pending by `schedulerName: background` so that no node runs them and
//! no controller ever deletes them. Then, per side: the five controllers start and must write
//! every background PDB's status (their specs are bumped first, so a status left by the
//! previous side does not count); 10 Deployments × 5 pods, each under a `maxUnavailable: 1` PDB,
//! run on one node (the pool's other nodes cordoned until then); `kubectl drain` of that node.
//! Reported: the drain's duration, its refused evictions, and the lag from a pod turning Ready
//! (as the bench's watch shows it) to the first status of its PDB that counts it.
//!
//! `cargo bench --profile dev --bench drain`; `KCM_BIN=target/release/kcm` measures a release
//! build of kcm (else the kcm binary of the bench's profile). Needs the real control plane's
//! binaries (kcm_testsupport::envtest); without them it says what is missing and stops.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kcm_testsupport::living::{self, LivingCluster, POOL, Side};
use kcm_testsupport::proc::usage;
use kcm_testsupport::{Kcm, eventually};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const PODS_PER_NAMESPACE: usize = 100;
/// Label of the background namespaces' PDBs, to find them all with one list.
const BACKGROUND: &str = "drain.kcm.dev/background";
/// Creates in flight while seeding: enough to keep the API server busy on two cores.
const IN_FLIGHT: usize = 64;
const DEPLOYMENTS: usize = 10;
const REPLICAS: usize = 5;
/// The drained node and the nodes that take its pods' replacements.
const POOL_NODES: usize = 6;
/// The API server's refusal of an eviction past a budget, which kubectl drain prints per retry.
const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
/// Bounds of the phases: a side's sync at 10 000 pods, pods turning Ready, the drain itself.
const SYNC_DEADLINE: Duration = Duration::from_secs(600);
const READY_DEADLINE: Duration = Duration::from_secs(180);
const DRAIN_DEADLINE: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(250);

#[tokio::main]
async fn main() {
    let Some(cluster) = living::shared() else {
        return;
    };
    let client = cluster.plane.client().await;
    let pods = std::env::var("KCM_DRAIN_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    println!("load average before: {}", load_average());
    let started = Instant::now();
    seed_background(&client, pods).await;
    println!(
        "{pods} background pods in {} namespaces created in {:.1?}",
        pods.div_ceil(PODS_PER_NAMESPACE),
        started.elapsed()
    );
    let mut figures = Vec::new();
    for (round, side) in Side::BOTH.into_iter().enumerate() {
        let figure = measure(cluster, &client, side, round + 2).await;
        println!("{} done: {figure:?}", side.name());
        figures.push(figure);
    }
    println!("load average after: {}", load_average());
    let kcm_bin = std::env::var("KCM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kcm").into());
    println!("\n{pods} background pods; kcm binary {kcm_bin}\n");
    println!("| figure | upstream | kcm |\n|---|---|---|");
    let rows: [(&str, Cell); 8] = [
        ("every background PDB's status, from start", |f| {
            format!("{:.1?}", f.synced)
        }),
        ("drain duration", |f| format!("{:.1?}", f.drain)),
        ("drain completed", |f| f.completed.to_string()),
        ("refused evictions", |f| f.refused.to_string()),
        ("Ready → PDB status, 50 pods starting", |f| {
            f.lag_start.clone()
        }),
        ("Ready → PDB status, the drain's replacements", |f| {
            f.lag_drain.clone()
        }),
        ("the five's CPU, start to end", |f| {
            format!("{:.2} s", f.cpu)
        }),
        ("the five's peak RSS", |f| format!("{:.0} MiB", f.peak)),
    ];
    for (name, cell) in rows {
        println!("| {name} | {} | {} |", cell(&figures[0]), cell(&figures[1]));
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `pods` Pending pods over namespaces of [`PODS_PER_NAMESPACE`], each namespace with a
/// `minAvailable: 1` PDB over its pods.
async fn seed_background(client: &Client, pods: usize) {
    let namespaces: Vec<String> = (0..pods.div_ceil(PODS_PER_NAMESPACE))
        .map(|n| format!("drain-bg-{n:03}"))
        .collect();
    futures::stream::iter(namespaces.clone())
        .map(|ns| async move {
            let namespaces: Api<Namespace> = Api::all(client.clone());
            create(&namespaces, json!({ "metadata": { "name": ns } })).await;
            let pdb = json!({
                "metadata": { "name": "bg", "labels": { BACKGROUND: "true" } },
                "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "bg" } } },
            });
            create(
                &Api::<PodDisruptionBudget>::namespaced(client.clone(), &ns),
                pdb,
            )
            .await;
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    futures::stream::iter(0..pods)
        .map(|i| {
            let api = Api::<Pod>::namespaced(client.clone(), &namespaces[i / PODS_PER_NAMESPACE]);
            async move {
                let pod = json!({
                    "metadata": { "name": format!("bg-{i}"), "labels": { "app": "bg" } },
                    "spec": {
                        // kube-scheduler leaves a pod of another scheduler alone: it stays
                        // Pending, run by no node and deleted by no controller.
                        "schedulerName": "background",
                        "containers": [{
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } },
                        }],
                    },
                });
                create(&api, pod).await;
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
}

async fn create<K>(api: &Api<K>, body: Value)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let object: K = serde_json::from_value(body.clone()).expect("a valid object");
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {body}: {e}"));
}

/// How one row of the table shows a side's figures.
type Cell = fn(&Figures) -> String;

/// One side's figures.
#[derive(Debug)]
struct Figures {
    synced: Duration,
    drain: Duration,
    completed: bool,
    refused: usize,
    /// Ready → PDB status: the pods' first start on the node to drain, then the drain's
    /// replacements.
    lag_start: String,
    lag_drain: String,
    /// CPU seconds and peak RSS (MiB) of the five's process, from its start to the drain's end.
    cpu: f64,
    peak: f64,
}

/// One side's run: the five started and synced, the pool's pods on node 0, the drain, the
/// lags; everything it started is stopped and removed before it returns. `min_available` is
/// written into every background PDB first, so each needs this side's status.
async fn measure(
    cluster: &'static LivingCluster,
    client: &Client,
    side: Side,
    min_available: usize,
) -> Figures {
    let background: Api<PodDisruptionBudget> = Api::all(client.clone());
    let listed = background
        .list(&ListParams::default().labels(BACKGROUND))
        .await
        .expect("background PDBs");
    for pdb in &listed.items {
        let api: Api<PodDisruptionBudget> =
            Api::namespaced(client.clone(), &pdb.namespace().unwrap_or_default());
        let patch = json!({ "spec": { "minAvailable": min_available } });
        api.patch(
            &pdb.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .expect("a background PDB's spec patched");
    }
    let started = Instant::now();
    let five = Five::start(cluster, side);
    eventually(
        &format!("{}: every background PDB's status", side.name()),
        SYNC_DEADLINE,
        || async {
            tokio::time::sleep(POLL).await;
            let pdbs = background
                .list(&ListParams::default().labels(BACKGROUND))
                .await
                .expect("background PDBs");
            pdbs.items.iter().all(|p| {
                p.status
                    .as_ref()
                    .is_some_and(|s| s.observed_generation == p.metadata.generation)
            })
        },
    )
    .await;
    let synced = started.elapsed();

    let pool = Pool::start(cluster, client, side).await;
    let lags = Lags::watch(client, &pool.ns).await;
    pool.cordon(1..POOL_NODES, true).await;
    for d in 0..DEPLOYMENTS {
        pool.workload(&format!("app-{d}")).await;
    }
    let drained = pool.node(0);
    pool.settled("every pod Ready on the node to drain", Some(&drained))
        .await;
    let lag_start = lags.summary();
    pool.cordon(1..POOL_NODES, false).await;
    let drain = drain(cluster, &drained).await;
    if !drain.completed {
        eprintln!("{}: the drain failed:\n{}", side.name(), five.logs());
    }
    pool.settled("every replacement Ready and counted", None)
        .await;
    let lag_drain = lags.summary();
    drop(lags);
    let (cpu, peak) = usage(five.pid());
    pool.remove().await;
    drop(five);
    Figures {
        synced,
        drain: drain.took,
        completed: drain.completed,
        refused: drain.refused,
        lag_start,
        lag_drain,
        cpu,
        peak,
    }
}

/// The five controllers of a side, running until dropped. kcm's come from `KCM_BIN` when it
/// is set, so that a release build is measured while the bench itself is a debug build.
enum Five {
    Harness(living::Five),
    Binary(Kcm),
}

impl Five {
    fn start(cluster: &LivingCluster, side: Side) -> Self {
        match (side, std::env::var_os("KCM_BIN")) {
            (Side::Kcm, Some(bin)) => {
                let plane = cluster.plane;
                Five::Binary(Kcm::start_with(
                    plane.command(PathBuf::from(bin)),
                    plane.log_file(),
                    &plane.kubeconfig,
                    &[
                        "--leader-elect=false",
                        "--feature-gates=StorageVersionAPI=true",
                    ],
                ))
            }
            _ => Five::Harness(cluster.five(side)),
        }
    }

    /// The id of the (one) process that runs the five.
    fn pid(&self) -> u32 {
        match self {
            Five::Harness(five) => five.pids()[0],
            Five::Binary(kcm) => kcm.pid(),
        }
    }

    fn logs(&self) -> String {
        match self {
            Five::Harness(five) => five.logs(),
            Five::Binary(kcm) => kcm.log(),
        }
    }
}

/// A side's namespace and its simulated nodes `<namespace>-<i>`, labelled for it.
struct Pool {
    client: Client,
    ns: String,
    nodes: kcm_nodesim::Simulator,
}

impl Pool {
    async fn start(cluster: &LivingCluster, client: &Client, side: Side) -> Self {
        let (ns, nodes) = living::pool(cluster.plane, client, "drain", side, POOL_NODES).await;
        Self {
            client: client.clone(),
            ns,
            nodes,
        }
    }

    fn node(&self, index: usize) -> String {
        format!("{}-{index}", self.ns)
    }

    async fn cordon(&self, indices: std::ops::Range<usize>, unschedulable: bool) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        for index in indices {
            let patch = json!({ "spec": { "unschedulable": unschedulable } });
            nodes
                .patch(
                    &self.node(index),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
                .expect("a pool node patched");
        }
    }

    /// A `maxUnavailable: 1` PDB, then a Deployment of [`REPLICAS`] pods Ready a second after
    /// they start, on this pool's nodes (no requests: cordons, not room, place them).
    async fn workload(&self, app: &str) {
        let pdb = json!({
            "metadata": { "name": app },
            "spec": { "maxUnavailable": 1, "selector": { "matchLabels": { "app": app } } },
        });
        create(
            &Api::<PodDisruptionBudget>::namespaced(self.client.clone(), &self.ns),
            pdb,
        )
        .await;
        let deployment = json!({
            "metadata": { "name": app },
            "spec": {
                "replicas": REPLICAS,
                "selector": { "matchLabels": { "app": app } },
                "template": {
                    "metadata": { "labels": { "app": app } },
                    "spec": {
                        "terminationGracePeriodSeconds": 5,
                        "nodeSelector": { POOL: self.ns },
                        "containers": [{
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "readinessProbe": {
                                "httpGet": { "path": "/healthz", "port": 8080 },
                                "initialDelaySeconds": 1,
                            },
                        }],
                    },
                },
            },
        });
        create(
            &Api::<Deployment>::namespaced(self.client.clone(), &self.ns),
            deployment,
        )
        .await;
    }

    /// Waits until every Deployment has all its pods healthy (on `on` when given, else off
    /// node 0) and every PDB says so: all healthy, one disruption allowed.
    async fn settled(&self, what: &str, on: Option<&str>) {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), &self.ns);
        let drained = self.node(0);
        eventually(what, READY_DEADLINE, || async {
            tokio::time::sleep(POLL).await;
            let pods = pods.list(&ListParams::default()).await.expect("pods");
            let placed = pods.items.iter().filter(|pod| {
                let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
                on.map_or(node != Some(&drained), |on| node == Some(on))
            });
            let pdbs = pdbs.list(&ListParams::default()).await.expect("pdbs");
            pods.items.len() == DEPLOYMENTS * REPLICAS
                && placed.filter(|pod| healthy(pod)).count() == DEPLOYMENTS * REPLICAS
                && pdbs.items.len() == DEPLOYMENTS
                && pdbs.items.iter().all(|pdb| {
                    pdb.status.as_ref().is_some_and(|s| {
                        s.current_healthy == Some(REPLICAS as i32)
                            && s.disruptions_allowed == Some(1)
                    })
                })
        })
        .await;
    }

    /// Deletes the namespace, waits until it is gone (its pods terminated by the simulated
    /// kubelets), then stops and deletes the nodes, so the next side starts from the background
    /// alone.
    async fn remove(self) {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        namespaces
            .delete(&self.ns, &DeleteParams::default())
            .await
            .expect("the namespace deletion starts");
        eventually("the pool's namespace is gone", READY_DEADLINE, || async {
            tokio::time::sleep(POLL).await;
            matches!(namespaces.get_opt(&self.ns).await, Ok(None))
        })
        .await;
        let names = self.nodes.nodes();
        self.nodes.shutdown().await;
        let nodes: Api<Node> = Api::all(self.client.clone());
        for name in names {
            nodes
                .delete(&name, &DeleteParams::default())
                .await
                .expect("a pool node deleted");
        }
    }
}

/// Ready and not terminating: what a PDB counts as healthy.
fn healthy(pod: &Pod) -> bool {
    let ready = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    pod.metadata.deletion_timestamp.is_none()
        && ready.is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What `kubectl drain` took and how often the API server refused one of its evictions.
struct Drained {
    took: Duration,
    completed: bool,
    refused: usize,
}

async fn drain(cluster: &LivingCluster, node: &str) -> Drained {
    let plane = cluster.plane;
    let mut kubectl = plane.command(living::kubectl(plane));
    kubectl
        .arg(format!("--kubeconfig={}", plane.kubeconfig.display()))
        .args(["drain", node, "--ignore-daemonsets"])
        .arg(format!("--timeout={}s", DRAIN_DEADLINE.as_secs()))
        .stdin(std::process::Stdio::null());
    let started = Instant::now();
    let output = tokio::process::Command::from(kubectl)
        .output()
        .await
        .expect("kubectl runs");
    let took = started.elapsed();
    // Each refusal is one line on stderr: `error when evicting pods/"<pod>" -n "<ns>" (will
    // retry after 5s): Cannot evict pod ...`.
    let refused = String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter(|line| line.contains(REFUSED))
        .count();
    Drained {
        took,
        completed: output.status.success(),
        refused,
    }
}

/// The lag from each pod's turn to Ready to the first status of its PDB that counts it: the
/// first status written after the pod's change (resourceVersions of one etcd are ordered) whose
/// currentHealthy reaches the healthy count the watch saw at that change.
struct Lags {
    state: Arc<Mutex<LagState>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct LagState {
    /// Pods by uid: app and whether healthy.
    pods: HashMap<String, (String, bool)>,
    /// PDBs by name (= app): the resourceVersion, currentHealthy and arrival of the last status.
    pdbs: HashMap<String, (u64, i32, Instant)>,
    /// Ready pods not yet counted: app, resourceVersion, healthy count, arrival.
    waiting: Vec<(String, u64, i32, Instant)>,
    lags: Vec<Duration>,
    /// PDB updates seen (the controller's status writes, and the API server's at each eviction).
    pdb_updates: usize,
    /// Watches that have listed.
    listed: usize,
}

/// An event of either watch.
enum Seen {
    Pod(Box<watcher::Event<Pod>>),
    Pdb(Box<watcher::Event<PodDisruptionBudget>>),
}

fn resource_version(meta: &impl ResourceExt) -> u64 {
    meta.resource_version()
        .and_then(|v| v.parse().ok())
        .unwrap_or_default()
}

impl LagState {
    fn pod(&mut self, pod: &Pod, gone: bool, now: Instant) {
        let uid = pod.uid().unwrap_or_default();
        if gone {
            self.pods.remove(&uid);
            return;
        }
        let app = pod.labels().get("app").cloned().unwrap_or_default();
        let is = healthy(pod);
        let was = self
            .pods
            .insert(uid, (app.clone(), is))
            .is_some_and(|(_, was)| was);
        if is && !was {
            let count = self.pods.values().filter(|(a, h)| *a == app && *h).count() as i32;
            self.waiting.push((app, resource_version(pod), count, now));
            self.count();
        }
    }

    fn pdb(&mut self, pdb: &PodDisruptionBudget, now: Instant) {
        if let Some(status) = &pdb.status {
            let last = (
                resource_version(pdb),
                status.current_healthy.unwrap_or_default(),
                now,
            );
            self.pdbs.insert(pdb.name_any(), last);
            self.pdb_updates += 1;
            self.count();
        }
    }

    /// Moves the waiting pods whose PDB's last status counts them to the lags. A status that
    /// arrived before the pod's change (the two watches are separate streams) gives zero.
    fn count(&mut self) {
        let (pdbs, lags) = (&self.pdbs, &mut self.lags);
        self.waiting
            .retain(|(app, version, count, at)| match pdbs.get(app) {
                Some((pdb_version, healthy, seen)) if pdb_version > version && healthy >= count => {
                    lags.push(seen.saturating_duration_since(*at));
                    false
                }
                _ => true,
            });
    }
}

impl Lags {
    /// Watches the namespace's pods and PDBs from now on (it returns once both have listed).
    async fn watch(client: &Client, ns: &str) -> Self {
        let pods = watcher(
            Api::<Pod>::namespaced(client.clone(), ns),
            Default::default(),
        )
        .map_ok(|event| Seen::Pod(Box::new(event)));
        let pdbs = watcher(
            Api::<PodDisruptionBudget>::namespaced(client.clone(), ns),
            Default::default(),
        )
        .map_ok(|event| Seen::Pdb(Box::new(event)));
        let state = Arc::new(Mutex::new(LagState::default()));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(futures::stream::select(pods, pdbs));
            while let Some(event) = events.next().await {
                let now = Instant::now();
                let mut state = shared.lock().unwrap();
                let Ok(event) = event else { continue };
                match event {
                    Seen::Pod(event) => match *event {
                        watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => {
                            state.pod(&pod, false, now)
                        }
                        watcher::Event::Delete(pod) => state.pod(&pod, true, now),
                        watcher::Event::InitDone => state.listed += 1,
                        watcher::Event::Init => {}
                    },
                    Seen::Pdb(event) => match *event {
                        watcher::Event::Apply(pdb) | watcher::Event::InitApply(pdb) => {
                            state.pdb(&pdb, now)
                        }
                        watcher::Event::InitDone => state.listed += 1,
                        watcher::Event::Init | watcher::Event::Delete(_) => {}
                    },
                }
            }
        });
        eventually("the pod and PDB watches list", READY_DEADLINE, || async {
            state.lock().unwrap().listed >= 2
        })
        .await;
        Self { state, task }
    }

    /// The lags since the last call: "p50 …, p90 …, p99 …, max … (n N), U PDB updates", and
    /// how many Ready pods no status counted yet.
    fn summary(&self) -> String {
        let mut state = self.state.lock().unwrap();
        let mut lags = std::mem::take(&mut state.lags);
        let mut text = format!(
            "{} (n {}), {} PDB updates",
            common::latency_summary(&mut lags),
            lags.len(),
            std::mem::take(&mut state.pdb_updates)
        );
        if !state.waiting.is_empty() {
            text.push_str(&format!(", {} not counted", state.waiting.len()));
        }
        text
    }
}

impl Drop for Lags {
    fn drop(&mut self) {
        self.task.abort();
    }
}
