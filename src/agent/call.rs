//! One agent call, from spawn to analysis: the sequence the loop and `hank import` share.
//!
//! Runs the agent ([`super::process`]: no shell, own process group, timeout and interrupt
//! handling), then analyzes what it printed ([`crate::analysis`]) with the run facts and the
//! caller's clock. The caller decides what the answer means for it.
//!
//! The answer analyzed is the bytes hank read from the agent's stdout
//! ([`process::Capture`]), never the `loop-N.out` log (the agent can write that file). The
//! analysis runs on a blocking thread and stops early when the user interrupts (it checks
//! every [`CANCEL_CHECK_BYTES`]), so that Ctrl-C is honoured even while a huge answer is read.

use std::io::{BufRead, Read};

use tokio::sync::watch;

use crate::agent::process::{self, Capture, RunOutcome, Spawn};
use crate::agent::profile::Parser;
use crate::analysis::{self, AgentError, Analysis, Clock, ErrorKind, Outcome, RunFacts};

/// Bytes the analysis reads between two looks at the interrupt count.
pub const CANCEL_CHECK_BYTES: usize = 4 * 1024 * 1024;

/// What one call produced.
#[derive(Debug)]
pub struct Called {
    pub outcome: RunOutcome,
    pub analysis: Analysis,
}

/// Runs `spawn` and analyzes its output. `on_track` hears of the agent's group right after the
/// start and of its descendants that left the group while it runs (the loop records them for
/// orphan cleanup, see [`process::Tracked`]), `on_line` gets stdout lines in live mode, and
/// `clock` gives the time and zone for reset times (taken when the call ends). `parser` is the
/// profile's way of reading the answer, `asked` the output format hank asked for (the native
/// analyzer reads a JSON format strictly).
///
/// # Errors
/// The agent could not be started (the error names the program).
pub async fn call(
    spawn: Spawn<'_>,
    parser: &Parser,
    asked: analysis::AskedFormat,
    cancel: watch::Receiver<u32>,
    on_track: impl FnMut(process::Tracked<'_>),
    on_line: impl FnMut(&[u8]),
    clock: impl FnOnce() -> Clock,
) -> Result<Called, String> {
    let program = spawn.program.display().to_string();
    let mut outcome = process::run_with_hook(spawn, cancel.clone(), on_track, on_line)
        .await
        .map_err(|e| format!("failed to start the agent {program}: {e}"))?;
    let facts = outcome.facts;
    let clock = clock();
    let stdout = std::mem::take(&mut outcome.stdout);
    let stderr = outcome.stderr_head.clone();
    let parser = parser.clone();
    let job = tokio::task::spawn_blocking(move || {
        analyze_capture(stdout, &stderr, &facts, &clock, (&parser, asked), cancel)
    });
    let analysis = match job.await {
        Ok(a) => a,
        Err(e) => {
            return Err(format!(
                "the analysis of the answer of {program} failed: {e}"
            ));
        }
    };
    Ok(Called { outcome, analysis })
}

/// Analyzes a captured answer; stops reading when `cancel` counts an interrupt (the answer is
/// then an `interrupted` error, with whatever cost and tokens were read before).
#[must_use]
pub fn analyze_capture(
    stdout: Capture,
    stderr: &[u8],
    facts: &RunFacts,
    clock: &Clock,
    (parser, asked): (&Parser, analysis::AskedFormat),
    cancel: watch::Receiver<u32>,
) -> Analysis {
    let reader: Box<dyn BufRead + Send> = match stdout.into_reader() {
        Ok(r) => r,
        Err(_) => Box::new(&b""[..]),
    };
    let mut input = Cancellable {
        inner: reader,
        cancel,
        since_check: 0,
        stopped: false,
    };
    let mut analysis = match parser {
        Parser::Claude => analysis::analyze_as(&mut input, stderr, facts, clock, asked),
        Parser::Mapped(m) => analysis::analyze_mapped(&mut input, stderr, facts, clock, m),
    };
    if input.stopped {
        analysis.outcome = Outcome::AgentError;
        analysis.error = Some(AgentError {
            kind: ErrorKind::Interrupted,
            message: "interrupted by the user (Ctrl-C / SIGTERM) while hank read the answer"
                .to_owned(),
            api_status: None,
            reset_at: None,
            window: None,
        });
        analysis.status = None;
        analysis.completion_indicators.clear();
        analysis.questions.clear();
        analysis.testing_only = false;
    }
    analysis
}

/// A reader that ends early (EOF) once the user interrupted, looking every
/// [`CANCEL_CHECK_BYTES`] (an answer smaller than that is always read whole).
struct Cancellable<R> {
    inner: R,
    cancel: watch::Receiver<u32>,
    since_check: usize,
    stopped: bool,
}

impl<R> Cancellable<R> {
    fn check(&mut self) -> bool {
        if !self.stopped && self.since_check >= CANCEL_CHECK_BYTES {
            self.since_check = 0;
            self.stopped = *self.cancel.borrow() > 0;
        }
        self.stopped
    }
}

impl<R: BufRead> Read for Cancellable<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.check() {
            return Ok(0);
        }
        let n = self.inner.read(buf)?;
        self.since_check = self.since_check.saturating_add(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Cancellable<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.check() {
            return Ok(&[]);
        }
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        self.since_check = self.since_check.saturating_add(amt);
        self.inner.consume(amt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big_stream(lines: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let line = format!(
            "{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}}}\n",
            "x".repeat(1000)
        );
        for _ in 0..lines {
            out.extend_from_slice(line.as_bytes());
        }
        out.extend_from_slice(
            br#"{"type":"result","subtype":"success","is_error":false,"result":"done","total_cost_usd":0.5,"session_id":"s1"}"#,
        );
        out.push(b'\n');
        out
    }

    /// The analysis of a Claude stream of `lines` text lines and a result, with `interrupts`
    /// received before it starts.
    fn analyze_stream(lines: usize, interrupts: u32) -> Analysis {
        let (tx, rx) = watch::channel(interrupts);
        let clock = Clock::utc(jiff::Timestamp::UNIX_EPOCH);
        let facts = RunFacts {
            exit_code: Some(0),
            ..RunFacts::default()
        };
        let a = analyze_capture(
            Capture::of(big_stream(lines)),
            b"",
            &facts,
            &clock,
            (&Parser::Claude, analysis::AskedFormat::Auto),
            rx,
        );
        drop(tx);
        a
    }

    #[test]
    fn an_interrupt_stops_the_analysis_of_a_large_answer() {
        let a = analyze_stream(20_000, 1);
        assert_eq!(a.error_kind(), Some(ErrorKind::Interrupted), "{a:?}");
        assert_eq!(a.cost_usd, 0.0);
        assert!(a.stdout_bytes < 20_000_000);
    }

    #[test]
    fn without_interrupt_the_whole_answer_is_read() {
        let a = analyze_stream(20_000, 0);
        assert_eq!(a.outcome, Outcome::Success, "{a:?}");
        assert!((a.cost_usd - 0.5).abs() < 1e-9);
        assert_eq!(a.session_id.as_deref(), Some("s1"));
    }

    #[test]
    fn a_small_answer_is_read_whole_even_after_an_interrupt() {
        let a = analyze_stream(10, 1);
        assert!((a.cost_usd - 0.5).abs() < 1e-9, "{a:?}");
    }
}
