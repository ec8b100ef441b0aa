//! The built-in scheduler's choice, for clusters without kube-scheduler: the filters a drain
//! and a quota need (requests against allocatable, nodeSelector, cordons, taints) and the
//! least-allocated node among those that pass.

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use kcm::k8s::quantity::Quantity;

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
}

fn quantity(
    map: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
    key: &str,
) -> Option<Quantity> {
    Quantity::try_from(map?.get(key)?).ok()
}

fn container_requests(container: &k8s_openapi::api::core::v1::Container) -> Requests {
    let requests = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref());
    Requests {
        milli_cpu: quantity(requests, "cpu").map_or(0, |q| q.milli_value()),
        memory: quantity(requests, "memory").map_or(0, |q| q.value_ceil()),
    }
}

/// What the pod asks of a node, as the scheduler sums it: its containers' requests, or its
/// largest init container's when that is more, plus its overhead.
pub(crate) fn pod_requests(pod: &Pod) -> Requests {
    let Some(spec) = pod.spec.as_ref() else {
        return Requests::default();
    };
    let containers = spec
        .containers
        .iter()
        .map(container_requests)
        .fold(Requests::default(), Requests::add);
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(container_requests)
        .fold(Requests::default(), Requests::max);
    let overhead = spec.overhead.as_ref();
    let overhead = Requests {
        milli_cpu: quantity(overhead, "cpu").map_or(0, |q| q.milli_value()),
        memory: quantity(overhead, "memory").map_or(0, |q| q.value_ceil()),
    };
    containers.max(init).add(overhead)
}

fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    match toleration.operator.as_deref() {
        Some("Exists") => key.is_empty() || key == taint.key,
        _ => {
            key == taint.key
                && toleration.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default()
        }
    }
}

/// Whether the node takes the pod apart from resources: not cordoned, its labels match the
/// pod's nodeSelector, and the pod tolerates its NoSchedule and NoExecute taints.
pub(crate) fn admits(node: &Node, pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    let node_spec = node.spec.as_ref();
    if node_spec.and_then(|s| s.unschedulable).unwrap_or(false) {
        return false;
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let selected = spec
        .and_then(|s| s.node_selector.as_ref())
        .is_none_or(|selector| selector.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let tolerations = spec
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let tolerated = node_spec
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)));
    selected && tolerated
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
        Room {
            allocatable: Requests {
                milli_cpu: quantity(allocatable, "cpu").map_or(0, |q| q.milli_value()),
                memory: quantity(allocatable, "memory").map_or(0, |q| q.value_ceil()),
            },
            max_pods: quantity(allocatable, "pods").map_or(0, |q| q.value_ceil()),
            used: Requests::default(),
            pods: 0,
        }
    }

    pub fn take(&mut self, requests: Requests) {
        self.used = self.used.add(requests);
        self.pods += 1;
    }

    /// The share of CPU and memory in use once `requests` is placed; None when it does not fit.
    pub fn score_with(&self, requests: Requests) -> Option<f64> {
        let used = self.used.add(requests);
        let fits = self.pods < self.max_pods
            && used.milli_cpu <= self.allocatable.milli_cpu
            && used.memory <= self.allocatable.memory;
        let share = |used: i128, of: i128| if of > 0 { used as f64 / of as f64 } else { 0.0 };
        fits.then(|| {
            share(used.milli_cpu, self.allocatable.milli_cpu)
                + share(used.memory, self.allocatable.memory)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({ "metadata": { "name": "p" }, "spec": spec })).unwrap()
    }

    fn node(spec: serde_json::Value) -> Node {
        serde_json::from_value(
            json!({ "metadata": { "name": "n", "labels": { "disk": "ssd" } },
            "spec": spec,
            "status": { "allocatable": { "cpu": "1", "memory": "1Gi", "pods": "2" } } }),
        )
        .unwrap()
    }

    #[test]
    fn requests_take_the_larger_of_containers_and_init_containers() {
        let p = pod(json!({
            "containers": [
                { "name": "a", "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } } },
                { "name": "b", "resources": { "requests": { "cpu": "200m" } } } ],
            "initContainers": [
                { "name": "i", "resources": { "requests": { "cpu": "500m", "memory": "1Mi" } } } ] }));
        assert_eq!(
            pod_requests(&p),
            Requests {
                milli_cpu: 500,
                memory: 64 << 20
            }
        );
    }

    #[test]
    fn cordons_selectors_and_taints_filter() {
        let plain = pod(json!({ "containers": [{ "name": "a" }] }));
        assert!(admits(&node(json!({})), &plain));
        assert!(!admits(&node(json!({ "unschedulable": true })), &plain));
        let hdd =
            pod(json!({ "containers": [{ "name": "a" }], "nodeSelector": { "disk": "hdd" } }));
        assert!(!admits(&node(json!({})), &hdd));
        let tainted =
            node(json!({ "taints": [{ "key": "gpu", "value": "yes", "effect": "NoSchedule" }] }));
        assert!(!admits(&tainted, &plain));
        let tolerant = pod(json!({ "containers": [{ "name": "a" }],
            "tolerations": [{ "key": "gpu", "operator": "Equal", "value": "yes" }] }));
        assert!(admits(&tainted, &tolerant));
        let prefer = node(json!({ "taints": [{ "key": "x", "effect": "PreferNoSchedule" }] }));
        assert!(admits(&prefer, &plain), "a preference is not a filter");
    }

    #[test]
    fn room_refuses_what_does_not_fit_and_scores_the_rest() {
        let mut room = Room::of(&node(json!({})));
        let half = Requests {
            milli_cpu: 500,
            memory: 512 << 20,
        };
        assert_eq!(room.score_with(half), Some(1.0));
        room.take(half);
        assert_eq!(
            room.score_with(Requests {
                milli_cpu: 600,
                memory: 0
            }),
            None
        );
        room.take(Requests::default());
        assert_eq!(
            room.score_with(Requests::default()),
            None,
            "at its pod limit"
        );
    }
}
