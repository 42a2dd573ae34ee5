//! The loop as a state machine. **\[pure\]**
//!
//! [`Run::next`] says what the loop does now ([`Step`]); [`Run::on`] takes what happened
//! ([`Fact`]). The engine is the driver: it executes a step (calls the agent, runs the check,
//! waits, reads the plan), reports the fact, and asks again. Every ordering rule of the loop
//! lives here and is table-tested with a fixed clock (`tests.rs`): an interrupt overrides the
//! decision; a rejected "done" re-decides without claims; failover after the decision; an
//! unknown session retries fresh or is fatal; the loop delay (none after a free retry);
//! `MAX_RUNTIME`; the budget, window and agent gates; live control (pause, resume, stop,
//! retry-now, notes for the next context, settings and window readings from outside).
//!
//! The existing pure rules ([`crate::policy::decide`], [`crate::policy::budget`],
//! [`crate::policy::windows`], [`crate::policy::failover`], [`crate::policy::session`],
//! [`crate::policy::startup`]) stay where they are: the driver evaluates them over its state
//! and hands their verdicts in ([`Observation`], [`Answer`]); `Run` composes them.

use jiff::{SignedDuration, Timestamp};

use crate::analysis::WindowReading;
use crate::exit::ExitReason;
use crate::policy::budget::{BudgetCheck, WaitReason, add_duration};
use crate::policy::decide::{self, DecideConfig, Decision, UsageLimitPolicy};
use crate::policy::failover::Pick;
use crate::policy::session::{self, UnknownSession};
use crate::policy::windows::WindowCheck;

#[cfg(test)]
mod tests;

/// The settings the state machine needs, fixed for the run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// When `MAX_RUNTIME` ends the run (`None`: unlimited).
    pub deadline: Option<Timestamp>,
    /// `LOOP_DELAY_SECONDS`.
    pub loop_delay: SignedDuration,
    /// `ON_USAGE_LIMIT`.
    pub on_usage_limit: UsageLimitPolicy,
    /// More than one agent in `AGENTS`: failover applies after a decision.
    pub failover: bool,
    /// `MAX_LOOPS`, `MAX_COST_USD` and the rest of the decision's settings.
    pub decide: DecideConfig,
}

impl RunConfig {
    /// The end of `MAX_RUNTIME` for a run started at `start` (`zero`: unlimited).
    #[must_use]
    pub fn deadline_of(start: Timestamp, max_runtime: std::time::Duration) -> Option<Timestamp> {
        (!max_runtime.is_zero()).then(|| {
            start
                .checked_add(SignedDuration::try_from(max_runtime).unwrap_or(SignedDuration::MAX))
                .unwrap_or(Timestamp::MAX)
        })
    }
}

/// Why the loop waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitFor {
    /// A limit: rate, tokens, usage limit, usage window, backoff (countdown, status
    /// `waiting`, saved when [`WaitReason::is_saved`]).
    Limit(WaitReason),
    /// `LOOP_DELAY_SECONDS` between two loops (silent).
    LoopDelay,
    /// Paused by a control command, until a resume (`until: None`).
    Paused,
    /// The agent's call is running: nothing to decide before its answer.
    Answer,
}

/// What the loop does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Look at the project and the limits, then report [`Fact::Observed`].
    Observe,
    /// Call the agent at this index of the chain (the driver switches to it first).
    Call { agent: usize },
    /// Run the project's check on a "done" claim, then report [`Fact::Checked`].
    Check(ExitReason),
    /// Mark the agent limited by the answer's error and pick again, then report
    /// [`Fact::FailedOver`] (failover chains only).
    Failover,
    /// Forget the session the agent no longer knows, then report [`Fact::SessionDropped`].
    FreshSession,
    /// Wait until `until` (`None`: until a fact ends it), then report [`Fact::WokeUp`].
    Wait {
        until: Option<Timestamp>,
        reason: WaitFor,
    },
    /// End the run.
    Stop(ExitReason),
}

