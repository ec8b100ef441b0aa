//! Bad input is logged and counted once per object version, not on every sync of it: a quota
//! resynced every few minutes, or a node updated every few seconds, must not flood the log
//! with the same complaint. A new version of the object (a new resourceVersion) is reported
//! again.

use std::num::NonZeroUsize;
use std::sync::Mutex;

use lru::LruCache;

use super::metrics::Metrics;
use crate::lock::lock;

/// How many (object version, problem) pairs are remembered.
const REMEMBERED: NonZeroUsize = match NonZeroUsize::new(4096) {
    Some(n) => n,
    None => unreachable!(),
};

pub struct BadInput {
    controller: &'static str,
    metrics: Metrics,
    seen: Mutex<LruCache<(String, String, String), ()>>,
}

impl BadInput {
    pub fn new(controller: &'static str, metrics: Metrics) -> Self {
        Self {
            controller,
            metrics,
            seen: Mutex::new(LruCache::new(REMEMBERED)),
        }
    }

    /// Logs `problem` about `object` (e.g. `namespace/name`) at `version` and counts it under
    /// `reason`, unless this exact report was made already. Returns whether it was reported.
    pub fn report(&self, object: &str, version: &str, reason: &str, problem: &str) -> bool {
        let key = (object.to_string(), version.to_string(), problem.to_string());
        let fresh = lock(&self.seen).put(key, ()).is_none();
        if fresh {
            self.metrics
                .skipped
                .with_label_values(&[self.controller, reason])
                .inc();
            tracing::warn!(
                controller = self.controller,
                object,
                version,
                reason,
                problem,
                "bad input skipped"
            );
        }
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_problem_is_reported_once_per_object_version() {
        let metrics = Metrics::new().unwrap();
        let bad = BadInput::new("test", metrics.clone());
        assert!(bad.report("ns/q", "1", "invalid-quantity", "cpu: abc"));
        assert!(
            !bad.report("ns/q", "1", "invalid-quantity", "cpu: abc"),
            "same version: silent"
        );
        assert!(
            bad.report("ns/q", "1", "invalid-quantity", "memory: x"),
            "another problem"
        );
        assert!(
            bad.report("ns/q", "2", "invalid-quantity", "cpu: abc"),
            "new version: reported again"
        );
        assert_eq!(
            metrics
                .skipped
                .with_label_values(&["test", "invalid-quantity"])
                .get(),
            3
        );
    }
}
