//! resourceclaim-controller (DRA): creates the ResourceClaims that pods ask for through
//! ResourceClaimTemplates and records them in `pod.status.resourceClaimStatuses`, reserves
//! allocated claims for pods bound to a node without the scheduler, drops stale
//! reservations, deallocates claims that fell out of use, and deletes generated claims whose
//! pod will not run again. One lane, `resource_claim`, with `pod:` and `claim:` keys, as
//! upstream. The decisions are in `claims.rs`, the plans built from them in `plan.rs`, and
//! `sync.rs` performs the plans through the writer; this file declares the controller and
//! reads the stores.
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
mod error;
mod plan;
mod sync;

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::FutureExt;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use lru::LruCache;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, IntGaugeVec, Opts};
use serde_json::json;

use self::claims::{
    Features, claim_statuses_apply, gauge_labels, needs_admin_access, owner_pod_uid,
    resolved_names, template_names, uses_claims,
};
pub use self::error::ClaimError;
use self::plan::{Problem, Stores, plan_pod_change};
use self::sync::Effects;
use super::{Context, ControllerError, Descriptor};
use crate::cli::{Controller, FeatureGate};
use crate::runtime::badinput::BadInput;
use crate::runtime::events::EventRecorder;
use crate::runtime::index::Index;
use crate::runtime::informer::{Change, Informer, Store};
use crate::runtime::lock::lock;
use crate::runtime::mutation::{MUTATION_TTL, MutationCache};
use crate::runtime::queue::WorkQueue;
use crate::runtime::rbac::{EVENTS, READ_VERBS, Rule, informs};
use crate::runtime::stored::{key_of, split_key};
use crate::runtime::view::{Pod, WatchedPod};
use crate::runtime::writer::{ApiWriter, Part, is_not_found};

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
    run: |ctx| run(ctx).boxed(),
};

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
    /// `enqueuePod`, with the pod's deletion remembered.
    fn enqueue_pod(&self, pod: &Pod, deleted: bool) {
        if deleted
            && uses_claims(pod)
            && let Some(uid) = pod.uid()
        {
            lock(&self.deleted_pods).put(uid, ());
        }
        let plan = plan_pod_change(pod, deleted, self);
        for claim in plan.claims {
            self.queue.add(Key::Claim(claim));
        }
        if plan.pod {
            self.queue.add(Key::Pod(key_of(pod)));
        }
        for problem in &plan.problems {
            self.report(problem);
        }
    }

    fn index_pod(&self, pod: &Pod, deleted: bool) {
        let key = key_of(pod);
        let namespace = pod.namespace().unwrap_or_default();
        let in_namespace = |names: Vec<&str>| {
            if deleted {
                return Vec::new();
            }
            names
                .into_iter()
                .map(|n| format!("{namespace}/{n}"))
                .collect()
        };
        self.pods_by_claim
            .set(&key, in_namespace(resolved_names(pod)));
        self.pods_by_template
            .set(&key, in_namespace(template_names(pod)));
    }

    fn on_pod(&self, change: Change<Pod>) {
        let (pod, deleted) = match change {
            Change::Added(pod) | Change::Updated { new: pod, .. } => (pod, false),
            Change::Deleted(pod) => (pod, true),
            Change::Synced => return,
        };
        self.index_pod(&pod, deleted);
        self.enqueue_pod(&pod, deleted);
    }

    /// Every pod indexed under `value` gets `enqueuePod`.
    fn enqueue_pods(&self, index: &Index, value: &str) {
        for key in index.get(value) {
            let (namespace, name) = split_key(&key);
            if let Some(pod) = self.pod(namespace, name) {
                self.enqueue_pod(&pod, false);
            }
        }
    }

    fn on_claim(&self, change: Change<ResourceClaim>) {
        let (claim, deleted) = match change {
            Change::Added(claim) | Change::Updated { new: claim, .. } => (claim, false),
            Change::Deleted(claim) => (claim, true),
            Change::Synced => return,
        };
        let key = key_of(claim.as_ref());
        let owner: Vec<String> = owner_pod_uid(&claim)
            .filter(|_| !deleted)
            .map(str::to_string)
            .into_iter()
            .collect();
        self.claims_by_owner.set(&key, owner);
        if deleted {
            let (namespace, name) = split_key(&key);
            self.mutations.forget(namespace, name);
        } else {
            self.queue.add(Key::Claim(key.clone()));
        }
        self.enqueue_pods(&self.pods_by_claim, &key);
    }

    fn on_template(&self, change: Change<ResourceClaimTemplate>) {
        if let Change::Added(template) | Change::Updated { new: template, .. } = change {
            self.enqueue_pods(&self.pods_by_template, &key_of(template.as_ref()));
        }
    }

    fn claims_api(&self, claim: &ResourceClaim) -> Api<ResourceClaim> {
        Api::namespaced(
            self.ctx.client.clone(),
            &claim.namespace().unwrap_or_default(),
        )
    }

    async fn sync(&self, key: Key) -> Result<(), ControllerError> {
        match &key {
            Key::Pod(pod) => sync::sync_pod(self, pod).await,
            Key::Claim(claim) => sync::sync_claim(self, claim).await,
        }
        .map_err(ControllerError::from)
    }
}

