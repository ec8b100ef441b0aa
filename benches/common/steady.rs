//! Steady churn on the real control plane, and the lag an operator feels: how long after a pod
//! turns Ready (or not) its PDB says so, and how long after a pod is gone its quota gives the
//! room back.
//!
//! One change a tick, each in the next namespace in turn, so that a namespace has at most one
//! change in flight (at 10 changes a second and 1 000 namespaces, each is changed every 100 s).
//! A namespace's changes cycle through: a pod turns not Ready (or Ready again), a pod is deleted,
//! the pod is created again; each namespace starts a third of the cycle after the one before,
//! so every pass over the namespaces makes all three kinds (10 minutes at 10 a second over 3 000
//! namespaces is two passes). A change is awaited on the PDB (currentHealthy, disruptionsAllowed,
//! expectedPods) for all three and on the quota (`status.used`) for the deletion; a creation is
//! charged by the API server's quota admission, not by the controller, so no quota lag is taken
//! there. A lag runs from the change's request to the first watch event showing the status
//! right for the model after the change; the bench's own watches see both managers' writes the
//! same way.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::real::create_pod;
use super::world::{Model, PodModel, ns_index, ns_name, pod_json, secs};

/// How long the bench waits, after the last change, for the statuses still awaited.
const SETTLE: Duration = Duration::from_secs(60);

/// What one namespace awaits: since when, for each status (`None`: nothing), and after
/// which kind of change (an index into [`CHANGES`]).
#[derive(Clone, Copy, Default)]
struct Awaited {
    pdb: Option<Instant>,
    quota: Option<Instant>,
    change: usize,
}

/// The kinds of change, as the PDB lags are broken down.
pub const CHANGES: [&str; 3] = ["a readiness flip", "a deletion", "a creation"];

/// The model, what each namespace awaits and the lags measured, shared by the churn and the
/// two watches.
struct Shared {
    model: Model,
    awaited: Vec<Awaited>,
    lags: Lags,
}

/// The lags of one steady churn.
#[derive(Default)]
pub struct Lags {
    pub pdb: Vec<Duration>,
    /// The PDB lags by kind of change, as [`CHANGES`] names them.
    pub pdb_by_change: [Vec<Duration>; 3],
    pub quota: Vec<Duration>,
    /// Changes made.
    pub changes: usize,
    /// Ticks skipped because their namespace still awaited its last change.
    pub skipped: usize,
    /// Statuses never right within the settling time after the last change.
    pub missed_pdb: usize,
    pub missed_quota: usize,
}

impl Lags {
    /// `p50 / p99 / max (n)` of `lags`.
    pub fn summary(lags: &[Duration]) -> String {
        if lags.is_empty() {
            return "none".to_string();
        }
        let mut sorted = lags.to_vec();
        sorted.sort();
        let at =
            |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
        format!(
            "{} / {} / {} ms ({})",
            at(0.50).as_millis(),
            at(0.99).as_millis(),
            sorted[sorted.len() - 1].as_millis(),
            sorted.len()
        )
    }
}

/// Follows one kind's watch, taking a lag whenever an awaited status is first right.
async fn watch_lags<K>(
    client: Client,
    shared: Arc<Mutex<Shared>>,
    awaited: fn(&mut Awaited) -> &mut Option<Instant>,
    right: fn(&Model, usize, &Value) -> bool,
    record: fn(&mut Lags, &Awaited, Duration),
) where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + 'static,
{
    let objects = watcher(Api::<K>::all(client), watcher::Config::default())
        .default_backoff()
        .applied_objects();
    let mut objects = std::pin::pin!(objects);
    while let Some(object) = objects.next().await {
        let object = match object {
            Ok(object) => object,
            Err(e) => {
                println!("(steady churn watch error, retrying: {e})");
                continue;
            }
        };
        let Some(n) = object.namespace().as_deref().and_then(ns_index) else {
            continue;
        };
        let seen = Instant::now();
        let value = serde_json::to_value(&object).unwrap_or_default();
        let mut shared = shared.lock().unwrap_or_else(PoisonError::into_inner);
        let shared = &mut *shared;
        let Some(since) = *awaited(&mut shared.awaited[n]) else {
            continue;
        };
        if right(&shared.model, n, &value) {
            let lag = seen.saturating_duration_since(since);
            record(&mut shared.lags, &shared.awaited[n], lag);
            *awaited(&mut shared.awaited[n]) = None;
        }
    }
}

/// What a namespace's next change is.
enum Change {
    Readiness(usize),
    Delete,
    Create,
}

impl Change {
    /// Its index into [`CHANGES`].
    fn index(&self) -> usize {
        match self {
            Change::Readiness(_) => 0,
            Change::Delete => 1,
            Change::Create => 2,
        }
    }
}

