//! kcm's monitoring checked by Prometheus's own tools: `promtool check rules` on the alerts of
//! deploy/prometheusrule.yaml, `promtool test rules` showing each alert fire on a synthetic
//! series that should fire it and stay silent on one that should not
//! (tests/data/prometheus/alerts-test.yaml), and the real `prometheus` binary scraping a kcm
//! that runs against kube-testserver, which proves the exposition format on its consumer.

use crate::prom;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kcm_testsupport::{FAST_LEASE, Kcm};
use kube::api::{Api, PostParams};
use kube_testserver::TestServer;
use serde::Deserialize;
use serde_json::{Value, json};

/// What the PrometheusRule's groups become, beside the unit tests that name it.
const RULE_FILE: &str = "kcm-rules.yaml";
const ALERT_TESTS: &str = "alerts-test.yaml";

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    Value::deserialize(serde_yaml_ng::Deserializer::from_str(&text))
        .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()))
}

fn source(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// `spec.groups` of deploy/prometheusrule.yaml: what Prometheus loads as rules.
fn rule_groups() -> Value {
    yaml(&source("deploy/prometheusrule.yaml"))["spec"]["groups"].clone()
}

fn alert_tests() -> Value {
    yaml(&source("tests/data/prometheus").join(ALERT_TESTS))
}

/// A directory holding the extracted rule file and a copy of the unit tests that load it.
fn rules_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    prom::write_rule_file(dir.path(), RULE_FILE, &rule_groups());
    std::fs::copy(
        source("tests/data/prometheus").join(ALERT_TESTS),
        dir.path().join(ALERT_TESTS),
    )
    .unwrap();
    dir
}

#[test]
#[ignore = "needs promtool and prometheus (apt-get install prometheus); run with --ignored, as .ci/run does"]
fn the_alert_rules_pass_promtool_check_rules() {
    let promtool = prom::binary("promtool");
    let dir = rules_dir();
    let printed = prom::promtool(
        &promtool,
        dir.path(),
        &["check", "rules", "--lint-fatal", RULE_FILE],
    );
    let alerts = rule_groups()
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["rules"].as_array().unwrap().len())
        .sum::<usize>();
    assert!(
        printed.contains(&format!("SUCCESS: {alerts} rules found")),
        "{printed}"
    );
}

#[test]
fn every_alert_has_a_unit_test_where_it_fires_and_one_where_it_stays_silent() {
    let mut cases = BTreeMap::<String, (usize, usize)>::new();
    for group in rule_groups().as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            cases.insert(rule["alert"].as_str().unwrap().to_string(), (0, 0));
        }
    }
    let tests = alert_tests();
    assert_eq!(tests["rule_files"], json!([RULE_FILE]));
    for test in tests["tests"].as_array().unwrap() {
        for case in test["alert_rule_test"].as_array().unwrap() {
            let alert = case["alertname"].as_str().unwrap();
            // An unknown name would make a silent case pass for nothing.
            let (firing, silent) = cases
                .get_mut(alert)
                .unwrap_or_else(|| panic!("{alert}: no such alert in deploy/prometheusrule.yaml"));
            match case["exp_alerts"].as_array().map(Vec::len) {
                Some(0) | None => *silent += 1,
                Some(_) => *firing += 1,
            }
        }
    }
    for (alert, (firing, silent)) in cases {
        assert!(firing > 0, "{alert}: no unit test where it fires");
        assert!(silent > 0, "{alert}: no unit test where it stays silent");
    }
}

#[test]
#[ignore = "needs promtool and prometheus (apt-get install prometheus); run with --ignored, as .ci/run does"]
fn promtool_test_rules_fires_each_alert_only_when_it_should() {
    let promtool = prom::binary("promtool");
    let dir = rules_dir();
    let printed = prom::promtool(&promtool, dir.path(), &["test", "rules", ALERT_TESTS]);
    assert!(printed.contains("SUCCESS"), "{printed}");
}

/// How long Prometheus may take to start, scrape kcm and answer with a sample.
const SCRAPE_DEADLINE: Duration = Duration::from_secs(60);

