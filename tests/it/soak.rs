//! Soak: all five controllers (the kcm binary) against kube-testserver under a seeded random
//! workload while the server injects faults into kcm's requests — 500s, 429s with
//! Retry-After, 409s, 2 s latency spikes, dropped watches and forced compactions (410
//! relists). Then the faults stop and every controller must converge to what a fresh
//! computation from the final objects gives (the same pure functions, and a few literal
//! cases), still alive and reconciling, with bounded watches; no PDB status kcm wrote may
//! ever have allowed more disruptions than the pods then healthy allowed.
//!
//! `soak_ci` runs in CI (about 45 s); `soak_long` is `#[ignore]`d: run it with
//! `KCM_SOAK_SECS=1800 cargo test --release --test it -- --ignored --nocapture soak::soak_long`.
//! `KCM_SOAK_SEED` picks the workload seed (default: fixed).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kcm::controllers::disruption::plan::budget::{
    count_healthy, disrupted_pods, expected_and_desired, new_status,
};
use kcm::controllers::resourcequota::evaluator::QuotaGates;
use kcm::controllers::resourcequota::evaluator::pods::{pod_matching, pod_usage};
use kcm::controllers::resourcequota::plan::status::next_status;
use kcm::controllers::resourcequota::usage::{mask_list, sum_usage};
use kcm::controllers::storageversiongc::plan::{self as gc, Outcome};
use kcm::controllers::ttl::plan::{BOUNDARIES, TTL_ANNOTATION};
use kcm::k8s::view::{Pod as PodView, WatchedPod};
use kcm_testsupport::Kcm;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kube_testserver::{Fault, TestServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const NAMESPACES: [&str; 3] = ["soak-0", "soak-1", "soak-2"];
/// Untouched by the workload: quota and PDB with literal expectations.
const FIXED: &str = "soak-fixed";
const MIN_NODES: usize = 80;
const MAX_NODES: usize = 120;
const APISERVERS: usize = 4;
/// Live pods kept at most, so a long soak stays a steady state rather than a growth test.
const MAX_PODS: usize = 1500;
/// StorageVersion names cycle through this many.
const STORAGE_VERSIONS: u64 = 100;
const CPU: [&str; 3] = ["100m", "250m", "1"];
const MEMORY: [&str; 3] = ["64Mi", "128Mi", "1Gi"];
/// How stale kcm's view may be when it writes a PDB status (watch latency, relists after a
/// dropped watch or a compaction, with backoff).
const STALENESS: Duration = Duration::from_secs(30);

fn parse<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

fn now() -> Time {
    Time(Timestamp::now())
}

struct Workload {
    rng: StdRng,
    client: Client,
    next: u64,
    pods: Vec<(String, String)>,
    /// Pods that finished: never readied again, only deleted.
    finished: Vec<(String, String)>,
    nodes: BTreeSet<String>,
    leases: BTreeSet<usize>,
    ops: u64,
}

impl Workload {
    fn new(client: Client, seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            client,
            next: 0,
            pods: Vec::new(),
            finished: Vec::new(),
            nodes: BTreeSet::new(),
            leases: BTreeSet::new(),
            ops: 0,
        }
    }

    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    async fn setup(&mut self) {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        for ns in NAMESPACES.iter().chain([&FIXED]) {
            let _ = namespaces
                .create(
                    &PostParams::default(),
                    &parse(json!({ "metadata": { "name": ns } })),
                )
                .await;
        }
        for ns in NAMESPACES {
            self.quota(ns, "1000").await;
            self.pdb(ns, 1).await;
            let templates: Api<ResourceClaimTemplate> = Api::namespaced(self.client.clone(), ns);
            templates
                .create(
                    &PostParams::default(),
                    &parse(json!({ "metadata": { "name": "gpu" }, "spec": { "spec": {
                        "devices": { "requests": [{ "name": "gpu", "exactly": { "deviceClassName": "gpu.example.com" } }] } } } })),
                )
                .await
                .unwrap();
        }
        // The literal cases.
        let quotas: Api<ResourceQuota> = Api::namespaced(self.client.clone(), FIXED);
        quotas
            .create(&PostParams::default(), &parse(json!({ "metadata": { "name": "q" },
                "spec": { "hard": { "pods": "10", "requests.cpu": "10", "requests.memory": "10Gi" } } })))
            .await
            .unwrap();
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), FIXED);
        pdbs.create(
            &PostParams::default(),
            &parse(json!({ "metadata": { "name": "fixed" },
            "spec": { "minAvailable": 2, "selector": { "matchLabels": { "app": "fixed" } } } })),
        )
        .await
        .unwrap();
        for (i, cpu) in ["100m", "250m", "1"].iter().enumerate() {
            let name = format!("fixed-{i}");
            self.pods(FIXED)
                .create(
                    &PostParams::default(),
                    &pod_body(&name, "fixed", cpu, "512Mi", false),
                )
                .await
                .unwrap();
            self.set_ready(FIXED, &name, true).await;
        }
        for _ in 0..MIN_NODES + 5 {
            self.add_node().await;
        }
        for k in 0..APISERVERS {
            self.create_lease(k).await;
        }
    }

    async fn quota(&self, ns: &str, pods: &str) {
        let quotas: Api<ResourceQuota> = Api::namespaced(self.client.clone(), ns);
        let body = json!({ "metadata": { "name": "q" }, "spec": { "hard": {
            "pods": pods, "requests.cpu": "100", "requests.memory": "100Gi", "limits.cpu": "200" } } });
        let _ = quotas
            .patch("q", &PatchParams::apply("soak").force(), &Patch::Apply(&json!({
                "apiVersion": "v1", "kind": "ResourceQuota", "metadata": { "name": "q" }, "spec": body["spec"] })))
            .await;
    }

    async fn pdb(&self, ns: &str, min: i32) {
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), ns);
        let _ = pdbs
            .patch("pdb-a", &PatchParams::apply("soak").force(), &Patch::Apply(&json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": { "name": "pdb-a" },
                "spec": { "minAvailable": min, "selector": { "matchLabels": { "app": "a" } } } })))
            .await;
    }

    async fn set_ready(&self, ns: &str, name: &str, ready: bool) {
        let status = json!({ "status": { "phase": "Running", "conditions": [
            { "type": "Ready", "status": if ready { "True" } else { "False" } }] } });
        let _ = self
            .pods(ns)
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(status))
            .await;
    }

    async fn add_node(&mut self) {
        let name = format!("node-{}", self.next);
        self.next += 1;
        let nodes: Api<Node> = Api::all(self.client.clone());
        if nodes
            .create(
                &PostParams::default(),
                &parse(json!({ "metadata": { "name": name } })),
            )
            .await
            .is_ok()
        {
            self.nodes.insert(name);
        }
    }

    async fn create_lease(&mut self, k: usize) {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), "kube-system");
        let body = parse(json!({ "metadata": { "name": format!("apiserver-{k}"),
            "labels": { "apiserver.kubernetes.io/identity": "kube-apiserver" } },
            "spec": { "holderIdentity": format!("apiserver-{k}") } }));
        if leases.create(&PostParams::default(), &body).await.is_ok() {
            self.leases.insert(k);
        }
    }

    async fn step(&mut self) {
        self.ops += 1;
        let roll = self.rng.random_range(0..100);
        let ns = NAMESPACES[self.rng.random_range(0..NAMESPACES.len())];
        let crowded = self.pods.len() + self.finished.len() >= MAX_PODS;
        let roll = if crowded && roll < 40 { 80 } else { roll };
        match roll {
            0..40 => {
                let name = format!("p-{}", self.next);
                self.next += 1;
                let app = if self.rng.random_bool(0.6) { "a" } else { "b" };
                let cpu = CPU[self.rng.random_range(0..CPU.len())];
                let memory = MEMORY[self.rng.random_range(0..MEMORY.len())];
                let claim = self.rng.random_bool(0.25);
                let body = pod_body(&name, app, cpu, memory, claim);
                if self
                    .pods(ns)
                    .create(&PostParams::default(), &body)
                    .await
                    .is_ok()
                {
                    self.pods.push((ns.to_string(), name));
                }
            }
            40..65 => {
                if let Some((ns, name)) = self.pick_pod() {
                    let ready = self.rng.random_bool(0.7);
                    self.set_ready(&ns, &name, ready).await;
                }
            }
            65..75 => {
                if !self.pods.is_empty() {
                    let i = self.rng.random_range(0..self.pods.len());
                    let (ns, name) = self.pods.swap_remove(i);
                    self.finished.push((ns.clone(), name.clone()));
                    let status = json!({ "status": { "phase": "Succeeded", "conditions": [{ "type": "Ready", "status": "False" }] } });
                    let _ = self
                        .pods(&ns)
                        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(status))
                        .await;
                }
            }
            75..88 => {
                let total = self.pods.len() + self.finished.len();
                if total > 0 {
                    let i = self.rng.random_range(0..total);
                    let (ns, name) = if i < self.pods.len() {
                        self.pods.swap_remove(i)
                    } else {
                        self.finished.swap_remove(i - self.pods.len())
                    };
                    let _ = self.pods(&ns).delete(&name, &DeleteParams::default()).await;
                }
            }
            88..91 => {
                let pods = self.rng.random_range(20..200).to_string();
                self.quota(ns, &pods).await;
            }
            91..94 => {
                let min = self.rng.random_range(0..6);
                self.pdb(ns, min).await;
            }
            94..97 => {
                let grow = self.nodes.len() < MIN_NODES
                    || (self.nodes.len() < MAX_NODES && self.rng.random_bool(0.5));
                if grow {
                    self.add_node().await;
                } else if let Some(node) = self.nodes.iter().next().cloned() {
                    let nodes: Api<Node> = Api::all(self.client.clone());
                    if nodes.delete(&node, &DeleteParams::default()).await.is_ok() {
                        self.nodes.remove(&node);
                    }
                }
            }
            _ => {
                let k = self.rng.random_range(0..APISERVERS);
                if self.leases.contains(&k) && self.rng.random_bool(0.5) {
                    let leases: Api<Lease> = Api::namespaced(self.client.clone(), "kube-system");
                    if leases
                        .delete(&format!("apiserver-{k}"), &DeleteParams::default())
                        .await
                        .is_ok()
                    {
                        self.leases.remove(&k);
                    }
                } else if !self.leases.contains(&k) {
                    self.create_lease(k).await;
                } else {
                    self.storage_version().await;
                }
            }
        }
    }

    fn pick_pod(&mut self) -> Option<(String, String)> {
        (!self.pods.is_empty())
            .then(|| self.pods[self.rng.random_range(0..self.pods.len())].clone())
    }

    /// A StorageVersion with entries of some API servers, live or gone.
    async fn storage_version(&mut self) {
        let ids: Vec<String> = (0..APISERVERS)
            .filter(|_| self.rng.random_bool(0.6))
            .map(|k| format!("apiserver-{k}"))
            .collect();
        let name = format!("apps.deployments-{}", self.next % STORAGE_VERSIONS);
        self.next += 1;
        self.storage_version_of(&name, &ids).await;
    }

    async fn storage_version_of(&mut self, name: &str, ids: &[String]) {
        let entries: Vec<Value> = ids
            .iter()
            .map(|id| json!({ "apiServerID": id, "encodingVersion": "apps/v1", "decodableVersions": ["apps/v1"] }))
            .collect();
        let svs: Api<StorageVersion> = Api::all(self.client.clone());
        if let Ok(created) = svs
            .create(
                &PostParams::default(),
                &parse(json!({ "metadata": { "name": name }, "spec": {} })),
            )
            .await
        {
            let _ = svs
                .patch_status(
                    &created.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "status": {
                        "storageVersions": entries,
                        // As the API server demands: the version all entries agree on.
                        "commonEncodingVersion": (!ids.is_empty()).then_some("apps/v1"),
                    } })),
                )
                .await;
        }
    }
}

