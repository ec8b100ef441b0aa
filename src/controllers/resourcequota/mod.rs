//! resourcequota-controller. Not registered in `app.rs` yet: the decisions that do not depend
//! on the evaluators are here and tested; the evaluators, monitors and wiring follow.

pub mod discovery;
pub mod status;
pub mod usage;
