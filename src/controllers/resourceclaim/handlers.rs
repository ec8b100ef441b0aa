//! Watch event handlers: a pod, claim or template change updates the lookup indexes
//! (`pods_by_claim`, `pods_by_template`, `claims_by_owner`), remembers deleted pods, and
//! queues the `pod:` and `claim:` keys that `plan_pod_change` asks for.

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};

use super::claims::{owner_pod_uid, resolved_names, template_names, uses_claims};
use super::plan::{Stores, plan_pod_change};
use super::sync::Effects;
use super::{Key, ResourceClaims};
use crate::runtime::index::Index;
use crate::runtime::informer::Change;
use crate::runtime::lock::lock;
use crate::runtime::stored::{key_of, split_key};
use crate::runtime::view::Pod;

impl ResourceClaims {
    /// `enqueuePod`, with the pod's deletion remembered.
    fn enqueue_pod(&self, pod: &Pod, deleted: bool) {
        if deleted
            && uses_claims(pod)
            && let Some(uid) = pod.uid()
        {
            lock(&self.deleted_pods).put(uid, ());
        }
        let plan = plan_pod_change(pod, deleted, self);
        for claim in plan.claims {
            self.queue.add(Key::Claim(claim));
        }
        if plan.pod {
            self.queue.add(Key::Pod(key_of(pod)));
        }
        for problem in &plan.problems {
            self.report(problem);
        }
    }

    fn index_pod(&self, pod: &Pod, deleted: bool) {
        let key = key_of(pod);
        let namespace = pod.namespace().unwrap_or_default();
        let in_namespace = |names: Vec<&str>| {
            if deleted {
                return Vec::new();
            }
            names
                .into_iter()
                .map(|n| format!("{namespace}/{n}"))
                .collect()
        };
        self.pods_by_claim
            .set(&key, in_namespace(resolved_names(pod)));
        self.pods_by_template
            .set(&key, in_namespace(template_names(pod)));
    }

    pub(super) fn on_pod(&self, change: Change<Pod>) {
        let (pod, deleted) = match change {
            Change::Added(pod) | Change::Updated { new: pod, .. } => (pod, false),
            Change::Deleted(pod) => (pod, true),
            Change::Synced => return,
        };
        self.index_pod(&pod, deleted);
        self.enqueue_pod(&pod, deleted);
    }

    /// Every pod indexed under `value` gets `enqueuePod`.
    fn enqueue_pods(&self, index: &Index, value: &str) {
        for key in index.get(value) {
            let (namespace, name) = split_key(&key);
            if let Some(pod) = self.pod(namespace, name) {
                self.enqueue_pod(&pod, false);
            }
        }
    }

    pub(super) fn on_claim(&self, change: Change<ResourceClaim>) {
        let (claim, deleted) = match change {
            Change::Added(claim) | Change::Updated { new: claim, .. } => (claim, false),
            Change::Deleted(claim) => (claim, true),
            Change::Synced => return,
        };
        let key = key_of(claim.as_ref());
        let owner: Vec<String> = owner_pod_uid(&claim)
            .filter(|_| !deleted)
            .map(str::to_string)
            .into_iter()
            .collect();
        self.claims_by_owner.set(&key, owner);
        if deleted {
            let (namespace, name) = split_key(&key);
            self.mutations.forget(namespace, name);
        } else {
            self.queue.add(Key::Claim(key.clone()));
        }
        self.enqueue_pods(&self.pods_by_claim, &key);
    }

    pub(super) fn on_template(&self, change: Change<ResourceClaimTemplate>) {
        if let Change::Added(template) | Change::Updated { new: template, .. } = change {
            self.enqueue_pods(&self.pods_by_template, &key_of(template.as_ref()));
        }
    }
}
