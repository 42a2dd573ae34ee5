//! The driver: executes the state machine's steps ([`crate::policy::run`]) — looks at the
//! project and the limits, calls the agent, runs the check, waits, stops — and reports each
//! fact back. No ordering rule lives here.
//!
//! Time, sleeping and facts from outside the run (live control, the fleet, delivery) come
//! through [`Effects`]: [`Real`] in `hank run`, a test implementation in the unit tests.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use jiff::Timestamp;

use super::Engine;
use super::wait::Waited;
use crate::analysis::Analysis;
use crate::error::{HankError, Result};
use crate::exit::ExitReason;
use crate::policy::budget::{BudgetCheck, WaitReason};
use crate::policy::run::{Control, Fact, Observation, RunConfig, Step, WaitFor};
use crate::policy::time::Clock;
use crate::policy::windows::{self, WindowCheck};

/// The driver's effects that time and the outside world decide: the clock, sleeping, facts
/// from outside the run. Every wait of the loop goes through [`Effects::sleep`] and reads
/// [`Clock::now`], so a test implementation runs a 5-hour wait at once.
pub(crate) trait Effects: Clock {
    /// Sleeps `d` (the real one: tokio's timer; a test one: moves its clock).
    fn sleep(&self, d: Duration) -> Pin<Box<dyn Future<Output = ()> + '_>>;
    /// Facts from outside the run that arrived since the last poll, oldest first: a pause,
    /// a note for the next context, a setting, a sibling's window reading
    /// (`policy::run::Control`). Polled before each call and during every wait.
    fn poll_control(&mut self) -> Vec<Control>;
    /// The commands taken since the last call (each an event) and warnings of the control
    /// source.
    fn control_log(&mut self) -> (Vec<crate::control::Taken>, Vec<String>) {
        (Vec::new(), Vec::new())
    }
}

/// The real effects: a clock (`SystemClock`, or `HANK_NOW`'s), tokio's timer, and the
/// project's `hank ctl` journal ([`crate::control::LiveControl`]).
pub(crate) struct Real(
    pub(crate) Box<dyn Clock>,
    pub(crate) Option<crate::control::LiveControl>,
);

impl Clock for Real {
    fn now(&self) -> Timestamp {
        self.0.now()
    }
}

impl Effects for Real {
    fn sleep(&self, d: Duration) -> Pin<Box<dyn Future<Output = ()> + '_>> {
        Box::pin(tokio::time::sleep(d))
    }

    fn poll_control(&mut self) -> Vec<Control> {
        let now = self.0.now();
        self.1.as_mut().map(|c| c.poll(now)).unwrap_or_default()
    }

    fn control_log(&mut self) -> (Vec<crate::control::Taken>, Vec<String>) {
        self.1.as_mut().map(|c| c.take_log()).unwrap_or_default()
    }
}

impl Engine {
    /// The state machine's settings for a run started at `now`.
    pub(super) fn run_config(&self, now: Timestamp) -> RunConfig {
        RunConfig {
            deadline: RunConfig::deadline_of(now, self.s.max_runtime.value),
            loop_delay: jiff::SignedDuration::from_secs(
                i64::try_from(self.s.loop_delay_seconds.value).unwrap_or(i64::MAX),
            ),
            on_usage_limit: self.s.on_usage_limit.value,
            failover: self.agents.len() > 1,
            decide: self.s.decide_config(),
        }
    }

    /// Hands what the control source sent to the state machine; whether anything came.
    pub(super) fn poll_control(&mut self) -> bool {
        let commands = self.clock.poll_control();
        let any = !commands.is_empty();
        for c in commands {
            self.run.on(Fact::Control(c), self.clock.now());
        }
        self.log_control();
        if any {
            self.apply_settings();
        }
        any
    }

    /// Each command taken is an event and a line on the terminal.
    fn log_control(&mut self) {
        let (taken, warnings) = self.clock.control_log();
        for w in warnings {
            self.warn(&w);
        }
        for t in taken {
            self.reporter
                .info(&format!("hank ctl {}: {}", t.command, t.outcome));
            if let Err(e) = self.emit(crate::store::EventKind::Control {
                id: t.id,
                command: t.command,
                outcome: t.outcome,
            }) {
                self.reporter
                    .warn(&format!("could not record a control event: {e}"));
            }
        }
    }

    /// `hank ctl set`: the new limits hold from the next gate on (the run's caps, its
    /// deadline, the call cap and the window limits are read from the settings again).
    fn apply_settings(&mut self) {
        let settings = self.run.take_settings();
        if settings.is_empty() {
            return;
        }
        for (key, value) in settings {
            match crate::settings::resolve::apply_live_value(&mut self.s, &key, &value) {
                Ok(shown) => self.reporter.info(&format!("{key} is now {shown}")),
                Err(why) => self.warn(&format!("hank ctl set {key}={value} not applied: {why}")),
            }
        }
        let started = self.run_started;
        self.run.retune(self.run_config(started));
        self.run_deadline = RunConfig::deadline_of(started, self.s.max_runtime.value);
    }

