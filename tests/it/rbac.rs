//! kcm's identities and permissions against upstream's: the RBAC table within the bootstrap
//! roles of v1.36.2 (tests/data), and kcm run against kube-testserver enforcing RBAC from
//! stored roles, the ResourceClaim binding rule included — with
//! `--use-service-account-credentials` and only the bootstrap roles (plus deploy/control-plane's
//! lease Role), and with deploy/'s own roles. Every request kcm makes must be allowed.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kcm::controllers::list::CONTROLLERS;
use kcm::runtime::connection::client::{Clients, load_config};
use kcm::runtime::connection::credentials::{self, TokenPolicy};
use kcm::runtime::rbac::{AUTH_DELEGATOR, AUTHENTICATION_READER, Rule, grants};
use kcm_testsupport::rbac::{bootstrap, kustomize, load, rbac_objects, role_rules};
use kcm_testsupport::repo_path;
use kcm_testsupport::{DEADLINE, FAST_LEASE, InProcess, Kcm, eventually};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube_testserver::rbac::{Request, allows, authorize};
use kube_testserver::{Fault, TestServer, UserInfo};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";

/// The requests a set of table rules stands for: one per (group, resource, verb, name).
fn requests(rules: &[Rule]) -> Vec<(String, String, String, String, String)> {
    let rules: Vec<_> = rules.iter().map(Rule::policy_rule).collect();
    grants(&rules)
        .into_iter()
        .map(|(group, resource, verb, name)| {
            let (resource, sub) = match resource.split_once('/') {
                Some((r, s)) => (r.to_string(), s.to_string()),
                None => (resource, String::new()),
            };
            (verb, group, resource, sub, name)
        })
        .collect()
}

fn request<'a>(r: &'a (String, String, String, String, String), namespace: &'a str) -> Request<'a> {
    Request {
        verb: &r.0,
        group: &r.1,
        resource: &r.2,
        subresource: &r.3,
        namespace,
        name: &r.4,
    }
}

#[test]
fn each_controllers_rules_are_within_its_bootstrap_role() {
    let bootstrap = bootstrap();
    for entry in CONTROLLERS {
        // The ServiceAccount --use-service-account-credentials gives the controller is named
        // as its client, and the bootstrap binding of its role names that account.
        let role = format!("system:controller:{}", entry.client);
        let binding = bootstrap
            .iter()
            .find(|o| o["kind"] == "ClusterRoleBinding" && o["metadata"]["name"] == role.as_str())
            .unwrap_or_else(|| panic!("no bootstrap binding {role}"));
        assert_eq!(
            binding["subjects"],
            json!([{ "kind": "ServiceAccount", "name": entry.client, "namespace": "kube-system" }])
        );
        let upstream = role_rules(&bootstrap, "ClusterRole", &role);
        for r in requests(entry.rbac) {
            assert!(
                allows(&upstream, &request(&r, "")),
                "{}: {r:?} is not in {role}",
                entry.controller
            );
        }
    }
}

/// Rules a controller needs only with a gate on are not in the v1.36.2 bootstrap roles (the
/// API server's default gates), and are upstream's for that gate: its bootstrap policy gives
/// system:controller:resource-claim-controller, with DRAWorkloadResourceClaims, get/list/watch
/// on podgroups and update/patch on podgroups/status (plugin/pkg/auth/authorizer/rbac/
/// bootstrappolicy/controller_policy.go).
#[test]
fn gated_rules_are_upstreams_for_the_gate_and_not_in_the_default_roles() {
    let bootstrap = bootstrap();
    let mut seen = 0;
    for entry in CONTROLLERS {
        let role = format!("system:controller:{}", entry.client);
        let upstream = role_rules(&bootstrap, "ClusterRole", &role);
        for gated in entry.gated {
            assert_eq!(gated.gate, kcm::cli::FeatureGate::DraWorkloadResourceClaims);
            for r in requests(gated.rbac) {
                assert!(
                    !allows(&upstream, &request(&r, "")),
                    "{r:?} is in {role} without the gate"
                );
            }
            let expected = [
                Rule::new(
                    &["scheduling.k8s.io"],
                    &["podgroups"],
                    &["get", "list", "watch"],
                ),
                Rule::new(
                    &["scheduling.k8s.io"],
                    &["podgroups/status"],
                    &["update", "patch"],
                ),
            ];
            assert_eq!(requests(gated.rbac), requests(&expected), "{role}");
            seen += 1;
        }
    }
    assert_eq!(seen, 1, "resourceclaim-controller's PodGroup rules");
}

