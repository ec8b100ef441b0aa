//! The upstream resourceclaim controller's unit tests (`controller_test.go`: `TestSyncHandler`,
//! `TestEventHandlers`, `TestGetAdminAccessMetricLabel`), ported to the pure decisions of
//! `plan/claims.rs`, and to the real syncPod/syncClaim (`sync.rs` performing the plans of
//! `plan.rs` in the order of upstream's `syncPod` and `syncClaim`,
//! `pkg/controller/resourceclaim/controller.go`) run against plain objects instead of informers
//! and an API server; the claims and pods the upstream cases start from (`testClaim`,
//! `templatedTestClaim`, ...) are rebuilt below from JSON.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::resource::v1::{
    ResourceClaim, ResourceClaimConsumerReference, ResourceClaimSpec, ResourceClaimStatus,
    ResourceClaimTemplate,
};
use kube::ResourceExt;
use serde_json::{Value, json};

use super::plan::claims::*;
use super::plan::{PodChange, Problem, Stores, plan_pod_change};
use super::sync::{Effects, sync_claim, sync_pod};
use crate::k8s::podgroup::PodGroup;
use crate::k8s::view::Pod;
use crate::runtime::watching::stored::{Stored, key_of};

// ---------------------------------------------------------------------------------------------
// Fixtures (upstream's names and values).

const NS: &str = "my-namespace";
const OTHER_NS: &str = "not-my-namespace";
const POD: &str = "test-pod";
const POD_UID: &str = "uidpod1";
const OTHER_POD: &str = "test-pod-II";
const OTHER_POD_UID: &str = "uidpod1-II";
const CLAIM: &str = "acme-resource";
const TEMPLATE: &str = "my-template";
const NODE: &str = "worker";
const TS: &str = "2024-05-01T10:00:00Z";
/// `<pod>-<claim>`: upstream's `testClaim`, the name claims had before generated names.
const DETERMINISTIC: &str = "test-pod-acme-resource";
/// The generateName of claims made for `acme-resource` of `test-pod`.
const GENERATE_NAME: &str = "test-pod-acme-resource-";
/// The name the (simulated) API server gives the first claim created from `GENERATE_NAME`;
/// upstream's fake client appends `-<counter>`.
const GENERATED: &str = "test-pod-acme-resource--1";

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("fixture must deserialize")
}

/// A copy of `obj` changed through its JSON form.
fn edit<T: serde::Serialize + serde::de::DeserializeOwned>(
    obj: &T,
    f: impl FnOnce(&mut Value),
) -> T {
    let mut value = serde_json::to_value(obj).unwrap();
    f(&mut value);
    from(value)
}

fn push(value: &mut Value, item: Value) {
    if value.is_null() {
        *value = json!([]);
    }
    value.as_array_mut().unwrap().push(item);
}

fn make_pod(name: &str, uid: &str, claims: Value) -> Pod {
    from(json!({
        "metadata": {"name": name, "namespace": NS, "uid": uid},
        "spec": {"containers": [], "resourceClaims": claims},
    }))
}

fn template_entry(name: &str) -> Value {
    json!({"name": name, "resourceClaimTemplateName": TEMPLATE})
}

/// `testPod`: no claims.
fn test_pod() -> Pod {
    from(json!({
        "metadata": {"name": POD, "namespace": NS, "uid": POD_UID},
        "spec": {"containers": []},
    }))
}

/// `testPodWithResource`: one claim `acme-resource` from template `my-template`.
fn pod_with_resource() -> Pod {
    make_pod(POD, POD_UID, json!([template_entry(CLAIM)]))
}

/// `otherTestPod`.
fn other_test_pod() -> Pod {
    make_pod(OTHER_POD, OTHER_POD_UID, json!([]))
}

fn with_statuses(pod: &Pod, statuses: Value) -> Pod {
    edit(pod, |v| v["status"]["resourceClaimStatuses"] = statuses)
}

/// The pod with `acme-resource` recorded as `claim`.
fn recorded(pod: &Pod, claim: &str) -> Pod {
    with_statuses(pod, json!([{"name": CLAIM, "resourceClaimName": claim}]))
}

fn scheduled(pod: &Pod) -> Pod {
    edit(pod, |v| v["spec"]["nodeName"] = json!(NODE))
}

fn in_phase(pod: &Pod, phase: &str) -> Pod {
    edit(pod, |v| v["status"]["phase"] = json!(phase))
}

fn being_deleted<T: serde::Serialize + serde::de::DeserializeOwned>(obj: &T) -> T {
    edit(obj, |v| v["metadata"]["deletionTimestamp"] = json!(TS))
}

/// `testPodWithNodeName`: scheduled, with the generated claim recorded.
fn pod_with_node_name() -> Pod {
    scheduled(&recorded(&pod_with_resource(), GENERATED))
}

fn pod_owner(name: &str, uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "controller": true})
}

fn make_claim(name: &str, namespace: &str, owner: Option<Value>) -> ResourceClaim {
    let mut metadata = json!({"name": name, "namespace": namespace});
    if let Some(owner) = owner {
        metadata["ownerReferences"] = json!([owner]);
    }
    from(json!({"metadata": metadata}))
}

/// `makeTemplatedClaim`: what the controller created, as the API server stored it.
fn templated_claim(pod_claim: &str, generate_name: &str, owner: Value) -> ResourceClaim {
    from(json!({
        "metadata": {
            "name": format!("{generate_name}-1"),
            "generateName": generate_name,
            "namespace": NS,
            "annotations": {POD_CLAIM_NAME_ANNOTATION: pod_claim},
            "ownerReferences": [owner],
        },
    }))
}

/// `testClaim`: owned by `test-pod`, named `<pod>-<claim>`, no annotation.
fn test_claim() -> ResourceClaim {
    make_claim(DETERMINISTIC, NS, Some(pod_owner(POD, POD_UID)))
}

/// `templatedTestClaim`.
fn templated_test_claim() -> ResourceClaim {
    templated_claim(CLAIM, GENERATE_NAME, pod_owner(POD, POD_UID))
}

fn admin_spec(admin_access: bool) -> Value {
    json!({"devices": {"requests": [
        {"name": "req-0", "exactly": {"deviceClassName": "class", "adminAccess": admin_access}},
    ]}})
}

fn prioritized_spec() -> Value {
    json!({"devices": {"requests": [{"name": "req-0", "firstAvailable": [
        {"name": "sub-0", "deviceClassName": "fast"},
        {"name": "sub-1", "deviceClassName": "slow"},
    ]}]}})
}

fn with_spec(claim: &ResourceClaim, spec: Value) -> ResourceClaim {
    edit(claim, |v| v["spec"] = spec)
}

/// `templatedTestClaimWithAdmin`.
fn templated_test_claim_with_admin() -> ResourceClaim {
    with_spec(&templated_test_claim(), admin_spec(true))
}

/// `makeExtendedResourceClaim`: what the scheduler generates for extended resources.
fn extended_test_claim() -> ResourceClaim {
    from(json!({
        "metadata": {
            "name": "test-pod-extended-resources--1",
            "generateName": "test-pod-extended-resources-",
            "namespace": NS,
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [pod_owner(POD, POD_UID)],
        },
    }))
}

fn allocated(claim: &ResourceClaim) -> ResourceClaim {
    edit(claim, |v| v["status"]["allocation"] = json!({}))
}

fn reserve(claim: &ResourceClaim, pod: &Pod) -> ResourceClaim {
    let entry = json!({"resource": "pods", "name": pod.name_any(), "uid": pod.metadata.uid});
    edit(claim, |v| push(&mut v["status"]["reservedFor"], entry))
}

fn reserve_other(claim: &ResourceClaim, entry: Value) -> ResourceClaim {
    edit(claim, |v| push(&mut v["status"]["reservedFor"], entry))
}

/// Upstream's `structuredParameters`: the claim carries the builtin finalizer, i.e. it was
/// allocated by the scheduler.
fn protected(claim: &ResourceClaim) -> ResourceClaim {
    edit(claim, |v| {
        push(
            &mut v["metadata"]["finalizers"],
            json!(DELETE_PROTECTION_FINALIZER),
        )
    })
}

fn without_owners(claim: &ResourceClaim) -> ResourceClaim {
    edit(claim, |v| {
        v["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
    })
}

/// `testClaimAllocated`, `testClaimReserved`, `testClaimReservedTwice`.
fn test_claim_allocated() -> ResourceClaim {
    allocated(&test_claim())
}
fn test_claim_reserved() -> ResourceClaim {
    reserve(&test_claim_allocated(), &pod_with_resource())
}
fn test_claim_reserved_twice() -> ResourceClaim {
    reserve(&test_claim_reserved(), &other_test_pod())
}

fn make_template(spec: Option<Value>) -> ResourceClaimTemplate {
    let mut template = json!({"metadata": {"name": TEMPLATE, "namespace": NS}});
    if let Some(spec) = spec {
        template["spec"] = json!({"spec": spec});
    }
    from(template)
}

fn template() -> ResourceClaimTemplate {
    make_template(None)
}

fn consumer(
    api_group: Option<&str>,
    resource: &str,
    name: &str,
    uid: &str,
) -> ResourceClaimConsumerReference {
    ResourceClaimConsumerReference {
        api_group: api_group.map(Into::into),
        resource: resource.into(),
        name: name.into(),
        uid: uid.into(),
    }
}

const NO_FEATURES: Features = Features {
    admin_access: false,
    prioritized_list: false,
    workload_claims: false,
};
const ALL_FEATURES: Features = Features {
    admin_access: true,
    prioritized_list: true,
    workload_claims: true,
};
/// DRAWorkloadResourceClaims on (upstream's `workloadResourceClaimsEnabled`).
const WORKLOAD: Features = Features {
    workload_claims: true,
    ..NO_FEATURES
};
const FEATURE_COMBINATIONS: [Features; 4] = [
    NO_FEATURES,
    Features {
        admin_access: true,
        ..NO_FEATURES
    },
    Features {
        prioritized_list: true,
        ..NO_FEATURES
    },
    ALL_FEATURES,
];

/// The `reservedFor` entry of a pod.
fn pod_consumer(pod: &Pod) -> ResourceClaimConsumerReference {
    consumer(
        None,
        "pods",
        &pod.name_any(),
        pod.metadata.uid.as_deref().unwrap_or_default(),
    )
}

/// Compares claims as upstream's `normalizeClaims` does: an empty list is no list.
fn normalized(claim: &ResourceClaim) -> ResourceClaim {
    let mut claim = claim.clone();
    if let Some(status) = claim.status.as_mut()
        && status.reserved_for.as_ref().is_some_and(Vec::is_empty)
    {
        status.reserved_for = None;
    }
    if claim
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(Vec::is_empty)
    {
        claim.metadata.finalizers = None;
    }
    claim
}

fn assert_same_claims(case: &str, actual: &[ResourceClaim], expected: &[ResourceClaim]) {
    let actual: Vec<_> = actual.iter().map(normalized).collect();
    let expected: Vec<_> = expected.iter().map(normalized).collect();
    assert_eq!(actual, expected, "{case}");
}

// ---------------------------------------------------------------------------------------------
// The real syncPod and syncClaim (`sync.rs`, performing the plans of `plan.rs`) against a world
// of plain objects: the stores they read, and a fake API server that applies and records their
// writes. This controller deliberately departs from upstream where `plan.rs` says: a terminal
// pod is left alone (`pod_may_get_claims`), a failing entry does not stop the others, the apply
// carries the entries already recorded too (upstream's newer "flapping-resourceclaim-statuses"),
// and reservation looks at the pod as the apply left it.

/// What the executor wrote.
#[derive(Debug, Default)]
struct Writes {
    /// The claims created, as the API server returns them (named `<generateName>-<n>`).
    created: Vec<ResourceClaim>,
    /// The entries of the `pods/status` apply (pod claim name, claim name); empty: no apply.
    statuses: Vec<(String, String)>,
    /// The entries of the `podgroups/status` apply; empty: no apply.
    group_statuses: Vec<(String, String)>,
    /// The claims written with UpdateStatus, as the API server returns them.
    status_writes: Vec<ResourceClaim>,
    /// The claim written to remove the builtin finalizer.
    finalizer_update: Option<ResourceClaim>,
    deleted: bool,
    problems: Vec<Problem>,
    /// Warning events: reason, note.
    events: Vec<(String, String)>,
    /// The kind and name of each event's object.
    event_objects: Vec<(String, String)>,
}

/// The informers, the mutation cache and the API server, as plain objects.
#[derive(Default)]
struct World {
    pods: Vec<Pod>,
    /// The claim informer and the mutation cache: every claim write lands here too.
    claims: RefCell<Vec<ResourceClaim>>,
    templates: Vec<ResourceClaimTemplate>,
    /// What a GET from the API server finds when the informer does not have the pod (yet).
    api_pods: Vec<Pod>,
    /// The PodGroup informer.
    groups: Vec<PodGroup>,
    /// What a GET from the API server finds when the informer does not have the group.
    api_groups: Vec<PodGroup>,
    /// The LRU of deleted pods and PodGroups.
    deleted_uids: Vec<&'static str>,
    features: Option<Features>,
    writes: RefCell<Writes>,
}

fn named<'a, K: Stored>(
    list: impl IntoIterator<Item = &'a K>,
    namespace: &str,
    name: &str,
) -> Option<&'a K> {
    list.into_iter().find(|o| o.place() == (namespace, name))
}

