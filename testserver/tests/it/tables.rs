//! Server-side Tables, as `kubectl get` asks for them: the API server's printer columns and
//! cells for the kinds the kcm demo shows, upstream's default table for the rest; and kubectl
//! itself, when it is installed.

use crate::common;

use std::path::Path;

use kube_testserver::{ResourceType, TestServer};
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

async fn table(server: &TestServer, path: &str) -> Value {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, TABLE)
        .body(Vec::new())
        .unwrap();
    let table: Value = server.client().request(request).await.unwrap();
    assert_eq!(table["kind"], "Table", "{table}");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1", "{table}");
    table
}

/// Column names and priorities, as `(name, priority)`.
fn columns(table: &Value) -> Vec<(String, u64)> {
    table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["priority"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn named(names: &[(&str, u64)]) -> Vec<(String, u64)> {
    names.iter().map(|(n, p)| (n.to_string(), *p)).collect()
}

/// The cells of the row whose object is named `name`.
fn row(table: &Value, name: &str) -> Vec<Value> {
    table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["object"]["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no row for {name} in {table}"))["cells"]
        .as_array()
        .unwrap()
        .clone()
}

/// An age cell of an object created a moment ago.
fn is_fresh_age(cell: &Value) -> bool {
    cell.as_str()
        .and_then(|s| s.strip_suffix('s'))
        .is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n < 60))
}

fn seed(server: &TestServer, obj: Value) -> Value {
    (*server.seed(obj).unwrap()).clone()
}

