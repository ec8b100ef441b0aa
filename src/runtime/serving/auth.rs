//! Delegated authentication and authorization for the secure port, as
//! k8s.io/apiserver's `DelegatingAuthenticationOptions`/`DelegatingAuthorizationOptions`
//! set up for kube-controller-manager: a verified client certificate names the user, else a
//! bearer token is checked by a `TokenReview`; the request's non-resource path and verb are
//! checked by a `SubjectAccessReview`. Both answers are cached for their TTLs. The paths in
//! `--authorization-always-allow-paths` and the group `system:masters` skip authorization.
//!
//! One deliberate difference: a request to another path without any credential gets 401
//! here. Upstream maps it to `system:anonymous` and asks the API server, which answers 403
//! in every cluster that does not grant anonymous users that path.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use super::tls::Peer;
use crate::runtime::lock::lock;

/// The group every authenticated user gets (upstream's `AuthenticatedGroupAdder`).
const AUTHENTICATED: &str = "system:authenticated";
/// Upstream's default `AlwaysAllowGroups`: the API server grants this group everything anyway.
const MASTERS: &str = "system:masters";
/// Bound on each cache, so a flood of distinct tokens cannot grow memory without limit
/// (upstream's webhook authorizer keeps 8192 answers as well).
const CACHE_ENTRIES: usize = 8192;

/// An authenticated user, as a TokenReview or a client certificate names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    fn with_authenticated_group(mut self) -> Self {
        if !self.groups.iter().any(|g| g == AUTHENTICATED) {
            self.groups.push(AUTHENTICATED.to_string());
        }
        self
    }
}

/// Answers kept until their own expiry, at most [`CACHE_ENTRIES`] of them (least recently
/// used go first). Uses tokio's clock, so tests can move time.
struct TtlCache<V> {
    entries: Mutex<lru::LruCache<String, (Instant, V)>>,
}

impl<V: Clone> TtlCache<V> {
    fn new() -> Self {
        let capacity = NonZeroUsize::new(CACHE_ENTRIES).unwrap_or(NonZeroUsize::MIN);
        Self {
            entries: Mutex::new(lru::LruCache::new(capacity)),
        }
    }

    fn get(&self, key: &str) -> Option<V> {
        let mut entries = lock(&self.entries);
        match entries.get(key) {
            Some((expires, value)) if *expires > Instant::now() => Some(value.clone()),
            Some(_) => {
                entries.pop(key);
                None
            }
            None => None,
        }
    }

    fn put(&self, key: String, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = lock(&self.entries);
        entries.put(key, (Instant::now() + ttl, value));
    }
}

/// Why a request is refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("Unauthorized")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(String),
    #[error("authorization error: {0}")]
    Review(#[source] kube::Error),
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        let code = match &self {
            AuthError::Unauthorized => StatusCode::UNAUTHORIZED,
            AuthError::Forbidden(_) => StatusCode::FORBIDDEN,
            AuthError::Review(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let mut response = (code, self.to_string()).into_response();
        if code == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                "Bearer".parse().unwrap_or_else(|_| unreachable!()),
            );
        }
        response
    }
}

/// The settings of delegated authentication and authorization, resolved to clients.
pub struct Delegation {
    /// `None`: no `--authentication-kubeconfig` and not in a cluster; tokens are refused.
    pub token_reviews: Option<kube::Client>,
    /// `None`: no `--authorization-kubeconfig` and not in a cluster; only always-allowed
    /// paths and `system:masters` get through.
    pub access_reviews: Option<kube::Client>,
    pub token_ttl: Duration,
    pub authorized_ttl: Duration,
    pub unauthorized_ttl: Duration,
    pub always_allow_paths: Vec<String>,
}

/// A SubjectAccessReview's answer, cached for its TTL.
#[derive(Clone)]
enum Decision {
    Allowed,
    /// Denied, with the reviewer's reason (may be empty).
    Denied(String),
}

