//! Incremental quota usage (beyond upstream): per namespace, per evaluator and per distinct
//! scope-set that the namespace's quotas use, the sum of every object's usage, kept up to date
//! from each object change, so a quota sync costs O(quotas in the namespace) instead of
//! O(objects in the namespace). Upstream re-lists and re-evaluates every object on every sync.
//!
//! - **What a change does**: the feed only says which object changed; [`Totals::refresh`]
//!   subtracts the version the totals counted and adds the version the store holds now,
//!   unless the evaluator says both charge the same (`Evaluator::same_charge`). The
//!   totals keep the store's own `Arc` of each object (no copy), so the subtraction is always
//!   of exactly what was added, whatever order changes and snapshots come in.
//! - **Clock-dependent objects** are kept out of the sums and evaluated at each sync: a pod
//!   being deleted stops counting once `deletionTimestamp + grace` has passed, which no event
//!   announces; a ResourceClaim made for a pod's extended resources is offset by that pod's
//!   usage, which changes with the pod. Both are rare.
//! - **Scopes**: each distinct scope-set the namespace's quotas use gets its own sums, built
//!   in full from the namespace's objects the first time a quota asks for it.
//! - **Formats**: upstream adds objects in lister (map) order, and a sum takes the format of
//!   the first non-zero value added (`1Gi + 1024` prints `1048577Ki`, `1024 + 1Gi` prints
//!   `1073742848`), so mixed formats print differently from one sync to the next. The sums
//!   here keep one partial sum per format and add them BinarySI first, then DecimalSI, then
//!   DecimalExponent: the result of upstream's fold for an order that puts BinarySI values
//!   first, the same on every sync. One format (the usual case) prints as upstream always.
//! - **Safety net**: [`Totals::verify`] (the periodic resync, one namespace at a time)
//!   recomputes a namespace's sums in full, counts the sums that differed (the drift metric,
//!   which should stay 0) and rebuilds them from the store. A namespace whose sums nothing has
//!   changed since they were last computed in full, and whose counted objects are the very
//!   ones the store holds (the same `Arc`s: no change was missed), is skipped: its sums are
//!   that full computation. Where the store holds exactly the counted objects, the
//!   recomputed sums are the rebuilt ones, computed once, not twice.
//! - Sums past the exact quantity range (hostile input) fall back to the full computation,
//!   which reports them as before.
//!
//! Hand-written: no crate keeps Kubernetes quota sums.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::runtime::KeyHasher;
use crate::runtime::watching::stored::{Named, Stored};

use super::evaluator::{Evaluator, EvaluatorInputs};
use super::scope::QuotaScope;
use super::usage::{ResourceList, Usage, sum_usage};
use crate::k8s::quantity::{Format, Quantity};
use crate::lock::lock;

/// Partial sums by format, added in this order (see **Formats** in the module's comment).
const FORMATS: [Format; 3] = [Format::BinarySI, Format::DecimalSI, Format::DecimalExponent];

/// The sum of one resource name: one exact partial sum per format, in nanounits. A slot
/// only ever holds values of its own format, so the format is the slot's and is not stored:
/// 48 bytes instead of three `Quantity`s (144), for every resource of every namespace.
#[derive(Clone, Debug, Default)]
struct Sum([i128; 3]);

impl Sum {
    /// `None` past the exact range.
    fn change(&mut self, q: &Quantity, add: bool) -> Option<()> {
        let i = FORMATS.iter().position(|f| *f == q.format()).unwrap_or(1);
        let slot = &mut self.0[i];
        *slot = if add {
            slot.checked_add(q.nanos())?
        } else {
            slot.checked_sub(q.nanos())?
        };
        Some(())
    }

    fn is_zero(&self) -> bool {
        self.0.iter().all(|n| *n == 0)
    }

    fn total(&self) -> Option<Quantity> {
        self.0
            .iter()
            .zip(FORMATS)
            .try_fold(Quantity::zero(), |acc, (nanos, format)| {
                acc.checked_add(&Quantity::from_nanos(*nanos, format))
            })
    }

    /// Same values in each format, so every later result prints the same.
    fn same(&self, other: &Sum) -> bool {
        self.0 == other.0
    }
}

/// The sums of one scope-set in one namespace.
#[derive(Debug)]
struct Entry {
    scope: QuotaScope,
    sums: BTreeMap<String, Sum>,
    /// Problems of the summed objects that have any, by object name.
    problems: BTreeMap<String, Vec<String>>,
    /// A sum left the exact range: answered by the full computation until rebuilt.
    overflow: bool,
}

