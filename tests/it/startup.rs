//! What the operator reads at `-v=0` (the default): per controller, one line when its
//! stores have synced and one when its first full pass is done; nothing more while kcm
//! keeps a cluster up to date.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kcm_testsupport::{DEADLINE, FAST_LEASE, InProcess, Kcm, eventually};
use kube::Api;
use kube_testserver::{Fault, TestServer};
use serde_json::{Value, json};

const CONTROLLERS: [&str; 5] = [
    "resourcequota-controller",
    "resourceclaim-controller",
    "disruption-controller",
    "ttl-controller",
    "storageversion-garbage-collector-controller",
];

/// The info lines kcm may log while starting and running normally.
const STARTUP_MESSAGES: [&str; 4] = [
    "serving /metrics, /healthz, /livez, /readyz",
    "starting controller",
    "stores synced",
    "first full pass done",
];

fn node(name: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": name } })
}

/// The JSON log lines with `message`.
fn lines(log: &str, message: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["fields"]["message"] == message)
        .collect()
}

/// One line per controller with `message`: its fields by controller.
fn per_controller(log: &str, message: &str) -> BTreeMap<String, Value> {
    let found = lines(log, message);
    let by: BTreeMap<String, Value> = found
        .iter()
        .map(|l| {
            let name = l["fields"]["controller"].as_str().unwrap_or_default();
            (name.to_string(), l["fields"].clone())
        })
        .collect();
    assert_eq!(
        found.len(),
        by.len(),
        "one {message:?} line per controller:\n{log}"
    );
    by
}

#[tokio::test]
async fn each_controller_logs_synced_stores_and_first_pass_then_stays_quiet() {
    let server = TestServer::start().await;
    for name in ["n1", "n2", "n3"] {
        server.seed(node(name)).unwrap();
    }
    let kcm = Kcm::start(
        server.kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--log-format=json",
            "--feature-gates=StorageVersionAPI=true",
        ],
    );
    eventually("every controller's first full pass", DEADLINE, || async {
        lines(&kcm.log(), "first full pass done").len() == CONTROLLERS.len()
    })
    .await;

    let log = kcm.log();
    let synced = per_controller(&log, "stores synced");
    let passed = per_controller(&log, "first full pass done");
    assert_eq!(synced.keys().collect::<Vec<_>>(), {
        let mut names = CONTROLLERS.to_vec();
        names.sort();
        names
    });
    assert_eq!(
        passed.keys().collect::<Vec<_>>(),
        synced.keys().collect::<Vec<_>>()
    );
    // Objects per store, by the resource's plural.
    assert_eq!(synced["ttl-controller"]["objects"], "nodes=3");
    assert_eq!(
        synced["storageversion-garbage-collector-controller"]["objects"],
        "leases=0 storageversions=0"
    );
    assert_eq!(
        synced["resourceclaim-controller"]["objects"],
        "resourceclaims=0 pods=0 resourceclaimtemplates=0"
    );
    for (controller, fields) in synced.iter().chain(&passed) {
        let seconds: f64 = fields["seconds"].as_str().unwrap().parse().unwrap();
        assert!(seconds >= 0.0, "{controller}: {fields}");
    }
    // The pass comes after the sync.
    for controller in CONTROLLERS {
        let at = |message: &str| {
            log.lines().position(|l| {
                l.contains(&format!("\"message\":\"{message}\""))
                    && l.contains(&format!("\"controller\":\"{controller}\""))
            })
        };
        assert!(
            at("stores synced") < at("first full pass done"),
            "{controller}"
        );
    }

    // Normal operation: a node joins and gets its TTL annotation, with no further line.
    server.seed(node("n4")).unwrap();
    let nodes: Api<Node> = Api::all(server.client());
    eventually("n4 annotated", DEADLINE, || async {
        nodes.get("n4").await.is_ok_and(|n| {
            n.metadata
                .annotations
                .is_some_and(|a| a.contains_key("node.alpha.kubernetes.io/ttl"))
        })
    })
    .await;
    let log = kcm.log();
    let info: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"level\":\"INFO\""))
        .filter(|l| {
            !STARTUP_MESSAGES
                .iter()
                .any(|m| l.contains(&format!("\"message\":\"{m}\"")))
        })
        .collect();
    assert!(
        info.is_empty(),
        "info lines beyond the startup ones:\n{}",
        info.join("\n")
    );
}

