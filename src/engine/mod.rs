//! The loop: sequencing only. Every threshold and rule lives in the pure modules
//! ([`crate::policy::budget`], [`crate::policy::breaker`], [`crate::policy::decide`], [`crate::analysis`]); this
//! module wires them to the process runner, the state store and the terminal.
//!
//! One iteration (HANK.md §3):
//! 1. integrity — hank's files still exist, else `integrity_failure`;
//! 2. exit checks before calling — plan complete (a "done" claim: checked by VERIFY_COMMAND
//!    when set), max loops, cost budget;
//! 3. circuit breaker — OPEN stops the run;
//! 4. budget — wait (countdown, `state: waiting`) while the rolling-hour cap is reached, or
//!    while a usage window is at its MAX_WINDOW_PERCENT limit (`windows.rs`);
//! 5. call — record the call in the ledger and save **before** spawning, then run the agent;
//! 6. analyze the output; measure progress; with VERIFY_EVERY_LOOP run the check (a loop that
//!    turns it red made no progress);
//! 7. fold into history, breaker, totals; save;
//! 8. decide — continue, wait (usage limit, backoff) or stop; a "done" stop stands only when
//!    the check passes, else the loop goes on with the failure in the next context;
//! 9. status.json, events, the loop summary.
//!
//! Beside this file: `start.rs` (lock, runtime, loading the state, orphan cleanup),
//! `wait.rs` (every wait, with its countdown and status), `output.rs` (status.json,
//! state.json, events, warnings), `verify.rs` (VERIFY_COMMAND: baseline, per-loop check,
//! verified completion).

use std::io::Write;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use tokio::sync::watch;

use crate::agent::argv;
use crate::agent::call;
use crate::agent::process::{self, Spawn};
use crate::agent::profile::{Agent, Parser};
use crate::analysis::{self, Analysis};
use crate::error::{HankError, Result};
use crate::exit::ExitReason;
use crate::policy::breaker::is_failed_call;
use crate::policy::budget::{BudgetCheck, WaitReason};
use crate::policy::decide::{self, AfterLoop, Decision};
use crate::policy::fixplan::{self, Plan};
use crate::policy::session::{self, UnknownSession};
use crate::policy::startup::{self, HangVerdict};
use crate::policy::time::Clock;
use crate::progress;
use crate::report::{LoopSummary, Reporter};
use crate::settings::Settings;
use crate::store::schema::{AgentFinished, Fold};
use crate::store::{EventKind, LastLoop, LockGuard, RunState, State, Store};

/// Time between SIGTERM and SIGKILL when stopping the agent.
pub(crate) const GRACE: Duration = Duration::from_secs(5);

mod agents;
mod output;
mod start;
pub(crate) mod verify;
mod wait;
mod windows;

pub(crate) use start::start;

use agents::Choice;
use wait::Waited;

struct Engine {
    s: Settings,
    /// The agents of the run in failover order (one unless `AGENTS` names more); shared, so
    /// a loop holds its agent without copying the profile.
    agents: Vec<std::sync::Arc<Agent>>,
    /// Index of the agent of the next call.
    current: usize,
    /// The agent the current one took over from (said once in the next loop's context).
    handover: Option<String>,
    store: Store,
    state: State,
    reporter: Reporter,
    cancel: watch::Receiver<u32>,
    loops_this_run: u64,
    cost_this_run: f64,
    plan: Plan,
    last_loop: Option<LastLoop>,
    wait: Option<(WaitReason, Timestamp)>,
    secrets: Vec<String>,
    lock: LockGuard,
    /// The login expiry last warned about (once per expiry time).
    credential_warned: Option<Timestamp>,
    /// VERIFY_COMMAND as the run started, and what its checks found.
    verify: verify::Verify,
    /// When MAX_RUNTIME ends the run (`None`: unlimited).
    run_deadline: Option<Timestamp>,
    /// LOG_RETENTION: the first loop and check whose logs are kept (`None` before the first
    /// pruning of the run).
    logs_kept_from: Option<(u64, u64)>,
    clock: Box<dyn Clock>,
    /// The tag in every agent's environment (descendants and orphans are found by it).
    marker: process::Marker,
    /// The usage limit or window the run waits for or stopped at, named for the user.
    limit_note: Option<String>,
    /// This run's loops, for the receipts in the exit summary.
    run_loops: Vec<crate::policy::receipts::LoopCost>,
    /// The last loop was a startup hang retried at once: no loop delay before the next.
    retry_now: bool,
    /// NOTIFY: every emitted event is offered to it (`output.rs`).
    notify: crate::notify::Hook,
}

