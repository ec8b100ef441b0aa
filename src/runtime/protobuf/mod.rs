//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) for the lists and
//! watches of the built-in types kcm keeps most of or writes most: pods, node metadata,
//! ResourceQuotas and PodDisruptionBudgets, and for the status PUTs of the last two. It is what
//! kube-controller-manager speaks by default (`--kube-api-content-type`), and it is cheaper for
//! the API server, which encodes every watch event kcm receives and decodes every body kcm
//! sends, and for kcm. Node patches stay JSON (a patch has no protobuf form), as upstream's.
//!
//! Every request asks for `application/vnd.kubernetes.protobuf, application/json`, as client-go
//! does, and the answer is decoded by the `Content-Type` it comes with: a server (or an
//! aggregated API) that cannot answer in protobuf answers JSON, read as before.
//!
//! On the wire (checked against kube-apiserver v1.36): an object or a list is the magic
//! `k8s\0` and a `runtime.Unknown` whose `raw` is the object's message; a list's items are bare
//! messages. A watch stream is a sequence of frames, each a 4-byte big-endian length and a bare
//! `metav1.WatchEvent` {type, object}, whose object is again `k8s\0` + `runtime.Unknown`.
//!
//! Why the messages are declared here, with prost for the wire format, rather than taken from
//! `k8s-pb` (kube-rs's generated bindings): `k8s-pb` decodes every field of a pod (its env,
//! volumes, probes, managedFields, …) into owned strings and maps, which kcm's stores exist to
//! avoid (see [`super::view`]); and it is generated from Kubernetes 1.35, so a 1.36 field kcm
//! reads (`spec.schedulingGroup`) would be dropped without a trace. The messages below hold
//! only the fields kcm keeps, with upstream's field numbers; prost skips every other field
//! without allocating, as serde skips them in the JSON views. kube has no protobuf support.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use bytes::{Buf, Bytes, BytesMut};
use futures::StreamExt;
use futures::stream::BoxStream;
use http_body_util::BodyExt;
use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ListMeta, ObjectMeta, OwnerReference, Time,
};
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::client::Body;
use kube::core::response::{StatusCause, StatusDetails, StatusSummary};
use kube::core::watch::{Bookmark, BookmarkMeta};
use kube::core::{ObjectList, PartialObjectMeta, Status, TypeMeta};
use kube::{Client, Resource};
use prost::Message;
use serde::de::DeserializeOwned;

pub mod pod;
pub mod poddisruptionbudget;
pub mod resourcequota;

/// The media type of Kubernetes protobuf bodies.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8] = b"k8s\0";

