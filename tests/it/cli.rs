//! The command line: every flag with its default in --help, and bad input → exit 1 (upstream's code).

use std::process::Command;

use k8s_openapi::api::core::v1::Node;
use kcm_testsupport::{DEADLINE, Kcm, eventually};
use kube::api::{Api, PostParams};
use kube_testserver::TestServer;

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
        ("--warm-standby", Some("[default: true]")),
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
        ("--logging-format", Some("[default: text]")),
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
        (&["--feature-gates=DRAAdminAccess=false"], "DRAAdminAccess"),
        (&["--leader-elect-renew-deadline=20s"], "renew"),
        (&["--kube-api-qps=-1"], "kube-api-qps"),
        (&["--no-such-flag"], "--no-such-flag"),
    ];
    for (args, needle) in cases {
        let (code, _, stderr) = kcm(args);
        assert_eq!(code, 1, "{args:?} should exit 1; stderr: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: stderr should mention {needle:?}: {stderr}"
        );
    }
}

/// One row of kube-controller-manager v1.36.2's flag table (tests/data/upstream-flags.md).
struct UpstreamFlag {
    name: String,
    kind: String,
    default: String,
}

fn upstream_flags() -> Vec<UpstreamFlag> {
    let table = include_str!("../data/upstream-flags.md");
    let flags: Vec<UpstreamFlag> = table
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            // | section | `--flag` | type | default |
            let name = cells.get(2)?.strip_prefix("`--")?.strip_suffix('`')?;
            Some(UpstreamFlag {
                name: name.to_owned(),
                kind: cells[3].to_owned(),
                default: cells[4].trim_matches('"').to_owned(),
            })
        })
        .collect();
    assert_eq!(flags.len(), 149, "the table lists 149 flags");
    flags
}

/// A valid value of `flag` for its type (its upstream default when it has one).
fn valid_value(flag: &UpstreamFlag) -> String {
    let special = match flag.name.as_str() {
        "controllers" => Some("*"),
        "feature-gates" => Some("kube:StorageVersionAPI=true"),
        "emulated-version" | "min-compatibility-version" => Some("1.36"),
        "master" => Some("https://127.0.0.1:6443"),
        "logging-format" => Some("json"),
        "controller-start-interval" => Some("0s"),
        "cert-dir" | "kubeconfig" => Some("/tmp"),
        // Honoured serving flags: values the secure port accepts.
        "tls-cipher-suites" => Some("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256"),
        "tls-min-version" => Some("VersionTLS12"),
        _ => None,
    };
    if let Some(value) = special {
        return value.to_owned();
    }
    let default = flag.default.trim_matches(['[', ']']);
    match flag.kind.as_str() {
        "bool" => "true".to_owned(),
        "string" if !default.is_empty() => default.to_owned(),
        "string" => "/etc/kubernetes/some-file".to_owned(),
        "strings" if !default.is_empty() => default.to_owned(),
        "strings" => "a,b".to_owned(),
        "duration" if !default.is_empty() => default.to_owned(),
        "duration" => "1s".to_owned(),
        "int32" | "int" | "float32" | "float" if !default.is_empty() => default.to_owned(),
        "int32" | "int" | "float32" | "float" => "1".to_owned(),
        "ip" => default.to_owned(),
        "stringToString" => "apiserver_request_total=verb".to_owned(),
        "namedCertKey" => "/etc/kcm/a.crt,/etc/kcm/a.key:example.com".to_owned(),
        "int32Slice" => "23,24".to_owned(),
        "quantity" => "100Mi".to_owned(),
        "pattern=N,..." => "sync=4,informer*=2".to_owned(),
        "Level" => "2".to_owned(),
        other => panic!("no value for --{} of type {other}", flag.name),
    }
}

fn options(args: &[String]) -> Result<kcm::cli::Options, clap::Error> {
    <kcm::cli::Options as clap::Parser>::try_parse_from(
        std::iter::once("kcm".to_owned()).chain(args.iter().cloned()),
    )
}

