//! The process's life, in the phases kube-controller-manager goes through: connect (metrics,
//! one client per user, the shared informers), serve (`/metrics`, `/healthz`, `/readyz`), wait
//! to lead (a warm standby keeps its stores synced meanwhile), run the controllers, and shut
//! down (in-flight reconciles finish, the lease is handed over). [`run_with_config`] reads as
//! that life; each phase is a function or a small type below it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kube::Client;
use prometheus::IntGauge;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::controllers::{Context, Descriptor};
use crate::explain::endpoint;
use crate::lock::lock;
use crate::runtime::clock::{self, Clock};
use crate::runtime::connection::client::{ClientError, Clients, load_config};
use crate::runtime::connection::credentials::TokenPolicy;
use crate::runtime::connection::discovery::{self, Timing};
use crate::runtime::leader::{LeaderElectionConfig, LeaderElector, default_identity};
use crate::runtime::metrics::{Metrics, ReplicaState};
use crate::runtime::startup::Startup;
use crate::runtime::watching::informer::Informers;
use crate::serving;
use crate::settings::Settings;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error(transparent)]
    Serving(#[from] serving::ServingError),
    #[error("leader election: {0}")]
    Leader(String),
    #[error("controller {0} failed: {1}")]
    Controller(&'static str, String),
}

impl AppError {
    /// Whether kcm failed before it ran anything (configuration, clients, listener), as
    /// opposed to losing its lease or a controller later.
    pub fn at_startup(&self) -> bool {
        matches!(self, Self::Client(_) | Self::Metrics(_) | Self::Serving(_))
    }
}

/// Resolves when SIGTERM or SIGINT arrives.
async fn termination_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot watch SIGTERM; only Ctrl-C stops kcm");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// Runs kcm until SIGTERM/SIGINT (Ok) or until the lease is lost or a controller fails (Err).
pub async fn run(settings: Settings) -> Result<(), AppError> {
    let identity = default_identity();
    // `--master` overrides the kubeconfig's server; alone, it is the whole configuration
    // (client-go's BuildConfigFromFlags), not the in-cluster one.
    let config = match (&settings.kubeconfig, &settings.master) {
        (None, Some(master)) => kube::Config::new(master.clone()),
        (_, master) => {
            let mut config = load_config(settings.kubeconfig.as_deref()).await?;
            if let Some(master) = master {
                config.cluster_url = master.clone();
            }
            config
        }
    };
    run_with_config(
        settings,
        config,
        identity,
        clock::system(),
        termination_signal(),
    )
    .await
}

/// The body of [`run`] with the cluster configuration, clock and stop signal given, so tests
/// can drive it.
pub async fn run_with_config(
    settings: Settings,
    config: kube::Config,
    identity: String,
    clock: Clock,
    stop_signal: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AppError> {
    // Connect, and serve /metrics, /healthz and /readyz.
    announce(&settings);
    let stop = CancellationToken::new();
    let connection = Connection::open(&settings, config, &identity, &stop)?;
    stop_on(stop_signal, stop.clone());
    let standing = Standing::new(connection.informers.clone());
    let explain = endpoint::routes(endpoint::Endpoint {
        informers: connection.informers.clone(),
        client: connection.clients.client("explain")?,
        gates: settings.feature_gates,
        clock: clock.clone(),
        leading: standing.leading.clone(),
    });
    serve(
        &settings,
        &connection.metrics,
        standing.readiness(),
        explain,
        &stop,
    )
    .await?;

    // Wait to lead (a warm standby syncs its stores meanwhile), then hold the lease.
    let enabled = enabled_controllers(&settings);
    let mut discovery = Discovery::new(&enabled, &connection);
    let lease = match lead(&settings, &connection, &identity, &mut discovery, &stop).await {
        Ok(Some(lease)) => lease,
        not_leading => {
            // Stop the warm informers and discovery.
            connection.controllers_stop.cancel();
            return not_leading.map(|_| ());
        }
    };
    connection.metrics.set_replica_state(ReplicaState::Leader);
    standing.set_leading(true);
    let mut held = lease.hold();

    // Run the controllers until SIGTERM, a lost lease or a failure; then shut down.
    let launcher = Launcher::new(&settings, &connection, clock, &stop);
    let mut controllers = Controllers::new(launcher, standing);
    let outcome = match controllers.start(&enabled, &mut discovery).await {
        Ok(()) => controllers.run(&mut discovery, &mut held, &stop).await,
        failed => failed,
    };
    controllers.stop(outcome.is_ok()).await;
    held.release(outcome.is_ok()).await;
    stop.cancel();
    outcome
}

/// Says once, at start, what resolving the command line left to say.
fn announce(settings: &Settings) {
    for note in &settings.notes {
        tracing::info!("{note}");
    }
    for warning in &settings.warnings {
        tracing::warn!("{warning}");
    }
    if !settings.unused_flags.is_empty() {
        tracing::info!(
            "accepted, not used by kcm: {}",
            settings.unused_flags.join(", ")
        );
    }
}

/// What the process reaches the cluster with: its metrics, one client and bucket per user as
/// kube-controller-manager has them (the shared informers, the metadata informers, discovery,
/// leader election, and each controller when it starts), and the shared informers.
struct Connection {
    metrics: Metrics,
    clients: Clients,
    metadata_client: Client,
    discovery_client: Client,
    informers: Informers,
    /// Stops the controllers, and with them the shared informers and discovery.
    controllers_stop: CancellationToken,
}

impl Connection {
    /// Connects as `identity`; with `--use-service-account-credentials` the controllers' tokens
    /// are renewed until `stop`.
    fn open(
        settings: &Settings,
        config: kube::Config,
        identity: &str,
        stop: &CancellationToken,
    ) -> Result<Self, AppError> {
        let metrics = Metrics::with_disabled(&settings.disabled_metrics)?;
        let mut clients = Clients::new(
            config,
            settings.kube_api_qps,
            settings.kube_api_burst.get(),
            identity,
            metrics.rest_client.clone(),
        );
        let metadata_client = clients.client("metadata-informers")?;
        let discovery_client = clients.client("controller-discovery")?;
        if settings.use_service_account_credentials {
            let policy = TokenPolicy {
                create_accounts: !settings.shadow,
                ..TokenPolicy::default()
            };
            clients.use_service_account_credentials(policy, stop.clone())?;
        }
        let controllers_stop = CancellationToken::new();
        let informers = Informers::new(
            clients.client("shared-informers")?,
            metrics.clone(),
            controllers_stop.clone(),
        )
        .with_min_resync_period(settings.min_resync_period)
        .with_initial_list(settings.initial_list)
        .with_content_type(settings.content_type);
        Ok(Self {
            metrics,
            clients,
            metadata_client,
            discovery_client,
            informers,
            controllers_stop,
        })
    }
}

/// Cancels `stop` when `signal` (SIGTERM or SIGINT, or a test's own) resolves.
fn stop_on(signal: impl Future<Output = ()> + Send + 'static, stop: CancellationToken) {
    tokio::spawn(async move {
        signal.await;
        tracing::info!("termination signal received; shutting down");
        stop.cancel();
    });
}

/// Starts the listeners that are configured: HTTPS (`--secure-port`) and plain HTTP
/// (`--port`), until `stop`; `debug` (`/debug/explain`) is served beside `/metrics`.
async fn serve(
    settings: &Settings,
    metrics: &Metrics,
    readiness: serving::Readiness,
    debug: axum::Router,
    stop: &CancellationToken,
) -> Result<(), AppError> {
    if let Some(secure) = &settings.secure_serving {
        serving::serve_secure(
            secure,
            metrics.clone(),
            readiness.clone(),
            settings.profiling,
            debug.clone(),
            stop.clone(),
        )
        .await?;
    }
    if let Some(addr) = settings.http_listener {
        serving::serve_plain(
            addr,
            metrics.clone(),
            readiness,
            settings.profiling,
            debug,
            stop.clone(),
        )
        .await?;
    }
    Ok(())
}

/// Where this replica stands, as `/readyz` answers it. A standby is ready once the stores it
/// keeps warm have synced (a cold one holds none); a leader is ready once every enabled
/// controller has started or been found to lack its API, and every store the started ones
/// read has synced.
#[derive(Clone)]
struct Standing {
    informers: Informers,
    leading: Arc<AtomicBool>,
    /// The leader's controllers; `None` until they are being started.
    progress: Arc<Mutex<Option<Progress>>>,
}

impl Standing {
    fn new(informers: Informers) -> Self {
        Self {
            informers,
            leading: Arc::default(),
            progress: Arc::default(),
        }
    }

    fn readiness(&self) -> serving::Readiness {
        let standing = self.clone();
        Arc::new(move || standing.ready())
    }

    fn ready(&self) -> Result<(), serving::NotReady> {
        if !self.leading.load(Ordering::SeqCst) {
            let unsynced = self.informers.unsynced();
            return match unsynced.is_empty() {
                true => Ok(()),
                false => Err(serving::NotReady::StoresNotSynced(unsynced)),
            };
        }
        // Until the controllers are being started their stores may not even be registered.
        let progress = lock(&self.progress);
        let Some(progress) = progress.as_ref() else {
            return Err(serving::NotReady::ControllersStarting);
        };
        if !progress.discovering.is_empty() {
            return Err(serving::NotReady::DiscoveryPending(
                progress
                    .discovering
                    .iter()
                    .map(|(name, api)| format!("{name} ({api})"))
                    .collect(),
            ));
        }
        let unsynced = self.informers.unsynced();
        if !unsynced.is_empty() {
            return Err(serving::NotReady::StoresNotSynced(unsynced));
        }
        let pending: Vec<&'static str> = progress
            .started
            .iter()
            .filter(|s| !s.is_synced())
            .map(Startup::controller)
            .collect();
        if pending.is_empty() {
            Ok(())
        } else {
            Err(serving::NotReady::ControllersNotSynced(pending))
        }
    }

    fn set_leading(&self, leading: bool) {
        self.leading.store(leading, Ordering::SeqCst);
    }

    /// The leader's controllers as they are first started.
    fn set_progress(&self, progress: Progress) {
        *lock(&self.progress) = Some(progress);
    }

    /// Whether every controller's API has been found served or not.
    fn discovered(&self) -> bool {
        lock(&self.progress)
            .as_ref()
            .is_some_and(|p| p.discovering.is_empty())
    }

    /// Whether discovery has yet to answer for the controller `name` for the first time.
    fn is_discovering(&self, name: &str) -> bool {
        lock(&self.progress)
            .as_ref()
            .is_some_and(|p| p.discovering.contains_key(name))
    }

    /// The controller `name` lacks its API: no longer pending. Returns the API, if it was.
    fn not_served(&self, name: &str) -> Option<String> {
        lock(&self.progress)
            .as_mut()
            .and_then(|p| p.discovering.remove(name))
    }

    /// The controller `name` has started, its API found served.
    fn started(&self, name: &str, startup: Startup) {
        let mut progress = lock(&self.progress);
        let progress = progress.get_or_insert_default();
        progress.discovering.remove(name);
        progress.started.push(startup);
    }
}

/// The enabled controllers, in canonical order.
fn enabled_controllers(settings: &Settings) -> Vec<&'static Descriptor> {
    settings
        .enabled_controllers
        .iter()
        .map(|c| c.descriptor())
        .collect()
}

/// One answer of discovery: whether a controller's API is served.
type Answer = (&'static Descriptor, Found);

/// Discovery of the APIs the enabled controllers need, asked once: by a warm standby while it
/// waits (reads only), else when leading. Each controller's API is asked on its own, so no
/// answer holds up another; one found not served is asked again until it is.
struct Discovery {
    enabled: Vec<&'static Descriptor>,
    client: Client,
    /// Ends discovery, with the controllers.
    cancelled: CancellationToken,
    found: mpsc::UnboundedSender<Answer>,
    answers: mpsc::UnboundedReceiver<Answer>,
    /// The APIs asked for, by controller; `None` until asked.
    asked: Option<BTreeMap<&'static str, String>>,
}

impl Discovery {
    fn new(enabled: &[&'static Descriptor], connection: &Connection) -> Self {
        let (found, answers) = mpsc::unbounded_channel();
        Self {
            enabled: enabled.to_vec(),
            client: connection.discovery_client.clone(),
            cancelled: connection.controllers_stop.clone(),
            found,
            answers,
            asked: None,
        }
    }

    /// Asks for each enabled controller's API (those that need one), unless asked already.
    fn start(&mut self) {
        if self.asked.is_none() {
            self.asked = Some(self.ask());
        }
    }

    /// The APIs asked for, by controller, asking now if no one has.
    fn asked(&mut self) -> BTreeMap<&'static str, String> {
        self.start();
        self.asked.clone().unwrap_or_default()
    }

    /// Puts answers already received back, ahead of those still to come.
    fn hand_back(&self, answers: Vec<Answer>) {
        for answer in answers {
            let _ = self.found.send(answer);
        }
    }

    fn ask(&self) -> BTreeMap<&'static str, String> {
        let mut discovering = BTreeMap::new();
        for &entry in &self.enabled {
            let Some((group, version)) = entry.api else {
                continue;
            };
            let api = if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}/{version}")
            };
            discovering.insert(entry.name, api.clone());
            let client = self.client.clone();
            let found = self.found.clone();
            let cancelled = self.cancelled.clone();
            tokio::spawn(async move {
                let skipped = found.clone();
                let served = discovery::until_served(
                    &api,
                    Timing::default(),
                    || discovery::probe(&client, group, version),
                    move || {
                        let _ = skipped.send((entry, Found::NotServed));
                    },
                );
                tokio::select! {
                    () = cancelled.cancelled() => {}
                    () = served => {
                        let _ = found.send((entry, Found::Served));
                    }
                }
            });
        }
        discovering
    }
}

