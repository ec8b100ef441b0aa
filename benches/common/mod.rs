//! Helpers shared by the benchmarks.
#![allow(dead_code)]

/// CPU seconds (user + system) and peak RSS in MiB of a process, from /proc.
pub fn usage(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum())
        .unwrap_or(0.0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    (ticks / 100.0, hwm_kib / 1024.0)
}

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
