//! One controller's wiring, declared instead of hand-written: the informers it watches (with
//! their event handlers), its queues and worker counts, its periodic triggers, and the
//! streams it consumes. In the spirit of kube-runtime's `Controller` builder, but with kcm's
//! shared informers and client-go work queues (upstream's lanes and queue names).
//!
//! What [`ControllerBuilder::run`] guarantees, for every controller alike:
//! - no worker and no trigger starts before every watched store has synced (upstream's
//!   `WaitForNamedCacheSync`; its "stores synced" line is logged then); if shutdown comes
//!   first, none starts at all;
//! - on shutdown the feeds end and shut their queues down, every other lane's queue is shut
//!   down too, workers finish the item in hand, and every task started is joined: nothing
//!   is left running detached.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, join_all};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;
use super::queue::{QueueKey, WorkQueue, run_workers};
use super::startup::Startup;
use super::watching::informer::{Change, Informers, feed};
use kube::Resource;

use super::watching::stored::Stored;

/// A task of the controller ended by panicking (or was aborted) instead of returning.
#[derive(Debug, thiserror::Error)]
#[error("{controller}: task {task} failed: {source}")]
pub struct TaskError {
    pub controller: &'static str,
    pub task: String,
    #[source]
    pub source: JoinError,
}

type QueueStop = Box<dyn Fn() + Send + Sync>;

/// A controller being declared; [`ControllerBuilder::run`] runs it until shutdown.
pub struct ControllerBuilder {
    controller: &'static str,
    informers: Informers,
    metrics: Metrics,
    startup: Startup,
    /// Cancelled at shutdown, or once the lanes are done, so nothing outlives `run`.
    stop: CancellationToken,
    /// The feeds, running from their declaration on (so the first list is queued as it
    /// arrives), each with its resource.
    feeds: Vec<(String, JoinHandle<()>)>,
    synced: Vec<oneshot::Receiver<()>>,
    lanes: Vec<BoxFuture<'static, ()>>,
    /// Shuts down each lane's queue at shutdown (a queue without a feed has nothing else to
    /// shut it down).
    queue_stops: Vec<QueueStop>,
    /// Periodic triggers and stream consumers, started once the stores have synced.
    after_sync: Vec<(String, BoxFuture<'static, ()>)>,
}

impl ControllerBuilder {
    /// The controller `startup` belongs to (its name labels the reconcile metrics), stopping
    /// when `shutdown` is cancelled.
    pub fn new(
        informers: Informers,
        metrics: Metrics,
        startup: Startup,
        shutdown: &CancellationToken,
    ) -> Self {
        Self {
            controller: startup.controller(),
            informers,
            metrics,
            startup,
            stop: shutdown.child_token(),
            feeds: Vec::new(),
            synced: Vec::new(),
            lanes: Vec::new(),
            queue_stops: Vec::new(),
            after_sync: Vec::new(),
        }
    }

    /// Watches `K`'s shared informer: `on_change` turns each change into keys of `queue`,
    /// which is shut down when the feed ends. Workers wait for this store's first list.
    pub fn watch<K: Stored, Q: QueueKey>(
        &mut self,
        queue: &WorkQueue<Q>,
        on_change: impl FnMut(Change<K>, &WorkQueue<Q>) + Send + 'static,
    ) -> &mut Self {
        let informer = self.informers.get::<K>();
        let store = informer.store().clone();
        self.feed(
            K::Watched::plural(&()).to_string(),
            move || store.len(),
            informer.subscribe(),
            queue,
            on_change,
        )
    }

    /// A feed from any stream of changes; [`Self::watch`] is this with an informer's.
    fn feed<K: Send + Sync + 'static, Q: QueueKey>(
        &mut self,
        resource: String,
        count: impl Fn() -> usize + Send + Sync + 'static,
        changes: mpsc::UnboundedReceiver<Change<K>>,
        queue: &WorkQueue<Q>,
        on_change: impl FnMut(Change<K>, &WorkQueue<Q>) + Send + 'static,
    ) -> &mut Self {
        let (synced, synced_rx) = oneshot::channel();
        self.startup.store(resource.clone(), count);
        let task = tokio::spawn(feed(
            changes,
            queue.clone(),
            self.stop.clone(),
            synced,
            on_change,
        ));
        self.feeds.push((format!("feed of {resource}"), task));
        self.synced.push(synced_rx);
        self
    }