impl Engine {
    fn interrupted(&self) -> bool {
        *self.cancel.borrow() > 0
    }

    fn refresh_plan(&mut self) -> Option<String> {
        let text = self.s.read_fix_plan()?;
        self.plan = fixplan::parse(&text, &self.s.optional_sections.value);
        Some(text)
    }

    async fn run(&mut self) -> Result<u8> {
        match self.run_loop().await {
            Ok(reason) => self.finish(reason),
            Err(err) => {
                // Leave an honest status behind: the run failed, and why.
                let _ = self.store.save_state_with(&self.state, false);
                let mut status = self.status(RunState::Failed, None);
                status.exit_code = Some(crate::exit::ERROR);
                let _ = self.store.write_status(&status);
                let _ = self.emit(EventKind::Exit {
                    exit_reason: None,
                    exit_code: crate::exit::ERROR,
                    message: err.to_string(),
                    verified: None,
                });
                self.store.log(self.clock.now(), &format!("failed: {err}"));
                Err(err)
            }
        }
    }

    async fn run_loop(&mut self) -> Result<ExitReason> {
        let now = self.clock.now();
        self.store.log(
            now,
            &format!("hank run started (pid {})", std::process::id()),
        );
        let bcfg = self.s.breaker_config();
        if let Some(t) =
            self.state
                .breaker
                .on_run_start(now, &bcfg, self.s.auto_reset_circuit.value)
        {
            self.reporter
                .info(&format!("circuit {} → {}: {}", t.from, t.to, t.reason));
            self.emit_transition(&t)?;
        }
        self.state.agents.on_run_start(now);
        let max_runtime = self.s.max_runtime.value;
        self.run_deadline = (!max_runtime.is_zero()).then(|| {
            now.checked_add(SignedDuration::try_from(max_runtime).unwrap_or(SignedDuration::MAX))
                .unwrap_or(Timestamp::MAX)
        });
        self.save()?;
        self.refresh_plan();
        self.verify = verify::Verify::at_start(&self.s, &self.plan);
        self.warn_uncharged_agents();
        self.prune_logs();
        self.write_status(RunState::Starting)?;
        if let Some(reason) = self.resume_saved_wait().await? {
            return Ok(reason);
        }
        if let Some(reason) = self.verify_baseline().await? {
            return Ok(reason);
        }
        let dcfg = self.s.decide_config();
        loop {
            // Let the signal task run (the driver is polled on the first yield, the handler runs
            // on the second): a signal that came during the synchronous analysis is seen here.
            for _ in 0..2 {
                tokio::task::yield_now().await;
            }
            if self.interrupted() {
                return Ok(ExitReason::Interrupted);
            }
            // 1. integrity (a required file turned into a FIFO or a device is an error naming
            // it, not a hang and not "disappeared")
            self.s.check_special_files()?;
            let missing = self.s.missing_files();
            if !missing.is_empty() {
                let list: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
                self.warn(&format!(
                    "required file(s) disappeared: {}",
                    list.join(", ")
                ));
                return Ok(ExitReason::IntegrityFailure);
            }
            let Some(plan_text) = self.refresh_plan() else {
                return Ok(ExitReason::IntegrityFailure);
            };
            self.watch_verify_edit();
            // 2. exit checks before calling; a complete plan is a "done" claim (verified)
            if self.run_deadline.is_some_and(|d| self.clock.now() >= d) {
                return Ok(ExitReason::MaxRuntime);
            }
            if self.plan_complete()
                && let Some(reason) = self.verify_claim(ExitReason::PlanComplete).await?
            {
                return Ok(reason);
            }
            if let Some(reason) =
                decide::before_call(false, self.loops_this_run, self.cost_this_run, &dcfg)
            {
                return Ok(reason);
            }
            // 3. circuit breaker
            if self.state.breaker.is_open() {
                return Ok(ExitReason::CircuitOpen);
            }
            // 4. budget
            let now = self.clock.now();
            if let BudgetCheck::Wait { until, reason } =
                self.state.ledger.check(now, &self.s.budget_limits())
            {
                if let Waited::Stop(r) = self.wait_until(reason, until).await? {
                    return Ok(r);
                }
                continue;
            }
            // 4a. usage windows (MAX_WINDOW_PERCENT)
            match self.window_gate().await? {
                windows::Gate::Call => {}
                windows::Gate::Again => continue,
                windows::Gate::Stop(reason) => return Ok(reason),
            }
            // 4b. the agent: the first of the chain that may work now
            match self.choose_agent().await? {
                Choice::Call => {}
                Choice::Again => continue,
                Choice::Stop(reason) => return Ok(reason),
            }
            // 5–9. one call
            match self.one_loop(plan_text).await? {
                Decision::Continue | Decision::RetryWithoutSession => {
                    let delay = if std::mem::take(&mut self.retry_now) {
                        0
                    } else {
                        self.s.loop_delay_seconds.value
                    };
                    if delay > 0 {
                        let until = self
                            .clock
                            .now()
                            .checked_add(SignedDuration::from_secs(
                                i64::try_from(delay).unwrap_or(i64::MAX),
                            ))
                            .unwrap_or(Timestamp::MAX);
                        if let Waited::Stop(r) = self.sleep_until(until).await {
                            return Ok(r);
                        }
                    }
                }
                Decision::Wait { until, reason } => {
                    if let Waited::Stop(r) = self.wait_until(reason, until).await? {
                        return Ok(r);
                    }
                }
                Decision::Stop(reason) => return Ok(reason),
            }
        }
    }

