//! `getExpectedScale`: how many pods the controllers of a PDB's pods want. Built-in workloads
//! come from the shared stores; any other controller kind through its `/scale` subresource,
//! found by discovery — upstream's finders, in upstream's order.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::{Client, Resource, ResourceExt};

use crate::k8s::golang::go_quote;
use crate::k8s::view::{OwnerRef, Pod};
use crate::lock::lock;
use crate::runtime::connection::errors::is_not_found;
use crate::runtime::watching::informer::Store;
use crate::runtime::watching::stored::{controller_of, split_key as split_api_version};
use crate::runtime::writing::writer::UpstreamFix;

/// Groups upstream's finders accept for each built-in kind.
const APPS_GROUPS: &[&str] = &["apps", "extensions"];

/// Why the pods' controllers' scale cannot be found, in upstream's words (the text goes into
/// an event and the fail-safe condition).
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    #[error("found no controllers for pod {}", go_quote(.pod))]
    NoController { pod: String },
    #[error("no matches for kind {} in group {}", go_quote(.kind), go_quote(.group))]
    KindNotInGroup { kind: String, group: String },
    #[error("no matches for kind {} in version {}", go_quote(.kind), go_quote(.api_version))]
    KindNotInVersion { kind: String, api_version: String },
    #[error("{resource} does not implement the scale subresource")]
    NoScaleSubresource { resource: String },
    /// Reading a `/scale` failed: the API server's message, or the request's error after the
    /// group kind.
    #[error("{}", match .source {
        kube::Error::Api(status) => status.message.clone(),
        other => format!("{group_kind}: {other}"),
    })]
    GetScale {
        group_kind: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0}")]
    Discovery(#[source] kube::Error),
}

#[derive(Clone)]
pub struct ScaleFinder {
    client: Client,
    rcs: Store<ReplicationController>,
    rss: Store<ReplicaSet>,
    deployments: Store<Deployment>,
    statefulsets: Store<StatefulSet>,
    /// Discovery documents by apiVersion; refreshed when a kind is not found in them.
    discovery: Arc<Mutex<HashMap<String, APIResourceList>>>,
}

/// A controller found for a pod: its UID (the key that de-duplicates) and its scale.
type Found = Option<(String, ControllerScale)>;

/// One controller of a PDB's pods and how many pods it wants.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ControllerScale {
    pub kind: String,
    pub name: String,
    pub replicas: i32,
}

impl ControllerScale {
    fn new(kind: &str, name: &str, replicas: i32) -> Self {
        Self {
            kind: kind.to_string(),
            name: name.to_string(),
            replicas,
        }
    }
}

/// `getExpectedScale`'s answer: the pods' distinct controllers in the order their pods came,
/// and the names of the pods no controller owns or whose controller is gone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpectedScale {
    pub controllers: Vec<ControllerScale>,
    /// Pods no controller owns (upstream's `unmanagedPods`).
    pub unmanaged: Vec<String>,
    /// Terminating pods whose controller no finder found, counted with scale 0.
    pub controller_gone: Vec<String>,
}

/// kubernetes#130723: upstream fails a PDB whose terminating pod's controller is gone (a
/// rollout deleted the old ReplicaSet first), blocking evictions until the pod is gone.
pub const TERMINATING_POD_WITHOUT_CONTROLLER: UpstreamFix = UpstreamFix("kubernetes#130723");

impl ExpectedScale {
    /// The summed scale of the controllers.
    pub fn total(&self) -> i32 {
        self.controllers.iter().map(|c| c.replicas).sum()
    }

    /// A pod whose controller no finder found: upstream's `found no controllers` — but a
    /// terminating pod counts as it does while its old ReplicaSet still exists at 0 replicas
    /// (scale 0), so the budget is computed from the pods that remain (kubernetes#130723).
    fn controller_not_found(&mut self, pod: &Pod) -> Result<(), ScaleError> {
        if pod.metadata.deletion_timestamp.is_none() {
            return Err(ScaleError::NoController {
                pod: pod.name_any(),
            });
        }
        self.controller_gone.push(pod.name_any());
        Ok(())
    }

