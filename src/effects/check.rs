//! VERIFY_COMMAND run for real: `/bin/sh -c` in the project root, in its own process group,
//! with VERIFY_TIMEOUT and Ctrl-C honoured, output to `.hank/logs/verify-NNNNN.log`; its group
//! recorded in the lock while it runs; the test files deleted or emptied since the start
//! found. `hank verify` uses the same functions.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;

use super::agent::GRACE;
use super::{CheckCall, Checked, News, Real, RunView};
use crate::error::{HankError, Result};
use crate::exit::ExitReason;
use crate::policy::progress::is_test_path;
use crate::policy::verification::{ClaimCheck, Verification};
use crate::policy::verify::{self, CheckKind, CheckResult};
use crate::store::State;

/// Bytes of the end of the output read for the agent's feedback.
pub(crate) const TAIL_READ: u64 = 64 * 1024;
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
pub(crate) fn rc_verify_command(project_dir: &Path) -> Option<String> {
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

/// The run's verification at its start: VERIFY_COMMAND as resolved, the project's test files
/// and `.hankrc`'s VERIFY_COMMAND line as written (an edit during the run is noticed).
pub(crate) fn verification_at_start(
    s: &crate::settings::Settings,
    plan: &crate::policy::fixplan::Plan,
) -> crate::policy::verification::Verification {
    use crate::policy::verification::{Verification, VerifyConfig};
    let command = s.verify_command.value.clone();
    let tests = if command.is_some() {
        test_files(&s.project_dir)
    } else {
        Vec::new()
    };
    let cfg = VerifyConfig {
        command,
        timeout: s.verify_timeout.value,
        max_rejected: s.max_rejected_completions.value,
        every_loop: s.verify_every_loop.value,
    };
    Verification::at_start(cfg, tests, rc_verify_command(&s.project_dir), plan)
}

/// The run's checks, driven: the baseline before loop 1, the per-loop check, the check of a
/// "done" claim. Each runs through [`super::Effects::run_check`], is numbered in `state`,
/// recorded in `verify` and `state`, and reported (the warning its record raises, the
/// `verification` event); what each result means is [`Verification`]'s (pure).
pub(crate) struct Checks<'a> {
    pub fx: &'a mut dyn super::Effects,
    pub verify: &'a mut Verification,
    pub state: &'a mut State,
    pub project: &'a Path,
    /// fix_plan.md as the run last read it.
    pub plan: &'a crate::policy::fixplan::Plan,
    /// The run's cost and plan items for the news told (no status change).
    pub view: RunView<'a>,
}

