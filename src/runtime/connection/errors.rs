//! What a failed request says: client-go's `apierrors` predicates on the API server's answer,
//! which readers and writers alike act on, and the text upstream shows for it.

/// client-go's `apierrors.IsNotFound`: the API server answered 404.
pub fn is_not_found(err: &kube::Error) -> bool {
    api_code(err) == Some(404)
}

/// Whether the API server may answer differently later: no answer (connection, timeout), 429
/// or a 5xx. Such a failure is retried, never taken as the answer.
pub fn is_transient(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        _ => true,
    }
}

/// client-go's `apierrors.IsConflict`: the API server answered 409 (a stale resourceVersion,
/// or an object that already exists).
pub fn is_conflict(err: &kube::Error) -> bool {
    api_code(err) == Some(409)
}

/// client-go's `apierrors.IsForbidden`: the API server answered 403.
pub fn is_forbidden(err: &kube::Error) -> bool {
    api_code(err) == Some(403)
}

fn api_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// What client-go's `err.Error()` shows for a failed request: the API server's message, so
/// events and logs read as upstream's.
pub fn error_text(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// The API server's answer `code` with `message`, as a unit test meets it.
#[cfg(test)]
pub fn api_error(code: u16, message: &str) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure(message, "Reason")
            .with_code(code)
            .boxed(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_are_told_apart_by_code_only() {
        assert!(is_not_found(&api_error(404, "pods \"a\" not found")));
        assert!(!is_not_found(&api_error(409, "conflict")));
        assert!(is_conflict(&api_error(409, "the object has been modified")));
        assert!(!is_conflict(&api_error(500, "boom")));
        let not_api = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert!(!is_not_found(&not_api) && !is_conflict(&not_api));
    }
}
