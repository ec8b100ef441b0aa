//! Leader election on a `coordination.k8s.io/v1` Lease, following client-go's
//! `tools/leaderelection` with a `LeaseLock` (non-coordinated, `ReleaseOnCancel`).
//!
//! As upstream, expiry is judged by the *local* time at which a change of the record was
//! first observed, never by the `renewTime` written in it, so clock skew between candidates
//! does not matter; only the lease's `leaseDurationSeconds` and local elapsed time do.
//!
//! Deliberate differences from client-go: the lease is released only when `hold`'s shutdown
//! resolves, not after leadership is lost (the process should stop at once then); a change
//! of the record is detected at microsecond precision (upstream compares a JSON encoding with
//! whole seconds); each acquisition attempt is cut after `renew_deadline`; and a lease
//! duration below 1s is refused, since the Lease would store 0 seconds.

use super::connection::reachability;
use super::rbac::Rule;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::lock::lock;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

/// client-go's `JitterFactor` for acquisition retries.
pub const JITTER_FACTOR: f64 = 1.2;
/// What leader election needs in the lease's namespace (a Role there, not cluster-wide):
/// creating the lease, and reading and renewing it by its default name, as upstream's
/// `system::leader-locking-kube-controller-manager` role does for its own lease.
pub const RBAC: &[Rule] = &[
    Rule::new(&["coordination.k8s.io"], &["leases"], &["create"]),
    Rule::new(&["coordination.k8s.io"], &["leases"], &["get", "update"]).named(&["kcm"]),
];

/// Where the lease lives, who we are and how the timing works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    pub namespace: String,
    pub name: String,
    /// Upstream: hostname + "_" + uuid (see [`default_identity`]).
    pub identity: String,
    /// How long a non-leader waits, after it last saw the record change, before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a renewal before it gives up leadership.
    pub renew_deadline: Duration,
    /// Wait between attempts (acquisition adds up to `JITTER_FACTOR` x this).
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    fn lease_duration_seconds(&self) -> i32 {
        // Truncates like upstream's int(LeaseDuration / time.Second).
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error(
        "leader election lost: lease {namespace}/{name} not renewed within {renew_deadline:?} ({reason})"
    )]
    LostLease {
        namespace: String,
        name: String,
        renew_deadline: Duration,
        /// Why the last renewal attempt failed.
        reason: String,
    },
}

/// The record as last seen, and when (locally) it was first seen in that form.
#[derive(Debug, Clone)]
struct Observed {
    spec: LeaseSpec,
    at: Instant,
}

impl Observed {
    fn holder(&self) -> &str {
        self.spec.holder_identity.as_deref().unwrap_or("")
    }

    /// client-go's `isLeaseValid`: observedTime + the record's leaseDurationSeconds > now.
    fn is_valid(&self, now: Instant) -> bool {
        let secs = self.spec.lease_duration_seconds.unwrap_or(0);
        let secs = u64::try_from(secs).unwrap_or(0);
        self.at + Duration::from_secs(secs) > now
    }
}

#[derive(Debug, Default)]
struct State {
    observed: Option<Observed>,
    /// Last Lease the server returned; its resourceVersion makes updates optimistic.
    lease: Option<Lease>,
}

impl State {
    fn is_holder(&self, identity: &str) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|o| o.holder() == identity)
    }

    fn observe(&mut self, lease: Lease) {
        let spec = lease.spec.clone().unwrap_or_default();
        if self.observed.as_ref().is_none_or(|o| o.spec != spec) {
            self.observed = Some(Observed {
                spec,
                at: Instant::now(),
            });
        }
        self.lease = Some(lease);
    }

    /// After our own successful write the observation restarts now, as `setObservedRecord`.
    fn observe_own(&mut self, lease: Lease) {
        self.observed = Some(Observed {
            spec: lease.spec.clone().unwrap_or_default(),
            at: Instant::now(),
        });
        self.lease = Some(lease);
    }
}

/// Result of one `tryAcquireOrRenew`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    Acquired,
    HeldBy(String),
    Failed(String),
}

impl Attempt {
    fn reason(&self) -> String {
        match self {
            Attempt::Acquired => "acquired".to_string(),
            Attempt::HeldBy(holder) => format!("lease is held by {holder}"),
            Attempt::Failed(err) => err.clone(),
        }
    }
}

/// Runs client-go's election loop for one process; share it behind an `Arc`.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    state: Mutex<State>,
    /// The gauge's view: set when acquired, cleared when leadership ends.
    leading: AtomicBool,
}

