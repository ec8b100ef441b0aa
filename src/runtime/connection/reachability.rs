//! Why the API server cannot be reached, in the operator's words, and one account of it for
//! the whole process.
//!
//! A refused connection surfaces from kube as `ServiceError: client error (Connect)`: neither
//! the address nor the cause. [`cause`] walks the error's source chain for the cause
//! (connection refused, DNS lookup failed, TLS, timed out). [`Reachability`] sees every
//! request of every client (the client layer reports to it) and logs the outage, not the
//! requests: one line when the server becomes unreachable, a summary at growing intervals
//! while it stays so, one line when it answers again. The sites that fail (leader election,
//! informers, discovery) then log connection failures at debug only.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::lock::lock;

/// Why a request never got an HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    Refused,
    Reset,
    Unreachable,
    TimedOut,
    /// The resolver's message.
    Dns(String),
    /// rustls' message.
    Tls(String),
    /// Any other transport failure: the innermost message.
    Other(String),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Refused => f.write_str("connection refused"),
            Cause::Reset => f.write_str("connection reset"),
            Cause::Unreachable => f.write_str("network unreachable"),
            Cause::TimedOut => f.write_str("timed out"),
            Cause::Dns(message) => write!(f, "DNS lookup failed: {message}"),
            Cause::Tls(message) => write!(f, "TLS: {message}"),
            Cause::Other(message) => f.write_str(message),
        }
    }
}

/// The transport cause of `err`, or `None` when the server answered (an API status, a body
/// that does not decode, ...): only then is the failure about reaching the server.
pub fn cause(err: &(dyn StdError + 'static)) -> Option<Cause> {
    let chain: Vec<&(dyn StdError + 'static)> =
        std::iter::successors(Some(err), |e| (*e).source()).collect();
    // Status errors carry no source; an answered request is never a connection failure.
    if chain
        .iter()
        .any(|e| matches!(e.downcast_ref::<kube::Error>(), Some(kube::Error::Api(_))))
    {
        return None;
    }
    for (depth, e) in chain.iter().enumerate() {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(Cause::Tls(tls.to_string()));
        }
        if e.to_string() == "dns error" {
            let detail = chain
                .get(depth + 1)
                .map_or_else(|| "unknown error".to_string(), |inner| inner.to_string());
            return Some(Cause::Dns(detail));
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if let Some(tls) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                return Some(Cause::Tls(tls.to_string()));
            }
            use std::io::ErrorKind as K;
            let known = match io.kind() {
                K::ConnectionRefused => Some(Cause::Refused),
                K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => Some(Cause::Reset),
                K::NetworkUnreachable | K::HostUnreachable | K::NetworkDown => {
                    Some(Cause::Unreachable)
                }
                K::TimedOut => Some(Cause::TimedOut),
                _ => None,
            };
            if known.is_some() {
                return known;
            }
        }
        if e.is::<tokio::time::error::Elapsed>() {
            return Some(Cause::TimedOut);
        }
    }
    // hyper-util's connect failures ("client error (Connect)") and hyper's own transport
    // errors, with causes not classified above: the innermost message says most.
    let transport = chain.iter().any(|e| {
        let text = e.to_string();
        text.starts_with("client error (")
            || text.starts_with("tcp connect error")
            || matches!(
                e.downcast_ref::<kube::Error>(),
                Some(kube::Error::HyperError(_))
            )
    });
    transport.then(|| Cause::Other(chain.last().map(|e| e.to_string()).unwrap_or_default()))
}

/// Logs a failed list/watch of `resource` (the watcher retries it with backoff): a warning,
/// or a debug line when the server was not reached, as [`Reachability`] reports the outage
/// once instead of once per resource and retry.
pub fn watch_failed(resource: &str, err: &(dyn StdError + 'static)) {
    match cause(err) {
        Some(cause) => {
            tracing::debug!(resource, %cause, "list/watch failed; retrying with backoff");
        }
        None => tracing::warn!(resource, error = %err, "list/watch failed; retrying with backoff"),
    }
}

/// The first summary of an outage comes this long after its first failure; each later one
/// after as long again as the outage has lasted, at most [`SUMMARY_MAX_INTERVAL`] apart.
const FIRST_SUMMARY: Duration = Duration::from_secs(5);
const SUMMARY_MAX_INTERVAL: Duration = Duration::from_secs(300);

/// Whether the API server answers, as every client's requests find it; logs the outages.
#[derive(Clone)]
pub struct Reachability {
    inner: Arc<Inner>,
}

struct Inner {
    server: String,
    /// Set while an outage is open, so the success path of every request stays lock-free.
    down: AtomicBool,
    outage: Mutex<Option<Outage>>,
}

struct Outage {
    since: Instant,
    failures: u64,
    cause: Cause,
    next_summary: Duration,
}

/// What [`Reachability`] logs, returned so tests read it without a subscriber.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    Unreachable {
        cause: Cause,
    },
    StillUnreachable {
        seconds: u64,
        failures: u64,
        cause: Cause,
    },
    Reachable {
        seconds: u64,
        failures: u64,
    },
}

