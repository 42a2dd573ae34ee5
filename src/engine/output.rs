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
        for w in self.notify.event(&event, self.cost_this_run, items) {
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
        status
    }

    pub(super) fn write_status(&self, run_state: RunState) -> Result<()> {
        self.store.write_status(&self.status(run_state, None))
    }

    pub(super) fn save(&self) -> Result<()> {
        self.store.save_state(&self.state)
    }
}
