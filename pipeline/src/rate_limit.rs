//! Rate limiting as demand shaping: every processor's ask of a producer goes
//! through one budget of `allowed_messages` per `interval`, shared by all
//! processors (so across all producers). What the budget cannot grant now is
//! held, in the order it was asked, and granted when the next interval
//! starts; nothing is dropped.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use weir_gen_stage::SubscriptionId;

use crate::Error;

/// A rate limit: at most `allowed_messages` per `interval` (Broadway's
/// `rate_limiting: [allowed_messages: .., interval: ..]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimiting {
    /// Messages the producers are asked for per interval, across all of
    /// them.
    pub allowed_messages: usize,
    /// The interval.
    pub interval: Duration,
}

impl RateLimiting {
    /// `allowed_messages` per `interval`.
    pub fn new(allowed_messages: usize, interval: Duration) -> Self {
        Self {
            allowed_messages,
            interval,
        }
    }

    pub(crate) fn validate(self) -> Result<Self, Error> {
        if self.allowed_messages == 0 || self.interval.is_zero() {
            return Err(Error::InvalidRateLimiting {
                allowed_messages: self.allowed_messages,
                interval: self.interval,
            });
        }
        Ok(self)
    }
}

/// Hands demand the budget granted later to the processor that asked: it
/// sends the processor an info, and the processor asks its producer.
/// `false` if the processor has stopped.
pub(crate) type Grant = Arc<dyn Fn(SubscriptionId, usize) -> bool + Send + Sync>;

/// Demand waiting for the next interval.
struct Held {
    grant: Grant,
    subscription: SubscriptionId,
    wanted: usize,
}

struct State {
    limit: RateLimiting,
    /// Left in the current interval.
    remaining: usize,
    held: VecDeque<Held>,
}

/// The shared budget.
pub(crate) struct RateLimiter {
    state: Mutex<State>,
    /// Wakes the interval task to start a new interval now.
    reset: Arc<Notify>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("RateLimiter")
            .field("limit", &state.limit)
            .field("remaining", &state.remaining)
            .field("held", &state.held.len())
            .finish()
    }
}

/// The rate limiter's state, as a producer's metrics report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitingMetrics {
    /// The limit in force.
    pub limit: RateLimiting,
    /// Messages the current interval may still ask for.
    pub remaining: usize,
    /// Demand held for the next interval.
    pub held: usize,
}

impl RateLimiter {
    pub fn new(limit: RateLimiting) -> Self {
        Self {
            state: Mutex::new(State {
                limit,
                remaining: limit.allowed_messages,
                held: VecDeque::new(),
            }),
            reset: Arc::new(Notify::new()),
        }
    }

    /// Start a new interval now (its full budget, handed first to the
    /// demand held), instead of at the end of the current one; the
    /// intervals go on from now.
    pub fn reset(&self) {
        self.reset.notify_one();
    }