    /// Steps 5–9 for one loop; returns the decision.
    async fn one_loop(&mut self, plan_before: String) -> Result<Decision> {
        let now = self.clock.now();
        self.state.loop_count += 1;
        let number = self.state.loop_count;
        self.loops_this_run += 1;
        self.state.totals.loops += 1;
        // The call is on the ledger before the agent exists: no crash of hank (kill -9
        // included) can under-count it. The rename is atomic; no fdatasync (it costs ms per
        // loop on ext4 and only matters if the whole machine goes down mid-write).
        self.state.ledger.record_call(now);
        self.store.save_state_with(&self.state, false)?;

        let prompt = self.s.read_prompt()?;
        let agent = self.agent().clone();
        let resume = self
            .s
            .resumable(self.state.session.as_ref(), now)
            .map(|x| x.id.clone())
            .filter(|_| agent.profile.resume);
        // state.json is in the agent's reach: a stored id goes back on the command line only
        // in the CLI's own alphabet.
        let resume = match resume {
            Some(id) => match crate::policy::session::check_id(&id, agent.profile.session_ids()) {
                Ok(()) => Some(id),
                Err(why) => {
                    self.warn(&format!(
                        "the stored session id is not one {} makes ({why}); starting a fresh session",
                        agent.name()
                    ));
                    self.state.session = None;
                    None
                }
            },
            None => None,
        };
        let handover = self.handover.take();
        let feedback = self.verify.feedback.take();
        let context = {
            let mut input = argv::context_input(&self.state, &self.plan, number);
            input.handover_from = handover.as_deref();
            input.verification = feedback.as_deref();
            if !agent.profile.allowed_tools {
                input.tools_by_choice = Some(&self.s.allowed_tools.value);
            }
            argv::build_context(&input)
        };
        let prompt_file = self.store.loop_log(number, "prompt");
        let prepared = argv::prepare(
            &agent,
            &self.s,
            resume.as_deref(),
            &context,
            &prompt,
            &prompt_file,
        );
        if let Some(bytes) = &prepared.prompt_file {
            crate::store::write_atomic(&prompt_file, bytes, false)
                .map_err(|e| HankError::io("failed to write", &prompt_file, e))?;
        }
        let args = prepared.args;
        let stdin = prepared.stdin;
        let baseline =
            progress::baseline_off_thread(self.s.project_dir.clone(), plan_before.clone()).await;
        let live_path = self.store.live_path();
        let mut live_file = if self.s.live.value {
            process::create_log(&live_path).ok()
        } else {
            None
        };
        self.wait = None;
        self.write_status(RunState::Running)?;
        self.emit(EventKind::LoopStarted {
            number,
            resume: resume.is_some(),
            context_bytes: context.len() as u64,
            agent: Some(agent.name().to_owned()),
        })?;
        self.store.log(
            now,
            &format!(
                "loop {number} started (agent: {}, resume: {}, format: {})",
                agent.name(),
                resume.is_some(),
                argv::asked_format(&agent, &self.s).as_str()
            ),
        );
        self.reporter.agent_started(number, resume.is_some());
        self.reporter.call_detail(
            &agent.command.program,
            &crate::agent::redact::redacted(&args, &self.secrets),
            context.len(),
            prompt.len(),
        );

        let stdout_log = self.store.loop_log(number, "out");
        let env_set = agent.env();
        // Only an answer that streams shows life while the agent works: FIRST_OUTPUT_TIMEOUT
        // and IDLE_TIMEOUT watch it (hank asks for stream-json whenever the profile has it).
        let streaming = argv::output_streams(&agent, &self.s);
        let asked = argv::asked_format(&agent, &self.s);
        let watch = |d: Duration| (streaming && !d.is_zero()).then_some(d);
        let spawn = Spawn {
            program: &agent.command.program,
            args: &args,
            cwd: &self.s.project_dir,
            stdin,
            stdout_log: stdout_log.clone(),
            stderr_log: self.store.loop_log(number, "err"),
            timeout: self.s.timeout.value,
            grace: GRACE,
            live: self.s.live.value,
            env_remove: crate::agent::client::ENV_REMOVED,
            env_set: &env_set,
            stop_after_result: matches!(agent.profile.parser, Parser::Claude),
            marker: Some(&self.marker),
            idle_timeout: watch(self.s.idle_timeout.value),
            first_output_timeout: watch(self.s.first_output_timeout.value),
        };
        let reporter = &self.reporter;
        let lock = &mut self.lock;
        let on_spawn = |t: process::Tracked<'_>| match t {
            process::Tracked::Spawned(pgid) => {
                if let Some(ticks) = process::start_ticks(pgid) {
                    lock.record_agent(Some((pgid, ticks)));
                }
            }
            process::Tracked::Outside(procs) => lock.record_procs(procs),
        };
        let wall = &self.clock;
        let parser = &agent.profile.parser;
        let secrets = &self.secrets;
        let called = call::call(
            spawn,
            &agent.profile.parser,
            asked,
            self.cancel.clone(),
            on_spawn,
            |line| {
                let items = match parser {
                    Parser::Claude => analysis::live_items(line),
                    Parser::Mapped(m) => analysis::mapped_live_items(m, line),
                };
                for mut item in items {
                    crate::agent::redact::redact_live(&mut item, secrets);
                    if let Some(f) = live_file.as_mut() {
                        let _ = f.write_all(crate::report::live_log_line(&item).as_bytes());
                    }
                    reporter.live(&item);
                }
            },
            // Reset times printed without a zone ("resets 7pm") are in the local zone.
            || analysis::Clock::new(wall.now(), jiff::tz::TimeZone::system()),
        )
        .await
        .map_err(HankError::usage)?;
        self.reporter.agent_finished();
        self.lock.record_agent(None);

