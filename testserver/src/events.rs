//! Events are one resource served by two APIs, as on the real API server: core `v1` and
//! `events.k8s.io/v1` read and write the same objects (etcd's `/registry/events`). The store
//! keeps core/v1 Events; the events.k8s.io/v1 view converts on the way in and out with
//! upstream's field mapping (`pkg/apis/events/v1/conversion.go`): `regarding` is
//! `involvedObject`, `note` is `message`, `reportingController` is `reportingComponent`, and
//! `deprecatedSource`/`deprecatedFirstTimestamp`/`deprecatedLastTimestamp`/`deprecatedCount`
//! are `source`/`firstTimestamp`/`lastTimestamp`/`count`.
//!
//! Objects come out as Go's encoding writes them: fields without `omitempty` are present even
//! when empty (`involvedObject: {}`, `firstTimestamp: null`, `reportingComponent: ""`), so an
//! object reads the same whichever API wrote it, and a write that changes nothing stays a no-op.

use serde_json::{Map, Value, json};

/// A second API of a stored type, converted on every read and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    /// `events.k8s.io/v1` Events, stored as core `v1` Events.
    EventsV1,
}

/// The storage type's key (`group/plural`) of events.
pub(crate) const CORE_EVENTS: &str = "/events";

impl View {
    /// The key of the type whose objects this view shows.
    pub(crate) fn storage_key(self) -> &'static str {
        match self {
            View::EventsV1 => CORE_EVENTS,
        }
    }

    pub(crate) fn api_version(self) -> &'static str {
        match self {
            View::EventsV1 => "events.k8s.io/v1",
        }
    }

    /// A stored object as this view shows it.
    pub(crate) fn show(self, stored: &Value) -> Value {
        match self {
            View::EventsV1 => core_to_events_v1(stored),
        }
    }

    /// An object written through this view, as it is stored.
    pub(crate) fn store(self, written: &Value) -> Value {
        match self {
            View::EventsV1 => events_v1_to_core(written),
        }
    }
}

/// Copies `from` to `to` when it is a non-empty string (Go's `omitempty` on a string).
fn text(out: &mut Map<String, Value>, to: &str, src: &Value, from: &str) {
    if let Some(s) = src[from].as_str().filter(|s| !s.is_empty()) {
        out.insert(to.into(), json!(s));
    }
}

/// Copies `from` to `to` when present; `null` otherwise (a `metav1.Time` struct is never
/// omitted, its zero value encodes as `null`).
fn time(out: &mut Map<String, Value>, to: &str, src: &Value, from: &str) {
    let value = src[from].as_str().map_or(Value::Null, |s| json!(s));
    out.insert(to.into(), value);
}

/// A struct field without a pointer: `{}` when absent.
fn object(out: &mut Map<String, Value>, to: &str, src: &Value, from: &str) {
    let value = match &src[from] {
        Value::Object(m) => Value::Object(m.clone()),
        _ => json!({}),
    };
    out.insert(to.into(), value);
}

fn count(out: &mut Map<String, Value>, to: &str, src: &Value, from: &str) {
    if let Some(n) = src[from].as_i64().filter(|n| *n != 0) {
        out.insert(to.into(), json!(n));
    }
}

fn pointer(out: &mut Map<String, Value>, to: &str, src: &Value, from: &str) {
    if src[from].is_object() {
        out.insert(to.into(), src[from].clone());
    }
}

fn head(api_version: &str, src: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("kind".into(), json!("Event"));
    out.insert("apiVersion".into(), json!(api_version));
    out.insert(
        "metadata".into(),
        src.get("metadata").cloned().unwrap_or_else(|| json!({})),
    );
    out
}

