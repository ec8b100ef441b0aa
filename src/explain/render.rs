//! The human-readable form of an explanation (`-o json` and `-o yaml` are its serde form).

use std::fmt::Write;

use serde_json::Value;

use super::claim::{ClaimReasons, PodReasons};
use super::node::NodeReasons;
use super::pdb::PdbReasons;
use super::quota::QuotaReasons;
use super::storageversion::StorageVersionReasons;
use super::{Explanation, Reasons};

/// A status value in a line: lists by their elements' names (`-o json` has them whole),
/// maps as `key=value`.
fn value(v: &Value) -> String {
    match v {
        Value::Null => "(none)".into(),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(element).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}={}", value(v)))
                .collect();
            format!("{{{}}}", pairs.join(", "))
        }
        other => other.to_string(),
    }
}

/// A list element by what names it: a condition by its type and status, a reservation by
/// its name, a StorageVersion entry by its server.
fn element(item: &Value) -> String {
    let field = |name: &str| item.get(name).and_then(Value::as_str);
    match (
        field("type"),
        field("status"),
        field("name"),
        field("apiServerID"),
    ) {
        (Some(kind), Some(status), _, _) => format!("{kind}={status}"),
        (_, _, Some(name), _) | (_, _, _, Some(name)) => name.to_string(),
        _ => value(item),
    }
}

pub fn text(e: &Explanation) -> String {
    let mut out = String::new();
    head(&mut out, e, "");
    match &e.reasons {
        Reasons::ResourceQuota(r) => quota(&mut out, r),
        Reasons::PodDisruptionBudget(r) => pdb(&mut out, r),
        Reasons::ResourceClaim(r) => claim(&mut out, r, ""),
        Reasons::Pod(r) => pod(&mut out, r),
        Reasons::Node(r) => node(&mut out, r),
        Reasons::StorageVersion(r) => storage_version(&mut out, r),
    }
    out
}

/// The object, in sync or each differing field, and what kcm does next.
fn head(out: &mut String, e: &Explanation, indent: &str) {
    let name = if e.namespace.is_empty() {
        e.name.clone()
    } else {
        format!("{}/{}", e.namespace, e.name)
    };
    let state = if e.in_sync { "in sync" } else { "OUT OF SYNC" };
    let _ = writeln!(out, "{indent}{} {name}: {state}; next: {}", e.kind, e.next);
    for d in &e.differences {
        let _ = writeln!(
            out,
            "{indent}  {}: stored {} -> kcm writes {}",
            d.field,
            value(&d.stored),
            value(&d.desired)
        );
    }
}

fn quota(out: &mut String, r: &QuotaReasons) {
    if !r.scopes.is_empty() {
        let _ = writeln!(out, "scopes: {}", r.scopes.join("; "));
    }
    for resource in &r.resources {
        let _ = writeln!(
            out,
            "{}: used {} of {}",
            resource.resource, resource.used, resource.hard
        );
        if let Some(why) = &resource.not_computed {
            let _ = writeln!(out, "  ({why})");
        }
        for share in &resource.objects {
            let _ = writeln!(out, "  {:<40} {}", share.object, share.amount);
        }
        if resource.more > 0 {
            let _ = writeln!(out, "  … and {} more (--all lists them)", resource.more);
        }
    }
    if !r.left_out.is_empty() {
        let _ = writeln!(out, "left out:");
        for left in &r.left_out {
            let _ = writeln!(out, "  {:<40} {}", left.object, left.why);
        }
    }
    problems(out, &r.problems, "");
}

fn problems(out: &mut String, problems: &[String], indent: &str) {
    for problem in problems {
        let _ = writeln!(out, "{indent}problem: {problem}");
    }
}

fn pdb(out: &mut String, r: &PdbReasons) {
    let healthy = r.pods.iter().filter(|p| p.healthy).count();
    let _ = writeln!(out, "pods: {} selected, {healthy} healthy", r.pods.len());
    for pod in &r.pods {
        let state = match &pod.why {
            None => "healthy".to_string(),
            Some(why) => why.clone(),
        };
        let _ = writeln!(out, "  {:<30} {:<24} owner {}", pod.name, state, pod.owner);
    }
    let mut from = r.expected_from.clone();
    if !r.controllers.is_empty() {
        let each: Vec<String> = r
            .controllers
            .iter()
            .map(|c| format!("{}/{} {}", c.kind, c.name, c.replicas))
            .collect();
        from = format!("{from}: {}", each.join(" + "));
    }
    let _ = writeln!(out, "expectedPods {} from {from}", r.expected_pods);
    if !r.unmanaged.is_empty() {
        let _ = writeln!(out, "  pods no controller owns: {}", r.unmanaged.join(", "));
    }
    if !r.controller_gone.is_empty() {
        let gone = r.controller_gone.join(", ");
        let _ = writeln!(
            out,
            "  terminating pods whose controller is gone, counted 0 (kubernetes#130723): {gone}"
        );
    }
    for line in &r.arithmetic {
        let _ = writeln!(out, "{line}");
    }
    if let Some(fail) = &r.fail_safe {
        let _ = writeln!(
            out,
            "fail safe (disruptionsAllowed 0): {}\n  ends when {}",
            fail.reason, fail.ends_when
        );
    }
}

fn claim(out: &mut String, r: &ClaimReasons, indent: &str) {
    let allocated = if r.allocated {
        "allocated"
    } else {
        "not allocated"
    };
    let _ = writeln!(out, "{indent}owner {}, {allocated}", r.owner);
    if r.reserved_for.is_empty() {
        let _ = writeln!(out, "{indent}reserved for nobody");
    }
    for entry in &r.reserved_for {
        let needed = if entry.still_needed {
            "keep"
        } else {
            "release"
        };
        let _ = writeln!(
            out,
            "{indent}reserved for {} {}: {needed} ({})",
            entry.kind, entry.name, entry.why
        );
    }
    if !r.used_by.is_empty() {
        let _ = writeln!(out, "{indent}named by pods: {}", r.used_by.join(", "));
    }
    problems(out, &r.problems, indent);
}

fn pod(out: &mut String, r: &PodReasons) {
    for entry in &r.claims {
        match (&entry.claim, &entry.note) {
            (Some(e), _) => {
                let _ = writeln!(out, "claim entry {}:", entry.entry);
                head(out, e, "  ");
                if let Reasons::ResourceClaim(reasons) = &e.reasons {
                    claim(out, reasons, "  ");
                }
            }
            (None, note) => {
                let note = note.clone().unwrap_or_default();
                let _ = writeln!(out, "claim entry {}: {note}", entry.entry);
            }
        }
    }
    for step in &r.steps {
        let _ = writeln!(out, "pod sync: {step}");
    }
}

fn node(out: &mut String, r: &NodeReasons) {
    let from = r.step_down_below.unwrap_or(0);
    let to = r
        .step_up_above
        .map_or("any number of".to_string(), |n| n.to_string());
    let _ = writeln!(
        out,
        "{} nodes: TTL {}s (annotation {}); this step holds from {from} to {to} nodes (the steps overlap: hysteresis)",
        r.nodes,
        r.ttl_seconds,
        r.annotation.as_deref().unwrap_or("none"),
    );
}

fn storage_version(out: &mut String, r: &StorageVersionReasons) {
    for entry in &r.entries {
        let alive = if entry.alive { "alive" } else { "dead" };
        let _ = writeln!(
            out,
            "{} (encoding {}): {alive}: {}",
            entry.api_server_id, entry.encoding_version, entry.why
        );
    }
}
