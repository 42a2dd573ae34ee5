//! A run's verification as state: the command taken at the start, what its checks found,
//! and what each check means for the loop (the baseline, the per-loop check, a "done" claim
//! judged), with the texts the run says about it. The driver runs the checks; the rules of a
//! single check are [`super::verify`]'s. **\[pure\]**

use std::collections::BTreeSet;
use std::time::Duration;

use super::fixplan::{Plan, Required};
use super::verify::{self, CheckKind, CheckResult, Verdict, VerificationStatus};
use crate::exit::ExitReason;

/// The run's verification: the command taken at the start and what the checks found.
#[derive(Debug, Default)]
pub struct Verification {
    /// VERIFY_COMMAND as resolved when the run started (`None`: no check).
    pub command: Option<String>,
    pub timeout: Duration,
    pub max_rejected: u32,
    pub every_loop: bool,
    rejected_in_a_row: u32,
    baseline: Option<CheckResult>,
    /// The last check's record, and the end of its output when it failed.
    pub last: Option<CheckResult>,
    last_tail: String,
    /// Said once in the next loop's context: a rejected claim, a red baseline, a red check.
    pub feedback: Option<String>,
    /// The loop after which the last check ran, and after which a claim was last judged.
    checked_after: Option<u64>,
    judged_after: Option<u64>,
    /// The project's test files when the run started (relative path, size).
    pub tests_at_start: Vec<(String, u64)>,
    rc_at_start: Option<String>,
    rc_warned: bool,
    /// The required items of the plan when the run started.
    pub required: Required,
    drift_warned: BTreeSet<String>,
    /// For the exit event: whether the completion exit was verified.
    pub verified: Option<bool>,
    /// The loop whose per-loop check turned a failing check green (VERIFY_EVERY_LOOP).
    pub fixed_after: Option<u64>,
    /// A claim's check could not run: what to say of it and what to do
    /// ([`verify::could_not_run_text`]), for the exit message.
    pub could_not_run: Option<(String, String)>,
}

/// The settings a run's verification starts from.
#[derive(Debug, Clone, Default)]
pub struct VerifyConfig {
    pub command: Option<String>,
    pub timeout: Duration,
    pub max_rejected: u32,
    pub every_loop: bool,
}

/// What a "done" claim needs before it is judged.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimCheck {
    /// No check for this claim: the exit to take (`None`: already rejected and the agent has
    /// not worked since: work on).
    Settled(Option<ExitReason>),
    /// Judge the per-loop check of the same loop again: its record and the end of its output.
    Again(CheckResult, String),
    /// Run a completion check.
    Run,
}

/// What a judged "done" claim leaves: the exit to take (`None`: work on) and what to warn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub exit: Option<ExitReason>,
    pub warning: Option<String>,
}

impl Verification {
    /// The verification of a run started with `cfg`, the project's test files, `.hankrc`'s
    /// VERIFY_COMMAND line as written (`rc`) and the plan.
    #[must_use]
    pub fn at_start(
        cfg: VerifyConfig,
        tests: Vec<(String, u64)>,
        rc: Option<String>,
        plan: &Plan,
    ) -> Self {
        Self {
            command: cfg.command,
            timeout: cfg.timeout,
            max_rejected: cfg.max_rejected,
            every_loop: cfg.every_loop,
            tests_at_start: tests,
            rc_at_start: rc,
            required: Required::at_start(plan),
            ..Self::default()
        }
    }

    /// `status.json` `verification`.
    #[must_use]
    pub fn status(&self) -> Option<VerificationStatus> {
        let command = self.command.clone()?;
        Some(VerificationStatus {
            command,
            last: self.last.clone(),
            baseline: self.baseline.clone(),
            rejected_in_a_row: self.rejected_in_a_row,
            max_rejected: self.max_rejected,
        })
    }

