//! Memory before the first pod: the kcm binary (all five controllers, default
//! flags, plain HTTP to kube-testserver) against a cluster with no objects, then against
//! size (a) of the scale bench without its pods (1 000 namespaces, each with a ResourceQuota
//! and a PodDisruptionBudget, and 2 000 nodes). For each, kcm's memory once it is ready
//! (every store synced) and once it has made its writes (one per quota, PDB and node), broken
//! down by where it goes:
//!
//! - the process: VmRSS, its anonymous and file-backed parts (/proc/pid/status);
//! - mappings (/proc/pid/smaps): the binary's code and its other pages, shared libraries,
//!   anonymous memory (the allocator's and the thread stacks);
//! - threads (/proc/pid/task) by name;
//! - jemalloc's counters and settings (`/debug/pprof/heap`);
//! - the metrics registry (`/metrics`: families, series, histogram buckets, bytes);
//! - sockets (connections to the API server and the listener).
//!
//! `cargo bench --bench footprint`. `KCM_BIN=<path>` runs another kcm binary (e.g. a copy of
//! an older build), `KCM_FOOTPRINT_LABEL` names it; environment variables such as
//! `_RJEM_MALLOC_CONF` reach kcm, for jemalloc experiments. `KCM_FOOTPRINT_TIMEOUT_SECS`
//! bounds each wait (default 600). Prints a markdown table; asserts nothing about the figures.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube_testserver::TestServer;
use serde_json::json;

mod common;
use common::{metric_by_label, rss_mib};
use kcm_testsupport::free_port;
use kcm_testsupport::proc::usage;

/// A cluster to start kcm against.
struct World {
    name: &'static str,
    namespaces: usize,
    nodes: usize,
}

const WORLDS: [World; 2] = [
    World {
        name: "no objects",
        namespaces: 0,
        nodes: 0,
    },
    World {
        name: "(a) without pods",
        namespaces: 1_000,
        nodes: 2_000,
    },
];

impl World {
    /// kcm's writes once converged: one status per quota and PDB, one annotation per node.
    fn writes(&self) -> f64 {
        (2 * self.namespaces + self.nodes) as f64
    }

    fn seed(&self, server: &TestServer) {
        let seed = |obj: serde_json::Value| {
            if let Err(e) = server.seed(obj) {
                panic!("seed: {}", e.message);
            }
        };
        for i in 0..self.nodes {
            let name = format!("node-{i:05}");
            seed(json!({ "apiVersion": "v1", "kind": "Node",
                "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
                "status": { "allocatable": { "cpu": "4", "memory": "16Gi", "pods": "110" },
                    "conditions": [{ "type": "Ready", "status": "True" }] } }));
        }
        for n in 0..self.namespaces {
            let ns = format!("ns-{n:05}");
            seed(json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }));
            seed(json!({ "apiVersion": "v1", "kind": "ResourceQuota",
                "metadata": { "name": "compute", "namespace": ns },
                "spec": { "hard": { "pods": "100", "requests.cpu": "20", "requests.memory": "64Gi" } } }));
            seed(
                json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": { "name": "web", "namespace": ns },
                "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "web" } } } }),
            );
        }
    }
}

/// The kcm process under measurement, killed when dropped.
struct Kcm {
    child: Child,
    port: u16,
}

impl Kcm {
    fn start(kubeconfig: &std::path::Path) -> Self {
        let port = free_port();
        let bin = std::env::var_os("KCM_BIN")
            .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kcm")), PathBuf::from);
        let mut command = Command::new(&bin);
        command
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        Self { child, port }
    }

    async fn get(&self, path: &str) -> Option<String> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        kube_testserver::testing::http_get(addr, path)
            .await
            .filter(|r| r.status == 200)
            .map(|r| r.body)
    }

    /// Polls every 100 ms until `done` holds for `/metrics`, or panics after `timeout`.
    async fn wait(&self, what: &str, timeout: Duration, done: impl Fn(&str) -> bool) {
        let start = Instant::now();
        loop {
            if let Some(metrics) = self.get("/metrics").await
                && done(&metrics)
                && self.get("/readyz").await.is_some()
            {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "kcm: {what} not within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Kcm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// KiB of the `Rss:` lines of /proc/pid/smaps, by kind of mapping.
fn smaps(pid: u32, exe: &str) -> BTreeMap<&'static str, f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut by_kind = BTreeMap::new();
    let mut kind = "";
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or_default();
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: range, perms, offset, device, inode, path.
            let fields: Vec<&str> = line.split_whitespace().collect();
            let perms = fields.get(1).copied().unwrap_or_default();
            let path = fields.get(5).copied().unwrap_or_default();
            kind = match path {
                p if p == exe && perms.contains('x') => "binary: code",
                p if p == exe => "binary: data and read-only",
                "" => "anonymous (allocator, thread stacks)",
                "[heap]" => "brk heap",
                "[stack]" => "main thread stack",
                p if p.starts_with('[') => "kernel ([vdso], [vvar])",
                _ => "shared libraries",
            };
        } else if let Some(kib) = line.strip_prefix("Rss:") {
            let kib: f64 = kib
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            *by_kind.entry(kind).or_insert(0.0) += kib;
        }
    }
    by_kind
}

