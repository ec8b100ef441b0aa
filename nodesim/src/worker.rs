//! The kubelets' pod work and the scheduler, in one task that owns every pod's state. It is
//! fed by one watch of pods (and one of nodes, for the scheduler), by commands, and by one
//! delay queue holding at most one timer a pod (its next readiness change, exit, end of grace,
//! or retry). Each pod's writes run one at a time, with [`Config::writes_in_flight`] of all
//! pods' under way at once.
//!
//! [`Config::writes_in_flight`]: crate::Config::writes_in_flight

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::time::{DelayQueue, delay_queue};

use crate::ipam::Ipam;
use crate::node::{host_ip, pod_subnet};
use crate::pod::{self, Containers, Life, Step, Written};
use crate::schedule::{self, Misfit, Room};
use crate::{Shared, is_code, is_transient};

/// How long unbound pods gather before they are placed together (one pass over the pods).
const SCHEDULE_BATCH: Duration = Duration::from_millis(100);

/// What the [`Simulator`](crate::Simulator) tells the worker.
pub(crate) enum Command {
    /// The node's kubelet runs again: take up its pods.
    NodeStarted(String),
    /// A node's readiness changed: pods that fit nowhere may fit now.
    NodeChanged,
}

/// What a timer is for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wake {
    Pod(String),
    Schedule,
}

/// A pod this simulator runs.
struct Tracked {
    key: ObjectRef<Pod>,
    node: String,
    host_ip: String,
    /// Its address; None until one is free.
    pod_ip: Option<String>,
    /// Whether the address is still the pod's (not yet given back to the node's range).
    holds_ip: bool,
    life: Life,
    /// A write for it is under way.
    busy: bool,
    /// It waits in the queue of pods to look at.
    queued: bool,
    /// It changed while a write was under way: look again once it ends.
    dirty: bool,
    timer: Option<delay_queue::Key>,
}

/// A write under way.
enum Job {
    Pod { uid: String, step: Step },
    Bind { uid: String },
    Unschedulable,
}

/// How a write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Done,
    /// It may succeed later: try again after [`Config::retry`](crate::Config::retry).
    Retry,
    /// It never will (the pod is gone, the request is refused): do not try again.
    Final,
}

/// A scheduler's write waiting for room among the writes in flight.
enum Placement {
    Bind { pod: Arc<Pod>, node: String },
    Unschedulable { pod: Arc<Pod>, message: String },
}

struct Worker {
    shared: Arc<Shared>,
    pods: Store<Pod>,
    nodes: Store<Node>,
    tracked: HashMap<String, Tracked>,
    /// Pods to look at (by uid), each once.
    queue: VecDeque<String>,
    timers: DelayQueue<Wake>,
    jobs: JoinSet<(Job, Outcome)>,
    ipam: Ipam,
    /// Unbound pods the scheduler should place, by uid.
    pending: HashMap<String, ObjectRef<Pod>>,
    /// Pods bound by this scheduler that the watch does not show bound yet: uid → node.
    assumed: HashMap<String, String>,
    placements: VecDeque<Placement>,
    schedule_timer: Option<delay_queue::Key>,
    /// The pod watch is (re)listing: nothing is written until every listed pod's address is
    /// claimed, so no address is handed out twice.
    listing: bool,
}

/// What woke the worker.
enum Next {
    Pod(Option<Result<Box<watcher::Event<Pod>>, watcher::Error>>),
    Node,
    Command(Command),
    Timer(Wake),
    Finished((Job, Outcome)),
}

