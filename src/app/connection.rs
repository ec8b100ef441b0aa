//! Connecting: the process's metrics, its clients (one per user, each with its own token
//! bucket) and the shared informers.

use kube::Client;
use tokio_util::sync::CancellationToken;

use super::error::AppError;
use crate::runtime::connection::client::Clients;
use crate::runtime::connection::credentials::TokenPolicy;
use crate::runtime::metrics::Metrics;
use crate::runtime::watching::informer::Informers;
use crate::settings::Settings;

/// What the process reaches the cluster with: its metrics, one client and bucket per user as
/// kube-controller-manager has them (the shared informers, the metadata informers, discovery,
/// leader election, and each controller when it starts), and the shared informers.
pub(super) struct Connection {
    pub(super) metrics: Metrics,
    pub(super) clients: Clients,
    pub(super) metadata_client: Client,
    pub(super) discovery_client: Client,
    pub(super) informers: Informers,
    /// Stops the controllers, and with them the shared informers and discovery.
    pub(super) controllers_stop: CancellationToken,
}

impl Connection {
    /// Connects as `identity`; with `--use-service-account-credentials` the controllers' tokens
    /// are renewed until `stop`.
    pub(super) fn open(
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
