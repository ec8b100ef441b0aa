//! The kube clients: configuration lookup as kube-controller-manager does it, identifying
//! user agents, client-go's client-side rate limit (`--kube-api-qps`/`--kube-api-burst`),
//! one bucket per client as upstream, and client-go's REST client metrics.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Request, Response};
use kube::client::{Body, ClientBuilder, DynBody};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use prometheus::Histogram;
use tokio_util::sync::CancellationToken;
use tower::{BoxError, Layer, Service, ServiceExt};

use super::credentials::{
    CredentialsError, NAMESPACE, ServiceAccountTokens, TokenCell, TokenPolicy,
};
use super::reachability::{self, Reachability};
use super::restclient::{ERROR_CODE, HostMetrics, RestClientMetrics};
use super::transport;
use crate::lock::lock;
use crate::runtime::backoff::TokenBucket;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("reading kubeconfig {path}: {}", kubeconfig_cause(.source))]
    Kubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no cluster configuration: no --kubeconfig; {}; not in a cluster: {in_cluster}",
        kubeconfig_lookup(.kubeconfig)
    )]
    NoConfig {
        kubeconfig: kube::config::KubeconfigError,
        in_cluster: kube::config::InClusterError,
    },
    #[error("invalid user agent: {0}")]
    UserAgent(#[from] http::header::InvalidHeaderValue),
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error(transparent)]
    Transport(#[from] transport::TransportError),
}

/// kube's message for a kubeconfig that cannot be used, without its debug-quoted path
/// (the caller names the file once).
fn kubeconfig_cause(err: &kube::config::KubeconfigError) -> String {
    match err {
        kube::config::KubeconfigError::ReadConfig(io, _) => io.to_string(),
        kube::config::KubeconfigError::FindPath => {
            "no $KUBECONFIG and no home directory for ~/.kube/config".into()
        }
        other => other.to_string(),
    }
}

/// Why kube's kubeconfig lookup failed, naming the file it tried once.
fn kubeconfig_lookup(err: &kube::config::KubeconfigError) -> String {
    match err {
        kube::config::KubeconfigError::ReadConfig(io, path) => {
            format!("reading kubeconfig {}: {io}", path.display())
        }
        other => kubeconfig_cause(other),
    }
}

/// `--kubeconfig` if given; else `$KUBECONFIG`, else `~/.kube/config` (kube's lookup);
/// else the in-cluster configuration.
pub async fn load_config(kubeconfig: Option<&Path>) -> Result<Config, ClientError> {
    match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).map_err(|source| ClientError::Kubeconfig {
                path: path.display().to_string(),
                source,
            })?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|source| ClientError::Kubeconfig {
                    path: path.display().to_string(),
                    source,
                })
        }
        // kube's `Config::infer`, with both causes kept for the message.
        None => match Config::from_kubeconfig(&KubeConfigOptions::default()).await {
            Ok(mut config) => {
                config.apply_debug_overrides();
                Ok(config)
            }
            Err(kubeconfig) => match Config::incluster() {
                Ok(mut config) => {
                    config.apply_debug_overrides();
                    Ok(config)
                }
                Err(in_cluster) => Err(ClientError::NoConfig {
                    kubeconfig,
                    in_cluster,
                }),
            },
        },
    }
}

/// Builds the process's API clients. As kube-controller-manager's client builder, every
/// client gets its own token bucket sized by `--kube-api-qps`/`--kube-api-burst`: each
/// controller, the shared informers, the metadata informers, discovery and leader election
/// are throttled apart, so one's backlog never delays another.
#[derive(Clone)]
pub struct Clients {
    config: Config,
    qps: f32,
    burst: u32,
    identity: String,
    metrics: RestClientMetrics,
    /// Set by `--use-service-account-credentials`: the controllers' own identities.
    service_accounts: Option<Arc<ServiceAccountTokens>>,
    /// Shared by every client: an unreachable server is one outage in the log, not one
    /// line per failed request of each client.
    reachability: Reachability,
    /// Where every client's token beats are counted from (see `TokenBucket::reserve_on_beat`).
    epoch: Instant,
}

