//! disruption-controller: keeps `PodDisruptionBudget.status` equal to what upstream computes,
//! and falls back to `disruptionsAllowed: 0` (condition `SyncFailed`) whenever it cannot be
//! sure. Three lanes, as upstream: PDB syncs (`disruption`), rechecks when a disrupted-pod
//! entry expires (`disruption_recheck`), and stale DisruptionTarget pod conditions
//! (`stale_pod_disruption`). The decisions are in `plan.rs` (the status arithmetic in
//! `plan/budget.rs`); `sync.rs` fetches and performs the plan and clears stale
//! DisruptionTarget conditions, `handlers.rs` turns watch events into work items, `scale.rs`
//! finds the pods' controllers' scale; this file declares the controller.
//!
//! Beyond upstream: a change of a workload's `spec.replicas` re-syncs the PDBs of its
//! namespace, so `expectedPods` follows a scale-up even before new pods appear.

mod error;
mod handlers;
mod messages;
pub mod plan;
pub mod scale;
mod sync;

use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;

pub use self::error::DisruptionError;
use self::scale::ScaleFinder;
use super::{Context, ControllerError, Descriptor};
use crate::controllers::Controller;
use crate::k8s::view::Pod;
use crate::runtime::controller::ControllerBuilder;
use crate::runtime::queue::WorkQueue;
use crate::runtime::rbac::{EVENTS, READ_VERBS, Rule, informs};
use crate::runtime::watching::informer::{Change, Informer};
use crate::runtime::watching::stored::{Stored, key_of};
use crate::runtime::writing::events::EventRecorder;
use crate::runtime::writing::mutation::{MUTATION_TTL, MutationCache};
use crate::runtime::writing::writer::ApiWriter;

const CONTROLLER: &str = "disruption-controller";
/// Upstream's event source for this controller.
const REPORTER: &str = "controllermanager";
const QUEUE: &str = "disruption";
const RECHECK_QUEUE: &str = "disruption_recheck";
const STALE_POD_QUEUE: &str = "stale_pod_disruption";

pub const DESCRIPTOR: Descriptor = Descriptor {
    controller: Controller::Disruption,
    name: CONTROLLER,
    aliases: &["disruption"],
    required_gates: &[],
    client: CONTROLLER,
    rbac: &[
        Rule::new(&["extensions", "apps"], &["deployments"], READ_VERBS),
        Rule::new(&["apps", "extensions"], &["replicasets"], READ_VERBS),
        Rule::new(&[""], &["replicationcontrollers"], READ_VERBS),
        Rule::new(&["policy"], &["poddisruptionbudgets"], READ_VERBS),
        Rule::new(&["apps"], &["statefulsets"], READ_VERBS),
        Rule::new(&["policy"], &["poddisruptionbudgets/status"], &["update"]),
        Rule::new(&[""], &["pods/status"], &["patch", "update"]),
        Rule::new(&["*"], &["*/scale"], &["get"]),
        EVENTS,
    ],
    informs: &[
        informs(&[""], &["pods", "replicationcontrollers"]),
        informs(&["policy"], &["poddisruptionbudgets"]),
        informs(&["apps"], &["replicasets", "deployments", "statefulsets"]),
    ],
    api: Some(("policy", "v1")),
    gated: &[],
    warm: |informers, _| {
        informers.get::<Pod>();
        informers.get::<PodDisruptionBudget>();
        informers.get::<ReplicationController>();
        informers.get::<ReplicaSet>();
        informers.get::<Deployment>();
        informers.get::<StatefulSet>();
    },
    run: |ctx| run(ctx).boxed(),
};

#[derive(Clone)]
struct Disruption {
    pods: Arc<Informer<Pod>>,
    pdbs: Arc<Informer<PodDisruptionBudget>>,
    scales: ScaleFinder,
    writer: ApiWriter,
    /// The status writes the PDB watch has not delivered yet, so a sync right after a write
    /// compares against it rather than the older stored status (which a change undoing the
    /// one just written would match, leaving the write undone; upstream waits for a resync).
    written: Arc<MutationCache<PodDisruptionBudget>>,
    recorder: EventRecorder,
    ctx: Context,
    recheck: WorkQueue<String>,
    stale: WorkQueue<String>,
}

