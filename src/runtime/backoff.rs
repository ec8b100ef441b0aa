//! Per-key retry delays for work queues, matching client-go's
//! `workqueue.DefaultTypedControllerRateLimiter`: the larger of a per-key exponential
//! backoff (5ms doubling up to 1000s) and a shared token bucket (10 qps, burst 100).
//!
//! The clock is injected (`now` on every call) so the limiter stays deterministic in tests
//! and free of any runtime dependency.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use super::KeyHasher;

/// client-go's default per-item base delay.
pub const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(5);
/// client-go's default per-item maximum delay.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(1000);
/// client-go's default overall retry rate.
pub const DEFAULT_QPS: f64 = 10.0;
/// client-go's default overall burst.
pub const DEFAULT_BURST: u32 = 100;

/// Longest delay the bucket reports; Go's `time.Duration` cannot exceed `math.MaxInt64` ns,
/// and keeping the same bound means callers can add the delay to an `Instant` safely.
const MAX_BUCKET_DELAY: Duration = Duration::from_nanos(i64::MAX as u64);

/// Combined exponential-per-key and token-bucket rate limiter (client-go `MaxOf`).
#[derive(Debug, Clone)]
pub struct RateLimiter<K> {
    base_delay: Duration,
    max_delay: Duration,
    failures: HashMap<K, u32, KeyHasher>,
    bucket: TokenBucket,
}

impl<K: Eq + Hash + Clone> Default for RateLimiter<K> {
    fn default() -> Self {
        Self::new_default()
    }
}

impl<K: Eq + Hash + Clone> RateLimiter<K> {
    /// client-go's defaults: 5ms base, 1000s cap, 10 qps, burst 100.
    pub fn new_default() -> Self {
        Self::new(
            DEFAULT_BASE_DELAY,
            DEFAULT_MAX_DELAY,
            DEFAULT_QPS,
            DEFAULT_BURST,
        )
    }

    /// `qps` of +infinity disables the bucket (Go's `rate.Inf`); zero, negative or NaN means
    /// the bucket never refills, so once `burst` is spent the bucket delay is the maximum.
    /// `burst` 0 makes every call wait its turn at `qps` (Go would refuse the reservation and
    /// report an effectively infinite delay instead).
    pub fn new(base: Duration, cap: Duration, qps: f64, burst: u32) -> Self {
        Self {
            base_delay: base,
            max_delay: cap,
            failures: HashMap::default(),
            bucket: TokenBucket::new(qps, burst),
        }
    }

    /// Delay before `key` may be retried after another failure (client-go `When`): the max of
    /// the per-key exponential (base * 2^failures, capped; failures counted per key,
    /// incremented by this call) and the token bucket's reservation delay at `now`
    /// (golang.org/x/time/rate `Reserve` semantics: tokens refill continuously at qps up to
    /// burst; a reservation can drive tokens negative and the delay is the time until they are
    /// back to zero).
    pub fn when(&mut self, key: &K, now: Instant) -> Duration {
        let exponential = self.next_exponential_delay(key);
        // Both limiters are always consulted, as in client-go's MaxOf, so the bucket is
        // charged even when the exponential delay dominates.
        let bucket = self.bucket.reserve(now);
        exponential.max(bucket)
    }

    /// Number of failures recorded for key (client-go `NumRequeues`).
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.failures.get(key).copied().unwrap_or(0)
    }

    /// Success: reset the key's backoff (client-go `Forget`). The shared bucket is unaffected.
    pub fn forget(&mut self, key: &K) {
        self.failures.remove(key);
    }

    fn next_exponential_delay(&mut self, key: &K) -> Duration {
        let previous_failures = match self.failures.get_mut(key) {
            Some(count) => {
                let previous = *count;
                *count = count.saturating_add(1);
                previous
            }
            None => {
                self.failures.insert(key.clone(), 1);
                0
            }
        };
        exponential_delay(self.base_delay, self.max_delay, previous_failures)
    }
}

/// `base * 2^exponent`, capped at `cap`; any overflow means "past the cap".
fn exponential_delay(base: Duration, cap: Duration, exponent: u32) -> Duration {
    1u32.checked_shl(exponent)
        .and_then(|factor| base.checked_mul(factor))
        .map_or(cap, |delay| delay.min(cap))
}

/// How often requests waiting for a client-side token are released (see
/// [`TokenBucket::reserve_on_beat`]). A quarter second: at the default 20 qps, up to five
/// requests of a client leave together (what that saves: benches/README.md, History).
pub const BEAT: Duration = Duration::from_millis(250);

