//! kcm's listeners: `/metrics`, `/healthz`, `/livez`, `/readyz`, and with `--profiling`
//! `/debug/pprof/` ([`pprof`]), and the debugging routes the caller adds (`/debug/explain/`).
//!
//! The secure port (`--secure-port`, 10257) serves them over TLS behind delegated
//! authentication and authorization ([`auth`], of the caller [`identity`] describes), as
//! kube-controller-manager does: the TLS settings of the `--tls-*` flags and SNI certificates
//! ([`options`], [`tls`]), HTTP/1.1 or HTTP/2 by ALPN (`accept`), front-proxy
//! (request-header) authentication, and certificates and CAs reloaded as files and the
//! `extension-apiserver-authentication` ConfigMap change ([`reload`]). The plain port
//! (`--port`) serves them without TLS or authentication, for local development only.

mod accept;
pub mod auth;
pub mod identity;
pub mod options;
pub mod pprof;
pub mod reload;
pub mod tls;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use tokio_util::sync::CancellationToken;

use self::options::SecureServing;
use crate::runtime::metrics::Metrics;

/// Where the API server publishes the client CA and the front-proxy settings for delegated
/// authentication.
const AUTHENTICATION_CONFIGMAP: (&str, &str) =
    ("kube-system", "extension-apiserver-authentication");

/// Says why the process is not ready, or `Ok` when it is.
pub type Readiness = Arc<dyn Fn() -> Result<(), NotReady> + Send + Sync>;

/// Why `/readyz` answers 503 (its body).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    #[error("stores not synced: {}", .0.join(", "))]
    StoresNotSynced(Vec<String>),
    /// This leader has not started all of its controllers yet.
    #[error("controllers are starting")]
    ControllersStarting,
    /// Controllers whose API the cluster has not yet said it serves or not (`name (group/version)`).
    #[error("waiting for API discovery: {}", .0.join(", "))]
    DiscoveryPending(Vec<String>),
    /// The controllers whose stores are not synced.
    #[error("stores not synced for {}", .0.join(", "))]
    ControllersNotSynced(Vec<&'static str>),
}

#[derive(Debug, thiserror::Error)]
pub enum ServingError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {path}: {source}")]
    Kubeconfig {
        what: &'static str,
        path: PathBuf,
        source: kube::Error,
    },
    /// Upstream's words, when `--authentication-tolerate-lookup-failure` is false.
    #[error("unable to load configmap based request-header-client-ca-file: {0}")]
    Lookup(#[source] kube::Error),
}

#[derive(Clone)]
struct HttpState {
    metrics: Metrics,
    readiness: Readiness,
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}

async fn ready(State(state): State<HttpState>) -> impl IntoResponse {
    match (state.readiness)() {
        Ok(()) => (StatusCode::OK, "ok".to_string()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why.to_string()),
    }
}

/// The routes of both listeners; `debug` adds kcm's debugging routes
/// (`/debug/explain/…`), which the secure port guards as the others.
fn router(
    metrics_registry: Metrics,
    readiness: Readiness,
    profiling: bool,
    debug: Router,
) -> Router {
    let routes = if profiling {
        pprof::routes()
    } else {
        Router::new()
    };
    routes
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(HttpState {
            metrics: metrics_registry,
            readiness,
        })
        .merge(debug)
}

async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, ServingError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServingError::Listen { addr, source })
}

/// Binds the plain-HTTP listener (so a bad address fails at startup) and serves until
/// `shutdown`. No TLS, no authentication: for development.
pub async fn serve_plain(
    addr: SocketAddr,
    metrics_registry: Metrics,
    readiness: Readiness,
    profiling: bool,
    debug: Router,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, ServingError> {
    let listener = bind(addr).await?;
    let local = listener
        .local_addr()
        .map_err(|source| ServingError::Listen { addr, source })?;
    tracing::warn!(address = %local, "serving /metrics, /healthz, /livez, /readyz over plain HTTP without authentication (--port); for development only");
    let app = router(metrics_registry, readiness, profiling, debug);
    Ok(tokio::spawn(async move {
        let serve = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await });
        if let Err(err) = serve.await {
            tracing::error!(error = %err, "HTTP listener failed");
        }
    }))
}

