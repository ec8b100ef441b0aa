//! How each resource type is kept in the shared stores: one shape per type for the whole
//! process, so no controller can get a differently trimmed copy from another's informer.
//! Pods are stored as compact views (`view::Pod`), deserialized without the fields nobody
//! reads; nodes come from a metadata-only watch. Everything else drops managedFields and
//! kubectl's last-applied annotation (quotas and PDBs keep the annotation, see theirs); workload controllers keep only what the disruption
//! controller reads (metadata, replicas, the Deployment owner).

use std::borrow::Borrow;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    Node, PersistentVolumeClaim, ReplicationController, ResourceQuota, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use kube::Resource;
use kube::core::PartialObjectMeta;
use serde::de::DeserializeOwned;

use crate::k8s::podgroup::PodGroup;
use crate::k8s::view::{self, TTL_ANNOTATION};
use crate::runtime::protobuf::{self, Wire};

/// A stored object in a set of one namespace's objects, hashed and compared by its own name,
/// so the set needs no copy of the name as a key (the stores' namespace sets, the quota
/// totals).
pub struct Named<K>(pub Arc<K>);

impl<K: Stored> Borrow<str> for Named<K> {
    fn borrow(&self) -> &str {
        self.0.place().1
    }
}

impl<K: Stored> Hash for Named<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.place().1.hash(state);
    }
}

impl<K: Stored> PartialEq for Named<K> {
    fn eq(&self, other: &Self) -> bool {
        self.0.place().1 == other.0.place().1
    }
}

impl<K: Stored> Eq for Named<K> {}

/// The annotation `kubectl apply` leaves on objects; large and never read by controllers.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A type that can live in a shared store, and how a watched object becomes a stored one.
pub trait Stored: Clone + Debug + Send + Sync + 'static {
    /// What the watch lists and watches (kube's watcher needs a `kube::Resource`).
    type Watched: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static;

    /// The stored shape of a watched object: what no controller reads dropped.
    fn from_watched(watched: Self::Watched) -> Self;

    /// How the watched type is read in protobuf; `None`: always in JSON. Given for the types
    /// kcm keeps many of (pods, nodes) and those whose status it writes (quotas, PDBs), whose
    /// watch events are most of what the API server encodes for it.
    fn protobuf() -> Option<Wire<Self::Watched>> {
        None
    }

    /// Namespace ("" for cluster-scoped objects) and name: the store's key.
    fn place(&self) -> (&str, &str);

    /// `metadata.resourceVersion`, to tell a relisted object from the stored one.
    fn version(&self) -> Option<&str>;

    /// `metadata.uid`.
    fn uid(&self) -> Option<&str>;
}

/// A type stored as it is watched, less what [`Shaped::shape`] drops.
pub trait Shaped:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
    /// Drops what no controller reads, before the object is stored.
    fn shape(&mut self) {
        trim_metadata(self);
    }

    /// See [`Stored::protobuf`].
    fn protobuf() -> Option<Wire<Self>> {
        None
    }
}

impl<K: Shaped> Stored for K {
    type Watched = K;

    fn from_watched(mut watched: K) -> K {
        watched.shape();
        watched
    }

    fn protobuf() -> Option<Wire<K>> {
        <K as Shaped>::protobuf()
    }

    fn place(&self) -> (&str, &str) {
        let meta = self.meta();
        (
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }

    fn version(&self) -> Option<&str> {
        self.meta().resource_version.as_deref()
    }

    fn uid(&self) -> Option<&str> {
        self.meta().uid.as_deref()
    }
}

/// managedFields and the last-applied annotation can be most of an object's size.
pub fn trim_metadata<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

/// managedFields alone: a write that leaves them out keeps the server's.
fn trim_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// Deserialized compact (see [`view`]): there is nothing left to drop, and the metadata kube's
/// watcher needed moves into the pod's compact one.
impl Stored for view::Pod {
    type Watched = view::WatchedPod;

    fn from_watched(watched: view::WatchedPod) -> Self {
        watched.into()
    }

    fn protobuf() -> Option<Wire<view::WatchedPod>> {
        Some(protobuf::pod::wire())
    }

    fn place(&self) -> (&str, &str) {
        (
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default(),
        )
    }

    fn version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }

    fn uid(&self) -> Option<&str> {
        self.metadata.uid.as_deref()
    }
}

/// Nodes as the TTL controller reads them: name and annotations. kube sends every request
/// of an `Api<PartialObjectMeta<_>>` as a metadata-only one, so a node's spec and status
/// (images, conditions, addresses) never reach kcm.
pub type NodeMeta = PartialObjectMeta<Node>;

