//! What a kubelet decides about one pod, and the status it writes: pure functions of the pod,
//! what was written for it, and the time.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};

use crate::{EXIT_CODE_ANNOTATION, READY_ANNOTATION, RUN_FOR_ANNOTATION, timestamp};

/// The exit code of a container that SIGTERM ended (128 + 15).
const SIGTERM_EXIT: i32 = 143;

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

fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// The containers whose readiness makes ContainersReady: the regular ones, then the sidecars
/// (restartable init containers), as the kubelet counts them.
fn probed_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    let spec = pod.spec.as_ref();
    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    let sidecars = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|c| is_sidecar(c));
    containers.iter().chain(sidecars)
}

/// How long after the pod's start the container passes its readiness probe: its
/// `initialDelaySeconds` (at once without a probe); None when the probe cannot succeed, an
/// exec probe whose command is `false`.
fn ready_after(container: &Container) -> Option<Duration> {
    let Some(probe) = container.readiness_probe.as_ref() else {
        return Some(Duration::ZERO);
    };
    let command = probe.exec.as_ref().and_then(|e| e.command.as_ref());
    if command
        .and_then(|c| c.first())
        .is_some_and(|c| c == "false" || c == "/bin/false")
    {
        return None;
    }
    let delay = probe.initial_delay_seconds.unwrap_or(0).max(0);
    Some(Duration::from_secs(delay as u64))
}

/// Which conditions a readiness gate waits for that are not True, in the kubelet's words.
fn gates_waiting(pod: &Pod) -> Vec<String> {
    let gates = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_deref())
        .unwrap_or_default();
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    gates
        .iter()
        .filter_map(|gate| {
            let kind = &gate.condition_type;
            match conditions.iter().find(|c| &c.type_ == kind) {
                None => Some(format!(
                    "corresponding condition of pod readiness gate {kind:?} does not exist."
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate {kind:?} is not \"True\", but {}",
                    c.status
                )),
                Some(_) => None,
            }
        })
        .collect()
}

/// The readiness a running pod has: each probed container's (in [`probed_containers`]
/// order), and the pod's (every container ready and every gate's condition True).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Readiness {
    pub containers: Vec<bool>,
    pub pod: bool,
}

/// The pod's readiness `running_for` after its start, and how long until a container's probe
/// delay ends (None: no change is due).
pub(crate) fn readiness(pod: &Pod, running_for: Duration) -> (Readiness, Option<Duration>) {
    let told_not_ready = annotation(pod, READY_ANNOTATION) == Some("false");
    let mut next = None::<Duration>;
    let containers: Vec<bool> = probed_containers(pod)
        .map(|c| match ready_after(c) {
            Some(after) if after > running_for => {
                let wait = after - running_for;
                next = Some(next.map_or(wait, |n| n.min(wait)));
                false
            }
            Some(_) => !told_not_ready,
            None => false,
        })
        .collect();
    let pod_ready = containers.iter().all(|r| *r) && gates_waiting(pod).is_empty();
    let readiness = Readiness {
        containers,
        pod: pod_ready,
    };
    (readiness, next)
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

/// The exit code of the containers of a deleted pod: 0 for a server (`restartPolicy` Always)
/// that shuts down cleanly on SIGTERM, SIGTERM's for a batch step cut short.
fn stopped_exit_code(pod: &Pod) -> i32 {
    match pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) {
        Some("Never" | "OnFailure") => SIGTERM_EXIT,
        _ => 0,
    }
}

/// Whether the pod reached a terminal phase.
pub(crate) fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// What was last written for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Written {
    Running(Readiness),
    Exited,
    /// Deleted with grace 0: nothing is left to do.
    Removed,
}

/// The kubelet's memory of one pod.
#[derive(Debug, Clone)]
pub(crate) struct Life {
    pub started: Timestamp,
    pub written: Option<Written>,
    /// When the kubelet first saw the pod deleted.
    pub deleting_since: Option<Timestamp>,
}

/// A write the kubelet makes for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Running with this readiness.
    Run(Readiness),
    /// Its containers exited with this code.
    Exit(i32),
    /// Deleted with grace 0 once its containers are gone.
    Remove,
}

fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(since)).unwrap_or_default()
}

/// The write the pod needs `now` (if any), and how long until it should be looked at again
/// (if ever, without a change to it).
pub(crate) fn plan(
    pod: &Pod,
    life: &Life,
    now: Timestamp,
    shutdown: Duration,
) -> (Option<Step>, Option<Duration>) {
    if life.written == Some(Written::Removed) {
        return (None, None);
    }
    let exited = life.written == Some(Written::Exited) || is_terminal(pod);
    if pod.metadata.deletion_timestamp.is_some() {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        let delay = Duration::from_secs(grace.max(0) as u64).min(shutdown);
        let waited = elapsed(life.deleting_since.unwrap_or(now), now);
        if waited < delay {
            return (None, Some(delay - waited));
        }
        let step = if exited {
            Step::Remove
        } else {
            Step::Exit(stopped_exit_code(pod))
        };
        return (Some(step), None);
    }
    if exited {
        return (None, None);
    }
    let running_for = elapsed(life.started, now);
    let exit = run_for(pod);
    if let Some((run, code)) = exit
        && running_for >= run
    {
        return (Some(Step::Exit(code)), None);
    }
    let (readiness, change) = readiness(pod, running_for);
    let exit_in = exit.map(|(run, _)| run - running_for);
    let wake = [change, exit_in].into_iter().flatten().min();
    let step = match &life.written {
        Some(Written::Running(written)) if *written == readiness => None,
        _ => Some(Step::Run(readiness)),
    };
    (step, wake)
}

/// A container ID, stable for one pod's container.
fn container_id(uid: &str, name: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (uid, name).hash(&mut hasher);
    format!("containerd://{:016x}{:048x}", hasher.finish(), 0)
}

/// Where a pod runs.
pub(crate) struct Placement<'a> {
    pub host_ip: &'a str,
    /// None when the node had no address free (only a pod stopped before it ran).
    pub pod_ip: Option<&'a str>,
    pub started: Timestamp,
}

/// Where a pod's containers are.
pub(crate) enum Containers<'a> {
    Running(&'a Readiness),
    Exited(i32),
}

/// One condition as the kubelet writes it: its transition time kept from `pod`'s own while
/// its status holds.
fn condition(
    pod: &Pod,
    kind: &str,
    status: bool,
    reason: Option<(&str, String)>,
    now: &str,
) -> Value {
    let status = if status { "True" } else { "False" };
    let since = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == kind && c.status == status))
        .and_then(|c| c.last_transition_time.as_ref())
        .map_or_else(|| now.to_string(), |t| timestamp(t.0));
    // The patch merges into the condition there: null clears an earlier reason and message.
    let (reason, message) = match reason {
        Some((reason, message)) => (
            json!(reason),
            json!((!message.is_empty()).then_some(message)),
        ),
        None => (Value::Null, Value::Null),
    };
    json!({ "type": kind, "status": status, "reason": reason, "message": message,
            "lastProbeTime": null, "lastTransitionTime": since,
            "observedGeneration": pod.metadata.generation.unwrap_or(0) })
}

