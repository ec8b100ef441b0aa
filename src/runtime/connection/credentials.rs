//! `--use-service-account-credentials`: each controller's client authenticates as its own
//! ServiceAccount `kube-system/<client name>`, as kube-controller-manager's
//! `DynamicControllerClientBuilder` makes it: the ServiceAccount is created if missing, its
//! tokens come from the TokenRequest API (`expirationSeconds` 3600) and are renewed when a
//! fifth of their lifetime is left, a failed TokenRequest is retried with backoff while the
//! current token stays in use, and a 401 makes the client fetch a new token at once (client-go's
//! resettable token source). Tokens live only in a sensitive header value; nothing logs them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::HeaderValue;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::lock::lock;
use crate::runtime::connection::errors::is_transient;
use crate::runtime::rbac::Rule;

/// Where the controllers' ServiceAccounts live (upstream: `metav1.NamespaceSystem`).
pub const NAMESPACE: &str = "kube-system";

/// What the process's own identity needs for this: reading and creating the ServiceAccounts
/// and requesting their tokens (upstream's `system:kube-controller-manager` role grants it).
pub const RBAC: &[Rule] = &[
    Rule::new(&[""], &["serviceaccounts"], &["get", "create"]),
    Rule::new(&[""], &["serviceaccounts/token"], &["create"]),
];

/// How tokens are requested and renewed; the default is upstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenPolicy {
    /// The lifetime asked for (`spec.expirationSeconds`).
    pub expiration: Duration,
    /// A token is renewed when this percentage of its lifetime is left.
    pub leeway_percent: u32,
    /// A shorter lifetime than this is taken as this (upstream: possible clock skew).
    pub min_lifetime: Duration,
    /// The first retry delay after a failed TokenRequest; it doubles up to `max_retry`.
    pub first_retry: Duration,
    pub max_retry: Duration,
    /// Failed attempts after which a client without any token yet fails its requests instead
    /// of waiting (upstream's backoff gives up after 4 steps).
    pub attempts_before_failing: u32,
    /// Create a missing ServiceAccount, as upstream does. Off under `--shadow`, which writes
    /// nothing: a missing ServiceAccount is then an error.
    pub create_accounts: bool,
}

impl Default for TokenPolicy {
    fn default() -> Self {
        Self {
            expiration: Duration::from_secs(3600),
            leeway_percent: 20,
            min_lifetime: Duration::from_secs(600),
            first_retry: Duration::from_millis(500),
            max_retry: Duration::from_secs(30),
            attempts_before_failing: 4,
            create_accounts: true,
        }
    }
}

impl TokenPolicy {
    /// How long after getting a token that expires at `expires` (seen at `now`) to renew it.
    fn renew_after(&self, now: Timestamp, expires: Timestamp) -> Duration {
        let lifetime = Duration::try_from(expires.duration_since(now))
            .unwrap_or_default()
            .max(self.min_lifetime);
        let leeway = lifetime.mul_f64(f64::from(self.leeway_percent.min(100)) / 100.0);
        lifetime - leeway
    }

    /// The delay before retry number `failures` (1 for the first).
    fn retry_delay(&self, failures: u32) -> Duration {
        let doubled = self
            .first_retry
            .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1)));
        doubled.min(self.max_retry)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("getting or creating ServiceAccount {NAMESPACE}/{name}: {source}")]
    ServiceAccount { name: String, source: kube::Error },
    #[error("requesting a token for ServiceAccount {NAMESPACE}/{name}: {source}")]
    TokenRequest { name: String, source: kube::Error },
    #[error("the TokenRequest for ServiceAccount {NAMESPACE}/{0} returned no usable token")]
    EmptyToken(String),
    #[error("ServiceAccount {NAMESPACE}/{0} does not exist, and --shadow creates nothing")]
    Missing(String),
    #[error("no token for ServiceAccount {NAMESPACE}/{name} yet: {why}")]
    NoToken { name: String, why: String },
}

/// What a client's requests carry.
#[derive(Clone)]
enum TokenState {
    /// The first TokenRequest is under way.
    Pending,
    /// `Authorization: Bearer <token>`, marked sensitive.
    Ready(HeaderValue),
    /// No token yet, and the first attempts failed (the renewal keeps trying).
    Failed(String),
}

