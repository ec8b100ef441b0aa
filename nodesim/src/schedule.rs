//! The built-in scheduler's choice, for clusters without kube-scheduler: the filters a drain
//! and a quota need (requests against allocatable, nodeSelector, cordons, taints, the node's
//! readiness), the least-allocated node among those that pass, and the scheduler's message
//! when none does.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Node, Pod, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use kcm_values::quantity::Quantity;

/// The taint a cordon stands for: a pod tolerating it may go to a cordoned node.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// A pod's requests: CPU in millicores, memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Requests {
    pub milli_cpu: i128,
    pub memory: i128,
}

impl Requests {
    fn add(self, other: Requests) -> Requests {
        Requests {
            milli_cpu: self.milli_cpu + other.milli_cpu,
            memory: self.memory + other.memory,
        }
    }

    fn max(self, other: Requests) -> Requests {
        Requests {
            milli_cpu: self.milli_cpu.max(other.milli_cpu),
            memory: self.memory.max(other.memory),
        }
    }

    fn of(list: Option<&BTreeMap<String, ApiQuantity>>) -> Requests {
        let get = |key: &str| list?.get(key).and_then(|q| Quantity::try_from(q).ok());
        Requests {
            milli_cpu: get("cpu").map_or(0, |q| q.milli_value()),
            memory: get("memory").map_or(0, |q| q.value_ceil()),
        }
    }
}

fn container_requests(container: &Container) -> Requests {
    Requests::of(
        container
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref()),
    )
}

/// What the pod asks of a node, as upstream's `PodRequests` sums it: its containers and
/// sidecars, or while an init container runs that one and the sidecars started before it,
/// whichever is more; pod-level requests in place of the containers' where set; plus its
/// overhead.
pub(crate) fn pod_requests(pod: &Pod) -> Requests {
    let Some(spec) = pod.spec.as_ref() else {
        return Requests::default();
    };
    let mut total = spec
        .containers
        .iter()
        .map(container_requests)
        .fold(Requests::default(), Requests::add);
    let mut sidecars = Requests::default();
    let mut init_peak = Requests::default();
    for init in spec.init_containers.iter().flatten() {
        let requests = container_requests(init);
        if init.restart_policy.as_deref() == Some("Always") {
            sidecars = sidecars.add(requests);
            total = total.add(requests);
            init_peak = init_peak.max(sidecars);
        } else {
            init_peak = init_peak.max(requests.add(sidecars));
        }
    }
    total = total.max(init_peak);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        let set = Requests::of(Some(pod_level));
        if pod_level.contains_key("cpu") {
            total.milli_cpu = set.milli_cpu;
        }
        if pod_level.contains_key("memory") {
            total.memory = set.memory;
        }
    }
    total.add(Requests::of(spec.overhead.as_ref()))
}

/// Whether `toleration` tolerates `taint`, as `Toleration.ToleratesTaint` (without the alpha
/// comparison operators).
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    let key = toleration.key.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect || !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// Whether the node takes the pod apart from resources, or the scheduler's reason why not,
/// in the order of kube-scheduler's filters: Ready (`reports_ready` and its condition), not
/// cordoned (unless the pod tolerates the cordon's taint), the pod tolerating its NoSchedule
/// and NoExecute taints, and its labels matching the pod's nodeSelector.
pub(crate) fn admits(node: &Node, reports_ready: bool, pod: &Pod) -> Result<(), &'static str> {
    let spec = pod.spec.as_ref();
    let tolerations = spec
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let node_spec = node.spec.as_ref();
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if !(reports_ready && ready) {
        return Err("node(s) were not ready");
    }
    let cordon = Taint {
        key: UNSCHEDULABLE_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Taint::default()
    };
    if node_spec.and_then(|s| s.unschedulable).unwrap_or(false) && !tolerated(tolerations, &cordon)
    {
        return Err("node(s) were unschedulable");
    }
    let untolerated = node_spec
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .any(|taint| !tolerated(tolerations, taint));
    if untolerated {
        return Err("node(s) had untolerated taint(s)");
    }
    let labels = node.metadata.labels.as_ref();
    let selected = spec
        .and_then(|s| s.node_selector.as_ref())
        .is_none_or(|selector| {
            selector
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        });
    if !selected {
        return Err("node(s) didn't match Pod's node affinity/selector");
    }
    Ok(())
}

