//! The time controllers decide by. Injected, so rules measured in minutes (PDB disrupted-pod
//! expiry, stale DisruptionTarget conditions) are tested without waiting.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The wall clock.
pub fn system() -> Clock {
    Arc::new(Timestamp::now)
}