/// A `prometheus` process on loopback with its storage in a temporary directory, killed when
/// dropped.
struct Prometheus {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// Prometheus's scrape job for kcm's secure port, as deploy/servicemonitor.yaml scrapes: HTTPS
/// with a bearer token from a file, and the self-signed serving certificate not verified.
fn scrape_job(address: &str, token_file: &Path) -> Value {
    json!({
        "job_name": "kcm",
        "scheme": "https",
        "metrics_path": "/metrics",
        "authorization": { "type": "Bearer", "credentials_file": token_file },
        "tls_config": { "insecure_skip_verify": true },
        "static_configs": [{ "targets": [address] }],
    })
}

impl Prometheus {
    fn start(binary: &Path, job: Value) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = json!({
            "global": { "scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s" },
            "scrape_configs": [job],
        });
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, serde_yaml_ng::to_string(&config).unwrap()).unwrap();
        let log = dir.path().join("prometheus.log");
        let port = kcm_testsupport::free_port();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("prometheus starts");
        Self {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    /// The value of the one series `query` returns through the HTTP API; None when there is
    /// none (yet) or Prometheus does not answer.
    async fn sample(&self, query: &str) -> Option<f64> {
        let path = format!("/api/v1/query?query={}", percent_encoded(query));
        let response =
            kube_testserver::testing::http_get(([127, 0, 0, 1], self.port).into(), &path).await?;
        let answer: Value = serde_json::from_str(&response.body).ok()?;
        match answer["data"]["result"].as_array()?.as_slice() {
            [series] => series["value"][1].as_str()?.parse().ok(),
            _ => None,
        }
    }

    /// Polls `query` until its sample satisfies `expected`; fails with Prometheus's log at the
    /// deadline.
    async fn wait_for(&self, query: &str, expected: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + SCRAPE_DEADLINE;
        loop {
            let sample = self.sample(query).await;
            if let Some(value) = sample.filter(|v| expected(*v)) {
                return value;
            }
            if Instant::now() >= deadline {
                // The scrape's own error (TLS, 401, …) is only in the targets API.
                let targets = kube_testserver::testing::http_get(
                    ([127, 0, 0, 1], self.port).into(),
                    "/api/v1/targets",
                )
                .await
                .map(|r| r.body)
                .unwrap_or_default();
                panic!(
                    "{query}: last answer {sample:?} after {SCRAPE_DEADLINE:?}; targets: {targets}\nprometheus log:\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `text` as a URL query value: unreserved characters kept, every other byte `%XX`.
fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs promtool and prometheus (apt-get install prometheus); run with --ignored, as .ci/run does"]
async fn a_real_prometheus_scrapes_kcm_and_answers_for_its_metrics() {
    let binary = prom::binary("prometheus");
    let server = TestServer::start().await;
    let node: Node = serde_json::from_value(json!({ "metadata": { "name": "n1" } })).unwrap();
    Api::<Node>::all(server.client())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    // Prometheus's token is authenticated and authorized by the API server's reviews.
    server
        .reviews()
        .add_token("prometheus-token", "prometheus", &["monitoring"]);
    server.reviews().allow("monitoring", "get", "/metrics");
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    std::fs::write(&token_file, "prometheus-token").unwrap();
    let kubeconfig = server.kubeconfig_path().display().to_string();
    let secure_port = kcm_testsupport::free_port();
    let serving = [
        // The harness already binds to 127.0.0.1 and serves plain HTTP on its own port.
        format!("--secure-port={secure_port}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--authentication-skip-lookup".to_string(),
    ];
    let mut args = vec!["--controllers=ttl"];
    args.extend(FAST_LEASE);
    args.extend(serving.iter().map(String::as_str));
    let _kcm = Kcm::start(server.kubeconfig_path(), &args);
    let prometheus = Prometheus::start(
        &binary,
        scrape_job(&format!("127.0.0.1:{secure_port}"), &token_file),
    );

    prometheus
        .wait_for(r#"up{job="kcm"}"#, |up| up == 1.0)
        .await;
    prometheus
        .wait_for(
            r#"leader_election_master_status{job="kcm", name="kcm"}"#,
            |leading| leading == 1.0,
        )
        .await;
    prometheus
        .wait_for(
            r#"workqueue_adds_total{job="kcm", name="ttlcontroller"}"#,
            |adds| adds >= 1.0,
        )
        .await;
    prometheus
        .wait_for(
            r#"kcm_reconcile_total{job="kcm", controller="ttl-controller", result="success"}"#,
            |reconciles| reconciles >= 1.0,
        )
        .await;
    // The histogram arrives whole: its buckets are queryable as client-go's are.
    prometheus
        .wait_for(
            r#"sum(workqueue_work_duration_seconds_bucket{job="kcm", name="ttlcontroller", le="+Inf"})"#,
            |count| count >= 1.0,
        )
        .await;
}
