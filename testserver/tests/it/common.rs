//! Helpers shared by the modules of the testserver's integration tests.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

pub use kube_testserver::testing::{eventually, http_get, http_request};

pub const DEADLINE: Duration = Duration::from_secs(10);

/// True, with a message saying the test is skipped, when kubectl is not installed.
pub fn kubectl_missing() -> bool {
    let installed = std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!("skipped: kubectl is not installed");
    }
    !installed
}

/// Runs kubectl against a kubeconfig; it must succeed.
pub async fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    let output = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .await
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}