    /// The per-loop check result of loop `number`, when VERIFY_EVERY_LOOP ran it.
    #[must_use]
    pub fn loop_result(&self, number: u64) -> Option<&CheckResult> {
        (self.every_loop && self.checked_after == Some(number))
            .then_some(self.last.as_ref())
            .flatten()
    }

    /// Whether the per-loop check runs after a loop (`interrupted`: the user stopped it).
    #[must_use]
    pub fn checks_every_loop(&self, interrupted: bool) -> bool {
        self.command.is_some() && self.every_loop && !interrupted
    }

    /// The line of the log and the terminal for a check's result.
    #[must_use]
    pub fn result_line(r: &CheckResult) -> String {
        format!(
            "verification ({}) {}: {} ({}, {}; output: {})",
            r.kind.as_str(),
            if r.passed {
                "passed"
            } else if r.could_not_run() {
                "could not run"
            } else {
                "failed"
            },
            r.command,
            r.how_it_ended(),
            crate::policy::time::format_secs(r.duration_ms / 1000),
            r.log
        )
    }

    /// Keeps a check's record (`tail`: the end of its output when it failed); the warning
    /// when the check found test files deleted or emptied since the run started.
    pub fn record(&mut self, r: CheckResult, tail: &str) -> Option<String> {
        let removed = (!r.removed_tests.is_empty()).then(|| {
            let list = r.removed_tests.join(", ");
            format!("test files deleted or emptied during this run: {list}")
        });
        self.last = Some(r);
        tail.clone_into(&mut self.last_tail);
        removed
    }

    /// The baseline's result (`tail`: the end of its output). A red baseline is told to the
    /// first loop.
    pub fn on_baseline(&mut self, r: CheckResult, tail: &str, loop_count: u64) {
        if !r.passed {
            self.feedback = Some(verify::baseline_feedback(&r, tail));
        }
        self.baseline = Some(r);
        self.checked_after = Some(loop_count);
    }

    /// The per-loop check after loop `number` (`before`: the check before it). Returns whether
    /// the loop turned a passing check into a failing one.
    pub fn on_loop_check(
        &mut self,
        number: u64,
        before: Option<&CheckResult>,
        r: &CheckResult,
        tail: &str,
    ) -> bool {
        self.checked_after = Some(number);
        let regressed = verify::regressed(before, r);
        if r.passed && before.is_some_and(|b| !b.passed) {
            self.fixed_after = Some(number);
        }
        if !r.passed {
            self.feedback = Some(verify::loop_feedback(r, tail, regressed));
        }
        regressed
    }

    /// What a "done" claim (`reason`) after loop `number` needs.
    #[must_use]
    pub fn claim_needs(&self, reason: ExitReason, number: u64) -> ClaimCheck {
        if self.command.is_none() || !reason.is_completion() {
            return ClaimCheck::Settled(Some(reason));
        }
        if self.judged_after == Some(number) {
            return ClaimCheck::Settled(None);
        }
        match self.loop_result(number) {
            Some(r) if r.kind == CheckKind::Loop => {
                ClaimCheck::Again(r.clone(), self.last_tail.clone())
            }
            _ => ClaimCheck::Run,
        }
    }

