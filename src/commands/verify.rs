//! `hank verify [--json] [--command CMD] [--timeout D]`: runs the project's check now, the
//! way the loop runs it before it accepts "done", and records the result (state.json,
//! status.json `verification`, a `verification` event). Refuses while a loop runs: the loop
//! owns the state, and the check would race the agent's edits.
//!
//! Exit codes: 0 the check passed, 2 it failed (or timed out), 1 hank could not run it (also
//! when the shell could not: exit 127 / 126, the program named),
//! 130 interrupted.

use std::fmt::Write as _;

use crate::cli::VerifyArgs;
use crate::clock::SystemClock;
use crate::effects::check::{read_tail, run_command_with_hook};
use crate::error::{HankError, Result};
use crate::exit;
use crate::policy::time::Clock;
use crate::policy::verify::{self, CheckKind, CheckResult, VerificationStatus};
use crate::settings::Flags;
use crate::store::{Event, EventKind};

use super::out;

/// Lines of the output's end printed when the check fails.
const TAIL_LINES_BYTES: usize = 2000;

pub(crate) fn run(a: &VerifyArgs) -> Result<u8> {
    let flags = Flags {
        verify: a.command.clone(),
        verify_timeout: a.timeout.clone(),
        named: &[
            ("VERIFY_COMMAND", "--command"),
            ("VERIFY_TIMEOUT", "--timeout"),
        ],
        ..Flags::default()
    };
    let (dir, store, s) = super::approved_project("hank verify", &flags)?;
    let Some(command) = s.verify_command.value.clone() else {
        return Err(HankError::usage_hint(
            "no check to run: VERIFY_COMMAND is not set",
            "add VERIFY_COMMAND=\"your test command\" to .hankrc (e.g. VERIFY_COMMAND=\"cargo test\"), or pass --command CMD",
        ));
    };
    let mut lock = super::lock_or_hint(
        &store,
        "the loop runs the check itself before it accepts \"done\"; `hank status` shows its last result",
    )?;
    // A check (or an agent) left running by a hank that was killed: stopped first.
    if let Some((pgid, ticks)) = lock.orphaned_verify() {
        if crate::agent::process::stop_orphan_group(pgid, ticks) {
            errln!(
                "hank: stopped the VERIFY_COMMAND left running by a hank that was killed (process group {pgid})"
            );
        }
        lock.record_verify(None);
    }
    let clock = SystemClock::from_env()?;
    let mut state = store.load_state(clock.now())?.state;
    store.ensure_dirs()?;
    state.verify_count += 1;
    let log = store
        .path(crate::store::HankFile::Logs)
        .join(format!("verify-{:05}.log", state.verify_count));
    let runtime = crate::proc::runtime()
        .map_err(|e| HankError::Internal(format!("failed to start the async runtime: {e}")))?;
    let timeout = s.verify_timeout.value;
    let ran = runtime.block_on(async {
        let cancel = crate::agent::signals::install()?;
        if !a.json {
            errln!("hank: verifying: {command}");
        }
        let ran = run_command_with_hook(&command, &dir, &log, timeout, cancel, |pgid| {
            if let Some(ticks) = crate::agent::process::start_ticks(pgid) {
                lock.record_verify(Some((pgid, ticks)));
            }
        })
        .await;
        lock.record_verify(None);
        ran.map_err(|e| HankError::io("failed to run VERIFY_COMMAND, output", &log, e))
    })?;
    let result = ran.record(
        CheckKind::Manual,
        command.clone(),
        clock.now(),
        (&log, &dir),
        state.loop_count,
    );
    state.last_verification = Some(result.clone());
    store.save_state(&state)?;
    store.append_event(
        &Event::new(result.at, EventKind::Verification(Box::new(result.clone()))).to_line(),
    )?;
    if let Some(mut status) = store.read_status() {
        let mut v = status
            .verification
            .take()
            .unwrap_or_else(|| VerificationStatus {
                max_rejected: s.max_rejected_completions.value,
                ..VerificationStatus::default()
            });
        v.command = command.clone();
        v.last = Some(result.clone());
        status.verification = Some(v);
        store.write_status(&status)?;
    }
    if result.could_not_run() {
        // Nothing was tested: not a failed check (exit 2) but a check hank could not run.
        let (message, hint) = verify::could_not_run_text(&result, &read_tail(&log, 64 * 1024));
        return Err(HankError::usage_hint(message, hint));
    }
    if a.json {
        let text = serde_json::to_string_pretty(&result)
            .map_err(|e| HankError::Internal(format!("cannot encode the result: {e}")))?;
        out(&(text + "\n"))?;
    } else {
        out(&describe(&result, &read_tail(&log, 64 * 1024)))?;
    }
    Ok(if result.interrupted {
        exit::INTERRUPTED
    } else if result.passed {
        exit::OK
    } else {
        exit::HALTED
    })
}

/// The human result: one line, and for a failure the failing tests and the output's end.
fn describe(r: &CheckResult, tail: &str) -> String {
    let mut text = format!(
        "{}: {} ({}, {}); output: {}\n",
        if r.passed { "passed" } else { "FAILED" },
        r.command,
        r.how_it_ended(),
        crate::report::format_secs(r.duration_ms / 1000),
        r.log
    );
    if !r.passed {
        let plain = verify::plain_text(tail);
        let names = verify::failing_tests(&plain);
        if !names.is_empty() {
            let _ = writeln!(text, "failing tests: {}", names.join(", "));
        }
        let end = verify::tail_lines(&plain, TAIL_LINES_BYTES);
        if !end.is_empty() {
            let _ = writeln!(text, "--- end of the output ---\n{end}");
        }
    }
    text
}
