//! RBAC as the API server evaluates it: the rule matcher, which subjects a binding names, an
//! authorizer that decides from the ClusterRoles, ClusterRoleBindings, Roles and
//! RoleBindings stored in this server, and the forbidden message the API server prints.

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use serde::de::DeserializeOwned;

use crate::reviews::{SUPERUSERS, UserInfo};
use crate::store::Store;

/// One resource request, as the API server's authorizers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    /// Empty for the resource itself.
    pub subresource: &'a str,
    /// Empty for cluster-scoped resources and requests across all namespaces.
    pub namespace: &'a str,
    /// Empty for collections (list, watch, create).
    pub name: &'a str,
}

fn covers(patterns: &[String], value: &str) -> bool {
    patterns.iter().any(|p| p == "*" || p == value)
}

/// RBAC's resource matching (`ResourceMatches`): `*`, the exact `resource` or
/// `resource/subresource`, and `*/subresource`. There is no `resource/*`.
fn covers_resource(patterns: &[String], resource: &str, subresource: &str) -> bool {
    patterns.iter().any(|p| {
        if p == "*" {
            return true;
        }
        match p.split_once('/') {
            None => subresource.is_empty() && p == resource,
            Some((r, s)) => {
                !subresource.is_empty() && s == subresource && (r == resource || r == "*")
            }
        }
    })
}

/// Whether one of `rules` allows `request` (its namespace is not looked at: which rules apply
/// where is the bindings' business).
pub fn allows(rules: &[PolicyRule], request: &Request) -> bool {
    rules.iter().any(|rule| {
        covers(&rule.verbs, request.verb)
            && covers(
                rule.api_groups.as_deref().unwrap_or_default(),
                request.group,
            )
            && covers_resource(
                rule.resources.as_deref().unwrap_or_default(),
                request.resource,
                request.subresource,
            )
            && rule
                .resource_names
                .as_deref()
                .is_none_or(|names| names.is_empty() || names.iter().any(|n| n == request.name))
    })
}

/// Whether a binding's subject names `user` (`appliesTo`): a user by name, a group the user
/// is in, or a ServiceAccount by its user name; a ServiceAccount subject without a namespace
/// means one in the binding's namespace.
pub fn names(subject: &Subject, binding_namespace: &str, user: &UserInfo) -> bool {
    match subject.kind.as_str() {
        "User" => subject.name == user.name,
        "Group" => user.groups.contains(&subject.name),
        "ServiceAccount" => {
            let namespace = subject
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace);
            !namespace.is_empty()
                && user.name == format!("system:serviceaccount:{namespace}:{}", subject.name)
        }
        _ => false,
    }
}

/// The RBAC authorizer's decision: allowed, or not with the reason it gives (empty, or
/// `RBAC: ...` naming roles the bindings of the user refer to and that do not exist).
pub fn authorize(store: &Store, user: &UserInfo, request: &Request) -> Result<(), String> {
    if user.groups.iter().any(|g| g == SUPERUSERS) {
        return Ok(());
    }
    let mut missing = Vec::new();
    let mut rules_of = |role_ref: &RoleRef, namespace: &str| -> Vec<PolicyRule> {
        let found = if role_ref.kind == "Role" {
            stored::<Role>(store, "roles")
                .into_iter()
                .find(|r| {
                    r.metadata.name.as_deref() == Some(&role_ref.name)
                        && r.metadata.namespace.as_deref() == Some(namespace)
                })
                .map(|r| r.rules)
        } else {
            stored::<ClusterRole>(store, "clusterroles")
                .into_iter()
                .find(|r| r.metadata.name.as_deref() == Some(&role_ref.name))
                .map(|r| r.rules)
        };
        match found {
            Some(rules) => rules.unwrap_or_default(),
            None => {
                missing.push(format!(
                    "{}.rbac.authorization.k8s.io \"{}\" not found",
                    role_ref.kind.to_lowercase(),
                    role_ref.name
                ));
                Vec::new()
            }
        }
    };
    let applies = |subjects: &Option<Vec<Subject>>, namespace: &str| {
        subjects.iter().flatten().any(|s| names(s, namespace, user))
    };
    for binding in stored::<ClusterRoleBinding>(store, "clusterrolebindings") {
        if applies(&binding.subjects, "") && allows(&rules_of(&binding.role_ref, ""), request) {
            return Ok(());
        }
    }
    if !request.namespace.is_empty() {
        for binding in stored::<RoleBinding>(store, "rolebindings") {
            let namespace = binding.metadata.namespace.clone().unwrap_or_default();
            if namespace == request.namespace
                && applies(&binding.subjects, &namespace)
                && allows(&rules_of(&binding.role_ref, &namespace), request)
            {
                return Ok(());
            }
        }
    }
    Err(match missing.as_slice() {
        [] => String::new(),
        [one] => format!("RBAC: {one}"),
        many => format!("RBAC: [{}]", many.join(", ")),
    })
}

/// The stored RBAC objects of one kind; any that do not parse are left out (the API server
/// would not have stored them).
fn stored<T: DeserializeOwned>(store: &Store, plural: &str) -> Vec<T> {
    store
        .objects("rbac.authorization.k8s.io", plural)
        .iter()
        .filter_map(|o| serde_json::from_value(o.as_ref().clone()).ok())
        .collect()
}

