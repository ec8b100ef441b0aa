//! resourceclaim-controller against kube-testserver: claims from templates recorded in the
//! pod status, no double create while the watch lags, reservations for pods bound to a
//! node, release and deallocation when pods finish, bad input, conflicts and metrics.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kcm::k8s::podgroup::PodGroup;
use kcm_testsupport::{DEADLINE, InProcess, eventually, eventually_some};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube_testserver::{Fault, TestServer};
use serde_json::{Value, json};

const NS: &str = "default";
const CONTROLLERS: &str = "--controllers=resourceclaim-controller";
const FINALIZER: &str = "resource.kubernetes.io/delete-protection";

async fn create<K>(api: &Api<K>, body: Value) -> K
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(body).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

async fn create_template(server: &TestServer, name: &str, admin_access: bool) {
    let templates: Api<k8s_openapi::api::resource::v1::ResourceClaimTemplate> =
        Api::namespaced(server.client(), NS);
    create(
        &templates,
        json!({
            "metadata": { "name": name },
            "spec": {
                "metadata": { "labels": { "team": "ml" }, "annotations": { "cost-center": "42" } },
                "spec": { "devices": { "requests": [{ "name": "gpu", "exactly": {
                    "deviceClassName": "gpu.example.com", "adminAccess": admin_access } }] } }
            }
        }),
    )
    .await;
}

/// A pod with claims `(podClaimName, templateName)` from templates, optionally on a node.
async fn create_pod(
    server: &TestServer,
    name: &str,
    claims: &[(&str, &str)],
    node: Option<&str>,
) -> Pod {
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    let resource_claims: Vec<Value> = claims
        .iter()
        .map(|(claim, template)| json!({ "name": claim, "resourceClaimTemplateName": template }))
        .collect();
    let mut spec =
        json!({ "containers": [{ "name": "c", "image": "i" }], "resourceClaims": resource_claims });
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    create(&pods, json!({ "metadata": { "name": name }, "spec": spec })).await
}

/// The pod's `status.resourceClaimStatuses` as (name, claim) pairs, sorted.
async fn claim_statuses(server: &TestServer, pod: &str) -> Vec<(String, Option<String>)> {
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    let pod = pods.get(pod).await.unwrap();
    let mut entries: Vec<_> = pod
        .status
        .and_then(|s| s.resource_claim_statuses)
        .unwrap_or_default()
        .into_iter()
        .map(|s| (s.name, s.resource_claim_name))
        .collect();
    entries.sort();
    entries
}

async fn wait_statuses(server: &TestServer, pod: &str, count: usize) -> Vec<(String, String)> {
    let mut last = Vec::new();
    let found = tokio::time::timeout(DEADLINE, async {
        loop {
            last = claim_statuses(server, pod).await;
            if last.len() == count && last.iter().all(|(_, c)| c.is_some()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        found.is_ok(),
        "{pod}: wanted {count} claim statuses, last saw {last:?}"
    );
    last.into_iter().map(|(n, c)| (n, c.unwrap())).collect()
}

async fn claim_count(server: &TestServer) -> usize {
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    claims
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len()
}

fn kcm_requests(server: &TestServer, verb: &str, resource: &str, sub: &str) -> usize {
    server.count(|r| r.user_agent.contains("kcm/") && r.is(verb, resource, sub))
}

/// Pretends to be the scheduler: allocates the claim, reserves it for the pod and sets the
/// builtin finalizer (when `finalizer`).
async fn allocate(server: &TestServer, claim: &str, pod: &Pod, finalizer: bool) {
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    if finalizer {
        claims
            .patch(
                claim,
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "finalizers": [FINALIZER] } })),
            )
            .await
            .unwrap();
    }
    claims
        .patch_status(
            claim,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": {
                "allocation": { "devices": { "results": [{ "request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0" }] } },
                "reservedFor": [{ "resource": "pods", "name": pod.name_any(), "uid": pod.uid().unwrap() }],
            } })),
        )
        .await
        .unwrap();
}

