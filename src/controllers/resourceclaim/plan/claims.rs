//! The resourceclaim controller's decisions, as upstream makes them: how a pod's claim entry
//! resolves to a ResourceClaim name, which claims a template creates and under what name,
//! when a pod needs work, which reservations are stale, when a claim is deallocated, its
//! finalizer removed, or the claim deleted. No I/O: lookups are passed in.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodResourceClaim, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1::{
    ResourceClaim, ResourceClaimConsumerReference, ResourceClaimSpec, ResourceClaimStatus,
    ResourceClaimTemplate,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::features::{FeatureGate, FeatureGates};
use crate::k8s::podgroup::{self, PodGroup};
use crate::k8s::view::Pod;
use crate::runtime::watching::stored::{controller_of, key_of};

/// Set on claims generated from a template; the value is the pod's `spec.resourceClaims[].name`.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";
/// Set by the scheduler on the claims it generates for extended resources.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";
/// Set by the scheduler when it allocates: the claim was allocated by a builtin controller and
/// may be deallocated by this one.
pub const DELETE_PROTECTION_FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// API validation's limit on `status.reservedFor`.
pub const RESERVED_FOR_MAX: usize = 256;
/// Room for the API server's five random characters within a 63-character name.
const MAX_BASE_LEN: usize = 57;

/// Which features of the API the cluster has switched on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    pub admin_access: bool,
    pub prioritized_list: bool,
    /// DRAWorkloadResourceClaims: claims shared by the pods of a PodGroup.
    pub workload_claims: bool,
}

impl Features {
    /// The features the gates switch on.
    pub fn of(gates: &FeatureGates) -> Self {
        Self {
            admin_access: gates.enabled(FeatureGate::DraAdminAccess),
            prioritized_list: gates.enabled(FeatureGate::DraPrioritizedList),
            workload_claims: gates.enabled(FeatureGate::DraWorkloadResourceClaims),
        }
    }
}

/// What a pod's claim entry names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved<'a> {
    /// This claim; `check_owner` when it was generated for the pod and must be owned by it.
    Claim { name: &'a str, check_owner: bool },
    /// The pod status records that no claim is needed.
    NotNeeded,
}

/// Why a pod's or PodGroup's claim entry names no claim (upstream's wording, which differs
/// between the two).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("pod \"{pod}\": ResourceClaim not created yet")]
    NotCreatedYet { pod: String },
    #[error("pod \"{pod}\", spec.resourceClaim \"{claim}\": none of the supported fields are set")]
    Unsupported { pod: String, claim: String },
    #[error("PodGroup {group}: ResourceClaim not created yet")]
    GroupNotCreatedYet { group: String },
    #[error("PodGroup {group}, spec.resourceClaim {claim}: none of the supported fields are set")]
    GroupUnsupported { group: String, claim: String },
}

impl ResolveError {
    /// The entry names a template whose claim is not recorded yet: it is to be created.
    pub fn not_created_yet(&self) -> bool {
        matches!(
            self,
            Self::NotCreatedYet { .. } | Self::GroupNotCreatedYet { .. }
        )
    }
}

/// `resourceclaim.IsForPod` / `IsForPodGroup`'s error: the claim is not the owner's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotForPod {
    #[error("ResourceClaim {claim} is not in the same namespace as {kind} {owner}")]
    OtherNamespace {
        claim: String,
        kind: &'static str,
        owner: String,
    },
    #[error("ResourceClaim {claim} was not created for {kind} {owner} ({kind} is not owner)")]
    NotOwner {
        claim: String,
        kind: &'static str,
        owner: String,
    },
    #[error(
        "ResourceClaim {claim} was not created for Pod {pod} (neither Pod nor PodGroup {group} is the owner)"
    )]
    NeitherOwner {
        claim: String,
        pod: String,
        group: String,
    },
}

/// `resourceclaim.BindTo`'s error: an entry the API does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    #[error("Pod {pod} claim {claim}: none of the supported fields are set")]
    PodUnsupported { pod: String, claim: String },
    #[error("PodGroup {group} claim {claim}: none of the supported fields are set")]
    GroupUnsupported { group: String, claim: String },
    #[error("Pod {pod} belongs to PodGroup {wanted}, not PodGroup {group}")]
    OtherGroup {
        pod: String,
        wanted: String,
        group: String,
    },
}

/// Why a claim must not be created from its template: it needs a disabled feature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("admin access is requested, but the feature is disabled")]
    AdminAccessDisabled,
    #[error("template includes a prioritized list of subrequests, but the feature is disabled")]
    PrioritizedListDisabled,
}

