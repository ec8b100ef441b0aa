//! `kubectl drain <node>` as the demo plays it (kubectl's `pkg/drain`): the node cordoned, each
//! of its pods evicted through the eviction API, an eviction the API server refuses (429, a
//! disruption budget) tried again every 5 s, each evicted pod waited for until it is gone;
//! kubectl's lines kept as it prints them.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::task::JoinHandle;

/// How long kubectl waits before it tries a refused eviction again.
const RETRY: Duration = Duration::from_secs(5);
/// How often kubectl looks whether an evicted pod is gone.
const WAIT: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Evicting,
    /// The last evictions were refused: the drain waits for a budget to allow them.
    Held,
    Drained,
    Failed,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Evicting => "evicting",
            Phase::Held => "held",
            Phase::Drained => "drained",
            Phase::Failed => "failed",
        }
    }
}

/// What the drain has done so far.
#[derive(Debug, Clone)]
pub struct Progress {
    pub node: String,
    pub phase: Phase,
    /// Pods still on the node.
    pub left: usize,
    /// Evictions the API server accepted.
    pub evicted: usize,
    /// Evictions it refused.
    pub refusals: usize,
    /// kubectl's output, in order.
    pub lines: Vec<String>,
}

/// A drain running in the background until the node is empty (or an eviction fails).
pub struct Drain {
    progress: Arc<Mutex<Progress>>,
    task: JoinHandle<()>,
}

impl Drain {
    pub fn start(client: Client, node: &str) -> Self {
        let progress = Arc::new(Mutex::new(Progress {
            node: node.to_string(),
            phase: Phase::Evicting,
            left: 0,
            evicted: 0,
            refusals: 0,
            lines: Vec::new(),
        }));
        let shared = progress.clone();
        let node = node.to_string();
        let task = tokio::spawn(async move {
            if let Err(err) = drain(&client, &node, &shared).await {
                let mut progress = lock(&shared);
                progress.phase = Phase::Failed;
                progress
                    .lines
                    .push(format!("error: unable to drain node {node:?}: {err}"));
            }
        });
        Self { progress, task }
    }

    pub fn progress(&self) -> Progress {
        lock(&self.progress).clone()
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(progress: &Mutex<Progress>) -> MutexGuard<'_, Progress> {
    progress.lock().unwrap_or_else(|e| e.into_inner())
}

fn say(progress: &Mutex<Progress>, line: String) {
    lock(progress).lines.push(line);
}

/// A pod of the node, until it is gone.
struct Leaving {
    pods: Api<Pod>,
    namespace: String,
    name: String,
    uid: Option<String>,
    evicted: bool,
}

async fn drain(client: &Client, node: &str, progress: &Mutex<Progress>) -> Result<(), kube::Error> {
    let cordon = Patch::Merge(json!({ "spec": { "unschedulable": true } }));
    Api::<Node>::all(client.clone())
        .patch(node, &PatchParams::default(), &cordon)
        .await?;
    say(progress, format!("node/{node} cordoned"));
    // kubectl's filters (DaemonSet and mirror pods skipped; bare pods and emptyDir refused
    // without --force) let every pod of this node through: it runs only web pods.
    let on_node = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?
        .items;
    let mut leaving: Vec<Leaving> = on_node
        .iter()
        .map(|pod| {
            let namespace = pod.namespace().unwrap_or_default();
            Leaving {
                pods: Api::namespaced(client.clone(), &namespace),
                namespace,
                name: pod.name_any(),
                uid: pod.uid(),
                evicted: false,
            }
        })
        .collect();
    lock(progress).left = leaving.len();
    while !leaving.is_empty() {
        let mut refused = false;
        for pod in leaving.iter_mut().filter(|p| !p.evicted) {
            say(
                progress,
                format!("evicting pod {}/{}", pod.namespace, pod.name),
            );
            match pod.pods.evict(&pod.name, &EvictParams::default()).await {
                Ok(_) => {
                    pod.evicted = true;
                    lock(progress).evicted += 1;
                }
                // Gone already: nothing left to evict.
                Err(kube::Error::Api(status)) if status.code == 404 => pod.evicted = true,
                Err(kube::Error::Api(status)) if status.code == 429 => {
                    refused = true;
                    let mut progress = lock(progress);
                    progress.refusals += 1;
                    progress.lines.push(format!(
                        "error when evicting pods/{:?} -n {:?} (will retry after {}s): {}",
                        pod.name,
                        pod.namespace,
                        RETRY.as_secs(),
                        status.message
                    ));
                }
                Err(err) => return Err(err),
            }
        }
        let mut still = Vec::new();
        for pod in leaving {
            // Gone once no pod of its name is left, or one of another UID replaced it.
            let gone = pod.evicted
                && pod
                    .pods
                    .get_opt(&pod.name)
                    .await?
                    .is_none_or(|p| p.uid() != pod.uid);
            if gone {
                say(progress, format!("pod/{} evicted", pod.name));
            } else {
                still.push(pod);
            }
        }
        leaving = still;
        {
            let mut state = lock(progress);
            state.left = leaving.len();
            state.phase = if refused {
                Phase::Held
            } else {
                Phase::Evicting
            };
        }
        if !leaving.is_empty() {
            tokio::time::sleep(if refused { RETRY } else { WAIT }).await;
        }
    }
    let mut progress = lock(progress);
    progress.phase = Phase::Drained;
    progress.lines.push(format!("node/{node} drained"));
    Ok(())
}
