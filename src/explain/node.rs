//! A node's TTL annotation: the cluster size, the TTL controller's step for it (as a
//! controller starting now reaches it, one node at a time) with its boundaries and
//! hysteresis, and `decide` on the node's annotation.

use kube::ResourceExt;
use serde::Serialize;

use super::{Difference, ExplainError, Explanation, Reads, Reasons};
use crate::controllers::ttl::plan::{BOUNDARIES, Decision, TTL_ANNOTATION, TtlState, decide};
use crate::runtime::watching::stored::NodeMeta;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReasons {
    pub nodes: usize,
    pub ttl_seconds: i32,
    /// The step's boundaries: it is left upwards above `stepUpAbove` nodes and downwards
    /// below `stepDownBelow` (the hysteresis: the steps overlap).
    pub step_up_above: Option<usize>,
    pub step_down_below: Option<usize>,
    pub annotation: Option<String>,
    pub desired: String,
}

pub fn explain(reads: &Reads<'_>, name: &str) -> Result<Explanation, ExplainError> {
    let nodes = reads.informers.get::<NodeMeta>();
    let node = nodes
        .store()
        .get("", name)
        .ok_or_else(|| ExplainError::NotFound {
            kind: "Node",
            name: name.to_string(),
        })?;
    let count = nodes.store().len();
    let state = TtlState::counted(count);
    let boundary = BOUNDARIES[state.step()];
    let desired = state.desired_ttl();
    let current = node.annotations().get(TTL_ANNOTATION).cloned();
    let mut differences = Vec::new();
    if let Decision::Set { value, .. } = decide(current.as_deref(), desired) {
        differences.push(Difference {
            field: format!("metadata.annotations[{TTL_ANNOTATION}]"),
            stored: current.clone().map_or(serde_json::Value::Null, Into::into),
            desired: value.into(),
        });
    }
    let in_sync = differences.is_empty();
    Ok(Explanation {
        kind: "Node",
        namespace: String::new(),
        name: name.to_string(),
        in_sync,
        differences,
        next: if in_sync {
            "keep the annotation".into()
        } else {
            "patch the annotation".into()
        },
        reasons: Reasons::Node(NodeReasons {
            nodes: count,
            ttl_seconds: desired,
            step_up_above: (state.step() + 1 < BOUNDARIES.len()).then_some(boundary.size_max),
            step_down_below: (state.step() > 0).then_some(boundary.size_min),
            annotation: current,
            desired: desired.to_string(),
        }),
    })
}
