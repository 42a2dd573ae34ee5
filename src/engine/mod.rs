//! The loop's driver. The order of the rules is [`crate::policy::run`]'s state machine: the
//! driver asks [`Run::next`] for a step, executes it (`drive.rs`) and reports what happened
//! with [`Run::on`]. Every threshold and rule lives in the pure modules
//! ([`crate::policy::budget`], [`crate::policy::breaker`], [`crate::policy::decide`],
//! [`crate::analysis`]); this module wires them to the process runner, the state store and
//! the terminal.
//!
//! One loop (HANK.md §3), as steps:
//! 1. `Observe` — hank's files still exist, the plan, the breaker, the rolling-hour caps, the
//!    usage windows, the agent chain; `Run` applies the gates in order (integrity,
//!    MAX_RUNTIME, a complete plan checked by VERIFY_COMMAND, max loops, cost budget, breaker,
//!    caps, windows, a pause, the agent);
//! 2. `Call` — the call is on the ledger and saved **before** spawning, then the agent runs;
//! 3. the answer analyzed, progress measured (with VERIFY_EVERY_LOOP the check: a loop that
//!    turns it red made no progress), folded into history, breaker and totals, saved;
//! 4. the decision: `Fact::Answered`, then what it leaves (`Check` of a "done" claim,
//!    `Failover`, `FreshSession`); status.json, events, the loop summary;
//! 5. `Wait` (a limit, backoff, the loop delay, a pause) or `Stop`.
//!
//! Beside this file: `drive.rs` (the steps, [`drive::Effects`]), `start.rs` (lock, runtime,
//! loading the state, orphan cleanup), `wait.rs` (every wait, with its countdown and status),
//! `output.rs` (status.json, state.json, events, warnings), `verify.rs` (VERIFY_COMMAND:
//! baseline, per-loop check, verified completion), `agents.rs`, `windows.rs`.

use std::io::Write;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;

use crate::agent::argv;
use crate::agent::call;
use crate::agent::process::{self, Spawn};
use crate::agent::profile::{Agent, Parser};
use crate::analysis::{self, Analysis};
use crate::error::{HankError, Result};
use crate::exit::ExitReason;
use crate::policy::breaker::is_failed_call;
use crate::policy::budget::WaitReason;
use crate::policy::decide::{self, AfterLoop, Decision};
use crate::policy::fixplan::{self, Plan};
use crate::policy::run::{Answer, Fact, Observation, Run};
use crate::policy::session;
use crate::policy::startup::{self, HangVerdict};
use crate::progress;
use crate::report::{LoopSummary, Reporter};
use crate::settings::Settings;
use crate::store::schema::{AgentFinished, Fold};
use crate::store::{EventKind, LastLoop, LockGuard, RunState, State, Store};

/// What the agent's environment never carries: the client settings that fight the loop
/// ([`crate::agent::client::ENV_REMOVED`]) and, in a fleet, where the fleet-wide call ledger is
/// (an agent that knew it could empty the ledger and lift every task's call cap).
pub(crate) const AGENT_ENV_REMOVED: &[&str] = &[
    "CLAUDE_CODE_RETRY_WATCHDOG",
    crate::store::fleet_ledger::ENV,
];

/// Time between SIGTERM and SIGKILL when stopping the agent.
pub(crate) const GRACE: Duration = Duration::from_secs(5);

mod agents;
mod drive;
mod output;
mod start;
pub(crate) mod verify;
mod wait;
mod windows;

pub(crate) use start::start;

