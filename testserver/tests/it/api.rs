//! The server's REST semantics, exercised through kube-rs's own client.

use crate::common;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret};
use kube::Error;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Status;
use kube_testserver::{Fault, TestServer};
use serde_json::json;

fn code(err: Error) -> u16 {
    match err {
        Error::Api(status) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn api_error(err: Error) -> Status {
    match err {
        Error::Api(status) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn cm(name: &str, data: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({ "metadata": { "name": name }, "data": data })).unwrap()
}

fn pod(name: &str, labels: serde_json::Value, node: Option<&str>) -> Pod {
    let mut p = json!({
        "metadata": { "name": name, "labels": labels },
        "spec": { "containers": [{ "name": "c", "image": "busybox" }] },
    });
    if let Some(node) = node {
        p["spec"]["nodeName"] = json!(node);
    }
    serde_json::from_value(p).unwrap()
}

#[tokio::test]
async fn create_get_list_update_delete_round_trip() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let created = cms
        .create(&PostParams::default(), &cm("a", json!({"k": "v"})))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();

    let fetched = cms.get("a").await.unwrap();
    assert_eq!(fetched.data.unwrap()["k"], "v");

    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "w".to_string())].into());
    let updated = cms
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    let rv2: u64 = updated
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1, "resourceVersion grows: {rv1} -> {rv2}");

    let list = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let list_rv: u64 = list
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(list_rv >= rv2);

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(code(cms.get("a").await.unwrap_err()), 404);
    assert_eq!(
        code(cms.delete("a", &DeleteParams::default()).await.unwrap_err()),
        404
    );
}

#[tokio::test]
async fn create_errors_match_the_real_server() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let dup = api_error(
        cms.create(&PostParams::default(), &cm("a", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(dup.message, "configmaps \"a\" already exists");

    let missing: Api<ConfigMap> = Api::namespaced(server.client(), "nope");
    let err = api_error(
        missing
            .create(&PostParams::default(), &cm("a", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (404, "namespaces \"nope\" not found")
    );

    let bad = api_error(
        cms.create(&PostParams::default(), &cm("Bad_Name", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((bad.code, bad.reason.as_str()), (422, "Invalid"));

    let nameless: ConfigMap = serde_json::from_value(json!({ "metadata": {} })).unwrap();
    let err = api_error(
        cms.create(&PostParams::default(), &nameless)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
}

#[tokio::test]
async fn generate_name_appends_five_random_characters() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let obj: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "generateName": "pod-claim-" } })).unwrap();
    let a = cms
        .create(&PostParams::default(), &obj)
        .await
        .unwrap()
        .metadata
        .name
        .unwrap();
    let b = cms
        .create(&PostParams::default(), &obj)
        .await
        .unwrap()
        .metadata
        .name
        .unwrap();
    for name in [&a, &b] {
        let suffix = name.strip_prefix("pod-claim-").expect("keeps the prefix");
        assert_eq!(suffix.len(), 5);
        assert!(
            suffix
                .chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
            "{suffix}"
        );
    }
    assert_ne!(a, b);
    let long: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "generateName": "x".repeat(70) } })).unwrap();
    let name = cms
        .create(&PostParams::default(), &long)
        .await
        .unwrap()
        .metadata
        .name
        .unwrap();
    assert_eq!(name.len(), 63, "base cut to 58 so the name fits 63");
}

#[tokio::test]
async fn stale_update_gets_409_conflict() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let first = cms
        .create(&PostParams::default(), &cm("a", json!({"n": "1"})))
        .await
        .unwrap();
    let mut newer = first.clone();
    newer.data = Some([("n".to_string(), "2".to_string())].into());
    cms.replace("a", &PostParams::default(), &newer)
        .await
        .unwrap();
    let mut stale = first.clone();
    stale.data = Some([("n".to_string(), "3".to_string())].into());
    let err = api_error(
        cms.replace("a", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        err.message,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(cms.get("a").await.unwrap().data.unwrap()["n"], "2");
}

#[tokio::test]
async fn unchanged_update_is_a_no_op_that_keeps_the_resource_version() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let created = cms
        .create(&PostParams::default(), &cm("a", json!({"n": "1"})))
        .await
        .unwrap();
    let same = cms
        .replace("a", &PostParams::default(), &created)
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version,
        created.metadata.resource_version
    );
}

