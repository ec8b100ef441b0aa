//! The world the scale and failover benchmarks seed into kube-testserver: N namespaces each
//! with one ResourceQuota, one PodDisruptionBudget and its pods, plus the nodes; the expected
//! status of every quota, PDB and node computed here from the seeded objects (not by kcm's
//! code), and a checker that reads them straight from the server's store.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_testserver::{Options, ResourceType, TestServer};
use serde_json::{Value, json};

pub const TTL_ANNOTATION: &str = "node.alpha.kubernetes.io/ttl";

#[derive(Clone, Copy)]
pub struct Size {
    pub name: &'static str,
    pub pods: usize,
    pub namespaces: usize,
    pub nodes: usize,
}

pub const SIZES: [Size; 5] = [
    Size {
        name: "a",
        pods: 10_000,
        namespaces: 1_000,
        nodes: 2_000,
    },
    Size {
        name: "b",
        pods: 150_000,
        namespaces: 10_000,
        nodes: 5_000,
    },
    // SIG Scalability's limits (150 000 pods, 5 000 nodes), 50 pods a namespace.
    Size {
        name: "c",
        pods: 150_000,
        namespaces: 3_000,
        nodes: 5_000,
    },
    // A tenth of (a), for the real control plane on a shared machine.
    Size {
        name: "s",
        pods: 1_000,
        namespaces: 100,
        nodes: 200,
    },
    Size {
        name: "tiny",
        pods: 300,
        namespaces: 30,
        nodes: 120,
    },
];

/// One pod as the bench models it: what the expected statuses are computed from.
#[derive(Clone)]
pub struct PodModel {
    pub name: String,
    pub cpu_milli: u64,
    pub memory_mi: u64,
    pub ready: bool,
}

pub fn ns_name(n: usize) -> String {
    format!("ns-{n:05}")
}

/// The index of namespace `ns-<n>` (`ns_name`'s inverse).
pub fn ns_index(ns: &str) -> Option<usize> {
    ns.strip_prefix("ns-")?.parse().ok()
}

pub fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

