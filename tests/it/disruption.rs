//! disruption-controller against kube-testserver: PDB status as upstream computes it, the
//! fail-safe on every error, disrupted-pod expiry, stale DisruptionTarget conditions.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::jiff::Timestamp;
use kcm_testsupport::{DEADLINE, InProcess, eventually};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube_testserver::{Fault, ResourceType, TestServer};
use serde_json::{Value, json};

const NS: &str = "default";

fn ago(secs: i64) -> String {
    (Timestamp::now() - Duration::from_secs(secs as u64))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A pod with labels `app`, Ready or not, optionally controlled by `owner` (apiVersion, kind, name, uid).
fn seed_pod(
    server: &TestServer,
    name: &str,
    app: &str,
    ready: bool,
    owner: Option<(&str, &str, &str, &str)>,
) {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": NS, "labels": { "app": app } },
        "spec": { "containers": [{ "name": "c", "image": "i" }] },
        "status": { "phase": "Running", "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] },
    });
    if let Some((api_version, kind, owner_name, uid)) = owner {
        pod["metadata"]["ownerReferences"] = json!([{ "apiVersion": api_version, "kind": kind, "name": owner_name, "uid": uid, "controller": true }]);
    }
    server.seed(pod).unwrap();
}

async fn set_ready(pods: &Api<Pod>, name: &str, ready: bool) {
    let status = json!({ "status": { "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] } });
    pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(status))
        .await
        .unwrap();
}

async fn create_pdb(
    api: &Api<PodDisruptionBudget>,
    name: &str,
    app: &str,
    budget: Value,
) -> PodDisruptionBudget {
    let mut spec = json!({ "selector": { "matchLabels": { "app": app } } });
    spec.as_object_mut()
        .unwrap()
        .extend(budget.as_object().unwrap().clone());
    let pdb: PodDisruptionBudget =
        serde_json::from_value(json!({ "metadata": { "name": name }, "spec": spec })).unwrap();
    api.create(&PostParams::default(), &pdb).await.unwrap()
}

/// (expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed)
fn counts(status: &PodDisruptionBudgetStatus) -> (i32, i32, i32, i32) {
    let n = |v: Option<i32>| v.unwrap_or(0);
    (
        n(status.expected_pods),
        n(status.desired_healthy),
        n(status.current_healthy),
        n(status.disruptions_allowed),
    )
}

/// (status, reason, message) of the DisruptionAllowed condition.
fn condition(status: &PodDisruptionBudgetStatus) -> Option<(String, String, String)> {
    let c = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionAllowed")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn wait_counts(
    api: &Api<PodDisruptionBudget>,
    name: &str,
    want: (i32, i32, i32, i32),
) -> PodDisruptionBudgetStatus {
    let mut last = None;
    let waited = tokio::time::timeout(DEADLINE, async {
        loop {
            let pdb = api.get(name).await.unwrap();
            if let Some(status) = pdb
                .status
                .filter(|s| s.observed_generation == pdb.metadata.generation)
            {
                if counts(&status) == want {
                    return status;
                }
                last = Some(counts(&status));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    waited.unwrap_or_else(|_| panic!("{name}: wanted {want:?}, last saw {last:?}"))
}

fn kcm_status_writes(server: &TestServer) -> usize {
    server.count(|r| {
        r.user_agent.contains("kcm/") && r.is("update", "poddisruptionbudgets", "status")
    })
}

#[tokio::test]
async fn status_follows_pods_becoming_ready_unready_and_deleted() {
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), NS);
    for name in ["web-1", "web-2", "web-3"] {
        seed_pod(&server, name, "web", false, None);
    }
    let kcm = InProcess::start(&server, &["--controllers=disruption"]).await;
    create_pdb(&pdbs, "web", "web", json!({ "minAvailable": 2 })).await;
    let status = wait_counts(&pdbs, "web", (3, 2, 0, 0)).await;
    assert_eq!(
        condition(&status),
        Some(("False".into(), "InsufficientPods".into(), String::new()))
    );
    assert_eq!(status.observed_generation, Some(1));

    for name in ["web-1", "web-2", "web-3"] {
        set_ready(&pods, name, true).await;
    }
    let status = wait_counts(&pdbs, "web", (3, 2, 3, 1)).await;
    assert_eq!(
        condition(&status),
        Some(("True".into(), "SufficientPods".into(), String::new()))
    );

    set_ready(&pods, "web-2", false).await;
    wait_counts(&pdbs, "web", (3, 2, 2, 0)).await;
    pods.delete("web-3", &DeleteParams::default())
        .await
        .unwrap();
    wait_counts(&pdbs, "web", (2, 2, 1, 0)).await;

    // A pod change that changes nothing in the status writes nothing.
    let writes = kcm_status_writes(&server);
    let reconciles = kcm
        .metric("kcm_reconcile_total{controller=\"disruption-controller\",result=\"success\"}")
        .await
        .unwrap_or(0.0);
    pods.patch(
        "web-1",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "annotations": { "x": "y" } } })),
    )
    .await
    .unwrap();
    eventually("the PDB was re-synced", DEADLINE, || async {
        kcm.metric("kcm_reconcile_total{controller=\"disruption-controller\",result=\"success\"}")
            .await
            .unwrap_or(0.0)
            > reconciles
    })
    .await;
    assert_eq!(
        kcm_status_writes(&server),
        writes,
        "no write when nothing changed"
    );
    kcm.stop().await;
}