    /// The fix this scale departs from upstream for, if any.
    pub fn divergence(&self) -> Option<UpstreamFix> {
        (!self.controller_gone.is_empty()).then_some(TERMINATING_POD_WITHOUT_CONTROLLER)
    }
}

impl ScaleFinder {
    pub fn new(
        client: Client,
        rcs: Store<ReplicationController>,
        rss: Store<ReplicaSet>,
        deployments: Store<Deployment>,
        statefulsets: Store<StatefulSet>,
    ) -> Self {
        Self {
            client,
            rcs,
            rss,
            deployments,
            statefulsets,
            discovery: Arc::default(),
        }
    }

    /// The pods' distinct controllers with their scale, the pods that have no controller and
    /// the terminating ones whose controller is gone. An error when a controller cannot be
    /// resolved.
    pub async fn expected_scale(&self, pods: &[&Pod]) -> Result<ExpectedScale, ScaleError> {
        let mut seen: HashSet<String> = HashSet::new();
        let mut expected = ExpectedScale::default();
        for pod in pods {
            let Some(owner) = pod.controller() else {
                expected.unmanaged.push(pod.name_any());
                continue;
            };
            if seen.contains(&owner.uid) {
                continue;
            }
            let ns = pod.namespace().unwrap_or_default();
            let found = match self.find_in_stores(owner, &ns) {
                Some(found) => Some(found),
                None => self.find_by_scale_subresource(owner, &ns).await?,
            };
            let Some((uid, scale)) = found else {
                expected.controller_not_found(pod)?;
                continue;
            };
            // A Deployment is found through each of its ReplicaSets: counted once.
            if seen.insert(uid) {
                expected.controllers.push(scale);
            }
        }
        Ok(expected)
    }

    /// The built-in finders: ReplicationController, Deployment through its ReplicaSet,
    /// ReplicaSet, StatefulSet. Each needs the kind, the group and the UID to match.
    fn find_in_stores(&self, owner: &OwnerRef, ns: &str) -> Found {
        let (group, _) = split_api_version(&owner.api_version);
        let key = |name: &str| (name.to_string(), ns.to_string());
        match owner.kind.as_str() {
            "ReplicationController" if group.is_empty() => {
                let (name, ns) = key(&owner.name);
                let rc = self.rcs.get(&ns, &name)?;
                (rc.uid()? == owner.uid).then(|| {
                    let replicas = rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    let scale = ControllerScale::new(&owner.kind, &owner.name, replicas);
                    (owner.uid.clone(), scale)
                })
            }
            "ReplicaSet" if APPS_GROUPS.contains(&group) => {
                let rs = self.rss.get(ns, &owner.name)?;
                if rs.uid()? != owner.uid {
                    return None;
                }
                match controller_of(rs.meta()) {
                    Some(dep_ref) if dep_ref.kind == "Deployment" => {
                        if !APPS_GROUPS.contains(&split_api_version(&dep_ref.api_version).0) {
                            return None;
                        }
                        let dep = self.deployments.get(ns, &dep_ref.name)?;
                        (dep.uid()? == dep_ref.uid).then(|| {
                            let replicas = dep.spec.replicas.unwrap_or(1);
                            let scale = ControllerScale::new("Deployment", &dep_ref.name, replicas);
                            (dep_ref.uid.clone(), scale)
                        })
                    }
                    _ => Some((
                        owner.uid.clone(),
                        ControllerScale::new(
                            &owner.kind,
                            &owner.name,
                            rs.spec.replicas.unwrap_or(1),
                        ),
                    )),
                }
            }
            "StatefulSet" if group == "apps" => {
                let sts = self.statefulsets.get(ns, &owner.name)?;
                (sts.uid()? == owner.uid).then(|| {
                    let replicas = sts.spec.replicas.unwrap_or(1);
                    (
                        owner.uid.clone(),
                        ControllerScale::new(&owner.kind, &owner.name, replicas),
                    )
                })
            }
            _ => None,
        }
    }

