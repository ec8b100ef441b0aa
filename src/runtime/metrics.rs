//! One Prometheus registry for the process: client-go's workqueue and REST client families,
//! the `process_*` families, plus kcm's own reconcile, write, store, watch, shadow and
//! leader-election metrics.

use std::sync::{Arc, OnceLock};

use prometheus::core::Collector;
use prometheus::process_collector::ProcessCollector;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use super::connection::restclient::RestClientMetrics;
use super::queue::WorkqueueMetrics;
use crate::lock::lock;

fn family_names(collectors: &[&dyn Collector]) -> Vec<String> {
    collectors
        .iter()
        .flat_map(|c| c.desc())
        .map(|d| d.fq_name.clone())
        .collect()
}

/// What a replica is, for `kcm_replica_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaState {
    Leader,
    /// Not leading, its shared stores kept synced for a fast takeover.
    WarmStandby,
    /// Not leading, and holding no watch until it leads.
    ColdStandby,
}

impl ReplicaState {
    const ALL: [ReplicaState; 3] = [Self::Leader, Self::WarmStandby, Self::ColdStandby];

    fn label(self) -> &'static str {
        match self {
            Self::Leader => "leader",
            Self::WarmStandby => "warm_standby",
            Self::ColdStandby => "cold_standby",
        }
    }
}

/// The process's metric families. Every reconcile and every write takes a clone, so a clone
/// is one `Arc`, not one per family.
#[derive(Clone)]
pub struct Metrics(Arc<MetricFamilies>);

impl std::ops::Deref for Metrics {
    type Target = MetricFamilies;

    fn deref(&self) -> &MetricFamilies {
        &self.0
    }
}

pub struct MetricFamilies {
    registry: Registry,
    pub workqueue: WorkqueueMetrics,
    pub rest_client: RestClientMetrics,
    /// Reconciles by controller and result (`success`, `error`).
    pub reconciles: IntCounterVec,
    pub reconcile_duration: HistogramVec,
    /// API writes by controller, verb, resource (with `/subresource`) and result.
    pub api_writes: IntCounterVec,
    /// Writes `--shadow` held back because the live object differed, by controller, resource
    /// and reason (the upstream issue a fix of kcm's departs for, or `unexplained`).
    pub shadow_diffs: IntCounterVec,
    /// Objects skipped because they could not be handled (bad input), by controller and reason.
    pub skipped: IntCounterVec,
    /// Objects held in each shared store.
    pub store_objects: IntGaugeVec,
    /// Watch/list failures of each shared store.
    pub watch_errors: IntCounterVec,
    /// 1 once a shared store has completed its first list, 0 until then, by resource.
    pub store_synced: IntGaugeVec,
    /// 1 while this process holds the leader lease (upstream's name and label).
    pub leader: IntGaugeVec,
    /// What this replica is: 1 for its current `state` (`leader`, `warm_standby`,
    /// `cold_standby`), 0 for the others.
    pub replica_state: IntGaugeVec,
    /// Incremental quota usage sums the periodic full recompute found wrong (should stay 0).
    pub quota_usage_drift: IntCounterVec,
    /// Secure-port certificate, key and CA reloads that failed, by file (the previous one
    /// stays in use).
    pub serving_reload_errors: IntCounterVec,
    /// The families controllers registered themselves.
    registered: std::sync::Mutex<Vec<String>>,
    /// `--disabled-metrics`: families never exported.
    disabled: Arc<[String]>,
}

/// A labelled family (`new` is `IntCounterVec::new`, `IntGaugeVec::new`...), registered in
/// `registry`, for the struct to keep.
fn family<V: Collector + Clone + 'static>(
    registry: &Registry,
    new: fn(Opts, &[&str]) -> prometheus::Result<V>,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<V> {
    let family = new(Opts::new(name, help), labels)?;
    registry.register(Box::new(family.clone()))?;
    Ok(family)
}

impl Metrics {
    pub fn new() -> prometheus::Result<Self> {
        Self::with_disabled(&[])
    }

