//! Compact stored views: list and watch responses are deserialized straight into these
//! types, and serde skips every field no controller reads, so the large parts of an object
//! (a pod's env, volumes, images, probes, managedFields, kubectl's last-applied annotation)
//! are never allocated, not even for a moment.
//!
//! A view keeps the field names and nesting of its k8s-openapi type for the fields it holds,
//! so the pure decision functions read it much as they read the full object. The views are
//! not k8s-openapi types, so they are never sent back to the API server: a write that needs
//! more of an object than its view holds patches, or reads the object first.
//!
//! Two departures from that shape, both for memory:
//! - A stored pod's `metadata` is a [`PodMeta`] (name, namespace, uid, resourceVersion and the
//!   deletion fields), not an [`ObjectMeta`], which is 360 bytes of mostly empty fields in
//!   every pod. kube's watcher needs `kube::Resource::meta` (for resourceVersion), so it
//!   hands over a [`WatchedPod`], which the store turns into a [`Pod`] by moving its fields.
//!   A pod's labels and owner references are fields of the view beside its metadata
//!   ([`Pod::labels`], [`Pod::owner_references`]): in an `ObjectMeta` they would be a B-tree
//!   (a 550-byte node for one label) and a list of full references.
//! - What the pods of one workload have alike (their label set, owner references, containers
//!   and container statuses) is interned (see [`super::intern`]): equal lists are one
//!   allocation, shared by every pod that has them, so a pod costs little more than its
//!   `ObjectMeta`, its name and uid and its conditions.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    PodAffinity, PodAntiAffinity, PodExtendedResourceClaimStatus, PodResourceClaim,
    PodResourceClaimStatus, PodSchedulingGroup,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Deserializer, Serialize};

use super::intern::{Interner, intern};
use super::selector::LabelSet;

/// The annotation kubelets read (`v1.ObjectTTLAnnotationKey`): the TTL controller's, and
/// all of a node's metadata kcm stores besides its identity.
pub const TTL_ANNOTATION: &str = "node.alpha.kubernetes.io/ttl";

/// A pod's `metadata` as controllers read it. Not `managedFields` and `selfLink` (often most
/// of an object's bytes), nor what no controller reads of a pod: annotations (kubectl's
/// last-applied one among them), finalizers, generateName, generation, creationTimestamp.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaWire {
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    labels: Option<Labels>,
    name: Option<Box<str>>,
    #[serde(default, deserialize_with = "interned_opt")]
    namespace: Option<Arc<str>>,
    owner_references: Option<Vec<OwnerRef>>,
    resource_version: Option<String>,
    uid: Option<Box<str>>,
}

/// A pod as it comes over the wire, before its metadata is split (see [`Pod`]).
#[derive(Deserialize)]
struct PodWire {
    #[serde(default)]
    metadata: MetaWire,
    spec: Option<PodSpec>,
    status: Option<PodStatus>,
}

/// The pod conditions some controller reads: readiness and DisruptionTarget (disruption),
/// PodResizePending (quota). The others (scheduled, initialized, ...) are dropped.
const KEPT_POD_CONDITIONS: [&str; 3] = ["Ready", "DisruptionTarget", "PodResizePending"];

/// Whether a pod condition of this type is kept (see [`KEPT_POD_CONDITIONS`]).
pub(crate) fn is_kept_condition(type_: &str) -> bool {
    KEPT_POD_CONDITIONS.contains(&type_)
}

/// A list without spare capacity (serde grows a `Vec` as it reads, to room for 4 entries at
/// the first, and a pod's lists mostly hold one entry), and 8 bytes smaller than a `Vec`.
fn boxed_opt<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Box<[T]>>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.map(Vec::into_boxed_slice))
}

/// A string most pods share (phase, QoS class, node, priority class), held once per process.
fn interned_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<str>>, D::Error> {
    Ok(Option::<Interned>::deserialize(d)?.map(|s| s.0))
}

/// [`interned_opt`], for a string that is required (missing is empty, null is an error).
fn interned<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
    Ok(Interned::deserialize(d)?.0)
}

/// A string read straight into its shared copy: the text is looked up as the parser has it,
/// so no `String` is allocated (and freed again) for a value already held.
struct Interned(Arc<str>);

impl<'de> Deserialize<'de> for Interned {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Interned;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Interned, E> {
                Ok(Interned(intern(s)))
            }
        }
        d.deserialize_str(Text)
    }
}

