//! resourceclaim-controller (DRA): creates the ResourceClaims that pods ask for through
//! ResourceClaimTemplates and records them in `pod.status.resourceClaimStatuses`, reserves
//! allocated claims for pods bound to a node without the scheduler, drops stale
//! reservations, deallocates claims that fell out of use, and deletes generated claims whose
//! pod will not run again. One lane, `resource_claim`, with `pod:` and `claim:` keys, as
//! upstream. The decisions are in `claims.rs`, the plans built from them in `plan.rs`, and
//! `sync.rs` performs the plans through the writer; `handlers.rs` turns watch events into
//! work items, `effects.rs` reads the stores and writes, `metrics.rs` holds the claim gauge;
//! this file declares the controller.
//!
//! Beyond upstream:
//! - a terminal pod gets no claims and no reservations (upstream re-creates the claims its
//!   own cleanup deleted, and re-reserves shared ones: kubernetes#141274);
//! - one failing claim of a pod does not stop its other claims from being handled;
//! - the status apply carries every claim this controller recorded for the pod, not only the
//!   new ones, so server-side apply never drops an entry the pod needs;
//! - every claim write (not only creates) goes into the mutation cache, and a claim deleted
//!   from the store leaves it at once;
//! - a reservation that would exceed the 256-entry limit is skipped and reported instead of
//!   being retried against API validation.
//!
//! PodGroup claims (DRAWorkloadResourceClaims, alpha) are not implemented: with that gate on,
//! this controller stays off rather than create per-pod claims where upstream would not.

pub mod claims;
mod effects;
mod error;
mod handlers;
mod metrics;
mod plan;
mod sync;

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use lru::LruCache;
use prometheus::{IntCounterVec, Opts};

use self::claims::Features;
pub use self::error::ClaimError;
use self::metrics::ClaimGauge;
use super::{Context, ControllerError, Descriptor};
use crate::controllers::Controller;
use crate::features::{FeatureGate, FeatureGates};
use crate::runtime::badinput::BadInput;
use crate::runtime::events::EventRecorder;
use crate::runtime::index::Index;
use crate::runtime::informer::{Change, Informer};
use crate::runtime::mutation::{MUTATION_TTL, MutationCache};
use crate::runtime::queue::WorkQueue;
use crate::runtime::rbac::{EVENTS, READ_VERBS, Rule, informs};
use crate::runtime::view::Pod;
use crate::runtime::writer::ApiWriter;

const CONTROLLER: &str = "resourceclaim-controller";
/// Upstream's event source for this controller.
const REPORTER: &str = "resource_claim";
const QUEUE: &str = "resource_claim";
/// Upstream's field manager for `pod.status.resourceClaimStatuses`.
const FIELD_MANAGER: &str = "ResourceClaimController";
/// How many deleted pod UIDs are remembered (upstream's `maxUIDCacheEntries`).
const DELETED_PODS: NonZeroUsize = match NonZeroUsize::new(500) {
    Some(n) => n,
    None => unreachable!(),
};
pub const DESCRIPTOR: Descriptor = Descriptor {
    controller: Controller::ResourceClaim,
    name: CONTROLLER,
    aliases: &["resource-claim-controller"],
    required_gates: &[],
    client: "resource-claim-controller",
    rbac: &[
        Rule::new(&[""], &["pods"], READ_VERBS),
        Rule::new(&[""], &["pods/finalizers"], &["update"]),
        Rule::new(
            &["resource.k8s.io"],
            &["resourceclaims"],
            &["get", "list", "watch", "create", "delete"],
        ),
        Rule::new(
            &["resource.k8s.io"],
            &["resourceclaims", "resourceclaims/status"],
            &["update", "patch"],
        ),
        // DRAResourceClaimGranularStatusAuthorization (beta, on in v1.36): the API server
        // then also asks for the synthetic `resourceclaims/binding` when status.reservedFor
        // changes, as it does when the controller drops a stale reservation. Upstream grants
        // it with the gate on; the rule is harmless where the API server has it off.
        Rule::new(
            &["resource.k8s.io"],
            &["resourceclaims/binding"],
            &["update", "patch"],
        ),
        Rule::new(&[""], &["pods/status"], &["update", "patch"]),
        EVENTS,
    ],
    informs: &[
        informs(&[""], &["pods"]),
        informs(
            &["resource.k8s.io"],
            &["resourceclaims", "resourceclaimtemplates"],
        ),
    ],
    api: Some(("resource.k8s.io", "v1")),
    warm: |informers, settings| {
        if !declines(&settings.feature_gates) {
            informers.get::<Pod>();
            informers.get::<ResourceClaim>();
            informers.get::<ResourceClaimTemplate>();
        }
    },
    run: |ctx| run(ctx).boxed(),
};

