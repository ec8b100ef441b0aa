//! The demo behind `cargo run --release -p kcm-try`: a small believable cluster on an
//! in-process kube-testserver, kcm's five controllers running against it (the library, as
//! the binary runs it), kcm-nodesim playing the kubelets of the nodes the pods run on, a
//! script of churn ending in a node drain, and the table of what kcm keeps true.
//! Its tests play the script and check the table it ends with.

pub mod drain;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kcm_nodesim::{READY_ANNOTATION, RUN_FOR_ANNOTATION, Simulator};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kube_testserver::TestServer;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use drain::{Drain, Progress};

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The nodes kcm-nodesim plays the kubelets of, `worker-0` …: the pods run there, and its
/// scheduler places new pods among them.
const WORKERS: usize = 3;
const WORKER_PREFIX: &str = "worker-";
/// The worker the script drains (`worker-0`): it runs the two web pods that stay Ready.
const DRAIN_NODE: &str = "worker-0";
/// Nodes at the start, workers included: under 100, so the TTL step is 0 s until the churn
/// adds more. The others are only registered: no pod runs there.
const FIRST_NODES: usize = 96;
/// Nodes after the churn: over 100, so the TTL moves to the 15 s step.
const LAST_NODES: usize = 120;
/// The ReplicaSet of Deployment shop/web, and its pods' labels.
const WEB_RS: &str = "web-5d8f7c9b4";
const WEB_SELECTOR: &str = "app=web,pod-template-hash=5d8f7c9b4";
/// How often the demo's ReplicaSet controller compares pods with replicas.
const RS_SYNC: Duration = Duration::from_millis(500);
const TTL_ANNOTATION: &str = "node.alpha.kubernetes.io/ttl";
const CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";
/// The entries of the stale StorageVersion; one names an API server that is gone.
const STORAGE_VERSION_SERVERS: [&str; 2] = ["kube-apiserver-a", "kube-apiserver-gone"];

/// kube-testserver with kcm, the kubelets and the demo's ReplicaSet controller running
/// against it.
pub struct Demo {
    server: TestServer,
    client: Client,
    metrics: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    kcm: Option<JoinHandle<Result<(), kcm::app::AppError>>>,
    kubelets: Option<Simulator>,
    replicaset: JoinHandle<()>,
    drain: Mutex<Option<Drain>>,
}

/// One step of the churn, playing the parts of the controllers and users kcm does not
/// replace, so the table has something to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    ScaleWeb,
    RunJobs,
    AddNodes,
    UnreadyWeb,
    DrainNode,
    ReadyWeb,
}

/// The churn, in order.
pub const SCRIPT: [Step; 6] = [
    Step::ScaleWeb,
    Step::RunJobs,
    Step::AddNodes,
    Step::UnreadyWeb,
    Step::DrainNode,
    Step::ReadyWeb,
];

/// What the script tells as it plays.
#[derive(Debug, Clone, Copy)]
pub enum Note<'a> {
    /// A step, before it runs.
    Step(Step),
    /// A line of the drain's output, as `kubectl drain` prints it.
    Drain(&'a str),
    /// The table once the step's effects have settled.
    Settled(Step, &'a str),
}

impl Step {
    pub fn what(self) -> &'static str {
        match self {
            Step::ScaleWeb => {
                "scale Deployment shop/web from 3 to 5 replicas: quota shop/compute is at its 5 pods"
            }
            Step::RunJobs => {
                "run 2 more jobs in namespace batch: their pods finish after 1s, so the quota leaves them out"
            }
            Step::AddNodes => "add 24 nodes (96 -> 120): the TTL step moves from 0s to 15s",
            Step::UnreadyWeb => {
                "3 of the 5 web pods fail their readiness probe: PDB shop/web allows no disruption"
            }
            Step::DrainNode => {
                "drain node worker-0, which runs the 2 Ready web pods: PDB shop/web refuses their eviction"
            }
            Step::ReadyWeb => {
                "the 3 web pods pass their probe again: the drain goes on, their replacements run on other nodes"
            }
        }
    }
}

