//! In-memory object storage with the API server's consistency rules: one global
//! resourceVersion, an event log for watch resumption, optimistic concurrency, finalizers,
//! status subresources, and the indexes the owner-reference garbage collector needs.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kcm_values::selector::Selector;
use rand::Rng;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::claims;
use crate::deletion::{self, Deletion};
use crate::error::ApiError;
use crate::events::{self, CORE_EVENTS, View};
use crate::patch::{self, Ownership, PatchError};
use crate::podgroups;
use crate::quota_admission;
use crate::resources::{PODS, ResourceType, ScaleSelector, builtin_types};
use crate::selector::{FieldSelector, JsonLabels, field_value, selector_object};
use crate::storageversions;

/// Namespace ("" for cluster-scoped objects) and name.
pub type ObjKey = (String, String);

const GENERATE_NAME_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const GENERATE_NAME_SUFFIX_LEN: usize = 5;
const MAX_NAME_LEN: usize = 253;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    Main,
    Status,
}

/// Query options of list and watch requests.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`, in `labels.Parse`'s syntax.
    pub label_selector: Option<String>,
    /// `fieldSelector`, in `fields.ParseSelector`'s syntax.
    pub field_selector: Option<String>,
    /// `limit`: at most this many items, the rest behind a continue token.
    pub limit: Option<usize>,
    /// `continue`: the token of the page before.
    pub continue_token: Option<String>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `sendInitialEvents`: a watch starts with the objects as ADDED events.
    pub send_initial_events: Option<bool>,
    /// `resourceVersion`: where a list is read or a watch starts.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`: how `resourceVersion` is read (`Exact`, `NotOlderThan`).
    pub resource_version_match: Option<String>,
}

/// Query options shared by writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// `fieldManager`, or one derived from the user agent as the real server does.
    pub field_manager: String,
    pub force: bool,
    /// The writer may not change a ResourceClaim's `status.allocation` or
    /// `status.reservedFor`: the request's verb and the authorizer's forbidden message.
    pub binding_forbidden: Option<(String, String)>,
    /// A fixture put in as it is ([`Store::seed`]): checks that hostile fixtures must get
    /// past (StorageVersion, claim and pod validation) and the ResourceQuota admission plugin,
    /// which every request through the API meets, are skipped.
    pub fixture: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    #[default]
    Background,
    Foreground,
    Orphan,
}

#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_resource_version: Option<String>,
    /// `dryRun: ["All"]`: checked, not written.
    pub dry_run: bool,
    /// `gracePeriodSeconds` (pods only).
    pub grace_period_seconds: Option<i64>,
    /// `propagationPolicy`.
    pub propagation: Propagation,
}

impl DeleteOptions {
    /// The options of a `metav1.DeleteOptions` body (a DELETE's, or an Eviction's
    /// `deleteOptions`); `param` gives the URL's query parameters, which fill what the body
    /// leaves out.
    pub(crate) fn parse<'a>(body: &Value, param: impl Fn(&str) -> Option<&'a str>) -> Self {
        let text = |key: &str| body[key].as_str().or_else(|| param(key));
        let propagation = match text("propagationPolicy") {
            Some("Orphan") => Propagation::Orphan,
            Some("Foreground") => Propagation::Foreground,
            _ if body["orphanDependents"] == json!(true) => Propagation::Orphan,
            _ => Propagation::Background,
        };
        let precondition = |key: &str| body["preconditions"][key].as_str().map(String::from);
        Self {
            dry_run: param("dryRun") == Some("All")
                || body["dryRun"]
                    .as_array()
                    .is_some_and(|d| d.iter().any(|v| v == "All")),
            propagation,
            precondition_uid: precondition("uid"),
            precondition_resource_version: precondition("resourceVersion"),
            grace_period_seconds: body["gracePeriodSeconds"]
                .as_i64()
                .or_else(|| param("gracePeriodSeconds").and_then(|g| g.parse().ok())),
        }
    }

    /// The 409 when `obj` fails the preconditions, worded as the generic registry's
    /// `BeforeDelete` words it (naming the object's kind), which every delete meets before
    /// storage; the eviction subresource checks the same way before it writes.
    pub(crate) fn check_preconditions(
        &self,
        (kind, group): (&str, &str),
        obj: &Value,
    ) -> Result<(), ApiError> {
        let name = meta_str(obj, "name").unwrap_or_default();
        let failed = |why: String| Err(ApiError::conflict_on((kind, group), name, &why));
        let uid = meta_str(obj, "uid").unwrap_or_default();
        if let Some(expected) = &self.precondition_uid
            && expected != uid
        {
            return failed(format!(
                "the UID in the precondition ({expected}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
            ));
        }
        let rv = meta_str(obj, "resourceVersion").unwrap_or_default();
        if let Some(expected) = &self.precondition_resource_version
            && expected != rv
        {
            return failed(format!(
                "the ResourceVersion in the precondition ({expected}) does not match the ResourceVersion in record ({rv}). The object might have been modified"
            ));
        }
        Ok(())
    }
}

/// How a PATCH body is interpreted, by its content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

/// One frame of a watch stream, already serialized. `deliver_at` delays delivery when a test
/// injects watch latency; `last` ends the stream after this frame.
#[derive(Debug)]
pub struct Frame {
    pub bytes: Bytes,
    pub deliver_at: Option<Instant>,
    pub last: bool,
}

struct Watcher {
    namespace: Option<String>,
    labels: Selector,
    fields: FieldSelector,
    bookmarks: bool,
    /// Injected delivery latency.
    delay: Option<Duration>,
    /// The API the watch was opened through: its objects are converted before matching.
    view: Option<View>,
    tx: mpsc::UnboundedSender<Frame>,
}

impl Watcher {
    fn send(&self, bytes: Bytes, last: bool) -> bool {
        let deliver_at = self.delay.map(|d| Instant::now() + d);
        self.tx
            .send(Frame {
                bytes,
                deliver_at,
                last,
            })
            .is_ok()
    }
}

/// An object as the API it is read through shows it.
fn shown(view: Option<View>, obj: &Value) -> Cow<'_, Value> {
    match view {
        Some(view) => Cow::Owned(view.show(obj)),
        None => Cow::Borrowed(obj),
    }
}

fn shown_arc(view: Option<View>, obj: Arc<Value>) -> Arc<Value> {
    match view {
        Some(view) => Arc::new(view.show(&obj)),
        None => obj,
    }
}

/// What a filtered watch sees of a change, as the watch cache translates it: an object
/// entering the filter is ADDED, one leaving it is DELETED. `None`: the watch sees nothing.
fn seen_as(event: EventType, now: bool, before: bool) -> Option<EventType> {
    match event {
        EventType::Added if now => Some(EventType::Added),
        EventType::Deleted if now || before => Some(EventType::Deleted),
        EventType::Modified if now && before => Some(EventType::Modified),
        EventType::Modified if now => Some(EventType::Added),
        EventType::Modified if before => Some(EventType::Deleted),
        _ => None,
    }
}

struct Stored {
    obj: Arc<Value>,
    ownership: Ownership,
}

struct Collection {
    rt: ResourceType,
    objects: BTreeMap<ObjKey, Stored>,
    watchers: Vec<Watcher>,
}

struct LogEntry {
    rv: u64,
    type_key: String,
    event: EventType,
    obj: Arc<Value>,
    prev: Option<Arc<Value>>,
}

/// Work for the background garbage collector.
#[derive(Debug)]
pub enum GcWork {
    /// The object with this uid is gone: its dependents may now be orphans.
    OwnerGone(String),
    /// This object was written with owner references: check they still exist.
    Check(String, ObjKey),
}