fn pod_body(name: &str, app: &str, cpu: &str, memory: &str, claim: bool) -> Pod {
    let mut spec = json!({ "containers": [{ "name": "c", "image": "i",
        "resources": { "requests": { "cpu": cpu, "memory": memory }, "limits": { "cpu": cpu } } }] });
    if claim {
        spec["resourceClaims"] = json!([{ "name": "gpu", "resourceClaimTemplateName": "gpu" }]);
    }
    parse(json!({ "metadata": { "name": name, "labels": { "app": app } }, "spec": spec }))
}

/// One random fault on kcm's requests only (the workload is never faulted).
fn inject_fault(server: &TestServer, rng: &mut StdRng) -> &'static str {
    const RESOURCES: [&str; 8] = [
        "pods",
        "resourcequotas",
        "poddisruptionbudgets",
        "nodes",
        "resourceclaims",
        "storageversions",
        "leases",
        "events",
    ];
    let resource = RESOURCES[rng.random_range(0..RESOURCES.len())];
    let times = rng.random_range(1..5);
    match rng.random_range(0..6) {
        0 => {
            let verb =
                ["list", "patch", "update", "create", "delete", "get"][rng.random_range(0..6)];
            server.inject(
                Fault::error(500)
                    .user_agent("kcm/")
                    .verb(verb)
                    .resource(resource)
                    .times(times),
            );
            "500"
        }
        1 => {
            server.inject(
                Fault::error(429)
                    .user_agent("kcm/")
                    .retry_after(1)
                    .resource(resource)
                    .times(times),
            );
            "429"
        }
        2 => {
            server.inject(
                Fault::error(409)
                    .user_agent("kcm/")
                    .verb("update")
                    .resource(resource)
                    .times(times),
            );
            "409"
        }
        3 => {
            server.inject(
                Fault::latency(Duration::from_secs(2))
                    .user_agent("kcm/")
                    .resource(resource)
                    .times(times),
            );
            "latency"
        }
        4 => {
            server.store().drop_watches();
            "dropped watches"
        }
        _ => {
            server.store().compact();
            "compaction"
        }
    }
}

