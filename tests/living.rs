//! Scenarios of a living cluster (kcm_testsupport::living): pods that run, `kubectl drain`,
//! evictions, a rollout and Jobs, on kube-apiserver v1.36 with upstream's scheduler and
//! workload controllers and `kcm-nodesim`'s kubelets. Each scenario runs twice, once with
//! upstream's five controllers and once with kcm's, and asserts the same outcome for both (the
//! same refusals and final statuses) as well as the outcome itself, so it fails when either
//! side breaks.
//!
//! Without the binaries (kcm_testsupport::envtest) every test says it skipped. A test binary
//! of its own: the scheduler and workload controllers it starts act on every object of the
//! control plane, so no other test shares it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kcm_testsupport::eventually;
use kcm_testsupport::living::{self, LEASE_RENEW, LivingCluster, POOL, Side};
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// Pods start, turn Ready, get evicted and replaced: slower than a status write.
const DEADLINE: Duration = Duration::from_secs(90);
/// kubectl drain's own limit; a drain held past it failed.
const DRAIN_TIMEOUT: &str = "--timeout=120s";
/// The API server's refusal of an eviction past a budget (pkg/registry/core/pod/storage/eviction.go).
const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// One side's run of a scenario: its namespace, its nodes (named `<namespace>-<i>`), and
/// clients.
struct Run {
    /// kube's client retries 429 and 503 (an API server just started answers 503 for a while).
    client: Client,
    /// One that does not: an eviction's 429 is the budget's answer.
    evictions: Client,
    ns: String,
    nodes: kcm_nodesim::Simulator,
}

