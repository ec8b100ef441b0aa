//! Why a storage version garbage collection failed.

use crate::controllers::joined;

#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// Updating or deleting one StorageVersion of several.
    #[error("{name}: {source}")]
    StorageVersion {
        name: String,
        #[source]
        source: Box<GcError>,
    },
    #[error("{}", joined(.0))]
    Several(Vec<GcError>),
}

impl GcError {
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Api(_) => "api",
            Self::StorageVersion { source, .. } => source.metric_label(),
            Self::Several(all) => all.first().map_or("unknown", Self::metric_label),
        }
    }
}