#[test]
fn the_resourceclaim_controller_may_bind_claims() {
    let entry = CONTROLLERS
        .iter()
        .find(|e| e.client == "resource-claim-controller")
        .unwrap();
    let rules: Vec<_> = entry.rbac.iter().map(Rule::policy_rule).collect();
    for verb in ["update", "patch"] {
        assert!(allows(
            &rules,
            &Request {
                verb,
                group: "resource.k8s.io",
                resource: "resourceclaims",
                subresource: "binding",
                namespace: "",
                name: "",
            }
        ));
    }
}

/// What kcm's process identity does (shared informers, service account tokens, the secure
/// port's reviews and client CA, its Lease) is allowed to upstream's controller manager user
/// by the bootstrap roles and deploy/control-plane's Role.
#[tokio::test]
async fn the_process_identity_needs_no_more_than_the_controller_managers_user() {
    let server = TestServer::start().await;
    load(&server, &bootstrap());
    load(
        &server,
        &rbac_objects(kustomize(&repo_path("deploy/control-plane"))),
    );
    let user = UserInfo::new(CONTROLLER_MANAGER, &[]);
    // Gated informers too (PodGroups): the user may list and watch everything.
    let informs: Vec<Rule> = CONTROLLERS
        .iter()
        .flat_map(|e| {
            e.informs
                .iter()
                .chain(e.gated.iter().flat_map(|g| g.informs))
        })
        .copied()
        .collect();
    let cluster_wide = [&informs[..], AUTH_DELEGATOR].concat();
    let in_kube_system = [
        kcm::runtime::leader::RBAC,
        credentials::RBAC,
        AUTHENTICATION_READER,
    ]
    .concat();
    for (rules, namespace) in [(&cluster_wide, ""), (&in_kube_system, "kube-system")] {
        for r in requests(rules) {
            let req = request(&r, namespace);
            assert_eq!(
                authorize(server.store(), &user, &req),
                Ok(()),
                "{req:?} is not allowed to {CONTROLLER_MANAGER}"
            );
        }
    }
    // The bootstrap role alone does not cover kcm's Lease: that is what the Role is for.
    let upstream = role_rules(&bootstrap(), "ClusterRole", CONTROLLER_MANAGER);
    let renew = (
        "update".to_string(),
        "coordination.k8s.io".to_string(),
        "leases".to_string(),
        String::new(),
        "kcm".to_string(),
    );
    assert!(!allows(&upstream, &request(&renew, "kube-system")));
}

