//! Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), read
//! into the JSON the store keeps.
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
//! every non-pointer field, zero or not, and zero is what Go's JSON leaves out.

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
}

/// Whether a `Content-Type` names the protobuf encoding.
pub(crate) fn is_protobuf(content_type: &str) -> bool {
    media_type(content_type) == PROTOBUF
}

/// Whether an `Accept` header allows protobuf but no JSON. The server answers only JSON, so such
/// a client gets 406. kubectl's typed clients send `application/vnd.kubernetes.protobuf,application/json`.
pub(crate) fn wants_protobuf_only(accept: &str) -> bool {
    let types: Vec<&str> = accept.split(',').map(media_type).collect();
    types.contains(&PROTOBUF)
        && !types
            .iter()
            .any(|t| matches!(*t, "application/json" | "application/*" | "*/*"))
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
    IntOrString,
    Time,
}

/// One field: number, JSON name, type, and how it is kept.
#[derive(Clone, Copy)]
struct F(u64, &'static str, Ty, Keep);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// A non-pointer Go field: a zero value is left out, as Go's JSON does.
    NonZero,
    /// A pointer (or a field without omitempty): zero is a value.
    Always,
    /// A repeated field.
    List,
}

use Keep::{Always, List, NonZero};
use Ty::*;

/// The schema of the messages the table covers, by name.
fn schema(message: &str) -> Option<&'static [F]> {
    Some(match message {
        "ObjectMeta" => &[
            F(1, "name", Str, NonZero),
            F(2, "generateName", Str, NonZero),
            F(3, "namespace", Str, NonZero),
            F(5, "uid", Str, NonZero),
            F(6, "resourceVersion", Str, NonZero),
            F(8, "creationTimestamp", Time, NonZero),
            F(10, "deletionGracePeriodSeconds", Int, Always),
            F(11, "labels", StrMap, NonZero),
            F(12, "annotations", StrMap, NonZero),
            F(13, "ownerReferences", Msg("OwnerReference"), List),
            F(14, "finalizers", Str, List),
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
        // Written by the kubelet, not by create: only zeros are expected here.
        "PodStatus" => &[],
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
        // Written by controllers, not by create: only zeros are expected here.
        "DeploymentStatus" => &[],
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
            F(32, "overhead", QuantityMap, NonZero),
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
        ],
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
        "PodDisruptionBudgetStatus" => &[],
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
pub(crate) fn decode(body: &[u8]) -> Result<Value, CodecError> {
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
            (StrMap | BytesMap | QuantityMap, Wire::Bytes(b)) => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types() {
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
                "status": {},
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
}