    /// The registry without the `disabled` families (`--disabled-metrics`, fully qualified
    /// names): as upstream, they are neither listed nor served; unknown names are ignored.
    pub fn with_disabled(disabled: &[String]) -> prometheus::Result<Self> {
        let registry = Registry::new();
        let reconcile_duration = HistogramVec::new(
            HistogramOpts::new(
                "kcm_reconcile_duration_seconds",
                "Time spent in one reconcile, by controller.",
            )
            .buckets(prometheus::exponential_buckets(0.0005, 2.0, 16)?),
            &["controller"],
        )?;
        registry.register(Box::new(reconcile_duration.clone()))?;
        let metrics = Self(Arc::new(MetricFamilies {
            workqueue: WorkqueueMetrics::register(&registry)?,
            rest_client: RestClientMetrics::register(&registry)?,
            reconciles: family(
                &registry,
                IntCounterVec::new,
                "kcm_reconcile_total",
                "Reconciles by controller and result.",
                &["controller", "result"],
            )?,
            reconcile_duration,
            api_writes: family(
                &registry,
                IntCounterVec::new,
                "kcm_api_writes_total",
                "API writes by controller, verb, resource and result.",
                &["controller", "verb", "resource", "result"],
            )?,
            shadow_diffs: family(
                &registry,
                IntCounterVec::new,
                "kcm_shadow_diffs_total",
                "Writes not made in --shadow mode because kcm disagreed with the live object, \
                 by the upstream issue whose fix explains it (reason).",
                &["controller", "resource", "reason"],
            )?,
            skipped: family(
                &registry,
                IntCounterVec::new,
                "kcm_skipped_objects_total",
                "Objects skipped as unprocessable, by controller and reason.",
                &["controller", "reason"],
            )?,
            store_objects: family(
                &registry,
                IntGaugeVec::new,
                "kcm_store_objects",
                "Objects in each shared store.",
                &["resource"],
            )?,
            watch_errors: family(
                &registry,
                IntCounterVec::new,
                "kcm_watch_errors_total",
                "List/watch errors of each shared store.",
                &["resource"],
            )?,
            store_synced: family(
                &registry,
                IntGaugeVec::new,
                "kcm_store_synced",
                "1 once a shared store has completed its first list, by resource.",
                &["resource"],
            )?,
            leader: family(
                &registry,
                IntGaugeVec::new,
                "leader_election_master_status",
                "1 while this process is the leader.",
                &["name"],
            )?,
            replica_state: family(
                &registry,
                IntGaugeVec::new,
                "kcm_replica_state",
                "1 for what this replica is now (leader, warm_standby, cold_standby), 0 for the others.",
                &["state"],
            )?,
            quota_usage_drift: family(
                &registry,
                IntCounterVec::new,
                "kcm_quota_usage_drift_total",
                "Incremental quota usage sums that differed from the periodic full recompute, by evaluated resource.",
                &["resource"],
            )?,
            serving_reload_errors: family(
                &registry,
                IntCounterVec::new,
                "kcm_serving_reload_errors_total",
                "Certificate, key and CA reloads of the secure port that failed (the previous one stays in use), by file.",
                &["file"],
            )?,
            registry,
            registered: Default::default(),
            disabled: disabled.into(),
        }));
        // `process_*` (CPU, memory, file descriptors, threads, start time), as every Go
        // component exports them.
        metrics.register(Box::new(ProcessCollector::for_self()))?;
        Ok(metrics)
    }

    /// Registers a controller's own metric family (upstream's names, e.g.
    /// `resourceclaim_controller_creates_total`).
    pub fn register(&self, collector: Box<dyn Collector>) -> prometheus::Result<()> {
        let names = family_names(&[collector.as_ref()]);
        self.registry.register(collector)?;
        lock(&self.registered).extend(names);
        Ok(())
    }

    /// Every metric family this process can export, also those with no sample yet (which
    /// `/metrics` leaves out), so alert rules can be checked against them.
    pub fn families(&self) -> Vec<String> {
        let wq = &self.workqueue;
        let mut names = family_names(&[
            &wq.depth,
            &wq.adds,
            &wq.queue_duration,
            &wq.work_duration,
            &wq.unfinished_work,
            &wq.longest_running_processor,
            &wq.retries,
            &self.rest_client.requests,
            &self.rest_client.request_duration,
            &self.rest_client.rate_limiter_duration,
            &self.reconciles,
            &self.reconcile_duration,
            &self.api_writes,
            &self.shadow_diffs,
            &self.skipped,
            &self.store_objects,
            &self.watch_errors,
            &self.store_synced,
            &self.leader,
            &self.replica_state,
            &self.quota_usage_drift,
            &self.serving_reload_errors,
        ]);
        names.extend(lock(&self.registered).iter().cloned());
        names.retain(|name| !self.disabled.contains(name));
        names.sort();
        names
    }