/// The current token of one ServiceAccount, kept fresh by its renewal task.
#[derive(Clone)]
pub struct TokenCell {
    name: Arc<str>,
    state: watch::Receiver<TokenState>,
    renew_now: Arc<Notify>,
}

impl TokenCell {
    /// The header to send: waits for the first TokenRequest, then never.
    pub async fn authorization(&self) -> Result<HeaderValue, CredentialsError> {
        let mut state = self.state.clone();
        // Closed only once the renewal task is gone with no token ever got: kcm is stopping.
        let why = match state.wait_for(|s| !matches!(s, TokenState::Pending)).await {
            Ok(current) => match &*current {
                TokenState::Ready(value) => return Ok(value.clone()),
                TokenState::Failed(why) => why.clone(),
                TokenState::Pending => "the first TokenRequest is under way".into(),
            },
            Err(_) => "kcm is shutting down".into(),
        };
        Err(CredentialsError::NoToken {
            name: self.name.to_string(),
            why,
        })
    }

    /// The API server refused the token (401): get a new one now.
    pub fn refused(&self) {
        self.renew_now.notify_one();
    }
}

/// The ServiceAccount tokens of the process's controllers: one cell and renewal task per
/// ServiceAccount, however many clients use it.
pub struct ServiceAccountTokens {
    /// The process's own client (upstream's `CoreClient`), never a controller's.
    accounts: Api<ServiceAccount>,
    policy: TokenPolicy,
    cells: Mutex<HashMap<String, TokenCell>>,
    stop: CancellationToken,
}

impl ServiceAccountTokens {
    /// Renewal tasks stop when `stop` is cancelled.
    pub fn new(core: Client, policy: TokenPolicy, stop: CancellationToken) -> Self {
        Self {
            accounts: Api::namespaced(core, NAMESPACE),
            policy,
            cells: Mutex::default(),
            stop,
        }
    }

    /// The token cell of ServiceAccount `name`: makes sure the ServiceAccount exists (an
    /// error here stops kcm, as upstream's `ClientOrDie`), then starts its renewal task,
    /// once per name. Must be called inside the tokio runtime.
    pub async fn cell(&self, name: &str) -> Result<TokenCell, CredentialsError> {
        if let Some(cell) = lock(&self.cells).get(name) {
            return Ok(cell.clone());
        }
        self.ensure_account(name).await?;
        let mut cells = lock(&self.cells);
        if let Some(cell) = cells.get(name) {
            return Ok(cell.clone());
        }
        let (tx, rx) = watch::channel(TokenState::Pending);
        let cell = TokenCell {
            name: name.into(),
            state: rx,
            renew_now: Arc::default(),
        };
        tokio::spawn(renew(
            self.accounts.clone(),
            name.to_string(),
            self.policy,
            tx,
            cell.renew_now.clone(),
            self.stop.clone(),
        ));
        cells.insert(name.to_string(), cell.clone());
        Ok(cell)
    }
}

