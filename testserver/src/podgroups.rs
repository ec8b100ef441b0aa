//! `scheduling.k8s.io/v1alpha2` PodGroups (KEP-5729, alpha in v1.36): served only when the
//! server starts with [`crate::Options::pod_groups`] (a real cluster serves the version
//! only with it enabled). Validation is v1.36's as far as claim handling depends on it:
//! `spec.resourceClaims` (at most 4, unique names, exactly one source each, immutable) and
//! `status.resourceClaimStatuses` (at most 4, unique, each naming a `spec.resourceClaims`
//! entry). Status resets on create and the status subresource come with the type.

use serde_json::Value;

use crate::error::{ApiError, FieldError};
use crate::resources::ResourceType;

pub const GROUP: &str = "scheduling.k8s.io";
pub const PLURAL: &str = "podgroups";
/// `MaxPodGroupResourceClaims`.
const MAX_CLAIMS: usize = 4;

/// The served type.
pub fn resource_type() -> ResourceType {
    ResourceType {
        builtin: true,
        ..ResourceType::custom(GROUP, "v1alpha2", PLURAL, "PodGroup").with_status()
    }
}

pub(crate) fn is_pod_groups(rt: &ResourceType) -> bool {
    rt.group == GROUP && rt.plural == PLURAL
}

fn entries<'a>(obj: &'a Value, path: &[&str]) -> &'a [Value] {
    let mut v = obj;
    for p in path {
        v = &v[*p];
    }
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn name_of(entry: &Value) -> &str {
    entry["name"].as_str().unwrap_or_default()
}

/// Too many items, and duplicate names, in the list at `field`.
fn check_list(items: &[Value], field: &str, errors: &mut Vec<FieldError>) -> bool {
    if items.len() > MAX_CLAIMS {
        errors.push((
            field.to_string(),
            "FieldValueTooMany",
            format!(
                "Too many: {}: must have at most {MAX_CLAIMS} items",
                items.len()
            ),
        ));
        return false;
    }
    for (i, item) in items.iter().enumerate() {
        if items[..i].iter().any(|o| name_of(o) == name_of(item)) {
            errors.push((
                format!("{field}[{i}]"),
                "FieldValueDuplicate",
                format!("Duplicate value: {{\"name\":{:?}}}", name_of(item)),
            ));
        }
    }
    true
}

fn check_claims(obj: &Value, errors: &mut Vec<FieldError>) {
    let field = "spec.resourceClaims";
    let claims = entries(obj, &["spec", "resourceClaims"]);
    if !check_list(claims, field, errors) {
        return;
    }
    for (i, claim) in claims.iter().enumerate() {
        let at = format!("{field}[{i}]");
        if name_of(claim).is_empty() {
            errors.push((
                format!("{at}.name"),
                "FieldValueRequired",
                "Required value".into(),
            ));
        }
        let sources = ["resourceClaimName", "resourceClaimTemplateName"]
            .iter()
            .filter(|s| claim[**s].is_string())
            .count();
        if sources != 1 {
            let how = if sources == 0 { "one" } else { "exactly one" };
            errors.push((
                at,
                "FieldValueInvalid",
                format!(
                    "Invalid value: \"null\": must specify {how} of: `resourceClaimName`, `resourceClaimTemplateName`"
                ),
            ));
        }
    }
}

fn check_statuses(obj: &Value, errors: &mut Vec<FieldError>) {
    let field = "status.resourceClaimStatuses";
    let statuses = entries(obj, &["status", "resourceClaimStatuses"]);
    if !check_list(statuses, field, errors) {
        return;
    }
    let claims = entries(obj, &["spec", "resourceClaims"]);
    for (i, status) in statuses.iter().enumerate() {
        if !claims.iter().any(|c| name_of(c) == name_of(status)) {
            errors.push((
                format!("{field}[{i}].name"),
                "FieldValueInvalid",
                format!(
                    "Invalid value: {:?}: must match the name of an entry in `spec.resourceClaims`",
                    name_of(status)
                ),
            ));
        }
    }
}

