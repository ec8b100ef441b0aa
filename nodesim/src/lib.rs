//! kcm-nodesim: the kubelets of N nodes (and, unless a kube-scheduler runs, a simple
//! scheduler), played against any Kubernetes API server, kube-testserver or kube-apiserver, so
//! that pods run, turn Ready, finish and terminate: what drains, evictions, rollouts and Jobs
//! need from a cluster.
//!
//! What it models, as the kubelet does it:
//! - Nodes registered with capacity, labels and taints; the Ready condition (and the pressure
//!   conditions) posted at registration and every [`Config::status_report`]; node Leases in
//!   `kube-node-lease` renewed every [`Config::lease_renew`], so upstream's node lifecycle
//!   controller sees them alive. The `node.kubernetes.io/not-ready` taint (added by the API
//!   server's admission on create) is lifted once the node is Ready, where no node lifecycle
//!   controller does it.
//! - Bound pods of its nodes started: Running, with IPs from the node's /24, container
//!   statuses and conditions written through `pods/status`; Ready after the largest readiness
//!   probe `initialDelaySeconds`, never while a probe cannot succeed (an exec probe running
//!   `false`) or [`READY_ANNOTATION`] says `"false"`, and only when every readiness gate's
//!   condition is True.
//! - Pods of `restartPolicy` Never or OnFailure finished after [`RUN_FOR_ANNOTATION`]'s
//!   duration, Succeeded or (with a non-zero [`EXIT_CODE_ANNOTATION`]) Failed.
//! - Deleted pods stopped after their grace period or [`Config::shutdown`], whichever is
//!   shorter (most programs exit soon after SIGTERM), then removed with grace 0 and a UID
//!   precondition, as the kubelet's status manager does.
//! - A node stopped on command ([`Simulator::stop_node`]) as a kubelet that died: no more
//!   heartbeats, Lease renewals or pod updates.
//!
//! Not modelled: images, volumes, container restarts (a failing OnFailure pod is Failed),
//! liveness and startup probes, resource pressure and eviction by the kubelet, static pods, and
//! the scheduler's affinity, spreading and preemption (the built-in scheduler only checks
//! requests, nodeSelector, cordons and taints; run kube-scheduler for the rest).

mod node;
mod pod;
mod schedule;
mod worker;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
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

/// Whether a failed request may succeed if sent again: any failure but the API server's
/// final answers (not found, conflict, invalid, forbidden, bad request).
pub(crate) fn is_transient(e: &kube::Error) -> bool {
    !matches!(e, kube::Error::Api(s) if matches!(s.code, 400 | 401 | 403 | 404 | 409 | 422))
}

/// State shared by the simulator's tasks.
pub(crate) struct Shared {
    pub client: Client,
    pub config: Config,
    /// Our nodes by name: whether its kubelet is alive.
    pub alive: Mutex<BTreeMap<String, bool>>,
}

impl Shared {
    pub fn is_alive(&self, node: &str) -> Option<bool> {
        self.lock_alive().get(node).copied()
    }

    pub fn lock_alive(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, bool>> {
        self.alive.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running simulator: its nodes heartbeat and its pods run until [`Simulator::shutdown`]
/// (or drop).
pub struct Simulator {
    shared: Arc<Shared>,
    work: mpsc::UnboundedSender<worker::Work>,
    tasks: Vec<JoinHandle<()>>,
}

impl Simulator {
    /// Registers the nodes (reusing ones that exist), posts them Ready, and starts their
    /// kubelets (and the scheduler, when [`Config::schedule`]).
    pub async fn start(client: Client, config: Config) -> Result<Self, Error> {
        let capacity = node::Capacity::of(&config)?;
        let names: Vec<String> = (0..config.nodes).map(|i| config.node_name(i)).collect();
        let shared = Arc::new(Shared {
            client,
            alive: Mutex::new(names.iter().map(|n| (n.clone(), true)).collect()),
            config,
        });
        node::ensure_lease_namespace(&shared.client).await;
        for (index, name) in names.iter().enumerate() {
            node::register(&shared, &capacity, index, name).await?;
        }
        let (work, queue) = mpsc::unbounded_channel();
        let mut tasks = vec![tokio::spawn(node::heartbeat(shared.clone(), capacity))];
        tasks.extend(worker::spawn(shared.clone(), work.clone(), queue));
        tracing::info!(nodes = names.len(), "nodes registered");
        Ok(Self {
            shared,
            work,
            tasks,
        })
    }

    /// The simulated nodes' names.
    pub fn nodes(&self) -> Vec<String> {
        self.shared.lock_alive().keys().cloned().collect()
    }

    /// Stops node `name`'s kubelet: no more heartbeats, Lease renewals or pod updates. Upstream's
    /// node lifecycle controller then turns it NotReady.
    pub async fn stop_node(&self, name: &str) -> Result<(), Error> {
        self.set_alive(name, false)
    }

    /// Starts node `name`'s kubelet again: it posts Ready and takes up its pods.
    pub async fn start_node(&self, name: &str) -> Result<(), Error> {
        self.set_alive(name, true)?;
        node::post_status(
            &self.shared,
            name,
            &node::Capacity::of(&self.shared.config)?,
        )
        .await;
        let _ = self.work.send(worker::Work::NodeStarted(name.to_string()));
        Ok(())
    }

    fn set_alive(&self, name: &str, alive: bool) -> Result<(), Error> {
        match self.shared.lock_alive().get_mut(name) {
            Some(state) => {
                *state = alive;
                Ok(())
            }
            None => Err(Error::UnknownNode(name.to_string())),
        }
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