/// A `/proc/pid/status` field in KiB.
fn status_kib(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The process's threads, counted by name.
fn threads(pid: u32) -> String {
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        *names.entry(name.trim().to_string()).or_default() += 1;
    }
    let total: usize = names.values().sum();
    let list: Vec<String> = names.iter().map(|(n, c)| format!("{n} ×{c}")).collect();
    format!("{total} ({})", list.join(", "))
}

/// Open sockets of the process (its connections plus the listener).
fn sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
        })
        .count()
}

/// Families, series (sample lines), histogram bucket lines and bytes of an exposition.
fn metrics_size(exposition: &str) -> String {
    let families = exposition
        .lines()
        .filter(|l| l.starts_with("# TYPE "))
        .count();
    let samples: Vec<&str> = exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    let buckets = samples.iter().filter(|l| l.contains("_bucket{")).count();
    format!(
        "{families} families, {} samples ({buckets} histogram buckets), {} KiB",
        samples.len(),
        exposition.len() / 1024
    )
}

fn mib(kib: f64) -> String {
    format!("{:.1} MiB", kib / 1024.0)
}

/// One column of figures: kcm at one moment.
async fn measure(kcm: &Kcm) -> Vec<(String, String)> {
    let pid = kcm.child.id();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut rows = vec![
        ("VmRSS".to_string(), format!("{:.1} MiB", rss_mib(pid))),
        ("RssAnon".into(), mib(status_kib(pid, "RssAnon:"))),
        ("RssFile".into(), mib(status_kib(pid, "RssFile:"))),
    ];
    for (kind, kib) in smaps(pid, &exe) {
        rows.push((format!("smaps: {kind}"), mib(kib)));
    }
    rows.push(("threads".into(), threads(pid)));
    let heap = kcm.get("/debug/pprof/heap").await.unwrap_or_default();
    for line in heap.lines() {
        let Some((name, value)) = line.strip_prefix("# ").and_then(|l| l.split_once(" = ")) else {
            continue;
        };
        let value = match value.parse::<f64>() {
            Ok(bytes) if !name.starts_with("opt.") && !name.ends_with("narenas") => {
                mib(bytes / 1024.0)
            }
            _ => value.to_string(),
        };
        rows.push((format!("jemalloc: {name}"), value));
    }
    let metrics = kcm.get("/metrics").await.unwrap_or_default();
    rows.push(("metrics registry".into(), metrics_size(&metrics)));
    rows.push(("sockets".into(), sockets(pid).to_string()));
    let (cpu, peak) = usage(pid);
    rows.push(("CPU so far".into(), format!("{cpu:.2} s")));
    rows.push(("peak RSS (VmHWM)".into(), format!("{peak:.1} MiB")));
    rows
}

fn writes(metrics: &str) -> f64 {
    metric_by_label(metrics, "kcm_api_writes_total", "controller")
        .values()
        .sum()
}

#[tokio::main]
async fn main() {
    let label = std::env::var("KCM_FOOTPRINT_LABEL").unwrap_or_else(|_| "this build".into());
    let timeout = Duration::from_secs(
        std::env::var("KCM_FOOTPRINT_TIMEOUT_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(600),
    );
    let mut columns: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for world in &WORLDS {
        let server = TestServer::start().await;
        world.seed(&server);
        let kcm = Kcm::start(server.kubeconfig_path());
        let stores = [
            ("nodes", world.nodes),
            ("resourcequotas", world.namespaces),
            ("poddisruptionbudgets", world.namespaces),
        ];
        kcm.wait("every store synced", timeout, |metrics| {
            let counts = metric_by_label(metrics, "kcm_store_objects", "resource");
            stores
                .iter()
                .all(|(r, want)| counts.get(*r).is_some_and(|c| *c >= *want as f64))
        })
        .await;
        columns.push((format!("{}: ready", world.name), measure(&kcm).await));
        kcm.wait("every write made", timeout, |metrics| {
            writes(metrics) >= world.writes()
        })
        .await;
        columns.push((format!("{}: written", world.name), measure(&kcm).await));
        drop(kcm);
        server.shutdown().await;
    }

    println!();
    let header: Vec<&str> = columns.iter().map(|(name, _)| name.as_str()).collect();
    println!("| figure ({label}) | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(columns.len()));
    let mut figures: Vec<&String> = Vec::new();
    for (_, rows) in &columns {
        for (figure, _) in rows {
            if !figures.contains(&figure) {
                figures.push(figure);
            }
        }
    }
    for figure in figures {
        let values: Vec<&str> = columns
            .iter()
            .map(|(_, rows)| {
                rows.iter()
                    .find(|(f, _)| f == figure)
                    .map_or("", |(_, v)| v.as_str())
            })
            .collect();
        println!("| {figure} | {} |", values.join(" | "));
    }
}
