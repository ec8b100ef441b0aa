//! Resource names and their rules, as the evaluators share them: the compute resources' names
//! and the native/extended resource name helpers (name validation itself is
//! [`crate::k8s::validation`]'s).

use crate::k8s::validation::is_qualified_name;

pub(super) const CPU: &str = "cpu";
pub(super) const MEMORY: &str = "memory";
pub(super) const HUGEPAGES_PREFIX: &str = "hugepages-";
pub(super) const REQUESTS_PREFIX: &str = "requests.";
const DEFAULT_NAMESPACE_PREFIX: &str = "kubernetes.io/";
pub(super) const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";
pub(super) const REQUESTS_DEVICE_CLASS_PREFIX: &str =
    "requests.deviceclass.resource.kubernetes.io/";

/// `helper.IsNativeResource`: unprefixed, or anywhere in `*kubernetes.io/` (upstream
/// checks `Contains`, not a prefix).
fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains(DEFAULT_NAMESPACE_PREFIX)
}

/// `helper.IsExtendedResourceName`.
fn is_extended_resource_name(name: &str) -> bool {
    !is_native_resource(name)
        && !name.starts_with(REQUESTS_PREFIX)
        && is_qualified_name(&format!("{REQUESTS_PREFIX}{name}"))
}

/// `schedutil.IsDRAExtendedResourceName`: an extended resource, or the implicit
/// `deviceclass.resource.kubernetes.io/<class>` name.
pub(super) fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.starts_with(DEVICE_CLASS_PREFIX)
}

/// pods.go `isExtendedResourceNameForQuota`.
pub(super) fn is_extended_resource_name_for_quota(name: &str) -> bool {
    (!is_native_resource(name) || name.starts_with(REQUESTS_DEVICE_CLASS_PREFIX))
        && name.starts_with(REQUESTS_PREFIX)
}
