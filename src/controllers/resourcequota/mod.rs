//! resourcequota-controller: keeps `ResourceQuota.status.hard/used` equal to the real usage in
//! the namespace, as upstream computes it: the evaluators in `evaluator/`, the sync's plan in
//! `plan.rs` (from `status.rs`); this file declares the controller and writes the plan's
//! status. Two lanes, as upstream:
//! `resourcequota_priority` for quotas whose status lags their spec, `resourcequota_primary`
//! for everything else, N workers each.
//!
//! Beyond upstream: object creations also replenish (a recompute that finds the same usage
//! writes nothing), and `count/<resource>` types are watched — metadata only — only while some
//! quota counts them, instead of every quotable type always. Usage is summed incrementally
//! from each object change (`totals.rs`), so a sync does not re-evaluate the namespace's
//! objects; the periodic resync recomputes in full and counts any drift.

pub mod discovery;
mod error;
pub mod evaluator;
mod names;
pub mod plan;
pub mod scope;
pub mod status;
#[cfg(test)]
mod testing;
pub mod totals;
pub mod usage;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ApiResource};
use kube::{Client, ResourceExt};
use tokio::sync::{Notify, mpsc};

use self::discovery::{Quotable, quotable, referenced_counts};
pub use self::error::{QuotaError, UsageError};
use self::evaluator::object_count::ObjectCount;
use self::evaluator::{REGISTRY, Registered, Replenish, Snapshot};
use self::plan::{plan_sync, quota_scope, tracked};
use self::scope::QuotaScope;
use self::status::{hard_changed, needs_priority};
use super::{Context, ControllerError, Descriptor};
use crate::cli::Controller;
use crate::runtime::badinput::BadInput;
use crate::runtime::counter::{CountChange, ObjectCounter};
use crate::runtime::informer::{Change, Informer};
use crate::runtime::lock::lock;
use crate::runtime::mutation::{MUTATION_TTL, MutationCache};
use crate::runtime::queue::WorkQueue;
use crate::runtime::rbac::{EVENTS, Rule, informs};
use crate::runtime::stored::split_key;
use crate::runtime::writer::ApiWriter;

const CONTROLLER: &str = "resourcequota-controller";
const PRIMARY: &str = "resourcequota_primary";
const PRIORITY: &str = "resourcequota_priority";
/// Upstream re-discovers quotable resources this often.
const DISCOVERY_PERIOD: Duration = Duration::from_secs(30);

pub const DESCRIPTOR: Descriptor = Descriptor {
    controller: Controller::ResourceQuota,
    name: CONTROLLER,
    aliases: &["resourcequota"],
    required_gates: &[],
    client: CONTROLLER,
    rbac: &[
        Rule::new(&["*"], &["*"], &["list", "watch"]),
        Rule::new(&[""], &["resourcequotas/status"], &["update"]),
        EVENTS,
    ],
    informs: &[
        informs(
            &[""],
            &[
                "resourcequotas",
                "pods",
                "services",
                "persistentvolumeclaims",
            ],
        ),
        informs(&["resource.k8s.io"], &["resourceclaims", "deviceclasses"]),
    ],
    api: None,
    run: |ctx| run(ctx).boxed(),
};

fn key(quota: &ResourceQuota) -> String {
    format!(
        "{}/{}",
        quota.namespace().unwrap_or_default(),
        quota.name_any()
    )
}

fn names_of(list: Option<&status::ApiList>) -> Vec<String> {
    list.map(|h| h.keys().cloned().collect())
        .unwrap_or_default()
}

fn hard_names(quota: &ResourceQuota) -> Vec<String> {
    names_of(quota.spec.as_ref().and_then(|s| s.hard.as_ref()))
}

fn status_hard_names(quota: &ResourceQuota) -> Vec<String> {
    names_of(quota.status.as_ref().and_then(|s| s.hard.as_ref()))
}

