//! `internal.apiserver.k8s.io/v1alpha1` StorageVersions: v1.36's validation of the status,
//! which storage-version-gc rewrites when it drops a gone API server's entry. A real API
//! server refuses (422) a status whose `commonEncodingVersion` is not exactly the version all
//! entries agree on (none when they differ or there is no entry), duplicate or malformed API
//! server IDs, versions that are no API version, a decodable list without the encoding
//! version, and conditions without a reason or message or with a repeated type. Found by
//! tests/real/apiserver.rs: kube-testserver accepted any status.

use serde_json::Value;

use crate::error::{ApiError, FieldError};
use crate::resources::ResourceType;
use kcm_values::validation::is_dns1123_subdomain;

const GROUP: &str = "internal.apiserver.k8s.io";
const PLURAL: &str = "storageversions";

pub(crate) fn is_storage_versions(rt: &ResourceType) -> bool {
    rt.group == GROUP && rt.plural == PLURAL
}

pub(crate) fn invalid_value(
    field: String,
    value: &Value,
    detail: impl std::fmt::Display,
) -> FieldError {
    (
        field,
        "FieldValueInvalid",
        format!("Invalid value: {value}: {detail}"),
    )
}

fn is_dns_label(s: &str, first: fn(char) -> bool) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(first)
        && s.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// `[group/]version`, the group a DNS subdomain and the version a DNS-1035 label.
fn is_api_version(s: &str) -> bool {
    let version = match s.split_once('/') {
        Some((group, version)) => {
            if !is_dns1123_subdomain(group) {
                return false;
            }
            version
        }
        None => s,
    };
    is_dns_label(version, |c| c.is_ascii_lowercase())
}

pub(crate) const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const API_VERSION: &str = "an apiVersion is a DNS-1035 label with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyVersion')";

