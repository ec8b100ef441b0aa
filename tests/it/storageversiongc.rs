//! storageversion-garbage-collector-controller against kube-testserver.

use std::time::Duration;

use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::coordination::v1::Lease;
use kcm_testsupport::{DEADLINE, InProcess, Kcm, eventually};
use kube::api::{Api, DeleteParams, PostParams};
use kube_testserver::{Fault, TestServer};
use serde_json::json;

const GATES: &str = "--feature-gates=StorageVersionAPI=true";
const CONTROLLERS: &str = "--controllers=storage-version-gc";

fn identity_lease(name: &str) -> Lease {
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": "kube-system", "labels": { "apiserver.kubernetes.io/identity": "kube-apiserver" } },
        "spec": { "holderIdentity": name }
    }))
    .unwrap()
}

fn seed_sv(server: &TestServer, name: &str, entries: &[(&str, &str)]) {
    let entries: Vec<_> = entries
        .iter()
        .map(|(id, v)| json!({ "apiServerID": id, "encodingVersion": v, "decodableVersions": [v] }))
        .collect();
    server
        .seed(json!({
            "apiVersion": "internal.apiserver.k8s.io/v1alpha1", "kind": "StorageVersion",
            "metadata": { "name": name }, "spec": {},
            "status": { "storageVersions": entries, "commonEncodingVersion": "v1" },
        }))
        .unwrap();
}

async fn ids(api: &Api<StorageVersion>, name: &str) -> Option<Vec<String>> {
    let sv = api.get_opt(name).await.unwrap()?;
    Some(
        sv.status
            .unwrap_or_default()
            .storage_versions
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.api_server_id)
            .collect(),
    )
}

fn list(ids: &[&str]) -> Option<Vec<String>> {
    Some(ids.iter().map(|s| s.to_string()).collect())
}

/// kcm with only this controller (gates on), once its workers run and the StorageVersion
/// lane has done what its first objects queued: a StorageVersion that arrives before the
/// lease store has synced (both are streamed at once) names servers the handler cannot
/// find yet, so it is queued and checked live, as upstream's handler does with its lister.
async fn start_gc(server: &TestServer) -> InProcess {
    let kcm = InProcess::start(server, &[CONTROLLERS, GATES]).await;
    eventually("workers started", DEADLINE, || async {
        kcm.metric("workqueue_depth{name=\"storage_version_garbage_collector_leases\"}")
            .await
            .is_some()
    })
    .await;
    let lane = "{name=\"storage_version_garbage_collector_storageversions\"}";
    eventually("the first StorageVersions checked", DEADLINE, || async {
        let queued = kcm.metric(&format!("workqueue_adds_total{lane}")).await;
        let done = kcm
            .metric(&format!("workqueue_work_duration_seconds_count{lane}"))
            .await;
        queued.unwrap_or(0.0) == done.unwrap_or(0.0)
    })
    .await;
    kcm
}

async fn setup(server: &TestServer) -> (Api<Lease>, Api<StorageVersion>) {
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    for name in ["apiserver-a", "apiserver-b"] {
        leases
            .create(&PostParams::default(), &identity_lease(name))
            .await
            .unwrap();
    }
    // Not an identity lease: the label is missing.
    let plain: Lease = serde_json::from_value(
        json!({ "metadata": { "name": "apiserver-plain", "namespace": "kube-system" } }),
    )
    .unwrap();
    leases.create(&PostParams::default(), &plain).await.unwrap();
    (leases, Api::all(server.client()))
}

#[tokio::test]
async fn dead_entries_go_at_start_and_a_deleted_lease_takes_its_entries() {
    let server = TestServer::start().await;
    let (leases, svs) = setup(&server).await;
    seed_sv(
        &server,
        "apps.deployments",
        &[
            ("apiserver-a", "v1"),
            ("apiserver-dead", "v1"),
            ("apiserver-b", "v2"),
        ],
    );
    seed_sv(
        &server,
        "core.pods",
        &[("apiserver-a", "v1"), ("apiserver-plain", "v1")],
    );
    seed_sv(&server, "core.secrets", &[("apiserver-b", "v1")]);
    let kcm = InProcess::start(&server, &[CONTROLLERS, GATES]).await;

    eventually("dead and unlabelled ids removed", DEADLINE, || async {
        ids(&svs, "apps.deployments").await == list(&["apiserver-a", "apiserver-b"])
            && ids(&svs, "core.pods").await == list(&["apiserver-a"])
    })
    .await;
    let pods = svs.get("core.pods").await.unwrap().status.unwrap();
    assert_eq!(pods.common_encoding_version.as_deref(), Some("v1"));
    let condition = &pods.conditions.unwrap()[0];
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.status.as_str(),
            condition.reason.as_str()
        ),
        (
            "AllEncodingVersionsEqual",
            "True",
            "CommonEncodingVersionSet"
        )
    );
    let deployments = svs.get("apps.deployments").await.unwrap().status.unwrap();
    assert_eq!(
        deployments.common_encoding_version, None,
        "v1 and v2 disagree"
    );

    // A server goes away: its entries follow; the StorageVersion it alone held is deleted.
    leases
        .delete("apiserver-b", &DeleteParams::default())
        .await
        .unwrap();
    eventually("b's entries removed", DEADLINE, || async {
        ids(&svs, "apps.deployments").await == list(&["apiserver-a"])
            && ids(&svs, "core.secrets").await.is_none()
    })
    .await;
    let deployments = svs.get("apps.deployments").await.unwrap().status.unwrap();
    assert_eq!(
        deployments.common_encoding_version.as_deref(),
        Some("v1"),
        "the survivors agree now"
    );
    kcm.stop().await;
}