impl Clients {
    pub fn new(
        config: Config,
        qps: f32,
        burst: u32,
        identity: &str,
        metrics: RestClientMetrics,
    ) -> Self {
        let server = config.cluster_url.to_string();
        let reachability = Reachability::new(server.trim_end_matches('/'));
        Self {
            config,
            qps,
            burst,
            identity: identity.to_string(),
            metrics,
            service_accounts: None,
            reachability,
            epoch: Instant::now(),
        }
    }

    /// From now on [`Clients::controller`] authenticates each controller as its own
    /// ServiceAccount, whose tokens the process gets with its own credentials (through a
    /// client of its own, upstream's `kube-controller-manager` client). Renewals stop with
    /// `stop`.
    pub fn use_service_account_credentials(
        &mut self,
        policy: TokenPolicy,
        stop: CancellationToken,
    ) -> Result<(), ClientError> {
        let core = self.client("kube-controller-manager")?;
        self.service_accounts = Some(Arc::new(ServiceAccountTokens::new(core, policy, stop)));
        Ok(())
    }

    /// The client of the controller whose client is named `name`: as [`Clients::client`], or,
    /// with service account credentials, authenticated only as ServiceAccount
    /// `kube-system/<name>` (the process's own credentials dropped, as upstream's
    /// `AnonymousClientConfig`) with a user agent ending, as upstream's, in that account's
    /// user name. The ServiceAccount is created if missing.
    pub async fn controller(&self, name: &str) -> Result<Client, ClientError> {
        let Some(accounts) = &self.service_accounts else {
            return self.client(name);
        };
        let token = accounts.cell(name).await?;
        let mut config = self.config.clone();
        config.auth_info = AuthInfo::default();
        self.build(
            config,
            &format!("system:serviceaccount:{NAMESPACE}:{name}"),
            Some(token),
        )
    }

    /// A new client named `name` (upstream's client name, e.g. `resourcequota-controller`)
    /// with a bucket of its own. The user agent starts with `kube-controller-manager/` so
    /// that the field manager the API server derives for plain updates is upstream's, and
    /// ends, as upstream's, with `/<name>`, after the process identity, so requests can be
    /// told apart by process and by client. Must be called inside the tokio runtime.
    pub fn client(&self, name: &str) -> Result<Client, ClientError> {
        self.build(self.config.clone(), name, None)
    }

    fn build(
        &self,
        mut config: Config,
        name: &str,
        token: Option<TokenCell>,
    ) -> Result<Client, ClientError> {
        let agent = format!(
            "kube-controller-manager/kcm-{} kcm/{}/{name}",
            env!("CARGO_PKG_VERSION"),
            self.identity
        );
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_str(&agent)?,
        ));
        let url = &config.cluster_url;
        // client-go labels its metrics with the URL's host (and port, when given).
        let host = match (url.host(), url.port_u16()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_string(),
            (None, _) => "none".to_string(),
        };
        let layer = ClientLayer(Arc::new(LayerState {
            bucket: Mutex::new(TokenBucket::new(f64::from(self.qps), self.burst)),
            epoch: self.epoch,
            metrics: HostMetrics::new(self.metrics.clone(), &host),
            token,
            reachability: self.reachability.clone(),
        }));
        let stack = transport::stack(&config)?;
        Ok(ClientBuilder::new(stack, config.default_namespace.clone())
            .with_layer(&layer)
            .build())
    }
}

/// A client's limiter, metrics and credentials, shared by its requests (one reference count
/// per request).
#[derive(Clone)]
struct ClientLayer(Arc<LayerState>);

struct LayerState {
    bucket: Mutex<TokenBucket>,
    /// The clients' shared beat: waiting requests of all clients go out together.
    epoch: Instant,
    metrics: HostMetrics,
    /// The ServiceAccount token each request carries, under service account credentials.
    token: Option<TokenCell>,
    reachability: Reachability,
}

