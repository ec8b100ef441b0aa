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
//! - **Each connection's socket is read through a buffer** of [`SOCKET_BUFFER`] bytes. rustls
//!   asks its transport for at most 4 KiB at a time, so a 4.5 KiB pod event took two
//!   `recvfrom` calls and a burst of events one per 4 KiB; through the buffer, one call takes
//!   whatever the socket holds, up to one TLS record, and rustls's reads are copies from it.
//!   tokio's `BufReader` does the buffering; [`BufferedTcp`] only lets hyper see it as a
//!   connection.
//! - **No tracing layer.** kube's logs each request's span and failures under a target kcm
//!   filters out, since kcm logs the same failures itself.
//!
//! Everything else is kube's: its connector (rustls, the kubeconfig's CA and client
//! certificate), connect and write timeouts, retries of 429/503/504, authentication and the
//! configured headers. kcm's kube build has no proxy support, so a kubeconfig's proxy URL is
//! refused, as kube's builder refuses it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::Config;
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ConfigExt, DynBody};
use tokio::io::{AsyncRead, AsyncWrite, BufReader, ReadBuf};
use tokio::net::TcpStream;
use tower::retry::RetryLayer;
use tower::util::BoxService;
use tower::{BoxError, ServiceBuilder, ServiceExt};

/// The most an HTTP/1 connection's read buffer holds: one TLS record.
pub const READ_BUFFER_LIMIT: usize = 16 * 1024;

/// How much of a connection's socket one read takes: one TLS record (16 KiB of data and its
/// header).
const SOCKET_BUFFER: usize = 16 * 1024 + 64;

/// A TCP connection read through a buffer (see the module's comment); writes go straight
/// to the socket.
struct BufferedTcp(BufReader<TcpStream>);

impl BufferedTcp {
    fn new(io: TokioIo<TcpStream>) -> TokioIo<Self> {
        TokioIo::new(Self(BufReader::with_capacity(
            SOCKET_BUFFER,
            io.into_inner(),
        )))
    }
}

impl Connection for BufferedTcp {
    fn connected(&self) -> Connected {
        self.0.get_ref().connected()
    }
}

impl AsyncRead for BufferedTcp {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for BufferedTcp {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

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
    let tcp = http.map_response(BufferedTcp::new);
    let mut connector = TimeoutConnector::new(config.rustls_https_connector_with_connector(tcp)?);
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
