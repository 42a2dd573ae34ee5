//! What one answer means for the run's state, as pure steps the driver calls in order
//! (`engine/call.rs`): the answer completed (session tokens, the charge, vetting, the login
//! expiry), folded (startup hangs, productive errors, [`State::fold`], the agent's counters,
//! the failure streak) and judged ([`decide::after_loop`] with and without "done" claims, as
//! the state machine's [`Answer`]). No clock, no files, no processes: `now` and the facts are
//! arguments; what is to be said comes back as warnings.

use jiff::Timestamp;

use crate::agent::profile::{Agent, Parser};
use crate::analysis::Analysis;
use crate::policy::breaker::{BreakerConfig, Transition, is_failed_call};
use crate::policy::charge::{self, ChargeInput};
use crate::policy::decide::{self, AfterLoop, DecideConfig};
use crate::policy::run::{Answer, Run};
use crate::policy::startup::{self, HangVerdict};
use crate::policy::verify::CheckResult;
use crate::report::LoopSummary;
use crate::settings::Settings;
use crate::store::State;
use crate::store::schema::{AgentFinished, Fold};
pub use crate::store::schema::{Call, Ended};

/// How the call's cost is known: CLAUDE_OUTPUT_FORMAT=text (no cost in the answer) and
/// UNKNOWN_CALL_COST.
#[derive(Debug, Clone, Copy)]
pub struct Pricing {
    pub text: bool,
    pub unknown_call_cost: f64,
}

/// At start, with MAX_COST_USD set: the warning that names the agents of the run whose cost
/// hank cannot know ([`charge::blind_agents_warning`]).
#[must_use]
pub fn uncharged_warning<'a>(
    agents: impl Iterator<Item = &'a Agent>,
    s: &Settings,
) -> Option<String> {
    if s.max_cost_usd.value <= 0.0 {
        return None;
    }
    let text = Pricing::of(s).text;
    let blind: Vec<String> = agents
        .filter(|a| a.profile.cost_source(text) == charge::CostSource::Unknown)
        .map(|a| a.name().to_owned())
        .collect();
    charge::blind_agents_warning(&blind, text)
}

/// Completes the answer of loop `number` by `agent` (its call lasted `took`): total-token
/// sessions turned into the call's tokens, the call charged (an estimate when the answer
/// should hold a cost and does not; nothing when it cannot have reached the API), the answer vetted, the login expiry due (once per expiry: `warned`). Returns the
/// warnings, in order.
pub fn complete(
    a: &mut Analysis,
    (agent, number, took): (&Agent, u64, std::time::Duration),
    state: &mut State,
    pricing: Pricing,
    (now, warned): (Timestamp, &mut Option<Timestamp>),
) -> Vec<String> {
    if let Parser::Mapped(m) = &agent.profile.parser
        && m.session_total_tokens
    {
        let session = a.session_id.as_deref();
        a.tokens = state.agents.tokens_of_call(agent.name(), session, a.tokens);
    }
    let history = state.history.iter();
    let unreached = charge::unreached(a.stdout_bytes, took);
    let c = charge::charge(ChargeInput {
        reported: a.cost_reported.then_some(a.cost_usd),
        tokens: &a.tokens,
        source: agent.profile.cost_source(pricing.text),
        recent: history.map(|h| (h.at, h.cost_usd, h.cost_estimated)),
        now,
        unknown_call_cost: pricing.unknown_call_cost,
        unreached,
    });
    a.cost_usd = c.usd;
    a.cost_estimated = c.estimate.is_some();
    let mut warnings: Vec<String> =
        charge::estimate_warning(number, agent.name(), c.usd, c.estimate)
            .into_iter()
            .collect();
    if unreached && !a.cost_reported {
        warnings.push(charge::unreached_warning(number, agent.name(), took));
    }
    warnings.extend(crate::agent::vet::vet(a, agent.profile.session_ids()));
    let expires = a.credential_expires_at;
    if let Some(left) = decide::credential_expiry_due(expires, *warned, now) {
        *warned = expires;
        let msg = expires.map(|at| crate::report::credential_warning(at, left));
        warnings.push(msg.unwrap_or_default());
    }
    warnings
}

