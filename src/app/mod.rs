//! The process's life, in the phases kube-controller-manager goes through: connect (metrics,
//! one client per user, the shared informers: `connection`), serve (`/metrics`, `/healthz`,
//! `/readyz`, which `readiness` answers), wait to lead and hold the lease (`lease`; a warm
//! standby keeps its stores synced meanwhile), run the controllers (`launch`; one that needs an
//! API once `discovery` finds it served), and shut down (in-flight reconciles finish, the lease
//! is handed over). [`run_with_config`] reads as that life.

mod connection;
mod discovery;
mod error;
mod launch;
mod lease;
mod readiness;

use tokio_util::sync::CancellationToken;

use self::connection::Connection;
use self::discovery::Discovery;
pub use self::error::AppError;
use self::launch::{Controllers, Launcher, enabled_controllers};
use self::lease::lead;
use self::readiness::Standing;
use crate::explain::endpoint;
use crate::runtime::clock::{self, Clock};
use crate::runtime::connection::client::load_config;
use crate::runtime::leader::default_identity;
use crate::runtime::metrics::{Metrics, ReplicaState};
use crate::serving;
use crate::settings::Settings;

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

/// Cancels `stop` when `signal` (SIGTERM or SIGINT, or a test's own) resolves.
fn stop_on(signal: impl Future<Output = ()> + Send + 'static, stop: CancellationToken) {
    tokio::spawn(async move {
        signal.await;
        tracing::info!("termination signal received; shutting down");
        stop.cancel();
    });
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
