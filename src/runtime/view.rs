//! Compact stored views: list and watch responses are deserialized straight into these
//! types, and serde skips every field no controller reads, so the large parts of an object
//! (a pod's env, volumes, images, probes, managedFields, kubectl's last-applied annotation)
//! are never allocated, not even for a moment.
//!
//! A view keeps the field names and nesting of its k8s-openapi type for the fields it holds,
//! so the pure decision functions read it exactly as they read the full object. The views
//! are not k8s-openapi types, so they are never sent back to the API server: a write that
//! needs more of an object than its view holds patches, or reads the object first.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    PodAffinity, PodAntiAffinity, PodExtendedResourceClaimStatus, PodResourceClaim,
    PodResourceClaimStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer, Serialize};

use super::intern::intern;

/// A pod's `metadata` as controllers read it: without `managedFields` and `selfLink` (often
/// most of an object's bytes), and without what no controller reads of a pod: annotations
/// (kubectl's last-applied one among them), finalizers, generateName, creationTimestamp.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaWire {
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    #[serde(default, deserialize_with = "shrunk_opt")]
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    uid: Option<String>,
}

/// Deserializes a pod's `metadata` keeping only [`MetaWire`]'s fields. kube's watcher and
/// `Api` need an [`ObjectMeta`] (`kube::Resource::meta`), so this is the one k8s-openapi type
/// a view keeps whole; the fields left out stay `None`.
pub fn compact_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let wire = MetaWire::deserialize(d)?;
    Ok(ObjectMeta {
        deletion_grace_period_seconds: wire.deletion_grace_period_seconds,
        deletion_timestamp: wire.deletion_timestamp,
        generation: wire.generation,
        labels: wire.labels,
        name: wire.name,
        namespace: wire.namespace,
        owner_references: wire.owner_references,
        resource_version: wire.resource_version,
        uid: wire.uid,
        ..ObjectMeta::default()
    })
}

/// The pod conditions some controller reads: readiness and DisruptionTarget (disruption),
/// PodResizePending (quota). The others (scheduled, initialized, ...) are dropped.
const KEPT_POD_CONDITIONS: [&str; 3] = ["Ready", "DisruptionTarget", "PodResizePending"];

/// A list without spare capacity: serde grows a `Vec` as it reads (to room for 4 entries at
/// the first), and a pod's lists (containers, statuses, owner references) mostly hold one.
fn shrunk<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    let mut list = Vec::<T>::deserialize(d)?;
    list.shrink_to_fit();
    Ok(list)
}

/// A string most pods share (phase, QoS class, node, priority class), held once per process.
fn interned_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<str>>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map(|s| intern(&s)))
}

fn str_opt<S: serde::Serializer>(value: &Option<Arc<str>>, s: S) -> Result<S::Ok, S::Error> {
    value.as_deref().serialize(s)
}

/// [`shrunk`], for a list that may be missing or null.
fn shrunk_opt<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Vec<T>>, D::Error> {
    let list = Option::<Vec<T>>::deserialize(d)?;
    Ok(list.map(|mut list| {
        list.shrink_to_fit();
        list
    }))
}

fn kept_pod_conditions<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<PodCondition>>, D::Error> {
    let conditions = Option::<Vec<PodCondition>>::deserialize(d)?;
    Ok(conditions.map(|mut list| {
        list.retain(|c| KEPT_POD_CONDITIONS.contains(&c.type_.as_str()));
        list.shrink_to_fit();
        list
    }))
}

/// A resource list (`cpu: 100m`, ...) as a sorted boxed slice rather than a `BTreeMap`: a
/// map allocates a whole B-tree leaf (about 550 bytes) even for one entry, and a pod holds up
/// to seven such lists. Read by name with [`ResourceMap::get`] or in name order with
/// [`ResourceMap::iter`]; a name given twice keeps its last value, as a map would. Names are
/// interned: every pod's `cpu` is one shared string.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceMap(Box<[(Arc<str>, Quantity)]>);

