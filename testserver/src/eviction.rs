//! `POST .../pods/<name>/eviction`: the API server's eviction subresource
//! (`pkg/registry/core/pod/storage/eviction.go`). A pod that is terminal, Pending or already
//! terminating is deleted without looking at budgets; otherwise the one PodDisruptionBudget
//! that selects it must allow a disruption, which is taken from its status (recorded in
//! `disruptedPods`) before the pod gets its `DisruptionTarget` condition and is deleted with
//! the eviction's DeleteOptions.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use rand::Rng;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::pods::{self, check_body};
use crate::resources::ResourceType;
use crate::selector::{JsonLabels, selector_object};
use crate::store::{DeleteOptions, Store, Subresource, WriteOptions, get_path, rfc3339};

/// How many times a step that conflicts with another writer is tried (`EvictionsRetry`).
const ATTEMPTS: u32 = 20;

/// How many approved evictions a budget may hold before the disruption controller has seen
/// them (`MaxDisruptedPodSize`).
const MAX_DISRUPTED_PODS: usize = 2000;

const VIOLATES_BUDGET: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// The pause between attempts: 500 ms and up to 10% jitter (`EvictionsRetry`).
fn backoff() -> Duration {
    Duration::from_millis(500 + rand::rng().random_range(0..50))
}

fn is_conflict(err: &ApiError) -> bool {
    err.reason == "Conflict"
}

/// The types the eviction reads and writes.
struct Types {
    pods: ResourceType,
    budgets: ResourceType,
}

