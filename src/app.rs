//! Wires the process: client → serving (HTTPS, plain HTTP) → leader election → controllers → shutdown.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::Client;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::controllers::{Context, Descriptor};
use crate::lock::lock;
use crate::runtime::clock::{self, Clock};
use crate::runtime::connection::client::{ClientError, Clients, load_config};
use crate::runtime::connection::credentials::TokenPolicy;
use crate::runtime::connection::discovery::{self, Timing};
use crate::runtime::leader::{LeaderElectionConfig, LeaderElector, default_identity};
use crate::runtime::metrics::{Metrics, ReplicaState};
use crate::runtime::serving;
use crate::runtime::startup::Startup;
use crate::runtime::watching::informer::Informers;
use crate::settings::Settings;

/// Every controller kcm runs, with what it needs (API group, RBAC).
pub use crate::controllers::CONTROLLERS;

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
    let metrics = Metrics::with_disabled(&settings.disabled_metrics)?;
    // One client and bucket per user, as kube-controller-manager: the shared informers, the
    // metadata informers, discovery, leader election, and each controller (below).
    let mut clients = Clients::new(
        config,
        settings.kube_api_qps,
        settings.kube_api_burst.get(),
        &identity,
        metrics.rest_client.clone(),
    );
    let metadata_client = clients.client("metadata-informers")?;
    let discovery = clients.client("controller-discovery")?;
    let stop = CancellationToken::new();
    if settings.use_service_account_credentials {
        let policy = TokenPolicy {
            create_accounts: !settings.shadow,
            ..TokenPolicy::default()
        };
        clients.use_service_account_credentials(policy, stop.clone())?;
    }
    let signal_stop = stop.clone();
    tokio::spawn(async move {
        stop_signal.await;
        tracing::info!("termination signal received; shutting down");
        signal_stop.cancel();
    });
    let controllers_stop = CancellationToken::new();
    let informers = Informers::new(
        clients.client("shared-informers")?,
        metrics.clone(),
        controllers_stop.clone(),
    )
    .with_min_resync_period(settings.min_resync_period)
    .with_initial_list(settings.initial_list);

    // A standby is ready once the stores it keeps warm have synced (a cold one holds none);
    // a leader is ready once every enabled controller has started or been found to lack its
    // API, and every store the started ones read has synced.
    let warm = settings
        .leader_election
        .as_ref()
        .is_some_and(|le| le.warm_standby);
    let leading = Arc::new(AtomicBool::new(false));
    let progress: Arc<std::sync::Mutex<Option<Progress>>> = Arc::default();
    let ready_informers = informers.clone();
    let ready_leading = leading.clone();
    let ready_progress = progress.clone();
    let readiness: serving::Readiness = Arc::new(move || {
        if !ready_leading.load(Ordering::SeqCst) {
            let unsynced = ready_informers.unsynced();
            return match unsynced.is_empty() {
                true => Ok(()),
                false => Err(serving::NotReady::StoresNotSynced(unsynced)),
            };
        }
        // Until the controllers are being started their stores may not even be registered.
        let progress = lock(&ready_progress);
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
        let unsynced = ready_informers.unsynced();
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
    });
    if let Some(secure) = &settings.secure_serving {
        serving::serve_secure(
            secure,
            metrics.clone(),
            readiness.clone(),
            settings.profiling,
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
            stop.clone(),
        )
        .await?;
    }

    let elector = match &settings.leader_election {
        Some(le) => Some(LeaderElector::new(
            clients.client("leader-election")?,
            LeaderElectionConfig {
                namespace: le.resource_namespace.clone(),
                name: le.resource_name.clone(),
                identity: identity.clone(),
                lease_duration: le.lease_duration,
                renew_deadline: le.renew_deadline,
                retry_period: le.retry_period,
            },
        )),
        None => None,
    };
    let lease_name = settings
        .leader_election
        .as_ref()
        .map(|le| le.resource_name.clone())
        .unwrap_or_default();
    let leader_gauge = metrics.leader.with_label_values(&[&lease_name]);
    let enabled: Vec<&'static Descriptor> = settings
        .enabled_controllers
        .iter()
        .map(|c| c.descriptor())
        .collect();
    // Each controller whose API is known to be served (or that needs none) can start at
    // once; the others wait for discovery, each on its own, so no answer holds up another.
    // A warm standby asks at once (reads only) and warms each controller found served; a
    // cold one asks nothing before it leads.
    let (found_tx, mut found_rx) = mpsc::unbounded_channel::<(&'static Descriptor, Found)>();
    let discover = || start_discovery(&enabled, &discovery, &found_tx, &controllers_stop);
    let mut discovering = None;
    if let Some(elector) = &elector {
        tracing::info!(
            identity,
            lease = lease_name,
            warm,
            "waiting to acquire the leader lease"
        );
        let stop_wait = stop.clone();
        let acquire = elector.acquire(async move { stop_wait.cancelled().await });
        let acquired = if warm {
            metrics.set_replica_state(ReplicaState::WarmStandby);
            for entry in enabled.iter().filter(|entry| entry.api.is_none()) {
                (entry.warm)(&informers, &settings);
            }
            discovering = Some(discover());
            let (acquired, answers) = warm_until(acquire, &mut found_rx, |entry| {
                (entry.warm)(&informers, &settings)
            })
            .await;
            // Handled below, as answers that come after the lease is acquired.
            for answer in answers {
                let _ = found_tx.send(answer);
            }
            acquired
        } else {
            metrics.set_replica_state(ReplicaState::ColdStandby);
            acquire.await
        };
        let acquired = acquired.map_err(|e| AppError::Leader(e.to_string()));
        if !matches!(acquired, Ok(true)) {
            // Stop the warm informers and discovery.
            controllers_stop.cancel();
            return acquired.map(|_| ());
        }
        leader_gauge.set(1);
    }
    metrics.set_replica_state(ReplicaState::Leader);
    leading.store(true, Ordering::SeqCst);
    // The lease is renewed from now on in a task of its own, so slow controller starts
    // (ServiceAccount retries, --controller-start-interval) never delay a renewal; dropping
    // the handle (any early return) stops the renewals.
    let (released_tx, released_rx) = tokio::sync::oneshot::channel::<()>();
    let mut hold = AbortOnDropHandle::new(tokio::spawn(async move {
        match elector {
            Some(elector) => elector
                .hold(async move {
                    let _ = released_rx.await;
                })
                .await
                .map_err(|e| AppError::Leader(e.to_string())),
            None => {
                let _ = released_rx.await;
                Ok(())
            }
        }
    }));

    for (controller, gate) in &settings.skipped_for_gates {
        tracing::info!(controller = %controller, gate, "controller is disabled by feature gate");
    }
    let launcher = Launcher {
        clients: &clients,
        metadata_client,
        informers: informers.clone(),
        metrics: metrics.clone(),
        settings: Arc::new(settings.clone()),
        shutdown: controllers_stop.clone(),
        stop: stop.clone(),
        clock,
    };
    let mut running: JoinSet<Result<(), AppError>> = JoinSet::new();
    let mut initial = Progress {
        discovering: discovering.unwrap_or_else(discover),
        started: Vec::new(),
    };
    drop(found_tx);
    for entry in enabled.iter().filter(|entry| entry.api.is_none()) {
        initial
            .started
            .push(launcher.launch(entry, &mut running).await?);
    }
    *lock(&progress) = Some(initial);
    let mut started_any = !running.is_empty();
    let mut said_idle = false;

    // Controllers run until SIGTERM, a lost lease, or one of them fails.

    let outcome: Result<(), AppError> = loop {
        // With nothing to run (all skipped), stay up and healthy instead of exiting into a
        // crash loop; the operator sees why in the log, and a group served later still
        // starts its controller.
        if running.is_empty()
            && !said_idle
            && lock(&progress)
                .as_ref()
                .is_some_and(|p| p.discovering.is_empty())
        {
            said_idle = true;
            tracing::warn!("no controller is running; kcm stays up until stopped");
        }
        tokio::select! {
            _ = stop.cancelled() => break Ok(()),
            lost = &mut hold => break Err(held(lost).err().unwrap_or_else(|| AppError::Leader("lease released unexpectedly".into()))),
            Some((entry, found)) = found_rx.recv() => {
                match found {
                    Found::NotServed => {
                        let api = lock(&progress).as_mut().and_then(|p| p.discovering.remove(entry.name));
                        tracing::warn!(controller = %entry.controller, api = api.as_deref().unwrap_or_default(), "the cluster does not serve this API; controller skipped until it does");
                    }
                    Found::Served => {
                        let pending = lock(&progress).as_ref().is_some_and(|p| p.discovering.contains_key(entry.name));
                        if !pending {
                            tracing::info!(controller = %entry.controller, "the cluster now serves the controller's API");
                        }
                        // Still pending for readiness until it has started.
                        match launcher.launch(entry, &mut running).await {
                            Ok(startup) => {
                                let mut progress = lock(&progress);
                                let progress = progress.get_or_insert_default();
                                progress.discovering.remove(entry.name);
                                progress.started.push(startup);
                                started_any = true;
                                said_idle = false;
                            }
                            Err(err) => break Err(err),
                        }
                    }
                }
            }
            Some(done) = running.join_next(), if !running.is_empty() => match done {
                Ok(Ok(())) if running.is_empty() && started_any => {
                    break Err(AppError::Controller("all", "every controller stopped".into()));
                }
                Ok(Ok(())) => {}
                Ok(Err(err)) => break Err(err),
                Err(join) => break Err(AppError::Controller("task", join.to_string())),
            },
        }
    };
    // Stop the controllers and give in-flight reconciles time to finish.
    controllers_stop.cancel();
    let finish = async { while running.join_next().await.is_some() {} };
    let grace = settings.controller_shutdown_timeout;
    if outcome.is_ok() && tokio::time::timeout(grace, finish).await.is_err() {
        tracing::warn!("controllers did not finish within {grace:?}; exiting anyway");
    }
    leading.store(false, Ordering::SeqCst);
    if outcome.is_ok() {
        // Hand the lease over at once instead of making the next leader wait it out.
        let _ = released_tx.send(());
        if let Err(err) = held(hold.await) {
            tracing::warn!(error = %err, "releasing the lease failed");
        }
    }
    leader_gauge.set(0);
    stop.cancel();
    outcome
}

