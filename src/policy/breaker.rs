//! Circuit breaker: notices a loop that is going nowhere and stops it.  **\[pure\]**
//!
//! States and edges (HANK.md §6):
//!
//! | from | to | when |
//! |---|---|---|
//! | CLOSED | HALF_OPEN | 2 consecutive loops without progress |
//! | HALF_OPEN | CLOSED | a loop with progress |
//! | CLOSED / HALF_OPEN | OPEN | `failure_threshold` consecutive failed calls; the same error signature set in `same_error_threshold` consecutive loops; no progress in `no_progress_threshold` consecutive loops; output shrinking by more than `output_decline_pct` % against the recent average while making no progress; a trial loop after the cooldown that failed or made no progress |
//! | OPEN | HALF_OPEN (trial) | at run start, once `opened_at + cooldown_minutes` has passed (counters kept) |
//! | OPEN | CLOSED | at run start with `--auto-reset-circuit`, or `hank reset circuit` (counters cleared) |
//!
//! How one loop feeds the counters ([`Breaker::record`]):
//! - An unknown session changes nothing (the loop retries at once without it, and a second one
//!   stops the run). A call hank itself interrupted (Ctrl-C, SIGTERM) never reaches
//!   [`Breaker::record`] (the fold skips it).
//! - A failed call ([`is_failed_call`]: every answer that is not a success, whatever its kind —
//!   an `interrupted` error hank did not cause and a usage limit included) that made no
//!   progress raises `failure_streak` and holds the no-progress count (failures are counted by
//!   the failure rule, not twice). A failed call that did change files (e.g. a timeout after
//!   edits) is productive: it is not a failure. So no answer the agent can give keeps the loop
//!   calling for ever: a non-success opens the breaker after `failure_threshold` in a row, and
//!   a success without progress after `no_progress_threshold` (questions only: see
//!   [`crate::policy::decide::MAX_QUESTION_LOOPS`]).
//! - Progress (files changed or plan items checked) resets the no-progress streak; a loop
//!   where the agent only asked questions holds it; any other loop raises it.
//! - The error signature set (sorted, deduplicated) equal to the previous loop's raises
//!   `same_error_streak`, a different non-empty set restarts it at 1, no errors reset it.
//! - An error answer whose loop did the work ([`Progress::did_the_work`]: a fix_plan item
//!   checked, or the failing VERIFY_EVERY_LOOP check turned green) is productive: it holds the
//!   same-error streak and is no failed call. Files changed alone do not make an error answer
//!   productive for the same-error rule.
//! - Successful outputs feed the last 5 output lengths for the decline rule (which needs at
//!   least 3 of them).
//!
//! - **An outage is judged by time** (`max_outage_minutes` > 0): a transient failure
//!   ([`is_transient`]: overloaded, 5xx, network, a rate limit that is not a usage limit) that
//!   made no progress moves none of the counters above; it starts (or continues) the outage
//!   clock `outage_since` and raises `transient_streak` (the backoff's exponent). The breaker
//!   opens when no call has succeeded for `max_outage_minutes` ("the API has been unavailable
//!   for …"). Any success ends the outage. With `max_outage_minutes` = 0 transient failures
//!   count like any other failure; a trial loop after the cooldown that fails reopens, whatever
//!   the failure.
//!
//! A threshold of 0 disables its rule. OPEN is left only through [`Breaker::on_run_start`] or
//! [`Breaker::reset`], never through [`Breaker::record`].

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::analysis::{Analysis, ErrorKind, Outcome};
use crate::policy::budget::add_duration;
use crate::policy::progress::Progress;

/// Most transitions kept in [`Breaker::history`].
pub const MAX_HISTORY: usize = 50;
/// Output lengths kept for the decline rule.
pub const RECENT_OUTPUTS: usize = 5;
/// Output lengths needed before the decline rule can fire.
pub const MIN_OUTPUTS_FOR_DECLINE: usize = 3;
/// Loops without progress that move CLOSED to HALF_OPEN.
pub const HALF_OPEN_AFTER: u32 = 2;

/// The breaker state. Serialized and displayed as `CLOSED`, `HALF_OPEN`, `OPEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CircuitState {
    #[default]
    Closed,
    HalfOpen,
    Open,
}

impl CircuitState {
    /// The stable string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "CLOSED",
            Self::HalfOpen => "HALF_OPEN",
            Self::Open => "OPEN",
        }
    }
}

impl std::fmt::Display for CircuitState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Thresholds (CB_* keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BreakerConfig {
    pub no_progress_threshold: u32,
    pub same_error_threshold: u32,
    pub failure_threshold: u32,
    pub output_decline_pct: u32,
    pub cooldown_minutes: u32,
    /// MAX_OUTAGE_MINUTES: transient failures end the run only after this long without a
    /// successful call (0: they count like any other failure).
    pub max_outage_minutes: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            no_progress_threshold: 3,
            same_error_threshold: 5,
            failure_threshold: 5,
            output_decline_pct: 70,
            cooldown_minutes: 30,
            max_outage_minutes: 120,
        }
    }
}

