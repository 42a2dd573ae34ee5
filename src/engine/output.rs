//! What the driver tells, through one effect ([`crate::effects::Effects::tell`]): a piece of
//! [`News`] with the run as it looks (status.json from `effects::Shown::status`, the run's
//! cost, the plan's items); state.json; the limit named in messages; the run's checks
//! ([`crate::effects::check::Checks`]) over its records and the plan's completeness.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::Engine;
use crate::effects::check::Checks;
use crate::effects::{News, RunParts, RunView, Say};
use crate::error::Result;
use crate::policy::windows;

impl Engine {
    /// Tells `news`; status.json too when the news implies a run state (`Shown::status`).
    pub(super) fn tell(&mut self, news: News<'_>) -> Result<()> {
        let status = self.shown.status(&news, self.parts());
        let view = RunView {
            status: status.as_ref(),
            ..self.view()
        };
        self.fx.tell(view, news)
    }

    /// The driver's records as the run looks now (status.json's, the exit message's).
    pub(super) fn parts(&self) -> RunParts<'_> {
        RunParts {
            state: &self.state,
            s: &self.s,
            plan: &self.fix_plan.plan,
            verify: &self.verify,
            review: self.reviewer.rounds.last.as_ref(),
            // A delivery step is shown while the delivery is out of the engine's hands.
            delivered: self.delivery.as_ref().and_then(|d| d.last()),
            now: self.fx.now(),
        }
    }

    /// How the run looks to news that leave status.json as it is: its cost, the plan's items.
    pub(super) fn view(&self) -> RunView<'static> {
        RunView {
            status: None,
            cost_usd: self.run.cost(),
            items: (self.fix_plan.plan.done(), self.fix_plan.plan.total()),
        }
    }

    pub(super) fn warn(&mut self, msg: &str) {
        let _ = self.tell(News::Warning(msg));
    }

    /// Saves state.json durably.
    pub(super) fn save(&mut self) -> Result<()> {
        self.fx.persist(&self.state, true)
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
        if let Some(line) = self.shown.limit(found) {
            self.fx.say(Say::Info(&line));
        }
    }
}

impl Engine {
    /// The run's checks, over its verification and state.
    pub(super) fn checks(&mut self) -> Checks<'_> {
        Checks {
            view: self.view(),
            fx: self.fx.as_mut(),
            verify: &mut self.verify,
            state: &mut self.state,
            project: &self.s.project_dir,
            plan: &self.fix_plan.plan,
        }
    }
}