/// A user-made claim `shared-gpu` with `status` (when given).
async fn shared_claim(server: &TestServer, status: Option<Value>) {
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    create(
        &claims,
        json!({ "metadata": { "name": "shared-gpu" }, "spec": {} }),
    )
    .await;
    if let Some(status) = status {
        claims
            .patch_status(
                "shared-gpu",
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .unwrap();
    }
}

/// Pod `user` on `node-1`, using `shared-gpu` by name.
async fn user_pod(server: &TestServer) -> Pod {
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    create(
        &pods,
        json!({ "metadata": { "name": "user" }, "spec": { "nodeName": "node-1", "containers": [{ "name": "c", "image": "i" }],
                "resourceClaims": [{ "name": "gpu", "resourceClaimName": "shared-gpu" }] } }),
    )
    .await
}

async fn set_phase(server: &TestServer, pod: &str, phase: &str) {
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    pods.patch_status(
        pod,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": { "phase": phase } })),
    )
    .await
    .unwrap();
}

async fn events_for(server: &TestServer, object: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(server.client(), NS);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(object))
        .collect()
}

#[tokio::test]
async fn template_claims_are_created_owned_annotated_and_recorded_once() {
    let server = TestServer::start().await;
    create_template(&server, "gpu-template", false).await;
    let kcm = InProcess::start(&server, &[CONTROLLERS]).await;
    let pod = create_pod(
        &server,
        "trainer",
        &[("gpu-0", "gpu-template"), ("gpu-1", "gpu-template")],
        None,
    )
    .await;

    let statuses = wait_statuses(&server, "trainer", 2).await;
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    for (pod_claim, claim_name) in &statuses {
        let claim = claims.get(claim_name).await.unwrap();
        let prefix = format!("trainer-{pod_claim}-");
        assert!(
            claim_name.starts_with(&prefix),
            "{claim_name} starts with {prefix}"
        );
        assert_eq!(claim_name.len(), prefix.len() + 5, "five random characters");
        let owners = claim.owner_references();
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (
                owners[0].api_version.as_str(),
                owners[0].kind.as_str(),
                owners[0].name.as_str(),
                owners[0].uid.as_str()
            ),
            ("v1", "Pod", "trainer", pod.uid().unwrap().as_str())
        );
        assert_eq!(owners[0].controller, Some(true));
        assert_eq!(owners[0].block_owner_deletion, None);
        assert_eq!(
            claim
                .annotations()
                .get("resource.kubernetes.io/pod-claim-name"),
            Some(pod_claim)
        );
        assert_eq!(
            claim.annotations().get("cost-center").map(String::as_str),
            Some("42")
        );
        assert_eq!(claim.labels().get("team").map(String::as_str), Some("ml"));
        let spec = serde_json::to_value(&claim.spec).unwrap();
        assert_eq!(
            spec["devices"]["requests"][0]["exactly"]["deviceClassName"],
            "gpu.example.com"
        );
    }
    // Upstream's cost: one create per claim and one apply for the pod.
    eventually("creates counted", DEADLINE, || async {
        kcm.metric(
            "resourceclaim_controller_creates_total{admin_access=\"false\",status=\"success\"}",
        )
        .await
            == Some(2.0)
    })
    .await;
    assert_eq!(kcm_requests(&server, "create", "resourceclaims", ""), 2);
    assert_eq!(kcm_requests(&server, "patch", "pods", "status"), 1);
    let applies: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.user_agent.contains("kcm/") && r.is("patch", "pods", "status"))
        .collect();
    assert!(
        applies[0]
            .query
            .contains("fieldManager=ResourceClaimController"),
        "{}",
        applies[0].query
    );
    assert!(
        applies[0].query.contains("force=true"),
        "{}",
        applies[0].query
    );
    eventually("the gauge counts both generated claims", DEADLINE, || async {
        kcm.metric("resourceclaim_controller_resource_claims{admin_access=\"false\",allocated=\"false\",source=\"resource_claim_template\"}")
            .await
            == Some(2.0)
    })
    .await;
    kcm.stop().await;
}