#[tokio::test]
async fn status_subresource_separates_spec_and_status() {
    let server = TestServer::start().await;
    let deploys: Api<Deployment> = Api::namespaced(server.client(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": { "selector": { "matchLabels": { "app": "web" } },
                  "template": { "metadata": { "labels": { "app": "web" } },
                                "spec": { "containers": [{ "name": "c", "image": "i" }] } } },
        "status": { "replicas": 9 },
    }))
    .unwrap();
    let created = deploys.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.spec.replicas, Some(1), "replicas defaulted to 1");
    assert_eq!(
        created.status.as_ref().and_then(|s| s.replicas),
        None,
        "create drops status"
    );

    let mut with_status = created.clone();
    with_status.status.get_or_insert_default().replicas = Some(3);
    with_status.spec.replicas = Some(4);
    let after_status = deploys
        .replace_status("web", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(after_status.status.as_ref().unwrap().replicas, Some(3));
    assert_eq!(after_status.spec.replicas, Some(1), "/status ignores spec");
    assert_eq!(
        after_status.metadata.generation,
        Some(1),
        "status writes keep the generation"
    );

    let mut main = after_status.clone();
    main.spec.replicas = Some(5);
    main.status.as_mut().unwrap().replicas = Some(0);
    let after_main = deploys
        .replace("web", &PostParams::default(), &main)
        .await
        .unwrap();
    assert_eq!(after_main.spec.replicas, Some(5));
    assert_eq!(
        after_main.status.as_ref().unwrap().replicas,
        Some(3),
        "main ignores status"
    );
    assert_eq!(
        after_main.metadata.generation,
        Some(2),
        "spec change bumps generation"
    );

    let mut labels_only = after_main.clone();
    labels_only.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    let relabeled = deploys
        .replace("web", &PostParams::default(), &labels_only)
        .await
        .unwrap();
    assert_eq!(
        relabeled.metadata.generation,
        Some(2),
        "metadata change keeps the generation"
    );
}

#[tokio::test]
async fn scale_subresource_reads_and_writes_replicas() {
    let server = TestServer::start().await;
    let deploys: Api<Deployment> = Api::namespaced(server.client(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": { "replicas": 3,
                  "selector": { "matchLabels": { "app": "web" }, "matchExpressions": [{ "key": "tier", "operator": "In", "values": ["b", "a"] }] },
                  "template": { "metadata": { "labels": { "app": "web" } } } },
    }))
    .unwrap();
    deploys.create(&PostParams::default(), &d).await.unwrap();
    let scale = deploys.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    assert_eq!(
        scale.status.unwrap().selector.as_deref(),
        Some("app=web,tier in (a,b)")
    );
    let five = Patch::Merge(json!({ "spec": { "replicas": 5 } }));
    let patched = deploys
        .patch_scale("web", &PatchParams::default(), &five)
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().replicas, Some(5));
    let after = deploys.get("web").await.unwrap();
    assert_eq!(after.spec.replicas, Some(5));
    assert_eq!(after.metadata.generation, Some(2));
}

