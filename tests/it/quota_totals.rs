//! Property: the incremental quota usage totals (`resourcequota::totals`) always equal a full
//! recompute, as exact quantity strings, over random sequences of pod creates, updates,
//! deletes, terminations (deletionTimestamp + grace, which stop counting as the clock passes
//! them), scope changes, relists and clock steps, with quotas of several scope-sets asking at
//! random moments (a new scope-set is computed in full once, then kept up to date).
//!
//! The reference is upstream's `CalculateUsageStats` (`usage::sum_usage` over every stored pod,
//! with the pod evaluator's `pod_usage` and `pod_matches_scope`). Upstream's sum takes the
//! format of the first non-zero value it adds, in lister order, which is random; the totals
//! fix that order (BinarySI values first, then DecimalSI, then DecimalExponent, then pods being
//! deleted by name), so the reference adds the pods in that order, per resource name.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ScopeSelector, ScopedResourceSelectorRequirement};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kcm::controllers::resourcequota::evaluator::pods::{Pods, pod_matches_scope, pod_usage};
use kcm::controllers::resourcequota::evaluator::{EvaluatorInputs, QuotaGates};
use kcm::controllers::resourcequota::scope::{QuotaScope, parse_scope};
use kcm::controllers::resourcequota::totals::Totals;
use kcm::controllers::resourcequota::usage::sum_usage;
use kcm::k8s::quantity::Format;
use kcm::k8s::view::Pod;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;
use serde_json::json;

const NS: &str = "ns";
const NAMES: [&str; 5] = ["p0", "p1", "p2", "p3", "p4"];
/// What the quotas ask for: every pod resource the generated pods have.
const RESOURCES: [&str; 10] = [
    "pods",
    "count/pods",
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
    "requests.hugepages-2Mi",
    "hugepages-2Mi",
];

/// Mixed formats on purpose, zeros, and one negative value (skipped and reported).
const CPU: [&str; 6] = ["100m", "1", "0", "2e0", "1500m", "1k"];
const MEMORY: [&str; 8] = ["128Mi", "1Gi", "100M", "1024", "0", "1e6", "512Ki", "-1Mi"];

#[derive(Clone, Debug)]
struct PodShape {
    /// Per container: (cpu request, memory request, memory limit); none is BestEffort.
    containers: Vec<(
        Option<&'static str>,
        Option<&'static str>,
        Option<&'static str>,
    )>,
    hugepages: Option<&'static str>,
    phase: &'static str,
    active_deadline: bool,
    priority_class: Option<&'static str>,
}

fn shape() -> impl Strategy<Value = PodShape> {
    let container = (
        proptest::option::of(select(&CPU[..])),
        proptest::option::of(select(&MEMORY[..])),
        proptest::option::of(select(&MEMORY[..])),
    );
    (
        proptest::collection::vec(container, 0..3),
        proptest::option::of(select(&["2Mi", "4Mi", "0"][..])),
        select(&["Running", "Pending", "Succeeded", "Failed"][..]),
        any::<bool>(),
        proptest::option::of(select(&["high", "low"][..])),
    )
        .prop_map(
            |(containers, hugepages, phase, active_deadline, priority_class)| PodShape {
                containers,
                hugepages,
                phase,
                active_deadline,
                priority_class,
            },
        )
}

#[derive(Clone, Debug)]
enum Op {
    /// Create the pod, or update it (same UID) when it exists.
    Upsert(usize, PodShape),
    Delete(usize),
    /// A graceful delete: deletionTimestamp now, with this grace period.
    Terminate(usize, i64),
    /// A relist: each pod survives (in a new copy), changes, or is gone.
    Relist(Vec<(u8, PodShape)>),
    /// The clock moves on by this many seconds.
    Advance(i64),
    /// A quota with this scope-set syncs (and is checked).
    Query(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..NAMES.len(), shape()).prop_map(|(i, s)| Op::Upsert(i, s)),
        1 => (0..NAMES.len()).prop_map(Op::Delete),
        2 => (0..NAMES.len(), 0i64..60).prop_map(|(i, g)| Op::Terminate(i, g)),
        1 => proptest::collection::vec((0u8..3, shape()), NAMES.len()).prop_map(Op::Relist),
        1 => (0i64..90).prop_map(Op::Advance),
        2 => (0..SCOPES).prop_map(Op::Query),
    ]
}

const SCOPES: usize = 8;

