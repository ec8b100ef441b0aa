//! The demo (`cargo run --release -p kcm-try -- --batch`) plays its script to the end
//! and shows what kcm's five controllers computed, value for value.

mod common;

#[allow(dead_code)]
#[path = "../try/src/demo.rs"]
mod demo;

use std::time::Duration;

/// Quiet time before a state counts as settled, as the batch mode uses.
const QUIET: Duration = Duration::from_secs(3);
const DEADLINE: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_script_ends_with_the_computed_table() {
    let demo = demo::Demo::start(common::free_port())
        .await
        .expect("the demo starts");
    let mut steps = Vec::new();
    let mut table = demo
        .script(QUIET, DEADLINE, |step| steps.push(step.what()))
        .await
        .expect("the script runs");
    assert_eq!(steps.len(), 3, "every step played");
    let expected = "\
RESOURCEQUOTA                   RESOURCE                                             USED    HARD
batch/best-effort [BestEffort]  pods                                                 1       5
batch/pods                      pods                                                 2       10
                                requests.cpu                                         100m    2
ml/gpus                         count/resourceclaims.resource.k8s.io                 1       4
                                gpu.example.com.deviceclass.resource.k8s.io/devices  1       2
shop/compute                    limits.cpu                                           2500m   8
                                limits.memory                                        2560Mi  16Gi
                                pods                                                 5       20
                                requests.cpu                                         1250m   4
                                requests.memory                                      1280Mi  8Gi

PODDISRUPTIONBUDGET  EXPECTED  HEALTHY  DESIRED  ALLOWED
shop/web             5         5        2        3

NODES  TTL ANNOTATION  NODES WITH IT
120    15s             120

POD         CLAIM  GENERATED  IN POD STATUS
ml/trainer  gpu    1          yes

STORAGEVERSION    API SERVERS       ENTRIES REMOVED
apps.deployments  kube-apiserver-a  1
";
    // The end state does not depend on timing, but a loaded machine can stall kcm for longer
    // than the batch mode's quiet time: poll until it is reached, within the deadline.
    let started = tokio::time::Instant::now();
    while table != expected && started.elapsed() < DEADLINE {
        tokio::time::sleep(Duration::from_millis(250)).await;
        table = demo.table().await.expect("the table reads");
    }
    demo.stop().await.expect("kcm and the server stop cleanly");
    assert_eq!(table, expected, "final table:\n{table}");
}
