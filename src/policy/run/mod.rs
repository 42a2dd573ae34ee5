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
//!
//! ## The loop: state machine and driver (moved here from CLAUDE.md)
//!
//!
//! `policy::run::Run` decides, `engine/` executes. `Run::next(now)` returns a `Step`:
//! `Observe` (look at the project and limits → `Fact::Observed(Observation)`), `Call { agent }`,
//! `Check(reason)` (a "done" claim → `Fact::Checked`), `Failover` (→ `Fact::FailedOver`),
//! `FreshSession` (→ `Fact::SessionDropped`), `Wait { until, reason }` (`Limit(WaitReason)`,
//! `LoopDelay`, `Paused`, `UserAnswer`; → `Fact::WokeUp`; a start resuming the last run's wait
//! begins with it: `Run::resuming`), `Review(reason)` (`REVIEW_AGENT`: a verified completion,
//! before `Deliver`/`Stop`, once approved never again in the run; the round's call passes the
//! worker's gates from its own `Observe` — `Run::review_gates`: `MAX_COST_USD`/`REVIEW_MAX_SHARE`,
//! the fleet's budget, then `Run::limit_gates` shared with a call — → `Fact::Reviewed`:
//! `Verdict(Review)` approves, or puts the blockers in the next context as a `Reviewer` note while
//! rounds are left, else `Stop(review_rejected)`; `Wait` at a cap then the round again; `Stop`),
//! `Deliver(reason)` (`DELIVER=branch|pr`, after a
//! verified completion's loop is reported: `engine/drive.rs` → `deliver::in_run` →
//! `Fact::Delivered`:
//! `Final(reason)` stops, `Feedback { round, text, otherwise }` puts the text in the next context
//! while rounds of its kind are left — 2 pushes, `MAX_CI_ROUNDS` CI and review rounds — and goes
//! back
//! to the gates with the plan's claim skipped until the agent was called) or `Stop(reason)`. After
//! a call the engine sends
//! `Fact::Spent(cost)` and `Fact::Answered(Answer)` (the verdicts of `decide::after_loop` with and
//! without claims, free retry, productive error, interrupt, error, resumed) and settles
//! `Run::pending()` before reporting. A new loop rule goes into `Run` with a table test in
//! `policy/run/tests.rs`; the engine only gathers facts and executes steps. Every effect is an
//! `Effects` method (`src/effects/`): the agent call, the check, state.json, sleeping and waiting,
//! and what the run tells. Every wait sleeps through `Effects::sleep` and reads
//! `Effects::now`, so `engine/tests/` runs a 5-hour wait, a call → check → verified stop or a
//! failover at once, with no process; nothing in `engine/` calls tokio's timer, spawns or writes
//! a file. What an answer means for the state is pure (`agent::answer`: completed, folded,
//! judged, reported; `policy::verification`: what a check means), table-tested.
//!
//! The cut between driver and effects (issue 25's last step), and why:
//! - **Telling**: the driver hands one `effects::News` (a warning, a transition, a loop started or
//!   finished, a wait, a control command, an agent switch, a check, a delivery step, the exit, a
//!   failure) to `Engine::tell`, which adds the run's view (`RunView`: status.json built by the
//!   pure `Status::of` when the news implies a run state, the run's cost, the plan's items) and
//!   calls `Effects::tell` once. Which terminal line, log line and event each news implies is
//!   `News::told` (pure, table-tested); the default `Effects::tell` writes them through the
//!   primitives (`publish`, `say`, `log`, `emit`), so the real and test effects share it. The
//!   driver keeps only *what* happened; no line text or event shape is built in `engine/`.
//! - **Waiting**: `Effects::wait_until(WaitSpec)` ticks (at most a second, on the effects' clock),
//!   polls control each tick and returns `Woke::{Elapsed, Interrupted, Control(commands)}`; the
//!   driver hands commands to `Run::on` and asks `Run::wait_cut` whether they end the wait, and
//!   `Run::woke` how an elapsed wait ended (MAX_RUNTIME). The effect decides nothing: the test
//!   effects' clock still makes a 5-hour wait instant, and the engine keeps the run's state
//!   (`Run`, the saved wait) because the effect cannot hand facts to the state machine mid-wait.
//!   Delivery's waits (a push's retry waits, the CI wait) run on the same clock: the engine is
//!   the delivery's `deliver::Waiter` (`Effects::now`, `Effects::sleep`), so
//!   `engine/tests/deliver.rs`
//!   waits out a 30-minute CI at once; `hank deliver` and the fleet's delivery run the same
//!   delivery machine (`deliver::drive`) on `deliver::Wall`.
//! - **The answer**: `agent::answer::Call` (defined beside `store::schema::Fold`, which holds it)
//!   holds one call's facts; `fold_call` (the fold with
//!   the settings' configs), `judge` and `report` (the event and the summary block) are pure; the
//!   driver keeps the sequence call → measure → fold → judge → settle → report, because the
//!   order of effects (the ledger before the spawn, the fleet ledger after the fold, the check
//!   before the judgment) is the driver's job.
//! - **Checks**: `effects::check::Checks` (lent the run's verification and state by
//!   `Engine::checks`) runs, numbers, records and tells a check; what a result means is
//!   `policy::verification`'s; the driver keeps when a check runs (the start, after a call, a
//!   claim step).
//! - **Start and waits**: the wait the last run was in is the state machine's first step
//!   (`Run::resuming`, once `windows::resume_saved` says it stands); every wait is one step
//!   (`Engine::wait_step`), what it says, shows and keeps being `WaitFor::plan` (pure). The process set-up (the claim, runtime, signals, the real
//!   effects) is `commands/run.rs`'s; `engine::drive` takes any `Effects`.
//!
//! Where the next features plug in (issue 25 item 5), without growing the driver:
//! - **live control** (issue 29): a source of `Control` facts is an `Effects::poll_control`
//!   (today `control::LiveControl` inside `effects::Real`); what a command does is `Run::on`.
//! - **the fleet** (26, 28): a fleet supervisor runs one `hank run` per task (`fleet/`); shared
//!   limits enter as facts (`Control::Window` readings, `Effects::reserve_call` on the fleet
//!   ledger) and the decisions stay in `Run` and `policy::fleet`. A supervisor that drives several
//!   runs in one process gives each its own `Engine` over its own `Effects`.
//! - **delivery** (27): a verified completion is a `Step::Stop` of a completion after
//!   `Fact::Checked`; delivery hooks there (a new `Effects` method for the branch/PR work, its
//!   rules in `policy::deliver`), and CI/review feedback returns as `Control::Note` facts for the
//!   next context.
//!
//! Facts from outside the run — for live control (issue 29), the fleet (26) and delivery (27) —
//! enter through `Effects::poll_control() -> Vec<policy::run::Control>`, polled before each call
//! and about once a second in every wait (the pause, the loop delay and the wait for an answer
//! included). Plug a source in by giving the
//! engine an `Effects` whose `poll_control` drains it (a `hank ctl` journal reader, a fleet
//! supervisor's channel); `Real` drains the project's `hank ctl` journal
//! (`control::LiveControl`: one `stat` per poll, reads only when the journal moved, acknowledges
//! each command as it hands it over, replays an acknowledged pause at start, re-checks `set`) and
//! `Effects::control_log` hands the engine what was taken (a `control` event each). What each
//! `Control` does (`Run::on`, tested):
//! `Pause` → `Wait { until: None, reason: Paused }` before the next call (a running wait finishes
//! first); `Resume` ends it; `Stop` → `Stop(interrupted)` at once (ends a wait); `RetryNow` ends a
//! limit wait or the loop delay (not a pause, not a wait for an answer) and the gates are checked
//! again; `NEEDS_ANSWERS=wait` (`RunConfig::answer_wait`): a `needs_answers` decision becomes
//! `Wait { until: now + ANSWER_TIMEOUT, reason: UserAnswer }` (status `needs_answers`, the
//! questions in status.json), a `Note` of kind `Answer` ends it (one already queued skips it),
//! `WokeUp` at its end → `Stop(needs_answers)`; `Note(ContextNote)`
//! (kinds: note, answer, CI failure text, merge result, push rejection, review) goes into the next
//! context once
//! (`argv::outside_notes`: labelled, control characters dropped, delimiters escaped, ≤ 2,000
//! bytes each); `Window(WindowReading)` from a sibling run is folded into the run's windows before
//! the next gates (`windows::observe`); `Set { key, value }` is queued (`Run::take_settings`); the
//! driver applies it (`settings::live::apply`: the keys of `settings::live::LIVE` only, each one
//! typed `Live` — name, the parser `.hankrc` resolution uses too, the field, the shown value, when
//! it holds —; `live::check` is what `hank ctl`, the journal's reader, the remote poller and the
//! fleet check a `set` with, and `hank ctl --help` and `docs/control.md` list the table's keys,
//! tested) and gives the
//! run its new limits with `Run::retune(cfg)` (loops, cost and start time kept).

