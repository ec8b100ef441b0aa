//! Discovery as kube's `Discovery` and kubectl read it, including types that come and go.

use crate::common;

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

/// PodGroups (`scheduling.k8s.io/v1alpha2`) are served only when enabled, beside
/// `scheduling.k8s.io/v1` in one group; their status is a subresource that takes server-side
/// apply, and v1.36's validation holds.
#[tokio::test]
async fn pod_groups_are_served_only_when_enabled() {
    use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
    use kube::core::{ApiResource, GroupVersionKind};
    use serde_json::json;

    let gvk = GroupVersionKind::gvk("scheduling.k8s.io", "v1alpha2", "PodGroup");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "podgroups");
    let group = |claims: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": { "name": "gang" },
            "spec": { "schedulingPolicy": { "basic": {} }, "resourceClaims": claims },
            "status": { "resourceClaimStatuses": [{ "name": "gpu", "resourceClaimName": "x" }] }
        }))
        .unwrap()
    };
    let claims = json!([{ "name": "gpu", "resourceClaimTemplateName": "t" }]);

    let plain = TestServer::start().await;
    let discovery = Discovery::new(plain.client()).run().await.unwrap();
    let scheduling = discovery.get("scheduling.k8s.io").unwrap();
    assert_eq!(scheduling.versions().collect::<Vec<_>>(), ["v1"]);
    let api: Api<DynamicObject> = Api::namespaced_with(plain.client(), "default", &resource);
    let err = api
        .create(&PostParams::default(), &group(claims.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref e) if e.code == 404),
        "{err}"
    );

    let server = common::start_with(|o| o.pod_groups = true).await;
    let discovery = Discovery::new(server.client()).run().await.unwrap();
    let scheduling = discovery.get("scheduling.k8s.io").unwrap();
    assert_eq!(
        scheduling.versions().collect::<Vec<_>>(),
        ["v1", "v1alpha2"]
    );
    assert_eq!(scheduling.preferred_version_or_latest(), "v1");
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &resource);
    // The status a create carries is dropped.
    let created = api
        .create(&PostParams::default(), &group(claims.clone()))
        .await
        .unwrap();
    assert_eq!(created.data["status"], json!({}));
    // Status by server-side apply, checked against the claims.
    let apply = |name: &str| {
        json!({ "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                "metadata": { "name": "gang", "namespace": "default" },
                "status": { "resourceClaimStatuses": [{ "name": name, "resourceClaimName": "gang-gpu-abcde" }] } })
    };
    let params = PatchParams::apply("ResourceClaimController").force();
    let applied = api
        .patch_status("gang", &params, &Patch::Apply(apply("gpu")))
        .await
        .unwrap();
    assert_eq!(
        applied.data["status"]["resourceClaimStatuses"],
        json!([{ "name": "gpu", "resourceClaimName": "gang-gpu-abcde" }])
    );
    let err = api
        .patch_status("gang", &params, &Patch::Apply(apply("cpu")))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "status.resourceClaimStatuses[0].name: Invalid value: \"cpu\": must match the name of an entry in `spec.resourceClaims`"
        ),
        "{err}"
    );
    // The claims are immutable, and checked on create.
    let err = common::merge_patch(
        &api,
        "gang",
        None,
        json!({ "spec": { "resourceClaims": [] } }),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("spec.resourceClaims: Invalid value: \"null\": field is immutable"),
        "{err}"
    );
    let mut unsourced = group(json!([{ "name": "gpu" }]));
    unsourced.metadata.name = Some("other".into());
    let err = api
        .create(&PostParams::default(), &unsourced)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("must specify one of"), "{err}");
}