/// A value that may be null, read as its default then, as k8s-openapi reads required fields.
fn null_as_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// An element type whose lists are interned: the pods of one workload have equal ones.
pub(crate) trait SharedList: Hash + Eq + Sized + 'static {
    fn lists() -> &'static Interner<[Self]>;
}

impl SharedList for Container {
    fn lists() -> &'static Interner<[Self]> {
        static LISTS: Interner<[Container]> = Interner::new();
        &LISTS
    }
}

impl SharedList for ContainerStatus {
    fn lists() -> &'static Interner<[Self]> {
        static LISTS: Interner<[ContainerStatus]> = Interner::new();
        &LISTS
    }
}

impl SharedList for OwnerRef {
    fn lists() -> &'static Interner<[Self]> {
        static LISTS: Interner<[OwnerRef]> = Interner::new();
        &LISTS
    }
}

/// The shared copy of a list (see [`SharedList`]).
fn shared_list<'de, D: Deserializer<'de>, T: Deserialize<'de> + SharedList>(
    d: D,
) -> Result<Arc<[T]>, D::Error> {
    Ok(T::lists().intern(Vec::<T>::deserialize(d)?))
}

/// The shared copy of `list` (see [`SharedList`]).
pub(crate) fn shared<T: SharedList>(list: Vec<T>) -> Arc<[T]> {
    T::lists().intern(list)
}

/// [`shared_list`], for a list that may be missing or null.
fn shared_list_opt<'de, D: Deserializer<'de>, T: Deserialize<'de> + SharedList>(
    d: D,
) -> Result<Option<Arc<[T]>>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.map(|list| T::lists().intern(list)))
}

fn kept_pod_conditions<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Box<[PodCondition]>>, D::Error> {
    let conditions = Option::<Vec<PodCondition>>::deserialize(d)?;
    Ok(conditions.map(|mut list| {
        list.retain(|c| is_kept_condition(&c.type_));
        list.into_boxed_slice()
    }))
}

/// Sorts `(name, value)` entries by name, keeping the last of equal names: a map's
/// last-insert-wins.
fn sort_last_wins<V>(list: &mut Vec<(Arc<str>, V)>) {
    list.sort_by(|a, b| a.0.cmp(&b.0));
    list.reverse();
    list.dedup_by(|later, kept| later.0 == kept.0);
    list.reverse();
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

/// Quantities compare as their text (k8s-openapi's `Quantity` is `PartialEq` only), which is
/// an equivalence, so lists holding resource maps can be interned.
impl Eq for ResourceMap {}

impl Hash for ResourceMap {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_usize(self.0.len());
        for (name, quantity) in self {
            name.hash(state);
            quantity.0.hash(state);
        }
    }
}

impl ResourceMap {
    fn from_list(mut list: Vec<(Arc<str>, Quantity)>) -> Self {
        sort_last_wins(&mut list);
        Self(list.into_boxed_slice())
    }
}

impl<K: AsRef<str>> FromIterator<(K, Quantity)> for ResourceMap {
    fn from_iter<I: IntoIterator<Item = (K, Quantity)>>(entries: I) -> Self {
        Self::from_list(exact_list(
            entries.into_iter().map(|(k, v)| (intern(k.as_ref()), v)),
        ))
    }
}

/// `entries` in a list of their number: `collect` from a decoded message's list reuses that
/// list's larger allocation in place, which boxing then reallocates smaller, on every event.
fn exact_list<T>(entries: impl Iterator<Item = T>) -> Vec<T> {
    let mut list = Vec::with_capacity(entries.size_hint().0);
    list.extend(entries);
    list
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

/// Reads a JSON object's entries one by one, for a map kept as a list; keys are interned.
struct Entries<V>(&'static str, std::marker::PhantomData<V>);

impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Entries<V> {
    type Value = Vec<(Arc<str>, V)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut list = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some((key, value)) = map.next_entry::<Interned, V>()? {
            list.push((key.0, value));
        }
        Ok(list)
    }
}

impl<'de> Deserialize<'de> for ResourceMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let what = "a map of resource names to quantities";
        let entries = d.deserialize_map(Entries::<Quantity>(what, Default::default()))?;
        Ok(Self::from_list(entries))
    }
}

impl Serialize for ResourceMap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

/// One label: key and value.
type Label = (Arc<str>, Arc<str>);

static LABEL_SETS: Interner<Box<[Label]>> = Interner::new();