impl Checks<'_> {
    /// Runs the check of `kind` now, recorded and reported.
    async fn run(&mut self, kind: CheckKind) -> Result<Checked> {
        let command = self.verify.command.clone().unwrap_or_default();
        self.state.verify_count += 1;
        let tests = std::mem::take(&mut self.verify.tests_at_start);
        let call = CheckCall {
            kind,
            command: &command,
            project: self.project,
            number: self.state.verify_count,
            after_loop: self.state.loop_count,
            timeout: self.verify.timeout,
            tests_at_start: &tests,
        };
        let checked = self.fx.run_check(call).await;
        self.verify.tests_at_start = tests;
        let checked = checked?;
        let warning = self.verify.record(checked.result.clone(), &checked.tail);
        self.state.last_verification = Some(checked.result.clone());
        self.warn(warning)?;
        self.fx.tell(self.view, News::Checked(&checked.result))?;
        Ok(checked)
    }

    fn warn(&mut self, warning: Option<String>) -> Result<()> {
        warning.map_or(Ok(()), |w| self.fx.tell(self.view, News::Warning(&w)))
    }

    /// Whether the plan is complete, counting required items that left it during the run as
    /// open ([`Verification::plan_complete`]; each such item warned about once). `look`: a
    /// look before a call, which first warns (once) when `.hankrc`'s VERIFY_COMMAND changed
    /// since the run started ([`rc_edit`]).
    pub(crate) fn plan_complete(mut self, look: bool) -> bool {
        if look {
            let edit = rc_edit(self.verify, self.project);
            let _ = self.warn(edit);
        }
        let (complete, warning) = self.verify.plan_complete(self.plan);
        let _ = self.warn(warning);
        complete
    }

    /// VERIFY_AT_START: the check before loop 1, its result saved; a red baseline is told to
    /// the first loop. Ctrl-C during it is the next gate's to see.
    pub(crate) async fn baseline(mut self) -> Result<()> {
        if self.verify.command.is_none() {
            return Ok(());
        }
        let c = self.run(CheckKind::Baseline).await?;
        if !c.result.interrupted {
            self.verify
                .on_baseline(c.result, &c.tail, self.state.loop_count);
            self.fx.persist(self.state, true)?;
        }
        Ok(())
    }

    /// VERIFY_EVERY_LOOP: the check after loop `number`. Returns whether the loop turned a
    /// passing check into a failing one (`false` when no check ran, or Ctrl-C stopped it).
    pub(crate) async fn after_loop(mut self, number: u64) -> Result<bool> {
        if !self.verify.checks_every_loop(self.fx.interrupted()) {
            return Ok(false);
        }
        let before = self.verify.last.clone();
        let c = self.run(CheckKind::Loop).await?;
        let r = &c.result;
        Ok(!r.interrupted && (self.verify).on_loop_check(number, before.as_ref(), r, &c.tail))
    }

    /// A "done" claim (`reason` is a completion): with a check configured, it stops the run
    /// only when the check passes. Returns the exit to take, or `None` to go on working (the
    /// claim was rejected; the next loop's context says why).
    pub(crate) async fn claim(mut self, reason: ExitReason) -> Result<Option<ExitReason>> {
        let number = self.state.loop_count;
        let checked = match self.verify.claim_needs(reason, number) {
            ClaimCheck::Settled(exit) => return Ok(exit),
            ClaimCheck::Again(result, tail) => Checked { result, tail },
            ClaimCheck::Run => self.run(CheckKind::Completion).await?,
        };
        let judged = (self.verify).judge(reason, number, &checked.result, &checked.tail);
        self.warn(judged.warning)?;
        Ok(judged.exit)
    }
}

/// The warning (once) when `.hankrc`'s VERIFY_COMMAND line changed since the run started:
/// the run keeps the command it started with.
pub(crate) fn rc_edit(verify: &mut Verification, project: &Path) -> Option<String> {
    if !verify.watches_rc() {
        return None;
    }
    verify.rc_edited(rc_verify_command(project).as_deref())
}

impl Real {
    /// Runs the check of `c` and records it (the log relative to the project).
    pub(super) async fn check(&mut self, c: CheckCall<'_>) -> Result<Checked> {
        let log = self
            .store
            .path(crate::store::HankFile::Logs)
            .join(format!("verify-{:05}.log", c.number));
        self.store.ensure_dirs()?;
        let what = format!("verifying ({}): {}", c.kind.as_str(), c.command);
        self.reporter.info(&what);
        let root = c.project;
        let lock = &mut self.lock;
        let ran = run_command_with_hook(
            c.command,
            root,
            &log,
            c.timeout,
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
        let removed = verify::removed_tests(
            c.tests_at_start,
            |p| {
                std::fs::symlink_metadata(root.join(p))
                    .ok()
                    .filter(std::fs::Metadata::is_file)
                    .map(|m| m.len())
            },
            |p| blank_file(&root.join(p)),
        );
        let mut result = ran.record(
            c.kind,
            c.command.to_owned(),
            self.clock.now(),
            (&log, root),
            c.after_loop,
        );
        result.removed_tests = removed;
        let line = crate::policy::verification::Verification::result_line(&result);
        self.store.log(self.clock.now(), &line);
        if result.passed {
            self.reporter.info(&line);
        } else if !result.interrupted {
            self.reporter.warn(&line);
        }
        let tail = if result.passed {
            String::new()
        } else {
            read_tail(&root.join(&result.log), TAIL_READ)
        };
        Ok(Checked { result, tail })
    }
}