/// kcm running disruption and ttl, logging JSON.
fn disruption_and_ttl(kubeconfig: &std::path::Path) -> Kcm {
    Kcm::start(
        kubeconfig,
        &[
            "--leader-elect=false",
            "--log-format=json",
            "--controllers=disruption,ttl",
        ],
    )
}

/// Whether kcm logged that it started `controller`.
fn started(kcm: &Kcm, controller: &str) -> bool {
    lines(&kcm.log(), "starting controller")
        .iter()
        .any(|l| l["fields"]["controller"] == controller)
}

async fn readyz(kcm: &Kcm) -> Option<(u16, String)> {
    kcm.get("/readyz").await
}

/// kcm is not ready, and says it waits for disruption's API.
async fn assert_waiting_for_disruption(kcm: &Kcm) {
    let (code, body) = readyz(kcm).await.unwrap();
    assert_eq!(
        (code, body.as_str()),
        (
            503,
            "waiting for API discovery: disruption-controller (policy/v1)"
        )
    );
}

/// While discovery of policy/v1 cannot answer, ttl runs and kcm is not ready, naming the
/// controller that waits; once discovery answers, disruption starts and kcm is ready.
async fn discovery_failure_delays_the_controller(fault: Fault, lasting: bool) {
    let server = TestServer::start().await;
    server.seed(node("n1")).unwrap();
    server.inject(fault.verb("discovery").user_agent("controller-discovery"));
    let kcm = disruption_and_ttl(server.kubeconfig_path());
    eventually("ttl started and synced", DEADLINE, || async {
        lines(&kcm.log(), "stores synced")
            .iter()
            .any(|l| l["fields"]["controller"] == "ttl-controller")
    })
    .await;
    if lasting {
        assert_waiting_for_disruption(&kcm).await;
        assert!(!started(&kcm, "disruption-controller"), "{}", kcm.log());
        server.faults().clear();
    }
    eventually("disruption started and kcm ready", DEADLINE, || async {
        started(&kcm, "disruption-controller")
            && readyz(&kcm).await.is_some_and(|(code, _)| code == 200)
    })
    .await;
    let log = kcm.log();
    assert!(
        lines(
            &log,
            "the cluster does not serve this API; controller skipped until it does"
        )
        .is_empty(),
        "{log}"
    );
}

#[tokio::test]
async fn discovery_unavailable_503_delays_the_controller_instead_of_dropping_it() {
    discovery_failure_delays_the_controller(Fault::error(503), true).await;
}

#[tokio::test]
async fn discovery_throttled_429_delays_the_controller_instead_of_dropping_it() {
    discovery_failure_delays_the_controller(Fault::error(429).retry_after(1), true).await;
}

#[tokio::test]
async fn one_failed_discovery_500_is_retried() {
    discovery_failure_delays_the_controller(Fault::error(500).times(1), false).await;
}

#[tokio::test]
async fn a_hung_discovery_times_out_and_is_retried() {
    let server = TestServer::start().await;
    server.inject(
        Fault::latency(std::time::Duration::from_secs(120))
            .verb("discovery")
            .user_agent("controller-discovery")
            .times(1),
    );
    let kcm = disruption_and_ttl(server.kubeconfig_path());
    eventually("ttl started", DEADLINE, || async {
        started(&kcm, "ttl-controller")
    })
    .await;
    assert_waiting_for_disruption(&kcm).await;
    // The attempt is cut after 10 s and retried; the hang would last two minutes.
    eventually("disruption started", DEADLINE * 2, || async {
        started(&kcm, "disruption-controller")
    })
    .await;
    let retried = lines(&kcm.log(), "API discovery failed; retrying");
    assert_eq!(retried.len(), 1, "{}", kcm.log());
    assert_eq!(retried[0]["fields"]["error"], "timed out after 10s");
    assert_eq!(retried[0]["fields"]["api"], "policy/v1");
}

