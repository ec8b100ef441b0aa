//! The disruption controller's effects. The PDB sync fetches the PDB's pods (from the store,
//! or the API server while the store's watch fails) and their controllers' scale, performs
//! `plan_budget` (events and the status write through the writer), and falls back to the
//! fail-safe status on error. The `stale_pod_disruption` lane resets a pod's DisruptionTarget
//! condition that nobody acted on in time, re-reading the full pod before the status update.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod as FullPod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::plan::budget::{
    cleared_disruption_target, fail_safe_status, needs_controller_scale, stale_disruption_wait,
};
use super::plan::{plan_budget, pod_selector};
use super::{Disruption, DisruptionError};
use crate::controllers::ControllerError;
use crate::k8s::view::{Pod, WatchedPod};
use crate::runtime::watching::stored::split_key;
use crate::runtime::writing::writer::UpstreamFix;

impl Disruption {
    pub(super) fn now(&self) -> Time {
        Time((self.ctx.clock)())
    }

    /// Events never block or fail a sync.
    pub(super) fn event(
        &self,
        regarding: k8s_openapi::api::core::v1::ObjectReference,
        warning: bool,
        reason: &'static str,
        note: String,
    ) {
        self.recorder.record(regarding, warning, reason, note);
    }

    /// `sync`: the PDB's status, or the fail-safe status when that cannot be computed.
    pub(super) async fn sync(&self, pdb_key: String) -> Result<(), ControllerError> {
        let Some(pdb) = self.written.newest_by_key(self.pdbs.store(), &pdb_key) else {
            return Ok(());
        };
        match self.try_sync(&pdb).await {
            Ok(recheck) => {
                if let Some(after) = recheck {
                    self.recheck.add_after(pdb_key, after);
                }
                Ok(())
            }
            // A conflict is retried as is; anything else first writes the fail-safe status.
            Err(err) if err.is_conflict() => Err(err.into()),
            Err(err) => {
                tracing::warn!(pdb = pdb_key, error = %err, "Failed to sync PDB");
                self.fail_safe(&pdb, &err.to_string()).await?;
                Err(err.into())
            }
        }
    }

    async fn fail_safe(
        &self,
        pdb: &PodDisruptionBudget,
        message: &str,
    ) -> Result<(), DisruptionError> {
        let Some(status) = fail_safe_status(pdb, message, &self.now()) else {
            return Ok(());
        };
        self.write_status(pdb, status, None)
            .await
            .map_err(DisruptionError::FailSafe)
    }

    /// Replaces the PDB's status, remembering the write until the watch delivers it; `fix`
    /// names the upstream issue that makes this status differ from upstream's, if one does.
    async fn write_status(
        &self,
        pdb: &PodDisruptionBudget,
        status: PodDisruptionBudgetStatus,
        fix: Option<UpstreamFix>,
    ) -> kube::Result<()> {
        let mut desired = pdb.clone();
        desired.status = Some(status);
        let api: Api<PodDisruptionBudget> = Api::namespaced(
            self.ctx.client.clone(),
            &pdb.namespace().unwrap_or_default(),
        );
        let written = self
            .writer
            .because(fix)
            .replace_status(&api, pdb, desired)
            .await?;
        self.written.mutated(written, Instant::now());
        Ok(())
    }

    /// `trySync`: fetches the PDB's pods and their controllers' scale, and performs the
    /// plan; returns how long until the PDB must be looked at again, if ever.
    async fn try_sync(
        &self,
        pdb: &PodDisruptionBudget,
    ) -> Result<Option<Duration>, DisruptionError> {
        let plan = match pod_selector(pdb) {
            Err(failed) => *failed,
            Ok(selector) => {
                let pdb_ns = pdb.namespace().unwrap_or_default();
                let pods = self.pods_of(&pdb_ns).await?;
                let pods: Vec<&Pod> = pods
                    .iter()
                    .map(|p| p.as_ref())
                    .filter(|p| selector.matches(&p.labels))
                    .collect();
                let spec = pdb.spec.clone().unwrap_or_default();
                let scale = if needs_controller_scale(&spec) {
                    Some(self.scales.expected_scale(&pods).await)
                } else {
                    None
                };
                plan_budget(pdb, &pods, scale, &self.now())
            }
        };
        for event in plan.events {
            self.event(event.regarding, event.warning, event.reason, event.note);
        }
        if let Some(status) = plan.status? {
            self.write_status(pdb, status, plan.fix)
                .await
                .map_err(DisruptionError::WriteStatus)?;
        }
        Ok(plan.recheck)
    }

    /// The pods of a namespace: from the shared store, or — beyond upstream — from the API
    /// server while the store's list/watch is failing, since a store that is behind could
    /// count pods as healthy that are not any more, and allow too many disruptions.
    async fn pods_of(&self, namespace: &str) -> Result<Vec<Arc<Pod>>, DisruptionError> {
        if !self.pods.is_failing() {
            return Ok(self.pods.in_namespace(namespace));
        }
        let api: Api<WatchedPod> = Api::namespaced(self.ctx.client.clone(), namespace);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(DisruptionError::ListPods)?;
        Ok(list
            .items
            .into_iter()
            .map(|pod| Arc::new(pod.into()))
            .collect())
    }

    /// Resets a DisruptionTarget condition that nobody acted on within two minutes.
    pub(super) async fn clear_stale_condition(
        &self,
        pod_key: String,
    ) -> Result<(), DisruptionError> {
        let (ns, name) = split_key(&pod_key);
        let Some(pod) = self.pods.store().get(ns, name) else {
            return Ok(());
        };
        let now = self.now();
        match stale_disruption_wait(&pod, &now) {
            None => return Ok(()),
            Some(wait) if !wait.is_zero() => {
                self.stale.add_after(pod_key, wait);
                return Ok(());
            }
            Some(_) => {}
        }
        let failed = |source| DisruptionError::ClearCondition {
            pod: pod_key.clone(),
            source,
        };
        // The store holds a view, and the update writes the whole status: the full pod is
        // read first, by listing its one name (the pods RBAC allows list, not get, as
        // upstream's role). A pod that changed meanwhile is left to its next event.
        let api: Api<FullPod> = Api::namespaced(
            self.ctx.client.clone(),
            &pod.namespace().unwrap_or_default(),
        );
        let by_name = ListParams::default().fields(&format!("metadata.name={}", pod.name_any()));
        let listed = api.list(&by_name).await.map_err(failed)?;
        let Some(live) = listed.items.into_iter().next() else {
            return Ok(());
        };
        if stale_disruption_wait(&(&live).into(), &now) != Some(Duration::ZERO) {
            return Ok(());
        }
        let mut desired = live.clone();
        desired.status = Some(cleared_disruption_target(&live, &now));
        self.writer
            .replace_status(&api, &live, desired)
            .await
            .map(|_| ())
            .map_err(failed)
    }
}
