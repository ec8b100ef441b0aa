//! client-go's MutationCache over a shared store: an object this process has just written is
//! seen at once, before the watch delivers it, so a controller that retries quickly does not
//! act on the older cached copy (e.g. create a second ResourceClaim). Beyond client-go, a
//! delete is remembered too, so the copy the store still holds is not acted on again. An
//! entry lives until the store holds a newer version (or the delete), until its time to live
//! has passed, or until [`CAPACITY`] newer writes have pushed it out.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::{Resource, ResourceExt};
use lru::LruCache;

use crate::lock::lock;
use crate::runtime::watching::informer::Store;
use crate::runtime::watching::stored::{Stored, split_key};

type Key = (String, String);

/// How long a write is trusted over the store at most (upstream's mutation cache TTL); the
/// watch normally delivers it within moments.
pub const MUTATION_TTL: Duration = Duration::from_secs(3600);

/// The writes remembered at most, the least recently used dropped first (client-go's
/// mutation cache is an LRU of 100). An entry is only needed until its watch event arrives,
/// moments after the write, but one is retired only when its object is looked up again: without
/// a bound, every quota and PDB written once stayed in memory for the hour, a second copy of
/// each beside the store's.
pub const CAPACITY: NonZeroUsize = NonZeroUsize::new(100).unwrap();

struct Entry<K> {
    /// `None`: deleted.
    object: Option<Arc<K>>,
    version: u64,
    at: Instant,
}

pub struct MutationCache<K> {
    ttl: Duration,
    entries: Mutex<LruCache<Key, Entry<K>>>,
}

fn key_of<K: Resource>(obj: &K) -> Key {
    (obj.namespace().unwrap_or_default(), obj.name_any())
}

