//! v1.36's validation of the claim fields kcm's resourceclaim controller writes, found by
//! tests/real/apiserver.rs (kube-testserver accepted them all):
//! - a ResourceClaim's status: `reservedFor` only while `allocation` is set (so a claim cannot
//!   be deallocated while reserved), one entry per UID, and an `allocation` that cannot be
//!   changed once set (only removed);
//! - a Pod's `status.resourceClaimStatuses`: each naming one `spec.resourceClaims` entry,
//!   once, and a `resourceClaimName` that is a DNS subdomain.

use serde_json::Value;

use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::storageversions::{SUBDOMAIN, invalid_value};
use kcm_values::validation::is_dns1123_subdomain;

pub(crate) fn is_claims(rt: &ResourceType) -> bool {
    rt.group == "resource.k8s.io" && rt.plural == "resourceclaims"
}

pub(crate) fn is_pods(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "pods"
}

fn items(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn present(value: &Value) -> bool {
    !value.is_null()
}

/// An update of a ResourceClaim (its status included).
pub(crate) fn validate_claim_update(
    rt: &ResourceType,
    new: &Value,
    current: &Value,
) -> Result<(), ApiError> {
    let (status, old) = (&new["status"], &current["status"]);
    let mut errors = Vec::new();
    if present(&old["allocation"])
        && present(&status["allocation"])
        && status["allocation"] != old["allocation"]
    {
        // The API server shows the Go value of its internal type here; this shows the JSON.
        errors.push(invalid_value(
            "status.allocation".into(),
            &status["allocation"],
            "field is immutable",
        ));
    }
    let reserved = items(&status["reservedFor"]);
    if !reserved.is_empty() && !present(&status["allocation"]) {
        errors.push((
            "status.reservedFor".into(),
            "FieldValueForbidden",
            "Forbidden: may not be specified when `allocated` is not set".into(),
        ));
    }
    for (i, entry) in reserved.iter().enumerate() {
        if reserved[..i].iter().any(|e| e["uid"] == entry["uid"]) {
            errors.push((
                format!("status.reservedFor[{i}]"),
                "FieldValueDuplicate",
                format!("Duplicate value: {}", entry["uid"]),
            ));
        }
    }
    ApiError::unless_valid(rt, new, &errors)
}

/// An update of a Pod whose `status.resourceClaimStatuses` changed.
pub(crate) fn validate_pod_update(
    rt: &ResourceType,
    new: &Value,
    current: &Value,
) -> Result<(), ApiError> {
    let statuses = items(&new["status"]["resourceClaimStatuses"]);
    if new["status"]["resourceClaimStatuses"] == current["status"]["resourceClaimStatuses"] {
        return Ok(());
    }
    let claims = items(&new["spec"]["resourceClaims"]);
    let field = "status.resourceClaimStatuses";
    let mut errors = Vec::new();
    for (i, status) in statuses.iter().enumerate() {
        let name = &status["name"];
        if statuses[..i].iter().any(|s| s["name"] == *name) {
            errors.push((
                format!("{field}[{i}].name"),
                "FieldValueDuplicate",
                format!("Duplicate value: {name}"),
            ));
        } else if !claims.iter().any(|c| c["name"] == *name) {
            errors.push(invalid_value(
                format!("{field}[{i}].name"),
                name,
                "must match the name of an entry in `spec.resourceClaims`",
            ));
        }
        if let Some(claim) = status["resourceClaimName"].as_str()
            && !is_dns1123_subdomain(claim)
        {
            errors.push(invalid_value(
                format!("{field}[{i}].resourceClaimName"),
                &status["resourceClaimName"],
                SUBDOMAIN,
            ));
        }
    }
    ApiError::unless_valid(rt, new, &errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rt(plural: &str) -> ResourceType {
        crate::resources::builtin_types()
            .into_iter()
            .find(|t| t.plural == plural && (is_claims(t) || is_pods(t)))
            .unwrap()
    }

    fn claim(status: Value) -> Value {
        json!({ "metadata": { "name": "c" }, "spec": {}, "status": status })
    }

    fn message(result: Result<(), ApiError>) -> String {
        result.err().map(|e| e.message).unwrap_or_default()
    }

    #[test]
    fn a_claim_is_reserved_only_while_allocated_once_per_uid_and_keeps_its_allocation() {
        let rt = rt("resourceclaims");
        let allocation = json!({ "devices": { "results": [{ "request": "gpu", "driver": "d", "pool": "p", "device": "a" }] } });
        let reserved = json!([{ "resource": "pods", "name": "a", "uid": "u1" }]);
        let allocated = claim(json!({ "allocation": allocation }));
        let both = claim(json!({ "allocation": allocation, "reservedFor": reserved }));
        assert_eq!(
            message(validate_claim_update(
                &rt,
                &claim(json!({ "reservedFor": reserved })),
                &claim(json!({}))
            )),
            "ResourceClaim.resource.k8s.io \"c\" is invalid: status.reservedFor: Forbidden: may not be specified when `allocated` is not set"
        );
        assert!(
            message(validate_claim_update(
                &rt,
                &claim(json!({ "reservedFor": reserved })),
                &both
            ))
            .ends_with("may not be specified when `allocated` is not set")
        );
        assert_eq!(message(validate_claim_update(&rt, &both, &allocated)), "");
        assert_eq!(
            message(validate_claim_update(&rt, &claim(json!({})), &both)),
            ""
        );
        let twice = json!([{ "resource": "pods", "name": "a", "uid": "u1" }, { "resource": "pods", "name": "a", "uid": "u1" }]);
        assert_eq!(
            message(validate_claim_update(
                &rt,
                &claim(json!({ "allocation": allocation, "reservedFor": twice })),
                &allocated
            )),
            "ResourceClaim.resource.k8s.io \"c\" is invalid: status.reservedFor[1]: Duplicate value: \"u1\""
        );
        let mut other = allocation.clone();
        other["devices"]["results"][0]["device"] = json!("b");
        assert!(
            message(validate_claim_update(
                &rt,
                &claim(json!({ "allocation": other })),
                &allocated
            ))
            .ends_with(": field is immutable")
        );
    }

    #[test]
    fn a_pods_claim_statuses_name_its_claims_once_with_valid_claim_names() {
        let rt = rt("pods");
        let pod = |statuses: Value| {
            json!({ "metadata": { "name": "p" },
                "spec": { "resourceClaims": [{ "name": "gpu", "resourceClaimTemplateName": "t" }] },
                "status": { "resourceClaimStatuses": statuses } })
        };
        let before = pod(Value::Null);
        let check = |statuses: Value| message(validate_pod_update(&rt, &pod(statuses), &before));
        assert_eq!(
            check(json!([{ "name": "gpu", "resourceClaimName": "p-gpu-x" }])),
            ""
        );
        assert_eq!(
            check(json!([{ "name": "nope", "resourceClaimName": "x" }])),
            "Pod \"p\" is invalid: status.resourceClaimStatuses[0].name: Invalid value: \"nope\": must match the name of an entry in `spec.resourceClaims`"
        );
        assert_eq!(
            check(
                json!([{ "name": "gpu", "resourceClaimName": "x" }, { "name": "gpu", "resourceClaimName": "y" }])
            ),
            "Pod \"p\" is invalid: status.resourceClaimStatuses[1].name: Duplicate value: \"gpu\""
        );
        assert!(
            check(json!([{ "name": "gpu", "resourceClaimName": "X_bad" }])).starts_with(
                "Pod \"p\" is invalid: status.resourceClaimStatuses[0].resourceClaimName: Invalid value: \"X_bad\": a lowercase RFC 1123 subdomain"
            )
        );
    }
}
