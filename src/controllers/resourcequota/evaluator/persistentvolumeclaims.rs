//! The PersistentVolumeClaim evaluator (upstream `persistent_volume_claims.go`): claims and
//! storage, in total and per storage class, and the VolumeAttributesClass scope.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use super::{Evaluator, EvaluatorInputs};
use crate::controllers::resourcequota::scope::{QuotaScope, ScopeError, ScopeRequirement};
use crate::controllers::resourcequota::usage::{Place, ResourceList, Usage, one, parse_list};
use crate::k8s::quantity::Quantity;

/// The object-count name of PersistentVolumeClaims.
pub const PVC_COUNT: &str = "count/persistentvolumeclaims";
const PERSISTENT_VOLUME_CLAIMS: &str = "persistentvolumeclaims";
const REQUESTS_STORAGE: &str = "requests.storage";
const STORAGE: &str = "storage";
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";
const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

const PVC_RESOURCES: [&str; 2] = [PERSISTENT_VOLUME_CLAIMS, REQUESTS_STORAGE];

/// upstream `pvcEvaluator`.
#[derive(Default)]
pub struct PersistentVolumeClaims;

impl Evaluator for PersistentVolumeClaims {
    type Object = PersistentVolumeClaim;
    type Context = ();
    const RESOURCE: &'static str = PERSISTENT_VOLUME_CLAIMS;

    fn matching(&self, names: &[String], _: &EvaluatorInputs) -> Vec<String> {
        pvc_matching(names)
    }

    fn matches(&self, pvc: &PersistentVolumeClaim, scope: &QuotaScope) -> bool {
        pvc_matches_scope(pvc, scope)
    }

    fn usage(&self, pvc: &PersistentVolumeClaim, _: &EvaluatorInputs) -> Usage {
        pvc_usage(pvc)
    }

    /// Upstream's PVC update filter is effectively always true: `RequiresQuotaReplenish`
    /// (`pkg/quota/v1/evaluator/core/persistent_volume_claims.go`), with
    /// RecoverVolumeExpansionFailure on, compares two `Storage()` pointers, which are never
    /// the same.
    fn update_matters(
        &self,
        _: &PersistentVolumeClaim,
        _: &PersistentVolumeClaim,
        _: &EvaluatorInputs,
    ) -> bool {
        true
    }
}

/// PVC `MatchingResources` (input order, like upstream).
pub fn pvc_matching<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    names
        .iter()
        .map(AsRef::as_ref)
        .filter(|name| {
            *name == PVC_COUNT
                || PVC_RESOURCES.contains(name)
                || PVC_RESOURCES
                    .iter()
                    .any(|r| name.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{r}")))
        })
        .map(str::to_string)
        .collect()
}

/// `storagehelpers.GetPersistentVolumeClaimClass`: the beta annotation wins, even empty.
pub fn pvc_storage_class(pvc: &PersistentVolumeClaim) -> String {
    if let Some(class) = pvc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
    {
        return class.clone();
    }
    pvc.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

/// PVC `Usage`.
pub fn pvc_usage(pvc: &PersistentVolumeClaim) -> Usage {
    let mut problems = Vec::new();
    let class = pvc_storage_class(pvc);
    let mut list = ResourceList::from([
        (PERSISTENT_VOLUME_CLAIMS.to_string(), one()),
        (PVC_COUNT.to_string(), one()),
    ]);
    if !class.is_empty() {
        list.insert(
            format!("{class}{STORAGE_CLASS_SUFFIX}{PERSISTENT_VOLUME_CLAIMS}"),
            one(),
        );
    }
    if let Some(storage) = pvc_storage_usage(pvc, &mut problems) {
        if !class.is_empty() {
            list.insert(
                format!("{class}{STORAGE_CLASS_SUFFIX}{REQUESTS_STORAGE}"),
                storage.clone(),
            );
        }
        list.insert(REQUESTS_STORAGE.to_string(), storage);
    }
    Usage { list, problems }
}

/// `getStorageUsage`: the spec request rounded up to whole bytes, or the allocated size
/// (also rounded up) when that is larger (RecoverVolumeExpansionFailure, GA).
fn pvc_storage_usage(pvc: &PersistentVolumeClaim, problems: &mut Vec<String>) -> Option<Quantity> {
    let place = Place::object(pvc, "persistentvolumeclaim");
    let requests = parse_list(
        pvc.spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref()),
        &place.field("spec.resources.requests"),
        problems,
    );
    let requested = requests.as_ref()?.get(STORAGE)?.round_up_to_integer();
    let allocated = parse_list(
        pvc.status
            .as_ref()
            .and_then(|s| s.allocated_resources.as_ref()),
        &place.field("status.allocatedResources"),
        problems,
    );
    match allocated.as_ref().and_then(|a| a.get(STORAGE)) {
        Some(a) if *a > requested => Some(a.round_up_to_integer()),
        _ => Some(requested),
    }
}

