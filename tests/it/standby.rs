//! Standbys, as the kcm binary runs them against kube-testserver with short lease timings: a
//! warm standby keeps the shared stores synced without writing or queueing anything, reports
//! their state on /readyz and /metrics, and takes over a SIGKILLed leader without listing
//! again; the two leaders' writes never overlap. A cold standby (`--warm-standby=false`)
//! opens no watch until it leads.

use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kcm_testsupport::agent::identity;
use kcm_testsupport::{DEADLINE, FAST_LEASE, Kcm, eventually};
use kube::Api;
use kube_testserver::{Fault, RequestRecord, TestServer};
use serde_json::{Value, json};

const NS: &str = "team";
/// The types the standby's controllers always watch, which it must not list again on
/// taking over (quota's discovered ones, e.g. device classes, start then).
const WARM: [&str; 4] = ["pods", "nodes", "resourcequotas", "poddisruptionbudgets"];

fn replica(server: &TestServer, extra: &[&str]) -> Kcm {
    let mut args = vec!["--controllers=*"];
    args.extend(FAST_LEASE);
    args.extend(extra);
    Kcm::start(server.kubeconfig_path(), &args)
}

fn state(name: &str) -> String {
    format!("kcm_replica_state{{state=\"{name}\"}}")
}

fn seed(server: &TestServer, object: Value) {
    server.seed(object).expect("seeded");
}

fn node(name: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": name } })
}

fn pod(name: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": NS, "labels": { "app": "web" } },
        "spec": { "nodeName": "n1", "containers": [{ "name": "c", "image": "i",
            "resources": { "requests": { "cpu": "100m" } } }] },
        "status": { "phase": "Running",
            "conditions": [{ "type": "Ready", "status": "True" }] } })
}

/// A namespace with a quota on pods and CPU, a PDB over its pods, two pods and a node.
fn world(server: &TestServer) {
    seed(
        server,
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NS } }),
    );
    seed(server, node("n1"));
    seed(
        server,
        json!({ "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": { "name": "q", "namespace": NS },
            "spec": { "hard": { "pods": "10", "requests.cpu": "2" } } }),
    );
    seed(
        server,
        json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": { "name": "web", "namespace": NS },
            "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "web" } } } }),
    );
    seed(server, pod("p1"));
    seed(server, pod("p2"));
}

/// The quota's `used` and the PDB's (expectedPods, currentHealthy, disruptionsAllowed).
async fn statuses(server: &TestServer) -> (Option<Value>, Option<(i32, i32, i32)>) {
    let quota = Api::<ResourceQuota>::namespaced(server.client(), NS)
        .get("q")
        .await
        .unwrap();
    let pdb = Api::<PodDisruptionBudget>::namespaced(server.client(), NS)
        .get("web")
        .await
        .unwrap();
    (
        quota
            .status
            .and_then(|s| s.used)
            .map(|used| serde_json::to_value(used).unwrap()),
        pdb.status.map(|s| {
            (
                s.expected_pods.unwrap_or_default(),
                s.current_healthy.unwrap_or_default(),
                s.disruptions_allowed.unwrap_or_default(),
            )
        }),
    )
}

async fn ttl(server: &TestServer, name: &str) -> Option<String> {
    let node = Api::<Node>::all(server.client()).get(name).await.unwrap();
    node.metadata
        .annotations?
        .get("node.alpha.kubernetes.io/ttl")
        .cloned()
}

async fn lease_holder(server: &TestServer) -> Option<String> {
    let lease = server
        .store()
        .get(
            &server
                .store()
                .resource_type("coordination.k8s.io", "leases")
                .unwrap(),
            "kube-system",
            "kcm",
        )
        .ok()?;
    lease["spec"]["holderIdentity"].as_str().map(String::from)
}

/// The resources of the replica's shared stores, from `kcm_store_synced`.
async fn stores(replica: &Kcm) -> Vec<String> {
    let (_, metrics) = replica.get("/metrics").await.unwrap();
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("kcm_store_synced{resource=\""))
        .filter_map(|rest| rest.split_once('"'))
        .map(|(resource, _)| resource.to_string())
        .collect()
}

