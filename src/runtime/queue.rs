//! client-go's typed rate-limiting work queue (k8s.io/client-go/util/workqueue: queue.go,
//! delaying_queue.go, rate_limiting_queue.go) for async workers, exporting the same
//! `workqueue_*` Prometheus families as k8s.io/component-base/metrics/prometheus/workqueue.
//!
//! Semantics follow client-go, including its metric quirks: `workqueue_depth` counts keys that
//! are waiting to be handed out, which includes keys re-added while still being processed (so
//! it can exceed `len()`), and `workqueue_retries_total` counts every `add_after` call, not only
//! `add_rate_limited` ones.
//!
//! All times come from `tokio::time`, so tests can drive delays with a paused clock.

use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry,
};
use tokio::runtime::Handle;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::KeyHasher;
use super::backoff::RateLimiter;
use crate::lock::lock;

/// client-go restarts a crashed worker through `wait.Until(worker, time.Second, stopCh)`.
const WORKER_RESTART_DELAY: Duration = Duration::from_secs(1);
/// Longer delays are clamped so `now + delay` cannot overflow; for a controller this is "never".
const MAX_ADD_DELAY: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);
/// component-base prefixes HELP with the stability level; the workqueue families are BETA since
/// Kubernetes 1.36 (ALPHA before).
const STABILITY_PREFIX: &str = "[BETA] ";

/// Everything a queue key must be; implemented for every such type.
pub trait QueueKey: Clone + Eq + Hash + Send + Sync + fmt::Debug + 'static {}

impl<T: Clone + Eq + Hash + Send + Sync + fmt::Debug + 'static> QueueKey for T {}

/// The seven `workqueue_*` families, labelled by queue `name`. Register once per registry and
/// clone into every queue.
#[derive(Clone)]
pub struct WorkqueueMetrics {
    pub depth: IntGaugeVec,
    pub adds: IntCounterVec,
    pub queue_duration: HistogramVec,
    pub work_duration: HistogramVec,
    pub unfinished_work: GaugeVec,
    pub longest_running_processor: GaugeVec,
    pub retries: IntCounterVec,
    /// The queues whose unfinished work is measured when the registry is gathered.
    live: Arc<Mutex<Vec<Weak<dyn Unfinished>>>>,
}

/// A queue that can set its unfinished-work gauges from the keys it is processing.
trait Unfinished: Send + Sync {
    fn update_unfinished_work(&self, now: Instant);
}

/// `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds`, set
/// from every live queue when gathered. client-go refreshes them every 500 ms from a timer per
/// queue; here they are measured at the scrape, so they are never older than it, and no queue
/// wakes the process twice a second for a scrape that comes every 15 s or so.
struct UnfinishedWork {
    unfinished_work: GaugeVec,
    longest_running_processor: GaugeVec,
    live: Arc<Mutex<Vec<Weak<dyn Unfinished>>>>,
}

impl Collector for UnfinishedWork {
    fn desc(&self) -> Vec<&Desc> {
        let mut descs = self.unfinished_work.desc();
        descs.extend(self.longest_running_processor.desc());
        descs
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let now = Instant::now();
        lock(&self.live).retain(|queue| {
            queue
                .upgrade()
                .map(|queue| queue.update_unfinished_work(now))
                .is_some()
        });
        let mut families = self.unfinished_work.collect();
        families.extend(self.longest_running_processor.collect());
        families
    }
}

impl WorkqueueMetrics {
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        const LABELS: &[&str] = &["name"];
        let help = |text: &str| format!("{STABILITY_PREFIX}{text}");
        // client-go's workqueue buckets, ExponentialBuckets(10e-7, 10, 10): 1 µs … 1000 s.
        let buckets = prometheus::exponential_buckets(10e-7, 10.0, 10)?;
        let histogram = |name: &str, text: &str| {
            HistogramVec::new(
                HistogramOpts::new(name, help(text)).buckets(buckets.clone()),
                LABELS,
            )
        };
        let metrics = Self {
            depth: IntGaugeVec::new(
                Opts::new("workqueue_depth", help("Current depth of workqueue")),
                LABELS,
            )?,
            adds: IntCounterVec::new(
                Opts::new(
                    "workqueue_adds_total",
                    help("Total number of adds handled by workqueue"),
                ),
                LABELS,
            )?,
            queue_duration: histogram(
                "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested.",
            )?,
            work_duration: histogram(
                "workqueue_work_duration_seconds",
                "How long in seconds processing an item from workqueue takes.",
            )?,
            unfinished_work: GaugeVec::new(
                Opts::new(
                    "workqueue_unfinished_work_seconds",
                    help(
                        "How many seconds of work has done that is in progress and hasn't been \
                         observed by work_duration. Large values indicate stuck threads. One can \
                         deduce the number of stuck threads by observing the rate at which this \
                         increases.",
                    ),
                ),
                LABELS,
            )?,
            longest_running_processor: GaugeVec::new(
                Opts::new(
                    "workqueue_longest_running_processor_seconds",
                    help(
                        "How many seconds has the longest running processor for workqueue been running.",
                    ),
                ),
                LABELS,
            )?,
            live: Arc::default(),
            retries: IntCounterVec::new(
                Opts::new(
                    "workqueue_retries_total",
                    help("Total number of retries handled by workqueue"),
                ),
                LABELS,
            )?,
        };
        registry.register(Box::new(metrics.depth.clone()))?;
        registry.register(Box::new(metrics.adds.clone()))?;
        registry.register(Box::new(metrics.queue_duration.clone()))?;
        registry.register(Box::new(metrics.work_duration.clone()))?;
        registry.register(Box::new(UnfinishedWork {
            unfinished_work: metrics.unfinished_work.clone(),
            longest_running_processor: metrics.longest_running_processor.clone(),
            live: Arc::clone(&metrics.live),
        }))?;
        registry.register(Box::new(metrics.retries.clone()))?;
        Ok(metrics)
    }
}

/// One queue's series of each family.
struct QueueMetrics {
    depth: IntGauge,
    adds: IntCounter,
    queue_duration: Histogram,
    work_duration: Histogram,
    unfinished_work: Gauge,
    longest_running_processor: Gauge,
    retries: IntCounter,
}

