//! RBAC fixtures: upstream's bootstrap roles (tests/data) and deploy/'s roles as
//! `kubectl kustomize` collects them, loaded into kube-testserver.

use std::path::Path;

use k8s_openapi::api::rbac::v1::PolicyRule;
use kube_testserver::TestServer;
use serde::Deserialize;
use serde_json::Value;

use crate::repo_path;

pub const BOOTSTRAP: &str = "tests/data/bootstrap-rbac-v1.36.2.yaml";

/// The documents of a (multi-document) YAML file, empty ones left out.
pub fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| {
            Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()))
        })
        .filter(|v| !v.is_null())
        .collect()
}

/// Upstream's bootstrap roles and bindings of v1.36.2.
pub fn bootstrap() -> Vec<Value> {
    yaml_documents(&repo_path(BOOTSTRAP))
}

/// The objects `kubectl kustomize <dir>` builds from the kustomization's `resources`
/// (files and directories with their own kustomization), patches and images left out.
pub fn kustomize(dir: &Path) -> Vec<Value> {
    let kustomization = yaml_documents(&dir.join("kustomization.yaml"));
    let resources = kustomization[0]["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    resources
        .iter()
        .filter_map(Value::as_str)
        .flat_map(|resource| {
            let path = dir.join(resource);
            if path.is_dir() {
                kustomize(&path)
            } else {
                yaml_documents(&path)
            }
        })
        .collect()
}

/// The roles and bindings among `objects`.
pub fn rbac_objects(objects: Vec<Value>) -> Vec<Value> {
    objects
        .into_iter()
        .filter(|o| o["apiVersion"] == "rbac.authorization.k8s.io/v1")
        .collect()
}

/// The rules of the ClusterRole (or Role) named `name` among `objects`.
pub fn role_rules(objects: &[Value], kind: &str, name: &str) -> Vec<PolicyRule> {
    let role = objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"));
    serde_json::from_value(role["rules"].clone()).unwrap()
}

/// Stores `objects` in the server as they are.
pub fn load(server: &TestServer, objects: &[Value]) {
    for object in objects {
        server
            .seed(object.clone())
            .unwrap_or_else(|e| panic!("{}: {e:?}", object["metadata"]["name"]));
    }
}
