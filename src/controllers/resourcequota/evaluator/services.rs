//! The service evaluator (upstream `services.go`): services, node ports and load
//! balancers. Services match no scope.

use k8s_openapi::api::core::v1::Service;

use super::{Evaluator, EvaluatorInputs};
use crate::controllers::resourcequota::scope::{QuotaScope, unscoped_matches};
use crate::controllers::resourcequota::usage::{ResourceList, Usage, intersection, one};
use crate::k8s::quantity::{Format, Quantity};

/// The object-count name of services.
pub const SERVICE_COUNT: &str = "count/services";
const SERVICES: &str = "services";
const SERVICES_NODE_PORTS: &str = "services.nodeports";
const SERVICES_LOAD_BALANCERS: &str = "services.loadbalancers";

const SERVICE_RESOURCES: [&str; 4] = [
    SERVICE_COUNT,
    SERVICES,
    SERVICES_NODE_PORTS,
    SERVICES_LOAD_BALANCERS,
];

/// upstream `serviceEvaluator`.
#[derive(Default)]
pub struct Services;

impl Evaluator for Services {
    type Object = Service;
    type Context = ();
    const RESOURCE: &'static str = SERVICES;

    fn matching(&self, names: &[String], _: &EvaluatorInputs) -> Vec<String> {
        service_matching(names)
    }

    fn matches(&self, _: &Service, scope: &QuotaScope) -> bool {
        unscoped_matches(scope)
    }

    fn usage(&self, svc: &Service, _: &EvaluatorInputs) -> Usage {
        service_usage(svc)
    }

    /// upstream's DefaultUpdateFilter for services: the quota service type changed.
    fn update_matters(&self, old: &Service, new: &Service, _: &EvaluatorInputs) -> bool {
        quota_service_type(old) != quota_service_type(new)
    }
}

/// Service `MatchingResources`.
pub fn service_matching<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    intersection(names, &SERVICE_RESOURCES)
}

/// `GetQuotaServiceType`: `NodePort`, `LoadBalancer`, or `""` for anything else.
pub fn quota_service_type(svc: &Service) -> &'static str {
    match svc.spec.as_ref().and_then(|s| s.type_.as_deref()) {
        Some("NodePort") => "NodePort",
        Some("LoadBalancer") => "LoadBalancer",
        _ => "",
    }
}

/// Service `Usage`.
pub fn service_usage(svc: &Service) -> Usage {
    let spec = svc.spec.as_ref();
    let ports = spec.and_then(|s| s.ports.as_deref()).unwrap_or_default();
    let count =
        |n: usize| Quantity::from_integer(i64::try_from(n).unwrap_or(i64::MAX), Format::DecimalSI);
    let mut list = ResourceList::from([
        (SERVICE_COUNT.to_string(), one()),
        (SERVICES.to_string(), one()),
        (SERVICES_LOAD_BALANCERS.to_string(), Quantity::zero()),
        (SERVICES_NODE_PORTS.to_string(), Quantity::zero()),
    ]);
    match quota_service_type(svc) {
        "NodePort" => {
            list.insert(SERVICES_NODE_PORTS.to_string(), count(ports.len()));
        }
        "LoadBalancer" => {
            // Without node-port allocation only ports that name a node port take one.
            let node_ports =
                if spec.and_then(|s| s.allocate_load_balancer_node_ports) == Some(false) {
                    ports
                        .iter()
                        .filter(|p| p.node_port.is_some_and(|n| n != 0))
                        .count()
                } else {
                    ports.len()
                };
            list.insert(SERVICES_NODE_PORTS.to_string(), count(node_ports));
            list.insert(SERVICES_LOAD_BALANCERS.to_string(), one());
        }
        _ => {}
    }
    Usage {
        list,
        problems: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::controllers::resourcequota::scope::parse_scope;
    use crate::controllers::resourcequota::testing::{from, strings, want};

    fn service(spec: Value) -> Service {
        from(json!({"metadata": {"name": "s"}, "spec": spec}))
    }

    #[test]
    fn service_evaluator_usage() {
        let cases = vec![
            ("loadbalancer", json!({"type": "LoadBalancer"}), ("0", "1")),
            (
                "loadbalancer_ports",
                json!({"type": "LoadBalancer", "ports": [{"port": 27443}]}),
                ("1", "1"),
            ),
            ("clusterip", json!({"type": "ClusterIP"}), ("0", "0")),
            (
                "nodeports",
                json!({"type": "NodePort", "ports": [{"port": 27443}]}),
                ("1", "0"),
            ),
            (
                "multi-nodeports",
                json!({"type": "NodePort", "ports": [{"port": 27443}, {"port": 27444}]}),
                ("2", "0"),
            ),
            (
                "nodeports-disabled",
                json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false, "ports": [{"port": 27443}, {"port": 27444}]}),
                ("0", "1"),
            ),
            (
                "nodeports-default-enabled",
                json!({"type": "LoadBalancer", "ports": [{"port": 27443, "nodePort": 32001}, {"port": 27444}]}),
                ("2", "1"),
            ),
            (
                "nodeports-explicitly-enabled",
                json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": true, "ports": [{"port": 27443}, {"port": 27444}]}),
                ("2", "1"),
            ),
            (
                "nodeports-disabled-but-specified",
                json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false,
                       "ports": [{"port": 27443, "nodePort": 32001}, {"port": 27444, "nodePort": 0}, {"port": 27445}]}),
                ("1", "1"),
            ),
            (
                "externalname",
                json!({"type": "ExternalName", "ports": [{"port": 1}]}),
                ("0", "0"),
            ),
        ];
        for (name, spec, (node_ports, lbs)) in cases {
            let got = service_usage(&service(spec));
            assert_eq!(
                strings(&got.list),
                want(&[
                    ("count/services", "1"),
                    ("services", "1"),
                    ("services.nodeports", node_ports),
                    ("services.loadbalancers", lbs)
                ]),
                "{name}"
            );
        }
    }

    #[test]
    fn service_evaluator_matches_resources() {
        let input = [
            "configmaps",
            "cpu",
            "services",
            "services.nodeports",
            "services.loadbalancers",
            "services",
        ];
        assert_eq!(
            service_matching(&input),
            vec!["services", "services.loadbalancers", "services.nodeports"]
        );
        assert_eq!(
            service_matching(&["count/services"]),
            vec!["count/services"]
        );
        let svc = service(json!({"type": "NodePort"}));
        assert_eq!(quota_service_type(&svc), "NodePort");
        assert!(unscoped_matches(&QuotaScope::default()));
        assert!(!unscoped_matches(&parse_scope(
            &["BestEffort".to_string()],
            None
        )));
    }
}
