//! resourcequota-controller against kube-testserver.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kcm_testsupport::{DEADLINE, InProcess, eventually};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube_testserver::{Fault, Options, ResourceType, TestServer};
use serde_json::{Value, json};

const NS: &str = "default";

fn seed_pod(server: &TestServer, name: &str, cpu: &str, memory: &str) {
    server
        .seed(json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name, "namespace": NS },
            "spec": { "containers": [{ "name": "c", "image": "i", "resources": { "requests": { "cpu": cpu, "memory": memory } } }] },
            "status": { "phase": "Running" } }))
        .unwrap();
}

async fn create_quota(api: &Api<ResourceQuota>, name: &str, hard: Value) {
    let quota: ResourceQuota =
        serde_json::from_value(json!({ "metadata": { "name": name }, "spec": { "hard": hard } }))
            .unwrap();
    api.create(&PostParams::default(), &quota).await.unwrap();
}

/// status.used as exact strings.
async fn used(api: &Api<ResourceQuota>, name: &str) -> BTreeMap<String, String> {
    let quota = api.get(name).await.unwrap();
    quota
        .status
        .and_then(|s| s.used)
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn wait_used(api: &Api<ResourceQuota>, name: &str, want: BTreeMap<String, String>) {
    let mut last = BTreeMap::new();
    let found = tokio::time::timeout(DEADLINE, async {
        loop {
            last = used(api, name).await;
            if last == want {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(found.is_ok(), "{name}: wanted {want:?}, last saw {last:?}");
}

fn kcm_quota_writes(server: &TestServer) -> usize {
    server.count(|r| r.user_agent.contains("kcm/") && r.is("update", "resourcequotas", "status"))
}

#[tokio::test]
async fn status_follows_pods_with_canonical_quantities() {
    let server = TestServer::start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), NS);
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    seed_pod(&server, "a", "100m", "1Gi");
    seed_pod(&server, "b", "900m", "512Mi");
    let kcm = InProcess::start(&server, &["--controllers=resourcequota"]).await;
    create_quota(&quotas, "q", json!({ "requests.cpu": "2", "requests.memory": "4Gi", "pods": "10", "count/pods": "10", "configmaps": "5" })).await;
    wait_used(
        &quotas,
        "q",
        map(&[
            ("configmaps", "0"),
            ("count/pods", "2"),
            ("pods", "2"),
            ("requests.cpu", "1"),
            ("requests.memory", "1536Mi"),
        ]),
    )
    .await;
    let hard = quotas.get("q").await.unwrap().status.unwrap().hard.unwrap();
    assert_eq!(hard["requests.cpu"].0, "2");

    seed_pod(&server, "c", "500m", "128Mi");
    wait_used(
        &quotas,
        "q",
        map(&[
            ("configmaps", "0"),
            ("count/pods", "3"),
            ("pods", "3"),
            ("requests.cpu", "1500m"),
            ("requests.memory", "1664Mi"),
        ]),
    )
    .await;
    // A finished pod keeps counting only in count/pods.
    pods.patch_status(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": { "phase": "Succeeded" } })),
    )
    .await
    .unwrap();
    wait_used(
        &quotas,
        "q",
        map(&[
            ("configmaps", "0"),
            ("count/pods", "3"),
            ("pods", "2"),
            ("requests.cpu", "1"),
            ("requests.memory", "1536Mi"),
        ]),
    )
    .await;
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    wait_used(
        &quotas,
        "q",
        map(&[
            ("configmaps", "0"),
            ("count/pods", "2"),
            ("pods", "1"),
            ("requests.cpu", "900m"),
            ("requests.memory", "512Mi"),
        ]),
    )
    .await;

    // Nothing changes for the quota: nothing is written.
    let writes = kcm_quota_writes(&server);
    let reconciles = kcm
        .metric("kcm_reconcile_total{controller=\"resourcequota-controller\",result=\"success\"}")
        .await
        .unwrap_or(0.0);
    pods.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": { "x": "y" } } })),
    )
    .await
    .unwrap();
    // d appears, is marked deleted (a pod is, before it goes) and goes. A finalizer holds it
    // at the mark, so each step is seen on its own: its deletion at grace 0 takes it out of
    // `pods` at once, its removal out of `count/pods`.
    seed_pod(&server, "d", "0", "0");
    let hold = |finalizers: Value| {
        let pods = &pods;
        async move {
            let patch = Patch::Merge(json!({ "metadata": { "finalizers": finalizers } }));
            pods.patch("d", &PatchParams::default(), &patch).await
        }
    };
    hold(json!(["example.com/hold"])).await.unwrap();
    let with_d = |count: &'static str, pods: &'static str| {
        map(&[
            ("configmaps", "0"),
            ("count/pods", count),
            ("pods", pods),
            ("requests.cpu", "900m"),
            ("requests.memory", "512Mi"),
        ])
    };
    wait_used(&quotas, "q", with_d("3", "2")).await;
    pods.delete("d", &DeleteParams::default()).await.unwrap();
    wait_used(&quotas, "q", with_d("3", "1")).await;
    hold(Value::Null).await.unwrap();
    eventually("re-synced", DEADLINE, || async {
        kcm.metric(
            "kcm_reconcile_total{controller=\"resourcequota-controller\",result=\"success\"}",
        )
        .await
        .unwrap_or(0.0)
            > reconciles + 1.0
    })
    .await;
    wait_used(&quotas, "q", with_d("2", "1")).await;
    assert_eq!(
        kcm_quota_writes(&server),
        writes + 3,
        "one write for d appearing, one for its deletion mark, one for it going; none for the label"
    );
    kcm.stop().await;
}

#[tokio::test]
async fn a_changed_limit_goes_through_the_priority_lane() {
    let server = TestServer::start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), NS);
    let kcm = InProcess::start(&server, &["--controllers=resourcequota"]).await;
    create_quota(&quotas, "q", json!({ "pods": "10" })).await;
    wait_used(&quotas, "q", map(&[("pods", "0")])).await;
    let before = kcm
        .metric("workqueue_adds_total{name=\"resourcequota_priority\"}")
        .await
        .unwrap_or(0.0);
    quotas
        .patch(
            "q",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "hard": { "pods": "20", "services": "3" } } })),
        )
        .await
        .unwrap();
    wait_used(&quotas, "q", map(&[("pods", "0"), ("services", "0")])).await;
    assert_eq!(
        quotas.get("q").await.unwrap().status.unwrap().hard.unwrap()["pods"].0,
        "20"
    );
    assert!(
        kcm.metric("workqueue_adds_total{name=\"resourcequota_priority\"}")
            .await
            .unwrap_or(0.0)
            > before
    );
    kcm.stop().await;
}

