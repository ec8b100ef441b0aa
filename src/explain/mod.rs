//! `kcm explain`: why an object's status is what it is. For a quota, a PDB, a claim (or a
//! pod's claims), a node's TTL or a StorageVersion, it runs the controller's own plan over
//! what the stores hold, and tells the status kcm would write beside the stored one, and the
//! reasons: which objects make up a quota's usage, which pods a PDB counts healthy, which
//! reservations of a claim still hold.
//!
//! The stores are kcm's shared informers: the leader's own (`/debug/explain/…` on the secure
//! port), or informers filled once by GET and LIST (`kcm explain …`, [`read`]); the
//! controllers' code reads both alike. Nothing here writes.

mod claim;
pub mod endpoint;
mod node;
mod pdb;
mod quota;
pub mod read;
mod render;
mod storageversion;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use serde::Serialize;
use serde_json::Value;

use crate::features::FeatureGates;
use crate::runtime::watching::informer::Informers;

/// What can be explained, by the names `kcm explain` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    ResourceQuota,
    PodDisruptionBudget,
    ResourceClaim,
    Pod,
    Node,
    StorageVersion,
}

impl Kind {
    /// The kinds, each with the names it is asked for by (kubectl's, singular and plural).
    pub const NAMES: [(Kind, &'static [&'static str]); 6] = [
        (
            Kind::ResourceQuota,
            &["resourcequota", "resourcequotas", "quota"],
        ),
        (
            Kind::PodDisruptionBudget,
            &["poddisruptionbudget", "poddisruptionbudgets", "pdb"],
        ),
        (
            Kind::ResourceClaim,
            &["resourceclaim", "resourceclaims", "claim"],
        ),
        (Kind::Pod, &["pod", "pods", "po"]),
        (Kind::Node, &["node", "nodes", "no"]),
        (Kind::StorageVersion, &["storageversion", "storageversions"]),
    ];

    /// The kind named `name` (case-insensitive).
    pub fn parse(name: &str) -> Option<Kind> {
        let name = name.to_ascii_lowercase();
        Self::NAMES
            .iter()
            .find(|(_, names)| names.contains(&name.as_str()))
            .map(|(kind, _)| *kind)
    }

    pub fn api_kind(self) -> &'static str {
        match self {
            Kind::ResourceQuota => "ResourceQuota",
            Kind::PodDisruptionBudget => "PodDisruptionBudget",
            Kind::ResourceClaim => "ResourceClaim",
            Kind::Pod => "Pod",
            Kind::Node => "Node",
            Kind::StorageVersion => "StorageVersion",
        }
    }

    /// Whether its objects live in a namespace.
    pub fn namespaced(self) -> bool {
        !matches!(self, Kind::Node | Kind::StorageVersion)
    }
}

/// Which object to explain, and how much to tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub kind: Kind,
    /// Empty for cluster-scoped kinds.
    pub namespace: String,
    pub name: String,
    /// Every object making up a quota's usage, not only the largest ones.
    pub all: bool,
}

/// The most objects listed per quota resource unless `--all`.
pub const LARGEST: usize = 10;

/// What kcm reads the stores with, and as of when.
pub struct Reads<'a> {
    pub informers: &'a Informers,
    /// For what the stores do not hold: a custom controller's `/scale`, discovery.
    pub client: &'a Client,
    pub gates: &'a FeatureGates,
    pub now: Time,
}

/// Why an object cannot be explained.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("{kind} {name} not found")]
    NotFound { kind: &'static str, name: String },
    #[error(
        "unknown kind {0:?}: expected one of resourcequota (quota), poddisruptionbudget (pdb), resourceclaim (claim), pod, node, storageversion"
    )]
    UnknownKind(String),
    /// The objects the answer needs are not there to read.
    #[error(
        "no {0} to read: the cluster does not serve them, or (on /debug/explain) their controller does not run on this replica"
    )]
    NotWatched(&'static str),
    #[error("cannot load the cluster configuration: {0}")]
    Config(String),
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("cannot read {what}: {}", answer(source))]
    Read {
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// What the API server answered, as kubectl words it (`<message> (<code> <reason>)`), or
/// why there was no answer.
fn answer(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => {
            format!("{} ({} {})", status.message, status.code, status.reason)
        }
        other => other.to_string(),
    }
}