impl World {
    /// The claim written: it replaces the one of that name, and is returned.
    fn store_claim(&self, claim: ResourceClaim) -> ResourceClaim {
        let mut claims = self.claims.borrow_mut();
        claims.retain(|c| key_of(c) != key_of(&claim));
        claims.push(claim.clone());
        claim
    }
}

impl Stores for World {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        named(self.claims.borrow().iter(), namespace, name).map(|c| Arc::new(c.clone()))
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        named(&self.pods, namespace, name).map(|p| Arc::new(p.clone()))
    }

    fn template(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaimTemplate>> {
        named(&self.templates, namespace, name).map(|t| Arc::new(t.clone()))
    }

    fn owned_claims(&self, namespace: &str, uid: &str) -> Vec<Arc<ResourceClaim>> {
        self.claims
            .borrow()
            .iter()
            .filter(|c| c.namespace().as_deref() == Some(namespace) && owner_uid(c) == Some(uid))
            .map(|c| Arc::new(c.clone()))
            .collect()
    }

    fn deleted(&self, uid: &str) -> bool {
        self.deleted_uids.contains(&uid)
    }

    fn pod_group(&self, namespace: &str, name: &str) -> Option<Arc<PodGroup>> {
        // As the controller: no PodGroup informer with the gate off.
        if !self.features().workload_claims {
            return None;
        }
        named(&self.groups, namespace, name).map(|g| Arc::new(g.clone()))
    }

    fn pods_using(&self, namespace: &str, claim: &str) -> Vec<String> {
        self.pods
            .iter()
            .filter(|p| p.namespace().as_deref() == Some(namespace))
            .filter(|p| resolved_names(p).contains(&claim))
            .map(key_of)
            .collect()
    }
}

impl Effects for World {
    fn features(&self) -> Features {
        self.features.unwrap_or(NO_FEATURES)
    }

    async fn create_claim(&self, claim: &ResourceClaim) -> kube::Result<ResourceClaim> {
        // What the API server does with generateName (upstream's fake client: `-<counter>`).
        let mut created = claim.clone();
        let counter = self.writes.borrow().created.len() + 1;
        created.metadata.name = Some(format!(
            "{}-{counter}",
            claim.metadata.generate_name.clone().unwrap()
        ));
        self.writes.borrow_mut().created.push(created.clone());
        Ok(self.store_claim(created))
    }

    async fn record_claims(&self, pod: &Pod, entries: &[(String, String)]) -> kube::Result<Pod> {
        self.writes.borrow_mut().statuses = entries.to_vec();
        let body = claim_statuses_apply(&ClaimOwner::pod(pod), entries);
        Ok(with_statuses(
            pod,
            body["status"]["resourceClaimStatuses"].clone(),
        ))
    }

    async fn record_group_claims(
        &self,
        _group: &PodGroup,
        entries: &[(String, String)],
    ) -> kube::Result<()> {
        self.writes.borrow_mut().group_statuses = entries.to_vec();
        Ok(())
    }

    async fn write_claim_status(
        &self,
        live: &ResourceClaim,
        desired: &ResourceClaim,
    ) -> kube::Result<ResourceClaim> {
        // UpdateStatus takes only the status.
        let written = ResourceClaim {
            status: desired.status.clone(),
            ..live.clone()
        };
        self.writes.borrow_mut().status_writes.push(written.clone());
        Ok(self.store_claim(written))
    }

    async fn write_finalizers(
        &self,
        live: &ResourceClaim,
        desired: &ResourceClaim,
    ) -> kube::Result<ResourceClaim> {
        let mut written = live.clone();
        written.metadata.finalizers = desired.metadata.finalizers.clone();
        Ok(self.store_claim(
            self.writes
                .borrow_mut()
                .finalizer_update
                .insert(written)
                .clone(),
        ))
    }

    async fn delete_claim(&self, claim: &ResourceClaim) -> kube::Result<()> {
        self.writes.borrow_mut().deleted = true;
        self.claims
            .borrow_mut()
            .retain(|c| key_of(c) != key_of(claim));
        Ok(())
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> kube::Result<Option<Pod>> {
        Ok(named(&self.api_pods, namespace, name).cloned())
    }

    async fn get_pod_group(&self, namespace: &str, name: &str) -> kube::Result<Option<PodGroup>> {
        Ok(named(&self.api_groups, namespace, name).cloned())
    }

    fn report(&self, problem: &Problem) -> bool {
        let mut writes = self.writes.borrow_mut();
        let fresh = !writes.problems.contains(problem);
        writes.problems.push(problem.clone());
        fresh
    }

    fn warn(&self, object: ObjectReference, reason: &'static str, note: String) {
        let mut writes = self.writes.borrow_mut();
        writes.events.push((reason.to_string(), note));
        writes.event_objects.push((
            object.kind.unwrap_or_default(),
            object.name.unwrap_or_default(),
        ));
    }
}

/// What a pod sync did.
#[derive(Debug, Default)]
struct PodPlan {
    created: Vec<ResourceClaim>,
    statuses: Vec<(String, String)>,
    /// The claims written back with the pod added to `status.reservedFor`.
    reserved: Vec<ResourceClaim>,
    /// What syncPod fails with, one message per failure.
    errors: Vec<String>,
    writes: Writes,
}

/// Runs the real syncPod of `pod`. `store` is the claim informer, `cache_only` claims only the
/// mutation cache knows.
fn sync_pod_plan(
    pod: &Pod,
    store: &[ResourceClaim],
    cache_only: &[ResourceClaim],
    templates: &[ResourceClaimTemplate],
    features: Features,
) -> PodPlan {
    let world = World {
        pods: vec![pod.clone()],
        claims: RefCell::new(store.iter().chain(cache_only).cloned().collect()),
        templates: templates.to_vec(),
        features: Some(features),
        ..World::default()
    };
    let result = futures::executor::block_on(sync_pod(&world, &key_of(pod)));
    let mut writes = world.writes.take();
    PodPlan {
        created: writes.created.clone(),
        statuses: writes.statuses.clone(),
        reserved: std::mem::take(&mut writes.status_writes),
        errors: result
            .err()
            .map(|e| e.to_string().split("; ").map(str::to_string).collect())
            .unwrap_or_default(),
        writes,
    }
}

/// Reported problems as (object, reason, message).
fn problems(reported: &[Problem]) -> Vec<(&str, &str, &str)> {
    let each = reported.iter();
    each.map(|p| (p.object.as_str(), p.reason, p.message.as_str()))
        .collect()
}

fn assert_no_errors(plan: &PodPlan) {
    assert!(plan.errors.is_empty(), "{:?}", plan.errors);
}

fn entry(name: &str, claim: &str) -> (String, String) {
    (name.into(), claim.into())
}

/// What a claim sync did.
#[derive(Debug, Default)]
struct ClaimPlan {
    /// Bodies of the status writes (UpdateStatus).
    status_writes: Vec<ResourceClaimStatus>,
    /// The claim written to remove the builtin finalizer.
    finalizer_update: Option<ResourceClaim>,
    delete: bool,
    /// The claim afterwards; None once deleted.
    after: Option<ResourceClaim>,
    problems: Vec<Problem>,
}

/// Runs the real syncClaim of `claim`; see `World` for the other arguments.
fn sync_claim_plan(
    claim: &ResourceClaim,
    pods: &[Pod],
    api_pods: &[Pod],
    deleted_uids: &[&'static str],
) -> ClaimPlan {
    let world = World {
        pods: pods.to_vec(),
        claims: RefCell::new(vec![claim.clone()]),
        api_pods: api_pods.to_vec(),
        deleted_uids: deleted_uids.to_vec(),
        ..World::default()
    };
    let key = key_of(claim);
    futures::executor::block_on(sync_claim(&world, &key)).expect("syncClaim");
    let writes = world.writes.take();
    ClaimPlan {
        status_writes: writes
            .status_writes
            .into_iter()
            .map(|c| c.status.unwrap_or_default())
            .collect(),
        finalizer_update: writes.finalizer_update,
        delete: writes.deleted,
        after: named(world.claims.borrow().iter(), NS, &claim.name_any()).cloned(),
        problems: writes.problems,
    }
}

// ---------------------------------------------------------------------------------------------
// TestSyncHandler, pod keys.

#[test]
fn sync_pod_create() {
    for features in FEATURE_COMBINATIONS {
        let pod = pod_with_resource();
        let plan = sync_pod_plan(&pod, &[], &[], &[template()], features);
        assert_no_errors(&plan);
        assert_same_claims("create", &plan.created, &[templated_test_claim()]);
        assert_eq!(plan.statuses, vec![entry(CLAIM, GENERATED)]);
        assert!(plan.reserved.is_empty());
        assert_eq!(
            claim_statuses_apply(&ClaimOwner::pod(&pod), &plan.statuses),
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "test-pod", "namespace": "my-namespace"},
                "status": {"resourceClaimStatuses": [
                    {"name": "acme-resource", "resourceClaimName": "test-pod-acme-resource--1"},
                ]},
            })
        );
    }
}