/// The pod's claim entries (`spec.resourceClaims`).
pub fn pod_claims(pod: &Pod) -> &[PodResourceClaim] {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_deref())
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Why an entry resolves to no claim, before it is worded for a pod or a PodGroup.
enum Unresolved {
    NotCreatedYet,
    Unsupported,
}

/// A claim name is used as is; a template entry resolves through the owner's
/// `status.resourceClaimStatuses`. With both set (which API validation forbids) the claim
/// name wins, as upstream.
fn resolve_entry<'a>(
    entry: &'a PodResourceClaim,
    statuses: &'a [PodResourceClaimStatus],
) -> Result<Resolved<'a>, Unresolved> {
    if let Some(name) = entry.resource_claim_name.as_deref() {
        return Ok(Resolved::Claim {
            name,
            check_owner: false,
        });
    }
    if entry.resource_claim_template_name.is_none() {
        return Err(Unresolved::Unsupported);
    }
    match statuses.iter().find(|s| s.name == entry.name) {
        Some(status) => Ok(match status.resource_claim_name.as_deref() {
            Some(name) => Resolved::Claim {
                name,
                check_owner: true,
            },
            None => Resolved::NotNeeded,
        }),
        None => Err(Unresolved::NotCreatedYet),
    }
}

/// The pod's `status.resourceClaimStatuses`.
pub fn pod_claim_statuses(pod: &Pod) -> &[PodResourceClaimStatus] {
    pod.status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_deref())
        .unwrap_or_default()
}

/// `resourceclaim.Name`.
pub fn resolve<'a>(
    pod: &'a Pod,
    pod_claim: &'a PodResourceClaim,
) -> Result<Resolved<'a>, ResolveError> {
    resolve_entry(pod_claim, pod_claim_statuses(pod)).map_err(|why| match why {
        Unresolved::NotCreatedYet => ResolveError::NotCreatedYet { pod: key_of(pod) },
        Unresolved::Unsupported => ResolveError::Unsupported {
            pod: key_of(pod),
            claim: pod_claim.name.clone(),
        },
    })
}

/// `resourceclaim.NameFromPodGroup`.
pub fn resolve_group<'a>(
    group: &'a PodGroup,
    entry: &'a PodResourceClaim,
) -> Result<Resolved<'a>, ResolveError> {
    resolve_entry(entry, group.claim_statuses()).map_err(|why| match why {
        Unresolved::NotCreatedYet => ResolveError::GroupNotCreatedYet {
            group: key_of(group),
        },
        Unresolved::Unsupported => ResolveError::GroupUnsupported {
            group: key_of(group),
            claim: entry.name.clone(),
        },
    })
}

/// The claim names a PodGroup refers to and that resolve, in spec order.
pub fn group_resolved_names(group: &PodGroup) -> Vec<&str> {
    group
        .claims()
        .iter()
        .filter_map(|entry| match resolve_group(group, entry) {
            Ok(Resolved::Claim { name, .. }) => Some(name),
            _ => None,
        })
        .collect()
}

/// The templates a PodGroup's claim entries use, in spec order.
pub fn group_template_names(group: &PodGroup) -> Vec<&str> {
    group
        .claims()
        .iter()
        .filter_map(|entry| entry.resource_claim_template_name.as_deref())
        .collect()
}

/// `spec.schedulingGroup.podGroupName`: the PodGroup the pod belongs to.
pub fn pod_group_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_group.as_ref())
        .and_then(|g| g.pod_group_name.as_deref())
}

/// The claim names a pod refers to and that resolve, in spec order.
pub fn resolved_names(pod: &Pod) -> Vec<&str> {
    pod_claims(pod)
        .iter()
        .filter_map(|pc| match resolve(pod, pc) {
            Ok(Resolved::Claim { name, .. }) => Some(name),
            _ => None,
        })
        .collect()
}

/// The templates a pod's claim entries use, in spec order.
pub fn template_names(pod: &Pod) -> Vec<&str> {
    pod_claims(pod)
        .iter()
        .filter_map(|pc| pc.resource_claim_template_name.as_deref())
        .collect()
}

/// The claim the scheduler generated for the pod's extended resources, if any.
pub fn extended_claim_name(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()
        .and_then(|s| s.extended_resource_claim_status.as_ref())
        .map(|s| s.resource_claim_name.as_str())
        .filter(|name| !name.is_empty())
}

/// Whether the controller looks at the pod at all.
pub fn uses_claims(pod: &Pod) -> bool {
    !pod_claims(pod).is_empty() || extended_claim_name(pod).is_some()
}

fn phase_is_terminal(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| s.is_terminal())
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// `isPodDone`: the pod will never run (again).
pub fn pod_is_done(pod: &Pod) -> bool {
    phase_is_terminal(pod)
        || (pod.metadata.deletion_timestamp.is_some() && node_name(pod).is_empty())
}

