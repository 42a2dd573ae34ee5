//! One call of the agent as a step: on the ledger and saved before the spawn, the context
//! and argv, the call ([`crate::effects::Effects::call_agent`]), the answer made complete,
//! progress (and the per-loop check), the fold, the decision and what it leaves to do, the
//! report.

use super::Engine;
use crate::agent::answer::{self, Call, Ended, Pricing};
use crate::agent::argv;
use crate::agent::profile::Agent;
use crate::analysis::Analysis;
use crate::effects::{AgentAnswer, AgentCall, News, Say};
use crate::error::Result;
use crate::policy::decide::Decision;
use crate::policy::run::{Fact, FailoverPick};
use crate::policy::windows;
use crate::progress::Progress;
use crate::report::local_time;

impl Engine {
    /// One loop of agent `i` (the state machine's pick) from the call to the report; its
    /// decision is the state machine's.
    pub(super) async fn one_loop(&mut self, i: usize) -> Result<()> {
        self.use_agent(i)?;
        let plan_before = self.fix_plan.take_looked();
        let now = self.fx.now();
        self.run.on(Fact::Calling, now);
        // Saved before the spawn; the rename is atomic, no fdatasync (it costs ms per loop on
        // ext4 and only matters if the whole machine goes down mid-write).
        let number = self.state.start_call(now);
        self.fx.persist(&self.state, false)?;
        let agent = self.chain.agent().clone();
        let (resume, warning) = answer::resume_id(&mut self.state, &self.s, &agent, now);
        if let Some(w) = warning {
            self.warn(&w);
        }
        let baseline = self
            .fx
            .baseline(self.s.project_dir.clone(), plan_before)
            .await;
        let mut got = self.call(&agent, number, resume.as_deref()).await?;
        self.take_answer(&agent, (number, got.duration, true), &mut got.analysis)?;
        if let Some(crash) = &got.analysis.crash {
            self.tell(News::Crashed { number, crash })?;
        }
        let (progress, regressed) = self.measure(number, baseline).await?;
        let c = Call {
            number,
            now: self.fx.now(),
            resumed: resume.as_deref(),
            agent: agent.name(),
            analysis: &got.analysis,
            progress: &progress,
            duration: got.duration,
            ended: Ended {
                startup_hang: got.startup_hang,
                interrupted: got.interrupted || self.fx.interrupted(),
                regressed,
            },
        };
        let folded = self.fold(&c)?;
        let complete = self.checks().plan_complete(false);
        let run = (&self.run, complete);
        let answered = answer::judge(&c, &self.state, run, &self.s.decide_config(), &folded);
        // The decision, a "done" claim checked, failover, a fresh session (policy::run).
        self.run.on(Fact::Answered(answered), c.now);
        while let Some(step) = self.run.pending() {
            self.settle(step, c.analysis).await?;
        }
        let decision = self.run.decision().unwrap_or(Decision::Continue);
        let tz = jiff::tz::TimeZone::system();
        self.limit_note(windows::usage_limit_note(c.analysis, &decision, &tz));
        self.prune_logs();
        let next_now = self.run.calls_at_once();
        if !next_now {
            self.fx.persist(&self.state, false)?;
        }
        self.report_loop(&c, !next_now)
    }

    /// The context, argv and stdin of call `number`, announced (status `running`, the
    /// `loop_started` event, the log line), then the call.
    async fn call(
        &mut self,
        agent: &Agent,
        number: u64,
        resume: Option<&str>,
    ) -> Result<AgentAnswer> {
        let prompt = self.s.read_prompt()?;
        let context = self.context_for(agent, number);
        let prompt_file = self.fx.prompt_file(number);
        let prepared = argv::prepare(agent, &self.s, resume, &context, &prompt, &prompt_file);
        self.shown.wait = None;
        let news = News::LoopStarted {
            number,
            resume: resume.is_some(),
            context_bytes: context.len() as u64,
            agent: agent.name(),
            format: argv::asked_format(agent, &self.s).as_str(),
        };
        let how = ((context.len(), prompt.len()), resume.is_some(), false);
        self.spawn(agent, number, prepared, how, news).await
    }

    /// Call `number` of `agent` as `prepared` (its prompt file written first), announced by
    /// `news` — the worker's and the reviewer's door; `how`: the context's and the prompt's
    /// bytes, whether a session is resumed, whether the project is read-only. A `hank ctl
    /// stop` taken during the call (it stopped the call) goes to the run now.
    pub(super) async fn spawn(
        &mut self,
        agent: &Agent,
        number: u64,
        prepared: argv::Prepared,
        (sizes, resume, read_only): ((usize, usize), bool, bool),
        news: News<'_>,
    ) -> Result<AgentAnswer> {
        self.fx
            .write_prompt(number, prepared.prompt_file.as_deref())?;
        self.tell(news)?;
        let call = AgentCall {
            number,
            agent,
            settings: &self.s,
            args: &prepared.args,
            stdin: prepared.stdin,
            resume,
            sizes,
            read_only,
        };
        let got = self.fx.call_agent(call).await?;
        if got.interrupted {
            self.poll_control();
        }
        Ok(got)
    }

