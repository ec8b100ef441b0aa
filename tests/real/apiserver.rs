//! kcm's controllers, binary and deploy/ on the real control plane. Cluster-wide checks hold
//! [`CLUSTER`] exclusively; the rest run in parallel.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod, ResourceQuota, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kcm_testsupport::envtest::{self, ControlPlane, sample_sum};
use kcm_testsupport::{FAST_LEASE, Kcm, eventually, eventually_some};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::CLUSTER;

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
    Kcm::start_with(
        plane.command(env!("CARGO_BIN_EXE_kcm")),
        plane.log_file(),
        kubeconfig,
        &args,
    )
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

/// Quotas `all` (`hard` as given), `burstable` (NotBestEffort: 4 pods, 2 CPUs, 1Gi) and
/// `besteffort` (BestEffort: `best_effort_pods` pods).
async fn create_quotas(quotas: &Api<ResourceQuota>, all: Value, best_effort_pods: &str) {
    let specs = [
        json!({ "name": "all", "spec": { "hard": all } }),
        json!({ "name": "burstable", "spec": { "scopes": ["NotBestEffort"],
            "hard": { "pods": "4", "requests.cpu": "2", "requests.memory": "1Gi" } } }),
        json!({ "name": "besteffort", "spec": { "scopes": ["BestEffort"],
            "hard": { "pods": best_effort_pods } } }),
    ];
    for quota in specs {
        create(
            quotas,
            json!({ "metadata": { "name": quota["name"] }, "spec": quota["spec"] }),
        )
        .await;
    }
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

/// A test of one controller in a namespace of its own: the shared hold on the cluster, an
/// admin client, the namespace, and kcm running only that controller (all held to the end).
struct OneController {
    _shared: tokio::sync::RwLockReadGuard<'static, ()>,
    client: Client,
    ns: String,
    _kcm: Kcm,
}

async fn one_controller(plane: &ControlPlane, namespace: &str, controller: &str) -> OneController {
    let shared = CLUSTER.read().await;
    let client = plane.client().await;
    let ns = plane.namespace(&client, namespace).await;
    let only = format!("--controllers={controller}");
    let kcm = kcm(plane, &plane.kubeconfig, &[&only]);
    OneController {
        _shared: shared,
        client,
        ns,
        _kcm: kcm,
    }
}

// --- the five controllers ---------------------------------------------------------------

#[tokio::test]
async fn resourcequota_counts_usage_with_scopes_and_count_types() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    let OneController {
        _shared,
        client,
        ns,
        _kcm,
    } = one_controller(plane, "quota", "resourcequota-controller").await;
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &ns);
    create_quotas(
        &quotas,
        json!({ "pods": "10", "count/configmaps": "5", "count/secrets": "4" }),
        "3",
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
    let OneController {
        _shared,
        client,
        ns,
        _kcm,
    } = one_controller(plane, "pdb", "disruption-controller").await;
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
    let OneController {
        _shared,
        client,
        ns,
        _kcm,
    } = one_controller(plane, "claims", "resourceclaim-controller").await;
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
    let claim_name = eventually_some("the pod records its generated claim", DEADLINE, || async {
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
    eventually_some(
        "the API server records a StorageVersion",
        DEADLINE,
        || async {
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
        },
    )
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

// --- kcm under deploy/'s RBAC ----------------------------------------------------------

/// A StorageVersion name (`<group>.<resource>`) unique to namespace `ns`.
fn storage_version_name(ns: &str) -> String {
    format!("{ns}.example.com.widgets")
}

/// Fixtures every controller has work on, in `ns`: a node (ttl), a quota, a PDB over two
/// ready pods, a StorageVersion whose only API server is gone, and an allocated claim used by
/// pod `web`, bound to the node without a scheduler (resourceclaim reserves it). Returns `web`.
async fn seed_workload(client: &Client, ns: &str) -> Pod {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = format!("node-{ns}");
    create(&nodes, json!({ "metadata": { "name": node } })).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for name in ["db-0", "db-1"] {
        create(&pods, pod(name, json!({ "app": "db" }), None)).await;
        run(&pods, name, true).await;
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    create(
        &pdbs,
        json!({ "metadata": { "name": "db" }, "spec": { "minAvailable": 1,
            "selector": { "matchLabels": { "app": "db" } } } }),
    )
    .await;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), ns);
    create(
        &claims,
        json!({ "metadata": { "name": "web-gpu" }, "spec": { "devices": { "requests": [{
            "name": "gpu", "exactly": { "deviceClassName": "gpu.example.com" } }] } } }),
    )
    .await;
    patch_status(
        &claims,
        "web-gpu",
        json!({ "allocation": { "devices": { "results": [{ "request": "gpu",
            "driver": "gpu.example.com", "pool": node, "device": "gpu-0" }] } } }),
    )
    .await;
    let mut web = pod("web", json!({}), None);
    web["spec"]["nodeName"] = json!(node);
    web["spec"]["resourceClaims"] = json!([{ "name": "gpu", "resourceClaimName": "web-gpu" }]);
    let web = create(&pods, web).await;
    // After the pods: quota admission refuses pods until the controller has written `hard`.
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), ns);
    create(
        &quotas,
        json!({ "metadata": { "name": "q" }, "spec": { "hard": { "pods": "10" } } }),
    )
    .await;
    storage_version(client, &storage_version_name(ns), &["apiserver-gone-3"]).await;
    web
}

/// Polls `check` until it holds, failing at once when the API server refused one of `kcm`'s
/// requests.
async fn works<F, Fut>(kcm: &Kcm, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let refused = refusals(kcm).await;
        assert!(
            refused.is_empty(),
            "{what}: refused:\n{}",
            refused.join("\n")
        );
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}\n{}",
            kcm.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until every controller of `kcm` did its work on [`seed_workload`]'s objects, then
