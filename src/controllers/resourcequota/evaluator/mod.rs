//! The usage evaluators, one file per kind of object, ported from upstream v1.36
//! `pkg/quota/v1/evaluator/core` (`pods.go`, `services.go`, `persistent_volume_claims.go`,
//! `resource_claims.go`) and the helpers they call (`component-helpers/resource`, `qos`,
//! `extendedresourcecache`: `extended_resource_cache.rs`), plus the object counts of every
//! other type (`object_count.rs`).
//! What they share is in `usage.rs` (resource lists), `scope.rs` and `names.rs`.
//!
//! Each typed evaluator ([`Evaluator`]) holds all of its type's rules in one place: which
//! quota resource names it covers, whether a quota's scopes select an object, what an object
//! charges, whether that charge can change without a new version of the object (the totals
//! then evaluate it at each sync, `totals.rs`), and which updates can change usage (the
//! replenishment filter). The controller sees every evaluator as [`AnyEvaluator`], in the
//! registry's order ([`super::registry`]), so it has no per-type code.
//!
//! Adding an evaluator for another type: its file here implementing [`Evaluator`], and its
//! line in the registry's `REGISTRY`. Besides: the type in the controller's `DESCRIPTOR.informs` (what its
//! shared informers list and watch), and a [`Stored`] impl if no controller stores the type
//! yet.

pub mod extended_resource_cache;
pub mod object_count;
pub mod persistentvolumeclaims;
pub mod pod_resources;
pub mod pods;
pub mod resourceclaims;
pub mod services;

use std::cell::OnceCell;
use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::DeviceClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use self::extended_resource_cache::ExtendedResourceCache;
use super::error::UsageError;
use super::scope::QuotaScope;
use super::usage::Usage;
use crate::controllers::Context;
use crate::features::{FeatureGate, FeatureGates};
use crate::runtime::controller::ControllerBuilder;
use crate::runtime::queue::WorkQueue;
use crate::runtime::watching::informer::Informers;
use crate::runtime::watching::stored::Stored;

/// The feature gates that change what the evaluators charge (upstream's evaluators read
/// the process's gates). The default is v1.36's: both on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaGates {
    /// PodLevelResources: a pod's `spec.resources` sets its requests, limits and QoS class.
    pub pod_level_resources: bool,
    /// DRAExtendedResource: claims also charge `requests.deviceclass.resource.kubernetes.io/
    /// <class>` and the extended resource their class maps, less what their pod pays.
    pub dra_extended_resource: bool,
}

impl QuotaGates {
    pub fn of(gates: &FeatureGates) -> Self {
        Self {
            pod_level_resources: gates.enabled(FeatureGate::PodLevelResources),
            dra_extended_resource: gates.enabled(FeatureGate::DraExtendedResource),
        }
    }
}

impl Default for QuotaGates {
    fn default() -> Self {
        Self::of(&FeatureGates::default())
    }
}

/// One type's evaluator: upstream's `quota.Evaluator` for that type, as the controller and
/// the incremental totals use it.
pub trait Evaluator: Default + Send + Sync + 'static {
    /// The objects it evaluates, from the shared store of their type.
    type Object: Stored;
    /// What an object's usage depends on besides the object and the clock; when it changes,
    /// the totals are rebuilt.
    type Context: Clone + Default + PartialEq + Send + 'static;
    /// The resource it counts: `count/<RESOURCE>` is its own (no object counter for it, served
    /// or not), and the label of its drift metric.
    const RESOURCE: &'static str;
    /// The API version that serves its objects (the core group's, always served, by default);
    /// where the cluster does not serve it, the evaluator is not registered.
    const API_VERSION: &'static str = "v1";

    /// The evaluator under `gates` (the default, for evaluators no gate changes).
    fn with_gates(_gates: QuotaGates) -> Self {
        Self::default()
    }
    /// Starts the informers its usage reads besides its objects' (none by default), with the
    /// controller, so that they sync with the rest.
    fn start_reads(&self, _informers: &Informers) {}
    /// Its context as of `at` (none by default).
    fn context(&self, _at: &EvaluatorInputs) -> Self::Context {
        Self::Context::default()
    }
    /// upstream `MatchingResources`: the names of `names` it covers.
    fn matching(&self, names: &[String], at: &EvaluatorInputs) -> Vec<String>;
    /// Whether `matching` keeps `name`: replenishment asks it for every quota of a namespace
    /// at every object change, so the hot evaluators answer without allocating.
    fn covers(&self, name: &str, at: &EvaluatorInputs) -> bool {
        !self.matching(&[name.to_string()], at).is_empty()
    }
    /// Whether a quota with `scope` charges `object`.
    fn matches(&self, object: &Self::Object, scope: &QuotaScope) -> bool;
    /// upstream `Usage`: what `object` charges.
    fn usage(&self, object: &Self::Object, at: &EvaluatorInputs) -> Usage;
    /// Whether the object's usage may change without a new version of it (clock, other
    /// objects): it is then evaluated at each sync instead of summed.
    fn volatile(&self, _object: &Self::Object) -> bool {
        false
    }
    /// Whether two versions of an object charge every quota the same (and neither is
    /// volatile): the totals then take the new version without evaluating either. Never
    /// by default.
    fn same_charge(&self, _old: &Self::Object, _new: &Self::Object) -> bool {
        false
    }
    /// Why `usage` charges the object only its count (a terminal pod), for `kcm explain`.
    fn left_out(&self, _object: &Self::Object, _at: &EvaluatorInputs) -> Option<String> {
        None
    }
    /// Whether an update may change usage (creations and deletions always may): the
    /// replenishment filter.
    fn update_matters(&self, old: &Self::Object, new: &Self::Object, at: &EvaluatorInputs) -> bool;
}