/// The `pods/status` patch for `pod` at `placement`: phase, IPs, conditions and container
/// statuses.
pub(crate) fn status_patch(
    pod: &Pod,
    placement: &Placement<'_>,
    containers: Containers<'_>,
    now: Timestamp,
) -> Value {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let (now, started) = (timestamp(now), timestamp(placement.started));
    let spec = pod.spec.as_ref();
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default();
    let main = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    let terminated = |code: i32| {
        let reason = if code == 0 { "Completed" } else { "Error" };
        json!({ "terminated": { "exitCode": code, "reason": reason,
                                "startedAt": started, "finishedAt": now } })
    };
    let running = json!({ "running": { "startedAt": started } });
    let status_of = |c: &Container, ready: bool, state: Value| {
        let image = c.image.clone().unwrap_or_default();
        let id = container_id(uid, &c.name);
        let mut state = state;
        if let Some(t) = state.get_mut("terminated") {
            t["containerID"] = json!(id);
        }
        json!({
            "name": c.name,
            "image": image,
            "imageID": format!("{image}@sha256:{:064x}", 0),
            "containerID": id,
            "ready": ready,
            "started": state.get("running").is_some(),
            "restartCount": 0,
            "state": state,
        })
    };
    // Readiness in probed_containers order: the regular containers, then the sidecars.
    let (phase, ready_of, main_state, sidecar_state) = match containers {
        Containers::Running(readiness) => (
            "Running",
            readiness.clone(),
            running.clone(),
            running.clone(),
        ),
        Containers::Exited(code) => {
            let phase = if code == 0 { "Succeeded" } else { "Failed" };
            let none = Readiness {
                containers: vec![false; probed_containers(pod).count()],
                pod: false,
            };
            (phase, none, terminated(code), terminated(0))
        }
    };
    let mut flags = ready_of.containers.iter().copied();
    let container_statuses: Vec<Value> = main
        .iter()
        .map(|c| status_of(c, flags.next().unwrap_or(false), main_state.clone()))
        .collect();
    let init_statuses: Vec<Value> = init
        .iter()
        .map(|c| {
            if is_sidecar(c) {
                status_of(c, flags.next().unwrap_or(false), sidecar_state.clone())
            } else {
                // Regular init containers ran to completion before the others started.
                let mut done = terminated(0);
                done["terminated"]["finishedAt"] = json!(started);
                status_of(c, false, done)
            }
        })
        .collect();
    let is_running = phase == "Running";
    let terminal_reason = match phase {
        "Succeeded" => Some(("PodCompleted", String::new())),
        "Failed" => Some(("PodFailed", String::new())),
        _ => None,
    };
    let all_ready = ready_of.containers.iter().all(|r| *r);
    let containers_ready_reason = terminal_reason.clone().or_else(|| {
        let unready: Vec<&str> = probed_containers(pod)
            .zip(&ready_of.containers)
            .filter(|(_, ready)| !**ready)
            .map(|(c, _)| c.name.as_str())
            .collect();
        (!unready.is_empty()).then(|| {
            let message = format!("containers with unready status: [{}]", unready.join(" "));
            ("ContainersNotReady", message)
        })
    });
    let ready_reason = if all_ready && is_running {
        let gates = gates_waiting(pod);
        (!gates.is_empty()).then(|| ("ReadinessGatesNotReady", gates.join(", ")))
    } else {
        containers_ready_reason.clone()
    };
    let all_ready = all_ready && is_running;
    let mut patch = json!({ "status": {
        "phase": phase,
        "observedGeneration": pod.metadata.generation.unwrap_or(0),
        "hostIP": placement.host_ip,
        "hostIPs": [{ "ip": placement.host_ip }],
        "startTime": started,
        "conditions": [
            condition(pod, "PodReadyToStartContainers", is_running, None, &now),
            condition(pod, "Initialized", true, None, &now),
            condition(pod, "ContainersReady", all_ready, containers_ready_reason, &now),
            condition(pod, "Ready", ready_of.pod && is_running, ready_reason, &now),
            condition(pod, "PodScheduled", true, None, &now),
        ],
        "containerStatuses": container_statuses,
        "initContainerStatuses": init_statuses,
    } });
    if let Some(ip) = placement.pod_ip {
        patch["status"]["podIP"] = json!(ip);
        patch["status"]["podIPs"] = json!([{ "ip": ip }]);
    }
    patch
}

const UNSCHEDULABLE: &str = "Unschedulable";

/// Whether the pod already says it fits nowhere, for the reason `message`.
pub(crate) fn is_unschedulable_with(pod: &Pod, message: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .is_some_and(|c| {
            c.status == "False"
                && c.reason.as_deref() == Some(UNSCHEDULABLE)
                && c.message.as_deref() == Some(message)
        })
}

