//! The storage-version garbage collector's effects: each lane's sync looks up the identity
//! leases on the API server, as upstream does (not in the store), and writes the
//! StorageVersion's outcome.

use std::collections::HashSet;

use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};

use super::plan::{Outcome, collect, entries, has_identity_label};
use super::{Gc, GcError};
use crate::k8s::validation::is_dns1123_subdomain;

impl Gc {
    /// A deleted identity lease: if it is really gone, drop its entries everywhere. The list
    /// comes from the API server, not the store, as upstream.
    pub(super) async fn lease_deleted(&self, name: String) -> Result<(), GcError> {
        if self.leases.get_opt(&name).await?.is_some() {
            return Ok(());
        }
        let all = self.storage_versions.list(&ListParams::default()).await?;
        let mut errors = Vec::new();
        for sv in &all.items {
            if let Err(err) = self.apply(sv, collect(sv, |id| id == name, &now())).await {
                errors.push(GcError::StorageVersion {
                    name: sv.name_any(),
                    source: Box::new(err),
                });
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(GcError::Several(errors))
        }
    }

    /// A StorageVersion that may name dead servers: each entry's lease is looked up live; any
    /// error, a missing lease or a missing identity label makes the entry invalid (upstream is
    /// that strict).
    pub(super) async fn storage_version_changed(&self, name: String) -> Result<(), GcError> {
        let Some(sv) = self.storage_versions.get_opt(&name).await? else {
            return Ok(());
        };
        let mut dead = HashSet::new();
        for entry in entries(&sv) {
            // An ID no lease can have (lease names are DNS subdomains) is dead without asking:
            // upstream's Get finds nothing for it, whereas kcm's request path would take `a?b`
            // for lease `a`, and `a/b` for a subresource.
            let alive = is_dns1123_subdomain(&entry.api_server_id)
                && matches!(self.leases.get_opt(&entry.api_server_id).await, Ok(Some(lease)) if has_identity_label(&lease));
            if !alive {
                dead.insert(entry.api_server_id.clone());
            }
        }
        self.apply(&sv, collect(&sv, |id| dead.contains(id), &now()))
            .await
    }

    async fn apply(&self, sv: &StorageVersion, outcome: Outcome) -> Result<(), GcError> {
        match outcome {
            Outcome::Keep => Ok(()),
            Outcome::Delete => {
                tracing::debug!(
                    storage_version = sv.name_any(),
                    "deleting StorageVersion: no API server left"
                );
                self.writer
                    .delete(&self.storage_versions, sv, &DeleteParams::default())
                    .await
                    .map_err(GcError::from)
            }
            Outcome::UpdateStatus(updated) => self
                .writer
                .replace_status(&self.storage_versions, sv, *updated)
                .await
                .map(|_| ())
                .map_err(GcError::from),
        }
    }
}

fn now() -> Time {
    Time(Timestamp::now())
}
