//! The scale benchmark of issue 14: all five controllers (the kcm binary, default flags:
//! `--kube-api-qps=20 --kube-api-burst=30`) against kube-testserver holding, before kcm
//! starts, N namespaces each with one ResourceQuota, one PodDisruptionBudget and its pods,
//! plus the nodes:
//!
//! | size | pods | namespaces | nodes |
//! |---|---|---|---|
//! | `a` | 10 000 | 1 000 | 2 000 |
//! | `b` | 150 000 | 10 000 | 5 000 |
//! | `tiny` (smoke test) | 300 | 30 | 120 |
//!
//! It measures kcm's RSS when its stores hold every object (`kcm_store_objects` equals the
//! seeded counts), its peak RSS, its CPU seconds until every quota, PDB and node TTL is right
//! (expected values computed here from the seeded objects, not by kcm's code), the time each
//! kind takes, the writes per controller, then the same after replacing 10 % of the pods
//! (delete + create). Prints markdown rows; asserts no timing.
//!
//! kcm talks HTTPS to the server, as to a cluster's API server, so its CPU includes TLS
//! (`KCM_SCALE_TLS=0`: plain HTTP). The bench prints kcm's CPU per write and the TCP
//! connections it opened, by client.
//!
//! `KCM_SCALE=a cargo bench --bench scale` (or `-- a`; default `a`). `KCM_BIN=<path>` runs
//! another kcm binary (e.g. one built with `--features mimalloc`), `KCM_SCALE_LABEL` names it
//! in the output, `KCM_SCALE_TIMEOUT_SECS` bounds each phase (default 3600). Results are also
//! written to `target/tmp/scale-<size>-<label>.txt`; with both sizes there for a label, the
//! memory per additional pod is printed. `KCM_SCALE_SYNC_ONLY=1` stops once the stores are
//! synced (their figures: time, peak RSS, CPU, bytes the server sent); `KCM_SCALE_KCM_ARGS`
//! adds kcm flags (e.g. `--feature-gates=WatchListClient=false` to list instead of stream).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_testserver::{Options, ResourceType, TestServer};
use serde_json::{Value, json};

mod common;
use common::{free_port, metric_by_label, rss_mib, usage};

const TTL_ANNOTATION: &str = "node.alpha.kubernetes.io/ttl";

#[derive(Clone, Copy)]
struct Size {
    name: &'static str,
    pods: usize,
    namespaces: usize,
    nodes: usize,
}

const SIZES: [Size; 3] = [
    Size {
        name: "a",
        pods: 10_000,
        namespaces: 1_000,
        nodes: 2_000,
    },
    Size {
        name: "b",
        pods: 150_000,
        namespaces: 10_000,
        nodes: 5_000,
    },
    Size {
        name: "tiny",
        pods: 300,
        namespaces: 30,
        nodes: 120,
    },
];

/// One pod as the bench models it: what the expected statuses are computed from.
#[derive(Clone)]
struct PodModel {
    name: String,
    cpu_milli: u64,
    memory_mi: u64,
    ready: bool,
}

fn ns_name(n: usize) -> String {
    format!("ns-{n:05}")
}

fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

