//! API errors as the real server reports them: a `metav1.Status` body with code and reason.

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// A field error: path, cause reason, and the API server's text.
pub type FieldError = (String, &'static str, String);

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header (429 and injected faults).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    fn with_details(self, rt: &ResourceType, name: &str) -> Self {
        self.naming((&rt.plural, &rt.group), name)
    }

    /// Details naming the object, `kind` holding the resource as apimachinery fills it.
    pub(crate) fn naming(mut self, (resource, group): (&str, &str), name: &str) -> Self {
        let mut details = json!({ "name": name, "kind": resource });
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        self.details = Some(details);
        self
    }

    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", rt.qualified_name()),
        )
        .with_details(rt, name)
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", rt.qualified_name()),
        )
        .with_details(rt, name)
    }

    /// Optimistic-concurrency failure, worded as the real server words it.
    pub fn conflict(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self::conflict_on((&rt.plural, &rt.group), name, why)
    }

    /// A conflict on what apimachinery's `NewConflict` names by a group and resource, which
    /// some callers fill with a subresource (`pods/binding`) or a kind (`Pod`).
    pub fn conflict_on((resource, group): (&str, &str), name: &str, why: &str) -> Self {
        let qualified = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
        )
        .naming((resource, group), name)
    }

    pub fn stale(rt: &ResourceType, name: &str) -> Self {
        Self::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 422 with one field cause, as validation failures are reported.
    pub fn invalid(rt: &ResourceType, name: &str, field: &str, detail: &str) -> Self {
        let mut err = Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {field}: {detail}", rt.kind),
        );
        let mut details = json!({
            "name": name,
            "kind": rt.kind,
            "causes": [{ "reason": "FieldValueInvalid", "message": detail, "field": field }],
        });
        if !rt.group.is_empty() {
            details["group"] = json!(rt.group);
        }
        err.details = Some(details);
        err
    }

    /// 422 with one field error as the API server words it: `<Kind>.<group> "<name>" is
    /// invalid: <field>: <body>`, where `body` is the field error's (e.g. `Forbidden: ...`)
    /// and `reason` its cause reason (e.g. `FieldValueForbidden`).
    pub fn invalid_field(
        kind: (&str, &str),
        name: &str,
        field: &str,
        (reason, body): (&str, String),
    ) -> Self {
        Self::invalid_fields(kind, name, &[(field, reason, body)])
    }

    /// Ok without `errors`; else 422 naming each of them on `obj`, of type `rt`.
    pub fn unless_valid(rt: &ResourceType, obj: &Value, errors: &[FieldError]) -> Result<(), Self> {
        if errors.is_empty() {
            return Ok(());
        }
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let fields: Vec<(&str, &str, String)> = errors
            .iter()
            .map(|(field, reason, body)| (field.as_str(), *reason, body.clone()))
            .collect();
        Err(Self::invalid_fields((&rt.kind, &rt.group), name, &fields))
    }

    /// 422 with field errors `(field, cause reason, body)`, as apimachinery's `NewInvalid`
    /// words them: one as `<field>: <body>`, several as `[<field>: <body>, ...]`.
    pub fn invalid_fields(
        (kind, group): (&str, &str),
        name: &str,
        errors: &[(&str, &str, String)],
    ) -> Self {
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let shown: Vec<String> = errors
            .iter()
            .map(|(field, _, body)| format!("{field}: {body}"))
            .collect();
        let aggregate = match shown.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut err = Self::new(
            422,
            "Invalid",
            format!("{qualified} \"{name}\" is invalid: {aggregate}"),
        );
        let causes: Vec<Value> = errors
            .iter()
            .map(|(field, reason, body)| json!({ "reason": reason, "message": body, "field": field }))
            .collect();
        err.details = Some(json!({
            "name": name,
            "group": group,
            "kind": kind,
            "causes": causes,
        }));
        err
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml; got {content_type}"
            ),
        )
    }

    /// The reason the real server uses for each status code, for injected faults.
    pub fn for_code(code: u16, message: impl Into<String>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        Self::new(code, reason, message)
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        // An error the registry returns as a bare Status has no reason, and Go omits it.
        if !self.reason.is_empty() {
            status["reason"] = json!(self.reason);
        }
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        if let Some(secs) = self.retry_after {
            let details = status["details"]
                .as_object_mut()
                .map(|d| d.clone())
                .unwrap_or_default();
            let mut details = Value::Object(details);
            details["retryAfterSeconds"] = json!(secs);
            status["details"] = details;
        }
        status
    }
}
