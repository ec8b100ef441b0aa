//! Prometheus's own binaries, `promtool` and `prometheus`, for the tests that check kcm's
//! monitoring with them. Debian's `prometheus` package ships both. Without them those tests
//! skip, saying how to install them; `.ci/run` installs the package and sets
//! `KCM_REQUIRE_PROMETHEUS=1`, which turns a missing binary into a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const REQUIRE: &str = "KCM_REQUIRE_PROMETHEUS";

/// `name` found on PATH; None (after saying why the test skips) when it is not installed.
pub fn binary(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    });
    if found.is_none() {
        let missing = format!(
            "`{name}` is not on PATH; install Debian's prometheus package \
             (`apt-get install prometheus`), as .ci/run does"
        );
        assert!(
            std::env::var_os(REQUIRE).is_none(),
            "{missing} ({REQUIRE} is set)"
        );
        eprintln!("skipped: {missing}");
    }
    found
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