/// What the driver saw before a call: the verdicts of the pure checks over its state, all at
/// the same `now`.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// A required file is gone (or the plan cannot be read).
    pub missing_files: bool,
    /// The plan is complete: a "done" claim.
    pub plan_complete: bool,
    /// The circuit breaker is open.
    pub breaker_open: bool,
    /// The rolling-hour caps ([`crate::policy::budget::Ledger::check`]).
    pub budget: BudgetCheck,
    /// `MAX_WINDOW_PERCENT` ([`crate::policy::windows::check`]).
    pub window: WindowCheck,
    /// The failover chain ([`crate::policy::failover::Agents::pick`]).
    pub pick: Pick,
}

/// One answer, judged by the driver with the pure rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    /// [`decide::after_loop`] with claims.
    pub decision: Decision,
    /// [`decide::after_loop`] without claims (used when the check rejects a "done").
    pub without_claims: Decision,
    /// A startup hang retried at once ([`crate::policy::startup`]).
    pub free_retry: bool,
    /// An error result whose loop did the work.
    pub productive_error: bool,
    /// Ctrl-C / SIGTERM during the call.
    pub interrupted: bool,
    /// The answer carries an error (failover looks at it).
    pub error: bool,
    /// The call resumed a session.
    pub resumed: bool,
}

/// What failover found after an answer's error ([`crate::policy::failover::Agents::on_error`]
/// then `pick`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailoverPick {
    /// The error does not limit the agent, or the pick is the same agent.
    Unchanged,
    /// Another agent can work now.
    Other,
    /// Every agent is limited; the first comes back then.
    AllLimitedUntil(Timestamp),
}

/// A command from outside the run (live control, the fleet, delivery).
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// No call until [`Control::Resume`].
    Pause,
    Resume,
    /// End the run (`interrupted`).
    Stop,
    /// End the current wait now (the gates are checked again).
    RetryNow,
    /// Text for the next loop's context (a note, an answer, CI failure text, a merge result).
    Note(ContextNote),
    /// A setting changed (`hank ctl set`): the driver applies it.
    Set {
        key: String,
        value: String,
    },
    /// A usage-window reading from a sibling run: the driver folds it into its windows.
    Window(WindowReading),
}

/// Text for the next context, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextNote {
    pub kind: NoteKind,
    pub text: String,
}

/// Where a note for the next context came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteKind {
    Note,
    Answer,
    CiFailure,
    MergeResult,
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// The driver looked ([`Step::Observe`]).
    Observed(Observation),
    /// The agent call of [`Step::Call`] started.
    Calling,
    /// What the call cost (USD), counted before the answer is judged.
    Spent(f64),
    /// The agent answered (or was stopped).
    Answered(Answer),
    /// The check of [`Step::Check`]: `Some(reason)` stops the run, `None` rejects the claim.
    Checked(Option<ExitReason>),
    /// The result of [`Step::Failover`].
    FailedOver(FailoverPick),
    /// The session was dropped ([`Step::FreshSession`]).
    SessionDropped,
    /// A wait ended (its time came, or it was cut short).
    WokeUp,
    /// Ctrl-C, SIGTERM or SIGHUP.
    Interrupted,
    Control(Control),
    /// The fleet's shared budget (`MAX_COST_USD` over every task) is used up: the run stops
    /// at its next gates with this reason, as at its own cap.
    FleetLimit(ExitReason),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Before a call: observe, then the gates.
    Gates { claim_rejected: bool },
    /// A "done" claim before a call is being checked.
    PlanClaim,
    /// A "done" claim of an answer is being checked.
    AnswerClaim(Answer),
    /// Failover is being asked about this decision (of a call that resumed a session, or
    /// not).
    Failover(Decision, bool),
    /// The loop's decision is final.
    Decided(Decision),
    /// The session is being dropped; the loop then continues.
    Dropping,
    /// A wait is on.
    Waiting {
        until: Option<Timestamp>,
        reason: WaitFor,
    },
    /// A call is running.
    Calling,
}

