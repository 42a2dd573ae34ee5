//! Verified completion, driven: the checks ([`Checks`]: the baseline, the per-loop check, the
//! check of a "done" claim) lent the run's records; the plan's completeness.

use super::Engine;
use crate::effects::RunView;
use crate::effects::check::{self, Checks};

impl Engine {
    /// The run's checks, over its verification and state.
    pub(super) fn checks(&mut self) -> Checks<'_> {
        Checks {
            view: RunView {
                status: None,
                cost_usd: self.run.cost(),
                items: (self.plan.done(), self.plan.total()),
            },
            fx: self.fx.as_mut(),
            verify: &mut self.verify,
            state: &mut self.state,
            project: &self.s.project_dir,
        }
    }

    /// Whether the plan is complete, counting required items that left it during the run as
    /// open; each such item is warned about once.
    pub(super) fn plan_complete(&mut self) -> bool {
        let (complete, warning) = self.verify.plan_complete(&self.plan);
        if let Some(w) = warning {
            self.warn(&w);
        }
        complete
    }

    /// Warns once when `.hankrc`'s VERIFY_COMMAND changed since the run started.
    pub(super) fn watch_verify_edit(&mut self) {
        if let Some(w) = check::rc_edit(&mut self.verify, &self.s.project_dir) {
            self.warn(&w);
        }
    }
}
