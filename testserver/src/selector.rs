//! Label and field selectors with kube-apiserver semantics.
//!
//! Label selectors are apimachinery's (`labels.Parse`, `LabelSelectorAsSelector`), from
//! kcm-values; here is what the server matches them against, stored JSON. The field parser is
//! a port of `fields.ParseSelector`, and which fields each kind supports is the server's own,
//! so that clients see the same accept/reject decisions, the same error text and the same
//! matches as against a real server.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcm_values::selector::{LabelSet, Selector, SelectorError, from_label_selector};
use serde_json::{Map, Value};

// ---------------------------------------------------------------------------
// Label selectors
// ---------------------------------------------------------------------------

/// An object's stored `metadata.labels`, as selectors see them. A label whose value is no
/// string is present, but equal to no selector value.
#[derive(Clone, Copy)]
pub struct JsonLabels<'a>(pub Option<&'a Map<String, Value>>);

impl LabelSet for JsonLabels<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        self.0?.get(key)?.as_str()
    }

    fn has(&self, key: &str) -> bool {
        self.0.is_some_and(|labels| labels.contains_key(key))
    }
}

/// A stored `metav1.LabelSelector` object (a budget's, a workload's) as
/// `LabelSelectorAsSelector` reads it: a missing (null) one selects nothing, and one that is no
/// selector object is refused as an invalid one is.
pub fn selector_object(selector: &Value) -> Result<Selector, SelectorError> {
    let selector = serde_json::from_value::<Option<LabelSelector>>(selector.clone())
        .map_err(|e| SelectorError::Invalid(e.to_string()))?;
    from_label_selector(selector.as_ref())
}

// ---------------------------------------------------------------------------
// Field selectors
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
struct FieldTerm {
    field: String,
    value: String,
    negated: bool,
}

/// A parsed `fieldSelector`: `f=v`, `f==v`, `f!=v`, comma-separated, ANDed;
/// backslash escapes (`\,` `\=` `\\`) in values as apimachinery
/// `fields.ParseSelector`. No whitespace trimming, as upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = split_terms(s);
        // Upstream sorts the raw terms, which decides which error is reported.
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((lhs, op, rhs)) = split_term(part) else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let value = unescape_value(rhs)?;
            // Upstream's Transform drops a term whose field and value are both
            // empty (`=`, `!=`), so it selects everything instead of failing.
            if lhs.is_empty() && value.is_empty() {
                continue;
            }
            terms.push(FieldTerm {
                field: lhs.to_owned(),
                value,
                negated: op == "!=",
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Field names used, so the caller can reject unsupported ones with
    /// `field label not supported: <name>`.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.field.as_str())
    }

    /// `get(field)` returns the object's value for that field ("" when unset).
    pub fn matches(&self, get: impl Fn(&str) -> String) -> bool {
        self.terms
            .iter()
            .all(|t| (get(&t.field) == t.value) != t.negated)
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// Splits on commas not escaped by a backslash; escapes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits at the first operator; `!=` and `==` are tried before `=` so that
/// `a==b` does not leave `=b` as the value.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for op in ["!=", "==", "="] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], op, value));
            }
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, String> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                ));
            }
            out.push(c);
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Upstream formats the rune with %v, i.e. as its code point number.
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ));
            }
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_owned());
    }
    Ok(out)
}