    /// The loop context of call `number`; notes from outside the run (live control, the
    /// fleet, delivery) go into one context.
    fn context_for(&mut self, agent: &Agent, number: u64) -> String {
        let (handover, feedback) = (self.chain.take_handover(), self.verify.feedback.take());
        let mut input = argv::context_input(&self.state, &self.fix_plan.plan, number);
        input.handover_from = handover.as_deref();
        input.verification = feedback.as_deref();
        let by_choice = !agent.profile.allowed_tools;
        input.tools_by_choice = by_choice.then_some(&self.s.allowed_tools.value);
        argv::build_context(&input) + &argv::outside_notes(&self.run.take_notes())
    }

    /// The answer of a call made complete ([`answer::complete`]), its warnings said; a
    /// worker's (`worker`) is shown and `.hank/` recreated if the agent removed it (the next
    /// integrity check then stops the run).
    pub(super) fn take_answer(
        &mut self,
        agent: &Agent,
        (number, took, worker): (u64, std::time::Duration, bool),
        a: &mut Analysis,
    ) -> Result<()> {
        let (pricing, when) = (
            Pricing::of(&self.s),
            (self.fx.now(), &mut self.credential_warned),
        );
        let call = (agent, number, took);
        let mut warnings = answer::complete(a, call, &mut self.state, pricing, when);
        if worker {
            self.fx.say(Say::Analysis(a));
            warnings.extend(self.fx.ensure_dirs()?);
        }
        for w in warnings {
            self.warn(&w);
        }
        Ok(())
    }

    /// What loop `number` changed (the plan re-read) and, with VERIFY_EVERY_LOOP, whether
    /// the project's check turned red (`true`: regressed).
    async fn measure(
        &mut self,
        number: u64,
        base: crate::progress::Baseline,
    ) -> Result<(Progress, bool)> {
        let after = self.fix_plan.measure(&self.s);
        let mut progress = self
            .fx
            .measure(self.s.project_dir.clone(), base, after)
            .await;
        // VERIFY_EVERY_LOOP: the project's check, not the agent's word, is the tests' state.
        let regressed = self.checks().after_loop(number).await?;
        progress.check_fixed = self.verify.fixed_after == Some(number);
        Ok((progress, regressed))
    }

    /// Folds the call into the state ([`answer::fold_call`]), on the fleet's ledger too, and
    /// reports what the fold found.
    fn fold(&mut self, c: &Call<'_>) -> Result<answer::Folded> {
        let a = c.analysis;
        self.run.on(Fact::Spent(a.cost_usd), c.now);
        // In a fleet, what the call spent goes on the fleet-wide ledger too.
        self.fx.settle_call(c.now, a.tokens.sum(), a.cost_usd)?;
        let mut folded = answer::fold_call(&mut self.state, &self.s, c);
        if !a.usage_windows.is_empty() {
            // Every other hank run of this user sees the readings (best effort).
            self.fx.publish_windows(&self.state.windows, c.now);
        }
        for w in std::mem::take(&mut folded.warnings) {
            self.warn(&w);
        }
        if let Some(t) = folded.transition.take() {
            self.tell(News::Transition(&t))?;
        }
        Ok(folded)
    }

    /// The report ([`answer::report`]): status.json (`write_status`), the `agent_finished`
    /// event, the log line and the summary block.
    fn report_loop(&mut self, c: &Call<'_>, write_status: bool) -> Result<()> {
        let (check, plan) = (
            self.verify.loop_result(c.number),
            (self.fix_plan.plan.done(), self.fix_plan.plan.total()),
        );
        let (finished, summary) = answer::report(c, check, plan, &self.state);
        (self.shown).finished(&finished, &c.analysis.questions, self.fx.now());
        self.tell(News::Finished {
            finished: &finished,
            summary: &summary,
            questions: &c.analysis.questions,
            status: write_status,
        })
    }
}

impl Engine {
    /// Agent `i` (the state machine's pick) takes the call ([`crate::agent::chain::Chain`]).
    pub(super) fn use_agent(&mut self, i: usize) -> Result<()> {
        let (save, switch) = self.chain.take_turn(i, &mut self.state, local_time);
        if let Some(s) = &switch {
            self.tell(News::Switched(s))?;
        }
        if save { self.save() } else { Ok(()) }
    }

    /// After an answer with an error (failover chains only): what the chain can do now goes
    /// to the state machine, which decides.
    pub(super) fn failover_pick(&mut self, a: &Analysis) -> FailoverPick {
        let (pick, line) = self.chain.after_error(&mut self.state, a, self.fx.now());
        if let Some(line) = line {
            self.fx.say(Say::Info(&line));
        }
        pick
    }
}
