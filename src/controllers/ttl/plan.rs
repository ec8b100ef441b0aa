//! The ttl controller's decisions. The node-count → TTL state machine, with upstream's
//! overlapping boundaries (hysteresis): step up when the count exceeds the current step's
//! `size_max`, down when it falls below its `size_min`, at most one step per node added or
//! deleted; and whether a node's annotation is rewritten, with the patch that does it.

use serde_json::{Value, json};

use crate::runtime::writing::writer::UpstreamFix;

pub use crate::k8s::view::TTL_ANNOTATION;

/// One row of upstream's `ttlBoundaries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Boundary {
    pub size_min: usize,
    pub size_max: usize,
    pub ttl_seconds: i32,
}

pub const BOUNDARIES: [Boundary; 5] = [
    Boundary {
        size_min: 0,
        size_max: 100,
        ttl_seconds: 0,
    },
    Boundary {
        size_min: 90,
        size_max: 500,
        ttl_seconds: 15,
    },
    Boundary {
        size_min: 450,
        size_max: 1000,
        ttl_seconds: 30,
    },
    Boundary {
        size_min: 900,
        size_max: 2000,
        ttl_seconds: 60,
    },
    Boundary {
        size_min: 1800,
        size_max: i32::MAX as usize,
        ttl_seconds: 300,
    },
];

/// kubernetes#109779: upstream starts at step 0 on every restart, so a cluster inside the
/// overlap of two steps (95 nodes at TTL 15) gets every node patched back to the lower step.
pub const HYSTERESIS_KEPT_ON_RESTART: UpstreamFix = UpstreamFix("kubernetes#109779");

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TtlState {
    node_count: usize,
    step: usize,
    /// The step upstream would be at: the same transitions, from step 0 at start without
    /// recovery, so a TTL that differs from upstream's because of recovery is known as such.
    upstream_step: usize,
}

impl TtlState {
    pub fn node_count(&self) -> usize {
        self.node_count
    }

    pub fn desired_ttl(&self) -> i32 {
        BOUNDARIES[self.step].ttl_seconds
    }

    /// The fix that makes the desired TTL differ from upstream's, if it does.
    pub fn divergence(&self) -> Option<UpstreamFix> {
        (self.step != self.upstream_step).then_some(HYSTERESIS_KEPT_ON_RESTART)
    }

    /// The index of the current step in [`BOUNDARIES`].
    pub fn step(&self) -> usize {
        self.step
    }

    /// The state after `nodes` nodes were added to an empty cluster: a controller that
    /// starts now counts its first list so, one node at a time.
    pub fn counted(nodes: usize) -> Self {
        let mut state = Self::default();
        for _ in 0..nodes {
            state.node_added();
        }
        state
    }

    /// A node appeared. Returns true when the desired TTL changed.
    pub fn node_added(&mut self) -> bool {
        self.node_count += 1;
        self.upstream_step = step_after_add(self.upstream_step, self.node_count);
        let before = self.step;
        self.step = step_after_add(self.step, self.node_count);
        self.step != before
    }

    /// A node went away. Returns true when the desired TTL changed.
    pub fn node_deleted(&mut self) -> bool {
        self.node_count = self.node_count.saturating_sub(1);
        self.upstream_step = step_after_delete(self.upstream_step, self.node_count);
        let before = self.step;
        self.step = step_after_delete(self.step, self.node_count);
        self.step != before
    }

    /// At the first complete count of the nodes: the step their annotations agree on, when the
    /// cluster size lies inside that step's boundaries, so a restart keeps what a settled
    /// cluster was at instead of stepping it down to where counting from 0 ends. Returns true
    /// when the desired TTL changed.
    pub fn recover<'a>(&mut self, annotations: impl IntoIterator<Item = Option<&'a str>>) -> bool {
        let Some(step) = agreed_step(annotations) else {
            return false;
        };
        let bounds = BOUNDARIES[step];
        if step == self.step || !(bounds.size_min..=bounds.size_max).contains(&self.node_count) {
            return false;
        }
        self.step = step;
        true
    }
}

fn step_after_add(step: usize, node_count: usize) -> usize {
    if step + 1 < BOUNDARIES.len() && node_count > BOUNDARIES[step].size_max {
        step + 1
    } else {
        step
    }
}

fn step_after_delete(step: usize, node_count: usize) -> usize {
    if step > 0 && node_count < BOUNDARIES[step].size_min {
        step - 1
    } else {
        step
    }
}

