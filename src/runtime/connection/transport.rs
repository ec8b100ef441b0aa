//! The HTTP stack under each kube client: kube's own (`ClientBuilder::try_from(Config)`),
//! assembled here from kube's public parts because kube's builder does not let a caller
//! configure hyper's connections.
//!
//! What differs from kube's, and why:
//! - **Each HTTP/1 connection's read buffer is capped** at [`READ_BUFFER_LIMIT`]. hyper grows a
//!   connection's buffer while reads fill it (up to 400 KiB) and shrinks it only after a run
//!   of small reads, so the initial lists left every watch and pooled connection holding tens
//!   to hundreds of KiB for good: 2 MB over the 26 connections of the scale bench, a heap
//!   profile showed (benches/README.md). One TLS record is 16 KiB, so reads stay whole
//!   records.
//! - **No tracing layer.** kube's logs each request's span and failures under a target kcm
//!   filters out, since kcm logs the same failures itself.
//!
//! Everything else is kube's: its connector (rustls, the kubeconfig's CA and client
//! certificate), connect and write timeouts, retries of 429/503/504, authentication and the
//! configured headers. kcm's kube build has no proxy support, so a kubeconfig's proxy URL is
//! refused, as kube's builder refuses it.

use http::{Request, Response};
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::Config;
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ConfigExt, DynBody};
use tower::retry::RetryLayer;
use tower::util::BoxService;
use tower::{BoxError, ServiceBuilder, ServiceExt};

/// The most an HTTP/1 connection's read buffer holds: one TLS record.
pub const READ_BUFFER_LIMIT: usize = 16 * 1024;

/// The stack each client's own layers wrap, as kube's builder gives it.
pub type Stack = BoxService<Request<Body>, Response<Box<DynBody>>, BoxError>;

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("the kubeconfig's proxy-url {0}: kcm does not connect through a proxy")]
    Proxy(http::Uri),
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// Builds the stack for `config`.
pub fn stack(config: &Config) -> Result<Stack, TransportError> {
    if let Some(proxy) = &config.proxy_url {
        return Err(TransportError::Proxy(proxy.clone()));
    }
    let mut http = HttpConnector::new();
    // The scheme is the TLS connector's to check: it may be https.
    http.enforce_http(false);
    let mut connector = TimeoutConnector::new(config.rustls_https_connector_with_connector(http)?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let client = hyper_util::client::legacy::Builder::new(TokioExecutor::new())
        .http1_max_buf_size(READ_BUFFER_LIMIT)
        .build(connector);
    // kube's `gzip` feature: asks for gzip and decompresses the answers.
    #[cfg(feature = "gzip")]
    let client = ServiceBuilder::new()
        .layer(
            tower_http::decompression::DecompressionLayer::new()
                .no_br()
                .no_deflate()
                .no_zstd()
                .gzip(!config.disable_compression),
        )
        .service(client);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(client)
        .map_response(|response| {
            response.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>
            })
        });
    Ok(BoxService::new(service))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_url_is_refused_by_name() {
        let mut config = Config::new("https://10.0.0.1:6443".parse().expect("valid URL"));
        config.proxy_url = Some("http://proxy.example:3128".parse().expect("valid URL"));
        let error = stack(&config).expect_err("refused");
        assert_eq!(
            error.to_string(),
            "the kubeconfig's proxy-url http://proxy.example:3128/: kcm does not connect through a proxy"
        );
    }
}