struct State {
    rv: u64,
    collections: BTreeMap<String, Collection>,
    log: VecDeque<LogEntry>,
    window: usize,
    /// Events at or below this resourceVersion are no longer in the log.
    compacted_rv: u64,
    uids: HashMap<String, (String, ObjKey)>,
    dependents: HashMap<String, BTreeSet<(String, ObjKey)>>,
    watch_delays: HashMap<String, Duration>,
    gc: Option<mpsc::UnboundedSender<GcWork>>,
    /// Types served as views of another type's collection, by `group/plural`.
    views: BTreeMap<String, ResourceType>,
}

/// The server's state. All access goes through one lock, which also orders watch events.
pub struct Store {
    state: Mutex<State>,
}

/// Whether a status update of this type takes the object's labels, annotations, finalizers and
/// owners from the request, as kube-apiserver v1.36.2 does for ResourceQuotas and
/// PodDisruptionBudgets (their status strategies reset the spec alone); other types keep the
/// stored metadata (checked for ResourceClaims and StorageVersions).
fn status_write_takes_metadata(rt: &ResourceType) -> bool {
    type_key_is(rt, "", "resourcequotas") || type_key_is(rt, "policy", "poddisruptionbudgets")
}

fn type_key_is(rt: &ResourceType, group: &str, plural: &str) -> bool {
    rt.group == group && rt.plural == plural
}

/// Whether a ResourceClaim write changes `status.allocation` or `status.reservedFor`, with
/// apimachinery's semantic equality (absent, null and empty compare equal).
fn binding_changed(old: &Value, new: &Value) -> bool {
    fn present(v: Option<&Value>) -> Option<&Value> {
        v.filter(|v| match v {
            Value::Null => false,
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            _ => true,
        })
    }
    ["allocation", "reservedFor"]
        .iter()
        .any(|field| present(old["status"].get(*field)) != present(new["status"].get(*field)))
}

fn now_rfc3339() -> String {
    rfc3339(jiff::Timestamp::now())
}

/// A time as `metav1.Time` writes it: whole seconds, UTC.
pub(crate) fn rfc3339(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Where an object of `rt` named `name` is stored: cluster-scoped objects have no namespace.
fn obj_key(rt: &ResourceType, ns: &str, name: &str) -> ObjKey {
    let ns = if rt.namespaced { ns } else { "" };
    (ns.to_string(), name.to_string())
}

fn meta(obj: &Value) -> &Value {
    &obj["metadata"]
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj["metadata"][field].as_str()
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    match obj["metadata"].as_object_mut() {
        Some(m) => m,
        None => unreachable!("metadata was just made an object"),
    }
}

fn finalizers_empty(obj: &Value) -> bool {
    meta(obj)["finalizers"]
        .as_array()
        .is_none_or(|f| f.is_empty())
}

/// Marks an object deleted at `at` with a grace period of `grace` seconds; the first mark
/// bumps its generation, as the registry does (controllers must see the deletion as a change).
fn mark_deleted(obj: &mut Value, first: bool, at: String, grace: i64) {
    let m = meta_mut(obj);
    if first && let Some(generation) = m.get("generation").and_then(Value::as_i64) {
        m.insert("generation".into(), json!(generation + 1));
    }
    m.insert("deletionTimestamp".into(), json!(at));
    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
}

/// The namespace registry's own precondition check, in its words.
fn namespace_preconditions(name: &str, ns: &Value, opts: &DeleteOptions) -> Result<(), ApiError> {
    let checks = [
        ("UID", "uid", &opts.precondition_uid),
        (
            "ResourceVersion",
            "resourceVersion",
            &opts.precondition_resource_version,
        ),
    ];
    for (label, field, expected) in checks {
        let actual = meta_str(ns, field).unwrap_or_default();
        if let Some(expected) = expected
            && expected != actual
        {
            return Err(ApiError::conflict_on(
                ("namespaces", ""),
                name,
                &format!(
                    "Precondition failed: {label} in precondition: {expected}, {label} in object meta: {actual}"
                ),
            ));
        }
    }
    Ok(())
}

fn owner_uids(obj: &Value) -> Vec<String> {
    meta(obj)["ownerReferences"]
        .as_array()
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r["uid"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads a dotted path such as `spec.replicas`.
pub fn get_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(obj, |v, seg| v.get(seg))
}

fn set_path(obj: &mut Value, path: &str, value: Value) {
    let mut cur = obj;
    let segs: Vec<&str> = path.split('.').collect();
    for seg in &segs[..segs.len() - 1] {
        if !cur[*seg].is_object() {
            cur[*seg] = json!({});
        }
        cur = &mut cur[*seg];
    }
    cur[segs[segs.len() - 1]] = value;
}

/// Everything but metadata and status: a change there bumps `metadata.generation`.
fn spec_part(obj: &Value) -> Value {
    match obj.as_object() {
        Some(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        None => Value::Null,
    }
}

/// A DNS-1123 subdomain, which the real server requires of most names.
/// RBAC objects only need a valid path segment (`system:controller:x` is fine), as upstream's
/// `ValidateRBACName`; everything else here is a DNS subdomain.
fn valid_name_for(rt: &ResourceType, name: &str) -> bool {
    if rt.group == "rbac.authorization.k8s.io" {
        return !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains('/')
            && !name.contains('%');
    }
    valid_name(name)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric())
}

fn generate_name(base: &str) -> String {
    let max_base = 63 - GENERATE_NAME_SUFFIX_LEN;
    let base = if base.len() > max_base {
        &base[..max_base]
    } else {
        base
    };
    let mut rng = rand::rng();
    let suffix: String = (0..GENERATE_NAME_SUFFIX_LEN)
        .map(|_| GENERATE_NAME_CHARS[rng.random_range(0..GENERATE_NAME_CHARS.len())] as char)
        .collect();
    format!("{base}{suffix}")
}

/// The status an object starts with when created through the main endpoint, as each type's
/// registry strategy resets it (nodes keep theirs).
fn initial_status(rt: &ResourceType, given: Option<&Value>) -> Option<Value> {
    if !rt.status {
        return given.cloned();
    }
    Some(match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "nodes") => given.cloned().unwrap_or_else(|| json!({})),
        ("", "pods") => json!({ "phase": "Pending" }),
        ("", "persistentvolumeclaims") => json!({ "phase": "Pending" }),
        ("", "namespaces") => json!({ "phase": "Active" }),
        ("", "services") => json!({ "loadBalancer": {} }),
        ("policy", "poddisruptionbudgets") => json!({
            "disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0
        }),
        ("", "replicationcontrollers") | ("apps", "replicasets") | ("apps", "statefulsets") => {
            json!({ "replicas": 0 })
        }
        _ => json!({}),
    })
}

/// Defaults the real server applies that controllers depend on: workload replicas default to 1.
fn apply_defaults(rt: &ResourceType, obj: &mut Value) {
    if rt.key() == CORE_EVENTS {
        *obj = events::normalize_core(obj);
    }
    let workload = matches!(
        (rt.group.as_str(), rt.plural.as_str()),
        ("", "replicationcontrollers") | ("apps", "deployments" | "replicasets" | "statefulsets")
    );
    if workload && obj["spec"].is_object() && obj["spec"]["replicas"].is_null() {
        obj["spec"]["replicas"] = json!(1);
    }
}

/// `LabelSelectorAsSelector(selector).String()`, as the scale subresource and the printed
/// columns show a workload's selector; "" for a missing or invalid one.
pub(crate) fn label_selector_string(selector: &Value) -> String {
    selector_object(selector)
        .map(|s| s.to_string())
        .unwrap_or_default()
}

