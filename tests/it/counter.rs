//! Object counts of any resource (a registered custom type here) from metadata-only watches.

use kcm::runtime::metrics::Metrics;
use kcm::runtime::watching::counter::{CountChange, ObjectCounter};
use kcm::runtime::watching::listwatch::InitialList;
use kcm_testsupport::{DEADLINE, eventually};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube_testserver::{Fault, ResourceType, TestServer};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn widgets() -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

async fn create(api: &Api<DynamicObject>, name: &str) {
    let obj: DynamicObject = serde_json::from_value(
        json!({ "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": name } }),
    )
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

#[tokio::test]
async fn counts_follow_creates_deletes_and_a_relist() {
    let server = TestServer::start().await;
    server.store().register(ResourceType::custom(
        "example.com",
        "v1",
        "widgets",
        "Widget",
    ));
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &widgets());
    create(&api, "a").await;
    create(&api, "b").await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let counter = ObjectCounter::start(
        server.client(),
        &widgets(),
        "widgets.example.com".into(),
        Metrics::new().unwrap(),
        &CancellationToken::new(),
        tx,
        InitialList::default(),
    );
    counter.wait_synced().await;
    assert_eq!((counter.count("default"), counter.count("other")), (2, 0));
    // Streamed, as the shared informers (gate `WatchListClient` on by default).
    assert_eq!(
        server
            .count(|r| r.is("watch", "widgets", "") && r.query.contains("sendInitialEvents=true")),
        1
    );
    assert_eq!(server.count(|r| r.is("list", "widgets", "")), 0);
    let first = rx.recv().await.unwrap();
    assert_eq!(
        first,
        CountChange {
            resource: "widgets.example.com".into(),
            namespace: Some("default".into())
        }
    );
    let synced = rx.recv().await.unwrap();
    assert_eq!(
        synced.namespace, None,
        "the first complete list is announced"
    );

    create(&api, "c").await;
    eventually("3 counted", DEADLINE, || async {
        counter.count("default") == 3
    })
    .await;
    api.delete("a", &DeleteParams::default()).await.unwrap();
    eventually("2 counted", DEADLINE, || async {
        counter.count("default") == 2
    })
    .await;

    // Deleted while the watch is away: only the relist tells.
    server.inject(Fault::error(500).verb("watch").resource("widgets"));
    server.store().drop_watches();
    api.delete("b", &DeleteParams::default()).await.unwrap();
    server.store().compact();
    eventually("watch retried", DEADLINE, || async {
        server.count(|r| r.is("watch", "widgets", "") && r.code == 500) > 0
    })
    .await;
    server.faults().clear();
    eventually("1 counted after the relist", DEADLINE, || async {
        counter.count("default") == 1
    })
    .await;
    counter.stop();
}