/// Decides each request on the secure port; shared by all connections.
pub struct Guard {
    delegation: Delegation,
    tokens: TtlCache<Option<User>>,
    decisions: TtlCache<Decision>,
}

impl Guard {
    pub fn new(delegation: Delegation) -> Self {
        Self {
            delegation,
            tokens: TtlCache::new(),
            decisions: TtlCache::new(),
        }
    }

    /// Upstream's path authorizer: exact paths, or prefixes written with a trailing `*`.
    fn always_allowed(&self, path: &str) -> bool {
        self.delegation
            .always_allow_paths
            .iter()
            .any(|allowed| match allowed.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => path == allowed,
            })
    }

    async fn authenticate(
        &self,
        peer: &Peer,
        authorization: Option<&str>,
    ) -> Result<User, AuthError> {
        if let Some(user) = &peer.certificate_user {
            return Ok(user.clone().with_authenticated_group());
        }
        let token = authorization
            .and_then(|value| {
                let (scheme, token) = value.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|token| !token.is_empty())
            .ok_or(AuthError::Unauthorized)?;
        let client = self
            .delegation
            .token_reviews
            .as_ref()
            .ok_or(AuthError::Unauthorized)?;
        // The cache is keyed by a digest, so tokens are not kept in memory.
        let key = hex(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
        let user = match self.tokens.get(&key) {
            Some(user) => user,
            None => {
                let user = review_token(client, token).await.map_err(|err| {
                    tracing::warn!(error = %err, "TokenReview failed");
                    AuthError::Unauthorized
                })?;
                // Upstream caches successes and failures for the same TTL.
                self.tokens
                    .put(key, user.clone(), self.delegation.token_ttl);
                user
            }
        };
        user.map(User::with_authenticated_group)
            .ok_or(AuthError::Unauthorized)
    }

    async fn authorize(&self, user: &User, verb: &str, path: &str) -> Result<(), AuthError> {
        if user.groups.iter().any(|g| g == MASTERS) {
            return Ok(());
        }
        let denied = |reason: &str| {
            let base = format!(
                "forbidden: User \"{}\" cannot {verb} path \"{path}\"",
                user.name
            );
            if reason.is_empty() {
                base
            } else {
                format!("{base}: {reason}")
            }
        };
        let Some(client) = &self.delegation.access_reviews else {
            return Err(AuthError::Forbidden(denied("")));
        };
        let spec = SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_string()),
                verb: Some(verb.to_string()),
            }),
            resource_attributes: None,
        };
        // Keyed by the whole review, as upstream's webhook authorizer does.
        let key = serde_json::to_string(&spec).unwrap_or_default();
        let decision = match self.decisions.get(&key) {
            Some(decision) => decision,
            None => {
                let review = SubjectAccessReview {
                    spec,
                    ..Default::default()
                };
                let answer = Api::<SubjectAccessReview>::all(client.clone())
                    .create(&PostParams::default(), &review)
                    .await
                    .map_err(AuthError::Review)?;
                let status = answer.status.unwrap_or_default();
                let (decision, ttl) = if status.allowed && !status.denied.unwrap_or(false) {
                    (Decision::Allowed, self.delegation.authorized_ttl)
                } else {
                    (
                        Decision::Denied(status.reason.unwrap_or_default()),
                        self.delegation.unauthorized_ttl,
                    )
                };
                self.decisions.put(key, decision.clone(), ttl);
                decision
            }
        };
        match decision {
            Decision::Allowed => Ok(()),
            Decision::Denied(reason) => Err(AuthError::Forbidden(denied(&reason))),
        }
    }

    async fn check(
        &self,
        peer: &Peer,
        method: &Method,
        path: &str,
        authorization: Option<&str>,
    ) -> Result<(), AuthError> {
        if self.always_allowed(path) {
            return Ok(());
        }
        let user = self.authenticate(peer, authorization).await?;
        self.authorize(&user, verb(method), path).await
    }
}

