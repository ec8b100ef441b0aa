//! Resource-name rules the evaluators share: `k8s.io/apimachinery/pkg/util/validation` and
//! the native/extended resource name helpers.

pub(super) const REQUESTS_PREFIX: &str = "requests.";
const DEFAULT_NAMESPACE_PREFIX: &str = "kubernetes.io/";
pub(super) const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";
pub(super) const REQUESTS_DEVICE_CLASS_PREFIX: &str =
    "requests.deviceclass.resource.kubernetes.io/";

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, the name part of a qualified name and
/// the body of a label value.
fn is_qualified_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            is_alnum(first)
                && is_alnum(last)
                && bytes
                    .iter()
                    .all(|&b| is_alnum(b) || b == b'-' || b == b'_' || b == b'.')
        }
        _ => false,
    }
}

fn is_dns1123_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    let lower_alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            lower_alnum(first)
                && lower_alnum(last)
                && bytes.iter().all(|&b| lower_alnum(b) || b == b'-')
        }
        _ => false,
    }
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// `validation.IsQualifiedName`.
pub(super) fn is_qualified_name(value: &str) -> bool {
    let mut parts = value.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, None) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => return false,
    };
    if prefix.is_some_and(|p| p.is_empty() || !is_dns1123_subdomain(p)) {
        return false;
    }
    name.len() <= 63 && is_qualified_name_part(name)
}

/// `validation.IsValidLabelValue`: empty, or up to 63 characters of the name pattern.
pub(super) fn is_valid_label_value(value: &str) -> bool {
    value.is_empty() || (value.len() <= 63 && is_qualified_name_part(value))
}

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