impl Demo {
    /// Starts the server, seeds the cluster, starts the kubelets, the demo's ReplicaSet
    /// controller and kcm with its HTTP listener on `metrics` (plain HTTP on loopback).
    pub async fn start(metrics_port: u16) -> Result<Self, Error> {
        let server = TestServer::start_with(kube_testserver::Options::default()).await?;
        seed(&server)?;
        let client = server.client();
        let kubelets = Simulator::start(
            client.clone(),
            kcm_nodesim::Config {
                nodes: WORKERS,
                node_prefix: WORKER_PREFIX.into(),
                cpu: "2".into(),
                memory: "4Gi".into(),
                ..kcm_nodesim::Config::default()
            },
        )
        .await?;
        let replicaset = tokio::spawn(play_replicaset(client.clone()));
        let metrics = SocketAddr::from(([127, 0, 0, 1], metrics_port));
        let args = [
            "kcm".to_string(),
            format!("--kubeconfig={}", server.kubeconfig_path().display()),
            "--bind-address=127.0.0.1".into(),
            format!("--port={metrics_port}"),
            "--leader-elect=false".into(),
            "--feature-gates=StorageVersionAPI=true".into(),
            // kube-testserver's protobuf table lacks fields the kubelets write (a pod's
            // hostIPs, a container's readinessProbe): in protobuf kcm's pod watch would fail.
            "--kube-api-content-type=application/json".into(),
        ];
        let settings = <kcm::cli::Options as clap::Parser>::try_parse_from(args)?.validate()?;
        let config =
            kcm::runtime::connection::client::load_config(settings.kubeconfig.as_deref()).await?;
        let identity = kcm::runtime::leader::default_identity();
        let (stop, stopped) = oneshot::channel::<()>();
        let kcm = tokio::spawn(kcm::app::run_with_config(
            settings,
            config,
            identity,
            kcm::runtime::clock::system(),
            async move {
                let _ = stopped.await;
            },
        ));
        Ok(Self {
            server,
            client,
            metrics,
            stop: Some(stop),
            kcm: Some(kcm),
            kubelets: Some(kubelets),
            replicaset,
            drain: Mutex::new(None),
        })
    }

    pub fn kubeconfig(&self) -> &Path {
        self.server.kubeconfig_path()
    }

