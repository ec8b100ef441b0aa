//! A controller's startup as the operator sees it at `-v=0`: one line when its stores have
//! synced (objects per store, seconds since it started) and one when its first full pass is
//! done (every queue it works drained once after the sync).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::lock::lock;
use tokio::time::Instant;

type Count = Box<dyn Fn() -> usize + Send + Sync>;

/// One controller's startup progress; cloned into everything it starts.
#[derive(Clone)]
pub struct Startup {
    inner: Arc<Inner>,
}

struct Inner {
    controller: &'static str,
    began: Instant,
    /// Each subscribed store's resource and size.
    stores: Mutex<Vec<(String, Count)>>,
    /// Queues worked, and how many of them have drained once.
    queues: AtomicUsize,
    drained: AtomicUsize,
    /// Set once every store the controller reads has synced; readiness waits for it.
    stores_synced: AtomicBool,
}

impl Startup {
    pub fn new(controller: &'static str) -> Self {
        Self {
            inner: Arc::new(Inner {
                controller,
                began: Instant::now(),
                stores: Mutex::default(),
                queues: AtomicUsize::new(0),
                drained: AtomicUsize::new(0),
                stores_synced: AtomicBool::new(false),
            }),
        }
    }

    /// A store the controller reads, named by its resource; sized when the line is logged.
    pub fn store(&self, resource: String, count: impl Fn() -> usize + Send + Sync + 'static) {
        let mut stores = lock(&self.inner.stores);
        if !stores.iter().any(|(r, _)| *r == resource) {
            stores.push((resource, Box::new(count)));
        }
    }

    /// The controller this startup belongs to.
    pub fn controller(&self) -> &'static str {
        self.inner.controller
    }

    /// Whether every store the controller reads has synced.
    pub fn is_synced(&self) -> bool {
        self.inner.stores_synced.load(Ordering::SeqCst)
    }

    /// Logs that every store has synced: `pods=12 nodes=96`, and the seconds it took.
    pub fn synced(&self) {
        self.inner.stores_synced.store(true, Ordering::SeqCst);
        let stores = lock(&self.inner.stores);
        let objects: Vec<String> = stores
            .iter()
            .map(|(resource, count)| format!("{resource}={}", count()))
            .collect();
        tracing::info!(
            controller = self.inner.controller,
            objects = objects.join(" "),
            seconds = format!("{:.3}", self.inner.began.elapsed().as_secs_f64()),
            "stores synced"
        );
    }

    /// Counts a queue the controller works; call it before any queue is polled, so the
    /// first pass waits for all of them.
    pub fn queue(&self) {
        self.inner.queues.fetch_add(1, Ordering::SeqCst);
    }

    /// Waits for `drained` (a queue's first idle moment), then counts that queue as drained
    /// and logs the first full pass when it was the last. Never resolves if the queue never
    /// drains.
    pub async fn first_drain(&self, drained: impl Future<Output = ()>) {
        drained.await;
        let drained = self.inner.drained.fetch_add(1, Ordering::SeqCst) + 1;
        if drained == self.inner.queues.load(Ordering::SeqCst) {
            tracing::info!(
                controller = self.inner.controller,
                seconds = format!("{:.3}", self.inner.began.elapsed().as_secs_f64()),
                "first full pass done"
            );
        }
    }
}
