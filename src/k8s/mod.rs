//! Kubernetes values as kcm holds and prints them: what an object *is* (compact views of
//! stored pods, v1.36's PodGroup), apimachinery's value types (`Quantity`, label selectors)
//! and Go's renderings of values, so statuses, events and errors read byte for byte as
//! upstream's.
//!
//! Nothing here talks to the API server or runs anything: how objects are watched, kept and
//! written is [`crate::runtime`]'s.

pub mod intern;
pub mod podgroup;
pub mod view;

// The value types kube-testserver shares live in their own crate; kcm names them here.
pub use kcm_values::{golang, quantity, selector, validation};
