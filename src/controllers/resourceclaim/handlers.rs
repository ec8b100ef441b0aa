//! Watch event handlers: a pod, claim, template or PodGroup change updates the lookup
//! indexes (`pods_by_claim`, `pods_by_template`, `claims_by_owner`, and with
//! DRAWorkloadResourceClaims `pods_by_group`, `groups_by_claim`, `groups_by_template`),
//! remembers deleted pods and PodGroups, and queues the `pod:`, `claim:` and `podgroup:` keys
//! that `plan_pod_change` and `plan_group_change` ask for.

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};

use super::plan::claims::{
    group_resolved_names, group_template_names, owner_uid, pod_group_name, resolved_names,
    template_names, uses_claims,
};
use super::plan::{Stores, plan_group_change, plan_pod_change};
use super::sync::Effects;
use super::{Key, ResourceClaims};
use crate::k8s::podgroup::PodGroup;
use crate::k8s::view::Pod;
use crate::lock::lock;
use crate::runtime::watching::index::Index;
use crate::runtime::watching::informer::Change;
use crate::runtime::watching::stored::{Stored, join_key, key_of, split_key};

/// `names` as `namespace/name` keys; none for a deleted object, which leaves the index.
fn keys_in(namespace: &str, names: Vec<&str>, deleted: bool) -> Vec<String> {
    if deleted {
        return Vec::new();
    }
    names.into_iter().map(|n| join_key(namespace, n)).collect()
}

/// The object and whether it was deleted; `None` for the end of a relist.
fn changed<K>(change: Change<K>) -> Option<(std::sync::Arc<K>, bool)> {
    match change {
        Change::Added(obj) | Change::Updated { new: obj, .. } => Some((obj, false)),
        Change::Deleted(obj) => Some((obj, true)),
        Change::Synced => None,
    }
}

impl ResourceClaims {
    fn remember_deleted(&self, uid: Option<&str>) {
        if let Some(uid) = uid {
            lock(&self.deleted_objects).put(uid.to_string(), ());
        }
    }

    /// `enqueuePod`, with the pod's deletion remembered.
    fn enqueue_pod(&self, pod: &Pod, deleted: bool) {
        if deleted && uses_claims(pod) {
            self.remember_deleted(pod.metadata.uid.as_deref());
        }
        let plan = plan_pod_change(pod, deleted, self, self.features);
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
        let namespace = pod.place().0;
        let group = if self.features.workload_claims {
            pod_group_name(pod).into_iter().collect()
        } else {
            Vec::new()
        };
        let entries = [
            (&self.pods_by_claim, resolved_names(pod)),
            (&self.pods_by_template, template_names(pod)),
            (&self.pods_by_group, group),
        ];
        // Most pods name no claim, template or group, and most clusters index none: then
        // there is nothing to record or undo, and no key to build for the event.
        if entries
            .iter()
            .all(|(index, names)| names.is_empty() && index.is_empty())
        {
            return;
        }
        let key = key_of(pod);
        for (index, names) in entries {
            index.set(&key, keys_in(namespace, names, deleted));
        }
    }

    pub(super) fn on_pod(&self, change: Change<Pod>) {
        let Some((pod, deleted)) = changed(change) else {
            return;
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

    /// Every PodGroup indexed under `value` gets `enqueuePodGroup`.
    fn enqueue_groups(&self, index: &Index, value: &str) {
        for key in index.get(value) {
            let (namespace, name) = split_key(&key);
            if let Some(group) = self.pod_group(namespace, name) {
                self.enqueue_group(&group, false);
            }
        }
    }

    /// `enqueuePodGroup`: the group's released claims and the group itself, and then its
    /// pods, which may now find the group's claims, or the group itself (a pod that failed
    /// with "get PodGroup" must not wait out its backoff when a group without claims
    /// appears).
    fn enqueue_group(&self, group: &PodGroup, deleted: bool) {
        let key = key_of(group);
        if !group.claims().is_empty() {
            if deleted {
                self.remember_deleted(group.metadata.uid.as_deref());
            }
            let plan = plan_group_change(group, deleted, self);
            for claim in plan.claims {
                self.queue.add(Key::Claim(claim));
            }
            if plan.group {
                self.queue.add(Key::PodGroup(key.clone()));
            }
        }
        self.enqueue_pods(&self.pods_by_group, &key);
    }

    pub(super) fn on_pod_group(&self, change: Change<PodGroup>) {
        let Some((group, deleted)) = changed(change) else {
            return;
        };
        let key = key_of(group.as_ref());
        let namespace = group.place().0;
        self.groups_by_claim.set(
            &key,
            keys_in(namespace, group_resolved_names(&group), deleted),
        );
        self.groups_by_template.set(
            &key,
            keys_in(namespace, group_template_names(&group), deleted),
        );
        self.enqueue_group(&group, deleted);
    }

    pub(super) fn on_claim(&self, change: Change<ResourceClaim>) {
        let Some((claim, deleted)) = changed(change) else {
            return;
        };
        let key = key_of(claim.as_ref());
        let owner: Vec<String> = owner_uid(&claim)
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
        if self.features.workload_claims {
            self.enqueue_groups(&self.groups_by_claim, &key);
        }
    }

    pub(super) fn on_template(&self, change: Change<ResourceClaimTemplate>) {
        if let Change::Added(template) | Change::Updated { new: template, .. } = change {
            let key = key_of(template.as_ref());
            self.enqueue_pods(&self.pods_by_template, &key);
            if self.features.workload_claims {
                self.enqueue_groups(&self.groups_by_template, &key);
            }
        }
    }
}