fn by(record: &RequestRecord, who: &str) -> bool {
    identity(&record.user_agent) == Some(who)
}

/// The identity of the kcm process other than `known` that has made a request.
fn other_identity(server: &TestServer, known: &str) -> Option<String> {
    server
        .requests()
        .iter()
        .filter_map(|r| identity(&r.user_agent))
        .find(|id| *id != known)
        .map(String::from)
}

/// The standby's lists of the warm types, initial-state watches (streaming lists) included.
fn lists_of_warm_types(server: &TestServer, who: &str) -> usize {
    server.count(|r| {
        by(r, who)
            && WARM.contains(&r.info.resource.as_str())
            && (r.info.verb == "list" || r.query.contains("sendInitialEvents=true"))
    })
}

#[tokio::test]
async fn a_warm_standby_writes_nothing_and_takes_over_without_listing() {
    let server = TestServer::start().await;
    world(&server);
    let mut leader = replica(&server, &[]);
    eventually("the first replica leads", DEADLINE, || async {
        leader.metric(&state("leader")).await == Some(1.0)
    })
    .await;
    let leader_id = lease_holder(&server).await.expect("the lease is held");
    let want_used = json!({ "pods": "2", "requests.cpu": "200m" });
    eventually("the leader converges", DEADLINE, || async {
        statuses(&server).await == (Some(want_used.clone()), Some((2, 2, 1)))
            && ttl(&server, "n1").await.as_deref() == Some("0")
    })
    .await;

    // The standby's node stream and list fail until cleared: /readyz says which store is
    // behind. (The leader's node watch is open already; a fault hits new requests only.)
    for verb in ["list", "watch"] {
        server.inject(Fault::error(500).verb(verb).resource("nodes"));
    }
    let standby = replica(&server, &[]);
    eventually("the second replica is a warm standby", DEADLINE, || async {
        standby.metric(&state("warm_standby")).await == Some(1.0)
    })
    .await;
    eventually("/readyz names the unsynced store", DEADLINE, || async {
        standby.get("/readyz").await == Some((503, "stores not synced: nodes".to_string()))
    })
    .await;
    assert_eq!(
        standby.metric("kcm_store_synced{resource=\"nodes\"}").await,
        Some(0.0)
    );
    server.faults().clear();
    eventually("the standby is ready", DEADLINE, || async {
        standby
            .get("/readyz")
            .await
            .is_some_and(|(code, _)| code == 200)
    })
    .await;
    for resource in WARM {
        assert_eq!(
            standby
                .metric(&format!("kcm_store_synced{{resource=\"{resource}\"}}"))
                .await,
            Some(1.0),
            "{resource}"
        );
    }
    assert_eq!(standby.metric(&state("leader")).await, Some(0.0));
    let standby_id = other_identity(&server, &leader_id).expect("the standby has made requests");
    for resource in WARM {
        assert!(
            server.count(|r| by(r, &standby_id)
                && r.info.verb == "watch"
                && r.info.resource == resource)
                > 0,
            "the standby watches {resource}"
        );
    }
    // Read-only and without queues: no write (not even to the lease, which is held), no
    // work queue, no reconcile.
    assert_eq!(server.count(|r| by(r, &standby_id) && r.is_write()), 0);
    let (_, metrics) = standby.get("/metrics").await.unwrap();
    for family in [
        "workqueue_depth",
        "kcm_reconcile_total",
        "kcm_api_writes_total",
    ] {
        assert!(
            !metrics.lines().any(|line| line.starts_with(family)),
            "a standby has no {family}:\n{metrics}"
        );
    }
    let warmed = stores(&standby).await;
    let listed = lists_of_warm_types(&server, &standby_id);
    assert!(
        listed >= WARM.len(),
        "the standby listed each type: {listed}"
    );

    // The leader dies; while no one leads, a pod and a node are added.
    leader.signal("KILL");
    let killed = Instant::now();
    seed(&server, pod("p3"));
    seed(&server, node("n2"));
    eventually("the standby takes over", DEADLINE, || async {
        standby.metric(&state("leader")).await == Some(1.0)
    })
    .await;
    let want_used = json!({ "pods": "3", "requests.cpu": "300m" });
    eventually("the new leader converges", DEADLINE, || async {
        statuses(&server).await == (Some(want_used.clone()), Some((3, 3, 2)))
            && ttl(&server, "n2").await.as_deref() == Some("0")
    })
    .await;
    println!("converged {:?} after SIGKILL", killed.elapsed());
    assert!(leader.wait_exit(DEADLINE).await.is_some());
    // What each controller's `warm` declares is what it watches once it runs, but for the
    // types the quota controller discovers (device classes, read by the claims evaluator).
    let started: Vec<String> = stores(&standby)
        .await
        .into_iter()
        .filter(|resource| !warmed.contains(resource))
        .collect();
    assert_eq!(started, ["deviceclasses"], "warmed: {warmed:?}");
    assert_eq!(
        lists_of_warm_types(&server, &standby_id),
        listed,
        "the new leader started on its synced stores, without listing again"
    );

    // The old leader's last write comes before the new leader's first.
    let requests = server.requests();
    let writes = |who: &str| -> Vec<Instant> {
        requests
            .iter()
            .filter(|r| by(r, who) && r.is_write())
            .map(|r| r.at)
            .collect()
    };
    let (old, new) = (writes(&leader_id), writes(&standby_id));
    let (last_old, first_new) = (old.iter().max().unwrap(), new.iter().min().unwrap());
    assert!(
        last_old < first_new,
        "the leaders' writes overlap: the old one's last {:?} after the new one's first",
        *last_old - *first_new
    );
    assert!(
        *last_old < killed,
        "nothing written by the old leader after its death"
    );
}

