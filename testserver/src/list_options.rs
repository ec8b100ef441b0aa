//! A list or watch request's options as the API server takes them (endpoints/handlers/get.go):
//! `SetListOptionsDefaults`, then `ValidateListOptions`, both depending on the server's
//! `WatchList` feature gate (beta, on by default since 1.34). A server with the gate off, as
//! any before 1.27 in effect, refuses `sendInitialEvents` with 422: what a client falls back
//! to a LIST on.

use crate::error::ApiError;
use crate::store::ListOptions;

const NOT_OLDER_THAN: &str = "NotOlderThan";

/// apimachinery's `field.Error` as `(field, cause reason, body)`.
type FieldError = (&'static str, &'static str, String);

fn forbidden(field: &'static str, detail: &str) -> FieldError {
    (field, "FieldValueForbidden", format!("Forbidden: {detail}"))
}

fn not_supported(field: &'static str, value: &str, supported: &[&str]) -> FieldError {
    let supported: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
    (
        field,
        "FieldValueNotSupported",
        format!(
            "Unsupported value: \"{value}\": supported values: {}",
            supported.join(", ")
        ),
    )
}

/// `SetListOptionsDefaults`: with the gate on, a watch from `""` or `"0"` that asks for
/// neither is a streaming one (its initial events were always sent; the bookmark that ends
/// them now comes too, when bookmarks are allowed).
fn set_defaults(opts: &mut ListOptions, watch: bool) {
    if opts.send_initial_events.is_some() || opts.resource_version_match.is_some() {
        return;
    }
    let legacy = matches!(opts.resource_version.as_deref(), None | Some("" | "0"));
    if watch && legacy {
        opts.send_initial_events = Some(true);
        opts.resource_version_match = Some(NOT_OLDER_THAN.into());
    }
}

