//! The demo (`cargo run --release -p kcm-try -- --batch`) plays its script to the end
//! and shows what kcm's five controllers computed, value for value, the events they recorded,
//! and a drain that PDB shop/web holds until the web pods are Ready again.

use std::time::Duration;

use super::{Demo, Note, SCRIPT, Step};

/// Quiet time before a state counts as settled, as the batch mode uses.
const QUIET: Duration = Duration::from_secs(3);
const DEADLINE: Duration = Duration::from_secs(120);
/// The API server's refusal of an eviction past a budget, as the drain prints it.
const REFUSAL: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_script_drains_a_node_once_its_budget_allows_and_ends_with_the_computed_table() {
    let demo = Demo::start(crate::free_port(0).expect("a free port"))
        .await
        .expect("the demo starts");
    let mut steps = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    let mut held = None;
    let mut table = demo
        .script(QUIET, DEADLINE, |note| match note {
            Note::Step(step) => steps.push(step),
            Note::Drain(line) => lines.push(line.to_string()),
            // The script moves on once the drain has been refused, so this is the held state.
            Note::Settled(Step::DrainNode, table) => {
                held = Some((table.to_string(), refusals(&lines)))
            }
            Note::Settled(..) => {}
        })
        .await
        .expect("the script runs");
    assert_eq!(steps, SCRIPT, "every step played");

    let (held, refused) = held.expect("the drain step settled");
    assert!(refused >= 2, "both Ready web pods refused: {lines:#?}");
    let held_drain = format!(
        "\
DRAIN     STATE  PODS LEFT  EVICTED  REFUSALS
worker-0  held   2          0        {refused}
"
    );
    assert_eq!(
        held,
        expected_table(
            "shop/web             5         2        2        0",
            &held_drain
        ),
        "while the drain is held:\n{held}"
    );

    let refused = refusals(&lines);
    let drained = format!(
        "\
DRAIN     STATE    PODS LEFT  EVICTED  REFUSALS
worker-0  drained  0          2        {refused}
"
    );
    let expected = expected_table(
        "shop/web             5         5        2        3",
        &drained,
    );
    // The end state does not depend on timing, but a loaded machine can stall kcm for longer
    // than the batch mode's quiet time: poll until it is reached, within the deadline.
    let started = tokio::time::Instant::now();
    while table != expected && started.elapsed() < DEADLINE {
        tokio::time::sleep(Duration::from_millis(250)).await;
        table = demo.table().await.expect("the table reads");
    }
    let events = demo_events(&demo).await;
    demo.stop().await.expect("kcm and the server stop cleanly");
    assert_eq!(table, expected, "final table:\n{table}");
    assert_eq!(events, expected_events(), "events");

    // kubectl drain's lines: cordoned, refused only with the budget's message, then both pods
    // evicted and the node drained.
    assert!(
        lines
            .iter()
            .filter(|l| is_refusal(l))
            .all(|l| l.ends_with(REFUSAL)),
        "{lines:#?}"
    );
    let first_evicted = lines.iter().position(|l| l.ends_with(" evicted"));
    let last_refusal = lines.iter().rposition(|l| is_refusal(l));
    assert!(
        last_refusal < first_evicted,
        "refusals come first: {lines:#?}"
    );
    // In the order the pods' terminations end, which the simulated kubelets do not fix.
    let mut gone: Vec<&str> = lines
        .iter()
        .filter(|l| l.ends_with(" evicted"))
        .map(String::as_str)
        .collect();
    gone.sort_unstable();
    assert_eq!(
        gone,
        ["pod/web-5d8f7c9b4-1 evicted", "pod/web-5d8f7c9b4-2 evicted"],
        "{lines:#?}"
    );
    assert_eq!(
        lines.first().map(String::as_str),
        Some("node/worker-0 cordoned")
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some("node/worker-0 drained")
    );
}

/// The evictions the API server refused, as the drain printed them.
fn refusals(lines: &[String]) -> usize {
    lines.iter().filter(|l| is_refusal(l)).count()
}

fn is_refusal(line: &str) -> bool {
    line.starts_with("error when evicting")
}

/// The table, with PDB shop/web's row and the drain's section as given.
fn expected_table(web_budget: &str, drain: &str) -> String {
    format!(
        "\
RESOURCEQUOTA                   RESOURCE                                             USED    HARD
batch/best-effort [BestEffort]  pods                                                 1       5
batch/compute [NotBestEffort]   pods                                                 1       5
                                requests.cpu                                         100m    2
ml/gpus                         count/resourceclaims.resource.k8s.io                 1       4
                                gpu.example.com.deviceclass.resource.k8s.io/devices  1       2
shop/compute                    limits.cpu                                           2500m   8
                                limits.memory                                        2560Mi  16Gi
                                pods                                                 5       5
                                requests.cpu                                         1250m   4
                                requests.memory                                      1280Mi  8Gi

PODDISRUPTIONBUDGET  EXPECTED  HEALTHY  DESIRED  ALLOWED
batch/jobs           0         0        0        0
batch/report         0         1        0        0
shop/cache           0         0        1        0
{web_budget}

NODES  TTL ANNOTATION  NODES WITH IT
120    15s             120

POD          CLAIM  GENERATED  IN POD STATUS
ml/notebook  gpu    0          no
ml/trainer   gpu    1          yes

STORAGEVERSION    API SERVERS       ENTRIES REMOVED
apps.deployments  kube-apiserver-a  1

{drain}"
    )
}

/// (namespace/object, type, reason, message) of each Event, sorted.
type EventRow = (String, String, String, String);

fn expected_events() -> Vec<EventRow> {
    let row = |object: &str, warning: bool, reason: &str, message: &str| {
        let kind = if warning { "Warning" } else { "Normal" };
        (object.into(), kind.into(), reason.into(), message.into())
    };
    vec![
        row(
            "batch/jobs",
            true,
            "CalculateExpectedPodCountFailed",
            "Failed to calculate the number of expected pods: jobs.batch does not implement the scale subresource",
        ),
        row(
            "batch/report",
            true,
            "UnmanagedPods",
            "Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:map[string]string{app: report,},MatchExpressions:[]LabelSelectorRequirement{},}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.",
        ),
        row(
            "ml/notebook",
            true,
            "FailedResourceClaimCreation",
            "PodResourceClaim gpu: resource claim template \"gpu-large\": resourceclaimtemplate.resource.k8s.io \"gpu-large\" not found",
        ),
        row("shop/cache", false, "NoPods", "No matching pods found"),
    ]
}

/// The Events kcm recorded, once each, polled until they are the expected ones (the
/// recorder writes them in the background) or the deadline passes.
async fn demo_events(demo: &Demo) -> Vec<EventRow> {
    let kubeconfig = kube::config::Kubeconfig::read_from(demo.kubeconfig()).expect("kubeconfig");
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .expect("client config");
    let client = kube::Client::try_from(config).expect("client");
    let events = kube::Api::<k8s_openapi::api::core::v1::Event>::all(client);
    let started = tokio::time::Instant::now();
    loop {
        let mut rows: Vec<EventRow> = events
            .list(&Default::default())
            .await
            .expect("events list")
            .items
            .into_iter()
            .map(|e| {
                let object = e.involved_object;
                (
                    format!(
                        "{}/{}",
                        object.namespace.unwrap_or_default(),
                        object.name.unwrap_or_default()
                    ),
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                )
            })
            .collect();
        rows.sort();
        rows.dedup();
        if rows == expected_events() || started.elapsed() > DEADLINE {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
