//! Kubernetes Events, through kube-runtime's recorder, one reporting name per controller
//! (upstream's component names). Events are writes too: counted, and withheld in shadow mode.
//! A failed event is logged and never fails a reconcile, as upstream's recorder is
//! fire-and-forget.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use super::metrics::Metrics;

#[derive(Clone)]
pub struct EventRecorder {
    recorder: Recorder,
    controller: &'static str,
    metrics: Metrics,
    shadow: bool,
}

impl EventRecorder {
    /// `reporting_controller` is the name events show as their source (upstream's component).
    pub fn new(
        client: Client,
        reporting_controller: &str,
        controller: &'static str,
        metrics: Metrics,
        shadow: bool,
    ) -> Self {
        let reporter = Reporter {
            controller: reporting_controller.to_string(),
            instance: std::env::var("HOSTNAME").ok(),
        };
        Self {
            recorder: Recorder::new(client, reporter),
            controller,
            metrics,
            shadow,
        }
    }

    /// [`Self::publish`] in a task of its own: events never block or fail a sync.
    pub fn spawn(
        &self,
        regarding: ObjectReference,
        warning: bool,
        reason: &'static str,
        note: String,
        action: &'static str,
    ) {
        let recorder = self.clone();
        tokio::spawn(async move {
            recorder
                .publish(&regarding, warning, reason, note, action)
                .await
        });
    }

    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        note: String,
        action: &str,
    ) {
        let type_ = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        if self.shadow {
            tracing::info!(
                controller = self.controller,
                reason,
                note,
                "shadow: not recording event"
            );
            return;
        }
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        let result = self.recorder.publish(&event, regarding).await;
        let label = if result.is_ok() { "success" } else { "error" };
        self.metrics
            .api_writes
            .with_label_values(&[self.controller, "create", "events", label])
            .inc();
        if let Err(err) = result {
            tracing::warn!(controller = self.controller, reason, error = %err, "could not record event");
        }
    }
}
