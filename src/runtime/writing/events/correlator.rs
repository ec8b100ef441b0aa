//! client-go's `EventCorrelator` (tools/record/events_cache.go), which decides for each new
//! core/v1 Event whether it is created, counted on an earlier one, folded into an aggregate,
//! or dropped as spam. Three LRU caches of client-go's `maxLruCacheEntries` each bound its
//! memory. The clock is read where client-go reads it (once when aggregating, once in the spam
//! filter), so client-go's interval-clock tests carry over unchanged.

use std::collections::HashSet;
use std::num::NonZeroUsize;

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use lru::LruCache;
use serde_json::{Map, Value};

use crate::runtime::clock::Clock;

/// client-go's `maxLruCacheEntries`: the size of each of the three caches.
pub const LRU_ENTRIES: NonZeroUsize = NonZeroUsize::new(4096).unwrap();
/// client-go's `defaultAggregateMaxEvents`: this many events that differ only in message,
/// within [`AGGREGATE_INTERVAL`] of each other, turn into one aggregate event.
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// client-go's `defaultAggregateIntervalInSeconds`.
pub const AGGREGATE_INTERVAL: SignedDuration = SignedDuration::from_secs(600);
/// client-go's `EventAggregatorByReasonMessageFunc`.
pub const AGGREGATE_PREFIX: &str = "(combined from similar events): ";
/// client-go's `defaultSpamBurst`: events a source may send about one object at once.
pub const SPAM_BURST: u32 = 25;
/// client-go's `defaultSpamQPS` (one token every 5 minutes), as the float32 client-go keeps.
const SPAM_QPS: f64 = (1.0f32 / 300.0) as f64;

/// What to write for one event: the event to create, or, with `patch`, the strategic-merge
/// patch to apply to the existing event of the same name.
#[derive(Debug, Clone, PartialEq)]
pub struct Correlated {
    pub event: Event,
    pub patch: Option<Value>,
}

pub struct EventCorrelator {
    clock: Clock,
    /// `EventAggregator`: the distinct messages seen per (source, object, type, reason).
    aggregates: LruCache<String, Aggregate>,
    /// `eventLogger`: the event each full key was last written as.
    observed: LruCache<String, Observed>,
    /// `EventSourceObjectSpamFilter`: a token bucket per source and object.
    buckets: LruCache<String, TokenBucket>,
}

struct Aggregate {
    messages: HashSet<String>,
    last: Timestamp,
}

struct Observed {
    count: i32,
    first_timestamp: Option<Time>,
    name: String,
}

impl Observed {
    fn of(event: &Event) -> Self {
        Self {
            count: event.count.unwrap_or(0),
            first_timestamp: event.first_timestamp.clone(),
            name: event.metadata.name.clone().unwrap_or_default(),
        }
    }
}

/// golang.org/x/time/rate's limiter as client-go's `TryAccept` uses it: starts full,
/// refills continuously, a request takes one whole token or nothing.
struct TokenBucket {
    tokens: f64,
    last: Timestamp,
}

impl TokenBucket {
    fn full(now: Timestamp) -> Self {
        Self {
            tokens: f64::from(SPAM_BURST),
            last: now,
        }
    }

    fn try_accept(&mut self, now: Timestamp) -> bool {
        // A clock that went back refills nothing.
        let elapsed = now.duration_since(self.last).max(SignedDuration::ZERO);
        let tokens = (self.tokens + elapsed.as_secs_f64() * SPAM_QPS).min(f64::from(SPAM_BURST));
        if tokens < 1.0 {
            return false;
        }
        self.tokens = tokens - 1.0;
        self.last = now;
        true
    }
}

/// client-go joins a key's parts with nothing between them; a NUL keeps two different
/// objects from sharing a key, and no Kubernetes name or message contains one.
fn key(parts: &[&str]) -> String {
    parts.join("\0")
}

fn text(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("")
}

/// The source and the involved object, without the field path: client-go's `getSpamKey`.
fn source_and_object(event: &Event) -> [&str; 7] {
    let source = event.source.as_ref();
    let object = &event.involved_object;
    [
        source.map_or("", |s| text(&s.component)),
        source.map_or("", |s| text(&s.host)),
        text(&object.kind),
        text(&object.namespace),
        text(&object.name),
        text(&object.uid),
        text(&object.api_version),
    ]
}

/// client-go's `getEventKey`: everything that makes two events the same one, message included.
fn event_key(event: &Event) -> String {
    let [component, host, kind, namespace, name, uid, api_version] = source_and_object(event);
    key(&[
        component,
        host,
        kind,
        namespace,
        name,
        text(&event.involved_object.field_path),
        uid,
        api_version,
        text(&event.type_),
        text(&event.reason),
        text(&event.message),
    ])
}

