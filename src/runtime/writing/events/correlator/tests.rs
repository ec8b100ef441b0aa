//! client-go's events_cache_test.go, case for case, plus the cases kcm depends on: a new
//! message on the same reason is a new event, repeats patch, the spam budget refills.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use k8s_openapi::api::core::v1::EventSource;
use serde_json::json;

use super::*;

const START: i64 = 1_700_000_000;

/// client-go's `IntervalClock`: every read returns the time, then moves it on by `step`.
fn interval_clock(step: SignedDuration) -> Clock {
    let reads = AtomicI64::new(0);
    let start = Timestamp::from_second(START).unwrap();
    Arc::new(move || {
        let n = reads.fetch_add(1, Ordering::SeqCst);
        start + step * i32::try_from(n).unwrap()
    })
}

/// A clock the test sets: seconds after [`START`].
fn manual_clock() -> (Clock, Arc<AtomicI64>) {
    let seconds = Arc::new(AtomicI64::new(0));
    let read = seconds.clone();
    let clock: Clock =
        Arc::new(move || Timestamp::from_second(START + read.load(Ordering::SeqCst)).unwrap());
    (clock, seconds)
}

fn object(kind: &str, name: &str, namespace: &str) -> ObjectReference {
    ObjectReference {
        kind: Some(kind.into()),
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        uid: Some("C934D34AFB20242".into()),
        api_version: Some("version".into()),
        field_path: Some("spec.containers{mycontainer}".into()),
        ..ObjectReference::default()
    }
}

fn make_event(reason: &str, message: &str, involved_object: ObjectReference) -> Event {
    Event {
        reason: Some(reason.into()),
        message: Some(message.into()),
        involved_object,
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some("kublet.node1".into()),
        }),
        count: Some(1),
        type_: Some("Normal".into()),
        ..Event::default()
    }
}

fn repeated(n: usize, template: &Event) -> Vec<Event> {
    vec![template.clone(); n]
}

fn unique(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            make_event(
                &format!("reason-{i}"),
                &format!("message-{i}"),
                object("Pod", &format!("pod-{i}"), &format!("ns-{i}")),
            )
        })
        .collect()
}

/// client-go's `makeSimilarEvents`: the template with `prefix-<i>-` before its message.
fn similar(n: usize, template: &Event, prefix: &str) -> Vec<Event> {
    (0..n)
        .map(|i| {
            let mut event = template.clone();
            event.message = Some(format!("{prefix}-{i}-{}", text(&template.message)));
            event
        })
        .collect()
}

fn with_count(mut event: Event, count: i32) -> Event {
    event.count = Some(count);
    event
}

fn stamp(mut event: Event, clock: &Clock) -> Event {
    let now = Time(clock());
    event.first_timestamp = Some(now.clone());
    event.last_timestamp = Some(now);
    event
}

/// client-go's `validateEvent`: timestamps set, equal exactly when counted once, and
/// everything else as expected (the name is not compared).
fn validate(scenario: &str, got: &Event, want: &Event) {
    let (first, last) = (got.first_timestamp.clone(), got.last_timestamp.clone());
    assert!(first.is_some() && last.is_some(), "{scenario}: timestamps");
    let counted_once = want.count == Some(1);
    assert_eq!(
        first == last,
        counted_once,
        "{scenario}: {first:?} {last:?}"
    );
    let fields = |e: &Event| {
        (
            e.reason.clone(),
            e.message.clone(),
            e.count,
            e.type_.clone(),
            e.source.clone(),
            e.involved_object.clone(),
            text(&e.reporting_component).to_owned(),
            text(&e.reporting_instance).to_owned(),
        )
    };
    assert_eq!(fields(got), fields(want), "{scenario}");
}

#[test]
fn aggregate_key_differs_by_reason_not_message() {
    let one = make_event("end-of-world", "it was fun", object("Pod", "pod1", "other"));
    let two = make_event(
        "end-of-world",
        "it was awful",
        object("Pod", "pod1", "other"),
    );
    let three = make_event("nevermind", "it was a bug", object("Pod", "pod1", "other"));
    assert_eq!(aggregate_key(&one), aggregate_key(&two));
    assert_ne!(one.message, two.message, "the local key is the message");
    assert_ne!(aggregate_key(&one), aggregate_key(&three));
    assert_ne!(
        event_key(&one),
        event_key(&two),
        "the event key has the message"
    );
}

#[test]
fn aggregate_message_has_client_gos_prefix() {
    let (clock, _) = manual_clock();
    let mut correlator = EventCorrelator::new(clock.clone());
    let template = make_event("similar", "m", object("Pod", "p", "ns"));
    let mut last = None;
    for event in similar(AGGREGATE_MAX_EVENTS, &template, "x") {
        last = correlator.correlate(stamp(event, &clock));
    }
    let message = last.unwrap().event.message.unwrap();
    assert_eq!(message, "(combined from similar events): x-9-m");
}