use jiff::{SignedDuration, Timestamp};

use crate::analysis::WindowReading;
use crate::analysis::review::Review;
use crate::exit::ExitReason;
use crate::policy::budget::{BudgetCheck, Resume, WaitReason, add_duration};
use crate::policy::decide::{self, DecideConfig, Decision, UsageLimitPolicy};
use crate::policy::failover::Pick;
use crate::policy::fleet::FleetVerdict;
use crate::policy::review::{self, ReviewConfig, RoundEnd};
use crate::policy::session::{self, UnknownSession};
use crate::policy::windows::WindowCheck;

#[cfg(test)]
mod tests;
mod wait;

pub use wait::{WaitPlan, Waited};

/// The settings the state machine needs, fixed for the run (the default: no deadline, no
/// delay, waits at a usage limit, one agent, the default decision settings, no answer wait).
#[derive(Debug, Clone, PartialEq, Default)]
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
    /// `NEEDS_ANSWERS=wait`: at `needs_answers`, wait this long (`ANSWER_TIMEOUT`) for an
    /// answer from outside instead of stopping (`None`: `NEEDS_ANSWERS=exit`, stop at once).
    pub answer_wait: Option<SignedDuration>,
    /// `REVIEW_AGENT`: a verified completion is reviewed before it stops or is delivered
    /// ([`crate::policy::review`]; `None`: no reviewer).
    pub review: Option<ReviewConfig>,
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
    /// `NEEDS_ANSWERS=wait`: the agent asked questions; until an answer
    /// ([`NoteKind::Answer`]) comes or `ANSWER_TIMEOUT` ends (then the run stops with
    /// `needs_answers`). Status `waiting`, `wait_reason: needs_answers`.
    UserAnswer,
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
    /// Have the independent reviewer look at the verified work of this completion
    /// (`REVIEW_AGENT`), then report [`Fact::Reviewed`].
    Review(ExitReason),
    /// Deliver the verified work of this completion (`DELIVER=branch|pr`: commit, push, the
    /// pull request, its checks), then report [`Fact::Delivered`].
    Deliver(ExitReason),
    /// End the run.
    Stop(ExitReason),
}