fn widgets() -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

async fn create_widget(server: &TestServer, name: &str) {
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), NS, &widgets());
    let obj: DynamicObject = serde_json::from_value(
        json!({ "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": name } }),
    )
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

#[tokio::test]
async fn counts_a_type_registered_at_run_time_and_survives_its_failures() {
    let server = TestServer::start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), NS);
    let kcm = InProcess::start(&server, &["--controllers=resourcequota"]).await;
    // The type appears after kcm started.
    server.store().register(ResourceType::custom(
        "example.com",
        "v1",
        "widgets",
        "Widget",
    ));
    create_widget(&server, "w1").await;
    create_quota(
        &quotas,
        "q",
        json!({ "count/widgets.example.com": "5", "pods": "3" }),
    )
    .await;
    wait_used(
        &quotas,
        "q",
        map(&[("count/widgets.example.com", "1"), ("pods", "0")]),
    )
    .await;
    create_widget(&server, "w2").await;
    wait_used(
        &quotas,
        "q",
        map(&[("count/widgets.example.com", "2"), ("pods", "0")]),
    )
    .await;

    // A second type whose stream and list keep failing: the quota's other names are still
    // written, the count is left out, and the sync is retried until the list works.
    gadgets_failing(&server);
    create_quota(
        &quotas,
        "q2",
        json!({ "count/gadgets.example.com": "5", "pods": "3" }),
    )
    .await;
    wait_used(&quotas, "q2", map(&[("pods", "0")])).await;
    eventually("the failing count is retried", DEADLINE, || async {
        kcm.metric("workqueue_retries_total{name=\"resourcequota_priority\"}")
            .await
            .unwrap_or(0.0)
            + kcm
                .metric("workqueue_retries_total{name=\"resourcequota_primary\"}")
                .await
                .unwrap_or(0.0)
            >= 1.0
    })
    .await;
    server.faults().clear();
    wait_used(
        &quotas,
        "q2",
        map(&[("count/gadgets.example.com", "0"), ("pods", "0")]),
    )
    .await;
    kcm.stop().await;
}

