//! Shared informers: one list/watch per resource type for the whole process, a store
//! every controller reads, and change notifications with the old object on updates and
//! deletes — including objects that vanished while the watch was down and a relist found gone,
//! which kube-runtime's shared-stream subscribers never see (kube-rs#1590).

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::Event;
use kube::{Client, Resource};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::listwatch::{InitialList, list_watch};
use super::stored::{Named, Stored};
use crate::lock::lock;
use crate::runtime::KeyHasher;
use crate::runtime::connection::reachability;
use crate::runtime::metrics::Metrics;
use crate::runtime::protobuf::ContentType;
use crate::runtime::queue::{QueueKey, WorkQueue};

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

/// The objects of one resource type, by namespace ("" for cluster-scoped ones), then name.
///
/// kcm's own store rather than kube-runtime's reflector `Store`: that one keys each object by
/// an `ObjectRef` (a second copy of its name and namespace plus its uid and resourceVersion),
/// deep-copies each object it applies (so a change notification needs a copy of its own),
/// and has no namespace index, which kcm used to keep beside it as a second map. Here the
/// namespace map is the index, a namespace's name is held once for all its objects, an
/// object's name is not copied into a key (the set is keyed by the name the object holds),
/// and the `Arc` a watch event is turned into is the one stored, indexed and sent to
/// subscribers.
pub struct Store<K> {
    objects: Arc<RwLock<Objects<K>>>,
}

struct Objects<K> {
    by_namespace: HashMap<String, HashSet<Named<K>, KeyHasher>, KeyHasher>,
    len: usize,
}

impl<K> Default for Objects<K> {
    fn default() -> Self {
        Self {
            by_namespace: HashMap::default(),
            len: 0,
        }
    }
}

impl<K: Stored> Objects<K> {
    /// Puts `obj` in, returning the version it replaced.
    fn insert(&mut self, obj: Arc<K>) -> Option<Arc<K>> {
        let ns = obj.place().0;
        let names = match self.by_namespace.get_mut(ns) {
            Some(names) => names,
            None => self.by_namespace.entry(ns.to_string()).or_default(),
        };
        let old = names.replace(Named(obj)).map(|old| old.0);
        self.len += usize::from(old.is_none());
        old
    }

    fn remove(&mut self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let names = self.by_namespace.get_mut(namespace)?;
        let removed = names.take(name).map(|removed| removed.0);
        if names.is_empty() {
            self.by_namespace.remove(namespace);
        }
        self.len -= usize::from(removed.is_some());
        removed
    }

    fn contains(&self, namespace: &str, name: &str) -> bool {
        self.by_namespace
            .get(namespace)
            .is_some_and(|names| names.contains(name))
    }
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects.clone(),
        }
    }
}