fn seed_cluster(server: &TestServer) {
    seed(
        server,
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "shop" } }),
    );
    seed(
        server,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "web-1", "namespace": "shop", "labels": { "app": "web" } },
            "spec": { "nodeName": "node-1", "containers": [{ "name": "web", "image": "nginx" }] },
            "status": {
                "phase": "Running", "podIP": "10.0.0.7", "podIPs": [{ "ip": "10.0.0.7" }],
                "conditions": [{ "type": "Ready", "status": "True" }],
                "containerStatuses": [{ "name": "web", "ready": true, "restartCount": 0, "state": { "running": {} } }],
            },
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "web-2", "namespace": "shop" },
            "spec": { "containers": [{ "name": "web", "image": "nginx" }, { "name": "log", "image": "busybox" }] },
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    { "name": "web", "ready": false, "restartCount": 3,
                      "state": { "waiting": { "reason": "CrashLoopBackOff" } },
                      "lastState": { "terminated": { "exitCode": 1, "finishedAt": "2020-01-01T00:00:00Z" } } },
                    { "name": "log", "ready": true, "restartCount": 0, "state": { "running": {} } },
                ],
            },
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "init", "namespace": "shop" },
            "spec": {
                "initContainers": [{ "name": "setup", "image": "busybox" }],
                "containers": [{ "name": "web", "image": "nginx" }],
            },
            "status": { "phase": "Pending", "initContainerStatuses": [{ "name": "setup", "ready": false, "restartCount": 0, "state": { "running": {} } }] },
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": { "name": "node-1", "labels": { "node-role.kubernetes.io/control-plane": "" } },
            "spec": { "unschedulable": true },
            "status": {
                "conditions": [{ "type": "Ready", "status": "True" }],
                "addresses": [{ "type": "InternalIP", "address": "192.168.1.10" }],
                "nodeInfo": { "kubeletVersion": "v1.36.0", "osImage": "Debian GNU/Linux 12", "kernelVersion": "6.1.0",
                              "architecture": "amd64", "containerRuntimeVersion": "containerd://2.0.0" },
            },
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": { "name": "compute", "namespace": "shop" },
            "spec": { "hard": { "pods": "10", "requests.cpu": "2", "limits.memory": "4Gi" } },
            "status": {
                "hard": { "pods": "10", "requests.cpu": "2", "limits.memory": "4Gi" },
                "used": { "pods": "2", "requests.cpu": "100m", "limits.memory": "256Mi" },
            },
        }),
    );
    let pdb = seed(
        server,
        json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": { "name": "web", "namespace": "shop" },
            "spec": { "minAvailable": 2, "selector": { "matchLabels": { "app": "web" } } },
            "status": { "disruptionsAllowed": 3, "currentHealthy": 5, "desiredHealthy": 2, "expectedPods": 5, "observedGeneration": 1 },
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": { "name": "half", "namespace": "shop" },
            "spec": { "maxUnavailable": "50%", "selector": {} },
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": { "name": "gpu", "namespace": "shop" },
            "spec": { "devices": { "requests": [] } },
            "status": {
                "allocation": { "devices": { "results": [] } },
                "reservedFor": [{ "resource": "pods", "name": "web-1", "uid": "u" }],
            },
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": { "name": "waiting", "namespace": "shop" },
            "spec": { "devices": { "requests": [] } },
        }),
    );
    let template = json!({
        "metadata": { "labels": { "app": "web" } },
        "spec": { "containers": [{ "name": "web", "image": "nginx" }, { "name": "log", "image": "busybox" }] },
    });
    seed(
        server,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "web", "namespace": "shop" },
            "spec": { "replicas": 3, "selector": { "matchLabels": { "app": "web" } }, "template": template },
            "status": { "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2, "replicas": 3 },
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": { "name": "web-5d8f", "namespace": "shop" },
            "spec": { "replicas": 3, "selector": { "matchLabels": { "app": "web" } }, "template": template },
            "status": { "replicas": 3, "readyReplicas": 2 },
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": { "name": "web.1", "namespace": "shop" },
            "involvedObject": {
                "kind": "PodDisruptionBudget", "namespace": "shop", "name": "web",
                "uid": pdb["metadata"]["uid"], "apiVersion": "policy/v1",
            },
            "reason": "NoPods", "message": "No matching pods found\n", "type": "Normal",
            "source": { "component": "controllermanager" },
            "firstTimestamp": "2020-01-01T00:00:00Z", "lastTimestamp": "2020-01-01T00:00:00Z", "count": 4,
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": { "name": "node-1.1", "namespace": "default" },
            "eventTime": "2020-01-01T00:00:00.000000Z",
            "reportingController": "ttl-controller", "reportingInstance": "kcm-0",
            "action": "Annotate", "reason": "TTLSet", "note": "ttl 0s",
            "regarding": { "kind": "Node", "name": "node-1" }, "type": "Normal",
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": "token", "namespace": "shop" }, "data": { "a": "eA==", "b": "eQ==" },
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": "reader" }, "rules": [],
        }),
    );
    seed(
        server,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "settings", "namespace": "shop" }, "data": { "k": "v" },
        }),
    );
}

