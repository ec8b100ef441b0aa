//! What the pod registry adds to the generic one: binding a pod to a node
//! (`pods/binding`), and pod conditions written as the API server writes them. Its graceful
//! deletion is [`crate::deletion`]'s.

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::store::{Store, WriteOptions, rfc3339};

/// The node labels the `PodTopologyLabels` admission plugin (on by default since 1.35) copies
/// from a Binding's node onto the pod.
const TOPOLOGY_LABELS: [&str; 2] = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// Sets a pod condition as `podutil.UpdatePodCondition` does: the condition replaces the one
/// of its type, keeping that one's `lastTransitionTime` when the status is unchanged.
pub(crate) fn set_condition(pod: &mut Value, mut condition: Value, now: &str) {
    condition["lastProbeTime"] = Value::Null;
    condition["lastTransitionTime"] = json!(now);
    if !pod["status"].is_object() {
        pod["status"] = json!({});
    }
    if !pod["status"]["conditions"].is_array() {
        pod["status"]["conditions"] = json!([]);
    }
    let Some(conditions) = pod["status"]["conditions"].as_array_mut() else {
        unreachable!("conditions was just made a list");
    };
    match conditions
        .iter_mut()
        .find(|c| c["type"] == condition["type"])
    {
        Some(old) => {
            if old["status"] == condition["status"] {
                condition["lastTransitionTime"] = old["lastTransitionTime"].clone();
            }
            *old = condition;
        }
        None => conditions.push(condition),
    }
}

/// Whether the pod's Ready condition is True (`podutil.IsPodReady`).
pub(crate) fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The answer of the subresources that answer with a `Status` (binding, eviction).
pub(crate) fn success() -> Value {
    json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201 })
}

/// What the create handler and a named subresource check of a body before anything else:
/// an apiVersion the endpoint accepts (the first is its own), its kind, the URL's namespace
/// (filled in when left out) and the URL's name.
pub(crate) fn check_body(
    body: &Value,
    (accepted, kind): (&[&str], &str),
    ns: &str,
    name: &str,
) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be an object",
        ));
    }
    if let Some(api_version) = body["apiVersion"].as_str()
        && !accepted.contains(&api_version)
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            accepted[0]
        )));
    }
    if let Some(given) = body["kind"].as_str()
        && given != kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({given}) does not match the expected kind ({kind})"
        )));
    }
    if body["metadata"]["namespace"]
        .as_str()
        .is_some_and(|given| !given.is_empty() && given != ns)
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if body["metadata"]["name"].as_str().unwrap_or_default() != name {
        return Err(ApiError::bad_request(format!(
            "name in URL does not match name in {kind} object"
        )));
    }
    Ok(())
}

