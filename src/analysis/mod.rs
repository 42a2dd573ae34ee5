//! Response analysis: turns what the agent printed into an [`Analysis`].  **\[pure\]**
//!
//! Accepts every output shape Claude Code produces (the JSON result object, a JSON array of
//! messages, stream-json lines, plain text, empty or truncated output) and classifies the
//! outcome by content, never by the exit code alone (see `../shared/design/claude-contract.md`).
//! No clock, no processes, no file I/O: time and the run facts are passed in.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! agent output → `Analysis` (shapes, `review.rs`: the reviewer's `HANK_REVIEW` verdict,
//! `parse_review`, read wherever `HANK_STATUS` is — `Analysis::review` — and failing closed
//! (`Verdict::Unreadable`) **\[pure\]**, typed error fields, error kinds, usage-limit reset times,
//! HANK_STATUS): the reader (`parse::Gathered`) fills the `Analysis` fields the output says
//! outright (`Gathered::read`: shape, size, session, login expiry, the last result's cost, tokens,
//! turns, duration, denials; `ResultData` keeps what only the verdict reads), `finish` adds the
//! verdict and what is derived from the answer text; `AskedFormat`: in json / stream-json only the
//! client's JSON is an answer (text, foreign JSON, stray bytes → `malformed`; a `result` after
//! stray bytes still counts); a field read whatever its JSON type implements `parse::Lenient` (one
//! visitor, `parse::lenient`: `Scalar`, `Content`, the usage windows; `WindowFields`: what a
//! reading says of a window, shared by `WindowReading` and `policy::windows::WindowState`, with the
//! one merge rule `WindowFields::merge`); every line reader takes its bytes through `parse::fill`;
//! a profile's error rule with `scope = "end"` (`mapped::Matcher::End`) reads the output's last
//! lines and fails even a text answer (Aider); `Analysis::crash` (`classify::crash_of`: a non-zero
//! exit without an answer, its last meaningful line `crash_line` and its tail) and
//! `Analysis::refused_paths` (`refusals.rs`: the paths of refused file accesses in tool results,
//! stderr and the answer; the effects make them `sandbox_denied` events under the sandbox only)
//! **\[pure\]**

#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

mod classify;
mod derive;
mod live;
mod mapped;
mod parse;
pub mod refusals;
mod reset;
pub mod review;
mod status;
pub(crate) mod windows;
// The tests read fixtures and measure time; the code under test does neither.
#[cfg(test)]
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
mod table_tests;
#[cfg(test)]
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
mod tests;

use std::io::BufRead;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use regex::Regex;
use serde::{Deserialize, Serialize};

pub use classify::{Classified, classify_text, crash_line};
pub use derive::{
    completion_indicators, is_test_command, normalize_signature, questions, signatures,
};
pub use live::{LiveItem, live_items};
pub use mapped::{
    ErrorRule, FieldPath, Fields, MappedFormat, Mapping, Matcher, RuleKind, Take, analyze_mapped,
    mapped_live_items,
};
pub use reset::{parse_reset, reset_from_line, reset_in_line};
pub use status::parse_status_block;
pub use windows::{WindowFields, WindowReading, valid_window_name};

/// Compiles one of the module's constant patterns (every one is exercised by the tests, so
/// a failure here is a programming error caught before release, never an input problem).
pub(crate) fn re(pattern: &str) -> Regex {
    match Regex::new(pattern) {
        Ok(r) => r,
        Err(e) => panic!("constant pattern {pattern:?} does not compile: {e}"),
    }
}

/// The shape of the agent's stdout, as detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OutputShape {
    /// One JSON `result` object (`--output-format json`).
    ResultObject,
    /// A JSON array of messages (`--output-format json --verbose`).
    MessageArray,
    /// One JSON event per line (`--output-format stream-json --verbose`).
    StreamJson,
    /// Plain text (`--output-format text`, or anything that is not JSON).
    Text,
    /// Nothing at all on stdout.
    #[default]
    Empty,
    /// JSON that starts but never completes (killed mid-write).
    Truncated,
}

