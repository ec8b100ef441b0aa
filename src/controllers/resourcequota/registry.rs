//! The evaluators the controller runs: the typed ones in upstream's registry order
//! ([`REGISTRY`]), each over the store of its objects and the usage totals kept from it
//! ([`IncrementalEvaluator`]), started where the cluster serves their types. What an
//! evaluator is, and each type's rules, are in [`super::evaluator`]; the sums in
//! [`super::totals`].

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;

use super::error::UsageError;
use super::evaluator::persistentvolumeclaims::PersistentVolumeClaims;
use super::evaluator::pods::Pods;
use super::evaluator::resourceclaims::ResourceClaims;
use super::evaluator::services::Services;
use super::evaluator::{AnyEvaluator, Charge, Evaluator, EvaluatorInputs, QuotaGates, Replenish};
use super::scope::QuotaScope;
use super::totals::Totals;
use super::usage::Usage;
use crate::controllers::Context;
use crate::runtime::connection::discovery::{self, Answer, Timing};
use crate::runtime::controller::ControllerBuilder;
use crate::runtime::queue::WorkQueue;
use crate::runtime::watching::informer::{Change, Informer, Informers};
use crate::runtime::watching::stored::Stored;

/// The typed evaluators in upstream's registry order; the object counts of other types
/// follow them (the controller starts those while some quota counts the type).
pub const REGISTRY: [Entry; 4] = [
    Entry::of::<Pods>(),
    Entry::of::<Services>(),
    Entry::of::<PersistentVolumeClaims>(),
    Entry::of::<ResourceClaims>(),
];

/// A registry line: the resource an evaluator counts, the API version it needs, and how to
/// start it.
pub struct Entry {
    pub resource: &'static str,
    api_version: &'static str,
    start: fn(&Informers, QuotaGates) -> Arc<dyn AnyEvaluator>,
    /// Starts the informers it reads, without the evaluator (a warm standby's).
    warm: fn(&Informers, QuotaGates),
}

impl Entry {
    const fn of<E: Evaluator>() -> Self {
        Self {
            resource: E::RESOURCE,
            api_version: E::API_VERSION,
            start: IncrementalEvaluator::<E>::start,
            warm: |informers, gates| {
                IncrementalEvaluator::<E>::informers(informers, gates);
            },
        }
    }

    /// The core group's, always served (the others' need discovery).
    fn is_core(&self) -> bool {
        !self.api_version.contains('/')
    }
}

/// Starts the informers of the core group's evaluators, as [`start`] will: what a warm
/// standby can hold before it leads, without asking discovery.
pub fn warm(informers: &Informers, gates: QuotaGates) {
    for entry in REGISTRY.iter().filter(|entry| entry.is_core()) {
        (entry.warm)(informers, gates);
    }
}

/// The evaluators of the types the cluster serves, in registry order, their informers
/// started. Whether a group is served is asked until the cluster answers: a failed
/// discovery is retried, never taken for "not served".
pub async fn start(
    client: &Client,
    informers: &Informers,
    gates: QuotaGates,
) -> Vec<Arc<dyn AnyEvaluator>> {
    let mut started = Vec::new();
    for entry in &REGISTRY {
        // The core group is always served.
        let served = match entry.api_version.split_once('/') {
            None => true,
            Some((group, version)) => {
                discovery::answer(entry.api_version, Timing::default(), || {
                    discovery::probe(client, group, version)
                })
                .await
                    == Answer::Served
            }
        };
        if served {
            started.push((entry.start)(informers, gates));
        }
    }
    started
}

/// The evaluators of the types in `informers` (already holding their objects: `kcm
/// explain`), in registry order; `served` says whether the cluster serves an API version
/// other than the core group's.
pub fn over_informers(
    informers: &Informers,
    gates: QuotaGates,
    served: impl Fn(&str) -> bool,
) -> Vec<Arc<dyn AnyEvaluator>> {
    REGISTRY
        .iter()
        .filter(|entry| entry.is_core() || served(entry.api_version))
        .map(|entry| (entry.start)(informers, gates))
        .collect()
}

/// Where a typed evaluator reads its objects: the shared informer of their type (in unit
/// tests, a plain list).
pub trait Objects<K>: Send + Sync {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>>;
    fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>>;
}

