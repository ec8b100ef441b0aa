//! Test hooks: injected failures and latency, and the request log tests assert on.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// What a request is, in Kubernetes terms, as the fault rules and the request log see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// get, list, watch, create, update, patch, delete, deletecollection; or `discovery`.
    pub verb: String,
    pub group: String,
    /// Plural resource name, e.g. `pods`; empty for non-resource paths.
    pub resource: String,
    /// `status`, `scale`, or empty.
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

impl RequestInfo {
    /// The question this request puts to RBAC.
    pub fn rbac(&self) -> crate::rbac::Request<'_> {
        crate::rbac::Request {
            verb: &self.verb,
            group: &self.group,
            resource: &self.resource,
            subresource: &self.subresource,
            namespace: &self.namespace,
            name: &self.name,
        }
    }
}

/// One request the server answered.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    pub info: RequestInfo,
    pub method: String,
    pub path: String,
    pub query: String,
    pub user_agent: String,
    /// Who the request authenticated as (empty when its token was refused).
    pub user: String,
    /// The request body, for writes.
    pub body: Option<Value>,
    pub code: u16,
    pub at: Instant,
}

impl RequestRecord {
    /// Whether the request asked to change something (even if it failed).
    pub fn is_write(&self) -> bool {
        matches!(
            self.info.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }

    /// Shorthand for the common assertion: `verb` on `resource` (and `subresource`, "" for none).
    pub fn is(&self, verb: &str, resource: &str, subresource: &str) -> bool {
        self.info.verb == verb
            && self.info.resource == resource
            && self.info.subresource == subresource
    }
}

/// One fault rule. Fields left `None` match everything; `name` may end in `*`.
#[derive(Debug, Clone, Default)]
pub struct Fault {
    verb: Option<String>,
    resource: Option<String>,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    user_agent: Option<String>,
    code: Option<u16>,
    retry_after: Option<u64>,
    latency: Option<Duration>,
    times: Option<usize>,
}

impl Fault {
    /// Answer matching requests with this HTTP status and a `Status` body.
    pub fn error(code: u16) -> Self {
        Self {
            code: Some(code),
            ..Self::default()
        }
    }

    /// Delay matching requests before they are handled.
    pub fn latency(delay: Duration) -> Self {
        Self {
            latency: Some(delay),
            ..Self::default()
        }
    }

    pub fn verb(mut self, verb: &str) -> Self {
        self.verb = Some(verb.into());
        self
    }

    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.into());
        self
    }

    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = Some(subresource.into());
        self
    }

    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Object name, or a prefix ending in `*`.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Only requests whose User-Agent contains this text (to target one client process).
    pub fn user_agent(mut self, text: &str) -> Self {
        self.user_agent = Some(text.into());
        self
    }

    /// Adds a `Retry-After` header (seconds) to the injected error.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// Fire for the next `n` matching requests only (default: until cleared).
    pub fn times(mut self, n: usize) -> Self {
        self.times = Some(n);
        self
    }

    fn matches(&self, info: &RequestInfo, user_agent: &str) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        let name_ok = self
            .name
            .as_deref()
            .is_none_or(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => info.name.starts_with(prefix),
                None => info.name == pattern,
            });
        eq(&self.verb, &info.verb)
            && eq(&self.resource, &info.resource)
            && eq(&self.subresource, &info.subresource)
            && eq(&self.namespace, &info.namespace)
            && name_ok
            && self
                .user_agent
                .as_deref()
                .is_none_or(|ua| user_agent.contains(ua))
    }
}

/// What the rules decided for one request.
#[derive(Debug, Default)]
pub struct Verdict {
    pub latency: Duration,
    /// Status code and optional Retry-After seconds.
    pub error: Option<(u16, Option<u64>)>,
}

/// Decides whether a request (and its user agent) is allowed; `Err` carries the reason the
/// 403 reports. Discovery requests are not asked: every authenticated client may make them.
pub type Authorizer = Box<dyn Fn(&RequestInfo, &str) -> Result<(), String> + Send + Sync>;

/// How requests are authorized.
#[derive(Default)]
enum Access {
    /// Everything is allowed.
    #[default]
    Open,
    /// The test's function decides.
    Function(Authorizer),
    /// RBAC decides, from the roles and bindings stored in the server.
    Rbac,
}

