//! The RBAC each part of kcm needs, as one table in code: every controller's entry names its
//! rules (within upstream's bootstrap role for that controller's service account) and the
//! reads its shared informers make; leader election and service account credentials have
//! their own. The manifests in `deploy/` are checked against this table, the table against
//! upstream's bootstrap roles, and the integration tests refuse any request the roles do not
//! allow, so code, table and manifests cannot drift apart. (The rule matcher the tests use is
//! kube-testserver's `rbac`.)

use k8s_openapi::api::rbac::v1::PolicyRule;

/// One RBAC rule: these verbs on these resources (`resource` or `resource/subresource`, `*`
/// wildcards as RBAC has them) in these API groups, optionally only on these names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub groups: &'static [&'static str],
    pub resources: &'static [&'static str],
    pub verbs: &'static [&'static str],
    pub names: &'static [&'static str],
}

impl Rule {
    pub const fn new(
        groups: &'static [&'static str],
        resources: &'static [&'static str],
        verbs: &'static [&'static str],
    ) -> Self {
        Self {
            groups,
            resources,
            verbs,
            names: &[],
        }
    }

    pub const fn named(self, names: &'static [&'static str]) -> Self {
        Self { names, ..self }
    }

    pub fn policy_rule(&self) -> PolicyRule {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        PolicyRule {
            api_groups: Some(strings(self.groups)),
            resources: Some(strings(self.resources)),
            verbs: strings(self.verbs),
            resource_names: (!self.names.is_empty()).then(|| strings(self.names)),
            non_resource_urls: None,
        }
    }
}

/// Upstream's `eventsRule()`: what every controller that records events is given.
pub const EVENTS: Rule = Rule::new(
    &["", "events.k8s.io"],
    &["events"],
    &["create", "update", "patch"],
);

/// What the built-in ClusterRole `system:auth-delegator` grants, and the secure port's
/// delegated authentication and authorization use: TokenReviews and SubjectAccessReviews.
pub const AUTH_DELEGATOR: &[Rule] = &[
    Rule::new(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
    Rule::new(
        &["authorization.k8s.io"],
        &["subjectaccessreviews"],
        &["create"],
    ),
];

/// What the built-in Role `kube-system/extension-apiserver-authentication-reader` grants
/// that the secure port uses: reading the client CA the API server publishes.
pub const AUTHENTICATION_READER: &[Rule] =
    &[Rule::new(&[""], &["configmaps"], &["get", "list", "watch"])
        .named(&["extension-apiserver-authentication"])];

/// The verbs that change nothing.
pub const READ_VERBS: &[&str] = &["get", "list", "watch"];

/// Shared-informer reads of these resources in this group: `list` and `watch`.
pub const fn informs(groups: &'static [&'static str], resources: &'static [&'static str]) -> Rule {
    Rule::new(groups, resources, &["list", "watch"])
}

/// `rules` with only their read verbs (what `--shadow` needs), rules left without a verb
/// dropped.
pub fn read_only(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    rules
        .iter()
        .filter_map(|rule| {
            let verbs: Vec<String> = rule
                .verbs
                .iter()
                .filter(|v| READ_VERBS.contains(&v.as_str()))
                .cloned()
                .collect();
            (!verbs.is_empty()).then(|| PolicyRule {
                verbs,
                ..rule.clone()
            })
        })
        .collect()
}

/// Every (group, resource, verb, name) a set of rules grants, for comparing rule sets that
/// are written differently but mean the same.
pub fn grants(
    rules: &[PolicyRule],
) -> std::collections::BTreeSet<(String, String, String, String)> {
    let mut grants = std::collections::BTreeSet::new();
    for rule in rules {
        let names = rule
            .resource_names
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| vec![String::new()]);
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    for name in &names {
                        grants.insert((
                            group.clone(),
                            resource.clone(),
                            verb.clone(),
                            name.clone(),
                        ));
                    }
                }
            }
        }
    }
    grants
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_keeps_reads_and_grants_compare_by_meaning() {
        let rules = [
            Rule::new(&[""], &["pods"], &["get", "list", "watch"]).policy_rule(),
            Rule::new(&[""], &["pods/status"], &["update", "patch"]).policy_rule(),
        ];
        let reads = read_only(&rules);
        assert_eq!(reads.len(), 1);
        let split = [
            Rule::new(&[""], &["pods"], &["watch", "get"]).policy_rule(),
            Rule::new(&[""], &["pods"], &["list"]).policy_rule(),
        ];
        assert_eq!(grants(&reads), grants(&split));
        assert_ne!(grants(&rules), grants(&split));
    }
}
