//! What kcm's tests and benchmarks share: the real binary as a subprocess, kcm in-process
//! against kube-testserver, raw HTTP, polling; a real control plane ([`envtest`]), the living
//! cluster on it ([`living`]), RBAC fixtures ([`rbac`]), process costs ([`proc`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::rbac::v1::PolicyRule;
use kube_testserver::rbac::allows;

pub mod agent;
pub mod envtest;
pub mod living;
pub mod proc;
pub mod rbac;

pub const DEADLINE: Duration = Duration::from_secs(20);

pub use kube_testserver::testing::{eventually, eventually_some};

/// The kcm binary cargo built for the running test or bench: `CARGO_BIN_EXE_kcm` as cargo
/// sets it when it runs them, else `kcm` in the profile's folder, the parent of the `deps/`
/// folder holding this executable (a test binary run by hand).
pub fn kcm_binary() -> PathBuf {
    std::env::var_os("CARGO_BIN_EXE_kcm")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().expect("the running executable's path");
            exe.parent()
                .and_then(Path::parent)
                .expect("an executable in target/<profile>/deps")
                .join("kcm")
        })
}

/// A file of the repository, by its path from the repository's root (this crate's parent).
pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testsupport/ sits in the repository's root")
        .join(relative)
}

/// A port that was free a moment ago, for kcm's HTTP listener.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A kubeconfig for `http://127.0.0.1:<port>` where nothing listens (yet): the port, the
/// directory that holds the file (removed when dropped), and the file.
pub fn kubeconfig_for_a_closed_port() -> (u16, tempfile::TempDir, std::path::PathBuf) {
    let port = free_port();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("kubeconfig");
    let yaml = kube_testserver::kubeconfig_yaml(&format!("http://127.0.0.1:{port}"));
    std::fs::write(&path, yaml).expect("kubeconfig written");
    (port, dir, path)
}

/// GET on kcm's listener: (status code, body); None when nothing listens yet.
pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let resp = kube_testserver::testing::http_get(([127, 0, 0, 1], port).into(), path).await?;
    Some((resp.status, resp.body))
}

/// A running `kcm` binary, killed when dropped.
pub struct Kcm {
    child: Child,
    pub port: u16,
    /// Where the process's stderr (its log) goes.
    log: tempfile::NamedTempFile,
}

/// Short leader-election timings so tests do not wait out upstream's 15 s.
pub const FAST_LEASE: [&str; 3] = [
    "--leader-elect-lease-duration=2s",
    "--leader-elect-renew-deadline=1500ms",
    "--leader-elect-retry-period=250ms",
];

impl Kcm {
    pub fn start(kubeconfig: &Path, extra: &[&str]) -> Self {
        let log = tempfile::NamedTempFile::new().expect("a log file");
        Self::start_with(Command::new(kcm_binary()), log, kubeconfig, extra)
    }

    /// As [`Kcm::start`], with `command` naming the binary (and e.g. its process group) and
    /// the file its log goes to.
    pub fn start_with(
        mut command: Command,
        log: tempfile::NamedTempFile,
        kubeconfig: &Path,
        extra: &[&str],
    ) -> Self {
        let port = free_port();
        let stderr = log.reopen().expect("log file reopens");
        let child = command
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg(format!("--port={port}"))
            .arg("--bind-address=127.0.0.1")
            .args(extra)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("kcm starts");
        Self { child, port, log }
    }

    /// What the process has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits (polling) for the process to exit; None if it is still running at the deadline.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.port, path).await
    }

    /// The value of one sample line of /metrics, e.g. `leader_election_master_status{name="kcm"}`.
    pub async fn metric(&self, sample: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics").await?;
        body.lines().find_map(|line| {
            line.strip_prefix(sample)
                .and_then(|rest| rest.trim().parse().ok())
        })
    }
}

impl Drop for Kcm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// kcm's real code (`app::run_with_config`) in this process against `server`, stopped by
/// `stop()`; serves HTTP on `port`. The server refuses, as RBAC would, every kcm request
/// that the RBAC table of the selected controllers does not allow, and `stop()` fails the
/// test if there was any: the table is checked against the calls kcm really makes.
pub struct InProcess {
    pub port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), kcm::app::AppError>>>,
    denied: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// What the deployment grants the selected controllers: their roles, their informers' reads,
