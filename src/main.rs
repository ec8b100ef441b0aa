use std::ffi::OsString;
use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use kcm::cli::Options;
use kcm::cli::explain::{self, ExplainOptions};
use kcm::runtime::pacing::Pacing;
use kcm::settings::{LogFormat, Settings, verbosity_for};
use tracing::Level;
use tracing_subscriber::filter::{EnvFilter, filter_fn};
use tracing_subscriber::layer::Filter;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{Registry, fmt};

// The global allocator, chosen at build time (README "Performance" has the measurements):
// jemalloc by default (the `jemalloc` feature), mimalloc when the `mimalloc` feature is on,
// the system allocator with `--no-default-features`.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// kube's request logging target, which repeats kcm's own connection-error lines.
const KUBE_CLIENT_BUILDER: &str = "kube_client::client::builder";

/// The level `tracing` logs at for a klog verbosity: 0-1 info, 2-3 debug, 4 and more trace.
fn level_for(verbosity: u8) -> Level {
    match verbosity {
        0 | 1 => Level::INFO,
        2 | 3 => Level::DEBUG,
        _ => Level::TRACE,
    }
}

/// Logs to stderr in `--logging-format`, at `-v` with `--vmodule`'s per-file levels;
/// RUST_LOG, when set, replaces both.
fn init_logging(settings: &Settings) {
    let filter: Box<dyn Filter<Registry> + Send + Sync> = match EnvFilter::try_from_default_env() {
        Ok(env) => Box::new(env),
        Err(_) => {
            let (verbosity, vmodule) = (settings.verbosity, settings.vmodule.clone());
            // Decided once per call site: the file of a log statement never changes.
            Box::new(filter_fn(move |metadata| {
                let verbosity = verbosity_for(metadata.file(), verbosity, &vmodule);
                // kube's client logs every failed request itself (target
                // `kube_client::client::builder`), a second line for each failure kcm
                // reports; its HTTP tracing is kept for -v=4 and above.
                *metadata.level() <= level_for(verbosity)
                    && (verbosity >= 4 || !metadata.target().starts_with(KUBE_CLIENT_BUILDER))
            }))
        }
    };
    // Colour only on a terminal: log files and collectors get plain text.
    let layer = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let layer = match settings.log_format {
        LogFormat::Text => layer.boxed(),
        LogFormat::Json => layer.json().boxed(),
    };
    tracing_subscriber::registry()
        .with(layer.with_filter(filter))
        .init();
}

// One thread: kcm waits on the API server far more than it computes (each controller's
// requests are rate-limited to --kube-api-qps), and on the scale benchmark's size (a) the
// multi-threaded runtime spent about a quarter more CPU (waking and parking workers, a malloc
// arena per thread) and more memory than this one: 2.96 s against 2.16 s of CPU for the cold
// start, 60.4 against 55.6 MiB after sync. Blocking work (DNS) still runs on tokio's blocking pool.
// Wake-ups in a burst are coalesced (`runtime::pacing`).
fn main() -> ExitCode {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    match Pacing::install(&mut builder).build() {
        Ok(runtime) => runtime.block_on(run()),
        Err(err) => {
            eprintln!("error: cannot start the runtime: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(explain_args) = explain::explain_args(&args) {
        return explain(explain_args).await;
    }
    if args.first().is_some_and(explain::is_kubectl_plugin) {
        eprintln!(
            "usage: kubectl kcm explain KIND [-n NAMESPACE] NAME (kubectl kcm explain --help)"
        );
        return ExitCode::FAILURE;
    }
    let options = match Options::try_parse() {
        Ok(options) => options,
        Err(err) => return parse_failed(&err),
    };
    if let Some(version) = options.version_text() {
        println!("{version}");
        return ExitCode::SUCCESS;
    }
    let settings = match options.validate() {
        Ok(settings) => settings,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    init_logging(&settings);
    keep_freed_pages_briefly();
    match kcm::app::run(settings).await {
        Ok(()) => ExitCode::SUCCESS,
        // As a flag error: one plain line, before anything ran.
        Err(err) if err.at_startup() => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
        Err(err) => {
            tracing::error!(error = %err, "kcm stopped");
            ExitCode::FAILURE
        }
    }
}

/// jemalloc's options: `_RJEM_MALLOC_CONF`, read when it starts.
const JEMALLOC_OPTIONS_ENV: &str = "_RJEM_MALLOC_CONF";

/// Freed pages go back to the system after 1 s instead of jemalloc's 10, unless jemalloc was
/// configured through its environment variable. kcm frees in bursts (a round of status writes,
/// a watch's events) between quiet spells, and the default kept up to ten seconds of them
/// resident. On the real API server at 10 000 pods it lowered the RSS once converged by about
/// half a MiB, with kcm's CPU unchanged (benches/README.md, "History").
fn keep_freed_pages_briefly() {
    if std::env::var_os(JEMALLOC_OPTIONS_ENV).is_none() {
        kcm::runtime::memory::set_dirty_decay(std::time::Duration::from_secs(1));
    }
}

/// A command line clap refused, or `--help`: printed as clap words it. kube-controller-manager
/// (cobra through component-base's cli.Run) exits 1 on any command-line error, and 0 for --help.
fn parse_failed(err: &clap::Error) -> ExitCode {
    let _ = err.print();
    if err.use_stderr() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `kcm explain …`: prints the answer, or the error (exit 1).
async fn explain(args: Vec<OsString>) -> ExitCode {
    let options = match ExplainOptions::try_parse_from(args) {
        Ok(options) => options,
        Err(err) => return parse_failed(&err),
    };
    match options.run().await {
        Ok(answer) => {
            print!("{answer}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