/// Runs the pods of the simulator's nodes (and the scheduler) until aborted.
pub(crate) async fn run(shared: Arc<Shared>, mut commands: mpsc::UnboundedReceiver<Command>) {
    let (pods, pod_writer) = reflector::store::<Pod>();
    let (nodes, node_writer) = reflector::store::<Node>();
    let client = shared.client.clone();
    // Without the scheduler only bound pods matter: the field selector keeps the others (a
    // big cluster's Pending pods of another scheduler) out of memory.
    let selector = watcher::Config::default();
    let selector = if shared.config.schedule {
        selector
    } else {
        selector.fields("spec.nodeName!=")
    };
    let mut pod_events = reflector::reflector(
        pod_writer,
        watcher(Api::<Pod>::all(client.clone()), selector)
            .default_backoff()
            .modify(|pod| pod.managed_fields_mut().clear()),
    )
    .boxed();
    let mut node_events: BoxStream<'static, ()> = if shared.config.schedule {
        reflector::reflector(
            node_writer,
            watcher(Api::<Node>::all(client), watcher::Config::default())
                .default_backoff()
                .modify(|node| node.managed_fields_mut().clear()),
        )
        .filter_map(|event| async move {
            event
                .map_err(|e| tracing::warn!(error = %e, "watching nodes"))
                .ok()
                .map(drop)
        })
        .boxed()
    } else {
        futures::stream::pending().boxed()
    };
    let mut worker = Worker {
        shared,
        pods,
        nodes,
        tracked: HashMap::new(),
        queue: VecDeque::new(),
        timers: DelayQueue::new(),
        jobs: JoinSet::new(),
        ipam: Ipam::default(),
        pending: HashMap::new(),
        assumed: HashMap::new(),
        placements: VecDeque::new(),
        schedule_timer: None,
        listing: true,
    };
    loop {
        worker.dispatch();
        let next = tokio::select! {
            event = pod_events.next() => Next::Pod(event.map(|e| e.map(Box::new))),
            Some(()) = node_events.next() => Next::Node,
            Some(command) = commands.recv() => Next::Command(command),
            Some(expired) = worker.timers.next() => Next::Timer(expired.into_inner()),
            Some(finished) = worker.jobs.join_next() => match finished {
                Ok(finished) => Next::Finished(finished),
                Err(e) => {
                    tracing::error!(error = %e, "a pod write panicked");
                    continue;
                }
            },
        };
        match next {
            Next::Pod(None) => return,
            Next::Pod(Some(Ok(event))) => worker.pod_event(*event),
            Next::Pod(Some(Err(e))) => tracing::warn!(error = %e, "watching pods"),
            Next::Node => worker.room_changed(),
            Next::Command(Command::NodeStarted(node)) => worker.node_started(&node),
            Next::Command(Command::NodeChanged) => worker.room_changed(),
            Next::Timer(Wake::Schedule) => {
                worker.schedule_timer = None;
                worker.schedule();
            }
            Next::Timer(Wake::Pod(uid)) => {
                if let Some(t) = worker.tracked.get_mut(&uid) {
                    t.timer = None;
                }
                worker.enqueue(&uid);
            }
            Next::Finished((job, outcome)) => worker.finished(job, outcome),
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
            None | Some("" | "default-scheduler")
        )
        && spec.scheduling_gates.as_ref().is_none_or(Vec::is_empty)
        && !pod::is_terminal(pod)
}