impl QueueMetrics {
    fn for_queue(families: &WorkqueueMetrics, name: &str) -> prometheus::Result<Self> {
        let label = &[name];
        Ok(Self {
            depth: families.depth.get_metric_with_label_values(label)?,
            adds: families.adds.get_metric_with_label_values(label)?,
            queue_duration: families
                .queue_duration
                .get_metric_with_label_values(label)?,
            work_duration: families.work_duration.get_metric_with_label_values(label)?,
            unfinished_work: families
                .unfinished_work
                .get_metric_with_label_values(label)?,
            longest_running_processor: families
                .longest_running_processor
                .get_metric_with_label_values(label)?,
            retries: families.retries.get_metric_with_label_values(label)?,
        })
    }
}

struct State<K> {
    /// Keys ready to be handed out, in order; each is also in `dirty` and not in `processing`.
    fifo: VecDeque<K>,
    /// Keys that need processing (queued, or re-added while being processed).
    dirty: HashSet<K, KeyHasher>,
    /// Keys handed out by `get` and not yet `done`.
    processing: HashSet<K, KeyHasher>,
    shutting_down: bool,
    /// Delayed keys by ready time; the sequence number keeps equal ready times in FIFO order.
    waiting: BTreeMap<(Instant, u64), K>,
    /// Each delayed key's slot in `waiting`, so a key waits at most once (earliest time wins).
    waiting_slots: HashMap<K, (Instant, u64), KeyHasher>,
    next_waiting_seq: u64,
    limiter: RateLimiter<K>,
    /// First add not yet handed out, for `workqueue_queue_duration_seconds` (metrics only).
    added_at: HashMap<K, Instant, KeyHasher>,
    /// When each processing key was handed out, for the work-duration families (metrics only).
    processing_since: HashMap<K, Instant, KeyHasher>,
}

struct Inner<K> {
    name: String,
    metrics: Option<QueueMetrics>,
    state: Mutex<State<K>>,
    /// Wakes `get` callers waiting for a key.
    item_ready: Notify,
    /// Wakes `until_idle` callers when the last key being processed is done.
    idle: Notify,
    /// Wakes the timer task; shared separately so the task need not keep the queue alive.
    timer_wake: Arc<Notify>,
    timer_started: AtomicBool,
    shutdown: watch::Sender<bool>,
}

impl<K> Drop for Inner<K> {
    fn drop(&mut self) {
        // Lets the timer task notice that the last handle is gone and exit.
        self.timer_wake.notify_one();
    }
}

impl<K: QueueKey> Inner<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // The state stays consistent even if a panic (e.g. in a key's Hash impl) poisoned it.
        lock(&self.state)
    }

    /// client-go `Add`.
    fn add_locked(&self, state: &mut State<K>, key: K, now: Instant) {
        if state.shutting_down || state.dirty.contains(&key) {
            return;
        }
        if let Some(metrics) = &self.metrics {
            metrics.adds.inc();
            metrics.depth.inc();
            state.added_at.entry(key.clone()).or_insert(now);
        }
        state.dirty.insert(key.clone());
        if state.processing.contains(&key) {
            // `done` puts it back in the FIFO, so one key is never processed twice at once.
            return;
        }
        state.fifo.push_back(key);
        self.item_ready.notify_one();
    }

    /// client-go `AddAfter`; returns whether the timer task must re-check its deadline.
    fn add_after_locked(&self, state: &mut State<K>, key: K, delay: Duration) -> bool {
        if state.shutting_down {
            return false;
        }
        if let Some(metrics) = &self.metrics {
            metrics.retries.inc();
        }
        let now = Instant::now();
        if delay.is_zero() {
            self.add_locked(state, key, now);
            return false;
        }
        let Some(ready_at) = now.checked_add(delay.min(MAX_ADD_DELAY)) else {
            tracing::warn!(queue = %self.name, ?key, ?delay, "delay out of range; key dropped");
            return false;
        };
        if let Some(&slot) = state.waiting_slots.get(&key) {
            if slot.0 <= ready_at {
                return false;
            }
            state.waiting.remove(&slot);
        }
        let slot = (ready_at, state.next_waiting_seq);
        state.next_waiting_seq = state.next_waiting_seq.wrapping_add(1);
        state.waiting.insert(slot, key.clone());
        state.waiting_slots.insert(key, slot);
        true
    }

    /// Moves delayed keys whose time has come into the queue; returns the next ready time.
    fn release_due_locked(&self, state: &mut State<K>, now: Instant) -> Option<Instant> {
        while let Some(entry) = state.waiting.first_entry() {
            if entry.key().0 > now {
                return Some(entry.key().0);
            }
            let key = entry.remove();
            state.waiting_slots.remove(&key);
            self.add_locked(state, key, now);
        }
        None
    }
}

impl<K: QueueKey> Unfinished for Inner<K> {
    fn update_unfinished_work(&self, now: Instant) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let state = self.lock();
        let (total, longest) = state.processing_since.values().fold(
            (0.0_f64, 0.0_f64),
            |(total, longest), started| {
                let age = now.saturating_duration_since(*started).as_secs_f64();
                (total + age, longest.max(age))
            },
        );
        metrics.unfinished_work.set(total);
        metrics.longest_running_processor.set(longest);
    }
}