/// Fixtures every controller has work on: nodes (ttl), a quota, a PDB over two pods, a
/// StorageVersion whose only API server is gone (storage-version-gc deletes it), and an allocated claim `web-gpu` used by pod `web`,
/// which is bound to a node without the scheduler (resourceclaim reserves it).
async fn seed_workload(server: &TestServer) -> Pod {
    let client = server.client();
    for node in ["node-1", "node-2"] {
        let nodes: Api<Node> = Api::all(client.clone());
        nodes
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({ "metadata": { "name": node } })).unwrap(),
            )
            .await
            .unwrap();
    }
    let seed = |body: Value| {
        server
            .seed(body.clone())
            .unwrap_or_else(|e| panic!("{body}: {e:?}"));
    };
    seed(
        json!({ "apiVersion": "v1", "kind": "ResourceQuota", "metadata": { "name": "q", "namespace": NS }, "spec": { "hard": { "pods": "10" } } }),
    );
    seed(
        json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": { "name": "pdb", "namespace": NS }, "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": "db" } } } }),
    );
    for name in ["db-0", "db-1"] {
        seed(
            json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name, "namespace": NS, "labels": { "app": "db" } }, "spec": { "containers": [{ "name": "c", "image": "i" }] } }),
        );
    }
    seed(
        json!({ "apiVersion": "internal.apiserver.k8s.io/v1alpha1", "kind": "StorageVersion", "metadata": { "name": "apps.deployments" }, "spec": {},
            "status": { "storageVersions": [{ "apiServerID": "gone-apiserver", "encodingVersion": "apps/v1", "decodableVersions": ["apps/v1"] }] } }),
    );
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "web-gpu" }, "spec": {} }))
                .unwrap(),
        )
        .await
        .unwrap();
    claims
        .patch_status(
            "web-gpu",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "allocation": { "devices": { "results": [] } } } })),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client, NS);
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({ "metadata": { "name": "web" }, "spec": { "nodeName": "node-1",
            "containers": [{ "name": "c", "image": "i" }],
            "resourceClaims": [{ "name": "gpu", "resourceClaimName": "web-gpu" }] } }),
        )
        .unwrap(),
    )
    .await
    .unwrap()
}

fn reserved_for(claim: &ResourceClaim) -> Value {
    serde_json::to_value(
        claim
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.clone())
            .unwrap_or_default(),
    )
    .unwrap()
}

/// Waits until every controller did its work on [`seed_workload`]'s objects, then deletes pod
/// `web` and waits for its reservation to go.
async fn every_controller_works(server: &TestServer, web: &Pod) {
    let client = server.client();
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    eventually("web-gpu is reserved for web", DEADLINE, || async {
        reserved_for(&claims.get("web-gpu").await.unwrap())
            == json!([{ "resource": "pods", "name": "web", "uid": web.uid().unwrap() }])
    })
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    eventually(
        "the ttl controller annotates the nodes",
        DEADLINE,
        || async {
            nodes
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .all(|n| {
                    n.annotations()
                        .get("node.alpha.kubernetes.io/ttl")
                        .map(String::as_str)
                        == Some("0")
                })
        },
    )
    .await;
    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> =
        Api::namespaced(client.clone(), NS);
    eventually("the quota counts the pods", DEADLINE, || async {
        quotas
            .get("q")
            .await
            .unwrap()
            .status
            .and_then(|s| s.used)
            .and_then(|u| u.get("pods").map(|q| q.0.clone()))
            == Some("3".into())
    })
    .await;
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(client.clone(), NS);
    eventually("the PDB has a status", DEADLINE, || async {
        pdbs.get("pdb")
            .await
            .unwrap()
            .status
            .is_some_and(|s| s.expected_pods == Some(2))
    })
    .await;
    eventually(
        "the StorageVersion of a gone API server goes",
        DEADLINE,
        || async {
            server
                .store()
                .objects("internal.apiserver.k8s.io", "storageversions")
                .is_empty()
        },
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client, NS);
    pods.delete("web", &Default::default()).await.unwrap();
    // web is bound: it terminates until its kubelet, its containers stopped, deletes it with
    // grace 0; the claim stays reserved for it until then.
    pods.delete("web", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually("web's reservation is released", DEADLINE, || async {
        reserved_for(&claims.get("web-gpu").await.unwrap()) == json!([])
    })
    .await;
}

/// The requests of kcm's process the server refused for authentication or authorization: any
/// 401 or 403, and a 422 on a ResourceClaim status (the binding rule).
fn refused(server: &TestServer) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.user_agent.contains("kcm/"))
        .filter(|r| {
            matches!(r.code, 401 | 403) || (r.code == 422 && r.info.resource == "resourceclaims")
        })
        .map(|r| {
            format!(
                "{} {} {} {:?} as {:?}: {}",
                r.method, r.path, r.query, r.info, r.user, r.code
            )
        })
        .collect()
}

