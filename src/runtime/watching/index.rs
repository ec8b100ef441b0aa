//! A secondary index over a shared store (client-go's `Indexer.ByIndex`): objects by values
//! derived from them — pods by the claims and templates they use, claims by their owner —
//! kept by the controller that needs it from its own change feed, so a lookup does not scan
//! a namespace.

use crate::lock::lock;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

#[derive(Default)]
pub struct Index {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Index value → keys of the objects that have it.
    by_value: HashMap<String, HashSet<String>>,
    /// Object key → its index values, to undo them on the next update.
    values_of: HashMap<String, Vec<String>>,
}

impl Index {
    /// Records that object `key` now has `values` (none: it left the index).
    pub fn set(&self, key: &str, mut values: Vec<String>) {
        values.sort();
        values.dedup();
        let mut inner = lock(&self.inner);
        let old = if values.is_empty() {
            inner.values_of.remove(key)
        } else {
            inner.values_of.insert(key.to_string(), values.clone())
        };
        for value in old.unwrap_or_default() {
            if let Some(keys) = inner.by_value.get_mut(&value) {
                keys.remove(key);
                if keys.is_empty() {
                    inner.by_value.remove(&value);
                }
            }
        }
        for value in values {
            inner
                .by_value
                .entry(value)
                .or_default()
                .insert(key.to_string());
        }
    }

    /// The keys of the objects that have `value`, sorted.
    pub fn get(&self, value: &str) -> Vec<String> {
        let inner = lock(&self.inner);
        let mut keys: Vec<String> = inner
            .by_value
            .get(value)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        keys
    }

    /// How many index values are held.
    pub fn len(&self) -> usize {
        lock(&self.inner).by_value.len()
    }

    /// No object has a value: a change to one that has none either has nothing to undo.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn objects_are_found_by_each_of_their_values() {
        let index = Index::default();
        index.set("ns/a", strings(&["ns/claim-1", "ns/claim-2"]));
        index.set("ns/b", strings(&["ns/claim-2"]));
        assert_eq!(index.get("ns/claim-1"), strings(&["ns/a"]));
        assert_eq!(index.get("ns/claim-2"), strings(&["ns/a", "ns/b"]));
        assert!(index.get("ns/claim-3").is_empty());
    }

    #[test]
    fn an_update_replaces_the_old_values_and_an_empty_one_removes_the_object() {
        let index = Index::default();
        index.set("ns/a", strings(&["x", "y"]));
        index.set("ns/a", strings(&["y", "z", "z"]));
        assert!(index.get("x").is_empty());
        assert_eq!(index.get("z"), strings(&["ns/a"]));
        index.set("ns/a", Vec::new());
        assert!(index.get("y").is_empty());
        assert!(index.is_empty(), "no value is left behind");
    }
}