impl ServiceAccountTokens {
    /// [`get_or_create`], retried with the token policy's backoff while the API server does
    /// not answer (connection errors, 429, 5xx): a transient failure at start must not stop
    /// kcm. A definite answer (a missing account under `--shadow`, 403) is final.
    async fn ensure_account(&self, name: &str) -> Result<(), CredentialsError> {
        let mut failures = 0u32;
        loop {
            match get_or_create(&self.accounts, name, self.policy.create_accounts).await {
                Err(CredentialsError::ServiceAccount { source, .. }) if is_transient(&source) => {
                    failures += 1;
                    let delay = self.policy.retry_delay(failures);
                    tracing::warn!(serviceaccount = name, error = %source, retry_in = ?delay, "could not get the controller's ServiceAccount; retrying");
                    tokio::select! {
                        _ = self.stop.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
                done => return done,
            }
        }
    }
}

async fn get_or_create(
    accounts: &Api<ServiceAccount>,
    name: &str,
    create: bool,
) -> Result<(), CredentialsError> {
    let error = |source| CredentialsError::ServiceAccount {
        name: name.to_string(),
        source,
    };
    if accounts.get_opt(name).await.map_err(error)?.is_some() {
        return Ok(());
    }
    if !create {
        return Err(CredentialsError::Missing(name.to_string()));
    }
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => {
            tracing::info!(
                serviceaccount = name,
                namespace = NAMESPACE,
                "created the controller's ServiceAccount"
            );
            Ok(())
        }
        // Someone else created it meanwhile.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(error(source)),
    }
}

/// A new token: the header to send and when the token expires.
async fn request_token(
    accounts: &Api<ServiceAccount>,
    name: &str,
    policy: &TokenPolicy,
) -> Result<(HeaderValue, Timestamp), CredentialsError> {
    // The ServiceAccount may have been deleted since (upstream checks each time too).
    get_or_create(accounts, name, policy.create_accounts).await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(
                i64::try_from(policy.expiration.as_secs()).unwrap_or(i64::MAX),
            ),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let answer = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .map_err(|source| CredentialsError::TokenRequest {
            name: name.to_string(),
            source,
        })?;
    let empty = || CredentialsError::EmptyToken(name.to_string());
    let status = answer.status.ok_or_else(empty)?;
    let (Some(token), Some(expires)) = (status.token, status.expiration_timestamp) else {
        return Err(empty());
    };
    if token.is_empty() {
        return Err(empty());
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| empty())?;
    value.set_sensitive(true);
    Ok((value, expires.0))
}

/// Keeps `state` holding a valid token until `stop`: renews it when `leeway_percent` of its
/// lifetime is left or when a request was refused, and retries failures with backoff.
async fn renew(
    accounts: Api<ServiceAccount>,
    name: String,
    policy: TokenPolicy,
    state: watch::Sender<TokenState>,
    renew_now: Arc<Notify>,
    stop: CancellationToken,
) {
    let mut failures = 0u32;
    loop {
        if stop.is_cancelled() {
            return;
        }
        let wait = match request_token(&accounts, &name, &policy).await {
            Ok((value, expires)) => {
                failures = 0;
                state.send_replace(TokenState::Ready(value));
                let wait = policy.renew_after(Timestamp::now(), expires);
                tracing::debug!(serviceaccount = name, %expires, renew_in = ?wait, "got a ServiceAccount token");
                wait
            }
            Err(err) => {
                failures += 1;
                let delay = policy.retry_delay(failures);
                tracing::warn!(serviceaccount = name, error = %err, retry_in = ?delay, "could not get a token; the current one, if any, stays in use");
                if failures >= policy.attempts_before_failing {
                    state.send_if_modified(|s| match s {
                        TokenState::Ready(_) => false,
                        _ => {
                            *s = TokenState::Failed(err.to_string());
                            true
                        }
                    });
                }
                delay
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
            // A refused token is renewed at once, unless we are backing off from failures.
            _ = renew_now.notified(), if failures == 0 => {
                tracing::info!(serviceaccount = name, "the API server refused the token; getting a new one");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renews_when_a_fifth_of_the_lifetime_is_left_and_never_before_eight_minutes() {
        let policy = TokenPolicy::default();
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let hour: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        assert_eq!(policy.renew_after(now, hour), Duration::from_secs(48 * 60));
        // A lifetime under ten minutes (clock skew) counts as ten minutes, as upstream.
        let soon: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        assert_eq!(policy.renew_after(now, soon), Duration::from_secs(8 * 60));
        assert_eq!(policy.renew_after(hour, now), Duration::from_secs(8 * 60));
        let short = TokenPolicy {
            min_lifetime: Duration::ZERO,
            leeway_percent: 50,
            ..policy
        };
        assert_eq!(short.renew_after(now, soon), Duration::from_secs(30));
    }

    #[test]
    fn retries_back_off_doubling_up_to_the_cap() {
        let policy = TokenPolicy::default();
        let delays: Vec<Duration> = (1..=9).map(|n| policy.retry_delay(n)).collect();
        assert_eq!(
            delays,
            [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0].map(Duration::from_secs_f64)
        );
    }
}