fn invalid(rt: &ResourceType, obj: &Value, errors: Vec<FieldError>) -> Result<(), ApiError> {
    let Some((field, reason, body)) = errors.into_iter().next() else {
        return Ok(());
    };
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    Err(ApiError::invalid_field(
        (&rt.kind, &rt.group),
        name,
        &field,
        (reason, body),
    ))
}

/// A new PodGroup (its status already reset).
pub(crate) fn validate_create(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    check_claims(obj, &mut errors);
    invalid(rt, obj, errors)
}

/// An update of the PodGroup or of its status: the claims are immutable, and the statuses
/// must name them.
pub(crate) fn validate_update(
    rt: &ResourceType,
    new: &Value,
    current: &Value,
) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    if new["spec"]["resourceClaims"] != current["spec"]["resourceClaims"] {
        errors.push((
            "spec.resourceClaims".to_string(),
            "FieldValueInvalid",
            "Invalid value: \"null\": field is immutable".to_string(),
        ));
    }
    if new["status"]["resourceClaimStatuses"] != current["status"]["resourceClaimStatuses"] {
        check_statuses(new, &mut errors);
    }
    invalid(rt, new, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn group(claims: Value) -> Value {
        json!({"metadata": {"name": "g"}, "spec": {"resourceClaims": claims}})
    }

    fn message(result: Result<(), ApiError>) -> String {
        result.unwrap_err().message
    }

    #[test]
    fn claims_are_validated_as_v1_36_does() {
        let rt = resource_type();
        let ok = group(json!([{"name": "gpu", "resourceClaimTemplateName": "t"}]));
        assert!(validate_create(&rt, &ok).is_ok());
        assert_eq!(
            message(validate_create(&rt, &group(json!([{"name": "gpu"}])))),
            "PodGroup.scheduling.k8s.io \"g\" is invalid: spec.resourceClaims[0]: Invalid value: \"null\": must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
        );
        let both =
            json!([{"name": "gpu", "resourceClaimName": "c", "resourceClaimTemplateName": "t"}]);
        assert!(
            message(validate_create(&rt, &group(both))).contains("must specify exactly one of")
        );
        let twice = json!([{"name": "a", "resourceClaimName": "c"}, {"name": "a", "resourceClaimName": "d"}]);
        assert!(
            message(validate_create(&rt, &group(twice)))
                .contains("spec.resourceClaims[1]: Duplicate value")
        );
        let five: Vec<Value> = (0..5)
            .map(|i| json!({"name": format!("c{i}"), "resourceClaimName": "c"}))
            .collect();
        assert!(
            message(validate_create(&rt, &group(json!(five))))
                .ends_with("spec.resourceClaims: Too many: 5: must have at most 4 items")
        );
        let unnamed = json!([{"resourceClaimName": "c"}]);
        assert!(
            message(validate_create(&rt, &group(unnamed)))
                .ends_with("spec.resourceClaims[0].name: Required value")
        );
    }

    #[test]
    fn claims_are_immutable_and_statuses_name_them() {
        let rt = resource_type();
        let current = group(json!([{"name": "gpu", "resourceClaimTemplateName": "t"}]));
        let changed = group(json!([{"name": "gpu", "resourceClaimTemplateName": "u"}]));
        assert!(message(validate_update(&rt, &changed, &current)).ends_with("field is immutable"));
        let mut recorded = current.clone();
        recorded["status"] =
            json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "g-gpu-x"}]});
        assert!(validate_update(&rt, &recorded, &current).is_ok());
        recorded["status"]["resourceClaimStatuses"][0]["name"] = json!("cpu");
        assert_eq!(
            message(validate_update(&rt, &recorded, &current)),
            "PodGroup.scheduling.k8s.io \"g\" is invalid: status.resourceClaimStatuses[0].name: Invalid value: \"cpu\": must match the name of an entry in `spec.resourceClaims`"
        );
    }
}
