//! kcm's protobuf reading against the real kube-apiserver (v1.36, from `KUBEBUILDER_ASSETS`):
//! pods, node metadata, quotas and PDBs stored the same whether read in protobuf or in JSON, so the
//! messages kcm declares match what the API server writes. Skipped without the assets. Each
//! test holds [`CLUSTER`] for reading, as the other namespaced tests do: a node it creates and
//! its requests would otherwise reach the cluster-wide checks.

use k8s_openapi::api::core::v1::{Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kcm::k8s::view::Pod as PodView;
use kcm::runtime::metrics::Metrics;
use kcm::runtime::protobuf::ContentType;
use kcm::runtime::watching::informer::Informers;
use kcm::runtime::watching::stored::NodeMeta;
use kcm::runtime::writing::writer::ApiWriter;
use kcm_testsupport::{DEADLINE, envtest, eventually};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::CLUSTER;

/// The pods of `namespace` and the nodes named `node-proto-*` one set of informers stores.
fn stored(informers: &Informers, namespace: &str) -> (Vec<PodView>, Vec<String>) {
    let mut pods: Vec<PodView> = informers
        .get::<PodView>()
        .in_namespace(namespace)
        .iter()
        .map(|p| (**p).clone())
        .collect();
    pods.sort_by_key(|p| p.name_any());
    let mut nodes: Vec<String> = informers
        .get::<NodeMeta>()
        .store()
        .state()
        .iter()
        .filter(|n| n.name_any().starts_with("node-proto-"))
        .map(|n| format!("{:?}", n.metadata))
        .collect();
    nodes.sort();
    (pods, nodes)
}

#[tokio::test]
async fn pods_and_node_metadata_read_in_protobuf_equal_json_on_the_real_api_server() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    let _shared = CLUSTER.read().await;
    let client = plane.client().await;
    let namespace = plane.namespace(&client, "protobuf").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "web-1", "labels": { "app": "web" } },
        "spec": {
            "nodeName": "node-proto-1",
            "affinity": { "podAntiAffinity": { "preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 10, "podAffinityTerm": { "topologyKey": "zone",
                    "labelSelector": { "matchExpressions": [{ "key": "app", "operator": "Exists" }] } } }] } },
            "initContainers": [{ "name": "proxy", "image": "proxy", "restartPolicy": "Always",
                "resources": { "requests": { "cpu": "50m" } } }],
            "containers": [{ "name": "web", "image": "web", "env": [{ "name": "A", "value": "b" }],
                "resources": { "requests": { "cpu": "100m", "memory": "64Mi" }, "limits": { "memory": "128Mi" } } }],
            "resourceClaims": [{ "name": "gpu", "resourceClaimTemplateName": "gpu" }]
        }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({ "status": {
        "phase": "Running",
        "conditions": [{ "type": "Ready", "status": "False", "reason": "Probe", "lastTransitionTime": "2026-11-01T10:00:05Z" },
                       { "type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-01T10:00:00Z" }],
        "containerStatuses": [{ "name": "web", "ready": false, "restartCount": 0, "image": "web", "imageID": "",
            "allocatedResources": { "cpu": "100m" }, "resources": { "requests": { "cpu": "100m" } } }],
        "resourceClaimStatuses": [{ "name": "gpu", "resourceClaimName": "web-1-gpu" }]
    } });
    pods.patch_status("web-1", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({ "metadata": { "name": "node-proto-1",
        "labels": { "zone": "a" }, "annotations": { "node.alpha.kubernetes.io/ttl": "0" } } }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();

    let informers = |content_type| {
        Informers::new(
            client.clone(),
            Metrics::new().unwrap(),
            CancellationToken::new(),
        )
        .with_content_type(content_type)
    };
    let (protobuf, json) = (
        informers(ContentType::Protobuf),
        informers(ContentType::Json),
    );
    for informers in [&protobuf, &json] {
        informers.get::<PodView>().wait_synced().await;
        informers.get::<NodeMeta>().wait_synced().await;
    }
    let live = PodView::from(&pods.get("web-1").await.unwrap());
    eventually(
        "both stores hold the pod and the node",
        DEADLINE,
        || async {
            let (pb_pods, pb_nodes) = stored(&protobuf, &namespace);
            pb_pods == [live.clone()]
                && pb_nodes.len() == 1
                && stored(&json, &namespace) == (pb_pods, pb_nodes)
        },
    )
    .await;
    // A watch event: the pod becomes ready.
    let ready = json!({ "status": { "conditions": [
        { "type": "Ready", "status": "True", "lastTransitionTime": "2026-11-01T10:01:00Z" }] } });
    pods.patch_status("web-1", &PatchParams::default(), &Patch::Merge(ready))
        .await
        .unwrap();
    let live = PodView::from(&pods.get("web-1").await.unwrap());
    eventually("both stores follow the watch", DEADLINE, || async {
        stored(&protobuf, &namespace).0 == [live.clone()]
            && stored(&json, &namespace).0 == [live.clone()]
    })
    .await;
}

/// The quotas or PDBs of `namespace` one set of informers stores, sorted by name.
fn stored_objects<K>(informers: &Informers, namespace: &str) -> Vec<K>
where
    K: kcm::runtime::watching::stored::Stored + kube::Resource,
{
    let mut objects: Vec<K> = informers
        .get::<K>()
        .store()
        .state()
        .iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
        .map(|o| (**o).clone())
        .collect();
    objects.sort_by_key(|o| o.meta().name.clone());
    objects
}

/// What a store keeps of a live object: everything but managedFields.
fn without_managed_fields<K: kube::Resource>(mut object: K) -> K {
    object.meta_mut().managed_fields = None;
    object
}

/// Every metadata field a status PUT sends back: labels, kubectl's annotation, a finalizer, an
/// owner.
fn meta(name: &str) -> serde_json::Value {
    json!({ "name": name, "labels": { "team": "shop" },
        "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{\"x\":1}" },
        "finalizers": ["example.com/keep"],
        "ownerReferences": [{ "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": "00000000-0000-0000-0000-000000000001", "controller": true,
            "blockOwnerDeletion": false }] })
}

