//! `kcm explain` against kube-testserver: for each kind, the status it explains is the one
//! the controller writes, its reasons name the right objects, and a stale stored status is
//! shown out of sync with the field; from the command line (`kcm explain`, `kubectl-kcm`) and
//! from the running kcm (`/debug/explain/…`).

use std::path::Path;

use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kcm_testsupport::{DEADLINE, InProcess, eventually, http_get};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use kube_testserver::{Fault, TestServer};
use serde_json::{Value, json};

/// `kcm explain ARGS` (or the binary under `program`'s name): exit success, stdout, stderr.
async fn run(program: &Path, server: &TestServer, args: &[&str]) -> (bool, String, String) {
    let output = tokio::process::Command::new(program)
        .arg("explain")
        .args(args)
        .arg("--kubeconfig")
        .arg(server.kubeconfig_path())
        .output()
        .await
        .expect("kcm explain runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn kcm_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kcm"))
}

/// `kcm explain ARGS -o json`.
async fn cli_json(server: &TestServer, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    let (ok, out, err) = run(kcm_binary(), server, &args).await;
    assert!(ok, "kcm explain {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// `/debug/explain/PATH?output=json` on the in-process kcm.
async fn endpoint_json(kcm: &InProcess, path: &str) -> Value {
    let url = format!("/debug/explain/{path}?output=json");
    let (status, body) = http_get(kcm.port, &url).await.expect("kcm listens");
    assert_eq!(status, 200, "{url}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// The differing fields of an explanation.
fn fields(explained: &Value) -> Vec<String> {
    explained["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap().to_string())
        .collect()
}

async fn create<K>(api: &Api<K>, body: Value) -> K
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let object: K = serde_json::from_value(body).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap()
}

async fn namespace(server: &TestServer, name: &str) {
    let namespaces: Api<Namespace> = Api::all(server.client());
    create(&namespaces, json!({ "metadata": { "name": name } })).await;
}

/// A pod as a kubelet leaves it (creating it would drop its status): `body` in `namespace`.
fn seed_pod(server: &TestServer, namespace: &str, mut body: Value) -> Pod {
    body["apiVersion"] = json!("v1");
    body["kind"] = json!("Pod");
    body["metadata"]["namespace"] = json!(namespace);
    let stored = server.seed(body).unwrap();
    serde_json::from_value((*stored).clone()).unwrap()
}

fn pod_json(name: &str, cpu: &str, phase: &str) -> Value {
    json!({
        "metadata": { "name": name },
        "spec": { "containers": [{ "name": "c", "image": "i", "resources": { "requests": { "cpu": cpu } } }] },
        "status": { "phase": phase },
    })
}

#[tokio::test]
async fn a_quota_is_explained_by_its_largest_pods() {
    let server = TestServer::start().await;
    namespace(&server, "team").await;
    for (name, cpu, phase) in [
        ("small", "100m", "Running"),
        ("big", "1500m", "Running"),
        ("mid", "500m", "Pending"),
        ("finished", "2", "Succeeded"),
    ] {
        seed_pod(&server, "team", pod_json(name, cpu, phase));
    }
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), "team");
    create(
        &quotas,
        json!({ "metadata": { "name": "compute" }, "spec": { "hard": { "requests.cpu": "4", "pods": "10" } } }),
    )
    .await;
    let kcm = InProcess::start(&server, &["--controllers=resourcequota"]).await;
    eventually("the quota's usage", DEADLINE, || async {
        let quota = quotas.get("compute").await.unwrap();
        let used = quota.status.and_then(|s| s.used).unwrap_or_default();
        used.get("requests.cpu").map(|q| q.0.as_str()) == Some("2100m")
    })
    .await;

    let from_leader = endpoint_json(&kcm, "quota/team/compute").await;
    let from_cli = cli_json(&server, &["quota", "-n", "team", "compute"]).await;
    for explained in [&from_leader, &from_cli] {
        assert_eq!(explained["inSync"], true, "{explained}");
        let cpu = &explained["reasons"]["resourceQuota"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "requests.cpu")
            .cloned()
            .unwrap();
        assert_eq!(cpu["used"], "2100m");
        let order: Vec<(&str, &str)> = cpu["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["object"].as_str().unwrap(), o["amount"].as_str().unwrap()))
            .collect();
        assert_eq!(
            order,
            [
                ("pods/big", "1500m"),
                ("pods/mid", "500m"),
                ("pods/small", "100m")
            ]
        );
        let left_out = &explained["reasons"]["resourceQuota"]["leftOut"];
        assert_eq!(
            left_out,
            &json!([{ "object": "pods/finished", "why": "terminal (phase Succeeded): counts only as an object" }])
        );
    }
    kcm.stop().await;

    // A stale status: what kcm would write differs in `used`.
    quotas
        .patch_status(
            "compute",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "used": { "requests.cpu": "1" } } })),
        )
        .await
        .unwrap();
    let stale = cli_json(&server, &["quota", "-n", "team", "compute"]).await;
    assert_eq!(stale["inSync"], false);
    assert_eq!(fields(&stale), ["used"]);
    assert_eq!(stale["differences"][0]["stored"]["requests.cpu"], "1");
    assert_eq!(stale["differences"][0]["desired"]["requests.cpu"], "2100m");
    let (ok, text, _) = run(kcm_binary(), &server, &["quota", "-n", "team", "compute"]).await;
    assert!(ok);
    assert!(
        text.starts_with("ResourceQuota team/compute: OUT OF SYNC; next: write the status\n"),
        "{text}"
    );
}