/// `podNeedsClaims`: false once the pod is gone, terminal, or deleted before being scheduled.
pub fn pod_needs_claims(pod: &Pod, deleted: bool) -> bool {
    !deleted && !pod_is_done(pod)
}

/// The claims to look at when a pod no longer needs them: every resolvable one, and the
/// extended-resource claim.
pub fn claims_to_release(pod: &Pod) -> Vec<&str> {
    let mut names = resolved_names(pod);
    names.extend(extended_claim_name(pod));
    names
}

fn claim_key(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.namespace().unwrap_or_default(),
        claim.name_any()
    )
}

/// `metav1.IsControlledBy`: the claim's controller reference has this UID.
fn controlled_by(claim: &ResourceClaim, uid: Option<&str>) -> bool {
    controller_of(&claim.metadata).is_some_and(|o| Some(o.uid.as_str()) == uid)
}

/// The claim's controller is a PodGroup (any version of the scheduling group) called `group`.
fn controlled_by_group_named(claim: &ResourceClaim, group: &str) -> bool {
    controller_of(&claim.metadata).is_some_and(|o| {
        o.name == group && o.kind == "PodGroup" && is_scheduling_api_version(&o.api_version)
    })
}

fn is_scheduling_api_version(api_version: &str) -> bool {
    api_version
        .strip_prefix(podgroup::GROUP)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// `resourceclaim.IsForPod`: the claim is in the pod's namespace and controlled by the pod,
/// or (`accept_group`, DRAWorkloadResourceClaims) by the PodGroup the pod names. Beyond
/// upstream: a pod in no group gets the "Pod is not owner" error where upstream dereferences
/// the missing group name (a panic).
pub fn is_for_pod(pod: &Pod, claim: &ResourceClaim, accept_group: bool) -> Result<(), NotForPod> {
    if claim.namespace() != pod.namespace() {
        return Err(NotForPod::OtherNamespace {
            claim: claim_key(claim),
            kind: "Pod",
            owner: key_of(pod),
        });
    }
    if controlled_by(claim, pod.metadata.uid.as_deref()) {
        return Ok(());
    }
    match pod_group_name(pod).filter(|_| accept_group) {
        Some(group) if controlled_by_group_named(claim, group) => Ok(()),
        Some(group) => Err(NotForPod::NeitherOwner {
            claim: claim_key(claim),
            pod: key_of(pod),
            group: group.to_string(),
        }),
        None => Err(NotForPod::NotOwner {
            claim: claim_key(claim),
            kind: "Pod",
            owner: key_of(pod),
        }),
    }
}

/// `resourceclaim.IsForPodGroup`: the claim is in the group's namespace and controlled by it.
pub fn is_for_group(group: &PodGroup, claim: &ResourceClaim) -> Result<(), NotForPod> {
    if claim.namespace() != group.metadata.namespace {
        return Err(NotForPod::OtherNamespace {
            claim: claim_key(claim),
            kind: "PodGroup",
            owner: key_of(group),
        });
    }
    if controlled_by(claim, group.metadata.uid.as_deref()) {
        return Ok(());
    }
    Err(NotForPod::NotOwner {
        claim: claim_key(claim),
        kind: "PodGroup",
        owner: key_of(group),
    })
}

/// The claim's `status.reservedFor`.
pub fn reserved_for(claim: &ResourceClaim) -> &[ResourceClaimConsumerReference] {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_deref())
        .unwrap_or_default()
}

fn is_allocated(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some())
}

/// `resourceclaim.IsReservedForPod`: reserved for the pod, or (`accept_group`) for the
/// PodGroup the pod names.
pub fn is_reserved_for_pod(pod: &Pod, claim: &ResourceClaim, accept_group: bool) -> bool {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let group = pod_group_name(pod).filter(|_| accept_group);
    reserved_for(claim)
        .iter()
        .any(|r| r.uid == uid || (is_group_consumer(r) && Some(r.name.as_str()) == group))
}

/// An allocated claim the pod (already on a node) uses but is not reserved for.
pub fn needs_reservation(pod: &Pod, claim: &ResourceClaim, accept_group: bool) -> bool {
    is_allocated(claim) && !is_reserved_for_pod(pod, claim, accept_group)
}

