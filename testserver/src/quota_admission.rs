//! The API server's ResourceQuota admission plugin, for pod creation: a pod in a namespace
//! whose quotas constrain its compute resources must specify them, and may not take a
//! quota's `status.used` past its `status.hard`; an admitted pod's usage is added to each
//! matching quota's `status.used` before the pod is stored, as the real plugin does. kcm's
//! resourcequota controller computes exactly the status this reads, so tests and the demo
//! see what a cluster would refuse.
//!
//! Covered: container and init-container requests and limits (cpu, memory,
//! ephemeral-storage, hugepages, extended resources), `pods` and `count/pods`, and the
//! `BestEffort`, `NotBestEffort`, `Terminating`, `NotTerminating` and `PriorityClass`
//! scopes. A quota with another scope is treated as not matching; other resource types are
//! admitted without a quota check (see the crate README).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::error::ApiError;
use kcm_values::quantity::{Format, Quantity, QuantityError};

type ResourceList = BTreeMap<String, Quantity>;

/// The name a compute resource is charged under, without its `requests.` or `limits.` prefix.
fn unprefixed(resource: &str) -> &str {
    resource
        .strip_prefix("requests.")
        .or_else(|| resource.strip_prefix("limits."))
        .unwrap_or(resource)
}

/// Resources every container must name when a quota constrains them: cpu and memory under
/// each of their names (upstream keeps this for backward compatibility: quotas on cpu and
/// memory predate QoS classes).
fn must_specify(resource: &str) -> bool {
    matches!(unprefixed(resource), "cpu" | "memory")
}

/// A quota whose `status.used` admission changes: its index among the quotas given, and
/// the new `status.used`.
pub(crate) struct UsedUpdate {
    pub index: usize,
    pub used: Value,
}