/// (name, previous events, new event, expected event (None: skipped), clock interval in seconds)
type Scenario<'a> = (&'a str, Vec<Event>, &'a Event, Option<Event>, i64);

/// client-go's `TestEventCorrelator`.
#[test]
fn event_correlator_scenarios() {
    let first = make_event("first", "i am first", object("Pod", "my-pod", "my-ns"));
    let duplicate = make_event("duplicate", "me again", object("Pod", "my-pod", "my-ns"));
    let unique_event = make_event("unique", "snowflake", object("Pod", "my-pod", "my-ns"));
    let mut similar_event = make_event(
        "similar",
        "similar message",
        object("Pod", "my-pod", "my-ns"),
    );
    similar_event.involved_object.field_path = Some("spec.containers{container1}".into());
    let aggregate_event = make_event(
        "similar",
        &format!("{AGGREGATE_PREFIX}similar message"),
        similar_event.involved_object.clone(),
    );
    let mut other_container = similar_event.clone();
    other_container.involved_object.field_path = Some("spec.containers{container2}".into());
    let max = AGGREGATE_MAX_EVENTS;
    let burst = SPAM_BURST as usize;
    let similar_message = text(&similar_event.message).to_owned();

    let scenarios: Vec<Scenario> = vec![
        (
            "create-a-single-event",
            vec![],
            &first,
            Some(with_count(first.clone(), 1)),
            5,
        ),
        (
            "the-same-event-should-just-count",
            repeated(1, &duplicate),
            &duplicate,
            Some(with_count(duplicate.clone(), 2)),
            5,
        ),
        (
            "the-same-event-should-just-count-even-if-more-than-aggregate",
            repeated(max, &duplicate),
            &duplicate,
            Some(with_count(duplicate.clone(), max as i32 + 1)),
            30,
        ),
        (
            "the-same-event-is-spam-if-happens-too-frequently",
            repeated(burst + 1, &duplicate),
            &duplicate,
            None,
            1,
        ),
        (
            "create-many-unique-events",
            unique(30),
            &unique_event,
            Some(with_count(unique_event.clone(), 1)),
            5,
        ),
        (
            "similar-events-should-aggregate-event",
            similar(max - 1, &similar_event, &similar_message),
            &similar_event,
            Some(with_count(aggregate_event.clone(), 1)),
            5,
        ),
        (
            "similar-events-many-times-should-count-the-aggregate",
            similar(max, &similar_event, &similar_message),
            &similar_event,
            Some(with_count(aggregate_event.clone(), 2)),
            5,
        ),
        (
            "events-from-different-containers-do-not-aggregate",
            repeated(1, &other_container),
            &similar_event,
            Some(with_count(similar_event.clone(), 1)),
            5,
        ),
        (
            "similar-events-whose-interval-is-greater-than-aggregate-interval-do-not-aggregate",
            similar(max - 1, &similar_event, &similar_message),
            &similar_event,
            Some(with_count(similar_event.clone(), 1)),
            AGGREGATE_INTERVAL.as_secs(),
        ),
    ];
    for (scenario, previous, new, want, interval) in scenarios {
        let clock = interval_clock(SignedDuration::from_secs(interval));
        let mut correlator = EventCorrelator::new(clock.clone());
        for event in previous {
            if let Some(result) = correlator.correlate(stamp(event, &clock)) {
                correlator.update_state(&result.event);
            }
        }
        let got = correlator.correlate(stamp(new.clone(), &clock));
        match (got, want) {
            (None, None) => {}
            (Some(got), Some(want)) => validate(scenario, &got.event, &want),
            (got, want) => panic!("{scenario}: got {got:?}, want {want:?}"),
        }
    }
}

/// client-go's `TestEventSpamFilter` with the default key: the budget is per source and
/// object, whatever the reason, and one token comes back every five minutes.
#[test]
fn spam_filter_budget_is_per_source_and_object_and_refills() {
    let (clock, seconds) = manual_clock();
    let mut correlator = EventCorrelator::new(clock.clone());
    let pod = object("Pod", "my-pod", "my-ns");
    for i in 0..SPAM_BURST {
        let event = make_event(&format!("reason-{i}"), "m", pod.clone());
        assert!(correlator.correlate(stamp(event, &clock)).is_some(), "{i}");
    }
    let different_reason = make_event("duplicate", "me again", pod.clone());
    assert!(
        correlator
            .correlate(stamp(different_reason.clone(), &clock))
            .is_none()
    );
    let other_object = make_event("duplicate", "me again", object("Pod", "other", "my-ns"));
    assert!(correlator.correlate(stamp(other_object, &clock)).is_some());
    let mut other_source = different_reason.clone();
    other_source.source = Some(EventSource {
        component: Some("controllermanager".into()),
        host: None,
    });
    assert!(correlator.correlate(stamp(other_source, &clock)).is_some());

    seconds.store(299, Ordering::SeqCst);
    assert!(
        correlator
            .correlate(stamp(different_reason.clone(), &clock))
            .is_none()
    );
    seconds.store(300, Ordering::SeqCst);
    assert!(
        correlator
            .correlate(stamp(different_reason.clone(), &clock))
            .is_some()
    );
    assert!(
        correlator
            .correlate(stamp(different_reason, &clock))
            .is_none()
    );
}