impl Disruption {
    /// The controller over the shared stores; `recheck` and `stale` are its other lanes.
    fn new(ctx: &Context, recheck: &WorkQueue<String>, stale: &WorkQueue<String>) -> Self {
        let informers = &ctx.informers;
        Disruption {
            pods: informers.get::<Pod>(),
            pdbs: informers.get::<PodDisruptionBudget>(),
            scales: ScaleFinder::new(
                ctx.client.clone(),
                informers.get::<ReplicationController>().store().clone(),
                informers.get::<ReplicaSet>().store().clone(),
                informers.get::<Deployment>().store().clone(),
                informers.get::<StatefulSet>().store().clone(),
            ),
            writer: ctx.writer(CONTROLLER),
            written: Arc::new(MutationCache::new(MUTATION_TTL)),
            recorder: ctx.recorder(REPORTER, CONTROLLER),
            ctx: ctx.clone(),
            recheck: recheck.clone(),
            stale: stale.clone(),
        }
    }
}

/// Watches a workload type whose `replicas` change re-syncs its namespace's PDBs.
fn watch_replicas<K: Stored>(
    controller: &mut ControllerBuilder,
    queue: &WorkQueue<String>,
    disruption: &Disruption,
    replicas: fn(&K) -> Option<i32>,
) {
    let d = disruption.clone();
    controller.watch(queue, move |change: Change<K>, q| {
        d.on_workload(&change, replicas, q)
    });
}

async fn run(ctx: Context) -> Result<(), ControllerError> {
    let queue = WorkQueue::new(QUEUE, &ctx.metrics.workqueue);
    let recheck: WorkQueue<String> = WorkQueue::new(RECHECK_QUEUE, &ctx.metrics.workqueue);
    let stale: WorkQueue<String> = WorkQueue::new(STALE_POD_QUEUE, &ctx.metrics.workqueue);
    let disruption = Disruption::new(&ctx, &recheck, &stale);

    let written = disruption.written.clone();
    let workers = ctx.settings.concurrent_disruption_syncs.get() as usize;
    let d = disruption.clone();
    let mut controller = ctx.controller();
    // Every cache first, as upstream's WaitForNamedCacheSync.
    controller
        .watch(
            &queue,
            move |change: Change<PodDisruptionBudget>, q| match change {
                // Beyond upstream, which syncs again on the echo of its own status write and
                // finds nothing to change: the sync that wrote it saw the same PDB, and pod
                // changes since queue it themselves.
                Change::Updated { new, .. } if written.echoed(&new) => {}
                Change::Added(p) | Change::Updated { new: p, .. } => q.add(key_of(p.as_ref())),
                Change::Deleted(p) => {
                    written.forget(&p.namespace().unwrap_or_default(), &p.name_any());
                    q.add(key_of(p.as_ref()))
                }
                Change::Synced => {}
            },
        )
        .watch(&queue, move |change, q| d.on_pod(change, q));
    watch_replicas::<ReplicationController>(&mut controller, &queue, &disruption, |o| {
        o.spec.as_ref().and_then(|s| s.replicas)
    });
    watch_replicas::<ReplicaSet>(&mut controller, &queue, &disruption, |o| o.spec.replicas);
    watch_replicas::<Deployment>(&mut controller, &queue, &disruption, |o| o.spec.replicas);
    watch_replicas::<StatefulSet>(&mut controller, &queue, &disruption, |o| o.spec.replicas);
    // Each item takes one reference, not a copy of the controller's two dozen handles.
    let shared = Arc::new(disruption);
    let d = shared.clone();
    controller
        .lane(&queue, workers, move |pdb_key: String| {
            let d = d.clone();
            async move { d.sync(pdb_key).await }
        })
        // Upstream's recheck worker hands each due PDB to the main queue, rate limited.
        .relay(&recheck, &queue)
        .lane(&stale, 1, move |pod_key: String| {
            let d = shared.clone();
            async move { d.clear_stale_condition(pod_key).await }
        });
    Ok(controller.run().await?)
}
