//! Rolling 60-minute call and token ledger.  **\[pure\]**
//!
//! Every agent call is recorded (with its time) before the agent is spawned; its tokens are
//! added once the answer is analyzed. [`Ledger::check`] says whether one more call fits in the
//! rolling window, and if not, until when to wait.
//!
//! Rules:
//! - Hard cap: never more than `max_calls_per_hour` calls in ANY rolling 60-minute window. An
//!   entry is in the window at `now` when it is less than 60 minutes old (`at > now - 60 min`).
//! - Entries dated in the future (the clock moved back) count as in the window and are treated
//!   as if made at `now` (never under-count, never wait more than an hour for them);
//!   [`Ledger::prune`] clamps them to `now`.
//! - `max_calls_per_hour == 0` and `max_tokens_per_hour == 0` mean "no limit" (the config layer
//!   rejects a zero call limit; this module just never divides by it).
//!
//! No clock and no I/O here: `now` is always passed in.

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// Length of the rolling window.
pub const WINDOW: SignedDuration = SignedDuration::from_hours(1);

/// `t + d`, saturating at the ends of the representable range.
#[must_use]
pub fn add_duration(t: Timestamp, d: SignedDuration) -> Timestamp {
    match t.saturating_add(d) {
        Ok(sum) => sum,
        Err(_) if d.is_negative() => Timestamp::MIN,
        Err(_) => Timestamp::MAX,
    }
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LedgerEntry {
    /// When the call was made (recorded before spawning).
    pub at: Timestamp,
    /// Tokens the call used (all kinds), 0 until known.
    pub tokens: u64,
}

/// The persisted call ledger (the store keeps it in an append-only call log beside
/// `state.json`; schema 1 `state.json` files carried it inline). Entries are kept in recording
/// order, oldest first: [`Ledger::record_call`] prunes a prefix and pushes at the end, and only
/// the last entry gets tokens.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Ledger {
    pub entries: Vec<LedgerEntry>,
    /// How many calls this ledger has recorded, ever (at least `entries.len()`, see
    /// [`Ledger::last_id`]): the n-th recorded call has id n. The store uses it to tell which
    /// entries are new since its last save; it is rebuilt from the call log, never serialized.
    #[serde(skip)]
    pub calls_recorded: u64,
}

/// The hourly limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BudgetLimits {
    /// MAX_CALLS_PER_HOUR (0 = no limit).
    pub max_calls_per_hour: u32,
    /// MAX_TOKENS_PER_HOUR (0 = off).
    pub max_tokens_per_hour: u64,
}

impl Default for BudgetLimits {
    fn default() -> Self {
        Self {
            max_calls_per_hour: 100,
            max_tokens_per_hour: 0,
        }
    }
}

/// Why the loop is waiting (`wait_reason` in `status.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitReason {
    /// MAX_CALLS_PER_HOUR calls in the last 60 minutes.
    RateLimit,
    /// MAX_TOKENS_PER_HOUR tokens in the last 60 minutes.
    TokenLimit,
    /// The subscription usage window is exhausted.
    UsageLimit,
    /// A usage window reached its MAX_WINDOW_PERCENT limit: waiting for its reset.
    UsageWindow,
    /// Backing off after a transient failure.
    Backoff,
    /// Paused by `hank ctl pause`, until `hank ctl resume` (no end time).
    Paused,
    /// `NEEDS_ANSWERS=wait`: the agent asked questions; waiting for `hank ctl answer` (at
    /// most `ANSWER_TIMEOUT`).
    NeedsAnswers,
}

impl WaitReason {
    /// The stable string (as serialized).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RateLimit => "rate_limit",
            Self::TokenLimit => "token_limit",
            Self::UsageLimit => "usage_limit",
            Self::UsageWindow => "usage_window",
            Self::Backoff => "backoff",
            Self::Paused => "paused",
            Self::NeedsAnswers => "needs_answers",
        }
    }
}

