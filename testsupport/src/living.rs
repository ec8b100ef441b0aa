//! A living cluster on the real control plane: kube-apiserver v1.36 with upstream's
//! kube-scheduler and workload controllers (deployment, replicaset, job, namespace, garbage
//! collector, node lifecycle, pod GC, taint eviction), the kubelets played by `kcm-nodesim`, and
//! the five controllers kcm replaces run by one [`Side`] at a time: upstream's
//! kube-controller-manager or kcm. `kubectl drain` and the eviction API then meet
//! PodDisruptionBudgets as in a cluster where pods run.
//!
//! Scenarios run one side at a time ([`LivingCluster::turn`]): two sets of the five would
//! fight over every status. Each side gets its own namespace and its own simulated nodes, so the
//! second run never sees what the first left behind.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::envtest::{self, ControlPlane};
use crate::{FAST_LEASE, Kcm, kcm_binary};

/// The five controllers' names, as upstream's `--controllers` spells them.
pub const FIVE: &str = "resourcequota-controller,disruption-controller,ttl-controller,\
                        resourceclaim-controller,storageversion-garbage-collector-controller";

/// What upstream's other controller manager runs: the controllers a drain, a rollout and a Job
/// need, the node lifecycle that turns a silent node NotReady, and the `default`
/// ServiceAccounts upstream's e2e framework waits for.
const WORKLOADS: &str = "deployment-controller,replicaset-controller,job-controller,\
                         replicationcontroller-controller,namespace-controller,\
                         serviceaccount-controller,root-ca-certificate-publisher-controller,\
                         garbage-collector-controller,persistentvolumeclaim-protection-controller,\
                         node-lifecycle-controller,pod-garbage-collector-controller,\
                         taint-eviction-controller";

/// A silent node is NotReady after this (upstream's default is 50 s); the simulator renews
/// node Leases every [`LEASE_RENEW`], well inside it.
pub const NODE_GRACE: &str = "--node-monitor-grace-period=8s";
pub const LEASE_RENEW: Duration = Duration::from_secs(2);

/// Binaries the living cluster needs beside etcd and kube-apiserver.
const BINARIES: [&str; 3] = ["kube-controller-manager", "kube-scheduler", "kubectl"];

/// Who runs the five controllers in one run of a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Upstream,
    Kcm,
}

impl Side {
    pub const BOTH: [Side; 2] = [Side::Upstream, Side::Kcm];

    pub fn name(self) -> &'static str {
        match self {
            Side::Upstream => "upstream",
            Side::Kcm => "kcm",
        }
    }
}

/// The control plane with the scheduler and the workload controllers running.
pub struct LivingCluster {
    pub plane: &'static ControlPlane,
    /// kube-scheduler and the workload controller manager; they die with the control plane's
    /// process group.
    processes: Mutex<Vec<(Child, tempfile::NamedTempFile)>>,
    /// One side's run at a time.
    turn: tokio::sync::Mutex<()>,
}

/// The shared living cluster, started by the first caller; None (said once per test, naming
/// what is missing) without the binaries.
pub fn shared() -> Option<&'static LivingCluster> {
    static SHARED: OnceLock<LivingCluster> = OnceLock::new();
    let plane = envtest::shared_with(&BINARIES)?;
    Some(SHARED.get_or_init(|| LivingCluster::start(plane)))
}

impl LivingCluster {
    fn start(plane: &'static ControlPlane) -> Self {
        let kubeconfig = format!("--kubeconfig={}", plane.kubeconfig.display());
        let scheduler = spawn(
            plane,
            "kube-scheduler",
            &[&kubeconfig, "--leader-elect=false", "--secure-port=0"],
        );
        let controllers = format!("--controllers={WORKLOADS}");
        // The CA the kubeconfig trusts, which the publisher copies into every namespace.
        let root_ca = format!(
            "--root-ca-file={}",
            plane.kubeconfig.with_file_name("ca.crt").display()
        );
        let workloads = spawn(
            plane,
            "kube-controller-manager",
            &[
                &kubeconfig,
                &controllers,
                &root_ca,
                "--leader-elect=false",
                "--secure-port=0",
                "--node-monitor-period=1s",
                NODE_GRACE,
            ],
        );
        Self {
            plane,
            processes: Mutex::new(vec![scheduler, workloads]),
            turn: tokio::sync::Mutex::const_new(()),
        }
    }

