//! What the loop writes besides the agent's logs: status.json, state.json, the event stream
//! (events.jsonl and `--json` stdout), warnings.

use std::io::Write;

use super::Engine;
use crate::error::Result;
use crate::exit::ExitReason;
use crate::policy::breaker::Transition;
use crate::store::schema::StatusParts;
use crate::store::{Event, EventKind, PlanCounts, RunState, Status};

impl Engine {
    pub(super) fn warn(&mut self, msg: &str) {
        self.reporter.warn(msg);
        self.store.log(self.clock.now(), &format!("warning: {msg}"));
        let _ = self.emit(EventKind::Warning {
            message: msg.to_string(),
        });
    }

    /// Writes an event to events.jsonl, and to stdout with `--json`.
    pub(super) fn emit(&self, kind: EventKind) -> Result<()> {
        let event = Event::new(self.clock.now(), kind);
        let line = event.to_line();
        self.store.append_event(&line)?;
        let items = (self.plan.done(), self.plan.total());
        for w in self.notify.event(&event, self.run.cost(), items) {
            self.reporter.warn(&w);
            self.store.log(self.clock.now(), &format!("warning: {w}"));
        }
        if self.s.json {
            let mut out = std::io::stdout().lock();
            // A closed stdout (e.g. `| head`) must not stop the loop.
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        }
        Ok(())
    }

    pub(super) fn emit_transition(&self, t: &Transition) -> Result<()> {
        self.store.log(
            t.at,
            &format!("circuit {} → {}: {}", t.from, t.to, t.reason),
        );
        self.emit(EventKind::CircuitChanged {
            from: t.from,
            to: t.to,
            reason: t.reason.clone(),
        })
    }

    pub(super) fn status(&self, run_state: RunState, exit: Option<ExitReason>) -> Status {
        let mut status = Status::of(&StatusParts {
            state: &self.state,
            run_state,
            plan: PlanCounts {
                done: self.plan.done(),
                total: self.plan.total(),
            },
            last_loop: self.last_loop.as_ref(),
            wait: self.wait,
            limits: &self.s.budget_limits(),
            window_limits: &self.s.max_window_percent.value,
            exit,
            now: self.clock.now(),
            pid: std::process::id(),
        });
        status.verification = self.verify.status();
        status.delivery = self.delivery.as_ref().and_then(|d| d.last().cloned());
        if matches!(
            self.wait,
            Some((crate::policy::budget::WaitReason::NeedsAnswers, _))
        ) {
            status.questions = self.notify.asked();
        }
        status
    }

    pub(super) fn write_status(&self, run_state: RunState) -> Result<()> {
        self.store.write_status(&self.status(run_state, None))
    }

    pub(super) fn save(&self) -> Result<()> {
        self.store.save_state(&self.state)
    }

    /// Charges the call (see [`crate::policy::charge`]): the cost its answer reported, or an
    /// estimate, marked as such, with a warning when the answer should have held one.
    pub(super) fn charge(
        &mut self,
        agent: &crate::agent::profile::Agent,
        number: u64,
        analysis: &mut crate::analysis::Analysis,
        now: jiff::Timestamp,
    ) {
        use crate::policy::charge::{self, ChargeInput, Estimate};
        let text = self.s.output_format.value == crate::settings::OutputFormat::Text;
        let c = charge::charge(ChargeInput {
            reported: analysis.cost_reported.then_some(analysis.cost_usd),
            tokens: &analysis.tokens,
            source: agent.profile.cost_source(text),
            recent: self
                .state
                .history
                .iter()
                .map(|h| (h.at, h.cost_usd, h.cost_estimated)),
            now,
            unknown_call_cost: self.s.unknown_call_cost.value,
        });
        analysis.cost_usd = c.usd;
        analysis.cost_estimated = c.estimate.is_some();
        let basis = match c.estimate {
            None | Some(Estimate::Tokens) => return,
            Some(Estimate::RecentHighest) => "the highest cost of a call in the last 24 h",
            Some(Estimate::UnknownCallCost) => "UNKNOWN_CALL_COST",
        };
        self.warn(&format!(
            "loop {number}: the answer of {} held no readable cost; charged an estimate of ${:.2} ({basis})",
            agent.name(),
            c.usd
        ));
    }

    /// At start: an agent of the run whose cost hank cannot know (it reports none and its
    /// profile gives no `[prices]`) is named when MAX_COST_USD is set.
    pub(super) fn warn_uncharged_agents(&mut self) {
        if self.s.max_cost_usd.value <= 0.0 {
            return;
        }
        let text = self.s.output_format.value == crate::settings::OutputFormat::Text;
        let blind: Vec<String> = self
            .agents
            .iter()
            .filter(|a| a.profile.cost_source(text) == crate::policy::charge::CostSource::Unknown)
            .map(|a| a.name().to_owned())
            .collect();
        if !blind.is_empty() {
            self.warn(&format!(
                "MAX_COST_USD cannot bind {}: no cost is reported{} and the profile gives no [prices] (add them to .hank/agents/NAME.toml to have hank estimate the cost from tokens)",
                blind.join(", "),
                if text { " (CLAUDE_OUTPUT_FORMAT=text holds none)" } else { "" }
            ));
        }
    }
}
