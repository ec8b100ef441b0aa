//! Events are one resource with two APIs, as on the real API server: what is written through
//! core/v1 reads through events.k8s.io/v1 and the other way round, with upstream's field
//! mapping, for get, list (field selectors included), watch, update, patch and delete.

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube_testserver::TestServer;
use serde_json::{Value, json};

fn core_api(server: &TestServer, ns: &str) -> Api<CoreEvent> {
    Api::namespaced(server.client(), ns)
}

fn events_api(server: &TestServer, ns: &str) -> Api<Event> {
    Api::namespaced(server.client(), ns)
}

async fn raw(server: &TestServer, path: &str) -> Value {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    server.client().request(request).await.unwrap()
}

/// What client-go's recorder creates for the first occurrence (an old-style Event).
fn recorded_event() -> CoreEvent {
    serde_json::from_value(json!({
        "metadata": { "name": "web.181a2b3c4d5e6f70", "namespace": "shop" },
        "involvedObject": {
            "kind": "PodDisruptionBudget", "namespace": "shop", "name": "web",
            "uid": "0b6f5c1e-1111-2222-3333-444455556666", "apiVersion": "policy/v1",
            "resourceVersion": "42",
        },
        "reason": "NoPods", "message": "No matching pods found", "type": "Normal",
        "source": { "component": "controllermanager" },
        "firstTimestamp": "2026-01-01T10:00:00Z", "lastTimestamp": "2026-01-01T10:00:00Z",
        "count": 1,
        "reportingComponent": "", "reportingInstance": "",
    }))
    .unwrap()
}

async fn with_namespace(server: &TestServer, ns: &str) {
    server
        .seed(json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }))
        .unwrap();
}