/// The quota controller's discovery of countable types (every 30 s) asks `/api` and `/apis`
/// for aggregated discovery, two requests as client-go's discovery makes them, instead of
/// one per group/version; a server without aggregated discovery gets the legacy requests,
/// and the count is the same either way.
#[tokio::test]
async fn quota_discovery_is_aggregated_and_falls_back_to_the_legacy_documents() {
    for aggregated in [true, false] {
        let server = TestServer::start_with(Options {
            aggregated_discovery: aggregated,
            ..Options::default()
        })
        .await
        .unwrap();
        let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), NS);
        server.store().register(ResourceType::custom(
            "example.com",
            "v1",
            "widgets",
            "Widget",
        ));
        let kcm = InProcess::start(&server, &["--controllers=resourcequota"]).await;
        create_widget(&server, "w").await;
        create_quota(&quotas, "q", json!({ "count/widgets.example.com": "5" })).await;
        wait_used(&quotas, "q", map(&[("count/widgets.example.com", "1")])).await;
        kcm.stop().await;

        let quota_discovery: Vec<String> = server
            .requests()
            .into_iter()
            .filter(|r| {
                r.info.verb == "discovery" && r.user_agent.ends_with("/resourcequota-controller")
            })
            .map(|r| r.path)
            .collect();
        // The legacy documents: one per group/version (a startup check of the API the
        // ResourceClaim evaluator reads asks for its own, either way).
        let per_group = |path: &str| path == "/apis/example.com/v1" || path == "/api/v1";
        assert!(
            quota_discovery.iter().any(|p| p == "/apis"),
            "aggregated {aggregated}: {quota_discovery:?}"
        );
        assert_eq!(
            quota_discovery.iter().any(|p| per_group(p)),
            !aggregated,
            "aggregated {aggregated}: {quota_discovery:?}"
        );
    }
}

/// kubernetes#142072: upstream's quota monitor leaves an event handler on the shared
/// informer each time a counted custom resource type goes and comes back (a CRD deleted and
/// re-created), and the handlers pile up. kcm keeps one counter, and so one watch, per
/// counted type however often the type is re-created, and counts the new objects.
#[tokio::test]
async fn a_re_created_custom_resource_type_keeps_one_watch_and_is_counted() {
    let server = TestServer::start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), NS);
    let widget_type = || ResourceType::custom("example.com", "v1", "widgets", "Widget");
    server.store().register(widget_type());
    let kcm = InProcess::start(&server, &["--controllers=resourcequota"]).await;
    create_widget(&server, "w").await;
    create_quota(&quotas, "q", json!({ "count/widgets.example.com": "5" })).await;
    wait_used(&quotas, "q", map(&[("count/widgets.example.com", "1")])).await;
    let watches = server.store().open_watches();

    let widgets: Api<DynamicObject> = Api::namespaced_with(server.client(), NS, &widgets());
    for round in 0..3 {
        // The CRD goes, as the API server deletes one: its objects first, then the type and
        // its watches; then it comes back.
        widgets
            .delete_collection(&DeleteParams::default(), &Default::default())
            .await
            .unwrap();
        wait_used(&quotas, "q", map(&[("count/widgets.example.com", "0")])).await;
        assert!(server.store().unregister("example.com", "widgets"));
        server.store().register(widget_type());
        for i in 0..=round {
            create_widget(&server, &format!("w-{round}-{i}")).await;
        }
        let count = (round + 1).to_string();
        wait_used(&quotas, "q", map(&[("count/widgets.example.com", &count)])).await;
    }
    eventually(
        "one watch per counted type, as before",
        DEADLINE,
        || async { server.store().open_watches() == watches },
    )
    .await;
    kcm.stop().await;
}

/// A custom type `gadgets.example.com` whose lists and watches keep failing (500).
fn gadgets_failing(server: &TestServer) {
    server.store().register(ResourceType::custom(
        "example.com",
        "v1",
        "gadgets",
        "Gadget",
    ));
    for verb in ["list", "watch"] {
        server.inject(Fault::error(500).verb(verb).resource("gadgets"));
    }
}

