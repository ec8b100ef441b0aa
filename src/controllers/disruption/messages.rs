//! The disruption controller's event messages, as upstream's `Eventf` formats render them
//! (Go's `%q` and `%v` included), each tested against upstream's literal text.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::k8s::golang::{go_label_selector, go_quote};

/// `MultiplePodDisruptionBudgets` on the pod: `%q` of namespace, pod and chosen PDB.
pub fn multiple_pdbs(namespace: &str, pod: &str, chosen: &str) -> String {
    format!(
        "Pod {}/{} matches multiple PodDisruptionBudgets.  Chose {} arbitrarily.",
        go_quote(namespace),
        go_quote(pod),
        go_quote(chosen)
    )
}

/// `UnmanagedPods` on the PDB: `%v` of the PDB's `*metav1.LabelSelector`.
pub fn unmanaged_pods(selector: Option<&LabelSelector>) -> String {
    format!(
        "Pods selected by this PodDisruptionBudget (selector: {}) were found to be unmanaged. \
         As a result, the status of the PDB cannot be calculated correctly, which may result \
         in undefined behavior. To account for these pods please set \".spec.minAvailable\" \
         field of the PDB to an integer value.",
        go_label_selector(selector)
    )
}

/// `NotDeleted` on the pod. Upstream prints the PDB's namespace twice (its name never);
/// kept for identical events.
pub fn not_deleted(pdb_namespace: &str) -> String {
    format!("Pod was expected by PDB {pdb_namespace}/{pdb_namespace} to be deleted but it wasn't")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_upstream_renders_them() {
        assert_eq!(
            multiple_pdbs("ns", "web-0", "pdb-a"),
            r#"Pod "ns"/"web-0" matches multiple PodDisruptionBudgets.  Chose "pdb-a" arbitrarily."#
        );
        let selector: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": { "app": "web" },
        }))
        .unwrap();
        assert_eq!(
            unmanaged_pods(Some(&selector)),
            "Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:map[string]string{app: web,},MatchExpressions:[]LabelSelectorRequirement{},}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
        );
        let selector: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchExpressions": [{ "key": "tier", "operator": "In", "values": ["a", "b"] }],
        }))
        .unwrap();
        assert_eq!(
            unmanaged_pods(Some(&selector)),
            "Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:tier,Operator:In,Values:[a b],},},}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
        );
        assert_eq!(
            unmanaged_pods(None),
            "Pods selected by this PodDisruptionBudget (selector: nil) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
        );
        assert_eq!(
            not_deleted("prod"),
            "Pod was expected by PDB prod/prod to be deleted but it wasn't"
        );
    }
}