/// One status field that differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub field: String,
    pub stored: Value,
    pub desired: Value,
}

/// The answer.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub kind: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    /// kcm would write nothing: the stored status is what it computes.
    pub in_sync: bool,
    /// The fields kcm would write differently.
    pub differences: Vec<Difference>,
    /// What kcm does next with the object.
    pub next: String,
    /// One key, the kind (`{"podDisruptionBudget": {…}}`), in JSON and YAML alike.
    #[serde(with = "serde_yaml_ng::with::singleton_map")]
    pub reasons: Reasons,
}

/// The reasons, by kind.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Reasons {
    ResourceQuota(quota::QuotaReasons),
    PodDisruptionBudget(pdb::PdbReasons),
    ResourceClaim(claim::ClaimReasons),
    Pod(claim::PodReasons),
    Node(node::NodeReasons),
    StorageVersion(storageversion::StorageVersionReasons),
}

/// Explains `request` from the stores in `reads`.
pub async fn explain(reads: &Reads<'_>, request: &Request) -> Result<Explanation, ExplainError> {
    let (ns, name) = (request.namespace.as_str(), request.name.as_str());
    match request.kind {
        Kind::ResourceQuota => quota::explain(reads, ns, name, request.all),
        Kind::PodDisruptionBudget => pdb::explain(reads, ns, name).await,
        Kind::ResourceClaim => claim::explain_claim(reads, ns, name),
        Kind::Pod => claim::explain_pod(reads, ns, name),
        Kind::Node => node::explain(reads, name),
        Kind::StorageVersion => storageversion::explain(reads, name),
    }
}

/// The fields of two statuses (JSON objects) that differ: each top-level field, by its
/// value as written.
pub fn differences(stored: &impl Serialize, desired: &impl Serialize) -> Vec<Difference> {
    let (stored, desired) = (fields(stored), fields(desired));
    let mut names: Vec<&String> = stored.keys().chain(desired.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|field| {
            let (a, b) = (
                stored.get(field).cloned().unwrap_or(Value::Null),
                desired.get(field).cloned().unwrap_or(Value::Null),
            );
            (a != b).then(|| Difference {
                field: field.clone(),
                stored: a,
                desired: b,
            })
        })
        .collect()
}

/// A status's fields as the API server stores them (none for an absent status).
fn fields(status: &impl Serialize) -> serde_json::Map<String, Value> {
    match serde_json::to_value(status) {
        Ok(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

impl Explanation {
    /// The answer as text for people.
    pub fn to_text(&self) -> String {
        render::text(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_are_the_top_level_fields_that_differ() {
        let stored = json!({ "hard": { "pods": "10" }, "used": { "pods": "1" } });
        let desired = json!({ "hard": { "pods": "10" }, "used": { "pods": "2" } });
        assert_eq!(
            differences(&stored, &desired),
            [Difference {
                field: "used".into(),
                stored: json!({ "pods": "1" }),
                desired: json!({ "pods": "2" }),
            }]
        );
        assert!(differences(&stored, &stored).is_empty());
        // An absent status against a written one: every written field.
        let fields: Vec<String> = differences(&Value::Null, &desired)
            .into_iter()
            .map(|d| d.field)
            .collect();
        assert_eq!(fields, ["hard", "used"]);
    }

    #[test]
    fn kinds_by_kubectl_names() {
        assert_eq!(Kind::parse("PDB"), Some(Kind::PodDisruptionBudget));
        assert_eq!(Kind::parse("resourcequotas"), Some(Kind::ResourceQuota));
        assert_eq!(Kind::parse("configmap"), None);
        assert!(!Kind::Node.namespaced() && Kind::Pod.namespaced());
    }
}
