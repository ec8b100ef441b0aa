//! The scale benchmark: all five controllers (the kcm binary, default flags:
//! `--kube-api-qps=20 --kube-api-burst=30`) against kube-testserver holding, before kcm
//! starts, N namespaces each with one ResourceQuota, one PodDisruptionBudget and its pods,
//! plus the nodes:
//!
//! | size | pods | namespaces | nodes |
//! |---|---|---|---|
//! | `a` | 10 000 | 1 000 | 2 000 |
//! | `b` | 150 000 | 10 000 | 5 000 |
//! | `c` (SIG Scalability's limits) | 150 000 | 3 000 | 5 000 |
//! | `s` | 1 000 | 100 | 200 |
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
//!
//! `KCM_BENCH_REAL=1` (with `KUBEBUILDER_ASSETS` set) runs the world on a real control plane
//! instead: seeded once through the API, then each run on a fresh etcd and kube-apiserver
//! started on a copy of that etcd, checked and churned through the API. It measures the API
//! server too: its CPU seconds, peak RSS and request latency (p50 / p99 of reads and writes, by
//! its own histogram) in each window, beside the controller manager's, and that CPU less the
//! API server's idle CPU over as long (its idle rate measured over 10 s before each run), and
//! prints what the API server served in each window by its own metrics (requests by verb and
//! resource, response bytes, watch events and their bytes). The controller managers are
//! leader-elected, and each run ends with a standby's takeover (common/takeover.rs): the
//! leader SIGKILLed, ten pods' readiness flipped meanwhile, the time to the lease changing
//! hands and to the first status showing a flip. The bench checks convergence with one JSON watch per kind (quotas,
//! PDBs, node metadata), not by polling lists, so that its own load on the API server stays
//! small and the same for every run. Runs, one after another
//! (`KCM_BENCH_REAL_RUNS`, default `json,protobuf,upstream`): kcm with
//! `--kube-api-content-type=application/json`, kcm with its default (protobuf), and upstream's
//! `kube-controller-manager` with the four controllers kcm shares with it that act here.
//! `KCM_SCALE_STEADY_SECS=600` ends each run with a steady churn (`KCM_SCALE_STEADY_RATE`
//! changes a second, default 10) and measures the lag from each change to the PDB or quota
//! status that reflects it (common/steady.rs). `KCM_SCALE_SEED_DIR=<dir>` keeps the seeded
//! etcd there for later invocations of the same size (10 minutes of seeding at size c).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kcm_testsupport::envtest::{self, ControlPlane};
use kube_testserver::TestServer;

mod common;
use common::real;
use common::steady::{self, Lags};
use common::takeover;
use common::world::{Model, Size, chosen_size, converge, secs, seeded_server};
use common::{metric_by_label, rss_mib};
use kcm_testsupport::free_port;
use kcm_testsupport::proc::usage;

/// The kcm process, killed when the bench ends however it ends.
struct Kcm {
    child: Child,
    metrics_port: u16,
}

impl Kcm {
    fn spawn(kubeconfig: &std::path::Path, log: &std::path::Path, extra: &[&str]) -> Self {
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
            .args(extra)
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

#[tokio::main]
async fn main() {
    let mut size = chosen_size("KCM_SCALE");
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
    if std::env::var_os("KCM_BENCH_REAL").is_some() {
        return real_control_plane(size, timeout).await;
    }
    let label = allocator_label();
    let poll = Duration::from_millis(if size.pods > 50_000 { 2000 } else { 500 });
    println!(
        "scale ({}): {} pods, {} namespaces (one ResourceQuota and one PDB each), {} nodes; kcm allocator: {label}",
        size.name, size.pods, size.namespaces, size.nodes
    );

    let tls = std::env::var("KCM_SCALE_TLS").map_or(true, |v| v != "0");
    let (server, mut model, checker, pods_rt) = seeded_server(size, tls).await;
    let seeded = Instant::now();
    let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("scale-{}-{label}-kcm.log", size.name));
    let mut report = Report::default();

    // Cold start.
    let bytes_before = server.bytes_sent();
    let start = Instant::now();
    let kcm = Kcm::spawn(server.kubeconfig_path(), &log, &[]);
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
    // What the cold start's CPU is besides its writes: lists, watches, the first syncs.
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
        server_writes(&server, seeded),
    );

