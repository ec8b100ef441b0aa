//! Where correlated events go, as client-go's `recordToSink` sends them: a new event is
//! created, a repeat is a strategic-merge PATCH of the event it repeats (created anew if that
//! one is gone), a failure the API server answered is given up, and any other failure is
//! tried again, up to client-go's `maxTriesPerEvent` times with its sleeps between tries.

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::correlator::{Correlated, EventCorrelator};
use crate::runtime::connection::errors::is_not_found;
use crate::runtime::writing::writer::{ApiWriter, Part};

/// client-go's `maxTriesPerEvent`.
pub const MAX_TRIES_PER_EVENT: u32 = 12;
/// client-go's `defaultSleepDuration` between tries (the first one is randomized, so that
/// clients do not all retry at once after an API server outage).
pub const SLEEP: Duration = Duration::from_secs(10);

/// client-go's `EventSink`: the two writes a recorder makes.
pub trait EventSink: Send + Sync + 'static {
    fn create(&self, event: &Event) -> impl Future<Output = kube::Result<Event>> + Send;
    fn patch(
        &self,
        event: &Event,
        patch: &Value,
    ) -> impl Future<Output = kube::Result<Event>> + Send;
}

/// core/v1 Events in the event's namespace, through the controller's writer: counted as
/// its writes, withheld under `--shadow`.
pub struct ApiSink {
    client: Client,
    writer: ApiWriter,
}

impl ApiSink {
    pub fn new(client: Client, writer: ApiWriter) -> Self {
        Self { client, writer }
    }

    fn api(&self, event: &Event) -> Api<Event> {
        let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl EventSink for ApiSink {
    async fn create(&self, event: &Event) -> kube::Result<Event> {
        self.writer.create(&self.api(event), event).await
    }

    async fn patch(&self, event: &Event, patch: &Value) -> kube::Result<Event> {
        let patch = Patch::Strategic(patch);
        let params = PatchParams::default();
        self.writer
            .patch(&self.api(event), event, &params, &patch, Part::Whole)
            .await
    }
}

/// The recorder's one writer task (client-go's broadcaster goroutine): events in the order
/// they were recorded, one at a time, so a repeat never races the create it repeats. Ends
/// when the controller stops or every recorder handle is gone.
pub async fn run<S: EventSink>(
    sink: S,
    mut correlator: EventCorrelator,
    mut events: mpsc::Receiver<Event>,
    shutdown: CancellationToken,
    controller: &'static str,
) {
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.recv() => match event {
                Some(event) => event,
                None => return,
            },
        };
        record_to_sink(&sink, &mut correlator, event, &shutdown, controller).await;
    }
}

/// client-go's `recordToSink`.
pub async fn record_to_sink<S: EventSink>(
    sink: &S,
    correlator: &mut EventCorrelator,
    event: Event,
    shutdown: &CancellationToken,
    controller: &str,
) {
    let Some(Correlated { mut event, patch }) = correlator.correlate(event) else {
        return;
    };
    let mut tries = 0;
    loop {
        match record_event(sink, &mut event, patch.as_ref()).await {
            Ok(stored) => {
                correlator.update_state(&stored);
                return;
            }
            Err(err) if !retriable(&err) => {
                log_rejected(controller, &event, &err);
                return;
            }
            Err(err) => tracing::error!(
                controller,
                reason = event.reason.as_deref(),
                error = %err,
                "Unable to write event (may retry after sleeping)"
            ),
        }
        tries += 1;
        if tries >= MAX_TRIES_PER_EVENT {
            tracing::error!(
                controller,
                reason = event.reason.as_deref(),
                "Unable to write event (retry limit exceeded!)"
            );
            return;
        }
        let delay = if tries == 1 {
            SLEEP.mul_f64(rand::random::<f64>())
        } else {
            SLEEP
        };
        tokio::select! {
            () = shutdown.cancelled() => {
                tracing::error!(controller, reason = event.reason.as_deref(), "Unable to write event (broadcaster is shut down)");
                return;
            }
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// client-go's `recordEvent`: a repeat patches the event it repeats; a new event, or a
/// repeat of one that is gone (expired, deleted), is created.
async fn record_event<S: EventSink>(
    sink: &S,
    event: &mut Event,
    patch: Option<&Value>,
) -> kube::Result<Event> {
    if let Some(patch) = patch {
        match sink.patch(event, patch).await {
            Err(err) if is_not_found(&err) => {}
            patched => return patched,
        }
    }
    event.metadata.resource_version = None;
    sink.create(event).await
}

/// client-go gives up on an event the API server answered (`StatusError`) or that could not
/// be built (`RequestConstructionError`); anything else (the connection) is tried again.
fn retriable(err: &kube::Error) -> bool {
    !matches!(err, kube::Error::Api(_) | kube::Error::BuildRequest(_))
}

fn log_rejected(controller: &str, event: &Event, err: &kube::Error) {
    let expected = match err {
        kube::Error::Api(status) => {
            status.reason == "AlreadyExists"
                || status.details.as_ref().is_some_and(|details| {
                    details
                        .causes
                        .iter()
                        .any(|cause| cause.reason == "NamespaceTerminating")
                })
        }
        _ => false,
    };
    if expected {
        tracing::debug!(controller, reason = event.reason.as_deref(), error = %err, "Server rejected event (will not retry!)");
    } else {
        tracing::error!(controller, reason = event.reason.as_deref(), error = %err, "Server rejected event (will not retry!)");
    }
}

#[cfg(test)]
mod tests;
