//! Running the controllers: each enabled one is launched with its context, at once when it
//! needs no API, else when discovery finds its API served; kcm fails when one fails, or when
//! the last one stops.

use std::sync::Arc;

use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

use super::connection::Connection;
use super::discovery::{Discovery, Found};
use super::error::AppError;
use super::lease::Held;
use super::readiness::{Progress, Standing};
use crate::controllers::{Context, Descriptor};
use crate::runtime::clock::Clock;
use crate::runtime::startup::Startup;
use crate::settings::Settings;

/// The enabled controllers, in canonical order.
pub(super) fn enabled_controllers(settings: &Settings) -> Vec<&'static Descriptor> {
    settings
        .enabled_controllers
        .iter()
        .map(|c| c.descriptor())
        .collect()
}

/// The leader's controllers: their tasks, and where they stand for readiness.
pub(super) struct Controllers<'a> {
    launcher: Launcher<'a>,
    tasks: JoinSet<Result<(), AppError>>,
    standing: Standing,
    /// Once every controller that started has stopped, kcm fails.
    started_any: bool,
    /// "No controller is running" was said, and no controller has started since.
    said_idle: bool,
}

impl<'a> Controllers<'a> {
    pub(super) fn new(launcher: Launcher<'a>, standing: Standing) -> Self {
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
    pub(super) async fn start(
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
    pub(super) async fn run(
        &mut self,
        discovery: &mut Discovery,
        lease: &mut Held,
        stop: &CancellationToken,
    ) -> Result<(), AppError> {
        loop {
            self.say_if_idle();
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                lost = lease.lost() => return Err(lost),
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
    pub(super) async fn stop(&mut self, clean: bool) {
        self.launcher.connection.controllers_stop.cancel();
        let finish = async { while self.tasks.join_next().await.is_some() {} };
        let grace = self.launcher.settings.controller_shutdown_timeout;
        if clean && tokio::time::timeout(grace, finish).await.is_err() {
            tracing::warn!("controllers did not finish within {grace:?}; exiting anyway");
        }
        self.standing.set_leading(false);
    }
}

/// What every controller is started with.
pub(super) struct Launcher<'a> {
    connection: &'a Connection,
    settings: Arc<Settings>,
    /// SIGTERM/SIGINT, which also ends the wait between two controller starts.
    stop: CancellationToken,
    clock: Clock,
}

impl<'a> Launcher<'a> {
    pub(super) fn new(
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
