//! kcm's listeners: `/metrics`, `/healthz`, `/livez`, `/readyz`, and with `--profiling`
//! `/debug/pprof/` ([`pprof`]).
//!
//! The secure port (`--secure-port`, 10257) serves them over TLS behind delegated
//! authentication and authorization ([`auth`]), as kube-controller-manager does. The plain
//! port (`--port`) serves them without TLS or authentication, for local development only.

pub mod auth;
pub mod pprof;
pub mod tls;

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

use super::metrics::Metrics;
use crate::settings::SecureServing;

/// Where the API server publishes the client CA for delegated authentication.
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

fn router(metrics_registry: Metrics, readiness: Readiness, profiling: bool) -> Router {
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
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, ServingError> {
    let listener = bind(addr).await?;
    let local = listener
        .local_addr()
        .map_err(|source| ServingError::Listen { addr, source })?;
    tracing::warn!(address = %local, "serving /metrics, /healthz, /livez, /readyz over plain HTTP without authentication (--port); for development only");
    let app = router(metrics_registry, readiness, profiling);
    Ok(tokio::spawn(async move {
        let serve = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await });
        if let Err(err) = serve.await {
            tracing::error!(error = %err, "HTTP listener failed");
        }
    }))
}

/// Sets up TLS and delegated authentication/authorization, binds the secure port and serves
/// until `shutdown`. Fails at startup on a bad address, certificate, client CA or kubeconfig.
pub async fn serve_secure(
    settings: &SecureServing,
    metrics_registry: Metrics,
    readiness: Readiness,
    profiling: bool,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, ServingError> {
    let cert = match &settings.cert_key {
        Some((cert, key)) => tls::ServingCert::from_files(cert, key)?,
        None => tls::ServingCert::self_signed(settings.addr.ip(), settings.cert_dir.as_deref())?,
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
    let client_ca = client_ca(settings, token_reviews.as_ref()).await?;
    let config = tls::server_config(cert, client_ca)?;
    let guard = Arc::new(auth::Guard::new(auth::Delegation {
        token_reviews,
        access_reviews,
        token_ttl: settings.token_cache_ttl,
        authorized_ttl: settings.authorized_cache_ttl,
        unauthorized_ttl: settings.unauthorized_cache_ttl,
        always_allow_paths: settings.always_allow_paths.clone(),
    }));

    let addr = settings.addr;
    let tcp = bind(addr).await?;
    let listener = tls::TlsListener::new(tcp, config)
        .map_err(|source| ServingError::Listen { addr, source })?;
    let local = axum::serve::Listener::local_addr(&listener)
        .map_err(|source| ServingError::Listen { addr, source })?;
    tracing::info!(address = %local.addr, "serving /metrics, /healthz, /livez, /readyz over HTTPS");
    let app = router(metrics_registry, readiness, profiling)
        .layer(axum::middleware::from_fn_with_state(guard, auth::guard))
        .into_make_service_with_connect_info::<tls::Peer>();
    Ok(tokio::spawn(async move {
        let serve = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await });
        if let Err(err) = serve.await {
            tracing::error!(error = %err, "HTTPS listener failed");
        }
    }))
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

/// `--client-ca-file`, else (unless `--authentication-skip-lookup`) the `client-ca-file` of
/// ConfigMap `kube-system/extension-apiserver-authentication`, read once at start. A failed
/// lookup is logged and leaves client certificates unaccepted.
async fn client_ca(
    settings: &SecureServing,
    client: Option<&kube::Client>,
) -> Result<Option<Vec<rustls::pki_types::CertificateDer<'static>>>, ServingError> {
    if let Some(path) = &settings.client_ca_file {
        let pem = std::fs::read(path).map_err(|source| ServingError::Read {
            path: path.clone(),
            source,
        })?;
        return Ok(Some(tls::parse_ca_bundle(
            &path.display().to_string(),
            &pem,
        )?));
    }
    if settings.authentication_skip_lookup {
        return Ok(None);
    }
    let (namespace, name) = AUTHENTICATION_CONFIGMAP;
    let Some(client) = client else {
        tracing::warn!(
            "no --authentication-kubeconfig to look up client-ca-file in configmap/{name} in {namespace}: client certificate authentication is off"
        );
        return Ok(None);
    };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let pem = match api.get_opt(name).await {
        Ok(Some(map)) => map.data.and_then(|mut d| d.remove("client-ca-file")),
        Ok(None) => None,
        Err(err) => {
            tracing::warn!(error = %err, "cannot read configmap/{name} in {namespace}: client certificate authentication is off");
            return Ok(None);
        }
    };
    let Some(pem) = pem else {
        tracing::warn!(
            "configmap/{name} in {namespace} has no client-ca-file: client certificate authentication is off"
        );
        return Ok(None);
    };
    match tls::parse_ca_bundle("client-ca-file", pem.as_bytes()) {
        Ok(cas) => Ok(Some(cas)),
        Err(err) => {
            tracing::warn!(error = %err, "configmap/{name} in {namespace}: client certificate authentication is off");
            Ok(None)
        }
    }
}