impl LeaderElector {
    pub fn new(client: kube::Client, config: LeaderElectionConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            state: Mutex::new(State::default()),
            leading: AtomicBool::new(false),
        }
    }

    /// Blocks until this process holds the lease, trying every `retry_period` with jitter 1.2
    /// (`wait.JitterUntil`), or until `shutdown` resolves (then `Ok(false)`).
    pub async fn acquire(&self, shutdown: impl Future<Output = ()>) -> Result<bool, LeaderError> {
        let desc = self.describe();
        tracing::info!(lease = %desc, identity = %self.config.identity,
            "attempting to acquire leader lease {desc}...");
        let mut shutdown = pin!(shutdown);
        loop {
            // A hung request must not stall the loop forever; upstream has no bound here,
            // renew_deadline is a generous one.
            let attempt = tokio::select! {
                biased;
                () = &mut shutdown => return Ok(false),
                attempt = tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew()) => {
                    attempt.unwrap_or_else(|_| Attempt::Failed("request timed out".into()))
                }
            };
            if attempt == Attempt::Acquired {
                self.leading.store(true, Ordering::SeqCst);
                tracing::info!(lease = %desc, "successfully acquired lease {desc}");
                return Ok(true);
            }
            tracing::debug!(lease = %desc, reason = %attempt.reason(), "failed to acquire lease {desc}");
            tokio::select! {
                biased;
                () = &mut shutdown => return Ok(false),
                () = tokio::time::sleep(jitter(self.config.retry_period, JITTER_FACTOR)) => {}
            }
        }
    }

    /// While leading: renews every `retry_period`; returns `Err(LostLease)` when no renewal has
    /// succeeded for `renew_deadline`, or releases the lease and returns `Ok(())` once
    /// `shutdown` resolves. Resolve `shutdown` only after the guarded work has stopped: the
    /// release lets another candidate take over at once.
    pub async fn hold(&self, shutdown: impl Future<Output = ()>) -> Result<(), LeaderError> {
        // Clears the gauge even if this future is dropped mid-way.
        let _leading = LeadingGuard(&self.leading);
        let desc = self.describe();
        let lost = tokio::select! {
            biased;
            () = shutdown => None,
            reason = self.renew_loop() => Some(reason),
        };
        self.leading.store(false, Ordering::SeqCst);
        match lost {
            Some(reason) => {
                tracing::error!(lease = %desc, %reason, "failed to renew lease {desc}: {reason}");
                tracing::info!(lease = %desc, "stopped leading");
                Err(LeaderError::LostLease {
                    namespace: self.config.namespace.clone(),
                    name: self.config.name.clone(),
                    renew_deadline: self.config.renew_deadline,
                    reason,
                })
            }
            None => {
                match tokio::time::timeout(self.config.renew_deadline, self.release()).await {
                    Ok(Ok(true)) => tracing::info!(lease = %desc, "released lease {desc}"),
                    Ok(Ok(false)) => {}
                    Ok(Err(err)) => {
                        tracing::error!(lease = %desc, %err, "failed to release lease {desc}");
                    }
                    Err(_) => {
                        tracing::error!(lease = %desc, "failed to release lease {desc}: timed out")
                    }
                }
                tracing::info!(lease = %desc, "stopped leading");
                Ok(())
            }
        }
    }

    /// Whether this process currently leads (for `leader_election_master_status`).
    pub fn is_leader(&self) -> bool {
        self.leading.load(Ordering::SeqCst)
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent even if a holder panicked: every update is one assignment.
        lock(&self.state)
    }

    /// `wait.Until(PollUntilContextTimeout(retry, renewDeadline, immediate))`: returns only
    /// when leadership is lost, with the last failure's reason.
    async fn renew_loop(&self) -> String {
        let desc = self.describe();
        loop {
            let deadline = Instant::now() + self.config.renew_deadline;
            loop {
                // Requests are cut at the deadline, as upstream's timeout context does.
                let attempt = tokio::time::timeout_at(deadline, self.try_acquire_or_renew())
                    .await
                    .unwrap_or_else(|_| {
                        Attempt::Failed("timed out waiting for the condition".into())
                    });
                if attempt == Attempt::Acquired {
                    tracing::trace!(lease = %desc, "successfully renewed lease {desc}");
                    break;
                }
                let now = Instant::now();
                if now >= deadline {
                    return attempt.reason();
                }
                tokio::time::sleep_until(deadline.min(now + self.config.retry_period)).await;
                if Instant::now() >= deadline {
                    return attempt.reason();
                }
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// client-go's `tryAcquireOrRenew`.
    async fn try_acquire_or_renew(&self) -> Attempt {
        let now = Instant::now();
        let me = self.config.identity.as_str();
        let name = self.config.name.as_str();
        let pp = PostParams::default();

        // 1. Fast path: the leader updates optimistically from the record it wrote last.
        let fast = {
            let st = self.state();
            match (&st.observed, &st.lease) {
                (Some(obs), Some(lease)) if obs.holder() == me && obs.is_valid(now) => {
                    Some((lease.clone(), obs.spec.clone()))
                }
                _ => None,
            }
        };
        if let Some((mut lease, old)) = fast {
            lease.spec = Some(next_spec(&self.config, Some(&old), true, Timestamp::now()));
            match self.api.replace(name, &pp, &lease).await {
                Ok(updated) => {
                    self.state().observe_own(updated);
                    return Attempt::Acquired;
                }
                Err(err) => tracing::info!(%err,
                    "failed to update lease optimistically, falling back to slow path"),
            }
        }

        // 2. Obtain or create the record.
        let current = match self.api.get_opt(name).await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name.to_string()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(next_spec(&self.config, None, false, Timestamp::now())),
                };
                return match self.api.create(&pp, &lease).await {
                    Ok(created) => {
                        self.state().observe_own(created);
                        Attempt::Acquired
                    }
                    Err(err) => {
                        tracing::error!(%err, "error initially creating leader election record");
                        Attempt::Failed(err.to_string())
                    }
                };
            }
            Err(err) => {
                // An unreachable server is reported once by the clients' `Reachability`, not
                // once per retry period here.
                match reachability::cause(&err) {
                    Some(cause) => {
                        tracing::debug!(lease = %self.describe(), %cause, "error retrieving resource lock")
                    }
                    None => {
                        tracing::error!(lease = %self.describe(), %err, "error retrieving resource lock")
                    }
                }
                return Attempt::Failed(err.to_string());
            }
        };

        // 3. Record obtained: remember it if it changed, then check holder and expiry.
        let (old, was_holder) = {
            let mut st = self.state();
            st.observe(current.clone());
            let Some(obs) = st.observed.as_ref() else {
                return Attempt::Failed("no observed record".into());
            };
            let holder = obs.holder();
            if !holder.is_empty() && holder != me && obs.is_valid(now) {
                tracing::debug!(%holder, "lock is held by {holder} and has not yet expired");
                return Attempt::HeldBy(holder.to_string());
            }
            (obs.spec.clone(), holder == me)
        };

        // 4. Take it (or renew through the slow path) with the fetched resourceVersion.
        let mut lease = current;
        lease.spec = Some(next_spec(
            &self.config,
            Some(&old),
            was_holder,
            Timestamp::now(),
        ));
        match self.api.replace(name, &pp, &lease).await {
            Ok(updated) => {
                self.state().observe_own(updated);
                Attempt::Acquired
            }
            Err(kube::Error::Api(status)) if status.is_conflict() => {
                // Someone else wrote first; the next GET shows who.
                tracing::info!(reason = %status.message, "failed to update lock: conflict");
                Attempt::Failed(format!("conflict: {}", status.message))
            }
            Err(err) => {
                tracing::error!(%err, "failed to update lock");
                Attempt::Failed(err.to_string())
            }
        }
    }

    /// client-go's `release`: gives the lease up if we still hold it. `Ok(false)` when there
    /// was nothing of ours to release.
    async fn release(&self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            tracing::info!(lease = %self.describe(), "lease lock not found");
            return Ok(false);
        };
        let me = self.config.identity.as_str();
        let transitions = {
            let st = self.state();
            if !st.is_holder(me) {
                return Ok(false);
            }
            st.observed
                .as_ref()
                .and_then(|o| o.spec.lease_transitions)
                .unwrap_or(0)
        };
        // Never clear a record someone else has taken over since our last look.
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref());
        if holder != Some(me) {
            return Ok(false);
        }
        lease.spec = Some(released_spec(transitions, Timestamp::now()));
        let updated = self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await?;
        self.state().observe_own(updated);
        Ok(true)
    }
}

