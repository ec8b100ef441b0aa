//! A real control plane for tests and benchmarks, envtest's way: `etcd` and `kube-apiserver`
//! from the folder [`assets`] finds as controller-runtime's envtest does (`KUBEBUILDER_ASSETS`,
//! else setup-envtest's store), on free loopback ports, with RBAC on, every API group served (the alpha ones kcm uses too), the
//! `StorageVersionAPI` gate, a service-account key pair (TokenRequest works), a serving
//! certificate and an admin client certificate (`system:masters`), and a kubeconfig file.
//!
//! Nothing outlives the process that started it, even when a test panics or the process is
//! killed: `unsafe` is forbidden, so no `prctl(PR_SET_PDEATHSIG)` in a `pre_exec`. Instead etcd,
//! kube-apiserver (and whatever [`ControlPlane::command`] starts) share one process group, and a
//! watchdog shell reads a pipe whose only writer is this process: when the pipe closes (this
//! process is gone, however it ended) the watchdog kills the group and removes the temporary
//! directory.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The folder holding `etcd`, `kube-apiserver`, `kube-controller-manager` and `kubectl`.
pub const ASSETS: &str = "KUBEBUILDER_ASSETS";
/// Set (as `.ci/run` does where it finds the binaries), a missing binary fails the test
/// instead of skipping it.
pub const REQUIRE: &str = "KCM_REQUIRE_ENVTEST";
/// The release whose binaries the store lookup takes (its newest patch).
const RELEASE: &str = "1.36.";
/// What every real test needs; [`assets_with`] names the others a test needs beside them.
const CORE_BINARIES: [&str; 2] = ["etcd", "kube-apiserver"];

/// The API server's gates: StorageVersions (storage-version-gc) and the PodGroups of
/// `DRAWorkloadResourceClaims`, whose groups `--runtime-config=api/all=true` serves.
pub const APISERVER_GATES: &str =
    "StorageVersionAPI=true,GenericWorkload=true,DRAWorkloadResourceClaims=true";

/// How long etcd plus kube-apiserver may take to accept writes on a loaded 2-core machine.
const START_DEADLINE: Duration = Duration::from_secs(90);

#[derive(Debug, thiserror::Error)]
pub enum EnvtestError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("certificates: {0}")]
    Pki(#[from] rcgen::Error),
    #[error("{0} exited while starting; its log ends:\n{1}")]
    Exited(&'static str, String),
    #[error(
        "kube-apiserver did not accept writes within {0:?}; last error: {1}; its log ends:\n{2}"
    )]
    NotReady(Duration, String, String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> EnvtestError {
    let what = what.into();
    move |source| EnvtestError::Io { what, source }
}

/// setup-envtest's store (`setup-envtest use 1.36.x` fills it): `$XDG_DATA_HOME`, else
/// `~/.local/share`, then `kubebuilder-envtest/k8s/<version>-<os>-<arch>`.
fn envtest_store() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("kubebuilder-envtest").join("k8s"))
}

/// The newest `1.36.<patch>-linux-amd64` folder of setup-envtest's store.
fn newest_in_store(store: &Path) -> Option<PathBuf> {
    let platform = format!("-{}-{}", std::env::consts::OS, go_arch());
    std::fs::read_dir(store)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version = name.strip_suffix(&platform)?.strip_prefix(RELEASE)?;
            Some((version.parse::<u32>().ok()?, entry.path()))
        })
        .max_by_key(|(patch, _)| *patch)
        .map(|(_, path)| path)
}

/// Go's name of this machine's architecture, as the store's folders carry it.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Where the control plane's binaries are, as controller-runtime finds them: the folder named
/// by `KUBEBUILDER_ASSETS` when set, else the newest v1.36 of setup-envtest's store; with the
/// places looked at, for a message.
pub fn locate() -> Result<PathBuf, String> {
    if let Some(assets) = std::env::var_os(ASSETS).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(assets));
    }
    let store = envtest_store();
    store.as_deref().and_then(newest_in_store).ok_or_else(|| {
        let looked = store.map_or_else(String::new, |s| format!(" nor {}/{RELEASE}*", s.display()));
        format!("{ASSETS} is not set{looked}")
    })
}