/// The output format hank asked the agent for: how strictly its answer is read.
///
/// In the JSON formats an answer must be the client's JSON: text, foreign JSON, `{not valid
/// json}` or stray bytes around the result are `malformed` (a crash), never a text success;
/// a `result` object found after stray bytes is still read (its cost, tokens and session
/// count). `Auto` guesses from the first bytes (`hank analyze` without `--format` and no loop
/// log to tell).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AskedFormat {
    /// Not known: the shape is guessed from the first bytes.
    #[default]
    Auto,
    /// `--output-format json`.
    Json,
    /// `--output-format stream-json`.
    StreamJson,
    /// `--output-format text`.
    Text,
}

impl AskedFormat {
    /// The stable string (`auto`, `json`, `stream-json`, `text`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Json => "json",
            Self::StreamJson => "stream-json",
            Self::Text => "text",
        }
    }

    /// Parses [`Self::as_str`]'s strings.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "auto" => Some(Self::Auto),
            "json" => Some(Self::Json),
            "stream-json" => Some(Self::StreamJson),
            "text" => Some(Self::Text),
            _ => None,
        }
    }

    /// One of the JSON formats: the answer must be the client's JSON.
    #[must_use]
    pub fn is_json(self) -> bool {
        matches!(self, Self::Json | Self::StreamJson)
    }
}

/// What happened to the call, as reported in `status.json` (`last_loop.outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The agent answered and reported no error.
    #[default]
    Success,
    /// The agent (or the API behind it) reported an error; see [`Analysis::error`].
    AgentError,
    /// Hank's timeout killed the agent (the call timeout, IDLE_TIMEOUT, or
    /// FIRST_OUTPUT_TIMEOUT: see [`ErrorKind::StartupHang`]).
    Timeout,
    /// The agent died without a usable answer (signal, non-zero exit, no output).
    Crashed,
}

/// Why the agent failed. Stable snake_case strings (they appear in events and `hank analyze`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Not logged in, invalid API key, expired or revoked token.
    Auth,
    /// Credit balance too low.
    Billing,
    /// Subscription usage window exhausted; see [`AgentError::reset_at`] and
    /// [`AgentError::window`].
    UsageLimit,
    /// A spend cap, not a window: monthly spend limit, the org's monthly usage limit, out of
    /// usage credits (`api_error: model_requires_usage_credits`). Waiting for a window reset
    /// does not help.
    SpendLimit,
    /// API 429 (per-minute request/token rate limit).
    RateLimit,
    /// API 529 / overloaded.
    Overloaded,
    /// API 5xx.
    Server,
    /// Could not reach the API.
    Network,
    /// `error_max_turns`.
    MaxTurns,
    /// `error_max_budget_usd`.
    Budget,
    /// The run was interrupted (`error_during_execution`, SIGINT).
    Interrupted,
    /// No output at all.
    NoOutput,
    /// Output that could not be understood.
    Malformed,
    /// A CLI usage/config error printed on stderr only (bad flag, unknown session, …).
    CliUsage,
    /// An error the analyzer could not place in any of the kinds above.
    Unknown,
    /// The answer is larger than hank reads: one line (or one JSON document, or one element
    /// of a message array) over 256 MiB, or over 4 GiB of stdout in all.
    OutputTooLarge,
    /// The agent printed nothing on stdout within FIRST_OUTPUT_TIMEOUT and was stopped (a
    /// startup hang: a version lock, a dead socket, a user-level hook or plugin).
    StartupHang,
}

impl ErrorKind {
    /// The stable string of this kind.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::Billing => "billing",
            Self::UsageLimit => "usage_limit",
            Self::SpendLimit => "spend_limit",
            Self::RateLimit => "rate_limit",
            Self::Overloaded => "overloaded",
            Self::Server => "server",
            Self::Network => "network",
            Self::MaxTurns => "max_turns",
            Self::Budget => "budget",
            Self::Interrupted => "interrupted",
            Self::NoOutput => "no_output",
            Self::Malformed => "malformed",
            Self::CliUsage => "cli_usage",
            Self::Unknown => "unknown",
            Self::OutputTooLarge => "output_too_large",
            Self::StartupHang => "startup_hang",
        }
    }
}

/// An error reported by the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentError {
    pub kind: ErrorKind,
    /// The human message (first line of `result`, `errors[0]`, or the stderr line), trimmed.
    pub message: String,
    /// `api_error_status` when the CLI reported one.
    pub api_status: Option<u16>,
    /// For [`ErrorKind::UsageLimit`]: when the window resets, if the output said so.
    pub reset_at: Option<Timestamp>,
    /// For [`ErrorKind::UsageLimit`]: which window (`five_hour`, `seven_day`,
    /// `seven_day_opus`, `seven_day_sonnet`, … as the client names them), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
}