/// `ValidateListOptions`.
fn validate(opts: &ListOptions, watch: bool, watch_list: bool) -> Vec<FieldError> {
    let rvm = "resourceVersionMatch";
    let matched = opts.resource_version_match.as_deref().unwrap_or_default();
    let continued = opts.continue_token.is_some();
    let mut errs = Vec::new();
    if watch {
        if opts.send_initial_events.is_some() {
            if matched != NOT_OLDER_THAN {
                errs.push(forbidden(
                    rvm,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if !watch_list {
                errs.push(forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                ));
            }
        }
        if !matched.is_empty() {
            if opts.send_initial_events.is_none() {
                errs.push(forbidden(
                    rvm,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if matched != NOT_OLDER_THAN {
                errs.push(not_supported(rvm, matched, &[NOT_OLDER_THAN]));
            }
            if continued {
                errs.push(forbidden(
                    rvm,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        return errs;
    }
    if !matched.is_empty() {
        let version = opts.resource_version.as_deref().unwrap_or_default();
        if version.is_empty() {
            errs.push(forbidden(
                rvm,
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if continued {
            errs.push(forbidden(
                rvm,
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if matched != "Exact" && matched != NOT_OLDER_THAN {
            errs.push(not_supported(rvm, matched, &["Exact", NOT_OLDER_THAN, ""]));
        }
        if matched == "Exact" && version == "0" {
            errs.push(forbidden(
                rvm,
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if opts.send_initial_events.is_some() {
        errs.push(forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    errs
}

/// The options a list (`watch` false) or watch request is served with, defaults applied, or
/// the server's 422 `ListOptions.meta.k8s.io "" is invalid: ...`.
pub(crate) fn resolve(
    mut opts: ListOptions,
    watch: bool,
    watch_list: bool,
) -> Result<ListOptions, ApiError> {
    if watch_list {
        set_defaults(&mut opts, watch);
    }
    let errs = validate(&opts, watch, watch_list);
    if errs.is_empty() {
        return Ok(opts);
    }
    Err(ApiError::invalid_fields(
        ("ListOptions", "meta.k8s.io"),
        "",
        &errs,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> ListOptions {
        let get = |key: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        };
        ListOptions {
            resource_version: get("resourceVersion"),
            resource_version_match: get("resourceVersionMatch"),
            continue_token: get("continue"),
            allow_watch_bookmarks: get("allowWatchBookmarks").is_some(),
            send_initial_events: get("sendInitialEvents").map(|v| v == "true"),
            ..ListOptions::default()
        }
    }

    fn message(pairs: &[(&str, &str)], watch: bool, watch_list: bool) -> String {
        match resolve(opts(pairs), watch, watch_list) {
            Ok(_) => "ok".into(),
            Err(err) => err.message,
        }
    }

    const STREAM: [(&str, &str); 3] = [
        ("sendInitialEvents", "true"),
        ("resourceVersionMatch", "NotOlderThan"),
        ("allowWatchBookmarks", "true"),
    ];

    /// apimachinery's TestValidateListOptions cases, worded as the 422 says them.
    #[test]
    fn watch_options_are_checked_as_the_api_server_does() {
        assert_eq!(message(&STREAM, true, true), "ok");
        // Bookmarks are not required: validating them would break watches from "0".
        assert_eq!(message(&STREAM[..2], true, true), "ok");
        assert_eq!(
            message(&[("resourceVersionMatch", "NotOlderThan")], true, true),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
        );
        assert_eq!(
            message(&[("sendInitialEvents", "true")], true, false),
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled]"
        );
        assert_eq!(
            message(
                &[
                    ("sendInitialEvents", "true"),
                    ("resourceVersionMatch", "Exact")
                ],
                true,
                true
            ),
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]"
        );
        assert_eq!(
            message(&[STREAM[0], STREAM[1], ("continue", "123")], true, true),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"
        );
        // The refusal a client falls back to a LIST on.
        let refused = resolve(opts(&STREAM), true, false).unwrap_err();
        assert_eq!(
            refused.message,
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
        );
        assert_eq!((refused.code, refused.reason), (422, "Invalid"));
        assert_eq!(
            refused.details.unwrap()["causes"],
            serde_json::json!([{
                "reason": "FieldValueForbidden",
                "message": "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                "field": "sendInitialEvents",
            }])
        );
    }

    #[test]
    fn list_options_are_checked_as_the_api_server_does() {
        assert_eq!(message(&[], false, true), "ok");
        assert_eq!(
            message(
                &[
                    ("resourceVersion", "0"),
                    ("resourceVersionMatch", "NotOlderThan")
                ],
                false,
                true
            ),
            "ok"
        );
        assert_eq!(
            message(&[("sendInitialEvents", "true")], false, true),
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"
        );
        assert_eq!(
            message(
                &[("resourceVersion", "0"), ("resourceVersionMatch", "Exact")],
                false,
                true
            ),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
        );
        assert_eq!(
            message(&[("resourceVersionMatch", "foo")], false, true),
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Unsupported value: \"foo\": supported values: \"Exact\", \"NotOlderThan\", \"\"]"
        );
    }

    /// A legacy watch from "" or "0" streams (its bookmark ends the initial events); one
    /// from a resourceVersion resumes; with the gate off nothing is defaulted.
    #[test]
    fn legacy_watches_are_defaulted_to_streaming_with_the_gate_on() {
        let defaulted = resolve(opts(&[("resourceVersion", "0")]), true, true).unwrap();
        assert_eq!(defaulted.send_initial_events, Some(true));
        assert_eq!(
            defaulted.resource_version_match.as_deref(),
            Some("NotOlderThan")
        );
        let resumed = resolve(opts(&[("resourceVersion", "7")]), true, true).unwrap();
        assert_eq!(resumed.send_initial_events, None);
        let old = resolve(opts(&[]), true, false).unwrap();
        assert_eq!(old.send_initial_events, None);
        let list = resolve(opts(&[]), false, true).unwrap();
        assert_eq!(list.send_initial_events, None);
    }
}