/// `resourceclaim.BindTo`: whom a pod's claim is reserved for. The PodGroup (when the pod
/// has one here) if the group has the very same entry (name and source), else the pod.
pub fn bind_to(
    pod: &Pod,
    group: Option<&PodGroup>,
    pod_claim: &PodResourceClaim,
) -> Result<ResourceClaimConsumerReference, BindError> {
    if pod_claim.resource_claim_name.is_none() && pod_claim.resource_claim_template_name.is_none() {
        return Err(BindError::PodUnsupported {
            pod: key_of(pod),
            claim: pod_claim.name.clone(),
        });
    }
    if let Some(group) = group {
        let namespace = pod.namespace().unwrap_or_default();
        let wanted = pod_group_name(pod).unwrap_or_default();
        if group.metadata.namespace.as_deref() != Some(namespace.as_str())
            || group.metadata.name.as_deref() != Some(wanted)
        {
            return Err(BindError::OtherGroup {
                pod: key_of(pod),
                wanted: format!("{namespace}/{wanted}"),
                group: key_of(group),
            });
        }
        for entry in group.claims() {
            if entry.resource_claim_name.is_none() && entry.resource_claim_template_name.is_none() {
                return Err(BindError::GroupUnsupported {
                    group: key_of(group),
                    claim: entry.name.clone(),
                });
            }
            if entry.name == pod_claim.name
                && entry.resource_claim_name == pod_claim.resource_claim_name
                && entry.resource_claim_template_name == pod_claim.resource_claim_template_name
            {
                return Ok(group_consumer(group));
            }
        }
    }
    Ok(ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
    })
}

/// The `reservedFor` entry of a PodGroup.
pub fn group_consumer(group: &PodGroup) -> ResourceClaimConsumerReference {
    ResourceClaimConsumerReference {
        api_group: Some(podgroup::GROUP.into()),
        resource: podgroup::RESOURCE.into(),
        name: group.metadata.name.clone().unwrap_or_default(),
        uid: group.metadata.uid.clone().unwrap_or_default(),
    }
}

/// Whether claims are still created and reserved for the pod. Beyond upstream, a terminal
/// pod is left alone too: upstream re-creates the claims of a finished pod that its own
/// cleanup deleted, and re-reserves shared claims for it (kubernetes#141274).
pub fn pod_may_get_claims(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && !phase_is_terminal(pod)
}

/// The PodGroup of a pod, as the store has it (`getPodGroup`).
#[derive(Debug, Clone, Copy)]
pub enum Membership<'a> {
    /// The pod names no group, or DRAWorkloadResourceClaims is off.
    Alone,
    /// The pod names a group the store does not have.
    Missing,
    In(&'a PodGroup),
}

impl<'a> Membership<'a> {
    pub fn group(self) -> Option<&'a PodGroup> {
        match self {
            Membership::In(group) => Some(group),
            _ => None,
        }
    }
}

/// `podNeedsWork`: whether a changed pod must be synced. `claim` looks a claim up by name.
pub fn pod_needs_work<C: AsRef<ResourceClaim>>(
    pod: &Pod,
    membership: Membership,
    features: Features,
    claim: impl Fn(&str) -> Option<C>,
) -> bool {
    if !pod_may_get_claims(pod) {
        return false;
    }
    let scheduled = !node_name(pod).is_empty();
    let accept_group = features.workload_claims;
    pod_claims(pod).iter().any(|pc| {
        let (name, check_owner) = match resolve(pod, pc) {
            Err(_) => return true,
            Ok(Resolved::NotNeeded) => return false,
            Ok(Resolved::Claim { name, check_owner }) => (name, check_owner),
        };
        let Some(found) = claim(name) else {
            // A template's claim is (re)created, unless the PodGroup creates it; a named one
            // is the user's to create.
            if pc.resource_claim_template_name.is_none() {
                return false;
            }
            return match membership {
                Membership::Missing => true,
                _ => bind_to(pod, membership.group(), pc).is_ok_and(|to| !is_group_consumer(&to)),
            };
        };
        let found = found.as_ref();
        if check_owner && is_for_pod(pod, found, accept_group).is_err() {
            // The user must remove the conflicting claim first.
            return false;
        }
        scheduled && needs_reservation(pod, found, accept_group)
    })
}

/// `podGroupNeedsWork`: whether a changed PodGroup must be synced.
pub fn group_needs_work<C: AsRef<ResourceClaim>>(
    group: &PodGroup,
    claim: impl Fn(&str) -> Option<C>,
) -> bool {
    if group.metadata.deletion_timestamp.is_some() {
        return false;
    }
    group
        .claims()
        .iter()
        .any(|entry| match resolve_group(group, entry) {
            Err(_) => true,
            Ok(Resolved::NotNeeded) => false,
            // A template's claim is (re)created; a named one is the user's to create. An
            // existing claim the group does not own must be removed by the user first.
            Ok(Resolved::Claim { name, .. }) => {
                claim(name).is_none() && entry.resource_claim_template_name.is_some()
            }
        })
}

