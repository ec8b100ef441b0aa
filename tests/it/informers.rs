//! Shared informers: one watch per resource type however many controllers read it, deletes
//! delivered even when only a relist reveals them, and the initial state streamed (gate
//! `WatchListClient`) with a fallback to a paginated LIST when the server refuses.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm::k8s::view::Pod as PodView;
use kcm::runtime::metrics::Metrics;
use kcm::runtime::protobuf::ContentType;
use kcm::runtime::watching::informer::{Change, Informers};
use kcm::runtime::watching::listwatch::InitialList;
use kcm::runtime::watching::stored::NodeMeta;
use kcm_testsupport::{DEADLINE, eventually};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use kube_testserver::{Fault, Options, RequestRecord, TestServer};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{}" } },
        "spec": { "containers": [{ "name": "c", "image": "i" }] }
    }))
    .unwrap()
}

/// A server started with `options`, holding pod `default/a`; and the pods API.
async fn server_with_pod_a(options: Options) -> (TestServer, Api<Pod>) {
    let server = TestServer::start_with(options).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    (server, pods)
}

/// The process's informers against `server`, never shut down.
fn informers(server: &TestServer) -> Informers {
    Informers::new(
        server.client(),
        Metrics::new().unwrap(),
        CancellationToken::new(),
    )
}

async fn next_change(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Change<PodView>>,
) -> Change<PodView> {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .expect("a change in time")
        .expect("channel open")
}

fn describe(change: &Change<PodView>) -> String {
    match change {
        Change::Added(p) => format!("added {}", p.name_any()),
        Change::Updated { old, new } => format!(
            "updated {} {}->{}",
            new.name_any(),
            old.resource_version().unwrap_or_default(),
            new.resource_version().unwrap_or_default()
        ),
        Change::Deleted(p) => format!("deleted {}", p.name_any()),
        Change::Synced => "synced".to_string(),
    }
}

#[tokio::test]
async fn three_readers_share_one_watch_and_see_old_and_new() {
    let (server, pods) = server_with_pod_a(Options::default()).await;
    let informers = informers(&server);
    let mut subscribers: Vec<_> = (0..3)
        .map(|_| informers.get::<PodView>().subscribe())
        .collect();
    let informer = informers.get::<PodView>();
    informer.wait_synced().await;
    for rx in &mut subscribers {
        assert_eq!(describe(&next_change(rx).await), "added a");
        assert_eq!(describe(&next_change(rx).await), "synced");
    }
    let stored = informer.store().state();
    assert!(
        serde_json::to_value(&*stored[0]).unwrap()["metadata"]
            .get("annotations")
            .is_none(),
        "last-applied trimmed"
    );

    pods.patch(
        "a",
        &Default::default(),
        &kube::api::Patch::Merge(json!({ "metadata": { "labels": { "x": "y" } } })),
    )
    .await
    .unwrap();
    for rx in &mut subscribers {
        let change = next_change(rx).await;
        let Change::Updated { old, new } = &change else {
            panic!("expected an update, got {}", describe(&change))
        };
        assert!(old.labels.is_empty() && new.labels.get("x").is_some_and(|v| v == "y"));
    }
    // A late subscriber first gets what is stored.
    let mut late = informers.get::<PodView>().subscribe();
    assert_eq!(describe(&next_change(&mut late).await), "added a");
    assert_eq!(describe(&next_change(&mut late).await), "synced");

    assert_eq!(
        pod_watches_and_lists(&server),
        (1, 0),
        "one watch on pods, which streamed the initial state; no list"
    );
}

#[tokio::test]
async fn deletes_missed_while_disconnected_arrive_after_the_relist() {
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    for n in ["a", "b"] {
        pods.create(&PostParams::default(), &pod(n)).await.unwrap();
    }
    let informers = informers(&server);
    let informer = informers.get::<PodView>();
    let mut rx = informer.subscribe();
    informer.wait_synced().await;
    let mut seen = vec![
        describe(&next_change(&mut rx).await),
        describe(&next_change(&mut rx).await),
    ];
    seen.sort();
    assert_eq!(seen, vec!["added a", "added b"]);
    assert_eq!(describe(&next_change(&mut rx).await), "synced");

    server.inject(Fault::error(500).verb("watch").resource("pods"));
    server.store().drop_watches();
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    pods.create(&PostParams::default(), &pod("c"))
        .await
        .unwrap();
    server.store().compact();
    eventually("watch retried", DEADLINE, || async {
        server.count(|r| r.is("watch", "pods", "") && r.code == 500) > 0
    })
    .await;
    server.faults().clear();
    let mut after = vec![
        describe(&next_change(&mut rx).await),
        describe(&next_change(&mut rx).await),
    ];
    after.sort();
    assert_eq!(after, vec!["added c", "deleted a"]);
    // The relist's changes are sent together, so anything about b would be queued already.
    assert!(rx.try_recv().is_err(), "b unchanged: no event");
    // The 410 relisted as the first sync did: streamed again, from the last version seen.
    let streams = streaming_watches(&server);
    assert_eq!(streams.len(), 2, "the first sync and the relist");
    let version = streams[1]
        .query
        .split('&')
        .find_map(|p| p.strip_prefix("resourceVersion="));
    assert!(
        version.is_some_and(|v| !v.is_empty()),
        "{}",
        streams[1].query
    );
    assert_eq!(server.count(|r| r.is("list", "pods", "")), 0, "no list");
}