#[tokio::test]
async fn a_recreated_claim_keeps_the_other_status_entry() {
    let server = TestServer::start().await;
    create_template(&server, "gpu-template", false).await;
    let kcm = InProcess::start(&server, &[CONTROLLERS]).await;
    create_pod(
        &server,
        "trainer",
        &[("gpu-0", "gpu-template"), ("gpu-1", "gpu-template")],
        None,
    )
    .await;
    let before = wait_statuses(&server, "trainer", 2).await;

    // Someone deletes the first claim: kcm creates a new one and applies again. Applying only
    // the new entry would make the API server drop the other one (field ownership).
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    claims
        .delete(&before[0].1, &Default::default())
        .await
        .unwrap();
    let after = eventually_some("a new claim is recorded for gpu-0", DEADLINE, || async {
        let after = claim_statuses(&server, "trainer").await;
        after
            .iter()
            .any(|(n, c)| n == "gpu-0" && c.as_deref() != Some(before[0].1.as_str()))
            .then_some(after)
    })
    .await;
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(
        after[1],
        (before[1].0.clone(), Some(before[1].1.clone())),
        "gpu-1 entry kept"
    );
    let new_claim = after[0].1.clone().unwrap();
    claims.get(&new_claim).await.unwrap();
    assert_eq!(kcm_requests(&server, "create", "resourceclaims", ""), 3);
    kcm.stop().await;
}

#[tokio::test]
async fn a_claim_the_watch_has_not_delivered_yet_is_not_created_twice() {
    let server = TestServer::start().await;
    create_template(&server, "gpu-template", false).await;
    let kcm = InProcess::start(&server, &[CONTROLLERS]).await;
    // The claim watch lags, and the first status apply fails: the retry must find the claim
    // it just created (mutation cache), not create another.
    server
        .store()
        .set_watch_delay("resource.k8s.io", "resourceclaims", Duration::from_secs(3));
    server.inject(
        Fault::error(500)
            .verb("patch")
            .resource("pods")
            .subresource("status")
            .times(1),
    );
    create_pod(&server, "trainer", &[("gpu", "gpu-template")], None).await;
    let statuses = wait_statuses(&server, "trainer", 1).await;
    assert!(statuses[0].1.starts_with("trainer-gpu-"));
    assert!(
        kcm_requests(&server, "patch", "pods", "status") >= 2,
        "the failed apply was retried"
    );
    assert_eq!(kcm_requests(&server, "create", "resourceclaims", ""), 1);
    assert_eq!(claim_count(&server).await, 1);
    kcm.stop().await;
}

#[tokio::test]
async fn a_finished_pod_releases_deallocates_and_deletes_its_claim() {
    let server = TestServer::start().await;
    create_template(&server, "gpu-template", false).await;
    let kcm = InProcess::start(&server, &[CONTROLLERS]).await;
    let pod = create_pod(
        &server,
        "trainer",
        &[("gpu", "gpu-template")],
        Some("node-1"),
    )
    .await;
    let claim_name = wait_statuses(&server, "trainer", 1).await[0].1.clone();
    allocate(&server, &claim_name, &pod, true).await;
    set_phase(&server, "trainer", "Running").await;

    set_phase(&server, "trainer", "Succeeded").await;
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    eventually("the claim is deleted", DEADLINE, || async {
        claims.get_opt(&claim_name).await.unwrap().is_none()
    })
    .await;
    // Released and deallocated (status), finalizer removed, then deleted — in that order.
    let writes: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| {
            r.user_agent.contains("kcm/") && r.is_write() && r.info.resource == "resourceclaims"
        })
        .map(|r| format!("{} {}", r.info.verb, r.info.subresource))
        .collect();
    assert_eq!(
        writes,
        ["create ", "update status", "patch ", "delete "],
        "{writes:?}"
    );
    let release = server
        .requests()
        .into_iter()
        .find(|r| r.user_agent.contains("kcm/") && r.is("update", "resourceclaims", "status"))
        .unwrap();
    let body = release.body.unwrap();
    assert_eq!(body["status"]["reservedFor"], json!([]));
    assert!(
        body["status"].get("allocation").is_none_or(Value::is_null),
        "{body}"
    );
    kcm.stop().await;
}

#[tokio::test]
async fn a_claim_without_the_builtin_finalizer_stays_allocated() {
    let server = TestServer::start().await;
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    shared_claim(&server, None).await;
    let pod = user_pod(&server).await;
    allocate(&server, "shared-gpu", &pod, false).await;
    let kcm = InProcess::start(&server, &[CONTROLLERS]).await;
    set_phase(&server, "user", "Failed").await;
    eventually("the reservation is dropped", DEADLINE, || async {
        let claim = claims.get("shared-gpu").await.unwrap();
        claim
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.as_ref())
            .is_none_or(Vec::is_empty)
    })
    .await;
    let claim = claims.get("shared-gpu").await.unwrap();
    assert!(
        claim.status.unwrap().allocation.is_some(),
        "no finalizer: never deallocated"
    );
    assert_eq!(
        kcm_requests(&server, "delete", "resourceclaims", ""),
        0,
        "not a generated claim"
    );
    kcm.stop().await;
}