/// The binaries folder when it holds etcd, kube-apiserver and `also`; else None after printing
/// which are missing and why the calling test skips, or a panic when `KCM_REQUIRE_ENVTEST` is
/// set.
pub fn assets_with(also: &[&str]) -> Option<PathBuf> {
    let why = match locate() {
        Ok(assets) => {
            let missing: Vec<&str> = CORE_BINARIES
                .iter()
                .chain(also)
                .copied()
                .filter(|binary| !assets.join(binary).is_file())
                .collect();
            if missing.is_empty() {
                return Some(assets);
            }
            format!("{} lacks {}", assets.display(), missing.join(", "))
        }
        Err(not_found) => not_found,
    };
    let why = format!(
        "no real control plane: {why} (get v1.36 with `setup-envtest use 1.36.x`: docs/testing.md)"
    );
    assert!(
        std::env::var_os(REQUIRE).is_none(),
        "{why} ({REQUIRE} is set)"
    );
    let test = std::thread::current().name().unwrap_or("test").to_string();
    // Straight to stderr, past the test harness's capture: a skip is said even when it passes.
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{test} skipped: {why}");
    None
}

/// The binaries folder with etcd and kube-apiserver, as [`assets_with`].
pub fn assets() -> Option<PathBuf> {
    assets_with(&[])
}

/// The control plane shared by the tests of this binary, started by the first caller; None
/// (said once per test) without the binaries. Panics when it cannot start.
pub fn shared() -> Option<&'static ControlPlane> {
    shared_with(&[])
}

/// [`shared`], for a test that also needs `also` (e.g. `kube-controller-manager`) beside
/// etcd and kube-apiserver; None (said once per test, naming what is missing) without them.
pub fn shared_with(also: &[&str]) -> Option<&'static ControlPlane> {
    static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
    let assets = assets_with(also)?;
    match SHARED.get_or_init(|| ControlPlane::start(&assets).map_err(|e| e.to_string())) {
        Ok(plane) => Some(plane),
        Err(e) => panic!("the real control plane did not start: {e}"),
    }
}

/// etcd and kube-apiserver, running. Dropping it kills them and removes its files (a value
/// in a static is never dropped: the watchdog does it when the process exits).
pub struct ControlPlane {
    pub assets: PathBuf,
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The admin's kubeconfig (client certificate in `system:masters`).
    pub kubeconfig: PathBuf,
    pub apiserver_pid: u32,
    pub etcd_pid: u32,
    /// The process group of etcd, kube-apiserver and [`ControlPlane::command`]'s processes.
    pub process_group: u32,
    /// The service-account issuer, as tokens carry it.
    pub issuer: String,
    dir: tempfile::TempDir,
    /// The watchdog's pipe: it fires when this closes.
    watchdog: Mutex<Option<ChildStdin>>,
    /// The CA kube-apiserver trusts for client certificates.
    ca: Mutex<Issuer<'static, KeyPair>>,
}

fn free_port() -> Result<u16, EnvtestError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(io("a free port"))
}

/// The last lines of a log file, for an error message.
fn tail(path: &Path) -> String {
    let mut text = String::new();
    let _ = std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text));
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// The files of the PKI, written into `dir`: a CA, kube-apiserver's serving certificate and the
/// service-account key pair; returns the CA, which signs client certificates.
fn write_pki(dir: &Path) -> Result<Issuer<'static, KeyPair>, EnvtestError> {
    let write = |name: &str, text: String| {
        std::fs::write(dir.join(name), text).map_err(io(format!("writing {name}")))
    };
    let mut ca = CertificateParams::default();
    ca.distinguished_name = rcgen::DistinguishedName::new();
    ca.distinguished_name
        .push(DnType::CommonName, "kcm-envtest-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate()?;
    write("ca.crt", ca.self_signed(&ca_key)?.pem())?;
    let issuer = Issuer::new(ca, ca_key);

    let mut serving = CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "kubernetes.default.svc".to_string(),
    ])?;
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_key = KeyPair::generate()?;
    write(
        "apiserver.crt",
        serving.signed_by(&serving_key, &issuer)?.pem(),
    )?;
    write("apiserver.key", serving_key.serialize_pem())?;

    // ES256 service-account tokens.
    let sa = KeyPair::generate()?;
    write("sa.key", sa.serialize_pem())?;
    write("sa.pub", sa.public_key_pem())?;
    Ok(issuer)
}

/// A client certificate for user `cn` in `groups`, signed by `ca`: `<name>.crt`, `<name>.key`.
fn write_client_cert(
    ca: &Issuer<'static, KeyPair>,
    dir: &Path,
    name: &str,
    cn: &str,
    groups: &[&str],
) -> Result<(), EnvtestError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    for group in groups {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *group);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, ca)?;
    for (file, text) in [("crt", cert.pem()), ("key", key.serialize_pem())] {
        let path = dir.join(format!("{name}.{file}"));
        std::fs::write(&path, text).map_err(io(format!("writing {}", path.display())))?;
    }
    Ok(())
}