/// Waits to lead, with `--leader-elect`; without it, leads at once. A warm standby meanwhile
/// keeps the stores of every controller it can start synced ([`warm_standby`]); a cold one
/// holds nothing and asks nothing. `None`: stopped before the lease was acquired.
async fn lead(
    settings: &Settings,
    connection: &Connection,
    identity: &str,
    discovery: &mut Discovery,
    stop: &CancellationToken,
) -> Result<Option<Lease>, AppError> {
    let Some(election) = &settings.leader_election else {
        // Without leader election upstream exports no `leader_election_master_status` series.
        return Ok(Some(Lease {
            elector: None,
            gauge: None,
        }));
    };
    let elector = LeaderElector::new(
        connection.clients.client("leader-election")?,
        LeaderElectionConfig {
            namespace: election.resource_namespace.clone(),
            name: election.resource_name.clone(),
            identity: identity.to_string(),
            lease_duration: election.lease_duration,
            renew_deadline: election.renew_deadline,
            retry_period: election.retry_period,
        },
    );
    let lease_name = election.resource_name.as_str();
    let gauge = connection.metrics.leader.with_label_values(&[lease_name]);
    let warm = election.warm_standby;
    tracing::info!(
        identity,
        lease = lease_name,
        warm,
        "waiting to acquire the leader lease"
    );
    let stop_wait = stop.clone();
    let acquire = elector.acquire(async move { stop_wait.cancelled().await });
    let acquired = if warm {
        connection
            .metrics
            .set_replica_state(ReplicaState::WarmStandby);
        warm_standby(acquire, settings, &connection.informers, discovery).await
    } else {
        connection
            .metrics
            .set_replica_state(ReplicaState::ColdStandby);
        acquire.await
    };
    if !acquired.map_err(|e| AppError::Leader(e.to_string()))? {
        return Ok(None);
    }
    gauge.set(1);
    Ok(Some(Lease {
        elector: Some(elector),
        gauge: Some(gauge),
    }))
}