/// The reviewer's call `a` at `at` on the run's books (a worker's goes through [`fold`]): the
/// rolling hour's tokens, the totals, the usage windows it reported. `true` when it reported
/// windows (to be published).
pub fn account_review(state: &mut State, a: &Analysis, at: Timestamp) -> bool {
    state.ledger.add_tokens_to_last(a.tokens.sum());
    state.totals.cost_usd += a.cost_usd;
    if a.cost_estimated {
        state.totals.estimated_cost_usd += a.cost_usd;
    }
    state.totals.tokens.add(&a.tokens);
    if a.usage_windows.is_empty() {
        return false;
    }
    crate::policy::windows::observe(&mut state.windows, &a.usage_windows, at);
    true
}

/// The session the call of `agent` at `now` resumes, when its profile resumes and the stored
/// id is one its CLI makes (state.json is in the agent's reach: an id goes back only in the
/// CLI's alphabet); else the warning, and the stored session is dropped.
pub fn resume_id(
    state: &mut State,
    s: &Settings,
    agent: &Agent,
    now: Timestamp,
) -> (Option<String>, Option<String>) {
    let stored = s.resumable(state.session.as_ref(), now);
    let (p, name) = (&agent.profile, agent.name());
    let id = stored.map(|x| x.id.as_str());
    match crate::policy::session::resume_id(id, p.resume, p.session_ids(), name) {
        Ok(id) => (id, None),
        Err(warning) => {
            state.session = None;
            (None, Some(warning))
        }
    }
}

/// What folding one answer found.
#[derive(Debug, Default)]
pub struct Folded {
    /// A startup hang retried at once, uncounted.
    pub free_retry: bool,
    pub warnings: Vec<String>,
    pub transition: Option<Transition>,
}

/// Folds call `c` into `state` ([`State::fold`]) with the decision's and the breaker's
/// settings (`cfg`); the agent is charged with it; `hang_limit` is FIRST_OUTPUT_TIMEOUT as
/// written.
pub fn fold(
    state: &mut State,
    c: &Call<'_>,
    (decide, breaker): (&DecideConfig, &BreakerConfig),
    hang_limit: &str,
) -> Folded {
    let (number, a, progress, ended) = (c.number, c.analysis, c.progress, c.ended);
    // A startup hang is retried at once, uncounted, up to 2 in a row (policy::startup).
    let hung = ended.startup_hang && !ended.interrupted;
    let (hang, streak) = startup::after_call(state.startup_hangs, hung);
    state.startup_hangs = streak;
    let mut warnings: Vec<String> = startup::hang_warning(number, hang, hang_limit)
        .into_iter()
        .collect();
    if is_failed_call(a) && progress.did_the_work() && !ended.interrupted {
        let what = a.error.as_ref().map(|e| e.kind.as_str());
        let work = if progress.plan_items_checked > 0 {
            "checked a fix_plan item"
        } else {
            "turned the failing check green"
        };
        warnings.push(format!(
            "loop {number}: the agent reported {} but {work}: counted as productive, not as a failed call",
            what.unwrap_or("an error")
        ));
    }
    let free_retry = matches!(hang, HangVerdict::RetryNow { .. });
    let folded = state.fold(&Fold {
        call: c,
        decide,
        breaker,
        free_retry,
    });
    warnings.extend(crate::report::denial_warnings(
        &folded.denied,
        &folded.denial_warnings,
    ));
    state.agents.count(c.agent, a.cost_usd, a.tokens.sum());
    // The backoff grows with failures of either kind (an outage does not raise
    // failure_streak: it is judged by time).
    let b = &state.breaker;
    state.consecutive_failures = b.failure_streak.saturating_add(b.transient_streak);
    Folded {
        free_retry,
        warnings,
        transition: folded.transition,
    }
}