#[tokio::test]
async fn a_cold_standby_opens_no_watch_until_it_leads() {
    let server = TestServer::start().await;
    world(&server);
    let mut leader = replica(&server, &["--warm-standby=false"]);
    eventually("the first replica leads", DEADLINE, || async {
        leader.metric(&state("leader")).await == Some(1.0)
    })
    .await;
    let leader_id = lease_holder(&server).await.expect("the lease is held");
    let standby = replica(&server, &["--warm-standby=false"]);
    eventually("the second replica is a cold standby", DEADLINE, || async {
        standby.metric(&state("cold_standby")).await == Some(1.0)
    })
    .await;
    // Several retry periods pass: it asks for the lease and nothing else.
    eventually(
        "the standby has tried the lease a few times",
        DEADLINE,
        || async {
            other_identity(&server, &leader_id)
                .is_some_and(|id| server.count(|r| by(r, &id) && r.is("get", "leases", "")) >= 4)
        },
    )
    .await;
    let standby_id = other_identity(&server, &leader_id).unwrap();
    let others: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| by(r, &standby_id) && r.info.resource != "leases")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(others.is_empty(), "a cold standby asked for {others:?}");
    assert_eq!(
        standby.get("/readyz").await,
        Some((200, "ok".to_string())),
        "ready: it keeps no store"
    );
    let (_, metrics) = standby.get("/metrics").await.unwrap();
    assert!(!metrics.contains("kcm_store_synced{"), "{metrics}");

    leader.signal("KILL");
    seed(&server, node("n2"));
    eventually("the standby takes over and converges", DEADLINE, || async {
        standby.metric(&state("leader")).await == Some(1.0)
            && ttl(&server, "n2").await.as_deref() == Some("0")
    })
    .await;
    assert!(leader.wait_exit(DEADLINE).await.is_some());
    let requests = server.requests();
    let first_new = requests
        .iter()
        .filter(|r| by(r, &standby_id) && r.is_write())
        .map(|r| r.at)
        .min()
        .unwrap();
    assert!(
        requests
            .iter()
            .filter(|r| by(r, &leader_id) && r.is_write())
            .all(|r| r.at < first_new),
        "the leaders' writes overlap"
    );
}
