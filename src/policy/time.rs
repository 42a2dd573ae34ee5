//! Time as an input. **\[pure\]**
//!
//! Every rule that depends on time takes a `now: Timestamp` argument; the loop gets it from a
//! [`Clock`]. The wall clock (`crate::clock::SystemClock`) is the only implementation that
//! reads real time; tests use [`FixedClock`] or set `HANK_NOW` for a whole `hank` process.

use std::cell::Cell;

use jiff::{SignedDuration, Timestamp};

/// Where "now" comes from.
pub trait Clock {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// A clock that says what it is told: for tests of time-dependent sequences.
#[derive(Debug)]
pub struct FixedClock(Cell<Timestamp>);

impl FixedClock {
    #[must_use]
    pub fn new(at: Timestamp) -> Self {
        Self(Cell::new(at))
    }

    /// Moves the clock forward (or back, with a negative duration).
    pub fn advance(&self, by: SignedDuration) {
        let t = self.0.get();
        self.0.set(t.checked_add(by).unwrap_or(t));
    }
}

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        self.0.get()
    }
}

/// `1h02m03s`-style remaining time.
#[must_use]
pub fn format_secs(s: u64) -> String {
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{h}h{m:02}m{sec:02}s")
    } else if m > 0 {
        format!("{m}m{sec:02}s")
    } else {
        format!("{sec}s")
    }
}

/// The next sleep of a countdown at `now` towards `end`: at most `max`, never negative (a
/// tenth of a second when the span cannot be a `Duration`).
#[must_use]
pub fn tick(now: Timestamp, end: Timestamp, max: jiff::SignedDuration) -> std::time::Duration {
    let step = end
        .duration_since(now)
        .min(max)
        .max(jiff::SignedDuration::ZERO);
    std::time::Duration::try_from(step).unwrap_or(std::time::Duration::from_millis(100))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_clock_moves_only_when_told() {
        let start: Timestamp = "2026-11-24T00:00:00Z".parse().unwrap();
        let c = FixedClock::new(start);
        assert_eq!(c.now(), start);
        c.advance(SignedDuration::from_mins(31));
        assert_eq!(c.now().duration_since(start), SignedDuration::from_mins(31));
    }

    #[test]
    fn a_countdown_ticks_at_most_a_second_and_never_below_zero() {
        let t: Timestamp = "2026-11-24T00:00:00Z".parse().unwrap();
        let s = SignedDuration::from_secs(1);
        let ms = std::time::Duration::from_millis;
        let table = [(0, 5_000, 1_000), (0, 400, 400), (0, 0, 0), (5_000, 0, 0)];
        for (now, end, want) in table {
            let (now, end) = (
                t + SignedDuration::from_millis(now),
                t + SignedDuration::from_millis(end),
            );
            assert_eq!(tick(now, end, s), ms(want), "{now} → {end}");
        }
        assert_eq!(format_secs(3723), "1h02m03s");
        assert_eq!(format_secs(63), "1m03s");
        assert_eq!(format_secs(5), "5s");
    }
}