/// A pod's labels: sorted `(key, value)` pairs rather than a `BTreeMap` (a B-tree leaf is
/// about 550 bytes even for one label, plus a string per key and value). Keys and values are
/// interned, and so is the set: the pods of one workload share one allocation. Read by key
/// with [`Labels::get`] or in key order with [`Labels::iter`]; a key given twice keeps its
/// last value, as a map would. Selectors match it as they match `metadata.labels`
/// ([`LabelSet`]). The set is behind a thin pointer (an `Arc` of a box, 8 bytes, where an
/// `Arc<[Label]>` is 16): those 8 bytes keep a stored pod in jemalloc's 384-byte size class
/// rather than the 448-byte one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Labels(Arc<Box<[Label]>>);

impl Labels {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| self.0[i].1.as_ref())
    }

    /// Labels in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Default for Labels {
    fn default() -> Self {
        Self(LABEL_SETS.intern(Box::<[Label]>::default()))
    }
}

impl Labels {
    fn from_list(mut list: Vec<Label>) -> Self {
        sort_last_wins(&mut list);
        Self(LABEL_SETS.intern(list.into_boxed_slice()))
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Labels {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(labels: I) -> Self {
        Self::from_list(exact_list(
            labels
                .into_iter()
                .map(|(k, v)| (intern(k.as_ref()), intern(v.as_ref()))),
        ))
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let what = "a map of label keys to values";
        let entries = d.deserialize_map(Entries::<Interned>(what, Default::default()))?;
        Ok(Self::from_list(
            entries.into_iter().map(|(k, v)| (k, v.0)).collect(),
        ))
    }
}

impl Serialize for Labels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl LabelSet for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

/// An owner reference as controllers read it (not `blockOwnerDeletion`). Missing or null
/// fields read as empty, as k8s-openapi reads them: a reference without a kind is an error
/// for the disruption controller to report, not a pod to drop.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRef {
    #[serde(default, deserialize_with = "null_as_default")]
    pub api_version: String,
    /// `controller: true`; missing or null is false.
    #[serde(default, deserialize_with = "null_as_default")]
    pub controller: bool,
    #[serde(default, deserialize_with = "null_as_default")]
    pub kind: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub uid: String,
}

/// A stored pod's `metadata`: what controllers read of it, with `ObjectMeta`'s field names
/// and types, so code reads it as it would read an `ObjectMeta`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMeta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<Box<str>>,
    /// Interned: the pods of a namespace share its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<Box<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<Box<str>>,
}

impl From<MetaWire> for PodMeta {
    fn from(meta: MetaWire) -> Self {
        PodMeta {
            deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
            deletion_timestamp: meta.deletion_timestamp,
            name: meta.name,
            namespace: meta.namespace,
            resource_version: meta.resource_version.map(String::into_boxed_str),
            uid: meta.uid,
        }
    }
}

/// A pod as kube's watcher and `Api` hand it over: `kube::Resource` needs an [`ObjectMeta`]
/// for the resourceVersion, which is all it holds here; the rest of the metadata is in
/// `pod`. It lives only until the store turns it into a [`Pod`], moving the version over.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(from = "PodWire")]
pub struct WatchedPod {
    pub metadata: ObjectMeta,
    pod: Pod,
}

impl From<PodWire> for WatchedPod {
    fn from(mut wire: PodWire) -> Self {
        let resource_version = wire.metadata.resource_version.take();
        WatchedPod::new(resource_version, wire.into())
    }
}

impl WatchedPod {
    /// A watched pod from its stored view and its resourceVersion.
    pub(crate) fn new(resource_version: Option<String>, pod: Pod) -> Self {
        WatchedPod {
            metadata: ObjectMeta {
                resource_version,
                ..ObjectMeta::default()
            },
            pod,
        }
    }
}

impl From<WatchedPod> for Pod {
    fn from(watched: WatchedPod) -> Self {
        let mut pod = watched.pod;
        pod.metadata.resource_version = watched
            .metadata
            .resource_version
            .map(String::into_boxed_str);
        pod
    }
}

impl From<&Pod> for WatchedPod {
    /// For the writer, which takes a `kube::Resource` (its name, namespace, resourceVersion).
    fn from(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        WatchedPod {
            metadata: ObjectMeta {
                name: meta.name.as_deref().map(String::from),
                namespace: meta.namespace.as_deref().map(String::from),
                resource_version: meta.resource_version.as_deref().map(String::from),
                uid: meta.uid.as_deref().map(String::from),
                ..ObjectMeta::default()
            },
            pod: pod.clone(),
        }
    }
}