    /// Marks this replica as `state` (one of [`ReplicaState`]), the other states 0.
    pub fn set_replica_state(&self, state: ReplicaState) {
        for other in ReplicaState::ALL {
            self.replica_state
                .with_label_values(&[other.label()])
                .set(i64::from(other == state));
        }
    }

    /// `controller`'s reconcile series, to count and time its reconciles.
    pub fn reconciles_of(&self, controller: &'static str) -> ReconcileSeries {
        ReconcileSeries {
            metrics: self.clone(),
            controller,
            duration: OnceLock::new(),
            outcomes: Default::default(),
        }
    }

    /// The text exposition served on `/metrics`.
    pub fn render(&self) -> String {
        let mut families = self.registry.gather();
        families.retain(|family| !self.disabled.iter().any(|name| name == family.name()));
        TextEncoder::new()
            .encode_to_string(&families)
            .unwrap_or_else(|err| format!("# encoding failed: {err}\n"))
    }
}

/// One controller's `kcm_reconcile_duration_seconds` and `kcm_reconcile_total` series, each
/// resolved at its first use: a label lookup hashes and locks, and every reconcile took two.
pub struct ReconcileSeries {
    metrics: Metrics,
    controller: &'static str,
    duration: OnceLock<Histogram>,
    /// Success, error.
    outcomes: [OnceLock<IntCounter>; 2],
}

impl ReconcileSeries {
    /// Runs one reconcile, counting and timing it.
    pub async fn observe<T, E>(
        &self,
        reconcile: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let timer = self
            .duration
            .get_or_init(|| {
                self.metrics
                    .reconcile_duration
                    .with_label_values(&[self.controller])
            })
            .start_timer();
        let result = reconcile.await;
        timer.observe_duration();
        let (slot, outcome) = if result.is_ok() {
            (0, "success")
        } else {
            (1, "error")
        };
        self.outcomes[slot]
            .get_or_init(|| {
                self.metrics
                    .reconciles
                    .with_label_values(&[self.controller, outcome])
            })
            .inc();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_controllers_reconciles_are_counted_by_outcome_and_timed() {
        let metrics = Metrics::with_disabled(&[]).unwrap();
        let series = metrics.reconciles_of("ttl");
        series.observe(async { Ok::<(), ()>(()) }).await.unwrap();
        series.observe(async { Ok::<(), ()>(()) }).await.unwrap();
        series
            .observe(async { Err::<(), ()>(()) })
            .await
            .unwrap_err();
        let count = |outcome| {
            metrics
                .reconciles
                .with_label_values(&["ttl", outcome])
                .get()
        };
        assert_eq!((count("success"), count("error")), (2, 1));
        let timed = metrics.reconcile_duration.with_label_values(&["ttl"]);
        assert_eq!(timed.get_sample_count(), 3);
    }

    #[test]
    fn disabled_families_are_neither_listed_nor_served() {
        let disabled = [
            "kcm_reconcile_total".to_owned(),
            "no_such_metric".to_owned(),
        ];
        let metrics = Metrics::with_disabled(&disabled).unwrap();
        metrics
            .reconciles
            .with_label_values(&["ttl", "success"])
            .inc();
        metrics
            .api_writes
            .with_label_values(&["ttl", "patch", "nodes", "success"])
            .inc();
        let served = metrics.render();
        assert!(!served.contains("kcm_reconcile_total"), "{served}");
        assert!(served.contains("kcm_api_writes_total"), "{served}");
        assert!(
            !metrics
                .families()
                .iter()
                .any(|name| name == "kcm_reconcile_total")
        );
        assert!(
            Metrics::new()
                .unwrap()
                .families()
                .iter()
                .any(|name| name == "kcm_reconcile_total")
        );
    }
}
