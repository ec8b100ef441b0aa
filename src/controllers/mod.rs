//! The controllers, and what each is given to run: a client, the shared informers, the one
//! write path, events, queues and the shutdown signal. Controllers never call each other.

pub mod disruption;
pub mod resourceclaim;
pub mod resourcequota;
pub mod storageversiongc;
pub mod ttl;

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Client;
use tokio_util::sync::CancellationToken;

use crate::cli::{Controller, Settings};
use crate::runtime::clock::Clock;
use crate::runtime::events::EventRecorder;
use crate::runtime::informer::{Change, Informers, feed};
use crate::runtime::metrics::Metrics;
use crate::runtime::queue::{QueueKey, WorkQueue, run_workers};
use crate::runtime::rbac::Rule;
use crate::runtime::startup::Startup;
use crate::runtime::stored::Stored;
use crate::runtime::writer::ApiWriter;
use kube::Resource;

/// What a controller runs with.
#[derive(Clone)]
pub struct Context {
    /// The controller's own client: its reads, writes, events and discovery share one
    /// token bucket that no other controller uses (upstream's per-controller client).
    pub client: Client,
    /// The metadata informers' client (upstream's `metadata-informers`), for the metadata
    /// watches a controller starts on demand.
    pub metadata_client: Client,
    pub informers: Informers,
    pub metrics: Metrics,
    pub settings: Arc<Settings>,
    /// Cancelled when the controller must stop: finish the item in hand, then return.
    pub shutdown: CancellationToken,
    pub clock: Clock,
    /// The controller's startup lines (stores synced, first full pass).
    pub startup: Startup,
}

impl Context {
    /// The write path for `controller` (its name labels the write metrics).
    pub fn writer(&self, controller: &'static str) -> ApiWriter {
        ApiWriter::new(controller, self.metrics.clone(), self.settings.shadow)
    }

    /// An event recorder reporting as `reporting_controller` (upstream's component name).
    pub fn recorder(&self, reporting_controller: &str, controller: &'static str) -> EventRecorder {
        EventRecorder::new(
            self.client.clone(),
            reporting_controller,
            controller,
            self.metrics.clone(),
            self.settings.shadow,
        )
    }
}

impl Context {
    /// Runs `workers` workers on `queue` (client-go semantics), each reconcile counted and
    /// timed under `controller`. The queue counts towards the first full pass from this call
    /// on (not from the first poll), so a controller's queues are all counted before any of
    /// them can drain.
    pub fn run_workers<K, F, Fut, E>(
        &self,
        queue: WorkQueue<K>,
        workers: usize,
        controller: &'static str,
        reconcile: F,
    ) -> impl Future<Output = ()> + Send + use<K, F, Fut, E>
    where
        K: QueueKey,
        F: Fn(K) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        let metrics = self.metrics.clone();
        let startup = self.startup.clone();
        startup.queue();
        async move {
            let drained = queue.clone();
            let work = run_workers(queue, workers, move |key| {
                let metrics = metrics.clone();
                let work = reconcile(key);
                async move { metrics.observe(controller, work).await }
            });
            let first_pass = async {
                startup.first_drain(|| drained.is_idle()).await;
                std::future::pending::<()>().await
            };
            tokio::select! {
                () = work => {}
                () = first_pass => {}
            }
        }
    }

    /// Waits for every feed's first list (upstream's `WaitForNamedCacheSync`), or shutdown;
    /// logs the stores line once synced.
    pub async fn wait_synced(&self, synced: Vec<tokio::sync::oneshot::Receiver<()>>) {
        tokio::select! {
            _ = self.shutdown.cancelled() => {}
            _ = futures::future::join_all(synced) => self.startup.synced(),
        }
    }
}

/// A controller's feed of one informer: the task, and the signal that the first list was
/// delivered (client-go's handler HasSynced).
pub type Feed = (
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Receiver<()>,
);

impl Context {
    /// Subscribes `on_change` to `K`'s shared informer until shutdown; `queue` is shut down
    /// when the feed ends (see [`feed`]).
    pub fn subscribe<K: Stored, Q: QueueKey>(
        &self,
        queue: &WorkQueue<Q>,
        on_change: impl FnMut(Change<K>, &WorkQueue<Q>) + Send + 'static,
    ) -> Feed {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let informer = self.informers.get::<K>();
        let store = informer.store().clone();
        self.startup
            .store(K::Watched::plural(&()).to_string(), move || store.len());
        let task = tokio::spawn(feed(
            informer.subscribe(),
            queue.clone(),
            self.shutdown.clone(),
            tx,
            on_change,
        ));
        (task, rx)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("{0}")]
    Failed(String),
}

/// How a controller is started: `run` returns when `Context::shutdown` is cancelled.
pub struct ControllerEntry {
    pub controller: Controller,
    /// The API group/version it needs; the controller is skipped when the cluster does not
    /// serve it, instead of crash-looping.
    pub api: Option<(&'static str, &'static str)>,
    /// Upstream's bootstrap RBAC role for the controller's service account
    /// (`system:controller:<name>`): what its own API calls need.
    pub rbac: &'static [Rule],
    /// What its shared informers list and watch (upstream makes those reads under
    /// kube-controller-manager's own identity, not the controller's role).
    pub informs: &'static [Rule],
    pub run: fn(Context) -> BoxFuture<'static, Result<(), ControllerError>>,
}
