//! kcm on a real control plane: kube-apiserver v1.36 and etcd 3.6 from `KUBEBUILDER_ASSETS`
//! (tests/common/envtest.rs), one per test binary, one namespace per test. Without the
//! variable every test says it skipped; `KCM_REQUIRE_ENVTEST=1` (CI) makes that a failure.
//!
//! Cluster-wide checks (node counts, the API server's request counters, Lease `kube-system/kcm`,
//! upstream's controller manager) hold [`CLUSTER`] exclusively; the rest run in parallel.

mod common;

use std::path::Path;
use std::time::Duration;

use common::envtest::{self, ControlPlane, sample_sum};
use common::{Kcm, eventually};
use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, ResourceQuota, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::RwLock;

/// Held for reading by tests that stay in their namespace, for writing by cluster-wide ones.
static CLUSTER: RwLock<()> = RwLock::const_new(());

/// A real API server and kcm on a shared 2-core machine are slower than kube-testserver.
const DEADLINE: Duration = Duration::from_secs(60);

/// storage-version-gc is gated off by default, as upstream; on for every kcm here.
const GATES: &str = "--feature-gates=StorageVersionAPI=true";
const TTL_ANNOTATION: &str = "node.alpha.kubernetes.io/ttl";
const ALL_CONTROLLERS: &str = "resourcequota-controller,disruption-controller,ttl-controller,\
                               resourceclaim-controller,storageversion-garbage-collector-controller";

/// The kcm binary against `kubeconfig`, in the control plane's process group (it dies with
/// it), without leader election unless `extra` asks, with the gates of every test.
fn kcm(plane: &ControlPlane, kubeconfig: &Path, extra: &[&str]) -> Kcm {
    let mut args = vec![GATES, "--kube-api-qps=200", "--kube-api-burst=400"];
    if !extra.iter().any(|a| a.starts_with("--leader-elect")) {
        args.push("--leader-elect=false");
    }
    args.extend_from_slice(extra);
    Kcm::start_with(plane.command(env!("CARGO_BIN_EXE_kcm")), kubeconfig, &args)
}

async fn create<K>(api: &Api<K>, body: Value) -> K
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let object: K = serde_json::from_value(body.clone()).unwrap();
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {body}: {e}"))
}

async fn patch_status<K>(api: &Api<K>, name: &str, status: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap_or_else(|e| panic!("status of {name}: {e}"));
}

/// A pod with one container; `requests` as a container's `resources.requests`.
fn pod(name: &str, labels: Value, requests: Option<Value>) -> Value {
    let mut container = json!({ "name": "c", "image": "registry.k8s.io/pause:3.10" });
    if let Some(requests) = requests {
        container["resources"] = json!({ "requests": requests });
    }
    json!({ "metadata": { "name": name, "labels": labels }, "spec": { "containers": [container] } })
}

/// Marks a pod Running and Ready, as a kubelet would.
async fn run(pods: &Api<Pod>, name: &str, ready: bool) {
    let ready = if ready { "True" } else { "False" };
    patch_status(
        pods,
        name,
        json!({ "phase": "Running", "conditions": [{ "type": "Ready", "status": ready }] }),
    )
    .await;
}

/// A ResourceQuota's `status.used` (or `hard`), as JSON.
async fn quota_status(quotas: &Api<ResourceQuota>, name: &str, field: &str) -> Value {
    let quota = quotas.get(name).await.unwrap();
    serde_json::to_value(quota.status).unwrap_or_default()[field].clone()
}

/// The PDB's status, without the conditions' transition times.
async fn pdb_status(pdbs: &Api<PodDisruptionBudget>, name: &str) -> Value {
    let mut status = serde_json::to_value(pdbs.get(name).await.unwrap().status).unwrap();
    if let Some(conditions) = status["conditions"].as_array_mut() {
        for condition in conditions {
            condition
                .as_object_mut()
                .unwrap()
                .remove("lastTransitionTime");
        }
    }
    status
}

fn reserved_for(claim: &ResourceClaim) -> Value {
    serde_json::to_value(claim.status.as_ref().and_then(|s| s.reserved_for.clone())).unwrap()
}

/// Polls `check` until it yields a value.
async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A sample of kcm's /metrics summed over the series with `labels`.
async fn kcm_metric(kcm: &Kcm, name: &str, labels: &[(&str, &str)]) -> f64 {
    let (_, text) = kcm.get("/metrics").await.unwrap_or_default();
    sample_sum(&text, name, labels)
}

