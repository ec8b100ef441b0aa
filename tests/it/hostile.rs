//! The hostile-input corpus: every `tests/data/hostile/*.yaml` is applied to a fresh
//! kube-testserver, kcm runs in-process with every controller, and the case's expectation is
//! checked. The standard: bad input gets a clear error or a logged, metered skip
//! (`kcm_skipped_objects_total`), never a panic, a stuck controller or a wrong status; a PDB
//! that cannot be computed safely fails safe.
//!
//! # A case file
//!
//! A comment block `# expect: …` says in words what must happen. The YAML documents are the
//! objects, seeded as written (status included) before kcm starts. The last document is the
//! machine-readable expectation, which is not applied:
//!
//! ```yaml
//! kind: Expectation
//! labels:                  # optional: bulk labels l00000..l09999 added before applying
//!   Pod/default/wide: 10000
//! checks:                  # each polled until it holds (20 s), in order
//!   - ResourceQuota/default/q /status/used/cpu == "1500m"
//! ```
//!
//! A string `$uid(Kind/namespace/name)` in an object is replaced by the UID the server gave
//! that earlier object (owner references need real UIDs); in a check line, `$uid(…)` is
//! replaced wherever it appears.
//!
//! Checks (`<ref>` is `Kind/namespace/name`, or `Kind/name` for cluster-scoped objects;
//! `<pointer>` is an RFC 6901 JSON pointer, `~1` standing for `/`; `<op>` is `==`, `>=`, `<=`):
//!
//! - `<ref> <pointer> == <json>`: the field equals the JSON value (strings compare exactly);
//! - `<ref> <pointer> contains <json string>`: the string field contains the text;
//! - `<ref> <pointer> absent`: the object exists and the field does not;
//! - `<ref> exists` / `<ref> gone`;
//! - `skipped <controller> <reason> <op> <n>`: `kcm_skipped_objects_total{controller,reason}`;
//! - `metric <sample> <op> <n>`: any sample of kcm's `/metrics` (missing counts as 0);
//! - `event <namespace>/<regarding name> <type> <reason> [contains <json string>]`: an
//!   core/v1 Event about that object;
//! - `requests <verb> <resource>[/<subresource>] <op> <n>`: requests kcm made (outside the
//!   canary below), e.g. `requests delete resourceclaims == 0`.
//!
//! After the checks, every case proves kcm still alive and reconciling with every controller:
//! well-formed canary objects (a quota, a node, a PDB, a pod with a claim template, a dead
//! StorageVersion) must all be handled. Then every check is evaluated once more (the expected
//! state was not transient, and nothing forbidden happened meanwhile), `/healthz` must answer,
//! no panic may have happened on the case's thread, no shared informer may have failed to
//! list or watch, and `stop()` must be clean with no request outside kcm's RBAC.
//!
//! The server's garbage collector is off: forged owner references stay in place, so what
//! happens to their objects is kcm's doing alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Event;
use kcm_testsupport::{DEADLINE, InProcess, http_get};
use kube::api::{Api, ListParams};
use kube_testserver::{Options, TestServer};
use serde::Deserialize;
use serde_json::{Value, json};

const CANARY: &str = "kcm-canary";
const ARGS: [&str; 2] = [
    "--controllers=*",
    "--feature-gates=StorageVersionAPI=true,APIServerIdentity=true",
];

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hostile")
}

// ------------------------------------------------------------------------------------------
// Panics anywhere in kcm, by the thread they happened on (each test runs its own
// current-thread runtime on a thread named after the test).
// ------------------------------------------------------------------------------------------

static PANICS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

fn record_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current().name().unwrap_or("").to_string();
            PANICS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((thread, info.to_string()));
            default(info);
        }));
    });
}

fn panics_on(thread: &str) -> Vec<String> {
    PANICS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|(t, _)| t == thread)
        .map(|(_, m)| m.clone())
        .collect()
}