fn kubeconfig_yaml(url: &str, dir: &Path, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\n\
         clusters:\n- name: envtest\n  cluster:\n    server: {url}\n    certificate-authority: {ca}\n\
         users:\n- name: user\n  user:\n{user}\
         contexts:\n- name: envtest\n  context:\n    cluster: envtest\n    user: user\n\
         current-context: envtest\n",
        ca = dir.join("ca.crt").display(),
    )
}

/// What a control plane starts with beyond the defaults: a benchmark's large cluster.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// An etcd data directory to start from (a copy of it: see [`ControlPlane::copy_etcd`])
    /// instead of an empty one.
    pub etcd_data: Option<PathBuf>,
    /// etcd's flags besides the defaults (e.g. `--quota-backend-bytes`).
    pub etcd_args: Vec<String>,
    /// kube-apiserver's flags besides the defaults (e.g. `--max-requests-inflight`).
    pub apiserver_args: Vec<String>,
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver from `assets` and waits until the API server accepts
    /// writes.
    pub fn start(assets: &Path) -> Result<Self, EnvtestError> {
        Self::start_with(assets, &Options::default())
    }

    /// [`ControlPlane::start`] with `options`.
    pub fn start_with(assets: &Path, options: &Options) -> Result<Self, EnvtestError> {
        let dir = tempfile::Builder::new()
            .prefix("kcm-envtest-")
            .tempdir()
            .map_err(io("a temporary directory"))?;
        let path = dir.path().to_path_buf();
        let ca = write_pki(&path)?;
        if let Some(data) = &options.etcd_data {
            copy_dir(data, &path.join("etcd"))
                .map_err(io(format!("copying {} as etcd's data", data.display())))?;
        }
        let log = |name: &str| -> Result<std::fs::File, EnvtestError> {
            std::fs::File::create(path.join(name)).map_err(io(format!("creating {name}")))
        };

        let (client_port, peer_port) = (free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = Command::new(assets.join("etcd"))
            .arg("--name=envtest")
            .arg(format!("--data-dir={}", path.join("etcd").display()))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=envtest={peer_url}"))
            .args(["--unsafe-no-fsync=true", "--log-level=warn"])
            .args(&options.etcd_args)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log("etcd.log")?)
            .spawn()
            .map_err(io(format!("starting {}/etcd", assets.display())))?;
        let process_group = etcd.id();
        let watchdog = match watchdog(process_group, &path) {
            Ok(w) => w,
            Err(e) => {
                let _ = etcd.kill();
                return Err(e);
            }
        };

        let port = free_port()?;
        let url = format!("https://127.0.0.1:{port}");
        let issuer = "https://kubernetes.default.svc.cluster.local".to_string();
        let file = |name: &str| path.join(name).display().to_string();
        let mut apiserver = Command::new(assets.join("kube-apiserver"))
            .arg(format!("--etcd-servers={etcd_url}"))
            .arg(format!("--secure-port={port}"))
            .args(["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"])
            .arg(format!("--tls-cert-file={}", file("apiserver.crt")))
            .arg(format!("--tls-private-key-file={}", file("apiserver.key")))
            .arg(format!("--client-ca-file={}", file("ca.crt")))
            .arg(format!("--service-account-key-file={}", file("sa.pub")))
            .arg(format!(
                "--service-account-signing-key-file={}",
                file("sa.key")
            ))
            .arg(format!("--service-account-issuer={issuer}"))
            .arg(format!("--cert-dir={}", file("certs")))
            .args([
                "--service-cluster-ip-range=10.0.0.0/24",
                "--authorization-mode=Node,RBAC",
                "--runtime-config=api/all=true",
                "--allow-privileged=true",
                // Pods need no `default` ServiceAccount: no controller here creates one.
                "--disable-admission-plugins=ServiceAccount",
            ])
            .arg(format!("--feature-gates={APISERVER_GATES}"))
            .args(&options.apiserver_args)
            .process_group(process_group as i32)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log("kube-apiserver.log")?)
            .spawn()
            .map_err(io(format!("starting {}/kube-apiserver", assets.display())))?;

        let mut plane = Self {
            assets: assets.to_path_buf(),
            url,
            kubeconfig: PathBuf::new(),
            apiserver_pid: apiserver.id(),
            etcd_pid: etcd.id(),
            process_group,
            issuer,
            dir,
            watchdog: Mutex::new(Some(watchdog)),
            ca: Mutex::new(ca),
        };
        plane.kubeconfig = plane.try_user_kubeconfig("admin", "admin", &["system:masters"])?;
        plane.wait_ready(&mut etcd, &mut apiserver)?;
        Ok(plane)
    }

    /// Polls until a write succeeds: `/readyz` comes first, and writes may still be refused
    /// for about a second after it while the StorageVersions register.
    fn wait_ready(&self, etcd: &mut Child, apiserver: &mut Child) -> Result<(), EnvtestError> {
        let deadline = Instant::now() + START_DEADLINE;
        let mut last = String::from("no attempt");
        while Instant::now() < deadline {
            for (name, child, log) in [
                ("etcd", &mut *etcd, "etcd.log"),
                ("kube-apiserver", &mut *apiserver, "kube-apiserver.log"),
            ] {
                if !matches!(child.try_wait(), Ok(None)) {
                    return Err(EnvtestError::Exited(name, tail(&self.dir.path().join(log))));
                }
            }
            match self.block_on(|client| async move { write_probe(client).await }) {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(EnvtestError::NotReady(
            START_DEADLINE,
            last,
            tail(&self.log_path()),
        ))
    }

    /// Runs `f` with an admin client on a runtime of its own (on another thread), for callers
    /// with or without a runtime: a kube client belongs to the runtime that made it.
    fn block_on<F, T>(
        &self,
        f: impl FnOnce(kube::Client) -> F + Send + 'static,
    ) -> Result<T, String>
    where
        F: std::future::Future<Output = Result<T, String>>,
        T: Send + 'static,
    {
        let kubeconfig = self.kubeconfig.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async move { f(client_from(&kubeconfig).await?).await })
        })
        .join()
        .map_err(|_| "the probe thread panicked".to_string())?
    }

    /// Copies etcd's data directory to `to`, for [`Options::etcd_data`]: etcd is stopped
    /// (SIGSTOP) meanwhile, so the copy holds what it had written when stopped, as after a
    /// crash of the process, which etcd recovers from; the API server waits.
    pub fn copy_etcd(&self, to: &Path) -> Result<(), EnvtestError> {
        let signal = |name: &str| {
            Command::new("kill")
                .arg(format!("-{name}"))
                .arg(self.etcd_pid.to_string())
                .status()
                .map_err(io(format!("kill -{name} etcd")))
        };
        signal("STOP")?;
        let copied = copy_dir(&self.dir.path().join("etcd"), to)
            .map_err(io(format!("copying etcd's data to {}", to.display())));
        signal("CONT")?;
        copied
    }

    /// An admin client (`system:masters`), on the caller's runtime.
    pub async fn client(&self) -> kube::Client {
        client_from(&self.kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("admin client: {e}"))
    }

    /// An admin client that takes a 429 as the answer it is: an eviction refused by a
    /// budget (kube's client would retry it for minutes, as kubectl does not).
    pub async fn client_without_retries(&self) -> kube::Client {
        client_with(&self.kubeconfig, false)
            .await
            .unwrap_or_else(|e| panic!("admin client: {e}"))
    }

    /// A kubeconfig file authenticating with `token` (e.g. a ServiceAccount's, from
    /// TokenRequest), named `name` in this control plane's directory.
    pub fn kubeconfig_with_token(&self, name: &str, token: &str) -> PathBuf {
        let path = self.dir.path().join(format!("{name}.kubeconfig"));
        let user = format!("    token: {token}\n");
        std::fs::write(&path, kubeconfig_yaml(&self.url, self.dir.path(), &user))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        path
    }

    /// A kubeconfig file authenticating as user `cn` in `groups` by a client certificate (e.g.
    /// `system:kube-controller-manager`), named `name` in this control plane's directory.
    pub fn user_kubeconfig(&self, name: &str, cn: &str, groups: &[&str]) -> PathBuf {
        self.try_user_kubeconfig(name, cn, groups)
            .unwrap_or_else(|e| panic!("kubeconfig of {cn}: {e}"))
    }

    fn try_user_kubeconfig(
        &self,
        name: &str,
        cn: &str,
        groups: &[&str],
    ) -> Result<PathBuf, EnvtestError> {
        let dir = self.dir.path();
        let ca = self.ca.lock().unwrap_or_else(|e| e.into_inner());
        write_client_cert(&ca, dir, name, cn, groups)?;
        let user = format!(
            "    client-certificate: {dir}/{name}.crt\n    client-key: {dir}/{name}.key\n",
            dir = dir.display()
        );
        let path = dir.join(format!("{name}.kubeconfig"));
        std::fs::write(&path, kubeconfig_yaml(&self.url, dir, &user))
            .map_err(io(format!("writing {}", path.display())))?;
        Ok(path)
    }

    /// A command in the control plane's process group: killed with it when this process exits.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command.process_group(self.process_group as i32);
        command
    }

    /// `kubectl` of the assets as the admin: its output, or a panic with it when it fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let output = self
            .command(self.assets.join("kubectl"))
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("kubectl runs");
        let printed = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "kubectl {}: {}{}",
            args.join(" "),
            printed,
            String::from_utf8_lossy(&output.stderr)
        );
        printed
    }

    /// A file for a process's log in this control plane's directory: removed with it, even
    /// when this process is killed.
    pub fn log_file(&self) -> tempfile::NamedTempFile {
        tempfile::Builder::new()
            .suffix(".log")
            .tempfile_in(self.dir.path())
            .expect("a log file")
    }

    /// kube-apiserver's log (its stderr).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("kube-apiserver.log")
    }

    /// The API server's `/metrics` text, scraped as the admin.
    pub async fn metrics(&self) -> String {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .expect("a request");
        self.client()
            .await
            .request_text(request)
            .await
            .unwrap_or_else(|e| panic!("kube-apiserver /metrics: {e}"))
    }

    /// A fresh namespace named `<prefix>-<random>`, for one test.
    pub async fn namespace(&self, client: &kube::Client, prefix: &str) -> String {
        use k8s_openapi::api::core::v1::Namespace;
        let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
        let mut namespace = Namespace::default();
        namespace.metadata.generate_name = Some(format!("{prefix}-"));
        namespaces
            .create(&Default::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("namespace {prefix}-: {e}"))
            .metadata
            .name
            .expect("a generated name")
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-KILL")
            .arg("--")
            .arg(format!("-{}", self.process_group))
            .status();
        // Closing the pipe lets the watchdog exit (its kill finds nothing left).
        self.watchdog.lock().map(|mut w| w.take()).ok();
    }
}

