//! Process-wide interners: values most stored pods share are held once. Resource names
//! (`cpu`, `memory`, ...) recur in every pod, and the pods of one workload have equal labels,
//! owner references and containers; without interning each stored pod would hold its own heap
//! copy of each (a 32-byte allocation for a 3-byte name, hundreds for a container list).
//! Interned, every pod shares one `Arc`.
//!
//! Hand-written because the job is a dozen lines over `HashSet<Arc<T>>`, and it must stay
//! bounded under hostile input (values no pod keeps any more are dropped): values only the
//! interner still holds are pruned whenever the set has doubled since the last prune.

use crate::lock::lock;
use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::Hash;
use std::sync::{Arc, LazyLock, Mutex};

/// The set never shrinks below this many entries' worth of prune threshold.
const MIN_PRUNE_AT: usize = 1024;

/// One set of shared values of type `T` (a `static`, one per type interned).
pub(crate) struct Interner<T: ?Sized> {
    shared: Mutex<Option<Shared<T>>>,
}

struct Shared<T: ?Sized> {
    /// foldhash, seeded per process: it hashes a container list several times faster than
    /// std's SipHash and stays randomly seeded against crafted collisions.
    values: HashSet<Arc<T>, foldhash::fast::RandomState>,
    prune_at: usize,
}

impl<T: ?Sized + Hash + Eq> Interner<T> {
    pub(crate) const fn new() -> Self {
        Self {
            shared: Mutex::new(None),
        }
    }

    /// The shared copy of `value` (`value` itself, made shared, when it is the first).
    pub(crate) fn intern<V: Borrow<T> + Into<Arc<T>>>(&self, value: V) -> Arc<T> {
        let mut guard = lock(&self.shared);
        let shared = guard.get_or_insert_with(|| Shared {
            values: HashSet::default(),
            prune_at: MIN_PRUNE_AT,
        });
        if let Some(kept) = shared.values.get(value.borrow()) {
            return kept.clone();
        }
        if shared.values.len() >= shared.prune_at {
            shared.values.retain(|kept| Arc::strong_count(kept) > 1);
            shared.prune_at = (shared.values.len() * 2).max(MIN_PRUNE_AT);
        }
        let value: Arc<T> = value.into();
        shared.values.insert(value.clone());
        value
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        let guard = lock(&self.shared);
        guard.as_ref().map_or(0, |s| s.values.len())
    }
}

static STRINGS: Interner<str> = Interner::new();

/// Texts nearly every pod holds: condition types and statuses, phases, QoS classes and the
/// usual resource names. Several of them come in every pod event, and a fixed table answers
/// them without the set's lock or a probe of its (mostly uncached) memory.
const WELL_KNOWN: [&str; 17] = [
    "True",
    "False",
    "Unknown",
    "Ready",
    "DisruptionTarget",
    "PodResizePending",
    "Pending",
    "Running",
    "Succeeded",
    "Failed",
    "Guaranteed",
    "Burstable",
    "BestEffort",
    "cpu",
    "memory",
    "ephemeral-storage",
    "pods",
];

/// The shared copy of `s`.
pub fn intern(s: &str) -> Arc<str> {
    static TABLE: LazyLock<[Arc<str>; WELL_KNOWN.len()]> =
        LazyLock::new(|| WELL_KNOWN.map(Arc::from));
    match WELL_KNOWN.iter().position(|known| *known == s) {
        Some(i) => TABLE[i].clone(),
        None => STRINGS.intern(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_one_allocation() {
        let a = intern("interned-test-cpu");
        let b = intern(&String::from("interned-test-cpu"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &intern("interned-test-memory")));
    }

    #[test]
    fn well_known_strings_are_shared_too() {
        for text in WELL_KNOWN {
            let a = intern(text);
            assert!(Arc::ptr_eq(&a, &intern(&String::from(text))), "{text}");
            assert_eq!(&*a, text);
        }
        assert!(!Arc::ptr_eq(&intern("True"), &intern("False")));
    }

    #[test]
    fn equal_lists_share_one_allocation() {
        static LISTS: Interner<[u32]> = Interner::new();
        let a = LISTS.intern(vec![1, 2]);
        assert!(Arc::ptr_eq(&a, &LISTS.intern(vec![1, 2])));
        assert!(!Arc::ptr_eq(&a, &LISTS.intern(vec![2, 1])));
    }

    #[test]
    fn values_nobody_holds_are_pruned() {
        for i in 0..(4 * MIN_PRUNE_AT) {
            intern(&format!("interned-test-dropped-{i}"));
        }
        let kept = intern("interned-test-kept");
        for i in 0..(4 * MIN_PRUNE_AT) {
            intern(&format!("interned-test-more-{i}"));
        }
        let len = STRINGS.len();
        assert!(len <= 2 * MIN_PRUNE_AT + 64, "bounded: {len}");
        assert!(
            Arc::ptr_eq(&kept, &intern("interned-test-kept")),
            "a held string survives"
        );
    }
}
