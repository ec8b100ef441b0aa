//! Helpers shared by the testserver's integration tests.
#![allow(dead_code, unused_imports)]

use std::time::Duration;

pub use kube_testserver::testing::{eventually, http_get};

pub const DEADLINE: Duration = Duration::from_secs(10);
