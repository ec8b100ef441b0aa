//! kube-runtime's watcher and reflector against the server: initial lists (paged and
//! streaming), resumption after a dropped watch, and relisting after 410 Gone.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube_testserver::{Fault, TestServer};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({ "metadata": { "name": name } })).unwrap()
}

/// The default namespace's config maps, with these created.
async fn config_maps(server: &TestServer, names: &[&str]) -> Api<ConfigMap> {
    let api = Api::namespaced(server.client(), "default");
    for name in names {
        api.create(&PostParams::default(), &cm(name)).await.unwrap();
    }
    api
}

fn names(store: &Store<ConfigMap>) -> BTreeSet<String> {
    store
        .state()
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Starts a reflector over configmaps in `default`; returns its store.
fn reflect(api: Api<ConfigMap>, config: watcher::Config) -> Store<ConfigMap> {
    let (store, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config)).default_backoff();
    tokio::spawn(stream.for_each(|_| async {}));
    store
}

async fn wait_for(store: &Store<ConfigMap>, want: BTreeSet<String>) {
    common::eventually(&format!("store holds {want:?}"), common::DEADLINE, || {
        let got = names(store);
        let want = want.clone();
        async move { got == want }
    })
    .await;
}

#[tokio::test]
async fn reflector_resumes_after_a_dropped_watch_without_relisting() {
    let server = TestServer::start().await;
    let api = config_maps(&server, &["a", "b", "c"]).await;
    let store = reflect(api.clone(), watcher::Config::default());
    wait_for(&store, set(&["a", "b", "c"])).await;
    common::eventually("watch open", common::DEADLINE, || async {
        server.store().open_watches() == 1
    })
    .await;

    server.store().drop_watches();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("d")).await.unwrap();
    wait_for(&store, set(&["b", "c", "d"])).await;

    let lists = server.count(|r| r.is("list", "configmaps", ""));
    let watches = server.count(|r| r.is("watch", "configmaps", "") && r.code == 200);
    assert_eq!(lists, 1, "resumed from its resourceVersion, no relist");
    assert!(watches >= 2, "re-watched after the drop ({watches})");
}

#[tokio::test]
async fn reflector_relists_after_410_and_drops_objects_deleted_meanwhile() {
    let server = TestServer::start().await;
    let api = config_maps(&server, &["a", "b", "c"]).await;
    let store = reflect(api.clone(), watcher::Config::default());
    wait_for(&store, set(&["a", "b", "c"])).await;

    // Keep the watcher away while things change and history is compacted.
    server.inject(Fault::error(500).verb("watch").resource("configmaps"));
    server.store().drop_watches();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("d")).await.unwrap();
    server.store().compact();
    common::eventually(
        "watcher retried against the fault",
        common::DEADLINE,
        || async { server.count(|r| r.is("watch", "configmaps", "") && r.code == 500) > 0 },
    )
    .await;
    server.faults().clear();

    wait_for(&store, set(&["b", "c", "d"])).await;
    assert_eq!(
        server.count(|r| r.is("list", "configmaps", "")),
        2,
        "one relist after 410"
    );
}

#[tokio::test]
async fn paged_initial_list_and_streaming_list_both_fill_the_store() {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let all: Vec<String> = (0..7).map(|i| format!("cm-{i}")).collect();
    for n in &all {
        api.create(&PostParams::default(), &cm(n)).await.unwrap();
    }
    let want: BTreeSet<String> = all.iter().cloned().collect();

    let paged = reflect(api.clone(), watcher::Config::default().page_size(3));
    wait_for(&paged, want.clone()).await;
    assert_eq!(
        server.count(|r| r.is("list", "configmaps", "")),
        3,
        "7 objects in pages of 3"
    );

    let streamed = reflect(api.clone(), watcher::Config::default().streaming_lists());
    wait_for(&streamed, want.clone()).await;
    let streaming_watch = server
        .requests()
        .into_iter()
        .find(|r| r.is("watch", "configmaps", "") && r.query.contains("sendInitialEvents=true"));
    assert!(
        streaming_watch.is_some(),
        "the streaming list used sendInitialEvents"
    );

    api.create(&PostParams::default(), &cm("late"))
        .await
        .unwrap();
    let mut with_late = want.clone();
    with_late.insert("late".into());
    wait_for(&streamed, with_late.clone()).await;
    wait_for(&paged, with_late).await;
}

