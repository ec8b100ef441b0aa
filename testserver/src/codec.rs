//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`): request bodies read
//! into the JSON the store keeps, and answers written from it for clients that accept nothing
//! else, both driven by one schema table.
//!
//! kubectl's typed clients (`create namespace`, `create quota`, `create deployment`, `create pdb`,
//! `create configmap`, …) send protobuf, and client-go falls back to JSON only from CBOR, so the
//! server must read it. A body is the magic `k8s\0` and a `runtime.Unknown` {typeMeta, raw,
//! contentEncoding, contentType}, `raw` being the object's message.
//!
//! Why by hand: reading a message needs its schema. `k8s-pb` (prost) has no schema at run time,
//! no serde and no conversion to k8s-openapi; `k8s-rs-pb` (rust-protobuf) has descriptors, but
//! its generated `file_descriptor()` lists each file as its own dependency and deadlocks, and its
//! serde form is snake_case, not Kubernetes JSON. So the schema below covers the kinds kubectl's
//! `create` subcommands send, with field numbers from upstream's `generated.proto`. A field the
//! table lacks is refused with 400 naming it unless it holds a zero value: go-to-protobuf writes
//! every non-pointer field, zero or not, and zero is what Go's JSON leaves out. Writing is the
//! inverse: a non-pointer field absent from the JSON is written as its zero, map entries sorted
//! by key, so an object decoded from client-go's bytes encodes back to the same bytes; a JSON key
//! the table lacks is an error, never dropped.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};

