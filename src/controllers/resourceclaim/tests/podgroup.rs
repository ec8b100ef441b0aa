//! Upstream's PodGroup cases of `TestSyncHandler` (those with `workloadResourceClaimsEnabled`,
//! DRAWorkloadResourceClaims), run through the real syncPod, syncPodGroup and syncClaim
//! against the plain-object `World` of the parent module, plus the PodGroup side of the event
//! handlers (`enqueuePodGroup`, `podNeedsWork` for a pod in a group).

use super::super::Key;
use super::super::plan::plan_group_change;
use super::super::sync::sync_group;
use super::*;

const GROUP: &str = "test-podgroup";
const GROUP_UID: &str = "uidpodgroup1";
/// The generateName of claims made for `acme-resource` of `test-podgroup`.
const GROUP_GENERATE_NAME: &str = "test-podgroup-acme-resource-";
const GROUP_GENERATED: &str = "test-podgroup-acme-resource--1";

fn make_group(claims: Value) -> PodGroup {
    from(json!({
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": GROUP, "namespace": NS, "uid": GROUP_UID},
        "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": claims},
    }))
}

/// `testPodGroupWithResource`: one claim `acme-resource` from template `my-template`.
fn group_with_resource() -> PodGroup {
    make_group(json!([template_entry(CLAIM)]))
}

/// The group with `acme-resource` recorded as `claim`.
fn group_recorded(group: &PodGroup, claim: &str) -> PodGroup {
    edit(group, |v| {
        v["status"]["resourceClaimStatuses"] = json!([{"name": CLAIM, "resourceClaimName": claim}])
    })
}

/// `podInPodGroup`.
fn in_group(pod: &Pod) -> Pod {
    edit(pod, |v| {
        v["spec"]["schedulingGroup"] = json!({"podGroupName": GROUP})
    })
}

fn group_owner() -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "name": GROUP, "uid": GROUP_UID, "controller": true})
}

/// `templatedTestPodGroupClaim`.
fn templated_group_claim() -> ResourceClaim {
    templated_claim(CLAIM, GROUP_GENERATE_NAME, group_owner())
}

fn group_ref() -> Value {
    json!({"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": GROUP, "uid": GROUP_UID})
}

/// `reserveClaim(claim, testPodGroupWithResource)`.
fn reserved_for_group(claim: &ResourceClaim) -> ResourceClaim {
    reserve_other(claim, group_ref())
}

/// What a sync did, with the error's message.
struct Run {
    writes: Writes,
    claims: Vec<ResourceClaim>,
    error: Option<String>,
}

fn run(world: World, key: Key) -> Run {
    let result = futures::executor::block_on(async {
        match &key {
            Key::Pod(k) => sync_pod(&world, k).await,
            Key::Claim(k) => sync_claim(&world, k).await,
            Key::PodGroup(k) => sync_group(&world, k).await,
        }
    });
    Run {
        writes: world.writes.take(),
        claims: world.claims.take(),
        error: result.err().map(|e| e.to_string()),
    }
}

fn world(
    pods: Vec<Pod>,
    groups: Vec<PodGroup>,
    claims: Vec<ResourceClaim>,
    templates: Vec<ResourceClaimTemplate>,
    features: Features,
) -> World {
    World {
        pods,
        groups,
        claims: RefCell::new(claims),
        templates,
        features: Some(features),
        ..World::default()
    }
}

/// Syncs the PodGroup, with DRAWorkloadResourceClaims on.
fn run_group(
    groups: Vec<PodGroup>,
    claims: Vec<ResourceClaim>,
    templates: Vec<ResourceClaimTemplate>,
) -> Run {
    run(
        world(vec![], groups, claims, templates, WORKLOAD),
        group_key(),
    )
}

/// Syncs `test-pod` in `test-podgroup`, with its claim from `my-template`.
fn run_pod(
    groups: Vec<PodGroup>,
    claims: Vec<ResourceClaim>,
    templates: Vec<ResourceClaimTemplate>,
    features: Features,
) -> Run {
    let pod = in_group(&pod_with_resource());
    run(
        world(vec![pod], groups, claims, templates, features),
        pod_key(),
    )
}

fn group_key() -> Key {
    Key::PodGroup(format!("{NS}/{GROUP}"))
}

fn pod_key() -> Key {
    Key::Pod(format!("{NS}/{POD}"))
}