/// A pod about the size of a real Deployment's (just under 2 KB of JSON): the fields kcm does
/// not read are there too, since storing them is part of what is measured.
fn pod_json(ns: &str, pod: &PodModel, node: &str) -> Value {
    let ready = if pod.ready { "True" } else { "False" };
    json!({ "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": pod.name, "namespace": ns,
            "labels": { "app": "web", "pod-template-hash": "5d9c7b8f6d", "tier": "frontend" },
            "annotations": { "kubectl.kubernetes.io/restartedAt": "2026-11-01T10:00:00Z" } },
        "spec": {
            "nodeName": node, "serviceAccountName": "default", "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30, "priority": 0, "enableServiceLinks": true,
            "securityContext": { "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } },
            "containers": [{
                "name": "web", "image": "registry.example.com/team/web:1.27.3",
                "imagePullPolicy": "IfNotPresent",
                "ports": [{ "name": "http", "containerPort": 8080, "protocol": "TCP" }],
                "env": [{ "name": "LOG_LEVEL", "value": "info" }, { "name": "PORT", "value": "8080" }],
                "resources": { "requests": { "cpu": format!("{}m", pod.cpu_milli), "memory": format!("{}Mi", pod.memory_mi) },
                               "limits": { "memory": format!("{}Mi", pod.memory_mi * 2) } },
                "readinessProbe": { "httpGet": { "path": "/healthz", "port": 8080, "scheme": "HTTP" }, "periodSeconds": 10 },
                "volumeMounts": [{ "name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true }],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
            }],
            "volumes": [{ "name": "kube-api-access", "projected": { "defaultMode": 420, "sources": [
                { "serviceAccountToken": { "expirationSeconds": 3607, "path": "token" } },
                { "configMap": { "name": "kube-root-ca.crt", "items": [{ "key": "ca.crt", "path": "ca.crt" }] } }
            ] } }],
            "tolerations": [
                { "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 },
                { "key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 }
            ]
        },
        "status": {
            "phase": "Running", "qosClass": "Burstable", "hostIP": "10.0.0.1", "podIP": "10.244.1.2",
            "startTime": "2026-11-01T10:00:00Z",
            "conditions": [
                { "type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-01T10:00:00Z" },
                { "type": "Ready", "status": ready, "lastTransitionTime": "2026-11-01T10:00:05Z" },
                { "type": "ContainersReady", "status": ready, "lastTransitionTime": "2026-11-01T10:00:05Z" },
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-01T10:00:00Z" }
            ],
            "containerStatuses": [{ "name": "web", "ready": pod.ready, "restartCount": 0, "started": true,
                "image": "registry.example.com/team/web:1.27.3", "imageID": "registry.example.com/team/web@sha256:0123456789abcdef",
                "containerID": "containerd://0123456789abcdef", "state": { "running": { "startedAt": "2026-11-01T10:00:02Z" } } }]
        } })
}

fn node_json(name: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": "zone-a", "node.kubernetes.io/instance-type": "m5.xlarge" } },
        "spec": { "podCIDR": "10.244.1.0/24", "providerID": format!("aws:///zone-a/{name}") },
        "status": {
            "capacity": { "cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi" },
            "allocatable": { "cpu": "3800m", "memory": "15Gi", "pods": "110", "ephemeral-storage": "90Gi" },
            "conditions": [
                { "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                  "lastHeartbeatTime": "2026-11-01T10:00:00Z", "lastTransitionTime": "2026-11-01T09:00:00Z" },
                { "type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                  "lastHeartbeatTime": "2026-11-01T10:00:00Z", "lastTransitionTime": "2026-11-01T09:00:00Z" }
            ],
            "addresses": [{ "type": "InternalIP", "address": "10.0.0.1" }, { "type": "Hostname", "address": name }],
            "nodeInfo": { "kubeletVersion": "v1.36.2", "containerRuntimeVersion": "containerd://2.1.0", "osImage": "Ubuntu 24.04",
                "kernelVersion": "6.8.0", "operatingSystem": "linux", "architecture": "amd64",
                "machineID": "m", "systemUUID": "s", "bootID": "b", "kubeProxyVersion": "" }
        } })
}

const QUOTA_HARD: [(&str, &str); 3] = [
    ("pods", "100"),
    ("requests.cpu", "20"),
    ("requests.memory", "64Gi"),
];

fn quota_json(ns: &str) -> Value {
    let hard: serde_json::Map<String, Value> = QUOTA_HARD
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({ "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": { "name": "compute", "namespace": ns }, "spec": { "hard": hard } })
}

fn pdb_json(ns: &str, min_available: usize) -> Value {
    json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": { "name": "web", "namespace": ns },
        "spec": { "minAvailable": min_available, "selector": { "matchLabels": { "app": "web" } } } })
}

/// apimachinery's canonical string of `milli` thousandths of a core (pods here never sum to 1k).
fn cpu_string(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// apimachinery's canonical string of a binary-SI amount given in Mi.
fn memory_string(mi: u64) -> String {
    if mi == 0 {
        return "0".into();
    }
    let (mut value, mut unit) = (mi, 0);
    let units = ["Mi", "Gi", "Ti", "Pi"];
    while value.is_multiple_of(1024) && unit + 1 < units.len() {
        value /= 1024;
        unit += 1;
    }
    format!("{value}{}", units[unit])
}

/// The TTL upstream's table and hysteresis give after `nodes` node additions from zero
/// (/work/shared/spec/ttl.md §4.3: one step per add, up when the count passes sizeMax).
fn expected_ttl(nodes: usize) -> &'static str {
    const STEPS: [(usize, &str); 5] = [
        (100, "0"),
        (500, "15"),
        (1000, "30"),
        (2000, "60"),
        (usize::MAX, "300"),
    ];
    let mut step = 0;
    for count in 1..=nodes {
        if count > STEPS[step].0 {
            step += 1;
        }
    }
    STEPS[step].1
}

/// The seeded world, from which every expected status is computed.
struct Model {
    size: Size,
    min_available: usize,
    namespaces: Vec<Vec<PodModel>>,
}

impl Model {
    fn new(size: Size) -> Self {
        let per_ns = size.pods / size.namespaces;
        let namespaces = (0..size.namespaces)
            .map(|_| {
                (0..per_ns)
                    .map(|j| PodModel {
                        name: format!("p-{j}"),
                        cpu_milli: 100 + 50 * (j as u64 % 3),
                        memory_mi: 64 * (1 + j as u64 % 2),
                        ready: j % 5 != 4,
                    })
                    .collect()
            })
            .collect();
        Self {
            size,
            min_available: per_ns / 2,
            namespaces,
        }
    }

    fn expected_used(&self, n: usize) -> Value {
        let pods = &self.namespaces[n];
        json!({
            "pods": pods.len().to_string(),
            "requests.cpu": cpu_string(pods.iter().map(|p| p.cpu_milli).sum()),
            "requests.memory": memory_string(pods.iter().map(|p| p.memory_mi).sum()),
        })
    }

    fn quota_right(&self, n: usize, quota: &Value) -> bool {
        let hard: serde_json::Map<String, Value> = QUOTA_HARD
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        quota["status"]["hard"] == Value::Object(hard)
            && quota["status"]["used"] == self.expected_used(n)
    }

    fn pdb_right(&self, n: usize, pdb: &Value) -> bool {
        let pods = &self.namespaces[n];
        let healthy = pods.iter().filter(|p| p.ready).count();
        let desired = self.min_available;
        let allowed = healthy.saturating_sub(desired);
        let status = &pdb["status"];
        let (cond_status, reason) = if allowed > 0 {
            ("True", "SufficientPods")
        } else {
            ("False", "InsufficientPods")
        };
        let condition_right = status["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "DisruptionAllowed"
                    && c["status"] == cond_status
                    && c["reason"] == reason
            })
        });
        status["observedGeneration"] == pdb["metadata"]["generation"]
            && status["expectedPods"] == json!(pods.len())
            && status["desiredHealthy"] == json!(desired)
            && status["currentHealthy"] == json!(healthy)
            && status["disruptionsAllowed"] == json!(allowed)
            && status["disruptedPods"]
                .as_object()
                .is_none_or(|m| m.is_empty())
            && condition_right
    }

    fn node_of(&self, n: usize, j: usize) -> String {
        node_name((n * 31 + j) % self.size.nodes)
    }
}

