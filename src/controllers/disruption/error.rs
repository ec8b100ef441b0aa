//! Why a PDB sync failed. The text of a failure to compute the status is upstream's, since
//! it becomes the fail-safe condition's message and an event's.

use super::plan::PlanError;
use crate::runtime::connection::errors::{error_text, is_conflict};

#[derive(Debug, thiserror::Error)]
pub enum DisruptionError {
    /// The status cannot be computed: the fail-safe status is written.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Listing the pods from the API server (while the pod store is failing).
    #[error("Failed to get pods: {}", error_text(.0))]
    ListPods(#[source] kube::Error),
    /// Writing the PDB's status; a conflict is retried as is, without the fail-safe status.
    #[error("{}", error_text(.0))]
    WriteStatus(#[source] kube::Error),
    /// Writing the fail-safe status after another failure.
    #[error("{0}")]
    FailSafe(#[source] kube::Error),
    /// Reading or writing a pod whose stale DisruptionTarget condition is being cleared.
    #[error(
        "error syncing Pod {pod} to clear DisruptionTarget condition, requeueing: {}",
        error_text(.source)
    )]
    ClearCondition {
        pod: String,
        #[source]
        source: kube::Error,
    },
}

impl DisruptionError {
    /// A write that lost to a concurrent change: no fail-safe status, just a retry.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::WriteStatus(err) if is_conflict(err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::connection::errors::api_error;

    #[test]
    fn only_a_conflicting_status_write_skips_the_fail_safe() {
        let conflict = DisruptionError::WriteStatus(api_error(409, "modified"));
        assert!(conflict.is_conflict());
        assert_eq!(conflict.to_string(), "modified");
        let failed = DisruptionError::WriteStatus(api_error(500, "etcd down"));
        assert!(!failed.is_conflict());
        let listing = DisruptionError::ListPods(api_error(500, "etcd down"));
        assert!(!listing.is_conflict());
        assert_eq!(listing.to_string(), "Failed to get pods: etcd down");
    }
}