#[derive(Clone)]
struct Quota {
    quotas: Arc<Informer<ResourceQuota>>,
    /// The typed evaluators of the types the cluster serves, in registry order.
    typed: Arc<[Arc<dyn Registered>]>,
    /// Object counts by the name after `count/`, in the order they follow the typed
    /// evaluators.
    counters: Arc<Mutex<BTreeMap<String, Arc<ObjectCount>>>>,
    /// Quotable resources from the last discovery, by the name after `count/`.
    quotable: Arc<Mutex<HashMap<String, ApiResource>>>,
    rediscover: Arc<Notify>,
    count_changes: mpsc::UnboundedSender<CountChange>,
    writer: ApiWriter,
    /// The status writes the quota watch has not delivered yet: a sync right after a write
    /// compares against what it wrote, not the older stored status. Otherwise a change that
    /// undoes the one just written (a pod created, then deleted) matches the stale stored
    /// status, nothing is written, and the quota keeps the wrong `used` until the resync.
    written: Arc<MutationCache<ResourceQuota>>,
    bad: Arc<BadInput>,
    ctx: Context,
    primary: WorkQueue<String>,
    priority: WorkQueue<String>,
}

impl Quota {
    fn snapshot(&self) -> Snapshot<'_> {
        Snapshot::new(Time((self.ctx.clock)()), &self.ctx.informers)
    }

    /// Every evaluator in registry order: the typed ones, then the object counts.
    fn evaluators(&self) -> Vec<Arc<dyn Registered>> {
        let counts = lock(&self.counters);
        let counts = counts.values().map(|c| c.clone() as Arc<dyn Registered>);
        self.typed.iter().cloned().chain(counts).collect()
    }

    /// Performs the quota's plan: reports its bad input, writes its status.
    async fn sync(&self, quota_key: String) -> Result<(), ControllerError> {
        let Some(quota) = self.written.newest_by_key(self.quotas.store(), &quota_key) else {
            return Ok(());
        };
        self.ensure_counters(hard_names(&quota).iter());
        let plan = plan_sync(&quota, &self.evaluators(), &self.snapshot());
        let version = quota.resource_version().unwrap_or_default();
        for (reason, problem) in &plan.problems {
            self.bad.report(&quota_key, &version, reason, problem);
        }
        let mut errors: Vec<QuotaError> = plan.errors.into_iter().map(Into::into).collect();
        if let Some(status) = plan.status {
            let mut desired = (*quota).clone();
            desired.status = Some(status);
            let (ns, _) = split_key(&quota_key);
            let api: Api<ResourceQuota> = Api::namespaced(self.ctx.client.clone(), ns);
            match self.writer.replace_status(&api, &quota, &desired).await {
                Ok(written) => self.written.mutated(written, Instant::now()),
                Err(err) => errors.push(QuotaError::WriteStatus(err)),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(QuotaError::Several(errors).into())
        }
    }

    /// The periodic safety net: recomputes the incremental totals in full, counts drift and
    /// rebuilds them from the stores (keeping only namespaces and scopes quotas use).
    fn verify_totals(&self) {
        let mut in_use: HashMap<String, Vec<QuotaScope>> = HashMap::new();
        for quota in self.quotas.store().state() {
            in_use
                .entry(quota.namespace().unwrap_or_default())
                .or_default()
                .push(quota_scope(&quota));
        }
        let at = self.snapshot();
        let drift = self.typed.iter().filter_map(|e| e.verify(&in_use, &at));
        for (resource, found) in drift.filter(|(_, n)| *n > 0) {
            tracing::warn!(
                resource,
                sums = found,
                "incremental quota usage drifted from the full recompute; corrected"
            );
            self.ctx
                .metrics
                .quota_usage_drift
                .with_label_values(&[resource])
                .inc_by(found);
        }
    }

    /// The periodic full resync: checks the totals, then every quota into the primary lane.
    fn resync(&self) {
        self.verify_totals();
        for each in self.quotas.store().state() {
            self.primary.add(key(&each));
        }
    }

    /// An object count changed in a namespace (or listed for the first time: every
    /// namespace with a quota): the quotas counting that type are replenished.
    fn count_changed(&self, change: CountChange) {
        let evaluator = lock(&self.counters).get(&change.resource).cloned();
        let Some(evaluator) = evaluator else { return };
        let at = self.snapshot();
        match change.namespace {
            Some(ns) => self.replenish(&ns, &*evaluator, &at),
            // First complete list: every quota counting the type can be computed now.
            None => {
                let namespaces: BTreeSet<String> = self
                    .quotas
                    .store()
                    .state()
                    .iter()
                    .filter_map(|quota| quota.namespace())
                    .collect();
                for ns in namespaces {
                    self.replenish(&ns, &*evaluator, &at);
                }
            }
        }
    }

    /// upstream's addQuota: which lane a new or re-specified quota goes to.
    fn route(&self, quota: &ResourceQuota) {
        self.ensure_counters(hard_names(quota).iter());
        let (at, evaluators) = (self.snapshot(), self.evaluators());
        if needs_priority(quota, |n| tracked(&evaluators, n, &at)) {
            self.priority.add(key(quota));
        } else {
            self.primary.add(key(quota));
        }
    }

    fn on_quota(&self, change: Change<ResourceQuota>) {
        match change {
            Change::Added(q) => self.route(&q),
            Change::Updated { old, new } if hard_changed(&old, &new) => self.route(&new),
            // Replenishment matches `status.hard` (as upstream), so an object that arrived
            // while the store still held the quota without it was not replenished; once the
            // watch brings the new `status.hard`, one more sync counts it (beyond upstream,
            // which waits for the periodic resync). No write when nothing changed.
            Change::Updated { old, new } if status_hard_names(&old) != status_hard_names(&new) => {
                self.primary.add(key(&new))
            }
            Change::Updated { .. } | Change::Synced => {}
            Change::Deleted(q) => {
                self.written
                    .forget(&q.namespace().unwrap_or_default(), &q.name_any());
                self.primary.add(key(&q))
            }
        }
    }

    /// Replenishment: the quotas of `ns` whose `status.hard` names something `evaluator` tracks.
    fn replenish(&self, ns: &str, evaluator: &dyn Registered, at: &Snapshot) {
        for quota in self.quotas.in_namespace(ns) {
            if !evaluator
                .matching(&status_hard_names(&quota), at)
                .is_empty()
            {
                self.primary.add(key(&quota));
            }
        }
    }

    /// Starts object counters for the `count/…` names quotas reference, once discovery knows
    /// the type; an unknown one asks for discovery again.
    fn ensure_counters<'a>(&self, names: impl Iterator<Item = &'a String>) {
        let wanted = referenced_counts(names);
        let quotable = lock(&self.quotable).clone();
        let mut counters = lock(&self.counters);
        let typed = |r: &String| REGISTRY.iter().any(|e| e.resource == r);
        for resource in wanted.iter().filter(|r| !typed(r)) {
            if counters.contains_key(resource) {
                continue;
            }
            let Some(api_resource) = quotable.get(resource) else {
                self.rediscover.notify_one();
                continue;
            };
            let counter = ObjectCounter::start(
                self.ctx.metadata_client.clone(),
                api_resource,
                resource.clone(),
                self.ctx.metrics.clone(),
                &self.ctx.shutdown,
                self.count_changes.clone(),
            );
            counters.insert(
                resource.clone(),
                Arc::new(ObjectCount::new(
                    &api_resource.group,
                    &api_resource.plural,
                    counter,
                )),
            );
        }
    }

    /// Stops counters no quota references any more (kcm watches a type only while counted).
    fn prune_counters(&self) {
        let referenced: BTreeSet<String> = self
            .quotas
            .store()
            .state()
            .iter()
            .flat_map(|q| referenced_counts(hard_names(q).iter()))
            .collect();
        lock(&self.counters).retain(|resource, counter| {
            let keep = referenced.contains(resource);
            if !keep {
                counter.stop();
            }
            keep
        });
    }

    /// Discovery of quotable types, every DISCOVERY_PERIOD or when a quota names an unknown
    /// type.
    async fn discover(&self) {
        match discover_quotable(&self.ctx.client).await {
            Ok(found) => {
                *lock(&self.quotable) = found
                    .into_iter()
                    .map(|q| (q.count_name, q.api_resource))
                    .collect();
            }
            Err(err) => {
                tracing::warn!(error = %err, "discovery of quotable resources failed; retrying")
            }
        }
        let all_hard: Vec<String> = self
            .quotas
            .store()
            .state()
            .iter()
            .flat_map(|q| hard_names(q))
            .collect();
        self.ensure_counters(all_hard.iter());
        self.prune_counters();
    }
}

