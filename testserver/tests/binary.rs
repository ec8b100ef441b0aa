//! The `kube-testserver` binary: seeds objects from a directory, writes a kubeconfig, serves.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::Api;

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn binary_serves_seeded_objects_through_its_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("seed");
    std::fs::create_dir(&seed).unwrap();
    std::fs::write(
        seed.join("objects.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: seeded\n  namespace: team\nspec:\n  containers:\n  - name: c\n    image: i\nstatus:\n  phase: Running\n\
         ---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n",
    )
    .unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_kube-testserver"))
            .args(["--port", "0", "--seed"])
            .arg(&seed)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line
    })
    .await
    .unwrap();
    assert!(
        line.starts_with("kube-testserver listening on http://127.0.0.1:"),
        "{line}"
    );

    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let pod = Api::<Pod>::namespaced(client.clone(), "team")
        .get("seeded")
        .await
        .unwrap();
    assert_eq!(
        pod.status.unwrap().phase.as_deref(),
        Some("Running"),
        "seeding keeps status"
    );
    assert!(
        Api::<Namespace>::all(client)
            .get_opt("team")
            .await
            .unwrap()
            .is_some()
    );
}