impl Run {
    /// A namespace `<prefix>-<side>-<random>` and `nodes` simulated nodes labelled for it.
    async fn start(cluster: &LivingCluster, side: Side, prefix: &str, nodes: usize) -> Self {
        let client = cluster.plane.client().await;
        let evictions = cluster.plane.client_without_retries().await;
        let (ns, nodes) = living::pool(cluster.plane, &client, prefix, side, nodes).await;
        Self {
            client,
            evictions,
            ns,
            nodes,
        }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn node(&self, index: usize) -> String {
        format!("{}-{index}", self.ns)
    }

    async fn create<K>(&self, body: Value) -> K
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        let object: K = serde_json::from_value(body.clone()).expect("a valid object");
        self.api::<K>()
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("create {body}: {e}"))
    }

    /// `replicas` pods of Deployment `app`, one container requesting 100m and 64Mi, Ready a
    /// second after it starts, spread evenly over this run's nodes.
    async fn deployment(&self, app: &str, replicas: i32) {
        self.create::<Deployment>(json!({
            "metadata": { "name": app },
            "spec": {
                "replicas": replicas,
                "selector": { "matchLabels": { "app": app } },
                "strategy": { "rollingUpdate": { "maxUnavailable": 1, "maxSurge": 1 } },
                "template": pod_template(app, &self.ns, "Always"),
            }
        }))
        .await;
    }

    /// A PodDisruptionBudget `app` over the pods labelled `app`, with `budget` (minAvailable,
    /// maxUnavailable, unhealthyPodEvictionPolicy) in its spec.
    async fn pdb(&self, app: &str, budget: Value) {
        let mut spec = json!({ "selector": { "matchLabels": { "app": app } } });
        merge(&mut spec, budget);
        self.create::<PodDisruptionBudget>(json!({ "metadata": { "name": app }, "spec": spec }))
            .await;
    }

    async fn pods(&self, app: &str) -> Vec<Pod> {
        self.api::<Pod>()
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .expect("pods list")
            .items
    }

    /// Waits until `app` has `count` Ready pods, none terminating.
    async fn ready(&self, app: &str, count: usize) {
        eventually(
            &format!("{count} Ready pods of {app}"),
            DEADLINE,
            || async {
                let pods = self.pods(app).await;
                pods.len() == count && pods.iter().all(healthy)
            },
        )
        .await;
    }

    /// The PDB's status as a drop-in must write it: counts and conditions, without the
    /// times and pod names that differ between runs.
    async fn pdb_view(&self, name: &str) -> Value {
        let pdb = self
            .api::<PodDisruptionBudget>()
            .get(name)
            .await
            .expect("pdb");
        let status = serde_json::to_value(pdb.status).expect("a status");
        json!({
            "observedGenerationCurrent": status["observedGeneration"] == json!(pdb.metadata.generation),
            "expectedPods": status["expectedPods"],
            "desiredHealthy": status["desiredHealthy"],
            "currentHealthy": status["currentHealthy"],
            "disruptionsAllowed": status["disruptionsAllowed"],
            "conditions": status["conditions"].as_array().map(|cs| cs.iter().map(|c| json!({
                "type": c["type"], "status": c["status"], "reason": c["reason"],
                "message": c["message"],
            })).collect::<Vec<_>>()),
        })
    }

    /// Waits until the PDB's status says `allowed` disruptions with `healthy` healthy pods.
    async fn pdb_settles(&self, name: &str, healthy: i64, allowed: i64) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let last = self.pdb_view(name).await;
            if last["currentHealthy"] == json!(healthy)
                && last["disruptionsAllowed"] == json!(allowed)
                && last["observedGenerationCurrent"] == json!(true)
            {
                return last;
            }
            assert!(
                Instant::now() < deadline,
                "PDB {name}: want currentHealthy {healthy}, disruptionsAllowed {allowed}; last {last}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The quota's `status.used`, once it equals `want` (a timeout names the last one seen).
    async fn quota_used(&self, name: &str, want: Value) -> Value {
        let quotas = self.api::<ResourceQuota>();
        let mut last = Value::Null;
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Ok(quota) = quotas.get(name).await {
                last = serde_json::to_value(quota.status).expect("a status")["used"].clone();
                if last == want {
                    return last;
                }
            }
            assert!(
                Instant::now() < deadline,
                "quota {name}: want used {want}; last {last}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The nodes the pods of `app` run on, by node index, counted.
    async fn placement(&self, app: &str) -> BTreeMap<String, usize> {
        let mut placement = BTreeMap::new();
        for pod in self.pods(app).await {
            let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
            let index = node.strip_prefix(&format!("{}-", self.ns)).unwrap_or(&node);
            *placement.entry(index.to_string()).or_default() += 1;
        }
        placement
    }

    /// Evicts pod `name`: Ok, or the refusal's HTTP code and message.
    async fn evict(&self, name: &str) -> Result<(), (u16, String)> {
        let pods: Api<Pod> = Api::namespaced(self.evictions.clone(), &self.ns);
        match pods.evict(name, &EvictParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) => Err((status.code, status.message)),
            Err(e) => panic!("evicting {name}: {e}"),
        }
    }

    /// Deployment `app` of `replicas` pods under a budget (`budget` in its spec), every pod
    /// Ready and the budget's status settled at `allowed` disruptions.
    async fn budgeted(&self, app: &str, replicas: i32, budget: Value, allowed: i64) -> Value {
        self.deployment(app, replicas).await;
        self.pdb(app, budget).await;
        self.ready(app, replicas as usize).await;
        self.pdb_settles(app, i64::from(replicas), allowed).await
    }

    async fn finish(self) {
        self.nodes.shutdown().await;
    }
}

/// The pod template of `app`: on the run's nodes, spread evenly over them (a hard spread, so
/// both sides see the same placement), Ready a second after it starts.
fn pod_template(app: &str, ns: &str, restart: &str) -> Value {
    json!({
        "metadata": { "labels": { "app": app } },
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 5,
            "nodeSelector": { POOL: ns },
            "topologySpreadConstraints": [{
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "nodeTaintsPolicy": "Honor",
                "labelSelector": { "matchLabels": { "app": app } },
            }],
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } },
                "readinessProbe": {
                    "httpGet": { "path": "/healthz", "port": 8080 },
                    "initialDelaySeconds": 1,
                },
            }],
        }
    })
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
}

fn condition(pod: &Pod, kind: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status == "True"))
}

/// Ready and not terminating: what a budget counts as healthy.
fn healthy(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && condition(pod, "Ready")
}

/// Watches the run's pods and keeps, per app, the fewest healthy pods seen at once from the
/// moment it starts (the budget's floor must hold at every event, not only at the end).
struct HealthFloor {
    floor: Arc<Mutex<BTreeMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl HealthFloor {
    async fn watch(run: &Run) -> Self {
        let floor = Arc::new(Mutex::new(BTreeMap::<String, usize>::new()));
        let (reader, writer) = kube::runtime::reflector::store::<Pod>();
        let stream =
            kube::runtime::reflector(writer, watcher(run.api::<Pod>(), Default::default()));
        let seen = floor.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                if event.is_err() || reader.is_empty() && seen.lock().unwrap().is_empty() {
                    continue;
                }
                let mut now = BTreeMap::<String, usize>::new();
                for pod in reader.state() {
                    let app = pod.labels().get("app").cloned().unwrap_or_default();
                    *now.entry(app).or_default() += usize::from(healthy(&pod));
                }
                let mut floor = seen.lock().unwrap();
                for (app, count) in now {
                    let least = floor.entry(app).or_insert(count);
                    *least = (*least).min(count);
                }
            }
        });
        reader_ready(&floor).await;
        Self { floor, task }
    }

    fn floor(&self, app: &str) -> usize {
        self.floor.lock().unwrap().get(app).copied().unwrap_or(0)
    }
}

