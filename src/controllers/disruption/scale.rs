//! `getExpectedScale`: how many pods the controllers of a PDB's pods want. Built-in workloads
//! come from the shared stores; any other controller kind through its `/scale` subresource,
//! found by discovery — upstream's finders, in upstream's order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::{Client, Resource, ResourceExt};

use crate::k8s::golang::go_quote;
use crate::k8s::view::{OwnerRef, Pod};
use crate::lock::lock;
use crate::runtime::watching::informer::Store;
use crate::runtime::watching::stored::{controller_of, split_key as split_api_version};
use crate::runtime::writing::writer::is_not_found;

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

/// A controller found for a pod: its UID (the key that de-duplicates) and desired replicas.
type Found = Option<(String, i32)>;

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

    /// The summed scale of the pods' distinct controllers, and the names of pods that have no
    /// controller. An error when a controller cannot be resolved.
    pub async fn expected_scale(&self, pods: &[&Pod]) -> Result<(i32, Vec<String>), ScaleError> {
        let mut scales: HashMap<String, i32> = HashMap::new();
        let mut unmanaged = Vec::new();
        for pod in pods {
            let Some(owner) = pod.controller() else {
                unmanaged.push(pod.name_any());
                continue;
            };
            if scales.contains_key(&owner.uid) {
                continue;
            }
            let ns = pod.namespace().unwrap_or_default();
            let found = match self.find_in_stores(owner, &ns) {
                Some(found) => Some(found),
                None => self.find_by_scale_subresource(owner, &ns).await?,
            };
            let Some((uid, scale)) = found else {
                return Err(ScaleError::NoController {
                    pod: pod.name_any(),
                });
            };
            scales.insert(uid, scale);
        }
        Ok((scales.values().sum(), unmanaged))
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
                    (
                        owner.uid.clone(),
                        rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                    )
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
                        (dep.uid()? == dep_ref.uid)
                            .then(|| (dep_ref.uid.clone(), dep.spec.replicas.unwrap_or(1)))
                    }
                    _ => Some((owner.uid.clone(), rs.spec.replicas.unwrap_or(1))),
                }
            }
            "StatefulSet" if group == "apps" => {
                let sts = self.statefulsets.get(ns, &owner.name)?;
                (sts.uid()? == owner.uid)
                    .then(|| (owner.uid.clone(), sts.spec.replicas.unwrap_or(1)))
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
            Ok(scale) if scale.metadata.uid.as_deref() == Some(owner.uid.as_str()) => Ok(Some((
                owner.uid.clone(),
                scale.spec.and_then(|s| s.replicas).unwrap_or(0),
            ))),
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