#[test]
fn claim_from_template_builds_the_generated_claim() {
    let template = make_template(Some(admin_spec(false)));
    let template = edit(&template, |v| {
        v["spec"]["metadata"] = json!({
            "labels": {"app": "inference", "tier": "gpu"},
            "annotations": {
                "example.com/note": "copied",
                // The controller's own annotation always wins.
                POD_CLAIM_NAME_ANNOTATION: "spoofed",
            },
        });
    });
    let pod = pod_with_resource();
    let claim = claim_from_template(
        &ClaimOwner::pod(&pod),
        &pod_claims(&pod)[0],
        &template,
        NO_FEATURES,
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(&claim).unwrap(),
        json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": "test-pod-acme-resource-",
                "namespace": "my-namespace",
                "ownerReferences": [{
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "test-pod",
                    "uid": "uidpod1",
                    "controller": true,
                }],
                "annotations": {
                    "example.com/note": "copied",
                    "resource.kubernetes.io/pod-claim-name": "acme-resource",
                },
                "labels": {"app": "inference", "tier": "gpu"},
            },
            "spec": {"devices": {"requests": [
                {"name": "req-0", "exactly": {"deviceClassName": "class", "adminAccess": false}},
            ]}},
        })
    );
    // blockOwnerDeletion is left unset; the generated claim is the pod's to check.
    let owner = &claim.owner_references()[0];
    assert_eq!(owner.block_owner_deletion, None);
    assert!(is_for_pod(&pod, &claim, false).is_ok());
    assert_eq!(owner_uid(&claim), Some(POD_UID));
}

#[test]
fn claim_from_template_without_template_metadata_or_spec() {
    let pod = pod_with_resource();
    let claim = claim_from_template(
        &ClaimOwner::pod(&pod),
        &pod_claims(&pod)[0],
        &template(),
        NO_FEATURES,
    )
    .unwrap();
    assert_eq!(claim.metadata.labels, None);
    assert_eq!(
        claim.metadata.annotations,
        Some(BTreeMap::from([(
            POD_CLAIM_NAME_ANNOTATION.to_string(),
            CLAIM.to_string()
        )]))
    );
    assert_eq!(claim.spec, None);
    assert_eq!(claim.metadata.name, None);
    assert_eq!(claim.status, None);
}

#[test]
fn sync_pod_create_with_admin_access() {
    let template = make_template(Some(admin_spec(true)));
    for features in FEATURE_COMBINATIONS {
        let plan = sync_pod_plan(
            &pod_with_resource(),
            &[],
            &[],
            std::slice::from_ref(&template),
            features,
        );
        if features.admin_access {
            // "create with admin and feature gate on"
            assert_no_errors(&plan);
            assert_same_claims(
                "admin on",
                &plan.created,
                &[templated_test_claim_with_admin()],
            );
            assert_eq!(plan.statuses, vec![entry(CLAIM, GENERATED)]);
        } else {
            // "create with admin and feature gate off"
            assert_eq!(
                plan.errors,
                [
                    "pod my-namespace/test-pod, PodResourceClaim acme-resource: admin access is requested, but the feature is disabled"
                ]
            );
            assert!(plan.created.is_empty());
            assert!(plan.statuses.is_empty());
        }
    }
}

#[test]
fn sync_pod_create_with_prioritized_list() {
    let template = make_template(Some(prioritized_spec()));
    for features in FEATURE_COMBINATIONS {
        let plan = sync_pod_plan(
            &pod_with_resource(),
            &[],
            &[],
            std::slice::from_ref(&template),
            features,
        );
        if features.prioritized_list {
            assert_no_errors(&plan);
            assert_same_claims(
                "prioritized on",
                &plan.created,
                &[with_spec(&templated_test_claim(), prioritized_spec())],
            );
        } else {
            assert_eq!(
                plan.errors,
                [
                    "pod my-namespace/test-pod, PodResourceClaim acme-resource: template includes a prioritized list of subrequests, but the feature is disabled"
                ]
            );
            assert!(plan.created.is_empty());
        }
    }
}

#[test]
fn feature_checks_admin_access_first() {
    let spec = json!({"devices": {"requests": [
        {"name": "a", "exactly": {"deviceClassName": "class", "adminAccess": true}},
        {"name": "b", "firstAvailable": [{"name": "s", "deviceClassName": "class"}]},
    ]}});
    let template = make_template(Some(spec));
    let pod = pod_with_resource();
    let pc = &pod_claims(&pod)[0];
    assert_eq!(
        claim_from_template(&ClaimOwner::pod(&pod), pc, &template, NO_FEATURES)
            .unwrap_err()
            .to_string(),
        "admin access is requested, but the feature is disabled"
    );
    let only_admin = Features {
        admin_access: true,
        prioritized_list: false,
        workload_claims: false,
    };
    assert_eq!(
        claim_from_template(&ClaimOwner::pod(&pod), pc, &template, only_admin)
            .unwrap_err()
            .to_string(),
        "template includes a prioritized list of subrequests, but the feature is disabled"
    );
    assert!(claim_from_template(&ClaimOwner::pod(&pod), pc, &template, ALL_FEATURES).is_ok());
}

#[test]
fn sync_pod_nop() {
    let pod = recorded(&pod_with_resource(), GENERATED);
    let plan = sync_pod_plan(
        &pod,
        &[templated_test_claim()],
        &[],
        &[template()],
        NO_FEATURES,
    );
    assert_no_errors(&plan);
    assert!(plan.created.is_empty());
    // Nothing new to record: no apply at all.
    assert!(plan.statuses.is_empty());
}

#[test]
fn sync_pod_recreate() {
    // The recorded claim is gone: a new one is made from the template.
    let pod = recorded(&pod_with_resource(), GENERATED);
    let plan = sync_pod_plan(&pod, &[], &[], &[template()], NO_FEATURES);
    assert_no_errors(&plan);
    assert_same_claims("recreate", &plan.created, &[templated_test_claim()]);
    assert_eq!(plan.statuses, vec![entry(CLAIM, GENERATED)]);
}

#[test]
fn sync_pod_missing_template() {
    let plan = sync_pod_plan(&pod_with_resource(), &[], &[], &[], NO_FEATURES);
    assert_eq!(
        plan.errors,
        [
            r#"pod my-namespace/test-pod, PodResourceClaim acme-resource: resource claim template "my-template": resourceclaimtemplate.resource.k8s.io "my-template" not found"#
        ]
    );
    assert!(plan.created.is_empty());
    assert!(plan.statuses.is_empty());
    // A template in another namespace does not count.
    let elsewhere = edit(&template(), |v| {
        v["metadata"]["namespace"] = json!(OTHER_NS)
    });
    let plan = sync_pod_plan(&pod_with_resource(), &[], &[], &[elsewhere], NO_FEATURES);
    assert_eq!(plan.errors.len(), 1);
}

#[test]
fn sync_pod_find_existing_claim_by_label() {
    // Created earlier, but the status update failed: reused, nothing created, and no
    // template needed.
    let plan = sync_pod_plan(
        &pod_with_resource(),
        &[templated_test_claim()],
        &[],
        &[],
        NO_FEATURES,
    );
    assert_no_errors(&plan);
    assert!(plan.created.is_empty());
    assert_eq!(plan.statuses, vec![entry(CLAIM, GENERATED)]);
}

#[test]
fn sync_pod_find_created_claim_in_cache() {
    let plan = sync_pod_plan(
        &pod_with_resource(),
        &[],
        &[templated_test_claim()],
        &[],
        NO_FEATURES,
    );
    assert_no_errors(&plan);
    assert!(plan.created.is_empty());
    assert_eq!(plan.statuses, vec![entry(CLAIM, GENERATED)]);
}

#[test]
fn sync_pod_owned_claim_for_another_entry_is_not_reused() {
    // Owned by the pod, but generated for a different pod claim.
    let other = templated_claim(
        "other-claim",
        "test-pod-other-claim-",
        pod_owner(POD, POD_UID),
    );
    let plan = sync_pod_plan(
        &pod_with_resource(),
        &[other],
        &[],
        &[template()],
        NO_FEATURES,
    );
    assert_no_errors(&plan);
    assert_eq!(plan.created.len(), 1);
    assert_eq!(plan.statuses, vec![entry(CLAIM, GENERATED)]);
}

#[test]
fn sync_pod_owned_claim_without_annotation_is_not_reused() {
    // Upstream's old "find-existing-claim-by-name" (claims named `<pod>-<claim>` by
    // Kubernetes <= 1.27) is gone: without the annotation, an owned claim is not reused.
    let plan = sync_pod_plan(
        &pod_with_resource(),
        &[test_claim()],
        &[],
        &[template()],
        NO_FEATURES,
    );
    assert_no_errors(&plan);
    assert_same_claims("by-name", &plan.created, &[templated_test_claim()]);
    assert_eq!(plan.statuses, vec![entry(CLAIM, GENERATED)]);
}

#[test]
fn sync_pod_claim_owned_by_other_pod_is_not_reused() {
    // Right annotation, wrong owner: the owner index does not return it.
    let foreign = templated_claim(CLAIM, GENERATE_NAME, pod_owner(OTHER_POD, OTHER_POD_UID));
    let plan = sync_pod_plan(&pod_with_resource(), &[foreign], &[], &[], NO_FEATURES);
    assert!(plan.errors[0].starts_with(
        "pod my-namespace/test-pod, PodResourceClaim acme-resource: resource claim template \"my-template\""
    ));
}

#[test]
fn sync_pod_deleted_or_without_claims() {
    // "pod-deleted"
    let plan = sync_pod_plan(
        &being_deleted(&pod_with_resource()),
        &[],
        &[],
        &[template()],
        NO_FEATURES,
    );
    assert!(plan.created.is_empty() && plan.statuses.is_empty() && plan.errors.is_empty());
    // "no-volumes"
    let plan = sync_pod_plan(&test_pod(), &[], &[], &[template()], NO_FEATURES);
    assert!(plan.created.is_empty() && plan.statuses.is_empty() && plan.errors.is_empty());
    assert!(!uses_claims(&test_pod()));
}

#[test]
fn sync_pod_create_with_other_claim() {
    // Same name, other namespace: irrelevant.
    let other = make_claim(DETERMINISTIC, OTHER_NS, None);
    let plan = sync_pod_plan(
        &pod_with_resource(),
        &[other],
        &[],
        &[template()],
        NO_FEATURES,
    );
    assert_no_errors(&plan);
    assert_same_claims("other", &plan.created, &[templated_test_claim()]);
    assert_eq!(plan.statuses, vec![entry(CLAIM, GENERATED)]);
}