/// Why claims recorded for the pod cannot be used: they exist but are not owned by the pod
/// (or its group). Upstream then does nothing until the user removes them; this names them.
pub fn foreign_claims<C: AsRef<ResourceClaim>>(
    pod: &Pod,
    features: Features,
    claim: impl Fn(&str) -> Option<C>,
) -> Vec<String> {
    pod_claims(pod)
        .iter()
        .filter_map(|pc| match resolve(pod, pc) {
            Ok(Resolved::Claim {
                name,
                check_owner: true,
            }) => claim(name).and_then(|c| {
                is_for_pod(pod, c.as_ref(), features.workload_claims)
                    .err()
                    .map(|e| e.to_string())
            }),
            _ => None,
        })
        .collect()
}

/// Up to `len` bytes of `s`, never splitting a character (names are ASCII when valid).
fn prefix(s: &str, len: usize) -> &str {
    let mut end = len.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The generateName of a claim made for `pod_claim` of `pod`: `<pod>-<claim>-`, or when that
/// is longer than 57 both parts cut in proportion to their length, joined by one hyphen
/// (upstream drops the trailing hyphen in that case). Beyond upstream, the pod part keeps at
/// least one character and loses a trailing `.`: upstream's cut can begin the name with `-`
/// (a one-character pod, a long claim) or leave `x.-`, names the API server refuses, so the
/// pod's claim could never be created.
pub fn generate_name(pod: &str, pod_claim: &str) -> String {
    let base = format!("{pod}-{pod_claim}-");
    if base.len() <= MAX_BASE_LEN {
        return base;
    }
    let total = base.len();
    let pod_part = prefix(pod, (pod.len() * MAX_BASE_LEN / total).max(1));
    format!(
        "{}-{}",
        pod_part.trim_end_matches('.'),
        prefix(pod_claim, pod_claim.len() * MAX_BASE_LEN / total)
    )
}

fn requests(
    spec: Option<&ResourceClaimSpec>,
) -> impl Iterator<Item = &k8s_openapi::api::resource::v1::DeviceRequest> {
    spec.and_then(|s| s.devices.as_ref())
        .and_then(|d| d.requests.as_deref())
        .unwrap_or_default()
        .iter()
}

/// Some request asks for admin access to its devices.
pub fn needs_admin_access(spec: Option<&ResourceClaimSpec>) -> bool {
    requests(spec).any(|r| {
        r.exactly
            .as_ref()
            .is_some_and(|e| e.admin_access == Some(true))
    })
}

/// Some request lists alternatives (`firstAvailable`).
pub fn has_prioritized_list(spec: Option<&ResourceClaimSpec>) -> bool {
    requests(spec).any(|r| r.first_available.as_ref().is_some_and(|f| !f.is_empty()))
}

fn template_meta(template: &ResourceClaimTemplate) -> Option<&ObjectMeta> {
    template.spec.as_ref().and_then(|s| s.metadata.as_ref())
}

fn template_spec(template: &ResourceClaimTemplate) -> Option<&ResourceClaimSpec> {
    template.spec.as_ref().and_then(|s| s.spec.as_ref())
}

/// Who a generated claim is for: its controller owner (a pod or PodGroup) and namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimOwner {
    pub namespace: Option<String>,
    pub reference: OwnerReference,
}

impl ClaimOwner {
    pub fn pod(pod: &Pod) -> Self {
        Self::new("v1", "Pod", pod.name_any(), pod.uid(), pod.namespace())
    }

    pub fn group(group: &PodGroup) -> Self {
        let meta = &group.metadata;
        Self::new(
            podgroup::API_VERSION,
            "PodGroup",
            meta.name.clone().unwrap_or_default(),
            meta.uid.clone(),
            meta.namespace.clone(),
        )
    }

    fn new(
        api_version: &str,
        kind: &str,
        name: String,
        uid: Option<String>,
        namespace: Option<String>,
    ) -> Self {
        Self {
            namespace,
            reference: OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name,
                uid: uid.unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: None,
            },
        }
    }
}

/// The claim to create for `pod_claim` (a pod's or PodGroup's entry) from `template`, or why
/// it must not be created.
pub fn claim_from_template(
    owner: &ClaimOwner,
    pod_claim: &PodResourceClaim,
    template: &ResourceClaimTemplate,
    features: Features,
) -> Result<ResourceClaim, TemplateError> {
    let spec = template_spec(template);
    if !features.admin_access && needs_admin_access(spec) {
        return Err(TemplateError::AdminAccessDisabled);
    }
    if !features.prioritized_list && has_prioritized_list(spec) {
        return Err(TemplateError::PrioritizedListDisabled);
    }
    let meta = template_meta(template);
    let mut annotations: BTreeMap<String, String> =
        meta.and_then(|m| m.annotations.clone()).unwrap_or_default();
    annotations.insert(POD_CLAIM_NAME_ANNOTATION.into(), pod_claim.name.clone());
    Ok(ResourceClaim {
        metadata: ObjectMeta {
            generate_name: Some(generate_name(&owner.reference.name, &pod_claim.name)),
            namespace: owner.namespace.clone(),
            owner_references: Some(vec![owner.reference.clone()]),
            annotations: Some(annotations),
            labels: meta.and_then(|m| m.labels.clone()),
            ..ObjectMeta::default()
        },
        spec: spec.cloned(),
        status: None,
    })
}