/// What evaluators read besides their own objects: the time of one computation (a quota
/// sync, an object change, the periodic verification), so all its evaluators charge as of the
/// same moment; the device classes, read once on first use; and other types' stores, read
/// as they stand when asked (no copy is taken).
pub struct EvaluatorInputs<'a> {
    pub now: Time,
    informers: Option<&'a Informers>,
    classes: OnceCell<ExtendedResourceCache>,
}

impl<'a> EvaluatorInputs<'a> {
    /// The controller's: other types' stores are read from `informers`, on first use.
    pub fn new(now: Time, informers: &'a Informers) -> Self {
        Self {
            now,
            informers: Some(informers),
            classes: OnceCell::new(),
        }
    }

    /// Without stores: no device classes, no objects of other types.
    pub fn at(now: Time) -> Self {
        Self {
            now,
            informers: None,
            classes: OnceCell::new(),
        }
    }

    #[cfg(test)]
    pub(crate) fn with_classes(now: Time, classes: ExtendedResourceCache) -> Self {
        let inputs = Self::at(now);
        let _ = inputs.classes.set(classes);
        inputs
    }

    /// The device classes' extended resources, for the ResourceClaim evaluator (which starts
    /// the DeviceClass informer; it is registered only where the cluster serves claims).
    pub fn classes(&self) -> &ExtendedResourceCache {
        self.classes.get_or_init(|| match self.informers {
            Some(informers) => {
                let all = informers.get::<DeviceClass>().store().state();
                ExtendedResourceCache::from_classes(all.iter().map(|c| c.as_ref()))
            }
            None => ExtendedResourceCache::new(),
        })
    }

    /// The stored objects of type `K` in `namespace` (the store's own Arcs).
    pub fn in_namespace<K: Stored>(&self, namespace: &str) -> Vec<Arc<K>> {
        self.informers
            .map(|i| i.get::<K>().in_namespace(namespace))
            .unwrap_or_default()
    }
}

/// What one object charges a quota (`kcm explain`).
#[derive(Debug, Clone)]
pub struct Charge {
    /// The evaluator's resource: `pods`, `services`, …
    pub resource: &'static str,
    pub name: String,
    /// Whether the quota's scopes and scope selector select it; when not, it charges nothing
    /// and `usage` is empty.
    pub in_scope: bool,
    pub usage: Usage,
    /// Why it charges only its count, when it does.
    pub left_out: Option<String>,
}

/// Replenishment: the objects of an evaluator in a namespace changed in a way that may
/// change usage.
pub type Replenish = Arc<dyn Fn(&str, &dyn AnyEvaluator, &EvaluatorInputs) + Send + Sync>;

/// An evaluator of any kind as the controller runs it: a typed one over its objects
/// ([`IncrementalEvaluator`](super::registry::IncrementalEvaluator)) or an object count.
pub trait AnyEvaluator: Send + Sync {
    /// upstream `MatchingResources`: the names of `names` it covers.
    fn matching(&self, names: &[String], at: &EvaluatorInputs) -> Vec<String>;
    /// Whether `matching` keeps `name` (the replenishment filter).
    fn covers(&self, name: &str, at: &EvaluatorInputs) -> bool {
        !self.matching(&[name.to_string()], at).is_empty()
    }
    /// upstream `UsageStats`: the usage of `names` in `namespace` for quotas with `scope`;
    /// `Err` while it cannot be known.
    fn usage(
        &self,
        namespace: &str,
        scope: &QuotaScope,
        names: &[String],
        at: &EvaluatorInputs,
    ) -> Result<Usage, UsageError>;
    /// The namespaces its incremental totals track, once those no quota uses any more
    /// (`in_use`) are dropped: what the periodic check ([`AnyEvaluator::verify`]) walks.
    /// None by default (no totals).
    fn tracked(
        &self,
        _in_use: &HashMap<String, Vec<QuotaScope>>,
        _at: &EvaluatorInputs,
    ) -> Vec<String> {
        Vec::new()
    }
    /// The periodic check of one namespace's incremental totals
    /// ([`Totals::verify`](super::totals::Totals::verify)): the resource, and how many sums
    /// had drifted. `None`: no totals.
    fn verify(&self, _namespace: &str, _at: &EvaluatorInputs) -> Option<(&'static str, u64)> {
        None
    }
    /// Whether its objects have been listed (an object count's watch may keep failing).
    fn listed(&self) -> bool {
        true
    }
    /// What each object of `namespace` charges a quota with `scope` (`kcm explain`), from the
    /// same `matches` and `usage` its sums are made of. None by default (no objects of its
    /// own: object counts).
    fn charges(&self, _namespace: &str, _scope: &QuotaScope, _at: &EvaluatorInputs) -> Vec<Charge> {
        Vec::new()
    }
    /// Watches its objects' changes: they keep the totals, and those that may change usage
    /// call `replenish`. Nothing to watch by default (no objects of its own).
    fn watch(
        self: Arc<Self>,
        _ctx: &Context,
        _controller: &mut ControllerBuilder,
        _queue: &WorkQueue<String>,
        _replenish: Replenish,
    ) {
    }
}