#[tokio::test]
async fn deployment_scale_drives_expected_pods_and_percentages_round_up() {
    let server = TestServer::start().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), NS);
    let deploy = server
        .seed(json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "web", "namespace": NS },
                      "spec": { "replicas": 7, "selector": { "matchLabels": { "app": "web" } }, "template": {} } }))
        .unwrap();
    let deploy_uid = deploy["metadata"]["uid"].as_str().unwrap().to_string();
    let rs = server
        .seed(json!({ "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": { "name": "web-abc", "namespace": NS,
                      "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": deploy_uid, "controller": true }] },
                      "spec": { "replicas": 7, "selector": { "matchLabels": { "app": "web" } } } }))
        .unwrap();
    let rs_uid = rs["metadata"]["uid"].as_str().unwrap().to_string();
    for i in 0..7 {
        seed_pod(
            &server,
            &format!("web-{i}"),
            "web",
            true,
            Some(("apps/v1", "ReplicaSet", "web-abc", &rs_uid)),
        );
    }
    let kcm = InProcess::start(&server, &["--controllers=disruption"]).await;
    // Upstream's TestPercentageMaxUnavailable: 30% of 7 → ceil(2.1) = 3 → desired 4.
    create_pdb(&pdbs, "web", "web", json!({ "maxUnavailable": "30%" })).await;
    wait_counts(&pdbs, "web", (7, 4, 7, 3)).await;

    // The Deployment grows to 10 before any new pod exists: 30% of 10 → 3 → desired 7.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(server.client(), NS);
    deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": 10 } })),
        )
        .await
        .unwrap();
    wait_counts(&pdbs, "web", (10, 7, 7, 0)).await;
    kcm.stop().await;
}

/// The end of a rollout (kubernetes#130723): Deployment `web` (3 replicas) and its new
/// ReplicaSet's 3 ready pods; the old ReplicaSet is deleted while its pod `web-old-1` still
/// terminates (deletionTimestamp set, a finalizer holding it).
fn seed_rollout_with_a_terminating_orphan(server: &TestServer) {
    let deploy = server
        .seed(json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "web", "namespace": NS },
                      "spec": { "replicas": 3, "selector": { "matchLabels": { "app": "web" } }, "template": {} } }))
        .unwrap();
    let deploy_uid = deploy["metadata"]["uid"].as_str().unwrap().to_string();
    let rs = server
        .seed(json!({ "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": { "name": "web-new", "namespace": NS,
                      "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": deploy_uid, "controller": true }] },
                      "spec": { "replicas": 3, "selector": { "matchLabels": { "app": "web" } } } }))
        .unwrap();
    let rs_uid = rs["metadata"]["uid"].as_str().unwrap().to_string();
    for i in 0..3 {
        let owner = ("apps/v1", "ReplicaSet", "web-new", rs_uid.as_str());
        seed_pod(server, &format!("web-new-{i}"), "web", true, Some(owner));
    }
    server
        .seed(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "web-old-1", "namespace": NS, "labels": { "app": "web" },
                          "deletionTimestamp": ago(5), "deletionGracePeriodSeconds": 30,
                          "finalizers": ["example.com/hold"],
                          "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-old",
                                                "uid": "uid-of-the-deleted-replicaset", "controller": true }] },
            "spec": { "containers": [{ "name": "c", "image": "i" }] },
            "status": { "phase": "Running", "conditions": [{ "type": "Ready", "status": "True" }] },
        }))
        .unwrap();
}

