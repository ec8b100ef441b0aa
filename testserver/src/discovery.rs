//! Discovery documents: the group list of `/apis`, and aggregated discovery
//! (`apidiscovery.k8s.io/v2`, GA in Kubernetes 1.30), which answers `/api` or `/apis` with every
//! group, version and resource in one document when the client's `Accept` asks for it, as
//! client-go's discovery and kcm's quota discovery do.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// The media type of an aggregated discovery answer, the real server's `Content-Type` for it.
pub const AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether `accept` lists aggregated discovery v2 (parameters in any order). The real server
/// answers with it wherever the list has it, even after plain JSON (checked on v1.36.2 in
/// `tests/real/apiserver.rs`).
pub fn aggregated_requested(accept: &str) -> bool {
    accept.split(',').any(|entry| {
        let mut parts = entry.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let params: Vec<&str> = parts.collect();
        media == "application/json"
            && ["g=apidiscovery.k8s.io", "v=v2", "as=APIGroupDiscoveryList"]
                .iter()
                .all(|p| params.contains(p))
    })
}

/// Each group's versions, highest priority first (the first is the preferred one).
fn versions_by_group(types: &[ResourceType]) -> BTreeMap<&str, Vec<&str>> {
    let mut versions: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for t in types {
        versions.entry(&t.group).or_default().push(&t.version);
    }
    for vs in versions.values_mut() {
        vs.sort_by_key(|v| version_priority(v));
        vs.dedup();
    }
    versions
}

/// `/apis` as an `APIGroupList`: one entry per group, its versions by priority (GA, beta,
/// alpha), as the real server lists them (scheduling.k8s.io: v1, and v1alpha2 when PodGroups
/// are on).
pub fn group_list(types: &[ResourceType]) -> Value {
    let groups: Vec<Value> = versions_by_group(types)
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| {
            let gvs: Vec<Value> = vs
                .iter()
                .map(|v| json!({ "groupVersion": format!("{g}/{v}"), "version": v }))
                .collect();
            json!({ "name": g, "versions": gvs.clone(), "preferredVersion": gvs[0] })
        })
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `/api` (`core`: the legacy group alone) or `/apis` (every named group) as an
/// `APIGroupDiscoveryList`.
pub fn aggregated(types: &[ResourceType], core: bool) -> Value {
    let items: Vec<Value> = versions_by_group(types)
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, vs)| {
            let versions: Vec<Value> = vs
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = types
                        .iter()
                        .filter(|t| t.group == g && t.version == *v)
                        .map(aggregated_resource)
                        .collect();
                    json!({ "version": v, "resources": resources, "freshness": "Current" })
                })
                .collect();
            // The legacy group's item has no name, as the real server writes it.
            let metadata = if g.is_empty() {
                json!({})
            } else {
                json!({ "name": g })
            };
            json!({ "metadata": metadata, "versions": versions })
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// One resource in the aggregated form, made from its legacy entries: the main one, and each
/// `<plural>/<subresource>` as a subresource.
fn aggregated_resource(t: &ResourceType) -> Value {
    let entries = t.discovery_entries();
    let kind = |e: &Value| {
        json!({
            "group": e.get("group").cloned().unwrap_or(json!("")),
            "version": e.get("version").cloned().unwrap_or(json!("")),
            "kind": e["kind"],
        })
    };
    let subresources: Vec<Value> = entries
        .iter()
        .filter_map(|e| {
            let (_, sub) = e["name"].as_str()?.split_once('/')?;
            Some(json!({ "subresource": sub, "responseKind": kind(e), "verbs": e["verbs"] }))
        })
        .collect();
    let main = &entries[0];
    let mut resource = json!({
        "resource": t.plural,
        "responseKind": kind(main),
        "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": t.singular,
        "verbs": main["verbs"],
    });
    if let Some(short) = main.get("shortNames") {
        resource["shortNames"] = short.clone();
    }
    if !subresources.is_empty() {
        resource["subresources"] = json!(subresources);
    }
    resource
}

/// A sort key putting `v2` before `v1` before `v1beta1` before `v1alpha2` (apimachinery's
/// version priority).
fn version_priority(version: &str) -> (u8, std::cmp::Reverse<u32>, std::cmp::Reverse<u32>) {
    let digits = |s: &str| s.parse::<u32>().unwrap_or(0);
    let rest = version.strip_prefix('v').unwrap_or(version);
    let major_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (major, tail) = rest.split_at(major_end);
    let (stage, minor) = if tail.is_empty() {
        (0, "")
    } else if let Some(m) = tail.strip_prefix("beta") {
        (1, m)
    } else if let Some(m) = tail.strip_prefix("alpha") {
        (2, m)
    } else {
        (3, tail)
    };
    (
        stage,
        std::cmp::Reverse(digits(major)),
        std::cmp::Reverse(digits(minor)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_is_asked_for_only_with_its_parameters() {
        let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let reordered = "application/json; as=APIGroupDiscoveryList; v=v2; g=apidiscovery.k8s.io";
        let v2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
        for (accept, aggregated) in [
            (format!("{v2},application/json"), true),
            (reordered.to_string(), true),
            (format!("application/json,{v2}"), true),
            ("application/json".to_string(), false),
            (v2beta1.to_string(), false),
        ] {
            assert_eq!(aggregated_requested(&accept), aggregated, "{accept}");
        }
    }

    #[test]
    fn versions_are_ordered_by_priority() {
        let mut vs = vec!["v1alpha2", "v1beta1", "v1", "v2"];
        vs.sort_by_key(|v| version_priority(v));
        assert_eq!(vs, ["v2", "v1", "v1beta1", "v1alpha2"]);
    }
}