    // Churn: every tenth pod replaced, so every quota and PDB has to change.
    let churn_start = Instant::now();
    let churned = model.churn(&server, &pods_rt);
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

/// Upstream's controllers that kcm runs and that act on this world (storage-version-gc has
/// nothing to do here).
const UPSTREAM_CONTROLLERS: &str =
    "resourcequota-controller,disruption-controller,ttl-controller,resourceclaim-controller";

/// The controller manager of one run on the real control plane, killed when dropped.
struct Manager {
    child: Child,
    /// kcm's `/metrics` and `/readyz` (upstream's serve nothing here).
    port: Option<u16>,
    log: PathBuf,
}

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts run `run`'s controller manager (`json`, `protobuf`: kcm; `upstream`), leader-elected
/// on [`takeover::LEASE`], logging to `log`.
fn start_manager(plane: &ControlPlane, run: &str, log: PathBuf) -> Manager {
    let file = std::fs::File::create(&log).unwrap_or_else(|e| panic!("log: {e}"));
    let mut port = None;
    let mut command = match run {
        "upstream" => {
            let mut command = plane.command(plane.assets.join("kube-controller-manager"));
            command
                .arg(format!("--controllers={UPSTREAM_CONTROLLERS}"))
                .arg("--secure-port=0");
            command
        }
        "json" | "protobuf" => {
            let bin = std::env::var_os("KCM_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kcm")));
            let mut command = plane.command(bin);
            let free = free_port();
            port = Some(free);
            command.args(["--bind-address=127.0.0.1", &format!("--port={free}")]);
            if run == "json" {
                command.arg("--kube-api-content-type=application/json");
            }
            command
        }
        other => panic!("unknown run {other:?}: json, protobuf or upstream"),
    };
    let child = command
        .arg(format!("--kubeconfig={}", plane.kubeconfig.display()))
        .args([
            "--leader-elect=true",
            "--leader-elect-resource-namespace=kube-system",
        ])
        .arg(format!("--leader-elect-resource-name={}", takeover::LEASE))
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("{run}: {e}"));
    Manager { child, port, log }
}

impl Manager {
    async fn get(&self, path: &str) -> Option<(u16, String)> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port?));
        let response = kube_testserver::testing::http_get(addr, path).await?;
        Some((response.status, response.body))
    }

    /// Whether it stands by, ready to lead at once: kcm once it says it is a warm standby and
    /// is ready (its stores synced); upstream's once it logs that it tries for the lease (it
    /// keeps nothing warm: there is nothing more to wait for).
    async fn stands_by(&self) -> bool {
        if self.port.is_none() {
            // klog's text: "Attempting to acquire leader lease..." in v1.36.
            return std::fs::read_to_string(&self.log).is_ok_and(|log| {
                log.to_lowercase()
                    .contains("attempting to acquire leader lease")
            });
        }
        let metrics = self.get("/metrics").await.map(|(_, body)| body);
        metrics.is_some_and(|m| m.contains("kcm_replica_state{state=\"warm_standby\"} 1"))
            && self
                .get("/readyz")
                .await
                .is_some_and(|(code, _)| code == 200)
    }
}

fn writes_between(before: [f64; 3], after: [f64; 3]) -> String {
    format!(
        "{} / {} / {}",
        after[0] - before[0],
        after[1] - before[1],
        after[2] - before[2]
    )
}

/// How long the API server's idle CPU is measured, after it settled and before a run.
const IDLE_WINDOW: Duration = Duration::from_secs(10);

/// A window's API server CPU seconds less what it spends idle in as long.
fn less_idle(cpu: f64, idle_rate: f64, window: Duration) -> String {
    format!(
        "{:.2} s (over {})",
        cpu - idle_rate * window.as_secs_f64(),
        secs(window)
    )
}

/// `KCM_SCALE_STEADY_SECS` (default 0: none) and `KCM_SCALE_STEADY_RATE` (changes a second,
/// default 10): the steady churn each run ends with on the real control plane.
fn steady_churn_settings() -> Option<(f64, Duration)> {
    let secs: u64 = std::env::var("KCM_SCALE_STEADY_SECS").ok()?.parse().ok()?;
    let rate = std::env::var("KCM_SCALE_STEADY_RATE")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10.0);
    (secs > 0).then(|| (rate, Duration::from_secs(secs)))
}

