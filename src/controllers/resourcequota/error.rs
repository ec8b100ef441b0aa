//! Why a quota sync failed.

use crate::controllers::joined;

/// Why an evaluator cannot tell a namespace's usage yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    /// An object count whose watch has not listed everything yet.
    #[error("the count of {} is not known yet", .names.join(", "))]
    CountNotKnown { names: Vec<String> },
}

#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    #[error(transparent)]
    Usage(#[from] UsageError),
    #[error("{0}")]
    WriteStatus(#[source] kube::Error),
    /// Every failure of one sync (usage the status leaves out, and the write).
    #[error("{}", joined(.0))]
    Several(Vec<QuotaError>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_failures_are_all_reported() {
        let err = QuotaError::Several(vec![
            UsageError::CountNotKnown {
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
    }
}
