//! The controller's side of the planning and sync traits: `Stores` reads the shared
//! informer stores (claims through the mutation cache, so a claim this controller just
//! wrote is seen at once), and `Effects` performs the writes through the one writer,
//! counting claim creates and keeping the mutation cache current.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::{Value, json};

use super::super::plan::claims::{
    ClaimOwner, Features, claim_statuses_apply, needs_admin_access, owner_uid,
};
use super::super::plan::{Problem, Stores};
use super::super::{FIELD_MANAGER, ResourceClaims};
use super::Effects;
use crate::k8s::podgroup::PodGroup;
use crate::k8s::view::{Pod, WatchedPod};
use crate::lock::lock;
use crate::runtime::connection::errors::is_not_found;
use crate::runtime::watching::stored::split_key;
use crate::runtime::writing::writer::Part;

impl ResourceClaims {
    fn claims_api(&self, claim: &ResourceClaim) -> Api<ResourceClaim> {
        Api::namespaced(
            self.ctx.client.clone(),
            &claim.namespace().unwrap_or_default(),
        )
    }

    /// Server-side apply of `body` to the status of `object`, as this controller's field
    /// manager, forced (upstream's `ApplyStatus`).
    async fn apply_status<K>(&self, object: &K, body: &Value) -> kube::Result<K>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(
            self.ctx.client.clone(),
            &object.namespace().unwrap_or_default(),
        );
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.writer
            .patch(&api, object, &params, &Patch::Apply(body), Part::Status)
            .await
    }
}

impl Stores for ResourceClaims {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.mutations
            .newest_in(self.claims.store(), namespace, name, Instant::now())
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods.store().get(namespace, name)
    }

    fn owned_claims(&self, namespace: &str, uid: &str) -> Vec<Arc<ResourceClaim>> {
        let mut names: Vec<String> = self
            .claims_by_owner
            .get(uid)
            .iter()
            .filter(|key| split_key(key).0 == namespace)
            .map(|key| split_key(key).1.to_string())
            .collect();
        names.extend(
            self.mutations
                .in_namespace(namespace, Instant::now(), |c| owner_uid(c) == Some(uid))
                .iter()
                .map(|c| c.name_any()),
        );
        names.sort();
        names.dedup();
        names
            .iter()
            .filter_map(|name| self.claim(namespace, name))
            .filter(|c| owner_uid(c) == Some(uid))
            .collect()
    }

    fn deleted(&self, uid: &str) -> bool {
        lock(&self.deleted_objects).contains(uid)
    }

    fn pod_group(&self, namespace: &str, name: &str) -> Option<Arc<PodGroup>> {
        self.pod_groups.as_ref()?.store().get(namespace, name)
    }

    fn template(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaimTemplate>> {
        self.templates.store().get(namespace, name)
    }

    fn pods_using(&self, namespace: &str, claim: &str) -> Vec<String> {
        self.pods_by_claim.get(&format!("{namespace}/{claim}"))
    }
}

impl Effects for ResourceClaims {
    fn features(&self) -> Features {
        self.features
    }

    async fn create_claim(&self, claim: &ResourceClaim) -> kube::Result<ResourceClaim> {
        let admin_access = if needs_admin_access(claim.spec.as_ref()) {
            "true"
        } else {
            "false"
        };
        let result = self.writer.create(&self.claims_api(claim), claim).await;
        let status = if result.is_ok() { "success" } else { "failure" };
        self.creates
            .with_label_values(&[status, admin_access])
            .inc();
        if let Ok(created) = &result {
            self.mutations.mutated(created.clone(), Instant::now());
        }
        result
    }

    async fn record_claims(&self, pod: &Pod, entries: &[(String, String)]) -> kube::Result<Pod> {
        let body = claim_statuses_apply(&ClaimOwner::pod(pod), entries);
        self.apply_status(&WatchedPod::from(pod), &body)
            .await
            .map(Pod::from)
    }

    async fn record_group_claims(
        &self,
        group: &PodGroup,
        entries: &[(String, String)],
    ) -> kube::Result<()> {
        let body = claim_statuses_apply(&ClaimOwner::group(group), entries);
        self.apply_status(group, &body).await.map(drop)
    }

    async fn write_claim_status(
        &self,
        live: &ResourceClaim,
        desired: &ResourceClaim,
    ) -> kube::Result<ResourceClaim> {
        let updated = self
            .writer
            .replace_status(&self.claims_api(live), live, desired.clone())
            .await?;
        self.mutations.mutated(updated.clone(), Instant::now());
        Ok(updated)
    }

    /// A merge patch carrying the resourceVersion, so a concurrent change conflicts as
    /// upstream's Update does, without writing back the stored copy (which lacks
    /// managedFields and kubectl's annotation).
    async fn write_finalizers(
        &self,
        live: &ResourceClaim,
        desired: &ResourceClaim,
    ) -> kube::Result<ResourceClaim> {
        let patch = json!({
            "metadata": {
                "resourceVersion": live.resource_version(),
                "finalizers": desired.finalizers(),
            }
        });
        let updated = self
            .writer
            .patch(
                &self.claims_api(live),
                live,
                &PatchParams::default(),
                &Patch::Merge(&patch),
                Part::Whole,
            )
            .await?;
        self.mutations.mutated(updated.clone(), Instant::now());
        Ok(updated)
    }

    async fn delete_claim(&self, claim: &ResourceClaim) -> kube::Result<()> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: claim.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self
            .writer
            .delete(&self.claims_api(claim), claim, &params)
            .await
        {
            Ok(()) => {}
            Err(err) if is_not_found(&err) => {}
            Err(err) => return Err(err),
        }
        self.mutations.deleted(claim, Instant::now());
        Ok(())
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> kube::Result<Option<Pod>> {
        let api: Api<WatchedPod> = Api::namespaced(self.ctx.client.clone(), namespace);
        Ok(api.get_opt(name).await?.map(Pod::from))
    }

    async fn get_pod_group(&self, namespace: &str, name: &str) -> kube::Result<Option<PodGroup>> {
        let api: Api<PodGroup> = Api::namespaced(self.ctx.client.clone(), namespace);
        api.get_opt(name).await
    }

    fn report(&self, problem: &Problem) -> bool {
        self.bad_input.report(
            &problem.object,
            &problem.version,
            problem.reason,
            &problem.message,
        )
    }

    fn warn(&self, object: ObjectReference, reason: &'static str, note: String) {
        self.recorder.record(object, true, reason, note);
    }
}