/// The UID of the pod (owner apiVersion `v1`, kind `Pod`) or PodGroup that controls the
/// claim: what orphans are looked up by (upstream's `claimPodOwnerIndex` and
/// `claimPodGroupOwnerIndex`; UIDs are unique across kinds, so one index serves both).
pub fn owner_uid(claim: &ResourceClaim) -> Option<&str> {
    owning_pod(claim).map(|(_, uid)| uid).or_else(|| {
        controller_of(&claim.metadata)
            .filter(|o| o.kind == "PodGroup" && is_scheduling_api_version(&o.api_version))
            .map(|o| o.uid.as_str())
    })
}

/// The name and UID of the pod that controls the claim.
pub fn owning_pod(claim: &ResourceClaim) -> Option<(&str, &str)> {
    claim
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.api_version == "v1" && o.kind == "Pod")
        .map(|o| (o.name.as_str(), o.uid.as_str()))
}

/// `findPodResourceClaim`: a claim the pod owns that was generated for `pod_claim_name` but
/// never recorded in the pod status (the controller failed in between). `owned` are the
/// claims owned by the pod; the first by name is taken, so the choice is stable.
pub fn find_orphan<'a, C: AsRef<ResourceClaim>>(
    pod_claim_name: &str,
    owned: &'a [C],
) -> Option<&'a ResourceClaim> {
    owned
        .iter()
        .map(AsRef::as_ref)
        .filter(|c| {
            c.annotations()
                .get(POD_CLAIM_NAME_ANNOTATION)
                .map(String::as_str)
                == Some(pod_claim_name)
        })
        .min_by_key(|c| c.name_any())
}

/// The entries to apply to `status.resourceClaimStatuses` of a pod or PodGroup (its
/// `entries` and `current` statuses) after this sync resolved `new` (entry name, claim name):
/// those, plus what is already recorded for the other template claims. Upstream applies only
/// the new ones, which makes the API server drop the other entries this field manager owned;
/// re-applying them keeps them.
pub fn statuses_to_record(
    entries: &[PodResourceClaim],
    current: &[PodResourceClaimStatus],
    new: &[(String, String)],
) -> Vec<(String, String)> {
    entries
        .iter()
        .filter(|pc| pc.resource_claim_template_name.is_some())
        .filter_map(|pc| {
            new.iter()
                .find(|(name, _)| name == &pc.name)
                .map(|(_, claim)| claim.clone())
                .or_else(|| {
                    current
                        .iter()
                        .find(|s| s.name == pc.name)
                        .and_then(|s| s.resource_claim_name.clone())
                })
                .map(|claim| (pc.name.clone(), claim))
        })
        .collect()
}

/// The server-side apply body for the status of `owner` (a pod or PodGroup) that records
/// `entries` (entry name, claim name).
pub fn claim_statuses_apply(owner: &ClaimOwner, entries: &[(String, String)]) -> Value {
    let statuses: Vec<Value> = entries
        .iter()
        .map(|(name, claim)| json!({"name": name, "resourceClaimName": claim}))
        .collect();
    json!({
        "apiVersion": owner.reference.api_version,
        "kind": owner.reference.kind,
        "metadata": {"name": owner.reference.name, "namespace": owner.namespace},
        "status": {"resourceClaimStatuses": statuses},
    })
}

/// The claim with `consumer` appended to `status.reservedFor`.
pub fn reserved_for_consumer(
    claim: &ResourceClaim,
    consumer: ResourceClaimConsumerReference,
) -> ResourceClaim {
    let mut reserved = claim.clone();
    let status = reserved.status.get_or_insert_with(Default::default);
    status
        .reserved_for
        .get_or_insert_with(Vec::new)
        .push(consumer);
    reserved
}

/// A `reservedFor` entry that names a pod (core group, resource `pods`).
pub fn is_pod_consumer(entry: &ResourceClaimConsumerReference) -> bool {
    entry.api_group.as_deref().unwrap_or_default().is_empty() && entry.resource == "pods"
}

/// A `reservedFor` entry that names a PodGroup.
pub fn is_group_consumer(entry: &ResourceClaimConsumerReference) -> bool {
    entry.api_group.as_deref() == Some(podgroup::GROUP) && entry.resource == podgroup::RESOURCE
}