/// Evicts the pod `ns/name` as `body` (a policy/v1 or v1beta1 Eviction) asks; `opts` are the
/// request's (`dryRun` among them). Ok means the pod was deleted (or marked for graceful
/// deletion): the caller answers 201 with a success Status.
pub(crate) async fn evict(
    store: &Store,
    (ns, name): (&str, &str),
    body: &Value,
    opts: &WriteOptions,
) -> Result<(), ApiError> {
    check_body(
        body,
        (&["policy/v1", "policy/v1beta1"], "Eviction"),
        ns,
        name,
    )?;
    let requested = &body["deleteOptions"];
    if requested["ignoreStoreReadErrorWithClusterBreakingPotential"] == json!(true) {
        return Err(ApiError::invalid_field(
            ("Eviction", "policy"),
            name,
            "deleteOptions.ignoreStoreReadErrorWithClusterBreakingPotential",
            (
                "FieldValueInvalid",
                "Invalid value: true: can not be set for pod eviction, try after removing the option"
                    .into(),
            ),
        ));
    }
    // The request's dryRun goes into the eviction's DeleteOptions.
    let original = DeleteOptions::parse(requested, |key| {
        (key == "dryRun" && opts.dry_run).then_some("All")
    });
    let builtin = |group, plural| {
        store
            .resource_type(group, plural)
            .unwrap_or_else(|| unreachable!("{plural} are built in"))
    };
    let types = Types {
        pods: builtin("", "pods"),
        budgets: builtin("policy", "poddisruptionbudgets"),
    };
    // A precondition of the caller's own is theirs to retry.
    let retry_conflicts = original.precondition_resource_version.is_none();
    let mut attempt = 1;
    let pod = loop {
        match delete_ignoring_budgets(store, &types, (ns, name), &original, opts) {
            Ok(None) => return Ok(()),
            Ok(Some(pod)) => break pod,
            Err(err) if is_conflict(&err) && retry_conflicts && attempt < ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(backoff()).await;
            }
            Err(err) => return Err(err),
        }
    };
    let labels = pod["metadata"]["labels"].as_object();
    let budgets: Vec<Arc<Value>> = store
        .objects("policy", "poddisruptionbudgets")
        .into_iter()
        .filter(|pdb| pdb["metadata"]["namespace"] == ns)
        .filter(|pdb| selects(&pdb["spec"]["selector"], labels))
        .collect();
    let budget = match budgets.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        // Returned by the REST as a failed Status, which the handler turns into its error.
        _ => {
            return Err(ApiError::new(
                500,
                "",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    // An unready pod the budget can spare is deleted without taking a disruption, provided it
    // is still the pod looked at (its resourceVersion a precondition).
    let mut spare_unready = false;
    if let Some(budget) = &budget {
        let always_allow = budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow";
        let status = &budget["status"];
        let (current, desired) = (int(status, "currentHealthy"), int(status, "desiredHealthy"));
        spare_unready =
            !pods::is_ready(&pod) && (always_allow || (current >= desired && desired > 0));
        if !spare_unready {
            take_disruption(store, &types, budget, name, &original, opts).await?;
        }
    }
    let mut delete = original.clone();
    if spare_unready {
        delete.precondition_resource_version = pod["metadata"]["resourceVersion"]
            .as_str()
            .map(String::from);
    }
    match mark_and_delete(store, &types, (ns, name), delete, opts) {
        // The pod changed since: it may have become ready, so the client is to try again.
        Err(err) if is_conflict(&err) && spare_unready && retry_conflicts => {
            let budget = budget.as_deref().map(name_of).unwrap_or_default();
            Err(still_processing(&budget))
        }
        result => result,
    }
}

/// The first step: the pod, when budgets apply to it; else it is deleted (`Ok(None)`).
fn delete_ignoring_budgets(
    store: &Store,
    types: &Types,
    (ns, name): (&str, &str),
    original: &DeleteOptions,
    opts: &WriteOptions,
) -> Result<Option<Value>, ApiError> {
    let pod = (*store.get(&types.pods, ns, name)?).clone();
    let phase = pod["status"]["phase"].as_str().unwrap_or_default();
    let terminal = matches!(phase, "Succeeded" | "Failed");
    let terminating = pod["metadata"]["deletionTimestamp"].is_string();
    if !terminal && !terminating && phase != "Pending" {
        return Ok(Some(pod));
    }
    let mut delete = original.clone();
    // A Pending pod must not have started running (and become protected) meanwhile.
    if !terminal && !terminating && delete.precondition_resource_version.is_none() {
        delete.precondition_resource_version = pod["metadata"]["resourceVersion"]
            .as_str()
            .map(String::from);
    }
    mark_and_delete(store, types, (ns, name), delete, opts)?;
    Ok(None)
}

/// `addConditionAndDeletePod`: unless dry-run, the pod gets the `DisruptionTarget` condition
/// (through the status strategy, after the preconditions are checked against it), then it is
/// deleted with `delete`, whose resourceVersion precondition follows the condition's write.
fn mark_and_delete(
    store: &Store,
    types: &Types,
    (ns, name): (&str, &str),
    mut delete: DeleteOptions,
    opts: &WriteOptions,
) -> Result<(), ApiError> {
    if !delete.dry_run {
        let now = rfc3339(Timestamp::now());
        let marked = store.guaranteed_update(
            (&types.pods, ns, name),
            Some(Subresource::Status),
            opts,
            |latest| {
                delete.check_preconditions(("Pod", ""), latest)?;
                let mut pod = latest.clone();
                pods::set_condition(
                    &mut pod,
                    json!({
                        "type": "DisruptionTarget", "status": "True",
                        "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting",
                    }),
                    &now,
                );
                Ok(pod)
            },
        )?;
        if delete.precondition_resource_version.is_some() {
            delete.precondition_resource_version = marked["metadata"]["resourceVersion"]
                .as_str()
                .map(String::from);
        }
    }
    store.delete(&types.pods, ns, name, &delete)?;
    Ok(())
}

/// Takes one disruption from the budget (`checkAndDecrement`), reading it again and retrying
/// while its status write conflicts with another writer's.
async fn take_disruption(
    store: &Store,
    types: &Types,
    budget: &Value,
    pod: &str,
    original: &DeleteOptions,
    opts: &WriteOptions,
) -> Result<(), ApiError> {
    let ns = budget["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = name_of(budget);
    let mut budget = budget.clone();
    let mut attempt = 1;
    loop {
        match check_and_decrement(store, types, budget, pod, original.dry_run, opts) {
            Err(err) if is_conflict(&err) && attempt < ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(backoff()).await;
                budget = (*store.get(&types.budgets, ns, &name)?).clone();
            }
            result => return result,
        }
    }
}

fn check_and_decrement(
    store: &Store,
    types: &Types,
    mut budget: Value,
    pod: &str,
    dry_run: bool,
    opts: &WriteOptions,
) -> Result<(), ApiError> {
    let name = name_of(&budget);
    let status = &budget["status"];
    if int(status, "observedGeneration") < int(&budget["metadata"], "generation") {
        return Err(still_processing(&name));
    }
    let allowed = int(status, "disruptionsAllowed");
    let forbidden = |why: &str| {
        ApiError::forbidden(format!(
            "poddisruptionbudget.policy \"{name}\" is forbidden: {why}"
        ))
        .naming(("poddisruptionbudget", "policy"), &name)
    };
    if allowed < 0 {
        return Err(forbidden("pdb disruptions allowed is negative"));
    }
    let disrupted = status["disruptedPods"].as_object().map_or(0, |m| m.len());
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(too_many_requests(refusal(&name, status), None));
    }
    let now = rfc3339(Timestamp::now());
    budget["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed == 1 {
        let observed = int(&budget["status"], "observedGeneration");
        set_status_condition(
            &mut budget["status"],
            json!({ "type": "DisruptionAllowed", "status": "False",
                    "reason": "InsufficientPods", "message": "", "observedGeneration": observed }),
            &now,
        );
    }
    if dry_run {
        return Ok(());
    }
    // The disruption controller leaves a pod named here out of its count until it is gone.
    if !budget["status"]["disruptedPods"].is_object() {
        budget["status"]["disruptedPods"] = json!({});
    }
    budget["status"]["disruptedPods"][pod] = json!(now);
    let ns = budget["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    store.update(
        &types.budgets,
        &ns,
        &name,
        budget,
        Subresource::Status,
        opts,
    )?;
    Ok(())
}

/// Why a budget with no disruption allowed refuses, as the eviction REST words it.
fn refusal(name: &str, status: &Value) -> String {
    let condition = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "DisruptionAllowed");
    let text = |field: &str| {
        condition
            .and_then(|c| c[field].as_str())
            .unwrap_or_default()
    };
    let refusing = text("status") == "False" && !text("message").is_empty();
    let (current, desired) = (int(status, "currentHealthy"), int(status, "desiredHealthy"));
    // A failed sync first: the counts are not to be trusted then.
    if refusing && text("reason") == "SyncFailed" {
        format!(
            "The disruption budget {name} does not allow evicting pods currently because it failed sync: {}",
            text("message")
        )
    } else if current <= desired {
        format!(
            "The disruption budget {name} needs {desired} healthy pods and has {current} currently"
        )
    } else if refusing {
        format!(
            "The disruption budget {name} does not allow evicting pods currently ({}): {}",
            text("reason"),
            text("message")
        )
    } else {
        format!("The disruption budget {name} does not allow evicting pods currently")
    }
}