/// One state change, with a one-line human reason.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Transition {
    pub at: Timestamp,
    pub from: CircuitState,
    pub to: CircuitState,
    pub reason: String,
}

/// The persisted breaker (in `state.json`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Breaker {
    pub state: CircuitState,
    /// Reason of the last transition ("" when never changed).
    pub reason: String,
    /// When the breaker last opened.
    pub opened_at: Option<Timestamp>,
    pub no_progress_streak: u32,
    pub same_error_streak: u32,
    /// The previous loop's error signature set (sorted, deduplicated).
    pub last_error_signatures: Vec<String>,
    pub failure_streak: u32,
    /// Output lengths of the last successful calls, oldest first (≤ [`RECENT_OUTPUTS`]).
    pub recent_output_lens: Vec<u64>,
    /// Transitions, oldest first (≤ [`MAX_HISTORY`]).
    pub history: Vec<Transition>,
    /// HALF_OPEN entered after a cooldown: the next loop must make progress.
    pub trial: bool,
    /// The first transient failure since the last successful call (an outage in progress).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outage_since: Option<Timestamp>,
    /// Transient failures in a row (the backoff's exponent while outages are judged by time).
    #[serde(skip_serializing_if = "is_zero")]
    pub transient_streak: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A failure that passes by itself: the API overloaded, a 5xx, the network, a rate limit that
/// is not a usage limit.
#[must_use]
pub fn is_transient(analysis: &Analysis) -> bool {
    matches!(
        analysis.error_kind(),
        Some(ErrorKind::Overloaded | ErrorKind::Server | ErrorKind::Network | ErrorKind::RateLimit)
    )
}

/// "2 h 5 min", "45 min", "30 s" (for reasons).
fn span(d: SignedDuration) -> String {
    let secs = d.as_secs().max(0);
    let (h, m) = (secs / 3600, secs / 60 % 60);
    if h > 0 {
        format!("{h} h {m} min")
    } else if m > 0 {
        format!("{m} min")
    } else {
        format!("{secs} s")
    }
}

/// Whether a call failed: every answer that is not a success, whatever its error kind
/// (transient errors, crashes, timeouts, usage limits, fatal kinds, and an `interrupted` error
/// hank did not cause — a call hank interrupted is never recorded). The agent cannot pick an
/// answer that escapes the failure count.
#[must_use]
pub fn is_failed_call(analysis: &Analysis) -> bool {
    analysis.outcome != Outcome::Success || analysis.error.is_some()
}

/// A short name of what went wrong in a failed call (for reasons).
fn failure_name(analysis: &Analysis) -> &'static str {
    match (analysis.outcome, analysis.error_kind()) {
        (_, Some(kind)) => kind.as_str(),
        (Outcome::Timeout, None) => "timeout",
        (Outcome::Crashed, None) => "crash",
        _ => "error",
    }
}

