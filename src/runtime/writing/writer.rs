//! The one path every controller write takes. It counts each write, and under `--shadow`
//! writes nothing: it logs what kcm would have changed and counts the disagreement, so an
//! operator can run kcm read-only beside kube-controller-manager before switching over.

use std::fmt::Debug;

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::runtime::metrics::Metrics;
use crate::runtime::protobuf::{self, ContentType, ProtobufBody};

/// The upstream issue a decision of kcm's departs from upstream for (`kubernetes#130723`):
/// a write made because of it is one upstream would not make, and shadow mode says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamFix(pub &'static str);

/// The `reason` of a shadow diff no fix of kcm's explains.
pub const UNEXPLAINED: &str = "unexplained";

#[derive(Clone)]
pub struct ApiWriter {
    controller: &'static str,
    metrics: Metrics,
    shadow: bool,
    /// How the answers of writes read for their resourceVersion alone are asked for.
    content: ContentType,
    /// Why this writer's writes differ from upstream's, when a fix of kcm's is the cause.
    fix: Option<UpstreamFix>,
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
    pub fn new(
        controller: &'static str,
        metrics: Metrics,
        shadow: bool,
        content: ContentType,
    ) -> Self {
        Self {
            controller,
            metrics,
            shadow,
            content,
            fix: None,
        }
    }

    /// This writer for the writes of a decision that `fix` makes differ from upstream's
    /// (`None`: no fix involved), so shadow mode labels their diffs with the issue.
    pub fn because(&self, fix: Option<UpstreamFix>) -> Self {
        Self {
            fix,
            ..self.clone()
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

    /// Shadow mode: log what would have been written and count it, with the upstream issue
    /// whose fix makes kcm disagree (`reason`), or `unexplained`.
    fn shadow(&self, verb: Verb, resource: &str, name: &str, change: &Value) {
        let reason = self.fix.map_or(UNEXPLAINED, |fix| fix.0);
        self.metrics
            .shadow_diffs
            .with_label_values(&[self.controller, resource, reason])
            .inc();
        tracing::info!(
            controller = self.controller,
            resource,
            name,
            verb = verb.as_str(),
            reason,
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
        let resource = Self::resource::<K>(None);
        let name = desired.name_any();
        if self.shadow {
            self.shadow_update(&resource, &name, live, desired, Part::Whole);
            return Ok(desired.clone());
        }
        let params = PostParams::default();
        let write = api.replace(&name, &params, desired);
        self.run(Verb::Update, &resource, write).await
    }

    /// `UpdateStatus`: only `.status` of `desired` is taken by the server (and, for quotas and
    /// PDBs, its metadata), sent in protobuf where its type has a [`ProtobufBody`] and the
    /// content type is protobuf, else in JSON. Returns `desired`
    /// as written: with the resourceVersion the server gave it, the one field of the answer
    /// read (the server keeps the rest as sent, or as it was outside the status), so the
    /// answer is asked for as metadata alone ([`protobuf::write`]).
    pub async fn replace_status<K>(&self, api: &Api<K>, live: &K, mut desired: K) -> kube::Result<K>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + ProtobufBody,
    {
        let resource = Self::resource::<K>(Part::Status.subresource());
        let name = desired.name_any();
        if self.shadow {
            self.shadow_update(&resource, &name, live, &desired, Part::Status);
            return Ok(desired);
        }
        let write = async {
            let protobuf_body = match self.content {
                ContentType::Protobuf => desired.protobuf_body(),
                ContentType::Json => None,
            };
            let (body, content_type) = match protobuf_body {
                Some(body) => (body, protobuf::PROTOBUF),
                None => (
                    serde_json::to_vec(&desired).map_err(kube::Error::SerdeError)?,
                    "application/json",
                ),
            };
            let mut request = kube::core::Request::new(api.resource_url())
                .replace_subresource("status", &name, &PostParams::default(), body)
                .map_err(kube::Error::BuildRequest)?;
            request.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(content_type),
            );
            protobuf::write(&api.clone().into_client(), request, self.content).await
        };
        desired.meta_mut().resource_version = self.run(Verb::Update, &resource, write).await?;
        Ok(desired)
    }

    fn shadow_update<K: Serialize>(
        &self,
        resource: &str,
        name: &str,
        live: &K,
        desired: &K,
        part: Part,
    ) {
        let diff = json_patch::diff(&part.of(to_json(live)), &part.of(to_json(desired)));
        self.shadow(Verb::Update, resource, name, &to_json(&diff));
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

    /// [`ApiWriter::patch`] of the whole object for a caller that keeps nothing of the
    /// object written: the answer is asked for as metadata alone, and read (so the connection
    /// is reused) for its resourceVersion only.
    pub async fn patch_unread<K, P>(
        &self,
        api: &Api<K>,
        live: &K,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<()>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
        P: Serialize + Debug,
    {
        let resource = Self::resource::<K>(None);
        let verb = patch_verb(patch);
        let name = live.name_any();
        if self.shadow {
            self.shadow(verb, &resource, &name, &patch_body(patch));
            return Ok(());
        }
        let write = async {
            let request = kube::core::Request::new(api.resource_url())
                .patch(&name, params, patch)
                .map_err(kube::Error::BuildRequest)?;
            protobuf::write(&api.clone().into_client(), request, self.content).await
        };
        self.run(verb, &resource, write).await.map(drop)
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
