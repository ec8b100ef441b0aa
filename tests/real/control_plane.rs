//! The test harness's own control plane, where a benchmark relies on it.

use k8s_openapi::api::core::v1::ConfigMap;
use kcm_testsupport::envtest::{self, ControlPlane, Options};

fn configmap(name: &str) -> ConfigMap {
    let mut configmap = ConfigMap::default();
    configmap.metadata.name = Some(name.to_string());
    configmap
}

/// The scale bench seeds once and starts every run on a copy of etcd: a control plane started
/// on a copy serves what was written before the copy, and not what was written after it.
#[tokio::test]
async fn a_control_plane_started_on_a_copy_of_etcd_holds_what_was_written_before_the_copy() {
    let Some(assets) = envtest::assets() else {
        return;
    };
    let copy = tempfile::tempdir().expect("a directory for the copy");
    let first = ControlPlane::start(&assets).expect("the first control plane starts");
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(first.client().await, "default");
    api.create(&Default::default(), &configmap("before"))
        .await
        .expect("created before the copy");
    first.copy_etcd(copy.path()).expect("etcd copied");
    api.create(&Default::default(), &configmap("after"))
        .await
        .expect("created after the copy: etcd runs on");
    drop(first);

    let options = Options {
        etcd_data: Some(copy.path().to_path_buf()),
        ..Options::default()
    };
    let second = ControlPlane::start_with(&assets, &options).expect("started on the copy");
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(second.client().await, "default");
    assert!(api.get_opt("before").await.expect("a get").is_some());
    assert!(api.get_opt("after").await.expect("a get").is_none());
}
