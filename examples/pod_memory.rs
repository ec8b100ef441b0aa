//! Bytes of RSS per stored pod: a realistic pod (about 2.5 KB of JSON, with managedFields,
//! env, volumes, probes and the usual status) deserialized N times, kept as the stores keep
//! it, measured as the growth of this process's RSS. Compares the full k8s-openapi object
//! (trimmed of managedFields and last-applied, as kcm stored pods before the views) with the
//! compact view kcm stores now. Run with `cargo run --release --example pod_memory`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kcm::k8s::view;
use kcm::runtime::watching::stored::trim_metadata;
use serde_json::{Value, json};

const PODS: usize = 50_000;

fn pod_json(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("web-7d4b9c8f6d-{i:05}"), "namespace": format!("team-{}", i % 1000),
            "uid": format!("3f9c2a71-5b1e-4c8d-9a2f-{i:012}"), "resourceVersion": format!("{}", 100_000 + i),
            "generateName": "web-7d4b9c8f6d-", "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": { "app": "web", "pod-template-hash": "7d4b9c8f6d", "tier": "frontend" },
            "annotations": { "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z" },
            "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c8f6d",
                "uid": "a1b2c3d4-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true }],
            "managedFields": [
                { "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
                  "fieldsType": "FieldsV1", "fieldsV1": { "f:metadata": { "f:generateName": {}, "f:labels": { ".": {}, "f:app": {} } },
                  "f:spec": { "f:containers": { "k:{\"name\":\"web\"}": { ".": {}, "f:image": {}, "f:name": {} } } } } },
                { "manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:10Z",
                  "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": { "f:status": { "f:conditions": {}, "f:podIP": {} } } }
            ]
        },
        "spec": {
            "nodeName": format!("node-{}", i % 2000), "serviceAccountName": "default", "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30,
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
            "securityContext": {},
            "containers": [{
                "name": "web", "image": "registry.example.com/web:1.2.3", "imagePullPolicy": "IfNotPresent",
                "ports": [{ "containerPort": 8080, "protocol": "TCP" }],
                "env": [{ "name": "MODE", "value": "production" }, { "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } }],
                "resources": { "requests": { "cpu": "100m", "memory": "128Mi" }, "limits": { "memory": "256Mi" } },
                "readinessProbe": { "httpGet": { "path": "/healthz", "port": 8080, "scheme": "HTTP" }, "periodSeconds": 10 },
                "volumeMounts": [{ "name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true }],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
            }],
            "tolerations": [
                { "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 },
                { "key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 }
            ],
            "volumes": [{ "name": "kube-api-access", "projected": { "defaultMode": 420, "sources": [
                { "serviceAccountToken": { "expirationSeconds": 3607, "path": "token" } },
                { "configMap": { "name": "kube-root-ca.crt", "items": [{ "key": "ca.crt", "path": "ca.crt" }] } }
            ] } }]
        },
        "status": {
            "phase": "Running", "qosClass": "Burstable", "hostIP": "10.0.0.1", "podIP": "10.244.1.7",
            "podIPs": [{ "ip": "10.244.1.7" }], "startTime": "2026-01-01T00:00:00Z",
            "conditions": [
                { "type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": "2026-01-01T00:00:02Z" },
                { "type": "Initialized", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z" },
                { "type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z" },
                { "type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z" },
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z" }
            ],
            "containerStatuses": [{
                "name": "web", "image": "registry.example.com/web:1.2.3", "imageID": "registry.example.com/web@sha256:0123456789abcdef",
                "containerID": "containerd://0123456789abcdef", "ready": true, "started": true, "restartCount": 0,
                "state": { "running": { "startedAt": "2026-01-01T00:00:03Z" } },
                "allocatedResources": { "cpu": "100m", "memory": "128Mi" },
                "resources": { "requests": { "cpu": "100m", "memory": "128Mi" }, "limits": { "memory": "256Mi" } }
            }]
        }
    })
}

/// Resident set size of this process, from /proc (Linux).
fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// RSS growth per object while `PODS` objects built by `make` are held.
fn per_pod<T>(make: impl Fn(&str) -> T) -> (usize, Vec<T>) {
    let texts: Vec<String> = (0..PODS).map(|i| pod_json(i).to_string()).collect();
    let before = rss_bytes();
    let held: Vec<T> = texts.iter().map(|t| make(t)).collect();
    let after = rss_bytes();
    (after.saturating_sub(before) / PODS, held)
}

/// Each shape is measured in a process of its own, so neither reuses memory the other freed.
fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("view") => {
            let (bytes, _views) =
                per_pod(|t| Arc::new(serde_json::from_str::<view::Pod>(t).expect("view")));
            println!("kcm view::Pod: {bytes} bytes RSS per pod");
        }
        Some("full") => {
            let (bytes, _full) = per_pod(|t| {
                let mut pod: Pod = serde_json::from_str(t).expect("pod");
                trim_metadata(&mut pod);
                Arc::new(pod)
            });
            println!(
                "full k8s-openapi Pod, managedFields and last-applied trimmed: {bytes} bytes RSS per pod"
            );
        }
        _ => {
            let json_len = pod_json(0).to_string().len();
            println!("pod JSON: {json_len} bytes; {PODS} pods held");
            let me = std::env::current_exe().expect("own path");
            for shape in ["full", "view"] {
                let status = std::process::Command::new(&me).arg(shape).status();
                if !status.is_ok_and(|s| s.success()) {
                    eprintln!("measuring {shape} failed");
                }
            }
        }
    }
}
