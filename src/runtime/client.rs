//! The kube client: configuration lookup as kube-controller-manager does it, an identifying
//! user agent, and client-go's client-side rate limit (`--kube-api-qps`/`--kube-api-burst`).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use std::future::Future;
use std::pin::Pin;
use std::task::ready;
use tower::{Layer, Service};

use super::backoff::TokenBucket;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error("no usable cluster configuration (in-cluster or kubeconfig): {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("building the client: {0}")]
    Build(#[from] kube::Error),
    #[error("invalid user agent: {0}")]
    UserAgent(#[from] http::header::InvalidHeaderValue),
}

/// `--kubeconfig` if given; else in-cluster; else the usual kubeconfig lookup.
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
        None => Ok(Config::infer().await?),
    }
}

/// A client whose every request waits for a token (`qps` sustained, `burst` at once).
/// The user agent starts with `kube-controller-manager/` so that the field manager the API
/// server derives for plain updates is upstream's, and ends with the process identity so
/// requests can be told apart.
pub fn build_client(
    mut config: Config,
    qps: f32,
    burst: u32,
    identity: &str,
) -> Result<Client, ClientError> {
    let agent = format!(
        "kube-controller-manager/kcm-{} kcm/{identity}",
        env!("CARGO_PKG_VERSION")
    );
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(&agent)?,
    ));
    let builder = ClientBuilder::try_from(config)?;
    let layer = RateLimitLayer {
        bucket: Arc::new(Mutex::new(TokenBucket::new(f64::from(qps), burst))),
    };
    Ok(builder.with_layer(&layer).build())
}

#[derive(Clone)]
struct RateLimitLayer {
    bucket: Arc<Mutex<TokenBucket>>,
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            permitted: false,
        }
    }
}

/// Waits for a token in `poll_ready`, as tower's own rate limiter does; kube drives this
/// service from one buffer task, so requests take tokens in order.
struct RateLimited<S> {
    inner: S,
    bucket: Arc<Mutex<TokenBucket>>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    permitted: bool,
}

impl<S, Req> Service<Req> for RateLimited<S>
where
    S: Service<Req>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.permitted {
            if self.wait.is_none() {
                let delay = self
                    .bucket
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .reserve(Instant::now());
                if delay.is_zero() {
                    self.permitted = true;
                } else {
                    self.wait = Some(Box::pin(tokio::time::sleep(delay)));
                }
            }
            if let Some(wait) = self.wait.as_mut() {
                ready!(wait.as_mut().poll(cx));
                self.wait = None;
                self.permitted = true;
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        self.permitted = false;
        self.inner.call(req)
    }
}
