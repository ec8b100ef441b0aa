//! The `kube-testserver` binary: seeds objects from a directory, writes a kubeconfig, serves.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::Api;

/// The binary, stopped with SIGTERM (as a harness stops it) when dropped; SIGKILL only if
/// it has not exited within 10 s.
struct StopOnDrop(std::process::Child);

impl StopOnDrop {
    /// SIGTERM, then the exit status once it has exited.
    fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.0.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        // Already exited (and reaped): its pid may be another process's now.
        if matches!(self.0.try_wait(), Ok(Some(_))) {
            return;
        }
        if self.stop().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
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
    // The server's own temporary directory goes here, to check it is removed at exit.
    let server_tmp = dir.path().join("tmp");
    std::fs::create_dir(&server_tmp).unwrap();
    let mut child = StopOnDrop(
        Command::new(env!("CARGO_BIN_EXE_kube-testserver"))
            .env("TMPDIR", &server_tmp)
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
    assert_eq!(
        std::fs::read_dir(&server_tmp).unwrap().count(),
        1,
        "its kubeconfig's directory"
    );

    let status = tokio::task::spawn_blocking(move || child.stop())
        .await
        .unwrap()
        .expect("SIGTERM stops the server");
    assert!(status.success(), "{status}");
    let left: Vec<_> = std::fs::read_dir(&server_tmp).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