/// deletes pod `web` and waits for its reservation to go; fails on any refused request.
async fn every_controller_works(kcm: &Kcm, client: &Client, ns: &str, web: &Pod) {
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), ns);
    let reservation = json!([{ "resource": "pods", "name": "web", "uid": web.uid() }]);
    works(kcm, "web-gpu is reserved for web", || async {
        reserved_for(&claims.get("web-gpu").await.unwrap()) == reservation
    })
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    works(kcm, "the ttl controller annotates the node", || async {
        let node = nodes.get(&format!("node-{ns}")).await.unwrap();
        node.annotations().get(TTL_ANNOTATION).map(String::as_str) == Some("0")
    })
    .await;
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), ns);
    works(kcm, "the quota counts the pods", || async {
        quota_status(&quotas, "q", "used").await == json!({ "pods": "3" })
    })
    .await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    works(kcm, "the PDB allows one disruption", || async {
        let status = pdb_status(&pdbs, "db").await;
        status["expectedPods"] == 2 && status["disruptionsAllowed"] == 1
    })
    .await;
    let versions: Api<StorageVersion> = Api::all(client.clone());
    works(
        kcm,
        "the StorageVersion of a gone API server goes",
        || async {
            versions
                .get_opt(&storage_version_name(ns))
                .await
                .unwrap()
                .is_none()
        },
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.delete("web", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    works(kcm, "web's reservation is released", || async {
        reserved_for(&claims.get("web-gpu").await.unwrap()).is_null()
    })
    .await;
    let refused = refusals(kcm).await;
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
}

/// kcm as deploy/ runs it: ServiceAccount kube-system/kcm (a TokenRequest token), every
/// controller under that identity, with deploy/'s RBAC as `kubectl apply -k` creates it.
#[tokio::test]
async fn under_deploys_rbac_no_request_is_refused() {
    let Some(plane) = envtest::shared_with(&["kubectl"]) else {
        return;
    };
    // Lease kube-system/kcm and the node count are cluster-wide.
    let _exclusive = CLUSTER.write().await;
    let client = plane.client().await;
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy");
    plane.kubectl(&["apply", "-k", deploy]);
    let token = plane.kubectl(&[
        "-n",
        "kube-system",
        "create",
        "token",
        "kcm",
        "--duration=1h",
    ]);
    let kubeconfig = plane.kubeconfig_with_token("kcm-sa", token.trim());
    let ns = plane.namespace(&client, "rbac").await;
    let web = seed_workload(&client, &ns).await;
    let mut args = vec!["--leader-elect=true"];
    args.extend_from_slice(&FAST_LEASE);
    let kcm = kcm(plane, &kubeconfig, &args);
    every_controller_works(&kcm, &client, &ns, &web).await;
}

/// kcm as deploy/control-plane/ runs it: the controller manager's user (a client
/// certificate) and `--use-service-account-credentials`: each controller as its own
/// ServiceAccount with upstream's bootstrap role; only the Lease Role added.
#[tokio::test]
async fn with_service_account_credentials_no_request_is_refused() {
    let Some(plane) = envtest::shared_with(&["kubectl"]) else {
        return;
    };
    let _exclusive = CLUSTER.write().await;
    let client = plane.client().await;
    let control_plane = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/control-plane");
    plane.kubectl(&["apply", "-k", control_plane]);
    let kubeconfig = plane.user_kubeconfig(
        "kube-controller-manager",
        "system:kube-controller-manager",
        &[],
    );
    let ns = plane.namespace(&client, "sa-credentials").await;
    let web = seed_workload(&client, &ns).await;
    let mut args = vec![
        "--leader-elect=true",
        "--use-service-account-credentials=true",
    ];
    args.extend_from_slice(&FAST_LEASE);
    let kcm = kcm(plane, &kubeconfig, &args);
    every_controller_works(&kcm, &client, &ns, &web).await;
    // Each controller's writes were its own ServiceAccount's.
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client, "kube-system");
    for account in [
        "resourcequota-controller",
        "resource-claim-controller",
        "disruption-controller",
        "ttl-controller",
        "storage-version-garbage-collector",
    ] {
        assert!(
            accounts.get_opt(account).await.unwrap().is_some(),
            "kcm created ServiceAccount {account}"
        );
    }
}

// --- streaming lists, leader election -------------------------------------------------

/// The API server's LISTs of `resource` so far (counted when they complete), and its open
/// WATCHes of it (counted while they last).
async fn lists_and_watches(plane: &ControlPlane, resource: &str) -> (f64, f64) {
    let metrics = plane.metrics().await;
    let lists = sample_sum(
        &metrics,
        "apiserver_request_total",
        &[("verb", "LIST"), ("resource", resource)],
    );
    let watches = sample_sum(
        &metrics,
        "apiserver_longrunning_requests",
        &[("verb", "WATCH"), ("resource", resource)],
    );
    (lists, watches)
}

#[tokio::test]
async fn initial_state_streams_from_a_watch_without_listing_pods_or_nodes() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    // The API server's request counters are cluster-wide.
    let _exclusive = CLUSTER.write().await;
    let before = [
        lists_and_watches(plane, "pods").await,
        lists_and_watches(plane, "nodes").await,
    ];
    let kcm = kcm(plane, &plane.kubeconfig, &[]);
    wait_synced(&kcm, &["pods", "nodes"]).await;
    for (resource, before) in ["pods", "nodes"].into_iter().zip(before) {
        let after = lists_and_watches(plane, resource).await;
        assert_eq!(
            after.0 - before.0,
            0.0,
            "{resource} were listed\n{}",
            kcm.log()
        );
        assert!(after.1 > before.1, "no watch of {resource} opened");
    }
}

/// `leader_election_master_status` of lease `name` in kcm's metrics.
async fn leads(kcm: &Kcm, name: &str) -> bool {
    kcm_metric(kcm, "leader_election_master_status", &[("name", name)]).await == 1.0
}