/// `--min-resync-period`: every stored object comes again as an update from itself to
/// itself, at a period in [min, 2 x min).
#[tokio::test]
async fn resync_replays_the_store_as_updates() {
    let (server, _) = server_with_pod_a(Options::default()).await;
    let informers =
        informers(&server).with_min_resync_period(std::time::Duration::from_millis(100));
    let informer = informers.get::<PodView>();
    let mut rx = informer.subscribe();
    informer.wait_synced().await;
    assert_eq!(describe(&next_change(&mut rx).await), "added a");
    assert_eq!(describe(&next_change(&mut rx).await), "synced");
    let started = std::time::Instant::now();
    for _ in 0..2 {
        let change = next_change(&mut rx).await;
        let Change::Updated { old, new } = &change else {
            panic!("expected a resync update, got {}", describe(&change))
        };
        assert!(
            std::sync::Arc::ptr_eq(old, new),
            "the stored object, unchanged"
        );
    }
    assert!(started.elapsed() >= std::time::Duration::from_millis(200));
    assert_eq!(
        pod_watches_and_lists(&server),
        (1, 0),
        "a resync reads the store, not the API server"
    );
}

/// How many watches and lists of pods the server saw.
fn pod_watches_and_lists(server: &TestServer) -> (usize, usize) {
    (
        server.count(|r| r.is("watch", "pods", "")),
        server.count(|r| r.is("list", "pods", "")),
    )
}

/// The pod watches that asked for a streaming list, in order.
fn streaming_watches(server: &TestServer) -> Vec<RequestRecord> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.is("watch", "pods", "") && r.query.contains("sendInitialEvents=true"))
        .collect()
}

/// Waits for the informer's first sync and its change stream's `added a`, `synced`.
async fn synced_with_a(
    informers: &Informers,
) -> tokio::sync::mpsc::UnboundedReceiver<Change<PodView>> {
    let informer = informers.get::<PodView>();
    let mut rx = informer.subscribe();
    informer.wait_synced().await;
    assert_eq!(describe(&next_change(&mut rx).await), "added a");
    assert_eq!(describe(&next_change(&mut rx).await), "synced");
    rx
}

/// Gate `WatchListClient` on (the default): the initial state is one watch, as client-go
/// 1.36 asks for it, and that same watch goes on with the changes.
#[tokio::test]
async fn the_initial_state_is_streamed_by_default() {
    let (server, pods) = server_with_pod_a(Options::default()).await;
    let informers = informers(&server);
    let mut rx = synced_with_a(&informers).await;
    let streams = streaming_watches(&server);
    assert_eq!(streams.len(), 1);
    let query = &streams[0].query;
    for param in [
        "allowWatchBookmarks=true",
        "sendInitialEvents=true",
        "resourceVersionMatch=NotOlderThan",
        "resourceVersion=",
    ] {
        assert!(query.split('&').any(|p| p == param), "{param} in {query}");
    }
    assert_eq!(streams[0].code, 200);
    pods.create(&PostParams::default(), &pod("b"))
        .await
        .unwrap();
    assert_eq!(describe(&next_change(&mut rx).await), "added b");
    assert_eq!(
        pod_watches_and_lists(&server),
        (1, 0),
        "the same watch; no list"
    );
}

