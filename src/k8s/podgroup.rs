//! `scheduling.k8s.io/v1alpha2` PodGroups (KEP-5729), as the resourceclaim controller reads
//! them. k8s-openapi 0.29 builds the 1.37 API ("latest"), which has moved on to
//! `v1alpha3`/`v1beta1`, so this minimal type stands in for v1.36's: metadata, the
//! `spec.resourceClaims` entries and `status.resourceClaimStatuses`; everything else the
//! server sends is ignored (and so never stored). The entries have the fields and meaning of
//! a pod's (`PodResourceClaim`, `PodResourceClaimStatus`), so those types are reused.

use k8s_openapi::api::core::v1::{PodResourceClaim, PodResourceClaimStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The API group of PodGroups (and of their `reservedFor` entries).
pub const GROUP: &str = "scheduling.k8s.io";
/// The only version kcm speaks: v1.36's.
pub const API_VERSION: &str = "scheduling.k8s.io/v1alpha2";
/// The resource, as `reservedFor` entries and RBAC name it.
pub const RESOURCE: &str = "podgroups";

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct PodGroup {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodGroupSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodGroupStatus>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    /// At most 4, names unique; immutable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<PodResourceClaim>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claim_statuses: Vec<PodResourceClaimStatus>,
}

impl PodGroup {
    /// `spec.resourceClaims`.
    pub fn claims(&self) -> &[PodResourceClaim] {
        &self.spec.resource_claims
    }

    /// `status.resourceClaimStatuses`.
    pub fn claim_statuses(&self) -> &[PodResourceClaimStatus] {
        self.status
            .as_ref()
            .map(|s| s.resource_claim_statuses.as_slice())
            .unwrap_or_default()
    }
}

impl k8s_openapi::Resource for PodGroup {
    const API_VERSION: &'static str = API_VERSION;
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = "PodGroup";
    const VERSION: &'static str = "v1alpha2";
    const URL_PATH_SEGMENT: &'static str = RESOURCE;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::ListableResource for PodGroup {
    const LIST_KIND: &'static str = "PodGroupList";
}

impl k8s_openapi::Metadata for PodGroup {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_what_the_controller_needs_and_ignores_the_rest() {
        let group: PodGroup = serde_json::from_value(json!({
            "apiVersion": API_VERSION,
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ns", "uid": "u"},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]
            },
            "status": {
                "conditions": [],
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "g-gpu-x"}]
            }
        }))
        .unwrap();
        assert_eq!(group.claims()[0].name, "gpu");
        assert_eq!(
            group.claim_statuses()[0].resource_claim_name.as_deref(),
            Some("g-gpu-x")
        );
        assert_eq!(
            <PodGroup as kube::Resource>::url_path(&(), Some("ns")),
            "/apis/scheduling.k8s.io/v1alpha2/namespaces/ns/podgroups"
        );
    }
}