#[test]
fn create_for_pod_group() {
    let run = run_group(vec![group_with_resource()], vec![], vec![template()]);
    assert_eq!(run.error, None);
    assert_same_claims("create", &run.writes.created, &[templated_group_claim()]);
    assert_eq!(
        run.writes.group_statuses,
        vec![entry(CLAIM, GROUP_GENERATED)]
    );
    assert!(run.writes.statuses.is_empty());
    let body = claim_statuses_apply(
        &ClaimOwner::group(&group_with_resource()),
        &run.writes.group_statuses,
    );
    assert_eq!(
        body,
        json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": GROUP, "namespace": NS},
            "status": {"resourceClaimStatuses": [{"name": CLAIM, "resourceClaimName": GROUP_GENERATED}]},
        })
    );
}

#[test]
fn generated_group_claims_are_cut_as_pod_claims() {
    // Upstream cuts `<podgroup>-<claim>-` exactly as `<pod>-<claim>-`.
    let long = "g".repeat(60);
    let group = edit(&group_with_resource(), |v| {
        v["metadata"]["name"] = json!(long)
    });
    let claim = claim_from_template(
        &ClaimOwner::group(&group),
        &group.claims()[0],
        &template(),
        WORKLOAD,
    )
    .unwrap();
    assert_eq!(
        claim.metadata.generate_name.as_deref(),
        Some(generate_name(&long, CLAIM).as_str())
    );
    assert_eq!(
        claim.metadata.generate_name.as_deref().map(str::len),
        Some(57 * 60 / 75 + 1 + 57 * 13 / 75)
    );
}

#[test]
fn pod_of_a_group_leaves_the_shared_claim_to_the_group() {
    // "skip create for Pod with PodGroup before/after template exists".
    for templates in [vec![], vec![template()]] {
        let run = run_pod(vec![group_with_resource()], vec![], templates, WORKLOAD);
        assert_eq!(run.error, None);
        assert!(run.writes.created.is_empty());
        assert!(run.writes.statuses.is_empty());
    }
}

#[test]
fn update_pod_status_with_pod_group_claim() {
    let run = run_pod(
        vec![group_with_resource()],
        vec![templated_group_claim()],
        vec![template()],
        WORKLOAD,
    );
    assert_eq!(run.error, None);
    assert!(run.writes.created.is_empty());
    assert_eq!(run.writes.statuses, vec![entry(CLAIM, GROUP_GENERATED)]);
}

#[test]
fn pod_in_group_gets_its_own_claim_when_the_feature_is_disabled() {
    let run = run_pod(
        vec![group_with_resource()],
        vec![templated_group_claim()],
        vec![template()],
        NO_FEATURES,
    );
    assert_eq!(run.error, None);
    assert_same_claims("own claim", &run.writes.created, &[templated_test_claim()]);
    assert_eq!(run.writes.statuses, vec![entry(CLAIM, GENERATED)]);
}

#[test]
fn pod_whose_group_is_not_known_fails_as_upstream() {
    let run = run_pod(vec![], vec![], vec![template()], WORKLOAD);
    assert_eq!(
        run.error.as_deref(),
        Some(
            "get PodGroup for Pod my-namespace/test-pod: podgroup.scheduling.k8s.io \"test-podgroup\" not found"
        )
    );
    assert!(run.writes.created.is_empty());
}

#[test]
fn nop_and_recreate_for_pod_group() {
    let recorded_group = group_recorded(&group_with_resource(), GROUP_GENERATED);
    // nop: the recorded claim is there.
    let nop = run_group(
        vec![recorded_group.clone()],
        vec![templated_group_claim()],
        vec![template()],
    );
    assert_eq!(nop.error, None);
    assert!(nop.writes.created.is_empty());
    assert!(nop.writes.group_statuses.is_empty());
    // recreate: it was deleted.
    let recreate = run_group(vec![recorded_group], vec![], vec![template()]);
    assert_eq!(recreate.error, None);
    assert_same_claims(
        "recreate",
        &recreate.writes.created,
        &[templated_group_claim()],
    );
    assert_eq!(
        recreate.writes.group_statuses,
        vec![entry(CLAIM, GROUP_GENERATED)]
    );
}

