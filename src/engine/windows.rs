//! Usage windows and cost receipts in the loop: the MAX_WINDOW_PERCENT check before each call
//! (step 4), the window named in usage-limit messages, and the loops of this run for the
//! three most expensive items of the exit summary.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::Engine;
use crate::analysis::{Analysis, ErrorKind};
use crate::exit::ExitReason;
use crate::policy::budget::WaitReason;
use crate::policy::decide::Decision;
use crate::policy::receipts::{self, LoopCost};
use crate::policy::windows::{self, WindowCheck};
use crate::store::schema::AgentFinished;

impl Engine {
    /// Step 4 (windows): the window at or above its MAX_WINDOW_PERCENT limit, named for the
    /// exit message; with the wait's end (`until`), said on the terminal too. The state
    /// machine decides whether the run waits or stops (`ON_USAGE_LIMIT=exit`).
    pub(super) fn window_note(&mut self, until: Option<Timestamp>) {
        let Some(WindowCheck::Wait { over, .. }) = self.seen.as_ref().map(|o| &o.window) else {
            return;
        };
        let what = windows::describe_limit(Some(&over.window), over.resets_at, &TimeZone::system());
        let note = format!(
            "{} at {:.0}% of its {}% limit (MAX_WINDOW_PERCENT): {what}",
            over.window, over.percent, over.limit
        );
        if let Some(until) = until {
            self.reporter.info(&format!(
                "{note}; no call before {}",
                crate::report::local_time(until)
            ));
        }
        self.limit_note = Some(note);
    }

    /// After a loop's decision: a usage limit names its window and reset time (from the typed
    /// `rate_limit_info` when the client gave it) on the terminal and in the exit message.
    pub(super) fn note_usage_limit(&mut self, a: &Analysis, decision: &Decision) {
        let Some(e) = a.error.as_ref().filter(|e| e.kind == ErrorKind::UsageLimit) else {
            return;
        };
        let limited = matches!(
            decision,
            Decision::Stop(ExitReason::UsageLimit)
                | Decision::Wait {
                    reason: WaitReason::UsageLimit,
                    ..
                }
        );
        if !limited {
            return;
        }
        let what = windows::describe_limit(e.window.as_deref(), e.reset_at, &TimeZone::system());
        let note = format!("usage limit: {what}");
        if let Decision::Wait { until, .. } = decision {
            self.reporter.info(&format!(
                "{note}; no call before {}",
                crate::report::local_time(*until)
            ));
        }
        self.limit_note = Some(note);
    }

    /// The limit the run stopped at, for the exit message (` — weekly window, resets …`).
    pub(super) fn limit_detail(&self, reason: ExitReason) -> String {
        match (reason, &self.limit_note) {
            (ExitReason::UsageLimit | ExitReason::UsageWindow, Some(note)) => format!(" — {note}"),
            _ => String::new(),
        }
    }

    /// Keeps a finished loop for the receipts of this run.
    pub(super) fn keep_receipt(&mut self, f: &AgentFinished) {
        self.run_loops.push(LoopCost {
            number: f.number,
            at: Some(self.clock.now()),
            cost_usd: f.cost_usd,
            cost_estimated: f.cost_estimated,
            tokens: f.tokens.sum(),
            duration_ms: f.duration_ms,
            calls: f.num_turns,
            items: f.plan_items.clone(),
            recommendation: f.recommendation.clone(),
            windows: f.usage_windows.clone(),
        });
    }

    /// The exit summary's lines on the three most expensive items of this run (none when no
    /// loop ticked an item).
    pub(super) fn receipt_summary(&self) -> Vec<String> {
        let r = receipts::attribute(&self.run_loops);
        let top = r.most_expensive(3);
        if top.is_empty() {
            return Vec::new();
        }
        let mut out = vec![format!(
            "most expensive items of this run (of ${:.2} in {} loop{}; `hank report` for all):",
            r.totals.cost_usd,
            r.totals.loops,
            if r.totals.loops == 1 { "" } else { "s" }
        )];
        for (i, item) in top.iter().enumerate() {
            out.push(format!(
                "  {}. ${:.2}  {} loop{}  {}",
                i + 1,
                item.cost_usd,
                item.loops,
                if item.loops == 1 { "" } else { "s" },
                item.item
            ));
        }
        out
    }
}