/// The media type of Kubernetes protobuf bodies.
pub(crate) const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8; 4] = b"k8s\0";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CodecError {
    #[error("the body does not start with the protobuf magic number")]
    NoMagic,
    #[error("invalid protobuf: {0}")]
    Wire(&'static str),
    #[error("the body's content encoding {0:?} is not supported")]
    ContentEncoding(String),
    #[error("kube-testserver does not read {0} in protobuf; send it as JSON")]
    UnknownKind(String),
    #[error(
        "kube-testserver does not read field {number} of {message} in protobuf; send it as JSON"
    )]
    UnknownField { message: &'static str, number: u64 },
    #[error("field {0} holds an invalid value")]
    Invalid(&'static str),
    #[error("kube-testserver does not write {0} in protobuf")]
    UnwritableKind(String),
    #[error("kube-testserver does not write field {key} of {message} in protobuf")]
    UnwritableField { message: &'static str, key: String },
}

/// Whether a `Content-Type` names the protobuf encoding.
pub(crate) fn is_protobuf(content_type: &str) -> bool {
    media_type(content_type) == PROTOBUF
}

/// Whether an `Accept` header allows protobuf but no JSON: such a client is answered in protobuf
/// when the table can write the answer, else 406. kubectl's typed clients send
/// `application/vnd.kubernetes.protobuf,application/json` and get JSON.
pub(crate) fn wants_protobuf_only(accept: &str) -> bool {
    let types: Vec<&str> = accept.split(',').map(media_type).collect();
    types.contains(&PROTOBUF)
        && !types
            .iter()
            .any(|t| matches!(*t, "application/json" | "application/*" | "*/*"))
}

/// Whether an `Accept` header asks for protobuf first, as client-go's and kcm's
/// `application/vnd.kubernetes.protobuf, application/json` do.
pub(crate) fn prefers_protobuf(accept: &str) -> bool {
    accept.split(',').next().map(media_type) == Some(PROTOBUF)
}

/// Whether an `Accept` header asks for metadata only (`as=PartialObjectMetadata[List]`).
pub(crate) fn wants_metadata(accept: &str) -> bool {
    accept.contains("as=PartialObjectMetadata")
}

/// Whether a client answered in JSON gets metadata only: the first JSON type its `Accept`
/// names asks for it (`application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`).
pub(crate) fn wants_json_metadata(accept: &str) -> bool {
    accept
        .split(',')
        .find(|media| media_type(media) == "application/json")
        .is_some_and(|media| media.contains("as=PartialObjectMetadata"))
}

/// An object or list as `meta.k8s.io/v1` `PartialObjectMetadata[List]`: the metadata alone.
pub(crate) fn partial_metadata(body: &Value) -> Value {
    let meta = |obj: &Value| {
        json!({
            "apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadata",
            "metadata": obj["metadata"],
        })
    };
    match body["items"].as_array() {
        Some(items) => json!({
            "apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadataList",
            "metadata": body["metadata"],
            "items": items.iter().map(meta).collect::<Vec<_>>(),
        }),
        None => meta(body),
    }
}

/// One frame of a protobuf watch stream, from a JSON watch event: a 4-byte big-endian length,
/// then `metav1.WatchEvent` {type = 1, object = 2 (`RawExtension` {raw = 1})}, the object
/// encoded as [`encode`] writes a body. The event itself has no envelope, as the API server's
/// stream serializer writes it.
pub fn encode_watch_event(event: &Value) -> Result<Vec<u8>, CodecError> {
    let kind = event["type"].as_str().ok_or(CodecError::Invalid("type"))?;
    let mut raw = Vec::new();
    put_bytes(&mut raw, 1, &encode(&event["object"])?);
    let mut message = Vec::new();
    put_bytes(&mut message, 1, kind.as_bytes());
    put_bytes(&mut message, 2, &raw);
    let len = u32::try_from(message.len()).map_err(|_| CodecError::Invalid("object"))?;
    let mut frame = len.to_be_bytes().to_vec();
    frame.extend_from_slice(&message);
    Ok(frame)
}

fn media_type(header: &str) -> &str {
    header.split(';').next().unwrap_or_default().trim()
}

/// How a field is written in JSON.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    Int,
    Bool,
    Msg(&'static str),
    /// `map<string, string>`.
    StrMap,
    /// `map<string, bytes>`, base64 in JSON.
    BytesMap,
    /// `map<string, Quantity>` (`ResourceList`).
    QuantityMap,
    /// `map<string, Time>` (a PDB's `disruptedPods`).
    TimeMap,
    IntOrString,
    Time,
    /// `FieldsV1` {raw = 1}: JSON text in protobuf, the object itself in JSON.
    RawJson,
}

/// One field: number, JSON name, type, and how it is kept.
#[derive(Clone, Copy)]
struct F(u64, &'static str, Ty, Keep);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// A non-pointer Go field: a zero value is left out, as Go's JSON does.
    NonZero,
    /// A pointer: zero is a value, absence is not written.
    Always,
    /// A non-pointer Go field without omitempty: zero is a value, and absence is written as zero.
    Required,
    /// A repeated field.
    List,
}

use Keep::{Always, List, NonZero, Required};
use Ty::*;

/// The schema of the messages the table covers, by name.
fn schema(message: &str) -> Option<&'static [F]> {
    Some(match message {
        "ObjectMeta" => &[
            F(1, "name", Str, NonZero),
            F(2, "generateName", Str, NonZero),
            F(3, "namespace", Str, NonZero),
            F(4, "selfLink", Str, NonZero),
            F(5, "uid", Str, NonZero),
            F(6, "resourceVersion", Str, NonZero),
            F(7, "generation", Int, NonZero),
            F(8, "creationTimestamp", Time, NonZero),
            F(9, "deletionTimestamp", Time, Always),
            F(10, "deletionGracePeriodSeconds", Int, Always),
            F(11, "labels", StrMap, NonZero),
            F(12, "annotations", StrMap, NonZero),
            F(13, "ownerReferences", Msg("OwnerReference"), List),
            F(14, "finalizers", Str, List),
            F(17, "managedFields", Msg("ManagedFieldsEntry"), List),
        ],
        "ManagedFieldsEntry" => &[
            F(1, "manager", Str, NonZero),
            F(2, "operation", Str, NonZero),
            F(3, "apiVersion", Str, NonZero),
            F(4, "time", Time, Always),
            F(6, "fieldsType", Str, NonZero),
            F(7, "fieldsV1", RawJson, Always),
            F(8, "subresource", Str, NonZero),
        ],
        "ListMeta" => &[
            F(1, "selfLink", Str, NonZero),
            F(2, "resourceVersion", Str, NonZero),
            F(3, "continue", Str, NonZero),
            F(4, "remainingItemCount", Int, Always),
        ],
        "OwnerReference" => &[
            F(1, "kind", Str, NonZero),
            F(3, "name", Str, NonZero),
            F(4, "uid", Str, NonZero),
            F(5, "apiVersion", Str, NonZero),
            F(6, "controller", Bool, Always),
            F(7, "blockOwnerDeletion", Bool, Always),
        ],
        "LabelSelector" => &[
            F(1, "matchLabels", StrMap, NonZero),
            F(2, "matchExpressions", Msg("LabelSelectorRequirement"), List),
        ],
        "LabelSelectorRequirement" => &[
            F(1, "key", Str, NonZero),
            F(2, "operator", Str, NonZero),
            F(3, "values", Str, List),
        ],
        "Namespace" => &[
            F(1, "metadata", Msg("ObjectMeta"), NonZero),
            F(2, "spec", Msg("NamespaceSpec"), NonZero),
            F(3, "status", Msg("NamespaceStatus"), NonZero),
        ],
        "NamespaceSpec" => &[F(1, "finalizers", Str, List)],
        "NamespaceStatus" => &[F(1, "phase", Str, NonZero)],
        "ConfigMap" => &[
            F(1, "metadata", Msg("ObjectMeta"), NonZero),
            F(2, "data", StrMap, NonZero),
            F(3, "binaryData", BytesMap, NonZero),
            F(4, "immutable", Bool, Always),
        ],
        "Secret" => &[
            F(1, "metadata", Msg("ObjectMeta"), NonZero),
            F(2, "data", BytesMap, NonZero),
            F(3, "type", Str, NonZero),
            F(4, "stringData", StrMap, NonZero),
            F(5, "immutable", Bool, Always),
        ],
        "Pod" => &[
            F(1, "metadata", Msg("ObjectMeta"), NonZero),
            F(2, "spec", Msg("PodSpec"), NonZero),
            F(3, "status", Msg("PodStatus"), NonZero),
        ],
        "PodStatus" => &[
            F(1, "phase", Str, NonZero),
            F(2, "conditions", Msg("PodCondition"), List),
            F(3, "message", Str, NonZero),
            F(4, "reason", Str, NonZero),
            F(5, "hostIP", Str, NonZero),
            F(6, "podIP", Str, NonZero),
            F(7, "startTime", Time, Always),
            F(8, "containerStatuses", Msg("ContainerStatus"), List),
            F(9, "qosClass", Str, NonZero),
            F(10, "initContainerStatuses", Msg("ContainerStatus"), List),
            F(
                15,
                "resourceClaimStatuses",
                Msg("PodResourceClaimStatus"),
                List,
            ),
        ],
        "PodCondition" => &[
            F(1, "type", Str, Required),
            F(2, "status", Str, Required),
            F(3, "lastProbeTime", Time, NonZero),
            F(4, "lastTransitionTime", Time, NonZero),
            F(5, "reason", Str, NonZero),
            F(6, "message", Str, NonZero),
            F(7, "observedGeneration", Int, NonZero),
        ],
        "ContainerStatus" => &[
            F(1, "name", Str, Required),
            F(2, "state", Msg("ContainerState"), NonZero),
            F(3, "lastState", Msg("ContainerState"), NonZero),
            F(4, "ready", Bool, Required),
            F(5, "restartCount", Int, Required),
            F(6, "image", Str, Required),
            F(7, "imageID", Str, Required),
            F(8, "containerID", Str, NonZero),
            F(9, "started", Bool, Always),
            F(10, "allocatedResources", QuantityMap, NonZero),
            F(11, "resources", Msg("ResourceRequirements"), Always),
        ],
        "ContainerState" => &[
            F(1, "waiting", Msg("ContainerStateWaiting"), Always),
            F(2, "running", Msg("ContainerStateRunning"), Always),
            F(3, "terminated", Msg("ContainerStateTerminated"), Always),
        ],
        "ContainerStateWaiting" => &[F(1, "reason", Str, NonZero), F(2, "message", Str, NonZero)],
        "ContainerStateRunning" => &[F(1, "startedAt", Time, NonZero)],
        "ContainerStateTerminated" => &[
            F(1, "exitCode", Int, Required),
            F(2, "signal", Int, NonZero),
            F(3, "reason", Str, NonZero),
            F(4, "message", Str, NonZero),
            F(5, "startedAt", Time, NonZero),
            F(6, "finishedAt", Time, NonZero),
            F(7, "containerID", Str, NonZero),
        ],
        "PodResourceClaimStatus" => &[
            F(1, "name", Str, Required),
            F(2, "resourceClaimName", Str, Always),
        ],
        "Affinity" => &[
            F(2, "podAffinity", Msg("PodAffinity"), Always),
            F(3, "podAntiAffinity", Msg("PodAffinity"), Always),
        ],
        // `PodAntiAffinity` has the same fields.
        "PodAffinity" => &[
            F(
                1,
                "requiredDuringSchedulingIgnoredDuringExecution",
                Msg("PodAffinityTerm"),
                List,
            ),
            F(
                2,
                "preferredDuringSchedulingIgnoredDuringExecution",
                Msg("WeightedPodAffinityTerm"),
                List,
            ),
        ],
        "PodAffinityTerm" => &[
            F(1, "labelSelector", Msg("LabelSelector"), Always),
            F(2, "namespaces", Str, List),
            F(3, "topologyKey", Str, Required),
            F(4, "namespaceSelector", Msg("LabelSelector"), Always),
            F(5, "matchLabelKeys", Str, List),
            F(6, "mismatchLabelKeys", Str, List),
        ],
        "WeightedPodAffinityTerm" => &[
            F(1, "weight", Int, Required),
            F(2, "podAffinityTerm", Msg("PodAffinityTerm"), Required),
        ],
        "PodResourceClaim" => &[
            F(1, "name", Str, Required),
            F(3, "resourceClaimName", Str, Always),
            F(4, "resourceClaimTemplateName", Str, Always),
        ],
        "PodSchedulingGroup" => &[F(1, "podGroupName", Str, Always)],
        // `meta.k8s.io/v1` metadata-only objects (`as=PartialObjectMetadata`).
        "PartialObjectMetadata" => &[F(1, "metadata", Msg("ObjectMeta"), NonZero)],
        "ServiceAccount" => &[
            F(1, "metadata", Msg("ObjectMeta"), NonZero),
            F(4, "automountServiceAccountToken", Bool, Always),
        ],
        "ResourceQuota" => &[
            F(1, "metadata", Msg("ObjectMeta"), NonZero),
            F(2, "spec", Msg("ResourceQuotaSpec"), NonZero),
            F(3, "status", Msg("ResourceQuotaStatus"), NonZero),
        ],
        "ResourceQuotaSpec" => &[
            F(1, "hard", QuantityMap, NonZero),
            F(2, "scopes", Str, List),
            F(3, "scopeSelector", Msg("ScopeSelector"), Always),
        ],
        "ScopeSelector" => &[F(
            1,
            "matchExpressions",
            Msg("ScopedResourceSelectorRequirement"),
            List,
        )],
        "ScopedResourceSelectorRequirement" => &[
            F(1, "scopeName", Str, NonZero),
            F(2, "operator", Str, NonZero),
            F(3, "values", Str, List),
        ],
        "ResourceQuotaStatus" => &[
            F(1, "hard", QuantityMap, NonZero),
            F(2, "used", QuantityMap, NonZero),
        ],
        "Deployment" => &[
            F(1, "metadata", Msg("ObjectMeta"), NonZero),
            F(2, "spec", Msg("DeploymentSpec"), NonZero),
            F(3, "status", Msg("DeploymentStatus"), NonZero),
        ],
        "DeploymentSpec" => &[
            F(1, "replicas", Int, Always),
            F(2, "selector", Msg("LabelSelector"), Always),
            F(3, "template", Msg("PodTemplateSpec"), Always),
            F(4, "strategy", Msg("DeploymentStrategy"), NonZero),
            F(5, "minReadySeconds", Int, NonZero),
            F(6, "revisionHistoryLimit", Int, Always),
            F(7, "paused", Bool, NonZero),
            F(9, "progressDeadlineSeconds", Int, Always),
        ],
        "DeploymentStrategy" => &[
            F(1, "type", Str, NonZero),
            F(2, "rollingUpdate", Msg("RollingUpdateDeployment"), Always),
        ],
        "RollingUpdateDeployment" => &[
            F(1, "maxUnavailable", IntOrString, Always),
            F(2, "maxSurge", IntOrString, Always),
        ],
        // Conditions (6) and collisionCount (8) are left out: no controller here writes them.
        "DeploymentStatus" => &[
            F(1, "observedGeneration", Int, NonZero),
            F(2, "replicas", Int, NonZero),
            F(3, "updatedReplicas", Int, NonZero),
            F(4, "availableReplicas", Int, NonZero),
            F(5, "unavailableReplicas", Int, NonZero),
            F(7, "readyReplicas", Int, NonZero),
        ],
        "PodTemplateSpec" => &[
            F(1, "metadata", Msg("ObjectMeta"), NonZero),
            F(2, "spec", Msg("PodSpec"), NonZero),
        ],
        "PodSpec" => &[
            F(2, "containers", Msg("Container"), List),
            F(3, "restartPolicy", Str, NonZero),
            F(4, "terminationGracePeriodSeconds", Int, Always),
            F(5, "activeDeadlineSeconds", Int, Always),
            F(6, "dnsPolicy", Str, NonZero),
            F(7, "nodeSelector", StrMap, NonZero),
            F(8, "serviceAccountName", Str, NonZero),
            F(9, "serviceAccount", Str, NonZero),
            F(10, "nodeName", Str, NonZero),
            F(11, "hostNetwork", Bool, NonZero),
            F(12, "hostPID", Bool, NonZero),
            F(13, "hostIPC", Bool, NonZero),
            F(16, "hostname", Str, NonZero),
            F(17, "subdomain", Str, NonZero),
            F(19, "schedulerName", Str, NonZero),
            F(20, "initContainers", Msg("Container"), List),
            F(21, "automountServiceAccountToken", Bool, Always),
            F(24, "priorityClassName", Str, NonZero),
            F(25, "priority", Int, Always),
            F(27, "shareProcessNamespace", Bool, Always),
            F(29, "runtimeClassName", Str, Always),
            F(30, "enableServiceLinks", Bool, Always),
            F(31, "preemptionPolicy", Str, Always),
            F(18, "affinity", Msg("Affinity"), Always),
            F(32, "overhead", QuantityMap, NonZero),
            F(39, "resourceClaims", Msg("PodResourceClaim"), List),
            F(40, "resources", Msg("ResourceRequirements"), Always),
            F(43, "schedulingGroup", Msg("PodSchedulingGroup"), Always),
        ],
        "Container" => &[
            F(1, "name", Str, NonZero),
            F(2, "image", Str, NonZero),
            F(3, "command", Str, List),
            F(4, "args", Str, List),
            F(5, "workingDir", Str, NonZero),
            F(6, "ports", Msg("ContainerPort"), List),
            F(7, "env", Msg("EnvVar"), List),
            F(8, "resources", Msg("ResourceRequirements"), NonZero),
            F(13, "terminationMessagePath", Str, NonZero),
            F(14, "imagePullPolicy", Str, NonZero),
            F(16, "stdin", Bool, NonZero),
            F(17, "stdinOnce", Bool, NonZero),
            F(18, "tty", Bool, NonZero),
            F(20, "terminationMessagePolicy", Str, NonZero),
            F(24, "restartPolicy", Str, Always),
        ],
        "ContainerPort" => &[
            F(1, "name", Str, NonZero),
            F(2, "hostPort", Int, NonZero),
            F(3, "containerPort", Int, Always),
            F(4, "protocol", Str, NonZero),
            F(5, "hostIP", Str, NonZero),
        ],
        "EnvVar" => &[F(1, "name", Str, NonZero), F(2, "value", Str, NonZero)],
        "ResourceRequirements" => &[
            F(1, "limits", QuantityMap, NonZero),
            F(2, "requests", QuantityMap, NonZero),
            F(3, "claims", Msg("ContainerResourceClaim"), List),
        ],
        // `core/v1` `ResourceClaim`: a container's use of one of the pod's claims.
        "ContainerResourceClaim" => &[F(1, "name", Str, Required), F(2, "request", Str, NonZero)],
        "PodDisruptionBudget" => &[
            F(1, "metadata", Msg("ObjectMeta"), NonZero),
            F(2, "spec", Msg("PodDisruptionBudgetSpec"), NonZero),
            F(3, "status", Msg("PodDisruptionBudgetStatus"), NonZero),
        ],
        "PodDisruptionBudgetSpec" => &[
            F(1, "minAvailable", IntOrString, Always),
            F(2, "selector", Msg("LabelSelector"), Always),
            F(3, "maxUnavailable", IntOrString, Always),
            F(4, "unhealthyPodEvictionPolicy", Str, Always),
        ],
        "PodDisruptionBudgetStatus" => &[
            F(1, "observedGeneration", Int, NonZero),
            F(2, "disruptedPods", TimeMap, NonZero),
            F(3, "disruptionsAllowed", Int, Required),
            F(4, "currentHealthy", Int, Required),
            F(5, "desiredHealthy", Int, Required),
            F(6, "expectedPods", Int, Required),
            F(7, "conditions", Msg("Condition"), List),
        ],
        "Condition" => &[
            F(1, "type", Str, Required),
            F(2, "status", Str, Required),
            F(3, "observedGeneration", Int, NonZero),
            F(4, "lastTransitionTime", Time, NonZero),
            F(5, "reason", Str, Required),
            F(6, "message", Str, Required),
        ],
        // The bodies of the pod subresources kubectl drain and schedulers post.
        "Eviction" => &[
            F(1, "metadata", Msg("ObjectMeta"), NonZero),
            F(2, "deleteOptions", Msg("DeleteOptions"), Always),
        ],
        "DeleteOptions" => &[
            F(1, "gracePeriodSeconds", Int, Always),
            F(2, "preconditions", Msg("Preconditions"), Always),
            F(3, "orphanDependents", Bool, Always),
            F(4, "propagationPolicy", Str, Always),
            F(5, "dryRun", Str, List),
            F(
                6,
                "ignoreStoreReadErrorWithClusterBreakingPotential",
                Bool,
                Always,
            ),
        ],
        "Preconditions" => &[
            F(1, "uid", Str, Always),
            F(2, "resourceVersion", Str, Always),
        ],
        "Binding" => &[
            F(1, "metadata", Msg("ObjectMeta"), NonZero),
            F(2, "target", Msg("ObjectReference"), NonZero),
        ],
        "ObjectReference" => &[
            F(1, "kind", Str, NonZero),
            F(2, "namespace", Str, NonZero),
            F(3, "name", Str, NonZero),
            F(4, "uid", Str, NonZero),
            F(5, "apiVersion", Str, NonZero),
            F(6, "resourceVersion", Str, NonZero),
            F(7, "fieldPath", Str, NonZero),
        ],
        // `metav1.Status`, the body of error answers.
        "Status" => &[
            F(1, "metadata", Msg("ListMeta"), NonZero),
            F(2, "status", Str, NonZero),
            F(3, "message", Str, NonZero),
            F(4, "reason", Str, NonZero),
            F(5, "details", Msg("StatusDetails"), Always),
            F(6, "code", Int, NonZero),
        ],
        "StatusDetails" => &[
            F(1, "name", Str, NonZero),
            F(2, "group", Str, NonZero),
            F(3, "kind", Str, NonZero),
            F(4, "causes", Msg("StatusCause"), List),
            F(5, "retryAfterSeconds", Int, NonZero),
            F(6, "uid", Str, NonZero),
        ],
        "StatusCause" => &[
            F(1, "reason", Str, NonZero),
            F(2, "message", Str, NonZero),
            F(3, "field", Str, NonZero),
        ],
        _ => return None,
    })
}

/// The message of a kind the table covers.
fn kind_message(api_version: &str, kind: &str) -> Option<&'static str> {
    Some(match (api_version, kind) {
        ("v1", "Namespace") => "Namespace",
        ("v1", "ConfigMap") => "ConfigMap",
        ("v1", "ServiceAccount") => "ServiceAccount",
        ("v1", "Secret") => "Secret",
        ("v1", "Pod") => "Pod",
        ("v1", "ResourceQuota") => "ResourceQuota",
        ("apps/v1", "Deployment") => "Deployment",
        ("policy/v1", "PodDisruptionBudget") => "PodDisruptionBudget",
        ("policy/v1" | "policy/v1beta1", "Eviction") => "Eviction",
        ("v1", "Binding") => "Binding",
        ("v1", "Status") => "Status",
        ("meta.k8s.io/v1", "PartialObjectMetadata") => "PartialObjectMetadata",
        _ => return None,
    })
}

