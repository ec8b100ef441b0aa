//! kcm on a real control plane: kube-apiserver v1.36 and etcd 3.6 from `KUBEBUILDER_ASSETS`
//! (kcm_testsupport::envtest), one for this binary ([`envtest::shared`]), one namespace per
//! test. Without the binaries every test says it skipped; `KCM_REQUIRE_ENVTEST=1` (CI) makes
//! that a failure. The living cluster (tests/living.rs) is a binary of its own: its scheduler
//! and workload controllers would act on every object these tests create.
//!
//! [`envtest::shared`]: kcm_testsupport::envtest::shared

mod apiserver;
mod control_plane;
mod protobuf;

use tokio::sync::RwLock;

/// Held for reading by tests that stay in their namespace, for writing by cluster-wide ones
/// (node counts, the API server's request counters, Lease `kube-system/kcm`, upstream's
/// controller manager); a test that creates a node holds it for reading too, so that no
/// cluster-wide check counts it.
static CLUSTER: RwLock<()> = RwLock::const_new(());
