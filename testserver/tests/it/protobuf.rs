//! `application/vnd.kubernetes.protobuf` on the wire: bodies as kubectl's typed clients send
//! them, and answers for a client that accepts nothing else.

use crate::common;

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::ResourceExt;
use kube::api::Api;
use kube_testserver::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The exact body kubectl 1.32 sends for `kubectl create namespace demo`.
const CREATE_NAMESPACE_DEMO: &[u8] = b"k8s\x00\n\x0f\n\x02v1\x12\tNamespace\x12\x1c\n\x14\n\x04demo\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x00\x1a\x02\n\x00\x1a\x00\"\x00";

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// One request over a fresh connection: status code, header block and raw body.
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).to_lowercase();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head, raw[split + 4..].to_vec())
}

/// As a server (or aggregated API) that answers only JSON.
#[tokio::test]
async fn protobuf_create_is_stored_and_answered_in_json_when_json_is_accepted() {
    let server = common::start_with(|o| o.protobuf = false).await;
    let (status, head, body) = request(
        server.addr(),
        "POST",
        "/api/v1/namespaces?fieldManager=kubectl-create",
        &[
            ("Content-Type", PROTOBUF),
            (
                "Accept",
                "application/vnd.kubernetes.protobuf,application/json",
            ),
        ],
        CREATE_NAMESPACE_DEMO,
    )
    .await;
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    assert!(head.contains("content-type: application/json"), "{head}");
    let created: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(created["metadata"]["name"], "demo");
    let ns = Api::<Namespace>::all(server.client())
        .get("demo")
        .await
        .unwrap();
    assert!(ns.metadata.uid.is_some());
    // Unset fields travel as empty strings in protobuf; they stay unset.
    assert_eq!(ns.metadata.generate_name, None);
    assert!(ns.metadata.creation_timestamp.is_some());
}

#[tokio::test]
async fn protobuf_only_clients_get_406_for_what_cannot_be_written_and_undecodable_bodies_are_400() {
    let server = TestServer::start().await;
    let addr = server.addr();
    let only = [("Accept", PROTOBUF), ("Content-Type", "application/json")];
    // Node is outside the codec's table: refused before the write, so nothing is created.
    let node = br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}"#;
    let (status, _, body) = request(addr, "POST", "/api/v1/nodes", &only, node).await;
    assert_eq!(status, 406, "{}", String::from_utf8_lossy(&body));
    let err: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(err["reason"], "NotAcceptable");
    assert!(
        Api::<Node>::all(server.client())
            .get_opt("n1")
            .await
            .unwrap()
            .is_none()
    );
    // Watch streams are JSON only.
    let (status, _, _) = request(addr, "GET", "/api/v1/namespaces?watch=true", &only, &[]).await;
    assert_eq!(status, 406);

    let headers = [
        ("Content-Type", PROTOBUF),
        ("Accept", "application/vnd.kubernetes.protobuf, */*"),
    ];
    let bad = |body: &'static [u8]| request(addr, "POST", "/api/v1/namespaces", &headers, body);
    let message = |body: Vec<u8>| {
        let err: serde_json::Value = serde_json::from_slice(&body).unwrap();
        err["message"].as_str().unwrap().to_string()
    };
    let (status, _, body) = bad(b"k8s\0\n\xff").await;
    assert_eq!(status, 400);
    assert_eq!(
        message(body),
        "the body of the request could not be decoded as application/vnd.kubernetes.protobuf: invalid protobuf: truncated varint"
    );
    // A kind outside the decoder's table is refused with a way out, never half-read.
    let (status, _, body) = bad(b"k8s\0\n\x0a\n\x02v1\x12\x04Node").await;
    assert_eq!(status, 400);
    assert!(
        message(body)
            .ends_with("kube-testserver does not read v1 Node in protobuf; send it as JSON")
    );
}

