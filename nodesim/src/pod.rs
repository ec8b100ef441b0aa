//! What a kubelet decides about one pod, and the status it writes: pure functions of the pod,
//! its start time and now.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};

use crate::{EXIT_CODE_ANNOTATION, READY_ANNOTATION, RUN_FOR_ANNOTATION};

/// Parses a Go duration of whole or fractional units (`"5s"`, `"1m30s"`, `"500ms"`, `"1.5h"`).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += number * seconds;
        rest = &rest[unit_end..];
    }
    Some(Duration::from_secs_f64(total))
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// A readiness probe that cannot succeed: an exec probe running `false`.
fn probe_fails(container: &Container) -> bool {
    container
        .readiness_probe
        .as_ref()
        .and_then(|p| p.exec.as_ref())
        .and_then(|e| e.command.as_ref())
        .and_then(|c| c.first())
        .is_some_and(|command| command == "false" || command == "/bin/false")
}

/// How long after its start the pod's containers pass their readiness probes: the largest
/// `initialDelaySeconds`; None when a probe can never pass.
pub(crate) fn ready_after(pod: &Pod) -> Option<Duration> {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    if containers.iter().any(probe_fails) {
        return None;
    }
    let delay = containers
        .iter()
        .filter_map(|c| c.readiness_probe.as_ref())
        .filter_map(|p| p.initial_delay_seconds)
        .max()
        .unwrap_or(0);
    Some(Duration::from_secs(delay.max(0) as u64))
}

/// Whether the containers are ready `running_for` after the pod started.
pub(crate) fn containers_ready(pod: &Pod, running_for: Duration) -> bool {
    annotation(pod, READY_ANNOTATION) != Some("false")
        && ready_after(pod).is_some_and(|after| running_for >= after)
}

/// Whether every readiness gate's condition is True.
pub(crate) fn gates_pass(pod: &Pod) -> bool {
    let gates = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    gates.iter().all(|gate| {
        conditions
            .iter()
            .any(|c| c.type_ == gate.condition_type && c.status == "True")
    })
}

/// How long a pod of restartPolicy Never or OnFailure runs, and its exit code; None for pods
/// that run until deleted.
pub(crate) fn run_for(pod: &Pod) -> Option<(Duration, i32)> {
    let restart = pod.spec.as_ref()?.restart_policy.as_deref();
    if !matches!(restart, Some("Never" | "OnFailure")) {
        return None;
    }
    let duration = parse_duration(annotation(pod, RUN_FOR_ANNOTATION)?)?;
    let code = annotation(pod, EXIT_CODE_ANNOTATION)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Some((duration, code))
}

/// Whether the pod reached a terminal phase.
pub(crate) fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// A container ID, stable for one pod's container.
fn container_id(uid: &str, name: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (uid, name).hash(&mut hasher);
    format!("containerd://{:016x}{:048x}", hasher.finish(), 0)
}

/// Where a pod's containers are.
pub(crate) enum Containers<'a> {
    Running {
        since: &'a str,
        ready: bool,
    },
    Exited {
        since: &'a str,
        at: &'a str,
        code: i32,
    },
}