        // 6. analyze + progress
        let outcome = called.outcome;
        let mut analysis = called.analysis;
        if let Parser::Mapped(m) = &agent.profile.parser
            && m.session_total_tokens
        {
            analysis.tokens = self.state.agents.tokens_of_call(
                agent.name(),
                analysis.session_id.as_deref(),
                analysis.tokens,
            );
        }
        let clock_now = self.clock.now();
        crate::agent::redact::redact_analysis(&mut analysis, &self.secrets);
        // Every call is paid for: a cost the answer should hold but does not is estimated.
        self.charge(&agent, number, &mut analysis, clock_now);
        for w in crate::agent::vet::vet(&mut analysis, agent.profile.session_ids()) {
            self.warn(&w);
        }
        self.reporter.analysis_detail(&analysis);
        if let Some(left) = decide::credential_expiry_due(
            analysis.credential_expires_at,
            self.credential_warned,
            clock_now,
        ) {
            self.credential_warned = analysis.credential_expires_at;
            let msg = analysis
                .credential_expires_at
                .map(|at| crate::report::credential_warning(at, left))
                .unwrap_or_default();
            self.warn(&msg);
        }
        // The agent may have removed .hank/ entirely: recreate it so the state can be saved;
        // the next integrity check then stops the run (integrity_failure).
        self.store.ensure_dirs()?;
        for note in self.store.take_notes() {
            self.warn(&note);
        }
        let plan_after = self.s.read_fix_plan().unwrap_or_default();
        let mut progress =
            progress::measure_off_thread(self.s.project_dir.clone(), baseline, plan_after.clone())
                .await;
        self.plan = fixplan::parse(&plan_after, &self.s.optional_sections.value);
        // VERIFY_EVERY_LOOP: the project's check, not the agent's word, is the tests' state.
        let regressed = self.verify_loop(number).await?.unwrap_or(false);
        progress.check_fixed = self.verify.fixed_after == Some(number);