#[test]
fn missing_template_podgroup() {
    let run = run_group(vec![group_with_resource()], vec![], vec![]);
    let inner = "resource claim template \"my-template\": resourceclaimtemplate.resource.k8s.io \"my-template\" not found";
    assert_eq!(
        run.error.as_deref(),
        Some(
            format!(
                "PodGroup my-namespace/test-podgroup, PodGroupResourceClaim acme-resource: {inner}"
            )
            .as_str()
        )
    );
    assert_eq!(
        run.writes.events,
        vec![(
            "FailedResourceClaimCreation".to_string(),
            format!("PodGroupResourceClaim acme-resource: {inner}")
        )]
    );
    assert_eq!(
        run.writes.event_objects,
        vec![("PodGroup".to_string(), GROUP.to_string())]
    );
}

#[test]
fn find_existing_claim_podgroup() {
    // "find-existing-claim-by-label-podgroup" and "find-created-claim-in-cache-podgroup":
    // the World's claims are the informer and the mutation cache in one.
    let run = run_group(
        vec![group_with_resource()],
        vec![templated_group_claim()],
        vec![template()],
    );
    assert_eq!(run.error, None);
    assert!(run.writes.created.is_empty());
    assert_eq!(
        run.writes.group_statuses,
        vec![entry(CLAIM, GROUP_GENERATED)]
    );
}

#[test]
fn no_such_or_deleted_podgroup() {
    for groups in [vec![], vec![being_deleted(&group_with_resource())]] {
        let run = run_group(groups, vec![], vec![template()]);
        assert_eq!(run.error, None);
        assert!(run.writes.created.is_empty());
        assert!(run.writes.group_statuses.is_empty());
    }
}

#[test]
fn create_with_other_claim_podgroup() {
    let elsewhere = make_claim(DETERMINISTIC, OTHER_NS, None);
    let run = run_group(
        vec![group_with_resource()],
        vec![elsewhere],
        vec![template()],
    );
    assert_eq!(run.error, None);
    assert_same_claims("create", &run.writes.created, &[templated_group_claim()]);
}

#[test]
fn wrong_claim_owner_podgroup() {
    let conflicting = make_claim("test-podgroup-acme-resource", NS, None);
    let run = run_group(
        vec![group_with_resource()],
        vec![conflicting.clone()],
        vec![],
    );
    assert!(
        run.error.as_deref().is_some_and(
            |e| e.ends_with("resourceclaimtemplate.resource.k8s.io \"my-template\" not found")
        ),
        "{:?}",
        run.error
    );
    assert_eq!(run.claims, vec![conflicting]);
}

fn group_claim_run(
    claim: ResourceClaim,
    groups: Vec<PodGroup>,
    api_groups: Vec<PodGroup>,
    deleted_uids: Vec<&'static str>,
    features: Features,
) -> Run {
    let key = Key::Claim(key_of(&claim));
    let world = World {
        groups,
        api_groups,
        deleted_uids,
        claims: RefCell::new(vec![claim]),
        features: Some(features),
        ..World::default()
    };
    run(world, key)
}

fn allocated_group_claim() -> ResourceClaim {
    protected(&reserved_for_group(&test_claim_allocated()))
}

#[test]
fn clear_reserved_podgroup() {
    let run = group_claim_run(allocated_group_claim(), vec![], vec![], vec![], WORKLOAD);
    assert_eq!(run.error, None);
    let after = &run.claims[0];
    assert!(reserved_for(after).is_empty());
    assert!(after.status.as_ref().unwrap().allocation.is_none());
    assert!(after.finalizers().is_empty());
}

#[test]
fn dont_clear_reserved_podgroup_feature_disabled() {
    let run = group_claim_run(allocated_group_claim(), vec![], vec![], vec![], NO_FEATURES);
    assert_eq!(run.error, None);
    assert_eq!(run.claims, vec![allocated_group_claim()]);
    assert!(run.writes.status_writes.is_empty());
}