/// How kcm reads the built-in types that can come as protobuf (`--kube-api-content-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentType {
    /// Asks for protobuf, JSON accepted as a fallback (upstream's default).
    #[default]
    Protobuf,
    /// Asks for JSON only.
    Json,
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("the body does not start with the protobuf magic number")]
    NoMagic,
    #[error("invalid protobuf: {0}")]
    Wire(#[from] prost::DecodeError),
    #[error("content encoding {0:?} is not supported")]
    ContentEncoding(String),
    #[error("unknown watch event type {0:?}")]
    EventType(String),
    #[error("a watch frame of {0} bytes is larger than the limit")]
    FrameTooLarge(usize),
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl From<DecodeError> for kube::Error {
    fn from(err: DecodeError) -> Self {
        kube::Error::ReadEvents(std::io::Error::new(std::io::ErrorKind::InvalidData, err))
    }
}

/// How one type is read in protobuf: what to ask for, and how an object's message becomes `K`.
pub struct Wire<K> {
    /// `Accept` of a list; the JSON fallbacks included.
    pub list_accept: &'static str,
    /// `Accept` of a watch.
    pub watch_accept: &'static str,
    /// An object's message (the `raw` of its envelope) into `K`.
    pub decode: fn(Bytes) -> Result<K, DecodeError>,
    /// A DELETED event's object into `K`. The informer hands its handlers the version it
    /// stored and reads only the deleted object's name, namespace and resourceVersion, so a
    /// type may read less of it than [`Wire::decode`] does.
    pub decode_deleted: fn(Bytes) -> Result<K, DecodeError>,
}

impl<K> Wire<K> {
    /// Every object read by `decode`, deleted ones included.
    pub const fn new(
        list_accept: &'static str,
        watch_accept: &'static str,
        decode: fn(Bytes) -> Result<K, DecodeError>,
    ) -> Self {
        Self {
            list_accept,
            watch_accept,
            decode,
            decode_deleted: decode,
        }
    }
}

impl<K> Clone for Wire<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Wire<K> {}

/// The `Accept` of a full object's list or watch.
pub const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// The `Accept` of a metadata-only list, as client-go's metadata client sends it.
pub const METADATA_LIST_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json";

/// The `Accept` of a metadata-only object or watch.
pub const METADATA_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";

/// [`METADATA_ACCEPT`] without protobuf (`--kube-api-content-type=application/json`).
const METADATA_JSON_ACCEPT: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";

/// Metadata-only objects (`PartialObjectMetadata`) of any type.
pub fn metadata<K>() -> Wire<PartialObjectMeta<K>> {
    Wire::new(METADATA_LIST_ACCEPT, METADATA_ACCEPT, |raw| {
        let object = MetaOnly::decode(raw)?;
        Ok(PartialObjectMeta {
            types: Some(TypeMeta {
                api_version: "meta.k8s.io/v1".into(),
                kind: "PartialObjectMetadata".into(),
            }),
            metadata: object.metadata.unwrap_or_default().into(),
            _phantom: PhantomData,
        })
    })
}

#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMetaPb>,
    #[prost(bytes = "bytes", optional, tag = "2")]
    raw: Option<Bytes>,
    #[prost(string, optional, tag = "3")]
    content_encoding: Option<String>,
    #[prost(string, optional, tag = "4")]
    content_type: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct TypeMetaPb {
    #[prost(string, optional, tag = "1")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "2")]
    kind: Option<String>,
}

/// A request body: the object's message `raw` in its envelope, as client-go sends it.
fn envelope<K: Resource<DynamicType = ()>>(raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMetaPb {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(K::kind(&()).into_owned()),
        }),
        raw: Some(raw.into()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = MAGIC.to_vec();
    unknown
        .encode(&mut body)
        .expect("a Vec grows to hold any message");
    body
}

/// How an object kcm writes whole (a status PUT) is sent in protobuf. `None`, the default: in
/// JSON, for the types whose messages are not declared here.
pub trait ProtobufBody {
    /// The request body, envelope included.
    fn protobuf_body(&self) -> Option<Vec<u8>> {
        None
    }
}

impl ProtobufBody for Pod {}
impl ProtobufBody for ResourceClaim {}
impl ProtobufBody for StorageVersion {}

/// Any list: its metadata and its items' messages, decoded later by the item's type.
#[derive(Clone, PartialEq, Message)]
struct RawList {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ListMetaPb>,
    #[prost(bytes = "bytes", repeated, tag = "2")]
    items: Vec<Bytes>,
}

#[derive(Clone, PartialEq, Message)]
struct ListMetaPb {
    #[prost(string, optional, tag = "2")]
    resource_version: Option<String>,
    #[prost(string, optional, tag = "3")]
    continue_: Option<String>,
    #[prost(int64, optional, tag = "4")]
    remaining_item_count: Option<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct WatchEventPb {
    #[prost(string, optional, tag = "1")]
    r#type: Option<String>,
    #[prost(message, optional, tag = "2")]
    object: Option<RawExtension>,
}

#[derive(Clone, PartialEq, Message)]
struct RawExtension {
    #[prost(bytes = "bytes", optional, tag = "1")]
    raw: Option<Bytes>,
}

/// Any object, read for its metadata alone (a bookmark, a `PartialObjectMetadata`).
#[derive(Clone, PartialEq, Message)]
struct MetaOnly {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMetaPb>,
}

/// A write's answer, read for the object's resourceVersion alone.
#[derive(Clone, PartialEq, Message)]
struct VersionOnly {
    #[prost(message, optional, tag = "1")]
    metadata: Option<VersionMeta>,
}

#[derive(Clone, PartialEq, Message)]
struct VersionMeta {
    #[prost(string, optional, tag = "6")]
    resource_version: Option<String>,
}

/// The same in JSON.
#[derive(serde::Deserialize)]
struct VersionOnlyJson {
    metadata: VersionMetaJson,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct VersionMetaJson {
    resource_version: Option<String>,
}

/// A `map<string, string>` entry: a map field is a repeated message of these on the wire, so
/// it can be read as a list, without building a map first.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct StringEntry {
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TimePb {
    #[prost(int64, optional, tag = "1")]
    pub seconds: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    pub nanos: Option<i32>,
}

impl From<TimePb> for Time {
    fn from(time: TimePb) -> Self {
        let seconds = time.seconds.unwrap_or_default();
        let nanos = time.nanos.unwrap_or_default();
        // Out of range only for a corrupt message: the epoch then, never a panic.
        Time(jiff::Timestamp::new(seconds, nanos).unwrap_or_default())
    }
}

/// `ObjectMeta` without `managedFields` and `selfLink` (stores drop them, see
/// [`super::stored::trim_metadata`]).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ObjectMetaPb {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub generate_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub resource_version: Option<String>,
    #[prost(int64, optional, tag = "7")]
    pub generation: Option<i64>,
    #[prost(message, optional, tag = "8")]
    pub creation_timestamp: Option<TimePb>,
    #[prost(message, optional, tag = "9")]
    pub deletion_timestamp: Option<TimePb>,
    #[prost(int64, optional, tag = "10")]
    pub deletion_grace_period_seconds: Option<i64>,
    #[prost(message, repeated, tag = "11")]
    pub labels: Vec<StringEntry>,
    #[prost(message, repeated, tag = "12")]
    pub annotations: Vec<StringEntry>,
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<OwnerReferencePb>,
    #[prost(string, repeated, tag = "14")]
    pub finalizers: Vec<String>,
}

#[derive(Clone, PartialEq, Eq, Hash, Message)]
pub(crate) struct OwnerReferencePb {
    #[prost(string, optional, tag = "1")]
    pub kind: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub uid: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub api_version: Option<String>,
    #[prost(bool, optional, tag = "6")]
    pub controller: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    pub block_owner_deletion: Option<bool>,
}

/// A map's entries as Go's JSON has them: `None` when empty (omitempty), the last of a
/// repeated key kept.
pub(crate) fn string_map(entries: Vec<StringEntry>) -> Option<BTreeMap<String, String>> {
    (!entries.is_empty()).then(|| {
        entries
            .into_iter()
            .map(|e| (e.key.unwrap_or_default(), e.value.unwrap_or_default()))
            .collect()
    })
}

/// A string field as Go's JSON writes it: left out when empty.
fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

/// A `map<string, string>` as its entries, in key order as Go writes them.
fn entries(map: &Option<BTreeMap<String, String>>) -> Vec<StringEntry> {
    map.iter()
        .flatten()
        .map(|(key, value)| StringEntry {
            key: Some(key.clone()),
            value: Some(value.clone()),
        })
        .collect()
}

impl From<&Time> for TimePb {
    /// Seconds only: Go's `metav1.Time` writes no nanoseconds, as its JSON keeps none.
    fn from(time: &Time) -> Self {
        TimePb {
            seconds: Some(time.0.as_second()),
            nanos: None,
        }
    }
}

/// Every field a stored object keeps: a status PUT of a quota or PDB sets its labels,
/// annotations, owners and finalizers from the body (managedFields left out keep the server's).
impl From<&ObjectMeta> for ObjectMetaPb {
    fn from(meta: &ObjectMeta) -> Self {
        let ObjectMeta {
            annotations,
            creation_timestamp,
            deletion_grace_period_seconds,
            deletion_timestamp,
            finalizers,
            generate_name,
            generation,
            labels,
            managed_fields: _,
            name,
            namespace,
            owner_references,
            resource_version,
            self_link: _,
            uid,
        } = meta;
        ObjectMetaPb {
            name: name.clone(),
            generate_name: generate_name.clone(),
            namespace: namespace.clone(),
            uid: uid.clone(),
            resource_version: resource_version.clone(),
            generation: *generation,
            creation_timestamp: creation_timestamp.as_ref().map(TimePb::from),
            deletion_timestamp: deletion_timestamp.as_ref().map(TimePb::from),
            deletion_grace_period_seconds: *deletion_grace_period_seconds,
            labels: entries(labels),
            annotations: entries(annotations),
            owner_references: owner_references
                .iter()
                .flatten()
                .map(|r| OwnerReferencePb {
                    kind: Some(r.kind.clone()),
                    name: Some(r.name.clone()),
                    uid: Some(r.uid.clone()),
                    api_version: Some(r.api_version.clone()),
                    controller: r.controller,
                    block_owner_deletion: r.block_owner_deletion,
                })
                .collect(),
            finalizers: finalizers.clone().unwrap_or_default(),
        }
    }
}

impl From<ObjectMetaPb> for ObjectMeta {
    fn from(meta: ObjectMetaPb) -> Self {
        ObjectMeta {
            annotations: string_map(meta.annotations),
            creation_timestamp: meta.creation_timestamp.map(Time::from),
            deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
            deletion_timestamp: meta.deletion_timestamp.map(Time::from),
            finalizers: (!meta.finalizers.is_empty()).then_some(meta.finalizers),
            generate_name: non_empty(meta.generate_name),
            generation: meta.generation.filter(|g| *g != 0),
            labels: string_map(meta.labels),
            managed_fields: None,
            name: non_empty(meta.name),
            namespace: non_empty(meta.namespace),
            owner_references: (!meta.owner_references.is_empty()).then(|| {
                meta.owner_references
                    .into_iter()
                    .map(|r| OwnerReference {
                        api_version: r.api_version.unwrap_or_default(),
                        block_owner_deletion: r.block_owner_deletion,
                        controller: r.controller,
                        kind: r.kind.unwrap_or_default(),
                        name: r.name.unwrap_or_default(),
                        uid: r.uid.unwrap_or_default(),
                    })
                    .collect()
            }),
            resource_version: non_empty(meta.resource_version),
            self_link: None,
            uid: non_empty(meta.uid),
        }
    }
}

/// A `map<string, Quantity>` entry; a Quantity is a message holding its text.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct QuantityEntry {
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub value: Option<QuantityPb>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct QuantityPb {
    #[prost(string, optional, tag = "1")]
    pub string: Option<String>,
}

impl QuantityEntry {
    /// The entry's name and quantity (a missing one read as the empty text Go would write).
    pub fn into_pair(self) -> (String, Quantity) {
        let quantity = self.value.and_then(|q| q.string).unwrap_or_default();
        (self.key.unwrap_or_default(), Quantity(quantity))
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct LabelSelectorPb {
    #[prost(message, repeated, tag = "1")]
    match_labels: Vec<StringEntry>,
    #[prost(message, repeated, tag = "2")]
    match_expressions: Vec<LabelSelectorRequirementPb>,
}

#[derive(Clone, PartialEq, Message)]
struct LabelSelectorRequirementPb {
    #[prost(string, optional, tag = "1")]
    key: Option<String>,
    #[prost(string, optional, tag = "2")]
    operator: Option<String>,
    #[prost(string, repeated, tag = "3")]
    values: Vec<String>,
}

impl From<(&String, &Quantity)> for QuantityEntry {
    fn from((name, quantity): (&String, &Quantity)) -> Self {
        QuantityEntry {
            key: Some(name.clone()),
            value: Some(QuantityPb {
                string: Some(quantity.0.clone()),
            }),
        }
    }
}

impl From<&LabelSelector> for LabelSelectorPb {
    fn from(selector: &LabelSelector) -> Self {
        LabelSelectorPb {
            match_labels: entries(&selector.match_labels),
            match_expressions: selector
                .match_expressions
                .iter()
                .flatten()
                .map(|r| LabelSelectorRequirementPb {
                    key: Some(r.key.clone()),
                    operator: Some(r.operator.clone()),
                    values: r.values.clone().unwrap_or_default(),
                })
                .collect(),
        }
    }
}

impl From<LabelSelectorPb> for LabelSelector {
    fn from(selector: LabelSelectorPb) -> Self {
        LabelSelector {
            match_expressions: omit_empty(selector.match_expressions).map(|exprs| {
                exprs
                    .into_iter()
                    .map(|r| LabelSelectorRequirement {
                        key: r.key.unwrap_or_default(),
                        operator: r.operator.unwrap_or_default(),
                        values: omit_empty(r.values),
                    })
                    .collect()
            }),
            match_labels: string_map(selector.match_labels),
        }
    }
}

/// A `metav1.Time`: Go writes a zero time as an empty message, and its JSON as null; only
/// seconds are kept, as in JSON.
pub(crate) fn time_of(time: Option<TimePb>) -> Option<Time> {
    let seconds = time?.seconds?;
    Some(Time::from(TimePb {
        seconds: Some(seconds),
        nanos: None,
    }))
}

/// A repeated field as Go's JSON writes it: left out when empty (`omitempty`).
pub(crate) fn omit_empty<T>(list: Vec<T>) -> Option<Vec<T>> {
    (!list.is_empty()).then_some(list)
}

#[derive(Clone, PartialEq, Message)]
struct StatusPb {
    #[prost(string, optional, tag = "2")]
    status: Option<String>,
    #[prost(string, optional, tag = "3")]
    message: Option<String>,
    #[prost(string, optional, tag = "4")]
    reason: Option<String>,
    #[prost(message, optional, tag = "5")]
    details: Option<StatusDetailsPb>,
    #[prost(int32, optional, tag = "6")]
    code: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct StatusDetailsPb {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    group: Option<String>,
    #[prost(string, optional, tag = "3")]
    kind: Option<String>,
    #[prost(message, repeated, tag = "4")]
    causes: Vec<StatusCausePb>,
    #[prost(int32, optional, tag = "5")]
    retry_after_seconds: Option<i32>,
    #[prost(string, optional, tag = "6")]
    uid: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct StatusCausePb {
    #[prost(string, optional, tag = "1")]
    reason: Option<String>,
    #[prost(string, optional, tag = "2")]
    message: Option<String>,
    #[prost(string, optional, tag = "3")]
    field: Option<String>,
}

impl From<StatusPb> for Status {
    fn from(status: StatusPb) -> Self {
        Status {
            status: match status.status.as_deref() {
                Some("Success") => Some(StatusSummary::Success),
                Some("Failure") => Some(StatusSummary::Failure),
                _ => None,
            },
            code: status
                .code
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or_default(),
            message: status.message.unwrap_or_default(),
            metadata: None,
            reason: status.reason.unwrap_or_default(),
            details: status.details.map(|d| StatusDetails {
                name: d.name.unwrap_or_default(),
                group: d.group.unwrap_or_default(),
                kind: d.kind.unwrap_or_default(),
                uid: d.uid.unwrap_or_default(),
                causes: d
                    .causes
                    .into_iter()
                    .map(|c| StatusCause {
                        reason: c.reason.unwrap_or_default(),
                        message: c.message.unwrap_or_default(),
                        field: c.field.unwrap_or_default(),
                    })
                    .collect(),
                retry_after_seconds: d
                    .retry_after_seconds
                    .and_then(|s| u32::try_from(s).ok())
                    .unwrap_or_default(),
            }),
        }
    }
}

/// The object's message inside `k8s\0` + `runtime.Unknown`.
fn unwrap(mut body: Bytes) -> Result<Bytes, DecodeError> {
    if !body.starts_with(MAGIC) {
        return Err(DecodeError::NoMagic);
    }
    body.advance(MAGIC.len());
    let unknown = Unknown::decode(body)?;
    if let Some(encoding) = unknown.content_encoding.filter(|e| !e.is_empty()) {
        return Err(DecodeError::ContentEncoding(encoding));
    }
    Ok(unknown.raw.unwrap_or_default())
}

/// A list body: its metadata, and each item decoded by `item`.
pub fn decode_list<K: Clone>(
    body: Bytes,
    item: fn(Bytes) -> Result<K, DecodeError>,
) -> Result<ObjectList<K>, DecodeError> {
    let list = RawList::decode(unwrap(body)?)?;
    let meta = list.metadata.unwrap_or_default();
    Ok(ObjectList {
        types: TypeMeta::default(),
        metadata: ListMeta {
            continue_: meta.continue_,
            remaining_item_count: meta.remaining_item_count,
            resource_version: meta.resource_version,
            self_link: None,
            shard_info: None,
        },
        items: list.items.into_iter().map(item).collect::<Result<_, _>>()?,
    })
}

/// An error answer (`metav1.Status`) in protobuf.
pub fn decode_status(body: Bytes) -> Result<Status, DecodeError> {
    Ok(StatusPb::decode(unwrap(body)?)?.into())
}

/// One watch frame (a bare `metav1.WatchEvent`).
pub fn decode_event<K>(frame: Bytes, wire: Wire<K>) -> Result<WatchEvent<K>, DecodeError> {
    let event = WatchEventPb::decode(frame)?;
    let object = unwrap(event.object.and_then(|o| o.raw).unwrap_or_default())?;
    Ok(match event.r#type.as_deref().unwrap_or_default() {
        "ADDED" => WatchEvent::Added((wire.decode)(object)?),
        "MODIFIED" => WatchEvent::Modified((wire.decode)(object)?),
        "DELETED" => WatchEvent::Deleted((wire.decode_deleted)(object)?),
        "BOOKMARK" => {
            let meta = MetaOnly::decode(object)?.metadata.unwrap_or_default();
            WatchEvent::Bookmark(Bookmark {
                types: TypeMeta::default(),
                metadata: BookmarkMeta {
                    resource_version: meta.resource_version.unwrap_or_default(),
                    annotations: string_map(meta.annotations).unwrap_or_default(),
                },
            })
        }
        "ERROR" => WatchEvent::Error(Box::new(StatusPb::decode(object)?.into())),
        other => return Err(DecodeError::EventType(other.to_string())),
    })
}

/// The largest watch frame accepted (client-go's limit for a protobuf frame is 16 MiB less
/// its header room; an object over etcd's 1.5 MiB default never comes).
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Splits a protobuf watch stream into its frames: a 4-byte big-endian length, then as many
/// bytes.
#[derive(Default)]
struct Frames {
    buf: BytesMut,
}

impl Frames {
    /// The next complete frame, if the bytes so far hold one.
    fn next(&mut self) -> Result<Option<Bytes>, DecodeError> {
        let Some(header) = self.buf.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        if len > MAX_FRAME {
            return Err(DecodeError::FrameTooLarge(len));
        }
        if self.buf.len() < 4 + len {
            self.buf.reserve(4 + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(len).freeze()))
    }
}

/// Splits a JSON watch stream into its lines (one event each).
#[derive(Default)]
struct Lines {
    buf: BytesMut,
    searched: usize,
}

impl Lines {
    fn next(&mut self) -> Option<Bytes> {
        loop {
            let newline = self.buf[self.searched..].iter().position(|b| *b == b'\n');
            let Some(at) = newline else {
                self.searched = self.buf.len();
                return None;
            };
            let line = self.buf.split_to(self.searched + at + 1).freeze();
            self.searched = 0;
            if line.iter().any(|b| !b.is_ascii_whitespace()) {
                return Some(line);
            }
        }
    }
}

fn is_protobuf(response: &http::Response<Body>) -> bool {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim() == PROTOBUF)
}

/// Sends `request` asking for `accept`; an error status becomes `kube::Error::Api` with the
/// server's `Status` (protobuf or JSON), as kube reports it.
pub(crate) async fn send(
    client: &Client,
    mut request: http::Request<Vec<u8>>,
    accept: &'static str,
) -> kube::Result<http::Response<Body>> {
    request
        .headers_mut()
        .insert(http::header::ACCEPT, http::HeaderValue::from_static(accept));
    let response = client.send(request.map(Body::from)).await?;
    let code = response.status();
    if code.is_success() {
        return Ok(response);
    }
    let protobuf = is_protobuf(&response);
    let body = response.into_body().collect().await?.to_bytes();
    let status = if protobuf {
        decode_status(body.clone()).ok()
    } else {
        serde_json::from_slice::<Status>(&body).ok()
    };
    // Not every error is a Status (a proxy's page, say): its text then, as kube reads it.
    let status = status.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(&body);
        Status::failure(text.trim(), "Failed to parse error data").with_code(code.as_u16())
    });
    Err(kube::Error::Api(Box::new(status)))
}

/// Sends a write (create, update, patch) whose answer is read for one field: the
/// resourceVersion the server gave the object. The server is asked for the object's metadata
/// alone (`as=PartialObjectMetadata`, in protobuf unless `content` is JSON), so it encodes a
/// few hundred bytes instead of the whole object, and kcm decodes as little.
pub async fn write(
    client: &Client,
    request: http::Request<Vec<u8>>,
    content: ContentType,
) -> kube::Result<Option<String>> {
    let accept = match content {
        ContentType::Protobuf => METADATA_ACCEPT,
        ContentType::Json => METADATA_JSON_ACCEPT,
    };
    let response = send(client, request, accept).await?;
    let protobuf = is_protobuf(&response);
    let body = response.into_body().collect().await?.to_bytes();
    if protobuf {
        let written = VersionOnly::decode(unwrap(body)?).map_err(DecodeError::from)?;
        Ok(written.metadata.and_then(|m| m.resource_version))
    } else {
        let written: VersionOnlyJson =
            serde_json::from_slice(&body).map_err(kube::Error::SerdeError)?;
        Ok(written.metadata.resource_version)
    }
}

/// A LIST of `url` in protobuf (JSON if the server answers so).
pub async fn list<K: Clone + DeserializeOwned>(
    client: &Client,
    url: &str,
    params: &ListParams,
    wire: Wire<K>,
) -> kube::Result<ObjectList<K>> {
    let request = kube::core::Request::new(url)
        .list(params)
        .map_err(kube::Error::BuildRequest)?;
    let response = send(client, request, wire.list_accept).await?;
    let protobuf = is_protobuf(&response);
    let body = response.into_body().collect().await?.to_bytes();
    if protobuf {
        Ok(decode_list(body, wire.decode)?)
    } else {
        Ok(serde_json::from_slice(&body).map_err(kube::Error::SerdeError)?)
    }
}

/// A watch of `url` from `version`, in protobuf (JSON if the server answers so).
pub async fn watch<K: DeserializeOwned + Send + 'static>(
    client: &Client,
    url: &str,
    params: &WatchParams,
    version: &str,
    wire: Wire<K>,
) -> kube::Result<BoxStream<'static, kube::Result<WatchEvent<K>>>> {
    let request = kube::core::Request::new(url)
        .watch(params, version)
        .map_err(kube::Error::BuildRequest)?;
    let response = send(client, request, wire.watch_accept).await?;
    let protobuf = is_protobuf(&response);
    let chunks = response.into_body().into_data_stream();
    Ok(if protobuf {
        events(chunks, Frames::default(), move |frames: &mut Frames| {
            frames
                .next()?
                .map(|frame| decode_event(frame, wire))
                .transpose()
        })
    } else {
        events(chunks, Lines::default(), |lines: &mut Lines| {
            Ok(lines
                .next()
                .map(|line| serde_json::from_slice(&line))
                .transpose()?)
        })
    })
}