        // 7. fold
        let now = self.clock.now();
        let interrupted_by_hank = outcome.interrupted || self.interrupted();
        // A startup hang is retried at once, uncounted, up to 2 in a row (policy::startup).
        let (hang, streak) = startup::after_call(
            self.state.startup_hangs,
            outcome.startup_hang && !interrupted_by_hank,
        );
        self.state.startup_hangs = streak;
        let free_retry = matches!(hang, HangVerdict::RetryNow { .. });
        self.warn_hang(number, hang);
        if is_failed_call(&analysis) && progress.did_the_work() && !interrupted_by_hank {
            let what = analysis
                .error
                .as_ref()
                .map_or_else(|| "an error".to_owned(), |e| e.kind.as_str().to_owned());
            let work = if progress.plan_items_checked > 0 {
                "checked a fix_plan item"
            } else {
                "turned the failing check green"
            };
            self.warn(&format!(
                "loop {number}: the agent reported {what} but {work}: counted as productive, not as a failed call"
            ));
        }
        let (decide_cfg, breaker_cfg) = (self.s.decide_config(), self.s.breaker_config());
        self.fold(&Fold {
            number,
            now,
            resumed: resume.as_deref(),
            analysis: &analysis,
            progress: &progress,
            regressed,
            decide: &decide_cfg,
            breaker: &breaker_cfg,
            interrupted_by_hank,
            free_retry,
        })?;
        self.state
            .agents
            .count(agent.name(), analysis.cost_usd, analysis.tokens.sum());
        let dcfg = self.s.decide_config();
        // The backoff grows with failures of either kind (an outage does not raise
        // failure_streak: it is judged by time).
        self.state.consecutive_failures = self
            .state
            .breaker
            .failure_streak
            .saturating_add(self.state.breaker.transient_streak);