/// Whether the gates ask for what kcm does not implement (PodGroup claims): the controller
/// then runs nothing.
fn declines(gates: &FeatureGates) -> bool {
    gates.enabled(FeatureGate::DraWorkloadResourceClaims)
}

/// A work item: `pod:<ns>/<name>` or `claim:<ns>/<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Pod(String),
    Claim(String),
}

#[derive(Clone)]
struct ResourceClaims {
    ctx: Context,
    pods: Arc<Informer<Pod>>,
    claims: Arc<Informer<ResourceClaim>>,
    templates: Arc<Informer<ResourceClaimTemplate>>,
    /// `ns/claim` → pods that resolve to that claim.
    pods_by_claim: Arc<Index>,
    /// `ns/template` → pods with a claim from that template.
    pods_by_template: Arc<Index>,
    /// pod UID → claims that pod controls.
    claims_by_owner: Arc<Index>,
    mutations: Arc<MutationCache<ResourceClaim>>,
    deleted_pods: Arc<Mutex<LruCache<String, ()>>>,
    writer: ApiWriter,
    recorder: EventRecorder,
    bad_input: Arc<BadInput>,
    creates: IntCounterVec,
    features: Features,
    queue: WorkQueue<Key>,
}

impl ResourceClaims {
    async fn sync(&self, key: Key) -> Result<(), ControllerError> {
        match &key {
            Key::Pod(pod) => sync::sync_pod(self, pod).await,
            Key::Claim(claim) => sync::sync_claim(self, claim).await,
        }
        .map_err(ControllerError::from)
    }

    /// The controller over the shared stores, its metrics registered.
    fn new(ctx: &Context, queue: &WorkQueue<Key>) -> Result<Self, ControllerError> {
        let creates = IntCounterVec::new(
            Opts::new(
                "resourceclaim_controller_creates_total",
                "Number of ResourceClaims creation requests, by status and admin_access.",
            ),
            &["status", "admin_access"],
        )?;
        ctx.metrics.register(Box::new(creates.clone()))?;
        let (informers, gates) = (&ctx.informers, &ctx.settings.feature_gates);
        let controller = ResourceClaims {
            pods: informers.get::<Pod>(),
            claims: informers.get::<ResourceClaim>(),
            templates: informers.get::<ResourceClaimTemplate>(),
            pods_by_claim: Arc::default(),
            pods_by_template: Arc::default(),
            claims_by_owner: Arc::default(),
            mutations: Arc::new(MutationCache::new(MUTATION_TTL)),
            deleted_pods: Arc::new(Mutex::new(LruCache::new(DELETED_PODS))),
            writer: ctx.writer(CONTROLLER),
            recorder: ctx.recorder(REPORTER, CONTROLLER),
            bad_input: Arc::new(BadInput::new(CONTROLLER, ctx.metrics.clone())),
            creates,
            features: Features {
                admin_access: gates.enabled(FeatureGate::DraAdminAccess),
                prioritized_list: gates.enabled(FeatureGate::DraPrioritizedList),
            },
            queue: queue.clone(),
            ctx: ctx.clone(),
        };
        ctx.metrics.register(Box::new(ClaimGauge::new(
            controller.claims.store().clone(),
        )?))?;
        Ok(controller)
    }
}

async fn run(ctx: Context) -> Result<(), ControllerError> {
    if declines(&ctx.settings.feature_gates) {
        tracing::warn!(
            controller = CONTROLLER,
            "DRAWorkloadResourceClaims is enabled, but kcm does not implement PodGroup claims; not running this controller (upstream's must run it)"
        );
        ctx.shutdown.cancelled().await;
        return Ok(());
    }
    let queue: WorkQueue<Key> = WorkQueue::new(QUEUE, &ctx.metrics.workqueue);
    let controller = ResourceClaims::new(&ctx, &queue)?;
    let workers = ctx.settings.concurrent_resourceclaim_syncs.get() as usize;
    let (claims, pods, templates) = (controller.clone(), controller.clone(), controller.clone());
    let mut wiring = ctx.controller();
    wiring
        .watch(&queue, move |change: Change<ResourceClaim>, _| {
            claims.on_claim(change)
        })
        .watch(&queue, move |change: Change<Pod>, _| pods.on_pod(change))
        .watch(&queue, move |change: Change<ResourceClaimTemplate>, _| {
            templates.on_template(change)
        })
        .lane(&queue, workers, move |key: Key| {
            let c = controller.clone();
            async move { c.sync(key).await }
        });
    Ok(wiring.run().await?)
}
