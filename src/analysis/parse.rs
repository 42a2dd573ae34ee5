//! Reading the agent's stdout in every shape Claude Code produces, as a stream.  **\[pure\]**
//!
//! The shape is detected from the first non-whitespace byte: `{` → one result object or
//! stream-json lines, `[` → a message array (`--output-format json --verbose`), anything else →
//! plain text, nothing → empty. Events are typed serde structs that ignore unknown fields; every
//! field is optional and numbers are read leniently, so a surprising value never throws a whole
//! line away. Nothing is held beyond the longest line (capped), the final result and a few
//! bounded buffers, whatever the size of the output.

use std::cell::Cell;
use std::io::{BufRead, Read};
use std::marker::PhantomData;
use std::sync::LazyLock;

use jiff::Timestamp;
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{Analysis, Denial, OutputShape, Tokens};

/// Longest line kept in memory; the rest of a longer line is skipped (and the line unparsed).
const MAX_LINE: usize = super::MAX_LINE_BYTES;
/// Pretty-printed (multi-line) JSON is buffered up to this size.
const MAX_WHOLE: usize = super::MAX_LINE_BYTES;
/// Plain text: bytes kept from the start (for the summary) and from the end (for heuristics).
const TEXT_HEAD: usize = 8 * 1024;
const TEXT_TAIL: usize = 1024 * 1024;
/// The last assistant text kept from a stream (for a summary when there is no result line).
const ASSISTANT_TEXT_CAP: usize = 64 * 1024;

/// A JSON scalar read leniently: whatever the type, it never fails the surrounding parse.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Scalar {
    #[default]
    Absent,
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Text(String),
    Bool(bool),
}

impl Scalar {
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Self::Unsigned(v) => Some(*v),
            Self::Signed(v) => u64::try_from(*v).ok(),
            Self::Float(v) if v.is_finite() && *v >= 0.0 && *v < 1.8e19 => Some(*v as u64),
            Self::Text(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Unsigned(v) => Some(*v as f64),
            Self::Signed(v) => Some(*v as f64),
            Self::Float(v) if v.is_finite() => Some(*v),
            Self::Text(s) => s.trim().parse().ok().filter(|v: &f64| v.is_finite()),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Self::Text(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn into_string(self) -> Option<String> {
        match self {
            Self::Text(s) => Some(s),
            _ => None,
        }
    }
}

/// A value read from whatever JSON stands where it is expected, without ever failing on
/// the value's type: each kind of value either makes something or reads as the default (arrays
/// and objects are then skipped whole). One visitor ([`lenient`]) serves every such type.
pub(crate) trait Lenient: Default {
    /// What a number, bool or null makes.
    fn from_scalar(_: Scalar) -> Self {
        Self::default()
    }
    /// What a string makes (kept apart so that a type that drops strings copies nothing).
    fn from_text(_: &str) -> Self {
        Self::default()
    }
    /// What an array makes.
    fn from_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }
    /// What an object makes.
    fn from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Self::default())
    }
}

/// Deserializes a [`Lenient`] type from any JSON value.
pub(crate) fn lenient<'de, T: Lenient, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(LenientVisitor(PhantomData))
}

struct LenientVisitor<T>(PhantomData<T>);

