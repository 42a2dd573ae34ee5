//! Analysis of an agent CLI described by a profile (`templates/agents/*.toml`): the answer's
//! fields are found with JSONPath expressions (RFC 9535, `jsonpath-rust`), the error kind with
//! the profile's ordered rules, then hank's own readers take over (the status block, questions,
//! completion phrases, error signatures) exactly as for Claude Code.  **\[pure\]**
//!
//! Output formats:
//! - `json`: one JSON document; `$` is that document.
//! - `jsonl`: one JSON event per line; `$` is the list of events, evaluated **one event at a
//!   time** (each as `[event]`), so memory stays flat however long the stream is: write
//!   filters (`$[?@.type == 'thread.started'].thread_id`), not indexes.
//! - `text`: stdout is the answer; only the error rules' regexes apply.

use std::fmt;
use std::io::BufRead;

use jiff::Timestamp;
use jsonpath_rust::parser::model::JpQuery;
use jsonpath_rust::parser::parse_json_path;
use jsonpath_rust::query::js_path_process;
use regex::Regex;
use serde_json::Value;

use super::classify::classify_text_in;
use super::parse::{MAX_CALL_COST_USD, Scalar, fill, timestamp_of};
use super::{
    AgentError, Analysis, Clock, ErrorKind, Outcome, OutputShape, RunFacts, WorkType, cut_summary,
    derive, parse_status_block,
};

/// Longest stdout line or whole document read (longer ones are cut and counted as malformed).
const MAX_DOC: usize = super::MAX_LINE_BYTES;
/// Longest answer text kept in memory.
const MAX_TEXT: usize = 1024 * 1024;
/// Longest error message kept.
const MAX_MESSAGE: usize = 500;

/// What the CLI prints on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MappedFormat {
    Json,
    JsonLines,
    Text,
}

/// How the matches of one field are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    First,
    Last,
    /// Numbers added (strings that hold a number count too).
    Sum,
    /// Strings joined with a newline.
    Join,
    /// Strings joined as they are (pieces of one text streamed in parts).
    Concat,
    /// How many matches there were.
    Count,
}

impl Take {
    /// Reads `first | last | sum | join | count`.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "first" => Self::First,
            "last" => Self::Last,
            "sum" => Self::Sum,
            "join" => Self::Join,
            "concat" => Self::Concat,
            "count" => Self::Count,
            _ => return None,
        })
    }
}

/// A compiled JSONPath with its combining rule.
#[derive(Clone)]
pub struct FieldPath {
    /// The expression as written in the profile.
    pub source: String,
    query: JpQuery,
    pub take: Take,
}

impl fmt::Debug for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FieldPath({:?}, {:?})", self.source, self.take)
    }
}

impl PartialEq for FieldPath {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source && self.take == other.take
    }
}

impl FieldPath {
    /// Compiles `path`.
    ///
    /// # Errors
    /// The parser's message when `path` is not a JSONPath expression.
    pub fn parse(path: &str, take: Take) -> Result<Self, String> {
        let query = parse_json_path(path).map_err(|e| e.to_string())?;
        Ok(Self {
            source: path.to_owned(),
            query,
            take,
        })
    }

    fn matches<'a>(&self, doc: &'a Value) -> Vec<&'a Value> {
        js_path_process(&self.query, doc)
            .map(|refs| refs.into_iter().map(|r| r.val()).collect())
            .unwrap_or_default()
    }
}

/// Where each answer field comes from; `None` = the CLI does not report it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields {
    /// The answer text (the status block is read from it).
    pub text: Option<FieldPath>,
    pub session_id: Option<FieldPath>,
    /// Any match means the call failed, with this message.
    pub error: Option<FieldPath>,
    /// A boolean `true` means the call failed.
    pub is_error: Option<FieldPath>,
    pub cost_usd: Option<FieldPath>,
    pub input_tokens: Option<FieldPath>,
    pub output_tokens: Option<FieldPath>,
    pub cache_read_tokens: Option<FieldPath>,
    pub cache_creation_tokens: Option<FieldPath>,
    pub num_turns: Option<FieldPath>,
    /// File edits the agent made (counted).
    pub edits: Option<FieldPath>,
    /// Shell commands the agent ran (strings), to spot test-only loops.
    pub commands: Option<FieldPath>,
}

/// What an error rule looks at.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// A regex over the error message, then stderr (and the answer text with `anywhere`).
    Regex { re: Regex, anywhere: bool },
    /// A JSONPath that yields at least one value in the output.
    Path(FieldPath),
    /// A regex over the last four non-empty lines of the output (`scope = "end"`):
    /// the client's last words. A match fails the call even when it printed an answer — for
    /// a text client that exits 0 whatever happened and prints its error last (Aider).
    End(Regex),
}