/// The step whose TTL every node that carries a TTL annotation carries. Nodes without one, or
/// with a value that is no number (both overwritten anyway), do not vote; any disagreement,
/// or a TTL no step has, means there is nothing to recover.
fn agreed_step<'a>(annotations: impl IntoIterator<Item = Option<&'a str>>) -> Option<usize> {
    let mut agreed = None;
    for ttl in annotations
        .into_iter()
        .flatten()
        .filter_map(|text| text.parse::<i32>().ok())
        .filter(|ttl| *ttl >= 0)
    {
        match agreed {
            None => agreed = Some(ttl),
            Some(seen) if seen == ttl => {}
            Some(_) => return None,
        }
    }
    BOUNDARIES
        .iter()
        .position(|b| Some(b.ttl_seconds) == agreed)
}

/// What the reconcile of one node decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The annotation already holds the desired value.
    Keep,
    /// Set the annotation to this value. `unparsable` carries the bad value found, if any.
    Set {
        value: String,
        unparsable: Option<String>,
    },
}

/// Compares a node's current annotation with the desired TTL as upstream does: a value that
/// parses as an integer equal to the desired TTL is kept; anything else is overwritten. A
/// negative number parses but is no TTL, so it is reported as bad input like garbage is.
pub fn decide(current: Option<&str>, desired: i32) -> Decision {
    let value = desired.to_string();
    match current {
        None => Decision::Set {
            value,
            unparsable: None,
        },
        Some(text) => match text.parse::<i32>() {
            Ok(n) if n == desired => Decision::Keep,
            Ok(n) if n >= 0 => Decision::Set {
                value,
                unparsable: None,
            },
            _ => Decision::Set {
                value,
                unparsable: Some(text.to_string()),
            },
        },
    }
}