/// A warm standby's wait for `acquire`: the stores of the controllers that need no API are
/// synced at once, and discovery is asked, so each controller found served is warmed as the
/// answer comes. The answers go back to `discovery`, for the leader to act on.
async fn warm_standby<T>(
    acquire: impl Future<Output = T>,
    settings: &Settings,
    informers: &Informers,
    discovery: &mut Discovery,
) -> T {
    for entry in discovery.enabled.iter().filter(|entry| entry.api.is_none()) {
        (entry.warm)(informers, settings);
    }
    discovery.start();
    let (acquired, answers) = warm_until(acquire, &mut discovery.answers, |entry| {
        (entry.warm)(informers, settings)
    })
    .await;
    discovery.hand_back(answers);
    acquired
}

/// A warm standby's wait for the lease: each controller discovery finds served is warmed
/// meanwhile. Returns the outcome of `acquire` and every discovery answer received, in
/// order, for the leader to act on.
async fn warm_until<T>(
    acquire: impl Future<Output = T>,
    found: &mut mpsc::UnboundedReceiver<Answer>,
    mut warm: impl FnMut(&'static Descriptor),
) -> (T, Vec<Answer>) {
    let mut answers = Vec::new();
    let mut answered = |(entry, answer): Answer| {
        if matches!(answer, Found::Served) {
            tracing::info!(controller = %entry.controller, "the cluster serves the controller's API; warming its stores");
            warm(entry);
        }
        answers.push((entry, answer));
    };
    tokio::pin!(acquire);
    let acquired = loop {
        tokio::select! {
            acquired = &mut acquire => break acquired,
            Some(answer) = found.recv() => answered(answer),
        }
    };
    // Those already sent, too, so that every answer handed back precedes any later one.
    while let Ok(answer) = found.try_recv() {
        answered(answer);
    }
    (acquired, answers)
}

/// The lease this replica leads under, and the gauge that says it leads (neither without
/// `--leader-elect`).
struct Lease {
    elector: Option<LeaderElector>,
    gauge: Option<IntGauge>,
}

impl Lease {
    /// Renews the lease from now on in a task of its own, so slow controller starts
    /// (ServiceAccount retries, --controller-start-interval) never delay a renewal.
    fn hold(self) -> Held {
        let Lease { elector, gauge } = self;
        let (release, released) = oneshot::channel::<()>();
        let renewals = AbortOnDropHandle::new(tokio::spawn(async move {
            match elector {
                Some(elector) => elector
                    .hold(async move {
                        let _ = released.await;
                    })
                    .await
                    .map_err(|e| AppError::Leader(e.to_string())),
                None => {
                    let _ = released.await;
                    Ok(())
                }
            }
        }));
        Held {
            renewals,
            release,
            gauge,
        }
    }
}

/// A lease being renewed; dropping it (any early return) stops the renewals.
struct Held {
    /// Ends when the lease is lost, or released.
    renewals: AbortOnDropHandle<Result<(), AppError>>,
    release: oneshot::Sender<()>,
    gauge: Option<IntGauge>,
}

impl Held {
    /// After a clean stop, hands the lease over at once instead of making the next leader
    /// wait it out.
    async fn release(self, clean: bool) {
        if clean {
            let _ = self.release.send(());
            if let Err(err) = held(self.renewals.await) {
                tracing::warn!(error = %err, "releasing the lease failed");
            }
        }
        if let Some(gauge) = &self.gauge {
            gauge.set(0);
        }
    }
}

/// The outcome of the lease-holding task.
fn held(outcome: Result<Result<(), AppError>, JoinError>) -> Result<(), AppError> {
    outcome.unwrap_or_else(|join| Err(AppError::Leader(join.to_string())))
}

/// The leader's controllers: their tasks, and where they stand for readiness.
struct Controllers<'a> {
    launcher: Launcher<'a>,
    tasks: JoinSet<Result<(), AppError>>,
    standing: Standing,
    /// Once every controller that started has stopped, kcm fails.
    started_any: bool,
    /// "No controller is running" was said, and no controller has started since.
    said_idle: bool,
}