#[tokio::test]
async fn tables_have_the_api_servers_columns_and_cells() {
    let server = TestServer::start().await;
    seed_cluster(&server);

    let pods = table(&server, "/api/v1/namespaces/shop/pods").await;
    assert_eq!(
        columns(&pods),
        named(&[
            ("Name", 0),
            ("Ready", 0),
            ("Status", 0),
            ("Restarts", 0),
            ("Age", 0),
            ("IP", 1),
            ("Node", 1),
            ("Nominated Node", 1),
            ("Readiness Gates", 1),
        ])
    );
    assert_eq!(pods["columnDefinitions"][0]["format"], "name");
    let web1 = row(&pods, "web-1");
    assert_eq!(
        web1[..4],
        [json!("web-1"), json!("1/1"), json!("Running"), json!("0")]
    );
    assert!(is_fresh_age(&web1[4]), "{web1:?}");
    assert_eq!(
        web1[5..],
        [
            json!("10.0.0.7"),
            json!("node-1"),
            json!("<none>"),
            json!("<none>")
        ]
    );
    let web2 = row(&pods, "web-2");
    assert_eq!(web2[1..3], [json!("1/2"), json!("CrashLoopBackOff")]);
    let restarts = web2[3].as_str().unwrap();
    assert!(
        restarts.starts_with("3 (") && restarts.ends_with(" ago)"),
        "{restarts}"
    );
    assert_eq!(row(&pods, "init")[1..3], [json!("0/1"), json!("Init:0/1")]);
    // Rows carry the object's metadata, which kubectl reads the namespace from.
    assert_eq!(pods["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(pods["rows"][0]["object"]["metadata"]["namespace"], "shop");
    assert!(pods["metadata"]["resourceVersion"].is_string());

    let nodes = table(&server, "/api/v1/nodes").await;
    assert_eq!(
        columns(&nodes),
        named(&[
            ("Name", 0),
            ("Status", 0),
            ("Roles", 0),
            ("Age", 0),
            ("Version", 0),
            ("Internal-IP", 1),
            ("External-IP", 1),
            ("OS-Image", 1),
            ("Kernel-Version", 1),
            ("Container-Runtime", 1),
        ])
    );
    let node = row(&nodes, "node-1");
    assert_eq!(
        node[..3],
        [
            json!("node-1"),
            json!("Ready,SchedulingDisabled"),
            json!("control-plane")
        ]
    );
    assert_eq!(
        node[4..],
        [
            json!("v1.36.0"),
            json!("192.168.1.10"),
            json!("<none>"),
            json!("Debian GNU/Linux 12"),
            json!("6.1.0 (amd64)"),
            json!("containerd://2.0.0"),
        ]
    );

    let namespaces = table(&server, "/api/v1/namespaces").await;
    assert_eq!(
        columns(&namespaces),
        named(&[("Name", 0), ("Status", 0), ("Age", 0)])
    );
    assert_eq!(
        row(&namespaces, "shop")[..2],
        [json!("shop"), json!("Active")]
    );

    let quotas = table(&server, "/api/v1/namespaces/shop/resourcequotas").await;
    assert_eq!(
        columns(&quotas),
        named(&[("Name", 0), ("Request", 0), ("Limit", 0), ("Age", 0)])
    );
    assert_eq!(
        row(&quotas, "compute")[..3],
        [
            json!("compute"),
            json!("pods: 2/10, requests.cpu: 100m/2"),
            json!("limits.memory: 256Mi/4Gi")
        ]
    );

    let pdbs = table(
        &server,
        "/apis/policy/v1/namespaces/shop/poddisruptionbudgets",
    )
    .await;
    assert_eq!(
        columns(&pdbs),
        named(&[
            ("Name", 0),
            ("Min Available", 0),
            ("Max Unavailable", 0),
            ("Allowed Disruptions", 0),
            ("Age", 0)
        ])
    );
    assert_eq!(pdbs["columnDefinitions"][3]["type"], "integer");
    assert_eq!(
        row(&pdbs, "web")[..4],
        [json!("web"), json!("2"), json!("N/A"), json!(3)]
    );
    assert_eq!(
        row(&pdbs, "half")[..4],
        [json!("half"), json!("N/A"), json!("50%"), json!(0)]
    );

    let claims = table(
        &server,
        "/apis/resource.k8s.io/v1/namespaces/shop/resourceclaims",
    )
    .await;
    assert_eq!(
        columns(&claims),
        named(&[("Name", 0), ("State", 0), ("Age", 0)])
    );
    assert_eq!(row(&claims, "gpu")[1], json!("allocated,reserved"));
    assert_eq!(row(&claims, "waiting")[1], json!("pending"));

    let deployments = table(&server, "/apis/apps/v1/namespaces/shop/deployments").await;
    assert_eq!(
        columns(&deployments),
        named(&[
            ("Name", 0),
            ("Ready", 0),
            ("Up-to-date", 0),
            ("Available", 0),
            ("Age", 0),
            ("Containers", 1),
            ("Images", 1),
            ("Selector", 1),
        ])
    );
    let web = row(&deployments, "web");
    assert_eq!(web[..4], [json!("web"), json!("2/3"), json!(3), json!(2)]);
    assert_eq!(
        web[5..],
        [json!("web,log"), json!("nginx,busybox"), json!("app=web")]
    );

    let replicasets = table(&server, "/apis/apps/v1/namespaces/shop/replicasets").await;
    assert_eq!(
        columns(&replicasets),
        named(&[
            ("Name", 0),
            ("Desired", 0),
            ("Current", 0),
            ("Ready", 0),
            ("Age", 0),
            ("Containers", 1),
            ("Images", 1),
            ("Selector", 1),
        ])
    );
    let rs = row(&replicasets, "web-5d8f");
    assert_eq!(rs[..4], [json!("web-5d8f"), json!(3), json!(3), json!(2)]);
    assert_eq!(
        rs[5..],
        [json!("web,log"), json!("nginx,busybox"), json!("app=web")]
    );

    let event_columns = named(&[
        ("Last Seen", 0),
        ("Type", 0),
        ("Reason", 0),
        ("Object", 0),
        ("Subobject", 1),
        ("Source", 1),
        ("Message", 0),
        ("First Seen", 1),
        ("Count", 1),
        ("Name", 1),
    ]);
    for path in ["/api/v1/events", "/apis/events.k8s.io/v1/events"] {
        let events = table(&server, path).await;
        assert_eq!(columns(&events), event_columns, "{path}");
        let old = row(&events, "web.1");
        // 2020 is years ago: "6y330d" in late 2026, as HumanDuration prints it.
        assert!(old[0].as_str().unwrap().contains('y'), "{path}: {old:?}");
        assert_eq!(
            old[1..],
            [
                json!("Normal"),
                json!("NoPods"),
                json!("poddisruptionbudget/web"),
                json!(""),
                json!("controllermanager"),
                json!("No matching pods found"),
                old[0].clone(),
                json!(4),
                json!("web.1"),
            ],
            "{path}"
        );
        let new = row(&events, "node-1.1");
        assert_eq!(
            new[1..],
            [
                json!("Normal"),
                json!("TTLSet"),
                json!("node/node-1"),
                json!(""),
                json!("ttl-controller, kcm-0"),
                json!("ttl 0s"),
                new[0].clone(),
                json!(1),
                json!("node-1.1"),
            ],
            "{path}"
        );
    }

    let configmaps = table(&server, "/api/v1/namespaces/shop/configmaps").await;
    assert_eq!(
        columns(&configmaps),
        named(&[("Name", 0), ("Data", 0), ("Age", 0)])
    );
    assert_eq!(
        row(&configmaps, "settings")[..2],
        [json!("settings"), json!(1)]
    );
    let secrets = table(&server, "/api/v1/namespaces/shop/secrets").await;
    assert_eq!(
        columns(&secrets),
        named(&[("Name", 0), ("Type", 0), ("Data", 0), ("Age", 0)])
    );
    assert_eq!(
        row(&secrets, "token")[..3],
        [json!("token"), json!("Opaque"), json!(2)]
    );

    // A type without a printer gets the default table: Name and Created At.
    let roles = table(&server, "/apis/rbac.authorization.k8s.io/v1/clusterroles").await;
    assert_eq!(columns(&roles), named(&[("Name", 0), ("Created At", 0)]));
    assert_eq!(roles["columnDefinitions"][1]["type"], "date");
    let reader = row(&roles, "reader");
    let created = reader[1].as_str().unwrap();
    assert!(
        created.parse::<jiff::Timestamp>().is_ok() && created.ends_with('Z'),
        "{created}"
    );
}

#[tokio::test]
async fn tables_of_one_object_custom_types_and_include_object() {
    let server = TestServer::start().await;
    seed_cluster(&server);
    let one = table(
        &server,
        "/apis/policy/v1/namespaces/shop/poddisruptionbudgets/web",
    )
    .await;
    assert_eq!(one["rows"].as_array().unwrap().len(), 1);
    assert_eq!(row(&one, "web")[3], json!(3));

    let full = table(
        &server,
        "/api/v1/namespaces/shop/pods/web-1?includeObject=Object",
    )
    .await;
    assert_eq!(full["rows"][0]["object"]["kind"], "Pod");
    assert_eq!(full["rows"][0]["object"]["spec"]["nodeName"], "node-1");
    let bare = table(
        &server,
        "/api/v1/namespaces/shop/pods/web-1?includeObject=None",
    )
    .await;
    assert!(bare["rows"][0].get("object").is_none(), "{bare}");

    server.store().register(ResourceType::custom(
        "example.com",
        "v1",
        "widgets",
        "Widget",
    ));
    seed(
        &server,
        json!({ "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": "w", "namespace": "shop" } }),
    );
    let widgets = table(&server, "/apis/example.com/v1/namespaces/shop/widgets").await;
    assert_eq!(columns(&widgets), named(&[("Name", 0), ("Age", 0)]));
    assert_eq!(widgets["columnDefinitions"][1]["type"], "date");

    let request = http::Request::get("/api/v1/namespaces/shop/pods?includeObject=All")
        .header(http::header::ACCEPT, TABLE)
        .body(Vec::new())
        .unwrap();
    let err = server.client().request::<Value>(request).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("unrecognized includeObject value: \"All\""),
        "{err}"
    );

    // A watch streams one-row Tables, the column definitions with the first event only.
    let request = http::Request::get("/api/v1/namespaces/shop/pods?watch=true&timeoutSeconds=1")
        .header(http::header::ACCEPT, TABLE)
        .body(Vec::new())
        .unwrap();
    let text = server.client().request_text(request).await.unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 3, "{text}");
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["type"], "ADDED");
        assert_eq!(event["object"]["kind"], "Table");
        assert_eq!(event["object"]["rows"].as_array().unwrap().len(), 1);
        assert_eq!(
            event["object"]["columnDefinitions"].is_array(),
            i == 0,
            "{event}"
        );
    }
    assert_eq!(columns(&events[0]["object"])[1], ("Ready".to_string(), 0));

    // Without the Table media type, the list is plain JSON.
    let request = http::Request::get("/api/v1/namespaces/shop/pods")
        .body(Vec::new())
        .unwrap();
    let plain: Value = server.client().request(request).await.unwrap();
    assert_eq!(plain["kind"], "PodList");
}

