use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use kcm::cli::{LogFormat, Options};
use tracing_subscriber::EnvFilter;

// The global allocator, chosen at build time (README "Performance" has the measurements):
// jemalloc by default (the `jemalloc` feature), mimalloc when the `mimalloc` feature is on,
// the system allocator with `--no-default-features`.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// klog-style verbosity: 0 is info, 2+ adds debug, 4+ adds trace; RUST_LOG overrides.
fn init_logging(format: LogFormat, verbosity: u8) {
    let default = match verbosity {
        0 | 1 => "info",
        2 | 3 => "debug",
        _ => "trace",
    };
    // kube's client logs every failed request itself (target `kube_client::client::builder`,
    // "failed with error client error (Connect)"), a second line for each failure kcm
    // reports; its HTTP tracing is kept for -v=4 and above.
    let default = if verbosity >= 4 {
        default.to_string()
    } else {
        format!("{default},kube_client::client::builder=off")
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // Colour only on a terminal: log files and collectors get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

// One thread: kcm waits on the API server far more than it computes (each controller's
// requests are rate-limited to --kube-api-qps), and on the scale benchmark's size (a) the
// multi-threaded runtime spent about a quarter more CPU (waking and parking workers, a malloc
// arena per thread) and more memory than this one: 2.96 s against 2.16 s of CPU for the cold
// start, 60.4 against 55.6 MiB after sync. Blocking work (DNS) still runs on tokio's blocking pool.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let options = Options::parse();
    let settings = match options.validate() {
        Ok(settings) => settings,
        Err(err) => {
            eprintln!("kcm: {err}");
            return ExitCode::from(2);
        }
    };
    init_logging(settings.log_format, settings.verbosity);
    match kcm::app::run(settings).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "kcm stopped");
            ExitCode::FAILURE
        }
    }
}
