//! Strategic merge patch, server-side apply and field ownership.
//!
//! The real apiserver drives both from Go struct tags and OpenAPI schemas; this in-memory server
//! has no schemas, so list semantics come from a table keyed by the list field's name
//! ([`list_merge_key`], [`is_set_list`]). Everything else follows apimachinery's `strategicpatch`
//! and structured-merge-diff (SMD) as closely as a schema-less JSON model allows.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub enum PatchError {
    /// Malformed patch (maps to HTTP 400/422 by the caller).
    Invalid(String),
    /// Server-side apply conflict (HTTP 409). Message in apiserver style:
    /// `Apply failed with 1 conflict: conflict with "other-manager": .spec.replicas`
    Conflict(String),
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatchError::Invalid(m) | PatchError::Conflict(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for PatchError {}

/// The list-merge key the Kubernetes types declare for a list field, by the field's name
/// (patchMergeKey for strategic merge, listMapKeys for SSA). Return None for others.
pub fn list_merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "conditions" => "type",
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "resourceClaimStatuses"
        | "resourceClaims"
        | "imagePullSecrets"
        | "schedulingGates"
        | "secrets" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" => "containerPort",
        "ownerReferences" | "reservedFor" => "uid",
        "storageVersions" => "apiServerID",
        "hostAliases" | "podIPs" | "hostIPs" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        "taints" => "key",
        "readinessGates" => "conditionType",
        _ => return None,
    })
}

/// Lists of scalars that merge as sets (strategic: patchStrategy=merge on a primitive list;
/// SSA: listType=set): finalizers.
pub fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