/// One protobuf field on the wire.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

/// Splits a message into its fields, in order.
fn fields(mut buf: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, CodecError> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let value = match key & 7 {
            0 => Wire::Varint(varint(&mut buf)?),
            2 => {
                let len = usize::try_from(varint(&mut buf)?)
                    .map_err(|_| CodecError::Wire("length out of range"))?;
                if len > buf.len() {
                    return Err(CodecError::Wire("truncated field"));
                }
                let (bytes, rest) = buf.split_at(len);
                buf = rest;
                Wire::Bytes(bytes)
            }
            // No Kubernetes message uses fixed-size or group fields.
            _ => return Err(CodecError::Wire("unsupported wire type")),
        };
        out.push((key >> 3, value));
    }
    Ok(out)
}

fn varint(buf: &mut &[u8]) -> Result<u64, CodecError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf
            .split_first()
            .ok_or(CodecError::Wire("truncated varint"))?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(CodecError::Wire("varint too long"))
}

/// A protobuf request body as the JSON object the store takes, `apiVersion` and `kind` included.
pub fn decode(body: &[u8]) -> Result<Value, CodecError> {
    let frame = body.strip_prefix(MAGIC).ok_or(CodecError::NoMagic)?;
    let (mut type_meta, mut raw, mut encoding) = (&[][..], &[][..], &[][..]);
    for (number, value) in fields(frame)? {
        match (number, value) {
            (1, Wire::Bytes(b)) => type_meta = b,
            (2, Wire::Bytes(b)) => raw = b,
            (3, Wire::Bytes(b)) => encoding = b,
            _ => {}
        }
    }
    if !encoding.is_empty() {
        return Err(CodecError::ContentEncoding(
            String::from_utf8_lossy(encoding).into(),
        ));
    }
    let (mut api_version, mut kind) = (String::new(), String::new());
    for (number, value) in fields(type_meta)? {
        match (number, value) {
            (1, Wire::Bytes(b)) => api_version = utf8(b, "apiVersion")?,
            (2, Wire::Bytes(b)) => kind = utf8(b, "kind")?,
            _ => {}
        }
    }
    let name = kind_message(&api_version, &kind)
        .ok_or_else(|| CodecError::UnknownKind(format!("{api_version} {kind}")))?;
    let mut value = message(name, raw)?;
    value["apiVersion"] = json!(api_version);
    value["kind"] = json!(kind);
    Ok(value)
}