#[tokio::test]
async fn a_pod_bound_to_a_node_is_reserved_and_conflicts_are_retried() {
    let server = TestServer::start().await;
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    shared_claim(
        &server,
        Some(json!({ "allocation": { "devices": { "results": [] } } })),
    )
    .await;
    server.inject(
        Fault::error(409)
            .verb("update")
            .resource("resourceclaims")
            .subresource("status")
            .times(1),
    );
    let kcm = InProcess::start(&server, &[CONTROLLERS]).await;
    let pod = user_pod(&server).await;
    eventually("the claim is reserved for the pod", DEADLINE, || async {
        let claim = claims.get("shared-gpu").await.unwrap();
        let reserved = serde_json::to_value(claim.status.and_then(|s| s.reserved_for)).unwrap();
        reserved == json!([{ "resource": "pods", "name": "user", "uid": pod.uid().unwrap() }])
    })
    .await;
    assert_eq!(
        kcm_requests(&server, "update", "resourceclaims", "status"),
        2,
        "one conflict, one retry"
    );
    kcm.stop().await;
}

#[tokio::test]
async fn bad_claims_get_events_and_do_not_block_the_pods_other_claims() {
    let server = TestServer::start().await;
    create_template(&server, "gpu-template", false).await;
    create_template(&server, "admin-template", true).await;
    // DRAAdminAccess is GA and locked on in v1.36: the admin claim is created like any other
    // (the gate-off refusal is covered by the claims unit tests).
    let kcm = InProcess::start(&server, &[CONTROLLERS]).await;
    create_pod(
        &server,
        "mixed",
        &[
            ("missing", "no-such-template"),
            ("admin", "admin-template"),
            ("good", "gpu-template"),
        ],
        None,
    )
    .await;
    let statuses = wait_statuses(&server, "mixed", 2).await;
    assert_eq!(
        statuses.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["admin", "good"]
    );

    let mut notes = eventually_some("the failure is reported on the pod", DEADLINE, || async {
        let notes: Vec<String> = events_for(&server, "mixed")
            .await
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some("FailedResourceClaimCreation")
                    && e.type_.as_deref() == Some("Warning")
            })
            .filter_map(|e| e.message)
            .collect();
        (!notes.is_empty()).then_some(notes)
    })
    .await;
    notes.sort();
    notes.dedup();
    assert_eq!(
        notes,
        [
            "PodResourceClaim missing: resource claim template \"no-such-template\": resourceclaimtemplate.resource.k8s.io \"no-such-template\" not found",
        ]
    );
    assert_eq!(
        kcm.metric(
            "resourceclaim_controller_creates_total{admin_access=\"false\",status=\"success\"}"
        )
        .await,
        Some(1.0)
    );
    assert_eq!(
        kcm.metric(
            "resourceclaim_controller_creates_total{admin_access=\"true\",status=\"success\"}"
        )
        .await,
        Some(1.0)
    );

    // The missing template appears: the template's pods are looked at again.
    create_template(&server, "no-such-template", false).await;
    let statuses = wait_statuses(&server, "mixed", 3).await;
    assert_eq!(
        statuses.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["admin", "good", "missing"]
    );
    kcm.stop().await;
}

#[tokio::test]
async fn a_rejected_create_is_reported_counted_and_retried() {
    let server = TestServer::start().await;
    create_template(&server, "gpu-template", false).await;
    server.inject(
        Fault::error(422)
            .verb("create")
            .resource("resourceclaims")
            .times(1),
    );
    let kcm = InProcess::start(&server, &[CONTROLLERS]).await;
    create_pod(&server, "trainer", &[("gpu", "gpu-template")], None).await;
    wait_statuses(&server, "trainer", 1).await;
    let note = eventually_some("the failure is reported on the pod", DEADLINE, || async {
        events_for(&server, "trainer")
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedResourceClaimCreation"))
            .and_then(|e| e.message)
    })
    .await;
    assert!(
        note.starts_with("PodResourceClaim gpu: create ResourceClaim : "),
        "{note}"
    );
    for (status, count) in [("failure", 1.0), ("success", 1.0)] {
        let sample = format!(
            "resourceclaim_controller_creates_total{{admin_access=\"false\",status=\"{status}\"}}"
        );
        assert_eq!(kcm.metric(&sample).await, Some(count), "{sample}");
    }
    kcm.stop().await;
}

