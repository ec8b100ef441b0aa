//! client-go's REST client metrics (`k8s.io/component-base/metrics/prometheus/restclient`),
//! with upstream's names, label sets, help texts and buckets, so dashboards built for
//! kube-controller-manager read kcm unchanged. Every client of the process records into the
//! same families, as client-go's global metrics do; [`super::client`] records them.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

/// client-go's latency buckets, for request and rate-limiter durations alike.
const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// Label value of `code` when no HTTP response came back (connection error, timeout).
pub const ERROR_CODE: &str = "<error>";

#[derive(Clone)]
pub struct RestClientMetrics {
    /// `rest_client_requests_total{code,method,host}`: every HTTP response (or `<error>`).
    pub requests: IntCounterVec,
    /// `rest_client_request_duration_seconds{verb,host}`: throttling, request and reading
    /// the response; watches are not observed, as in client-go.
    pub request_duration: HistogramVec,
    /// `rest_client_rate_limiter_duration_seconds{verb,host}`: time waiting for a token;
    /// watches take none, as in client-go.
    pub rate_limiter_duration: HistogramVec,
}

impl RestClientMetrics {
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let histogram = |name: &str, help: &str| -> prometheus::Result<HistogramVec> {
            let h = HistogramVec::new(
                HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec()),
                &["verb", "host"],
            )?;
            registry.register(Box::new(h.clone()))?;
            Ok(h)
        };
        let requests = IntCounterVec::new(
            Opts::new(
                "rest_client_requests_total",
                "Number of HTTP requests, partitioned by status code, method, and host.",
            ),
            &["code", "method", "host"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        Ok(Self {
            requests,
            request_duration: histogram(
                "rest_client_request_duration_seconds",
                "Request latency in seconds. Broken down by verb, and host.",
            )?,
            rate_limiter_duration: histogram(
                "rest_client_rate_limiter_duration_seconds",
                "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            )?,
        })
    }
}
