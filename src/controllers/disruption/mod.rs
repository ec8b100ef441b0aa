//! disruption-controller: keeps `PodDisruptionBudget.status` equal to what upstream computes,
//! and falls back to `disruptionsAllowed: 0` (condition `SyncFailed`) whenever it cannot be
//! sure. Three lanes, as upstream: PDB syncs (`disruption`), rechecks when a disrupted-pod
//! entry expires (`disruption_recheck`), and stale DisruptionTarget pod conditions
//! (`stale_pod_disruption`). The decisions are in `budget.rs`, the sync's plan in `plan.rs`;
//! this file declares the controller, fetches, and performs the plan.
//!
//! Beyond upstream: a change of a workload's `spec.replicas` re-syncs the PDBs of its
//! namespace, so `expectedPods` follows a scale-up even before new pods appear.

pub mod budget;
mod error;
mod messages;
mod plan;
mod scale;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod as FullPod, ReplicationController};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use self::budget::{
    cleared_disruption_target, fail_safe_status, needs_controller_scale, stale_disruption_wait,
};
pub use self::error::DisruptionError;
use self::plan::{plan_budget, pod_selector};
use self::scale::ScaleFinder;
use super::{Context, ControllerError, Descriptor};
use crate::cli::Controller;
use crate::runtime::controller::ControllerBuilder;
use crate::runtime::events::EventRecorder;
use crate::runtime::informer::{Change, Informer};
use crate::runtime::mutation::{MUTATION_TTL, MutationCache};
use crate::runtime::queue::WorkQueue;
use crate::runtime::rbac::{EVENTS, READ_VERBS, Rule, informs};
use crate::runtime::selector;
use crate::runtime::stored::{Stored, key_of, split_key};
use crate::runtime::view::{Pod, WatchedPod};
use crate::runtime::writer::ApiWriter;

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
    fn now(&self) -> Time {
        Time((self.ctx.clock)())
    }

    /// PDBs in the pod's namespace whose selector matches it, sorted by name so the choice
    /// among several is stable (upstream takes the first in lister order, i.e. arbitrary).
    fn pdbs_for(&self, pod: &Pod) -> Vec<Arc<PodDisruptionBudget>> {
        let labels = &pod.labels;
        let mut pdbs: Vec<_> = self
            .pdbs
            .in_namespace(&pod.namespace().unwrap_or_default())
            .into_iter()
            .filter(|pdb| {
                selector::matches(pdb.spec.as_ref().and_then(|s| s.selector.as_ref()), labels)
            })
            .collect();
        pdbs.sort_by_key(|p| p.name_any());
        pdbs
    }

    /// Upstream's pod handlers: the (first) PDB of the pod, a warning when several match, and
    /// the stale DisruptionTarget check on add/update.
    fn on_pod(&self, change: Change<Pod>, queue: &WorkQueue<String>) {
        let (pod, check_stale) = match change {
            Change::Added(pod) | Change::Updated { new: pod, .. } => (pod, true),
            Change::Deleted(pod) => (pod, false),
            Change::Synced => return,
        };
        let pdbs = self.pdbs_for(&pod);
        if let Some(first) = pdbs.first() {
            queue.add(key_of(first.as_ref()));
            if pdbs.len() > 1 && check_stale {
                let note = messages::multiple_pdbs(
                    &pod.namespace().unwrap_or_default(),
                    &pod.name_any(),
                    &first.name_any(),
                );
                self.event(pod.object_ref(), true, "MultiplePodDisruptionBudgets", note);
            }
        }
        if check_stale && let Some(wait) = stale_disruption_wait(&pod, &self.now()) {
            self.stale.add_after(key_of(pod.as_ref()), wait);
        }
    }

    /// Events never block or fail a sync.
    fn event(
        &self,
        regarding: k8s_openapi::api::core::v1::ObjectReference,
        warning: bool,
        reason: &'static str,
        note: String,
    ) {
        self.recorder
            .spawn(regarding, warning, reason, note, "Sync");
    }

    /// `sync`: the PDB's status, or the fail-safe status when that cannot be computed.
    async fn sync(&self, pdb_key: String) -> Result<(), ControllerError> {
        let Some(pdb) = self.written.newest_by_key(self.pdbs.store(), &pdb_key) else {
            return Ok(());
        };
        match self.try_sync(&pdb).await {
            Ok(recheck) => {
                if let Some(after) = recheck {
                    self.recheck.add_after(pdb_key, after);
                }
                Ok(())
            }
            // A conflict is retried as is; anything else first writes the fail-safe status.
            Err(err) if err.is_conflict() => Err(err.into()),
            Err(err) => {
                tracing::warn!(pdb = pdb_key, error = %err, "Failed to sync PDB");
                self.fail_safe(&pdb, &err.to_string()).await?;
                Err(err.into())
            }
        }
    }

    async fn fail_safe(
        &self,
        pdb: &PodDisruptionBudget,
        message: &str,
    ) -> Result<(), DisruptionError> {
        let Some(status) = fail_safe_status(pdb, message, &self.now()) else {
            return Ok(());
        };
        self.write_status(pdb, status)
            .await
            .map_err(DisruptionError::FailSafe)
    }

    /// Replaces the PDB's status, remembering the write until the watch delivers it.
    async fn write_status(
        &self,
        pdb: &PodDisruptionBudget,
        status: PodDisruptionBudgetStatus,
    ) -> kube::Result<()> {
        let mut desired = pdb.clone();
        desired.status = Some(status);
        let api: Api<PodDisruptionBudget> = Api::namespaced(
            self.ctx.client.clone(),
            &pdb.namespace().unwrap_or_default(),
        );
        let written = self.writer.replace_status(&api, pdb, &desired).await?;
        self.written.mutated(written, Instant::now());
        Ok(())
    }

    /// `trySync`: fetches the PDB's pods and their controllers' scale, and performs the
    /// plan; returns how long until the PDB must be looked at again, if ever.
    async fn try_sync(
        &self,
        pdb: &PodDisruptionBudget,
    ) -> Result<Option<Duration>, DisruptionError> {
        let plan = match pod_selector(pdb) {
            Err(failed) => *failed,
            Ok(selector) => {
                let pdb_ns = pdb.namespace().unwrap_or_default();
                let pods = self.pods_of(&pdb_ns).await?;
                let pods: Vec<&Pod> = pods
                    .iter()
                    .map(|p| p.as_ref())
                    .filter(|p| selector.matches(&p.labels))
                    .collect();
                let spec = pdb.spec.clone().unwrap_or_default();
                let scale = if needs_controller_scale(&spec) {
                    Some(self.scales.expected_scale(&pods).await)
                } else {
                    None
                };
                plan_budget(pdb, &pods, scale, &self.now())
            }
        };
        for event in plan.events {
            self.event(event.regarding, event.warning, event.reason, event.note);
        }
        if let Some(status) = plan.status? {
            self.write_status(pdb, status)
                .await
                .map_err(DisruptionError::WriteStatus)?;
        }
        Ok(plan.recheck)
    }

    /// The pods of a namespace: from the shared store, or — beyond upstream — from the API
    /// server while the store's list/watch is failing, since a store that is behind could
    /// count pods as healthy that are not any more, and allow too many disruptions.
    async fn pods_of(&self, namespace: &str) -> Result<Vec<Arc<Pod>>, DisruptionError> {
        if !self.pods.is_failing() {
            return Ok(self.pods.in_namespace(namespace));
        }
        let api: Api<WatchedPod> = Api::namespaced(self.ctx.client.clone(), namespace);
        let list = api
            .list(&kube::api::ListParams::default())
            .await
            .map_err(DisruptionError::ListPods)?;
        Ok(list
            .items
            .into_iter()
            .map(|pod| Arc::new(pod.into()))
            .collect())
    }

    /// Resets a DisruptionTarget condition that nobody acted on within two minutes.
    async fn clear_stale_condition(&self, pod_key: String) -> Result<(), DisruptionError> {
        let (ns, name) = split_key(&pod_key);
        let Some(pod) = self.pods.store().get(ns, name) else {
            return Ok(());
        };
        let now = self.now();
        match stale_disruption_wait(&pod, &now) {
            None => return Ok(()),
            Some(wait) if !wait.is_zero() => {
                self.stale.add_after(pod_key, wait);
                return Ok(());
            }
            Some(_) => {}
        }
        let failed = |source| DisruptionError::ClearCondition {
            pod: pod_key.clone(),
            source,
        };
        // The store holds a view, and the update writes the whole status: the full pod is
        // read first, by listing its one name (the pods RBAC allows list, not get, as
        // upstream's role). A pod that changed meanwhile is left to its next event.
        let api: Api<FullPod> = Api::namespaced(
            self.ctx.client.clone(),
            &pod.namespace().unwrap_or_default(),
        );
        let by_name = ListParams::default().fields(&format!("metadata.name={}", pod.name_any()));
        let listed = api.list(&by_name).await.map_err(failed)?;
        let Some(live) = listed.items.into_iter().next() else {
            return Ok(());
        };
        if stale_disruption_wait(&(&live).into(), &now) != Some(Duration::ZERO) {
            return Ok(());
        }
        let mut desired = live.clone();
        desired.status = Some(cleared_disruption_target(&live, &now));
        self.writer
            .replace_status(&api, &live, &desired)
            .await
            .map(|_| ())
            .map_err(failed)
    }

    /// Beyond upstream: a workload's replica count changed, so the PDBs of its namespace are
    /// re-synced; upstream only notices through later pod events.
    fn on_workload<K: Stored>(
        &self,
        change: &Change<K>,
        replicas: fn(&K) -> Option<i32>,
        queue: &WorkQueue<String>,
    ) {
        let Change::Updated { old, new } = change else {
            return;
        };
        if replicas(old) == replicas(new) {
            return;
        }
        for pdb in self.pdbs.in_namespace(new.place().0) {
            queue.add(key_of(pdb.as_ref()));
        }
    }
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
    let d = disruption.clone();
    controller
        .lane(&queue, workers, move |pdb_key: String| {
            let d = d.clone();
            async move { d.sync(pdb_key).await }
        })
        // Upstream's recheck worker hands each due PDB to the main queue, rate limited.
        .relay(&recheck, &queue)
        .lane(&stale, 1, move |pod_key: String| {
            let d = disruption.clone();
            async move { d.clear_stale_condition(pod_key).await }
        });
    Ok(controller.run().await?)
}
