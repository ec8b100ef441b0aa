//! The runtime's write path and event recorder against kube-testserver.

use k8s_openapi::api::core::v1::{ConfigMap, Event, ObjectReference};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kcm::runtime::connection::errors::is_conflict;
use kcm::runtime::metrics::Metrics;
use kcm::runtime::writing::events::EventRecorder;
use kcm::runtime::writing::events::sink::ApiSink;
use kcm::runtime::writing::writer::{ApiWriter, Part, UpstreamFix};
use kcm_testsupport::{DEADLINE, eventually};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube_testserver::TestServer;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(
        json!({ "metadata": { "name": name, "namespace": "default" }, "data": { "k": value } }),
    )
    .unwrap()
}

fn writes(metrics: &Metrics, verb: &str, result: &str) -> u64 {
    metrics
        .api_writes
        .with_label_values(&["test", verb, "configmaps", result])
        .get()
}

#[tokio::test]
async fn writer_counts_writes_and_shadow_writes_nothing() {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let metrics = Metrics::new().unwrap();
    let writer = ApiWriter::new("test", metrics.clone(), false, Default::default());
    let created = writer.create(&api, &cm("a", "1")).await.unwrap();
    let mut desired = created.clone();
    desired.data = Some([("k".to_string(), "2".to_string())].into());
    writer.replace(&api, &created, &desired).await.unwrap();
    let stale = writer.replace(&api, &created, &desired).await;
    assert!(
        stale.as_ref().is_err_and(is_conflict),
        "stale replace conflicts"
    );
    assert_eq!(
        (
            writes(&metrics, "create", "success"),
            writes(&metrics, "update", "success"),
            writes(&metrics, "update", "error")
        ),
        (1, 1, 1)
    );

    let shadow_metrics = Metrics::new().unwrap();
    let shadow = ApiWriter::new("test", shadow_metrics.clone(), true, Default::default());
    let before = server.count(|r| r.is_write());
    let live = api.get("a").await.unwrap();
    let mut changed = live.clone();
    changed.data = Some([("k".to_string(), "3".to_string())].into());
    let returned = shadow.replace(&api, &live, &changed).await.unwrap();
    assert_eq!(
        returned.data.unwrap()["k"],
        "3",
        "shadow returns what would have been written"
    );
    shadow
        .patch(
            &api,
            &live,
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "k": "4" } })),
            Part::Whole,
        )
        .await
        .unwrap();
    shadow.create(&api, &cm("b", "1")).await.unwrap();
    // A write a fix of kcm's makes is labelled with its upstream issue, not as unexplained.
    shadow
        .because(Some(UpstreamFix("kubernetes#130723")))
        .delete(&api, &live, &Default::default())
        .await
        .unwrap();
    assert_eq!(
        server.count(|r| r.is_write()),
        before,
        "shadow sent no write"
    );
    let diffs = |reason: &str| {
        shadow_metrics
            .shadow_diffs
            .with_label_values(&["test", "configmaps", reason])
            .get()
    };
    assert_eq!((diffs("unexplained"), diffs("kubernetes#130723")), (3, 1));
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "2");
}

/// A recorder of `component` writing through a writer labelled `test`.
fn start_recorder(server: &TestServer, metrics: &Metrics, shadow: bool) -> EventRecorder {
    let writer = ApiWriter::new("test", metrics.clone(), shadow, Default::default());
    EventRecorder::start(
        ApiSink::new(server.client(), writer),
        "controllermanager",
        "test",
        kcm::runtime::clock::system(),
        CancellationToken::new(),
    )
}

fn event_writes(metrics: &Metrics, verb: &str, result: &str) -> u64 {
    metrics
        .api_writes
        .with_label_values(&["test", verb, "events", result])
        .get()
}

/// The core/v1 Events in `default`, as (name, reason, message, count), by name.
async fn stored_events(events: &Api<Event>) -> Vec<(String, String, String, i32)> {
    let mut all: Vec<_> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| {
            (
                e.metadata.name.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
                e.count.unwrap_or_default(),
            )
        })
        .collect();
    all.sort();
    all
}