/// How many non-empty lines at the end of the output an `end` rule reads.
const END_LINES: usize = 4;

/// The last `END_LINES` non-empty lines of `text`, joined with newlines.
fn output_end(text: &str) -> String {
    let mut lines: Vec<&str> = text
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(END_LINES)
        .collect();
    lines.reverse();
    lines.join("\n")
}

/// What a matching rule means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    Error(ErrorKind),
    /// The session to resume is gone: hank drops it and starts fresh.
    UnknownSession,
}

impl RuleKind {
    /// Reads a kind name as profiles write it.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Some(Self::Error(match s {
            "unknown_session" => return Some(Self::UnknownSession),
            "usage_limit" => ErrorKind::UsageLimit,
            "spend_limit" => ErrorKind::SpendLimit,
            "rate_limit" => ErrorKind::RateLimit,
            "auth" => ErrorKind::Auth,
            "billing" => ErrorKind::Billing,
            "overloaded" => ErrorKind::Overloaded,
            "server" => ErrorKind::Server,
            "network" => ErrorKind::Network,
            "max_turns" => ErrorKind::MaxTurns,
            "cli_usage" => ErrorKind::CliUsage,
            "unknown" => ErrorKind::Unknown,
            _ => return None,
        }))
    }

    /// The names [`RuleKind::parse`] accepts.
    pub const NAMES: &'static [&'static str] = &[
        "usage_limit",
        "spend_limit",
        "rate_limit",
        "auth",
        "billing",
        "overloaded",
        "server",
        "network",
        "unknown_session",
        "max_turns",
        "cli_usage",
        "unknown",
    ];
}

/// One error rule of a profile.
#[derive(Debug, Clone)]
pub struct ErrorRule {
    pub matcher: Matcher,
    pub kind: RuleKind,
    /// Where the reset time is (epoch s/ms or RFC 3339); else it is read from the message.
    pub reset_path: Option<FieldPath>,
    /// A quota that resets every day at midnight in this IANA zone (when nothing else says
    /// when).
    pub reset_daily: Option<String>,
}

/// Everything the analyzer needs from a profile.
#[derive(Debug, Clone)]
pub struct Mapping {
    pub format: MappedFormat,
    pub fields: Fields,
    pub rules: Vec<ErrorRule>,
    /// The token counts are the session's running total (Codex on `exec resume`), not this
    /// call's: the caller subtracts what the session had already reported.
    pub session_total_tokens: bool,
}

/// A field's combined matches.
#[derive(Debug, Default)]
struct Acc {
    text: Option<String>,
    sum: f64,
    count: u64,
    seen: bool,
}

impl Acc {
    fn absorb(&mut self, take: Take, values: &[&Value]) {
        for v in values {
            self.count += 1;
            match take {
                Take::First if self.seen => {}
                Take::First | Take::Last => self.text = Some(as_text(v)),
                Take::Sum => {
                    if let Some(n) = as_number(v) {
                        self.sum += n;
                    }
                }
                Take::Join | Take::Concat => {
                    let t = as_text(v);
                    let s = self.text.get_or_insert_with(String::new);
                    if s.len() < MAX_TEXT {
                        if !s.is_empty() && take == Take::Join {
                            s.push('\n');
                        }
                        s.push_str(&t);
                    }
                }
                Take::Count => {}
            }
            self.seen = true;
        }
    }

    fn string(&self) -> Option<&str> {
        self.text.as_deref()
    }

    fn number(&self, take: Take) -> Option<f64> {
        if !self.seen {
            return None;
        }
        match take {
            Take::Sum => Some(self.sum),
            Take::Count => Some(self.count as f64),
            _ => self.text.as_deref().and_then(|t| t.trim().parse().ok()),
        }
    }
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|n: &f64| n.is_finite())
}

fn scalar(v: &Value) -> Scalar {
    match v {
        Value::Number(n) => n
            .as_u64()
            .map(Scalar::Unsigned)
            .or_else(|| n.as_i64().map(Scalar::Signed))
            .or_else(|| n.as_f64().map(Scalar::Float))
            .unwrap_or_default(),
        Value::String(s) => Scalar::Text(s.clone()),
        Value::Bool(b) => Scalar::Bool(*b),
        _ => Scalar::Absent,
    }
}

/// The accumulators of every field and rule while the output is read.
struct Reader<'m> {
    m: &'m Mapping,
    fields: Vec<(&'m FieldPath, Acc)>,
    /// Per rule: matched (path rules) and the reset time found with it.
    rule_hits: Vec<(bool, Option<Timestamp>)>,
    is_error: bool,
}