#[test]
fn sync_pod_wrong_claim_owner() {
    // A user's claim with the old deterministic name, not owned by the pod, is neither reused
    // nor touched; without a template the sync fails.
    let conflicting = make_claim(DETERMINISTIC, NS, None);
    let plan = sync_pod_plan(&pod_with_resource(), &[conflicting], &[], &[], NO_FEATURES);
    assert_eq!(
        plan.errors,
        [
            r#"pod my-namespace/test-pod, PodResourceClaim acme-resource: resource claim template "my-template": resourceclaimtemplate.resource.k8s.io "my-template" not found"#
        ]
    );
    assert!(plan.created.is_empty());
}

#[test]
fn sync_pod_recorded_claim_with_wrong_owner_is_replaced() {
    // The status names a claim that another pod owns: a new one is created and recorded.
    let pod = recorded(&pod_with_resource(), DETERMINISTIC);
    let foreign = make_claim(DETERMINISTIC, NS, Some(pod_owner(OTHER_POD, OTHER_POD_UID)));
    assert_eq!(
        is_for_pod(&pod, &foreign, false).unwrap_err().to_string(),
        "ResourceClaim my-namespace/test-pod-acme-resource was not created for Pod my-namespace/test-pod (Pod is not owner)"
    );
    let plan = sync_pod_plan(&pod, &[foreign], &[], &[template()], NO_FEATURES);
    assert_no_errors(&plan);
    assert_same_claims("wrong owner", &plan.created, &[templated_test_claim()]);
    assert_eq!(plan.statuses, vec![entry(CLAIM, GENERATED)]);
}

#[test]
fn foreign_claims_names_recorded_claims_the_pod_does_not_own() {
    let pod = recorded(&pod_with_resource(), DETERMINISTIC);
    let foreign = make_claim(DETERMINISTIC, NS, Some(pod_owner(OTHER_POD, OTHER_POD_UID)));
    let owned = make_claim(DETERMINISTIC, NS, Some(pod_owner(POD, POD_UID)));
    let lookup = |claims: Vec<ResourceClaim>| {
        move |name: &str| {
            claims
                .iter()
                .find(|c| c.name_any() == name)
                .cloned()
                .map(Box::new)
        }
    };
    assert_eq!(
        foreign_claims(&pod, NO_FEATURES, lookup(vec![foreign])),
        [
            "ResourceClaim my-namespace/test-pod-acme-resource was not created for Pod my-namespace/test-pod (Pod is not owner)"
        ]
    );
    assert!(foreign_claims(&pod, NO_FEATURES, lookup(vec![owned])).is_empty());
    assert!(
        foreign_claims(&pod, NO_FEATURES, lookup(Vec::new())).is_empty(),
        "a missing claim is re-created, not foreign"
    );
    // A claim named directly by the pod is shared: never checked for an owner.
    let shared = make_claim("shared", NS, Some(pod_owner(OTHER_POD, OTHER_POD_UID)));
    let direct = make_pod(
        POD,
        POD_UID,
        json!([{ "name": "gpu", "resourceClaimName": "shared" }]),
    );
    assert!(foreign_claims(&direct, NO_FEATURES, lookup(vec![shared])).is_empty());
}

#[test]
fn sync_pod_recorded_and_owned_claim_needs_nothing() {
    let pod = recorded(&pod_with_resource(), DETERMINISTIC);
    let plan = sync_pod_plan(&pod, &[test_claim()], &[], &[template()], NO_FEATURES);
    assert_no_errors(&plan);
    assert!(plan.created.is_empty() && plan.statuses.is_empty());
}

#[test]
fn sync_pod_claim_not_needed() {
    // A nil resourceClaimName in the status: intentionally no claim.
    let pod = with_statuses(&pod_with_resource(), json!([{"name": CLAIM}]));
    assert_eq!(resolve(&pod, &pod_claims(&pod)[0]), Ok(Resolved::NotNeeded));
    let plan = sync_pod_plan(&scheduled(&pod), &[], &[], &[template()], NO_FEATURES);
    assert!(plan.created.is_empty() && plan.statuses.is_empty() && plan.errors.is_empty());
    assert!(plan.reserved.is_empty());
}

#[test]
fn sync_pod_user_claims_are_never_created() {
    let pod = make_pod(
        POD,
        POD_UID,
        json!([{"name": CLAIM, "resourceClaimName": "shared"}]),
    );
    // Missing: the user creates it.
    let plan = sync_pod_plan(&pod, &[], &[], &[template()], NO_FEATURES);
    assert!(plan.created.is_empty() && plan.statuses.is_empty() && plan.errors.is_empty());
    // Present and owned by somebody else: used as is, no owner check.
    let shared = make_claim("shared", NS, Some(pod_owner(OTHER_POD, OTHER_POD_UID)));
    let plan = sync_pod_plan(&pod, std::slice::from_ref(&shared), &[], &[], NO_FEATURES);
    assert!(plan.created.is_empty() && plan.statuses.is_empty() && plan.errors.is_empty());
    // Scheduled and allocated: reserved for the pod.
    let plan = sync_pod_plan(
        &scheduled(&pod),
        &[allocated(&shared)],
        &[],
        &[],
        NO_FEATURES,
    );
    assert_no_errors(&plan);
    assert_same_claims(
        "reserve user claim",
        &plan.reserved,
        &[reserve(&allocated(&shared), &pod)],
    );
}

#[test]
fn sync_pod_unsupported_entry_fails_the_sync() {
    let pod = make_pod(
        POD,
        POD_UID,
        json!([{"name": "broken"}, template_entry(CLAIM)]),
    );
    let plan = sync_pod_plan(&pod, &[], &[], &[template()], NO_FEATURES);
    assert_eq!(
        plan.errors,
        [
            r#"pod my-namespace/test-pod, PodResourceClaim broken: pod "my-namespace/test-pod", spec.resourceClaim "broken": none of the supported fields are set"#
        ]
    );
    // Upstream returns at the first failing entry; this controller still serves the others.
    assert_same_claims("after a failure", &plan.created, &[templated_test_claim()]);
    assert_eq!(plan.statuses, vec![entry(CLAIM, GENERATED)]);
    // Nothing is reserved while the sync fails.
    let plan = sync_pod_plan(&scheduled(&pod), &[], &[], &[template()], NO_FEATURES);
    assert_eq!(plan.errors.len(), 1);
    assert!(plan.reserved.is_empty());
}

#[test]
fn sync_pod_terminal_pods_get_no_claims() {
    // Upstream would re-create the claims of a finished pod that its own cleanup deleted
    // (kubernetes#141274); this controller leaves terminal pods alone.
    for phase in ["Succeeded", "Failed"] {
        let pod = in_phase(&pod_with_resource(), phase);
        let plan = sync_pod_plan(&pod, &[], &[], &[template()], NO_FEATURES);
        assert!(
            plan.created.is_empty() && plan.statuses.is_empty(),
            "{phase}"
        );
        assert_no_errors(&plan);
        let pod = in_phase(&pod_with_node_name(), phase);
        let claim = allocated(&templated_test_claim());
        let plan = sync_pod_plan(&pod, &[claim], &[], &[template()], NO_FEATURES);
        assert!(plan.reserved.is_empty(), "{phase}");
    }
    let running = in_phase(&pod_with_resource(), "Running");
    let plan = sync_pod_plan(&running, &[], &[], &[template()], NO_FEATURES);
    assert_eq!(plan.created.len(), 1);
}

#[test]
fn pod_may_get_claims_table() {
    let cases = [
        ("no phase", pod_with_resource(), true),
        ("pending", in_phase(&pod_with_resource(), "Pending"), true),
        ("running", in_phase(&pod_with_node_name(), "Running"), true),
        ("unknown", in_phase(&pod_with_node_name(), "Unknown"), true),
        (
            "succeeded",
            in_phase(&pod_with_node_name(), "Succeeded"),
            false,
        ),
        ("failed", in_phase(&pod_with_resource(), "Failed"), false),
        ("being deleted", being_deleted(&pod_with_resource()), false),
        (
            "being deleted on a node",
            being_deleted(&pod_with_node_name()),
            false,
        ),
    ];
    for (name, pod, expected) in cases {
        assert_eq!(pod_may_get_claims(&pod), expected, "{name}");
    }
}

#[test]
fn sync_pod_create_for_scheduled_pod() {
    // Created and recorded; the new claim is not allocated, so nothing to reserve and, as the
    // reservation pass sees the recorded name, no "not created yet" error.
    let plan = sync_pod_plan(
        &scheduled(&pod_with_resource()),
        &[],
        &[],
        &[template()],
        NO_FEATURES,
    );
    assert_no_errors(&plan);
    assert_eq!(plan.created.len(), 1);
    assert_eq!(plan.statuses, vec![entry(CLAIM, GENERATED)]);
    assert!(plan.reserved.is_empty());
}

#[test]
fn sync_pod_reserved_for_is_full() {
    let mut claim = allocated(&templated_test_claim());
    for i in 0..RESERVED_FOR_MAX {
        claim = reserve_other(
            &claim,
            json!({"resource": "pods", "name": format!("p{i}"), "uid": format!("u{i}")}),
        );
    }
    let plan = sync_pod_plan(
        &pod_with_node_name(),
        std::slice::from_ref(&claim),
        &[],
        &[],
        NO_FEATURES,
    );
    assert!(needs_reservation(&pod_with_node_name(), &claim, false));
    assert!(plan.reserved.is_empty());
    // Reported, with a warning event on the pod, and the sync does not fail.
    assert_no_errors(&plan);
    let message = "cannot reserve ResourceClaim my-namespace/test-pod-acme-resource--1 for pod my-namespace/test-pod: reservedFor is at its limit of 256";
    assert_eq!(
        problems(&plan.writes.problems),
        [(
            "my-namespace/test-pod-acme-resource--1",
            "reserved-for-full",
            message
        )]
    );
    assert_eq!(
        plan.writes.events,
        [(
            "FailedResourceClaimReservation".to_string(),
            message.to_string()
        )]
    );
}

#[test]
fn sync_pod_failures_are_warning_events() {
    let plan = sync_pod_plan(&pod_with_resource(), &[], &[], &[], NO_FEATURES);
    assert_eq!(
        plan.writes.events,
        [(
            "FailedResourceClaimCreation".to_string(),
            r#"PodResourceClaim acme-resource: resource claim template "my-template": resourceclaimtemplate.resource.k8s.io "my-template" not found"#.to_string()
        )]
    );
}

