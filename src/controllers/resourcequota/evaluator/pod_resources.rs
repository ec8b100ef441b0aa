//! A pod's resource requests and limits (component-helpers `resource.PodRequests` and
//! `PodLimits`, with in-place resize and pod-level resources) and its QoS class (`qos.go`):
//! what the pod evaluator charges and its BestEffort scopes look at.

use std::collections::BTreeMap;

use super::QuotaGates;
use crate::controllers::resourcequota::names::{CPU, HUGEPAGES_PREFIX, MEMORY};
use crate::controllers::resourcequota::usage::{
    Place, ResourceList, add_into, add_quantity, max_into, parse_list,
};
use crate::k8s::quantity::Quantity;
use crate::k8s::view::{Container, ContainerStatus, Pod, PodStatus, ResourceRequirements};

struct ParsedContainer<'p> {
    name: &'p str,
    restartable: bool,
    requests: Option<ResourceList>,
    limits: Option<ResourceList>,
}

struct ParsedStatus<'p> {
    name: &'p str,
    /// `status.resources.requests`/`.limits`; `None` also when `resources` is absent.
    requests: Option<ResourceList>,
    limits: Option<ResourceList>,
    allocated: Option<ResourceList>,
}

/// The `requests` and `limits` of `resources`, parsed; `at` names them in problems.
fn parse_requirements(
    resources: Option<&ResourceRequirements>,
    at: &Place<'_>,
    problems: &mut Vec<String>,
) -> (Option<ResourceList>, Option<ResourceList>) {
    (
        parse_list(
            resources.and_then(|r| r.requests.as_ref()),
            &at.field("requests"),
            problems,
        ),
        parse_list(
            resources.and_then(|r| r.limits.as_ref()),
            &at.field("limits"),
            problems,
        ),
    )
}

impl<'p> ParsedContainer<'p> {
    fn parse(c: &'p Container, at: &Place<'_>, problems: &mut Vec<String>) -> Self {
        let (requests, limits) =
            parse_requirements(c.resources.as_ref(), &at.field("resources"), problems);
        Self {
            name: &c.name,
            restartable: c.restart_policy.as_deref() == Some("Always"),
            requests,
            limits,
        }
    }
}

impl<'p> ParsedStatus<'p> {
    fn parse(cs: &'p ContainerStatus, at: &Place<'_>, problems: &mut Vec<String>) -> Self {
        let (requests, limits) =
            parse_requirements(cs.resources.as_ref(), &at.field("resources"), problems);
        Self {
            name: &cs.name,
            requests,
            limits,
            allocated: parse_list(
                cs.allocated_resources.as_ref(),
                &at.field("allocatedResources"),
                problems,
            ),
        }
    }
}

/// Each entry of one of the pod's lists, parsed; `at` names the list in problems.
fn parse_each<'p, T, P>(
    list: Option<&'p [T]>,
    at: &Place<'_>,
    problems: &mut Vec<String>,
    parse: fn(&'p T, &Place<'_>, &mut Vec<String>) -> P,
) -> Vec<P> {
    list.unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, item)| parse(item, &at.index(i), problems))
        .collect()
}

/// Whether the pod's resize is pending as infeasible (its `PodResizePending` condition).
pub(super) fn resize_infeasible(status: &PodStatus) -> bool {
    status
        .conditions
        .as_ref()
        .and_then(|cs| cs.iter().find(|c| &*c.type_ == "PodResizePending"))
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
}

/// The pod's resource lists, parsed once.
pub(super) struct ParsedPod<'p> {
    containers: Vec<ParsedContainer<'p>>,
    init_containers: Vec<ParsedContainer<'p>>,
    /// Container statuses, then init container statuses: `findContainerStatus` order.
    statuses: Vec<ParsedStatus<'p>>,
    /// Whether `spec.resources` is set at all (the QoS computation looks at that).
    has_pod_resources: bool,
    pod_requests: Option<ResourceList>,
    pod_limits: Option<ResourceList>,
    overhead: Option<ResourceList>,
    resize_infeasible: bool,
}