impl<'a> Controllers<'a> {
    fn new(launcher: Launcher<'a>, standing: Standing) -> Self {
        Self {
            launcher,
            tasks: JoinSet::new(),
            standing,
            started_any: false,
            said_idle: false,
        }
    }

    /// Starts each of `enabled` that needs no API at once; the others wait for discovery
    /// (asked now, unless a warm standby has asked already).
    async fn start(
        &mut self,
        enabled: &[&'static Descriptor],
        discovery: &mut Discovery,
    ) -> Result<(), AppError> {
        for (controller, gate) in &self.launcher.settings.skipped_for_gates {
            tracing::info!(controller = %controller, gate, "controller is disabled by feature gate");
        }
        let mut progress = Progress {
            discovering: discovery.asked(),
            started: Vec::new(),
        };
        for entry in enabled.iter().filter(|entry| entry.api.is_none()) {
            progress
                .started
                .push(self.launcher.launch(entry, &mut self.tasks).await?);
        }
        self.standing.set_progress(progress);
        self.started_any = !self.tasks.is_empty();
        Ok(())
    }

    /// Runs the controllers until SIGTERM (`stop`), a lost lease, or one of them fails;
    /// meanwhile each controller discovery finds served starts.
    async fn run(
        &mut self,
        discovery: &mut Discovery,
        lease: &mut Held,
        stop: &CancellationToken,
    ) -> Result<(), AppError> {
        loop {
            self.say_if_idle();
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                lost = &mut lease.renewals => return Err(held(lost).err().unwrap_or_else(|| AppError::Leader("lease released unexpectedly".into()))),
                Some((entry, found)) = discovery.answers.recv() => self.found(entry, found).await?,
                Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => self.ended(done)?,
            }
        }
    }