impl<'de, T: Lenient> Visitor<'de> for LenientVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<T, E> {
        Ok(T::from_scalar(Scalar::Bool(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<T, E> {
        Ok(T::from_scalar(Scalar::Unsigned(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<T, E> {
        Ok(T::from_scalar(Scalar::Signed(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<T, E> {
        Ok(T::from_scalar(Scalar::Float(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<T, E> {
        Ok(T::from_text(v))
    }
    fn visit_string<E>(self, v: String) -> Result<T, E> {
        Ok(T::from_scalar(Scalar::Text(v)))
    }
    fn visit_unit<E>(self) -> Result<T, E> {
        Ok(T::from_scalar(Scalar::Absent))
    }
    fn visit_none<E>(self) -> Result<T, E> {
        Ok(T::from_scalar(Scalar::Absent))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::from_seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::from_map(map)
    }
}

impl Lenient for Scalar {
    fn from_scalar(s: Scalar) -> Self {
        s
    }
    fn from_text(s: &str) -> Self {
        Scalar::Text(s.to_owned())
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient(d)
    }
}

/// Content of a message: an array of blocks, or a plain string (ignored), or anything else.
#[derive(Debug, Default)]
pub(crate) struct Content(pub Vec<Block>);

impl Lenient for Content {
    fn from_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut blocks = Vec::new();
        while let Some(block) = seq.next_element::<Block>()? {
            blocks.push(block);
        }
        Ok(Content(blocks))
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient(d)
    }
}

/// One content block. Of a `tool_result` block only the refused paths it names are kept
/// ([`Refused`]): what a tool printed is never read as an error or an answer.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Block {
    #[serde(rename = "type")]
    pub kind: Scalar,
    pub text: Scalar,
    pub name: Scalar,
    pub input: Option<ToolInput>,
    pub content: Refused,
}

/// The refused file accesses a tool result names (a string, or text blocks):
/// [`super::refusals::refused_paths`]; nothing else of it is kept.
#[derive(Debug, Default)]
pub(crate) struct Refused(pub Vec<String>);

impl Lenient for Refused {
    fn from_scalar(s: Scalar) -> Self {
        Self(
            s.as_str()
                .map(super::refusals::refused_paths)
                .unwrap_or_default(),
        )
    }
    fn from_text(s: &str) -> Self {
        Self(super::refusals::refused_paths(s))
    }
    fn from_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut paths = Vec::new();
        while let Some(block) = seq.next_element::<Block>()? {
            if let Some(t) = block.text.as_str() {
                super::refusals::add_refused(&mut paths, t);
            }
        }
        Ok(Self(paths))
    }
}

impl<'de> Deserialize<'de> for Refused {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient(d)
    }
}

/// The fields of a tool input that hank displays or checks.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ToolInput {
    pub command: Scalar,
    pub file_path: Scalar,
    pub notebook_path: Scalar,
    pub path: Scalar,
    pub pattern: Scalar,
    pub description: Scalar,
    pub url: Scalar,
    pub query: Scalar,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Message {
    pub model: Scalar,
    pub content: Content,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Usage {
    pub input_tokens: Scalar,
    pub output_tokens: Scalar,
    pub cache_read_input_tokens: Scalar,
    pub cache_creation_input_tokens: Scalar,
}

impl Usage {
    pub(crate) fn tokens(&self) -> Tokens {
        let n = |s: &Scalar| s.as_u64().unwrap_or(0);
        Tokens {
            input: n(&self.input_tokens),
            output: n(&self.output_tokens),
            cache_read: n(&self.cache_read_input_tokens),
            cache_creation: n(&self.cache_creation_input_tokens),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RawDenial {
    pub tool_name: Scalar,
    pub tool_input: Option<ToolInput>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RateLimitInfo {
    pub status: Scalar,
    #[serde(rename = "resetsAt")]
    pub resets_at: Scalar,
    #[serde(rename = "rateLimitType")]
    pub limit_type: Scalar,
    /// The representative window's utilization (a fraction).
    pub utilization: Scalar,
    /// 2.1.330+: every window the API reported.
    #[serde(rename = "unifiedWindows")]
    pub unified_windows: super::windows::UnifiedWindows,
}

impl RateLimitInfo {
    /// The window readings this info carries (see [`super::windows::readings`]).
    pub(crate) fn window_readings(&mut self) -> Vec<super::WindowReading> {
        let unified = std::mem::take(&mut self.unified_windows);
        super::windows::readings(
            self.limit_type.as_str(),
            &self.utilization,
            &self.resets_at,
            &self.status,
            unified,
        )
    }
}

/// One event: a stream-json line, an element of the message array, or the result object.
/// One struct for every type; fields a type does not have stay absent.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Event {
    #[serde(rename = "type")]
    pub kind: Scalar,
    pub subtype: Scalar,
    pub is_error: Scalar,
    pub session_id: Scalar,
    pub model: Scalar,
    pub result: Scalar,
    pub errors: Option<Vec<Scalar>>,
    pub api_error_status: Scalar,
    pub total_cost_usd: Scalar,
    pub usage: Option<Usage>,
    pub num_turns: Scalar,
    pub duration_ms: Scalar,
    pub permission_denials: Option<Vec<RawDenial>>,
    pub message: Option<Message>,
    pub error: Scalar,
    pub rate_limit_info: Option<RateLimitInfo>,
    pub attempt: Scalar,
    /// `api_retry`: the retries the client allows and the delay before the next.
    pub max_retries: Scalar,
    pub retry_delay_ms: Scalar,
    pub error_status: Scalar,
    pub uuid: Scalar,
    /// 2.1.330+: a typed error kind (`usage_limit_reached`, `connection_failed`, …).
    pub api_error: Scalar,
    /// 2.1.330+: the API's error type (`rate_limit_error`, `overloaded_error`, …).
    pub api_error_type: Scalar,
    /// 2.1.330+: `{rate_limit_info:{status, resetsAt, rateLimitType}}`.
    pub api_error_params: Option<ApiErrorParams>,
    pub terminal_reason: Scalar,
    pub credential_expires_at: Scalar,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ApiErrorParams {
    pub rate_limit_info: Option<RateLimitInfo>,
}

/// A machine-readable rate-limit verdict (`api_error_params.rate_limit_info`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LimitInfo {
    /// `allowed`, `allowed_warning`, `rejected`, …
    pub status: Option<String>,
    /// `resetsAt`, epoch seconds.
    pub resets_at: Option<i64>,
    /// `rateLimitType`: `five_hour`, `seven_day`, `seven_day_opus`, …
    pub window: Option<String>,
}

impl LimitInfo {
    fn from_raw(info: RateLimitInfo) -> Self {
        Self {
            status: info.status.into_string(),
            resets_at: info.resets_at.as_u64().and_then(|v| i64::try_from(v).ok()),
            window: info
                .limit_type
                .into_string()
                .filter(|w| !w.trim().is_empty()),
        }
    }

    pub(crate) fn rejected(&self) -> bool {
        self.status.as_deref() == Some("rejected")
    }
}

/// The final `result` of a call: what the verdict reads of it. Its cost, tokens, turns,
/// duration and denials go straight into [`Gathered::read`].
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ResultData {
    pub subtype: String,
    pub is_error: bool,
    pub text: Option<String>,
    pub errors: Vec<String>,
    pub api_status: Option<u16>,
    /// `api_error` (typed kind string), as given.
    pub api_error: Option<String>,
    /// `api_error_type`, as given.
    pub api_error_type: Option<String>,
    /// `api_error_params.rate_limit_info`.
    pub limit: Option<LimitInfo>,
    pub terminal_reason: Option<String>,
}

/// A synthetic assistant message carrying an error category (`"error":"rate_limit"`, …).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Synthetic {
    pub category: String,
    pub text: String,
}

/// An `api_retry` event: the CLI is retrying a failed API call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Retry {
    pub attempt: u32,
    pub category: String,
    pub status: Option<u16>,
}

/// Tool uses seen in a stream (only stream-json and message arrays show them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ToolTally {
    pub total: u32,
    pub bash: u32,
    pub bash_tests: u32,
    pub edits: u32,
}

/// Plain-text output: its start, its end and its full length.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TextCapture {
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
    pub len: u64,
    /// Bytes of the current (last, unfinished) line.
    line: u64,
    /// A line was longer than [`MAX_LINE`] (the answer is `output_too_large`, whatever the
    /// format).
    pub overlong: bool,
}

impl TextCapture {
    fn push(&mut self, bytes: &[u8]) {
        self.len = self.len.saturating_add(bytes.len() as u64);
        let mut from = 0usize;
        for nl in memchr::memchr_iter(b'\n', bytes) {
            let run = self.line.saturating_add((nl - from) as u64);
            self.overlong |= run > MAX_LINE as u64;
            self.line = 0;
            from = nl + 1;
        }
        self.line = self.line.saturating_add((bytes.len() - from) as u64);
        self.overlong |= self.line > MAX_LINE as u64;
        if self.head.len() < TEXT_HEAD {
            let take = (TEXT_HEAD - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
        }
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > TEXT_TAIL * 2 {
            let cut = self.tail.len() - TEXT_TAIL;
            self.tail.drain(..cut);
        }
    }

    /// The whole text when it was short enough to be kept, else its last part.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.tail).into_owned()
    }

    /// Whether `text()` is the complete output.
    pub(crate) fn complete(&self) -> bool {
        self.tail.len() as u64 == self.len
    }
}

/// Everything read from stdout, before classification.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Gathered {
    /// What the output says outright, in the [`Analysis`] it becomes: its shape and size
    /// (`stdout_bytes`), the session id and `credential_expires_at` (from whichever event
    /// gave them last), and the last result's cost, tokens, turns, duration and permission
    /// denials. The verdict's fields are left at their defaults (`analysis::finish` sets them).
    pub read: Analysis,
    /// JSON events understood.
    pub events: u64,
    pub model: Option<String>,
    pub result: Option<ResultData>,
    /// The `rate_limit_event`s with status `rejected`, when one was seen: the latest
    /// `resetsAt` and `rateLimitType` any of them gave.
    pub limit_rejected: Option<LimitInfo>,
    /// The usage windows reported (`rate_limit_event`, the result's
    /// `api_error_params.rate_limit_info`), latest reading per window.
    pub windows: std::collections::BTreeMap<String, super::WindowReading>,
    pub synthetic: Option<Synthetic>,
    pub last_assistant_text: String,
    /// `[Request interrupted by user]` appeared as a user message.
    pub user_interrupt: bool,
    /// The last `api_retry` event.
    pub retry: Option<Retry>,
    /// The refused file accesses the tool results named ([`super::refusals`]).
    pub refused: Vec<String>,
    pub tools: ToolTally,
    pub text: Option<TextCapture>,
    /// A line, JSON document or array element longer than [`MAX_LINE`] was cut or skipped.
    pub too_large: bool,
    /// A JSON format was asked for (`--output-format json` / `stream-json`).
    pub asked_json: bool,
    /// In a JSON format: bytes of the answer that are not the client's JSON (text, foreign
    /// JSON, a line that does not parse) before, between or after its events.
    pub stray_bytes: u64,
}

/// The one-line detail of a tool use, for display (Bash command, file path, pattern, …).
pub(crate) fn tool_detail(name: &str, input: Option<&ToolInput>) -> String {
    let Some(input) = input else {
        return String::new();
    };
    let pick = |fields: &[&Scalar]| -> String {
        fields
            .iter()
            .find_map(|f| f.as_str())
            .unwrap_or("")
            .to_owned()
    };
    match name {
        "Bash" => pick(&[&input.command]),
        "Read" | "Write" | "Edit" | "MultiEdit" | "NotebookEdit" | "NotebookRead" => {
            pick(&[&input.file_path, &input.notebook_path, &input.path])
        }
        "Grep" | "Glob" => pick(&[&input.pattern, &input.path]),
        "Task" | "Agent" => pick(&[&input.description]),
        "WebFetch" => pick(&[&input.url]),
        "WebSearch" => pick(&[&input.query]),
        _ => pick(&[
            &input.command,
            &input.file_path,
            &input.pattern,
            &input.description,
            &input.url,
            &input.query,
            &input.path,
        ]),
    }
}

/// Tools that change files.
pub(crate) fn is_edit_tool(name: &str) -> bool {
    matches!(name, "Write" | "Edit" | "MultiEdit" | "NotebookEdit")
}

fn truncate_bytes(s: &mut String, max: usize) {
    let keep = crate::sanitize::cut_bytes(s, max).len();
    s.truncate(keep);
}

impl Gathered {
    /// The answer is text: `cap`, its tail cut to what is kept.
    fn take_text(&mut self, mut cap: TextCapture) {
        if cap.tail.len() > TEXT_TAIL {
            let cut = cap.tail.len() - TEXT_TAIL;
            cap.tail.drain(..cut);
        }
        self.read.shape = OutputShape::Text;
        self.text = Some(cap);
    }

    /// The shape of an answer read as the client's events, one by one (every `gather_*`
    /// starts with none absorbed): cut off, one `result` object alone, or a stream.
    fn events_shape(&self, cut_off: bool) -> OutputShape {
        if cut_off {
            OutputShape::Truncated
        } else if self.events == 1 && self.result.is_some() {
            OutputShape::ResultObject
        } else {
            OutputShape::StreamJson
        }
    }

    /// Folds one event into what is known.
    pub(crate) fn absorb(&mut self, ev: Event) {
        self.events += 1;
        if let Some(id) = ev.session_id.as_str().filter(|s| !s.trim().is_empty())
            && self.read.session_id.as_deref() != Some(id)
        {
            self.read.session_id = Some(id.to_owned());
        }
        if let Some(at) = timestamp_of(&ev.credential_expires_at) {
            self.read.credential_expires_at = Some(at);
        }
        match ev.kind.as_str().unwrap_or("") {
            "system" => match ev.subtype.as_str().unwrap_or("") {
                "init" => {
                    if let Some(m) = ev.model.into_string() {
                        self.model = Some(m);
                    }
                }
                "api_retry" => {
                    self.retry = Some(Retry {
                        attempt: ev
                            .attempt
                            .as_u64()
                            .and_then(|a| u32::try_from(a).ok())
                            .unwrap_or(0),
                        category: ev
                            .error
                            .into_string()
                            .unwrap_or_else(|| "unknown".to_owned()),
                        status: ev.error_status.as_u64().and_then(|s| u16::try_from(s).ok()),
                    });
                }
                _ => {}
            },
            "rate_limit_event" => {
                let mut raw = ev.rate_limit_info;
                if let Some(r) = raw.as_mut() {
                    super::windows::fold_readings(&mut self.windows, r.window_readings());
                }
                if let Some(info) = raw.map(LimitInfo::from_raw)
                    && info.rejected()
                {
                    let seen = self.limit_rejected.get_or_insert_with(LimitInfo::default);
                    seen.status = info.status;
                    seen.resets_at = info.resets_at.or(seen.resets_at);
                    seen.window = info.window.or(seen.window.take());
                }
            }
            "assistant" => self.absorb_assistant(ev),
            "user" => {
                if let Some(msg) = ev.message {
                    let interrupted = msg.content.0.iter().any(|b| {
                        b.kind.as_str() == Some("text")
                            && b.text
                                .as_str()
                                .is_some_and(|t| t.starts_with("[Request interrupted by user"))
                    });
                    self.user_interrupt |= interrupted;
                    for block in &msg.content.0 {
                        for path in &block.content.0 {
                            super::refusals::add_path(&mut self.refused, path);
                        }
                    }
                }
            }
            "result" => self.absorb_result(ev),
            _ => {}
        }
    }

    fn absorb_assistant(&mut self, ev: Event) {
        let Some(msg) = ev.message else { return };
        let mut text = String::new();
        for block in &msg.content.0 {
            match block.kind.as_str().unwrap_or("") {
                "text" => {
                    if let Some(t) = block.text.as_str() {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(t);
                    }
                }
                "tool_use" => {
                    let name = block.name.as_str().unwrap_or("");
                    self.tools.total = self.tools.total.saturating_add(1);
                    if name == "Bash" {
                        self.tools.bash = self.tools.bash.saturating_add(1);
                        let cmd = tool_detail(name, block.input.as_ref());
                        if super::derive::is_test_command(&cmd) {
                            self.tools.bash_tests = self.tools.bash_tests.saturating_add(1);
                        }
                    } else if is_edit_tool(name) {
                        self.tools.edits = self.tools.edits.saturating_add(1);
                    }
                }
                _ => {}
            }
        }
        truncate_bytes(&mut text, ASSISTANT_TEXT_CAP);
        if let Some(category) = ev.error.into_string() {
            self.synthetic = Some(Synthetic {
                category,
                text: text.clone(),
            });
        }
        if !text.trim().is_empty() {
            self.last_assistant_text = text;
        }
    }

    fn absorb_result(&mut self, mut ev: Event) {
        if let Some(info) = ev
            .api_error_params
            .as_mut()
            .and_then(|p| p.rate_limit_info.as_mut())
        {
            super::windows::fold_readings(&mut self.windows, info.window_readings());
        }
        let errors: Vec<String> = ev
            .errors
            .unwrap_or_default()
            .into_iter()
            .filter_map(Scalar::into_string)
            .collect();
        let is_error = match ev.is_error {
            Scalar::Bool(b) => b,
            Scalar::Text(ref s) => s.eq_ignore_ascii_case("true"),
            _ => false,
        };
        let denials: Vec<Denial> = ev
            .permission_denials
            .unwrap_or_default()
            .into_iter()
            .map(|d| {
                let tool = d
                    .tool_name
                    .into_string()
                    .unwrap_or_else(|| "unknown".to_owned());
                let command = if tool == "Bash" {
                    d.tool_input.and_then(|i| i.command.into_string())
                } else {
                    None
                };
                Denial { tool, command }
            })
            .collect();
        self.result = Some(ResultData {
            subtype: ev.subtype.into_string().unwrap_or_default(),
            is_error,
            text: ev.result.into_string(),
            errors,
            api_status: ev
                .api_error_status
                .as_u64()
                .and_then(|v| u16::try_from(v).ok()),
            api_error: ev.api_error.into_string().filter(|s| !s.trim().is_empty()),
            api_error_type: ev
                .api_error_type
                .into_string()
                .filter(|s| !s.trim().is_empty()),
            limit: ev
                .api_error_params
                .and_then(|p| p.rate_limit_info)
                .map(LimitInfo::from_raw),
            terminal_reason: ev.terminal_reason.into_string(),
        });
        let read = &mut self.read;
        read.cost_usd = sane_cost(&ev.total_cost_usd);
        read.cost_reported = believable_cost(&ev.total_cost_usd).is_some();
        read.tokens = ev.usage.as_ref().map(Usage::tokens).unwrap_or_default();
        read.num_turns = ev.num_turns.as_u64().and_then(|v| u32::try_from(v).ok());
        read.duration_ms = ev.duration_ms.as_u64();
        read.permission_denials = denials;
    }
}

/// Largest believable cost of one call; anything above (or negative, or not finite) is a
/// broken value and counts as 0 so it never poisons the totals.
pub(crate) const MAX_CALL_COST_USD: f64 = 100_000.0;

/// `total_cost_usd`, or 0 when it is absent, unreadable or absurd.
pub(crate) fn sane_cost(s: &Scalar) -> f64 {
    believable_cost(s).unwrap_or(0.0)
}

/// `total_cost_usd` when it is present and believable.
pub(crate) fn believable_cost(s: &Scalar) -> Option<f64> {
    s.as_f64()
        .filter(|c| c.is_finite() && (0.0..=MAX_CALL_COST_USD).contains(c))
}

/// Epoch seconds, epoch milliseconds (|v| ≥ 1e11) or an RFC 3339 string, as a timestamp.
/// Zero, negative and unreadable values are `None`.
pub(crate) fn timestamp_of(s: &Scalar) -> Option<Timestamp> {
    let from_number = |v: f64| -> Option<Timestamp> {
        if !v.is_finite() || v <= 0.0 {
            return None;
        }
        let secs = if v >= 1e11 { v / 1000.0 } else { v };
        if secs >= 253_402_300_800.0 {
            return None;
        }
        Timestamp::from_second(secs as i64).ok()
    };
    match s {
        Scalar::Text(t) => {
            let t = t.trim();
            match t.parse::<f64>() {
                Ok(v) => from_number(v),
                Err(_) => t.parse::<Timestamp>().ok(),
            }
        }
        other => other.as_f64().and_then(from_number),
    }
}

/// Event types the client writes (unknown future types are recognized by their ids).
const CLIENT_TYPES: [&str; 8] = [
    "result",
    "system",
    "assistant",
    "user",
    "rate_limit_event",
    "stream_event",
    "control_request",
    "control_response",
];

/// Whether an object is one of the client's events: a known `type`, or the ids and flags
/// every event carries. A JSON snippet in a text answer (`{"type":"object"}`) is not.
pub(crate) fn is_client_event(ev: &Event) -> bool {
    ev.kind.as_str().is_some_and(|k| CLIENT_TYPES.contains(&k))
        || ev.session_id.as_str().is_some()
        || ev.uuid.as_str().is_some()
        || matches!(ev.is_error, Scalar::Bool(_))
}

/// One event from a JSON object, whatever the order of its keys. A field of an unexpected
/// type is dropped (and only that field): the rest of the event is still read.
pub(crate) fn event_from_value(v: &serde_json::Value) -> Option<Event> {
    let map = v.as_object()?;
    if let Ok(ev) = Event::deserialize(v) {
        return Some(ev);
    }
    let mut kept = serde_json::Map::new();
    for (k, val) in map {
        let mut one = serde_json::Map::new();
        one.insert(k.clone(), val.clone());
        if Event::deserialize(&serde_json::Value::Object(one)).is_ok() {
            kept.insert(k.clone(), val.clone());
        }
    }
    Event::deserialize(&serde_json::Value::Object(kept)).ok()
}

/// Parses one line holding one JSON object into an event (typed fast path, lenient fallback).
pub(crate) fn parse_event(line: &[u8]) -> Option<Event> {
    let line = line.trim_ascii();
    if !line.starts_with(b"{") {
        return None;
    }
    if let Ok(ev) = serde_json::from_slice::<Event>(line) {
        return Some(ev);
    }
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    event_from_value(&v)
}

/// Keys only the client's JSON has: used to tell cut-off client JSON from text that merely
/// starts with `{` or `[`.
static CLIENT_MARKER: LazyLock<regex::bytes::Regex> = LazyLock::new(|| {
    match regex::bytes::Regex::new(
        r#""(?:type"\s*:\s*"(?:result|system|assistant|user|rate_limit_event|stream_event)"|is_error"\s*:|session_id"\s*:|subtype"\s*:|total_cost_usd"\s*:)"#,
    ) {
        Ok(r) => r,
        Err(e) => panic!("constant pattern does not compile: {e}"),
    }
});

/// Bytes looked at for [`CLIENT_MARKER`].
const MARKER_WINDOW: usize = 64 * 1024;

fn has_client_marker(bytes: &[u8]) -> bool {
    CLIENT_MARKER.is_match(&bytes[..bytes.len().min(MARKER_WINDOW)])
}

/// Whether `buf` opens an object whose first key is `result` (the client's answer text).
fn opens_with_result_key(buf: &[u8]) -> bool {
    buf.trim_ascii_start()
        .strip_prefix(b"{")
        .is_some_and(|r| r.trim_ascii_start().starts_with(b"\"result\""))
}

/// Whether `buf`, with the control characters inside its strings escaped (`\n` for a raw
/// line break), is JSON cut off at its end.
fn cut_once_escaped(buf: &[u8]) -> bool {
    let mut out = Vec::with_capacity(buf.len() + 16);
    let (mut in_string, mut escaped) = (false, false);
    for &b in buf {
        if in_string && !escaped && b < 0x20 {
            out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
            continue;
        }
        out.push(b);
        if escaped {
            escaped = false;
        } else if in_string && b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            in_string = !in_string;
        }
    }
    serde_json::from_slice::<serde_json::Value>(&out).is_err_and(|e| e.is_eof())
}

/// A first line that opens a JSON object the way the client writes one: `{` alone (pretty
/// printed) or `{"key"…`. `{BUILD} ok` is text.
fn opens_json_object(line: &[u8]) -> bool {
    match line.strip_prefix(b"{") {
        Some(rest) => {
            let rest = rest.trim_ascii_start();
            rest.is_empty() || rest.starts_with(b"\"")
        }
        None => false,
    }
}

/// A reader that counts the bytes consumed through it.
struct Counting<R> {
    inner: R,
    count: u64,
}

impl<R: BufRead> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count = self.count.saturating_add(n as u64);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.count = self.count.saturating_add(amt as u64);
        self.inner.consume(amt);
    }
}

/// The reader's buffered bytes, filled when empty (an interrupted read is tried again);
/// `None` at the end of input or on a read error (read errors end the input).
pub(crate) fn fill<R: BufRead>(r: &mut R) -> Option<&[u8]> {
    loop {
        match r.fill_buf() {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
    // Filled: this call hands the same bytes back without reading.
    r.fill_buf().ok().filter(|a| !a.is_empty())
}

/// Reads one line (without its `\n`) into `buf`, keeping at most `MAX_LINE` bytes.
/// Returns `None` at the end of input, else whether the line was cut.
/// Read errors end the input (what was read so far is kept).
fn read_line_capped<R: BufRead>(r: &mut R, buf: &mut Vec<u8>) -> Option<bool> {
    buf.clear();
    let mut cut = false;
    let mut any = false;
    loop {
        let (done, used) = {
            let Some(available) = fill(r) else {
                return if any { Some(cut) } else { None };
            };
            any = true;
            let (chunk, done, used) = match memchr::memchr(b'\n', available) {
                Some(i) => (&available[..i], true, i + 1),
                None => (available, false, available.len()),
            };
            cut |= keep_capped(buf, chunk);
            (done, used)
        };
        r.consume(used);
        if done {
            return Some(cut);
        }
    }
}

/// Appends `chunk` to `buf` up to `MAX_LINE` bytes in all; whether some of it was dropped.
fn keep_capped(buf: &mut Vec<u8>, chunk: &[u8]) -> bool {
    let room = MAX_LINE.saturating_sub(buf.len());
    buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
    chunk.len() > room
}

/// Reads one line (without its `\n`) and hands it to `f` with whether it was cut (only its
/// first `MAX_LINE` bytes are given). `None` at the end of input; read errors end the input.
///
/// A line that lies whole in the reader's buffer is given in place; only a line that spans
/// two fills is copied, into `carry` (reused from line to line, never longer than `MAX_LINE`).
fn with_line<R: BufRead, T>(
    r: &mut R,
    carry: &mut Vec<u8>,
    f: impl FnOnce(&[u8], bool) -> T,
) -> Option<T> {
    carry.clear();
    let mut cut = false;
    let mut any = false;
    while let Some(available) = fill(r) {
        any = true;
        match memchr::memchr(b'\n', available) {
            Some(i) if carry.is_empty() && !cut => {
                let out = f(&available[..i.min(MAX_LINE)], i > MAX_LINE);
                r.consume(i + 1);
                return Some(out);
            }
            Some(i) => {
                cut |= keep_capped(carry, &available[..i]);
                r.consume(i + 1);
                return Some(f(carry, cut));
            }
            None => {
                let n = available.len();
                cut |= keep_capped(carry, available);
                r.consume(n);
            }
        }
    }
    if any { Some(f(carry, cut)) } else { None }
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

/// Skips leading whitespace (and a UTF-8 BOM) and returns the first byte, unconsumed.
fn first_byte<R: BufRead>(r: &mut R) -> Option<u8> {
    let mut at_start = true;
    loop {
        let available = fill(r)?;
        if at_start && available.starts_with(&[0xEF, 0xBB, 0xBF]) {
            r.consume(3);
            at_start = false;
            continue;
        }
        at_start = false;
        match available.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => {
                let b = available[i];
                r.consume(i);
                return Some(b);
            }
            None => {
                let n = available.len();
                r.consume(n);
            }
        }
    }
}

/// Reads the whole of stdout and gathers what it says.
///
/// The shape is decided by the first non-blank content: a JSON value of one of the client's
/// shapes (a client event object, pretty-printed or one per line; an array of client events)
/// is JSON, and cut-off JSON that carries the client's keys is `Truncated`. Anything else,
/// including text that merely starts with `{` or `[` (`[BUILD] ok`, a JSON snippet), is text.
#[cfg(test)]
pub(crate) fn gather<R: BufRead>(stdout: R) -> Gathered {
    gather_as(stdout, super::AskedFormat::Auto)
}

/// [`gather`] for an answer in the format hank asked for. In a JSON format, an answer that
/// does not start as the client's JSON is scanned line by line for the client's events (a
/// `result` after stray lines is still read), and every stray byte is counted.
pub(crate) fn gather_as<R: BufRead>(stdout: R, asked: super::AskedFormat) -> Gathered {
    let mut r = Counting {
        inner: stdout,
        count: 0,
    };
    let mut g = Gathered {
        asked_json: asked.is_json(),
        ..Gathered::default()
    };
    match first_byte(&mut r) {
        None => g.read.shape = OutputShape::Empty,
        Some(b'{') => gather_lines(&mut r, &mut g),
        Some(b'[') => gather_array(&mut r, &mut g),
        Some(_) => gather_not_client(&mut r, &mut g, &[]),
    }
    // Drain whatever is left so the byte count is the whole output.
    let _ = std::io::copy(&mut r, &mut std::io::sink());
    g.read.stdout_bytes = r.count;
    g
}

/// Plain text: `prefix` (already read) then the rest of `r`.
/// Reads the rest of `r` into `cap` (a read error ends it: what was read is kept).
fn drain_into<R: BufRead>(r: &mut R, cap: &mut TextCapture) {
    while let Some(a) = fill(r) {
        cap.push(a);
        let n = a.len();
        r.consume(n);
    }
}

fn gather_text<R: BufRead>(r: &mut R, g: &mut Gathered, prefix: &[u8]) {
    let mut cap = TextCapture::default();
    cap.push(prefix);
    drain_into(r, &mut cap);
    // A text line over the line cap is too large in every format, not a success.
    g.too_large |= cap.overlong;
    g.take_text(cap);
}

/// An answer that does not start as the client's JSON: `prefix` (already read), then the rest
/// of `r`. In a JSON format, lines that may hold the client's events after stray ones; else
/// text.
fn gather_not_client<R: BufRead>(r: &mut R, g: &mut Gathered, prefix: &[u8]) {
    if g.asked_json {
        gather_after_stray(r, g, prefix);
    } else {
        gather_text(r, g, prefix);
    }
}

/// What the first line of a `{` output says about the rest.
enum FirstLine {
    /// One of the client's events: stream-json or a one-line result object.
    Event(Box<Event>),
    /// The start of pretty-printed JSON, or of one object cut short (trimmed).
    Whole(Vec<u8>),
    /// A JSON snippet or a line of text that starts with `{` (the line and its `\n`), and
    /// whether it was cut at [`MAX_LINE`].
    Text(Vec<u8>, bool),
    /// A JSON line longer than [`MAX_LINE`] (skipped).
    TooLarge,
}

fn gather_lines<R: BufRead>(r: &mut R, g: &mut Gathered) {
    let mut carry = Vec::new();
    let first = with_line(r, &mut carry, |line, cut| {
        let first = trim_ascii(line);
        match if cut { None } else { parse_event(first) } {
            Some(ev) if is_client_event(&ev) => FirstLine::Event(Box::new(ev)),
            None if cut && opens_json_object(first) => FirstLine::TooLarge,
            None if opens_json_object(first) => FirstLine::Whole(first.to_vec()),
            _ => {
                let mut text = Vec::with_capacity(line.len() + 1);
                text.extend_from_slice(line);
                text.push(b'\n');
                FirstLine::Text(text, cut)
            }
        }
    });
    let mut last_failed = false;
    match first {
        None => {
            g.read.shape = OutputShape::Empty;
            return;
        }
        Some(FirstLine::Event(ev)) => g.absorb(*ev),
        Some(FirstLine::TooLarge) => {
            g.too_large = true;
            last_failed = true;
        }
        Some(FirstLine::Whole(first)) => {
            // Pretty-printed JSON, or one object cut short: read it whole.
            gather_whole(r, g, first);
            return;
        }
        Some(FirstLine::Text(line, cut)) => {
            g.too_large |= cut;
            gather_not_client(r, g, &line);
            return;
        }
    }
    // Each line is folded in place (no event is moved out of the closure).
    while with_line(r, &mut carry, |line, cut| {
        let trimmed = trim_ascii(line);
        if trimmed.is_empty() {
            return;
        }
        g.too_large |= cut;
        match if cut { None } else { parse_event(trimmed) } {
            Some(ev) => {
                g.absorb(ev);
                last_failed = false;
            }
            None => {
                last_failed = true;
                if g.asked_json {
                    g.stray_bytes = g.stray_bytes.saturating_add(trimmed.len() as u64);
                }
            }
        }
    })
    .is_some()
    {}
    g.read.shape = g.events_shape(last_failed);
}

fn gather_whole<R: BufRead>(r: &mut R, g: &mut Gathered, mut buf: Vec<u8>) {
    buf.push(b'\n');
    let mut line = Vec::new();
    while let Some(cut) = read_line_capped(r, &mut line) {
        if cut || buf.len() + line.len() >= MAX_WHOLE {
            g.too_large = true;
            break;
        }
        buf.extend_from_slice(&line);
        buf.push(b'\n');
    }
    let mut failed = false;
    let mut cut_at_eof = false;
    // Read without the newline that ends the output: a string cut there ends at EOF.
    for v in
        serde_json::Deserializer::from_slice(buf.trim_ascii_end()).into_iter::<serde_json::Value>()
    {
        let ev = match v {
            Ok(v) => event_from_value(&v).filter(|ev| g.events > 0 || is_client_event(ev)),
            Err(e) => {
                cut_at_eof = e.is_eof();
                None
            }
        };
        match ev {
            Some(ev) => g.absorb(ev),
            None => {
                failed = true;
                break;
            }
        }
    }
    // Raw line breaks inside a string (an answer printed without escaping them) make serde
    // stop at the first one; read as JSON would, is the output cut off inside the value?
    let cut_at_eof = cut_at_eof
        || (failed
            && g.events == 0
            && !g.too_large
            && (has_client_marker(&buf) || opens_with_result_key(&buf))
            && cut_once_escaped(buf.trim_ascii_end()));
    if failed && g.events == 0 && cut_at_eof && !g.too_large {
        // A JSON value the output ended inside (`{"result": "Success but…`): whoever wrote
        // it, the answer was cut off, never a text success.
        g.read.shape = OutputShape::Truncated;
        return;
    }
    if failed && g.events == 0 && !has_client_marker(&buf) {
        // Not the client's JSON at all: text that starts with `{` (in a JSON format: stray
        // lines, perhaps before the client's result).
        gather_not_client(r, g, &buf);
        return;
    }
    g.read.shape = g.events_shape(failed);
}

/// In a JSON format, an answer that did not start as the client's JSON: `prefix` (already
/// read) and the rest of `r`, line by line. Each line that is one of the client's events is
/// folded in (a `result` after stray lines still counts); every other non-blank line is
/// stray. No event at all: the answer is text (kept for the summary), which the verdict
/// reads as `malformed`.
fn gather_after_stray<R: BufRead>(r: &mut R, g: &mut Gathered, prefix: &[u8]) {
    let mut input = prefix.chain(r);
    let mut cap = TextCapture::default();
    let mut last_failed = false;
    while let Some(line) = stray_line(&mut input, &mut cap) {
        let (line, cut) = match line {
            StrayLine::Streamed(n) => {
                // A long line with no JSON object near its start: text, never held whole.
                g.stray_bytes = g.stray_bytes.saturating_add(n);
                last_failed = false;
                continue;
            }
            StrayLine::Held(line, cut) => (line, cut),
        };
        let trimmed = trim_ascii(&line);
        if trimmed.is_empty() {
            cap.push(&line);
            cap.push(b"\n");
            continue;
        }
        g.too_large |= cut;
        let ev = if cut { None } else { event_in_line(trimmed) };
        match ev {
            Some((ev, skipped)) => {
                g.absorb(ev);
                last_failed = false;
                g.stray_bytes = g.stray_bytes.saturating_add(skipped as u64);
            }
            None => {
                g.stray_bytes = g.stray_bytes.saturating_add(trimmed.len() as u64);
                last_failed = opens_json_object(trimmed);
                cap.push(&line);
                cap.push(b"\n");
            }
        }
    }
    if g.events == 0 {
        g.take_text(cap);
        return;
    }
    g.read.shape = g.events_shape(last_failed && g.result.is_none());
}

/// Bytes of a line looked at for the start of a JSON object (`{"`) before the line is taken
/// for text and streamed into the capture instead of held.
const STRAY_PEEK: usize = 4096;

/// One line of an answer that did not start as the client's JSON.
enum StrayLine {
    /// The line (without its `\n`, at most [`MAX_LINE`] bytes) and whether it was cut.
    Held(Vec<u8>, bool),
    /// A line with no `{"` in its first [`STRAY_PEEK`] bytes: pushed into the capture as it
    /// was read (its `\n` included); its length.
    Streamed(u64),
}

/// Reads one line for [`gather_after_stray`]; `None` at the end of input (read errors end it).
fn stray_line<R: BufRead>(r: &mut R, cap: &mut TextCapture) -> Option<StrayLine> {
    let mut line = Vec::new();
    let mut cut = false;
    let mut any = false;
    let mut streamed: Option<u64> = None;
    loop {
        let (done, used) = {
            let Some(available) = fill(r) else { break };
            any = true;
            let (chunk, done, used) = match memchr::memchr(b'\n', available) {
                Some(i) => (&available[..i], true, i + 1),
                None => (available, false, available.len()),
            };
            match streamed.as_mut() {
                Some(n) => {
                    cap.push(chunk);
                    *n = n.saturating_add(chunk.len() as u64);
                }
                None => {
                    cut |= keep_capped(&mut line, chunk);
                    let head = &line[..line.len().min(STRAY_PEEK)];
                    if line.len() > STRAY_PEEK
                        && memchr::memmem::find(head, b"{\"").is_none()
                        && !head.trim_ascii_start().starts_with(b"{")
                    {
                        cap.push(&line);
                        streamed = Some(line.len() as u64);
                        line = Vec::new();
                    }
                }
            }
            (done, used)
        };
        r.consume(used);
        if done {
            break;
        }
    }
    if !any {
        return None;
    }
    Some(match streamed {
        Some(n) => {
            cap.push(b"\n");
            StrayLine::Streamed(n)
        }
        None => StrayLine::Held(line, cut),
    })
}

/// One of the client's events in a line, whole or after a few stray bytes on the same line
/// (`ok{"type":"result",…}`): the event and how many bytes came before it.
fn event_in_line(line: &[u8]) -> Option<(Event, usize)> {
    if let Some(ev) = parse_event(line).filter(is_client_event) {
        return Some((ev, 0));
    }
    let at = memchr::memmem::find(line, b"{\"")?;
    if at == 0 {
        return None;
    }
    parse_event(&line[at..])
        .filter(is_client_event)
        .map(|ev| (ev, at))
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// A reader that keeps a copy of what passes through it while `on` is set.
/// It also gives at most `budget` bytes (set again for each array element): an element longer
/// than [`MAX_LINE`] ends the read with an error and sets `over`.
struct Tee<'a, R> {
    inner: R,
    on: &'a Cell<bool>,
    copy: TextCapture,
    budget: &'a Cell<usize>,
    over: &'a Cell<bool>,
}

impl<R: Read> Read for Tee<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let budget = self.budget.get();
        if budget == 0 && !buf.is_empty() {
            self.over.set(true);
            return Err(std::io::Error::other("array element too large"));
        }
        let len = buf.len().min(budget);
        let n = self.inner.read(&mut buf[..len])?;
        self.budget.set(budget - n);
        if self.on.get() {
            self.copy.push(&buf[..n]);
        }
        Ok(n)
    }
}

/// Why the array visitor stopped early.
const NOT_CLIENT: &str = "not an array of client events";

/// Visits the elements of the top-level array one by one, folding each into `Gathered`.
/// The first element decides: a client event, or else the output is text.
struct ArrayVisitor<'a> {
    g: &'a mut Gathered,
    tee_on: &'a Cell<bool>,
    budget: &'a Cell<usize>,
}

impl<'de> Visitor<'de> for ArrayVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(v) = seq.next_element::<serde_json::Value>()? {
            self.budget.set(MAX_LINE);
            let ev = event_from_value(&v);
            if self.g.events == 0 {
                match ev {
                    Some(ev) if is_client_event(&ev) => {
                        self.tee_on.set(false);
                        self.g.absorb(ev);
                    }
                    _ => return Err(serde::de::Error::custom(NOT_CLIENT)),
                }
            } else if let Some(ev) = ev {
                self.g.absorb(ev);
            }
        }
        Ok(())
    }
}

fn gather_array<R: BufRead>(r: &mut R, g: &mut Gathered) {
    // `[` then blanks: an array of objects (`[{` or `[]`) may be the client's; `[BUILD] ok`,
    // `[1/3]` or `[ ] todo` is text.
    let mut prefix = Vec::new();
    while let Some(&b) = fill(r).and_then(|a| a.first()) {
        if prefix.is_empty() || (b.is_ascii_whitespace() && prefix.len() < 4096) {
            prefix.push(b);
            r.consume(1);
            continue;
        }
        if b != b'{' && b != b']' {
            gather_not_client(r, g, &prefix);
            return;
        }
        break;
    }
    let on = Cell::new(true);
    let budget = Cell::new(MAX_LINE);
    let over = Cell::new(false);
    let mut tee = Tee {
        inner: (&prefix[..]).chain(&mut *r),
        on: &on,
        copy: TextCapture::default(),
        budget: &budget,
        over: &over,
    };
    let ok = {
        let mut de = serde_json::Deserializer::from_reader(&mut tee);
        let visitor = ArrayVisitor {
            g: &mut *g,
            tee_on: &on,
            budget: &budget,
        };
        de.deserialize_seq(visitor).is_ok()
    };
    g.too_large |= over.get();
    let Tee { copy: seen, .. } = tee;
    // `[ ] todo`: an empty array followed by more is text too.
    let not_client = !ok && !has_client_marker(&seen.head);
    if g.events == 0 && (ok || not_client) {
        // Everything the deserializer consumed went through the tee: it is all in `seen`.
        let consumed = seen.len;
        let mut cap = seen;
        drain_into(r, &mut cap);
        let more = cap.complete()
            && cap
                .tail
                .get(to_usize(consumed)..)
                .is_some_and(|rest| !rest.trim_ascii().is_empty());
        if ok && !more && cap.complete() {
            // `[]` alone: an empty message array.
            g.read.shape = OutputShape::MessageArray;
            return;
        }
        g.take_text(cap);
        return;
    }
    g.read.shape = if ok {
        OutputShape::MessageArray
    } else {
        OutputShape::Truncated
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_detected_from_the_first_bytes() {
        let cases: &[(&[u8], OutputShape)] = &[
            (b"", OutputShape::Empty),
            (b"  \n\t\n", OutputShape::Empty),
            (b"{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false}\n", OutputShape::ResultObject),
            (b"\xEF\xBB\xBF{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false}", OutputShape::ResultObject),
            (b"{\"type\":\"system\",\"subtype\":\"init\"}\n{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false}\n", OutputShape::StreamJson),
            (b"[{\"type\":\"system\"},{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false}]", OutputShape::MessageArray),
            (b"[{\"type\":\"system\"},{\"type\":\"res", OutputShape::Truncated),
            (b"{\"type\":\"system\",\"subtype\":\"init\"}\n{\"type\":\"assis", OutputShape::Truncated),
            (b"{\"type\":\"result\",\"subtype\":\"succ", OutputShape::Truncated),
            // A JSON value cut off at the end of the output, without the client's keys.
            (b"{\"result\": \"Success but json is broken", OutputShape::Truncated),
            (b"{\n  \"result\": \"done\",\n  \"files\": [1, 2", OutputShape::Truncated),
            // A whole JSON value that is not the client's, text after it: text.
            (b"{\"a\": 1}\nall done", OutputShape::Text),
            (b"{\"note\": \"line\nnext line", OutputShape::Text),
            // The client's answer key with raw line breaks, cut off: a truncated answer.
            (b"{\"result\": \"Success but json is broken\nFiles created successfully\n", OutputShape::Truncated),
            (b"{\"result\": \"two\nlines\"}\nall done", OutputShape::Text),
            (b"{BUILD} ok", OutputShape::Text),
            (b"{\n  \"type\": \"result\",\n  \"subtype\": \"success\",\n  \"is_error\": false\n}\n", OutputShape::ResultObject),
            (b"hello there", OutputShape::Text),
            (b"\x00\xff\xfe", OutputShape::Text),
        ];
        for (input, shape) in cases {
            let g = gather(*input);
            assert_eq!(g.read.shape, *shape, "{:?}", String::from_utf8_lossy(input));
            assert_eq!(g.read.stdout_bytes, input.len() as u64);
        }
    }

    #[test]
    fn lenient_numbers_never_fail_the_line() {
        let line = br#"{"type":"result","subtype":"success","is_error":false,"num_turns":"3","total_cost_usd":null,"duration_ms":1.5e3,"usage":{"input_tokens":-4,"output_tokens":{"x":1}},"api_error_status":[1]}"#;
        let g = gather(&line[..]);
        let r = g.result.unwrap();
        assert_eq!(g.read.num_turns, Some(3));
        assert_eq!(g.read.duration_ms, Some(1500));
        assert_eq!(g.read.cost_usd, 0.0);
        assert_eq!(g.read.tokens, Tokens::default());
        assert_eq!(r.api_status, None);
    }

    #[test]
    fn tool_results_are_not_read_and_tools_are_tallied() {
        let s = concat!(
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"cargo test --all"}},{"type":"tool_use","name":"Read","input":{"file_path":"/a/b.rs"}}]}}"#,
            "\n",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"usage limit reached","is_error":false}]}}"#,
            "\n",
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Edit","input":{"file_path":"x"}}]}}"#,
            "\n"
        );
        let g = gather(s.as_bytes());
        assert_eq!(
            g.tools,
            ToolTally {
                total: 3,
                bash: 1,
                bash_tests: 1,
                edits: 1
            }
        );
        assert!(g.synthetic.is_none());
        assert!(g.last_assistant_text.is_empty());
    }

    #[test]
    fn overlong_lines_are_cut_not_held() {
        let mut buf = Vec::new();
        let mut input: &[u8] = b"abc\ndef";
        assert_eq!(read_line_capped(&mut input, &mut buf), Some(false));
        assert_eq!(buf, b"abc");
        assert_eq!(read_line_capped(&mut input, &mut buf), Some(false));
        assert_eq!(buf, b"def");
        assert_eq!(read_line_capped(&mut input, &mut buf), None);
    }

    #[test]
    fn text_capture_keeps_head_and_tail() {
        let mut cap = TextCapture::default();
        let chunk = vec![b'a'; 1024 * 1024];
        for _ in 0..5 {
            cap.push(&chunk);
        }
        assert_eq!(cap.len, 5 * 1024 * 1024);
        assert_eq!(cap.head.len(), TEXT_HEAD);
        assert!(cap.tail.len() <= TEXT_TAIL * 2);
        assert!(!cap.complete());
    }
}
