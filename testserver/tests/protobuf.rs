//! `application/vnd.kubernetes.protobuf` on the wire: bodies as kubectl's typed clients send
//! them, and answers for a client that accepts nothing else.

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Namespace;
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

#[tokio::test]
async fn protobuf_create_is_stored_and_answered_in_json_when_json_is_accepted() {
    let server = TestServer::start().await;
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
async fn protobuf_only_clients_get_406_and_undecodable_bodies_are_400() {
    let server = TestServer::start().await;
    let addr = server.addr();
    let only = [("Accept", PROTOBUF), ("Content-Type", PROTOBUF)];
    let (status, _, body) = request(
        addr,
        "POST",
        "/api/v1/namespaces",
        &only,
        CREATE_NAMESPACE_DEMO,
    )
    .await;
    assert_eq!(status, 406, "{}", String::from_utf8_lossy(&body));
    let err: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(err["reason"], "NotAcceptable");
    let (status, _, _) = request(addr, "GET", "/api/v1/namespaces", &only, &[]).await;
    assert_eq!(status, 406);
    assert!(
        Api::<Namespace>::all(server.client())
            .get_opt("demo")
            .await
            .unwrap()
            .is_none()
    );

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