/// Value of a supported field of an object for field selectors, as the real
/// server's per-kind field label conversion and `ToSelectableFields` define
/// them. `None` means the field is not supported for that kind (answer 400
/// `field label not supported: <field>`); unset values read as "".
///
/// Every kind: `metadata.name`, and `metadata.namespace` except for Node and
/// Namespace, whose conversion funcs reject it (other cluster-scoped kinds
/// accept it and read ""). Pod: `spec.nodeName` (also the legacy alias
/// `spec.host`), `spec.restartPolicy`, `spec.schedulerName`,
/// `spec.serviceAccountName`, `spec.hostNetwork`, `status.phase`,
/// `status.podIP`, `status.podIPs` (accepted but never set upstream, so ""),
/// `status.nominatedNodeName`. Event (core/v1): `involvedObject.*`, `reason`,
/// `reportingComponent`, `source`, `type`; an Event whose apiVersion is
/// `events.k8s.io/*` uses that group's names (`regarding.*`,
/// `reportingController`, ...). Secret: `type`. Node: `spec.unschedulable`.
/// Namespace: `status.phase`. Service: `spec.clusterIP`, `spec.type`.
/// ReplicationController: `status.replicas`. Job: `status.successful`.
pub fn field_value(kind: &str, obj: &Value, field: &str) -> Option<String> {
    let text = |ptr: &str| str_at(obj, ptr);
    let flag = |ptr: &str| -> String {
        obj.pointer(ptr)
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .to_string()
    };
    let number = |ptr: &str| -> String {
        obj.pointer(ptr)
            .and_then(Value::as_i64)
            .unwrap_or(0)
            .to_string()
    };
    match field {
        "metadata.name" => return Some(text("/metadata/name")),
        "metadata.namespace" if kind != "Node" && kind != "Namespace" => {
            return Some(text("/metadata/namespace"));
        }
        _ => {}
    }
    match kind {
        "Pod" => match field {
            "spec.nodeName" | "spec.host" => Some(text("/spec/nodeName")),
            "spec.restartPolicy" => Some(text("/spec/restartPolicy")),
            "spec.schedulerName" => Some(text("/spec/schedulerName")),
            "spec.serviceAccountName" => Some(text("/spec/serviceAccountName")),
            "spec.hostNetwork" => Some(flag("/spec/hostNetwork")),
            "status.phase" => Some(text("/status/phase")),
            // v1->internal conversion makes status.podIP authoritative and
            // falls back to podIPs[0]; the field set uses the result.
            "status.podIP" => {
                let ip = text("/status/podIP");
                Some(if ip.is_empty() {
                    text("/status/podIPs/0/ip")
                } else {
                    ip
                })
            }
            "status.podIPs" => Some(String::new()),
            "status.nominatedNodeName" => Some(text("/status/nominatedNodeName")),
            _ => None,
        },
        "Event" => {
            let events_group = obj
                .get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|v| v.starts_with("events.k8s.io/"));
            if events_group {
                events_k8s_io_field(obj, field)
            } else {
                core_event_field(obj, field)
            }
        }
        "Secret" => (field == "type").then(|| text("/type")),
        "Node" => (field == "spec.unschedulable").then(|| flag("/spec/unschedulable")),
        "Namespace" => (field == "status.phase").then(|| text("/status/phase")),
        "Service" => match field {
            "spec.clusterIP" => Some(text("/spec/clusterIP")),
            "spec.type" => Some(text("/spec/type")),
            _ => None,
        },
        "ReplicationController" => (field == "status.replicas").then(|| number("/status/replicas")),
        "Job" => (field == "status.successful").then(|| number("/status/succeeded")),
        _ => None,
    }
}