/// Delivery inside the loop (`DELIVER=branch|pr`): how many rounds of each kind go back to the
/// agent before the run stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliverRounds {
    /// Pushes refused by a pre-push hook (or the remote) fed back
    /// ([`crate::policy::deliver::MAX_PUSH_RETRIES`]).
    pub push: u32,
    /// Red CI rounds fed back (`MAX_CI_ROUNDS`).
    pub ci: u32,
    /// "Changes requested" review rounds fed back (`REVIEW_LOOP`; `MAX_CI_ROUNDS` as well).
    pub review: u32,
}

/// The kind of a delivery round that went back to the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    Push,
    Ci,
    Review,
}

impl Round {
    /// The note the agent's next context carries.
    #[must_use]
    pub fn note_kind(self) -> NoteKind {
        match self {
            Self::Push => NoteKind::PushRejected,
            Self::Ci => NoteKind::CiFailure,
            Self::Review => NoteKind::Review,
        }
    }
}

/// How a delivery ([`Step::Deliver`]) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// The delivery is over: the run stops with this reason (`delivered`, `ci_missing`,
    /// `ci_timeout`, `interrupted`, …).
    Final(ExitReason),
    /// Something for the agent to fix (a hook's output, failing checks, review requests):
    /// the next loop gets `text` while rounds of this kind are left; then the run stops with
    /// `otherwise`.
    Feedback {
        round: Round,
        text: String,
        otherwise: ExitReason,
    },
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