        // 8. decide; a "done" claim stands only when the project's check passes
        let plan_complete = self.plan_complete();
        let mut decision = self.decide_after(&analysis, now, plan_complete, true, &dcfg);
        // A free retry goes at once (no backoff, no loop delay); a productive error result
        // is no failure (no backoff).
        let productive_error = is_failed_call(&analysis) && progress.did_the_work();
        decision = decide::uncounted(decision, free_retry, productive_error);
        self.retry_now = free_retry && decision == Decision::Continue;
        if interrupted_by_hank {
            decision = Decision::Stop(ExitReason::Interrupted);
        } else if let Decision::Stop(reason) = decision
            && reason.is_completion()
        {
            decision = match self.verify_claim(reason).await? {
                Some(stop) => Decision::Stop(stop),
                // Rejected: every rule but the claims still applies (breaker, limits, waits).
                None => self.decide_after(&analysis, now, plan_complete, false, &dcfg),
            };
        }
        decision = self.failover_after(&analysis, decision);
        self.note_usage_limit(&analysis, &decision);
        if decision == Decision::RetryWithoutSession {
            match session::on_unknown_session(resume.is_some()) {
                UnknownSession::RetryFresh => {
                    self.reporter
                        .info("the agent no longer knows the session; retrying without it");
                    self.state.session = None;
                    self.save()?;
                }
                UnknownSession::Fatal => decision = Decision::Stop(ExitReason::AgentFatal),
            }
        }