/// The authorizer's verb of a non-resource request (upstream's `RequestInfoFactory`).
fn verb(method: &Method) -> &'static str {
    match *method {
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `Some(user)` when the API server authenticates the token, `None` when it does not.
async fn review_token(client: &kube::Client, token: &str) -> Result<Option<User>, kube::Error> {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: token.to_string(),
            audiences: None,
        },
        ..Default::default()
    };
    let answer = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    let status = answer.status.unwrap_or_default();
    if status.authenticated != Some(true) {
        return Ok(None);
    }
    let user = status.user.unwrap_or_default();
    Ok(Some(User {
        name: user.username.unwrap_or_default(),
        uid: user.uid.unwrap_or_default(),
        groups: user.groups.unwrap_or_default(),
        extra: user.extra.unwrap_or_default(),
    }))
}

/// The middleware in front of every route of the secure port.
pub async fn guard(
    State(guard): State<Arc<Guard>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    request: Request,
    next: Next,
) -> Response {
    // Owned copies: the request itself is not Sync, so no reference to it may be held
    // across the reviews' awaits.
    let path = request.uri().path().to_string();
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let method = request.method().clone();
    match guard
        .check(&peer, &method, &path, authorization.as_deref())
        .await
    {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::debug!(client = %peer.addr, path, refusal = %refusal, "request refused");
            refusal.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(paths: &[&str]) -> Guard {
        Guard::new(Delegation {
            token_reviews: None,
            access_reviews: None,
            token_ttl: Duration::from_secs(10),
            authorized_ttl: Duration::from_secs(10),
            unauthorized_ttl: Duration::from_secs(10),
            always_allow_paths: paths.iter().map(|p| p.to_string()).collect(),
        })
    }

    #[test]
    fn always_allowed_paths_are_exact_or_trailing_star_prefixes() {
        let guard = guard(&["/healthz", "/readyz", "/livez", "/debug/*"]);
        for allowed in ["/healthz", "/readyz", "/livez", "/debug/", "/debug/pprof"] {
            assert!(guard.always_allowed(allowed), "{allowed}");
        }
        for refused in ["/metrics", "/healthz/ping", "/debug", "/"] {
            assert!(!guard.always_allowed(refused), "{refused}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn cache_entries_expire_after_their_ttl() {
        let cache = TtlCache::new();
        cache.put("a".into(), 1, Duration::from_secs(10));
        cache.put("b".into(), 2, Duration::ZERO);
        assert_eq!(cache.get("a"), Some(1));
        assert_eq!(cache.get("b"), None, "a zero TTL caches nothing");
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert_eq!(cache.get("a"), Some(1));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(cache.get("a"), None);
    }

    #[tokio::test]
    async fn without_review_clients_only_certificates_of_masters_get_in() {
        let guard = guard(&["/healthz"]);
        let anonymous = Peer {
            addr: ([127, 0, 0, 1], 1).into(),
            certificate_user: None,
        };
        assert!(matches!(
            guard.authenticate(&anonymous, None).await,
            Err(AuthError::Unauthorized)
        ));
        assert!(matches!(
            guard.authenticate(&anonymous, Some("Bearer abc")).await,
            Err(AuthError::Unauthorized)
        ));
        let user = |groups: &[&str]| {
            User {
                name: "alice".into(),
                uid: String::new(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
                extra: BTreeMap::new(),
            }
            .with_authenticated_group()
        };
        assert_eq!(user(&[]).groups, [AUTHENTICATED]);
        assert!(
            guard
                .authorize(&user(&[MASTERS]), "get", "/metrics")
                .await
                .is_ok()
        );
        match guard.authorize(&user(&[]), "get", "/metrics").await {
            Err(AuthError::Forbidden(message)) => assert_eq!(
                message,
                "forbidden: User \"alice\" cannot get path \"/metrics\""
            ),
            other => panic!("{other:?}"),
        }
    }
}