/// Objects of one type found right, checked straight in the server's store (no HTTP, no
/// deep copies: the bench shares the machine with kcm).
struct Checker {
    server: Arc<TestServer>,
    quotas: ResourceType,
    pdbs: ResourceType,
    nodes: ResourceType,
}

impl Checker {
    fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.server.store().get(rt, ns, name).ok()
    }

    fn quotas_right(&self, model: &Model) -> usize {
        (0..model.size.namespaces)
            .filter(|&n| {
                self.get(&self.quotas, &ns_name(n), "compute")
                    .is_some_and(|q| model.quota_right(n, &q))
            })
            .count()
    }

    fn pdbs_right(&self, model: &Model) -> usize {
        (0..model.size.namespaces)
            .filter(|&n| {
                self.get(&self.pdbs, &ns_name(n), "web")
                    .is_some_and(|p| model.pdb_right(n, &p))
            })
            .count()
    }

    fn nodes_right(&self, model: &Model) -> usize {
        let want = expected_ttl(model.size.nodes);
        (0..model.size.nodes)
            .filter(|&i| {
                self.get(&self.nodes, "", &node_name(i))
                    .is_some_and(|node| node["metadata"]["annotations"][TTL_ANNOTATION] == want)
            })
            .count()
    }
}

/// The kcm process, killed when the bench ends however it ends.
struct Kcm {
    child: Child,
    metrics_port: u16,
}