        self.prune_logs();
        // 9. report. When the next loop starts at once, its "running" status (which carries
        // this loop's results) is the next write: skip a redundant one here.
        let next_starts_now =
            decision == Decision::Continue && self.s.loop_delay_seconds.value == 0;
        // The folded state is saved now, unless the next loop starts at once: then its save
        // before the spawn (a few hundred µs of pure work later) carries it, and every other
        // way out of the loop (stop, wait, error) saves first. The call itself is on disk since
        // before the spawn either way.
        if !next_starts_now {
            self.store.save_state_with(&self.state, false)?;
        }
        self.report_loop(
            number,
            &analysis,
            &progress,
            outcome.duration,
            !next_starts_now,
        )?;
        Ok(decision)
    }

    /// Says what a startup hang means for the run (nothing for other calls).
    fn warn_hang(&mut self, number: u64, hang: HangVerdict) {
        let limit = crate::settings::resolve::format_duration(self.s.first_output_timeout.value);
        match hang {
            HangVerdict::NotAHang => {}
            HangVerdict::RetryNow { nth } => self.warn(&format!(
                "loop {number}: no output within FIRST_OUTPUT_TIMEOUT ({limit}): a startup hang; retrying at once (hang {nth} of {} in a row not counted)",
                startup::FREE_RETRIES
            )),
            HangVerdict::CountAsTimeout { nth } => self.warn(&format!(
                "loop {number}: no output within FIRST_OUTPUT_TIMEOUT ({limit}): startup hang {nth} in a row, counted as a timeout"
            )),
        }
    }

    /// LOG_RETENTION: keeps the logs of the newest loops (and as many check outputs).
    /// At start the logs folder is scanned once; after that, only the logs that just fell out
    /// of the window are removed, by name (no directory scan on the loop's path).
    fn prune_logs(&mut self) {
        let keep = self.s.log_retention.value;
        if keep == 0 {
            return;
        }
        let from = |newest: u64| newest.saturating_sub(keep).saturating_add(1);
        let now = (from(self.state.loop_count), from(self.state.verify_count));
        match self.logs_kept_from {
            None => {
                self.store.prune_logs(now.0, now.1);
            }
            Some(before) => self.store.remove_logs(before.0..now.0, before.1..now.1),
        }
        self.logs_kept_from = Some(now);
    }

    /// [`decide::after_loop`] over this loop and the state; `claims` false ignores "done"
    /// claims (after the check rejected one).
    fn decide_after(
        &self,
        analysis: &Analysis,
        now: Timestamp,
        plan_complete: bool,
        claims: bool,
        dcfg: &decide::DecideConfig,
    ) -> Decision {
        decide::after_loop(&AfterLoop {
            analysis,
            history: &self.state.history,
            breaker: &self.state.breaker,
            plan_complete,
            claims,
            loops_this_run: self.loops_this_run,
            cost_this_run: self.cost_this_run,
            consecutive_failures: self.state.consecutive_failures,
            now,
            cfg: dcfg,
        })
    }

    /// Step 7: folds one loop into the persistent state ([`State::fold`], pure) and reports
    /// what the fold found (denial warnings, a breaker transition).
    fn fold(&mut self, fold: &Fold<'_>) -> Result<()> {
        self.cost_this_run += fold.analysis.cost_usd;
        let folded = self.state.fold(fold);
        for w in crate::report::denial_warnings(&folded.denied, &folded.denial_warnings) {
            self.warn(&w);
        }
        if let Some(t) = folded.transition {
            self.reporter
                .info(&format!("circuit {} → {}: {}", t.from, t.to, t.reason));
            self.emit_transition(&t)?;
        }
        Ok(())
    }

    /// Step 9: status.json, the `agent_finished` event, the log line and the summary block.
    fn report_loop(
        &mut self,
        number: u64,
        a: &Analysis,
        p: &progress::Progress,
        duration: Duration,
        write_status: bool,
    ) -> Result<()> {
        self.notify.questions(&a.questions);
        let mut finished = AgentFinished::of(number, a, p, duration);
        finished.agent = Some(self.agent().name().to_owned());
        if let Some(check) = self.verify.loop_result(number) {
            finished.tests_status = Some(if check.passed { "PASSING" } else { "FAILING" }.into());
        }
        self.last_loop = Some(LastLoop::of(&finished));
        self.keep_receipt(&finished);
        if write_status {
            self.write_status(RunState::Running)?;
        }
        self.store
            .log(self.clock.now(), &crate::report::loop_log_line(&finished));
        self.reporter.summary(&LoopSummary::of(
            &finished,
            a,
            (self.plan.done(), self.plan.total()),
            self.state.totals.cost_usd,
            duration,
            self.state.breaker.state,
        ));
        self.emit(EventKind::AgentFinished(Box::new(finished)))
    }

    fn finish(&mut self, reason: ExitReason) -> Result<u8> {
        let now = self.clock.now();
        if session::ends_session(reason) {
            self.state.session = None;
        }
        self.save()?;
        let run_state = match reason.code() {
            crate::exit::OK => RunState::Completed,
            crate::exit::HALTED => RunState::Halted,
            _ => RunState::Stopped,
        };
        self.wait = None;
        self.refresh_plan();
        let mut message = crate::report::exit_message(reason, &self.state, &self.plan);
        message.push_str(&self.limit_detail(reason));
        message.push_str(&self.verification_summary(reason));
        if reason == ExitReason::CircuitOpen
            && let Some(end) = self
                .state
                .breaker
                .cooldown_ends_at(&self.s.breaker_config())
        {
            message.push_str(&crate::report::cooldown_note(end, self.clock.now()));
        }
        self.store
            .write_status(&self.status(run_state, Some(reason)))?;
        self.emit(EventKind::Exit {
            exit_reason: Some(reason),
            exit_code: reason.code(),
            message: message.clone(),
            verified: self.verify.verified,
        })?;
        self.store.log(
            now,
            &format!("exit {} ({}): {message}", reason.as_str(), reason.code()),
        );
        if reason.code() == crate::exit::OK {
            self.reporter
                .info(&format!("done: {message} [{}]", reason.as_str()));
        } else {
            self.reporter.warn(&format!(
                "stopped: {message} [{}, exit {}]",
                reason.as_str(),
                reason.code()
            ));
        }
        for line in self.receipt_summary() {
            self.reporter.info(&line);
        }
        if self.s.notify.value {
            crate::report::notify(&format!("hank: {}", reason.as_str()), &message);
        }
        Ok(reason.code())
    }
}
