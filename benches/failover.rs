//! The failover benchmark: two kcm processes (default flags, leader election on)
//! against kube-testserver holding the scale benchmark's world (`common::world`); once the
//! leader has made every quota, PDB and node right, it is SIGKILLed, and while no one leads
//! every tenth pod is replaced (so every quota and PDB must change). Run once with warm
//! standbys (`--warm-standby=true`, the default) and once with cold ones.
//!
//! Reported for each: SIGKILL → the standby's lease write that acquired; lease acquired →
//! its first other write; SIGKILL → every quota, PDB and node right again; the standby's
//! cost before the kill (RSS, CPU seconds, watches opened). Times come from the server's
//! request log (same clock as the bench). Prints markdown rows; asserts no timing.
//!
//! `KCM_FAILOVER=a cargo bench --bench failover` (or `-- a`; sizes as the scale bench: `a`,
//! `b`, `tiny`; default `a`). `KCM_FAILOVER_PODS`, `KCM_FAILOVER_NAMESPACES` and
//! `KCM_FAILOVER_NODES` override the size's counts, `KCM_FAILOVER_MODES=warm,cold` picks the
//! modes, `KCM_FAILOVER_QPS` sets `--kube-api-qps` and `--kube-api-burst` (default: kcm's,
//! 20 and 30), `KCM_FAILOVER_TIMEOUT_SECS` bounds each wait (default 1800).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_testserver::{RequestRecord, ResourceType, TestServer};

mod common;
use common::rss_mib;
use common::world::{Checker, Model, chosen_size, converge, resource_type, secs, seeded_server};
use kcm_testsupport::agent::identity;
use kcm_testsupport::free_port;
use kcm_testsupport::proc::usage;

/// One kcm replica with leader election on, killed when dropped.
struct Replica {
    child: Child,
    port: u16,
}

