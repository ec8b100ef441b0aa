//! A pod's protobuf message read straight into its stored view ([`view::Pod`]): the messages
//! below declare only the fields the view keeps (upstream's field numbers, `core/v1` and
//! `meta/v1` `generated.proto` of v1.36), so a pod's env, volumes, probes, images and
//! managedFields are skipped on the wire, never allocated.
//!
//! Each field is read as Go's JSON would have written it, so a view is the same whichever
//! encoding it came in: a string or list Go leaves out when empty (`omitempty`) is `None`
//! when empty, a zero time (written as an empty message) is `None`.

use k8s_openapi::api::core::v1 as core;
use prost::Message;

use super::{
    ACCEPT, LabelSelectorPb, OwnerReferencePb, QuantityEntry, StringEntry, TimePb, Wire, non_empty,
    omit_empty, time_of,
};
use crate::k8s::intern::intern;
use crate::k8s::view::{self, Labels, OwnerRef, PodMeta, ResourceMap, shared};

/// Pods in protobuf, into [`view::WatchedPod`]. A deleted pod is read for its metadata alone
/// (its spec and status skipped on the wire), as the informer hands on the pod it stored: in
/// a churn that replaces pods, one pod event in three is a deletion.
pub fn wire() -> Wire<view::WatchedPod> {
    Wire {
        decode_deleted: |raw| Ok(PodMetaOnlyPb::decode(raw)?.into()),
        ..Wire::new(ACCEPT, ACCEPT, |raw| Ok(PodPb::decode(raw)?.into()))
    }
}

/// A pod's message read for its metadata: every other field is skipped unread.
#[derive(Clone, PartialEq, Message)]
struct PodMetaOnlyPb {
    #[prost(message, optional, tag = "1")]
    metadata: Option<PodMetaPb>,
}

impl From<PodMetaOnlyPb> for view::WatchedPod {
    fn from(pod: PodMetaOnlyPb) -> Self {
        PodPb {
            metadata: pod.metadata,
            spec: None,
            status: None,
        }
        .into()
    }
}

#[derive(Clone, PartialEq, Message)]
struct PodPb {
    #[prost(message, optional, tag = "1")]
    metadata: Option<PodMetaPb>,
    #[prost(message, optional, tag = "2")]
    spec: Option<PodSpecPb>,
    #[prost(message, optional, tag = "3")]
    status: Option<PodStatusPb>,
}

#[derive(Clone, PartialEq, Message)]
struct PodMetaPb {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "3")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    resource_version: Option<String>,
    #[prost(message, optional, tag = "9")]
    deletion_timestamp: Option<TimePb>,
    #[prost(int64, optional, tag = "10")]
    deletion_grace_period_seconds: Option<i64>,
    #[prost(message, repeated, tag = "11")]
    labels: Vec<StringEntry>,
    #[prost(message, repeated, tag = "13")]
    owner_references: Vec<OwnerReferencePb>,
}

#[derive(Clone, PartialEq, Message)]
struct PodSpecPb {
    #[prost(message, repeated, tag = "2")]
    containers: Vec<ContainerPb>,
    #[prost(int64, optional, tag = "5")]
    active_deadline_seconds: Option<i64>,
    #[prost(string, optional, tag = "10")]
    node_name: Option<String>,
    #[prost(message, optional, tag = "18")]
    affinity: Option<AffinityPb>,
    #[prost(message, repeated, tag = "20")]
    init_containers: Vec<ContainerPb>,
    #[prost(string, optional, tag = "24")]
    priority_class_name: Option<String>,
    #[prost(message, repeated, tag = "32")]
    overhead: Vec<QuantityEntry>,
    #[prost(message, repeated, tag = "39")]
    resource_claims: Vec<PodResourceClaimPb>,
    #[prost(message, optional, tag = "40")]
    resources: Option<ResourcesPb>,
    #[prost(message, optional, tag = "43")]
    scheduling_group: Option<PodSchedulingGroupPb>,
}

