//! Every controller kcm has, and what their descriptors say of each: the names
//! `--controllers` accepts, the gates each needs. The process launches from this list and the
//! command line reads its names; the controllers never look at it.

use std::fmt;

use super::{Controller, Descriptor};
use super::{disruption, resourceclaim, resourcequota, storageversiongc, ttl};
use crate::features::FeatureGate;

/// Every controller kcm has, in [`Controller::ALL`] order (indexed by it). Adding one is a
/// variant there and a line here.
pub const CONTROLLERS: &[Descriptor; Controller::ALL.len()] = &[
    resourcequota::DESCRIPTOR,
    resourceclaim::DESCRIPTOR,
    disruption::DESCRIPTOR,
    ttl::DESCRIPTOR,
    storageversiongc::DESCRIPTOR,
];

/// What the descriptors say of each controller.
impl Controller {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_are_in_controller_order() {
        for (index, controller) in Controller::ALL.into_iter().enumerate() {
            assert_eq!(controller as usize, index);
            assert_eq!(CONTROLLERS[index].controller, controller);
            assert_eq!(controller.descriptor().controller, controller);
        }
    }
}