    /// Judges the claim `reason` after loop `number` by the check `r` (`tail`: the end of
    /// its output).
    pub fn judge(
        &mut self,
        reason: ExitReason,
        number: u64,
        r: &CheckResult,
        tail: &str,
    ) -> Judged {
        if r.interrupted {
            return Judged {
                exit: Some(ExitReason::Interrupted),
                warning: None,
            };
        }
        self.judged_after = Some(number);
        self.checked_after = Some(number);
        if r.could_not_run() {
            // Nothing was tested: neither accepted nor rejected, and not the agent's to fix.
            self.could_not_run = Some(verify::could_not_run_text(r, tail));
            return Judged {
                exit: Some(ExitReason::CheckCouldNotRun),
                warning: None,
            };
        }
        let max = self.max_rejected;
        match verify::judge_claim(self.rejected_in_a_row, r.passed, max) {
            Verdict::Accept => {
                self.rejected_in_a_row = 0;
                self.verified = Some(true);
                Judged {
                    exit: Some(reason),
                    warning: None,
                }
            }
            Verdict::Reject { in_a_row } => {
                self.rejected_in_a_row = in_a_row;
                self.feedback = Some(verify::rejection_feedback(r, tail, in_a_row, max));
                Judged {
                    exit: None,
                    warning: Some(format!(
                        "\"done\" ({reason}) rejected: the check failed ({}); the agent is told why (rejection {in_a_row} of {max})",
                        r.how_it_ended()
                    )),
                }
            }
            Verdict::Halt { in_a_row } => {
                self.rejected_in_a_row = in_a_row;
                self.verified = Some(false);
                Judged {
                    exit: Some(ExitReason::VerificationFailed),
                    warning: None,
                }
            }
        }
    }

    /// Whether `plan` is complete, counting required items that left it during the run as
    /// open; the warning names the items not warned about before.
    pub fn plan_complete(&mut self, plan: &Plan) -> (bool, Option<String>) {
        let drift = self.required.observe(plan);
        let new: Vec<String> = drift
            .missing
            .iter()
            .map(|t| format!("`{t}` disappeared"))
            .chain(
                drift
                    .made_optional
                    .iter()
                    .map(|t| format!("`{t}` moved under an optional section")),
            )
            .filter(|m| self.drift_warned.insert(m.clone()))
            .collect();
        let warning = (!new.is_empty()).then(|| format!(
            "fix_plan.md: open required item(s) changed during the run: {}; they stay required until ticked (change the plan between runs to drop them)",
            new.join(", ")
        ));
        (plan.is_complete() && drift.is_empty(), warning)
    }

    /// Whether an edit of `.hankrc`'s VERIFY_COMMAND is still to be warned about.
    #[must_use]
    pub fn watches_rc(&self) -> bool {
        !self.rc_warned
    }

    /// Once, when `.hankrc`'s VERIFY_COMMAND line (`rc`, as written now) differs from the
    /// one at the start: the run keeps the command it started with.
    pub fn rc_edited(&mut self, rc: Option<&str>) -> Option<String> {
        if self.rc_warned || rc == self.rc_at_start.as_deref() {
            return None;
        }
        self.rc_warned = true;
        let kept = self
            .command
            .as_deref()
            .map_or_else(|| "no check".to_string(), |c| format!("`{c}`"));
        Some(format!(
            "VERIFY_COMMAND in .hankrc changed during the run; ignored: this run keeps {kept} (restart hank to use the new one)"
        ))
    }

