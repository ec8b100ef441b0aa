//! The storage-version garbage collector's decisions, as pure functions: which leases
//! identify API servers, what a StorageVersion becomes once dead servers' entries go, and
//! upstream's `SetCommonEncodingVersion` with its `AllEncodingVersionsEqual` condition.

use k8s_openapi::api::apiserverinternal::v1alpha1::{
    ServerStorageVersion, StorageVersion, StorageVersionCondition, StorageVersionStatus,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// API server identity leases live here, named by the server's ID.
pub const IDENTITY_NAMESPACE: &str = "kube-system";
pub const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
pub const IDENTITY_VALUE: &str = "kube-apiserver";
pub const CONDITION_TYPE: &str = "AllEncodingVersionsEqual";

/// A lease that names a live kube-apiserver: in kube-system, labelled as an identity lease.
pub fn is_identity_lease(lease: &Lease) -> bool {
    lease.metadata.namespace.as_deref() == Some(IDENTITY_NAMESPACE) && has_identity_label(lease)
}

/// The label check alone, for leases looked up by name in kube-system.
pub fn has_identity_label(lease: &Lease) -> bool {
    lease
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(IDENTITY_LABEL))
        .is_some_and(|v| v == IDENTITY_VALUE)
}

/// The entries a StorageVersion holds.
pub fn entries(sv: &StorageVersion) -> &[ServerStorageVersion] {
    sv.status
        .as_ref()
        .and_then(|s| s.storage_versions.as_deref())
        .unwrap_or_default()
}

/// What to do with a StorageVersion once the entries of dead API servers are dropped.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// No entry is dead.
    Keep,
    /// Nothing is left: delete the object.
    Delete,
    /// Write this status (UpdateStatus).
    UpdateStatus(Box<StorageVersion>),
}

/// Drops every entry for which `dead(apiServerID)` holds, keeping the others in order, and
/// recomputes the common encoding version at `now`.
pub fn collect(sv: &StorageVersion, dead: impl Fn(&str) -> bool, now: &Time) -> Outcome {
    let all = entries(sv);
    let kept: Vec<ServerStorageVersion> = all
        .iter()
        .filter(|e| !dead(&e.api_server_id))
        .cloned()
        .collect();
    if kept.len() == all.len() {
        return Outcome::Keep;
    }
    if kept.is_empty() {
        return Outcome::Delete;
    }
    let mut updated = sv.clone();
    let status = updated
        .status
        .get_or_insert_with(StorageVersionStatus::default);
    status.storage_versions = Some(kept);
    set_common_encoding_version(status, sv.metadata.generation, now);
    Outcome::UpdateStatus(Box::new(updated))
}

