//! A StorageVersion: each entry's API server and whether its identity Lease is alive (as the
//! garbage collector checks it), and what `collect` makes of the object.

use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::coordination::v1::Lease;
use serde::Serialize;

use super::{Difference, ExplainError, Explanation, Reads, Reasons, differences};
use crate::controllers::storageversiongc::plan::{
    IDENTITY_NAMESPACE, Outcome, collect, entries, has_identity_label,
};
use crate::k8s::validation::is_dns1123_subdomain;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    #[serde(rename = "apiServerID")]
    pub api_server_id: String,
    pub encoding_version: String,
    pub alive: bool,
    pub why: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct StorageVersionReasons {
    pub entries: Vec<Entry>,
}

pub fn explain(reads: &Reads<'_>, name: &str) -> Result<Explanation, ExplainError> {
    let informers = reads.informers;
    if !informers.is_started::<StorageVersion>() {
        return Err(ExplainError::NotWatched("storageversions"));
    }
    let sv = informers
        .get::<StorageVersion>()
        .store()
        .get("", name)
        .ok_or_else(|| ExplainError::NotFound {
            kind: "StorageVersion",
            name: name.to_string(),
        })?;
    let leases = informers.get::<Lease>();
    let checked: Vec<Entry> = entries(&sv)
        .iter()
        .map(|entry| {
            let id = &entry.api_server_id;
            let lease = is_dns1123_subdomain(id)
                .then(|| leases.store().get(IDENTITY_NAMESPACE, id))
                .flatten();
            let (alive, why) = match lease {
                Some(lease) if has_identity_label(&lease) => (
                    true,
                    format!("Lease {IDENTITY_NAMESPACE}/{id} is its identity"),
                ),
                Some(_) => (
                    false,
                    format!("Lease {IDENTITY_NAMESPACE}/{id} has no identity label"),
                ),
                None => (false, format!("no Lease {IDENTITY_NAMESPACE}/{id}")),
            };
            Entry {
                api_server_id: id.clone(),
                encoding_version: entry.encoding_version.clone(),
                alive,
                why,
            }
        })
        .collect();
    let dead = |id: &str| checked.iter().any(|e| e.api_server_id == id && !e.alive);
    let (diffs, next): (Vec<Difference>, &str) = match collect(&sv, dead, &reads.now) {
        Outcome::Keep => (Vec::new(), "keep"),
        Outcome::Delete => (
            vec![Difference {
                field: "(object)".into(),
                stored: "exists".into(),
                desired: "deleted".into(),
            }],
            "delete (no API server left)",
        ),
        Outcome::UpdateStatus(updated) => (
            differences(&sv.status, &updated.status),
            "drop the dead servers' entries",
        ),
    };
    Ok(Explanation {
        kind: "StorageVersion",
        namespace: String::new(),
        name: name.to_string(),
        in_sync: diffs.is_empty(),
        differences: diffs,
        next: next.into(),
        reasons: Reasons::StorageVersion(StorageVersionReasons { entries: checked }),
    })
}