impl Replica {
    fn spawn(kubeconfig: &Path, warm: bool, log: &Path) -> Self {
        let port = free_port();
        // Default flags (20 qps per controller) unless the run asks for another rate.
        let qps: Vec<String> = env_count("KCM_FAILOVER_QPS")
            .map(|qps| {
                vec![
                    format!("--kube-api-qps={qps}"),
                    format!("--kube-api-burst={qps}"),
                ]
            })
            .unwrap_or_default();
        let log = std::fs::File::create(log).unwrap_or_else(|e| panic!("kcm log: {e}"));
        let child = Command::new(env!("CARGO_BIN_EXE_kcm"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg(format!("--warm-standby={warm}"))
            .args(["--leader-elect=true", "--bind-address=127.0.0.1"])
            .arg(format!("--port={port}"))
            .args(qps)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("kcm: {e}"));
        Self { child, port }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    async fn get(&self, path: &str) -> Option<(u16, String)> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        let response = kube_testserver::testing::http_get(addr, path).await?;
        Some((response.status, response.body))
    }

    async fn is(&self, state: &str) -> bool {
        let sample = format!("kcm_replica_state{{state=\"{state}\"}} 1");
        self.get("/metrics")
            .await
            .is_some_and(|(_, body)| body.lines().any(|line| line == sample))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `done` every 100 ms until it holds; panics after `timeout`.
async fn wait_until<F: Future<Output = bool>>(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> F,
) {
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < timeout, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn holder(server: &TestServer, leases: &ResourceType) -> Option<String> {
    let lease = server.store().get(leases, "kube-system", "kcm").ok()?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(String::from)
}

fn by(record: &RequestRecord, who: &str) -> bool {
    identity(&record.user_agent) == Some(who)
}

/// One failover: the figures as (figure, value) rows.
async fn failover(
    server: &Arc<TestServer>,
    model: &mut Model,
    (checker, pods): (&Checker, &ResourceType),
    warm: bool,
    timeout: Duration,
) -> Vec<(String, String)> {
    let mode = if warm { "warm" } else { "cold" };
    let leases = resource_type(server, "coordination.k8s.io", "leases");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let mut rows = Vec::new();
    let mut row = |figure: String, value: String| {
        println!("  {figure}: {value}");
        rows.push((figure, value));
    };

    let start = Instant::now();
    let mut leader = Replica::spawn(
        server.kubeconfig_path(),
        warm,
        &dir.join(format!("failover-{mode}-leader.log")),
    );
    wait_until("the first replica leads", timeout, || leader.is("leader")).await;
    let leader_id = holder(server, &leases).expect("the lease is held");
    let standby = Replica::spawn(
        server.kubeconfig_path(),
        warm,
        &dir.join(format!("failover-{mode}-standby.log")),
    );
    let standby_state = if warm { "warm_standby" } else { "cold_standby" };
    wait_until("the second replica stands by", timeout, || {
        standby.is(standby_state)
    })
    .await;
    wait_until("the standby is ready", timeout, || async {
        standby
            .get("/readyz")
            .await
            .is_some_and(|(code, _)| code == 200)
    })
    .await;
    let done = converge(checker, model, start, timeout, poll(model)).await;
    assert!(
        done.iter().all(Option::is_some),
        "the first leader did not converge"
    );
    let standby_id = server
        .requests()
        .iter()
        .filter(|r| r.at >= start)
        .filter_map(|r| identity(&r.user_agent))
        .find(|id| *id != leader_id)
        .map(String::from)
        .expect("the standby has asked for the lease");
    let (standby_cpu, _) = usage(standby.pid());
    let requests = server.requests();
    let (standby_watches, standby_writes) = (
        requests
            .iter()
            .filter(|r| by(r, &standby_id) && r.info.verb == "watch")
            .count(),
        requests
            .iter()
            .filter(|r| by(r, &standby_id) && r.is_write() && r.info.resource != "leases")
            .count(),
    );
    drop(requests);
    row(
        format!("{mode}: standby before the kill: RSS, CPU, watches, writes"),
        format!(
            "{:.0} MiB (leader {:.0} MiB), {standby_cpu:.2} s, {standby_watches}, {standby_writes}",
            rss_mib(standby.pid()),
            rss_mib(leader.pid())
        ),
    );

    leader.kill();
    let killed = Instant::now();
    let churned = model.churn(server, pods);
    row(
        format!("{mode}: churn while no one leads"),
        format!("{churned} pods replaced in {}", secs(killed.elapsed())),
    );
    let (standby_cpu_at_kill, _) = usage(standby.pid());
    let done = converge(checker, model, killed, timeout, poll(model)).await;
    let requests = server.requests();
    let after = |r: &&RequestRecord| r.at >= killed && by(r, &standby_id);
    let acquired = requests
        .iter()
        .filter(after)
        .find(|r| r.info.resource == "leases" && r.is_write() && r.code < 300)
        .map(|r| r.at);
    let first_write = requests
        .iter()
        .filter(after)
        .find(|r| r.is_write() && r.info.resource != "leases")
        .map(|r| r.at);
    let last_leader_write = requests
        .iter()
        .filter(|r| by(r, &leader_id) && r.is_write())
        .map(|r| r.at)
        .max();
    if let (Some(last), Some(first)) = (last_leader_write, first_write) {
        assert!(last < first, "the two leaders' writes overlap");
    }
    let since = |at: Option<Instant>, from: Instant| {
        at.map_or_else(
            || "never".into(),
            |at| format!("{:.3} s", (at - from).as_secs_f64()),
        )
    };
    row(
        format!("{mode}: SIGKILL → lease acquired"),
        since(acquired, killed),
    );
    if let Some(acquired) = acquired {
        row(
            format!("{mode}: lease acquired → first write"),
            since(first_write, acquired),
        );
    }
    for (name, at) in ["quota", "PDB", "node TTL"].iter().zip(done) {
        row(
            format!("{mode}: SIGKILL → every {name} right"),
            at.map_or_else(|| "not within the timeout".into(), secs),
        );
    }
    row(
        format!("{mode}: new leader's CPU from the kill until converged"),
        format!("{:.2} s", usage(standby.pid()).0 - standby_cpu_at_kill),
    );
    drop(standby);
    // The next run's first replica must not wait out this one's lease.
    let _ = server
        .store()
        .delete(&leases, "kube-system", "kcm", &Default::default());
    rows
}

fn poll(model: &Model) -> Duration {
    Duration::from_millis(if model.size.pods > 50_000 { 1000 } else { 200 })
}

fn env_count(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[tokio::main]
async fn main() {
    let mut size = chosen_size("KCM_FAILOVER");
    size.pods = env_count("KCM_FAILOVER_PODS").unwrap_or(size.pods);
    size.namespaces = env_count("KCM_FAILOVER_NAMESPACES").unwrap_or(size.namespaces);
    size.nodes = env_count("KCM_FAILOVER_NODES").unwrap_or(size.nodes);
    let modes = std::env::var("KCM_FAILOVER_MODES").unwrap_or_else(|_| "warm,cold".into());
    let timeout =
        Duration::from_secs(env_count("KCM_FAILOVER_TIMEOUT_SECS").unwrap_or(1800) as u64);
    println!(
        "failover ({}): {} pods, {} namespaces (one ResourceQuota and one PDB each), {} nodes",
        size.name, size.pods, size.namespaces, size.nodes
    );
    // Plain HTTP: the figures are takeover latencies, which TLS hardly moves.
    let (server, mut model, checker, pods) = seeded_server(size, false).await;
    let mut rows = Vec::new();
    for mode in modes.split(',') {
        println!("{mode} standby:");
        rows.extend(
            failover(
                &server,
                &mut model,
                (&checker, &pods),
                mode == "warm",
                timeout,
            )
            .await,
        );
    }
    println!();
    println!(
        "| figure ({}: {} pods, {} namespaces, {} nodes) | value |",
        size.name, size.pods, size.namespaces, size.nodes
    );
    println!("|---|---|");
    for (figure, value) in rows {
        println!("| {figure} | {value} |");
    }
}