impl<K: Stored> Store<K> {
    fn new() -> Self {
        Self {
            objects: Arc::new(RwLock::new(Objects::default())),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Objects<K>> {
        self.objects.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Objects<K>> {
        self.objects.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The object `namespace/name` ("" namespace for cluster-scoped ones).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        Some(
            self.read()
                .by_namespace
                .get(namespace)?
                .get(name)?
                .0
                .clone(),
        )
    }

    /// Every stored object.
    pub fn state(&self) -> Vec<Arc<K>> {
        self.read()
            .by_namespace
            .values()
            .flat_map(|names| names.iter().map(|named| named.0.clone()))
            .collect()
    }

    /// The stored objects of one namespace ("" for cluster-scoped ones).
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.read()
            .by_namespace
            .get(namespace)
            .map(|names| names.iter().map(|named| named.0.clone()).collect())
            .unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        self.read().len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

struct Dispatch<K: Stored> {
    handlers: Vec<mpsc::UnboundedSender<Change<K>>>,
    /// A relist in progress: the objects listed so far (they replace the store at its end),
    /// and the changes found so far (sent once the store holds the new list).
    relist: Option<(Objects<K>, Vec<Change<K>>)>,
}

/// One shared watch of one resource type.
pub struct Informer<K: Stored> {
    store: Store<K>,
    dispatch: Mutex<Dispatch<K>>,
    synced: watch::Sender<bool>,
    /// Set when list/watch fails, cleared when events flow again: while set, the store may
    /// miss changes (the watcher is backing off), so counts taken from it may be stale.
    failing: std::sync::atomic::AtomicBool,
}

impl<K: Stored> Informer<K> {
    /// The store every controller reads; it is never written by them.
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// The stored objects of one namespace ("" for cluster-scoped ones).
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.store.in_namespace(namespace)
    }

    /// A stream of changes from now on, with `Synced` once the first list is through. A
    /// subscriber that joins after the initial list gets every stored object as `Added` and
    /// then `Synced` first, as client-go's late event handlers do.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Change<K>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut dispatch = self.lock();
        if *self.synced.borrow() {
            for obj in self.store.state() {
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

    /// client-go's resync: every stored object is sent to every subscriber again as an
    /// update from itself to itself, so handlers re-queue what they own (a level-triggered
    /// safety net). Skipped before the first list and during a relist, as client-go's
    /// resync only walks a settled store.
    pub fn resync(&self) {
        let mut dispatch = self.lock();
        if !*self.synced.borrow() || dispatch.relist.is_some() {
            return;
        }
        let objects = self.store.state();
        dispatch.handlers.retain(|handler| {
            objects.iter().all(|obj| {
                handler
                    .send(Change::Updated {
                        old: obj.clone(),
                        new: obj.clone(),
                    })
                    .is_ok()
            })
        });
    }

    /// Waits for the first complete list.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|synced| *synced).await;
    }

    fn lock(&self) -> MutexGuard<'_, Dispatch<K>> {
        lock(&self.dispatch)
    }

    /// Applies one watcher event to the store and tells every subscriber what changed. Both
    /// happen under one lock, so a subscriber that reads the store after a notification sees
    /// at least that version. The event's object moves into the store: changes share it.
    fn handle(&self, event: Event<K::Watched>) {
        let mut dispatch = self.lock();
        let mut changes = Vec::new();
        let init_done = matches!(event, Event::InitDone);
        match event {
            Event::Apply(new) => {
                let new = Arc::new(K::from_watched(new));
                changes.push(match self.store.write().insert(new.clone()) {
                    Some(old) => Change::Updated { old, new },
                    None => Change::Added(new),
                });
            }
            Event::Delete(obj) => {
                let obj = K::from_watched(obj);
                let (ns, name) = obj.place();
                let stored = self.store.write().remove(ns, name);
                changes.push(Change::Deleted(stored.unwrap_or_else(|| Arc::new(obj))));
            }
            Event::Init => dispatch.relist = Some((Objects::default(), Vec::new())),
            Event::InitApply(new) => {
                let new = Arc::new(K::from_watched(new));
                let (ns, name) = new.place();
                let old = self.store.get(ns, name);
                if let Some((listed, pending)) = dispatch.relist.as_mut() {
                    match old {
                        None => pending.push(Change::Added(new.clone())),
                        Some(old) if old.version() != new.version() => {
                            pending.push(Change::Updated {
                                old,
                                new: new.clone(),
                            })
                        }
                        Some(_) => {}
                    }
                    listed.insert(new);
                }
            }
            Event::InitDone => {
                if let Some((listed, pending)) = dispatch.relist.take() {
                    changes = pending;
                    let mut objects = self.store.write();
                    for (ns, names) in &objects.by_namespace {
                        changes.extend(
                            names
                                .iter()
                                .filter(|named| !listed.contains(ns, named.0.place().1))
                                .map(|named| Change::Deleted(named.0.clone())),
                        );
                    }
                    *objects = listed;
                }
                if !*self.synced.borrow() {
                    changes.push(Change::Synced);
                }
            }
        }
        dispatch
            .handlers
            .retain(|h| changes.iter().all(|c| h.send(c.clone()).is_ok()));
        drop(dispatch);
        if init_done {
            self.synced.send_replace(true);
            // The list's response bodies and pages are garbage now that the store holds
            // the objects: give their pages back instead of keeping them for 10 s or more.
            crate::runtime::memory::release_unused();
        }
    }
}

/// Feeds a subscription to a controller's queue until shutdown, as client-go's event
/// handlers do: `on_change` decides what to enqueue; `synced` fires at the subscription's
/// `Synced`, after `on_change` has seen it, so workers can wait for it and find what the
/// handler made of the first list; the queue shuts down when the feed ends.
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
                on_change(Change::Synced, &queue);
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
    /// `--min-resync-period`; zero: no resync.
    min_resync_period: Duration,
    /// Streamed (gate `WatchListClient`, on by default) or listed in pages.
    initial_list: InitialList,
    /// Nothing is watched: each store holds what [`Informers::insert_listed`] put in.
    listed_only: bool,
    /// Whether the types that can be read in protobuf are (`--kube-api-content-type`).
    content_type: ContentType,
}

impl Informers {
    pub fn new(client: Client, metrics: Metrics, shutdown: CancellationToken) -> Self {
        Self {
            client,
            metrics,
            shutdown,
            started: Arc::default(),
            synced: Arc::default(),
            min_resync_period: Duration::ZERO,
            initial_list: InitialList::default(),
            listed_only: false,
            content_type: ContentType::default(),
        }
    }

    /// Informers that never watch (`kcm explain`'s one-time read): each type holds the
    /// objects [`Informers::insert_listed`] gave it, a type nobody listed is empty, and every
    /// store counts as synced. Controllers' code reads them as it reads watched ones.
    pub fn listed(client: Client, metrics: Metrics) -> Self {
        Self {
            listed_only: true,
            ..Self::new(client, metrics, CancellationToken::new())
        }
    }

    /// Puts listed objects into the store of `K` (of informers made by [`Informers::listed`]).
    pub fn insert_listed<K: Stored>(&self, objects: impl IntoIterator<Item = K::Watched>) {
        let informer = self.get::<K>();
        let mut store = informer.store.write();
        for object in objects {
            store.insert(Arc::new(K::from_watched(object)));
        }
    }

    /// Whether the informer of `K` was started (by a controller, or by a warm standby).
    pub fn is_started<K: Stored>(&self) -> bool {
        lock(&self.started).contains_key(&TypeId::of::<K>())
    }

    /// How informers started from now on read the types that can come in protobuf.
    pub fn with_content_type(mut self, content_type: ContentType) -> Self {
        self.content_type = content_type;
        self
    }

    /// How informers started from now on get their initial state (see
    /// [`super::listwatch`]); streamed unless the gate `WatchListClient` is off.
    pub fn with_initial_list(mut self, initial_list: InitialList) -> Self {
        self.initial_list = initial_list;
        self
    }

    /// How informers get their initial state, for the metadata watches controllers start.
    pub fn initial_list(&self) -> InitialList {
        self.initial_list
    }

    /// Informers started from now on resync (see [`Informer::resync`]) each at its own
    /// period, drawn once in [min, 2 x min) as kube-controller-manager's informer factory
    /// does, so they do not all replay at once.
    pub fn with_min_resync_period(mut self, min: Duration) -> Self {
        self.min_resync_period = min;
        self
    }

    /// The informer for `K` across all namespaces, started on first use. Every later call
    /// returns the same one: one watch per type for the whole process.
    pub fn get<K: Stored>(&self) -> Arc<Informer<K>> {
        let mut started = lock(&self.started);
        if let Some(existing) = started
            .get(&TypeId::of::<K>())
            .and_then(|a| a.clone().downcast::<Informer<K>>().ok())
        {
            return existing;
        }
        let informer = self.start::<K>();
        started.insert(TypeId::of::<K>(), informer.clone());
        informer
    }

    fn start<K: Stored>(&self) -> Arc<Informer<K>> {
        let resource = K::Watched::plural(&()).to_string();
        let (synced, synced_rx) = watch::channel(self.listed_only);
        let informer = Arc::new(Informer {
            store: Store::new(),
            dispatch: Mutex::new(Dispatch {
                handlers: Vec::new(),
                relist: None,
            }),
            synced,
            failing: std::sync::atomic::AtomicBool::new(false),
        });
        if self.listed_only {
            return informer;
        }
        self.export_sync(&resource, synced_rx.clone());
        lock(&self.synced).push((resource.clone(), synced_rx));
        let task_informer = informer.clone();
        let client = self.client.clone();
        let metrics = self.metrics.clone();
        let shutdown = self.shutdown.clone();
        let initial_list = self.initial_list;
        let wire = match self.content_type {
            ContentType::Protobuf => K::protobuf(),
            ContentType::Json => None,
        };
        tokio::spawn(async move {
            let api = Api::<K::Watched>::all(client);
            let stream = list_watch(api, resource.clone(), initial_list, wire).default_backoff();
            let mut stream = std::pin::pin!(stream);
            // Resolved once: a label lookup hashes and locks at every event.
            let store_objects = metrics.store_objects.with_label_values(&[&resource]);
            // Made once: a wait made per event registers with the token, under its lock.
            let mut cancelled = std::pin::pin!(shutdown.cancelled());
            loop {
                let event = tokio::select! {
                    biased;
                    () = &mut cancelled => break,
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
                        let count = i64::try_from(task_informer.store.len()).unwrap_or(i64::MAX);
                        store_objects.set(count);
                    }
                    Some(Err(err)) => {
                        task_informer
                            .failing
                            .store(true, std::sync::atomic::Ordering::SeqCst);
                        metrics.watch_errors.with_label_values(&[&resource]).inc();
                        reachability::watch_failed(&resource, &err);
                    }
                    None => break,
                }
            }
        });
        if !self.min_resync_period.is_zero() {
            let period = self.min_resync_period.mul_f64(1.0 + rand::random::<f64>());
            let weak = Arc::downgrade(&informer);
            let shutdown = self.shutdown.clone();
            tokio::spawn(async move {
                let mut ticks =
                    tokio::time::interval_at(tokio::time::Instant::now() + period, period);
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = ticks.tick() => {}
                    }
                    let Some(informer) = weak.upgrade() else {
                        break;
                    };
                    informer.resync();
                }
            });
        }
        informer
    }

    /// `kcm_store_synced` for `resource`: 0 now, 1 once its first list is through.
    fn export_sync(&self, resource: &str, mut synced: watch::Receiver<bool>) {
        let gauge = self.metrics.store_synced.with_label_values(&[resource]);
        gauge.set(0);
        tokio::spawn(async move {
            if synced.wait_for(|synced| *synced).await.is_ok() {
                gauge.set(1);
            }
        });
    }

    /// Resources whose informers have not completed their first list yet.
    pub fn unsynced(&self) -> Vec<String> {
        lock(&self.synced)
            .iter()
            .filter(|(_, rx)| !*rx.borrow())
            .map(|(name, _)| name.clone())
            .collect()
    }
}
