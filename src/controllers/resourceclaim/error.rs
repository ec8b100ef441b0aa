//! Why a resourceclaim sync failed, in upstream's words: the text of a pod's claim failure is
//! also a `FailedResourceClaimCreation` event's message.

use super::plan::claims::{BindError, NotForPod, ResolveError, TemplateError};
use crate::controllers::joined;
use crate::k8s::golang::go_quote;
use crate::runtime::connection::errors::error_text;

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    NotForPod(#[from] NotForPod),
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error(transparent)]
    Bind(#[from] BindError),
    /// The pod names a PodGroup the store does not have (the lister's NotFound).
    #[error(
        "get PodGroup for Pod {pod}: podgroup.scheduling.k8s.io {} not found",
        go_quote(.group)
    )]
    GetPodGroup { pod: String, group: String },
    /// The lister's NotFound, which names the resource in the singular.
    #[error(
        "resource claim template {}: resourceclaimtemplate.resource.k8s.io {} not found",
        go_quote(.0),
        go_quote(.0)
    )]
    TemplateNotFound(String),
    /// Upstream prints the claim's name, still empty before the create: kept verbatim.
    #[error("create ResourceClaim : {}", error_text(.0))]
    Create(#[source] kube::Error),
    #[error("update pod {pod} ResourceClaimStatuses: {}", error_text(.source))]
    RecordStatuses {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("reserve claim {claim} for pod: {}", error_text(.source))]
    Reserve {
        claim: String,
        #[source]
        source: kube::Error,
    },
    #[error("get pod {pod}: {}", error_text(.source))]
    GetPod {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("get PodGroup {group}: {}", error_text(.source))]
    GetGroup {
        group: String,
        #[source]
        source: kube::Error,
    },
    #[error("update PodGroup {group} ResourceClaimStatuses: {}", error_text(.source))]
    RecordGroupStatuses {
        group: String,
        #[source]
        source: kube::Error,
    },
    #[error("update ResourceClaim {claim}: {}", error_text(.source))]
    WriteStatus {
        claim: String,
        #[source]
        source: kube::Error,
    },
    #[error("remove finalizer of ResourceClaim {claim}: {}", error_text(.source))]
    RemoveFinalizer {
        claim: String,
        #[source]
        source: kube::Error,
    },
    #[error("delete unused generated claim {claim}: {}", error_text(.source))]
    Delete {
        claim: String,
        #[source]
        source: kube::Error,
    },
    /// One of the pod's claim entries failed.
    #[error("pod {pod}, PodResourceClaim {pod_claim}: {source}")]
    PodClaim {
        pod: String,
        pod_claim: String,
        #[source]
        source: Box<ClaimError>,
    },
    /// One of the PodGroup's claim entries failed.
    #[error("PodGroup {group}, PodGroupResourceClaim {claim}: {source}")]
    GroupClaim {
        group: String,
        claim: String,
        #[source]
        source: Box<ClaimError>,
    },
    /// Every failure of one pod's (or PodGroup's) sync.
    #[error("{}", joined(.0))]
    Several(Vec<ClaimError>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::connection::errors::api_error;

    #[test]
    fn a_pod_claim_failure_reads_as_upstream() {
        let create = ClaimError::PodClaim {
            pod: "ns/p".into(),
            pod_claim: "gpu".into(),
            source: Box::new(ClaimError::Create(api_error(403, "quota exceeded"))),
        };
        let missing = ClaimError::PodClaim {
            pod: "ns/p".into(),
            pod_claim: "fpga".into(),
            source: Box::new(ClaimError::TemplateNotFound("t".into())),
        };
        let both = ClaimError::Several(vec![create, missing]);
        assert_eq!(
            both.to_string(),
            "pod ns/p, PodResourceClaim gpu: create ResourceClaim : quota exceeded; \
             pod ns/p, PodResourceClaim fpga: resource claim template \"t\": \
             resourceclaimtemplate.resource.k8s.io \"t\" not found"
        );
        let unresolved = ClaimError::from(ResolveError::NotCreatedYet { pod: "ns/p".into() });
        assert_eq!(
            unresolved.to_string(),
            "pod \"ns/p\": ResourceClaim not created yet"
        );
        // The request error stays reachable as the cause.
        let create = ClaimError::Create(api_error(500, "boom"));
        let source = std::error::Error::source(&create);
        assert!(source.is_some_and(|s| s.is::<kube::Error>()));
    }
}
