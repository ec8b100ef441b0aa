//! `kube-testserver`: serve the in-memory API server until Ctrl-C or SIGTERM, for kubectl, kcm or a
//! benchmark running in another process.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use kube_testserver::{Options, TestServer};
use serde_json::Value;

#[derive(Parser, Debug)]
#[command(
    name = "kube-testserver",
    version,
    about = "An in-memory Kubernetes API server for tests"
)]
struct Args {
    /// Port on 127.0.0.1 (0 picks a free one and prints it).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Write a kubeconfig pointing at the server to this file.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Load every *.yaml, *.yml and *.json file (multi-document YAML allowed) from this
    /// directory as initial objects, status included.
    #[arg(long)]
    seed: Option<PathBuf>,
    /// Events kept for watch resumption before a resourceVersion expires (410 Gone).
    #[arg(long, default_value_t = 10_000)]
    event_window: usize,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 1)]
    bookmark_interval: u64,
    /// Serve scheduling.k8s.io/v1alpha2 PodGroups (an alpha API in v1.36).
    #[arg(long)]
    pod_groups: bool,
    /// Serve HTTPS with a CA of the server's own; the kubeconfig written trusts it and
    /// authenticates as the admin with a client certificate.
    #[arg(long)]
    tls: bool,
    /// The API server's `WatchList` gate: `false` refuses streaming initial lists
    /// (`sendInitialEvents`) with 422, as a server before 1.27 does.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    watch_list: bool,
}

fn read_seed_objects(dir: &Path) -> Result<Vec<Value>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(doc)
                .map_err(|e| format!("{}: {e}", file.display()))?;
            match value {
                Value::Null => {}
                Value::Object(_) if value["kind"].as_str().is_some_and(|k| k.ends_with("List")) => {
                    objects.extend(value["items"].as_array().cloned().unwrap_or_default());
                }
                other => objects.push(other),
            }
        }
    }
    // Namespaces first, so the objects in them can be created.
    objects.sort_by_key(|o| o["kind"] != "Namespace");
    Ok(objects)
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let options = Options {
        port: args.port,
        event_window: args.event_window,
        bookmark_interval: Duration::from_secs(args.bookmark_interval.max(1)),
        pod_groups: args.pod_groups,
        tls: args.tls,
        watch_list: args.watch_list,
        ..Options::default()
    };
    let server = match TestServer::start_with(options).await {
        Ok(server) => server,
        Err(err) => {
            eprintln!("kube-testserver: cannot listen: {err}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(dir) = &args.seed {
        let objects = match read_seed_objects(dir) {
            Ok(objects) => objects,
            Err(err) => {
                eprintln!("kube-testserver: {err}");
                return ExitCode::FAILURE;
            }
        };
        for obj in objects {
            if let Err(err) = server.seed(obj) {
                eprintln!("kube-testserver: seed: {}", err.message);
                return ExitCode::FAILURE;
            }
        }
    }
    if let Some(path) = &args.kubeconfig_out
        && let Err(err) = std::fs::copy(server.kubeconfig_path(), path)
    {
        eprintln!("kube-testserver: cannot write {}: {err}", path.display());
        return ExitCode::FAILURE;
    }
    println!("kube-testserver listening on {}", server.url());
    stopped().await;
    // Removes the server's temporary directory (its kubeconfig).
    server.shutdown().await;
    ExitCode::SUCCESS
}

/// Resolves on Ctrl-C or SIGTERM (how test harnesses and service managers stop it).
async fn stopped() {
    #[cfg(unix)]
    let sigterm = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            // Ctrl-C alone then stops it.
            Err(err) => {
                eprintln!("kube-testserver: cannot wait for SIGTERM: {err}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let sigterm = std::future::pending::<()>();
    tokio::select! {
        () = sigterm => {}
        interrupted = tokio::signal::ctrl_c() => {
            if let Err(err) = interrupted {
                eprintln!("kube-testserver: cannot wait for Ctrl-C: {err}");
            }
        }
    }
}
