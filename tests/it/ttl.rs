//! ttl-controller against kube-testserver, driven through kcm's real startup code.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kcm_testsupport::{DEADLINE, InProcess, eventually};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube_testserver::{Fault, TestServer};
use serde_json::json;

const TTL: &str = "node.alpha.kubernetes.io/ttl";

async fn create_nodes(api: &Api<Node>, range: std::ops::Range<usize>, ttl: Option<&str>) {
    for i in range {
        let mut node = json!({ "metadata": { "name": format!("node-{i:04}") } });
        if let Some(ttl) = ttl {
            node["metadata"]["annotations"] = json!({ TTL: ttl });
        }
        api.create(
            &PostParams::default(),
            &serde_json::from_value(node).unwrap(),
        )
        .await
        .unwrap();
    }
}

/// Annotation value → number of nodes carrying it ("" for none).
async fn ttl_census(api: &Api<Node>) -> BTreeMap<String, usize> {
    let mut census = BTreeMap::new();
    for node in api.list(&ListParams::default()).await.unwrap().items {
        let value = node
            .metadata
            .annotations
            .unwrap_or_default()
            .get(TTL)
            .cloned()
            .unwrap_or_default();
        *census.entry(value).or_default() += 1;
    }
    census
}

async fn wait_census(api: &Api<Node>, value: &str, count: usize) {
    eventually(
        &format!("{count} nodes with ttl {value:?}"),
        DEADLINE,
        || async { ttl_census(api).await == BTreeMap::from([(value.to_string(), count)]) },
    )
    .await;
}