/// kubernetes#130723: upstream fails this PDB (`found no controllers for pod "web-old-1"`,
/// `disruptionsAllowed: 0`, a CalculateExpectedPodCountFailed warning) until the pod is gone;
/// kcm counts the pod as upstream does while the old ReplicaSet exists at 0 replicas.
#[tokio::test]
async fn a_terminating_pod_whose_replica_set_is_gone_does_not_block_evictions() {
    let server = TestServer::start().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), NS);
    seed_rollout_with_a_terminating_orphan(&server);
    let kcm = InProcess::start(&server, &["--controllers=disruption"]).await;
    create_pdb(&pdbs, "web", "web", json!({ "maxUnavailable": 1 })).await;
    // expected 3 (the Deployment), desired 2, healthy 3 (not the terminating pod): one may go.
    let status = wait_counts(&pdbs, "web", (3, 2, 3, 1)).await;
    assert_eq!(
        condition(&status),
        Some((
            "True".to_string(),
            "SufficientPods".to_string(),
            String::new()
        ))
    );
    let events: Api<Event> = Api::namespaced(server.client(), NS);
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert!(
        !reasons
            .iter()
            .any(|r| r == "CalculateExpectedPodCountFailed"),
        "{reasons:?}"
    );
    kcm.stop().await;
}

/// Beside upstream, the status kcm would write for that PDB is a shadow diff labelled with
/// the issue, not an unexplained one.
#[tokio::test]
async fn shadow_mode_labels_the_terminating_orphan_difference_with_its_issue() {
    let server = TestServer::start().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), NS);
    seed_rollout_with_a_terminating_orphan(&server);
    let kcm = InProcess::start(
        &server,
        &[
            "--controllers=disruption",
            "--shadow",
            "--leader-elect=true",
        ],
    )
    .await;
    create_pdb(&pdbs, "web", "web", json!({ "maxUnavailable": 1 })).await;
    let sample = |reason: &str| {
        format!(
            "kcm_shadow_diffs_total{{controller=\"disruption-controller\",reason=\"{reason}\",resource=\"poddisruptionbudgets/status\"}}"
        )
    };
    eventually("a diff labelled kubernetes#130723", DEADLINE, || async {
        kcm.metric(&sample("kubernetes#130723")).await >= Some(1.0)
    })
    .await;
    assert_eq!(kcm.metric(&sample("unexplained")).await, None);
    assert_eq!(kcm_status_writes(&server), 0);
    kcm.stop().await;
}

/// kubernetes#82930: upstream v1.36 syncs every PDB on one worker, so one slow status write
/// holds up every other budget. kcm takes `--concurrent-disruption-syncs` (upstream has it
/// only after v1.36): with two workers, a budget is written while another's write hangs.
#[tokio::test]
async fn a_second_worker_syncs_a_budget_while_another_write_hangs() {
    let server = TestServer::start().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), NS);
    server.inject(
        Fault::latency(Duration::from_secs(10))
            .verb("update")
            .resource("poddisruptionbudgets")
            .subresource("status")
            .name("slow"),
    );
    let kcm = InProcess::start(
        &server,
        &[
            "--controllers=disruption",
            "--concurrent-disruption-syncs=2",
        ],
    )
    .await;
    create_pdb(&pdbs, "slow", "a", json!({ "minAvailable": 1 })).await;
    eventually("a worker is writing slow's status", DEADLINE, || async {
        kcm.metric("workqueue_adds_total{name=\"disruption\"}")
            .await
            >= Some(1.0)
            && kcm.metric("workqueue_depth{name=\"disruption\"}").await == Some(0.0)
    })
    .await;
    create_pdb(&pdbs, "fast", "b", json!({ "minAvailable": 1 })).await;
    wait_counts(&pdbs, "fast", (0, 1, 0, 0)).await;
    let slow = pdbs.get("slow").await.unwrap().status;
    assert_eq!(
        slow.and_then(|s| s.observed_generation),
        None,
        "fast was written while slow's write still hung"
    );
    wait_counts(&pdbs, "slow", (0, 1, 0, 0)).await;
    kcm.stop().await;
}