impl Reachability {
    /// `server` is the API server's URL as configured (kubeconfig or in-cluster).
    pub fn new(server: impl Into<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                server: server.into(),
                down: AtomicBool::new(false),
                outage: Mutex::new(None),
            }),
        }
    }

    pub fn server(&self) -> &str {
        &self.inner.server
    }

    /// A request failed for `cause` at `now`; logs when that opens an outage or when a
    /// summary (with the latest cause) is due.
    pub fn failed(&self, cause: Cause, now: Instant) -> Option<Report> {
        let mut outage = lock(&self.inner.outage);
        self.inner.down.store(true, Ordering::SeqCst);
        let report = match outage.as_mut() {
            None => {
                *outage = Some(Outage {
                    since: now,
                    failures: 1,
                    cause: cause.clone(),
                    next_summary: FIRST_SUMMARY,
                });
                Some(Report::Unreachable { cause })
            }
            Some(open) => {
                open.failures += 1;
                let lasted = now.saturating_duration_since(open.since);
                // A new cause (e.g. refused and timed out from the endpoints of an HA
                // server) is told in the next summary, not at once: alternating causes must
                // not log a line per failed request.
                open.cause = cause.clone();
                if lasted >= open.next_summary {
                    open.next_summary = lasted + lasted.min(SUMMARY_MAX_INTERVAL);
                    Some(Report::StillUnreachable {
                        seconds: lasted.as_secs(),
                        failures: open.failures,
                        cause,
                    })
                } else {
                    None
                }
            }
        };
        if let Some(report) = &report {
            self.log(report);
        }
        report
    }

    /// The server answered at `now` (whatever the status); closes an open outage.
    pub fn answered(&self, now: Instant) -> Option<Report> {
        if !self.inner.down.load(Ordering::SeqCst) {
            return None;
        }
        let closed = lock(&self.inner.outage).take()?;
        self.inner.down.store(false, Ordering::SeqCst);
        let report = Report::Reachable {
            seconds: now.saturating_duration_since(closed.since).as_secs(),
            failures: closed.failures,
        };
        self.log(&report);
        Some(report)
    }

    fn log(&self, report: &Report) {
        let server = self.server();
        match report {
            Report::Unreachable { cause } => {
                tracing::warn!(server, %cause, "API server {server} unreachable: {cause}");
            }
            Report::StillUnreachable {
                seconds,
                failures,
                cause,
            } => tracing::warn!(
                server,
                %cause,
                "API server {server} unreachable for {seconds}s ({failures} failed requests): {cause}"
            ),
            Report::Reachable { seconds, failures } => tracing::info!(
                server,
                "API server {server} reachable again after {seconds}s ({failures} failed requests)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(kind: std::io::ErrorKind) -> kube::Error {
        kube::Error::Service(Box::new(std::io::Error::new(kind, "os error")))
    }

    #[test]
    fn causes_are_read_from_the_source_chain() {
        assert_eq!(
            cause(&io(std::io::ErrorKind::ConnectionRefused)),
            Some(Cause::Refused)
        );
        assert_eq!(
            cause(&io(std::io::ErrorKind::TimedOut)),
            Some(Cause::TimedOut)
        );
        assert_eq!(
            cause(&io(std::io::ErrorKind::ConnectionReset)),
            Some(Cause::Reset)
        );
        let tls = kube::Error::Service(Box::new(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        )));
        assert_eq!(
            cause(&tls).map(|c| c.to_string()),
            Some("TLS: invalid peer certificate: UnknownIssuer".into())
        );
        let status = kube::Error::Api(Box::new(kube::core::Status::failure(
            "busy",
            "TooManyRequests",
        )));
        assert_eq!(cause(&status), None);
        let decode = kube::Error::SerdeError(serde_json::from_str::<u8>("x").unwrap_err());
        assert_eq!(cause(&decode), None);
    }

    #[test]
    fn an_outage_is_one_line_then_growing_summaries_then_one_line() {
        let reach = Reachability::new("https://10.0.0.1:6443");
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        assert_eq!(
            reach.failed(Cause::Refused, at(0)),
            Some(Report::Unreachable {
                cause: Cause::Refused
            })
        );
        let summaries: Vec<(u64, Report)> = (1..=100)
            .filter_map(|s| reach.failed(Cause::Refused, at(s)).map(|r| (s, r)))
            .collect();
        let times: Vec<u64> = summaries.iter().map(|(s, _)| *s).collect();
        assert_eq!(times, [5, 10, 20, 40, 80]);
        assert_eq!(
            summaries[1].1,
            Report::StillUnreachable {
                seconds: 10,
                failures: 11,
                cause: Cause::Refused
            }
        );
        // Alternating causes (the endpoints of an HA server) log no line per failure; the
        // latest cause is told in the next summary.
        for s in 101..160 {
            let cause = if s % 2 == 0 {
                Cause::TimedOut
            } else {
                Cause::Refused
            };
            assert_eq!(reach.failed(cause, at(s)), None, "at {s} s");
        }
        assert_eq!(
            reach.failed(Cause::TimedOut, at(160)),
            Some(Report::StillUnreachable {
                seconds: 160,
                failures: 161,
                cause: Cause::TimedOut
            })
        );
        assert_eq!(
            reach.answered(at(161)),
            Some(Report::Reachable {
                seconds: 161,
                failures: 161
            })
        );
        assert_eq!(reach.answered(at(162)), None);
    }

    #[test]
    fn summaries_are_at_most_five_minutes_apart() {
        let reach = Reachability::new("https://x:6443");
        let start = Instant::now();
        let times: Vec<u64> = (0..=2000)
            .filter(|s| {
                reach
                    .failed(Cause::Refused, start + Duration::from_secs(*s))
                    .is_some()
            })
            .collect();
        assert_eq!(
            times,
            [0, 5, 10, 20, 40, 80, 160, 320, 620, 920, 1220, 1520, 1820]
        );
    }
}