fn utf8(bytes: &[u8], field: &'static str) -> Result<String, CodecError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| CodecError::Invalid(field))
}

/// Whether an unknown field holds only a zero value, which Go's JSON would leave out.
fn is_zero(value: &Wire<'_>) -> bool {
    match value {
        Wire::Varint(n) => *n == 0,
        Wire::Bytes(b) => b.is_empty(),
    }
}

fn message(name: &'static str, buf: &[u8]) -> Result<Value, CodecError> {
    let schema = schema(name).unwrap_or_default();
    let mut obj = Map::new();
    for (number, value) in fields(buf)? {
        let Some(&F(_, key, ty, keep)) = schema.iter().find(|f| f.0 == number) else {
            if is_zero(&value) {
                continue;
            }
            return Err(CodecError::UnknownField {
                message: name,
                number,
            });
        };
        let decoded = match (ty, &value) {
            (Str, Wire::Bytes(b)) => json!(utf8(b, key)?),
            (Int, Wire::Varint(n)) => json!(*n as i64),
            (Bool, Wire::Varint(n)) => json!(*n != 0),
            (Msg(inner), Wire::Bytes(b)) => message(inner, b)?,
            (IntOrString, Wire::Bytes(b)) => int_or_string(b)?,
            (Time, Wire::Bytes(b)) => time(b)?,
            (RawJson, Wire::Bytes(b)) => raw_json(b)?,
            (StrMap | BytesMap | QuantityMap | TimeMap, Wire::Bytes(b)) => {
                let (k, v) = map_entry(ty, b)?;
                if let Some(entries) = obj.entry(key).or_insert_with(|| json!({})).as_object_mut() {
                    entries.insert(k, v);
                }
                continue;
            }
            _ => return Err(CodecError::Invalid(key)),
        };
        // Go's JSON writes struct fields even when empty (`resources: {}`), scalars only when set.
        let zero_scalar = keep == NonZero && is_zero(&value) && !matches!(ty, Msg(_));
        if zero_scalar || decoded.is_null() {
            continue;
        }
        if keep == List {
            let list = obj.entry(key).or_insert_with(|| json!([]));
            if let Some(items) = list.as_array_mut() {
                items.push(decoded);
            }
        } else {
            obj.insert(key.into(), decoded);
        }
    }
    Ok(Value::Object(obj))
}