/// kubernetes#133737 (and #96066): after a restart, upstream waits for every counted type's
/// monitor to sync before any quota worker starts, so one type whose list keeps failing (a
/// broken conversion webhook, an aggregated API down) freezes every quota. kcm starts with
/// that type failing and still keeps the quota's other names right.
#[tokio::test]
async fn a_restart_with_one_counted_type_failing_keeps_the_other_names() {
    let server = TestServer::start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), NS);
    gadgets_failing(&server);
    create_quota(
        &quotas,
        "q",
        json!({ "count/gadgets.example.com": "5", "pods": "3", "requests.cpu": "1" }),
    )
    .await;
    seed_pod(&server, "p", "250m", "1Mi");
    let kcm = InProcess::start(&server, &["--controllers=resourcequota"]).await;
    wait_used(
        &quotas,
        "q",
        map(&[("pods", "1"), ("requests.cpu", "250m")]),
    )
    .await;
    // A pod going away is replenished while the type still fails.
    let pods: Api<Pod> = Api::namespaced(server.client(), NS);
    pods.delete("p", &DeleteParams::default()).await.unwrap();
    wait_used(&quotas, "q", map(&[("pods", "0"), ("requests.cpu", "0")])).await;
    kcm.stop().await;
}

/// Beside upstream (which writes nothing while the type fails), the status kcm would write
/// is a shadow diff labelled with the issue.
#[tokio::test]
async fn shadow_mode_labels_a_quota_kept_while_a_type_fails_with_its_issue() {
    let server = TestServer::start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), NS);
    gadgets_failing(&server);
    create_quota(
        &quotas,
        "q",
        json!({ "count/gadgets.example.com": "5", "pods": "3" }),
    )
    .await;
    let kcm = InProcess::start(
        &server,
        &[
            "--controllers=resourcequota",
            "--shadow",
            "--leader-elect=true",
        ],
    )
    .await;
    let sample = |reason: &str| {
        format!(
            "kcm_shadow_diffs_total{{controller=\"resourcequota-controller\",reason=\"{reason}\",resource=\"resourcequotas/status\"}}"
        )
    };
    eventually("a diff labelled kubernetes#133737", DEADLINE, || async {
        kcm.metric(&sample("kubernetes#133737")).await >= Some(1.0)
    })
    .await;
    assert_eq!(kcm.metric(&sample("unexplained")).await, None);
    assert_eq!(kcm_quota_writes(&server), 0);
    kcm.stop().await;
}

#[tokio::test]
async fn a_conflicting_status_write_is_retried() {
    let server = TestServer::start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), NS);
    server.inject(
        Fault::error(409)
            .verb("update")
            .resource("resourcequotas")
            .subresource("status")
            .times(2),
    );
    let kcm = InProcess::start(&server, &["--controllers=resourcequota"]).await;
    create_quota(&quotas, "q", json!({ "pods": "10" })).await;
    wait_used(&quotas, "q", map(&[("pods", "0")])).await;
    assert_eq!(
        server.count(|r| r.is("update", "resourcequotas", "status") && r.code == 409),
        2
    );
    kcm.stop().await;
}

#[tokio::test]
async fn the_priority_lane_is_not_stuck_behind_a_primary_backlog() {
    let server = TestServer::start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), NS);
    let kcm = InProcess::start(&server, &["--controllers=resourcequota"]).await;
    create_quota(&quotas, "vip", json!({ "pods": "1" })).await;
    wait_used(&quotas, "vip", map(&[("pods", "0")])).await;
    // 60 quotas whose status writes each take 300 ms: the primary lane (5 workers) is busy
    // for seconds once a pod change replenishes them all.
    server.inject(
        Fault::latency(std::time::Duration::from_millis(300))
            .verb("update")
            .resource("resourcequotas")
            .name("bulk-*"),
    );
    for i in 0..60 {
        let quota: ResourceQuota = serde_json::from_value(json!({ "metadata": { "name": format!("bulk-{i}") }, "spec": { "hard": { "pods": "1" } },
            "status": { "hard": { "pods": "1" }, "used": { "pods": "0" } } }))
        .unwrap();
        quotas.create(&PostParams::default(), &quota).await.unwrap();
    }
    eventually("the bulk quotas synced", DEADLINE, || async {
        let list = quotas.list(&Default::default()).await.unwrap();
        list.items
            .iter()
            .all(|q| q.status.as_ref().and_then(|s| s.used.as_ref()).is_some())
    })
    .await;
    seed_pod(&server, "p", "1m", "1Mi");
    eventually("a primary backlog", DEADLINE, || async {
        kcm.metric("workqueue_depth{name=\"resourcequota_primary\"}")
            .await
            .unwrap_or(0.0)
            > 10.0
    })
    .await;
    // The limit changes: the priority lane writes it while the backlog is still there.
    quotas
        .patch(
            "vip",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "hard": { "pods": "5" } } })),
        )
        .await
        .unwrap();
    eventually("vip re-synced", DEADLINE, || async {
        quotas
            .get("vip")
            .await
            .unwrap()
            .status
            .and_then(|s| s.hard)
            .is_some_and(|h| h["pods"].0 == "5")
    })
    .await;
    let backlog = kcm
        .metric("workqueue_depth{name=\"resourcequota_primary\"}")
        .await
        .unwrap_or(0.0);
    assert!(
        backlog > 0.0,
        "the primary lane still had {backlog} quotas waiting"
    );
    kcm.stop().await;
}