impl Entry {
    fn new(scope: QuotaScope) -> Self {
        Self {
            scope,
            sums: BTreeMap::new(),
            problems: BTreeMap::new(),
            overflow: false,
        }
    }

    fn change(&mut self, name: &str, usage: &Usage, add: bool) {
        for (resource, q) in &usage.list {
            // The name is copied only for a sum not yet kept: looked up first.
            let sum = match self.sums.get_mut(resource) {
                Some(sum) => sum,
                None => self.sums.entry(resource.clone()).or_default(),
            };
            if sum.change(q, add).is_none() {
                self.overflow = true;
            }
            if sum.is_zero() {
                self.sums.remove(resource);
            }
        }
        if add && !usage.problems.is_empty() {
            self.problems
                .insert(name.to_string(), usage.problems.clone());
        } else if !add {
            self.problems.remove(name);
        }
    }

    /// The number of sums (and problem lists) that differ from `other`.
    fn differences(&self, other: &Entry) -> u64 {
        let names: BTreeSet<&String> = self.sums.keys().chain(other.sums.keys()).collect();
        let sums = names
            .into_iter()
            .filter(|n| match (self.sums.get(*n), other.sums.get(*n)) {
                (Some(a), Some(b)) => !a.same(b),
                _ => true,
            })
            .count();
        let problems = usize::from(self.problems != other.problems);
        u64::try_from(sums.saturating_add(problems)).unwrap_or(u64::MAX)
    }
}

/// A scope-set's identity: its requirements, sorted (they are ANDed, so order is no part of
/// the meaning).
type ScopeKey = Vec<(String, String, Vec<String>)>;

fn scope_key(scope: &QuotaScope) -> ScopeKey {
    let mut key: ScopeKey = scope
        .requirements()
        .iter()
        .map(|r| (r.scope_name.clone(), r.operator.clone(), r.values.clone()))
        .collect();
    key.sort();
    key.dedup();
    key
}

/// The objects of one namespace the sums were made from, and the sums.
struct Namespace<K> {
    /// The store's own `Arc` of every object counted (or evaluated at sync), by its name
    /// (not copied into a key: ~40 bytes a pod).
    objects: HashSet<Named<K>, KeyHasher>,
    /// Names of the objects evaluated at each sync instead of summed.
    volatile: BTreeSet<String>,
    /// Each scope-set's sums: a list sized to its entries (usually one), where a map's
    /// smallest table holds four.
    scopes: Vec<(ScopeKey, Entry)>,
    /// An object's charge was added or taken away since the sums were last computed in full.
    changed: bool,
}

impl<K: Stored> Namespace<K> {
    fn from_objects<E: Evaluator<Object = K>>(evaluator: &E, objects: Vec<Arc<K>>) -> Self {
        let objects: HashSet<Named<K>, KeyHasher> = objects.into_iter().map(Named).collect();
        let volatile = objects
            .iter()
            .filter(|o| evaluator.volatile(&o.0))
            .map(|o| name_of(&*o.0))
            .collect();
        Self {
            objects,
            volatile,
            scopes: Vec::new(),
            changed: false,
        }
    }

    /// Whether `listed` (a namespace's objects in the store) are exactly the objects counted:
    /// the same `Arc`s, so no change came to the store that the sums did not see.
    fn counts_exactly(&self, listed: &[Arc<K>]) -> bool {
        listed.len() == self.objects.len()
            && listed.iter().all(|object| {
                self.objects
                    .get(object.place().1)
                    .is_some_and(|counted| Arc::ptr_eq(&counted.0, object))
            })
    }

    /// A scope-set's sums, computed in full from the objects.
    fn build<E: Evaluator<Object = K>>(
        &self,
        evaluator: &E,
        scope: QuotaScope,
        at: &EvaluatorInputs,
    ) -> Entry {
        let mut entry = Entry::new(scope);
        for Named(object) in &self.objects {
            let name = object.place().1;
            if !self.volatile.contains(name) && evaluator.matches(object, &entry.scope) {
                entry.change(name, &evaluator.usage(object, at), true);
            }
        }
        entry
    }

