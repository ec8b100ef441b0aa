//! The client layer against kube-testserver: one token bucket per client, as upstream.

use std::collections::BTreeMap;

use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kcm::runtime::connection::client::{Clients, load_config};
use kcm::runtime::metrics::Metrics;
use kcm_testsupport::{DEADLINE, InProcess, eventually};
use kube::api::{Api, PostParams};
use kube_testserver::{Fault, TestServer};
use serde_json::json;

const BURST: usize = 4;

/// Creates nodes `node-0`… through the server's own client.
async fn create_nodes(server: &TestServer, count: usize) -> Api<Node> {
    let nodes: Api<Node> = Api::all(server.client());
    for i in 0..count {
        let node = json!({ "metadata": { "name": format!("node-{i}") } });
        nodes
            .create(
                &PostParams::default(),
                &serde_json::from_value(node).unwrap(),
            )
            .await
            .unwrap();
    }
    nodes
}

/// Waits until the TTL controller has annotated every node.
async fn every_node_annotated(nodes: &Api<Node>) {
    eventually("every node annotated", DEADLINE, || async {
        nodes
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .all(|n| {
                n.metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key("node.alpha.kubernetes.io/ttl"))
            })
    })
    .await;
}

/// With a rate so small that no token comes back during the test (one per 1000 s), each
/// bucket allows exactly `--kube-api-burst` requests. The work below needs more than that
/// in total (3 informer lists, 3 node patches, the StorageVersion GC's reads and delete, a
/// discovery request) but at most `BURST` per client, so it completes only if every client
/// has a bucket of its own; the request log shows who used what. No timing is involved: a
/// shared bucket would stall the work for good, not slow it. The informers list (gate
/// `WatchListClient` off): a streamed initial state comes by watches, which take no token.
#[tokio::test]
async fn every_controller_and_the_informers_have_their_own_token_bucket() {
    let server = TestServer::start().await;
    let nodes = create_nodes(&server, 3).await;
    server
        .seed(json!({
            "apiVersion": "internal.apiserver.k8s.io/v1alpha1", "kind": "StorageVersion",
            "metadata": { "name": "core.pods" }, "spec": {},
            "status": { "storageVersions": [
                { "apiServerID": "apiserver-gone", "encodingVersion": "v1", "decodableVersions": ["v1"] }
            ] },
        }))
        .unwrap();
    let burst = format!("--kube-api-burst={BURST}");
    let kcm = InProcess::start(
        &server,
        &[
            "--controllers=ttl-controller,storage-version-gc",
            "--feature-gates=StorageVersionAPI=true,WatchListClient=false",
            "--kube-api-qps=0.001",
            &burst,
        ],
    )
    .await;

    every_node_annotated(&nodes).await;
    let svs: Api<StorageVersion> = Api::all(server.client());
    eventually("the dead StorageVersion deleted", DEADLINE, || async {
        svs.get_opt("core.pods").await.unwrap().is_none()
    })
    .await;

    // Throttled requests (all but watches) by client: the user agent ends in its name.
    let mut by_client: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in server.requests() {
        let Some((_, name)) = r.user_agent.split_once("kcm/test/") else {
            continue;
        };
        if r.info.verb != "watch" {
            by_client
                .entry(name.to_string())
                .or_default()
                .push(format!("{} {}", r.info.verb, r.info.resource));
        }
    }
    let lists = |name: &str| by_client.get(name).cloned().unwrap_or_default();
    assert_eq!(
        lists("ttl-controller"),
        vec!["patch nodes"; 3],
        "{by_client:?}"
    );
    let mut informer_lists = lists("shared-informers");
    informer_lists.sort();
    assert_eq!(
        informer_lists,
        ["list leases", "list nodes", "list storageversions"],
        "{by_client:?}"
    );
    assert!(
        lists("storage-version-garbage-collector").contains(&"delete storageversions".into()),
        "{by_client:?}"
    );
    let total: usize = by_client.values().map(Vec::len).sum();
    assert!(
        by_client.values().all(|r| r.len() <= BURST) && total > BURST,
        "each client within its own burst, together beyond one: {by_client:?}"
    );
    kcm.stop().await;
}

/// Over TLS each client keeps its connections alive and reuses them: the TTL controller's
/// 20 patches go over at most one connection per worker (a request in flight each), not one
/// per request, and every connection of kcm is TLS with HTTP/1.1.
#[tokio::test]
async fn over_tls_connections_are_kept_and_reused() {
    const NODES: usize = 20;
    const TTL_WORKERS: usize = 5;
    let server = TestServer::start_with(kube_testserver::Options {
        tls: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let nodes = create_nodes(&server, NODES).await;
    let kcm = InProcess::start(&server, &["--controllers=ttl-controller"]).await;
    every_node_annotated(&nodes).await;
    kcm.stop().await;

    let client_of = |user_agent: &str| {
        user_agent
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let patches = server
        .count(|r| r.is("patch", "nodes", "") && client_of(&r.user_agent) == "ttl-controller");
    assert_eq!(patches, NODES);
    let mut by_client: BTreeMap<String, usize> = BTreeMap::new();
    for conn in server.connections() {
        if conn.user_agent.contains(" kcm/") {
            assert!(conn.tls && !conn.http2, "{conn:?}");
            *by_client.entry(client_of(&conn.user_agent)).or_default() += 1;
        }
    }
    let ttl = by_client.get("ttl-controller").copied().unwrap_or_default();
    assert!((1..=TTL_WORKERS).contains(&ttl), "{by_client:?}");
}

/// The HTTP stack under every client (src/runtime/connection/transport.rs) keeps kube's
/// behaviour: a 503 is retried as kube's policy retries it, and over TLS an answer more than
/// ten times the connection's read buffer arrives whole.
#[tokio::test]
async fn the_stack_retries_unavailable_answers_and_reads_large_ones_whole() {
    const SIZE: usize = 200 * 1024;
    let server = TestServer::start_with(kube_testserver::Options {
        tls: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let big = json!({ "metadata": { "name": "big" }, "data": { "big": "x".repeat(SIZE) } });
    Api::<ConfigMap>::namespaced(server.client(), "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(big).unwrap(),
        )
        .await
        .unwrap();
    server.inject(
        Fault::error(503)
            .verb("get")
            .resource("configmaps")
            .times(2),
    );

    let config = load_config(Some(server.kubeconfig_path())).await.unwrap();
    let metrics = Metrics::new().unwrap();
    let clients = Clients::new(config, 1000.0, 1000, "stack", metrics.rest_client.clone());
    let api: Api<ConfigMap> = Api::namespaced(clients.client("reader").unwrap(), "default");
    let read = api.get("big").await.unwrap();
    let value = read
        .data
        .unwrap_or_default()
        .remove("big")
        .unwrap_or_default();
    assert_eq!(value.len(), SIZE);
    assert!(value.bytes().all(|b| b == b'x'));
    let codes: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.is("get", "configmaps", "") && r.user_agent.ends_with("kcm/stack/reader"))
        .map(|r| r.code)
        .collect();
    assert_eq!(codes, [503, 503, 200]);
}
