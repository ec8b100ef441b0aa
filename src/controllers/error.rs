//! Why a sync or a controller failed. Each controller has its enum (its own concerns, with the
//! request error kept as the `#[source]`); [`ControllerError`] gathers those of the syncs that
//! return it, and the failures of a controller's run. Workers log a sync's error and retry the
//! key with backoff. `metric_label` names the kind of failure
//! in a few fixed words (in the manner of kube-rs's controller-rs), fit for a metric label.

use std::fmt::Display;

use super::disruption::DisruptionError;
use super::resourceclaim::ClaimError;
use super::resourcequota::QuotaError;

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Quota(#[from] QuotaError),
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error(transparent)]
    Disruption(#[from] DisruptionError),
    #[error("registering metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// One of the controller's tasks panicked or was cancelled.
    #[error("controller task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl ControllerError {
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Quota(err) => err.metric_label(),
            Self::Claim(err) => err.metric_label(),
            Self::Disruption(err) => err.metric_label(),
            Self::Metrics(_) => "metrics",
            Self::Task(_) => "task",
        }
    }
}

/// The text of several failures of one sync, which are all reported: `; `-joined.
pub fn joined<E: Display>(errors: &[E]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
