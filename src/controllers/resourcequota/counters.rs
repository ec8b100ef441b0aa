//! Object counters for the `count/<resource>` names quotas reference: discovery of the
//! quotable types, every DISCOVERY_PERIOD or on demand, and counters started when a quota
//! first names a type and stopped when none does any more.

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::Client;

use super::discovery::{Quotable, preferred_lists, quotable, referenced_counts};
use super::evaluator::object_count::ObjectCount;
use super::registry::REGISTRY;
use super::{Quota, hard_names};
use crate::lock::lock;
use crate::runtime::connection::discovery::{self, Root};
use crate::runtime::connection::reachability;
use crate::runtime::watching::counter::ObjectCounter;

impl Quota {
    /// Starts object counters for the `count/…` names quotas reference, once discovery knows
    /// the type; an unknown one asks for discovery again.
    pub(super) fn ensure_counters<'a>(&self, names: impl Iterator<Item = &'a String>) {
        let wanted = referenced_counts(names);
        let mut counters = lock(&self.counters);
        let typed = |r: &String| REGISTRY.iter().any(|e| e.resource == r);
        for resource in wanted.iter().filter(|r| !typed(r)) {
            if counters.contains_key(resource) {
                continue;
            }
            // Looked up only for a counter still missing: every sync comes here, and the
            // discovered types are many.
            let Some(api_resource) = lock(&self.quotable).get(resource).cloned() else {
                self.rediscover.notify_one();
                continue;
            };
            let counter = ObjectCounter::start(
                self.ctx.metadata_client.clone(),
                &api_resource,
                resource.clone(),
                self.ctx.metrics.clone(),
                &self.ctx.shutdown,
                self.count_changes.clone(),
                self.ctx.informers.initial_list(),
            );
            counters.insert(
                resource.clone(),
                Arc::new(ObjectCount::new(
                    &api_resource.group,
                    &api_resource.plural,
                    counter,
                )),
            );
        }
    }

    /// Stops counters no quota references any more (kcm watches a type only while counted).
    fn prune_counters(&self) {
        let referenced: BTreeSet<String> = self
            .quotas
            .store()
            .state()
            .iter()
            .flat_map(|q| referenced_counts(hard_names(q).iter()))
            .collect();
        lock(&self.counters).retain(|resource, counter| {
            let keep = referenced.contains(resource);
            if !keep {
                counter.stop();
            }
            keep
        });
    }

    /// Discovery of quotable types, every DISCOVERY_PERIOD or when a quota names an unknown
    /// type.
    pub(super) async fn discover(&self) {
        match discover_quotable(&self.ctx.client).await {
            Ok(found) => {
                *lock(&self.quotable) = found
                    .into_iter()
                    .map(|q| (q.count_name, q.api_resource))
                    .collect();
            }
            // An unreachable server is reported once, by the clients' `Reachability`.
            Err(err) if reachability::cause(&err).is_some() => {
                tracing::debug!(error = %err, "discovery of quotable resources failed; retrying")
            }
            Err(err) => {
                tracing::warn!(error = %err, "discovery of quotable resources failed; retrying")
            }
        }
        let all_hard: Vec<String> = self
            .quotas
            .store()
            .state()
            .iter()
            .flat_map(|q| hard_names(q))
            .collect();
        self.ensure_counters(all_hard.iter());
        self.prune_counters();
    }
}

/// Every namespaced resource that supports create, list, watch and delete: from aggregated
/// discovery (two requests, as upstream's discovery client makes them), or from the legacy
/// documents (one request per group) when the server has no aggregated discovery.
async fn discover_quotable(client: &Client) -> Result<Vec<Quotable>, kube::Error> {
    if let Some(core) = discovery::aggregated(client, Root::Core).await?
        && let Some(groups) = discovery::aggregated(client, Root::Groups).await?
    {
        let lists = [core, groups]
            .iter()
            .flat_map(preferred_lists)
            .collect::<Vec<_>>();
        return Ok(lists.iter().flat_map(quotable).collect());
    }
    let mut found = quotable(&client.list_core_api_resources("v1").await?);
    for group in client.list_api_groups().await?.groups {
        let Some(version) = group
            .preferred_version
            .or_else(|| group.versions.first().cloned())
        else {
            continue;
        };
        match client
            .list_api_group_resources(&version.group_version)
            .await
        {
            Ok(list) => found.extend(quotable(&list)),
            // A group that fails discovery keeps nothing counted from it, as upstream's partial failure.
            Err(err) => {
                tracing::warn!(group = group.name, error = %err, "discovery failed for group")
            }
        }
    }
    Ok(found)
}
