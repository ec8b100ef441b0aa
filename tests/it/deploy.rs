//! deploy/: every manifest parses into its k8s-openapi type with nothing left over, the RBAC
//! equals the table in the code (which the integration harness enforces on every request kcm
//! makes), the whole directory applies to kube-testserver, and the Deployment's arguments are
//! accepted by kcm's own flag parser. deploy/control-plane/ runs kcm as a static pod beside
//! upstream with the controller manager's kubeconfig and ServiceAccount credentials; with the
//! bootstrap roles, its one Role is all it needs. With kubectl installed, `kubectl kustomize`
//! builds the three variants and `kubectl apply --dry-run=client -k` passes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kcm::controllers::list::CONTROLLERS;
use kcm::runtime::rbac::{grants, read_only};
use kcm_testsupport::rbac::{bootstrap, load, yaml_documents};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube_testserver::{ResourceType, TestServer};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

const NAMESPACE: &str = "kube-system";
const SERVICE_ACCOUNT: &str = "kcm";

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

/// The control-plane variant: a static pod and its RBAC, beside upstream, not the Deployment.
const CONTROL_PLANE: &str = "control-plane";

/// Every YAML file below `dir` (but the control-plane variant's when `dir` is deploy/), sorted.
fn manifest_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path != deploy_dir().join(CONTROL_PLANE) {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "yaml") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    files.sort();
    files
}

/// The Kubernetes objects below `dir` (kustomizations left out), with the file each is in.
fn objects_in(dir: &Path) -> Vec<(PathBuf, Value)> {
    manifest_files(dir)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
        .flat_map(|p| yaml_documents(&p).into_iter().map(move |d| (p.clone(), d)))
        .collect()
}

/// The objects of the Deployment variants (deploy/ and deploy/shadow/).
fn objects() -> Vec<(PathBuf, Value)> {
    objects_in(&deploy_dir())
}

/// Parses `value` as `T` and checks nothing was dropped: a field k8s-openapi does not know
/// (a typo, a wrong indentation) would be lost in the round trip.
fn strict<T: DeserializeOwned + Serialize>(value: &Value, what: &str) -> T {
    let typed: T = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("{what}: does not parse: {e}"));
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(&back, value, "{what}: unknown or misplaced fields");
    typed
}

fn named<'a>(objects: &'a [(PathBuf, Value)], kind: &str, name: &str) -> Vec<&'a (PathBuf, Value)> {
    objects
        .iter()
        .filter(|(_, v)| v["kind"] == kind && v["metadata"]["name"] == name)
        .collect()
}

fn one<T: DeserializeOwned + Serialize>(objects: &[(PathBuf, Value)], kind: &str, name: &str) -> T {
    let found = named(objects, kind, name);
    assert_eq!(found.len(), 1, "exactly one {kind} {name} in deploy/");
    strict(&found[0].1, &format!("{kind} {name}"))
}

