//! The quota's sync and the periodic resync: a sync performs `plan_sync` for one quota
//! (reports its bad input, writes its status through the writer and remembers the write);
//! the resync recomputes the incremental totals in full, counts drift, and queues every quota.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::Api;

use super::evaluator::{AnyEvaluator, EvaluatorInputs};
use super::plan::{plan_sync, quota_scope};
use super::scope::QuotaScope;
use super::{Quota, QuotaError, hard_names};
use crate::controllers::ControllerError;
use crate::lock::lock;
use crate::runtime::watching::stored::{key_of, split_key};

/// Namespaces the safety net checks between two yields to the runtime.
const VERIFY_BATCH: usize = 16;

impl Quota {
    pub(super) fn inputs(&self) -> EvaluatorInputs<'_> {
        EvaluatorInputs::new(Time((self.ctx.clock)()), &self.ctx.informers)
    }

    /// Every evaluator in registry order: the typed ones, then the object counts.
    pub(super) fn evaluators(&self) -> Vec<Arc<dyn AnyEvaluator>> {
        let counts = lock(&self.counters);
        let counts = counts.values().map(|c| c.clone() as Arc<dyn AnyEvaluator>);
        self.typed.iter().cloned().chain(counts).collect()
    }

    /// Performs the quota's plan: reports its bad input, writes its status.
    pub(super) async fn sync(&self, quota_key: String) -> Result<(), ControllerError> {
        let Some(quota) = self.written.newest_by_key(self.quotas.store(), &quota_key) else {
            return Ok(());
        };
        self.ensure_counters(hard_names(&quota).iter());
        let plan = plan_sync(&quota, &self.evaluators(), &self.inputs());
        let version = quota.resource_version().unwrap_or_default();
        for (reason, problem) in &plan.problems {
            self.bad.report(&quota_key, &version, reason, problem);
        }
        let mut errors: Vec<QuotaError> = plan.errors.into_iter().map(Into::into).collect();
        if let Some(status) = plan.status {
            let mut desired = (*quota).clone();
            desired.status = Some(status);
            let (ns, _) = split_key(&quota_key);
            let api: Api<ResourceQuota> = Api::namespaced(self.ctx.client.clone(), ns);
            let writer = self.writer.because(plan.fix);
            match writer.replace_status(&api, &quota, desired).await {
                Ok(written) => self.written.mutated(written, Instant::now()),
                Err(err) => errors.push(QuotaError::WriteStatus(err)),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(QuotaError::Several(errors).into())
        }
    }

    /// The periodic safety net: recomputes the incremental totals in full, counts drift and
    /// rebuilds them from the stores (keeping only namespaces and scopes quotas use). One
    /// namespace at a time, letting the other tasks run every [`VERIFY_BATCH`]: at 150 000
    /// pods the whole check takes a few hundred milliseconds, which must not stall the
    /// watches and syncs of the single-threaded runtime.
    async fn verify_totals(&self) {
        let mut in_use: HashMap<String, Vec<QuotaScope>> = HashMap::new();
        for quota in self.quotas.store().state() {
            in_use
                .entry(quota.namespace().unwrap_or_default())
                .or_default()
                .push(quota_scope(&quota));
        }
        for evaluator in self.typed.iter() {
            let namespaces = evaluator.tracked(&in_use, &self.inputs());
            let mut drift = None;
            for (checked, namespace) in namespaces.iter().enumerate() {
                if checked % VERIFY_BATCH == VERIFY_BATCH - 1 {
                    tokio::task::yield_now().await;
                }
                if let Some((resource, found)) = evaluator.verify(namespace, &self.inputs()) {
                    let (_, sum) = drift.get_or_insert((resource, 0u64));
                    *sum = sum.saturating_add(found);
                }
            }
            let Some((resource, found)) = drift.filter(|(_, n)| *n > 0) else {
                continue;
            };
            tracing::warn!(
                resource,
                sums = found,
                "incremental quota usage drifted from the full recompute; corrected"
            );
            self.ctx
                .metrics
                .quota_usage_drift
                .with_label_values(&[resource])
                .inc_by(found);
        }
    }

    /// The periodic full resync: checks the totals, then every quota into the primary lane.
    pub(super) async fn resync(&self) {
        self.verify_totals().await;
        for each in self.quotas.store().state() {
            self.primary.add(key_of(each.as_ref()));
        }
    }
}
