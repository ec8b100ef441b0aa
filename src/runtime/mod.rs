//! Plumbing shared by all controllers; controllers meet only here.

pub mod backoff;
pub mod badinput;
pub mod client;
pub mod clock;
pub mod controller;
pub mod counter;
pub mod credentials;
pub mod events;
pub mod golang;
pub mod index;
pub mod informer;
pub mod intern;
pub mod leader;
pub mod lock;
pub mod metrics;
pub mod mutation;
pub mod quantity;
pub mod queue;
pub mod rbac;
pub mod restclient;
pub mod selector;
pub mod serving;
pub mod startup;
pub mod stored;
pub mod view;
pub mod writer;