/// golang.org/x/time/rate's `Limiter`, reduced to what `Reserve().Delay()` needs. Also the
/// client-side API rate limit (`--kube-api-qps`/`--kube-api-burst`), as client-go's
/// flowcontrol uses the same limiter.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// Tokens per second; zero when the caller's rate was not positive (or NaN).
    qps: f64,
    burst: f64,
    /// May go negative: outstanding reservations that are still waiting.
    tokens: f64,
    /// `None` until first use; the bucket starts full, as Go's does.
    last_refill: Option<Instant>,
}

impl TokenBucket {
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst);
        Self {
            // `> 0.0` is false for NaN too; a zero rate makes the deficit divide to +inf,
            // which saturates to the maximum delay.
            qps: if qps > 0.0 { qps } else { 0.0 },
            burst,
            tokens: burst,
            last_refill: None,
        }
    }

    /// Takes one token at `now` and returns how long the caller must wait for it.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if self.qps == f64::INFINITY {
            return Duration::ZERO;
        }
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            return Duration::ZERO;
        }
        duration_from_seconds(-self.tokens / self.qps)
    }

    /// As [`reserve`](Self::reserve), but a wait ends on a beat of a clock that ticks every
    /// [`BEAT`] from `epoch`. Requests that must wait then leave in groups: those of one
    /// client whose tokens were earned within one beat, and those of every client (they share
    /// the epoch) at the same instants. One wake-up of the process, and of the API server,
    /// serves the group instead of one each. The rate holds, as a token is only ever used
    /// later than it was earned, never earlier; a request waits at most one beat longer. A
    /// beat is never shorter than one token's interval, nor longer than the bucket takes to
    /// earn its burst, so a group is never larger than `--kube-api-burst`.
    pub fn reserve_on_beat(&mut self, now: Instant, epoch: Instant) -> Duration {
        let delay = self.reserve(now);
        if delay.is_zero() || !(self.qps.is_finite() && self.qps > 0.0) {
            return delay;
        }
        let beat = BEAT
            .as_secs_f64()
            .min(self.burst / self.qps)
            .max(1.0 / self.qps);
        let on_beat = now.checked_add(delay).and_then(|due| {
            let since_epoch = due.saturating_duration_since(epoch).as_secs_f64();
            epoch.checked_add(duration_from_seconds((since_epoch / beat).ceil() * beat))
        });
        on_beat.map_or(delay, |on_beat| {
            on_beat.saturating_duration_since(now).max(delay)
        })
    }

    fn refill(&mut self, now: Instant) {
        if let Some(last) = self.last_refill {
            // A `now` earlier than the last refill adds nothing and does not move `last` back,
            // so an out-of-order caller cannot earn the same interval twice.
            let elapsed = now.saturating_duration_since(last);
            let refilled = elapsed.as_secs_f64() * self.qps;
            self.tokens = (self.tokens + refilled).min(self.burst);
            self.last_refill = Some(last.max(now));
        } else {
            self.last_refill = Some(now);
        }
    }
}

