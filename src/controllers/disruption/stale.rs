//! The `stale_pod_disruption` lane: resets a pod's DisruptionTarget condition that nobody
//! acted on in time, re-reading the full pod before the status update.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod as FullPod;
use kube::api::{Api, ListParams};

use super::budget::{cleared_disruption_target, stale_disruption_wait};
use super::{Disruption, DisruptionError};
use crate::runtime::watching::stored::split_key;

impl Disruption {
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
