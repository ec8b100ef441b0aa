//! kubectl against the server, when kubectl is installed (skipped cleanly otherwise).

use crate::common;

use std::cell::Cell;
use std::time::Duration;

use common::{kubectl, kubectl_missing};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, ResourceQuota, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube_testserver::TestServer;
use serde_json::json;

#[tokio::test]
async fn kubectl_get_and_apply_work() {
    if kubectl_missing() {
        return;
    }
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "hello" }, "spec": { "containers": [{ "name": "c", "image": "i" }] }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();

    let out = kubectl(server.kubeconfig_path(), &["get", "pods", "-A"]).await;
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("hello"), "{table}");

    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("cm.yaml");
    let write = |value: &str| {
        std::fs::write(&manifest, format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: default\ndata:\n  key: {value}\n"))
            .unwrap();
    };
    write("one");
    kubectl(
        server.kubeconfig_path(),
        &["apply", "-f", manifest.to_str().unwrap()],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    assert_eq!(
        cms.get("applied").await.unwrap().data.unwrap()["key"],
        "one"
    );
    write("two");
    kubectl(
        server.kubeconfig_path(),
        &["apply", "-f", manifest.to_str().unwrap()],
    )
    .await;
    assert_eq!(
        cms.get("applied").await.unwrap().data.unwrap()["key"],
        "two"
    );
    write("three");
    kubectl(
        server.kubeconfig_path(),
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            manifest.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(
        cms.get("applied").await.unwrap().data.unwrap()["key"],
        "three"
    );
}

/// The commands "Try it without a cluster" invites. kubectl's typed clients send protobuf
/// (`create namespace|quota|deployment|pdb`), `create -f` sends JSON, `get` asks for tables
/// and `describe` reads through typed clients.
#[tokio::test]
async fn kubectl_create_get_describe_work_as_against_a_cluster() {
    if kubectl_missing() {
        return;
    }
    let server = TestServer::start().await;
    let kc = server.kubeconfig_path();
    kubectl(kc, &["create", "namespace", "demo"]).await;
    kubectl(kc, &["-n", "demo", "create", "quota", "q", "--hard=pods=3"]).await;
    kubectl(
        kc,
        &["-n", "demo", "create", "deployment", "web", "--image=pause"],
    )
    .await;
    let pdb_args = ["--selector=app=web", "--min-available=1"];
    kubectl(
        kc,
        &[&["-n", "demo", "create", "pdb", "web"][..], &pdb_args].concat(),
    )
    .await;
    let literal = "--from-literal=key=value";
    kubectl(kc, &["-n", "demo", "create", "configmap", "cm", literal]).await;
    kubectl(
        kc,
        &["-n", "demo", "create", "secret", "generic", "s", literal],
    )
    .await;
    kubectl(
        kc,
        &[
            "-n",
            "demo",
            "run",
            "solo",
            "--image=pause",
            "--labels=app=solo",
        ],
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("files.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: files\n---\n\
         apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: q\n  namespace: files\n\
         spec:\n  hard:\n    pods: \"5\"\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: files\n\
         spec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n\
         \x20   metadata:\n      labels: {app: web}\n    spec:\n      containers:\n\
         \x20     - {name: c, image: pause}\n---\n\
         apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\n\
         \x20 namespace: files\nspec:\n  maxUnavailable: 25%\n  selector:\n    matchLabels: {app: web}\n",
    )
    .unwrap();
    kubectl(kc, &["create", "-f", manifest.to_str().unwrap()]).await;

    let client = server.client();
    Api::<Namespace>::all(client.clone())
        .get("demo")
        .await
        .unwrap();
    for (ns, pods) in [("demo", "3"), ("files", "5")] {
        let quota = Api::<ResourceQuota>::namespaced(client.clone(), ns)
            .get("q")
            .await
            .unwrap();
        let hard = quota.spec.unwrap().hard.unwrap();
        assert_eq!(hard["pods"], Quantity(pods.into()), "{ns}");
    }
    let web = Api::<Deployment>::namespaced(client.clone(), "demo")
        .get("web")
        .await
        .unwrap();
    let spec = web.spec;
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.selector.match_labels.unwrap()["app"], "web");
    let containers = spec.template.spec.unwrap().containers;
    assert_eq!(containers.len(), 1);
    assert_eq!(
        (containers[0].name.as_str(), containers[0].image.as_deref()),
        ("pause", Some("pause"))
    );
    // Go leaves out the empty strings protobuf carries for unset fields; so does the server.
    assert_eq!(containers[0].image_pull_policy, None);
    let pdb = Api::<PodDisruptionBudget>::namespaced(client.clone(), "demo")
        .get("web")
        .await
        .unwrap();
    let pdb_spec = pdb.spec.unwrap();
    assert_eq!(pdb_spec.min_available, Some(IntOrString::Int(1)));
    assert_eq!(
        pdb_spec.selector.unwrap().match_labels.unwrap()["app"],
        "web"
    );
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "demo")
        .get("cm")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["key"], "value");
    let secret = Api::<Secret>::namespaced(client.clone(), "demo")
        .get("s")
        .await
        .unwrap();
    assert_eq!(secret.data.unwrap()["key"].0, b"value");
    let solo = Api::<Pod>::namespaced(client.clone(), "demo")
        .get("solo")
        .await
        .unwrap();
    assert_eq!(solo.metadata.labels.unwrap()["app"], "solo");
    assert_eq!(
        solo.spec.unwrap().containers[0].image.as_deref(),
        Some("pause")
    );
    let files_pdb = Api::<PodDisruptionBudget>::namespaced(client.clone(), "files")
        .get("web")
        .await
        .unwrap();
    assert_eq!(
        files_pdb.spec.unwrap().max_unavailable,
        Some(IntOrString::String("25%".into()))
    );

    for ns in ["demo", "files"] {
        let out = kubectl(kc, &["-n", ns, "get", "quota,deployments,pdb"]).await;
        let table = String::from_utf8_lossy(&out.stdout);
        for name in [
            "resourcequota/q",
            "deployment.apps/web",
            "poddisruptionbudget.policy/web",
        ] {
            assert!(table.contains(name), "{ns}: {name} missing in\n{table}");
        }
    }
    let out = kubectl(
        kc,
        &["-n", "demo", "get", "deployment", "web", "-o", "json"],
    )
    .await;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["spec"]["template"]["spec"]["containers"][0]["image"],
        "pause"
    );

    let describe = |kind: &'static str| async move {
        let out = kubectl(kc, &["-n", "demo", "describe", kind]).await;
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // describe lists a quota's status, which the quota controller writes; write it as it would.
    Api::<ResourceQuota>::namespaced(client.clone(), "demo")
        .patch_status(
            "q",
            &PatchParams::default(),
            &Patch::Merge(
                json!({ "status": { "hard": { "pods": "3" }, "used": { "pods": "0" } } }),
            ),
        )
        .await
        .unwrap();
    let quota = describe("quota").await;
    assert!(
        quota
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Name:", "q"]),
        "{quota}"
    );
    assert!(
        quota
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["pods", "0", "3"]),
        "{quota}"
    );
    let deployment = describe("deployment").await;
    assert!(
        deployment.contains("Image:") && deployment.contains("pause"),
        "{deployment}"
    );
    assert!(
        deployment.contains("Selector:") && deployment.contains("app=web"),
        "{deployment}"
    );
    let pdb = describe("pdb").await;
    assert!(
        pdb.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Min", "available:", "1"]),
        "{pdb}"
    );
    assert!(pdb.contains("app=web"), "{pdb}");
}

