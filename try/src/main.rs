//! `cargo run --release -p kcm-try`: kcm's five controllers on an embedded API server,
//! with a live table of what they keep true while a little churn plays. Ctrl-C stops it.
//!
//! `--batch` (or `KCM_TRY_BATCH=1`) plays the churn without pauses, prints the final table
//! and exits: no terminal needed.

mod demo;

use std::io::{IsTerminal, Write};
use std::time::Duration;

use demo::{Demo, Error, Note, SCRIPT, Step};

/// How long each state stays on screen before the next churn step.
const PAUSE: Duration = Duration::from_secs(6);
/// How often the table is read (and redrawn when it changed).
const REFRESH: Duration = Duration::from_millis(500);
/// How long the table must stay unchanged to count as settled (batch mode).
const QUIET: Duration = Duration::from_secs(3);
const SETTLE_DEADLINE: Duration = Duration::from_secs(120);
const METRICS_PORT: u16 = 10258;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let batch = std::env::args().any(|a| a == "--batch")
        || std::env::var_os("KCM_TRY_BATCH").is_some_and(|v| v != "0" && !v.is_empty());
    // kcm's log goes to a file: the terminal is the table's. It is removed at exit, unless
    // the demo failed: then it says why.
    let log_path = std::env::temp_dir().join(format!("kcm-try-{}.log", std::process::id()));
    match run(batch, &log_path).await {
        Ok(()) => {
            let _ = std::fs::remove_file(&log_path);
            std::process::ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("try: {err} (kcm's log: {})", log_path.display());
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(batch: bool, log_path: &std::path::Path) -> Result<(), Error> {
    let log = std::fs::File::create(log_path)?;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::sync::Mutex::new(log))
        .with_ansi(false)
        .init();

    let port = free_port(METRICS_PORT)?;
    let demo = Demo::start(port).await?;
    let intro = format!(
        "kcm: resourcequota, disruption, ttl, resourceclaim and storage-version-gc controllers\n\
         on an in-process kube-testserver, with a small cluster seeded.\n\
         metrics: curl -s {}\n",
        demo.metrics_url(),
    );
    let outcome = if batch {
        // Ctrl-C still stops kcm and the server, so the server's files are removed.
        tokio::select! {
            outcome = play_batch(&demo, &intro) => outcome,
            _ = tokio::signal::ctrl_c() => {
                println!("\nstopping kcm and the API server");
                Ok(())
            }
        }
    } else {
        let kubectl = kubectl_hint(&demo.kubeconfig().display().to_string());
        let closing = format!(
            "{CLOSING}{}{}",
            explain_quota_hint(&demo.metrics_url()),
            explain_pdb_hint(&demo.metrics_url()),
        );
        play_live(&demo, &format!("{intro}{kubectl}"), &closing).await
    };
    demo.stop().await?;
    outcome
}

/// How to point kubectl at the demo, and what to try.
fn kubectl_hint(kubeconfig: &str) -> String {
    format!(
        "In another terminal, while the demo runs:\n\
         \x20 export KUBECONFIG={kubeconfig}\n\
         \x20 kubectl get resourcequota,pdb,pods -A\n\
         \x20 kubectl get events -A\n"
    )
}

/// What the demo does not run, and what a cluster's API server refuses.
const CLOSING: &str = "\
Only kcm's five controllers run here, with kcm-nodesim's kubelets and scheduler on
worker-0..2 and the demo's own ReplicaSet controller for shop/web: `kubectl create
deployment` makes no pods. Create pods directly; the API server admits them against
the quotas kcm keeps, as a cluster's does (shop/compute is full and wants requests
and limits):
  kubectl -n shop run extra --image=nginx
  kubectl -n shop describe pdb web
";

/// Why the finished jobs' pods are not in quota batch/best-effort.
fn explain_quota_hint(metrics_url: &str) -> String {
    explain_hint(
        metrics_url,
        "Why quota batch/best-effort counts 1 pod (the finished jobs are left out)",
        ["quota", "batch", "best-effort"],
    )
}

/// Why PDB shop/web holds the drain while 3 web pods are unready, and lets it go after.
fn explain_pdb_hint(metrics_url: &str) -> String {
    explain_hint(
        metrics_url,
        "Which web pods PDB shop/web counts healthy, and so the disruptions it allows",
        ["pdb", "shop", "web"],
    )
}

/// `kcm explain` of an object (`[kind, namespace, name]`), and the same from kcm's
/// `/debug/explain` (its HTTP listener, beside `/metrics`), while the demo runs.
fn explain_hint(metrics_url: &str, why: &str, [kind, namespace, name]: [&str; 3]) -> String {
    let explain = metrics_url.replace(
        "/metrics",
        &format!("/debug/explain/{kind}/{namespace}/{name}"),
    );
    format!(
        "{why}:\n\
         \x20 kcm explain {kind} -n {namespace} {name}   # with the demo's KUBECONFIG\n\
         \x20 curl -s {explain}\n"
    )
}

/// The script without pauses, with the drain's lines, the budget and the drain while it is
/// held, then the final table.
async fn play_batch(demo: &Demo, intro: &str) -> Result<(), Error> {
    println!("{intro}");
    let explain = explain_pdb_hint(&demo.metrics_url());
    let table = demo
        .script(QUIET, SETTLE_DEADLINE, |note| match note {
            Note::Step(step) => println!("step: {}", step.what()),
            Note::Drain(line) => println!("  {line}"),
            Note::Settled(Step::DrainNode, table) => {
                // Sections are separated by blank lines; the rest comes with the final table.
                for section in table
                    .split("\n\n")
                    .filter(|s| s.starts_with("PODDISRUPTIONBUDGET") || s.starts_with("DRAIN"))
                {
                    println!("\n{}", section.trim_end());
                }
                println!("\n{explain}");
            }
            Note::Settled(..) => {}
        })
        .await?;
    println!(
        "\n{table}\nThe demo has stopped. `cargo run --release -p kcm-try` (without --batch)\n\
         keeps it running for kubectl."
    );
    Ok(())
}

/// The table, redrawn when it or the status line changes, while the script plays; then
/// kcm keeps running until Ctrl-C.
async fn play_live(demo: &Demo, intro: &str, closing: &str) -> Result<(), Error> {
    let terminal = std::io::stdout().is_terminal();
    let mut steps = SCRIPT.iter().copied();
    let mut last_step = tokio::time::Instant::now();
    let mut status = "cluster seeded; kcm starting".to_string();
    let mut shown = String::new();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let drain: String = demo
            .drain_progress()
            .iter()
            .flat_map(|d| d.lines.iter())
            .map(|line| format!("  {line}\n"))
            .collect();
        let screen = format!(
            "{intro}\n{}\n{drain}{status}\nCtrl-C stops the demo.\n",
            demo.table().await?
        );
        if screen != shown {
            let clear = if terminal { "\x1b[H\x1b[2J" } else { "" };
            print!("{clear}{screen}");
            std::io::stdout().flush()?;
            shown = screen;
        }
        if demo.kcm_failed() {
            return Err("kcm stopped; see its log".into());
        }
        if last_step.elapsed() >= PAUSE {
            last_step = tokio::time::Instant::now();
            status = match steps.next() {
                Some(step) => {
                    demo.run_step(step).await?;
                    format!("churn: {}", step.what())
                }
                None => {
                    format!("script done; kcm keeps running. Try kubectl against it.\n\n{closing}")
                }
            };
        }
        tokio::select! {
            _ = &mut ctrl_c => {
                println!("\nstopping kcm and the API server");
                return Ok(());
            }
            _ = tokio::time::sleep(REFRESH) => {}
        }
    }
}

/// `preferred` when it is free, else any free loopback port.
fn free_port(preferred: u16) -> Result<u16, Error> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", preferred))
        .or_else(|_| std::net::TcpListener::bind(("127.0.0.1", 0)))?;
    Ok(listener.local_addr()?.port())
}
