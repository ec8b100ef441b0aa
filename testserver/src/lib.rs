//! `kube-testserver`: an in-process Kubernetes API server for tests.
//!
//! It serves real HTTP on 127.0.0.1 with the wire semantics controllers depend on —
//! resourceVersions, list/watch with resumption and 410 Gone, optimistic concurrency, status and
//! scale subresources, JSON/merge/strategic/apply patches, finalizers and owner-reference garbage
//! collection — from memory. See the crate README for what it does not emulate.

mod claims;
mod codec;
mod deletion;
mod discovery;
mod error;
mod events;
mod eviction;
mod faults;
mod http;
mod list_options;
pub mod patch;
pub mod podgroups;
mod pods;
mod quota_admission;
pub mod rbac;
mod resources;
mod reviews;
pub mod selector;
mod storageversions;
mod store;
mod table;
pub mod testing;
mod transport;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use base64::Engine as _;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use codec::{CodecError, decode as decode_protobuf, encode as encode_protobuf};
pub use error::ApiError;
pub use events::View;
pub use faults::{Authorizer, Fault, Faults, RequestInfo, RequestRecord};
pub use resources::{ResourceType, ScalePaths, ScaleSelector};
pub use reviews::{Reviews, SUPERUSERS, UserInfo};
pub use store::{Store, get_path};
pub use transport::{Connection, TlsError};

/// How a server behaves; the defaults suit most tests.
#[derive(Debug, Clone)]
pub struct Options {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// How many events are kept for watch resumption; older resourceVersions get 410 Gone.
    pub event_window: usize,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// Run the owner-reference garbage collector, as a real cluster does.
    pub garbage_collector: bool,
    /// Serve `scheduling.k8s.io/v1alpha2` PodGroups, as a cluster with the alpha API (and
    /// GenericWorkload) enabled does.
    pub pod_groups: bool,
    /// Serve HTTPS, as a cluster's API server does: a CA of the server's own, whose
    /// certificate the kubeconfig trusts and which signs the kubeconfig's client certificate
    /// (the admin); client certificates and bearer tokens both authenticate.
    pub tls: bool,
    /// The API server's `WatchList` gate (beta, on by default since 1.34): watches with
    /// `sendInitialEvents` are served. Off, they are refused with 422 as a server before
    /// 1.27 or with the gate off refuses them, and legacy watches are not defaulted to them.
    pub watch_list: bool,
    /// Answer gets, lists and watches in protobuf to clients that ask for it first
    /// (client-go's and kcm's `application/vnd.kubernetes.protobuf, application/json`), for
    /// the kinds the codec writes (pods among them) and metadata-only requests, as the API
    /// server does (on by default, as there). Off, they get JSON, as from a server (or
    /// aggregated API) without protobuf.
    /// A watch event the codec cannot write ends its watch with an ERROR event saying so.
    pub protobuf: bool,
    /// Answer `/api` and `/apis` with aggregated discovery (`apidiscovery.k8s.io/v2`, GA in
    /// 1.30) to clients that ask for it. Off, they get the legacy documents, as from a server
    /// before 1.26.
    pub aggregated_discovery: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            port: 0,
            event_window: 10_000,
            bookmark_interval: Duration::from_secs(1),
            garbage_collector: true,
            pod_groups: false,
            tls: false,
            watch_list: true,
            protobuf: true,
            aggregated_discovery: true,
        }
    }
}

/// A running server. Dropping it stops the server.
pub struct TestServer {
    store: Arc<Store>,
    faults: Arc<Faults>,
    reviews: Arc<Reviews>,
    addr: SocketAddr,
    tls: Option<transport::Credentials>,
    connections: Arc<transport::Connections>,
    bytes_sent: Arc<AtomicU64>,
    kubeconfig: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    tasks: Vec<JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server with default options.
    ///
    /// # Panics
    /// When no loopback port can be bound; use [`TestServer::start_with`] to handle that.
    pub async fn start() -> Self {
        match Self::start_with(Options::default()).await {
            Ok(server) => server,
            Err(err) => panic!("kube-testserver could not start: {err}"),
        }
    }

