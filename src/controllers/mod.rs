//! The controllers, and what each is given to run: a client, the shared informers, the one
//! write path, events, queues and the shutdown signal. Controllers never call each other.

pub mod disruption;
mod error;
pub mod list;
pub mod resourceclaim;
pub mod resourcequota;
pub mod storageversiongc;
pub mod ttl;

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Client;
use tokio_util::sync::CancellationToken;

pub use self::error::{ControllerError, joined};
use crate::features::{FeatureGate, FeatureGates};
use crate::runtime::clock::Clock;
use crate::runtime::controller::ControllerBuilder;
use crate::runtime::metrics::Metrics;
use crate::runtime::rbac::Rule;
use crate::runtime::startup::Startup;
use crate::runtime::watching::informer::Informers;
use crate::runtime::writing::events::EventRecorder;
use crate::runtime::writing::events::sink::ApiSink;
use crate::runtime::writing::writer::ApiWriter;
pub use crate::settings::Controller;
use crate::settings::Settings;

/// What a controller runs with.
#[derive(Clone)]
pub struct Context {
    /// The controller's own client: its reads, writes, events and discovery share one
    /// token bucket that no other controller uses (upstream's per-controller client).
    pub client: Client,
    /// The metadata informers' client (upstream's `metadata-informers`), for the metadata
    /// watches a controller starts on demand.
    pub metadata_client: Client,
    pub informers: Informers,
    pub metrics: Metrics,
    pub settings: Arc<Settings>,
    /// Cancelled when the controller must stop: finish the item in hand, then return.
    pub shutdown: CancellationToken,
    pub clock: Clock,
    /// The controller's startup lines (stores synced, first full pass).
    pub startup: Startup,
}

impl Context {
    /// The write path for `controller` (its name labels the write metrics).
    pub fn writer(&self, controller: &'static str) -> ApiWriter {
        ApiWriter::new(
            controller,
            self.metrics.clone(),
            self.settings.shadow,
            self.settings.content_type,
        )
    }

    /// The controller's event recorder, with upstream's source component (its
    /// `EventSource{Component: ...}`); its writes are the controller's, its task ends with it.
    pub fn recorder(&self, component: &'static str, controller: &'static str) -> EventRecorder {
        EventRecorder::start(
            ApiSink::new(self.client.clone(), self.writer(controller)),
            component,
            controller,
            self.clock.clone(),
            self.shutdown.clone(),
        )
    }

    /// The declaration of the controller's wiring (watches, lanes, triggers); its reconciles
    /// are counted under its canonical name, as its startup lines.
    pub fn controller(&self) -> ControllerBuilder {
        ControllerBuilder::new(
            self.informers.clone(),
            self.metrics.clone(),
            self.startup.clone(),
            &self.shutdown,
        )
    }
}

/// Everything about one controller in one place (upstream's `ControllerDescriptor`): its
/// names, the gates it needs, its client, RBAC, and how it is started. `run` returns when
/// `Context::shutdown` is cancelled.
pub struct Descriptor {
    pub controller: Controller,
    /// kube-controller-manager's name, as accepted by --controllers.
    pub name: &'static str,
    /// Older names kube-controller-manager still accepts.
    pub aliases: &'static [&'static str],
    /// Gates that must all be on for the controller to start, checked in this order.
    pub required_gates: &'static [FeatureGate],
    /// The name of its client, as upstream's `ClientBuilder.ClientOrDie(name)`: it ends the
    /// user agent and owns a token bucket; with `--use-service-account-credentials` it is the
    /// ServiceAccount `kube-system/<client>` the controller runs as (bootstrap role
    /// `system:controller:<client>`).
    pub client: &'static str,
    /// The API group/version it needs; the controller is skipped when the cluster does not
    /// serve it, instead of crash-looping.
    pub api: Option<(&'static str, &'static str)>,
    /// Upstream's bootstrap RBAC role for the controller's service account
    /// (`system:controller:<name>`): what its own API calls need.
    pub rbac: &'static [Rule],
    /// What its shared informers list and watch (upstream makes those reads under
    /// kube-controller-manager's own identity, not the controller's role).
    pub informs: &'static [Rule],
    /// What it needs only with a gate on; upstream's bootstrap role has these rules only
    /// when the API server runs with that gate.
    pub gated: &'static [Gated],
    /// Starts the shared informers `run` will watch, under these settings, so a warm standby
    /// holds them synced before it leads: only the types it always watches (e.g. not the
    /// quota's discovered ones, which start when it leads). A controller with an `api` is
    /// warmed only once discovery finds it served.
    pub warm: fn(&Informers, &Settings),
    pub run: fn(Context) -> BoxFuture<'static, Result<(), ControllerError>>,
}

/// Rules a controller needs only with `gate` on.
#[derive(Debug, Clone, Copy)]
pub struct Gated {
    pub gate: FeatureGate,
    pub rbac: &'static [Rule],
    pub informs: &'static [Rule],
}

impl Descriptor {
    /// Its role's rules with `gates`: `rbac`, plus the gated rules of the gates that are on.
    pub fn rbac_with(&self, gates: &FeatureGates) -> Vec<Rule> {
        self.with(gates, self.rbac, |g| g.rbac)
    }

    /// Its informers' reads with `gates`.
    pub fn informs_with(&self, gates: &FeatureGates) -> Vec<Rule> {
        self.with(gates, self.informs, |g| g.informs)
    }

    fn with(
        &self,
        gates: &FeatureGates,
        always: &[Rule],
        part: fn(&Gated) -> &'static [Rule],
    ) -> Vec<Rule> {
        let gated = self.gated.iter().filter(|g| gates.enabled(g.gate));
        always.iter().chain(gated.flat_map(part)).copied().collect()
    }
}