/// A server that refuses streaming lists (422, as one before 1.27 or with `WatchList` off)
/// gets a paginated LIST instead, then a watch from the list's version, as client-go's
/// reflector falls back.
#[tokio::test]
async fn a_refused_stream_falls_back_to_a_paginated_list() {
    let (server, pods) = server_with_pod_a(Options {
        watch_list: false,
        ..Options::default()
    })
    .await;
    let informers = informers(&server);
    let mut rx = synced_with_a(&informers).await;
    let refused = streaming_watches(&server);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].code, 422);
    let lists: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.is("list", "pods", ""))
        .collect();
    assert_eq!(lists.len(), 1);
    assert!(lists[0].query.contains("limit=500"), "{}", lists[0].query);
    pods.create(&PostParams::default(), &pod("b"))
        .await
        .unwrap();
    assert_eq!(describe(&next_change(&mut rx).await), "added b");
    let watches: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.is("watch", "pods", ""))
        .collect();
    assert_eq!(watches.len(), 2, "the refused stream, then the watch");
    assert!(!watches[1].query.contains("sendInitialEvents"));
    assert_eq!(watches[1].code, 200);
}

/// client-go retries a stream answered 429 (after backoff) instead of listing, and lists
/// after any other refusal, a 500 included.
#[tokio::test]
async fn a_throttled_stream_is_retried_and_a_failed_one_lists() {
    let (server, _) = server_with_pod_a(Options::default()).await;
    server.inject(Fault::error(429).verb("watch").resource("pods").times(1));
    let informers = informers(&server);
    drop(synced_with_a(&informers).await);
    let codes: Vec<u16> = streaming_watches(&server).iter().map(|r| r.code).collect();
    assert_eq!(codes, [429, 200]);
    assert_eq!(server.count(|r| r.is("list", "pods", "")), 0);

    let (server, _) = server_with_pod_a(Options::default()).await;
    server.inject(Fault::error(500).verb("watch").resource("pods").times(1));
    let informers = self::informers(&server);
    drop(synced_with_a(&informers).await);
    let codes: Vec<u16> = streaming_watches(&server).iter().map(|r| r.code).collect();
    assert_eq!(codes, [500]);
    assert_eq!(server.count(|r| r.is("list", "pods", "")), 1);
}

/// Gate `WatchListClient` off: the initial state is a paginated LIST, as before 1.35.
#[tokio::test]
async fn with_the_gate_off_the_initial_state_is_listed() {
    let (server, pods) = server_with_pod_a(Options::default()).await;
    let informers = informers(&server).with_initial_list(InitialList::Paginated);
    let mut rx = synced_with_a(&informers).await;
    assert!(streaming_watches(&server).is_empty());
    assert_eq!(
        server.count(|r| r.is("list", "pods", "") && r.code == 200),
        1
    );
    pods.create(&PostParams::default(), &pod("b"))
        .await
        .unwrap();
    assert_eq!(describe(&next_change(&mut rx).await), "added b");
}

/// A pod with every field the stored view keeps, and some it skips (env, ports, images,
/// states).
fn rich_pod(name: &str, ready: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "app": "web", "tier": "front" },
            "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9c",
                "uid": "0b1c", "controller": true, "blockOwnerDeletion": true }] },
        "spec": {
            "nodeName": "n1", "priorityClassName": "high", "activeDeadlineSeconds": 60,
            "affinity": { "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": { "matchLabels": { "app": "web" },
                    "matchExpressions": [{ "key": "tier", "operator": "In", "values": ["front"] }] },
                "namespaces": ["default"], "topologyKey": "kubernetes.io/hostname" }] } },
            "initContainers": [{ "name": "proxy", "image": "proxy", "restartPolicy": "Always",
                "resources": { "requests": { "cpu": "50m" } } }],
            "containers": [{ "name": "web", "image": "web:1", "env": [{ "name": "A", "value": "b" }],
                "ports": [{ "name": "http", "containerPort": 8080, "protocol": "TCP" }],
                "resources": { "requests": { "cpu": "100m", "memory": "64Mi" },
                    "limits": { "cpu": "1", "memory": "128Mi" } } }],
            "overhead": { "cpu": "10m" },
            "resources": { "limits": { "memory": "1Gi" } },
            "resourceClaims": [{ "name": "gpu", "resourceClaimTemplateName": "gpu-template" }],
            "schedulingGroup": { "podGroupName": "training" }
        },
        "status": {
            "phase": "Running", "qosClass": "Burstable", "hostIP": "10.0.0.1",
            "conditions": [
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-01T10:00:00Z" },
                { "type": "Ready", "status": ready, "reason": "Probe", "lastTransitionTime": "2026-11-01T10:00:05Z" }
            ],
            "containerStatuses": [{ "name": "web", "ready": true, "restartCount": 0, "image": "web:1",
                "imageID": "web@sha256:01", "started": true,
                "state": { "running": { "startedAt": "2026-11-01T10:00:02Z" } },
                "allocatedResources": { "cpu": "100m", "memory": "64Mi" },
                "resources": { "requests": { "cpu": "100m" } } }],
            "resourceClaimStatuses": [{ "name": "gpu", "resourceClaimName": "web-1-gpu-x7" }]
        }
    }))
    .unwrap()
}