    /// Holds the cluster for one side's run of a scenario.
    pub async fn turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.turn.lock().await
    }

    /// The logs of the scheduler and the workload controllers, for a failure message.
    pub fn logs(&self) -> String {
        let processes = self.processes.lock().unwrap_or_else(|e| e.into_inner());
        processes
            .iter()
            .map(|(_, log)| tail(&std::fs::read_to_string(log.path()).unwrap_or_default()))
            .collect::<Vec<_>>()
            .join("\n----\n")
    }

    /// The five controllers of `side`, one process without leader election.
    pub fn five(&self, side: Side) -> Five {
        self.five_with(side, vec!["--leader-elect=false".into()])
    }

    /// The five controllers of `side`, leader-elected on Lease `kube-system/<lease>` with
    /// kcm's fast test timings (for both sides); [`Five::add_replica`] starts a standby.
    pub fn elected(&self, side: Side, lease: &str) -> Five {
        let mut args = vec![
            "--leader-elect=true".to_string(),
            format!("--leader-elect-resource-name={lease}"),
        ];
        args.extend(FAST_LEASE.iter().map(|a| a.to_string()));
        self.five_with(side, args)
    }

    fn five_with(&self, side: Side, args: Vec<String>) -> Five {
        let mut five = Five {
            side,
            plane: self.plane,
            args,
            processes: Vec::new(),
        };
        five.add_replica();
        five
    }
}

fn spawn(plane: &ControlPlane, binary: &str, args: &[&str]) -> (Child, tempfile::NamedTempFile) {
    let log = plane.log_file();
    let child = plane
        .command(plane.assets.join(binary))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("the log file reopens"))
        .spawn()
        .unwrap_or_else(|e| panic!("{binary} starts: {e}"));
    (child, log)
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// One process of the five.
enum Process {
    Upstream(Child, tempfile::NamedTempFile),
    Kcm(Kcm),
}

impl Process {
    fn pid(&self) -> u32 {
        match self {
            Process::Upstream(child, _) => child.id(),
            Process::Kcm(kcm) => kcm.pid(),
        }
    }

    fn log(&self) -> String {
        match self {
            Process::Upstream(_, log) => std::fs::read_to_string(log.path()).unwrap_or_default(),
            Process::Kcm(kcm) => kcm.log(),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Process::Upstream(child, _) = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The five controllers of one side, running until dropped.
pub struct Five {
    pub side: Side,
    plane: &'static ControlPlane,
    args: Vec<String>,
    processes: Vec<Process>,
}

impl Five {
    /// Starts one more process with the same arguments (a standby, when leader-elected).
    pub fn add_replica(&mut self) {
        let plane = self.plane;
        let mut args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        args.push("--feature-gates=StorageVersionAPI=true");
        let process = match self.side {
            Side::Upstream => {
                let kubeconfig = format!("--kubeconfig={}", plane.kubeconfig.display());
                let controllers = format!("--controllers={FIVE}");
                args.extend([kubeconfig.as_str(), controllers.as_str(), "--secure-port=0"]);
                let (child, log) = spawn(plane, "kube-controller-manager", &args);
                Process::Upstream(child, log)
            }
            Side::Kcm => Process::Kcm(Kcm::start_with(
                plane.command(kcm_binary()),
                plane.log_file(),
                &plane.kubeconfig,
                &args,
            )),
        };
        self.processes.push(process);
    }

    /// Kills process `index` (start order) with SIGKILL, as a crashed leader.
    pub fn kill(&mut self, index: usize) {
        let pid = self.processes[index].pid();
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -KILL {pid}");
    }

    /// Every process's log, for a failure message.
    pub fn logs(&self) -> String {
        self.processes
            .iter()
            .map(|p| tail(&p.log()))
            .collect::<Vec<_>>()
            .join("\n----\n")
    }
}

/// The kubectl of the control plane's assets.
pub fn kubectl(plane: &ControlPlane) -> PathBuf {
    plane.assets.join("kubectl")
}

impl Five {
    /// The processes' ids in start order, for what they cost (`proc::usage`).
    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().map(Process::pid).collect()
    }
}

/// The label that keeps a run's pods on its own nodes.
pub const POOL: &str = "living.kcm.dev/pool";

/// A namespace `<prefix>-<side>-<random>` and `nodes` simulated nodes `<namespace>-<i>`
/// labelled [`POOL`]`=<namespace>` for it; kube-scheduler binds their pods.
pub async fn pool(
    plane: &ControlPlane,
    client: &kube::Client,
    prefix: &str,
    side: Side,
    nodes: usize,
) -> (String, kcm_nodesim::Simulator) {
    let ns = plane
        .namespace(client, &format!("{prefix}-{}", side.name()))
        .await;
    let config = kcm_nodesim::Config {
        nodes,
        node_prefix: format!("{ns}-"),
        labels: [(POOL.to_string(), ns.clone())].into(),
        schedule: false,
        lease_renew: LEASE_RENEW,
        ..kcm_nodesim::Config::default()
    };
    let simulator = kcm_nodesim::Simulator::start(client.clone(), config)
        .await
        .expect("the simulated nodes register");
    (ns, simulator)
}
