//! `TokenReview` (authentication.k8s.io/v1) and `SubjectAccessReview`
//! (authorization.k8s.io/v1), answered from tables the test sets, so delegated
//! authentication and authorization can be tested against this server. Reviews are
//! create-only and stored nowhere, as on a real API server; they appear in the request log.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::error::ApiError;

/// The tables: which tokens name which users, and who may do what on which path.
#[derive(Default)]
pub struct Reviews {
    tables: Mutex<Tables>,
}

#[derive(Default)]
struct Tables {
    /// token → (user name, groups)
    tokens: HashMap<String, (String, Vec<String>)>,
    /// (user name or group, verb, non-resource path)
    allowed: HashSet<(String, String, String)>,
}

impl Reviews {
    /// TokenReviews of `token` authenticate `user` with `groups`; other tokens are refused.
    pub fn add_token(&self, token: &str, user: &str, groups: &[&str]) {
        self.lock().tokens.insert(
            token.to_string(),
            (
                user.to_string(),
                groups.iter().map(|g| g.to_string()).collect(),
            ),
        );
    }

    /// SubjectAccessReviews allow `verb` on the non-resource `path` to the user or group
    /// named `subject`; everything else is denied.
    pub fn allow(&self, subject: &str, verb: &str, path: &str) {
        self.lock()
            .allowed
            .insert((subject.to_string(), verb.to_string(), path.to_string()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The answer to a create of a review, or `None` for any other request.
    pub(crate) fn answer(
        &self,
        group: &str,
        resource: &str,
        verb: &str,
        body: Option<&Value>,
    ) -> Option<Result<Value, ApiError>> {
        let kind = match (group, resource) {
            ("authentication.k8s.io", "tokenreviews") => "TokenReview",
            ("authorization.k8s.io", "subjectaccessreviews") => "SubjectAccessReview",
            _ => return None,
        };
        if verb != "create" {
            return Some(Err(ApiError::new(
                405,
                "MethodNotAllowed",
                format!("{resource} can only be created"),
            )));
        }
        let Some(body) = body else {
            return Some(Err(ApiError::bad_request("the request body is empty")));
        };
        let status = if kind == "TokenReview" {
            self.token_status(&body["spec"])
        } else {
            self.access_status(&body["spec"])
        };
        Some(Ok(json!({
            "apiVersion": format!("{group}/v1"),
            "kind": kind,
            "metadata": { "creationTimestamp": null },
            "spec": body["spec"],
            "status": status,
        })))
    }

    fn token_status(&self, spec: &Value) -> Value {
        let token = spec["token"].as_str().unwrap_or_default();
        match self.lock().tokens.get(token) {
            Some((user, groups)) => json!({
                "authenticated": true,
                "user": { "username": user, "uid": format!("uid-{user}"), "groups": groups },
            }),
            None => json!({ "authenticated": false, "error": "token not recognized" }),
        }
    }

    fn access_status(&self, spec: &Value) -> Value {
        let attributes = &spec["nonResourceAttributes"];
        let verb = attributes["verb"].as_str().unwrap_or_default();
        let path = attributes["path"].as_str().unwrap_or_default();
        let user = spec["user"].as_str().unwrap_or_default();
        let groups = spec["groups"].as_array().cloned().unwrap_or_default();
        let tables = self.lock();
        let allowed = std::iter::once(user)
            .chain(groups.iter().filter_map(Value::as_str))
            .any(|subject| {
                tables
                    .allowed
                    .contains(&(subject.to_string(), verb.to_string(), path.to_string()))
            });
        if allowed {
            json!({ "allowed": true, "reason": "allowed by the test's table" })
        } else {
            json!({ "allowed": false, "reason": "not in the test's table" })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_access_come_from_the_tables() {
        let reviews = Reviews::default();
        reviews.add_token("t1", "alice", &["readers"]);
        reviews.allow("readers", "get", "/metrics");
        let token = |t: &str| {
            reviews
                .answer(
                    "authentication.k8s.io",
                    "tokenreviews",
                    "create",
                    Some(&json!({ "spec": { "token": t } })),
                )
                .unwrap()
                .unwrap()["status"]
                .clone()
        };
        assert_eq!(token("t1")["user"]["username"], "alice");
        assert_eq!(token("t1")["user"]["groups"], json!(["readers"]));
        assert_eq!(token("t2")["authenticated"], false);

        let access = |user: &str, groups: Value, path: &str| {
            reviews
                .answer(
                    "authorization.k8s.io",
                    "subjectaccessreviews",
                    "create",
                    Some(&json!({ "spec": {
                        "user": user,
                        "groups": groups,
                        "nonResourceAttributes": { "verb": "get", "path": path },
                    }})),
                )
                .unwrap()
                .unwrap()["status"]["allowed"]
                .clone()
        };
        assert_eq!(access("alice", json!(["readers"]), "/metrics"), true);
        assert_eq!(access("bob", json!([]), "/metrics"), false);
        assert_eq!(access("alice", json!(["readers"]), "/other"), false);
        assert!(reviews.answer("", "pods", "create", None).is_none());
        assert_eq!(
            reviews
                .answer("authentication.k8s.io", "tokenreviews", "list", None)
                .unwrap()
                .unwrap_err()
                .code,
            405
        );
    }
}
