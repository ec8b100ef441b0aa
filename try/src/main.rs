//! `cargo run --release -p kcm-try`: kcm's five controllers on an embedded API server,
//! with a live table of what they keep true while a little churn plays. Ctrl-C stops it.
//!
//! `--batch` (or `KCM_TRY_BATCH=1`) plays the churn without pauses, prints the final table
//! and exits: no terminal needed.

mod demo;

use std::io::{IsTerminal, Write};
use std::time::Duration;

use demo::{Demo, Error, SCRIPT};

/// How long each state stays on screen before the next churn step.
const PAUSE: Duration = Duration::from_secs(6);
/// How often the table is redrawn.
const REFRESH: Duration = Duration::from_millis(500);
/// How long the table must stay unchanged to count as settled (batch mode).
const QUIET: Duration = Duration::from_secs(3);
const SETTLE_DEADLINE: Duration = Duration::from_secs(120);
const METRICS_PORT: u16 = 10258;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let batch = std::env::args().any(|a| a == "--batch")
        || std::env::var_os("KCM_TRY_BATCH").is_some_and(|v| v != "0" && !v.is_empty());
    match run(batch).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("try: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(batch: bool) -> Result<(), Error> {
    // kcm's log goes to a file: the terminal is the table's.
    let log_path = std::env::temp_dir().join(format!("kcm-try-{}.log", std::process::id()));
    let log = std::fs::File::create(&log_path)?;
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
         on an in-process kube-testserver, with a small cluster seeded.\n\n\
         kubectl --kubeconfig {}\n\
         curl -s {}\n\
         log: {}\n",
        demo.kubeconfig().display(),
        demo.metrics_url(),
        log_path.display(),
    );
    let closing = closing(&demo.kubeconfig().display().to_string());
    let closing = format!("{closing}{}", explain_hint(&demo.metrics_url()));
    let outcome = if batch {
        play_batch(&demo, &intro, &closing).await
    } else {
        play_live(&demo, &intro, &closing).await
    };
    demo.stop().await?;
    outcome
}

/// What the demo does not run, and how to make a pod count anyway.
fn closing(kubeconfig: &str) -> String {
    format!(
        "Only kcm's five controllers run here: no Deployment, ReplicaSet or scheduler\n\
         controller, so `kubectl create deployment` makes no pods and new pods stay Pending.\n\
         To make a pod count, create it directly; the shop quota counts it at once:\n\
         \x20 kubectl --kubeconfig {kubeconfig} -n shop run extra --image=nginx\n\
         \x20 kubectl --kubeconfig {kubeconfig} -n shop get quota,pods\n"
    )
}

/// One `kcm explain` worth trying: why the batch quota counts what it counts, from kcm's
/// `/debug/explain` (its HTTP listener, beside `/metrics`).
fn explain_hint(metrics_url: &str) -> String {
    let explain = metrics_url.replace("/metrics", "/debug/explain/quota/batch/pods");
    format!(
        "Why the batch quota counts 2 pods (the finished jobs are left out; also `kcm explain`):\n\
         \x20 curl -s {explain}\n"
    )
}

/// The script without pauses, then the final table.
async fn play_batch(demo: &Demo, intro: &str, closing: &str) -> Result<(), Error> {
    println!("{intro}");
    let table = demo
        .script(QUIET, SETTLE_DEADLINE, |step| {
            println!("step: {}", step.what())
        })
        .await?;
    println!("\n{table}\n{closing}");
    Ok(())
}

/// The table redrawn every half second while the script plays, until Ctrl-C.
async fn play_live(demo: &Demo, intro: &str, closing: &str) -> Result<(), Error> {
    let terminal = std::io::stdout().is_terminal();
    let mut steps = SCRIPT.iter().copied();
    let mut last_step = tokio::time::Instant::now();
    let mut status = "cluster seeded; kcm starting".to_string();
    let mut last_table = String::new();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let table = demo.table().await?;
        // Off a terminal (piped to a file), print only when something changed.
        if terminal || table != last_table {
            let clear = if terminal { "\x1b[H\x1b[2J" } else { "" };
            print!("{clear}{intro}\n{table}\n{status}\nCtrl-C stops the demo.\n");
            std::io::stdout().flush()?;
            last_table = table;
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
