//! The quota decisions that do not depend on what is being counted: which lane a quota goes
//! to, which resource names are computed, and `syncResourceQuota`'s status and dirty rules.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use crate::controllers::resourcequota::usage::ResourceList;
use crate::k8s::quantity::Quantity;

/// A resource list as the API carries it.
pub type ApiList = BTreeMap<String, K8sQuantity>;

/// Two quantities as `Quantity.Cmp` sees them; a value that does not parse is only equal to
/// the same text (no status is ever wrong because of it, only possibly rewritten). The same
/// text is equal without parsing: every quota watch event compares lists, nearly always
/// unchanged.
fn same_quantity(a: &K8sQuantity, b: &K8sQuantity) -> bool {
    a.0 == b.0
        || matches!(
            (Quantity::try_from(a), Quantity::try_from(b)),
            (Ok(a), Ok(b)) if a == b
        )
}

/// `quota.Equals`: same names, numerically equal values; a missing list equals an empty one.
pub fn lists_equal(a: Option<&ApiList>, b: Option<&ApiList>) -> bool {
    let none = ApiList::new();
    let (a, b) = (a.unwrap_or(&none), b.unwrap_or(&none));
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| same_quantity(v, w)))
}

/// `spec.hard`, the limits.
pub fn hard(quota: &ResourceQuota) -> Option<&ApiList> {
    quota.spec.as_ref().and_then(|s| s.hard.as_ref())
}

/// `status.hard`, the limits the controller last enforced.
pub fn status_hard(quota: &ResourceQuota) -> Option<&ApiList> {
    quota.status.as_ref().and_then(|s| s.hard.as_ref())
}

/// upstream's `addQuota` routing: the priority lane when `status.hard` lags `spec.hard`, or a
/// tracked hard name has no used value yet; otherwise the primary lane.
pub fn needs_priority(quota: &ResourceQuota, tracked: impl Fn(&str) -> bool) -> bool {
    if !lists_equal(hard(quota), status_hard(quota)) {
        return true;
    }
    let used = quota.status.as_ref().and_then(|s| s.used.as_ref());
    status_hard(quota)
        .into_iter()
        .flatten()
        .any(|(name, _)| !used.is_some_and(|u| u.contains_key(name)) && tracked(name))
}

/// An update that leaves `spec.hard` as it was is ignored (status-only writes, resyncs).
pub fn hard_changed(old: &ResourceQuota, new: &ResourceQuota) -> bool {
    !lists_equal(hard(old), hard(new))
}

/// The hard names some evaluator computes, de-duplicated and sorted.
pub fn candidates(quota: &ResourceQuota, tracked: impl Fn(&str) -> bool) -> Vec<String> {
    hard(quota)
        .into_iter()
        .flatten()
        .map(|(name, _)| name)
        .filter(|n| tracked(n))
        .cloned()
        .collect()
}