    /// Adds (or subtracts) one object's usage to every scope-set it matches.
    fn count<E: Evaluator<Object = K>>(
        &mut self,
        evaluator: &E,
        name: &str,
        object: &K,
        add: bool,
        at: &EvaluatorInputs,
    ) {
        self.changed = true;
        if evaluator.volatile(object) {
            if add {
                self.volatile.insert(name.to_string());
            } else {
                self.volatile.remove(name);
            }
            return;
        }
        let usage = OnceCell::new();
        for (_, entry) in &mut self.scopes {
            if evaluator.matches(object, &entry.scope) {
                entry.change(name, usage.get_or_init(|| evaluator.usage(object, at)), add);
            }
        }
    }

    /// The sums plus the volatile objects, as `sum_usage` would give them; `None` when a
    /// value leaves the exact range.
    fn answer<E: Evaluator<Object = K>>(
        &self,
        evaluator: &E,
        entry: &Entry,
        names: &[String],
        at: &EvaluatorInputs,
    ) -> Option<Usage> {
        if entry.overflow {
            return None;
        }
        let mut list: ResourceList = names
            .iter()
            .map(|n| (n.clone(), Quantity::zero()))
            .collect();
        let mut problems: Vec<String> = entry.problems.values().flatten().cloned().collect();
        let add = |list: &mut ResourceList, name: &String, q: Quantity| {
            let value = match list.get(name) {
                Some(before) => before.checked_add(&q)?,
                None => q,
            };
            list.insert(name.clone(), value);
            Some(())
        };
        for (name, sum) in &entry.sums {
            add(&mut list, name, sum.total()?)?;
        }
        for name in &self.volatile {
            let Named(object) = self.objects.get(name.as_str())?;
            if !evaluator.matches(object, &entry.scope) {
                continue;
            }
            let usage = evaluator.usage(object, at);
            problems.extend(usage.problems);
            for (resource, q) in usage.list {
                add(&mut list, &resource, q)?;
            }
        }
        Some(Usage { list, problems })
    }

    /// `sum_usage` over every object, in name order.
    fn full<E: Evaluator<Object = K>>(
        &self,
        evaluator: &E,
        scope: &QuotaScope,
        names: &[String],
        at: &EvaluatorInputs,
    ) -> Usage {
        let sorted: BTreeMap<&str, &Arc<K>> =
            self.objects.iter().map(|o| (o.0.place().1, &o.0)).collect();
        sum_usage(
            sorted.into_values().map(|o| &**o),
            names,
            |o| evaluator.usage(o, at),
            |o| evaluator.matches(o, scope),
        )
    }
}

fn name_of<K: Stored>(object: &K) -> String {
    object.place().1.to_string()
}

struct Inner<K, C> {
    /// The context the sums were made in.
    context: Option<C>,
    namespaces: HashMap<String, Namespace<K>, KeyHasher>,
}

/// The usage totals of one evaluator. Namespaces are tracked from the first sync of one of
/// their quotas on; [`Totals::retain`] drops those no quota uses any more.
pub struct Totals<K, C = ()> {
    inner: Mutex<Inner<K, C>>,
}

impl<K, C> Default for Totals<K, C> {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner {
                context: None,
                namespaces: HashMap::default(),
            }),
        }
    }
}