/// Every namespaced resource that supports create, list, watch and delete.
async fn discover_quotable(client: &Client) -> Result<Vec<Quotable>, kube::Error> {
    let mut found = quotable(&client.list_core_api_resources("v1").await?);
    for group in client.list_api_groups().await?.groups {
        let Some(version) = group
            .preferred_version
            .or_else(|| group.versions.first().cloned())
        else {
            continue;
        };
        match client
            .list_api_group_resources(&version.group_version)
            .await
        {
            Ok(list) => found.extend(quotable(&list)),
            // A group that fails discovery keeps nothing counted from it, as upstream's partial failure.
            Err(err) => {
                tracing::warn!(group = group.name, error = %err, "discovery failed for group")
            }
        }
    }
    Ok(found)
}

/// The controller over the shared stores (the evaluators of the types the cluster serves),
/// and the stream of its object counts' changes.
async fn start(ctx: &Context) -> (Quota, mpsc::UnboundedReceiver<CountChange>) {
    let quotas = ctx.informers.get::<ResourceQuota>();
    let typed = evaluator::start(&ctx.client, &ctx.informers).await;
    let (count_tx, count_rx) = mpsc::unbounded_channel();
    let quota = Quota {
        quotas,
        typed: typed.into(),
        counters: Arc::default(),
        quotable: Arc::default(),
        rediscover: Arc::new(Notify::new()),
        count_changes: count_tx,
        writer: ctx.writer(CONTROLLER),
        written: Arc::new(MutationCache::new(MUTATION_TTL)),
        bad: Arc::new(BadInput::new(CONTROLLER, ctx.metrics.clone())),
        ctx: ctx.clone(),
        primary: WorkQueue::new(PRIMARY, &ctx.metrics.workqueue),
        priority: WorkQueue::new(PRIORITY, &ctx.metrics.workqueue),
    };
    (quota, count_rx)
}