/// Starts discovery of each of `enabled`'s APIs (those that need one): each answer is sent
/// on `found`, until `cancelled`. Returns the APIs asked for, by controller.
fn start_discovery(
    enabled: &[&'static Descriptor],
    client: &Client,
    found: &mpsc::UnboundedSender<(&'static Descriptor, Found)>,
    cancelled: &CancellationToken,
) -> BTreeMap<&'static str, String> {
    let mut discovering = BTreeMap::new();
    for &entry in enabled {
        let Some((group, version)) = entry.api else {
            continue;
        };
        let api = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        discovering.insert(entry.name, api.clone());
        let client = client.clone();
        let found = found.clone();
        let cancelled = cancelled.clone();
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

/// A warm standby's wait for the lease: each controller discovery finds served is warmed
/// meanwhile. Returns the outcome of `acquire` and every discovery answer received, in
/// order, for the leader to act on.
async fn warm_until<T>(
    acquire: impl Future<Output = T>,
    found: &mut mpsc::UnboundedReceiver<(&'static Descriptor, Found)>,
    mut warm: impl FnMut(&'static Descriptor),
) -> (T, Vec<(&'static Descriptor, Found)>) {
    let mut answers = Vec::new();
    let mut answered = |(entry, answer): (&'static Descriptor, Found)| {
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

/// The outcome of the lease-holding task.
fn held(outcome: Result<Result<(), AppError>, tokio::task::JoinError>) -> Result<(), AppError> {
    outcome.unwrap_or_else(|join| Err(AppError::Leader(join.to_string())))
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
    clients: &'a Clients,
    metadata_client: Client,
    informers: Informers,
    metrics: Metrics,
    settings: Arc<Settings>,
    shutdown: CancellationToken,
    /// SIGTERM/SIGINT, which also ends the wait between two controller starts.
    stop: CancellationToken,
    clock: Clock,
}

impl Launcher<'_> {
    /// Starts `entry` on `running`; its startup progress is returned for readiness.
    async fn launch(
        &self,
        entry: &'static Descriptor,
        running: &mut JoinSet<Result<(), AppError>>,
    ) -> Result<Startup, AppError> {
        tracing::info!(controller = %entry.controller, "starting controller");
        let name = entry.name;
        let startup = Startup::new(name);
        let run = (entry.run)(Context {
            client: self.clients.controller(entry.client).await?,
            metadata_client: self.metadata_client.clone(),
            informers: self.informers.clone(),
            metrics: self.metrics.clone(),
            settings: self.settings.clone(),
            shutdown: self.shutdown.clone(),
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