#[tokio::test]
async fn json_merge_and_strategic_patches() {
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(
        &PostParams::default(),
        &pod("p", json!({"a": "1", "b": "2"}), None),
    )
    .await
    .unwrap();

    let merged = common::merge_patch(
        &pods,
        "p",
        None,
        json!({ "metadata": { "labels": { "a": null, "c": "3" } } }),
    )
    .await
    .unwrap();
    assert_eq!(
        merged.metadata.labels.unwrap(),
        [("b".into(), "2".into()), ("c".into(), "3".into())].into()
    );

    let ops: json_patch::Patch = serde_json::from_value(json!([
        { "op": "add", "path": "/metadata/annotations", "value": { "x": "y" } },
        { "op": "test", "path": "/metadata/labels/b", "value": "2" },
    ]))
    .unwrap();
    let jp = pods
        .patch("p", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .unwrap();
    assert_eq!(jp.metadata.annotations.unwrap()["x"], "y");
    let failing: json_patch::Patch = serde_json::from_value(
        json!([{ "op": "test", "path": "/metadata/labels/b", "value": "nope" }]),
    )
    .unwrap();
    assert_eq!(
        code(
            pods.patch("p", &PatchParams::default(), &Patch::Json::<()>(failing))
                .await
                .unwrap_err()
        ),
        422
    );

    // Conditions merge by type through a strategic merge patch on /status.
    let status =
        |conds: serde_json::Value| Patch::Strategic(json!({ "status": { "conditions": conds } }));
    pods.patch_status(
        "p",
        &PatchParams::default(),
        &status(json!([
            { "type": "Ready", "status": "False" }, { "type": "PodScheduled", "status": "True" }
        ])),
    )
    .await
    .unwrap();
    let after = pods
        .patch_status(
            "p",
            &PatchParams::default(),
            &status(json!([{ "type": "Ready", "status": "True" }])),
        )
        .await
        .unwrap();
    let conds: Vec<(String, String)> = after
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        conds,
        vec![
            ("Ready".into(), "True".into()),
            ("PodScheduled".into(), "True".into())
        ]
    );
}

#[tokio::test]
async fn patch_with_stale_resource_version_conflicts_and_strategic_is_refused_for_custom_types() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let stale =
        Patch::Merge(json!({ "metadata": { "resourceVersion": "1" }, "data": { "x": "y" } }));
    assert_eq!(
        code(
            cms.patch("a", &PatchParams::default(), &stale)
                .await
                .unwrap_err()
        ),
        409
    );

    server
        .store()
        .register(kube_testserver::ResourceType::custom(
            "example.com",
            "v1",
            "widgets",
            "Widget",
        ));
    let ar = kube::api::ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<kube::api::DynamicObject> =
        Api::namespaced_with(server.client(), "default", &ar);
    let w: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": "w" }, "spec": { "size": 1 }
    }))
    .unwrap();
    widgets.create(&PostParams::default(), &w).await.unwrap();
    let smp = Patch::Strategic(json!({ "spec": { "size": 2 } }));
    assert_eq!(
        code(
            widgets
                .patch("w", &PatchParams::default(), &smp)
                .await
                .unwrap_err()
        ),
        415
    );
    let merge = Patch::Merge(json!({ "spec": { "size": 2 } }));
    let patched = widgets
        .patch("w", &PatchParams::default(), &merge)
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["size"], 2);
}

