//! Helpers for tests that use the server: polling with a deadline instead of fixed sleeps,
//! and raw HTTP requests for assertions on status lines and headers a client library hides.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Polls `check` every 10 ms until it returns true.
///
/// # Panics
/// When `timeout` passes first, naming `what` was awaited.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually_some(what, timeout, || {
        let done = check();
        async move { done.await.then_some(()) }
    })
    .await
}

/// Polls `check` every 10 ms until it yields a value, and returns it.
///
/// # Panics
/// When `timeout` passes first, naming `what` was awaited.
pub async fn eventually_some<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A raw HTTP response: status code, header block and body.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// `GET path` over a fresh HTTP/1.1 connection; `None` when nothing answers (yet).
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<RawResponse> {
    http_request(addr, "GET", path, None).await
}

/// `method path` with an optional JSON body over a fresh HTTP/1.1 connection; `None` when
/// nothing answers (yet).
pub async fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    json: Option<&str>,
) -> Option<RawResponse> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let body = json.map_or_else(String::new, |json| {
        format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
            json.len()
        )
    });
    let head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    let request = if body.is_empty() {
        format!("{head}\r\n")
    } else {
        format!("{head}{body}")
    };
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some(RawResponse {
        status,
        head: head.to_string(),
        body: body.to_string(),
    })
}