/// A pod that arrives while kcm's store still holds the quota without a status (its first
/// status write is not back through the watch yet) is counted once the status arrives, not at
/// the next resync: kcm re-syncs a quota whose watched `status.hard` changed (upstream waits).
#[tokio::test]
async fn a_pod_arriving_before_the_quota_status_is_watched_is_counted() {
    let server = TestServer::start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), NS);
    seed_pod(&server, "a", "100m", "1Gi");
    let kcm = InProcess::start(
        &server,
        &[
            "--controllers=resourcequota",
            "--resource-quota-sync-period=10m",
        ],
    )
    .await;
    // Quota events reach kcm 5 s late from now on: the quota's creation, then kcm's own first
    // status write, which is still on its way when pod b arrives.
    server
        .store()
        .set_watch_delay("", "resourcequotas", std::time::Duration::from_secs(5));
    create_quota(&quotas, "q", json!({ "pods": "10" })).await;
    wait_used(&quotas, "q", map(&[("pods", "1")])).await;
    seed_pod(&server, "b", "100m", "1Gi");
    wait_used(&quotas, "q", map(&[("pods", "2")])).await;
    kcm.stop().await;
}

#[tokio::test]
async fn a_change_undoing_a_status_write_not_yet_watched_is_written() {
    let server = TestServer::start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), NS);
    let kcm = InProcess::start(
        &server,
        &[
            "--controllers=resourcequota",
            "--resource-quota-sync-period=10m",
        ],
    )
    .await;
    create_quota(&quotas, "q", json!({ "pods": "10" })).await;
    wait_used(&quotas, "q", map(&[("pods", "0")])).await;
    // From now on kcm's store sees its own status writes 10 s late: when pod a goes, the
    // stored status still says 0 pods, the value the sync then computes.
    server
        .store()
        .set_watch_delay("", "resourcequotas", std::time::Duration::from_secs(10));
    seed_pod(&server, "a", "100m", "1Gi");
    wait_used(&quotas, "q", map(&[("pods", "1")])).await;
    Api::<Pod>::namespaced(server.client(), NS)
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    wait_used(&quotas, "q", map(&[("pods", "0")])).await;
    kcm.stop().await;
}

/// A quota's status write is a PUT of the whole object, and the API server takes a quota's
/// labels and annotations from that body too: the object kcm stores must keep kubectl's
/// last-applied annotation, or each status write would delete it.
#[tokio::test]
async fn a_status_write_keeps_the_labels_and_the_last_applied_annotation() {
    let server = TestServer::start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(server.client(), NS);
    seed_pod(&server, "a", "100m", "1Gi");
    let applied = r#"{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q","namespace":"default"},"spec":{"hard":{"pods":"10"}}}"#;
    let quota: ResourceQuota = serde_json::from_value(json!({ "metadata": { "name": "q",
        "labels": { "team": "shop" },
        "annotations": { "kubectl.kubernetes.io/last-applied-configuration": applied } },
        "spec": { "hard": { "pods": "10" } } }))
    .unwrap();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    let _kcm = InProcess::start(&server, &["--controllers=resourcequota"]).await;
    wait_used(&quotas, "q", map(&[("pods", "1")])).await;
    let written = quotas.get("q").await.unwrap();
    assert_eq!(
        written.metadata.annotations.unwrap()["kubectl.kubernetes.io/last-applied-configuration"],
        applied
    );
    assert_eq!(written.metadata.labels.unwrap()["team"], "shop");
}
