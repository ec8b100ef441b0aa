//! The usage evaluators, one file per kind of object, ported from upstream v1.36
//! `pkg/quota/v1/evaluator/core` (`pods.go`, `services.go`, `persistent_volume_claims.go`,
//! `resource_claims.go`) and the helpers they call (`component-helpers/resource`, `qos`,
//! `extendedresourcecache`), plus the object counts of every other type (`object_count.rs`).
//! What they share is in `usage.rs` (resource lists), `scope.rs` and `names.rs`. Pure: the
//! controller lists the objects and passes them in.

pub mod object_count;
pub mod persistentvolumeclaims;
pub mod pod_resources;
pub mod pods;
pub mod resourceclaims;
pub mod services;