/// Sets up TLS and delegated authentication/authorization, binds the secure port and serves
/// until `shutdown`, reloading certificates and CAs as they change. Fails at startup on a bad
/// address, certificate, CA, kubeconfig, or (unless tolerated) a failed cluster lookup.
pub async fn serve_secure(
    settings: &SecureServing,
    metrics_registry: Metrics,
    readiness: Readiness,
    profiling: bool,
    debug: Router,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, ServingError> {
    let (serving, generated) = match &settings.cert_key {
        Some(pair) => (Some(pair.clone()), None),
        None => {
            match tls::ServingCert::self_signed(settings.addr.ip(), settings.cert_dir.as_deref())? {
                tls::ServingSource::Files(cert, key) => (Some((cert, key)), None),
                tls::ServingSource::Generated(cert) => (None, Some(cert)),
            }
        }
    };
    let token_reviews = delegation_client(
        "--authentication-kubeconfig",
        settings.authentication_kubeconfig.as_deref(),
    )
    .await?;
    let access_reviews = delegation_client(
        "--authorization-kubeconfig",
        settings.authorization_kubeconfig.as_deref(),
    )
    .await?;
    let request_header_file = settings.request_header.client_ca_file.is_some();
    let lookup = !settings.authentication_skip_lookup
        && (settings.client_ca_file.is_none() || !request_header_file);
    let cluster = match (&token_reviews, lookup) {
        (Some(client), true) => Some(client.clone()),
        (None, true) => {
            warn_no_lookup_client(settings);
            None
        }
        (_, false) => None,
    };
    let sources = reload::Sources {
        serving,
        sni: settings.tls.sni_cert_keys.clone(),
        client_ca_file: settings.client_ca_file.clone(),
        request_header: request_header_file.then(|| settings.request_header.clone()),
        client_ca_from_cluster: cluster.is_some() && settings.client_ca_file.is_none(),
        request_header_from_cluster: cluster.is_some() && !request_header_file,
    };
    let mut reloader = reload::Reloader::start(
        sources,
        settings.tls.clone(),
        generated,
        metrics_registry.serving_reload_errors.clone(),
    )?;
    if let Some(client) = &cluster {
        match lookup_configmap(client).await {
            Ok(data) => {
                reloader.apply_configmap(data);
            }
            Err(err) if settings.tolerate_lookup_failure => {
                tracing::warn!(error = %err, "Error looking up in-cluster authentication configuration");
                tracing::warn!(
                    "Continuing without authentication configuration. This may treat all requests as anonymous."
                );
                tracing::warn!(
                    "To require authentication configuration lookup to succeed, set --authentication-tolerate-lookup-failure=false"
                );
            }
            Err(err) => return Err(ServingError::Lookup(err)),
        }
    }
    let current = tls::current(reloader.config()?);
    let guard = Arc::new(auth::Guard::new(auth::Delegation {
        token_reviews,
        access_reviews,
        token_ttl: settings.token_cache_ttl,
        authorized_ttl: settings.authorized_cache_ttl,
        unauthorized_ttl: settings.unauthorized_cache_ttl,
        always_allow_paths: settings.always_allow_paths.clone(),
    }));

    let addr = settings.addr;
    let listener = accept::bind(addr, &settings.tls)
        .map_err(|source| ServingError::Listen { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| ServingError::Listen { addr, source })?;
    tracing::info!(address = %local, http2 = !settings.tls.disable_http2, "serving /metrics, /healthz, /livez, /readyz over HTTPS");

    let (triggers, triggered) = tokio::sync::mpsc::channel(16);
    let file_events = reload::watch_files(&reloader.files(), triggers.clone());
    if let Some(client) = cluster {
        tokio::spawn(reload::watch_configmap(
            client,
            triggers.clone(),
            shutdown.clone(),
        ));
    }
    let reloads = tokio::spawn({
        let current = current.clone();
        let shutdown = shutdown.clone();
        async move {
            // Both keep reloads coming: file events, and a sender so the channel stays open
            // for the minute poll when nothing else holds one.
            let _file_events = file_events;
            let _sender = triggers;
            reloader.run(current, triggered, shutdown).await;
        }
    });
    let app = router(metrics_registry, readiness, profiling, debug)
        .layer(axum::middleware::from_fn_with_state(guard, auth::guard));
    let serve = accept::Serve {
        app,
        http2_max_streams: settings.tls.http2_max_streams(),
        shutdown,
    };
    Ok(tokio::spawn(async move {
        accept::run(listener, current, serve).await;
        reloads.abort();
    }))
}

/// Upstream's warnings when there is no client to look the ConfigMap up with.
fn warn_no_lookup_client(settings: &SecureServing) {
    let (namespace, name) = AUTHENTICATION_CONFIGMAP;
    if settings.client_ca_file.is_none() {
        tracing::warn!(
            "No authentication-kubeconfig provided in order to lookup client-ca-file in configmap/{name} in {namespace}, so client certificate authentication won't work."
        );
    }
    if settings.request_header.client_ca_file.is_none() {
        tracing::warn!(
            "No authentication-kubeconfig provided in order to lookup requestheader-client-ca-file in configmap/{name} in {namespace}, so request-header client certificate authentication won't work."
        );
    }
}

/// The ConfigMap's data once, at start (`None`: it does not exist). Upstream's warnings for
/// a missing ConfigMap, missing keys, and a forbidden read.
async fn lookup_configmap(
    client: &kube::Client,
) -> Result<Option<BTreeMap<String, String>>, kube::Error> {
    let (namespace, name) = AUTHENTICATION_CONFIGMAP;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let found = api.get_opt(name).await.inspect_err(|err| {
        if crate::runtime::connection::errors::is_forbidden(err) {
            tracing::warn!("Unable to get configmap/{name} in {namespace}.  Usually fixed by 'kubectl create rolebinding -n {namespace} ROLEBINDING_NAME --role=extension-apiserver-authentication-reader --serviceaccount=YOUR_NS:YOUR_SA'");
        }
    })?;
    let data = found.map(|cm| cm.data.unwrap_or_default());
    for (key, what) in [
        ("client-ca-file", "client certificate authentication"),
        (
            "requestheader-client-ca-file",
            "request-header client certificate authentication",
        ),
    ] {
        if !data.as_ref().is_some_and(|d| d.contains_key(key)) {
            tracing::warn!(
                "Cluster doesn't provide {key} in configmap/{name} in {namespace}, so {what} won't work."
            );
        }
    }
    Ok(data)
}

/// The client for TokenReviews or SubjectAccessReviews: from the given kubeconfig, else the
/// in-cluster config. As for kube-controller-manager, both are optional: outside a cluster
/// without a kubeconfig, that kind of review is not available (and logged).
async fn delegation_client(
    flag: &'static str,
    kubeconfig: Option<&Path>,
) -> Result<Option<kube::Client>, ServingError> {
    let fail = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ServingError::Kubeconfig {
            what: flag,
            path,
            source,
        }
    };
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| fail(path)(kube::Error::InferKubeconfig(e)))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .map_err(|e| fail(path)(kube::Error::InferKubeconfig(e)))?
        }
        None => match kube::Config::incluster() {
            Ok(config) => config,
            Err(err) => {
                tracing::warn!(error = %err, "no {flag} and no in-cluster config: requests that need the API server's review are refused");
                return Ok(None);
            }
        },
    };
    let client = kube::Client::try_from(config)
        .map_err(fail(kubeconfig.unwrap_or(Path::new("in-cluster config"))))?;
    Ok(Some(client))
}