/// A fresh namespace and the quota and PDB APIs of it.
async fn quotas_and_pdbs(
    plane: &envtest::ControlPlane,
    client: &kube::Client,
    prefix: &str,
) -> (String, Api<ResourceQuota>, Api<PodDisruptionBudget>) {
    let namespace = plane.namespace(client, prefix).await;
    let quotas = Api::namespaced(client.clone(), &namespace);
    let pdbs = Api::namespaced(client.clone(), &namespace);
    (namespace, quotas, pdbs)
}

#[tokio::test]
async fn quotas_and_pdbs_read_in_protobuf_equal_json_on_the_real_api_server() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    let _shared = CLUSTER.read().await;
    let client = plane.client().await;
    let (namespace, quotas, pdbs) = quotas_and_pdbs(plane, &client, "protobuf-status").await;
    let quota: ResourceQuota = serde_json::from_value(json!({ "metadata": meta("compute"),
        "spec": { "hard": { "pods": "10", "requests.cpu": "1500m" },
            "scopeSelector": { "matchExpressions": [
                { "scopeName": "PriorityClass", "operator": "In", "values": ["high"] }] } } }))
    .unwrap();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    let quota_status = json!({ "status": { "hard": { "pods": "10", "requests.cpu": "1500m" },
        "used": { "pods": "0", "requests.cpu": "0" } } });
    quotas
        .patch_status(
            "compute",
            &PatchParams::default(),
            &Patch::Merge(quota_status),
        )
        .await
        .unwrap();
    for (name, spec) in [
        (
            "web",
            json!({ "maxUnavailable": "50%", "unhealthyPodEvictionPolicy": "AlwaysAllow",
            "selector": { "matchExpressions": [{ "key": "app", "operator": "In", "values": ["web"] }] } }),
        ),
        (
            "api",
            json!({ "minAvailable": 2, "selector": { "matchLabels": { "app": "api" } } }),
        ),
    ] {
        let pdb: PodDisruptionBudget =
            serde_json::from_value(json!({ "metadata": meta(name), "spec": spec })).unwrap();
        pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    }
    let pdb_status = json!({ "status": { "observedGeneration": 1, "currentHealthy": 2,
        "desiredHealthy": 1, "disruptionsAllowed": 0, "expectedPods": 3,
        "disruptedPods": { "web-1": "2026-11-01T10:00:00Z" },
        "conditions": [{ "type": "DisruptionAllowed", "status": "False", "observedGeneration": 1,
            "lastTransitionTime": "2026-11-01T10:00:05Z", "reason": "InsufficientPods",
            "message": "not enough" }] } });
    pdbs.patch_status("web", &PatchParams::default(), &Patch::Merge(pdb_status))
        .await
        .unwrap();

    let informers = |content_type| {
        Informers::new(
            client.clone(),
            Metrics::new().unwrap(),
            CancellationToken::new(),
        )
        .with_content_type(content_type)
    };
    let (protobuf, json) = (
        informers(ContentType::Protobuf),
        informers(ContentType::Json),
    );
    for informers in [&protobuf, &json] {
        informers.get::<ResourceQuota>().wait_synced().await;
        informers.get::<PodDisruptionBudget>().wait_synced().await;
    }
    let live = || async {
        let quotas = quotas.list(&Default::default()).await.unwrap().items;
        let mut pdbs = pdbs.list(&Default::default()).await.unwrap().items;
        pdbs.sort_by_key(|p| p.metadata.name.clone());
        (
            quotas
                .into_iter()
                .map(without_managed_fields)
                .collect::<Vec<_>>(),
            pdbs.into_iter()
                .map(without_managed_fields)
                .collect::<Vec<_>>(),
        )
    };
    let both_stores_hold = |(quotas, pdbs): (Vec<ResourceQuota>, Vec<PodDisruptionBudget>)| {
        [&protobuf, &json].into_iter().all(|informers| {
            stored_objects::<ResourceQuota>(informers, &namespace) == quotas
                && stored_objects::<PodDisruptionBudget>(informers, &namespace) == pdbs
        })
    };
    let listed = live().await;
    assert_eq!(listed.1.len(), 2);
    eventually("both stores hold the live quota and PDBs", DEADLINE, || {
        let listed = listed.clone();
        async { both_stores_hold(listed) }
    })
    .await;
    // A watch event: the PDB allows a disruption again.
    let allowed = json!({ "status": { "disruptionsAllowed": 1, "disruptedPods": null,
        "conditions": [{ "type": "DisruptionAllowed", "status": "True", "observedGeneration": 1,
            "lastTransitionTime": "2026-11-01T10:01:00Z", "reason": "SufficientPods", "message": "" }] } });
    pdbs.patch_status("web", &PatchParams::default(), &Patch::Merge(allowed))
        .await
        .unwrap();
    let listed = live().await;
    eventually("both stores follow the watch", DEADLINE, || {
        let listed = listed.clone();
        async { both_stores_hold(listed) }
    })
    .await;
}

