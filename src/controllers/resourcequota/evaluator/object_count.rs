//! Object counts of every other quotable type (upstream `generic.objectCountEvaluator`):
//! `count/<resource>[.<group>]` and the legacy aliases, from an object counter that watches
//! only the metadata of the types some quota counts.

use std::sync::Arc;

use super::{AnyEvaluator, EvaluatorInputs};
use crate::controllers::resourcequota::error::UsageError;
use crate::controllers::resourcequota::scope::{QuotaScope, unscoped_matches};
use crate::controllers::resourcequota::usage::{Usage, intersection, one};
use crate::k8s::quantity::{Format, Quantity};
use crate::runtime::watching::counter::ObjectCounter;

/// The object count of one type: its names (`count/…` and a legacy alias) and its counter.
pub struct ObjectCount {
    names: Vec<String>,
    counter: Arc<ObjectCounter>,
}

impl ObjectCount {
    pub fn new(group: &str, resource: &str, counter: Arc<ObjectCounter>) -> Self {
        Self {
            names: object_count_names(group, resource),
            counter,
        }
    }

    /// Stops the counter's watch.
    pub fn stop(&self) {
        self.counter.stop();
    }
}

impl AnyEvaluator for ObjectCount {
    fn matching(&self, names: &[String], _: &EvaluatorInputs) -> Vec<String> {
        object_count_matching(&self.names, names)
    }

    fn listed(&self) -> bool {
        self.counter.is_synced()
    }

    fn usage(
        &self,
        namespace: &str,
        scope: &QuotaScope,
        names: &[String],
        _: &EvaluatorInputs,
    ) -> Result<Usage, UsageError> {
        if !self.listed() {
            return Err(UsageError::CountNotKnown {
                names: names.to_vec(),
            });
        }
        let count = if unscoped_matches(scope) {
            i64::try_from(self.counter.count(namespace)).unwrap_or(i64::MAX)
        } else {
            0
        };
        let list = names
            .iter()
            .map(|n| (n.clone(), Quantity::from_integer(count, Format::DecimalSI)))
            .collect();
        Ok(Usage {
            list,
            problems: Vec::new(),
        })
    }
}

/// `generic.ObjectCountQuotaResourceNameFor`.
pub fn object_count_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }
}

/// registry.go `legacyObjectCountAliases`.
pub fn legacy_object_count_alias(group: &str, resource: &str) -> Option<&'static str> {
    if !group.is_empty() {
        return None;
    }
    match resource {
        "configmaps" => Some("configmaps"),
        "resourcequotas" => Some("resourcequotas"),
        "replicationcontrollers" => Some("replicationcontrollers"),
        "secrets" => Some("secrets"),
        _ => None,
    }
}

/// The names an object-count evaluator tracks: `count/...` plus the legacy alias.
pub fn object_count_names(group: &str, resource: &str) -> Vec<String> {
    let mut names = vec![object_count_name(group, resource)];
    names.extend(legacy_object_count_alias(group, resource).map(str::to_string));
    names
}

/// Object-count `MatchingResources`: `quota.Intersection(input, tracked)`.
pub fn object_count_matching<S: AsRef<str>>(tracked: &[String], names: &[S]) -> Vec<String> {
    let known: Vec<&str> = tracked.iter().map(String::as_str).collect();
    intersection(names, &known)
}

/// Object-count `Usage`: 1 for every tracked name.
pub fn object_count_usage(tracked: &[String]) -> Usage {
    Usage {
        list: tracked.iter().map(|n| (n.clone(), one())).collect(),
        problems: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::resourcequota::testing::{strings, want};

    #[test]
    fn object_counts() {
        assert_eq!(
            object_count_names("", "configmaps"),
            vec!["count/configmaps", "configmaps"]
        );
        assert_eq!(
            object_count_names("apps", "deployments"),
            vec!["count/deployments.apps"]
        );
        assert_eq!(
            object_count_names("", "secrets"),
            vec!["count/secrets", "secrets"]
        );
        let tracked = object_count_names("", "replicationcontrollers");
        assert_eq!(
            object_count_matching(
                &tracked,
                &[
                    "pods",
                    "replicationcontrollers",
                    "count/replicationcontrollers"
                ]
            ),
            vec!["count/replicationcontrollers", "replicationcontrollers"]
        );
        assert_eq!(
            strings(&object_count_usage(&tracked).list),
            want(&[
                ("count/replicationcontrollers", "1"),
                ("replicationcontrollers", "1")
            ])
        );
        assert_eq!(
            legacy_object_count_alias("", "resourcequotas"),
            Some("resourcequotas")
        );
        assert_eq!(legacy_object_count_alias("apps", "secrets"), None);
    }
}