/// The pod `uid` under `key` in the store, unless it is gone (or made again under its name).
fn holds(pods: &Store<Pod>, uid: &str, key: &ObjectRef<Pod>) -> Option<Arc<Pod>> {
    pods.get(key).filter(|p| p.uid().as_deref() == Some(uid))
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

impl Worker {
    fn pod_event(&mut self, event: watcher::Event<Pod>) {
        match event {
            watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => self.pod_seen(&pod),
            watcher::Event::Delete(pod) => {
                let uid = pod.uid().unwrap_or_default();
                self.forget(&uid);
                self.pending.remove(&uid);
                self.assumed.remove(&uid);
                if node_of(&pod).is_some() {
                    self.room_changed();
                }
            }
            // A relist delivers no deletions: what the new list lacks is gone.
            watcher::Event::InitDone => {
                self.listing = false;
                let pods = &self.pods;
                let gone: Vec<String> = self
                    .tracked
                    .iter()
                    .filter(|(uid, t)| holds(pods, uid, &t.key).is_none())
                    .map(|(uid, _)| uid.clone())
                    .collect();
                for uid in gone {
                    self.forget(&uid);
                }
                let pods = &self.pods;
                self.pending
                    .retain(|uid, key| holds(pods, uid, key).is_some());
                self.assumed.retain(|uid, _| self.pending.contains_key(uid));
            }
            watcher::Event::Init => self.listing = true,
        }
    }

    fn pod_seen(&mut self, pod: &Pod) {
        let uid = pod.uid().unwrap_or_default();
        let Some(node) = node_of(pod) else {
            if self.shared.config.schedule && schedulable(pod) {
                if self.pending.insert(uid, ObjectRef::from_obj(pod)).is_none() {
                    self.arm_schedule(SCHEDULE_BATCH);
                }
            } else {
                self.pending.remove(&uid);
            }
            return;
        };
        // Bound: by us (the binding is seen now) or by someone else.
        self.pending.remove(&uid);
        self.assumed.remove(&uid);
        if self.shared.alive(node).is_none() {
            // Not ours, or its kubelet is dead: `node_started` takes the pod up.
            return;
        }
        if pod::is_terminal(pod) {
            // Its requests no longer count on the node.
            self.room_changed();
        }
        self.track(pod, node);
        self.enqueue(&uid);
    }

    /// The record of `pod` on `node`, made when first seen: a pod started by an earlier
    /// simulator keeps its start time and address.
    fn track(&mut self, pod: &Pod, node: &str) {
        let uid = pod.uid().unwrap_or_default();
        if self.tracked.contains_key(&uid) {
            return;
        }
        let index = self.shared.node(node).map_or(0, |n| n.index);
        let status = pod.status.as_ref();
        let pod_ip = status.and_then(|s| s.pod_ip.clone());
        // An exited pod's address went back to the node's range when its sandbox went.
        let holds_ip = pod_ip.is_some() && !pod::is_terminal(pod);
        if let (true, Some(ip)) = (holds_ip, &pod_ip) {
            self.ipam.claim(node, ip);
        }
        let started = status
            .and_then(|s| s.start_time.as_ref())
            .map_or_else(Timestamp::now, |t| t.0);
        self.tracked.insert(
            uid,
            Tracked {
                key: ObjectRef::from_obj(pod),
                node: node.to_string(),
                host_ip: host_ip(index),
                holds_ip,
                pod_ip,
                life: Life {
                    started,
                    written: None,
                    deleting_since: None,
                },
                busy: false,
                queued: false,
                dirty: false,
                timer: None,
            },
        );
    }

    /// Drops what is known of pod `uid`: it is gone.
    fn forget(&mut self, uid: &str) {
        let Some(t) = self.tracked.remove(uid) else {
            return;
        };
        if let Some(key) = t.timer {
            self.timers.remove(&key);
        }
        if let (true, Some(ip)) = (t.holds_ip, &t.pod_ip) {
            self.ipam.release(&t.node, ip);
        }
    }

    fn enqueue(&mut self, uid: &str) {
        if let Some(t) = self.tracked.get_mut(uid)
            && !t.queued
        {
            t.queued = true;
            self.queue.push_back(uid.to_string());
        }
    }

    fn node_started(&mut self, node: &str) {
        for pod in self.pods.state() {
            if node_of(&pod) == Some(node) {
                self.track(&pod, node);
                self.enqueue(&pod.uid().unwrap_or_default());
            }
        }
        self.room_changed();
    }

    /// Room may have freed up or a node turned up: place the pods that wait, soon.
    fn room_changed(&mut self) {
        if !self.pending.is_empty() {
            self.arm_schedule(SCHEDULE_BATCH);
        }
    }

    fn arm_schedule(&mut self, delay: Duration) {
        if self.schedule_timer.is_none() {
            self.schedule_timer = Some(self.timers.insert(Wake::Schedule, delay));
        }
    }

    /// Sets pod `uid`'s one timer to `wake` from now, or clears it.
    fn set_timer(&mut self, uid: &str, wake: Option<Duration>) {
        let Some(t) = self.tracked.get_mut(uid) else {
            return;
        };
        match (&t.timer, wake) {
            (Some(key), Some(after)) => self.timers.reset(key, after),
            (None, Some(after)) => t.timer = Some(self.timers.insert(Wake::Pod(uid.into()), after)),
            (Some(key), None) => {
                self.timers.remove(key);
                t.timer = None;
            }
            (None, None) => {}
        }
    }

    /// Starts the writes that are due, as many as may be in flight.
    fn dispatch(&mut self) {
        let limit = self.shared.config.writes_in_flight.max(1);
        while !self.listing && self.jobs.len() < limit {
            if let Some(placement) = self.placements.pop_front() {
                self.place(placement);
            } else if let Some(uid) = self.queue.pop_front() {
                self.look_at(&uid);
            } else {
                return;
            }
        }
    }

    /// Plans pod `uid` and starts the write it needs, if any.
    fn look_at(&mut self, uid: &str) {
        let now = Timestamp::now();
        let Some(t) = self.tracked.get_mut(uid) else {
            return;
        };
        t.queued = false;
        if t.busy {
            t.dirty = true;
            return;
        }
        let (key, node) = (t.key.clone(), t.node.clone());
        let Some(pod) = holds(&self.pods, uid, &key) else {
            self.forget(uid);
            return;
        };
        let Some(state) = self.shared.alive(&node) else {
            // A dead kubelet does nothing; `node_started` takes the pod up again.
            return;
        };
        let t = self.tracked.get_mut(uid).expect("tracked above");
        if pod.metadata.deletion_timestamp.is_some() {
            t.life.deleting_since.get_or_insert(now);
        }
        let (step, wake) = pod::plan(&pod, &t.life, now, self.shared.config.shutdown);
        let Some(step) = step else {
            self.set_timer(uid, wake);
            return;
        };
        if t.pod_ip.is_none() && step != Step::Remove {
            t.pod_ip = self.ipam.take(&node, &pod_subnet(state.index));
            t.holds_ip = t.pod_ip.is_some();
            if t.pod_ip.is_none() && matches!(step, Step::Run(_)) {
                tracing::warn!(pod = %key, node, "no pod address free on the node");
                self.set_timer(uid, Some(self.shared.config.retry));
                return;
            }
        }
        let containers = match &step {
            Step::Run(readiness) => Some(Containers::Running(readiness)),
            Step::Exit(code) => Some(Containers::Exited(*code)),
            Step::Remove => None,
        };
        let placement = pod::Placement {
            host_ip: &t.host_ip,
            pod_ip: t.pod_ip.as_deref(),
            started: t.life.started,
        };
        let patch = containers.map(|c| pod::status_patch(&pod, &placement, c, now));
        t.busy = true;
        self.set_timer(uid, wake);
        let api: Api<Pod> = Api::namespaced(
            self.shared.client.clone(),
            key.namespace.as_deref().unwrap_or_default(),
        );
        let uid = uid.to_string();
        self.jobs.spawn(async move {
            let outcome = match patch {
                Some(patch) => write_status(&api, &key.name, patch).await,
                None => remove(&api, &key.name, &uid).await,
            };
            (Job::Pod { uid, step }, outcome)
        });
    }

    fn finished(&mut self, job: Job, outcome: Outcome) {
        match job {
            Job::Pod { uid, step } => self.pod_written(&uid, step, outcome),
            Job::Bind { uid } => {
                if outcome != Outcome::Done {
                    self.assumed.remove(&uid);
                    let again = if outcome == Outcome::Retry {
                        self.shared.config.retry
                    } else {
                        SCHEDULE_BATCH
                    };
                    self.arm_schedule(again);
                }
            }
            Job::Unschedulable => {}
        }
    }

    fn pod_written(&mut self, uid: &str, step: Step, outcome: Outcome) {
        let Some(t) = self.tracked.get_mut(uid) else {
            return;
        };
        t.busy = false;
        let look_again = std::mem::take(&mut t.dirty);
        if outcome == Outcome::Retry {
            self.set_timer(uid, Some(self.shared.config.retry));
            if look_again {
                self.enqueue(uid);
            }
            return;
        }
        // A final refusal counts as written, so that it is not sent again and again.
        let exited = matches!(step, Step::Exit(_));
        t.life.written = Some(match step {
            Step::Run(readiness) => Written::Running(readiness),
            Step::Exit(_) => Written::Exited,
            Step::Remove => Written::Removed,
        });
        if exited
            && std::mem::take(&mut t.holds_ip)
            && let Some(ip) = &t.pod_ip
        {
            // The sandbox is gone: its address goes back to the node's range.
            self.ipam.release(&t.node, ip);
        }
        // Plan again: a deleted pod is removed right after its containers stop, and a change
        // seen meanwhile is written.
        self.enqueue(uid);
    }

    /// Places every schedulable unbound pod on the least allocated of our live nodes that takes
    /// it, one pass over the pods for all of them, oldest first.
    fn schedule(&mut self) {
        // Our live nodes; whether each reports Ready is known here before the watch says it.
        let mut rooms: HashMap<String, (Arc<Node>, bool, Room)> = HashMap::new();
        for node in self.nodes.state() {
            let name = node.name_any();
            if let Some(state) = self.shared.alive(&name) {
                let room = Room::of(&node);
                rooms.insert(name, (node, state.ready, room));
            }
        }
        for pod in self.pods.state() {
            let bound = node_of(&pod)
                .map(str::to_string)
                .or_else(|| self.assumed.get(&pod.uid().unwrap_or_default()).cloned());
            if let Some((_, _, room)) = bound.and_then(|n| rooms.get_mut(&n))
                && !pod::is_terminal(&pod)
            {
                room.take(schedule::pod_requests(&pod));
            }
        }
        let mut waiting: Vec<Arc<Pod>> = self
            .pending
            .iter()
            .filter(|(uid, _)| !self.assumed.contains_key(*uid))
            .filter_map(|(_, key)| self.pods.get(key))
            .filter(|pod| schedulable(pod))
            .collect();
        waiting.sort_by(|a, b| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(a)
                .cmp(&created(b))
                .then_with(|| a.name_any().cmp(&b.name_any()))
        });
        let mut names: Vec<&String> = rooms.keys().collect();
        names.sort();
        let names: Vec<String> = names.into_iter().cloned().collect();
        for pod in waiting {
            let requests = schedule::pod_requests(&pod);
            let mut misfit = Misfit::default();
            let mut best: Option<(f64, &String)> = None;
            for name in &names {
                let (node, ready, room) = &rooms[name];
                let score = schedule::admits(node, *ready, &pod)
                    .map_err(|reason| vec![reason])
                    .and_then(|()| room.score_with(requests));
                match score {
                    Ok(score) if best.is_none_or(|(b, _)| score < b) => best = Some((score, name)),
                    Ok(_) => {}
                    Err(reasons) => misfit.reject(reasons),
                }
            }
            match best {
                Some((_, node)) => {
                    let node = node.clone();
                    if let Some((_, _, room)) = rooms.get_mut(&node) {
                        room.take(requests);
                    }
                    self.assumed
                        .insert(pod.uid().unwrap_or_default(), node.clone());
                    self.placements.push_back(Placement::Bind { pod, node });
                }
                None => {
                    let message = misfit.message();
                    if !pod::is_unschedulable_with(&pod, &message) {
                        self.placements
                            .push_back(Placement::Unschedulable { pod, message });
                    }
                }
            }
        }
    }

    /// Starts a scheduler's write.
    fn place(&mut self, placement: Placement) {
        let client = self.shared.client.clone();
        match placement {
            Placement::Bind { pod, node } => {
                let uid = pod.uid().unwrap_or_default();
                self.jobs.spawn(async move {
                    let outcome = bind(client, &pod, &node).await;
                    (Job::Bind { uid }, outcome)
                });
            }
            Placement::Unschedulable { pod, message } => {
                let patch = pod::unschedulable_patch(&pod, &message, Timestamp::now());
                self.jobs.spawn(async move {
                    let api: Api<Pod> =
                        Api::namespaced(client, &pod.namespace().unwrap_or_default());
                    let outcome = write_status(&api, &pod.name_any(), patch).await;
                    (Job::Unschedulable, outcome)
                });
            }
        }
    }
}