    pub fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.metrics)
    }

    pub async fn run_step(&self, step: Step) -> Result<(), Error> {
        let shop = Api::<Pod>::namespaced(self.client.clone(), "shop");
        match step {
            Step::ScaleWeb => {
                // The Deployment controller's part: replicas up; the demo's ReplicaSet
                // controller then makes 2 pods, which the scheduler places.
                let scale = Patch::Merge(json!({ "spec": { "replicas": 5 } }));
                let params = PatchParams::default();
                Api::<Deployment>::namespaced(self.client.clone(), "shop")
                    .patch("web", &params, &scale)
                    .await?;
                Api::<ReplicaSet>::namespaced(self.client.clone(), "shop")
                    .patch(WEB_RS, &params, &scale)
                    .await?;
            }
            Step::RunJobs => {
                // A user's two Jobs and the Job controller's part, a pod each; the kubelet
                // runs them for the 1 s their template's annotation says.
                let jobs = Api::<Job>::namespaced(self.client.clone(), "batch");
                let pods = Api::<Pod>::namespaced(self.client.clone(), "batch");
                for name in ["job-2", "job-3"] {
                    let job = jobs
                        .create(
                            &PostParams::default(),
                            &serde_json::from_value(job(name, Some("1s")))?,
                        )
                        .await?;
                    let pod = pod_of(&serde_json::to_value(&job)?, name);
                    pods.create(&PostParams::default(), &serde_json::from_value(pod)?)
                        .await?;
                }
            }
            Step::AddNodes => {
                for i in FIRST_NODES - WORKERS + 1..=LAST_NODES - WORKERS {
                    put(&self.server, node(i))?;
                }
            }
            Step::UnreadyWeb => {
                // The probes of the web pods off the node to drain fail (nodesim's
                // annotation); the containers keep running. The two on it stay Ready: the
                // API server evicts an unready pod without asking the budget.
                let unready = Patch::Merge(
                    json!({ "metadata": { "annotations": { READY_ANNOTATION: "false" } } }),
                );
                for pod in web_pods(&shop).await? {
                    if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(DRAIN_NODE) {
                        shop.patch(&pod.name_any(), &PatchParams::default(), &unready)
                            .await?;
                    }
                }
            }
            Step::DrainNode => {
                // Without kube's default retry, which would retry a refusal (429) at once
                // with backoff: kubectl prints each and waits 5 s.
                let mut config = kube::Config::new(self.server.url().parse()?);
                config.default_retry = false;
                let drain = Drain::start(Client::try_from(config)?, DRAIN_NODE);
                *self.drain.lock().unwrap_or_else(|e| e.into_inner()) = Some(drain);
            }
            Step::ReadyWeb => {
                let ready = Patch::Merge(
                    json!({ "metadata": { "annotations": { READY_ANNOTATION: null } } }),
                );
                for pod in web_pods(&shop).await? {
                    if pod.annotations().contains_key(READY_ANNOTATION) {
                        shop.patch(&pod.name_any(), &PatchParams::default(), &ready)
                            .await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Stops the demo's actors, then kcm as SIGTERM would, then the server.
    pub async fn stop(mut self) -> Result<(), Error> {
        self.replicaset.abort();
        self.drain.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(kubelets) = self.kubelets.take() {
            kubelets.shutdown().await;
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(kcm) = self.kcm.take() {
            kcm.await??;
        }
        self.server.shutdown().await;
        Ok(())
    }

    /// Whether kcm has stopped by itself (it failed; its log says why).
    pub fn kcm_failed(&self) -> bool {
        self.kcm.as_ref().is_some_and(|k| k.is_finished())
    }

    /// The drain's progress, once the script started it.
    pub fn drain_progress(&self) -> Option<Progress> {
        self.drain
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(Drain::progress)
    }

    /// The whole script without pauses: each step once the table has settled (unchanged
    /// for `quiet`) and what the step sets going has happened, `note` told as it goes;
    /// returns the table the script ends with.
    pub async fn script(
        &self,
        quiet: Duration,
        deadline: Duration,
        mut note: impl FnMut(Note<'_>),
    ) -> Result<String, Error> {
        let mut told = 0;
        let mut table = self
            .settle(None, quiet, deadline, &mut note, &mut told)
            .await?;
        for step in SCRIPT {
            note(Note::Step(step));
            self.run_step(step).await?;
            table = self
                .settle(Some(step), quiet, deadline, &mut note, &mut told)
                .await?;
            note(Note::Settled(step, &table));
        }
        Ok(table)
    }

    /// Waits until the table has not changed for `quiet` and what the script waits for
    /// `after` the step (None: the seeding) has happened, telling the drain's lines from
    /// the `told`th on; returns the table.
    async fn settle(
        &self,
        after: Option<Step>,
        quiet: Duration,
        deadline: Duration,
        note: &mut impl FnMut(Note<'_>),
        told: &mut usize,
    ) -> Result<String, Error> {
        let poll = Duration::from_millis(250);
        let started = tokio::time::Instant::now();
        let mut last = String::new();
        let mut since = tokio::time::Instant::now();
        loop {
            let (table, drain) = self.view().await?;
            for line in drain.iter().flat_map(|d| &d.lines[*told..]) {
                note(Note::Drain(line));
            }
            *told = drain.as_ref().map_or(0, |d| d.lines.len());
            if table != last {
                last = table;
                since = tokio::time::Instant::now();
            } else if since.elapsed() >= quiet && self.reached(after, drain.as_ref()).await? {
                return Ok(last);
            }
            if started.elapsed() > deadline {
                let what = after.map_or("the seeding", Step::what);
                return Err(format!("not settled {deadline:?} after {what}:\n{last}").into());
            }
            if self.kcm_failed() {
                return Err("kcm stopped; see its log".into());
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// Whether what `after` sets going has happened: what the next step builds on, so a
    /// slow machine slows the script down rather than changing its story.
    async fn reached(&self, after: Option<Step>, drain: Option<&Progress>) -> Result<bool, Error> {
        let web = Api::<PodDisruptionBudget>::namespaced(self.client.clone(), "shop")
            .get_status("web")
            .await?
            .status
            .unwrap_or_default();
        let healthy = |n: i32| web.current_healthy == Some(n);
        Ok(match after {
            None => healthy(3),
            Some(Step::ScaleWeb | Step::AddNodes) => healthy(5),
            Some(Step::RunJobs) => {
                let finished = ListParams::default().fields("status.phase=Succeeded");
                let pods = Api::<Pod>::namespaced(self.client.clone(), "batch");
                healthy(5) && pods.list(&finished).await?.items.len() == 2
            }
            Some(Step::UnreadyWeb) => healthy(2) && web.disruptions_allowed == Some(0),
            Some(Step::DrainNode) => drain.is_some_and(|d| d.refusals > 0),
            Some(Step::ReadyWeb) => {
                healthy(5) && drain.is_some_and(|d| d.phase == drain::Phase::Drained)
            }
        })
    }

    /// What the five controllers keep true, read from the API server, and the drain's
    /// state.
    pub async fn table(&self) -> Result<String, Error> {
        Ok(self.view().await?.0)
    }

    /// The table and the drain's progress it shows.
    async fn view(&self) -> Result<(String, Option<Progress>), Error> {
        let drain = self.drain_progress();
        let mut out = String::new();
        out += &quota_rows(&self.client).await?;
        out += &pdb_rows(&self.client).await?;
        out += &node_rows(&self.client).await?;
        out += &claim_rows(&self.client).await?;
        out += &storage_version_rows(&self.client).await?;
        if let Some(drain) = &drain {
            out += "\n";
            out += &drain_rows(drain);
        }
        Ok((out, drain))
    }
}

/// The ReplicaSet controller's part for shop/web, which kcm does not replace: as many pods
/// as the ReplicaSet's replicas, not counting terminating ones, so an evicted pod is
/// replaced at once. The scheduler places the new pods; a create the quota refuses (the
/// evicted pod still counts until it is gone) is tried again at the next sync, as the
/// controller requeues. The demo only scales up.
async fn play_replicaset(client: Client) {
    let replicasets = Api::<ReplicaSet>::namespaced(client.clone(), "shop");
    let pods = Api::<Pod>::namespaced(client, "shop");
    let mut tick = tokio::time::interval(RS_SYNC);
    loop {
        tick.tick().await;
        let _ = sync_web(&replicasets, &pods).await;
    }
}

async fn sync_web(replicasets: &Api<ReplicaSet>, pods: &Api<Pod>) -> Result<(), Error> {
    let rs = replicasets.get(WEB_RS).await?;
    let replicas = rs.spec.replicas.unwrap_or(1);
    let all = web_pods(pods).await?;
    let active = all
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count();
    // Names go on from the highest index, so a replacement never takes an evicted pod's.
    let next = all
        .iter()
        .filter_map(|p| {
            p.name_any()
                .strip_prefix(&format!("{WEB_RS}-"))?
                .parse::<usize>()
                .ok()
        })
        .max()
        .unwrap_or(0)
        + 1;
    let rs = serde_json::to_value(&rs)?;
    let missing = usize::try_from(replicas)?.saturating_sub(active);
    for index in next..next + missing {
        let pod = pod_of(&rs, &format!("{WEB_RS}-{index}"));
        pods.create(&PostParams::default(), &serde_json::from_value(pod)?)
            .await?;
    }
    Ok(())
}

/// The web ReplicaSet's pods.
async fn web_pods(pods: &Api<Pod>) -> Result<Vec<Pod>, Error> {
    Ok(pods
        .list(&ListParams::default().labels(WEB_SELECTOR))
        .await?
        .items)
}

/// Rows with columns padded to the widest cell, two spaces apart.
fn columns(rows: &[Vec<String>]) -> String {
    let width = |i: usize| {
        rows.iter()
            .filter_map(|r| r.get(i))
            .map(|c| c.chars().count())
            .max()
            .unwrap_or(0)
    };
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = width(i)))
            .collect();
        out += cells.join("  ").trim_end();
        out.push('\n');
    }
    out
}

fn header(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

async fn quota_rows(client: &Client) -> Result<String, Error> {
    let mut quotas = Api::<ResourceQuota>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    quotas.sort_by_key(|q| (q.namespace(), q.name_any()));
    let mut rows = vec![header(&["RESOURCEQUOTA", "RESOURCE", "USED", "HARD"])];
    for quota in &quotas {
        let spec = quota.spec.clone().unwrap_or_default();
        let status = quota.status.clone().unwrap_or_default();
        let mut name = format!(
            "{}/{}",
            quota.namespace().unwrap_or_default(),
            quota.name_any()
        );
        if let Some(scopes) = spec.scopes.filter(|s| !s.is_empty()) {
            name += &format!(" [{}]", scopes.join(","));
        }
        let hard: BTreeMap<_, _> = spec.hard.unwrap_or_default();
        let used = status.used.unwrap_or_default();
        let status_hard = status.hard.unwrap_or_default();
        for (i, resource) in hard.keys().enumerate() {
            let show = |m: &BTreeMap<
                String,
                k8s_openapi::apimachinery::pkg::api::resource::Quantity,
            >| { m.get(resource).map_or("-".to_string(), |q| q.0.clone()) };
            let label = if i == 0 { name.clone() } else { String::new() };
            rows.push(vec![
                label,
                resource.clone(),
                show(&used),
                show(&status_hard),
            ]);
        }
    }
    Ok(columns(&rows) + "\n")
}

async fn pdb_rows(client: &Client) -> Result<String, Error> {
    let mut pdbs = Api::<PodDisruptionBudget>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    pdbs.sort_by_key(|p| (p.namespace(), p.name_any()));
    let mut rows = vec![header(&[
        "PODDISRUPTIONBUDGET",
        "EXPECTED",
        "HEALTHY",
        "DESIRED",
        "ALLOWED",
    ])];
    for pdb in &pdbs {
        let name = format!("{}/{}", pdb.namespace().unwrap_or_default(), pdb.name_any());
        let status = pdb.status.clone().unwrap_or_default();
        let show = |v: Option<i32>| v.map_or("-".to_string(), |n| n.to_string());
        let row = vec![
            name,
            show(status.expected_pods),
            show(status.current_healthy),
            show(status.desired_healthy),
            show(status.disruptions_allowed),
        ];
        rows.push(row);
    }
    Ok(columns(&rows) + "\n")
}

async fn node_rows(client: &Client) -> Result<String, Error> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let mut by_ttl: BTreeMap<String, usize> = BTreeMap::new();
    for node in &nodes {
        let ttl = node
            .annotations()
            .get(TTL_ANNOTATION)
            .map_or("unset".to_string(), |v| format!("{v}s"));
        *by_ttl.entry(ttl).or_default() += 1;
    }
    let mut rows = vec![header(&["NODES", "TTL ANNOTATION", "NODES WITH IT"])];
    for (i, (ttl, count)) in by_ttl.into_iter().enumerate() {
        let total = if i == 0 {
            nodes.len().to_string()
        } else {
            String::new()
        };
        rows.push(vec![total, ttl, count.to_string()]);
    }
    Ok(columns(&rows) + "\n")
}

async fn claim_rows(client: &Client) -> Result<String, Error> {
    let claims = Api::<ResourceClaim>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let mut pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    pods.retain(|p| p.spec.as_ref().is_some_and(|s| s.resource_claims.is_some()));
    pods.sort_by_key(|p| (p.namespace(), p.name_any()));
    let mut rows = vec![header(&["POD", "CLAIM", "GENERATED", "IN POD STATUS"])];
    for pod in &pods {
        let recorded = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.clone())
            .unwrap_or_default();
        for wanted in pod
            .spec
            .iter()
            .flat_map(|s| s.resource_claims.iter().flatten())
        {
            let generated = claims
                .iter()
                .filter(|c| {
                    c.namespace() == pod.namespace()
                        && c.annotations().get(CLAIM_NAME_ANNOTATION) == Some(&wanted.name)
                        && c.owner_references()
                            .iter()
                            .any(|o| Some(&o.uid) == pod.metadata.uid.as_ref())
                })
                .count();
            let in_status = recorded
                .iter()
                .any(|r| r.name == wanted.name && r.resource_claim_name.is_some());
            rows.push(vec![
                format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()),
                wanted.name.clone(),
                generated.to_string(),
                if in_status { "yes" } else { "no" }.to_string(),
            ]);
        }
    }
    Ok(columns(&rows) + "\n")
}

async fn storage_version_rows(client: &Client) -> Result<String, Error> {
    let svs = Api::<StorageVersion>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let mut rows = vec![header(&[
        "STORAGEVERSION",
        "API SERVERS",
        "ENTRIES REMOVED",
    ])];
    for sv in &svs {
        let ids: Vec<String> = sv
            .status
            .iter()
            .flat_map(|s| s.storage_versions.iter().flatten())
            .map(|e| e.api_server_id.clone())
            .collect();
        let removed = STORAGE_VERSION_SERVERS.len().saturating_sub(ids.len());
        rows.push(vec![sv.name_any(), ids.join(","), removed.to_string()]);
    }
    Ok(columns(&rows))
}

/// The drain's row: where it stands, what is left, how often a budget refused it.
fn drain_rows(drain: &Progress) -> String {
    let rows = [
        header(&["DRAIN", "STATE", "PODS LEFT", "EVICTED", "REFUSALS"]),
        vec![
            drain.node.clone(),
            drain.phase.name().to_string(),
            drain.left.to_string(),
            drain.evicted.to_string(),
            drain.refusals.to_string(),
        ],
    ];
    columns(&rows)
}

fn node(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": format!("node-{i:03}"), "labels": { "kubernetes.io/hostname": format!("node-{i:03}") } },
        "status": { "conditions": [{ "type": "Ready", "status": "True" }] },
    })
}

fn worker(i: usize) -> String {
    format!("{WORKER_PREFIX}{i}")
}

/// A bare pod of one container; `resources` are its requests and limits.
fn pod(namespace: &str, name: &str, labels: Value, resources: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": namespace, "labels": labels },
        "spec": {
            "containers": [{ "name": "main", "image": "registry.k8s.io/pause:3.10", "resources": resources }],
        },
    })
}

/// A pod of `workload`'s template, owned by it: what its controller creates.
fn pod_of(workload: &Value, name: &str) -> Value {
    let template = &workload["spec"]["template"];
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": workload["metadata"]["namespace"],
            "labels": template["metadata"]["labels"],
            "ownerReferences": [owner(workload)],
        },
        "spec": template["spec"],
    });
    if let Some(annotations) = template["metadata"].get("annotations") {
        pod["metadata"]["annotations"] = annotations.clone();
    }
    pod
}

