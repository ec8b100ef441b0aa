//! Delegated authentication and authorization for the secure port, as
//! k8s.io/apiserver's `DelegatingAuthenticationOptions`/`DelegatingAuthorizationOptions`
//! set up for kube-controller-manager, in upstream's order: a front proxy's certificate makes
//! the request headers name the user (the request-header authenticator), else a certificate
//! of the client CA names the user, else a bearer token is checked by a `TokenReview`. Headers
//! from any other client are ignored. The request's non-resource path and verb are
//! checked by a `SubjectAccessReview`. Both answers are cached for their TTLs. The paths in
//! `--authorization-always-allow-paths` and the group `system:masters` skip authorization.
//!
//! One deliberate difference: a request to another path without any credential gets 401
//! here. Upstream maps it to `system:anonymous` and asks the API server, which answers 403
//! in every cluster that does not grant anonymous users that path.

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

use super::identity::{Peer, User};
use crate::lock::lock;

/// Upstream's default `AlwaysAllowGroups`: the API server grants this group everything anyway.
const MASTERS: &str = "system:masters";
/// Bound on each cache, so a flood of distinct tokens cannot grow memory without limit
/// (upstream's webhook authorizer keeps 8192 answers as well).
const CACHE_ENTRIES: usize = 8192;

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

    /// `header_user`: whom the request headers name, when the client is a front proxy.
    async fn authenticate(
        &self,
        peer: &Peer,
        header_user: Option<User>,
        authorization: Option<&str>,
    ) -> Result<User, AuthError> {
        if let Some(user) = header_user.or_else(|| peer.certificate_user.clone()) {
            return Ok(user.with_authenticated_group());
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
        // Keyed by the whole review, as upstream's webhook authorizer does; a review that
        // cannot be encoded as a key is asked every time rather than sharing a key.
        let key = serde_json::to_string(&spec).ok();
        let cached = key.as_ref().and_then(|key| self.decisions.get(key));
        let decision = match cached {
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
                if let Some(key) = key {
                    self.decisions.put(key, decision.clone(), ttl);
                }
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
        header_user: Option<User>,
        authorization: Option<&str>,
    ) -> Result<(), AuthError> {
        if self.always_allowed(path) {
            return Ok(());
        }
        let user = self.authenticate(peer, header_user, authorization).await?;
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
    // Only a front proxy's headers count; anyone else's are ignored.
    let header_user = peer
        .front_proxy
        .as_ref()
        .and_then(|names| names.user(request.headers()));
    match guard
        .check(&peer, &method, &path, header_user, authorization.as_deref())
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
    use std::collections::BTreeMap;

    use axum::http::{HeaderMap, HeaderValue};

    use crate::serving::identity::{AUTHENTICATED, HeaderNames};

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
            front_proxy: None,
        };
        assert!(matches!(
            guard.authenticate(&anonymous, None, None).await,
            Err(AuthError::Unauthorized)
        ));
        assert!(matches!(
            guard
                .authenticate(&anonymous, None, Some("Bearer abc"))
                .await,
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

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn upstream_names() -> HeaderNames {
        HeaderNames {
            username: vec!["X-Remote-User".into(), "X-Other-User".into()],
            uid: vec!["X-Remote-Uid".into()],
            group: vec!["X-Remote-Group".into(), "X-Other-Group".into()],
            extra_prefix: vec!["X-Remote-Extra-".into()],
            allowed_names: Vec::new(),
        }
    }

    #[test]
    fn request_headers_name_user_uid_groups_and_extras_as_upstream() {
        let user = upstream_names()
            .user(&headers(&[
                ("x-remote-user", ""),
                ("x-other-user", "alice"),
                ("x-remote-uid", "u-1"),
                ("x-remote-group", "one"),
                ("x-remote-group", ""),
                ("x-other-group", "two"),
                ("x-remote-extra-Scopes", "a"),
                ("x-remote-extra-scopes", "b"),
                ("x-remote-extra-example.org%2fkey", "c"),
                ("x-remote-extra-bad%zz", "d"),
            ]))
            .unwrap();
        assert_eq!(user.name, "alice", "the first non-empty username header");
        assert_eq!(user.uid, "u-1");
        assert_eq!(user.groups, ["one", "two"]);
        assert_eq!(
            user.extra,
            BTreeMap::from([
                ("bad%zz".to_string(), vec!["d".to_string()]),
                ("example.org/key".to_string(), vec!["c".to_string()]),
                ("scopes".to_string(), vec!["a".to_string(), "b".to_string()]),
            ])
        );
        assert_eq!(
            upstream_names().user(&headers(&[("x-remote-group", "g")])),
            None,
            "no username: not authenticated by headers"
        );
    }

    #[tokio::test]
    async fn header_users_come_before_certificates_and_tokens() {
        let guard = guard(&[]);
        let peer = Peer {
            addr: ([127, 0, 0, 1], 1).into(),
            certificate_user: Some(User {
                name: "cert".into(),
                uid: String::new(),
                groups: vec![],
                extra: BTreeMap::new(),
            }),
            front_proxy: None,
        };
        let header_user = upstream_names().user(&headers(&[("x-remote-user", "proxied")]));
        let user = guard
            .authenticate(&peer, header_user, Some("Bearer t"))
            .await
            .unwrap();
        assert_eq!(user.name, "proxied");
        assert_eq!(user.groups, [AUTHENTICATED]);
        let user = guard.authenticate(&peer, None, None).await.unwrap();
        assert_eq!(user.name, "cert");
    }
}
