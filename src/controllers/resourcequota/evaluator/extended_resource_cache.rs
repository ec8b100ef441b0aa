//! Which DeviceClass serves an extended resource name, and which name a class maps (upstream's
//! `extendedresourcecache` package), as the ResourceClaim evaluator and the evaluators' inputs
//! read them.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::DeviceClass;

use crate::controllers::resourcequota::names::DEVICE_CLASS_PREFIX;
use crate::controllers::resourcequota::usage::time_nanos;

#[derive(Clone, Debug, PartialEq, Eq)]
struct ClassRef {
    name: String,
    created: Option<i128>,
}

/// Upstream `extendedresourcecache.ExtendedResourceCache`: extended resource name ->
/// DeviceClass, and DeviceClass -> its `spec.extendedResourceName`. Feed it the
/// DeviceClass informer events in order; its quirks (older class losing a name clash,
/// delete dropping a name another class won) are kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtendedResourceCache {
    resource_to_class: BTreeMap<String, ClassRef>,
    class_to_resource: BTreeMap<String, String>,
}

fn class_name(class: &DeviceClass) -> &str {
    class.metadata.name.as_deref().unwrap_or_default()
}

fn class_extended_name(class: &DeviceClass) -> Option<&str> {
    class
        .spec
        .as_ref()
        .and_then(|s| s.extended_resource_name.as_deref())
}

impl ExtendedResourceCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache that has seen an add event for each class, in order.
    pub fn from_classes<'a>(classes: impl IntoIterator<Item = &'a DeviceClass>) -> Self {
        let mut cache = Self::new();
        for class in classes {
            cache.on_add(class);
        }
        cache
    }

    pub fn on_add(&mut self, class: &DeviceClass) {
        self.update_resource_to_class(class, None);
        self.update_class_to_resource(class);
    }

    pub fn on_update(&mut self, old: &DeviceClass, new: &DeviceClass) {
        self.update_resource_to_class(new, Some(old));
        self.update_class_to_resource(new);
    }

    pub fn on_delete(&mut self, class: &DeviceClass) {
        let name = class_name(class);
        self.resource_to_class
            .remove(&format!("{DEVICE_CLASS_PREFIX}{name}"));
        if let Some(extended) = class_extended_name(class) {
            self.resource_to_class.remove(extended);
        }
        self.class_to_resource.remove(name);
    }

    /// `GetDeviceClass`: the class that serves `resource_name`, if any.
    pub fn device_class(&self, resource_name: &str) -> Option<&str> {
        self.resource_to_class
            .get(resource_name)
            .map(|c| c.name.as_str())
    }

    /// `GetExtendedResource`: the class's explicit extended resource name, if any.
    pub fn extended_resource(&self, class_name: &str) -> Option<&str> {
        self.class_to_resource
            .get(class_name)
            .map(String::as_str)
            .filter(|n| !n.is_empty())
    }

    fn update_resource_to_class(&mut self, new: &DeviceClass, old: Option<&DeviceClass>) {
        let new_ref = ClassRef {
            name: class_name(new).to_string(),
            created: time_nanos(new.metadata.creation_timestamp.as_ref()),
        };
        // On a name clash the newer class wins, the lower name on a tie. Upstream
        // returns before touching any mapping when the new class loses.
        if let Some(existing) = class_extended_name(new).and_then(|n| self.resource_to_class.get(n))
        {
            match new_ref.created.cmp(&existing.created) {
                std::cmp::Ordering::Less => return,
                std::cmp::Ordering::Equal if new_ref.name >= existing.name => return,
                _ => {}
            }
        }
        if let Some(old) = old {
            self.resource_to_class
                .remove(&format!("{DEVICE_CLASS_PREFIX}{}", class_name(old)));
            if let Some(extended) = class_extended_name(old) {
                self.resource_to_class.remove(extended);
            }
        }
        if let Some(extended) = class_extended_name(new) {
            self.resource_to_class
                .insert(extended.to_string(), new_ref.clone());
        }
        self.resource_to_class
            .insert(format!("{DEVICE_CLASS_PREFIX}{}", new_ref.name), new_ref);
    }

    fn update_class_to_resource(&mut self, class: &DeviceClass) {
        let name = class_name(class).to_string();
        match class_extended_name(class) {
            Some(extended) => {
                self.class_to_resource.insert(name, extended.to_string());
            }
            None => {
                self.class_to_resource.remove(&name);
            }
        }
    }
}
