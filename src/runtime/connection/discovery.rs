//! Whether the cluster serves a controller's API, told apart from "not known yet".
//!
//! Only a definite answer skips a controller: the group/version missing from a discovery
//! that succeeded (404 for the group/version, or the core version absent from `/api`). Any
//! other failure (connection, timeout, 429, 5xx, ...) is retried with backoff, so a server
//! that is still starting, or one failed request right after the lease is taken, delays a
//! controller instead of dropping it for the life of the process. A group found not served is
//! checked again from time to time, so a group enabled later starts its controller then.
//!
//! Also the aggregated discovery document ([`aggregated`]) for what needs every served type.

use std::future::Future;
use std::time::Duration;

use http_body_util::BodyExt;
use kube::Client;
use kube::core::discovery::v2::APIGroupDiscoveryList;

use super::reachability;
use crate::runtime::backoff::RateLimiter;
use crate::runtime::protobuf;

/// Aggregated discovery, else plain JSON: a server without it (before Kubernetes 1.26)
/// answers with the legacy document.
const AGGREGATED_ACCEPT: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

/// A definite answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Served,
    NotServed,
}

/// Why an attempt gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The server answered with an error status other than 404.
    #[error("{code} {reason}: {message}")]
    Status {
        code: u16,
        reason: String,
        message: String,
    },
    /// The server was not reached (reported by the clients' `Reachability` already).
    #[error("{0}")]
    Unreachable(reachability::Cause),
    #[error("{0}")]
    Other(kube::Error),
}

impl From<kube::Error> for DiscoveryError {
    fn from(err: kube::Error) -> Self {
        if let Some(cause) = reachability::cause(&err) {
            return DiscoveryError::Unreachable(cause);
        }
        match err {
            kube::Error::Api(status) => DiscoveryError::Status {
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            other => DiscoveryError::Other(other),
        }
    }
}

/// How often and how long discovery tries.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// One request's limit: a hung discovery must not hold a controller back forever.
    pub attempt_timeout: Duration,
    /// Retries after a failed attempt: doubling from `retry_base` up to `retry_max`.
    pub retry_base: Duration,
    pub retry_max: Duration,
    /// Checks of an API found not served: doubling from `recheck_base` up to `recheck_max`.
    /// Frequent at first, as a cluster that has just started may still be adding groups.
    pub recheck_base: Duration,
    pub recheck_max: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            // client-go's discovery client allows 32 s; one group/version is a small answer.
            attempt_timeout: Duration::from_secs(10),
            retry_base: Duration::from_millis(500),
            retry_max: Duration::from_secs(30),
            recheck_base: Duration::from_secs(1),
            recheck_max: Duration::from_secs(30),
        }
    }
}

/// Where discovery documents are served: the core group's, or every other group's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// `/api`
    Core,
    /// `/apis`
    Groups,
}

impl Root {
    fn path(self) -> &'static str {
        match self {
            Root::Core => "/api",
            Root::Groups => "/apis",
        }
    }
}

/// `root` as one aggregated discovery document (`apidiscovery.k8s.io/v2`, GA since
/// Kubernetes 1.30), as client-go's discovery asks for it: every group, version and resource
/// in one request, where the legacy documents take one request per group/version. `None`
/// when the server answered in the legacy form.
pub async fn aggregated(
    client: &Client,
    root: Root,
) -> Result<Option<APIGroupDiscoveryList>, kube::Error> {
    let request = http::Request::get(root.path())
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    let response = protobuf::send(client, request, AGGREGATED_ACCEPT).await?;
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    if !content_type.is_some_and(is_aggregated_v2) {
        return Ok(None);
    }
    let body = response.into_body().collect().await?.to_bytes();
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(kube::Error::SerdeError)
}

/// Whether a `Content-Type` is aggregated discovery v2 (its parameters in any order).
fn is_aggregated_v2(content_type: &str) -> bool {
    let mut parts = content_type.split(';').map(str::trim);
    let media = parts.next();
    let params: Vec<&str> = parts.collect();
    media == Some("application/json")
        && ["g=apidiscovery.k8s.io", "v=v2", "as=APIGroupDiscoveryList"]
            .iter()
            .all(|p| params.contains(p))
}

/// One discovery request: is `group/version` (core group: `version` alone) served?
pub async fn probe(client: &Client, group: &str, version: &str) -> Result<Answer, kube::Error> {
    if group.is_empty() {
        let versions = client.list_core_api_versions().await?;
        return Ok(if versions.versions.iter().any(|v| v == version) {
            Answer::Served
        } else {
            Answer::NotServed
        });
    }
    match client
        .list_api_group_resources(&format!("{group}/{version}"))
        .await
    {
        Ok(_) => Ok(Answer::Served),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Answer::NotServed),
        Err(err) => Err(err),
    }
}

