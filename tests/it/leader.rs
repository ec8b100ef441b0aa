//! Leader election against kube-testserver, in real time with short durations. Every timing
//! assertion polls with a deadline; bounds are derived from the protocol, with slack for a
//! loaded 2-core machine.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kcm::runtime::leader::{LeaderElectionConfig, LeaderElector, LeaderError};
use kube::Api;
use kube_testserver::{Fault, TestServer};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const NS: &str = "kube-system";
const NAME: &str = "kube-controller-manager";

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

fn config(identity: &str, lease_ms: u64, renew_ms: u64, retry_ms: u64) -> LeaderElectionConfig {
    LeaderElectionConfig {
        namespace: NS.into(),
        name: NAME.into(),
        identity: identity.into(),
        lease_duration: Duration::from_millis(lease_ms),
        renew_deadline: Duration::from_millis(renew_ms),
        retry_period: Duration::from_millis(retry_ms),
    }
}

#[derive(Debug)]
enum Outcome {
    /// acquire returned false (shutdown before acquiring).
    NotAcquired,
    /// hold returned Ok after releasing.
    Released,
}

/// One candidate process: acquire, then hold until `stop` or lease loss.
struct Candidate {
    elector: Arc<LeaderElector>,
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<Outcome, LeaderError>>,
}

impl Candidate {
    fn start(client: kube::Client, config: LeaderElectionConfig) -> Self {
        let elector = Arc::new(LeaderElector::new(client, config));
        let (stop, rx) = watch::channel(false);
        let e = elector.clone();
        let task = tokio::spawn(async move {
            if !e.acquire(stopped(rx.clone())).await? {
                return Ok(Outcome::NotAcquired);
            }
            e.hold(stopped(rx)).await.map(|()| Outcome::Released)
        });
        Self {
            elector,
            stop,
            task,
        }
    }

    fn is_leader(&self) -> bool {
        self.elector.is_leader()
    }