/// and the leader-election Role in the lease's namespace.
fn granted(settings: &kcm::cli::Settings) -> (Vec<PolicyRule>, Vec<PolicyRule>, String) {
    let gates = &settings.feature_gates;
    let cluster: Vec<PolicyRule> = kcm::controllers::list::CONTROLLERS
        .iter()
        .filter(|e| settings.enabled_controllers.contains(&e.controller))
        .flat_map(|e| [e.rbac_with(gates), e.informs_with(gates)].concat())
        .map(|r| r.policy_rule())
        .collect();
    let (leader, namespace) = match &settings.leader_election {
        Some(le) => (
            kcm::runtime::leader::RBAC
                .iter()
                .map(|r| r.policy_rule())
                .collect(),
            le.resource_namespace.clone(),
        ),
        None => (Vec::new(), String::new()),
    };
    (cluster, leader, namespace)
}

fn authorizer(
    settings: &kcm::cli::Settings,
    denied: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) -> kube_testserver::Authorizer {
    let (cluster, leader, lease_namespace) = granted(settings);
    Box::new(move |info, user_agent| {
        if !user_agent.contains("kcm/") {
            return Ok(());
        }
        let request = info.rbac();
        if allows(&cluster, &request)
            || (info.namespace == lease_namespace && allows(&leader, &request))
        {
            return Ok(());
        }
        let reason = kube_testserver::rbac::forbidden_message(
            "system:serviceaccount:kube-system:kcm",
            &request,
            "",
        );
        denied.lock().unwrap().push(reason.clone());
        Err(reason)
    })
}

impl InProcess {
    pub async fn start(server: &kube_testserver::TestServer, extra: &[&str]) -> Self {
        Self::start_with_clock(server, extra, kcm::runtime::clock::system()).await
    }

    pub async fn start_with_clock(
        server: &kube_testserver::TestServer,
        extra: &[&str],
        clock: kcm::runtime::clock::Clock,
    ) -> Self {
        Self::launch(server, None, extra, clock).await
    }

    /// With `kubeconfig`, as [`InProcess::start_as`]; without, the server's credential-less
    /// kubeconfig and the harness authorizer of the RBAC table.
    async fn launch(
        server: &kube_testserver::TestServer,
        kubeconfig: Option<&Path>,
        extra: &[&str],
        clock: kcm::runtime::clock::Clock,
    ) -> Self {
        let port = free_port();
        let mut args = vec![
            "kcm".to_string(),
            format!("--port={port}"),
            "--bind-address=127.0.0.1".into(),
        ];
        // No lease unless the test asks for leader election explicitly.
        if !extra.iter().any(|a| a.starts_with("--leader-elect")) {
            args.push("--leader-elect=false".into());
        }
        // No client-side throttling unless the test sets the rate.
        if !extra.iter().any(|a| a.starts_with("--kube-api-")) {
            args.push("--kube-api-qps=1000".into());
            args.push("--kube-api-burst=1000".into());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let settings = <kcm::cli::Options as clap::Parser>::try_parse_from(&args)
            .expect("flags parse")
            .validate()
            .expect("flags valid");
        let config = kcm::runtime::connection::client::load_config(Some(
            kubeconfig.unwrap_or(server.kubeconfig_path()),
        ))
        .await
        .expect("kubeconfig");
        let denied = std::sync::Arc::default();
        if kubeconfig.is_none() {
            server.authorize(authorizer(&settings, std::sync::Arc::clone(&denied)));
        }
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(kcm::app::run_with_config(
            settings,
            config,
            "test".into(),
            clock,
            async move {
                let _ = rx.await;
            },
        ));
        Self {
            port,
            stop: Some(tx),
            task: Some(task),
            denied,
        }
    }

    /// kcm authenticated by `kubeconfig` against a server that enforces RBAC from its
    /// stored roles (no harness authorizer): what the server refuses shows in its log.
    pub async fn start_as(
        server: &kube_testserver::TestServer,
        kubeconfig: &Path,
        extra: &[&str],
    ) -> Self {
        Self::launch(
            server,
            Some(kubeconfig),
            extra,
            kcm::runtime::clock::system(),
        )
        .await
    }

    pub async fn metric(&self, sample: &str) -> Option<f64> {
        let (_, body) = http_get(self.port, "/metrics").await?;
        body.lines().find_map(|line| {
            line.strip_prefix(sample)
                .and_then(|rest| rest.trim().parse().ok())
        })
    }

    /// Sends the stop signal and waits for a clean exit.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("kcm task").expect("kcm exits cleanly");
        }
        let denied = self.denied.lock().unwrap().clone();
        assert!(
            denied.is_empty(),
            "kcm made requests its RBAC does not allow:\n{}",
            denied.join("\n")
        );
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