/// `syncResourceQuota` steps 1–8: the status to write, or `None` when nothing is dirty.
/// `computed` holds the usage of every evaluator that succeeded (already limited to the
/// names it was asked for); names of failed evaluators keep their previous value.
pub fn next_status(quota: &ResourceQuota, computed: &ResourceList) -> Option<ResourceQuotaStatus> {
    let old = quota.status.clone().unwrap_or_default();
    let hard_limits = hard(quota).cloned().unwrap_or_default();
    let mut dirty = !lists_equal(Some(&hard_limits), old.hard.as_ref())
        || old.hard.is_none()
        || old.used.is_none();
    let mut used = old.used.clone().unwrap_or_default();
    for (name, value) in computed {
        used.insert(name.clone(), value.to_k8s());
    }
    let hard_names: BTreeSet<&String> = hard_limits.keys().collect();
    used.retain(|name, _| hard_names.contains(name));
    dirty = dirty || !lists_equal(Some(&used), old.used.as_ref());
    dirty.then_some(ResourceQuotaStatus {
        hard: Some(hard_limits),
        used: Some(used),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn quota(spec_hard: Value, status: Value) -> ResourceQuota {
        serde_json::from_value(json!({
            "metadata": { "name": "q", "namespace": "ns" },
            "spec": { "hard": spec_hard },
            "status": status,
        }))
        .unwrap()
    }

    fn usage(pairs: &[(&str, &str)]) -> ResourceList {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
            .collect()
    }

    fn strings(list: &Option<ApiList>) -> Vec<(String, String)> {
        list.iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect()
    }

    fn pod_names(name: &str) -> bool {
        matches!(
            name,
            "pods" | "cpu" | "requests.cpu" | "memory" | "count/pods"
        )
    }

    #[test]
    fn lists_are_equal_by_value_and_the_same_text_without_parsing() {
        let list = |pairs: &[(&str, &str)]| -> ApiList {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), K8sQuantity(v.to_string())))
                .collect()
        };
        let a = list(&[("cpu", "1"), ("memory", "1Gi")]);
        assert!(lists_equal(Some(&a), Some(&a.clone())));
        assert!(lists_equal(
            Some(&a),
            Some(&list(&[("cpu", "1000m"), ("memory", "1024Mi")]))
        ));
        assert!(!lists_equal(
            Some(&a),
            Some(&list(&[("cpu", "2"), ("memory", "1Gi")]))
        ));
        assert!(!lists_equal(Some(&a), Some(&list(&[("cpu", "1")]))));
        assert!(!lists_equal(
            Some(&a),
            Some(&list(&[("cpu", "1"), ("pods", "1Gi")]))
        ));
        let bad = list(&[("cpu", "lots")]);
        assert!(lists_equal(Some(&bad), Some(&bad.clone())), "the same text");
        assert!(!lists_equal(Some(&bad), Some(&list(&[("cpu", "many")]))));
        assert!(lists_equal(None, Some(&ApiList::new())), "missing is empty");
        assert!(!lists_equal(None, Some(&a)));
    }

    #[test]
    fn a_never_synced_quota_is_dirty_and_gets_every_computed_name() {
        let q = quota(
            json!({ "cpu": "4", "pods": "10", "configmaps": "5" }),
            json!(null),
        );
        let status = next_status(
            &q,
            &usage(&[("cpu", "1500m"), ("pods", "2"), ("configmaps", "3")]),
        )
        .unwrap();
        assert_eq!(
            strings(&status.hard),
            [
                ("configmaps".into(), "5".into()),
                ("cpu".into(), "4".into()),
                ("pods".into(), "10".into())
            ]
        );
        assert_eq!(
            strings(&status.used),
            [
                ("configmaps".into(), "3".into()),
                ("cpu".into(), "1500m".into()),
                ("pods".into(), "2".into())
            ]
        );
    }

    #[test]
    fn numerically_equal_usage_writes_nothing() {
        let q = quota(
            json!({ "cpu": "1" }),
            json!({ "hard": { "cpu": "1000m" }, "used": { "cpu": "1000m" } }),
        );
        assert_eq!(
            next_status(&q, &usage(&[("cpu", "1")])),
            None,
            "1 == 1000m, hard 1 == 1000m"
        );
    }

    #[test]
    fn failed_evaluators_keep_their_previous_values_and_unlisted_names_are_masked() {
        let q = quota(
            json!({ "cpu": "4", "services": "2" }),
            json!({ "hard": { "cpu": "4", "services": "2", "secrets": "1" }, "used": { "cpu": "1", "services": "1", "secrets": "1" } }),
        );
        // The service evaluator failed: only cpu was computed.
        let status = next_status(&q, &usage(&[("cpu", "2")])).unwrap();
        assert_eq!(
            strings(&status.used),
            [("cpu".into(), "2".into()), ("services".into(), "1".into())]
        );
        assert_eq!(
            strings(&status.hard),
            [("cpu".into(), "4".into()), ("services".into(), "2".into())]
        );
    }

    #[test]
    fn a_changed_limit_is_dirty_even_with_the_same_usage() {
        let q = quota(
            json!({ "pods": "20" }),
            json!({ "hard": { "pods": "10" }, "used": { "pods": "3" } }),
        );
        let status = next_status(&q, &usage(&[("pods", "3")])).unwrap();
        assert_eq!(strings(&status.hard), [("pods".into(), "20".into())]);
    }

    #[test]
    fn priority_lane_for_lagging_limits_or_missing_tracked_usage() {
        let synced = quota(
            json!({ "pods": "10" }),
            json!({ "hard": { "pods": "10" }, "used": { "pods": "0" } }),
        );
        assert!(!needs_priority(&synced, pod_names));
        let lagging = quota(
            json!({ "pods": "11" }),
            json!({ "hard": { "pods": "10" }, "used": { "pods": "0" } }),
        );
        assert!(needs_priority(&lagging, pod_names));
        let new = quota(json!({ "pods": "10" }), json!(null));
        assert!(needs_priority(&new, pod_names));
        let missing = quota(
            json!({ "pods": "10", "cpu": "1" }),
            json!({ "hard": { "pods": "10", "cpu": "1" }, "used": { "pods": "0" } }),
        );
        assert!(needs_priority(&missing, pod_names));
        // Untracked names without usage do not need the priority lane.
        let untracked = quota(
            json!({ "pods": "10", "x.example.com/y": "1" }),
            json!({ "hard": { "pods": "10", "x.example.com/y": "1" }, "used": { "pods": "0" } }),
        );
        assert!(!needs_priority(&untracked, pod_names));
    }

    #[test]
    fn status_only_updates_are_not_hard_changes() {
        let old = quota(json!({ "cpu": "1" }), json!(null));
        let new = quota(
            json!({ "cpu": "1000m" }),
            json!({ "hard": { "cpu": "1" }, "used": { "cpu": "0" } }),
        );
        assert!(!hard_changed(&old, &new));
        assert!(hard_changed(
            &old,
            &quota(json!({ "cpu": "2" }), json!(null))
        ));
        assert!(hard_changed(
            &old,
            &quota(json!({ "cpu": "1", "pods": "1" }), json!(null))
        ));
    }

    #[test]
    fn candidates_are_the_tracked_hard_names_sorted() {
        let q = quota(json!({ "pods": "1", "zzz": "1", "cpu": "1" }), json!(null));
        assert_eq!(candidates(&q, pod_names), ["cpu", "pods"]);
    }

    #[test]
    fn malformed_hard_values_compare_as_text_and_never_panic() {
        let q = quota(
            json!({ "cpu": "lots" }),
            json!({ "hard": { "cpu": "lots" }, "used": { "cpu": "0" } }),
        );
        assert_eq!(next_status(&q, &usage(&[("cpu", "0")])), None);
        let changed = quota(
            json!({ "cpu": "many" }),
            json!({ "hard": { "cpu": "lots" }, "used": { "cpu": "0" } }),
        );
        assert!(next_status(&changed, &usage(&[("cpu", "0")])).is_some());
    }
}