    async fn shutdown(self) -> Result<Outcome, LeaderError> {
        let _ = self.stop.send(true);
        match tokio::time::timeout(Duration::from_secs(10), self.task).await {
            Ok(Ok(result)) => result,
            Ok(Err(join)) => panic!("candidate task failed: {join}"),
            Err(_) => panic!("candidate did not stop within 10s"),
        }
    }
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Polls `cond` every 10ms; returns how long it took to hold, or None at the deadline.
async fn wait_for(limit: Duration, cond: impl Fn() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond().then(|| start.elapsed())
}

/// Asserts for `span` that `a` leads and `b` does not, sampling every 10ms.
async fn assert_only_leader(span: Duration, a: &Candidate, b: &Candidate) {
    let start = Instant::now();
    while start.elapsed() < span {
        assert!(
            a.is_leader(),
            "leader lost leadership at {:?}",
            start.elapsed()
        );
        assert!(!b.is_leader(), "two leaders at {:?}", start.elapsed());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn lease(server: &TestServer) -> Lease {
    Api::<Lease>::namespaced(server.client(), NS)
        .get(NAME)
        .await
        .unwrap()
}

fn holder(lease: &Lease) -> &str {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .unwrap_or("")
}

fn transitions(lease: &Lease) -> i32 {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap_or(-1)
}

/// Lease writes in the request log with their bodies' specs.
fn lease_writes(server: &TestServer, verb: &str) -> Vec<(u16, Value)> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.is(verb, "leases", ""))
        .map(|r| {
            (
                r.code,
                r.body.map(|b| b["spec"].clone()).unwrap_or_default(),
            )
        })
        .collect()
}

fn is_micro_time(v: &Value) -> bool {
    // RFC 3339 with exactly six fractional digits, UTC: 2024-01-02T03:04:05.123456Z
    v.as_str().is_some_and(|s| {
        s.len() == 27
            && s.as_bytes()[19] == b'.'
            && s.ends_with('Z')
            && s[20..26].bytes().all(|c| c.is_ascii_digit())
    })
}

#[tokio::test]
async fn first_creates_lease_and_second_waits_while_it_renews() {
    init_tracing();
    let server = TestServer::start().await;
    let a = Candidate::start(server.client(), config("a", 1000, 800, 200));
    wait_for(Duration::from_secs(5), || a.is_leader())
        .await
        .expect("first candidate leads");

    let creates = lease_writes(&server, "create");
    assert_eq!(creates.len(), 1, "{creates:?}");
    let (code, spec) = &creates[0];
    assert_eq!(*code, 201);
    assert_eq!(spec["holderIdentity"], "a");
    assert_eq!(spec["leaseDurationSeconds"], 1);
    assert_eq!(spec["leaseTransitions"], 0);
    assert!(is_micro_time(&spec["renewTime"]), "{spec}");
    assert_eq!(spec["acquireTime"], spec["renewTime"]);

    let b = Candidate::start(server.client(), config("b", 1000, 800, 200));
    // Three lease durations: b would have taken over were a not renewing.
    assert_only_leader(Duration::from_secs(3), &a, &b).await;
    assert!(!b.task.is_finished());

    let l = lease(&server).await;
    assert_eq!(holder(&l), "a");
    assert_eq!(transitions(&l), 0);
    let updates = lease_writes(&server, "update");
    assert!(
        updates
            .iter()
            .filter(|(c, s)| *c == 200 && s["holderIdentity"] == "a")
            .count()
            >= 5,
        "a renews every retry period: {updates:?}"
    );
    assert!(
        updates.iter().all(|(_, s)| s["holderIdentity"] != "b"),
        "b never writes while a holds the lease"
    );

    assert!(matches!(b.shutdown().await, Ok(Outcome::NotAcquired)));
    assert!(matches!(a.shutdown().await, Ok(Outcome::Released)));
}

#[tokio::test]
async fn killed_leader_is_replaced_after_lease_duration() {
    init_tracing();
    let server = TestServer::start().await;
    let (lease_ms, retry_ms) = (1000, 200);
    let a = Candidate::start(server.client(), config("a", lease_ms, 800, retry_ms));
    wait_for(Duration::from_secs(5), || a.is_leader())
        .await
        .expect("a leads");
    let b = Candidate::start(server.client(), config("b", lease_ms, 800, retry_ms));
    assert_only_leader(Duration::from_millis(600), &a, &b).await;

    // A crash: no release, the lease just stops being renewed.
    a.task.abort();
    let killed = Instant::now();
    let took = wait_for(Duration::from_secs(10), || b.is_leader())
        .await
        .expect("b takes over");
    eprintln!("takeover after {took:?}");
    // b saw a's last renewal no earlier than one retry period before the kill, and must wait
    // a full lease duration of its own observation after that.
    assert!(
        took >= Duration::from_millis(lease_ms - retry_ms - 100),
        "b took a valid lease: {took:?}"
    );
    // Observation up to one jittered period late, expiry, then one jittered period to retry.
    let bound = Duration::from_millis(lease_ms + 2 * 22 * retry_ms / 10 + 1000);
    assert!(took <= bound, "takeover took {took:?}, bound {bound:?}");
    assert!(killed.elapsed() >= took);

    let l = lease(&server).await;
    assert_eq!(holder(&l), "b");
    assert_eq!(transitions(&l), 1);
    // b's takeover write: a new holder's acquireTime is now.
    let takeover = lease_writes(&server, "update")
        .into_iter()
        .find(|(c, s)| *c == 200 && s["holderIdentity"] == "b")
        .expect("b's takeover write");
    assert_eq!(takeover.1["leaseTransitions"], 1);
    assert_eq!(takeover.1["acquireTime"], takeover.1["renewTime"]);
    assert!(matches!(b.shutdown().await, Ok(Outcome::Released)));
}

#[tokio::test]
async fn release_on_shutdown_lets_another_acquire_at_once() {
    init_tracing();
    let server = TestServer::start().await;
    // A long lease so that "at once" is clearly not "after expiry".
    let (lease_ms, renew_ms, retry_ms) = (5000, 3000, 200);
    let a = Candidate::start(server.client(), config("a", lease_ms, renew_ms, retry_ms));
    wait_for(Duration::from_secs(5), || a.is_leader())
        .await
        .expect("a leads");
    let b = Candidate::start(server.client(), config("b", lease_ms, renew_ms, retry_ms));
    assert_only_leader(Duration::from_millis(600), &a, &b).await;

    let released = Instant::now();
    assert!(matches!(a.shutdown().await, Ok(Outcome::Released)));
    assert!(!a_is_leader_after(&server));

    wait_for(Duration::from_secs(10), || b.is_leader())
        .await
        .expect("b acquires");
    let took = released.elapsed();
    eprintln!("acquired {took:?} after release");
    assert!(
        took < Duration::from_millis(lease_ms / 2),
        "b waited {took:?}, as if the lease had not been released"
    );

    let release = lease_writes(&server, "update")
        .into_iter()
        .filter(|(c, s)| *c == 200 && s["holderIdentity"] == "")
        .collect::<Vec<_>>();
    assert_eq!(release.len(), 1, "{release:?}");
    let spec = &release[0].1;
    assert_eq!(spec["leaseDurationSeconds"], 1);
    assert_eq!(spec["leaseTransitions"], 0);
    assert!(is_micro_time(&spec["renewTime"]));
    assert_eq!(spec["acquireTime"], spec["renewTime"]);

    let l = lease(&server).await;
    assert_eq!(holder(&l), "b");
    assert_eq!(transitions(&l), 1);
    assert!(matches!(b.shutdown().await, Ok(Outcome::Released)));
}

/// The release is a write of an empty holder by a, after which a never writes as holder.
fn a_is_leader_after(server: &TestServer) -> bool {
    let updates = lease_writes(server, "update");
    let released_at = updates
        .iter()
        .position(|(c, s)| *c == 200 && s["holderIdentity"] == "");
    match released_at {
        Some(i) => updates[i..].iter().any(|(_, s)| s["holderIdentity"] == "a"),
        None => true,
    }
}

#[tokio::test]
async fn failing_renewals_lose_the_lease_after_renew_deadline() {
    init_tracing();
    let server = TestServer::start().await;
    let (renew_ms, retry_ms) = (800, 200);
    let a = Candidate::start(server.client(), config("a", 1000, renew_ms, retry_ms));
    wait_for(Duration::from_secs(5), || a.is_leader())
        .await
        .expect("a leads");
    tokio::time::sleep(Duration::from_millis(300)).await;

    server.inject(Fault::error(500).verb("update").resource("leases"));
    server.inject(Fault::error(500).verb("get").resource("leases"));
    let broken = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(10), a.task)
        .await
        .expect("hold returns")
        .expect("task ran");
    let took = broken.elapsed();
    eprintln!("lost after {took:?}");
    match result {
        Err(LeaderError::LostLease {
            namespace,
            name,
            renew_deadline,
            reason,
        }) => {
            assert_eq!((namespace.as_str(), name.as_str()), (NS, NAME));
            assert_eq!(renew_deadline, Duration::from_millis(renew_ms));
            assert!(reason.contains("500"), "{reason}");
        }
        other => panic!("expected LostLease, got {other:?}"),
    }
    assert!(!a.elector.is_leader());
    // The failing round starts at or after the fault; it ends at its renew deadline, which
    // begins at most one retry period after the last success.
    assert!(took >= Duration::from_millis(renew_ms - 100), "{took:?}");
    assert!(
        took <= Duration::from_millis(renew_ms + retry_ms + 1000),
        "{took:?}"
    );
    assert!(server.count(|r| r.is("update", "leases", "") && r.code == 500) >= 2);
}