impl<K: Stored> Objects<K> for Informer<K> {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.store().get(namespace, name)
    }

    fn in_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        Informer::in_namespace(self, namespace)
    }
}

/// A typed evaluator run incrementally: over its objects' store, with the usage totals kept
/// from each of their changes.
pub struct IncrementalEvaluator<E: Evaluator> {
    evaluator: E,
    store: Arc<dyn Objects<E::Object>>,
    totals: Totals<E::Object, E::Context>,
}

impl<E: Evaluator> IncrementalEvaluator<E> {
    fn start(informers: &Informers, gates: QuotaGates) -> Arc<dyn AnyEvaluator> {
        let (evaluator, objects) = Self::informers(informers, gates);
        Self::over(evaluator, objects)
    }

    /// The evaluator under `gates`, the informers it reads started, and its objects'.
    fn informers(informers: &Informers, gates: QuotaGates) -> (E, Arc<Informer<E::Object>>) {
        let evaluator = E::with_gates(gates);
        evaluator.start_reads(informers);
        (evaluator, informers.get::<E::Object>())
    }

    /// `evaluator` over `store`, its totals empty.
    pub(crate) fn over(evaluator: E, store: Arc<dyn Objects<E::Object>>) -> Arc<dyn AnyEvaluator> {
        Arc::new(Self {
            evaluator,
            store,
            totals: Totals::default(),
        })
    }
}

impl<E: Evaluator> AnyEvaluator for IncrementalEvaluator<E> {
    fn matching(&self, names: &[String], at: &EvaluatorInputs) -> Vec<String> {
        self.evaluator.matching(names, at)
    }

    fn covers(&self, name: &str, at: &EvaluatorInputs) -> bool {
        self.evaluator.covers(name, at)
    }

    fn usage(
        &self,
        namespace: &str,
        scope: &QuotaScope,
        names: &[String],
        at: &EvaluatorInputs,
    ) -> Result<Usage, UsageError> {
        Ok(self
            .totals
            .usage(&self.evaluator, namespace, scope, names, at, || {
                self.store.in_namespace(namespace)
            }))
    }

    fn charges(&self, namespace: &str, scope: &QuotaScope, at: &EvaluatorInputs) -> Vec<Charge> {
        let objects = self.store.in_namespace(namespace);
        objects
            .iter()
            .map(|object| {
                let in_scope = self.evaluator.matches(object, scope);
                let (usage, left_out) = if in_scope {
                    let usage = self.evaluator.usage(object, at);
                    (usage, self.evaluator.left_out(object, at))
                } else {
                    (Usage::default(), None)
                };
                Charge {
                    resource: E::RESOURCE,
                    name: object.place().1.to_string(),
                    in_scope,
                    usage,
                    left_out,
                }
            })
            .collect()
    }

    fn tracked(
        &self,
        in_use: &HashMap<String, Vec<QuotaScope>>,
        at: &EvaluatorInputs,
    ) -> Vec<String> {
        self.totals.retain(&self.evaluator, in_use, at)
    }

    fn verify(&self, namespace: &str, at: &EvaluatorInputs) -> Option<(&'static str, u64)> {
        let drift = self.totals.verify(
            &self.evaluator,
            namespace,
            || self.store.in_namespace(namespace),
            at,
        );
        Some((E::RESOURCE, drift))
    }

    fn watch(
        self: Arc<Self>,
        ctx: &Context,
        controller: &mut ControllerBuilder,
        queue: &WorkQueue<String>,
        replenish: Replenish,
    ) {
        let (clock, informers) = (ctx.clock.clone(), ctx.informers.clone());
        controller.watch(queue, move |change: Change<E::Object>, _| {
            let (Change::Added(object)
            | Change::Deleted(object)
            | Change::Updated { new: object, .. }) = &change
            else {
                return;
            };
            let at = EvaluatorInputs::new(Time(clock()), &informers);
            // Borrowed from the change, which outlives this handler call: no copies per event.
            let (ns, name) = object.place();
            // The totals count what the store holds now.
            let current = self.store.get(ns, name);
            self.totals.refresh(&self.evaluator, ns, name, current, &at);
            let matters = match &change {
                Change::Updated { old, new } => self.evaluator.update_matters(old, new, &at),
                _ => true,
            };
            if matters {
                replenish(ns, &*self, &at);
            }
        });
    }
}
