//! Helpers shared by the benchmarks.
#![allow(dead_code)]

pub mod real;
pub mod steady;
pub mod takeover;
pub mod world;

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

/// Current RSS in MiB of a process (`VmRSS`), from /proc; 0 when it is gone.
pub fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// Sums of the samples of a Prometheus text exposition's family `name`, grouped by the value
/// of `label` (samples without it are grouped under "").
pub fn metric_by_label(
    exposition: &str,
    name: &str,
    label: &str,
) -> std::collections::BTreeMap<String, f64> {
    let mut sums = std::collections::BTreeMap::new();
    let needle = format!("{label}=\"");
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        let Some(value) = rest
            .rsplit_once(' ')
            .and_then(|(_, v)| v.parse::<f64>().ok())
        else {
            continue;
        };
        let key = rest
            .split_once(&needle)
            .and_then(|(_, tail)| tail.split_once('"'))
            .map(|(v, _)| v.to_string())
            .unwrap_or_default();
        *sums.entry(key).or_insert(0.0) += value;
    }
    sums
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
