//! The exit decision: after each loop, continue, retry, wait or stop.  **\[pure\]**
//!
//! [`before_call`] runs before each call, in this order: `plan_complete`, `max_loops`,
//! `cost_budget`.
//!
//! [`after_loop`] runs after each loop; the first rule that matches wins:
//! 1. unknown session (`No conversation found`) → [`Decision::RetryWithoutSession`];
//! 2. auth, billing or CLI usage error → stop `agent_fatal`; a spend cap (monthly spend limit,
//!    out of usage credits) → stop `spend_limit` (no wait: a window reset does not lift it);
//!    the agent crashed (exited non-zero without a model answer) the same way as in the loop
//!    before → stop `agent_crashed` ([`crate::policy::crash`]);
//! 3. this loop's EXIT_SIGNAL is true **and** completion indicators appeared in at least 2 of
//!    the last 5 loops (this one included) → stop `project_complete`. EXIT_SIGNAL false always
//!    vetoes, however many indicators there are. A claim that contradicts itself
//!    (EXIT_SIGNAL true with STATUS: BLOCKED or TESTS_STATUS: FAILING in the same block) is
//!    no claim: it counts neither as the signal nor as an indicator ([`contradictory`]);
//! 4. fix_plan has ≥ 1 checkbox and no open required item (items required when the run
//!    started included, [`crate::policy::fixplan::Required`]) → stop `plan_complete`;
//! 5. the last MAX_CONSECUTIVE_TEST_LOOPS loops were all test-only → stop `test_saturation`;
//!
//! Rules 3–5 are "done" claims: with VERIFY_COMMAND set the engine runs the check before it
//! accepts one ([`crate::policy::verify`]); a rejected claim is decided again with
//! [`AfterLoop::claims`] false, so the later rules (breaker, limits, waits) still apply.
//! 6. the breaker is OPEN → stop `circuit_open`;
//! 7. the agent only asked questions (a successful answer with questions, no file changed, no
//!    plan item checked) in the last [`MAX_QUESTION_LOOPS`] loops of this run → stop
//!    `needs_answers`: only the user can unblock it (in PROMPT.md or fix_plan.md);
//! 8. the last CB_PERMISSION_DENIAL_THRESHOLD loops all had (effective) denials → stop
//!    `permission_denied` (a first denial only warns);
//! 9. loops this run ≥ MAX_LOOPS (when set) → stop `max_loops`;
//! 10. cost this run ≥ MAX_COST_USD (when set) → stop `cost_budget`;
//! 11. usage limit → wait until its reset time + 60 s (unknown or past reset time: 60 min), or
//!     stop `usage_limit` when ON_USAGE_LIMIT=exit;
//! 12. a first crash (exited non-zero without an answer) → continue at once, no backoff;
//!     transient failure (rate_limit, overloaded, server, network, malformed, no_output, an
//!     `interrupted` answer, a timeout or a crash of another kind: killed, exit 0 with nothing) → wait
//!     [`backoff`]`(RETRY_BACKOFF_SECONDS, consecutive failures)`. A timeout or crash that
//!     changed files was productive: no backoff;
//! 13. otherwise → continue.
//!
//! When hank itself interrupted the call (Ctrl-C, SIGTERM) the engine stops with
//! `interrupted` whatever this decides; an `interrupted` answer hank did not cause is a failed
//! call (it backs off and counts toward the breaker).
//!
//! Denials: a denied Bash command that ALLOWED_TOOLS does allow, matched the way the client
//! matches (every part of a compound command, pipelines included, redirections dropped:
//! [`crate::policy::bash_rules`], the one model of it), is only a warning
//! ([`classify_denials`]): the client refused it for another reason than the rules.

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::analysis::{Analysis, Denial, ErrorKind, Outcome, TestsStatus, WorkStatus, WorkType};
use crate::exit::ExitReason;
use crate::policy::breaker::Breaker;
use crate::policy::budget::{WaitReason, add_duration};
use crate::policy::progress::Progress;

/// Loops looked at for the completion-indicator rule.
pub const COMPLETION_WINDOW: usize = 5;
/// Loops with completion indicators needed (within [`COMPLETION_WINDOW`]).
pub const COMPLETION_MIN: usize = 2;
/// Extra wait after a parsed usage-limit reset time.
pub const USAGE_RESET_MARGIN: SignedDuration = SignedDuration::from_secs(60);
/// Wait when the usage-limit reset time is unknown.
pub const USAGE_UNKNOWN_WAIT: SignedDuration = SignedDuration::from_mins(60);

/// When a call that hit its usage limit may be made again: the reset the output named plus
/// [`USAGE_RESET_MARGIN`], else [`USAGE_UNKNOWN_WAIT`] from `now`.
#[must_use]
pub fn usage_limit_until(reset: Option<Timestamp>, now: Timestamp) -> Timestamp {
    match reset.map(|r| add_duration(r, USAGE_RESET_MARGIN)) {
        Some(u) if u > now => u,
        _ => add_duration(now, USAGE_UNKNOWN_WAIT),
    }
}
/// Cap of the exponential backoff (unless the base itself is larger).
pub const BACKOFF_CAP: SignedDuration = SignedDuration::from_mins(15);
/// Consecutive loops (of one run) in which the agent only asked questions, after which the
/// run stops with `needs_answers` (the breaker holds its no-progress count on such loops, so
/// without this rule they could go on for ever).
pub const MAX_QUESTION_LOOPS: u32 = 5;

/// ON_USAGE_LIMIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageLimitPolicy {
    #[default]
    Wait,
    Exit,
}

/// The settings the decision needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DecideConfig {
    /// MAX_LOOPS (0 = unlimited).
    pub max_loops: u64,
    /// MAX_COST_USD (0 = unlimited).
    pub max_cost_usd: f64,
    /// CB_PERMISSION_DENIAL_THRESHOLD (0 = never stop on denials).
    pub permission_denial_threshold: u32,
    /// MAX_CONSECUTIVE_TEST_LOOPS (0 = off).
    pub max_consecutive_test_loops: u32,
    pub on_usage_limit: UsageLimitPolicy,
    /// RETRY_BACKOFF_SECONDS.
    pub retry_backoff_base_secs: u64,
    /// RETRY_BACKOFF_MAX, in seconds.
    pub retry_backoff_max_secs: u64,
    /// ALLOWED_TOOLS entries (`Write`, `Bash(git add *)`, …).
    pub allowed_tools: Vec<String>,
}

impl Default for DecideConfig {
    fn default() -> Self {
        Self {
            max_loops: 0,
            max_cost_usd: 0.0,
            permission_denial_threshold: 2,
            max_consecutive_test_loops: 3,
            on_usage_limit: UsageLimitPolicy::Wait,
            retry_backoff_base_secs: 30,
            retry_backoff_max_secs: 900,
            allowed_tools: Vec::new(),
        }
    }
}