/// What every controller's output must be, computed from the objects as they are now.
/// `Err` names the first object that differs.
async fn converged(client: &Client) -> Result<(), String> {
    let now = now();
    for ns in NAMESPACES.iter().chain([&FIXED]) {
        // Listed as kcm stores them: straight into views.
        let pods: Vec<PodView> = Api::<WatchedPod>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .map(PodView::from)
            .collect();
        for quota in Api::<ResourceQuota>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
        {
            let names: Vec<String> = quota
                .spec
                .as_ref()
                .and_then(|s| s.hard.as_ref())
                .map(|h| h.keys().cloned().collect())
                .unwrap_or_default();
            let matching = pod_matching(&names);
            let usage = sum_usage(
                &pods,
                &matching,
                |p| pod_usage(p, &now, QuotaGates::default()),
                |_| true,
            );
            let computed = mask_list(&usage.list, &matching);
            if let Some(want) = next_status(&quota, &computed) {
                return Err(format!(
                    "quota {ns}/{}: status {:?}, want {want:?}",
                    quota.name_any(),
                    quota.status
                ));
            }
        }
        for pdb in Api::<PodDisruptionBudget>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
        {
            let spec = pdb.spec.clone().unwrap_or_default();
            let selector = kcm::k8s::selector::from_label_selector(spec.selector.as_ref())
                .map_err(|e| e.to_string())?;
            let matching: Vec<&PodView> = pods
                .iter()
                .filter(|p| selector.matches(&p.labels))
                .collect();
            let (expected, desired) = expected_and_desired(&spec, matching.len() as i32, None)
                .map_err(|e| e.to_string())?;
            let disrupted = disrupted_pods(&matching, pdb.status.as_ref(), &now);
            let healthy = count_healthy(&matching, &disrupted.map, &now);
            if let Some(want) = new_status(&pdb, healthy, desired, expected, &disrupted.map, &now) {
                return Err(format!(
                    "pdb {ns}/{}: status {:?}, want {want:?}",
                    pdb.name_any(),
                    pdb.status
                ));
            }
        }
        // Claims: every live pod that will run has its claim recorded and owns it; no claim
        // is left behind for a pod that is done or gone.
        let claims = Api::<ResourceClaim>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items;
        for pod in &pods {
            let wants_claim = pod
                .spec
                .as_ref()
                .and_then(|s| s.resource_claims.as_ref())
                .is_some_and(|c| !c.is_empty());
            let done = matches!(
                pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            );
            if !wants_claim || done {
                continue;
            }
            let recorded = pod
                .status
                .as_ref()
                .and_then(|s| s.resource_claim_statuses.as_ref())
                .and_then(|s| s.iter().find(|e| e.name == "gpu"))
                .and_then(|e| e.resource_claim_name.clone());
            let Some(claim_name) = recorded else {
                return Err(format!("pod {ns}/{}: no claim recorded", pod.name_any()));
            };
            let owned = claims.iter().any(|c| {
                c.name_any() == claim_name
                    && c.owner_references()
                        .iter()
                        .any(|o| Some(o.uid.as_str()) == pod.metadata.uid.as_deref())
            });
            if !owned {
                return Err(format!(
                    "pod {ns}/{}: claim {claim_name} missing or not owned",
                    pod.name_any()
                ));
            }
        }
        for claim in &claims {
            let owner = claim.owner_references().first().map(|o| o.uid.clone());
            let live = pods
                .iter()
                .find(|p| p.metadata.uid.as_deref() == owner.as_deref());
            let keep = live.is_some_and(|p| {
                !matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                )
            });
            if !keep {
                return Err(format!("claim {ns}/{} outlived its pod", claim.name_any()));
            }
        }
    }
    // Node TTLs: one value on every node, a step that fits the node count.
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items;
    let values: BTreeSet<Option<String>> = nodes
        .iter()
        .map(|n| n.annotations().get(TTL_ANNOTATION).cloned())
        .collect();
    let count = nodes.len();
    let fits = |v: &Option<String>| {
        BOUNDARIES.iter().any(|b| {
            Some(b.ttl_seconds.to_string()) == *v && count >= b.size_min && count <= b.size_max
        })
    };
    if values.len() != 1 || !values.iter().all(fits) {
        return Err(format!("node TTLs {values:?} for {count} nodes"));
    }
    // StorageVersions: nothing left to collect.
    let leases: BTreeSet<String> = Api::<Lease>::namespaced(client.clone(), gc::IDENTITY_NAMESPACE)
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .iter()
        .filter(|l| gc::has_identity_label(l))
        .map(|l| l.name_any())
        .collect();
    for sv in Api::<StorageVersion>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
    {
        if gc::entries(&sv).is_empty() {
            continue;
        }
        if gc::collect(&sv, |id| !leases.contains(id), &now) != Outcome::Keep {
            return Err(format!(
                "storageversion {} still has entries of gone API servers",
                sv.name_any()
            ));
        }
    }
    Ok(())
}