#[tokio::test]
async fn a_warm_standby_takes_over_when_the_leader_is_killed() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    let _shared = CLUSTER.read().await;
    let client = plane.client().await;
    let ns = plane.namespace(&client, "leader").await;
    // A Lease of this test's own, beside kube-system/kcm.
    let lease = format!("--leader-elect-resource-name={ns}");
    let mut args = vec![
        "--leader-elect=true",
        "--controllers=resourcequota-controller",
        &lease,
    ];
    args.extend_from_slice(&FAST_LEASE);
    let first = kcm(plane, &plane.kubeconfig, &args);
    let second = kcm(plane, &plane.kubeconfig, &args);
    let (leader, standby) = eventually_some("one replica leads", DEADLINE, || async {
        match (leads(&first, &ns).await, leads(&second, &ns).await) {
            (true, false) => Some((
                first_or(&first, &second, true),
                first_or(&first, &second, false),
            )),
            (false, true) => Some((
                first_or(&first, &second, false),
                first_or(&first, &second, true),
            )),
            _ => None,
        }
    })
    .await;
    eventually("the other replica is a warm standby", DEADLINE, || async {
        kcm_metric(standby, "kcm_replica_state", &[("state", "warm_standby")]).await == 1.0
    })
    .await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let holder = |lease: Lease| lease.spec.and_then(|s| s.holder_identity);
    let first_holder = holder(leases.get(&ns).await.unwrap());
    assert!(first_holder.is_some());

    leader.signal("KILL");
    eventually("the standby leads", DEADLINE, || async {
        leads(standby, &ns).await
    })
    .await;
    let second_holder = holder(leases.get(&ns).await.unwrap());
    assert!(
        second_holder.is_some() && second_holder != first_holder,
        "{first_holder:?} then {second_holder:?}"
    );
    // And works.
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &ns);
    create(
        &quotas,
        json!({ "metadata": { "name": "q" }, "spec": { "hard": { "pods": "1" } } }),
    )
    .await;
    eventually("the new leader syncs the quota", DEADLINE, || async {
        quota_status(&quotas, "q", "used").await == json!({ "pods": "0" })
    })
    .await;
}

/// `first` when `pick_first`, else `second`.
fn first_or<'a>(first: &'a Kcm, second: &'a Kcm, pick_first: bool) -> &'a Kcm {
    if pick_first { first } else { second }
}

// --- beside upstream -------------------------------------------------------------------

/// Every series of `name` in kcm's metrics: (how many, their sum).
async fn series(kcm: &Kcm, name: &str) -> (usize, f64) {
    let (_, text) = kcm.get("/metrics").await.unwrap_or_default();
    let prefix = format!("{name}{{");
    let count = text.lines().filter(|l| l.starts_with(&prefix)).count();
    (count, sample_sum(&text, name, &[]))
}

/// The controllers kcm counts reconciles of (`kcm_reconcile_total{controller}`).
async fn reconciling_controllers(kcm: &Kcm) -> std::collections::BTreeSet<String> {
    let (_, text) = kcm.get("/metrics").await.unwrap_or_default();
    text.lines()
        .filter_map(|l| l.strip_prefix("kcm_reconcile_total{"))
        .filter_map(|l| l.split_once('}'))
        .flat_map(|(labels, _)| envtest::parse_labels(labels))
        .filter(|(key, _)| key == "controller")
        .map(|(_, value)| value)
        .collect()
}

/// Upstream's kube-controller-manager running `controllers` (names as its `--controllers`), as
/// the admin, in the control plane's process group; killed when dropped.
struct Upstream {
    child: std::process::Child,
    log: tempfile::NamedTempFile,
}