    /// What the exit message adds about verification: the passing check of a completion, the
    /// test files deleted or emptied, the required items that left the plan while open.
    #[must_use]
    pub fn summary(&self, reason: ExitReason) -> String {
        let mut out = String::new();
        if reason == ExitReason::CheckCouldNotRun
            && let Some((message, hint)) = &self.could_not_run
        {
            out.push_str(&format!(" — {message}; {hint}"));
        }
        if reason.is_completion()
            && self.verified == Some(true)
            && let Some(r) = &self.last
        {
            out.push_str(&format!(
                "; verified: `{}` passed in {}",
                r.command,
                crate::policy::time::format_secs(r.duration_ms / 1000)
            ));
        }
        if let Some(r) = &self.last
            && !r.removed_tests.is_empty()
        {
            out.push_str(&format!(
                "; test files deleted or emptied during the run: {}",
                r.removed_tests.join(", ")
            ));
        }
        if !self.drift_warned.is_empty() {
            let list: Vec<&str> = self.drift_warned.iter().map(String::as_str).collect();
            out.push_str(&format!(
                "; fix_plan items that changed while open: {}",
                list.join(", ")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::fixplan;

    fn result(kind: CheckKind, passed: bool) -> CheckResult {
        CheckResult {
            kind,
            passed,
            command: "make test".into(),
            exit_code: Some(if passed { 0 } else { 2 }),
            timed_out: false,
            interrupted: false,
            duration_ms: 61_000,
            at: jiff::Timestamp::UNIX_EPOCH,
            log: ".hank/logs/verify-00001.log".into(),
            number: 1,
            removed_tests: Vec::new(),
        }
    }

    fn with_check(every_loop: bool, max_rejected: u32) -> Verification {
        let cfg = VerifyConfig {
            command: Some("make test".into()),
            timeout: Duration::from_secs(60),
            max_rejected,
            every_loop,
        };
        Verification::at_start(cfg, Vec::new(), Some("make test".into()), &Plan::default())
    }

    #[test]
    fn a_claim_is_judged_by_the_check_then_halts_after_max_rejections() {
        let done = ExitReason::PlanComplete;
        // (passed, exit, warned) for three claims in a row with MAX_REJECTED_COMPLETIONS=2.
        let table = [
            (false, None, true),
            (false, Some(ExitReason::VerificationFailed), false),
        ];
        let mut v = with_check(false, 2);
        for (number, (passed, exit, warned)) in (1u64..).zip(table) {
            assert_eq!(v.claim_needs(done, number), ClaimCheck::Run);
            let j = v.judge(
                done,
                number,
                &result(CheckKind::Completion, passed),
                "FAILED x",
            );
            assert_eq!(
                (j.exit, j.warning.is_some()),
                (exit, warned),
                "claim {number}"
            );
        }
        assert_eq!(v.verified, Some(false));
        let mut v = with_check(false, 2);
        let passed = result(CheckKind::Completion, true);
        v.last = Some(passed.clone());
        let j = v.judge(done, 1, &passed, "");
        assert_eq!(j.exit, Some(done));
        assert_eq!(v.verified, Some(true));
        assert!(
            v.summary(done)
                .contains("verified: `make test` passed in 1m01s")
        );
    }

    #[test]
    fn a_claim_whose_check_could_not_run_stops_without_a_rejection() {
        for code in [126, 127] {
            let mut v = with_check(false, 3);
            let mut r = result(CheckKind::Completion, false);
            r.command = "pytest -q".into();
            r.exit_code = Some(code);
            let j = v.judge(
                ExitReason::PlanComplete,
                1,
                &r,
                "sh: 1: pytest: not found\n",
            );
            assert_eq!(j.exit, Some(ExitReason::CheckCouldNotRun), "{code}");
            assert_eq!(j.warning, None);
            assert_eq!(v.feedback, None, "the agent is not told to fix it");
            assert_eq!(v.status().map(|s| s.rejected_in_a_row), Some(0));
            assert_eq!(v.verified, None);
            let summary = v.summary(ExitReason::CheckCouldNotRun);
            assert!(summary.contains("could not run: `pytest`"), "{summary}");
            assert!(summary.contains("install `pytest`"), "{summary}");
            assert!(Verification::result_line(&r).contains("could not run"));
        }
    }

    #[test]
    fn what_a_claim_needs() {
        let mut v = with_check(true, 3);
        // Not a completion, or no command: no check.
        assert_eq!(
            v.claim_needs(ExitReason::MaxLoops, 1),
            ClaimCheck::Settled(Some(ExitReason::MaxLoops))
        );
        let none = Verification::default();
        assert_eq!(
            none.claim_needs(ExitReason::PlanComplete, 1),
            ClaimCheck::Settled(Some(ExitReason::PlanComplete))
        );
        // The per-loop check of the same loop is judged again, not run twice.
        let red = result(CheckKind::Loop, false);
        let mut gone = red.clone();
        gone.removed_tests = vec!["tests/a.rs".into(), "tests/b.rs".into()];
        let warning = "test files deleted or emptied during this run: tests/a.rs, tests/b.rs";
        let recorded = Verification::default().record(gone, "FAILED");
        assert_eq!(recorded.as_deref(), Some(warning));
        assert_eq!(v.record(red.clone(), "FAILED"), None);
        assert!(!v.on_loop_check(4, None, &red, "FAILED"));
        let green = result(CheckKind::Loop, true);
        assert!(v.on_loop_check(4, Some(&green), &red, "FAILED"));
        assert_eq!(
            v.claim_needs(ExitReason::PlanComplete, 4),
            ClaimCheck::Again(red.clone(), "FAILED".to_owned())
        );
        // Rejected once after loop 4: not judged again before the agent works.
        let j = v.judge(ExitReason::PlanComplete, 4, &red, "FAILED");
        assert_eq!(j.exit, None);
        assert_eq!(
            v.claim_needs(ExitReason::PlanComplete, 4),
            ClaimCheck::Settled(None)
        );
        assert_eq!(v.claim_needs(ExitReason::PlanComplete, 5), ClaimCheck::Run);
        assert!(v.feedback.is_some());
    }

    #[test]
    fn an_interrupted_check_stops_without_a_verdict() {
        let mut v = with_check(false, 3);
        let mut r = result(CheckKind::Completion, false);
        r.interrupted = true;
        let j = v.judge(ExitReason::PlanComplete, 1, &r, "");
        assert_eq!(j.exit, Some(ExitReason::Interrupted));
        assert_eq!(v.verified, None);
        assert_eq!(v.claim_needs(ExitReason::PlanComplete, 1), ClaimCheck::Run);
    }

    #[test]
    fn a_loop_check_that_turns_green_marks_the_loop_and_a_red_baseline_is_told() {
        let mut v = with_check(true, 3);
        v.on_baseline(result(CheckKind::Baseline, false), "FAILED a", 0);
        assert!(v.feedback.take().is_some());
        let red = result(CheckKind::Baseline, false);
        let green = result(CheckKind::Loop, true);
        v.last = Some(green.clone());
        assert!(!v.on_loop_check(1, Some(&red), &green, ""));
        assert_eq!(v.fixed_after, Some(1));
        assert_eq!(v.loop_result(1).map(|r| r.passed), Some(true));
        assert_eq!(v.loop_result(2), None);
        assert!(v.checks_every_loop(false));
        assert!(!v.checks_every_loop(true));
    }

    #[test]
    fn an_edit_of_the_rc_command_is_warned_about_once() {
        let mut v = with_check(false, 3);
        assert_eq!(v.rc_edited(Some("make test")), None);
        let w = v.rc_edited(Some("true")).unwrap();
        assert!(w.contains("this run keeps `make test`"), "{w}");
        assert!(!v.watches_rc());
        assert_eq!(v.rc_edited(None), None);
    }

    #[test]
    fn a_required_item_that_leaves_the_plan_stays_open_and_is_warned_once() {
        let before = fixplan::parse("- [ ] a\n- [ ] b\n", &[]);
        let mut v = Verification::at_start(VerifyConfig::default(), Vec::new(), None, &before);
        let after = fixplan::parse("- [x] a\n", &[]);
        let (complete, warning) = v.plan_complete(&after);
        assert!(!complete);
        assert!(warning.unwrap().contains("`b` disappeared"));
        assert_eq!(v.plan_complete(&after), (false, None));
        assert!(v.summary(ExitReason::MaxLoops).contains("`b` disappeared"));
    }

    #[test]
    fn the_result_line_names_the_kind_the_end_and_the_log() {
        let line = Verification::result_line(&result(CheckKind::Loop, false));
        assert!(
            line.starts_with("verification (loop) failed: make test ("),
            "{line}"
        );
        assert!(
            line.ends_with("1m01s; output: .hank/logs/verify-00001.log)"),
            "{line}"
        );
    }
}
