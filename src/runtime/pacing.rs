//! Wake-up coalescing for the runtime's one thread. In a burst (a churn replacing thousands
//! of pods: several hundred watch events a second, each in its own TLS record, plus the
//! answers and echoes of status writes), kcm woke once for nearly every arrival, and on the
//! benchmark's VM the wake-ups (the kernel's switch, `epoll_wait`, a socket read that drains
//! the socket and so sends an ACK) cost about as much of its CPU as decoding the events
//! (benches/README.md, "History").
//!
//! So, while the thread is woken [`BUSY`] times or more in [`WINDOW`], it sleeps [`NAP`]
//! before it parks, and then takes in one go whatever arrived meanwhile. It stops once the
//! wake-ups fall below [`CALM`] in [`WINDOW`] (napping itself caps them at one per nap, hence
//! the lower bar). Below that rate (a quiet cluster, a steady churn of ten changes a second)
//! it parks at once, and every change is handled the moment it arrives: only what arrives in
//! a burst, while kcm is busy anyway, waits, for at most [`NAP`].
//!
//! Hand-written: tokio's runtime offers the park hooks, not a policy.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::lock::lock;

/// How long the thread sleeps before parking in a burst: long enough that a churn's few
/// hundred events a second arrive several to a wake-up, short beside the 250 ms beat that
/// throttled writes already wait for.
pub const NAP: Duration = Duration::from_millis(10);

/// The window wake-ups are counted over: longer than the cluster of wake-ups one change
/// brings (the event, the writes it causes, their answers and echoes), so that a steady
/// churn's clusters do not look like a burst, and a burst's short lulls do not end it.
pub const WINDOW: Duration = Duration::from_millis(250);

/// Wake-ups within [`WINDOW`] from which the thread naps: 120 a second.
pub const BUSY: usize = 30;

/// What the thread is taken to work between two naps in a burst.
const WORK_BETWEEN_NAPS: Duration = Duration::from_millis(2);

/// Wake-ups within [`WINDOW`] below which it stops napping: half of what a thread napping
/// [`NAP`] and working [`WORK_BETWEEN_NAPS`] between naps can reach (10, 40 a second), so
/// the naps themselves never end a burst's napping.
pub const CALM: usize =
    (WINDOW.as_millis() / (NAP.as_millis() + WORK_BETWEEN_NAPS.as_millis()) / 2) as usize;

/// The runtime thread's latest wake-ups, and whether it naps.
pub struct Pacing {
    state: Mutex<State>,
}

struct State {
    /// The last [`BUSY`] wake-ups, oldest first.
    wakes: VecDeque<Instant>,
    napping: bool,
}

impl Default for Pacing {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                wakes: VecDeque::with_capacity(BUSY),
                napping: false,
            }),
        }
    }
}

impl State {
    /// Whether the `count`th latest wake-up came less than [`WINDOW`] before `now`.
    fn woken_within_window(&self, count: usize, now: Instant) -> bool {
        self.wakes
            .len()
            .checked_sub(count)
            .and_then(|i| self.wakes.get(i))
            .is_some_and(|wake| now.saturating_duration_since(*wake) < WINDOW)
    }
}

impl Pacing {
    /// The thread is about to park at `now`: how long it should sleep first, if at all.
    pub fn before_park(&self, now: Instant) -> Option<Duration> {
        let mut state = lock(&self.state);
        let bar = if state.napping { CALM } else { BUSY };
        state.napping = state.woken_within_window(bar, now);
        state.napping.then_some(NAP)
    }

    /// The thread was woken at `now`.
    pub fn after_unpark(&self, now: Instant) {
        let mut state = lock(&self.state);
        if state.wakes.len() == BUSY {
            state.wakes.pop_front();
        }
        state.wakes.push_back(now);
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

    /// Wakes the thread `count` times, `gap` apart from `start`, each followed by a park;
    /// returns when the last park came and what it decided.
    fn wake(
        pacing: &Pacing,
        start: Instant,
        count: u32,
        gap: Duration,
    ) -> (Instant, Option<Duration>) {
        let mut decided = None;
        let mut at = start;
        for i in 0..count {
            at = start + gap * i;
            pacing.after_unpark(at);
            decided = pacing.before_park(at);
        }
        (at, decided)
    }

    #[test]
    fn a_steady_stream_of_wake_ups_parks_at_once() {
        let pacing = Pacing::default();
        let start = Instant::now();
        assert_eq!(pacing.before_park(start), None, "the first park");
        // 110 a second, for a second: never BUSY wake-ups within the window.
        let gap = Duration::from_micros(9_100);
        for i in 0..110 {
            pacing.after_unpark(start + gap * i);
            assert_eq!(pacing.before_park(start + gap * i), None, "wake-up {i}");
        }
    }

    #[test]
    fn a_burst_naps_once_busy_and_until_calm() {
        let pacing = Pacing::default();
        let start = Instant::now();
        // 400 a second: the BUSY-th wake-up, 72.5 ms after the first, starts the naps.
        let gap = Duration::from_micros(2_500);
        let (at, decided) = wake(&pacing, start, BUSY as u32 - 1, gap);
        assert_eq!(decided, None);
        let (at, decided) = wake(&pacing, at + gap, 1, gap);
        assert_eq!(decided, Some(NAP));
        // Napping, one wake-up every 12 ms (83 a second) keeps it napping...
        let (at, decided) = wake(&pacing, at + 12 * MS, 30, 12 * MS);
        assert_eq!(decided, Some(NAP));
        // ...and so do CALM wake-ups within the window: 24 ms apart (42 a second).
        let (at, decided) = wake(&pacing, at + 24 * MS, 20, 24 * MS);
        assert_eq!(decided, Some(NAP));
        // Fewer stop it: 30 ms apart (33 a second).
        let (at, decided) = wake(&pacing, at + 30 * MS, CALM as u32, 30 * MS);
        assert_eq!(decided, None);
        // Stopped, it takes BUSY wake-ups within the window again to start.
        let (_, decided) = wake(&pacing, at + 6 * MS, CALM as u32 + 1, 6 * MS);
        assert_eq!(decided, None);
    }
}