/// Where `aggregateContainerResourcesByFn` takes each container's list from.
#[derive(Clone, Copy)]
enum Source {
    SpecRequests,
    AllocatedRequests,
    ActuatedRequests,
    SpecLimits,
    ActuatedLimits,
}

impl<'p> ParsedPod<'p> {
    /// Without PodLevelResources `spec.resources` is not read: neither requests, limits nor
    /// QoS see it, as upstream's `SkipPodLevelResources` and `ComputePodQOS` then.
    pub(super) fn new(pod: &'p Pod, gates: QuotaGates, problems: &mut Vec<String>) -> Self {
        let pod_place = Place::object(pod, "pod");
        let spec = pod.spec.as_ref();
        let status = pod.status.as_ref();

        let [containers, init_containers] = [
            (spec.map(|s| &*s.containers), "spec.containers"),
            (
                spec.and_then(|s| s.init_containers.as_deref()),
                "spec.initContainers",
            ),
        ]
        .map(|(list, part)| {
            parse_each(
                list,
                &pod_place.field(part),
                problems,
                ParsedContainer::parse,
            )
        });
        // Container statuses, then init container statuses: `findContainerStatus` order.
        let statuses = [
            (
                status.and_then(|s| s.container_statuses.as_deref()),
                "status.containerStatuses",
            ),
            (
                status.and_then(|s| s.init_container_statuses.as_deref()),
                "status.initContainerStatuses",
            ),
        ]
        .into_iter()
        .flat_map(|(list, part)| {
            parse_each(list, &pod_place.field(part), problems, ParsedStatus::parse)
        })
        .collect();
        let pod_resources = spec
            .and_then(|s| s.resources.as_deref())
            .filter(|_| gates.pod_level_resources);
        let (pod_requests, pod_limits) =
            parse_requirements(pod_resources, &pod_place.field("spec.resources"), problems);
        let resize_infeasible = status.is_some_and(resize_infeasible);
        Self {
            containers,
            init_containers,
            statuses,
            has_pod_resources: pod_resources.is_some(),
            pod_requests,
            pod_limits,
            overhead: parse_list(
                spec.and_then(|s| s.overhead.as_ref()),
                &pod_place.field("spec.overhead"),
                problems,
            ),
            resize_infeasible,
        }
    }

