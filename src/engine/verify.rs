//! Verified completion, wired: runs VERIFY_COMMAND (`/bin/sh -c`, in the project root, in its
//! own process group, with VERIFY_TIMEOUT and Ctrl-C honoured, output to
//! `.hank/logs/verify-NNNNN.log`) and applies [`crate::policy::verify`] to the loop: the
//! baseline before loop 1, the per-loop check, and the check before any "done" exit.
//!
//! The command is the one the run started with ([`Settings`] are resolved once); an edit of
//! `.hankrc` during the run is noticed and ignored with a warning.

use std::collections::BTreeSet;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::{HankError, Result};
use crate::exit::ExitReason;
use crate::policy::fixplan::Required;
use crate::policy::progress::is_test_path;
use crate::policy::verify::{self, CheckKind, CheckResult, Verdict, VerificationStatus};
use crate::settings::Settings;
use crate::store::EventKind;

use super::{Engine, GRACE};

/// Bytes of the end of the output read for the agent's feedback.
const TAIL_READ: u64 = 64 * 1024;
/// Files looked at, at most, when listing the project's test files.
const MAX_FILES_WALKED: usize = 50_000;
/// `.hankrc` is read again (edit detection) only up to this size.
const RC_MAX: u64 = 1 << 20;

/// How one run of the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ran {
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub interrupted: bool,
    pub duration: Duration,
}

/// Runs `command` with `/bin/sh -c` in `cwd`, in its own process group, stdin closed, stdout
/// and stderr both into `log` (created 0600). After `timeout`, or on the user's interrupt,
/// the group gets SIGTERM, then SIGKILL after the grace (at once on a second interrupt).
/// Whatever the command left running in its group is stopped when it ends.
/// `on_spawn(pgid)` runs right after the start: the caller records the group in the lock so
/// that the next start stops it if hank is killed with SIGKILL meanwhile.
///
/// # Errors
/// The log cannot be created or `/bin/sh` cannot be started.
pub(crate) async fn run_command_with_hook(
    command: &str,
    cwd: &Path,
    log: &Path,
    timeout: Duration,
    cancel: watch::Receiver<u32>,
    on_spawn: impl FnOnce(i32),
) -> io::Result<Ran> {
    let out = crate::agent::process::create_log(log)?;
    let ran =
        crate::proc::shell_to_log(command, cwd, out, timeout, GRACE, cancel, on_spawn).await?;
    Ok(Ran {
        exit_code: ran.exit_code,
        timed_out: ran.timed_out,
        interrupted: ran.interrupted,
        duration: ran.duration,
    })
}

impl Ran {
    /// The record of this run of `command` (`log` absolute, shown relative to `project`).
    pub(crate) fn record(
        &self,
        kind: CheckKind,
        command: String,
        at: jiff::Timestamp,
        (log, project): (&Path, &Path),
        number: u64,
    ) -> CheckResult {
        CheckResult {
            kind,
            passed: self.exit_code == Some(0) && !self.timed_out && !self.interrupted,
            command,
            exit_code: self.exit_code,
            timed_out: self.timed_out,
            interrupted: self.interrupted,
            duration_ms: u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            at,
            log: log
                .strip_prefix(project)
                .unwrap_or(log)
                .display()
                .to_string(),
            number,
            removed_tests: Vec::new(),
        }
    }
}

/// The last `max` bytes of `path` as text (from a line start when cut), `""` if unreadable.
pub(crate) fn read_tail(path: &Path, max: u64) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    if f.take(max).read_to_end(&mut buf).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    if start > 0 {
        match text.split_once('\n') {
            Some((_, rest)) => rest.to_string(),
            None => text,
        }
    } else {
        text
    }
}