fn owner(obj: &Value) -> Value {
    json!({
        "apiVersion": obj["apiVersion"], "kind": obj["kind"], "controller": true, "blockOwnerDeletion": true,
        "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
    })
}

/// Job `name` in namespace batch, whose pod runs `run_for` (until deleted when None).
fn job(name: &str, run_for: Option<&str>) -> Value {
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": { "name": name, "namespace": "batch" },
        "spec": { "template": {
            "metadata": { "labels": { "app": "job" } },
            "spec": { "restartPolicy": "Never", "containers": [{ "name": "main", "image": "registry.k8s.io/pause:3.10" }] },
        } },
    });
    if let Some(run_for) = run_for {
        job["spec"]["template"]["metadata"]["annotations"] = json!({ RUN_FOR_ANNOTATION: run_for });
    }
    job
}

/// The web pods' template: requests and limits (quota shop/compute wants them) and a
/// readiness probe that passes 2 s after the start.
fn web_template() -> Value {
    json!({
        "metadata": { "labels": { "app": "web" } },
        "spec": { "containers": [{
            "name": "main", "image": "nginx:1.27",
            "resources": {
                "requests": { "cpu": "250m", "memory": "256Mi" },
                "limits": { "cpu": "500m", "memory": "512Mi" },
            },
            "readinessProbe": { "httpGet": { "path": "/", "port": 80 }, "initialDelaySeconds": 2 },
        }] },
    })
}