    /// Any other controller: its `/scale` subresource, the resource found by discovery.
    async fn find_by_scale_subresource(
        &self,
        owner: &OwnerRef,
        ns: &str,
    ) -> Result<Found, ScaleError> {
        let (group, version) = split_api_version(&owner.api_version);
        let group_kind = if group.is_empty() {
            owner.kind.clone()
        } else {
            format!("{}.{group}", owner.kind)
        };
        let resources = self.resources(&owner.api_version, &owner.kind).await?;
        let Some(plural) = resources
            .resources
            .iter()
            .find(|r| r.kind == owner.kind && !r.name.contains('/'))
            .map(|r| r.name.clone())
        else {
            return Err(ScaleError::KindNotInGroup {
                kind: owner.kind.clone(),
                group: group.to_string(),
            });
        };
        let has_scale = resources
            .resources
            .iter()
            .any(|r| r.name == format!("{plural}/scale") && r.kind == "Scale");
        let resource = ApiResource {
            group: group.to_string(),
            version: version.to_string(),
            api_version: owner.api_version.clone(),
            kind: owner.kind.clone(),
            plural: plural.clone(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &resource);
        match api.get_scale(&owner.name).await {
            Ok(scale) if scale.metadata.uid.as_deref() == Some(owner.uid.as_str()) => {
                let replicas = scale.spec.and_then(|s| s.replicas).unwrap_or(0);
                let scale = ControllerScale::new(&owner.kind, &owner.name, replicas);
                Ok(Some((owner.uid.clone(), scale)))
            }
            Ok(_) => Ok(None),
            Err(err) if is_not_found(&err) => {
                let resource_name = if group.is_empty() {
                    plural
                } else {
                    format!("{plural}.{group}")
                };
                if has_scale {
                    Ok(None)
                } else {
                    Err(ScaleError::NoScaleSubresource {
                        resource: resource_name,
                    })
                }
            }
            Err(source) => Err(ScaleError::GetScale { group_kind, source }),
        }
    }

    /// The discovery document of `api_version`, fetched again when `kind` is not in the cached
    /// one (a type installed since), as upstream's REST mapper does on a miss.
    async fn resources(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<APIResourceList, ScaleError> {
        let cached = lock(&self.discovery).get(api_version).cloned();
        if let Some(list) = cached.filter(|l| l.resources.iter().any(|r| r.kind == kind)) {
            return Ok(list);
        }
        let (group, version) = split_api_version(api_version);
        let fetched = if group.is_empty() {
            self.client.list_core_api_resources(version).await
        } else {
            self.client.list_api_group_resources(api_version).await
        };
        let list = fetched.map_err(|err| match err {
            err if is_not_found(&err) => ScaleError::KindNotInVersion {
                kind: kind.to_string(),
                api_version: api_version.to_string(),
            },
            other => ScaleError::Discovery(other),
        })?;
        lock(&self.discovery).insert(api_version.to_string(), list.clone());
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(deleting: bool) -> Pod {
        let mut metadata = serde_json::json!({ "name": "web-old-1", "namespace": "ns" });
        if deleting {
            metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
        }
        let pod: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(serde_json::json!({ "metadata": metadata })).unwrap();
        Pod::from(&pod)
    }

    /// kubernetes#130723: only a terminating pod may lack its controller; it is recorded, and
    /// the scale is marked as departing from upstream, which fails on any such pod.
    #[test]
    fn only_a_terminating_pod_may_have_lost_its_controller() {
        let mut expected = ExpectedScale::default();
        let err = expected.controller_not_found(&pod(false)).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"found no controllers for pod "web-old-1""#
        );
        assert_eq!(expected.divergence(), None);
        expected.controller_not_found(&pod(true)).unwrap();
        assert_eq!(expected.controller_gone, ["web-old-1"]);
        assert_eq!(expected.total(), 0);
        assert_eq!(
            expected.divergence(),
            Some(TERMINATING_POD_WITHOUT_CONTROLLER)
        );
    }
}