#[tokio::test]
async fn server_side_apply_merges_keyed_lists_and_detects_conflicts() {
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    // Each status entry must name one of the pod's claims, as the API server validates.
    let mut p = pod("p", json!({}), None);
    p.spec.as_mut().unwrap().resource_claims = serde_json::from_value(json!(
        ["a", "b", "z"].map(|n| json!({ "name": n, "resourceClaimTemplateName": "t" }))
    ))
    .unwrap();
    pods.create(&PostParams::default(), &p).await.unwrap();
    let apply = |statuses: serde_json::Value| {
        Patch::Apply(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "p", "namespace": "default" },
            "status": { "resourceClaimStatuses": statuses },
        }))
    };
    let pp = PatchParams::apply("ResourceClaimController").force();
    pods.patch_status(
        "p",
        &pp,
        &apply(json!([{ "name": "a", "resourceClaimName": "p-a-xyz" }])),
    )
    .await
    .unwrap();
    let other = PatchParams::apply("someone-else").force();
    pods.patch_status(
        "p",
        &other,
        &apply(json!([{ "name": "z", "resourceClaimName": "p-z" }])),
    )
    .await
    .unwrap();
    let after = pods
        .patch_status(
            "p",
            &pp,
            &apply(json!([{ "name": "b", "resourceClaimName": "p-b-abc" }])),
        )
        .await
        .unwrap();
    let names: Vec<String> = after
        .status
        .unwrap()
        .resource_claim_statuses
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    // The manager's own earlier entry "a" is pruned, the other manager's "z" stays.
    assert_eq!(names, vec!["z".to_string(), "b".to_string()]);

    // Apply creates, and a second manager's different value conflicts unless forced.
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let cfg = |v: &str| {
        Patch::Apply(
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "c" }, "data": { "k": v } }),
        )
    };
    cms.patch("c", &PatchParams::apply("one"), &cfg("1"))
        .await
        .unwrap();
    let err = api_error(
        cms.patch("c", &PatchParams::apply("two"), &cfg("2"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
    assert!(err.message.contains("conflict"), "{}", err.message);
    let forced = cms
        .patch("c", &PatchParams::apply("two").force(), &cfg("2"))
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["k"], "2");

    let no_manager = PatchParams::default();
    assert_eq!(
        code(cms.patch("c", &no_manager, &cfg("3")).await.unwrap_err()),
        400
    );
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let obj: ConfigMap = serde_json::from_value(
        json!({ "metadata": { "name": "f", "finalizers": ["example.com/keep"] } }),
    )
    .unwrap();
    cms.create(&PostParams::default(), &obj).await.unwrap();
    cms.delete("f", &DeleteParams::default()).await.unwrap();
    let held = cms.get("f").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    common::merge_patch(
        &cms,
        "f",
        None,
        json!({ "metadata": { "finalizers": null } }),
    )
    .await
    .unwrap();
    assert_eq!(code(cms.get("f").await.unwrap_err()), 404);
}

#[tokio::test]
async fn delete_preconditions_are_checked() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let wrong_uid = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    assert_eq!(code(cms.delete("a", &wrong_uid).await.unwrap_err()), 409);
    let wrong_rv = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..Default::default()
    };
    assert_eq!(code(cms.delete("a", &wrong_rv).await.unwrap_err()), 409);
    let uid = cms.get("a").await.unwrap().metadata.uid;
    let right = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid,
            resource_version: None,
        }),
        ..Default::default()
    };
    cms.delete("a", &right).await.unwrap();
}

#[tokio::test]
async fn garbage_collector_deletes_dependents_of_deleted_owners() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(server.client(), "default");
    let owner = cms
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .unwrap();
    let dependent = |name: &str| -> Secret {
        serde_json::from_value(json!({ "metadata": { "name": name, "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid, "controller": true
        }] } }))
        .unwrap()
    };
    for name in ["dep", "kept"] {
        secrets
            .create(&PostParams::default(), &dependent(name))
            .await
            .unwrap();
    }
    cms.delete(
        "owner",
        &DeleteParams {
            propagation_policy: None,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    common::eventually("dependent collected", common::DEADLINE, || async {
        secrets.get_opt("dep").await.unwrap().is_none()
    })
    .await;

    // Orphan propagation strips the reference instead.
    let owner2 = cms
        .create(&PostParams::default(), &cm("owner2", json!({})))
        .await
        .unwrap();
    let orphan: Secret = serde_json::from_value(
        json!({ "metadata": { "name": "orphan", "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner2", "uid": owner2.metadata.uid
    }] } }),
    )
    .unwrap();
    secrets
        .create(&PostParams::default(), &orphan)
        .await
        .unwrap();
    cms.delete("owner2", &DeleteParams::orphan()).await.unwrap();
    let left = secrets.get("orphan").await.unwrap();
    assert_eq!(left.metadata.owner_references.unwrap_or_default().len(), 0);
}