impl ResourceMap {
    pub fn get(&self, name: &str) -> Option<&Quantity> {
        self.0
            .binary_search_by(|(k, _)| k.as_ref().cmp(name))
            .ok()
            .map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Entries in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Quantity)> {
        self.into_iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: AsRef<str>> FromIterator<(K, Quantity)> for ResourceMap {
    fn from_iter<I: IntoIterator<Item = (K, Quantity)>>(entries: I) -> Self {
        let mut list: Vec<(Arc<str>, Quantity)> = entries
            .into_iter()
            .map(|(k, v)| (intern(k.as_ref()), v))
            .collect();
        // Stable sort, then keep the last of equal names: a map's last-insert-wins.
        list.sort_by(|a, b| a.0.cmp(&b.0));
        list.reverse();
        list.dedup_by(|later, kept| later.0 == kept.0);
        list.reverse();
        Self(list.into_boxed_slice())
    }
}

impl<'a> IntoIterator for &'a ResourceMap {
    type Item = (&'a str, &'a Quantity);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Arc<str>, Quantity)>,
        fn(&'a (Arc<str>, Quantity)) -> (&'a str, &'a Quantity),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }
}

impl std::ops::Index<&str> for ResourceMap {
    type Output = Quantity;

    /// As a map's index: panics when `name` is absent (for tests; code uses `get`).
    fn index(&self, name: &str) -> &Quantity {
        self.get(name).expect("resource name in list")
    }
}

impl<'de> Deserialize<'de> for ResourceMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = ResourceMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of resource names to quantities")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<ResourceMap, A::Error> {
                let mut list = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry::<String, Quantity>()? {
                    list.push(entry);
                }
                Ok(list.into_iter().collect())
            }
        }
        d.deserialize_map(Entries)
    }
}

impl Serialize for ResourceMap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

/// A pod as the quota, disruption and resourceclaim controllers read it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Pod {
    #[serde(default, deserialize_with = "compact_meta")]
    pub metadata: ObjectMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<PodStatus>,
}

impl k8s_openapi::Resource for Pod {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Pod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// `spec`: resources and scheduling facts for quota, claims for resourceclaim.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Boxed, as most pods have none: 8 bytes in every pod rather than about 100.
    pub affinity: Option<Box<Affinity>>,
    #[serde(default, deserialize_with = "shrunk")]
    pub containers: Vec<Container>,
    #[serde(
        default,
        deserialize_with = "shrunk_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub init_containers: Option<Vec<Container>>,
    #[serde(
        default,
        deserialize_with = "interned_opt",
        serialize_with = "str_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub node_name: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<ResourceMap>,
    #[serde(
        default,
        deserialize_with = "interned_opt",
        serialize_with = "str_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub priority_class_name: Option<Arc<str>>,
    #[serde(
        default,
        deserialize_with = "shrunk_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub resource_claims: Option<Vec<PodResourceClaim>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// `spec.affinity` without node affinity (quota only asks about cross-namespace pod terms).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Affinity {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_affinity: Option<PodAffinity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_anti_affinity: Option<PodAntiAffinity>,
}

/// A container: its name (to find its status), resources and restart policy (sidecars).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    #[serde(default)]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

/// `requests` and `limits` (not `claims`, which quota does not charge).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct ResourceRequirements {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceMap>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<ResourceMap>,
}

/// `status`: phase and QoS, the kept conditions, in-place resize resources, claim statuses.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(
        default,
        deserialize_with = "kept_pod_conditions",
        skip_serializing_if = "Option::is_none"
    )]
    pub conditions: Option<Vec<PodCondition>>,
    #[serde(
        default,
        deserialize_with = "shrunk_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub container_statuses: Option<Vec<ContainerStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Boxed, as most pods have none.
    pub extended_resource_claim_status: Option<Box<PodExtendedResourceClaimStatus>>,
    #[serde(
        default,
        deserialize_with = "shrunk_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub init_container_statuses: Option<Vec<ContainerStatus>>,
    #[serde(
        default,
        deserialize_with = "interned_opt",
        serialize_with = "str_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub phase: Option<Arc<str>>,
    #[serde(
        default,
        deserialize_with = "interned_opt",
        serialize_with = "str_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub qos_class: Option<Arc<str>>,
    #[serde(
        default,
        deserialize_with = "shrunk_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub resource_claim_statuses: Option<Vec<PodResourceClaimStatus>>,
}

/// A container status: the resources the kubelet allocated and actuated.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated_resources: Option<ResourceMap>,
    #[serde(default)]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// A pod condition without its message and probe time.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodCondition {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub status: String,
    #[serde(rename = "type", default)]
    pub type_: String,
}