fn map_entry(ty: Ty, buf: &[u8]) -> Result<(String, Value), CodecError> {
    let (mut key, mut value) = (String::new(), Value::Null);
    for (number, wire) in fields(buf)? {
        let Wire::Bytes(b) = wire else {
            return Err(CodecError::Invalid("map entry"));
        };
        match number {
            1 => key = utf8(b, "map key")?,
            2 => {
                value = match ty {
                    BytesMap => json!(BASE64.encode(b)),
                    QuantityMap => quantity(b)?,
                    TimeMap => time(b)?,
                    _ => json!(utf8(b, "map value")?),
                }
            }
            _ => {}
        }
    }
    if value.is_null() {
        value = match ty {
            QuantityMap => json!("0"),
            _ => json!(""),
        };
    }
    Ok((key, value))
}

/// `resource.Quantity` {string = 1}.
fn quantity(buf: &[u8]) -> Result<Value, CodecError> {
    let mut text = String::new();
    for (number, wire) in fields(buf)? {
        if let (1, Wire::Bytes(b)) = (number, wire) {
            text = utf8(b, "quantity")?;
        }
    }
    Ok(json!(text))
}

/// `intstr.IntOrString` {type = 1 (0 int, 1 string), intVal = 2, strVal = 3}.
fn int_or_string(buf: &[u8]) -> Result<Value, CodecError> {
    let (mut is_string, mut int, mut text) = (false, 0i64, String::new());
    for (number, wire) in fields(buf)? {
        match (number, wire) {
            (1, Wire::Varint(t)) => is_string = t == 1,
            (2, Wire::Varint(n)) => int = i64::from(n as i32),
            (3, Wire::Bytes(b)) => text = utf8(b, "strVal")?,
            _ => {}
        }
    }
    Ok(if is_string { json!(text) } else { json!(int) })
}