#[tokio::test]
async fn a_recorded_claim_owned_by_another_pod_is_reported_and_left_alone() {
    let server = TestServer::start().await;
    create_template(&server, "gpu-template", false).await;
    let kcm = InProcess::start(&server, &[CONTROLLERS]).await;
    create_pod(&server, "other", &[("gpu", "gpu-template")], None).await;
    let others_claim = wait_statuses(&server, "other", 1).await[0].1.clone();
    create_pod(&server, "trainer", &[("gpu", "gpu-template")], None).await;
    wait_statuses(&server, "trainer", 1).await;
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    let before = claims.get(&others_claim).await.unwrap();

    // Someone points the pod's status at the other pod's claim. As upstream, kcm does not
    // take it over or create another until it is removed; it says why.
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    pods.patch_status(
        "trainer",
        &PatchParams::apply("test").force(),
        &Patch::Apply(json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "trainer" }, "status": {
            "resourceClaimStatuses": [{ "name": "gpu", "resourceClaimName": others_claim }] } })),
    )
    .await
    .unwrap();
    eventually("the foreign claim is reported", DEADLINE, || async {
        kcm.metric("kcm_skipped_objects_total{controller=\"resourceclaim-controller\",reason=\"claim-not-owned\"}")
            .await
            == Some(1.0)
    })
    .await;
    let after = claims.get(&others_claim).await.unwrap();
    assert_eq!(
        after.resource_version(),
        before.resource_version(),
        "untouched"
    );
    assert_eq!(kcm_requests(&server, "delete", "resourceclaims", ""), 0);
    assert_eq!(kcm_requests(&server, "create", "resourceclaims", ""), 2);
    kcm.stop().await;
}

#[tokio::test]
async fn a_full_reservation_list_is_reported_not_written() {
    let server = TestServer::start().await;
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    // 256 consumers of a type this controller does not manage: kept as they are.
    let consumers: Vec<Value> = (0..256)
        .map(|i| json!({ "apiGroup": "example.com", "resource": "jobs", "name": format!("job-{i}"), "uid": format!("uid-{i}") }))
        .collect();
    shared_claim(
        &server,
        Some(json!({ "allocation": { "devices": { "results": [] } }, "reservedFor": consumers })),
    )
    .await;
    let kcm = InProcess::start(&server, &[CONTROLLERS]).await;
    user_pod(&server).await;
    eventually("the full list is reported", DEADLINE, || async {
        kcm.metric("kcm_skipped_objects_total{controller=\"resourceclaim-controller\",reason=\"reserved-for-full\"}")
            .await
            == Some(1.0)
    })
    .await;
    let note = eventually_some("an event on the pod", DEADLINE, || async {
        events_for(&server, "user")
            .await
            .into_iter()
            .find_map(|e| e.message)
    })
    .await;
    assert_eq!(
        note,
        "cannot reserve ResourceClaim default/shared-gpu for pod default/user: reservedFor is at its limit of 256"
    );
    assert_eq!(
        kcm_requests(&server, "update", "resourceclaims", "status"),
        0
    );
    let claim = claims.get("shared-gpu").await.unwrap();
    assert_eq!(claim.status.unwrap().reserved_for.unwrap().len(), 256);
    kcm.stop().await;
}