/// Copies the directory tree `from` to `to` (created with `from`'s mode: etcd wants 0700).
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    std::fs::set_permissions(to, std::fs::metadata(from)?.permissions())?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// A shell, in a process group of its own (a terminal's Ctrl-C does not stop it before it
/// cleans up), that waits for its stdin to close, then kills `process_group` and removes `dir`.
fn watchdog(process_group: u32, dir: &Path) -> Result<ChildStdin, EnvtestError> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"cat >/dev/null; kill -9 "-$0" 2>/dev/null; sleep 0.5; rm -rf "$1""#)
        .arg(process_group.to_string())
        .arg(dir)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(io("starting the watchdog shell"))?;
    Ok(child.stdin.take().expect("a piped stdin"))
}

async fn client_from(kubeconfig: &Path) -> Result<kube::Client, String> {
    client_with(kubeconfig, true).await
}

/// A client of `kubeconfig`; `retry`: kube's own retry of 429, 503 and 504 answers.
async fn client_with(kubeconfig: &Path, retry: bool) -> Result<kube::Client, String> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| e.to_string())?;
    config.default_retry = retry;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// One write the API server must accept: a ConfigMap in `default` (created or already there).
async fn write_probe(client: kube::Client) -> Result<(), String> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let configmaps: kube::Api<ConfigMap> = kube::Api::namespaced(client, "default");
    let mut probe = ConfigMap::default();
    probe.metadata.name = Some("kcm-envtest-ready".into());
    match configmaps.create(&Default::default(), &probe).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Every sample of Prometheus's text format: its metric's name, its labels and its value.