#[tokio::test]
async fn custom_scale_subresource_and_its_failures() {
    let server = TestServer::start().await;
    server.store().register(
        ResourceType::custom("example.com", "v1", "widgets", "Widget")
            .with_status()
            .with_scale(),
    );
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), NS);
    let widget = server
        .seed(json!({ "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": "w", "namespace": NS }, "spec": { "replicas": 4 } }))
        .unwrap();
    let uid = widget["metadata"]["uid"].as_str().unwrap().to_string();
    for i in 0..3 {
        seed_pod(
            &server,
            &format!("w-{i}"),
            "w",
            true,
            Some(("example.com/v1", "Widget", "w", &uid)),
        );
    }
    let kcm = InProcess::start(&server, &["--controllers=disruption"]).await;
    create_pdb(&pdbs, "w", "w", json!({ "minAvailable": "50%" })).await;
    wait_counts(&pdbs, "w", (4, 2, 3, 1)).await;

    // The scale subresource fails: the fail-safe status, with the error as message.
    server.inject(
        Fault::error(500)
            .verb("get")
            .resource("widgets")
            .subresource("scale"),
    );
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    set_ready(&pods, "w-0", true).await;
    pods.patch(
        "w-0",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": { "touch": "1" } } })),
    )
    .await
    .unwrap();
    eventually("fail-safe written", DEADLINE, || async {
        let status = pdbs.get("w").await.unwrap().status.unwrap();
        status.disruptions_allowed == Some(0)
            && condition(&status).is_some_and(|c| c.1 == "SyncFailed")
    })
    .await;
    let status = pdbs.get("w").await.unwrap().status.unwrap();
    assert_eq!(
        condition(&status),
        Some((
            "False".into(),
            "SyncFailed".into(),
            "injected fault: 500".into()
        ))
    );
    let events: Api<Event> = Api::namespaced(server.client(), NS);
    eventually("CalculateExpectedPodCountFailed recorded", DEADLINE, || async {
        events.list(&ListParams::default()).await.unwrap().items.iter().any(|e| {
            e.reason.as_deref() == Some("CalculateExpectedPodCountFailed")
                && e.message.as_deref() == Some("Failed to calculate the number of expected pods: injected fault: 500")
        })
    })
    .await;
    // Forbidden is no different: fail safe, with the API server's message.
    server.faults().clear();
    server.inject(
        Fault::error(403)
            .verb("get")
            .resource("widgets")
            .subresource("scale"),
    );
    eventually("fail-safe on 403", DEADLINE, || async {
        let status = pdbs.get("w").await.unwrap().status.unwrap();
        condition(&status).is_some_and(|c| c.1 == "SyncFailed" && c.2 == "injected fault: 403")
            && status.disruptions_allowed == Some(0)
    })
    .await;
    // Recovery once the scale answers again (the failed key is retried with backoff).
    server.faults().clear();
    wait_counts(&pdbs, "w", (4, 2, 3, 1)).await;
    kcm.stop().await;
}

