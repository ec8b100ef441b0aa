//! The demo behind `cargo run --release -p kcm-try`: a small believable cluster on an
//! in-process kube-testserver, kcm's five controllers running against it (the library, as
//! the binary runs it), a script of churn, and the table of what kcm keeps true.
//! `tests/demo.rs` includes this file and checks the table the script ends with.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use kube_testserver::TestServer;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Nodes at the start: under 100, so the TTL step is 0 s until the churn adds more.
const FIRST_NODES: usize = 96;
/// Nodes after the churn: over 100, so the TTL moves to the 15 s step.
const LAST_NODES: usize = 120;
/// The ReplicaSet of Deployment shop/web.
const WEB_RS: &str = "web-5d8f7c9b4";
const TTL_ANNOTATION: &str = "node.alpha.kubernetes.io/ttl";
const CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";
/// The entries of the stale StorageVersion; one names an API server that is gone.
const STORAGE_VERSION_SERVERS: [&str; 2] = ["kube-apiserver-a", "kube-apiserver-gone"];

/// kube-testserver with kcm running against it.
pub struct Demo {
    server: TestServer,
    client: Client,
    metrics: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    kcm: Option<JoinHandle<Result<(), kcm::app::AppError>>>,
}

/// One step of the churn, playing the parts of the controllers and kubelets kcm does not
/// replace, so the table has something to follow.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    ScaleWeb,
    FinishJobs,
    AddNodes,
    UnreadyWeb,
}

/// The churn, in order.
pub const SCRIPT: [Step; 4] = [
    Step::ScaleWeb,
    Step::FinishJobs,
    Step::AddNodes,
    Step::UnreadyWeb,
];

/// The web pods that fail their readiness probe in the last step.
const UNREADY_WEB: std::ops::RangeInclusive<usize> = 3..=5;

impl Step {
    pub fn what(self) -> &'static str {
        match self {
            Step::ScaleWeb => {
                "scale Deployment shop/web from 3 to 5 replicas: quota shop/compute is at its 5 pods"
            }
            Step::FinishJobs => "finish 2 of the 3 jobs in namespace batch",
            Step::AddNodes => "add 24 nodes (96 -> 120): the TTL step moves from 0s to 15s",
            Step::UnreadyWeb => {
                "3 of the 5 web pods fail their readiness probe: PDB shop/web allows no disruption"
            }
        }
    }
}

