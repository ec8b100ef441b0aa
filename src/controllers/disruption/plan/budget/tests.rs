//! The status arithmetic against tables and upstream's `disruption_test.go` cases
//! (`pkg/controller/disruption`), collapsed to what the pure functions compute.

use super::*;
// Fixtures are full pods, as the API server holds them; the view functions get views.
use k8s_openapi::api::core::v1::Pod;

use crate::k8s::view;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const NOW: i64 = 1_700_000_000;

/// (spec, matching pods, scale) → (expected, desired) or error.
type ExpectedCase = (
    PodDisruptionBudgetSpec,
    i32,
    Option<i32>,
    Result<(i32, i32), String>,
);
/// (name, spec, ready pods, unready pods, scale, (expected, desired, allowed)).
type ControllerCase = (
    &'static str,
    PodDisruptionBudgetSpec,
    usize,
    usize,
    i32,
    (i32, i32, i32),
);

fn views(pods: &[Pod]) -> Vec<view::Pod> {
    pods.iter().map(view::Pod::from).collect()
}

fn ts(secs: i64) -> Time {
    Time(Timestamp::from_second(secs).unwrap())
}

fn now() -> Time {
    ts(NOW)
}

fn s(v: &str) -> IntOrString {
    IntOrString::String(v.to_owned())
}

fn i(v: i32) -> IntOrString {
    IntOrString::Int(v)
}

fn cond(type_: &str, status: &str) -> PodCondition {
    PodCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        ..Default::default()
    }
}

