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

/// A JSON merge patch (`kubectl patch --type merge`) of the named object, or of its
/// `subresource` (`Some("status")`).
pub async fn merge_patch<K, P>(
    api: &kube::Api<K>,
    name: &str,
    subresource: Option<&str>,
    patch: P,
) -> kube::Result<K>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    P: serde::Serialize + std::fmt::Debug,
{
    let (params, patch) = (
        kube::api::PatchParams::default(),
        kube::api::Patch::Merge(patch),
    );
    match subresource {
        None => api.patch(name, &params, &patch).await,
        Some(subresource) => {
            api.patch_subresource(subresource, name, &params, &patch)
                .await
        }
    }
}

/// A server started with the default options but for what `set` changes.
pub async fn start_with(
    set: impl FnOnce(&mut kube_testserver::Options),
) -> kube_testserver::TestServer {
    let mut options = kube_testserver::Options::default();
    set(&mut options);
    kube_testserver::TestServer::start_with(options)
        .await
        .expect("the server starts")
}