/// `?labelSelector=` (`labels.Parse`); a bad one is a 400 with the parser's message.
fn parse_labels(query: Option<&str>) -> Result<Selector, ApiError> {
    kcm_values::selector::parse(query.unwrap_or_default())
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

fn map_selector_string(selector: &Value) -> String {
    let mut reqs: Vec<String> = selector
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    reqs.sort();
    reqs.join(",")
}

fn encode_continue(rv: u64, key: &ObjKey) -> String {
    let raw = json!([rv, key.0, key.1]).to_string();
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> Option<(u64, ObjKey)> {
    let bytes: Option<Vec<u8>> = (0..token.len())
        .step_by(2)
        .map(|i| {
            token
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect();
    let v: Value = serde_json::from_slice(&bytes?).ok()?;
    Some((
        v[0].as_u64()?,
        (v[1].as_str()?.to_string(), v[2].as_str()?.to_string()),
    ))
}

fn parse_rv(rv: &str) -> Result<u64, ApiError> {
    rv.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))
}

/// A validation failure of an event as the API server reports it.
fn invalid_error(rt: &ResourceType, name: &str, (field, detail): (String, String)) -> ApiError {
    ApiError::invalid(rt, name, &field, &detail)
}

fn patch_error(err: PatchError) -> ApiError {
    match err {
        PatchError::Invalid(msg) => ApiError::new(422, "Invalid", msg),
        PatchError::Conflict(msg) => ApiError::new(409, "Conflict", msg),
    }
}

/// One watch event, its `type` first as the API server writes it (a client can then decode
/// the object as it reads it, without buffering it until it knows the type), the object not
/// copied on the way.
fn frame(event: &str, obj: &Value) -> Bytes {
    Bytes::from(format!("{{\"type\":\"{event}\",\"object\":{obj}}}\n"))
}

impl State {
    fn collection(&self, rt: &ResourceType) -> Result<&Collection, ApiError> {
        self.collections.get(&rt.key()).ok_or_else(|| {
            ApiError::new(
                404,
                "NotFound",
                format!(
                    "the server could not find the requested resource ({})",
                    rt.qualified_name()
                ),
            )
        })
    }

    fn lookup(&self, rt: &ResourceType, key: &ObjKey) -> Result<Arc<Value>, ApiError> {
        self.collection(rt)?
            .objects
            .get(key)
            .map(|s| s.obj.clone())
            .ok_or_else(|| ApiError::not_found(rt, &key.1))
    }

    /// The type whose collection holds `rt`'s objects: `rt` itself unless it is a view.
    fn storage_type<'a>(&self, rt: &'a ResourceType) -> Result<Cow<'a, ResourceType>, ApiError> {
        match rt.view {
            Some(_) => Ok(Cow::Owned(self.collection(rt)?.rt.clone())),
            None => Ok(Cow::Borrowed(rt)),
        }
    }

    /// An object written through `rt`, in the form its stored type keeps.
    fn to_storage(&self, rt: &ResourceType, obj: Value) -> Result<Value, ApiError> {
        let Some(view) = rt.view else {
            return Ok(obj);
        };
        check_type(rt, &obj)?;
        Ok(view.store(&obj))
    }

    fn namespace_check(&self, rt: &ResourceType, ns: &str) -> Result<(), ApiError> {
        if !rt.namespaced {
            return Ok(());
        }
        let ns_obj = self
            .collections
            .get(NAMESPACES)
            .and_then(|c| c.objects.get(&(String::new(), ns.to_string())));
        match ns_obj {
            None => Err(ApiError::new(
                404,
                "NotFound",
                format!("namespaces \"{ns}\" not found"),
            )),
            Some(s) if meta(&s.obj)["deletionTimestamp"].is_string() => {
                Err(ApiError::forbidden(format!(
                    "{} is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    rt.qualified_name()
                )))
            }
            Some(_) => Ok(()),
        }
    }

    /// Writes a new version of an object (or removes it) and tells the watchers, in
    /// resourceVersion order. Returns the stored object.
    fn commit(
        &mut self,
        type_key: &str,
        key: &ObjKey,
        event: EventType,
        mut obj: Value,
        ownership: Ownership,
    ) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let obj = Arc::new(obj);
        let Some(coll) = self.collections.get_mut(type_key) else {
            return obj;
        };
        let prev = match event {
            EventType::Deleted => coll.objects.remove(key).map(|s| s.obj),
            _ => coll
                .objects
                .insert(
                    key.clone(),
                    Stored {
                        obj: obj.clone(),
                        ownership,
                    },
                )
                .map(|s| s.obj),
        };
        let kind = coll.rt.kind.clone();
        Self::notify(coll, &kind, event, &obj, prev.as_deref());
        self.index(
            type_key,
            key,
            prev.as_deref(),
            (event != EventType::Deleted).then_some(&*obj),
        );
        self.log.push_back(LogEntry {
            rv,
            type_key: type_key.to_string(),
            event,
            obj: obj.clone(),
            prev,
        });
        while self.log.len() > self.window {
            if let Some(old) = self.log.pop_front() {
                self.compacted_rv = old.rv;
            }
        }
        obj
    }

    /// Sends one change to every watcher of the collection as [`seen_as`] translates it, in
    /// the form of the API each watch was opened through.
    fn notify(
        coll: &mut Collection,
        kind: &str,
        event: EventType,
        obj: &Value,
        prev: Option<&Value>,
    ) {
        let mut views: Vec<(View, Value, Option<Value>)> = Vec::new();
        for view in coll.watchers.iter().filter_map(|w| w.view) {
            if views.iter().all(|(v, ..)| *v != view) {
                views.push((view, view.show(obj), prev.map(|p| view.show(p))));
            }
        }
        let mut cache: HashMap<(Option<View>, EventType), Bytes> = HashMap::new();
        coll.watchers.retain(|w| {
            let (obj, prev) = views
                .iter()
                .find(|(v, ..)| Some(*v) == w.view)
                .map_or((obj, prev), |(_, o, p)| (o, p.as_ref()));
            let now = watcher_matches(w, kind, obj);
            let before = prev.is_some_and(|p| watcher_matches(w, kind, p));
            let Some(ty) = seen_as(event, now, before) else {
                return true;
            };
            let bytes = cache
                .entry((w.view, ty))
                .or_insert_with(|| frame(ty.as_str(), obj))
                .clone();
            w.send(bytes, false)
        });
    }

    /// Keeps the uid index and the owner → dependents index in step with a write.
    fn index(&mut self, type_key: &str, key: &ObjKey, prev: Option<&Value>, now: Option<&Value>) {
        let entry = (type_key.to_string(), key.clone());
        if let Some(prev) = prev {
            for owner in owner_uids(prev) {
                if let Some(set) = self.dependents.get_mut(&owner) {
                    set.remove(&entry);
                    if set.is_empty() {
                        self.dependents.remove(&owner);
                    }
                }
            }
        }
        match now {
            Some(obj) => {
                if let Some(uid) = meta_str(obj, "uid") {
                    self.uids.insert(uid.to_string(), entry.clone());
                }
                let owners = owner_uids(obj);
                for owner in &owners {
                    self.dependents
                        .entry(owner.clone())
                        .or_default()
                        .insert(entry.clone());
                }
                if !owners.is_empty()
                    && let Some(gc) = &self.gc
                {
                    let _ = gc.send(GcWork::Check(type_key.to_string(), key.clone()));
                }
            }
            None => {
                if let Some(uid) = prev.and_then(|p| meta_str(p, "uid")) {
                    self.uids.remove(uid);
                    if let Some(gc) = &self.gc {
                        let _ = gc.send(GcWork::OwnerGone(uid.to_string()));
                    }
                }
            }
        }
    }

    /// Deletes an object as the generic registry does: a pod is first marked with its grace
    /// period (see [`deletion::before_delete`]) and stays while that lasts; an object with
    /// finalizers is marked deleted and stays until they are gone; anything else is removed.
    fn delete_object(
        &mut self,
        type_key: &str,
        key: &ObjKey,
        opts: &DeleteOptions,
    ) -> Result<Arc<Value>, ApiError> {
        let coll = self
            .collections
            .get(type_key)
            .ok_or_else(|| ApiError::new(404, "NotFound", "resource not served"))?;
        let rt = coll.rt.clone();
        let stored = coll
            .objects
            .get(key)
            .ok_or_else(|| ApiError::not_found(&rt, &key.1))?;
        let current = stored.obj.clone();
        let ownership = stored.ownership.clone();
        if rt.key() == NAMESPACES {
            namespace_preconditions(&key.1, &current, opts)?;
        } else {
            opts.check_preconditions((&rt.kind, &rt.group), &current)?;
        }
        if opts.dry_run {
            return Ok(current);
        }
        if opts.propagation == Propagation::Orphan {
            self.orphan_dependents(&current);
        }
        if rt.key() == NAMESPACES {
            return Ok(self.delete_namespace(&key.1, current, ownership));
        }
        let now = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
            .unwrap_or_else(|_| unreachable!("the current second is a valid time"));
        let deletion = if type_key == PODS {
            deletion::before_delete(&current, opts.grace_period_seconds, now)
        } else {
            Deletion::Now
        };
        let first = !meta(&current)["deletionTimestamp"].is_string();
        let mut obj = (*current).clone();
        let held = match deletion {
            Deletion::Pending => return Ok(current),
            Deletion::Graceful { at, grace } => {
                mark_deleted(&mut obj, first, rfc3339(at), grace);
                grace > 0 || !finalizers_empty(&obj)
            }
            Deletion::Now if finalizers_empty(&obj) => false,
            Deletion::Now => {
                // As the registry's markAsDeleting: a later timestamp moves back to now.
                let marked = meta_str(&obj, "deletionTimestamp")
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                    .filter(|t| *t <= now);
                let at = marked.unwrap_or(now);
                mark_deleted(&mut obj, first, rfc3339(at), 0);
                true
            }
        };
        // The mark is written before the removal, so watchers of a pod see it (MODIFIED, then
        // DELETED), as the registry's two-phase delete writes it.
        let obj = if obj == *current {
            current
        } else {
            self.commit(type_key, key, EventType::Modified, obj, ownership)
        };
        if held {
            return Ok(obj);
        }
        let removed = self.commit(
            type_key,
            key,
            EventType::Deleted,
            (*obj).clone(),
            Ownership::default(),
        );
        if rt.namespaced {
            self.finish_namespace_if_empty(&key.0);
        }
        Ok(removed)
    }

    fn orphan_dependents(&mut self, owner: &Value) {
        let Some(uid) = meta_str(owner, "uid").map(String::from) else {
            return;
        };
        let deps: Vec<(String, ObjKey)> = self
            .dependents
            .get(&uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for (type_key, key) in deps {
            let Some(stored) = self
                .collections
                .get(&type_key)
                .and_then(|c| c.objects.get(&key))
            else {
                continue;
            };
            let mut obj = (*stored.obj).clone();
            let ownership = stored.ownership.clone();
            if let Some(refs) = obj["metadata"]["ownerReferences"].as_array_mut() {
                refs.retain(|r| r["uid"].as_str() != Some(uid.as_str()));
            }
            self.commit(&type_key, &key, EventType::Modified, obj, ownership);
        }
    }

    /// Marks a namespace Terminating and deletes its contents; it goes once they are gone.
    fn delete_namespace(
        &mut self,
        name: &str,
        current: Arc<Value>,
        ownership: Ownership,
    ) -> Arc<Value> {
        let key = (String::new(), name.to_string());
        let mut obj = (*current).clone();
        if !meta(&obj)["deletionTimestamp"].is_string() {
            meta_mut(&mut obj).insert("deletionTimestamp".into(), json!(now_rfc3339()));
            obj["status"] = json!({ "phase": "Terminating" });
        }
        let marked = self.commit(NAMESPACES, &key, EventType::Modified, obj, ownership);
        let contents: Vec<(String, ObjKey)> = self
            .collections
            .iter()
            .filter(|(_, c)| c.rt.namespaced)
            .flat_map(|(tk, c)| {
                c.objects
                    .keys()
                    .filter(|k| k.0 == name)
                    .map(move |k| (tk.clone(), k.clone()))
            })
            .collect();
        for (type_key, obj_key) in contents {
            let _ = self.delete_object(&type_key, &obj_key, &DeleteOptions::default());
        }
        self.finish_namespace_if_empty(name);
        marked
    }

    fn finish_namespace_if_empty(&mut self, ns: &str) {
        let key = (String::new(), ns.to_string());
        let terminating = self
            .collections
            .get(NAMESPACES)
            .and_then(|c| c.objects.get(&key))
            .is_some_and(|s| meta(&s.obj)["deletionTimestamp"].is_string());
        if !terminating {
            return;
        }
        let empty = self
            .collections
            .values()
            .filter(|c| c.rt.namespaced)
            .all(|c| c.objects.keys().all(|k| k.0 != ns));
        if empty
            && let Some(obj) = self
                .collections
                .get(NAMESPACES)
                .and_then(|c| c.objects.get(&key))
                .map(|s| (*s.obj).clone())
        {
            self.commit(
                NAMESPACES,
                &key,
                EventType::Deleted,
                obj,
                Ownership::default(),
            );
        }
    }

    /// Writes `new` over the current object after the checks every update shares: optimistic
    /// concurrency, immutable metadata, status-subresource masking, generation, and finalizer
    /// completion. A write that changes nothing is a no-op, as on the real server.
    /// `requested` is the type the write came through; `new` is in its stored form.
    fn update_object(
        &mut self,
        requested: &ResourceType,
        key: &ObjKey,
        mut new: Value,
        sub: Subresource,
        opts: &WriteOptions,
        apply_ownership: Option<Ownership>,
    ) -> Result<Arc<Value>, ApiError> {
        let via = requested.view;
        let storage = self.storage_type(requested)?;
        let rt = storage.as_ref();
        let coll = self.collection(rt)?;
        let stored = coll
            .objects
            .get(key)
            .ok_or_else(|| ApiError::not_found(rt, &key.1))?;
        let current = stored.obj.clone();
        // Apply has already recorded its ownership; every other write transfers it here.
        let applied = apply_ownership.is_some();
        let mut ownership = apply_ownership.unwrap_or_else(|| stored.ownership.clone());
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be an object",
            ));
        }
        if let Some(name) = meta_str(&new, "name")
            && name != key.1
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({})",
                key.1
            )));
        }
        if let Some(rv) = meta_str(&new, "resourceVersion")
            && !rv.is_empty()
            && Some(rv) != meta_str(&current, "resourceVersion")
        {
            return Err(ApiError::stale(rt, &key.1));
        }
        // Fields the client cannot change through this endpoint come from the stored object.
        match sub {
            Subresource::Status => {
                let status = new.get("status").cloned();
                let request_meta = new.get("metadata").cloned().unwrap_or_default();
                new = (*current).clone();
                if status_write_takes_metadata(rt) {
                    let m = meta_mut(&mut new);
                    for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
                        match request_meta.get(field) {
                            Some(v) => m.insert(field.into(), v.clone()),
                            None => m.remove(field),
                        };
                    }
                }
                match status {
                    Some(s) => new["status"] = s,
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            Subresource::Main if rt.status => match current.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            },
            Subresource::Main => {}
        }
        new["apiVersion"] = json!(rt.api_version());
        new["kind"] = json!(rt.kind);
        let cur_meta = meta(&current).clone();
        let m = meta_mut(&mut new);
        for field in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
        ] {
            match cur_meta.get(field) {
                Some(v) => m.insert(field.into(), v.clone()),
                None => m.remove(field),
            };
        }
        if m.get("generateName").is_some_and(|v| v.is_null()) {
            m.remove("generateName");
        }
        apply_defaults(rt, &mut new);
        if rt.key() == CORE_EVENTS {
            events::legacy_validate(&new, via).map_err(|e| invalid_error(rt, &key.1, e))?;
        }
        if podgroups::is_pod_groups(rt) {
            podgroups::validate_update(rt, &new, &current)?;
        }
        if storageversions::is_storage_versions(rt) && !opts.fixture {
            storageversions::validate(rt, &new)?;
        }
        if claims::is_claims(rt) && !opts.fixture {
            claims::validate_claim_update(rt, &new, &current)?;
        }
        if claims::is_pods(rt) && !opts.fixture {
            claims::validate_pod_update(rt, &new, &current)?;
        }
        if spec_part(&new) != spec_part(&current) {
            let generation = cur_meta["generation"].as_i64().unwrap_or(0) + 1;
            meta_mut(&mut new).insert("generation".into(), json!(generation));
        }
        if new == *current {
            return Ok(current);
        }
        if sub == Subresource::Status
            && type_key_is(rt, "resource.k8s.io", "resourceclaims")
            && let Some((verb, forbidden)) = &opts.binding_forbidden
            && binding_changed(&current, &new)
        {
            return Err(ApiError::invalid_field(
                (&rt.kind, &rt.group),
                &key.1,
                "status.allocation",
                (
                    "FieldValueForbidden",
                    format!(
                        "Forbidden: changing status.allocation or status.reservedFor requires resource=\"resourceclaims/binding\", verb=\"{verb}\" permission: {forbidden}"
                    ),
                ),
            ));
        }
        if !applied {
            patch::record_update(Some(&current), &new, &opts.field_manager, &mut ownership);
        }
        if opts.dry_run {
            return Ok(Arc::new(new));
        }
        let type_key = rt.key();
        // As the registry's ShouldDeleteDuringUpdate: the last finalizer gone from an object
        // marked deleted removes it, unless a graceful deletion (a pod's) is still running.
        let graceful = meta(&current)["deletionGracePeriodSeconds"]
            .as_i64()
            .is_some_and(|g| g != 0);
        if meta(&current)["deletionTimestamp"].is_string() && finalizers_empty(&new) && !graceful {
            let removed = self.commit(
                &type_key,
                key,
                EventType::Deleted,
                new,
                Ownership::default(),
            );
            if rt.namespaced {
                self.finish_namespace_if_empty(&key.0);
            }
            return Ok(removed);
        }
        Ok(self.commit(&type_key, key, EventType::Modified, new, ownership))
    }

    /// `requested` is the type the write came through; `obj` is in its stored form.
    fn create_object(
        &mut self,
        requested: &ResourceType,
        ns: &str,
        mut obj: Value,
        opts: &WriteOptions,
        ownership: Option<Ownership>,
    ) -> Result<Arc<Value>, ApiError> {
        let via = requested.view;
        let storage = self.storage_type(requested)?;
        let rt = storage.as_ref();
        check_type(rt, &obj)?;
        obj["apiVersion"] = json!(rt.api_version());
        obj["kind"] = json!(rt.kind);
        if rt.namespaced {
            match meta_str(&obj, "namespace") {
                Some(body_ns) if body_ns != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    meta_mut(&mut obj).insert("namespace".into(), json!(ns));
                }
            }
        } else {
            meta_mut(&mut obj).remove("namespace");
        }
        let name = match (
            meta_str(&obj, "name").filter(|n| !n.is_empty()),
            meta_str(&obj, "generateName"),
        ) {
            (Some(name), _) => name.to_string(),
            (None, Some(base)) if !base.is_empty() => generate_name(base),
            _ => {
                return Err(ApiError::invalid(
                    rt,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
        };
        if !valid_name_for(rt, &name) {
            return Err(ApiError::invalid(
                rt,
                &name,
                "metadata.name",
                "Invalid value: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            ));
        }
        self.namespace_check(rt, ns)?;
        let key = obj_key(rt, ns, &name);
        if self.collection(rt)?.objects.contains_key(&key) {
            return Err(ApiError::already_exists(rt, &name));
        }
        let status = initial_status(rt, obj.get("status"));
        if let Some(m) = obj.as_object_mut() {
            match status {
                Some(s) => m.insert("status".into(), s),
                None => m.remove("status"),
            };
        }
        apply_defaults(rt, &mut obj);
        if rt.key() == CORE_EVENTS {
            events::validate_create(&obj, via).map_err(|e| invalid_error(rt, &name, e))?;
        }
        if podgroups::is_pod_groups(rt) {
            podgroups::validate_create(rt, &obj)?;
        }
        if storageversions::is_storage_versions(rt) && !opts.fixture {
            storageversions::validate(rt, &obj)?;
        }
        let m = meta_mut(&mut obj);
        m.insert("name".into(), json!(name));
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert("creationTimestamp".into(), json!(now_rfc3339()));
        m.insert("generation".into(), json!(1));
        for field in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "managedFields",
        ] {
            m.remove(field);
        }
        let ownership = ownership.unwrap_or_else(|| {
            let mut created = Ownership::default();
            patch::record_update(None, &obj, &opts.field_manager, &mut created);
            created
        });
        let quota_updates = if !opts.fixture && rt.key() == "/pods" {
            self.admit_pod(ns, &obj, &name)?
        } else {
            Vec::new()
        };
        if opts.dry_run {
            return Ok(Arc::new(obj));
        }
        // As the admission plugin, the quotas' new usage is stored before the pod.
        for (key, quota) in quota_updates {
            let ownership = self.collections[QUOTAS].objects[&key].ownership.clone();
            self.commit(QUOTAS, &key, EventType::Modified, quota, ownership);
        }
        Ok(self.commit(&rt.key(), &key, EventType::Added, obj, ownership))
    }

    /// The ResourceQuota admission plugin on a pod being created: the namespace's quotas
    /// with their new `status.used`, or the 403 refusing the pod.
    fn admit_pod(
        &self,
        ns: &str,
        pod: &Value,
        name: &str,
    ) -> Result<Vec<(ObjKey, Value)>, ApiError> {
        let Some(quotas) = self.collections.get(QUOTAS) else {
            return Ok(Vec::new());
        };
        let in_namespace: Vec<(&ObjKey, &Stored)> = quotas
            .objects
            .iter()
            .filter(|(key, _)| key.0 == ns)
            .collect();
        let values: Vec<&Value> = in_namespace.iter().map(|(_, s)| &*s.obj).collect();
        let updates = quota_admission::admit_pod(&values, pod, name)?;
        Ok(updates
            .into_iter()
            .map(|update| {
                let (key, stored) = in_namespace[update.index];
                let mut quota = (*stored.obj).clone();
                quota["status"]["used"] = update.used;
                (key.clone(), quota)
            })
            .collect())
    }
}

/// The store key of core/v1 ResourceQuotas.
const QUOTAS: &str = "/resourcequotas";

/// The store key of Namespaces.
const NAMESPACES: &str = "/namespaces";

/// A body's apiVersion and kind, when given, must be the type's.
fn check_type(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be an object",
        ));
    }
    if let Some(api_version) = obj["apiVersion"].as_str()
        && api_version != rt.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            rt.api_version()
        )));
    }
    if let Some(kind) = obj["kind"].as_str()
        && kind != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            rt.kind
        )));
    }
    Ok(())
}

