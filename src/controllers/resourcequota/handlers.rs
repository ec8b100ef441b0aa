//! Watch event handlers: a quota added or re-specified is routed to its lane (upstream's
//! addQuota), and an object change (typed, through the evaluators, or an object count)
//! replenishes the quotas of its namespace whose `status.hard` names what changed.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ResourceQuota;
use kube::ResourceExt;

use super::evaluator::{AnyEvaluator, EvaluatorInputs};
use super::plan::status::{hard_changed, needs_priority, status_hard};
use super::plan::tracked;
use super::{Quota, hard_names, same_status_hard_names};
use crate::lock::lock;
use crate::runtime::watching::counter::CountChange;
use crate::runtime::watching::informer::Change;
use crate::runtime::watching::stored::key_of;

impl Quota {
    /// An object count changed in a namespace (or listed for the first time: every
    /// namespace with a quota): the quotas counting that type are replenished.
    pub(super) fn count_changed(&self, change: CountChange) {
        let evaluator = lock(&self.counters).get(&change.resource).cloned();
        let Some(evaluator) = evaluator else { return };
        let at = self.inputs();
        match change.namespace {
            Some(ns) => self.replenish(&ns, &*evaluator, &at),
            // First complete list: every quota counting the type can be computed now.
            None => {
                let namespaces: BTreeSet<String> = self
                    .quotas
                    .store()
                    .state()
                    .iter()
                    .filter_map(|quota| quota.namespace())
                    .collect();
                for ns in namespaces {
                    self.replenish(&ns, &*evaluator, &at);
                }
            }
        }
    }

    /// upstream's addQuota: which lane a new or re-specified quota goes to.
    fn route(&self, quota: &ResourceQuota) {
        self.ensure_counters(hard_names(quota).iter());
        let (at, evaluators) = (self.inputs(), self.evaluators());
        if needs_priority(quota, |n| tracked(&evaluators, n, &at)) {
            self.priority.add(key_of(quota));
        } else {
            self.primary.add(key_of(quota));
        }
    }

    pub(super) fn on_quota(&self, change: Change<ResourceQuota>) {
        match change {
            Change::Added(q) => self.route(&q),
            Change::Updated { old, new } if hard_changed(&old, &new) => self.route(&new),
            // Replenishment matches `status.hard` (as upstream), so an object that arrived
            // while the store still held the quota without it was not replenished; once the
            // watch brings the new `status.hard`, one more sync counts it (beyond upstream,
            // which waits for the periodic resync). No write when nothing changed.
            Change::Updated { old, new } if !same_status_hard_names(&old, &new) => {
                self.primary.add(key_of(new.as_ref()))
            }
            Change::Updated { .. } | Change::Synced => {}
            Change::Deleted(q) => {
                self.written
                    .forget(&q.namespace().unwrap_or_default(), &q.name_any());
                self.primary.add(key_of(q.as_ref()))
            }
        }
    }

    /// Replenishment: the quotas of `ns` whose `status.hard` names something `evaluator` tracks.
    pub(super) fn replenish(&self, ns: &str, evaluator: &dyn AnyEvaluator, at: &EvaluatorInputs) {
        for quota in self.quotas.in_namespace(ns) {
            let tracked = status_hard(&quota)
                .is_some_and(|hard| hard.keys().any(|name| evaluator.covers(name, at)));
            if tracked {
                self.primary.add(key_of(quota.as_ref()));
            }
        }
    }
}