#[tokio::test]
async fn label_and_field_selectors_and_pagination() {
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    for (name, tier, node) in [
        ("a", "web", Some("n1")),
        ("b", "db", Some("n2")),
        ("c", "web", None),
        ("d", "cache", Some("n1")),
    ] {
        pods.create(
            &PostParams::default(),
            &pod(name, json!({ "tier": tier }), node),
        )
        .await
        .unwrap();
    }
    let names = |list: kube::core::ObjectList<Pod>| -> Vec<String> {
        list.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect()
    };
    let cases = [
        (ListParams::default().labels("tier=web"), vec!["a", "c"]),
        (ListParams::default().labels("tier!=web"), vec!["b", "d"]),
        (
            ListParams::default().labels("tier in (db,cache)"),
            vec!["b", "d"],
        ),
        (
            ListParams::default().labels("tier notin (db,cache)"),
            vec!["a", "c"],
        ),
        (
            ListParams::default().labels("tier"),
            vec!["a", "b", "c", "d"],
        ),
        (ListParams::default().labels("!tier"), vec![]),
        (
            ListParams::default().fields("spec.nodeName=n1"),
            vec!["a", "d"],
        ),
        (ListParams::default().fields("spec.nodeName="), vec!["c"]),
        (
            ListParams::default().fields("status.phase=Pending,metadata.name!=a"),
            vec!["b", "c", "d"],
        ),
    ];
    for (lp, want) in cases {
        let got = names(pods.list(&lp).await.unwrap());
        assert_eq!(got, want, "{lp:?}");
    }
    let err = api_error(
        pods.list(&ListParams::default().fields("spec.bogus=x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (400, "field label not supported: spec.bogus")
    );

    let first = pods.list(&ListParams::default().limit(3)).await.unwrap();
    let token = first.metadata.continue_.clone().expect("more pages");
    let rv = first.metadata.resource_version.clone();
    assert_eq!(names(first), vec!["a", "b", "c"]);
    let second = pods
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(
        second.metadata.resource_version, rv,
        "pages share the list's resourceVersion"
    );
    assert!(second.metadata.continue_.is_none());
    assert_eq!(names(second), vec!["d"]);

    server.store().compact();
    pods.create(&PostParams::default(), &pod("e", json!({}), None))
        .await
        .unwrap();
    server.store().compact();
    let err = api_error(
        pods.list(&ListParams::default().limit(3).continue_token(&token))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (410, "Expired"));
}

#[tokio::test]
async fn cross_namespace_list_and_cluster_scoped_objects() {
    let server = TestServer::start().await;
    let client = server.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": "team" } })).unwrap();
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Active"));
    Api::<ConfigMap>::namespaced(client.clone(), "team")
        .create(&PostParams::default(), &cm("x", json!({})))
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cm("y", json!({})))
        .await
        .unwrap();
    assert_eq!(
        Api::<ConfigMap>::all(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );

    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(
        json!({ "metadata": { "name": "n1" }, "status": { "capacity": { "cpu": "4" } } }),
    )
    .unwrap();
    let n = nodes.create(&PostParams::default(), &node).await.unwrap();
    assert!(n.metadata.namespace.is_none());
    assert_eq!(
        n.status.unwrap().capacity.unwrap()["cpu"].0,
        "4",
        "nodes keep status on create"
    );

    // Deleting a namespace removes its contents, then the namespace itself.
    namespaces
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), "team")
            .get_opt("x")
            .await
            .unwrap()
            .is_none()
    );
    assert!(namespaces.get_opt("team").await.unwrap().is_none());
}