    fn find_status(&self, name: &str) -> Option<&ParsedStatus<'p>> {
        self.statuses.iter().find(|s| s.name == name)
    }

    /// `containerSpecRequests` / `containerAllocatedRequests` / ... for one container.
    fn pick<'a>(
        &'a self,
        source: Source,
        container: &'a ParsedContainer<'p>,
    ) -> Option<&'a ResourceList> {
        let status = self.find_status(container.name);
        let allocated = status.and_then(|s| s.allocated.as_ref());
        let infeasible = self.resize_infeasible;
        match source {
            Source::SpecRequests => container.requests.as_ref(),
            Source::SpecLimits => container.limits.as_ref(),
            Source::AllocatedRequests => match allocated {
                Some(a) => Some(a),
                None if infeasible => None,
                None => container.requests.as_ref(),
            },
            Source::ActuatedRequests => match (status.and_then(|s| s.requests.as_ref()), allocated)
            {
                (Some(actuated), _) => Some(actuated),
                (None, Some(a)) => Some(a),
                (None, None) if infeasible => None,
                (None, None) => container.requests.as_ref(),
            },
            Source::ActuatedLimits => match status.and_then(|s| s.limits.as_ref()) {
                Some(actuated) => Some(actuated),
                None if infeasible => None,
                None => container.limits.as_ref(),
            },
        }
    }

    /// `aggregateContainerResourcesByFn`: sum of regular and restartable init
    /// containers, against the largest "init container plus sidecars before it".
    fn aggregate(&self, source: Source, problems: &mut Vec<String>) -> ResourceList {
        let mut result = ResourceList::new();
        for container in &self.containers {
            if let Some(list) = self.pick(source, container) {
                add_into(&mut result, list, problems);
            }
        }
        let mut sidecars = ResourceList::new();
        let mut init_max = ResourceList::new();
        for container in &self.init_containers {
            let list = self.pick(source, container);
            if container.restartable {
                if let Some(list) = list {
                    add_into(&mut result, list, problems);
                    add_into(&mut sidecars, list, problems);
                }
                max_into(&mut init_max, &sidecars);
            } else {
                let mut combined = ResourceList::new();
                if let Some(list) = list {
                    add_into(&mut combined, list, problems);
                }
                add_into(&mut combined, &sidecars, problems);
                max_into(&mut init_max, &combined);
            }
        }
        max_into(&mut result, &init_max);
        result
    }

    /// `IsPodLevelRequestsSet`.
    fn pod_level_requests_set(&self) -> bool {
        self.pod_requests
            .as_ref()
            .is_some_and(|r| r.keys().any(|k| is_supported_pod_level_resource(k)))
    }

    /// `IsPodLevelResourcesSet`.
    fn pod_level_resources_set(&self) -> bool {
        [&self.pod_requests, &self.pod_limits]
            .into_iter()
            .flatten()
            .any(|l| l.keys().any(|k| is_supported_pod_level_resource(k)))
    }

    /// Whether every source picks each container's spec (see [`ParsedPod::pick`]): no resize
    /// is infeasible and no status holds the resources `unset` asks about, as before any
    /// resize. The status sums then equal the spec's, and the larger of equal sums is the
    /// first (ties keep the first's format), so the spec's sum alone is the answer.
    fn spec_alone(&self, unset: impl Fn(&ParsedStatus<'p>) -> bool) -> bool {
        !self.resize_infeasible && self.statuses.iter().all(unset)
    }

    /// `resourcehelper.PodRequests` with UseStatusResources (InPlacePodVerticalScaling,
    /// GA) and pod-level resources (PodLevelResources, beta on); the alpha
    /// InPlacePodLevelResourcesVerticalScaling and DRA node-allocatable options are off.
    pub(super) fn requests(&self, problems: &mut Vec<String>) -> ResourceList {
        let spec = self.aggregate(Source::SpecRequests, problems);
        let mut requests = if self.spec_alone(|s| s.allocated.is_none() && s.requests.is_none()) {
            spec
        } else {
            let allocated = self.aggregate(Source::AllocatedRequests, problems);
            let actuated = self.aggregate(Source::ActuatedRequests, problems);
            if self.resize_infeasible {
                max_of(actuated, &[&allocated])
            } else {
                max_of(spec, &[&actuated, &allocated])
            }
        };
        if self.pod_level_requests_set() {
            for (name, quantity) in self.pod_requests.iter().flatten() {
                if is_supported_pod_level_resource(name) {
                    requests.insert(name.clone(), quantity.clone());
                }
            }
        }
        if let Some(overhead) = &self.overhead {
            add_into(&mut requests, overhead, problems);
        }
        requests
    }

    /// `resourcehelper.PodLimits` with the same options as [`ParsedPod::requests`].
    pub(super) fn limits(&self, problems: &mut Vec<String>) -> ResourceList {
        let mut limits = if self.spec_alone(|s| s.limits.is_none()) {
            self.aggregate(Source::SpecLimits, problems)
        } else {
            let actuated = self.aggregate(Source::ActuatedLimits, problems);
            if self.resize_infeasible {
                actuated
            } else {
                let spec = self.aggregate(Source::SpecLimits, problems);
                max_of(spec, &[&actuated])
            }
        };
        if self.pod_level_resources_set() {
            for (name, quantity) in self.pod_limits.iter().flatten() {
                if is_supported_pod_level_resource(name) {
                    limits.insert(name.clone(), quantity.clone());
                }
            }
        }
        // Overhead only raises limits that are set and non-zero.
        for (name, quantity) in self.overhead.iter().flatten() {
            if let Some(value) = limits.get(name).filter(|v| !v.is_zero()) {
                let sum = add_quantity(value, quantity, name, problems);
                limits.insert(name.clone(), sum);
            }
        }
        limits
    }

    /// `qos.ComputePodQOS` (with PodLevelResources on).
    fn compute_qos(&self) -> &'static str {
        if self.has_pod_resources {
            return resource_qos(self.pod_requests.as_ref(), self.pod_limits.as_ref());
        }
        let mut pod_qos: Option<&'static str> = None;
        for c in self.init_containers.iter().chain(&self.containers) {
            let qos = resource_qos(c.requests.as_ref(), c.limits.as_ref());
            match pod_qos {
                _ if qos == QOS_BURSTABLE => return QOS_BURSTABLE,
                None => pod_qos = Some(qos),
                Some(existing) if existing != qos => return QOS_BURSTABLE,
                Some(_) => {}
            }
        }
        pod_qos.unwrap_or(QOS_BEST_EFFORT)
    }
}

