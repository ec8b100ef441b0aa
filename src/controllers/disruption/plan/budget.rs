//! Pure decision logic of the disruption controller: PodDisruptionBudget status
//! arithmetic, the disruptedPods garbage collection, the `DisruptionAllowed`
//! condition and the stale `DisruptionTarget` pod-condition cleanup.
//!
//! Everything here mirrors upstream kube-controller-manager v1.36
//! (pkg/controller/disruption/disruption.go, component-helpers
//! apps/poddisruptionbudget, apimachinery intstr and meta conditions) so that
//! the written status is byte-for-byte what upstream would write. No I/O: the
//! caller lists pods, resolves controller scale, emits events and writes.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod as FullPod, PodCondition, PodStatus};
use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::k8s::golang::{AtoiError, go_atoi, go_quote};
use crate::k8s::view::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// How long a `disruptedPods` entry may wait for its pod to get a deletionTimestamp.
pub const DELETION_TIMEOUT_SECS: i64 = 120;
/// How long a `DisruptionTarget=True` condition may stay on a non-terminating pod.
pub const STALE_POD_DISRUPTION_TIMEOUT_SECS: i64 = 120;

pub const DISRUPTION_ALLOWED_CONDITION: &str = "DisruptionAllowed";
pub const SYNC_FAILED_REASON: &str = "SyncFailed";
pub const SUFFICIENT_PODS_REASON: &str = "SufficientPods";
pub const INSUFFICIENT_PODS_REASON: &str = "InsufficientPods";
pub const DISRUPTION_TARGET_CONDITION: &str = "DisruptionTarget";
pub const TERMINATION_BY_KUBELET_REASON: &str = "TerminationByKubelet";

/// Why a budget's expected and desired counts cannot be computed, in upstream's words (the
/// text becomes the fail-safe condition's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error("invalid value for IntOrString: invalid type: string is not a percentage")]
    NotPercentage,
    #[error("invalid value for IntOrString: invalid value {}: {source}", go_quote(.value))]
    InvalidPercentage {
        value: String,
        #[source]
        source: AtoiError,
    },
    /// A caller bug: the scale is needed but was not looked up.
    #[error("controller scale was not computed")]
    ScaleNotComputed,
    #[error("{BOTH_SET}")]
    BothSet,
    /// A value API validation refuses (the validation message).
    #[error("{0}")]
    Refused(String),
}

/// intstr.GetScaledValueFromIntOrPercent, including its exact error texts.
///
/// Upstream returns a Go `int` that the disruption controller truncates to
/// `int32`; the truncation is folded in here (only reachable past apiserver
/// validation, which limits percentages to 0–100%).
pub fn scaled_value(value: &IntOrString, total: i32, round_up: bool) -> Result<i32, BudgetError> {
    let s = match value {
        IntOrString::Int(v) => return Ok(*v),
        IntOrString::String(s) => s,
    };
    let Some(digits) = s.strip_suffix('%') else {
        return Err(BudgetError::NotPercentage);
    };
    let pct = go_atoi(digits).map_err(|source| BudgetError::InvalidPercentage {
        value: s.clone(),
        source,
    })?;
    // Same float64 expression and operation order as upstream.
    let scaled = (pct as f64) * f64::from(total) / 100.0;
    let rounded = if round_up {
        scaled.ceil()
    } else {
        scaled.floor()
    };
    // int(float) then int32(int): wrapping truncation, as in Go.
    Ok(go_float_to_int(rounded) as i32)
}

/// Go's float64→int conversion as on amd64: out of range (or NaN) gives MinInt64,
/// whereas Rust's `as` would saturate.
fn go_float_to_int(f: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if (-LIMIT..LIMIT).contains(&f) {
        f as i64
    } else {
        i64::MIN
    }
}

/// Whether the budget needs the owning controllers' scale (maxUnavailable set,
/// or minAvailable a percentage). An integer minAvailable counts pods instead.
pub fn needs_controller_scale(spec: &PodDisruptionBudgetSpec) -> bool {
    spec.max_unavailable.is_some() || matches!(spec.min_available, Some(IntOrString::String(_)))
}

/// The API server's validation message for a budget with both fields.
pub const BOTH_SET: &str = "minAvailable and maxUnavailable cannot be both set";

