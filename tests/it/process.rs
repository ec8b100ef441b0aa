//! The kcm binary as an operator runs it: readiness, metrics, leader election, SIGTERM, and
//! the retry curve under API failures.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use kcm_testsupport::{DEADLINE, FAST_LEASE, Kcm, eventually};
use kube::api::{Api, PostParams};
use kube_testserver::{Fault, TestServer};
use serde_json::json;

const LEADER: &str = "leader_election_master_status{name=\"kcm\"}";

/// kcm running ttl under leader election with short lease timings.
fn leader_candidate(server: &TestServer) -> Kcm {
    let mut args = vec!["--controllers=ttl"];
    args.extend(FAST_LEASE);
    Kcm::start(server.kubeconfig_path(), &args)
}

async fn node(server: &TestServer, name: &str) {
    let node: Node = serde_json::from_value(json!({ "metadata": { "name": name } })).unwrap();
    Api::<Node>::all(server.client())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
}

async fn lease_holder(server: &TestServer) -> Option<String> {
    let lease = Api::<Lease>::namespaced(server.client(), "kube-system")
        .get_opt("kcm")
        .await
        .unwrap()?;
    lease
        .spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

#[tokio::test]
async fn readyz_waits_for_stores_and_metrics_expose_the_families() {
    let server = TestServer::start().await;
    node(&server, "n1").await;
    // The node stream and list fail until cleared: the leader cannot be ready before its
    // store syncs.
    for verb in ["list", "watch"] {
        server.inject(Fault::error(500).verb(verb).resource("nodes"));
    }
    let kcm = leader_candidate(&server);
    eventually("kcm leads", DEADLINE, || async {
        kcm.metric(LEADER).await == Some(1.0)
    })
    .await;
    // Not ready from the start of leadership: first the controllers start, then the store
    // they registered stays unsynced while its list fails.
    eventually(
        "not ready: the node store has not synced",
        DEADLINE,
        || async {
            let (code, body) = kcm.get("/readyz").await.unwrap();
            assert_ne!(code, 200, "ready before the node store synced");
            (code, body.as_str()) == (503, "stores not synced: nodes")
        },
    )
    .await;
    assert_eq!(kcm.get("/livez").await.unwrap().0, 200);
    assert_eq!(kcm.get("/healthz").await.unwrap().0, 200);

    server.faults().clear();
    eventually("ready", DEADLINE, || async {
        kcm.get("/readyz").await.is_some_and(|(c, _)| c == 200)
    })
    .await;
    eventually("node annotated", DEADLINE, || async {
        kcm.metric("kcm_api_writes_total{controller=\"ttl-controller\",resource=\"nodes\",result=\"success\",verb=\"patch\"}").await == Some(1.0)
    })
    .await;
    let (_, metrics) = kcm.get("/metrics").await.unwrap();
    for family in [
        "workqueue_adds_total{name=\"ttlcontroller\"}",
        "workqueue_depth{name=\"ttlcontroller\"}",
        "workqueue_queue_duration_seconds_bucket{name=\"ttlcontroller\"",
        "workqueue_work_duration_seconds_bucket{name=\"ttlcontroller\"",
        "workqueue_retries_total{name=\"ttlcontroller\"}",
        "workqueue_unfinished_work_seconds{name=\"ttlcontroller\"}",
        "workqueue_longest_running_processor_seconds{name=\"ttlcontroller\"}",
        "kcm_reconcile_total{controller=\"ttl-controller\",result=\"success\"}",
        "kcm_reconcile_duration_seconds_bucket{controller=\"ttl-controller\"",
        "kcm_store_objects{resource=\"nodes\"} 1",
        "kcm_watch_errors_total{resource=\"nodes\"}",
        "leader_election_master_status{name=\"kcm\"} 1",
    ] {
        assert!(
            metrics.contains(family),
            "/metrics lacks {family}:\n{metrics}"
        );
    }
}

#[tokio::test]
async fn one_of_two_leads_and_the_other_takes_over_when_it_dies() {
    let server = TestServer::start().await;
    let first = leader_candidate(&server);
    eventually("first leads", DEADLINE, || async {
        first.metric(LEADER).await == Some(1.0)
    })
    .await;
    let second = leader_candidate(&server);
    eventually("second serves metrics", DEADLINE, || async {
        second.metric(LEADER).await.is_some()
    })
    .await;
    let holder = lease_holder(&server).await.expect("lease held");
    // Several retry periods pass with the first renewing; the second never leads.
    let renewals_before =
        server.count(|r| r.is("update", "leases", "") && r.user_agent.contains(&holder));
    eventually("first renewed a few times", DEADLINE, || async {
        server.count(|r| r.is("update", "leases", "") && r.user_agent.contains(&holder))
            >= renewals_before + 4
    })
    .await;
    assert_eq!(second.metric(LEADER).await, Some(0.0));
    assert_eq!(
        lease_holder(&server).await.as_deref(),
        Some(holder.as_str())
    );

    let mut first = first;
    first.signal("KILL");
    let killed = Instant::now();
    eventually("second takes over", DEADLINE, || async {
        second.metric(LEADER).await == Some(1.0)
    })
    .await;
    let handover = killed.elapsed();
    println!("handover after SIGKILL took {handover:?} (lease 2s + retry 250ms)");
    assert!(
        handover < Duration::from_secs(6),
        "handover took {handover:?}"
    );
    assert_ne!(lease_holder(&server).await, Some(holder));
    assert!(first.wait_exit(DEADLINE).await.is_some());
}

#[tokio::test]
async fn sigterm_releases_the_lease_and_exits_zero() {
    let server = TestServer::start().await;
    let mut kcm = leader_candidate(&server);
    eventually("kcm leads", DEADLINE, || async {
        kcm.metric(LEADER).await == Some(1.0)
    })
    .await;
    assert!(lease_holder(&server).await.is_some());
    kcm.signal("TERM");
    let status = kcm
        .wait_exit(DEADLINE)
        .await
        .expect("kcm exits after SIGTERM");
    assert_eq!(status.code(), Some(0));
    assert_eq!(lease_holder(&server).await, None, "the lease was released");
}

#[tokio::test]
async fn failed_writes_are_retried_on_client_go_backoff_curve() {
    let server = TestServer::start().await;
    node(&server, "n1").await;
    server.inject(Fault::error(500).verb("patch").resource("nodes"));
    let kcm = Kcm::start(
        server.kubeconfig_path(),
        &["--controllers=ttl", "--leader-elect=false"],
    );
    eventually("seven attempts", DEADLINE, || async {
        server.count(|r| r.is("patch", "nodes", "")) >= 7
    })
    .await;
    let times: Vec<Instant> = server
        .requests()
        .iter()
        .filter(|r| r.is("patch", "nodes", ""))
        .map(|r| r.at)
        .collect();
    // Retry n waits at least 5 ms · 2^(n-1): a lower bound that holds however slow the machine.
    for (n, pair) in times.windows(2).enumerate().take(6) {
        let gap = pair[1] - pair[0];
        let floor = Duration::from_millis(5 << n);
        assert!(
            gap >= floor,
            "retry {} came after {gap:?}, before its backoff {floor:?}",
            n + 1
        );
    }
    let retries = kcm
        .metric("workqueue_retries_total{name=\"ttlcontroller\"}")
        .await
        .unwrap_or(0.0);
    assert!(retries >= 6.0, "retries counted: {retries}");
    assert!(
        kcm.metric("kcm_reconcile_total{controller=\"ttl-controller\",result=\"error\"}")
            .await
            .unwrap_or(0.0)
            >= 6.0
    );
    server.faults().clear();
    eventually("annotated after the faults stop", DEADLINE, || async {
        let node = Api::<Node>::all(server.client()).get("n1").await.unwrap();
        node.metadata
            .annotations
            .unwrap_or_default()
            .get("node.alpha.kubernetes.io/ttl")
            .map(String::as_str)
            == Some("0")
    })
    .await;
}

#[tokio::test]
async fn the_claim_controller_runs_with_podgroup_claims_on() {
    let server = TestServer::start_with(kube_testserver::Options {
        pod_groups: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let kcm = Kcm::start(
        server.kubeconfig_path(),
        &[
            "--controllers=resource-claim-controller",
            // DRAWorkloadResourceClaims depends on GenericWorkload, as upstream.
            "--feature-gates=GenericWorkload=true,DRAWorkloadResourceClaims=true",
            "--leader-elect=false",
        ],
    );
    eventually("resourceclaim-controller starts", DEADLINE, || async {
        let log = kcm.log();
        log.contains("starting controller") && log.contains("resourceclaim-controller")
    })
    .await;
    // It watches PodGroups, and still makes a pod's own template claims.
    eventually("PodGroups are watched", DEADLINE, || async {
        server.count(|r| r.user_agent.contains("kcm/") && r.is("watch", "podgroups", "")) > 0
    })
    .await;
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(server.client(), "default");
    let template: ResourceClaimTemplate =
        serde_json::from_value(json!({ "metadata": { "name": "t" }, "spec": { "spec": {} } }))
            .unwrap();
    templates
        .create(&Default::default(), &template)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "p" },
        "spec": { "containers": [{ "name": "c", "image": "i" }],
                  "resourceClaims": [{ "name": "gpu", "resourceClaimTemplateName": "t" }] }
    }))
    .unwrap();
    pods.create(&Default::default(), &pod).await.unwrap();
    eventually("the pod's claim is recorded", DEADLINE, || async {
        let pod = pods.get("p").await.unwrap();
        pod.status
            .and_then(|s| s.resource_claim_statuses)
            .is_some_and(|s| s.len() == 1 && s[0].resource_claim_name.is_some())
    })
    .await;
}

