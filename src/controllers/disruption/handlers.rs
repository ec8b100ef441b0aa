//! Watch event handlers: a pod change queues the (first) PDB selecting it, warns when
//! several do, and schedules the stale DisruptionTarget check; a workload's replica change
//! queues the PDBs of its namespace.

use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;

use super::plan::budget::stale_disruption_wait;
use super::{Disruption, messages};
use crate::k8s::selector;
use crate::k8s::view::Pod;
use crate::runtime::queue::WorkQueue;
use crate::runtime::watching::informer::Change;
use crate::runtime::watching::stored::{Stored, key_of};

impl Disruption {
    /// PDBs in the pod's namespace whose selector matches it, sorted by name so the choice
    /// among several is stable (upstream takes the first in lister order, i.e. arbitrary).
    fn pdbs_for(&self, pod: &Pod) -> Vec<Arc<PodDisruptionBudget>> {
        let labels = &pod.labels;
        let mut pdbs: Vec<_> = self
            .pdbs
            .in_namespace(pod.place().0)
            .into_iter()
            .filter(|pdb| {
                selector::matches(pdb.spec.as_ref().and_then(|s| s.selector.as_ref()), labels)
            })
            .collect();
        pdbs.sort_by_key(|p| p.name_any());
        pdbs
    }

    /// Upstream's pod handlers: the (first) PDB of the pod, a warning when several match, and
    /// the stale DisruptionTarget check on add/update.
    pub(super) fn on_pod(&self, change: Change<Pod>, queue: &WorkQueue<String>) {
        let (pod, check_stale) = match change {
            Change::Added(pod) | Change::Updated { new: pod, .. } => (pod, true),
            Change::Deleted(pod) => (pod, false),
            Change::Synced => return,
        };
        let pdbs = self.pdbs_for(&pod);
        if let Some(first) = pdbs.first() {
            queue.add(key_of(first.as_ref()));
            if pdbs.len() > 1 && check_stale {
                let note = messages::multiple_pdbs(
                    &pod.namespace().unwrap_or_default(),
                    &pod.name_any(),
                    &first.name_any(),
                );
                self.event(pod.object_ref(), true, "MultiplePodDisruptionBudgets", note);
            }
        }
        if check_stale && let Some(wait) = stale_disruption_wait(&pod, &self.now()) {
            self.stale.add_after(key_of(pod.as_ref()), wait);
        }
    }

    /// Beyond upstream: a workload's replica count changed, so the PDBs of its namespace are
    /// re-synced; upstream only notices through later pod events.
    pub(super) fn on_workload<K: Stored>(
        &self,
        change: &Change<K>,
        replicas: fn(&K) -> Option<i32>,
        queue: &WorkQueue<String>,
    ) {
        let Change::Updated { old, new } = change else {
            return;
        };
        if replicas(old) == replicas(new) {
            return;
        }
        for pdb in self.pdbs.in_namespace(new.place().0) {
            queue.add(key_of(pdb.as_ref()));
        }
    }
}