/// A node's room: allocatable and what its pods already request.
pub(crate) struct Room {
    pub allocatable: Requests,
    pub max_pods: i128,
    pub used: Requests,
    pub pods: i128,
}

impl Room {
    pub fn of(node: &Node) -> Room {
        let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        let pods = allocatable
            .and_then(|a| a.get("pods"))
            .and_then(|q| Quantity::try_from(q).ok());
        Room {
            allocatable: Requests::of(allocatable),
            max_pods: pods.map_or(0, |q| q.value_ceil()),
            used: Requests::default(),
            pods: 0,
        }
    }

    pub fn take(&mut self, requests: Requests) {
        self.used = self.used.add(requests);
        self.pods += 1;
    }

    /// The share of CPU and memory in use once `requests` is placed, or the scheduler's
    /// reasons why it does not fit.
    pub fn score_with(&self, requests: Requests) -> Result<f64, Vec<&'static str>> {
        let used = self.used.add(requests);
        let mut short = Vec::new();
        if self.pods >= self.max_pods {
            short.push("Too many pods");
        }
        if requests.milli_cpu > 0 && used.milli_cpu > self.allocatable.milli_cpu {
            short.push("Insufficient cpu");
        }
        if requests.memory > 0 && used.memory > self.allocatable.memory {
            short.push("Insufficient memory");
        }
        if !short.is_empty() {
            return Err(short);
        }
        let share = |used: i128, of: i128| if of > 0 { used as f64 / of as f64 } else { 0.0 };
        Ok(share(used.milli_cpu, self.allocatable.milli_cpu)
            + share(used.memory, self.allocatable.memory))
    }
}

/// Why a pod fits none of the nodes, counted by reason as the scheduler's FitError says it:
/// `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were unschedulable.`
#[derive(Default)]
pub(crate) struct Misfit {
    nodes: usize,
    reasons: BTreeMap<&'static str, usize>,
}

impl Misfit {
    pub fn reject(&mut self, reasons: impl IntoIterator<Item = &'static str>) {
        self.nodes += 1;
        let distinct: BTreeSet<&'static str> = reasons.into_iter().collect();
        for reason in distinct {
            *self.reasons.entry(reason).or_default() += 1;
        }
    }