/// upstream newPod: Ready=True.
fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            ..Default::default()
        },
        status: Some(PodStatus {
            conditions: Some(vec![cond("Ready", "True")]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// upstream's "pod.Status.Conditions = []v1.PodCondition{}".
fn unready(name: &str) -> Pod {
    let mut p = pod(name);
    p.status = Some(PodStatus {
        conditions: Some(vec![]),
        ..Default::default()
    });
    p
}

fn deleting(name: &str) -> Pod {
    let mut p = pod(name);
    p.metadata.deletion_timestamp = Some(now());
    p
}

fn spec_min(v: IntOrString) -> PodDisruptionBudgetSpec {
    PodDisruptionBudgetSpec {
        min_available: Some(v),
        ..Default::default()
    }
}

fn spec_max(v: IntOrString) -> PodDisruptionBudgetSpec {
    PodDisruptionBudgetSpec {
        max_unavailable: Some(v),
        ..Default::default()
    }
}

fn pdb(spec: PodDisruptionBudgetSpec) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("foobar".to_owned()),
            namespace: Some("default".to_owned()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

fn pdb_cond(status: &str, reason: &str, message: &str, generation: i64, at: i64) -> Condition {
    Condition {
        type_: DISRUPTION_ALLOWED_CONDITION.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: go_int64(generation),
        last_transition_time: ts(at),
    }
}

/// One dc.sync over the pure functions; the status is "written" back so the
/// next sync sees it. `scale` stands for what the finders would return.
fn sync(pdb: &mut PodDisruptionBudget, pods: &[Pod], scale: i32) {
    let views = views(pods);
    let refs: Vec<&view::Pod> = views.iter().collect();
    let spec = pdb.spec.clone().unwrap_or_default();
    let scale = needs_controller_scale(&spec).then_some(scale);
    let pod_count = i32::try_from(pods.len()).unwrap();
    let (expected, desired) = match expected_and_desired(&spec, pod_count, scale) {
        Ok(v) => v,
        Err(e) => {
            if let Some(st) = fail_safe_status(pdb, &e.to_string(), &now()) {
                pdb.status = Some(st);
            }
            return;
        }
    };
    let d = disrupted_pods(&refs, pdb.status.as_ref(), &now());
    let healthy = count_healthy(&refs, &d.map, &now());
    if let Some(st) = new_status(pdb, healthy, desired, expected, &d.map, &now()) {
        pdb.status = Some(st);
    }
    // A second sync over the same inputs must be a no-op.
    let d2 = disrupted_pods(&refs, pdb.status.as_ref(), &now());
    assert_eq!(
        new_status(pdb, healthy, desired, expected, &d2.map, &now()),
        None
    );
}

/// upstream ps.VerifyPdbStatus(allowed, currentHealthy, desiredHealthy, expectedPods, disrupted).
#[track_caller]
fn verify(
    pdb: &PodDisruptionBudget,
    allowed: i32,
    healthy: i32,
    desired: i32,
    expected: i32,
    disrupted: &[(&str, Time)],
) {
    let st = pdb.status.as_ref().unwrap();
    let want: BTreeMap<String, Time> = disrupted
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    assert_eq!(
        (
            st.disruptions_allowed,
            st.current_healthy,
            st.desired_healthy,
            st.expected_pods
        ),
        (Some(allowed), Some(healthy), Some(desired), Some(expected))
    );
    assert_eq!(st.disrupted_pods.clone().unwrap_or_default(), want);
    assert_eq!(st.observed_generation, pdb.metadata.generation);
    let c = find_condition(st.conditions.as_deref(), DISRUPTION_ALLOWED_CONDITION).unwrap();
    let want_cond = if allowed > 0 {
        ("True", SUFFICIENT_PODS_REASON)
    } else {
        ("False", INSUFFICIENT_PODS_REASON)
    };
    assert_eq!(
        (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
        (want_cond.0, want_cond.1, "")
    );
}

#[test]
fn scaled_value_table() {
    let cases: &[(IntOrString, i32, bool, i32)] = &[
        (i(3), 100, true, 3),
        (i(-2), 5, true, -2),
        (s("30%"), 7, true, 3),
        (s("30%"), 7, false, 2),
        (s("30%"), 3, true, 1),
        (s("34%"), 3, true, 2),
        (s("28%"), 11, true, 4),
        (s("28%"), 22, true, 7),
        (s("20%"), 10, true, 2),
        (s("1%"), 1, true, 1),
        (s("1%"), 1, false, 0),
        (s("0%"), 10, true, 0),
        (s("100%"), 5, true, 5),
        (s("50%"), 0, true, 0),
        (s("+50%"), 4, true, 2),
        (s("-50%"), 5, true, -2),
        (s("-50%"), 5, false, -3),
        (s("007%"), 100, true, 7),
        // int(±Inf-ish) is MinInt64 on amd64; int32() of that is 0.
        (s("9223372036854775807%"), 2_000_000_000, true, 0),
    ];
    for (v, total, up, want) in cases {
        assert_eq!(
            scaled_value(v, *total, *up),
            Ok(*want),
            "{v:?} of {total} up={up}"
        );
    }
}

#[test]
fn scaled_value_errors() {
    let not_pct = "invalid value for IntOrString: invalid type: string is not a percentage";
    let cases: &[(&str, &str)] = &[
        ("50", not_pct),
        ("", not_pct),
        (
            "50%%",
            r#"invalid value for IntOrString: invalid value "50%%": strconv.Atoi: parsing "50%": invalid syntax"#,
        ),
        (
            "abc%",
            r#"invalid value for IntOrString: invalid value "abc%": strconv.Atoi: parsing "abc": invalid syntax"#,
        ),
        (
            "%",
            r#"invalid value for IntOrString: invalid value "%": strconv.Atoi: parsing "": invalid syntax"#,
        ),
        (
            "5.5%",
            r#"invalid value for IntOrString: invalid value "5.5%": strconv.Atoi: parsing "5.5": invalid syntax"#,
        ),
        (
            " 5%",
            r#"invalid value for IntOrString: invalid value " 5%": strconv.Atoi: parsing " 5": invalid syntax"#,
        ),
        (
            "1_0%",
            r#"invalid value for IntOrString: invalid value "1_0%": strconv.Atoi: parsing "1_0": invalid syntax"#,
        ),
        (
            "99999999999999999999%",
            r#"invalid value for IntOrString: invalid value "99999999999999999999%": strconv.Atoi: parsing "99999999999999999999": value out of range"#,
        ),
        (
            "\"\t\\%",
            r#"invalid value for IntOrString: invalid value "\"\t\\%": strconv.Atoi: parsing "\"\t\\": invalid syntax"#,
        ),
    ];
    for (v, want) in cases {
        assert_eq!(
            scaled_value(&s(v), 10, true).map_err(|e| e.to_string()),
            Err((*want).to_owned()),
            "{v:?}"
        );
    }
}

#[test]
fn go_quote_escapes() {
    assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
    assert_eq!(
        go_quote("\u{7}\u{8}\u{c}\n\r\t\u{b}"),
        r#""\a\b\f\n\r\t\v""#
    );
    assert_eq!(go_quote("\u{0}\u{1b}\u{7f}"), r#""\x00\x1b\x7f""#);
    assert_eq!(go_quote("é %\u{a0}\u{85}"), r#""é %\u00a0\u0085""#);
}

#[test]
fn needs_controller_scale_table() {
    let both = PodDisruptionBudgetSpec {
        min_available: Some(i(1)),
        max_unavailable: Some(i(1)),
        ..Default::default()
    };
    let cases = [
        (spec_min(i(3)), false),
        (spec_min(s("50%")), true),
        (spec_min(s("50")), true),
        (spec_max(i(1)), true),
        (spec_max(s("30%")), true),
        (both, true),
        (PodDisruptionBudgetSpec::default(), false),
    ];
    for (spec, want) in cases {
        assert_eq!(needs_controller_scale(&spec), want, "{spec:?}");
    }
}

#[test]
fn expected_and_desired_table() {
    let both = PodDisruptionBudgetSpec {
        min_available: Some(i(1)),
        max_unavailable: Some(i(2)),
        ..Default::default()
    };
    let cases: Vec<ExpectedCase> = vec![
        // integer minAvailable: expected = matching pods, scale ignored.
        (spec_min(i(3)), 0, None, Ok((0, 3))),
        (spec_min(i(3)), 5, Some(100), Ok((5, 3))),
        (spec_min(s("34%")), 3, Some(3), Ok((3, 2))),
        (spec_min(s("28%")), 1, Some(11), Ok((11, 4))),
        (spec_min(s("28%")), 1, Some(22), Ok((22, 7))),
        (spec_min(s("20%")), 1, Some(10), Ok((10, 2))),
        (spec_min(s("1%")), 1, Some(1), Ok((1, 1))),
        (spec_min(s("28%")), 1, Some(0), Ok((0, 0))),
        (spec_max(i(1)), 1, Some(0), Ok((0, 0))),
        (spec_max(i(2)), 1, Some(7), Ok((7, 5))),
        (spec_max(i(2)), 1, Some(5), Ok((5, 3))),
        (spec_max(s("30%")), 1, Some(7), Ok((7, 4))),
        (spec_max(s("30%")), 1, Some(3), Ok((3, 2))),
        (spec_max(i(5)), 4, Some(10), Ok((10, 5))),
        (spec_max(s("100%")), 4, Some(10), Ok((10, 0))),
        (spec_max(i(20)), 4, Some(10), Ok((10, 0))),
        (both, 4, Some(10), Err(BOTH_SET.to_owned())),
        (PodDisruptionBudgetSpec::default(), 4, Some(10), Ok((0, 0))),
        (
            spec_min(s("50")),
            4,
            Some(10),
            Err("invalid value for IntOrString: invalid type: string is not a percentage".to_owned()),
        ),
        (
            spec_max(s("abc%")),
            4,
            Some(10),
            Err(r#"invalid value for IntOrString: invalid value "abc%": strconv.Atoi: parsing "abc": invalid syntax"#.to_owned()),
        ),
        (spec_max(i(1)), 4, None, Err("controller scale was not computed".to_owned())),
        (spec_min(s("10%")), 4, None, Err("controller scale was not computed".to_owned())),
    ];
    for (spec, pods, scale, want) in cases {
        assert_eq!(
            expected_and_desired(&spec, pods, scale).map_err(|e| e.to_string()),
            want,
            "{spec:?} {pods} {scale:?}"
        );
    }
}

/// (spec, ready pods, unready pods, scale) → (expected, desired, allowed):
/// the ReplicaSet / ReplicationController / StatefulSet / scale-subresource
/// cases of disruption_test.go collapsed to their arithmetic.
#[test]
fn controller_style_table() {
    let cases: Vec<ControllerCase> = vec![
        (
            "TestReplicaSet 20% of 10",
            spec_min(s("20%")),
            1,
            0,
            10,
            (10, 2, 0),
        ),
        (
            "TestReplicationController 34% of 3, 1 pod",
            spec_min(s("34%")),
            1,
            0,
            3,
            (3, 2, 0),
        ),
        (
            "TestReplicationController 34% of 3, 3 pods",
            spec_min(s("34%")),
            3,
            0,
            3,
            (3, 2, 1),
        ),
        (
            "TestReplicationController rogue pod",
            spec_min(s("34%")),
            4,
            0,
            3,
            (3, 2, 2),
        ),
        (
            "TestStatefulSetController 3 pods",
            spec_min(s("34%")),
            3,
            0,
            3,
            (3, 2, 1),
        ),
        (
            "TestScaleResource maxU 5 of 10, 4 pods",
            spec_max(i(5)),
            4,
            0,
            10,
            (10, 5, 0),
        ),
        (
            "TestScaleResource maxU 5 of 10, 7 pods",
            spec_max(i(5)),
            7,
            0,
            10,
            (10, 5, 2),
        ),
        (
            "TestNakedPod 28% no controllers",
            spec_min(s("28%")),
            1,
            0,
            0,
            (0, 0, 0),
        ),
        (
            "TestIntegerMaxUnavailable naked",
            spec_max(i(1)),
            1,
            0,
            0,
            (0, 0, 0),
        ),
        ("maxU 30% of 3", spec_max(s("30%")), 3, 0, 3, (3, 2, 1)),
        (
            "minAvailable int, unready pods count as expected",
            spec_min(i(2)),
            2,
            3,
            0,
            (5, 2, 0),
        ),
        (
            "minAvailable int, no pods",
            spec_min(i(3)),
            0,
            0,
            0,
            (0, 3, 0),
        ),
    ];
    for (name, spec, ready, not_ready, scale, want) in cases {
        let mut pods: Vec<Pod> = (0..ready).map(|n| pod(&format!("r{n}"))).collect();
        pods.extend((0..not_ready).map(|n| unready(&format!("u{n}"))));
        let mut p = pdb(spec);
        sync(&mut p, &pods, scale);
        let st = p.status.unwrap();
        assert_eq!(
            (st.expected_pods, st.desired_healthy, st.disruptions_allowed),
            (Some(want.0), Some(want.1), Some(want.2)),
            "{name}"
        );
    }
}

#[test]
fn upstream_no_selector() {
    let mut p = pdb(spec_min(i(3)));
    sync(&mut p, &[], 0);
    verify(&p, 0, 0, 3, 0, &[]);
    sync(&mut p, &[pod("yo-yo-yo")], 0);
    verify(&p, 0, 1, 3, 1, &[]);
}

#[test]
fn upstream_unavailable() {
    let mut p = pdb(spec_min(i(3)));
    sync(&mut p, &[], 0);
    let mut pods = Vec::new();
    for n in 0..4 {
        verify(&p, 0, n, 3, n, &[]);
        pods.push(pod(&format!("yo-yo-yo {n}")));
        sync(&mut p, &pods, 0);
    }
    verify(&p, 1, 4, 3, 4, &[]);
    pods[0] = unready("yo-yo-yo 0");
    sync(&mut p, &pods, 0);
    verify(&p, 0, 3, 3, 4, &[]);
}

#[test]
fn upstream_integer_max_unavailable() {
    let mut p = pdb(spec_max(i(1)));
    sync(&mut p, &[], 0);
    verify(&p, 0, 0, 0, 0, &[]);
    // A naked pod contributes no scale: expected 0, so nothing is allowed.
    sync(&mut p, &[pod("naked")], 0);
    verify(&p, 0, 1, 0, 0, &[]);
}

#[test]
fn upstream_integer_max_unavailable_with_scaling() {
    let mut p = pdb(spec_max(i(2)));
    let pods = [pod("pod")];
    sync(&mut p, &pods, 7);
    verify(&p, 0, 1, 5, 7, &[]);
    sync(&mut p, &pods, 5);
    verify(&p, 0, 1, 3, 5, &[]);
}

#[test]
fn upstream_percentage_max_unavailable_with_scaling() {
    let mut p = pdb(spec_max(s("30%")));
    let pods = [pod("pod")];
    sync(&mut p, &pods, 7);
    verify(&p, 0, 1, 4, 7, &[]);
    sync(&mut p, &pods, 3);
    verify(&p, 0, 1, 2, 3, &[]);
}

#[test]
fn upstream_naked_pod_and_unmanaged_status() {
    let mut p = pdb(spec_min(s("28%")));
    sync(&mut p, &[], 0);
    verify(&p, 0, 0, 0, 0, &[]);
    sync(&mut p, &[pod("naked")], 0);
    verify(&p, 0, 1, 0, 0, &[]);
}

#[test]
fn upstream_replica_set() {
    let mut p = pdb(spec_min(s("20%")));
    sync(&mut p, &[pod("pod")], 10);
    verify(&p, 0, 1, 2, 10, &[]);
}

#[test]
fn upstream_replication_controller_and_stateful_set() {
    for with_rogue in [true, false] {
        let mut p = pdb(spec_min(s("34%")));
        // No pods yet: the controller is unknown, so expected starts at 0.
        sync(&mut p, &[], 0);
        verify(&p, 0, 0, 0, 0, &[]);
        let mut pods = Vec::new();
        for n in 0..3 {
            pods.push(pod(&format!("foobar {n}")));
            sync(&mut p, &pods, 3);
            if n < 2 {
                verify(&p, 0, n + 1, 2, 3, &[]);
            } else {
                verify(&p, 1, 3, 2, 3, &[]);
            }
        }
        if with_rogue {
            // An unmanaged pod adds no scale but is counted healthy.
            pods.push(pod("rogue"));
            sync(&mut p, &pods, 3);
            verify(&p, 2, 4, 2, 3, &[]);
        }
    }
}

#[test]
fn upstream_two_controllers() {
    const COLLECTION: i32 = 11;
    const MIN_ONE: i32 = 4;
    const MIN_TWO: i32 = 7;
    let mut p = pdb(spec_min(s("28%")));
    sync(&mut p, &[], 0);
    verify(&p, 0, 0, 0, 0, &[]);

    let mut pods = Vec::new();
    let unavailable = COLLECTION - MIN_ONE - 1;
    for n in 1..=COLLECTION {
        let name = format!("quux {n}");
        pods.push(if n <= unavailable {
            unready(&name)
        } else {
            pod(&name)
        });
        sync(&mut p, &pods, COLLECTION);
        if n <= unavailable {
            verify(&p, 0, 0, MIN_ONE, COLLECTION, &[]);
        } else if n - unavailable <= MIN_ONE {
            verify(&p, 0, n - unavailable, MIN_ONE, COLLECTION, &[]);
        } else {
            verify(&p, 1, n - unavailable, MIN_ONE, COLLECTION, &[]);
        }
    }
    // Deployment and ReplicaSet without pods yet: nothing changes.
    sync(&mut p, &pods, COLLECTION);
    verify(&p, 1, MIN_ONE + 1, MIN_ONE, COLLECTION, &[]);

    let unavailable = 2 * COLLECTION - (MIN_TWO + 2) - unavailable;
    for n in 1..=COLLECTION {
        let name = format!("quuux {n}");
        pods.push(if n <= unavailable {
            unready(&name)
        } else {
            pod(&name)
        });
        sync(&mut p, &pods, 2 * COLLECTION);
        if n <= unavailable {
            verify(&p, 0, MIN_ONE + 1, MIN_TWO, 2 * COLLECTION, &[]);
        } else if n - unavailable <= MIN_TWO - (MIN_ONE + 1) {
            verify(
                &p,
                0,
                (MIN_ONE + 1) + (n - unavailable),
                MIN_TWO,
                2 * COLLECTION,
                &[],
            );
        } else {
            verify(
                &p,
                n - unavailable - (MIN_TWO - (MIN_ONE + 1)),
                (MIN_ONE + 1) + (n - unavailable),
                MIN_TWO,
                2 * COLLECTION,
                &[],
            );
        }
    }
    verify(&p, 2, 2 + MIN_TWO, MIN_TWO, 2 * COLLECTION, &[]);
    pods[10] = unready("quux 11");
    sync(&mut p, &pods, 2 * COLLECTION);
    verify(&p, 1, 1 + MIN_TWO, MIN_TWO, 2 * COLLECTION, &[]);
    pods[9] = unready("quux 10");
    sync(&mut p, &pods, 2 * COLLECTION);
    verify(&p, 0, MIN_TWO, MIN_TWO, 2 * COLLECTION, &[]);
    pods[10] = pod("quux 11");
    sync(&mut p, &pods, 2 * COLLECTION);
    verify(&p, 1, 1 + MIN_TWO, MIN_TWO, 2 * COLLECTION, &[]);
}

#[test]
fn upstream_update_disrupted_pods() {
    let mut p = pdb(spec_min(i(1)));
    p.status = Some(PodDisruptionBudgetStatus {
        disrupted_pods: Some(BTreeMap::from([
            ("p1".to_owned(), ts(NOW)),       // pod deletion started
            ("p2".to_owned(), ts(NOW - 180)), // expired
            ("p3".to_owned(), ts(NOW - 60)),  // stays
            ("notthere".to_owned(), ts(NOW)), // pod gone
        ])),
        ..Default::default()
    });
    let pods = [deleting("p1"), pod("p2"), pod("p3")];
    let views = views(&pods);
    let refs: Vec<&view::Pod> = views.iter().collect();
    let d = disrupted_pods(&refs, p.status.as_ref(), &now());
    assert_eq!(d.expired, vec!["p2".to_owned()]);
    assert_eq!(d.recheck_at, Some(ts(NOW + 60)));
    sync(&mut p, &pods, 0);
    verify(&p, 0, 1, 1, 3, &[("p3", ts(NOW - 60))]);
}

#[test]
fn disrupted_pods_expiry() {
    let status = PodDisruptionBudgetStatus {
        disrupted_pods: Some(BTreeMap::from([
            ("old".to_owned(), ts(NOW - 121)),
            ("boundary".to_owned(), ts(NOW - 120)),
            ("fresh".to_owned(), ts(NOW - 60)),
            ("newest".to_owned(), ts(NOW - 10)),
            ("deleting".to_owned(), ts(NOW - 300)),
            ("missing".to_owned(), ts(NOW - 300)),
        ])),
        ..Default::default()
    };
    let pods = [
        pod("newest"),
        pod("fresh"),
        deleting("deleting"),
        pod("old"),
        pod("boundary"),
        pod("other"),
    ];
    let views = views(&pods);
    let refs: Vec<&view::Pod> = views.iter().collect();
    let d = disrupted_pods(&refs, Some(&status), &now());
    assert_eq!(
        d,
        DisruptedPods {
            map: BTreeMap::from([
                // entry + 2min == now is not "before now": kept.
                ("boundary".to_owned(), ts(NOW - 120)),
                ("fresh".to_owned(), ts(NOW - 60)),
                ("newest".to_owned(), ts(NOW - 10)),
            ]),
            recheck_at: Some(ts(NOW)),
            expired: vec!["old".to_owned()],
        }
    );

    let only_fresh = PodDisruptionBudgetStatus {
        disrupted_pods: Some(BTreeMap::from([("fresh".to_owned(), ts(NOW - 60))])),
        ..Default::default()
    };
    let d = disrupted_pods(&refs, Some(&only_fresh), &now());
    assert_eq!(d.recheck_at, Some(ts(NOW + 60)));
    assert!(d.expired.is_empty());

    assert_eq!(
        disrupted_pods(&refs, None, &now()),
        DisruptedPods::default()
    );
    assert_eq!(
        disrupted_pods(&refs, Some(&PodDisruptionBudgetStatus::default()), &now()),
        DisruptedPods::default()
    );
    // Near the end of time the deadline saturates instead of failing.
    let late = PodDisruptionBudgetStatus {
        disrupted_pods: Some(BTreeMap::from([("fresh".to_owned(), Time(Timestamp::MAX))])),
        ..Default::default()
    };
    let d = disrupted_pods(&refs, Some(&late), &now());
    assert_eq!(d.recheck_at, Some(Time(Timestamp::MAX)));
}

#[test]
fn count_healthy_rules() {
    let mut no_status = pod("no-status");
    no_status.status = None;
    let mut ready_false = pod("ready-false");
    ready_false.status = Some(PodStatus {
        conditions: Some(vec![cond("Ready", "False")]),
        ..Default::default()
    });
    let mut first_wins = pod("first-wins");
    first_wins.status = Some(PodStatus {
        conditions: Some(vec![cond("Ready", "Unknown"), cond("Ready", "True")]),
        ..Default::default()
    });
    let mut failed_phase = pod("failed-but-ready");
    if let Some(st) = failed_phase.status.as_mut() {
        st.phase = Some("Failed".to_owned());
    }
    let pods = [
        pod("ok"),
        deleting("deleting"),
        unready("unready"),
        no_status,
        ready_false,
        first_wins,
        failed_phase,
        pod("disrupted"),
        pod("disrupted-expired"),
        pod("disrupted-boundary"),
    ];
    let views = views(&pods);
    let refs: Vec<&view::Pod> = views.iter().collect();
    let disrupted = BTreeMap::from([
        ("disrupted".to_owned(), ts(NOW - 60)),
        ("disrupted-expired".to_owned(), ts(NOW - 121)),
        // entry + 2min == now is not "after now": counted healthy.
        ("disrupted-boundary".to_owned(), ts(NOW - 120)),
    ]);
    // ok, failed-but-ready, disrupted-expired, disrupted-boundary.
    assert_eq!(count_healthy(&refs, &disrupted, &now()), 4);
    assert_eq!(count_healthy(&refs, &BTreeMap::new(), &now()), 5);
    assert_eq!(count_healthy(&[], &disrupted, &now()), 0);
}

fn synced_pdb() -> PodDisruptionBudget {
    let mut p = pdb(spec_min(i(2)));
    p.metadata.generation = Some(3);
    p.status = Some(PodDisruptionBudgetStatus {
        conditions: Some(vec![pdb_cond(
            "True",
            SUFFICIENT_PODS_REASON,
            "",
            3,
            NOW - 500,
        )]),
        current_healthy: Some(3),
        desired_healthy: Some(2),
        disrupted_pods: None,
        disruptions_allowed: Some(1),
        expected_pods: Some(3),
        observed_generation: Some(3),
    });
    p
}

#[test]
fn new_status_no_op_detection() {
    let empty = BTreeMap::new();
    let p = synced_pdb();
    assert_eq!(new_status(&p, 3, 2, 3, &empty, &now()), None);

    // nil and empty disruptedPods are equal.
    let mut q = synced_pdb();
    if let Some(st) = q.status.as_mut() {
        st.disrupted_pods = Some(BTreeMap::new());
    }
    assert_eq!(new_status(&q, 3, 2, 3, &empty, &now()), None);

    // The condition's own observedGeneration and message are not checked.
    let mut q = synced_pdb();
    if let Some(st) = q.status.as_mut() {
        st.conditions = Some(vec![pdb_cond(
            "True",
            SUFFICIENT_PODS_REASON,
            "stale",
            1,
            NOW - 500,
        )]);
    }
    assert_eq!(new_status(&q, 3, 2, 3, &empty, &now()), None);

    // Generation bump: rewrite with the new observedGeneration everywhere.
    let mut q = synced_pdb();
    q.metadata.generation = Some(4);
    let st = new_status(&q, 3, 2, 3, &empty, &now()).unwrap();
    assert_eq!(st.observed_generation, Some(4));
    assert_eq!(
        st.conditions,
        Some(vec![pdb_cond(
            "True",
            SUFFICIENT_PODS_REASON,
            "",
            4,
            NOW - 500
        )])
    );

    // Each counter, the map, a missing or wrong condition breaks the no-op.
    assert!(new_status(&p, 4, 2, 3, &empty, &now()).is_some());
    assert!(new_status(&p, 3, 1, 3, &empty, &now()).is_some());
    assert!(new_status(&p, 3, 2, 4, &empty, &now()).is_some());
    let one = BTreeMap::from([("x".to_owned(), ts(NOW))]);
    assert!(new_status(&p, 3, 2, 3, &one, &now()).is_some());
    let mut q = synced_pdb();
    if let Some(st) = q.status.as_mut() {
        st.conditions = None;
    }
    assert!(new_status(&q, 3, 2, 3, &empty, &now()).is_some());
    let mut q = synced_pdb();
    if let Some(st) = q.status.as_mut() {
        st.conditions = Some(vec![pdb_cond(
            "False",
            SYNC_FAILED_REASON,
            "boom",
            3,
            NOW - 500,
        )]);
    }
    assert!(new_status(&q, 3, 2, 3, &empty, &now()).is_some());
    // A never-synced PDB always gets a status.
    let fresh = pdb(spec_min(i(2)));
    assert!(new_status(&fresh, 0, 0, 0, &empty, &now()).is_some());
}

#[test]
fn new_status_condition_transitions() {
    let empty = BTreeMap::new();
    let other = pdb_cond("True", "Whatever", "kept", 9, NOW - 900);
    let mut other = other;
    other.type_ = "Other".to_owned();

    // True → False flips: new lastTransitionTime; other conditions untouched, in place.
    let mut p = synced_pdb();
    if let Some(st) = p.status.as_mut() {
        st.conditions = Some(vec![
            other.clone(),
            pdb_cond("True", SUFFICIENT_PODS_REASON, "", 3, NOW - 500),
        ]);
    }
    let st = new_status(&p, 2, 2, 3, &empty, &now()).unwrap();
    assert_eq!(st.disruptions_allowed, Some(0));
    assert_eq!(
        st.conditions,
        Some(vec![
            other.clone(),
            pdb_cond("False", INSUFFICIENT_PODS_REASON, "", 3, NOW)
        ])
    );

    // SyncFailed (False) → InsufficientPods (False): no flip, time kept, message cleared.
    let mut p = synced_pdb();
    if let Some(st) = p.status.as_mut() {
        st.disruptions_allowed = Some(0);
        st.conditions = Some(vec![pdb_cond(
            "False",
            SYNC_FAILED_REASON,
            "boom",
            2,
            NOW - 500,
        )]);
    }
    let st = new_status(&p, 2, 2, 3, &empty, &now()).unwrap();
    assert_eq!(
        st.conditions,
        Some(vec![pdb_cond(
            "False",
            INSUFFICIENT_PODS_REASON,
            "",
            3,
            NOW - 500
        )])
    );

    // SyncFailed (False) → SufficientPods (True): flip.
    let st = new_status(&p, 3, 2, 3, &empty, &now()).unwrap();
    assert_eq!(
        st.conditions,
        Some(vec![pdb_cond("True", SUFFICIENT_PODS_REASON, "", 3, NOW)])
    );

    // No condition yet: appended with now.
    let fresh = pdb(spec_min(i(2)));
    let st = new_status(&fresh, 0, 2, 0, &empty, &now()).unwrap();
    assert_eq!(
        st,
        PodDisruptionBudgetStatus {
            conditions: Some(vec![pdb_cond(
                "False",
                INSUFFICIENT_PODS_REASON,
                "",
                1,
                NOW
            )]),
            current_healthy: Some(0),
            desired_healthy: Some(2),
            disrupted_pods: None,
            disruptions_allowed: Some(0),
            expected_pods: Some(0),
            observed_generation: Some(1),
        }
    );
}

#[test]
fn new_status_allowed_arithmetic() {
    let empty = BTreeMap::new();
    let fresh = pdb(spec_min(i(2)));
    let allowed = |h, d, e| {
        new_status(&fresh, h, d, e, &empty, &now())
            .unwrap()
            .disruptions_allowed
            .unwrap()
    };
    assert_eq!(allowed(5, 2, 5), 3);
    assert_eq!(allowed(5, 2, 0), 0); // expected 0 is never safe
    assert_eq!(allowed(5, 2, -1), 0);
    assert_eq!(allowed(1, 3, 5), 0);
    assert_eq!(allowed(3, 3, 5), 0);
    // Go int32 subtraction wraps: MinInt32 - 1 → MaxInt32.
    assert_eq!(allowed(i32::MIN, 1, 5), i32::MAX);
}

#[test]
fn new_status_wire_format() {
    let mut p = pdb(spec_min(i(1)));
    p.metadata.generation = Some(2);
    let disrupted = BTreeMap::from([("p3".to_owned(), ts(NOW - 60))]);
    let mut at = now();
    at.0 = at.0.checked_add(SignedDuration::from_millis(250)).unwrap();
    let st = new_status(&p, 2, 1, 3, &disrupted, &at).unwrap();
    assert_eq!(
        serde_json::to_value(&st).unwrap(),
        serde_json::json!({
            "conditions": [{
                "type": "DisruptionAllowed",
                "status": "True",
                "reason": "SufficientPods",
                "message": "",
                "observedGeneration": 2,
                "lastTransitionTime": "2023-11-14T22:13:20Z",
            }],
            "currentHealthy": 2,
            "desiredHealthy": 1,
            "disruptedPods": {"p3": "2023-11-14T22:12:20Z"},
            "disruptionsAllowed": 1,
            "expectedPods": 3,
            "observedGeneration": 2,
        })
    );
    let st = new_status(&p, 0, 1, 0, &BTreeMap::new(), &at).unwrap();
    let v = serde_json::to_value(&st).unwrap();
    assert_eq!(v.get("disruptedPods"), None);
}

#[test]
fn fail_safe() {
    let msg = "found no controllers for pod \"x\"";
    // Keeps counters, map and the OLD observedGeneration; condition gets it too.
    let mut p = synced_pdb();
    p.metadata.generation = Some(5);
    if let Some(st) = p.status.as_mut() {
        st.disrupted_pods = Some(BTreeMap::from([("p".to_owned(), ts(NOW - 5))]));
    }
    let st = fail_safe_status(&p, msg, &now()).unwrap();
    assert_eq!(
        st,
        PodDisruptionBudgetStatus {
            conditions: Some(vec![pdb_cond("False", SYNC_FAILED_REASON, msg, 3, NOW)]),
            current_healthy: Some(3),
            desired_healthy: Some(2),
            disrupted_pods: Some(BTreeMap::from([("p".to_owned(), ts(NOW - 5))])),
            disruptions_allowed: Some(0),
            expected_pods: Some(3),
            observed_generation: Some(3),
        }
    );

    // Applying it again changes nothing.
    p.status = Some(st.clone());
    assert_eq!(fail_safe_status(&p, msg, &ts(NOW + 30)), None);

    // A different message is a change, without a new transition time.
    let again = fail_safe_status(&p, "other", &ts(NOW + 30)).unwrap();
    assert_eq!(
        again.conditions,
        Some(vec![pdb_cond("False", SYNC_FAILED_REASON, "other", 3, NOW)])
    );

    // From False/InsufficientPods with 0 allowed: reason changes, time kept.
    let mut q = synced_pdb();
    if let Some(st) = q.status.as_mut() {
        st.disruptions_allowed = Some(0);
        st.conditions = Some(vec![pdb_cond(
            "False",
            INSUFFICIENT_PODS_REASON,
            "",
            3,
            NOW - 500,
        )]);
    }
    let st = fail_safe_status(&q, msg, &now()).unwrap();
    assert_eq!(
        st.conditions,
        Some(vec![pdb_cond(
            "False",
            SYNC_FAILED_REASON,
            msg,
            3,
            NOW - 500
        )])
    );

    // Never synced: condition appended, observedGeneration stays unset.
    let fresh = pdb(spec_min(s("50")));
    let st = fail_safe_status(&fresh, msg, &now()).unwrap();
    assert_eq!(
        st,
        PodDisruptionBudgetStatus {
            conditions: Some(vec![pdb_cond("False", SYNC_FAILED_REASON, msg, 0, NOW)]),
            disruptions_allowed: Some(0),
            ..Default::default()
        }
    );

    // Through the sync harness: an invalid percentage fails safe.
    let mut p = pdb(spec_min(s("abc%")));
    sync(&mut p, &[pod("a")], 3);
    let st = p.status.unwrap();
    assert_eq!(st.disruptions_allowed, Some(0));
    assert_eq!(st.observed_generation, None);
    assert_eq!(
        st.conditions.unwrap().first().map(|c| c.message.clone()),
        Some(r#"invalid value for IntOrString: invalid value "abc%": strconv.Atoi: parsing "abc": invalid syntax"#.to_owned())
    );
}

fn disruption_pod(status: &str, reason: Option<&str>, at: Option<i64>, phase: Option<&str>) -> Pod {
    let mut p = pod("victim");
    p.metadata.generation = Some(4);
    p.status = Some(PodStatus {
        phase: phase.map(str::to_owned),
        conditions: Some(vec![
            cond("Ready", "True"),
            PodCondition {
                reason: reason.map(str::to_owned),
                message: Some("evicted".to_owned()),
                last_transition_time: at.map(ts),
                last_probe_time: Some(ts(NOW - 1000)),
                observed_generation: Some(2),
                ..cond(DISRUPTION_TARGET_CONDITION, status)
            },
        ]),
        ..Default::default()
    });
    p
}

#[test]
fn stale_disruption_target_timing() {
    let secs = Duration::from_secs;
    let evict = Some("EvictionByEvictionAPI");
    let mut deleted = disruption_pod("True", evict, Some(NOW - 500), None);
    deleted.metadata.deletion_timestamp = Some(now());
    let mut no_status = pod("x");
    no_status.status = None;
    let cases: Vec<(&str, Pod, Option<Duration>)> = vec![
        (
            "fresh",
            disruption_pod("True", evict, Some(NOW), Some("Running")),
            Some(secs(120)),
        ),
        (
            "1 min old",
            disruption_pod("True", evict, Some(NOW - 60), None),
            Some(secs(60)),
        ),
        (
            "2 min - 1 s",
            disruption_pod("True", evict, Some(NOW - 119), None),
            Some(secs(1)),
        ),
        (
            "exactly 2 min",
            disruption_pod("True", evict, Some(NOW - 120), None),
            Some(secs(0)),
        ),
        (
            "2 min + 1 s",
            disruption_pod("True", evict, Some(NOW - 121), None),
            Some(secs(0)),
        ),
        (
            "future",
            disruption_pod("True", evict, Some(NOW + 30), None),
            Some(secs(150)),
        ),
        (
            "no transition time",
            disruption_pod("True", evict, None, None),
            Some(secs(0)),
        ),
        (
            "no reason",
            disruption_pod("True", None, Some(NOW - 200), Some("Pending")),
            Some(secs(0)),
        ),
        (
            "kubelet",
            disruption_pod(
                "True",
                Some(TERMINATION_BY_KUBELET_REASON),
                Some(NOW - 500),
                None,
            ),
            None,
        ),
        (
            "succeeded",
            disruption_pod("True", evict, Some(NOW - 500), Some("Succeeded")),
            None,
        ),
        (
            "failed",
            disruption_pod("True", evict, Some(NOW - 500), Some("Failed")),
            None,
        ),
        (
            "status False",
            disruption_pod("False", evict, Some(NOW - 500), None),
            None,
        ),
        (
            "status Unknown",
            disruption_pod("Unknown", evict, Some(NOW - 500), None),
            None,
        ),
        ("deleted", deleted, None),
        ("no condition", pod("x"), None),
        ("no status", no_status, None),
    ];
    for (name, p, want) in cases {
        assert_eq!(stale_disruption_wait(&(&p).into(), &now()), want, "{name}");
    }
    // Sub-second remainder is kept.
    let mut at = ts(NOW - 60);
    at.0 = at.0.checked_add(SignedDuration::from_millis(500)).unwrap();
    // Set on the view: JSON (the way to a view) carries whole seconds only.
    let mut p: view::Pod = (&disruption_pod("True", evict, None, None)).into();
    if let Some(c) = p
        .status
        .as_mut()
        .and_then(|s| s.conditions.as_mut())
        .and_then(|c| c.get_mut(1))
    {
        c.last_transition_time = Some(at);
    }
    assert_eq!(
        stale_disruption_wait(&p, &now()),
        Some(Duration::from_millis(60_500))
    );
}

#[test]
fn clear_disruption_target() {
    let p = disruption_pod(
        "True",
        Some("EvictionByEvictionAPI"),
        Some(NOW - 500),
        Some("Running"),
    );
    let st = cleared_disruption_target(&p, &now());
    assert_eq!(
        st,
        PodStatus {
            phase: Some("Running".to_owned()),
            conditions: Some(vec![
                cond("Ready", "True"),
                PodCondition {
                    observed_generation: Some(4),
                    last_transition_time: Some(now()),
                    ..cond(DISRUPTION_TARGET_CONDITION, "False")
                },
            ]),
            ..Default::default()
        }
    );
    let v = serde_json::to_value(&st).unwrap();
    assert_eq!(
        v.pointer("/conditions/1"),
        Some(&serde_json::json!({
            "type": "DisruptionTarget",
            "status": "False",
            "observedGeneration": 4,
            "lastTransitionTime": "2023-11-14T22:13:20Z",
        }))
    );

    // Already False: transition time kept (UpdatePodCondition semantics).
    let p = disruption_pod("False", Some("x"), Some(NOW - 500), None);
    let st = cleared_disruption_target(&p, &now());
    let c = st.conditions.as_ref().and_then(|c| c.get(1)).unwrap();
    assert_eq!(
        (c.last_transition_time.clone(), c.reason.clone()),
        (Some(ts(NOW - 500)), None)
    );

    // No condition / generation: appended, observedGeneration omitted.
    let mut p = pod("x");
    p.status = None;
    let st = cleared_disruption_target(&p, &now());
    assert_eq!(
        st.conditions,
        Some(vec![PodCondition {
            last_transition_time: Some(now()),
            ..cond(DISRUPTION_TARGET_CONDITION, "False")
        }])
    );
}