/// `kubectl drain` as against a cluster: it cordons the node, finds `pods/eviction` in
/// discovery, evicts, retries while the budget answers 429, and waits until the pods are gone,
/// which the test brings about as the kubelet and the disruption controller would.
#[tokio::test]
async fn kubectl_drain_evicts_within_the_budget() {
    if kubectl_missing() {
        return;
    }
    let server = TestServer::start().await;
    server
        .seed(json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": "n1" } }))
        .unwrap();
    for name in ["web-1", "web-2"] {
        server
            .seed(json!({ "apiVersion": "v1", "kind": "Pod",
                "metadata": { "name": name, "namespace": "default", "labels": { "app": "web" } },
                "spec": { "nodeName": "n1", "containers": [{ "name": "c", "image": "i" }] },
                "status": { "phase": "Running", "conditions": [{ "type": "Ready", "status": "True" }] } }))
            .unwrap();
    }
    let one_left = json!({ "status": {
        "observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 2,
        "desiredHealthy": 1, "expectedPods": 2, "disruptedPods": null } });
    let mut budget = json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": { "name": "web", "namespace": "default" },
        "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "web" } } } });
    json_patch::merge(&mut budget, &one_left);
    server.seed(budget).unwrap();

    let kc = server.kubeconfig_path().to_path_buf();
    let drain =
        tokio::spawn(
            async move { kubectl(&kc, &["drain", "n1", "--force", "--timeout=60s"]).await },
        );
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(server.client(), "default");
    let evictions = |code| server.count(|r| r.is("create", "pods", "eviction") && r.code == code);
    let (removed, restored) = (Cell::new(0), Cell::new(false));
    common::eventually(
        "the node's pods are evicted and gone",
        Duration::from_secs(60),
        || async {
            let left = pods.list(&Default::default()).await.unwrap().items;
            // The kubelet stops a terminating pod's containers and removes it.
            for pod in left
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_some())
            {
                let name = pod.metadata.name.as_deref().unwrap();
                pods.delete(name, &DeleteParams::default().grace_period(0))
                    .await
                    .unwrap();
                removed.set(removed.get() + 1);
            }
            // The disruption controller, once the evicted pod is gone (and after the second
            // eviction was refused), finds the budget healthy enough for one more.
            if removed.get() == 1 && !restored.get() && evictions(429) > 0 {
                common::merge_patch(&budgets, "web", Some("status"), one_left.clone())
                    .await
                    .unwrap();
                restored.set(true);
            }
            left.is_empty()
        },
    )
    .await;
    let out = drain.await.unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("node/n1 drained"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let node = Api::<Node>::all(server.client()).get("n1").await.unwrap();
    assert_eq!(node.spec.unwrap().unschedulable, Some(true));
    // Two granted, and the second pod's tries refused while the budget had none left.
    assert_eq!(evictions(201), 2);
    assert!(evictions(429) >= 1);
}
