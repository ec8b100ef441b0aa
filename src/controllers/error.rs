//! Why a sync or a controller failed. Each controller has its own error enum (its own
//! concerns, with the request error kept as the `#[source]`); a sync or a run returns it as a
//! [`ControllerError`], which knows no controller. Workers log a sync's error and retry the key
//! with backoff; a run's error ends kcm.

use std::error::Error;
use std::fmt::{self, Debug, Display};

/// A controller's failure, of whatever type: a controller's own error, a task that panicked
/// or was cancelled, metrics that could not be registered. It reads as that failure.
pub struct ControllerError(Box<dyn Error + Send + Sync>);

/// Every error converts, so `?` takes a controller's own errors as they are; for that reason
/// `ControllerError` is no `Error` itself (it would convert into itself).
impl<E: Error + Send + Sync + 'static> From<E> for ControllerError {
    fn from(failure: E) -> Self {
        Self(Box::new(failure))
    }
}

impl Display for ControllerError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        Display::fmt(&self.0, formatter)
    }
}

impl Debug for ControllerError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        Debug::fmt(&self.0, formatter)
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
    use super::*;

    #[test]
    fn a_failure_reads_as_itself_and_several_are_joined() {
        let failure = ControllerError::from(std::io::Error::other("etcd down"));
        assert_eq!(failure.to_string(), "etcd down");
        let several = [std::io::Error::other("a"), std::io::Error::other("b")];
        assert_eq!(joined(&several), "a; b");
    }
}