/// A failing or restarting API server (5xx) is waited for, never taken as the answer (no
/// pods would be a wrong usage); one that keeps failing is reported as the failure.
#[tokio::test]
async fn transient_list_failures_are_retried_and_lasting_ones_reported() {
    let server = TestServer::start().await;
    namespace(&server, "team").await;
    seed_pod(&server, "team", pod_json("big", "1500m", "Running"));
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), "team");
    create(
        &quotas,
        json!({ "metadata": { "name": "compute" }, "spec": { "hard": { "requests.cpu": "4" } } }),
    )
    .await;
    server.inject(Fault::error(500).verb("list").resource("pods").times(2));
    server.inject(
        Fault::error(429)
            .verb("list")
            .resource("resourcequotas")
            .times(1),
    );
    let explained = cli_json(&server, &["quota", "-n", "team", "compute"]).await;
    let used = &explained["reasons"]["resourceQuota"]["resources"][0];
    assert_eq!(
        (&used["resource"], &used["used"]),
        (&json!("requests.cpu"), &json!("1500m"))
    );

    server.inject(Fault::error(500).verb("list").resource("pods"));
    let (ok, out, err) = run(kcm_binary(), &server, &["quota", "-n", "team", "compute"]).await;
    assert!(!ok && out.is_empty(), "{out}");
    assert!(
        err.contains("cannot read pods: injected fault: 500 (500 InternalError)"),
        "{err}"
    );
}

/// A Deployment `web` of 3 through ReplicaSet `web-1`, its pods `web-a`, `web-b` ready and
/// `web-c` not.
async fn deployment_with_pods(server: &TestServer) {
    let deployments: Api<Deployment> = Api::namespaced(server.client(), "shop");
    let deployment = create(
        &deployments,
        json!({ "metadata": { "name": "web" }, "spec": {
            "replicas": 3, "selector": { "matchLabels": { "app": "web" } },
            "template": { "metadata": { "labels": { "app": "web" } }, "spec": { "containers": [{ "name": "c", "image": "i" }] } } } }),
    )
    .await;
    let replica_sets: Api<ReplicaSet> = Api::namespaced(server.client(), "shop");
    let rs = create(
        &replica_sets,
        json!({ "metadata": { "name": "web-1", "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": deployment.uid().unwrap(), "controller": true }] },
            "spec": { "replicas": 3, "selector": { "matchLabels": { "app": "web" } },
            "template": { "metadata": { "labels": { "app": "web" } }, "spec": { "containers": [{ "name": "c", "image": "i" }] } } } }),
    )
    .await;
    for (name, ready) in [("web-a", "True"), ("web-b", "True"), ("web-c", "False")] {
        seed_pod(
            server,
            "shop",
            json!({ "metadata": { "name": name, "labels": { "app": "web" },
                "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": rs.uid().unwrap(), "controller": true }] },
                "spec": { "containers": [{ "name": "c", "image": "i" }] },
                "status": { "phase": "Running", "conditions": [{ "type": "Ready", "status": ready }] } }),
        );
    }
}