impl Upstream {
    fn start(plane: &ControlPlane, controllers: &str) -> Self {
        let log = plane.log_file();
        let child = plane
            .command(plane.assets.join("kube-controller-manager"))
            .arg(format!("--kubeconfig={}", plane.kubeconfig.display()))
            .arg(format!("--controllers={controllers}"))
            .args([
                "--leader-elect=false",
                "--feature-gates=StorageVersionAPI=true",
                "--secure-port=0",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .expect("kube-controller-manager starts");
        Self { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Polls `check` until it holds; at the deadline fails with upstream's log.
    async fn does<F, Fut>(&self, what: &str, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while !check().await {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for upstream: {what}\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The real server answers kcm's quota discovery with aggregated discovery (two documents),
/// and the preferred resources made of it name what upstream's quota controller counts.
#[tokio::test]
async fn quota_discovery_reads_the_real_servers_aggregated_documents() {
    use kcm::controllers::resourcequota::discovery::{preferred_lists, quotable};
    use kcm::runtime::connection::discovery::{Root, aggregated};
    let Some(plane) = envtest::shared() else {
        return;
    };
    let _shared = CLUSTER.read().await;
    let client = plane.client().await;
    let mut counted = Vec::new();
    for root in [Root::Core, Root::Groups] {
        let document = aggregated(&client, root)
            .await
            .unwrap_or_else(|e| panic!("discovery: {e}"))
            .unwrap_or_else(|| panic!("no aggregated answer ({root:?})"));
        for list in preferred_lists(&document) {
            counted.extend(quotable(&list).into_iter().map(|q| q.count_name));
        }
    }
    for name in [
        "pods",
        "configmaps",
        "resourcequotas",
        "deployments.apps",
        "resourceclaims.resource.k8s.io",
    ] {
        assert!(counted.iter().any(|c| c == name), "{name} in {counted:?}");
    }
    // Not quotable: cluster-scoped, ignored by upstream, or without the four verbs.
    for name in [
        "nodes",
        "events",
        "events.events.k8s.io",
        "bindings",
        "tokenreviews.authentication.k8s.io",
    ] {
        assert!(!counted.iter().any(|c| c == name), "{name} in {counted:?}");
    }
    // Aggregated discovery is answered wherever `Accept` lists it, even after plain JSON
    // (kube-testserver answers the same way); without it, the legacy document.
    let aggregated_v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    for (accept, want) in [
        (format!("{aggregated_v2},application/json"), aggregated_v2),
        (format!("application/json,{aggregated_v2}"), aggregated_v2),
        ("application/json".to_string(), "application/json"),
    ] {
        let request = http::Request::get("/apis")
            .header(http::header::ACCEPT, &accept)
            .body(kube::client::Body::empty())
            .unwrap();
        let response = client.send(request).await.unwrap();
        let content_type = response.headers()[http::header::CONTENT_TYPE]
            .to_str()
            .unwrap();
        assert_eq!(content_type, want, "Accept: {accept}");
    }
}

/// Upstream keeps the statuses; kcm `--shadow`, started once they settled, computes the same
/// and would write nothing.
#[tokio::test]
async fn beside_upstream_kcm_in_shadow_would_write_nothing() {
    let Some(plane) = envtest::shared_with(&["kube-controller-manager"]) else {
        return;
    };
    // Upstream's controllers act on the whole cluster.
    let _exclusive = CLUSTER.write().await;
    let client = plane.client().await;
    let upstream = Upstream::start(plane, ALL_CONTROLLERS);
    let ns = plane.namespace(&client, "beside").await;

    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &ns);
    let all = json!({ "pods": "10", "count/configmaps": "5",
        "count/resourceclaims.resource.k8s.io": "4" });
    create_quotas(&quotas, all, "5").await;
    for name in ["all", "burstable", "besteffort"] {
        upstream
            .does(&format!("quota {name} gets its hard"), || async {
                !quota_status(&quotas, name, "hard").await.is_null()
            })
            .await;
    }

    let nodes: Api<Node> = Api::all(client.clone());
    let node = format!("node-{ns}");
    create(&nodes, json!({ "metadata": { "name": node } })).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create(
        &pods,
        pod(
            "web",
            json!({}),
            Some(json!({ "cpu": "500m", "memory": "128Mi" })),
        ),
    )
    .await;
    for name in ["db-0", "db-1", "db-2"] {
        create(&pods, pod(name, json!({ "app": "db" }), None)).await;
        run(&pods, name, name != "db-2").await;
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    create(
        &pdbs,
        json!({ "metadata": { "name": "db" }, "spec": { "minAvailable": 1,
            "selector": { "matchLabels": { "app": "db" } } } }),
    )
    .await;
    // Requests of the whole pod (PodLevelResources), none of its container.
    let mut sized = pod("sized", json!({}), None);
    sized["spec"]["resources"] = json!({ "requests": { "cpu": "1", "memory": "256Mi" } });
    create(&pods, sized).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    create(&configmaps, json!({ "metadata": { "name": "settings" } })).await;
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), &ns);
    create(
        &templates,
        json!({ "metadata": { "name": "gpu" }, "spec": { "spec": { "devices": { "requests": [{
            "name": "gpu", "exactly": { "deviceClassName": "gpu.example.com" } }] } } } }),
    )
    .await;
    let mut trainer = pod("trainer", json!({}), None);
    trainer["spec"]["nodeName"] = json!(node);
    trainer["spec"]["resourceClaims"] =
        json!([{ "name": "gpu", "resourceClaimTemplateName": "gpu" }]);
    let trainer = create(&pods, trainer).await;
    let live = live_apiserver_id(&client).await;
    let version = storage_version_name(&ns);
    storage_version(&client, &version, &[&live, "apiserver-gone-4"]).await;

    // Upstream settles: the claim made, allocated (by this test) and reserved, every status.
    let claim = eventually_some("upstream makes the pod's claim", DEADLINE, || async {
        pods.get("trainer")
            .await
            .unwrap()
            .status
            .and_then(|s| s.resource_claim_statuses)
            .and_then(|s| s.first().and_then(|s| s.resource_claim_name.clone()))
    })
    .await;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &ns);
    patch_status(
        &claims,
        &claim,
        json!({ "allocation": { "devices": { "results": [{ "request": "gpu",
            "driver": "gpu.example.com", "pool": node, "device": "gpu-0" }] } } }),
    )
    .await;
    let reservation = json!([{ "resource": "pods", "name": "trainer", "uid": trainer.uid() }]);
    eventually("upstream reserves the claim", DEADLINE, || async {
        reserved_for(&claims.get(&claim).await.unwrap()) == reservation
    })
    .await;
    eventually("upstream counts the quotas", DEADLINE, || async {
        quota_status(&quotas, "all", "used").await
            == json!({ "pods": "6", "count/configmaps": "1",
                "count/resourceclaims.resource.k8s.io": "1" })
            && quota_status(&quotas, "burstable", "used").await
                == json!({ "pods": "2", "requests.cpu": "1500m", "requests.memory": "384Mi" })
            && quota_status(&quotas, "besteffort", "used").await == json!({ "pods": "4" })
    })
    .await;
    eventually("upstream's PDB status", DEADLINE, || async {
        let status = pdb_status(&pdbs, "db").await;
        status["currentHealthy"] == 2 && status["disruptionsAllowed"] == 1
    })
    .await;
    eventually("upstream annotates the node", DEADLINE, || async {
        let node = nodes.get(&node).await.unwrap();
        node.annotations().get(TTL_ANNOTATION).is_some()
    })
    .await;
    let versions: Api<StorageVersion> = Api::all(client.clone());
    eventually("upstream drops the gone API server", DEADLINE, || async {
        let status = versions.get(&version).await.unwrap().status;
        status.and_then(|s| s.storage_versions).map(|v| v.len()) == Some(1)
    })
    .await;

    // kcm cold-starts in shadow mode on the settled cluster and works through it all.
    let shadow = kcm(plane, &plane.kubeconfig, &["--shadow"]);
    works(&shadow, "kcm's stores sync", || async {
        let (count, synced) = series(&shadow, "kcm_store_synced").await;
        count > 0 && synced == count as f64
    })
    .await;
    // storage-version-gc has nothing to reconcile: every entry left names a live API server.
    let drained = || async {
        let reconciled = reconciling_controllers(&shadow).await;
        [
            "resourcequota-controller",
            "disruption-controller",
            "resourceclaim-controller",
            "ttl-controller",
        ]
        .iter()
        .all(|c| reconciled.contains(*c))
            && series(&shadow, "workqueue_depth").await.1 == 0.0
            && series(&shadow, "workqueue_unfinished_work_seconds").await.1 == 0.0
    };
    works(
        &shadow,
        "each controller reconciled and kcm's queues drained",
        drained,
    )
    .await;
    let diffs = series(&shadow, "kcm_shadow_diffs_total").await.1;
    let log = shadow.log();
    let withheld: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("shadow: not writing"))
        .collect();
    assert!(
        diffs == 0.0 && withheld.is_empty(),
        "kcm would write {diffs} times beside upstream:\n{}",
        withheld.join("\n")
    );

    // `kcm explain` reads the same cluster once and agrees: every status upstream keeps is
    // the one kcm's plans would write, and it says so.
    let objects: [&[&str]; 7] = [
        &["quota", "-n", &ns, "all"],
        &["quota", "-n", &ns, "burstable"],
        &["quota", "-n", &ns, "besteffort"],
        &["pdb", "-n", &ns, "db"],
        &["claim", "-n", &ns, &claim],
        &["node", &node],
        &["storageversion", &version],
    ];
    for object in objects {
        let explained = explain_json(plane, object).await;
        assert_eq!(
            explained["inSync"], true,
            "kcm explain {object:?} beside upstream: {explained:#}"
        );
    }
}

/// `kcm explain ARGS -o json` against the control plane, with the gates of every test.
async fn explain_json(plane: &ControlPlane, args: &[&str]) -> Value {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_kcm"))
        .arg("explain")
        .args(args)
        .args(["-o", "json", GATES, "--kubeconfig"])
        .arg(&plane.kubeconfig)
        .output()
        .await
        .expect("kcm explain runs");
    let (out, err) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "kcm explain {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("kcm explain {args:?}: {e}: {out}"))
}

// --- upstream issues kcm fixes (docs/upstream-fixes.md) ----------------------------------

/// How many nodes carry each TTL annotation (`-`: none).
async fn ttl_census(nodes: &Api<Node>) -> BTreeMap<String, usize> {
    let mut census = BTreeMap::new();
    for node in nodes.list(&ListParams::default()).await.unwrap().items {
        let ttl = node.annotations().get(TTL_ANNOTATION).cloned();
        *census.entry(ttl.unwrap_or_else(|| "-".into())).or_default() += 1;
    }
    census
}

/// Sets (or, with None, removes) a node's TTL annotation.
async fn annotate_ttl(nodes: &Api<Node>, name: &str, ttl: Option<&str>) {
    let patch = json!({ "metadata": { "annotations": { TTL_ANNOTATION: ttl } } });
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap_or_else(|e| panic!("annotating {name}: {e}"));
}

/// The node writes (PATCH, PUT) the API server served so far, from any client.
async fn node_writes(plane: &ControlPlane) -> f64 {
    let metrics = plane.metrics().await;
    ["PATCH", "UPDATE"]
        .iter()
        .map(|verb| {
            sample_sum(
                &metrics,
                "apiserver_request_total",
                &[("verb", verb), ("resource", "nodes")],
            )
        })
        .sum()
}

/// Waits until kcm's ttl-controller has reconciled `nodes` nodes: every node of its first list.
async fn ttl_reconciled(kcm: &Kcm, nodes: usize) {
    let reconciled = || async {
        let labels = [("controller", "ttl-controller"), ("result", "success")];
        kcm_metric(kcm, "kcm_reconcile_total", &labels).await
    };
    works(
        kcm,
        &format!("kcm reconciles all {nodes} nodes"),
        || async { reconciled().await >= nodes as f64 },
    )
    .await;
}

/// `kcm_shadow_diffs_total` of `controller` with `reason`.
async fn shadow_diffs(kcm: &Kcm, controller: &str, reason: &str) -> f64 {
    let labels = [("controller", controller), ("reason", reason)];
    kcm_metric(kcm, "kcm_shadow_diffs_total", &labels).await
}

/// kubernetes#109779 on the real API server: 95 nodes, inside the overlap (90–100) where TTL 0
/// and TTL 15 both hold, all saying 15 as a cluster grown past 100 and shrunk leaves them.
/// kcm, started on them, keeps 15 and writes no node. Upstream's ttl controller, started on
/// the same nodes, counts from step 0 and patches every node to 0 (the restart storm of the
/// issue); kcm `--shadow` beside it would patch each back and labels each difference with the
/// issue, none as unexplained.
#[tokio::test]
async fn ttl_a_restart_inside_the_overlap_writes_nothing_where_upstream_rewrites_every_node() {
    let Some(plane) = envtest::shared_with(&["kube-controller-manager"]) else {
        return;
    };
    // Node counts and the API server's counters are cluster-wide; upstream acts on every node.
    let _exclusive = CLUSTER.write().await;
    let client = plane.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    const SIZE: usize = 95;
    // Nodes other tests left count too: they say 15 as well until the end.
    let left: Vec<(String, Option<String>)> = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| (n.name_any(), n.annotations().get(TTL_ANNOTATION).cloned()))
        .collect();
    assert!(
        left.len() < SIZE,
        "{} nodes left by other tests",
        left.len()
    );
    for (name, _) in &left {
        annotate_ttl(&nodes, name, Some("15")).await;
    }
    let added: Vec<String> = (left.len()..SIZE)
        .map(|i| format!("ttl-overlap-{i}"))
        .collect();
    for name in &added {
        create(
            &nodes,
            json!({ "metadata": { "name": name, "annotations": { TTL_ANNOTATION: "15" } } }),
        )
        .await;
    }
    let settled = BTreeMap::from([("15".to_string(), SIZE)]);
    assert_eq!(ttl_census(&nodes).await, settled);
    let before = node_writes(plane).await;

    let restarted = kcm(plane, &plane.kubeconfig, &["--controllers=ttl-controller"]);
    ttl_reconciled(&restarted, SIZE).await;
    let writes = kcm_metric(
        &restarted,
        "kcm_api_writes_total",
        &[("controller", "ttl-controller")],
    )
    .await;
    assert_eq!(writes, 0.0, "kcm wrote nodes:\n{}", restarted.log());
    assert_eq!(node_writes(plane).await - before, 0.0, "nodes were written");
    assert_eq!(ttl_census(&nodes).await, settled);
    drop(restarted);

    // The shadow starts first, so it counts the nodes as they were.
    let shadow = kcm(
        plane,
        &plane.kubeconfig,
        &["--controllers=ttl-controller", "--shadow"],
    );
    ttl_reconciled(&shadow, SIZE).await;
    assert_eq!(series(&shadow, "kcm_shadow_diffs_total").await.1, 0.0);
    let upstream = Upstream::start(plane, "ttl-controller");
    let rewritten = BTreeMap::from([("0".to_string(), SIZE)]);
    upstream
        .does("every node patched to ttl 0", || async {
            ttl_census(&nodes).await == rewritten
        })
        .await;
    assert_eq!(
        node_writes(plane).await - before,
        SIZE as f64,
        "upstream patched each node once"
    );
    works(&shadow, "kcm labels each node's difference", || async {
        shadow_diffs(&shadow, "ttl-controller", "kubernetes#109779").await >= SIZE as f64
    })
    .await;
    assert_eq!(
        shadow_diffs(&shadow, "ttl-controller", "unexplained").await,
        0.0,
        "{}",
        shadow.log()
    );
    drop(upstream);
    drop(shadow);

    for name in &added {
        nodes.delete(name, &DeleteParams::default()).await.unwrap();
    }
    for (name, ttl) in &left {
        annotate_ttl(&nodes, name, ttl.as_deref()).await;
    }
}

/// The finalizer that keeps pod `web-old-1` terminating.
const HOLD: &str = "kcm-test/hold";

/// An owner reference to `owner` as its controller.
fn controlled_by<K: kube::Resource<DynamicType = ()>>(owner: &K) -> Value {
    json!([{ "apiVersion": K::api_version(&()), "kind": K::kind(&()),
        "name": owner.name_any(), "uid": owner.uid().unwrap(), "controller": true }])
}

/// The end of a rollout (kubernetes#130723) in `ns`: Deployment `web` (3 replicas), its new
/// ReplicaSet's 3 ready pods, and the old ReplicaSet (scaled to 0) deleted while its pod
/// `web-old-1` still terminates (a finalizer holds it; no garbage collector runs here). Then
/// PDB `web` (`maxUnavailable: 1`) over all four.
async fn rollout_with_a_terminating_orphan(client: &Client, ns: &str) {
    let template = |hash: &str| {
        json!({ "metadata": { "labels": { "app": "web", "pod-template-hash": hash } },
            "spec": { "containers": [{ "name": "c", "image": "registry.k8s.io/pause:3.10" }] } })
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let deployment = create(
        &deployments,
        json!({ "metadata": { "name": "web" }, "spec": { "replicas": 3,
            "selector": { "matchLabels": { "app": "web" } }, "template": template("new") } }),
    )
    .await;
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
    let replica_set = |hash: &str, replicas: i32| {
        json!({ "metadata": { "name": format!("web-{hash}"),
                "ownerReferences": controlled_by(&deployment) },
            "spec": { "replicas": replicas, "template": template(hash),
                "selector": { "matchLabels": { "app": "web", "pod-template-hash": hash } } } })
    };
    let new = create(&replica_sets, replica_set("new", 3)).await;
    let old = create(&replica_sets, replica_set("old", 0)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let owned = |name: &str, owner: &ReplicaSet| {
        let hash = owner.name_any().trim_start_matches("web-").to_string();
        let mut body = pod(
            name,
            json!({ "app": "web", "pod-template-hash": hash }),
            None,
        );
        body["metadata"]["ownerReferences"] = controlled_by(owner);
        body
    };
    for i in 0..3 {
        let name = format!("web-new-{i}");
        create(&pods, owned(&name, &new)).await;
        run(&pods, &name, true).await;
    }
    let mut orphan = owned("web-old-1", &old);
    orphan["metadata"]["finalizers"] = json!([HOLD]);
    create(&pods, orphan).await;
    run(&pods, "web-old-1", true).await;
    pods.delete("web-old-1", &DeleteParams::default())
        .await
        .unwrap();
    replica_sets
        .delete("web-old", &DeleteParams::background())
        .await
        .unwrap();
    let orphan = pods.get("web-old-1").await.unwrap();
    assert!(orphan.metadata.deletion_timestamp.is_some(), "terminating");
    assert!(replica_sets.get_opt("web-old").await.unwrap().is_none());
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    create(
        &pdbs,
        json!({ "metadata": { "name": "web" }, "spec": { "maxUnavailable": 1,
            "selector": { "matchLabels": { "app": "web" } } } }),
    )
    .await;
}

/// Lets the terminating pod go.
async fn release_the_orphan(client: &Client, ns: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let patch = json!({ "metadata": { "finalizers": null } });
    pods.patch("web-old-1", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

/// PDB `web`'s status computed from the pods that remain: the Deployment wants 3, 2 must stay
/// healthy, the 3 new pods are (the terminating one is not): one may go.
fn status_of_the_remaining_pods() -> Value {
    json!({ "currentHealthy": 3, "desiredHealthy": 2, "disruptionsAllowed": 1,
        "expectedPods": 3, "observedGeneration": 1,
        "conditions": [{ "type": "DisruptionAllowed", "status": "True",
            "reason": "SufficientPods", "message": "", "observedGeneration": 1 }] })
}

/// The reasons and messages of the events in `ns`.
async fn events_in(client: &Client, ns: &str) -> Vec<(String, String)> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

/// kubernetes#130723 on the real API server: the old ReplicaSet is gone while its pod
/// terminates. kcm computes the budget from the remaining pods, without the warning.
#[tokio::test]
async fn disruption_a_terminating_pod_whose_replica_set_is_gone_does_not_block_evictions() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    let _shared = CLUSTER.read().await;
    let client = plane.client().await;
    let ns = plane.namespace(&client, "orphan").await;
    rollout_with_a_terminating_orphan(&client, &ns).await;
    // Started after the ReplicaSet went: its first list never holds it.
    let kcm = kcm(
        plane,
        &plane.kubeconfig,
        &["--controllers=disruption-controller"],
    );
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    let want = status_of_the_remaining_pods();
    works(&kcm, "the PDB's status of the remaining pods", || async {
        pdb_status(&pdbs, "web").await == want
    })
    .await;
    let events = kcm_metric(
        &kcm,
        "kcm_api_writes_total",
        &[
            ("controller", "disruption-controller"),
            ("resource", "events"),
        ],
    )
    .await;
    assert_eq!(events, 0.0, "kcm sent events:\n{}", kcm.log());
    assert_eq!(events_in(&client, &ns).await, []);
    release_the_orphan(&client, &ns).await;
}

/// kubernetes#130723 beside upstream: upstream's disruption controller fails the same budget
/// safe (`SyncFailed`, `disruptionsAllowed: 0`, a CalculateExpectedPodCountFailed warning)
/// until the pod is gone, then computes the status kcm computed all along. kcm `--shadow`
/// beside it labels its difference with the issue, none as unexplained.
#[tokio::test]
async fn disruption_beside_upstream_a_terminating_orphan_is_a_labelled_difference() {
    let Some(plane) = envtest::shared_with(&["kube-controller-manager"]) else {
        return;
    };
    // Upstream's controller acts on every PDB.
    let _exclusive = CLUSTER.write().await;
    let client = plane.client().await;
    let ns = plane.namespace(&client, "orphan-upstream").await;
    rollout_with_a_terminating_orphan(&client, &ns).await;
    let upstream = Upstream::start(plane, "disruption-controller");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    let failed = r#"found no controllers for pod "web-old-1""#;
    let fail_safe = json!({ "currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0,
        "expectedPods": 0, "conditions": [{ "type": "DisruptionAllowed", "status": "False",
            "reason": "SyncFailed", "message": failed }] });
    upstream
        .does("the PDB fails safe", || async {
            pdb_status(&pdbs, "web").await == fail_safe
        })
        .await;
    let warning = (
        "CalculateExpectedPodCountFailed".to_string(),
        format!("Failed to calculate the number of expected pods: {failed}"),
    );
    upstream
        .does("the warning", || async {
            events_in(&client, &ns).await.contains(&warning)
        })
        .await;

    let shadow = kcm(
        plane,
        &plane.kubeconfig,
        &["--controllers=disruption-controller", "--shadow"],
    );
    works(&shadow, "kcm labels its difference", || async {
        shadow_diffs(&shadow, "disruption-controller", "kubernetes#130723").await >= 1.0
    })
    .await;
    works(&shadow, "kcm's queue drains", || async {
        series(&shadow, "workqueue_depth").await.1 == 0.0
            && series(&shadow, "workqueue_unfinished_work_seconds").await.1 == 0.0
    })
    .await;
    assert_eq!(
        shadow_diffs(&shadow, "disruption-controller", "unexplained").await,
        0.0,
        "{}",
        shadow.log()
    );

    release_the_orphan(&client, &ns).await;
    let want = status_of_the_remaining_pods();
    upstream
        .does("the PDB's status once the pod is gone", || async {
            pdb_status(&pdbs, "web").await == want
        })
        .await;
}

// --- what kube-testserver learned ------------------------------------------------------

/// What a server answers to a StorageVersion `name` getting `status`: "accepted" or the
/// refusal's code and message.
async fn storage_version_status_outcome(client: Client, name: &str, status: &Value) -> String {
    let versions: Api<StorageVersion> = Api::all(client);
    create(
        &versions,
        json!({ "metadata": { "name": name }, "spec": {} }),
    )
    .await;
    let result = versions
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await;
    versions
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    outcome(result)
}

/// kube-testserver accepted any StorageVersion status; the API server validates what
/// storage-version-gc writes. Both now answer alike, word for word.
#[tokio::test]
async fn kube_testserver_validates_storage_version_statuses_as_the_api_server_does() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    // StorageVersions naming unknown API servers are storage-version-gc's to delete.
    let _exclusive = CLUSTER.write().await;
    let model = kube_testserver::TestServer::start().await;
    let entry = |id: &str, version: &str| json!({ "apiServerID": id, "encodingVersion": version, "decodableVersions": [version] });
    let condition = json!({ "type": "AllEncodingVersionsEqual", "status": "True",
        "reason": "CommonEncodingVersionSet", "message": "Common encoding version set" });
    let cases = [
        json!({ "storageVersions": [entry("kas-1", "v1")] }),
        json!({ "storageVersions": [entry("kas-1", "v1")], "commonEncodingVersion": "v1",
            "conditions": [condition] }),
        json!({ "storageVersions": [entry("kas-1", "v1")], "commonEncodingVersion": "v2" }),
        json!({ "storageVersions": [entry("kas-1", "v1"), entry("kas-2", "apps/v1")] }),
        json!({ "storageVersions": [entry("kas-1", "v1"), entry("kas-2", "apps/v1")],
            "commonEncodingVersion": "v1" }),
        json!({ "storageVersions": [entry("kas-1", "v1"), entry("kas-1", "v1")],
            "commonEncodingVersion": "v1" }),
        json!({ "storageVersions": [entry("kas/1", "v1")], "commonEncodingVersion": "v1" }),
        json!({ "storageVersions": [{ "apiServerID": "kas-1", "encodingVersion": "v2",
            "decodableVersions": ["v1"] }], "commonEncodingVersion": "v2" }),
        json!({ "conditions": [{ "type": "AllEncodingVersionsEqual", "status": "True",
            "reason": "CommonEncodingVersionSet" }] }),
        json!({ "storageVersions": [] }),
    ];
    for (i, status) in cases.iter().enumerate() {
        let name = format!("validation-{i}.example.com.widgets");
        let real = storage_version_status_outcome(plane.client().await, &name, status).await;
        let modelled = storage_version_status_outcome(model.client(), &name, status).await;
        assert_eq!(modelled, real, "status {status}");
    }
}

/// What a server answers to a write: "accepted" or the refusal's code and message.
fn outcome<K>(result: Result<K, kube::Error>) -> String {
    match result {
        Ok(_) => "accepted".to_string(),
        Err(kube::Error::Api(status)) => format!("{} {}", status.code, status.message),
        Err(e) => e.to_string(),
    }
}

/// A ResourceClaim `name` in `ns` with status `first`, then `second` (merge patches): what
/// the second write gets.
async fn claim_status_outcome(
    client: Client,
    ns: &str,
    name: &str,
    first: &Value,
    second: &Value,
) -> String {
    let claims: Api<ResourceClaim> = Api::namespaced(client, ns);
    create(
        &claims,
        json!({ "metadata": { "name": name }, "spec": { "devices": { "requests": [{
            "name": "gpu", "exactly": { "deviceClassName": "gpu.example.com" } }] } } }),
    )
    .await;
    patch_status(&claims, name, first.clone()).await;
    outcome(
        claims
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": second })),
            )
            .await,
    )
}

/// A pod `name` in `ns` with claim `gpu` getting `statuses` as its claim statuses.
async fn pod_claim_statuses_outcome(
    client: Client,
    ns: &str,
    name: &str,
    statuses: &Value,
) -> String {
    let pods: Api<Pod> = Api::namespaced(client, ns);
    let mut body = pod(name, json!({}), None);
    body["spec"]["resourceClaims"] = json!([{ "name": "gpu", "resourceClaimTemplateName": "t" }]);
    create(&pods, body).await;
    outcome(
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "resourceClaimStatuses": statuses } })),
        )
        .await,
    )
}