    /// Executes one step; `Some` ends the run with that reason.
    pub(super) async fn execute(&mut self, step: Step) -> Result<Option<ExitReason>> {
        match step {
            Step::Observe => self.observe_step().await?,
            Step::Call { agent } => {
                self.use_agent(agent)?;
                let plan = std::mem::take(&mut self.plan_text);
                self.one_loop(plan).await?;
            }
            Step::Check(_) | Step::Failover | Step::FreshSession => {
                self.settle(step, &Analysis::default()).await?;
            }
            Step::Wait { until, reason } => return self.wait_step(until, reason).await,
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
        // Let the signal task run (the driver is polled on the first yield, the handler runs
        // on the second): a signal that came during the synchronous analysis is seen here.
        for _ in 0..2 {
            tokio::task::yield_now().await;
        }
        if self.interrupted() {
            self.run.on(Fact::Interrupted, self.clock.now());
            return Ok(());
        }
        self.poll_control();
        // A sibling's usage-window readings count like the run's own.
        let readings = self.run.take_readings();
        if !readings.is_empty() {
            windows::observe(&mut self.state.windows, &readings, self.clock.now());
        }
        // So do the newer readings of every other run of this user (the shared file).
        crate::store::shared_windows::adopt(&mut self.state.windows, self.clock.now());
        let o = self.observe()?;
        self.seen = Some(o.clone());
        self.run.on(Fact::Observed(o), self.clock.now());
        Ok(())
    }

    fn observe(&mut self) -> Result<Observation> {
        // A required file turned into a FIFO or a device is an error naming it, not a hang
        // and not "disappeared".
        self.s.check_special_files()?;
        let missing = self.s.missing_files();
        let mut missing_files = !missing.is_empty();
        if missing_files {
            let list: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
            self.warn(&format!(
                "required file(s) disappeared: {}",
                list.join(", ")
            ));
        } else {
            match self.refresh_plan() {
                Some(text) => self.plan_text = text,
                None => missing_files = true,
            }
        }
        let plan_complete = !missing_files && {
            self.watch_verify_edit();
            self.plan_complete()
        };
        let now = self.clock.now();
        let limits = &self.s.max_window_percent.value;
        let window = if limits.is_empty() {
            WindowCheck::Allow
        } else {
            windows::check(&self.state.windows, limits, now)
        };
        let breaker_open = self.state.breaker.is_open();
        let mut budget = self.state.ledger.check(now, &self.s.budget_limits());
        // In a fleet, the fleet-wide ledger (locked) takes the call once every gate hank can
        // see here lets it through: the budget holds for every task together. A later gate
        // (a pause, an exhausted agent chain) can leave the reservation unused: the fleet's
        // cap then errs on the side of fewer calls, never more.
        let ready = !missing_files
            && !plan_complete
            && !breaker_open
            && matches!(budget, BudgetCheck::Allow)
            && matches!(window, WindowCheck::Allow);
        if ready {
            let limits = crate::policy::fleet::FleetLimits {
                budget: self.s.budget_limits(),
                max_cost_usd: self.s.max_cost_usd.value,
            };
            match crate::store::fleet_ledger::reserve_from_env(now, &limits)? {
                crate::policy::fleet::FleetVerdict::Go => {}
                crate::policy::fleet::FleetVerdict::Wait { until, reason } => {
                    budget = BudgetCheck::Wait { until, reason };
                }
                crate::policy::fleet::FleetVerdict::Stop(r) => {
                    self.run.on(Fact::FleetLimit(r), now);
                }
            }
        }
        Ok(Observation {
            missing_files,
            plan_complete,
            breaker_open,
            budget,
            window,
            pick: self.state.agents.pick(&self.chain(), now),
        })
    }

    /// The effects that finish a decision: the check of a "done" claim, failover, dropping
    /// an unknown session.
    pub(super) async fn settle(&mut self, step: Step, analysis: &Analysis) -> Result<()> {
        match step {
            Step::Check(reason) => {
                let verdict = self.verify_claim(reason).await?;
                self.run.on(Fact::Checked(verdict), self.clock.now());
            }
            Step::Failover => {
                let pick = self.failover_pick(analysis);
                self.run.on(Fact::FailedOver(pick), self.clock.now());
            }
            Step::FreshSession => {
                self.reporter
                    .info("the agent no longer knows the session; retrying without it");
                self.state.session = None;
                self.save()?;
                self.run.on(Fact::SessionDropped, self.clock.now());
            }
            _ => {}
        }
        Ok(())
    }

    async fn wait_step(
        &mut self,
        until: Option<Timestamp>,
        reason: WaitFor,
    ) -> Result<Option<ExitReason>> {
        let waited = match (reason, until) {
            (WaitFor::Limit(r), Some(until)) => {
                if r == WaitReason::UsageWindow {
                    self.window_note(Some(until));
                }
                self.wait_until(r, until).await?
            }
            (WaitFor::LoopDelay, Some(until)) => self.sleep_until(until).await,
            (WaitFor::Paused, _) => self.paused().await?,
            _ => {
                return Err(HankError::usage(format!(
                    "internal: the loop cannot wait for {reason:?} until {until:?}"
                )));
            }
        };
        match waited {
            Waited::Done => {
                self.run.on(Fact::WokeUp, self.clock.now());
                Ok(None)
            }
            Waited::Stop(r) => Ok(Some(r)),
        }
    }

    /// What a stop at a gate says first: the window at its limit, the agents that cannot work.
    fn gate_stop(&mut self, reason: ExitReason) {
        if !self.run.at_gates() {
            return;
        }
        match reason {
            ExitReason::UsageWindow => self.window_note(None),
            ExitReason::AgentFatal => {
                let why: Vec<String> = self
                    .state
                    .agents
                    .limited
                    .iter()
                    .map(|(n, l)| format!("{n}: {} ({})", l.kind, l.message))
                    .collect();
                self.warn(&format!(
                    "no agent can work for the rest of this run: {}",
                    why.join("; ")
                ));
            }
            _ => {}
        }
    }
}