/// The loop's state between facts.
#[derive(Debug, Clone)]
pub struct Run {
    cfg: RunConfig,
    phase: Phase,
    seen: Option<Observation>,
    loops: u64,
    cost: f64,
    interrupted: bool,
    paused: bool,
    /// The last loop was a free retry: no loop delay before the next.
    retry_now: bool,
    decision: Option<Decision>,
    notes: Vec<ContextNote>,
    settings: Vec<(String, String)>,
    readings: Vec<WindowReading>,
    /// [`Fact::FleetLimit`]: the fleet's budget is spent.
    fleet_stop: Option<ExitReason>,
}

impl Run {
    /// A run about to make its first call.
    #[must_use]
    pub fn new(cfg: RunConfig) -> Self {
        Self {
            cfg,
            phase: Phase::Gates {
                claim_rejected: false,
            },
            seen: None,
            loops: 0,
            cost: 0.0,
            interrupted: false,
            paused: false,
            retry_now: false,
            decision: None,
            notes: Vec::new(),
            settings: Vec::new(),
            readings: Vec::new(),
            fleet_stop: None,
        }
    }

    /// Calls made by this run.
    #[must_use]
    pub fn loops(&self) -> u64 {
        self.loops
    }

    /// What this run's calls cost (USD).
    #[must_use]
    pub fn cost(&self) -> f64 {
        self.cost
    }

    /// The last loop's final decision (after claims, failover and the session rule).
    #[must_use]
    pub fn decision(&self) -> Option<Decision> {
        self.decision
    }

    /// The notes for the next context, oldest first (taken: each goes to one context).
    pub fn take_notes(&mut self) -> Vec<ContextNote> {
        std::mem::take(&mut self.notes)
    }