fn scope(i: usize) -> QuotaScope {
    let exists = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let selector = |scope: &str, op: &str, values: &[&str]| ScopeSelector {
        match_expressions: Some(vec![ScopedResourceSelectorRequirement {
            scope_name: scope.to_string(),
            operator: op.to_string(),
            values: (!values.is_empty()).then(|| exists(values)),
        }]),
    };
    match i {
        0 => parse_scope(&[], None),
        1 => parse_scope(&exists(&["Terminating"]), None),
        2 => parse_scope(&exists(&["NotTerminating"]), None),
        3 => parse_scope(&exists(&["BestEffort"]), None),
        4 => parse_scope(&exists(&["NotBestEffort"]), None),
        5 => parse_scope(&[], Some(&selector("PriorityClass", "In", &["high"]))),
        6 => parse_scope(
            &exists(&["NotTerminating"]),
            Some(&selector("PriorityClass", "Exists", &[])),
        ),
        // The same scope-set as 6, written the other way round: it shares 6's sums.
        _ => parse_scope(
            &exists(&["PriorityClass"]),
            Some(&selector("NotTerminating", "Exists", &[])),
        ),
    }
}

/// The model: the store's pods and the clock.
struct World {
    store: BTreeMap<String, Arc<Pod>>,
    now: Timestamp,
    next_uid: u64,
    next_rv: u64,
}

impl World {
    fn time(&self) -> Time {
        Time(self.now)
    }

    /// What the evaluators read at this moment.
    fn at(&self) -> EvaluatorInputs<'static> {
        EvaluatorInputs::at(self.time())
    }

    fn build(&mut self, name: &str, shape: &PodShape, uid: Option<String>) -> Arc<Pod> {
        self.next_rv += 1;
        let uid = uid.unwrap_or_else(|| {
            self.next_uid += 1;
            format!("uid-{}", self.next_uid)
        });
        let containers: Vec<_> = shape
            .containers
            .iter()
            .enumerate()
            .map(|(i, (cpu, mem, mem_limit))| {
                let mut requests = serde_json::Map::new();
                let mut limits = serde_json::Map::new();
                if let Some(c) = cpu {
                    requests.insert("cpu".into(), json!(c));
                }
                if let Some(m) = mem {
                    requests.insert("memory".into(), json!(m));
                }
                if let Some(m) = mem_limit {
                    limits.insert("memory".into(), json!(m));
                }
                if let (0, Some(h)) = (i, shape.hugepages) {
                    requests.insert("hugepages-2Mi".into(), json!(h));
                    limits.insert("hugepages-2Mi".into(), json!(h));
                }
                json!({ "name": format!("c{i}"), "image": "i",
                    "resources": { "requests": requests, "limits": limits } })
            })
            .collect();
        let mut spec = json!({ "containers": containers });
        if shape.active_deadline {
            spec["activeDeadlineSeconds"] = json!(30);
        }
        if let Some(class) = shape.priority_class {
            spec["priorityClassName"] = json!(class);
        }
        let pod = json!({ "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": name, "namespace": NS, "uid": uid,
                "resourceVersion": self.next_rv.to_string() },
            "spec": spec, "status": { "phase": shape.phase } });
        Arc::new(serde_json::from_value(pod).expect("a valid pod"))
    }
}

fn fail(msg: String) -> TestCaseError {
    TestCaseError::fail(msg)
}

/// Upstream's fold over the store for one resource name, in the totals' order.
fn reference(world: &World, scope: &QuotaScope, resource: &str) -> (String, Vec<String>) {
    let now = world.time();
    let slot = |pod: &Pod| match pod_usage(pod, &now, QuotaGates::default())
        .list
        .get(resource)
        .map(|q| q.format())
    {
        Some(Format::BinarySI) => 0,
        Some(Format::DecimalSI) => 1,
        Some(Format::DecimalExponent) => 2,
        None => 3,
    };
    let mut order: Vec<(bool, usize, &String, &Pod)> = world
        .store
        .iter()
        .map(|(name, pod)| {
            let volatile = pod.metadata.deletion_timestamp.is_some();
            (volatile, if volatile { 0 } else { slot(pod) }, name, &**pod)
        })
        .collect();
    order.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
    let names = [resource.to_string()];
    let usage = sum_usage(
        order.iter().map(|(.., pod)| *pod),
        &names,
        |p| pod_usage(p, &now, QuotaGates::default()),
        |p| pod_matches_scope(p, scope, QuotaGates::default()),
    );
    let mut problems = usage.problems;
    problems.sort();
    (usage.list[resource].to_string(), problems)
}

fn check(totals: &Totals<Pod>, world: &World, scope_index: usize) -> Result<(), TestCaseError> {
    let scope = scope(scope_index);
    let names: Vec<String> = RESOURCES.iter().map(|s| s.to_string()).collect();
    let got = totals.usage(&Pods::default(), NS, &scope, &names, &world.at(), || {
        world.store.values().cloned().collect()
    });
    let mut got_problems = got.problems.clone();
    got_problems.sort();
    for resource in RESOURCES {
        let (want, want_problems) = reference(world, &scope, resource);
        let have = got.list.get(resource).map(ToString::to_string);
        if have.as_deref() != Some(want.as_str()) {
            return Err(fail(format!(
                "scope {scope_index}, {resource}: totals {have:?}, full recompute {want:?}"
            )));
        }
        if got_problems != want_problems {
            return Err(fail(format!(
                "scope {scope_index}: problems {got_problems:?}, full recompute {want_problems:?}"
            )));
        }
    }
    Ok(())
}