/// Token usage of one call (or a running total).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_creation: u64,
}

impl Tokens {
    /// All tokens of every kind.
    #[must_use]
    pub fn sum(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_creation)
    }

    /// Adds `other` into `self` (saturating).
    pub fn add(&mut self, other: &Tokens) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_creation = self.cache_creation.saturating_add(other.cache_creation);
    }
}

/// One permission denial reported in `permission_denials`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// `tool_name`, e.g. `Bash`, `Write`.
    pub tool: String,
    /// For Bash: the command (`tool_input.command`).
    pub command: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkStatus {
    InProgress,
    Complete,
    Blocked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TestsStatus {
    Passing,
    Failing,
    NotRun,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkType {
    Implementation,
    Testing,
    Documentation,
    Refactoring,
}

/// The agent's `---HANK_STATUS---` block (the last one in the answer). Fields it did not give,
/// or gave in a form that could not be read, are `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StatusBlock {
    pub status: Option<WorkStatus>,
    pub tasks_completed: Option<u32>,
    pub files_modified: Option<u32>,
    pub tests_status: Option<TestsStatus>,
    pub work_type: Option<WorkType>,
    pub exit_signal: Option<bool>,
    pub recommendation: Option<String>,
}

/// Facts about the process run that the analyzer needs besides its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunFacts {
    /// Exit code, if the process exited normally.
    pub exit_code: Option<i32>,
    /// Signal that ended the process, if any.
    pub signal: Option<i32>,
    /// Hank's timeout killed it.
    pub timed_out: bool,
    /// Hank stopped it because the user pressed Ctrl-C / sent SIGTERM.
    pub interrupted: bool,
    /// Stdout was longer than hank keeps (the rest was read and dropped).
    pub stdout_cut: bool,
    /// The timeout was FIRST_OUTPUT_TIMEOUT: not one stdout byte came before it.
    pub startup_hang: bool,
}

/// Longest line (or JSON document, or element of a message array) the analyzer reads; past
/// it the answer is [`ErrorKind::OutputTooLarge`].
pub const MAX_LINE_BYTES: usize = 256 * 1024 * 1024;

/// The message of [`ErrorKind::OutputTooLarge`].
pub(crate) const TOO_LARGE_MESSAGE: &str = "the answer is larger than hank reads (a line or JSON document over 256 MiB, or over 4 GiB of output)";

/// Everything hank learns from one agent answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Analysis {
    pub shape: OutputShape,
    pub outcome: Outcome,
    /// Set when `outcome` is not `Success` (for `Timeout`/`Crashed` when something more is known).
    pub error: Option<AgentError>,
    /// The CLI said `No conversation found with session ID: …`: drop the id and retry without it.
    pub unknown_session: bool,
    pub session_id: Option<String>,
    /// `total_cost_usd` of this call (0 when unknown; once charged by the loop, the
    /// estimate, see `cost_estimated`).
    pub cost_usd: f64,
    /// The answer held a believable cost (`cost_usd` is what it said). Not serialized: the
    /// loop charges an estimate when an answer that should hold one does not.
    #[serde(skip)]
    pub cost_reported: bool,
    /// `cost_usd` is hank's estimate, not the agent's word (set by the loop's charging).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
    pub tokens: Tokens,
    pub num_turns: Option<u32>,
    pub duration_ms: Option<u64>,
    pub permission_denials: Vec<Denial>,
    /// The answer text (`result`), cut to a few KiB for display.
    pub summary: String,
    pub status: Option<StatusBlock>,
    /// Which completion indicators fired (e.g. `status_complete`, `exit_signal`,
    /// `phrase: all tasks complete`); empty when none did.
    pub completion_indicators: Vec<String>,
    /// Every tool the agent ran was a test command (only known from stream-json), or the
    /// status block says `WORK_TYPE: TESTING`.
    pub testing_only: bool,
    /// Questions the agent asked the user instead of deciding (one line each).
    pub questions: Vec<String>,
    /// Normalized error lines (numbers, paths and ids replaced), for same-error streaks.
    pub error_signatures: Vec<String>,
    /// Length of the answer text in bytes (for the output-decline rule).
    pub output_len: u64,
    /// Total bytes read from stdout.
    pub stdout_bytes: u64,
    /// `credential_expires_at` of the result (2.1.330+): when the login expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_expires_at: Option<Timestamp>,
    /// The subscription usage windows the client reported (stream-json `rate_limit_event`,
    /// a usage-limit result's `api_error_params.rate_limit_info`), the latest reading of each,
    /// sorted by name. Empty when none was reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage_windows: Vec<WindowReading>,
    /// The reviewer's `HANK_REVIEW` block ([`review::parse_review`]), when the answer text
    /// holds one (a reviewer's call reads a missing one as unreadable, see
    /// `engine/review.rs`). Not serialized.
    #[serde(skip)]
    pub review: Option<review::Review>,
    /// The agent crashed: it exited non-zero without a model answer ([`Crash`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash: Option<Crash>,
    /// Refused file accesses its tool results, error output or own words named (their
    /// paths, [`refusals`]): under hank's sandbox, `sandbox_denied` events.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_paths: Vec<String>,
}