#[test]
fn every_upstream_flag_is_accepted_with_a_value_of_its_type() {
    let flags: Vec<UpstreamFlag> = upstream_flags()
        .into_iter()
        .filter(|flag| !matches!(flag.name.as_str(), "help" | "version"))
        .collect();
    let mut args: Vec<String> = flags
        .iter()
        .map(|flag| format!("--{}={}", flag.name, valid_value(flag)))
        .collect();
    // Both files or neither.
    args.push("--tls-private-key-file=/etc/kcm/tls.key".to_owned());
    let settings = options(&args)
        .unwrap_or_else(|error| panic!("{error}"))
        .validate()
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(settings.use_service_account_credentials);
    assert_eq!(settings.log_format, kcm::cli::LogFormat::Json);
    assert_eq!(settings.verbosity, 2);
    assert_eq!(settings.vmodule.len(), 2);
    assert_eq!(
        settings.master.as_ref().map(ToString::to_string).as_deref(),
        Some("https://127.0.0.1:6443/")
    );
    // Exactly the flags of what kcm does not do are named at start.
    // (The 15 TLS, HTTP/2 and front-proxy flags are honoured by the secure port.)
    assert_eq!(
        settings.unused_flags.len(),
        93,
        "{:?}",
        settings.unused_flags
    );
    assert!(
        !settings
            .unused_flags
            .iter()
            .any(|flag| flag.starts_with("--tls-") || flag.starts_with("--requestheader-")),
        "{:?}",
        settings.unused_flags
    );
    for used in [
        "--tls-sni-cert-key",
        "--kubeconfig",
        "--controllers",
        "--kube-api-qps",
        "--profiling",
        "--vmodule",
        "--leader-elect",
    ] {
        assert!(!settings.unused_flags.iter().any(|f| f == used), "{used}");
    }
    for unused in [
        "--allocate-node-cidrs",
        "--allow-metric-labels",
        "--concurrent-gc-syncs",
        "--log-json-info-buffer-size",
    ] {
        assert!(
            settings.unused_flags.iter().any(|f| f == unused),
            "{unused}"
        );
    }

    // The same with `--flag value` (bools stay `--flag`), repeating each list flag.
    let mut spaced = Vec::new();
    for flag in &flags {
        if flag.kind == "bool" {
            spaced.push(format!("--{}", flag.name));
        } else {
            spaced.push(format!("--{}", flag.name));
            spaced.push(valid_value(flag));
        }
    }
    spaced.push("--tls-private-key-file=/etc/kcm/tls.key".to_owned());
    spaced.push("--tls-sni-cert-key=/etc/kcm/b.crt,/etc/kcm/b.key".to_owned());
    spaced.push("--tls-cipher-suites=TLS_AES_128_GCM_SHA256".to_owned());
    assert_eq!(
        options(&spaced).unwrap().validate().unwrap().unused_flags,
        settings.unused_flags
    );
}

#[test]
fn help_lists_every_upstream_flag() {
    let (code, help, _) = kcm(&["--help"]);
    assert_eq!(code, 0);
    for flag in upstream_flags() {
        let long = format!("--{}", flag.name);
        assert!(
            help.split([' ', '[', '=', ',', '\n'])
                .any(|word| word == long),
            "{long} missing from --help"
        );
    }
}