impl Demo {
    /// Starts the server, seeds the cluster and starts kcm with its HTTP listener on
    /// `metrics` (plain HTTP on loopback).
    pub async fn start(metrics_port: u16) -> Result<Self, Error> {
        let server = TestServer::start_with(kube_testserver::Options::default()).await?;
        seed(&server)?;
        let metrics = SocketAddr::from(([127, 0, 0, 1], metrics_port));
        let args = [
            "kcm".to_string(),
            format!("--kubeconfig={}", server.kubeconfig_path().display()),
            "--bind-address=127.0.0.1".into(),
            format!("--port={metrics_port}"),
            "--leader-elect=false".into(),
            "--feature-gates=StorageVersionAPI=true".into(),
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
        let client = server.client();
        Ok(Self {
            server,
            client,
            metrics,
            stop: Some(stop),
            kcm: Some(kcm),
        })
    }

    pub fn kubeconfig(&self) -> &Path {
        self.server.kubeconfig_path()
    }

    pub fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.metrics)
    }

    pub async fn run_step(&self, step: Step) -> Result<(), Error> {
        match step {
            Step::ScaleWeb => {
                // The Deployment and ReplicaSet controllers' part: replicas up, 2 pods more.
                let scale = Patch::Merge(json!({ "spec": { "replicas": 5 } }));
                let params = PatchParams::default();
                Api::<Deployment>::namespaced(self.client.clone(), "shop")
                    .patch("web", &params, &scale)
                    .await?;
                Api::<ReplicaSet>::namespaced(self.client.clone(), "shop")
                    .patch(WEB_RS, &params, &scale)
                    .await?;
                for i in 4..=5 {
                    web_pod(&self.server, i)?;
                }
            }
            Step::FinishJobs => {
                // The kubelet's part: the containers exited 0.
                let done = Patch::Merge(json!({ "status": {
                    "phase": "Succeeded",
                    "conditions": [{ "type": "Ready", "status": "False", "reason": "PodCompleted" }],
                    "containerStatuses": [container_status(false, json!({ "terminated": { "exitCode": 0, "reason": "Completed" } }))],
                } }));
                let pods = Api::<Pod>::namespaced(self.client.clone(), "batch");
                for name in ["job-1", "job-2"] {
                    pods.patch_status(name, &PatchParams::default(), &done)
                        .await?;
                }
            }
            Step::UnreadyWeb => {
                // The kubelet's part: the readiness probe fails, the containers keep running.
                let unready = Patch::Merge(json!({ "status": {
                    "conditions": [{ "type": "Ready", "status": "False", "reason": "ContainersNotReady" }],
                    "containerStatuses": [container_status(false, json!({ "running": {} }))],
                } }));
                let pods = Api::<Pod>::namespaced(self.client.clone(), "shop");
                for i in UNREADY_WEB {
                    pods.patch_status(&format!("{WEB_RS}-{i}"), &PatchParams::default(), &unready)
                        .await?;
                }
            }
            Step::AddNodes => {
                for i in FIRST_NODES + 1..=LAST_NODES {
                    put(&self.server, node(i))?;
                }
            }
        }
        Ok(())
    }

    /// Stops kcm as SIGTERM would, then the server.
    pub async fn stop(mut self) -> Result<(), Error> {
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

    /// The whole script without pauses: each step once the table has settled (unchanged
    /// for `quiet`), `announce` told first; returns the table the script ends with.
    pub async fn script(
        &self,
        quiet: Duration,
        deadline: Duration,
        mut announce: impl FnMut(Step),
    ) -> Result<String, Error> {
        self.settle(quiet, deadline).await?;
        for step in SCRIPT {
            announce(step);
            self.run_step(step).await?;
            self.settle(quiet, deadline).await?;
        }
        self.table().await
    }

    /// Waits until the table has not changed for `quiet`, then returns it.
    pub async fn settle(&self, quiet: Duration, deadline: Duration) -> Result<String, Error> {
        let poll = Duration::from_millis(250);
        let started = tokio::time::Instant::now();
        let mut last = self.table().await?;
        let mut since = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(poll).await;
            let now = self.table().await?;
            if now != last {
                last = now;
                since = tokio::time::Instant::now();
            } else if since.elapsed() >= quiet {
                return Ok(last);
            }
            if started.elapsed() > deadline {
                return Err(format!("the table still changed after {deadline:?}:\n{last}").into());
            }
            if self.kcm_failed() {
                return Err("kcm stopped; see its log".into());
            }
        }
    }

    /// What the five controllers keep true, read from the API server.
    pub async fn table(&self) -> Result<String, Error> {
        let mut out = String::new();
        out += &quota_rows(&self.client).await?;
        out += &pdb_rows(&self.client).await?;
        out += &node_rows(&self.client).await?;
        out += &claim_rows(&self.client).await?;
        out += &storage_version_rows(&self.client).await?;
        Ok(out)
    }
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

fn node(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": format!("node-{i:03}"), "labels": { "kubernetes.io/hostname": format!("node-{i:03}") } },
        "status": { "conditions": [{ "type": "Ready", "status": "True" }] },
    })
}

/// A running pod; `resources` are its one container's requests and limits.
fn pod(
    namespace: &str,
    name: &str,
    labels: Value,
    resources: Value,
    owner: Option<Value>,
) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": namespace, "labels": labels },
        "spec": {
            "nodeName": "node-001",
            "containers": [{ "name": "main", "image": "registry.k8s.io/pause:3.10", "resources": resources }],
        },
        "status": {
            "phase": "Running",
            "conditions": [{ "type": "Ready", "status": "True" }],
            "containerStatuses": [container_status(true, json!({ "running": {} }))],
        },
    });
    if let Some(owner) = owner {
        pod["metadata"]["ownerReferences"] = json!([owner]);
    }
    pod
}

/// The status of the one container, as the kubelet reports it (kubectl's READY column).
fn container_status(ready: bool, state: Value) -> Value {
    json!({
        "name": "main", "image": "registry.k8s.io/pause:3.10", "imageID": "",
        "ready": ready, "started": state.get("running").is_some(), "restartCount": 0, "state": state,
    })
}

