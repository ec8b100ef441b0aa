//! Prometheus's own binaries, `promtool` and `prometheus`, for the tests that check kcm's
//! monitoring with them. Debian's `prometheus` package ships both. Those tests are
//! `#[ignore]`d, so `cargo test` reports them as ignored with the reason rather than as
//! passed; `cargo test --workspace --test it -- --ignored prometheus:: dashboard::` runs them
//! (`.ci/run` does), and there a missing binary fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// `name` found on PATH; fails the test, saying how to install it, when it is not.
pub fn binary(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|path| path.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "`{name}` is not on PATH; install Debian's prometheus package \
                 (`apt-get install prometheus`), as .ci/run does"
            )
        })
}

/// Writes `groups` (what a PrometheusRule's `spec.groups` holds) as the rule file `dir/name`.
pub fn write_rule_file(dir: &Path, name: &str, groups: &Value) -> PathBuf {
    let path = dir.join(name);
    let text = serde_yaml_ng::to_string(&json!({ "groups": groups })).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `promtool args…` in `dir` and returns what it printed; fails the test with that
/// output when promtool does not succeed.
pub fn promtool(promtool: &Path, dir: &Path, args: &[&str]) -> String {
    let output = Command::new(promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool runs");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let command = format!("promtool {}", args.join(" "));
    assert!(output.status.success(), "{command} failed:\n{printed}");
    // Shown with --nocapture, as .ci/run runs these tests.
    eprintln!("{command}:\n{printed}");
    printed
}