#[tokio::test]
async fn shadow_mode_creates_nothing_and_does_not_retry_forever() {
    let server = TestServer::start().await;
    create_template(&server, "gpu-template", false).await;
    let kcm = InProcess::start(&server, &[CONTROLLERS, "--shadow"]).await;
    // On a node: the sync goes on to reservations, where nothing is recorded to resolve.
    create_pod(
        &server,
        "trainer",
        &[("gpu", "gpu-template")],
        Some("node-1"),
    )
    .await;
    eventually("the would-be create is counted", DEADLINE, || async {
        kcm.metric("kcm_shadow_diffs_total{controller=\"resourceclaim-controller\",reason=\"unexplained\",resource=\"resourceclaims\"}")
            .await
            == Some(1.0)
    })
    .await;
    eventually("the pod's sync succeeded", DEADLINE, || async {
        kcm.metric(
            "kcm_reconcile_total{controller=\"resourceclaim-controller\",result=\"success\"}",
        )
        .await
        .is_some()
    })
    .await;
    assert_eq!(
        server.count(|r| r.user_agent.contains("kcm/") && r.is_write()),
        0
    );
    assert_eq!(
        kcm.metric("kcm_reconcile_total{controller=\"resourceclaim-controller\",result=\"error\"}")
            .await,
        None,
        "the sync succeeded: nothing to record, nothing to retry"
    );
    kcm.stop().await;
}

const WORKLOAD_GATES: &str = "--feature-gates=DRAWorkloadResourceClaims=true,GenericWorkload=true";

/// A server that serves PodGroups, as a cluster with the alpha API enabled.
async fn server_with_pod_groups() -> TestServer {
    TestServer::start_with(kube_testserver::Options {
        pod_groups: true,
        ..Default::default()
    })
    .await
    .unwrap()
}

/// PodGroup `gang` sharing claim `gpu` from `gpu-template`.
async fn create_group(server: &TestServer) -> PodGroup {
    let groups: Api<PodGroup> = Api::namespaced(server.client(), NS);
    create(
        &groups,
        json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": { "name": "gang" },
            "spec": { "schedulingPolicy": { "gang": { "minCount": 2 } },
                      "resourceClaims": [{ "name": "gpu", "resourceClaimTemplateName": "gpu-template" }] }
        }),
    )
    .await
}

/// Pod `name` in PodGroup `gang`, with the group's claim entry, on `node`.
async fn create_member(server: &TestServer, name: &str, node: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    create(
        &pods,
        json!({ "metadata": { "name": name }, "spec": {
            "nodeName": node, "schedulingGroup": { "podGroupName": "gang" },
            "containers": [{ "name": "c", "image": "i" }],
            "resourceClaims": [{ "name": "gpu", "resourceClaimTemplateName": "gpu-template" }] } }),
    )
    .await
}

fn pod_group_requests(server: &TestServer) -> usize {
    server.count(|r| r.user_agent.contains("kcm/") && r.info.resource == "podgroups")
}

