//! resourceclaim-controller (DRA): creates the ResourceClaims that pods ask for through
//! ResourceClaimTemplates and records them in `pod.status.resourceClaimStatuses`, reserves
//! allocated claims for pods bound to a node without the scheduler, drops stale
//! reservations, deallocates claims that fell out of use, and deletes generated claims whose
//! pod will not run again. With DRAWorkloadResourceClaims (KEP-5729) it also creates the
//! claims a PodGroup (`scheduling.k8s.io/v1alpha2`) shares among its pods, records them in
//! the group's `status.resourceClaimStatuses`, reserves them for the group rather than for
//! each pod, and drops the reservations of groups that are gone; PodGroups are watched only
//! then (kcm's own minimal PodGroup type: `runtime::podgroup`). One lane, `resource_claim`,
//! with `pod:`, `claim:` and `podgroup:` keys, as upstream. The decisions are in `plan.rs`
//! (those on single pods and claims in `plan/claims.rs`), and `sync.rs` performs the plans
//! (through the stores and the writer: `sync/effects.rs`); `handlers.rs` turns watch events
//! into work items, `metrics.rs` holds the claim gauge; this file declares the controller.
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
//!   being retried against API validation;
//! - a pod in no PodGroup whose recorded claim another owns gets upstream's "Pod is not
//!   owner" error, where upstream (gate on) dereferences the missing group name.

mod error;
mod handlers;
mod metrics;
pub mod plan;
mod sync;

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use lru::LruCache;
use prometheus::{IntCounterVec, Opts};

pub use self::error::ClaimError;
use self::metrics::ClaimGauge;
use self::plan::claims::Features;
use super::{Context, ControllerError, Descriptor, Gated};
use crate::controllers::Controller;
use crate::features::FeatureGate;
use crate::k8s::podgroup::PodGroup;
use crate::k8s::view::Pod;
use crate::runtime::badinput::BadInput;
use crate::runtime::queue::WorkQueue;
use crate::runtime::rbac::{EVENTS, READ_VERBS, Rule, informs};
use crate::runtime::watching::index::Index;
use crate::runtime::watching::informer::{Change, Informer};
use crate::runtime::writing::events::EventRecorder;
use crate::runtime::writing::mutation::{MUTATION_TTL, MutationCache};
use crate::runtime::writing::writer::ApiWriter;

const CONTROLLER: &str = "resourceclaim-controller";
/// Upstream's event source for this controller.
const REPORTER: &str = "resource_claim";
const QUEUE: &str = "resource_claim";
/// Upstream's field manager for `pod.status.resourceClaimStatuses`.
const FIELD_MANAGER: &str = "ResourceClaimController";
/// How many deleted pod and PodGroup UIDs are remembered (upstream's `maxUIDCacheEntries`).
const DELETED_OBJECTS: NonZeroUsize = match NonZeroUsize::new(500) {
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
    gated: &[Gated {
        gate: FeatureGate::DraWorkloadResourceClaims,
        rbac: &[
            Rule::new(&["scheduling.k8s.io"], &["podgroups"], READ_VERBS),
            Rule::new(
                &["scheduling.k8s.io"],
                &["podgroups/status"],
                &["update", "patch"],
            ),
        ],
        informs: &[informs(&["scheduling.k8s.io"], &["podgroups"])],
    }],
    warm: |informers, settings| {
        informers.get::<Pod>();
        informers.get::<ResourceClaim>();
        informers.get::<ResourceClaimTemplate>();
        if settings
            .feature_gates
            .enabled(FeatureGate::DraWorkloadResourceClaims)
        {
            informers.get::<PodGroup>();
        }
    },
    run: |ctx| run(ctx).boxed(),
};

/// A work item: `pod:<ns>/<name>`, `claim:<ns>/<name>` or `podgroup:<ns>/<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Pod(String),
    Claim(String),
    PodGroup(String),
}

#[derive(Clone)]
struct ResourceClaims {
    ctx: Context,
    pods: Arc<Informer<Pod>>,
    claims: Arc<Informer<ResourceClaim>>,
    templates: Arc<Informer<ResourceClaimTemplate>>,
    /// Only with DRAWorkloadResourceClaims on.
    pod_groups: Option<Arc<Informer<PodGroup>>>,
    /// `ns/claim` → pods that resolve to that claim.
    pods_by_claim: Arc<Index>,
    /// `ns/template` → pods with a claim from that template.
    pods_by_template: Arc<Index>,
    /// pod or PodGroup UID → claims it controls.
    claims_by_owner: Arc<Index>,
    /// `ns/group` → the pods in that PodGroup (with the gate on).
    pods_by_group: Arc<Index>,
    /// `ns/claim` → PodGroups that resolve to that claim (with the gate on).
    groups_by_claim: Arc<Index>,
    /// `ns/template` → PodGroups with a claim from that template (with the gate on).
    groups_by_template: Arc<Index>,
    mutations: Arc<MutationCache<ResourceClaim>>,
    /// UIDs of deleted pods and PodGroups.
    deleted_objects: Arc<Mutex<LruCache<String, ()>>>,
    writer: ApiWriter,
    recorder: EventRecorder,
    bad_input: Arc<BadInput>,
    creates: IntCounterVec,
    features: Features,
    queue: WorkQueue<Key>,
}

impl ResourceClaims {
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
        let workload_claims = gates.enabled(FeatureGate::DraWorkloadResourceClaims);
        let controller = ResourceClaims {
            pods: informers.get::<Pod>(),
            claims: informers.get::<ResourceClaim>(),
            templates: informers.get::<ResourceClaimTemplate>(),
            pod_groups: workload_claims.then(|| informers.get::<PodGroup>()),
            pods_by_claim: Arc::default(),
            pods_by_template: Arc::default(),
            claims_by_owner: Arc::default(),
            pods_by_group: Arc::default(),
            groups_by_claim: Arc::default(),
            groups_by_template: Arc::default(),
            mutations: Arc::new(MutationCache::new(MUTATION_TTL)),
            deleted_objects: Arc::new(Mutex::new(LruCache::new(DELETED_OBJECTS))),
            writer: ctx.writer(CONTROLLER),
            recorder: ctx.recorder(REPORTER, CONTROLLER),
            bad_input: Arc::new(BadInput::new(CONTROLLER, ctx.metrics.clone())),
            creates,
            features: Features::of(gates),
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
    let queue: WorkQueue<Key> = WorkQueue::new(QUEUE, &ctx.metrics.workqueue);
    let controller = ResourceClaims::new(&ctx, &queue)?;
    let workers = ctx.settings.concurrent_resourceclaim_syncs.get() as usize;
    let (claims, pods, templates) = (controller.clone(), controller.clone(), controller.clone());
    let mut wiring = ctx.controller();
    // Only with the gate on: nothing else asks for PodGroups.
    if controller.features.workload_claims {
        let groups = controller.clone();
        wiring.watch(&queue, move |change: Change<PodGroup>, _| {
            groups.on_pod_group(change)
        });
    }
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

#[cfg(test)]
mod tests;
