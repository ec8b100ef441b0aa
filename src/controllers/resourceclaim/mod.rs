//! resourceclaim-controller (DRA): creates the ResourceClaims that pods ask for through
//! ResourceClaimTemplates and records them in `pod.status.resourceClaimStatuses`, reserves
//! allocated claims for pods bound to a node without the scheduler, drops stale
//! reservations, deallocates claims that fell out of use, and deletes generated claims whose
//! pod will not run again. One lane, `resource_claim`, with `pod:` and `claim:` keys, as
//! upstream. The decisions are in `claims.rs`; this file looks up, writes, and wires.
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

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::FutureExt;
use k8s_openapi::api::core::v1::PodResourceClaim;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use lru::LruCache;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, IntGaugeVec, Opts};
use serde_json::json;

use self::claims::{
    Features, Release, ResolveError, Resolved, claim_from_template, claim_statuses_apply,
    claims_to_release, delete_unused, finalizer_removed, find_orphan, foreign_claims, gauge_labels,
    is_for_pod, is_pod_consumer, keep_pod_reservation, needs_admin_access, needs_reservation,
    owner_pod_uid, pod_claims, pod_is_done, pod_may_get_claims, pod_needs_claims, pod_needs_work,
    release, reserved_for, reserved_for_pod, resolve, resolved_names, statuses_to_record,
    template_names, uses_claims,
};
use super::{Context, ControllerEntry, ControllerError};
use crate::cli::{Controller, FeatureGate};
use crate::runtime::badinput::BadInput;
use crate::runtime::events::EventRecorder;
use crate::runtime::golang::go_quote;
use crate::runtime::index::Index;
use crate::runtime::informer::{Change, Informer, Store};
use crate::runtime::mutation::{MUTATION_TTL, MutationCache};
use crate::runtime::queue::WorkQueue;
use crate::runtime::rbac::{EVENTS, READ_VERBS, Rule, informs};
use crate::runtime::selector::is_dns1123_subdomain;
use crate::runtime::stored::{key_of, split_key};
use crate::runtime::view::{Pod, WatchedPod};
use crate::runtime::writer::{ApiWriter, error_text};

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
pub const ENTRY: ControllerEntry = ControllerEntry {
    controller: Controller::ResourceClaim,
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
    /// The claim as this controller last knows it: the store, or its own newer write.
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.mutations
            .newest_in(self.claims.store(), namespace, name, Instant::now())
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods.store().get(namespace, name)
    }

    /// The claims the pod controls, including ones created a moment ago.
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
        self.deleted_pods
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(uid)
    }

    /// `enqueuePod`: the claims of a pod that no longer needs them, and the pod itself when
    /// it needs work.
    fn enqueue_pod(&self, pod: &Pod, deleted: bool) {
        if !uses_claims(pod) {
            return;
        }
        let namespace = pod.namespace().unwrap_or_default();
        if deleted && let Some(uid) = pod.uid() {
            self.deleted_pods
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .put(uid, ());
        }
        if !pod_needs_claims(pod, deleted) {
            for name in claims_to_release(pod) {
                self.queue.add(Key::Claim(format!("{namespace}/{name}")));
            }
        }
        let claim = |name: &str| self.claim(&namespace, name);
        if pod_needs_work(pod, claim) {
            self.queue.add(Key::Pod(key_of(pod)));
        } else if pod_may_get_claims(pod) {
            for problem in foreign_claims(pod, claim) {
                self.bad_input.report(
                    &key_of(pod),
                    pod.resource_version().as_deref().unwrap_or_default(),
                    "claim-not-owned",
                    &format!("{problem}; it must be deleted before a claim is created for the pod"),
                );
            }
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

    async fn sync(&self, key: Key) -> Result<(), ControllerError> {
        match &key {
            Key::Pod(pod) => self.sync_pod(pod).await,
            Key::Claim(claim) => self.sync_claim(claim).await,
        }
        .map_err(ControllerError::Failed)
    }

    /// Events never block or fail a sync.
    fn warn(&self, pod: &Pod, reason: &'static str, note: String) {
        let recorder = self.recorder.clone();
        let regarding = pod.object_ref();
        tokio::spawn(async move {
            recorder
                .publish(&regarding, true, reason, note, "Sync")
                .await
        });
    }

    /// `syncPod`: every claim of the pod exists and is recorded in its status; a pod already
    /// on a node is reserved on its allocated claims.
    async fn sync_pod(&self, key: &str) -> Result<(), String> {
        let (namespace, name) = split_key(key);
        let Some(pod) = self.pod(namespace, name) else {
            return Ok(());
        };
        if !pod_may_get_claims(&pod) {
            return Ok(());
        }
        let mut recorded = Vec::new();
        let mut errors = Vec::new();
        for pod_claim in pod_claims(&pod) {
            match self.handle_claim(&pod, pod_claim).await {
                Ok(Some(claim)) => recorded.push((pod_claim.name.clone(), claim)),
                Ok(None) => {}
                Err(err) => {
                    self.warn(
                        &pod,
                        "FailedResourceClaimCreation",
                        format!("PodResourceClaim {}: {err}", pod_claim.name),
                    );
                    errors.push(format!(
                        "pod {key}, PodResourceClaim {}: {err}",
                        pod_claim.name
                    ));
                }
            }
        }
        let mut pod = pod;
        if !recorded.is_empty() {
            match self.record_claims(&pod, recorded).await {
                Ok(updated) => pod = Arc::new(updated),
                Err(err) => errors.push(err),
            }
        }
        if !errors.is_empty() {
            return Err(errors.join("; "));
        }
        self.reserve(&pod).await
    }

    /// `handleClaim`: the name of a claim just created (or found orphaned) for `pod_claim`,
    /// to be recorded in the pod status; `None` when nothing needs recording.
    async fn handle_claim(
        &self,
        pod: &Pod,
        pod_claim: &PodResourceClaim,
    ) -> Result<Option<String>, String> {
        let namespace = pod.namespace().unwrap_or_default();
        if pod_claim.resource_claim_name.is_some()
            && pod_claim.resource_claim_template_name.is_some()
        {
            self.bad_input.report(
                &key_of(pod),
                pod.resource_version().as_deref().unwrap_or_default(),
                "pod-claim-both-sources",
                &format!(
                    "spec.resourceClaims {:?} sets both resourceClaimName and resourceClaimTemplateName; using resourceClaimName",
                    pod_claim.name
                ),
            );
        }
        match resolve(pod, pod_claim) {
            Err(ResolveError::NotCreatedYet { .. }) => {}
            Err(err) => return Err(err.to_string()),
            Ok(Resolved::NotNeeded) => return Ok(None),
            Ok(Resolved::Claim { name, check_owner }) => {
                if let Some(claim) = self.claim(&namespace, name) {
                    match is_for_pod(pod, &claim) {
                        Err(err) if check_owner => tracing::warn!(
                            pod = key_of(pod),
                            error = err,
                            "claim recorded for the pod is not owned by it; creating a new one"
                        ),
                        _ => return Ok(None),
                    }
                }
            }
        }
        let Some(template_name) = pod_claim.resource_claim_template_name.as_deref() else {
            return Ok(None);
        };
        if let Some(orphan) = find_orphan(&pod_claim.name, &self.owned_claims(pod)) {
            return Ok(Some(orphan.name_any()));
        }
        let template = self
            .templates
            .store()
            .get(&namespace, template_name)
            .ok_or_else(|| {
                let quoted = go_quote(template_name);
                format!(
                    "resource claim template {quoted}: resourceclaimtemplate.resource.k8s.io {quoted} not found"
                )
            })?;
        let claim = claim_from_template(pod, pod_claim, &template, self.features)?;
        let admin_access = if needs_admin_access(claim.spec.as_ref()) {
            "true"
        } else {
            "false"
        };
        let api: Api<ResourceClaim> = Api::namespaced(self.ctx.client.clone(), &namespace);
        match self.writer.create(&api, &claim).await {
            Ok(created) => {
                self.creates
                    .with_label_values(&["success", admin_access])
                    .inc();
                let name = created.metadata.name.clone();
                self.mutations.mutated(created, Instant::now());
                // Under --shadow nothing was created, so there is no name to record.
                Ok(name)
            }
            Err(err) => {
                self.creates
                    .with_label_values(&["failure", admin_access])
                    .inc();
                // Upstream prints the name, still empty before the create: kept verbatim.
                Err(format!("create ResourceClaim : {}", error_text(&err)))
            }
        }
    }

    /// Server-side apply of `status.resourceClaimStatuses`: the new entries, plus the ones
    /// already recorded for the pod's other template claims, so the apply removes none.
    async fn record_claims(&self, pod: &Pod, new: Vec<(String, String)>) -> Result<Pod, String> {
        let entries = statuses_to_record(pod, &new);
        let namespace = pod.namespace().unwrap_or_default();
        let api: Api<WatchedPod> = Api::namespaced(self.ctx.client.clone(), &namespace);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let body = claim_statuses_apply(pod, &entries);
        self.writer
            .patch_status(&api, &pod.into(), &params, &Patch::Apply(&body))
            .await
            .map(Pod::from)
            .map_err(|err| {
                format!(
                    "update pod {} ResourceClaimStatuses: {}",
                    key_of(pod),
                    error_text(&err)
                )
            })
    }

    /// For a pod bound to a node without the scheduler: reserve its allocated claims.
    async fn reserve(&self, pod: &Pod) -> Result<(), String> {
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or_default()
            .is_empty()
        {
            return Ok(());
        }
        let namespace = pod.namespace().unwrap_or_default();
        for pod_claim in pod_claims(pod) {
            let (name, check_owner) = match resolve(pod, pod_claim) {
                // Only under --shadow, where nothing was created or recorded.
                Err(ResolveError::NotCreatedYet { .. }) => continue,
                Err(err) => return Err(err.to_string()),
                Ok(Resolved::NotNeeded) => continue,
                Ok(Resolved::Claim { name, check_owner }) => (name, check_owner),
            };
            let Some(claim) = self.claim(&namespace, name) else {
                return Ok(());
            };
            if check_owner {
                is_for_pod(pod, &claim)?;
            }
            if !needs_reservation(pod, &claim) {
                continue;
            }
            if reserved_for(&claim).len() >= claims::RESERVED_FOR_MAX {
                let problem = format!(
                    "cannot reserve ResourceClaim {namespace}/{name} for pod {}: reservedFor is at its limit of {}",
                    key_of(pod),
                    claims::RESERVED_FOR_MAX
                );
                if self.bad_input.report(
                    &format!("{namespace}/{name}"),
                    claim.resource_version().as_deref().unwrap_or_default(),
                    "reserved-for-full",
                    &problem,
                ) {
                    self.warn(pod, "FailedResourceClaimReservation", problem);
                }
                continue;
            }
            let api: Api<ResourceClaim> = Api::namespaced(self.ctx.client.clone(), &namespace);
            let updated = self
                .writer
                .replace_status(&api, &claim, &reserved_for_pod(&claim, pod))
                .await
                .map_err(|err| {
                    format!(
                        "reserve claim {namespace}/{name} for pod: {}",
                        error_text(&err)
                    )
                })?;
            self.mutations.mutated(updated, Instant::now());
        }
        Ok(())
    }

    /// Whether a pod reservation still holds: a deleted UID drops it; a pod missing from the
    /// store is asked for from the API server before its entry is dropped.
    async fn keeps_reservation(
        &self,
        namespace: &str,
        entry: &k8s_openapi::api::resource::v1::ResourceClaimConsumerReference,
    ) -> Result<bool, String> {
        if self.deleted_pod(&entry.uid) {
            return Ok(false);
        }

        if let Some(pod) = self.pod(namespace, &entry.name) {
            return Ok(keep_pod_reservation(entry, Some(&pod)));
        }
        let api: Api<WatchedPod> = Api::namespaced(self.ctx.client.clone(), namespace);
        let live = api
            .get_opt(&entry.name)
            .await
            .map_err(|err| format!("get pod {namespace}/{}: {}", entry.name, error_text(&err)))?
            .map(Pod::from);
        Ok(keep_pod_reservation(entry, live.as_ref()))
    }

    /// `syncClaim`: stale reservations dropped, the claim deallocated and its finalizer
    /// removed when it fell out of use, and a generated claim deleted when its pod is done.
    async fn sync_claim(&self, key: &str) -> Result<(), String> {
        let (namespace, name) = split_key(key);
        let Some(mut claim) = self.claim(namespace, name) else {
            return Ok(());
        };
        let mut remaining = Vec::new();
        for entry in reserved_for(&claim) {
            // No pod can have a name that is no DNS subdomain: the entry is stale, and asking
            // for it would fail (an empty name: upstream stays stuck on the claim) or fetch
            // something else (`a/status`, `a?b`).
            if is_pod_consumer(entry) && !is_dns1123_subdomain(&entry.name) {
                self.bad_input.report(
                    key,
                    claim.resource_version().as_deref().unwrap_or_default(),
                    "invalid-reservation",
                    &format!(
                        "reservedFor names pod {:?}, which no pod can be called; dropped",
                        entry.name
                    ),
                );
                continue;
            }
            if !is_pod_consumer(entry) || self.keeps_reservation(namespace, entry).await? {
                remaining.push(entry.clone());
            }
        }
        let api: Api<ResourceClaim> = Api::namespaced(self.ctx.client.clone(), namespace);
        match release(&claim, remaining) {
            Release::Nothing => {}
            Release::Status(status) => {
                let mut desired = (*claim).clone();
                desired.status = Some(status);
                claim = self.write_status(&api, &claim, &desired).await?;
                claim = self.remove_finalizer(&api, claim).await?;
            }
            Release::Finalize { clear_allocation } => {
                if clear_allocation {
                    let mut desired = (*claim).clone();
                    if let Some(status) = desired.status.as_mut() {
                        status.allocation = None;
                    }
                    claim = self.write_status(&api, &claim, &desired).await?;
                }
                claim = self.remove_finalizer(&api, claim).await?;
            }
        }
        let owner = claims::owning_pod(&claim).and_then(|(pod, _)| self.pod(namespace, pod));
        // Upstream deletes the claim once its owner was replaced or is done. Not while a pod
        // that will still run names this very claim: nothing would make it again.
        let unused = delete_unused(&claim, owner.as_deref())
            && match self.user_by_name(namespace, name) {
                None => true,
                Some(user) => {
                    self.bad_input.report(
                        key,
                        claim.resource_version().as_deref().unwrap_or_default(),
                        "claim-in-use",
                        &format!(
                            "generated claim {key} lost its owner pod, but pod {user} uses it by name; not deleted"
                        ),
                    );
                    false
                }
            };
        if unused {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: claim.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match self.writer.delete(&api, &claim, &params).await {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(err) => {
                    return Err(format!(
                        "delete unused generated claim {key}: {}",
                        error_text(&err)
                    ));
                }
            }
            self.mutations.deleted(&claim, Instant::now());
        }
        Ok(())
    }

    /// A pod that is not done and names the claim in `resourceClaimName`.
    fn user_by_name(&self, namespace: &str, claim: &str) -> Option<String> {
        self.pods_by_claim
            .get(&format!("{namespace}/{claim}"))
            .into_iter()
            .find(|pod_key| {
                let (ns, name) = split_key(pod_key);
                self.pod(ns, name).is_some_and(|pod| {
                    !pod_is_done(&pod)
                        && pod_claims(&pod)
                            .iter()
                            .any(|pc| pc.resource_claim_name.as_deref() == Some(claim))
                })
            })
    }

    async fn write_status(
        &self,
        api: &Api<ResourceClaim>,
        live: &ResourceClaim,
        desired: &ResourceClaim,
    ) -> Result<Arc<ResourceClaim>, String> {
        let updated = self
            .writer
            .replace_status(api, live, desired)
            .await
            .map_err(|err| {
                format!(
                    "update ResourceClaim {}: {}",
                    key_of(live),
                    error_text(&err)
                )
            })?;
        self.mutations.mutated(updated.clone(), Instant::now());
        Ok(Arc::new(updated))
    }

    /// Removes the builtin finalizer from an unallocated claim. A merge patch carrying the
    /// resourceVersion, so a concurrent change conflicts as upstream's Update does, without
    /// writing back the stored copy (which lacks managedFields and kubectl's annotation).
    async fn remove_finalizer(
        &self,
        api: &Api<ResourceClaim>,
        claim: Arc<ResourceClaim>,
    ) -> Result<Arc<ResourceClaim>, String> {
        let Some(desired) = finalizer_removed(&claim) else {
            return Ok(claim);
        };
        let patch = json!({
            "metadata": {
                "resourceVersion": claim.resource_version(),
                "finalizers": desired.finalizers(),
            }
        });
        let updated = self
            .writer
            .patch(api, &claim, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|err| {
                format!(
                    "remove finalizer of ResourceClaim {}: {}",
                    key_of(claim.as_ref()),
                    error_text(&err)
                )
            })?;
        self.mutations.mutated(updated.clone(), Instant::now());
        Ok(Arc::new(updated))
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

fn metric_error(err: prometheus::Error) -> ControllerError {
    ControllerError::Failed(format!("registering metrics: {err}"))
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
    let creates = IntCounterVec::new(
        Opts::new(
            "resourceclaim_controller_creates_total",
            "Number of ResourceClaims creation requests, by status and admin_access.",
        ),
        &["status", "admin_access"],
    )
    .map_err(metric_error)?;
    ctx.metrics
        .register(Box::new(creates.clone()))
        .map_err(metric_error)?;
    let queue: WorkQueue<Key> = WorkQueue::new(QUEUE, &ctx.metrics.workqueue);
    let informers = &ctx.informers;
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
    ctx.metrics
        .register(Box::new(
            ClaimGauge::new(controller.claims.store().clone()).map_err(metric_error)?,
        ))
        .map_err(metric_error)?;

    let c = controller.clone();
    let mut feeds =
        vec![ctx.subscribe::<ResourceClaim, _>(&queue, move |change, _| c.on_claim(change))];
    let c = controller.clone();
    feeds.push(ctx.subscribe::<Pod, _>(&queue, move |change, _| c.on_pod(change)));
    let c = controller.clone();
    feeds.push(
        ctx.subscribe::<ResourceClaimTemplate, _>(&queue, move |change, _| c.on_template(change)),
    );
    let (tasks, synced): (Vec<_>, Vec<_>) = feeds.into_iter().unzip();
    ctx.wait_synced(synced).await;

    let workers = ctx.settings.concurrent_resourceclaim_syncs.get() as usize;
    let c = controller.clone();
    ctx.run_workers(queue, workers, CONTROLLER, move |key: Key| {
        let c = c.clone();
        async move { c.sync(key).await }
    })
    .await;
    for task in tasks {
        task.await
            .map_err(|e| ControllerError::Failed(e.to_string()))?;
    }
    Ok(())
}