/// The project's test files (relative path, size), found by name ([`is_test_path`]); hidden
/// folders, `node_modules`, `target`, `vendor`, virtualenvs and build output are skipped,
/// symlinks are not followed, at most [`MAX_FILES_WALKED`] files are looked at.
pub(crate) fn test_files(root: &Path) -> Vec<(String, u64)> {
    const SKIP: &[&str] = &[
        "node_modules",
        "target",
        "vendor",
        "dist",
        "build",
        "venv",
        "__pycache__",
    ];
    let mut out = Vec::new();
    let mut seen = 0usize;
    let mut stack: Vec<(PathBuf, String)> = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_FILES_WALKED {
                return out;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(ft) = entry.file_type() else { continue };
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if ft.is_dir() {
                if !name.starts_with('.') && !SKIP.contains(&name.as_str()) {
                    stack.push((entry.path(), path));
                }
            } else if ft.is_file() && is_test_path(&path) {
                let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
                out.push((path, size));
            }
        }
    }
    out.sort();
    out
}

/// Whether the file holds only whitespace (read up to 64 KiB; a bigger file is not blank).
fn blank_file(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    if !meta.is_file() || meta.len() > 64 * 1024 {
        return false;
    }
    std::fs::read(path).is_ok_and(|b| b.iter().all(u8::is_ascii_whitespace))
}

/// The `VERIFY_COMMAND` line of `.hankrc` as written now (`None`: no such line or no
/// readable file).
fn rc_verify_command(project_dir: &Path) -> Option<String> {
    let path = project_dir.join(".hankrc");
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.is_file() || meta.len() > RC_MAX {
        return None;
    }
    let text = std::fs::read_to_string(&path).ok()?;
    crate::settings::hankrc::parse_hankrc(&text, &path)
        .ok()?
        .remove("VERIFY_COMMAND")
        .map(|e| e.value)
}

/// The run's verification: the command taken at the start and what the checks found.
#[derive(Debug, Default)]
pub(super) struct Verify {
    /// VERIFY_COMMAND as resolved when the run started (`None`: no check).
    pub command: Option<String>,
    timeout: Duration,
    max_rejected: u32,
    every_loop: bool,
    rejected_in_a_row: u32,
    baseline: Option<CheckResult>,
    last: Option<CheckResult>,
    /// Said once in the next loop's context: a rejected claim, a red baseline, a red check.
    pub feedback: Option<String>,
    /// The loop after which the last check ran, and after which a claim was last judged.
    checked_after: Option<u64>,
    judged_after: Option<u64>,
    tests_at_start: Vec<(String, u64)>,
    rc_at_start: Option<String>,
    rc_warned: bool,
    /// The required items of the plan when the run started.
    pub required: Required,
    drift_warned: BTreeSet<String>,
    /// For the exit event: whether the completion exit was verified.
    pub verified: Option<bool>,
    /// The loop whose per-loop check turned a failing check green (VERIFY_EVERY_LOOP).
    pub fixed_after: Option<u64>,
}

impl Verify {
    /// Takes the command and the project's facts at the start of the run.
    pub(super) fn at_start(s: &Settings, plan: &crate::policy::fixplan::Plan) -> Self {
        let command = s.verify_command.value.clone();
        let tests_at_start = if command.is_some() {
            test_files(&s.project_dir)
        } else {
            Vec::new()
        };
        Self {
            command,
            timeout: s.verify_timeout.value,
            max_rejected: s.max_rejected_completions.value,
            every_loop: s.verify_every_loop.value,
            tests_at_start,
            rc_at_start: rc_verify_command(&s.project_dir),
            required: Required::at_start(plan),
            ..Self::default()
        }
    }