/// A second key to try when the declared one is absent: the name-only table cannot tell a
/// container's `ports` (keyed by containerPort) from a Service's `ports` (keyed by port).
fn fallback_merge_key(field: &str) -> Option<&'static str> {
    match field {
        "ports" => Some("port"),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ListKind {
    Keyed(&'static str),
    Set,
    Atomic,
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Object(_) | Value::Array(_))
}

fn has_scalar_key(e: &Value, key: &str) -> bool {
    matches!(
        e.get(key),
        Some(Value::String(_) | Value::Number(_) | Value::Bool(_))
    )
}

/// How a list merges. Without schemas we only trust the table when every element carries the
/// key (or is a scalar, for sets); anything else is treated as atomic rather than rejected,
/// so unusual custom lists that share a field name still round-trip.
fn list_kind(field: &str, elems: &[&Value]) -> ListKind {
    if let Some(key) = list_merge_key(field) {
        for k in std::iter::once(key).chain(fallback_merge_key(field)) {
            if elems.iter().all(|e| has_scalar_key(e, k)) {
                return ListKind::Keyed(k);
            }
        }
        return ListKind::Atomic;
    }
    if is_set_list(field) && elems.iter().all(|e| is_scalar(e)) {
        return ListKind::Set;
    }
    ListKind::Atomic
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

// ---------------------------------------------------------------------------------------------
// Strategic merge patch
// ---------------------------------------------------------------------------------------------

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER_PREFIX: &str = "$setElementOrder/";
const DELETE_PRIMITIVE_PREFIX: &str = "$deleteFromPrimitiveList/";

/// Kubernetes strategic merge patch (as apimachinery's strategicpatch.StrategicMergePatch for
/// built-in types), applied to `target` (the whole object). No `$`-directive key remains in the
/// result.
pub fn strategic_merge(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Value::Object(p) = patch else {
        // Same wording as the Go JSON decoder the apiserver uses for the patch body.
        return Err(PatchError::Invalid(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            type_name(patch)
        )));
    };
    let base = match target {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    // A top-level `$patch: delete` leaves an empty object, as apimachinery does.
    Ok(Value::Object(smp_map(base, p)?.unwrap_or_default()))
}

fn unknown_directive(d: &Value, ctx: &Map<String, Value>) -> PatchError {
    PatchError::Invalid(format!(
        "unknown patch type: {d} in map: {}",
        Value::Object(ctx.clone())
    ))
}

/// Merges `patch` into `orig`. `None` means the map itself was deleted (`$patch: delete`).
fn smp_map(
    mut orig: Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<Option<Map<String, Value>>, PatchError> {
    if let Some(d) = patch.get(DIRECTIVE) {
        return match d.as_str() {
            Some("replace") => {
                let mut rest = patch.clone();
                rest.remove(DIRECTIVE);
                // Merging into nothing resolves any nested directives and nulls.
                smp_map(Map::new(), &rest)
            }
            Some("delete") => Ok(None),
            _ => Err(unknown_directive(d, patch)),
        };
    }

    if let Some(rk) = patch.get(RETAIN_KEYS) {
        let Value::Array(keys) = rk else {
            return Err(PatchError::Invalid(format!(
                "invalid patch: the value of {RETAIN_KEYS} must be a list, got {rk}"
            )));
        };
        orig.retain(|k, _| keys.iter().any(|x| x.as_str() == Some(k.as_str())));
    }

    for (k, v) in patch {
        let Some(field) = k.strip_prefix(DELETE_PRIMITIVE_PREFIX) else {
            continue;
        };
        let Value::Array(del) = v else {
            return Err(PatchError::Invalid(format!(
                "invalid patch: the value of {k} must be a list, got {v}"
            )));
        };
        let now_empty = match orig.get_mut(field) {
            Some(Value::Array(list)) => {
                list.retain(|x| !del.contains(x));
                list.is_empty()
            }
            _ => false,
        };
        // Go's omitempty drops the emptied slice from what clients see.
        if now_empty {
            orig.remove(field);
        }
    }

    // The server-side order is needed after the merge, so capture it first.
    let mut orders: Vec<(&str, &Vec<Value>, Vec<Value>)> = Vec::new();
    for (k, v) in patch {
        let Some(field) = k.strip_prefix(SET_ORDER_PREFIX) else {
            continue;
        };
        let Value::Array(order) = v else {
            return Err(PatchError::Invalid(format!(
                "invalid patch: the value of {k} must be a list, got {v}"
            )));
        };
        let before = match orig.get(field) {
            Some(Value::Array(a)) => a.clone(),
            _ => Vec::new(),
        };
        orders.push((field, order, before));
    }

    for (k, pv) in patch {
        // Directives were handled above; unknown `$` keys are no real field and are dropped.
        if k.starts_with('$') {
            continue;
        }
        match pv {
            Value::Null => {
                orig.remove(k);
            }
            Value::Object(pm) => {
                // A type mismatch or missing key means the patch value is taken as is.
                let base = match orig.remove(k) {
                    Some(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                if let Some(m) = smp_map(base, pm)? {
                    orig.insert(k.clone(), Value::Object(m));
                }
            }
            Value::Array(pa) => {
                let base = match orig.remove(k) {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                };
                orig.insert(k.clone(), Value::Array(smp_list(k, base, pa)?));
            }
            other => {
                orig.insert(k.clone(), other.clone());
            }
        }
    }

    for (field, order, before) in orders {
        if let Some(Value::Array(list)) = orig.get_mut(field) {
            reorder(field, list, order, &before);
        }
    }
    Ok(Some(orig))
}

fn is_replace_marker(e: &Value) -> bool {
    e.get(DIRECTIVE).and_then(Value::as_str) == Some("replace")
}

/// Resolves directives and nulls in a value that has nothing to merge into.
fn smp_clean(v: &Value) -> Result<Value, PatchError> {
    match v {
        Value::Object(m) => Ok(Value::Object(smp_map(Map::new(), m)?.unwrap_or_default())),
        Value::Array(a) => a
            .iter()
            .filter(|e| e.get(DIRECTIVE).is_none())
            .map(smp_clean)
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

fn smp_list(field: &str, orig: Vec<Value>, patch: &[Value]) -> Result<Vec<Value>, PatchError> {
    let candidates: Vec<&Value> = patch.iter().filter(|e| !is_replace_marker(e)).collect();
    let kind = list_kind(field, &candidates);

    if kind == ListKind::Set {
        // apimachinery appends the patch to the original and de-duplicates, keeping first hits.
        let mut out: Vec<Value> = Vec::with_capacity(orig.len() + patch.len());
        for v in orig.into_iter().chain(patch.iter().cloned()) {
            if !out.contains(&v) {
                out.push(v);
            }
        }
        return Ok(out);
    }

    if kind == ListKind::Atomic
        && let Some(key) = list_merge_key(field)
        && let Some(bad) = candidates.iter().find(|e| !has_scalar_key(e, key))
    {
        // Built-in types declare the key, so apimachinery rejects elements without it.
        return Err(PatchError::Invalid(format!(
            "map: {bad} does not contain declared merge key: {key}"
        )));
    }

    let ListKind::Keyed(key) = kind else {
        // Atomic: the patch list replaces; directive elements carry no data.
        return patch
            .iter()
            .filter(|e| e.get(DIRECTIVE).is_none())
            .map(smp_clean)
            .collect();
    };

    let mut out = orig;
    let mut replace = false;
    for e in patch {
        let Some(d) = e.get(DIRECTIVE) else {
            continue;
        };
        match d.as_str() {
            Some("replace") => replace = true,
            Some("delete") => {
                let kv = e.get(key);
                out.retain(|o| o.get(key) != kv);
            }
            _ => {
                let ctx = e.as_object().cloned().unwrap_or_default();
                return Err(unknown_directive(d, &ctx));
            }
        }
    }
    if replace {
        return patch
            .iter()
            .filter(|e| e.get(DIRECTIVE).is_none())
            .map(smp_clean)
            .collect();
    }

    for e in patch {
        let Value::Object(pm) = e else {
            continue;
        };
        if pm.contains_key(DIRECTIVE) {
            continue;
        }
        let kv = pm.get(key);
        match out.iter_mut().find(|o| o.get(key) == kv) {
            Some(slot) => {
                let base = match slot.take() {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                // No `$patch` here (skipped above), so the element cannot be deleted.
                *slot = Value::Object(smp_map(base, pm)?.unwrap_or_default());
            }
            None => out.push(Value::Object(smp_map(Map::new(), pm)?.unwrap_or_default())),
        }
    }
    Ok(out)
}

/// `$setElementOrder/<field>`: apimachinery's normalizeElementOrder + mergeSortedSlice. Items
/// named in the order list take that order; server-only items keep their server order and are
/// interleaved by their original positions.
fn reorder(field: &str, list: &mut Vec<Value>, order: &[Value], server: &[Value]) {
    let elems: Vec<&Value> = list.iter().collect();
    let kind = list_kind(field, &elems);
    let id = |v: &Value| -> Option<Value> {
        match kind {
            ListKind::Keyed(k) => v.get(k).cloned(),
            ListKind::Set => Some(v.clone()),
            ListKind::Atomic => None,
        }
    };
    if kind == ListKind::Atomic {
        return;
    }
    let order_ids: Vec<Value> = order
        .iter()
        .filter_map(|o| id(o).or_else(|| is_scalar(o).then(|| o.clone())))
        .collect();
    let server_ids: Vec<Value> = server.iter().filter_map(id).collect();
    let pos = |ids: &[Value], e: &Value| -> Option<usize> {
        let i = id(e)?;
        ids.iter().position(|x| *x == i)
    };

    let (mut named, mut server_only): (Vec<Value>, Vec<Value>) = std::mem::take(list)
        .into_iter()
        .partition(|e| pos(&order_ids, e).is_some());
    // Stable sorts; unknown positions go last.
    named.sort_by_key(|e| pos(&order_ids, e).unwrap_or(usize::MAX));
    server_only.sort_by_key(|e| pos(&server_ids, e).unwrap_or(usize::MAX));

    let mut left = server_only.into_iter().peekable();
    let mut right = named.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => matches!(
                (pos(&server_ids, l), pos(&server_ids, r)),
                (Some(a), Some(b)) if a < b
            ),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_left { left.next() } else { right.next() };
        list.extend(next);
    }
}

// ---------------------------------------------------------------------------------------------
// Field paths and ownership
// ---------------------------------------------------------------------------------------------

/// One step of a field path, modelled on SMD's PathElement.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum PathElem {
    /// A map key.
    Field(String),
    /// A keyed list element; `value` is the compact JSON text of the key's value.
    Key { name: String, value: String },
    /// A set-list member; compact JSON text of the value.
    Value(String),
}

type FieldPath = Vec<PathElem>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Managers are identified by name and operation, as in the real managedFields: an applier's
/// prune set must never include what the same name wrote through plain updates.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ManagerKey {
    manager: String,
    operation: Operation,
}

impl ManagerKey {
    fn new(manager: &str, operation: Operation) -> Self {
        Self {
            manager: manager.to_string(),
            operation,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Entry {
    paths: BTreeSet<FieldPath>,
    /// apiVersion of the object when last written; conflict messages name it for updaters.
    api_version: String,
}

/// Field ownership for server-side apply, kept per object by the server.
///
/// Tracked paths are leaves (scalars, atomic lists, empty maps/lists), keyed list elements
/// themselves, and set-list members. String form (SMD's `fieldpath.Path.String()`):
/// `.spec.replicas`, `.status.conditions[type="Ready"].status`, `.spec.ports[containerPort=80]`,
/// `.metadata.finalizers[="example.com/f"]`. [`Ownership::owns`] also accepts key values
/// without quotes (`[name=a]`, `[=example.com/f]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ownership {
    entries: BTreeMap<ManagerKey, Entry>,
}

impl Ownership {
    /// Managers that own anything, sorted.
    pub fn managers(&self) -> Vec<String> {
        let names: BTreeSet<&str> = self
            .entries
            .iter()
            .filter(|(_, e)| !e.paths.is_empty())
            .map(|(k, _)| k.manager.as_str())
            .collect();
        names.into_iter().map(str::to_string).collect()
    }

    /// True if `manager` (through apply or update) owns exactly the tracked path `path`, written
    /// in the form documented on [`Ownership`].
    pub fn owns(&self, manager: &str, path: &str) -> bool {
        self.entries
            .iter()
            .filter(|(k, _)| k.manager == manager)
            .flat_map(|(_, e)| e.paths.iter())
            .any(|p| render_path(p, true) == path || render_path(p, false) == path)
    }

    /// `metadata.managedFields` as the apiserver renders it (FieldsV1), one entry per manager
    /// and operation, all stamped with `time`.
    pub fn managed_fields(&self, time: &str) -> Value {
        let entries = self
            .entries
            .iter()
            .filter(|(_, e)| !e.paths.is_empty())
            .map(|(k, e)| {
                let mut tree = Map::new();
                for p in &e.paths {
                    insert_fields_v1(&mut tree, p);
                }
                let mut out = Map::new();
                out.insert("manager".into(), Value::String(k.manager.clone()));
                out.insert(
                    "operation".into(),
                    Value::String(k.operation.as_str().into()),
                );
                out.insert("apiVersion".into(), Value::String(e.api_version.clone()));
                out.insert("time".into(), Value::String(time.into()));
                out.insert("fieldsType".into(), Value::String("FieldsV1".into()));
                out.insert("fieldsV1".into(), Value::Object(tree));
                Value::Object(out)
            })
            .collect();
        Value::Array(entries)
    }
}

fn key_text(json: &str, quoted: bool) -> String {
    if !quoted && let Ok(Value::String(s)) = serde_json::from_str::<Value>(json) {
        return s;
    }
    json.to_string()
}

fn render_path(path: &[PathElem], quoted: bool) -> String {
    let mut s = String::new();
    for e in path {
        match e {
            PathElem::Field(k) => {
                s.push('.');
                s.push_str(k);
            }
            PathElem::Key { name, value } => {
                s.push('[');
                s.push_str(name);
                s.push('=');
                s.push_str(&key_text(value, quoted));
                s.push(']');
            }
            PathElem::Value(v) => {
                s.push_str("[=");
                s.push_str(&key_text(v, quoted));
                s.push(']');
            }
        }
    }
    s
}

fn insert_fields_v1(tree: &mut Map<String, Value>, path: &[PathElem]) {
    let mut cur = tree;
    for (i, e) in path.iter().enumerate() {
        let key = match e {
            PathElem::Field(k) => format!("f:{k}"),
            PathElem::Key { name, value } => {
                let v = serde_json::from_str::<Value>(value)
                    .unwrap_or_else(|_| Value::String(value.clone()));
                let mut m = Map::new();
                m.insert(name.clone(), v);
                format!("k:{}", Value::Object(m))
            }
            PathElem::Value(v) => format!("v:{v}"),
        };
        let slot = cur.entry(key).or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        let Value::Object(m) = slot else {
            return;
        };
        // SMD marks an owned list element itself with ".".
        if i + 1 == path.len() && matches!(e, PathElem::Key { .. }) {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        cur = m;
    }
}

/// Metadata the server manages; never owned, never pruned (stripMeta in the apiserver).
const UNTRACKED_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "clusterName",
];

/// Server-set metadata an apply must not overwrite on an existing object.
const SERVER_META: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
];

fn untracked(path: &[PathElem]) -> bool {
    match path {
        [PathElem::Field(k)] => k == "apiVersion" || k == "kind",
        [PathElem::Field(m), PathElem::Field(k)] => {
            m == "metadata" && UNTRACKED_META.contains(&k.as_str())
        }
        _ => false,
    }
}

/// Tracked paths of an object.
fn field_paths(obj: &Value) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    if let Value::Object(m) = obj {
        walk_map(m, &mut Vec::new(), &mut out);
    }
    out
}

fn insert_leaf(prefix: &FieldPath, out: &mut BTreeSet<FieldPath>) {
    // `.metadata` itself is stripped like its server-managed children.
    let is_metadata = matches!(prefix.as_slice(), [PathElem::Field(m)] if m == "metadata");
    if !is_metadata {
        out.insert(prefix.clone());
    }
}

fn walk_map(m: &Map<String, Value>, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
    for (k, v) in m {
        if v.is_null() || k.starts_with('$') {
            continue;
        }
        prefix.push(PathElem::Field(k.clone()));
        if !untracked(prefix) {
            walk_value(k, v, prefix, out);
        }
        prefix.pop();
    }
}

fn walk_value(field: &str, v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
    match v {
        Value::Object(m) if !m.is_empty() => walk_map(m, prefix, out),
        Value::Array(a) if !a.is_empty() => {
            let elems: Vec<&Value> = a.iter().collect();
            match list_kind(field, &elems) {
                ListKind::Keyed(key) => {
                    for e in a {
                        let (Some(kv), Value::Object(em)) = (e.get(key), e) else {
                            continue;
                        };
                        prefix.push(PathElem::Key {
                            name: key.to_string(),
                            value: kv.to_string(),
                        });
                        out.insert(prefix.clone());
                        walk_map(em, prefix, out);
                        prefix.pop();
                    }
                }
                ListKind::Set => {
                    for e in a {
                        prefix.push(PathElem::Value(e.to_string()));
                        out.insert(prefix.clone());
                        prefix.pop();
                    }
                }
                ListKind::Atomic => insert_leaf(prefix, out),
            }
        }
        _ => insert_leaf(prefix, out),
    }
}

/// Compares a value with the compact JSON text stored in a path element.
fn same_text(v: &Value, text: &str) -> bool {
    let rendered = v.to_string();
    rendered == text
}

fn child<'a>(v: &'a Value, e: &PathElem) -> Option<&'a Value> {
    match e {
        PathElem::Field(k) => v.as_object()?.get(k),
        PathElem::Key { name, value } => v
            .as_array()?
            .iter()
            .find(|el| el.get(name).is_some_and(|kv| same_text(kv, value))),
        PathElem::Value(t) => v.as_array()?.iter().find(|el| same_text(el, t)),
    }
}

fn get_at<'a>(v: &'a Value, path: &[PathElem]) -> Option<&'a Value> {
    path.iter().try_fold(v, child)
}

fn child_index(a: &[Value], e: &PathElem) -> Option<usize> {
    match e {
        PathElem::Field(_) => None,
        PathElem::Key { name, value } => a
            .iter()
            .position(|el| el.get(name).is_some_and(|kv| same_text(kv, value))),
        PathElem::Value(t) => a.iter().position(|el| same_text(el, t)),
    }
}

fn child_mut<'a>(v: &'a mut Value, e: &PathElem) -> Option<&'a mut Value> {
    match (v, e) {
        (Value::Object(m), PathElem::Field(k)) => m.get_mut(k),
        (Value::Array(a), _) => {
            let i = child_index(a, e)?;
            a.get_mut(i)
        }
        _ => None,
    }
}

