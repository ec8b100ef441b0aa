//! Shared informers: one list/watch per resource type for the whole process, a reflector
//! store every controller reads, and change notifications with the old object on updates and
//! deletes — including objects that vanished while the watch was down and a relist found gone,
//! which kube-runtime's shared-stream subscribers never see (kube-rs#1590).

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::watcher;
use kube::runtime::watcher::Event;
use kube::{Client, ResourceExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;
use super::queue::{QueueKey, WorkQueue};
use super::stored::Stored;

/// What changed in a store, in the order the store saw it.
#[derive(Debug)]
pub enum Change<K> {
    Added(Arc<K>),
    Updated {
        old: Arc<K>,
        new: Arc<K>,
    },
    Deleted(Arc<K>),
    /// Sent once: the subscriber has now been told about every object of the first complete
    /// list (client-go's handler `HasSynced`), so workers can start without acting on a
    /// half-counted state.
    Synced,
}

impl<K> Clone for Change<K> {
    fn clone(&self) -> Self {
        match self {
            Change::Added(k) => Change::Added(k.clone()),
            Change::Updated { old, new } => Change::Updated {
                old: old.clone(),
                new: new.clone(),
            },
            Change::Deleted(k) => Change::Deleted(k.clone()),
            Change::Synced => Change::Synced,
        }
    }
}

struct Dispatch<K: Stored> {
    writer: Writer<K>,
    handlers: Vec<mpsc::UnboundedSender<Change<K>>>,
    /// Objects seen by a relist in progress, and the changes it found so far.
    relist: Option<Relist<K>>,
    /// The stored objects by namespace, so namespace-scoped lookups (a PDB's pods, a
    /// namespace's quotas) do not scan the whole store.
    by_namespace: HashMap<String, HashMap<String, Arc<K>>>,
}

impl<K: Stored> Dispatch<K> {
    /// Keeps the namespace index in step with the store after `event` was applied.
    fn index(&mut self, event: &Event<K>, reader: &Store<K>) {
        let place = |obj: &K| (obj.namespace().unwrap_or_default(), obj.name_any());
        match event {
            Event::Apply(obj) => {
                // The store's own Arc: the index costs no second copy.
                if let Some(stored) = reader.get(&ObjectRef::from_obj(obj)) {
                    let (ns, name) = place(obj);
                    self.by_namespace
                        .entry(ns)
                        .or_default()
                        .insert(name, stored);
                }
            }
            Event::Delete(obj) => {
                let (ns, name) = place(obj);
                if let Some(names) = self.by_namespace.get_mut(&ns) {
                    names.remove(&name);
                    if names.is_empty() {
                        self.by_namespace.remove(&ns);
                    }
                }
            }
            Event::InitDone => {
                self.by_namespace.clear();
                for obj in reader.state() {
                    let (ns, name) = place(&obj);
                    self.by_namespace.entry(ns).or_default().insert(name, obj);
                }
            }
            Event::Init | Event::InitApply(_) => {}
        }
    }
}

/// A relist in progress: the objects it has listed, and the changes found so far (sent
/// once the store holds the new list).
struct Relist<K: Stored> {
    seen: HashSet<ObjectRef<K>>,
    pending: Vec<Change<K>>,
}

/// One shared watch of one resource type.
pub struct Informer<K: Stored> {
    reader: Store<K>,
    dispatch: Mutex<Dispatch<K>>,
    synced: watch::Sender<bool>,
    /// Set when list/watch fails, cleared when events flow again: while set, the store may
    /// miss changes (the watcher is backing off), so counts taken from it may be stale.
    failing: std::sync::atomic::AtomicBool,
}

impl<K: Stored> Informer<K> {
    /// The store every controller reads; it is never written by them.
    pub fn store(&self) -> &Store<K> {
        &self.reader
    }

    /// The stored objects of one namespace ("" for cluster-scoped ones).
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.lock()
            .by_namespace
            .get(namespace)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// A stream of changes from now on, with `Synced` once the first list is through. A
    /// subscriber that joins after the initial list gets every stored object as `Added` and
    /// then `Synced` first, as client-go's late event handlers do.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Change<K>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut dispatch = self.lock();
        if *self.synced.borrow() {
            for obj in self.reader.state() {
                let _ = tx.send(Change::Added(obj));
            }
            let _ = tx.send(Change::Synced);
        }
        dispatch.handlers.push(tx);
        rx
    }

    /// Whether list/watch is failing right now, so the store may be behind the API server.
    pub fn is_failing(&self) -> bool {
        self.failing.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits for the first complete list.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|synced| *synced).await;
    }

    fn lock(&self) -> MutexGuard<'_, Dispatch<K>> {
        self.dispatch.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies one watcher event to the store and tells every subscriber what changed. Both
    /// happen under one lock, so a subscriber that reads the store after a notification sees
    /// at least that version.
    fn handle(&self, event: Event<K>) {
        let mut dispatch = self.lock();
        let reference = |obj: &K| ObjectRef::from_obj(obj);
        let mut changes = Vec::new();
        match &event {
            Event::Apply(new) => {
                let new = Arc::new(new.clone());
                changes.push(match self.reader.get(&reference(&new)) {
                    Some(old) => Change::Updated { old, new },
                    None => Change::Added(new),
                });
            }
            Event::Delete(obj) => changes.push(Change::Deleted(Arc::new(obj.clone()))),
            Event::Init => {
                dispatch.relist = Some(Relist {
                    seen: HashSet::new(),
                    pending: Vec::new(),
                })
            }
            Event::InitApply(new) => {
                let old = self.reader.get(&reference(new));
                if let Some(Relist { seen, pending }) = dispatch.relist.as_mut() {
                    seen.insert(reference(new));
                    let new = Arc::new(new.clone());
                    match old {
                        None => pending.push(Change::Added(new)),
                        Some(old) if old.resource_version() != new.resource_version() => {
                            pending.push(Change::Updated { old, new })
                        }
                        Some(_) => {}
                    }
                }
            }
            Event::InitDone => {
                if let Some(Relist { seen, pending }) = dispatch.relist.take() {
                    changes = pending;
                    for obj in self.reader.state() {
                        if !seen.contains(&reference(&obj)) {
                            changes.push(Change::Deleted(obj));
                        }
                    }
                }
                if !*self.synced.borrow() {
                    changes.push(Change::Synced);
                }
            }
        }
        dispatch.writer.apply_watcher_event(&event);
        dispatch.index(&event, &self.reader);
        dispatch
            .handlers
            .retain(|h| changes.iter().all(|c| h.send(c.clone()).is_ok()));
        drop(dispatch);
        if matches!(event, Event::InitDone) {
            self.synced.send_replace(true);
        }
    }
}

