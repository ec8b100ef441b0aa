//! storageversion-garbage-collector-controller: removes StorageVersion entries of API servers
//! whose identity Lease is gone, recomputing the common encoding version, or deletes the
//! StorageVersion when no entry is left. Two independent lanes, one worker each, as upstream:
//! deleted leases, and StorageVersions that name unknown servers. The decisions are in
//! `plan.rs`, and `sync.rs` looks up the leases and writes their outcome; this file declares
//! the controller.

mod error;
pub mod plan;
mod sync;

use futures::FutureExt;
use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::Api;

pub use self::error::GcError;
use self::plan::{IDENTITY_NAMESPACE, entries, has_identity_label, is_identity_lease};
use super::{Context, ControllerError, Descriptor};
use crate::controllers::Controller;
use crate::features::FeatureGate;
use crate::runtime::queue::WorkQueue;
use crate::runtime::rbac::{READ_VERBS, Rule, informs};
use crate::runtime::watching::informer::{Change, Store};
use crate::runtime::writing::writer::ApiWriter;

const CONTROLLER: &str = "storageversion-garbage-collector-controller";
const LEASE_QUEUE: &str = "storage_version_garbage_collector_leases";
const STORAGE_VERSION_QUEUE: &str = "storage_version_garbage_collector_storageversions";

pub const DESCRIPTOR: Descriptor = Descriptor {
    controller: Controller::StorageVersionGc,
    name: CONTROLLER,
    aliases: &["storage-version-gc"],
    required_gates: &[
        FeatureGate::ApiServerIdentity,
        FeatureGate::StorageVersionApi,
    ],
    client: "storage-version-garbage-collector",
    rbac: &[
        Rule::new(&["coordination.k8s.io"], &["leases"], READ_VERBS),
        Rule::new(
            &["internal.apiserver.k8s.io"],
            &["storageversions"],
            &["get", "list", "watch", "patch", "update", "delete"],
        ),
        Rule::new(
            &["internal.apiserver.k8s.io"],
            &["storageversions/status"],
            &["get", "patch", "update"],
        ),
    ],
    informs: &[
        informs(&["coordination.k8s.io"], &["leases"]),
        informs(&["internal.apiserver.k8s.io"], &["storageversions"]),
    ],
    api: Some(("internal.apiserver.k8s.io", "v1alpha1")),
    gated: &[],
    warm: |informers, _| {
        informers.get::<Lease>();
        informers.get::<StorageVersion>();
    },
    run: |ctx| run(ctx).boxed(),
};

#[derive(Clone)]
struct Gc {
    leases: Api<Lease>,
    storage_versions: Api<StorageVersion>,
    writer: ApiWriter,
}

/// Whether any entry names a server with no identity lease in the store (upstream's
/// StorageVersion add/update handler, which reads the lister).
fn names_unknown_server(sv: &StorageVersion, leases: &Store<Lease>) -> bool {
    entries(sv).iter().any(|entry| {
        !leases
            .get(IDENTITY_NAMESPACE, &entry.api_server_id)
            .is_some_and(|lease| has_identity_label(&lease))
    })
}

async fn run(ctx: Context) -> Result<(), ControllerError> {
    let gc = Gc {
        leases: Api::namespaced(ctx.client.clone(), IDENTITY_NAMESPACE),
        storage_versions: Api::all(ctx.client.clone()),
        writer: ctx.writer(CONTROLLER),
    };
    let lease_queue = WorkQueue::new(LEASE_QUEUE, &ctx.metrics.workqueue);
    let sv_queue = WorkQueue::new(STORAGE_VERSION_QUEUE, &ctx.metrics.workqueue);
    let lease_store = ctx.informers.get::<Lease>().store().clone();
    let lease_gc = gc.clone();
    // Both caches first, as upstream's WaitForNamedCacheSync.
    let mut controller = ctx.controller();
    controller
        .watch(&lease_queue, |change: Change<Lease>, queue| {
            if let Change::Deleted(lease) = change
                && is_identity_lease(&lease)
            {
                queue.add(lease.name_any());
            }
        })
        .watch(&sv_queue, move |change: Change<StorageVersion>, queue| {
            if let Change::Added(sv) | Change::Updated { new: sv, .. } = change
                && names_unknown_server(&sv, &lease_store)
            {
                queue.add(sv.name_any());
            }
        })
        .lane(&lease_queue, 1, move |name: String| {
            let gc = lease_gc.clone();
            async move { gc.lease_deleted(name).await }
        })
        .lane(&sv_queue, 1, move |name: String| {
            let gc = gc.clone();
            async move { gc.storage_version_changed(name).await }
        });
    tracing::debug!("Starting storage version garbage collector");
    let ran = controller.run().await;
    tracing::debug!("Shutting down storage version garbage collector");
    Ok(ran?)
}