impl Serialize for WatchedPod {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.pod.serialize(s)
    }
}

impl k8s_openapi::Resource for WatchedPod {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for WatchedPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A pod as the quota, disruption and resourceclaim controllers read it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(from = "PodWire")]
pub struct Pod {
    /// Labels and owner references are the next fields.
    pub metadata: PodMeta,
    /// `metadata.labels`.
    pub labels: Labels,
    /// `metadata.ownerReferences`, an interned list (empty when there are none).
    pub owner_references: Arc<[OwnerRef]>,
    pub spec: Option<PodSpec>,
    pub status: Option<PodStatus>,
}

/// A stored pod and its `Arc` counts (16 bytes) fit jemalloc's 384-byte size class; the
/// next class is 448 bytes, 64 more per stored pod.
const _: () = assert!(std::mem::size_of::<Pod>() + 16 <= 384);

/// A pod's JSON as the view has it: labels and owner references back in `metadata`.
#[derive(Serialize)]
struct PodJson<'a> {
    metadata: MetaJson<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<&'a PodSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a PodStatus>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MetaJson<'a> {
    #[serde(flatten)]
    meta: &'a PodMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<&'a Labels>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner_references: Option<&'a [OwnerRef]>,
}

impl Serialize for Pod {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let json = PodJson {
            metadata: MetaJson {
                meta: &self.metadata,
                labels: (!self.labels.is_empty()).then_some(&self.labels),
                owner_references: (!self.owner_references.is_empty())
                    .then_some(&self.owner_references),
            },
            spec: self.spec.as_ref(),
            status: self.status.as_ref(),
        };
        json.serialize(s)
    }
}

impl Pod {
    /// `metav1.GetControllerOf`: the owner reference that is the pod's controller.
    pub fn controller(&self) -> Option<&OwnerRef> {
        self.owner_references.iter().find(|r| r.controller)
    }

    /// The metadata (`kube::Resource::meta`'s counterpart; a stored pod is not a
    /// `kube::Resource`, see [`WatchedPod`]).
    pub fn meta(&self) -> &PodMeta {
        &self.metadata
    }

    /// `ResourceExt::name_any`: the name (a stored pod always has one).
    pub fn name_any(&self) -> String {
        self.metadata
            .name
            .as_deref()
            .unwrap_or_default()
            .to_string()
    }

    /// `ResourceExt::namespace`.
    pub fn namespace(&self) -> Option<String> {
        self.metadata.namespace.as_deref().map(String::from)
    }

    /// `ResourceExt::uid`.
    pub fn uid(&self) -> Option<String> {
        self.metadata.uid.as_deref().map(String::from)
    }

    /// `ResourceExt::resource_version`.
    pub fn resource_version(&self) -> Option<String> {
        self.metadata.resource_version.as_deref().map(String::from)
    }

    /// `Resource::object_ref`, for events about the pod.
    pub fn object_ref(&self) -> k8s_openapi::api::core::v1::ObjectReference {
        kube::Resource::object_ref(&WatchedPod::from(self), &())
    }
}

impl From<PodWire> for Pod {
    fn from(mut wire: PodWire) -> Self {
        let labels = wire.metadata.labels.take().unwrap_or_default();
        let owners = wire.metadata.owner_references.take().unwrap_or_default();
        Pod {
            metadata: wire.metadata.into(),
            labels,
            owner_references: OwnerRef::lists().intern(owners),
            spec: wire.spec,
            status: wire.status,
        }
    }
}

