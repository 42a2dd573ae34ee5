//! The loop's driver. [`crate::policy::run`]'s state machine decides; the driver asks
//! [`Run::next`] for a step, executes it through [`Effects`] and reports what happened with
//! [`Run::on`]. Every rule is in the pure modules; every effect (the agent, the check,
//! state.json, status.json, events, the log, the terminal, sleeping) is an [`Effects`]
//! method, real in `hank run` ([`crate::effects::Real`], opened by `commands/run.rs`), a
//! test one in `engine/tests/`.
//!
//! One loop (HANK.md §3), as steps: `Observe` (files, plan, breaker, caps, windows, agents)
//! and `Check` / `Failover` / `FreshSession` (what a decision leaves) and `Deliver` in
//! `drive.rs`; `Call` (on the ledger and saved before the spawn, then the agent, the answer,
//! progress, the fold, the decision, the report) and the agent chain in `call.rs`; `Wait` in
//! `wait.rs`; `Stop` here. `output.rs` tells the news (status, events, warnings) and lends
//! the checks the run's records.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! the driver of `policy::run` (it reads hank's files — plan, prompt, `.hankrc` — through
//! `Settings`; every other effect goes through `Effects`): `mod.rs` (`Engine`, `drive` — what
//! `commands/run.rs` calls once it has opened the real effects —, the start: breaker and agents,
//! the saved wait that still stands (`windows::resume_saved`) handed to `Run::resuming`, the
//! baseline check; the end: the exit summary `report::exit_summary`, receipts), `drive.rs`
//! (`Run::next` → execute the step → `Run::on(fact)`: the observation before a call — the files
//! and the plan `PlanFile::look_all`, the plan's completeness `Checks::plan_complete`, the fleet's
//! verdict when `Run::reserves` says so, `Observation::reserved` —, control commands and `hank ctl
//! set`, checks/failover/session drop as steps, the delivery step and its `RunSide`: a round of
//! `deliver::in_run` on the effects' clock, `effects/host.rs`), `call.rs` (one call as the
//! sequence call → measure → fold → judge → settle → report: `State::start_call` and a save first,
//! context and argv, `Effects::call_agent`, then one `agent::answer::Call` handed to
//! `answer::complete`/`fold_call`/`judge`/`report`; the agent chain: `failover::Agents::take_turn`,
//! failover's pick), `review.rs` (one round of the independent reviewer `REVIEW_AGENT`, issue 39,
//! once `Run::review_gates` let it through the worker's gates from the look before it; the input —
//! items done, the diff since the run's start or the last round through
//! `Effects::snapshot_tree`/`diff_trees` (`git::worktree_tree`: a temporary index, the user's
//! untouched), the check, earlier findings — `policy::review::prompt`; the call through
//! `Effects::call_agent` with `argv::prepare_review` and `AgentCall::read_only` (the sandbox's
//! project read-only, `Rules::read_only_in`); its accounting on every cap; the verdict
//! `policy::review::of_answer` told as `News::Review` (the `review` event, status.json's `review`),
//! then `Fact::Reviewed`), `wait.rs` (one wait step: what it says, shows and keeps is
//! `WaitFor::plan`, a shown wait saved and told, `Effects::wait_until`, the commands it returns
//! handed to `Run::on`, `Run::wait_cut`/`Run::woke` deciding the end), `output.rs` (`tell`: a piece
//! of `effects::News` with status.json from `Status::of`; limit notes; `checks()` lends
//! `effects::check::Checks` the run's records); the session a call resumes is
//! `policy::session::resume_id`; the driver's tests: `engine/tests/mod.rs`.

use jiff::Timestamp;

use crate::agent::profile::Agent;
use crate::effects::plan::PlanFile;
use crate::effects::{Effects, News, Say};
use crate::error::Result;
use crate::exit::ExitReason;
use crate::policy::budget::Resume;
use crate::policy::decide::UsageLimitPolicy;
use crate::policy::run::{Observation, Run, RunConfig};
use crate::policy::verification::Verification;
use crate::policy::{session, windows};
use crate::settings::Settings;
use crate::store::{RunState, State};

mod call;
mod drive;
mod output;
mod review;
mod wait;

struct Engine {
    s: Settings,
    /// The agents of the run in failover order (one unless `AGENTS` names more).
    chain: crate::agent::chain::Chain,
    state: State,
    /// Everything done to the world ([`Effects`]).
    fx: Box<dyn Effects>,
    /// The loop's state machine: every ordering rule ([`crate::policy::run`]).
    run: Run,
    /// What the last look before a call saw (the window and agent gates name it).
    seen: Option<Observation>,
    /// fix_plan.md as the run last read it.
    fix_plan: PlanFile,
    /// What the run shows beyond state.json (status.json's parts, the exit summary's).
    shown: crate::effects::Shown,
    /// The login expiry last warned about (once per expiry time).
    credential_warned: Option<Timestamp>,
    /// VERIFY_COMMAND as the run started, and what its checks found.
    verify: Verification,
    /// When the run started (MAX_RUNTIME counts from it).
    run_started: Timestamp,
    /// VERIFY_AT_START: the baseline runs at the first look (after a resumed wait; never
    /// before a stop at once).
    baseline_due: bool,
    /// DELIVER=branch|pr: the run's delivery (`deliver.rs`, [`crate::deliver::in_run`]).
    delivery: Option<crate::deliver::in_run::InRun>,
    /// REVIEW_AGENT: the independent reviewer and its rounds (`review.rs`).
    reviewer: crate::agent::chain::Reviewer,
}