/// A wait in progress, saved in `state.json` so that a restart resumes it instead of calling
/// the agent early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedWait {
    pub reason: WaitReason,
    pub until: Timestamp,
}

/// The longest a saved wait is honoured after a restart: a week's window plus a margin (a
/// later time comes from a clock that went back or a damaged file).
pub const SAVED_WAIT_MAX: SignedDuration = SignedDuration::from_hours(7 * 24 + 2);

/// What a start does with the wait the last run was in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Nothing to resume (no wait, it is over, or the caps are recomputed from the ledger).
    Call,
    /// Wait until then first.
    Wait(SavedWait),
    /// A usage-limit wait, and this run exits at usage limits (ON_USAGE_LIMIT=exit).
    ExitUsageLimit,
    /// A usage-window wait (MAX_WINDOW_PERCENT), and this run exits at usage limits.
    ExitUsageWindow,
}

impl WaitReason {
    /// A wait saved in `state.json` and resumed by a restart (the others are recomputed).
    #[must_use]
    pub fn is_saved(self) -> bool {
        matches!(self, Self::UsageLimit | Self::UsageWindow | Self::Backoff)
    }
}

/// Decides how a start treats `saved` (pure): a usage-limit or backoff wait whose end is still
/// ahead is resumed (its end clamped to [`SAVED_WAIT_MAX`] from now); rate and token caps
/// are recomputed from the ledger anyway.
#[must_use]
pub fn resume_wait(saved: Option<SavedWait>, now: Timestamp, exit_at_usage_limit: bool) -> Resume {
    let Some(w) = saved else {
        return Resume::Call;
    };
    if w.until <= now || !w.reason.is_saved() {
        return Resume::Call;
    }
    if exit_at_usage_limit {
        match w.reason {
            WaitReason::UsageLimit => return Resume::ExitUsageLimit,
            WaitReason::UsageWindow => return Resume::ExitUsageWindow,
            _ => {}
        }
    }
    let latest = add_duration(now, SAVED_WAIT_MAX);
    Resume::Wait(SavedWait {
        reason: w.reason,
        until: w.until.min(latest),
    })
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Result of [`Ledger::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetCheck {
    /// One more call fits in the window now.
    Allow,
    /// Wait until `until`, then check again.
    Wait {
        until: Timestamp,
        reason: WaitReason,
    },
}

impl Ledger {
    /// The time an entry counts at: its own time, or `now` if it is dated in the future.
    fn effective(at: Timestamp, now: Timestamp) -> Timestamp {
        if at > now { now } else { at }
    }

    /// The window start: entries strictly after it are in the window.
    fn window_start(now: Timestamp) -> Timestamp {
        add_duration(now, -WINDOW)
    }

    /// Effective times and tokens of the entries in the window at `now`, oldest first.
    fn in_window(&self, now: Timestamp) -> Vec<(Timestamp, u64)> {
        let start = Self::window_start(now);
        let mut v: Vec<(Timestamp, u64)> = self
            .entries
            .iter()
            .map(|e| (Self::effective(e.at, now), e.tokens))
            .filter(|(at, _)| *at > start)
            .collect();
        v.sort_by_key(|(at, _)| *at);
        v
    }

    /// Whether one more call is allowed at `now`, and if not, until when to wait.
    #[must_use]
    pub fn check(&self, now: Timestamp, limits: &BudgetLimits) -> BudgetCheck {
        let window = self.in_window(now);
        let mut wait: Option<(Timestamp, WaitReason)> = None;

        let max_calls = limits.max_calls_per_hour as usize;
        if max_calls > 0 && window.len() >= max_calls {
            // After the (len - max + 1) oldest entries expire, one more call fits.
            let idx = window.len() - max_calls;
            if let Some((at, _)) = window.get(idx) {
                wait = Some((add_duration(*at, WINDOW), WaitReason::RateLimit));
            }
        }

        let max_tokens = limits.max_tokens_per_hour;
        if max_tokens > 0 {
            let mut total: u64 = window.iter().fold(0, |acc, (_, t)| acc.saturating_add(*t));
            if total >= max_tokens {
                let mut until = now;
                for (at, tokens) in &window {
                    total = total.saturating_sub(*tokens);
                    until = add_duration(*at, WINDOW);
                    if total < max_tokens {
                        break;
                    }
                }
                let later = wait.is_none_or(|(w, _)| until > w);
                if later {
                    wait = Some((until, WaitReason::TokenLimit));
                }
            }
        }

        match wait {
            Some((until, reason)) if until > now => BudgetCheck::Wait { until, reason },
            // Cannot happen with in-window entries (they expire after `now`); allow rather
            // than wait for nothing.
            _ => BudgetCheck::Allow,
        }
    }

    /// Records one call made at `now` (0 tokens so far) and prunes expired entries.
    pub fn record_call(&mut self, now: Timestamp) {
        self.prune(now);
        self.calls_recorded = self.last_id().saturating_add(1);
        self.entries.push(LedgerEntry { at: now, tokens: 0 });
    }

    /// Id of the newest entry (0 when none was ever recorded). Entries are numbered from the
    /// end: the last has this id, the one before it `last_id() - 1`, and so on.
    #[must_use]
    pub fn last_id(&self) -> u64 {
        self.calls_recorded.max(self.entries.len() as u64)
    }

    /// Adds `tokens` to the most recent call (saturating). No-op on an empty ledger.
    pub fn add_tokens_to_last(&mut self, tokens: u64) {
        if let Some(last) = self.entries.last_mut() {
            last.tokens = last.tokens.saturating_add(tokens);
        }
    }

    /// Calls in the rolling window at `now`.
    #[must_use]
    pub fn calls_in_window(&self, now: Timestamp) -> u32 {
        let n = self.in_window(now).len();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Tokens used by the calls in the rolling window at `now`.
    #[must_use]
    pub fn tokens_in_window(&self, now: Timestamp) -> u64 {
        self.in_window(now)
            .iter()
            .fold(0, |acc, (_, t)| acc.saturating_add(*t))
    }

    /// When the next call will be allowed; `None` if one is allowed now.
    #[must_use]
    pub fn next_free_at(&self, now: Timestamp, limits: &BudgetLimits) -> Option<Timestamp> {
        match self.check(now, limits) {
            BudgetCheck::Allow => None,
            BudgetCheck::Wait { until, .. } => Some(until),
        }
    }

    /// Drops entries older than the window and clamps entries dated in the future to `now`.
    pub fn prune(&mut self, now: Timestamp) {
        let start = Self::window_start(now);
        self.entries.retain(|e| e.at > start || e.at > now);
        for e in &mut self.entries {
            if e.at > now {
                e.at = now;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn limits(calls: u32, tokens: u64) -> BudgetLimits {
        BudgetLimits {
            max_calls_per_hour: calls,
            max_tokens_per_hour: tokens,
        }
    }

    fn ledger(times: &[(i64, u64)]) -> Ledger {
        Ledger {
            entries: times
                .iter()
                .map(|&(s, t)| LedgerEntry {
                    at: ts(s),
                    tokens: t,
                })
                .collect(),
            ..Ledger::default()
        }
    }

    /// (entries (secs, tokens), now, calls limit, token limit, expected)
    type CheckCase = (Vec<(i64, u64)>, i64, u32, u64, BudgetCheck);

    #[test]
    fn check_table() {
        let cases: Vec<CheckCase> = vec![
            (vec![], 0, 3, 0, BudgetCheck::Allow),
            (vec![(0, 0), (10, 0)], 20, 3, 0, BudgetCheck::Allow),
            (
                vec![(0, 0), (10, 0), (20, 0)],
                30,
                3,
                0,
                BudgetCheck::Wait {
                    until: ts(3600),
                    reason: WaitReason::RateLimit,
                },
            ),
            // The oldest expired exactly at now (age 60 min): allowed.
            (
                vec![(0, 0), (10, 0), (20, 0)],
                3600,
                3,
                0,
                BudgetCheck::Allow,
            ),
            // Over the limit (limit lowered): wait until enough expire.
            (
                vec![(0, 0), (10, 0), (20, 0), (30, 0)],
                40,
                2,
                0,
                BudgetCheck::Wait {
                    until: ts(3620),
                    reason: WaitReason::RateLimit,
                },
            ),
            // Limit 0 = no call limit.
            (vec![(0, 0), (10, 0)], 20, 0, 0, BudgetCheck::Allow),
            // Future entries (clock moved back) count, treated as made now.
            (
                vec![(5000, 0)],
                100,
                1,
                0,
                BudgetCheck::Wait {
                    until: ts(3700),
                    reason: WaitReason::RateLimit,
                },
            ),
            // Tokens: 600 + 500 >= 1000 → wait until the first expires (500 < 1000).
            (
                vec![(0, 600), (10, 500)],
                20,
                10,
                1000,
                BudgetCheck::Wait {
                    until: ts(3600),
                    reason: WaitReason::TokenLimit,
                },
            ),
            (vec![(0, 400), (10, 500)], 20, 10, 1000, BudgetCheck::Allow),
            // Both exceeded: the later time wins.
            (
                vec![(0, 0), (10, 0), (20, 2000)],
                30,
                2,
                1000,
                BudgetCheck::Wait {
                    until: ts(3620),
                    reason: WaitReason::TokenLimit,
                },
            ),
            (
                vec![(0, 0), (10, 0), (20, 0)],
                30,
                2,
                1000,
                BudgetCheck::Wait {
                    until: ts(3610),
                    reason: WaitReason::RateLimit,
                },
            ),
        ];
        for (i, (entries, now, calls, tokens, expected)) in cases.into_iter().enumerate() {
            let l = ledger(&entries);
            assert_eq!(
                l.check(ts(now), &limits(calls, tokens)),
                expected,
                "case {i}"
            );
            let free = match expected {
                BudgetCheck::Allow => None,
                BudgetCheck::Wait { until, .. } => Some(until),
            };
            assert_eq!(
                l.next_free_at(ts(now), &limits(calls, tokens)),
                free,
                "case {i}"
            );
        }
    }

    #[test]
    fn record_prune_and_tokens() {
        let mut l = Ledger::default();
        l.add_tokens_to_last(5); // no-op on empty
        assert!(l.entries.is_empty());
        l.record_call(ts(0));
        l.add_tokens_to_last(100);
        l.record_call(ts(1800));
        l.add_tokens_to_last(50);
        l.add_tokens_to_last(u64::MAX);
        assert_eq!(l.calls_in_window(ts(1800)), 2);
        assert_eq!(l.tokens_in_window(ts(1800)), u64::MAX);
        assert_eq!(l.calls_in_window(ts(3600)), 1);
        l.record_call(ts(3700));
        assert_eq!(l.entries.len(), 2, "entry at 0 pruned");
        assert_eq!(l.entries[0].at, ts(1800));
        assert_eq!(l.calls_recorded, 3, "pruned calls still count as recorded");
        assert_eq!(l.last_id(), 3);
    }

    #[test]
    fn last_id_is_at_least_the_number_of_entries() {
        let mut l = ledger(&[(0, 1), (10, 2)]);
        assert_eq!(l.last_id(), 2);
        l.record_call(ts(20));
        assert_eq!((l.calls_recorded, l.last_id()), (3, 3));
        let l: Ledger =
            serde_json::from_str(r#"{"entries":[{"at":"2027-01-15T08:00:00Z"}]}"#).unwrap();
        assert_eq!((l.calls_recorded, l.last_id()), (0, 1));
        assert!(
            !serde_json::to_string(&l)
                .unwrap()
                .contains("calls_recorded")
        );
    }

    #[test]
    fn prune_clamps_future_entries() {
        let mut l = ledger(&[(9000, 7), (-4000, 1)]);
        l.prune(ts(0));
        assert_eq!(
            l.entries,
            vec![LedgerEntry {
                at: ts(0),
                tokens: 7
            }]
        );
    }

    #[test]
    fn serde_tolerates_missing_fields() {
        let l: Ledger = serde_json::from_str("{}").unwrap();
        assert!(l.entries.is_empty());
        let l: Ledger =
            serde_json::from_str(r#"{"entries":[{"at":"2027-01-15T08:00:00Z"}]}"#).unwrap();
        assert_eq!(l.entries[0].tokens, 0);
        let json = serde_json::to_string(&WaitReason::TokenLimit).unwrap();
        assert_eq!(json, "\"token_limit\"");
    }

    proptest! {
        #[test]
        fn never_more_than_n_in_any_window(
            n in 1u32..6,
            gaps in proptest::collection::vec(0i64..1500, 1..80),
        ) {
            let lim = limits(n, 0);
            let mut l = Ledger::default();
            let mut now = 0i64;
            let mut calls: Vec<i64> = Vec::new();
            for g in gaps {
                now += g;
                match l.check(ts(now), &lim) {
                    BudgetCheck::Allow => {
                        l.record_call(ts(now));
                        calls.push(now);
                    }
                    BudgetCheck::Wait { until, .. } => {
                        prop_assert!(until > ts(now));
                        prop_assert!(until <= ts(now + 3600));
                        // Waiting until `until` must then allow the call.
                        let u = until.as_second() - 1_800_000_000;
                        prop_assert_eq!(l.check(until, &lim), BudgetCheck::Allow);
                        if u > now { now = u; }
                        l.record_call(ts(now));
                        calls.push(now);
                    }
                }
            }
            for (i, &start) in calls.iter().enumerate() {
                let in_window = calls[i..].iter().filter(|&&c| c < start + 3600).count();
                prop_assert!(in_window <= n as usize, "window at {} holds {}", start, in_window);
            }
        }
    }
    #[test]
    fn saved_waits_resume_table() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let at = |secs: i64| Timestamp::from_second(1_800_000_000 + secs).unwrap();
        let w = |reason, secs| {
            Some(SavedWait {
                reason,
                until: at(secs),
            })
        };
        let far = add_duration(now, SAVED_WAIT_MAX);
        let table = [
            (None, false, Resume::Call),
            (w(WaitReason::UsageLimit, -1), false, Resume::Call),
            (w(WaitReason::UsageLimit, 0), false, Resume::Call),
            (w(WaitReason::RateLimit, 600), false, Resume::Call),
            (w(WaitReason::TokenLimit, 600), false, Resume::Call),
            (
                w(WaitReason::UsageLimit, 600),
                false,
                Resume::Wait(SavedWait {
                    reason: WaitReason::UsageLimit,
                    until: at(600),
                }),
            ),
            (w(WaitReason::UsageLimit, 600), true, Resume::ExitUsageLimit),
            (
                w(WaitReason::UsageWindow, 600),
                false,
                Resume::Wait(SavedWait {
                    reason: WaitReason::UsageWindow,
                    until: at(600),
                }),
            ),
            (
                w(WaitReason::UsageWindow, 600),
                true,
                Resume::ExitUsageWindow,
            ),
            (w(WaitReason::UsageWindow, -5), true, Resume::Call),
            (
                w(WaitReason::Backoff, 90),
                true,
                Resume::Wait(SavedWait {
                    reason: WaitReason::Backoff,
                    until: at(90),
                }),
            ),
            (
                w(WaitReason::UsageLimit, 100 * 86_400),
                false,
                Resume::Wait(SavedWait {
                    reason: WaitReason::UsageLimit,
                    until: far,
                }),
            ),
        ];
        for (saved, exit, want) in table {
            assert_eq!(resume_wait(saved, now, exit), want, "{saved:?} {exit}");
        }
    }
}
