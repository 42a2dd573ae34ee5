//! Verified completion, driven: the baseline before loop 1, the per-loop check, the check of
//! a "done" claim. The check runs through [`crate::effects::Effects::run_check`]
//! (`effects/check.rs`); what each result means is [`Verification`]'s (pure).

use super::Engine;
use crate::effects::check;
use crate::effects::{Checked, News};
use crate::error::Result;
use crate::exit::ExitReason;
use crate::policy::verification::ClaimCheck;
use crate::policy::verify::CheckKind;

impl Engine {
    /// Runs the check now ([`check::recorded`]); reports it (warning, event).
    async fn run_check(&mut self, kind: CheckKind) -> Result<Checked> {
        let records = (&mut self.verify, &mut self.state);
        let run = check::recorded(self.fx.as_mut(), kind, records, &self.s.project_dir);
        let (checked, warning) = run.await?;
        if let Some(w) = warning {
            self.warn(&w);
        }
        self.tell(News::Checked(&checked.result))?;
        Ok(checked)
    }

    /// VERIFY_AT_START: the check before loop 1. A red baseline is told to the first loop.
    /// Returns `Some(Interrupted)` when Ctrl-C stopped it.
    pub(super) async fn verify_baseline(&mut self) -> Result<Option<ExitReason>> {
        if self.verify.command.is_none() || !self.s.verify_at_start.value {
            return Ok(None);
        }
        let c = self.run_check(CheckKind::Baseline).await?;
        if c.result.interrupted {
            return Ok(Some(ExitReason::Interrupted));
        }
        let loops = self.state.loop_count;
        self.verify.on_baseline(c.result, &c.tail, loops);
        self.save()?;
        Ok(None)
    }

    /// VERIFY_EVERY_LOOP: the check after loop `number`. Returns whether the loop turned a
    /// passing check into a failing one, `None` when no check ran (off, or interrupted).
    pub(super) async fn verify_loop(&mut self, number: u64) -> Result<Option<bool>> {
        if !self.verify.checks_every_loop(self.fx.interrupted()) {
            return Ok(None);
        }
        let before = self.verify.last.clone();
        let c = self.run_check(CheckKind::Loop).await?;
        if c.result.interrupted {
            return Ok(None);
        }
        let r = &c.result;
        Ok(Some(self.verify.on_loop_check(
            number,
            before.as_ref(),
            r,
            &c.tail,
        )))
    }

    /// A "done" claim (`reason` is a completion): with a check configured, it stops the run
    /// only when the check passes. Returns the exit to take, or `None` to go on working
    /// (the claim was rejected; the next loop's context says why).
    pub(super) async fn verify_claim(&mut self, reason: ExitReason) -> Result<Option<ExitReason>> {
        let number = self.state.loop_count;
        let checked = match self.verify.claim_needs(reason, number) {
            ClaimCheck::Settled(exit) => return Ok(exit),
            ClaimCheck::Again(result, tail) => Checked { result, tail },
            ClaimCheck::Run => self.run_check(CheckKind::Completion).await?,
        };
        let judged = self
            .verify
            .judge(reason, number, &checked.result, &checked.tail);
        if let Some(w) = judged.warning {
            self.warn(&w);
        }
        Ok(judged.exit)
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