/// Changes made while no one leads, one pod's readiness in each of as many namespaces.
const TAKEOVER_CHANGES: usize = 10;

/// Once `standby` (started beside `leader`) stands by, the takeover (common/takeover.rs): the
/// leader killed, the time to the lease and to the first right write.
async fn take_over(
    leader: Manager,
    standby: Manager,
    client: &kube::Client,
    model: &mut Model,
    timeout: Duration,
    report: &mut Report,
) {
    let started = Instant::now();
    while !standby.stands_by().await {
        assert!(
            started.elapsed() < timeout,
            "the standby did not stand by within {timeout:?} (see {})",
            standby.log.display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    report.add(
        "takeover: standby RSS and CPU when standing by",
        format!(
            "{:.1} MiB, {:.2} s (after {})",
            rss_mib(standby.child.id()),
            usage(standby.child.id()).0,
            secs(started.elapsed())
        ),
    );
    let taken = takeover::takeover(
        client,
        model,
        TAKEOVER_CHANGES,
        move || drop(leader),
        timeout,
    )
    .await;
    let since_kill = |at: Option<Duration>| {
        at.map_or_else(
            || "not within the timeout".into(),
            |d| format!("{:.3} s", d.as_secs_f64()),
        )
    };
    report.add(
        "takeover: SIGKILL → lease taken",
        since_kill(taken.lease_taken),
    );
    report.add(
        "takeover: lease taken → first status showing a change made meanwhile",
        taken
            .first_write_after_lease()
            .map_or_else(|| "never".into(), |s| format!("{s:.3} s")),
    );
    report.add(
        format!("takeover: SIGKILL → all {TAKEOVER_CHANGES} changed PDBs right"),
        since_kill(taken.all_right),
    );
}

/// The control plane's settings beyond envtest's for the bench's large cluster: etcd's
/// backend quota at etcd's suggested maximum, 8 GiB (the default is 2 GiB, and etcd refuses
/// writes beyond it). APF's and the in-flight
/// limits stay at their defaults: the bench and both controller managers authenticate as
/// `system:masters`, whom APF exempts.
fn large_cluster_options() -> envtest::Options {
    envtest::Options {
        etcd_args: vec!["--quota-backend-bytes=8589934592".into()],
        ..envtest::Options::default()
    }
}

/// The seeded etcd of a run: a temporary copy, or one kept under `KCM_SCALE_SEED_DIR`.
enum Seed {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl Seed {
    fn path(&self) -> &std::path::Path {
        match self {
            Seed::Temporary(dir) => dir.path(),
            Seed::Kept(path) => path,
        }
    }
}

/// A kept seed `<dir>/<size>-<pods>` is whole once `<dir>/<size>-<pods>.seeded` exists
/// (beside it, as etcd's data directory holds only etcd's files): without it, it is seeded again.
fn seeded_mark(path: &std::path::Path) -> PathBuf {
    path.with_extension("seeded")
}

/// Seeds `size`'s world once, through the API of a control plane of its own, and keeps a copy
/// of its etcd: every run starts a fresh control plane on a copy of it, so that each starts
/// from the same objects, and the seeding (two requests a pod) is paid once.
/// With `KCM_SCALE_SEED_DIR` set, the copy is kept there (`<dir>/<size>-<pods>`) and later
/// invocations start from it; delete it when the world (common/world.rs) changes.
async fn seeded_etcd(assets: &std::path::Path, size: Size) -> Seed {
    let kept = std::env::var_os("KCM_SCALE_SEED_DIR")
        .map(|dir| PathBuf::from(dir).join(format!("{}-{}", size.name, size.pods)));
    if let Some(path) = &kept
        && seeded_mark(path).exists()
    {
        println!(
            "etcd's data kept from an earlier seeding: {}",
            path.display()
        );
        return Seed::Kept(path.clone());
    }
    let plane = ControlPlane::start_with(assets, &large_cluster_options())
        .unwrap_or_else(|e| panic!("the real control plane did not start: {e}"));
    real::seed(&plane.client().await, &Model::new(size)).await;
    let seed = match kept {
        Some(path) => {
            if path.exists() {
                std::fs::remove_dir_all(&path)
                    .unwrap_or_else(|e| panic!("removing {}: {e}", path.display()));
            }
            Seed::Kept(path)
        }
        None => Seed::Temporary(
            tempfile::Builder::new()
                .prefix("kcm-scale-etcd-")
                .tempdir()
                .unwrap_or_else(|e| panic!("a directory for etcd's copy: {e}")),
        ),
    };
    let started = Instant::now();
    plane
        .copy_etcd(seed.path())
        .unwrap_or_else(|e| panic!("{e}"));
    println!("etcd's data copied in {}", secs(started.elapsed()));
    if let Seed::Kept(path) = &seed {
        std::fs::write(seeded_mark(path), "")
            .unwrap_or_else(|e| panic!("marking {}: {e}", path.display()));
    }
    seed
}

/// `KCM_BENCH_REAL=1`: see the module doc.
async fn real_control_plane(size: Size, timeout: Duration) {
    let Some(assets) = envtest::assets() else {
        panic!(
            "KCM_BENCH_REAL needs a real control plane (KUBEBUILDER_ASSETS or setup-envtest's store)"
        );
    };
    let runs = std::env::var("KCM_BENCH_REAL_RUNS")
        .unwrap_or_else(|_| "json,protobuf,upstream".to_string());
    println!(
        "scale ({}) on a real control plane: {} pods, {} namespaces, {} nodes",
        size.name, size.pods, size.namespaces, size.nodes
    );
    let seeded = seeded_etcd(&assets, size).await;
    let options = envtest::Options {
        etcd_data: Some(seeded.path().to_path_buf()),
        ..large_cluster_options()
    };
    let mut reports = Vec::new();
    for run in runs.split(',') {
        println!("{run}:");
        let plane = ControlPlane::start_with(&assets, &options)
            .unwrap_or_else(|e| panic!("the real control plane did not start: {e}"));
        let client = plane.client().await;
        let mut model = Model::new(size);
        real::await_pods_cached(&client, size.pods).await;
        // The API server settles after its start (its caches, its own controllers).
        tokio::time::sleep(Duration::from_secs(5)).await;
        let api = plane.apiserver_pid;
        let mut report = Report::default();
        // What the API server spends with nothing running (its own controllers, etcd's
        // compaction, ...), to take out of each window: the rest is the controller manager's
        // (and the bench's churn and watches, the same for every run).
        let idle_start = Instant::now();
        let (idle_before, _) = usage(api);
        tokio::time::sleep(IDLE_WINDOW).await;
        let idle_rate = (usage(api).0 - idle_before) / idle_start.elapsed().as_secs_f64();
        report.add(
            "API server CPU, idle (per second)",
            format!("{idle_rate:.3} s"),
        );
        let log = |role: &str| {
            PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("scale-real-{}-{run}-{role}.log", size.name))
        };

        real::reset_peak(api);
        let (api_cpu_before, _) = usage(api);
        let served_before = real::apiserver_traffic(&plane).await;
        let writes_before = real::writes(&served_before.traffic);
        let start = Instant::now();
        let manager = start_manager(&plane, run, log("leader"));
        let pid = manager.child.id();
        let done = real::converge(&client, &model, start, timeout).await;
        let (api_cpu_cold, api_peak_cold) = usage(api);
        let cold_window = start.elapsed();
        let (cpu_cold, peak_cold) = usage(pid);
        let served_cold = real::apiserver_traffic(&plane).await;
        let writes_cold = real::writes(&served_cold.traffic);
        print!(
            "cold start, what the API server served:\n{}",
            real::traffic_between(&served_before.traffic, &served_cold.traffic)
        );
        add_convergence(&mut report, "cold start", done);
        report.add(
            "cold start: controller manager CPU",
            format!("{cpu_cold:.2} s"),
        );
        report.add(
            "cold start: API server CPU",
            format!("{:.2} s", api_cpu_cold - api_cpu_before),
        );
        report.add(
            "cold start: API server CPU less idle",
            less_idle(api_cpu_cold - api_cpu_before, idle_rate, cold_window),
        );
        report.add(
            "cold start: API server peak RSS",
            format!("{api_peak_cold:.1} MiB"),
        );
        report.add(
            "cold start: API server request latency p50 / p99",
            real::latency_between(&served_before, &served_cold),
        );
        report.add(
            "cold start: writes (quota status / PDB status / node patches)",
            writes_between(writes_before, writes_cold),
        );
        report.add(
            "controller manager RSS once converged",
            format!("{:.1} MiB", rss_mib(pid)),
        );
        report.add(
            "controller manager peak RSS, cold start",
            format!("{peak_cold:.1} MiB"),
        );

        real::reset_peak(api);
        let churn_start = Instant::now();
        let churned = real::churn(&client, &mut model).await;
        println!(
            "churn: {churned} pods replaced in {}",
            secs(churn_start.elapsed())
        );
        let done = real::converge(&client, &model, churn_start, timeout).await;
        let (api_cpu_all, api_peak_churn) = usage(api);
        let churn_window = churn_start.elapsed();
        let (cpu_all, peak_all) = usage(pid);
        let served_all = real::apiserver_traffic(&plane).await;
        let writes_all = real::writes(&served_all.traffic);
        print!(
            "churn, what the API server served:\n{}",
            real::traffic_between(&served_cold.traffic, &served_all.traffic)
        );
        add_convergence(&mut report, &format!("churn of {churned} pods"), done);
        report.add(
            "churn: controller manager CPU",
            format!("{:.2} s", cpu_all - cpu_cold),
        );
        report.add(
            "churn: API server CPU",
            format!("{:.2} s", api_cpu_all - api_cpu_cold),
        );
        report.add(
            "churn: API server CPU less idle",
            less_idle(api_cpu_all - api_cpu_cold, idle_rate, churn_window),
        );
        report.add(
            "churn: API server peak RSS",
            format!("{api_peak_churn:.1} MiB"),
        );
        report.add(
            "churn: API server request latency p50 / p99",
            real::latency_between(&served_cold, &served_all),
        );
        report.add(
            "churn: writes (quota status / PDB status / node patches)",
            writes_between(writes_cold, writes_all),
        );
        report.add(
            "controller manager peak RSS, whole run",
            format!("{peak_all:.1} MiB"),
        );
        if let Some((rate, duration)) = steady_churn_settings() {
            let (cpu_before, _) = usage(pid);
            let (api_cpu_before, _) = usage(api);
            let served_before = real::apiserver_traffic(&plane).await;
            let start = Instant::now();
            let (churned_model, lags) = steady::steady_churn(&client, model, rate, duration).await;
            model = churned_model;
            let window = start.elapsed();
            let figure =
                |what: &str| format!("steady churn ({rate}/s for {}): {what}", secs(duration));
            report.add(
                figure("PDB lag p50 / p99 / max (changes)"),
                Lags::summary(&lags.pdb),
            );
            for (change, pdb_lags) in steady::CHANGES.iter().zip(&lags.pdb_by_change) {
                report.add(
                    figure(&format!("PDB lag after {change} p50 / p99 / max")),
                    Lags::summary(pdb_lags),
                );
            }
            report.add(
                figure("quota lag after a deletion p50 / p99 / max (changes)"),
                Lags::summary(&lags.quota),
            );
            report.add(
                figure("statuses never right, PDB / quota"),
                format!("{} / {}", lags.missed_pdb, lags.missed_quota),
            );
            report.add(
                figure("controller manager CPU"),
                format!("{:.2} s", usage(pid).0 - cpu_before),
            );
            report.add(
                figure("API server CPU less idle"),
                less_idle(usage(api).0 - api_cpu_before, idle_rate, window),
            );
            report.add(
                figure("API server request latency p50 / p99"),
                real::latency_between(&served_before, &real::apiserver_traffic(&plane).await),
            );
        }
        let standby = start_manager(&plane, run, log("standby"));
        take_over(manager, standby, &client, &mut model, timeout, &mut report).await;
        reports.push((run.to_string(), report));
    }
    println!();
    let header: Vec<&str> = reports.iter().map(|(run, _)| run.as_str()).collect();
    println!(
        "| figure ({}: {} pods, {} namespaces, {} nodes; real control plane) | {} |",
        size.name,
        size.pods,
        size.namespaces,
        size.nodes,
        header.join(" | ")
    );
    println!("|---|{}", "---|".repeat(header.len()));
    if let Some((_, first)) = reports.first() {
        for (i, (figure, _)) in first.rows.iter().enumerate() {
            let values: Vec<&str> = reports
                .iter()
                .map(|(_, r)| r.rows.get(i).map_or("", |(_, v)| v.as_str()))
                .collect();
            println!("| {figure} | {} |", values.join(" | "));
        }
    }
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