#[test]
fn podgroup_reservations_follow_the_group() {
    let group = group_with_resource();
    let replaced = edit(&group, |v| v["metadata"]["uid"] = json!("another-uid"));
    // (case, store, API server, deleted UIDs, kept)
    type Case = (
        &'static str,
        Vec<PodGroup>,
        Vec<PodGroup>,
        Vec<&'static str>,
        bool,
    );
    let cases: Vec<Case> = vec![
        ("in the store", vec![group.clone()], vec![], vec![], true),
        (
            "replaced in the store",
            vec![replaced.clone()],
            vec![],
            vec![],
            false,
        ),
        (
            "seen deleted",
            vec![group.clone()],
            vec![],
            vec![GROUP_UID],
            false,
        ),
        (
            "only the API server has it",
            vec![],
            vec![group.clone()],
            vec![],
            true,
        ),
        (
            "replaced on the API server",
            vec![],
            vec![replaced],
            vec![],
            false,
        ),
        ("gone", vec![], vec![], vec![], false),
    ];
    for (name, groups, api_groups, deleted, kept) in cases {
        let run = group_claim_run(
            allocated_group_claim(),
            groups,
            api_groups,
            deleted,
            WORKLOAD,
        );
        assert_eq!(run.error, None, "{name}");
        assert_eq!(
            reserved_for(&run.claims[0]).len(),
            usize::from(kept),
            "{name}"
        );
    }
}

#[test]
fn a_claim_of_a_deleted_group_is_left_to_the_garbage_collector() {
    // Upstream deletes only pod-owned claims; the group's owner reference lets the garbage
    // collector delete it.
    let claim = protected(&reserved_for_group(&allocated(&templated_group_claim())));
    let run = group_claim_run(claim, vec![], vec![], vec![GROUP_UID], WORKLOAD);
    assert_eq!(run.error, None);
    assert!(!run.writes.deleted);
    assert!(reserved_for(&run.claims[0]).is_empty());
}

#[test]
fn add_reserved_podgroup() {
    let pod = in_group(&pod_with_node_name());
    let claim = allocated(&templated_test_claim());
    for (features, expected) in [
        (WORKLOAD, reserved_for_group(&claim)),
        (NO_FEATURES, reserve(&claim, &pod)),
    ] {
        let run = run(
            world(
                vec![pod.clone()],
                vec![group_with_resource()],
                vec![claim.clone()],
                vec![template()],
                features,
            ),
            pod_key(),
        );
        assert_eq!(run.error, None);
        assert_eq!(run.writes.status_writes, vec![expected.clone()]);
    }
}

#[test]
fn a_claim_reserved_for_the_group_needs_no_pod_reservation() {
    let pod = in_group(&pod_with_node_name());
    let claim = reserved_for_group(&allocated(&templated_test_claim()));
    assert!(!needs_reservation(&pod, &claim, true));
    assert!(needs_reservation(&pod, &claim, false));
    let run = run(
        world(
            vec![pod],
            vec![group_with_resource()],
            vec![claim],
            vec![template()],
            WORKLOAD,
        ),
        pod_key(),
    );
    assert_eq!(run.error, None);
    assert!(run.writes.status_writes.is_empty());
}

#[test]
fn bind_to_needs_the_same_entry_in_the_group() {
    let pod = in_group(&pod_with_resource());
    let pc = &pod_claims(&pod)[0];
    let group = group_with_resource();
    assert!(is_group_consumer(&bind_to(&pod, Some(&group), pc).unwrap()));
    // Another template of the same name: the pod's own.
    let other = make_group(json!([{"name": CLAIM, "resourceClaimTemplateName": "other"}]));
    assert_eq!(bind_to(&pod, Some(&other), pc).unwrap(), pod_consumer(&pod));
    assert_eq!(bind_to(&pod, None, pc).unwrap(), pod_consumer(&pod));
    let broken = make_group(json!([{"name": "x"}]));
    assert_eq!(
        bind_to(&pod, Some(&broken), pc).unwrap_err().to_string(),
        "PodGroup my-namespace/test-podgroup claim x: none of the supported fields are set"
    );
    let elsewhere = edit(&group, |v| v["metadata"]["name"] = json!("other-group"));
    assert_eq!(
        bind_to(&pod, Some(&elsewhere), pc).unwrap_err().to_string(),
        "Pod my-namespace/test-pod belongs to PodGroup my-namespace/test-podgroup, not PodGroup my-namespace/other-group"
    );
}