/// The live object as a status write must leave it, less what the server moves on every write.
fn comparable<K: kube::Resource + serde::Serialize>(object: &K) -> serde_json::Value {
    let mut value = serde_json::to_value(object).unwrap();
    let meta = value["metadata"].as_object_mut().unwrap();
    for moved in ["resourceVersion", "managedFields"] {
        meta.remove(moved);
    }
    value
}

#[tokio::test]
async fn quota_and_pdb_status_written_in_protobuf_equal_json_on_the_real_api_server() {
    let Some(plane) = envtest::shared() else {
        return;
    };
    let _shared = CLUSTER.read().await;
    let client = plane.client().await;
    let (_, quotas, pdbs) = quotas_and_pdbs(plane, &client, "protobuf-write").await;
    // One object per encoding, written the same way.
    for (content, suffix) in [(ContentType::Protobuf, "pb"), (ContentType::Json, "json")] {
        let writer = ApiWriter::new("test", Metrics::new().unwrap(), false, content);
        let name = format!("compute-{suffix}");
        let quota: ResourceQuota = serde_json::from_value(json!({ "metadata": meta(&name),
            "spec": { "hard": { "pods": "10", "requests.cpu": "1500m" }, "scopes": ["NotBestEffort"] } }))
        .unwrap();
        let live = quotas.create(&PostParams::default(), &quota).await.unwrap();
        let mut desired = without_managed_fields(live.clone());
        desired.status = serde_json::from_value(json!({
            "hard": { "pods": "10", "requests.cpu": "1500m" },
            "used": { "pods": "2", "requests.cpu": "250m" } }))
        .unwrap();
        let written = writer
            .replace_status(&quotas, &live, desired.clone())
            .await
            .unwrap();
        let stored = quotas.get(&name).await.unwrap();
        assert_eq!(
            written.metadata.resource_version,
            stored.metadata.resource_version
        );
        assert_eq!(comparable(&stored), comparable(&desired), "{suffix}: quota");

        let name = format!("web-{suffix}");
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({ "metadata": meta(&name),
            "spec": { "maxUnavailable": "50%", "unhealthyPodEvictionPolicy": "AlwaysAllow",
                "selector": { "matchExpressions": [{ "key": "app", "operator": "In", "values": ["web"] }] } } }))
        .unwrap();
        let live = pdbs.create(&PostParams::default(), &pdb).await.unwrap();
        let mut desired = without_managed_fields(live.clone());
        desired.status = serde_json::from_value(json!({ "observedGeneration": 1,
            "currentHealthy": 2, "desiredHealthy": 1, "disruptionsAllowed": 0, "expectedPods": 3,
            "disruptedPods": { "web-1": "2026-11-01T10:00:00Z" },
            "conditions": [{ "type": "DisruptionAllowed", "status": "False", "observedGeneration": 1,
                "lastTransitionTime": "2026-11-01T10:00:05Z", "reason": "InsufficientPods",
                "message": "" }] }))
        .unwrap();
        let written = writer
            .replace_status(&pdbs, &live, desired.clone())
            .await
            .unwrap();
        let stored = pdbs.get(&name).await.unwrap();
        assert_eq!(
            written.metadata.resource_version,
            stored.metadata.resource_version
        );
        assert_eq!(comparable(&stored), comparable(&desired), "{suffix}: PDB");
    }
}
