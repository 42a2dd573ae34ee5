//! Agent profiles: how hank drives one agent CLI, read from TOML.
//!
//! A profile names the program, the argv of a call (ordered groups with placeholders), how the
//! prompt is delivered, and how the answer is read: hank's native Claude Code analyzer, or
//! JSONPath fields and ordered error rules ([`crate::analysis::Mapping`]). The built-in profiles
//! are `templates/agents/*.toml`, embedded in the binary; `.hank/agents/NAME.toml` overrides one
//! or adds a new one. Profiles are read once, when a run starts: an agent that edits a profile
//! file during the run changes nothing until the user starts hank again.
//!
//! Parsing is pure ([`parse`]); [`load`] and [`list`] read the project's folder.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Deserialize;

use crate::analysis::{
    ErrorRule, FieldPath, Fields, MappedFormat, Mapping, Matcher, RuleKind, Take,
};
use crate::error::{HankError, Result};
use crate::policy::charge::Prices;
use crate::policy::session;
use crate::settings::{AgentCommand, OutputFormat, Settings, Source, Sourced};

/// The built-in profiles: name and TOML text.
pub const BUILTIN: &[(&str, &str)] = &[
    ("claude", include_str!("../../templates/agents/claude.toml")),
    ("codex", include_str!("../../templates/agents/codex.toml")),
    ("gemini", include_str!("../../templates/agents/gemini.toml")),
    (
        "opencode",
        include_str!("../../templates/agents/opencode.toml"),
    ),
    (
        "copilot",
        include_str!("../../templates/agents/copilot.toml"),
    ),
    ("aider", include_str!("../../templates/agents/aider.toml")),
    ("goose", include_str!("../../templates/agents/goose.toml")),
    ("cursor", include_str!("../../templates/agents/cursor.toml")),
];

pub use crate::policy::failover::{DEFAULT_AGENT, valid_name};

/// How the prompt reaches the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptDelivery {
    /// Written to the agent's stdin.
    Stdin,
    /// The `{prompt}` placeholder of an argv group (argv strings are limited to 128 KiB).
    Argument,
    /// Written to a file (0600) whose path is the `{prompt_file}` placeholder.
    File,
}

/// When an argv group applies besides "all its placeholders have a value".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// `--live` (the agent streams events).
    Live,
    /// Not live, output format JSON.
    Json,
    /// Not live, output format text.
    Text,
    /// A session is resumed.
    Resume,
    /// No session is resumed.
    Fresh,
}

/// One group of argv values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgGroup {
    pub values: Vec<String>,
    pub when: Option<When>,
}

/// How the answer is read.
#[derive(Debug, Clone)]
pub enum Parser {
    /// Hank's native Claude Code analyzer ([`crate::analysis::analyze_in`]).
    Claude,
    /// JSONPath fields and error rules.
    Mapped(Box<Mapping>),
}

/// Where a profile came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Embedded in hank.
    Builtin,
    /// `.hank/agents/NAME.toml`, replacing the built-in profile of the same name.
    Overrides(PathBuf),
    /// `.hank/agents/NAME.toml`, a profile hank does not ship.
    Project(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Builtin => f.write_str("built-in"),
            Self::Overrides(p) => write!(f, "{} (overrides the built-in)", p.display()),
            Self::Project(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A validated profile.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub description: String,
    /// The program: a name on PATH, a path, or a command with leading arguments.
    pub program: String,
    /// An environment variable that, when set, replaces `program`.
    pub program_env: Option<String>,
    pub version_args: Vec<String>,
    /// How to install the CLI (shown when it is missing).
    pub install: Option<String>,
    pub prompt: PromptDelivery,
    /// The CLI can resume a session.
    pub resume: bool,
    /// The CLI takes hank's allowed-tools list.
    pub allowed_tools: bool,
    pub args: Vec<ArgGroup>,
    pub permission_modes: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    /// `pass_env`: credentials hank otherwise keeps from the agent
    /// (hank's list of forge, CI and notification credentials) that this profile's agent is given on purpose.
    pub pass_env: Vec<String>,
    pub parser: Parser,
    /// `[prices]`: USD per million tokens, to estimate the cost of an agent that reports none.
    pub prices: Option<Prices>,
    /// `[sandbox]`: the client's own state paths and API endpoints (`crate::sandbox`).
    pub sandbox: crate::sandbox::ProfileSandbox,
    /// `tested`: how hank tested this profile against its client (shown by `hank agents`);
    /// `None` for a profile hank did not test.
    pub tested: Option<String>,
    pub origin: Origin,
}

/// The facts one call's argv depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallInput<'a> {
    pub live: bool,
    pub output_format: OutputFormat,
    pub session: Option<&'a str>,
    pub model: Option<&'a str>,
    pub permission_mode: Option<&'a str>,
    pub allowed_tools: &'a [String],
    /// The whole prompt, for [`PromptDelivery::Argument`].
    pub prompt: Option<&'a str>,
    /// The prompt file, for [`PromptDelivery::File`].
    pub prompt_file: Option<&'a str>,
}