    /// `status.json` `verification`.
    pub(super) fn status(&self) -> Option<VerificationStatus> {
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
    pub(super) fn loop_result(&self, number: u64) -> Option<&CheckResult> {
        (self.every_loop && self.checked_after == Some(number))
            .then_some(self.last.as_ref())
            .flatten()
    }
}

impl Engine {
    /// Runs the check now; records it (state, event, log line, terminal).
    async fn run_check(&mut self, kind: CheckKind) -> Result<CheckResult> {
        let command = self.verify.command.clone().unwrap_or_default();
        self.state.verify_count += 1;
        let log = self
            .store
            .logs_dir()
            .join(format!("verify-{:05}.log", self.state.verify_count));
        self.store.ensure_dirs()?;
        self.reporter
            .info(&format!("verifying ({}): {command}", kind.as_str()));
        let lock = &mut self.lock;
        let ran = run_command_with_hook(
            &command,
            &self.s.project_dir,
            &log,
            self.verify.timeout,
            self.cancel.clone(),
            |pgid| {
                if let Some(ticks) = crate::agent::process::start_ticks(pgid) {
                    lock.record_verify(Some((pgid, ticks)));
                }
            },
        )
        .await;
        self.lock.record_verify(None);
        let ran =
            ran.map_err(|e| HankError::io("failed to run VERIFY_COMMAND, output", &log, e))?;
        let root = self.s.project_dir.clone();
        let removed = verify::removed_tests(
            &self.verify.tests_at_start,
            |p| {
                std::fs::symlink_metadata(root.join(p))
                    .ok()
                    .filter(std::fs::Metadata::is_file)
                    .map(|m| m.len())
            },
            |p| blank_file(&root.join(p)),
        );
        let mut result = ran.record(
            kind,
            command,
            self.clock.now(),
            (&log, &self.s.project_dir),
            self.state.loop_count,
        );
        result.removed_tests = removed;
        let line = format!(
            "verification ({}) {}: {} ({}, {}; output: {})",
            kind.as_str(),
            if result.passed { "passed" } else { "failed" },
            result.command,
            result.how_it_ended(),
            crate::report::format_secs(result.duration_ms / 1000),
            result.log
        );
        self.store.log(self.clock.now(), &line);
        if result.passed {
            self.reporter.info(&line);
        } else if !result.interrupted {
            self.reporter.warn(&line);
        }
        if !result.removed_tests.is_empty() {
            self.warn(&format!(
                "test files deleted or emptied during this run: {}",
                result.removed_tests.join(", ")
            ));
        }
        self.verify.last = Some(result.clone());
        self.state.last_verification = Some(result.clone());
        self.emit(EventKind::Verification(Box::new(result.clone())))?;
        Ok(result)
    }

    fn tail_of(&self, r: &CheckResult) -> String {
        read_tail(&self.s.project_dir.join(&r.log), TAIL_READ)
    }

    /// VERIFY_AT_START: the check before loop 1. A red baseline is told to the first loop.
    /// Returns `Some(Interrupted)` when Ctrl-C stopped it.
    pub(super) async fn verify_baseline(&mut self) -> Result<Option<ExitReason>> {
        if self.verify.command.is_none() || !self.s.verify_at_start.value {
            return Ok(None);
        }
        let r = self.run_check(CheckKind::Baseline).await?;
        if r.interrupted {
            return Ok(Some(ExitReason::Interrupted));
        }
        if !r.passed {
            self.verify.feedback = Some(verify::baseline_feedback(&r, &self.tail_of(&r)));
        }
        self.verify.baseline = Some(r);
        self.verify.checked_after = Some(self.state.loop_count);
        self.save()?;
        Ok(None)
    }

    /// VERIFY_EVERY_LOOP: the check after loop `number`. Returns whether the loop turned a
    /// passing check into a failing one (not progress for the breaker), `None` when no check
    /// ran (off, or interrupted).
    pub(super) async fn verify_loop(&mut self, number: u64) -> Result<Option<bool>> {
        if self.verify.command.is_none() || !self.verify.every_loop || self.interrupted() {
            return Ok(None);
        }
        let before = self.verify.last.clone();
        let r = self.run_check(CheckKind::Loop).await?;
        if r.interrupted {
            return Ok(None);
        }
        self.verify.checked_after = Some(number);
        let regressed = verify::regressed(before.as_ref(), &r);
        if r.passed && before.as_ref().is_some_and(|b| !b.passed) {
            self.verify.fixed_after = Some(number);
        }
        if !r.passed {
            self.verify.feedback = Some(verify::loop_feedback(&r, &self.tail_of(&r), regressed));
        }
        Ok(Some(regressed))
    }