impl Observation {
    /// In a fleet: what the fleet-wide ledger said of the call this observation lets through
    /// ([`Observation::gates_open`]): a wait is the budget's; a stop (the fleet's budget is
    /// spent) is returned, for [`Fact::FleetLimit`].
    pub fn reserved(&mut self, verdict: FleetVerdict) -> Option<ExitReason> {
        match verdict {
            FleetVerdict::Go => None,
            FleetVerdict::Wait { until, reason } => {
                self.budget = BudgetCheck::Wait { until, reason };
                None
            }
            FleetVerdict::Stop(r) => Some(r),
        }
    }

    /// Whether the limits let a call through (the rolling-hour caps, the windows): a review
    /// round's look asks the fleet-wide ledger then.
    #[must_use]
    pub fn limits_open(&self) -> bool {
        matches!(self.budget, BudgetCheck::Allow) && matches!(self.window, WindowCheck::Allow)
    }

    /// Whether every gate of the project's own state lets a call through (files, plan,
    /// breaker, caps, windows): only then is the fleet-wide ledger asked for the call.
    #[must_use]
    pub fn gates_open(&self) -> bool {
        !self.missing_files
            && !self.plan_complete
            && !self.breaker_open
            && matches!(self.budget, BudgetCheck::Allow)
            && matches!(self.window, WindowCheck::Allow)
    }
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
    /// The delivery commit or push was refused (a hook's output, the remote's answer).
    PushRejected,
    /// A reviewer asked for changes on the pull request.
    Review,
    /// The independent reviewer's blockers (`REVIEW_AGENT`, [`crate::policy::review`]).
    Reviewer,
}

/// How a review round ([`Step::Review`]) ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Reviewed {
    /// The reviewer's verdict (a failed call is an unreadable one): an approval lets the
    /// completion go on; anything else sends the blockers back while rounds are left.
    Verdict(Review),
    /// A limit the call must wait for (the rolling-hour caps, a usage window): the round runs
    /// after the wait.
    Wait {
        until: Timestamp,
        reason: WaitReason,
    },
    /// The run stops before the round (`MAX_COST_USD`, `review_budget`, the fleet's budget, an
    /// interrupt).
    Stop(ExitReason),
}

impl Reviewed {
    /// A round's end with the reviewer's `verdict`: the run stops when the call was
    /// `interrupted`.
    #[must_use]
    pub fn of(verdict: Review, interrupted: bool) -> Self {
        if interrupted {
            Self::Stop(ExitReason::Interrupted)
        } else {
            Self::Verdict(verdict)
        }
    }