/// Clears the leading flag when `hold` ends, however it ends.
struct LeadingGuard<'a>(&'a AtomicBool);

impl Drop for LeadingGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// The record we write (`LeaderElectionRecordToLeaseSpec`): acquireTime and leaseTransitions
/// are kept while we stay the holder, otherwise acquireTime is now and transitions go up by
/// one. Strategy and preferredHolder are dropped, as upstream's non-coordinated elector does.
fn next_spec(
    config: &LeaderElectionConfig,
    old: Option<&LeaseSpec>,
    was_holder: bool,
    now: Timestamp,
) -> LeaseSpec {
    let now = MicroTime(now);
    let old_transitions = old.and_then(|o| o.lease_transitions).unwrap_or(0);
    let (acquire_time, transitions) = match old {
        None => (Some(now.clone()), 0),
        Some(old) if was_holder => (old.acquire_time.clone(), old_transitions),
        Some(_) => (Some(now.clone()), old_transitions.saturating_add(1)),
    };
    LeaseSpec {
        holder_identity: Some(config.identity.clone()),
        lease_duration_seconds: Some(config.lease_duration_seconds()),
        acquire_time,
        renew_time: Some(now),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    }
}

/// The record `release` writes: no holder, a 1s lease, both times now.
fn released_spec(transitions: i32, now: Timestamp) -> LeaseSpec {
    let now = MicroTime(now);
    LeaseSpec {
        holder_identity: Some(String::new()),
        lease_duration_seconds: Some(1),
        acquire_time: Some(now.clone()),
        renew_time: Some(now),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    }
}

