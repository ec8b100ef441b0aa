//! The ttl controller's effects: the patch that brings one node's TTL annotation to the
//! step's value, with bad input reported.

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};

use super::Ttl;
use super::plan::{Decision, TTL_ANNOTATION, annotation_patch, decide};
use crate::runtime::connection::errors::is_not_found;

impl Ttl {
    /// Sets the node's TTL annotation when it differs from the step's TTL.
    pub(super) async fn reconcile(&self, name: String) -> Result<(), kube::Error> {
        let Some(node) = self.nodes.get("", &name) else {
            return Ok(());
        };
        let (desired, divergence) = {
            let state = self.state();
            (state.desired_ttl(), state.divergence())
        };
        let current = node.annotations().get(TTL_ANNOTATION).map(String::as_str);
        let Decision::Set { value, unparsable } = decide(current, desired) else {
            return Ok(());
        };
        if let Some(bad) = unparsable {
            let problem = format!(
                "Could not convert the value {bad:?} with annotation key for the node; overwriting it"
            );
            self.bad.report(
                &name,
                &node.resource_version().unwrap_or_default(),
                "invalid-ttl-annotation",
                &problem,
            );
        }
        let patch = Patch::Strategic(annotation_patch(&value));
        match self
            .writer
            .because(divergence)
            .patch_unread(&self.api, &node, &PatchParams::default(), &patch)
            .await
        {
            Ok(()) => {
                tracing::debug!(node = name, ttl = desired, "Changed ttl annotation");
                Ok(())
            }
            // Deleted since the store saw it: nothing left to do.
            Err(err) if is_not_found(&err) => Ok(()),
            Err(err) => {
                tracing::warn!(node = name, error = %err, "Failed to change ttl annotation for node");
                Err(err)
            }
        }
    }
}
