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
