//! The connection to the API server: the clients and their client-side rate limit
//! ([`client`]), each controller's own ServiceAccount credentials ([`credentials`]), whether
//! the cluster serves an API ([`discovery`]), what a failed request says ([`errors`]), why
//! the server cannot be reached ([`reachability`]), client-go's REST client metrics
//! ([`restclient`]), and the HTTP stack under every client ([`transport`]).
//!
//! What travels over it (lists, watches, writes) is in [`super::watching`] and
//! [`super::writing`].

pub mod client;
pub mod credentials;
pub mod discovery;
pub mod errors;
pub mod reachability;
pub mod restclient;
pub mod transport;