#[tokio::test]
async fn protobuf_only_get_answers_the_stored_object_in_protobuf() {
    let server = TestServer::start().await;
    let addr = server.addr();
    let json = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
    ];
    let objects: [(&str, serde_json::Value); 3] = [
        (
            "/apis/apps/v1/namespaces/default/deployments",
            serde_json::json!({ "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": { "name": "web", "labels": { "app": "web" } },
                // `strategy` and `resources` are Go structs, not pointers: protobuf always carries
                // them, so they are given here as the real apiserver's defaulted JSON has them.
                "spec": { "replicas": 2, "selector": { "matchLabels": { "app": "web" } },
                    "strategy": {},
                    "template": { "metadata": { "labels": { "app": "web" } },
                        "spec": { "containers": [{ "name": "pause", "image": "pause", "resources": {} }] } } } }),
        ),
        (
            "/api/v1/namespaces/default/resourcequotas",
            serde_json::json!({ "apiVersion": "v1", "kind": "ResourceQuota",
                "metadata": { "name": "q" },
                "spec": { "hard": { "pods": "3", "requests.cpu": "1500m" } } }),
        ),
        (
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            serde_json::json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": { "name": "web" },
                "spec": { "maxUnavailable": "50%", "selector": { "matchLabels": { "app": "web" } } } }),
        ),
    ];
    for (collection, object) in objects {
        let body = serde_json::to_vec(&object).unwrap();
        let (status, _, created) = request(addr, "POST", collection, &json, &body).await;
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&created));
        let path = format!(
            "{collection}/{}",
            object["metadata"]["name"].as_str().unwrap()
        );
        let (status, _, stored) = request(addr, "GET", &path, &json, &[]).await;
        assert_eq!(status, 200);
        let stored: serde_json::Value = serde_json::from_slice(&stored).unwrap();

        let only = [(
            "Accept",
            "application/vnd.kubernetes.protobuf; charset=binary",
        )];
        let (status, head, answer) = request(addr, "GET", &path, &only, &[]).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        assert!(
            head.contains(&format!("content-type: {PROTOBUF}")),
            "{head}"
        );
        assert!(answer.starts_with(b"k8s\0"));
        assert_eq!(kube_testserver::decode_protobuf(&answer).unwrap(), stored);

        // The list of one item holds the same object.
        let (status, _, list) = request(addr, "GET", collection, &only, &[]).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&list));
        let (_, _, json_list) = request(addr, "GET", collection, &json, &[]).await;
        let json_list: serde_json::Value = serde_json::from_slice(&json_list).unwrap();
        assert_eq!(
            list,
            kube_testserver::encode_protobuf(&json_list).unwrap(),
            "list"
        );
    }
    // Errors are `Status` messages in protobuf, with the same code.
    let only = [("Accept", PROTOBUF)];
    let path = "/apis/apps/v1/namespaces/default/deployments/missing";
    let (status, head, answer) = request(addr, "GET", path, &only, &[]).await;
    assert_eq!(status, 404);
    assert!(
        head.contains(&format!("content-type: {PROTOBUF}")),
        "{head}"
    );
    let (_, _, json_answer) = request(addr, "GET", path, &json, &[]).await;
    assert_eq!(
        kube_testserver::decode_protobuf(&answer).unwrap(),
        serde_json::from_slice::<serde_json::Value>(&json_answer).unwrap()
    );
}

/// What client-go and kcm ask for: protobuf first, JSON accepted.
const PROTOBUF_FIRST: &str = "application/vnd.kubernetes.protobuf, application/json";

/// The frames of a protobuf watch stream: a 4-byte big-endian length, then a bare
/// `metav1.WatchEvent` {type = 1, object = 2 {raw = 1}}; each event's type and its object
/// decoded from the object's own `k8s\0` envelope.
fn watch_frames(mut body: &[u8]) -> Vec<(String, serde_json::Value)> {
    let mut events = Vec::new();
    while !body.is_empty() {
        let len = u32::from_be_bytes(body[..4].try_into().unwrap()) as usize;
        let event = &body[4..4 + len];
        body = &body[4 + len..];
        // type = 1 (one length byte), then object = 2 holding raw = 1.
        assert_eq!(event[0], 0x0a);
        let type_len = event[1] as usize;
        let kind = String::from_utf8(event[2..2 + type_len].to_vec()).unwrap();
        let rest = &event[2 + type_len..];
        assert_eq!(rest[0], 0x12);
        let raw = skip_key_and_length(rest);
        assert_eq!(raw[0], 0x0a);
        let object = skip_key_and_length(raw);
        events.push((kind, kube_testserver::decode_protobuf(object).unwrap()));
    }
    events
}

/// A chunked HTTP/1.1 body's data.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut data = Vec::new();
    loop {
        let line = body.windows(2).position(|w| w == b"\r\n").unwrap();
        let len = usize::from_str_radix(std::str::from_utf8(&body[..line]).unwrap(), 16).unwrap();
        if len == 0 {
            return data;
        }
        data.extend_from_slice(&body[line + 2..line + 2 + len]);
        body = &body[line + 2 + len + 2..];
    }
}

/// A length-delimited field's bytes (after its one-byte key and its varint length).
fn skip_key_and_length(field: &[u8]) -> &[u8] {
    let mut at = 1;
    let mut len = 0usize;
    let mut shift = 0;
    loop {
        let byte = field[at];
        at += 1;
        len |= usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            break;
        }
    }
    &field[at..at + len]
}