/// The issue this recorder exists for: the same reason with a new message (a PDB's new
/// selector) is a new event, not a repeat of the old one; a repeat patches the event it
/// repeats with client-go's patch.
#[test]
fn a_new_message_is_a_new_event_and_a_repeat_patches_its_own() {
    let (clock, seconds) = manual_clock();
    let mut correlator = EventCorrelator::new(clock.clone());
    let pdb = object("PodDisruptionBudget", "b", "default");
    let old = make_event("UnmanagedPods", "selector: app=a2", pdb.clone());
    let new = make_event("UnmanagedPods", "selector: app in (a2)", pdb);

    let created = correlator.correlate(stamp(old.clone(), &clock)).unwrap();
    assert_eq!(created.patch, None);
    let mut stored = created.event.clone();
    stored.metadata.name = Some("b.1".into());
    correlator.update_state(&stored);

    seconds.store(10, Ordering::SeqCst);
    let second = correlator.correlate(stamp(new.clone(), &clock)).unwrap();
    assert_eq!(second.patch, None, "a new message is created, not patched");
    assert_eq!(
        second.event.message.as_deref(),
        Some("selector: app in (a2)")
    );
    assert_eq!(second.event.count, Some(1));

    seconds.store(20, Ordering::SeqCst);
    let repeat = correlator.correlate(stamp(old, &clock)).unwrap();
    assert_eq!(repeat.event.metadata.name.as_deref(), Some("b.1"));
    assert_eq!(repeat.event.count, Some(2));
    assert_eq!(repeat.event.first_timestamp, stored.first_timestamp);
    assert_eq!(
        repeat.patch,
        Some(json!({
            "count": 2,
            "lastTimestamp": "2023-11-14T22:13:40Z",
            "message": "selector: app=a2",
        }))
    );
}

#[test]
fn aggregate_repeats_patch_the_aggregate_with_the_latest_message() {
    let (clock, seconds) = manual_clock();
    let mut correlator = EventCorrelator::new(clock.clone());
    let template = make_event("FailedCreate", "m", object("Pod", "p", "ns"));
    let mut aggregate = None;
    for event in similar(AGGREGATE_MAX_EVENTS, &template, "e") {
        let result = correlator.correlate(stamp(event, &clock)).unwrap();
        correlator.update_state(&result.event);
        aggregate = Some(result);
    }
    let aggregate = aggregate.unwrap();
    assert_eq!(aggregate.patch, None, "the aggregate is created");
    let name = aggregate.event.metadata.name.clone().unwrap();
    assert_eq!(name, format!("p.{:x}", START as i128 * 1_000_000_000));

    seconds.store(1, Ordering::SeqCst);
    let mut next = template.clone();
    next.message = Some("brand new".into());
    let repeat = correlator.correlate(stamp(next, &clock)).unwrap();
    assert_eq!(repeat.event.metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(
        repeat.patch,
        Some(json!({
            "count": 2,
            "lastTimestamp": "2023-11-14T22:13:21Z",
            "message": "(combined from similar events): brand new",
        }))
    );
}

#[test]
fn memory_is_bounded_by_the_lru() {
    let (clock, _) = manual_clock();
    let mut correlator = EventCorrelator::new(clock.clone());
    for event in unique(LRU_ENTRIES.get() + 100) {
        correlator.correlate(stamp(event, &clock));
    }
    assert_eq!(correlator.observed.len(), LRU_ENTRIES.get());
    assert_eq!(correlator.aggregates.len(), LRU_ENTRIES.get());
    assert_eq!(correlator.buckets.len(), LRU_ENTRIES.get());
}

#[test]
fn event_names_are_the_object_and_hex_nanoseconds() {
    let at = Timestamp::from_nanosecond(1_700_000_000_123_456_789).unwrap();
    assert_eq!(
        event_name(&object("Pod", "foo", "ns"), at),
        "foo.17979cfe3d85cd15"
    );
}