/// The `pods/status` patch for `pod` on `host_ip` with `pod_ip`: phase, IPs, conditions (each
/// with the time its status last changed, `transitions`) and container statuses.
pub(crate) fn status_patch(
    pod: &Pod,
    host_ip: &str,
    pod_ip: &str,
    started: &str,
    containers: Containers<'_>,
    ready_since: &str,
) -> Value {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let spec_containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let (phase, ready, reason, state) = match containers {
        Containers::Running { since, ready } => (
            "Running",
            ready,
            None,
            json!({ "running": { "startedAt": since } }),
        ),
        Containers::Exited { since, at, code } => {
            let (phase, why) = if code == 0 {
                ("Succeeded", "Completed")
            } else {
                ("Failed", "Error")
            };
            let state = json!({ "terminated": {
                "exitCode": code, "reason": why, "startedAt": since, "finishedAt": at } });
            (phase, false, Some("PodCompleted"), state)
        }
    };
    let running = phase == "Running";
    let pod_ready = ready && gates_pass(pod);
    let condition = |kind: &str, status: bool, since: &str, reason: Option<&str>| {
        let mut c = json!({ "type": kind, "status": if status { "True" } else { "False" },
                            "lastProbeTime": null, "lastTransitionTime": since });
        if let Some(reason) = reason {
            c["reason"] = json!(reason);
        } else if !status {
            c["reason"] = json!("ContainersNotReady");
        }
        c
    };
    let statuses: Vec<Value> = spec_containers
        .iter()
        .map(|c| {
            let mut status = json!({
                "name": c.name,
                "image": c.image.clone().unwrap_or_default(),
                "imageID": format!("{}@sha256:{:064}", c.image.clone().unwrap_or_default(), 0),
                "containerID": container_id(uid, &c.name),
                "ready": ready,
                "started": running,
                "restartCount": 0,
                "state": state,
            });
            if let Some(state) = status["state"]["terminated"].as_object_mut() {
                state.insert("containerID".into(), json!(container_id(uid, &c.name)));
            }
            status
        })
        .collect();
    json!({ "status": {
        "phase": phase,
        "hostIP": host_ip,
        "hostIPs": [{ "ip": host_ip }],
        "podIP": pod_ip,
        "podIPs": [{ "ip": pod_ip }],
        "startTime": started,
        "conditions": [
            condition("PodReadyToStartContainers", running, started, None),
            condition("Initialized", true, started, None),
            condition("ContainersReady", ready, ready_since, reason),
            condition("Ready", pod_ready, ready_since, reason),
            condition("PodScheduled", true, started, None),
        ],
        "containerStatuses": statuses,
    } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(value: Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_duration("5s"), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("5"), None, "a unit is required");
        assert_eq!(parse_duration("5x"), None);
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn readiness_waits_for_the_largest_initial_delay_and_never_comes_for_a_failing_probe() {
        let delayed = pod(
            json!({ "metadata": { "name": "p" }, "spec": { "containers": [
            { "name": "a", "readinessProbe": { "initialDelaySeconds": 2,
                                               "httpGet": { "port": 80 } } },
            { "name": "b", "readinessProbe": { "initialDelaySeconds": 5,
                                               "tcpSocket": { "port": 80 } } },
            { "name": "c" } ] } }),
        );
        assert_eq!(ready_after(&delayed), Some(Duration::from_secs(5)));
        assert!(!containers_ready(&delayed, Duration::from_secs(4)));
        assert!(containers_ready(&delayed, Duration::from_secs(5)));

        let failing = pod(
            json!({ "metadata": { "name": "p" }, "spec": { "containers": [
            { "name": "a", "readinessProbe": { "exec": { "command": ["false"] } } } ] } }),
        );
        assert_eq!(ready_after(&failing), None);
        assert!(!containers_ready(&failing, Duration::from_secs(3600)));

        let told = pod(json!({ "metadata": { "name": "p",
            "annotations": { READY_ANNOTATION: "false" } },
            "spec": { "containers": [{ "name": "a" }] } }));
        assert!(!containers_ready(&told, Duration::from_secs(3600)));
    }

    #[test]
    fn readiness_gates_need_their_conditions_true() {
        let gated = |status: &str| {
            pod(json!({ "metadata": { "name": "p" },
                "spec": { "containers": [{ "name": "a" }],
                          "readinessGates": [{ "conditionType": "example.com/lb" }] },
                "status": { "conditions": [{ "type": "example.com/lb", "status": status }] } }))
        };
        assert!(gates_pass(&gated("True")));
        assert!(!gates_pass(&gated("False")));
    }

    #[test]
    fn only_pods_that_do_not_restart_finish() {
        let with = |restart: &str, annotations: Value| {
            pod(
                json!({ "metadata": { "name": "p", "annotations": annotations },
                "spec": { "restartPolicy": restart, "containers": [{ "name": "a" }] } }),
            )
        };
        let run = json!({ RUN_FOR_ANNOTATION: "3s" });
        assert_eq!(
            run_for(&with("Never", run.clone())),
            Some((Duration::from_secs(3), 0))
        );
        assert_eq!(run_for(&with("Always", run)), None);
        let failing = json!({ RUN_FOR_ANNOTATION: "1s", EXIT_CODE_ANNOTATION: "2" });
        assert_eq!(
            run_for(&with("OnFailure", failing)),
            Some((Duration::from_secs(1), 2))
        );
    }

    #[test]
    fn an_exited_pod_is_terminal_with_its_exit_code() {
        let p = pod(json!({ "metadata": { "name": "p", "uid": "u" },
            "spec": { "containers": [{ "name": "a", "image": "busybox" }] } }));
        let failed = status_patch(
            &p,
            "100.64.0.0",
            "10.128.0.2",
            "t0",
            Containers::Exited {
                since: "t0",
                at: "t1",
                code: 3,
            },
            "t1",
        );
        assert_eq!(failed["status"]["phase"], "Failed");
        assert_eq!(
            failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            3
        );
        assert_eq!(failed["status"]["conditions"][3]["status"], "False");
        assert_eq!(failed["status"]["conditions"][3]["reason"], "PodCompleted");
        let running = status_patch(
            &p,
            "100.64.0.0",
            "10.128.0.2",
            "t0",
            Containers::Running {
                since: "t0",
                ready: true,
            },
            "t0",
        );
        assert_eq!(running["status"]["phase"], "Running");
        assert_eq!(running["status"]["conditions"][3]["status"], "True");
        assert_eq!(running["status"]["podIP"], "10.128.0.2");
    }
}