/// The 429 of a budget whose status the disruption controller has not caught up with.
fn still_processing(name: &str) -> ApiError {
    too_many_requests(
        format!("The disruption budget {name} is still being processed by the server."),
        Some(10),
    )
}

fn too_many_requests(cause: String, retry_after: Option<u64>) -> ApiError {
    let mut err = ApiError::new(429, "TooManyRequests", VIOLATES_BUDGET);
    err.details = Some(json!({ "causes": [{ "reason": "DisruptionBudget", "message": cause }] }));
    err.retry_after = retry_after;
    err
}

/// `meta.SetStatusCondition`: the condition of the type is added, or updated in place, its
/// `lastTransitionTime` moving only when its status changes.
fn set_status_condition(status: &mut Value, mut condition: Value, now: &str) {
    if condition["observedGeneration"] == 0 {
        // omitempty
        if let Some(c) = condition.as_object_mut() {
            c.remove("observedGeneration");
        }
    }
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let Some(conditions) = status["conditions"].as_array_mut() else {
        unreachable!("conditions was just made a list");
    };
    match conditions
        .iter_mut()
        .find(|c| c["type"] == condition["type"])
    {
        Some(old) => {
            condition["lastTransitionTime"] = if old["status"] == condition["status"] {
                old["lastTransitionTime"].clone()
            } else {
                json!(now)
            };
            *old = condition;
        }
        None => {
            condition["lastTransitionTime"] = json!(now);
            conditions.push(condition);
        }
    }
}

/// Whether a budget's selector selects the pod's labels: a missing selector selects nothing,
/// and an invalid one, which the API server would not have stored, nothing either.
fn selects(selector: &Value, labels: Option<&serde_json::Map<String, Value>>) -> bool {
    selector_object(selector).is_ok_and(|s| s.matches(JsonLabels(labels)))
}

fn name_of(obj: &Value) -> String {
    obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn int(obj: &Value, field: &str) -> i64 {
    get_path(obj, field).and_then(Value::as_i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_says_why_as_the_eviction_rest_does() {
        let status = |current, desired, condition: Value| {
            json!({ "currentHealthy": current, "desiredHealthy": desired,
                    "conditions": [condition] })
        };
        let allowed = |reason: &str, message: &str| {
            json!({ "type": "DisruptionAllowed", "status": "False", "reason": reason,
                    "message": message })
        };
        assert_eq!(
            refusal("web", &status(2, 2, json!({}))),
            "The disruption budget web needs 2 healthy pods and has 2 currently"
        );
        // A failed sync comes first: the counts are not to be trusted then.
        assert_eq!(
            refusal(
                "web",
                &status(1, 2, allowed("SyncFailed", "found no controllers"))
            ),
            "The disruption budget web does not allow evicting pods currently because it failed sync: found no controllers"
        );
        assert_eq!(
            refusal(
                "web",
                &status(3, 2, allowed("InsufficientPods", "cooling down"))
            ),
            "The disruption budget web does not allow evicting pods currently (InsufficientPods): cooling down"
        );
        assert_eq!(
            refusal("web", &status(3, 2, allowed("InsufficientPods", ""))),
            "The disruption budget web does not allow evicting pods currently"
        );
    }

    #[test]
    fn the_allowed_condition_moves_its_time_only_when_its_status_changes() {
        let mut status = json!({ "conditions": [{ "type": "DisruptionAllowed", "status": "True",
            "reason": "SufficientPods", "message": "", "observedGeneration": 2,
            "lastTransitionTime": "2026-01-01T00:00:00Z" }] });
        let insufficient = |generation: i64| {
            json!({ "type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
                    "message": "", "observedGeneration": generation })
        };
        set_status_condition(&mut status, insufficient(3), "2026-01-02T00:00:00Z");
        assert_eq!(
            status["conditions"],
            json!([{ "type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
                     "message": "", "observedGeneration": 3,
                     "lastTransitionTime": "2026-01-02T00:00:00Z" }])
        );
        set_status_condition(&mut status, insufficient(0), "2026-01-03T00:00:00Z");
        assert_eq!(
            status["conditions"],
            json!([{ "type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
                     "message": "", "lastTransitionTime": "2026-01-02T00:00:00Z" }])
        );
    }
}