/// Waits until every controller's output matches the objects (and the literal cases hold);
/// returns how long that took. `log` is kcm's log, whose last watch failures a failure shows.
async fn converge(client: &Client, deadline: Duration, log: impl Fn() -> String) -> Duration {
    let calm = Instant::now();
    let mut last = converged(client).await;
    while last.is_err() && calm.elapsed() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        last = converged(client).await;
    }
    if last.is_err() {
        let log = log();
        let failures: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("list/watch failed"))
            .collect();
        panic!(
            "not converged after {:?}: {last:?}\nkcm's last watch failures:\n{}",
            calm.elapsed(),
            failures[failures.len().saturating_sub(8)..].join("\n")
        );
    }
    literal_cases(client).await;
    calm.elapsed()
}

/// The literal cases in `soak-fixed`, written out.
async fn literal_cases(client: &Client) {
    let quota = Api::<ResourceQuota>::namespaced(client.clone(), FIXED)
        .get("q")
        .await
        .unwrap();
    let used = serde_json::to_value(quota.status.unwrap().used.unwrap()).unwrap();
    assert_eq!(
        used,
        json!({ "pods": "3", "requests.cpu": "1350m", "requests.memory": "1536Mi" })
    );
    let pdb = Api::<PodDisruptionBudget>::namespaced(client.clone(), FIXED)
        .get("fixed")
        .await
        .unwrap();
    let status = pdb.status.unwrap();
    assert_eq!(
        (
            status.expected_pods,
            status.desired_healthy,
            status.current_healthy,
            status.disruptions_allowed
        ),
        (Some(3), Some(2), Some(3), Some(1))
    );
}

