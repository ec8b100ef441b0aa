//! Quota scopes (`spec.scopes` and `spec.scopeSelector`), parsed once per quota and matched
//! by each evaluator against its objects; shared by every evaluator.

use k8s_openapi::api::core::v1::ScopeSelector;

use crate::k8s::golang::go_quote;
use crate::k8s::selector::{LabelSet, Operator, Requirement, SelectorError};

/// `core.ResourceQuotaScope` values.
const KNOWN_SCOPES: [&str; 7] = [
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
];

/// One scope requirement of a quota: an entry of `spec.scopes` (operator `Exists`) or of
/// `spec.scopeSelector.matchExpressions`, in that order.
#[derive(Clone, Debug, PartialEq)]
pub struct ScopeRequirement {
    pub scope_name: String,
    pub operator: String,
    pub values: Vec<String>,
    /// Upstream builds a label selector from the requirement each time it needs one;
    /// building it once gives the same answer, error included.
    pub(super) selector: Result<LabelRequirement, ScopeError>,
}

/// The scopes an object must match for a quota to charge it (`spec.scopes` plus
/// `spec.scopeSelector`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuotaScope {
    requirements: Vec<ScopeRequirement>,
}

impl QuotaScope {
    /// True when the quota has neither scopes nor selector expressions.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn requirements(&self) -> &[ScopeRequirement] {
        &self.requirements
    }

    /// Whether an object matches every requirement, by `matches`. A requirement upstream
    /// cannot turn into a selector (`Err`) matches nothing: upstream aborts the sum on the
    /// first object with no error, and the failure does not depend on the object, so the
    /// result is all zeros.
    pub fn all_match(
        &self,
        matches: impl Fn(&ScopeRequirement) -> Result<bool, ScopeError>,
    ) -> bool {
        self.requirements
            .iter()
            .all(|req| matches(req).unwrap_or(false))
    }

    /// Requirements whose label selector upstream cannot build, with the reason. Such a
    /// requirement makes the evaluators that need the selector (PriorityClass for pods,
    /// VolumeAttributesClass for PVCs) count nothing; worth a log line, not an error. So is
    /// a scope name validation would refuse: it matches no object.
    pub fn selector_problems(&self) -> Vec<String> {
        self.requirements
            .iter()
            .filter_map(|r| match &r.selector {
                Err(e) => Some(format!("{}: {e}", r.scope_name)),
                Ok(_) if !KNOWN_SCOPES.contains(&r.scope_name.as_str()) => Some(format!(
                    "{:?} is not a known quota scope; it matches no object",
                    r.scope_name
                )),
                Ok(_) => None,
            })
            .collect()
    }
}

/// Builds the quota's scope requirements. Never fails: upstream only notices a bad
/// selector when an evaluator uses it, and then the evaluator counts nothing (its
/// `CalculateUsageStats` returns the zeros it started with), which the match functions
/// here reproduce by matching no object.
pub fn parse_scope(scopes: &[String], selector: Option<&ScopeSelector>) -> QuotaScope {
    let from_scopes = scopes
        .iter()
        .map(|s| ScopeRequirement::new(s, "Exists", &[]));
    let from_selector = selector
        .and_then(|s| s.match_expressions.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|e| {
            ScopeRequirement::new(
                &e.scope_name,
                &e.operator,
                e.values.as_deref().unwrap_or_default(),
            )
        });
    QuotaScope {
        requirements: from_scopes.chain(from_selector).collect(),
    }
}

impl ScopeRequirement {
    fn new(scope_name: &str, operator: &str, values: &[String]) -> Self {
        Self {
            scope_name: scope_name.to_string(),
            operator: operator.to_string(),
            values: values.to_vec(),
            selector: scoped_requirement_as_selector(scope_name, operator, values),
        }
    }
}

/// Why a scope requirement is no label selector.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error("{} is not a valid scope selector operator", go_quote(.0))]
    Operator(String),
    #[error(transparent)]
    Selector(#[from] SelectorError),
}

/// A single-requirement label selector over the key `scope_name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LabelRequirement(Requirement);

/// The one value a scope requirement is matched against (a pod's priority class, a claim's
/// volume attributes class), whatever the key.
struct ScopeValue<'a>(Option<&'a str>);

impl LabelSet for ScopeValue<'_> {
    fn label(&self, _key: &str) -> Option<&str> {
        self.0
    }
}

impl LabelRequirement {
    /// `labels.Requirement.Matches` against a set that holds the key with `value`, or
    /// lacks the key when `value` is `None`.
    pub(super) fn matches(&self, value: Option<&str>) -> bool {
        self.0.matches(ScopeValue(value))
    }
}

/// `helper.ScopedResourceSelectorRequirementsAsSelector`, checked as `labels.NewRequirement`
/// checks it.
fn scoped_requirement_as_selector(
    scope_name: &str,
    operator: &str,
    values: &[String],
) -> Result<LabelRequirement, ScopeError> {
    let op = Operator::of_expression(operator)
        .ok_or_else(|| ScopeError::Operator(operator.to_string()))?;
    Ok(LabelRequirement(Requirement::new(
        scope_name,
        op,
        values.to_vec(),
    )?))
}

/// `MatchesNoScopeFunc` semantics (services, ResourceClaims, object counts): any scope
/// requirement at all makes the object not count.
pub fn unscoped_matches(scope: &QuotaScope) -> bool {
    scope.is_empty()
}
