//! Authentication, RBAC from stored roles, TokenRequest and the ResourceClaim binding rule, as
//! the API server has them, through kube-rs's own client.

use crate::common;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use kube_testserver::{TestServer, UserInfo};
use serde_json::{Value, json};

fn api_error(err: kube::Error) -> Status {
    match err {
        kube::Error::Api(status) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn client_of(kubeconfig: &Path) -> kube::Client {
    let file = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// A client whose requests carry `token`.
fn client_with_token(server: &TestServer, token: &str) -> kube::Client {
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.auth_info.token = Some(token.to_string().into());
    kube::Client::try_from(config).unwrap()
}

fn seed(server: &TestServer, objects: Value) {
    for object in objects.as_array().unwrap() {
        server.seed(object.clone()).unwrap();
    }
}

/// Alice may read ConfigMaps in `default` (a Role), everyone authenticated may list
/// namespaces (a ClusterRole bound to a group), and a binding names a role that is not there.
fn alices_roles(server: &TestServer) {
    seed(
        server,
        json!([
            { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
              "metadata": { "name": "reader", "namespace": "default" },
              "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"] }] },
            { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
              "metadata": { "name": "alice-reads", "namespace": "default" },
              "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader" },
              "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice" }] },
            { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
              "metadata": { "name": "ns-lister" },
              "rules": [{ "apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"] }] },
            { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
              "metadata": { "name": "everyone-lists-namespaces" },
              "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ns-lister" },
              "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated" }] },
        ]),
    );
}

#[tokio::test]
async fn stored_roles_decide_and_refusals_read_as_the_api_servers() {
    let server = TestServer::start().await;
    alices_roles(&server);
    server.enforce_rbac();
    let alice = client_of(&server.kubeconfig_as(&UserInfo::new("alice", &[])).unwrap()).await;
    let in_default: Api<ConfigMap> = Api::namespaced(alice.clone(), "default");
    in_default.list(&ListParams::default()).await.unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(alice.clone());
    namespaces.list(&ListParams::default()).await.unwrap();

    assert_eq!(
        api_error(in_default.get("missing").await.unwrap_err()).code,
        404,
        "allowed: not found, not forbidden"
    );
    let other: Api<ConfigMap> = Api::namespaced(alice.clone(), "kube-system");
    let status = api_error(other.get("cm").await.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        "configmaps \"cm\" is forbidden: User \"alice\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"kube-system\""
    );
    let status = api_error(
        in_default
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({ "metadata": { "name": "x" } })).unwrap(),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        status.message,
        "configmaps is forbidden: User \"alice\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    // A binding that names a missing role is the reason RBAC gives.
    seed(
        &server,
        json!([{ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": { "name": "dangling" },
                 "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gone" },
                 "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice" }] }]),
    );
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(alice);
    let status = api_error(nodes.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        status.message,
        "nodes is forbidden: User \"alice\" cannot list resource \"nodes\" in API group \"\" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found"
    );
    // Discovery is everyone's; the credential-less admin may do anything.
    kube::discovery::Discovery::new(
        client_of(&server.kubeconfig_as(&UserInfo::new("bob", &[])).unwrap()).await,
    )
    .run()
    .await
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Node>::all(server.client())
        .list(&ListParams::default())
        .await
        .unwrap();
    let users: Vec<String> = server.requests().iter().map(|r| r.user.clone()).collect();
    assert!(
        users.contains(&"alice".to_string()) && users.contains(&"system:admin".to_string()),
        "{users:?}"
    );
}

