//! Telling kcm processes apart in kube-testserver's request log: each kcm client's user agent
//! ends `kcm/<identity>/<client>`, the identity being the process's leader-election one.

/// The process identity in a kcm user agent; `None` for other clients.
pub fn identity(user_agent: &str) -> Option<&str> {
    let (_, rest) = user_agent.split_once(" kcm/")?;
    Some(rest.rsplit_once('/')?.0)
}