    /// `workers` workers on `queue` (client-go semantics), each reconcile counted and timed
    /// under the controller's name; the queue counts towards the first full pass.
    pub fn lane<K, F, Fut, E>(
        &mut self,
        queue: &WorkQueue<K>,
        workers: usize,
        reconcile: F,
    ) -> &mut Self
    where
        K: QueueKey,
        F: Fn(K) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        let reconciles = Arc::new(self.metrics.reconciles_of(self.controller));
        let startup = self.startup.clone();
        // Counted at declaration, so every queue is counted before any of them can drain.
        startup.queue();
        let (work, drained) = (queue.clone(), queue.clone());
        self.stop_at_shutdown(queue);
        self.lanes.push(Box::pin(async move {
            let work = run_workers(work, workers, move |key| {
                let reconciles = reconciles.clone();
                let work = reconcile(key);
                async move { reconciles.observe(work).await }
            });
            let first_pass = async {
                startup.first_drain(drained.until_idle()).await;
                std::future::pending::<()>().await
            };
            tokio::select! {
                () = work => {}
                () = first_pass => {}
            }
        }));
        self
    }

    /// One worker handing each key of `from` to `to`, rate limited (upstream's recheck
    /// worker): not timed as a reconcile, and not part of the first full pass.
    pub fn relay<K: QueueKey>(&mut self, from: &WorkQueue<K>, to: &WorkQueue<K>) -> &mut Self {
        self.stop_at_shutdown(from);
        let to = to.clone();
        self.lanes
            .push(Box::pin(run_workers(from.clone(), 1, move |key| {
                to.add_rate_limited(key);
                async { Ok::<(), Infallible>(()) }
            })));
        self
    }

    fn stop_at_shutdown<K: QueueKey>(&mut self, queue: &WorkQueue<K>) {
        let queue = queue.clone();
        self.queue_stops.push(Box::new(move || queue.shut_down()));
    }

    /// Runs `action` every `period` after the sync, and at once whenever `wake` is notified;
    /// an action in progress finishes before shutdown is honoured.
    pub fn every<F, Fut>(
        &mut self,
        name: &str,
        period: Duration,
        wake: Option<Arc<Notify>>,
        mut action: F,
    ) -> &mut Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        self.after_sync.push((
            name.to_string(),
            Box::pin(async move {
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(period) => {}
                        () = notified(wake.as_deref()) => {}
                    }
                    action().await;
                }
            }),
        ));
        self
    }

    /// Hands each item of `items` to `handler` after the sync, until shutdown or the stream's
    /// end.
    pub fn consume<T: Send + 'static>(
        &mut self,
        name: &str,
        mut items: mpsc::UnboundedReceiver<T>,
        mut handler: impl FnMut(T) + Send + 'static,
    ) -> &mut Self {
        let stop = self.stop.clone();
        self.after_sync.push((
            name.to_string(),
            Box::pin(async move {
                loop {
                    let item = tokio::select! {
                        _ = stop.cancelled() => break,
                        item = items.recv() => item,
                    };
                    let Some(item) = item else { break };
                    handler(item);
                }
            }),
        ));
        self
    }

    /// Runs the controller until shutdown (or until its queues are shut down by their feeds
    /// ending), then joins every task it started. A task that panicked is the error.
    pub async fn run(self) -> Result<(), TaskError> {
        let Self {
            controller,
            startup,
            stop,
            feeds,
            synced,
            lanes,
            queue_stops,
            after_sync,
            ..
        } = self;
        // A feed that ends before its first list (shutdown) drops its signal unsent.
        let synced = tokio::select! {
            biased;
            _ = stop.cancelled() => false,
            synced = join_all(synced) => synced.iter().all(Result::is_ok),
        };
        let mut tasks = feeds;
        if synced {
            startup.synced();
            tasks.extend(
                after_sync
                    .into_iter()
                    .map(|(name, task)| (name, tokio::spawn(task))),
            );
            let lanes = join_all(lanes);
            tokio::pin!(lanes);
            tokio::select! {
                _ = &mut lanes => {}
                () = stop.cancelled() => {
                    for queue_stop in &queue_stops {
                        queue_stop();
                    }
                    lanes.await;
                }
            }
        }
        // The lanes are done: whatever still runs (a feed whose queue another feed shut
        // down, a trigger) stops now.
        stop.cancel();
        let mut failure = None;
        for (task, handle) in tasks {
            if let Err(source) = handle.await {
                failure.get_or_insert(TaskError {
                    controller,
                    task,
                    source,
                });
            }
        }
        failure.map_or(Ok(()), Err)
    }
}