#[tokio::test]
async fn unknown_tokens_get_401_and_the_tokenless_user_can_be_anonymous() {
    let server = TestServer::start().await;
    let maps: Api<ConfigMap> =
        Api::namespaced(client_with_token(&server, "nobody-issued-this"), "default");
    let status = api_error(maps.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        (status.code, status.reason.as_str(), status.message.as_str()),
        (401, "Unauthorized", "Unauthorized")
    );

    server.enforce_rbac();
    server.reviews().set_tokenless_user(UserInfo::anonymous());
    let anonymous: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let status = api_error(anonymous.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        status.message,
        "configmaps is forbidden: User \"system:anonymous\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
}

/// A TokenRequest for `kube-system/ttl-controller` of `seconds`.
async fn ask_token(
    accounts: &Api<ServiceAccount>,
    seconds: i64,
) -> Result<TokenRequest, kube::Error> {
    let request: TokenRequest =
        serde_json::from_value(json!({ "spec": { "expirationSeconds": seconds } })).unwrap();
    accounts
        .create_token_request("ttl-controller", &PostParams::default(), &request)
        .await
}

#[tokio::test]
async fn token_requests_issue_service_account_tokens_that_expire() {
    let server = TestServer::start().await;
    let accounts: Api<ServiceAccount> = Api::namespaced(server.client(), "kube-system");
    let err = ask_token(&accounts, 3600).await.unwrap_err();
    let status = api_error(err);
    assert_eq!(
        (status.code, status.message.as_str()),
        (404, "serviceaccounts \"ttl-controller\" not found")
    );
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "ttl-controller" } })).unwrap(),
        )
        .await
        .unwrap();
    let status = api_error(ask_token(&accounts, 60).await.unwrap_err());
    assert_eq!(
        (status.code, status.message.as_str()),
        (
            422,
            "TokenRequest.authentication.k8s.io \"ttl-controller\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
        )
    );

    // The server's maximum caps what is asked for.
    server
        .reviews()
        .set_max_token_expiration(Duration::from_secs(1));
    let answer = ask_token(&accounts, 3600).await.unwrap();
    assert_eq!(
        answer.spec.as_ref().and_then(|s| s.expiration_seconds),
        Some(1)
    );
    let status = answer.status.unwrap();
    let token = status.token.unwrap();
    assert!(status.expiration_timestamp.is_some());
    assert_eq!(
        server
            .reviews()
            .issued_tokens("system:serviceaccount:kube-system:ttl-controller"),
        std::slice::from_ref(&token)
    );

    // The token authenticates as the ServiceAccount, with its groups, until it expires.
    seed(
        &server,
        json!([
            { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": { "name": "sa-maps" },
              "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"] }] },
            { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": { "name": "sa-maps" },
              "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sa-maps" },
              "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:serviceaccounts:kube-system" }] },
        ]),
    );
    server.enforce_rbac();
    let maps: Api<ConfigMap> = Api::namespaced(client_with_token(&server, &token), "default");
    maps.list(&ListParams::default()).await.unwrap();
    let logged = server.requests().last().unwrap().user.clone();
    assert_eq!(logged, "system:serviceaccount:kube-system:ttl-controller");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match maps.list(&ListParams::default()).await {
            Ok(_) => assert!(
                std::time::Instant::now() < deadline,
                "the token never expired"
            ),
            Err(err) => {
                assert_eq!(api_error(err).code, 401);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Claim `default/gpu`, made by the admin.
async fn gpu_claim(server: &TestServer) -> Api<ResourceClaim> {
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), "default");
    claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "gpu" }, "spec": {} })).unwrap(),
        )
        .await
        .unwrap();
    claims
}