/// component-helpers `max(a, b...)`: a copy of `a`, raised by each of `others`.
fn max_of(a: ResourceList, others: &[&ResourceList]) -> ResourceList {
    let mut result = a;
    for other in others {
        max_into(&mut result, other);
    }
    result
}

/// `IsSupportedPodLevelResource`: cpu, memory and hugepages.
fn is_supported_pod_level_resource(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with(HUGEPAGES_PREFIX)
}

pub(super) const QOS_BEST_EFFORT: &str = "BestEffort";
const QOS_BURSTABLE: &str = "Burstable";
const QOS_GUARANTEED: &str = "Guaranteed";

/// qos.go `resourceQOS` for one set of requirements.
fn resource_qos(requests: Option<&ResourceList>, limits: Option<&ResourceList>) -> &'static str {
    if requests.is_none_or(BTreeMap::is_empty) && limits.is_none_or(BTreeMap::is_empty) {
        return QOS_BEST_EFFORT;
    }
    let zero = Quantity::zero();
    let mut qos: Option<&'static str> = None;
    for name in [CPU, MEMORY] {
        let request = requests.and_then(|r| r.get(name)).unwrap_or(&zero);
        let limit = limits.and_then(|l| l.get(name)).unwrap_or(&zero);
        if request != limit {
            return QOS_BURSTABLE;
        }
        let best_effort = request.is_zero() && limit.is_zero();
        match qos {
            None => {
                qos = Some(if best_effort {
                    QOS_BEST_EFFORT
                } else {
                    QOS_GUARANTEED
                })
            }
            Some(existing) if best_effort != (existing == QOS_BEST_EFFORT) => {
                return QOS_BURSTABLE;
            }
            Some(_) => {}
        }
    }
    qos.unwrap_or(QOS_BEST_EFFORT)
}

/// `qos.GetPodQOS`: `status.qosClass` when set, computed otherwise.
pub fn pod_qos_class(pod: &Pod, gates: QuotaGates) -> String {
    if let Some(class) = pod
        .status
        .as_ref()
        .and_then(|s| s.qos_class.as_deref())
        .filter(|c| !c.is_empty())
    {
        return class.to_string();
    }
    // Parse problems are reported by pod_usage; the QoS answer just skips bad values.
    let mut ignored = Vec::new();
    ParsedPod::new(pod, gates, &mut ignored)
        .compute_qos()
        .to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::resourcequota::testing::{container, from, pod};

    #[test]
    fn pod_qos_prefers_status() {
        let guaranteed = pod(
            json!({"containers": [container("", json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1", "memory": "1Gi"}))]}),
        );
        assert_eq!(
            pod_qos_class(&guaranteed, QuotaGates::default()),
            "Guaranteed"
        );
        let mut labelled = guaranteed.clone();
        labelled.status = Some(from(json!({"qosClass": "BestEffort"})));
        assert_eq!(
            pod_qos_class(&labelled, QuotaGates::default()),
            "BestEffort"
        );
        let burstable =
            pod(json!({"containers": [container("", json!({"cpu": "1"}), json!(null))]}));
        assert_eq!(
            pod_qos_class(&burstable, QuotaGates::default()),
            "Burstable"
        );
        let pod_level = pod(
            json!({"resources": {}, "containers": [container("", json!({"cpu": "1"}), json!(null))]}),
        );
        assert_eq!(
            pod_qos_class(&pod_level, QuotaGates::default()),
            "BestEffort"
        );
    }
}