#[tokio::test]
async fn ttl_follows_cluster_size_up_and_down_with_hysteresis() {
    let server = TestServer::start().await;
    let nodes: Api<Node> = Api::all(server.client());
    create_nodes(&nodes, 0..120, None).await;
    let kcm = InProcess::start(&server, &["--controllers=ttl"]).await;
    wait_census(&nodes, "15", 120).await;

    // Down to 90 stays at 15 (hysteresis) …
    for i in 90..120 {
        nodes
            .delete(&format!("node-{i:04}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    create_nodes(&nodes, 200..201, None).await;
    wait_census(&nodes, "15", 91).await;
    // … 89 steps down, and every node follows, not only the ones that changed.
    nodes
        .delete("node-0200", &DeleteParams::default())
        .await
        .unwrap();
    nodes
        .delete("node-0089", &DeleteParams::default())
        .await
        .unwrap();
    wait_census(&nodes, "0", 89).await;
    kcm.stop().await;
}

fn kcm_node_writes(server: &TestServer) -> usize {
    server.count(|r| r.is_write() && r.info.resource == "nodes" && r.user_agent.contains("kcm/"))
}

/// kubernetes#109779: a cluster grown past 100 nodes (TTL 15) and shrunk to 95 is inside the
/// overlap where both steps hold. Upstream restarts at step 0 and patches all 95 nodes to 0;
/// kcm recovers the step the nodes agree on and writes nothing.
#[tokio::test]
async fn a_restart_inside_the_hysteresis_band_keeps_the_ttl_and_writes_nothing() {
    let server = TestServer::start().await;
    let nodes: Api<Node> = Api::all(server.client());
    create_nodes(&nodes, 0..101, None).await;
    let kcm = InProcess::start(&server, &["--controllers=ttl"]).await;
    wait_census(&nodes, "15", 101).await;
    for i in 95..101 {
        nodes
            .delete(&format!("node-{i:04}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    wait_census(&nodes, "15", 95).await;
    kcm.stop().await;

    let writes_before = kcm_node_writes(&server);
    let kcm = InProcess::start(&server, &["--controllers=ttl"]).await;
    eventually(
        "every node reconciled after the restart",
        DEADLINE,
        || async {
            kcm.metric("kcm_reconcile_total{controller=\"ttl-controller\",result=\"success\"}")
                .await
                >= Some(95.0)
        },
    )
    .await;
    assert_eq!(kcm_node_writes(&server), writes_before, "no node written");
    assert_eq!(
        ttl_census(&nodes).await,
        BTreeMap::from([("15".to_string(), 95)])
    );
    // The hysteresis goes on from there: at 89 nodes every node steps down to 0.
    for i in 89..95 {
        nodes
            .delete(&format!("node-{i:04}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    wait_census(&nodes, "0", 89).await;
    kcm.stop().await;
}

/// Beside upstream: 94 nodes say 15 and a new one says nothing. kcm keeps 15 and would give
/// the new node 15, where upstream, counting from 0 after its restart, wants 0: that
/// difference is counted with its issue, not as unexplained.
#[tokio::test]
async fn shadow_mode_labels_a_kept_step_with_its_issue() {
    let server = TestServer::start().await;
    let nodes: Api<Node> = Api::all(server.client());
    create_nodes(&nodes, 0..94, Some("15")).await;
    create_nodes(&nodes, 94..95, None).await;
    let kcm = InProcess::start(
        &server,
        &["--controllers=ttl", "--shadow", "--leader-elect=true"],
    )
    .await;
    let sample = |reason: &str| {
        format!(
            "kcm_shadow_diffs_total{{controller=\"ttl-controller\",reason=\"{reason}\",resource=\"nodes\"}}"
        )
    };
    eventually("the new node's diff, labelled", DEADLINE, || async {
        kcm.metric(&sample("kubernetes#109779")).await == Some(1.0)
    })
    .await;
    eventually("every node reconciled", DEADLINE, || async {
        kcm.metric("kcm_reconcile_total{controller=\"ttl-controller\",result=\"success\"}")
            .await
            >= Some(95.0)
    })
    .await;
    assert_eq!(kcm.metric(&sample("unexplained")).await, None);
    assert_eq!(kcm_node_writes(&server), 0);
    kcm.stop().await;
}

#[tokio::test]
async fn garbage_annotations_are_fixed_and_correct_nodes_are_not_patched() {
    let server = TestServer::start().await;
    let nodes: Api<Node> = Api::all(server.client());
    create_nodes(&nodes, 0..3, Some("0")).await;
    let bad = json!({ "metadata": { "name": "bad", "annotations": { TTL: "abc" } } });
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(bad).unwrap(),
        )
        .await
        .unwrap();
    let kcm = InProcess::start(&server, &["--controllers=ttl"]).await;
    wait_census(&nodes, "0", 4).await;
    // Every node was reconciled (4 adds + the update that the fix caused) …
    eventually("all nodes reconciled", DEADLINE, || async {
        kcm.metric("kcm_reconcile_total{controller=\"ttl-controller\",result=\"success\"}")
            .await
            .unwrap_or(0.0)
            >= 5.0
    })
    .await;
    // … and exactly one patch was sent: to the bad node.
    let patches: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.is_write() && r.user_agent.contains("kcm/"))
        .map(|r| format!("{} {}", r.info.verb, r.info.name))
        .collect();
    assert_eq!(patches, vec!["patch bad"]);
    assert_eq!(kcm.metric("kcm_skipped_objects_total{controller=\"ttl-controller\",reason=\"invalid-ttl-annotation\"}").await, Some(1.0));
    kcm.stop().await;
}

#[tokio::test]
async fn node_count_survives_a_dropped_watch_and_a_410_relist() {
    let server = TestServer::start().await;
    let nodes: Api<Node> = Api::all(server.client());
    create_nodes(&nodes, 0..101, None).await;
    let kcm = InProcess::start(&server, &["--controllers=ttl"]).await;
    wait_census(&nodes, "15", 101).await;

    // The watch goes away while 12 nodes are deleted and history is compacted: kcm only
    // learns of the deletes from the relist.
    server.inject(Fault::error(500).verb("watch").resource("nodes"));
    server.store().drop_watches();
    for i in 0..12 {
        nodes
            .delete(&format!("node-{i:04}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    server.store().compact();
    eventually("kcm retried its watch", DEADLINE, || async {
        server.count(|r| r.is("watch", "nodes", "") && r.code == 500) > 0
    })
    .await;
    server.faults().clear();
    wait_census(&nodes, "0", 89).await;
    kcm.stop().await;
}

#[tokio::test]
async fn a_node_gone_before_its_patch_is_not_retried() {
    let server = TestServer::start().await;
    let nodes: Api<Node> = Api::all(server.client());
    // The patch answers 404, as for a node deleted between the store read and the write.
    server.inject(Fault::error(404).verb("patch").resource("nodes").times(1));
    create_nodes(&nodes, 0..1, None).await;
    let kcm = InProcess::start(&server, &["--controllers=ttl"]).await;
    eventually("the patch was tried", DEADLINE, || async {
        server.count(|r| r.is("patch", "nodes", "")) == 1
    })
    .await;
    eventually("reconcile counted", DEADLINE, || async {
        kcm.metric("kcm_reconcile_total{controller=\"ttl-controller\",result=\"success\"}")
            .await
            == Some(1.0)
    })
    .await;
    assert_eq!(
        kcm.metric("workqueue_retries_total{name=\"ttlcontroller\"}")
            .await,
        Some(0.0)
    );
    assert_eq!(
        kcm.metric("kcm_reconcile_total{controller=\"ttl-controller\",result=\"error\"}")
            .await,
        None
    );
    kcm.stop().await;
}

#[tokio::test]
async fn shadow_mode_writes_nothing_and_counts_each_difference() {
    let server = TestServer::start().await;
    let nodes: Api<Node> = Api::all(server.client());
    create_nodes(&nodes, 0..3, None).await;
    create_nodes(&nodes, 3..5, Some("0")).await;
    let kcm = InProcess::start(
        &server,
        &["--controllers=ttl", "--shadow", "--leader-elect=true"],
    )
    .await;
    eventually("three differences counted", DEADLINE, || async {
        kcm.metric("kcm_shadow_diffs_total{controller=\"ttl-controller\",reason=\"unexplained\",resource=\"nodes\"}")
            .await
            == Some(3.0)
    })
    .await;
    eventually("all five reconciled", DEADLINE, || async {
        kcm.metric("kcm_reconcile_total{controller=\"ttl-controller\",result=\"success\"}")
            .await
            >= Some(5.0)
    })
    .await;
    let kcm_requests: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.user_agent.contains("kcm/") && (r.is_write() || r.info.resource == "leases"))
        .map(|r| format!("{} {}", r.info.verb, r.path))
        .collect();
    assert_eq!(
        kcm_requests,
        Vec::<String>::new(),
        "no writes and no lease in shadow mode"
    );
    assert_eq!(
        ttl_census(&nodes).await,
        BTreeMap::from([(String::new(), 3), ("0".to_string(), 2)])
    );
    kcm.stop().await;
}