/// A claim with an allocation, and a user allowed to write claims' status but not to bind.
async fn claim_and_writer(server: &TestServer, binding_verbs: &[&str]) -> Api<ResourceClaim> {
    let claims = gpu_claim(server).await;
    common::merge_patch(
        &claims,
        "gpu",
        Some("status"),
        json!({ "status": { "allocation": { "devices": { "results": [] } } } }),
    )
    .await
    .unwrap();
    let mut rules = vec![
        json!({ "apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceclaims/status"], "verbs": ["get", "update", "patch"] }),
    ];
    if !binding_verbs.is_empty() {
        rules.push(json!({ "apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/binding"], "verbs": binding_verbs }));
    }
    seed(
        server,
        json!([
            { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": { "name": "claims" }, "rules": rules },
            { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": { "name": "claims" },
              "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "claims" },
              "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "writer" }] },
        ]),
    );
    server.enforce_rbac();
    Api::namespaced(
        client_of(&server.kubeconfig_as(&UserInfo::new("writer", &[])).unwrap()).await,
        "default",
    )
}

/// An allocation: valid on an unallocated claim, so only the binding permission is at stake.
fn allocation() -> Value {
    json!({ "status": { "allocation": { "devices": { "results": [] } } } })
}

fn reservation() -> Value {
    json!({ "status": { "reservedFor": [{ "resource": "pods", "name": "p", "uid": "u" }] } })
}

#[tokio::test]
async fn changing_reservations_or_allocations_needs_the_binding_subresource() {
    let server = TestServer::start().await;
    let writer = claim_and_writer(&server, &["update"]).await;
    // A status write that leaves both fields alone needs nothing more.
    common::merge_patch(
        &writer,
        "gpu",
        Some("status"),
        json!({ "status": { "devices": [] } }),
    )
    .await
    .unwrap();
    // update: allowed by `update` on resourceclaims/binding.
    let mut claim = writer.get("gpu").await.unwrap();
    claim.status.as_mut().unwrap().reserved_for = Some(vec![
        serde_json::from_value(json!({ "resource": "pods", "name": "p", "uid": "u" })).unwrap(),
    ]);
    writer
        .replace_status("gpu", &PostParams::default(), &claim)
        .await
        .unwrap();
    // patch asks for `patch`, which this writer lacks: 422 with the API server's message.
    let status = api_error(
        writer
            .patch_status(
                "gpu",
                &PatchParams::default(),
                // Releasing the reservation: valid, so only the permission is missing.
                &Patch::Merge(json!({ "status": { "reservedFor": null } })),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        "ResourceClaim.resource.k8s.io \"gpu\" is invalid: status.allocation: Forbidden: changing status.allocation or status.reservedFor requires resource=\"resourceclaims/binding\", verb=\"patch\" permission: resourceclaims.resource.k8s.io is forbidden: User \"writer\" cannot patch resource \"resourceclaims/binding\" in API group \"resource.k8s.io\" at the cluster scope"
    );
    // Server-side apply is a patch too.
    let status = api_error(
        writer
            .patch_status("gpu", &PatchParams::apply("writer").force(), &Patch::Apply(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "status": { "reservedFor": [{ "resource": "pods", "name": "q", "uid": "v" }] } })))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 422, "{}", status.message);
    // The main resource never changes the status, so it needs no binding permission.
    writer
        .patch("gpu", &PatchParams::default(), &Patch::Merge(reservation()))
        .await
        .unwrap();
}

#[tokio::test]
async fn an_authorizer_function_is_asked_about_binding_too() {
    let server = TestServer::start().await;
    let claims = gpu_claim(&server).await;
    server.authorize(Box::new(|info, _| {
        if info.subresource == "binding" {
            Err(format!("no {} of bindings", info.verb))
        } else {
            Ok(())
        }
    }));
    let status = api_error(
        claims
            .patch_status("gpu", &PatchParams::default(), &Patch::Merge(allocation()))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        status.message,
        "ResourceClaim.resource.k8s.io \"gpu\" is invalid: status.allocation: Forbidden: changing status.allocation or status.reservedFor requires resource=\"resourceclaims/binding\", verb=\"patch\" permission: no patch of bindings"
    );
}

/// Under TLS the server's kubeconfig trusts its CA and authenticates with the admin's client
/// certificate (CN the user, O the groups, as the API server's x509 authenticator reads it);
/// bearer tokens work as over HTTP, and each client keeps one connection for its requests.
#[tokio::test]
async fn https_with_client_certificates_and_tokens() {
    let server = common::start_with(|o| o.tls = true).await;
    assert!(server.url().starts_with("https://127.0.0.1:"));
    server.reviews().set_tokenless_user(UserInfo::anonymous());
    alices_roles(&server);
    server.enforce_rbac();

    let admin = client_of(server.kubeconfig_path()).await;
    let alice = client_of(&server.kubeconfig_as(&UserInfo::new("alice", &[])).unwrap()).await;
    for _ in 0..3 {
        Api::<ConfigMap>::namespaced(admin.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap();
        Api::<ConfigMap>::namespaced(alice.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap();
    }
    // No credentials at all: the token-less user, here anonymous, whom RBAC refuses.
    let refused = Api::<ConfigMap>::namespaced(server.client(), "default")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert_eq!(api_error(refused).code, 403);

    let users: Vec<String> = server.requests().into_iter().map(|r| r.user).collect();
    assert_eq!(
        users,
        [
            "system:admin",
            "alice",
            "system:admin",
            "alice",
            "system:admin",
            "alice",
            "system:anonymous"
        ]
    );
    let connections = server.connections();
    assert_eq!(connections.len(), 3, "one per client: {connections:?}");
    // kube's own client offers only HTTP/1.1 by ALPN.
    assert!(connections.iter().all(|c| c.tls && !c.http2));
}
