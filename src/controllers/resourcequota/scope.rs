//! Quota scopes (`spec.scopes` and `spec.scopeSelector`), parsed once per quota and matched
//! by each evaluator against its objects; shared by every evaluator.

use k8s_openapi::api::core::v1::ScopeSelector;

use super::names::{is_qualified_name, is_valid_label_value};

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
    pub(super) selector: Result<LabelRequirement, String>,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LabelOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// A single-requirement label selector over the key `scope_name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LabelRequirement {
    op: LabelOp,
    values: Vec<String>,
}

impl LabelRequirement {
    /// `labels.Requirement.Matches` against a set that holds the key with `value`, or
    /// lacks the key when `value` is `None`.
    pub(super) fn matches(&self, value: Option<&str>) -> bool {
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.op {
            LabelOp::In => value.is_some_and(has),
            LabelOp::NotIn => value.is_none_or(|v| !has(v)),
            LabelOp::Exists => value.is_some(),
            LabelOp::DoesNotExist => value.is_none(),
        }
    }
}

/// `helper.ScopedResourceSelectorRequirementsAsSelector` with the checks of
/// `labels.NewRequirement`.
fn scoped_requirement_as_selector(
    scope_name: &str,
    operator: &str,
    values: &[String],
) -> Result<LabelRequirement, String> {
    let op = match operator {
        "In" => LabelOp::In,
        "NotIn" => LabelOp::NotIn,
        "Exists" => LabelOp::Exists,
        "DoesNotExist" => LabelOp::DoesNotExist,
        other => return Err(format!("{other:?} is not a valid scope selector operator")),
    };
    let mut errors = Vec::new();
    if !is_qualified_name(scope_name) {
        errors.push(format!(
            "key: Invalid value: {scope_name:?}: not a qualified name"
        ));
    }
    match op {
        LabelOp::In | LabelOp::NotIn if values.is_empty() => {
            errors.push("values: for 'in', 'notin' operators, values set can't be empty".into());
        }
        LabelOp::Exists | LabelOp::DoesNotExist if !values.is_empty() => {
            errors.push("values: values set must be empty for exists and does not exist".into());
        }
        _ => {}
    }
    for value in values {
        if !is_valid_label_value(value) {
            errors.push(format!(
                "values: Invalid value: {value:?}: not a valid label value"
            ));
        }
    }
    if errors.is_empty() {
        Ok(LabelRequirement {
            op,
            values: values.to_vec(),
        })
    } else {
        Err(errors.join(", "))
    }
}

/// `MatchesNoScopeFunc` semantics (services, ResourceClaims, object counts): any scope
/// requirement at all makes the object not count.
pub fn unscoped_matches(scope: &QuotaScope) -> bool {
    scope.is_empty()
}
