//! A PodDisruptionBudget's protobuf message, read into the k8s-openapi object the PDB store
//! keeps and written from it for status PUTs (`policy/v1` and `meta/v1` `generated.proto` of
//! v1.36). The whole object is read and written, metadata included: the API server takes a
//! PDB's labels and annotations from a status PUT's body.

use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;

use super::{
    ACCEPT, LabelSelectorPb, ObjectMetaPb, ProtobufBody, TimePb, Wire, envelope, omit_empty,
    time_of,
};

/// PodDisruptionBudgets in protobuf.
pub fn wire() -> Wire<PodDisruptionBudget> {
    Wire::new(ACCEPT, ACCEPT, |raw| {
        Ok(PodDisruptionBudgetPb::decode(raw)?.into())
    })
}

#[derive(Clone, PartialEq, Message)]
struct PodDisruptionBudgetPb {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMetaPb>,
    #[prost(message, optional, tag = "2")]
    spec: Option<SpecPb>,
    #[prost(message, optional, tag = "3")]
    status: Option<StatusPb>,
}

#[derive(Clone, PartialEq, Message)]
struct SpecPb {
    #[prost(message, optional, tag = "1")]
    min_available: Option<IntOrStringPb>,
    #[prost(message, optional, tag = "2")]
    selector: Option<LabelSelectorPb>,
    #[prost(message, optional, tag = "3")]
    max_unavailable: Option<IntOrStringPb>,
    #[prost(string, optional, tag = "4")]
    unhealthy_pod_eviction_policy: Option<String>,
}

/// `intstr.IntOrString`: `type` 0 is an integer, 1 a string.
#[derive(Clone, PartialEq, Message)]
struct IntOrStringPb {
    #[prost(int64, optional, tag = "1")]
    r#type: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    int_val: Option<i32>,
    #[prost(string, optional, tag = "3")]
    str_val: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct StatusPb {
    #[prost(int64, optional, tag = "1")]
    observed_generation: Option<i64>,
    #[prost(message, repeated, tag = "2")]
    disrupted_pods: Vec<TimeEntry>,
    #[prost(int32, optional, tag = "3")]
    disruptions_allowed: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    current_healthy: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    desired_healthy: Option<i32>,
    #[prost(int32, optional, tag = "6")]
    expected_pods: Option<i32>,
    #[prost(message, repeated, tag = "7")]
    conditions: Vec<ConditionPb>,
}

/// A `map<string, Time>` entry.
#[derive(Clone, PartialEq, Message)]
struct TimeEntry {
    #[prost(string, optional, tag = "1")]
    key: Option<String>,
    #[prost(message, optional, tag = "2")]
    value: Option<TimePb>,
}

/// `metav1.Condition`.
#[derive(Clone, PartialEq, Message)]
struct ConditionPb {
    #[prost(string, optional, tag = "1")]
    r#type: Option<String>,
    #[prost(string, optional, tag = "2")]
    status: Option<String>,
    #[prost(int64, optional, tag = "3")]
    observed_generation: Option<i64>,
    #[prost(message, optional, tag = "4")]
    last_transition_time: Option<TimePb>,
    #[prost(string, optional, tag = "5")]
    reason: Option<String>,
    #[prost(string, optional, tag = "6")]
    message: Option<String>,
}

impl From<IntOrStringPb> for IntOrString {
    fn from(value: IntOrStringPb) -> Self {
        match value.r#type {
            Some(1) => IntOrString::String(value.str_val.unwrap_or_default()),
            _ => IntOrString::Int(value.int_val.unwrap_or_default()),
        }
    }
}

/// A time Go's JSON would have written as null, read as the epoch: the one field of a
/// condition that cannot be left out.
fn required_time(time: Option<TimePb>) -> Time {
    time_of(time).unwrap_or(Time(jiff::Timestamp::UNIX_EPOCH))
}

