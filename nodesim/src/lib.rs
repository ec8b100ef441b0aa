//! kcm-nodesim: the kubelets of N nodes (and, unless a kube-scheduler runs, a simple
//! scheduler), played against any Kubernetes API server, kube-testserver or kube-apiserver, so
//! that pods run, turn Ready, finish and terminate: what drains, evictions, rollouts and Jobs
//! need from a cluster, without a container runtime.
//!
//! What it models, as the kubelet (v1.36) does it:
//! - Nodes registered as the kubelet registers them: hostname, os and arch labels (and
//!   [`Config::labels`]), [`Config::taints`], capacity and allocatable (cpu, memory, pods,
//!   ephemeral-storage), addresses, nodeInfo, and the conditions, first NotReady (the runtime
//!   not checked yet), then Ready with MemoryPressure, DiskPressure and PIDPressure False; the
//!   status posted again every [`Config::status_report`] and at once when it changes. Node
//!   Leases in `kube-node-lease` of [`Config::lease_duration`], renewed every
//!   [`Config::lease_renew`], so upstream's node lifecycle controller can judge the nodes.
//!   The `node.kubernetes.io/not-ready:NoSchedule` taint that the API server's admission puts
//!   on new nodes is lifted once the node is Ready, with a resourceVersion precondition, so
//!   this is safe beside a node lifecycle controller that lifts it too.
//! - Pods bound to its nodes started: Running, with the node's IP and a pod IP from the
//!   node's /24, container (and init container) statuses and the conditions
//!   PodReadyToStartContainers, Initialized, ContainersReady, Ready and PodScheduled, written
//!   through `pods/status`. Containers turn ready after the largest readiness probe
//!   `initialDelaySeconds` (one without a probe at once); never while a probe cannot succeed
//!   (an exec probe whose command is `false`) or [`READY_ANNOTATION`] says `"false"`; the pod
//!   is Ready only when every readiness gate's condition is True as well.
//! - Pods of `restartPolicy` Never or OnFailure finished after [`RUN_FOR_ANNOTATION`]'s
//!   duration: Succeeded, or Failed with a non-zero [`EXIT_CODE_ANNOTATION`].
//! - Deleted pods stopped after their grace period or [`Config::shutdown`], whichever is
//!   shorter (most programs exit soon after SIGTERM): their containers terminated in status
//!   (exit code 0 for `restartPolicy` Always, a server shutting down cleanly; 143, killed by
//!   SIGTERM, for the others, a batch step cut short), then the pod deleted with grace 0 and
//!   a UID precondition, as the kubelet's status manager does.
//! - A node stopped on command ([`Simulator::stop_node`]) as a kubelet that died: no more
//!   heartbeats, Lease renewals or pod updates, its pods left as they are until
//!   [`Simulator::start_node`]; or reported NotReady while alive ([`Simulator::set_node_ready`]).
//! - With [`Config::schedule`], the default scheduler for its nodes: Pending pods (no node,
//!   `schedulerName` default-scheduler or none, no scheduling gates, not deleted) bound
//!   through `pods/binding` to the least allocated node that fits: requests (sidecars and init
//!   containers counted as upstream counts them, pod-level requests and overhead) against
//!   allocatable less the requests of the node's non-terminal pods, the pod count, the
//!   nodeSelector, cordons (`spec.unschedulable`), NoSchedule and NoExecute taints against the
//!   pod's tolerations, and the node's Ready condition. A pod that fits nowhere stays Pending
//!   with PodScheduled False, reason Unschedulable, and the scheduler's message.
//!
//! The design keeps it cheap at 10 000 pods: one watch of pods and one of nodes (kube-rs
//! reflectors); one task owns every pod's state, wakes each pod by one timer in a delay
//! queue, and starts its writes with a bounded number in flight
//! ([`Config::writes_in_flight`]), one at a time per pod. Failed writes that may succeed later
//! (5xx, 429, lost connections) are retried; none is fatal.
//!
//! Not modelled: images, volumes, container restarts (a failing OnFailure pod is Failed),
//! liveness and startup probes, probe periods and failure thresholds, resource pressure, the
//! kubelet's admission (a pod bound where it does not fit still runs) and its evictions,
//! static pods, and the scheduler's affinity, spreading, priorities and preemption (run
//! kube-scheduler for those, with [`Config::schedule`] off).