/// client-go's `EventAggregatorByReasonFunc`: the group an event aggregates in (no field
/// path, no message, but the reporting controller and instance).
fn aggregate_key(event: &Event) -> String {
    let mut parts = source_and_object(event).to_vec();
    parts.extend([
        text(&event.type_),
        text(&event.reason),
        text(&event.reporting_component),
        text(&event.reporting_instance),
    ]);
    key(&parts)
}

/// client-go's event name: the object's name and the time in nanoseconds, in hex.
pub fn event_name(object: &ObjectReference, at: Timestamp) -> String {
    let nanos = at.as_nanosecond();
    let sign = if nanos < 0 { "-" } else { "" };
    format!("{}.{sign}{:x}", text(&object.name), nanos.unsigned_abs())
}

impl EventCorrelator {
    pub fn new(clock: Clock) -> Self {
        Self {
            clock,
            aggregates: LruCache::new(LRU_ENTRIES),
            observed: LruCache::new(LRU_ENTRIES),
            buckets: LruCache::new(LRU_ENTRIES),
        }
    }

    /// client-go's `EventCorrelate`: aggregate, count, then filter. `None` when the spam
    /// filter drops the event (its count is still taken, as client-go's is).
    pub fn correlate(&mut self, event: Event) -> Option<Correlated> {
        let (event, key) = self.aggregate(event);
        let correlated = self.observe(event, key);
        if self.is_spam(&correlated.event) {
            return None;
        }
        Some(correlated)
    }

    /// client-go's `UpdateState`: what the API server stored (name, count, first time).
    pub fn update_state(&mut self, stored: &Event) {
        self.observed.put(event_key(stored), Observed::of(stored));
    }

    /// client-go's `EventAggregate`: the event as is with its full key, or, once
    /// [`AGGREGATE_MAX_EVENTS`] messages were seen in the group, an aggregate event keyed by
    /// the group so later ones count on it.
    fn aggregate(&mut self, event: Event) -> (Event, String) {
        let now = (self.clock)();
        let group = aggregate_key(&event);
        let record = self
            .aggregates
            .get_or_insert_mut(group.clone(), || Aggregate {
                messages: HashSet::new(),
                last: now,
            });
        if now.duration_since(record.last) > AGGREGATE_INTERVAL {
            record.messages.clear();
        }
        record.messages.insert(text(&event.message).to_owned());
        record.last = now;
        if record.messages.len() < AGGREGATE_MAX_EVENTS {
            let key = event_key(&event);
            return (event, key);
        }
        // The set never grows past the threshold: client-go drops an arbitrary message.
        if let Some(any) = record.messages.iter().next().cloned() {
            record.messages.remove(&any);
        }
        let aggregate = Event {
            metadata: ObjectMeta {
                name: Some(event_name(&event.involved_object, now)),
                namespace: event.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            message: Some(format!("{AGGREGATE_PREFIX}{}", text(&event.message))),
            type_: event.type_,
            reason: event.reason,
            source: event.source,
            involved_object: event.involved_object,
            // client-go's aggregate carries no reporting controller or instance.
            reporting_component: Some(String::new()),
            reporting_instance: Some(String::new()),
            ..Event::default()
        };
        (aggregate, group)
    }

    /// client-go's `eventObserve`: a repeat of the event last written under `key` takes its
    /// name and first time, counts one more, and becomes a patch of `count`, `lastTimestamp`
    /// and `message` (client-go's two-way merge patch against an event with those zeroed).
    fn observe(&mut self, mut event: Event, key: String) -> Correlated {
        let patch = match self.observed.get(&key) {
            Some(last) if last.count > 0 => {
                event.metadata.name = Some(last.name.clone());
                event.first_timestamp.clone_from(&last.first_timestamp);
                event.count = Some(last.count.saturating_add(1));
                let mut patch = Map::new();
                patch.insert("count".into(), event.count.into());
                if let Some(at) = &event.last_timestamp {
                    // As a `metav1.Time` travels: RFC 3339 in whole seconds.
                    let at = serde_json::to_value(at).unwrap_or(Value::Null);
                    patch.insert("lastTimestamp".into(), at);
                }
                if let Some(message) = event.message.as_deref().filter(|m| !m.is_empty()) {
                    patch.insert("message".into(), message.into());
                }
                Some(Value::Object(patch))
            }
            _ => None,
        };
        self.observed.put(key, Observed::of(&event));
        Correlated { event, patch }
    }

    /// client-go's `EventSourceObjectSpamFilter.Filter`: whether the source has used up its
    /// budget for the object.
    fn is_spam(&mut self, event: &Event) -> bool {
        let now = (self.clock)();
        let bucket = self
            .buckets
            .get_or_insert_mut(key(&source_and_object(event)), || TokenBucket::full(now));
        !bucket.try_accept(now)
    }
}

#[cfg(test)]
mod tests;