impl Stores for ResourceClaims {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.mutations
            .newest_in(self.claims.store(), namespace, name, Instant::now())
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods.store().get(namespace, name)
    }

    fn owned_claims(&self, pod: &Pod) -> Vec<Arc<ResourceClaim>> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let namespace = pod.namespace().unwrap_or_default();
        let mut names: Vec<String> = self
            .claims_by_owner
            .get(uid)
            .iter()
            .map(|key| split_key(key).1.to_string())
            .collect();
        names.extend(
            self.mutations
                .in_namespace(&namespace, Instant::now(), |c| {
                    owner_pod_uid(c) == Some(uid)
                })
                .iter()
                .map(|c| c.name_any()),
        );
        names.sort();
        names.dedup();
        names
            .iter()
            .filter_map(|name| self.claim(&namespace, name))
            .filter(|c| owner_pod_uid(c) == Some(uid))
            .collect()
    }

    fn deleted_pod(&self, uid: &str) -> bool {
        lock(&self.deleted_pods).contains(uid)
    }

    fn template(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaimTemplate>> {
        self.templates.store().get(namespace, name)
    }

    fn pods_using(&self, namespace: &str, claim: &str) -> Vec<String> {
        self.pods_by_claim.get(&format!("{namespace}/{claim}"))
    }
}

impl Effects for ResourceClaims {
    fn features(&self) -> Features {
        self.features
    }

    async fn create_claim(&self, claim: &ResourceClaim) -> kube::Result<ResourceClaim> {
        let admin_access = if needs_admin_access(claim.spec.as_ref()) {
            "true"
        } else {
            "false"
        };
        let result = self.writer.create(&self.claims_api(claim), claim).await;
        let status = if result.is_ok() { "success" } else { "failure" };
        self.creates
            .with_label_values(&[status, admin_access])
            .inc();
        if let Ok(created) = &result {
            self.mutations.mutated(created.clone(), Instant::now());
        }
        result
    }

    async fn record_claims(&self, pod: &Pod, entries: &[(String, String)]) -> kube::Result<Pod> {
        let api: Api<WatchedPod> = Api::namespaced(
            self.ctx.client.clone(),
            &pod.namespace().unwrap_or_default(),
        );
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let body = claim_statuses_apply(pod, entries);
        self.writer
            .patch(
                &api,
                &pod.into(),
                &params,
                &Patch::Apply(&body),
                Part::Status,
            )
            .await
            .map(Pod::from)
    }

    async fn write_claim_status(
        &self,
        live: &ResourceClaim,
        desired: &ResourceClaim,
    ) -> kube::Result<ResourceClaim> {
        let updated = self
            .writer
            .replace_status(&self.claims_api(live), live, desired)
            .await?;
        self.mutations.mutated(updated.clone(), Instant::now());
        Ok(updated)
    }

    /// A merge patch carrying the resourceVersion, so a concurrent change conflicts as
    /// upstream's Update does, without writing back the stored copy (which lacks
    /// managedFields and kubectl's annotation).
    async fn write_finalizers(
        &self,
        live: &ResourceClaim,
        desired: &ResourceClaim,
    ) -> kube::Result<ResourceClaim> {
        let patch = json!({
            "metadata": {
                "resourceVersion": live.resource_version(),
                "finalizers": desired.finalizers(),
            }
        });
        let updated = self
            .writer
            .patch(
                &self.claims_api(live),
                live,
                &PatchParams::default(),
                &Patch::Merge(&patch),
                Part::Whole,
            )
            .await?;
        self.mutations.mutated(updated.clone(), Instant::now());
        Ok(updated)
    }

    async fn delete_claim(&self, claim: &ResourceClaim) -> kube::Result<()> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: claim.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self
            .writer
            .delete(&self.claims_api(claim), claim, &params)
            .await
        {
            Ok(()) => {}
            Err(err) if is_not_found(&err) => {}
            Err(err) => return Err(err),
        }
        self.mutations.deleted(claim, Instant::now());
        Ok(())
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> kube::Result<Option<Pod>> {
        let api: Api<WatchedPod> = Api::namespaced(self.ctx.client.clone(), namespace);
        Ok(api.get_opt(name).await?.map(Pod::from))
    }

    fn report(&self, problem: &Problem) -> bool {
        self.bad_input.report(
            &problem.object,
            &problem.version,
            problem.reason,
            &problem.message,
        )
    }

    fn warn(&self, pod: &Pod, reason: &'static str, note: String) {
        self.recorder
            .spawn(pod.object_ref(), true, reason, note, "Sync");
    }
}
/// `resourceclaim_controller_resource_claims`: claims by allocated, admin_access and source,
/// counted from the shared store at scrape time, as upstream's custom collector does.
struct ClaimGauge {
    store: Store<ResourceClaim>,
    template: IntGaugeVec,
}

impl ClaimGauge {
    fn new(store: Store<ResourceClaim>) -> prometheus::Result<Self> {
        Ok(Self {
            store,
            template: Self::vec()?,
        })
    }

    fn vec() -> prometheus::Result<IntGaugeVec> {
        IntGaugeVec::new(
            Opts::new(
                "resourceclaim_controller_resource_claims",
                "Number of ResourceClaims, by allocated, admin_access and source.",
            ),
            &["allocated", "admin_access", "source"],
        )
    }
}

impl Collector for ClaimGauge {
    fn desc(&self) -> Vec<&Desc> {
        self.template.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Ok(gauge) = Self::vec() else {
            return Vec::new();
        };
        for claim in self.store.state() {
            gauge.with_label_values(&gauge_labels(&claim)).inc();
        }
        gauge.collect()
    }
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
    let gates = &ctx.settings.feature_gates;
    if gates.enabled(FeatureGate::DraWorkloadResourceClaims) {
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
