//! Why kcm failed: at startup (configuration, clients, listeners), or later (a lost lease, a
//! controller).

use crate::runtime::connection::client::ClientError;
use crate::serving;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error(transparent)]
    Serving(#[from] serving::ServingError),
    #[error("leader election: {0}")]
    Leader(String),
    #[error("controller {0} failed: {1}")]
    Controller(&'static str, String),
}

impl AppError {
    /// Whether kcm failed before it ran anything (configuration, clients, listener), as
    /// opposed to losing its lease or a controller later.
    pub fn at_startup(&self) -> bool {
        matches!(self, Self::Client(_) | Self::Metrics(_) | Self::Serving(_))
    }
}
