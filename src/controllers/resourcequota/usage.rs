//! What the usage evaluators (`evaluator/`) share: resource lists and their arithmetic, as
//! upstream's `k8s.io/apiserver/pkg/quota/v1` (`resources.go`, `generic.CalculateUsageStats`)
//! and the component-helpers they call. Pure: the controller lists the objects and passes
//! them in.
//!
//! Quantities that fail to parse cannot exist upstream (decoding would fail), nor can
//! negative ones (validation refuses them); here they are skipped one value at a time and
//! reported in [`Usage::problems`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::runtime::watching::stored::Stored;

use crate::k8s::quantity::{Format, Quantity};

/// A resource list with parsed quantities, keyed by resource name.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Usage of one object (or a sum of objects) plus the values that had to be skipped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    pub list: ResourceList,
    pub problems: Vec<String>,
}

/// How a problem ends when arithmetic for one resource name left the exact range: the
/// name's total is then wrong and must not be written ([`out_of_range_names`]).
pub(super) const OUT_OF_RANGE: &str = "is out of range; its total is not written";

/// The resource names whose totals went out of range, from the problems of a usage.
pub fn out_of_range_names<'a>(problems: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
    problems
        .into_iter()
        .filter(|p| p.ends_with(OUT_OF_RANGE))
        // Quantities print without ": ", so the last one ends the name.
        .filter_map(|p| p.rsplit_once(": "))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// Go `Add` on two quantities; on overflow (past ~1.7e29 units, far beyond real quotas)
/// keeps `a` and reports the name as out of range.
pub(super) fn add_quantity(
    a: &Quantity,
    b: &Quantity,
    name: &str,
    problems: &mut Vec<String>,
) -> Quantity {
    a.checked_add(b).unwrap_or_else(|| {
        problems.push(format!("{name}: sum of {a} and {b} {OUT_OF_RANGE}"));
        a.clone()
    })
}

/// component-helpers `addResourceList`: copies new names, adds to existing ones.
pub(super) fn add_into(list: &mut ResourceList, new: &ResourceList, problems: &mut Vec<String>) {
    for (name, quantity) in new {
        let sum = match list.get(name) {
            Some(value) => add_quantity(value, quantity, name, problems),
            None => quantity.clone(),
        };
        list.insert(name.clone(), sum);
    }
}

/// component-helpers `maxResourceList`: replaces only on strictly greater, so ties keep
/// the existing value (and its format).
pub(super) fn max_into(list: &mut ResourceList, new: &ResourceList) {
    for (name, quantity) in new {
        if list.get(name).is_none_or(|value| quantity > value) {
            list.insert(name.clone(), quantity.clone());
        }
    }
}

/// `quota.Add`: `a + b` per name; a name only in `b` is copied.
pub fn add_lists(a: &ResourceList, b: &ResourceList) -> Usage {
    let mut problems = Vec::new();
    let mut list = a.clone();
    add_into(&mut list, b, &mut problems);
    Usage { list, problems }
}

