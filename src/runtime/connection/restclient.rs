//! client-go's REST client metrics (`k8s.io/component-base/metrics/prometheus/restclient`),
//! with upstream's names, label sets, help texts and buckets, so dashboards built for
//! kube-controller-manager read kcm unchanged. Every client of the process records into the
//! same families, as client-go's global metrics do; [`super::client`] records them.

use std::sync::OnceLock;

use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

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

/// The verbs whose series a client keeps resolved: each label lookup hashes the label values
/// and takes the family's lock, three times a request otherwise.
const RESOLVED_VERBS: [http::Method; 5] = [
    http::Method::GET,
    http::Method::PUT,
    http::Method::PATCH,
    http::Method::POST,
    http::Method::DELETE,
];

/// One client's view of the families: its host's series, each resolved at its first use
/// (a series appears once used, as in client-go).
pub struct HostMetrics {
    families: RestClientMetrics,
    host: Box<str>,
    /// Per verb of [`RESOLVED_VERBS`]: rate limiter and request durations.
    durations: [OnceLock<(Histogram, Histogram)>; RESOLVED_VERBS.len()],
}

impl HostMetrics {
    pub fn new(families: RestClientMetrics, host: &str) -> Self {
        Self {
            families,
            host: host.into(),
            durations: Default::default(),
        }
    }

    /// `rest_client_rate_limiter_duration_seconds` and `rest_client_request_duration_seconds`
    /// for `verb` on this host.
    pub fn durations(&self, verb: &http::Method) -> (Histogram, Histogram) {
        let resolve = || {
            let labels = [verb.as_str(), &*self.host];
            (
                self.families
                    .rate_limiter_duration
                    .with_label_values(&labels),
                self.families.request_duration.with_label_values(&labels),
            )
        };
        match RESOLVED_VERBS.iter().position(|resolved| resolved == verb) {
            Some(slot) => self.durations[slot].get_or_init(resolve).clone(),
            None => resolve(),
        }
    }

    /// Counts one answer (or `ERROR_CODE`) in `rest_client_requests_total`.
    pub fn count(&self, code: &str, verb: &http::Method) {
        self.families
            .requests
            .with_label_values(&[code, verb.as_str(), &self.host])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(registry: &Registry, name: &str) -> Vec<Vec<(String, String)>> {
        registry
            .gather()
            .iter()
            .filter(|family| family.name() == name)
            .flat_map(|family| family.get_metric().iter())
            .map(|metric| {
                metric
                    .get_label()
                    .iter()
                    .map(|pair| (pair.name().to_string(), pair.value().to_string()))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_hosts_series_appear_once_used_under_its_verb_and_host() {
        let registry = Registry::new();
        let families = RestClientMetrics::register(&registry).expect("registered");
        let host = HostMetrics::new(families.clone(), "10.0.0.1:6443");
        assert!(series(&registry, "rest_client_request_duration_seconds").is_empty());

        let (_, put) = host.durations(&http::Method::PUT);
        put.observe(0.01);
        // Resolved once: the same series again, not a second one.
        host.durations(&http::Method::PUT).1.observe(0.02);
        // A verb outside the resolved ones is looked up each time, under its own name.
        host.durations(&http::Method::OPTIONS).0.observe(0.0);
        host.count("201", &http::Method::POST);

        let labels = |verb: &str| {
            vec![
                ("host".to_string(), "10.0.0.1:6443".to_string()),
                ("verb".to_string(), verb.to_string()),
            ]
        };
        assert_eq!(
            series(&registry, "rest_client_request_duration_seconds"),
            [labels("OPTIONS"), labels("PUT")]
        );
        assert_eq!(
            families
                .request_duration
                .with_label_values(&["PUT", "10.0.0.1:6443"])
                .get_sample_count(),
            2
        );
        assert_eq!(
            families
                .requests
                .with_label_values(&["201", "POST", "10.0.0.1:6443"])
                .get(),
            1
        );
    }
}