/// The `pods/status` patch the scheduler writes for a pod that fits nowhere.
pub(crate) fn unschedulable_patch(pod: &Pod, message: &str, now: Timestamp) -> Value {
    let reason = Some((UNSCHEDULABLE, message.to_string()));
    let scheduled = condition(pod, "PodScheduled", false, reason, &timestamp(now));
    json!({ "status": { "conditions": [scheduled] } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(value: Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn life() -> Life {
        Life {
            started: at(0),
            written: None,
            deleting_since: None,
        }
    }

    const SHUTDOWN: Duration = Duration::from_secs(1);

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
    fn containers_turn_ready_after_their_probe_delay_and_never_for_a_failing_probe() {
        let p = pod(json!({ "metadata": { "name": "p" }, "spec": {
            "containers": [
                { "name": "a", "readinessProbe": { "initialDelaySeconds": 2,
                                                   "httpGet": { "port": 80 } } },
                { "name": "b" } ],
            "initContainers": [
                { "name": "side", "restartPolicy": "Always",
                  "readinessProbe": { "initialDelaySeconds": 5, "tcpSocket": { "port": 80 } } },
                { "name": "setup" } ] } }));
        let (early, next) = readiness(&p, Duration::from_secs(1));
        assert_eq!(early.containers, [false, true, false]);
        assert!(!early.pod);
        assert_eq!(next, Some(Duration::from_secs(1)), "a's delay ends first");
        let (later, next) = readiness(&p, Duration::from_secs(5));
        assert_eq!(later.containers, [true, true, true]);
        assert!(later.pod);
        assert_eq!(next, None);

        let failing = pod(
            json!({ "metadata": { "name": "p" }, "spec": { "containers": [
            { "name": "a", "readinessProbe": { "exec": { "command": ["false"] } } } ] } }),
        );
        let (never, next) = readiness(&failing, Duration::from_secs(3600));
        assert!(!never.pod);
        assert_eq!(next, None, "nothing to wait for");

        let told = pod(json!({ "metadata": { "name": "p",
            "annotations": { READY_ANNOTATION: "false" } },
            "spec": { "containers": [{ "name": "a" }] } }));
        assert!(!readiness(&told, Duration::from_secs(3600)).0.pod);
    }

    #[test]
    fn readiness_gates_need_their_conditions_true() {
        let gated = |status: &str| {
            pod(json!({ "metadata": { "name": "p" },
                "spec": { "containers": [{ "name": "a" }],
                          "readinessGates": [{ "conditionType": "example.com/lb" }] },
                "status": { "conditions": [{ "type": "example.com/lb", "status": status }] } }))
        };
        let (open, _) = readiness(&gated("True"), Duration::ZERO);
        assert!(open.pod);
        let (shut, _) = readiness(&gated("False"), Duration::ZERO);
        assert_eq!(shut.containers, [true]);
        assert!(!shut.pod);
        let patch = status_patch(
            &gated("False"),
            &Placement {
                host_ip: "h",
                pod_ip: Some("p"),
                started: at(0),
            },
            Containers::Running(&shut),
            at(1),
        );
        let conditions = &patch["status"]["conditions"];
        assert_eq!(conditions[2]["status"], "True", "ContainersReady");
        assert_eq!(conditions[3]["status"], "False", "Ready");
        assert_eq!(conditions[3]["reason"], "ReadinessGatesNotReady");
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
    fn a_plan_writes_each_change_once_and_wakes_for_the_next() {
        let p = pod(
            json!({ "metadata": { "name": "p", "annotations": { RUN_FOR_ANNOTATION: "10s" } },
            "spec": { "restartPolicy": "Never", "containers": [
                { "name": "a", "readinessProbe": { "initialDelaySeconds": 3,
                                                   "httpGet": { "port": 80 } } } ] } }),
        );
        let mut life = life();
        let (step, wake) = plan(&p, &life, at(0), SHUTDOWN);
        let unready = Readiness {
            containers: vec![false],
            pod: false,
        };
        assert_eq!(step, Some(Step::Run(unready.clone())));
        assert_eq!(wake, Some(Duration::from_secs(3)));
        life.written = Some(Written::Running(unready));
        assert_eq!(
            plan(&p, &life, at(1), SHUTDOWN),
            (None, Some(Duration::from_secs(2))),
            "written already"
        );
        let (step, wake) = plan(&p, &life, at(3), SHUTDOWN);
        assert!(matches!(step, Some(Step::Run(r)) if r.pod));
        assert_eq!(wake, Some(Duration::from_secs(7)), "then the exit");
        assert_eq!(plan(&p, &life, at(10), SHUTDOWN).0, Some(Step::Exit(0)));
        life.written = Some(Written::Exited);
        assert_eq!(plan(&p, &life, at(11), SHUTDOWN), (None, None));
    }

    #[test]
    fn a_deleted_pod_stops_after_the_shorter_of_its_grace_and_the_shutdown_then_goes() {
        let deleted = |restart: &str, grace: i64| {
            pod(
                json!({ "metadata": { "name": "p", "deletionTimestamp": "2027-01-15T08:00:00Z",
                                      "deletionGracePeriodSeconds": grace },
                "spec": { "restartPolicy": restart, "containers": [{ "name": "a" }] } }),
            )
        };
        let mut life = life();
        life.deleting_since = Some(at(10));
        let server = deleted("Always", 30);
        assert_eq!(
            plan(&server, &life, at(10), SHUTDOWN),
            (None, Some(SHUTDOWN))
        );
        assert_eq!(
            plan(&server, &life, at(11), SHUTDOWN).0,
            Some(Step::Exit(0))
        );
        assert_eq!(
            plan(&deleted("Never", 0), &life, at(10), SHUTDOWN).0,
            Some(Step::Exit(SIGTERM_EXIT)),
            "grace 0 is shorter than the shutdown; a batch step is cut short"
        );
        life.written = Some(Written::Exited);
        assert_eq!(plan(&server, &life, at(11), SHUTDOWN).0, Some(Step::Remove));
        life.written = Some(Written::Removed);
        assert_eq!(plan(&server, &life, at(12), SHUTDOWN), (None, None));
    }

    #[test]
    fn an_exited_pod_is_terminal_with_its_exit_code() {
        let p = pod(
            json!({ "metadata": { "name": "p", "uid": "u", "generation": 2 },
            "spec": { "containers": [{ "name": "a", "image": "busybox" }],
                      "initContainers": [{ "name": "setup", "image": "busybox" }] } }),
        );
        let placement = Placement {
            host_ip: "100.64.0.0",
            pod_ip: Some("10.128.0.2"),
            started: at(0),
        };
        let failed = status_patch(&p, &placement, Containers::Exited(3), at(5));
        let status = &failed["status"];
        assert_eq!(status["phase"], "Failed");
        assert_eq!(
            status["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            3
        );
        assert_eq!(status["conditions"][3]["status"], "False");
        assert_eq!(status["conditions"][3]["reason"], "PodFailed");
        assert_eq!(status["conditions"][3]["observedGeneration"], 2);
        assert_eq!(
            status["initContainerStatuses"][0]["state"]["terminated"]["reason"],
            "Completed"
        );
        let ready = Readiness {
            containers: vec![true],
            pod: true,
        };
        let running = status_patch(&p, &placement, Containers::Running(&ready), at(5));
        let status = &running["status"];
        assert_eq!(status["phase"], "Running");
        assert_eq!(status["conditions"][3]["status"], "True");
        assert_eq!(status["podIP"], "10.128.0.2");
        assert_eq!(status["containerStatuses"][0]["started"], true);
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let p = pod(json!({ "metadata": { "name": "p" },
            "spec": { "containers": [{ "name": "a" }] },
            "status": { "conditions": [
                { "type": "Ready", "status": "True", "lastTransitionTime": "2027-01-15T08:00:00Z" },
                { "type": "ContainersReady", "status": "False",
                  "lastTransitionTime": "2027-01-15T08:00:00Z" } ] } }));
        let ready = Readiness {
            containers: vec![true],
            pod: true,
        };
        let placement = Placement {
            host_ip: "h",
            pod_ip: Some("p"),
            started: at(0),
        };
        let patch = status_patch(&p, &placement, Containers::Running(&ready), at(5));
        let conditions = &patch["status"]["conditions"];
        assert_eq!(conditions[3]["lastTransitionTime"], "2027-01-15T08:00:00Z");
        assert_eq!(conditions[2]["lastTransitionTime"], timestamp(at(5)));
    }
}