/// Upstream's `SetCommonEncodingVersion`: the common version is set only when every entry
/// agrees, and the condition says so. Its lastTransitionTime moves when the status flips, or
/// when one agreed version replaces another.
pub fn set_common_encoding_version(
    status: &mut StorageVersionStatus,
    generation: Option<i64>,
    now: &Time,
) {
    let old = status.common_encoding_version.take();
    let entries = status.storage_versions.as_deref().unwrap_or_default();
    if let Some(first) = entries.first()
        && entries
            .iter()
            .all(|e| e.encoding_version == first.encoding_version)
    {
        status.common_encoding_version = Some(first.encoding_version.clone());
    }
    let (state, reason, message) = match status.common_encoding_version {
        Some(_) => (
            "True",
            "CommonEncodingVersionSet",
            "Common encoding version set",
        ),
        None => (
            "False",
            "CommonEncodingVersionUnset",
            "Common encoding version unset",
        ),
    };
    let forced = matches!((&old, &status.common_encoding_version), (Some(a), Some(b)) if a != b);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == CONDITION_TYPE) {
        None => conditions.push(StorageVersionCondition {
            type_: CONDITION_TYPE.into(),
            status: state.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: generation,
            last_transition_time: Some(now.clone()),
        }),
        Some(existing) => {
            if existing.status != state || forced {
                existing.last_transition_time = Some(now.clone());
            }
            existing.status = state.into();
            existing.reason = reason.into();
            existing.message = message.into();
            existing.observed_generation = generation;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn time(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn sv(
        entries: &[(&str, &str)],
        common: Option<&str>,
        conditions: serde_json::Value,
    ) -> StorageVersion {
        let entries: Vec<_> = entries
            .iter()
            .map(|(id, v)| json!({ "apiServerID": id, "encodingVersion": v, "decodableVersions": [v] }))
            .collect();
        serde_json::from_value(json!({
            "metadata": { "name": "k8s.test.resources", "generation": 3 },
            "spec": {},
            "status": { "storageVersions": entries, "commonEncodingVersion": common, "conditions": conditions },
        }))
        .unwrap()
    }

    fn updated(outcome: Outcome) -> StorageVersionStatus {
        match outcome {
            Outcome::UpdateStatus(sv) => sv.status.unwrap(),
            other => panic!("expected a status update, got {other:?}"),
        }
    }

    fn ids(status: &StorageVersionStatus) -> Vec<&str> {
        status
            .storage_versions
            .iter()
            .flatten()
            .map(|e| e.api_server_id.as_str())
            .collect()
    }

    /// Upstream Test_StorageVersionUpdatedWithAllEncodingVersionsEqualOnLeaseDeletion.
    #[test]
    fn dropping_the_odd_server_agrees_on_the_rest() {
        let before = sv(
            &[
                ("kube-apiserver-1", "v1"),
                ("kube-apiserver-2", "v2"),
                ("kube-apiserver-3", "v2"),
            ],
            Some("v1"),
            json!(null),
        );
        let status = updated(collect(&before, |id| id == "kube-apiserver-1", &time(100)));
        assert_eq!(ids(&status), ["kube-apiserver-2", "kube-apiserver-3"]);
        assert_eq!(status.common_encoding_version.as_deref(), Some("v2"));
        let conditions = status.conditions.unwrap();
        assert_eq!(conditions.len(), 1);
        let c = &conditions[0];
        assert_eq!(
            (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_str(),
                c.message.as_str(),
                c.observed_generation
            ),
            (
                "AllEncodingVersionsEqual",
                "True",
                "CommonEncodingVersionSet",
                "Common encoding version set",
                Some(3)
            )
        );
        assert_eq!(c.last_transition_time, Some(time(100)));
    }

    /// Upstream Test_StorageVersionUpdatedWithDifferentEncodingVersionsOnLeaseDeletion: a lease
    /// with no entry here changes nothing.
    #[test]
    fn a_server_without_entries_changes_nothing() {
        let before = sv(
            &[("kube-apiserver-1", "v1"), ("kube-apiserver-3", "v2")],
            Some("v1"),
            json!(null),
        );
        assert_eq!(
            collect(&before, |id| id == "kube-apiserver-2", &time(100)),
            Outcome::Keep
        );
    }

    /// Upstream Test_StorageVersionContainsInvalidLeaseID.
    #[test]
    fn unknown_server_ids_are_dropped_and_disagreement_is_reported() {
        let before = sv(
            &[
                ("kube-apiserver-1", "v1"),
                ("kube-apiserver-2", "v2"),
                ("kube-apiserver-3", "v2"),
                ("kube-apiserver-4", "v2"),
            ],
            Some("v1"),
            json!(null),
        );
        let status = updated(collect(&before, |id| id == "kube-apiserver-4", &time(100)));
        assert_eq!(
            ids(&status),
            ["kube-apiserver-1", "kube-apiserver-2", "kube-apiserver-3"]
        );
        assert_eq!(status.common_encoding_version, None);
        let c = &status.conditions.unwrap()[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            (
                "False",
                "CommonEncodingVersionUnset",
                "Common encoding version unset"
            )
        );
    }

    /// Upstream Test_StorageVersionDeletedOnLeaseDeletion.
    #[test]
    fn the_last_entry_going_deletes_the_object() {
        let before = sv(&[("kube-apiserver-1", "v1")], None, json!(null));
        assert_eq!(collect(&before, |_| true, &time(100)), Outcome::Delete);
    }

    #[test]
    fn transition_time_moves_only_on_a_flip_or_a_new_agreed_version() {
        let condition = |status: &str, at: i64| json!([{ "type": "AllEncodingVersionsEqual", "status": status, "reason": "r", "message": "m", "lastTransitionTime": time(at).0.to_string() }]);
        let dead_removed =
            |sv: &StorageVersion| updated(collect(sv, |id| id == "dead", &time(100)));
        // Still agreed on the same version: time kept, fields refreshed.
        let same = sv(
            &[("a", "v1"), ("b", "v1"), ("dead", "v1")],
            Some("v1"),
            condition("True", 10),
        );
        let c = &dead_removed(&same).conditions.unwrap()[0];
        assert_eq!(
            (c.last_transition_time.clone(), c.reason.as_str()),
            (Some(time(10)), "CommonEncodingVersionSet")
        );
        // Agreed on a different version: forced transition.
        let moved = sv(
            &[("a", "v2"), ("b", "v2"), ("dead", "v1")],
            Some("v1"),
            condition("True", 10),
        );
        let c = &dead_removed(&moved).conditions.unwrap()[0];
        assert_eq!(c.last_transition_time, Some(time(100)));
        // Disagreement becomes agreement: the status flips.
        let flip = sv(&[("a", "v2"), ("dead", "v1")], None, condition("False", 10));
        let status = dead_removed(&flip);
        assert_eq!(status.common_encoding_version.as_deref(), Some("v2"));
        assert_eq!(
            status.conditions.unwrap()[0].last_transition_time,
            Some(time(100))
        );
        // Unset stays unset: no transition.
        let unset = sv(
            &[("a", "v1"), ("b", "v2"), ("dead", "v1")],
            None,
            condition("False", 10),
        );
        assert_eq!(
            updated(collect(&unset, |id| id == "dead", &time(100)))
                .conditions
                .unwrap()[0]
                .last_transition_time,
            Some(time(10))
        );
    }

    #[test]
    fn identity_leases_need_namespace_and_label() {
        let lease = |ns: &str, labels: serde_json::Value| -> Lease {
            serde_json::from_value(
                json!({ "metadata": { "name": "x", "namespace": ns, "labels": labels } }),
            )
            .unwrap()
        };
        assert!(is_identity_lease(&lease(
            "kube-system",
            json!({ IDENTITY_LABEL: "kube-apiserver" })
        )));
        assert!(!is_identity_lease(&lease(
            "default",
            json!({ IDENTITY_LABEL: "kube-apiserver" })
        )));
        assert!(!is_identity_lease(&lease(
            "kube-system",
            json!({ IDENTITY_LABEL: "other" })
        )));
        assert!(!is_identity_lease(&lease("kube-system", json!(null))));
    }
}