impl<'m> Reader<'m> {
    fn new(m: &'m Mapping) -> Self {
        let f = &m.fields;
        let fields = [
            &f.text,
            &f.session_id,
            &f.error,
            &f.is_error,
            &f.cost_usd,
            &f.input_tokens,
            &f.output_tokens,
            &f.cache_read_tokens,
            &f.cache_creation_tokens,
            &f.num_turns,
            &f.edits,
            &f.commands,
        ]
        .into_iter()
        .flatten()
        .map(|p| (p, Acc::default()))
        .collect();
        Self {
            m,
            fields,
            rule_hits: vec![(false, None); m.rules.len()],
            is_error: false,
        }
    }

    fn absorb(&mut self, doc: &Value) {
        for (path, acc) in &mut self.fields {
            let found = path.matches(doc);
            acc.absorb(path.take, &found);
        }
        if let Some(p) = &self.m.fields.is_error
            && p.matches(doc).iter().any(|v| **v == Value::Bool(true))
        {
            self.is_error = true;
        }
        for (rule, hit) in self.m.rules.iter().zip(self.rule_hits.iter_mut()) {
            if let Matcher::Path(p) = &rule.matcher
                && !p.matches(doc).is_empty()
            {
                hit.0 = true;
            }
            if let Some(rp) = &rule.reset_path
                && let Some(t) = rp
                    .matches(doc)
                    .last()
                    .and_then(|v| timestamp_of(&scalar(v)))
            {
                hit.1 = Some(t);
            }
        }
    }

    fn acc(&self, path: Option<&FieldPath>) -> Option<&Acc> {
        let path = path?;
        self.fields
            .iter()
            .find(|(p, _)| std::ptr::eq(*p, path))
            .map(|(_, a)| a)
    }

    fn string(&self, path: Option<&FieldPath>) -> Option<String> {
        self.acc(path)
            .and_then(Acc::string)
            .map(str::to_owned)
            .filter(|s| !s.is_empty())
    }

    fn number(&self, path: Option<&FieldPath>) -> Option<f64> {
        let take = path?.take;
        self.acc(path).and_then(|a| a.number(take))
    }

    fn count(&self, path: Option<&FieldPath>) -> u64 {
        self.acc(path).map_or(0, |a| a.count)
    }
}

/// Reads lines up to `MAX_DOC` bytes each; returns `None` at the end.
fn next_line<R: BufRead>(r: &mut R, buf: &mut Vec<u8>, total: &mut u64) -> Option<bool> {
    buf.clear();
    let mut cut = false;
    loop {
        // The end or a read error: the line so far (a cut line is never empty).
        let Some(chunk) = fill(r) else {
            return if buf.is_empty() { None } else { Some(cut) };
        };
        let (take, done) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = MAX_DOC.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..take.min(room)]);
        cut |= take > room;
        *total += take as u64;
        r.consume(take);
        if done {
            return Some(cut);
        }
    }
}

/// What one stdout line of a `jsonl` CLI shows in `--live` mode: the answer text and the
/// shell commands it holds (through the profile's `text` and `commands` paths). Other formats
/// and lines that are not JSON show nothing.
#[must_use]
pub fn mapped_live_items(m: &Mapping, line: &[u8]) -> Vec<super::LiveItem> {
    if m.format != MappedFormat::JsonLines {
        return Vec::new();
    }
    let Ok(v) = serde_json::from_slice::<Value>(line.trim_ascii()) else {
        return Vec::new();
    };
    let doc = Value::Array(vec![v]);
    let mut out = Vec::new();
    if let Some(p) = &m.fields.commands {
        for c in p.matches(&doc) {
            out.push(super::LiveItem::Tool {
                name: "shell".to_owned(),
                detail: first_line(&as_text(c)),
            });
        }
    }
    if let Some(p) = &m.fields.text {
        for t in p.matches(&doc) {
            let t = as_text(t);
            if !t.trim().is_empty() {
                out.push(super::LiveItem::Text(t));
            }
        }
    }
    out
}