/// The VolumeAttributesClass names a PVC refers to: spec, current and target.
fn pvc_vac_names(pvc: &PersistentVolumeClaim) -> Vec<&str> {
    let status = pvc.status.as_ref();
    let mut names: Vec<&str> = [
        pvc.spec
            .as_ref()
            .and_then(|s| s.volume_attributes_class_name.as_deref()),
        status.and_then(|s| s.current_volume_attributes_class_name.as_deref()),
        status
            .and_then(|s| s.modify_volume_status.as_ref())
            .and_then(|m| m.target_volume_attributes_class_name.as_deref()),
    ]
    .into_iter()
    .flatten()
    .filter(|n| !n.is_empty())
    .collect();
    names.sort_unstable();
    names.dedup();
    names
}

fn pvc_matches_requirement(
    pvc: &PersistentVolumeClaim,
    req: &ScopeRequirement,
) -> Result<bool, ScopeError> {
    if req.scope_name != "VolumeAttributesClass" {
        return Ok(false);
    }
    let names = pvc_vac_names(pvc);
    if req.operator == "Exists" {
        return Ok(!names.is_empty());
    }
    let selector = req.selector.as_ref().map_err(Clone::clone)?;
    if names.is_empty() {
        return Ok(selector.matches(None));
    }
    Ok(names.iter().any(|n| selector.matches(Some(n))))
}