/// `POST .../pods/<name>/binding` (`BindingREST`): assigns the pod to the binding's node,
/// writing storage directly (no pod strategy: the generation stays). `dry_run` writes nothing.
pub(crate) fn bind(
    store: &Store,
    (ns, name): (&str, &str),
    binding: &Value,
    opts: &WriteOptions,
) -> Result<(), ApiError> {
    check_body(binding, (&["v1"], "Binding"), ns, name)?;
    let target = &binding["target"];
    validate_binding(target)?;
    let node = target["name"].as_str().unwrap_or_default();
    let mut labels = binding["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if target["kind"] == "Node" {
        labels.extend(topology_labels(store, node));
    }
    let annotations = binding["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let pods = store
        .resource_type("", "pods")
        .unwrap_or_else(|| unreachable!("pods are built in"));
    let uid = binding["metadata"]["uid"]
        .as_str()
        .filter(|s| !s.is_empty());
    let rv = binding["metadata"]["resourceVersion"]
        .as_str()
        .filter(|s| !s.is_empty());
    let now = rfc3339(Timestamp::now());
    store.guaranteed_update((&pods, ns, name), None, opts, |current| {
        storage_preconditions(("pods", ns, name), current, uid, rv)
            .map_err(|why| ApiError::conflict(&pods, name, &why))?;
        let refused = |why: String| Err(ApiError::conflict_on(("pods/binding", ""), name, &why));
        if current["metadata"]["deletionTimestamp"].is_string() {
            return refused(format!(
                "pod {name} is being deleted, cannot be assigned to a host"
            ));
        }
        if let Some(assigned) = current["spec"]["nodeName"]
            .as_str()
            .filter(|n| !n.is_empty())
        {
            return refused(format!(
                "pod {name} is already assigned to node \"{assigned}\""
            ));
        }
        if current["spec"]["schedulingGates"]
            .as_array()
            .is_some_and(|g| !g.is_empty())
        {
            return refused(format!("pod {name} has non-empty .spec.schedulingGates"));
        }
        let mut pod = current.clone();
        pod["spec"]["nodeName"] = json!(node);
        // ClearingNominatedNodeNameAfterBinding (beta, on by default since 1.35).
        if let Some(status) = pod["status"].as_object_mut() {
            status.remove("nominatedNodeName");
        }
        merge_map(&mut pod["metadata"], "annotations", &annotations);
        merge_map(&mut pod["metadata"], "labels", &labels);
        set_condition(
            &mut pod,
            json!({ "type": "PodScheduled", "status": "True" }),
            &now,
        );
        Ok(pod)
    })?;
    Ok(())
}

/// `ValidatePodBinding`. Its errors are returned unconverted, so the API server answers them as
/// an unknown error: 500 without a reason, the aggregated field errors as the message.
fn validate_binding(target: &Value) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    if let Some(kind) = target["kind"]
        .as_str()
        .filter(|k| !k.is_empty() && *k != "Node")
    {
        errors.push(format!(
            "target.kind: Unsupported value: \"{kind}\": supported values: \"Node\", \"<empty>\""
        ));
    }
    if target["name"].as_str().is_none_or(str::is_empty) {
        errors.push("target.name: Required value".to_string());
    }
    match errors.as_slice() {
        [] => Ok(()),
        [one] => Err(ApiError::new(500, "", one.clone())),
        many => Err(ApiError::new(500, "", format!("[{}]", many.join(", ")))),
    }
}

/// The topology labels of the node, none when it does not exist.
fn topology_labels(store: &Store, node: &str) -> Map<String, Value> {
    let Some(nodes) = store.resource_type("", "nodes") else {
        return Map::new();
    };
    let Ok(node) = store.get(&nodes, "", node) else {
        return Map::new();
    };
    node["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| TOPOLOGY_LABELS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Adds `entries` to the map `meta[field]`, overwriting keys it has.
fn merge_map(meta: &mut Value, field: &str, entries: &Map<String, Value>) {
    if entries.is_empty() {
        return;
    }
    if !meta[field].is_object() {
        meta[field] = json!({});
    }
    if let Some(map) = meta[field].as_object_mut() {
        map.extend(entries.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

/// The storage layer's precondition check (`storage.Preconditions.Check`) of a write to the
/// object `resource/ns/name`; the error text is what the registry wraps in its 409.
fn storage_preconditions(
    (resource, ns, name): (&str, &str, &str),
    current: &Value,
    uid: Option<&str>,
    rv: Option<&str>,
) -> Result<(), String> {
    let checks = [
        ("UID", "uid", uid),
        ("ResourceVersion", "resourceVersion", rv),
    ];
    for (label, field, expected) in checks {
        let actual = current["metadata"][field].as_str().unwrap_or_default();
        if let Some(expected) = expected
            && expected != actual
        {
            return Err(format!(
                "StorageError: invalid object, Code: 4, Key: /registry/{resource}/{ns}/{name}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: {label} in precondition: {expected}, {label} in object meta: {actual}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let mut pod = json!({ "status": { "conditions": [
            { "type": "PodScheduled", "status": "True", "reason": "r",
              "lastTransitionTime": "2026-01-01T00:00:00Z" },
        ] } });
        set_condition(
            &mut pod,
            json!({ "type": "PodScheduled", "status": "True" }),
            "2026-01-02T00:00:00Z",
        );
        assert_eq!(
            pod["status"]["conditions"],
            json!([{ "type": "PodScheduled", "status": "True", "lastProbeTime": null,
                     "lastTransitionTime": "2026-01-01T00:00:00Z" }])
        );
        set_condition(
            &mut pod,
            json!({ "type": "Ready", "status": "False" }),
            "2026-01-02T00:00:00Z",
        );
        assert_eq!(
            pod["status"]["conditions"][1]["lastTransitionTime"],
            "2026-01-02T00:00:00Z"
        );
    }
}
