//! `/debug/explain/<kind>/<namespace>/<name>` (`/debug/explain/<kind>/<name>` for nodes and
//! StorageVersions) on kcm's listeners, behind the same authorization as `/metrics`: the
//! answer from the leader's own shared stores, as its controllers see them now. Text by
//! default, `?output=json` or `?output=yaml`; `?all=true` lists every object of a quota.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion;
use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;

use super::{ExplainError, Kind, Reads, Request, explain};
use crate::features::FeatureGates;
use crate::runtime::clock::Clock;
use crate::runtime::watching::informer::Informers;
use crate::runtime::watching::stored::NodeMeta;

/// What the endpoint reads.
#[derive(Clone)]
pub struct Endpoint {
    pub informers: Informers,
    pub client: Client,
    pub gates: FeatureGates,
    pub clock: Clock,
    /// Only the leader's stores are the controllers' (a standby may hold none).
    pub leading: Arc<AtomicBool>,
}

/// The routes, to merge into a listener's.
pub fn routes(endpoint: Endpoint) -> Router {
    Router::new()
        .route("/debug/explain/{kind}/{name}", get(cluster_scoped))
        .route("/debug/explain/{kind}/{namespace}/{name}", get(namespaced))
        .with_state(endpoint)
}

async fn cluster_scoped(
    State(endpoint): State<Endpoint>,
    Path((kind, name)): Path<(String, String)>,
    uri: Uri,
) -> Response {
    answer(&endpoint, &kind, String::new(), name, uri.query()).await
}

async fn namespaced(
    State(endpoint): State<Endpoint>,
    Path((kind, namespace, name)): Path<(String, String, String)>,
    uri: Uri,
) -> Response {
    answer(&endpoint, &kind, namespace, name, uri.query()).await
}

fn text(status: StatusCode, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message + "\n",
    )
        .into_response()
}

/// The value of `key` in a query string.
fn query_value<'q>(query: Option<&'q str>, key: &str) -> Option<&'q str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
}

/// Whether the leader watches what `kind` is read from (asking the shared informers for a
/// type nobody watches would start a watch).
fn watched(informers: &Informers, kind: Kind) -> bool {
    match kind {
        Kind::ResourceQuota => informers.is_started::<ResourceQuota>(),
        Kind::PodDisruptionBudget => informers.is_started::<PodDisruptionBudget>(),
        Kind::ResourceClaim | Kind::Pod => informers.is_started::<ResourceClaim>(),
        Kind::Node => informers.is_started::<NodeMeta>(),
        Kind::StorageVersion => informers.is_started::<StorageVersion>(),
    }
}

async fn answer(
    endpoint: &Endpoint,
    kind: &str,
    namespace: String,
    name: String,
    query: Option<&str>,
) -> Response {
    let Some(kind) = Kind::parse(kind) else {
        return text(
            StatusCode::NOT_FOUND,
            ExplainError::UnknownKind(kind.into()).to_string(),
        );
    };
    if kind.namespaced() == namespace.is_empty() {
        let shape = if kind.namespaced() {
            "<kind>/<namespace>/<name>"
        } else {
            "<kind>/<name>"
        };
        return text(
            StatusCode::NOT_FOUND,
            format!("{} is explained at /debug/explain/{shape}", kind.api_kind()),
        );
    }
    if !endpoint.leading.load(Ordering::SeqCst) {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not the leader: ask the replica holding the lease".into(),
        );
    }
    if !watched(&endpoint.informers, kind) {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the controller of {} does not run here", kind.api_kind()),
        );
    }
    let request = Request {
        kind,
        namespace,
        name,
        all: query_value(query, "all") == Some("true"),
    };
    let reads = Reads {
        informers: &endpoint.informers,
        client: &endpoint.client,
        gates: &endpoint.gates,
        now: Time((endpoint.clock)()),
    };
    let explanation = match explain(&reads, &request).await {
        Ok(explanation) => explanation,
        Err(err @ ExplainError::NotFound { .. }) => {
            return text(StatusCode::NOT_FOUND, err.to_string());
        }
        Err(err) => return text(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()),
    };
    let body = match query_value(query, "output") {
        Some("json") => serde_json::to_string_pretty(&explanation)
            .map(|json| (json, "application/json"))
            .map_err(|err| err.to_string()),
        Some("yaml") => serde_yaml_ng::to_string(&explanation)
            .map(|yaml| (yaml, "application/yaml"))
            .map_err(|err| err.to_string()),
        _ => Ok((explanation.to_text(), "text/plain; charset=utf-8")),
    };
    match body {
        Ok((body, content_type)) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(message) => text(StatusCode::INTERNAL_SERVER_ERROR, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values() {
        assert_eq!(
            query_value(Some("output=json&all=true"), "all"),
            Some("true")
        );
        assert_eq!(query_value(Some("output=json"), "output"), Some("json"));
        assert_eq!(query_value(Some("outputs=json"), "output"), None);
        assert_eq!(query_value(None, "output"), None);
    }
}
