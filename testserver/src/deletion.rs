//! What a delete request does to an object: the generic registry's `BeforeDelete`, and the pod
//! strategy's `CheckGracefulDelete` for pods, the one served type that deletes gracefully.

use jiff::Timestamp;
use serde_json::Value;

/// The grace period of a pod without `spec.terminationGracePeriodSeconds`: the API server
/// defaults the field to this when the pod is created, which this server does not do.
const DEFAULT_TERMINATION_GRACE: i64 = 30;

/// What a delete request does to an object, as the generic registry's `BeforeDelete` and the
/// pod strategy's `CheckGracefulDelete` decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deletion {
    /// A graceful deletion is under way and the request does not shorten it: nothing changes.
    Pending,
    /// The pod is marked deleted at `at` with `grace` seconds; it stays while `grace` > 0, until
    /// deleted again with 0 (what the kubelet does once its containers stopped).
    Graceful { at: Timestamp, grace: i64 },
    /// No graceful deletion (the generic registry's rule: every type but pods, and a pod
    /// already at grace 0): removed at once unless finalizers hold it.
    Now,
}

/// How a delete asking for `requested` seconds of grace (none: the pod's own) treats `pod`.
pub(crate) fn before_delete(pod: &Value, requested: Option<i64>, now: Timestamp) -> Deletion {
    // Negative periods are the shortest graceful one.
    let requested = requested.map(|g| if g < 0 { 1 } else { g });
    let meta = &pod["metadata"];
    let marked = meta["deletionTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<Timestamp>().ok());
    let Some(marked) = marked else {
        let grace = grace_period(pod, requested);
        return Deletion::Graceful {
            at: plus(now, grace),
            grace,
        };
    };
    let current = match meta["deletionGracePeriodSeconds"].as_i64() {
        None | Some(0) => return Deletion::Now,
        Some(g) => g.max(1),
    };
    // Only a shorter period may be asked for: the timestamp moves back by the difference,
    // never into the past (an expired graceful period becomes 1 s, still graceful).
    match requested {
        Some(grace) if grace < current => {
            let at = plus(marked, grace - current);
            if at < now {
                Deletion::Graceful {
                    at: now,
                    grace: grace.min(1),
                }
            } else {
                Deletion::Graceful { at, grace }
            }
        }
        _ => Deletion::Pending,
    }
}

/// `CheckGracefulDelete`: the period asked for, else the pod's; none for a pod no node runs
/// (unbound) or whose containers are done (Succeeded, Failed).
fn grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let unbound = pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty);
    let terminal = matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    if unbound || terminal {
        return 0;
    }
    let period = requested
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(DEFAULT_TERMINATION_GRACE);
    if period < 0 { 1 } else { period }
}

fn plus(at: Timestamp, seconds: i64) -> Timestamp {
    Timestamp::from_second(at.as_second().saturating_add(seconds)).unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn bound(extra: Value) -> Value {
        let mut pod = json!({
            "metadata": { "name": "p" },
            "spec": { "nodeName": "n1" },
            "status": { "phase": "Running" },
        });
        json_patch::merge(&mut pod, &extra);
        pod
    }

    #[test]
    fn a_bound_running_pod_waits_its_termination_grace_period() {
        let now = at("2026-01-01T00:00:00Z");
        let graceful = |grace| Deletion::Graceful {
            at: plus(now, grace),
            grace,
        };
        assert_eq!(before_delete(&bound(json!({})), None, now), graceful(30));
        let own = bound(json!({ "spec": { "terminationGracePeriodSeconds": 5 } }));
        assert_eq!(before_delete(&own, None, now), graceful(5));
        assert_eq!(before_delete(&own, Some(12), now), graceful(12));
        assert_eq!(before_delete(&own, Some(-3), now), graceful(1));
        let unbound = json!({ "metadata": { "name": "p" }, "spec": {} });
        assert_eq!(before_delete(&unbound, Some(12), now), graceful(0));
        let done = bound(json!({ "status": { "phase": "Succeeded" } }));
        assert_eq!(before_delete(&done, None, now), graceful(0));
    }

    #[test]
    fn a_second_delete_may_only_shorten_the_period() {
        let now = at("2026-01-01T00:00:10Z");
        let deleting = bound(json!({ "metadata": {
            "deletionTimestamp": "2026-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30,
        } }));
        assert_eq!(before_delete(&deleting, None, now), Deletion::Pending);
        assert_eq!(before_delete(&deleting, Some(30), now), Deletion::Pending);
        assert_eq!(before_delete(&deleting, Some(60), now), Deletion::Pending);
        assert_eq!(
            before_delete(&deleting, Some(25), now),
            Deletion::Graceful {
                at: at("2026-01-01T00:00:25Z"),
                grace: 25
            }
        );
        // Shortened into the past: now, and still graceful unless 0 was asked for.
        assert_eq!(
            before_delete(&deleting, Some(5), now),
            Deletion::Graceful { at: now, grace: 1 }
        );
        assert_eq!(
            before_delete(&deleting, Some(0), now),
            Deletion::Graceful { at: now, grace: 0 }
        );
        let at_zero = bound(json!({ "metadata": {
            "deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 0,
        } }));
        assert_eq!(before_delete(&at_zero, Some(5), now), Deletion::Now);
    }
}
