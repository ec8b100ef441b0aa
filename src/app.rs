//! Wires the process: client → serving (HTTPS, plain HTTP) → leader election → controllers → shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::join_all;
use kube::Client;
use tokio_util::sync::CancellationToken;

use crate::controllers::Context;
use crate::runtime::client::{ClientError, Clients, load_config};
use crate::runtime::clock::{self, Clock};
use crate::runtime::informer::Informers;
use crate::runtime::leader::{LeaderElectionConfig, LeaderElector, default_identity};
use crate::runtime::lock::lock;
use crate::runtime::metrics::Metrics;
use crate::runtime::serving;
use crate::runtime::startup::Startup;
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

/// Whether the cluster serves `group/version` (core group: `version` alone).
async fn api_served(client: &Client, group: &str, version: &str) -> bool {
    if group.is_empty() {
        return client
            .list_core_api_versions()
            .await
            .is_ok_and(|v| v.versions.iter().any(|x| x == version));
    }
    client
        .list_api_group_resources(&format!("{group}/{version}"))
        .await
        .is_ok()
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
    let clients = Clients::new(
        config,
        settings.kube_api_qps,
        settings.kube_api_burst.get(),
        &identity,
        metrics.rest_client.clone(),
    );
    let metadata_client = clients.client("metadata-informers")?;
    let discovery = clients.client("controller-discovery")?;
    let stop = CancellationToken::new();
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
    .with_min_resync_period(settings.min_resync_period);

    // Standbys are ready (they are healthy, waiting for the lease); a leader is ready once
    // every store it started has synced.
    let leading = Arc::new(AtomicBool::new(false));
    // The controllers this leader started, set once all are; until then it is not ready, as
    // their stores may not even be registered yet.
    let started: Arc<std::sync::Mutex<Option<Vec<Startup>>>> = Arc::default();
    let ready_informers = informers.clone();
    let ready_leading = leading.clone();
    let ready_started = started.clone();
    let readiness: serving::Readiness = Arc::new(move || {
        if !ready_leading.load(Ordering::SeqCst) {
            return Ok(());
        }
        let unsynced = ready_informers.unsynced();
        if !unsynced.is_empty() {
            return Err(serving::NotReady::StoresNotSynced(unsynced));
        }
        let started = lock(&ready_started);
        let Some(startups) = started.as_ref() else {
            return Err(serving::NotReady::ControllersStarting);
        };
        let pending: Vec<&'static str> = startups
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
    if let Some(elector) = &elector {
        tracing::info!(
            identity,
            lease = lease_name,
            "waiting to acquire the leader lease"
        );
        let stop_wait = stop.clone();
        let acquired = elector
            .acquire(async move { stop_wait.cancelled().await })
            .await
            .map_err(|e| AppError::Leader(e.to_string()))?;
        if !acquired {
            return Ok(());
        }
        leader_gauge.set(1);
    }
    leading.store(true, Ordering::SeqCst);

    let shared_settings = Arc::new(settings.clone());
    for (controller, gate) in &settings.skipped_for_gates {
        tracing::info!(controller = %controller, gate, "controller is disabled by feature gate");
    }
    let mut tasks = Vec::new();
    let mut startups = Vec::new();
    for entry in settings.enabled_controllers.iter().map(|c| c.descriptor()) {
        if let Some((group, version)) = entry.api
            && !api_served(&discovery, group, version).await
        {
            tracing::warn!(controller = %entry.controller, api = format!("{group}/{version}"), "the cluster does not serve this API; controller skipped");
            continue;
        }
        tracing::info!(controller = %entry.controller, "starting controller");
        let name = entry.name;
        let startup = Startup::new(name);
        startups.push(startup.clone());
        let run = (entry.run)(Context {
            client: clients.client(entry.client)?,
            metadata_client: metadata_client.clone(),
            informers: informers.clone(),
            metrics: metrics.clone(),
            settings: shared_settings.clone(),
            shutdown: controllers_stop.clone(),
            clock: clock.clone(),
            startup,
        });
        tasks.push(tokio::spawn(async move {
            run.await
                .map_err(|e| AppError::Controller(name, e.to_string()))
        }));
        // `--controller-start-interval`, jittered by up to 100% as upstream's.
        let interval = settings.controller_start_interval;
        if !interval.is_zero() {
            tokio::time::sleep(interval.mul_f64(1.0 + rand::random::<f64>())).await;
        }
    }
    *lock(&started) = Some(startups);

    // Controllers run until SIGTERM, a lost lease, or one of them fails.
    let (released_tx, released_rx) = tokio::sync::oneshot::channel::<()>();
    let hold = async {
        match &elector {
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
    };
    // With nothing to run (all skipped), stay up and healthy instead of exiting into a crash
    // loop; the operator sees why in the log.
    let idle = tasks.is_empty();
    if idle {
        tracing::warn!("no controller is running; kcm stays up until stopped");
    }
    let controllers_done = controllers_stop.clone();
    let wait_controllers = async move {
        if idle {
            std::future::pending::<()>().await;
        }
        let results = join_all(tasks).await;
        controllers_done.cancel();
        results
    };
    tokio::pin!(hold, wait_controllers);

    let outcome: Result<(), AppError> = tokio::select! {
        _ = stop.cancelled() => Ok(()),
        lost = &mut hold => Err(lost.err().unwrap_or_else(|| AppError::Leader("lease released unexpectedly".into()))),
        results = &mut wait_controllers => {
            let failure = results.into_iter().find_map(|r| match r {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(join) => Some(AppError::Controller("task", join.to_string())),
            });
            Err(failure.unwrap_or_else(|| AppError::Controller("all", "every controller stopped".into())))
        }
    };
    // Stop the controllers and give in-flight reconciles time to finish.
    controllers_stop.cancel();
    if outcome.is_ok()
        && !idle
        && tokio::time::timeout(settings.controller_shutdown_timeout, &mut wait_controllers)
            .await
            .is_err()
    {
        tracing::warn!(
            "controllers did not finish within {:?}; exiting anyway",
            settings.controller_shutdown_timeout
        );
    }
    leading.store(false, Ordering::SeqCst);
    if outcome.is_ok() {
        // Hand the lease over at once instead of making the next leader wait it out.
        let _ = released_tx.send(());
        if let Err(err) = hold.await {
            tracing::warn!(error = %err, "releasing the lease failed");
        }
    }
    leader_gauge.set(0);
    stop.cancel();
    outcome
}