/// `metav1.Time` {seconds = 1, nanos = 2} as RFC 3339 with whole seconds, as apimachinery writes
/// it; an empty message is Go's zero time, `null`.
fn time(buf: &[u8]) -> Result<Value, CodecError> {
    let mut seconds = None;
    for (number, wire) in fields(buf)? {
        if let (1, Wire::Varint(s)) = (number, wire) {
            seconds = Some(s as i64);
        }
    }
    let Some(seconds) = seconds else {
        return Ok(Value::Null);
    };
    let ts = jiff::Timestamp::from_second(seconds).map_err(|_| CodecError::Invalid("time"))?;
    Ok(json!(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

/// `FieldsV1` {raw = 1} as the JSON object its bytes hold.
fn raw_json(buf: &[u8]) -> Result<Value, CodecError> {
    for (number, wire) in fields(buf)? {
        if let (1, Wire::Bytes(b)) = (number, wire) {
            return serde_json::from_slice(b).map_err(|_| CodecError::Invalid("fieldsV1"));
        }
    }
    Ok(json!({}))
}

/// An object from the store (or a list of one kind the table covers) as the protobuf answer
/// client-go reads: the magic and a `runtime.Unknown` holding the object's message. The inverse
/// of [`decode`]: go-to-protobuf writes every non-pointer field, zero or not, so a non-pointer
/// field missing from the JSON is written as its zero; a key the table lacks is an error, never
/// dropped.
pub fn encode(object: &Value) -> Result<Vec<u8>, CodecError> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let raw = if let Some(name) = kind_message(api_version, kind) {
        encode_message(name, object, TYPE_META)?
    } else if let Some(item) = kind
        .strip_suffix("List")
        .and_then(|item| kind_message(api_version, item))
    {
        encode_list(item, object)?
    } else {
        return Err(CodecError::UnwritableKind(format!("{api_version} {kind}")));
    };
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, &raw);
    // contentEncoding and contentType: empty, as the apiserver writes them.
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    Ok(out)
}

/// Whether [`encode`] can write objects (and lists) of a kind.
pub(crate) fn encodes(api_version: &str, kind: &str) -> bool {
    kind_message(api_version, kind).is_some()
}

/// The JSON keys the `runtime.Unknown` envelope carries instead of the message.
const TYPE_META: &[&str] = &["apiVersion", "kind"];

/// A `<Kind>List`: {metadata (ListMeta) = 1, items = 2}.
fn encode_list(item: &'static str, list: &Value) -> Result<Vec<u8>, CodecError> {
    let map = list.as_object().ok_or(CodecError::Invalid("list"))?;
    if let Some(key) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "items"))
    {
        return Err(CodecError::UnwritableField {
            message: "List",
            key: key.clone(),
        });
    }
    let mut out = Vec::new();
    let meta = map.get("metadata").cloned().unwrap_or_else(|| json!({}));
    put_bytes(&mut out, 1, &encode_message("ListMeta", &meta, &[])?);
    let items = match map.get("items") {
        None | Some(Value::Null) => &[][..],
        Some(items) => items.as_array().ok_or(CodecError::Invalid("items"))?,
    };
    for item_value in items {
        put_bytes(&mut out, 2, &encode_message(item, item_value, TYPE_META)?);
    }
    Ok(out)
}

fn encode_message(name: &'static str, value: &Value, skip: &[&str]) -> Result<Vec<u8>, CodecError> {
    let map = value.as_object().ok_or(CodecError::Invalid(name))?;
    let schema = schema(name).unwrap_or_default();
    if let Some(key) = map.iter().find_map(|(k, v)| {
        let known = skip.contains(&k.as_str()) || schema.iter().any(|f| f.1 == k);
        (!known && !v.is_null()).then_some(k)
    }) {
        return Err(CodecError::UnwritableField {
            message: name,
            key: key.clone(),
        });
    }
    let mut fields: Vec<F> = schema.to_vec();
    fields.sort_by_key(|f| f.0);
    let mut out = Vec::new();
    for F(number, key, ty, keep) in fields {
        match map.get(key) {
            None | Some(Value::Null) if matches!(keep, NonZero | Required) => {
                put_zero(&mut out, number, ty)
            }
            None | Some(Value::Null) => {}
            Some(items) if keep == List => {
                for item in items.as_array().ok_or(CodecError::Invalid(key))? {
                    put_value(&mut out, number, key, ty, item)?;
                }
            }
            Some(value) => put_value(&mut out, number, key, ty, value)?,
        }
    }
    Ok(out)
}

/// A non-pointer field Go writes though it is zero; empty maps are not written at all.
fn put_zero(out: &mut Vec<u8>, number: u64, ty: Ty) {
    match ty {
        Int | Bool => put_varint(out, number, 0),
        Str | Msg(_) | Time => put_bytes(out, number, b""),
        IntOrString => put_bytes(out, number, &int_or_string_message(false, 0, "")),
        StrMap | BytesMap | QuantityMap | TimeMap | RawJson => {}
    }
}

fn put_value(
    out: &mut Vec<u8>,
    number: u64,
    key: &'static str,
    ty: Ty,
    value: &Value,
) -> Result<(), CodecError> {
    let invalid = || CodecError::Invalid(key);
    match ty {
        Str => put_bytes(out, number, value.as_str().ok_or_else(invalid)?.as_bytes()),
        // Negative int32/int64 values are ten-byte varints, as Go writes them.
        Int => put_varint(out, number, value.as_i64().ok_or_else(invalid)? as u64),
        Bool => put_varint(out, number, u64::from(value.as_bool().ok_or_else(invalid)?)),
        Msg(inner) => put_bytes(out, number, &encode_message(inner, value, &[])?),
        StrMap | BytesMap | QuantityMap | TimeMap => {
            let map = value.as_object().ok_or_else(invalid)?;
            // Go writes map entries sorted by key.
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for k in keys {
                let mut entry = Vec::new();
                put_bytes(&mut entry, 1, k.as_bytes());
                if let TimeMap = ty {
                    put_bytes(&mut entry, 2, &time_message(&map[k]).ok_or_else(invalid)?);
                    put_bytes(out, number, &entry);
                    continue;
                }
                let text = map[k].as_str().ok_or_else(invalid)?;
                match ty {
                    BytesMap => {
                        let bytes = BASE64.decode(text).map_err(|_| invalid())?;
                        put_bytes(&mut entry, 2, &bytes);
                    }
                    QuantityMap => {
                        let mut quantity = Vec::new();
                        put_bytes(&mut quantity, 1, text.as_bytes());
                        put_bytes(&mut entry, 2, &quantity);
                    }
                    _ => put_bytes(&mut entry, 2, text.as_bytes()),
                }
                put_bytes(out, number, &entry);
            }
        }
        IntOrString => {
            let message = match (value.as_i64(), value.as_str()) {
                (Some(n), _) => {
                    int_or_string_message(false, i32::try_from(n).map_err(|_| invalid())?, "")
                }
                (_, Some(text)) => int_or_string_message(true, 0, text),
                _ => return Err(invalid()),
            };
            put_bytes(out, number, &message);
        }
        Time => put_bytes(out, number, &time_message(value).ok_or_else(invalid)?),
        RawJson => {
            let mut message = Vec::new();
            put_bytes(&mut message, 1, value.to_string().as_bytes());
            put_bytes(out, number, &message);
        }
    }
    Ok(())
}

/// A `metav1.Time` from its RFC 3339 text: `Timestamp` {seconds = 1, nanos = 2}, both always
/// written.
fn time_message(value: &Value) -> Option<Vec<u8>> {
    let ts: jiff::Timestamp = value.as_str()?.parse().ok()?;
    let mut message = Vec::new();
    put_varint(&mut message, 1, ts.as_second() as u64);
    put_varint(&mut message, 2, i64::from(ts.subsec_nanosecond()) as u64);
    Some(message)
}

/// `intstr.IntOrString` {type = 1, intVal = 2, strVal = 3}, all three always written.
fn int_or_string_message(is_string: bool, int: i32, text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, 1, u64::from(is_string));
    put_varint(&mut out, 2, i64::from(int) as u64);
    put_bytes(&mut out, 3, text.as_bytes());
    out
}