/// Analyzes one answer of a profiled CLI. `stdout` is read as a stream.
pub fn analyze_mapped<R: BufRead>(
    mut stdout: R,
    stderr: &[u8],
    facts: &RunFacts,
    clock: &Clock,
    m: &Mapping,
) -> Analysis {
    let mut reader = Reader::new(m);
    let mut total = 0u64;
    let mut malformed = false;
    let mut any_json = false;
    // Text output, and lines of a JSON stream that are not JSON (kept for the error rules).
    let mut plain = String::new();
    let mut buf = Vec::new();
    let mut too_large = false;
    match m.format {
        MappedFormat::JsonLines => {
            while let Some(cut) = next_line(&mut stdout, &mut buf, &mut total) {
                let line = buf.trim_ascii();
                if line.is_empty() {
                    continue;
                }
                too_large |= cut;
                match serde_json::from_slice::<Value>(line) {
                    Ok(v) if !cut => {
                        any_json = true;
                        reader.absorb(&Value::Array(vec![v]));
                    }
                    _ => {
                        malformed |= line.first() == Some(&b'{');
                        push_capped(&mut plain, &String::from_utf8_lossy(line));
                    }
                }
            }
        }
        MappedFormat::Json | MappedFormat::Text => {
            let mut whole = Vec::new();
            while let Some(cut) = next_line(&mut stdout, &mut buf, &mut total) {
                if whole.len() < MAX_DOC {
                    whole.extend_from_slice(&buf);
                } else {
                    too_large |= m.format == MappedFormat::Json;
                }
                malformed |= cut;
                // A line over the cap is too large in every format (text included).
                too_large |= cut;
            }
            let trimmed = whole.trim_ascii();
            if m.format == MappedFormat::Json && !trimmed.is_empty() {
                match serde_json::from_slice::<Value>(trimmed) {
                    Ok(v) if !malformed => {
                        any_json = true;
                        reader.absorb(&v);
                    }
                    _ => {
                        malformed = trimmed.first().is_some_and(|b| matches!(b, b'{' | b'['));
                        push_capped(&mut plain, &String::from_utf8_lossy(trimmed));
                    }
                }
            } else {
                push_capped(&mut plain, &String::from_utf8_lossy(trimmed));
            }
        }
    }
    let mut a = finish(
        &reader, plain, total, any_json, malformed, stderr, facts, clock,
    );
    let stopped = facts.timed_out || facts.interrupted;
    // Text has no end mark that proves the answer whole: past a cap it is never a success.
    let no_result = a.outcome != Outcome::Success || m.format == MappedFormat::Text;
    if (too_large || facts.stdout_cut) && no_result && !stopped {
        a.outcome = Outcome::AgentError;
        a.error = Some(AgentError {
            kind: ErrorKind::OutputTooLarge,
            message: super::TOO_LARGE_MESSAGE.to_owned(),
            api_status: None,
            reset_at: None,
            window: None,
        });
    }
    a
}

/// The command inside a shell wrapper: `/bin/bash -lc 'cargo test'` → `cargo test`.
fn unwrap_shell(c: &str) -> &str {
    let c = c.trim();
    let Some((shell, rest)) = c.split_once(' ') else {
        return c;
    };
    let name = shell.rsplit('/').next().unwrap_or(shell);
    if !matches!(name, "sh" | "bash" | "zsh" | "dash") {
        return c;
    }
    let Some(inner) = rest
        .trim_start()
        .strip_prefix("-lc ")
        .or_else(|| rest.trim_start().strip_prefix("-c "))
    else {
        return c;
    };
    let inner = inner.trim();
    for q in ['\'', '"'] {
        if let Some(s) = inner.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return s;
        }
    }
    inner
}

/// The next midnight in `zone` after `now`.
fn next_midnight(zone: &str, now: Timestamp) -> Option<Timestamp> {
    let tz = jiff::tz::TimeZone::get(zone).ok()?;
    let tomorrow = now.to_zoned(tz.clone()).date().tomorrow().ok()?;
    tomorrow.to_zoned(tz).ok().map(|z| z.timestamp())
}

fn push_capped(s: &mut String, text: &str) {
    if s.len() >= MAX_TEXT {
        return;
    }
    if !s.is_empty() {
        s.push('\n');
    }
    s.push_str(crate::sanitize::cut_bytes(
        text,
        MAX_TEXT - s.len().min(MAX_TEXT),
    ));
}

fn first_line(text: &str) -> String {
    crate::sanitize::cut_bytes(super::first_text_line(text), MAX_MESSAGE).to_owned()
}