impl<'a> CallInput<'a> {
    /// A call in JSON, not live, of `session` (none: a fresh one), with no model, permission
    /// mode, allowed tools or prompt given.
    #[must_use]
    pub fn json(session: Option<&'a str>) -> Self {
        Self {
            live: false,
            output_format: OutputFormat::Json,
            session,
            model: None,
            permission_mode: None,
            allowed_tools: &[],
            prompt: None,
            prompt_file: None,
        }
    }
}

/// The placeholders an argv value may hold.
pub const PLACEHOLDERS: &[&str] = &[
    "model",
    "session",
    "permission_mode",
    "allowed_tools",
    "prompt",
    "prompt_file",
];

impl Profile {
    /// How this agent's calls are charged: its answers carry a cost (Claude Code in its JSON
    /// formats, a profile with a `cost_usd` field), or it is estimated from tokens at the
    /// profile's `[prices]`, or it cannot be charged. `text` is CLAUDE_OUTPUT_FORMAT=text (Claude
    /// Code's text answer holds no cost).
    #[must_use]
    pub fn cost_source(&self, text: bool) -> crate::policy::charge::CostSource {
        use crate::policy::charge::CostSource;
        let reported = match &self.parser {
            Parser::Claude => !text,
            Parser::Mapped(m) => m.fields.cost_usd.is_some(),
        };
        match (reported, self.prices) {
            (true, _) => CostSource::Reported,
            (false, Some(p)) => CostSource::Priced(p),
            (false, None) => CostSource::Unknown,
        }
    }

    /// The argv after the program (and its leading arguments) for one call.
    #[must_use]
    pub fn argv(&self, input: &CallInput<'_>) -> Vec<String> {
        let tools = (self.allowed_tools && !input.allowed_tools.is_empty())
            .then(|| input.allowed_tools.join(","));
        let mode = input
            .permission_mode
            .map(|m| self.permission_modes.get(m).map_or(m, String::as_str));
        // The id came from the agent's answer: only one in the CLI's own alphabet goes back on
        // the command line (never an argument that starts with `-`).
        let session = input
            .session
            .filter(|id| self.resume && session::check_id(id, self.session_ids()).is_ok());
        let value = |name: &str| -> Option<&str> {
            match name {
                "model" => input.model,
                "session" => session,
                "permission_mode" => mode,
                "allowed_tools" => tools.as_deref(),
                "prompt" => input.prompt,
                "prompt_file" => input.prompt_file,
                _ => None,
            }
        };
        let mut out = Vec::new();
        for group in &self.args {
            let applies = match group.when {
                None => true,
                Some(When::Live) => input.live,
                Some(When::Json) => !input.live && input.output_format == OutputFormat::Json,
                Some(When::Text) => !input.live && input.output_format == OutputFormat::Text,
                Some(When::Resume) => session.is_some(),
                Some(When::Fresh) => session.is_none(),
            };
            if !applies {
                continue;
            }
            let filled: Option<Vec<String>> =
                group.values.iter().map(|v| fill(v, &value)).collect();
            if let Some(values) = filled {
                out.extend(values);
            }
        }
        out
    }

    /// The alphabet of this CLI's session ids: UUIDs for Claude Code, a conservative one for
    /// every other CLI.
    #[must_use]
    pub fn session_ids(&self) -> session::IdAlphabet {
        if self.is_claude() {
            session::IdAlphabet::Uuid
        } else {
            session::IdAlphabet::Conservative
        }
    }

    /// The native Claude Code analyzer reads this agent.
    #[must_use]
    pub fn is_claude(&self) -> bool {
        matches!(self.parser, Parser::Claude)
    }
}

/// Replaces every `{name}` in `template`; `None` when one of them has no value.
fn fill<'v>(template: &str, value: &impl Fn(&str) -> Option<&'v str>) -> Option<String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if PLACEHOLDERS.contains(&&after[..close]) => {
                out.push_str(value(&after[..close])?);
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

/// The placeholder names in `template` that hank does not know.
fn unknown_placeholders(template: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let name = &after[..close];
        if !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !PLACEHOLDERS.contains(&name)
        {
            out.push(name);
        }
        rest = &after[close + 1..];
    }
    out
}

// ---- the TOML shape -------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    name: String,
    #[serde(default)]
    description: String,
    program: String,
    program_env: Option<String>,
    #[serde(default = "default_version_args")]
    version_args: Vec<String>,
    install: Option<String>,
    #[serde(default = "default_prompt")]
    prompt: String,
    #[serde(default = "yes")]
    resume: bool,
    #[serde(default)]
    allowed_tools: bool,
    #[serde(default)]
    args: Vec<RawGroup>,
    #[serde(default)]
    permission_modes: BTreeMap<String, String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    pass_env: Vec<String>,
    output: RawOutput,
    #[serde(default)]
    errors: Vec<RawRule>,
    /// `[prices]`: read as [`Prices`] itself (a kind left out costs nothing).
    prices: Option<Prices>,
    #[serde(default)]
    sandbox: crate::sandbox::ProfileSandbox,
    tested: Option<String>,
}