fn watcher_matches(w: &Watcher, kind: &str, obj: &Value) -> bool {
    if let Some(ns) = &w.namespace
        && meta_str(obj, "namespace") != Some(ns.as_str())
    {
        return false;
    }
    w.labels
        .matches(JsonLabels(meta(obj)["labels"].as_object()))
        && w.fields
            .matches(|f| field_value(kind, obj, f).unwrap_or_default())
}

impl Default for Store {
    fn default() -> Self {
        Self::new(10_000)
    }
}

impl Store {
    /// A store serving the built-in types, with the usual namespaces, that keeps the last
    /// `window` events for watch resumption.
    pub fn new(window: usize) -> Self {
        let state = State {
            rv: 0,
            collections: BTreeMap::new(),
            log: VecDeque::new(),
            window: window.max(1),
            compacted_rv: 0,
            uids: HashMap::new(),
            dependents: HashMap::new(),
            watch_delays: HashMap::new(),
            gc: None,
            views: BTreeMap::new(),
        };
        let store = Self {
            state: Mutex::new(state),
        };
        for rt in builtin_types() {
            store.register(rt);
        }
        let ns_type = store
            .resource_type("", "namespaces")
            .unwrap_or_else(|| unreachable!("built in"));
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let _ = store.create(
                &ns_type,
                "",
                json!({ "metadata": { "name": ns } }),
                &WriteOptions::default(),
            );
        }
        store
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock must not take every later request down with it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn set_gc(&self, tx: Option<mpsc::UnboundedSender<GcWork>>) {
        self.lock().gc = tx;
    }

