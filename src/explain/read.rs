//! `kcm explain` from the command line: the connection (kubectl's `--kubeconfig` and
//! `--context`, else `KUBECONFIG`, `~/.kube/config` or in-cluster), and the objects one answer
//! needs, read once with LIST (no watch, no write) into informers that never watch.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, ReplicationController, ResourceQuota, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use kube::api::{ListParams, ObjectList};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, Resource};

use super::{ExplainError, Kind, Request};
use crate::controllers::storageversiongc::plan::IDENTITY_NAMESPACE;
use crate::features::{FeatureGate, FeatureGates};
use crate::k8s::podgroup::PodGroup;
use crate::k8s::view::Pod;
use crate::runtime::connection::errors::{is_not_found, is_transient};
use crate::runtime::metrics::Metrics;
use crate::runtime::watching::informer::Informers;
use crate::runtime::watching::stored::{NodeMeta, Stored};

/// The cluster configuration as kubectl finds it: `kubeconfig` (else `KUBECONFIG` or
/// `~/.kube/config`) at `context` (else its current one); with neither flag and no file,
/// the in-cluster configuration.
pub async fn config(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Config, ExplainError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let config = match kubeconfig {
        Some(path) => match Kubeconfig::read_from(path) {
            Ok(file) => Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| e.to_string()),
            Err(err) => Err(format!("{}: {err}", path.display())),
        },
        None if context.is_some() => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| e.to_string()),
        None => Config::infer().await.map_err(|e| e.to_string()),
    };
    config.map_err(ExplainError::Config)
}

/// How often a list that failed transiently is tried again, and the first wait (doubling):
/// a one-shot command waits a few seconds for a server that is busy or restarting, then
/// reports the failure rather than hang.
const LIST_ATTEMPTS: u32 = 5;
const LIST_RETRY_BASE: Duration = Duration::from_millis(250);

/// Lists `K` (in `namespace`, or everywhere) into `informers`; `false` when the cluster does
/// not serve the type. A transient failure (no answer, 429, 5xx) is retried.
async fn list<K: Stored>(
    client: &Client,
    informers: &Informers,
    namespace: Option<&str>,
) -> Result<bool, ExplainError> {
    // By its path: kube's `Api` is namespaced only for types it knows to be.
    let url = K::Watched::url_path(&(), namespace);
    let mut attempt = 1;
    let listed = loop {
        let listed = match kube::core::Request::new(url.clone()).list(&ListParams::default()) {
            Ok(request) => client.request::<ObjectList<K::Watched>>(request).await,
            Err(err) => Err(kube::Error::BuildRequest(err)),
        };
        match listed {
            Err(err) if is_transient(&err) && attempt < LIST_ATTEMPTS => {
                tokio::time::sleep(LIST_RETRY_BASE * 2u32.pow(attempt - 1)).await;
                attempt += 1;
            }
            done => break done,
        }
    };
    match listed {
        Ok(list) => {
            informers.insert_listed::<K>(list.items);
            Ok(true)
        }
        Err(err) if is_not_found(&err) => Ok(false),
        Err(source) => Err(ExplainError::Read {
            what: K::Watched::plural(&()).to_string(),
            source,
        }),
    }
}

/// The objects `request` needs, read once into informers that never watch.
pub async fn load(
    client: &Client,
    request: &Request,
    gates: &FeatureGates,
) -> Result<Informers, ExplainError> {
    let informers = Informers::listed(client.clone(), Metrics::new()?);
    let i = &informers;
    let ns = Some(request.namespace.as_str());
    match request.kind {
        Kind::ResourceQuota => {
            list::<ResourceQuota>(client, i, ns).await?;
            list::<Pod>(client, i, ns).await?;
            list::<Service>(client, i, ns).await?;
            list::<PersistentVolumeClaim>(client, i, ns).await?;
            if list::<ResourceClaim>(client, i, ns).await?
                && gates.enabled(FeatureGate::DraExtendedResource)
            {
                list::<DeviceClass>(client, i, None).await?;
            }
        }
        Kind::PodDisruptionBudget => {
            list::<PodDisruptionBudget>(client, i, ns).await?;
            list::<Pod>(client, i, ns).await?;
            list::<ReplicationController>(client, i, ns).await?;
            list::<ReplicaSet>(client, i, ns).await?;
            list::<Deployment>(client, i, ns).await?;
            list::<StatefulSet>(client, i, ns).await?;
        }
        Kind::ResourceClaim | Kind::Pod => {
            if !list::<ResourceClaim>(client, i, ns).await? {
                return Err(ExplainError::NotWatched("resourceclaims"));
            }
            list::<Pod>(client, i, ns).await?;
            list::<ResourceClaimTemplate>(client, i, ns).await?;
            if gates.enabled(FeatureGate::DraWorkloadResourceClaims) {
                list::<PodGroup>(client, i, ns).await?;
            }
        }
        Kind::Node => {
            list::<NodeMeta>(client, i, None).await?;
        }
        Kind::StorageVersion => {
            if !list::<StorageVersion>(client, i, None).await? {
                return Err(ExplainError::NotWatched("storageversions"));
            }
            list::<Lease>(client, i, Some(IDENTITY_NAMESPACE)).await?;
        }
    }
    Ok(informers)
}
