//! The clock behind the ask-to-fulfilment histogram.
//!
//! Every timed ask costs two clock reads (one at the ask, one when its last
//! event is dispatched), and at 500-event batches a gen-stage hop costs only
//! a few hundred nanoseconds, so the clock's own cost shows. `Instant::now()`
//! is a `clock_gettime` call (about 20 to 30 ns through the vDSO, far more
//! where the kernel falls back to a system call); reading the CPU's time-stamp
//! counter is one instruction.
//!
//! [`Clock::new`] uses the time-stamp counter where it is *invariant* (it
//! ticks at a constant rate in every power state, and the CPU says so:
//! CPUID leaf `0x8000_0007`, EDX bit 8; Linux shows it as `nonstop_tsc`),
//! calibrated once per process against `Instant` (three 1 ms windows, the
//! median kept), and `Instant` everywhere else. [`Clock::std`] always uses
//! `Instant` (the `"latency_clock": "std"` option), for machines whose
//! counters are not synchronised between cores, which the CPU cannot report.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A point in time read from a [`Clock`]; only meaningful to that clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp(u64);

/// A monotonic clock: the time-stamp counter or `Instant`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    source: Source,
}

#[derive(Debug, Clone, Copy)]
enum Source {
    /// Time-stamp counter ticks, and how many nanoseconds one tick lasts.
    Tsc { nanos_per_tick: f64 },
    /// Nanoseconds since `origin`.
    Std { origin: Instant },
}

impl Clock {
    /// The cheapest reliable clock on this machine.
    pub(crate) fn new() -> Self {
        static CALIBRATED: OnceLock<Option<f64>> = OnceLock::new();
        match *CALIBRATED.get_or_init(tsc::calibrate) {
            Some(nanos_per_tick) => Self {
                source: Source::Tsc { nanos_per_tick },
            },
            None => Self::std(),
        }
    }

    /// A clock on `Instant`.
    pub(crate) fn std() -> Self {
        Self {
            source: Source::Std {
                origin: Instant::now(),
            },
        }
    }

    /// Whether this clock reads the time-stamp counter.
    #[cfg(test)]
    pub(crate) fn is_tsc(&self) -> bool {
        matches!(self.source, Source::Tsc { .. })
    }

    /// Now.
    #[inline]
    pub(crate) fn now(&self) -> Stamp {
        match self.source {
            Source::Tsc { .. } => Stamp(tsc::read()),
            Source::Std { origin } => {
                Stamp(u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
            }
        }
    }

    /// The ticks from `earlier` to `later`; zero if `later` is not later (a
    /// counter read on another core may lag by a few ticks).
    #[inline]
    pub(crate) fn ticks_between(earlier: Stamp, later: Stamp) -> u64 {
        later.0.saturating_sub(earlier.0)
    }

    /// How long this clock's ticks last.
    pub(crate) fn scale(&self) -> TickScale {
        match self.source {
            Source::Tsc { nanos_per_tick } => TickScale { nanos_per_tick },
            Source::Std { .. } => TickScale::NANOS,
        }
    }

    /// The time from `earlier` to `later` (see [`Clock::ticks_between`]).
    #[cfg(test)]
    pub(crate) fn between(&self, earlier: Stamp, later: Stamp) -> Duration {
        self.scale().duration(Self::ticks_between(earlier, later))
    }
}

/// How long one tick of a [`Clock`] lasts: converts between ticks and time,
/// so that the hot path keeps integer ticks and converts only at the edges
/// (histogram bounds once, sums at snapshot time).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TickScale {
    nanos_per_tick: f64,
}

impl TickScale {
    /// One tick is one nanosecond (`Instant`-based clocks).
    pub(crate) const NANOS: TickScale = TickScale {
        nanos_per_tick: 1.0,
    };

    /// A scale of `nanos_per_tick`.
    #[cfg(test)]
    pub(crate) fn with_nanos_per_tick(nanos_per_tick: f64) -> Self {
        Self { nanos_per_tick }
    }