impl Engine {
    async fn run(&mut self) -> Result<u8> {
        match self.run_loop().await {
            Ok(reason) => self.finish(reason),
            Err(err) => {
                // Leave an honest status behind: the run failed, and why.
                let _ = self.fx.persist(&self.state, false);
                let _ = self.tell(News::Failed(&err.to_string()));
                Err(err)
            }
        }
    }

    async fn run_loop(&mut self) -> Result<ExitReason> {
        self.start_delivery().await?;
        let now = self.fx.now();
        self.fx
            .log(&format!("hank run started (pid {})", std::process::id()));
        let bcfg = self.s.breaker_config();
        let auto = self.s.auto_reset_circuit.value;
        if let Some(t) = self.state.breaker.on_run_start(now, &bcfg, auto) {
            self.tell(News::Transition(&t))?;
        }
        self.state.agents.on_run_start(now);
        self.run_started = now;
        self.save()?;
        self.fix_plan.look(&self.s);
        self.verify = crate::effects::check::verification_at_start(&self.s, &self.fix_plan.plan);
        self.review_baseline();
        if let Some(w) = crate::agent::answer::uncharged_warning(self.chain.agents(), &self.s) {
            self.warn(&w);
        }
        self.prune_logs();
        self.tell(News::Status(RunState::Starting))?;
        let exit = self.s.on_usage_limit.value == UsageLimitPolicy::Exit;
        let (windows, limits) = (&self.state.windows, &self.s.max_window_percent.value);
        let resume = windows::resume_saved(self.state.wait, windows, limits, self.fx.now(), exit);
        if let Resume::Wait(w) = resume {
            self.fx.say(Say::Info(&crate::report::resuming_wait(&w)));
        }
        if resume == Resume::Call && self.state.wait.take().is_some() {
            self.save()?;
        }
        let mut run = Run::new(self.run_config(now)).resuming(resume);
        if self.delivery.is_some() {
            run = run.delivering(crate::deliver::in_run::InRun::rounds(&self.s));
        }
        self.run = run;
        self.baseline_due = self.s.verify_at_start.value;
        loop {
            let step = self.run.next(self.fx.now());
            if let Some(reason) = self.execute(step).await? {
                return Ok(reason);
            }
        }
    }

    fn finish(&mut self, reason: ExitReason) -> Result<u8> {
        if session::ends_session(reason) {
            self.state.session = None;
        }
        self.save()?;
        self.shown.wait = None;
        self.fix_plan.look(&self.s);
        let message = self.shown.exit_message(reason, &self.parts());
        let verified = self.verify.verified;
        self.tell(News::Exit {
            reason,
            message: &message,
            verified,
        })?;
        let (receipts, notify) = (&self.shown.receipts, self.s.notify.value);
        self.fx.ended(reason, &message, receipts, notify);
        Ok(reason.code())
    }
}

#[cfg(test)]
mod tests;

/// Drives a run of `s` with `agents` (the failover chain, at least one, found and checked)
/// over `fx`, from the stored `state`, until it stops; `notes` (warnings found before the
/// loop) are told first; `delivery` is the run's delivery (`DELIVER=branch|pr`), started
/// before the first call by the delivery machine's first command: the engine's entry runs no
/// git.
pub(crate) async fn drive(
    s: Settings,
    agents: Vec<Agent>,
    state: State,
    fx: Box<dyn Effects>,
    notes: Vec<String>,
    delivery: Option<crate::deliver::in_run::InRun>,
) -> Result<u8> {
    let mut engine = Engine::new(s, agents, state, fx);
    engine.delivery = delivery;
    // REVIEW_AGENT: the reviewer's profile and program, found before any call.
    engine.reviewer.agent =
        crate::agent::profile::resolve_reviewer(&engine.s)?.map(std::sync::Arc::new);
    for note in notes {
        engine.warn(&note);
    }
    let code = engine.run().await;
    engine.fx.close().await;
    code
}

impl Engine {
    /// A driver over `fx` for a run of `s` with `agents`, from the stored `state`.
    pub(super) fn new(s: Settings, agents: Vec<Agent>, state: State, fx: Box<dyn Effects>) -> Self {
        Self {
            s,
            chain: crate::agent::chain::Chain::new(agents),
            state,
            run_started: fx.now(),
            fx,
            run: Run::new(RunConfig::default()),
            seen: None,
            fix_plan: PlanFile::default(),
            shown: crate::effects::Shown::default(),
            credential_warned: None,
            verify: crate::policy::verification::Verification::default(),
            baseline_due: false,
            delivery: None,
            reviewer: crate::agent::chain::Reviewer::default(),
        }
    }
}