#[tokio::test]
async fn bad_budgets_fail_safe_and_never_allow_disruptions() {
    let server = TestServer::start().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), NS);
    for i in 0..3 {
        seed_pod(&server, &format!("a-{i}"), "a", true, None);
    }
    // Controlled by an object whose kind has no scale subresource.
    let owner = server
        .seed(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "owner", "namespace": NS } }))
        .unwrap();
    let owner_uid = owner["metadata"]["uid"].as_str().unwrap();
    seed_pod(
        &server,
        "b-0",
        "b",
        true,
        Some(("v1", "ConfigMap", "owner", owner_uid)),
    );
    let kcm = InProcess::start(&server, &["--controllers=disruption"]).await;
    let cases = [
        (
            "no-percent",
            json!({ "maxUnavailable": "50" }),
            "invalid value for IntOrString: invalid type: string is not a percentage",
        ),
        (
            "garbage",
            json!({ "minAvailable": "abc%" }),
            "invalid value for IntOrString: invalid value \"abc%\": strconv.Atoi: parsing \"abc\": invalid syntax",
        ),
        (
            "both",
            json!({ "minAvailable": 1, "maxUnavailable": 1 }),
            "minAvailable and maxUnavailable cannot be both set",
        ),
        (
            "no-scale",
            json!({ "maxUnavailable": 1 }),
            "configmaps does not implement the scale subresource",
        ),
    ];
    for (name, budget, _) in &cases {
        create_pdb(
            &pdbs,
            name,
            if *name == "no-scale" { "b" } else { "a" },
            budget.clone(),
        )
        .await;
    }
    let bad_selector: PodDisruptionBudget = serde_json::from_value(json!({ "metadata": { "name": "bad-selector" },
        "spec": { "minAvailable": 1, "selector": { "matchExpressions": [{ "key": "app", "operator": "Bogus", "values": ["a"] }] } } }))
    .unwrap();
    pdbs.create(&PostParams::default(), &bad_selector)
        .await
        .unwrap();
    for (name, _, message) in cases.iter().map(|(n, b, m)| (*n, b, *m)).chain([(
        "bad-selector",
        &json!(null),
        "\"Bogus\" is not a valid label selector operator",
    )]) {
        eventually(&format!("{name} fails safe"), DEADLINE, || async {
            pdbs.get(name)
                .await
                .unwrap()
                .status
                .and_then(|s| condition(&s))
                .is_some_and(|c| c.1 == "SyncFailed")
        })
        .await;
        let status = pdbs.get(name).await.unwrap().status.unwrap();
        assert_eq!(status.disruptions_allowed, Some(0), "{name}");
        let (state, _, got) = condition(&status).unwrap();
        assert_eq!(state, "False");
        assert!(
            got.contains(message),
            "{name}: {got:?} should contain {message:?}"
        );
    }
    // Pods with no controller at all are no error: expected 0, nothing allowed, and a warning.
    create_pdb(&pdbs, "naked", "a", json!({ "maxUnavailable": 1 })).await;
    wait_counts(&pdbs, "naked", (0, 0, 3, 0)).await;
    let events: Api<Event> = Api::namespaced(server.client(), NS);
    eventually("UnmanagedPods recorded", DEADLINE, || async {
        events.list(&ListParams::default()).await.unwrap().items.iter().any(|e| {
            e.reason.as_deref() == Some("UnmanagedPods") && e.message.as_deref().is_some_and(|n| n.starts_with("Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:map[string]string{app: a,},MatchExpressions:[]LabelSelectorRequirement{},}) were found to be unmanaged."))
        })
    })
    .await;
    kcm.stop().await;
}

#[tokio::test]
async fn disrupted_pod_entries_expire_and_the_pdb_is_rechecked() {
    let server = TestServer::start().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), NS);
    for i in 0..3 {
        seed_pod(&server, &format!("e-{i}"), "e", true, None);
    }
    let kcm = InProcess::start(&server, &["--controllers=disruption"]).await;
    create_pdb(&pdbs, "e", "e", json!({ "minAvailable": 1 })).await;
    wait_counts(&pdbs, "e", (3, 1, 3, 2)).await;

    // The eviction API records a disruption a few seconds from its 2-minute expiry (times
    // are whole seconds); the pod never goes away. Eight seconds, so a loaded machine still
    // sees the disrupted status before the entry expires.
    let mut pdb = pdbs.get("e").await.unwrap();
    let status = pdb.status.as_mut().unwrap();
    status.disrupted_pods = Some(
        [(
            "e-0".to_string(),
            serde_json::from_value(json!(ago(112))).unwrap(),
        )]
        .into(),
    );
    status.disruptions_allowed = Some(1);
    pdbs.replace_status("e", &PostParams::default(), &pdb)
        .await
        .unwrap();
    wait_counts(&pdbs, "e", (3, 1, 2, 1)).await;
    // Nothing else happens; the recheck lane brings the PDB back once the entry expires.
    let status = wait_counts(&pdbs, "e", (3, 1, 3, 2)).await;
    assert!(status.disrupted_pods.unwrap_or_default().is_empty());
    let events: Api<Event> = Api::namespaced(server.client(), NS);
    eventually("NotDeleted recorded", DEADLINE, || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("NotDeleted")
                    && e.message.as_deref()
                        == Some(
                            "Pod was expected by PDB default/default to be deleted but it wasn't",
                        )
            })
    })
    .await;
    assert!(
        kcm.metric("workqueue_adds_total{name=\"disruption_recheck\"}")
            .await
            >= Some(1.0)
    );
    kcm.stop().await;
}