impl<K: Stored, C: Clone + PartialEq> Totals<K, C> {
    /// The totals, emptied first when the evaluator's context differs from theirs.
    fn lock<E: Evaluator<Object = K, Context = C>>(
        &self,
        evaluator: &E,
        at: &EvaluatorInputs,
    ) -> MutexGuard<'_, Inner<K, C>> {
        let mut inner = lock(&self.inner);
        let context = evaluator.context(at);
        if inner.context.as_ref() != Some(&context) {
            inner.namespaces.clear();
            inner.context = Some(context);
        }
        inner
    }

    /// Object `namespace/name` changed: the store now holds `current` (`None`: deleted).
    pub fn refresh<E: Evaluator<Object = K, Context = C>>(
        &self,
        evaluator: &E,
        namespace: &str,
        name: &str,
        current: Option<Arc<K>>,
        at: &EvaluatorInputs,
    ) {
        let mut inner = self.lock(evaluator, at);
        let Some(ns) = inner.namespaces.get_mut(namespace) else {
            return;
        };
        let counted = ns.objects.get(name).map(|o| o.0.clone());
        match (&counted, &current) {
            (Some(a), Some(b)) if Arc::ptr_eq(a, b) => return,
            // The same version in a new Arc (a relist), or a version that charges the same
            // (a readiness flip): nothing to add, only keep the store's copy rather than a
            // second one.
            (Some(a), Some(b)) if same_version(&**a, &**b) || evaluator.same_charge(a, b) => {
                ns.objects.replace(Named(b.clone()));
                return;
            }
            _ => {}
        }
        if let Some(old) = counted {
            ns.count(evaluator, name, &old, false, at);
            ns.objects.remove(name);
        }
        if let Some(new) = current {
            ns.count(evaluator, name, &new, true, at);
            ns.objects.replace(Named(new));
        }
    }

    /// An evaluator's usage of `names` in `namespace` for quotas with `scope`: what
    /// `sum_usage` over the namespace's objects gives. `objects` lists the namespace from the
    /// store, for its first sync.
    pub fn usage<E: Evaluator<Object = K, Context = C>>(
        &self,
        evaluator: &E,
        namespace: &str,
        scope: &QuotaScope,
        names: &[String],
        at: &EvaluatorInputs,
        objects: impl FnOnce() -> Vec<Arc<K>>,
    ) -> Usage {
        let mut inner = self.lock(evaluator, at);
        let ns = inner
            .namespaces
            .entry(namespace.to_string())
            .or_insert_with(|| Namespace::from_objects(evaluator, objects()));
        let key = scope_key(scope);
        let found = ns.scopes.iter().position(|(k, _)| *k == key);
        let index = match found {
            Some(i) if !ns.scopes[i].1.overflow => i,
            Some(i) => {
                ns.scopes[i].1 = ns.build(evaluator, scope.clone(), at);
                i
            }
            None => {
                let entry = ns.build(evaluator, scope.clone(), at);
                ns.scopes.reserve_exact(1);
                ns.scopes.push((key, entry));
                ns.scopes.len() - 1
            }
        };
        ns.answer(evaluator, &ns.scopes[index].1, names, at)
            .unwrap_or_else(|| ns.full(evaluator, scope, names, at))
    }

    /// Forgets the namespaces and scope-sets no quota uses any more (`in_use`), and names
    /// the namespaces still tracked, for [`Totals::verify`].
    pub fn retain<E: Evaluator<Object = K, Context = C>>(
        &self,
        evaluator: &E,
        in_use: &HashMap<String, Vec<QuotaScope>>,
        at: &EvaluatorInputs,
    ) -> Vec<String> {
        let mut inner = self.lock(evaluator, at);
        inner.namespaces.retain(|name, ns| {
            let Some(scopes) = in_use.get(name) else {
                return false;
            };
            let keys: HashSet<ScopeKey> = scopes.iter().map(scope_key).collect();
            ns.scopes.retain(|(key, _)| keys.contains(key));
            true
        });
        inner.namespaces.keys().cloned().collect()
    }

    /// The safety net, for one namespace: recomputes its sums in full and returns how many
    /// differed (drift, which should never happen), then rebuilds them from the store
    /// (`objects` lists the namespace). Skipped, as the module's comment says, when nothing
    /// changed since the last full computation.
    pub fn verify<E: Evaluator<Object = K, Context = C>>(
        &self,
        evaluator: &E,
        namespace: &str,
        objects: impl FnOnce() -> Vec<Arc<K>>,
        at: &EvaluatorInputs,
    ) -> u64 {
        let mut inner = self.lock(evaluator, at);
        let Some(ns) = inner.namespaces.get_mut(namespace) else {
            return 0;
        };
        let listed = objects();
        let exact = ns.counts_exactly(&listed);
        if exact && !ns.changed {
            return 0;
        }
        let mut drift = 0u64;
        let full: Vec<Entry> = ns
            .scopes
            .iter()
            .map(|(_, entry)| {
                let full = ns.build(evaluator, entry.scope.clone(), at);
                drift = drift.saturating_add(entry.differences(&full));
                full
            })
            .collect();
        if exact {
            for ((_, entry), full) in ns.scopes.iter_mut().zip(full) {
                *entry = full;
            }
            ns.changed = false;
        } else {
            let mut fresh = Namespace::from_objects(evaluator, listed);
            fresh.scopes = ns
                .scopes
                .iter()
                .map(|(key, entry)| (key.clone(), fresh.build(evaluator, entry.scope.clone(), at)))
                .collect();
            *ns = fresh;
        }
        drift
    }
}