#[tokio::test]
async fn a_core_event_and_its_repeats_read_through_events_k8s_io() {
    let server = TestServer::start().await;
    with_namespace(&server, "shop").await;
    let core = core_api(&server, "shop");
    let events = events_api(&server, "shop");
    let created = core
        .create(&PostParams::default(), &recorded_event())
        .await
        .unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();

    // A watch through the other API sees the repeat.
    let watch = events
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap();
    // client-go's repeat: a strategic-merge patch of count, lastTimestamp and message.
    let patch = json!({ "count": 2, "lastTimestamp": "2026-01-01T10:05:00Z", "message": "No matching pods found" });
    let strategic = Patch::Strategic(patch);
    let patched = core
        .patch("web.181a2b3c4d5e6f70", &PatchParams::default(), &strategic)
        .await
        .unwrap();
    assert_eq!(patched.count, Some(2));

    let shown = raw(
        &server,
        "/apis/events.k8s.io/v1/namespaces/shop/events/web.181a2b3c4d5e6f70",
    )
    .await;
    let metadata = shown["metadata"].clone();
    assert_eq!(
        shown,
        json!({
            "kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": metadata,
            "eventTime": null,
            "reason": "NoPods",
            "regarding": {
                "kind": "PodDisruptionBudget", "namespace": "shop", "name": "web",
                "uid": "0b6f5c1e-1111-2222-3333-444455556666", "apiVersion": "policy/v1",
                "resourceVersion": "42",
            },
            "note": "No matching pods found",
            "type": "Normal",
            "deprecatedSource": { "component": "controllermanager" },
            "deprecatedFirstTimestamp": "2026-01-01T10:00:00Z",
            "deprecatedLastTimestamp": "2026-01-01T10:05:00Z",
            "deprecatedCount": 2,
        })
    );
    assert_eq!(
        metadata["resourceVersion"],
        json!(patched.metadata.resource_version.unwrap())
    );

    let mut watch = Box::pin(watch);
    let modified = loop {
        match watch
            .try_next()
            .await
            .unwrap()
            .expect("the watch sees the repeat")
        {
            WatchEvent::Bookmark(_) => continue,
            other => break other,
        }
    };
    let WatchEvent::Modified(seen) = modified else {
        panic!("expected MODIFIED, got {modified:?}");
    };
    assert_eq!(seen.deprecated_count, Some(2));
    assert_eq!(seen.note.as_deref(), Some("No matching pods found"));
    assert_eq!(seen.regarding.unwrap().name.as_deref(), Some("web"));

    // Field selectors in each API's names.
    let by_regarding = ListParams::default().fields("regarding.name=web,reason=NoPods");
    assert_eq!(events.list(&by_regarding).await.unwrap().items.len(), 1);
    let by_involved = ListParams::default().fields("involvedObject.kind=PodDisruptionBudget");
    assert_eq!(core.list(&by_involved).await.unwrap().items.len(), 1);
    let other = ListParams::default().fields("regarding.name=other");
    assert!(events.list(&other).await.unwrap().items.is_empty());
    let err = events.list(&by_involved).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("field label not supported: involvedObject.kind"),
        "{err}"
    );

    // Deleting through events.k8s.io deletes the core Event.
    events
        .delete("web.181a2b3c4d5e6f70", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        core.get_opt("web.181a2b3c4d5e6f70")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn an_events_k8s_io_event_reads_through_core_v1() {
    let server = TestServer::start().await;
    let events = events_api(&server, "default");
    let core = core_api(&server, "default");
    let event: Event = serde_json::from_value(json!({
        "metadata": { "name": "n1.1", "namespace": "default" },
        "eventTime": "2026-01-01T10:00:00.000001Z",
        "reportingController": "ttl-controller", "reportingInstance": "kcm-0",
        "action": "Annotate", "reason": "TTLChanged", "note": "ttl 15s",
        "regarding": { "kind": "Node", "name": "n1", "apiVersion": "v1" },
        "type": "Normal",
    }))
    .unwrap();
    events.create(&PostParams::default(), &event).await.unwrap();

    let shown = raw(&server, "/api/v1/namespaces/default/events/n1.1").await;
    let metadata = shown["metadata"].clone();
    assert_eq!(
        shown,
        json!({
            "kind": "Event", "apiVersion": "v1", "metadata": metadata,
            "involvedObject": { "kind": "Node", "name": "n1", "apiVersion": "v1" },
            "reason": "TTLChanged", "message": "ttl 15s", "source": {},
            "firstTimestamp": null, "lastTimestamp": null,
            "type": "Normal", "eventTime": "2026-01-01T10:00:00.000001Z",
            "action": "Annotate",
            "reportingComponent": "ttl-controller", "reportingInstance": "kcm-0",
        })
    );

    // A series update through events.k8s.io, then a core list sees it.
    let series =
        json!({ "series": { "count": 2, "lastObservedTime": "2026-01-01T10:01:00.000001Z" } });
    events
        .patch("n1.1", &PatchParams::default(), &Patch::Merge(series))
        .await
        .unwrap();
    let listed = core.list(&ListParams::default()).await.unwrap();
    let stored = listed
        .items
        .iter()
        .find(|e| e.metadata.name.as_deref() == Some("n1.1"))
        .unwrap();
    assert_eq!(stored.series.as_ref().unwrap().count, Some(2));
    assert_eq!(
        stored.reporting_component.as_deref(),
        Some("ttl-controller")
    );

    // An update through core/v1 shows through events.k8s.io.
    let mut current = core.get("n1.1").await.unwrap();
    current.message = Some("ttl 30s".into());
    core.replace("n1.1", &PostParams::default(), &current)
        .await
        .unwrap();
    assert_eq!(
        events.get("n1.1").await.unwrap().note.as_deref(),
        Some("ttl 30s")
    );

    // The same write through the other API changes nothing: no new resourceVersion.
    let before = events.get("n1.1").await.unwrap();
    let again = events
        .replace("n1.1", &PostParams::default(), &before)
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        before.metadata.resource_version
    );
}

#[tokio::test]
async fn event_validation_is_upstreams() {
    let server = TestServer::start().await;
    with_namespace(&server, "shop").await;
    let events = events_api(&server, "shop");
    let core = core_api(&server, "shop");

    // events.k8s.io/v1 requires eventTime (and the rest of the new-style fields).
    let no_time: Event = serde_json::from_value(json!({
        "metadata": { "name": "x" },
        "reportingController": "c", "reportingInstance": "i", "action": "a", "reason": "r",
        "regarding": { "kind": "Pod", "namespace": "shop", "name": "p" }, "type": "Normal",
    }))
    .unwrap();
    let err = events
        .create(&PostParams::default(), &no_time)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Event \"x\" is invalid: eventTime: Required value"),
        "{err}"
    );

    // An old-style core Event lives in its object's namespace.
    let mut elsewhere = recorded_event();
    elsewhere.metadata.namespace = Some("default".into());
    let err = Api::<CoreEvent>::namespaced(server.client(), "default")
        .create(&PostParams::default(), &elsewhere)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "involvedObject.namespace: Invalid value: \"shop\": does not match event.namespace"
        ),
        "{err}"
    );
    // A new-style core Event needs its reporting fields.
    let mut new_style = recorded_event();
    new_style.event_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        "2026-01-01T10:00:00.000001Z".parse().unwrap(),
    ));
    let err = core
        .create(&PostParams::default(), &new_style)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("reportingComponent: Required value"),
        "{err}"
    );
}