#[tokio::test]
async fn stale_disruption_target_is_reset_when_due() {
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    server
        .seed(json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "s", "namespace": NS },
            "spec": { "containers": [{ "name": "c", "image": "i" }] },
            "status": { "phase": "Running", "conditions": [
                { "type": "Ready", "status": "True" },
                { "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI", "message": "m", "lastTransitionTime": ago(119) }
            ] } }))
        .unwrap();
    let kcm = InProcess::start(&server, &["--controllers=disruption"]).await;
    eventually("condition reset", DEADLINE, || async {
        let pod = pods.get("s").await.unwrap();
        pod.status
            .unwrap()
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "DisruptionTarget" && c.status == "False")
    })
    .await;
    let pod = pods.get("s").await.unwrap();
    let conditions = pod.status.unwrap().conditions.unwrap();
    let target = conditions
        .iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap();
    assert_eq!(
        (
            target.reason.as_deref().unwrap_or(""),
            target.message.as_deref().unwrap_or("")
        ),
        ("", "")
    );
    assert_eq!(target.observed_generation, pod.metadata.generation);
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "other conditions kept"
    );
    assert_eq!(
        server.count(|r| r.user_agent.contains("kcm/") && r.is("update", "pods", "status")),
        1
    );
    kcm.stop().await;
}

#[tokio::test]
async fn a_pod_matching_two_budgets_is_reported() {
    let server = TestServer::start().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), NS);
    let kcm = InProcess::start(&server, &["--controllers=disruption"]).await;
    create_pdb(&pdbs, "one", "m", json!({ "minAvailable": 1 })).await;
    create_pdb(&pdbs, "two", "m", json!({ "minAvailable": 1 })).await;
    eventually("both synced", DEADLINE, || async {
        let synced =
            |p: PodDisruptionBudget| p.status.is_some_and(|s| s.observed_generation == Some(1));
        synced(pdbs.get("one").await.unwrap()) && synced(pdbs.get("two").await.unwrap())
    })
    .await;
    seed_pod(&server, "m-0", "m", true, None);
    let events: Api<Event> = Api::namespaced(server.client(), NS);
    eventually("MultiplePodDisruptionBudgets recorded", DEADLINE, || async {
        events.list(&ListParams::default()).await.unwrap().items.iter().any(|e| {
            e.reason.as_deref() == Some("MultiplePodDisruptionBudgets")
                && e.message.as_deref() == Some("Pod \"default\"/\"m-0\" matches multiple PodDisruptionBudgets.  Chose \"one\" arbitrarily.")
        })
    })
    .await;
    kcm.stop().await;
}

#[tokio::test]
async fn while_the_pod_watch_fails_budgets_are_computed_from_a_live_list() {
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), NS);
    for name in ["web-1", "web-2", "web-3"] {
        seed_pod(&server, name, "web", true, None);
    }
    let kcm = InProcess::start(&server, &["--controllers=disruption"]).await;
    create_pdb(&pdbs, "web", "web", json!({ "minAvailable": 1 })).await;
    wait_counts(&pdbs, "web", (3, 1, 3, 2)).await;

    // kcm's cluster-wide pod list/watch now fails: its store keeps web-3 after it is gone.
    for verb in ["list", "watch"] {
        server.inject(
            Fault::error(500)
                .user_agent("kcm/")
                .verb(verb)
                .resource("pods")
                .namespace(""),
        );
    }
    server.store().drop_watches();
    eventually("kcm saw its pod watch fail", DEADLINE, || async {
        kcm.metric("kcm_watch_errors_total{resource=\"pods\"}")
            .await
            .is_some_and(|n| n > 0.0)
    })
    .await;
    pods.delete("web-3", &DeleteParams::default())
        .await
        .unwrap();
    // A PDB change makes kcm sync it: it must not count the vanished pod.
    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "minAvailable": 0 } })),
    )
    .await
    .unwrap();
    wait_counts(&pdbs, "web", (2, 0, 2, 2)).await;
    assert!(
        server.count(|r| r.user_agent.contains("kcm/")
            && r.is("list", "pods", "")
            && r.info.namespace == NS)
            > 0,
        "read from the API server"
    );
    server.faults().clear();
    kcm.stop().await;
}

