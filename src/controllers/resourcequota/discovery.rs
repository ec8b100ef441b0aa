//! Which resources a quota can count (`count/<resource>[.<group>]`), from discovery, and which
//! of them quotas actually reference — kcm watches a type only while some quota counts it.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResource, APIResourceList};
use kube::api::ApiResource;
use kube::core::discovery::v2::{APIGroupDiscovery, APIGroupDiscoveryList};

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

/// The resource lists upstream's `ServerPreferredResources` makes of an aggregated discovery
/// document: in each group, every resource of the preferred (first) version, and the
/// resources only older versions serve, from the first version that does. A stale version
/// (its aggregated API server unreachable) is left out, as a group whose discovery failed.
pub fn preferred_lists(discovery: &APIGroupDiscoveryList) -> Vec<APIResourceList> {
    discovery.items.iter().flat_map(group_lists).collect()
}

fn group_lists(group: &APIGroupDiscovery) -> Vec<APIResourceList> {
    let name = group
        .metadata
        .as_ref()
        .and_then(|m| m.name.as_deref())
        .unwrap_or_default();
    let mut chosen = BTreeSet::new();
    let mut lists = Vec::new();
    let current = group
        .versions
        .iter()
        .filter(|v| v.freshness.as_deref() != Some("Stale"));
    for version in current {
        let version_name = version.version.as_deref().unwrap_or_default();
        let resources: Vec<APIResource> = version
            .resources
            .iter()
            .filter(|r| {
                r.resource
                    .as_deref()
                    .is_some_and(|n| chosen.insert(n.to_string()))
            })
            .map(|r| APIResource {
                name: r.resource.clone().unwrap_or_default(),
                singular_name: r.singular_resource.clone().unwrap_or_default(),
                namespaced: r.scope.as_deref() == Some("Namespaced"),
                kind: r
                    .response_kind
                    .as_ref()
                    .and_then(|k| k.kind.clone())
                    .unwrap_or_default(),
                verbs: r.verbs.clone(),
                short_names: Some(r.short_names.clone()),
                categories: Some(r.categories.clone()),
                ..APIResource::default()
            })
            .collect();
        lists.push(APIResourceList {
            group_version: if name.is_empty() {
                version_name.to_string()
            } else {
                format!("{name}/{version_name}")
            },
            resources,
        });
    }
    lists
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

    /// A version in a test document: (version, freshness, [(resource, scope)]).
    type Version<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

    /// An aggregated document as the API server writes it: each group with its versions,
    /// preferred version first.
    fn aggregated(groups: &[(&str, &[Version])]) -> APIGroupDiscoveryList {
        let items: Vec<serde_json::Value> = groups
            .iter()
            .map(|(group, versions)| {
                let versions: Vec<serde_json::Value> = versions
                    .iter()
                    .map(|(version, freshness, resources)| {
                        let resources: Vec<serde_json::Value> = resources
                            .iter()
                            .map(|(resource, scope)| json!({
                                "resource": resource,
                                "responseKind": { "group": "", "version": "", "kind": "K" },
                                "scope": scope,
                                "singularResource": "",
                                "verbs": ALL,
                                "subresources": [{ "subresource": "status", "verbs": ["get"] }],
                            }))
                            .collect();
                        json!({ "version": version, "freshness": freshness, "resources": resources })
                    })
                    .collect();
                json!({ "metadata": { "name": group }, "versions": versions })
            })
            .collect();
        serde_json::from_value(json!({
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "items": items,
        }))
        .unwrap()
    }

    fn count_names(lists: &[APIResourceList]) -> Vec<(String, String)> {
        lists
            .iter()
            .flat_map(|l| {
                quotable(l)
                    .into_iter()
                    .map(|q| (q.count_name, q.api_resource.api_version))
            })
            .collect()
    }

    #[test]
    fn aggregated_discovery_gives_upstreams_preferred_resources() {
        let doc = aggregated(&[
            (
                "",
                &[(
                    "v1",
                    "Current",
                    &[("pods", "Namespaced"), ("nodes", "Cluster")],
                )],
            ),
            (
                "example.com",
                &[
                    ("v2", "Current", &[("widgets", "Namespaced")]),
                    // Only v1 serves gadgets; widgets come from the preferred v2.
                    (
                        "v1",
                        "Current",
                        &[("widgets", "Namespaced"), ("gadgets", "Namespaced")],
                    ),
                ],
            ),
            (
                "down.example.com",
                &[("v1", "Stale", &[("things", "Namespaced")])],
            ),
            (
                "partly.example.com",
                &[
                    ("v2", "Stale", &[("parts", "Namespaced")]),
                    ("v1", "Current", &[("parts", "Namespaced")]),
                ],
            ),
        ]);
        assert_eq!(
            count_names(&preferred_lists(&doc)),
            [
                ("pods", "v1"),
                ("widgets.example.com", "example.com/v2"),
                ("gadgets.example.com", "example.com/v1"),
                ("parts.partly.example.com", "partly.example.com/v1"),
            ]
            .map(|(n, v)| (n.to_string(), v.to_string()))
        );
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
