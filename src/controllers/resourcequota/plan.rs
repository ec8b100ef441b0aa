//! The resourcequota controller's decisions. `syncResourceQuota` as a plan: from a quota, the
//! evaluators in registry order and what they read (`EvaluatorInputs`), the status to write
//! (or none), the bad input to report, and the evaluators' failures; the status and dirty
//! rules are in [`status`]. No I/O: `sync.rs` writes the plan's status through the writer.

pub mod status;

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaStatus};
use kube::ResourceExt;

use self::status::{candidates, hard, next_status};
use super::error::UsageError;
use super::evaluator::{AnyEvaluator, EvaluatorInputs};
use super::scope::{QuotaScope, parse_scope};
use super::usage::{ResourceList, add_lists, mask_list, out_of_range_names};
use crate::k8s::quantity::Quantity;
use crate::runtime::writing::writer::UpstreamFix;

/// What one sync of a quota is to do.
#[derive(Debug, Default, PartialEq)]
pub struct QuotaPlan {
    /// Bad input in the quota or the objects it counts: (metric reason, problem).
    pub problems: Vec<(&'static str, String)>,
    /// The status to write; `None` when nothing is dirty.
    pub status: Option<ResourceQuotaStatus>,
    /// Why evaluators failed; their names kept their previous values in `status`.
    pub errors: Vec<UsageError>,
    /// The fix that makes writing this status differ from upstream, if one does.
    pub fix: Option<UpstreamFix>,
}

/// kubernetes#133737 (and #96066): upstream runs no quota worker until every counted type
/// has been listed, so one type whose list keeps failing freezes every quota; kcm writes
/// what it can compute.
pub const QUOTAS_KEPT_WHILE_A_TYPE_FAILS: UpstreamFix = UpstreamFix("kubernetes#133737");

/// The quota's scopes and scope selector.
pub fn quota_scope(quota: &ResourceQuota) -> QuotaScope {
    let spec = quota.spec.as_ref();
    parse_scope(
        spec.and_then(|s| s.scopes.as_deref()).unwrap_or_default(),
        spec.and_then(|s| s.scope_selector.as_ref()),
    )
}

/// Whether some evaluator covers the quota resource `name`.
pub fn tracked(evaluators: &[Arc<dyn AnyEvaluator>], name: &str, at: &EvaluatorInputs) -> bool {
    let names = [name.to_string()];
    evaluators
        .iter()
        .any(|e| !e.matching(&names, at).is_empty())
}

/// `syncResourceQuota`: the usage of every name some evaluator covers, and the status that
/// makes.
pub fn plan_sync(
    quota: &ResourceQuota,
    evaluators: &[Arc<dyn AnyEvaluator>],
    at: &EvaluatorInputs,
) -> QuotaPlan {
    let (computed, problems, errors) = calculate(quota, evaluators, at);
    let status = next_status(quota, &computed);
    let upstream_waits = evaluators.iter().any(|e| !e.listed());
    let fix = (status.is_some() && upstream_waits).then_some(QUOTAS_KEPT_WHILE_A_TYPE_FAILS);
    QuotaPlan {
        problems,
        status,
        errors,
        fix,
    }
}

type Calculated = (ResourceList, Vec<(&'static str, String)>, Vec<UsageError>);

/// `CalculateUsage`: every evaluator's usage for the names it tracks; a failing evaluator's
/// names drop out (they keep their previous values) and its error is returned.
fn calculate(
    quota: &ResourceQuota,
    evaluators: &[Arc<dyn AnyEvaluator>],
    at: &EvaluatorInputs,
) -> Calculated {
    let ns = quota.namespace().unwrap_or_default();
    let scope = quota_scope(quota);
    let mut problems: Vec<(&'static str, String)> = scope
        .selector_problems()
        .into_iter()
        .map(|p| ("invalid-scope-selector", p))
        .collect();
    // A limit that does not parse is copied to status.hard as written (and compared as
    // text), but it is bad input all the same.
    for (name, limit) in hard(quota).into_iter().flatten() {
        if let Err(err) = Quantity::try_from(limit) {
            problems.push((
                "invalid-quantity",
                format!(
                    "spec.hard[{name}]: invalid quantity {:?}: {err}; copied to status.hard as written",
                    limit.0
                ),
            ));
        }
    }
    let mut remaining: Vec<String> = candidates(quota, |n| tracked(evaluators, n, at));
    let mut total = ResourceList::new();
    let mut errors = Vec::new();
    // A total past the exact range would be a wrong (too low) status: such a name keeps
    // its previous value, or stays unset, which quota admission treats as unknown.
    let mut out_of_range = BTreeSet::new();
    for evaluator in evaluators {
        let names = evaluator.matching(&remaining, at);
        if names.is_empty() {
            continue;
        }
        match evaluator.usage(&ns, &scope, &names, at) {
            Ok(usage) => {
                let sum = add_lists(&total, &usage.list);
                let found = usage.problems.iter().chain(&sum.problems);
                problems.extend(found.clone().map(|p| ("invalid-quantity", p.clone())));
                out_of_range.extend(out_of_range_names(found));
                total = sum.list;
            }
            Err(err) => {
                errors.push(err);
                remaining.retain(|n| !names.contains(n));
            }
        }
    }
    remaining.retain(|n| !out_of_range.contains(n));
    (mask_list(&total, &remaining), problems, errors)
}

#[cfg(test)]
mod tests;