#[test]
fn sync_pod_two_templates_create_two_claims() {
    let pod = make_pod(
        POD,
        POD_UID,
        json!([template_entry("gpu"), template_entry("nic")]),
    );
    let plan = sync_pod_plan(&pod, &[], &[], &[template()], NO_FEATURES);
    assert_no_errors(&plan);
    let names: Vec<_> = plan
        .created
        .iter()
        .map(|c| c.metadata.generate_name.clone().unwrap())
        .collect();
    assert_eq!(names, ["test-pod-gpu-", "test-pod-nic-"]);
    assert_eq!(
        plan.statuses,
        vec![
            entry("gpu", "test-pod-gpu--1"),
            entry("nic", "test-pod-nic--2")
        ]
    );
    assert_eq!(
        claim_statuses_apply(&ClaimOwner::pod(&pod), &plan.statuses)["status"],
        json!({"resourceClaimStatuses": [
            {"name": "gpu", "resourceClaimName": "test-pod-gpu--1"},
            {"name": "nic", "resourceClaimName": "test-pod-nic--2"},
        ]})
    );
}

#[test]
fn sync_pod_flapping_resourceclaim_statuses() {
    // claimA is recorded and present, claimB not yet created.
    let pod = make_pod(
        POD,
        POD_UID,
        json!([template_entry("claimA"), template_entry("claimB")]),
    );
    let pod = with_statuses(
        &pod,
        json!([{"name": "claimA", "resourceClaimName": "claimA-object"}]),
    );
    let claim_a = make_claim("claimA-object", NS, Some(pod_owner(POD, POD_UID)));
    let plan = sync_pod_plan(
        &pod,
        std::slice::from_ref(&claim_a),
        &[],
        &[template()],
        NO_FEATURES,
    );
    assert_no_errors(&plan);
    assert_same_claims(
        "flapping",
        &plan.created,
        &[templated_claim(
            "claimB",
            "test-pod-claimB-",
            pod_owner(POD, POD_UID),
        )],
    );
    // One apply carrying both: the entry recorded before, and the new one. (Upstream v1.36's
    // `syncPod` applies only the new entry; under server-side apply that removes claimA, which
    // this manager applied earlier. Upstream's newer test expects both.)
    assert_eq!(
        plan.statuses,
        vec![
            entry("claimA", "claimA-object"),
            entry("claimB", "test-pod-claimB--1")
        ]
    );
    let body = claim_statuses_apply(&ClaimOwner::pod(&pod), &plan.statuses);
    let text = body.to_string();
    assert!(text.contains(r#""name":"claimA""#) && text.contains(r#""name":"claimB""#));
    assert_eq!(
        body["status"]["resourceClaimStatuses"],
        json!([
            {"name": "claimA", "resourceClaimName": "claimA-object"},
            {"name": "claimB", "resourceClaimName": "test-pod-claimB--1"},
        ])
    );
}

#[test]
fn sync_pod_add_reserved() {
    let claim = allocated(&templated_test_claim());
    let pod = pod_with_node_name();
    let plan = sync_pod_plan(
        &pod,
        std::slice::from_ref(&claim),
        &[],
        &[template()],
        NO_FEATURES,
    );
    assert_no_errors(&plan);
    assert!(plan.created.is_empty() && plan.statuses.is_empty());
    assert_same_claims("add-reserved", &plan.reserved, &[reserve(&claim, &pod)]);
    // Already reserved: nothing to write.
    let plan = sync_pod_plan(
        &pod,
        &[reserve(&claim, &pod)],
        &[],
        &[template()],
        NO_FEATURES,
    );
    assert!(plan.reserved.is_empty());
    // Not allocated: the scheduler's business.
    let plan = sync_pod_plan(
        &pod,
        &[templated_test_claim()],
        &[],
        &[template()],
        NO_FEATURES,
    );
    assert!(plan.reserved.is_empty());
    // Unscheduled pods are never reserved by this controller.
    let unscheduled = recorded(&pod_with_resource(), GENERATED);
    let plan = sync_pod_plan(&unscheduled, &[claim], &[], &[template()], NO_FEATURES);
    assert!(plan.reserved.is_empty() && plan.errors.is_empty());
}

#[test]
fn reserved_for_pod_appends_a_pod_entry() {
    let pod = pod_with_node_name();
    let claim = reserve(&allocated(&templated_test_claim()), &other_test_pod());
    assert!(needs_reservation(&pod, &claim, false));
    let reserved = reserved_for_consumer(&claim, pod_consumer(&pod));
    assert_eq!(
        serde_json::to_value(
            reserved
                .status
                .as_ref()
                .unwrap()
                .reserved_for
                .as_ref()
                .unwrap()
        )
        .unwrap(),
        json!([
            {"resource": "pods", "name": "test-pod-II", "uid": "uidpod1-II"},
            {"resource": "pods", "name": "test-pod", "uid": "uidpod1"},
        ])
    );
    assert_eq!(
        reserved
            .status
            .as_ref()
            .unwrap()
            .reserved_for
            .as_ref()
            .unwrap()[1],
        consumer(None, "pods", POD, POD_UID)
    );
    assert!(is_reserved_for_pod(&pod, &reserved, false));
    assert!(!needs_reservation(&pod, &reserved, false));
    // Everything else is kept.
    assert_eq!(reserved.metadata, claim.metadata);
    assert_eq!(
        reserved.status.as_ref().unwrap().allocation,
        claim.status.as_ref().unwrap().allocation
    );
    // Unallocated: never.
    assert!(!needs_reservation(&pod, &templated_test_claim(), false));
    // A claim without any status gets one.
    let fresh = reserved_for_consumer(&templated_test_claim(), pod_consumer(&pod));
    assert_eq!(
        fresh.status.unwrap().reserved_for.unwrap(),
        vec![consumer(None, "pods", POD, POD_UID)]
    );
}

// ---------------------------------------------------------------------------------------------
// resourceclaim.Name and IsForPod.

#[test]
fn resolve_entries() {
    let pod = make_pod(
        POD,
        POD_UID,
        json!([
            {"name": "user", "resourceClaimName": "my-claim"},
            template_entry("templated"),
            template_entry("skipped"),
            template_entry("pending"),
            {"name": "empty"},
            {"name": "both", "resourceClaimName": "explicit", "resourceClaimTemplateName": TEMPLATE},
        ]),
    );
    let pod = with_statuses(
        &pod,
        json!([
            {"name": "templated", "resourceClaimName": "generated-1"},
            {"name": "skipped"},
            {"name": "both", "resourceClaimName": "from-status"},
        ]),
    );
    let pcs = pod_claims(&pod);
    assert_eq!(
        resolve(&pod, &pcs[0]),
        Ok(Resolved::Claim {
            name: "my-claim",
            check_owner: false
        })
    );
    assert_eq!(
        resolve(&pod, &pcs[1]),
        Ok(Resolved::Claim {
            name: "generated-1",
            check_owner: true
        })
    );
    assert_eq!(resolve(&pod, &pcs[2]), Ok(Resolved::NotNeeded));
    let err = resolve(&pod, &pcs[3]).unwrap_err();
    assert_eq!(
        err,
        ResolveError::NotCreatedYet {
            pod: "my-namespace/test-pod".into()
        }
    );
    assert_eq!(
        err.to_string(),
        r#"pod "my-namespace/test-pod": ResourceClaim not created yet"#
    );
    assert_eq!(
        resolve(&pod, &pcs[4]).unwrap_err().to_string(),
        r#"pod "my-namespace/test-pod", spec.resourceClaim "empty": none of the supported fields are set"#
    );
    assert_eq!(
        resolve(&pod, &pcs[5]),
        Ok(Resolved::Claim {
            name: "explicit",
            check_owner: false
        })
    );
    assert_eq!(
        resolved_names(&pod),
        ["my-claim", "generated-1", "explicit"]
    );
    assert_eq!(template_names(&pod), [TEMPLATE; 4]);
}

#[test]
fn is_for_pod_checks_namespace_and_controller() {
    let pod = pod_with_resource();
    assert_eq!(is_for_pod(&pod, &test_claim(), false), Ok(()));
    let not_owner = "ResourceClaim my-namespace/test-pod-acme-resource was not created for Pod my-namespace/test-pod (Pod is not owner)";
    // Not owned at all.
    assert_eq!(
        is_for_pod(&pod, &make_claim(DETERMINISTIC, NS, None), false)
            .unwrap_err()
            .to_string(),
        not_owner
    );
    // Owned, but not as controller.
    let mut owner = pod_owner(POD, POD_UID);
    owner["controller"] = json!(false);
    assert_eq!(
        is_for_pod(
            &pod,
            &make_claim(DETERMINISTIC, NS, Some(owner.clone())),
            false
        )
        .unwrap_err()
        .to_string(),
        not_owner
    );
    owner.as_object_mut().unwrap().remove("controller");
    assert_eq!(
        is_for_pod(&pod, &make_claim(DETERMINISTIC, NS, Some(owner)), false)
            .unwrap_err()
            .to_string(),
        not_owner
    );
    // Controlled by another pod.
    let foreign = make_claim(DETERMINISTIC, NS, Some(pod_owner(OTHER_POD, OTHER_POD_UID)));
    assert_eq!(
        is_for_pod(&pod, &foreign, false).unwrap_err().to_string(),
        not_owner
    );
    // Right owner, other namespace.
    let elsewhere = make_claim(DETERMINISTIC, OTHER_NS, Some(pod_owner(POD, POD_UID)));
    assert_eq!(
        is_for_pod(&pod, &elsewhere, false).unwrap_err().to_string(),
        "ResourceClaim not-my-namespace/test-pod-acme-resource is not in the same namespace as Pod my-namespace/test-pod"
    );
}

// ---------------------------------------------------------------------------------------------
// Event handlers: which pods need work, which claims a finished pod releases.

#[test]
fn pod_needs_work_table() {
    let allocated_claim = allocated(&templated_test_claim());
    let foreign = templated_claim(CLAIM, GENERATE_NAME, pod_owner(OTHER_POD, OTHER_POD_UID));
    let user_pod = make_pod(
        POD,
        POD_UID,
        json!([{"name": CLAIM, "resourceClaimName": "shared"}]),
    );
    let cases: Vec<(&str, Pod, Vec<ResourceClaim>, bool)> = vec![
        // Terminal pods: upstream would queue these; this controller leaves them alone.
        (
            "succeeded, claim not created",
            in_phase(&pod_with_resource(), "Succeeded"),
            vec![],
            false,
        ),
        (
            "failed, scheduled, allocated, unreserved",
            in_phase(&pod_with_node_name(), "Failed"),
            vec![allocated_claim.clone()],
            false,
        ),
        (
            "running, claim not created",
            in_phase(&pod_with_resource(), "Running"),
            vec![],
            true,
        ),
        (
            "deleted pod",
            being_deleted(&pod_with_resource()),
            vec![],
            false,
        ),
        (
            "deleted scheduled pod",
            being_deleted(&pod_with_node_name()),
            vec![allocated_claim.clone()],
            false,
        ),
        ("no claims", test_pod(), vec![], false),
        (
            "template entry not resolved yet",
            pod_with_resource(),
            vec![],
            true,
        ),
        (
            "unsupported entry",
            make_pod(POD, POD_UID, json!([{"name": "x"}])),
            vec![],
            true,
        ),
        (
            "template claim missing",
            recorded(&pod_with_resource(), GENERATED),
            vec![],
            true,
        ),
        ("user claim missing", user_pod.clone(), vec![], false),
        (
            "user claim present",
            user_pod.clone(),
            vec![make_claim("shared", NS, None)],
            false,
        ),
        (
            "scheduled, user claim allocated and unreserved",
            scheduled(&user_pod),
            vec![allocated(&make_claim("shared", NS, None))],
            true,
        ),
        (
            "wrong owner",
            recorded(&pod_with_resource(), GENERATED),
            vec![foreign.clone()],
            false,
        ),
        (
            "scheduled, wrong owner, allocated",
            pod_with_node_name(),
            vec![allocated(&foreign)],
            false,
        ),
        (
            "not needed",
            with_statuses(&pod_with_resource(), json!([{"name": CLAIM}])),
            vec![],
            false,
        ),
        (
            "scheduled, allocated, unreserved",
            pod_with_node_name(),
            vec![allocated_claim.clone()],
            true,
        ),
        (
            "scheduled, allocated, reserved",
            pod_with_node_name(),
            vec![reserve(&allocated_claim, &pod_with_node_name())],
            false,
        ),
        (
            "scheduled, unallocated",
            pod_with_node_name(),
            vec![templated_test_claim()],
            false,
        ),
        (
            "unscheduled, allocated, unreserved",
            recorded(&pod_with_resource(), GENERATED),
            vec![allocated_claim.clone()],
            false,
        ),
    ];
    for (name, pod, claims, expected) in cases {
        let claims: Vec<Arc<ResourceClaim>> = claims.into_iter().map(Arc::new).collect();
        let lookup = |n: &str| claims.iter().find(|c| c.name_any() == n).cloned();
        assert_eq!(
            pod_needs_work(&pod, Membership::Alone, NO_FEATURES, lookup),
            expected,
            "{name}"
        );
    }
}

#[test]
fn pod_needs_work_keeps_looking_past_a_settled_claim() {
    // The first claim is fine, the second still has to be created.
    let pod = make_pod(
        POD,
        POD_UID,
        json!([template_entry(CLAIM), template_entry("second")]),
    );
    let pod = recorded(&pod, GENERATED);
    let claims = [Arc::new(templated_test_claim())];
    let lookup = |n: &str| claims.iter().find(|c| c.name_any() == n).cloned();
    assert!(pod_needs_work(&pod, Membership::Alone, NO_FEATURES, lookup));
}

#[test]
fn pod_is_done_and_needs_claims() {
    let running = in_phase(&pod_with_node_name(), "Running");
    let cases = [
        ("running", running.clone(), false),
        ("pending", in_phase(&pod_with_resource(), "Pending"), false),
        ("no phase", pod_with_resource(), false),
        ("succeeded", in_phase(&running, "Succeeded"), true),
        ("failed", in_phase(&running, "Failed"), true),
        (
            "deleted before scheduling",
            being_deleted(&pod_with_resource()),
            true,
        ),
        (
            "deleted while running on a node",
            being_deleted(&running),
            false,
        ),
    ];
    for (name, pod, done) in cases {
        assert_eq!(pod_is_done(&pod), done, "{name}");
        assert_eq!(pod_needs_claims(&pod, false), !done, "{name}");
        assert!(!pod_needs_claims(&pod, true), "{name}: deleted");
    }
}

fn pod_with_extended_claim(phase: &str) -> Pod {
    from(json!({
        "metadata": {"name": POD, "namespace": NS},
        "spec": {"containers": []},
        "status": {
            "phase": phase,
            "extendedResourceClaimStatus": {"resourceClaimName": "test-extended-claim", "requestMappings": []},
        },
    }))
}

#[test]
fn extended_resource_claim_events() {
    // "running-pod-with-extended-resource-claim": looked at, but nothing to do.
    let running = pod_with_extended_claim("Running");
    assert!(uses_claims(&running));
    assert_eq!(extended_claim_name(&running), Some("test-extended-claim"));
    assert!(pod_needs_claims(&running, false));
    assert!(!pod_needs_work(
        &running,
        Membership::Alone,
        NO_FEATURES,
        |_: &str| None::<Arc<ResourceClaim>>
    ));
    // "delete-pod-with-extended-resource-claim"
    assert!(!pod_needs_claims(&running, true));
    assert_eq!(claims_to_release(&running), ["test-extended-claim"]);
    // "completed-pod-with-extended-resource-claim", "faled-pod-with-extended-resource-claim"
    for phase in ["Succeeded", "Failed"] {
        let done = pod_with_extended_claim(phase);
        assert!(!pod_needs_claims(&done, false), "{phase}");
        assert_eq!(claims_to_release(&done), ["test-extended-claim"], "{phase}");
    }
    // "completed-pod-with-regular-and-extended-resource-claim": the regular entry does not
    // resolve, so only the extended claim is released. Upstream also queues the pod (its
    // entry fails to resolve); this controller does not sync terminal pods, so it does not.
    let both = edit(&pod_with_extended_claim("Succeeded"), |v| {
        v["spec"]["resourceClaims"] = json!([{"name": "regular-claim"}]);
    });
    assert_eq!(claims_to_release(&both), ["test-extended-claim"]);
    assert!(!pod_needs_work(
        &both,
        Membership::Alone,
        NO_FEATURES,
        |_: &str| None::<Arc<ResourceClaim>>
    ));
    let still_running = edit(&both, |v| v["status"]["phase"] = json!("Running"));
    assert!(pod_needs_work(
        &still_running,
        Membership::Alone,
        NO_FEATURES,
        |_: &str| None::<Arc<ResourceClaim>>
    ));
    // An empty name is no claim.
    let empty = edit(&running, |v| {
        v["status"]["extendedResourceClaimStatus"]["resourceClaimName"] = json!("");
    });
    assert_eq!(extended_claim_name(&empty), None);
    assert!(!uses_claims(&empty));
}

/// What the real pod handler plans for `pod` with `claims` in the store.
fn pod_change(pod: &Pod, deleted: bool, claims: &[ResourceClaim]) -> PodChange {
    let world = World {
        claims: RefCell::new(claims.to_vec()),
        ..World::default()
    };
    plan_pod_change(pod, deleted, &world, NO_FEATURES)
}

#[test]
fn pod_changes_enqueue_as_upstream_event_handlers() {
    let extended = || vec!["my-namespace/test-extended-claim".to_string()];
    // "running-pod-with-extended-resource-claim": nothing queued.
    let running = pod_with_extended_claim("Running");
    assert_eq!(pod_change(&running, false, &[]), PodChange::default());
    // "delete-pod-with-extended-resource-claim"
    let change = pod_change(&running, true, &[]);
    assert_eq!((change.claims, change.pod), (extended(), false));
    // "completed-pod-with-extended-resource-claim", "faled-pod-with-extended-resource-claim"
    for phase in ["Succeeded", "Failed"] {
        let change = pod_change(&pod_with_extended_claim(phase), false, &[]);
        assert_eq!((change.claims, change.pod), (extended(), false), "{phase}");
    }
    // A pod without claims is not looked at, deleted or not.
    assert_eq!(pod_change(&test_pod(), true, &[]), PodChange::default());
    // A pod whose template claim is missing is synced.
    let change = pod_change(&pod_with_resource(), false, &[]);
    assert_eq!((change.claims.len(), change.pod), (0, true));
    // A deleted pod releases its recorded claim and is not synced.
    let gone = recorded(&pod_with_resource(), GENERATED);
    let change = pod_change(&gone, true, &[templated_test_claim()]);
    assert_eq!(
        (change.claims, change.pod),
        (vec![format!("{NS}/{GENERATED}")], false)
    );
}

#[test]
fn a_recorded_claim_another_pod_owns_is_reported_not_synced() {
    let pod = recorded(&pod_with_resource(), DETERMINISTIC);
    let foreign = make_claim(DETERMINISTIC, NS, Some(pod_owner(OTHER_POD, OTHER_POD_UID)));
    let change = pod_change(&pod, false, &[foreign]);
    assert!(!change.pod);
    assert_eq!(
        problems(&change.problems),
        [(
            "my-namespace/test-pod",
            "claim-not-owned",
            "ResourceClaim my-namespace/test-pod-acme-resource was not created for Pod my-namespace/test-pod (Pod is not owner); it must be deleted before a claim is created for the pod"
        )]
    );
}

#[test]
fn claims_to_release_lists_resolved_claims_first() {
    let pod = make_pod(
        POD,
        POD_UID,
        json!([template_entry(CLAIM), {"name": "user", "resourceClaimName": "shared"}, template_entry("pending")]),
    );
    let pod = recorded(&pod, GENERATED);
    let pod = edit(&pod, |v| {
        v["status"]["extendedResourceClaimStatus"] =
            json!({"resourceClaimName": "ext", "requestMappings": []});
    });
    assert_eq!(claims_to_release(&pod), [GENERATED, "shared", "ext"]);
}

// ---------------------------------------------------------------------------------------------
// TestSyncHandler, claim keys.

struct ClaimCase {
    name: &'static str,
    claim: ResourceClaim,
    pods: Vec<Pod>,
    api_pods: Vec<Pod>,
    deleted_uids: Vec<&'static str>,
    /// The claim afterwards; None when deleted.
    expected: Option<ResourceClaim>,
}

fn claim_case(
    name: &'static str,
    claim: ResourceClaim,
    pods: Vec<Pod>,
    expected: Option<ResourceClaim>,
) -> ClaimCase {
    ClaimCase {
        name,
        claim,
        pods,
        api_pods: vec![],
        deleted_uids: vec![],
        expected,
    }
}

fn without_allocation(claim: &ResourceClaim) -> ResourceClaim {
    edit(claim, |v| {
        v["status"].as_object_mut().unwrap().remove("allocation");
    })
}

#[test]
fn sync_claim_cases() {
    let done_pod = in_phase(&pod_with_resource(), "Succeeded");
    let foo_ref = json!({"apiGroup": "foo.com", "resource": "foo", "name": "foo", "uid": "123"});
    let podgroup_ref = json!({"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "test-podgroup", "uid": "uidpodgroup1"});
    let cases = vec![
        claim_case(
            "stay-reserved-seen",
            test_claim_reserved(),
            vec![pod_with_resource()],
            Some(test_claim_reserved()),
        ),
        ClaimCase {
            api_pods: vec![pod_with_resource()],
            ..claim_case(
                "stay-reserved-not-seen",
                test_claim_reserved(),
                vec![],
                Some(test_claim_reserved()),
            )
        },
        claim_case(
            "clear-reserved-structured",
            protected(&test_claim_reserved()),
            vec![],
            Some(without_allocation(&test_claim_allocated())),
        ),
        claim_case(
            "dont-clear-reserved-structured",
            reserve(&protected(&test_claim_reserved()), &other_test_pod()),
            vec![pod_with_resource()],
            Some(protected(&test_claim_reserved())),
        ),
        claim_case(
            "clear-reserved-structured-deleted",
            being_deleted(&protected(&test_claim_reserved())),
            vec![],
            Some(being_deleted(&without_allocation(&test_claim_allocated()))),
        ),
        claim_case(
            "structured-deleted",
            being_deleted(&protected(&test_claim_allocated())),
            vec![],
            Some(being_deleted(&without_allocation(&test_claim_allocated()))),
        ),
        claim_case(
            "clear-reserved-when-done",
            without_owners(&test_claim_reserved()),
            vec![done_pod.clone()],
            Some(without_owners(&test_claim_allocated())),
        ),
        claim_case(
            "remove-reserved",
            test_claim_reserved_twice(),
            vec![test_pod()],
            Some(test_claim_reserved()),
        ),
        claim_case(
            "delete-claim-when-done",
            test_claim_reserved(),
            vec![done_pod.clone()],
            None,
        ),
        claim_case(
            "clean up pod reservation with non-pod reservation present",
            reserve_other(&test_claim_reserved(), foo_ref.clone()),
            vec![done_pod.clone()],
            Some(reserve_other(&test_claim_allocated(), foo_ref.clone())),
        ),
        claim_case(
            "dont-clear-reserved-podgroup-feature-disabled",
            protected(&reserve_other(
                &test_claim_allocated(),
                podgroup_ref.clone(),
            )),
            vec![],
            Some(protected(&reserve_other(
                &test_claim_allocated(),
                podgroup_ref,
            ))),
        ),
        ClaimCase {
            deleted_uids: vec![POD_UID],
            // The informer still has the pod, but its deletion was seen.
            ..claim_case(
                "clear-reserved-deleted-pod",
                test_claim_reserved(),
                vec![pod_with_resource()],
                Some(test_claim_allocated()),
            )
        },
        claim_case(
            "clear-reserved-replaced-pod",
            without_owners(&test_claim_reserved()),
            vec![edit(&pod_with_resource(), |v| {
                v["metadata"]["uid"] = json!("uidpod2")
            })],
            Some(without_owners(&test_claim_allocated())),
        ),
        ClaimCase {
            api_pods: vec![edit(&pod_with_resource(), |v| {
                v["metadata"]["uid"] = json!("uidpod2")
            })],
            ..claim_case(
                "clear-reserved-replaced-pod-from-api-server",
                without_owners(&test_claim_reserved()),
                vec![],
                Some(without_owners(&test_claim_allocated())),
            )
        },
        claim_case(
            "clear-reserved-deleted-before-scheduling",
            without_owners(&test_claim_reserved()),
            vec![being_deleted(&pod_with_resource())],
            Some(without_owners(&test_claim_allocated())),
        ),
        claim_case(
            "stay-reserved-while-terminating-on-node",
            test_claim_reserved(),
            vec![being_deleted(&pod_with_node_name())],
            Some(test_claim_reserved()),
        ),
        claim_case(
            "keep-allocated-when-already-unreserved",
            protected(&without_owners(&test_claim_allocated())),
            vec![],
            Some(protected(&without_owners(&test_claim_allocated()))),
        ),
        claim_case(
            "delete-unreserved-claim-of-done-pod",
            test_claim_allocated(),
            vec![done_pod.clone()],
            None,
        ),
        claim_case(
            "keep-claim-of-running-pod",
            test_claim(),
            vec![pod_with_node_name()],
            Some(test_claim()),
        ),
        claim_case(
            "deleted-unallocated-claim-loses-finalizer",
            being_deleted(&protected(&test_claim())),
            vec![],
            Some(being_deleted(&test_claim())),
        ),
    ];
    for case in cases {
        let plan = sync_claim_plan(&case.claim, &case.pods, &case.api_pods, &case.deleted_uids);
        assert_eq!(
            plan.delete,
            case.expected.is_none(),
            "{}: delete",
            case.name
        );
        match (&plan.after, &case.expected) {
            (Some(after), Some(expected)) => {
                assert_eq!(normalized(after), normalized(expected), "{}", case.name)
            }
            (None, None) => {}
            (after, expected) => panic!("{}: got {after:?}, want {expected:?}", case.name),
        }
        // Only the builtin finalizer ever goes, and only once unallocated.
        if let Some(updated) = &plan.finalizer_update {
            let finalizers = updated.finalizers();
            assert!(
                !finalizers.iter().any(|f| f == DELETE_PROTECTION_FINALIZER),
                "{}",
                case.name
            );
            let allocation = updated.status.as_ref().and_then(|s| s.allocation.as_ref());
            assert!(allocation.is_none(), "{}", case.name);
        }
    }
}

#[test]
fn sync_claim_drops_reservations_no_pod_can_hold() {
    let claim = reserve_other(
        &test_claim_reserved(),
        json!({"resource": "pods", "name": "a/status", "uid": "u1"}),
    );
    let plan = sync_claim_plan(&claim, &[pod_with_resource()], &[], &[]);
    assert_eq!(
        normalized(plan.after.as_ref().unwrap()),
        normalized(&test_claim_reserved())
    );
    assert_eq!(plan.problems.len(), 1);
    assert_eq!(plan.problems[0].reason, "invalid-reservation");
    assert_eq!(
        plan.problems[0].message,
        r#"reservedFor names pod "a/status", which no pod can be called; dropped"#
    );
}

#[test]
fn sync_claim_keeps_a_generated_claim_another_pod_names() {
    // Its owner is done, but a running pod uses the claim by name: nothing would make it again.
    let done_pod = in_phase(&pod_with_resource(), "Succeeded");
    let user = make_pod(
        OTHER_POD,
        OTHER_POD_UID,
        json!([{"name": "gpu", "resourceClaimName": DETERMINISTIC}]),
    );
    let plan = sync_claim_plan(&test_claim_allocated(), &[done_pod.clone(), user], &[], &[]);
    assert!(!plan.delete);
    assert_eq!(plan.problems.len(), 1);
    assert_eq!(plan.problems[0].reason, "claim-in-use");
    assert_eq!(
        plan.problems[0].message,
        "generated claim my-namespace/test-pod-acme-resource lost its owner pod, but pod my-namespace/test-pod-II uses it by name; not deleted"
    );
    // Once that pod is done too, the claim goes.
    let user_done = in_phase(
        &make_pod(
            OTHER_POD,
            OTHER_POD_UID,
            json!([{"name": "gpu", "resourceClaimName": DETERMINISTIC}]),
        ),
        "Failed",
    );
    let plan = sync_claim_plan(&test_claim_allocated(), &[done_pod, user_done], &[], &[]);
    assert!(plan.delete);
}

#[test]
fn sync_claim_write_sequence() {
    // clear-reserved-structured: one status write (unreserved and deallocated), then the
    // finalizer update.
    let plan = sync_claim_plan(&protected(&test_claim_reserved()), &[], &[], &[]);
    assert_eq!(plan.status_writes.len(), 1);
    assert_eq!(plan.status_writes[0].allocation, None);
    assert_eq!(plan.status_writes[0].reserved_for, Some(vec![]));
    let updated = plan.finalizer_update.unwrap();
    assert_eq!(updated.finalizers(), &[] as &[String]);
    // stay-reserved-seen: no write at all.
    let plan = sync_claim_plan(&test_claim_reserved(), &[pod_with_resource()], &[], &[]);
    assert!(plan.status_writes.is_empty() && plan.finalizer_update.is_none() && !plan.delete);
    // structured-deleted without allocation: finalizer only.
    let plan = sync_claim_plan(&being_deleted(&protected(&test_claim())), &[], &[], &[]);
    assert!(plan.status_writes.is_empty());
    assert!(plan.finalizer_update.is_some());
}

// ---------------------------------------------------------------------------------------------
// The pieces of syncClaim.

#[test]
fn is_pod_consumer_table() {
    assert!(is_pod_consumer(&consumer(None, "pods", POD, POD_UID)));
    assert!(is_pod_consumer(&consumer(Some(""), "pods", POD, POD_UID)));
    assert!(!is_pod_consumer(&consumer(
        Some("scheduling.k8s.io"),
        "podgroups",
        "g",
        "u"
    )));
    assert!(!is_pod_consumer(&consumer(
        Some("foo.com"),
        "pods",
        "p",
        "u"
    )));
    assert!(!is_pod_consumer(&consumer(None, "foo", "foo", "123")));
}

#[test]
fn keep_pod_reservation_table() {
    let entry = consumer(None, "pods", POD, POD_UID);
    let running = in_phase(&pod_with_node_name(), "Running");
    assert!(keep_pod_reservation(&entry, Some(&running)));
    assert!(
        keep_pod_reservation(&entry, Some(&pod_with_resource())),
        "pending"
    );
    assert!(!keep_pod_reservation(&entry, None), "missing");
    assert!(
        !keep_pod_reservation(&entry, Some(&other_test_pod())),
        "replaced"
    );
    assert!(
        !keep_pod_reservation(&entry, Some(&in_phase(&running, "Succeeded"))),
        "succeeded"
    );
    assert!(
        !keep_pod_reservation(&entry, Some(&in_phase(&running, "Failed"))),
        "failed"
    );
    assert!(
        !keep_pod_reservation(&entry, Some(&being_deleted(&pod_with_resource()))),
        "deleted before scheduling"
    );
    assert!(
        keep_pod_reservation(&entry, Some(&being_deleted(&running))),
        "terminating on a node"
    );
    let no_uid = edit(&running, |v| {
        v["metadata"].as_object_mut().unwrap().remove("uid");
    });
    assert!(
        !keep_pod_reservation(&entry, Some(&no_uid)),
        "pod without uid"
    );
}

#[test]
fn release_when_done_without_finalizer_keeps_allocation() {
    // clear-reserved-when-done: not allocated by a builtin controller, so left allocated.
    let claim = without_owners(&test_claim_reserved());
    let Release::Status(status) = release(&claim, vec![]) else {
        panic!("expected a status write");
    };
    assert_eq!(status.reserved_for, Some(vec![]));
    assert_eq!(status.allocation, claim.status.as_ref().unwrap().allocation);
    assert!(status.allocation.is_some());
    let after = ResourceClaim {
        status: Some(status),
        ..claim.clone()
    };
    assert_eq!(finalizer_removed(&after), None);
}

#[test]
fn release_with_finalizer_deallocates() {
    let claim = edit(&test_claim_reserved(), |v| {
        v["metadata"]["finalizers"] = json!([
            "example.com/first",
            DELETE_PROTECTION_FINALIZER,
            "example.com/last"
        ]);
    });
    let Release::Status(status) = release(&claim, vec![]) else {
        panic!("expected a status write");
    };
    assert_eq!(status.allocation, None);
    assert_eq!(status.reserved_for, Some(vec![]));
    let after = ResourceClaim {
        status: Some(status),
        ..claim.clone()
    };
    let updated = finalizer_removed(&after).unwrap();
    assert_eq!(
        updated.finalizers(),
        ["example.com/first", "example.com/last"]
    );
    assert_eq!(updated.status, after.status);
    assert_eq!(
        updated.metadata.owner_references,
        claim.metadata.owner_references
    );
}

#[test]
fn release_partial_keeps_allocation_even_with_finalizer() {
    let claim = protected(&test_claim_reserved_twice());
    let kept = vec![consumer(None, "pods", POD, POD_UID)];
    let Release::Status(status) = release(&claim, kept.clone()) else {
        panic!("expected a status write");
    };
    assert_eq!(status.reserved_for, Some(kept));
    assert!(status.allocation.is_some());
}

#[test]
fn release_on_delete() {
    // Deallocate on delete: unreserved, being deleted, with the finalizer.
    let claim = being_deleted(&protected(&test_claim_allocated()));
    assert_eq!(
        release(&claim, vec![]),
        Release::Finalize {
            clear_allocation: true
        }
    );
    let unallocated = being_deleted(&protected(&test_claim()));
    assert_eq!(
        release(&unallocated, vec![]),
        Release::Finalize {
            clear_allocation: false
        }
    );
    // The reservations go first, together with the allocation.
    let reserved = being_deleted(&protected(&test_claim_reserved()));
    assert!(matches!(release(&reserved, vec![]), Release::Status(s) if s.allocation.is_none()));
    // Still in use while being deleted: nothing yet.
    let entry = consumer(None, "pods", POD, POD_UID);
    assert_eq!(release(&reserved, vec![entry]), Release::Nothing);
    // Without the finalizer there is nothing to finalize.
    assert_eq!(
        release(&being_deleted(&test_claim_allocated()), vec![]),
        Release::Nothing
    );
}

#[test]
fn release_keeps_already_unreserved_claim_allocated() {
    // "keep allocated": deallocation only happens on the used→unused transition.
    assert_eq!(
        release(&protected(&test_claim_allocated()), vec![]),
        Release::Nothing
    );
    assert_eq!(release(&test_claim_allocated(), vec![]), Release::Nothing);
    assert_eq!(release(&test_claim(), vec![]), Release::Nothing);
}

#[test]
fn finalizer_removed_table() {
    assert_eq!(
        finalizer_removed(&protected(&test_claim_allocated())),
        None,
        "still allocated"
    );
    assert_eq!(finalizer_removed(&test_claim()), None, "no finalizer");
    let other = edit(&test_claim(), |v| {
        v["metadata"]["finalizers"] = json!(["example.com/keep"])
    });
    assert_eq!(finalizer_removed(&other), None, "only another finalizer");
    let updated = finalizer_removed(&protected(&test_claim())).unwrap();
    assert_eq!(normalized(&updated), test_claim());
}

#[test]
fn delete_unused_table() {
    let claim = test_claim_allocated();
    let running = in_phase(&pod_with_node_name(), "Running");
    let cases: Vec<(&str, ResourceClaim, Option<Pod>, bool)> = vec![
        (
            "owner done",
            claim.clone(),
            Some(in_phase(&running, "Succeeded")),
            true,
        ),
        (
            "owner failed",
            claim.clone(),
            Some(in_phase(&running, "Failed")),
            true,
        ),
        (
            "owner replaced",
            claim.clone(),
            Some(edit(&running, |v| v["metadata"]["uid"] = json!("uidpod2"))),
            true,
        ),
        (
            "owner deleted before scheduling",
            claim.clone(),
            Some(being_deleted(&pod_with_resource())),
            true,
        ),
        (
            "owner terminating on a node",
            claim.clone(),
            Some(being_deleted(&running)),
            false,
        ),
        ("owner running", claim.clone(), Some(running.clone()), false),
        (
            "owner pending",
            test_claim(),
            Some(pod_with_resource()),
            false,
        ),
        ("owner not in the informer", claim.clone(), None, false),
        (
            "claim already being deleted",
            being_deleted(&claim),
            Some(in_phase(&running, "Succeeded")),
            false,
        ),
        (
            "claim reserved",
            test_claim_reserved(),
            Some(in_phase(&running, "Succeeded")),
            false,
        ),
        (
            "claim without pod owner",
            without_owners(&claim),
            Some(in_phase(&running, "Succeeded")),
            false,
        ),
        (
            "owner is not the controller",
            edit(&claim, |v| {
                v["metadata"]["ownerReferences"][0]["controller"] = json!(false)
            }),
            Some(in_phase(&running, "Succeeded")),
            false,
        ),
        (
            "owner is not a v1 Pod",
            edit(&claim, |v| {
                v["metadata"]["ownerReferences"][0]["apiVersion"] =
                    json!("scheduling.k8s.io/v1alpha2");
                v["metadata"]["ownerReferences"][0]["kind"] = json!("PodGroup");
            }),
            Some(in_phase(&running, "Succeeded")),
            false,
        ),
    ];
    for (name, claim, owner, expected) in cases {
        assert_eq!(delete_unused(&claim, owner.as_ref()), expected, "{name}");
    }
}

#[test]
fn owning_pod_needs_a_v1_pod_controller() {
    assert_eq!(owning_pod(&test_claim()), Some((POD, POD_UID)));
    assert_eq!(owning_pod(&make_claim("c", NS, None)), None);
    let claim: ResourceClaim = from(
        json!({"metadata": {"name": "c", "namespace": NS, "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "not-controller", "uid": "u1", "controller": false},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u2", "controller": true},
            {"apiVersion": "v1", "kind": "Pod", "name": "controller", "uid": "u3", "controller": true},
        ]}}),
    );
    assert_eq!(owning_pod(&claim), Some(("controller", "u3")));
    assert_eq!(owner_uid(&claim), Some("u3"));
}

#[test]
fn find_orphan_matches_the_annotation_only() {
    let owned = |claims: Vec<ResourceClaim>| -> Vec<Arc<ResourceClaim>> {
        claims.into_iter().map(Arc::new).collect()
    };
    assert!(find_orphan(CLAIM, &owned(vec![])).is_none());
    assert!(
        find_orphan(CLAIM, &owned(vec![test_claim()])).is_none(),
        "no annotation"
    );
    let other = templated_claim("other", "test-pod-other-", pod_owner(POD, POD_UID));
    assert!(
        find_orphan(CLAIM, &owned(vec![other.clone()])).is_none(),
        "other pod claim"
    );
    let first = edit(&templated_test_claim(), |v| {
        v["metadata"]["name"] = json!("test-pod-acme-resource-aaaaa")
    });
    let second = edit(&templated_test_claim(), |v| {
        v["metadata"]["name"] = json!("test-pod-acme-resource-zzzzz")
    });
    let candidates = owned(vec![other, second, first]);
    let found = find_orphan(CLAIM, &candidates).unwrap();
    assert_eq!(
        found.name_any(),
        "test-pod-acme-resource-aaaaa",
        "first by name"
    );
}

// ---------------------------------------------------------------------------------------------
// Metrics.

#[test]
fn gauge_labels_table() {
    let cases: Vec<(&str, ResourceClaim, [&str; 3])> = vec![
        ("plain", test_claim(), ["false", "false", ""]),
        (
            "plain allocated",
            test_claim_allocated(),
            ["true", "false", ""],
        ),
        (
            "template",
            templated_test_claim(),
            ["false", "false", "resource_claim_template"],
        ),
        (
            "template allocated",
            allocated(&templated_test_claim()),
            ["true", "false", "resource_claim_template"],
        ),
        (
            "template with admin access",
            templated_test_claim_with_admin(),
            ["false", "true", "resource_claim_template"],
        ),
        (
            "template with admin access allocated",
            allocated(&templated_test_claim_with_admin()),
            ["true", "true", "resource_claim_template"],
        ),
        (
            "extended resources",
            extended_test_claim(),
            ["false", "false", "extended_resource"],
        ),
        (
            "extended resources allocated",
            allocated(&extended_test_claim()),
            ["true", "false", "extended_resource"],
        ),
        (
            "extended wins over template",
            edit(&templated_test_claim(), |v| {
                v["metadata"]["annotations"][EXTENDED_RESOURCE_CLAIM_ANNOTATION] = json!("true")
            }),
            ["false", "false", "extended_resource"],
        ),
        (
            "extended annotation not true",
            edit(&test_claim(), |v| {
                v["metadata"]["annotations"] = json!({EXTENDED_RESOURCE_CLAIM_ANNOTATION: "false"})
            }),
            ["false", "false", ""],
        ),
        (
            "empty pod claim annotation",
            edit(&test_claim(), |v| {
                v["metadata"]["annotations"] = json!({POD_CLAIM_NAME_ANNOTATION: ""})
            }),
            ["false", "false", ""],
        ),
        (
            "admin access on a plain claim",
            with_spec(&test_claim(), admin_spec(true)),
            ["false", "true", ""],
        ),
    ];
    for (name, claim, expected) in cases {
        assert_eq!(gauge_labels(&claim), expected, "{name}");
    }
}

#[test]
fn admin_access_label() {
    // TestGetAdminAccessMetricLabel.
    let spec =
        |requests: Value| -> ResourceClaimSpec { from(json!({"devices": {"requests": requests}})) };
    let exactly = |admin: Value| json!({"name": "r", "exactly": {"deviceClassName": "class", "adminAccess": admin}});
    let cases: Vec<(&str, Option<ResourceClaimSpec>, bool)> = vec![
        ("no spec", None, false),
        ("no requests", Some(from(json!({"devices": {}}))), false),
        (
            "admin access false",
            Some(spec(json!([exactly(json!(false))]))),
            false,
        ),
        (
            "admin access true",
            Some(spec(json!([exactly(json!(true))]))),
            true,
        ),
        (
            "prioritized list",
            Some(spec(
                json!([{"name": "r", "firstAvailable": [{"name": "s", "deviceClassName": "c"}]}]),
            )),
            false,
        ),
        (
            "multiple requests, one with admin access true",
            Some(spec(json!([exactly(json!(false)), exactly(json!(true))]))),
            true,
        ),
        (
            "multiple requests, all admin access false or nil",
            Some(spec(json!([exactly(Value::Null), exactly(json!(false))]))),
            false,
        ),
    ];
    for (name, spec, expected) in cases {
        assert_eq!(needs_admin_access(spec.as_ref()), expected, "{name}");
    }
}

#[test]
fn prioritized_list_detection() {
    let spec: ResourceClaimSpec = from(prioritized_spec());
    assert!(has_prioritized_list(Some(&spec)));
    let empty: ResourceClaimSpec =
        from(json!({"devices": {"requests": [{"name": "r", "firstAvailable": []}]}}));
    assert!(!has_prioritized_list(Some(&empty)));
    let plain: ResourceClaimSpec = from(admin_spec(true));
    assert!(!has_prioritized_list(Some(&plain)));
    assert!(!has_prioritized_list(None));
}

mod podgroup;
