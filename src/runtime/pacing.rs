//! Wake-up coalescing for the runtime's one thread. In a burst (a churn replacing thousands
//! of pods: several hundred watch events a second, each in its own TLS record, plus the
//! answers and echoes of status writes), kcm woke once for nearly every arrival, and on the
//! benchmark's VM a wake-up (the kernel's switch, `epoll_wait`, a socket read that drains
//! the socket and so sends an ACK) cost more of its CPU than the event it brought
//! (benches/README.md, "History").
//!
//! So, once the thread was woken soon after it parked (arrivals are dense), it sleeps
//! [`NAP`] before it parks again, and then takes in one go whatever arrived meanwhile. After
//! a longer park (a quiet cluster, the steady state) it parks at once: an isolated change is
//! handled the moment it arrives, and only what arrives while kcm is busy anyway waits, for
//! at most [`NAP`].
//!
//! Hand-written: tokio's runtime offers the park hooks, not a policy.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::lock::lock;

/// How long the thread sleeps before parking when arrivals are dense. Short against the
/// lags operators see (a PDB's or quota's status tens of milliseconds after a change).
pub const NAP: Duration = Duration::from_millis(5);

/// A park that ended sooner than this after it began means arrivals are dense.
pub const DENSE: Duration = Duration::from_millis(5);

/// When the runtime's thread last parked, and how long its last park lasted.
#[derive(Default)]
pub struct Pacing {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    parked_at: Option<Instant>,
    last_park: Option<Duration>,
}

impl Pacing {
    /// The thread is about to park at `now`: how long it should sleep first, if at all.
    pub fn before_park(&self, now: Instant) -> Option<Duration> {
        let mut state = lock(&self.state);
        let nap = state.last_park.filter(|park| *park < DENSE).map(|_| NAP);
        state.parked_at = Some(now + nap.unwrap_or_default());
        nap
    }

    /// The thread was woken at `now`.
    pub fn after_unpark(&self, now: Instant) {
        let mut state = lock(&self.state);
        state.last_park = state
            .parked_at
            .take()
            .map(|parked| now.saturating_duration_since(parked));
    }

    /// Installs the policy on a runtime being built: the thread sleeps in the park hook.
    pub fn install(builder: &mut tokio::runtime::Builder) -> &mut tokio::runtime::Builder {
        let pacing = std::sync::Arc::new(Pacing::default());
        let unparked = pacing.clone();
        builder
            .on_thread_park(move || {
                if let Some(nap) = pacing.before_park(Instant::now()) {
                    std::thread::sleep(nap);
                }
            })
            .on_thread_unpark(move || unparked.after_unpark(Instant::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_first_park_and_any_after_a_long_one_come_at_once() {
        let pacing = Pacing::default();
        let start = Instant::now();
        assert_eq!(pacing.before_park(start), None);
        pacing.after_unpark(start + 200 * MS);
        assert_eq!(pacing.before_park(start + 201 * MS), None);
        pacing.after_unpark(start + 201 * MS + DENSE);
        assert_eq!(
            pacing.before_park(start + 300 * MS),
            None,
            "exactly DENSE is quiet"
        );
    }

    #[test]
    fn a_park_cut_short_by_an_arrival_naps_before_the_next() {
        let pacing = Pacing::default();
        let start = Instant::now();
        assert_eq!(pacing.before_park(start), None);
        pacing.after_unpark(start + MS);
        let napped = start + 2 * MS;
        assert_eq!(pacing.before_park(napped), Some(NAP));
        // The park after the nap began when the nap ended: arrivals during the nap wake it
        // at once, and the stream is still dense.
        pacing.after_unpark(napped + NAP);
        assert_eq!(pacing.before_park(napped + NAP + MS), Some(NAP));
        // Nothing arrived for a while after the next nap: quiet again.
        pacing.after_unpark(napped + NAP + MS + NAP + 50 * MS);
        assert_eq!(pacing.before_park(napped + 100 * MS), None);
    }

    #[test]
    fn an_unpark_without_a_park_changes_nothing() {
        let pacing = Pacing::default();
        let start = Instant::now();
        pacing.after_unpark(start);
        assert_eq!(pacing.before_park(start + MS), None);
    }
}
