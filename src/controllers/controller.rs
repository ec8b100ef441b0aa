//! Which controllers kcm has: five of kube-controller-manager's, in canonical order. All else
//! about one (its names, gates, RBAC, how it runs) is in its `Descriptor` ([`super`]). The
//! descriptors run on the settings, and the settings name controllers, so this list stands
//! apart, below both.

/// The kube-controller-manager controllers kcm implements, in canonical order; what each is
/// lives in its `Descriptor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Controller {
    ResourceQuota,
    ResourceClaim,
    Disruption,
    Ttl,
    StorageVersionGc,
}

impl Controller {
    pub const ALL: [Controller; 5] = [
        Controller::ResourceQuota,
        Controller::ResourceClaim,
        Controller::Disruption,
        Controller::Ttl,
        Controller::StorageVersionGc,
    ];
}