/// What the decision remembers about one loop (persisted in the signal history).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoopRecord {
    pub number: u64,
    pub at: Timestamp,
    pub outcome: Outcome,
    pub error_kind: Option<ErrorKind>,
    pub exit_signal: bool,
    pub completion_indicator: bool,
    pub test_only: bool,
    /// Effective denials (after the compound-command rule).
    pub denied: Vec<Denial>,
    /// Denied, but the base command is allowed: a warning only.
    pub denial_warnings: Vec<Denial>,
    pub questions: bool,
    /// EXIT_SIGNAL true in a block that also says BLOCKED or FAILING (not a claim).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub contradiction: bool,
    pub files_changed: u32,
    /// fix_plan items newly checked in the loop.
    pub plan_items_checked: u32,
    pub cost_usd: f64,
    /// `cost_usd` is hank's estimate (never the basis of another estimate).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
    pub output_len: u64,
    /// The agent crashed (`agent_crashed`: exited non-zero without a model answer): how it
    /// ended and the line that says what went wrong ([`crate::policy::crash::record`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash: Option<String>,
}

impl LoopRecord {
    /// The agent answered with questions and did nothing else: no file changed, no plan item
    /// checked.
    #[must_use]
    pub fn only_asked(&self) -> bool {
        self.questions
            && self.outcome == Outcome::Success
            && self.files_changed == 0
            && self.plan_items_checked == 0
    }
}

/// Builds the record of one loop.
#[must_use]
pub fn record_loop(
    number: u64,
    now: Timestamp,
    analysis: &Analysis,
    progress: &Progress,
    cfg: &DecideConfig,
) -> LoopRecord {
    let testing = analysis.testing_only
        || analysis
            .status
            .as_ref()
            .is_some_and(|s| s.work_type == Some(WorkType::Testing));
    // A loop that ticks a plan item or changes a file the plan names did the plan's work
    // (a plan of test work included): not saturation.
    let test_only = testing
        && analysis.outcome == Outcome::Success
        && analysis.error.is_none()
        && progress.implementation_files_changed == 0
        && progress.plan_items_checked == 0
        && progress.plan_files_changed == 0;
    let (denied, denial_warnings) =
        classify_denials(&analysis.permission_denials, &cfg.allowed_tools);
    let contradiction = contradictory(analysis);
    LoopRecord {
        number,
        at: now,
        outcome: analysis.outcome,
        error_kind: analysis.error_kind(),
        exit_signal: analysis.exit_signal() && !contradiction,
        completion_indicator: (!analysis.completion_indicators.is_empty()
            || analysis.exit_signal())
            && !contradiction,
        contradiction,
        test_only,
        denied,
        denial_warnings,
        questions: !analysis.questions.is_empty(),
        files_changed: progress.files_changed,
        plan_items_checked: progress.plan_items_checked,
        cost_usd: if analysis.cost_usd.is_finite() {
            analysis.cost_usd
        } else {
            0.0
        },
        cost_estimated: analysis.cost_estimated,
        output_len: analysis.output_len,
        crash: analysis.crash.as_ref().map(crate::policy::crash::record),
    }
}

/// Splits denials into (real denials, warnings). A denied Bash command that the allowed tools
/// do allow, by the client's own matching ([`crate::policy::bash_rules::allows`]), is a
/// warning (see the module docs).
#[must_use]
pub fn classify_denials(
    denials: &[Denial],
    allowed_tools: &[String],
) -> (Vec<Denial>, Vec<Denial>) {
    denials.iter().cloned().partition(|d| {
        let warning = d.tool == "Bash"
            && d.command
                .as_deref()
                .is_some_and(|c| crate::policy::bash_rules::allows(allowed_tools, c));
        !warning
    })
}

/// An EXIT_SIGNAL true that the same status block contradicts (STATUS: BLOCKED or
/// TESTS_STATUS: FAILING): not a completion claim; the next context asks the agent to resolve it.
#[must_use]
pub fn contradictory(a: &Analysis) -> bool {
    a.exit_signal()
        && a.status.as_ref().is_some_and(|s| {
            s.status == Some(WorkStatus::Blocked) || s.tests_status == Some(TestsStatus::Failing)
        })
}

/// Exit checks before calling the agent: `plan_complete` (the plan is complete, see
/// [`crate::policy::fixplan::Required`]), `max_loops`, `cost_budget`.
#[must_use]
pub fn before_call(
    plan_complete: bool,
    loops_this_run: u64,
    cost_this_run: f64,
    cfg: &DecideConfig,
) -> Option<ExitReason> {
    if plan_complete {
        Some(ExitReason::PlanComplete)
    } else if cfg.max_loops > 0 && loops_this_run >= cfg.max_loops {
        Some(ExitReason::MaxLoops)
    } else if cost_reached(cost_this_run, cfg) {
        Some(ExitReason::CostBudget)
    } else {
        None
    }
}

fn cost_reached(cost: f64, cfg: &DecideConfig) -> bool {
    cfg.max_cost_usd.is_finite() && cfg.max_cost_usd > 0.0 && cost >= cfg.max_cost_usd
}

/// Everything [`after_loop`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct AfterLoop<'a> {
    pub analysis: &'a Analysis,
    /// Loop records, oldest first, this loop last.
    pub history: &'a [LoopRecord],
    pub breaker: &'a Breaker,
    /// The plan is complete (items required at the start of the run included).
    pub plan_complete: bool,
    /// Whether "done" claims (rules 3–5) may stop the run: false after the check rejected
    /// this loop's claim.
    pub claims: bool,
    pub loops_this_run: u64,
    pub cost_this_run: f64,
    /// Consecutive failed calls including this one.
    pub consecutive_failures: u32,
    pub now: Timestamp,
    pub cfg: &'a DecideConfig,
}

/// What to do after a loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Continue,
    /// The session id is unknown to the CLI: drop it and call again at once.
    RetryWithoutSession,
    Wait {
        until: Timestamp,
        reason: WaitReason,
    },
    Stop(ExitReason),
}

/// The last `n` records, or `None` if there are fewer than `n` (or `n` is 0).
fn last_n(history: &[LoopRecord], n: u32) -> Option<&[LoopRecord]> {
    let n = usize::try_from(n).ok()?;
    if n == 0 || history.len() < n {
        return None;
    }
    history.get(history.len() - n..)
}

