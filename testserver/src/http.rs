//! The HTTP face of the server: URL routing as the real API server lays it out, discovery,
//! fault injection, the request log, and streaming watches.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, Version, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rand::Rng;
use serde_json::{Value, json};

use crate::codec;
use crate::discovery::{self, group_list};
use crate::error::ApiError;
use crate::faults::{Faults, RequestInfo, RequestRecord};
use crate::rbac;
use crate::resources::{PODS, ResourceType};
use crate::reviews::UserInfo;
use crate::store::{DeleteOptions, ListOptions, PatchType, Store, Subresource, WriteOptions};
use crate::table::{self, Include};
use crate::transport::{Connections, Peer};
use crate::{eviction, pods};

/// Reported by `/version`: the Kubernetes release the server imitates.
pub const KUBERNETES_VERSION: (&str, &str) = ("1", "36");

pub(crate) struct Shared {
    pub store: Arc<Store>,
    pub faults: Arc<Faults>,
    pub reviews: Arc<crate::reviews::Reviews>,
    pub connections: Arc<Connections>,
    pub addr: SocketAddr,
    /// The server's `WatchList` gate: streaming initial lists served, or refused.
    pub watch_list: bool,
    /// See [`crate::Options::protobuf`].
    pub protobuf: bool,
    /// See [`crate::Options::aggregated_discovery`].
    pub aggregated_discovery: bool,
    /// Bytes of every response body sent so far.
    pub bytes_sent: Arc<AtomicU64>,
}

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

type Query = Vec<(String, String)>;

fn param<'a>(query: &'a Query, key: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn flag(query: &Query, key: &str) -> bool {
    matches!(param(query, key), Some("true" | "1"))
}

fn json_response(code: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A 200 in JSON under a more specific media type (`application/json;g=…;v=…;as=…`).
fn typed_json_response(content_type: &'static str, body: &Value) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body.to_string()).into_response()
}

/// The real API server gzips a response body above 128 KiB when the client accepts gzip
/// (`APIResponseCompression`, on by default); watches are streamed as they are.
const GZIP_THRESHOLD: usize = 128 * 1024;

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| e.split(';').next().is_some_and(|c| c.trim() == "gzip"))
}

async fn gzip_large(response: Response) -> Response {
    use std::io::Write;
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "reading the response failed",
        )
            .into_response();
    };
    if bytes.len() <= GZIP_THRESHOLD {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    match encoder.write_all(&bytes).and_then(|()| encoder.finish()) {
        Ok(compressed) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            parts
                .headers
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            Response::from_parts(parts, Body::from(compressed))
        }
        Err(_) => Response::from_parts(parts, Body::from(bytes)),
    }
}

fn error_response(err: &ApiError) -> Response {
    let mut resp = json_response(err.code, &err.to_status());
    if let Some(secs) = err.retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// A resource URL split into its parts.
struct ResourcePath {
    group: String,
    version: String,
    namespace: Option<String>,
    resource: String,
    name: Option<String>,
    subresource: Option<String>,
}

enum Route {
    Version,
    Health,
    CoreVersions,
    Groups,
    Group(String),
    Resources(String, String),
    Resource(ResourcePath),
    OpenApiIndex,
    OpenApiGroupVersion(String),
    Unknown,
}

fn route(path: &str) -> Route {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::Version,
        ["healthz" | "livez" | "readyz", ..] => return Route::Health,
        ["api"] => return Route::CoreVersions,
        ["openapi", "v3"] => return Route::OpenApiIndex,
        ["openapi", "v3", rest @ ..] => return Route::OpenApiGroupVersion(rest.join("/")),
        ["apis"] => return Route::Groups,
        ["apis", g] => return Route::Group(g.to_string()),
        ["api", v] => return Route::Resources(String::new(), v.to_string()),
        ["apis", g, v] => return Route::Resources(g.to_string(), v.to_string()),
        ["api", v, rest @ ..] => (String::new(), v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (g.to_string(), v.to_string(), rest),
        _ => return Route::Unknown,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, resource, tail @ ..] if !matches!(*resource, "status" | "finalize") => {
            (Some(ns.to_string()), [&[*resource][..], tail].concat())
        }
        other => (None, other.to_vec()),
    };
    match rest.as_slice() {
        [resource, tail @ ..] if tail.len() <= 2 => Route::Resource(ResourcePath {
            group,
            version,
            namespace,
            resource: resource.to_string(),
            name: tail.first().map(|s| s.to_string()),
            subresource: tail.get(1).map(|s| s.to_string()),
        }),
        _ => Route::Unknown,
    }
}

