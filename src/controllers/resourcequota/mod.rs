//! resourcequota-controller: keeps `ResourceQuota.status.hard/used` equal to the real usage in
//! the namespace, as upstream computes it (`usage.rs`, `status.rs`). Two lanes, as upstream:
//! `resourcequota_priority` for quotas whose status lags their spec, `resourcequota_primary`
//! for everything else, N workers each.
//!
//! Beyond upstream: object creations also replenish (a recompute that finds the same usage
//! writes nothing), and `count/<resource>` types are watched — metadata only — only while some
//! quota counts them, instead of every quotable type always. Usage is summed incrementally
//! from each object change (`totals.rs`), so a sync does not re-evaluate the namespace's
//! objects; the periodic resync recomputes in full and counts any drift.

pub mod discovery;
pub mod status;
pub mod totals;
pub mod usage;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, ResourceQuota, Service};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ApiResource};
use kube::{Client, ResourceExt};
use tokio::sync::{Notify, mpsc};

use self::discovery::{Quotable, quotable, referenced_counts};
use self::status::{candidates, hard_changed, needs_priority, next_status};
use self::totals::{ClaimPeers, ClaimTally, PodTally, PvcTally, ServiceTally, Tally, Totals};
use self::usage::{
    ExtendedResourceCache, QuotaScope, ResourceList, Usage, add_lists, claim_matching, mask_list,
    object_count_matching, object_count_names, out_of_range_names, parse_scope,
    pod_counts_for_quota, pod_is_terminating, pod_matching, pvc_matching, quota_service_type,
    service_matching, unscoped_matches,
};
use super::{Context, ControllerEntry, ControllerError, Feed};
use crate::cli::Controller;
use crate::runtime::badinput::BadInput;
use crate::runtime::counter::{CountChange, ObjectCounter};
use crate::runtime::informer::{Change, Informer};
use crate::runtime::quantity::{Format, Quantity};
use crate::runtime::queue::WorkQueue;
use crate::runtime::rbac::{EVENTS, Rule, informs};
use crate::runtime::stored::Stored;
use crate::runtime::view::Pod;
use crate::runtime::writer::ApiWriter;

const CONTROLLER: &str = "resourcequota-controller";
const PRIMARY: &str = "resourcequota_primary";
const PRIORITY: &str = "resourcequota_priority";
/// Upstream re-discovers quotable resources this often.
const DISCOVERY_PERIOD: Duration = Duration::from_secs(30);
/// Types the typed evaluators count; they never get an object counter.
const TYPED: &[&str] = &[
    "pods",
    "services",
    "persistentvolumeclaims",
    "resourceclaims.resource.k8s.io",
];