/// `spec`: resources and scheduling facts for quota, claims for resourceclaim.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Boxed, as most pods have none: 8 bytes in every pod rather than about 100.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Box<Affinity>>,
    /// An interned list: the pods of a workload share one.
    #[serde(default, deserialize_with = "shared_list")]
    pub containers: Arc<[Container]>,
    #[serde(
        default,
        deserialize_with = "shared_list_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub init_containers: Option<Arc<[Container]>>,
    #[serde(
        default,
        deserialize_with = "interned_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub node_name: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<ResourceMap>,
    #[serde(
        default,
        deserialize_with = "interned_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub priority_class_name: Option<Arc<str>>,
    /// A thin box (8 bytes), as most pods have none: room for `scheduling_group` within the
    /// size class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_claims: Option<Box<Vec<PodResourceClaim>>>,
    /// Boxed, as most pods have none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Box<ResourceRequirements>>,
    /// The PodGroup the pod belongs to (resourceclaim, DRAWorkloadResourceClaims). Boxed, as
    /// most pods have none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling_group: Option<Box<PodSchedulingGroup>>,
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
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
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
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
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
    pub conditions: Option<Box<[PodCondition]>>,
    /// An interned list: the pods of a workload mostly share one.
    #[serde(
        default,
        deserialize_with = "shared_list_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub container_statuses: Option<Arc<[ContainerStatus]>>,
    /// Boxed, as most pods have none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extended_resource_claim_status: Option<Box<PodExtendedResourceClaimStatus>>,
    #[serde(
        default,
        deserialize_with = "shared_list_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub init_container_statuses: Option<Arc<[ContainerStatus]>>,
    #[serde(
        default,
        deserialize_with = "interned_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub phase: Option<Arc<str>>,
    #[serde(
        default,
        deserialize_with = "interned_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub qos_class: Option<Arc<str>>,
    #[serde(
        default,
        deserialize_with = "boxed_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub resource_claim_statuses: Option<Box<[PodResourceClaimStatus]>>,
}

impl PodStatus {
    /// `Succeeded` or `Failed`: the pod's containers will not run again.
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"))
    }
}

/// A container status: the resources the kubelet allocated and actuated.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated_resources: Option<ResourceMap>,
    #[serde(default)]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// A pod condition without its message and probe time. Its strings are a handful of values