trait Buffer: Send + 'static {
    fn extend(&mut self, chunk: &[u8]);
}

impl Buffer for Frames {
    fn extend(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }
}

impl Buffer for Lines {
    fn extend(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }
}

/// The events of a watch body, split and decoded by `split`; an error ends the stream (the
/// caller watches again from the last version it saw).
fn events<K: Send + 'static, B: Buffer>(
    chunks: impl futures::Stream<Item = kube::Result<Bytes>> + Send + 'static,
    buffer: B,
    split: impl Fn(&mut B) -> Result<Option<WatchEvent<K>>, DecodeError> + Send + 'static,
) -> BoxStream<'static, kube::Result<WatchEvent<K>>> {
    let chunks = chunks.boxed();
    futures::stream::try_unfold(
        (chunks, buffer, split),
        |(mut chunks, mut buffer, split)| async move {
            loop {
                if let Some(event) = split(&mut buffer)? {
                    return Ok(Some((event, (chunks, buffer, split))));
                }
                match chunks.next().await {
                    Some(chunk) => buffer.extend(&chunk?),
                    None => return Ok(None),
                }
            }
        },
    )
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first frame kube-apiserver v1.36.2 sent for a streaming watch of pods in an empty
    /// namespace (`sendInitialEvents=true`): the bookmark that ends the initial state.
    const BOOKMARK_FRAME: &[u8] = b"\x00\x00\x00\x90\x0a\x08BOOKMARK\x12\x83\x01\x0a\x80\x01k8s\x00\x0a\x09\x0a\x02v1\x12\x03Pod\x12\x6b\x0a\x36\x0a\x00\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x032088\x00\x42\x00\x62\x21\x0a\x19k8s.io/initial-events-end\x12\x04true\x12\x1c\x1a\x00\x32\x00\x42\x00\x4a\x00\x52\x00\x58\x00\x60\x00\x68\x00\x82\x01\x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00\x1a\x13\x0a\x00\x1a\x00\x22\x00\x2a\x00\x32\x00\x4a\x00\x5a\x00\x72\x00\x88\x01\x00\x1a\x00\x22\x00";

    /// A wire whose objects are never read: a bookmark's object is read for its metadata only.
    fn no_object() -> Wire<()> {
        Wire::new(ACCEPT, ACCEPT, |_| panic!("an object read"))
    }

    #[test]
    fn a_bookmark_from_the_api_server_ends_the_initial_state() {
        let mut frames = Frames::default();
        frames.extend(BOOKMARK_FRAME);
        let frame = frames.next().unwrap().expect("one whole frame");
        assert!(frames.next().unwrap().is_none());
        let WatchEvent::Bookmark(bookmark) = decode_event(frame, no_object()).unwrap() else {
            panic!("a bookmark")
        };
        assert_eq!(bookmark.metadata.resource_version, "208");
        assert_eq!(
            bookmark
                .metadata
                .annotations
                .get("k8s.io/initial-events-end"),
            Some(&"true".to_string())
        );
    }

    #[test]
    fn frames_and_lines_are_whole_however_the_body_is_chunked() {
        let body: Vec<u8> = [BOOKMARK_FRAME, BOOKMARK_FRAME].concat();
        for chunk in [1, 3, 4, 100, body.len()] {
            let mut frames = Frames::default();
            let mut whole = Vec::new();
            for piece in body.chunks(chunk) {
                frames.extend(piece);
                while let Some(frame) = frames.next().unwrap() {
                    whole.push(frame);
                }
            }
            assert_eq!(whole, vec![&BOOKMARK_FRAME[4..]; 2], "chunks of {chunk}");
        }
        let text = b"{\"a\":1}\n\n{\"b\":2}\n{\"c\"";
        let mut lines = Lines::default();
        let mut whole = Vec::new();
        for piece in text.chunks(2) {
            lines.extend(piece);
            while let Some(line) = lines.next() {
                whole.push(line);
            }
        }
        assert_eq!(whole, vec![&b"{\"a\":1}\n"[..], &b"{\"b\":2}\n"[..]]);
    }

    #[test]
    fn bad_frames_are_errors() {
        let mut frames = Frames::default();
        frames.extend(&u32::MAX.to_be_bytes());
        assert!(matches!(frames.next(), Err(DecodeError::FrameTooLarge(_))));
        // An object without the envelope's magic number.
        let mut event = BOOKMARK_FRAME[4..].to_vec();
        event[16] = b'x';
        assert!(matches!(
            decode_event(Bytes::from(event), no_object()),
            Err(DecodeError::NoMagic)
        ));
        let unknown = b"\x0a\x04WHAT\x12\x06\x0a\x04k8s\x00";
        assert!(matches!(
            decode_event(Bytes::from_static(unknown), no_object()),
            Err(DecodeError::EventType(t)) if t == "WHAT"
        ));
    }

    #[test]
    fn a_zero_time_is_none_and_a_time_keeps_its_seconds() {
        assert_eq!(time_of(Some(TimePb::default())), None);
        let time = time_of(Some(TimePb {
            seconds: Some(1_762_000_000),
            nanos: Some(5),
        }));
        assert_eq!(
            time.map(|t| t.0.to_string()).as_deref(),
            Some("2025-11-01T12:26:40Z")
        );
    }
}