/// What the API server held for each workload PDB (`pdb-a`, pods `app=a`) after every change
/// it applied, replayed from its request log: per namespace, (when, healthy pods,
/// minAvailable) in time order.
type Timeline = BTreeMap<String, Vec<(Instant, i32, i32)>>;

fn true_budgets(server: &TestServer) -> Timeline {
    let mut ready: BTreeMap<(String, String), bool> = BTreeMap::new();
    let mut healthy: BTreeMap<String, i32> = BTreeMap::new();
    let mut min_available: BTreeMap<String, i32> = BTreeMap::new();
    let mut timeline = Timeline::new();
    for record in server.requests() {
        let ns = record.info.namespace.clone();
        if record.code >= 300 || !NAMESPACES.contains(&ns.as_str()) {
            continue;
        }
        let key = (ns.clone(), record.info.name.clone());
        let body = record.body.clone().unwrap_or_default();
        let was_ready = ready.get(&key).copied().unwrap_or(false);
        let now_ready = match (
            record.info.resource.as_str(),
            record.info.verb.as_str(),
            record.info.subresource.as_str(),
        ) {
            ("pods", "create", "") if body["metadata"]["labels"]["app"] == "a" => {
                let name = body["metadata"]["name"].as_str().unwrap_or_default();
                ready.insert((ns.clone(), name.to_string()), false);
                continue;
            }
            ("pods", "patch" | "update", "status") if ready.contains_key(&key) => {
                let conditions = body["status"]["conditions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                match conditions.iter().find(|c| c["type"] == "Ready") {
                    Some(condition) => {
                        let now = condition["status"] == "True";
                        ready.insert(key, now);
                        now
                    }
                    None => continue,
                }
            }
            ("pods", "delete", "") if ready.remove(&key).is_some() => false,
            ("poddisruptionbudgets", "patch", "") if record.info.name == "pdb-a" => {
                match body["spec"]["minAvailable"].as_i64() {
                    Some(min) => {
                        min_available.insert(ns.clone(), min as i32);
                        was_ready
                    }
                    None => continue,
                }
            }
            _ => continue,
        };
        let count = healthy.entry(ns.clone()).or_default();
        *count += i32::from(now_ready) - i32::from(was_ready);
        let min = min_available.get(&ns).copied().unwrap_or(0);
        timeline
            .entry(ns)
            .or_default()
            .push((record.at, *count, min));
    }
    for entries in timeline.values_mut() {
        entries.sort_by_key(|e| e.0);
    }
    timeline
}