/// A pod about the size of a real Deployment's (just under 2 KB of JSON): the fields kcm does
/// not read are there too, since storing them is part of what is measured.
pub fn pod_json(ns: &str, pod: &PodModel, node: &str) -> Value {
    let ready = if pod.ready { "True" } else { "False" };
    json!({ "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": pod.name, "namespace": ns,
            "labels": { "app": "web", "pod-template-hash": "5d9c7b8f6d", "tier": "frontend" },
            "annotations": { "kubectl.kubernetes.io/restartedAt": "2026-11-01T10:00:00Z" } },
        "spec": {
            "nodeName": node, "serviceAccountName": "default", "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30, "priority": 0, "enableServiceLinks": true,
            "securityContext": { "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } },
            "containers": [{
                "name": "web", "image": "registry.example.com/team/web:1.27.3",
                "imagePullPolicy": "IfNotPresent",
                "ports": [{ "name": "http", "containerPort": 8080, "protocol": "TCP" }],
                "env": [{ "name": "LOG_LEVEL", "value": "info" }, { "name": "PORT", "value": "8080" }],
                "resources": { "requests": { "cpu": format!("{}m", pod.cpu_milli), "memory": format!("{}Mi", pod.memory_mi) },
                               "limits": { "memory": format!("{}Mi", pod.memory_mi * 2) } },
                "readinessProbe": { "httpGet": { "path": "/healthz", "port": 8080, "scheme": "HTTP" }, "periodSeconds": 10 },
                "volumeMounts": [{ "name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true }],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
            }],
            "volumes": [{ "name": "kube-api-access", "projected": { "defaultMode": 420, "sources": [
                { "serviceAccountToken": { "expirationSeconds": 3607, "path": "token" } },
                { "configMap": { "name": "kube-root-ca.crt", "items": [{ "key": "ca.crt", "path": "ca.crt" }] } }
            ] } }],
            "tolerations": [
                { "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 },
                { "key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 }
            ]
        },
        "status": {
            "phase": "Running", "qosClass": "Burstable", "hostIP": "10.0.0.1", "podIP": "10.244.1.2",
            "startTime": "2026-11-01T10:00:00Z",
            "conditions": [
                { "type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-01T10:00:00Z" },
                { "type": "Ready", "status": ready, "lastTransitionTime": "2026-11-01T10:00:05Z" },
                { "type": "ContainersReady", "status": ready, "lastTransitionTime": "2026-11-01T10:00:05Z" },
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-01T10:00:00Z" }
            ],
            "containerStatuses": [{ "name": "web", "ready": pod.ready, "restartCount": 0, "started": true,
                "image": "registry.example.com/team/web:1.27.3", "imageID": "registry.example.com/team/web@sha256:0123456789abcdef",
                "containerID": "containerd://0123456789abcdef", "state": { "running": { "startedAt": "2026-11-01T10:00:02Z" } } }]
        } })
}

pub fn node_json(name: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": "zone-a", "node.kubernetes.io/instance-type": "m5.xlarge" } },
        "spec": { "podCIDR": "10.244.1.0/24", "providerID": format!("aws:///zone-a/{name}") },
        "status": {
            "capacity": { "cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi" },
            "allocatable": { "cpu": "3800m", "memory": "15Gi", "pods": "110", "ephemeral-storage": "90Gi" },
            "conditions": [
                { "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                  "lastHeartbeatTime": "2026-11-01T10:00:00Z", "lastTransitionTime": "2026-11-01T09:00:00Z" },
                { "type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                  "lastHeartbeatTime": "2026-11-01T10:00:00Z", "lastTransitionTime": "2026-11-01T09:00:00Z" }
            ],
            "addresses": [{ "type": "InternalIP", "address": "10.0.0.1" }, { "type": "Hostname", "address": name }],
            "nodeInfo": { "kubeletVersion": "v1.36.2", "containerRuntimeVersion": "containerd://2.1.0", "osImage": "Ubuntu 24.04",
                "kernelVersion": "6.8.0", "operatingSystem": "linux", "architecture": "amd64",
                "machineID": "m", "systemUUID": "s", "bootID": "b", "kubeProxyVersion": "" }
        } })
}

pub const QUOTA_HARD: [(&str, &str); 3] = [
    ("pods", "100"),
    ("requests.cpu", "20"),
    ("requests.memory", "64Gi"),
];

pub fn quota_json(ns: &str) -> Value {
    let hard: serde_json::Map<String, Value> = QUOTA_HARD
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({ "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": { "name": "compute", "namespace": ns }, "spec": { "hard": hard } })
}

pub fn pdb_json(ns: &str, min_available: usize) -> Value {
    json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": { "name": "web", "namespace": ns },
        "spec": { "minAvailable": min_available, "selector": { "matchLabels": { "app": "web" } } } })
}

/// apimachinery's canonical string of `milli` thousandths of a core (pods here never sum to 1k).
pub fn cpu_string(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// apimachinery's canonical string of a binary-SI amount given in Mi.
pub fn memory_string(mi: u64) -> String {
    if mi == 0 {
        return "0".into();
    }
    let (mut value, mut unit) = (mi, 0);
    let units = ["Mi", "Gi", "Ti", "Pi"];
    while value.is_multiple_of(1024) && unit + 1 < units.len() {
        value /= 1024;
        unit += 1;
    }
    format!("{value}{}", units[unit])
}

/// The TTL upstream's table and hysteresis give after `nodes` node additions from zero
/// (pkg/controller/ttl/ttl_controller.go, `addNode`: one step up when the count passes the
/// step's `sizeMax`).
pub fn expected_ttl(nodes: usize) -> &'static str {
    const STEPS: [(usize, &str); 5] = [
        (100, "0"),
        (500, "15"),
        (1000, "30"),
        (2000, "60"),
        (usize::MAX, "300"),
    ];
    let mut step = 0;
    for count in 1..=nodes {
        if count > STEPS[step].0 {
            step += 1;
        }
    }
    STEPS[step].1
}

/// The seeded world, from which every expected status is computed.
pub struct Model {
    pub size: Size,
    pub min_available: usize,
    pub namespaces: Vec<Vec<PodModel>>,
}

impl Model {
    pub fn new(size: Size) -> Self {
        let per_ns = size.pods / size.namespaces;
        let namespaces = (0..size.namespaces)
            .map(|_| {
                (0..per_ns)
                    .map(|j| PodModel {
                        name: format!("p-{j}"),
                        cpu_milli: 100 + 50 * (j as u64 % 3),
                        memory_mi: 64 * (1 + j as u64 % 2),
                        ready: j % 5 != 4,
                    })
                    .collect()
            })
            .collect();
        Self {
            size,
            min_available: per_ns / 2,
            namespaces,
        }
    }

    pub fn expected_used(&self, n: usize) -> Value {
        let pods = &self.namespaces[n];
        json!({
            "pods": pods.len().to_string(),
            "requests.cpu": cpu_string(pods.iter().map(|p| p.cpu_milli).sum()),
            "requests.memory": memory_string(pods.iter().map(|p| p.memory_mi).sum()),
        })
    }

    pub fn quota_right(&self, n: usize, quota: &Value) -> bool {
        let hard: serde_json::Map<String, Value> = QUOTA_HARD
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        quota["status"]["hard"] == Value::Object(hard)
            && quota["status"]["used"] == self.expected_used(n)
    }

    pub fn pdb_right(&self, n: usize, pdb: &Value) -> bool {
        let pods = &self.namespaces[n];
        let healthy = pods.iter().filter(|p| p.ready).count();
        let desired = self.min_available;
        let allowed = healthy.saturating_sub(desired);
        let status = &pdb["status"];
        let (cond_status, reason) = if allowed > 0 {
            ("True", "SufficientPods")
        } else {
            ("False", "InsufficientPods")
        };
        let condition_right = status["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "DisruptionAllowed"
                    && c["status"] == cond_status
                    && c["reason"] == reason
            })
        });
        status["observedGeneration"] == pdb["metadata"]["generation"]
            && status["expectedPods"] == json!(pods.len())
            && status["desiredHealthy"] == json!(desired)
            && status["currentHealthy"] == json!(healthy)
            && status["disruptionsAllowed"] == json!(allowed)
            && status["disruptedPods"]
                .as_object()
                .is_none_or(|m| m.is_empty())
            && condition_right
    }

    pub fn node_of(&self, n: usize, j: usize) -> String {
        node_name((n * 31 + j) % self.size.nodes)
    }
}

