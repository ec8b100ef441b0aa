//! The plain-HTTP listener: `/metrics`, `/healthz`, `/livez`, `/readyz`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;

/// Says why the process is not ready, or `Ok` when it is.
pub type Readiness = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

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
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// Binds the listener (so a bad address fails at startup) and serves until `shutdown`.
pub async fn serve(
    addr: SocketAddr,
    metrics_registry: Metrics,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(address = %listener.local_addr()?, "serving /metrics, /healthz, /livez, /readyz");
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(HttpState {
            metrics: metrics_registry,
            readiness,
        });
    Ok(tokio::spawn(async move {
        let serve = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await });
        if let Err(err) = serve.await {
            tracing::error!(error = %err, "HTTP listener failed");
        }
    }))
}