impl From<PodDisruptionBudgetPb> for PodDisruptionBudget {
    fn from(pdb: PodDisruptionBudgetPb) -> Self {
        PodDisruptionBudget {
            metadata: pdb.metadata.unwrap_or_default().into(),
            spec: pdb.spec.map(|spec| PodDisruptionBudgetSpec {
                min_available: spec.min_available.map(Into::into),
                selector: spec.selector.map(Into::into),
                max_unavailable: spec.max_unavailable.map(Into::into),
                unhealthy_pod_eviction_policy: spec.unhealthy_pod_eviction_policy,
            }),
            status: pdb.status.map(|status| PodDisruptionBudgetStatus {
                observed_generation: status.observed_generation.filter(|g| *g != 0),
                disrupted_pods: (!status.disrupted_pods.is_empty()).then(|| {
                    status
                        .disrupted_pods
                        .into_iter()
                        .map(|e| (e.key.unwrap_or_default(), required_time(e.value)))
                        .collect()
                }),
                disruptions_allowed: status.disruptions_allowed,
                current_healthy: status.current_healthy,
                desired_healthy: status.desired_healthy,
                expected_pods: status.expected_pods,
                conditions: omit_empty(status.conditions).map(|conditions| {
                    conditions
                        .into_iter()
                        .map(|c| Condition {
                            type_: c.r#type.unwrap_or_default(),
                            status: c.status.unwrap_or_default(),
                            observed_generation: c.observed_generation.filter(|g| *g != 0),
                            last_transition_time: required_time(c.last_transition_time),
                            reason: c.reason.unwrap_or_default(),
                            message: c.message.unwrap_or_default(),
                        })
                        .collect()
                }),
            }),
        }
    }
}

impl From<&IntOrString> for IntOrStringPb {
    fn from(value: &IntOrString) -> Self {
        match value {
            IntOrString::Int(n) => IntOrStringPb {
                r#type: Some(0),
                int_val: Some(*n),
                str_val: None,
            },
            IntOrString::String(text) => IntOrStringPb {
                r#type: Some(1),
                int_val: None,
                str_val: Some(text.clone()),
            },
        }
    }
}

impl ProtobufBody for PodDisruptionBudget {
    fn protobuf_body(&self) -> Option<Vec<u8>> {
        let PodDisruptionBudget {
            metadata,
            spec,
            status,
        } = self;
        let message = PodDisruptionBudgetPb {
            metadata: Some(metadata.into()),
            spec: spec.as_ref().map(|spec| {
                let PodDisruptionBudgetSpec {
                    max_unavailable,
                    min_available,
                    selector,
                    unhealthy_pod_eviction_policy,
                } = spec;
                SpecPb {
                    min_available: min_available.as_ref().map(Into::into),
                    selector: selector.as_ref().map(Into::into),
                    max_unavailable: max_unavailable.as_ref().map(Into::into),
                    unhealthy_pod_eviction_policy: unhealthy_pod_eviction_policy.clone(),
                }
            }),
            status: status.as_ref().map(|status| {
                let PodDisruptionBudgetStatus {
                    conditions,
                    current_healthy,
                    desired_healthy,
                    disrupted_pods,
                    disruptions_allowed,
                    expected_pods,
                    observed_generation,
                } = status;
                StatusPb {
                    observed_generation: *observed_generation,
                    disrupted_pods: disrupted_pods
                        .iter()
                        .flatten()
                        .map(|(pod, time)| TimeEntry {
                            key: Some(pod.clone()),
                            value: Some(time.into()),
                        })
                        .collect(),
                    disruptions_allowed: *disruptions_allowed,
                    current_healthy: *current_healthy,
                    desired_healthy: *desired_healthy,
                    expected_pods: *expected_pods,
                    conditions: conditions
                        .iter()
                        .flatten()
                        .map(|c| ConditionPb {
                            r#type: Some(c.type_.clone()),
                            status: Some(c.status.clone()),
                            observed_generation: c.observed_generation,
                            last_transition_time: Some((&c.last_transition_time).into()),
                            reason: Some(c.reason.clone()),
                            message: Some(c.message.clone()),
                        })
                        .collect(),
                }
            }),
        };
        Some(envelope::<PodDisruptionBudget>(message.encode_to_vec()))
    }
}