    /// Serves a new type (or replaces the definition of an existing one, keeping its objects).
    pub fn register(&self, rt: ResourceType) {
        let mut st = self.lock();
        if rt.view.is_some() {
            st.views.insert(rt.own_key(), rt);
            return;
        }
        match st.collections.get_mut(&rt.key()) {
            Some(coll) => coll.rt = rt,
            None => {
                st.collections.insert(
                    rt.key(),
                    Collection {
                        rt,
                        objects: BTreeMap::new(),
                        watchers: Vec::new(),
                    },
                );
            }
        }
    }

    /// Stops serving a type: its objects are dropped and its watches end, as when a CRD goes.
    pub fn unregister(&self, group: &str, plural: &str) -> bool {
        let mut st = self.lock();
        let key = format!("{group}/{plural}");
        if st.views.remove(&key).is_some() {
            return true;
        }
        let Some(coll) = st.collections.remove(&key) else {
            return false;
        };
        for stored in coll.objects.values() {
            if let Some(uid) = meta_str(&stored.obj, "uid") {
                st.uids.remove(uid);
            }
        }
        true
    }

    pub fn types(&self) -> Vec<ResourceType> {
        let st = self.lock();
        let stored = st.collections.values().map(|c| &c.rt);
        stored.chain(st.views.values()).cloned().collect()
    }