/// Every stored pod and node of `informers`, by name.
fn stored(informers: &Informers) -> (Vec<PodView>, Vec<(String, ObjectMeta)>) {
    let mut pods: Vec<PodView> = informers
        .get::<PodView>()
        .store()
        .state()
        .iter()
        .map(|p| (**p).clone())
        .collect();
    pods.sort_by_key(|p| p.name_any());
    let mut nodes: Vec<(String, ObjectMeta)> = informers
        .get::<NodeMeta>()
        .store()
        .state()
        .iter()
        .map(|n| (n.name_any(), n.metadata.clone()))
        .collect();
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    (pods, nodes)
}

/// `--kube-api-content-type` at its default (protobuf) stores the same pods and nodes as with
/// `application/json`, from the initial state (streamed or listed) and from watch events; and
/// a server that answers JSON to a protobuf request is read as JSON.
#[tokio::test]
async fn informers_store_the_same_pods_and_nodes_in_protobuf_as_in_json() {
    for (server_protobuf, initial) in [
        (true, InitialList::Streaming),
        (true, InitialList::Paginated),
        (false, InitialList::Streaming),
    ] {
        let server = TestServer::start_with(Options {
            protobuf: server_protobuf,
            // The pods' owner is not there; they are not to be collected.
            garbage_collector: false,
            ..Options::default()
        })
        .await
        .unwrap();
        let pods: Api<Pod> = Api::namespaced(server.client(), "default");
        let nodes: Api<Node> = Api::all(server.client());
        for name in ["web-1", "web-2"] {
            pods.create(&PostParams::default(), &rich_pod(name, "True"))
                .await
                .unwrap();
        }
        let node: Node = serde_json::from_value(json!({ "metadata": { "name": "n1",
            "labels": { "kubernetes.io/hostname": "n1" },
            "annotations": { "node.alpha.kubernetes.io/ttl": "0", "kubectl.kubernetes.io/last-applied-configuration": "{}" } } }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();

        let protobuf = informers(&server).with_initial_list(initial);
        let json = informers(&server)
            .with_initial_list(initial)
            .with_content_type(ContentType::Json);
        for informers in [&protobuf, &json] {
            informers.get::<PodView>().wait_synced().await;
            informers.get::<NodeMeta>().wait_synced().await;
        }
        let case = format!("server protobuf {server_protobuf}, {initial:?}");
        assert_eq!(stored(&protobuf), stored(&json), "{case}: initial state");
        let (initial_pods, initial_nodes) = stored(&protobuf);
        assert_eq!(initial_pods.len(), 2, "{case}");
        assert_eq!(
            initial_pods[0],
            PodView::from(&pods.get("web-1").await.unwrap())
        );
        assert_eq!(initial_nodes.len(), 1, "{case}");

        // Watch events: updates, a delete, an add.
        let mut changes = [&protobuf, &json].map(|i| i.get::<PodView>().subscribe());
        let mut unready = rich_pod("web-1", "False");
        unready.metadata.resource_version =
            pods.get("web-1").await.unwrap().metadata.resource_version;
        pods.replace_status("web-1", &PostParams::default(), &unready)
            .await
            .unwrap();
        // web-2 is bound: the delete marks it terminating (an update), and the kubelet's
        // delete with grace 0 removes it.
        pods.delete("web-2", &DeleteParams::default())
            .await
            .unwrap();
        pods.delete("web-2", &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
        pods.create(&PostParams::default(), &rich_pod("web-3", "True"))
            .await
            .unwrap();
        let live = [
            PodView::from(&pods.get("web-1").await.unwrap()),
            PodView::from(&pods.get("web-3").await.unwrap()),
        ];
        eventually(
            &format!("{case}: both stores follow the watch"),
            DEADLINE,
            || async { stored(&protobuf).0 == live && stored(&json).0 == live },
        )
        .await;
        // A deleted pod is read for its metadata alone in protobuf: its subscribers get the
        // version stored, spec and status included, as from JSON.
        let mut deleted = Vec::new();
        for rx in &mut changes {
            loop {
                if let Change::Deleted(pod) = next_change(rx).await {
                    deleted.push(pod);
                    break;
                }
            }
        }
        assert_eq!(deleted[0], deleted[1], "{case}: the deleted pod");
        assert_eq!(deleted[0].name_any(), "web-2", "{case}");
        assert!(
            deleted[0]
                .spec
                .as_ref()
                .is_some_and(|s| !s.containers.is_empty())
                && deleted[0].status.is_some(),
            "{case}: the deleted pod as stored"
        );
    }
}
