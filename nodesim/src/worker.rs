//! The kubelets' pod work and the scheduler, in one task fed by one watch of pods (and one of
//! nodes, for the scheduler) and by timers: a pod's readiness, its exit and its termination are
//! each one sleeping timer, not a poll.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::node::pod_subnet;
use crate::pod::{self, Containers};
use crate::schedule::{self, Room};
use crate::{Shared, is_transient};

/// How soon a failed write is tried again.
const RETRY: Duration = Duration::from_secs(1);
/// How often Pending pods that fit nowhere are tried again (room may have freed up).
const RESCHEDULE: Duration = Duration::from_secs(2);
/// How long unbound pods gather before they are placed together (one pass over the pods).
const SCHEDULE_BATCH: Duration = Duration::from_millis(100);

pub(crate) enum Work {
    Pod(Box<Pod>),
    Gone(String),
    Due(String, Due),
    NodeStarted(String),
    Schedule,
}

/// What a timer is for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Due {
    /// Look at the pod again: its readiness delay passed, or a write is retried.
    Refresh,
    /// Its containers exit.
    Exit,
    /// Its grace period (or the containers' shutdown) ended: remove it.
    Terminate,
}

/// A pod this simulator runs.
struct Tracked {
    key: ObjectRef<Pod>,
    host_ip: String,
    pod_ip: String,
    started: jiff::Timestamp,
    /// The readiness last written (containers ready, pod ready); None: nothing written yet or
    /// the write failed.
    written: Option<(bool, bool)>,
    ready_since: jiff::Timestamp,
    exited: bool,
    terminating: bool,
}

/// Starts the pod watch, the node watch and tick (when scheduling), and the worker.
pub(crate) fn spawn(
    shared: Arc<Shared>,
    work: mpsc::UnboundedSender<Work>,
    queue: mpsc::UnboundedReceiver<Work>,
) -> Vec<JoinHandle<()>> {
    let (pods, pod_writer) = reflector::store::<Pod>();
    let (nodes, node_writer) = reflector::store::<Node>();
    let pods_api: Api<Pod> = Api::all(shared.client.clone());
    let pod_events =
        reflector::reflector(pod_writer, watcher(pods_api, Default::default())).default_backoff();
    let sender = work.clone();
    let mut tasks = vec![tokio::spawn(async move {
        let mut events = std::pin::pin!(pod_events);
        while let Some(event) = events.next().await {
            let item = match event {
                Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                    Work::Pod(Box::new(pod))
                }
                Ok(watcher::Event::Delete(pod)) => Work::Gone(pod.uid().unwrap_or_default()),
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "watching pods");
                    continue;
                }
            };
            if sender.send(item).is_err() {
                return;
            }
        }
    })];
    if shared.config.schedule {
        let nodes_api: Api<Node> = Api::all(shared.client.clone());
        let node_events = reflector::reflector(node_writer, watcher(nodes_api, Default::default()))
            .default_backoff();
        tasks.push(tokio::spawn(async move {
            let mut events = std::pin::pin!(node_events);
            while events.next().await.is_some() {}
        }));
        let ticks = work.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(RESCHEDULE);
            loop {
                tick.tick().await;
                if ticks.send(Work::Schedule).is_err() {
                    return;
                }
            }
        }));
    }
    let mut worker = Worker {
        shared,
        work,
        pods,
        nodes,
        tracked: HashMap::new(),
        next_ip: HashMap::new(),
        assumed: HashMap::new(),
        schedule_armed: false,
    };
    tasks.push(tokio::spawn(async move { worker.run(queue).await }));
    tasks
}

struct Worker {
    shared: Arc<Shared>,
    work: mpsc::UnboundedSender<Work>,
    pods: Store<Pod>,
    nodes: Store<Node>,
    tracked: HashMap<String, Tracked>,
    /// The next host number of each node's pod subnet.
    next_ip: HashMap<String, u32>,
    /// Pods bound by this scheduler that the watch does not show bound yet: uid → node.
    assumed: HashMap<String, String>,
    /// A scheduling pass is due soon.
    schedule_armed: bool,
}