/// A cluster with the bootstrap roles, deploy/control-plane's Role, [`seed_workload`]'s objects
/// and RBAC enforced: pod `web`, and a kubeconfig of the controller manager's user.
async fn control_plane(server: &TestServer) -> (Pod, std::path::PathBuf) {
    load(server, &bootstrap());
    load(
        server,
        &rbac_objects(kustomize(&repo_path("deploy/control-plane"))),
    );
    let web = seed_workload(server).await;
    server.enforce_rbac();
    let kubeconfig = server
        .kubeconfig_as(&UserInfo::new(CONTROLLER_MANAGER, &[]))
        .unwrap();
    (web, kubeconfig)
}

/// All five controllers (storage-version-gc is gated off by default, as upstream).
const ALL: [&str; 1] = ["--feature-gates=StorageVersionAPI=true"];

#[tokio::test]
async fn with_service_account_credentials_the_bootstrap_roles_are_all_kcm_needs() {
    let server = TestServer::start().await;
    let (web, kubeconfig) = control_plane(&server).await;
    let args = [
        &ALL[..],
        &[
            "--use-service-account-credentials=true",
            "--leader-elect=true",
        ],
        &FAST_LEASE,
    ]
    .concat();
    let kcm = InProcess::start_as(&server, &kubeconfig, &args).await;
    every_controller_works(&server, &web).await;
    kcm.stop().await;
    assert_eq!(refused(&server), Vec::<String>::new());

    // Each controller's requests were made as its own ServiceAccount, which kcm created, and
    // everything else as the controller manager's user.
    let accounts = server.store().objects("", "serviceaccounts");
    for entry in CONTROLLERS {
        let account = format!("system:serviceaccount:kube-system:{}", entry.client);
        let made: Vec<_> = server
            .requests()
            .into_iter()
            .filter(|r| r.user_agent.ends_with(&format!("/{account}")))
            .collect();
        assert!(!made.is_empty(), "{account} made no request");
        assert!(
            made.iter().all(|r| r.user == account),
            "{account}: {:?}",
            made.iter().map(|r| &r.user).collect::<Vec<_>>()
        );
        assert!(
            accounts
                .iter()
                .any(|a| a["metadata"]["name"] == entry.client
                    && a["metadata"]["namespace"] == "kube-system")
        );
    }
    let users: std::collections::BTreeSet<String> = server
        .requests()
        .into_iter()
        .filter(|r| {
            r.user_agent.contains("kcm/") && !r.user_agent.contains("system:serviceaccount:")
        })
        .map(|r| r.user)
        .collect();
    assert_eq!(users, [CONTROLLER_MANAGER.to_string()].into());
}

/// kcm as deploy/ runs it: ServiceAccount kube-system/kcm, every controller under that one
/// identity, with exactly the RBAC `kubectl kustomize deploy/` builds.
#[tokio::test]
async fn with_deploys_rbac_every_request_is_allowed() {
    let server = TestServer::start().await;
    // A cluster has the bootstrap roles (deploy/ binds two of them) and deploy/'s.
    load(&server, &bootstrap());
    load(&server, &rbac_objects(kustomize(&repo_path("deploy"))));
    let web = seed_workload(&server).await;
    server.enforce_rbac();
    let kubeconfig = server
        .kubeconfig_as(&UserInfo::service_account("kube-system", "kcm"))
        .unwrap();
    let args = [&ALL[..], &["--leader-elect=true"], &FAST_LEASE].concat();
    let kcm = InProcess::start_as(&server, &kubeconfig, &args).await;
    every_controller_works(&server, &web).await;
    kcm.stop().await;
    assert_eq!(refused(&server), Vec::<String>::new());
}

