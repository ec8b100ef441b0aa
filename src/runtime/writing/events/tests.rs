//! client-go's `TestEventf` and `TestEventfNoNamespace`: what a recorder makes of each call,
//! in order, through the correlator to the sink.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::testing::{FakeSink, Write};
use super::*;

fn reference(uid: &str, field_path: Option<&str>) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        name: Some("foo".into()),
        namespace: Some("baz".into()),
        uid: Some(uid.into()),
        api_version: Some("v1".into()),
        field_path: field_path.map(Into::into),
        ..ObjectReference::default()
    }
}

#[tokio::test]
async fn eventf_creates_then_patches_each_distinct_event() {
    let seconds = Arc::new(AtomicI64::new(0));
    let read = seconds.clone();
    let clock: Clock = Arc::new(move || {
        Timestamp::from_second(1_700_000_000 + read.load(Ordering::SeqCst)).unwrap()
    });
    let (sink, mut writes) = FakeSink::new();
    let recorder = EventRecorder::start(sink, "eventTest", "test", clock, CancellationToken::new());

    let test_ref = reference("bar", Some("spec.containers[2]"));
    let test_pod = reference("bar", None);
    let test_ref2 = reference("differentUid", Some("spec.containers[3]"));
    // (object, reason, expected count, expected to patch)
    let table = [
        (&test_ref, "Started", 1, false),
        (&test_pod, "Killed", 1, false),
        (&test_ref, "Started", 2, true),
        (&test_ref2, "Started", 1, false),
        (&test_ref, "Started", 3, true),
        (&test_ref2, "Stopped", 1, false),
        (&test_ref2, "Stopped", 2, true),
    ];
    let mut names: Vec<(ObjectReference, &str, String)> = Vec::new();
    for (index, (object, reason, count, patches)) in table.into_iter().enumerate() {
        seconds.fetch_add(1, Ordering::SeqCst);
        recorder.record(
            object.clone(),
            false,
            reason,
            "some verbose message: 1".into(),
        );
        match writes.recv().await.unwrap() {
            Write::Create(event) => {
                assert!(!patches, "{index}: created {event:?}");
                let name = event.metadata.name.clone().unwrap();
                assert!(name.starts_with("foo."), "{index}: {name}");
                assert_eq!(event.metadata.namespace.as_deref(), Some("baz"));
                assert_eq!(&event.involved_object, object);
                assert_eq!(event.reason.as_deref(), Some(reason));
                assert_eq!(event.message.as_deref(), Some("some verbose message: 1"));
                assert_eq!(event.type_.as_deref(), Some("Normal"));
                assert_eq!(event.count, Some(count));
                assert_eq!(event.first_timestamp, event.last_timestamp);
                let source = event.source.unwrap();
                assert_eq!(source.component.as_deref(), Some("eventTest"));
                assert_eq!(source.host, None);
                assert_eq!(event.reporting_component.as_deref(), Some("eventTest"));
                assert_eq!(event.reporting_instance.as_deref(), Some(""));
                names.push((object.clone(), reason, name));
            }
            Write::Patch(name, patch) => {
                assert!(patches, "{index}: patched {name}");
                let first = names
                    .iter()
                    .find(|(o, r, _)| o == object && *r == reason)
                    .unwrap();
                assert_eq!(name, first.2, "{index}");
                assert_eq!(patch["count"], json!(count), "{index}");
                assert_eq!(patch["message"], json!("some verbose message: 1"));
            }
        }
    }
}

#[tokio::test]
async fn an_object_without_a_namespace_is_recorded_in_default() {
    let clock: Clock = Arc::new(|| Timestamp::from_second(1_700_000_000).unwrap());
    let (sink, mut writes) = FakeSink::new();
    let recorder = EventRecorder::start(sink, "eventTest", "test", clock, CancellationToken::new());
    let node = ObjectReference {
        kind: Some("Node".into()),
        name: Some("n1".into()),
        ..ObjectReference::default()
    };
    recorder.record(node, true, "Rebooted", "m".into());
    let Write::Create(event) = writes.recv().await.unwrap() else {
        panic!("not a create");
    };
    assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(event.metadata.name.as_deref(), Some("n1.17979cfe362a0000"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
}