    pub fn resource_type(&self, group: &str, plural: &str) -> Option<ResourceType> {
        let st = self.lock();
        let key = format!("{group}/{plural}");
        let stored = st.collections.get(&key).map(|c| &c.rt);
        stored.or_else(|| st.views.get(&key)).cloned()
    }

    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Forgets every retained event: a watch or continue from any older resourceVersion now
    /// gets 410 Gone, as after an etcd compaction.
    pub fn compact(&self) {
        let mut st = self.lock();
        st.log.clear();
        st.compacted_rv = st.rv;
    }

    /// Ends every open watch stream, as when the API server restarts.
    pub fn drop_watches(&self) {
        let mut st = self.lock();
        for coll in st.collections.values_mut() {
            coll.watchers.clear();
        }
    }

    pub fn open_watches(&self) -> usize {
        self.lock()
            .collections
            .values()
            .map(|c| c.watchers.len())
            .sum()
    }

    /// Delays every watch event of a type by `delay` before delivery.
    pub fn set_watch_delay(&self, group: &str, plural: &str, delay: Duration) {
        let mut st = self.lock();
        let key = format!("{group}/{plural}");
        let delay = (!delay.is_zero()).then_some(delay);
        if let Some(coll) = st.collections.get_mut(&key) {
            for w in &mut coll.watchers {
                w.delay = delay;
            }
        }
        match delay {
            Some(d) => st.watch_delays.insert(key, d),
            None => st.watch_delays.remove(&key),
        };
    }

    /// Sends a BOOKMARK with the current resourceVersion to every watch that asked for them.
    /// Going through each watcher's channel keeps it behind every event already sent.
    pub fn send_bookmarks(&self) {
        let mut st = self.lock();
        let rv = st.rv.to_string();
        for coll in st.collections.values_mut() {
            let bookmark = |api_version: &str| {
                frame(
                    "BOOKMARK",
                    &json!({ "kind": coll.rt.kind, "apiVersion": api_version, "metadata": { "resourceVersion": rv } }),
                )
            };
            let stored = bookmark(&coll.rt.api_version());
            let views: Vec<(View, Bytes)> = coll
                .watchers
                .iter()
                .filter_map(|w| w.view)
                .map(|v| (v, bookmark(v.api_version())))
                .collect();
            coll.watchers.retain(|w| {
                let frame = views
                    .iter()
                    .find(|(v, _)| Some(*v) == w.view)
                    .map_or(&stored, |(_, b)| b);
                !w.bookmarks || w.send(frame.clone(), false)
            });
        }
    }

    /// Every stored object of the type `group`/`plural` (none when it is not served), shared,
    /// for reading many objects without building a list.
    pub fn objects(&self, group: &str, plural: &str) -> Vec<Arc<Value>> {
        let st = self.lock();
        st.collections
            .get(&format!("{group}/{plural}"))
            .map(|c| c.objects.values().map(|s| s.obj.clone()).collect())
            .unwrap_or_default()
    }

    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Arc<Value>, ApiError> {
        let stored = self.lock().lookup(rt, &obj_key(rt, ns, name))?;
        Ok(shown_arc(rt.view, stored))
    }

    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<Value, ApiError> {
        let labels = parse_labels(opts.label_selector.as_deref())?;
        let fields = parse_fields(rt, opts.field_selector.as_deref())?;
        let st = self.lock();
        let coll = st.collection(rt)?;
        let (list_rv, start_after) = match &opts.continue_token {
            Some(token) => {
                let (rv, key) = decode_continue(token)
                    .ok_or_else(|| ApiError::bad_request("invalid continue token"))?;
                if rv < st.compacted_rv {
                    return Err(ApiError::gone(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    ));
                }
                (rv, Some(key))
            }
            None => {
                if let Some(rv) = opts
                    .resource_version
                    .as_deref()
                    .filter(|rv| !rv.is_empty() && *rv != "0")
                {
                    let rv = parse_rv(rv)?;
                    if opts.resource_version_match.as_deref() == Some("Exact")
                        && rv != st.rv
                        && rv < st.compacted_rv.max(1)
                    {
                        return Err(ApiError::gone(format!(
                            "too old resource version: {rv} ({})",
                            st.compacted_rv + 1
                        )));
                    }
                }
                (st.rv, None)
            }
        };
        let kind = rt.kind.as_str();
        let limit = opts.limit.filter(|l| *l > 0);
        let mut items: Vec<Value> = Vec::new();
        let mut more = false;
        // Seek to the continue key or the namespace instead of scanning from the first object:
        // a paginated list of a large collection would otherwise be quadratic.
        let from = match (&start_after, ns) {
            (Some(after), Some(ns)) if after.0.as_str() < ns => {
                Bound::Included((ns.to_string(), String::new()))
            }
            (Some(after), _) => Bound::Excluded(after.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let range = coll
            .objects
            .range((from, Bound::Unbounded))
            .take_while(|(k, _)| ns.is_none_or(|ns| k.0 == ns));
        for (_, stored) in range {
            let obj = shown(rt.view, &stored.obj);
            if !labels.matches(JsonLabels(meta(&obj)["labels"].as_object()))
                || !fields.matches(|f| field_value(kind, &obj, f).unwrap_or_default())
            {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                more = true;
                break;
            }
            items.push(obj.into_owned());
        }
        let mut metadata = json!({ "resourceVersion": list_rv.to_string() });
        if more && let Some(last) = items.last() {
            let last_key = (
                meta_str(last, "namespace").unwrap_or_default().to_string(),
                meta_str(last, "name").unwrap_or_default().to_string(),
            );
            metadata["continue"] = json!(encode_continue(list_rv, &last_key));
        }
        Ok(json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(),
            "metadata": metadata,
            "items": items,
        }))
    }