/// How many of the last lines of a crashed agent's error output are kept.
pub const CRASH_TAIL_LINES: usize = 5;

/// An agent that exited non-zero without a model answer (`agent_crashed`): its exit code and
/// the last lines of its error output, where a crash says what went wrong (a Python
/// traceback's last line, not its first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Crash {
    pub exit_code: i32,
    /// The line that says what went wrong: the last one of its error output that is not a
    /// stack frame or a runtime's banner ("" when it printed nothing).
    pub line: String,
    /// The last [`CRASH_TAIL_LINES`] non-empty lines of its error output, oldest first.
    pub tail: Vec<String>,
}

impl Analysis {
    /// `EXIT_SIGNAL: true` was in the status block. Absent or unreadable means false.
    #[must_use]
    pub fn exit_signal(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.exit_signal)
            .unwrap_or(false)
    }

    /// The error kind, if any.
    #[must_use]
    pub fn error_kind(&self) -> Option<ErrorKind> {
        self.error.as_ref().map(|e| e.kind)
    }

    /// The recommendation line of the status block, if any.
    #[must_use]
    pub fn recommendation(&self) -> Option<&str> {
        self.status
            .as_ref()
            .and_then(|s| s.recommendation.as_deref())
    }
}

/// Longest summary kept (bytes, cut on a char boundary).
pub const SUMMARY_BYTES: usize = 4096;

fn cut_summary(text: &str) -> String {
    if text.len() <= SUMMARY_BYTES {
        return text.to_owned();
    }
    format!("{}…", crate::sanitize::cut_bytes(text, SUMMARY_BYTES))
}

/// The first line of `text` with something on it, trimmed ("" when there is none).
pub(crate) fn first_text_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// The time facts the analyzer needs: the current time, and the machine's local time zone
/// (the client prints reset times without a zone in local time, e.g. `resets 7pm`).
#[derive(Debug, Clone, PartialEq)]
pub struct Clock {
    pub now: Timestamp,
    pub local: TimeZone,
}

impl Clock {
    /// A clock whose local zone is `local`.
    #[must_use]
    pub fn new(now: Timestamp, local: TimeZone) -> Self {
        Self { now, local }
    }

    /// A clock in UTC (reset times without a zone are read as UTC).
    #[must_use]
    pub fn utc(now: Timestamp) -> Self {
        Self::new(now, TimeZone::UTC)
    }
}

/// Analyzes one agent answer read from `stdout` as a stream (any size), with its stderr, the
/// run facts and the current time (for reset times). A reset time printed without a zone is
/// read as UTC: callers that know the machine's zone use [`analyze_in`].
pub fn analyze<R: BufRead>(stdout: R, stderr: &[u8], facts: &RunFacts, now: Timestamp) -> Analysis {
    analyze_in(stdout, stderr, facts, &Clock::utc(now))
}

/// [`analyze`] with the machine's local zone (`Clock::new(now, TimeZone::system())` at the
/// caller), for reset times printed without a zone.
pub fn analyze_in<R: BufRead>(
    stdout: R,
    stderr: &[u8],
    facts: &RunFacts,
    clock: &Clock,
) -> Analysis {
    analyze_as(stdout, stderr, facts, clock, AskedFormat::Auto)
}