impl From<&k8s_openapi::api::core::v1::Pod> for Pod {
    /// The view of a full pod: the same fields as if the pod had come from a watch.
    fn from(pod: &k8s_openapi::api::core::v1::Pod) -> Self {
        // Both sides are plain data: the round trip can only fail on a bug in a type.
        serde_json::to_value(pod)
            .and_then(serde_json::from_value)
            .expect("a pod's JSON is a pod view")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).expect("a pod view")
    }

    #[test]
    fn a_pod_keeps_what_controllers_read_and_skips_the_rest() {
        let p = pod(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                "generation": 3, "labels": { "app": "a" },
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"huge\":true}",
                    "keep": "me"
                },
                "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "o-1", "controller": true }],
                "managedFields": [{ "manager": "kubectl", "operation": "Apply", "fieldsV1": { "f:spec": {} } }],
                "selfLink": "/api/v1/namespaces/ns/pods/p"
            },
            "spec": {
                "nodeName": "n1", "priorityClassName": "high", "activeDeadlineSeconds": 30,
                "containers": [{
                    "name": "c", "image": "nginx", "env": [{ "name": "A", "value": "b" }],
                    "resources": { "requests": { "cpu": "100m" }, "limits": { "memory": "1Gi" }, "claims": [{ "name": "x" }] },
                    "livenessProbe": { "httpGet": { "path": "/", "port": 80 } }
                }],
                "initContainers": [{ "name": "side", "image": "i", "restartPolicy": "Always" }],
                "overhead": { "cpu": "10m" },
                "volumes": [{ "name": "v", "emptyDir": {} }],
                "affinity": {
                    "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [] } },
                    "podAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [{ "topologyKey": "zone", "namespaces": ["other"] }] }
                },
                "resourceClaims": [{ "name": "gpu", "resourceClaimTemplateName": "t" }]
            },
            "status": {
                "phase": "Running", "qosClass": "Burstable", "podIP": "10.0.0.1",
                "conditions": [
                    { "type": "PodScheduled", "status": "True" },
                    { "type": "Ready", "status": "True", "message": "long text", "lastProbeTime": null },
                    { "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI", "lastTransitionTime": "2026-01-01T00:00:00Z" }
                ],
                "containerStatuses": [{
                    "name": "c", "image": "nginx", "imageID": "sha256:x", "ready": true, "restartCount": 2,
                    "allocatedResources": { "cpu": "100m" }, "resources": { "requests": { "cpu": "100m" } },
                    "state": { "running": { "startedAt": "2026-01-01T00:00:00Z" } }
                }],
                "resourceClaimStatuses": [{ "name": "gpu", "resourceClaimName": "p-gpu-x" }],
                "extendedResourceClaimStatus": { "resourceClaimName": "ext", "requestMappings": [] }
            }
        }));
        let meta = &p.metadata;
        assert_eq!(
            (
                meta.name.as_deref(),
                meta.namespace.as_deref(),
                meta.uid.as_deref()
            ),
            (Some("p"), Some("ns"), Some("u-1"))
        );
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert_eq!(meta.generation, Some(3));
        assert_eq!(
            meta.labels,
            Some(BTreeMap::from([("app".into(), "a".into())]))
        );
        assert_eq!(
            (
                &meta.annotations,
                &meta.generate_name,
                &meta.creation_timestamp
            ),
            (&None, &None, &None),
            "no controller reads a pod's annotations, generateName or creationTimestamp"
        );
        assert_eq!(meta.owner_references.as_ref().map(Vec::len), Some(1));
        assert_eq!((&meta.managed_fields, &meta.self_link), (&None, &None));

        let spec = p.spec.as_ref().expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(spec.priority_class_name.as_deref(), Some("high"));
        assert_eq!(spec.active_deadline_seconds, Some(30));
        let c = &spec.containers[0];
        assert_eq!(c.name, "c");
        let res = c.resources.as_ref().expect("resources");
        assert_eq!(
            res.requests.as_ref().map(|r| r["cpu"].0.as_str()),
            Some("100m")
        );
        assert_eq!(
            res.limits.as_ref().map(|r| r["memory"].0.as_str()),
            Some("1Gi")
        );
        let init = spec.init_containers.as_ref().expect("init containers");
        assert_eq!(init[0].restart_policy.as_deref(), Some("Always"));
        assert_eq!(init[0].resources, None);
        assert_eq!(
            spec.overhead.as_ref().map(|o| o["cpu"].0.as_str()),
            Some("10m")
        );
        let affinity = spec.affinity.as_ref().expect("affinity");
        assert!(affinity.pod_affinity.is_some() && affinity.pod_anti_affinity.is_none());
        assert_eq!(spec.resource_claims.as_ref().map(Vec::len), Some(1));

        let status = p.status.as_ref().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.qos_class.as_deref(), Some("Burstable"));
        let kept: Vec<&str> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(kept, ["Ready", "DisruptionTarget"], "only conditions read");
        let target = &status.conditions.as_ref().expect("conditions")[1];
        assert_eq!(target.reason.as_deref(), Some("EvictionByEvictionAPI"));
        assert!(target.last_transition_time.is_some());
        let cs = &status.container_statuses.as_ref().expect("statuses")[0];
        assert_eq!(cs.name, "c");
        assert!(cs.allocated_resources.is_some() && cs.resources.is_some());
        assert_eq!(
            status
                .resource_claim_statuses
                .as_ref()
                .map(|s| s[0].resource_claim_name.as_deref()),
            Some(Some("p-gpu-x"))
        );
        assert_eq!(
            status
                .extended_resource_claim_status
                .as_ref()
                .map(|s| s.resource_claim_name.as_str()),
            Some("ext")
        );
    }

    #[test]
    fn a_resource_list_reads_by_name_in_name_order_and_the_last_duplicate_wins() {
        let list: ResourceMap =
            serde_json::from_str(r#"{"memory": "1Gi", "cpu": "1", "cpu": "2", "a/b": "3"}"#)
                .expect("list");
        let names: Vec<&str> = list.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a/b", "cpu", "memory"]);
        assert_eq!(list.get("cpu").map(|q| q.0.as_str()), Some("2"));
        assert_eq!(list.get("gpu"), None);
        assert_eq!(
            serde_json::to_string(&list).expect("json"),
            r#"{"a/b":"3","cpu":"2","memory":"1Gi"}"#
        );
        assert!(serde_json::from_str::<ResourceMap>(r#"{"cpu": []}"#).is_err());
    }

    #[test]
    fn missing_and_null_fields_are_empty_not_errors() {
        assert_eq!(pod(json!({})), Pod::default());
        let p = pod(json!({
            "metadata": { "name": "p", "annotations": null, "labels": {} },
            "spec": { "containers": [{ "name": "c" }], "initContainers": null },
            "status": { "conditions": null, "containerStatuses": [] }
        }));
        assert_eq!(p.metadata.annotations, None);
        assert_eq!(p.metadata.labels, Some(BTreeMap::new()));
        let spec = p.spec.expect("spec");
        assert_eq!(spec.containers.len(), 1);
        assert_eq!(spec.init_containers, None);
        let status = p.status.expect("status");
        assert_eq!(status.conditions, None);
        assert_eq!(status.container_statuses, Some(Vec::new()));
        // A spec without containers (not valid, but not ours to refuse) reads as none.
        assert!(
            pod(json!({ "spec": {} }))
                .spec
                .expect("spec")
                .containers
                .is_empty()
        );
    }

    #[test]
    fn wrong_types_in_read_fields_are_errors_and_in_skipped_fields_are_not() {
        let bad_read = serde_json::from_value::<Pod>(json!({ "spec": { "containers": "x" } }));
        assert!(
            bad_read.is_err(),
            "a field controllers read must have its type"
        );
        let odd_skipped = pod(json!({
            "metadata": { "name": "p", "managedFields": "not a list", "selfLink": 5 },
            "spec": { "containers": [], "volumes": 7, "hostNetwork": "yes" },
            "status": { "podIP": [], "conditions": [{ "type": "Initialized", "status": "True" }] }
        }));
        assert_eq!(odd_skipped.metadata.name.as_deref(), Some("p"));
        assert_eq!(
            odd_skipped.status.and_then(|s| s.conditions),
            Some(Vec::new()),
            "a condition type nobody reads is dropped"
        );
    }

    #[test]
    fn a_view_of_a_full_pod_equals_the_view_of_its_json() {
        let full: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": { "name": "p", "namespace": "ns" },
            "spec": { "containers": [{ "name": "c", "image": "i", "resources": { "requests": { "cpu": "1" } } }] },
            "status": { "phase": "Pending", "conditions": [{ "type": "Ready", "status": "False" }] }
        }))
        .expect("pod");
        let json = serde_json::to_value(&full).expect("json");
        assert_eq!(Pod::from(&full), pod(json));
    }
}