/// The message of a 403 as the API server words it (`ForbiddenStatusError`):
/// `<resource>.<group> "<name>" is forbidden: User "<user>" cannot <verb> resource
/// "<resource>/<subresource>" in API group "<group>" in the namespace "<ns>"` (or `at the
/// cluster scope`), then `: <reason>` when the authorizer gave one.
pub fn forbidden_message(user: &str, request: &Request, reason: &str) -> String {
    let resource = if request.subresource.is_empty() {
        request.resource.to_string()
    } else {
        format!("{}/{}", request.resource, request.subresource)
    };
    let scope = if request.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", request.namespace)
    };
    let mut why = format!(
        "User \"{user}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        request.verb, request.group
    );
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    let qualified = if request.group.is_empty() {
        request.resource.to_string()
    } else {
        format!("{}.{}", request.resource, request.group)
    };
    if request.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} \"{}\" is forbidden: {why}", request.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str], names: &[&str]) -> PolicyRule {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        PolicyRule {
            api_groups: Some(strings(groups)),
            resources: Some(strings(resources)),
            verbs: strings(verbs),
            resource_names: (!names.is_empty()).then(|| strings(names)),
            non_resource_urls: None,
        }
    }

    fn request<'a>(
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        sub: &'a str,
        name: &'a str,
    ) -> Request<'a> {
        Request {
            verb,
            group,
            resource,
            subresource: sub,
            namespace: "",
            name,
        }
    }

    #[test]
    fn resources_match_as_rbac_matches_them() {
        let any_scale = [rule(&["*"], &["*/scale"], &["get"], &[])];
        assert!(allows(
            &any_scale,
            &request("get", "apps", "deployments", "scale", "d")
        ));
        assert!(!allows(
            &any_scale,
            &request("get", "apps", "deployments", "", "d")
        ));
        assert!(!allows(
            &any_scale,
            &request("update", "apps", "deployments", "scale", "d")
        ));
        // `pods/*` is not RBAC syntax: it matches nothing.
        let pods_any = [rule(&[""], &["pods/*"], &["get"], &[])];
        assert!(!allows(
            &pods_any,
            &request("get", "", "pods", "status", "p")
        ));
        let everything = [rule(&["*"], &["*"], &["list", "watch"], &[])];
        assert!(allows(&everything, &request("list", "", "pods", "", "")));
        assert!(allows(
            &everything,
            &request("list", "", "pods", "status", "")
        ));
        assert!(!allows(&everything, &request("get", "", "pods", "", "p")));
        let status = [rule(&[""], &["pods/status"], &["patch"], &[])];
        assert!(allows(
            &status,
            &request("patch", "", "pods", "status", "p")
        ));
        assert!(!allows(&status, &request("patch", "", "pods", "", "p")));
    }

    #[test]
    fn resource_names_limit_named_requests_only() {
        let rules = [rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["get", "update"],
            &["kcm"],
        )];
        assert!(allows(
            &rules,
            &request("update", "coordination.k8s.io", "leases", "", "kcm")
        ));
        assert!(!allows(
            &rules,
            &request("update", "coordination.k8s.io", "leases", "", "other")
        ));
        assert!(!allows(
            &rules,
            &request("get", "coordination.k8s.io", "leases", "", "")
        ));
    }

    #[test]
    fn subjects_name_users_groups_and_service_accounts() {
        let sa = UserInfo::service_account("kube-system", "ttl-controller");
        let subject = |kind: &str, name: &str, namespace: Option<&str>| Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: namespace.map(String::from),
            api_group: None,
        };
        assert!(names(
            &subject("ServiceAccount", "ttl-controller", Some("kube-system")),
            "",
            &sa
        ));
        assert!(names(
            &subject("ServiceAccount", "ttl-controller", None),
            "kube-system",
            &sa
        ));
        assert!(!names(
            &subject("ServiceAccount", "ttl-controller", None),
            "",
            &sa
        ));
        assert!(names(
            &subject("Group", "system:serviceaccounts:kube-system", None),
            "",
            &sa
        ));
        assert!(names(
            &subject("Group", "system:authenticated", None),
            "",
            &sa
        ));
        assert!(!names(&subject("User", "ttl-controller", None), "", &sa));
        let kcm = UserInfo::new("system:kube-controller-manager", &[]);
        assert!(names(
            &subject("User", "system:kube-controller-manager", None),
            "",
            &kcm
        ));
    }

    #[test]
    fn forbidden_messages_are_the_api_servers() {
        let binding = Request {
            verb: "update",
            group: "resource.k8s.io",
            resource: "resourceclaims",
            subresource: "binding",
            namespace: "",
            name: "",
        };
        assert_eq!(
            forbidden_message("system:serviceaccount:kube-system:kcm", &binding, ""),
            "resourceclaims.resource.k8s.io is forbidden: User \"system:serviceaccount:kube-system:kcm\" cannot update resource \"resourceclaims/binding\" in API group \"resource.k8s.io\" at the cluster scope"
        );
        let get = Request {
            verb: "get",
            group: "",
            resource: "pods",
            subresource: "",
            namespace: "default",
            name: "web",
        };
        assert_eq!(
            forbidden_message(
                "alice",
                &get,
                "RBAC: role.rbac.authorization.k8s.io \"r\" not found"
            ),
            "pods \"web\" is forbidden: User \"alice\" cannot get resource \"pods\" in API group \"\" in the namespace \"default\": RBAC: role.rbac.authorization.k8s.io \"r\" not found"
        );
    }
}