/// A resourceclaim role without `resourceclaims/binding` (as deploy/ once had it) cannot
/// reserve a claim on a 1.36 API server.
#[tokio::test]
async fn without_the_binding_permission_a_reservation_is_refused_as_the_api_server_refuses_it() {
    let server = TestServer::start().await;
    let mut objects = rbac_objects(kustomize(&repo_path("deploy")));
    for role in objects.iter_mut().filter(|o| {
        o["metadata"]["name"] == "kcm:resourceclaim-controller" && o["kind"] == "ClusterRole"
    }) {
        let rules = role["rules"].as_array_mut().unwrap();
        let before = rules.len();
        rules.retain(|r| r["resources"] != json!(["resourceclaims/binding"]));
        assert_eq!(rules.len(), before - 1);
    }
    load(&server, &bootstrap());
    load(&server, &objects);
    let web = seed_workload(&server).await;
    server.enforce_rbac();
    let kcm_user = UserInfo::service_account("kube-system", "kcm");
    let kubeconfig = server.kubeconfig_as(&kcm_user).unwrap();
    let kcm = InProcess::start_as(
        &server,
        &kubeconfig,
        &["--controllers=resourceclaim-controller"],
    )
    .await;
    eventually("kcm's reservation is refused", DEADLINE, || async {
        server.count(|r| {
            r.user_agent.contains("kcm/")
                && r.is("update", "resourceclaims", "status")
                && r.code == 422
        }) > 0
    })
    .await;
    kcm.stop().await;
    let claims: Api<ResourceClaim> = Api::namespaced(server.client(), NS);
    let claim = claims.get("web-gpu").await.unwrap();
    assert_eq!(reserved_for(&claim), json!([]));

    // The same write as kcm's identity, to read the API server's answer.
    let config = load_config(Some(&kubeconfig)).await.unwrap();
    let as_kcm: Api<ResourceClaim> = Api::namespaced(kube::Client::try_from(config).unwrap(), NS);
    let mut reserved = claim.clone();
    reserved.status.as_mut().unwrap().reserved_for = Some(vec![
        serde_json::from_value(
            json!({ "resource": "pods", "name": "web", "uid": web.uid().unwrap() }),
        )
        .unwrap(),
    ]);
    let err = as_kcm
        .replace_status("web-gpu", &PostParams::default(), &reserved)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err}")
    };
    assert_eq!(status.code, 422);
    assert_eq!(status.reason, "Invalid");
    assert_eq!(
        status.message,
        "ResourceClaim.resource.k8s.io \"web-gpu\" is invalid: status.allocation: Forbidden: changing status.allocation or status.reservedFor requires resource=\"resourceclaims/binding\", verb=\"update\" permission: resourceclaims.resource.k8s.io is forbidden: User \"system:serviceaccount:kube-system:kcm\" cannot update resource \"resourceclaims/binding\" in API group \"resource.k8s.io\" at the cluster scope"
    );
    // A status write that leaves allocation and reservedFor alone needs no binding permission.
    let unchanged = as_kcm
        .patch_status(
            "web-gpu",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "devices": [] } })),
        )
        .await;
    assert!(unchanged.is_ok(), "{unchanged:?}");
}

/// A client of controller `name` under service account credentials with `policy`, against a
/// server that enforces the bootstrap roles and issues tokens of at most `max_lifetime`.
async fn service_account_client(
    server: &TestServer,
    name: &str,
    policy: TokenPolicy,
    max_lifetime: Duration,
    stop: &CancellationToken,
) -> kube::Client {
    load(server, &bootstrap());
    server.reviews().set_max_token_expiration(max_lifetime);
    server.enforce_rbac();
    let kubeconfig = server
        .kubeconfig_as(&UserInfo::new(CONTROLLER_MANAGER, &[]))
        .unwrap();
    let config = load_config(Some(&kubeconfig)).await.unwrap();
    let metrics = kcm::runtime::metrics::Metrics::new().unwrap();
    let mut clients = Clients::new(config, 1000.0, 1000, "test", metrics.rest_client.clone());
    clients
        .use_service_account_credentials(policy, stop.clone())
        .unwrap();
    clients.controller(name).await.unwrap()
}

