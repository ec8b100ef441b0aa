//! ttl-controller: keeps `node.alpha.kubernetes.io/ttl` on every Node at the TTL the cluster
//! size calls for: the step machine and the per-node decision in `plan.rs`, the annotation
//! patch in `sync.rs`; this file declares the controller and counts the nodes it watches.
//!
//! Beyond upstream: when the TTL step changes, every node is enqueued once, so the whole
//! cluster converges without waiting for each kubelet's next node update; and at the first
//! complete count the step is recovered from the nodes' annotations (kubernetes#109779), so a
//! restart inside the overlap of two steps keeps the TTL instead of rewriting every node.

pub mod plan;
mod sync;

use std::sync::{Arc, Mutex};

use futures::FutureExt;
use kube::ResourceExt;
use kube::api::Api;

use self::plan::{TTL_ANNOTATION, TtlState};
use super::{Context, ControllerError, Descriptor};
use crate::controllers::Controller;
use crate::lock::lock;
use crate::runtime::badinput::BadInput;
use crate::runtime::queue::WorkQueue;
use crate::runtime::rbac::{EVENTS, Rule, informs};
use crate::runtime::watching::informer::{Change, Store};
use crate::runtime::watching::stored::NodeMeta;
use crate::runtime::writing::writer::ApiWriter;

const CONTROLLER: &str = "ttl-controller";
const QUEUE: &str = "ttlcontroller";
/// Upstream hard-codes five workers and has no flag for it.
const WORKERS: usize = 5;

pub const DESCRIPTOR: Descriptor = Descriptor {
    controller: Controller::Ttl,
    name: CONTROLLER,
    aliases: &["ttl"],
    required_gates: &[],
    client: CONTROLLER,
    rbac: &[
        Rule::new(&[""], &["nodes"], &["update", "patch", "list", "watch"]),
        EVENTS,
    ],
    informs: &[informs(&[""], &["nodes"])],
    api: None,
    gated: &[],
    warm: |informers, _| {
        informers.get::<NodeMeta>();
    },
    run: |ctx| run(ctx).boxed(),
};

#[derive(Clone)]
struct Ttl {
    nodes: Store<NodeMeta>,
    api: Api<NodeMeta>,
    state: Arc<Mutex<TtlState>>,
    writer: ApiWriter,
    bad: Arc<BadInput>,
}

impl Ttl {
    fn state(&self) -> std::sync::MutexGuard<'_, TtlState> {
        lock(&self.state)
    }

    /// Event handling as upstream's add/update/delete handlers, plus the enqueue-all on a
    /// step change and the step's recovery once the first list is counted.
    fn on_change(&self, change: Change<NodeMeta>, queue: &WorkQueue<String>) {
        let (changed, enqueue) = match &change {
            Change::Added(node) => (self.state().node_added(), Some(node.name_any())),
            Change::Updated { new, .. } => (false, Some(new.name_any())),
            Change::Deleted(_) => (self.state().node_deleted(), None),
            Change::Synced => {
                let nodes = self.nodes.state();
                let annotations = nodes
                    .iter()
                    .map(|node| node.annotations().get(TTL_ANNOTATION).map(String::as_str));
                (self.state().recover(annotations), None)
            }
        };
        if changed {
            let (count, ttl) = {
                let state = self.state();
                (state.node_count(), state.desired_ttl())
            };
            tracing::debug!(
                nodes = count,
                ttl,
                "node TTL step changed; re-checking every node"
            );
            for node in self.nodes.state() {
                queue.add(node.name_any());
            }
        }
        if let Some(name) = enqueue {
            queue.add(name);
        }
    }
}

async fn run(ctx: Context) -> Result<(), ControllerError> {
    let ttl = Ttl {
        nodes: ctx.informers.get::<NodeMeta>().store().clone(),
        api: Api::all(ctx.client.clone()),
        state: Arc::default(),
        writer: ctx.writer(CONTROLLER),
        bad: Arc::new(BadInput::new(CONTROLLER, ctx.metrics.clone())),
    };
    let queue = WorkQueue::new(QUEUE, &ctx.metrics.workqueue);
    // Workers start once the handler has counted every node of the first list, so no node
    // is patched with a TTL for a cluster size that is still being counted.
    let handler = ttl.clone();
    let mut controller = ctx.controller();
    controller
        .watch(&queue, move |change, queue| {
            handler.on_change(change, queue)
        })
        .lane(&queue, WORKERS, move |name: String| {
            let ttl = ttl.clone();
            async move { ttl.reconcile(name).await }
        });
    Ok(controller.run().await?)
}