impl Pricing {
    /// The pricing `s` sets (CLAUDE_OUTPUT_FORMAT, UNKNOWN_CALL_COST).
    #[must_use]
    pub fn of(s: &Settings) -> Self {
        Self {
            text: s.output_format.value == crate::settings::OutputFormat::Text,
            unknown_call_cost: s.unknown_call_cost.value,
        }
    }
}

/// [`fold`] with the decision's and the breaker's settings of `s` and its FIRST_OUTPUT_TIMEOUT.
pub fn fold_call(state: &mut State, s: &Settings, c: &Call<'_>) -> Folded {
    let (decide, breaker) = (s.decide_config(), s.breaker_config());
    let limit = crate::settings::resolve::format_duration(s.first_output_timeout.value);
    fold(state, c, (&decide, &breaker), &limit)
}

/// The loop's report: its `agent_finished` event (the agent named; `check`: the per-loop
/// check's verdict as its tests' state) and the summary block (`plan`: items done/total).
#[must_use]
pub fn report(
    c: &Call<'_>,
    check: Option<&CheckResult>,
    plan: (u32, u32),
    state: &State,
) -> (AgentFinished, LoopSummary) {
    let mut finished = AgentFinished::of(c.number, c.analysis, c.progress, c.duration);
    finished.agent = Some(c.agent.to_owned());
    if let Some(check) = check {
        finished.tests_status = Some(if check.passed { "PASSING" } else { "FAILING" }.into());
    }
    let (cost, circuit) = (state.totals.cost_usd, state.breaker.state);
    let summary = LoopSummary::of(&finished, c.analysis, plan, cost, c.duration, circuit);
    (finished, summary)
}