/// The decision after a loop (rules and order in the module docs).
#[must_use]
pub fn after_loop(input: &AfterLoop<'_>) -> Decision {
    let a = input.analysis;
    let cfg = input.cfg;
    let kind = a.error_kind();

    if a.unknown_session {
        return Decision::RetryWithoutSession;
    }
    if matches!(
        kind,
        Some(ErrorKind::Auth | ErrorKind::Billing | ErrorKind::CliUsage)
    ) {
        return Decision::Stop(ExitReason::AgentFatal);
    }
    if kind == Some(ErrorKind::SpendLimit) {
        return Decision::Stop(ExitReason::SpendLimit);
    }
    if a.crash.is_some() && crate::policy::crash::same_twice(input.history) {
        return Decision::Stop(ExitReason::AgentCrashed);
    }
    if input.claims && a.exit_signal() && !contradictory(a) {
        let start = input.history.len().saturating_sub(COMPLETION_WINDOW);
        let with_indicators = input
            .history
            .get(start..)
            .unwrap_or(&[])
            .iter()
            .filter(|r| r.completion_indicator)
            .count();
        if with_indicators >= COMPLETION_MIN {
            return Decision::Stop(ExitReason::ProjectComplete);
        }
    }
    if input.claims && input.plan_complete {
        return Decision::Stop(ExitReason::PlanComplete);
    }
    if input.claims
        && last_n(input.history, cfg.max_consecutive_test_loops)
            .is_some_and(|recs| recs.iter().all(|r| r.test_only))
    {
        return Decision::Stop(ExitReason::TestSaturation);
    }
    if input.breaker.is_open() {
        return Decision::Stop(ExitReason::CircuitOpen);
    }
    if input.loops_this_run >= u64::from(MAX_QUESTION_LOOPS)
        && last_n(input.history, MAX_QUESTION_LOOPS)
            .is_some_and(|recs| recs.iter().all(LoopRecord::only_asked))
    {
        return Decision::Stop(ExitReason::NeedsAnswers);
    }
    if last_n(input.history, cfg.permission_denial_threshold)
        .is_some_and(|recs| recs.iter().all(|r| !r.denied.is_empty()))
    {
        return Decision::Stop(ExitReason::PermissionDenied);
    }
    if cfg.max_loops > 0 && input.loops_this_run >= cfg.max_loops {
        return Decision::Stop(ExitReason::MaxLoops);
    }
    if cost_reached(input.cost_this_run, cfg) {
        return Decision::Stop(ExitReason::CostBudget);
    }
    if kind == Some(ErrorKind::UsageLimit) {
        if cfg.on_usage_limit == UsageLimitPolicy::Exit {
            return Decision::Stop(ExitReason::UsageLimit);
        }
        return Decision::Wait {
            until: usage_limit_until(a.error.as_ref().and_then(|e| e.reset_at), input.now),
            reason: WaitReason::UsageLimit,
        };
    }
    if a.crash.is_some() {
        // A crash is retried at once: waiting does not mend it (twice: stopped above).
        return Decision::Continue;
    }
    let changed_files = input.history.last().is_some_and(|r| r.files_changed > 0);
    let transient = match (a.outcome, kind) {
        (Outcome::Timeout | Outcome::Crashed, _) => !changed_files,
        (
            _,
            Some(
                ErrorKind::RateLimit
                | ErrorKind::Overloaded
                | ErrorKind::Server
                | ErrorKind::Network
                | ErrorKind::Malformed
                | ErrorKind::NoOutput
                | ErrorKind::Interrupted,
            ),
        ) => true,
        _ => false,
    };
    if transient {
        let wait = backoff_capped(
            cfg.retry_backoff_base_secs,
            input.consecutive_failures.max(1),
            cfg.retry_backoff_max_secs,
        );
        return Decision::Wait {
            until: add_duration(input.now, wait),
            reason: WaitReason::Backoff,
        };
    }
    Decision::Continue
}

/// The decision for a loop the breaker does not count: a startup hang retried at once
/// (`free_retry`, [`crate::policy::startup`]) continues at once, without backoff; an error
/// result whose loop did the work (`productive_error`, [`Progress::did_the_work`]) continues
/// instead of backing off. A stop stands either way.
#[must_use]
pub fn uncounted(decision: Decision, free_retry: bool, productive_error: bool) -> Decision {
    match decision {
        Decision::Stop(_) => decision,
        _ if free_retry => Decision::Continue,
        Decision::Wait {
            reason: WaitReason::Backoff,
            ..
        } if productive_error => Decision::Continue,
        d => d,
    }
}

/// How far ahead a login expiry is worth a warning: an overnight run should not die on auth.
pub const CREDENTIAL_WARNING_WINDOW: SignedDuration = SignedDuration::from_hours(12);

/// Whether the client's login (`credential_expires_at` in its answer) expires within
/// [`CREDENTIAL_WARNING_WINDOW`] of `now` and has not been warned about yet (`warned` is the
/// expiry time last warned about). Returns how long is left when a warning is due.
#[must_use]
pub fn credential_expiry_due(
    expires_at: Option<Timestamp>,
    warned: Option<Timestamp>,
    now: Timestamp,
) -> Option<SignedDuration> {
    let at = expires_at?;
    if warned == Some(at) {
        return None;
    }
    let left = at.duration_since(now);
    (left <= CREDENTIAL_WARNING_WINDOW).then_some(left)
}

/// Backoff after `consecutive_failures` failed calls: `base · 2^(n−1)`, capped at 15 minutes
/// (or at `base` when `base` is larger); zero for `n == 0`.
#[must_use]
pub fn backoff(base_secs: u64, consecutive_failures: u32) -> SignedDuration {
    backoff_capped(
        base_secs,
        consecutive_failures,
        u64::try_from(BACKOFF_CAP.as_secs()).unwrap_or(u64::MAX),
    )
}