/// Objects of one type found right, checked straight in the server's store (no HTTP, no
/// deep copies: the bench shares the machine with kcm).
pub struct Checker {
    pub server: Arc<TestServer>,
    pub quotas: ResourceType,
    pub pdbs: ResourceType,
    pub nodes: ResourceType,
}

impl Checker {
    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.server.store().get(rt, ns, name).ok()
    }

    pub fn quotas_right(&self, model: &Model) -> usize {
        (0..model.size.namespaces)
            .filter(|&n| {
                self.get(&self.quotas, &ns_name(n), "compute")
                    .is_some_and(|q| model.quota_right(n, &q))
            })
            .count()
    }

    pub fn pdbs_right(&self, model: &Model) -> usize {
        (0..model.size.namespaces)
            .filter(|&n| {
                self.get(&self.pdbs, &ns_name(n), "web")
                    .is_some_and(|p| model.pdb_right(n, &p))
            })
            .count()
    }

    pub fn nodes_right(&self, model: &Model) -> usize {
        let want = expected_ttl(model.size.nodes);
        (0..model.size.nodes)
            .filter(|&i| {
                self.get(&self.nodes, "", &node_name(i))
                    .is_some_and(|node| node["metadata"]["annotations"][TTL_ANNOTATION] == want)
            })
            .count()
    }
}

pub fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// Polls until quotas, PDBs and nodes are all right or `timeout` passes; returns the time
/// each kind became (and stayed for the check) all right, measured from `start`.
pub async fn converge(
    checker: &Checker,
    model: &Model,
    start: Instant,
    timeout: Duration,
    poll: Duration,
) -> [Option<Duration>; 3] {
    let mut done: [Option<Duration>; 3] = [None; 3];
    let totals = [
        model.size.namespaces,
        model.size.namespaces,
        model.size.nodes,
    ];
    let names = ["quota", "PDB", "node TTL"];
    let mut last_print = Instant::now();
    loop {
        let counts = [
            done[0].map_or_else(|| checker.quotas_right(model), |_| totals[0]),
            done[1].map_or_else(|| checker.pdbs_right(model), |_| totals[1]),
            done[2].map_or_else(|| checker.nodes_right(model), |_| totals[2]),
        ];
        for k in 0..3 {
            if done[k].is_none() && counts[k] == totals[k] {
                let at = start.elapsed();
                println!("  every {} right after {}", names[k], secs(at));
                done[k] = Some(at);
            }
        }
        if done.iter().all(Option::is_some) || start.elapsed() > timeout {
            return done;
        }
        if last_print.elapsed() > Duration::from_secs(30) {
            last_print = Instant::now();
            println!(
                "  … {:.0} s: quotas {}/{}, PDBs {}/{}, node TTLs {}/{}",
                start.elapsed().as_secs_f64(),
                counts[0],
                totals[0],
                counts[1],
                totals[1],
                counts[2],
                totals[2]
            );
        }
        tokio::time::sleep(poll).await;
    }
}

/// Seeds straight into the store, without field ownership: tracking every field path of
/// 150 000 pods would cost the bench process gigabytes and minutes.
pub fn seed(server: &TestServer, rt: &ResourceType, obj: Value) {
    if let Err(e) = server.store().seed_untracked(rt, obj) {
        panic!("seed: {}", e.message);
    }
}

