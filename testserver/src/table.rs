//! Server-side printing: `meta.k8s.io` Tables, which `kubectl get` asks for
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`). The columns and cells are the
//! API server's printers' (`pkg/printers/internalversion/printers.go`), with the wide columns
//! included as the server always prints them (kubectl shows priority-1 columns with `-o wide`).
//! Also ConfigMaps, Secrets, Leases, ServiceAccounts, DeviceClasses and ResourceClaimTemplates;
//! other types get upstream's default table (Name, Created At), custom types a CRD's (Name, Age).

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::resources::ResourceType;

/// `meta.k8s.io` version of the Table the client asked for, if it asked for one.
pub(crate) fn requested(accept: &str) -> Option<&'static str> {
    let mut versions = accept.split(',').filter_map(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        let table = params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io");
        let version = params.iter().find_map(|p| p.strip_prefix("v="));
        match (table, version) {
            (true, Some("v1")) => Some("meta.k8s.io/v1"),
            (true, Some("v1beta1")) => Some("meta.k8s.io/v1beta1"),
            _ => None,
        }
    });
    versions.next()
}

/// What each row carries besides its cells (`includeObject`): the object's metadata by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    pub(crate) fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            Some("None") => Ok(Include::None),
            Some("Object") => Ok(Include::Object),
            Some("Metadata" | "") | None => Ok(Include::Metadata),
            Some(other) => Err(ApiError::bad_request(format!(
                "unrecognized includeObject value: \"{other}\""
            ))),
        }
    }
}

/// The Table of an object or a list of them, printed at `now`. Without `headers` (watch
/// events after the first) the column definitions are left out, as upstream does.
pub(crate) fn table(
    rt: &ResourceType,
    body: &Value,
    (api_version, include): (&str, Include),
    headers: bool,
    now: jiff::Timestamp,
) -> Value {
    let printer = printer(rt);
    let (items, list_meta): (Vec<&Value>, Value) = match body["items"].as_array() {
        Some(items) => (items.iter().collect(), body["metadata"].clone()),
        None => (
            vec![body],
            json!({ "resourceVersion": body["metadata"]["resourceVersion"] }),
        ),
    };
    let rows: Vec<Value> = items
        .into_iter()
        .map(|obj| {
            let mut row = json!({ "cells": (printer.cells)(obj, now) });
            if let Some(conditions) = (printer.conditions)(obj) {
                row["conditions"] = conditions;
            }
            match include {
                Include::None => {}
                Include::Metadata => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": api_version,
                        "metadata": obj["metadata"],
                    });
                }
                Include::Object => row["object"] = obj.clone(),
            }
            row
        })
        .collect();
    let columns: Option<Vec<Value>> = headers.then(|| {
        printer
            .columns
            .iter()
            .map(|c| {
                json!({
                    "name": c.name, "type": c.ty, "format": c.format,
                    "description": c.description, "priority": c.priority,
                })
            })
            .collect()
    });
    json!({
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

struct Column {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    priority: u8,
    description: &'static str,
}

const fn col(name: &'static str, ty: &'static str, description: &'static str) -> Column {
    Column {
        name,
        ty,
        format: "",
        priority: 0,
        description,
    }
}

const fn wide(name: &'static str, description: &'static str) -> Column {
    Column {
        name,
        ty: "string",
        format: "",
        priority: 1,
        description,
    }
}

const NAME: Column = Column {
    name: "Name",
    ty: "string",
    format: "name",
    priority: 0,
    description: OBJECTMETA_NAME,
};
const AGE: Column = col("Age", "string", OBJECTMETA_CREATIONTIMESTAMP);

struct Printer {
    columns: &'static [Column],
    cells: fn(&Value, jiff::Timestamp) -> Vec<Value>,
    conditions: fn(&Value) -> Option<Value>,
}

fn no_conditions(_: &Value) -> Option<Value> {
    None
}

fn printer(rt: &ResourceType) -> Printer {
    let plain = |columns, cells| Printer {
        columns,
        cells,
        conditions: no_conditions,
    };
    if !rt.builtin {
        return plain(&CUSTOM_COLUMNS, custom_cells);
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => Printer {
            columns: &POD_COLUMNS,
            cells: pod_cells,
            conditions: pod_conditions,
        },
        ("", "nodes") => plain(&NODE_COLUMNS, node_cells),
        ("", "namespaces") => plain(&NAMESPACE_COLUMNS, namespace_cells),
        ("", "resourcequotas") => plain(&RESOURCE_QUOTA_COLUMNS, resource_quota_cells),
        ("", "events") | ("events.k8s.io", "events") => plain(&EVENT_COLUMNS, event_cells),
        ("policy", "poddisruptionbudgets") => plain(&PDB_COLUMNS, pdb_cells),
        ("resource.k8s.io", "resourceclaims") => plain(&RESOURCE_CLAIM_COLUMNS, claim_cells),
        ("apps", "deployments") => plain(&DEPLOYMENT_COLUMNS, deployment_cells),
        ("apps", "replicasets") => plain(&REPLICA_SET_COLUMNS, replica_set_cells),
        ("", "configmaps") => plain(&CONFIG_MAP_COLUMNS, config_map_cells),
        ("", "secrets") => plain(&SECRET_COLUMNS, secret_cells),
        ("coordination.k8s.io", "leases") => plain(&LEASE_COLUMNS, lease_cells),
        ("", "serviceaccounts")
        | ("resource.k8s.io", "deviceclasses" | "resourceclaimtemplates") => {
            plain(&NAME_AGE_COLUMNS, name_age_cells)
        }
        _ => plain(&DEFAULT_COLUMNS, default_cells),
    }
}

fn s<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn n(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn array<'a>(obj: &'a Value, ptr: &str) -> &'a [Value] {
    obj.pointer(ptr)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn name(obj: &Value) -> Value {
    json!(s(obj, "/metadata/name"))
}

fn timestamp(text: &str) -> Option<jiff::Timestamp> {
    text.parse().ok()
}

/// `translateTimestampSince`: the age of a timestamp, `<unknown>` when unset.
fn since(text: &str, now: jiff::Timestamp) -> String {
    match timestamp(text) {
        Some(t) => human_duration(now.as_second() - t.as_second()),
        None => "<unknown>".into(),
    }
}

fn age(obj: &Value, now: jiff::Timestamp) -> Value {
    json!(since(s(obj, "/metadata/creationTimestamp"), now))
}

/// apimachinery's `duration.HumanDuration`: about two significant figures.
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

const DEFAULT_COLUMNS: [Column; 2] = [
    NAME,
    Column {
        name: "Created At",
        ty: "date",
        format: "",
        priority: 0,
        description: OBJECTMETA_CREATIONTIMESTAMP,
    },
];

/// Upstream's default table convertor: the name and the creation time in RFC 3339, UTC.
fn default_cells(obj: &Value, _: jiff::Timestamp) -> Vec<Value> {
    let created = timestamp(s(obj, "/metadata/creationTimestamp"))
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| "0001-01-01T00:00:00Z".into());
    vec![name(obj), json!(created)]
}

/// A CRD without additionalPrinterColumns: the name and `.metadata.creationTimestamp`.
const CUSTOM_COLUMNS: [Column; 2] = [NAME, col("Age", "date", OBJECTMETA_CREATIONTIMESTAMP)];

fn custom_cells(obj: &Value, _: jiff::Timestamp) -> Vec<Value> {
    vec![name(obj), obj["metadata"]["creationTimestamp"].clone()]
}

const POD_COLUMNS: [Column; 9] = [
    NAME,
    col(
        "Ready",
        "string",
        "The aggregate readiness state of this pod for accepting traffic.",
    ),
    col(
        "Status",
        "string",
        "The aggregate status of the containers in this pod.",
    ),
    col(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    AGE,
    wide("IP", PODSTATUS_PODIP),
    wide("Node", PODSPEC_NODENAME),
    wide("Nominated Node", PODSTATUS_NOMINATEDNODENAME),
    wide("Readiness Gates", PODSPEC_READINESSGATES),
];

fn pod_conditions(pod: &Value) -> Option<Value> {
    let (reason, message) = match s(pod, "/status/phase") {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{ "type": "Completed", "status": "True", "reason": reason, "message": message }]))
}

fn condition_true(pod: &Value, ty: &str) -> bool {
    array(pod, "/status/conditions")
        .iter()
        .find(|c| c["type"] == ty)
        .is_some_and(|c| c["status"] == "True")
}

/// When a container last terminated, if it did.
fn last_termination(status: &Value) -> Option<jiff::Timestamp> {
    timestamp(s(status, "/lastState/terminated/finishedAt"))
}

fn terminated_reason(terminated: &Value, prefix: &str) -> String {
    let reason = s(terminated, "/reason");
    if !reason.is_empty() {
        return format!("{prefix}{reason}");
    }
    match n(terminated, "/signal") {
        0 => format!("{prefix}ExitCode:{}", n(terminated, "/exitCode")),
        signal => format!("{prefix}Signal:{signal}"),
    }
}

/// `printPod`: ready containers, the status reason, restarts, and the wide columns.
fn pod_cells(pod: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let init_containers = array(pod, "/spec/initContainers");
    let sidecar = |name: &str| {
        init_containers
            .iter()
            .any(|c| c["name"] == name && c["restartPolicy"] == "Always")
    };
    let total = array(pod, "/spec/containers").len()
        + init_containers
            .iter()
            .filter(|c| c["restartPolicy"] == "Always")
            .count();
    let mut ready = 0;
    let phase = s(pod, "/status/phase");
    let mut reason = match s(pod, "/status/reason") {
        "" => phase.to_string(),
        r => r.to_string(),
    };
    if array(pod, "/status/conditions")
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let mut restarts = 0;
    let mut sidecar_restarts = 0;
    let mut last_restart: Option<jiff::Timestamp> = None;
    let mut last_sidecar_restart: Option<jiff::Timestamp> = None;
    let mut initializing = false;
    let init_statuses = array(pod, "/status/initContainerStatuses");
    for (i, status) in init_statuses.iter().enumerate() {
        let count = n(status, "/restartCount");
        restarts += count;
        let terminated_at = last_termination(status);
        last_restart = last_restart.max(terminated_at);
        let is_sidecar = sidecar(s(status, "/name"));
        if is_sidecar {
            sidecar_restarts += count;
            last_sidecar_restart = last_sidecar_restart.max(terminated_at);
        }
        let terminated = &status["state"]["terminated"];
        let waiting_reason = s(status, "/state/waiting/reason");
        if terminated.is_object() && n(terminated, "/exitCode") == 0 {
            continue;
        }
        if is_sidecar && status["started"] == true {
            if status["ready"] == true {
                ready += 1;
            }
            continue;
        }
        reason = if terminated.is_object() {
            terminated_reason(terminated, "Init:")
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", init_containers.len())
        };
        initializing = true;
        break;
    }
    if !initializing || condition_true(pod, "Initialized") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        let mut error_reason = String::new();
        for status in array(pod, "/status/containerStatuses").iter().rev() {
            restarts += n(status, "/restartCount");
            last_restart = last_restart.max(last_termination(status));
            let waiting_reason = s(status, "/state/waiting/reason");
            let terminated = &status["state"]["terminated"];
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if terminated.is_object() {
                reason = terminated_reason(terminated, "");
                if n(terminated, "/exitCode") != 0 {
                    error_reason = reason.clone();
                }
            } else if status["ready"] == true && status["state"]["running"].is_object() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" {
            if has_running && condition_true(pod, "Ready") {
                reason = "Running".into();
            } else if !error_reason.is_empty() {
                reason = error_reason;
            } else if has_running {
                reason = "NotReady".into();
            }
        }
    }
    let deleting = pod["metadata"]["deletionTimestamp"].is_string();
    if deleting && s(pod, "/status/reason") == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".into();
    }
    let restarts_text = match last_restart {
        Some(at) if restarts != 0 => {
            format!(
                "{restarts} ({} ago)",
                human_duration(now.as_second() - at.as_second())
            )
        }
        _ => restarts.to_string(),
    };
    let or_none = |v: &str| {
        if v.is_empty() {
            "<none>".to_string()
        } else {
            v.to_string()
        }
    };
    let gates = array(pod, "/spec/readinessGates");
    let gates_text = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let met = gates
            .iter()
            .filter(|g| condition_true(pod, s(g, "/conditionType")))
            .count();
        format!("{met}/{}", gates.len())
    };
    vec![
        name(pod),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_text),
        age(pod, now),
        // The internal Pod's podIPs start with podIP when only that is set.
        json!(or_none(match s(pod, "/status/podIPs/0/ip") {
            "" => s(pod, "/status/podIP"),
            ip => ip,
        })),
        json!(or_none(s(pod, "/spec/nodeName"))),
        json!(or_none(s(pod, "/status/nominatedNodeName"))),
        json!(gates_text),
    ]
}

const NODE_COLUMNS: [Column; 10] = [
    NAME,
    col("Status", "string", "The status of the node"),
    col("Roles", "string", "The roles of the node"),
    AGE,
    col("Version", "string", NODESYSTEMINFO_KUBELETVERSION),
    wide("Internal-IP", NODESTATUS_ADDRESSES),
    wide("External-IP", NODESTATUS_ADDRESSES),
    wide("OS-Image", NODESYSTEMINFO_OSIMAGE),
    wide("Kernel-Version", NODESYSTEMINFO_KERNELVERSION),
    wide("Container-Runtime", NODESYSTEMINFO_CONTAINERRUNTIMEVERSION),
];

fn node_cells(node: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let mut status: Vec<String> = array(node, "/status/conditions")
        .iter()
        .filter(|c| c["type"] == "Ready")
        .take(1)
        .map(|c| match c["status"].as_str() {
            Some("True") => "Ready".to_string(),
            _ => "NotReady".to_string(),
        })
        .collect();
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if node["spec"]["unschedulable"] == true {
        status.push("SchedulingDisabled".into());
    }
    let mut roles: Vec<&str> = node["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) if !role.is_empty() => Some(role),
            Some(_) => None,
            None if k == "kubernetes.io/role" => v.as_str().filter(|r| !r.is_empty()),
            None => None,
        })
        .collect();
    roles.sort_unstable();
    roles.dedup();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    let info = |field: &str| match s(node, &format!("/status/nodeInfo/{field}")) {
        "" => "<unknown>".to_string(),
        v => v.to_string(),
    };
    let mut kernel = info("kernelVersion");
    let arch = s(node, "/status/nodeInfo/architecture");
    if !arch.is_empty() {
        kernel = format!("{kernel} ({arch})");
    }
    let address = |ty: &str| {
        array(node, "/status/addresses")
            .iter()
            .find(|a| a["type"] == ty)
            .map_or("<none>".to_string(), |a| s(a, "/address").to_string())
    };
    vec![
        name(node),
        json!(status.join(",")),
        json!(roles),
        age(node, now),
        json!(s(node, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(kernel),
        json!(info("containerRuntimeVersion")),
    ]
}

const NAMESPACE_COLUMNS: [Column; 3] = [
    NAME,
    col("Status", "string", "The status of the namespace"),
    AGE,
];

fn namespace_cells(ns: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![name(ns), json!(s(ns, "/status/phase")), age(ns, now)]
}

const RESOURCE_QUOTA_COLUMNS: [Column; 4] = [
    NAME,
    col(
        "Request",
        "string",
        "Request represents a minimum amount of cpu/memory that a container may consume.",
    ),
    col(
        "Limit",
        "string",
        "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
    ),
    AGE,
];

/// `used/hard` of every resource in `status.hard`, by name; `limits.*` in the Limit column.
fn resource_quota_cells(quota: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let hard = quota["status"]["hard"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut names: Vec<&String> = hard.keys().collect();
    names.sort();
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    for resource in names {
        let used = quota["status"]["used"][resource.as_str()]
            .as_str()
            .unwrap_or("0");
        let entry = format!(
            "{resource}: {used}/{}",
            hard[resource].as_str().unwrap_or("0")
        );
        let mut pieces = resource.split('.');
        if pieces.next() == Some("limits") && pieces.next().is_some() {
            limits.push(entry);
        } else {
            requests.push(entry);
        }
    }
    vec![
        name(quota),
        json!(requests.join(", ")),
        json!(limits.join(", ")),
        age(quota, now),
    ]
}

const PDB_COLUMNS: [Column; 5] = [
    NAME,
    col(
        "Min Available",
        "string",
        "The minimum number of pods that must be available.",
    ),
    col(
        "Max Unavailable",
        "string",
        "The maximum number of pods that may be unavailable.",
    ),
    col(
        "Allowed Disruptions",
        "integer",
        "Calculated number of pods that may be disrupted at this time.",
    ),
    AGE,
];

/// An IntOrString as Go's `String()` prints it; `N/A` when unset.
fn int_or_string(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => "N/A".into(),
    }
}

fn pdb_cells(pdb: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![
        name(pdb),
        json!(int_or_string(&pdb["spec"]["minAvailable"])),
        json!(int_or_string(&pdb["spec"]["maxUnavailable"])),
        json!(n(pdb, "/status/disruptionsAllowed")),
        age(pdb, now),
    ]
}

const RESOURCE_CLAIM_COLUMNS: [Column; 3] = [
    NAME,
    col(
        "State",
        "string",
        "A summary of the current state (allocated, pending, reserved, etc.).",
    ),
    AGE,
];

fn claim_cells(claim: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let deleted = claim["metadata"]["deletionTimestamp"].is_string();
    let mut states = Vec::new();
    if deleted {
        states.push("deleted");
    }
    if claim["status"]["allocation"].is_object() {
        states.push("allocated");
        if !array(claim, "/status/reservedFor").is_empty() {
            states.push("reserved");
        }
    } else if !deleted {
        states.push("pending");
    }
    vec![name(claim), json!(states.join(",")), age(claim, now)]
}

const CONTAINERS: &str = "Names of each container in the template.";
const IMAGES: &str = "Images referenced by each container in the template.";

/// `layoutContainerCells`: the template's container names and images, comma-separated.
fn containers(workload: &Value) -> (String, String) {
    let containers = array(workload, "/spec/template/spec/containers");
    let join = |field: &str| {
        containers
            .iter()
            .map(|c| c[field].as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(",")
    };
    (join("name"), join("image"))
}

const DEPLOYMENT_COLUMNS: [Column; 8] = [
    NAME,
    col("Ready", "string", "Number of the pod with ready state"),
    col("Up-to-date", "string", DEPLOYMENTSTATUS_UPDATEDREPLICAS),
    col("Available", "string", DEPLOYMENTSTATUS_AVAILABLEREPLICAS),
    AGE,
    wide("Containers", CONTAINERS),
    wide("Images", IMAGES),
    wide("Selector", DEPLOYMENTSPEC_SELECTOR),
];

fn deployment_cells(deploy: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let (names, images) = containers(deploy);
    vec![
        name(deploy),
        json!(format!(
            "{}/{}",
            n(deploy, "/status/readyReplicas"),
            n(deploy, "/spec/replicas")
        )),
        json!(n(deploy, "/status/updatedReplicas")),
        json!(n(deploy, "/status/availableReplicas")),
        age(deploy, now),
        json!(names),
        json!(images),
        json!(crate::store::label_selector_string(
            &deploy["spec"]["selector"]
        )),
    ]
}

const REPLICA_SET_COLUMNS: [Column; 8] = [
    NAME,
    col("Desired", "integer", REPLICASETSPEC_REPLICAS),
    col("Current", "integer", REPLICASETSTATUS_REPLICAS),
    col("Ready", "integer", REPLICASETSTATUS_READYREPLICAS),
    AGE,
    wide("Containers", CONTAINERS),
    wide("Images", IMAGES),
    wide("Selector", REPLICASETSPEC_SELECTOR),
];

fn replica_set_cells(rs: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let (names, images) = containers(rs);
    // `metav1.FormatLabelSelector`: `<none>` for a selector that selects everything.
    let selector = match crate::store::label_selector_string(&rs["spec"]["selector"]) {
        text if text.is_empty() => "<none>".to_string(),
        text => text,
    };
    vec![
        name(rs),
        json!(n(rs, "/spec/replicas")),
        json!(n(rs, "/status/replicas")),
        json!(n(rs, "/status/readyReplicas")),
        age(rs, now),
        json!(names),
        json!(images),
        json!(selector),
    ]
}

/// Printers whose only columns are the name and the age.
const NAME_AGE_COLUMNS: [Column; 2] = [NAME, AGE];

fn name_age_cells(obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![name(obj), age(obj, now)]
}

fn entries(obj: &Value, field: &str) -> usize {
    obj[field].as_object().map_or(0, |m| m.len())
}

const CONFIG_MAP_COLUMNS: [Column; 3] = [NAME, col("Data", "string", CONFIGMAP_DATA), AGE];

fn config_map_cells(cm: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let data = entries(cm, "data") + entries(cm, "binaryData");
    vec![name(cm), json!(data), age(cm, now)]
}

const SECRET_COLUMNS: [Column; 4] = [
    NAME,
    col("Type", "string", SECRET_TYPE),
    col("Data", "string", SECRET_DATA),
    AGE,
];

fn secret_cells(secret: &Value, now: jiff::Timestamp) -> Vec<Value> {
    // The API server defaults an unset type to Opaque on create.
    let ty = match s(secret, "/type") {
        "" => "Opaque",
        ty => ty,
    };
    vec![
        name(secret),
        json!(ty),
        json!(entries(secret, "data")),
        age(secret, now),
    ]
}

const LEASE_COLUMNS: [Column; 3] = [NAME, col("Holder", "string", LEASESPEC_HOLDERIDENTITY), AGE];

fn lease_cells(lease: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![
        name(lease),
        json!(s(lease, "/spec/holderIdentity")),
        age(lease, now),
    ]
}

const EVENT_COLUMNS: [Column; 10] = [
    col("Last Seen", "string", EVENT_LASTTIMESTAMP),
    col("Type", "string", EVENT_TYPE),
    col("Reason", "string", EVENT_REASON),
    col("Object", "string", EVENT_INVOLVEDOBJECT),
    wide("Subobject", OBJECTREFERENCE_FIELDPATH),
    wide("Source", EVENT_SOURCE),
    col("Message", "string", EVENT_MESSAGE),
    wide("First Seen", EVENT_FIRSTTIMESTAMP),
    wide("Count", EVENT_COUNT),
    Column {
        name: "Name",
        ty: "string",
        format: "name",
        priority: 1,
        description: OBJECTMETA_NAME,
    },
];

/// `printEvent`, on the core/v1 form of an Event (both APIs print the stored Event).
fn event_cells(event: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let core;
    let event = if s(event, "/apiVersion").starts_with("events.k8s.io/") {
        core = crate::events::View::EventsV1.store(event);
        &core
    } else {
        event
    };
    let first = match s(event, "/firstTimestamp") {
        "" => since(s(event, "/eventTime"), now),
        t => since(t, now),
    };
    let mut last = match s(event, "/lastTimestamp") {
        "" => first.clone(),
        t => since(t, now),
    };
    let mut count = n(event, "/count");
    if event["series"].is_object() {
        last = since(s(event, "/series/lastObservedTime"), now);
        count = n(event, "/series/count");
    } else if count == 0 {
        // Singleton events of the new API carry no count.
        count = 1;
    }
    let kind = s(event, "/involvedObject/kind").to_lowercase();
    let target = match s(event, "/involvedObject/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let first_non_empty = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else {
            a.to_string()
        }
    };
    let component = first_non_empty(
        s(event, "/source/component"),
        s(event, "/reportingComponent"),
    );
    let instance = first_non_empty(s(event, "/source/host"), s(event, "/reportingInstance"));
    let source = if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last),
        json!(s(event, "/type")),
        json!(s(event, "/reason")),
        json!(target),
        json!(s(event, "/involvedObject/fieldPath")),
        json!(source),
        json!(s(event, "/message").trim()),
        json!(first),
        json!(count),
        name(event),
    ]
}

// Column descriptions: the Kubernetes API's field documentation, as upstream's printers use it.
const SECRET_TYPE: &str = "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types";
const SECRET_DATA: &str = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4";
const CONFIGMAP_DATA: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";
const LEASESPEC_HOLDERIDENTITY: &str = "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.";
const OBJECTMETA_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const OBJECTMETA_CREATIONTIMESTAMP: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const EVENT_LASTTIMESTAMP: &str =
    "The time at which the most recent occurrence of this event was recorded.";
const EVENT_TYPE: &str =
    "Type of this event (Normal, Warning), new types could be added in the future";
const EVENT_REASON: &str = "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.";
const EVENT_INVOLVEDOBJECT: &str = "The object that this event is about.";
const OBJECTREFERENCE_FIELDPATH: &str = "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.";
const EVENT_SOURCE: &str =
    "The component reporting this event. Should be a short machine understandable string.";
const EVENT_MESSAGE: &str = "A human-readable description of the status of this operation.";
const EVENT_FIRSTTIMESTAMP: &str =
    "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)";
const EVENT_COUNT: &str = "The number of times this event has occurred.";
const PODSTATUS_PODIP: &str = "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.";
const PODSPEC_NODENAME: &str = "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename";
const PODSTATUS_NOMINATEDNODENAME: &str = "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.";
const PODSPEC_READINESSGATES: &str = "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates";
const NODESYSTEMINFO_KUBELETVERSION: &str = "Kubelet Version reported by the node.";
const NODESTATUS_ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";
const NODESYSTEMINFO_OSIMAGE: &str =
    "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).";
const NODESYSTEMINFO_KERNELVERSION: &str =
    "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).";
const NODESYSTEMINFO_CONTAINERRUNTIMEVERSION: &str = "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).";
const REPLICASETSPEC_REPLICAS: &str = "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset";
const REPLICASETSTATUS_REPLICAS: &str = "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset";
const REPLICASETSTATUS_READYREPLICAS: &str =
    "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.";
const REPLICASETSPEC_SELECTOR: &str = "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const DEPLOYMENTSTATUS_UPDATEDREPLICAS: &str = "Total number of non-terminating pods targeted by this deployment that have the desired template spec.";
const DEPLOYMENTSTATUS_AVAILABLEREPLICAS: &str = "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.";
const DEPLOYMENTSPEC_SELECTOR: &str = "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_is_apimachinerys() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 25 * 60, "3h25m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (731 * 86400, "2y1d"),
            (8 * 365 * 86400, "8y"),
        ];
        for (seconds, text) in cases {
            assert_eq!(human_duration(seconds), text, "{seconds} s");
        }
    }

    #[test]
    fn the_table_media_type_is_recognized() {
        assert_eq!(
            requested("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
            Some("meta.k8s.io/v1")
        );
        assert_eq!(
            requested("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
            Some("meta.k8s.io/v1beta1")
        );
        assert_eq!(requested("application/json"), None);
        assert_eq!(requested("application/vnd.kubernetes.protobuf"), None);
    }
}