/// kube-testserver accepted any claim status and any pod claim statuses; the API server
/// validates what the resourceclaim controller writes. Both now answer alike (an allocation
/// changed in place is refused by both, but the API server shows its Go value).
#[tokio::test]
async fn kube_testserver_validates_claim_writes_as_the_api_server_does() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    let _shared = CLUSTER.read().await;
    let client = plane.client().await;
    let ns = plane.namespace(&client, "validation").await;
    let model = kube_testserver::TestServer::start().await;
    let allocation = |device: &str| {
        json!({ "devices": { "results": [{ "request": "gpu", "driver": "gpu.example.com",
            "pool": "p", "device": device }] } })
    };
    let pod_a = json!({ "resource": "pods", "name": "a", "uid": "u1" });
    let cases = [
        (json!({}), json!({ "reservedFor": [pod_a] })),
        (
            json!({ "allocation": allocation("d"), "reservedFor": [pod_a] }),
            json!({ "allocation": null }),
        ),
        (
            json!({ "allocation": allocation("d") }),
            json!({ "reservedFor": [pod_a, pod_a] }),
        ),
        (
            json!({ "allocation": allocation("d"), "reservedFor": [pod_a] }),
            json!({ "allocation": null, "reservedFor": null }),
        ),
        (
            json!({ "allocation": allocation("d") }),
            json!({ "reservedFor": [pod_a] }),
        ),
    ];
    for (i, (first, second)) in cases.iter().enumerate() {
        let name = format!("claim-{i}");
        let real = claim_status_outcome(client.clone(), &ns, &name, first, second).await;
        let modelled = claim_status_outcome(model.client(), "default", &name, first, second).await;
        assert_eq!(modelled, real, "{first} then {second}");
    }
    let changed = claim_status_outcome(
        client.clone(),
        &ns,
        "claim-changed",
        &json!({ "allocation": allocation("d") }),
        &json!({ "allocation": allocation("e") }),
    )
    .await;
    let modelled = claim_status_outcome(
        model.client(),
        "default",
        "claim-changed",
        &json!({ "allocation": allocation("d") }),
        &json!({ "allocation": allocation("e") }),
    )
    .await;
    for answer in [&changed, &modelled] {
        assert!(
            answer.starts_with("422 ")
                && answer.contains("is invalid: status.allocation: Invalid value: ")
                && answer.ends_with(": field is immutable"),
            "{answer}"
        );
    }

    let statuses = [
        json!([{ "name": "gpu", "resourceClaimName": "p-gpu-x" }]),
        json!([{ "name": "nope", "resourceClaimName": "x" }]),
        json!([{ "name": "gpu", "resourceClaimName": "x" }, { "name": "gpu", "resourceClaimName": "y" }]),
        json!([{ "name": "gpu", "resourceClaimName": "X_bad" }]),
    ];
    for (i, statuses) in statuses.iter().enumerate() {
        let name = format!("pod-{i}");
        let real = pod_claim_statuses_outcome(client.clone(), &ns, &name, statuses).await;
        let modelled = pod_claim_statuses_outcome(model.client(), "default", &name, statuses).await;
        assert_eq!(modelled, real, "{statuses}");
    }
}