/// What a failed pod write means for trying again; final refusals other than the pod being
/// gone are logged.
fn outcome_of(e: &kube::Error, pod: &str, what: &str) -> Outcome {
    if is_transient(e) {
        tracing::debug!(pod, error = %e, "{what}, to be retried");
        Outcome::Retry
    } else {
        if !is_code(e, 404) {
            tracing::warn!(pod, error = %e, "{what}");
        }
        Outcome::Final
    }
}

/// Every status write goes through here: a strategic merge patch of `pods/status`.
async fn write_status(api: &Api<Pod>, name: &str, patch: Value) -> Outcome {
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
    {
        Ok(_) => Outcome::Done,
        Err(e) => outcome_of(&e, name, "writing the pod status"),
    }
}

/// Deletes the pod with grace 0, only if it is still the pod `uid` (not one made again under
/// its name), as the kubelet's status manager does once its containers are gone.
async fn remove(api: &Api<Pod>, name: &str, uid: &str) -> Outcome {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Outcome::Done,
        // The precondition failed: the pod of that name is another one.
        Err(e) if is_code(&e, 409) => Outcome::Final,
        Err(e) => outcome_of(&e, name, "removing the pod"),
    }
}

/// POSTs the pod's Binding to `node`, as kube-scheduler binds.
async fn bind(client: kube::Client, pod: &Pod, node: &str) -> Outcome {
    let name = pod.name_any();
    let api: Api<Pod> = Api::namespaced(client, &pod.namespace().unwrap_or_default());
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": { "name": name, "uid": pod.uid() },
        "target": { "apiVersion": "v1", "kind": "Node", "name": node },
    });
    match api
        .create_subresource::<_, Value>("binding", &name, &PostParams::default(), &binding)
        .await
    {
        Ok(_) => {
            tracing::debug!(pod = name, node, "bound");
            Outcome::Done
        }
        // Bound already (by another scheduler) or changed: the watch will say.
        Err(e) if is_code(&e, 409) => Outcome::Final,
        Err(e) => outcome_of(&e, &name, "binding"),
    }
}