/// Highest token price a profile may give (USD per million tokens).
pub const MAX_PRICE_PER_MTOK: f64 = 10_000.0;

fn default_version_args() -> Vec<String> {
    vec!["--version".to_owned()]
}
fn default_prompt() -> String {
    "stdin".to_owned()
}
fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    values: Vec<String>,
    when: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOutput {
    parser: Option<String>,
    format: Option<String>,
    /// `per_call` (default) or `session_total`.
    tokens: Option<String>,
    #[serde(default)]
    fields: BTreeMap<String, RawField>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawField {
    Path(String),
    Table { path: String, take: Option<String> },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    regex: Option<String>,
    path: Option<String>,
    kind: String,
    scope: Option<String>,
    reset_path: Option<String>,
    reset_daily: Option<String>,
}

/// The field names of `[output.fields]`.
pub const FIELD_NAMES: &[&str] = &[
    "text",
    "session_id",
    "error",
    "is_error",
    "cost_usd",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "num_turns",
    "edits",
    "commands",
];

/// Parses and checks a profile's TOML. `file` names it in errors (a path, or
/// `built-in profile NAME`), `stem` is the name the file is known by.
///
/// # Errors
/// A message naming the file and the key, and what was expected.
pub fn parse(
    text: &str,
    file: &str,
    stem: &str,
    origin: Origin,
) -> std::result::Result<Profile, String> {
    let raw: RawProfile = toml::from_str(text).map_err(|e| {
        let msg = e.message().trim().to_owned();
        match e.span().map(|s| line_of(text, s.start)) {
            Some(line) => format!("{file}: line {line}: {msg}"),
            None => format!("{file}: {msg}"),
        }
    })?;
    let bad = |key: &str, why: String| format!("{file}: `{key}`: {why}");
    if raw.name != stem {
        return Err(bad(
            "name",
            format!(
                "is {:?} but the file is named for {stem:?}; they must be the same",
                raw.name
            ),
        ));
    }
    if raw.program.trim().is_empty() {
        return Err(bad(
            "program",
            "expected a program name or path, got an empty text".into(),
        ));
    }
    let prompt = match raw.prompt.as_str() {
        "stdin" => PromptDelivery::Stdin,
        "argument" => PromptDelivery::Argument,
        "file" => PromptDelivery::File,
        other => {
            return Err(bad(
                "prompt",
                format!("expected stdin, argument or file, got {other:?}"),
            ));
        }
    };
    let mut args = Vec::new();
    for (i, g) in raw.args.iter().enumerate() {
        let when = match g.when.as_deref() {
            None => None,
            Some("live") => Some(When::Live),
            Some("json") => Some(When::Json),
            Some("text") => Some(When::Text),
            Some("resume") => Some(When::Resume),
            Some("fresh") => Some(When::Fresh),
            Some(other) => {
                return Err(bad(
                    &format!("args[{i}].when"),
                    format!("expected live, json, text, resume or fresh, got {other:?}"),
                ));
            }
        };
        for (j, v) in g.values.iter().enumerate() {
            if let Some(name) = unknown_placeholders(v).first() {
                return Err(bad(
                    &format!("args[{i}].values[{j}]"),
                    format!(
                        "unknown placeholder {{{name}}}; the placeholders are {}",
                        PLACEHOLDERS
                            .iter()
                            .map(|p| format!("{{{p}}}"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    ),
                ));
            }
        }
        args.push(ArgGroup {
            values: g.values.clone(),
            when,
        });
    }
    let uses = |p: &str| args.iter().any(|g| g.values.iter().any(|v| v.contains(p)));
    match prompt {
        PromptDelivery::Argument if !uses("{prompt}") => {
            return Err(bad(
                "prompt",
                "is \"argument\" but no args value holds {prompt}".into(),
            ));
        }
        PromptDelivery::File if !uses("{prompt_file}") => {
            return Err(bad(
                "prompt",
                "is \"file\" but no args value holds {prompt_file}".into(),
            ));
        }
        _ => {}
    }
    if raw.resume && !uses("{session}") {
        return Err(bad(
            "resume",
            "is true but no args value holds {session}; set resume = false if the CLI cannot resume"
                .into(),
        ));
    }
    if raw.allowed_tools && !uses("{allowed_tools}") {
        return Err(bad(
            "allowed_tools",
            "is true but no args value holds {allowed_tools}".into(),
        ));
    }

    let format = match raw.output.format.as_deref() {
        Some("json") => Some(MappedFormat::Json),
        Some("jsonl") => Some(MappedFormat::JsonLines),
        Some("text") => Some(MappedFormat::Text),
        None => None,
        Some(other) => {
            return Err(bad(
                "output.format",
                format!("expected json, jsonl or text, got {other:?}"),
            ));
        }
    };
    let mut fields = Fields::default();
    for (key, f) in &raw.output.fields {
        let (path, take) = match f {
            RawField::Path(p) => (p.as_str(), None),
            RawField::Table { path, take } => (path.as_str(), take.as_deref()),
        };
        let full = format!("output.fields.{key}");
        let take = match take {
            None => Take::Last,
            Some(t) => Take::parse(t).ok_or_else(|| {
                bad(
                    &format!("{full}.take"),
                    format!("expected first, last, sum, join, concat or count, got {t:?}"),
                )
            })?,
        };
        let compiled = FieldPath::parse(path, take)
            .map_err(|e| bad(&full, format!("not a JSONPath expression ({e}): {path}")))?;
        let slot = match key.as_str() {
            "text" => &mut fields.text,
            "session_id" => &mut fields.session_id,
            "error" => &mut fields.error,
            "is_error" => &mut fields.is_error,
            "cost_usd" => &mut fields.cost_usd,
            "input_tokens" => &mut fields.input_tokens,
            "output_tokens" => &mut fields.output_tokens,
            "cache_read_tokens" => &mut fields.cache_read_tokens,
            "cache_creation_tokens" => &mut fields.cache_creation_tokens,
            "num_turns" => &mut fields.num_turns,
            "edits" => &mut fields.edits,
            "commands" => &mut fields.commands,
            other => {
                return Err(bad(
                    &full,
                    format!(
                        "unknown field {other:?}; the fields are {}",
                        FIELD_NAMES.join(", ")
                    ),
                ));
            }
        };
        *slot = Some(compiled);
    }
    let mut rules = Vec::new();
    for (i, r) in raw.errors.iter().enumerate() {
        let key = |k: &str| format!("errors[{i}].{k}");
        let kind = RuleKind::parse(&r.kind).ok_or_else(|| {
            bad(
                &key("kind"),
                format!(
                    "expected one of {}, got {:?}",
                    RuleKind::NAMES.join(", "),
                    r.kind
                ),
            )
        })?;
        let (anywhere, at_end) = match r.scope.as_deref() {
            None | Some("error") => (false, false),
            Some("any") => (true, false),
            Some("end") => (false, true),
            Some(other) => {
                return Err(bad(
                    &key("scope"),
                    format!("expected error, any or end, got {other:?}"),
                ));
            }
        };
        let matcher = match (&r.regex, &r.path) {
            (Some(re), None) => {
                let re = Regex::new(re)
                    .map_err(|e| bad(&key("regex"), format!("not a regular expression: {e}")))?;
                if at_end {
                    Matcher::End(re)
                } else {
                    Matcher::Regex { re, anywhere }
                }
            }
            (None, Some(_)) if at_end => {
                return Err(bad(
                    &key("scope"),
                    "`end` reads the output's last lines: it needs a `regex`, not a `path`".into(),
                ));
            }
            (None, Some(p)) => Matcher::Path(FieldPath::parse(p, Take::Last).map_err(|e| {
                bad(
                    &key("path"),
                    format!("not a JSONPath expression ({e}): {p}"),
                )
            })?),
            _ => {
                return Err(bad(
                    &format!("errors[{i}]"),
                    "expected exactly one of `regex` and `path`".into(),
                ));
            }
        };
        let reset_path = r
            .reset_path
            .as_deref()
            .map(|p| {
                FieldPath::parse(p, Take::Last).map_err(|e| {
                    bad(
                        &key("reset_path"),
                        format!("not a JSONPath expression ({e}): {p}"),
                    )
                })
            })
            .transpose()?;
        let reset_daily = match r.reset_daily.as_deref() {
            None => None,
            Some(zone) => {
                jiff::tz::TimeZone::get(zone).map_err(|_| {
                    bad(
                        &key("reset_daily"),
                        format!(
                            "expected an IANA time zone such as America/Los_Angeles, got {zone:?}"
                        ),
                    )
                })?;
                Some(zone.to_owned())
            }
        };
        rules.push(ErrorRule {
            matcher,
            kind,
            reset_path,
            reset_daily,
        });
    }
    let parser = match raw.output.parser.as_deref() {
        Some("claude") => Parser::Claude,
        Some(other) => {
            return Err(bad(
                "output.parser",
                format!(
                    "the only parser is \"claude\" (hank's Claude Code analyzer), got {other:?}; leave it out to use the JSONPath fields"
                ),
            ));
        }
        None => {
            let Some(format) = format else {
                return Err(bad(
                    "output.format",
                    "missing: expected json, jsonl or text".into(),
                ));
            };
            if format != MappedFormat::Text && fields.text.is_none() {
                return Err(bad(
                    "output.fields.text",
                    "missing: hank needs the answer text (it holds the HANK_STATUS block)".into(),
                ));
            }
            let session_total_tokens = match raw.output.tokens.as_deref() {
                None | Some("per_call") => false,
                Some("session_total") => true,
                Some(other) => {
                    return Err(bad(
                        "output.tokens",
                        format!("expected per_call or session_total, got {other:?}"),
                    ));
                }
            };
            Parser::Mapped(Box::new(Mapping {
                format,
                fields,
                rules,
                session_total_tokens,
            }))
        }
    };
    if let Some(p) = raw.prices {
        for (key, v) in [
            ("prices.input", p.input),
            ("prices.output", p.output),
            ("prices.cache_read", p.cache_read),
            ("prices.cache_creation", p.cache_creation),
        ] {
            if !(v.is_finite() && (0.0..=MAX_PRICE_PER_MTOK).contains(&v)) {
                return Err(bad(
                    key,
                    format!(
                        "expected USD per million tokens, from 0 to {MAX_PRICE_PER_MTOK}, got {v}"
                    ),
                ));
            }
        }
    }
    Ok(Profile {
        name: raw.name,
        description: raw.description,
        program: raw.program.trim().to_owned(),
        program_env: raw.program_env.filter(|e| !e.trim().is_empty()),
        version_args: raw.version_args,
        install: raw.install,
        prompt,
        resume: raw.resume,
        allowed_tools: raw.allowed_tools,
        args,
        permission_modes: raw.permission_modes,
        env: raw.env,
        pass_env: raw.pass_env,
        parser,
        prices: raw.prices,
        sandbox: raw.sandbox,
        tested: raw.tested.filter(|t| !t.trim().is_empty()),
        origin,
    })
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Where a project's own profiles live.
#[must_use]
pub fn project_folder(project_dir: &Path) -> PathBuf {
    project_dir.join(".hank/agents")
}

fn builtin(name: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// The built-in profile `name` as hank ships it (no project file consulted).
///
/// # Errors
/// `name` is not a built-in profile.
pub fn load_builtin(name: &str) -> Result<Profile> {
    let text =
        builtin(name).ok_or_else(|| HankError::Internal(format!("no built-in profile {name}")))?;
    parse(
        text,
        &format!("built-in profile {name}"),
        name,
        Origin::Builtin,
    )
    .map_err(HankError::Internal)
}

/// The profile called `name`: `.hank/agents/NAME.toml` if the project has one, else the
/// built-in.
///
/// # Errors
/// An unknown name (listing the known ones), an unreadable file, or a bad profile (naming the
/// file and key).
pub fn load(name: &str, project_dir: &Path) -> Result<Profile> {
    if !valid_name(name) {
        return Err(HankError::usage(format!(
            "agent {name:?}: expected a profile name (letters, digits, - and _)"
        )));
    }
    let file = project_folder(project_dir).join(format!("{name}.toml"));
    match crate::fsread::read(
        &file,
        crate::fsread::CONFIG_LIMIT,
        crate::fsread::Follow::Yes,
    ) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).map_err(|_| {
                HankError::usage(format!("{}: not valid UTF-8 text", file.display()))
            })?;
            let origin = if builtin(name).is_some() {
                Origin::Overrides(file.clone())
            } else {
                Origin::Project(file.clone())
            };
            parse(&text, &file.display().to_string(), name, origin).map_err(HankError::usage)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match builtin(name) {
            Some(text) => parse(
                text,
                &format!("built-in profile {name}"),
                name,
                Origin::Builtin,
            )
            .map_err(HankError::Internal),
            None => Err(HankError::usage_hint(
                format!(
                    "unknown agent {name:?}: the built-in agents are {}",
                    BUILTIN
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                format!("or describe it in {}", file.display()),
            )),
        },
        Err(e) => Err(HankError::io("failed to read", &file, e)),
    }
}

/// Every profile hank knows here: the built-ins and the project's files, each with its profile
/// or the reason it cannot be used, sorted by name.
#[must_use]
pub fn list(project_dir: &Path) -> Vec<(String, std::result::Result<Profile, String>)> {
    let mut names: Vec<String> = BUILTIN.iter().map(|(n, _)| (*n).to_owned()).collect();
    if let Ok(dir) = std::fs::read_dir(project_folder(project_dir)) {
        for entry in dir.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "toml")
                && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
                && !names.iter().any(|n| n == stem)
            {
                names.push(stem.to_owned());
            }
        }
    }
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let p = load(&n, project_dir).map_err(|e| e.to_string());
            (n, p)
        })
        .collect()
}