#[tokio::test]
async fn a_pdb_is_explained_by_its_unready_pod_and_its_deployment() {
    // No garbage collector: it would delete the pod whose owner is gone, below.
    let options = kube_testserver::Options {
        garbage_collector: false,
        ..Default::default()
    };
    let server = TestServer::start_with(options).await.unwrap();
    namespace(&server, "shop").await;
    deployment_with_pods(&server).await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), "shop");
    create(
        &pdbs,
        json!({ "metadata": { "name": "web" }, "spec": { "maxUnavailable": 1, "selector": { "matchLabels": { "app": "web" } } } }),
    )
    .await;
    let kcm = InProcess::start(&server, &["--controllers=disruption"]).await;
    eventually("the PDB's status", DEADLINE, || async {
        let status = pdbs.get("web").await.unwrap().status.unwrap_or_default();
        status.expected_pods == Some(3) && status.current_healthy == Some(2)
    })
    .await;

    let from_leader = endpoint_json(&kcm, "pdb/shop/web").await;
    let from_cli = cli_json(&server, &["pdb", "-n", "shop", "web"]).await;
    for explained in [&from_leader, &from_cli] {
        assert_eq!(explained["inSync"], true, "{explained}");
        let reasons = &explained["reasons"]["podDisruptionBudget"];
        assert_eq!(
            reasons["pods"],
            json!([
                { "name": "web-a", "healthy": true, "owner": "ReplicaSet/web-1" },
                { "name": "web-b", "healthy": true, "owner": "ReplicaSet/web-1" },
                { "name": "web-c", "healthy": false, "why": "not ready", "owner": "ReplicaSet/web-1" },
            ])
        );
        assert_eq!(
            reasons["controllers"],
            json!([{ "kind": "Deployment", "name": "web", "replicas": 3 }])
        );
        assert_eq!(
            reasons["arithmetic"],
            json!([
                "desiredHealthy = expectedPods 3 - maxUnavailable 1 = 2",
                "disruptionsAllowed = currentHealthy 2 - desiredHealthy 2 = 0",
            ])
        );
    }
    kcm.stop().await;

    pdbs.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": { "disruptionsAllowed": 5 } })),
    )
    .await
    .unwrap();
    let stale = cli_json(&server, &["pdb/web", "-n", "shop"]).await;
    assert_eq!(stale["inSync"], false);
    assert_eq!(fields(&stale), ["disruptionsAllowed"]);
    assert_eq!(stale["differences"][0]["stored"], 5);
    assert_eq!(stale["differences"][0]["desired"], 0);

    // A pod whose ReplicaSet does not exist: kcm fails safe, and says what would end it.
    seed_pod(
        &server,
        "shop",
        json!({ "metadata": { "name": "orphan", "labels": { "app": "web" },
            "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "uid": "no-such-uid", "controller": true }] },
            "spec": { "containers": [{ "name": "c", "image": "i" }] },
            "status": { "phase": "Running", "conditions": [{ "type": "Ready", "status": "True" }] } }),
    );
    let failing = cli_json(&server, &["pdb", "-n", "shop", "web"]).await;
    assert_eq!(
        failing["reasons"]["podDisruptionBudget"]["failSafe"],
        json!({ "reason": "found no controllers for pod \"orphan\"",
            "endsWhen": "pod orphan's controller exists (or the pod is deleted, or loses its owner reference)" })
    );
    let condition = failing["differences"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["field"] == "conditions")
        .expect("the condition changes");
    assert_eq!(condition["desired"][0]["reason"], "SyncFailed");
    assert_eq!(
        condition["desired"][0]["message"],
        "found no controllers for pod \"orphan\""
    );
}