/// Waits until the watch's first listing was counted.
async fn reader_ready(floor: &Arc<Mutex<BTreeMap<String, usize>>>) {
    eventually("the pod watch lists", DEADLINE, || async {
        !floor.lock().unwrap().is_empty()
    })
    .await;
}

impl Drop for HealthFloor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Resolves at the first status of PDB `name` that records an eviction. A watch sees every
/// status write; polling can miss the entry, which lives only until the controller sees the
/// evicted pod terminating (often less than a poll's interval).
async fn first_eviction_recorded(run: &Run, name: &str) -> tokio::task::JoinHandle<()> {
    let (listed, is_listed) = tokio::sync::oneshot::channel();
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let events = watcher(run.api::<PodDisruptionBudget>(), config);
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        let mut listed = Some(listed);
        while let Some(event) = events.next().await {
            let pdb = match event {
                Ok(watcher::Event::InitDone) => {
                    if let Some(listed) = listed.take() {
                        let _ = listed.send(());
                    }
                    continue;
                }
                Ok(watcher::Event::Apply(pdb) | watcher::Event::InitApply(pdb)) => pdb,
                _ => continue,
            };
            let recorded = pdb.status.and_then(|s| s.disrupted_pods);
            if recorded.is_some_and(|pods| !pods.is_empty()) {
                return;
            }
        }
    });
    // The drain starts only once the watch has listed, so that no status write is missed.
    let _ = is_listed.await;
    task
}

/// What `kubectl drain` did: whether it finished, how often it was refused for each pod,
/// how long it took, and what it printed.
#[derive(Debug)]
struct Drain {
    completed: bool,
    refused: BTreeMap<String, usize>,
    took: Duration,
    output: String,
}