/// One loop's answer and progress, for the steps after the call.
struct Looked<'a> {
    number: u64,
    now: Timestamp,
    resume: Option<&'a str>,
    analysis: &'a Analysis,
    progress: &'a progress::Progress,
}

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
    /// The loop's state machine: every ordering rule ([`crate::policy::run`]).
    run: Run,
    /// What the last look before a call saw (the window and agent gates name it).
    seen: Option<Observation>,
    /// fix_plan.md as the last look read it (the progress baseline of the next call).
    plan_text: String,
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
    /// When this run started (MAX_RUNTIME counts from it, also after `hank ctl set`).
    run_started: Timestamp,
    /// LOG_RETENTION: the first loop and check whose logs are kept (`None` before the first
    /// pruning of the run).
    logs_kept_from: Option<(u64, u64)>,
    /// The clock, sleeping and outside facts ([`drive::Effects`]).
    clock: Box<dyn drive::Effects>,
    /// The tag in every agent's environment (descendants and orphans are found by it).
    marker: process::Marker,
    /// The usage limit or window the run waits for or stopped at, named for the user.
    limit_note: Option<String>,
    /// This run's loops, for the receipts in the exit summary.
    run_loops: Vec<crate::policy::receipts::LoopCost>,
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
        self.run = Run::new(self.run_config(now));
        self.run_started = now;
        self.run_deadline =
            crate::policy::run::RunConfig::deadline_of(now, self.s.max_runtime.value);
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
        loop {
            let step = self.run.next(self.clock.now());
            if let Some(reason) = self.execute(step).await? {
                return Ok(reason);
            }
        }
    }

    /// Steps 5–9 for one loop; its decision is the state machine's ([`Run::decision`]).
    async fn one_loop(&mut self, plan_before: String) -> Result<()> {
        let now = self.clock.now();
        self.state.loop_count += 1;
        let number = self.state.loop_count;
        self.run.on(Fact::Calling, now);
        self.state.totals.loops += 1;
        // The call is on the ledger before the agent exists: no crash of hank (kill -9
        // included) can under-count it. The rename is atomic; no fdatasync (it costs ms per
        // loop on ext4 and only matters if the whole machine goes down mid-write).
        self.state.ledger.record_call(now);
        self.store.save_state_with(&self.state, false)?;

        let prompt = self.s.read_prompt()?;
        let agent = self.agent().clone();
        let resume = self.resume_id(&agent, now);
        let context = self.context_for(&agent, number);
        let (args, stdin) =
            self.prepare_call(&agent, number, resume.as_deref(), &context, &prompt)?;
        let baseline =
            progress::baseline_off_thread(self.s.project_dir.clone(), plan_before.clone()).await;
        self.announce(
            number,
            now,
            &agent,
            resume.is_some(),
            &args,
            (context.len(), prompt.len()),
        )?;
        let called = self.spawn_agent(number, &agent, &args, stdin).await?;

        // 6. analyze + progress
        let outcome = called.outcome;
        let mut analysis = called.analysis;
        self.take_answer(&agent, number, &mut analysis)?;
        let (progress, regressed) = self.measure(number, baseline).await?;

        let now = self.clock.now();
        let looked = Looked {
            number,
            now,
            resume: resume.as_deref(),
            analysis: &analysis,
            progress: &progress,
        };
        let (free_retry, interrupted_by_hank) = self.fold_loop(
            &looked,
            &agent,
            regressed,
            outcome.startup_hang,
            outcome.interrupted,
        )?;
        let decision = self
            .decide_loop(&looked, free_retry, interrupted_by_hank)
            .await?;
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
        )
    }

    /// What loop `number` changed (the plan re-read) and, with VERIFY_EVERY_LOOP, whether
    /// the project's check turned red (`true`: regressed).
    async fn measure(
        &mut self,
        number: u64,
        baseline: progress::Baseline,
    ) -> Result<(progress::Progress, bool)> {
        let plan_after = self.s.read_fix_plan().unwrap_or_default();
        let mut progress =
            progress::measure_off_thread(self.s.project_dir.clone(), baseline, plan_after.clone())
                .await;
        self.plan = fixplan::parse(&plan_after, &self.s.optional_sections.value);
        // VERIFY_EVERY_LOOP: the project's check, not the agent's word, is the tests' state.
        let regressed = self.verify_loop(number).await?.unwrap_or(false);
        progress.check_fixed = self.verify.fixed_after == Some(number);
        Ok((progress, regressed))
    }

    /// The session to resume, when the profile resumes and the stored id is one the CLI
    /// makes.
    fn resume_id(&mut self, agent: &Agent, now: Timestamp) -> Option<String> {
        let resume = self
            .s
            .resumable(self.state.session.as_ref(), now)
            .map(|x| x.id.clone())
            .filter(|_| agent.profile.resume);
        // state.json is in the agent's reach: a stored id goes back on the command line only
        // in the CLI's own alphabet.
        match resume {
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
        }
    }

    /// The loop context of call `number`.
    fn context_for(&mut self, agent: &Agent, number: u64) -> String {
        let handover = self.handover.take();
        let feedback = self.verify.feedback.take();
        {
            let mut input = argv::context_input(&self.state, &self.plan, number);
            input.handover_from = handover.as_deref();
            input.verification = feedback.as_deref();
            if !agent.profile.allowed_tools {
                input.tools_by_choice = Some(&self.s.allowed_tools.value);
            }
            // Notes from outside the run (live control, the fleet, delivery) go to one context.
            argv::build_context(&input) + &argv::outside_notes(&self.run.take_notes())
        }
    }

    /// The argv and stdin of call `number` (a prompt file written first when the profile
    /// takes one).
    fn prepare_call(
        &mut self,
        agent: &Agent,
        number: u64,
        resume: Option<&str>,
        context: &str,
        prompt: &[u8],
    ) -> Result<(Vec<String>, Vec<u8>)> {
        let prompt_file = self.store.loop_log(number, "prompt");
        let prepared = argv::prepare(agent, &self.s, resume, context, prompt, &prompt_file);
        if let Some(bytes) = &prepared.prompt_file {
            crate::store::write_atomic(&prompt_file, bytes, false)
                .map_err(|e| HankError::io("failed to write", &prompt_file, e))?;
        }
        Ok((prepared.args, prepared.stdin))
    }

    /// Status `running`, the `loop_started` event, the log line and the terminal's line.
    fn announce(
        &mut self,
        number: u64,
        now: Timestamp,
        agent: &Agent,
        resume: bool,
        args: &[String],
        (context_len, prompt_len): (usize, usize),
    ) -> Result<()> {
        self.wait = None;
        self.write_status(RunState::Running)?;
        self.emit(EventKind::LoopStarted {
            number,
            resume,
            context_bytes: context_len as u64,
            agent: Some(agent.name().to_owned()),
        })?;
        self.store.log(
            now,
            &format!(
                "loop {number} started (agent: {}, resume: {}, format: {})",
                agent.name(),
                resume,
                argv::asked_format(agent, &self.s).as_str()
            ),
        );
        self.reporter.agent_started(number, resume);
        self.reporter.call_detail(
            &agent.command.program,
            &crate::agent::redact::redacted(args, &self.secrets),
            context_len,
            prompt_len,
        );

        Ok(())
    }

    /// Runs the agent (step 5): its group tracked in the lock, live lines to the terminal and
    /// `live.log`, the answer analyzed in the format asked.
    async fn spawn_agent(
        &mut self,
        number: u64,
        agent: &Agent,
        args: &[String],
        stdin: Vec<u8>,
    ) -> Result<call::Called> {
        let live_path = self.store.live_path();
        let mut live_file = if self.s.live.value {
            process::create_log(&live_path).ok()
        } else {
            None
        };
        let stdout_log = self.store.loop_log(number, "out");
        let env_set = agent.env();
        // Only an answer that streams shows life while the agent works: FIRST_OUTPUT_TIMEOUT
        // and IDLE_TIMEOUT watch it (hank asks for stream-json whenever the profile has it).
        let streaming = argv::output_streams(agent, &self.s);
        let asked = argv::asked_format(agent, &self.s);
        let watch = |d: Duration| (streaming && !d.is_zero()).then_some(d);
        let spawn = Spawn {
            program: &agent.command.program,
            args,
            cwd: &self.s.project_dir,
            stdin,
            stdout_log: stdout_log.clone(),
            stderr_log: self.store.loop_log(number, "err"),
            timeout: self.s.timeout.value,
            grace: GRACE,
            live: self.s.live.value,
            env_remove: AGENT_ENV_REMOVED,
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
        Ok(called)
    }

    /// The answer made safe and complete: session tokens, redaction, the charge, vetting,
    /// the login expiry warning; `.hank/` recreated if the agent removed it.
    fn take_answer(&mut self, agent: &Agent, number: u64, analysis: &mut Analysis) -> Result<()> {
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
        crate::agent::redact::redact_analysis(analysis, &self.secrets);
        // Every call is paid for: a cost the answer should hold but does not is estimated.
        self.charge(agent, number, analysis, clock_now);
        for w in crate::agent::vet::vet(analysis, agent.profile.session_ids()) {
            self.warn(&w);
        }
        self.reporter.analysis_detail(analysis);
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
        Ok(())
    }

    /// Step 7: startup hangs, the fold into history, breaker and totals, the failure streak.
    /// Returns (free retry, interrupted by hank).
    fn fold_loop(
        &mut self,
        l: &Looked<'_>,
        agent: &Agent,
        regressed: bool,
        startup_hang: bool,
        outcome_interrupted: bool,
    ) -> Result<(bool, bool)> {
        let (number, now, analysis, progress) = (l.number, l.now, l.analysis, l.progress);
        let interrupted_by_hank = outcome_interrupted || self.interrupted();
        // A startup hang is retried at once, uncounted, up to 2 in a row (policy::startup).
        let (hang, streak) = startup::after_call(
            self.state.startup_hangs,
            startup_hang && !interrupted_by_hank,
        );
        self.state.startup_hangs = streak;
        let free_retry = matches!(hang, HangVerdict::RetryNow { .. });
        self.warn_hang(number, hang);
        if is_failed_call(analysis) && progress.did_the_work() && !interrupted_by_hank {
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
            resumed: l.resume,
            analysis,
            progress,
            regressed,
            decide: &decide_cfg,
            breaker: &breaker_cfg,
            interrupted_by_hank,
            free_retry,
        })?;
        self.state
            .agents
            .count(agent.name(), analysis.cost_usd, analysis.tokens.sum());
        // The backoff grows with failures of either kind (an outage does not raise
        // failure_streak: it is judged by time).
        self.state.consecutive_failures = self
            .state
            .breaker
            .failure_streak
            .saturating_add(self.state.breaker.transient_streak);

        Ok((free_retry, interrupted_by_hank))
    }

    /// Step 8: the answer judged by the pure rules, handed to the state machine, and what
    /// it leaves to do before its decision is final (the check, failover, a fresh session).
    async fn decide_loop(
        &mut self,
        l: &Looked<'_>,
        free_retry: bool,
        interrupted_by_hank: bool,
    ) -> Result<Decision> {
        let (now, analysis, progress) = (l.now, l.analysis, l.progress);
        let dcfg = self.s.decide_config();
        // 8. decide; a "done" claim stands only when the project's check passes (the order of
        // the rules: policy::run)
        let plan_complete = self.plan_complete();
        let answer = Answer {
            decision: self.decide_after(analysis, now, plan_complete, true, &dcfg),
            without_claims: self.decide_after(analysis, now, plan_complete, false, &dcfg),
            free_retry,
            productive_error: is_failed_call(analysis) && progress.did_the_work(),
            interrupted: interrupted_by_hank,
            error: analysis.error.is_some(),
            resumed: l.resume.is_some(),
        };
        self.run.on(Fact::Answered(answer), now);
        while let Some(step) = self.run.pending() {
            self.settle(step, analysis).await?;
        }
        let decision = self.run.decision().unwrap_or(Decision::Continue);
        self.note_usage_limit(analysis, &decision);
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
            loops_this_run: self.run.loops(),
            cost_this_run: self.run.cost(),
            consecutive_failures: self.state.consecutive_failures,
            now,
            cfg: dcfg,
        })
    }

    /// Step 7: folds one loop into the persistent state ([`State::fold`], pure) and reports
    /// what the fold found (denial warnings, a breaker transition).
    fn fold(&mut self, fold: &Fold<'_>) -> Result<()> {
        self.run.on(Fact::Spent(fold.analysis.cost_usd), fold.now);
        // In a fleet, what the call spent goes on the fleet-wide ledger too.
        crate::store::fleet_ledger::settle_from_env(
            fold.now,
            fold.analysis.tokens.sum(),
            fold.analysis.cost_usd,
        )?;
        let folded = self.state.fold(fold);
        if !fold.analysis.usage_windows.is_empty() {
            // Best effort: a run that cannot share its readings still applies them itself.
            let _ = crate::store::shared_windows::publish(&self.state.windows, fold.now);
        }
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

#[cfg(test)]
mod tests;
