//! kcm: a Kubernetes controller-manager in Rust, a drop-in for five controllers of
//! kube-controller-manager. `main.rs` is only the CLI entry; everything lives here so
//! integration tests can drive the real code.

pub mod app;
pub mod cli;
pub mod controllers;
pub mod explain;
pub mod features;
pub mod k8s;
pub mod lock;
pub mod runtime;
pub mod serving;
pub mod settings;