/// Admits the pod named `name` against its namespace's `quotas`, or refuses it with the
/// API server's 403. Returns the `status.used` to store for each quota the pod counts in.
pub(crate) fn admit_pod(
    quotas: &[&Value],
    pod: &Value,
    name: &str,
) -> Result<Vec<UsedUpdate>, ApiError> {
    let forbidden = |why: String| {
        let mut err = ApiError::forbidden(format!("pods \"{name}\" is forbidden: {why}"));
        err.details = Some(serde_json::json!({ "name": name, "kind": "pods" }));
        err
    };
    let usage = pod_usage(pod).map_err(|e| forbidden(e.to_string()))?;
    let mut interesting = Vec::new();
    for (index, quota) in quotas.iter().enumerate() {
        let quota_name = quota["metadata"]["name"].as_str().unwrap_or_default();
        let hard = resource_list(&quota["status"]["hard"]).map_err(|e| forbidden(e.to_string()))?;
        let restricted: Vec<&String> = hard.keys().filter(|r| pod_resource(r)).collect();
        if restricted.is_empty() || !matches_scopes(quota, pod) {
            continue;
        }
        let missing = missing_resources(pod, &restricted);
        if !missing.is_empty() {
            return Err(forbidden(format!(
                "failed quota: {quota_name}: must specify {missing}"
            )));
        }
        let used = resource_list(&quota["status"]["used"]).map_err(|e| forbidden(e.to_string()))?;
        if restricted.iter().any(|r| !used.contains_key(*r)) {
            let names: Vec<&str> = restricted.iter().map(|r| r.as_str()).collect();
            return Err(forbidden(format!(
                "status unknown for quota: {quota_name}, resources: {}",
                names.join(",")
            )));
        }
        interesting.push((index, quota_name, hard, used));
    }
    let mut updates = Vec::new();
    for (index, quota_name, hard, used) in interesting {
        let requested: ResourceList = usage
            .iter()
            .filter(|(r, _)| hard.contains_key(*r))
            .map(|(r, q)| (r.clone(), q.clone()))
            .collect();
        let new_used = add(&used, &requested)
            .ok_or_else(|| forbidden(format!("quota {quota_name}: usage out of range")))?;
        let exceeded: Vec<&String> = requested
            .keys()
            .filter(|r| new_used.get(*r) > hard.get(*r))
            .collect();
        if !exceeded.is_empty() {
            let show = |list: &ResourceList| {
                exceeded
                    .iter()
                    .filter_map(|r| list.get(*r).map(|q| format!("{r}={q}")))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            return Err(forbidden(format!(
                "exceeded quota: {quota_name}, requested: {}, used: {}, limited: {}",
                show(&requested),
                show(&used),
                show(&hard)
            )));
        }
        if new_used != used || new_used.len() != used.len() {
            let used: serde_json::Map<String, Value> = new_used
                .iter()
                .map(|(r, q)| (r.clone(), Value::String(q.to_string())))
                .collect();
            updates.push(UsedUpdate {
                index,
                used: Value::Object(used),
            });
        }
    }
    Ok(updates)
}

/// Whether a quota constrains pods with this resource: their count, and cpu, memory,
/// ephemeral storage and hugepages under each of their names (`podResources` and the
/// hugepages prefixes upstream), and extended resources, which are requested only.
fn pod_resource(name: &str) -> bool {
    matches!(name, "pods" | "count/pods")
        || matches!(unprefixed(name), "cpu" | "memory" | "ephemeral-storage")
        || unprefixed(name).starts_with("hugepages-")
        || (name.starts_with("requests.") && name.contains('/'))
}

/// `<resource> for: <containers>` for each must-specify resource some container lacks,
/// sorted, as upstream words it.
fn missing_resources(pod: &Value, restricted: &[&String]) -> String {
    let required: BTreeSet<&str> = restricted
        .iter()
        .map(|r| r.as_str())
        .filter(|r| must_specify(r))
        .collect();
    let mut missing: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for container in containers(pod) {
        let present = container_resources(container);
        for resource in &required {
            if !present.contains(resource) {
                let name = container["name"].as_str().unwrap_or_default();
                missing.entry(resource).or_default().insert(name);
            }
        }
    }
    missing
        .iter()
        .map(|(resource, names)| {
            let names: Vec<&str> = names.iter().copied().collect();
            format!("{resource} for: {}", names.join(","))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn containers(pod: &Value) -> impl Iterator<Item = &Value> {
    ["containers", "initContainers"]
        .into_iter()
        .flat_map(|field| pod["spec"][field].as_array().into_iter().flatten())
}

/// The quota resource names one container's requests and limits provide.
fn container_resources(container: &Value) -> BTreeSet<&'static str> {
    let mut names = BTreeSet::new();
    let has = |kind: &str, resource: &str| container["resources"][kind].get(resource).is_some();
    for resource in ["cpu", "memory"] {
        if has("requests", resource) {
            names.insert(if resource == "cpu" { "cpu" } else { "memory" });
            names.insert(if resource == "cpu" {
                "requests.cpu"
            } else {
                "requests.memory"
            });
        }
        if has("limits", resource) {
            names.insert(if resource == "cpu" {
                "limits.cpu"
            } else {
                "limits.memory"
            });
        }
    }
    names
}

/// What the pod charges to a quota: `count/pods` always; `pods` and its compute resources
/// unless it is terminal (containers summed, each init container a floor, plus overhead).
fn pod_usage(pod: &Value) -> Result<ResourceList, QuantityError> {
    let one = Quantity::from_integer(1, Format::DecimalSI);
    let mut usage = ResourceList::from([("count/pods".to_string(), one.clone())]);
    if matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    ) {
        return Ok(usage);
    }
    let mut requests = ResourceList::new();
    let mut limits = ResourceList::new();
    for container in pod["spec"]["containers"].as_array().into_iter().flatten() {
        requests = add(
            &requests,
            &resource_list(&container["resources"]["requests"])?,
        )
        .unwrap_or_default();
        limits =
            add(&limits, &resource_list(&container["resources"]["limits"])?).unwrap_or_default();
    }
    for init in pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        requests = max(&requests, &resource_list(&init["resources"]["requests"])?);
        limits = max(&limits, &resource_list(&init["resources"]["limits"])?);
    }
    let overhead = resource_list(&pod["spec"]["overhead"])?;
    if !overhead.is_empty() {
        requests = add(&requests, &overhead).unwrap_or_default();
        let limited = limits.clone();
        for (resource, q) in &overhead {
            if let Some(limit) = limited.get(resource) {
                limits.insert(resource.clone(), limit.checked_add(q).unwrap_or_default());
            }
        }
    }
    usage.insert("pods".into(), one);
    for (resource, q) in &requests {
        match resource.as_str() {
            "cpu" | "memory" | "ephemeral-storage" => {
                usage.insert(resource.clone(), q.clone());
                usage.insert(format!("requests.{resource}"), q.clone());
            }
            r if r.starts_with("hugepages-") => {
                usage.insert(format!("requests.{r}"), q.clone());
            }
            r if r.contains('/') && !r.contains("kubernetes.io/") => {
                usage.insert(format!("requests.{r}"), q.clone());
            }
            _ => {}
        }
    }
    for (resource, q) in &limits {
        if matches!(resource.as_str(), "cpu" | "memory" | "ephemeral-storage") {
            usage.insert(format!("limits.{resource}"), q.clone());
        }
    }
    Ok(usage)
}

/// Whether the pod falls in every scope of the quota.
fn matches_scopes(quota: &Value, pod: &Value) -> bool {
    let scopes = quota["spec"]["scopes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|scope| (scope, "Exists", Vec::new()));
    let selector = quota["spec"]["scopeSelector"]["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let values = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>();
            (
                e["scopeName"].as_str().unwrap_or_default(),
                e["operator"].as_str().unwrap_or_default(),
                values,
            )
        });
    scopes
        .chain(selector)
        .all(|(scope, operator, values)| scope_matches(pod, scope, operator, &values))
}

fn scope_matches(pod: &Value, scope: &str, operator: &str, values: &[&str]) -> bool {
    let terminating = pod["spec"]["activeDeadlineSeconds"]
        .as_i64()
        .is_some_and(|s| s >= 0);
    match scope {
        "Terminating" => terminating,
        "NotTerminating" => !terminating,
        "BestEffort" => best_effort(pod),
        "NotBestEffort" => !best_effort(pod),
        "PriorityClass" => {
            let class = pod["spec"]["priorityClassName"].as_str();
            match operator {
                "Exists" => class.is_some_and(|c| !c.is_empty()),
                "DoesNotExist" => class.is_none_or(str::is_empty),
                "In" => class.is_some_and(|c| values.contains(&c)),
                "NotIn" => !class.is_some_and(|c| values.contains(&c)),
                _ => false,
            }
        }
        _ => false,
    }
}

/// The BestEffort QoS class: no container requests or limits cpu or memory above zero.
fn best_effort(pod: &Value) -> bool {
    !containers(pod).any(|c| {
        ["requests", "limits"].iter().any(|kind| {
            ["cpu", "memory"].iter().any(|r| {
                c["resources"][kind][r]
                    .as_str()
                    .and_then(|q| q.parse::<Quantity>().ok())
                    .is_some_and(|q| !q.is_zero() && !q.is_negative())
            })
        })
    })
}

fn resource_list(value: &Value) -> Result<ResourceList, QuantityError> {
    let mut list = ResourceList::new();
    for (name, q) in value.as_object().into_iter().flatten() {
        let text = match q {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        list.insert(name.clone(), text.parse()?);
    }
    Ok(list)
}

/// quota's `Add`: each of `a`'s entries plus `b`'s, and `b`'s entries `a` lacks.
fn add(a: &ResourceList, b: &ResourceList) -> Option<ResourceList> {
    let mut sum = a.clone();
    for (resource, q) in b {
        let total = match a.get(resource) {
            Some(existing) => existing.checked_add(q)?,
            None => q.clone(),
        };
        sum.insert(resource.clone(), total);
    }
    Some(sum)
}

/// quota's `Max`: the larger of each entry.
fn max(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (resource, q) in b {
        let larger = match a.get(resource) {
            Some(existing) => Quantity::max(existing, q),
            None => q.clone(),
        };
        out.insert(resource.clone(), larger);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn quota(hard: Value, used: Value) -> Value {
        json!({ "metadata": { "name": "shop" }, "spec": { "hard": hard }, "status": { "hard": hard, "used": used } })
    }

    fn pod(containers: Value) -> Value {
        json!({ "metadata": { "name": "extra" }, "spec": { "containers": containers } })
    }

    fn refused(quotas: &[&Value], pod: &Value) -> String {
        match admit_pod(quotas, pod, "extra") {
            Ok(_) => panic!("admitted"),
            Err(err) => {
                assert_eq!(err.code, 403);
                err.message
            }
        }
    }

    fn compute() -> Value {
        json!({ "pods": "3", "requests.cpu": "1", "requests.memory": "1Gi", "limits.cpu": "2", "limits.memory": "2Gi" })
    }

    // The messages below are the ones kube-apiserver v1.36.2 answered for the same quota
    // and pods.
    #[test]
    fn a_pod_without_the_constrained_resources_is_refused_per_container() {
        let q = quota(compute(), json!({ "pods": "1" }));
        assert_eq!(
            refused(&[&q], &pod(json!([{ "name": "extra", "image": "nginx" }]))),
            "pods \"extra\" is forbidden: failed quota: shop: must specify limits.cpu for: extra; limits.memory for: extra; requests.cpu for: extra; requests.memory for: extra"
        );
        let three = pod(json!([
            { "name": "b" },
            { "name": "a", "resources": { "requests": { "cpu": "1m" } } },
            { "name": "c" },
        ]));
        assert_eq!(
            refused(&[&q], &three),
            "pods \"extra\" is forbidden: failed quota: shop: must specify limits.cpu for: a,b,c; limits.memory for: a,b,c; requests.cpu for: b,c; requests.memory for: a,b,c"
        );
    }

    #[test]
    fn a_pod_past_hard_is_refused_with_the_exceeded_resources_only() {
        let q = quota(
            compute(),
            json!({ "pods": "3", "requests.cpu": "750m", "requests.memory": "0", "limits.cpu": "1", "limits.memory": "0" }),
        );
        let p = pod(json!([{ "name": "extra", "resources": {
            "requests": { "cpu": "500m", "memory": "100Mi" }, "limits": { "cpu": "1", "memory": "200Mi" } } }]));
        assert_eq!(
            refused(&[&q], &p),
            "pods \"extra\" is forbidden: exceeded quota: shop, requested: pods=1,requests.cpu=500m, used: pods=3,requests.cpu=750m, limited: pods=3,requests.cpu=1"
        );
    }

    #[test]
    fn a_quota_without_usage_refuses_and_one_without_status_does_not_count() {
        let q = quota(compute(), json!({}));
        let p = pod(json!([{ "name": "a", "resources": {
            "requests": { "cpu": "100m", "memory": "100Mi" }, "limits": { "cpu": "200m", "memory": "200Mi" } } }]));
        assert_eq!(
            refused(&[&q], &p),
            "pods \"extra\" is forbidden: status unknown for quota: shop, resources: limits.cpu,limits.memory,pods,requests.cpu,requests.memory"
        );
        let unsynced = json!({ "metadata": { "name": "shop" }, "spec": { "hard": compute() } });
        let bare = pod(json!([{ "name": "a" }]));
        assert!(admit_pod(&[&unsynced], &bare, "extra").unwrap().is_empty());
    }

    #[test]
    fn an_admitted_pod_adds_its_usage_to_status_used() {
        let q = quota(
            compute(),
            json!({ "pods": "1", "requests.cpu": "100m", "requests.memory": "0", "limits.cpu": "0", "limits.memory": "0" }),
        );
        let p = pod(json!([{ "name": "a", "resources": {
            "requests": { "cpu": "100m", "memory": "100Mi" }, "limits": { "cpu": "200m", "memory": "200Mi" } } }]));
        let updates = admit_pod(&[&q], &p, "extra").unwrap();
        assert_eq!(updates.len(), 1);
        assert_eq!(
            updates[0].used,
            json!({ "limits.cpu": "200m", "limits.memory": "200Mi", "pods": "2", "requests.cpu": "200m", "requests.memory": "100Mi" })
        );
    }

    #[test]
    fn scopes_decide_which_quotas_count_the_pod() {
        let mut best_effort = quota(json!({ "pods": "1" }), json!({ "pods": "1" }));
        best_effort["spec"]["scopes"] = json!(["BestEffort"]);
        let burstable = pod(json!([{ "name": "a", "resources": { "requests": { "cpu": "1m" } } }]));
        assert!(
            admit_pod(&[&best_effort], &burstable, "extra")
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            refused(&[&best_effort], &pod(json!([{ "name": "a" }]))),
            "pods \"extra\" is forbidden: exceeded quota: shop, requested: pods=1, used: pods=1, limited: pods=1"
        );
    }
}
