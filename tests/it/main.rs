//! kcm against kube-testserver, in-process or as the binary, and what needs no cluster at all
//! (the command line, deploy/, property tests, Prometheus's tools): one module per concern,
//! one test binary, so kcm and its dependencies link once for all of them.
//!
//! A module's tests run beside every other module's in one process: none sets an environment
//! variable or changes the working directory (that would reach them all), and only
//! `serving::default_flags_serve_only_https_on_10257` listens on a fixed port.

mod cli;
mod client;
mod counter;
mod dashboard;
mod deploy;
mod disruption;
mod explain;
mod hostile;
mod informers;
mod kubeadm;
mod leader;
mod process;
mod prom;
mod prometheus;
mod properties;
mod quota_totals;
mod rbac;
mod resourceclaim;
mod resourcequota;
mod resourcequota_sync;
mod runtime;
mod serving;
mod soak;
mod standby;
mod startup;
mod storageversiongc;
mod ttl;
