//! resourcequota-controller: keeps `ResourceQuota.status.hard/used` equal to the real usage in
//! the namespace, as upstream computes it: the evaluators in `evaluator/`, the sync's plan in
//! `plan.rs` (its status rules in `plan/status.rs`); `sync.rs` writes the plan's status,
//! `handlers.rs` routes watch events to the lanes, `counters.rs` runs discovery and the
//! `count/` counters; this file declares the controller. Two lanes, as upstream:
//! `resourcequota_priority` for quotas whose status lags their spec, `resourcequota_primary`
//! for everything else, N workers each.
//!
//! Beyond upstream: object creations also replenish (a recompute that finds the same usage
//! writes nothing), and `count/<resource>` types are watched — metadata only — only while some
//! quota counts them, instead of every quotable type always. Usage is summed incrementally
//! from each object change (`totals.rs`), so a sync does not re-evaluate the namespace's
//! objects; the periodic resync recomputes in full and counts any drift.

mod counters;
pub mod discovery;
mod error;
pub mod evaluator;
mod handlers;
mod names;
pub mod plan;
pub mod registry;
pub mod scope;
mod sync;
#[cfg(test)]
mod testing;
pub mod totals;
pub mod usage;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::ApiResource;
use tokio::sync::{Notify, mpsc};

pub use self::error::{QuotaError, UsageError};
use self::evaluator::object_count::ObjectCount;
use self::evaluator::{AnyEvaluator, Replenish};
use super::{Context, ControllerError, Descriptor};
use crate::controllers::Controller;
use crate::runtime::badinput::BadInput;
use crate::runtime::queue::WorkQueue;
use crate::runtime::rbac::{EVENTS, Rule, informs};
use crate::runtime::watching::counter::CountChange;
use crate::runtime::watching::informer::{Change, Informer};
use crate::runtime::writing::mutation::{MUTATION_TTL, MutationCache};
use crate::runtime::writing::writer::ApiWriter;

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
    gated: &[],
    // The evaluators of the core group's types; claims' (their group discovered) and the
    // object counts (metadata watches of the types quotas name) start when it leads.
    warm: |informers, settings| {
        informers.get::<ResourceQuota>();
        registry::warm(
            informers,
            evaluator::QuotaGates::of(&settings.feature_gates),
        );
    },
    run: |ctx| run(ctx).boxed(),
};

fn hard_names(quota: &ResourceQuota) -> Vec<String> {
    plan::status::hard(quota)
        .map(|h| h.keys().cloned().collect())
        .unwrap_or_default()
}

/// Whether two versions of a quota name the same resources in `status.hard`, without copying
/// the names (every quota watch event asks).
fn same_status_hard_names(a: &ResourceQuota, b: &ResourceQuota) -> bool {
    let names = |q| {
        plan::status::status_hard(q)
            .into_iter()
            .flat_map(|h| h.keys())
    };
    names(a).eq(names(b))
}

#[derive(Clone)]
struct Quota {
    quotas: Arc<Informer<ResourceQuota>>,
    /// The typed evaluators of the types the cluster serves, in registry order.
    typed: Arc<[Arc<dyn AnyEvaluator>]>,
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

/// The controller over the shared stores (the evaluators of the types the cluster serves),
/// and the stream of its object counts' changes.
async fn start(ctx: &Context) -> (Quota, mpsc::UnboundedReceiver<CountChange>) {
    let quotas = ctx.informers.get::<ResourceQuota>();
    let gates = evaluator::QuotaGates::of(&ctx.settings.feature_gates);
    let typed = registry::start(&ctx.client, &ctx.informers, gates).await;
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
    // Starting asks the cluster which evaluators it serves, until it answers: a stop
    // request must not wait for that.
    let (quota, count_rx) = tokio::select! {
        started = start(&ctx) => started,
        () = ctx.shutdown.cancelled() => return Ok(()),
    };
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
            let q = q.clone();
            async move { q.resync().await }
        });
    } else {
        tracing::info!("periodic quota controller resync disabled");
    }
    // Each item takes one reference, not a copy of the controller's handles.
    let shared = Arc::new(quota.clone());
    for lane in [&quota.primary, &quota.priority] {
        let q = shared.clone();
        controller.lane(lane, workers, move |quota_key: String| {
            let q = q.clone();
            async move { q.sync(quota_key).await }
        });
    }
    Ok(controller.run().await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with_status_hard(hard: serde_json::Value) -> ResourceQuota {
        serde_json::from_value(json!({
            "metadata": { "name": "q", "namespace": "ns" },
            "status": { "hard": hard },
        }))
        .unwrap()
    }

    #[test]
    fn status_hard_names_are_compared_by_name_only() {
        let a = with_status_hard(json!({ "cpu": "1", "pods": "2" }));
        let b = with_status_hard(json!({ "cpu": "3", "pods": "4" }));
        let c = with_status_hard(json!({ "cpu": "1" }));
        let none: ResourceQuota =
            serde_json::from_value(json!({ "metadata": { "name": "q" } })).unwrap();
        assert!(same_status_hard_names(&a, &b));
        assert!(!same_status_hard_names(&a, &c));
        assert!(!same_status_hard_names(&c, &none));
        assert!(same_status_hard_names(&none, &none.clone()));
        assert!(same_status_hard_names(&none, &with_status_hard(json!({}))));
    }
}
