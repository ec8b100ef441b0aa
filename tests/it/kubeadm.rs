//! kcm started with the command line kubeadm v1.36 writes for kube-controller-manager
//! (tests/data/kubeadm-v1.36-kube-controller-manager.yaml): it validates, and kcm runs from it
//! and converges, with only `--controllers` narrowed to kcm's five and the `/etc/kubernetes/`
//! files moved into a temporary directory.

use std::path::Path;
use std::process::{Command, Stdio};

use k8s_openapi::api::core::v1::Node;
use kcm_testsupport::{DEADLINE, eventually, free_port};
use kube::api::{Api, PostParams};
use kube_testserver::TestServer;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

/// kcm's five controllers, by their kube-controller-manager names.
const KCM_CONTROLLERS: &str = "--controllers=resourcequota-controller,resourceclaim-controller,\
disruption-controller,ttl-controller,storageversion-garbage-collector-controller";

/// The flags of kubeadm's manifest (without the program name).
fn kubeadm_flags() -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Container {
        command: Vec<String>,
    }
    let text = include_str!("../data/kubeadm-v1.36-kube-controller-manager.yaml");
    let container: Container = serde_yaml_ng::from_str(text).expect("the manifest parses");
    assert_eq!(container.command[0], "kube-controller-manager");
    container.command[1..].to_vec()
}

/// kubeadm's flags with `--controllers` narrowed to kcm's and `/etc/kubernetes/` moved to
/// `etc`.
fn adapted_flags(etc: &Path) -> Vec<String> {
    let etc = format!("{}/", etc.display());
    kubeadm_flags()
        .into_iter()
        .map(|flag| {
            if flag.starts_with("--controllers=") {
                KCM_CONTROLLERS.to_owned()
            } else {
                flag.replace("/etc/kubernetes/", &etc)
            }
        })
        .collect()
}

fn validate(flags: &[String]) -> Result<kcm::cli::Settings, String> {
    let options = <kcm::cli::Options as clap::Parser>::try_parse_from(
        std::iter::once("kcm".to_owned()).chain(flags.iter().cloned()),
    )
    .map_err(|error| error.to_string())?;
    options.validate().map_err(|error| error.to_string())
}

#[test]
fn kubeadms_command_line_validates_with_kcms_controllers() {
    let settings = validate(&adapted_flags(Path::new("/etc/kubernetes"))).expect("valid");
    assert_eq!(settings.enabled_controllers.len(), 4);
    assert_eq!(
        settings.skipped_for_gates,
        [(kcm::cli::Controller::StorageVersionGc, "StorageVersionAPI")]
    );
    assert!(settings.use_service_account_credentials);
    let lease = settings.leader_election.expect("leader election");
    assert_eq!(
        (
            lease.resource_namespace.as_str(),
            lease.resource_name.as_str()
        ),
        ("kube-system", "kcm")
    );
    let serving = settings.secure_serving.expect("secure serving");
    assert_eq!(serving.addr, "127.0.0.1:10257".parse().unwrap());
    assert_eq!(
        serving.client_ca_file.as_deref(),
        Some(Path::new("/etc/kubernetes/pki/ca.crt"))
    );
    assert_eq!(
        serving.authorization_kubeconfig.as_deref(),
        Some(Path::new("/etc/kubernetes/controller-manager.conf"))
    );
    assert_eq!(
        serving.request_header.client_ca_file.as_deref(),
        Some(Path::new("/etc/kubernetes/pki/front-proxy-ca.crt"))
    );
    assert!(settings.use_service_account_credentials);
    assert_eq!(
        settings.unused_flags,
        [
            "--allocate-node-cidrs",
            "--cluster-cidr",
            "--cluster-name",
            "--cluster-signing-cert-file",
            "--cluster-signing-key-file",
            "--root-ca-file",
            "--service-account-private-key-file",
            "--service-cluster-ip-range",
        ]
    );

    // Verbatim, the two kubeadm-only controllers are refused by name.
    let error = validate(&kubeadm_flags()).unwrap_err();
    assert!(
        error.starts_with(
            "unknown controller(s) in --controllers: \"bootstrapsigner\", \"tokencleaner\";"
        ),
        "{error}"
    );
}

/// A self-signed CA certificate and its key, PEM.
fn ca() -> (String, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem())
}

#[tokio::test]
async fn kcm_runs_and_converges_from_kubeadms_command_line() {
    let server = TestServer::start().await;
    // What kubeadm puts in /etc/kubernetes: the component's kubeconfig and the PKI files.
    let etc = tempfile::tempdir().unwrap();
    std::fs::copy(
        server.kubeconfig_path(),
        etc.path().join("controller-manager.conf"),
    )
    .unwrap();
    let pki = etc.path().join("pki");
    std::fs::create_dir(&pki).unwrap();
    let (ca_crt, ca_key) = ca();
    let (front_proxy_crt, _) = ca();
    let (_, sa_key) = ca();
    for (name, pem) in [
        ("ca.crt", &ca_crt),
        ("ca.key", &ca_key),
        ("front-proxy-ca.crt", &front_proxy_crt),
        ("sa.key", &sa_key),
    ] {
        std::fs::write(pki.join(name), pem).unwrap();
    }

    let log = tempfile::NamedTempFile::new().unwrap();
    // The secure port moves off 10257 only so parallel runs on one host cannot collide (the
    // last occurrence of a flag wins, as with pflag).
    let secure_port = format!("--secure-port={}", free_port());
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_kcm"))
            .args(adapted_flags(etc.path()))
            .arg(&secure_port)
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .expect("kcm starts"),
    );
    let read_log = || std::fs::read_to_string(log.path()).unwrap_or_default();

    let nodes: Api<Node> = Api::all(server.client());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({ "metadata": { "name": "node-1" } }))
                .unwrap(),
        )
        .await
        .unwrap();
    eventually("the node gets its ttl annotation", DEADLINE, || async {
        nodes.get("node-1").await.ok().is_some_and(|node| {
            node.metadata.annotations.is_some_and(|a| {
                a.get("node.alpha.kubernetes.io/ttl")
                    .is_some_and(|v| v == "0")
            })
        })
    })
    .await;
    let logged = read_log();
    assert!(
        logged.contains(
            "accepted, not used by kcm: --allocate-node-cidrs, --cluster-cidr, --cluster-name, \
             --cluster-signing-cert-file, --cluster-signing-key-file, \
             --root-ca-file, \
             --service-account-private-key-file, --service-cluster-ip-range"
        ),
        "{logged}"
    );
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "kcm keeps running:\n{logged}"
    );
    // kubeadm's --use-service-account-credentials=true: the TTL controller wrote the node as
    // its own ServiceAccount, with a token the server issued for it.
    let ttl_writers: std::collections::BTreeSet<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.is("patch", "nodes", ""))
        .map(|r| r.user)
        .collect();
    assert_eq!(
        ttl_writers,
        ["system:serviceaccount:kube-system:ttl-controller".to_string()].into()
    );
}

/// The kcm process of a test, killed when the test ends, failed assertions included.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