mod ipam;
mod node;
mod pod;
mod schedule;
mod worker;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use kube::Client;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use pod::parse_duration;

/// `"false"` keeps a Running pod not Ready (its readiness probe fails); remove it, or set any
/// other value, and the pod turns Ready again.
pub const READY_ANNOTATION: &str = "nodesim.kcm.dev/ready";
/// How long the containers of a pod with `restartPolicy` Never or OnFailure run before they
/// exit, as a Go duration (`"5s"`, `"1m30s"`, `"500ms"`).
pub const RUN_FOR_ANNOTATION: &str = "nodesim.kcm.dev/run-for";
/// The exit code the containers end with after [`RUN_FOR_ANNOTATION`] (default 0): non-zero
/// makes the pod Failed.
pub const EXIT_CODE_ANNOTATION: &str = "nodesim.kcm.dev/exit-code";

/// The kubelet version nodes report.
pub const KUBELET_VERSION: &str = "v1.36.2";

/// What to simulate.
#[derive(Debug, Clone)]
pub struct Config {
    /// How many nodes, named `<node_prefix><index>` from 0.
    pub nodes: usize,
    pub node_prefix: String,
    /// Each node's capacity (and allocatable): CPU, memory and pods.
    pub cpu: String,
    pub memory: String,
    pub max_pods: u32,
    /// Labels every node gets beside `kubernetes.io/hostname`, `os` and `arch`.
    pub labels: BTreeMap<String, String>,
    /// Taints every node registers with (the kubelet's `--register-with-taints`).
    pub taints: Vec<Taint>,
    /// Bind Pending pods to these nodes; off where a kube-scheduler runs.
    pub schedule: bool,
    /// The node Leases' duration and how often they are renewed (the kubelet: 40 s, a quarter).
    pub lease_duration: Duration,
    pub lease_renew: Duration,
    /// How often the node status is posted though nothing changed (the kubelet: 5 min).
    pub status_report: Duration,
    /// How long a container takes to exit after SIGTERM.
    pub shutdown: Duration,
    /// How soon a write that failed for a passing reason is tried again.
    pub retry: Duration,
    /// How many pod writes (status, binding, deletion) may be under way at once.
    pub writes_in_flight: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            nodes: 3,
            node_prefix: "sim-".into(),
            cpu: "8".into(),
            memory: "32Gi".into(),
            max_pods: 110,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            schedule: true,
            lease_duration: Duration::from_secs(40),
            lease_renew: Duration::from_secs(10),
            status_report: Duration::from_secs(60),
            shutdown: Duration::from_secs(1),
            retry: Duration::from_secs(1),
            writes_in_flight: 16,
        }
    }
}

impl Config {
    /// The name of node `index`.
    pub fn node_name(&self, index: usize) -> String {
        format!("{}{index}", self.node_prefix)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("registering node {node}: {source}")]
    Register { node: String, source: kube::Error },
    #[error("node capacity {field}={value}: {reason}")]
    Capacity {
        field: &'static str,
        value: String,
        reason: String,
    },
    #[error("no node {0} in this simulator")]
    UnknownNode(String),
}

/// Whether a failed request may succeed if sent again: a server error, throttling, a timeout,
/// or no answer at all. Conflicts are judged where they can happen (a resourceVersion
/// precondition is retried, a UID precondition or an existing binding is final).
pub(crate) fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code >= 500 || s.code == 429 || s.code == 408,
        _ => true,
    }
}

/// `at` as the API's `Time` (RFC 3339 in whole seconds).
pub(crate) fn timestamp(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Whether the API server answered `code`.
pub(crate) fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// One simulated node's kubelet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeState {
    /// Its index, which picks its addresses.
    pub index: usize,
    /// Whether the kubelet runs.
    pub alive: bool,
    /// Whether it reports Ready while it runs.
    pub ready: bool,
}

/// State shared by the simulator's tasks.
pub(crate) struct Shared {
    pub client: Client,
    pub config: Config,
    pub capacity: node::Capacity,
    pub nodes: Mutex<BTreeMap<String, NodeState>>,
    /// Held by the heartbeat while it renews and reports, so that a node stopped meanwhile
    /// can wait for a renewal already under way.
    pub heartbeat: tokio::sync::Mutex<()>,
}

