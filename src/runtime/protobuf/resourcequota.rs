//! A ResourceQuota's protobuf message, read into the k8s-openapi object the quota store keeps
//! and written from it for status PUTs (`core/v1` `generated.proto` of v1.36). The whole
//! object is read and written, metadata included: the API server takes a quota's labels and
//! annotations from a status PUT's body.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ResourceQuota, ResourceQuotaSpec, ResourceQuotaStatus, ScopeSelector,
    ScopedResourceSelectorRequirement,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use prost::Message;

use super::{ACCEPT, ObjectMetaPb, ProtobufBody, QuantityEntry, Wire, envelope, omit_empty};

/// ResourceQuotas in protobuf.
pub fn wire() -> Wire<ResourceQuota> {
    Wire::new(ACCEPT, ACCEPT, |raw| {
        Ok(ResourceQuotaPb::decode(raw)?.into())
    })
}

#[derive(Clone, PartialEq, Message)]
struct ResourceQuotaPb {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMetaPb>,
    #[prost(message, optional, tag = "2")]
    spec: Option<SpecPb>,
    #[prost(message, optional, tag = "3")]
    status: Option<StatusPb>,
}

#[derive(Clone, PartialEq, Message)]
struct SpecPb {
    #[prost(message, repeated, tag = "1")]
    hard: Vec<QuantityEntry>,
    #[prost(string, repeated, tag = "2")]
    scopes: Vec<String>,
    #[prost(message, optional, tag = "3")]
    scope_selector: Option<ScopeSelectorPb>,
}

#[derive(Clone, PartialEq, Message)]
struct ScopeSelectorPb {
    #[prost(message, repeated, tag = "1")]
    match_expressions: Vec<ScopeRequirementPb>,
}

#[derive(Clone, PartialEq, Message)]
struct ScopeRequirementPb {
    #[prost(string, optional, tag = "1")]
    scope_name: Option<String>,
    #[prost(string, optional, tag = "2")]
    operator: Option<String>,
    #[prost(string, repeated, tag = "3")]
    values: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct StatusPb {
    #[prost(message, repeated, tag = "1")]
    hard: Vec<QuantityEntry>,
    #[prost(message, repeated, tag = "2")]
    used: Vec<QuantityEntry>,
}

/// A `ResourceList` as Go's JSON writes it: left out when empty.
fn quantities(entries: Vec<QuantityEntry>) -> Option<BTreeMap<String, Quantity>> {
    (!entries.is_empty()).then(|| entries.into_iter().map(QuantityEntry::into_pair).collect())
}

impl From<ResourceQuotaPb> for ResourceQuota {
    fn from(quota: ResourceQuotaPb) -> Self {
        ResourceQuota {
            metadata: quota.metadata.unwrap_or_default().into(),
            spec: quota.spec.map(|spec| ResourceQuotaSpec {
                hard: quantities(spec.hard),
                scopes: omit_empty(spec.scopes),
                scope_selector: spec.scope_selector.map(|selector| ScopeSelector {
                    match_expressions: omit_empty(selector.match_expressions).map(|exprs| {
                        exprs
                            .into_iter()
                            .map(|r| ScopedResourceSelectorRequirement {
                                scope_name: r.scope_name.unwrap_or_default(),
                                operator: r.operator.unwrap_or_default(),
                                values: omit_empty(r.values),
                            })
                            .collect()
                    }),
                }),
            }),
            status: quota.status.map(|status| ResourceQuotaStatus {
                hard: quantities(status.hard),
                used: quantities(status.used),
            }),
        }
    }
}

impl ProtobufBody for ResourceQuota {
    fn protobuf_body(&self) -> Option<Vec<u8>> {
        let ResourceQuota {
            metadata,
            spec,
            status,
        } = self;
        let message = ResourceQuotaPb {
            metadata: Some(metadata.into()),
            spec: spec.as_ref().map(|spec| {
                let ResourceQuotaSpec {
                    hard,
                    scope_selector,
                    scopes,
                } = spec;
                SpecPb {
                    hard: hard.iter().flatten().map(Into::into).collect(),
                    scopes: scopes.clone().unwrap_or_default(),
                    scope_selector: scope_selector.as_ref().map(|selector| ScopeSelectorPb {
                        match_expressions: selector
                            .match_expressions
                            .iter()
                            .flatten()
                            .map(|r| ScopeRequirementPb {
                                scope_name: Some(r.scope_name.clone()),
                                operator: Some(r.operator.clone()),
                                values: r.values.clone().unwrap_or_default(),
                            })
                            .collect(),
                    }),
                }
            }),
            status: status.as_ref().map(|status| {
                let ResourceQuotaStatus { hard, used } = status;
                StatusPb {
                    hard: hard.iter().flatten().map(Into::into).collect(),
                    used: used.iter().flatten().map(Into::into).collect(),
                }
            }),
        };
        Some(envelope::<ResourceQuota>(message.encode_to_vec()))
    }
}