fn owner(kind: &str, api_version: &str, obj: &Value) -> Value {
    json!({
        "apiVersion": api_version, "kind": kind, "controller": true, "blockOwnerDeletion": true,
        "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
    })
}

fn web_resources() -> Value {
    json!({
        "requests": { "cpu": "250m", "memory": "256Mi" },
        "limits": { "cpu": "500m", "memory": "512Mi" },
    })
}

fn web_pod(server: &TestServer, i: usize) -> Result<(), Error> {
    let rs = server
        .store()
        .get(&type_of(server, "apps/v1", "ReplicaSet")?, "shop", WEB_RS)
        .map_err(api_error)?;
    put(
        server,
        pod(
            "shop",
            &format!("{WEB_RS}-{i}"),
            json!({ "app": "web", "pod-template-hash": "5d8f7c9b4" }),
            web_resources(),
            Some(owner("ReplicaSet", "apps/v1", &rs)),
        ),
    )?;
    Ok(())
}

/// Puts an object in as it is, status included.
fn put(server: &TestServer, obj: Value) -> Result<std::sync::Arc<Value>, Error> {
    server.seed(obj).map_err(api_error)
}

fn api_error(err: kube_testserver::ApiError) -> Error {
    format!(
        "kube-testserver: {} {}: {}",
        err.code, err.reason, err.message
    )
    .into()
}

fn type_of(
    server: &TestServer,
    api_version: &str,
    kind: &str,
) -> Result<kube_testserver::ResourceType, Error> {
    server
        .type_of(&json!({ "apiVersion": api_version, "kind": kind }))
        .ok_or_else(|| format!("kube-testserver serves no {api_version} {kind}").into())
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

/// The cluster kcm starts on.
fn seed(server: &TestServer) -> Result<(), Error> {
    for ns in ["shop", "batch", "ml"] {
        put(
            server,
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }),
        )?;
    }
    for i in 1..=FIRST_NODES {
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
    let template = json!({
        "metadata": { "labels": { "app": "web" } },
        "spec": { "containers": [{ "name": "main", "image": "registry.k8s.io/pause:3.10", "resources": web_resources() }] },
    });
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
    put(
        server,
        json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {
                "name": WEB_RS, "namespace": "shop",
                "labels": { "app": "web", "pod-template-hash": "5d8f7c9b4" },
                "ownerReferences": [owner("Deployment", "apps/v1", &deployment)],
            },
            "spec": {
                "replicas": 3,
                "selector": { "matchLabels": { "app": "web", "pod-template-hash": "5d8f7c9b4" } },
                "template": rs_template,
            },
        }),
    )?;
    for i in 1..=3 {
        web_pod(server, i)?;
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

    // batch: a quota on BestEffort pods and one on the others; three jobs' pods without
    // requests (BestEffort) and a bare report pod with some. PDBs over both: a Job has no
    // scale (event CalculateExpectedPodCountFailed), a bare pod has no controller (event
    // UnmanagedPods).
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
    for i in 1..=3 {
        let name = format!("job-{i}");
        let job = put(
            server,
            json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": { "name": name, "namespace": "batch" },
                "spec": { "template": {
                    "metadata": { "labels": { "app": "job" } },
                    "spec": { "restartPolicy": "Never", "containers": [{ "name": "main", "image": "registry.k8s.io/pause:3.10" }] },
                } },
            }),
        )?;
        let owner = owner("Job", "batch/v1", &job);
        put(
            server,
            pod(
                "batch",
                &name,
                json!({ "app": "job" }),
                json!({}),
                Some(owner),
            ),
        )?;
    }
    put(
        server,
        pod(
            "batch",
            "report",
            json!({ "app": "report" }),
            json!({ "requests": { "cpu": "100m", "memory": "128Mi" } }),
            None,
        ),
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
        None,
    );
    trainer["spec"]["resourceClaims"] =
        json!([{ "name": "gpu", "resourceClaimTemplateName": "gpu" }]);
    trainer["spec"]
        .as_object_mut()
        .map(|s| s.remove("nodeName"));
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
