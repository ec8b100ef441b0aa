//! Object counts per namespace for any resource, from a metadata-only watch: what a quota's
//! `count/<resource>[.<group>]` needs, for built-in types and CRDs alike, without keeping the
//! objects themselves (upstream keeps a metadata informer per type).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::Event;
use kube::{Client, ResourceExt};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::listwatch::{InitialList, list_watch};
use crate::lock::lock;
use crate::runtime::connection::reachability;
use crate::runtime::metrics::Metrics;

/// A namespace whose count of `resource` may have changed; `None` when the first complete
/// list arrived, so every namespace's count is now known.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CountChange {
    pub resource: String,
    pub namespace: Option<String>,
}

#[derive(Default)]
struct Names {
    by_namespace: HashMap<String, HashSet<String>>,
    /// Names listed by a relist in progress.
    relist: Option<HashMap<String, HashSet<String>>>,
}

/// The live count of one resource, by namespace.
pub struct ObjectCounter {
    names: Mutex<Names>,
    synced: watch::Sender<bool>,
    stop: CancellationToken,
}

impl ObjectCounter {
    /// Starts counting `resource` (named as quota names it, e.g. `widgets.example.com`);
    /// every namespace whose count may have changed is sent on `changes`.
    pub fn start(
        client: Client,
        api_resource: &ApiResource,
        resource: String,
        metrics: Metrics,
        shutdown: &CancellationToken,
        changes: mpsc::UnboundedSender<CountChange>,
        initial_list: InitialList,
    ) -> Arc<Self> {
        let counter = Arc::new(Self {
            names: Mutex::default(),
            synced: watch::channel(false).0,
            stop: shutdown.child_token(),
        });
        let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, api_resource);
        let task_counter = counter.clone();
        tokio::spawn(async move {
            let stream = list_watch(api, resource.clone(), initial_list, None).default_backoff();
            let mut stream = std::pin::pin!(stream);
            // Made once: a wait made per event registers with the token, under its lock.
            let mut stopped = std::pin::pin!(task_counter.stop.cancelled());
            loop {
                let event = tokio::select! {
                    biased;
                    () = &mut stopped => break,
                    event = stream.next() => event,
                };
                match event {
                    Some(Ok(event)) => {
                        let first_list =
                            matches!(event, Event::InitDone) && !task_counter.is_synced();
                        for namespace in task_counter.apply(event) {
                            let _ = changes.send(CountChange {
                                resource: resource.clone(),
                                namespace: Some(namespace),
                            });
                        }
                        if first_list {
                            let _ = changes.send(CountChange {
                                resource: resource.clone(),
                                namespace: None,
                            });
                        }
                    }
                    Some(Err(err)) => {
                        metrics.watch_errors.with_label_values(&[&resource]).inc();
                        reachability::watch_failed(&resource, &err);
                    }
                    None => break,
                }
            }
        });
        counter
    }

    /// A counter whose first list is through and found `objects` (namespace, name), with no
    /// watch: for unit tests of what counts are used for.
    #[cfg(test)]
    pub(crate) fn listed(objects: &[(&str, &str)]) -> Arc<Self> {
        let mut names = Names::default();
        for (namespace, name) in objects {
            names
                .by_namespace
                .entry(namespace.to_string())
                .or_default()
                .insert(name.to_string());
        }
        Arc::new(Self {
            names: Mutex::new(names),
            synced: watch::channel(true).0,
            stop: CancellationToken::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Names> {
        lock(&self.names)
    }

    /// Applies one watch event; returns the namespaces whose count changed.
    fn apply<K: kube::Resource>(&self, event: Event<K>) -> Vec<String> {
        let place = |obj: &K| (obj.namespace().unwrap_or_default(), obj.name_any());
        let list_done = matches!(event, Event::InitDone);
        let mut names = self.lock();
        let changed = match event {
            Event::Apply(obj) => {
                let (ns, name) = place(&obj);
                let added = names
                    .by_namespace
                    .entry(ns.clone())
                    .or_default()
                    .insert(name);
                if added { vec![ns] } else { Vec::new() }
            }
            Event::Delete(obj) => {
                let (ns, name) = place(&obj);
                let removed = names
                    .by_namespace
                    .get_mut(&ns)
                    .is_some_and(|set| set.remove(&name));
                if removed { vec![ns] } else { Vec::new() }
            }
            Event::Init => {
                names.relist = Some(HashMap::new());
                Vec::new()
            }
            Event::InitApply(obj) => {
                let (ns, name) = place(&obj);
                if let Some(relist) = names.relist.as_mut() {
                    relist.entry(ns).or_default().insert(name);
                }
                Vec::new()
            }
            Event::InitDone => {
                let listed = names.relist.take().unwrap_or_default();
                let mut namespaces: HashSet<&String> = listed.keys().collect();
                namespaces.extend(names.by_namespace.keys());
                let changed: Vec<String> = namespaces
                    .into_iter()
                    .filter(|ns| listed.get(*ns) != names.by_namespace.get(*ns))
                    .cloned()
                    .collect();
                names.by_namespace = listed;
                changed
            }
        };
        drop(names);
        if list_done {
            self.synced.send_replace(true);
        }
        changed
    }

    /// Objects of this resource in `namespace`.
    pub fn count(&self, namespace: &str) -> usize {
        self.lock()
            .by_namespace
            .get(namespace)
            .map_or(0, HashSet::len)
    }

    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits for the first complete list.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|synced| *synced).await;
    }

    /// Stops the watch (the type was removed, or no quota counts it any more).
    pub fn stop(&self) {
        self.stop.cancel();
    }
}