fn core_to_events_v1(core: &Value) -> Value {
    let mut out = head(View::EventsV1.api_version(), core);
    time(&mut out, "eventTime", core, "eventTime");
    if core["series"].is_object() {
        // events.k8s.io/v1's series fields carry no omitempty.
        let series = &core["series"];
        out.insert(
            "series".into(),
            json!({ "count": series["count"].as_i64().unwrap_or(0), "lastObservedTime": series["lastObservedTime"] }),
        );
    }
    text(&mut out, "reportingController", core, "reportingComponent");
    text(&mut out, "reportingInstance", core, "reportingInstance");
    text(&mut out, "action", core, "action");
    text(&mut out, "reason", core, "reason");
    object(&mut out, "regarding", core, "involvedObject");
    pointer(&mut out, "related", core, "related");
    text(&mut out, "note", core, "message");
    text(&mut out, "type", core, "type");
    object(&mut out, "deprecatedSource", core, "source");
    time(&mut out, "deprecatedFirstTimestamp", core, "firstTimestamp");
    time(&mut out, "deprecatedLastTimestamp", core, "lastTimestamp");
    count(&mut out, "deprecatedCount", core, "count");
    Value::Object(out)
}

fn events_v1_to_core(event: &Value) -> Value {
    let mut out = head("v1", event);
    object(&mut out, "involvedObject", event, "regarding");
    text(&mut out, "reason", event, "reason");
    text(&mut out, "message", event, "note");
    object(&mut out, "source", event, "deprecatedSource");
    time(
        &mut out,
        "firstTimestamp",
        event,
        "deprecatedFirstTimestamp",
    );
    time(&mut out, "lastTimestamp", event, "deprecatedLastTimestamp");
    count(&mut out, "count", event, "deprecatedCount");
    text(&mut out, "type", event, "type");
    time(&mut out, "eventTime", event, "eventTime");
    if event["series"].is_object() {
        let mut series = Map::new();
        count(&mut series, "count", &event["series"], "count");
        if let Some(t) = event["series"]["lastObservedTime"].as_str() {
            series.insert("lastObservedTime".into(), json!(t));
        }
        out.insert("series".into(), Value::Object(series));
    }
    text(&mut out, "action", event, "action");
    pointer(&mut out, "related", event, "related");
    // core/v1 serializes these two without omitempty.
    let reporting = |field: &str| json!(event[field].as_str().unwrap_or_default());
    out.insert(
        "reportingComponent".into(),
        reporting("reportingController"),
    );
    out.insert("reportingInstance".into(), reporting("reportingInstance"));
    Value::Object(out)
}

/// A core/v1 Event as the real server stores and serves it: unknown fields dropped, the
/// fields Go always encodes present. Applied to every write of the core API.
pub(crate) fn normalize_core(event: &Value) -> Value {
    events_v1_to_core(&core_to_events_v1(event))
}

const REPORTING_INSTANCE_MAX: usize = 128;
const ACTION_MAX: usize = 128;
const REASON_MAX: usize = 128;
const NOTE_MAX: usize = 1024;

fn str_of<'a>(event: &'a Value, field: &str) -> &'a str {
    event[field].as_str().unwrap_or_default()
}

/// Upstream's `ValidateEventCreate` on a stored (core/v1) Event, for a create through
/// `view` (`None`: the core API). Returns the first error, as `(field, detail)`.
pub(crate) fn validate_create(event: &Value, view: Option<View>) -> Result<(), (String, String)> {
    legacy_validate(event, view)?;
    if view.is_none() {
        return Ok(());
    }
    // Strict validation of creates through events.k8s.io/v1.
    let series = &event["series"];
    if series.is_object() {
        if series["count"].as_i64().unwrap_or(0) < 2 {
            return Err(invalid("series.count", "", "should be at least 2"));
        }
        if series["lastObservedTime"].as_str().is_none() {
            return Err(("series.lastObservedTime".into(), "Required value".into()));
        }
    }
    if event["eventTime"].as_str().is_none() {
        return Err(("eventTime".into(), "Required value".into()));
    }
    let ty = str_of(event, "type");
    if ty != "Normal" && ty != "Warning" {
        return Err(invalid("type", "", &format!("has invalid value: {ty}")));
    }
    for field in ["firstTimestamp", "lastTimestamp"] {
        if event[field].as_str().is_some() {
            return Err(invalid(field, "", "needs to be unset"));
        }
    }
    if event["count"].as_i64().unwrap_or(0) != 0 {
        return Err(invalid("count", "", "needs to be unset"));
    }
    if !str_of(&event["source"], "component").is_empty()
        || !str_of(&event["source"], "host").is_empty()
    {
        return Err(invalid("source", "", "needs to be unset"));
    }
    Ok(())
}

