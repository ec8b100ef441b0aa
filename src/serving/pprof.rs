//! `--profiling`: Go's `net/http/pprof` paths, so the usual tools work against kcm as against
//! kube-controller-manager: `/debug/pprof/profile?seconds=N` (a CPU profile in pprof's
//! protobuf, for `go tool pprof`), `/debug/pprof/heap` (jemalloc's statistics, as text),
//! `/debug/pprof/cmdline` and the index. On the secure port they sit behind the same
//! delegated authorization as `/metrics` (a SubjectAccessReview of the path).

use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// Go's default length of a CPU profile.
const DEFAULT_SECONDS: u64 = 30;
/// The longest profile served: the profiler is one per process and holds a blocking thread,
/// so a huge `seconds` would lock every later profile out (Go bounds it by the server's write
/// timeout).
const MAX_SECONDS: u64 = 300;

/// Samples per second, Go's `runtime.SetCPUProfileRate` default.
const SAMPLE_HZ: i32 = 100;

const INDEX: &str = "<html><head><title>/debug/pprof/</title></head><body>\n\
/debug/pprof/<br><br>\n\
<a href=\"cmdline\">cmdline</a>: the command line<br>\n\
<a href=\"heap\">heap</a>: the allocator's statistics (jemalloc)<br>\n\
<a href=\"profile\">profile</a>: a CPU profile (?seconds=N, default 30), pprof protobuf<br>\n\
</body></html>\n";

/// The profiling routes, to merge into a listener's router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/debug/pprof", get(index))
        .route("/debug/pprof/", get(index))
        .route("/debug/pprof/cmdline", get(cmdline))
        .route("/debug/pprof/heap", get(heap))
        .route("/debug/pprof/profile", get(profile))
}

async fn index() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX)
}

/// As Go's: the arguments separated by NUL bytes.
async fn cmdline() -> impl IntoResponse {
    let args: Vec<String> = std::env::args().collect();
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        args.join("\0"),
    )
}

/// Go's reading of `seconds` in the query: a positive integer, else the default; at most
/// [`MAX_SECONDS`].
fn profile_length(query: Option<&str>) -> Duration {
    let seconds = query
        .into_iter()
        .flat_map(|query| query.split('&'))
        .find_map(|pair| pair.strip_prefix("seconds="))
        .and_then(|text| text.parse::<u64>().ok())
        .filter(|seconds| *seconds > 0)
        .unwrap_or(DEFAULT_SECONDS);
    Duration::from_secs(seconds.min(MAX_SECONDS))
}

fn failed(status: StatusCode, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

async fn profile(uri: Uri) -> Response {
    let length = profile_length(uri.query());
    // The profiler samples the whole process by timer signals; this thread only waits.
    let profiled = tokio::task::spawn_blocking(move || cpu_profile(length)).await;
    match profiled {
        Ok(Ok(body)) => (
            [
                (header::CONTENT_TYPE, "application/octet-stream"),
                (
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"profile\"",
                ),
            ],
            body,
        )
            .into_response(),
        Ok(Err(message)) => failed(StatusCode::INTERNAL_SERVER_ERROR, message),
        Err(join) => failed(StatusCode::INTERNAL_SERVER_ERROR, join.to_string()),
    }
}

fn cpu_profile(length: Duration) -> Result<Vec<u8>, String> {
    use pprof::protos::Message;
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(SAMPLE_HZ)
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        // Go's words when a profile is already being taken.
        .map_err(|err| format!("Could not enable CPU profiling: {err}"))?;
    std::thread::sleep(length);
    let profile = guard
        .report()
        .build()
        .and_then(|report| report.pprof())
        .map_err(|err| format!("Could not build the CPU profile: {err}"))?;
    Ok(profile.encode_to_vec())
}

async fn heap() -> Response {
    match crate::runtime::memory::statistics() {
        Ok(text) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response(),
        Err(message) => failed(StatusCode::NOT_IMPLEMENTED, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_length_reads_seconds_as_go_does() {
        assert_eq!(profile_length(None), Duration::from_secs(30));
        assert_eq!(profile_length(Some("seconds=5")), Duration::from_secs(5));
        assert_eq!(
            profile_length(Some("debug=1&seconds=2")),
            Duration::from_secs(2)
        );
        for odd in ["seconds=0", "seconds=-1", "seconds=x", "", "second=5"] {
            assert_eq!(profile_length(Some(odd)), Duration::from_secs(30), "{odd}");
        }
        assert_eq!(
            profile_length(Some("seconds=86400")),
            Duration::from_secs(MAX_SECONDS)
        );
    }
}