#[tokio::test]
async fn watch_events_can_be_delayed() {
    let server = TestServer::start().await;
    let api = config_maps(&server, &[]).await;
    let store = reflect(api.clone(), watcher::Config::default());
    wait_for(&store, set(&[])).await;
    common::eventually("watch open", common::DEADLINE, || async {
        server.store().open_watches() == 1
    })
    .await;
    server
        .store()
        .set_watch_delay("", "configmaps", Duration::from_millis(300));
    let before = std::time::Instant::now();
    api.create(&PostParams::default(), &cm("slow"))
        .await
        .unwrap();
    assert!(names(&store).is_empty(), "not delivered at once");
    wait_for(&store, set(&["slow"])).await;
    assert!(
        before.elapsed() >= Duration::from_millis(300),
        "delivered after the delay"
    );
}

/// A streaming list as the API server serves it (`sendInitialEvents=true`): the objects as
/// ADDED, then the bookmark annotated `k8s.io/initial-events-end` at the snapshot's version,
/// sent only when bookmarks are allowed; the options checked as `ValidateListOptions` does.
#[tokio::test]
async fn streaming_lists_are_served_as_the_api_server_serves_them() {
    let server = TestServer::start().await;
    let api = config_maps(&server, &["a", "b"]).await;
    let listed_at = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let params = WatchParams::streaming_lists().timeout(5);
    let mut stream = api.watch(&params, "").await.unwrap().boxed();
    let mut seen = Vec::new();
    loop {
        match stream.next().await.expect("stream open").unwrap() {
            WatchEvent::Added(c) => seen.push(c.metadata.name.unwrap()),
            WatchEvent::Bookmark(b) => {
                assert_eq!(
                    b.metadata.annotations.get("k8s.io/initial-events-end"),
                    Some(&"true".to_string())
                );
                assert_eq!(b.metadata.resource_version, listed_at);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["a", "b"]);

    // Without allowWatchBookmarks (not required, for old watches from "0"): no bookmark.
    let path = "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1";
    let raw = kube_testserver::testing::http_get(server.addr(), path)
        .await
        .unwrap();
    assert_eq!(raw.status, 200);
    assert_eq!(raw.body.matches("\"ADDED\"").count(), 2);
    assert!(!raw.body.contains("BOOKMARK"), "{}", raw.body);

    let path = "/api/v1/namespaces/default/configmaps?watch=true&resourceVersionMatch=NotOlderThan";
    let raw = kube_testserver::testing::http_get(server.addr(), path)
        .await
        .unwrap();
    assert_eq!(raw.status, 422);
    assert!(
        raw.body.contains(r#""message":"ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided""#),
        "{}",
        raw.body
    );
}

/// A server with `WatchList` off (as any before 1.27) refuses a streaming list with 422; a
/// legacy watch from "" still gets the objects as ADDED, with no bookmark ending them.
#[tokio::test]
async fn a_server_without_watch_list_refuses_streaming_lists() {
    let server = common::start_with(|o| o.watch_list = false).await;
    let api = config_maps(&server, &["a"]).await;
    let params = WatchParams::streaming_lists().timeout(5);
    let Err(kube::Error::Api(status)) = api.watch(&params, "").await.map(|_| ()) else {
        panic!("a streaming list is refused");
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
    );
    let path = "/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&timeoutSeconds=1";
    let raw = kube_testserver::testing::http_get(server.addr(), path)
        .await
        .unwrap();
    assert_eq!(raw.body.matches("\"ADDED\"").count(), 1, "{}", raw.body);
    assert!(!raw.body.contains("initial-events-end"), "{}", raw.body);
}

/// Every response body's bytes are counted, streamed watch events included.
#[tokio::test]
async fn the_bytes_sent_are_counted() {
    let server = TestServer::start().await;
    config_maps(&server, &["a"]).await;
    let before = server.bytes_sent();
    let path = "/api/v1/namespaces/default/configmaps";
    let raw = kube_testserver::testing::http_get(server.addr(), path)
        .await
        .unwrap();
    assert_eq!(server.bytes_sent() - before, raw.body.len() as u64);
    let before = server.bytes_sent();
    let path = "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1";
    let raw = kube_testserver::testing::http_get(server.addr(), path)
        .await
        .unwrap();
    let event = raw
        .body
        .lines()
        .find(|l| l.contains("\"ADDED\""))
        .expect("the object as ADDED");
    assert!(server.bytes_sent() - before > event.len() as u64);
}