#[tokio::test]
async fn a_server_that_starts_late_gets_every_controller() {
    let (port, _dir, kubeconfig) = kcm_testsupport::kubeconfig_for_a_closed_port();
    let kcm = disruption_and_ttl(&kubeconfig);
    let refused = format!("API server http://127.0.0.1:{port} unreachable: connection refused");
    eventually("kcm finds nothing listening", DEADLINE, || async {
        !lines(&kcm.log(), &refused).is_empty()
    })
    .await;
    assert_waiting_for_disruption(&kcm).await;

    let _server = TestServer::start_with(kube_testserver::Options {
        port,
        ..Default::default()
    })
    .await
    .unwrap();
    eventually("disruption started and kcm ready", DEADLINE, || async {
        started(&kcm, "disruption-controller")
            && readyz(&kcm).await.is_some_and(|(code, _)| code == 200)
    })
    .await;
    let log = kcm.log();
    let back: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| {
            l["fields"]["message"].as_str().is_some_and(|m| {
                m.starts_with(&format!(
                    "API server http://127.0.0.1:{port} reachable again after"
                ))
            })
        })
        .collect();
    assert_eq!(back.len(), 1, "{log}");
}

#[tokio::test]
async fn a_group_served_after_start_starts_its_controller() {
    let server = TestServer::start().await;
    let pdbs = server
        .store()
        .resource_type("policy", "poddisruptionbudgets")
        .unwrap();
    assert!(server.store().unregister("policy", "poddisruptionbudgets"));
    let kcm = disruption_and_ttl(server.kubeconfig_path());
    // Definitely not served: skipped, and kcm is ready with ttl alone.
    eventually("disruption skipped and kcm ready", DEADLINE, || async {
        readyz(&kcm).await.is_some_and(|(code, _)| code == 200)
    })
    .await;
    let skipped = lines(
        &kcm.log(),
        "the cluster does not serve this API; controller skipped until it does",
    );
    assert_eq!(skipped.len(), 1, "{}", kcm.log());
    assert_eq!(skipped[0]["fields"]["controller"], "disruption-controller");
    assert_eq!(skipped[0]["fields"]["api"], "policy/v1");
    assert!(!started(&kcm, "disruption-controller"));

    server.store().register(pdbs);
    eventually("disruption started", DEADLINE, || async {
        started(&kcm, "disruption-controller")
    })
    .await;
    assert!(
        !lines(&kcm.log(), "the cluster now serves the controller's API").is_empty(),
        "{}",
        kcm.log()
    );
    // Its stores sync and it works: a PDB gets its status.
    server
        .seed(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": { "name": "pdb", "namespace": "default", "generation": 1 },
            "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "a" } } },
        }))
        .unwrap();
    let api: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(server.client(), "default");
    eventually("PDB status written", DEADLINE, || async {
        api.get("pdb")
            .await
            .is_ok_and(|p| p.status.is_some_and(|s| s.observed_generation == Some(1)))
    })
    .await;
}

/// The lease is renewed while controllers are still being started (here paced by
/// `--controller-start-interval`: quota and ttl, which need no discovery, take at least 2 x 5 s
/// to start), so a slow start never lets a standby take the lease from a running leader.
#[tokio::test]
async fn the_lease_is_renewed_while_controllers_are_still_starting() {
    let server = TestServer::start().await;
    let args = [
        &["--leader-elect=true", "--controller-start-interval=5s"][..],
        &FAST_LEASE,
    ]
    .concat();
    let kcm = InProcess::start(&server, &args).await;
    let renewals = || {
        server
            .requests()
            .into_iter()
            .filter(|r| r.is("update", "leases", "") && r.code == 200)
            .count()
    };
    // Renewals come every retry period (250 ms); the starts alone take 10 s or more.
    eventually(
        "the lease renewed twice while controllers start",
        Duration::from_secs(6),
        || async { renewals() >= 2 },
    )
    .await;
    kcm.stop().await;
}