/// getExpectedPodCount minus the scale lookup: returns (expectedCount, desiredHealthy).
///
/// `scale` is the sum of the distinct controllers' scales (getExpectedScale) and
/// must be `Some` whenever [`needs_controller_scale`] is true; `None` there is a
/// caller bug and yields an error (which the caller's fail-safe then reports).
pub fn expected_and_desired(
    spec: &PodDisruptionBudgetSpec,
    matching_pods: i32,
    scale: Option<i32>,
) -> Result<(i32, i32), BudgetError> {
    let need_scale = || scale.ok_or(BudgetError::ScaleNotComputed);
    // The API server's validation refuses both; upstream's controller would silently prefer
    // maxUnavailable. kcm cannot know which one the author meant, so it fails safe.
    if spec.min_available.is_some() && spec.max_unavailable.is_some() {
        return Err(BudgetError::BothSet);
    }
    // Likewise for values the arithmetic accepts but validation refuses: with them upstream
    // would compute nonsense (minAvailable "-50%" of 4 pods allows 6 disruptions).
    for (field, value) in [
        ("spec.minAvailable", &spec.min_available),
        ("spec.maxUnavailable", &spec.max_unavailable),
    ] {
        if let Some(err) = value.as_ref().and_then(|v| refused_by_validation(field, v)) {
            return Err(BudgetError::Refused(err));
        }
    }
    if let Some(max_unavailable) = &spec.max_unavailable {
        let expected = need_scale()?;
        let max_unavailable = scaled_value(max_unavailable, expected, true)?;
        return Ok((expected, expected.wrapping_sub(max_unavailable).max(0)));
    }
    match &spec.min_available {
        Some(IntOrString::Int(min)) => Ok((matching_pods, *min)),
        Some(percent @ IntOrString::String(_)) => {
            let expected = need_scale()?;
            Ok((expected, scaled_value(percent, expected, true)?))
        }
        None => Ok((0, 0)),
    }
}

/// The API server's validation of a budget value (`ValidatePositiveIntOrPercent` and
/// `IsNotMoreThan100Percent`), for the values the controller's arithmetic would take: a
/// negative count, or a percentage below 0% or above 100%. Strings that are no percentage at
/// all are left to [`scaled_value`], whose errors are upstream's controller's.
fn refused_by_validation(field: &str, value: &IntOrString) -> Option<String> {
    match value {
        IntOrString::Int(n) if *n < 0 => Some(format!(
            "{field}: Invalid value: {n}: must be greater than or equal to 0"
        )),
        IntOrString::Int(_) => None,
        IntOrString::String(s) => {
            let pct = go_atoi(s.strip_suffix('%')?).ok()?;
            let why = if pct < 0 {
                "must be an integer or percentage (e.g '5%')"
            } else if pct > 100 {
                "must not be greater than 100%"
            } else {
                return None;
            };
            Some(format!("{field}: Invalid value: {}: {why}", go_quote(s)))
        }
    }
}

/// Result of buildDisruptedPodMap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DisruptedPods {
    /// The entries to keep in `status.disruptedPods`.
    pub map: BTreeMap<String, Time>,
    /// Earliest expiry among the kept entries: when to re-sync the PDB.
    pub recheck_at: Option<Time>,
    /// Pods whose entry expired without deletion (Warning `NotDeleted` on each).
    pub expired: Vec<String>,
}

/// `buildDisruptedPodMap` (`pkg/controller/disruption/disruption.go`): the entries of
/// `disruptedPods` still waiting for their pod's deletion. Entries of pods that are being
/// deleted or no longer match are dropped silently; `expired` is in `pods` order.
pub fn disrupted_pods(
    pods: &[&Pod],
    status: Option<&PodDisruptionBudgetStatus>,
    now: &Time,
) -> DisruptedPods {
    let mut out = DisruptedPods::default();
    let Some(previous) = status.and_then(|s| s.disrupted_pods.as_ref()) else {
        return out;
    };
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod_name(pod);
        let Some(entry) = previous.get(name) else {
            continue;
        };
        let expiry = deletion_deadline(entry);
        if expiry < now.0 {
            out.expired.push(name.to_owned());
        } else {
            if out.recheck_at.as_ref().is_none_or(|r| expiry < r.0) {
                out.recheck_at = Some(Time(expiry));
            }
            out.map.insert(name.to_owned(), entry.clone());
        }
    }
    out
}

/// Why countHealthyPods does not count a pod, in its order of checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unhealthy {
    /// It has a deletionTimestamp.
    Terminating,
    /// A `disruptedPods` entry (an eviction) within the deletion timeout: not counted until
    /// this deadline.
    Disrupted { until: Timestamp },
    /// Its Ready condition is not True.
    NotReady,
}

/// Whether countHealthyPods counts `pod`, or why not.
pub fn pod_health(
    pod: &Pod,
    disrupted: &BTreeMap<String, Time>,
    now: &Time,
) -> Result<(), Unhealthy> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Err(Unhealthy::Terminating);
    }
    // Skip pods disrupted within the deletion timeout.
    if let Some(until) = disrupted
        .get(pod_name(pod))
        .map(deletion_deadline)
        .filter(|deadline| *deadline > now.0)
    {
        return Err(Unhealthy::Disrupted { until });
    }
    if !is_pod_ready(pod) {
        return Err(Unhealthy::NotReady);
    }
    Ok(())
}