// ------------------------------------------------------------------------------------------
// Case files
// ------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expectation {
    #[serde(rename = "kind")]
    _kind: String,
    #[serde(default)]
    labels: BTreeMap<String, usize>,
    checks: Vec<String>,
}

struct Case {
    name: String,
    objects: Vec<Value>,
    /// The check lines, as written (they parse).
    checks: Vec<String>,
}

fn load(name: &str) -> Case {
    let path = corpus_dir().join(format!("{name}.yaml"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{name}: cannot read {}: {e}", path.display()));
    assert!(
        text.starts_with("# expect:"),
        "{name}: the file must begin with a `# expect:` comment block"
    );
    let mut objects = Vec::new();
    let mut expectation = None;
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let value = Value::deserialize(doc).unwrap_or_else(|e| panic!("{name}: bad YAML: {e}"));
        if value.is_null() {
            continue;
        }
        if value["kind"] == "Expectation" {
            assert!(expectation.is_none(), "{name}: two Expectation documents");
            expectation = Some(
                serde_json::from_value::<Expectation>(value)
                    .unwrap_or_else(|e| panic!("{name}: bad Expectation: {e}")),
            );
        } else {
            assert!(
                expectation.is_none(),
                "{name}: the Expectation must be the last document"
            );
            objects.push(value);
        }
    }
    let expectation = expectation.unwrap_or_else(|| panic!("{name}: no Expectation document"));
    assert!(
        !expectation.checks.is_empty(),
        "{name}: the Expectation has no checks"
    );
    for (target, count) in &expectation.labels {
        let object = objects
            .iter_mut()
            .find(|o| object_ref(o) == *target)
            .unwrap_or_else(|| panic!("{name}: labels: no object {target}"));
        let labels = object["metadata"]
            .as_object_mut()
            .expect("metadata")
            .entry("labels")
            .or_insert_with(|| json!({}));
        for i in 0..*count {
            labels[format!("l{i:05}")] = json!(format!("v{i}"));
        }
    }
    for line in &expectation.checks {
        if let Err(e) = Check::parse(line) {
            panic!("{name}: check {line:?}: {e}");
        }
    }
    Case {
        name: name.to_string(),
        objects,
        checks: expectation.checks,
    }
}

/// Replaces every string `$uid(Kind/namespace/name)` with the UID the server gave that
/// (earlier) object: owner references and reservations need real UIDs.
fn resolve_uids(case: &str, value: &mut Value, uids: &BTreeMap<String, String>) {
    match value {
        Value::String(s) => {
            if let Some(target) = s.strip_prefix("$uid(").and_then(|t| t.strip_suffix(')')) {
                let uid = uids.get(target).unwrap_or_else(|| {
                    panic!("{case}: $uid({target}): no such object before this one")
                });
                *s = uid.clone();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| resolve_uids(case, v, uids)),
        Value::Object(map) => map.values_mut().for_each(|v| resolve_uids(case, v, uids)),
        _ => {}
    }
}

/// `$uid(Kind/namespace/name)` anywhere in a check line, replaced as in objects.
fn substitute_uids(case: &str, line: &str, uids: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find("$uid(") {
        let end = rest[start..]
            .find(')')
            .unwrap_or_else(|| panic!("{case}: unclosed $uid( in {line:?}"))
            + start;
        let target = &rest[start + "$uid(".len()..end];
        let uid = uids
            .get(target)
            .unwrap_or_else(|| panic!("{case}: {line:?}: no object {target}"));
        out.push_str(&rest[..start]);
        out.push_str(uid);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `Kind/namespace/name` or `Kind/name`, as checks name objects.
fn object_ref(obj: &Value) -> String {
    let kind = obj["kind"].as_str().unwrap_or_default();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    match obj["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind}/{ns}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

// ------------------------------------------------------------------------------------------
// Checks
// ------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Op {
    Eq,
    Ge,
    Le,
}

impl Op {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "==" => Ok(Op::Eq),
            ">=" => Ok(Op::Ge),
            "<=" => Ok(Op::Le),
            other => Err(format!("unknown operator {other:?}")),
        }
    }

    fn holds(self, got: f64, want: f64) -> bool {
        match self {
            Op::Eq => got == want,
            Op::Ge => got >= want,
            Op::Le => got <= want,
        }
    }
}

#[derive(Debug)]
enum FieldTest {
    Equals(Value),
    Contains(String),
    Absent,
}

#[derive(Debug)]
enum Check {
    Field {
        target: String,
        pointer: String,
        test: FieldTest,
    },
    Exists(String),
    Gone(String),
    Metric {
        sample: String,
        op: Op,
        value: f64,
    },
    Event {
        namespace: String,
        regarding: String,
        type_: String,
        reason: String,
        note: Option<String>,
    },
    Requests {
        verb: String,
        resource: String,
        subresource: String,
        op: Op,
        value: f64,
    },
}

/// Splits off the first whitespace-separated word.
fn word(s: &str) -> Result<(&str, &str), String> {
    let s = s.trim_start();
    if s.is_empty() {
        return Err("the line ends too early".into());
    }
    Ok(match s.split_once(char::is_whitespace) {
        Some((w, rest)) => (w, rest.trim_start()),
        None => (s, ""),
    })
}

fn json_string(s: &str) -> Result<String, String> {
    serde_json::from_str(s.trim()).map_err(|e| format!("{s:?} is not a JSON string: {e}"))
}

fn number(s: &str) -> Result<f64, String> {
    s.trim()
        .parse()
        .map_err(|e| format!("{s:?} is not a number: {e}"))
}

impl Check {
    fn parse(line: &str) -> Result<Self, String> {
        let (first, rest) = word(line)?;
        match first {
            "skipped" | "metric" => {
                let (sample, rest) = if first == "skipped" {
                    let (controller, rest) = word(rest)?;
                    let (reason, rest) = word(rest)?;
                    (
                        format!(
                            "kcm_skipped_objects_total{{controller=\"{controller}\",reason=\"{reason}\"}}"
                        ),
                        rest,
                    )
                } else {
                    let (sample, rest) = word(rest)?;
                    (sample.to_string(), rest)
                };
                let (op, rest) = word(rest)?;
                Ok(Check::Metric {
                    sample,
                    op: Op::parse(op)?,
                    value: number(rest)?,
                })
            }
            "event" => {
                let (object, rest) = word(rest)?;
                let (namespace, regarding) = object
                    .split_once('/')
                    .ok_or("event: want <namespace>/<name>")?;
                let (type_, rest) = word(rest)?;
                let (reason, rest) = word(rest)?;
                let note = match rest {
                    "" => None,
                    _ => {
                        let (kw, text) = word(rest)?;
                        if kw != "contains" {
                            return Err(format!("event: unexpected {kw:?}"));
                        }
                        Some(json_string(text)?)
                    }
                };
                Ok(Check::Event {
                    namespace: namespace.into(),
                    regarding: regarding.into(),
                    type_: type_.into(),
                    reason: reason.into(),
                    note,
                })
            }
            "requests" => {
                let (verb, rest) = word(rest)?;
                let (resource, rest) = word(rest)?;
                let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
                let (op, rest) = word(rest)?;
                Ok(Check::Requests {
                    verb: verb.into(),
                    resource: resource.into(),
                    subresource: subresource.into(),
                    op: Op::parse(op)?,
                    value: number(rest)?,
                })
            }
            target => {
                if !target.contains('/') {
                    return Err(format!("unknown check {target:?}"));
                }
                let target = target.to_string();
                let (second, rest) = word(rest)?;
                match second {
                    "exists" if rest.is_empty() => return Ok(Check::Exists(target)),
                    "gone" if rest.is_empty() => return Ok(Check::Gone(target)),
                    _ => {}
                }
                if !second.starts_with('/') {
                    return Err(format!("{second:?} is not a JSON pointer"));
                }
                let (test, rest) = word(rest)?;
                let test = match test {
                    "==" => FieldTest::Equals(
                        serde_json::from_str(rest)
                            .map_err(|e| format!("{rest:?} is not JSON: {e}"))?,
                    ),
                    "contains" => FieldTest::Contains(json_string(rest)?),
                    "absent" if rest.is_empty() => FieldTest::Absent,
                    other => return Err(format!("unknown field test {other:?}")),
                };
                Ok(Check::Field {
                    target,
                    pointer: second.to_string(),
                    test,
                })
            }
        }
    }
}

/// What a running case checks against.
struct Env<'a> {
    server: &'a TestServer,
    kcm: &'a InProcess,
}

impl Env<'_> {
    /// The stored object `Kind/ns/name` or `Kind/name`, if it exists.
    fn object(&self, target: &str) -> Option<Value> {
        let parts: Vec<&str> = target.split('/').collect();
        let (kind, ns, name) = match parts.as_slice() {
            [kind, name] => (*kind, "", *name),
            [kind, ns, name] => (*kind, *ns, *name),
            _ => panic!("bad object reference {target:?}"),
        };
        let types: Vec<_> = self
            .server
            .store()
            .types()
            .into_iter()
            .filter(|t| t.kind == kind)
            .collect();
        assert_eq!(types.len(), 1, "kind {kind} must name one served type");
        self.server
            .store()
            .get(&types[0], ns, name)
            .ok()
            .map(|v| (*v).clone())
    }

    async fn metric(&self, sample: &str) -> f64 {
        self.kcm.metric(sample).await.unwrap_or(0.0)
    }

    /// Whether the check holds now, and what was seen (for the failure message).
    async fn evaluate(&self, check: &Check) -> (bool, String) {
        match check {
            Check::Field {
                target,
                pointer,
                test,
            } => {
                let Some(obj) = self.object(target) else {
                    return (false, "the object does not exist".into());
                };
                let got = obj.pointer(pointer);
                let ok = match (test, got) {
                    (FieldTest::Equals(want), Some(got)) => got == want,
                    (FieldTest::Contains(text), Some(Value::String(got))) => got.contains(text),
                    (FieldTest::Absent, got) => got.is_none(),
                    _ => false,
                };
                (ok, format!("{pointer} is {}", show(got)))
            }
            Check::Exists(target) => (self.object(target).is_some(), "gone".into()),
            Check::Gone(target) => (self.object(target).is_none(), "still there".into()),
            Check::Metric { sample, op, value } => {
                let got = self.metric(sample).await;
                (op.holds(got, *value), format!("{sample} = {got}"))
            }
            Check::Event {
                namespace,
                regarding,
                type_,
                reason,
                note,
            } => {
                let events: Api<Event> = Api::namespaced(self.server.client(), namespace);
                let all = events
                    .list(&ListParams::default())
                    .await
                    .map(|l| l.items)
                    .unwrap_or_default();
                let about: Vec<String> = all
                    .iter()
                    .filter(|e| e.involved_object.name.as_deref() == Some(regarding))
                    .map(|e| {
                        format!(
                            "{} {} {:?}",
                            e.type_.as_deref().unwrap_or(""),
                            e.reason.as_deref().unwrap_or(""),
                            e.message.as_deref().unwrap_or("")
                        )
                    })
                    .collect();
                let ok = all.iter().any(|e| {
                    e.involved_object.name.as_deref() == Some(regarding)
                        && e.type_.as_deref() == Some(type_)
                        && e.reason.as_deref() == Some(reason)
                        && note.as_ref().is_none_or(|n| {
                            e.message
                                .as_deref()
                                .is_some_and(|got| got.contains(n.as_str()))
                        })
                });
                (ok, format!("events about {regarding}: {about:?}"))
            }
            Check::Requests {
                verb,
                resource,
                subresource,
                op,
                value,
            } => {
                let seen: Vec<String> = self
                    .server
                    .requests()
                    .iter()
                    .filter(|r| {
                        r.user_agent.contains("kcm/")
                            && r.is(verb, resource, subresource)
                            && r.info.namespace != CANARY
                            && !r.info.name.starts_with(CANARY)
                    })
                    .map(|r| format!("{} {} -> {}", r.method, r.path, r.code))
                    .collect();
                (
                    op.holds(seen.len() as f64, *value),
                    format!("{} requests: {seen:?}", seen.len()),
                )
            }
        }
    }
}

fn show(v: Option<&Value>) -> String {
    let Some(v) = v else {
        return "absent".into();
    };
    let text = v.to_string();
    if text.len() > 400 {
        let head: String = text.chars().take(400).collect();
        format!("{head}… ({} bytes)", text.len())
    } else {
        text
    }
}

async fn wait_for(env: &Env<'_>, case: &str, what: &str, check: &Check) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (ok, seen) = env.evaluate(check).await;
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{case}: timed out after {DEADLINE:?} waiting for `{what}`; last saw: {seen}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ------------------------------------------------------------------------------------------
// The canary: well-formed objects every controller must still handle.
// ------------------------------------------------------------------------------------------

fn canary_objects() -> Vec<Value> {
    vec![
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": CANARY } }),
        json!({ "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": { "name": CANARY, "namespace": CANARY },
            "spec": { "hard": { "pods": "5", "requests.cpu": "1" } } }),
        json!({ "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": { "name": CANARY, "namespace": CANARY },
            "spec": { "spec": { "devices": { "requests": [{ "name": "gpu",
                "exactly": { "deviceClassName": "gpu.example.com" } }] } } } }),
        json!({ "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": CANARY, "namespace": CANARY, "labels": { "app": CANARY } },
            "spec": { "containers": [{ "name": "c", "image": "i",
                    "resources": { "requests": { "cpu": "250m" } } }],
                "resourceClaims": [{ "name": "gpu", "resourceClaimTemplateName": CANARY }] },
            "status": { "phase": "Running", "conditions": [{ "type": "Ready", "status": "True" }] } }),
        json!({ "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": { "name": CANARY, "namespace": CANARY },
            "spec": { "minAvailable": 1, "selector": { "matchLabels": { "app": CANARY } } } }),
        json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": CANARY } }),
        json!({ "apiVersion": "internal.apiserver.k8s.io/v1alpha1", "kind": "StorageVersion",
            "metadata": { "name": CANARY }, "spec": {},
            "status": { "storageVersions": [{ "apiServerID": "kcm-canary-gone",
                "encodingVersion": "v1", "decodableVersions": ["v1"] }] } }),
    ]
}

fn canary_checks() -> Vec<String> {
    let quota = format!("ResourceQuota/{CANARY}/{CANARY}");
    let pdb = format!("PodDisruptionBudget/{CANARY}/{CANARY}");
    vec![
        format!("{quota} /status/used/pods == \"1\""),
        format!("{quota} /status/used/requests.cpu == \"250m\""),
        format!("Node/{CANARY} /metadata/annotations/node.alpha.kubernetes.io~1ttl == \"0\""),
        format!("{pdb} /status/expectedPods == 1"),
        format!("{pdb} /status/currentHealthy == 1"),
        format!("{pdb} /status/conditions/0/reason == \"InsufficientPods\""),
        format!("Pod/{CANARY}/{CANARY} /status/resourceClaimStatuses/0/name == \"gpu\""),
        format!("StorageVersion/{CANARY} gone"),
    ]
}

// ------------------------------------------------------------------------------------------
// Running a case
// ------------------------------------------------------------------------------------------

async fn run_case(name: &str) {
    record_panics();
    let thread = std::thread::current().name().unwrap_or("").to_string();
    let started = Instant::now();
    let case = load(name);
    let server = TestServer::start_with(Options {
        garbage_collector: false,
        ..Options::default()
    })
    .await
    .expect("kube-testserver starts");
    let mut uids = BTreeMap::new();
    for obj in &case.objects {
        let mut obj = obj.clone();
        resolve_uids(name, &mut obj, &uids);
        let seeded = server
            .seed(obj.clone())
            .unwrap_or_else(|e| panic!("{name}: seeding {}: {e:?}", object_ref(&obj)));
        let uid = seeded["metadata"]["uid"].as_str().unwrap_or_default();
        uids.insert(object_ref(&obj), uid.to_string());
    }
    let kcm = InProcess::start(&server, &ARGS).await;
    let env = Env {
        server: &server,
        kcm: &kcm,
    };
    let checks: Vec<(String, Check)> = case
        .checks
        .iter()
        .map(|line| {
            let line = substitute_uids(name, line, &uids);
            let check = Check::parse(&line).expect("the check parsed before");
            (line, check)
        })
        .collect();
    for (line, check) in &checks {
        wait_for(&env, name, line, check).await;
    }

    // Still alive and reconciling, every controller.
    for obj in canary_objects() {
        server
            .seed(obj)
            .unwrap_or_else(|e| panic!("{name}: seeding the canary: {e:?}"));
    }
    for line in canary_checks() {
        let check = Check::parse(&line).expect("canary check parses");
        wait_for(&env, name, &format!("canary: {line}"), &check).await;
    }
    // The expected state holds still (it was not transient), nothing forbidden happened.
    for (line, check) in &checks {
        let (ok, seen) = env.evaluate(check).await;
        assert!(ok, "{name}: `{line}` no longer holds; now: {seen}");
    }
    let health = http_get(kcm.port, "/healthz").await;
    assert_eq!(health.map(|(code, _)| code), Some(200), "{name}: /healthz");
    let (_, metrics) = http_get(kcm.port, "/metrics")
        .await
        .expect("/metrics answers");
    let watch_errors: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("kcm_watch_errors_total"))
        .collect();
    assert!(
        watch_errors.is_empty(),
        "{name}: a shared informer failed to list or watch: {watch_errors:?}"
    );
    kcm.stop().await;
    let panics = panics_on(&thread);
    assert!(panics.is_empty(), "{name}: kcm panicked: {panics:#?}");
    eprintln!("{name}: passed in {:?}", started.elapsed());
}

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                run_case(stringify!($case)).await;
            }
        )*
        const CASES: &[&str] = &[$(stringify!($case)),*];
    };
}

cases! {
    claim_garbage_reservations,
    claim_unsupported_source,
    node_ttl_garbage,
    pdb_garbage_percentages,
    pdb_invalid_selector,
    quota_huge_requests,
    quota_malformed_hard,
    quota_scope_selector,
    quota_sum_overflow,
    storageversion_garbage,
    wide_objects,
    wrong_owner_references,
}

#[test]
fn every_corpus_file_is_a_case() {
    let files: BTreeSet<String> = std::fs::read_dir(corpus_dir())
        .expect("tests/data/hostile exists")
        .map(|e| e.expect("a directory entry").path())
        .map(|p| {
            assert_eq!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml"),
                "{} is not a .yaml case",
                p.display()
            );
            p.file_stem().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    let cases: BTreeSet<String> = CASES.iter().map(|c| c.to_string()).collect();
    assert_eq!(files, cases, "every file in tests/data/hostile is one test");
    assert_eq!(files.len(), CASES.len());
    for case in CASES {
        let loaded = load(case);
        assert!(!loaded.objects.is_empty(), "{case}: no objects");
        assert_eq!(loaded.name, *case);
    }
}
