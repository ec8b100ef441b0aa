//! The command line: every flag with its default in --help, and bad input → exit 2.

use std::process::Command;

fn kcm(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kcm"))
        .args(args)
        .output()
        .expect("kcm runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn help_lists_every_flag_with_its_default() {
    let (code, help, _) = kcm(&["--help"]);
    assert_eq!(code, 0);
    let expected = [
        ("--kubeconfig", None),
        ("--controllers", Some("[default: *]")),
        ("--concurrent-resource-quota-syncs", Some("[default: 5]")),
        ("--resource-quota-sync-period", Some("[default: 5m0s]")),
        ("--concurrent-resourceclaim-syncs", Some("[default: 50]")),
        ("--concurrent-disruption-syncs", Some("[default: 1]")),
        ("--feature-gates", None),
        ("--leader-elect", Some("[default: true]")),
        ("--leader-elect-lease-duration", Some("[default: 15s]")),
        ("--leader-elect-renew-deadline", Some("[default: 10s]")),
        ("--leader-elect-retry-period", Some("[default: 2s]")),
        (
            "--leader-elect-resource-namespace",
            Some("[default: kube-system]"),
        ),
        ("--leader-elect-resource-name", Some("[default: kcm]")),
        ("--bind-address", Some("[default: 0.0.0.0]")),
        ("--secure-port", Some("[default: 10257]")),
        ("--cert-dir", None),
        ("--tls-cert-file", None),
        ("--tls-private-key-file", None),
        ("--client-ca-file", None),
        ("--authentication-kubeconfig", None),
        ("--authorization-kubeconfig", None),
        ("--authentication-skip-lookup", Some("[default: false]")),
        (
            "--authentication-token-webhook-cache-ttl",
            Some("[default: 10s]"),
        ),
        (
            "--authorization-webhook-cache-authorized-ttl",
            Some("[default: 10s]"),
        ),
        (
            "--authorization-webhook-cache-unauthorized-ttl",
            Some("[default: 10s]"),
        ),
        (
            "--authorization-always-allow-paths",
            Some("[default: /healthz,/readyz,/livez]"),
        ),
        ("--port", None),
        ("--kube-api-qps", Some("[default: 20]")),
        ("--kube-api-burst", Some("[default: 30]")),
        ("--shadow", Some("[default: false]")),
        (
            "--use-service-account-credentials",
            Some("[default: false]"),
        ),
        ("--log-format", Some("[default: text]")),
        ("--v", Some("[default: 0]")),
    ];
    // Each option is a line starting with its flags, then indented description lines.
    let mut entries: Vec<String> = Vec::new();
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        if line.trim_start().starts_with('-') && indent <= 6 {
            entries.push(line.trim().to_string());
        } else if let Some(last) = entries.last_mut() {
            last.push(' ');
            last.push_str(line.trim());
        }
    }
    for (flag, default) in expected {
        let entry = entries
            .iter()
            .find(|e| {
                e.split([' ', '[', '='])
                    .any(|word| word.trim_end_matches(',') == flag)
            })
            .unwrap_or_else(|| panic!("{flag} missing from --help:\n{help}"));
        if let Some(default) = default {
            assert!(
                entry.contains(default),
                "{flag} should show {default}:\n{entry}"
            );
        }
    }
}

#[test]
fn bad_flags_exit_2_with_a_clear_message() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["--concurrent-resource-quota-syncs=0"],
            "--concurrent-resource-quota-syncs must be greater than 0",
        ),
        (&["--controllers=*,bogus"], "resourcequota-controller"),
        (&["--feature-gates=NoSuchGate=true"], "NoSuchGate"),
        (&["--leader-elect-renew-deadline=20s"], "renew"),
        (&["--kube-api-qps=-1"], "kube-api-qps"),
        (&["--no-such-flag"], "--no-such-flag"),
    ];
    for (args, needle) in cases {
        let (code, _, stderr) = kcm(args);
        assert_eq!(code, 2, "{args:?} should exit 2; stderr: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: stderr should mention {needle:?}: {stderr}"
        );
    }
}