/// (`Ready`, `True`, a few reasons), interned.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodCondition {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(
        default,
        deserialize_with = "interned_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub reason: Option<Arc<str>>,
    #[serde(default, deserialize_with = "interned")]
    pub status: Arc<str>,
    #[serde(rename = "type", default, deserialize_with = "interned")]
    pub type_: Arc<str>,
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
        let json = json!({
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
        });
        let p = pod(json.clone());
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
        let kept = serde_json::to_value(&p).expect("json");
        let kept: Vec<&String> = kept["metadata"]
            .as_object()
            .expect("metadata")
            .keys()
            .collect();
        assert_eq!(
            kept,
            [
                "labels",
                "name",
                "namespace",
                "ownerReferences",
                "resourceVersion",
                "uid"
            ],
            "no controller reads a pod's annotations, generateName, creationTimestamp, generation, managedFields, selfLink"
        );
        // What kube's watcher hands over holds the same metadata, as an ObjectMeta.
        let watched: WatchedPod = serde_json::from_value(json).expect("watched");
        let meta = &watched.metadata;
        assert_eq!(
            (
                &meta.annotations,
                &meta.generate_name,
                &meta.creation_timestamp,
                meta.generation,
            ),
            (&None, &None, &None, None),
            "no controller reads a pod's annotations, generateName, creationTimestamp, generation"
        );
        assert_eq!((&meta.managed_fields, &meta.self_link), (&None, &None));
        assert_eq!(
            (&meta.labels, &meta.owner_references),
            (&None, &None),
            "labels and owner references are the view's own fields"
        );
        assert_eq!(Pod::from(watched), p, "the stored pod is the watched one");
        assert_eq!(p.labels.iter().collect::<Vec<_>>(), [("app", "a")]);
        assert_eq!(
            p.controller(),
            Some(&OwnerRef {
                api_version: "apps/v1".into(),
                controller: true,
                kind: "ReplicaSet".into(),
                name: "rs".into(),
                uid: "o-1".into(),
            })
        );

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
        assert_eq!(spec.resource_claims.as_deref().map(Vec::len), Some(1));

        let status = p.status.as_ref().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.qos_class.as_deref(), Some("Burstable"));
        let kept: Vec<&str> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| &*c.type_)
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
        assert_eq!(
            serde_json::to_value(&p).expect("json")["metadata"],
            json!({ "name": "p" }),
            "null annotations and empty labels are not kept"
        );
        assert!(p.labels.is_empty());
        assert!(p.owner_references.is_empty());
        let spec = p.spec.expect("spec");
        assert_eq!(spec.containers.len(), 1);
        assert_eq!(spec.init_containers, None);
        let status = p.status.expect("status");
        assert_eq!(status.conditions, None);
        assert_eq!(status.container_statuses.as_deref(), Some(&[][..]));
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
            "metadata": {
                "name": "p", "managedFields": "not a list", "selfLink": 5,
                "ownerReferences": [{ "kind": "ReplicaSet", "blockOwnerDeletion": "x" }]
            },
            "spec": { "containers": [], "volumes": 7, "hostNetwork": "yes" },
            "status": { "podIP": [], "conditions": [{ "type": "Initialized", "status": "True" }] }
        }));
        assert_eq!(odd_skipped.metadata.name.as_deref(), Some("p"));
        assert_eq!(
            odd_skipped.status.and_then(|s| s.conditions).as_deref(),
            Some(&[][..]),
            "a condition type nobody reads is dropped"
        );
    }

    #[test]
    fn labels_read_by_key_in_key_order_and_the_last_duplicate_wins() {
        let p = pod(
            json!({ "metadata": { "labels": { "tier": "web", "app": "a", "app": "b", "x/y": "" } } }),
        );
        assert_eq!(
            p.labels.iter().collect::<Vec<_>>(),
            [("app", "b"), ("tier", "web"), ("x/y", "")]
        );
        assert_eq!(p.labels.get("app"), Some("b"));
        assert_eq!(p.labels.get("x/y"), Some(""));
        assert_eq!(p.labels.get("missing"), None);
        let from_pairs: Labels = [("x/y", ""), ("tier", "web"), ("app", "b")]
            .into_iter()
            .collect();
        assert_eq!(from_pairs, p.labels);
        assert!(
            Arc::ptr_eq(&from_pairs.0, &p.labels.0),
            "equal sets are one"
        );
        assert!(
            serde_json::from_value::<Pod>(json!({ "metadata": { "labels": { "a": 1 } } })).is_err()
        );
    }

    #[test]
    fn owner_references_keep_the_controller_and_read_null_as_empty() {
        let p = pod(json!({ "metadata": { "ownerReferences": [
            { "apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u-c", "blockOwnerDeletion": true },
            { "apiVersion": "apps/v1", "kind": null, "name": "web", "uid": "u-w", "controller": true },
        ] } }));
        assert_eq!(p.owner_references.len(), 2);
        assert!(
            !p.owner_references[0].controller,
            "missing is not a controller"
        );
        let controller = p.controller().expect("a controller");
        assert_eq!(
            (&*controller.kind, &*controller.name, &*controller.uid),
            ("", "web", "u-w")
        );
        assert_eq!(
            pod(json!({ "metadata": { "ownerReferences": null } })).controller(),
            None
        );
    }

    #[test]
    fn pods_of_one_workload_share_their_lists() {
        let replica = |name: &str| {
            pod(json!({
                "metadata": { "name": name, "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "o", "controller": true }] },
                "spec": { "containers": [{ "name": "c", "resources": { "requests": { "cpu": "1" } } }] },
                "status": { "containerStatuses": [{ "name": "c", "allocatedResources": { "cpu": "1" } }] }
            }))
        };
        let (a, b) = (replica("a"), replica("b"));
        assert!(Arc::ptr_eq(&a.owner_references, &b.owner_references));
        let (sa, sb) = (a.spec.expect("spec"), b.spec.expect("spec"));
        assert!(Arc::ptr_eq(&sa.containers, &sb.containers));
        let statuses =
            |p: Option<PodStatus>| p.and_then(|s| s.container_statuses).expect("statuses");
        assert!(Arc::ptr_eq(&statuses(a.status), &statuses(b.status)));
    }

    #[test]
    fn a_view_of_a_full_pod_equals_the_view_of_its_json() {
        let full: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {
                "name": "p", "namespace": "ns", "labels": { "app": "a" },
                "ownerReferences": [{ "apiVersion": "v1", "kind": "ReplicationController", "name": "rc", "uid": "o", "controller": true }]
            },
            "spec": { "containers": [{ "name": "c", "image": "i", "resources": { "requests": { "cpu": "1" } } }] },
            "status": { "phase": "Pending", "conditions": [{ "type": "Ready", "status": "False" }] }
        }))
        .expect("pod");
        let json = serde_json::to_value(&full).expect("json");
        let view = Pod::from(&full);
        assert_eq!(view, pod(json));
        assert_eq!(
            pod(serde_json::to_value(&view).expect("json")),
            view,
            "a view's JSON (labels and owners in metadata) reads back as the view"
        );
    }
}