/// kcm's requests the API server refused for authentication, authorization or (the binding
/// rule) validation: from its client metrics and its log.
async fn refusals(kcm: &Kcm) -> Vec<String> {
    let mut found = Vec::new();
    for code in ["401", "403", "422"] {
        let count = kcm_metric(kcm, "rest_client_requests_total", &[("code", code)]).await;
        if count > 0.0 {
            found.push(format!(
                "rest_client_requests_total{{code=\"{code}\"}} {count}"
            ));
        }
    }
    found.extend(
        kcm.log()
            .lines()
            .filter(|l| {
                [
                    "code: 401",
                    "code: 403",
                    "code: 422",
                    "Forbidden",
                    "Unauthorized",
                ]
                .iter()
                .any(|s| l.contains(s))
            })
            .map(str::to_string),
    );
    found
}

/// Waits until every shared store of kcm holds its first full state.
async fn wait_synced(kcm: &Kcm, resources: &[&str]) {
    for resource in resources {
        eventually(
            &format!("kcm's {resource} store syncs"),
            DEADLINE,
            || async {
                kcm_metric(kcm, "kcm_store_synced", &[("resource", resource)]).await == 1.0
            },
        )
        .await;
    }
}

// --- the five controllers ---------------------------------------------------------------

#[tokio::test]
async fn resourcequota_counts_usage_with_scopes_and_count_types() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    let _shared = CLUSTER.read().await;
    let client = plane.client().await;
    let ns = plane.namespace(&client, "quota").await;
    let _kcm = kcm(
        plane,
        &plane.kubeconfig,
        &["--controllers=resourcequota-controller"],
    );
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &ns);
    create(
        &quotas,
        json!({ "metadata": { "name": "all" }, "spec": { "hard": {
            "pods": "10", "count/configmaps": "5", "count/secrets": "4" } } }),
    )
    .await;
    create(
        &quotas,
        json!({ "metadata": { "name": "burstable" }, "spec": { "scopes": ["NotBestEffort"],
            "hard": { "pods": "4", "requests.cpu": "2", "requests.memory": "1Gi" } } }),
    )
    .await;
    create(
        &quotas,
        json!({ "metadata": { "name": "besteffort" }, "spec": { "scopes": ["BestEffort"],
            "hard": { "pods": "3" } } }),
    )
    .await;
    // Until the controller writes `status.hard`, quota admission refuses every pod.
    for name in ["all", "burstable", "besteffort"] {
        eventually(&format!("quota {name} gets its hard"), DEADLINE, || async {
            !quota_status(&quotas, name, "hard").await.is_null()
        })
        .await;
    }

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create(&pods, pod("idle", json!({}), None)).await;
    create(
        &pods,
        pod(
            "web",
            json!({}),
            Some(json!({ "cpu": "500m", "memory": "128Mi" })),
        ),
    )
    .await;
    create(
        &pods,
        pod(
            "worker",
            json!({}),
            Some(json!({ "cpu": "250m", "memory": "64Mi" })),
        ),
    )
    .await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for name in ["a", "b"] {
        create(&configmaps, json!({ "metadata": { "name": name } })).await;
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    create(&secrets, json!({ "metadata": { "name": "s" } })).await;

    let expect = |name: &'static str, used: Value| {
        let quotas = quotas.clone();
        async move {
            let mut last = Value::Null;
            let deadline = tokio::time::Instant::now() + DEADLINE;
            while tokio::time::Instant::now() < deadline {
                last = quota_status(&quotas, name, "used").await;
                if last == used {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("quota {name}: used {last}, want {used}");
        }
    };
    expect(
        "all",
        json!({ "pods": "3", "count/configmaps": "2", "count/secrets": "1" }),
    )
    .await;
    expect(
        "burstable",
        json!({ "pods": "2", "requests.cpu": "750m", "requests.memory": "192Mi" }),
    )
    .await;
    expect("besteffort", json!({ "pods": "1" })).await;

    // Deletions and terminal pods give usage back.
    pods.delete("web", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    patch_status(&pods, "idle", json!({ "phase": "Succeeded" })).await;
    configmaps
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    expect(
        "all",
        json!({ "pods": "1", "count/configmaps": "1", "count/secrets": "1" }),
    )
    .await;
    expect(
        "burstable",
        json!({ "pods": "1", "requests.cpu": "250m", "requests.memory": "64Mi" }),
    )
    .await;
    expect("besteffort", json!({ "pods": "0" })).await;
}

#[tokio::test]
async fn disruption_sets_pdb_status_and_the_disruption_allowed_condition() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    let _shared = CLUSTER.read().await;
    let client = plane.client().await;
    let ns = plane.namespace(&client, "pdb").await;
    let _kcm = kcm(
        plane,
        &plane.kubeconfig,
        &["--controllers=disruption-controller"],
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for name in ["db-0", "db-1", "db-2"] {
        create(&pods, pod(name, json!({ "app": "db" }), None)).await;
        run(&pods, name, true).await;
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    create(
        &pdbs,
        json!({ "metadata": { "name": "db" }, "spec": { "minAvailable": 2,
            "selector": { "matchLabels": { "app": "db" } } } }),
    )
    .await;
    let status = |healthy: i32, allowed: i32, condition: (&str, &str)| {
        json!({ "currentHealthy": healthy, "desiredHealthy": 2, "disruptionsAllowed": allowed,
            "expectedPods": 3, "observedGeneration": 1,
            "conditions": [{ "type": "DisruptionAllowed", "status": condition.0,
                "reason": condition.1, "message": "", "observedGeneration": 1 }] })
    };
    let want = status(3, 1, ("True", "SufficientPods"));
    eventually("the PDB allows one disruption", DEADLINE, || async {
        pdb_status(&pdbs, "db").await == want
    })
    .await;

    run(&pods, "db-2", false).await;
    let want = status(2, 0, ("False", "InsufficientPods"));
    eventually("the PDB allows none", DEADLINE, || async {
        pdb_status(&pdbs, "db").await == want
    })
    .await;
}

#[tokio::test]
async fn resourceclaim_makes_claims_from_templates_reserves_and_cleans_up() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    let _shared = CLUSTER.read().await;
    let client = plane.client().await;
    let ns = plane.namespace(&client, "claims").await;
    let _kcm = kcm(
        plane,
        &plane.kubeconfig,
        &["--controllers=resourceclaim-controller"],
    );
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), &ns);
    create(
        &templates,
        json!({ "metadata": { "name": "gpu" }, "spec": {
            "metadata": { "labels": { "team": "ml" } },
            "spec": { "devices": { "requests": [{ "name": "gpu",
                "exactly": { "deviceClassName": "gpu.example.com" } }] } } } }),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut body = pod("trainer", json!({}), None);
    body["spec"]["nodeName"] = json!("node-gpu");
    body["spec"]["resourceClaims"] = json!([{ "name": "gpu", "resourceClaimTemplateName": "gpu" }]);
    let trainer = create(&pods, body).await;

    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &ns);
    let claim_name = wait_for("the pod records its generated claim", || async {
        let statuses = pods
            .get("trainer")
            .await
            .unwrap()
            .status
            .and_then(|s| s.resource_claim_statuses)
            .unwrap_or_default();
        statuses
            .first()
            .filter(|s| s.name == "gpu")
            .and_then(|s| s.resource_claim_name.clone())
    })
    .await;
    let claim = claims.get(&claim_name).await.unwrap();
    assert!(claim_name.starts_with("trainer-gpu-"), "{claim_name}");
    assert_eq!(claim.labels().get("team").map(String::as_str), Some("ml"));
    assert_eq!(
        claim
            .annotations()
            .get("resource.kubernetes.io/pod-claim-name")
            .map(String::as_str),
        Some("gpu")
    );
    let owner = &claim.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Pod", "trainer", Some(true))
    );

    // No scheduler here: allocate as one would; the pod is bound, so kcm reserves the claim.
    patch_status(
        &claims,
        &claim_name,
        json!({ "allocation": { "devices": { "results": [{ "request": "gpu",
            "driver": "gpu.example.com", "pool": "node-gpu", "device": "gpu-0" }] } } }),
    )
    .await;
    let reservation = json!([{ "resource": "pods", "name": "trainer", "uid": trainer.uid() }]);
    eventually("the claim is reserved for the pod", DEADLINE, || async {
        reserved_for(&claims.get(&claim_name).await.unwrap()) == reservation
    })
    .await;

    // A finished pod releases its claim, which kcm then deletes.
    run(&pods, "trainer", true).await;
    patch_status(&pods, "trainer", json!({ "phase": "Succeeded" })).await;
    eventually("the generated claim is deleted", DEADLINE, || async {
        claims.get_opt(&claim_name).await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn ttl_annotates_nodes_and_steps_with_the_cluster_size() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    // Node counts are cluster-wide.
    let _exclusive = CLUSTER.write().await;
    let client = plane.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let existing = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len();
    let _kcm = kcm(plane, &plane.kubeconfig, &["--controllers=ttl-controller"]);
    let annotations = || async {
        nodes
            .list(&ListParams::default().labels("kcm-test=ttl"))
            .await
            .unwrap()
            .items
            .iter()
            .map(|n| n.annotations().get(TTL_ANNOTATION).cloned())
            .collect::<Vec<_>>()
    };
    // Upstream's steps: 0 s up to 100 nodes, 15 s above, back to 0 s below 90.
    let create_nodes = |range: std::ops::Range<usize>| {
        let nodes = nodes.clone();
        async move {
            for i in range {
                create(
                    &nodes,
                    json!({ "metadata": { "name": format!("ttl-{i}"), "labels": { "kcm-test": "ttl" } } }),
                )
                .await;
            }
        }
    };
    create_nodes(0..3).await;
    eventually("small clusters get ttl 0", DEADLINE, || async {
        annotations().await == vec![Some("0".to_string()); 3]
    })
    .await;
    let total = 101usize.saturating_sub(existing).max(3);
    create_nodes(3..total).await;
    eventually(
        "above 100 nodes every node gets ttl 15",
        DEADLINE,
        || async { annotations().await == vec![Some("15".to_string()); total] },
    )
    .await;
    for i in 3..total {
        nodes
            .delete(&format!("ttl-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually("below 90 nodes ttl 0 again", DEADLINE, || async {
        annotations().await == vec![Some("0".to_string()); 3]
    })
    .await;
    for i in 0..3 {
        nodes
            .delete(&format!("ttl-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
}

/// The identity of the running API server, as its own StorageVersions name it.
async fn live_apiserver_id(client: &Client) -> String {
    let versions: Api<StorageVersion> = Api::all(client.clone());
    wait_for("the API server records a StorageVersion", || async {
        versions
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .flat_map(|v| {
                v.status
                    .and_then(|s| s.storage_versions)
                    .unwrap_or_default()
            })
            .map(|s| s.api_server_id)
            .next()
    })
    .await
}

/// A StorageVersion `name` whose status names these API servers' identities (one encoding
/// version, which the API server demands as `commonEncodingVersion`).
async fn storage_version(client: &Client, name: &str, servers: &[&str]) {
    let versions: Api<StorageVersion> = Api::all(client.clone());
    create(
        &versions,
        json!({ "metadata": { "name": name }, "spec": {} }),
    )
    .await;
    let entries: Vec<Value> = servers
        .iter()
        .map(|id| {
            json!({ "apiServerID": id, "encodingVersion": "example.com/v1",
            "decodableVersions": ["example.com/v1"] })
        })
        .collect();
    patch_status(
        &versions,
        name,
        json!({ "storageVersions": entries, "commonEncodingVersion": "example.com/v1" }),
    )
    .await;
}

#[tokio::test]
async fn storageversion_gc_drops_api_servers_without_an_identity_lease() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    let _shared = CLUSTER.read().await;
    let client = plane.client().await;
    let live = live_apiserver_id(&client).await;
    storage_version(
        &client,
        "gc-gone.example.com.widgets",
        &["apiserver-gone-1"],
    )
    .await;
    storage_version(
        &client,
        "gc-mixed.example.com.widgets",
        &[&live, "apiserver-gone-2"],
    )
    .await;
    let _kcm = kcm(
        plane,
        &plane.kubeconfig,
        &["--controllers=storageversion-garbage-collector-controller"],
    );
    let versions: Api<StorageVersion> = Api::all(client.clone());
    eventually(
        "a StorageVersion of only gone API servers is deleted",
        DEADLINE,
        || async {
            versions
                .get_opt("gc-gone.example.com.widgets")
                .await
                .unwrap()
                .is_none()
        },
    )
    .await;
    eventually("the gone API server's entry goes", DEADLINE, || async {
        let status = versions
            .get("gc-mixed.example.com.widgets")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        let ids: Vec<_> = status
            .storage_versions
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.api_server_id)
            .collect();
        ids == [live.clone()] && status.common_encoding_version.as_deref() == Some("example.com/v1")
    })
    .await;
}