/// The answer of call `c` judged by [`decide::after_loop`] with and without its "done" claims
/// (the check may reject one), for the state machine; `run` is the run so far (its loops and
/// cost) and whether the plan is complete now.
#[must_use]
pub fn judge(
    c: &Call<'_>,
    state: &State,
    (run, plan_complete): (&Run, bool),
    cfg: &DecideConfig,
    folded: &Folded,
) -> Answer {
    let a = c.analysis;
    let decide = |claims: bool| {
        decide::after_loop(&AfterLoop {
            analysis: a,
            history: &state.history,
            breaker: &state.breaker,
            plan_complete,
            claims,
            loops_this_run: run.loops(),
            cost_this_run: run.cost(),
            consecutive_failures: state.consecutive_failures,
            now: c.now,
            cfg,
        })
    };
    Answer {
        decision: decide(true),
        without_claims: decide(false),
        free_retry: folded.free_retry,
        productive_error: is_failed_call(a) && c.progress.did_the_work(),
        interrupted: c.ended.interrupted,
        error: a.error.is_some(),
        resumed: c.resumed.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{AgentError, ErrorKind};
    use crate::policy::breaker::BreakerConfig;
    use crate::policy::decide::Decision;
    use crate::policy::progress::{Progress, ProgressSource};

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn failed() -> Analysis {
        Analysis {
            error: Some(AgentError {
                kind: ErrorKind::MaxTurns,
                message: "timed out".into(),
                api_status: None,
                reset_at: None,
                window: None,
            }),
            ..Analysis::default()
        }
    }

    fn fold_one(state: &mut State, a: &Analysis, p: &Progress, ended: Ended) -> Folded {
        let (decide, breaker) = (DecideConfig::default(), BreakerConfig::default());
        let c = Call {
            number: 1,
            now: now(),
            resumed: None,
            agent: "claude",
            analysis: a,
            progress: p,
            duration: std::time::Duration::ZERO,
            ended,
        };
        fold(state, &c, (&decide, &breaker), "2m")
    }

    #[test]
    fn a_fold_counts_hangs_failures_and_productive_errors() {
        let idle = Progress::from_paths(ProgressSource::Git, Vec::<String>::new());
        let mut ticked = idle.clone();
        ticked.plan_items_checked = 1;
        let hang = Ended {
            startup_hang: true,
            ..Ended::default()
        };
        // (answer, progress, how it ended) → (free retry, failures after, warned about)
        type Row<'a> = (Analysis, &'a Progress, Ended, bool, u32, Option<&'a str>);
        let table: [Row<'_>; 4] = [
            (
                Analysis::default(),
                &idle,
                hang,
                true,
                0,
                Some("a startup hang; retrying at once"),
            ),
            (failed(), &idle, Ended::default(), false, 1, None),
            (
                failed(),
                &ticked,
                Ended::default(),
                false,
                0,
                Some("counted as productive"),
            ),
            (
                failed(),
                &ticked,
                Ended {
                    interrupted: true,
                    ..Ended::default()
                },
                false,
                0,
                None,
            ),
        ];
        for (a, p, ended, free, failures, warned) in table {
            let mut state = State::default();
            let folded = fold_one(&mut state, &a, p, ended);
            assert_eq!(folded.free_retry, free, "{ended:?}");
            assert_eq!(
                state.consecutive_failures, failures,
                "{ended:?} {:?}",
                a.error
            );
            match warned {
                Some(w) => assert!(
                    folded.warnings.iter().any(|x| x.contains(w)),
                    "{:?}",
                    folded.warnings
                ),
                None => assert!(folded.warnings.is_empty(), "{:?}", folded.warnings),
            }
            assert_eq!(state.agents.usage["claude"].calls, 1);
        }
    }

    /// The report names the agent and takes the per-loop check's verdict as the tests' state.
    #[test]
    fn a_loops_report_names_the_agent_and_the_checks_verdict() {
        let (a, p) = (Analysis::default(), Progress::default());
        let check = |passed| crate::policy::verify::CheckResult {
            kind: crate::policy::verify::CheckKind::Loop,
            passed,
            command: "make test".into(),
            exit_code: Some(i32::from(!passed)),
            timed_out: false,
            interrupted: false,
            duration_ms: 1,
            at: now(),
            log: String::new(),
            number: 4,
            removed_tests: Vec::new(),
        };
        let (pass, fail) = (check(true), check(false));
        // (the loop's check) → (tests_status).
        let table = [
            (None, None),
            (Some(&pass), Some("PASSING")),
            (Some(&fail), Some("FAILING")),
        ];
        for (check, tests) in table {
            let c = Call {
                number: 4,
                now: now(),
                resumed: None,
                agent: "codex",
                analysis: &a,
                progress: &p,
                duration: std::time::Duration::from_secs(3),
                ended: Ended::default(),
            };
            let (finished, summary) = report(&c, check, (2, 5), &State::default());
            assert_eq!(finished.agent.as_deref(), Some("codex"));
            assert_eq!(finished.tests_status.as_deref(), tests);
            assert_eq!((finished.number, summary.finished.number), (4, 4));
            assert_eq!(finished.duration_ms, 3000);
        }
    }

    #[test]
    fn a_judged_answer_carries_both_decisions_and_the_facts() {
        use crate::policy::run::{Fact, RunConfig};
        let state = State::default();
        let p = Progress::from_paths(ProgressSource::Git, vec!["src/a.rs".to_owned()]);
        let mut run = Run::new(RunConfig::default());
        run.on(Fact::Calling, now());
        let folded = Folded::default();
        let c = Call {
            number: 1,
            now: now(),
            resumed: Some("s1"),
            agent: "claude",
            analysis: &Analysis::default(),
            progress: &p,
            duration: std::time::Duration::ZERO,
            ended: Ended {
                interrupted: true,
                ..Ended::default()
            },
        };
        let cfg = DecideConfig::default();
        let a = judge(&c, &state, (&run, true), &cfg, &folded);
        assert_eq!(
            a.decision,
            Decision::Stop(crate::exit::ExitReason::PlanComplete)
        );
        assert_ne!(a.without_claims, a.decision);
        assert!(a.interrupted && a.resumed && !a.error && !a.free_retry);
    }
}
