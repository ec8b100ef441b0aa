//! Response compression, measured: the CPU time kcm's client spends listing 10 000 pods with
//! and without gzip, against kube-testserver answering gzip above 128 KiB as the real API
//! server does. The server runs on its own thread and runtime; the client on the main thread
//! alone (a current-thread runtime), so the thread's CPU time is exactly the client's work:
//! request, transfer, decompression and decoding. Prints numbers; asserts nothing.
//! Run with `cargo bench --bench gzip --features gzip`.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kcm::runtime::connection::client::{Clients, load_config};
use kcm::runtime::metrics::Metrics;
use kube::api::{Api, ListParams};
use kube_testserver::TestServer;
use serde_json::json;

const PODS: usize = 10_000;
const ROUNDS: usize = 5;

/// CPU time of the calling thread (Linux), from `/proc/thread-self/schedstat`.
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = stat
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

/// A pod as a kubelet reports it: containers with env, mounts and probes, a full status. No
/// owner references: kube-testserver's garbage collector deletes pods whose owner is missing.
fn pod(n: usize) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("web-{n:05}"), "namespace": format!("ns-{:03}", n % 100),
            "labels": { "app": "web", "pod-template-hash": "5d8f7c9b6d", "tier": "frontend" },
            "annotations": { "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z" },
        },
        "spec": {
            "nodeName": format!("node-{:04}", n % 2000),
            "containers": [{
                "name": "web", "image": "registry.example.com/team/web:1.2.3",
                "ports": [{ "containerPort": 8080, "protocol": "TCP" }],
                "env": [{ "name": "MODE", "value": "production" }, { "name": "LOG_LEVEL", "value": "info" }],
                "resources": { "requests": { "cpu": "100m", "memory": "128Mi" }, "limits": { "memory": "256Mi" } },
                "volumeMounts": [{ "name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true }],
                "readinessProbe": { "httpGet": { "path": "/healthz", "port": 8080 }, "periodSeconds": 10 },
            }],
            "volumes": [{ "name": "kube-api-access", "projected": { "sources": [
                { "serviceAccountToken": { "path": "token", "expirationSeconds": 3607 } },
                { "configMap": { "name": "kube-root-ca.crt", "items": [{ "key": "ca.crt", "path": "ca.crt" }] } },
            ] } }],
        },
        "status": {
            "phase": "Running", "podIP": "10.244.1.17", "hostIP": "172.18.0.3", "qosClass": "Burstable",
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": [
                { "type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z" },
                { "type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z" },
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z" },
            ],
            "containerStatuses": [{ "name": "web", "ready": true, "restartCount": 0, "started": true,
                "image": "registry.example.com/team/web:1.2.3",
                "imageID": "registry.example.com/team/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "containerID": "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "state": { "running": { "startedAt": "2026-01-01T00:00:03Z" } } }],
        },
    })
}

fn main() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("server runtime");
        runtime.block_on(async {
            let server = TestServer::start().await;
            for ns in 0..100 {
                server
                    .seed(json!({ "apiVersion": "v1", "kind": "Namespace",
                        "metadata": { "name": format!("ns-{ns:03}") } }))
                    .unwrap_or_else(|e| panic!("seed: {}", e.message));
            }
            for n in 0..PODS {
                server
                    .seed(pod(n))
                    .unwrap_or_else(|e| panic!("seed: {}", e.message));
            }
            tx.send(server.kubeconfig_path().to_path_buf())
                .expect("main thread waits");
            std::future::pending::<()>().await;
        });
    });
    let kubeconfig = rx.recv().expect("server started");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    runtime.block_on(async {
        let metrics = Metrics::new().expect("metrics");
        // (label, gzip, page size): one full list, and the informers' 500-item pages.
        let cases = [
            ("full list, identity", false, None),
            ("full list, gzip", true, None),
            ("pages of 500, identity", false, Some(500)),
            ("pages of 500, gzip", true, Some(500)),
        ];
        println!("{PODS} pods, {ROUNDS} rounds each, client thread CPU and wall time per list:");
        for (label, gzip, page) in cases {
            let mut config = load_config(Some(&kubeconfig)).await.expect("kubeconfig");
            config.disable_compression = !gzip;
            let client = Clients::new(config, 1e6, 1_000_000, "bench", metrics.rest_client.clone())
                .client("bench")
                .expect("client");
            let api: Api<Pod> = Api::all(client);
            let mut cpu = Duration::ZERO;
            let mut wall = Duration::ZERO;
            for round in 0..=ROUNDS {
                let (cpu0, wall0) = (thread_cpu(), Instant::now());
                let mut listed = 0;
                let mut params = ListParams::default();
                if let Some(limit) = page {
                    params = params.limit(limit);
                }
                loop {
                    let list = api.list(&params).await.expect("list");
                    listed += list.items.len();
                    match list.metadata.continue_.filter(|c| !c.is_empty()) {
                        Some(token) => params = params.continue_token(&token),
                        None => break,
                    }
                }
                assert_eq!(listed, PODS);
                // Round 0 warms the connection and allocator up.
                if round > 0 {
                    cpu += thread_cpu() - cpu0;
                    wall += wall0.elapsed();
                }
            }
            let rounds = u32::try_from(ROUNDS).unwrap_or(1);
            println!(
                "  {label:24} cpu {:>7.1} ms   wall {:>7.1} ms",
                (cpu / rounds).as_secs_f64() * 1e3,
                (wall / rounds).as_secs_f64() * 1e3
            );
        }
    });
}
