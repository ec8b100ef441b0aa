//! Which controller: kcm's five, named as kube-controller-manager names them. What each one
//! is and needs lives in its [`Descriptor`].

use std::fmt;

use super::{CONTROLLERS, Descriptor};
use crate::features::FeatureGate;

/// The kube-controller-manager controllers kcm implements, in canonical order; what each is
/// lives in its [`Descriptor`].
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

    /// Its name, aliases, gates, RBAC and constructor.
    pub fn descriptor(self) -> &'static Descriptor {
        &CONTROLLERS[self as usize]
    }

    /// kube-controller-manager's name, as accepted by --controllers.
    pub fn canonical_name(self) -> &'static str {
        self.descriptor().name
    }

    /// Older names kube-controller-manager still accepts.
    pub fn aliases(self) -> &'static [&'static str] {
        self.descriptor().aliases
    }

    /// Gates that must all be on for the controller to start, checked in this order.
    pub fn required_gates(self) -> &'static [FeatureGate] {
        self.descriptor().required_gates
    }

    /// Looks up a canonical name or an alias (exact match, as kube-controller-manager does).
    pub fn from_name(name: &str) -> Option<Controller> {
        Controller::ALL.into_iter().find(|controller| {
            controller.canonical_name() == name || controller.aliases().contains(&name)
        })
    }
}

impl fmt::Display for Controller {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.canonical_name())
    }
}
