//! deploy/grafana/kcm.json, the Grafana dashboard: it imports as is (no `__inputs`, the data
//! source and the job are variables, panels laid out without overlap), every query selects
//! only metric families kcm exports, scoped to `job="$job"`, and every query parses, checked
//! by `promtool check rules` on a rule file made of them.

use crate::prom;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};

/// The dashboard's rows, in order: what an operator reads top to bottom.
const ROWS: [&str; 8] = [
    "Leadership",
    "Work queues",
    "Controllers",
    "API writes",
    "API client",
    "Stores and watches",
    "Skipped objects and shadow diffs",
    "Process",
];

fn dashboard() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/kcm.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()))
}

fn panels(dashboard: &Value) -> &Vec<Value> {
    dashboard["panels"].as_array().expect("panels")
}

/// Every query of the dashboard: (panel title, refId, expression).
fn queries(dashboard: &Value) -> Vec<(String, String, String)> {
    panels(dashboard)
        .iter()
        .filter(|p| p["type"] != "row")
        .flat_map(|p| {
            let title = p["title"].as_str().unwrap_or_default().to_string();
            p["targets"].as_array().into_iter().flatten().map(move |t| {
                (
                    title.clone(),
                    t["refId"].as_str().unwrap_or_default().to_string(),
                    t["expr"].as_str().unwrap_or_default().to_string(),
                )
            })
        })
        .collect()
}

/// A vector selector of a PromQL expression: the metric name and its `{…}` matchers.
#[derive(Debug)]
struct Selector {
    metric: String,
    matchers: String,
}

/// The byte index just past the bracket closing the one at `open`, skipping quoted strings.
fn past_closing(expr: &[u8], open: usize) -> usize {
    let opening = expr[open];
    let closing = match opening {
        b'(' => b')',
        b'[' => b']',
        _ => b'}',
    };
    let mut depth = 0;
    let mut i = open;
    while i < expr.len() {
        match expr[i] {
            b'"' | b'\'' | b'`' => i = past_string(expr, i) - 1,
            c if c == opening => depth += 1,
            c if c == closing => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    expr.len()
}

/// The byte index just past the string literal starting at `start`.
fn past_string(expr: &[u8], start: usize) -> usize {
    let quote = expr[start];
    let mut i = start + 1;
    while i < expr.len() && expr[i] != quote {
        i += if expr[i] == b'\\' { 2 } else { 1 };
    }
    i + 1
}

/// The vector selectors of a PromQL expression. Identifiers followed by `(` are functions
/// and aggregations; the label lists after `by`, `without`, `on`, `ignoring`, `group_left`
/// and `group_right` are skipped, so are operators' keywords, numbers, durations and strings.
/// promtool checks the syntax itself; this only needs to find what the query selects.
fn selectors(expr: &str) -> Vec<Selector> {
    const LABEL_LISTS: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    const KEYWORDS: [&str; 8] = [
        "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
    ];
    let bytes = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'"' || c == b'\'' || c == b'`' {
            i = past_string(bytes, i);
        } else if c == b'[' {
            i = past_closing(bytes, i);
        } else if c.is_ascii_digit() || c == b'.' {
            while i < bytes.len() && (ident(bytes[i]) || bytes[i] == b'.') {
                i += 1;
            }
        } else if c == b'{' {
            // A selector by matchers alone, e.g. `{__name__="x"}`: no name to check.
            let end = past_closing(bytes, i);
            found.push(Selector {
                metric: String::new(),
                matchers: expr[i + 1..end - 1].to_string(),
            });
            i = end;
        } else if ident(c) {
            let start = i;
            while i < bytes.len() && ident(bytes[i]) {
                i += 1;
            }
            let word = &expr[start..i];
            let mut next = i;
            while next < bytes.len() && bytes[next].is_ascii_whitespace() {
                next += 1;
            }
            // `sum by (…) (…)`: an aggregation whose grouping comes first.
            let grouping_next = ["by", "without"].iter().any(|g| {
                expr[next..].starts_with(g) && !bytes.get(next + g.len()).is_some_and(|&c| ident(c))
            });
            let before_paren = bytes.get(next) == Some(&b'(') || grouping_next;
            if LABEL_LISTS.contains(&word) && before_paren {
                i = past_closing(bytes, next);
            } else if before_paren || KEYWORDS.contains(&word.to_ascii_lowercase().as_str()) {
                continue;
            } else if bytes.get(next) == Some(&b'{') {
                let end = past_closing(bytes, next);
                found.push(Selector {
                    metric: word.to_string(),
                    matchers: expr[next + 1..end - 1].to_string(),
                });
                i = end;
            } else {
                found.push(Selector {
                    metric: word.to_string(),
                    matchers: String::new(),
                });
            }
        } else {
            i += 1;
        }
    }
    found
}

/// The metric family a series name belongs to: histograms export `_bucket`, `_sum` and
/// `_count` series under the family's name.
fn family<'a>(metric: &'a str, families: &[String]) -> Option<&'a str> {
    if families.iter().any(|f| f == metric) {
        return Some(metric);
    }
    ["_bucket", "_sum", "_count"]
        .iter()
        .filter_map(|suffix| metric.strip_suffix(suffix))
        .find(|base| families.iter().any(|f| f == base))
}