/// Churns `model`'s world at `rate` changes a second for `duration`, then waits for the
/// statuses still awaited; returns the model as the churn left it and the lags.
pub async fn steady_churn(
    client: &Client,
    model: Model,
    rate: f64,
    duration: Duration,
) -> (Model, Lags) {
    let namespaces = model.namespaces.len();
    let shared = Arc::new(Mutex::new(Shared {
        awaited: vec![Awaited::default(); namespaces],
        model,
        lags: Lags::default(),
    }));
    let watches = [
        tokio::spawn(watch_lags::<PodDisruptionBudget>(
            client.clone(),
            shared.clone(),
            |a| &mut a.pdb,
            Model::pdb_right,
            |lags, awaited, lag| {
                lags.pdb.push(lag);
                lags.pdb_by_change[awaited.change].push(lag);
            },
        )),
        tokio::spawn(watch_lags::<ResourceQuota>(
            client.clone(),
            shared.clone(),
            |a| &mut a.quota,
            Model::quota_right,
            |lags, _, lag| lags.quota.push(lag),
        )),
    ];
    // Each namespace's pod taken out by its last deletion, put back by its next change.
    let mut removed: Vec<Option<PodModel>> = vec![None; namespaces];
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let started = Instant::now();
    let mut tick = 0usize;
    while started.elapsed() < duration {
        ticks.tick().await;
        let n = tick % namespaces;
        let visit = tick / namespaces;
        tick += 1;
        let change = match (&removed[n], (visit + n) % 3) {
            (Some(_), _) => Change::Create,
            (None, 1) => Change::Delete,
            (None, _) => Change::Readiness(visit),
        };
        // The model changes and the awaited statuses are set before the request, so that a
        // watch event answering it is never missed.
        let since = Instant::now();
        let (ns, request) = {
            let mut guard = shared.lock().unwrap_or_else(PoisonError::into_inner);
            let state = &mut *guard;
            let awaited = &mut state.awaited[n];
            if awaited.pdb.is_some() || awaited.quota.is_some() {
                state.lags.skipped += 1;
                continue;
            }
            state.lags.changes += 1;
            awaited.pdb = Some(since);
            awaited.change = change.index();
            let ns = ns_name(n);
            let model = &mut state.model;
            let request = match change {
                Change::Readiness(k) => {
                    let j = k % model.namespaces[n].len();
                    let node = model.node_of(n, j);
                    let pod = &mut model.namespaces[n][j];
                    pod.ready = !pod.ready;
                    Request::Status(
                        pod.name.clone(),
                        pod_json(&ns, pod, &node)["status"].clone(),
                    )
                }
                Change::Delete => {
                    awaited.quota = Some(since);
                    let pod = model.namespaces[n].pop().expect("a namespace keeps pods");
                    let name = pod.name.clone();
                    removed[n] = Some(pod);
                    Request::Delete(name)
                }
                Change::Create => {
                    let pod = removed[n].take().expect("a pod to put back");
                    // Where it was: the last of its namespace.
                    let node = model.node_of(n, model.namespaces[n].len());
                    model.namespaces[n].push(pod.clone());
                    Request::Create(pod, node)
                }
            };
            (ns, request)
        };
        request.send(client, &ns).await;
    }
    let churned = started.elapsed();
    let settle_until = Instant::now() + SETTLE;
    loop {
        let waiting = shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .awaited
            .iter()
            .filter(|a| a.pdb.is_some() || a.quota.is_some())
            .count();
        if waiting == 0 || Instant::now() >= settle_until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for watch in watches {
        watch.abort();
        // Awaited, so that the task has dropped its share of the state.
        let _ = watch.await;
    }
    let shared = Arc::into_inner(shared)
        .expect("the watches have ended")
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let mut lags = shared.lags;
    lags.missed_pdb = shared.awaited.iter().filter(|a| a.pdb.is_some()).count();
    lags.missed_quota = shared.awaited.iter().filter(|a| a.quota.is_some()).count();
    println!(
        "steady churn: {} changes in {} ({} ticks skipped)",
        lags.changes,
        secs(churned),
        lags.skipped
    );
    (shared.model, lags)
}

/// One change's request.
enum Request {
    Status(String, Value),
    Delete(String),
    Create(PodModel, String),
}

impl Request {
    async fn send(self, client: &Client, ns: &str) {
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        match self {
            Request::Status(name, status) => {
                pods.patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "status": status })),
                )
                .await
                .unwrap_or_else(|e| panic!("status of {ns}/{name}: {e}"));
            }
            Request::Delete(name) => {
                let now = DeleteParams {
                    grace_period_seconds: Some(0),
                    ..DeleteParams::default()
                };
                pods.delete(&name, &now)
                    .await
                    .unwrap_or_else(|e| panic!("delete {ns}/{name}: {e}"));
            }
            Request::Create(pod, node) => create_pod(client, ns, &pod, &node).await,
        }
    }
}