/// `countHealthyPods` (`pkg/controller/disruption/disruption.go`): Ready pods that are
/// neither being deleted nor recently disrupted. Phase is deliberately ignored, as upstream
/// does.
pub fn count_healthy(pods: &[&Pod], disrupted: &BTreeMap<String, Time>, now: &Time) -> i32 {
    pods.iter()
        .filter(|pod| pod_health(pod, disrupted, now).is_ok())
        // Go counts in int32; wrap rather than panic on absurd sizes.
        .fold(0i32, |n, _| n.wrapping_add(1))
}

/// `updatePdbStatus` (`pkg/controller/disruption/disruption.go`). `None` when upstream's
/// no-op rule holds; otherwise the complete status to write with UpdateStatus.
pub fn new_status(
    pdb: &PodDisruptionBudget,
    current_healthy: i32,
    desired_healthy: i32,
    expected: i32,
    disrupted: &BTreeMap<String, Time>,
    now: &Time,
) -> Option<PodDisruptionBudgetStatus> {
    // expected must be > 0 so a PDB that matched nothing is safe when pods appear.
    let mut allowed = current_healthy.wrapping_sub(desired_healthy);
    if expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let generation = pdb.metadata.generation.unwrap_or(0);
    let empty = PodDisruptionBudgetStatus::default();
    let old = pdb.status.as_ref().unwrap_or(&empty);
    // Semantic.DeepEqual: a nil map equals an empty one.
    let same_disrupted = old
        .disrupted_pods
        .as_ref()
        .map_or(disrupted.is_empty(), |m| m == disrupted);
    // Upstream's int32 counters: absent reads as 0.
    if old.current_healthy.unwrap_or(0) == current_healthy
        && old.desired_healthy.unwrap_or(0) == desired_healthy
        && old.expected_pods.unwrap_or(0) == expected
        && old.disruptions_allowed.unwrap_or(0) == allowed
        && same_disrupted
        && old.observed_generation.unwrap_or(0) == generation
        && conditions_up_to_date(old, generation)
    {
        return None;
    }

    let mut conditions = old.conditions.clone().unwrap_or_default();
    let (status, reason) = if allowed > 0 {
        ("True", SUFFICIENT_PODS_REASON)
    } else {
        ("False", INSUFFICIENT_PODS_REASON)
    };
    set_status_condition(
        &mut conditions,
        Condition {
            type_: DISRUPTION_ALLOWED_CONDITION.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: String::new(),
            observed_generation: go_int64(generation),
            last_transition_time: now.clone(),
        },
    );
    Some(PodDisruptionBudgetStatus {
        conditions: Some(conditions),
        // Upstream always serializes the counters, zero included.
        current_healthy: Some(current_healthy),
        desired_healthy: Some(desired_healthy),
        // Go's omitempty drops an empty map on the wire; do the same.
        disrupted_pods: (!disrupted.is_empty()).then(|| disrupted.clone()),
        disruptions_allowed: Some(allowed),
        expected_pods: Some(expected),
        observed_generation: go_int64(generation),
    })
}

/// pdbhelper.ConditionsAreUpToDate on the stored status (whose disruptionsAllowed
/// the caller has already found equal to the new one).
fn conditions_up_to_date(status: &PodDisruptionBudgetStatus, generation: i64) -> bool {
    let Some(cond) = find_condition(status.conditions.as_deref(), DISRUPTION_ALLOWED_CONDITION)
    else {
        return false;
    };
    if status.observed_generation.unwrap_or(0) != generation {
        return false;
    }
    if status.disruptions_allowed.unwrap_or(0) > 0 {
        cond.status == "True" && cond.reason == SUFFICIENT_PODS_REASON
    } else {
        cond.status == "False" && cond.reason == INSUFFICIENT_PODS_REASON
    }
}

/// `failSafe` (`pkg/controller/disruption/disruption.go`): disruptionsAllowed 0 and
/// DisruptionAllowed=False/SyncFailed with `message`; counters, disruptedPods and
/// status.observedGeneration stay as they were. `None` when that would change nothing
/// (upstream writes anyway; the result on the server is identical).
pub fn fail_safe_status(
    pdb: &PodDisruptionBudget,
    message: &str,
    now: &Time,
) -> Option<PodDisruptionBudgetStatus> {
    let mut status = pdb.status.clone().unwrap_or_default();
    let mut changed = status.disruptions_allowed.unwrap_or(0) != 0;
    status.disruptions_allowed = Some(0);
    // The condition carries the OLD observedGeneration: the sync did not succeed.
    let observed_generation = go_int64(status.observed_generation.unwrap_or(0));
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    changed |= set_status_condition(
        conditions,
        Condition {
            type_: DISRUPTION_ALLOWED_CONDITION.to_owned(),
            status: "False".to_owned(),
            reason: SYNC_FAILED_REASON.to_owned(),
            message: message.to_owned(),
            observed_generation,
            last_transition_time: now.clone(),
        },
    );
    changed.then_some(status)
}