#[test]
fn a_wrong_type_is_refused_with_gos_message() {
    let cases: &[(&str, &str)] = &[
        (
            "--allocate-node-cidrs=maybe",
            "strconv.ParseBool: parsing \"maybe\": invalid syntax",
        ),
        (
            "--concurrent-gc-syncs=five",
            "strconv.ParseInt: parsing \"five\": invalid syntax",
        ),
        (
            "--kube-api-burst=3000000000",
            "strconv.ParseInt: parsing \"3000000000\": value out of range",
        ),
        (
            "--http2-max-streams-per-connection=1.5",
            "strconv.ParseInt: parsing \"1.5\": invalid syntax",
        ),
        (
            "--node-eviction-rate=fast",
            "strconv.ParseFloat: parsing \"fast\": invalid syntax",
        ),
        (
            "--horizontal-pod-autoscaler-tolerance=10%",
            "strconv.ParseFloat: parsing \"10%\": invalid syntax",
        ),
        ("--node-monitor-period=5", "missing unit in duration \"5\""),
        (
            "--bind-address=localhost",
            "failed to parse IP: \"localhost\"",
        ),
        (
            "--allow-metric-labels=a",
            "a must be formatted as key=value",
        ),
        (
            "--tls-sni-cert-key=a.crt",
            "expected comma separated certificate and key file paths",
        ),
        (
            "--tls-curve-preferences=x",
            "strconv.ParseInt: parsing \"x\": invalid syntax",
        ),
        (
            "--log-json-info-buffer-size=lots",
            "quantities must match the regular expression",
        ),
        (
            "--vmodule=sync",
            "syntax error: expect comma-separated list of filename=N",
        ),
        (
            "--v=high",
            "strconv.ParseInt: parsing \"high\": invalid syntax",
        ),
        (
            "--logging-format=xml",
            "Unsupported value: \"xml\": supported values: \"json\", \"text\"",
        ),
    ];
    for (arg, message) in cases {
        let flag = arg.split('=').next().unwrap();
        let error = options(&[arg.to_string()]).unwrap_err().to_string();
        assert!(
            error.contains(flag) && error.contains(message),
            "{arg}: {error}"
        );
        let (code, _, stderr) = kcm(&[arg]);
        assert_eq!(code, 1, "{arg}");
        assert!(stderr.contains(message), "{arg}: {stderr}");
    }
    // `--flag BOOL` is not pflag syntax: the word is an argument kcm does not take.
    assert!(options(&["--allocate-node-cidrs".into(), "false".into()]).is_err());
}

/// pflag takes the word after a flag as its value even when it starts with '-', so a
/// negative number after a space is the value, judged as `--flag=-5` is.
#[test]
fn a_negative_number_after_a_space_is_the_flags_value() {
    let numeric = upstream_flags().into_iter().filter(|flag| {
        matches!(
            flag.kind.as_str(),
            "int32" | "int" | "float32" | "float" | "Level"
        )
    });
    let mut checked = 0;
    for flag in numeric {
        let long = format!("--{}", flag.name);
        let joined =
            options(&[format!("{long}=-5")]).map(|o| o.validate().map_err(|e| e.to_string()));
        let spaced =
            options(&[long.clone(), "-5".into()]).map(|o| o.validate().map_err(|e| e.to_string()));
        match (joined, spaced) {
            (Ok(joined), Ok(spaced)) => assert_eq!(
                joined.map(|s| s.unused_flags),
                spaced.map(|s| s.unused_flags),
                "{long}"
            ),
            (joined, spaced) => panic!(
                "{long}: {:?} vs {:?}",
                joined.map(|_| ()),
                spaced.map(|_| ())
            ),
        }
        checked += 1;
    }
    assert_eq!(checked, 41);

    for (args, message) in [
        (
            &["--kube-api-qps", "-5"][..],
            "error: --kube-api-qps must be greater than 0, got -5",
        ),
        (
            &["--kube-api-burst", "-5"][..],
            "error: --kube-api-burst must be greater than 0, got -5",
        ),
        (
            &["--concurrent-resource-quota-syncs", "-1"][..],
            "error: --concurrent-resource-quota-syncs must be greater than 0, got -1",
        ),
        (
            &["--secure-port", "-1"][..],
            "error: --secure-port -1 must be between 0 and 65535",
        ),
    ] {
        let (code, _, stderr) = kcm(args);
        assert_eq!(code, 1, "{args:?}");
        assert!(stderr.starts_with(message), "{args:?}: {stderr}");
    }
}