    /// Settings changed from outside, to apply (taken).
    pub fn take_settings(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.settings)
    }

    /// Window readings from siblings, to fold into the run's windows (taken).
    pub fn take_readings(&mut self) -> Vec<WindowReading> {
        std::mem::take(&mut self.readings)
    }

    /// What the loop does now.
    #[must_use]
    pub fn next(&mut self, now: Timestamp) -> Step {
        if self.interrupted {
            return Step::Stop(ExitReason::Interrupted);
        }
        match self.phase {
            Phase::Gates { claim_rejected } => self.gates(now, claim_rejected),
            Phase::PlanClaim => Step::Check(ExitReason::PlanComplete),
            Phase::AnswerClaim(a) => match a.decision {
                Decision::Stop(r) => Step::Check(r),
                _ => Step::Observe,
            },
            Phase::Failover(..) => Step::Failover,
            Phase::Dropping => Step::FreshSession,
            Phase::Decided(d) => self.after_decision(d, now),
            Phase::Waiting { until, reason } => Step::Wait { until, reason },
            Phase::Calling => Step::Wait {
                until: None,
                reason: WaitFor::Answer,
            },
        }
    }

    /// Takes what happened.
    pub fn on(&mut self, fact: Fact, now: Timestamp) {
        match fact {
            Fact::Observed(o) => self.seen = Some(o),
            Fact::Calling => {
                self.loops += 1;
                self.decision = None;
                self.phase = Phase::Calling;
            }
            Fact::Spent(usd) => self.cost += usd,
            Fact::Answered(a) => self.answered(a),
            Fact::Checked(verdict) => self.checked(verdict),
            Fact::FailedOver(pick) => {
                if let Phase::Failover(d, resumed) = self.phase {
                    let d = self.failover(d, pick);
                    self.decide(d);
                    self.session_rule(resumed);
                }
            }
            Fact::SessionDropped => {
                if self.phase == Phase::Dropping {
                    self.phase = Phase::Decided(Decision::Continue);
                }
            }
            Fact::WokeUp => self.back_to_gates(),
            Fact::Interrupted => self.interrupted = true,
            Fact::Control(c) => self.control(c, now),
            Fact::FleetLimit(r) => self.fleet_stop = Some(r),
        }
    }

    fn back_to_gates(&mut self) {
        self.seen = None;
        self.phase = Phase::Gates {
            claim_rejected: false,
        };
    }

    /// Before a call, in order: integrity, `MAX_RUNTIME`, a complete plan (a claim to check),
    /// `MAX_LOOPS` / cost budget, the breaker, the rolling-hour caps, the usage windows, a
    /// pause, the agent chain.
    fn gates(&mut self, now: Timestamp, claim_rejected: bool) -> Step {
        let Some(o) = self.seen.clone() else {
            return Step::Observe;
        };
        if o.missing_files {
            return Step::Stop(ExitReason::IntegrityFailure);
        }
        if self.cfg.deadline.is_some_and(|d| now >= d) {
            return Step::Stop(ExitReason::MaxRuntime);
        }
        if o.plan_complete && !claim_rejected {
            self.phase = Phase::PlanClaim;
            return Step::Check(ExitReason::PlanComplete);
        }
        if let Some(r) = decide::before_call(false, self.loops, self.cost, &self.cfg.decide) {
            return Step::Stop(r);
        }
        if let Some(r) = self.fleet_stop {
            return Step::Stop(r);
        }
        if o.breaker_open {
            return Step::Stop(ExitReason::CircuitOpen);
        }
        if let BudgetCheck::Wait { until, reason } = o.budget {
            return self.wait(until, WaitFor::Limit(reason));
        }
        if let WindowCheck::Wait { until, .. } = o.window {
            if self.cfg.on_usage_limit == UsageLimitPolicy::Exit {
                return Step::Stop(ExitReason::UsageWindow);
            }
            return self.wait(until, WaitFor::Limit(WaitReason::UsageWindow));
        }
        if self.paused {
            self.phase = Phase::Waiting {
                until: None,
                reason: WaitFor::Paused,
            };
            return self.next(now);
        }
        match o.pick {
            Pick::Use(agent) => Step::Call { agent },
            Pick::WaitUntil(until) => self.wait(until, WaitFor::Limit(WaitReason::UsageLimit)),
            Pick::NoneLeft => Step::Stop(ExitReason::AgentFatal),
        }
    }

    fn wait(&mut self, until: Timestamp, reason: WaitFor) -> Step {
        self.phase = Phase::Waiting {
            until: Some(until),
            reason,
        };
        Step::Wait {
            until: Some(until),
            reason,
        }
    }

    /// The answer's decision: free retries and productive errors uncounted, an interrupt
    /// overrides, a "done" claim goes to the check.
    fn answered(&mut self, a: Answer) {
        let d = decide::uncounted(a.decision, a.free_retry, a.productive_error);
        self.retry_now = a.free_retry && d == Decision::Continue;
        if a.interrupted {
            self.decide(Decision::Stop(ExitReason::Interrupted));
        } else if let Decision::Stop(r) = d
            && r.is_completion()
        {
            self.phase = Phase::AnswerClaim(Answer { decision: d, ..a });
        } else {
            self.after_claims(d, a);
        }
    }

    fn checked(&mut self, verdict: Option<ExitReason>) {
        match (self.phase, verdict) {
            (Phase::PlanClaim, Some(r)) => self.phase = Phase::Decided(Decision::Stop(r)),
            (Phase::PlanClaim, None) => {
                self.phase = Phase::Gates {
                    claim_rejected: true,
                };
            }
            (Phase::AnswerClaim(a), Some(r)) => self.after_claims(Decision::Stop(r), a),
            // Rejected: every rule but the claims still applies.
            (Phase::AnswerClaim(a), None) => self.after_claims(a.without_claims, a),
            _ => {}
        }
    }

    /// Failover comes after the decision (and after the check), never after an interrupt.
    fn after_claims(&mut self, d: Decision, a: Answer) {
        if self.cfg.failover && a.error && d != Decision::Stop(ExitReason::Interrupted) {
            self.phase = Phase::Failover(d, a.resumed);
        } else {
            self.decide(d);
            self.session_rule(a.resumed);
        }
    }

    /// The session rule comes last: after the claims and after failover.
    fn session_rule(&mut self, resumed: bool) {
        if let Phase::Decided(Decision::RetryWithoutSession) = self.phase {
            self.unknown_session(resumed);
        }
    }

    fn failover(&self, d: Decision, pick: FailoverPick) -> Decision {
        match pick {
            FailoverPick::Unchanged => d,
            FailoverPick::Other => Decision::Continue,
            FailoverPick::AllLimitedUntil(until) => {
                if self.cfg.on_usage_limit == UsageLimitPolicy::Exit {
                    Decision::Stop(ExitReason::UsageLimit)
                } else {
                    Decision::Wait {
                        until,
                        reason: WaitReason::UsageLimit,
                    }
                }
            }
        }
    }

    fn decide(&mut self, d: Decision) {
        self.decision = Some(d);
        self.phase = Phase::Decided(d);
    }

    fn unknown_session(&mut self, resumed: bool) {
        match session::on_unknown_session(resumed) {
            UnknownSession::RetryFresh => self.phase = Phase::Dropping,
            UnknownSession::Fatal => self.decide(Decision::Stop(ExitReason::AgentFatal)),
        }
    }

    /// The step after a final decision: the loop delay (none after a free retry), a wait, a
    /// stop.
    fn after_decision(&mut self, d: Decision, now: Timestamp) -> Step {
        match d {
            Decision::Continue | Decision::RetryWithoutSession => {
                let delay = if std::mem::take(&mut self.retry_now) {
                    SignedDuration::ZERO
                } else {
                    self.cfg.loop_delay
                };
                if delay.is_positive() {
                    self.wait(add_duration(now, delay), WaitFor::LoopDelay)
                } else {
                    self.back_to_gates();
                    self.next(now)
                }
            }
            Decision::Wait { until, reason } => self.wait(until, WaitFor::Limit(reason)),
            Decision::Stop(r) => Step::Stop(r),
        }
    }

    fn control(&mut self, c: Control, _now: Timestamp) {
        match c {
            Control::Pause => self.paused = true,
            Control::Resume => {
                self.paused = false;
                if let Phase::Waiting {
                    reason: WaitFor::Paused,
                    ..
                } = self.phase
                {
                    self.back_to_gates();
                }
            }
            Control::Stop => self.interrupted = true,
            // Ends a limit wait or the loop delay, not a pause.
            Control::RetryNow => {
                if let Phase::Waiting { reason, .. } = self.phase
                    && reason != WaitFor::Paused
                {
                    self.back_to_gates();
                }
            }
            Control::Note(n) => self.notes.push(n),
            Control::Set { key, value } => self.settings.push((key, value)),
            Control::Window(r) => self.readings.push(r),
        }
    }

    /// The effect the last fact left to finish before the loop's decision is final (a claim to
    /// check, failover, a session to drop); `None` once it is final or outside an answer.
    #[must_use]
    pub fn pending(&self) -> Option<Step> {
        match self.phase {
            Phase::AnswerClaim(Answer {
                decision: Decision::Stop(r),
                ..
            }) => Some(Step::Check(r)),
            Phase::Failover(..) => Some(Step::Failover),
            Phase::Dropping => Some(Step::FreshSession),
            _ => None,
        }
    }

    /// New settings for the rest of the run (`hank ctl set`): the loops, cost and time so
    /// far are kept, the next gate checks them against `cfg`.
    pub fn retune(&mut self, cfg: RunConfig) {
        self.cfg = cfg;
    }

    /// Before a call (a stop returned now comes from a gate, not from an answer).
    #[must_use]
    pub fn at_gates(&self) -> bool {
        matches!(self.phase, Phase::Gates { .. })
    }

    /// Where a wait of `until` really ends: `MAX_RUNTIME` cuts it short.
    #[must_use]
    pub fn wait_end(&self, until: Timestamp) -> Timestamp {
        self.cfg.deadline.map_or(until, |d| d.min(until))
    }
}