/// meta.SetStatusCondition: updates the first condition of the same type in
/// place (lastTransitionTime only on a status flip) or appends it. Returns
/// whether anything changed.
fn set_status_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        conditions.push(new);
        return true;
    };
    let mut changed = false;
    if existing.status != new.status {
        existing.status = new.status;
        existing.last_transition_time = new.last_transition_time;
        changed = true;
    }
    if existing.reason != new.reason {
        existing.reason = new.reason;
        changed = true;
    }
    if existing.message != new.message {
        existing.message = new.message;
        changed = true;
    }
    // Go compares int64s: absent and 0 are the same value.
    if existing.observed_generation.unwrap_or(0) != new.observed_generation.unwrap_or(0) {
        existing.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}

/// `nonTerminatingPodHasStaleDisruptionCondition` (`pkg/controller/disruption/disruption.go`):
/// `Some(remaining wait)` — zero when the condition is already stale — or `None` when the pod
/// is not a candidate.
pub fn stale_disruption_wait(pod: &Pod, now: &Time) -> Option<Duration> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    let cond = status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| &*c.type_ == DISRUPTION_TARGET_CONDITION)?;
    // Kubelet-added conditions may legitimately precede termination for long;
    // terminal pods are left alone to avoid pointless writes.
    if &*cond.status != "True"
        || cond.reason.as_deref() == Some(TERMINATION_BY_KUBELET_REASON)
        || status.is_terminal()
    {
        return None;
    }
    // A missing lastTransitionTime is Go's zero time: ages past the timeout.
    let age = match &cond.last_transition_time {
        Some(t) => now.0.duration_since(t.0),
        None => SignedDuration::MAX,
    };
    let wait = SignedDuration::from_secs(STALE_POD_DISRUPTION_TIMEOUT_SECS)
        .checked_sub(age)
        .unwrap_or(SignedDuration::ZERO);
    // Negative waits fail the conversion and clamp to zero.
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

/// What `syncStalePodDisruption` (`pkg/controller/disruption/disruption.go`) writes through
/// `apipod.UpdatePodCondition`: the pod status with the first DisruptionTarget condition
/// replaced by status False, empty reason/message, no lastProbeTime, lastTransitionTime `now`
/// (kept if the status was already False) and observedGeneration = pod generation
/// (PodObservedGenerationTracking is GA). Appended if absent. Other conditions untouched. It
/// takes the full pod, read from the API server: the status written back is the whole status.
pub fn cleared_disruption_target(pod: &FullPod, now: &Time) -> PodStatus {
    let mut status = pod.status.clone().unwrap_or_default();
    let mut cond = PodCondition {
        type_: DISRUPTION_TARGET_CONDITION.to_owned(),
        status: "False".to_owned(),
        observed_generation: go_int64(pod.metadata.generation.unwrap_or(0)),
        last_transition_time: Some(now.clone()),
        ..PodCondition::default()
    };
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions
        .iter_mut()
        .find(|c| c.type_ == DISRUPTION_TARGET_CONDITION)
    {
        Some(existing) => {
            if existing.status == cond.status {
                cond.last_transition_time = existing.last_transition_time.clone();
            }
            *existing = cond;
        }
        None => conditions.push(cond),
    }
    status
}

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

/// apipod.IsPodReady: the first Ready condition decides.
fn is_pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| &*c.type_ == "Ready"))
        .is_some_and(|c| &*c.status == "True")
}

fn find_condition<'a>(conditions: Option<&'a [Condition]>, type_: &str) -> Option<&'a Condition> {
    conditions?.iter().find(|c| c.type_ == type_)
}

/// Entry time + DeletionTimeout; saturates instead of failing near year 9999.
fn deletion_deadline(entry: &Time) -> Timestamp {
    entry
        .0
        .checked_add(SignedDuration::from_secs(DELETION_TIMEOUT_SECS))
        .unwrap_or(Timestamp::MAX)
}

/// A Go int64 field with `omitempty`: zero is absent on the wire.
fn go_int64(v: i64) -> Option<i64> {
    (v != 0).then_some(v)
}

#[cfg(test)]
mod tests;