/// kubectl's standard output.
async fn kubectl_out(kubeconfig: &Path, args: &[&str]) -> String {
    let output = common::kubectl(kubeconfig, args).await;
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn has_line(text: &str, words: &[&str]) -> bool {
    text.lines()
        .any(|l| l.split_whitespace().collect::<Vec<_>>() == words)
}

#[tokio::test]
async fn kubectl_prints_the_columns_and_events() {
    if common::kubectl_missing() {
        return;
    }
    let server = TestServer::start().await;
    seed_cluster(&server);
    let kc = server.kubeconfig_path();

    let out = kubectl_out(kc, &["get", "resourcequota,pdb,nodes,pods", "-A"]).await;
    for header in [
        &["NAMESPACE", "NAME", "REQUEST", "LIMIT", "AGE"][..],
        &[
            "NAMESPACE",
            "NAME",
            "MIN",
            "AVAILABLE",
            "MAX",
            "UNAVAILABLE",
            "ALLOWED",
            "DISRUPTIONS",
            "AGE",
        ],
        &["NAMESPACE", "NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        &["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"],
    ] {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == header),
            "no header {header:?} in\n{out}"
        );
    }
    assert!(out.contains("pods: 2/10, requests.cpu: 100m/2"), "{out}");
    assert!(out.contains("Ready,SchedulingDisabled"), "{out}");
    assert!(out.contains("CrashLoopBackOff"), "{out}");

    let events = kubectl_out(kc, &["get", "events", "-A"]).await;
    assert!(events.contains("poddisruptionbudget/web"), "{events}");
    assert!(events.contains("node/node-1"), "{events}");

    // describe finds a PDB's events through the core API's field selectors.
    let pdb = kubectl_out(kc, &["-n", "shop", "describe", "pdb", "web"]).await;
    assert!(!has_line(&pdb, &["Events:", "<none>"]), "{pdb}");
    assert!(
        pdb.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.first() == Some(&"Normal") && words.get(1) == Some(&"NoPods")
        }),
        "{pdb}"
    );
}
