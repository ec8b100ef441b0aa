//! The resource types the server serves: the built-in table plus types registered at run time.

use serde_json::{Value, json};

use crate::events::View;

/// The store key of pods, the one served type whose registry deletes gracefully and which has
/// the `binding` and `eviction` subresources.
pub(crate) const PODS: &str = "/pods";

/// Where a scale subresource reads and writes replicas, as a CRD's `subresources.scale` declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// Dotted path of the desired replicas, e.g. `spec.replicas`.
    pub spec_replicas: String,
    /// Dotted path of the observed replicas, e.g. `status.replicas`.
    pub status_replicas: String,
    /// Where the label selector comes from.
    pub selector: ScaleSelector,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScaleSelector {
    /// No selector (`status.selector` is left out of the Scale).
    None,
    /// A `metav1.LabelSelector` object (Deployment, ReplicaSet, StatefulSet) at this dotted path.
    LabelSelectorObject(String),
    /// A plain `map[string]string` selector (ReplicationController) at this dotted path.
    MapSelector(String),
    /// An already-serialized selector string at this dotted path (CRD `labelSelectorPath`).
    String(String),
}

/// One served resource, e.g. `apps/v1 deployments`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: String,
    pub version: String,
    /// Plural resource name used in URLs.
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    /// Has a `/status` subresource: the main endpoint ignores `.status`, `/status` takes only it.
    pub status: bool,
    pub scale: Option<ScalePaths>,
    /// Built-in types accept strategic merge patches; custom resources answer 415, as upstream.
    pub builtin: bool,
    /// Another API of a stored type (events.k8s.io/v1 Events are core/v1 Events): objects
    /// live in that type's collection and are converted on every read and write.
    pub view: Option<View>,
}

