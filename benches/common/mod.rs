//! Helpers shared by the benchmarks.
#![allow(dead_code)]

#[path = "../../tests/common/proc.rs"]
mod proc;
pub use proc::usage;

/// The kcm binary running one controller against `kubeconfig`, without leader election or
/// HTTP, with a client rate limit high enough not to be what is measured.
pub fn spawn_kcm(kubeconfig: &std::path::Path, controller: &str, qps: u32) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_kcm"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg(format!("--controllers={controller}"))
        .args(["--leader-elect=false", "--port=0"])
        .arg(format!("--kube-api-qps={qps}"))
        .arg(format!("--kube-api-burst={qps}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("kcm: {e}"))
}

/// "p50 …, p90 …, p99 …, max …" of a set of latencies.
pub fn latency_summary(latencies: &mut [std::time::Duration]) -> String {
    latencies.sort();
    let pct = |p: usize| {
        latencies
            .get((latencies.len() * p / 100).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    format!(
        "p50 {:.1?}, p90 {:.1?}, p99 {:.1?}, max {:.1?}",
        pct(50),
        pct(90),
        pct(99),
        pct(100)
    )
}
