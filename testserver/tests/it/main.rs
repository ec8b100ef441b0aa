//! kube-testserver through kube's client, kubectl and raw HTTP: one module per concern, one
//! test binary, so the server and its dependencies link once for all of them.

mod api;
mod auth;
mod binary;
mod common;
mod discovery;
mod events;
mod kubectl;
mod pods;
mod protobuf;
mod tables;
mod watch;
