//! One agent call, from spawn to analysis: the sequence the loop and `hank import` share.
//!
//! Runs the agent ([`super::process`]: no shell, own process group, timeout and interrupt
//! handling), then analyzes what it printed ([`crate::analysis`]) with the run facts and the
//! caller's clock. The caller decides what the answer means for it.

use std::io::BufReader;

use tokio::sync::watch;

use crate::agent::process::{self, RunOutcome, Spawn};
use crate::agent::profile::Parser;
use crate::analysis::{self, Analysis, Clock, RunFacts};

/// What one call produced.
#[derive(Debug)]
pub struct Called {
    pub outcome: RunOutcome,
    pub analysis: Analysis,
}

/// The run facts the analyzer needs from a process outcome.
#[must_use]
pub fn facts_of(outcome: &RunOutcome) -> RunFacts {
    RunFacts {
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        timed_out: outcome.timed_out,
        interrupted: outcome.interrupted,
    }
}

/// Runs `spawn` and analyzes its output. `on_spawn(pgid)` runs right after the start (the
/// loop records the group for orphan cleanup), `on_line` gets stdout lines in live mode, and
/// `clock` gives the time and zone for reset times (taken when the call ends). `parser` is the
/// profile's way of reading the answer.
///
/// # Errors
/// The agent could not be started (the error names the program).
pub async fn call(
    spawn: Spawn<'_>,
    parser: &Parser,
    cancel: watch::Receiver<u32>,
    on_spawn: impl FnOnce(i32),
    on_line: impl FnMut(&[u8]),
    clock: impl FnOnce() -> Clock,
) -> Result<Called, String> {
    let program = spawn.program.display().to_string();
    let stdout_log = spawn.stdout_log.clone();
    let outcome = process::run_with_hook(spawn, cancel, on_spawn, on_line)
        .await
        .map_err(|e| format!("failed to start the agent {program}: {e}"))?;
    let facts = facts_of(&outcome);
    let clock = clock();
    let stderr = &outcome.stderr_head;
    let analysis = match (std::fs::File::open(&stdout_log), parser) {
        // 256 KiB reads: most stream-json lines are then parsed in place, not copied.
        (Ok(f), Parser::Claude) => {
            analysis::analyze_in(BufReader::with_capacity(1 << 18, f), stderr, &facts, &clock)
        }
        (Ok(f), Parser::Mapped(m)) => analysis::analyze_mapped(
            BufReader::with_capacity(1 << 18, f),
            stderr,
            &facts,
            &clock,
            m,
        ),
        (Err(_), Parser::Claude) => analysis::analyze_bytes_in(b"", stderr, &facts, &clock),
        (Err(_), Parser::Mapped(m)) => {
            analysis::analyze_mapped(&b""[..], stderr, &facts, &clock, m)
        }
    };
    Ok(Called { outcome, analysis })
}