fn remove_child(v: &mut Value, e: &PathElem) -> bool {
    match (v, e) {
        (Value::Object(m), PathElem::Field(k)) => m.remove(k).is_some(),
        (Value::Array(a), _) => match child_index(a, e) {
            Some(i) => {
                a.remove(i);
                true
            }
            None => false,
        },
        _ => false,
    }
}

/// Removes the value at `path`; maps and lists emptied by the removal go too, since Go's
/// omitempty would hide them from clients of the real server anyway.
fn remove_path(v: &mut Value, path: &[PathElem]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    if rest.is_empty() {
        return remove_child(v, first);
    }
    let Some(c) = child_mut(v, first) else {
        return false;
    };
    if !remove_path(c, rest) {
        return false;
    }
    let emptied = match c {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    if emptied {
        remove_child(v, first);
    }
    true
}

/// True if `set` holds `p` or anything beneath it (paths under `p` sort right after it).
fn owns_at_or_below(set: &BTreeSet<FieldPath>, p: &FieldPath) -> bool {
    set.range(p.clone()..)
        .next()
        .is_some_and(|q| q.starts_with(p))
}

/// Whether going from `before` to `after` changed what an owner of `p` owns.
fn changed_at(before: &Value, after: &Value, p: &FieldPath) -> bool {
    let b = get_at(before, p);
    let a = get_at(after, p);
    if b == a {
        return false;
    }
    match p.last() {
        // Maps and mergeable lists are containers: their owner is not displaced by new children.
        Some(PathElem::Field(name)) => match (b, a) {
            (Some(Value::Object(_)), Some(Value::Object(_))) => false,
            (Some(Value::Array(x)), Some(Value::Array(y))) => {
                let all: Vec<&Value> = x.iter().chain(y).collect();
                list_kind(name, &all) == ListKind::Atomic
            }
            _ => true,
        },
        // Element identity is the key: only its disappearance affects the element's owner.
        _ => a.is_none(),
    }
}

fn api_version(obj: &Value) -> String {
    obj.get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Server-side apply
// ---------------------------------------------------------------------------------------------

fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k.clone(), strip_nulls(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

/// SMD's ordered list merge (typed/merge.go visitListItems): live-only items keep their place,
/// shared items follow the config's order, config-only items land where the config puts them.
fn interleave(
    lhs: &[Value],
    rhs: &[Value],
    id: impl Fn(&Value) -> Value,
    merge: impl Fn(Option<&Value>, Option<&Value>) -> Value,
) -> Vec<Value> {
    let lids: Vec<Value> = lhs.iter().map(&id).collect();
    let rids: Vec<Value> = rhs.iter().map(&id).collect();
    let find = |ids: &[Value], items: &'_ [Value], pe: &Value| -> Option<usize> {
        ids.iter()
            .position(|x| x == pe)
            .filter(|i| *i < items.len())
    };
    let l_of = |pe: &Value| find(&lids, lhs, pe).and_then(|i| lhs.get(i));
    let r_of = |pe: &Value| find(&rids, rhs, pe).and_then(|i| rhs.get(i));

    let mut shared: VecDeque<&Value> = rids.iter().filter(|r| lids.contains(r)).collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: Vec<&Value> = Vec::new();
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    let (mut li, mut ri) = (0, 0);

    while li < lids.len() || ri < rids.len() {
        if let (Some(lp), Some(rp)) = (lids.get(li), rids.get(ri)) {
            if lp == rp {
                merged_rhs.push(rp);
                out.push(merge(l_of(lp), r_of(rp)));
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if rids.contains(lp) && next_shared.is_some_and(|n| n != lp) {
                li += 1;
                continue;
            }
        }
        if let Some(lp) = lids.get(li) {
            if !rids.contains(lp) {
                out.push(merge(lhs.get(li), None));
                li += 1;
                continue;
            }
            if merged_rhs.contains(&lp) {
                li += 1;
                continue;
            }
        }
        if let Some(rp) = rids.get(ri) {
            merged_rhs.push(rp);
            out.push(merge(l_of(rp), r_of(rp)));
            ri += 1;
            if next_shared == Some(rp) {
                next_shared = shared.pop_front();
            }
            continue;
        }
        // Unreachable by construction (an exhausted config has merged every shared id); kept
        // so the loop provably advances.
        li += 1;
    }
    out
}

fn merge_apply(live: &Value, config: &Value, field: &str) -> Value {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) => {
            let mut out = l.clone();
            for (k, cv) in c {
                if cv.is_null() {
                    out.remove(k);
                    continue;
                }
                let merged = match l.get(k) {
                    Some(lv) => merge_apply(lv, cv, k),
                    None => strip_nulls(cv),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(c)) => {
            let all: Vec<&Value> = l.iter().chain(c).collect();
            match list_kind(field, &all) {
                ListKind::Keyed(key) => Value::Array(interleave(
                    l,
                    c,
                    |e| e.get(key).cloned().unwrap_or(Value::Null),
                    |lv, cv| match (lv, cv) {
                        (Some(lv), Some(cv)) => merge_apply(lv, cv, field),
                        (Some(lv), None) => lv.clone(),
                        (None, Some(cv)) => strip_nulls(cv),
                        (None, None) => Value::Null,
                    },
                )),
                ListKind::Set => Value::Array(interleave(l, c, Value::clone, |lv, cv| {
                    cv.or(lv).cloned().unwrap_or(Value::Null)
                })),
                ListKind::Atomic => strip_nulls(config),
            }
        }
        _ => strip_nulls(config),
    }
}

fn print_manager(k: &ManagerKey, e: Option<&Entry>) -> String {
    match (k.operation, e) {
        (Operation::Update, Some(e)) if !e.api_version.is_empty() => {
            format!("{:?} using {}", k.manager, e.api_version)
        }
        _ => format!("{:?}", k.manager),
    }
}

/// apiserver's getConflictMessage (managedfields/internal/conflict.go).
fn conflict_message(conflicts: &[(ManagerKey, FieldPath)], owners: &Ownership) -> String {
    if let [(k, p)] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            print_manager(k, owners.entries.get(k)),
            render_path(p, true)
        );
    }
    let mut by_manager: BTreeMap<&ManagerKey, Vec<&FieldPath>> = BTreeMap::new();
    for (k, p) in conflicts {
        by_manager.entry(k).or_default().push(p);
    }
    let mut lines = Vec::new();
    for (k, paths) in by_manager {
        lines.push(format!(
            "conflicts with {}:",
            print_manager(k, owners.entries.get(k))
        ));
        lines.extend(paths.iter().map(|p| format!("- {}", render_path(p, true))));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Server-side apply of `config` by `manager` onto `live` (None = create; ownership is reset).
///
/// On an existing object, server-managed metadata (uid, resourceVersion, generation,
/// creationTimestamp, managedFields, selfLink) keeps its live value whatever the config says.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    owners: &mut Ownership,
) -> Result<Value, PatchError> {
    if !config.is_object() {
        return Err(PatchError::Invalid(format!(
            "apply configuration must be an object, got {}",
            type_name(config)
        )));
    }
    let empty = Value::Object(Map::new());
    let live = match live {
        Some(v @ Value::Object(_)) => v,
        Some(_) => &empty,
        None => {
            // A new object starts with no history.
            *owners = Ownership::default();
            &empty
        }
    };
    let me = ManagerKey::new(manager, Operation::Apply);
    let config_set = field_paths(config);
    let mut merged = merge_apply(live, config, "");

    if let (Some(Value::Object(lm)), Some(Value::Object(mm))) =
        (live.get("metadata"), merged.get_mut("metadata"))
    {
        for k in SERVER_META {
            if let Some(v) = lm.get(*k) {
                mm.insert((*k).to_string(), v.clone());
            }
        }
    }

    let mut conflicts: Vec<(ManagerKey, FieldPath)> = Vec::new();
    for (k, e) in &owners.entries {
        if *k == me {
            continue;
        }
        for p in &e.paths {
            if changed_at(live, &merged, p) {
                conflicts.push((k.clone(), p.clone()));
            }
        }
    }
    if !conflicts.is_empty() {
        if !force {
            return Err(PatchError::Conflict(conflict_message(&conflicts, owners)));
        }
        for (k, p) in &conflicts {
            if let Some(e) = owners.entries.get_mut(k) {
                e.paths.remove(p);
            }
        }
    }

    // Prune what this applier applied last time and dropped now, unless someone still owns it
    // (or something beneath it).
    let previous = owners.entries.remove(&me).unwrap_or_default().paths;
    let mut still_owned = config_set.clone();
    for e in owners.entries.values() {
        still_owned.extend(e.paths.iter().cloned());
    }
    for p in previous.difference(&config_set) {
        let is_element_key = matches!(
            p.as_slice(),
            [.., PathElem::Key { name, .. }, PathElem::Field(f)] if name == f
        );
        // A surviving element keeps its key field, or it would lose its identity.
        if untracked(p) || is_element_key || owns_at_or_below(&still_owned, p) {
            continue;
        }
        remove_path(&mut merged, p);
    }

    if !config_set.is_empty() {
        owners.entries.insert(
            me,
            Entry {
                paths: config_set,
                api_version: api_version(config),
            },
        );
    }
    owners.entries.retain(|_, e| !e.paths.is_empty());
    Ok(merged)
}

/// A non-apply write (create/update/patch) by `manager` changed `old` into `new`: changed or
/// added leaves move to `manager` (operation Update); vanished ones leave every set. A create
/// (`old == None`) resets ownership first.
pub fn record_update(old: Option<&Value>, new: &Value, manager: &str, owners: &mut Ownership) {
    let empty = Value::Object(Map::new());
    let old = match old {
        Some(v) => v,
        None => {
            *owners = Ownership::default();
            &empty
        }
    };
    let old_set = field_paths(old);
    let new_set = field_paths(new);
    let changed: BTreeSet<FieldPath> = new_set
        .into_iter()
        .filter(|p| {
            !old_set.contains(p)
                || (matches!(p.last(), Some(PathElem::Field(_)))
                    && get_at(old, p) != get_at(new, p))
        })
        .collect();

    let me = ManagerKey::new(manager, Operation::Update);
    for (k, e) in owners.entries.iter_mut() {
        // Nobody owns what no longer exists.
        e.paths.retain(|p| get_at(new, p).is_some());
        if *k != me {
            e.paths.retain(|p| !changed.contains(p));
        }
    }
    if !changed.is_empty() {
        let e = owners.entries.entry(me).or_default();
        e.paths.extend(changed);
        e.api_version = api_version(new);
    }
    owners.entries.retain(|_, e| !e.paths.is_empty());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(target: Value, patch: Value) -> Value {
        match strategic_merge(&target, &patch) {
            Ok(v) => v,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    fn ok(r: Result<Value, PatchError>) -> Value {
        match r {
            Ok(v) => v,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    // ---- strategic merge ----

    #[test]
    fn smp_conditions_update_add_delete() {
        let pod = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
            {"type": "Initialized", "status": "True"},
        ]}});
        let patch = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": null},
            {"type": "ContainersReady", "status": "True"},
            {"type": "Initialized", "$patch": "delete"},
        ]}});
        assert_eq!(
            smp(pod, patch),
            json!({"status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
            ]}})
        );
    }

    #[test]
    fn smp_set_element_order_reorders_and_is_stripped() {
        let pod = json!({"status": {"conditions": [
            {"type": "A", "status": "False"},
            {"type": "B", "status": "True"},
            {"type": "C", "status": "True"},
        ]}});
        // kubectl names every element it knows; B is server-only and keeps its slot.
        let patch = json!({"status": {
            "$setElementOrder/conditions": [{"type": "C"}, {"type": "A"}],
            "conditions": [{"type": "A", "status": "True"}],
        }});
        assert_eq!(
            smp(pod, patch),
            json!({"status": {"conditions": [
                {"type": "B", "status": "True"},
                {"type": "C", "status": "True"},
                {"type": "A", "status": "True"},
            ]}})
        );
    }

    #[test]
    fn smp_set_element_order_without_list_only_reorders() {
        let obj = json!({"metadata": {"finalizers": ["a", "b"]}});
        let patch = json!({"metadata": {"$setElementOrder/finalizers": ["b", "a"]}});
        assert_eq!(
            smp(obj, patch),
            json!({"metadata": {"finalizers": ["b", "a"]}})
        );
    }

    #[test]
    fn smp_owner_references_by_uid() {
        let obj = json!({"metadata": {"name": "x", "ownerReferences": [
            {"uid": "u1", "name": "a", "kind": "ReplicaSet", "controller": true},
        ]}});
        let patch = json!({"metadata": {"ownerReferences": [
            {"uid": "u1", "name": "a2"},
            {"uid": "u2", "name": "b", "kind": "Job"},
        ]}});
        assert_eq!(
            smp(obj, patch),
            json!({"metadata": {"name": "x", "ownerReferences": [
                {"uid": "u1", "name": "a2", "kind": "ReplicaSet", "controller": true},
                {"uid": "u2", "name": "b", "kind": "Job"},
            ]}})
        );
    }

    #[test]
    fn smp_containers_by_name_with_nested_env() {
        let pod = json!({"spec": {"containers": [
            {"name": "app", "image": "app:v1", "env": [
                {"name": "A", "value": "1"},
                {"name": "B", "value": "2"},
            ]},
            {"name": "sidecar", "image": "side:v1"},
        ]}});
        let patch = json!({"spec": {"containers": [
            {"name": "app", "image": "app:v2", "env": [
                {"name": "B", "value": "3"},
                {"name": "C", "value": "4"},
            ]},
        ]}});
        assert_eq!(
            smp(pod, patch),
            json!({"spec": {"containers": [
                {"name": "app", "image": "app:v2", "env": [
                    {"name": "A", "value": "1"},
                    {"name": "B", "value": "3"},
                    {"name": "C", "value": "4"},
                ]},
                {"name": "sidecar", "image": "side:v1"},
            ]}})
        );
    }

    #[test]
    fn smp_finalizers_union_and_delete_from_primitive_list() {
        let obj = json!({"metadata": {"finalizers": ["a", "b"]}});
        let patch = json!({"metadata": {
            "finalizers": ["c", "a"],
            "$deleteFromPrimitiveList/finalizers": ["b"],
        }});
        assert_eq!(
            smp(obj.clone(), patch),
            json!({"metadata": {"finalizers": ["a", "c"]}})
        );
        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "b"]}});
        assert_eq!(smp(obj, patch), json!({"metadata": {}}));
    }

    #[test]
    fn smp_null_deletes_annotation() {
        let obj = json!({"metadata": {"annotations": {"a": "1", "b": "2"}}});
        let patch = json!({"metadata": {"annotations": {"a": null, "c": "3"}}});
        assert_eq!(
            smp(obj, patch),
            json!({"metadata": {"annotations": {"b": "2", "c": "3"}}})
        );
    }

    #[test]
    fn smp_patch_replace_list() {
        let pod = json!({"spec": {"volumes": [{"name": "v1"}, {"name": "v2"}]}});
        let patch = json!({"spec": {"volumes": [{"$patch": "replace"}, {"name": "v3"}]}});
        assert_eq!(
            smp(pod, patch),
            json!({"spec": {"volumes": [{"name": "v3"}]}})
        );
    }

    #[test]
    fn smp_map_replace_and_delete_directives() {
        let obj = json!({"metadata": {"labels": {"a": "1", "b": "2"}},
                         "spec": {"strategy": {"type": "Recreate"}, "replicas": 1}});
        let patch = json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}},
                           "spec": {"strategy": {"$patch": "delete"}}});
        assert_eq!(
            smp(obj, patch),
            json!({"metadata": {"labels": {"c": "3"}}, "spec": {"replicas": 1}})
        );
    }

    #[test]
    fn smp_retain_keys() {
        let obj = json!({"spec": {"strategy": {"type": "RollingUpdate",
                                               "rollingUpdate": {"maxSurge": 1}}}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        assert_eq!(
            smp(obj, patch),
            json!({"spec": {"strategy": {"type": "Recreate"}}})
        );
    }

    #[test]
    fn smp_atomic_lists_and_scalars_replace() {
        let pod = json!({"spec": {"tolerations": [{"key": "a"}], "nodeName": "n1",
                                  "containers": [{"name": "c", "args": ["x", "y"]}]}});
        let patch = json!({"spec": {"tolerations": [{"key": "b"}], "nodeName": "n2",
                                    "containers": [{"name": "c", "args": ["z"]}]}});
        assert_eq!(
            smp(pod, patch),
            json!({"spec": {"tolerations": [{"key": "b"}], "nodeName": "n2",
                            "containers": [{"name": "c", "args": ["z"]}]}})
        );
    }

    #[test]
    fn smp_service_ports_fall_back_to_port_key() {
        let svc = json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443}]}});
        let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
        assert_eq!(
            smp(svc, patch),
            json!({"spec": {"ports": [{"port": 80, "name": "http", "targetPort": 8080},
                                      {"port": 443}]}})
        );
    }

    #[test]
    fn smp_new_field_with_directives_is_cleaned() {
        let obj = json!({"metadata": {"name": "x"}});
        let patch = json!({"status": {"conditions": [
            {"type": "Gone", "$patch": "delete"},
            {"type": "Ready", "status": "True", "message": null},
        ], "$setElementOrder/conditions": [{"type": "Ready"}]}});
        assert_eq!(
            smp(obj, patch),
            json!({"metadata": {"name": "x"},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        );
    }

    #[test]
    fn smp_invalid_patches() {
        let obj = json!({"metadata": {"name": "x"}});
        assert_eq!(
            strategic_merge(&obj, &json!([1, 2])),
            Err(PatchError::Invalid(
                "json: cannot unmarshal array into Go value of type map[string]interface {}".into()
            ))
        );
        assert!(matches!(
            strategic_merge(&obj, &json!({"metadata": {"$patch": "merge"}})),
            Err(PatchError::Invalid(_))
        ));
        assert_eq!(
            strategic_merge(&obj, &json!({"spec": {"containers": [{"image": "x"}]}})),
            Err(PatchError::Invalid(
                "map: {\"image\":\"x\"} does not contain declared merge key: name".into()
            ))
        );
        assert!(matches!(
            strategic_merge(&obj, &json!({"metadata": {"$retainKeys": "name"}})),
            Err(PatchError::Invalid(_))
        ));
        assert!(matches!(
            strategic_merge(
                &obj,
                &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}})
            ),
            Err(PatchError::Invalid(_))
        ));
    }

    // ---- server-side apply ----

    fn claims(names: &[&str]) -> Value {
        let list: Vec<Value> = names
            .iter()
            .map(|n| json!({"name": n, "resourceClaimName": format!("claim-{n}")}))
            .collect();
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "status": {"resourceClaimStatuses": list}})
    }

    #[test]
    fn apply_create_from_none() {
        let mut own = Ownership::default();
        let cfg = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                         "metadata": {"name": "d", "namespace": "ns", "labels": {"app": "x"}},
                         "spec": {"replicas": 2}});
        let out = ok(apply(None, &cfg, "mgr", false, &mut own));
        assert_eq!(out, cfg);
        assert_eq!(own.managers(), vec!["mgr".to_string()]);
        assert!(own.owns("mgr", ".spec.replicas"));
        assert!(own.owns("mgr", ".metadata.labels.app"));
        assert!(!own.owns("mgr", ".metadata.name"));
        assert!(!own.owns("mgr", ".apiVersion"));
    }

    #[test]
    fn apply_dropping_keyed_element_removes_it() {
        let mut own = Ownership::default();
        let live = ok(apply(None, &claims(&["a", "b"]), "drc", false, &mut own));
        assert!(own.owns(
            "drc",
            ".status.resourceClaimStatuses[name=\"a\"].resourceClaimName"
        ));
        assert!(own.owns(
            "drc",
            ".status.resourceClaimStatuses[name=a].resourceClaimName"
        ));
        assert!(own.owns("drc", ".status.resourceClaimStatuses[name=a]"));
        let out = ok(apply(Some(&live), &claims(&["b"]), "drc", false, &mut own));
        assert_eq!(out, claims(&["b"]));
        assert!(!own.owns("drc", ".status.resourceClaimStatuses[name=a]"));
        assert!(own.owns("drc", ".status.resourceClaimStatuses[name=b]"));
    }

    #[test]
    fn apply_other_managers_element_survives() {
        let mut own = Ownership::default();
        let live = ok(apply(None, &claims(&["a", "b"]), "one", false, &mut own));
        let live = ok(apply(Some(&live), &claims(&["c"]), "two", false, &mut own));
        assert_eq!(live, claims(&["a", "b", "c"]));
        let out = ok(apply(Some(&live), &claims(&["b"]), "one", false, &mut own));
        assert_eq!(out, claims(&["b", "c"]));
        assert_eq!(own.managers(), vec!["one".to_string(), "two".to_string()]);
        // Dropping the last own element leaves the other manager's one.
        let out = ok(apply(
            Some(&out),
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
            "one",
            false,
            &mut own,
        ));
        assert_eq!(out, claims(&["c"]));
        assert_eq!(own.managers(), vec!["two".to_string()]);
    }

    fn deploy(spec: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "d", "namespace": "ns"}, "spec": spec})
    }

    #[test]
    fn apply_conflict_and_force() {
        let mut own = Ownership::default();
        let live = ok(apply(
            None,
            &deploy(json!({"replicas": 1, "paused": false})),
            "a",
            false,
            &mut own,
        ));
        let before = own.clone();
        let err = apply(
            Some(&live),
            &deploy(json!({"replicas": 2})),
            "b",
            false,
            &mut own,
        );
        assert_eq!(
            err,
            Err(PatchError::Conflict(
                "Apply failed with 1 conflict: conflict with \"a\": .spec.replicas".into()
            ))
        );
        assert_eq!(own, before);

        let out = ok(apply(
            Some(&live),
            &deploy(json!({"replicas": 2})),
            "b",
            true,
            &mut own,
        ));
        assert_eq!(out, deploy(json!({"replicas": 2, "paused": false})));
        assert!(own.owns("b", ".spec.replicas"));
        assert!(!own.owns("a", ".spec.replicas"));
        assert!(own.owns("a", ".spec.paused"));
    }

    #[test]
    fn apply_multiple_conflicts_message() {
        let mut own = Ownership::default();
        let live = ok(apply(
            None,
            &deploy(json!({"replicas": 1, "paused": false})),
            "a",
            false,
            &mut own,
        ));
        let err = apply(
            Some(&live),
            &deploy(json!({"replicas": 2, "paused": true})),
            "b",
            false,
            &mut own,
        );
        assert_eq!(
            err,
            Err(PatchError::Conflict(
                "Apply failed with 2 conflicts: conflicts with \"a\":\n- .spec.paused\n- .spec.replicas"
                    .into()
            ))
        );
    }

    #[test]
    fn apply_same_value_is_shared() {
        let mut own = Ownership::default();
        let live = ok(apply(
            None,
            &deploy(json!({"replicas": 1, "paused": false})),
            "a",
            false,
            &mut own,
        ));
        let live = ok(apply(
            Some(&live),
            &deploy(json!({"replicas": 1})),
            "b",
            false,
            &mut own,
        ));
        assert!(own.owns("a", ".spec.replicas"));
        assert!(own.owns("b", ".spec.replicas"));
        // a drops both: replicas survives (b owns it), paused goes.
        let bare = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                          "metadata": {"name": "d", "namespace": "ns"}});
        let out = ok(apply(Some(&live), &bare, "a", false, &mut own));
        assert_eq!(out, deploy(json!({"replicas": 1})));
        assert_eq!(own.managers(), vec!["b".to_string()]);
    }

    #[test]
    fn record_update_takes_ownership_from_applier() {
        let mut own = Ownership::default();
        let live = ok(apply(
            None,
            &deploy(json!({"replicas": 1, "paused": true})),
            "applier",
            false,
            &mut own,
        ));
        // A controller scales through a plain update.
        let scaled = deploy(json!({"replicas": 3, "paused": true}));
        record_update(Some(&live), &scaled, "kube-controller-manager", &mut own);
        assert!(own.owns("kube-controller-manager", ".spec.replicas"));
        assert!(!own.owns("applier", ".spec.replicas"));
        assert!(!own.owns("kube-controller-manager", ".spec.paused"));

        // The applier no longer owns replicas, so omitting it leaves the controller's value.
        let out = ok(apply(
            Some(&scaled),
            &deploy(json!({"paused": true})),
            "applier",
            false,
            &mut own,
        ));
        assert_eq!(out, scaled);

        // Setting it again conflicts with the updater, named with its apiVersion.
        assert_eq!(
            apply(
                Some(&out),
                &deploy(json!({"paused": true, "replicas": 5})),
                "applier",
                false,
                &mut own,
            ),
            Err(PatchError::Conflict(
                "Apply failed with 1 conflict: conflict with \"kube-controller-manager\" using apps/v1: .spec.replicas"
                    .into()
            ))
        );
    }

    #[test]
    fn record_update_ownership_never_pruned_by_other_applier() {
        let mut own = Ownership::default();
        let created = deploy(json!({"replicas": 1}));
        record_update(None, &created, "kubectl-create", &mut own);
        assert!(own.owns("kubectl-create", ".spec.replicas"));
        let out = ok(apply(
            Some(&created),
            &deploy(json!({"paused": true})),
            "applier",
            false,
            &mut own,
        ));
        let out = ok(apply(
            Some(&out),
            &deploy(json!({})),
            "applier",
            false,
            &mut own,
        ));
        assert_eq!(out, deploy(json!({"replicas": 1})));
        // An empty map in an apply config is owned as a leaf, as in SMD.
        assert!(own.owns("applier", ".spec"));
        // Removal by update drops ownership everywhere.
        let bare = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                          "metadata": {"name": "d", "namespace": "ns"}});
        record_update(Some(&out), &bare, "editor", &mut own);
        assert_eq!(own.managers(), Vec::<String>::new());
    }

    #[test]
    fn apply_keeps_element_when_updater_owns_a_field_in_it() {
        let mut own = Ownership::default();
        let live = ok(apply(None, &claims(&["a"]), "drc", false, &mut own));
        let mut updated = live.clone();
        if let Some(Value::Object(e)) = updated.pointer_mut("/status/resourceClaimStatuses/0") {
            e.insert("extra".into(), json!("x"));
        }
        record_update(Some(&live), &updated, "kubelet", &mut own);
        let out = ok(apply(Some(&updated), &claims(&[]), "drc", false, &mut own));
        assert_eq!(
            out,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "status": {"resourceClaimStatuses": [{"name": "a", "extra": "x"}]}})
        );
    }

    #[test]
    fn apply_maps_merge_and_prune_per_key() {
        let mut own = Ownership::default();
        let cfg = |labels: Value| json!({"metadata": {"name": "x", "labels": labels}});
        let live = ok(apply(None, &cfg(json!({"a": "1"})), "m1", false, &mut own));
        let live = ok(apply(
            Some(&live),
            &cfg(json!({"b": "2"})),
            "m2",
            false,
            &mut own,
        ));
        assert_eq!(live, cfg(json!({"a": "1", "b": "2"})));
        let live = ok(apply(
            Some(&live),
            &json!({"metadata": {"name": "x"}}),
            "m1",
            false,
            &mut own,
        ));
        assert_eq!(live, cfg(json!({"b": "2"})));
        // The last label going takes the emptied map with it.
        let live = ok(apply(
            Some(&live),
            &json!({"metadata": {"name": "x"}}),
            "m2",
            false,
            &mut own,
        ));
        assert_eq!(live, json!({"metadata": {"name": "x"}}));
    }

    #[test]
    fn apply_finalizers_as_set() {
        let mut own = Ownership::default();
        let cfg = |f: Value| json!({"metadata": {"name": "x", "finalizers": f}});
        let live = ok(apply(None, &cfg(json!(["a/x"])), "m1", false, &mut own));
        let live = ok(apply(
            Some(&live),
            &cfg(json!(["b/y", "a/x"])),
            "m2",
            false,
            &mut own,
        ));
        assert_eq!(live, cfg(json!(["b/y", "a/x"])));
        assert!(own.owns("m1", ".metadata.finalizers[=\"a/x\"]"));
        assert!(own.owns("m2", ".metadata.finalizers[=a/x]"));
        // m2 drops a/x but m1 still owns it; m2's b/y stays.
        let live = ok(apply(
            Some(&live),
            &cfg(json!(["b/y"])),
            "m2",
            false,
            &mut own,
        ));
        assert_eq!(live, cfg(json!(["b/y", "a/x"])));
        let live = ok(apply(
            Some(&live),
            &json!({"metadata": {"name": "x"}}),
            "m1",
            false,
            &mut own,
        ));
        assert_eq!(live, cfg(json!(["b/y"])));
    }

    #[test]
    fn apply_keeps_server_metadata_and_atomic_lists_replace() {
        let mut own = Ownership::default();
        let live = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "uid": "u-1", "resourceVersion": "7"},
            "spec": {"tolerations": [{"key": "a"}], "containers": [{"name": "c", "image": "i"}]}});
        record_update(None, &live, "creator", &mut own);
        let cfg = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "resourceVersion": "3"},
            "spec": {"containers": [{"name": "c", "image": "i", "args": ["x"]}]}});
        let out = ok(apply(Some(&live), &cfg, "m", false, &mut own));
        assert_eq!(
            out,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "uid": "u-1", "resourceVersion": "7"},
                "spec": {"tolerations": [{"key": "a"}],
                         "containers": [{"name": "c", "image": "i", "args": ["x"]}]}})
        );
        // Replacing an atomic list another manager owns with a different value conflicts.
        let cfg2 = json!({"spec": {"tolerations": [{"key": "b"}]}});
        assert_eq!(
            apply(Some(&out), &cfg2, "m", false, &mut own),
            Err(PatchError::Conflict(
                "Apply failed with 1 conflict: conflict with \"creator\" using v1: .spec.tolerations"
                    .into()
            ))
        );
    }

    #[test]
    fn apply_keyed_list_order_follows_smd() {
        let mut own = Ownership::default();
        let env = |names: &[&str]| {
            let l: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
            json!({"spec": {"env": l}})
        };
        let live = ok(apply(None, &env(&["a", "x"]), "other", false, &mut own));
        // New element placed before a shared one in the config lands before it.
        let out = ok(apply(Some(&live), &env(&["b", "a"]), "m", false, &mut own));
        assert_eq!(out, env(&["b", "a", "x"]));
    }

    #[test]
    fn apply_invalid_config() {
        let mut own = Ownership::default();
        assert!(matches!(
            apply(None, &json!(["x"]), "m", false, &mut own),
            Err(PatchError::Invalid(_))
        ));
    }

    #[test]
    fn managed_fields_render() {
        let mut own = Ownership::default();
        let cfg = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
            "finalizers": ["f"]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        ok(apply(None, &cfg, "m", false, &mut own));
        assert_eq!(
            own.managed_fields("2024-01-01T00:00:00Z"),
            json!([{"manager": "m", "operation": "Apply", "apiVersion": "v1",
                "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:finalizers": {"v:\"f\"": {}}},
                    "f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {
                        ".": {}, "f:type": {}, "f:status": {}}}}}}])
        );
    }
}
