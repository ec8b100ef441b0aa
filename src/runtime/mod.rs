//! How controllers run: the machinery every controller shares, and the only place they meet.
//! Watching the API server ([`watching`]), writing to it ([`writing`]), the connection itself
//! ([`connection`]); work queues and their rate limits, a controller's wiring
//! ([`controller`]), leader election and metrics. The process's listeners are
//! [`crate::serving`], beside this folder.
//!
//! What a Kubernetes object is, and how upstream prints it, is in [`crate::k8s`]; what a
//! controller decides is in its own folder under [`crate::controllers`].

pub mod backoff;
pub mod badinput;
pub mod clock;
pub mod connection;
pub mod controller;
pub mod leader;
pub mod memory;
pub mod metrics;
pub mod pacing;
pub mod protobuf;
pub mod queue;
pub mod rbac;
pub mod startup;
pub mod watching;
pub mod writing;

/// How the stores' namespace maps and sets of [`watching::stored::Named`] objects, the quota
/// totals and the work queues hash names and keys: foldhash, seeded per process (so crafted
/// names cannot collide on purpose). Every watch event looks up a namespace and a name and
/// queues a key, which std's SipHash does several times slower.
pub type KeyHasher = foldhash::fast::RandomState;