#[tokio::test]
async fn losing_the_lease_stops_kcm_with_a_non_zero_exit() {
    let server = TestServer::start().await;
    let mut kcm = leader_candidate(&server);
    eventually("kcm leads", DEADLINE, || async {
        kcm.metric(LEADER).await == Some(1.0)
    })
    .await;
    // The API server stops accepting the renewals.
    server.inject(Fault::error(500).resource("leases"));
    let status = kcm
        .wait_exit(DEADLINE)
        .await
        .expect("kcm exits after losing the lease");
    assert_eq!(status.code(), Some(1));
    assert!(kcm.log().contains("leader election"), "{}", kcm.log());
}

/// kcm's JSON log lines.
fn json_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Runs kcm with `args` against a port where nothing listens until its first outage summary,
/// and checks what the operator reads: the server's address and the cause, once, then the
/// summary; no line from kube's client; a bounded number of lines in all.
async fn unreachable_is_one_outage(args: &[&str]) {
    let (port, _dir, kubeconfig) = kcm_testsupport::kubeconfig_for_a_closed_port();
    let server = format!("http://127.0.0.1:{port}");
    let mut all = vec!["--log-format=json"];
    all.extend(args);
    let kcm = Kcm::start(&kubeconfig, &all);
    let summary = format!("API server {server} unreachable for ");
    eventually("the outage summary", DEADLINE, || async {
        kcm.log().contains(&summary)
    })
    .await;

    let lines = json_lines(&kcm.log());
    let from_builder: Vec<_> = lines
        .iter()
        .filter(|l| l["target"] == "kube_client::client::builder")
        .collect();
    assert!(from_builder.is_empty(), "{from_builder:?}");
    let problems: Vec<String> = lines
        .iter()
        .filter(|l| l["level"] == "WARN" || l["level"] == "ERROR")
        .map(|l| {
            l["fields"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        // The test's plain-HTTP listener is warned about; not a connection matter.
        .filter(|m| !m.starts_with("serving /metrics"))
        .collect();
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert_eq!(
        problems[0],
        format!("API server {server} unreachable: connection refused")
    );
    let (seconds, rest) = problems[1]
        .strip_prefix(&summary)
        .and_then(|s| s.split_once("s ("))
        .unwrap_or_else(|| panic!("{}", problems[1]));
    assert!(seconds.parse::<u64>().unwrap() >= 5, "{}", problems[1]);
    assert!(
        rest.ends_with(" failed requests): connection refused"),
        "{}",
        problems[1]
    );
    // Startup lines, the outage line and its summary: nothing per failed request.
    assert!(lines.len() <= 12, "{} lines:\n{}", lines.len(), kcm.log());
}

#[tokio::test]
async fn an_unreachable_server_without_leader_election_is_named_once_then_summarized() {
    unreachable_is_one_outage(&["--leader-elect=false"]).await;
}

#[tokio::test]
async fn an_unreachable_server_while_acquiring_the_lease_is_named_once_then_summarized() {
    let mut args = vec!["--controllers=ttl"];
    args.extend(FAST_LEASE);
    unreachable_is_one_outage(&args).await;
}

#[tokio::test]
async fn without_leader_election_no_leader_status_is_exported() {
    let server = TestServer::start().await;
    let kcm = Kcm::start(
        server.kubeconfig_path(),
        &["--controllers=ttl", "--leader-elect=false"],
    );
    eventually("leading", DEADLINE, || async {
        kcm.metric("kcm_replica_state{state=\"leader\"}").await == Some(1.0)
    })
    .await;
    let (_, metrics) = kcm.get("/metrics").await.unwrap();
    // As upstream: the series exists only with leader election on.
    assert!(
        !metrics.contains("leader_election_master_status"),
        "{metrics}"
    );
}