/// A profile with its program found: what the loop runs.
#[derive(Debug, Clone)]
pub struct Agent {
    pub profile: Profile,
    pub command: AgentCommand,
}

impl Agent {
    /// The profile's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.profile.name
    }

    /// The profile's `[env]` as pairs for the spawn.
    #[must_use]
    pub fn env(&self) -> Vec<(String, String)> {
        self.profile
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// The program a profile runs here: `CLAUDE_CODE_CMD` (a hank setting: flag, environment or
/// `.hankrc`) for a profile whose `program_env` names it, else the `program_env` variable when
/// set, else the profile's `program`.
#[must_use]
pub fn program_of(profile: &Profile, s: &Settings) -> Sourced<String> {
    let env = profile.program_env.as_deref();
    if env == Some("CLAUDE_CODE_CMD") && s.claude_cmd.source != Source::Default {
        return s.claude_cmd.clone();
    }
    if let Some(var) = env
        && let Ok(v) = std::env::var(var)
        && !v.trim().is_empty()
    {
        return Sourced {
            value: v,
            source: Source::Env,
        };
    }
    Sourced {
        value: profile.program.clone(),
        source: Source::Default,
    }
}

/// Loads the profile `name` and finds its program.
///
/// # Errors
/// The profile cannot be loaded, or its program is not installed (with how to install it).
pub fn resolve(name: &str, s: &Settings) -> Result<Agent> {
    let profile = load(name, &s.project_dir)?;
    let program = program_of(&profile, s);
    let hint = match (&profile.install, &profile.program_env) {
        (Some(i), Some(e)) => format!("install it (`{i}`) or set {e} to its path"),
        (Some(i), None) => format!("install it (`{i}`)"),
        (None, Some(e)) => format!("install it or set {e} to its path"),
        (None, None) => format!("install `{}`", profile.program),
    };
    let command =
        crate::settings::resolve_program(&program, &s.project_dir, &hint).map_err(|e| match e {
            HankError::Usage { message, hint } => HankError::Usage {
                message: format!("agent {name}: {message}"),
                hint,
            },
            other => other,
        })?;
    Ok(Agent { profile, command })
}

/// The independent reviewer (`REVIEW_AGENT`): its profile, and its program from
/// `REVIEW_AGENT_CMD` when set (else as for [`resolve`]). `None`: no reviewer.
///
/// # Errors
/// As [`resolve`], named as the reviewer's.
pub fn resolve_reviewer(s: &Settings) -> Result<Option<Agent>> {
    let Some(name) = s.review_agent.value.as_deref() else {
        return Ok(None);
    };
    let profile = load(name, &s.project_dir)?;
    let program = match &s.review_agent_cmd.value {
        Some(cmd) => Sourced {
            value: cmd.clone(),
            source: s.review_agent_cmd.source.clone(),
        },
        None => program_of(&profile, s),
    };
    let hint = format!(
        "install `{}` or set REVIEW_AGENT_CMD to its path",
        profile.program
    );
    let command =
        crate::settings::resolve_program(&program, &s.project_dir, &hint).map_err(|e| match e {
            HankError::Usage { message, hint } => HankError::Usage {
                message: format!("REVIEW_AGENT {name}: {message}"),
                hint,
            },
            other => other,
        })?;
    Ok(Some(Agent { profile, command }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::argv::build_argv;

    fn builtin_profile(name: &str) -> Profile {
        match load(name, Path::new("/nonexistent")) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }

    /// The claude profile gives byte-for-byte the argv hank always built, for every
    /// combination of the settings it depends on.
    #[test]
    fn claude_profile_argv_is_the_native_argv() {
        let claude = builtin_profile("claude");
        let tools = vec!["Read".to_owned(), "Bash(git add *)".to_owned()];
        let none: Vec<String> = Vec::new();
        let mut checked = 0;
        for live in [false, true] {
            for format in [OutputFormat::Json, OutputFormat::Text] {
                for session in [None, Some("4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a")] {
                    for model in [None, Some("opus")] {
                        for mode in [None, Some("manual"), Some("acceptEdits")] {
                            for allowed in [&none, &tools] {
                                let input = CallInput {
                                    live,
                                    output_format: format,
                                    session,
                                    model,
                                    permission_mode: mode,
                                    allowed_tools: allowed,
                                    prompt: None,
                                    prompt_file: None,
                                };
                                let native = build_argv(&[], &input);
                                assert_eq!(claude.argv(&input), native);
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 96);
    }

    /// Every built-in profile declares its client's configuration apart from its state
    /// (issue 47): Claude Code's `~/.claude.json`, settings and memory are configuration, never
    /// state; `write` still reads as `state`; an unknown key of `[sandbox]` is refused.
    #[test]
    fn profiles_declare_their_clients_configuration_apart_from_its_state() {
        for (name, _) in BUILTIN {
            let p = builtin_profile(name);
            assert!(!p.sandbox.state.is_empty(), "{name}");
            assert!(!p.sandbox.config.is_empty(), "{name}");
            assert!(!p.sandbox.api.is_empty(), "{name}");
            assert!(p.tested.is_some(), "{name}: says how it was tested");
        }
        let claude = builtin_profile("claude").sandbox;
        for config in [
            "~/.claude.json",
            "~/.claude/settings.json",
            "~/.claude/CLAUDE.md",
            "~/.claude/projects/*/memory/",
        ] {
            assert!(claude.config.iter().any(|c| c == config), "{config}");
            assert!(!claude.state.iter().any(|s| s == config), "{config}");
        }
        let base = "name = \"x\"\nprogram = \"x\"\nresume = false\n[output]\nformat = \"json\"\n[output.fields]\ntext = \"$.r\"\n";
        let old = format!("{base}[sandbox]\nwrite = [\"~/.x/\"]\n");
        let p = parse(&old, "old.toml", "x", Origin::Builtin).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.sandbox.state, ["~/.x/"]);
        let unknown = format!("{base}[sandbox]\nreadonly = [\"~/.x/\"]\n");
        let err = parse(&unknown, "bad.toml", "x", Origin::Builtin)
            .err()
            .unwrap_or_default();
        assert!(err.contains("readonly"), "{err}");
    }

    /// The example profile of `docs/agent-profiles.md` is a valid profile.
    #[test]
    fn the_readme_example_profile_parses() {
        let readme = include_str!("../../docs/agent-profiles.md");
        let section = readme
            .split("### The profile format")
            .nth(1)
            .unwrap_or_else(|| panic!("docs/agent-profiles.md has no profile format section"));
        let start = section.find("```toml\n").map(|i| i + 8).unwrap_or(0);
        let len = section[start..].find("```").unwrap_or(0);
        let example = &section[start..start + len];
        let p = parse(example, "README example", "mycli", Origin::Builtin)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(p.parser, Parser::Mapped(_)));
        assert_eq!(p.args.len(), 3);
    }

    /// The JSONPath fields of the claude profile say where the native analyzer finds the same
    /// facts: over every recorded result object of subtype `success`, both read the same
    /// answer. (The error subtypes — `error_during_execution`, `error_max_turns` — are among
    /// what only the native analyzer reads.)
    #[test]
    fn claude_profile_fields_agree_with_the_native_analyzer() {
        use crate::analysis::{Clock, RunFacts, analyze_bytes_in, analyze_mapped};
        let text = BUILTIN[0].1.replace("parser = \"claude\"", "");
        let p = parse(&text, "claude.toml", "claude", Origin::Builtin)
            .unwrap_or_else(|e| panic!("{e}"));
        let Parser::Mapped(mapping) = &p.parser else {
            panic!("without `parser` the claude profile is read through its fields")
        };
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/claude");
        let clock = Clock::utc(jiff::Timestamp::UNIX_EPOCH);
        let mut compared = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{e}")) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
            let is_result = serde_json::from_slice::<serde_json::Value>(&bytes)
                .is_ok_and(|v| v["type"] == "result" && v["subtype"] == "success");
            if !is_result {
                continue;
            }
            let facts = RunFacts {
                exit_code: Some(0),
                ..RunFacts::default()
            };
            let native = analyze_bytes_in(&bytes, b"", &facts, &clock);
            let mapped = analyze_mapped(&bytes[..], b"", &facts, &clock, mapping);
            let name = path.display();
            assert_eq!(mapped.session_id, native.session_id, "{name}");
            assert_eq!(mapped.tokens, native.tokens, "{name}");
            assert!((mapped.cost_usd - native.cost_usd).abs() < 1e-12, "{name}");
            assert_eq!(mapped.outcome, native.outcome, "{name}");
            assert_eq!(mapped.status, native.status, "{name}");
            compared += 1;
        }
        assert!(compared >= 5, "only {compared} result fixtures");
    }

    #[test]
    fn every_builtin_profile_parses() {
        for (name, _) in BUILTIN {
            let p = builtin_profile(name);
            assert_eq!(p.name, *name);
            assert_eq!(p.origin, Origin::Builtin);
        }
    }

    const MINIMAL: &str = r#"
name = "demo"
program = "demo-cli"
prompt = "argument"
resume = false
[[args]]
values = ["run", "--json"]
[[args]]
values = ["--model", "{model}"]
[[args]]
values = ["{prompt}"]
[output]
format = "json"
[output.fields]
text = "$.answer"
"#;

    fn parse_demo(text: &str) -> std::result::Result<Profile, String> {
        parse(
            text,
            "demo.toml",
            "demo",
            Origin::Project(PathBuf::from("demo.toml")),
        )
    }

    #[test]
    fn groups_with_unset_placeholders_are_dropped() {
        let p = parse_demo(MINIMAL).unwrap_or_else(|e| panic!("{e}"));
        let base = CallInput {
            prompt: Some("do it"),
            ..CallInput::json(Some("s1"))
        };
        assert_eq!(p.argv(&base), ["run", "--json", "do it"]);
        let with_model = CallInput {
            model: Some("m1"),
            ..base
        };
        assert_eq!(
            p.argv(&with_model),
            ["run", "--json", "--model", "m1", "do it"]
        );
    }

    /// A session id the CLI would not have made never reaches the argv: the call is fresh.
    #[test]
    fn forged_session_ids_never_reach_the_argv() {
        let ten_kb = "a".repeat(10 * 1024);
        let forged = [
            "--dangerously-skip-permissions",
            "-p",
            "$(touch pwned)",
            "x y",
            ten_kb.as_str(),
            "",
        ];
        for name in ["claude", "codex", "gemini", "opencode", "copilot", "cursor"] {
            let p = builtin_profile(name);
            let fresh = p.argv(&CallInput::json(None));
            for id in forged {
                let argv = p.argv(&CallInput::json(Some(id)));
                assert_eq!(argv, fresh, "{name}: {:?}", &id[..id.len().min(30)]);
            }
            let good = "4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a";
            let argv = p.argv(&CallInput::json(Some(good)));
            assert!(argv.iter().any(|a| a.contains(good)), "{name}: {argv:?}");
        }
        // Other CLIs: their own (non-UUID) ids go through.
        let p = builtin_profile("opencode");
        let argv = p.argv(&CallInput::json(Some("ses_3f9a1b2c")));
        assert!(argv.iter().any(|a| a == "ses_3f9a1b2c"), "{argv:?}");
    }

    /// Bad profiles are refused with the file, the key and what was expected.
    #[test]
    fn bad_profiles_name_the_file_and_key() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "name = \"demo\"",
                "name = \"other\"",
                "demo.toml: `name`: is \"other\"",
            ),
            (
                "prompt = \"argument\"",
                "prompt = \"pipe\"",
                "`prompt`: expected stdin, argument or file, got \"pipe\"",
            ),
            (
                "values = [\"{prompt}\"]",
                "values = [\"-\"]",
                "`prompt`: is \"argument\" but no args value holds {prompt}",
            ),
            (
                "values = [\"--model\", \"{model}\"]",
                "values = [\"--model\", \"{modle}\"]",
                "`args[1].values[1]`: unknown placeholder {modle}",
            ),
            (
                "format = \"json\"",
                "format = \"yaml\"",
                "`output.format`: expected json, jsonl or text, got \"yaml\"",
            ),
            (
                "text = \"$.answer\"",
                "text = \"$.answer[\"",
                "`output.fields.text`: not a JSONPath expression",
            ),
            (
                "text = \"$.answer\"",
                "txt = \"$.answer\"",
                "`output.fields.txt`: unknown field",
            ),
            (
                "text = \"$.answer\"",
                "text = { path = \"$.a\", take = \"max\" }",
                "`output.fields.text.take`: expected first, last, sum, join, concat or count",
            ),
            (
                "resume = false",
                "resume = true",
                "`resume`: is true but no args value holds {session}",
            ),
            (
                "program = \"demo-cli\"",
                "program = \"demo-cli\"\ncolour = 1",
                "demo.toml: line",
            ),
        ];
        for (from, to, expected) in cases {
            assert!(MINIMAL.contains(from), "{from}");
            let text = MINIMAL.replacen(from, to, 1);
            let err = parse_demo(&text)
                .err()
                .unwrap_or_else(|| panic!("{to} was accepted"));
            assert!(err.contains(expected), "{to}: {err}");
        }
        // Tables appended to the profile.
        let appended: &[(&str, &str)] = &[
            (
                "[[errors]]\nregex = \"(\"\nkind = \"usage_limit\"\n",
                "`errors[0].regex`: not a regular expression",
            ),
            (
                "[[errors]]\nregex = \"x\"\nkind = \"quota\"\n",
                "`errors[0].kind`: expected one of usage_limit",
            ),
            (
                "[[errors]]\nkind = \"auth\"\n",
                "`errors[0]`: expected exactly one of `regex` and `path`",
            ),
            (
                "[[errors]]\npath = \"$.x\"\nkind = \"auth\"\nscope = \"end\"\n",
                "`errors[0].scope`: `end` reads the output's last lines",
            ),
            (
                "[[errors]]\nregex = \"x\"\nkind = \"auth\"\nscope = \"tail\"\n",
                "`errors[0].scope`: expected error, any or end, got \"tail\"",
            ),
            (
                "[prices]\ninput = 3.0\ncache_write = 1.0\n",
                "unknown field `cache_write`",
            ),
            (
                "[prices]\ncache_creation = 20000.0\n",
                "`prices.cache_creation`: expected USD per million tokens",
            ),
        ];
        for (rest, expected) in appended {
            let err = parse_demo(&format!("{MINIMAL}\n{rest}"))
                .err()
                .unwrap_or_else(|| panic!("{rest} was accepted"));
            assert!(err.contains(expected), "{rest}: {err}");
        }
    }

    /// `[prices]` is read as `charge::Prices`: a kind left out costs nothing (an unknown key or
    /// a price out of range: `bad_profiles_name_the_file_and_key`).
    #[test]
    fn prices_left_out_cost_nothing() {
        let priced = format!("{MINIMAL}\n[prices]\ninput = 3.0\ncache_read = 0.3\n");
        let p = parse_demo(&priced).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            p.prices,
            Some(Prices {
                input: 3.0,
                output: 0.0,
                cache_read: 0.3,
                cache_creation: 0.0,
            })
        );
        let p = parse_demo(MINIMAL).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.prices, None);
    }

    #[test]
    fn a_project_file_overrides_a_builtin_and_unknown_names_list_the_builtins() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let folder = project_folder(dir.path());
        std::fs::create_dir_all(&folder).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(folder.join("demo.toml"), MINIMAL).unwrap_or_else(|e| panic!("{e}"));
        let p = load("demo", dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(p.origin, Origin::Project(_)));
        let err = load("nope", dir.path())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("unknown agent \"nope\": the built-in agents are claude"),
            "{err}"
        );
        let claude = builtin_profile("claude").args.len();
        let mine = format!(
            "{}\n[[args]]\nvalues = [\"--extra\"]\n",
            crate::agent::profile::BUILTIN[0].1
        );
        std::fs::write(folder.join("claude.toml"), mine).unwrap_or_else(|e| panic!("{e}"));
        let p = load("claude", dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(p.origin, Origin::Overrides(_)));
        assert_eq!(p.args.len(), claude + 1);
        let names: Vec<String> = list(dir.path()).into_iter().map(|(n, _)| n).collect();
        assert!(names.contains(&"demo".to_owned()) && names.contains(&"claude".to_owned()));
        assert!(load("../x", dir.path()).is_err());
    }
}