#[tokio::test]
async fn racing_candidates_on_an_expired_lease_exactly_one_wins() {
    init_tracing();
    let server = TestServer::start().await;
    server
        .seed(json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {
                "holderIdentity": "old",
                "leaseDurationSeconds": 1,
                "leaseTransitions": 5,
                "acquireTime": "2020-01-01T00:00:00.000000Z",
                "renewTime": "2020-01-01T00:00:00.000000Z",
            },
        }))
        .unwrap();
    // Updates are delayed longer than a jittered retry period (440ms), so whichever
    // candidate tries second reads the lease before the first one's update lands and then
    // writes with the same resourceVersion.
    server.inject(
        Fault::latency(Duration::from_millis(800))
            .verb("update")
            .resource("leases"),
    );
    let (lease_ms, renew_ms, retry_ms) = (4000, 3000, 200);
    let a = Candidate::start(server.client(), config("a", lease_ms, renew_ms, retry_ms));
    let b = Candidate::start(server.client(), config("b", lease_ms, renew_ms, retry_ms));

    let conflicts = || server.count(|r| r.is("update", "leases", "") && r.code == 409);
    wait_for(Duration::from_secs(10), || {
        conflicts() >= 1 && (a.is_leader() || b.is_leader())
    })
    .await
    .expect("one wins, the other gets a conflict");
    server.faults().clear();

    let (winner, loser, winner_id) = if a.is_leader() {
        (a, b, "a")
    } else {
        (b, a, "b")
    };
    // The old holder's 1s lease has expired for both, yet only one leads, through several
    // retry periods.
    assert_only_leader(Duration::from_millis(1500), &winner, &loser).await;
    assert_eq!(conflicts(), 1);

    let l = lease(&server).await;
    assert_eq!(holder(&l), winner_id);
    assert_eq!(transitions(&l), 6);
    let took_over = lease_writes(&server, "update")
        .into_iter()
        .filter(|(_, s)| s["leaseTransitions"] == 6 && s["holderIdentity"] != "")
        .map(|(code, s)| (code, s["holderIdentity"].clone()))
        .collect::<Vec<_>>();
    // Both tried to take over from "old"; the server accepted exactly one.
    assert_eq!(
        took_over.iter().filter(|(c, _)| *c == 409).count(),
        1,
        "{took_over:?}"
    );
    assert!(
        took_over
            .iter()
            .any(|(c, h)| *c == 200 && *h == json!(winner_id))
    );

    assert!(matches!(loser.shutdown().await, Ok(Outcome::NotAcquired)));
    assert!(matches!(winner.shutdown().await, Ok(Outcome::Released)));
}

#[tokio::test]
async fn shutdown_before_acquiring_returns_false() {
    init_tracing();
    let server = TestServer::start().await;
    let a = Candidate::start(server.client(), config("a", 1000, 800, 200));
    wait_for(Duration::from_secs(5), || a.is_leader())
        .await
        .expect("a leads");
    let b = LeaderElector::new(server.client(), config("b", 1000, 800, 200));
    let started = Instant::now();
    let acquired = b
        .acquire(tokio::time::sleep(Duration::from_millis(300)))
        .await
        .unwrap();
    assert!(!acquired);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(!b.is_leader());
    assert!(matches!(a.shutdown().await, Ok(Outcome::Released)));
}