/// The most disruptions kcm may allow for the PDB of `namespace` when it writes at `at`. Its
/// view of pods and of the PDB comes from two watches, each of which may lag by up to
/// `STALENESS` (watch latency, relists after a dropped watch or compaction), so the bound is
/// the most healthy pods and the lowest minAvailable the server held in `[at - STALENESS,
/// at]` — never more, whatever mix of moments kcm saw.
fn max_allowed(timeline: &Timeline, namespace: &str, at: Instant) -> i32 {
    let Some(entries) = timeline.get(namespace) else {
        return 0;
    };
    let from = at.checked_sub(STALENESS).unwrap_or(at);
    let start = entries.partition_point(|e| e.0 < from);
    let end = entries.partition_point(|e| e.0 <= at);
    // The state when the window opened, and every state within it.
    let window = &entries[start.saturating_sub(1)..end];
    let healthy = window.iter().map(|e| e.1).max();
    let min = window.iter().map(|e| e.2).min();
    match (healthy, min) {
        (Some(healthy), Some(min)) => (healthy - min).max(0),
        _ => 0,
    }
}

/// Every PDB status kcm wrote, against the truth replayed from the request log: never more
/// disruptions allowed than the pods healthy at some moment within the staleness window
/// allowed, and never more than the status's own counts allow.
fn check_pdb_writes(server: &TestServer) -> usize {
    let timeline = true_budgets(server);
    let mut checked = 0;
    for record in server.requests() {
        if !(record.user_agent.contains("kcm/")
            && record.is("update", "poddisruptionbudgets", "status")
            && record.code < 300)
        {
            continue;
        }
        let Some(body) = record.body.as_ref() else {
            continue;
        };
        let status = &body["status"];
        let int = |key: &str| status[key].as_i64().unwrap_or(0) as i32;
        let allowed = int("disruptionsAllowed");
        assert!(allowed >= 0, "{status}");
        assert!(
            allowed <= (int("currentHealthy") - int("desiredHealthy")).max(0),
            "inconsistent status written: {status}"
        );
        let ns = &record.info.namespace;
        if NAMESPACES.contains(&ns.as_str()) {
            let max = max_allowed(&timeline, ns, record.at);
            assert!(
                allowed <= max,
                "{ns}: kcm allowed {allowed} disruptions when at most {max} were safe: {status}"
            );
        }
        checked += 1;
    }
    checked
}