/// Drains `node` with kubectl as an operator would.
async fn drain(cluster: &'static LivingCluster, node: String) -> Drain {
    let plane = cluster.plane;
    let started = Instant::now();
    let output = tokio::process::Command::from(plane.command(living::kubectl(plane)))
        .arg(format!("--kubeconfig={}", plane.kubeconfig.display()))
        .args([
            "drain",
            &node,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            DRAIN_TIMEOUT,
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("kubectl runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Drain {
        completed: output.status.success(),
        refused: refused_pods(&text),
        took: started.elapsed(),
        output: text,
    }
}

/// The pods kubectl drain printed a refusal for: `error when evicting pods/"<pod>" -n "<ns>"
/// (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.`
fn refused_pods(output: &str) -> BTreeMap<String, usize> {
    let mut refused = BTreeMap::new();
    for pod in output
        .lines()
        .filter(|line| line.contains(REFUSED))
        .filter_map(|line| line.split("pods/\"").nth(1)?.split('"').next())
    {
        *refused.entry(pod.to_string()).or_default() += 1;
    }
    refused
}

/// The app a pod name belongs to (`<app>-<replicaset hash>-<suffix>`).
fn app_of(pod: &str) -> &str {
    pod.rsplitn(3, '-').last().unwrap_or(pod)
}

/// How many evictions of each app's pods a drain was refused (kubectl tries again every 5 s,
/// so a budget whose status lags behind its pods costs refusals).
fn refusals_by_app(drain: &Drain) -> BTreeMap<String, usize> {
    let mut by_app = BTreeMap::new();
    for (pod, refusals) in &drain.refused {
        *by_app.entry(app_of(pod).to_string()).or_default() += refusals;
    }
    by_app
}

/// Runs `scenario` for upstream then kcm and asserts both outcomes equal; returns them.
async fn beside_upstream<T, F, Fut>(name: &str, mut scenario: F) -> Option<T>
where
    T: PartialEq + std::fmt::Debug,
    F: FnMut(&'static LivingCluster, Side) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let cluster = living::shared()?;
    let mut outcomes = Vec::new();
    for side in Side::BOTH {
        let _turn = cluster.turn().await;
        let outcome = scenario(cluster, side).await;
        eprintln!("{name} ({}): {outcome:?}", side.name());
        outcomes.push(outcome);
    }
    let kcm = outcomes.pop().expect("kcm's outcome");
    let upstream = outcomes.pop().expect("upstream's outcome");
    assert_eq!(
        kcm, upstream,
        "{name}: kcm (left) and upstream (right) differ"
    );
    Some(kcm)
}

#[derive(Debug, PartialEq)]
struct DrainOutcome {
    completed: bool,
    /// Pods per node index before the drain, per app.
    placement: BTreeMap<String, BTreeMap<String, usize>>,
    refused: BTreeMap<String, usize>,
    /// The fewest healthy pods per app while the drain ran.
    floor: BTreeMap<String, usize>,
    pdbs: BTreeMap<String, Value>,
}

/// Deployments of 6 pods over 3 nodes (2 on each) under the given budgets; drains node 0 and
/// records what happened.
async fn drain_under(
    cluster: &'static LivingCluster,
    side: Side,
    prefix: &str,
    budgets: Vec<(&'static str, Value, i64)>,
) -> DrainOutcome {
    let run = Run::start(cluster, side, prefix, 3).await;
    let five = cluster.five(side);
    for (app, budget, _) in &budgets {
        run.deployment(app, 6).await;
        run.pdb(app, budget.clone()).await;
    }
    let mut placement = BTreeMap::new();
    for (app, _, allowed) in &budgets {
        run.ready(app, 6).await;
        run.pdb_settles(app, 6, *allowed).await;
        placement.insert(app.to_string(), run.placement(app).await);
    }
    let floor = HealthFloor::watch(&run).await;
    let drained = drain(cluster, run.node(0)).await;
    assert!(
        drained.completed,
        "{side:?}: the drain did not complete:\n{}\n{}",
        drained.output,
        five.logs()
    );
    eprintln!("{prefix} ({}): drain took {:?}", side.name(), drained.took);
    let mut pdbs = BTreeMap::new();
    for (app, _, allowed) in &budgets {
        run.ready(app, 6).await;
        pdbs.insert(app.to_string(), run.pdb_settles(app, 6, *allowed).await);
    }
    let outcome = DrainOutcome {
        completed: drained.completed,
        placement,
        refused: refusals_by_app(&drained),
        floor: budgets
            .iter()
            .map(|(app, _, _)| (app.to_string(), floor.floor(app)))
            .collect(),
        pdbs,
    };
    run.finish().await;
    outcome
}

/// `kubectl drain` of a node with two pods of each Deployment: a `minAvailable: 5` budget lets
/// one go at a time, so the second waits until the first's replacement is Ready; the healthy
/// count never drops below 5.
#[tokio::test]
async fn drain_waits_on_a_min_available_budget() {
    let Some(outcome) = beside_upstream("drain min-available", |cluster, side| {
        drain_under(
            cluster,
            side,
            "drain-min",
            vec![("web", json!({ "minAvailable": 5 }), 1)],
        )
    })
    .await
    else {
        return;
    };
    assert_eq!(
        outcome.placement["web"]
            .values()
            .copied()
            .collect::<Vec<_>>(),
        [2, 2, 2]
    );
    assert_eq!(
        outcome.refused["web"], 1,
        "the node's second pod is refused once, until the first one's replacement is Ready"
    );
    assert_eq!(
        outcome.floor["web"], 5,
        "the budget's floor held and was reached"
    );
}

/// The same drain under `maxUnavailable: 1` and `maxUnavailable: 50%` (3 of 6 may go: both
/// of the node's pods leave at once).
#[tokio::test]
async fn drain_waits_on_max_unavailable_budgets_absolute_and_percentage() {
    let Some(outcome) = beside_upstream("drain max-unavailable", |cluster, side| {
        drain_under(
            cluster,
            side,
            "drain-max",
            vec![
                ("one", json!({ "maxUnavailable": 1 }), 1),
                ("half", json!({ "maxUnavailable": "50%" }), 3),
            ],
        )
    })
    .await
    else {
        return;
    };
    assert_eq!(outcome.refused.get("one"), Some(&1));
    assert_eq!(
        outcome.refused.get("half"),
        None,
        "50% lets both pods go at once"
    );
    assert_eq!(outcome.floor["one"], 5);
    assert!(outcome.floor["half"] >= 3, "{outcome:?}");
}

#[derive(Debug, PartialEq)]
struct RolloutOutcome {
    drained: bool,
    rolled_out: bool,
    /// Whether the drain was refused at least once while the rollout held a pod unavailable.
    refused: bool,
    pdb: Value,
}

/// A rolling update of a Deployment under `maxUnavailable: 1` while a drain evicts its pods:
/// the rollout's own unavailable pod uses the budget, so the drain waits for it; both finish
/// and the budget settles as before.
#[tokio::test]
async fn rollout_under_a_pdb_while_a_drain_evicts() {
    let Some(outcome) = beside_upstream("rollout", |cluster, side| async move {
        let run = Run::start(cluster, side, "rollout", 3).await;
        let _five = cluster.five(side);
        run.budgeted("web", 6, json!({ "maxUnavailable": 1 }), 1)
            .await;
        let deployments = run.api::<Deployment>();
        let bump = json!({ "spec": { "template": { "metadata": {
            "annotations": { "living.kcm.dev/revision": "2" } } } } });
        deployments
            .patch("web", &PatchParams::default(), &Patch::Merge(bump))
            .await
            .expect("the rollout starts");
        let drained = drain(cluster, run.node(0)).await;
        let rolled_out = rolled_out(&deployments, "web", 6).await;
        run.ready("web", 6).await;
        let outcome = RolloutOutcome {
            drained: drained.completed,
            rolled_out,
            refused: !drained.refused.is_empty(),
            pdb: run.pdb_settles("web", 6, 1).await,
        };
        run.finish().await;
        outcome
    })
    .await
    else {
        return;
    };
    assert!(outcome.drained && outcome.rolled_out, "{outcome:?}");
    assert!(
        outcome.refused,
        "the rollout's unavailable pod held the drain once"
    );
}

/// Waits until every replica of the Deployment is updated and available.
async fn rolled_out(deployments: &Api<Deployment>, name: &str, replicas: i32) -> bool {
    eventually(
        &format!("Deployment {name} rolled out"),
        DEADLINE,
        || async {
            let Ok(deployment) = deployments.get(name).await else {
                return false;
            };
            let status = deployment.status.unwrap_or_default();
            deployment.metadata.generation == status.observed_generation
                && status.updated_replicas == Some(replicas)
                && status.available_replicas == Some(replicas)
                && status.replicas == Some(replicas)
        },
    )
    .await;
    true
}

/// Flips a running pod's readiness through the simulator's annotation.
async fn set_ready(run: &Run, pod: &str, ready: bool) {
    let value = if ready { Value::Null } else { json!("false") };
    let patch = json!({ "metadata": { "annotations": { kcm_nodesim::READY_ANNOTATION: value } } });
    run.api::<Pod>()
        .patch(pod, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("the readiness annotation");
}

#[derive(Debug, PartialEq)]
struct UnhealthyOutcome {
    pdb: Value,
    /// The not-Ready pod's eviction, then a Ready pod's: Ok or (code, message).
    unhealthy: Result<(), (u16, String)>,
    healthy: Result<(), (u16, String)>,
}

/// `unhealthyPodEvictionPolicy` with a Running pod that is not Ready under a budget that is
/// not healthy (`minAvailable: 3` of 3, one not Ready): `IfHealthyBudget` refuses to evict it,
/// `AlwaysAllow` lets it go; a Ready pod is refused under both.
async fn evict_not_ready(
    cluster: &'static LivingCluster,
    side: Side,
    policy: &str,
) -> UnhealthyOutcome {
    let prefix = format!("evict-{}", policy.to_lowercase());
    let run = Run::start(cluster, side, &prefix, 3).await;
    let _five = cluster.five(side);
    let budget = json!({ "minAvailable": 3, "unhealthyPodEvictionPolicy": policy });
    run.budgeted("web", 3, budget, 0).await;
    let pods = run.pods("web").await;
    let (sick, well) = (pods[0].name_any(), pods[1].name_any());
    set_ready(&run, &sick, false).await;
    let pdb = run.pdb_settles("web", 2, 0).await;
    let outcome = UnhealthyOutcome {
        pdb,
        unhealthy: run.evict(&sick).await,
        healthy: run.evict(&well).await,
    };
    run.finish().await;
    outcome
}

#[tokio::test]
async fn evict_a_running_not_ready_pod_if_healthy_budget_refuses() {
    let Some(outcome) = beside_upstream("IfHealthyBudget", |cluster, side| {
        evict_not_ready(cluster, side, "IfHealthyBudget")
    })
    .await
    else {
        return;
    };
    assert_eq!(outcome.unhealthy, Err((429, REFUSED.to_string())));
    assert_eq!(outcome.healthy, Err((429, REFUSED.to_string())));
    assert_eq!(outcome.pdb["desiredHealthy"], 3);
}

#[tokio::test]
async fn evict_a_running_not_ready_pod_always_allow_lets_it_go() {
    let Some(outcome) = beside_upstream("AlwaysAllow", |cluster, side| {
        evict_not_ready(cluster, side, "AlwaysAllow")
    })
    .await
    else {
        return;
    };
    assert_eq!(outcome.unhealthy, Ok(()));
    assert_eq!(outcome.healthy, Err((429, REFUSED.to_string())));
}

#[derive(Debug, PartialEq)]
struct QuotaOutcome {
    while_running: Value,
    after_jobs: Value,
    after_replacement: Value,
    job_succeeded: Option<i32>,
}

/// A Job's pods run, finish and stop counting in the quota; a ReplicaSet's evicted pod is
/// replaced and its replacement is charged again.
#[tokio::test]
async fn job_pods_finishing_release_the_quota_and_an_evicted_pod_is_charged_again() {
    let Some(outcome) = beside_upstream("job quota", |cluster, side| async move {
        let run = Run::start(cluster, side, "job-quota", 3).await;
        let _five = cluster.five(side);
        run.create::<ResourceQuota>(json!({
            "metadata": { "name": "compute" },
            "spec": { "hard": { "pods": "10", "requests.cpu": "2", "requests.memory": "2Gi",
                                "count/jobs.batch": "5" } }
        }))
        .await;
        let zero = json!({ "count/jobs.batch": "0", "pods": "0", "requests.cpu": "0",
                           "requests.memory": "0" });
        run.quota_used("compute", zero).await;
        let mut template = pod_template("batch", &run.ns, "Never");
        template["metadata"]["annotations"] = json!({ kcm_nodesim::RUN_FOR_ANNOTATION: "4s" });
        template["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("readinessProbe");
        run.create::<Job>(json!({
            "metadata": { "name": "batch" },
            "spec": { "completions": 3, "parallelism": 3, "backoffLimit": 0, "template": template }
        }))
        .await;
        let while_running = run
            .quota_used(
                "compute",
                json!({ "count/jobs.batch": "1", "pods": "3",
                "requests.cpu": "300m", "requests.memory": "192Mi" }),
            )
            .await;
        let jobs = run.api::<Job>();
        let job_succeeded = eventually_value("the Job completes", || async {
            let status = jobs.get("batch").await.ok()?.status?;
            status.completion_time.is_some().then_some(status.succeeded)
        })
        .await;
        let after_jobs = run
            .quota_used(
                "compute",
                json!({ "count/jobs.batch": "1", "pods": "0",
                "requests.cpu": "0", "requests.memory": "0" }),
            )
            .await;
        run.deployment("web", 2).await;
        run.ready("web", 2).await;
        let charged = json!({ "count/jobs.batch": "1", "pods": "2", "requests.cpu": "200m",
                              "requests.memory": "128Mi" });
        run.quota_used("compute", charged.clone()).await;
        let evicted = run.pods("web").await[0].name_any();
        run.evict(&evicted)
            .await
            .expect("no budget: the eviction is allowed");
        eventually("the evicted pod is gone", DEADLINE, || async {
            run.api::<Pod>()
                .get_opt(&evicted)
                .await
                .ok()
                .flatten()
                .is_none()
        })
        .await;
        run.ready("web", 2).await;
        let after_replacement = run.quota_used("compute", charged).await;
        run.finish().await;
        QuotaOutcome {
            while_running,
            after_jobs,
            after_replacement,
            job_succeeded,
        }
    })
    .await
    else {
        return;
    };
    assert_eq!(outcome.job_succeeded, Some(3));
}

/// Polls `check` until it yields a value.
async fn eventually_value<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    kcm_testsupport::eventually_some(what, DEADLINE, check).await
}

#[derive(Debug, PartialEq)]
struct NotReadyOutcome {
    /// The budget once the node's pods are marked not Ready.
    pdb: Value,
    /// Evicting a pod of the silent node.
    eviction: Result<(), (u16, String)>,
}

/// A node stops heartbeating with two of a Deployment's four pods on it: the node lifecycle
/// controller marks it NotReady and its pods not Ready, the budget (`minAvailable: 3`) falls
/// to no disruption, and an eviction of the silent node's pod is refused.
#[tokio::test]
async fn evict_from_a_node_gone_not_ready_under_a_pdb() {
    let Some(outcome) = beside_upstream("node not ready", |cluster, side| async move {
        let run = Run::start(cluster, side, "not-ready", 2).await;
        let _five = cluster.five(side);
        run.budgeted("web", 4, json!({ "minAvailable": 3 }), 1)
            .await;
        let silent = run.node(1);
        run.nodes
            .stop_node(&silent)
            .await
            .expect("a node of this run");
        let nodes: Api<Node> = Api::all(run.client.clone());
        eventually(&format!("{silent} turns NotReady"), DEADLINE, || async {
            nodes.get(&silent).await.ok().is_some_and(|node| {
                node.status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status != "True")
            })
        })
        .await;
        let pdb = run.pdb_settles("web", 2, 0).await;
        let on_silent = run
            .pods("web")
            .await
            .into_iter()
            .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&silent))
            .expect("a pod on the silent node");
        let outcome = NotReadyOutcome {
            pdb,
            eviction: run.evict(&on_silent.name_any()).await,
        };
        run.finish().await;
        outcome
    })
    .await
    else {
        return;
    };
    assert_eq!(outcome.eviction, Err((429, REFUSED.to_string())));
    assert_eq!(outcome.pdb["expectedPods"], 4);
}

#[derive(Debug, PartialEq)]
struct NamespaceOutcome {
    /// Whether the namespace and everything in it went away.
    gone: bool,
    evicted: Result<(), (u16, String)>,
}

/// A namespace with a quota, a budget, a claim template with a pod's claim made from it, and a
/// running Deployment is deleted after one eviction: it goes, and the five controllers hold
/// nothing back (no finalizer of theirs, no write that recreates an object).
#[tokio::test]
async fn evict_then_delete_a_namespace_with_quotas_pdbs_and_claims() {
    let Some(outcome) = beside_upstream("namespace deletion", |cluster, side| async move {
        let run = Run::start(cluster, side, "ns-delete", 3).await;
        let _five = cluster.five(side);
        run.create::<ResourceQuota>(json!({
            "metadata": { "name": "compute" }, "spec": { "hard": { "pods": "10" } }
        }))
        .await;
        run.deployment("web", 3).await;
        run.pdb("web", json!({ "maxUnavailable": 1 })).await;
        let templates: Api<k8s_openapi::api::resource::v1::ResourceClaimTemplate> = run.api();
        let template = json!({ "metadata": { "name": "gpu" }, "spec": { "spec": { "devices": {
            "requests": [{ "name": "gpu", "exactly": { "deviceClassName": "gpu.example.com" } }]
        } } } });
        templates
            .create(
                &PostParams::default(),
                &serde_json::from_value(template).unwrap(),
            )
            .await
            .expect("a claim template");
        run.create::<Pod>(json!({
            "metadata": { "name": "trainer" },
            "spec": {
                "nodeSelector": { POOL: run.ns },
                "resourceClaims": [{ "name": "gpu", "resourceClaimTemplateName": "gpu" }],
                "containers": [{ "name": "c", "image": "registry.k8s.io/pause:3.10",
                                 "resources": { "claims": [{ "name": "gpu" }] } }],
            }
        }))
        .await;
        let claims: Api<k8s_openapi::api::resource::v1::ResourceClaim> = run.api();
        eventually(
            "the pod's claim is made from its template",
            DEADLINE,
            || async {
                claims
                    .list(&ListParams::default())
                    .await
                    .is_ok_and(|l| l.items.len() == 1)
            },
        )
        .await;
        run.ready("web", 3).await;
        run.pdb_settles("web", 3, 1).await;
        let evicted = run.evict(&run.pods("web").await[0].name_any()).await;
        let namespaces: Api<Namespace> = Api::all(run.client.clone());
        namespaces
            .delete(&run.ns, &DeleteParams::default())
            .await
            .expect("the namespace deletion starts");
        let gone = eventually_value("the namespace is gone", || async {
            namespaces
                .get_opt(&run.ns)
                .await
                .ok()?
                .is_none()
                .then_some(true)
        })
        .await;
        run.finish().await;
        NamespaceOutcome { gone, evicted }
    })
    .await
    else {
        return;
    };
    assert!(outcome.gone);
    assert_eq!(outcome.evicted, Ok(()));
}

#[derive(Debug, PartialEq)]
struct FailoverOutcome {
    completed: bool,
    refused: BTreeMap<String, usize>,
    floor: usize,
    pdb: Value,
}

/// A drain under `minAvailable: 5` while the five controllers' leader is killed after the
/// first eviction: the standby takes the Lease and keeps the budget's status, so no eviction
/// goes past the budget and the drain completes.
#[tokio::test]
async fn drain_completes_while_the_leader_is_killed_and_the_standby_takes_over() {
    let Some(outcome) = beside_upstream("failover drain", |cluster, side| async move {
        let run = Run::start(cluster, side, "failover", 3).await;
        let lease = format!("{}-leader", run.ns);
        let mut five = cluster.elected(side, &lease);
        let leases: Api<Lease> = Api::namespaced(run.client.clone(), "kube-system");
        let holder = eventually_value("the first replica leads", || async {
            leases.get_opt(&lease).await.ok()??.spec?.holder_identity
        })
        .await;
        five.add_replica();
        run.budgeted("web", 6, json!({ "minAvailable": 5 }), 1)
            .await;
        let floor = HealthFloor::watch(&run).await;
        let evicted = first_eviction_recorded(&run, "web").await;
        let draining = tokio::spawn(drain(cluster, run.node(0)));
        tokio::time::timeout(DEADLINE, evicted)
            .await
            .expect("the first eviction is recorded")
            .expect("the PDB watch");
        five.kill(0);
        let drained = draining.await.expect("the drain task");
        assert!(drained.completed, "{}\n{}", drained.output, five.logs());
        let next = leases
            .get(&lease)
            .await
            .ok()
            .and_then(|l| l.spec?.holder_identity);
        assert!(
            next.is_some() && next != Some(holder),
            "the standby took the Lease: {next:?}"
        );
        let outcome = FailoverOutcome {
            completed: drained.completed,
            refused: refusals_by_app(&drained),
            floor: floor.floor("web"),
            pdb: run.pdb_settles("web", 6, 1).await,
        };
        run.finish().await;
        outcome
    })
    .await
    else {
        return;
    };
    assert_eq!(outcome.floor, 5, "no eviction past the budget");
    assert!(outcome.refused.get("web") >= Some(&1), "{outcome:?}");
}

/// Upstream's own e2e specs for the five controllers (deploy/e2e/upstream-specs.sh) on the
/// living cluster with kcm in place of upstream's five. Needs an `e2e.test` of v1.36, named by
/// `KCM_E2E_TEST`; ignored by default (it runs for about half an hour):
/// `KCM_E2E_TEST=/path/to/e2e.test cargo test --test living -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "needs KCM_E2E_TEST (an e2e.test of v1.36) and half an hour"]
async fn upstream_e2e_specs_pass_with_kcm() {
    let e2e = std::env::var("KCM_E2E_TEST").expect("KCM_E2E_TEST names an e2e.test of v1.36");
    let Some(cluster) = living::shared() else {
        return;
    };
    let _turn = cluster.turn().await;
    let client = cluster.plane.client().await;
    let config = kcm_nodesim::Config {
        nodes: 3,
        node_prefix: "e2e-".to_string(),
        schedule: false,
        lease_renew: LEASE_RENEW,
        ..kcm_nodesim::Config::default()
    };
    let nodes = kcm_nodesim::Simulator::start(client, config)
        .await
        .expect("the simulated nodes register");
    // The e2e framework starts from the `kubernetes` Service, which kube-apiserver makes a
    // little after it serves.
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(cluster.plane.client().await, "default");
    eventually("Service default/kubernetes", DEADLINE, || async {
        services
            .get_opt("kubernetes")
            .await
            .ok()
            .flatten()
            .is_some()
    })
    .await;
    let five = cluster.five(Side::Kcm);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/e2e/upstream-specs.sh");
    let status = tokio::process::Command::from(cluster.plane.command(script))
        .arg(&e2e)
        .arg(&cluster.plane.kubeconfig)
        .stdin(std::process::Stdio::null())
        .status()
        .await
        .expect("the e2e script runs");
    assert!(
        status.success(),
        "upstream's e2e specs failed with kcm:\n{}",
        five.logs()
    );
    nodes.shutdown().await;
}
