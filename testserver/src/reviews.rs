//! Authentication, and `TokenReview` (authentication.k8s.io/v1) and `SubjectAccessReview`
//! (authorization.k8s.io/v1) answered from tables the test sets, so delegated authentication
//! and authorization can be tested against this server. Bearer tokens in the token table
//! authenticate API requests too (expired ones are refused, as the API server refuses them),
//! and `TokenRequest`s add ServiceAccount tokens to it. Reviews are create-only and stored
//! nowhere, as on a real API server; they appear in the request log.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::error::ApiError;

/// Who a request is from, as the API server's authenticators report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    /// A user with these groups; `system:authenticated` is added, as every authenticator
    /// of the API server adds it.
    pub fn new(name: &str, groups: &[&str]) -> Self {
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.into());
        }
        Self {
            name: name.into(),
            groups,
        }
    }

    /// ServiceAccount `namespace/name`, as its tokens authenticate it.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self::new(
            &format!("system:serviceaccount:{namespace}:{name}"),
            &[
                "system:serviceaccounts",
                &format!("system:serviceaccounts:{namespace}"),
            ],
        )
    }

    /// The cluster admin of an admin kubeconfig: in `system:masters`, which every
    /// authorizer of the API server allows everything.
    pub fn admin() -> Self {
        Self::new("system:admin", &[SUPERUSERS])
    }

    /// A request without credentials, as the API server's anonymous authenticator sees it.
    pub fn anonymous() -> Self {
        Self {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
        }
    }
}

/// The group every authenticated user is in.
const AUTHENTICATED: &str = "system:authenticated";
/// The group the API server's authorizers allow everything.
pub const SUPERUSERS: &str = "system:masters";

/// The tables: which tokens name which users, who may do what on which path, and who a
/// request without a token is.
pub struct Reviews {
    tables: Mutex<Tables>,
}

impl Default for Reviews {
    fn default() -> Self {
        Self {
            tables: Mutex::new(Tables {
                tokens: HashMap::new(),
                allowed: HashSet::new(),
                // Until a test says otherwise, the credential-less kubeconfig is the admin's.
                tokenless: UserInfo::admin(),
                max_token_expiration: None,
            }),
        }
    }
}

struct Token {
    user: UserInfo,
    /// None: never expires (tokens the test adds).
    expires: Option<SystemTime>,
}

struct Tables {
    tokens: HashMap<String, Token>,
    /// (user name or group, verb, non-resource path)
    allowed: HashSet<(String, String, String)>,
    tokenless: UserInfo,
    /// The API server's `--service-account-max-token-expiration`.
    max_token_expiration: Option<Duration>,
}

/// The lifetime a TokenRequest asks for when it names none, and the shortest the API
/// server accepts.
const DEFAULT_TOKEN_EXPIRATION: i64 = 3600;
const MIN_TOKEN_EXPIRATION: i64 = 600;

impl Reviews {
    /// TokenReviews of `token` authenticate `user` with `groups`; other tokens are refused.
    pub fn add_token(&self, token: &str, user: &str, groups: &[&str]) {
        self.add_user_token(
            token,
            UserInfo {
                name: user.into(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
            },
        );
    }

    /// `token` authenticates `user` (TokenReviews and API requests alike), without expiry.
    pub fn add_user_token(&self, token: &str, user: UserInfo) {
        self.lock().tokens.insert(
            token.to_string(),
            Token {
                user,
                expires: None,
            },
        );
    }

    /// Who a request that carries no bearer token is (default: [`UserInfo::admin`]).
    pub fn set_tokenless_user(&self, user: UserInfo) {
        self.lock().tokenless = user;
    }

    pub fn tokenless_user(&self) -> UserInfo {
        self.lock().tokenless.clone()
    }

    /// Caps the lifetime of the tokens TokenRequests get, as the API server's
    /// `--service-account-max-token-expiration` does (what is asked for is still validated).
    pub fn set_max_token_expiration(&self, max: Duration) {
        self.lock().max_token_expiration = Some(max);
    }

    /// The user a bearer token authenticates; None when it is unknown or expired.
    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        let tables = self.lock();
        let entry = tables.tokens.get(token)?;
        entry
            .expires
            .is_none_or(|at| at > SystemTime::now())
            .then(|| entry.user.clone())
    }

    /// The tokens TokenRequests got for `user` so far, expired ones included.
    pub fn issued_tokens(&self, user: &str) -> Vec<String> {
        self.lock()
            .tokens
            .iter()
            .filter(|(_, t)| t.expires.is_some() && t.user.name == user)
            .map(|(token, _)| token.clone())
            .collect()
    }

    /// Answers a TokenRequest for ServiceAccount `namespace/name` (the caller has checked
    /// that it exists): a new token for it, valid for `spec.expirationSeconds` (at most the
    /// configured maximum).
    pub(crate) fn token_request(
        &self,
        namespace: &str,
        name: &str,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let asked = match &body["spec"]["expirationSeconds"] {
            Value::Null => DEFAULT_TOKEN_EXPIRATION,
            v => v.as_i64().ok_or_else(|| {
                ApiError::bad_request(format!("spec.expirationSeconds: not an integer: {v}"))
            })?,
        };
        if asked < MIN_TOKEN_EXPIRATION {
            return Err(ApiError::invalid_field(
                ("TokenRequest", "authentication.k8s.io"),
                name,
                "spec.expirationSeconds",
                (
                    "FieldValueInvalid",
                    format!(
                        "Invalid value: {asked}: may not specify a duration less than 10 minutes"
                    ),
                ),
            ));
        }
        let asked = Duration::from_secs(u64::try_from(asked).unwrap_or(u64::MAX));
        let mut tables = self.lock();
        let lifetime = tables
            .max_token_expiration
            .map_or(asked, |max| asked.min(max));
        let expires = SystemTime::now() + lifetime;
        let token = format!("ts-sa-{}", uuid::Uuid::new_v4().simple());
        tables.tokens.insert(
            token.clone(),
            Token {
                user: UserInfo::service_account(namespace, name),
                expires: Some(expires),
            },
        );
        let expiration = jiff::Timestamp::try_from(expires)
            .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default();
        let mut spec = body["spec"].clone();
        if !spec.is_object() {
            spec = json!({});
        }
        spec["expirationSeconds"] = json!(lifetime.as_secs());
        Ok(json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": { "name": name, "namespace": namespace, "creationTimestamp": null },
            "spec": spec,
            "status": { "token": token, "expirationTimestamp": expiration },
        }))
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
        match self.authenticate(token) {
            Some(UserInfo { name, groups }) => json!({
                "authenticated": true,
                "user": { "username": name, "uid": format!("uid-{name}"), "groups": groups },
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
