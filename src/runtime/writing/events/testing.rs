//! A recording [`EventSink`] for the recorder's unit tests (client-go's `testEventSink`):
//! it stores events by name, applies patches as the API server would for these scalar
//! fields, and fails the writes a test queues errors for.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Event;
use kube::core::Status;
use serde_json::Value;
use tokio::sync::mpsc;

use super::sink::EventSink;

/// One request the sink got.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    Create(Box<Event>),
    Patch(String, Value),
}

pub struct FakeSink {
    stored: Mutex<BTreeMap<String, Event>>,
    create_errors: Mutex<VecDeque<kube::Error>>,
    patch_errors: Mutex<VecDeque<kube::Error>>,
    writes: mpsc::UnboundedSender<Write>,
}

impl FakeSink {
    pub fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<Write>) {
        let (writes, received) = mpsc::unbounded_channel();
        let sink = Self {
            stored: Mutex::default(),
            create_errors: Mutex::default(),
            patch_errors: Mutex::default(),
            writes,
        };
        (Arc::new(sink), received)
    }

    /// The next `n` creates fail with `error()`.
    pub fn fail_creates(&self, n: usize, error: fn() -> kube::Error) {
        self.create_errors
            .lock()
            .unwrap()
            .extend((0..n).map(|_| error()));
    }

    pub fn fail_patches(&self, n: usize, error: fn() -> kube::Error) {
        self.patch_errors
            .lock()
            .unwrap()
            .extend((0..n).map(|_| error()));
    }
}

/// An error the API server answered with `code` and `reason`.
pub fn status(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(Status::failure("injected", reason).with_code(code).boxed())
}

/// A connection failure.
pub fn transport() -> kube::Error {
    kube::Error::Service("connection refused".into())
}

impl EventSink for Arc<FakeSink> {
    async fn create(&self, event: &Event) -> kube::Result<Event> {
        let _ = self.writes.send(Write::Create(Box::new(event.clone())));
        if let Some(err) = self.create_errors.lock().unwrap().pop_front() {
            return Err(err);
        }
        let name = event.metadata.name.clone().unwrap_or_default();
        self.stored.lock().unwrap().insert(name, event.clone());
        Ok(event.clone())
    }

    async fn patch(&self, event: &Event, patch: &Value) -> kube::Result<Event> {
        let name = event.metadata.name.clone().unwrap_or_default();
        let _ = self.writes.send(Write::Patch(name.clone(), patch.clone()));
        if let Some(err) = self.patch_errors.lock().unwrap().pop_front() {
            return Err(err);
        }
        let mut stored = self.stored.lock().unwrap();
        let Some(live) = stored.get_mut(&name) else {
            return Err(status(404, "NotFound"));
        };
        let mut json = serde_json::to_value(&*live).unwrap();
        json_patch::merge(&mut json, patch);
        *live = serde_json::from_value(json).unwrap();
        Ok(live.clone())
    }
}