#[tokio::test]
async fn watch_from_a_compacted_version_reports_410_in_stream() {
    use futures::StreamExt;
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let first = cms
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    cms.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();

    // Resuming from a retained version replays what came after it.
    let mut stream = cms
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    match stream.next().await.unwrap().unwrap() {
        WatchEvent::Added(obj) => assert_eq!(obj.metadata.name.as_deref(), Some("b")),
        other => panic!("expected ADDED b, got {other:?}"),
    }

    server.store().compact();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    match stream.next().await.unwrap().unwrap() {
        WatchEvent::Error(err) => assert_eq!((err.code, err.reason.as_str()), (410, "Expired")),
        other => panic!("expected an in-stream 410, got {other:?}"),
    }
    assert!(
        stream.next().await.is_none(),
        "the stream ends after the error"
    );
}

#[tokio::test]
async fn watch_sends_bookmarks_and_honours_filters() {
    use futures::StreamExt;
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let wp = WatchParams::default().labels("app=web").timeout(10);
    let mut stream = pods.watch(&wp, &rv).await.unwrap().boxed();
    pods.create(
        &PostParams::default(),
        &pod("other", json!({"app": "db"}), None),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("w", json!({"app": "web"}), None),
    )
    .await
    .unwrap();
    // Relabelling out of the selector is seen as DELETED by a filtered watch.
    common::merge_patch(
        &pods,
        "w",
        None,
        json!({ "metadata": { "labels": { "app": "db" } } }),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    let mut bookmark = false;
    while seen.len() < 2 || !bookmark {
        match stream.next().await.expect("stream open").unwrap() {
            WatchEvent::Added(p) => seen.push(format!("ADDED {}", p.metadata.name.unwrap())),
            WatchEvent::Modified(p) => seen.push(format!("MODIFIED {}", p.metadata.name.unwrap())),
            WatchEvent::Deleted(p) => seen.push(format!("DELETED {}", p.metadata.name.unwrap())),
            WatchEvent::Bookmark(b) => {
                let bookmark_rv: u64 = b.metadata.resource_version.parse().unwrap();
                bookmark = bookmark_rv > rv.parse::<u64>().unwrap();
            }
            WatchEvent::Error(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(seen, vec!["ADDED w", "DELETED w"]);
}

#[tokio::test]
async fn injected_faults_and_the_request_log() {
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    server.inject(
        Fault::error(500)
            .verb("list")
            .resource("configmaps")
            .times(2),
    );
    server.inject(
        Fault::error(429)
            .verb("create")
            .name("throttled")
            .retry_after(7)
            .times(1),
    );
    assert_eq!(
        code(cms.list(&ListParams::default()).await.unwrap_err()),
        500
    );
    assert_eq!(
        code(cms.list(&ListParams::default()).await.unwrap_err()),
        500
    );
    cms.list(&ListParams::default()).await.unwrap();
    // Creates carry no name in the URL, so the name rule does not match them: the create succeeds.
    cms.create(&PostParams::default(), &cm("throttled", json!({})))
        .await
        .unwrap();

    // kube's client retries a 429 after the server's Retry-After, so the get succeeds.
    server.inject(
        Fault::error(429)
            .verb("get")
            .name("throttled")
            .retry_after(1)
            .times(1),
    );
    cms.get("throttled").await.unwrap();
    let gets: Vec<u16> = server
        .requests()
        .iter()
        .filter_map(|r| r.is("get", "configmaps", "").then_some(r.code))
        .collect();
    assert_eq!(gets, vec![429, 200]);

    let log = server.requests();
    let lists: Vec<u16> = log
        .iter()
        .filter(|r| r.is("list", "configmaps", ""))
        .map(|r| r.code)
        .collect();
    assert_eq!(lists, vec![500, 500, 200]);
    assert_eq!(server.count(|r| r.is_write()), 1);
    let create = log.iter().find(|r| r.info.verb == "create").unwrap();
    assert_eq!(
        create.body.as_ref().unwrap()["metadata"]["name"],
        "throttled"
    );
    assert_eq!(create.code, 201);
}

#[tokio::test]
async fn raw_429_carries_retry_after_header_and_status_body() {
    let server = TestServer::start().await;
    server.inject(Fault::error(429).verb("get").retry_after(3).times(1));
    let resp = common::http_get(server.addr(), "/api/v1/namespaces/default/configmaps/x")
        .await
        .unwrap();
    let (head, body) = (resp.head, resp.body);
    assert_eq!(resp.status, 429);
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 3"),
        "{head}"
    );
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["details"]["retryAfterSeconds"], 3);
}

#[tokio::test]
async fn watch_ends_at_its_timeout() {
    use futures::StreamExt;
    let server = TestServer::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let started = std::time::Instant::now();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .boxed();
    while let Some(event) = stream.next().await {
        assert!(
            matches!(event, Ok(WatchEvent::Bookmark(_))),
            "only bookmarks: {event:?}"
        );
    }
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "ended early: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn rbac_names_may_contain_colons_other_names_may_not() {
    let server = TestServer::start().await;
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(server.client());
    let role =
        serde_json::from_value(json!({ "metadata": { "name": "system:controller:x" } })).unwrap();
    roles.create(&PostParams::default(), &role).await.unwrap();
    let bad = serde_json::from_value(json!({ "metadata": { "name": "a/b" } })).unwrap();
    assert_eq!(
        code(
            roles
                .create(&PostParams::default(), &bad)
                .await
                .unwrap_err()
        ),
        422
    );
    let maps: Api<ConfigMap> = Api::default_namespaced(server.client());
    let err = maps
        .create(&PostParams::default(), &cm("a:b", json!({})))
        .await
        .unwrap_err();
    assert_eq!(code(err), 422);
}

#[tokio::test]
async fn an_authorizer_refuses_with_403_and_leaves_discovery_alone() {
    let server = TestServer::start().await;
    server.authorize(Box::new(|info, _user_agent| {
        if info.resource == "secrets" {
            Err(format!(
                "secrets is forbidden: cannot {} secrets",
                info.verb
            ))
        } else {
            Ok(())
        }
    }));
    let secrets: Api<Secret> = Api::default_namespaced(server.client());
    let status = api_error(secrets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(status.message, "secrets is forbidden: cannot list secrets");
    let maps: Api<ConfigMap> = Api::default_namespaced(server.client());
    maps.list(&ListParams::default()).await.unwrap();
    kube::discovery::Discovery::new(server.client())
        .run()
        .await
        .unwrap();
}

#[tokio::test]
async fn changing_a_claims_reservations_needs_the_binding_subresource() {
    let server = TestServer::start().await;
    server
        .seed(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": { "name": "c", "namespace": "default" },
            "spec": { "devices": {} },
            "status": { "allocation": { "devices": { "results": [] } }, "reservedFor": [{ "resource": "pods", "name": "p", "uid": "u" }] },
        }))
        .unwrap();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    server.authorize(Box::new(move |info, _| {
        if info.subresource == "binding" {
            seen.lock().unwrap().push(format!(
                "{} {}/{} ns={:?} name={:?}",
                info.verb, info.resource, info.subresource, info.namespace, info.name
            ));
            return Err("no binding for you".into());
        }
        Ok(())
    }));
    let claims: Api<kube::api::DynamicObject> = Api::namespaced_with(
        server.client(),
        "default",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceClaim"),
            "resourceclaims",
        ),
    );
    let pp = PatchParams::default();
    // Dropping the reservation changes status.reservedFor: refused as a forbidden field.
    let drop = Patch::Merge(json!({ "status": { "reservedFor": null } }));
    let status = api_error(claims.patch_status("c", &pp, &drop).await.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status.message.ends_with(
            "status.allocation: Forbidden: changing status.allocation or status.reservedFor \
             requires resource=\"resourceclaims/binding\", verb=\"patch\" permission: no \
             binding for you"
        ),
        "{}",
        status.message
    );
    assert_eq!(
        *asked.lock().unwrap(),
        ["patch resourceclaims/binding ns=\"\" name=\"\""]
    );
    // Other status fields need no binding permission: the authorizer still refuses it, and
    // the write goes through.
    let devices = Patch::Merge(json!({ "status": { "devices": [] } }));
    claims.patch_status("c", &pp, &devices).await.unwrap();
}