/// Whether the PVC matches every scope requirement ([`QuotaScope::all_match`]); only
/// VolumeAttributesClass can match.
pub fn pvc_matches_scope(pvc: &PersistentVolumeClaim, scope: &QuotaScope) -> bool {
    scope.all_match(|req| pvc_matches_requirement(pvc, req))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ScopedResourceSelectorRequirement;
    use serde_json::{Value, json};

    use super::*;
    use crate::controllers::resourcequota::scope::parse_scope;
    use crate::controllers::resourcequota::testing::{from, scope_of, selector, strings, want};

    fn pvc(v: Value) -> PersistentVolumeClaim {
        from(v)
    }

    fn claim_with(storage: &str, class: Option<&str>) -> PersistentVolumeClaim {
        pvc(json!({
            "metadata": {"name": "foo", "namespace": "ns"},
            "spec": {
                "selector": {"matchExpressions": [{"key": "key2", "operator": "Exists"}]},
                "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                "resources": {"requests": {"storage": storage}},
                "storageClassName": class,
            },
        }))
    }

    fn pvc_with_allocated(size: &str, allocated: &str) -> PersistentVolumeClaim {
        pvc(json!({
            "metadata": {"name": "foo", "namespace": "ns"},
            "spec": {"resources": {"requests": {"storage": size}}},
            "status": {"allocatedResources": {"storage": allocated}},
        }))
    }

    #[test]
    fn persistent_volume_claim_evaluator_usage() {
        let cases = vec![
            (
                "pvc-usage",
                claim_with("10Gi", None),
                vec![
                    ("requests.storage", "10Gi"),
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            (
                "pvc-usage-by-class",
                claim_with("10Gi", Some("gold")),
                vec![
                    ("requests.storage", "10Gi"),
                    ("persistentvolumeclaims", "1"),
                    ("gold.storageclass.storage.k8s.io/requests.storage", "10Gi"),
                    (
                        "gold.storageclass.storage.k8s.io/persistentvolumeclaims",
                        "1",
                    ),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            (
                "pvc-usage-rounded",
                claim_with("1001m", None),
                vec![
                    ("requests.storage", "2"),
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            (
                "pvc-usage-by-class-rounded",
                claim_with("1001m", Some("gold")),
                vec![
                    ("requests.storage", "2"),
                    ("persistentvolumeclaims", "1"),
                    ("gold.storageclass.storage.k8s.io/requests.storage", "2"),
                    (
                        "gold.storageclass.storage.k8s.io/persistentvolumeclaims",
                        "1",
                    ),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            (
                "pvc-usage-higher-allocated-resource",
                pvc_with_allocated("5G", "10G"),
                vec![
                    ("requests.storage", "10G"),
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            (
                "pvc-usage-lower-allocated-resource",
                pvc_with_allocated("10G", "5G"),
                vec![
                    ("requests.storage", "10G"),
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            // Not upstream: rounding of the allocated size, the beta annotation.
            (
                "allocated size rounded up too",
                pvc_with_allocated("1", "1500m"),
                vec![
                    ("requests.storage", "2"),
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
            (
                "beta annotation wins over storageClassName",
                pvc(json!({
                    "metadata": {"name": "foo", "annotations": {"volume.beta.kubernetes.io/storage-class": "silver"}},
                    "spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1Gi"}}},
                })),
                vec![
                    ("requests.storage", "1Gi"),
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                    ("silver.storageclass.storage.k8s.io/requests.storage", "1Gi"),
                    (
                        "silver.storageclass.storage.k8s.io/persistentvolumeclaims",
                        "1",
                    ),
                ],
            ),
            (
                "no storage request, allocated ignored",
                pvc(
                    json!({"metadata": {"name": "foo"}, "spec": {}, "status": {"allocatedResources": {"storage": "1Gi"}}}),
                ),
                vec![
                    ("persistentvolumeclaims", "1"),
                    ("count/persistentvolumeclaims", "1"),
                ],
            ),
        ];
        for (name, claim, expected) in cases {
            let got = pvc_usage(&claim);
            assert_eq!(strings(&got.list), want(&expected), "{name}");
            assert!(got.problems.is_empty(), "{name}");
        }
        let bad = pvc(
            json!({"metadata": {"name": "foo"}, "spec": {"resources": {"requests": {"storage": "ten"}}}}),
        );
        let got = pvc_usage(&bad);
        assert_eq!(
            strings(&got.list),
            want(&[
                ("persistentvolumeclaims", "1"),
                ("count/persistentvolumeclaims", "1")
            ])
        );
        assert_eq!(got.problems.len(), 1);
    }

    #[test]
    fn persistent_volume_claim_evaluator_matching_resources() {
        let supported = [
            "count/persistentvolumeclaims",
            "requests.storage",
            "persistentvolumeclaims",
            "gold.storageclass.storage.k8s.io/requests.storage",
            "gold.storageclass.storage.k8s.io/persistentvolumeclaims",
        ];
        assert_eq!(pvc_matching(&supported), supported.to_vec());
        let unsupported = [
            "storage",
            "ephemeral-storage",
            "bronze.storageclass.storage.k8s.io/storage",
            "gold.storage.k8s.io/requests.storage",
        ];
        assert!(pvc_matching(&unsupported).is_empty());
    }

    #[test]
    fn persistent_volume_claim_volume_attributes_class_scopes() {
        let with_vac = |spec: Option<&str>, current: Option<&str>, target: Option<&str>| {
            pvc(json!({
                "metadata": {"name": "foo"},
                "spec": {"volumeAttributesClassName": spec},
                "status": {"currentVolumeAttributesClassName": current,
                           "modifyVolumeStatus": target.map(|t| json!({"status": "InProgress", "targetVolumeAttributesClassName": t}))},
            }))
        };
        let none = with_vac(None, None, None);
        let gold = with_vac(Some("gold"), None, None);
        let moving = with_vac(Some("gold"), Some("silver"), Some("gold"));
        let check = |sel: ScopedResourceSelectorRequirement| {
            let scope = scope_of(&[], vec![sel]);
            [&none, &gold, &moving].map(|c| pvc_matches_scope(c, &scope))
        };
        assert_eq!(
            check(selector("VolumeAttributesClass", "Exists", &[])),
            [false, true, true]
        );
        assert_eq!(
            check(selector("VolumeAttributesClass", "DoesNotExist", &[])),
            [true, false, false]
        );
        assert_eq!(
            check(selector("VolumeAttributesClass", "In", &["silver"])),
            [false, false, true]
        );
        // Any referenced class matching is enough.
        assert_eq!(
            check(selector("VolumeAttributesClass", "NotIn", &["gold"])),
            [true, false, true]
        );
        assert_eq!(
            check(selector("VolumeAttributesClass", "In", &[])),
            [false, false, false]
        );
        assert_eq!(
            check(selector("PriorityClass", "Exists", &[])),
            [false, false, false]
        );
        let scopes = parse_scope(&["VolumeAttributesClass".to_string()], None);
        assert!(pvc_matches_scope(&gold, &scopes) && !pvc_matches_scope(&none, &scopes));
        assert!(pvc_matches_scope(&none, &QuotaScope::default()));
    }
}