    /// A "done" claim (`reason` is a completion): with a check configured, it stops the run
    /// only when the check passes. Returns the exit to take, or `None` to go on working
    /// (the claim was rejected; the next loop's context says why).
    pub(super) async fn verify_claim(&mut self, reason: ExitReason) -> Result<Option<ExitReason>> {
        if self.verify.command.is_none() || !reason.is_completion() {
            return Ok(Some(reason));
        }
        let number = self.state.loop_count;
        if self.verify.judged_after == Some(number) {
            // Already rejected, and the agent has not worked since: let it work.
            return Ok(None);
        }
        let r = match self.verify.loop_result(number) {
            Some(r) if r.kind == CheckKind::Loop => r.clone(),
            _ => self.run_check(CheckKind::Completion).await?,
        };
        if r.interrupted {
            return Ok(Some(ExitReason::Interrupted));
        }
        self.verify.judged_after = Some(number);
        self.verify.checked_after = Some(number);
        let max = self.verify.max_rejected;
        match verify::judge_claim(self.verify.rejected_in_a_row, r.passed, max) {
            Verdict::Accept => {
                self.verify.rejected_in_a_row = 0;
                self.verify.verified = Some(true);
                Ok(Some(reason))
            }
            Verdict::Reject { in_a_row } => {
                self.verify.rejected_in_a_row = in_a_row;
                self.verify.feedback = Some(verify::rejection_feedback(
                    &r,
                    &self.tail_of(&r),
                    in_a_row,
                    max,
                ));
                self.warn(&format!(
                    "\"done\" ({reason}) rejected: the check failed ({}); the agent is told why (rejection {in_a_row} of {max})",
                    r.how_it_ended()
                ));
                Ok(None)
            }
            Verdict::Halt { in_a_row } => {
                self.verify.rejected_in_a_row = in_a_row;
                self.verify.verified = Some(false);
                Ok(Some(ExitReason::VerificationFailed))
            }
        }
    }

    /// Whether the plan is complete, counting required items that left it during the run as
    /// open; each such item is warned about once.
    pub(super) fn plan_complete(&mut self) -> bool {
        let drift = self.verify.required.observe(&self.plan);
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
            .filter(|m| self.verify.drift_warned.insert(m.clone()))
            .collect();
        if !new.is_empty() {
            self.warn(&format!(
                "fix_plan.md: open required item(s) changed during the run: {}; they stay required until ticked (change the plan between runs to drop them)",
                new.join(", ")
            ));
        }
        self.plan.is_complete() && drift.is_empty()
    }

    /// What the exit message adds about verification: the passing check of a completion, the
    /// test files deleted or emptied, the required items that left the plan while open.
    pub(super) fn verification_summary(&self, reason: ExitReason) -> String {
        let mut out = String::new();
        if reason.is_completion()
            && self.verify.verified == Some(true)
            && let Some(r) = &self.verify.last
        {
            out.push_str(&format!(
                "; verified: `{}` passed in {}",
                r.command,
                crate::report::format_secs(r.duration_ms / 1000)
            ));
        }
        if let Some(r) = &self.verify.last
            && !r.removed_tests.is_empty()
        {
            out.push_str(&format!(
                "; test files deleted or emptied during the run: {}",
                r.removed_tests.join(", ")
            ));
        }
        if !self.verify.drift_warned.is_empty() {
            let list: Vec<&str> = self
                .verify
                .drift_warned
                .iter()
                .map(String::as_str)
                .collect();
            out.push_str(&format!(
                "; fix_plan items that changed while open: {}",
                list.join(", ")
            ));
        }
        out
    }

    /// Warns once when `.hankrc`'s VERIFY_COMMAND changed since the run started: the run
    /// keeps the command it started with.
    pub(super) fn watch_verify_edit(&mut self) {
        if self.verify.rc_warned {
            return;
        }
        let now = rc_verify_command(&self.s.project_dir);
        if now != self.verify.rc_at_start {
            self.verify.rc_warned = true;
            let kept = self
                .verify
                .command
                .as_deref()
                .map_or_else(|| "no check".to_string(), |c| format!("`{c}`"));
            self.warn(&format!(
                "VERIFY_COMMAND in .hankrc changed during the run; ignored: this run keeps {kept} (restart hank to use the new one)"
            ));
        }
    }
}