/// Resource versions are opaque, but the API server's are integers (client-go's
/// integer-resourceVersion mutation cache makes the same assumption); one that is not
/// counts as oldest, so the store wins.
fn version<K: Resource>(obj: &K) -> u64 {
    obj.resource_version()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

impl<K: Resource> MutationCache<K> {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::new(LruCache::new(CAPACITY)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<Key, Entry<K>>> {
        lock(&self.entries)
    }

    fn remember(&self, key: Key, entry: Entry<K>) {
        self.lock().put(key, entry);
    }

    /// Remembers what a write returned.
    pub fn mutated(&self, obj: K, now: Instant) {
        let key = key_of(&obj);
        let entry = Entry {
            version: version(&obj),
            object: Some(Arc::new(obj)),
            at: now,
        };
        self.remember(key, entry);
    }

    /// Remembers that `obj` (the version last seen) was deleted.
    pub fn deleted(&self, obj: &K, now: Instant) {
        let entry = Entry {
            object: None,
            version: version(obj),
            at: now,
        };
        self.remember(key_of(obj), entry);
    }

    /// Drops what is remembered of an object the store saw deleted.
    pub fn forget(&self, namespace: &str, name: &str) {
        self.lock().pop(&(namespace.to_string(), name.to_string()));
    }

    /// The newer of the stored object and the remembered write of the same name.
    pub fn newest(
        &self,
        namespace: &str,
        name: &str,
        stored: Option<Arc<K>>,
        now: Instant,
    ) -> Option<Arc<K>> {
        let key = (namespace.to_string(), name.to_string());
        let mut entries = self.lock();
        let Some(entry) = entries.get(&key) else {
            return stored;
        };
        let expired = now.duration_since(entry.at) >= self.ttl;
        let store_caught_up = match (&stored, &entry.object) {
            (Some(stored), Some(_)) => version(stored.as_ref()) >= entry.version,
            // A delete is superseded only by a newer object of the same name.
            (Some(stored), None) => version(stored.as_ref()) > entry.version,
            (None, _) => false,
        };
        if expired || store_caught_up {
            entries.pop(&key);
            return stored;
        }
        entry.object.clone()
    }

    /// Whether `stored`, just delivered by the watch, is this process's own last write of its
    /// name coming back (the same resourceVersion). The store has then caught up, so the
    /// entry is retired.
    pub fn echoed(&self, stored: &K) -> bool {
        let key = key_of(stored);
        let mut entries = self.lock();
        let echo = entries
            .peek(&key)
            .is_some_and(|e| e.object.is_some() && e.version != 0 && e.version == version(stored));
        if echo {
            entries.pop(&key);
        }
        echo
    }

    /// [`MutationCache::newest`] of what `store` holds under that name.
    pub fn newest_in(
        &self,
        store: &Store<K>,
        namespace: &str,
        name: &str,
        now: Instant,
    ) -> Option<Arc<K>>
    where
        K: Stored,
    {
        self.newest(namespace, name, store.get(namespace, name), now)
    }

    /// [`MutationCache::newest_in`] under a queue's `namespace/name` key, as of now.
    pub fn newest_by_key(&self, store: &Store<K>, key: &str) -> Option<Arc<K>>
    where
        K: Stored,
    {
        let (namespace, name) = split_key(key);
        self.newest_in(store, namespace, name, Instant::now())
    }

    /// The remembered writes in `namespace` matching `filter`: objects a store lookup by
    /// index would miss because the watch has not delivered them yet.
    pub fn in_namespace(
        &self,
        namespace: &str,
        now: Instant,
        filter: impl Fn(&K) -> bool,
    ) -> Vec<Arc<K>> {
        self.lock()
            .iter()
            .filter(|((ns, _), e)| ns == namespace && now.duration_since(e.at) < self.ttl)
            .filter_map(|(_, e)| e.object.clone())
            .filter(|obj| filter(obj))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const HOUR: Duration = Duration::from_secs(3600);

    fn object(name: &str, rv: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn rv(obj: Option<Arc<ConfigMap>>) -> Option<String> {
        obj.and_then(|o| o.resource_version())
    }

    #[test]
    fn a_write_is_seen_before_the_store_has_it() {
        let cache = MutationCache::new(HOUR);
        let now = Instant::now();
        cache.mutated(object("a", "5"), now);
        assert_eq!(rv(cache.newest("ns", "a", None, now)), Some("5".into()));
        assert_eq!(rv(cache.newest("other", "a", None, now)), None);
        assert_eq!(cache.in_namespace("ns", now, |_| true).len(), 1);
        assert!(cache.in_namespace("ns", now, |_| false).is_empty());
    }

    #[test]
    fn the_newer_version_wins_and_a_caught_up_store_retires_the_entry() {
        let cache = MutationCache::new(HOUR);
        let now = Instant::now();
        cache.mutated(object("a", "5"), now);
        let older = Some(Arc::new(object("a", "4")));
        assert_eq!(rv(cache.newest("ns", "a", older, now)), Some("5".into()));
        let caught_up = Some(Arc::new(object("a", "5")));
        assert_eq!(
            rv(cache.newest("ns", "a", caught_up, now)),
            Some("5".into())
        );
        assert!(
            cache.in_namespace("ns", now, |_| true).is_empty(),
            "entry retired once the store caught up"
        );
        let newer = Some(Arc::new(object("a", "9")));
        assert_eq!(rv(cache.newest("ns", "a", newer, now)), Some("9".into()));
    }

    #[test]
    fn only_the_version_written_is_its_echo_and_the_echo_retires_the_entry() {
        let cache = MutationCache::new(HOUR);
        let now = Instant::now();
        cache.mutated(object("a", "5"), now);
        assert!(!cache.echoed(&object("a", "4")), "an older version");
        assert!(
            !cache.echoed(&object("a", "6")),
            "someone else's newer write"
        );
        assert!(!cache.echoed(&object("b", "5")), "another object");
        assert!(cache.echoed(&object("a", "5")));
        assert!(
            !cache.echoed(&object("a", "5")),
            "retired by the first echo"
        );
        assert!(cache.in_namespace("ns", now, |_| true).is_empty());
        cache.deleted(&object("c", "7"), now);
        assert!(!cache.echoed(&object("c", "7")), "a delete has no echo");
        cache.mutated(object("d", "not-a-number"), now);
        assert!(
            !cache.echoed(&object("d", "not-a-number")),
            "no comparable version"
        );
    }

    #[test]
    fn a_delete_hides_the_stored_copy_until_a_newer_object_appears() {
        let cache = MutationCache::new(HOUR);
        let now = Instant::now();
        let gone = object("a", "5");
        cache.deleted(&gone, now);
        let stale = Some(Arc::new(gone.clone()));
        assert_eq!(rv(cache.newest("ns", "a", stale, now)), None);
        assert!(cache.in_namespace("ns", now, |_| true).is_empty());
        let recreated = Some(Arc::new(object("a", "8")));
        assert_eq!(
            rv(cache.newest("ns", "a", recreated, now)),
            Some("8".into())
        );
        cache.deleted(&gone, now);
        cache.forget("ns", "a");
        let stale = Some(Arc::new(gone));
        assert_eq!(rv(cache.newest("ns", "a", stale, now)), Some("5".into()));
    }

    #[test]
    fn at_most_capacity_writes_are_remembered_the_least_recent_dropped_first() {
        let cache = MutationCache::new(HOUR);
        let now = Instant::now();
        let written = CAPACITY.get() + 1;
        for i in 0..written {
            cache.mutated(object(&format!("o{i}"), "5"), now);
        }
        assert_eq!(
            cache.in_namespace("ns", now, |_| true).len(),
            CAPACITY.get()
        );
        assert_eq!(rv(cache.newest("ns", "o0", None, now)), None, "pushed out");
        let last = format!("o{}", written - 1);
        assert_eq!(rv(cache.newest("ns", &last, None, now)), Some("5".into()));
    }

    #[test]
    fn entries_expire_after_their_time_to_live() {
        let cache = MutationCache::new(HOUR);
        let then = Instant::now();
        cache.mutated(object("a", "5"), then);
        let later = then + HOUR;
        assert_eq!(rv(cache.newest("ns", "a", None, later)), None);
        assert!(cache.in_namespace("ns", later, |_| true).is_empty());
        let stale = Some(Arc::new(object("a", "3")));
        cache.mutated(object("b", "5"), then);
        assert_eq!(rv(cache.newest("ns", "b", stale, later)), Some("3".into()));
    }
}