fn timestamp(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn since(at: jiff::Timestamp) -> Duration {
    Duration::try_from(jiff::Timestamp::now().duration_since(at)).unwrap_or_default()
}

impl Worker {
    async fn run(&mut self, mut queue: mpsc::UnboundedReceiver<Work>) {
        while let Some(item) = queue.recv().await {
            match item {
                Work::Pod(pod) => self.pod(&pod).await,
                Work::Gone(uid) => {
                    self.tracked.remove(&uid);
                    self.assumed.remove(&uid);
                }
                Work::Due(uid, due) => self.due(&uid, due).await,
                Work::NodeStarted(node) => {
                    for pod in self.pods.state() {
                        if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&node) {
                            let uid = pod.uid().unwrap_or_default();
                            if let Some(t) = self.tracked.get_mut(&uid) {
                                t.written = None;
                                t.terminating = false;
                            }
                            self.pod(&pod).await;
                        }
                    }
                }
                Work::Schedule => {
                    self.schedule_armed = false;
                    self.schedule().await;
                }
            }
        }
    }

    fn after(&self, delay: Duration, uid: &str, due: Due) {
        let work = self.work.clone();
        let uid = uid.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = work.send(Work::Due(uid, due));
        });
    }

    async fn pod(&mut self, pod: &Pod) {
        let uid = pod.uid().unwrap_or_default();
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            if self.shared.config.schedule && !self.schedule_armed && schedulable(pod) {
                self.schedule_armed = true;
                let work = self.work.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(SCHEDULE_BATCH).await;
                    let _ = work.send(Work::Schedule);
                });
            }
            return;
        };
        self.assumed.remove(&uid);
        if self.shared.is_alive(&node) != Some(true) {
            return;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            let t = self.track(pod, &node);
            if !t.terminating {
                t.terminating = true;
                let grace = pod
                    .metadata
                    .deletion_grace_period_seconds
                    .unwrap_or(0)
                    .max(0);
                let delay = Duration::from_secs(grace as u64).min(self.shared.config.shutdown);
                self.after(delay, &uid, Due::Terminate);
            }
            return;
        }
        if pod::is_terminal(pod) {
            return;
        }
        let fresh = !self.tracked.contains_key(&uid);
        self.track(pod, &node);
        if fresh {
            self.arm_timers(pod, &uid);
        }
        self.write_running(pod, &uid).await;
    }

    /// The tracked record of `pod`, made on first sight: a pod another simulator started keeps
    /// its start time and IP.
    fn track(&mut self, pod: &Pod, node: &str) -> &mut Tracked {
        let uid = pod.uid().unwrap_or_default();
        if !self.tracked.contains_key(&uid) {
            let status = pod.status.as_ref();
            // Nodes are named <prefix><index>; the index picks the node's subnet.
            let index = node
                .strip_prefix(&self.shared.config.node_prefix)
                .and_then(|i| i.parse().ok())
                .unwrap_or_default();
            let subnet = pod_subnet(index);
            let pod_ip = match status.and_then(|s| s.pod_ip.clone()) {
                Some(ip) => ip,
                None => {
                    let host = self.next_ip.entry(node.to_string()).or_insert(2);
                    let ip = format!("{subnet}.{host}");
                    *host = if *host >= 254 { 2 } else { *host + 1 };
                    ip
                }
            };
            let started = status
                .and_then(|s| s.start_time.as_ref())
                .map(|t| t.0)
                .unwrap_or_else(jiff::Timestamp::now);
            self.tracked.insert(
                uid.clone(),
                Tracked {
                    key: ObjectRef::from_obj(pod),
                    host_ip: format!("100.64.{}.{}", index / 256, index % 256),
                    pod_ip,
                    started,
                    written: None,
                    ready_since: started,
                    exited: false,
                    terminating: false,
                },
            );
        }
        self.tracked.get_mut(&uid).expect("tracked above")
    }

    /// Timers for the readiness delay and the containers' exit, from the pod's start.
    fn arm_timers(&self, pod: &Pod, uid: &str) {
        let Some(t) = self.tracked.get(uid) else {
            return;
        };
        let running = since(t.started);
        if let Some(after) = pod::ready_after(pod).filter(|after| *after > running) {
            self.after(after - running, uid, Due::Refresh);
        }
        if let Some((run_for, _)) = pod::run_for(pod) {
            self.after(run_for.saturating_sub(running), uid, Due::Exit);
        }
    }

    /// Writes the pod Running with the readiness it has now, unless that was written already.
    async fn write_running(&mut self, pod: &Pod, uid: &str) {
        let Some(t) = self.tracked.get_mut(uid) else {
            return;
        };
        if t.exited {
            return;
        }
        let containers_ready = pod::containers_ready(pod, since(t.started));
        let ready = (containers_ready, containers_ready && pod::gates_pass(pod));
        if t.written == Some(ready) {
            return;
        }
        if t.written.is_some_and(|(_, was)| was != ready.1) || t.written.is_none() && ready.1 {
            t.ready_since = jiff::Timestamp::now();
        }
        let started = timestamp(t.started);
        let patch = pod::status_patch(
            pod,
            &t.host_ip,
            &t.pod_ip,
            &started,
            Containers::Running {
                since: &started,
                ready: containers_ready,
            },
            &timestamp(t.ready_since),
        );
        let key = t.key.clone();
        let written = self.patch_status(&key, patch).await;
        if let Some(t) = self.tracked.get_mut(uid) {
            t.written = written.then_some(ready);
        }
        if !written {
            self.after(RETRY, uid, Due::Refresh);
        }
    }

    /// Patches `pods/status`; false when it should be tried again.
    async fn patch_status(&self, key: &ObjectRef<Pod>, patch: serde_json::Value) -> bool {
        let pods: Api<Pod> = Api::namespaced(
            self.shared.client.clone(),
            key.namespace.as_deref().unwrap_or_default(),
        );
        match pods
            .patch_status(&key.name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            Ok(_) => true,
            Err(e) if is_transient(&e) => {
                tracing::debug!(pod = %key, error = %e, "status write, retried");
                false
            }
            Err(_) => true,
        }
    }

    async fn due(&mut self, uid: &str, due: Due) {
        let Some(t) = self.tracked.get(uid) else {
            return;
        };
        let Some(pod) = self.pods.get(&t.key) else {
            return;
        };
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        if self.shared.is_alive(&node) != Some(true) {
            // A dead kubelet does nothing; NodeStarted takes the pod up again.
            return;
        }
        match due {
            Due::Refresh => self.write_running(&pod, uid).await,
            Due::Exit => {
                let code = pod::run_for(&pod).map_or(0, |(_, code)| code);
                if !self.write_exited(&pod, uid, code).await {
                    self.after(RETRY, uid, Due::Exit);
                }
            }
            Due::Terminate => self.terminate(&pod, uid).await,
        }
    }

    /// Writes the containers exited with `code` (Succeeded or Failed); false to retry.
    async fn write_exited(&mut self, pod: &Pod, uid: &str, code: i32) -> bool {
        let Some(t) = self.tracked.get(uid) else {
            return true;
        };
        if t.exited {
            return true;
        }
        let (started, now) = (timestamp(t.started), timestamp(jiff::Timestamp::now()));
        let patch = pod::status_patch(
            pod,
            &t.host_ip,
            &t.pod_ip,
            &started,
            Containers::Exited {
                since: &started,
                at: &now,
                code,
            },
            &now,
        );
        let key = t.key.clone();
        let written = self.patch_status(&key, patch).await;
        if let Some(t) = self.tracked.get_mut(uid) {
            t.exited = written;
        }
        written
    }

    /// Stops the containers of a deleted pod and removes it with grace 0, as the kubelet's
    /// status manager does once they are gone.
    async fn terminate(&mut self, pod: &Pod, uid: &str) {
        if !pod::is_terminal(pod) && !self.write_exited(pod, uid, 0).await {
            self.after(RETRY, uid, Due::Terminate);
            return;
        }
        let pods: Api<Pod> = Api::namespaced(
            self.shared.client.clone(),
            &pod.namespace().unwrap_or_default(),
        );
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match pods.delete(&pod.name_any(), &params).await {
            Ok(_) => {}
            Err(e) if is_transient(&e) => {
                tracing::debug!(pod = %pod.name_any(), error = %e, "removing, retried");
                self.after(RETRY, uid, Due::Terminate);
            }
            Err(_) => {
                self.tracked.remove(uid);
            }
        }
    }

    /// Places every schedulable unbound pod on the least allocated of our live nodes that takes
    /// it, one pass over the pods for all of them.
    async fn schedule(&mut self) {
        let all = self.pods.state();
        let mut rooms: HashMap<String, (Arc<Node>, Room)> = HashMap::new();
        for node in self.nodes.state() {
            let name = node.name_any();
            if self.shared.is_alive(&name) == Some(true) {
                let room = Room::of(&node);
                rooms.insert(name, (node, room));
            }
        }
        for pod in &all {
            let bound = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .or_else(|| self.assumed.get(&pod.uid().unwrap_or_default()).cloned());
            if let Some((_, room)) = bound.and_then(|n| rooms.get_mut(&n))
                && !pod::is_terminal(pod)
            {
                room.take(schedule::pod_requests(pod));
            }
        }
        for pod in all.iter().filter(|p| schedulable(p)) {
            let uid = pod.uid().unwrap_or_default();
            if self.assumed.contains_key(&uid) {
                continue;
            }
            let requests = schedule::pod_requests(pod);
            let best = rooms
                .iter()
                .filter(|(_, (node, _))| schedule::admits(node, pod))
                .filter_map(|(name, (_, room))| Some((room.score_with(requests)?, name.clone())))
                .min_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
            let Some((_, node)) = best else {
                continue;
            };
            if self.bind(pod, &node).await {
                self.assumed.insert(uid, node.clone());
                if let Some((_, room)) = rooms.get_mut(&node) {
                    room.take(requests);
                }
            }
        }
    }

    /// POSTs the pod's Binding to `node`; false when it was not bound.
    async fn bind(&self, pod: &Pod, node: &str) -> bool {
        let pods: Api<Pod> = Api::namespaced(
            self.shared.client.clone(),
            &pod.namespace().unwrap_or_default(),
        );
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": { "name": pod.name_any(), "uid": pod.uid() },
            "target": { "apiVersion": "v1", "kind": "Node", "name": node },
        });
        match pods
            .create_subresource::<_, serde_json::Value>(
                "binding",
                &pod.name_any(),
                &PostParams::default(),
                &binding,
            )
            .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!(pod = %pod.name_any(), node, error = %e, "binding");
                false
            }
        }
    }
}

/// An unbound pod the default scheduler would place.
fn schedulable(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    spec.node_name.is_none()
        && pod.metadata.deletion_timestamp.is_none()
        && matches!(
            spec.scheduler_name.as_deref(),
            None | Some("default-scheduler")
        )
        && spec.scheduling_gates.as_ref().is_none_or(Vec::is_empty)
        && !pod::is_terminal(pod)
}