/// Whether a pod reservation stays, given the pod found under its name (in the store, or
/// from the API server when the store did not have it): it goes when the pod is gone,
/// replaced (another UID), or done.
pub fn keep_pod_reservation(entry: &ResourceClaimConsumerReference, pod: Option<&Pod>) -> bool {
    pod_reservation(entry, pod).is_ok()
}

/// Why a reservation no longer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaleReservation {
    /// No pod or PodGroup of that name.
    Gone,
    /// One of that name with another UID.
    Replaced,
    /// The pod succeeded or failed: it will not run again.
    Done,
}

/// [`keep_pod_reservation`], with the reason when it does not hold.
pub fn pod_reservation(
    entry: &ResourceClaimConsumerReference,
    pod: Option<&Pod>,
) -> Result<(), StaleReservation> {
    let pod = pod.ok_or(StaleReservation::Gone)?;
    if pod.metadata.uid.as_deref() != Some(&entry.uid) {
        return Err(StaleReservation::Replaced);
    }
    if pod_is_done(pod) {
        return Err(StaleReservation::Done);
    }
    Ok(())
}

/// Whether a PodGroup reservation stays: it goes when the group is gone or replaced (a
/// PodGroup is never "done").
pub fn keep_group_reservation(
    entry: &ResourceClaimConsumerReference,
    group: Option<&PodGroup>,
) -> bool {
    group_reservation(entry, group).is_ok()
}

/// [`keep_group_reservation`], with the reason when it does not hold.
pub fn group_reservation(
    entry: &ResourceClaimConsumerReference,
    group: Option<&PodGroup>,
) -> Result<(), StaleReservation> {
    let group = group.ok_or(StaleReservation::Gone)?;
    if group.metadata.uid.as_deref() != Some(&entry.uid) {
        return Err(StaleReservation::Replaced);
    }
    Ok(())
}

fn has_finalizer(claim: &ResourceClaim) -> bool {
    claim
        .finalizers()
        .iter()
        .any(|f| f == DELETE_PROTECTION_FINALIZER)
}

/// What to write once the reservations still valid (`remaining`) are known.
#[derive(Debug, Clone, PartialEq)]
pub enum Release {
    Nothing,
    /// Stale reservations were dropped: write this status (UpdateStatus, so a concurrent
    /// change conflicts), then remove the finalizer if the written claim is unallocated.
    Status(ResourceClaimStatus),
    /// Being deleted and unused: clear the allocation if still set (a status write), then
    /// remove the finalizer.
    Finalize {
        clear_allocation: bool,
    },
}

/// Upstream deallocates only on the used→unused transition, or when the claim is being
/// deleted — and only claims carrying the builtin finalizer. An allocated claim that is
/// already unreserved is left alone.
pub fn release(claim: &ResourceClaim, remaining: Vec<ResourceClaimConsumerReference>) -> Release {
    let finalizer = has_finalizer(claim);
    if remaining.len() < reserved_for(claim).len() {
        let mut status = claim.status.clone().unwrap_or_default();
        if remaining.is_empty() && finalizer {
            status.allocation = None;
        }
        status.reserved_for = Some(remaining);
        return Release::Status(status);
    }
    if finalizer && claim.metadata.deletion_timestamp.is_some() && remaining.is_empty() {
        return Release::Finalize {
            clear_allocation: is_allocated(claim),
        };
    }
    Release::Nothing
}

/// The claim without the builtin finalizer, if it is unallocated and still has it.
pub fn finalizer_removed(claim: &ResourceClaim) -> Option<ResourceClaim> {
    if !has_finalizer(claim) || is_allocated(claim) {
        return None;
    }
    let mut updated = claim.clone();
    if let Some(finalizers) = updated.metadata.finalizers.as_mut() {
        finalizers.retain(|f| f != DELETE_PROTECTION_FINALIZER);
    }
    Some(updated)
}

/// Whether an unreserved claim generated for a pod is to be deleted: its owner (looked up by
/// name, `owner`) was replaced or is done. An owner missing from the store is left to the
/// garbage collector, and a claim already being deleted is not deleted again.
pub fn delete_unused(claim: &ResourceClaim, owner: Option<&Pod>) -> bool {
    if claim.metadata.deletion_timestamp.is_some() || !reserved_for(claim).is_empty() {
        return false;
    }
    let (Some((_, uid)), Some(pod)) = (owning_pod(claim), owner) else {
        return false;
    };
    pod.metadata.uid.as_deref() != Some(uid) || pod_is_done(pod)
}