/// Sum of the samples of `family` whose labels contain `contains`.
async fn metric_sum(kcm: &Kcm, family: &str, contains: &str) -> f64 {
    let Some((_, body)) = kcm.get("/metrics").await else {
        return 0.0;
    };
    body.lines()
        .filter(|l| {
            l.starts_with(family) && l[family.len()..].starts_with('{') && l.contains(contains)
        })
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

/// `pace`: a pause after each workload step, so a long run keeps a steady rate.
async fn soak(storm: Duration, convergence_deadline: Duration, pace: Duration) {
    let seed: u64 = std::env::var("KCM_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261123);
    let server = TestServer::start().await;
    let client = server.client();
    let mut workload = Workload::new(client.clone(), seed);
    workload.setup().await;
    let kcm = Kcm::start(
        server.kubeconfig_path(),
        &[
            "--controllers=*",
            "--feature-gates=StorageVersionAPI=true",
            "--leader-elect=false",
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
        ],
    );
    kcm_testsupport::eventually("kcm serves metrics", kcm_testsupport::DEADLINE, || async {
        kcm.get("/readyz")
            .await
            .is_some_and(|(code, _)| code == 200)
    })
    .await;

    let mut fault_rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let mut faults: BTreeMap<&str, usize> = BTreeMap::new();
    let started = Instant::now();
    let mut next_fault = Instant::now();
    let mut peak_watches = 0;
    // Writes of every controller fail at first, so the storm is visible in the metrics.
    for resource in [
        "poddisruptionbudgets",
        "resourcequotas",
        "nodes",
        "resourceclaims",
    ] {
        server.inject(
            Fault::error(500)
                .user_agent("kcm/")
                .resource(resource)
                .verb("update")
                .times(2),
        );
        server.inject(
            Fault::error(500)
                .user_agent("kcm/")
                .resource(resource)
                .verb("patch")
                .times(2),
        );
        server.inject(
            Fault::error(500)
                .user_agent("kcm/")
                .resource(resource)
                .verb("create")
                .times(2),
        );
    }
    while started.elapsed() < storm {
        workload.step().await;
        if !pace.is_zero() {
            tokio::time::sleep(pace).await;
        }
        if Instant::now() >= next_fault {
            *faults
                .entry(inject_fault(&server, &mut fault_rng))
                .or_default() += 1;
            next_fault = Instant::now() + Duration::from_millis(fault_rng.random_range(200..1200));
        }
        peak_watches = peak_watches.max(server.store().open_watches());
    }
    server.faults().clear();
    let errors_after_storm = metric_sum(&kcm, "kcm_reconcile_total", "result=\"error\"").await;

    let convergence = converge(&client, convergence_deadline, || kcm.log()).await;

    // The storm may have left a quota below its usage, where the API server refuses new
    // pods: room for one more, admitted once kcm has published the new limit.
    workload.quota(NAMESPACES[0], "1000").await;
    // Still alive and reconciling: one more change each controller must act on.
    let before: Vec<f64> = reconciles_per_controller(&kcm).await;
    workload.add_node().await;
    workload.step().await;
    let pods = workload.pods(NAMESPACES[0]);
    let after_storm = pod_body("after-storm", "a", "100m", "64Mi", true);
    let admitted_by = Instant::now() + kcm_testsupport::DEADLINE;
    loop {
        match pods.create(&PostParams::default(), &after_storm).await {
            Ok(_) => break,
            Err(kube::Error::Api(status)) if status.code == 403 && Instant::now() < admitted_by => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => panic!("the pod after the storm: {err}"),
        }
    }
    workload
        .storage_version_of("poke.after-storm", &["apiserver-gone".to_string()])
        .await;
    let deadline = Instant::now() + kcm_testsupport::DEADLINE;
    loop {
        let after = reconciles_per_controller(&kcm).await;
        if after.iter().zip(&before).all(|(a, b)| a > b) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "every controller reconciles after the storm: before {before:?}, after {after:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        kcm.get("/healthz")
            .await
            .is_some_and(|(code, _)| code == 200)
    );
    // Once the last changes are handled and the queues are empty, nothing fails any more:
    // the error counter stops rising.
    kcm_testsupport::eventually("convergence holds", kcm_testsupport::DEADLINE, || async {
        converged(&client).await.is_ok()
    })
    .await;
    quiet(&kcm).await;
    let errors_settled = metric_sum(&kcm, "kcm_reconcile_total", "result=\"error\"").await;
    assert!(converged(&client).await.is_ok());
    quiet(&kcm).await;
    let errors_end = metric_sum(&kcm, "kcm_reconcile_total", "result=\"error\"").await;

    let checked = check_pdb_writes(&server);
    let writes = server.count(|r| r.user_agent.contains("kcm/") && r.is_write());
    let watches = server.store().open_watches();
    let (cpu, peak_rss) = kcm_testsupport::proc::usage(kcm.pid());
    println!(
        "soak seed {seed}: {:?} storm, {} workload ops, faults {faults:?}; kcm {writes} writes ({checked} PDB status writes checked), reconcile errors {errors_after_storm} during the storm, {errors_settled} → {errors_end} after; converged {convergence:.1?} after the faults stopped; open watches peak {peak_watches}, end {watches}; kcm CPU {cpu:.1}s, peak RSS {peak_rss:.0} MiB",
        storm, workload.ops
    );
    assert!(
        errors_after_storm > 0.0,
        "the storm made reconciles fail, visibly"
    );
    assert_eq!(
        errors_settled, errors_end,
        "no reconcile errors once converged and calm"
    );
    assert!(checked > 0);
    assert!(watches <= 40, "watches bounded: {watches}");
    assert!(peak_rss < 512.0, "memory bounded: {peak_rss} MiB");
    assert!(
        kcm.log().lines().all(|l| !l.contains("panicked")),
        "no panic"
    );
}

/// Waits until every work queue of kcm is empty and no item is being processed.
async fn quiet(kcm: &Kcm) {
    kcm_testsupport::eventually("kcm's queues drain", kcm_testsupport::DEADLINE, || async {
        metric_sum(kcm, "workqueue_depth", "").await == 0.0
            && metric_sum(kcm, "workqueue_unfinished_work_seconds", "").await == 0.0
    })
    .await;
}

/// Reconciles so far of each of the five controllers.
async fn reconciles_per_controller(kcm: &Kcm) -> Vec<f64> {
    let mut counts = Vec::new();
    for controller in [
        "ttl-controller",
        "disruption-controller",
        "resourcequota-controller",
        "resourceclaim-controller",
        "storageversion-garbage-collector-controller",
    ] {
        counts.push(
            metric_sum(
                kcm,
                "kcm_reconcile_total",
                &format!("controller=\"{controller}\""),
            )
            .await,
        );
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_ci() {
    // Convergence may wait for a watch's backoff: kube-runtime's, like client-go's reflector,
    // doubles from 0.8 s to at most 30 s and resets only after 2 minutes without a failure,
    // and the storm fails lists and compacts the store every few seconds.
    soak(
        Duration::from_secs(25),
        Duration::from_secs(60),
        Duration::ZERO,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long soak: KCM_SOAK_SECS=1800 cargo test --release --test it -- --ignored --nocapture soak::soak_long"]
async fn soak_long() {
    let secs = std::env::var("KCM_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1800);
    soak(
        Duration::from_secs(secs),
        Duration::from_secs(120),
        Duration::from_millis(5),
    )
    .await;
}

/// The process identity in kcm's user agent (`… kcm/<identity>/<client>`; one process has a
/// client per controller).
fn identity(user_agent: &str) -> Option<&str> {
    let (_, rest) = user_agent.rsplit_once("kcm/")?;
    Some(rest.split_once('/').map_or(rest, |(id, _)| id))
}

fn candidate(server: &TestServer) -> Kcm {
    let mut args = vec![
        "--controllers=*",
        "--feature-gates=StorageVersionAPI=true",
        "--kube-api-qps=500",
        "--kube-api-burst=1000",
    ];
    args.extend(kcm_testsupport::FAST_LEASE);
    Kcm::start(server.kubeconfig_path(), &args)
}

/// Three kcm processes; the leader is killed again and again (SIGKILL and SIGTERM in turn)
/// while the workload runs, and a new process takes each dead one's place. At most one
/// process writes at any time, and the survivors converge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_churn_single_writer_and_convergence() {
    let server = TestServer::start().await;
    let client = server.client();
    let mut workload = Workload::new(client.clone(), 7);
    workload.setup().await;
    let mut processes: Vec<Kcm> = (0..3).map(|_| candidate(&server)).collect();
    let mut kills = 0;
    let started = Instant::now();
    let mut next_kill = Instant::now() + Duration::from_secs(3);
    while started.elapsed() < Duration::from_secs(25) {
        workload.step().await;
        if Instant::now() < next_kill {
            continue;
        }
        let mut leader = None;
        for (i, p) in processes.iter().enumerate() {
            if p.metric("leader_election_master_status{name=\"kcm\"}")
                .await
                == Some(1.0)
            {
                leader = Some(i);
            }
        }
        if let Some(i) = leader {
            let mut old = processes.swap_remove(i);
            old.signal(if kills % 2 == 0 { "KILL" } else { "TERM" });
            assert!(
                old.wait_exit(Duration::from_secs(30)).await.is_some(),
                "the leader exits"
            );
            kills += 1;
            processes.push(candidate(&server));
        }
        next_kill = Instant::now() + Duration::from_secs(3);
    }

    let convergence = converge(&client, Duration::from_secs(30), || {
        processes.iter().map(|p| p.log()).collect()
    })
    .await;

    // Controller writes (leader election's own lease writes aside), by process: the spans of
    // different processes never overlap.
    let mut spans: BTreeMap<String, (Instant, Instant, usize)> = BTreeMap::new();
    for record in server.requests() {
        if !record.is_write() || record.info.resource == "leases" {
            continue;
        }
        let Some(id) = identity(&record.user_agent) else {
            continue;
        };
        let span = spans
            .entry(id.to_string())
            .or_insert((record.at, record.at, 0));
        span.0 = span.0.min(record.at);
        span.1 = span.1.max(record.at);
        span.2 += 1;
    }
    let mut ordered: Vec<_> = spans.values().copied().collect();
    ordered.sort();
    for pair in ordered.windows(2) {
        assert!(
            pair[0].1 < pair[1].0,
            "two processes wrote at the same time: spans {ordered:?}"
        );
    }
    let writers = ordered.len();
    println!(
        "leader churn: {kills} leaders killed, {writers} processes wrote in turn ({:?} writes each); converged {:.1?} after the churn",
        ordered.iter().map(|s| s.2).collect::<Vec<_>>(),
        convergence
    );
    assert!(kills >= 3, "the leader was killed repeatedly: {kills}");
    assert!(writers >= 3, "leadership moved: {writers} writers");
    check_pdb_writes(&server);
}
