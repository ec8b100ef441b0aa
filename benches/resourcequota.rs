//! resourcequota-controller: (1) the usage of one namespace with 10 000 pods, computed by the
//! pure evaluator; (2) end to end against kube-testserver with 1 000 quotas (100 namespaces ×
//! 10 quotas, 10 000 pods): time until every quota has its status, then the latency from a
//! pod create to all quotas of its namespace counting it, and kcm's CPU and peak memory.
//! Prints numbers; asserts no timing. Run with `cargo bench --bench resourcequota`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kcm::controllers::resourcequota::evaluator::QuotaGates;
use kcm::controllers::resourcequota::evaluator::pods::{pod_matches_scope, pod_usage};
use kcm::controllers::resourcequota::scope::parse_scope;
use kcm::controllers::resourcequota::usage::sum_usage;
use kcm::k8s::view::Pod as PodView;
use kube::api::{Api, ListParams};
use kube_testserver::TestServer;
use serde_json::json;

mod common;
use common::{latency_summary, spawn_kcm};
use kcm_testsupport::proc::usage;

const NAMESPACES: usize = 100;
const QUOTAS_PER_NS: usize = 10;
const PODS_PER_NS: usize = 100;
const CREATES: usize = 200;

fn pod_json(ns: &str, name: &str, i: usize) -> serde_json::Value {
    json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name, "namespace": ns },
        "spec": { "containers": [
            { "name": "app", "image": "i", "resources": { "requests": { "cpu": format!("{}m", 100 + i % 7), "memory": "128Mi" }, "limits": { "memory": "256Mi" } } },
            { "name": "sidecar", "image": "i", "resources": { "requests": { "cpu": "10m", "memory": "16Mi" } } }
        ] },
        "status": { "phase": "Running" } })
}

fn pure_usage() {
    let pods: Vec<PodView> = (0..10_000)
        .map(|i| serde_json::from_value(pod_json("big", &format!("p{i}"), i)).unwrap_or_default())
        .collect();
    let names: Vec<String> = [
        "pods",
        "count/pods",
        "requests.cpu",
        "requests.memory",
        "limits.memory",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let scope = parse_scope(&[], None);
    let now = Time(Timestamp::now());
    let mut times = Vec::new();
    let mut last = Default::default();
    for _ in 0..10 {
        let start = Instant::now();
        last = sum_usage(
            pods.iter(),
            &names,
            |p| pod_usage(p, &now, QuotaGates::default()),
            |p| pod_matches_scope(p, &scope, QuotaGates::default()),
        );
        times.push(start.elapsed());
    }
    times.sort();
    let shown: Vec<String> = last.list.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!(
        "usage of one namespace with 10000 pods: median {:.2?} (min {:.2?}); {}",
        times[5],
        times[0],
        shown.join(" ")
    );
}

fn quota_json(ns: &str, q: usize) -> serde_json::Value {
    json!({ "apiVersion": "v1", "kind": "ResourceQuota", "metadata": { "name": format!("q{q}"), "namespace": ns },
        "spec": { "hard": { "pods": "1000", "count/pods": "1000", "requests.cpu": "100", "requests.memory": "100Gi" } } })
}

async fn pods_used(api: &Api<ResourceQuota>) -> Vec<i64> {
    let list = api
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list: {e}"));
    list.items
        .iter()
        .map(|q| {
            q.status
                .as_ref()
                .and_then(|s| s.used.as_ref())
                .and_then(|u| u.get("pods"))
                .and_then(|v| v.0.parse().ok())
                .unwrap_or(-1)
        })
        .collect()
}

#[tokio::main]
async fn main() {
    pure_usage();

    let server = TestServer::start().await;
    for n in 0..NAMESPACES {
        let ns = format!("ns-{n:03}");
        server
            .seed(json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }))
            .unwrap_or_else(|e| panic!("{}", e.message));
        for i in 0..PODS_PER_NS {
            server
                .seed(pod_json(&ns, &format!("p{i}"), i))
                .unwrap_or_else(|e| panic!("{}", e.message));
        }
        for q in 0..QUOTAS_PER_NS {
            server
                .seed(quota_json(&ns, q))
                .unwrap_or_else(|e| panic!("{}", e.message));
        }
    }
    let all: Api<ResourceQuota> = Api::all(server.client());
    let started = Instant::now();
    let mut kcm = spawn_kcm(server.kubeconfig_path(), "resourcequota", 1000);
    while pods_used(&all)
        .await
        .iter()
        .any(|&p| p != PODS_PER_NS as i64)
    {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "no convergence in 10 min"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cold = started.elapsed();
    let (cpu_cold, _) = usage(kcm.id());
    println!(
        "cold start: {} quotas over {} pods in {cold:.2?}; kcm CPU {cpu_cold:.2}s",
        NAMESPACES * QUOTAS_PER_NS,
        NAMESPACES * PODS_PER_NS
    );

    let mut latencies = Vec::with_capacity(CREATES);
    for c in 0..CREATES {
        let ns = format!("ns-{:03}", c % NAMESPACES);
        let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), &ns);
        let expected = pods_used(&quotas).await.first().copied().unwrap_or(0) + 1;
        let created = Instant::now();
        // Seeded, past the API's quota admission, which would store the new usage itself:
        // what is timed is kcm's own update.
        server
            .seed(pod_json(&ns, &format!("new-{c}"), c))
            .unwrap_or_else(|e| panic!("create: {}", e.message));
        while pods_used(&quotas).await.iter().any(|&p| p != expected) {
            assert!(
                created.elapsed() < Duration::from_secs(60),
                "no status change in 60 s"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        latencies.push(created.elapsed());
    }
    let summary = latency_summary(&mut latencies);
    let (cpu, peak) = usage(kcm.id());
    println!(
        "pod create → all {QUOTAS_PER_NS} quotas of its namespace updated: {CREATES} creates, {summary}; kcm CPU for the creates {:.2}s, peak RSS {peak:.1} MiB",
        cpu - cpu_cold
    );
    let writes = server
        .count(|r| r.user_agent.contains("kcm/") && r.is("update", "resourcequotas", "status"));
    println!(
        "quota status writes: {writes} ({} initial + {} per create expected: {})",
        NAMESPACES * QUOTAS_PER_NS,
        QUOTAS_PER_NS,
        NAMESPACES * QUOTAS_PER_NS + CREATES * QUOTAS_PER_NS
    );
    let _ = kcm.kill();
    let _ = kcm.wait();
}