/// The `resourceclaim_controller_resource_claims` labels of a claim: allocated,
/// admin_access, source.
pub fn gauge_labels(claim: &ResourceClaim) -> [&'static str; 3] {
    let flag = |b: bool| if b { "true" } else { "false" };
    let annotations = claim.annotations();
    let source = if annotations
        .get(EXTENDED_RESOURCE_CLAIM_ANNOTATION)
        .is_some_and(|v| v == "true")
    {
        "extended_resource"
    } else if annotations
        .get(POD_CLAIM_NAME_ANNOTATION)
        .is_some_and(|v| !v.is_empty())
    {
        "resource_claim_template"
    } else {
        ""
    };
    [
        flag(is_allocated(claim)),
        flag(needs_admin_access(claim.spec.as_ref())),
        source,
    ]
}

#[cfg(test)]
mod tests {
    //! Generated names; the other decisions are tested through the controller's syncs, in the
    //! controller's `tests.rs`.

    use super::*;

    #[test]
    fn generate_name_table() {
        let a = |n: usize| "a".repeat(n);
        let b = |n: usize| "b".repeat(n);
        let cases: Vec<(&str, String, String, String)> = vec![
            (
                "short",
                "test-pod".into(),
                "acme-resource".into(),
                "test-pod-acme-resource-".into(),
            ),
            // 30 + 1 + 25 + 1 = 57: kept, trailing hyphen included.
            ("exactly 57", a(30), b(25), format!("{}-{}-", a(30), b(25))),
            // 58: both cut in proportion (31*57/58 = 30, 25*57/58 = 24), no trailing hyphen.
            ("58", a(31), b(25), format!("{}-{}", a(30), b(24))),
            // L = 72: 60*57/72 = 47, 10*57/72 = 7.
            ("60 + 10", a(60), b(10), format!("{}-{}", a(47), b(7))),
            // L = 110: 8*57/110 = 4, 100*57/110 = 51.
            (
                "long claim",
                "test-pod".into(),
                b(100),
                format!("test-{}", b(51)),
            ),
            // L = 254: 63*57/254 = 14, 189*57/254 = 42.
            ("both long", a(63), b(189), format!("{}-{}", a(14), b(42))),
        ];
        for (name, pod, claim, expected) in cases {
            assert_eq!(generate_name(&pod, &claim), expected, "{name}");
        }
        assert_eq!(generate_name(&a(60), &b(10)).len(), 55);
    }

    #[test]
    fn generate_name_always_leaves_room_for_the_suffix() {
        for pod_len in 1..=80 {
            for claim_len in 1..=80 {
                let name = generate_name(&"p".repeat(pod_len), &"c".repeat(claim_len));
                // The API server appends five random characters; names have at most 63.
                assert!(name.len() <= MAX_BASE_LEN, "{pod_len}+{claim_len}: {name}");
                let total = pod_len + claim_len + 2;
                if total <= MAX_BASE_LEN {
                    assert_eq!(
                        name,
                        format!("{}-{}-", "p".repeat(pod_len), "c".repeat(claim_len))
                    );
                } else {
                    // No trailing hyphen of its own (the claim part may come out empty).
                    let (p, c) = name.split_once('-').unwrap();
                    assert_eq!(p.len(), (pod_len * MAX_BASE_LEN / total).max(1));
                    assert_eq!(c.len(), claim_len * MAX_BASE_LEN / total);
                }
            }
        }
    }

    #[test]
    fn generate_name_never_starts_with_a_hyphen_or_leaves_a_dot_before_it() {
        // Upstream's cut gives "-ccc…" (one-character pod) and "x.-…": names the API server
        // refuses.
        let claim = "c".repeat(60);
        assert_eq!(generate_name("a", &claim), format!("a-{}", "c".repeat(54)));
        let dotted = format!("x.{}", "y".repeat(60));
        let name = generate_name(&dotted, &"c".repeat(60));
        assert!(!name.contains(".-"), "{name}");
        assert!(name.starts_with("x.yy"), "{name}");
        // The proportional cut of "ab.cd" is "ab.": the dot goes.
        assert_eq!(
            generate_name("ab.cd", &"c".repeat(70)),
            format!("ab-{}", "c".repeat(51))
        );
    }

    #[test]
    fn generate_name_non_ascii_does_not_panic() {
        // 81 bytes: the cut at 54 falls inside a character and backs off to 53.
        let pod = format!("a{}", "é".repeat(40));
        assert_eq!(generate_name(&pod, "x"), format!("a{}-", "é".repeat(26)));
        let claim = "ü".repeat(50);
        let name = generate_name("pod", &claim);
        assert!(name.len() <= MAX_BASE_LEN);
        assert!(name.starts_with("p"));
        assert_eq!(prefix("aé", 2), "a");
        assert_eq!(prefix("abc", 10), "abc");
    }
}