    /// With nothing to run (all skipped), kcm stays up and healthy instead of exiting into a
    /// crash loop; the operator sees why in the log, and a group served later still starts its
    /// controller.
    fn say_if_idle(&mut self) {
        if self.tasks.is_empty() && !self.said_idle && self.standing.discovered() {
            self.said_idle = true;
            tracing::warn!("no controller is running; kcm stays up until stopped");
        }
    }

    /// Discovery's answer for `entry`: a served API starts its controller.
    async fn found(&mut self, entry: &'static Descriptor, found: Found) -> Result<(), AppError> {
        match found {
            Found::NotServed => {
                let api = self.standing.not_served(entry.name);
                tracing::warn!(controller = %entry.controller, api = api.as_deref().unwrap_or_default(), "the cluster does not serve this API; controller skipped until it does");
            }
            Found::Served => {
                if !self.standing.is_discovering(entry.name) {
                    tracing::info!(controller = %entry.controller, "the cluster now serves the controller's API");
                }
                // Still pending for readiness until it has started.
                let startup = self.launcher.launch(entry, &mut self.tasks).await?;
                self.standing.started(entry.name, startup);
                self.started_any = true;
                self.said_idle = false;
            }
        }
        Ok(())
    }

    /// A controller's task ended: its error ends kcm, and so does the last one stopping.
    fn ended(&self, done: Result<Result<(), AppError>, JoinError>) -> Result<(), AppError> {
        match done {
            Ok(Ok(())) if self.tasks.is_empty() && self.started_any => Err(AppError::Controller(
                "all",
                "every controller stopped".into(),
            )),
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(err),
            Err(join) => Err(AppError::Controller("task", join.to_string())),
        }
    }