    /// `seconds` in ticks, to the nearest tick.
    pub(crate) fn ticks(&self, seconds: f64) -> u64 {
        // `as` saturates: a bound too large for u64 ticks becomes u64::MAX.
        (seconds * 1e9 / self.nanos_per_tick).round() as u64
    }

    /// `ticks` as a duration.
    pub(crate) fn duration(&self, ticks: u64) -> Duration {
        // `as` saturates a float that is too large.
        Duration::from_nanos((ticks as f64 * self.nanos_per_tick) as u64)
    }
}

#[cfg(target_arch = "x86_64")]
mod tsc {
    use std::time::{Duration, Instant};

    /// Reads the time-stamp counter.
    #[inline]
    pub(super) fn read() -> u64 {
        // SAFETY: RDTSC exists on every x86_64 CPU and has no memory effects.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }

    /// Whether the CPU reports an invariant time-stamp counter.
    pub(super) fn invariant() -> bool {
        // SAFETY: CPUID exists on every x86_64 CPU; leaf 0x8000_0000 gives the
        // highest extended leaf, so 0x8000_0007 is only read when it exists.
        #[allow(unused_unsafe)]
        unsafe {
            use core::arch::x86_64::__cpuid;
            __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
        }
    }

    /// Nanoseconds per tick, or `None` where the counter is not usable.
    pub(super) fn calibrate() -> Option<f64> {
        if !invariant() {
            return None;
        }
        let mut rates: Vec<f64> = (0..3).filter_map(|_| window()).collect();
        if rates.len() < 3 {
            return None;
        }
        rates.sort_by(f64::total_cmp);
        let median = rates[1];
        // 100 MHz to 20 GHz; anything else means the counter is not what it
        // claims to be.
        (0.05..=10.0).contains(&median).then_some(median)
    }

    /// One calibration window: ticks against `Instant` over about 1 ms.
    fn window() -> Option<f64> {
        let started = Instant::now();
        let first = read();
        while started.elapsed() < Duration::from_millis(1) {
            std::hint::spin_loop();
        }
        let last = read();
        let nanos = started.elapsed().as_nanos() as f64;
        let ticks = last.checked_sub(first).filter(|t| *t > 0)? as f64;
        Some(nanos / ticks)
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod tsc {
    pub(super) fn read() -> u64 {
        0
    }

    pub(super) fn calibrate() -> Option<f64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock's reading of a 20 ms sleep lies between `Instant`'s readings
    /// of the inside and the outside of its two reads (5% calibration slack).
    fn measures_a_sleep(clock: Clock) {
        let outer = Instant::now();
        let before = clock.now();
        let inner = Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        let inner = inner.elapsed();
        let after = clock.now();
        let outer = outer.elapsed();
        let measured = clock.between(before, after);
        assert!(
            measured >= inner.mul_f64(0.95) && measured <= outer.mul_f64(1.05),
            "measured {measured:?}, Instant says between {inner:?} and {outer:?}"
        );
    }

    #[test]
    fn the_default_clock_measures_time_like_instant() {
        let clock = Clock::new();
        #[cfg(target_arch = "x86_64")]
        if tsc::invariant() {
            assert!(clock.is_tsc(), "invariant TSC but {clock:?}");
        }
        measures_a_sleep(clock);
    }

    #[test]
    fn the_std_clock_measures_time_like_instant() {
        let clock = Clock::std();
        assert!(!clock.is_tsc());
        measures_a_sleep(clock);
    }

    #[test]
    fn a_later_stamp_that_is_earlier_gives_zero() {
        for clock in [Clock::new(), Clock::std()] {
            let later = clock.now();
            std::thread::sleep(Duration::from_millis(1));
            let now = clock.now();
            assert_eq!(clock.between(now, later), Duration::ZERO);
            assert!(clock.between(later, now) > Duration::ZERO);
        }
    }
}