#[tokio::test]
async fn events_are_created_then_patched_as_client_go_records_them_and_withheld_in_shadow() {
    let server = TestServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let obj = api
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: obj.metadata.name.clone(),
        namespace: obj.metadata.namespace.clone(),
        uid: obj.metadata.uid.clone(),
        ..Default::default()
    };
    let metrics = Metrics::new().unwrap();
    let recorder = start_recorder(&server, &metrics, false);
    let events: Api<Event> = Api::namespaced(server.client(), "default");
    let no_pods = || "No matching pods found".to_string();

    recorder.record(reference.clone(), true, "NoPods", no_pods());
    eventually("the event is created", DEADLINE, || async {
        stored_events(&events).await.len() == 1
    })
    .await;
    let event = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    let name = event.metadata.name.clone().unwrap();
    assert!(name.starts_with("a."), "{name}");
    assert_eq!(event.reason.as_deref(), Some("NoPods"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.message.as_deref(), Some("No matching pods found"));
    assert_eq!(event.count, Some(1));
    assert_eq!(event.first_timestamp, event.last_timestamp);
    assert_eq!(
        event.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("controllermanager")
    );
    assert_eq!(event.source.as_ref().and_then(|s| s.host.as_deref()), None);
    assert_eq!(
        event.reporting_component.as_deref(),
        Some("controllermanager")
    );
    assert_eq!(event.reporting_instance.as_deref().unwrap_or(""), "");
    assert_eq!(event.involved_object.name.as_deref(), Some("a"));
    assert_eq!(event.involved_object.uid, obj.metadata.uid);

    // The same event again: a patch of its count.
    recorder.record(reference.clone(), true, "NoPods", no_pods());
    eventually("the event is counted twice", DEADLINE, || async {
        stored_events(&events).await == [(name.clone(), "NoPods".into(), no_pods(), 2)]
    })
    .await;
    assert_eq!(event_writes(&metrics, "create", "success"), 1);
    assert_eq!(event_writes(&metrics, "patch", "success"), 1);

    // The same reason with a new message is a new event, not a third count of the first.
    recorder.record(reference.clone(), true, "NoPods", "another text".into());
    eventually("a second event", DEADLINE, || async {
        stored_events(&events).await.len() == 2
    })
    .await;
    assert!(
        stored_events(&events)
            .await
            .contains(&(name.clone(), "NoPods".into(), no_pods(), 2))
    );

    // A repeat of an event that is gone is created anew under its name.
    events.delete(&name, &Default::default()).await.unwrap();
    recorder.record(reference.clone(), true, "NoPods", no_pods());
    eventually("the event is created anew", DEADLINE, || async {
        stored_events(&events)
            .await
            .contains(&(name.clone(), "NoPods".into(), no_pods(), 3))
    })
    .await;
    assert_eq!(event_writes(&metrics, "patch", "error"), 1);
    assert_eq!(event_writes(&metrics, "create", "success"), 3);

    let shadow_metrics = Metrics::new().unwrap();
    let shadow = start_recorder(&server, &shadow_metrics, true);
    shadow.record(reference, false, "Other", "x".into());
    eventually("the shadow event is counted", DEADLINE, || async {
        shadow_metrics
            .shadow_diffs
            .with_label_values(&["test", "events", "unexplained"])
            .get()
            == 1
    })
    .await;
    assert_eq!(
        stored_events(&events).await.len(),
        2,
        "nothing written in shadow"
    );
}

