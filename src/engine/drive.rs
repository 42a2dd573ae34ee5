//! The driver: executes the state machine's steps ([`crate::policy::run`]) — looks at the
//! project and the limits, calls the agent, runs the check, waits, stops — and reports each
//! fact back. No ordering rule lives here; every effect goes through [`crate::effects::Effects`].

use jiff::Timestamp;

use super::Engine;
use crate::analysis::Analysis;
use crate::deliver::in_run::{self, RunSide};
use crate::effects::{News, Say};
use crate::error::Result;
use crate::exit::ExitReason;
use crate::policy::run::{Delivered, Fact, Observation, RunConfig, Step};
use crate::policy::windows;
use crate::store::schema::Delivery;

impl Engine {
    /// The state machine's settings for a run started at `now`.
    pub(super) fn run_config(&self, now: Timestamp) -> RunConfig {
        self.s.run_config(now, self.chain.fails_over())
    }

    /// Hands what the control source sent to the state machine.
    pub(super) fn poll_control(&mut self) {
        let commands = self.fx.poll_control();
        self.take_control(commands);
    }

    /// Hands `commands` (from the control source) to the state machine.
    pub(super) fn take_control(&mut self, commands: Vec<crate::policy::run::Control>) {
        let any = !commands.is_empty();
        for c in commands {
            self.run.on(Fact::Control(c), self.fx.now());
        }
        self.fx.tell_control(self.view());
        if any {
            self.apply_settings();
        }
    }

    /// `hank ctl set`: the new limits hold from the next gate on (the run's caps, its
    /// deadline, the call cap and the window limits are read from the settings again).
    fn apply_settings(&mut self) {
        let settings = self.run.take_settings();
        if settings.is_empty() {
            return;
        }
        // A new setting may read the plan differently: the next look reads it again.
        self.fix_plan.forget_measure();
        for line in crate::settings::live::apply_all(&mut self.s, settings) {
            match line {
                Ok(line) => self.fx.say(Say::Info(&line)),
                Err(warning) => self.warn(&warning),
            }
        }
        self.run.retune(self.run_config(self.run_started));
    }

    /// Executes one step; `Some` ends the run with that reason.
    pub(super) async fn execute(&mut self, step: Step) -> Result<Option<ExitReason>> {
        match step {
            Step::Observe => self.observe_step().await?,
            Step::Call { agent } => self.one_loop(agent).await?,
            Step::Check(_) | Step::Failover | Step::FreshSession => {
                self.settle(step, &Analysis::default()).await?;
            }
            Step::Wait { until, reason } => return self.wait_step(until, reason).await,
            Step::Review(_) => self.review_step().await?,
            Step::Deliver(reason) => self.deliver_step(reason).await?,
            Step::Stop(reason) => {
                self.gate_stop(reason);
                return Ok(Some(reason));
            }
        }
        Ok(None)
    }

    /// Steps 1–4 as facts: integrity, the plan, the breaker, the caps, the windows, the
    /// agent chain (the order of the gates is the state machine's).
    async fn observe_step(&mut self) -> Result<()> {
        if std::mem::take(&mut self.baseline_due) {
            self.checks().baseline().await?;
        }
        if self.fx.interrupted_now().await {
            self.run.on(Fact::Interrupted, self.fx.now());
            return Ok(());
        }
        self.poll_control();
        // A sibling's usage-window readings count like the run's own.
        let readings = self.run.take_readings();
        windows::observe(&mut self.state.windows, &readings, self.fx.now());
        // So do the newer readings of every other run of this user (the shared file).
        let now = self.fx.now();
        self.fx.adopt_windows(&mut self.state.windows, now);
        let o = self.observe()?;
        self.seen = Some(o.clone());
        self.run.on(Fact::Observed(o), self.fx.now());
        Ok(())
    }

