//! The secure port's connections: the socket (with `--permit-address-sharing` and
//! `--permit-port-sharing`), TLS handshakes off the accept loop, and HTTP/1.1 or HTTP/2 by
//! ALPN with upstream's HTTP/2 limits. Connections end gracefully on shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::options::TlsOptions;
use super::tls::{self, Current};

/// A client that does not finish its handshake in this time is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Upstream's `ReadHeaderTimeout`: an HTTP/1.1 client must send its request head within
/// this time (a slow-header client cannot hold connections open).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// Upstream's HTTP/2 per-stream buffer and largest frame: 256 KiB, enough for 99% of API
/// request bodies in one frame; the connection's buffer is that times the stream limit.
const HTTP2_STREAM_BUFFER: u32 = 256 * 1024;

/// Binds `addr` as upstream's `CreateListener` does with its socket controls: SO_REUSEADDR
/// with `--permit-address-sharing`, SO_REUSEPORT with `--permit-port-sharing`. Go (like
/// tokio) sets SO_REUSEADDR on every Unix listener anyway, so a restart can bind while old
/// connections sit in TIME_WAIT; kcm keeps that, and the flag matters elsewhere only.
pub fn bind(addr: SocketAddr, options: &TlsOptions) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(cfg!(unix) || options.permit_address_sharing)?;
    #[cfg(unix)]
    socket.set_reuse_port(options.permit_port_sharing)?;
    #[cfg(not(unix))]
    if options.permit_port_sharing {
        tracing::warn!("--permit-port-sharing: SO_REUSEPORT is not available on this platform");
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

/// How each connection is served.
#[derive(Clone)]
pub struct Serve {
    pub app: Router,
    pub http2_max_streams: u32,
    pub shutdown: CancellationToken,
}

/// Accepts connections until `shutdown`, each handshaken with the TLS snapshot current at
/// its accept; waits for the open ones to finish before it returns.
pub async fn run(listener: TcpListener, current: Current, serve: Serve) {
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = serve.shutdown.cancelled() => break,
        };
        let (tcp, addr) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %err, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let snapshot = tls::load(&current);
        let serve = serve.clone();
        connections.spawn(async move {
            let acceptor = TlsAcceptor::from(snapshot.config.clone());
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(err)) => {
                    tracing::debug!(client = %addr, error = %err, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(client = %addr, "TLS handshake timed out");
                    return;
                }
            };
            let peer = snapshot.peer(addr, stream.get_ref().1);
            connection(stream, peer, serve).await;
        });
    }
    connections.close();
    connections.wait().await;
}

/// Serves one TLS connection: HTTP/2 when ALPN chose `h2` (as Go's server decides), else
/// HTTP/1.1.
async fn connection(
    stream: tokio_rustls::server::TlsStream<TcpStream>,
    peer: tls::Peer,
    serve: Serve,
) {
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let app = serve.app;
    let service =
        hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer.clone()));
            tower::ServiceExt::oneshot(app.clone(), request)
        });
    let io = TokioIo::new(stream);
    let result = if h2 {
        let streams = serve.http2_max_streams;
        let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        builder
            .max_concurrent_streams(streams)
            .initial_stream_window_size(HTTP2_STREAM_BUFFER)
            .initial_connection_window_size(
                HTTP2_STREAM_BUFFER
                    .saturating_mul(streams)
                    .min(i32::MAX as u32),
            )
            .max_frame_size(HTTP2_STREAM_BUFFER);
        let connection = builder.serve_connection(io, service);
        until_shutdown(connection, &serve.shutdown, |c| c.graceful_shutdown()).await
    } else {
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(io, service);
        until_shutdown(connection, &serve.shutdown, |c| c.graceful_shutdown()).await
    };
    if let Err(err) = result {
        tracing::debug!(error = %err, "connection ended with an error");
    }
}

/// Drives `connection` to its end; on shutdown, asks it to finish its requests and close.
async fn until_shutdown<C>(
    connection: C,
    shutdown: &CancellationToken,
    graceful: impl FnOnce(Pin<&mut C>),
) -> hyper::Result<()>
where
    C: Future<Output = hyper::Result<()>>,
{
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => return result,
        () = shutdown.cancelled() => graceful(connection.as_mut()),
    }
    connection.await
}