#[tokio::test]
async fn a_claim_reserved_for_a_finished_pod_is_released() {
    let server = TestServer::start().await;
    namespace(&server, "ml").await;
    let trainer = seed_pod(
        &server,
        "ml",
        json!({ "metadata": { "name": "trainer" }, "spec": {
            "containers": [{ "name": "c", "image": "i" }],
            "resourceClaims": [{ "name": "gpu", "resourceClaimName": "gpu" }] },
            "status": { "phase": "Succeeded" } }),
    );
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), "ml");
    create(
        &claims,
        json!({ "metadata": { "name": "gpu", "finalizers": ["resource.kubernetes.io/delete-protection"] }, "spec": {} }),
    )
    .await;
    claims
        .patch_status(
            "gpu",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": {
                "allocation": { "devices": { "results": [{ "request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0" }] } },
                "reservedFor": [{ "resource": "pods", "name": "trainer", "uid": trainer.uid().unwrap() }],
            } })),
        )
        .await
        .unwrap();

    // Before kcm runs: the reservation is stale.
    let stale = cli_json(&server, &["claim", "-n", "ml", "gpu"]).await;
    assert_eq!(stale["inSync"], false);
    assert_eq!(stale["next"], "release 1 reservation(s), deallocate");
    assert_eq!(fields(&stale), ["allocation", "reservedFor"]);
    assert_eq!(
        stale["reasons"]["resourceClaim"]["reservedFor"],
        json!([{ "kind": "pods", "name": "trainer", "uid": trainer.uid().unwrap(), "stillNeeded": false,
            "why": "the pod is done: succeeded, failed, or deleted before it ran" }])
    );
    let pod = cli_json(&server, &["pod", "-n", "ml", "trainer"]).await;
    assert_eq!(pod["inSync"], false);
    let entry = &pod["reasons"]["pod"]["claims"][0];
    assert_eq!(entry["entry"], "gpu");
    assert_eq!(entry["claim"]["name"], "gpu");
    assert_eq!(entry["claim"]["next"], stale["next"]);

    let kcm = InProcess::start(&server, &["--controllers=resourceclaim-controller"]).await;
    eventually("the claim released", DEADLINE, || async {
        let claim = claims.get("gpu").await.unwrap();
        claim.finalizers().is_empty()
    })
    .await;
    let from_leader = endpoint_json(&kcm, "claim/ml/gpu").await;
    assert_eq!(from_leader["inSync"], true, "{from_leader}");
    assert_eq!(from_leader["next"], "keep");
    assert_eq!(
        from_leader["reasons"]["resourceClaim"]["reservedFor"],
        json!([])
    );
    assert_eq!(
        from_leader["reasons"]["resourceClaim"]["usedBy"],
        json!(["ml/trainer"])
    );
    kcm.stop().await;
}