impl Model {
    /// Every tenth pod deleted and replaced by another one in its namespace with other
    /// requests and readiness, so every quota and PDB has to change (each time it is
    /// called); returns how many.
    pub fn churn(&mut self, server: &TestServer, pods: &ResourceType) -> usize {
        let mut churned = 0;
        let per_ns = self.size.pods / self.size.namespaces;
        for (n, ns_pods) in self.namespaces.iter_mut().enumerate() {
            let ns = ns_name(n);
            for (j, pod) in ns_pods.iter_mut().enumerate() {
                if !(n * per_ns + j).is_multiple_of(10) {
                    continue;
                }
                if let Err(e) = server
                    .store()
                    .delete(pods, &ns, &pod.name, &Default::default())
                {
                    panic!("delete: {}", e.message);
                }
                // 250m the first time (the scale bench's churn), 50m more each later one.
                *pod = PodModel {
                    name: format!("c-{j}"),
                    cpu_milli: pod.cpu_milli.max(200) + 50,
                    memory_mi: 96,
                    ready: !pod.ready,
                };
                churned += 1;
            }
        }
        for (n, ns_pods) in self.namespaces.iter().enumerate() {
            let ns = ns_name(n);
            for (j, pod) in ns_pods.iter().enumerate() {
                if pod.name.starts_with("c-") {
                    seed(server, pods, pod_json(&ns, pod, &self.node_of(n, j)));
                }
            }
        }
        churned
    }
}

/// The resource type `group`/`plural` of `server`.
pub fn resource_type(server: &TestServer, group: &str, plural: &str) -> ResourceType {
    server
        .store()
        .resource_type(group, plural)
        .unwrap_or_else(|| panic!("{plural} not served"))
}

/// Seeds `model`'s world into `server`: returns the checker of its statuses and the pods'
/// resource type (for the churn).
pub fn seed_world(server: &Arc<TestServer>, model: &Model) -> (Checker, ResourceType) {
    let rt = |group, plural| resource_type(server, group, plural);
    let (pods_rt, nodes_rt, ns_rt) = (rt("", "pods"), rt("", "nodes"), rt("", "namespaces"));
    let (quotas_rt, pdbs_rt) = (
        rt("", "resourcequotas"),
        rt("policy", "poddisruptionbudgets"),
    );
    for i in 0..model.size.nodes {
        seed(server, &nodes_rt, node_json(&node_name(i)));
    }
    for (n, pods) in model.namespaces.iter().enumerate() {
        let ns = ns_name(n);
        seed(
            server,
            &ns_rt,
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } }),
        );
        for (j, pod) in pods.iter().enumerate() {
            seed(server, &pods_rt, pod_json(&ns, pod, &model.node_of(n, j)));
        }
        seed(server, &quotas_rt, quota_json(&ns));
        seed(server, &pdbs_rt, pdb_json(&ns, model.min_available));
    }
    let checker = Checker {
        server: server.clone(),
        quotas: quotas_rt,
        pdbs: pdbs_rt,
        nodes: nodes_rt,
    };
    (checker, pods_rt)
}

/// The size named by the environment variable `var` or the first argument (default `a`).
pub fn chosen_size(var: &str) -> Size {
    let wanted = std::env::var(var)
        .ok()
        .or_else(|| std::env::args().skip(1).find(|a| !a.starts_with('-')));
    let wanted = wanted.as_deref().unwrap_or("a");
    SIZES
        .iter()
        .copied()
        .find(|s| s.name == wanted)
        .unwrap_or_else(|| panic!("unknown size {wanted:?}: a, b, c, s or tiny"))
}

/// A kube-testserver holding `size`'s world, served over HTTPS when `tls`, with the model
/// of it, the checker of its statuses and the pods' resource type (for the churn).
pub async fn seeded_server(
    size: Size,
    tls: bool,
) -> (Arc<TestServer>, Model, Checker, ResourceType) {
    // Enough events kept for watches to resume across the churn (three per replaced pod)
    // without a relist, as against a real API server.
    let server = TestServer::start_with(Options {
        event_window: (size.pods / 2).max(10_000),
        tls,
        ..Options::default()
    })
    .await
    .unwrap_or_else(|e| panic!("kube-testserver: {e}"));
    let server = Arc::new(server);
    let model = Model::new(size);
    let seeding = Instant::now();
    let (checker, pods) = seed_world(&server, &model);
    println!("seeded in {}", secs(seeding.elapsed()));
    (server, model, checker, pods)
}