pub fn samples(text: &str) -> impl Iterator<Item = (&str, Vec<(String, String)>, f64)> {
    text.lines().filter_map(|line| {
        if line.starts_with('#') {
            return None;
        }
        let (name, label_text, value) = match line.split_once('{') {
            Some((name, rest)) => {
                let (label_text, value) = rest.rsplit_once('}')?;
                (name, label_text, value)
            }
            None => {
                let (name, value) = line.split_once(' ')?;
                (name, "", value)
            }
        };
        let value = value.split_whitespace().next()?.parse::<f64>().ok()?;
        Some((name, parse_labels(label_text), value))
    })
}

/// The sum of the samples of metric `name` whose labels include every pair of `labels`, from
/// Prometheus's text format.
pub fn sample_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples(text)
        .filter(|(sample, parsed, _)| {
            *sample == name
                && labels
                    .iter()
                    .all(|(k, v)| parsed.iter().any(|(pk, pv)| pk == k && pv == v))
        })
        .map(|(_, _, value)| value)
        .sum()
}

/// `a="x",b="y\"z"` as pairs (values unescaped).
pub fn parse_labels(text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() || chars.next() != Some('"') {
            return pairs;
        }
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => value.extend(chars.next()),
                '"' => break,
                c => value.push(c),
            }
        }
        pairs.push((key.trim_start_matches(',').trim().to_string(), value));
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
}