fn put_key(out: &mut Vec<u8>, number: u64, wire_type: u64) {
    push_varint(out, (number << 3) | wire_type);
}

fn put_varint(out: &mut Vec<u8>, number: u64, value: u64) {
    put_key(out, number, 0);
    push_varint(out, value);
}

fn put_bytes(out: &mut Vec<u8>, number: u64, bytes: &[u8]) {
    put_key(out, number, 2);
    push_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types() {
        assert!(wants_json_metadata(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json"
        ));
        assert!(!wants_json_metadata(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json"
        ));
        assert!(!wants_json_metadata("application/json"));
        assert!(is_protobuf("application/vnd.kubernetes.protobuf"));
        assert!(is_protobuf(
            "application/vnd.kubernetes.protobuf; charset=x"
        ));
        assert!(!is_protobuf("application/json"));
        assert!(!wants_protobuf_only(
            "application/vnd.kubernetes.protobuf,application/json"
        ));
        assert!(!wants_protobuf_only(
            "application/vnd.kubernetes.protobuf, */*"
        ));
        assert!(!wants_protobuf_only("application/json"));
        assert!(!wants_protobuf_only(""));
        assert!(wants_protobuf_only("application/vnd.kubernetes.protobuf"));
    }

    /// The exact bytes kubectl 1.32 sends for `kubectl -n demo create pdb web
    /// --selector=app=web --min-available=1`.
    const KUBECTL_PDB: &[u8] = b"k8s\x00\n \n\tpolicy/v1\x12\x13PodDisruptionBudget\x12=\n\x17\n\x03web\x12\x00\x1a\x04demo\"\x00*\x002\x008\x00B\x00\x12\x16\n\x06\x08\x00\x10\x01\x1a\x00\x12\x0c\n\n\n\x03app\x12\x03web\x1a\n\x08\x00\x18\x00 \x00(\x000\x00\x1a\x00\"\x00";

    /// `kubectl -n demo create quota q --hard=pods=3`.
    const KUBECTL_QUOTA: &[u8] = b"k8s\x00\n\x13\n\x02v1\x12\rResourceQuota\x12(\n\x15\n\x01q\x12\x00\x1a\x04demo\"\x00*\x002\x008\x00B\x00\x12\r\n\x0b\n\x04pods\x12\x03\n\x013\x1a\x00\x1a\x00\"\x00";

    /// `kubectl -n demo create deployment web --image=pause`.
    const KUBECTL_DEPLOYMENT: &[u8] = b"k8s\x00\n\x15\n\x07apps/v1\x12\nDeployment\x12\xaf\x01\n#\n\x03web\x12\x00\x1a\x04demo\"\x00*\x002\x008\x00B\x00Z\n\n\x03app\x12\x03web\x12z\x08\x01\x12\x0c\n\n\n\x03app\x12\x03web\x1a`\n\x1c\n\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00Z\n\n\x03app\x12\x03web\x12@\x12\"\n\x05pause\x12\x05pause*\x00B\x00j\x00r\x00\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\x01\x00\x1a\x002\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01\x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00\"\x02\n\x00(\x008\x00\x1a\x0c\x08\x00\x10\x00\x18\x00 \x00(\x008\x00\x1a\x00\"\x00";

    #[test]
    fn decodes_what_kubectl_sends() {
        assert_eq!(
            decode(KUBECTL_PDB).unwrap(),
            json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": { "name": "web", "namespace": "demo" },
                "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "web" } } },
                "status": { "currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0,
                    "expectedPods": 0 },
            })
        );
        assert_eq!(
            decode(KUBECTL_QUOTA).unwrap(),
            json!({
                "apiVersion": "v1", "kind": "ResourceQuota",
                "metadata": { "name": "q", "namespace": "demo" },
                "spec": { "hard": { "pods": "3" } },
                "status": {},
            })
        );
        assert_eq!(
            decode(KUBECTL_DEPLOYMENT).unwrap(),
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": { "name": "web", "namespace": "demo", "labels": { "app": "web" } },
                "spec": {
                    "replicas": 1,
                    "selector": { "matchLabels": { "app": "web" } },
                    "template": {
                        "metadata": { "labels": { "app": "web" } },
                        "spec": { "containers": [{ "name": "pause", "image": "pause", "resources": {} }] },
                    },
                    "strategy": {},
                },
                "status": {},
            })
        );
    }

    #[test]
    fn pointers_keep_zero_and_strings_count() {
        // DeploymentSpec{replicas: 0} and IntOrString "50%" as maxUnavailable in a PDB spec.
        let spec = message("DeploymentSpec", b"\x08\x00").unwrap();
        assert_eq!(spec, json!({ "replicas": 0 }));
        let pdb = message("PodDisruptionBudgetSpec", b"\x1a\x07\x08\x01\x1a\x0350%").unwrap();
        assert_eq!(pdb, json!({ "maxUnavailable": "50%" }));
        let meta = message("ObjectMeta", b"B\x06\x08\xa5\xeb\xdc\xca\x06").unwrap();
        assert_eq!(meta, json!({ "creationTimestamp": "2026-01-02T03:04:05Z" }));
    }

    #[test]
    fn bad_bodies_are_errors_never_silent_loss() {
        assert_eq!(decode(b"{}"), Err(CodecError::NoMagic));
        assert_eq!(
            decode(b"k8s\0\n\xff"),
            Err(CodecError::Wire("truncated varint"))
        );
        assert_eq!(
            decode(b"k8s\0\n\x0a\n\x02v1\x12\x04Node"),
            Err(CodecError::UnknownKind("v1 Node".into()))
        );
        // PodSpec.volumes (1) is not in the table: refused, not dropped.
        assert_eq!(
            message("PodSpec", b"\n\x02\n\x00"),
            Err(CodecError::UnknownField {
                message: "PodSpec",
                number: 1
            })
        );
        // …unless it carries nothing.
        assert_eq!(message("PodSpec", b"\n\x00").unwrap(), json!({}));
    }

    /// `kubectl create namespace demo`.
    const KUBECTL_NAMESPACE: &[u8] = b"k8s\x00\n\x0f\n\x02v1\x12\tNamespace\x12\x1c\n\x14\n\x04demo\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x00\x1a\x02\n\x00\x1a\x00\"\x00";

    #[test]
    fn encodes_the_bytes_client_go_writes() {
        for body in [
            KUBECTL_PDB,
            KUBECTL_QUOTA,
            KUBECTL_NAMESPACE,
            KUBECTL_DEPLOYMENT,
        ] {
            let object = decode(body).unwrap();
            assert_eq!(encode(&object).unwrap(), body, "{object}");
        }
    }

    /// Objects as the store keeps them after create, status updates and apply.
    fn stored_objects() -> Vec<Value> {
        let meta = |name: &str| {
            json!({
                "name": name, "namespace": "demo", "uid": "6f1c2d3e-0000-4000-8000-000000000001",
                "resourceVersion": "42", "generation": 3,
                "creationTimestamp": "2026-01-02T03:04:05Z",
                "labels": { "app": "web", "tier": "front" },
                "annotations": { "note": "x" },
                "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                    "uid": "u-1", "controller": true, "blockOwnerDeletion": true }],
                "finalizers": ["example.com/keep"],
                "managedFields": [{ "manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                    "time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1",
                    "fieldsV1": { "f:metadata": { "f:labels": { "f:app": {} } } } }],
            })
        };
        vec![
            json!({ "apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta("q"),
                "spec": { "hard": { "pods": "3", "requests.cpu": "1500m", "requests.memory": "1536Mi" },
                    "scopeSelector": { "matchExpressions": [{ "scopeName": "PriorityClass",
                        "operator": "In", "values": ["high"] }] } },
                "status": { "hard": { "pods": "3" }, "used": { "pods": "0", "requests.cpu": "250m" } } }),
            json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta("web"),
                "spec": { "maxUnavailable": "50%", "selector": { "matchExpressions": [{ "key": "app",
                    "operator": "In", "values": ["web", "api"] }] },
                    "unhealthyPodEvictionPolicy": "AlwaysAllow" },
                "status": { "observedGeneration": 3, "currentHealthy": 2, "desiredHealthy": 1,
                    "disruptedPods": { "web-1": "2026-01-02T03:04:05Z", "web-0": "2026-01-02T03:04:07Z" },
                    "disruptionsAllowed": 1, "expectedPods": 3,
                    "conditions": [{ "type": "DisruptionAllowed", "status": "True", "observedGeneration": 3,
                        "lastTransitionTime": "2026-01-02T03:04:06Z", "reason": "SufficientPods",
                        "message": "" }] } }),
            json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("web"),
                "spec": { "replicas": 0, "selector": { "matchLabels": { "app": "web" } },
                    "template": { "metadata": { "labels": { "app": "web" } },
                        "spec": { "containers": [{ "name": "pause", "image": "pause", "args": ["-v"],
                            "ports": [{ "containerPort": 80, "protocol": "TCP" }],
                            "env": [{ "name": "A", "value": "b" }],
                            "resources": { "limits": { "cpu": "2" }, "requests": { "cpu": "500m" } } }],
                            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30 } },
                    "strategy": { "type": "RollingUpdate",
                        "rollingUpdate": { "maxUnavailable": "25%", "maxSurge": 1 } },
                    "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600 },
                "status": { "observedGeneration": 3, "replicas": 2, "updatedReplicas": 2,
                    "availableReplicas": 1, "unavailableReplicas": 1, "readyReplicas": 1 } }),
            json!({ "apiVersion": "v1", "kind": "Pod", "metadata": meta("job-1"),
                "spec": { "containers": [{ "name": "main", "image": "pause",
                    "resources": { "requests": { "cpu": "100m" }, "claims": [{ "name": "gpu", "request": "one" }] } }] },
                "status": { "phase": "Succeeded", "containerStatuses": [{ "name": "main", "image": "pause",
                    "imageID": "", "ready": false, "restartCount": 0, "started": false,
                    "state": { "terminated": { "exitCode": 0, "reason": "Completed",
                        "finishedAt": "2026-01-02T03:04:09Z" } },
                    "lastState": { "waiting": { "reason": "ContainerCreating" } } }] } }),
            json!({ "apiVersion": "v1", "kind": "Secret", "metadata": meta("s"),
                "data": { "k": "aGVsbG8=" }, "type": "Opaque" }),
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("c"),
                "data": { "a": "1" }, "immutable": false }),
        ]
    }

    #[test]
    fn round_trips_stored_objects() {
        for object in stored_objects() {
            let bytes = encode(&object).unwrap();
            assert_eq!(decode(&bytes).unwrap(), object);
        }
    }

    #[test]
    fn reads_the_bodies_of_bindings_and_evictions() {
        for body in [
            json!({ "apiVersion": "v1", "kind": "Binding",
                "metadata": { "name": "p", "namespace": "default" },
                "target": { "apiVersion": "v1", "kind": "Node", "name": "n1" } }),
            json!({ "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": { "name": "p", "namespace": "default" },
                "deleteOptions": { "gracePeriodSeconds": 0, "preconditions": { "uid": "u" },
                    "dryRun": ["All"] } }),
        ] {
            assert_eq!(decode(&encode(&body).unwrap()).unwrap(), body);
        }
    }

    #[test]
    fn lists_hold_list_meta_and_items() {
        let items = stored_objects();
        let list = json!({ "apiVersion": "v1", "kind": "ResourceQuotaList",
            "metadata": { "resourceVersion": "7" }, "items": [items[0]] });
        let bytes = encode(&list).unwrap();
        let frame = bytes.strip_prefix(MAGIC).unwrap();
        let raw = fields(frame)
            .unwrap()
            .into_iter()
            .find(|f| f.0 == 2)
            .unwrap()
            .1;
        let Wire::Bytes(raw) = raw else {
            panic!("raw is bytes")
        };
        let parts = fields(raw).unwrap();
        let [(1, Wire::Bytes(meta)), (2, Wire::Bytes(item))] = parts.as_slice() else {
            panic!("ListMeta then one item");
        };
        assert_eq!(
            message("ListMeta", meta).unwrap(),
            json!({ "resourceVersion": "7" })
        );
        let mut item_value = message("ResourceQuota", item).unwrap();
        item_value["apiVersion"] = json!("v1");
        item_value["kind"] = json!("ResourceQuota");
        assert_eq!(item_value, items[0]);
    }

    #[test]
    fn what_the_table_cannot_write_is_an_error() {
        let mut quota = stored_objects().swap_remove(0);
        quota["spec"]["unknownField"] = json!(1);
        assert_eq!(
            encode(&quota),
            Err(CodecError::UnwritableField {
                message: "ResourceQuotaSpec",
                key: "unknownField".into()
            })
        );
        assert_eq!(
            encode(&json!({ "apiVersion": "v1", "kind": "Node", "metadata": {} })),
            Err(CodecError::UnwritableKind("v1 Node".into()))
        );
        assert_eq!(
            encode(
                &json!({ "apiVersion": "v1", "kind": "Secret", "data": { "k": "not base64!" } })
            ),
            Err(CodecError::Invalid("data"))
        );
    }
}
