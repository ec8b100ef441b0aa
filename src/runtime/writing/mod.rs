//! Writing to the API server: the one writer every controller write goes through
//! ([`writer`]: counted, withheld under `--shadow`), the mutation cache that shows a written
//! object before its watch event arrives ([`mutation`]), and Events as
//! kube-controller-manager records them ([`events`]).
//!
//! What is written (statuses, conditions, event messages) is the controllers' decision, not
//! this folder's.

pub mod events;
pub mod mutation;
pub mod writer;