    /// Stops the controllers; after a clean stop, in-flight reconciles get
    /// `--controller-shutdown-timeout` to finish.
    async fn stop(&mut self, clean: bool) {
        self.launcher.connection.controllers_stop.cancel();
        let finish = async { while self.tasks.join_next().await.is_some() {} };
        let grace = self.launcher.settings.controller_shutdown_timeout;
        if clean && tokio::time::timeout(grace, finish).await.is_err() {
            tracing::warn!("controllers did not finish within {grace:?}; exiting anyway");
        }
        self.standing.set_leading(false);
    }
}

/// Where the leader's controllers stand, for readiness: none is pending once each has
/// started or been found to lack its API.
#[derive(Default)]
struct Progress {
    /// Controllers waiting for discovery, with the API they need.
    discovering: BTreeMap<&'static str, String>,
    started: Vec<Startup>,
}

/// What discovery found for a controller's API.
#[derive(Debug, Clone, Copy)]
enum Found {
    Served,
    /// Found not served; discovery keeps checking and sends `Served` if that changes.
    NotServed,
}

/// What every controller is started with.
struct Launcher<'a> {
    connection: &'a Connection,
    settings: Arc<Settings>,
    /// SIGTERM/SIGINT, which also ends the wait between two controller starts.
    stop: CancellationToken,
    clock: Clock,
}