#[test]
fn feature_gate_errors_exit_with_upstreams_message() {
    let cases: &[(&str, &str)] = &[
        (
            "--feature-gates=DRAAdminAccess=false",
            "error: cannot set feature gate DRAAdminAccess to false, feature is locked to true\n",
        ),
        (
            "--feature-gates=kube:InPlacePodVerticalScaling=false",
            "error: cannot set feature gate InPlacePodVerticalScaling to false, feature is locked to true\n",
        ),
        (
            "--feature-gates=StorageVersionAPI=maybe",
            "error: invalid value of StorageVersionAPI=maybe, err: strconv.ParseBool: parsing \"maybe\": invalid syntax\n",
        ),
        (
            "--feature-gates=wardle:Foo=true",
            "error: component not registered: wardle\n",
        ),
    ];
    for (arg, message) in cases {
        let (code, _, stderr) = kcm(&[arg]);
        assert_eq!(code, 1, "{arg}");
        assert_eq!(stderr, *message, "{arg}");
    }
}

/// Waits until kcm's ttl-controller annotated a new node: kcm is running and talking to
/// `server`.
async fn ttl_converges(server: &TestServer, node: &str) {
    let nodes: Api<Node> = Api::all(server.client());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({ "metadata": { "name": node } })).unwrap(),
        )
        .await
        .unwrap();
    eventually("the node gets its ttl annotation", DEADLINE, || async {
        nodes.get(node).await.ok().is_some_and(|node| {
            node.metadata
                .annotations
                .is_some_and(|a| a.contains_key("node.alpha.kubernetes.io/ttl"))
        })
    })
    .await;
}

#[tokio::test]
async fn unknown_gates_and_unused_flags_are_logged_once_and_kcm_runs() {
    let server = TestServer::start().await;
    let kcm = Kcm::start(
        server.kubeconfig_path(),
        &[
            "--controllers=ttl",
            "--leader-elect=false",
            "--feature-gates=kube:NoSuchGate=true,kube:GenericWorkload=true",
            "--kube-api-content-type=application/cbor",
            "--allocate-node-cidrs",
            "--concurrent-gc-syncs",
            "30",
            "--log-format=text",
        ],
    );
    ttl_converges(&server, "node-1").await;
    let log = kcm.log();
    for line in [
        "unrecognized feature gate: NoSuchGate",
        "--kube-api-content-type=application/cbor: kcm reads application/vnd.kubernetes.protobuf or application/json; reading application/json",
        "accepted, not used by kcm: --allocate-node-cidrs, --concurrent-gc-syncs",
    ] {
        assert_eq!(log.matches(line).count(), 1, "{line}:\n{log}");
    }
}

#[tokio::test]
async fn master_overrides_the_kubeconfigs_server() {
    let server = TestServer::start().await;
    // A kubeconfig whose server nothing listens on: only --master reaches the test server.
    let kubeconfig = std::fs::read_to_string(server.kubeconfig_path())
        .unwrap()
        .replace(&server.url(), "http://127.0.0.1:9");
    assert!(!kubeconfig.contains(&server.url()));
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), kubeconfig).unwrap();
    let master = format!("--master={}", server.url());
    let _kcm = Kcm::start(
        file.path(),
        &["--controllers=ttl", "--leader-elect=false", &master],
    );
    ttl_converges(&server, "node-1").await;
}

/// `--controller-start-interval`: kcm waits between starting two controllers (upstream
/// jitters the wait by up to 100%), as the start lines' timestamps show.
#[tokio::test]
async fn controllers_start_an_interval_apart() {
    let server = TestServer::start().await;
    let kcm = Kcm::start(
        server.kubeconfig_path(),
        &[
            "--controllers=ttl,disruption",
            "--leader-elect=false",
            "--controller-start-interval=400ms",
        ],
    );
    let starts = || -> Vec<jiff::Timestamp> {
        kcm.log()
            .lines()
            .filter(|line| line.contains("starting controller"))
            .filter_map(|line| line.split_whitespace().next()?.parse().ok())
            .collect()
    };
    eventually("both controllers start", DEADLINE, || async {
        starts().len() == 2
    })
    .await;
    let starts = starts();
    let gap = starts[1].duration_since(starts[0]);
    assert!(
        gap >= jiff::SignedDuration::from_millis(400),
        "{gap:?}\n{}",
        kcm.log()
    );
}