/// The labels and annotations of an object once a status PUT sent it with other ones: what
/// the server takes from a status write's metadata.
async fn metadata_after_status_put<K>(api: &Api<K>, body: Value, status: Value) -> Value
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let created = create(api, body).await;
    let mut sent = serde_json::to_value(&created).unwrap();
    sent["metadata"]["labels"] = json!({ "sent": "with-the-status" });
    sent["metadata"]["annotations"] = json!({ "sent": "too" });
    sent["status"] = status;
    let name = created.name_any();
    let sent: K = serde_json::from_value(sent).unwrap();
    api.replace_status(&name, &PostParams::default(), &sent)
        .await
        .unwrap();
    let written = serde_json::to_value(api.get(&name).await.unwrap()).unwrap();
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    json!({ "labels": written["metadata"]["labels"], "annotations": written["metadata"]["annotations"] })
}

/// kube-testserver kept the stored metadata on every status write, which hid that kcm's quota
/// and PDB status writes deleted kubectl's last-applied annotation: the API server takes a
/// quota's and a PDB's labels and annotations from the status write's body, and keeps a
/// claim's. Both servers now agree.
#[tokio::test]
async fn kube_testserver_takes_status_write_metadata_as_the_api_server_does() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    let _shared = CLUSTER.read().await;
    let ns = plane
        .namespace(&plane.client().await, "status-metadata")
        .await;
    let model = kube_testserver::TestServer::start().await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(model.client());
    create(&namespaces, json!({ "metadata": { "name": ns } })).await;
    let meta = |name: &str| {
        json!({ "name": name, "labels": { "created": "with-the-object" },
            "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{}" } })
    };
    let quota = json!({ "metadata": meta("q"), "spec": { "hard": { "pods": "1" } } });
    let quota_status = json!({ "hard": { "pods": "1" }, "used": { "pods": "0" } });
    let pdb = json!({ "metadata": meta("p"),
        "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "x" } } } });
    let pdb_status = json!({ "disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 1,
        "expectedPods": 0 });
    let claim = json!({ "metadata": meta("c"), "spec": { "devices": { "requests": [
        { "name": "r", "exactly": { "deviceClassName": "example.com" } }] } } });
    for (server, client) in [
        ("kube-apiserver", plane.client().await),
        ("kube-testserver", model.client()),
    ] {
        let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &ns);
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
        let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &ns);
        let taken = json!({ "labels": { "sent": "with-the-status" },
            "annotations": { "sent": "too" } });
        let kept = json!({ "labels": { "created": "with-the-object" },
            "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{}" } });
        assert_eq!(
            metadata_after_status_put(&quotas, quota.clone(), quota_status.clone()).await,
            taken,
            "ResourceQuota on {server}"
        );
        assert_eq!(
            metadata_after_status_put(&pdbs, pdb.clone(), pdb_status.clone()).await,
            taken,
            "PodDisruptionBudget on {server}"
        );
        assert_eq!(
            metadata_after_status_put(&claims, claim.clone(), json!({})).await,
            kept,
            "ResourceClaim on {server}"
        );
    }
}