    /// What wakes the interval task for [`reset`](Self::reset).
    pub fn reset_signal(&self) -> Arc<Notify> {
        self.reset.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding the lock; a poisoned lock still holds
        // consistent counts.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A processor wants `n` more of `subscription`'s producer: what it may
    /// ask for now. The rest is held and handed to `grant` in a later
    /// interval. Demand held earlier goes first: nothing overtakes it.
    pub fn request(&self, grant: &Grant, subscription: SubscriptionId, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let mut state = self.lock();
        let now = if state.held.is_empty() {
            n.min(state.remaining)
        } else {
            0
        };
        state.remaining -= now;
        if now < n {
            state.held.push_back(Held {
                grant: grant.clone(),
                subscription,
                wanted: n - now,
            });
        }
        now
    }

    /// A subscription ended: its held demand is dropped.
    pub fn forget(&self, subscription: SubscriptionId) {
        self.lock()
            .held
            .retain(|held| held.subscription != subscription);
    }

    /// Granted demand that could not be used (its subscription had ended
    /// by the time the grant arrived) goes back to the budget.
    pub fn refund(&self, n: usize) {
        let mut state = self.lock();
        state.remaining = (state.remaining + n).min(state.limit.allowed_messages);
    }

    /// A new interval: the full budget, handed first to the demand held.
    /// Returns the interval to wait until the next.
    pub fn next_interval(&self) -> Duration {
        let mut grants = Vec::new();
        let interval = {
            let mut guard = self.lock();
            let state = &mut *guard;
            state.remaining = state.limit.allowed_messages;
            while state.remaining > 0 {
                let Some(front) = state.held.front_mut() else {
                    break;
                };
                let now = front.wanted.min(state.remaining);
                front.wanted -= now;
                state.remaining -= now;
                grants.push((front.grant.clone(), front.subscription, now));
                if front.wanted == 0 {
                    state.held.pop_front();
                }
            }
            state.limit.interval
        };
        // Outside the lock: a grant is a mailbox send.
        let mut refund = 0;
        for (grant, subscription, n) in grants {
            if !grant(subscription, n) {
                refund += n;
            }
        }
        if refund > 0 {
            self.refund(refund);
        }
        interval
    }

    /// Change the limit; it applies from the next interval on (as
    /// Broadway's `update_rate_limiting`).
    pub fn update(&self, limit: RateLimiting) {
        self.lock().limit = limit;
    }

    pub fn limit(&self) -> RateLimiting {
        self.lock().limit
    }

    pub fn snapshot(&self) -> RateLimitingMetrics {
        let state = self.lock();
        RateLimitingMetrics {
            limit: state.limit,
            remaining: state.remaining,
            held: state.held.iter().map(|held| held.wanted).sum(),
        }
    }
}

/// Starts a new interval every interval until `stopped` resolves (every
/// processor stopped) or the limiter is gone.
pub(crate) async fn run_intervals(limiter: Weak<RateLimiter>, stopped: impl Future<Output = ()>) {
    let Some((first, reset)) = limiter
        .upgrade()
        .map(|limiter| (limiter.limit().interval, limiter.reset_signal()))
    else {
        return;
    };
    let mut next = tokio::time::Instant::now() + first;
    tokio::pin!(stopped);
    loop {
        let started = tokio::select! {
            () = tokio::time::sleep_until(next) => next,
            () = reset.notified() => tokio::time::Instant::now(),
            () = &mut stopped => return,
        };
        let Some(limiter) = limiter.upgrade() else {
            return;
        };
        next = started + limiter.next_interval();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    type Log = Arc<Mutex<Vec<(u64, usize)>>>;

    fn recorder(log: &Log, alive: bool) -> Grant {
        let log = log.clone();
        Arc::new(move |subscription: SubscriptionId, n| {
            log.lock().map(|mut log| log.push((subscription.0, n))).ok();
            alive
        })
    }

    fn taken(log: &Log) -> Vec<(u64, usize)> {
        log.lock()
            .map(|mut log| std::mem::take(&mut *log))
            .unwrap_or_default()
    }

    #[test]
    fn grants_up_to_the_budget_and_holds_the_rest_in_order() {
        let limiter = RateLimiter::new(RateLimiting::new(10, Duration::from_secs(1)));
        let log = Log::default();
        let grant = recorder(&log, true);
        assert_eq!(limiter.request(&grant, SubscriptionId(1), 6), 6);
        assert_eq!(limiter.request(&grant, SubscriptionId(2), 6), 4);
        // Held demand goes first, even with budget left over for a small ask.
        limiter.refund(1);
        assert_eq!(limiter.request(&grant, SubscriptionId(3), 1), 0);
        assert_eq!(limiter.snapshot().held, 3);
        limiter.next_interval();
        assert_eq!(taken(&log), vec![(2, 2), (3, 1)]);
        assert_eq!(limiter.snapshot().remaining, 7);
    }

    #[test]
    fn a_large_ask_is_spread_over_intervals() {
        let limiter = RateLimiter::new(RateLimiting::new(4, Duration::from_secs(1)));
        let log = Log::default();
        let grant = recorder(&log, true);
        assert_eq!(limiter.request(&grant, SubscriptionId(1), 10), 4);
        limiter.next_interval();
        limiter.next_interval();
        limiter.next_interval();
        assert_eq!(taken(&log), vec![(1, 4), (1, 2)]);
        assert_eq!(limiter.snapshot().held, 0);
    }

    #[test]
    fn forgotten_and_undeliverable_demand_costs_no_budget() {
        let limiter = RateLimiter::new(RateLimiting::new(5, Duration::from_secs(1)));
        let (log, dead_log) = (Log::default(), Log::default());
        let (grant, dead) = (recorder(&log, true), recorder(&dead_log, false));
        assert_eq!(limiter.request(&grant, SubscriptionId(1), 5), 5);
        assert_eq!(limiter.request(&dead, SubscriptionId(2), 3), 0);
        assert_eq!(limiter.request(&grant, SubscriptionId(3), 3), 0);
        limiter.forget(SubscriptionId(3));
        limiter.next_interval();
        assert_eq!(taken(&dead_log), vec![(2, 3)]);
        assert!(taken(&log).is_empty());
        assert_eq!(limiter.snapshot().remaining, 5);
    }

    #[test]
    fn an_update_applies_from_the_next_interval() {
        let limiter = RateLimiter::new(RateLimiting::new(5, Duration::from_secs(1)));
        let log = Log::default();
        let grant = recorder(&log, true);
        assert_eq!(limiter.request(&grant, SubscriptionId(1), 5), 5);
        limiter.update(RateLimiting::new(2, Duration::from_millis(10)));
        assert_eq!(limiter.request(&grant, SubscriptionId(1), 5), 0);
        assert_eq!(limiter.next_interval(), Duration::from_millis(10));
        assert_eq!(taken(&log), vec![(1, 2)]);
    }
}