#[tokio::test]
async fn a_lease_recreated_before_the_worker_looks_is_respected() {
    let server = TestServer::start().await;
    let (leases, svs) = setup(&server).await;
    seed_sv(
        &server,
        "apps.deployments",
        &[("apiserver-a", "v1"), ("apiserver-b", "v1")],
    );
    let kcm = start_gc(&server).await;
    // The worker's confirming GET is held back long enough for the lease to come back.
    server.inject(
        Fault::latency(Duration::from_millis(500))
            .verb("get")
            .resource("leases")
            .name("apiserver-b"),
    );
    let deleted_at = std::time::Instant::now();
    leases
        .delete("apiserver-b", &DeleteParams::default())
        .await
        .unwrap();
    leases
        .create(&PostParams::default(), &identity_lease("apiserver-b"))
        .await
        .unwrap();
    eventually("the worker looked", DEADLINE, || async {
        server.count(|r| {
            r.at >= deleted_at
                && r.is("get", "leases", "")
                && r.info.name == "apiserver-b"
                && r.code == 200
        }) == 1
    })
    .await;
    eventually("the lease item finished", DEADLINE, || async {
        kcm.metric("kcm_reconcile_total{controller=\"storageversion-garbage-collector-controller\",result=\"success\"}").await >= Some(1.0)
    })
    .await;
    assert_eq!(
        ids(&svs, "apps.deployments").await,
        list(&["apiserver-a", "apiserver-b"])
    );
    assert_eq!(
        server.count(|r| r.is_write() && r.user_agent.contains("kcm/")),
        0
    );
    kcm.stop().await;
}

#[tokio::test]
async fn a_failing_lease_lane_does_not_stall_the_storage_version_lane() {
    let server = TestServer::start().await;
    let (leases, svs) = setup(&server).await;
    seed_sv(
        &server,
        "apps.deployments",
        &[("apiserver-a", "v1"), ("apiserver-b", "v1")],
    );
    let kcm = start_gc(&server).await;
    // The lease lane needs a StorageVersion list, which now always fails.
    server.inject(Fault::error(500).verb("list").resource("storageversions"));
    leases
        .delete("apiserver-b", &DeleteParams::default())
        .await
        .unwrap();
    eventually("lease lane retrying", DEADLINE, || async {
        kcm.metric("workqueue_retries_total{name=\"storage_version_garbage_collector_leases\"}")
            .await
            >= Some(2.0)
    })
    .await;
    // Meanwhile a new StorageVersion naming the dead server is cleaned by the other lane.
    seed_sv(
        &server,
        "core.pods",
        &[("apiserver-a", "v1"), ("apiserver-b", "v1")],
    );
    eventually("storage version lane works", DEADLINE, || async {
        ids(&svs, "core.pods").await == list(&["apiserver-a"])
    })
    .await;
    assert_eq!(
        ids(&svs, "apps.deployments").await,
        list(&["apiserver-a", "apiserver-b"]),
        "lease lane still blocked"
    );
    server.faults().clear();
    eventually("lease lane recovers", DEADLINE, || async {
        ids(&svs, "apps.deployments").await == list(&["apiserver-a"])
    })
    .await;
    kcm.stop().await;
}

#[tokio::test]
async fn gated_off_by_default_and_idle_when_the_api_is_not_served() {
    let server = TestServer::start().await;
    let default_gates = Kcm::start(
        server.kubeconfig_path(),
        &[CONTROLLERS, "--leader-elect=false"],
    );
    eventually("skipped for its gate", DEADLINE, || async {
        default_gates
            .log()
            .contains("controller is disabled by feature gate")
    })
    .await;
    assert!(
        default_gates.log().contains("StorageVersionAPI"),
        "{}",
        default_gates.log()
    );

    assert!(
        server
            .store()
            .unregister("internal.apiserver.k8s.io", "storageversions")
    );
    let mut unserved = Kcm::start(
        server.kubeconfig_path(),
        &[CONTROLLERS, GATES, "--leader-elect=false"],
    );
    eventually("skipped: API not served", DEADLINE, || async {
        unserved
            .log()
            .contains("the cluster does not serve this API")
    })
    .await;
    assert!(
        unserved
            .get("/readyz")
            .await
            .is_some_and(|(code, _)| code == 200)
    );
    assert!(
        unserved
            .wait_exit(Duration::from_millis(300))
            .await
            .is_none(),
        "still running, not crash-looping"
    );
}
