//! resourceclaim-controller under a burst: 5 000 pods, each with a claim from a
//! ResourceClaimTemplate, created at once against kube-testserver with the kcm binary as a
//! subprocess. Measures the time until every claim exists and every pod status records it,
//! kcm's API requests per pod (upstream spends one create and one apply per claim), and kcm's
//! CPU time and peak memory. Prints numbers; asserts no timing.
//! Run with `cargo bench --bench resourceclaim`.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::api::{Api, ListParams, PostParams};
use kube_testserver::TestServer;
use serde_json::json;

mod common;
use common::spawn_kcm;
use kcm_testsupport::proc::usage;

const PODS: usize = 5_000;
const QPS: u32 = 500;
const NS: &str = "default";

fn parse<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap_or_else(|e| unreachable!("static JSON: {e}"))
}

/// Pods whose status records their claim.
async fn recorded(pods: &Api<Pod>) -> usize {
    let list = pods
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list pods: {e}"));
    list.items
        .iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.resource_claim_statuses.as_ref())
                .is_some_and(|s| s.iter().any(|e| e.resource_claim_name.is_some()))
        })
        .count()
}

#[tokio::main]
async fn main() {
    let server = TestServer::start().await;
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(server.client(), NS);
    let template = parse(json!({
        "metadata": { "name": "gpu" },
        "spec": { "spec": { "devices": { "requests": [{ "name": "gpu", "exactly": { "deviceClassName": "gpu.example.com" } }] } } }
    }));
    templates
        .create(&PostParams::default(), &template)
        .await
        .unwrap_or_else(|e| panic!("template: {e}"));

    let mut kcm = spawn_kcm(server.kubeconfig_path(), "resourceclaim-controller", QPS);
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    let start = Instant::now();
    stream::iter(0..PODS)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = parse(json!({
                    "metadata": { "name": format!("worker-{i:05}") },
                    "spec": { "containers": [{ "name": "c", "image": "i" }],
                              "resourceClaims": [{ "name": "gpu", "resourceClaimTemplateName": "gpu" }] }
                }));
                pods.create(&PostParams::default(), &pod).await
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await
        .unwrap_or_else(|e| panic!("create pods: {e}"));
    let burst = start.elapsed();

    while recorded(&pods).await < PODS {
        assert!(
            start.elapsed() < Duration::from_secs(900),
            "claims not recorded within 15 min"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let converged = start.elapsed();
    let claim_count = claims
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list claims: {e}"))
        .items
        .len();
    // Let any straggling work finish before counting requests.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kcm_requests = |f: &dyn Fn(&kube_testserver::RequestRecord) -> bool| {
        server.count(|r| r.user_agent.contains("kcm/") && f(r))
    };
    let creates = kcm_requests(&|r| r.is("create", "resourceclaims", ""));
    let applies = kcm_requests(&|r| r.is("patch", "pods", "status"));
    let writes = kcm_requests(&|r| r.is_write());
    let all = kcm_requests(&|_| true);
    let (cpu, peak_mib) = usage(kcm.id());
    println!(
        "{PODS} pods created in {burst:.2?}; all {claim_count} claims exist and every pod status records its claim {converged:.2?} after the burst began"
    );
    println!(
        "kcm requests: {creates} claim creates + {applies} status applies = {:.2} writes per pod ({writes} writes in all, {all} requests incl. list/watch); upstream: 2 per pod",
        writes as f64 / PODS as f64
    );
    println!(
        "kcm CPU {cpu:.2}s, peak RSS {peak_mib:.1} MiB (client rate limit {QPS} qps; at the default 20 qps the {} writes take about {:.0} s)",
        creates + applies,
        (creates + applies) as f64 / 20.0
    );
    let _ = kcm.kill();
    let _ = kcm.wait();
}
