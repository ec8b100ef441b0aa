//! Discovery as kube's `Discovery` and kubectl read it, including types that come and go.

mod common;

use kube::discovery::{Discovery, Scope};
use kube_testserver::{ResourceType, TestServer};

#[tokio::test]
async fn discovery_lists_groups_resources_and_subresources() {
    let server = TestServer::start().await;
    let discovery = Discovery::new(server.client()).run().await.unwrap();
    for group in [
        "",
        "apps",
        "policy",
        "coordination.k8s.io",
        "resource.k8s.io",
        "internal.apiserver.k8s.io",
        "scheduling.k8s.io",
        "events.k8s.io",
    ] {
        assert!(discovery.has_group(group), "group {group:?} served");
    }
    let core = discovery.get("").unwrap();
    let (pods, caps) = core
        .recommended_resources()
        .into_iter()
        .find(|(ar, _)| ar.plural == "pods")
        .unwrap();
    assert_eq!(pods.kind, "Pod");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(caps.supports_operation("watch"));
    let subresources: Vec<String> = caps
        .subresources
        .iter()
        .map(|(ar, _)| ar.plural.clone())
        .collect();
    assert!(
        subresources.iter().any(|s| s == "status"),
        "{subresources:?}"
    );

    let apps = discovery.get("apps").unwrap();
    let (_, deploy_caps) = apps
        .recommended_resources()
        .into_iter()
        .find(|(ar, _)| ar.plural == "deployments")
        .unwrap();
    assert!(
        deploy_caps
            .subresources
            .iter()
            .any(|(ar, _)| ar.plural == "scale")
    );

    let sv = discovery.get("internal.apiserver.k8s.io").unwrap();
    let (svs, sv_caps) = sv.recommended_resources().into_iter().next().unwrap();
    assert_eq!(
        (svs.plural.as_str(), svs.version.as_str()),
        ("storageversions", "v1alpha1")
    );
    assert_eq!(sv_caps.scope, Scope::Cluster);
}

#[tokio::test]
async fn registered_types_appear_and_disappear() {
    let server = TestServer::start().await;
    let before = Discovery::new(server.client()).run().await.unwrap();
    assert!(!before.has_group("example.com"));
    server.store().register(
        ResourceType::custom("example.com", "v1", "widgets", "Widget")
            .with_status()
            .with_scale(),
    );
    let during = Discovery::new(server.client()).run().await.unwrap();
    let (ar, caps) = during
        .get("example.com")
        .unwrap()
        .recommended_resources()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(
        (ar.kind.as_str(), ar.plural.as_str()),
        ("Widget", "widgets")
    );
    let subs: Vec<String> = caps
        .subresources
        .iter()
        .map(|(a, _)| a.plural.clone())
        .collect();
    assert_eq!(subs.len(), 2, "{subs:?}");
    assert!(server.store().unregister("example.com", "widgets"));
    let after = Discovery::new(server.client()).run().await.unwrap();
    assert!(!after.has_group("example.com"));
}

#[tokio::test]
async fn version_and_health_endpoints() {
    let server = TestServer::start().await;
    let info = server.client().apiserver_version().await.unwrap();
    assert_eq!((info.major.as_str(), info.minor.as_str()), ("1", "36"));
    let resp = common::http_get(server.addr(), "/readyz").await.unwrap();
    assert_eq!((resp.status, resp.body.as_str()), (200, "ok"));
}