impl ResourceType {
    /// A custom namespaced resource, the shape of a simple CRD.
    pub fn custom(group: &str, version: &str, plural: &str, kind: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            kind: kind.into(),
            namespaced: true,
            short_names: Vec::new(),
            status: false,
            scale: None,
            builtin: false,
            view: None,
        }
    }

    pub fn cluster_scoped(mut self) -> Self {
        self.namespaced = false;
        self
    }

    pub fn with_status(mut self) -> Self {
        self.status = true;
        self
    }

    /// Adds a CRD-style scale subresource: `spec.replicas`, `status.replicas`, and a string
    /// selector at `status.selector`.
    pub fn with_scale(mut self) -> Self {
        self.scale = Some(ScalePaths {
            spec_replicas: "spec.replicas".into(),
            status_replicas: "status.replicas".into(),
            selector: ScaleSelector::String("status.selector".into()),
        });
        self
    }

    /// `group/version`, or just `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The key objects of this type are stored under: group and plural (one version per
    /// group), or the stored type's key for a view.
    pub fn key(&self) -> String {
        match self.view {
            Some(view) => view.storage_key().into(),
            None => self.own_key(),
        }
    }

    /// `group/plural`: the key the type itself is registered under.
    pub(crate) fn own_key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }

    /// `pods`, or `deployments.apps`: how the real server names a resource in error messages.
    pub fn qualified_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The discovery entries of this type and its subresources.
    pub fn discovery_entries(&self) -> Vec<Value> {
        // Every type is read and written in full; discovery lists the verbs sorted.
        let reads = ["get", "list", "watch"];
        let writes = ["create", "update", "patch", "delete", "deletecollection"];
        let mut verbs: Vec<&str> = reads.into_iter().chain(writes).collect();
        verbs.sort_unstable();
        let mut main = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": verbs,
        });
        if !self.short_names.is_empty() {
            main["shortNames"] = json!(self.short_names);
        }
        let mut entries = vec![main];
        if self.status {
            entries.push(json!({
                "name": format!("{}/status", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if self.scale.is_some() {
            entries.push(json!({
                "name": format!("{}/scale", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
        // Pods' create-only subresources; kubectl drain evicts only when discovery lists
        // `pods/eviction` with its group and version.
        if self.view.is_none() && self.group.is_empty() && self.plural == "pods" {
            entries.push(json!({
                "name": "pods/binding", "singularName": "", "namespaced": true,
                "kind": "Binding", "verbs": ["create"],
            }));
            entries.push(json!({
                "name": "pods/eviction", "singularName": "", "namespaced": true,
                "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"],
            }));
        }
        entries
    }
}

fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    kind: &str,
    namespaced: bool,
    short_names: &[&str],
    status: bool,
) -> ResourceType {
    ResourceType {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        namespaced,
        short_names: short_names.iter().map(|s| s.to_string()).collect(),
        status,
        scale: None,
        builtin: true,
        view: None,
    }
}

fn with_builtin_scale(mut rt: ResourceType, selector: ScaleSelector) -> ResourceType {
    rt.scale = Some(ScalePaths {
        spec_replicas: "spec.replicas".into(),
        status_replicas: "status.replicas".into(),
        selector,
    });
    rt
}

/// Every type the server serves from the start.
pub fn builtin_types() -> Vec<ResourceType> {
    let label_selector = || ScaleSelector::LabelSelectorObject("spec.selector".into());
    vec![
        builtin("", "v1", "namespaces", "Namespace", false, &["ns"], true),
        builtin("", "v1", "nodes", "Node", false, &["no"], true),
        builtin("", "v1", "pods", "Pod", true, &["po"], true),
        builtin("", "v1", "services", "Service", true, &["svc"], true),
        builtin(
            "",
            "v1",
            "serviceaccounts",
            "ServiceAccount",
            true,
            &["sa"],
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "ClusterRole",
            false,
            &[],
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
            &[],
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "roles",
            "Role",
            true,
            &[],
            false,
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "RoleBinding",
            true,
            &[],
            false,
        ),
        builtin(
            "",
            "v1",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            true,
            &["pvc"],
            true,
        ),
        builtin("", "v1", "configmaps", "ConfigMap", true, &["cm"], false),
        builtin("", "v1", "secrets", "Secret", true, &[], false),
        with_builtin_scale(
            builtin(
                "",
                "v1",
                "replicationcontrollers",
                "ReplicationController",
                true,
                &["rc"],
                true,
            ),
            ScaleSelector::MapSelector("spec.selector".into()),
        ),
        builtin(
            "",
            "v1",
            "resourcequotas",
            "ResourceQuota",
            true,
            &["quota"],
            true,
        ),
        builtin("", "v1", "events", "Event", true, &["ev"], false),
        with_builtin_scale(
            builtin(
                "apps",
                "v1",
                "deployments",
                "Deployment",
                true,
                &["deploy"],
                true,
            ),
            label_selector(),
        ),
        with_builtin_scale(
            builtin(
                "apps",
                "v1",
                "replicasets",
                "ReplicaSet",
                true,
                &["rs"],
                true,
            ),
            label_selector(),
        ),
        with_builtin_scale(
            builtin(
                "apps",
                "v1",
                "statefulsets",
                "StatefulSet",
                true,
                &["sts"],
                true,
            ),
            label_selector(),
        ),
        // No scale subresource: a PDB over a Job's pods cannot count its expected pods.
        builtin("batch", "v1", "jobs", "Job", true, &[], true),
        builtin(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
            &["pdb"],
            true,
        ),
        builtin(
            "coordination.k8s.io",
            "v1",
            "leases",
            "Lease",
            true,
            &[],
            false,
        ),
        builtin(
            "resource.k8s.io",
            "v1",
            "resourceclaims",
            "ResourceClaim",
            true,
            &[],
            true,
        ),
        builtin(
            "resource.k8s.io",
            "v1",
            "resourceclaimtemplates",
            "ResourceClaimTemplate",
            true,
            &[],
            false,
        ),
        builtin(
            "resource.k8s.io",
            "v1",
            "deviceclasses",
            "DeviceClass",
            false,
            &[],
            false,
        ),
        builtin(
            "resource.k8s.io",
            "v1",
            "resourceslices",
            "ResourceSlice",
            false,
            &[],
            false,
        ),
        builtin(
            "internal.apiserver.k8s.io",
            "v1alpha1",
            "storageversions",
            "StorageVersion",
            false,
            &[],
            true,
        ),
        builtin(
            "scheduling.k8s.io",
            "v1",
            "priorityclasses",
            "PriorityClass",
            false,
            &["pc"],
            false,
        ),
        ResourceType {
            view: Some(View::EventsV1),
            ..builtin(
                "events.k8s.io",
                "v1",
                "events",
                "Event",
                true,
                &["ev"],
                false,
            )
        },
    ]
}
