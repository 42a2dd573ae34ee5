//! What the driver reports, through [`crate::effects::Effects`]: status.json, state.json,
//! events, warnings, the charge of a call, the limit named in messages, receipts.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::Engine;
use crate::effects::Say;
use crate::error::Result;
use crate::exit::ExitReason;
use crate::policy::breaker::Transition;
use crate::policy::charge;
use crate::policy::windows;
use crate::store::schema::StatusParts;
use crate::store::{Event, EventKind, PlanCounts, RunState, Status};

impl Engine {
    pub(super) fn warn(&mut self, msg: &str) {
        self.fx.say(Say::Warn(msg));
        self.fx.log(&format!("warning: {msg}"));
        let _ = self.emit(EventKind::Warning {
            message: msg.to_string(),
        });
    }

    /// An event: events.jsonl, stdout with `--json`, NOTIFY.
    pub(super) fn emit(&mut self, kind: EventKind) -> Result<()> {
        let event = Event::new(self.fx.now(), kind);
        let items = (self.plan.done(), self.plan.total());
        self.fx.emit(&event, self.run.cost(), items)
    }

    /// A breaker transition: the terminal, the log, the `circuit_changed` event.
    pub(super) fn transition(&mut self, t: &Transition) -> Result<()> {
        let line = format!("circuit {} → {}: {}", t.from, t.to, t.reason);
        self.fx.say(Say::Info(&line));
        self.fx.log(&line);
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
            now: self.fx.now(),
            pid: std::process::id(),
        });
        status.verification = self.verify.status();
        status.delivery = self.delivery.as_ref().and_then(|d| d.last().cloned());
        if matches!(
            self.wait,
            Some((crate::policy::budget::WaitReason::NeedsAnswers, _))
        ) {
            status.questions.clone_from(&self.questions);
        }
        status
    }

    pub(super) fn write_status(&mut self, run_state: RunState) -> Result<()> {
        let status = self.status(run_state, None);
        self.fx.publish(&status)
    }

    /// Saves state.json durably.
    pub(super) fn save(&mut self) -> Result<()> {
        self.fx.persist(&self.state, true)
    }

    /// At start: an agent of the run whose cost hank cannot know is named when MAX_COST_USD
    /// is set.
    pub(super) fn warn_uncharged_agents(&mut self) {
        if self.s.max_cost_usd.value <= 0.0 {
            return;
        }
        let text = self.s.output_format.value == crate::settings::OutputFormat::Text;
        let blind: Vec<String> = (self.agents.iter())
            .filter(|a| a.profile.cost_source(text) == charge::CostSource::Unknown)
            .map(|a| a.name().to_owned())
            .collect();
        if let Some(w) = charge::blind_agents_warning(&blind, text) {
            self.warn(&w);
        }
    }

    /// LOG_RETENTION: keeps the logs of the newest loops (and as many check outputs).
    pub(super) fn prune_logs(&mut self) {
        let newest = (self.state.loop_count, self.state.verify_count);
        self.fx.prune_logs(self.s.log_retention.value, newest);
    }

    /// The window at or above its MAX_WINDOW_PERCENT limit, named for the exit message; with
    /// the wait's end (`until`), said on the terminal too.
    pub(super) fn window_note(&mut self, until: Option<Timestamp>) {
        let seen = self.seen.as_ref().map(|o| &o.window);
        let note = seen.and_then(|w| windows::over_limit_note(w, &TimeZone::system()));
        self.limit_note(note.map(|n| (n, until)));
    }

    /// A usage limit (after a loop's decision, [`windows::usage_limit_note`]) or window
    /// named in the exit message; with the wait's end, on the terminal too.
    pub(super) fn limit_note(&mut self, found: Option<(String, Option<Timestamp>)>) {
        let Some((note, until)) = found else {
            return;
        };
        if let Some(until) = until {
            let at = crate::report::local_time(until);
            self.fx
                .say(Say::Info(&format!("{note}; no call before {at}")));
        }
        self.limit_note = Some(note);
    }
}