/// `wake`'s next notification (one sent while nobody waited counts), or never.
async fn notified(wake: Option<&Notify>) {
    match wake {
        Some(wake) => wake.notified().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A controller with no informer started: the test sends the changes of its one feed,
    /// whose additions are queued on `queue`.
    struct Harness {
        controller: ControllerBuilder,
        shutdown: CancellationToken,
        queue: WorkQueue<String>,
        changes: mpsc::UnboundedSender<Change<String>>,
    }

    fn harness() -> Harness {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("uri"));
        let client = kube::Client::try_from(config).expect("client");
        let metrics = Metrics::new().expect("metrics");
        let shutdown = CancellationToken::new();
        let informers = Informers::new(client, metrics.clone(), shutdown.clone());
        let startup = Startup::new("test-controller");
        let mut controller = ControllerBuilder::new(informers, metrics, startup, &shutdown);
        let queue = unnamed_queue();
        let changes = feed(&mut controller, &queue);
        Harness {
            controller,
            shutdown,
            queue,
            changes,
        }
    }

    /// A queue without a name: no metrics registered.
    fn unnamed_queue() -> WorkQueue<String> {
        WorkQueue::new("", &Metrics::new().expect("metrics").workqueue)
    }

    fn feed(
        controller: &mut ControllerBuilder,
        queue: &WorkQueue<String>,
    ) -> mpsc::UnboundedSender<Change<String>> {
        let (tx, rx) = mpsc::unbounded_channel();
        controller.feed(
            "things".into(),
            || 0,
            rx,
            queue,
            |change: Change<String>, queue| {
                if let Change::Added(name) = change {
                    queue.add(name.to_string());
                }
            },
        );
        tx
    }

    fn send(changes: &mpsc::UnboundedSender<Change<String>>, change: Change<String>) {
        changes.send(change).expect("the feed runs");
    }

    fn added(name: &str) -> Change<String> {
        Change::Added(Arc::new(name.to_string()))
    }

    /// A lane recording every key it handles.
    fn recording_lane(
        controller: &mut ControllerBuilder,
        queue: &WorkQueue<String>,
    ) -> Arc<Mutex<Vec<String>>> {
        let handled: Arc<Mutex<Vec<String>>> = Arc::default();
        let record = handled.clone();
        controller.lane(queue, 2, move |key: String| {
            record.lock().expect("lock").push(key);
            async { Ok::<(), Infallible>(()) }
        });
        handled
    }

    /// Lets every task run until all wait (time is paused, so this sleep ends only then).
    async fn settle() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn workers_start_only_once_every_store_has_synced() {
        let Harness {
            mut controller,
            shutdown,
            queue,
            changes,
        } = harness();
        let second = feed(&mut controller, &queue);
        let handled = recording_lane(&mut controller, &queue);
        let run = tokio::spawn(controller.run());

        send(&changes, added("a"));
        send(&changes, Change::Synced);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(
            handled.lock().expect("lock").is_empty(),
            "one store is not synced"
        );
        assert_eq!(queue.len(), 1, "the change is queued meanwhile");

        send(&second, Change::Synced);
        settle().await;
        assert_eq!(*handled.lock().expect("lock"), vec!["a".to_string()]);

        shutdown.cancel();
        run.await.expect("join").expect("run");
        assert!(
            changes.is_closed() && second.is_closed(),
            "both feeds joined"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_before_the_sync_starts_no_worker() {
        let mut h = harness();
        let handled = recording_lane(&mut h.controller, &h.queue);
        let run = tokio::spawn(h.controller.run());
        send(&h.changes, added("a"));
        settle().await;

        h.shutdown.cancel();
        run.await.expect("join").expect("run");
        assert!(handled.lock().expect("lock").is_empty());
        assert!(h.changes.is_closed(), "the feed was joined");
        assert!(h.queue.is_shutting_down());
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_lets_the_item_in_hand_finish_and_joins_every_task() {
        let mut h = harness();
        let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let finished = Arc::new(AtomicUsize::new(0));
        let (s, r, f) = (started.clone(), release.clone(), finished.clone());
        h.controller.lane(&h.queue, 1, move |_: String| {
            let (s, r, f) = (s.clone(), r.clone(), f.clone());
            async move {
                s.notify_one();
                r.notified().await;
                f.fetch_add(1, Ordering::SeqCst);
                Ok::<(), Infallible>(())
            }
        });
        // A queue no feed shuts down: the runtime does, at shutdown.
        let relayed = unnamed_queue();
        h.controller.relay(&relayed, &h.queue);
        let (items, consumed) = mpsc::unbounded_channel::<()>();
        h.controller.consume("items", consumed, |()| {});
        h.controller
            .every("tick", Duration::from_secs(30), None, || async {});
        let run = tokio::spawn(h.controller.run());
        send(&h.changes, added("a"));
        send(&h.changes, Change::Synced);
        started.notified().await;

        h.shutdown.cancel();
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!run.is_finished(), "the item in hand is not finished yet");
        release.notify_one();
        run.await.expect("join").expect("run");
        assert_eq!(finished.load(Ordering::SeqCst), 1);
        assert!(relayed.is_shutting_down());
        assert!(
            h.changes.is_closed() && items.is_closed(),
            "feed and consumer joined"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_periodic_trigger_fires_each_period_after_the_sync_and_when_woken() {
        let mut h = harness();
        recording_lane(&mut h.controller, &h.queue);
        let (fired, wake) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
        let count = fired.clone();
        h.controller.every(
            "tick",
            Duration::from_secs(30),
            Some(wake.clone()),
            move || {
                count.fetch_add(1, Ordering::SeqCst);
                async {}
            },
        );
        let run = tokio::spawn(h.controller.run());
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert_eq!(fired.load(Ordering::SeqCst), 0, "not before the sync");

        send(&h.changes, Change::Synced);
        settle().await;
        tokio::time::sleep(Duration::from_secs(29)).await;
        assert_eq!(fired.load(Ordering::SeqCst), 0);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(fired.load(Ordering::SeqCst), 1, "one period after the sync");
        wake.notify_one();
        settle().await;
        assert_eq!(fired.load(Ordering::SeqCst), 2, "woken");
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(
            fired.load(Ordering::SeqCst),
            3,
            "a period after the wake-up"
        );

        h.shutdown.cancel();
        run.await.expect("join").expect("run");
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_panicked_is_the_error() {
        let mut h = harness();
        recording_lane(&mut h.controller, &h.queue);
        let (items, consumed) = mpsc::unbounded_channel::<()>();
        h.controller
            .consume("items", consumed, |()| panic!("bad item"));
        let run = tokio::spawn(h.controller.run());
        send(&h.changes, Change::Synced);
        items.send(()).expect("the consumer runs");
        settle().await;

        h.shutdown.cancel();
        let err = run.await.expect("join").expect_err("the consumer panicked");
        assert_eq!(
            (err.controller, err.task.as_str()),
            ("test-controller", "items")
        );
        assert!(err.source.is_panic());
    }
}
