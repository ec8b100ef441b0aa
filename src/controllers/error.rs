//! Why a sync or a controller failed. Each controller has its enum (its own concerns, with the
//! request error kept as the `#[source]`); [`ControllerError`] gathers those of the syncs that
//! return it, and the failures of a controller's run. Workers log a sync's error and retry the
//! key with backoff. `metric_label` names the kind of failure
//! in a few fixed words (in the manner of kube-rs's controller-rs), fit for a metric label.

use std::fmt::Display;

use super::disruption::DisruptionError;
use super::resourceclaim::ClaimError;
use super::resourcequota::QuotaError;
use crate::runtime::controller::TaskError;

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
    #[error(transparent)]
    Task(#[from] TaskError),
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

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;
    use crate::controllers::resourceclaim::claims::ResolveError;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Status::failure(message, "Reason").with_code(code).boxed())
    }

    #[test]
    fn a_pod_claim_failure_reads_as_upstream_and_is_labelled_by_its_cause() {
        let create = ClaimError::PodClaim {
            pod: "ns/p".into(),
            pod_claim: "gpu".into(),
            source: Box::new(ClaimError::Create(api_error(403, "quota exceeded"))),
        };
        let missing = ClaimError::PodClaim {
            pod: "ns/p".into(),
            pod_claim: "fpga".into(),
            source: Box::new(ClaimError::TemplateNotFound("t".into())),
        };
        let both = ControllerError::from(ClaimError::Several(vec![create, missing]));
        assert_eq!(
            both.to_string(),
            "pod ns/p, PodResourceClaim gpu: create ResourceClaim : quota exceeded; \
             pod ns/p, PodResourceClaim fpga: resource claim template \"t\": \
             resourceclaimtemplate.resource.k8s.io \"t\" not found"
        );
        assert_eq!(both.metric_label(), "create_claim");
        let unresolved = ClaimError::from(ResolveError::NotCreatedYet { pod: "ns/p".into() });
        assert_eq!(
            unresolved.to_string(),
            "pod \"ns/p\": ResourceClaim not created yet"
        );
        assert_eq!(unresolved.metric_label(), "unresolved_claim");
        // The request error stays reachable as the cause.
        let create = ClaimError::Create(api_error(500, "boom"));
        let source = std::error::Error::source(&create);
        assert!(source.is_some_and(|s| s.is::<kube::Error>()));
    }

    #[test]
    fn only_a_conflicting_status_write_skips_the_fail_safe() {
        let conflict = DisruptionError::WriteStatus(api_error(409, "modified"));
        assert!(conflict.is_conflict());
        assert_eq!(conflict.to_string(), "modified");
        assert_eq!(ControllerError::from(conflict).metric_label(), "conflict");
        let failed = DisruptionError::WriteStatus(api_error(500, "etcd down"));
        assert!(!failed.is_conflict());
        assert_eq!(failed.metric_label(), "write_status");
        let listing = DisruptionError::ListPods(api_error(500, "etcd down"));
        assert!(!listing.is_conflict());
        assert_eq!(listing.to_string(), "Failed to get pods: etcd down");
    }

    #[test]
    fn quota_failures_are_all_reported() {
        let err = QuotaError::Several(vec![
            crate::controllers::resourcequota::UsageError::CountNotKnown {
                names: vec!["count/secrets".into(), "count/configmaps".into()],
            }
            .into(),
            QuotaError::WriteStatus(kube::Error::LinesCodecMaxLineLengthExceeded),
        ]);
        assert_eq!(
            err.to_string(),
            format!(
                "the count of count/secrets, count/configmaps is not known yet; {}",
                kube::Error::LinesCodecMaxLineLengthExceeded
            )
        );
        assert_eq!(err.metric_label(), "count_not_known");
    }
}
