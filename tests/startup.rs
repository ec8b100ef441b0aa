//! What the operator reads at `-v=0` (the default): per controller, one line when its
//! stores have synced and one when its first full pass is done; nothing more while kcm
//! keeps a cluster up to date.

mod common;

use std::collections::BTreeMap;

use common::{DEADLINE, Kcm, eventually};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube_testserver::TestServer;
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