#[allow(clippy::too_many_arguments)]
fn finish(
    r: &Reader<'_>,
    plain: String,
    stdout_bytes: u64,
    any_json: bool,
    malformed: bool,
    stderr: &[u8],
    facts: &RunFacts,
    clock: &Clock,
) -> Analysis {
    let f = &r.m.fields;
    let stderr = String::from_utf8_lossy(stderr);
    let text = match r.m.format {
        MappedFormat::Text => Some(plain.clone()),
        _ => r.string(f.text.as_ref()),
    }
    .filter(|t| !t.trim().is_empty());
    let reported = r.string(f.error.as_ref());
    let shape = match (r.m.format, stdout_bytes, any_json, malformed) {
        (_, 0, _, _) => OutputShape::Empty,
        (MappedFormat::Text, ..) => OutputShape::Text,
        (_, _, false, true) => OutputShape::Truncated,
        (_, _, false, false) => OutputShape::Text,
        (MappedFormat::Json, ..) => OutputShape::ResultObject,
        (MappedFormat::JsonLines, ..) => OutputShape::StreamJson,
    };
    let mut a = Analysis {
        shape,
        session_id: r.string(f.session_id.as_ref()),
        stdout_bytes,
        ..Analysis::default()
    };
    let cost = r
        .number(f.cost_usd.as_ref())
        .filter(|c| c.is_finite() && (0.0..=MAX_CALL_COST_USD).contains(c));
    a.cost_reported = cost.is_some();
    a.cost_usd = cost.unwrap_or(0.0);
    let tokens = |p: &Option<FieldPath>| {
        r.number(p.as_ref())
            .filter(|n| *n >= 0.0 && *n < 1.8e19)
            .map_or(0, |n| n as u64)
    };
    a.tokens.input = tokens(&f.input_tokens);
    a.tokens.output = tokens(&f.output_tokens);
    a.tokens.cache_read = tokens(&f.cache_read_tokens);
    a.tokens.cache_creation = tokens(&f.cache_creation_tokens);
    a.num_turns = r
        .number(f.num_turns.as_ref())
        .filter(|n| *n >= 0.0 && *n < f64::from(u32::MAX))
        .map(|n| n as u32);

    // The error: what the output reported, else a failing exit with something to say.
    let failed_exit = facts.exit_code.is_some_and(|c| c != 0) || facts.signal.is_some();
    let message = reported.clone().or_else(|| {
        (r.is_error || failed_exit).then(|| {
            text.as_deref()
                .map(first_line)
                .filter(|l| !l.is_empty())
                .or_else(|| Some(first_line(&stderr)).filter(|l| !l.is_empty()))
                .or_else(|| Some(first_line(&plain)).filter(|l| !l.is_empty()))
                .unwrap_or_default()
        })
    });
    let end = output_end(&plain);
    let ended_in_error =
        r.m.rules
            .iter()
            .any(|rule| matches!(&rule.matcher, Matcher::End(re) if re.is_match(&end)));
    let claims_error = reported.is_some() || r.is_error || ended_in_error;
    let matched = match_rule(
        r,
        message.as_deref(),
        &stderr,
        text.as_deref(),
        &plain,
        clock,
    );
    a.unknown_session = matches!(matched, Some((RuleKind::UnknownSession, ..)));

    let answered = text.is_some() && !claims_error;
    let error = |kind: ErrorKind, msg: String, reset: Option<Timestamp>| AgentError {
        kind,
        message: msg,
        api_status: None,
        reset_at: reset,
        window: None,
    };
    let classified = matched.map(|(kind, msg, reset)| {
        let kind = match kind {
            RuleKind::Error(k) => k,
            RuleKind::UnknownSession => ErrorKind::CliUsage,
        };
        error(kind, msg, reset)
    });
    if facts.timed_out {
        a.outcome = Outcome::Timeout;
        a.error = classified;
    } else if facts.interrupted {
        a.outcome = Outcome::AgentError;
        a.error = Some(error(
            ErrorKind::Interrupted,
            "interrupted by the user (Ctrl-C / SIGTERM)".to_owned(),
            None,
        ));
    } else if claims_error || classified.is_some() && !answered {
        a.outcome = Outcome::AgentError;
        a.error = Some(classified.unwrap_or_else(|| {
            error(
                ErrorKind::Unknown,
                message.clone().unwrap_or_default(),
                None,
            )
        }));
    } else if failed_exit && !answered {
        let kind = super::classify::no_answer_kind(shape);
        let how = super::classify::how_it_ended(facts);
        let mut msg = format!("the agent {how} without an answer");
        if let Some(line) = message.filter(|l| !l.is_empty()) {
            msg.push_str(": ");
            msg.push_str(&line);
        }
        a.outcome = Outcome::Crashed;
        a.error = Some(error(kind, msg, None));
    } else if text.is_none() {
        let kind = if shape == OutputShape::Empty {
            ErrorKind::NoOutput
        } else {
            ErrorKind::Malformed
        };
        let msg = match shape {
            OutputShape::Empty => "the agent printed nothing".to_owned(),
            OutputShape::Truncated => "the agent's JSON output is cut short".to_owned(),
            _ => "no answer text found in the agent's output".to_owned(),
        };
        a.outcome = Outcome::Crashed;
        a.error = Some(error(kind, msg, None));
    } else {
        a.outcome = Outcome::Success;
    }

    let answer = text.as_deref().unwrap_or("");
    a.output_len = answer.len() as u64;
    a.summary = if answer.trim().is_empty() {
        cut_summary(a.error.as_ref().map_or("", |e| e.message.as_str()))
    } else {
        cut_summary(answer)
    };
    let own_words = a.outcome == Outcome::Success;
    let mut sig_lines: Vec<&str> = Vec::new();
    if own_words {
        a.status = parse_status_block(answer);
        a.review = super::review::read_if_present(answer);
        a.completion_indicators = derive::completion_indicators(a.status.as_ref(), answer);
        a.questions = derive::questions(answer);
        sig_lines.extend(derive::error_lines_in_text(answer));
    } else if let Some(e) = a.error.as_ref().filter(|e| !e.message.is_empty()) {
        sig_lines.push(&e.message);
    }
    sig_lines.extend(derive::error_lines_in_stderr(&stderr));
    a.error_signatures = derive::signatures(sig_lines);

    let edits = r.count(f.edits.as_ref());
    let commands = r.string(f.commands.as_ref()).unwrap_or_default();
    let commands: Vec<&str> = commands.lines().filter(|l| !l.trim().is_empty()).collect();
    let tools_testing = !commands.is_empty()
        && edits == 0
        && commands
            .iter()
            .all(|c| derive::is_test_command(unwrap_shell(c)));
    let status_testing = a.status.as_ref().and_then(|s| s.work_type) == Some(WorkType::Testing);
    a.testing_only = own_words && (status_testing || tools_testing);
    a.crash = super::classify::crash_of(a.outcome, facts, &stderr);
    a
}