/// client-go's rate-limiting work queue. Clones share one queue.
pub struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K: QueueKey> fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.inner.name)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl<K: QueueKey> WorkQueue<K> {
    /// A queue with client-go's `DefaultControllerRateLimiter`. An empty `name` disables
    /// metrics, as in client-go.
    pub fn new(name: &str, metrics: &WorkqueueMetrics) -> Self {
        Self::with_rate_limiter(name, metrics, RateLimiter::new_default())
    }

    pub fn with_rate_limiter(
        name: &str,
        metrics: &WorkqueueMetrics,
        limiter: RateLimiter<K>,
    ) -> Self {
        let queue_metrics = if name.is_empty() {
            None
        } else {
            match QueueMetrics::for_queue(metrics, name) {
                Ok(queue_metrics) => Some(queue_metrics),
                Err(error) => {
                    tracing::warn!(queue = name, %error, "workqueue metrics unavailable");
                    None
                }
            }
        };
        let (shutdown, _) = watch::channel(false);
        let queue = Self {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                metrics: queue_metrics,
                state: Mutex::new(State {
                    fifo: VecDeque::new(),
                    dirty: HashSet::default(),
                    processing: HashSet::default(),
                    shutting_down: false,
                    waiting: BTreeMap::new(),
                    waiting_slots: HashMap::default(),
                    next_waiting_seq: 0,
                    limiter,
                    added_at: HashMap::default(),
                    processing_since: HashMap::default(),
                }),
                item_ready: Notify::new(),
                idle: Notify::new(),
                timer_wake: Arc::new(Notify::new()),
                timer_started: AtomicBool::new(false),
                shutdown,
            }),
        };
        if queue.inner.metrics.is_some() {
            let mut live = lock(&metrics.live);
            // Queues dropped since the last scrape leave here too, so restarts never pile up.
            live.retain(|queue| queue.strong_count() > 0);
            live.push(Arc::downgrade(&queue.inner) as Weak<dyn Unfinished>);
        }
        queue.ensure_timer();
        queue
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Queues `key` unless it is already queued; a key being processed is queued again on
    /// `done`. Ignored once shutting down.
    pub fn add(&self, key: K) {
        let mut state = self.inner.lock();
        self.inner.add_locked(&mut state, key, Instant::now());
    }

    /// Queues `key` once `delay` has passed. A key already waiting keeps the earlier time.
    pub fn add_after(&self, key: K, delay: Duration) {
        let rearm = {
            let mut state = self.inner.lock();
            self.inner.add_after_locked(&mut state, key, delay)
        };
        if rearm {
            self.ensure_timer();
            self.inner.timer_wake.notify_one();
        }
    }

    /// Queues `key` after the rate limiter's delay for it (and counts a failure for it).
    pub fn add_rate_limited(&self, key: K) {
        let rearm = {
            let mut state = self.inner.lock();
            // client-go consults the limiter even while shutting down.
            let delay = state.limiter.when(&key, Instant::now().into_std());
            self.inner.add_after_locked(&mut state, key, delay)
        };
        if rearm {
            self.ensure_timer();
            self.inner.timer_wake.notify_one();
        }
    }

    /// Resets the key's backoff; call after it was processed successfully.
    pub fn forget(&self, key: &K) {
        self.inner.lock().limiter.forget(key);
    }

    pub fn num_requeues(&self, key: &K) -> u32 {
        self.inner.lock().limiter.num_requeues(key)
    }

    /// Waits for the next key and marks it as processing; `None` once the queue is shutting
    /// down and empty. Every key returned must be passed to `done`.
    pub async fn get(&self) -> Option<K> {
        self.ensure_timer();
        loop {
            // Registered before checking, so a key added in between still wakes us.
            let mut key_added = pin!(self.inner.item_ready.notified());
            key_added.as_mut().enable();
            {
                let mut state = self.inner.lock();
                if let Some(key) = state.fifo.pop_front() {
                    let now = Instant::now();
                    if let Some(metrics) = &self.inner.metrics {
                        metrics.depth.dec();
                        state.processing_since.insert(key.clone(), now);
                        if let Some(added) = state.added_at.remove(&key) {
                            metrics
                                .queue_duration
                                .observe(now.saturating_duration_since(added).as_secs_f64());
                        }
                    }
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    return Some(key);
                }
                if state.shutting_down {
                    return None;
                }
            }
            key_added.await;
        }
    }

    /// Ends processing of `key`; if it was added meanwhile it is queued again.
    pub fn done(&self, key: &K) {
        let mut state = self.inner.lock();
        if let Some(metrics) = &self.inner.metrics
            && let Some(started) = state.processing_since.remove(key)
        {
            metrics.work_duration.observe(
                Instant::now()
                    .saturating_duration_since(started)
                    .as_secs_f64(),
            );
        }
        // Unlike client-go, a stray `done` for a key not being processed cannot queue it twice.
        if state.processing.remove(key) && state.dirty.contains(key) {
            state.fifo.push_back(key.clone());
            self.inner.item_ready.notify_one();
        }
        if state.fifo.is_empty() && state.processing.is_empty() {
            self.inner.idle.notify_waiters();
        }
    }

    /// Stops accepting keys and drops delayed ones; `get` keeps handing out what is queued and
    /// then returns `None`.
    pub fn shut_down(&self) {
        {
            let mut state = self.inner.lock();
            if state.shutting_down {
                return;
            }
            state.shutting_down = true;
            state.waiting.clear();
            state.waiting_slots.clear();
        }
        self.inner.item_ready.notify_waiters();
        self.inner.timer_wake.notify_one();
        self.inner.shutdown.send_replace(true);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.inner.lock().shutting_down
    }

    /// Resolves once `shut_down` has been called.
    pub async fn wait_for_shutdown(&self) {
        let mut shutdown = self.inner.shutdown.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = shutdown.wait_for(|down| *down).await;
    }

    /// Keys ready to be handed out (not those delayed or being processed).
    pub fn len(&self) -> usize {
        self.inner.lock().fifo.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Nothing ready and nothing being processed (delayed keys may still be waiting).
    fn is_idle(&self) -> bool {
        let state = self.inner.lock();
        state.fifo.is_empty() && state.processing.is_empty()
    }

    /// Resolves once the queue [`is_idle`](Self::is_idle): at once if it is.
    pub async fn until_idle(&self) {
        loop {
            let mut done = pin!(self.inner.idle.notified());
            // Registered before the check, so a `done` in between is not missed.
            done.as_mut().enable();
            if self.is_idle() {
                return;
            }
            done.await;
        }
    }

    /// Starts the timer task once a tokio runtime is available (construction may happen
    /// outside one; delayed keys then wait until the next call from inside a runtime).
    fn ensure_timer(&self) {
        if self.inner.timer_started.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = Handle::try_current() else {
            return;
        };
        if self.inner.timer_started.swap(true, Ordering::AcqRel) {
            return;
        }
        runtime.spawn(run_timer(
            Arc::downgrade(&self.inner),
            Arc::clone(&self.inner.timer_wake),
        ));
    }
}

