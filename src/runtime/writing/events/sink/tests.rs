//! client-go's event_test.go on writing: `TestWriteEventError` (which failures are tried
//! again, and how often), `TestUpdateExpiredEvent` (a repeat of a vanished event is created
//! anew, without a resourceVersion) and `TestCancelEvent` (shutdown ends the retries).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tokio::sync::mpsc::UnboundedReceiver;

use super::super::testing::{FakeSink, Write, status, transport};
use super::*;
use crate::runtime::clock::Clock;

fn clock() -> Clock {
    Arc::new(|| Timestamp::from_second(1_700_000_000).unwrap())
}

fn event() -> Event {
    Event {
        metadata: kube::api::ObjectMeta {
            name: Some("foo.1".into()),
            namespace: Some("baz".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            name: Some("foo".into()),
            namespace: Some("baz".into()),
            ..Default::default()
        },
        reason: Some("Started".into()),
        message: Some("m".into()),
        count: Some(1),
        first_timestamp: Some(Time(clock()())),
        last_timestamp: Some(Time(clock()())),
        ..Default::default()
    }
}

fn drain(writes: &mut UnboundedReceiver<Write>) -> Vec<Write> {
    let mut all = Vec::new();
    while let Ok(write) = writes.try_recv() {
        all.push(write);
    }
    all
}

/// (case, failures before success, the error, attempts wanted)
type Case = (&'static str, usize, fn() -> kube::Error, usize);

#[tokio::test(start_paused = true)]
async fn write_errors_are_given_up_or_retried_as_client_go_does() {
    let build: fn() -> kube::Error =
        || kube::Error::BuildRequest(kube::core::request::Error::Validation("bad".into()));
    let rejected: fn() -> kube::Error = || status(500, "InternalError");
    let exists: fn() -> kube::Error = || status(409, "AlreadyExists");
    let cases: [Case; 5] = [
        ("giveUp construction", 1000, build, 1),
        ("giveUp status", 1000, rejected, 1),
        ("giveUp exists", 1000, exists, 1),
        (
            "retry transport",
            1000,
            transport,
            MAX_TRIES_PER_EVENT as usize,
        ),
        ("succeedEventually", 1, transport, 2),
    ];
    for (case, failures, error, wanted) in cases {
        let (sink, mut writes) = FakeSink::new();
        sink.fail_creates(failures, error);
        let mut correlator = EventCorrelator::new(clock());
        let start = tokio::time::Instant::now();
        record_to_sink(
            &sink,
            &mut correlator,
            event(),
            &CancellationToken::new(),
            "test",
        )
        .await;
        assert_eq!(drain(&mut writes).len(), wanted, "{case}");
        if wanted == MAX_TRIES_PER_EVENT as usize {
            // A randomized first sleep, then ten full ones.
            let waited = start.elapsed();
            assert!(
                waited >= SLEEP * 10 && waited < SLEEP * 11,
                "{case}: {waited:?}"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_written_event_is_remembered_so_its_repeat_patches() {
    let (sink, mut writes) = FakeSink::new();
    sink.fail_creates(1, transport);
    let mut correlator = EventCorrelator::new(clock());
    let shutdown = CancellationToken::new();
    record_to_sink(&sink, &mut correlator, event(), &shutdown, "test").await;
    record_to_sink(&sink, &mut correlator, event(), &shutdown, "test").await;
    let all = drain(&mut writes);
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(
        all[2],
        Write::Patch(
            "foo.1".into(),
            serde_json::json!({ "count": 2, "lastTimestamp": "2023-11-14T22:13:20Z", "message": "m" })
        )
    );
}

#[tokio::test(start_paused = true)]
async fn a_repeat_of_a_vanished_event_is_created_anew() {
    let (sink, mut writes) = FakeSink::new();
    let mut correlator = EventCorrelator::new(clock());
    let shutdown = CancellationToken::new();
    record_to_sink(&sink, &mut correlator, event(), &shutdown, "test").await;
    sink.fail_patches(1, || status(404, "NotFound"));
    let mut repeat = event();
    repeat.metadata.resource_version = Some("updated-resource-version".into());
    record_to_sink(&sink, &mut correlator, repeat, &shutdown, "test").await;
    let all = drain(&mut writes);
    assert!(
        matches!(&all[1], Write::Patch(name, _) if name == "foo.1"),
        "{all:?}"
    );
    let Write::Create(created) = &all[2] else {
        panic!("{all:?}")
    };
    assert_eq!(created.metadata.resource_version, None);
    assert_eq!(created.count, Some(2));
    assert_eq!(created.metadata.name.as_deref(), Some("foo.1"));
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_the_retries() {
    let (sink, mut writes) = FakeSink::new();
    sink.fail_creates(1000, transport);
    let mut correlator = EventCorrelator::new(clock());
    let shutdown = CancellationToken::new();
    shutdown.cancel();
    record_to_sink(&sink, &mut correlator, event(), &shutdown, "test").await;
    assert_eq!(drain(&mut writes).len(), 1);
}