    pub fn message(&self) -> String {
        let mut counted: Vec<String> = self
            .reasons
            .iter()
            .map(|(reason, n)| format!("{n} {reason}"))
            .collect();
        counted.sort();
        let mut message = format!("0/{} nodes are available", self.nodes);
        if !counted.is_empty() {
            message.push_str(&format!(": {}.", counted.join(", ")));
        }
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({ "metadata": { "name": "p" }, "spec": spec })).unwrap()
    }

    fn node_with(spec: serde_json::Value, ready: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": { "name": "n", "labels": { "disk": "ssd" } },
            "spec": spec,
            "status": {
                "allocatable": { "cpu": "1", "memory": "1Gi", "pods": "2" },
                "conditions": [{ "type": "Ready", "status": ready }],
            },
        }))
        .unwrap()
    }

    fn node(spec: serde_json::Value) -> Node {
        node_with(spec, "True")
    }

    fn admits_ready(node: &Node, pod: &Pod) -> Result<(), &'static str> {
        admits(node, true, pod)
    }

    #[test]
    fn requests_count_sidecars_init_containers_pod_level_requests_and_overhead() {
        let p = pod(json!({
            "containers": [
                { "name": "a", "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } } },
                { "name": "b", "resources": { "requests": { "cpu": "200m" } } } ],
            "initContainers": [
                { "name": "i", "resources": { "requests": { "cpu": "500m", "memory": "1Mi" } } } ] }));
        let cpu_and_memory = |milli_cpu, memory| Requests { milli_cpu, memory };
        assert_eq!(pod_requests(&p), cpu_and_memory(500, 64 << 20));
        let sidecar = pod(json!({
            "containers": [{ "name": "a", "resources": { "requests": { "cpu": "100m" } } }],
            "initContainers": [
                { "name": "side", "restartPolicy": "Always",
                  "resources": { "requests": { "cpu": "300m" } } },
                { "name": "setup", "resources": { "requests": { "cpu": "350m" } } } ],
            "overhead": { "memory": "1Mi" } }));
        // The setup step runs beside the sidecar: 650m beats the 400m of the running pod.
        assert_eq!(pod_requests(&sidecar), cpu_and_memory(650, 1 << 20));
        let pod_level = pod(json!({
            "containers": [{ "name": "a", "resources": { "requests": { "cpu": "100m", "memory": "1Mi" } } }],
            "resources": { "requests": { "cpu": "2" } } }));
        assert_eq!(pod_requests(&pod_level), cpu_and_memory(2000, 1 << 20));
    }

    #[test]
    fn readiness_cordons_selectors_and_taints_filter() {
        let plain = pod(json!({ "containers": [{ "name": "a" }] }));
        assert_eq!(admits_ready(&node(json!({})), &plain), Ok(()));
        assert_eq!(
            admits_ready(&node_with(json!({}), "False"), &plain),
            Err("node(s) were not ready")
        );
        assert_eq!(
            admits(&node(json!({})), false, &plain),
            Err("node(s) were not ready"),
            "its kubelet reports NotReady; the watch may not show it yet"
        );
        let cordoned = node(json!({ "unschedulable": true }));
        assert_eq!(
            admits_ready(&cordoned, &plain),
            Err("node(s) were unschedulable")
        );
        let daemon = pod(json!({ "containers": [{ "name": "a" }], "tolerations": [
            { "key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule" }] }));
        assert_eq!(admits_ready(&cordoned, &daemon), Ok(()));
        let hdd =
            pod(json!({ "containers": [{ "name": "a" }], "nodeSelector": { "disk": "hdd" } }));
        assert!(admits_ready(&node(json!({})), &hdd).is_err());
        let tainted =
            node(json!({ "taints": [{ "key": "gpu", "value": "yes", "effect": "NoSchedule" }] }));
        assert_eq!(
            admits_ready(&tainted, &plain),
            Err("node(s) had untolerated taint(s)")
        );
        let tolerant = pod(json!({ "containers": [{ "name": "a" }],
            "tolerations": [{ "key": "gpu", "operator": "Equal", "value": "yes" }] }));
        assert_eq!(admits_ready(&tainted, &tolerant), Ok(()));
        let other_value = pod(json!({ "containers": [{ "name": "a" }],
            "tolerations": [{ "key": "gpu", "value": "no" }] }));
        assert!(admits_ready(&tainted, &other_value).is_err());
        let prefer = node(json!({ "taints": [{ "key": "x", "effect": "PreferNoSchedule" }] }));
        assert_eq!(
            admits_ready(&prefer, &plain),
            Ok(()),
            "a preference is not a filter"
        );
    }

    #[test]
    fn room_refuses_what_does_not_fit_and_scores_the_rest() {
        let mut room = Room::of(&node(json!({})));
        let half = Requests {
            milli_cpu: 500,
            memory: 512 << 20,
        };
        assert_eq!(room.score_with(half), Ok(1.0));
        room.take(half);
        let more_cpu = Requests {
            milli_cpu: 600,
            memory: 0,
        };
        assert_eq!(room.score_with(more_cpu), Err(vec!["Insufficient cpu"]));
        room.take(Requests::default());
        assert_eq!(
            room.score_with(Requests::default()),
            Err(vec!["Too many pods"])
        );
    }

    #[test]
    fn the_message_counts_nodes_by_reason_in_order() {
        let mut misfit = Misfit::default();
        misfit.reject(["node(s) were unschedulable"]);
        misfit.reject(["Insufficient cpu", "Insufficient memory"]);
        misfit.reject(["Insufficient cpu"]);
        assert_eq!(
            misfit.message(),
            "0/3 nodes are available: 1 Insufficient memory, 1 node(s) were unschedulable, \
             2 Insufficient cpu."
        );
        assert_eq!(Misfit::default().message(), "0/0 nodes are available");
    }
}
