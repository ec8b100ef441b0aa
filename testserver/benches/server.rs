//! Throughput of kube-testserver over real HTTP, through kube's client: creates per second,
//! a 10k-pod list, and fan-out of writes to 50 open watches. Prints numbers; asserts nothing
//! about time. Run with `cargo bench -p kube-testserver`.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube_testserver::TestServer;
use serde_json::json;

const PODS: usize = 10_000;
const WATCHERS: usize = 50;
const FANOUT_WRITES: usize = 200;
const CONCURRENCY: usize = 16;

fn pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": format!("pod-{i:05}"), "labels": { "app": format!("app-{}", i % 100) } },
        "spec": {
            "nodeName": format!("node-{}", i % 50),
            "containers": [{ "name": "c", "image": "registry.example/app:1",
                             "resources": { "requests": { "cpu": "100m", "memory": "128Mi" } } }]
        }
    }))
    .unwrap_or_else(|e| unreachable!("static pod JSON: {e}"))
}

fn per_second(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}

#[tokio::main]
async fn main() {
    let server = TestServer::start().await;
    let client = server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    let start = Instant::now();
    stream::iter(0..PODS)
        .map(|i| {
            let pods = pods.clone();
            async move { pods.create(&PostParams::default(), &pod(i)).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .unwrap_or_else(|e| panic!("create failed: {e}"));
    let create_time = start.elapsed();
    println!(
        "create: {PODS} pods in {:.2?} = {:.0} writes/s ({CONCURRENCY} concurrent clients)",
        create_time,
        per_second(PODS, create_time)
    );

    let mut list_times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let list = pods
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("list: {e}"));
        assert_eq!(list.items.len(), PODS);
        list_times.push(start.elapsed());
    }
    list_times.sort();
    println!(
        "list: {PODS} pods, median {:.2?} (min {:.2?}, max {:.2?})",
        list_times[2], list_times[0], list_times[4]
    );

    let start = Instant::now();
    let selected = pods
        .list(&ListParams::default().labels("app=app-7"))
        .await
        .unwrap_or_else(|e| panic!("list: {e}"));
    println!(
        "list with labelSelector over {PODS} pods: {} items in {:.2?}",
        selected.items.len(),
        start.elapsed()
    );

    // Fan-out: WATCHERS watches on configmaps; every write must reach all of them.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list: {e}"))
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let stream = cms
            .watch(&WatchParams::default().timeout(290), &rv)
            .await
            .unwrap_or_else(|e| panic!("watch: {e}"));
        watchers.push(tokio::spawn(async move {
            let mut stream = stream.boxed();
            let mut seen = 0;
            while seen < FANOUT_WRITES {
                match stream.next().await {
                    Some(Ok(WatchEvent::Added(_))) => seen += 1,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => panic!("watch error: {e}"),
                    None => panic!("watch ended early"),
                }
            }
            Instant::now()
        }));
    }
    while server.store().open_watches() < WATCHERS {
        tokio::task::yield_now().await;
    }
    let start = Instant::now();
    for i in 0..FANOUT_WRITES {
        let cm: ConfigMap = serde_json::from_value(
            json!({ "metadata": { "name": format!("cm-{i}") }, "data": { "k": "v" } }),
        )
        .unwrap_or_else(|e| unreachable!("static JSON: {e}"));
        cms.create(&PostParams::default(), &cm)
            .await
            .unwrap_or_else(|e| panic!("create: {e}"));
    }
    let writes_done = start.elapsed();
    let mut last = start;
    for w in watchers {
        last = last.max(w.await.unwrap_or_else(|e| panic!("watcher task: {e}")));
    }
    let delivered = last - start;
    println!(
        "fan-out: {FANOUT_WRITES} sequential writes x {WATCHERS} watches = {} events delivered in {:.2?} ({:.0} events/s; writes alone took {:.2?})",
        FANOUT_WRITES * WATCHERS,
        delivered,
        per_second(FANOUT_WRITES * WATCHERS, delivered),
        writes_done
    );
    server.shutdown().await;
}