#[derive(Default)]
pub struct Faults {
    rules: Mutex<Vec<Fault>>,
    log: Mutex<Vec<RequestRecord>>,
    access: Mutex<Access>,
}

impl Faults {
    /// Installs an authorizer: requests it refuses get 403 Forbidden, as RBAC would give.
    /// Replaces RBAC enforcement.
    pub fn authorize(&self, authorizer: Authorizer) {
        *lock(&self.access) = Access::Function(authorizer);
    }

    /// Authorizes every request by RBAC from the stored roles and bindings, as the API
    /// server does. Replaces an installed authorizer function.
    pub fn enforce_rbac(&self) {
        *lock(&self.access) = Access::Rbac;
    }

    pub fn rbac_enforced(&self) -> bool {
        matches!(*lock(&self.access), Access::Rbac)
    }

    /// The authorizer function's verdict on a request; `Ok` without one (and under RBAC,
    /// which the HTTP layer evaluates).
    pub fn access(&self, info: &RequestInfo, user_agent: &str) -> Result<(), String> {
        if info.verb == "discovery" {
            return Ok(());
        }
        match &*lock(&self.access) {
            Access::Function(authorize) => authorize(info, user_agent),
            Access::Open | Access::Rbac => Ok(()),
        }
    }

    pub fn add(&self, fault: Fault) {
        lock(&self.rules).push(fault);
    }

    pub fn clear(&self) {
        lock(&self.rules).clear();
    }

    /// Consumes one firing of every matching rule: latencies add up, the first error wins.
    pub fn check(&self, info: &RequestInfo, user_agent: &str) -> Verdict {
        let mut verdict = Verdict::default();
        let mut rules = lock(&self.rules);
        for rule in rules.iter_mut().filter(|r| r.matches(info, user_agent)) {
            if rule.times == Some(0) {
                continue;
            }
            if let Some(latency) = rule.latency {
                verdict.latency += latency;
            }
            if let Some(code) = rule.code {
                if verdict.error.is_some() {
                    continue;
                }
                verdict.error = Some((code, rule.retry_after));
            }
            if let Some(n) = rule.times.as_mut() {
                *n -= 1;
            }
        }
        rules.retain(|r| r.times != Some(0));
        verdict
    }

    pub fn record(&self, record: RequestRecord) {
        lock(&self.log).push(record);
    }

    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.log).clone()
    }

    pub fn count(&self, filter: impl Fn(&RequestRecord) -> bool) -> usize {
        lock(&self.log).iter().filter(|r| filter(r)).count()
    }

    pub fn clear_requests(&self) {
        lock(&self.log).clear();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(verb: &str, resource: &str, name: &str) -> RequestInfo {
        RequestInfo {
            verb: verb.into(),
            resource: resource.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn rule_fires_the_given_number_of_times_then_goes() {
        let faults = Faults::default();
        faults.add(Fault::error(500).verb("list").resource("pods").times(2));
        assert_eq!(
            faults.check(&info("list", "pods", ""), "").error,
            Some((500, None))
        );
        assert_eq!(faults.check(&info("list", "nodes", ""), "").error, None);
        assert_eq!(
            faults.check(&info("list", "pods", ""), "").error,
            Some((500, None))
        );
        assert_eq!(faults.check(&info("list", "pods", ""), "").error, None);
    }

    #[test]
    fn name_prefix_and_user_agent_narrow_a_rule() {
        let faults = Faults::default();
        faults.add(
            Fault::error(429)
                .retry_after(3)
                .name("web-*")
                .user_agent("kcm-a"),
        );
        assert_eq!(
            faults.check(&info("get", "pods", "web-1"), "kcm-b").error,
            None
        );
        assert_eq!(
            faults.check(&info("get", "pods", "db-1"), "kcm-a").error,
            None
        );
        assert_eq!(
            faults
                .check(&info("get", "pods", "web-1"), "kcm-a/1.0")
                .error,
            Some((429, Some(3)))
        );
    }

    #[test]
    fn latencies_add_up() {
        let faults = Faults::default();
        faults.add(Fault::latency(Duration::from_millis(20)));
        faults.add(Fault::latency(Duration::from_millis(30)).verb("get"));
        assert_eq!(
            faults.check(&info("get", "pods", "a"), "").latency,
            Duration::from_millis(50)
        );
    }
}