#[tokio::test]
async fn seeded_fields_are_owned_unless_seeded_untracked() {
    let server = TestServer::start().await;
    let rt = server.store().resource_type("", "configmaps").unwrap();
    let seeded = |name: &str| json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name, "namespace": "default" }, "data": { "k": "1" } });
    server.store().seed(&rt, seeded("tracked")).unwrap();
    server
        .store()
        .seed_untracked(&rt, seeded("untracked"))
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let apply = |name: &str| {
        Patch::Apply(
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name }, "data": { "k": "2" } }),
        )
    };
    // A seed owns its fields like any writer, so another manager's apply conflicts...
    let err = api_error(
        cms.patch("tracked", &PatchParams::apply("other"), &apply("tracked"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
    // ...while an untracked seed's fields are nobody's.
    let applied = cms
        .patch(
            "untracked",
            &PatchParams::apply("other"),
            &apply("untracked"),
        )
        .await
        .unwrap();
    assert_eq!(applied.data.unwrap()["k"], "2");
}

#[tokio::test]
async fn pods_are_admitted_against_their_namespaces_quotas_as_the_api_server_admits_them() {
    use k8s_openapi::api::core::v1::ResourceQuota;
    let server = TestServer::start().await;
    let client = server.client();
    server
        .seed(json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "shop" } }))
        .unwrap();
    let hard = json!({ "pods": "2", "requests.cpu": "1", "limits.cpu": "2" });
    // As kcm's quota controller leaves it: status.hard and status.used filled in.
    server
        .seed(json!({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": { "name": "compute", "namespace": "shop" },
            "spec": { "hard": hard },
            "status": { "hard": hard, "used": { "pods": "1", "requests.cpu": "500m", "limits.cpu": "0" } },
        }))
        .unwrap();
    let pods = Api::<Pod>::namespaced(client.clone(), "shop");
    let with = |name: &str, resources: serde_json::Value| -> Pod {
        serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": { "containers": [{ "name": "main", "image": "nginx", "resources": resources }] },
        }))
        .unwrap()
    };

    let refused = api_error(
        pods.create(&PostParams::default(), &with("bare", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        refused.message,
        "pods \"bare\" is forbidden: failed quota: compute: must specify limits.cpu for: main; requests.cpu for: main"
    );

    let big = json!({ "requests": { "cpu": "600m" }, "limits": { "cpu": "1" } });
    let refused = api_error(
        pods.create(&PostParams::default(), &with("big", big))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        refused.message,
        "pods \"big\" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=500m, limited: requests.cpu=1"
    );

    let fits = json!({ "requests": { "cpu": "250m" }, "limits": { "cpu": "1" } });
    pods.create(&PostParams::default(), &with("fits", fits))
        .await
        .unwrap();
    let quota = Api::<ResourceQuota>::namespaced(client, "shop")
        .get("compute")
        .await
        .unwrap();
    let used = quota.status.unwrap().used.unwrap();
    let used: Vec<(String, String)> = used.into_iter().map(|(k, v)| (k, v.0)).collect();
    assert_eq!(
        used,
        [("limits.cpu", "1"), ("pods", "2"), ("requests.cpu", "750m")]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        "admission adds the pod's usage"
    );

    // Seeded fixtures are not requests: no admission.
    server
        .seed(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "seeded", "namespace": "shop" },
            "spec": { "containers": [{ "name": "main", "image": "nginx" }] },
        }))
        .unwrap();
}
