//! The secure port's connections: the socket (with `--permit-address-sharing` and
//! `--permit-port-sharing`), TLS handshakes off the accept loop, and HTTP/1.1 or HTTP/2 by
//! ALPN with upstream's HTTP/2 limits. Connections end gracefully on shutdown, and after
//! upstream's idle timeout.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::identity;
use super::options::TlsOptions;
use super::tls::{self, Current};

/// A client that does not finish its handshake in this time is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Upstream's `ReadHeaderTimeout`: an HTTP/1.1 client must send its request head within
/// this time (a slow-header client cannot hold connections open).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// Upstream's `IdleTimeout` for HTTP/1.1 and HTTP/2 alike (it matches Go's client
/// keep-alive): a connection with no request in flight for this long is closed gracefully,
/// so an abandoned scraper's connection does not stay open for ever.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

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

/// Accepts connections until `shutdown`, each handshaken with the TLS configuration current at
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
        let config = tls::load(&current);
        let serve = serve.clone();
        connections.spawn(async move {
            let acceptor = TlsAcceptor::from(config.rustls.clone());
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
            let peer = config.peer(addr, stream.get_ref().1);
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
    peer: identity::Peer,
    serve: Serve,
) {
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let app = serve.app;
    let activity = Activity::default();
    let requests = activity.clone();
    let service =
        hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer.clone()));
            let in_flight = requests.start();
            let response = tower::ServiceExt::oneshot(app.clone(), request);
            async move {
                let response = response.await;
                drop(in_flight);
                response
            }
        });
    let idle = activity.idle_for(IDLE_TIMEOUT);
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
        until_shutdown(connection, &serve.shutdown, idle, |c| c.graceful_shutdown()).await
    } else {
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(io, service);
        until_shutdown(connection, &serve.shutdown, idle, |c| c.graceful_shutdown()).await
    };
    if let Err(err) = result {
        tracing::debug!(error = %err, "connection ended with an error");
    }
}

/// Drives `connection` to its end; on shutdown or once `idle` resolves, asks it to finish
/// its requests and close.
async fn until_shutdown<C>(
    connection: C,
    shutdown: &CancellationToken,
    idle: impl Future<Output = ()>,
    graceful: impl FnOnce(Pin<&mut C>),
) -> hyper::Result<()>
where
    C: Future<Output = hyper::Result<()>>,
{
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => return result,
        () = shutdown.cancelled() => graceful(connection.as_mut()),
        () = idle => graceful(connection.as_mut()),
    }
    connection.await
}

/// The requests in flight on one connection, for its idle timeout.
#[derive(Clone, Default)]
struct Activity(Arc<ActivityState>);

#[derive(Default)]
struct ActivityState {
    in_flight: AtomicUsize,
    changed: Notify,
}

/// Held while a request is served.
struct InFlight(Arc<ActivityState>);

impl Activity {
    fn start(&self) -> InFlight {
        self.0.in_flight.fetch_add(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
        InFlight(self.0.clone())
    }

    /// Resolves once no request has been in flight for `limit`.
    async fn idle_for(self, limit: Duration) {
        loop {
            // Registered before the check, so a change between the two is not missed.
            let changed = self.0.changed.notified();
            if self.0.in_flight.load(Ordering::SeqCst) > 0 {
                changed.await;
            } else if tokio::time::timeout(limit, changed).await.is_err() {
                return;
            }
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls `idle` as far as it gets without time passing; true once it has resolved.
    async fn resolved(idle: &mut Pin<&mut impl Future<Output = ()>>) -> bool {
        tokio::select! {
            biased;
            () = idle.as_mut() => true,
            () = tokio::task::yield_now() => false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn idle_only_after_the_limit_with_no_request_in_flight() {
        let activity = Activity::default();
        let idle = activity.clone().idle_for(IDLE_TIMEOUT);
        let mut idle = std::pin::pin!(idle);
        assert!(!resolved(&mut idle).await);

        tokio::time::advance(IDLE_TIMEOUT - Duration::from_secs(1)).await;
        let request = activity.start();
        assert!(!resolved(&mut idle).await);
        // A request in flight keeps the connection however long it takes.
        tokio::time::advance(IDLE_TIMEOUT * 3).await;
        assert!(!resolved(&mut idle).await);

        // The limit counts from the end of the last request.
        drop(request);
        assert!(!resolved(&mut idle).await);
        tokio::time::advance(IDLE_TIMEOUT - Duration::from_secs(1)).await;
        assert!(!resolved(&mut idle).await);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(resolved(&mut idle).await);
    }
}