#[tokio::test]
async fn a_pod_group_shares_one_claim_reserved_for_the_group_until_the_group_is_deleted() {
    let server = server_with_pod_groups().await;
    create_template(&server, "gpu-template", false).await;
    let kcm = InProcess::start(&server, &[CONTROLLERS, WORKLOAD_GATES]).await;
    let group = create_group(&server).await;
    let groups: Api<PodGroup> = Api::namespaced(server.client(), NS);
    let claim_name = eventually_some("the group's claim recorded", DEADLINE, || async {
        let group = groups.get("gang").await.unwrap();
        let status = group.claim_statuses().first().cloned()?;
        assert_eq!(status.name, "gpu");
        status.resource_claim_name
    })
    .await;
    assert!(claim_name.starts_with("gang-gpu-"), "{claim_name}");
    assert_eq!(claim_name.len(), "gang-gpu-".len() + 5);
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    let claim = claims.get(&claim_name).await.unwrap();
    let owner = &claim.owner_references()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        (
            "scheduling.k8s.io/v1alpha2",
            "PodGroup",
            "gang",
            group.metadata.uid.as_deref().unwrap(),
            Some(true)
        )
    );
    assert_eq!(
        claim
            .annotations()
            .get("resource.kubernetes.io/pod-claim-name")
            .map(String::as_str),
        Some("gpu")
    );
    // The group's status is recorded by server-side apply, as upstream's ApplyStatus.
    let apply = server
        .requests()
        .into_iter()
        .find(|r| r.user_agent.contains("kcm/") && r.is("patch", "podgroups", "status"))
        .expect("the status apply");
    assert!(
        apply.query.contains("fieldManager=ResourceClaimController"),
        "{}",
        apply.query
    );
    assert!(apply.query.contains("force=true"), "{}", apply.query);

    // Its pods, bound to nodes, record the group's claim and create none of their own.
    let members = [
        create_member(&server, "gang-0", "node-1").await,
        create_member(&server, "gang-1", "node-2").await,
    ];
    for pod in &members {
        let statuses = wait_statuses(&server, &pod.name_any(), 1).await;
        assert_eq!(statuses, [("gpu".to_string(), claim_name.clone())]);
    }
    assert_eq!(claim_count(&server).await, 1);
    assert_eq!(kcm_requests(&server, "create", "resourceclaims", ""), 1);

    // The scheduler allocates; the pods on their nodes reserve it for the group, once.
    claims
        .patch(
            &claim_name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "finalizers": [FINALIZER] } })),
        )
        .await
        .unwrap();
    claims
        .patch_status(
            &claim_name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "allocation": { "devices": { "results": [] } } } })),
        )
        .await
        .unwrap();
    let group_entry = json!([{ "apiGroup": "scheduling.k8s.io", "resource": "podgroups",
        "name": "gang", "uid": group.metadata.uid }]);
    eventually_some("reserved for the group", DEADLINE, || async {
        let claim = claims.get(&claim_name).await.unwrap();
        let reserved = serde_json::to_value(claim.status?.reserved_for).unwrap();
        (reserved == group_entry).then_some(())
    })
    .await;

    // The pods finish: the group still holds the claim.
    for pod in &members {
        set_phase(&server, &pod.name_any(), "Succeeded").await;
    }
    // The group is deleted: its reservation goes, the claim is deallocated, and the garbage
    // collector's deletion completes once the finalizer is removed.
    groups.delete("gang", &Default::default()).await.unwrap();
    eventually("the claim is released and deleted", DEADLINE, || async {
        claims.get_opt(&claim_name).await.unwrap().is_none()
    })
    .await;
    let release = server
        .requests()
        .into_iter()
        .find(|r| {
            r.user_agent.contains("kcm/")
                && r.is("update", "resourceclaims", "status")
                && r.body
                    .as_ref()
                    .is_some_and(|b| b["status"]["reservedFor"] == json!([]))
        })
        .expect("the release");
    assert!(
        release.body.unwrap()["status"]
            .get("allocation")
            .is_none_or(Value::is_null)
    );
    assert_eq!(kcm_requests(&server, "patch", "podgroups", "status"), 1);
    kcm.stop().await;
}

#[tokio::test]
async fn without_the_gate_pod_groups_are_never_read_and_pods_get_their_own_claims() {
    let server = server_with_pod_groups().await;
    create_template(&server, "gpu-template", false).await;
    let kcm = InProcess::start(&server, &[CONTROLLERS]).await;
    create_group(&server).await;
    let pod = create_member(&server, "gang-0", "node-1").await;
    let statuses = wait_statuses(&server, "gang-0", 1).await;
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    let claim = claims.get(&statuses[0].1).await.unwrap();
    assert_eq!(claim.owner_references()[0].uid, pod.uid().unwrap());
    assert!(statuses[0].1.starts_with("gang-0-gpu-"));
    let groups: Api<PodGroup> = Api::namespaced(server.client(), NS);
    assert!(
        groups
            .get("gang")
            .await
            .unwrap()
            .claim_statuses()
            .is_empty()
    );
    assert_eq!(pod_group_requests(&server), 0);
    kcm.stop().await;
    assert_eq!(pod_group_requests(&server), 0);
}

#[tokio::test]
async fn a_pod_created_before_its_group_records_the_groups_claim_once_there() {
    let server = server_with_pod_groups().await;
    create_template(&server, "gpu-template", false).await;
    let kcm = InProcess::start(&server, &[CONTROLLERS, WORKLOAD_GATES]).await;
    // The pod names a group that does not exist yet: it gets no claim of its own (upstream's
    // sync fails until the group is there), and the group's arrival brings its pods back.
    create_member(&server, "gang-0", "node-1").await;
    create_group(&server).await;
    let statuses = wait_statuses(&server, "gang-0", 1).await;
    assert!(statuses[0].1.starts_with("gang-gpu-"), "{statuses:?}");
    assert_eq!(claim_count(&server).await, 1);
    kcm.stop().await;
}