fn check_entry(entry: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let id = entry["apiServerID"].as_str().unwrap_or_default();
    if !is_dns1123_subdomain(id) {
        errors.push(invalid_value(
            format!("{at}.apiServerID"),
            &entry["apiServerID"],
            SUBDOMAIN,
        ));
    }
    let encoding = entry["encodingVersion"].as_str().unwrap_or_default();
    if !is_api_version(encoding) {
        errors.push(invalid_value(
            format!("{at}.encodingVersion"),
            &entry["encodingVersion"],
            API_VERSION,
        ));
    }
    let decodable: Vec<&str> = entry["decodableVersions"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (i, version) in decodable.iter().enumerate() {
        if !is_api_version(version) {
            errors.push(invalid_value(
                format!("{at}.decodableVersions[{i}]"),
                &Value::from(*version),
                API_VERSION,
            ));
        }
    }
    if !decodable.contains(&encoding) {
        errors.push(invalid_value(
            format!("{at}.decodableVersions"),
            &entry["decodableVersions"],
            format!("decodableVersions must include encodingVersion {encoding}"),
        ));
    }
    let served = entry["servedVersions"].as_array().map(Vec::as_slice);
    for (i, version) in served.unwrap_or_default().iter().enumerate() {
        let version = version.as_str().unwrap_or_default();
        if !decodable.contains(&version) {
            errors.push(invalid_value(
                format!("{at}.servedVersions[{i}]"),
                &Value::from(version),
                format!(
                    "individual served version : {version} must be included in decodableVersions : [{}]",
                    decodable.join(" ")
                ),
            ));
        }
    }
}

fn check_common_version(status: &Value, entries: &[Value], errors: &mut Vec<FieldError>) {
    let versions: Vec<&str> = entries
        .iter()
        .map(|e| e["encodingVersion"].as_str().unwrap_or_default())
        .collect();
    let actual = versions
        .first()
        .filter(|first| versions.iter().all(|v| v == *first));
    let given = status["commonEncodingVersion"].as_str();
    let field = "status.commonEncodingVersion".to_string();
    let value = &status["commonEncodingVersion"];
    match (actual, given) {
        (None, Some(_)) => errors.push(invalid_value(
            field,
            value,
            "should be nil if servers do not agree on the same encoding version, or if there is no server reporting the supported versions yet",
        )),
        (Some(actual), None) => errors.push(invalid_value(
            field,
            &Value::Null,
            format!("the common encoding version is {actual}"),
        )),
        (Some(actual), Some(given)) if *actual != given => errors.push(invalid_value(
            field,
            value,
            format!("the actual common encoding version is {actual}"),
        )),
        _ => {}
    }
}

/// Conditions, at `status[i]` as upstream's validation names them (without `conditions`).
fn check_conditions(status: &Value, errors: &mut Vec<FieldError>) {
    let conditions = status["conditions"].as_array().map(Vec::as_slice);
    let conditions = conditions.unwrap_or_default();
    for (i, condition) in conditions.iter().enumerate() {
        let kind = &condition["type"];
        if let Some(first) = conditions[..i].iter().position(|c| c["type"] == *kind) {
            errors.push(invalid_value(
                format!("status[{i}].type"),
                kind,
                format!("the type of the condition is not unique, it also appears in conditions[{first}]"),
            ));
        }
        // The API server's text has no detail here ("reason cannot be empty" is dropped).
        for field in ["reason", "message"] {
            if condition[field].as_str().unwrap_or_default().is_empty() {
                errors.push((
                    format!("status[{i}].{field}"),
                    "FieldValueRequired",
                    "Required value".to_string(),
                ));
            }
        }
    }
}

/// The status of `obj` as v1.36 validates it on create and on every update.
pub(crate) fn validate(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let status = &obj["status"];
    let entries = status["storageVersions"].as_array().map(Vec::as_slice);
    let entries = entries.unwrap_or_default();
    let mut errors = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("status.storageVersions[{i}]");
        if entries[..i]
            .iter()
            .any(|e| e["apiServerID"] == entry["apiServerID"])
        {
            errors.push((
                format!("{at}.apiServerID"),
                "FieldValueDuplicate",
                format!("Duplicate value: {}", entry["apiServerID"]),
            ));
        }
        check_entry(entry, &at, &mut errors);
    }
    check_common_version(status, entries, &mut errors);
    check_conditions(status, &mut errors);
    ApiError::unless_valid(rt, obj, &errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn storage_version(status: Value) -> Value {
        json!({ "metadata": { "name": "apps.deployments" }, "spec": {}, "status": status })
    }

    fn entry(id: &str, version: &str) -> Value {
        json!({ "apiServerID": id, "encodingVersion": version, "decodableVersions": [version] })
    }

    fn message(status: Value) -> String {
        let rt = crate::resources::builtin_types()
            .into_iter()
            .find(is_storage_versions)
            .unwrap();
        validate(&rt, &storage_version(status))
            .err()
            .map(|e| e.message)
            .unwrap_or_default()
    }

    #[test]
    fn the_common_encoding_version_is_the_one_all_entries_agree_on() {
        let one = json!([entry("kas-1", "apps/v1")]);
        assert_eq!(
            message(json!({ "storageVersions": one })),
            "StorageVersion.internal.apiserver.k8s.io \"apps.deployments\" is invalid: status.commonEncodingVersion: Invalid value: null: the common encoding version is apps/v1"
        );
        assert_eq!(
            message(json!({ "storageVersions": one, "commonEncodingVersion": "apps/v1" })),
            ""
        );
        assert!(
            message(json!({ "storageVersions": one, "commonEncodingVersion": "apps/v2" }))
                .ends_with(
                    "Invalid value: \"apps/v2\": the actual common encoding version is apps/v1"
                )
        );
        let differing = json!([entry("kas-1", "apps/v1"), entry("kas-2", "apps/v2")]);
        assert_eq!(message(json!({ "storageVersions": differing })), "");
        assert!(
            message(json!({ "storageVersions": differing, "commonEncodingVersion": "apps/v1" }))
                .contains("should be nil if servers do not agree")
        );
        assert_eq!(message(json!({ "storageVersions": [] })), "");
        assert_eq!(message(json!({})), "");
    }

    #[test]
    fn entries_and_conditions_are_checked_as_v1_36_does() {
        let twice = json!([entry("kas-1", "v1"), entry("kas-1", "v1")]);
        assert!(
            message(json!({ "storageVersions": twice, "commonEncodingVersion": "v1" }))
                .contains("status.storageVersions[1].apiServerID: Duplicate value: \"kas-1\"")
        );
        let bad_id = json!([entry("kas-1/status", "v1")]);
        assert!(
            message(json!({ "storageVersions": bad_id, "commonEncodingVersion": "v1" }))
                .contains("status.storageVersions[0].apiServerID: Invalid value: \"kas-1/status\": a lowercase RFC 1123 subdomain")
        );
        let undecodable = json!([{ "apiServerID": "kas-1", "encodingVersion": "v2", "decodableVersions": ["v1"] }]);
        assert!(
            message(json!({ "storageVersions": undecodable, "commonEncodingVersion": "v2" }))
                .ends_with("status.storageVersions[0].decodableVersions: Invalid value: [\"v1\"]: decodableVersions must include encodingVersion v2")
        );
        let condition = json!([{ "type": "AllEncodingVersionsEqual", "status": "True", "reason": "CommonEncodingVersionSet" }]);
        assert!(
            message(json!({ "conditions": condition }))
                .ends_with("status[0].message: Required value")
        );
        let good = json!([{ "type": "AllEncodingVersionsEqual", "status": "True",
            "reason": "CommonEncodingVersionSet", "message": "Common encoding version set" }]);
        assert_eq!(
            message(
                json!({ "storageVersions": [entry("kas-1", "v1")], "commonEncodingVersion": "v1", "conditions": good })
            ),
            ""
        );
    }
}
