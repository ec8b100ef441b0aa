//! kcm's protobuf reading against the real kube-apiserver (v1.36, from `KUBEBUILDER_ASSETS`):
//! pods and node metadata stored the same whether read in protobuf or in JSON, so the
//! messages kcm declares match what the API server writes. Skipped without the assets.

mod common;

use common::{DEADLINE, envtest, eventually};
use k8s_openapi::api::core::v1::{Node, Pod};
use kcm::k8s::view::Pod as PodView;
use kcm::runtime::metrics::Metrics;
use kcm::runtime::protobuf::ContentType;
use kcm::runtime::watching::informer::Informers;
use kcm::runtime::watching::stored::NodeMeta;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

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