fn verb_of(method: &Method, path: &ResourcePath, query: &Query) -> &'static str {
    match (method.as_str(), path.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if flag(query, "watch") => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

/// The name a list or watch asks for with `fieldSelector=metadata.name=<name>`: the real
/// server's RequestInfo carries it, so RBAC's `resourceNames` can grant that one object.
fn selected_name(query: &Query) -> Option<String> {
    param(query, "fieldSelector")?.split(',').find_map(|term| {
        let (field, value) = term.split_once("==").or_else(|| term.split_once('='))?;
        (field.trim() == "metadata.name" && !field.ends_with('!') && !value.is_empty())
            .then(|| value.trim().to_string())
    })
}

/// The field manager the real server derives when none is given: the user agent up to `/`.
fn default_field_manager(user_agent: &str) -> String {
    let manager = user_agent.split('/').next().unwrap_or_default();
    if manager.is_empty() {
        "unknown".into()
    } else {
        manager.into()
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    version: Version,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query: Query = form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    shared
        .connections
        .request(peer.id, &user_agent, version == Version::HTTP_2);
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let route = route(uri.path());
    let info = match &route {
        Route::Resource(p) => RequestInfo {
            verb: verb_of(&method, p, &query).into(),
            group: p.group.clone(),
            resource: p.resource.clone(),
            subresource: p.subresource.clone().unwrap_or_default(),
            namespace: p.namespace.clone().unwrap_or_default(),
            name: p
                .name
                .clone()
                .or_else(|| selected_name(&query))
                .unwrap_or_default(),
        },
        _ => RequestInfo {
            verb: "discovery".into(),
            ..Default::default()
        },
    };
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let protobuf_only = codec::wants_protobuf_only(accept);
    // Protobuf first, JSON accepted: answered in protobuf when it can be written.
    let protobuf = (shared.protobuf && codec::prefers_protobuf(accept) && !protobuf_only)
        .then(|| codec::wants_metadata(accept));
    let (parsed_body, body_error): (Option<Value>, Option<String>) = if body.is_empty() {
        (None, None)
    } else if content_type.starts_with("application/apply-patch+yaml") {
        (serde_yaml_ng::from_slice(&body).ok(), None)
    } else if codec::is_protobuf(&content_type) {
        match codec::decode(&body) {
            Ok(v) => (Some(v), None),
            Err(err) => (None, Some(err.to_string())),
        }
    } else {
        (serde_json::from_slice(&body).ok(), None)
    };

    let verdict = shared.faults.check(&info, &user_agent);
    if !verdict.latency.is_zero() {
        tokio::time::sleep(verdict.latency).await;
    }
    let user = authenticate(&shared, &peer, &headers);
    let access = match &user {
        Some(user) => authorize(&shared, &info, &user_agent, user),
        None => Err(ApiError::new(401, "Unauthorized", "Unauthorized")),
    };
    let response = match (verdict.error, access) {
        (Some((code, retry_after)), _) => {
            let mut err = ApiError::for_code(code, format!("injected fault: {code}"));
            err.retry_after = retry_after;
            error_response(&err)
        }
        (None, Err(refused)) => error_response(&refused),
        // Checked before dispatch so that a write is not made when its answer cannot be sent.
        (None, Ok(())) if protobuf_only && !protobuf_answerable(&shared, &route, &info) => {
            not_acceptable("this request is answered only in application/json".into())
        }
        (None, Ok(())) => {
            let ctx = RequestContext {
                shared: &shared,
                binding_forbidden: user
                    .as_ref()
                    .and_then(|u| binding_forbidden(&shared, &info, &user_agent, u)),
                method: &method,
                query: &query,
                user_agent: &user_agent,
                content_type: &content_type,
                raw_body: &body,
                body: parsed_body.as_ref(),
                body_error: body_error.as_deref(),
                table: table::requested(accept),
                protobuf_watch: protobuf.filter(|_| info.verb == "watch"),
                aggregated_discovery: shared.aggregated_discovery
                    && discovery::aggregated_requested(accept),
            };
            let resp = match dispatch(&ctx, route, &info).await {
                Ok(resp) => resp,
                Err(err) => error_response(&err),
            };
            // Objects and lists, written ones included, in the encoding and form asked for.
            let an_object = matches!(
                info.verb.as_str(),
                "get" | "list" | "create" | "update" | "patch"
            ) && resp.status().is_success();
            match protobuf {
                _ if protobuf_only => protobuf_response(resp).await,
                Some(metadata) if an_object => transcoded(resp, true, metadata).await,
                None if an_object && codec::wants_json_metadata(accept) => {
                    transcoded(resp, false, true).await
                }
                _ => resp,
            }
        }
    };
    let record_body = matches!(
        info.verb.as_str(),
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
    .then(|| parsed_body.clone())
    .flatten();
    let response = if info.verb != "watch" && accepts_gzip(&headers) {
        gzip_large(response).await
    } else {
        response
    };
    let response = counted(response, &shared.bytes_sent);
    shared.faults.record(RequestRecord {
        info,
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().unwrap_or_default().to_string(),
        user_agent,
        user: user.map(|u| u.name).unwrap_or_default(),
        body: record_body,
        code: response.status().as_u16(),
        at: Instant::now(),
    });
    response
}

/// `response`, its body's bytes added to `sent` as they go out (a whole body at once).
fn counted(response: Response, sent: &Arc<AtomicU64>) -> Response {
    if let Some(len) = response.body().size_hint().exact() {
        sent.fetch_add(len, Ordering::Relaxed);
        return response;
    }
    let sent = sent.clone();
    response.map(|body| {
        Body::from_stream(body.into_data_stream().inspect(move |chunk| {
            if let Ok(chunk) = chunk {
                sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
        }))
    })
}

/// Who sent the request, in the API server's authenticator order: the user of its client
/// certificate, else of its bearer token, else the configured token-less user; None when
/// its token is unknown or expired (401, as the API server).
fn authenticate(shared: &Shared, peer: &Peer, headers: &HeaderMap) -> Option<UserInfo> {
    if let Some(user) = &peer.certificate_user {
        return Some(user.clone());
    }
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match bearer {
        Some(token) => shared.reviews.authenticate(token.trim()),
        None => Some(shared.reviews.tokenless_user()),
    }
}

/// The authorizer's verdict on a request: the test's function, or RBAC from the stored roles
/// (non-resource requests, discovery among them, are allowed to everyone, as the bootstrap
/// roles `system:discovery` and `system:public-info-viewer` allow them).
fn authorize(
    shared: &Shared,
    info: &RequestInfo,
    user_agent: &str,
    user: &UserInfo,
) -> Result<(), ApiError> {
    if info.verb == "discovery" {
        return Ok(());
    }
    if !shared.faults.rbac_enforced() {
        return shared
            .faults
            .access(info, user_agent)
            .map_err(ApiError::forbidden);
    }
    let request = info.rbac();
    rbac::authorize(&shared.store, user, &request).map_err(|reason| {
        ApiError::forbidden(rbac::forbidden_message(&user.name, &request, &reason))
    })
}

/// For a write of a ResourceClaim's status, the forbidden message when the user may not
/// change `status.allocation` or `status.reservedFor`: with
/// `DRAResourceClaimGranularStatusAuthorization` (beta, on by default since 1.36) that needs
/// the request's verb on the synthetic subresource `resourceclaims/binding`, cluster-wide.
fn binding_forbidden(
    shared: &Shared,
    info: &RequestInfo,
    user_agent: &str,
    user: &UserInfo,
) -> Option<(String, String)> {
    if info.group != "resource.k8s.io"
        || info.resource != "resourceclaims"
        || info.subresource != "status"
        || !matches!(info.verb.as_str(), "update" | "patch")
    {
        return None;
    }
    let binding = RequestInfo {
        verb: info.verb.clone(),
        group: info.group.clone(),
        resource: info.resource.clone(),
        subresource: "binding".into(),
        namespace: String::new(),
        name: String::new(),
    };
    authorize(shared, &binding, user_agent, user)
        .err()
        .map(|refused| (info.verb.clone(), refused.message))
}

fn not_acceptable(why: String) -> Response {
    error_response(&ApiError::new(
        406,
        "NotAcceptable",
        format!("only the following media types are accepted: application/json: {why}"),
    ))
}

/// Whether a protobuf-only client can be answered: objects and lists (main resource or status)
/// of a kind the codec writes, and the Status that binding and eviction answer with. Watch
/// streams, scale, discovery and other kinds stay JSON only.
fn protobuf_answerable(shared: &Shared, route: &Route, info: &RequestInfo) -> bool {
    let Route::Resource(path) = route else {
        return false;
    };
    info.verb != "watch"
        && matches!(
            path.subresource.as_deref(),
            None | Some("status" | "binding" | "eviction")
        )
        && shared
            .store
            .resource_type(&path.group, &path.resource)
            .is_some_and(|rt| codec::encodes(&rt.api_version(), &rt.kind))
}

/// An answer's head and whole body; a body that cannot be read is a 500.
async fn collected(resp: Response) -> Result<(axum::http::response::Parts, Bytes), Response> {
    let (parts, body) = resp.into_parts();
    axum::body::to_bytes(body, usize::MAX)
        .await
        .map(|bytes| (parts, bytes))
        .map_err(|err| error_response(&ApiError::new(500, "InternalError", err.to_string())))
}

/// `parts` with a new body, in protobuf when `protobuf`.
fn rewritten(mut parts: axum::http::response::Parts, body: Vec<u8>, protobuf: bool) -> Response {
    if protobuf {
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(codec::PROTOBUF),
        );
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

/// A successful JSON answer in the form asked for: as metadata only when `metadata`
/// (`as=PartialObjectMetadata`), in protobuf when `protobuf` and the codec can write it, else
/// in JSON, which the client accepts too.
async fn transcoded(resp: Response, protobuf: bool, metadata: bool) -> Response {
    let (parts, bytes) = match collected(resp).await {
        Ok(collected) => collected,
        Err(failed) => return failed,
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    if metadata {
        value = codec::partial_metadata(&value);
    }
    match codec::encode(&value).ok().filter(|_| protobuf) {
        Some(encoded) => rewritten(parts, encoded, true),
        None if metadata => rewritten(parts, value.to_string().into_bytes(), false),
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

/// A JSON answer re-encoded in protobuf, error `Status` answers included (same code). A success
/// the codec cannot write becomes 406 naming what it lacks; an error it cannot write stays JSON.
async fn protobuf_response(resp: Response) -> Response {
    let (parts, bytes) = match collected(resp).await {
        Ok(collected) => collected,
        Err(failed) => return failed,
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .map_err(|err| err.to_string())
        .and_then(|value| codec::encode(&value).map_err(|err| err.to_string()));
    match encoded {
        Ok(protobuf) => rewritten(parts, protobuf, true),
        Err(why) if parts.status.is_success() => not_acceptable(why),
        Err(_) => Response::from_parts(parts, Body::from(bytes)),
    }
}

struct RequestContext<'a> {
    shared: &'a Shared,
    /// The verb and forbidden message when the user may not bind ResourceClaims.
    binding_forbidden: Option<(String, String)>,
    method: &'a Method,
    query: &'a Query,
    user_agent: &'a str,
    content_type: &'a str,
    raw_body: &'a Bytes,
    body: Option<&'a Value>,
    /// Why a body in a known encoding could not be decoded.
    body_error: Option<&'a str>,
    /// The `meta.k8s.io` Table version `Accept` asks for (`kubectl get`).
    table: Option<&'static str>,
    /// A watch answered in protobuf; `true`: as metadata only.
    protobuf_watch: Option<bool>,
    /// `Accept` asks `/api` and `/apis` for aggregated discovery.
    aggregated_discovery: bool,
}

impl RequestContext<'_> {
    fn body(&self) -> Result<Value, ApiError> {
        match self.body {
            Some(v) => Ok(v.clone()),
            None if self.raw_body.is_empty() => {
                Err(ApiError::bad_request("the request body is empty"))
            }
            None => Err(ApiError::bad_request(match self.body_error {
                Some(why) => format!(
                    "the body of the request could not be decoded as {}: {why}",
                    self.content_type
                ),
                None => format!(
                    "the body of the request could not be decoded as {}",
                    self.content_type
                ),
            })),
        }
    }

    fn write_options(&self) -> WriteOptions {
        WriteOptions {
            dry_run: param(self.query, "dryRun") == Some("All"),
            field_manager: param(self.query, "fieldManager")
                .map(String::from)
                .unwrap_or_else(|| default_field_manager(self.user_agent)),
            force: flag(self.query, "force"),
            binding_forbidden: self.binding_forbidden.clone(),
            fixture: false,
        }
    }

    /// The list (or, with `watch`, watch) options as the server takes them: defaulted and
    /// validated (see [`crate::list_options`]).
    fn list_options(&self, watch: bool) -> Result<ListOptions, ApiError> {
        let q = self.query;
        let opts = ListOptions {
            label_selector: param(q, "labelSelector").map(String::from),
            field_selector: param(q, "fieldSelector").map(String::from),
            limit: param(q, "limit").and_then(|l| l.parse().ok()),
            continue_token: param(q, "continue")
                .filter(|c| !c.is_empty())
                .map(String::from),
            resource_version: param(q, "resourceVersion").map(String::from),
            resource_version_match: param(q, "resourceVersionMatch").map(String::from),
            allow_watch_bookmarks: flag(q, "allowWatchBookmarks"),
            send_initial_events: param(q, "sendInitialEvents").map(|v| v == "true"),
        };
        crate::list_options::resolve(opts, watch, self.shared.watch_list)
    }

    fn delete_options(&self) -> DeleteOptions {
        let body = self.body.cloned().unwrap_or(Value::Null);
        DeleteOptions::parse(&body, |key| param(self.query, key))
    }

    fn patch_type(&self) -> Result<PatchType, ApiError> {
        let ct = self
            .content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim();
        match ct {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" => Ok(PatchType::Apply),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

async fn dispatch(
    ctx: &RequestContext<'_>,
    route: Route,
    info: &RequestInfo,
) -> Result<Response, ApiError> {
    let store = &ctx.shared.store;
    match route {
        Route::Version => Ok(json_response(200, &version_info())),
        Route::Health => Ok((StatusCode::OK, "ok").into_response()),
        Route::CoreVersions | Route::Groups if ctx.aggregated_discovery => {
            let core = matches!(route, Route::CoreVersions);
            Ok(typed_json_response(
                discovery::AGGREGATED_V2,
                &discovery::aggregated(&store.types(), core),
            ))
        }
        Route::CoreVersions => Ok(json_response(
            200,
            &json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    { "clientCIDR": "0.0.0.0/0", "serverAddress": ctx.shared.addr.to_string() }
                ],
            }),
        )),
        Route::Groups => Ok(json_response(200, &group_list(&store.types()))),
        Route::Group(g) => group_list(&store.types())["groups"]
            .as_array()
            .and_then(|groups| groups.iter().find(|x| x["name"] == g.as_str()).cloned())
            .map(|mut group| {
                group["kind"] = json!("APIGroup");
                group["apiVersion"] = json!("v1");
                json_response(200, &group)
            })
            .ok_or_else(|| {
                ApiError::new(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                )
            }),
        Route::Resources(g, v) => {
            let types: Vec<ResourceType> = store
                .types()
                .into_iter()
                .filter(|t| t.group == g && t.version == v)
                .collect();
            if types.is_empty() {
                return Err(ApiError::new(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                ));
            }
            let group_version = if g.is_empty() { v } else { format!("{g}/{v}") };
            let resources: Vec<Value> = types.iter().flat_map(|t| t.discovery_entries()).collect();
            Ok(json_response(
                200,
                &json!({
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": group_version,
                    "resources": resources,
                }),
            ))
        }
        Route::Resource(path) => {
            match ctx
                .shared
                .reviews
                .answer(&path.group, &path.resource, &info.verb, ctx.body)
            {
                Some(review) => review.map(|answer| json_response(201, &answer)),
                None => resource_request(ctx, &path, info).await,
            }
        }
        Route::OpenApiIndex => Ok(json_response(200, &openapi_index(&store.types()))),
        Route::OpenApiGroupVersion(gv) => Ok(json_response(
            200,
            &openapi_group_version(&store.types(), &gv),
        )),
        Route::Unknown => Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )),
    }
}

fn version_info() -> Value {
    let (major, minor) = KUBERNETES_VERSION;
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": format!("v{major}.{minor}.0-testserver"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "none",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}

/// The path of a group-version in the OpenAPI v3 index: `api/v1` or `apis/<group>/<version>`.
fn openapi_gv_path(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        format!("api/{}", rt.version)
    } else {
        format!("apis/{}/{}", rt.group, rt.version)
    }
}

/// Just enough OpenAPI v3 for kubectl: it learns that every type accepts the `fieldValidation`
/// parameter, so it validates server-side instead of downloading full schemas.
fn openapi_index(types: &[ResourceType]) -> Value {
    let paths: serde_json::Map<String, Value> = types
        .iter()
        .map(|rt| {
            let path = openapi_gv_path(rt);
            let url = json!({ "serverRelativeURL": format!("/openapi/v3/{path}") });
            (path, url)
        })
        .collect();
    json!({ "paths": paths })
}

fn openapi_group_version(types: &[ResourceType], gv: &str) -> Value {
    let paths: serde_json::Map<String, Value> = types
        .iter()
        .filter(|rt| openapi_gv_path(rt) == gv)
        .map(|rt| {
            let scope = if rt.namespaced { "namespaces/{namespace}/" } else { "" };
            let operation = json!({
                "x-kubernetes-group-version-kind": { "group": rt.group, "version": rt.version, "kind": rt.kind },
                "parameters": [{ "name": "fieldValidation", "in": "query", "schema": { "type": "string" } }],
                "responses": {},
            });
            (format!("/{gv}/{scope}{}/{{name}}", rt.plural), json!({ "patch": operation }))
        })
        .collect();
    json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.36.0" },
        "paths": paths,
        "components": { "schemas": {} },
    })
}

async fn resource_request(
    ctx: &RequestContext<'_>,
    path: &ResourcePath,
    info: &RequestInfo,
) -> Result<Response, ApiError> {
    let store = &ctx.shared.store;
    let not_found = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    let rt = store
        .resource_type(&path.group, &path.resource)
        .filter(|rt| rt.version == path.version)
        .ok_or_else(not_found)?;
    if path.namespace.is_some() && !rt.namespaced {
        return Err(not_found());
    }
    let ns = path.namespace.clone().unwrap_or_default();
    let name = path.name.clone().unwrap_or_default();
    if rt.namespaced && path.namespace.is_none() && !matches!(info.verb.as_str(), "list" | "watch")
    {
        return Err(not_found());
    }
    let sub = match path.subresource.as_deref() {
        None => Subresource::Main,
        Some("status") if rt.status => Subresource::Status,
        Some("scale") if rt.scale.is_some() => return scale_request(ctx, &rt, &ns, &name),
        Some("token") if rt.key() == "/serviceaccounts" && path.name.is_some() => {
            create_only(info)?;
            // The ServiceAccount must exist: 404 `serviceaccounts "<name>" not found`.
            store.get(&rt, &ns, &name)?;
            let answer = ctx.shared.reviews.token_request(&ns, &name, &ctx.body()?)?;
            return Ok(json_response(201, &answer));
        }
        Some("binding") if rt.key() == PODS && path.name.is_some() => {
            create_only(info)?;
            pods::bind(store, (&ns, &name), &ctx.body()?, &ctx.write_options())?;
            return Ok(json_response(201, &pods::success()));
        }
        Some("eviction") if rt.key() == PODS && path.name.is_some() => {
            create_only(info)?;
            let body = ctx.body()?;
            eviction::evict(store, (&ns, &name), &body, &ctx.write_options()).await?;
            return Ok(json_response(201, &pods::success()));
        }
        Some(_) => return Err(not_found()),
    };
    let ns_filter = path.namespace.as_deref();
    // What `kubectl get` prints: the object or list as a Table, when asked for one.
    let as_table = match ctx.table {
        Some(version) if sub == Subresource::Main => {
            Some((version, Include::parse(param(ctx.query, "includeObject"))?))
        }
        _ => None,
    };
    let read = |body: &Value| match as_table {
        Some(request) => {
            let now = jiff::Timestamp::now();
            json_response(200, &table::table(&rt, body, request, true, now))
        }
        None => json_response(200, body),
    };
    match info.verb.as_str() {
        "get" => Ok(read(&*store.get(&rt, &ns, &name)?)),
        "list" => Ok(read(&store.list(
            &rt,
            ns_filter,
            &ctx.list_options(false)?,
        )?)),
        "watch" => watch_response(ctx, &rt, ns_filter, as_table),
        "create" if sub == Subresource::Main && path.name.is_none() => {
            let created = store.create(&rt, &ns, ctx.body()?, &ctx.write_options())?;
            Ok(json_response(201, &created))
        }
        "update" => Ok(json_response(
            200,
            &*store.update(&rt, &ns, &name, ctx.body()?, sub, &ctx.write_options())?,
        )),
        "patch" => {
            let ty = ctx.patch_type()?;
            let opts = ctx.write_options();
            if ty == PatchType::Apply && param(ctx.query, "fieldManager").is_none() {
                return Err(ApiError::bad_request(
                    "PATCH requests with apply content type must have a fieldManager",
                ));
            }
            let (obj, created) = store.patch(&rt, &ns, &name, (ty, &ctx.body()?), sub, &opts)?;
            Ok(json_response(if created { 201 } else { 200 }, &obj))
        }
        "delete" if sub == Subresource::Main => Ok(json_response(
            200,
            &*store.delete(&rt, &ns, &name, &ctx.delete_options())?,
        )),
        "deletecollection" => Ok(json_response(
            200,
            &store.delete_collection(
                &rt,
                ns_filter,
                &ctx.list_options(false)?,
                &ctx.delete_options(),
            )?,
        )),
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// The subresources that only create (token, binding, eviction) refuse other verbs.
fn create_only(info: &RequestInfo) -> Result<(), ApiError> {
    if info.verb == "create" {
        Ok(())
    } else {
        Err(ApiError::method_not_allowed())
    }
}

fn scale_request(
    ctx: &RequestContext<'_>,
    rt: &ResourceType,
    ns: &str,
    name: &str,
) -> Result<Response, ApiError> {
    let store = &ctx.shared.store;
    match ctx.method.as_str() {
        "GET" => Ok(json_response(200, &store.get_scale(rt, ns, name)?)),
        "PUT" => Ok(json_response(
            200,
            &store.update_scale(rt, ns, name, ctx.body()?, &ctx.write_options())?,
        )),
        "PATCH" => {
            let mut scale = store.get_scale(rt, ns, name)?;
            let body = ctx.body()?;
            match ctx.patch_type()? {
                PatchType::Json => {
                    let ops: json_patch::Patch = serde_json::from_value(body.clone())
                        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
                    json_patch::patch(&mut scale, &ops)
                        .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?;
                }
                _ => json_patch::merge(&mut scale, &body),
            }
            // The patch body decides optimistic locking, not the fetched Scale.
            if body["metadata"]["resourceVersion"].is_null()
                && let Some(m) = scale["metadata"].as_object_mut()
            {
                m.remove("resourceVersion");
            }
            Ok(json_response(
                200,
                &store.update_scale(rt, ns, name, scale, &ctx.write_options())?,
            ))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// A watch event with its object as a one-row Table, as `kubectl get -w` asks; the column
/// definitions go with the first event only. Bookmarks and errors pass as they are.
fn table_frame(
    rt: &ResourceType,
    bytes: Bytes,
    request: (&'static str, Include),
    headers: &mut bool,
) -> Bytes {
    let Ok(mut event) = serde_json::from_slice::<Value>(&bytes) else {
        return bytes;
    };
    if !matches!(
        event["type"].as_str(),
        Some("ADDED" | "MODIFIED" | "DELETED")
    ) {
        return bytes;
    }
    let now = jiff::Timestamp::now();
    event["object"] = table::table(rt, &event["object"], request, *headers, now);
    *headers = false;
    let mut text = event.to_string();
    text.push('\n');
    Bytes::from(text)
}

/// How long a watch lasts when the client gives no timeoutSeconds: the real server picks a
/// random span between its minimum request timeout (30 min) and twice that.
fn default_watch_timeout() -> Duration {
    Duration::from_secs(rand::rng().random_range(1800..3600))
}

fn watch_response(
    ctx: &RequestContext<'_>,
    rt: &ResourceType,
    ns: Option<&str>,
    as_table: Option<(&'static str, Include)>,
) -> Result<Response, ApiError> {
    let timeout = param(ctx.query, "timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or_else(default_watch_timeout);
    let rx = ctx.shared.store.watch(rt, ns, &ctx.list_options(true)?)?;
    let deadline = tokio::time::Instant::now() + timeout;
    let rt = rt.clone();
    let mut headers = true;
    // Protobuf when asked first and every object of the kind can be written; an object that
    // cannot ends the watch with an ERROR event.
    let protobuf = ctx
        .protobuf_watch
        .filter(|metadata| *metadata || codec::encodes(&rt.api_version(), &rt.kind))
        .filter(|_| as_table.is_none());
    let stream = futures::stream::unfold((rx, false), move |(mut rx, done)| async move {
        if done {
            return None;
        }
        let frame = tokio::select! {
            frame = rx.recv() => frame?,
            _ = tokio::time::sleep_until(deadline) => return None,
        };
        if let Some(at) = frame.deliver_at {
            tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
        }
        Some((Ok::<_, Infallible>(frame.bytes), (rx, frame.last)))
    })
    .map(move |bytes| match as_table {
        Some(request) => Ok(table_frame(&rt, bytes?, request, &mut headers)),
        None => bytes,
    });
    let content_type = match protobuf {
        Some(_) => "application/vnd.kubernetes.protobuf;stream=watch",
        None => "application/json",
    };
    let stream = match protobuf {
        Some(metadata) => protobuf_frames(stream, metadata).boxed(),
        None => stream.boxed(),
    };
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache, private"),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

/// A JSON watch stream's events re-encoded as protobuf frames (see
/// [`codec::encode_watch_event`]); one the codec cannot write becomes an ERROR event, the last.
fn protobuf_frames(
    events: impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
    metadata: bool,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    events
        .map(move |bytes| {
            let Ok(bytes) = bytes;
            let mut event: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            if metadata && event["type"] != "ERROR" {
                event["object"] = codec::partial_metadata(&event["object"]);
            }
            codec::encode_watch_event(&event).map_err(|err| {
                let status = ApiError::new(
                    500,
                    "InternalError",
                    format!("this object cannot be sent in protobuf: {err}"),
                );
                let error = json!({ "type": "ERROR", "object": status.to_status() });
                codec::encode_watch_event(&error).expect("a Status is written in protobuf")
            })
        })
        .scan(false, |failed, frame| {
            let frame = match frame {
                _ if *failed => return futures::future::ready(None),
                Ok(frame) => frame,
                Err(error) => {
                    *failed = true;
                    error
                }
            };
            futures::future::ready(Some(Ok(Bytes::from(frame))))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_selector_on_metadata_name_names_the_list_or_watch() {
        let query =
            |selector: &str| -> Query { vec![("fieldSelector".to_string(), selector.to_string())] };
        assert_eq!(
            selected_name(&query("metadata.name=extension-apiserver-authentication")).as_deref(),
            Some("extension-apiserver-authentication")
        );
        assert_eq!(
            selected_name(&query("metadata.namespace=a,metadata.name==b")).as_deref(),
            Some("b")
        );
        assert_eq!(selected_name(&query("metadata.name!=b")), None);
        assert_eq!(selected_name(&Query::default()), None);
    }
}