/// `--logging-format=json` and `--vmodule`: the ttl controller's file logs at debug while the
/// rest of kcm stays at `-v=0` (info).
#[tokio::test]
async fn vmodule_raises_one_files_verbosity_in_json_lines() {
    let server = TestServer::start().await;
    let kcm = Kcm::start(
        server.kubeconfig_path(),
        &[
            "--controllers=ttl",
            "--leader-elect=false",
            "--logging-format=json",
            "--vmodule=controllers/ttl/*=2",
        ],
    );
    ttl_converges(&server, "node-1").await;
    let changed = || {
        kcm.log()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .any(|line| line["fields"]["message"] == "Changed ttl annotation")
    };
    eventually("the ttl controller's debug line", DEADLINE, || async {
        changed()
    })
    .await;
    let lines: Vec<serde_json::Value> = kcm
        .log()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let debug_targets: Vec<&str> = lines
        .iter()
        .filter(|line| line["level"] == "DEBUG")
        .filter_map(|line| line["target"].as_str())
        .collect();
    assert!(!debug_targets.is_empty());
    assert!(
        debug_targets
            .iter()
            .all(|target| target.starts_with("kcm::controllers::ttl")),
        "{debug_targets:?}"
    );
}

#[test]
fn version_takes_upstreams_values() {
    let version = format!("kcm v{}\n", env!("CARGO_PKG_VERSION"));
    for args in [
        &["--version"][..],
        &["--version=true"],
        &["--version=raw", "--kube-api-qps=0"],
    ] {
        let (code, stdout, _) = kcm(args);
        assert_eq!(code, 0, "{args:?}");
        assert!(stdout.starts_with(version.trim_end()), "{args:?}: {stdout}");
    }
    let (code, _, stderr) = kcm(&["--version=maybe"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("strconv.ParseBool: parsing \"maybe\": invalid syntax"),
        "{stderr}"
    );
    // --version=false is no request: the other flags are checked as usual.
    let (code, _, stderr) = kcm(&["--version=false", "--kube-api-qps=0"]);
    assert_eq!(code, 1, "{stderr}");
}

/// Every gate `--help` of kube-controller-manager v1.36.2 lists (tests/data/upstream-flags.md)
/// is known with its stage and default: setting each to its default warns about nothing.
#[test]
fn every_listed_gate_is_known_with_its_stage_and_default() {
    use kcm::features::{FeatureGates, GATES, Stage};
    let listed: Vec<(&str, Stage, bool)> = include_str!("../data/upstream-flags.md")
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let stage = match *cells.get(2)? {
                "ALPHA" => Stage::Alpha,
                "BETA" => Stage::Beta,
                _ => return None,
            };
            Some((cells[1], stage, cells[3] == "true"))
        })
        .collect();
    assert_eq!(listed.len(), 153);
    for (name, stage, default) in &listed {
        let gate = GATES
            .iter()
            .find(|gate| gate.name == *name)
            .unwrap_or_else(|| panic!("{name} unknown"));
        assert_eq!(
            (gate.stage, gate.default, gate.locked),
            (*stage, *default, false),
            "{name}"
        );
    }
    let all: Vec<String> = listed
        .iter()
        .map(|(name, _, default)| format!("kube:{name}={default}"))
        .collect();
    let parsed = FeatureGates::parse(&[all.join(",")]).unwrap();
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    assert_eq!(parsed.gates, FeatureGates::default());
}

#[test]
fn a_missing_kubeconfig_is_one_plain_error_line_naming_it_once() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("missing");
    let path = path.to_str().expect("a UTF-8 temp path");
    let (code, stdout, stderr) = kcm(&["--kubeconfig", path]);
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!("error: reading kubeconfig {path}: No such file or directory (os error 2)\n")
    );
}