#[test]
fn is_for_pod_accepts_the_group_owner_with_the_gate() {
    let pod = in_group(&pod_with_resource());
    let claim = templated_group_claim();
    assert_eq!(is_for_pod(&pod, &claim, true), Ok(()));
    assert_eq!(
        is_for_pod(&pod, &claim, false).unwrap_err().to_string(),
        "ResourceClaim my-namespace/test-podgroup-acme-resource--1 was not created for Pod my-namespace/test-pod (Pod is not owner)"
    );
    let foreign = make_claim(DETERMINISTIC, NS, None);
    assert_eq!(
        is_for_pod(&pod, &foreign, true).unwrap_err().to_string(),
        "ResourceClaim my-namespace/test-pod-acme-resource was not created for Pod my-namespace/test-pod (neither Pod nor PodGroup test-podgroup is the owner)"
    );
    assert_eq!(is_for_group(&group_with_resource(), &claim), Ok(()));
    assert_eq!(
        is_for_group(&group_with_resource(), &foreign)
            .unwrap_err()
            .to_string(),
        "ResourceClaim my-namespace/test-pod-acme-resource was not created for PodGroup my-namespace/test-podgroup (PodGroup is not owner)"
    );
}

#[test]
fn resolve_group_entries() {
    let group = group_with_resource();
    let entry = &group.claims()[0];
    assert_eq!(
        resolve_group(&group, entry).unwrap_err().to_string(),
        "PodGroup my-namespace/test-podgroup: ResourceClaim not created yet"
    );
    let recorded = group_recorded(&group, GROUP_GENERATED);
    assert_eq!(
        resolve_group(&recorded, &recorded.claims()[0]),
        Ok(Resolved::Claim {
            name: GROUP_GENERATED,
            check_owner: true
        })
    );
    let broken = make_group(json!([{"name": "x"}]));
    assert_eq!(
        resolve_group(&broken, &broken.claims()[0])
            .unwrap_err()
            .to_string(),
        "PodGroup my-namespace/test-podgroup, spec.resourceClaim x: none of the supported fields are set"
    );
}

#[test]
fn pod_group_changes_enqueue_as_upstream() {
    let stores = world(vec![], vec![], vec![], vec![], WORKLOAD);
    // A new group whose claim is not created yet needs a sync.
    let change = plan_group_change(&group_with_resource(), false, &stores);
    assert!(change.group);
    assert!(change.claims.is_empty());
    // Its recorded claim exists: nothing to do.
    let recorded = group_recorded(&group_with_resource(), GROUP_GENERATED);
    let with_claim = world(
        vec![],
        vec![],
        vec![templated_group_claim()],
        vec![],
        WORKLOAD,
    );
    assert_eq!(
        plan_group_change(&recorded, false, &with_claim),
        Default::default()
    );
    // Deleted: its claims are synced (to drop the group's reservations).
    let deleted = plan_group_change(&recorded, true, &with_claim);
    assert_eq!(deleted.claims, vec![format!("{NS}/{GROUP_GENERATED}")]);
    // A group being deleted, or without claims, is not synced.
    assert!(!plan_group_change(&being_deleted(&group_with_resource()), false, &stores).group);
    assert_eq!(
        plan_group_change(&make_group(json!([])), false, &stores),
        Default::default()
    );
}

#[test]
fn pod_needs_no_work_for_a_claim_its_group_creates() {
    let pod = in_group(&pod_with_resource());
    let group = group_with_resource();
    let none = |_: &str| None::<Arc<ResourceClaim>>;
    // Nothing recorded yet: synced, as upstream (it records the group's claim once there).
    assert!(pod_needs_work(&pod, Membership::In(&group), WORKLOAD, none));
    // Recorded, but the claim is gone: the group re-creates it, not the pod.
    let recorded = recorded(&pod, GROUP_GENERATED);
    assert!(!pod_needs_work(
        &recorded,
        Membership::In(&group),
        WORKLOAD,
        none
    ));
    // The group is not known yet: the pod is synced (and fails until it is).
    assert!(pod_needs_work(
        &recorded,
        Membership::Missing,
        WORKLOAD,
        none
    ));
    // Gate off: the pod's own claim is created.
    assert!(pod_needs_work(
        &recorded,
        Membership::Alone,
        NO_FEATURES,
        none
    ));
    // Once the group recorded its claim, the pod records it too.
    let claim = templated_group_claim();
    let lookup = |_: &str| Some(Arc::new(claim.clone()));
    assert!(!pod_needs_work(
        &recorded,
        Membership::In(&group),
        WORKLOAD,
        lookup
    ));
    // Scheduled, allocated, not reserved for the group: the pod reserves it for the group.
    let allocated_claim = allocated(&claim);
    let on_node = scheduled(&recorded);
    let lookup = |_: &str| Some(Arc::new(allocated_claim.clone()));
    assert!(pod_needs_work(
        &on_node,
        Membership::In(&group),
        WORKLOAD,
        lookup
    ));
}