/// Only the TTL controller (and `kcm explain` after it) reads nodes, and of their labels and
/// annotations only the TTL annotation: the rest (a kubelet sets a dozen of each) would be
/// two B-trees per node held for nothing, about 1 MiB at 2 000 nodes.
impl Shaped for NodeMeta {
    fn shape(&mut self) {
        let meta = &mut self.metadata;
        meta.managed_fields = None;
        meta.labels = None;
        if let Some(annotations) = meta.annotations.as_mut() {
            annotations.retain(|key, _| key == TTL_ANNOTATION);
            if annotations.is_empty() {
                meta.annotations = None;
            }
        }
    }

    fn protobuf() -> Option<Wire<Self>> {
        Some(protobuf::metadata())
    }
}
impl Shaped for Lease {}
impl Shaped for StorageVersion {}

/// Quota and PDB statuses are written with a PUT of the whole object, and kube-apiserver takes
/// the labels, annotations, finalizers and owners of such a status write from its body
/// (checked on v1.36.2; claims and StorageVersions keep their stored metadata). Dropping the
/// last-applied annotation here would delete it from the object at every status write.
impl Shaped for PodDisruptionBudget {
    fn shape(&mut self) {
        trim_managed_fields(self);
    }

    fn protobuf() -> Option<Wire<Self>> {
        Some(protobuf::poddisruptionbudget::wire())
    }
}

/// See [`PodDisruptionBudget`]'s.
impl Shaped for ResourceQuota {
    fn shape(&mut self) {
        trim_managed_fields(self);
    }

    fn protobuf() -> Option<Wire<Self>> {
        Some(protobuf::resourcequota::wire())
    }
}
impl Shaped for Service {}
impl Shaped for PersistentVolumeClaim {}
impl Shaped for ResourceClaim {}
impl Shaped for DeviceClass {}
impl Shaped for ResourceClaimTemplate {}
impl Shaped for PodGroup {}

impl Shaped for ReplicationController {
    fn shape(&mut self) {
        trim_metadata(self);
        self.status = None;
        if let Some(spec) = self.spec.as_mut() {
            spec.template = None;
        }
    }
}

impl Shaped for ReplicaSet {
    fn shape(&mut self) {
        trim_metadata(self);
        self.status = None;
        self.spec.template = None;
    }
}

impl Shaped for Deployment {
    fn shape(&mut self) {
        trim_metadata(self);
        self.status = None;
        self.spec.template = Default::default();
    }
}

impl Shaped for StatefulSet {
    fn shape(&mut self) {
        trim_metadata(self);
        self.status = None;
        self.spec.template = Default::default();
        self.spec.volume_claim_templates = None;
    }
}

/// `namespace/name`, the key controllers queue and index objects by (client-go's
/// `MetaNamespaceKeyFunc`, with the namespace always present).
pub fn key_of<K: Stored>(obj: &K) -> String {
    let (namespace, name) = obj.place();
    join_key(namespace, name)
}

/// The [`key_of`] key of `namespace` and `name`. Sized once: handlers build one for nearly
/// every watch event, and `format!` grows its string from a guess, a reallocation or two each.
pub fn join_key(namespace: &str, name: &str) -> String {
    let mut key = String::with_capacity(namespace.len() + 1 + name.len());
    key.push_str(namespace);
    key.push('/');
    key.push_str(name);
    key
}

/// The namespace and name of a [`key_of`] key. An apiVersion splits the same way into its
/// group and version (no '/': the core group, as a cluster-scoped key has no namespace).
pub fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

/// `metav1.GetControllerOf`: the owner reference marked as the object's controller.
pub fn controller_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(metadata: serde_json::Value) -> NodeMeta {
        serde_json::from_value(json!({
            "apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadata",
            "metadata": metadata,
        }))
        .expect("valid node metadata")
    }

    #[test]
    fn a_stored_node_keeps_its_identity_and_ttl_annotation_only() {
        let stored = NodeMeta::from_watched(node(json!({
            "name": "n1", "uid": "u1", "resourceVersion": "7",
            "labels": { "kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux" },
            "annotations": {
                TTL_ANNOTATION: "15",
                "node.alpha.kubernetes.io/other": "x",
                LAST_APPLIED: "{}",
            },
            "managedFields": [{ "manager": "kubelet", "operation": "Update" }],
        })));
        let meta = &stored.metadata;
        assert_eq!(stored.place(), ("", "n1"));
        assert_eq!((stored.uid(), stored.version()), (Some("u1"), Some("7")));
        assert_eq!(meta.labels, None);
        assert_eq!(meta.managed_fields, None);
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.into_iter().collect::<Vec<_>>(),
            [(TTL_ANNOTATION.to_string(), "15".to_string())]
        );

        let bare = NodeMeta::from_watched(node(json!({
            "name": "n2", "annotations": { "node.alpha.kubernetes.io/other": "x" },
        })));
        assert_eq!(bare.metadata.annotations, None);
    }
}
