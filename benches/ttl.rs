//! ttl-controller at 5 000 nodes against kube-testserver, the kcm binary as a subprocess:
//! cold-start convergence, then the time for every node to follow a boundary change, the
//! patches sent, and kcm's CPU time and peak memory. Prints numbers; asserts no timing.
//! Run with `cargo bench --bench ttl`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube_testserver::TestServer;

mod common;
use common::spawn_kcm;
use kcm_testsupport::proc::usage;
use serde_json::json;

const NODES: usize = 5_000;
/// Nodes left after the deletes: below 1 800, so the TTL steps down from 300 s to 60 s.
const AFTER_DELETE: usize = 1_799;
const QPS: u32 = 500;

async fn census(api: &Api<Node>) -> BTreeMap<String, usize> {
    let mut census = BTreeMap::new();
    let list = api
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list: {e}"));
    for node in list.items {
        let ttl = node
            .metadata
            .annotations
            .unwrap_or_default()
            .get("node.alpha.kubernetes.io/ttl")
            .cloned()
            .unwrap_or_default();
        *census.entry(ttl).or_default() += 1;
    }
    census
}

async fn converge(api: &Api<Node>, ttl: &str, count: usize) -> Duration {
    let start = Instant::now();
    let want = BTreeMap::from([(ttl.to_string(), count)]);
    while census(api).await != want {
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "no convergence to {ttl} in 10 min"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

#[tokio::main]
async fn main() {
    let server = TestServer::start().await;
    let api: Api<Node> = Api::all(server.client());
    stream::iter(0..NODES)
        .map(|i| {
            let api = api.clone();
            async move {
                let node: Node = serde_json::from_value(json!({ "metadata": { "name": format!("node-{i:05}"), "labels": { "zone": format!("z{}", i % 3) } } }))
                    .unwrap_or_else(|e| unreachable!("static JSON: {e}"));
                api.create(&PostParams::default(), &node).await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await
        .unwrap_or_else(|e| panic!("create: {e}"));

    let mut kcm = spawn_kcm(server.kubeconfig_path(), "ttl", QPS);
    let patches = || server.count(|r| r.is("patch", "nodes", ""));

    let cold = converge(&api, "300", NODES).await;
    let cold_patches = patches();
    let (cpu_cold, _) = usage(kcm.id());
    println!(
        "cold start: {NODES} nodes annotated 300 in {cold:.2?} with {cold_patches} patches; kcm CPU {cpu_cold:.2}s"
    );

    // Delete down to AFTER_DELETE: the last delete crosses 1 800 and the step drops to 60 s.
    for i in AFTER_DELETE..NODES {
        api.delete(&format!("node-{i:05}"), &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("delete: {e}"));
    }
    let step_change = converge(&api, "60", AFTER_DELETE).await;
    let step_patches = patches() - cold_patches;
    let (cpu, peak_mib) = usage(kcm.id());
    println!(
        "boundary change 300→60 at {AFTER_DELETE} nodes: all converged {step_change:.2?} after the crossing delete, {step_patches} patches (one per node); kcm CPU {:.2}s for the phase, peak RSS {peak_mib:.1} MiB",
        cpu - cpu_cold
    );
    println!(
        "(client rate limit {QPS} qps; at the default 20 qps the {AFTER_DELETE} patches take about {:.0} s)",
        AFTER_DELETE as f64 / 20.0
    );
    let _ = kcm.kill();
    let _ = kcm.wait();
}