/// The strategic merge patch that sets the annotation: upstream's two-way diff of the node
/// before and after, which only ever touches this one key.
pub fn annotation_patch(value: &str) -> Value {
    json!({ "metadata": { "annotations": { TTL_ANNOTATION: value } } })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Port of upstream's TestDesiredTTL: (count, step, add or delete) → desired TTL.
    #[test]
    fn upstream_desired_ttl_cases() {
        let cases = [
            (0, 0, true, 0),
            (99, 0, true, 0),
            (100, 0, true, 15),
            (101, 1, false, 15),
            (91, 1, false, 15),
            (91, 1, true, 15),
            (90, 1, false, 0),
        ];
        for (node_count, step, add, expected) in cases {
            let mut state = TtlState {
                node_count,
                step,
                upstream_step: step,
            };
            if add {
                state.node_added();
            } else {
                state.node_deleted();
            }
            assert_eq!(
                state.desired_ttl(),
                expected,
                "{node_count} nodes at step {step}, add={add}"
            );
        }
    }

    /// Port of upstream's TestPatchNode and TestUpdateNodeIfNeeded: the exact patch body
    /// sent, or none when the annotation already matches.
    #[test]
    fn upstream_patch_bodies() {
        let cases = [
            (
                None,
                0,
                Some(r#"{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"0"}}}"#),
            ),
            (
                None,
                10,
                Some(r#"{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"10"}}}"#),
            ),
            (
                None,
                15,
                Some(r#"{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"15"}}}"#),
            ),
            (
                Some("0"),
                10,
                Some(r#"{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"10"}}}"#),
            ),
            (
                Some("0"),
                60,
                Some(r#"{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"60"}}}"#),
            ),
            (
                Some("60"),
                30,
                Some(r#"{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"30"}}}"#),
            ),
            (Some("10"), 10, None),
            (Some("60"), 60, None),
        ];
        for (current, desired, want) in cases {
            let body = match decide(current, desired) {
                Decision::Keep => None,
                Decision::Set { value, .. } => Some(annotation_patch(&value).to_string()),
            };
            assert_eq!(body.as_deref(), want, "{current:?} → {desired}");
        }
    }

    fn grown_to(count: usize) -> TtlState {
        let mut state = TtlState::default();
        for _ in 0..count {
            state.node_added();
        }
        state
    }

    #[test]
    fn ttl_follows_the_table_on_the_way_up() {
        // (node count, expected ttl) — upstream's boundaries are crossed when count > sizeMax.
        let cases = [
            (0, 0),
            (1, 0),
            (100, 0),
            (101, 15),
            (500, 15),
            (501, 30),
            (1000, 30),
            (1001, 60),
            (2000, 60),
            (2001, 300),
            (5000, 300),
        ];
        for (count, ttl) in cases {
            assert_eq!(grown_to(count).desired_ttl(), ttl, "{count} nodes");
        }
    }

    #[test]
    fn hysteresis_up_at_101_down_only_at_89() {
        let mut state = grown_to(100);
        assert_eq!(state.desired_ttl(), 0);
        assert!(state.node_added(), "101st node steps up");
        assert_eq!(state.desired_ttl(), 15);
        for count in (90..101).rev() {
            assert!(
                !state.node_deleted(),
                "down to {count}: no change inside the band"
            );
            assert_eq!(state.desired_ttl(), 15);
        }
        assert_eq!(state.node_count(), 90);
        assert!(state.node_deleted(), "89 steps down");
        assert_eq!(state.desired_ttl(), 0);
        for _ in 0..11 {
            state.node_added();
        }
        assert_eq!(
            (state.node_count(), state.desired_ttl()),
            (100, 0),
            "back to 100 stays at 0"
        );
    }

    #[test]
    fn one_step_per_event_at_most() {
        // Port of upstream TestGetDesiredTTLSeconds-style transitions: a count that jumps past
        // two boundaries still moves one step per event, catching up on later events.
        let mut state = TtlState {
            node_count: 1500,
            ..TtlState::default()
        };
        assert!(state.node_added());
        assert_eq!(state.desired_ttl(), 15);
        assert!(state.node_added());
        assert_eq!(state.desired_ttl(), 30);
        let mut state = TtlState {
            node_count: 10,
            step: 4,
            upstream_step: 4,
        };
        assert!(state.node_deleted());
        assert_eq!(state.desired_ttl(), 60);
    }

    #[test]
    fn deletes_never_underflow() {
        let mut state = TtlState::default();
        assert!(!state.node_deleted());
        assert_eq!((state.node_count(), state.desired_ttl()), (0, 0));
    }

    #[test]
    fn decide_patches_missing_different_and_garbage_values() {
        let set = |v: &str, bad: Option<&str>| Decision::Set {
            value: v.into(),
            unparsable: bad.map(String::from),
        };
        let cases = [
            (None, 0, set("0", None)),
            (Some("0"), 0, Decision::Keep),
            (Some("15"), 15, Decision::Keep),
            (Some("15"), 30, set("30", None)),
            (Some("abc"), 15, set("15", Some("abc"))),
            (Some("-5"), 15, set("15", Some("-5"))),
            (Some("1e3"), 15, set("15", Some("1e3"))),
            (Some(""), 0, set("0", Some(""))),
            (Some(" 15"), 15, set("15", Some(" 15"))),
        ];
        for (current, desired, want) in cases {
            assert_eq!(decide(current, desired), want, "{current:?} → {desired}");
        }
    }

    /// kubernetes#109779: 95 nodes that all say 15 (grown past 100, shrunk back) keep 15
    /// after a restart; counting from 0, as upstream, ends at step 0 (TTL 0).
    #[test]
    fn a_restart_inside_the_overlap_keeps_the_step_the_nodes_agree_on() {
        let mut state = grown_to(95);
        assert_eq!(state.desired_ttl(), 0, "upstream's restart ends at TTL 0");
        assert!(state.recover(std::iter::repeat_n(Some("15"), 95)));
        assert_eq!(state.desired_ttl(), 15);
        assert_eq!(state.divergence(), Some(HYSTERESIS_KEPT_ON_RESTART));
        // The hysteresis goes on from the recovered step: 89 nodes step down, as upstream.
        for _ in 0..5 {
            assert!(!state.node_deleted());
        }
        assert_eq!((state.node_count(), state.desired_ttl()), (90, 15));
        assert!(state.node_deleted());
        assert_eq!(state.desired_ttl(), 0);
        assert_eq!(state.divergence(), None, "back in step with upstream");
    }

    #[test]
    fn recovery_needs_agreeing_annotations_and_a_size_the_step_allows() {
        let recovered = |count: usize, annotations: &[Option<&str>]| {
            let mut state = grown_to(count);
            let changed = state.recover(annotations.iter().copied());
            (changed, state.desired_ttl())
        };
        // Unannotated and garbage values do not vote.
        assert_eq!(
            recovered(95, &[Some("15"), None, Some("abc"), Some("-1")]),
            (true, 15)
        );
        // Disagreeing nodes (a step change half done), or a TTL no step has: counted as upstream.
        assert_eq!(recovered(95, &[Some("15"), Some("0")]), (false, 0));
        assert_eq!(recovered(95, &[Some("10")]), (false, 0));
        assert_eq!(recovered(95, &[None, None]), (false, 0));
        // A size outside the step's boundaries: 80 nodes cannot be at 15, 600 not at 15.
        assert_eq!(recovered(80, &[Some("15")]), (false, 0));
        assert_eq!(recovered(600, &[Some("15")]), (false, 30));
        // Agreement with what counting gives changes nothing.
        assert_eq!(recovered(120, &[Some("15")]), (false, 15));
        // Any step: 1950 nodes that say 300 (grown past 2000) stay at 300, not 60.
        assert_eq!(recovered(1950, &[Some("300")]), (true, 300));
    }
}