/// kcm's settings from these arguments, parsed and validated by the binary's own parser.
fn kcm_settings(args: &[String]) -> kcm::cli::Settings {
    <kcm::cli::Options as clap::Parser>::try_parse_from(
        std::iter::once("kcm".to_string()).chain(args.iter().cloned()),
    )
    .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    .validate()
    .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// No privilege escalation, a read-only root filesystem, no capability; `/tmp` writable all the
/// same (an emptyDir), since `/debug/pprof/profile`'s sampler makes a temporary file there.
fn assert_hardened(pod: &k8s_openapi::api::core::v1::PodSpec) {
    let container = &pod.containers[0];
    let security = container.security_context.clone().unwrap();
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(
        security.capabilities.unwrap().drop,
        Some(vec!["ALL".to_string()])
    );
    let mounts = container.volume_mounts.clone().unwrap_or_default();
    let tmp = mounts
        .iter()
        .find(|m| m.mount_path == "/tmp")
        .expect("/tmp is mounted");
    assert_ne!(tmp.read_only, Some(true));
    let volumes = pod.volumes.clone().unwrap_or_default();
    let volume = volumes.iter().find(|v| v.name == tmp.name).unwrap();
    assert!(volume.empty_dir.is_some(), "/tmp is an emptyDir");
}

fn table_rules(rules: &[kcm::runtime::rbac::Rule]) -> Vec<PolicyRule> {
    rules.iter().map(|r| r.policy_rule()).collect()
}

#[test]
fn every_manifest_parses_into_its_type_with_nothing_left_over() {
    let objects = objects();
    assert!(!objects.is_empty());
    let mut kinds = BTreeMap::<String, usize>::new();
    for (path, value) in &objects {
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        let what = format!("{} {kind} {}", path.display(), value["metadata"]["name"]);
        match kind.as_str() {
            "ServiceAccount" => drop(strict::<ServiceAccount>(value, &what)),
            "ClusterRole" => drop(strict::<ClusterRole>(value, &what)),
            "ClusterRoleBinding" => drop(strict::<ClusterRoleBinding>(value, &what)),
            "Role" => drop(strict::<Role>(value, &what)),
            "RoleBinding" => drop(strict::<RoleBinding>(value, &what)),
            "Deployment" => drop(strict::<Deployment>(value, &what)),
            "Service" => drop(strict::<Service>(value, &what)),
            "PodDisruptionBudget" => drop(strict::<PodDisruptionBudget>(value, &what)),
            "ServiceMonitor" | "PrometheusRule" => {
                assert_eq!(value["apiVersion"], "monitoring.coreos.com/v1", "{what}");
            }
            other => panic!("{what}: unexpected kind {other}"),
        }
        if value["kind"] != "ClusterRole" && value["kind"] != "ClusterRoleBinding" {
            assert_eq!(value["metadata"]["namespace"], NAMESPACE, "{what}");
        }
        *kinds.entry(kind).or_default() += 1;
    }
    // Five controllers and the shared informers, the shadow variant's read-only role,
    // Prometheus' metrics reader (bound by the operator, not here), and the rules of each
    // gated part of a controller (workload-claims.yaml).
    let gated: usize = CONTROLLERS.iter().map(|e| e.gated.len()).sum();
    assert_eq!(
        kinds["ClusterRole"],
        CONTROLLERS.len() + 3 + gated,
        "{kinds:?}"
    );
    // Each of kcm's roles but the metrics reader, plus system:auth-delegator.
    assert_eq!(
        kinds["ClusterRoleBinding"],
        CONTROLLERS.len() + 3 + gated,
        "{kinds:?}"
    );
}

/// The secure port's RBAC: the built-in roles for delegated authentication and authorization
/// bound to kcm, and a role for Prometheus that grants only `get /metrics`.
#[test]
fn the_secure_port_can_delegate_and_prometheus_can_be_allowed_to_scrape() {
    let objects = objects();
    let kcm_subject = serde_json::json!([{ "kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE }]);
    let delegator: ClusterRoleBinding = one(&objects, "ClusterRoleBinding", "kcm:auth-delegator");
    assert_eq!(delegator.role_ref.kind, "ClusterRole");
    assert_eq!(delegator.role_ref.name, "system:auth-delegator");
    assert_eq!(
        serde_json::to_value(&delegator.subjects).unwrap(),
        kcm_subject
    );
    let reader: RoleBinding = one(&objects, "RoleBinding", "kcm:authentication-reader");
    assert_eq!(reader.metadata.namespace.as_deref(), Some(NAMESPACE));
    assert_eq!(reader.role_ref.kind, "Role");
    assert_eq!(
        reader.role_ref.name,
        "extension-apiserver-authentication-reader"
    );
    assert_eq!(serde_json::to_value(&reader.subjects).unwrap(), kcm_subject);
    // The built-in roles grant what kcm's secure port asks for (the table the serving tests
    // hold the server to).
    let delegated = grants(&table_rules(kcm::runtime::rbac::AUTH_DELEGATOR));
    assert!(delegated.contains(&(
        "authentication.k8s.io".into(),
        "tokenreviews".into(),
        "create".into(),
        String::new()
    )));
    assert!(delegated.contains(&(
        "authorization.k8s.io".into(),
        "subjectaccessreviews".into(),
        "create".into(),
        String::new()
    )));

    let metrics: ClusterRole = one(&objects, "ClusterRole", "kcm:metrics-reader");
    let rules = metrics.rules.unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].non_resource_urls,
        Some(vec!["/metrics".to_string()])
    );
    assert_eq!(rules[0].verbs, ["get"]);
    assert_eq!(rules[0].resources, None);
    assert!(
        named(&objects, "ClusterRoleBinding", "kcm:metrics-reader").is_empty(),
        "Prometheus' service account differs per cluster; the README shows the binding"
    );
}

#[test]
fn controller_roles_equal_the_rbac_table() {
    let objects = objects();
    let mut informs = Vec::new();
    let mut every_rule = Vec::new();
    for entry in CONTROLLERS {
        let name = format!("kcm:{}", entry.controller);
        let role: ClusterRole = one(&objects, "ClusterRole", &name);
        let table = table_rules(entry.rbac);
        assert_eq!(
            grants(role.rules.as_deref().unwrap_or_default()),
            grants(&table),
            "{name} differs from the controller's RBAC table"
        );
        informs.extend(table_rules(entry.informs));
        every_rule.extend(table);
    }
    // DRAWorkloadResourceClaims: its own role, applied only where the gate is on.
    let resourceclaim = CONTROLLERS
        .iter()
        .find(|e| e.controller == kcm::cli::Controller::ResourceClaim)
        .unwrap();
    let [workload] = resourceclaim.gated else {
        panic!("one gated part of resourceclaim-controller");
    };
    assert_eq!(
        workload.gate,
        kcm::cli::FeatureGate::DraWorkloadResourceClaims
    );
    let role: ClusterRole = one(
        &objects,
        "ClusterRole",
        "kcm:resourceclaim-controller-workload-claims",
    );
    assert_eq!(
        grants(role.rules.as_deref().unwrap_or_default()),
        grants(&[table_rules(workload.rbac), table_rules(workload.informs)].concat()),
        "workload-claims.yaml differs from the gated rules in the table"
    );
    let shared: ClusterRole = one(&objects, "ClusterRole", "kcm:shared-informers");
    assert_eq!(
        grants(shared.rules.as_deref().unwrap_or_default()),
        grants(&informs),
        "kcm:shared-informers differs from the informers' reads in the table"
    );

    let leader: Role = one(&objects, "Role", "kcm:leader-election");
    assert_eq!(
        grants(leader.rules.as_deref().unwrap_or_default()),
        grants(&table_rules(kcm::runtime::leader::RBAC))
    );

    let shadow: ClusterRole = one(&objects, "ClusterRole", "kcm:shadow-read-only");
    let mut reads = read_only(&every_rule);
    reads.extend(informs);
    let shadow_grants = grants(shadow.rules.as_deref().unwrap_or_default());
    assert_eq!(
        shadow_grants,
        grants(&reads),
        "the shadow role is the table's reads"
    );
    assert!(
        shadow_grants
            .iter()
            .all(|(_, _, verb, _)| ["get", "list", "watch"].contains(&verb.as_str())),
        "the shadow role only reads"
    );
}

#[test]
fn every_role_is_bound_to_kcms_service_account() {
    let objects = objects();
    let subject_is_kcm = |value: &Value| {
        value["subjects"]
            == serde_json::json!([{ "kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE }])
    };
    for (_, value) in objects.iter().filter(|(_, v)| {
        (v["kind"] == "ClusterRole" || v["kind"] == "Role")
            && v["metadata"]["name"] != "kcm:metrics-reader"
    }) {
        let name = value["metadata"]["name"].as_str().unwrap();
        let binding_kind = format!("{}Binding", value["kind"].as_str().unwrap());
        let bindings = named(&objects, &binding_kind, name);
        assert_eq!(bindings.len(), 1, "{binding_kind} {name}");
        let binding = &bindings[0].1;
        assert_eq!(binding["roleRef"]["name"], name);
        assert_eq!(binding["roleRef"]["kind"], value["kind"]);
        assert!(subject_is_kcm(binding), "{name}: {}", binding["subjects"]);
    }
    let _: ServiceAccount = one(&objects, "ServiceAccount", SERVICE_ACCOUNT);
}

#[test]
fn the_deployment_runs_kcm_hardened_with_flags_kcm_accepts() {
    let objects = objects();
    let deployment: Deployment = one(&objects, "Deployment", "kcm");
    let spec = deployment.spec;
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some(SERVICE_ACCOUNT));
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );
    let pod_security = pod.security_context.clone().unwrap();
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(
        pod_security.seccomp_profile.unwrap().type_,
        "RuntimeDefault"
    );
    assert_eq!(pod.containers.len(), 1);
    assert_hardened(&pod);
    let container = &pod.containers[0];
    let resources = container.resources.clone().unwrap();
    assert!(resources.requests.unwrap().contains_key("memory"));
    assert!(resources.limits.unwrap().contains_key("memory"));

    // The arguments are kcm's: parsed and validated by the binary's own parser.
    let args = container.args.clone().unwrap_or_default();
    let settings = kcm_settings(&args);
    assert!(
        !settings.use_service_account_credentials,
        "one ServiceAccount, kcm"
    );
    let lease = settings.leader_election.expect("leader-elected");
    assert_eq!(lease.resource_namespace, NAMESPACE);
    let leader: Role = one(&objects, "Role", "kcm:leader-election");
    assert!(
        leader.rules.unwrap().iter().any(|r| r
            .resource_names
            .as_ref()
            .is_some_and(|n| n.contains(&lease.resource_name))),
        "the Role names the lease kcm uses"
    );
    // Only the secure port, on upstream's 10257, with in-cluster delegation.
    assert_eq!(settings.http_listener, None, "no plain HTTP");
    let secure = settings.secure_serving.expect("the secure port serves");
    assert_eq!(secure.addr.port(), 10257);
    assert_eq!(secure.authentication_kubeconfig, None);
    assert_eq!(secure.authorization_kubeconfig, None);
    let ports = container.ports.clone().unwrap();
    assert_eq!(ports[0].container_port, i32::from(secure.addr.port()));
    let metrics_port = ports[0].name.clone().unwrap();
    let probe_path = |probe: Option<k8s_openapi::api::core::v1::Probe>| {
        let http = probe.and_then(|p| p.http_get).unwrap();
        assert_eq!(
            serde_json::to_value(&http.port).unwrap(),
            Value::String(metrics_port.clone())
        );
        assert_eq!(http.scheme.as_deref(), Some("HTTPS"));
        let path = http.path.unwrap();
        assert!(secure.always_allow_paths.contains(&path), "{path}");
        path
    };
    assert_eq!(probe_path(container.liveness_probe.clone()), "/livez");
    assert_eq!(probe_path(container.readiness_probe.clone()), "/readyz");

    // The Service, the ServiceMonitor and the PDB select these pods.
    let labels = spec.template.metadata.unwrap().labels.unwrap();
    let service: Service = one(&objects, "Service", "kcm");
    let service_spec = service.spec.unwrap();
    assert_eq!(service_spec.selector.as_ref(), Some(&labels));
    let service_port = &service_spec.ports.unwrap()[0];
    assert_eq!(
        serde_json::to_value(&service_port.target_port).unwrap(),
        Value::String(metrics_port.clone())
    );
    let monitor = &named(&objects, "ServiceMonitor", "kcm")[0].1;
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"].as_str(), service_port.name.as_deref());
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(
        endpoint["bearerTokenFile"],
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
    let service_labels = serde_json::to_value(service.metadata.labels.unwrap()).unwrap();
    assert_eq!(monitor["spec"]["selector"]["matchLabels"], service_labels);
    let pdb: PodDisruptionBudget = one(&objects, "PodDisruptionBudget", "kcm");
    assert_eq!(
        pdb.spec.unwrap().selector.unwrap().match_labels.as_ref(),
        Some(&labels)
    );
}

#[tokio::test]
async fn the_whole_deploy_directory_applies_to_an_api_server() {
    let server = TestServer::start().await;
    for (plural, kind) in [
        ("servicemonitors", "ServiceMonitor"),
        ("prometheusrules", "PrometheusRule"),
    ] {
        server.store().register(ResourceType::custom(
            "monitoring.coreos.com",
            "v1",
            plural,
            kind,
        ));
    }
    let client = server.client();
    let mut created = BTreeSet::new();
    for (path, value) in objects() {
        let gvk = GroupVersionKind::try_from(&kube::core::TypeMeta {
            api_version: value["apiVersion"].as_str().unwrap().into(),
            kind: value["kind"].as_str().unwrap().into(),
        })
        .unwrap();
        let (resource, caps) = kube::discovery::pinned_kind(&client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("{}: {gvk:?} not served: {e}", path.display()));
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                value["metadata"]["namespace"].as_str().unwrap(),
                &resource,
            ),
            kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let object: DynamicObject = serde_json::from_value(value.clone()).unwrap();
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        created.insert(format!("{}/{}", gvk.kind, value["metadata"]["name"]));
    }
    let deployments: Api<Deployment> = Api::namespaced(client, NAMESPACE);
    let live = deployments.get("kcm").await.unwrap();
    assert_eq!(live.spec.replicas, Some(2));
    assert!(created.len() > 10, "{created:?}");
}

/// kubectl's own kustomize and client-side validation; skipped without kubectl.
#[tokio::test]
async fn kubectl_builds_and_dry_runs_every_variant() {
    if std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("kubectl not installed: skipped");
        return;
    }
    let server = TestServer::start().await;
    for variant in ["deploy", "deploy/shadow", "deploy/control-plane"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(variant);
        let built = std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            built.status.success(),
            "kubectl kustomize {variant}: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        let text = String::from_utf8(built.stdout).unwrap();
        let built: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
            .map(|doc| <Value as serde::Deserialize>::deserialize(doc).unwrap())
            .collect();
        if let Some(deployment) = built.iter().find(|v| v["kind"] == "Deployment") {
            let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].clone();
            let args: Vec<String> = serde_json::from_value(args).unwrap();
            let settings = kcm_settings(&args);
            assert_eq!(settings.shadow, variant.ends_with("shadow"), "{variant}");
        } else {
            // The static pod is copied to the nodes; only its Lease RBAC is applied.
            let kinds: Vec<&str> = built.iter().filter_map(|v| v["kind"].as_str()).collect();
            assert_eq!(kinds, ["Role", "RoleBinding"], "{variant}");
        }

        let kubeconfig = server.kubeconfig_path().to_path_buf();
        let applied = tokio::task::spawn_blocking(move || {
            std::process::Command::new("kubectl")
                .args(["apply", "--dry-run=client", "-k"])
                .arg(&dir)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        assert!(
            applied.status.success(),
            "kubectl apply --dry-run=client -k {variant}: {}",
            String::from_utf8_lossy(&applied.stderr)
        );
    }
}

#[test]
fn the_image_is_built_in_stages_and_runs_only_the_binary_as_non_root() {
    let dockerfile =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile")).unwrap();
    let stages: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.trim_start().starts_with("FROM "))
        .collect();
    assert!(stages.len() >= 2, "multi-stage: {stages:?}");
    let runtime = dockerfile.rsplit_once("\nFROM ").unwrap().1;
    assert!(runtime.starts_with("gcr.io/distroless/static"), "{runtime}");
    let copies: Vec<&str> = runtime.lines().filter(|l| l.starts_with("COPY")).collect();
    assert_eq!(copies, ["COPY --from=build /kcm /kcm"], "the binary only");
    assert!(runtime.contains("\nUSER 65532:65532"), "non-root");
    assert!(runtime.contains("ENTRYPOINT [\"/kcm\"]"));
}

/// The metric names an alert expression selects (`name{...}`), PromQL functions left out.
fn selected_metrics(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut current = String::new();
    for c in expr.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            current.push(c);
            continue;
        }
        if c == '{' && !current.is_empty() {
            names.push(current.clone());
        }
        current.clear();
    }
    names
}