fn invalid(field: &str, value: &str, why: &str) -> (String, String) {
    (field.into(), format!("Invalid value: \"{value}\": {why}"))
}

/// Upstream's `legacyValidateEvent`: what every Event must satisfy, whichever API wrote it.
pub(crate) fn legacy_validate(event: &Value, view: Option<View>) -> Result<(), (String, String)> {
    let namespace = event["metadata"]["namespace"].as_str().unwrap_or_default();
    let involved_ns = str_of(&event["involvedObject"], "namespace");
    let mismatch = || {
        invalid(
            "involvedObject.namespace",
            involved_ns,
            "does not match event.namespace",
        )
    };
    if event["eventTime"].as_str().is_none() {
        // An old-style Event: its namespace is its object's ("default" for cluster objects).
        let ok = if involved_ns.is_empty() {
            namespace.is_empty() || namespace == "default"
        } else {
            namespace == involved_ns
        };
        if !ok {
            return Err(mismatch());
        }
        return Ok(());
    }
    if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
        return Err(mismatch());
    }
    let reporting_field = match view {
        None => "reportingComponent",
        Some(View::EventsV1) => "reportingController",
    };
    let required = |field: &str| Err((field.to_string(), "Required value".to_string()));
    let too_long = |field: &str, max: usize| {
        Err(invalid(
            field,
            "",
            &format!("can have at most {max} characters"),
        ))
    };
    if str_of(event, "reportingComponent").is_empty() {
        return required(reporting_field);
    }
    let instance = str_of(event, "reportingInstance");
    if instance.is_empty() {
        return required("reportingInstance");
    }
    if instance.len() > REPORTING_INSTANCE_MAX {
        return too_long("reportingInstance", REPORTING_INSTANCE_MAX);
    }
    let action = str_of(event, "action");
    if action.is_empty() {
        return required("action");
    }
    if action.len() > ACTION_MAX {
        return too_long("action", ACTION_MAX);
    }
    let reason = str_of(event, "reason");
    if reason.is_empty() {
        return required("reason");
    }
    if reason.len() > REASON_MAX {
        return too_long("reason", REASON_MAX);
    }
    if str_of(event, "message").len() > NOTE_MAX {
        return too_long("message", NOTE_MAX);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core_event() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": { "name": "web.1", "namespace": "shop" },
            "involvedObject": { "kind": "PodDisruptionBudget", "namespace": "shop", "name": "web", "uid": "u1", "apiVersion": "policy/v1" },
            "reason": "NoPods", "message": "No matching pods found",
            "source": { "component": "controllermanager" },
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z",
            "count": 3, "type": "Normal",
            "reportingComponent": "", "reportingInstance": "",
        })
    }

    #[test]
    fn core_fields_map_to_events_v1_names() {
        let shown = View::EventsV1.show(&core_event());
        assert_eq!(
            shown,
            json!({
                "kind": "Event", "apiVersion": "events.k8s.io/v1",
                "metadata": { "name": "web.1", "namespace": "shop" },
                "eventTime": null,
                "reason": "NoPods",
                "regarding": { "kind": "PodDisruptionBudget", "namespace": "shop", "name": "web", "uid": "u1", "apiVersion": "policy/v1" },
                "note": "No matching pods found",
                "type": "Normal",
                "deprecatedSource": { "component": "controllermanager" },
                "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z",
                "deprecatedLastTimestamp": "2026-01-01T00:01:00Z",
                "deprecatedCount": 3,
            })
        );
        // And back: the stored form is what the core API wrote.
        assert_eq!(View::EventsV1.store(&shown), normalize_core(&core_event()));
        assert_eq!(normalize_core(&core_event()), {
            let mut e = core_event();
            e["eventTime"] = Value::Null;
            e
        });
    }

    #[test]
    fn events_v1_fields_map_to_core_names() {
        let written = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": { "name": "n1.x", "namespace": "default" },
            "eventTime": "2026-01-01T00:00:00.000001Z",
            "series": { "count": 2, "lastObservedTime": "2026-01-01T00:00:05.000001Z" },
            "reportingController": "ttl-controller", "reportingInstance": "kcm-a",
            "action": "Annotate", "reason": "TTLSet", "note": "set",
            "regarding": { "kind": "Node", "name": "n1" },
            "related": { "kind": "Pod", "name": "p" },
            "type": "Normal",
        });
        let stored = View::EventsV1.store(&written);
        assert_eq!(
            stored,
            json!({
                "kind": "Event", "apiVersion": "v1",
                "metadata": { "name": "n1.x", "namespace": "default" },
                "involvedObject": { "kind": "Node", "name": "n1" },
                "reason": "TTLSet", "message": "set", "source": {},
                "firstTimestamp": null, "lastTimestamp": null,
                "type": "Normal", "eventTime": "2026-01-01T00:00:00.000001Z",
                "series": { "count": 2, "lastObservedTime": "2026-01-01T00:00:05.000001Z" },
                "action": "Annotate", "related": { "kind": "Pod", "name": "p" },
                "reportingComponent": "ttl-controller", "reportingInstance": "kcm-a",
            })
        );
        assert_eq!(View::EventsV1.show(&stored), {
            let mut w = written.clone();
            w["deprecatedSource"] = json!({});
            w["deprecatedFirstTimestamp"] = Value::Null;
            w["deprecatedLastTimestamp"] = Value::Null;
            w
        });
        assert_eq!(validate_create(&stored, Some(View::EventsV1)), Ok(()));
        assert_eq!(legacy_validate(&stored, None), Ok(()));
    }

    #[test]
    fn validation_follows_upstream() {
        let core = normalize_core(&core_event());
        assert_eq!(validate_create(&core, None), Ok(()));
        let mut elsewhere = core.clone();
        elsewhere["metadata"]["namespace"] = json!("other");
        assert_eq!(
            validate_create(&elsewhere, None),
            Err((
                "involvedObject.namespace".into(),
                "Invalid value: \"shop\": does not match event.namespace".into()
            ))
        );
        // A cluster-scoped object's old-style event lives in "default".
        let mut node = core.clone();
        node["involvedObject"] = json!({ "kind": "Node", "name": "n1" });
        node["metadata"]["namespace"] = json!("default");
        assert_eq!(validate_create(&node, None), Ok(()));
        // Through events.k8s.io/v1, the deprecated fields must be unset and eventTime set.
        assert_eq!(
            validate_create(&core, Some(View::EventsV1)),
            Err(("eventTime".into(), "Required value".into()))
        );
        let mut new_style = core.clone();
        new_style["eventTime"] = json!("2026-01-01T00:00:00.000000Z");
        assert_eq!(
            validate_create(&new_style, None),
            Err(("reportingComponent".into(), "Required value".into()))
        );
        assert_eq!(
            validate_create(&new_style, Some(View::EventsV1)),
            Err(("reportingController".into(), "Required value".into()))
        );
        new_style["reportingComponent"] = json!("c");
        new_style["reportingInstance"] = json!("i");
        new_style["action"] = json!("Sync");
        assert_eq!(validate_create(&new_style, None), Ok(()));
        assert_eq!(
            validate_create(&new_style, Some(View::EventsV1)),
            Err((
                "firstTimestamp".into(),
                "Invalid value: \"\": needs to be unset".into()
            ))
        );
    }
}