impl Kcm {
    fn spawn(kubeconfig: &std::path::Path, log: &std::path::Path) -> Self {
        let metrics_port = free_port();
        let bin = std::env::var_os("KCM_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kcm")));
        let log = std::fs::File::create(log).unwrap_or_else(|e| panic!("kcm log: {e}"));
        let child = Command::new(&bin)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--leader-elect=false", "--bind-address=127.0.0.1"])
            .arg(format!("--port={metrics_port}"))
            .args(
                std::env::var("KCM_SCALE_KCM_ARGS")
                    .unwrap_or_default()
                    .split_whitespace(),
            )
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        Self {
            child,
            metrics_port,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    async fn metrics(&self) -> String {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.metrics_port));
        kube_testserver::testing::http_get(addr, "/metrics")
            .await
            .filter(|r| r.status == 200)
            .map(|r| r.body)
            .unwrap_or_default()
    }

    async fn writes_by_controller(&self) -> BTreeMap<String, f64> {
        metric_by_label(&self.metrics().await, "kcm_api_writes_total", "controller")
    }
}

impl Drop for Kcm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Figures of one run, printed as markdown rows and kept for the slope between sizes.
#[derive(Default)]
struct Report {
    rows: Vec<(String, String)>,
}

impl Report {
    fn add(&mut self, figure: impl Into<String>, value: impl Into<String>) {
        let (figure, value) = (figure.into(), value.into());
        println!("  {figure}: {value}");
        self.rows.push((figure, value));
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// Polls until quotas, PDBs and nodes are all right or `timeout` passes; returns the time
/// each kind became (and stayed for the check) all right, measured from `start`.
async fn converge(
    checker: &Checker,
    model: &Model,
    start: Instant,
    timeout: Duration,
    poll: Duration,
) -> [Option<Duration>; 3] {
    let mut done: [Option<Duration>; 3] = [None; 3];
    let totals = [
        model.size.namespaces,
        model.size.namespaces,
        model.size.nodes,
    ];
    let names = ["quota", "PDB", "node TTL"];
    let mut last_print = Instant::now();
    loop {
        let counts = [
            done[0].map_or_else(|| checker.quotas_right(model), |_| totals[0]),
            done[1].map_or_else(|| checker.pdbs_right(model), |_| totals[1]),
            done[2].map_or_else(|| checker.nodes_right(model), |_| totals[2]),
        ];
        for k in 0..3 {
            if done[k].is_none() && counts[k] == totals[k] {
                let at = start.elapsed();
                println!("  every {} right after {}", names[k], secs(at));
                done[k] = Some(at);
            }
        }
        if done.iter().all(Option::is_some) || start.elapsed() > timeout {
            return done;
        }
        if last_print.elapsed() > Duration::from_secs(30) {
            last_print = Instant::now();
            println!(
                "  … {:.0} s: quotas {}/{}, PDBs {}/{}, node TTLs {}/{}",
                start.elapsed().as_secs_f64(),
                counts[0],
                totals[0],
                counts[1],
                totals[1],
                counts[2],
                totals[2]
            );
        }
        tokio::time::sleep(poll).await;
    }
}

fn add_convergence(report: &mut Report, phase: &str, done: [Option<Duration>; 3]) {
    for (name, at) in ["quota", "PDB", "node TTL"].iter().zip(done) {
        report.add(
            format!("{phase}: every {name} right"),
            at.map_or_else(|| "not within the timeout".into(), secs),
        );
    }
}

/// Writes of kcm the server logged in this phase, by resource: a cross-check of the metric.
fn server_writes(server: &TestServer, since: Instant) -> String {
    let mut by_resource: BTreeMap<String, usize> = BTreeMap::new();
    for r in server.requests() {
        if r.at >= since && r.is_write() && r.user_agent.contains("kcm/") {
            let resource = if r.info.subresource.is_empty() {
                r.info.resource.clone()
            } else {
                format!("{}/{}", r.info.resource, r.info.subresource)
            };
            *by_resource.entry(resource).or_default() += 1;
        }
    }
    by_resource
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn writes_delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> String {
    after
        .iter()
        .map(|(k, v)| format!("{k} {:.0}", v - before.get(k).copied().unwrap_or(0.0)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// CPU seconds per write of a phase, in milliseconds, from the writes counted before and
/// after it (every controller's, events included).
fn per_write(cpu: f64, before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> String {
    let writes: f64 = after
        .iter()
        .map(|(k, v)| v - before.get(k).copied().unwrap_or(0.0))
        .sum();
    if writes == 0.0 {
        return "no writes".into();
    }
    format!("{:.3} ms ({writes:.0} writes)", cpu * 1000.0 / writes)
}

/// The TCP connections the server accepted (all kcm's: the bench reads the store directly),
/// in total and by kcm client (the last part of the user agent of each one's first request).
fn connections(server: &TestServer) -> String {
    let all = server.connections();
    let mut by_client: BTreeMap<String, usize> = BTreeMap::new();
    for conn in &all {
        let client = conn.user_agent.rsplit('/').next().unwrap_or_default();
        let client = if client.is_empty() {
            "(no request)"
        } else {
            client
        };
        *by_client.entry(client.to_string()).or_default() += 1;
    }
    let http2 = all.iter().filter(|c| c.http2).count();
    let clients = by_client
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("{} ({http2} HTTP/2): {clients}", all.len())
}

fn allocator_label() -> String {
    if let Ok(label) = std::env::var("KCM_SCALE_LABEL") {
        return label;
    }
    if std::env::var_os("KCM_BIN").is_some() {
        return "custom".into();
    }
    if cfg!(feature = "mimalloc") {
        "mimalloc".into()
    } else if cfg!(feature = "jemalloc") {
        "jemalloc".into()
    } else {
        "system".into()
    }
}

fn results_path(size: &str, label: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("scale-{size}-{label}.txt"))
}

/// RSS after sync and pod count of a finished run, as saved by [`save`].
fn load(size: &str, label: &str) -> Option<(f64, usize)> {
    let text = std::fs::read_to_string(results_path(size, label)).ok()?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
            .map(String::from)
    };
    Some((
        field("rss_after_sync_mib=")?.parse().ok()?,
        field("pods=")?.parse().ok()?,
    ))
}

fn save(size: Size, label: &str, rss_after_sync: f64, report: &Report) {
    let mut text = format!("rss_after_sync_mib={rss_after_sync}\npods={}\n", size.pods);
    for (figure, value) in &report.rows {
        text.push_str(&format!("| {figure} | {value} |\n"));
    }
    let path = results_path(size.name, label);
    if let Err(e) = std::fs::write(&path, text) {
        println!("(could not save {}: {e})", path.display());
    }
}

/// Seeds straight into the store, without field ownership: tracking every field path of
/// 150 000 pods would cost the bench process gigabytes and minutes.
fn seed(server: &TestServer, rt: &ResourceType, obj: Value) {
    if let Err(e) = server.store().seed_untracked(rt, obj) {
        panic!("seed: {}", e.message);
    }
}

#[tokio::main]
async fn main() {
    let wanted = std::env::var("KCM_SCALE")
        .ok()
        .or_else(|| std::env::args().skip(1).find(|a| !a.starts_with('-')));
    let wanted = wanted.as_deref().unwrap_or("a");
    let Some(mut size) = SIZES.iter().copied().find(|s| s.name == wanted) else {
        panic!("unknown size {wanted:?}: a, b or tiny");
    };
    if let Some(pods) = std::env::var("KCM_SCALE_PODS")
        .ok()
        .and_then(|p| p.parse().ok())
    {
        size.pods = pods;
    }
    let sync_only = std::env::var_os("KCM_SCALE_SYNC_ONLY").is_some();
    let timeout = Duration::from_secs(
        std::env::var("KCM_SCALE_TIMEOUT_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3600),
    );
    let label = allocator_label();
    let poll = Duration::from_millis(if size.pods > 50_000 { 2000 } else { 500 });
    println!(
        "scale ({}): {} pods, {} namespaces (one ResourceQuota and one PDB each), {} nodes; kcm allocator: {label}",
        size.name, size.pods, size.namespaces, size.nodes
    );

    // Enough events kept for watches to resume across the churn (three per replaced pod)
    // without a relist, as against a real API server.
    let tls = std::env::var("KCM_SCALE_TLS").map_or(true, |v| v != "0");
    let server = TestServer::start_with(Options {
        event_window: (size.pods / 2).max(10_000),
        tls,
        ..Options::default()
    })
    .await
    .unwrap_or_else(|e| panic!("kube-testserver: {e}"));
    let server = Arc::new(server);
    let mut model = Model::new(size);
    let rt = |group: &str, plural: &str| {
        server
            .store()
            .resource_type(group, plural)
            .unwrap_or_else(|| panic!("{plural} not served"))
    };
    let (pods_rt, nodes_rt, ns_rt) = (rt("", "pods"), rt("", "nodes"), rt("", "namespaces"));
    let (quotas_rt, pdbs_rt) = (
        rt("", "resourcequotas"),
        rt("policy", "poddisruptionbudgets"),
    );
    let seeding = Instant::now();
    for i in 0..size.nodes {
        seed(&server, &nodes_rt, node_json(&node_name(i)));
    }
    for (n, pods) in model.namespaces.iter().enumerate() {
        let ns = ns_name(n);
        seed(
            &server,
            &ns_rt,
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }),
        );
        for (j, pod) in pods.iter().enumerate() {
            seed(&server, &pods_rt, pod_json(&ns, pod, &model.node_of(n, j)));
        }
        seed(&server, &quotas_rt, quota_json(&ns));
        seed(&server, &pdbs_rt, pdb_json(&ns, model.min_available));
    }
    println!("seeded in {}", secs(seeding.elapsed()));
    let checker = Checker {
        server: server.clone(),
        quotas: quotas_rt,
        pdbs: pdbs_rt,
        nodes: nodes_rt,
    };
    let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("scale-{}-{label}-kcm.log", size.name));
    let mut report = Report::default();

    // Cold start.
    let bytes_before = server.bytes_sent();
    let start = Instant::now();
    let kcm = Kcm::spawn(server.kubeconfig_path(), &log);
    let pid = kcm.pid();
    let stores = [
        ("pods", size.pods),
        ("nodes", size.nodes),
        ("resourcequotas", size.namespaces),
        ("poddisruptionbudgets", size.namespaces),
    ];
    let mut rss_after_sync = None;
    while start.elapsed() < timeout {
        let counts = metric_by_label(&kcm.metrics().await, "kcm_store_objects", "resource");
        if stores
            .iter()
            .all(|(r, want)| counts.get(*r).map_or(*want == 0, |c| *c >= *want as f64))
        {
            rss_after_sync = Some((start.elapsed(), rss_mib(pid)));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some((synced_at, rss_sync)) = rss_after_sync else {
        panic!(
            "kcm's stores did not sync within {timeout:?} (see {})",
            log.display()
        );
    };
    let (cpu_sync, peak_sync) = usage(pid);
    let sent = server.bytes_sent() - bytes_before;
    report.add("every store synced after", secs(synced_at));
    report.add("peak RSS until synced", format!("{peak_sync:.1} MiB"));
    report.add("kcm CPU until synced", format!("{cpu_sync:.2} s"));
    report.add(
        "bytes the server sent until synced",
        format!("{:.1} MiB", sent as f64 / (1024.0 * 1024.0)),
    );
    report.add("RSS after the initial sync", format!("{rss_sync:.1} MiB"));
    // What the cold start's CPU is besides its writes: lists, watches, the first syncs.
    report.add(
        "kcm CPU until every store synced",
        format!("{:.2} s", usage(pid).0),
    );
    let objects = size.pods + 3 * size.namespaces + size.nodes;
    report.add(
        "RSS after sync per stored object",
        format!(
            "{:.0} B ({objects} pods, namespaces, quotas, PDBs and nodes)",
            rss_sync * 1024.0 * 1024.0 / objects as f64
        ),
    );
    if sync_only {
        print_rows(size, &label, &report);
        return;
    }

    let done = converge(&checker, &model, start, timeout, poll).await;
    let (cpu_cold, peak_cold) = usage(pid);
    let rss_converged = rss_mib(pid);
    add_convergence(&mut report, "cold start", done);
    report.add("cold start: kcm CPU", format!("{cpu_cold:.2} s"));
    let writes_cold = kcm.writes_by_controller().await;
    report.add(
        "cold start: kcm CPU per write",
        per_write(cpu_cold, &BTreeMap::new(), &writes_cold),
    );
    report.add("RSS once converged", format!("{rss_converged:.1} MiB"));
    report.add("peak RSS, cold start", format!("{peak_cold:.1} MiB"));
    report.add(
        "cold start: writes per controller (kcm_api_writes_total)",
        writes_delta(&BTreeMap::new(), &writes_cold),
    );
    report.add(
        "cold start: writes the server saw",
        server_writes(&server, seeding),
    );

    // Churn: every tenth pod is deleted and replaced by another one in its namespace with
    // other requests and readiness, so every quota and PDB has to change.
    let churn_start = Instant::now();
    let mut churned = 0;
    let per_ns = size.pods / size.namespaces;
    for (n, pods) in model.namespaces.iter_mut().enumerate() {
        let ns = ns_name(n);
        for (j, pod) in pods.iter_mut().enumerate() {
            if (n * per_ns + j) % 10 != 0 {
                continue;
            }
            if let Err(e) = server
                .store()
                .delete(&pods_rt, &ns, &pod.name, &Default::default())
            {
                panic!("delete: {}", e.message);
            }
            *pod = PodModel {
                name: format!("c-{j}"),
                cpu_milli: 250,
                memory_mi: 96,
                ready: !pod.ready,
            };
            churned += 1;
        }
    }
    for (n, pods) in model.namespaces.iter().enumerate() {
        let ns = ns_name(n);
        for (j, pod) in pods.iter().enumerate() {
            if pod.name.starts_with("c-") {
                seed(&server, &pods_rt, pod_json(&ns, pod, &model.node_of(n, j)));
            }
        }
    }
    println!(
        "churn: {churned} pods deleted and {churned} created in {}",
        secs(churn_start.elapsed())
    );
    let done = converge(&checker, &model, churn_start, timeout, poll).await;
    let (cpu_all, peak) = usage(pid);
    add_convergence(&mut report, &format!("churn of {churned} pods"), done);
    report.add("churn: kcm CPU", format!("{:.2} s", cpu_all - cpu_cold));
    let writes_all = kcm.writes_by_controller().await;
    report.add(
        "churn: kcm CPU per write",
        per_write(cpu_all - cpu_cold, &writes_cold, &writes_all),
    );
    report.add("peak RSS, whole run", format!("{peak:.1} MiB"));
    if let Some(path) = std::env::var_os("KCM_SCALE_METRICS_OUT")
        && let Err(e) = std::fs::write(&path, kcm.metrics().await)
    {
        println!("(could not write kcm's metrics: {e})");
    }
    report.add(
        "churn: writes per controller (kcm_api_writes_total)",
        writes_delta(&writes_cold, &writes_all),
    );
    report.add(
        "churn: writes the server saw",
        server_writes(&server, churn_start),
    );
    report.add(
        format!(
            "TCP connections kcm opened ({})",
            if tls { "HTTPS" } else { "HTTP" }
        ),
        connections(&server),
    );
    drop(kcm);

    save(size, &label, rss_sync, &report);
    let other = if size.name == "a" { "b" } else { "a" };
    if let (Some((rss_a, pods_a)), Some((rss_b, pods_b))) = (load("a", &label), load("b", &label))
        && pods_a != pods_b
        && size.name != "tiny"
    {
        report.add(
            "RSS per additional pod, (a)→(b)",
            format!(
                "{:.0} B",
                (rss_b - rss_a) * 1024.0 * 1024.0 / (pods_b as f64 - pods_a as f64)
            ),
        );
    } else if size.name != "tiny" {
        println!("(run size {other} with the same allocator for the RSS per additional pod)");
    }

    print_rows(size, &label, &report);
}

fn print_rows(size: Size, label: &str, report: &Report) {
    println!();
    println!(
        "| figure ({}: {} pods, {} namespaces, {} nodes; {label}) | value |",
        size.name, size.pods, size.namespaces, size.nodes
    );
    println!("|---|---|");
    for (figure, value) in &report.rows {
        println!("| {figure} | {value} |");
    }
}