#[tokio::test]
async fn pods_and_node_metadata_are_listed_and_watched_in_protobuf_when_asked_first() {
    let server = TestServer::start().await;
    let addr = server.addr();
    let json = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
    ];
    let pod = serde_json::json!({ "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "web-1", "namespace": "default", "labels": { "app": "web" } },
        "spec": { "nodeName": "n1", "containers": [{ "name": "web", "image": "web",
            "resources": { "requests": { "cpu": "100m" } } }] },
        "status": { "phase": "Running", "qosClass": "Burstable",
            "conditions": [{ "type": "Ready", "status": "True", "lastTransitionTime": "2026-11-01T10:00:05Z" }] } });
    let body = serde_json::to_vec(&pod).unwrap();
    let path = "/api/v1/namespaces/default/pods";
    let (status, _, created) = request(addr, "POST", path, &json, &body).await;
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&created));
    let node =
        br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","annotations":{"a":"b"}}}"#;
    let (status, _, _) = request(addr, "POST", "/api/v1/nodes", &json, node).await;
    assert_eq!(status, 201);
    let (_, _, stored) = request(addr, "GET", &format!("{path}/web-1"), &json, &[]).await;
    let stored: serde_json::Value = serde_json::from_slice(&stored).unwrap();

    let first = [("Accept", PROTOBUF_FIRST)];
    let (status, head, list) = request(addr, "GET", "/api/v1/pods", &first, &[]).await;
    assert_eq!(status, 200);
    assert!(
        head.contains(&format!("content-type: {PROTOBUF}")),
        "{head}"
    );
    let (_, _, json_list) = request(addr, "GET", "/api/v1/pods", &json, &[]).await;
    let json_list: serde_json::Value = serde_json::from_slice(&json_list).unwrap();
    assert_eq!(list, kube_testserver::encode_protobuf(&json_list).unwrap());

    // A streamed initial state: the pod, then the bookmark that ends it, each a frame.
    let watch = "/api/v1/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1";
    let (status, head, frames) = request(addr, "GET", watch, &first, &[]).await;
    assert_eq!(status, 200);
    assert!(
        head.contains("content-type: application/vnd.kubernetes.protobuf;stream=watch"),
        "{head}"
    );
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let events = watch_frames(&dechunk(&frames));
    assert_eq!(events[0], ("ADDED".to_string(), stored.clone()));
    assert_eq!(events[1].0, "BOOKMARK");
    assert_eq!(
        events[1].1["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );

    // Metadata only, as client-go's metadata client asks for it.
    let metadata = [(
        "Accept",
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json",
    )];
    let (status, head, list) = request(addr, "GET", "/api/v1/nodes", &metadata, &[]).await;
    assert_eq!(status, 200);
    assert!(
        head.contains(&format!("content-type: {PROTOBUF}")),
        "{head}"
    );
    let (_, _, json_nodes) = request(addr, "GET", "/api/v1/nodes", &json, &[]).await;
    let json_nodes: serde_json::Value = serde_json::from_slice(&json_nodes).unwrap();
    let expected = serde_json::json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
        "metadata": json_nodes["metadata"],
        "items": [{ "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": json_nodes["items"][0]["metadata"] }],
    });
    assert_eq!(list, kube_testserver::encode_protobuf(&expected).unwrap());

    // JSON first, or a Table: JSON as before.
    for accept in [
        "application/json, application/vnd.kubernetes.protobuf",
        "application/json;as=Table;v=v1;g=meta.k8s.io, application/json",
    ] {
        let (status, head, _) =
            request(addr, "GET", "/api/v1/pods", &[("Accept", accept)], &[]).await;
        assert_eq!(status, 200);
        assert!(
            head.contains("content-type: application/json"),
            "{accept}: {head}"
        );
    }
}

/// What kcm's writer asks for when it reads a write's answer for its resourceVersion alone.
const METADATA_FIRST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";

/// kube-apiserver answers a PUT or PATCH that asks for `as=PartialObjectMetadata` with the
/// written object's metadata alone, in protobuf or in JSON (checked on v1.36.2).
#[tokio::test]
async fn writes_answer_the_written_metadata_alone_when_asked() {
    for protobuf in [true, false] {
        let server = common::start_with(|o| o.protobuf = protobuf).await;
        let addr = server.addr();
        let json = [("Content-Type", "application/json")];
        let node = br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"status":{"capacity":{"cpu":"4"}}}"#;
        let (status, _, _) = request(addr, "POST", "/api/v1/nodes", &json, node).await;
        assert_eq!(status, 201);
        let patch = [
            ("Content-Type", "application/strategic-merge-patch+json"),
            ("Accept", METADATA_FIRST),
        ];
        let annotate = br#"{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"0"}}}"#;
        let (status, head, answer) =
            request(addr, "PATCH", "/api/v1/nodes/n1", &patch, annotate).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        let answer = if protobuf {
            assert!(
                head.contains(&format!("content-type: {PROTOBUF}")),
                "{head}"
            );
            kube_testserver::decode_protobuf(&answer).unwrap()
        } else {
            assert!(head.contains("content-type: application/json"), "{head}");
            serde_json::from_slice(&answer).unwrap()
        };
        let stored = Api::<Node>::all(server.client()).get("n1").await.unwrap();
        assert_eq!(
            answer,
            serde_json::json!({
                "apiVersion": "meta.k8s.io/v1",
                "kind": "PartialObjectMetadata",
                "metadata": serde_json::to_value(&stored.metadata).unwrap(),
            }),
            "protobuf: {protobuf}"
        );
        assert_eq!(
            stored.annotations()["node.alpha.kubernetes.io/ttl"],
            "0",
            "the patch was applied"
        );
        // Asked for the whole object, the whole object comes back.
        let whole = [
            ("Content-Type", "application/strategic-merge-patch+json"),
            ("Accept", "application/json"),
        ];
        let (_, _, answer) = request(addr, "PATCH", "/api/v1/nodes/n1", &whole, annotate).await;
        let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["kind"], "Node");
        assert_eq!(answer["status"]["capacity"]["cpu"], "4");
    }
}
