//! A process-wide string interner: resource names (`cpu`, `memory`, ...) recur in several
//! resource lists of every pod, so each stored pod would otherwise hold its own heap copy of
//! each (a 32-byte allocation for a 3-byte name). Interned, every pod shares one `Arc<str>`.
//!
//! Hand-written because the job is a dozen lines over `HashSet<Arc<str>>`, and it must stay
//! bounded under hostile input (names no pod keeps any more are dropped): strings only the
//! interner still holds are pruned whenever the set has doubled since the last prune.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The set never shrinks below this many entries' worth of prune threshold.
const MIN_PRUNE_AT: usize = 1024;

struct Interner {
    strings: HashSet<Arc<str>>,
    prune_at: usize,
}

static INTERNER: Mutex<Option<Interner>> = Mutex::new(None);

/// The shared copy of `s`.
pub fn intern(s: &str) -> Arc<str> {
    let mut guard = INTERNER.lock().unwrap_or_else(|p| p.into_inner());
    let interner = guard.get_or_insert_with(|| Interner {
        strings: HashSet::new(),
        prune_at: MIN_PRUNE_AT,
    });
    if let Some(shared) = interner.strings.get(s) {
        return shared.clone();
    }
    if interner.strings.len() >= interner.prune_at {
        interner.strings.retain(|kept| Arc::strong_count(kept) > 1);
        interner.prune_at = (interner.strings.len() * 2).max(MIN_PRUNE_AT);
    }
    let shared: Arc<str> = Arc::from(s);
    interner.strings.insert(shared.clone());
    shared
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
    fn strings_nobody_holds_are_pruned() {
        for i in 0..(4 * MIN_PRUNE_AT) {
            intern(&format!("interned-test-dropped-{i}"));
        }
        let kept = intern("interned-test-kept");
        for i in 0..(4 * MIN_PRUNE_AT) {
            intern(&format!("interned-test-more-{i}"));
        }
        let len = INTERNER
            .lock()
            .unwrap()
            .as_ref()
            .map_or(0, |i| i.strings.len());
        assert!(len <= 2 * MIN_PRUNE_AT + 64, "bounded: {len}");
        assert!(
            Arc::ptr_eq(&kept, &intern("interned-test-kept")),
            "a held string survives"
        );
    }
}