fn plural(n: u32, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

impl Breaker {
    /// The breaker is OPEN.
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.state == CircuitState::Open
    }

    /// When an OPEN breaker may go HALF_OPEN at a run start; `None` when not OPEN (or the
    /// opening time is unknown).
    #[must_use]
    pub fn cooldown_ends_at(&self, cfg: &BreakerConfig) -> Option<Timestamp> {
        if !self.is_open() {
            return None;
        }
        let opened = self.opened_at?;
        Some(add_duration(
            opened,
            SignedDuration::from_mins(i64::from(cfg.cooldown_minutes)),
        ))
    }

    fn transition(&mut self, now: Timestamp, to: CircuitState, reason: String) -> Transition {
        let t = Transition {
            at: now,
            from: self.state,
            to,
            reason: reason.clone(),
        };
        self.state = to;
        self.reason = reason;
        if to == CircuitState::Open {
            self.opened_at = Some(now);
        }
        if to != CircuitState::HalfOpen {
            self.trial = false;
        }
        self.history.push(t.clone());
        if self.history.len() > MAX_HISTORY {
            let extra = self.history.len() - MAX_HISTORY;
            self.history.drain(..extra);
        }
        t
    }

    fn clear_counters(&mut self) {
        self.no_progress_streak = 0;
        self.same_error_streak = 0;
        self.last_error_signatures.clear();
        self.failure_streak = 0;
        self.recent_output_lens.clear();
        self.trial = false;
        self.outage_since = None;
        self.transient_streak = 0;
    }

    /// At the start of a run: an OPEN breaker whose cooldown has passed goes HALF_OPEN for one
    /// trial loop (counters kept); with `auto_reset` it goes CLOSED (counters cleared). An OPEN
    /// breaker with no opening time (damaged state) is treated as opened now.
    pub fn on_run_start(
        &mut self,
        now: Timestamp,
        cfg: &BreakerConfig,
        auto_reset: bool,
    ) -> Option<Transition> {
        if !self.is_open() {
            return None;
        }
        if auto_reset {
            self.clear_counters();
            return Some(self.transition(
                now,
                CircuitState::Closed,
                "reset at start (--auto-reset-circuit)".to_string(),
            ));
        }
        let Some(ends) = self.cooldown_ends_at(cfg) else {
            self.opened_at = Some(now);
            return None;
        };
        if now < ends {
            return None;
        }
        let t = self.transition(
            now,
            CircuitState::HalfOpen,
            format!(
                "cooldown of {} passed; one trial loop",
                plural(cfg.cooldown_minutes, "minute", "minutes")
            ),
        );
        self.trial = true;
        Some(t)
    }

    /// Manual reset (`hank reset circuit`): → CLOSED, counters cleared. Returns the transition
    /// when the state changed.
    pub fn reset(&mut self, now: Timestamp, reason: &str) -> Option<Transition> {
        self.clear_counters();
        if self.state == CircuitState::Closed {
            return None;
        }
        Some(self.transition(now, CircuitState::Closed, reason.to_string()))
    }

    /// Folds one loop into the breaker. Returns the transition, if any.
    pub fn record(
        &mut self,
        analysis: &Analysis,
        progress: &Progress,
        now: Timestamp,
        cfg: &BreakerConfig,
    ) -> Option<Transition> {
        if self.is_open() {
            return None;
        }
        if analysis.unknown_session {
            return None;
        }

        let progressed = progress.made_progress() || progress.check_fixed;
        let failed = is_failed_call(analysis) && !progressed;
        // An error answer whose loop checked a plan item or turned the check green did the
        // work: counted in neither the failed-call nor the same-error streak.
        let productive_error = is_failed_call(analysis) && progress.did_the_work();
        let asked = !analysis.questions.is_empty();

        // An outage: judged by the time since the last successful call, not by count.
        if failed && cfg.max_outage_minutes > 0 && is_transient(analysis) && !self.trial {
            let since = *self.outage_since.get_or_insert(now);
            self.transient_streak = self.transient_streak.saturating_add(1);
            let down = now.duration_since(since);
            if down >= SignedDuration::from_mins(i64::from(cfg.max_outage_minutes)) {
                return Some(self.transition(
                    now,
                    CircuitState::Open,
                    format!(
                        "the API has been unavailable for {} ({} failed calls in a row, last: {})",
                        span(down),
                        self.transient_streak,
                        failure_name(analysis)
                    ),
                ));
            }
            return None;
        }
        self.transient_streak = 0;
        if !is_failed_call(analysis) {
            self.outage_since = None;
        }

        // Failures.
        self.failure_streak = if failed {
            self.failure_streak.saturating_add(1)
        } else {
            0
        };

        // Same error.
        let mut sigs: Vec<String> = analysis
            .error_signatures
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        sigs.sort();
        sigs.dedup();
        if productive_error {
            // Held: neither raised nor reset.
        } else if sigs.is_empty() {
            self.same_error_streak = 0;
        } else if sigs == self.last_error_signatures {
            self.same_error_streak = self.same_error_streak.saturating_add(1);
        } else {
            self.same_error_streak = 1;
        }
        self.last_error_signatures = sigs;

        // No progress.
        if progressed {
            self.no_progress_streak = 0;
        } else if !failed && !asked {
            self.no_progress_streak = self.no_progress_streak.saturating_add(1);
        }
        // The open rules fire only on the loop that raised their counter: a held count (e.g.
        // a HALF_OPEN trial whose counters were kept) does not reopen by itself.
        let no_progress_raised = !progressed && !failed && !asked;
        let same_error_raised = self.same_error_streak > 0 && !productive_error;

        // Output decline (successful answers without progress).
        let mut decline: Option<u64> = None;
        if !failed && analysis.outcome == Outcome::Success {
            if !progressed
                && !asked
                && cfg.output_decline_pct > 0
                && self.recent_output_lens.len() >= MIN_OUTPUTS_FOR_DECLINE
            {
                let n = self.recent_output_lens.len() as u128;
                let sum: u128 = self.recent_output_lens.iter().map(|&l| u128::from(l)).sum();
                let avg = sum / n;
                let len = u128::from(analysis.output_len);
                let keep = 100u128.saturating_sub(u128::from(cfg.output_decline_pct));
                if avg > 0 && len * 100 < avg * keep {
                    let pct = (avg - len) * 100 / avg;
                    decline = Some(u64::try_from(pct).unwrap_or(100));
                }
            }
            self.recent_output_lens.push(analysis.output_len);
            if self.recent_output_lens.len() > RECENT_OUTPUTS {
                let extra = self.recent_output_lens.len() - RECENT_OUTPUTS;
                self.recent_output_lens.drain(..extra);
            }
        }

        // Transitions, most specific reason first.
        let open_reason =
            if cfg.failure_threshold > 0 && self.failure_streak >= cfg.failure_threshold {
                Some(format!(
                    "{} consecutive failed calls (last: {})",
                    self.failure_streak,
                    failure_name(analysis)
                ))
            } else if same_error_raised
                && cfg.same_error_threshold > 0
                && self.same_error_streak >= cfg.same_error_threshold
            {
                let first = self
                    .last_error_signatures
                    .first()
                    .map_or("", String::as_str);
                Some(format!(
                    "same error in {} consecutive loops: {}",
                    self.same_error_streak,
                    shorten(first, 80)
                ))
            } else if no_progress_raised
                && cfg.no_progress_threshold > 0
                && self.no_progress_streak >= cfg.no_progress_threshold
            {
                Some(format!(
                    "no progress in {} consecutive loops",
                    self.no_progress_streak
                ))
            } else if let Some(pct) = decline {
                Some(format!(
                    "output shrank by {pct}% against the recent average with no progress"
                ))
            } else if self.trial && (failed || (!progressed && !asked)) {
                Some(if failed {
                    format!(
                        "trial loop after the cooldown failed ({})",
                        failure_name(analysis)
                    )
                } else {
                    "trial loop after the cooldown made no progress".to_string()
                })
            } else {
                None
            };

        if let Some(reason) = open_reason {
            return Some(self.transition(now, CircuitState::Open, reason));
        }
        match self.state {
            CircuitState::HalfOpen if progressed => {
                let what = if progress.files_changed > 0 {
                    plural(progress.files_changed, "file changed", "files changed")
                } else {
                    plural(
                        progress.plan_items_checked,
                        "plan item checked",
                        "plan items checked",
                    )
                };
                Some(self.transition(
                    now,
                    CircuitState::Closed,
                    format!("progress resumed ({what})"),
                ))
            }
            CircuitState::Closed if self.no_progress_streak >= HALF_OPEN_AFTER => {
                Some(self.transition(
                    now,
                    CircuitState::HalfOpen,
                    format!(
                        "no progress in {} consecutive loops",
                        self.no_progress_streak
                    ),
                ))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{AgentError, ErrorKind};
    use crate::policy::progress::ProgressSource;
    use proptest::prelude::*;

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    /// One kind of loop.
    #[derive(Debug, Clone, Copy)]
    enum L {
        Prog,
        NoProg,
        Ask,
        Err(ErrorKind),
        Timeout {
            files: u32,
        },
        Crash,
        /// Progress, with this error signature.
        Sig(&'static str),
        /// Successful answer of this length, with or without progress.
        Out(u64, bool),
        UnknownSession,
        PlanTick,
        /// `error_during_execution` with the same signature every time, files changed, and
        /// (`tick`) a fix_plan item checked or (`green`) the failing check turned green.
        EdeWork {
            tick: bool,
            green: bool,
        },
    }

    fn build(l: L) -> (Analysis, Progress) {
        let mut a = Analysis {
            output_len: 1000,
            ..Analysis::default()
        };
        let mut p = Progress {
            source: ProgressSource::Git,
            ..Progress::default()
        };
        let err = |kind| {
            Some(AgentError {
                kind,
                message: "x".into(),
                api_status: None,
                reset_at: None,
                window: None,
            })
        };
        match l {
            L::Prog => p.files_changed = 1,
            L::NoProg => {}
            L::Ask => a.questions = vec!["Should I use A or B?".into()],
            L::Err(kind) => {
                a.outcome = Outcome::AgentError;
                a.error = err(kind);
            }
            L::Timeout { files } => {
                a.outcome = Outcome::Timeout;
                p.files_changed = files;
            }
            L::Crash => a.outcome = Outcome::Crashed,
            L::Sig(s) => {
                a.error_signatures = vec![s.to_string()];
                p.files_changed = 2;
            }
            L::Out(len, prog) => {
                a.output_len = len;
                p.files_changed = u32::from(prog);
            }
            L::UnknownSession => {
                a.outcome = Outcome::AgentError;
                a.error = err(ErrorKind::CliUsage);
                a.unknown_session = true;
            }
            L::PlanTick => p.plan_items_checked = 1,
            L::EdeWork { tick, green } => {
                a.outcome = Outcome::AgentError;
                a.error = err(ErrorKind::Interrupted);
                a.error_signatures = vec!["[ede_diagnostic] result_type=user".to_string()];
                p.files_changed = 2;
                p.plan_items_checked = u32::from(tick);
                p.check_fixed = green;
            }
        }
        (a, p)
    }

    fn run(b: &mut Breaker, loops: &[L], cfg: &BreakerConfig) -> Vec<Transition> {
        let mut out = Vec::new();
        for (i, l) in loops.iter().enumerate() {
            let (a, p) = build(*l);
            let now = ts(i64::try_from(i).unwrap() * 60);
            if let Some(t) = b.record(&a, &p, now, cfg) {
                out.push(t);
            }
        }
        out
    }

    fn rep(l: L, n: usize) -> Vec<L> {
        vec![l; n]
    }

    fn cat(parts: &[Vec<L>]) -> Vec<L> {
        parts.concat()
    }

    #[test]
    fn record_edges() {
        use CircuitState::{Closed as C, HalfOpen as H, Open as O};
        use ErrorKind::*;
        use L::*;
        // (name, loops, final state, reason of the last transition ("" = none))
        let cases: Vec<(&str, Vec<L>, CircuitState, &str)> = vec![
            ("one loop without progress", vec![NoProg], C, ""),
            (
                "closed → half-open",
                rep(NoProg, 2),
                H,
                "no progress in 2 consecutive loops",
            ),
            (
                "half-open → closed",
                cat(&[rep(NoProg, 2), vec![Prog]]),
                C,
                "progress resumed (1 file changed)",
            ),
            (
                "half-open → closed by a plan tick",
                cat(&[rep(NoProg, 2), vec![PlanTick]]),
                C,
                "progress resumed (1 plan item checked)",
            ),
            (
                "no progress opens",
                rep(NoProg, 3),
                O,
                "no progress in 3 consecutive loops",
            ),
            (
                "questions hold the count",
                vec![NoProg, Ask, Ask, Ask, Ask],
                C,
                "",
            ),
            (
                "questions neither reset",
                vec![NoProg, Ask, NoProg, Ask, NoProg],
                O,
                "no progress in 3 consecutive loops",
            ),
            (
                "progress resets",
                vec![NoProg, NoProg, Prog, NoProg, NoProg],
                H,
                "no progress in 2 consecutive loops",
            ),
            (
                "error results that tick the plan are productive",
                rep(
                    EdeWork {
                        tick: true,
                        green: false,
                    },
                    8,
                ),
                C,
                "",
            ),
            (
                "error results that turn the check green are productive",
                rep(
                    EdeWork {
                        tick: false,
                        green: true,
                    },
                    8,
                ),
                C,
                "",
            ),
            (
                "error results that only change files still count",
                rep(
                    EdeWork {
                        tick: false,
                        green: false,
                    },
                    5,
                ),
                O,
                "same error in 5 consecutive loops: [ede_diagnostic] result_type=user",
            ),
            (
                "a productive error holds the same-error streak",
                cat(&[
                    rep(
                        EdeWork {
                            tick: false,
                            green: false,
                        },
                        4,
                    ),
                    vec![EdeWork {
                        tick: true,
                        green: false,
                    }],
                    vec![EdeWork {
                        tick: false,
                        green: false,
                    }],
                ]),
                O,
                "same error in 5 consecutive loops: [ede_diagnostic] result_type=user",
            ),
            ("4 failures stay closed", rep(Err(Overloaded), 4), C, ""),
            (
                "5 failures open",
                rep(Err(Overloaded), 5),
                O,
                "5 consecutive failed calls (last: overloaded)",
            ),
            (
                "mixed failures open",
                cat(&[
                    rep(Err(RateLimit), 2),
                    vec![Crash, Timeout { files: 0 }, Err(Network)],
                ]),
                O,
                "5 consecutive failed calls (last: network)",
            ),
            (
                "5 timeouts open",
                rep(Timeout { files: 0 }, 5),
                O,
                "5 consecutive failed calls (last: timeout)",
            ),
            (
                "5 crashes open",
                rep(Crash, 5),
                O,
                "5 consecutive failed calls (last: crash)",
            ),
            (
                "max_turns counts",
                rep(Err(MaxTurns), 5),
                O,
                "5 consecutive failed calls (last: max_turns)",
            ),
            (
                "success resets failures",
                cat(&[rep(Err(Server), 4), vec![Prog], rep(Err(Server), 4)]),
                C,
                "",
            ),
            (
                "productive timeouts never fail",
                rep(Timeout { files: 3 }, 8),
                C,
                "",
            ),
            (
                "usage limits in a row open (a forged reset time cannot loop for ever)",
                rep(Err(UsageLimit), 5),
                O,
                "5 consecutive failed calls (last: usage_limit)",
            ),
            (
                "interrupted answers hank did not cause open",
                rep(Err(Interrupted), 5),
                O,
                "5 consecutive failed calls (last: interrupted)",
            ),
            (
                "interrupted answers hold the no-progress count",
                vec![NoProg, Err(Interrupted), NoProg, Err(Interrupted)],
                H,
                "no progress in 2 consecutive loops",
            ),
            (
                "unknown session changes nothing",
                rep(UnknownSession, 10),
                C,
                "",
            ),
            (
                "every kind of failure counts toward the streak",
                cat(&[
                    vec![Err(Overloaded), Err(UsageLimit), Err(Interrupted)],
                    vec![UnknownSession, Err(Auth), Err(Unknown)],
                ]),
                O,
                "5 consecutive failed calls (last: unknown)",
            ),
            (
                "unknown session is neutral between failures",
                cat(&[
                    rep(Err(Overloaded), 4),
                    vec![UnknownSession, Err(Overloaded)],
                ]),
                O,
                "5 consecutive failed calls (last: overloaded)",
            ),
            (
                "fatal kinds are failures too",
                rep(Err(Auth), 5),
                O,
                "5 consecutive failed calls (last: auth)",
            ),
            (
                "a productive interrupted answer is not a failure",
                rep(Sig("error: interrupted"), 4),
                C,
                "",
            ),
            (
                "same error opens",
                rep(Sig("error: E1 at <path>"), 5),
                O,
                "same error in 5 consecutive loops: error: E1 at <path>",
            ),
            (
                "changing error restarts",
                cat(&[rep(Sig("E1"), 4), vec![Sig("E2")], rep(Sig("E1"), 4)]),
                C,
                "",
            ),
            (
                "no error resets",
                cat(&[rep(Sig("E1"), 4), vec![Prog], rep(Sig("E1"), 4)]),
                C,
                "",
            ),
            (
                "decline opens",
                cat(&[rep(Out(1000, true), 3), vec![Out(100, false)]]),
                O,
                "output shrank by 90% against the recent average with no progress",
            ),
            (
                "small decline does not",
                cat(&[rep(Out(1000, true), 3), vec![Out(500, false)]]),
                C,
                "",
            ),
            (
                "decline with progress does not",
                cat(&[rep(Out(1000, true), 3), vec![Out(10, true)]]),
                C,
                "",
            ),
            (
                "decline needs 3 outputs",
                cat(&[rep(Out(1000, true), 2), vec![Out(10, false)]]),
                C,
                "",
            ),
        ];
        // The count rules, with outages counted like any failure (MAX_OUTAGE_MINUTES=0).
        let cfg = BreakerConfig {
            max_outage_minutes: 0,
            ..BreakerConfig::default()
        };
        for (name, loops, state, reason) in cases {
            let mut b = Breaker::default();
            let transitions = run(&mut b, &loops, &cfg);
            assert_eq!(b.state, state, "{name}: {b:?}");
            let last = transitions.last().map_or("", |t| t.reason.as_str());
            assert_eq!(last, reason, "{name}");
            assert_eq!(b.reason, reason, "{name}");
            assert_eq!(b.history, transitions, "{name}");
            if state == O {
                assert_eq!(b.opened_at, transitions.last().map(|t| t.at), "{name}");
            }
        }
    }

    #[test]
    fn neutral_loops_keep_every_counter() {
        let cfg = BreakerConfig::default();
        let mut b = Breaker::default();
        run(
            &mut b,
            &[L::NoProg, L::Err(ErrorKind::Overloaded), L::Sig("E")],
            &cfg,
        );
        let before = b.clone();
        run(&mut b, &[L::UnknownSession, L::UnknownSession], &cfg);
        assert_eq!(b, before);
    }

    /// Transient failures are judged by time: a loop a minute ([`run`]), so 120 of them are
    /// two hours without a successful call.
    #[test]
    fn outages_are_judged_by_time() {
        use ErrorKind::{Auth, Network, Overloaded, RateLimit, Server};
        use L::{Err, NoProg, Prog};
        let cfg = BreakerConfig::default();
        let mixed = [Overloaded, Server, Network, RateLimit];
        let outage = |n: usize| -> Vec<L> { (0..n).map(|i| Err(mixed[i % 4])).collect() };
        let cases: Vec<(&str, Vec<L>, CircuitState, &str)> = vec![
            (
                "8 overloaded answers then success",
                cat(&[outage(8), vec![Prog]]),
                CircuitState::Closed,
                "",
            ),
            (
                "two hours minus a minute",
                outage(120),
                CircuitState::Closed,
                "",
            ),
            (
                "two hours without a success",
                outage(121),
                CircuitState::Open,
                "the API has been unavailable for 2 h 0 min (121 failed calls in a row, last: overloaded)",
            ),
            (
                "a success restarts the clock",
                cat(&[outage(100), vec![Prog], outage(100)]),
                CircuitState::Closed,
                "",
            ),
            (
                "a success without progress restarts it too",
                cat(&[outage(100), vec![NoProg], outage(100)]),
                CircuitState::Closed,
                "",
            ),
            (
                "other failures keep the count rule",
                cat(&[outage(3), rep(Err(Auth), 5)]),
                CircuitState::Open,
                "5 consecutive failed calls (last: auth)",
            ),
        ];
        for (name, loops, state, reason) in cases {
            let mut b = Breaker::default();
            run(&mut b, &loops, &cfg);
            assert_eq!(b.state, state, "{name}: {b:?}");
            assert_eq!(b.reason, reason, "{name}");
            assert_eq!(
                b.failure_streak == 0,
                !reason.contains("consecutive"),
                "{name}"
            );
        }
        // The backoff's exponent grows during an outage; a success resets it.
        let mut b = Breaker::default();
        run(&mut b, &outage(6), &cfg);
        assert_eq!((b.transient_streak, b.failure_streak), (6, 0));
        assert!(b.outage_since.is_some());
        run(&mut b, &[Prog], &cfg);
        assert_eq!((b.transient_streak, b.outage_since), (0, None));
    }

    #[test]
    fn zero_thresholds_disable_rules() {
        let cfg = BreakerConfig {
            no_progress_threshold: 0,
            same_error_threshold: 0,
            failure_threshold: 0,
            output_decline_pct: 0,
            cooldown_minutes: 30,
            max_outage_minutes: 0,
        };
        let mut b = Breaker::default();
        let loops = cat(&[
            rep(L::Out(1000, true), 3),
            rep(L::Out(1, false), 10),
            rep(L::Err(ErrorKind::Server), 10),
            rep(L::Sig("E"), 10),
        ]);
        run(&mut b, &loops, &cfg);
        assert_ne!(b.state, CircuitState::Open);
    }

    #[test]
    fn open_ignores_record() {
        let cfg = BreakerConfig::default();
        let mut b = Breaker::default();
        run(&mut b, &rep(L::NoProg, 3), &cfg);
        assert!(b.is_open());
        let before = b.clone();
        let got = run(&mut b, &rep(L::Prog, 5), &cfg);
        assert!(got.is_empty());
        assert_eq!(b, before);
    }

    fn opened_at_zero() -> Breaker {
        let mut b = Breaker::default();
        let (a, p) = build(L::NoProg);
        let cfg = BreakerConfig::default();
        for _ in 0..3 {
            b.record(&a, &p, ts(0), &cfg);
        }
        assert!(b.is_open());
        b
    }

    #[test]
    fn run_start_edges() {
        let cfg = BreakerConfig::default(); // 30 min cooldown
        // (name, now secs, auto_reset, expected state, transition reason)
        let cases: &[(&str, i64, bool, CircuitState, Option<&str>)] = &[
            (
                "before cooldown",
                29 * 60 + 59,
                false,
                CircuitState::Open,
                None,
            ),
            ("clock moved back", -3600, false, CircuitState::Open, None),
            (
                "cooldown passed",
                30 * 60,
                false,
                CircuitState::HalfOpen,
                Some("cooldown of 30 minutes passed; one trial loop"),
            ),
            (
                "auto reset",
                10,
                true,
                CircuitState::Closed,
                Some("reset at start (--auto-reset-circuit)"),
            ),
        ];
        for (name, now, auto, state, reason) in cases {
            let mut b = opened_at_zero();
            assert_eq!(b.cooldown_ends_at(&cfg), Some(ts(1800)), "{name}");
            let t = b.on_run_start(ts(*now), &cfg, *auto);
            assert_eq!(b.state, *state, "{name}");
            assert_eq!(t.map(|t| t.reason), reason.map(str::to_string), "{name}");
            match state {
                CircuitState::HalfOpen => {
                    assert!(b.trial);
                    assert_eq!(b.no_progress_streak, 3, "{name}: counters kept");
                }
                CircuitState::Closed => assert_eq!(b.no_progress_streak, 0, "{name}"),
                CircuitState::Open => {}
            }
        }
        // Not open: nothing to do.
        let mut b = Breaker::default();
        assert_eq!(b.on_run_start(ts(0), &cfg, true), None);
        assert_eq!(b.cooldown_ends_at(&cfg), None);
        // Open with no opening time: treated as opened now.
        let mut b = Breaker {
            state: CircuitState::Open,
            ..Breaker::default()
        };
        assert_eq!(b.on_run_start(ts(100), &cfg, false), None);
        assert_eq!(b.opened_at, Some(ts(100)));
        assert!(b.is_open());
    }

    #[test]
    fn trial_loop_after_cooldown() {
        let cfg = BreakerConfig::default();
        // (name, trial loop, expected state, reason)
        let cases: &[(&str, L, CircuitState, &str)] = &[
            (
                "progress closes",
                L::Prog,
                CircuitState::Closed,
                "progress resumed (1 file changed)",
            ),
            (
                "no progress reopens",
                L::NoProg,
                CircuitState::Open,
                "no progress in 4 consecutive loops",
            ),
            (
                "failure reopens",
                L::Err(ErrorKind::Overloaded),
                CircuitState::Open,
                "trial loop after the cooldown failed (overloaded)",
            ),
            (
                "questions hold",
                L::Ask,
                CircuitState::HalfOpen,
                "cooldown of 30 minutes passed; one trial loop",
            ),
        ];
        for (name, l, state, reason) in cases {
            let mut b = opened_at_zero();
            b.on_run_start(ts(3600), &cfg, false);
            let (a, p) = build(*l);
            b.record(&a, &p, ts(3700), &cfg);
            assert_eq!(b.state, *state, "{name}");
            assert_eq!(b.reason, *reason, "{name}");
        }
        // Opened by the decline rule (no-progress count low): a no-progress trial reopens too.
        let mut b = Breaker::default();
        run(
            &mut b,
            &cat(&[rep(L::Out(1000, true), 3), vec![L::Out(1, false)]]),
            &cfg,
        );
        assert!(b.is_open());
        b.on_run_start(ts(4000), &cfg, false);
        let (a, p) = build(L::NoProg);
        b.record(&a, &p, ts(4100), &cfg);
        assert_eq!(b.reason, "trial loop after the cooldown made no progress");
    }

    #[test]
    fn reset_clears() {
        let mut b = opened_at_zero();
        let t = b.reset(ts(10), "manual reset").unwrap();
        assert_eq!((t.from, t.to), (CircuitState::Open, CircuitState::Closed));
        assert_eq!(b.state, CircuitState::Closed);
        assert_eq!(b.no_progress_streak, 0);
        assert_eq!(b.reason, "manual reset");
        let mut c = Breaker {
            failure_streak: 3,
            ..Breaker::default()
        };
        assert_eq!(c.reset(ts(0), "again"), None);
        assert_eq!(c.failure_streak, 0);
    }

    #[test]
    fn history_is_bounded() {
        let cfg = BreakerConfig::default();
        let mut b = Breaker::default();
        let loops = rep(L::NoProg, 2)
            .into_iter()
            .chain(std::iter::once(L::Prog))
            .cycle()
            .take(300);
        let loops: Vec<L> = loops.collect();
        let transitions = run(&mut b, &loops, &cfg);
        assert_eq!(transitions.len(), 200);
        assert_eq!(b.history.len(), MAX_HISTORY);
        assert_eq!(b.history.last(), transitions.last());
    }

    #[test]
    fn state_strings_and_serde() {
        for (s, text) in [
            (CircuitState::Closed, "CLOSED"),
            (CircuitState::HalfOpen, "HALF_OPEN"),
            (CircuitState::Open, "OPEN"),
        ] {
            assert_eq!(s.to_string(), text);
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{text}\""));
        }
        let b: Breaker = serde_json::from_str(r#"{"state":"OPEN"}"#).unwrap();
        assert!(b.is_open());
        assert_eq!(b.opened_at, None);
        let b = opened_at_zero();
        let back: Breaker = serde_json::from_str(&serde_json::to_string(&b).unwrap()).unwrap();
        assert_eq!(back, b);
    }

    fn any_loop() -> impl Strategy<Value = L> {
        prop_oneof![
            Just(L::Prog),
            Just(L::NoProg),
            Just(L::Ask),
            Just(L::Crash),
            Just(L::UnknownSession),
            Just(L::PlanTick),
            (0u32..3).prop_map(|files| L::Timeout { files }),
            prop_oneof![Just("E1"), Just("E2")].prop_map(L::Sig),
            (0u64..2000, any::<bool>()).prop_map(|(n, p)| L::Out(n, p)),
            prop_oneof![
                Just(ErrorKind::Overloaded),
                Just(ErrorKind::UsageLimit),
                Just(ErrorKind::Interrupted),
                Just(ErrorKind::Auth),
                Just(ErrorKind::Unknown),
            ]
            .prop_map(L::Err),
        ]
    }

    /// A loop that made no progress and asked nothing, whatever the agent answered.
    fn any_idle_loop() -> impl Strategy<Value = L> {
        prop_oneof![
            Just(L::NoProg),
            Just(L::Crash),
            Just(L::Timeout { files: 0 }),
            (0u64..2000).prop_map(|n| L::Out(n, false)),
            prop_oneof![
                Just(ErrorKind::Overloaded),
                Just(ErrorKind::UsageLimit),
                Just(ErrorKind::Interrupted),
                Just(ErrorKind::Auth),
                Just(ErrorKind::MaxTurns),
                Just(ErrorKind::Unknown),
            ]
            .prop_map(L::Err),
        ]
    }

    proptest! {
        /// No mix of answers without progress keeps the breaker closed: it opens within
        /// failure_threshold × no_progress_threshold loops.
        #[test]
        fn idle_loops_always_open(loops in proptest::collection::vec(any_idle_loop(), 15..60)) {
            let cfg = BreakerConfig { max_outage_minutes: 0, ..BreakerConfig::default() };
            let mut b = Breaker::default();
            run(&mut b, &loops[..15], &cfg);
            prop_assert!(b.is_open(), "{:?}", b);
        }

        /// With outages judged by time (a loop a minute), idle loops still open the breaker:
        /// within 15 loops that are not outage failures, or two hours of outage.
        #[test]
        fn idle_loops_open_with_the_outage_allowance(
            loops in proptest::collection::vec(any_idle_loop(), 136..160),
        ) {
            let cfg = BreakerConfig::default();
            let mut b = Breaker::default();
            run(&mut b, &loops, &cfg);
            prop_assert!(b.is_open(), "{:?}", b);
        }

        #[test]
        fn open_is_sticky(
            steps in proptest::collection::vec((any_loop(), 0i64..1200, 0u8..8), 1..200),
            cooldown in 0u32..60,
        ) {
            let cfg = BreakerConfig { cooldown_minutes: cooldown, ..BreakerConfig::default() };
            let mut b = Breaker::default();
            let mut now = 0i64;
            for (l, gap, op) in steps {
                now += gap;
                let was_open = b.is_open();
                if op == 0 {
                    let ends = b.cooldown_ends_at(&cfg);
                    let t = b.on_run_start(ts(now), &cfg, false);
                    if was_open && b.state != CircuitState::Open {
                        prop_assert!(ends.is_some_and(|e| ts(now) >= e));
                        prop_assert!(t.is_some());
                    }
                } else {
                    let (a, p) = build(l);
                    b.record(&a, &p, ts(now), &cfg);
                    if was_open {
                        prop_assert!(b.is_open());
                    }
                }
                prop_assert!(b.history.len() <= MAX_HISTORY);
                prop_assert!(b.recent_output_lens.len() <= RECENT_OUTPUTS);
                prop_assert_eq!(b.history.last().map(|t| t.to).unwrap_or_default(), b.state);
            }
        }
    }
}