/// Puts an object in as it is, status included.
fn put(server: &TestServer, obj: Value) -> Result<std::sync::Arc<Value>, Error> {
    server.seed(obj).map_err(api_error)
}

/// Puts a pod in bound to `node`, as a scheduler left it; its kubelet starts it.
fn put_on(server: &TestServer, mut pod: Value, node: &str) -> Result<(), Error> {
    pod["spec"]["nodeName"] = json!(node);
    put(server, pod)?;
    Ok(())
}

fn api_error(err: kube_testserver::ApiError) -> Error {
    format!(
        "kube-testserver: {} {}: {}",
        err.code, err.reason, err.message
    )
    .into()
}

/// A PodDisruptionBudget `spec` (minAvailable or maxUnavailable) over the pods labelled
/// `app`.
fn pdb(
    server: &TestServer,
    namespace: &str,
    name: &str,
    mut spec: Value,
    app: &str,
) -> Result<(), Error> {
    spec["selector"] = json!({ "matchLabels": { "app": app } });
    put(
        server,
        json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": { "name": name, "namespace": namespace },
            "spec": spec,
        }),
    )?;
    Ok(())
}

/// The cluster kcm starts on. The pods run on the workers as a scheduler placed them: the
/// two web pods that stay Ready share the node the script drains, the other pods are on
/// the other workers, so that node stays the most allocated and the scheduler (least
/// allocated first) puts no new pod there.
fn seed(server: &TestServer) -> Result<(), Error> {
    for ns in ["shop", "batch", "ml"] {
        put(
            server,
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }),
        )?;
    }
    for i in 1..=FIRST_NODES - WORKERS {
        put(server, node(i))?;
    }

    // shop: a Deployment with its ReplicaSet and pods, a PDB over them, a compute quota.
    put(
        server,
        json!({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": { "name": "compute", "namespace": "shop" },
            "spec": { "hard": { "pods": "5", "requests.cpu": "4", "requests.memory": "8Gi", "limits.cpu": "8", "limits.memory": "16Gi" } },
        }),
    )?;
    let template = web_template();
    let deployment = put(
        server,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "web", "namespace": "shop", "labels": { "app": "web" } },
            "spec": { "replicas": 3, "selector": { "matchLabels": { "app": "web" } }, "template": template },
        }),
    )?;
    let mut rs_template = template.clone();
    rs_template["metadata"]["labels"]["pod-template-hash"] = json!("5d8f7c9b4");
    let rs = put(
        server,
        json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {
                "name": WEB_RS, "namespace": "shop",
                "labels": { "app": "web", "pod-template-hash": "5d8f7c9b4" },
                "ownerReferences": [owner(&deployment)],
            },
            "spec": {
                "replicas": 3,
                "selector": { "matchLabels": { "app": "web", "pod-template-hash": "5d8f7c9b4" } },
                "template": rs_template,
            },
        }),
    )?;
    for (i, node) in [(1, DRAIN_NODE), (2, DRAIN_NODE), (3, &worker(1))] {
        put_on(server, pod_of(&rs, &format!("{WEB_RS}-{i}")), node)?;
    }
    pdb(server, "shop", "web", json!({ "minAvailable": 2 }), "web")?;
    // A PDB created before its workload: event NoPods.
    pdb(
        server,
        "shop",
        "cache",
        json!({ "minAvailable": 1 }),
        "cache",
    )?;

    // batch: a quota on BestEffort pods and one on the others; a long Job's pod without
    // requests (BestEffort; the script adds two short ones) and a bare report pod with
    // some. PDBs over both: a Job has no scale (event CalculateExpectedPodCountFailed), a
    // bare pod has no controller (event UnmanagedPods).
    put(
        server,
        json!({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": { "name": "best-effort", "namespace": "batch" },
            "spec": { "hard": { "pods": "5" }, "scopes": ["BestEffort"] },
        }),
    )?;
    put(
        server,
        json!({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": { "name": "compute", "namespace": "batch" },
            "spec": { "hard": { "pods": "5", "requests.cpu": "2" }, "scopes": ["NotBestEffort"] },
        }),
    )?;
    let long_job = put(server, job("job-1", None))?;
    put_on(server, pod_of(&long_job, "job-1"), &worker(2))?;
    put_on(
        server,
        pod(
            "batch",
            "report",
            json!({ "app": "report" }),
            json!({ "requests": { "cpu": "100m", "memory": "128Mi" } }),
        ),
        &worker(2),
    )?;
    pdb(
        server,
        "batch",
        "jobs",
        json!({ "maxUnavailable": 1 }),
        "job",
    )?;
    pdb(
        server,
        "batch",
        "report",
        json!({ "maxUnavailable": 1 }),
        "report",
    )?;
    // ml: a DeviceClass, a ResourceClaimTemplate, a pod that uses it, a quota on claims.
    put(
        server,
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": { "name": "gpu.example.com" },
            "spec": { "selectors": [{ "cel": { "expression": "device.driver == \"gpu.example.com\"" } }] },
        }),
    )?;
    put(
        server,
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": { "name": "gpu", "namespace": "ml" },
            "spec": { "spec": { "devices": { "requests": [{ "name": "gpu", "exactly": { "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1 } }] } } },
        }),
    )?;
    put(
        server,
        json!({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": { "name": "gpus", "namespace": "ml" },
            "spec": { "hard": { "count/resourceclaims.resource.k8s.io": "4", "gpu.example.com.deviceclass.resource.k8s.io/devices": "2" } },
        }),
    )?;
    let mut trainer = pod(
        "ml",
        "trainer",
        json!({ "app": "trainer" }),
        json!({ "claims": [{ "name": "gpu" }] }),
    );
    trainer["spec"]["resourceClaims"] =
        json!([{ "name": "gpu", "resourceClaimTemplateName": "gpu" }]);
    // No GPU node has joined: the scheduler leaves the pods Pending.
    trainer["spec"]["nodeSelector"] = json!({ "example.com/gpu": "true" });
    trainer["status"] = json!({ "phase": "Pending" });
    put(server, trainer.clone())?;
    // A pod naming a template that does not exist: event FailedResourceClaimCreation.
    let mut notebook = trainer;
    notebook["metadata"]["name"] = json!("notebook");
    notebook["metadata"]["labels"] = json!({ "app": "notebook" });
    notebook["spec"]["resourceClaims"] =
        json!([{ "name": "gpu", "resourceClaimTemplateName": "gpu-large" }]);
    put(server, notebook)?;

    // A StorageVersion that still names an API server whose identity lease is gone.
    put(
        server,
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {
                "name": STORAGE_VERSION_SERVERS[0], "namespace": "kube-system",
                "labels": { "apiserver.kubernetes.io/identity": "kube-apiserver" },
            },
            "spec": { "holderIdentity": STORAGE_VERSION_SERVERS[0] },
        }),
    )?;
    let entries: Vec<Value> = STORAGE_VERSION_SERVERS
        .iter()
        .map(|id| json!({ "apiServerID": id, "encodingVersion": "apps/v1", "decodableVersions": ["apps/v1"] }))
        .collect();
    put(
        server,
        json!({
            "apiVersion": "internal.apiserver.k8s.io/v1alpha1", "kind": "StorageVersion",
            "metadata": { "name": "apps.deployments" }, "spec": {},
            "status": { "storageVersions": entries, "commonEncodingVersion": "apps/v1" },
        }),
    )?;
    Ok(())
}