    pub async fn start_with(options: Options) -> std::io::Result<Self> {
        let listener =
            tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], options.port))).await?;
        let addr = listener.local_addr()?;
        let tls = if options.tls {
            Some(transport::Credentials::generate()?)
        } else {
            None
        };
        let connections = Arc::new(transport::Connections::default());
        let store = Arc::new(Store::new(options.event_window));
        if options.pod_groups {
            store.register(podgroups::resource_type());
        }
        let faults = Arc::new(Faults::default());
        let reviews = Arc::new(Reviews::default());
        let bytes_sent = Arc::new(AtomicU64::new(0));
        let shared = Arc::new(http::Shared {
            store: store.clone(),
            faults: faults.clone(),
            reviews: reviews.clone(),
            connections: connections.clone(),
            addr,
            watch_list: options.watch_list,
            protobuf: options.protobuf,
            aggregated_discovery: options.aggregated_discovery,
            bytes_sent: bytes_sent.clone(),
        });
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let mut tasks = Vec::new();
        let app = http::router(shared).into_make_service_with_connect_info::<transport::Peer>();
        let listener = transport::Listener::new(listener, tls.as_ref(), connections.clone());
        tasks.push(tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stop_rx.await;
            });
            if let Err(err) = serve.await {
                tracing::error!(%err, "kube-testserver stopped");
            }
        }));
        if options.garbage_collector {
            let (gc_tx, mut gc_rx) = mpsc::unbounded_channel();
            store.set_gc(Some(gc_tx));
            let gc_store = store.clone();
            tasks.push(tokio::spawn(async move {
                while let Some(work) = gc_rx.recv().await {
                    gc_store.collect_garbage(work);
                }
            }));
        }
        let bookmark_store = store.clone();
        let interval = options.bookmark_interval.max(Duration::from_millis(10));
        tasks.push(tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            loop {
                ticker.tick().await;
                bookmark_store.send_bookmarks();
            }
        }));
        let scheme = if tls.is_some() { "https" } else { "http" };
        let yaml = kubeconfig_with(
            &format!("{scheme}://{addr}"),
            tls.as_ref().map(|c| c.ca_pem.as_str()),
            &admin_user_yaml(tls.as_ref()),
        );
        let kubeconfig = write_kubeconfig(&yaml)?;
        Ok(Self {
            store,
            faults,
            reviews,
            addr,
            tls,
            connections,
            bytes_sent,
            kubeconfig,
            stop: Some(stop_tx),
            tasks,
        })
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The PEM certificate of the CA that signed the serving certificate, under TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.tls.as_ref().map(|c| c.ca_pem.as_str())
    }

    /// Every TCP connection the server accepted so far, in order.
    pub fn connections(&self) -> Vec<Connection> {
        self.connections.all()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Bytes of response bodies sent so far (what lists and watches cost the server's
    /// network; headers not counted).
    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A kube client pointed at this server.
    pub fn client(&self) -> kube::Client {
        let url = self
            .url()
            .parse()
            .unwrap_or_else(|_| unreachable!("a loopback URL parses"));
        let mut config = kube::Config::new(url);
        // Requests carry no credentials: the token-less user (the admin by default).
        config.root_cert = self.tls.as_ref().map(|c| {
            CertificateDer::pem_slice_iter(c.ca_pem.as_bytes())
                .filter_map(Result::ok)
                .map(|der| der.to_vec())
                .collect()
        });
        kube::Client::try_from(config).unwrap_or_else(|e| unreachable!("a loopback config: {e}"))
    }

    /// A kubeconfig file for this server, for running `kcm` or `kubectl` as subprocesses.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The objects, for seeding fixtures, registering types, compaction and watch control.
    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The tables TokenReviews and SubjectAccessReviews are answered from.
    pub fn reviews(&self) -> &Reviews {
        &self.reviews
    }

    /// Shorthand for `faults().add(fault)`.
    pub fn inject(&self, fault: Fault) {
        self.faults.add(fault);
    }

    /// Shorthand for `faults().authorize(authorizer)`.
    pub fn authorize(&self, authorizer: Authorizer) {
        self.faults.authorize(authorizer);
    }

    /// Shorthand for `faults().enforce_rbac()`: every request is authorized by RBAC from the
    /// stored roles and bindings. Requests without a token are still the token-less user
    /// ([`Reviews::set_tokenless_user`], the admin by default).
    pub fn enforce_rbac(&self) {
        self.faults.enforce_rbac();
    }

    /// A kubeconfig for this server whose bearer token authenticates as `user`.
    pub fn kubeconfig_as(&self, user: &UserInfo) -> std::io::Result<PathBuf> {
        let token = format!("ts-user-{}", uuid::Uuid::new_v4().simple());
        self.reviews.add_user_token(&token, user.clone());
        let dir = self
            .kubeconfig
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let path = dir.join(format!("kubeconfig-{}", uuid::Uuid::new_v4().simple()));
        let yaml = kubeconfig_with(&self.url(), self.ca_pem(), &format!("\n    token: {token}"));
        std::fs::write(&path, yaml)?;
        Ok(path)
    }

    pub fn requests(&self) -> Vec<RequestRecord> {
        self.faults.requests()
    }

    /// How many logged requests match `filter`.
    pub fn count(&self, filter: impl Fn(&RequestRecord) -> bool) -> usize {
        self.faults.count(filter)
    }

    /// Puts an object in as it is, status included (see [`Store::seed`]).
    pub fn seed(&self, obj: Value) -> Result<Arc<Value>, ApiError> {
        let rt = self.type_of(&obj).ok_or_else(|| {
            ApiError::bad_request(format!(
                "no served type for apiVersion {} kind {}",
                obj["apiVersion"], obj["kind"]
            ))
        })?;
        self.store.seed(&rt, obj)
    }

    /// The served type of an object, by its apiVersion and kind.
    pub fn type_of(&self, obj: &Value) -> Option<ResourceType> {
        let api_version = obj["apiVersion"].as_str()?;
        let kind = obj["kind"].as_str()?;
        self.store
            .types()
            .into_iter()
            .find(|t| t.api_version() == api_version && t.kind == kind)
    }

    /// Stops serving and waits for the server task to finish.
    pub async fn shutdown(mut self) {
        self.stop_now();
        for task in self.tasks.drain(..) {
            task.abort();
            let _ = task.await;
        }
    }

    fn stop_now(&mut self) {
        self.store.drop_watches();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop_now();
        for task in &self.tasks {
            task.abort();
        }
        if let Some(dir) = self.kubeconfig.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn write_kubeconfig(yaml: &str) -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("kube-testserver-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("kubeconfig");
    std::fs::write(&path, yaml)?;
    Ok(path)
}

/// A kubeconfig with one cluster, context and (credential-less) user.
pub fn kubeconfig_yaml(url: &str) -> String {
    kubeconfig_with(url, None, " {}")
}

/// The kubeconfig user of the server's own kubeconfig: under TLS the admin's client
/// certificate, else none (the token-less user).
fn admin_user_yaml(tls: Option<&transport::Credentials>) -> String {
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    match tls {
        Some(c) => format!(
            "\n    client-certificate-data: {}\n    client-key-data: {}",
            b64(&c.admin_cert_pem),
            b64(&c.admin_key_pem)
        ),
        None => " {}".into(),
    }
}

/// A kubeconfig for `url`, trusting `ca_pem` when given, whose user entry is `user` (YAML
/// following `user:`).
fn kubeconfig_with(url: &str, ca_pem: Option<&str>, user: &str) -> String {
    let ca = ca_pem.map_or_else(String::new, |pem| {
        format!(
            "    certificate-authority-data: {}\n",
            base64::engine::general_purpose::STANDARD.encode(pem)
        )
    });
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testserver\n  cluster:\n    server: {url}\n{ca}\
         contexts:\n- name: testserver\n  context:\n    cluster: testserver\n    user: testserver\n    namespace: default\n\
         current-context: testserver\nusers:\n- name: testserver\n  user:{user}\n"
    )
}