/// Feeds a subscription to a controller's queue until shutdown, as client-go's event
/// handlers do: `on_change` decides what to enqueue; `synced` fires at the subscription's
/// `Synced`, so workers can wait for it; the queue shuts down when the feed ends.
pub async fn feed<K, Q: QueueKey>(
    mut changes: mpsc::UnboundedReceiver<Change<K>>,
    queue: WorkQueue<Q>,
    shutdown: CancellationToken,
    synced: oneshot::Sender<()>,
    mut on_change: impl FnMut(Change<K>, &WorkQueue<Q>),
) {
    let mut synced = Some(synced);
    loop {
        let change = tokio::select! {
            _ = shutdown.cancelled() => break,
            change = changes.recv() => change,
        };
        match change {
            None => break,
            Some(Change::Synced) => {
                if let Some(tx) = synced.take() {
                    let _ = tx.send(());
                }
            }
            Some(change) => on_change(change, &queue),
        }
    }
    queue.shut_down();
}

type SyncFlag = (String, watch::Receiver<bool>);

/// The process-wide set of informers, created on first use.
#[derive(Clone)]
pub struct Informers {
    client: Client,
    metrics: Metrics,
    shutdown: CancellationToken,
    started: Arc<Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>>,
    /// Each started informer's resource and first-list flag, for readiness.
    synced: Arc<Mutex<Vec<SyncFlag>>>,
}

impl Informers {
    pub fn new(client: Client, metrics: Metrics, shutdown: CancellationToken) -> Self {
        Self {
            client,
            metrics,
            shutdown,
            started: Arc::default(),
            synced: Arc::default(),
        }
    }

    /// The informer for `K` across all namespaces, started on first use. Every later call
    /// returns the same one: one watch per type for the whole process.
    pub fn get<K: Stored>(&self) -> Arc<Informer<K>> {
        let mut started = self.started.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = started
            .get(&TypeId::of::<K>())
            .and_then(|a| a.clone().downcast::<Informer<K>>().ok())
        {
            return existing;
        }
        let informer = self.start::<K>(Api::all(self.client.clone()));
        started.insert(TypeId::of::<K>(), informer.clone());
        informer
    }

    fn start<K: Stored>(&self, api: Api<K>) -> Arc<Informer<K>> {
        let resource = K::plural(&()).to_string();
        let writer = Writer::default();
        let (synced, synced_rx) = watch::channel(false);
        let informer = Arc::new(Informer {
            reader: writer.as_reader(),
            dispatch: Mutex::new(Dispatch {
                writer,
                handlers: Vec::new(),
                by_namespace: HashMap::new(),
                relist: None,
            }),
            synced,
            failing: std::sync::atomic::AtomicBool::new(false),
        });
        self.synced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((resource.clone(), synced_rx));
        let task_informer = informer.clone();
        let metrics = self.metrics.clone();
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default())
                .modify(K::shape)
                .default_backoff();
            let mut stream = std::pin::pin!(stream);
            loop {
                let event = tokio::select! {
                    _ = shutdown.cancelled() => break,
                    event = stream.next() => event,
                };
                match event {
                    Some(Ok(event)) => {
                        // A relist is complete only at its end; a watch event means the
                        // watch is live again.
                        if !matches!(event, Event::Init | Event::InitApply(_)) {
                            task_informer
                                .failing
                                .store(false, std::sync::atomic::Ordering::SeqCst);
                        }
                        task_informer.handle(event);
                        let count = i64::try_from(task_informer.reader.len()).unwrap_or(i64::MAX);
                        metrics
                            .store_objects
                            .with_label_values(&[&resource])
                            .set(count);
                    }
                    Some(Err(err)) => {
                        task_informer
                            .failing
                            .store(true, std::sync::atomic::Ordering::SeqCst);
                        metrics.watch_errors.with_label_values(&[&resource]).inc();
                        tracing::warn!(resource = %resource, error = %err, "list/watch failed; retrying with backoff");
                    }
                    None => break,
                }
            }
        });
        informer
    }

    /// Resources whose informers have not completed their first list yet.
    pub fn unsynced(&self) -> Vec<String> {
        self.synced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, rx)| !*rx.borrow())
            .map(|(name, _)| name.clone())
            .collect()
    }
}