/// Tells the totals what the store holds for `name` now (what the informer's change feed does).
fn refresh(totals: &Totals<Pod>, world: &World, name: &str) {
    let current = world.store.get(name).cloned();
    totals.refresh(&Pods::default(), NS, name, current, &world.at());
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let totals: Totals<Pod> = Totals::default();
    let mut world = World {
        store: BTreeMap::new(),
        now: Timestamp::from_second(1_700_000_000).expect("valid timestamp"),
        next_uid: 0,
        next_rv: 0,
    };
    let mut queried = Vec::new();
    for op in ops {
        match op {
            Op::Upsert(i, shape) => {
                let name = NAMES[i];
                let uid = world.store.get(name).and_then(|p| p.uid());
                let pod = world.build(name, &shape, uid);
                world.store.insert(name.to_string(), pod);
                refresh(&totals, &world, name);
            }
            Op::Delete(i) => {
                world.store.remove(NAMES[i]);
                refresh(&totals, &world, NAMES[i]);
            }
            Op::Terminate(i, grace) => {
                let Some(pod) = world.store.get(NAMES[i]) else {
                    continue;
                };
                let mut pod = (**pod).clone();
                world.next_rv += 1;
                pod.metadata.resource_version = Some(world.next_rv.to_string().into());
                pod.metadata.deletion_timestamp = Some(world.time());
                pod.metadata.deletion_grace_period_seconds = Some(grace);
                world.store.insert(NAMES[i].to_string(), Arc::new(pod));
                refresh(&totals, &world, NAMES[i]);
            }
            Op::Relist(fates) => {
                // The store is replaced wholesale (every object a new Arc); only objects
                // whose version changed or that vanished are announced.
                let mut announce = Vec::new();
                for (name, (fate, shape)) in NAMES.iter().zip(fates) {
                    let Some(old) = world.store.get(*name).cloned() else {
                        continue;
                    };
                    match fate {
                        0 => {
                            world
                                .store
                                .insert(name.to_string(), Arc::new((*old).clone()));
                        }
                        1 => {
                            let pod = world.build(name, &shape, old.uid());
                            world.store.insert(name.to_string(), pod);
                            announce.push(*name);
                        }
                        _ => {
                            world.store.remove(*name);
                            announce.push(*name);
                        }
                    }
                }
                for name in announce {
                    refresh(&totals, &world, name);
                }
            }
            Op::Advance(secs) => {
                world.now = world
                    .now
                    .checked_add(SignedDuration::from_secs(secs))
                    .expect("in range");
            }
            Op::Query(s) => {
                check(&totals, &world, s)?;
                queried.push(s);
            }
        }
    }
    for s in 0..SCOPES {
        check(&totals, &world, s)?;
    }
    // The periodic full recompute finds nothing to correct.
    let in_use = HashMap::from([(NS.to_string(), (0..SCOPES).map(scope).collect())]);
    let tracked = totals.retain(&Pods::default(), &in_use, &world.at());
    prop_assert_eq!(&tracked, &[NS.to_string()]);
    let drift = totals.verify(
        &Pods::default(),
        NS,
        || world.store.values().cloned().collect(),
        &world.at(),
    );
    prop_assert_eq!(drift, 0, "drift after {:?}", queried);
    for s in 0..SCOPES {
        check(&totals, &world, s)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Totals equal the full recompute after any sequence of changes.
    #[test]
    fn pod_totals_equal_a_full_recompute(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops)?;
    }
}

/// Upstream's order dependence, pinned: `1Gi + 1024` is `1048577Ki` whichever pod the lister
/// gives first here, where upstream prints `1073742848` for the other order.
#[test]
fn mixed_formats_print_the_same_on_every_sync() {
    let mut world = World {
        store: BTreeMap::new(),
        now: Timestamp::from_second(1_700_000_000).expect("valid timestamp"),
        next_uid: 0,
        next_rv: 0,
    };
    let totals: Totals<Pod> = Totals::default();
    for (name, memory) in [("a", "1024"), ("b", "1Gi")] {
        let shape = PodShape {
            containers: vec![(None, Some(memory), None)],
            hugepages: None,
            phase: "Running",
            active_deadline: false,
            priority_class: None,
        };
        let pod = world.build(name, &shape, None);
        world.store.insert(name.to_string(), pod);
    }
    let names = vec!["requests.memory".to_string()];
    let got = totals.usage(&Pods::default(), NS, &scope(0), &names, &world.at(), || {
        world.store.values().cloned().collect()
    });
    assert_eq!(got.list["requests.memory"].to_string(), "1048577Ki");
}