#[test]
fn selectors_are_found_in_promql() {
    let found = selectors(
        r#"histogram_quantile(0.99, sum by (name, le) (rate(a_bucket{job="$job", x=~"}{"}[5m] offset 1m))) / ignoring (le) group_left (name) b + on() c{job="k"} > bool 0 and sum(d) without (e)"#,
    );
    let names: Vec<(&str, &str)> = found
        .iter()
        .map(|s| (s.metric.as_str(), s.matchers.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("a_bucket", r#"job="$job", x=~"}{""#),
            ("b", ""),
            ("c", r#"job="k""#),
            ("d", ""),
        ]
    );
}

#[test]
fn the_dashboard_imports_as_is_with_datasource_and_job_variables() {
    let dashboard = dashboard();
    assert!(dashboard.get("__inputs").is_none(), "no import-time inputs");
    assert!(
        dashboard["id"].is_null(),
        "no instance id: Grafana assigns one"
    );
    assert_eq!(dashboard["uid"], "kcm");
    assert_eq!(dashboard["title"], "kcm");
    assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 39);

    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("variable {name}"))
    };
    let datasource = variable("datasource");
    assert_eq!(datasource["type"], "datasource");
    assert_eq!(datasource["query"], "prometheus");
    let job = variable("job");
    assert_eq!(job["query"], "kcm");
    assert_eq!(job["current"]["value"], "kcm");

    let prometheus = json!({ "type": "prometheus", "uid": "${datasource}" });
    let mut ids = BTreeSet::new();
    let mut rows = Vec::new();
    let mut panels_in_row = 0;
    let mut boxes: Vec<(&str, [u64; 4])> = Vec::new();
    for panel in panels(&dashboard) {
        let title = panel["title"].as_str().expect("every panel has a title");
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "{title}: id taken"
        );
        let pos = &panel["gridPos"];
        let [x, y, w, h] = ["x", "y", "w", "h"].map(|k| pos[k].as_u64().unwrap());
        assert!(w > 0 && h > 0 && x + w <= 24, "{title}: {pos}");
        for (other, [ox, oy, ow, oh]) in &boxes {
            let apart = x + w <= *ox || *ox + ow <= x || y + h <= *oy || *oy + oh <= y;
            assert!(apart, "{title} overlaps {other}");
        }
        boxes.push((title, [x, y, w, h]));
        if panel["type"] == "row" {
            assert_eq!((x, w), (0, 24), "{title}: rows span the width");
            if let Some(previous) = rows.last() {
                assert!(panels_in_row > 0, "row {previous} is empty");
            }
            rows.push(title);
            panels_in_row = 0;
            continue;
        }
        assert!(!rows.is_empty(), "{title} comes before the first row");
        panels_in_row += 1;
        assert_eq!(panel["datasource"], prometheus, "{title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        let mut ref_ids = BTreeSet::new();
        for target in targets {
            assert_eq!(target["datasource"], prometheus, "{title}");
            assert!(ref_ids.insert(target["refId"].as_str().unwrap()), "{title}");
            assert!(!target["expr"].as_str().unwrap().is_empty(), "{title}");
        }
    }
    assert!(panels_in_row > 0, "the last row is empty");
    assert_eq!(rows, ROWS);
}

#[test]
fn every_query_selects_only_families_kcm_exports_scoped_to_the_job() {
    let exported = kcm::runtime::metrics::Metrics::new().unwrap().families();
    let queries = queries(&dashboard());
    assert!(queries.len() >= 20, "{} queries", queries.len());
    let mut shown = BTreeSet::new();
    for (title, ref_id, expr) in queries {
        let selectors = selectors(&expr);
        assert!(
            !selectors.is_empty(),
            "{title} {ref_id}: selects nothing: {expr}"
        );
        for Selector { metric, matchers } in selectors {
            let family = family(&metric, &exported).unwrap_or_else(|| {
                panic!("{title} {ref_id}: {metric:?} is not a metric family kcm exports")
            });
            assert!(
                matchers.split(',').any(|m| m.trim() == r#"job="$job""#),
                "{title} {ref_id}: {metric} is not scoped to job=\"$job\": {expr}"
            );
            shown.insert(family.to_string());
        }
    }
    for family in [
        "leader_election_master_status",
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_retries_total",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_unfinished_work_seconds",
        "kcm_reconcile_total",
        "kcm_reconcile_duration_seconds",
        "kcm_api_writes_total",
        "kcm_store_objects",
        "kcm_watch_errors_total",
        "kcm_skipped_objects_total",
        "kcm_shadow_diffs_total",
        "rest_client_requests_total",
        "rest_client_request_duration_seconds",
        "rest_client_rate_limiter_duration_seconds",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
    ] {
        assert!(shown.contains(family), "no panel shows {family}");
    }
}

/// Grafana's variables replaced by values Prometheus accepts, as Grafana does before sending.
fn as_sent(expr: &str) -> String {
    let sent = expr
        .replace("$__rate_interval", "1m")
        .replace("$__range", "6h")
        .replace("$job", "kcm");
    assert!(
        !sent.contains('$'),
        "a variable the test does not know: {expr}"
    );
    sent
}

/// A recording rule's name for a panel's query, so promtool's messages say which it is.
fn record_name(title: &str, ref_id: &str) -> String {
    let words: Vec<String> = title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    format!("dashboard:{}:{ref_id}", words.join("_"))
}

#[test]
#[ignore = "needs promtool and prometheus (apt-get install prometheus); run with --ignored, as .ci/run does"]
fn every_query_parses_in_promtool() {
    let promtool = prom::binary("promtool");
    let rules: Vec<Value> = queries(&dashboard())
        .into_iter()
        .map(|(title, ref_id, expr)| {
            json!({ "record": record_name(&title, &ref_id), "expr": as_sent(&expr) })
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let groups = json!([{ "name": "dashboard", "rules": rules }]);
    prom::write_rule_file(dir.path(), "dashboard.yaml", &groups);
    let printed = prom::promtool(
        &promtool,
        dir.path(),
        &["check", "rules", "--lint-fatal", "dashboard.yaml"],
    );
    assert!(
        printed.contains(&format!("SUCCESS: {} rules found", rules.len())),
        "{printed}"
    );
}
