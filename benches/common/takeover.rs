//! A standby's takeover on the real control plane, timed as an operator feels it: the leader
//! dies (SIGKILL, so its lease is not released and the standby waits it out), pods turn Ready
//! or not while no one leads, and the bench times the lease changing hands and the first
//! status write, by the new leader, that shows one of those changes.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::oneshot;

use super::world::{Model, ns_index, ns_name, pod_json};

/// The lease every controller manager of the scale bench elects its leader on (in
/// `kube-system`), named by `--leader-elect-resource-name`.
pub const LEASE: &str = "scale-bench";

/// What one takeover took, from the leader's SIGKILL.
pub struct Takeover {
    /// Until the bench's watch saw the lease held by another replica.
    pub lease_taken: Option<Duration>,
    /// Until the first PDB changed while no one led was right.
    pub first_right: Option<Duration>,
    /// Until every one of them was.
    pub all_right: Option<Duration>,
}

impl Takeover {
    /// From the lease taken to the first right status, in seconds: negative when the write
    /// reached the bench's PDB watch before the lease's update reached its lease watch.
    pub fn first_write_after_lease(&self) -> Option<f64> {
        Some(self.first_right?.as_secs_f64() - self.lease_taken?.as_secs_f64())
    }
}

/// Kills the leader with `kill` once the bench's watches are running, then flips the readiness
/// of one pod in each of the first `changes` namespaces (the model follows) and waits, at most
/// `timeout`, for the lease to change hands and the PDBs to show the flips.
pub async fn takeover(
    client: &Client,
    model: &mut Model,
    changes: usize,
    kill: impl FnOnce(),
    timeout: Duration,
) -> Takeover {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let leader = leases
        .get(LEASE)
        .await
        .unwrap_or_else(|e| panic!("lease kube-system/{LEASE}: {e}"))
        .spec
        .and_then(|spec| spec.holder_identity)
        .unwrap_or_else(|| panic!("lease kube-system/{LEASE} is not held"));
    let changes = changes.min(model.namespaces.len());
    let flips: Vec<(String, String, serde_json::Value)> = (0..changes)
        .map(|n| {
            let node = model.node_of(n, 0);
            let ns = ns_name(n);
            let pod = &mut model.namespaces[n][0];
            pod.ready = !pod.ready;
            let status = pod_json(&ns, pod, &node)["status"].clone();
            (ns, pod.name.clone(), status)
        })
        .collect();
    let model = &*model;

    let (lease_ready, lease_ready_rx) = oneshot::channel();
    let lease_taken = async {
        let config = watcher::Config::default().fields(&format!("metadata.name={LEASE}"));
        let events = watcher(leases.clone(), config).default_backoff();
        let mut events = std::pin::pin!(events);
        let mut ready = Some(lease_ready);
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::InitDone) => {
                    ready.take().map(|r| r.send(()));
                }
                Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => {
                    let holder = lease.spec.and_then(|s| s.holder_identity);
                    if holder.is_some_and(|h| !h.is_empty() && h != leader) {
                        return Instant::now();
                    }
                }
                Ok(_) => {}
                Err(e) => println!("(takeover lease watch error, retrying: {e})"),
            }
        }
        panic!("a watcher stream with backoff does not end")
    };

    let (pdbs_ready, pdbs_ready_rx) = oneshot::channel();
    let pdbs_right = async {
        let events = watcher(
            Api::<PodDisruptionBudget>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff();
        let mut events = std::pin::pin!(events);
        let mut ready = Some(pdbs_ready);
        let mut right = vec![false; changes];
        let mut first = None;
        while let Some(event) = events.next().await {
            let pdb = match event {
                Ok(watcher::Event::InitDone) => {
                    ready.take().map(|r| r.send(()));
                    continue;
                }
                Ok(watcher::Event::Apply(pdb) | watcher::Event::InitApply(pdb)) => pdb,
                Ok(_) => continue,
                Err(e) => {
                    println!("(takeover PDB watch error, retrying: {e})");
                    continue;
                }
            };
            let Some(n) = pdb.namespace().as_deref().and_then(ns_index) else {
                continue;
            };
            if n >= changes {
                continue;
            }
            right[n] = model.pdb_right(n, &serde_json::to_value(&pdb).unwrap_or_default());
            if right[n] {
                first.get_or_insert_with(Instant::now);
            }
            if right.iter().all(|r| *r) {
                return (first, Instant::now());
            }
        }
        panic!("a watcher stream with backoff does not end")
    };

    let killed = async {
        // Both watches hold their first lists: nothing the new leader writes is missed.
        let _ = lease_ready_rx.await;
        let _ = pdbs_ready_rx.await;
        kill();
        let killed = Instant::now();
        for (ns, name, status) in &flips {
            Api::<Pod>::namespaced(client.clone(), ns)
                .patch_status(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "status": status })),
                )
                .await
                .unwrap_or_else(|e| panic!("status of {ns}/{name}: {e}"));
        }
        killed
    };
    let (lease_taken, pdbs_right, killed) = tokio::join!(
        tokio::time::timeout(timeout, lease_taken),
        tokio::time::timeout(timeout, pdbs_right),
        killed,
    );
    let since_kill = |at: Instant| at.saturating_duration_since(killed);
    let (first_right, all_right) = match pdbs_right {
        Ok((first, all)) => (first.map(since_kill), Some(since_kill(all))),
        Err(_) => (None, None),
    };
    Takeover {
        lease_taken: lease_taken.ok().map(since_kill),
        first_right,
        all_right,
    }
}
