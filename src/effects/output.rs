//! What the run writes besides the agent's logs: the event stream (events.jsonl, `--json`
//! stdout, NOTIFY) and the terminal.

use std::io::Write;

use super::{Real, Say};
use crate::error::Result;
use crate::report::Reporter;
use crate::store::{Event, Store};

/// Where the run's events go: the one path of an event of the run (the engine's news through
/// [`Real::write_event`], the client's retries during a call) to `events.jsonl`, `--json`'s
/// stdout and NOTIFY (the run's [`crate::notify::Hook`]), a notifier's warnings said and logged.
pub(super) struct Told<'a> {
    pub store: &'a Store,
    pub notify: &'a crate::notify::Hook,
    pub reporter: &'a Reporter,
    /// `--json`: events on stdout too.
    pub json: bool,
}

impl Told<'_> {
    /// Writes `event` to events.jsonl, and to stdout with `--json`; NOTIFY is offered it with
    /// the run's cost and items.
    pub(super) fn event(
        &self,
        event: &Event,
        now: jiff::Timestamp,
        cost_usd: f64,
        items: (u32, u32),
    ) -> Result<()> {
        let line = event.to_line();
        self.store.append_event(&line)?;
        for w in self.notify.event(event, cost_usd, items) {
            self.reporter.warn(&w);
            self.store.log(now, &format!("warning: {w}"));
        }
        if self.json {
            let mut out = std::io::stdout().lock();
            // A closed stdout (e.g. `| head`) must not stop the loop.
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        }
        Ok(())
    }
}

impl Real {
    /// Writes an event to events.jsonl, and to stdout with `--json`; NOTIFY is offered it.
    pub(super) fn write_event(
        &mut self,
        event: &Event,
        cost_usd: f64,
        items: (u32, u32),
    ) -> Result<()> {
        let told = Told {
            store: &self.store,
            notify: &self.notify,
            reporter: &self.reporter,
            json: self.json,
        };
        told.event(event, self.clock.now(), cost_usd, items)
    }

    pub(super) fn show(&mut self, what: Say<'_>) {
        match what {
            Say::Info(m) => self.reporter.info(m),
            Say::Warn(m) => self.reporter.warn(m),
            Say::Analysis(a) => self.reporter.analysis_detail(a),
            Say::Summary(s) => self.reporter.summary(s),
            Say::WaitTick { reason, until, now } => self.reporter.wait_tick(reason, until, now),
            Say::WaitDone => self.reporter.wait_done(),
        }
    }
}