fn str_at(obj: &Value, ptr: &str) -> String {
    obj.pointer(ptr)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn core_event_field(obj: &Value, field: &str) -> Option<String> {
    if let Some(sub) = field.strip_prefix("involvedObject.") {
        return event_reference_field(obj, "/involvedObject/", sub);
    }
    match field {
        "reason" => Some(str_at(obj, "/reason")),
        "type" => Some(str_at(obj, "/type")),
        // core/v1 serialises ReportingController as reportingComponent.
        "reportingComponent" => Some(str_at(obj, "/reportingComponent")),
        "source" => {
            let source = str_at(obj, "/source/component");
            Some(if source.is_empty() {
                str_at(obj, "/reportingComponent")
            } else {
                source
            })
        }
        _ => None,
    }
}

fn events_k8s_io_field(obj: &Value, field: &str) -> Option<String> {
    if let Some(sub) = field.strip_prefix("regarding.") {
        return event_reference_field(obj, "/regarding/", sub);
    }
    match field {
        "reason" => Some(str_at(obj, "/reason")),
        "type" => Some(str_at(obj, "/type")),
        "reportingController" => Some(str_at(obj, "/reportingController")),
        "source" => {
            let source = str_at(obj, "/deprecatedSource/component");
            Some(if source.is_empty() {
                str_at(obj, "/reportingController")
            } else {
                source
            })
        }
        _ => None,
    }
}

fn event_reference_field(obj: &Value, base: &str, sub: &str) -> Option<String> {
    matches!(
        sub,
        "kind" | "namespace" | "name" | "uid" | "apiVersion" | "resourceVersion" | "fieldPath"
    )
    .then(|| str_at(obj, &format!("{base}{sub}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
            .collect()
    }

    #[test]
    fn selector_objects_read_as_label_selector_as_selector() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let selects = |v: Value| selector_object(&v).unwrap().matches(JsonLabels(Some(&web)));
        assert!(selects(json!({})));
        assert!(selects(json!({
            "matchLabels": { "app": "web" },
            "matchExpressions": [
                { "key": "tier", "operator": "In", "values": ["front", "back"] },
                { "key": "zone", "operator": "DoesNotExist" },
            ],
        })));
        assert!(!selects(
            json!({ "matchExpressions": [{ "key": "tier", "operator": "NotIn", "values": ["front"] }] })
        ));
        // A missing selector selects nothing; one that is no selector object is refused.
        assert!(!selects(Value::Null));
        assert!(selector_object(&json!({ "matchLabels": "app=web" })).is_err());
        assert_eq!(
            selector_object(
                &json!({ "matchExpressions": [{ "key": "a", "operator": "Gt", "values": ["1"] }] })
            )
            .map_err(|e| e.to_string()),
            Err("\"Gt\" is not a valid label selector operator".to_string())
        );
        assert!(selector_object(&json!({ "matchLabels": { "a b": "x" } })).is_err());
    }

    #[test]
    fn label_non_string_values_never_equal() {
        let mut m = Map::new();
        m.insert("x".into(), json!(1));
        let sel = |s: &str| {
            kcm_values::selector::parse(s)
                .unwrap()
                .matches(JsonLabels(Some(&m)))
        };
        assert!(sel("x"));
        assert!(!sel("!x"));
        assert!(!sel("x=1"));
        assert!(sel("x!=1"));
        assert!(sel("x notin (1)"));
        assert!(!sel("x>0"));
        assert!(sel("!y"));
    }

    // Every string of up to four characters over the syntax-relevant alphabet parses or
    // errors without panicking.
    #[test]
    fn field_parse_never_panics_on_short_inputs() {
        let alphabet = "=!(),<>ain\\\0é ";
        let strings_of_len = |len: u32| {
            let n = alphabet.chars().count();
            (0..n.pow(len)).map(move |mut index| {
                let mut s = String::new();
                for _ in 0..len {
                    s.push(alphabet.chars().nth(index % n).unwrap_or(' '));
                    index /= n;
                }
                s
            })
        };
        for s in (0..=4).flat_map(strings_of_len) {
            let _ = FieldSelector::parse(&s).map(|sel| sel.matches(|_| String::new()));
        }
    }

    // fields TestSelectorParse, TestDeterministicParse.
    #[test]
    fn field_parse_good_and_bad() {
        for s in ["x=a,y=b,z=c", "", "x!=a,y=b", "x=a||y\\=b", "x=a\\=\\=b"] {
            assert!(FieldSelector::parse(s).is_ok(), "{s:?}");
        }
        let bad: &[(&str, &str)] = &[
            (
                "x=a||y=b",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "x==a==b",
                "invalid field selector: unescaped character in value: 61",
            ),
            ("x=a,b", "invalid selector: 'x=a,b'; can't understand 'b'"),
            (
                "x in (a)",
                "invalid selector: 'x in (a)'; can't understand 'x in (a)'",
            ),
            (
                "x in (a,b,c)",
                "invalid selector: 'x in (a,b,c)'; can't understand 'b'",
            ),
            ("x", "invalid selector: 'x'; can't understand 'x'"),
            (
                "k=\\a",
                "invalid field selector: invalid escape sequence: \\a",
            ),
            (
                "k=\\",
                "invalid field selector: invalid escape sequence: \\",
            ),
            (
                "k=\\\\\\",
                "invalid field selector: invalid escape sequence: \\",
            ),
        ];
        for (s, want) in bad {
            assert_eq!(FieldSelector::parse(s), Err((*want).to_owned()), "{s:?}");
        }
        assert_eq!(
            FieldSelector::parse("x=a,a=x"),
            FieldSelector::parse("a=x,x=a")
        );
    }

    fn field_terms(s: &str) -> Vec<(String, String, bool)> {
        FieldSelector::parse(s)
            .unwrap_or_else(|e| panic!("{s:?}: {e}"))
            .terms
            .into_iter()
            .map(|t| (t.field, t.value, t.negated))
            .collect()
    }

    fn term(f: &str, v: &str, negated: bool) -> (String, String, bool) {
        (f.to_owned(), v.to_owned(), negated)
    }

    // TestSplitTerms / TestSplitTerm / TestEscapeValue, observed through parse.
    #[test]
    fn field_terms_and_escapes() {
        assert_eq!(split_terms(""), Vec::<&str>::new());
        assert_eq!(split_terms("a=a,"), vec!["a=a", ""]);
        assert_eq!(split_terms(",a=a"), vec!["", "a=a"]);
        assert_eq!(split_terms("k=\\,,k2=v2"), vec!["k=\\,", "k2=v2"]);
        assert_eq!(split_terms("k=\\\\,k2=v2"), vec!["k=\\\\", "k2=v2"]);
        assert_eq!(split_terms("k=\\\\\\,,k2=v2"), vec!["k=\\\\\\,", "k2=v2"]);
        assert_eq!(split_terms("k=\\a\\b\\"), vec!["k=\\a\\b\\"]);
        assert_eq!(split_terms("함=수,목=록"), vec!["함=수", "목=록"]);
        assert_eq!(split_term("a=value"), Some(("a", "=", "value")));
        assert_eq!(split_term("b==value"), Some(("b", "==", "value")));
        assert_eq!(split_term("c!=value"), Some(("c", "!=", "value")));
        assert_eq!(split_term("a"), None);
        assert_eq!(
            split_term("k=\\\\\\a\\b\\=\\,\\"),
            Some(("k", "=", "\\\\\\a\\b\\=\\,\\"))
        );
        assert_eq!(split_term("함=수"), Some(("함", "=", "수")));
        for (escaped, plain) in [
            ("", ""),
            ("a", "a"),
            ("\\=", "="),
            ("\\,", ","),
            ("\\\\", "\\"),
            ("\\\\\\=\\\\\\,\\\\", "\\=\\,\\"),
        ] {
            assert_eq!(unescape_value(escaped), Ok(plain.to_owned()), "{escaped:?}");
        }
        assert_eq!(
            field_terms("k=\\,,k2=v2"),
            // Sorted raw terms: '2' sorts before '='.
            vec![term("k2", "v2", false), term("k", ",", false)]
        );
        assert_eq!(
            field_terms("a!=b,c==d"),
            vec![term("a", "b", true), term("c", "d", false)]
        );
        // Whitespace is data in field selectors.
        assert_eq!(field_terms(" a = b "), vec![term(" a ", " b ", false)]);
        assert_eq!(field_terms("a="), vec![term("a", "", false)]);
        assert_eq!(field_terms("=x"), vec![term("", "x", false)]);
        // Empty field and value: dropped, as upstream's Transform does.
        assert!(FieldSelector::parse("=").unwrap().is_empty());
        assert!(FieldSelector::parse("!=,,").unwrap().is_empty());
        assert!(FieldSelector::parse("").unwrap().is_empty());
    }

    // fields TestSelectorMatches.
    #[test]
    fn field_selector_matches() {
        let set = |pairs: &'static [(&'static str, &'static str)]| {
            move |f: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == f)
                    .map(|(_, v)| (*v).to_owned())
                    .unwrap_or_default()
            }
        };
        let m = |s: &str, pairs: &'static [(&'static str, &'static str)]| {
            FieldSelector::parse(s).unwrap().matches(set(pairs))
        };
        assert!(m("", &[("x", "y")]));
        assert!(m("x=y", &[("x", "y")]));
        assert!(m("x=y,z=w", &[("x", "y"), ("z", "w")]));
        assert!(m("x!=y,z!=w", &[("x", "z"), ("z", "a")]));
        assert!(m("notin=in", &[("notin", "in")]));
        assert!(!m("x=y", &[("x", "z")]));
        assert!(!m("x=y,z=w", &[("x", "w"), ("z", "w")]));
        assert!(!m("x!=y,z!=w", &[("x", "z"), ("z", "w")]));
        const FS: &[(&str, &str)] = &[("foo", "bar"), ("baz", "blah"), ("complex", "=value\\,\\")];
        assert!(m("foo=bar", FS));
        assert!(m("baz=blah", FS));
        assert!(m("foo=bar,baz=blah", FS));
        assert!(m("foo=bar,baz=blah,complex=\\=value\\\\\\,\\\\", FS));
        assert!(!m("foo=blah", FS));
        assert!(!m("baz=bar", FS));
        assert!(!m("foo=bar,foobar=bar,baz=blah", FS));
        // Unset reads as "".
        assert!(m("spec.nodeName=", &[]));
        assert!(!m("spec.nodeName!=", &[]));
        let sel = FieldSelector::parse("b=1,a!=2,b=3").unwrap();
        assert_eq!(sel.fields().collect::<Vec<_>>(), vec!["a", "b", "b"]);
    }

    #[test]
    fn field_value_for_pods() {
        let unscheduled = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "restartPolicy": "Always"},
            "status": {"phase": "Pending"}
        });
        let fv = |f: &str| field_value("Pod", &unscheduled, f);
        assert_eq!(fv("metadata.name").as_deref(), Some("p"));
        assert_eq!(fv("metadata.namespace").as_deref(), Some("ns"));
        assert_eq!(fv("spec.nodeName").as_deref(), Some(""));
        assert_eq!(fv("spec.host").as_deref(), Some(""));
        assert_eq!(fv("spec.restartPolicy").as_deref(), Some("Always"));
        assert_eq!(fv("spec.schedulerName").as_deref(), Some(""));
        assert_eq!(fv("spec.serviceAccountName").as_deref(), Some(""));
        assert_eq!(fv("spec.hostNetwork").as_deref(), Some("false"));
        assert_eq!(fv("status.phase").as_deref(), Some("Pending"));
        assert_eq!(fv("status.podIP").as_deref(), Some(""));
        assert_eq!(fv("status.podIPs").as_deref(), Some(""));
        assert_eq!(fv("status.nominatedNodeName").as_deref(), Some(""));
        assert_eq!(fv("spec.containers"), None);
        assert_eq!(fv("metadata.uid"), None);

        let running = json!({
            "kind": "Pod",
            "metadata": {"name": "q", "namespace": "ns"},
            "spec": {"nodeName": "node-1", "hostNetwork": true, "schedulerName": "default-scheduler",
                     "serviceAccountName": "sa"},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.2"}, {"ip": "fd00::2"}],
                       "nominatedNodeName": "node-2"}
        });
        let fv = |f: &str| field_value("Pod", &running, f);
        assert_eq!(fv("spec.nodeName").as_deref(), Some("node-1"));
        assert_eq!(fv("spec.hostNetwork").as_deref(), Some("true"));
        assert_eq!(
            fv("spec.schedulerName").as_deref(),
            Some("default-scheduler")
        );
        assert_eq!(fv("spec.serviceAccountName").as_deref(), Some("sa"));
        assert_eq!(fv("status.phase").as_deref(), Some("Running"));
        assert_eq!(fv("status.podIP").as_deref(), Some("10.0.0.2"));
        assert_eq!(fv("status.nominatedNodeName").as_deref(), Some("node-2"));
        let with_pod_ip = json!({"status": {"podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.2"}]}});
        assert_eq!(
            field_value("Pod", &with_pod_ip, "status.podIP").as_deref(),
            Some("10.0.0.9")
        );

        // End to end: unscheduled pods via spec.nodeName=.
        let sel = FieldSelector::parse("spec.nodeName=,status.phase!=Running").unwrap();
        assert!(sel.matches(|f: &str| field_value("Pod", &unscheduled, f).unwrap_or_default()));
        assert!(!sel.matches(|f: &str| field_value("Pod", &running, f).unwrap_or_default()));
        assert!(
            sel.fields()
                .all(|f| field_value("Pod", &running, f).is_some())
        );
    }

    #[test]
    fn field_value_for_other_kinds() {
        let event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u1",
                               "apiVersion": "v1", "resourceVersion": "7", "fieldPath": "spec.containers{c}"},
            "reason": "Started", "type": "Normal", "reportingComponent": "kubelet"
        });
        let fv = |f: &str| field_value("Event", &event, f);
        assert_eq!(fv("involvedObject.kind").as_deref(), Some("Pod"));
        assert_eq!(fv("involvedObject.namespace").as_deref(), Some("ns"));
        assert_eq!(fv("involvedObject.name").as_deref(), Some("p"));
        assert_eq!(fv("involvedObject.uid").as_deref(), Some("u1"));
        assert_eq!(fv("involvedObject.apiVersion").as_deref(), Some("v1"));
        assert_eq!(fv("involvedObject.resourceVersion").as_deref(), Some("7"));
        assert_eq!(
            fv("involvedObject.fieldPath").as_deref(),
            Some("spec.containers{c}")
        );
        assert_eq!(fv("reason").as_deref(), Some("Started"));
        assert_eq!(fv("type").as_deref(), Some("Normal"));
        assert_eq!(fv("reportingComponent").as_deref(), Some("kubelet"));
        // source falls back to the reporting controller.
        assert_eq!(fv("source").as_deref(), Some("kubelet"));
        assert_eq!(fv("involvedObject.other"), None);
        assert_eq!(fv("regarding.kind"), None);
        let with_source = json!({"source": {"component": "scheduler"}, "reportingComponent": "x"});
        assert_eq!(
            field_value("Event", &with_source, "source").as_deref(),
            Some("scheduler")
        );

        let new_event = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "ns"},
            "regarding": {"kind": "Node", "name": "n1"},
            "reportingController": "ctrl", "reason": "R", "type": "Warning"
        });
        let fv = |f: &str| field_value("Event", &new_event, f);
        assert_eq!(fv("regarding.kind").as_deref(), Some("Node"));
        assert_eq!(fv("regarding.name").as_deref(), Some("n1"));
        assert_eq!(fv("regarding.namespace").as_deref(), Some(""));
        assert_eq!(fv("reportingController").as_deref(), Some("ctrl"));
        assert_eq!(fv("source").as_deref(), Some("ctrl"));
        assert_eq!(fv("reason").as_deref(), Some("R"));
        assert_eq!(fv("type").as_deref(), Some("Warning"));
        assert_eq!(fv("involvedObject.kind"), None);
        assert_eq!(fv("reportingComponent"), None);

        let secret = json!({"metadata": {"name": "s", "namespace": "ns"}, "type": "Opaque"});
        assert_eq!(
            field_value("Secret", &secret, "type").as_deref(),
            Some("Opaque")
        );
        assert_eq!(
            field_value("Secret", &json!({}), "type").as_deref(),
            Some("")
        );
        assert_eq!(field_value("Secret", &secret, "data"), None);

        let node = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        assert_eq!(
            field_value("Node", &node, "spec.unschedulable").as_deref(),
            Some("true")
        );
        assert_eq!(
            field_value("Node", &json!({}), "spec.unschedulable").as_deref(),
            Some("false")
        );
        assert_eq!(
            field_value("Node", &node, "metadata.name").as_deref(),
            Some("n")
        );
        assert_eq!(field_value("Node", &node, "metadata.namespace"), None);

        let ns = json!({"metadata": {"name": "default"}, "status": {"phase": "Active"}});
        assert_eq!(
            field_value("Namespace", &ns, "status.phase").as_deref(),
            Some("Active")
        );
        assert_eq!(field_value("Namespace", &ns, "metadata.namespace"), None);

        let svc = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1"}});
        assert_eq!(
            field_value("Service", &svc, "spec.type").as_deref(),
            Some("ClusterIP")
        );
        assert_eq!(
            field_value("Service", &svc, "spec.clusterIP").as_deref(),
            Some("10.96.0.1")
        );
        assert_eq!(
            field_value("ReplicationController", &json!({}), "status.replicas").as_deref(),
            Some("0")
        );
        assert_eq!(
            field_value(
                "Job",
                &json!({"status": {"succeeded": 3}}),
                "status.successful"
            )
            .as_deref(),
            Some("3")
        );

        // Generic kinds: name and namespace only; cluster-scoped reads "".
        let cm = json!({"metadata": {"name": "c", "namespace": "ns"}, "data": {"k": "v"}});
        assert_eq!(
            field_value("ConfigMap", &cm, "metadata.namespace").as_deref(),
            Some("ns")
        );
        assert_eq!(field_value("ConfigMap", &cm, "data.k"), None);
        assert_eq!(field_value("Pod", &cm, "spec.unschedulable"), None);
        assert_eq!(
            field_value(
                "ClusterRole",
                &json!({"metadata": {"name": "r"}}),
                "metadata.namespace"
            )
            .as_deref(),
            Some("")
        );
        assert_eq!(
            field_value("Widget", &json!(null), "metadata.name").as_deref(),
            Some("")
        );
    }
}