#[test]
fn alerts_select_metrics_kcm_exports() {
    let objects = objects();
    let rule = &named(&objects, "PrometheusRule", "kcm")[0].1;
    let exported = kcm::runtime::metrics::Metrics::new().unwrap().families();
    let mut alerts = 0;
    for group in rule["spec"]["groups"].as_array().unwrap() {
        for alert in group["rules"].as_array().unwrap() {
            let expr = alert["expr"].as_str().unwrap();
            let metrics = selected_metrics(expr);
            assert!(!metrics.is_empty(), "{expr}");
            // `up` is Prometheus's own series for the scrape target.
            for metric in metrics.into_iter().filter(|m| m != "up") {
                assert!(
                    exported.contains(&metric),
                    "{}: {metric} is not a metric kcm exports",
                    alert["alert"]
                );
            }
            assert!(expr.contains("job=\"kcm\""), "{expr}: scoped to kcm's job");
            alerts += 1;
        }
    }
    assert!(alerts >= 5);
}

/// The control-plane variant: a static pod with the controller manager's kubeconfig for its
/// client and its secure port's delegation, `--use-service-account-credentials`, a secure port
/// of its own on the host network, hardened as far as a root-only kubeconfig allows, and a
/// Role that with the bootstrap role `system:kube-controller-manager` covers kcm's Lease.
#[tokio::test]
async fn the_control_plane_variant_runs_beside_upstream_as_the_controller_manager() {
    const KUBECONFIG: &str = "/etc/kubernetes/controller-manager.conf";
    const USER: &str = "system:kube-controller-manager";
    let objects = objects_in(&deploy_dir().join(CONTROL_PLANE));
    let kinds: Vec<&str> = objects
        .iter()
        .filter_map(|(_, v)| v["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["Pod", "Role", "RoleBinding"]);
    let pod: Pod = one(&objects, "Pod", "kcm");
    assert_eq!(pod.metadata.namespace.as_deref(), Some(NAMESPACE));
    let spec = pod.spec.unwrap();
    assert_eq!(spec.host_network, Some(true));
    assert_eq!(
        spec.priority_class_name.as_deref(),
        Some("system-node-critical")
    );
    assert_eq!(
        spec.service_account_name, None,
        "no token of its own is mounted for use"
    );
    assert_hardened(&spec);
    let container = &spec.containers[0];

    let settings = kcm_settings(&container.args.clone().unwrap());
    assert!(settings.use_service_account_credentials);
    assert_eq!(settings.kubeconfig.as_deref(), Some(Path::new(KUBECONFIG)));
    let secure = settings.secure_serving.expect("the secure port serves");
    assert_eq!(
        secure.authentication_kubeconfig.as_deref(),
        Some(Path::new(KUBECONFIG))
    );
    assert_eq!(
        secure.authorization_kubeconfig.as_deref(),
        Some(Path::new(KUBECONFIG))
    );
    assert_ne!(
        secure.addr.port(),
        10257,
        "kube-controller-manager's port on the same host"
    );
    assert!(secure.addr.ip().is_loopback());
    // Every file kcm reads is mounted from the same path on the host.
    let mounts = container.volume_mounts.clone().unwrap();
    let volumes = spec.volumes.clone().unwrap();
    for file in [
        Path::new(KUBECONFIG),
        secure.client_ca_file.as_deref().unwrap(),
    ] {
        let mount = mounts
            .iter()
            .find(|m| file.starts_with(&m.mount_path))
            .unwrap_or_else(|| panic!("{} is not mounted", file.display()));
        assert_eq!(mount.read_only, Some(true));
        let volume = volumes.iter().find(|v| v.name == mount.name).unwrap();
        assert_eq!(volume.host_path.as_ref().unwrap().path, mount.mount_path);
    }
    for probe in [
        container.liveness_probe.clone(),
        container.startup_probe.clone(),
    ] {
        let http = probe.and_then(|p| p.http_get).unwrap();
        assert_eq!(http.scheme.as_deref(), Some("HTTPS"));
        assert_eq!(
            serde_json::to_value(&http.port).unwrap(),
            Value::from(secure.addr.port())
        );
        assert!(secure.always_allow_paths.contains(&http.path.unwrap()));
    }

    let lease = settings.leader_election.expect("leader-elected");
    assert_eq!(lease.resource_namespace, NAMESPACE);
    let binding: RoleBinding = one(&objects, "RoleBinding", "kcm:control-plane-leader-election");
    assert_eq!(binding.role_ref.name, "kcm:control-plane-leader-election");
    assert_eq!(
        serde_json::to_value(&binding.subjects).unwrap(),
        serde_json::json!([{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER }])
    );
    // With the bootstrap roles loaded, the controller manager's user may do all leader
    // election does on this Lease, and the Role adds nothing the Lease does not need.
    let server = TestServer::start().await;
    load(&server, &bootstrap());
    load(
        &server,
        &objects
            .iter()
            .filter(|(_, v)| v["kind"] != "Pod")
            .map(|(_, v)| v.clone())
            .collect::<Vec<_>>(),
    );
    let user = kube_testserver::UserInfo::new(USER, &[]);
    for rule in kcm::runtime::leader::RBAC {
        for verb in rule.verbs {
            let name = if rule.names.is_empty() {
                ""
            } else {
                lease.resource_name.as_str()
            };
            let request = kube_testserver::rbac::Request {
                verb,
                group: "coordination.k8s.io",
                resource: "leases",
                subresource: "",
                namespace: &lease.resource_namespace,
                name,
            };
            assert_eq!(
                kube_testserver::rbac::authorize(server.store(), &user, &request),
                Ok(()),
                "{request:?}"
            );
        }
    }
    let role: Role = one(&objects, "Role", "kcm:control-plane-leader-election");
    assert!(
        grants(role.rules.as_deref().unwrap_or_default())
            .is_subset(&grants(&table_rules(kcm::runtime::leader::RBAC)))
    );
}