/// Probes until the cluster answers whether `api` is served; failed attempts are retried
/// with backoff, as in [`until_served`].
pub async fn answer<P, F>(api: &str, timing: Timing, mut probe: P) -> Answer
where
    P: FnMut() -> F,
    F: Future<Output = Result<Answer, kube::Error>>,
{
    let mut retries = RateLimiter::new(timing.retry_base, timing.retry_max, f64::INFINITY, 1);
    loop {
        let err = match tokio::time::timeout(timing.attempt_timeout, probe()).await {
            Ok(Ok(answer)) => return answer,
            Ok(Err(err)) => DiscoveryError::from(err),
            Err(_) => DiscoveryError::Timeout(timing.attempt_timeout),
        };
        let retry_in = retries.when(&(), std::time::Instant::now());
        match &err {
            DiscoveryError::Unreachable(_) => {
                tracing::debug!(api, error = %err, ?retry_in, "API discovery failed; retrying");
            }
            _ => tracing::warn!(api, error = %err, ?retry_in, "API discovery failed; retrying"),
        }
        tokio::time::sleep(retry_in).await;
    }
}

/// Probes until `api` is served, then resolves. Failed attempts are retried with backoff
/// (one line each, at debug when the server was not reached, which `Reachability` reports);
/// `not_served` is called once, at the first definite "not served", after which the API is
/// checked again per `timing`. Stop it by dropping the future.
pub async fn until_served<P, F>(api: &str, timing: Timing, mut probe: P, not_served: impl FnOnce())
where
    P: FnMut() -> F,
    F: Future<Output = Result<Answer, kube::Error>>,
{
    let mut rechecks = RateLimiter::new(timing.recheck_base, timing.recheck_max, f64::INFINITY, 1);
    let mut not_served = Some(not_served);
    while answer(api, timing, &mut probe).await == Answer::NotServed {
        match not_served.take() {
            Some(report) => report(),
            None => tracing::debug!(api, "API still not served"),
        }
        tokio::time::sleep(rechecks.when(&(), std::time::Instant::now())).await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use tokio::time::Instant;

    use super::*;

    #[test]
    fn only_an_aggregated_v2_answer_is_read_as_one() {
        assert!(is_aggregated_v2(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        ));
        assert!(is_aggregated_v2(
            "application/json; as=APIGroupDiscoveryList; g=apidiscovery.k8s.io; v=v2"
        ));
        // A server without aggregated discovery answers with the legacy document.
        assert!(!is_aggregated_v2("application/json"));
        assert!(!is_aggregated_v2(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        ));
    }

    fn status(code: u16) -> kube::Error {
        let mut status = kube::core::Status::failure("injected", "Reason");
        status.code = code;
        kube::Error::Api(Box::new(status))
    }

    /// A probe answering from a script; `None` hangs past the attempt timeout.
    type Script = VecDeque<Option<Result<Answer, kube::Error>>>;

    /// Runs `until_served` on a script with paused time: (resolved?, not_served calls,
    /// probes made, virtual seconds elapsed).
    async fn run(script: Script) -> (bool, usize, usize, u64) {
        let script = Arc::new(Mutex::new(script));
        let probes = Arc::new(Mutex::new(0usize));
        let skipped = Arc::new(Mutex::new(0usize));
        let start = Instant::now();
        let (p, s) = (probes.clone(), skipped.clone());
        let served = tokio::time::timeout(
            Duration::from_secs(3600),
            until_served(
                "policy/v1",
                Timing::default(),
                move || {
                    *p.lock().unwrap() += 1;
                    let next = script.lock().unwrap().pop_front();
                    async move {
                        match next {
                            Some(Some(answer)) => answer,
                            Some(None) => std::future::pending().await,
                            // Script exhausted: keep saying "not served".
                            None => Ok(Answer::NotServed),
                        }
                    }
                },
                move || *s.lock().unwrap() += 1,
            ),
        )
        .await
        .is_ok();
        let probes = *probes.lock().unwrap();
        let skipped = *skipped.lock().unwrap();
        (served, skipped, probes, start.elapsed().as_secs())
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_are_retried_until_the_answer() {
        let refused = kube::Error::Service(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "refused",
        )));
        let script: Script = [
            Some(Err(refused)),
            Some(Err(status(503))),
            Some(Err(status(429))),
            Some(Err(status(500))),
            None,
            Some(Ok(Answer::Served)),
        ]
        .into();
        let (served, skipped, probes, seconds) = run(script).await;
        assert!(served);
        assert_eq!((skipped, probes), (0, 6));
        // 0.5 + 1 + 2 + 4 s of backoff, 10 s for the hung attempt, 8 s after it.
        assert_eq!(seconds, 25);
    }

    #[tokio::test(start_paused = true)]
    async fn not_served_is_reported_once_and_rechecked_until_served() {
        let script: Script = [
            Some(Err(status(503))),
            Some(Ok(Answer::NotServed)),
            Some(Ok(Answer::NotServed)),
            Some(Err(status(500))),
            Some(Ok(Answer::NotServed)),
            Some(Ok(Answer::Served)),
        ]
        .into();
        let (served, skipped, probes, _) = run(script).await;
        assert!(served);
        assert_eq!((skipped, probes), (1, 6));
    }

    #[tokio::test(start_paused = true)]
    async fn rechecks_settle_at_the_maximum_period() {
        let (served, skipped, probes, seconds) = run(Script::new()).await;
        assert!(!served);
        assert_eq!(skipped, 1);
        // 1, 2, 4, 8, 16 s, then every 30 s for the rest of the hour.
        assert_eq!(seconds, 3600);
        // Probes at 0, 1, 3, 7, 15 and 31 s, then 118 more every 30 s.
        assert_eq!(probes, 6 + 118);
    }
}
