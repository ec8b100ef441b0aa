//! What one status write costs kcm's own CPU in each layer of its HTTP client, to tell what a
//! leaner client would save. The same PUT of a ResourceQuota's status as kcm's writer sends
//! (protobuf body, the answer asked as metadata), `WRITES` times one after the other, through:
//!
//! 1. kcm's client: kube's `Client` (its `Buffer`), kcm's `Throttled` (token, metrics), then 2;
//! 2. the transport stack alone: kube's base-URI, retry, auth and header layers over 3;
//! 3. hyper-util's pooled client alone, with kube's TLS connector;
//! 4. one hyper HTTP/1 connection over the same connector, no pool.
//!
//! The CPU is this process's own (every thread's scheduler run time), the server another
//! process. Run against any API server, e.g. `kube-testserver --tls --kubeconfig-out k.yaml`:
//! `cargo run --release --example client_cost -- k.yaml`.

use std::time::Duration;

use http::{Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaSpec, ResourceQuotaStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kcm::runtime::connection::client::{Clients, load_config};
use kcm::runtime::connection::restclient::RestClientMetrics;
use kcm::runtime::connection::transport;
use kcm::runtime::protobuf::{self, ContentType, METADATA_ACCEPT, PROTOBUF, ProtobufBody};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::client::ConfigExt;
use tower::{Service, ServiceExt};

const WRITES: usize = 3000;
const WARM_UP: usize = 200;
const NAMESPACE: &str = "default";
const NAME: &str = "client-cost";

/// CPU time of every thread of this process so far.
fn cpu() -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let path = task.expect("task").path().join("schedstat");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        total += text
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(total)
}

fn quota(used_pods: usize) -> ResourceQuota {
    let hard = [("pods".to_string(), Quantity("100".into()))].into();
    let used = [("pods".to_string(), Quantity(used_pods.to_string()))].into();
    ResourceQuota {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            namespace: Some(NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        spec: Some(ResourceQuotaSpec {
            hard: Some(hard),
            ..ResourceQuotaSpec::default()
        }),
        status: Some(ResourceQuotaStatus {
            hard: Some([("pods".to_string(), Quantity("100".into()))].into()),
            used: Some(used),
        }),
    }
}

/// The status PUT kcm's writer sends, relative to the cluster URL.
fn put(i: usize) -> Request<Vec<u8>> {
    let body = quota(i % 50)
        .protobuf_body()
        .expect("quotas encode to protobuf");
    let url = format!("/api/v1/namespaces/{NAMESPACE}/resourcequotas");
    let mut request = kube::core::Request::new(url)
        .replace_subresource("status", NAME, &PostParams::default(), body)
        .expect("a valid request");
    let headers = request.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, PROTOBUF.parse().expect("valid"));
    headers.insert(
        http::header::ACCEPT,
        METADATA_ACCEPT.parse().expect("valid"),
    );
    request
}

fn absolute(request: Request<Vec<u8>>, base: &Uri) -> Request<Vec<u8>> {
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = format!("{}{}", base.to_string().trim_end_matches('/'), path)
        .parse()
        .expect("a valid URI");
    Request::from_parts(parts, body)
}

/// Runs `WARM_UP` then `WRITES` writes through `write`; prints the CPU per timed write.
async fn measure(label: &str, mut write: impl AsyncFnMut(usize)) {
    for i in 0..WARM_UP {
        write(i).await;
    }
    let before = cpu();
    for i in 0..WRITES {
        write(i).await;
    }
    let per_write = (cpu() - before) / WRITES as u32;
    println!("{label}: {} µs of CPU per write", per_write.as_micros());
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let kubeconfig = std::env::args()
        .nth(1)
        .expect("usage: client_cost KUBECONFIG");
    let config = load_config(Some(kubeconfig.as_ref()))
        .await
        .expect("kubeconfig");
    let base = config.cluster_url.clone();
    let metrics = RestClientMetrics::register(&prometheus::Registry::new()).expect("metrics");
    let clients = Clients::new(config.clone(), 1e6, 1_000_000, "client-cost", metrics);
    let client = clients.client("client-cost").expect("client");
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), NAMESPACE);
    if quotas
        .get_opt(NAME)
        .await
        .expect("reading the quota")
        .is_none()
    {
        quotas
            .create(&PostParams::default(), &quota(0))
            .await
            .expect("creating the quota");
    }

    measure(
        "1. kcm's client (kube Client, Buffer, Throttled, 2)",
        async |i| {
            protobuf::write(&client, put(i), ContentType::Protobuf)
                .await
                .expect("write");
        },
    )
    .await;

    let mut stack = transport::stack(&config).expect("transport stack");
    measure(
        "2. the transport stack (base URI, retry, auth, headers, 3)",
        async |i| {
            let request = put(i).map(kube::client::Body::from);
            let ready = stack.ready().await.expect("stack ready");
            let response = ready.call(request).await.expect("write");
            response.into_body().collect().await.expect("answer");
        },
    )
    .await;

    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let connector = config
        .rustls_https_connector_with_connector(http)
        .expect("TLS connector");
    let pooled = hyper_util::client::legacy::Builder::new(TokioExecutor::new())
        .build::<_, Full<bytes::Bytes>>(connector.clone());
    measure("3. hyper-util's pooled client", async |i| {
        let request = absolute(put(i), &base).map(|b| Full::new(bytes::Bytes::from(b)));
        let response = pooled.request(request).await.expect("write");
        response.into_body().collect().await.expect("answer");
    })
    .await;

    let mut connector = connector;
    let stream = connector.call(base.clone()).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(stream)
        .await
        .expect("handshake");
    tokio::spawn(connection);
    let host = base.authority().expect("a host").to_string();
    measure("4. one hyper HTTP/1 connection", async |i| {
        let mut request = put(i).map(|b| Full::new(bytes::Bytes::from(b)));
        request
            .headers_mut()
            .insert(http::header::HOST, host.parse().expect("valid"));
        sender.ready().await.expect("connection ready");
        let response = sender.send_request(request).await.expect("write");
        response.into_body().collect().await.expect("answer");
    })
    .await;
}