#[derive(Clone, PartialEq, Message)]
struct ContainerPb {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(message, optional, tag = "8")]
    resources: Option<ResourcesPb>,
    #[prost(string, optional, tag = "24")]
    restart_policy: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ResourcesPb {
    #[prost(message, repeated, tag = "1")]
    limits: Vec<QuantityEntry>,
    #[prost(message, repeated, tag = "2")]
    requests: Vec<QuantityEntry>,
}

#[derive(Clone, PartialEq, Message)]
struct AffinityPb {
    #[prost(message, optional, tag = "2")]
    pod_affinity: Option<PodAffinityPb>,
    #[prost(message, optional, tag = "3")]
    pod_anti_affinity: Option<PodAffinityPb>,
}

/// `PodAffinity` and `PodAntiAffinity` have the same fields.
#[derive(Clone, PartialEq, Message)]
struct PodAffinityPb {
    #[prost(message, repeated, tag = "1")]
    required: Vec<PodAffinityTermPb>,
    #[prost(message, repeated, tag = "2")]
    preferred: Vec<WeightedPodAffinityTermPb>,
}

#[derive(Clone, PartialEq, Message)]
struct PodAffinityTermPb {
    #[prost(message, optional, tag = "1")]
    label_selector: Option<LabelSelectorPb>,
    #[prost(string, repeated, tag = "2")]
    namespaces: Vec<String>,
    #[prost(string, optional, tag = "3")]
    topology_key: Option<String>,
    #[prost(message, optional, tag = "4")]
    namespace_selector: Option<LabelSelectorPb>,
    #[prost(string, repeated, tag = "5")]
    match_label_keys: Vec<String>,
    #[prost(string, repeated, tag = "6")]
    mismatch_label_keys: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct WeightedPodAffinityTermPb {
    #[prost(int32, optional, tag = "1")]
    weight: Option<i32>,
    #[prost(message, optional, tag = "2")]
    term: Option<PodAffinityTermPb>,
}

#[derive(Clone, PartialEq, Message)]
struct PodResourceClaimPb {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "3")]
    resource_claim_name: Option<String>,
    #[prost(string, optional, tag = "4")]
    resource_claim_template_name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct PodSchedulingGroupPb {
    #[prost(string, optional, tag = "1")]
    pod_group_name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct PodStatusPb {
    #[prost(string, optional, tag = "1")]
    phase: Option<String>,
    #[prost(message, repeated, tag = "2")]
    conditions: Vec<PodConditionPb>,
    #[prost(message, repeated, tag = "8")]
    container_statuses: Vec<ContainerStatusPb>,
    #[prost(string, optional, tag = "9")]
    qos_class: Option<String>,
    #[prost(message, repeated, tag = "10")]
    init_container_statuses: Vec<ContainerStatusPb>,
    #[prost(message, repeated, tag = "15")]
    resource_claim_statuses: Vec<PodResourceClaimStatusPb>,
    #[prost(message, optional, tag = "18")]
    extended_resource_claim_status: Option<ExtendedResourceClaimStatusPb>,
}

#[derive(Clone, PartialEq, Message)]
struct PodConditionPb {
    #[prost(string, optional, tag = "1")]
    r#type: Option<String>,
    #[prost(string, optional, tag = "2")]
    status: Option<String>,
    #[prost(message, optional, tag = "4")]
    last_transition_time: Option<TimePb>,
    #[prost(string, optional, tag = "5")]
    reason: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ContainerStatusPb {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(message, repeated, tag = "10")]
    allocated_resources: Vec<QuantityEntry>,
    #[prost(message, optional, tag = "11")]
    resources: Option<ResourcesPb>,
}

#[derive(Clone, PartialEq, Message)]
struct PodResourceClaimStatusPb {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    resource_claim_name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ExtendedResourceClaimStatusPb {
    #[prost(message, repeated, tag = "1")]
    request_mappings: Vec<ExtendedResourceRequestPb>,
    #[prost(string, optional, tag = "2")]
    resource_claim_name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ExtendedResourceRequestPb {
    #[prost(string, optional, tag = "1")]
    container_name: Option<String>,
    #[prost(string, optional, tag = "2")]
    resource_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    request_name: Option<String>,
}

fn resource_map(entries: Vec<QuantityEntry>) -> Option<ResourceMap> {
    (!entries.is_empty()).then(|| entries.into_iter().map(QuantityEntry::into_pair).collect())
}

impl From<ResourcesPb> for view::ResourceRequirements {
    fn from(resources: ResourcesPb) -> Self {
        view::ResourceRequirements {
            limits: resource_map(resources.limits),
            requests: resource_map(resources.requests),
        }
    }
}

impl From<ContainerPb> for view::Container {
    fn from(container: ContainerPb) -> Self {
        view::Container {
            name: container.name.unwrap_or_default(),
            resources: container.resources.map(Into::into),
            restart_policy: container.restart_policy,
        }
    }
}

impl From<PodAffinityTermPb> for core::PodAffinityTerm {
    fn from(term: PodAffinityTermPb) -> Self {
        core::PodAffinityTerm {
            label_selector: term.label_selector.map(Into::into),
            match_label_keys: omit_empty(term.match_label_keys),
            mismatch_label_keys: omit_empty(term.mismatch_label_keys),
            namespace_selector: term.namespace_selector.map(Into::into),
            namespaces: omit_empty(term.namespaces),
            topology_key: term.topology_key.unwrap_or_default(),
        }
    }
}

type Terms = (
    Option<Vec<core::WeightedPodAffinityTerm>>,
    Option<Vec<core::PodAffinityTerm>>,
);

fn terms(affinity: PodAffinityPb) -> Terms {
    let preferred = affinity
        .preferred
        .into_iter()
        .map(|w| core::WeightedPodAffinityTerm {
            pod_affinity_term: w.term.map(Into::into).unwrap_or_default(),
            weight: w.weight.unwrap_or_default(),
        });
    let required = affinity.required.into_iter().map(Into::into);
    (
        omit_empty(preferred.collect()),
        omit_empty(required.collect()),
    )
}

impl From<AffinityPb> for view::Affinity {
    fn from(affinity: AffinityPb) -> Self {
        view::Affinity {
            pod_affinity: affinity.pod_affinity.map(|a| {
                let (preferred, required) = terms(a);
                core::PodAffinity {
                    preferred_during_scheduling_ignored_during_execution: preferred,
                    required_during_scheduling_ignored_during_execution: required,
                }
            }),
            pod_anti_affinity: affinity.pod_anti_affinity.map(|a| {
                let (preferred, required) = terms(a);
                core::PodAntiAffinity {
                    preferred_during_scheduling_ignored_during_execution: preferred,
                    required_during_scheduling_ignored_during_execution: required,
                }
            }),
        }
    }
}

impl From<PodSpecPb> for view::PodSpec {
    fn from(spec: PodSpecPb) -> Self {
        let containers =
            |list: Vec<ContainerPb>| shared(list.into_iter().map(Into::into).collect());
        view::PodSpec {
            active_deadline_seconds: spec.active_deadline_seconds,
            affinity: spec.affinity.map(|a| Box::new(a.into())),
            containers: containers(spec.containers),
            init_containers: omit_empty(spec.init_containers).map(containers),
            node_name: non_empty(spec.node_name).map(|n| intern(&n)),
            overhead: resource_map(spec.overhead),
            priority_class_name: non_empty(spec.priority_class_name).map(|n| intern(&n)),
            resource_claims: omit_empty(spec.resource_claims).map(|claims| {
                Box::new(
                    claims
                        .into_iter()
                        .map(|c| core::PodResourceClaim {
                            name: c.name.unwrap_or_default(),
                            resource_claim_name: c.resource_claim_name,
                            resource_claim_template_name: c.resource_claim_template_name,
                        })
                        .collect(),
                )
            }),
            resources: spec.resources.map(|r| Box::new(r.into())),
            scheduling_group: spec.scheduling_group.map(|g| {
                Box::new(core::PodSchedulingGroup {
                    pod_group_name: g.pod_group_name,
                })
            }),
        }
    }
}

impl From<ContainerStatusPb> for view::ContainerStatus {
    fn from(status: ContainerStatusPb) -> Self {
        view::ContainerStatus {
            allocated_resources: resource_map(status.allocated_resources),
            name: status.name.unwrap_or_default(),
            resources: status.resources.map(Into::into),
        }
    }
}

impl From<PodStatusPb> for view::PodStatus {
    fn from(status: PodStatusPb) -> Self {
        let statuses =
            |list: Vec<ContainerStatusPb>| shared(list.into_iter().map(Into::into).collect());
        view::PodStatus {
            conditions: omit_empty(status.conditions).map(|conditions| {
                let kept = |c: &PodConditionPb| {
                    view::is_kept_condition(c.r#type.as_deref().unwrap_or_default())
                };
                // Sized to the kept ones, so boxing the list does not reallocate it.
                let mut list = Vec::with_capacity(conditions.iter().filter(|c| kept(c)).count());
                list.extend(
                    conditions
                        .into_iter()
                        .filter(kept)
                        .map(|c| view::PodCondition {
                            last_transition_time: time_of(c.last_transition_time),
                            reason: non_empty(c.reason).map(|r| intern(&r)),
                            status: intern(c.status.as_deref().unwrap_or_default()),
                            type_: intern(c.r#type.as_deref().unwrap_or_default()),
                        }),
                );
                list.into_boxed_slice()
            }),
            container_statuses: omit_empty(status.container_statuses).map(statuses),
            extended_resource_claim_status: status.extended_resource_claim_status.map(|s| {
                Box::new(core::PodExtendedResourceClaimStatus {
                    request_mappings: s
                        .request_mappings
                        .into_iter()
                        .map(|m| core::ContainerExtendedResourceRequest {
                            container_name: m.container_name.unwrap_or_default(),
                            request_name: m.request_name.unwrap_or_default(),
                            resource_name: m.resource_name.unwrap_or_default(),
                        })
                        .collect(),
                    resource_claim_name: s.resource_claim_name.unwrap_or_default(),
                })
            }),
            init_container_statuses: omit_empty(status.init_container_statuses).map(statuses),
            phase: non_empty(status.phase).map(|p| intern(&p)),
            qos_class: non_empty(status.qos_class).map(|q| intern(&q)),
            resource_claim_statuses: omit_empty(status.resource_claim_statuses).map(|claims| {
                claims
                    .into_iter()
                    .map(|c| core::PodResourceClaimStatus {
                        name: c.name.unwrap_or_default(),
                        resource_claim_name: c.resource_claim_name,
                    })
                    .collect()
            }),
        }
    }
}

impl From<PodPb> for view::WatchedPod {
    fn from(pod: PodPb) -> Self {
        let meta = pod.metadata.unwrap_or_default();
        let labels: Labels = meta
            .labels
            .into_iter()
            .map(|e| (e.key.unwrap_or_default(), e.value.unwrap_or_default()))
            .collect();
        let owners = meta
            .owner_references
            .into_iter()
            .map(|r| OwnerRef {
                api_version: r.api_version.unwrap_or_default(),
                controller: r.controller.unwrap_or_default(),
                kind: r.kind.unwrap_or_default(),
                name: r.name.unwrap_or_default(),
                uid: r.uid.unwrap_or_default(),
            })
            .collect();
        let stored = view::Pod {
            metadata: PodMeta {
                deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
                deletion_timestamp: time_of(meta.deletion_timestamp),
                name: non_empty(meta.name).map(String::into_boxed_str),
                namespace: non_empty(meta.namespace).map(|n| intern(&n)),
                resource_version: None,
                uid: non_empty(meta.uid).map(String::into_boxed_str),
            },
            labels,
            owner_references: shared(owners),
            spec: pod.spec.map(Into::into),
            status: pod.status.map(Into::into),
        };
        view::WatchedPod::new(non_empty(meta.resource_version), stored)
    }
}