impl Shared {
    pub fn lock_nodes(&self) -> MutexGuard<'_, BTreeMap<String, NodeState>> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn node(&self, name: &str) -> Option<NodeState> {
        self.lock_nodes().get(name).copied()
    }

    /// Our node `name` when its kubelet runs.
    pub fn alive(&self, name: &str) -> Option<NodeState> {
        self.node(name).filter(|n| n.alive)
    }
}

/// A running simulator: its nodes heartbeat and its pods run until [`Simulator::shutdown`]
/// (or drop).
pub struct Simulator {
    shared: Arc<Shared>,
    work: mpsc::UnboundedSender<worker::Command>,
    tasks: Vec<JoinHandle<()>>,
}

impl Simulator {
    /// Registers the nodes (reusing ones that exist) and posts them Ready; returns once every
    /// node is registered, Ready and holds its Lease, with the kubelets (and the scheduler,
    /// when [`Config::schedule`]) started.
    pub async fn start(client: Client, config: Config) -> Result<Self, Error> {
        let capacity = node::Capacity::of(&config)?;
        let names: Vec<String> = (0..config.nodes).map(|i| config.node_name(i)).collect();
        let states = names.iter().enumerate().map(|(index, name)| {
            let state = NodeState {
                index,
                alive: true,
                ready: true,
            };
            (name.clone(), state)
        });
        let shared = Arc::new(Shared {
            client,
            capacity,
            nodes: Mutex::new(states.collect()),
            heartbeat: tokio::sync::Mutex::new(()),
            config,
        });
        node::ensure_lease_namespace(&shared.client).await;
        for (index, name) in names.iter().enumerate() {
            node::register(&shared, index, name).await?;
        }
        let (work, commands) = mpsc::unbounded_channel();
        let tasks = vec![
            tokio::spawn(node::heartbeat(shared.clone())),
            tokio::spawn(worker::run(shared.clone(), commands)),
        ];
        tracing::info!(nodes = names.len(), "nodes registered");
        Ok(Self {
            shared,
            work,
            tasks,
        })
    }

    /// The simulated nodes' names.
    pub fn nodes(&self) -> Vec<String> {
        self.shared.lock_nodes().keys().cloned().collect()
    }

    /// Stops node `name`'s kubelet: no more heartbeats, Lease renewals or pod updates (returns
    /// once a renewal under way has ended). Upstream's node lifecycle controller then turns it
    /// NotReady.
    pub async fn stop_node(&self, name: &str) -> Result<(), Error> {
        self.update(name, |state| state.alive = false)?;
        drop(self.shared.heartbeat.lock().await);
        Ok(())
    }

    /// Starts node `name`'s kubelet again: it posts its status, renews its Lease and takes up
    /// its pods.
    pub async fn start_node(&self, name: &str) -> Result<(), Error> {
        let state = self.update(name, |state| state.alive = true)?;
        node::report(&self.shared, name, state.ready).await;
        node::renew(&self.shared, name).await;
        let _ = self
            .work
            .send(worker::Command::NodeStarted(name.to_string()));
        Ok(())
    }

    /// Makes node `name` report Ready (`true`) or NotReady (`false`, as a kubelet whose
    /// container runtime network is down) while its kubelet runs; its Lease is renewed either
    /// way and its pods keep running. Posted at once (when the kubelet runs).
    pub async fn set_node_ready(&self, name: &str, ready: bool) -> Result<(), Error> {
        let state = self.update(name, |state| state.ready = ready)?;
        if state.alive {
            node::report(&self.shared, name, ready).await;
            let _ = self.work.send(worker::Command::NodeChanged);
        }
        Ok(())
    }

    fn update(&self, name: &str, change: impl FnOnce(&mut NodeState)) -> Result<NodeState, Error> {
        let mut nodes = self.shared.lock_nodes();
        let state = nodes
            .get_mut(name)
            .ok_or_else(|| Error::UnknownNode(name.to_string()))?;
        change(state);
        Ok(*state)
    }

    /// Stops every task; the nodes and pods stay as they are (kubelets gone).
    pub async fn shutdown(mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