#[tokio::test]
async fn each_client_keeps_to_its_own_qps_and_burst_and_records_client_go_metrics() {
    let server = TestServer::start().await;
    let config = kcm::runtime::connection::client::load_config(Some(server.kubeconfig_path()))
        .await
        .unwrap();
    let host = format!(
        "{}:{}",
        config.cluster_url.host().unwrap(),
        config.cluster_url.port_u16().unwrap()
    );
    let metrics = Metrics::new().unwrap();
    let clients = kcm::runtime::connection::client::Clients::new(
        config,
        10.0,
        2,
        "qps-test",
        metrics.rest_client.clone(),
    );
    // Burst 2, then 10 per second: 7 requests need at least 5 waits of 100 ms.
    let api: Api<ConfigMap> = Api::namespaced(clients.client("first").unwrap(), "default");
    let start = std::time::Instant::now();
    for _ in 0..7 {
        api.list(&ListParams::default()).await.unwrap();
    }
    let elapsed = start.elapsed();
    assert!(
        elapsed >= std::time::Duration::from_millis(500),
        "7 requests took only {elapsed:?}"
    );
    let agent = server
        .requests()
        .last()
        .map(|r| r.user_agent.clone())
        .unwrap_or_default();
    assert!(
        agent.starts_with("kube-controller-manager/") && agent.ends_with("kcm/qps-test/first"),
        "{agent}"
    );
    let rest = &metrics.rest_client;
    assert_eq!(
        rest.requests
            .with_label_values(&["200", "GET", &host])
            .get(),
        7
    );
    let waited = rest
        .rate_limiter_duration
        .with_label_values(&["GET", &host]);
    assert_eq!(waited.get_sample_count(), 7);
    assert!(
        waited.get_sample_sum() >= 0.45,
        "{}",
        waited.get_sample_sum()
    );
    let durations = rest.request_duration.with_label_values(&["GET", &host]);
    assert_eq!(durations.get_sample_count(), 7);

    // Another client has a full bucket of its own: its first 2 requests take a token at
    // once, whatever the first client used (the recorded wait is 0 before any await).
    let other: Api<ConfigMap> = Api::namespaced(clients.client("second").unwrap(), "default");
    let waited_before = waited.get_sample_sum();
    for _ in 0..2 {
        other.list(&ListParams::default()).await.unwrap();
    }
    assert_eq!(waited.get_sample_count(), 9);
    assert!(
        waited.get_sample_sum() - waited_before < 0.05,
        "the second client waited for the first one's bucket"
    );
    // Errors are counted by code, as client-go does.
    assert!(api.get("missing").await.is_err());
    assert_eq!(
        rest.requests
            .with_label_values(&["404", "GET", &host])
            .get(),
        1
    );
}

/// A status write's answer is asked for as metadata alone and read for the resourceVersion it
/// gives the object, in either encoding the server answers with.
#[tokio::test]
async fn a_status_write_keeps_the_resource_version_the_server_gave() {
    use k8s_openapi::api::core::v1::ResourceQuota;
    use kcm::runtime::protobuf::ContentType;
    for (server_protobuf, content) in [
        (true, ContentType::Protobuf),
        (false, ContentType::Protobuf),
        (true, ContentType::Json),
    ] {
        let server = TestServer::start_with(kube_testserver::Options {
            protobuf: server_protobuf,
            ..Default::default()
        })
        .await
        .unwrap();
        let api: Api<ResourceQuota> = Api::namespaced(server.client(), "default");
        let quota: ResourceQuota = serde_json::from_value(
            json!({ "metadata": { "name": "q" }, "spec": { "hard": { "pods": "10" } } }),
        )
        .unwrap();
        let live = api.create(&PostParams::default(), &quota).await.unwrap();
        let writer = ApiWriter::new("test", Metrics::new().unwrap(), false, content);
        let mut desired = live.clone();
        desired.status =
            serde_json::from_value(json!({ "hard": { "pods": "10" }, "used": { "pods": "1" } }))
                .unwrap();
        let written = writer.replace_status(&api, &live, desired).await.unwrap();
        let stored = api.get("q").await.unwrap();
        let case = format!("server protobuf {server_protobuf}, {content:?}");
        assert_ne!(
            written.metadata.resource_version, live.metadata.resource_version,
            "{case}"
        );
        assert_eq!(
            written.metadata.resource_version, stored.metadata.resource_version,
            "{case}"
        );
        assert_eq!(
            stored.status.unwrap().used.unwrap()["pods"].0,
            "1",
            "{case}"
        );
        // The next write from what was written is not a conflict.
        let mut again = written.clone();
        again.status.as_mut().unwrap().used = Some([("pods".into(), Quantity("2".into()))].into());
        writer.replace_status(&api, &written, again).await.unwrap();
    }
}