/// [`backoff`] with the cap RETRY_BACKOFF_MAX (`cap_secs`; `base` when `base` is larger).
#[must_use]
pub fn backoff_capped(base_secs: u64, consecutive_failures: u32, cap_secs: u64) -> SignedDuration {
    if consecutive_failures == 0 {
        return SignedDuration::ZERO;
    }
    let base = i64::try_from(base_secs).unwrap_or(i64::MAX);
    let cap = i64::try_from(cap_secs).unwrap_or(i64::MAX).max(base);
    let shift = (consecutive_failures - 1).min(62);
    let secs = base.checked_mul(1i64 << shift).map_or(cap, |s| s.min(cap));
    SignedDuration::from_secs(secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{AgentError, StatusBlock, WorkStatus};
    use crate::policy::breaker::CircuitState;
    use crate::policy::fixplan;
    use proptest::prelude::*;

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn err(kind: ErrorKind) -> Analysis {
        Analysis {
            outcome: Outcome::AgentError,
            error: Some(AgentError {
                kind,
                message: "m".into(),
                api_status: None,
                reset_at: None,
                window: None,
            }),
            ..Analysis::default()
        }
    }

    fn status(status: WorkStatus, exit: bool) -> Analysis {
        let mut indicators = Vec::new();
        if status == WorkStatus::Complete {
            indicators.push("status_complete".to_string());
        }
        if exit {
            indicators.push("exit_signal".to_string());
        }
        Analysis {
            status: Some(StatusBlock {
                status: Some(status),
                exit_signal: Some(exit),
                ..StatusBlock::default()
            }),
            completion_indicators: indicators,
            ..Analysis::default()
        }
    }

    fn bash(cmd: &str) -> Denial {
        Denial {
            tool: "Bash".into(),
            command: Some(cmd.into()),
        }
    }

    fn rec(f: impl FnOnce(&mut LoopRecord)) -> LoopRecord {
        let mut r = LoopRecord::default();
        f(&mut r);
        r
    }

    struct Case {
        name: &'static str,
        analysis: Analysis,
        history: Vec<LoopRecord>,
        breaker: Breaker,
        plan: &'static str,
        loops: u64,
        cost: f64,
        failures: u32,
        cfg: DecideConfig,
        expected: Decision,
    }

    fn case(name: &'static str, analysis: Analysis, expected: Decision) -> Case {
        Case {
            name,
            analysis,
            history: Vec::new(),
            breaker: Breaker::default(),
            plan: "- [ ] open item\n",
            loops: 1,
            cost: 0.0,
            failures: 0,
            cfg: DecideConfig::default(),
            expected,
        }
    }

    /// An answer whose one denial is the Bash command `cmd`.
    fn denying(cmd: &str) -> Analysis {
        Analysis {
            permission_denials: vec![bash(cmd)],
            ..Analysis::default()
        }
    }

    /// The default configuration with `tools` as ALLOWED_TOOLS.
    fn allowing(tools: &[&str]) -> DecideConfig {
        DecideConfig {
            allowed_tools: tools.iter().map(|t| (*t).to_string()).collect(),
            ..DecideConfig::default()
        }
    }

    /// In loop `loops` of the run, after `earlier`, an answer that only asks a question.
    fn only_asks(
        name: &'static str,
        loops: u64,
        earlier: Vec<LoopRecord>,
        expected: Decision,
    ) -> Case {
        let asking = Analysis {
            questions: vec!["Should I use A or B?".into()],
            ..Analysis::default()
        };
        Case {
            loops,
            ..with_history(case(name, asking, expected), earlier)
        }
    }

    /// Five loops of questions but for the second, changed by `f`.
    fn asked_but(f: impl FnOnce(&mut LoopRecord)) -> Vec<LoopRecord> {
        let asked = rec(|r| r.questions = true);
        let mut other = asked.clone();
        f(&mut other);
        vec![asked.clone(), other, asked.clone(), asked.clone(), asked]
    }

    /// An answer with an error of `kind` stops the run as fatal.
    fn fatal(name: &'static str, kind: ErrorKind) -> Case {
        case(name, err(kind), Decision::Stop(ExitReason::AgentFatal))
    }

    /// After `failures` failed calls in a row, `analysis` backs off until `ts(secs)`.
    fn backs_off(name: &'static str, analysis: Analysis, failures: u32, secs: i64) -> Case {
        let wait = Decision::Wait {
            until: ts(secs),
            reason: WaitReason::Backoff,
        };
        Case {
            failures,
            ..case(name, analysis, wait)
        }
    }

    /// The records of the history for `analysis` + earlier records (this loop appended).
    fn with_history(mut c: Case, earlier: Vec<LoopRecord>) -> Case {
        let this = record_loop(9, ts(0), &c.analysis, &Progress::default(), &c.cfg);
        c.history = earlier;
        c.history.push(this);
        c
    }

    fn decide(c: &Case) -> Decision {
        let plan = fixplan::parse(c.plan, &fixplan::default_optional_sections());
        after_loop(&AfterLoop {
            analysis: &c.analysis,
            history: &c.history,
            breaker: &c.breaker,
            plan_complete: plan.is_complete(),
            claims: true,
            loops_this_run: c.loops,
            cost_this_run: c.cost,
            consecutive_failures: c.failures,
            now: ts(0),
            cfg: &c.cfg,
        })
    }

    #[test]
    fn uncounted_loops_continue_unless_stopped() {
        let backoff = Decision::Wait {
            until: ts(30),
            reason: WaitReason::Backoff,
        };
        let limit = Decision::Wait {
            until: ts(3600),
            reason: WaitReason::UsageLimit,
        };
        let stop = Decision::Stop(ExitReason::MaxLoops);
        // (decision, free retry, productive error) → decision
        let table = [
            (backoff, false, false, backoff),
            (backoff, true, false, Decision::Continue),
            (backoff, false, true, Decision::Continue),
            (limit, false, true, limit),
            (limit, true, false, Decision::Continue),
            (stop, true, false, stop),
            (stop, false, true, stop),
            (Decision::Continue, false, true, Decision::Continue),
            (
                Decision::RetryWithoutSession,
                false,
                true,
                Decision::RetryWithoutSession,
            ),
        ];
        for (d, free, productive, want) in table {
            assert_eq!(
                uncounted(d, free, productive),
                want,
                "{d:?} {free} {productive}"
            );
        }
    }

    #[test]
    fn after_loop_table() {
        use Decision::{Continue, Stop};
        let indicator = rec(|r| r.completion_indicator = true);
        let denied = rec(|r| r.denied = vec![bash("npm install")]);
        let testing = rec(|r| r.test_only = true);
        let open = Breaker {
            state: CircuitState::Open,
            ..Breaker::default()
        };
        let mut usage_known = err(ErrorKind::UsageLimit);
        if let Some(e) = usage_known.error.as_mut() {
            e.reset_at = Some(ts(7200));
        }
        let mut usage_past = err(ErrorKind::UsageLimit);
        if let Some(e) = usage_past.error.as_mut() {
            e.reset_at = Some(ts(-7200));
        }
        let mut unknown_session = err(ErrorKind::CliUsage);
        unknown_session.unknown_session = true;
        let testing_analysis = Analysis {
            testing_only: true,
            ..Analysis::default()
        };
        let timeout = Analysis {
            outcome: Outcome::Timeout,
            ..Analysis::default()
        };
        let crashed = Analysis {
            outcome: Outcome::Crashed,
            ..Analysis::default()
        };
        let asked = rec(|r| r.questions = true);
        let agent_crash = |line: &str| Analysis {
            outcome: Outcome::Crashed,
            crash: Some(crate::analysis::Crash {
                exit_code: 1,
                line: line.into(),
                tail: vec![line.into()],
            }),
            ..err(ErrorKind::NoOutput)
        };
        let refused = "PermissionError: [Errno 13] Permission denied: '/x'";
        let crash_before =
            |line: &str| rec(|r| r.crash = Some(format!("exited with code 1: {line}")));

        let cases = vec![
            with_history(
                case(
                    "a first crash is retried at once, no backoff",
                    agent_crash(refused),
                    Continue,
                ),
                vec![],
            ),
            with_history(
                Case {
                    failures: 1,
                    ..case(
                        "the same crash twice stops at once",
                        agent_crash(refused),
                        Stop(ExitReason::AgentCrashed),
                    )
                },
                vec![crash_before(refused)],
            ),
            with_history(
                Case {
                    breaker: Breaker {
                        state: CircuitState::Open,
                        ..Breaker::default()
                    },
                    ..case(
                        "the same crash twice is named before an open circuit",
                        agent_crash(refused),
                        Stop(ExitReason::AgentCrashed),
                    )
                },
                vec![crash_before(refused)],
            ),
            with_history(
                case(
                    "another crash before is retried at once",
                    agent_crash(refused),
                    Continue,
                ),
                vec![crash_before("KeyError: 'x'")],
            ),
            case("plain success continues", Analysis::default(), Continue),
            case(
                "unknown session retries",
                unknown_session,
                Decision::RetryWithoutSession,
            ),
            fatal("auth is fatal", ErrorKind::Auth),
            fatal("billing is fatal", ErrorKind::Billing),
            fatal("cli usage is fatal", ErrorKind::CliUsage),
            case(
                "spend limit stops at once, no wait",
                err(ErrorKind::SpendLimit),
                Stop(ExitReason::SpendLimit),
            ),
            Case {
                failures: 3,
                ..case(
                    "spend limit stops even after failures (not transient)",
                    err(ErrorKind::SpendLimit),
                    Stop(ExitReason::SpendLimit),
                )
            },
            with_history(
                case(
                    "exit signal + 2 indicators",
                    status(WorkStatus::Complete, true),
                    Stop(ExitReason::ProjectComplete),
                ),
                vec![indicator.clone()],
            ),
            with_history(
                case(
                    "indicator 4 loops back counts",
                    status(WorkStatus::InProgress, true),
                    Stop(ExitReason::ProjectComplete),
                ),
                vec![
                    indicator.clone(),
                    LoopRecord::default(),
                    LoopRecord::default(),
                    LoopRecord::default(),
                ],
            ),
            with_history(
                case(
                    "indicator 5 loops back is too old",
                    status(WorkStatus::InProgress, true),
                    Continue,
                ),
                vec![
                    indicator.clone(),
                    LoopRecord::default(),
                    LoopRecord::default(),
                    LoopRecord::default(),
                    LoopRecord::default(),
                ],
            ),
            with_history(
                case(
                    "trap: COMPLETE with EXIT_SIGNAL false keeps going",
                    status(WorkStatus::Complete, false),
                    Continue,
                ),
                vec![
                    indicator.clone(),
                    indicator.clone(),
                    indicator.clone(),
                    indicator.clone(),
                ],
            ),
            with_history(
                case(
                    "trap: single EXIT_SIGNAL true keeps going",
                    status(WorkStatus::InProgress, true),
                    Continue,
                ),
                vec![LoopRecord::default(); 4],
            ),
            Case {
                plan: "- [x] a\n## Optional\n- [ ] b\n",
                ..case(
                    "plan complete",
                    Analysis::default(),
                    Stop(ExitReason::PlanComplete),
                )
            },
            Case {
                plan: "no checkbox\n",
                ..case("empty plan is not complete", Analysis::default(), Continue)
            },
            with_history(
                case(
                    "test saturation",
                    testing_analysis.clone(),
                    Stop(ExitReason::TestSaturation),
                ),
                vec![testing.clone(), testing.clone()],
            ),
            with_history(
                case(
                    "two test loops are not saturation",
                    testing_analysis.clone(),
                    Continue,
                ),
                vec![LoopRecord::default(), testing.clone()],
            ),
            Case {
                breaker: open,
                ..case(
                    "circuit open",
                    Analysis::default(),
                    Stop(ExitReason::CircuitOpen),
                )
            },
            with_history(
                case(
                    "trap: first denial only warns",
                    denying("npm install"),
                    Continue,
                ),
                vec![LoopRecord::default()],
            ),
            with_history(
                case(
                    "second consecutive denial stops",
                    denying("npm install"),
                    Stop(ExitReason::PermissionDenied),
                ),
                vec![denied.clone()],
            ),
            with_history(
                Case {
                    cfg: allowing(&["Bash(npm *)", "Bash(tail *)"]),
                    ..case(
                        "trap: a compound command the rules allow is a warning",
                        denying("npm test 2>&1 | tail -5"),
                        Continue,
                    )
                },
                vec![denied.clone()],
            ),
            with_history(
                Case {
                    cfg: allowing(&["Bash(npm *)"]),
                    ..case(
                        "a pipeline into a command the rules do not allow is a real denial",
                        denying("npm test 2>&1 | tail -5"),
                        Stop(ExitReason::PermissionDenied),
                    )
                },
                vec![denied.clone()],
            ),
            Case {
                loops: 5,
                cfg: DecideConfig {
                    max_loops: 5,
                    ..DecideConfig::default()
                },
                ..case("max loops", Analysis::default(), Stop(ExitReason::MaxLoops))
            },
            Case {
                loops: 4,
                cfg: DecideConfig {
                    max_loops: 5,
                    ..DecideConfig::default()
                },
                ..case("below max loops", Analysis::default(), Continue)
            },
            Case {
                cost: 2.5,
                cfg: DecideConfig {
                    max_cost_usd: 2.5,
                    ..DecideConfig::default()
                },
                ..case(
                    "cost budget",
                    Analysis::default(),
                    Stop(ExitReason::CostBudget),
                )
            },
            Case {
                cost: f64::NAN,
                cfg: DecideConfig {
                    max_cost_usd: 2.5,
                    ..DecideConfig::default()
                },
                ..case("NaN cost does not stop", Analysis::default(), Continue)
            },
            case(
                "usage limit waits until reset + 60 s",
                usage_known,
                Decision::Wait {
                    until: ts(7260),
                    reason: WaitReason::UsageLimit,
                },
            ),
            case(
                "usage limit, unknown reset: 60 min",
                err(ErrorKind::UsageLimit),
                Decision::Wait {
                    until: ts(3600),
                    reason: WaitReason::UsageLimit,
                },
            ),
            case(
                "usage limit, reset in the past: 60 min",
                usage_past,
                Decision::Wait {
                    until: ts(3600),
                    reason: WaitReason::UsageLimit,
                },
            ),
            Case {
                cfg: DecideConfig {
                    on_usage_limit: UsageLimitPolicy::Exit,
                    ..DecideConfig::default()
                },
                ..case(
                    "usage limit, policy exit",
                    err(ErrorKind::UsageLimit),
                    Stop(ExitReason::UsageLimit),
                )
            },
            backs_off("overloaded backs off", err(ErrorKind::Overloaded), 1, 30),
            backs_off(
                "rate limit backs off more",
                err(ErrorKind::RateLimit),
                3,
                120,
            ),
            backs_off(
                "server backs off at least base",
                err(ErrorKind::Server),
                0,
                30,
            ),
            backs_off("network", err(ErrorKind::Network), 2, 60),
            backs_off("malformed", err(ErrorKind::Malformed), 1, 30),
            backs_off("no output", err(ErrorKind::NoOutput), 1, 30),
            backs_off("crash", crashed, 1, 30),
            with_history(backs_off("timeout", timeout.clone(), 1, 30), vec![]),
            Case {
                history: vec![rec(|r| r.files_changed = 2)],
                ..case("productive timeout continues", timeout, Continue)
            },
            case("max turns continues", err(ErrorKind::MaxTurns), Continue),
            backs_off(
                "an interrupted answer hank did not cause backs off",
                err(ErrorKind::Interrupted),
                1,
                30,
            ),
            only_asks(
                "5 loops of questions only stop: needs_answers",
                5,
                vec![asked.clone(); 4],
                Stop(ExitReason::NeedsAnswers),
            ),
            only_asks(
                "questions from an earlier run do not count",
                4,
                vec![asked.clone(); 6],
                Continue,
            ),
            only_asks(
                "4 loops of questions continue",
                5,
                vec![asked.clone(); 3],
                Continue,
            ),
            only_asks(
                "a loop that checked a plan item breaks the run of questions",
                9,
                asked_but(|r| r.plan_items_checked = 1),
                Continue,
            ),
            only_asks(
                "a failed call breaks the run of questions",
                9,
                asked_but(|r| r.outcome = Outcome::AgentError),
                Continue,
            ),
        ];
        for c in &cases {
            assert_eq!(decide(c), c.expected, "{}", c.name);
        }
        // Every exit reason the decision can give is covered above.
        let covered: Vec<ExitReason> = cases
            .iter()
            .filter_map(|c| match c.expected {
                Decision::Stop(r) => Some(r),
                _ => None,
            })
            .collect();
        // The engine gives the others: integrity_failure (files gone), interrupted (signals),
        // verification_failed (the check rejected claims, crate::policy::verify), max_runtime
        // (the run's clock), usage_window (before a call, crate::policy::windows); the delivery
        // reasons come from crate::policy::deliver.
        for r in ExitReason::ALL {
            if !matches!(
                r,
                ExitReason::IntegrityFailure
                    | ExitReason::Interrupted
                    | ExitReason::VerificationFailed
                    | ExitReason::MaxRuntime
                    | ExitReason::UsageWindow
                    | ExitReason::Delivered
                    | ExitReason::CiFailed
                    | ExitReason::CiMissing
                    | ExitReason::CiTimeout
                    | ExitReason::PushRejected
                    | ExitReason::ForgeFailed
                    | ExitReason::SecretsInCommits
                    | ExitReason::CheckCouldNotRun
                    | ExitReason::ReviewRejected
                    | ExitReason::ReviewBudget
            ) {
                assert!(covered.contains(&r), "{r} not covered");
            }
        }
    }

    /// EXIT_SIGNAL true with BLOCKED or FAILING in the same block is no claim: neither the
    /// signal nor an indicator, in this loop or in the history.
    #[test]
    fn contradicting_claims_are_not_completion() {
        let indicator = rec(|r| r.completion_indicator = true);
        let cfg = DecideConfig::default();
        let blocked = status(WorkStatus::Blocked, true);
        let mut failing = status(WorkStatus::Complete, true);
        if let Some(b) = failing.status.as_mut() {
            b.tests_status = Some(TestsStatus::Failing);
        }
        let mut passing = status(WorkStatus::Complete, true);
        if let Some(b) = passing.status.as_mut() {
            b.tests_status = Some(TestsStatus::Passing);
        }
        let table = [
            (&blocked, true, Decision::Continue),
            (&failing, true, Decision::Continue),
            (&passing, false, Decision::Stop(ExitReason::ProjectComplete)),
        ];
        for (a, contradiction, want) in table {
            assert_eq!(contradictory(a), contradiction);
            let record = record_loop(2, ts(0), a, &Progress::default(), &cfg);
            assert_eq!(record.contradiction, contradiction);
            assert_eq!(record.exit_signal, !contradiction);
            assert_eq!(record.completion_indicator, !contradiction);
            let c = with_history(
                case("contradiction", a.clone(), want),
                vec![indicator.clone()],
            );
            assert_eq!(decide(&c), want, "{:?}", a.status);
        }
        // Two contradicting loops in a row never add up to a claim either.
        let earlier = record_loop(1, ts(0), &blocked, &Progress::default(), &cfg);
        let c = with_history(
            case("two contradictions", failing.clone(), Decision::Continue),
            vec![earlier],
        );
        assert_eq!(decide(&c), Decision::Continue);
    }

    /// After the check rejected a claim, the loop is decided again without claims: the later
    /// rules (breaker, limits, waits) still apply.
    #[test]
    fn a_rejected_claim_leaves_the_other_rules() {
        let indicator = rec(|r| r.completion_indicator = true);
        let plan = fixplan::parse("- [x] a\n", &fixplan::default_optional_sections());
        let testing = rec(|r| r.test_only = true);
        let cfg = DecideConfig {
            max_loops: 4,
            ..DecideConfig::default()
        };
        let done = status(WorkStatus::Complete, true);
        let mut history = vec![indicator.clone(), testing.clone(), testing.clone()];
        history.push(record_loop(4, ts(0), &done, &Progress::default(), &cfg));
        let closed = Breaker::default();
        let input = |claims: bool, loops: u64| AfterLoop {
            analysis: &done,
            history: &history,
            breaker: &closed,
            plan_complete: plan.is_complete(),
            claims,
            loops_this_run: loops,
            cost_this_run: 0.0,
            consecutive_failures: 0,
            now: ts(0),
            cfg: &cfg,
        };
        assert_eq!(
            after_loop(&input(true, 1)),
            Decision::Stop(ExitReason::ProjectComplete)
        );
        assert_eq!(after_loop(&input(false, 1)), Decision::Continue);
        assert_eq!(
            after_loop(&input(false, 4)),
            Decision::Stop(ExitReason::MaxLoops)
        );
    }

    #[test]
    fn rule_order() {
        // A fatal error beats everything; completion beats an open breaker and limits.
        let open = Breaker {
            state: CircuitState::Open,
            ..Breaker::default()
        };
        let cfg = DecideConfig {
            max_loops: 1,
            max_cost_usd: 0.1,
            ..DecideConfig::default()
        };
        let mut c = case(
            "fatal first",
            err(ErrorKind::Auth),
            Decision::Stop(ExitReason::AgentFatal),
        );
        c.breaker = open.clone();
        c.cfg = cfg.clone();
        c.plan = "- [x] done\n";
        assert_eq!(decide(&c), c.expected);
        let mut c = with_history(
            case(
                "complete before plan",
                status(WorkStatus::Complete, true),
                Decision::Continue,
            ),
            vec![rec(|r| r.completion_indicator = true)],
        );
        c.breaker = open.clone();
        c.cfg = cfg.clone();
        c.plan = "- [x] done\n";
        assert_eq!(decide(&c), Decision::Stop(ExitReason::ProjectComplete));
        c.history.remove(0);
        assert_eq!(decide(&c), Decision::Stop(ExitReason::PlanComplete));
        c.plan = "- [ ] open\n";
        assert_eq!(decide(&c), Decision::Stop(ExitReason::CircuitOpen));
        c.breaker = Breaker::default();
        assert_eq!(decide(&c), Decision::Stop(ExitReason::MaxLoops));
        c.cfg.max_loops = 0;
        c.cost = 1.0;
        assert_eq!(decide(&c), Decision::Stop(ExitReason::CostBudget));
    }

    #[test]
    fn before_call_table() {
        let cfg = DecideConfig {
            max_loops: 3,
            max_cost_usd: 1.0,
            ..DecideConfig::default()
        };
        // (plan, loops, cost, expected)
        let cases: &[(&str, u64, f64, Option<ExitReason>)] = &[
            ("- [ ] a\n", 0, 0.0, None),
            ("- [x] a\n", 0, 0.0, Some(ExitReason::PlanComplete)),
            ("- [x] a\n", 9, 9.0, Some(ExitReason::PlanComplete)),
            ("", 2, 0.99, None),
            ("", 3, 0.0, Some(ExitReason::MaxLoops)),
            ("", 0, 1.0, Some(ExitReason::CostBudget)),
        ];
        for (plan, loops, cost, expected) in cases {
            let plan = fixplan::parse(plan, &fixplan::default_optional_sections());
            assert_eq!(
                before_call(plan.is_complete(), *loops, *cost, &cfg),
                *expected,
                "{plan:?} {loops} {cost}"
            );
        }
        let unlimited = DecideConfig::default();
        assert_eq!(before_call(false, u64::MAX, 1e12, &unlimited), None);
    }

    #[test]
    fn classify_denials_table() {
        let allowed: Vec<String> = [
            "Write",
            "Bash(npm *)",
            "Bash(cargo test:*)",
            "Bash(git add *)",
            "Bash(make:*)",
            "Bash(ls)",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
        // (command, is a warning)
        // One matcher (`policy::bash_rules`): every part of a compound command must be
        // allowed, as the client checks it; output into a file is asked for by the client
        // whatever the rules (a real denial); `VAR=value` prefixes are looked through (both
        // observed with the real clients in the contract suite, `bash_rules.rs` there).
        let cases: &[(&str, bool)] = &[
            ("npm test 2>&1 | tail -20", false),
            ("npm test 2>&1 | npm run fmt", true),
            ("npm install left-pad", true),
            ("cargo test --lib > out.txt", false),
            ("cargo test --lib > /dev/null", true),
            ("cargo build", false),
            ("git add -A && git commit -m x", false),
            ("git add . && npm test", true),
            ("make -j4 2> err.log", false),
            ("make -j4 2>/dev/null", true),
            ("CI=1 npm test", true),
            ("npm test $(cat args)", false),
            ("ls", true),
            ("ls -la", false),
            ("rm -rf target", false),
            ("npm test; rm -rf /", false),
            ("", false),
            ("   ", false),
            ("| npm", false),
        ];
        for (cmd, warning) in cases {
            let (real, warnings) = classify_denials(&[bash(cmd)], &allowed);
            assert_eq!(warnings.len(), usize::from(*warning), "{cmd:?}");
            assert_eq!(real.len(), usize::from(!*warning), "{cmd:?}");
        }
        // Non-Bash tools and Bash without a command are always real denials.
        let others = [
            Denial {
                tool: "Write".into(),
                command: None,
            },
            Denial {
                tool: "Bash".into(),
                command: None,
            },
        ];
        assert_eq!(classify_denials(&others, &allowed).0.len(), 2);
        // `Bash` alone allows every command.
        let all = vec!["Bash".to_string()];
        assert_eq!(classify_denials(&[bash("rm -rf x | y")], &all).1.len(), 1);
        // Nothing allowed: every denial is real.
        assert_eq!(classify_denials(&[bash("npm test")], &[]).0.len(), 1);
    }

    #[test]
    fn record_loop_fields() {
        let cfg = allowing(&["Bash(npm *)"]);
        let mut a = status(WorkStatus::Complete, true);
        a.permission_denials = vec![
            bash("npm test | tail"),
            bash("pip install x"),
            bash("npm test 2>&1"),
        ];
        a.questions = vec!["?".into()];
        a.cost_usd = 0.25;
        a.output_len = 42;
        let p = Progress {
            files_changed: 3,
            implementation_files_changed: 1,
            ..Progress::default()
        };
        let r = record_loop(7, ts(5), &a, &p, &cfg);
        assert_eq!(
            (r.number, r.at, r.exit_signal, r.completion_indicator),
            (7, ts(5), true, true)
        );
        // `tail` is not allowed: the client checks every command of a pipeline.
        assert_eq!(
            r.denied,
            vec![bash("npm test | tail"), bash("pip install x")]
        );
        assert_eq!(r.denial_warnings, vec![bash("npm test 2>&1")]);
        assert!(r.questions);
        assert_eq!((r.files_changed, r.cost_usd, r.output_len), (3, 0.25, 42));

        // test_only: testing work and no implementation files changed.
        let work_type_testing = Analysis {
            status: Some(StatusBlock {
                work_type: Some(WorkType::Testing),
                ..StatusBlock::default()
            }),
            ..Analysis::default()
        };
        let flagged = Analysis {
            testing_only: true,
            ..Analysis::default()
        };
        let failed = Analysis {
            testing_only: true,
            ..err(ErrorKind::Overloaded)
        };
        let tests_only = Progress {
            files_changed: 2,
            ..Progress::default()
        };
        let impl_changed = Progress {
            files_changed: 2,
            implementation_files_changed: 1,
            ..Progress::default()
        };
        // The plan's own work is work: a ticked item, a test file the plan names.
        let ticked = Progress {
            files_changed: 1,
            plan_items_checked: 1,
            ..Progress::default()
        };
        let named = Progress {
            files_changed: 1,
            plan_files_changed: 1,
            ..Progress::default()
        };
        let cases: &[(&Analysis, &Progress, bool)] = &[
            (&work_type_testing, &tests_only, true),
            (&work_type_testing, &ticked, false),
            (&work_type_testing, &named, false),
            (&flagged, &ticked, false),
            (&flagged, &Progress::default(), true),
            (&flagged, &impl_changed, false),
            (&Analysis::default(), &tests_only, false),
            (&failed, &tests_only, false),
        ];
        for (i, (a, p, expected)) in cases.iter().enumerate() {
            assert_eq!(
                record_loop(1, ts(0), a, p, &cfg).test_only,
                *expected,
                "case {i}"
            );
        }
        // Serde round trip and tolerance.
        let back: LoopRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        let empty: LoopRecord = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, LoopRecord::default());
        assert_eq!(
            serde_json::to_string(&UsageLimitPolicy::Exit).unwrap(),
            "\"exit\""
        );
    }

    #[test]
    fn backoff_table() {
        let cases: &[(u64, u32, i64)] = &[
            (30, 0, 0),
            (30, 1, 30),
            (30, 2, 60),
            (30, 5, 480),
            (30, 6, 900),
            (30, 100, 900),
            (1200, 1, 1200),
            (1200, 9, 1200),
            (0, 4, 0),
            (u64::MAX, 3, i64::MAX),
        ];
        for (base, n, secs) in cases {
            assert_eq!(
                backoff(*base, *n),
                SignedDuration::from_secs(*secs),
                "{base} {n}"
            );
        }
        // RETRY_BACKOFF_MAX moves the cap.
        assert_eq!(backoff_capped(30, 10, 120), SignedDuration::from_secs(120));
        assert_eq!(
            backoff_capped(30, 10, 3600),
            SignedDuration::from_secs(3600)
        );
        assert_eq!(backoff_capped(300, 1, 60), SignedDuration::from_secs(300));
    }

    fn any_kind() -> impl Strategy<Value = Option<ErrorKind>> {
        proptest::option::of(proptest::sample::select(vec![
            ErrorKind::Auth,
            ErrorKind::Billing,
            ErrorKind::UsageLimit,
            ErrorKind::SpendLimit,
            ErrorKind::RateLimit,
            ErrorKind::Overloaded,
            ErrorKind::Server,
            ErrorKind::Network,
            ErrorKind::MaxTurns,
            ErrorKind::Budget,
            ErrorKind::Interrupted,
            ErrorKind::NoOutput,
            ErrorKind::Malformed,
            ErrorKind::CliUsage,
            ErrorKind::Unknown,
            ErrorKind::OutputTooLarge,
        ]))
    }

    proptest! {
        #[test]
        fn backoff_is_monotonic_and_capped(base in 0u64..5000, n in 0u32..200) {
            let a = backoff(base, n);
            let b = backoff(base, n.saturating_add(1));
            prop_assert!(a <= b);
            let cap = SignedDuration::from_secs(i64::try_from(base).unwrap().max(900));
            prop_assert!(b <= cap);
            prop_assert!(b >= SignedDuration::from_secs(i64::try_from(base).unwrap()));
        }

        #[test]
        fn after_loop_is_total_and_deterministic(
            kind in any_kind(),
            outcome in proptest::sample::select(vec![Outcome::Success, Outcome::AgentError, Outcome::Timeout, Outcome::Crashed]),
            exit in any::<bool>(),
            unknown_session in any::<bool>(),
            reset in proptest::option::of(-100_000i64..100_000),
            flags in proptest::collection::vec((any::<bool>(), any::<bool>(), any::<bool>(), 0u32..3), 0..8),
            open in any::<bool>(),
            plan in "(- \\[[ x]\\] a\n){0,3}",
            loops in 0u64..10,
            cost in proptest::num::f64::ANY,
            failures in any::<u32>(),
            max_loops in 0u64..10,
            max_cost in proptest::num::f64::ANY,
            denial_threshold in 0u32..4,
            test_loops in 0u32..4,
            policy in any::<bool>(),
            base in any::<u64>(),
        ) {
            let analysis = Analysis {
                outcome,
                error: kind.map(|kind| AgentError { kind, message: String::new(), api_status: None, reset_at: reset.map(ts), window: None }),
                unknown_session,
                status: Some(StatusBlock { exit_signal: Some(exit), ..StatusBlock::default() }),
                ..Analysis::default()
            };
            let history: Vec<LoopRecord> = flags
                .iter()
                .map(|&(ind, test, den, files)| LoopRecord {
                    completion_indicator: ind,
                    test_only: test,
                    denied: if den { vec![bash("x")] } else { vec![] },
                    files_changed: files,
                    ..LoopRecord::default()
                })
                .collect();
            let breaker = Breaker { state: if open { CircuitState::Open } else { CircuitState::Closed }, ..Breaker::default() };
            let plan = fixplan::parse(&plan, &[]);
            let cfg = DecideConfig {
                max_loops,
                max_cost_usd: max_cost,
                permission_denial_threshold: denial_threshold,
                max_consecutive_test_loops: test_loops,
                on_usage_limit: if policy { UsageLimitPolicy::Exit } else { UsageLimitPolicy::Wait },
                retry_backoff_base_secs: base,
                retry_backoff_max_secs: 900,
                allowed_tools: vec![],
            };
            let input = AfterLoop {
                analysis: &analysis, history: &history, breaker: &breaker,
                plan_complete: plan.is_complete(), claims: true,
                loops_this_run: loops, cost_this_run: cost, consecutive_failures: failures,
                now: ts(0), cfg: &cfg,
            };
            let d1 = after_loop(&input);
            let d2 = after_loop(&input);
            prop_assert_eq!(d1, d2);
            if let Decision::Wait { until, .. } = d1 {
                prop_assert!(until >= ts(0));
            }
            if !exit {
                prop_assert_ne!(d1, Decision::Stop(ExitReason::ProjectComplete));
            }
            // A spend cap never waits: it stops (or an earlier rule decides).
            if kind == Some(ErrorKind::SpendLimit) && !unknown_session {
                prop_assert_eq!(d1, Decision::Stop(ExitReason::SpendLimit));
            }
        }
    }

    #[test]
    fn credential_expiry_warns_once_within_12_hours() {
        let now: Timestamp = "2026-11-22T20:00:00Z".parse().unwrap();
        let at = |s: &str| Some(s.parse::<Timestamp>().unwrap());
        let cases = [
            (None, None, None),
            (at("2026-11-23T09:00:00Z"), None, None),
            (
                at("2026-11-23T07:59:00Z"),
                None,
                Some(SignedDuration::from_mins(719)),
            ),
            (
                at("2026-11-23T08:00:00Z"),
                None,
                Some(SignedDuration::from_hours(12)),
            ),
            (at("2026-11-23T03:00:00Z"), at("2026-11-23T03:00:00Z"), None),
            (
                at("2026-11-23T04:00:00Z"),
                at("2026-11-23T03:00:00Z"),
                Some(SignedDuration::from_hours(8)),
            ),
            (
                at("2026-11-22T19:00:00Z"),
                None,
                Some(SignedDuration::from_hours(-1)),
            ),
        ];
        for (expires, warned, want) in cases {
            assert_eq!(
                credential_expiry_due(expires, warned, now),
                want,
                "{expires:?} {warned:?}"
            );
        }
    }
}