/// Rounds to the nearest nanosecond (so 0.1s is exactly 100ms despite binary floats) and
/// saturates instead of panicking on infinite or huge values.
fn duration_from_seconds(seconds: f64) -> Duration {
    let nanos = (seconds * 1e9).round();
    if nanos.is_nan() || nanos <= 0.0 {
        return Duration::ZERO;
    }
    // `as` saturates for out-of-range floats; the min keeps Go's int64 range.
    Duration::from_nanos(nanos as u64).min(MAX_BUCKET_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn exponential_sequence_doubles_to_exactly_the_cap_and_stays() {
        let mut limiter = RateLimiter::new_default();
        let now = Instant::now();
        let delays: Vec<Duration> = (0..25).map(|_| limiter.when(&"key", now)).collect();

        let expected_uncapped: Vec<Duration> = (0..18).map(|n| ms(5) * (1 << n)).collect();
        assert_eq!(&delays[..18], &expected_uncapped[..]);
        assert_eq!(delays[17], Duration::from_millis(655_360));
        assert!(delays[18..].iter().all(|&delay| delay == DEFAULT_MAX_DELAY));
        assert_eq!(limiter.num_requeues(&"key"), 25);
    }

    #[test]
    fn huge_failure_counts_cap_without_overflow() {
        assert_eq!(
            exponential_delay(ms(5), DEFAULT_MAX_DELAY, 31),
            DEFAULT_MAX_DELAY
        );
        assert_eq!(
            exponential_delay(ms(5), DEFAULT_MAX_DELAY, 32),
            DEFAULT_MAX_DELAY
        );
        assert_eq!(
            exponential_delay(ms(5), DEFAULT_MAX_DELAY, u32::MAX),
            DEFAULT_MAX_DELAY
        );
        let huge_base = Duration::MAX;
        assert_eq!(
            exponential_delay(huge_base, Duration::MAX, 1),
            Duration::MAX
        );
        assert_eq!(exponential_delay(huge_base, ms(1), 0), ms(1));
    }

    #[test]
    fn failure_count_saturates_instead_of_wrapping() {
        let mut limiter = RateLimiter::new(ms(5), ms(100), f64::INFINITY, 1);
        limiter.failures.insert("key", u32::MAX);
        assert_eq!(limiter.when(&"key", Instant::now()), ms(100));
        assert_eq!(limiter.num_requeues(&"key"), u32::MAX);
    }

    #[test]
    fn forget_resets_the_backoff() {
        let mut limiter = RateLimiter::new_default();
        let now = Instant::now();
        for _ in 0..5 {
            limiter.when(&"key", now);
        }
        assert_eq!(limiter.num_requeues(&"key"), 5);
        limiter.forget(&"key");
        assert_eq!(limiter.num_requeues(&"key"), 0);
        assert_eq!(limiter.when(&"key", now), ms(5));
        // Forgetting an unknown key is harmless.
        limiter.forget(&"never-seen");
    }

    #[test]
    fn keys_back_off_independently() {
        let mut limiter = RateLimiter::new_default();
        let now = Instant::now();
        assert_eq!(limiter.when(&"a", now), ms(5));
        assert_eq!(limiter.when(&"a", now), ms(10));
        assert_eq!(limiter.when(&"a", now), ms(20));
        assert_eq!(limiter.when(&"b", now), ms(5));
        assert_eq!(limiter.num_requeues(&"a"), 3);
        assert_eq!(limiter.num_requeues(&"b"), 1);
        limiter.forget(&"a");
        assert_eq!(limiter.num_requeues(&"b"), 1);
    }

    #[test]
    fn bucket_allows_burst_then_spaces_retries_at_qps() {
        let mut limiter = RateLimiter::new_default();
        let now = Instant::now();
        for key in 0..100 {
            assert_eq!(limiter.when(&key, now), ms(5), "key {key}");
        }
        for (position, key) in (100..110).enumerate() {
            let expected = ms(100) * (position as u32 + 1);
            assert_eq!(limiter.when(&key, now), expected, "key {key}");
        }
    }

    #[test]
    fn bucket_refills_as_the_clock_advances() {
        let mut limiter = RateLimiter::new_default();
        let start = Instant::now();
        for key in 0..110 {
            limiter.when(&key, start);
        }
        // Ten tokens in debt; one second at 10 qps pays it back exactly.
        let later = start + Duration::from_secs(1);
        assert_eq!(limiter.when(&1000, later), ms(100));

        // Long enough to refill completely, but never beyond the burst.
        let much_later = later + Duration::from_secs(60);
        for key in 2000..2100 {
            assert_eq!(limiter.when(&key, much_later), ms(5), "key {key}");
        }
        assert_eq!(limiter.when(&3000, much_later), ms(100));
    }

    #[test]
    fn waits_end_on_the_beat_and_never_before_the_token() {
        let epoch = Instant::now();
        // kcm's default bucket: 20 qps, burst 30, so a beat of 250 ms holds five tokens.
        let mut first = TokenBucket::new(20.0, 30);
        let mut second = TokenBucket::new(20.0, 30);
        // 7 ms and 31 ms past a beat, each bucket spends its burst, then waits.
        let (a, b) = (epoch + ms(1007), epoch + ms(1031));
        for _ in 0..30 {
            assert_eq!(first.reserve_on_beat(a, epoch), Duration::ZERO);
            assert_eq!(second.reserve_on_beat(b, epoch), Duration::ZERO);
        }
        let mut due_first = Vec::new();
        let mut due_second = Vec::new();
        for _ in 0..7 {
            due_first.push(a + first.reserve_on_beat(a, epoch) - epoch);
            due_second.push(b + second.reserve_on_beat(b, epoch) - epoch);
        }
        // Earned at 1057, 1107, … 1357 and 1081, 1131, … 1381: released on the beats after,
        // the two clients together.
        let together = [1250, 1250, 1250, 1250, 1500, 1500, 1500].map(ms);
        assert_eq!(due_first, together);
        assert_eq!(due_second, together);
        // A token earned on a beat is not held back.
        let mut on_beat = TokenBucket::new(20.0, 1);
        let c = epoch + ms(2000);
        on_beat.reserve_on_beat(c, epoch);
        assert_eq!(on_beat.reserve_on_beat(c, epoch), ms(50));
        // No rate, no beat: the bucket's own answer.
        let mut stopped = TokenBucket::new(0.0, 1);
        stopped.reserve_on_beat(c, epoch);
        assert_eq!(stopped.reserve_on_beat(c, epoch), MAX_BUCKET_DELAY);
    }

    /// A beat holds no more tokens than the burst, and no fewer than one.
    #[test]
    fn a_beat_is_bounded_by_the_burst_and_by_one_token() {
        let epoch = Instant::now();
        let start = epoch + ms(1000);
        let releases = |qps: f64, burst: u32, waiting: usize| {
            let mut bucket = TokenBucket::new(qps, burst);
            for _ in 0..burst {
                assert_eq!(bucket.reserve_on_beat(start, epoch), Duration::ZERO);
            }
            (0..waiting)
                .map(|_| start + bucket.reserve_on_beat(start, epoch) - epoch)
                .collect::<Vec<_>>()
        };
        // Burst 2 at 20 qps: two tokens a beat, so a beat of 100 ms.
        assert_eq!(releases(20.0, 2, 4), [1100, 1100, 1200, 1200].map(ms));
        // One token a second: the beat is the token's interval, not shorter.
        assert_eq!(releases(1.0, 10, 3), [2000, 3000, 4000].map(ms));
        // Whatever the rate and burst, a token is used after it is earned, and less than a
        // beat (or one token's interval, if longer) after.
        for (qps, burst) in [(20.0, 30), (5.0, 10), (200.0, 400), (3.0, 1), (1000.0, 2)] {
            let interval = 1.0 / qps;
            let beat = BEAT.as_secs_f64().max(interval);
            for (i, due) in releases(qps, burst, 40).into_iter().enumerate() {
                let earned = 1.0 + interval * (i + 1) as f64;
                let due = due.as_secs_f64();
                assert!(
                    due >= earned - 1e-9,
                    "{qps}/{burst}: #{i} at {due} before {earned}"
                );
                assert!(due < earned + beat + 1e-9, "{qps}/{burst}: #{i} at {due}");
            }
        }
    }

    #[test]
    fn clock_going_backwards_neither_refills_nor_panics() {
        let mut limiter = RateLimiter::new(ms(1), ms(1), 10.0, 1);
        let later = Instant::now() + Duration::from_secs(10);
        assert_eq!(limiter.when(&1, later), ms(1));
        let earlier = later - Duration::from_secs(5);
        assert_eq!(limiter.when(&2, earlier), ms(100));
        assert_eq!(limiter.when(&3, later), ms(200));
    }

    #[test]
    fn degenerate_rates_do_not_panic() {
        let now = Instant::now();
        let mut unlimited = RateLimiter::new(ms(5), ms(10), f64::INFINITY, 0);
        assert_eq!(unlimited.when(&1, now), ms(5));

        for qps in [0.0, -1.0, f64::NAN, f64::NEG_INFINITY] {
            let mut stuck = RateLimiter::new(ms(5), ms(10), qps, 1);
            assert_eq!(stuck.when(&1, now), ms(5), "qps {qps}");
            assert_eq!(stuck.when(&2, now), MAX_BUCKET_DELAY, "qps {qps}");
            // The capped delay can still be added to an Instant.
            assert!(now.checked_add(MAX_BUCKET_DELAY).is_some());
        }

        let mut no_burst = RateLimiter::new(Duration::ZERO, Duration::ZERO, 10.0, 0);
        assert_eq!(no_burst.when(&1, now), ms(100));
        assert_eq!(no_burst.when(&2, now), ms(200));
    }

    #[test]
    fn tiny_rates_saturate_rather_than_overflow() {
        assert_eq!(duration_from_seconds(f64::INFINITY), MAX_BUCKET_DELAY);
        assert_eq!(duration_from_seconds(1e30), MAX_BUCKET_DELAY);
        assert_eq!(duration_from_seconds(f64::NAN), Duration::ZERO);
        assert_eq!(duration_from_seconds(-1.0), Duration::ZERO);
        assert_eq!(duration_from_seconds(0.3), ms(300));
    }
}