/// client-go's `waitingLoop`: releases delayed keys on time. (Its `updateUnfinishedWorkLoop`
/// is [`UnfinishedWork`], measured at the scrape.) Exits on shutdown or when the queue is
/// dropped.
async fn run_timer<K: QueueKey>(queue: Weak<Inner<K>>, wake: Arc<Notify>) {
    loop {
        let deadline = {
            let Some(inner) = queue.upgrade() else {
                return;
            };
            let mut state = inner.lock();
            if state.shutting_down {
                return;
            }
            inner.release_due_locked(&mut state, Instant::now())
        };
        // `wake` is notify_one'd, so a wake-up sent before we wait is kept, not lost.
        match deadline {
            Some(deadline) => {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

/// Runs `workers` concurrent workers: each loops get → `handler(key).await` → Ok: forget,
/// Err: add_rate_limited (logged) → done. A worker whose handler panics is restarted after 1 s,
/// as client-go's `wait.Until`, and its key is re-queued with backoff. Returns when the queue is
/// shut down and every worker has finished its current key (with no workers: at shutdown).
pub async fn run_workers<K, F, Fut, E>(queue: WorkQueue<K>, workers: usize, handler: F)
where
    K: QueueKey,
    F: Fn(K) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    if workers == 0 {
        queue.wait_for_shutdown().await;
        return;
    }
    let Ok(runtime) = Handle::try_current() else {
        tracing::error!(queue = %queue.name(), "run_workers needs a tokio runtime; not started");
        return;
    };
    // Dropping the JoinSet (run_workers cancelled) aborts the workers too.
    let mut running = JoinSet::new();
    for _ in 0..workers {
        running.spawn_on(
            run_worker(queue.clone(), handler.clone(), Duration::ZERO),
            &runtime,
        );
    }
    while let Some(exit) = running.join_next().await {
        let Err(error) = exit else {
            continue;
        };
        // A cancelled worker means the runtime is going away: nothing to restart.
        if let Ok(payload) = error.try_into_panic() {
            tracing::error!(
                queue = %queue.name(),
                panic = panic_message(payload.as_ref()),
                "workqueue worker panicked; restarting it in 1s"
            );
            running.spawn_on(
                run_worker(queue.clone(), handler.clone(), WORKER_RESTART_DELAY),
                &runtime,
            );
        }
    }
}

async fn run_worker<K, F, Fut, E>(queue: WorkQueue<K>, handler: F, start_delay: Duration)
where
    K: QueueKey,
    F: Fn(K) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: fmt::Display,
{
    if !start_delay.is_zero() {
        tokio::time::sleep(start_delay).await;
    }
    while let Some(key) = queue.get().await {
        let mut in_flight = InFlight {
            queue: &queue,
            key: &key,
            settled: false,
        };
        // Boxed: an idle worker then holds a pointer, not the handler's whole state machine
        // (tens of KiB for a reconcile with its API calls; 50 idle claim workers held 1 MiB).
        let sync = Box::pin(handler(key.clone()));
        match sync.await {
            Ok(()) => queue.forget(&key),
            Err(error) => {
                tracing::warn!(
                    queue = %queue.name(),
                    ?key,
                    requeues = queue.num_requeues(&key),
                    %error,
                    "error syncing key; requeueing with backoff"
                );
                queue.add_rate_limited(key.clone());
            }
        }
        in_flight.settled = true;
        // A backlog of keys whose syncs never wait (the periodic quota resync: 3 000 quotas,
        // none to write) would otherwise be drained in one go, every other task of the
        // current-thread runtime waiting behind it; this yields once the task's budget of
        // 128 units is spent.
        tokio::task::consume_budget().await;
    }
}

/// Calls `done` for the key being handled however the handler ends. If it did not return
/// (panicked, or the worker was cancelled) the key is also re-queued with backoff, so it is
/// neither lost nor stuck in `processing`.
struct InFlight<'a, K: QueueKey> {
    queue: &'a WorkQueue<K>,
    key: &'a K,
    settled: bool,
}

impl<K: QueueKey> Drop for InFlight<'_, K> {
    fn drop(&mut self) {
        if !self.settled {
            tracing::error!(
                queue = %self.queue.name(),
                key = ?self.key,
                "worker stopped while handling key; requeueing with backoff"
            );
            self.queue.add_rate_limited(self.key.clone());
        }
        self.queue.done(self.key);
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    fn registry_and_metrics() -> (Registry, WorkqueueMetrics) {
        let registry = Registry::new();
        let metrics = WorkqueueMetrics::register(&registry).unwrap();
        (registry, metrics)
    }

    fn queue<K: QueueKey>(name: &str) -> (WorkQueue<K>, WorkqueueMetrics) {
        let (_, metrics) = registry_and_metrics();
        (WorkQueue::new(name, &metrics), metrics)
    }

    /// Workers whose handler records when each attempt starts, then answers
    /// `outcome(attempt)` (counted from 1): the attempts' times, and the workers' task.
    fn recording_workers(
        queue: &WorkQueue<&'static str>,
        workers: usize,
        outcome: impl Fn(usize) -> Result<(), String> + Clone + Send + 'static,
    ) -> (Arc<Mutex<Vec<Instant>>>, tokio::task::JoinHandle<()>) {
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let recorded = attempts.clone();
        let task = tokio::spawn(run_workers(queue.clone(), workers, move |_key| {
            let attempts = recorded.clone();
            let outcome = outcome.clone();
            async move {
                // The lock is released before `outcome`, which may panic.
                let attempt = {
                    let mut attempts = attempts.lock().unwrap();
                    attempts.push(Instant::now());
                    attempts.len()
                };
                outcome(attempt)
            }
        }));
        (attempts, task)
    }

    /// When each recorded attempt started, after `start`.
    fn offsets(attempts: &Mutex<Vec<Instant>>, start: Instant) -> Vec<Duration> {
        attempts
            .lock()
            .unwrap()
            .iter()
            .map(|at| *at - start)
            .collect()
    }

    /// Lets spawned tasks (the timer, getters, workers) run without moving the clock.
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    async fn advance(by: Duration) {
        tokio::time::advance(by).await;
        settle().await;
    }

    async fn get_now<K: QueueKey>(queue: &WorkQueue<K>) -> K {
        tokio::time::timeout(ms(1), queue.get())
            .await
            .expect("a key should be ready")
            .expect("queue should not be shut down")
    }

    // queue_test.go TestLen / dedupe.
    #[tokio::test]
    async fn add_dedupes_keys_that_are_already_queued() {
        let (queue, _) = queue::<&str>("q");
        queue.add("foo");
        queue.add("bar");
        queue.add("foo");
        assert_eq!(queue.len(), 2);
        assert_eq!(get_now(&queue).await, "foo");
        assert_eq!(get_now(&queue).await, "bar");
        assert!(queue.is_empty());
    }

    // queue_test.go TestReinsert / TestAddWhileProcessing.
    #[tokio::test]
    async fn readd_while_processing_is_delivered_once_after_done() {
        let (queue, _) = queue::<&str>("q");
        queue.add("foo");
        let key = get_now(&queue).await;
        queue.add("foo");
        queue.add("foo");
        assert_eq!(queue.len(), 0, "held back while processing");
        queue.done(&key);
        assert_eq!(queue.len(), 1);
        let again = get_now(&queue).await;
        assert_eq!(again, "foo");
        queue.done(&again);
        assert!(queue.is_empty());
        // A stray done does not conjure up a key.
        queue.done(&"foo");
        assert!(queue.is_empty());
    }

    #[tokio::test]
    async fn stray_done_does_not_duplicate_a_queued_key() {
        let (queue, _) = queue::<&str>("q");
        queue.add("foo");
        queue.done(&"foo");
        assert_eq!(queue.len(), 1);
    }

    // queue_test.go TestBasic: concurrent producers and consumers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_producers_and_consumers_process_everything_once_at_a_time() {
        let (queue, _) = queue::<u32>("q");
        let active = Arc::new(Mutex::new(HashSet::new()));
        let seen = Arc::new(Mutex::new(HashSet::new()));
        let overlaps = Arc::new(AtomicUsize::new(0));
        let mut consumers = Vec::new();
        for _ in 0..10 {
            let (queue, active, seen, overlaps) = (
                queue.clone(),
                active.clone(),
                seen.clone(),
                overlaps.clone(),
            );
            consumers.push(tokio::spawn(async move {
                while let Some(key) = queue.get().await {
                    if !active.lock().unwrap().insert(key) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::task::yield_now().await;
                    seen.lock().unwrap().insert(key);
                    active.lock().unwrap().remove(&key);
                    queue.done(&key);
                }
            }));
        }
        let mut producers = Vec::new();
        for _ in 0..10 {
            let queue = queue.clone();
            producers.push(tokio::spawn(async move {
                for key in 0..50 {
                    queue.add(key);
                    tokio::task::yield_now().await;
                }
            }));
        }
        for producer in producers {
            producer.await.unwrap();
        }
        queue.shut_down();
        for consumer in consumers {
            consumer.await.unwrap();
        }
        assert_eq!(overlaps.load(Ordering::SeqCst), 0);
        assert_eq!(seen.lock().unwrap().len(), 50);
        assert!(queue.is_empty());
    }

    #[tokio::test]
    async fn shutdown_wakes_every_waiting_get() {
        let (queue, _) = queue::<&str>("q");
        let getters: Vec<_> = (0..3)
            .map(|_| {
                let queue = queue.clone();
                tokio::spawn(async move { queue.get().await })
            })
            .collect();
        settle().await;
        queue.shut_down();
        for getter in getters {
            assert_eq!(getter.await.unwrap(), None);
        }
        assert!(queue.is_shutting_down());
    }

    #[tokio::test]
    async fn shutdown_drains_queued_keys_and_ignores_new_ones() {
        let (queue, _) = queue::<&str>("q");
        queue.add("a");
        queue.add("b");
        queue.shut_down();
        queue.add("c");
        queue.add_after("d", Duration::ZERO);
        queue.add_rate_limited("e");
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(queue.get().await, Some("b"));
        assert_eq!(queue.get().await, None);
        // wait_for_shutdown resolves at once after shutdown.
        tokio::time::timeout(ms(10), queue.wait_for_shutdown())
            .await
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_drops_delayed_keys() {
        let (queue, _) = queue::<&str>("q");
        queue.add_after("later", ms(10));
        queue.shut_down();
        advance(ms(20)).await;
        assert!(queue.is_empty());
        assert_eq!(queue.get().await, None);
    }

    // delaying_queue_test.go TestSimpleQueue.
    #[tokio::test(start_paused = true)]
    async fn add_after_fires_at_the_right_virtual_time() {
        let (queue, _) = queue::<&str>("q");
        queue.add_after("foo", ms(50));
        settle().await;
        assert!(queue.is_empty());
        advance(ms(49)).await;
        assert!(queue.is_empty());
        advance(ms(1)).await;
        assert_eq!(queue.len(), 1);
        let key = get_now(&queue).await;
        queue.done(&key);
        advance(Duration::from_secs(10)).await;
        assert!(queue.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_zero_adds_now() {
        let (queue, _) = queue::<&str>("q");
        queue.add_after("foo", Duration::ZERO);
        assert_eq!(queue.len(), 1);
    }

    // delaying_queue_test.go TestDeduping.
    #[tokio::test(start_paused = true)]
    async fn add_after_keeps_the_earlier_time_for_a_waiting_key() {
        let (queue, _) = queue::<&str>("q");
        // In either order, the earlier time wins.
        for (first, second) in [(ms(50), ms(70)), (ms(70), ms(50))] {
            queue.add_after("foo", first);
            queue.add_after("foo", second);
            advance(ms(60)).await;
            assert_eq!(queue.len(), 1);
            let key = get_now(&queue).await;
            queue.done(&key);
            advance(ms(20)).await;
            assert!(
                queue.is_empty(),
                "the later time was merged into the earlier one"
            );
        }
    }

    // delaying_queue_test.go TestAddTwoFireEarly.
    #[tokio::test(start_paused = true)]
    async fn earlier_keys_fire_first_and_later_adds_rearm_the_timer() {
        let (queue, _) = queue::<&str>("q");
        queue.add_after("first", Duration::from_secs(1));
        queue.add_after("second", ms(50));
        advance(ms(60)).await;
        assert_eq!(queue.len(), 1);
        assert_eq!(get_now(&queue).await, "second");

        queue.add_after("third", Duration::from_secs(2));
        advance(Duration::from_secs(1)).await;
        assert_eq!(queue.len(), 1);
        assert_eq!(get_now(&queue).await, "first");
        advance(Duration::from_secs(1)).await;
        assert_eq!(queue.len(), 1);
        assert_eq!(get_now(&queue).await, "third");
    }

    // delaying_queue_test.go TestCopyShifting.
    #[tokio::test(start_paused = true)]
    async fn delayed_keys_come_out_in_ready_time_order() {
        let (queue, _) = queue::<&str>("q");
        queue.add_after("first", Duration::from_secs(1));
        queue.add_after("second", ms(500));
        queue.add_after("third", ms(250));
        advance(Duration::from_secs(2)).await;
        assert_eq!(queue.len(), 3);
        assert_eq!(get_now(&queue).await, "third");
        assert_eq!(get_now(&queue).await, "second");
        assert_eq!(get_now(&queue).await, "first");
    }

    #[tokio::test(start_paused = true)]
    async fn huge_delays_do_not_panic() {
        let (queue, _) = queue::<&str>("q");
        queue.add_after("never", Duration::MAX);
        advance(Duration::from_secs(3600)).await;
        assert!(queue.is_empty());
    }

    // rate_limiting_queue_test.go TestRateLimitingQueue (exponential limiter only).
    #[tokio::test(start_paused = true)]
    async fn rate_limited_adds_wait_per_key_and_forget_resets() {
        let (_, metrics) = registry_and_metrics();
        let limiter = RateLimiter::new(ms(1), Duration::from_secs(1), f64::INFINITY, 0);
        let queue = WorkQueue::with_rate_limiter("q", &metrics, limiter);
        let start = Instant::now();
        let waiting_until = |key: &&str| {
            let state = queue.inner.lock();
            state.waiting_slots.get(key).map(|slot| slot.0 - start)
        };

        queue.add_rate_limited("one");
        assert_eq!(waiting_until(&"one"), Some(ms(1)));
        queue.add_rate_limited("one");
        assert_eq!(waiting_until(&"one"), Some(ms(1)), "earlier time kept");
        queue.add_rate_limited("two");
        assert_eq!(waiting_until(&"two"), Some(ms(1)));
        queue.add_rate_limited("two");
        assert_eq!(queue.num_requeues(&"one"), 2);
        assert_eq!(queue.num_requeues(&"two"), 2);
        queue.forget(&"one");
        assert_eq!(queue.num_requeues(&"one"), 0);
        queue.add_rate_limited("one");
        assert_eq!(queue.num_requeues(&"one"), 1);
        assert_eq!(queue.num_requeues(&"two"), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_follows_the_default_5ms_doubling_curve() {
        let (queue, _) = queue::<&str>("q");
        for expected in [5, 10, 20, 40] {
            queue.add_rate_limited("key");
            advance(ms(expected - 1)).await;
            assert!(queue.is_empty(), "not before {expected}ms");
            advance(ms(1)).await;
            assert_eq!(queue.len(), 1, "at {expected}ms");
            let key = get_now(&queue).await;
            queue.done(&key);
        }
        assert_eq!(queue.num_requeues(&"key"), 4);
        queue.forget(&"key");
        queue.add_rate_limited("key");
        advance(ms(5)).await;
        assert_eq!(queue.len(), 1, "forget restarts at 5ms");
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_count_depth_adds_and_retries_exactly() {
        let (queue, metrics) = queue::<&str>("q");
        let depth = metrics.depth.with_label_values(&["q"]);
        let adds = metrics.adds.with_label_values(&["q"]);
        let retries = metrics.retries.with_label_values(&["q"]);

        queue.add("a");
        queue.add("b");
        queue.add("a");
        assert_eq!((depth.get(), adds.get()), (2, 2));
        let a = get_now(&queue).await;
        assert_eq!(depth.get(), 1);

        // client-go counts a key re-added while processing in depth, though len() excludes it.
        queue.add("a");
        assert_eq!((depth.get(), adds.get(), queue.len()), (2, 3, 1));
        queue.done(&a);
        assert_eq!((depth.get(), queue.len()), (2, 2));

        queue.add_after("c", Duration::ZERO);
        assert_eq!((retries.get(), adds.get(), depth.get()), (1, 4, 3));
        queue.add_after("d", ms(10));
        queue.add_rate_limited("e");
        assert_eq!(
            (retries.get(), adds.get()),
            (3, 4),
            "delayed keys not added yet"
        );
        advance(ms(10)).await;
        assert_eq!((adds.get(), depth.get()), (6, 5));

        for _ in 0..5 {
            let key = get_now(&queue).await;
            queue.done(&key);
        }
        assert_eq!((depth.get(), adds.get(), retries.get()), (0, 6, 3));
    }

    #[tokio::test(start_paused = true)]
    async fn durations_are_observed_once_per_get_and_done() {
        let (queue, metrics) = queue::<&str>("q");
        let queued = metrics.queue_duration.with_label_values(&["q"]);
        let worked = metrics.work_duration.with_label_values(&["q"]);

        queue.add("a");
        advance(ms(300)).await;
        queue.add("a");
        advance(ms(200)).await;
        let key = get_now(&queue).await;
        assert_eq!(queued.get_sample_count(), 1);
        assert_eq!(queued.get_sample_sum(), 0.5, "measured from the first add");

        queue.add("a"); // while processing
        advance(ms(250)).await;
        queue.done(&key);
        assert_eq!(worked.get_sample_count(), 1);
        assert_eq!(worked.get_sample_sum(), 0.25);

        let key = get_now(&queue).await;
        assert_eq!(queued.get_sample_count(), 2);
        assert_eq!(
            queued.get_sample_sum(),
            0.75,
            "second wait counts from the re-add"
        );
        queue.done(&key);
        queue.done(&key);
        assert_eq!(
            worked.get_sample_count(),
            2,
            "a stray done observes nothing"
        );
    }

    /// The two unfinished-work gauges of queue `q`, as a scrape reads them.
    fn scrape_unfinished(registry: &Registry) -> (f64, f64) {
        let families = registry.gather();
        let value = |name: &str| {
            families
                .iter()
                .find(|family| family.name() == name)
                .map_or(f64::NAN, |family| {
                    family.get_metric()[0].get_gauge().get_value()
                })
        };
        (
            value("workqueue_unfinished_work_seconds"),
            value("workqueue_longest_running_processor_seconds"),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn unfinished_work_is_measured_at_the_scrape() {
        let (registry, metrics) = registry_and_metrics();
        let queue = WorkQueue::<&str>::new("q", &metrics);
        queue.add("a");
        queue.add("b");
        let a = get_now(&queue).await;
        advance(ms(500)).await;
        let b = get_now(&queue).await;
        advance(ms(1000)).await;
        assert_eq!(scrape_unfinished(&registry), (2.5, 1.5));
        // Not a timer's last value: the ages at this scrape.
        advance(ms(100)).await;
        assert_eq!(scrape_unfinished(&registry), (2.7, 1.6));
        queue.done(&a);
        queue.done(&b);
        assert_eq!(scrape_unfinished(&registry), (0.0, 0.0));
        // A dropped queue is no longer measured, nor kept once another queue starts.
        drop(queue);
        scrape_unfinished(&registry);
        assert!(lock(&metrics.live).is_empty());
        let first = WorkQueue::<&str>::new("first", &metrics);
        drop(first);
        let _second = WorkQueue::<&str>::new("second", &metrics);
        assert_eq!(lock(&metrics.live).len(), 1);
    }

    #[tokio::test]
    async fn until_idle_waits_for_the_last_key_to_be_done() {
        let (queue, _) = queue::<&str>("q");
        queue.until_idle().await;
        queue.add("a");
        queue.add("b");
        let a = get_now(&queue).await;
        let mut idle = pin!(queue.until_idle());
        assert!(futures::poll!(idle.as_mut()).is_pending(), "b is queued");
        let b = get_now(&queue).await;
        queue.done(&a);
        assert!(
            futures::poll!(idle.as_mut()).is_pending(),
            "b is being processed"
        );
        queue.done(&b);
        assert!(futures::poll!(idle.as_mut()).is_ready(), "nothing left");
    }

    #[tokio::test]
    async fn unnamed_queues_export_nothing() {
        let (registry, metrics) = registry_and_metrics();
        let queue = WorkQueue::new("", &metrics);
        queue.add("a");
        queue.add_after("b", Duration::ZERO);
        let key = get_now(&queue).await;
        queue.done(&key);
        let series: usize = registry
            .gather()
            .iter()
            .map(|family| family.get_metric().len())
            .sum();
        assert_eq!(series, 0);
    }

    #[tokio::test]
    async fn exposition_matches_upstream_names_help_and_buckets() {
        let (registry, metrics) = registry_and_metrics();
        let _queue = WorkQueue::<&str>::new("q", &metrics);
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&registry.gather())
            .unwrap();
        for line in [
            "# HELP workqueue_depth [BETA] Current depth of workqueue",
            "# TYPE workqueue_depth gauge",
            "# HELP workqueue_adds_total [BETA] Total number of adds handled by workqueue",
            "# TYPE workqueue_adds_total counter",
            "# HELP workqueue_queue_duration_seconds [BETA] How long in seconds an item stays in workqueue before being requested.",
            "# TYPE workqueue_queue_duration_seconds histogram",
            "# HELP workqueue_work_duration_seconds [BETA] How long in seconds processing an item from workqueue takes.",
            "# HELP workqueue_unfinished_work_seconds [BETA] How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
            "# HELP workqueue_longest_running_processor_seconds [BETA] How many seconds has the longest running processor for workqueue been running.",
            "# HELP workqueue_retries_total [BETA] Total number of retries handled by workqueue",
            "workqueue_depth{name=\"q\"} 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        let buckets = metrics.queue_duration.with_label_values(&["q"]);
        buckets.observe(1e-8);
        let families = registry.gather();
        let histogram = families
            .iter()
            .find(|family| family.name() == "workqueue_queue_duration_seconds")
            .unwrap();
        let bounds: Vec<f64> = histogram.get_metric()[0]
            .get_histogram()
            .get_bucket()
            .iter()
            .map(|bucket| bucket.upper_bound())
            .collect();
        // Go's ExponentialBuckets(10e-7, 10, 10): 1e-06 … 1000.
        assert_eq!(bounds.len(), 10);
        assert_eq!(bounds[0], 1e-6);
        assert!((bounds[9] - 1000.0).abs() < 1e-6);
    }

    #[tokio::test]
    async fn timer_task_ends_on_shutdown_or_when_the_queue_is_dropped() {
        let alive = || Handle::current().metrics().num_alive_tasks();
        let (shut, _) = queue::<&str>("q");
        assert_eq!(alive(), 1);
        shut.shut_down();
        settle().await;
        assert_eq!(alive(), 0);

        let (dropped, _) = queue::<&str>("q");
        dropped.add_after("later", Duration::from_secs(60));
        assert_eq!(alive(), 1);
        drop(dropped);
        settle().await;
        assert_eq!(alive(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn run_workers_processes_every_key_and_returns_after_shutdown() {
        let (queue, _) = queue::<u32>("q");
        let counts = Arc::new(Mutex::new(HashMap::new()));
        let workers = {
            let counts = counts.clone();
            tokio::spawn(run_workers(queue.clone(), 4, move |key| {
                let counts = counts.clone();
                async move {
                    tokio::time::sleep(ms(1)).await;
                    *counts.lock().unwrap().entry(key).or_insert(0) += 1;
                    Ok::<(), String>(())
                }
            }))
        };
        for key in 0..100 {
            queue.add(key);
        }
        tokio::time::sleep(ms(100)).await;
        queue.shut_down();
        workers.await.unwrap();
        let counts = counts.lock().unwrap();
        assert_eq!(counts.len(), 100);
        assert!(counts.values().all(|&count| count == 1));
    }

    /// A backlog of keys whose handling never waits does not hold the runtime until it is
    /// drained: another task runs in between.
    #[tokio::test]
    async fn a_backlog_that_never_waits_lets_other_tasks_run() {
        let (queue, _) = queue::<u32>("q");
        for key in 0..10_000 {
            queue.add(key);
        }
        let handled = Arc::new(AtomicUsize::new(0));
        let workers = {
            let handled = handled.clone();
            tokio::spawn(run_workers(queue.clone(), 1, move |_| {
                handled.fetch_add(1, Ordering::SeqCst);
                std::future::ready(Ok::<(), String>(()))
            }))
        };
        // Runs once the workers have started: they yield before the backlog is drained.
        let seen_by_another_task = tokio::spawn({
            let handled = handled.clone();
            async move {
                while handled.load(Ordering::SeqCst) == 0 {
                    tokio::task::yield_now().await;
                }
                handled.load(Ordering::SeqCst)
            }
        })
        .await
        .unwrap();
        assert!(
            seen_by_another_task < 10_000,
            "another task ran after {seen_by_another_task} of 10 000 keys"
        );
        queue.shut_down();
        workers.await.unwrap();
        assert_eq!(handled.load(Ordering::SeqCst), 10_000);
    }

    /// An idle worker's size does not grow with its handler's future: the handler's state
    /// lives in a box only while a key is handled.
    #[tokio::test(start_paused = true)]
    async fn a_worker_does_not_hold_its_handlers_state_while_idle() {
        let (queue, _) = queue::<u32>("q");
        let handled = Arc::new(Mutex::new(Vec::new()));
        let handler = {
            let handled = handled.clone();
            move |key: u32| {
                let handled = handled.clone();
                async move {
                    let state = [key; 16 * 1024];
                    tokio::task::yield_now().await;
                    handled
                        .lock()
                        .unwrap()
                        .push(state.iter().map(|&k| u64::from(k)).sum::<u64>());
                    Ok::<(), String>(())
                }
            }
        };
        let worker = run_worker(queue.clone(), handler, Duration::ZERO);
        assert!(
            std::mem::size_of_val(&worker) < 1024,
            "a worker of {} bytes",
            std::mem::size_of_val(&worker)
        );
        let worker = tokio::spawn(worker);
        queue.add(2);
        tokio::time::sleep(ms(10)).await;
        queue.shut_down();
        worker.await.unwrap();
        assert_eq!(*handled.lock().unwrap(), vec![2 * 16 * 1024]);
    }

    #[tokio::test(start_paused = true)]
    async fn run_workers_retries_failures_with_backoff_until_success() {
        let (queue, metrics) = queue::<&str>("q");
        let (attempts, workers) = recording_workers(&queue, 2, |attempt| {
            if attempt < 4 {
                Err(format!("attempt {attempt} failed"))
            } else {
                Ok(())
            }
        });
        let start = Instant::now();
        queue.add("flaky");
        tokio::time::sleep(Duration::from_secs(1)).await;
        // 5ms, then 10ms, then 20ms after each failure.
        assert_eq!(offsets(&attempts, start), [ms(0), ms(5), ms(15), ms(35)]);
        assert_eq!(
            queue.num_requeues(&"flaky"),
            0,
            "success forgets the backoff"
        );
        assert_eq!(metrics.retries.with_label_values(&["q"]).get(), 3);
        queue.shut_down();
        workers.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn two_workers_never_process_the_same_key_at_once() {
        let (queue, _) = queue::<u32>("q");
        let active = Arc::new(Mutex::new(HashSet::new()));
        let most_active = Arc::new(AtomicUsize::new(0));
        let overlaps = Arc::new(AtomicUsize::new(0));
        let processed = Arc::new(AtomicUsize::new(0));
        let workers = {
            let (active, most_active, overlaps, processed) = (
                active.clone(),
                most_active.clone(),
                overlaps.clone(),
                processed.clone(),
            );
            tokio::spawn(run_workers(queue.clone(), 2, move |key| {
                let (active, most_active, overlaps, processed) = (
                    active.clone(),
                    most_active.clone(),
                    overlaps.clone(),
                    processed.clone(),
                );
                async move {
                    {
                        let mut active = active.lock().unwrap();
                        if !active.insert(key) {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        most_active.fetch_max(active.len(), Ordering::SeqCst);
                    }
                    tokio::time::sleep(ms(10)).await;
                    active.lock().unwrap().remove(&key);
                    processed.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), String>(())
                }
            }))
        };
        for _ in 0..20 {
            queue.add(1);
            queue.add(2);
            tokio::time::sleep(ms(3)).await;
        }
        tokio::time::sleep(ms(100)).await;
        queue.shut_down();
        workers.await.unwrap();
        assert_eq!(overlaps.load(Ordering::SeqCst), 0);
        assert_eq!(
            most_active.load(Ordering::SeqCst),
            2,
            "both workers were busy"
        );
        assert!(
            processed.load(Ordering::SeqCst) >= 4,
            "re-adds were processed"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_handler_is_restarted_after_a_second_and_its_key_retried() {
        let (queue, _) = queue::<&str>("q");
        let (attempts, workers) = recording_workers(&queue, 1, |attempt| {
            if attempt == 1 {
                panic!("boom");
            }
            Ok(())
        });
        let start = Instant::now();
        queue.add("key");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(offsets(&attempts, start), [ms(0), Duration::from_secs(1)]);
        assert_eq!(queue.num_requeues(&"key"), 0);
        assert!(queue.inner.lock().processing.is_empty());
        queue.shut_down();
        workers.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn run_workers_with_no_workers_waits_for_shutdown() {
        let (queue, _) = queue::<&str>("q");
        let workers = tokio::spawn(run_workers(queue.clone(), 0, |_key: &str| async {
            Ok::<(), String>(())
        }));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!workers.is_finished());
        queue.shut_down();
        workers.await.unwrap();
    }
}
