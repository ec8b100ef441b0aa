//! Kubernetes Events as kube-controller-manager records them: core/v1 Events through
//! client-go's `tools/record` semantics, one recorder per controller with upstream's source
//! component (`EventSource{Component: ...}`).
//!
//! Written here because no maintained crate records that way. kube-runtime's `Recorder`
//! writes events.k8s.io/v1 and counts a new message as a repeat of the first event with the
//! same reason on the same object, so an event whose message carries state (a selector, an
//! error, a claim name) keeps showing its first text. client-go instead keys repeats on the
//! message, aggregates similar messages and rate-limits each source and object
//! ([`correlator`]), and writes creates and count patches ([`sink`]).
//!
//! Recording never blocks or fails a sync: the event goes on a bounded queue (client-go's
//! `maxQueuedEvents`, dropped with an error when full) and one task per controller writes
//! them in order. Event writes go through the controller's writer: counted, and withheld
//! under `--shadow`.

pub mod correlator;
pub mod sink;
#[cfg(test)]
mod testing;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_util::sync::CancellationToken;

use self::correlator::{EventCorrelator, event_name};
use self::sink::EventSink;
use crate::runtime::clock::Clock;

/// client-go's `maxQueuedEvents`: events waiting to be written before new ones are dropped.
pub const MAX_QUEUED_EVENTS: usize = 1000;

#[derive(Clone)]
pub struct EventRecorder {
    /// Upstream's `EventSource.Component`, which client-go also reports as the
    /// reporting controller.
    component: &'static str,
    controller: &'static str,
    clock: Clock,
    queue: mpsc::Sender<Event>,
}

impl EventRecorder {
    /// A recorder whose events `sink` writes, on a task that ends with `shutdown` (client-go's
    /// broadcaster started with the controller's context).
    pub fn start<S: EventSink>(
        sink: S,
        component: &'static str,
        controller: &'static str,
        clock: Clock,
        shutdown: CancellationToken,
    ) -> Self {
        let (queue, events) = mpsc::channel(MAX_QUEUED_EVENTS);
        let correlator = EventCorrelator::new(clock.clone());
        tokio::spawn(sink::run(sink, correlator, events, shutdown, controller));
        Self {
            component,
            controller,
            clock,
            queue,
        }
    }

    /// client-go's `Eventf`: an event about `regarding`, written later, in order.
    pub fn record(&self, regarding: ObjectReference, warning: bool, reason: &str, message: String) {
        let event = self.make_event(regarding, warning, reason, message);
        match self.queue.try_send(event) {
            Ok(()) => {}
            Err(TrySendError::Full(event)) => tracing::error!(
                controller = self.controller,
                reason = event.reason.as_deref(),
                message = event.message.as_deref(),
                "Unable to record event: too many queued events, dropped event"
            ),
            Err(TrySendError::Closed(event)) => tracing::debug!(
                controller = self.controller,
                reason = event.reason.as_deref(),
                "Unable to record event: the controller is stopping"
            ),
        }
    }

    /// client-go's `makeEvent` and `generateEvent`: named after the object and the time, in
    /// the object's namespace (`default` for a cluster-scoped one), counted once; the source
    /// has no host, so the reporting instance is empty.
    fn make_event(
        &self,
        regarding: ObjectReference,
        warning: bool,
        reason: &str,
        message: String,
    ) -> Event {
        let now = (self.clock)();
        let namespace = regarding
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".into());
        Event {
            metadata: ObjectMeta {
                name: Some(event_name(&regarding, now)),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            involved_object: regarding,
            reason: Some(reason.into()),
            message: Some(message),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            type_: Some(if warning { "Warning" } else { "Normal" }.into()),
            source: Some(EventSource {
                component: Some(self.component.into()),
                host: None,
            }),
            reporting_component: Some(self.component.into()),
            reporting_instance: Some(String::new()),
            ..Event::default()
        }
    }
}

#[cfg(test)]
mod tests;