impl<'a> Launcher<'a> {
    fn new(
        settings: &Settings,
        connection: &'a Connection,
        clock: Clock,
        stop: &CancellationToken,
    ) -> Self {
        Self {
            connection,
            settings: Arc::new(settings.clone()),
            stop: stop.clone(),
            clock,
        }
    }

    /// Starts `entry` on `running`; its startup progress is returned for readiness.
    async fn launch(
        &self,
        entry: &'static Descriptor,
        running: &mut JoinSet<Result<(), AppError>>,
    ) -> Result<Startup, AppError> {
        tracing::info!(controller = %entry.controller, "starting controller");
        let name = entry.name;
        let startup = Startup::new(name);
        let connection = self.connection;
        let run = (entry.run)(Context {
            client: connection.clients.controller(entry.client).await?,
            metadata_client: connection.metadata_client.clone(),
            informers: connection.informers.clone(),
            metrics: connection.metrics.clone(),
            settings: self.settings.clone(),
            shutdown: connection.controllers_stop.clone(),
            clock: self.clock.clone(),
            startup: startup.clone(),
        });
        running.spawn(async move {
            run.await
                .map_err(|e| AppError::Controller(name, e.to_string()))
        });
        // `--controller-start-interval`, jittered by up to 100% as upstream's; a stop
        // signal cuts it short.
        let interval = self.settings.controller_start_interval;
        if !interval.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(interval.mul_f64(1.0 + rand::random::<f64>())) => {}
                () = self.stop.cancelled() => {}
            }
        }
        Ok(startup)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::Controller;

    #[tokio::test(start_paused = true)]
    async fn a_standby_warms_what_is_served_and_hands_every_answer_on_in_order() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (claims, pdbs) = (
            Controller::ResourceClaim.descriptor(),
            Controller::Disruption.descriptor(),
        );
        tx.send((claims, Found::NotServed)).unwrap();
        tx.send((pdbs, Found::Served)).unwrap();
        let (lease_tx, lease_rx) = tokio::sync::oneshot::channel::<bool>();
        let mut warmed = Vec::new();
        let waiting = warm_until(async { lease_rx.await.unwrap() }, &mut rx, |entry| {
            warmed.push(entry.name)
        });
        // The lease comes with an answer still queued: it is handed on after the others.
        let acquire = async {
            tokio::task::yield_now().await;
            tx.send((claims, Found::Served)).unwrap();
            lease_tx.send(true).unwrap();
        };
        let ((acquired, answers), ()) = tokio::join!(waiting, acquire);
        assert!(acquired);
        assert_eq!(
            warmed,
            ["disruption-controller", "resourceclaim-controller"]
        );
        let order: Vec<(&str, bool)> = answers
            .iter()
            .map(|(entry, found)| (entry.name, matches!(found, Found::Served)))
            .collect();
        assert_eq!(
            order,
            [
                ("resourceclaim-controller", false),
                ("disruption-controller", true),
                ("resourceclaim-controller", true),
            ]
        );
    }
}