pub const ENTRY: ControllerEntry = ControllerEntry {
    controller: Controller::ResourceQuota,
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

/// One way of measuring usage, in upstream's registry order.
#[derive(Clone)]
enum Evaluator {
    Pods,
    Services,
    PersistentVolumeClaims,
    ResourceClaims,
    /// Object counts of one type: its `count/…` name (and legacy alias), and its counter.
    Count {
        names: Vec<String>,
        counter: Arc<ObjectCounter>,
    },
}

type ClaimStores = (Arc<Informer<ResourceClaim>>, Arc<Informer<DeviceClass>>);
/// The names an object counter answers for (`count/…` and a legacy alias), and the counter.
type Counted = (Vec<String>, Arc<ObjectCounter>);

/// Incremental usage of each typed evaluator.
#[derive(Default)]
struct QuotaTotals {
    pods: Totals<Pod>,
    services: Totals<Service>,
    pvcs: Totals<PersistentVolumeClaim>,
    claims: Totals<ResourceClaim, ExtendedResourceCache>,
}

#[derive(Clone)]
struct Quota {
    quotas: Arc<Informer<ResourceQuota>>,
    pods: Arc<Informer<Pod>>,
    services: Arc<Informer<Service>>,
    pvcs: Arc<Informer<PersistentVolumeClaim>>,
    /// Claims and device classes, when the cluster serves resource.k8s.io/v1.
    claims: Option<ClaimStores>,
    /// Object counters by the name after `count/`.
    counters: Arc<Mutex<HashMap<String, Counted>>>,
    /// Quotable resources from the last discovery, by the name after `count/`.
    quotable: Arc<Mutex<HashMap<String, ApiResource>>>,
    rediscover: Arc<Notify>,
    count_changes: mpsc::UnboundedSender<CountChange>,
    writer: ApiWriter,
    bad: Arc<BadInput>,
    ctx: Context,
    primary: WorkQueue<String>,
    priority: WorkQueue<String>,
    totals: Arc<QuotaTotals>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Quota {
    fn now(&self) -> Time {
        Time((self.ctx.clock)())
    }

    fn evaluators(&self) -> Vec<Evaluator> {
        let mut all = vec![
            Evaluator::Pods,
            Evaluator::Services,
            Evaluator::PersistentVolumeClaims,
        ];
        if self.claims.is_some() {
            all.push(Evaluator::ResourceClaims);
        }
        let mut counts: Vec<_> = lock(&self.counters)
            .iter()
            .map(|(k, (names, c))| (k.clone(), names.clone(), c.clone()))
            .collect();
        counts.sort_by(|a, b| a.0.cmp(&b.0));
        all.extend(
            counts
                .into_iter()
                .map(|(_, names, counter)| Evaluator::Count { names, counter }),
        );
        all
    }

    fn device_classes(&self) -> ExtendedResourceCache {
        match &self.claims {
            Some((_, classes)) => {
                let all = classes.store().state();
                ExtendedResourceCache::from_classes(all.iter().map(|c| c.as_ref()))
            }
            None => ExtendedResourceCache::new(),
        }
    }

    fn matching(
        &self,
        evaluator: &Evaluator,
        names: &[String],
        classes: &ExtendedResourceCache,
    ) -> Vec<String> {
        match evaluator {
            Evaluator::Pods => pod_matching(names),
            Evaluator::Services => service_matching(names),
            Evaluator::PersistentVolumeClaims => pvc_matching(names),
            Evaluator::ResourceClaims => claim_matching(names, classes),
            Evaluator::Count { names: tracked, .. } => object_count_matching(tracked, names),
        }
    }

    fn tracks(&self, name: &str) -> bool {
        let classes = self.device_classes();
        let names = [name.to_string()];
        self.evaluators()
            .iter()
            .any(|e| !self.matching(e, &names, &classes).is_empty())
    }

    /// One evaluator's usage in `ns` for `names`.
    fn usage(
        &self,
        evaluator: &Evaluator,
        ns: &str,
        scope: &QuotaScope,
        names: &[String],
        classes: &ExtendedResourceCache,
    ) -> Result<Usage, String> {
        let now = self.now();
        let result = match evaluator {
            Evaluator::Pods => self
                .totals
                .pods
                .usage(&PodTally, ns, scope, names, &now, || {
                    self.pods.in_namespace(ns)
                }),
            Evaluator::Services => {
                self.totals
                    .services
                    .usage(&ServiceTally, ns, scope, names, &now, || {
                        self.services.in_namespace(ns)
                    })
            }
            Evaluator::PersistentVolumeClaims => {
                self.totals
                    .pvcs
                    .usage(&PvcTally, ns, scope, names, &now, || {
                        self.pvcs.in_namespace(ns)
                    })
            }
            Evaluator::ResourceClaims => {
                let Some((claims, _)) = &self.claims else {
                    return Ok(Usage::default());
                };
                // Claims made for a pod's extended resources look up the namespace's pods and
                // claims (the stores' own Arcs, no copies).
                let peers =
                    ClaimPeers::new(|| (self.pods.in_namespace(ns), claims.in_namespace(ns)));
                let tally = ClaimTally {
                    classes,
                    peers: &peers,
                };
                self.totals
                    .claims
                    .usage(&tally, ns, scope, names, &now, || claims.in_namespace(ns))
            }
            Evaluator::Count { counter, .. } => {
                if !counter.is_synced() {
                    return Err(format!(
                        "the count of {} is not known yet",
                        names.join(", ")
                    ));
                }
                let count = if unscoped_matches(scope) {
                    i64::try_from(counter.count(ns)).unwrap_or(i64::MAX)
                } else {
                    0
                };
                let list = names
                    .iter()
                    .map(|n| (n.clone(), Quantity::from_integer(count, Format::DecimalSI)))
                    .collect();
                return Ok(Usage {
                    list,
                    problems: Vec::new(),
                });
            }
        };
        Ok(result)
    }

    /// `CalculateUsage`: every evaluator's usage for the names it tracks; a failing evaluator's
    /// names drop out (they keep their previous values) and its error is returned.
    fn calculate(&self, quota: &ResourceQuota) -> (ResourceList, Vec<String>) {
        let ns = quota.namespace().unwrap_or_default();
        let spec = quota.spec.clone().unwrap_or_default();
        let scope = quota_scope(quota);
        let (quota_key, version) = (key(quota), quota.resource_version().unwrap_or_default());
        for problem in scope.selector_problems() {
            self.bad
                .report(&quota_key, &version, "invalid-scope-selector", &problem);
        }
        // A limit that does not parse is copied to status.hard as written (and compared as
        // text), but it is bad input all the same.
        for (name, limit) in spec.hard.iter().flatten() {
            if let Err(err) = Quantity::try_from(limit) {
                let problem = format!(
                    "spec.hard[{name}]: invalid quantity {:?}: {err}; copied to status.hard as written",
                    limit.0
                );
                self.bad
                    .report(&quota_key, &version, "invalid-quantity", &problem);
            }
        }
        let classes = self.device_classes();
        let evaluators = self.evaluators();
        let mut remaining: Vec<String> = candidates(quota, |n| {
            evaluators
                .iter()
                .any(|e| !self.matching(e, &[n.to_string()], &classes).is_empty())
        });
        let mut total = ResourceList::new();
        let mut errors = Vec::new();
        // A total past the exact range would be a wrong (too low) status: such a name keeps
        // its previous value, or stays unset, which quota admission treats as unknown.
        let mut out_of_range = BTreeSet::new();
        for evaluator in &evaluators {
            let names = self.matching(evaluator, &remaining, &classes);
            if names.is_empty() {
                continue;
            }
            match self.usage(evaluator, &ns, &scope, &names, &classes) {
                Ok(usage) => {
                    let sum = add_lists(&total, &usage.list);
                    let problems = usage.problems.iter().chain(&sum.problems);
                    for problem in problems.clone() {
                        self.bad
                            .report(&quota_key, &version, "invalid-quantity", problem);
                    }
                    out_of_range.extend(out_of_range_names(problems));
                    total = sum.list;
                }
                Err(err) => {
                    errors.push(err);
                    remaining.retain(|n| !names.contains(n));
                }
            }
        }
        remaining.retain(|n| !out_of_range.contains(n));
        (mask_list(&total, &remaining), errors)
    }

    async fn sync(&self, quota_key: String) -> Result<(), ControllerError> {
        let Some((ns, name)) = quota_key.split_once('/') else {
            return Ok(());
        };
        let Some(quota) = self.quotas.store().get(ns, name) else {
            return Ok(());
        };
        self.ensure_counters(hard_names(&quota).iter());
        let (computed, mut errors) = self.calculate(&quota);
        if let Some(status) = next_status(&quota, &computed) {
            let mut desired = (*quota).clone();
            desired.status = Some(status);
            let api: Api<ResourceQuota> = Api::namespaced(self.ctx.client.clone(), ns);
            if let Err(err) = self.writer.replace_status(&api, &quota, &desired).await {
                errors.push(err.to_string());
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ControllerError::Failed(errors.join("; ")))
        }
    }

    /// Runs `f` with the claim evaluator as the totals' updates need it (only claims evaluated
    /// at sync look at the namespace's pods and claims, so none are listed) and the claim
    /// store; `None` when the cluster serves no claims.
    fn with_claim_tally<R>(
        &self,
        f: impl FnOnce(&ClaimTally<'_>, &Informer<ResourceClaim>) -> R,
    ) -> Option<R> {
        let (claims, _) = self.claims.as_ref()?;
        let classes = self.device_classes();
        let peers = ClaimPeers::new(Default::default);
        let tally = ClaimTally {
            classes: &classes,
            peers: &peers,
        };
        Some(f(&tally, claims))
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
        let (now, t) = (self.now(), &self.totals);
        let mut drift = vec![
            (
                "pods",
                t.pods
                    .verify(&PodTally, &in_use, |ns| self.pods.in_namespace(ns), &now),
            ),
            (
                "services",
                t.services.verify(
                    &ServiceTally,
                    &in_use,
                    |ns| self.services.in_namespace(ns),
                    &now,
                ),
            ),
            (
                "persistentvolumeclaims",
                t.pvcs
                    .verify(&PvcTally, &in_use, |ns| self.pvcs.in_namespace(ns), &now),
            ),
        ];
        let claims = self.with_claim_tally(|tally, claims| {
            t.claims
                .verify(tally, &in_use, |ns| claims.in_namespace(ns), &now)
        });
        drift.extend(claims.map(|found| ("resourceclaims.resource.k8s.io", found)));
        for (resource, found) in drift.into_iter().filter(|(_, n)| *n > 0) {
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

    /// upstream's addQuota: which lane a new or re-specified quota goes to.
    fn route(&self, quota: &ResourceQuota) {
        self.ensure_counters(hard_names(quota).iter());
        if needs_priority(quota, |n| self.tracks(n)) {
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
            Change::Deleted(q) => self.primary.add(key(&q)),
        }
    }

    /// Replenishment: the quotas of `ns` whose `status.hard` names something `evaluator` tracks.
    fn replenish(&self, ns: &str, evaluator: &Evaluator) {
        let classes = self.device_classes();
        for quota in self.quotas.in_namespace(ns) {
            if !self
                .matching(evaluator, &status_hard_names(&quota), &classes)
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
        for resource in wanted.iter().filter(|r| !TYPED.contains(&r.as_str())) {
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
                (
                    object_count_names(&api_resource.group, &api_resource.plural),
                    counter,
                ),
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
        lock(&self.counters).retain(|resource, (_, counter)| {
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

fn quota_scope(quota: &ResourceQuota) -> QuotaScope {
    let spec = quota.spec.as_ref();
    parse_scope(
        spec.and_then(|s| s.scopes.as_deref()).unwrap_or_default(),
        spec.and_then(|s| s.scope_selector.as_ref()),
    )
}

/// Applies an object change to `totals`: they count what the store holds now.
fn refresh<T: Tally>(
    totals: &Totals<T::Object, T::Context>,
    tally: &T,
    informer: &Informer<T::Object>,
    change: &Change<T::Object>,
    now: &Time,
) where
    T::Object: Stored,
{
    let Some(object) = object_of(change) else {
        return;
    };
    let (ns, name) = (object.namespace().unwrap_or_default(), object.name_any());
    let current = informer.store().get(&ns, &name);
    totals.refresh(tally, &ns, &name, current, now);
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

/// upstream's DefaultUpdateFilter for pods: usage may have changed.
fn pod_update_matters(old: &Pod, new: &Pod, now: &Time) -> bool {
    let resources = |p: &Pod| {
        p.status.as_ref().map(|s| {
            let statuses = s
                .container_statuses
                .as_deref()
                .into_iter()
                .chain(s.init_container_statuses.as_deref())
                .flatten();
            statuses
                .map(|c| (c.name.clone(), c.resources.clone()))
                .collect::<Vec<_>>()
        })
    };
    pod_counts_for_quota(old, now) != pod_counts_for_quota(new, now)
        || pod_is_terminating(old) != pod_is_terminating(new)
        || resources(old) != resources(new)
}

async fn run(ctx: Context) -> Result<(), ControllerError> {
    let informers = &ctx.informers;
    let claims_served = ctx
        .client
        .list_api_group_resources("resource.k8s.io/v1")
        .await
        .is_ok();
    let (count_tx, mut count_rx) = mpsc::unbounded_channel();
    let quota = Quota {
        quotas: informers.get::<ResourceQuota>(),
        pods: informers.get::<Pod>(),
        services: informers.get::<Service>(),
        pvcs: informers.get::<PersistentVolumeClaim>(),
        claims: claims_served.then(|| {
            (
                informers.get::<ResourceClaim>(),
                informers.get::<DeviceClass>(),
            )
        }),
        counters: Arc::default(),
        quotable: Arc::default(),
        rediscover: Arc::new(Notify::new()),
        count_changes: count_tx,
        writer: ctx.writer(CONTROLLER),
        bad: Arc::new(BadInput::new(CONTROLLER, ctx.metrics.clone())),
        ctx: ctx.clone(),
        primary: WorkQueue::new(PRIMARY, &ctx.metrics.workqueue),
        priority: WorkQueue::new(PRIORITY, &ctx.metrics.workqueue),
        totals: Arc::default(),
    };
    quota.discover().await;

    let mut feeds = Vec::new();
    let q = quota.clone();
    feeds.push(subscribe(&quota, move |c: Change<ResourceQuota>| {
        q.on_quota(c)
    }));
    let q = quota.clone();
    feeds.push(subscribe(&quota, move |c: Change<Pod>| {
        let now = q.now();
        refresh(&q.totals.pods, &PodTally, &q.pods, &c, &now);
        let relevant = match &c {
            Change::Added(_) | Change::Deleted(_) => true,
            Change::Updated { old, new } => pod_update_matters(old, new, &now),
            Change::Synced => false,
        };
        if let (true, Some(pod)) = (relevant, object_of(&c)) {
            q.replenish(&pod.namespace().unwrap_or_default(), &Evaluator::Pods);
        }
    }));
    let q = quota.clone();
    feeds.push(subscribe(&quota, move |c: Change<Service>| {
        refresh(&q.totals.services, &ServiceTally, &q.services, &c, &q.now());
        let relevant = match &c {
            Change::Updated { old, new } => quota_service_type(old) != quota_service_type(new),
            other => !matches!(other, Change::Synced),
        };
        if let (true, Some(svc)) = (relevant, object_of(&c)) {
            q.replenish(&svc.namespace().unwrap_or_default(), &Evaluator::Services);
        }
    }));
    let q = quota.clone();
    // Upstream's PVC update filter is effectively always true (see the notes).
    feeds.push(subscribe(
        &quota,
        move |c: Change<PersistentVolumeClaim>| {
            refresh(&q.totals.pvcs, &PvcTally, &q.pvcs, &c, &q.now());
            if let Some(pvc) = object_of(&c) {
                q.replenish(
                    &pvc.namespace().unwrap_or_default(),
                    &Evaluator::PersistentVolumeClaims,
                );
            }
        },
    ));
    if quota.claims.is_some() {
        let q = quota.clone();
        feeds.push(subscribe(&quota, move |c: Change<ResourceClaim>| {
            q.with_claim_tally(|tally, claims| {
                refresh(&q.totals.claims, tally, claims, &c, &q.now())
            });
            if let (false, Some(claim)) = (matches!(c, Change::Updated { .. }), object_of(&c)) {
                q.replenish(
                    &claim.namespace().unwrap_or_default(),
                    &Evaluator::ResourceClaims,
                );
            }
        }));
    }
    let (tasks, synced): (Vec<_>, Vec<_>) = feeds.into_iter().unzip();
    ctx.wait_synced(synced).await;

    // Count changes replenish the quotas counting that type.
    let q = quota.clone();
    let shutdown = ctx.shutdown.clone();
    tokio::spawn(async move {
        loop {
            let change = tokio::select! {
                _ = shutdown.cancelled() => break,
                change = count_rx.recv() => change,
            };
            let Some(change) = change else { break };
            let evaluator = lock(&q.counters)
                .get(&change.resource)
                .map(|(names, counter)| Evaluator::Count {
                    names: names.clone(),
                    counter: counter.clone(),
                });
            let Some(evaluator) = evaluator else { continue };
            match change.namespace {
                Some(ns) => q.replenish(&ns, &evaluator),
                // First complete list: every quota counting the type can be computed now.
                None => {
                    let namespaces: BTreeSet<String> = q
                        .quotas
                        .store()
                        .state()
                        .iter()
                        .filter_map(|quota| quota.namespace())
                        .collect();
                    for ns in namespaces {
                        q.replenish(&ns, &evaluator);
                    }
                }
            }
        }
    });
    // Discovery every period, or at once when a quota names a type not seen yet.
    let q = quota.clone();
    let shutdown = ctx.shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(DISCOVERY_PERIOD) => {}
                _ = q.rediscover.notified() => {}
            }
            q.discover().await;
        }
    });
    // Periodic full resync into the primary lane.
    if let Some(period) = ctx.settings.resource_quota_sync_period {
        let q = quota.clone();
        let shutdown = ctx.shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(period) => {}
                }
                q.verify_totals();
                for each in q.quotas.store().state() {
                    q.primary.add(key(&each));
                }
            }
        });
    } else {
        tracing::info!("periodic quota controller resync disabled");
    }
    let shutdown = ctx.shutdown.clone();
    let (primary, priority) = (quota.primary.clone(), quota.priority.clone());
    tokio::spawn(async move {
        shutdown.cancelled().await;
        primary.shut_down();
        priority.shut_down();
    });

    let workers = ctx.settings.concurrent_resource_quota_syncs.get() as usize;
    let lane = |queue: WorkQueue<String>| {
        let q = quota.clone();
        ctx.run_workers(queue, workers, CONTROLLER, move |quota_key: String| {
            let q = q.clone();
            async move { q.sync(quota_key).await }
        })
    };
    tokio::join!(lane(quota.primary.clone()), lane(quota.priority.clone()));
    for task in tasks {
        task.await
            .map_err(|e| ControllerError::Failed(e.to_string()))?;
    }
    Ok(())
}

fn object_of<K>(change: &Change<K>) -> Option<&Arc<K>> {
    match change {
        Change::Added(k) | Change::Deleted(k) | Change::Updated { new: k, .. } => Some(k),
        Change::Synced => None,
    }
}

/// Subscribes a handler to `K`'s informer; the quota lanes are fed directly (there is no
/// per-type queue), so the feed's own queue only carries its shutdown.
fn subscribe<K: Stored>(
    quota: &Quota,
    mut on_change: impl FnMut(Change<K>) + Send + 'static,
) -> Feed {
    quota
        .ctx
        .subscribe(&quota.primary, move |change, _| on_change(change))
}