    /// Opens a watch: replays what the client missed (or the initial state), then streams.
    pub fn watch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<mpsc::UnboundedReceiver<Frame>, ApiError> {
        let labels = parse_labels(opts.label_selector.as_deref())?;
        let fields = parse_fields(rt, opts.field_selector.as_deref())?;
        let mut st = self.lock();
        let type_key = rt.key();
        st.collection(rt)?;
        let delay = st.watch_delays.get(&type_key).copied();
        let (tx, rx) = mpsc::unbounded_channel();
        let watcher = Watcher {
            delay,
            namespace: ns.map(String::from),
            labels,
            fields,
            bookmarks: opts.allow_watch_bookmarks,
            view: rt.view,
            tx,
        };
        let kind = rt.kind.clone();
        let send = |bytes: Bytes, last: bool| {
            watcher.send(bytes, last);
        };
        // Which events come first, as the watch cache decides: `sendInitialEvents=true`, the
        // current objects as ADDED (a snapshot at least as new as any version asked for, so
        // never 410), then, when bookmarks are allowed, a BOOKMARK with the
        // `k8s.io/initial-events-end` annotation at the snapshot's resourceVersion;
        // `sendInitialEvents=false`, what followed the version given; unset (a server with
        // `WatchList` off, or a watch from a version), the legacy rule: the objects as ADDED
        // from "" or "0", else what followed the version given.
        let rv_param = opts.resource_version.as_deref().unwrap_or_default();
        let initial = opts
            .send_initial_events
            .unwrap_or(rv_param.is_empty() || rv_param == "0");
        if initial {
            if let Some(coll) = st.collections.get(&type_key) {
                for stored in coll.objects.values() {
                    let obj = shown(rt.view, &stored.obj);
                    if watcher_matches(&watcher, &kind, &obj) {
                        send(frame("ADDED", &obj), false);
                    }
                }
            }
            if opts.send_initial_events == Some(true) && opts.allow_watch_bookmarks {
                send(
                    frame(
                        "BOOKMARK",
                        &json!({
                            "kind": kind, "apiVersion": rt.api_version(),
                            "metadata": { "resourceVersion": st.rv.to_string(), "annotations": { "k8s.io/initial-events-end": "true" } },
                        }),
                    ),
                    false,
                );
            }
        } else if !rv_param.is_empty() && rv_param != "0" {
            // (`sendInitialEvents=false` from "" or "0": from now on, nothing to replay.)
            let since = parse_rv(rv_param)?;
            if since < st.compacted_rv {
                let status = ApiError::gone(format!(
                    "too old resource version: {since} ({})",
                    st.compacted_rv + 1
                ))
                .to_status();
                send(frame("ERROR", &status), true);
                return Ok(rx);
            }
            let start = st.log.partition_point(|e| e.rv <= since);
            for entry in st.log.range(start..).filter(|e| e.type_key == type_key) {
                let obj = shown(rt.view, &entry.obj);
                let now = watcher_matches(&watcher, &kind, &obj);
                let before = entry
                    .prev
                    .as_ref()
                    .is_some_and(|p| watcher_matches(&watcher, &kind, &shown(rt.view, p)));
                if let Some(ty) = seen_as(entry.event, now, before) {
                    send(frame(ty.as_str(), &obj), false);
                }
            }
        }
        if let Some(coll) = st.collections.get_mut(&type_key) {
            coll.watchers.push(watcher);
        }
        Ok(rx)
    }

