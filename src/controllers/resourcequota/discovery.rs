//! Which resources a quota can count (`count/<resource>[.<group>]`), from discovery, and which
//! of them quotas actually reference — kcm watches a type only while some quota counts it.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::api::ApiResource;

use crate::runtime::watching::stored::split_key as split_group_version;

/// Upstream's ignored resources: never quotable.
const IGNORED: &[(&str, &str)] = &[
    ("", "bindings"),
    ("", "componentstatuses"),
    ("", "events"),
    ("events.k8s.io", "events"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
];

/// The object-count names older than `count/…` that quotas still use.
const LEGACY_COUNT_NAMES: &[&str] = &[
    "configmaps",
    "resourcequotas",
    "replicationcontrollers",
    "secrets",
];

/// A namespaced resource that supports create, list, watch and delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quotable {
    /// The name after `count/`: `pods`, `widgets.example.com`.
    pub count_name: String,
    pub api_resource: ApiResource,
}

/// The quotable resources of one discovery document (upstream's
/// `GetQuotableResources`: namespaced, the four verbs, not ignored, no subresources).
pub fn quotable(list: &APIResourceList) -> Vec<Quotable> {
    let (group, version) = split_group_version(&list.group_version);
    list.resources
        .iter()
        .filter(|r| r.namespaced && !r.name.contains('/'))
        .filter(|r| {
            ["create", "list", "watch", "delete"]
                .iter()
                .all(|v| r.verbs.iter().any(|x| x == v))
        })
        .filter(|r| !IGNORED.contains(&(group, r.name.as_str())))
        .map(|r| Quotable {
            count_name: if group.is_empty() {
                r.name.clone()
            } else {
                format!("{}.{group}", r.name)
            },
            api_resource: ApiResource {
                group: group.to_string(),
                version: version.to_string(),
                api_version: list.group_version.clone(),
                kind: r.kind.clone(),
                plural: r.name.clone(),
            },
        })
        .collect()
}

/// The `count/…` resources (and legacy count names) a set of hard limits references, as the
/// names that follow `count/`.
pub fn referenced_counts<'a>(hard_names: impl Iterator<Item = &'a String>) -> BTreeSet<String> {
    hard_names
        .filter_map(|name| match name.strip_prefix("count/") {
            Some(resource) => Some(resource.to_string()),
            None => LEGACY_COUNT_NAMES
                .contains(&name.as_str())
                .then(|| name.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list(group_version: &str, resources: serde_json::Value) -> APIResourceList {
        serde_json::from_value(json!({ "groupVersion": group_version, "resources": resources }))
            .unwrap()
    }

    fn names(q: Vec<Quotable>) -> Vec<String> {
        q.into_iter().map(|q| q.count_name).collect()
    }

    const ALL: [&str; 8] = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];

    #[test]
    fn core_and_group_resources_are_named_as_quota_names_them() {
        let core = list(
            "v1",
            json!([
                { "name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod", "verbs": ALL },
                { "name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get", "patch", "update"] },
                { "name": "nodes", "singularName": "node", "namespaced": false, "kind": "Node", "verbs": ALL },
                { "name": "events", "singularName": "event", "namespaced": true, "kind": "Event", "verbs": ALL },
                { "name": "bindings", "singularName": "binding", "namespaced": true, "kind": "Binding", "verbs": ["create"] },
            ]),
        );
        assert_eq!(names(quotable(&core)), ["pods"]);
        let widgets = list(
            "example.com/v1",
            json!([
                { "name": "widgets", "singularName": "widget", "namespaced": true, "kind": "Widget", "verbs": ALL },
                { "name": "readonly", "singularName": "r", "namespaced": true, "kind": "R", "verbs": ["get", "list", "watch"] },
            ]),
        );
        let found = quotable(&widgets);
        assert_eq!(names(found.clone()), ["widgets.example.com"]);
        assert_eq!(found[0].api_resource.api_version, "example.com/v1");
        let events = list(
            "events.k8s.io/v1",
            json!([{ "name": "events", "singularName": "event", "namespaced": true, "kind": "Event", "verbs": ALL }]),
        );
        assert!(quotable(&events).is_empty(), "ignored as upstream");
    }

    #[test]
    fn referenced_counts_include_legacy_names() {
        let hard: Vec<String> = [
            "count/widgets.example.com",
            "configmaps",
            "cpu",
            "pods",
            "count/pods",
            "secrets",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let got: Vec<String> = referenced_counts(hard.iter()).into_iter().collect();
        assert_eq!(
            got,
            ["configmaps", "pods", "secrets", "widgets.example.com"]
        );
    }
}
