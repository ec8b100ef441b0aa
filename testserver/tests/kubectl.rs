//! kubectl against the server, when kubectl is installed (skipped cleanly otherwise).

use std::path::Path;
use std::process::Output;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use kube_testserver::TestServer;
use serde_json::json;

fn kubectl_available() -> bool {
    std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success())
}

async fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    let output = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .await
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[tokio::test]
async fn kubectl_get_and_apply_work() {
    if !kubectl_available() {
        eprintln!("skipped: kubectl is not installed");
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