    /// A review call that hit its client's usage limit (`error`): no round, but a wait for
    /// the reset (as a worker's call would), or the stop `ON_USAGE_LIMIT=exit` asks for.
    #[must_use]
    pub fn at_usage_limit(
        error: Option<&crate::analysis::AgentError>,
        policy: UsageLimitPolicy,
        now: Timestamp,
    ) -> Option<Self> {
        let e = error.filter(|e| e.kind == crate::analysis::ErrorKind::UsageLimit)?;
        Some(if policy == UsageLimitPolicy::Exit {
            Self::Stop(ExitReason::UsageLimit)
        } else {
            Self::Wait {
                until: decide::usage_limit_until(e.reset_at, now),
                reason: WaitReason::UsageLimit,
            }
        })
    }
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
    /// The delivery of [`Step::Deliver`] ended.
    Delivered(Delivered),
    /// The review round of [`Step::Review`] ended.
    Reviewed(Reviewed),
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
    /// The verified completion of this reason is being reviewed.
    Reviewing(ExitReason),
    /// The verified completion of this reason is being delivered.
    Delivering(ExitReason),
    /// The run ends with this reason (an answer that did not come in time).
    Ended(ExitReason),
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
    /// `DELIVER=branch|pr`: the rounds allowed (`None`: a completion just stops).
    deliver: Option<DeliverRounds>,
    /// The delivery rounds fed back so far (push, CI, review).
    rounds: (u32, u32, u32),
    /// [`Fact::FleetLimit`]: the fleet's budget is spent.
    fleet_stop: Option<ExitReason>,
    /// Review rounds held so far.
    review_rounds: u32,
    /// The reviewer approved: later completions of the run (after delivery feedback) are not
    /// reviewed again.
    approved: bool,
    /// A review round waits for a limit: it runs when the wait ends.
    review_after_wait: Option<ExitReason>,
    /// What the review calls cost (USD; `REVIEW_MAX_SHARE`).
    review_cost: f64,
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
            deliver: None,
            rounds: (0, 0, 0),
            fleet_stop: None,
            review_rounds: 0,
            approved: false,
            review_after_wait: None,
            review_cost: 0.0,
        }
    }

    /// Review rounds held so far (the next is this + 1).
    #[must_use]
    pub fn review_rounds(&self) -> u32 {
        self.review_rounds
    }

    /// The review round due, and of how many (`REVIEW_MAX_ROUNDS`).
    #[must_use]
    pub fn review_round(&self) -> (u32, u32) {
        let max = self.cfg.review.unwrap_or_default().max_rounds;
        (self.review_rounds + 1, max)
    }

    /// A run that starts with the wait the last run was in ([`crate::policy::budget::resume_wait`]):
    /// no call before it ends (a limit wait, saved and shown again), or the stop it means at
    /// once (`ON_USAGE_LIMIT=exit`).
    #[must_use]
    pub fn resuming(mut self, resume: Resume) -> Self {
        self.phase = match resume {
            Resume::Call => return self,
            Resume::Wait(w) => Phase::Waiting {
                until: Some(w.until),
                reason: WaitFor::Limit(w.reason),
            },
            Resume::ExitUsageLimit => Phase::Ended(ExitReason::UsageLimit),
            Resume::ExitUsageWindow => Phase::Ended(ExitReason::UsageWindow),
        };
        self
    }

    /// A run that delivers its verified completion (`DELIVER=branch|pr`) with these rounds.
    #[must_use]
    pub fn delivering(mut self, rounds: DeliverRounds) -> Self {
        self.deliver = Some(rounds);
        self
    }

    /// The delivery rounds fed back to the agent so far: (push, CI, review).
    #[must_use]
    pub fn rounds(&self) -> (u32, u32, u32) {
        self.rounds
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

    /// After a loop's decision: whether the next call follows at once (a `continue` and no
    /// LOOP_DELAY), so that its "running" status and its save before the spawn carry this
    /// loop's results (every other way out saves at once).
    #[must_use]
    pub fn calls_at_once(&self) -> bool {
        let decision = self.decision.unwrap_or(Decision::Continue);
        decision == Decision::Continue && self.cfg.loop_delay.is_zero()
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
            Phase::Reviewing(r) => self.review_gates(r),
            Phase::Delivering(r) => Step::Deliver(r),
            Phase::Ended(r) => Step::Stop(r),
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
            Fact::Spent(usd) => {
                self.cost += usd;
                if matches!(self.phase, Phase::Reviewing(_)) {
                    self.review_cost += usd;
                }
            }
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
            Fact::WokeUp => self.woke_up(),
            Fact::Interrupted => self.interrupted = true,
            Fact::Control(c) => self.control(c, now),
            Fact::Delivered(d) => self.delivered(d),
            Fact::Reviewed(r) => self.reviewed(r),
            Fact::FleetLimit(r) => self.fleet_stop = Some(r),
        }
    }

    /// After a delivery: the end of the run, or the feedback for the next loop while rounds
    /// of its kind are left. The plan is still complete then: the next gates skip its claim
    /// (the agent is called first), and the agent's next verified "done" delivers again.
    fn delivered(&mut self, d: Delivered) {
        let (Phase::Delivering(reason), Some(max)) = (self.phase, self.deliver) else {
            return;
        };
        if reason == ExitReason::ReviewRejected {
            // Delivered as a draft: the run stops rejected, whatever the delivery handed back
            // (a refused push is in the delivery record, not another round of work).
            self.phase = Phase::Ended(match d {
                Delivered::Final(r) => r,
                Delivered::Feedback { .. } => reason,
            });
            return;
        }
        match d {
            Delivered::Final(r) => self.phase = Phase::Ended(r),
            Delivered::Feedback {
                round,
                text,
                otherwise,
            } => {
                let (used, limit) = match round {
                    Round::Push => (&mut self.rounds.0, max.push),
                    Round::Ci => (&mut self.rounds.1, max.ci),
                    Round::Review => (&mut self.rounds.2, max.review),
                };
                if *used < limit {
                    *used += 1;
                    self.notes.push(ContextNote {
                        kind: round.note_kind(),
                        text,
                    });
                    self.seen = None;
                    self.phase = Phase::Gates {
                        claim_rejected: true,
                    };
                } else {
                    self.phase = Phase::Ended(otherwise);
                }
            }
        }
    }

    /// After a review round: the completion goes on (approved), the blockers go to the next
    /// loop while rounds are left (the plan's claim skipped until the agent was called, as
    /// after delivery feedback), or the run stops.
    fn reviewed(&mut self, r: Reviewed) {
        let (Phase::Reviewing(reason), Some(cfg)) = (self.phase, self.cfg.review) else {
            return;
        };
        match r {
            Reviewed::Verdict(review) => {
                self.review_rounds += 1;
                match review::after_verdict(&cfg, self.review_rounds, &review) {
                    RoundEnd::Approved => {
                        self.approved = true;
                        self.phase = Phase::Decided(Decision::Stop(reason));
                    }
                    // The work is kept; with DELIVER it goes up (a draft pull request) first.
                    RoundEnd::Rejected if self.deliver.is_some() => {
                        self.phase = Phase::Delivering(ExitReason::ReviewRejected);
                    }
                    RoundEnd::Rejected => self.phase = Phase::Ended(ExitReason::ReviewRejected),
                    RoundEnd::BackToWorker => {
                        self.notes.push(ContextNote {
                            kind: NoteKind::Reviewer,
                            text: review::worker_note(&review, self.review_rounds, &cfg),
                        });
                        self.seen = None;
                        self.phase = Phase::Gates {
                            claim_rejected: true,
                        };
                    }
                }
            }
            Reviewed::Wait { until, reason: why } => {
                self.review_after_wait = Some(reason);
                self.phase = Phase::Waiting {
                    until: Some(until),
                    reason: WaitFor::Limit(why),
                };
            }
            Reviewed::Stop(stop) => self.phase = Phase::Ended(stop),
        }
    }

    /// A wait's time came: the gates again, except that an answer that did not come within
    /// `ANSWER_TIMEOUT` ends the run as `NEEDS_ANSWERS=exit` would have.
    fn woke_up(&mut self) {
        if let Phase::Waiting {
            reason: WaitFor::UserAnswer,
            ..
        } = self.phase
        {
            self.phase = Phase::Ended(ExitReason::NeedsAnswers);
        } else {
            self.back_to_gates();
        }
    }

    fn back_to_gates(&mut self) {
        self.seen = None;
        // A review round that waited for a limit runs now (the gates run before it).
        if let Some(r) = self.review_after_wait.take() {
            self.phase = Phase::Reviewing(r);
            return;
        }
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
        if let Some(step) = self.limit_gates(&o) {
            return step;
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

    /// The limits every call passes, the worker's and the reviewer's: the rolling-hour caps
    /// (the fleet's ledger's wait among them) and the usage windows.
    fn limit_gates(&mut self, o: &Observation) -> Option<Step> {
        if let BudgetCheck::Wait { until, reason } = o.budget {
            return Some(self.wait(until, WaitFor::Limit(reason)));
        }
        if let WindowCheck::Wait { until, .. } = o.window {
            if self.cfg.on_usage_limit == UsageLimitPolicy::Exit {
                return Some(Step::Stop(ExitReason::UsageWindow));
            }
            return Some(self.wait(until, WaitFor::Limit(WaitReason::UsageWindow)));
        }
        None
    }

    /// Before a review round of the completion `r`, in order: the look at the project and
    /// the limits ([`Step::Observe`], as before a worker's call), `MAX_COST_USD` and
    /// `REVIEW_MAX_SHARE` ([`review::before_round`]), the fleet's budget, then the same
    /// limits as a worker's call ([`Run::limit_gates`]: a wait, after which the round runs).
    fn review_gates(&mut self, r: ExitReason) -> Step {
        let Some(o) = self.seen.clone() else {
            return Step::Observe;
        };
        let Some(cfg) = self.cfg.review else {
            return Step::Review(r);
        };
        let spend = review::Spend {
            reviews: self.review_cost,
            run: self.cost,
            max_cost: self.cfg.decide.max_cost_usd,
        };
        if let Some(stop) = review::before_round(&cfg, spend, self.review_rounds) {
            self.phase = Phase::Ended(stop);
            return Step::Stop(stop);
        }
        if let Some(stop) = self.fleet_stop {
            self.phase = Phase::Ended(stop);
            return Step::Stop(stop);
        }
        if let Some(step) = self.limit_gates(&o) {
            if matches!(step, Step::Wait { .. }) {
                self.review_after_wait = Some(r);
            }
            return step;
        }
        Step::Review(r)
    }

    /// Whether the look `o` takes the call on the fleet-wide ledger (locked): once every
    /// gate hank can see here lets it through, so that the budget holds for every task
    /// together. A later gate (a pause, an exhausted agent chain) can leave the reservation
    /// unused: the fleet's cap then errs on the side of fewer calls, never more. A review
    /// round's look reserves its call the same way (its plan is complete).
    #[must_use]
    pub fn reserves(&self, o: &Observation) -> bool {
        let reviewing = matches!(self.phase, Phase::Reviewing(_));
        o.gates_open() || (reviewing && o.limits_open())
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
            // A verified completion is reviewed first (REVIEW_AGENT), once approved never
            // again in the run.
            Decision::Stop(r)
                if r.is_completion() && self.cfg.review.is_some() && !self.approved =>
            {
                // The review's call looks at the limits first, as the worker's does.
                self.seen = None;
                self.phase = Phase::Reviewing(r);
                self.review_gates(r)
            }
            // A verified completion is delivered first (DELIVER=branch|pr).
            Decision::Stop(r) if r.is_completion() && self.deliver.is_some() => {
                self.phase = Phase::Delivering(r);
                Step::Deliver(r)
            }
            Decision::Stop(ExitReason::NeedsAnswers) if self.cfg.answer_wait.is_some() => {
                self.await_answer(now)
            }
            Decision::Stop(r) => Step::Stop(r),
        }
    }

    /// `NEEDS_ANSWERS=wait` at `needs_answers`: an answer already taken goes to the next call
    /// at once (after the loop delay); otherwise the loop waits for one, at most
    /// `ANSWER_TIMEOUT`.
    fn await_answer(&mut self, now: Timestamp) -> Step {
        if self.notes.iter().any(|n| n.kind == NoteKind::Answer) {
            self.phase = Phase::Decided(Decision::Continue);
            return self.next(now);
        }
        let timeout = self.cfg.answer_wait.unwrap_or(SignedDuration::ZERO);
        self.wait(add_duration(now, timeout), WaitFor::UserAnswer)
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
            // Ends a limit wait or the loop delay, not a pause nor a wait for an answer.
            Control::RetryNow => {
                if let Phase::Waiting { reason, .. } = self.phase
                    && reason != WaitFor::Paused
                    && reason != WaitFor::UserAnswer
                {
                    self.back_to_gates();
                }
            }
            // An answer ends the wait for one (it goes into the next call's context).
            Control::Note(n) => {
                let answer = n.kind == NoteKind::Answer;
                self.notes.push(n);
                if answer
                    && let Phase::Waiting {
                        reason: WaitFor::UserAnswer,
                        ..
                    } = self.phase
                {
                    self.back_to_gates();
                }
            }
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