/// As kube-controller-manager does it: a PDB's selector changes and the
/// controller's next `UnmanagedPods` warning carries the new selector. client-go keys a
/// repeat on the message, so the new text is a second event; the first keeps its own text.
#[tokio::test]
async fn a_changed_selector_gets_a_second_unmanaged_pods_event_with_its_text() {
    let server = TestServer::start().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), NS);
    for i in 0..2 {
        seed_pod(&server, &format!("a2-{i}"), "a2", true, None);
    }
    let kcm = InProcess::start(&server, &["--controllers=disruption"]).await;
    create_pdb(&pdbs, "b", "a2", json!({ "maxUnavailable": "0%" })).await;
    let unmanaged = |selector: &str| {
        format!(
            "Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be \
             unmanaged. As a result, the status of the PDB cannot be calculated correctly, which \
             may result in undefined behavior. To account for these pods please set \
             \".spec.minAvailable\" field of the PDB to an integer value."
        )
    };
    let by_labels = unmanaged(
        "&LabelSelector{MatchLabels:map[string]string{app: a2,},MatchExpressions:[]LabelSelectorRequirement{},}",
    );
    let by_expression = unmanaged(
        "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{\
         LabelSelectorRequirement{Key:app,Operator:In,Values:[a2],},},}",
    );
    let events: Api<Event> = Api::namespaced(server.client(), NS);
    let warnings = || async {
        let mut all: Vec<(String, String)> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some("UnmanagedPods")
                    && e.involved_object.name.as_deref() == Some("b")
            })
            .map(|e| {
                let source = e.source.and_then(|s| s.component).unwrap_or_default();
                (source, e.message.unwrap_or_default())
            })
            .collect();
        all.sort();
        all
    };
    let source = "controllermanager".to_string();
    eventually(
        "UnmanagedPods with the label selector",
        DEADLINE,
        || async { warnings().await == [(source.clone(), by_labels.clone())] },
    )
    .await;

    pdbs.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "selector": {
            "matchLabels": null,
            "matchExpressions": [{ "key": "app", "operator": "In", "values": ["a2"] }],
        } } })),
    )
    .await
    .unwrap();
    let both = [
        (source.clone(), by_labels.clone()),
        (source.clone(), by_expression.clone()),
    ];
    eventually(
        "a second UnmanagedPods with the new selector",
        DEADLINE,
        || async { warnings().await == both },
    )
    .await;
    kcm.stop().await;
}

/// A PDB's status write is a PUT of the whole object, and the API server takes a PDB's labels
/// and annotations from that body too: the stored PDB must keep kubectl's last-applied
/// annotation, or each status write would delete it.
#[tokio::test]
async fn a_status_write_keeps_the_labels_and_the_last_applied_annotation() {
    let server = TestServer::start().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), NS);
    seed_pod(&server, "web-1", "web", true, None);
    let applied = r#"{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"web","namespace":"default"},"spec":{"minAvailable":1,"selector":{"matchLabels":{"app":"web"}}}}"#;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({ "metadata": { "name": "web",
        "labels": { "team": "shop" },
        "annotations": { "kubectl.kubernetes.io/last-applied-configuration": applied } },
        "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "web" } } } }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    let _kcm = InProcess::start(&server, &["--controllers=disruption"]).await;
    wait_counts(&pdbs, "web", (1, 1, 1, 0)).await;
    let written = pdbs.get("web").await.unwrap();
    assert_eq!(
        written.metadata.annotations.unwrap()["kubectl.kubernetes.io/last-applied-configuration"],
        applied
    );
    assert_eq!(written.metadata.labels.unwrap()["team"], "shop");
}
