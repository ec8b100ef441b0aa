//! `kcm-nodesim`: plays the kubelets of N nodes (and a simple scheduler) against the cluster of
//! the current kubeconfig until interrupted.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::Taint;
use kcm_nodesim::{Config, Simulator, parse_duration};

#[derive(Parser, Debug)]
#[command(name = "kcm-nodesim", version, about)]
struct Args {
    /// The kubeconfig to use (else KUBECONFIG, ~/.kube/config or in-cluster).
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// How many nodes to play.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Nodes are named <prefix><index>.
    #[arg(long, default_value = "sim-")]
    node_prefix: String,
    #[arg(long, default_value = "8")]
    cpu: String,
    #[arg(long, default_value = "32Gi")]
    memory: String,
    #[arg(long, default_value_t = 110)]
    max_pods: u32,
    /// Extra node labels, key=value, comma-separated.
    #[arg(long, value_delimiter = ',')]
    labels: Vec<String>,
    /// Taints the nodes register with, key[=value]:Effect, comma-separated (the kubelet's
    /// --register-with-taints).
    #[arg(long, value_delimiter = ',', value_parser = taint)]
    taints: Vec<Taint>,
    /// Leave binding to a kube-scheduler that runs in the cluster.
    #[arg(long)]
    no_schedule: bool,
    /// The node Leases' duration (Go duration, whole seconds).
    #[arg(long, default_value = "40s", value_parser = duration)]
    lease_duration: Duration,
    /// How often node Leases are renewed (Go duration).
    #[arg(long, default_value = "10s", value_parser = duration)]
    lease_renew: Duration,
    /// How often node status is posted when nothing changed.
    #[arg(long, default_value = "1m", value_parser = duration)]
    status_report: Duration,
    /// How long a container takes to exit after SIGTERM.
    #[arg(long, default_value = "1s", value_parser = duration)]
    shutdown: Duration,
    /// How many pod writes (status, binding, deletion) may be under way at once.
    #[arg(long, default_value_t = 16)]
    writes_in_flight: usize,
}

fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).ok_or_else(|| format!("{text:?} is not a duration like 10s or 1m30s"))
}

fn taint(text: &str) -> Result<Taint, String> {
    let (key_value, effect) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("taint {text:?} is not key[=value]:Effect"))?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return Err(format!("taint {text:?}: unknown effect {effect:?}"));
    }
    let (key, value) = match key_value.split_once('=') {
        Some((key, value)) => (key, Some(value.to_string())),
        None => (key_value, None),
    };
    Ok(Taint {
        key: key.to_string(),
        value,
        effect: effect.to_string(),
        time_added: None,
    })
}

fn labels(pairs: &[String]) -> Result<BTreeMap<String, String>, String> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| format!("label {pair:?} is not key=value"))
        })
        .collect()
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kcm-nodesim: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    let client = kube::Client::try_from(config)?;
    let simulator = Simulator::start(
        client,
        Config {
            nodes: args.nodes,
            node_prefix: args.node_prefix,
            cpu: args.cpu,
            memory: args.memory,
            max_pods: args.max_pods,
            labels: labels(&args.labels)?,
            taints: args.taints,
            schedule: !args.no_schedule,
            lease_duration: args.lease_duration,
            lease_renew: args.lease_renew,
            status_report: args.status_report,
            shutdown: args.shutdown,
            writes_in_flight: args.writes_in_flight,
            ..Config::default()
        },
    )
    .await?;
    eprintln!(
        "kcm-nodesim: playing {}; Ctrl-C stops",
        simulator.nodes().join(", ")
    );
    tokio::signal::ctrl_c().await?;
    simulator.shutdown().await;
    Ok(())
}
