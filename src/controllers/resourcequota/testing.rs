//! Helpers of the usage evaluators' unit tests.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ScopeSelector, ScopedResourceSelectorRequirement};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use super::scope::{QuotaScope, parse_scope};
use super::usage::ResourceList;
use crate::k8s::view::Pod;

pub(super) fn from<T: k8s_openapi::serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid test object")
}

pub(super) fn now() -> Time {
    Time("2026-01-01T00:00:00Z".parse().expect("timestamp"))
}

pub(super) fn strings(list: &ResourceList) -> BTreeMap<String, String> {
    list.iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect()
}

/// Expected usage as (name, canonical string) pairs.
pub(super) type Pairs<'a> = Vec<(&'a str, &'a str)>;

pub(super) fn want(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(super) fn container(name: &str, requests: Value, limits: Value) -> Value {
    json!({"name": name, "resources": {"requests": requests, "limits": limits}})
}

pub(super) fn pod(spec: Value) -> Pod {
    from(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}))
}

pub(super) fn selector(
    scope: &str,
    op: &str,
    values: &[&str],
) -> ScopedResourceSelectorRequirement {
    ScopedResourceSelectorRequirement {
        scope_name: scope.to_string(),
        operator: op.to_string(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

pub(super) fn scope_of(
    scopes: &[&str],
    exprs: Vec<ScopedResourceSelectorRequirement>,
) -> QuotaScope {
    let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
    let sel = ScopeSelector {
        match_expressions: Some(exprs),
    };
    parse_scope(&scopes, Some(&sel))
}
