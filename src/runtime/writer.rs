//! The one path every controller write takes. It counts each write, and under `--shadow`
//! writes nothing: it logs what kcm would have changed and counts the disagreement, so an
//! operator can run kcm read-only beside kube-controller-manager before switching over.

use std::fmt::Debug;

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::metrics::Metrics;

#[derive(Clone)]
pub struct ApiWriter {
    controller: &'static str,
    metrics: Metrics,
    shadow: bool,
}

/// What a write does, for metrics and the shadow log.
#[derive(Debug, Clone, Copy)]
enum Verb {
    Create,
    Update,
    Patch,
    Apply,
    Delete,
}

impl Verb {
    fn as_str(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Apply => "apply",
            Verb::Delete => "delete",
        }
    }
}

/// Whether a write targets the whole object or its status subresource.
#[derive(Debug, Clone, Copy)]
pub enum Part {
    Whole,
    Status,
}

impl Part {
    fn subresource(self) -> Option<&'static str> {
        match self {
            Part::Whole => None,
            Part::Status => Some("status"),
        }
    }

    /// The part of an object's JSON this write changes, for the shadow diff.
    fn of(self, mut obj: Value) -> Value {
        match self {
            Part::Whole => obj,
            Part::Status => obj["status"].take(),
        }
    }
}

fn patch_verb<P: Serialize>(patch: &Patch<P>) -> Verb {
    match patch {
        Patch::Apply(_) => Verb::Apply,
        _ => Verb::Patch,
    }
}

/// The body a patch would send, for the shadow log.
fn patch_body<P: Serialize + Debug>(patch: &Patch<P>) -> Value {
    match patch {
        Patch::Apply(body) | Patch::Merge(body) | Patch::Strategic(body) => to_json(body),
        other => Value::String(format!("{other:?}")),
    }
}

fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

impl ApiWriter {
    pub fn new(controller: &'static str, metrics: Metrics, shadow: bool) -> Self {
        Self {
            controller,
            metrics,
            shadow,
        }
    }

    fn resource<K: Resource<DynamicType = ()>>(subresource: Option<&str>) -> String {
        let plural = K::plural(&());
        match subresource {
            Some(sub) => format!("{plural}/{sub}"),
            None => plural.to_string(),
        }
    }

    fn count(&self, verb: Verb, resource: &str, ok: bool) {
        let result = if ok { "success" } else { "error" };
        self.metrics
            .api_writes
            .with_label_values(&[self.controller, verb.as_str(), resource, result])
            .inc();
    }

    /// Shadow mode: log what would have been written and count it.
    fn shadow(&self, verb: Verb, resource: &str, name: &str, change: &Value) {
        self.metrics
            .shadow_diffs
            .with_label_values(&[self.controller, resource])
            .inc();
        tracing::info!(
            controller = self.controller,
            resource,
            name,
            verb = verb.as_str(),
            change = %change,
            "shadow: not writing"
        );
    }

    async fn run<T>(
        &self,
        verb: Verb,
        resource: &str,
        write: impl Future<Output = kube::Result<T>>,
    ) -> kube::Result<T> {
        let result = write.await;
        self.count(verb, resource, result.is_ok());
        result
    }

    pub async fn create<K>(&self, api: &Api<K>, obj: &K) -> kube::Result<K>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
    {
        let resource = Self::resource::<K>(None);
        if self.shadow {
            self.shadow(Verb::Create, &resource, &obj.name_any(), &to_json(obj));
            return Ok(obj.clone());
        }
        self.run(
            Verb::Create,
            &resource,
            api.create(&PostParams::default(), obj),
        )
        .await
    }

    /// A whole-object update carrying `desired`'s resourceVersion (optimistic concurrency).
    pub async fn replace<K>(&self, api: &Api<K>, live: &K, desired: &K) -> kube::Result<K>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
    {
        self.replace_part(api, live, desired, Part::Whole).await
    }

    /// `UpdateStatus`: only `.status` of `desired` is taken by the server.
    pub async fn replace_status<K>(&self, api: &Api<K>, live: &K, desired: &K) -> kube::Result<K>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
    {
        self.replace_part(api, live, desired, Part::Status).await
    }

    async fn replace_part<K>(
        &self,
        api: &Api<K>,
        live: &K,
        desired: &K,
        part: Part,
    ) -> kube::Result<K>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
    {
        let resource = Self::resource::<K>(part.subresource());
        let name = desired.name_any();
        if self.shadow {
            let diff = json_patch::diff(&part.of(to_json(live)), &part.of(to_json(desired)));
            self.shadow(Verb::Update, &resource, &name, &to_json(&diff));
            return Ok(desired.clone());
        }
        let params = PostParams::default();
        let write = async {
            match part {
                Part::Whole => api.replace(&name, &params, desired).await,
                Part::Status => api.replace_status(&name, &params, desired).await,
            }
        };
        self.run(Verb::Update, &resource, write).await
    }

    /// A patch of `part` of the object (server-side apply included).
    pub async fn patch<K, P>(
        &self,
        api: &Api<K>,
        live: &K,
        params: &PatchParams,
        patch: &Patch<P>,
        part: Part,
    ) -> kube::Result<K>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
        P: Serialize + Debug,
    {
        let resource = Self::resource::<K>(part.subresource());
        let verb = patch_verb(patch);
        let name = live.name_any();
        if self.shadow {
            self.shadow(verb, &resource, &name, &patch_body(patch));
            return Ok(live.clone());
        }
        let write = async {
            match part {
                Part::Whole => api.patch(&name, params, patch).await,
                Part::Status => api.patch_status(&name, params, patch).await,
            }
        };
        self.run(verb, &resource, write).await
    }

    pub async fn delete<K>(&self, api: &Api<K>, live: &K, params: &DeleteParams) -> kube::Result<()>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
    {
        let resource = Self::resource::<K>(None);
        if self.shadow {
            self.shadow(Verb::Delete, &resource, &live.name_any(), &Value::Null);
            return Ok(());
        }
        self.run(
            Verb::Delete,
            &resource,
            api.delete(&live.name_any(), params),
        )
        .await
        .map(|_| ())
    }
}

/// client-go's `apierrors.IsNotFound`: the API server answered 404.
pub fn is_not_found(err: &kube::Error) -> bool {
    api_code(err) == Some(404)
}

/// client-go's `apierrors.IsConflict`: the API server answered 409 (a stale resourceVersion,
/// or an object that already exists).
pub fn is_conflict(err: &kube::Error) -> bool {
    api_code(err) == Some(409)
}

/// client-go's `apierrors.IsForbidden`: the API server answered 403.
pub fn is_forbidden(err: &kube::Error) -> bool {
    api_code(err) == Some(403)
}

fn api_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// What client-go's `err.Error()` shows for a failed request: the API server's message, so
/// events and logs read as upstream's.
pub fn error_text(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}