/// [`analyze_in`] for an answer in the format hank asked for: in the JSON formats anything
/// but the client's JSON is `malformed` (see [`AskedFormat`]).
pub fn analyze_as<R: BufRead>(
    stdout: R,
    stderr: &[u8],
    facts: &RunFacts,
    clock: &Clock,
    asked: AskedFormat,
) -> Analysis {
    let gathered = parse::gather_as(stdout, asked);
    finish(gathered, stderr, facts, clock)
}

/// [`analyze`] over bytes already in memory.
#[must_use]
pub fn analyze_bytes(stdout: &[u8], stderr: &[u8], facts: &RunFacts, now: Timestamp) -> Analysis {
    analyze(stdout, stderr, facts, now)
}

/// [`analyze_in`] over bytes already in memory.
#[must_use]
pub fn analyze_bytes_in(stdout: &[u8], stderr: &[u8], facts: &RunFacts, clock: &Clock) -> Analysis {
    analyze_in(stdout, stderr, facts, clock)
}

fn finish(g: parse::Gathered, stderr: &[u8], facts: &RunFacts, clock: &Clock) -> Analysis {
    let stderr = String::from_utf8_lossy(stderr);
    let verdict = classify::verdict(&g, &stderr, facts, clock);
    let mut a = Analysis {
        outcome: verdict.outcome,
        unknown_session: verdict.unknown_session,
        usage_windows: g.windows.values().cloned().collect(),
        ..g.read
    };
    // The answer text: the result, the plain text, or (no result) the last assistant text.
    let text_mode = g.text.as_ref().map(parse::TextCapture::text);
    let (answer, full_len): (&str, u64) = match (&g.result, &g.text, &text_mode) {
        (Some(r), _, _) => {
            let t = r.text.as_deref().unwrap_or("");
            (t, t.len() as u64)
        }
        (None, Some(cap), Some(t)) => (t.as_str(), cap.len),
        _ => (
            g.last_assistant_text.as_str(),
            g.last_assistant_text.len() as u64,
        ),
    };
    a.output_len = full_len;
    a.summary = match (&g.result, &g.text) {
        (Some(r), _) if answer.trim().is_empty() => cut_summary(&r.errors.join("\n")),
        (None, Some(cap)) if !cap.complete() => {
            format!(
                "{}…",
                String::from_utf8_lossy(&cap.head).trim_end_matches('\u{fffd}')
            )
        }
        _ => cut_summary(answer),
    };

    let own_words = a.outcome == Outcome::Success;
    let mut sig_lines: Vec<&str> = Vec::new();
    if own_words {
        a.status = parse_status_block(answer);
        a.review = review::read_if_present(answer);
        a.completion_indicators = completion_indicators(a.status.as_ref(), answer);
        a.questions = questions(answer);
        sig_lines.extend(derive::error_lines_in_text(answer));
    } else if let Some(e) = verdict.error.as_ref().filter(|e| !e.message.is_empty()) {
        sig_lines.push(&e.message);
    }
    sig_lines.extend(derive::error_lines_in_stderr(&stderr));
    a.error_signatures = signatures(sig_lines);
    a.error = verdict.error;
    // A usage limit named only in the text still tells which window is exhausted.
    if let Some(e) = a.error.as_ref().filter(|e| e.kind == ErrorKind::UsageLimit)
        && let Some(name) = e.window.as_deref().filter(|n| valid_window_name(n))
        && !a.usage_windows.iter().any(|w| w.name == name)
    {
        a.usage_windows.push(WindowReading {
            name: name.to_owned(),
            fields: WindowFields {
                utilization: None,
                resets_at: e.reset_at,
                status: Some("rejected".to_owned()),
            },
        });
        a.usage_windows.sort_by(|x, y| x.name.cmp(&y.name));
    }

    let status_testing = a.status.as_ref().and_then(|s| s.work_type) == Some(WorkType::Testing);
    let tools = g.tools;
    let tools_testing = tools.bash > 0 && tools.bash_tests == tools.bash && tools.edits == 0;
    a.testing_only = own_words && (status_testing || tools_testing);
    a.crash = classify::crash_of(a.outcome, facts, &stderr);
    a.refused_paths = g.refused;
    refusals::add_refused(&mut a.refused_paths, &stderr);
    refusals::add_refused(&mut a.refused_paths, answer);
    a
}