fn same_version<K: Stored>(a: &K, b: &K) -> bool {
    a.uid() == b.uid() && a.version().is_some() && a.version() == b.version()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
    use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::*;
    use crate::controllers::resourcequota::evaluator::QuotaGates;
    use crate::controllers::resourcequota::evaluator::extended_resource_cache::ExtendedResourceCache;
    use crate::controllers::resourcequota::evaluator::persistentvolumeclaims::PersistentVolumeClaims;
    use crate::controllers::resourcequota::evaluator::pods::{Pods, pod_usage};
    use crate::controllers::resourcequota::evaluator::resourceclaims::ResourceClaims;
    use crate::controllers::resourcequota::evaluator::services::Services;
    use crate::controllers::resourcequota::scope::parse_scope;
    use crate::k8s::view::Pod;

    fn q(text: &str) -> Quantity {
        text.parse().expect("valid quantity")
    }

    /// Mixed formats add BinarySI first whatever the order they came in, as the module's
    /// comment says; a slot emptied and filled again keeps printing in its own format.
    #[test]
    fn sums_print_binary_si_first_whatever_the_order() {
        let mut forward = Sum::default();
        let mut backward = Sum::default();
        for text in ["1Gi", "1024", "500m"] {
            forward.change(&q(text), true).expect("in range");
        }
        for text in ["500m", "1024", "1Gi"] {
            backward.change(&q(text), true).expect("in range");
        }
        assert_eq!(
            forward.total().expect("in range").to_string(),
            "1073742848500m"
        );
        assert!(forward.same(&backward));
        forward.change(&q("1Gi"), false).expect("in range");
        assert_eq!(forward.total().expect("in range").to_string(), "1024500m");
        forward.change(&q("2Mi"), true).expect("in range");
        assert_eq!(
            forward.total().expect("in range").to_string(),
            "2098176500m"
        );
        for text in ["2Mi", "1024", "500m"] {
            forward.change(&q(text), false).expect("in range");
        }
        assert!(forward.is_zero());
        forward.change(&q("3Gi"), true).expect("in range");
        assert_eq!(forward.total().expect("in range").to_string(), "3Gi");
        assert!(!forward.same(&backward));
    }

    fn from<K: DeserializeOwned>(value: Value) -> Arc<K> {
        Arc::new(serde_json::from_value(value).expect("valid object"))
    }

    fn meta(name: &str, rv: u32) -> Value {
        json!({ "name": name, "namespace": "ns", "uid": format!("uid-{name}"),
            "resourceVersion": rv.to_string() })
    }

    fn now() -> Time {
        Time(Timestamp::from_second(1_700_000_000).expect("valid timestamp"))
    }

    fn at() -> EvaluatorInputs<'static> {
        EvaluatorInputs::at(now())
    }

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    /// The usage of `names`, printed (the evaluators also give names no quota asked for).
    fn printed(usage: &Usage, names: &[String]) -> Vec<(String, String)> {
        usage
            .list
            .iter()
            .filter(|(k, _)| names.contains(k))
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect()
    }

    fn service(name: &str, rv: u32, type_: &str, ports: usize) -> Arc<Service> {
        let ports: Vec<Value> = (0..ports).map(|i| json!({ "port": 80 + i })).collect();
        from(json!({ "metadata": meta(name, rv), "spec": { "type": type_, "ports": ports } }))
    }

    #[test]
    fn services_follow_creates_type_changes_and_deletes() {
        let totals: Totals<Service> = Totals::default();
        let names = strings(&["services", "services.nodeports", "services.loadbalancers"]);
        let scope = parse_scope(&[], None);
        let mut store = vec![service("a", 1, "ClusterIP", 1)];
        let ask = |store: &Vec<Arc<Service>>| {
            printed(
                &totals.usage(&Services, "ns", &scope, &names, &at(), || store.clone()),
                &names,
            )
        };
        assert_eq!(
            ask(&store),
            [
                ("services", "1"),
                ("services.loadbalancers", "0"),
                ("services.nodeports", "0")
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        let b = service("b", 2, "LoadBalancer", 3);
        store.push(b.clone());
        totals.refresh(&Services, "ns", "b", Some(b), &at());
        let a = service("a", 3, "NodePort", 2);
        store[0] = a.clone();
        totals.refresh(&Services, "ns", "a", Some(a), &at());
        assert_eq!(
            ask(&store),
            [
                ("services", "2"),
                ("services.loadbalancers", "1"),
                ("services.nodeports", "5")
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        store.remove(1);
        totals.refresh(&Services, "ns", "b", None, &at());
        assert_eq!(
            ask(&store),
            [
                ("services", "1"),
                ("services.loadbalancers", "0"),
                ("services.nodeports", "2")
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        // Any scope: services never match, whatever they are.
        let scoped = parse_scope(&strings(&["BestEffort"]), None);
        let got = totals.usage(&Services, "ns", &scoped, &names, &at(), Vec::new);
        assert!(got.list.values().all(Quantity::is_zero), "{got:?}");
    }

    fn pvc(
        name: &str,
        rv: u32,
        class: &str,
        storage: &str,
        vac: Option<&str>,
    ) -> Arc<PersistentVolumeClaim> {
        from(
            json!({ "metadata": meta(name, rv), "spec": { "storageClassName": class,
            "volumeAttributesClassName": vac,
            "resources": { "requests": { "storage": storage } } } }),
        )
    }

    #[test]
    fn pvcs_are_summed_per_scope_set_and_moved_when_their_class_changes() {
        let totals: Totals<PersistentVolumeClaim> = Totals::default();
        let names = strings(&[
            "requests.storage",
            "gold.storageclass.storage.k8s.io/requests.storage",
        ]);
        let all = parse_scope(&[], None);
        let gold_vac = parse_scope(
            &[],
            Some(
                &serde_json::from_value(json!({ "matchExpressions": [
                { "scopeName": "VolumeAttributesClass", "operator": "In", "values": ["fast"] }
            ] }))
                .expect("selector"),
            ),
        );
        let store = vec![
            pvc("a", 1, "gold", "1Gi", Some("fast")),
            pvc("b", 2, "", "500Mi", None),
        ];
        let list = || store.clone();
        let ask = |scope: &QuotaScope| {
            printed(
                &totals.usage(&PersistentVolumeClaims, "ns", scope, &names, &at(), list),
                &names,
            )
        };
        assert_eq!(ask(&all)[1].1, "1524Mi");
        assert_eq!(ask(&gold_vac)[0].1, "1Gi");
        // `a` moves to another class and loses its VolumeAttributesClass.
        totals.refresh(
            &PersistentVolumeClaims,
            "ns",
            "a",
            Some(pvc("a", 3, "silver", "2Gi", None)),
            &at(),
        );
        assert_eq!(
            ask(&all),
            [
                (
                    "gold.storageclass.storage.k8s.io/requests.storage".to_string(),
                    "0".to_string()
                ),
                ("requests.storage".to_string(), "2548Mi".to_string()),
            ]
        );
        assert!(ask(&gold_vac).iter().all(|(_, v)| v == "0"));
    }

    #[test]
    fn claims_are_rebuilt_when_the_device_classes_change() {
        let totals: Totals<ResourceClaim, ExtendedResourceCache> = Totals::default();
        let claim = from::<ResourceClaim>(json!({ "metadata": meta("c", 1), "spec": { "devices": {
            "requests": [{ "name": "r", "exactly": { "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2 } }] } } }));
        let names = strings(&["requests.example.com/gpu"]);
        let scope = parse_scope(&[], None);
        let ask = |classes: &ExtendedResourceCache| {
            let at = EvaluatorInputs::with_classes(now(), classes.clone());
            printed(
                &totals.usage(
                    &ResourceClaims::default(),
                    "ns",
                    &scope,
                    &names,
                    &at,
                    || vec![claim.clone()],
                ),
                &names,
            )
        };
        let plain = ExtendedResourceCache::new();
        assert_eq!(
            ask(&plain),
            [("requests.example.com/gpu".to_string(), "0".to_string())]
        );
        let class: DeviceClass = serde_json::from_value(json!({ "metadata": { "name": "gpu" },
            "spec": { "extendedResourceName": "example.com/gpu" } }))
        .expect("class");
        let mapped = ExtendedResourceCache::from_classes([&class]);
        // Nothing about the claim changed; the class did, and the sum follows.
        assert_eq!(
            ask(&mapped),
            [("requests.example.com/gpu".to_string(), "2".to_string())]
        );
    }

    fn pod(name: &str, rv: u32, cpu: &str) -> Arc<Pod> {
        from(
            json!({ "metadata": meta(name, rv), "spec": { "containers": [
            { "name": "c", "image": "i", "resources": { "requests": { "cpu": cpu } } }] },
            "status": { "phase": "Running" } }),
        )
    }

    /// The periodic check as the controller runs it: `retain`, then `verify` of each
    /// namespace still tracked, over `store`; the drift found.
    fn verify_all<E: Evaluator<Object = Pod, Context = ()>>(
        totals: &Totals<Pod>,
        evaluator: &E,
        in_use: &HashMap<String, Vec<QuotaScope>>,
        store: &[Arc<Pod>],
    ) -> u64 {
        totals
            .retain(evaluator, in_use, &at())
            .iter()
            .map(|ns| totals.verify(evaluator, ns, || store.to_vec(), &at()))
            .sum()
    }

    /// Adds `usage` to the sums of `scope` in `ns` behind the totals' back, marked as a
    /// change: what a wrong delta would leave.
    fn corrupt(totals: &Totals<Pod>, scope: &QuotaScope, usage: &Usage) {
        let mut inner = totals.inner.lock().expect("lock");
        let ns = inner.namespaces.get_mut("ns").expect("tracked");
        ns.changed = true;
        let key = scope_key(scope);
        let (_, entry) = ns
            .scopes
            .iter_mut()
            .find(|(k, _)| *k == key)
            .expect("scope tracked");
        entry.change("x", usage, true);
    }

    #[test]
    fn verify_counts_and_corrects_drift_and_forgets_unused_namespaces() {
        let totals: Totals<Pod> = Totals::default();
        let names = strings(&["requests.cpu"]);
        let scope = parse_scope(&[], None);
        let store = vec![pod("a", 1, "100m"), pod("b", 2, "200m")];
        let used = || {
            totals
                .usage(&Pods::default(), "ns", &scope, &names, &at(), Vec::new)
                .list["requests.cpu"]
                .to_string()
        };
        let first = totals.usage(&Pods::default(), "ns", &scope, &names, &at(), || {
            store.clone()
        });
        assert_eq!(first.list["requests.cpu"].to_string(), "300m");
        let in_use = HashMap::from([("ns".to_string(), vec![scope.clone()])]);
        assert_eq!(verify_all(&totals, &Pods::default(), &in_use, &store), 0);
        // A sum gone wrong (as a wrong delta would leave it) is found and corrected.
        let x = pod_usage(&pod("x", 9, "1"), &now(), QuotaGates::default());
        corrupt(&totals, &scope, &x);
        assert_eq!(used(), "1300m");
        // count/pods, pods and cpu and requests.cpu.
        assert_eq!(verify_all(&totals, &Pods::default(), &in_use, &store), 4);
        assert_eq!(used(), "300m");
        verify_all(&totals, &Pods::default(), &HashMap::new(), &store);
        assert!(
            lock(&totals.inner).namespaces.is_empty(),
            "no quota: not tracked"
        );
    }

    /// A change the totals never saw (the store holds a version they did not count) is
    /// corrected by the check, though no delta marked the namespace as changed. It is no
    /// drift: the sums were right for the objects they counted.
    #[test]
    fn verify_corrects_a_change_the_totals_missed() {
        let totals: Totals<Pod> = Totals::default();
        let names = strings(&["requests.cpu"]);
        let scope = parse_scope(&[], None);
        let used = || {
            totals
                .usage(&Pods::default(), "ns", &scope, &names, &at(), Vec::new)
                .list["requests.cpu"]
                .to_string()
        };
        let counted = vec![pod("a", 1, "100m"), pod("b", 2, "200m")];
        totals.usage(&Pods::default(), "ns", &scope, &names, &at(), || {
            counted.clone()
        });
        let in_use = HashMap::from([("ns".to_string(), vec![scope.clone()])]);
        let store = vec![pod("a", 3, "1"), counted[1].clone()];
        assert_eq!(verify_all(&totals, &Pods::default(), &in_use, &store), 0);
        assert_eq!(used(), "1200m");
        // A pod the store has and the totals never counted.
        let store = vec![store[0].clone(), store[1].clone(), pod("c", 4, "1")];
        verify_all(&totals, &Pods::default(), &in_use, &store);
        assert_eq!(used(), "2200m");
    }

    /// Pods, counting how many times a pod's usage is evaluated.
    #[derive(Default)]
    struct CountedPods(Pods, Arc<std::sync::atomic::AtomicUsize>);

    impl Evaluator for CountedPods {
        type Object = Pod;
        type Context = ();
        const RESOURCE: &'static str = "pods";

        fn matching(&self, names: &[String], at: &EvaluatorInputs) -> Vec<String> {
            self.0.matching(names, at)
        }
        fn matches(&self, pod: &Pod, scope: &QuotaScope) -> bool {
            self.0.matches(pod, scope)
        }
        fn usage(&self, pod: &Pod, at: &EvaluatorInputs) -> Usage {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.usage(pod, at)
        }
        fn same_charge(&self, old: &Pod, new: &Pod) -> bool {
            self.0.same_charge(old, new)
        }
        fn update_matters(&self, old: &Pod, new: &Pod, at: &EvaluatorInputs) -> bool {
            self.0.update_matters(old, new, at)
        }
    }

    #[test]
    fn a_readiness_flip_is_not_evaluated_and_later_changes_still_add_up() {
        let pods = CountedPods::default();
        let totals: Totals<Pod> = Totals::default();
        let names = strings(&["requests.cpu"]);
        let scope = parse_scope(&[], None);
        let used = |totals: &Totals<Pod>| {
            totals
                .usage(&pods, "ns", &scope, &names, &at(), Vec::new)
                .list["requests.cpu"]
                .to_string()
        };
        let store = vec![pod("a", 1, "100m"), pod("b", 2, "200m")];
        totals.usage(&pods, "ns", &scope, &names, &at(), || store.clone());
        let evaluated = || pods.1.load(std::sync::atomic::Ordering::Relaxed);
        let before = evaluated();

        let mut flipped = (*pod("a", 3, "100m")).clone();
        let ready_false: Arc<Pod> = from(json!({"metadata": meta("a", 3),
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}}));
        flipped.status = ready_false.status.clone();
        totals.refresh(&pods, "ns", "a", Some(Arc::new(flipped)), &at());
        assert_eq!(evaluated(), before, "a readiness flip costs no evaluation");
        assert_eq!(used(&totals), "300m");

        // The version kept is the new one: the next change subtracts what it charges.
        totals.refresh(&pods, "ns", "a", Some(pod("a", 4, "1")), &at());
        assert_eq!(evaluated(), before + 2, "old and new evaluated");
        assert_eq!(used(&totals), "1200m");
        totals.refresh(&pods, "ns", "a", None, &at());
        assert_eq!(used(&totals), "200m");
    }

    /// The check evaluates a changed namespace's objects once (the recomputed sums are the
    /// rebuilt ones), and an unchanged namespace's not at all.
    #[test]
    fn verify_evaluates_each_changed_namespace_once_and_skips_the_rest() {
        let pods = CountedPods::default();
        let totals: Totals<Pod> = Totals::default();
        let names = strings(&["requests.cpu"]);
        let scope = parse_scope(&[], None);
        let in_use = HashMap::from([("ns".to_string(), vec![scope.clone()])]);
        let mut store = vec![pod("a", 1, "100m"), pod("b", 2, "200m")];
        totals.usage(&pods, "ns", &scope, &names, &at(), || store.clone());
        let evaluated = || pods.1.load(std::sync::atomic::Ordering::Relaxed);

        let before = evaluated();
        assert_eq!(verify_all(&totals, &pods, &in_use, &store), 0);
        assert_eq!(evaluated(), before, "nothing changed: nothing evaluated");

        store.push(pod("c", 3, "1"));
        totals.refresh(&pods, "ns", "c", Some(store[2].clone()), &at());
        let before = evaluated();
        assert_eq!(verify_all(&totals, &pods, &in_use, &store), 0);
        assert_eq!(evaluated(), before + 3, "each pod once");
        let before = evaluated();
        assert_eq!(verify_all(&totals, &pods, &in_use, &store), 0);
        assert_eq!(evaluated(), before, "checked since: skipped");
    }

    #[test]
    fn a_pod_past_its_grace_period_stops_counting_without_an_event() {
        let totals: Totals<Pod> = Totals::default();
        let names = strings(&["pods"]);
        let scope = parse_scope(&[], None);
        let mut deleting = (*pod("a", 1, "1")).clone();
        deleting.metadata.deletion_timestamp = Some(now());
        deleting.metadata.deletion_grace_period_seconds = Some(30);
        let store = vec![Arc::new(deleting), pod("b", 2, "1")];
        let at = |secs: i64| {
            let t = Time(Timestamp::from_second(1_700_000_000 + secs).expect("valid"));
            totals
                .usage(
                    &Pods::default(),
                    "ns",
                    &scope,
                    &names,
                    &EvaluatorInputs::at(t),
                    || store.clone(),
                )
                .list["pods"]
                .to_string()
        };
        assert_eq!(at(0), "2");
        assert_eq!(at(31), "1");
    }
}
