//! disruption-controller with 1 000 PDBs over 10 000 pods (100 namespaces × 10 PDBs × 10 pods,
//! half of the PDBs on Deployments' scale), the kcm binary as a subprocess: time until every
//! PDB has its status, then the latency from a pod's readiness flip to its PDB's status, and
//! kcm's CPU time and peak memory. Prints numbers; asserts no timing.
//! Run with `cargo bench --bench disruption`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube_testserver::TestServer;
use serde_json::json;

mod common;
use common::{latency_summary, spawn_kcm};
use kcm_testsupport::proc::usage;

const NAMESPACES: usize = 100;
const PDBS_PER_NS: usize = 10;
const PODS_PER_PDB: usize = 10;
const FLIPS: usize = 200;

fn seed(server: &TestServer, obj: serde_json::Value) -> String {
    let created = server
        .seed(obj)
        .unwrap_or_else(|e| panic!("seed: {}", e.message));
    created["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// PDBs whose status has been computed for their current generation.
async fn synced(api: &Api<PodDisruptionBudget>) -> usize {
    let list = api
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list: {e}"));
    list.items
        .iter()
        .filter(|p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.observed_generation == p.metadata.generation)
        })
        .count()
}

#[tokio::main]
async fn main() {
    let server = TestServer::start().await;
    for n in 0..NAMESPACES {
        let ns = format!("ns-{n:03}");
        seed(
            &server,
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }),
        );
        for p in 0..PDBS_PER_NS {
            let app = format!("app-{p}");
            // Even PDBs: pods of a Deployment, maxUnavailable 20%; odd: bare pods, minAvailable 8.
            let owner = if p % 2 == 0 {
                let deploy = seed(
                    &server,
                    json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": app, "namespace": ns },
                    "spec": { "replicas": PODS_PER_PDB, "selector": { "matchLabels": { "app": app } }, "template": {} } }),
                );
                let rs = seed(
                    &server,
                    json!({ "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": { "name": format!("{app}-rs"), "namespace": ns,
                    "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "Deployment", "name": app, "uid": deploy, "controller": true }] },
                    "spec": { "replicas": PODS_PER_PDB, "selector": { "matchLabels": { "app": app } } } }),
                );
                Some(rs)
            } else {
                None
            };
            for i in 0..PODS_PER_PDB {
                let mut pod = json!({ "apiVersion": "v1", "kind": "Pod",
                    "metadata": { "name": format!("{app}-{i}"), "namespace": ns, "labels": { "app": app } },
                    "spec": { "nodeName": "n1", "containers": [{ "name": "c", "image": "i" }] },
                    "status": { "phase": "Running", "conditions": [{ "type": "Ready", "status": "True" }] } });
                if let Some(rs) = &owner {
                    pod["metadata"]["ownerReferences"] = json!([{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-rs"), "uid": rs, "controller": true }]);
                }
                seed(&server, pod);
            }
            let budget = if p % 2 == 0 {
                json!({ "maxUnavailable": "20%" })
            } else {
                json!({ "minAvailable": 8 })
            };
            let mut spec = json!({ "selector": { "matchLabels": { "app": app } } });
            if let (Some(spec), Some(budget)) = (spec.as_object_mut(), budget.as_object()) {
                spec.extend(budget.clone());
            }
            seed(
                &server,
                json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": { "name": app, "namespace": ns }, "spec": spec }),
            );
        }
    }
    let total = NAMESPACES * PDBS_PER_NS;
    let pdbs: Api<PodDisruptionBudget> = Api::all(server.client());

    let started = Instant::now();
    let mut kcm = spawn_kcm(server.kubeconfig_path(), "disruption", 1000);
    while synced(&pdbs).await < total {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "no convergence in 10 min"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cold = started.elapsed();
    let (cpu_cold, _) = usage(kcm.id());
    println!(
        "cold start: {total} PDB statuses over {} pods in {cold:.2?}; kcm CPU {cpu_cold:.2}s",
        total * PODS_PER_PDB
    );

    // Flip one pod unready at a time and time until its PDB shows one healthy pod less.
    let mut latencies = Vec::with_capacity(FLIPS);
    for f in 0..FLIPS {
        let ns = format!("ns-{:03}", f % NAMESPACES);
        let app = format!("app-{}", (f / NAMESPACES) % PDBS_PER_NS);
        let pods: Api<Pod> = Api::namespaced(server.client(), &ns);
        let pdb_api: Api<PodDisruptionBudget> = Api::namespaced(server.client(), &ns);
        let before = pdb_api
            .get(&app)
            .await
            .ok()
            .and_then(|p| p.status)
            .and_then(|s| s.current_healthy)
            .unwrap_or(0);
        let flip = Instant::now();
        let status =
            json!({ "status": { "conditions": [{ "type": "Ready", "status": "False" }] } });
        pods.patch_status(
            &format!("{app}-0"),
            &PatchParams::default(),
            &Patch::Strategic(status),
        )
        .await
        .unwrap_or_else(|e| panic!("flip: {e}"));
        loop {
            let now = pdb_api
                .get(&app)
                .await
                .ok()
                .and_then(|p| p.status)
                .and_then(|s| s.current_healthy)
                .unwrap_or(0);
            if now == before - 1 {
                break;
            }
            assert!(
                flip.elapsed() < Duration::from_secs(60),
                "no status change in 60 s"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        latencies.push(flip.elapsed());
    }
    let summary = latency_summary(&mut latencies);
    let (cpu, peak) = usage(kcm.id());
    println!(
        "pod readiness flip → PDB status: {FLIPS} flips, {summary}; kcm CPU for the flips {:.2}s, peak RSS {peak:.1} MiB",
        cpu - cpu_cold
    );
    let writes = server.count(|r| {
        r.user_agent.contains("kcm/") && r.is("update", "poddisruptionbudgets", "status")
    });
    println!(
        "PDB status writes: {writes} ({total} initial + one per flip expected: {})",
        total + FLIPS
    );
    let _ = kcm.kill();
    let _ = kcm.wait();
}