impl<S> Layer<S> for ClientLayer
where
    S: Service<Request<Body>, Response = Response<Box<DynBody>>, Error = BoxError> + Send + 'static,
    S::Future: Send + 'static,
{
    type Service = Throttled<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Throttled {
            // Shared, so each request can wait for its token in its own future: a throttled
            // request never holds up a watch. The lock is held only to hand the request to
            // the stack, which is always ready (kube's hyper client queues it per connection);
            // a tower `Buffer` here cost a task and two channel hops per request.
            inner: Arc::new(tokio::sync::Mutex::new(inner)),
            layer: self.clone(),
        }
    }
}

/// Takes a token per request, in call order, as client-go's limiter does (watches take
/// none), and records client-go's REST client metrics.
struct Throttled<S> {
    inner: Arc<tokio::sync::Mutex<S>>,
    layer: ClientLayer,
}

/// Whether `uri` starts a watch (client-go neither throttles nor times those).
fn is_watch(uri: &http::Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

impl<S> Service<Request<Body>> for Throttled<S>
where
    S: Service<Request<Body>, Response = Response<Box<DynBody>>, Error = BoxError> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<TimedBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        let watch = is_watch(req.uri());
        let layer = self.layer.0.clone();
        // Reserve now, so tokens go out in call order even though requests wait apart.
        let delay =
            (!watch).then(|| lock(&layer.bucket).reserve_on_beat(Instant::now(), layer.epoch));
        let inner = self.inner.clone();
        let method = req.method().clone();
        Box::pin(async move {
            let start = Instant::now();
            let metrics = &layer.metrics;
            let durations = (!watch).then(|| metrics.durations(&method));
            if let (Some(delay), Some((rate_limiter, _))) = (delay, &durations) {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                rate_limiter.observe(start.elapsed().as_secs_f64());
            }
            // Without a token the request fails as a transport error would (counted so).
            let authorized = match &layer.token {
                Some(token) => token
                    .authorization()
                    .await
                    .map(|value| {
                        req.headers_mut().insert(http::header::AUTHORIZATION, value);
                    })
                    .map_err(BoxError::from),
                None => Ok(()),
            };
            let result = match authorized {
                Ok(()) => {
                    let response = {
                        let mut stack = inner.lock().await;
                        stack.ready().await?.call(req)
                    };
                    response.await
                }
                Err(err) => Err(err),
            };
            if let (Some(token), Ok(resp)) = (&layer.token, &result)
                && resp.status() == http::StatusCode::UNAUTHORIZED
            {
                token.refused();
            }
            match &result {
                Ok(resp) => {
                    layer.reachability.answered(Instant::now());
                    metrics.count(resp.status().as_str(), &method);
                }
                Err(err) => {
                    if let Some(cause) = reachability::cause(err.as_ref()) {
                        layer.reachability.failed(cause, Instant::now());
                    }
                    metrics.count(ERROR_CODE, &method);
                }
            }
            let timer = durations.map(|(_, request)| (request, start));
            match result {
                Ok(resp) => Ok(resp.map(|body| TimedBody { body, timer })),
                Err(err) => {
                    if let Some((histogram, start)) = timer {
                        histogram.observe(start.elapsed().as_secs_f64());
                    }
                    Err(err)
                }
            }
        })
    }
}

/// A response body that observes the request's duration once it has been read (or
/// dropped), as client-go's includes reading the response.
pub struct TimedBody {
    body: Box<DynBody>,
    timer: Option<(Histogram, Instant)>,
}

impl Drop for TimedBody {
    fn drop(&mut self) {
        if let Some((histogram, start)) = self.timer.take() {
            histogram.observe(start.elapsed().as_secs_f64());
        }
    }
}

impl http_body::Body for TimedBody {
    type Data = bytes::Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
