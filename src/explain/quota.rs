//! A ResourceQuota: the quota controller's plan (`plan_sync`) over fresh evaluators of the
//! stores, and for each resource in `hard` the objects whose usage makes up `used`, from the
//! same `matches` and `usage` the sums are made of; and the objects left out, and why.

use std::cmp::Ordering;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde::Serialize;

use super::{ExplainError, Explanation, LARGEST, Reads, Reasons, differences};
use crate::controllers::resourcequota::evaluator::{
    AnyEvaluator, Charge, EvaluatorInputs, QuotaGates,
};
use crate::controllers::resourcequota::plan::{plan_sync, quota_scope, tracked};
use crate::controllers::resourcequota::registry::over_informers;
use crate::k8s::quantity::Quantity;

/// One object's share of a resource.
#[derive(Debug, Clone, Serialize)]
pub struct Share {
    /// `pods/web-1`.
    pub object: String,
    pub amount: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUse {
    pub resource: String,
    pub hard: String,
    /// What kcm computes (or keeps, when it does not compute it).
    pub used: String,
    /// The objects that charge it, largest first.
    pub objects: Vec<Share>,
    /// Objects charging it that are not listed (beyond the largest ten).
    pub more: usize,
    /// Why kcm does not compute it, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_computed: Option<String>,
}

/// An object in the namespace that charges the quota nothing (or only its count).
#[derive(Debug, Clone, Serialize)]
pub struct LeftOut {
    pub object: String,
    pub why: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaReasons {
    /// The quota's scopes and scope selector, as written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    pub resources: Vec<ResourceUse>,
    pub left_out: Vec<LeftOut>,
    /// Bad input, and evaluators that failed (their resources keep the stored values).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

fn scopes_of(quota: &ResourceQuota) -> Vec<String> {
    let spec = quota.spec.as_ref();
    let mut scopes: Vec<String> = spec.and_then(|s| s.scopes.clone()).unwrap_or_default();
    let selector = spec.and_then(|s| s.scope_selector.as_ref());
    for requirement in selector
        .and_then(|s| s.match_expressions.as_ref())
        .into_iter()
        .flatten()
    {
        let values = requirement.values.clone().unwrap_or_default().join(",");
        scopes.push(format!(
            "{} {} {values}",
            requirement.scope_name, requirement.operator
        ));
    }
    scopes
}

/// Why an object the scopes select charges none of the quota's resources.
fn left_out(charge: &Charge, hard: &[String]) -> Option<String> {
    if !charge.in_scope {
        return Some("outside the quota's scopes".into());
    }
    if let Some(why) = &charge.left_out {
        return Some(format!("{why}: counts only as an object"));
    }
    let charges_any = charge
        .usage
        .list
        .iter()
        .any(|(name, q)| !q.is_zero() && hard.contains(name));
    if charges_any {
        return None;
    }
    let names: Vec<&str> = charge.usage.list.keys().map(String::as_str).collect();
    Some(format!(
        "charges none of the quota's resources (it charges {})",
        names.join(", ")
    ))
}

pub fn explain(
    reads: &Reads<'_>,
    ns: &str,
    name: &str,
    all: bool,
) -> Result<Explanation, ExplainError> {
    let informers = reads.informers;
    let quota = informers
        .get::<ResourceQuota>()
        .store()
        .get(ns, name)
        .ok_or_else(|| ExplainError::NotFound {
            kind: "ResourceQuota",
            name: format!("{ns}/{name}"),
        })?;
    let gates = QuotaGates::of(reads.gates);
    let evaluators: Vec<Arc<dyn AnyEvaluator>> = over_informers(informers, gates, |_| {
        informers.is_started::<ResourceClaim>()
    });
    let at = EvaluatorInputs::new(reads.now.clone(), informers);
    let plan = plan_sync(&quota, &evaluators, &at);
    let stored = quota.status.clone().unwrap_or_default();
    let desired = plan.status.clone().unwrap_or_else(|| stored.clone());
    let scope = quota_scope(&quota);
    let mut charges: Vec<Charge> = evaluators
        .iter()
        .flat_map(|e| e.charges(ns, &scope, &at))
        .collect();
    charges.sort_by(|a, b| (a.resource, &a.name).cmp(&(b.resource, &b.name)));
    let hard = quota
        .spec
        .as_ref()
        .and_then(|s| s.hard.clone())
        .unwrap_or_default();
    let hard_names: Vec<String> = hard.keys().cloned().collect();
    let resources = hard
        .iter()
        .map(|(resource, limit)| {
            let mut shares: Vec<(&Charge, Quantity)> = charges
                .iter()
                .filter(|c| c.in_scope)
                .filter_map(|c| {
                    let amount = c.usage.list.get(resource)?;
                    (!amount.is_zero()).then(|| (c, amount.clone()))
                })
                .collect();
            // Largest first; equal ones by name.
            shares.sort_by(|(a, x), (b, y)| {
                y.partial_cmp(x)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| (a.resource, &a.name).cmp(&(b.resource, &b.name)))
            });
            let listed = if all { shares.len() } else { LARGEST };
            let more = shares.len().saturating_sub(listed);
            let objects = shares
                .iter()
                .take(listed)
                .map(|(c, amount)| Share {
                    object: format!("{}/{}", c.resource, c.name),
                    amount: amount.to_string(),
                })
                .collect();
            let used = desired
                .used
                .as_ref()
                .and_then(|u| u.get(resource))
                .map(|q| q.0.clone())
                .unwrap_or_default();
            let not_computed = (!tracked(&evaluators, resource, &at)).then(|| {
                "kcm explain does not count this resource (objects of another type); the stored value is kept"
                    .to_string()
            });
            ResourceUse {
                resource: resource.clone(),
                hard: limit.0.clone(),
                used,
                objects,
                more,
                not_computed,
            }
        })
        .collect();
    let left_out = charges
        .iter()
        .filter_map(|c| {
            let why = left_out(c, &hard_names)?;
            Some(LeftOut {
                object: format!("{}/{}", c.resource, c.name),
                why,
            })
        })
        .collect();
    let mut problems: Vec<String> = plan.problems.iter().map(|(_, p)| p.clone()).collect();
    problems.extend(plan.errors.iter().map(ToString::to_string));
    let diffs = differences(&quota.status, &Some(&desired));
    let in_sync = diffs.is_empty();
    Ok(Explanation {
        kind: "ResourceQuota",
        namespace: ns.to_string(),
        name: name.to_string(),
        in_sync,
        next: if in_sync {
            "keep the status".into()
        } else {
            "write the status".into()
        },
        differences: diffs,
        reasons: Reasons::ResourceQuota(QuotaReasons {
            scopes: scopes_of(&quota),
            resources,
            left_out,
            problems,
        }),
    })
}