async fn run(ctx: Context) -> Result<(), ControllerError> {
    let (quota, count_rx) = start(&ctx).await;
    quota.discover().await;

    let workers = ctx.settings.concurrent_resource_quota_syncs.get() as usize;
    let mut controller = ctx.controller();
    let q = quota.clone();
    controller.watch(&quota.primary, move |c: Change<ResourceQuota>, _| {
        q.on_quota(c)
    });
    let q = quota.clone();
    let replenish: Replenish = Arc::new(move |ns, evaluator, at| q.replenish(ns, evaluator, at));
    for evaluator in quota.typed.iter() {
        evaluator
            .clone()
            .watch(&ctx, &mut controller, &quota.primary, replenish.clone());
    }
    // Count changes replenish the quotas counting that type.
    let q = quota.clone();
    controller.consume("object counts", count_rx, move |change| {
        q.count_changed(change)
    });
    // Discovery every period, or at once when a quota names a type not seen yet.
    let q = quota.clone();
    controller.every(
        "discovery",
        DISCOVERY_PERIOD,
        Some(quota.rediscover.clone()),
        move || {
            let q = q.clone();
            async move { q.discover().await }
        },
    );
    // Periodic full resync into the primary lane.
    if let Some(period) = ctx.settings.resource_quota_sync_period {
        let q = quota.clone();
        controller.every("resync", period, None, move || {
            q.resync();
            async {}
        });
    } else {
        tracing::info!("periodic quota controller resync disabled");
    }
    for lane in [&quota.primary, &quota.priority] {
        let q = quota.clone();
        controller.lane(lane, workers, move |quota_key: String| {
            let q = q.clone();
            async move { q.sync(quota_key).await }
        });
    }
    Ok(controller.run().await?)
}