/// The first rule that matches: its kind, the message it matched and the reset time. When no
/// rule matches an error, hank's own wording reader (usage limits, rate limits, overload,
/// network, auth…) gets a chance, so a profile needs rules only for what is special to its CLI.
fn match_rule(
    r: &Reader<'_>,
    message: Option<&str>,
    stderr: &str,
    text: Option<&str>,
    plain: &str,
    clock: &Clock,
) -> Option<(RuleKind, String, Option<Timestamp>)> {
    for (rule, (hit, reset)) in r.m.rules.iter().zip(&r.rule_hits) {
        let found: Option<String> = match &rule.matcher {
            Matcher::Path(_) => hit.then(|| message.map(first_line).unwrap_or_default()),
            Matcher::End(re) => {
                let end = output_end(plain);
                re.find(&end).map(|m| {
                    let start = end[..m.start()].rfind('\n').map_or(0, |i| i + 1);
                    first_line(&end[start..])
                })
            }
            Matcher::Regex { re, anywhere } => {
                let mut places: Vec<&str> = Vec::new();
                places.extend(message);
                places.push(stderr);
                places.push(plain);
                if *anywhere {
                    places.extend(text);
                }
                places.into_iter().find_map(|p| {
                    re.find(p).map(|m| {
                        let start = p[..m.start()].rfind('\n').map_or(0, |i| i + 1);
                        first_line(&p[start..])
                    })
                })
            }
        };
        if let Some(msg) = found {
            let msg = if msg.is_empty() {
                message.map(first_line).unwrap_or_default()
            } else {
                msg
            };
            let reset = reset
                .or_else(|| {
                    super::reset::reset_in_line(&msg, clock)
                        .or_else(|| message.and_then(|m| super::reset::reset_in_line(m, clock)))
                })
                .or_else(|| {
                    rule.reset_daily
                        .as_deref()
                        .and_then(|zone| next_midnight(zone, clock.now))
                });
            return Some((rule.kind, msg, reset));
        }
    }
    // Hank's own reader, on the reported message and stderr only (never the answer text).
    [message.unwrap_or(""), stderr, plain]
        .into_iter()
        .filter(|t| !t.trim().is_empty())
        .find_map(|t| {
            classify_text_in(t, None, None, clock).map(|c| {
                let line = t
                    .lines()
                    .find(|l| classify_text_in(l, None, None, clock).is_some())
                    .map_or_else(|| first_line(t), first_line);
                (RuleKind::Error(c.kind), line, c.reset_at)
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daily_quotas_reset_at_the_next_midnight_of_their_zone() {
        // Los Angeles is UTC-8 in November.
        let cases = [
            ("2026-11-24T10:00:00Z", "2026-11-25T08:00:00Z"),
            ("2026-11-24T07:59:00Z", "2026-11-24T08:00:00Z"),
        ];
        for (now, want) in cases {
            let now: Timestamp = now.parse().unwrap_or_else(|e| panic!("{e}"));
            let got = next_midnight("America/Los_Angeles", now).map(|t| t.to_string());
            assert_eq!(got.as_deref(), Some(want), "{now}");
        }
    }

    #[test]
    fn shell_wrappers_are_unwrapped() {
        let cases = [
            ("/bin/bash -lc 'cargo test'", "cargo test"),
            (
                "bash -c \"npm test -- --watch=false\"",
                "npm test -- --watch=false",
            ),
            ("sh -c pytest", "pytest"),
            ("cargo test -p x", "cargo test -p x"),
            (
                "/usr/bin/python -c 'print(1)'",
                "/usr/bin/python -c 'print(1)'",
            ),
            ("bash script.sh", "bash script.sh"),
        ];
        for (wrapped, inner) in cases {
            assert_eq!(unwrap_shell(wrapped), inner, "{wrapped}");
        }
    }

    fn jsonl_mapping() -> Mapping {
        let path = |p: &str, take| FieldPath::parse(p, take).unwrap_or_else(|e| panic!("{e}"));
        Mapping {
            format: MappedFormat::JsonLines,
            fields: Fields {
                text: Some(path("$[?@.type == 'msg'].text", Take::Last)),
                session_id: Some(path("$[?@.type == 'start'].id", Take::First)),
                error: Some(path("$[?@.type == 'failed'].message", Take::Last)),
                input_tokens: Some(path("$[?@.type == 'done'].in", Take::Sum)),
                edits: Some(path("$[?@.type == 'edit']", Take::Count)),
                commands: Some(path("$[?@.type == 'exec'].cmd", Take::Join)),
                ..Fields::default()
            },
            rules: vec![ErrorRule {
                matcher: Matcher::Regex {
                    re: Regex::new("(?i)quota").unwrap_or_else(|e| panic!("{e}")),
                    anywhere: false,
                },
                kind: RuleKind::Error(ErrorKind::UsageLimit),
                reset_path: None,
                reset_daily: None,
            }],
            session_total_tokens: false,
        }
    }

    fn run(stdout: &str, exit: i32) -> Analysis {
        let facts = RunFacts {
            exit_code: Some(exit),
            ..RunFacts::default()
        };
        let clock = Clock::utc(
            "2026-11-24T10:00:00Z"
                .parse()
                .unwrap_or_else(|e| panic!("{e}")),
        );
        analyze_mapped(stdout.as_bytes(), b"", &facts, &clock, &jsonl_mapping())
    }

    /// Output past the caps is `output_too_large` in every format: a text line over the
    /// line cap, or output cut at the capture cap, is never a success.
    #[test]
    fn text_beyond_the_caps_is_output_too_large() {
        use std::io::Read;
        let clock = Clock::utc(jiff::Timestamp::UNIX_EPOCH);
        let text = Mapping {
            format: MappedFormat::Text,
            ..jsonl_mapping()
        };
        let ok = RunFacts {
            exit_code: Some(0),
            ..RunFacts::default()
        };
        let long = std::io::BufReader::new(
            std::io::repeat(b'x')
                .take(MAX_DOC as u64 + 10)
                .chain(&b"\ndone\n"[..]),
        );
        let a = analyze_mapped(long, b"", &ok, &clock, &text);
        assert_eq!(
            a.error_kind(),
            Some(ErrorKind::OutputTooLarge),
            "{:?}",
            a.error
        );
        let cut = RunFacts {
            stdout_cut: true,
            ..ok
        };
        let a = analyze_mapped(&b"all good\n"[..], b"", &cut, &clock, &text);
        assert_eq!(
            a.error_kind(),
            Some(ErrorKind::OutputTooLarge),
            "{:?}",
            a.error
        );
        let a = analyze_mapped(&b"all good\n"[..], b"", &ok, &clock, &text);
        assert_eq!(a.outcome, Outcome::Success, "{:?}", a.error);
    }

    /// `scope = "end"` rules read the output's last lines: a text client that exits 0 and
    /// prints its error last has failed; an error it printed before a later answer has not.
    #[test]
    fn end_rules_read_the_last_lines_of_a_text_answer() {
        let clock = Clock::utc(jiff::Timestamp::UNIX_EPOCH);
        let rule = |re: &str, kind| ErrorRule {
            matcher: Matcher::End(Regex::new(re).unwrap_or_else(|e| panic!("{e}"))),
            kind: RuleKind::Error(kind),
            reset_path: None,
            reset_daily: None,
        };
        let text = Mapping {
            format: MappedFormat::Text,
            fields: Fields::default(),
            rules: vec![
                rule(
                    "(?s)litellm\\.\\w+Error.*current\\s+quota",
                    ErrorKind::SpendLimit,
                ),
                rule("litellm\\.RateLimitError", ErrorKind::RateLimit),
            ],
            session_total_tokens: false,
        };
        let ok = RunFacts {
            exit_code: Some(0),
            ..RunFacts::default()
        };
        let banner = "Aider v0.86.2\nModel: openai/fake-model with diff edit format\n";
        let failed = format!(
            "{banner}litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your \ncurrent quota, please check your plan and billing details.\nThe API provider has rate limited you.\n\n"
        );
        let a = analyze_mapped(failed.as_bytes(), b"", &ok, &clock, &text);
        assert_eq!(a.outcome, Outcome::AgentError, "{a:?}");
        assert_eq!(a.error_kind(), Some(ErrorKind::SpendLimit), "{a:?}");
        let msg = a.error.map(|e| e.message).unwrap_or_default();
        assert!(msg.starts_with("litellm.RateLimitError"), "{msg}");
        let limited = format!(
            "{banner}litellm.RateLimitError: Rate limit reached\nRetrying in 1.0 seconds...\n"
        );
        let a = analyze_mapped(limited.as_bytes(), b"", &ok, &clock, &text);
        assert_eq!(a.error_kind(), Some(ErrorKind::RateLimit), "{a:?}");
        // Retried, then answered: the error is no longer among the last lines.
        let recovered = format!(
            "{limited}Done.\n---HANK_STATUS---\nSTATUS: IN_PROGRESS\nEXIT_SIGNAL: false\n---END_HANK_STATUS---\nTokens: 2.5k sent, 20 received.\n"
        );
        let a = analyze_mapped(recovered.as_bytes(), b"", &ok, &clock, &text);
        assert_eq!(a.outcome, Outcome::Success, "{a:?}");
        assert!(a.status.is_some(), "{a:?}");
    }

    const BLOCK: &str =
        "---HANK_STATUS---\\nSTATUS: IN_PROGRESS\\nEXIT_SIGNAL: false\\n---END_HANK_STATUS---";

    /// (stdout, exit code, outcome, error kind)
    #[test]
    fn jsonl_answers_table() {
        let ok = format!(
            "{{\"type\":\"start\",\"id\":\"s1\"}}\nnot json\n{{\"type\":\"msg\",\"text\":\"first\"}}\n{{\"type\":\"msg\",\"text\":\"done\\n{BLOCK}\"}}\n{{\"type\":\"done\",\"in\":5}}\n{{\"type\":\"done\",\"in\":7}}\n"
        );
        let a = run(&ok, 0);
        assert_eq!(a.outcome, Outcome::Success, "{a:#?}");
        assert_eq!(a.session_id.as_deref(), Some("s1"));
        assert_eq!(a.tokens.input, 12);
        assert!(a.status.is_some(), "{a:#?}");
        assert_eq!(a.shape, OutputShape::StreamJson);

        let failed = "{\"type\":\"start\",\"id\":\"s1\"}\n{\"type\":\"failed\",\"message\":\"Quota reached, try again in 2 hours\"}\n";
        let a = run(failed, 1);
        assert_eq!(a.outcome, Outcome::AgentError);
        let e = a.error.unwrap_or_else(|| panic!("an error"));
        assert_eq!(e.kind, ErrorKind::UsageLimit);
        assert_eq!(
            e.reset_at.map(|t| t.to_string()).as_deref(),
            Some("2026-11-24T12:00:00Z")
        );

        // No rule matches: hank's own reader still knows an overload.
        let a = run(
            "{\"type\":\"failed\",\"message\":\"API overloaded (529)\"}\n",
            1,
        );
        assert_eq!(a.error.map(|e| e.kind), Some(ErrorKind::Overloaded));

        let a = run("", 1);
        assert_eq!(a.outcome, Outcome::Crashed);
        assert_eq!(a.error.map(|e| e.kind), Some(ErrorKind::NoOutput));

        let a = run(
            "{\"type\":\"start\",\"id\":\"s1\"}\n{\"type\":\"msg\",\"te",
            0,
        );
        assert_eq!(a.outcome, Outcome::Crashed);

        // Only test commands, no edits: a test-only loop.
        let tests_only = format!(
            "{{\"type\":\"exec\",\"cmd\":\"/bin/bash -lc 'cargo test'\"}}\n{{\"type\":\"msg\",\"text\":\"ran\\n{BLOCK}\"}}\n"
        );
        assert!(run(&tests_only, 0).testing_only);
        let with_edit = format!("{{\"type\":\"edit\"}}\n{tests_only}");
        assert!(!run(&with_edit, 0).testing_only);
    }
}