#[tokio::test]
async fn a_node_ttl_and_the_kubectl_plugin() {
    let server = TestServer::start().await;
    let nodes: Api<Node> = Api::all(server.client());
    for (name, ttl) in [("n1", Some("15")), ("n2", None), ("n3", None)] {
        let mut node = json!({ "metadata": { "name": name } });
        if let Some(ttl) = ttl {
            node["metadata"]["annotations"] = json!({ "node.alpha.kubernetes.io/ttl": ttl });
        }
        create(&nodes, node).await;
    }
    let stale = cli_json(&server, &["node", "n1"]).await;
    assert_eq!(stale["inSync"], false);
    assert_eq!(
        stale["differences"],
        json!([{ "field": "metadata.annotations[node.alpha.kubernetes.io/ttl]", "stored": "15", "desired": "0" }])
    );
    assert_eq!(
        stale["reasons"]["node"],
        json!({ "nodes": 3, "ttlSeconds": 0, "stepUpAbove": 100, "stepDownBelow": null, "annotation": "15", "desired": "0" })
    );

    // The same binary as kubectl's plugin `kubectl-kcm` (`kubectl kcm explain …`).
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("kubectl-kcm");
    std::os::unix::fs::symlink(kcm_binary(), &plugin).unwrap();
    let (ok, text, err) = run(&plugin, &server, &["node", "n2"]).await;
    assert!(ok, "{err}");
    assert!(
        text.starts_with("Node n2: OUT OF SYNC; next: patch the annotation\n"),
        "{text}"
    );
    let usage = tokio::process::Command::new(&plugin)
        .output()
        .await
        .unwrap();
    assert!(!usage.status.success());
    assert!(String::from_utf8_lossy(&usage.stderr).starts_with("usage: kubectl kcm explain"));

    let kcm = InProcess::start(&server, &["--controllers=ttl"]).await;
    eventually("n1's TTL", DEADLINE, || async {
        let node = nodes.get("n1").await.unwrap();
        node.annotations()
            .get("node.alpha.kubernetes.io/ttl")
            .map(String::as_str)
            == Some("0")
    })
    .await;
    let from_leader = endpoint_json(&kcm, "node/n1").await;
    assert_eq!(from_leader["inSync"], true, "{from_leader}");
    let (status, _) = http_get(kcm.port, "/debug/explain/node/default/n1")
        .await
        .unwrap();
    assert_eq!(status, 404, "a node has no namespace");
    let (status, _) = http_get(kcm.port, "/debug/explain/pdb/shop/web")
        .await
        .unwrap();
    assert_eq!(status, 503, "the disruption controller does not run");
    kcm.stop().await;
}

#[tokio::test]
async fn a_storage_version_names_its_dead_server() {
    let server = TestServer::start().await;
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    create(
        &leases,
        json!({ "metadata": { "name": "apiserver-alive", "labels": { "apiserver.kubernetes.io/identity": "kube-apiserver" } },
            "spec": { "holderIdentity": "apiserver-alive" } }),
    )
    .await;
    server
        .seed(json!({
            "apiVersion": "internal.apiserver.k8s.io/v1alpha1", "kind": "StorageVersion",
            "metadata": { "name": "apps.deployments" }, "spec": {},
            "status": { "commonEncodingVersion": "apps/v1", "storageVersions": [
                { "apiServerID": "apiserver-alive", "encodingVersion": "apps/v1", "decodableVersions": ["apps/v1"] },
                { "apiServerID": "apiserver-gone", "encodingVersion": "apps/v1", "decodableVersions": ["apps/v1"] },
            ] },
        }))
        .unwrap();
    let stale = cli_json(&server, &["storageversion", "apps.deployments"]).await;
    assert_eq!(stale["inSync"], false);
    assert_eq!(stale["next"], "drop the dead servers' entries");
    assert_eq!(fields(&stale), ["conditions", "storageVersions"]);
    let alive: Vec<(&str, bool)> = stale["reasons"]["storageVersion"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["apiServerID"].as_str().unwrap(),
                e["alive"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        alive,
        [("apiserver-alive", true), ("apiserver-gone", false)]
    );

    let kcm = InProcess::start(
        &server,
        &[
            "--controllers=storage-version-gc",
            "--feature-gates=StorageVersionAPI=true",
        ],
    )
    .await;
    let svs: Api<StorageVersion> = Api::all(server.client());
    eventually("the dead entry dropped", DEADLINE, || async {
        let sv = svs.get("apps.deployments").await.unwrap();
        sv.status.and_then(|s| s.storage_versions).map(|e| e.len()) == Some(1)
    })
    .await;
    let from_leader = endpoint_json(&kcm, "storageversion/apps.deployments").await;
    assert_eq!(from_leader["inSync"], true, "{from_leader}");
    kcm.stop().await;
}