/// `wait.Jitter`: `d` plus a random part of up to `factor * d`.
fn jitter(d: Duration, factor: f64) -> Duration {
    d + d.mul_f64(factor * rand::random::<f64>())
}

/// kube-controller-manager's identity: hostname + "_" + a random (version 4) UUID.
pub fn default_identity() -> String {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let host = if host.is_empty() {
        "localhost".to_string()
    } else {
        host
    };
    format!("{host}_{}", uuid::Uuid::new_v4())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LeaderElectionConfig {
        LeaderElectionConfig {
            namespace: "kube-system".into(),
            name: "kcm".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    fn spec(holder: &str, secs: i32, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(secs),
            lease_transitions: Some(transitions),
            acquire_time: Some(MicroTime(Timestamp::UNIX_EPOCH)),
            renew_time: Some(MicroTime(Timestamp::UNIX_EPOCH)),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn next_spec_creates_keeps_and_transitions() {
        let c = config();
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let created = next_spec(&c, None, false, now);
        assert_eq!(created.holder_identity.as_deref(), Some("me"));
        assert_eq!(created.lease_duration_seconds, Some(15));
        assert_eq!(created.lease_transitions, Some(0));
        assert_eq!(created.acquire_time, Some(MicroTime(now)));
        assert_eq!(created.renew_time, Some(MicroTime(now)));

        let renewed = next_spec(&c, Some(&spec("me", 15, 3)), true, now);
        assert_eq!(renewed.lease_transitions, Some(3));
        assert_eq!(renewed.acquire_time, Some(MicroTime(Timestamp::UNIX_EPOCH)));
        assert_eq!(renewed.renew_time, Some(MicroTime(now)));

        let mut taken_from = spec("other", 15, 3);
        taken_from.strategy = Some("OldestEmulationVersion".into());
        let taken = next_spec(&c, Some(&taken_from), false, now);
        assert_eq!(taken.lease_transitions, Some(4));
        assert_eq!(taken.acquire_time, Some(MicroTime(now)));
        assert_eq!(taken.strategy, None);
    }

    #[test]
    fn released_spec_clears_holder() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let s = released_spec(7, now);
        assert_eq!(s.holder_identity.as_deref(), Some(""));
        assert_eq!(s.lease_duration_seconds, Some(1));
        assert_eq!(s.lease_transitions, Some(7));
        assert_eq!(s.acquire_time, s.renew_time);
    }

    #[test]
    fn validity_uses_local_observation_time_and_record_duration() {
        let at = Instant::now();
        let obs = Observed {
            spec: spec("other", 2, 0),
            at,
        };
        assert!(obs.is_valid(at + Duration::from_millis(1999)));
        assert!(!obs.is_valid(at + Duration::from_secs(2)));
        // The ancient renewTime in the record does not matter.
        assert!(obs.is_valid(at));
    }

    #[test]
    fn observe_keeps_time_while_record_unchanged() {
        let mut st = State::default();
        let lease = |s: LeaseSpec, rv: &str| Lease {
            metadata: ObjectMeta {
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            spec: Some(s),
        };
        st.observe(lease(spec("other", 15, 0), "1"));
        let first = st.observed.as_ref().map(|o| o.at);
        std::thread::sleep(Duration::from_millis(5));
        st.observe(lease(spec("other", 15, 0), "1"));
        assert_eq!(st.observed.as_ref().map(|o| o.at), first);
        st.observe(lease(spec("other", 15, 1), "2"));
        assert_ne!(st.observed.as_ref().map(|o| o.at), first);
        assert!(!st.is_holder("me"));
        st.observe(lease(spec("me", 15, 2), "3"));
        assert!(st.is_holder("me"));
    }

    #[test]
    fn jitter_stays_in_range() {
        let d = Duration::from_millis(100);
        for _ in 0..1000 {
            let j = jitter(d, JITTER_FACTOR);
            assert!(j >= d && j < Duration::from_millis(220), "{j:?}");
        }
    }

    #[test]
    fn default_identity_is_host_and_uuid() {
        let a = default_identity();
        let b = default_identity();
        assert_ne!(a, b);
        let (host, uuid) = a.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        assert_eq!(uuid.len(), 36);
        assert_eq!(uuid.as_bytes()[14], b'4');
        assert!(matches!(uuid.as_bytes()[19], b'8' | b'9' | b'a' | b'b'));
    }
}