    pub fn create(
        &self,
        rt: &ResourceType,
        ns: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Arc<Value>, ApiError> {
        let mut st = self.lock();
        let obj = st.to_storage(rt, obj)?;
        let created = st.create_object(rt, ns, obj, opts, None)?;
        Ok(shown_arc(rt.view, created))
    }

    /// Puts an object in as it is (status included), bypassing create strategies: for fixtures.
    pub fn seed(&self, rt: &ResourceType, obj: Value) -> Result<Arc<Value>, ApiError> {
        self.seed_with(rt, obj, true)
    }

    /// As [`Store::seed`], but records no field ownership (server-side apply sees the fields
    /// as nobody's): for large fixtures. Tracking every field path costs tens of KB per
    /// object, gigabytes for a 150 000-pod cluster.
    pub fn seed_untracked(&self, rt: &ResourceType, obj: Value) -> Result<Arc<Value>, ApiError> {
        self.seed_with(rt, obj, false)
    }

    fn seed_with(
        &self,
        rt: &ResourceType,
        obj: Value,
        track_ownership: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let ns = meta_str(&obj, "namespace").unwrap_or("default").to_string();
        let status = obj.get("status").cloned();
        // Given ownership is kept as it is by create and by a status update.
        let untracked = (!track_ownership).then(Ownership::default);
        let mut st = self.lock();
        let obj = st.to_storage(rt, obj)?;
        let opts = WriteOptions {
            fixture: true,
            ..WriteOptions::default()
        };
        let created = st.create_object(rt, &ns, obj, &opts, untracked.clone())?;
        let seeded = match status {
            Some(status) if rt.status => {
                let key = obj_key(rt, &ns, meta_str(&created, "name").unwrap_or_default());
                let status = json!({ "status": status });
                st.update_object(rt, &key, status, Subresource::Status, &opts, untracked)?
            }
            _ => created,
        };
        Ok(shown_arc(rt.view, seeded))
    }

    pub fn update(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        obj: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Arc<Value>, ApiError> {
        let mut st = self.lock();
        let obj = st.to_storage(rt, obj)?;
        let key = obj_key(rt, ns, name);
        let updated = st.update_object(rt, &key, obj, sub, opts, None)?;
        Ok(shown_arc(rt.view, updated))
    }

    /// Rewrites one object (of a stored type, not a view) under the lock, as etcd's
    /// GuaranteedUpdate: `change` gets the stored object and returns its new form, or an
    /// error that leaves it as it is. `through` is the strategy the write goes through (a
    /// subresource's update rules, validation and generation), or none, for a registry that
    /// writes storage directly (the pod binding).
    pub(crate) fn guaranteed_update(
        &self,
        (rt, ns, name): (&ResourceType, &str, &str),
        through: Option<Subresource>,
        opts: &WriteOptions,
        change: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Arc<Value>, ApiError> {
        let mut st = self.lock();
        let key = obj_key(rt, ns, name);
        let (current, ownership) = {
            let stored = st
                .collection(rt)?
                .objects
                .get(&key)
                .ok_or_else(|| ApiError::not_found(rt, name))?;
            (stored.obj.clone(), stored.ownership.clone())
        };
        let new = change(&current)?;
        match through {
            Some(sub) => st.update_object(rt, &key, new, sub, opts, None),
            None if new == *current => Ok(current),
            None if opts.dry_run => Ok(Arc::new(new)),
            None => Ok(st.commit(&rt.key(), &key, EventType::Modified, new, ownership)),
        }
    }

    /// Applies a patch; returns the object and whether it was created (server-side apply only).
    pub fn patch(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        (ty, body): (PatchType, &Value),
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<(Arc<Value>, bool), ApiError> {
        let mut st = self.lock();
        let key = obj_key(rt, ns, name);
        // A patch through a view applies to the object as that view shows it.
        let existing = st
            .collection(rt)?
            .objects
            .get(&key)
            .map(|s| (shown_arc(rt.view, s.obj.clone()), s.ownership.clone()));
        let Some((current, ownership)) = existing else {
            if ty != PatchType::Apply {
                return Err(ApiError::not_found(rt, name));
            }
            if sub == Subresource::Status {
                return Err(ApiError::not_found(rt, name));
            }
            let mut ownership = Ownership::default();
            let obj = patch::apply(
                None,
                &strip_apply_meta(body),
                &opts.field_manager,
                opts.force,
                &mut ownership,
            )
            .map_err(patch_error)?;
            let mut obj = obj;
            if meta_str(&obj, "name").is_none() {
                meta_mut(&mut obj).insert("name".into(), json!(name));
            }
            let obj = st.to_storage(rt, obj)?;
            let created = st.create_object(rt, ns, obj, opts, Some(ownership))?;
            return Ok((shown_arc(rt.view, created), true));
        };
        let (patched, apply_ownership) = match ty {
            PatchType::Json => {
                let ops: json_patch::Patch = serde_json::from_value(body.clone())
                    .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
                let mut doc = (*current).clone();
                json_patch::patch(&mut doc, &ops).map_err(|e| {
                    ApiError::new(
                        422,
                        "Invalid",
                        format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                    )
                })?;
                (doc, None)
            }
            PatchType::Merge => {
                if !body.is_object() {
                    return Err(ApiError::bad_request(
                        "invalid merge patch: the patch must be a JSON object",
                    ));
                }
                let mut doc = (*current).clone();
                json_patch::merge(&mut doc, body);
                (doc, None)
            }
            PatchType::Strategic => {
                if !rt.builtin {
                    return Err(ApiError::unsupported_media_type(
                        "application/strategic-merge-patch+json",
                    ));
                }
                (
                    patch::strategic_merge(&current, body).map_err(patch_error)?,
                    None,
                )
            }
            PatchType::Apply => {
                let mut ownership = ownership;
                let config = strip_apply_meta(body);
                let applied = patch::apply(
                    Some(&current),
                    &config,
                    &opts.field_manager,
                    opts.force,
                    &mut ownership,
                )
                .map_err(patch_error)?;
                (applied, Some(ownership))
            }
        };
        // A patch carries a resourceVersion only when the client wants optimistic locking.
        let mut patched = patched;
        let wants_lock = get_path(body, "metadata.resourceVersion")
            .and_then(|v| v.as_str())
            .is_some();
        if !wants_lock {
            meta_mut(&mut patched).remove("resourceVersion");
        }
        let patched = st.to_storage(rt, patched)?;
        let updated = st.update_object(rt, &key, patched, sub, opts, apply_ownership)?;
        Ok((shown_arc(rt.view, updated), false))
    }

    pub fn delete(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Arc<Value>, ApiError> {
        let key = obj_key(rt, ns, name);
        let deleted = self.lock().delete_object(&rt.key(), &key, opts)?;
        Ok(shown_arc(rt.view, deleted))
    }

    pub fn delete_collection(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        list_opts: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let list = self.list(
            rt,
            ns,
            &ListOptions {
                limit: None,
                continue_token: None,
                ..list_opts.clone()
            },
        )?;
        let mut st = self.lock();
        let mut deleted = Vec::new();
        for item in list["items"].as_array().into_iter().flatten() {
            let key = (
                meta_str(item, "namespace").unwrap_or_default().to_string(),
                meta_str(item, "name").unwrap_or_default().to_string(),
            );
            if let Ok(obj) = st.delete_object(&rt.key(), &key, opts) {
                deleted.push(shown(rt.view, &obj).into_owned());
            }
        }
        Ok(
            json!({ "kind": format!("{}List", rt.kind), "apiVersion": rt.api_version(), "metadata": { "resourceVersion": st.rv.to_string() }, "items": deleted }),
        )
    }

    /// The `autoscaling/v1` Scale of an object with a scale subresource.
    pub fn get_scale(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        let obj = self.get(rt, ns, name)?;
        scale_of(rt, &obj)
    }

    /// Writes `spec.replicas` from a Scale (PUT) or a patch of the Scale (PATCH).
    pub fn update_scale(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        scale: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let paths = rt.scale.clone().ok_or_else(|| {
            ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        })?;
        let mut st = self.lock();
        let key = (ns.to_string(), name.to_string());
        let current = st.lookup(rt, &key)?;
        let replicas = scale["spec"]["replicas"].clone();
        if !replicas.is_i64() && !replicas.is_u64() {
            return Err(ApiError::invalid(
                rt,
                name,
                "spec.replicas",
                "Invalid value: must be an integer",
            ));
        }
        let mut new = (*current).clone();
        if let Some(rv) = meta_str(&scale, "resourceVersion") {
            meta_mut(&mut new).insert("resourceVersion".into(), json!(rv));
        }
        set_path(&mut new, &paths.spec_replicas, replicas);
        let updated = st.update_object(rt, &key, new, Subresource::Main, opts, None)?;
        scale_of(rt, &updated)
    }

    /// One garbage-collector step: deletes dependents all of whose owners are gone.
    pub(crate) fn collect_garbage(&self, work: GcWork) {
        let mut st = self.lock();
        let candidates: Vec<(String, ObjKey)> = match work {
            GcWork::OwnerGone(uid) => st
                .dependents
                .get(&uid)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default(),
            GcWork::Check(type_key, key) => vec![(type_key, key)],
        };
        for (type_key, key) in candidates {
            let Some(obj) = st
                .collections
                .get(&type_key)
                .and_then(|c| c.objects.get(&key))
                .map(|s| s.obj.clone())
            else {
                continue;
            };
            let owners = owner_uids(&obj);
            let orphaned =
                !owners.is_empty() && owners.iter().all(|uid| !st.uids.contains_key(uid));
            if orphaned && meta(&obj)["deletionTimestamp"].is_null() {
                let _ = st.delete_object(&type_key, &key, &DeleteOptions::default());
            }
        }
    }
}

fn strip_apply_meta(body: &Value) -> Value {
    let mut config = body.clone();
    if let Some(m) = config["metadata"].as_object_mut() {
        for field in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            m.remove(field);
        }
    }
    config
}

fn parse_fields(rt: &ResourceType, selector: Option<&str>) -> Result<FieldSelector, ApiError> {
    let fields =
        FieldSelector::parse(selector.unwrap_or_default()).map_err(ApiError::bad_request)?;
    // The API a request names decides the field labels (events.k8s.io's `regarding.*`).
    let probe = json!({ "apiVersion": rt.api_version(), "metadata": {} });
    for field in fields.fields() {
        if field_value(&rt.kind, &probe, field).is_none() {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {field}"
            )));
        }
    }
    Ok(fields)
}

fn scale_of(rt: &ResourceType, obj: &Value) -> Result<Value, ApiError> {
    let paths = rt.scale.as_ref().ok_or_else(|| {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    })?;
    let replicas = |path: &str| get_path(obj, path).and_then(|v| v.as_i64()).unwrap_or(0);
    let mut status = json!({ "replicas": replicas(&paths.status_replicas) });
    let selector = match &paths.selector {
        ScaleSelector::None => None,
        ScaleSelector::LabelSelectorObject(p) => get_path(obj, p).map(label_selector_string),
        ScaleSelector::MapSelector(p) => get_path(obj, p).map(map_selector_string),
        ScaleSelector::String(p) => get_path(obj, p).and_then(|v| v.as_str()).map(String::from),
    };
    if let Some(selector) = selector {
        status["selector"] = json!(selector);
    }
    let m = meta(obj);
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
            "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"],
        },
        "spec": { "replicas": replicas(&paths.spec_replicas) },
        "status": status,
    }))
}