/// `quota.Mask`: keeps only `names`.
pub fn mask_list<S: AsRef<str>>(list: &ResourceList, names: &[S]) -> ResourceList {
    list.iter()
        .filter(|(k, _)| names.iter().any(|n| n.as_ref() == k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `quota.Intersection`: names of `input` in `known`, deduplicated and sorted.
pub(super) fn intersection<S: AsRef<str>>(input: &[S], known: &[&str]) -> Vec<String> {
    let mut result: Vec<String> = input
        .iter()
        .map(AsRef::as_ref)
        .filter(|n| known.contains(n))
        .map(str::to_string)
        .collect();
    result.sort();
    result.dedup();
    result
}

/// Parses a raw resource list, skipping (and reporting) malformed values. An empty
/// result is `None`: the API server never sends empty maps (JSON omits them, protobuf
/// decodes them as nil), so upstream's `!= nil` checks mean "non-empty".
/// Reads a PVC's `BTreeMap` and a pod view's [`ResourceMap`](crate::k8s::view::ResourceMap) alike.
pub(super) fn parse_list<'a, N: AsRef<str> + fmt::Display>(
    raw: Option<impl IntoIterator<Item = (N, &'a K8sQuantity)>>,
    what: &Place<'_>,
    problems: &mut Vec<String>,
) -> Option<ResourceList> {
    let mut list = ResourceList::new();
    for (name, raw_quantity) in raw? {
        match Quantity::try_from(raw_quantity) {
            // API validation refuses negative resource quantities; counted, one would lower
            // the usage charged for everything else.
            Ok(q) if q.is_negative() => problems.push(format!(
                "{what}[{name}]: negative quantity {:?}; skipped",
                raw_quantity.0
            )),
            Ok(q) => {
                list.insert(name.as_ref().to_string(), q);
            }
            Err(e) => problems.push(format!(
                "{what}[{name}]: invalid quantity {:?}: {e}; skipped",
                raw_quantity.0
            )),
        }
    }
    (!list.is_empty()).then_some(list)
}

pub(super) fn one() -> Quantity {
    Quantity::from_integer(1, Format::DecimalSI)
}

/// Where a resource list sits, for problem messages (`pod ns/p: spec.containers[0].resources`).
/// Displayed only when a problem is reported: every pod change is parsed, and nearly none has
/// one, so building each place's text eagerly was a dozen allocations per pod for nothing.
#[derive(Clone, Copy)]
pub(super) enum Place<'a> {
    /// `<kind> <namespace>/<name>`.
    Object {
        kind: &'a str,
        namespace: &'a str,
        name: &'a str,
    },
    /// A field: `<object>: <field>` under the object, `<parent>.<field>` deeper.
    Field(&'a Place<'a>, &'a str),
    /// `<list>[<index>]`.
    Index(&'a Place<'a>, usize),
}

impl<'a> Place<'a> {
    pub(super) fn object<K: Stored>(object: &'a K, kind: &'a str) -> Self {
        let (namespace, name) = object.place();
        Place::Object {
            kind,
            namespace,
            name,
        }
    }

    pub(super) fn field(&'a self, field: &'a str) -> Self {
        Place::Field(self, field)
    }

    pub(super) fn index(&'a self, index: usize) -> Self {
        Place::Index(self, index)
    }
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Object {
                kind,
                namespace,
                name,
            } => write!(f, "{kind} {namespace}/{name}"),
            Place::Field(parent @ Place::Object { .. }, field) => write!(f, "{parent}: {field}"),
            Place::Field(parent, field) => write!(f, "{parent}.{field}"),
            Place::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

pub(super) fn time_nanos(t: Option<&Time>) -> Option<i128> {
    t.map(|t| t.0.as_nanosecond())
}

// ---------------------------------------------------------------------------------------
// CalculateUsageStats
// ---------------------------------------------------------------------------------------

/// `generic.CalculateUsageStats` over already-listed objects: every name in `names`
/// starts at `0` (DecimalSI), then the usage of each matching object is added with
/// `quota.Add`, in iteration order.
///
/// Like upstream the sum is NOT masked to `names`: object usage names outside `names`
/// are kept, and `CalculateUsage` adds evaluator results together and masks only at
/// the end (to the surviving candidate names), so an unmasked name from one evaluator
/// can add to a name tracked by another. Use [`add_lists`] and [`mask_list`] for that.
pub fn sum_usage<'a, T: 'a>(
    objects: impl IntoIterator<Item = &'a T>,
    names: &[String],
    mut usage: impl FnMut(&T) -> Usage,
    mut matches: impl FnMut(&T) -> bool,
) -> Usage {
    let mut list: ResourceList = names
        .iter()
        .map(|n| (n.clone(), Quantity::zero()))
        .collect();
    let mut problems = Vec::new();
    for object in objects {
        if !matches(object) {
            continue;
        }
        let one = usage(object);
        problems.extend(one.problems);
        add_into(&mut list, &one.list, &mut problems);
    }
    Usage { list, problems }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::resourcequota::evaluator::QuotaGates;
    use crate::controllers::resourcequota::evaluator::pods::pod_usage;
    use crate::controllers::resourcequota::testing::{container, now, pod, strings, want};

    #[test]
    fn sum_usage_starts_at_zero_and_adds_in_order() {
        let pods = vec![
            pod(
                json!({"containers": [container("a", json!({"cpu": "500m", "memory": "512Mi"}), json!(null))]}),
            ),
            pod(
                json!({"containers": [container("a", json!({"cpu": "1", "memory": "1Gi"}), json!(null))]}),
            ),
        ];
        let names: Vec<String> = ["requests.cpu", "requests.memory", "limits.cpu", "pods"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let got = sum_usage(
            &pods,
            &names,
            |p| pod_usage(p, &now(), QuotaGates::default()),
            |_| true,
        );
        let masked = mask_list(&got.list, &names);
        assert_eq!(
            strings(&masked),
            want(&[
                ("requests.cpu", "1500m"),
                ("requests.memory", "1536Mi"),
                ("limits.cpu", "0"),
                ("pods", "2")
            ])
        );
        // Unmasked: names outside `names` are kept, like upstream.
        assert_eq!(
            got.list
                .get("count/pods")
                .map(ToString::to_string)
                .as_deref(),
            Some("2")
        );
        let nothing = sum_usage(
            &pods,
            &names,
            |p| pod_usage(p, &now(), QuotaGates::default()),
            |_| false,
        );
        assert_eq!(
            strings(&nothing.list),
            want(&[
                ("requests.cpu", "0"),
                ("requests.memory", "0"),
                ("limits.cpu", "0"),
                ("pods", "0")
            ])
        );
        let total = add_lists(&got.list, &nothing.list);
        assert_eq!(
            total
                .list
                .get("requests.cpu")
                .map(ToString::to_string)
                .as_deref(),
            Some("1500m")
        );
    }
}