/// Lists nodes through `client` until ServiceAccount `account` has got `tokens` tokens; every
/// list must succeed (no request ever carries an expired token).
async fn list_until_tokens(
    server: &TestServer,
    client: kube::Client,
    account: &str,
    tokens: usize,
) {
    let nodes: Api<Node> = Api::all(client);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while server.reviews().issued_tokens(account).len() < tokens {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{account} got only {} tokens",
            server.reviews().issued_tokens(account).len()
        );
        nodes.list(&ListParams::default()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const TTL_ACCOUNT: &str = "system:serviceaccount:kube-system:ttl-controller";

#[tokio::test]
async fn tokens_are_renewed_before_they_expire() {
    let server = TestServer::start().await;
    let stop = CancellationToken::new();
    // Tokens of 2 s, renewed when a fifth is left; the 10-minute floor for clock skew is off.
    let policy = TokenPolicy {
        min_lifetime: Duration::ZERO,
        ..TokenPolicy::default()
    };
    let client = service_account_client(
        &server,
        "ttl-controller",
        policy,
        Duration::from_secs(2),
        &stop,
    )
    .await;
    list_until_tokens(&server, client, TTL_ACCOUNT, 4).await;
    assert_eq!(server.count(|r| r.code == 401), 0);
    // Each TokenRequest asked for upstream's hour (the server capped it).
    let asked: Vec<Value> = server
        .requests()
        .into_iter()
        .filter(|r| r.is("create", "serviceaccounts", "token"))
        .map(|r| r.body.unwrap()["spec"]["expirationSeconds"].clone())
        .collect();
    assert!(asked.iter().all(|s| *s == json!(3600)), "{asked:?}");
    stop.cancel();
}

#[tokio::test]
async fn a_failed_token_request_is_retried_with_backoff_while_the_token_lasts() {
    let server = TestServer::start().await;
    let stop = CancellationToken::new();
    let policy = TokenPolicy {
        min_lifetime: Duration::ZERO,
        leeway_percent: 50,
        first_retry: Duration::from_millis(200),
        ..TokenPolicy::default()
    };
    let client = service_account_client(
        &server,
        "ttl-controller",
        policy,
        Duration::from_secs(4),
        &stop,
    )
    .await;
    list_until_tokens(&server, client.clone(), TTL_ACCOUNT, 1).await;
    // The renewal at half the lifetime fails twice, then gets through.
    server.inject(
        Fault::error(500)
            .verb("create")
            .resource("serviceaccounts")
            .subresource("token")
            .times(2),
    );
    list_until_tokens(&server, client, TTL_ACCOUNT, 2).await;
    let attempts: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.is("create", "serviceaccounts", "token"))
        .collect();
    assert_eq!(
        attempts.iter().map(|r| r.code).collect::<Vec<_>>(),
        [201, 500, 500, 201]
    );
    let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(gaps[2] >= gaps[1], "the retry delay grows: {gaps:?}");
    assert_eq!(server.count(|r| r.code == 401), 0);
    stop.cancel();
}

#[tokio::test]
async fn a_refused_token_is_replaced_at_once() {
    let server = TestServer::start().await;
    let stop = CancellationToken::new();
    let client = service_account_client(
        &server,
        "ttl-controller",
        TokenPolicy::default(),
        Duration::from_secs(3600),
        &stop,
    )
    .await;
    list_until_tokens(&server, client.clone(), TTL_ACCOUNT, 1).await;
    // As if the API server's signing key changed: one 401, then a new token.
    server.inject(
        Fault::error(401)
            .user_agent(TTL_ACCOUNT)
            .resource("nodes")
            .times(1),
    );
    let nodes: Api<Node> = Api::all(client.clone());
    assert!(nodes.list(&ListParams::default()).await.is_err());
    list_until_tokens(&server, client, TTL_ACCOUNT, 2).await;
    stop.cancel();
}

/// The kcm binary at the highest verbosity with service account credentials: neither the
/// kubeconfig's token nor any ServiceAccount token shows in its log.
#[tokio::test]
async fn no_token_is_ever_logged() {
    let server = TestServer::start().await;
    let (web, kubeconfig) = control_plane(&server).await;
    let args = [
        &ALL[..],
        &[
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            "-v=10",
        ],
    ]
    .concat();
    let kcm = Kcm::start(&kubeconfig, &args);
    every_controller_works(&server, &web).await;
    let log = kcm.log();
    drop(kcm);
    assert!(
        log.contains("ServiceAccount"),
        "the log is at trace level:\n{log}"
    );
    let own = std::fs::read_to_string(&kubeconfig).unwrap();
    let own_token = own
        .split("token: ")
        .nth(1)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let mut tokens = vec![own_token];
    for entry in CONTROLLERS {
        let issued = server.reviews().issued_tokens(&format!(
            "system:serviceaccount:kube-system:{}",
            entry.client
        ));
        assert!(!issued.is_empty(), "{}", entry.client);
        tokens.extend(issued);
    }
    for token in tokens {
        assert!(!log.contains(&token), "a token is in the log");
    }
}

/// `--shadow` writes nothing: it uses the controllers' ServiceAccounts but never creates one.
#[tokio::test]
async fn in_shadow_mode_service_accounts_are_used_but_never_created() {
    let server = TestServer::start().await;
    let (_, kubeconfig) = control_plane(&server).await;
    let args = [
        "kcm",
        "--shadow",
        "--use-service-account-credentials=true",
        "--controllers=ttl-controller",
        "--secure-port=0",
    ];
    let settings = <kcm::cli::Options as clap::Parser>::try_parse_from(args)
        .unwrap()
        .validate()
        .unwrap();
    let config = load_config(Some(&kubeconfig)).await.unwrap();
    let err = kcm::app::run_with_config(
        settings,
        config,
        "test".into(),
        kcm::runtime::clock::system(),
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "ServiceAccount kube-system/ttl-controller does not exist, and --shadow creates nothing"
    );

    server
        .seed(json!({ "apiVersion": "v1", "kind": "ServiceAccount",
                      "metadata": { "name": "ttl-controller", "namespace": "kube-system" } }))
        .unwrap();
    let kcm = InProcess::start_as(&server, &kubeconfig, &args[1..4]).await;
    eventually("the shadow gets a token", DEADLINE, || async {
        !server.reviews().issued_tokens(TTL_ACCOUNT).is_empty()
    })
    .await;
    kcm.stop().await;
    assert_eq!(server.count(|r| r.is("create", "serviceaccounts", "")), 0);
    assert_eq!(refused(&server), Vec::<String>::new());
}

/// A process identity that may not request tokens: the controller's requests fail, after the
/// first attempts, with the reason rather than waiting forever.
#[tokio::test]
async fn without_permission_to_request_tokens_requests_fail_with_the_reason() {
    let server = TestServer::start().await;
    server
        .seed(json!({ "apiVersion": "v1", "kind": "ServiceAccount",
                      "metadata": { "name": "ttl-controller", "namespace": "kube-system" } }))
        .unwrap();
    load(
        &server,
        &[
            json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": { "name": "read-accounts" },
                    "rules": [{ "apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get"] }] }),
            json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": { "name": "read-accounts" },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "read-accounts" },
                    "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "half" }] }),
        ],
    );
    server.enforce_rbac();
    let kubeconfig = server.kubeconfig_as(&UserInfo::new("half", &[])).unwrap();
    let config = load_config(Some(&kubeconfig)).await.unwrap();
    let metrics = kcm::runtime::metrics::Metrics::new().unwrap();
    let mut clients = Clients::new(config, 1000.0, 1000, "test", metrics.rest_client.clone());
    let stop = CancellationToken::new();
    let policy = TokenPolicy {
        first_retry: Duration::from_millis(10),
        ..TokenPolicy::default()
    };
    clients
        .use_service_account_credentials(policy, stop.clone())
        .unwrap();
    let client = clients.controller("ttl-controller").await.unwrap();
    let err = Api::<Node>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no token for ServiceAccount kube-system/ttl-controller yet: requesting a token for ServiceAccount kube-system/ttl-controller: ")
            && err.contains("serviceaccounts \"ttl-controller\" is forbidden: User \"half\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"kube-system\""),
        "{err}"
    );
    assert_eq!(
        server.count(|r| r.is("list", "nodes", "")),
        0,
        "nothing is sent without a token"
    );
    stop.cancel();
}