    fn observe(&mut self) -> Result<Observation> {
        let (missing_files, warning) = self.fix_plan.look_all(&self.s)?;
        if let Some(w) = warning {
            self.warn(&w);
        }
        let plan_complete = !missing_files && self.checks().plan_complete(true);
        let now = self.fx.now();
        let limits = self.s.budget_limits();
        let mut o = Observation {
            missing_files,
            plan_complete,
            breaker_open: self.state.breaker.is_open(),
            budget: self.state.ledger.check(now, &limits),
            window: windows::check(&self.state.windows, &self.s.max_window_percent.value, now),
            pick: self.state.agents.pick(&self.chain.names(), now),
        };
        // In a fleet, the fleet-wide ledger takes the call (a review round's too).
        if self.run.reserves(&o) {
            let limits = self.s.fleet_limits();
            if let Some(r) = o.reserved(self.fx.reserve_call(now, &limits)?) {
                self.run.on(Fact::FleetLimit(r), now);
            }
        }
        Ok(o)
    }

    /// The effects that finish a decision: the check of a "done" claim, failover, dropping
    /// an unknown session.
    pub(super) async fn settle(&mut self, step: Step, analysis: &Analysis) -> Result<()> {
        match step {
            Step::Check(reason) => {
                let verdict = self.checks().claim(reason).await?;
                self.run.on(Fact::Checked(verdict), self.fx.now());
            }
            Step::Failover => {
                let pick = self.failover_pick(analysis);
                self.run.on(Fact::FailedOver(pick), self.fx.now());
            }
            Step::FreshSession => {
                let line = "the agent no longer knows the session; retrying without it";
                self.fx.say(Say::Info(line));
                self.state.session = None;
                self.save()?;
                self.run.on(Fact::SessionDropped, self.fx.now());
            }
            _ => {}
        }
        Ok(())
    }

    /// What a stop at a gate says first: the window at its limit, the agents that cannot work.
    fn gate_stop(&mut self, reason: ExitReason) {
        if !self.run.at_gates() {
            return;
        }
        match reason {
            ExitReason::UsageWindow => self.window_note(None),
            ExitReason::AgentFatal => {
                let note = crate::policy::failover::none_can_work(&self.state.agents);
                self.warn(&note);
            }
            _ => {}
        }
    }
}

impl Engine {
    /// DELIVER=branch|pr: started before any call, by the delivery machine's first command
    /// (a refusal is the run's error).
    pub(super) async fn start_delivery(&mut self) -> Result<()> {
        let Some(mut d) = self.delivery.take() else {
            return Ok(());
        };
        let started = d.start(self).await;
        self.delivery = Some(d);
        started
    }

    /// Delivers the verified completion `reason`, then reports [`Fact::Delivered`].
    pub(super) async fn deliver_step(&mut self, reason: ExitReason) -> Result<()> {
        let outcome = match self.delivery.take() {
            Some(mut d) => {
                let outcome = d.deliver(reason, self).await;
                self.delivery = Some(d);
                outcome?
            }
            None => Delivered::Final(reason),
        };
        self.shown.delivering = None;
        self.run.on(Fact::Delivered(outcome), self.fx.now());
        Ok(())
    }
}

/// The run a delivery round is part of: the engine's effects (`effects/host.rs`), its
/// status.json and events, its control source.
impl RunSide for Engine {
    fn io(&mut self) -> &mut dyn in_run::RunIo {
        &mut self.fx
    }

    fn io_ref(&self) -> &dyn in_run::RunIo {
        &self.fx
    }

    fn show(&mut self, d: &Delivery, step: bool) -> Result<()> {
        self.shown.delivering = Some(d.clone());
        self.tell(News::delivery_shown(d, step))
    }

    fn warn(&mut self, line: &str) {
        Engine::warn(self, line);
    }

    fn stop_asked(&mut self) -> bool {
        self.poll_control();
        self.run.next(self.fx.now()) == Step::Stop(ExitReason::Interrupted)
    }
}
