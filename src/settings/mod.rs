//! Configuration: `.hankrc` + environment + flags → validated [`Settings`], each value with
//! the place it came from.
//!
//! Precedence: **command-line flag > environment variable > `.hankrc` > built-in default.**
//! Every `hank run` flag has a `.hankrc` key and an environment variable of the same name
//! ([`KEYS`]). `.hankrc` is `KEY="VALUE"` lines and `#` comments; hank parses it itself and
//! never hands it to a shell. Resolution ([`resolve`]) is pure: the caller passes the flags,
//! an environment lookup and the `.hankrc` text, which keeps it testable with tables.

pub mod flags;

pub use flags::Flags;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{HankError, Result};
use crate::policy::breaker::BreakerConfig;
use crate::policy::budget::BudgetLimits;
use crate::policy::decide::{DecideConfig, UsageLimitPolicy};

/// The tools the agent may use unless `ALLOWED_TOOLS` says otherwise: the file tools, Task,
/// TodoWrite and the everyday git subcommands (never `Bash(git *)` wholesale, so the agent
/// cannot `git clean` or `git rm` hank's own files). `enable` adds the project's detected
/// build/test commands and writes the list into `.hankrc`.
pub const DEFAULT_ALLOWED_TOOLS: &[&str] = &[
    "Write",
    "Read",
    "Edit",
    "MultiEdit",
    "Glob",
    "Grep",
    "Task",
    "TodoWrite",
    "Bash(git add *)",
    "Bash(git commit *)",
    "Bash(git diff *)",
    "Bash(git log *)",
    "Bash(git status *)",
    "Bash(git push *)",
    "Bash(git pull *)",
    "Bash(git fetch *)",
    "Bash(git checkout *)",
    "Bash(git branch *)",
    "Bash(git stash *)",
    "Bash(git merge *)",
    "Bash(git tag *)",
];

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Built into hank.
    Default,
    /// A line of the project's `.hankrc`.
    Hankrc { line: usize },
    /// An environment variable of the key's name.
    Env,
    /// A command-line flag.
    Flag(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::Hankrc { line } => write!(f, ".hankrc line {line}"),
            Self::Env => f.write_str("environment"),
            Self::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

/// A configuration key: its name, flag, default (as text) and meaning. The README's table is
/// generated from the same facts.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    pub name: &'static str,
    pub flag: Option<&'static str>,
    pub default: &'static str,
    pub help: &'static str,
}

const fn key(
    name: &'static str,
    flag: Option<&'static str>,
    default: &'static str,
    help: &'static str,
) -> Key {
    Key {
        name,
        flag,
        default,
        help,
    }
}

/// Every key hank reads from `.hankrc` / the environment.
pub const KEYS: &[Key] = &[
    key(
        "MAX_CALLS_PER_HOUR",
        Some("--calls"),
        "100",
        "agent calls in any rolling hour (hard cap)",
    ),
    key(
        "MAX_TOKENS_PER_HOUR",
        Some("--max-tokens-per-hour"),
        "0",
        "tokens in any rolling hour, 0 = off",
    ),
    key(
        "PROMPT_FILE",
        Some("--prompt"),
        ".hank/PROMPT.md",
        "prompt sent on stdin every loop",
    ),
    key(
        "CLAUDE_TIMEOUT_MINUTES",
        Some("--timeout"),
        "15",
        "per-call timeout: minutes, or 90s/2m/1h",
    ),
    key(
        "LIVE_OUTPUT",
        Some("--live"),
        "false",
        "stream-json with live progress",
    ),
    key(
        "VERBOSE",
        Some("--verbose"),
        "false",
        "more detail on stderr",
    ),
    key(
        "CLAUDE_OUTPUT_FORMAT",
        Some("--output-format"),
        "json",
        "json or text",
    ),
    key(
        "ALLOWED_TOOLS",
        Some("--allowed-tools"),
        "(file tools, Task, TodoWrite, git subcommands)",
        "comma-separated tool list",
    ),
    key(
        "CLAUDE_PERMISSION_MODE",
        Some("--permission-mode"),
        "(unset)",
        "acceptEdits, auto, bypassPermissions, default (or manual), dontAsk, plan",
    ),
    key(
        "CLAUDE_MODEL",
        Some("--model"),
        "(unset)",
        "model alias or name",
    ),
    key(
        "SESSION_CONTINUITY",
        Some("--no-continue"),
        "true",
        "resume the agent session across loops",
    ),
    key(
        "SESSION_EXPIRY_HOURS",
        Some("--session-expiry"),
        "24",
        "do not resume sessions older than this",
    ),
    key(
        "MAX_LOOPS",
        Some("--max-loops"),
        "0",
        "loops in this run, 0 = unlimited",
    ),
    key(
        "MAX_COST_USD",
        Some("--max-cost"),
        "0",
        "USD spent in this run, 0 = unlimited",
    ),
    key(
        "ON_USAGE_LIMIT",
        Some("--on-usage-limit"),
        "wait",
        "wait for the reset, or exit",
    ),
    key(
        "CLAUDE_CODE_CMD",
        Some("--claude-cmd"),
        "claude",
        "agent command: path or name on PATH",
    ),
    key(
        "CB_AUTO_RESET",
        Some("--auto-reset-circuit"),
        "false",
        "reset an OPEN circuit at start",
    ),
    key(
        "ENABLE_NOTIFICATIONS",
        Some("--notify"),
        "false",
        "desktop notification at the end",
    ),
    key(
        "CB_NO_PROGRESS_THRESHOLD",
        None,
        "3",
        "loops without progress before OPEN",
    ),
    key(
        "CB_SAME_ERROR_THRESHOLD",
        None,
        "5",
        "loops with the same error before OPEN",
    ),
    key(
        "CB_FAILURE_THRESHOLD",
        None,
        "5",
        "consecutive failed calls before OPEN",
    ),
    key(
        "CB_OUTPUT_DECLINE_THRESHOLD",
        None,
        "70",
        "output shrink (%) without progress before OPEN",
    ),
    key(
        "CB_PERMISSION_DENIAL_THRESHOLD",
        None,
        "2",
        "consecutive loops with denials before stopping",
    ),
    key(
        "CB_COOLDOWN_MINUTES",
        None,
        "30",
        "OPEN → HALF_OPEN after this long (at a later start)",
    ),
    key(
        "MAX_CONSECUTIVE_TEST_LOOPS",
        None,
        "3",
        "test-only loops in a row before stopping",
    ),
    key(
        "RETRY_BACKOFF_SECONDS",
        None,
        "30",
        "base of the backoff after a failed call (cap 15 min)",
    ),
    key("LOOP_DELAY_SECONDS", None, "0", "pause between loops"),
    key(
        "OPTIONAL_SECTIONS",
        None,
        "Optional,Future,Nice to Have",
        "fix_plan sections that need not be done",
    ),
];

/// Keys other hank commands write into `.hankrc` (informational for the loop).
pub const INFO_KEYS: &[&str] = &[
    "PROJECT_NAME",
    "PROJECT_TYPE",
    "TASK_SOURCES",
    "GITHUB_TASK_LABEL",
    "GITHUB_LABEL",
    "PRD_FILE",
    "BEADS_FILTER",
    "GITHUB_TASK_LIMIT",
];

/// How the agent prints its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Json,
    Text,
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
}

/// The validated settings of one `hank run`.
#[derive(Debug, Clone)]
pub struct Settings {
    pub project_dir: PathBuf,
    pub max_calls_per_hour: Sourced<u32>,
    pub max_tokens_per_hour: Sourced<u64>,
    pub prompt_file: Sourced<PathBuf>,
    pub timeout: Sourced<Duration>,
    pub live: Sourced<bool>,
    pub verbose: Sourced<bool>,
    pub output_format: Sourced<OutputFormat>,
    pub allowed_tools: Sourced<Vec<String>>,
    pub permission_mode: Sourced<Option<String>>,
    pub model: Sourced<Option<String>>,
    pub session_continuity: Sourced<bool>,
    pub session_expiry_hours: Sourced<u32>,
    pub max_loops: Sourced<u64>,
    pub max_cost_usd: Sourced<f64>,
    pub on_usage_limit: Sourced<UsageLimitPolicy>,
    pub claude_cmd: Sourced<String>,
    pub auto_reset_circuit: Sourced<bool>,
    pub notify: Sourced<bool>,
    pub cb_no_progress: Sourced<u32>,
    pub cb_same_error: Sourced<u32>,
    pub cb_failure: Sourced<u32>,
    pub cb_output_decline: Sourced<u32>,
    pub cb_permission_denial: Sourced<u32>,
    pub cb_cooldown_minutes: Sourced<u32>,
    pub max_consecutive_test_loops: Sourced<u32>,
    pub retry_backoff_seconds: Sourced<u64>,
    pub loop_delay_seconds: Sourced<u64>,
    pub optional_sections: Sourced<Vec<String>>,
    /// `--dry-run` (flag only).
    pub dry_run: bool,
    /// `--json` (flag only).
    pub json: bool,
}

impl Settings {
    /// The breaker thresholds.
    #[must_use]
    pub fn breaker_config(&self) -> BreakerConfig {
        BreakerConfig {
            no_progress_threshold: self.cb_no_progress.value,
            same_error_threshold: self.cb_same_error.value,
            failure_threshold: self.cb_failure.value,
            output_decline_pct: self.cb_output_decline.value,
            cooldown_minutes: self.cb_cooldown_minutes.value,
        }
    }

    /// The call/token budget.
    #[must_use]
    pub fn budget_limits(&self) -> BudgetLimits {
        BudgetLimits {
            max_calls_per_hour: self.max_calls_per_hour.value,
            max_tokens_per_hour: self.max_tokens_per_hour.value,
        }
    }

    /// The exit-decision settings.
    #[must_use]
    pub fn decide_config(&self) -> DecideConfig {
        DecideConfig {
            max_loops: self.max_loops.value,
            max_cost_usd: self.max_cost_usd.value,
            permission_denial_threshold: self.cb_permission_denial.value,
            max_consecutive_test_loops: self.max_consecutive_test_loops.value,
            on_usage_limit: self.on_usage_limit.value,
            retry_backoff_base_secs: self.retry_backoff_seconds.value,
            allowed_tools: self.allowed_tools.value.clone(),
        }
    }

    /// The prompt file, absolute.
    #[must_use]
    pub fn prompt_path(&self) -> PathBuf {
        self.project_dir.join(&self.prompt_file.value)
    }

    /// `(key, value, source)` for every key, for `--dry-run` and `hank doctor`.
    #[must_use]
    pub fn describe(&self) -> Vec<(&'static str, String, String)> {
        fn row<T: fmt::Debug>(k: &'static str, v: &Sourced<T>) -> (&'static str, String, String) {
            (k, format!("{:?}", v.value), v.source.to_string())
        }
        let mut rows = vec![
            row("MAX_CALLS_PER_HOUR", &self.max_calls_per_hour),
            row("MAX_TOKENS_PER_HOUR", &self.max_tokens_per_hour),
            (
                "PROMPT_FILE",
                self.prompt_file.value.display().to_string(),
                self.prompt_file.source.to_string(),
            ),
            (
                "CLAUDE_TIMEOUT_MINUTES",
                format_duration(self.timeout.value),
                self.timeout.source.to_string(),
            ),
            row("LIVE_OUTPUT", &self.live),
            row("VERBOSE", &self.verbose),
            row("CLAUDE_OUTPUT_FORMAT", &self.output_format),
            (
                "ALLOWED_TOOLS",
                self.allowed_tools.value.join(","),
                self.allowed_tools.source.to_string(),
            ),
            row("CLAUDE_PERMISSION_MODE", &self.permission_mode),
            row("CLAUDE_MODEL", &self.model),
            row("SESSION_CONTINUITY", &self.session_continuity),
            row("SESSION_EXPIRY_HOURS", &self.session_expiry_hours),
            row("MAX_LOOPS", &self.max_loops),
            row("MAX_COST_USD", &self.max_cost_usd),
            row("ON_USAGE_LIMIT", &self.on_usage_limit),
            row("CLAUDE_CODE_CMD", &self.claude_cmd),
            row("CB_AUTO_RESET", &self.auto_reset_circuit),
            row("ENABLE_NOTIFICATIONS", &self.notify),
            row("CB_NO_PROGRESS_THRESHOLD", &self.cb_no_progress),
            row("CB_SAME_ERROR_THRESHOLD", &self.cb_same_error),
            row("CB_FAILURE_THRESHOLD", &self.cb_failure),
            row("CB_OUTPUT_DECLINE_THRESHOLD", &self.cb_output_decline),
            row("CB_PERMISSION_DENIAL_THRESHOLD", &self.cb_permission_denial),
            row("CB_COOLDOWN_MINUTES", &self.cb_cooldown_minutes),
            row(
                "MAX_CONSECUTIVE_TEST_LOOPS",
                &self.max_consecutive_test_loops,
            ),
            row("RETRY_BACKOFF_SECONDS", &self.retry_backoff_seconds),
            row("LOOP_DELAY_SECONDS", &self.loop_delay_seconds),
        ];
        rows.push((
            "OPTIONAL_SECTIONS",
            self.optional_sections.value.join(","),
            self.optional_sections.source.to_string(),
        ));
        rows
    }
}

/// Formats a duration the way the timeout flag accepts it.
#[must_use]
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// One `KEY=VALUE` assignment of a `.hankrc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RcEntry {
    pub value: String,
    pub line: usize,
}

/// Parses `.hankrc` text. `file` names the file in errors. Accepts `KEY="VALUE"`,
/// `KEY='VALUE'`, `KEY=VALUE` (a ` #` starts a comment after an unquoted value), an optional
/// leading `export `, blank lines and `#` comments. Unknown keys are errors (a typo must not
/// silently fall back to a default), naming the line.
pub fn parse_hankrc(text: &str, file: &Path) -> Result<BTreeMap<String, RcEntry>> {
    let mut out = BTreeMap::new();
    let known = |k: &str| KEYS.iter().any(|key| key.name == k) || INFO_KEYS.contains(&k);
    for (idx, raw) in text.lines().enumerate() {
        let line_no = idx + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").map_or(line, str::trim_start);
        let bad = |what: &str| {
            HankError::usage_hint(
                format!("{} line {line_no}: {what}", file.display()),
                "lines look like KEY=\"VALUE\"; `#` starts a comment",
            )
        };
        let Some((k, v)) = line.split_once('=') else {
            return Err(bad(&format!(
                "expected KEY=\"VALUE\", found `{}`",
                clip(line, 60)
            )));
        };
        let k = k.trim();
        if k.is_empty()
            || !k
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(bad(&format!("`{}` is not a valid key name", clip(k, 60))));
        }
        if !known(k) {
            let hint = suggest(k).map_or_else(
                || "run `hank doctor` to see every key".to_string(),
                |s| format!("did you mean {s}?"),
            );
            return Err(HankError::usage_hint(
                format!("{} line {line_no}: unknown key {k}", file.display()),
                hint,
            ));
        }
        let v = v.trim();
        let value = if let Some(rest) = v.strip_prefix('"') {
            let Some(end) = rest.find('"') else {
                return Err(bad("missing closing \""));
            };
            check_tail(&rest[end + 1..])
                .map_err(|()| bad("unexpected text after the closing quote"))?;
            rest[..end].to_string()
        } else if let Some(rest) = v.strip_prefix('\'') {
            let Some(end) = rest.find('\'') else {
                return Err(bad("missing closing '"));
            };
            check_tail(&rest[end + 1..])
                .map_err(|()| bad("unexpected text after the closing quote"))?;
            rest[..end].to_string()
        } else {
            let v = match v.find(" #") {
                Some(i) => &v[..i],
                None => v,
            };
            if v.contains('$') || v.contains('`') {
                return Err(bad(
                    "values are not expanded by a shell; write the value literally",
                ));
            }
            v.trim().to_string()
        };
        out.insert(
            k.to_string(),
            RcEntry {
                value,
                line: line_no,
            },
        );
    }
    Ok(out)
}

fn check_tail(tail: &str) -> std::result::Result<(), ()> {
    let t = tail.trim();
    if t.is_empty() || t.starts_with('#') {
        Ok(())
    } else {
        Err(())
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(n).collect();
        out.push('…');
        out
    }
}

fn suggest(unknown: &str) -> Option<&'static str> {
    KEYS.iter()
        .map(|k| (edit_distance(unknown, k.name), k.name))
        .filter(|(d, _)| *d <= 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The layers a value can come from.
pub struct Layers<'a> {
    /// `.hankrc` entries (already parsed) and the file's path for messages.
    pub rc: &'a BTreeMap<String, RcEntry>,
    pub rc_path: &'a Path,
    /// Environment lookup.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

struct Resolver<'a> {
    layers: Layers<'a>,
}

impl Resolver<'_> {
    /// Looks a key up in flag → env → rc order and parses it.
    fn get<T>(
        &self,
        name: &'static str,
        flag: Option<(&'static str, Option<&str>)>,
        default: T,
        expected: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Sourced<T>> {
        if let Some((flag_name, Some(raw))) = flag {
            return parse(raw)
                .map(|value| Sourced {
                    value,
                    source: Source::Flag(flag_name),
                })
                .ok_or_else(|| {
                    HankError::usage(format!(
                        "invalid value `{raw}` for {flag_name}: expected {expected}"
                    ))
                });
        }
        if let Some(raw) = (self.layers.env)(name).filter(|v| !v.trim().is_empty()) {
            return parse(raw.trim())
                .map(|value| Sourced {
                    value,
                    source: Source::Env,
                })
                .ok_or_else(|| {
                    HankError::usage(format!(
                        "invalid value `{raw}` in environment variable {name}: expected {expected}"
                    ))
                });
        }
        if let Some(entry) = self.layers.rc.get(name) {
            return parse(&entry.value)
                .map(|value| Sourced {
                    value,
                    source: Source::Hankrc { line: entry.line },
                })
                .ok_or_else(|| {
                    HankError::usage(format!(
                        "{} line {}: invalid value `{}` for {name}: expected {expected}",
                        self.layers.rc_path.display(),
                        entry.line,
                        entry.value
                    ))
                });
        }
        Ok(Sourced {
            value: default,
            source: Source::Default,
        })
    }

    /// A boolean flag: present on the command line means true.
    fn flag_bool(
        &self,
        name: &'static str,
        flag: &'static str,
        set: bool,
        default: bool,
    ) -> Result<Sourced<bool>> {
        let raw = set.then_some("true");
        self.get(
            name,
            Some((flag, raw)),
            default,
            "true or false",
            parse_bool,
        )
    }
}

/// Parses true/false, yes/no, on/off, 1/0 (any case).
#[must_use]
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Parses a timeout: a bare integer is minutes; `90s`, `2m`, `1h`, `1h30m` also work. Zero is
/// refused.
#[must_use]
pub fn parse_timeout(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if s.chars().all(|c| c.is_ascii_digit()) {
        let m: u64 = s.parse().ok()?;
        return if m > 0 {
            m.checked_mul(60).map(Duration::from_secs)
        } else {
            None
        };
    }
    let mut total: u64 = 0;
    let mut num = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
        } else {
            let n: u64 = num.parse().ok()?;
            num.clear();
            let mul = match c {
                's' => 1,
                'm' => 60,
                'h' => 3600,
                _ => return None,
            };
            total = total.checked_add(n.checked_mul(mul)?)?;
        }
    }
    if !num.is_empty() || total == 0 {
        return None;
    }
    Some(Duration::from_secs(total))
}

fn parse_u32_min(min: u32) -> impl Fn(&str) -> Option<u32> {
    move |s| s.trim().parse::<u32>().ok().filter(|v| *v >= min)
}

fn parse_u64(s: &str) -> Option<u64> {
    s.trim().parse::<u64>().ok()
}

fn parse_list(s: &str) -> Option<Vec<String>> {
    let items = split_tools(s);
    (!items.is_empty()).then_some(items)
}

/// Splits a comma-separated tool list, keeping commas inside parentheses
/// (`Bash(npm run build, test)` stays one item).
#[must_use]
pub fn split_tools(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0u32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            ',' | '\n' if depth == 0 => {
                let t = cur.trim();
                if !t.is_empty() {
                    out.push(t.to_string());
                }
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    let t = cur.trim();
    if !t.is_empty() {
        out.push(t.to_string());
    }
    out
}

const PERMISSION_MODES: &[&str] = &[
    "acceptEdits",
    "auto",
    "bypassPermissions",
    "default",
    "dontAsk",
    "manual",
    "plan",
];

/// Resolves every setting from the flags and the layers. Pure.
pub fn resolve(args: &Flags, project_dir: &Path, layers: Layers<'_>) -> Result<Settings> {
    let r = Resolver { layers };
    let prompt_file = r.get(
        "PROMPT_FILE",
        Some(("--prompt", args.prompt.as_deref())),
        PathBuf::from(".hank/PROMPT.md"),
        "a file path",
        |s| (!s.trim().is_empty()).then(|| PathBuf::from(s.trim())),
    )?;
    let continuity = if args.no_continue {
        Sourced {
            value: false,
            source: Source::Flag("--no-continue"),
        }
    } else {
        r.get(
            "SESSION_CONTINUITY",
            None,
            true,
            "true or false",
            parse_bool,
        )?
    };
    let settings = Settings {
        project_dir: project_dir.to_path_buf(),
        max_calls_per_hour: r.get(
            "MAX_CALLS_PER_HOUR",
            Some(("--calls", args.calls.as_deref())),
            100,
            "a whole number ≥ 1",
            parse_u32_min(1),
        )?,
        max_tokens_per_hour: r.get(
            "MAX_TOKENS_PER_HOUR",
            Some(("--max-tokens-per-hour", args.max_tokens_per_hour.as_deref())),
            0,
            "a whole number (0 = off)",
            parse_u64,
        )?,
        prompt_file,
        timeout: r.get(
            "CLAUDE_TIMEOUT_MINUTES",
            Some(("--timeout", args.timeout.as_deref())),
            Duration::from_secs(15 * 60),
            "minutes (e.g. 15) or a duration like 90s, 2m, 1h",
            parse_timeout,
        )?,
        live: r.flag_bool("LIVE_OUTPUT", "--live", args.live, false)?,
        verbose: r.flag_bool("VERBOSE", "--verbose", args.verbose, false)?,
        output_format: r.get(
            "CLAUDE_OUTPUT_FORMAT",
            Some(("--output-format", args.output_format.as_deref())),
            OutputFormat::Json,
            "json or text",
            |s| match s.trim().to_ascii_lowercase().as_str() {
                "json" => Some(OutputFormat::Json),
                "text" => Some(OutputFormat::Text),
                _ => None,
            },
        )?,
        allowed_tools: r.get(
            "ALLOWED_TOOLS",
            Some(("--allowed-tools", args.allowed_tools.as_deref())),
            DEFAULT_ALLOWED_TOOLS
                .iter()
                .map(ToString::to_string)
                .collect(),
            "a comma-separated list of tools, e.g. Read,Edit,Bash(npm test)",
            parse_list,
        )?,
        permission_mode: r.get(
            "CLAUDE_PERMISSION_MODE",
            Some(("--permission-mode", args.permission_mode.as_deref())),
            None,
            &format!("one of {}", PERMISSION_MODES.join(", ")),
            |s| {
                PERMISSION_MODES
                    .iter()
                    .find(|m| **m == s.trim())
                    .map(|m| Some((*m).to_string()))
            },
        )?,
        model: r.get(
            "CLAUDE_MODEL",
            Some(("--model", args.model.as_deref())),
            None,
            "a model name",
            |s| {
                let s = s.trim();
                (!s.is_empty() && !s.starts_with('-')).then(|| Some(s.to_string()))
            },
        )?,
        session_continuity: continuity,
        session_expiry_hours: r.get(
            "SESSION_EXPIRY_HOURS",
            Some(("--session-expiry", args.session_expiry.as_deref())),
            24,
            "a whole number of hours ≥ 1",
            parse_u32_min(1),
        )?,
        max_loops: r.get(
            "MAX_LOOPS",
            Some(("--max-loops", args.max_loops.as_deref())),
            0,
            "a whole number (0 = unlimited)",
            parse_u64,
        )?,
        max_cost_usd: r.get(
            "MAX_COST_USD",
            Some(("--max-cost", args.max_cost.as_deref())),
            0.0,
            "an amount in USD ≥ 0 (0 = unlimited)",
            |s| {
                s.trim()
                    .trim_start_matches('$')
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
            },
        )?,
        on_usage_limit: r.get(
            "ON_USAGE_LIMIT",
            Some(("--on-usage-limit", args.on_usage_limit.as_deref())),
            UsageLimitPolicy::Wait,
            "wait or exit",
            |s| match s.trim().to_ascii_lowercase().as_str() {
                "wait" => Some(UsageLimitPolicy::Wait),
                "exit" => Some(UsageLimitPolicy::Exit),
                _ => None,
            },
        )?,
        claude_cmd: r.get(
            "CLAUDE_CODE_CMD",
            Some(("--claude-cmd", args.claude_cmd.as_deref())),
            "claude".to_string(),
            "a command name or path",
            |s| (!s.trim().is_empty()).then(|| s.trim().to_string()),
        )?,
        auto_reset_circuit: r.flag_bool(
            "CB_AUTO_RESET",
            "--auto-reset-circuit",
            args.auto_reset_circuit,
            false,
        )?,
        notify: r.flag_bool("ENABLE_NOTIFICATIONS", "--notify", args.notify, false)?,
        cb_no_progress: r.get(
            "CB_NO_PROGRESS_THRESHOLD",
            None,
            3,
            "a whole number ≥ 1",
            parse_u32_min(1),
        )?,
        cb_same_error: r.get(
            "CB_SAME_ERROR_THRESHOLD",
            None,
            5,
            "a whole number ≥ 1",
            parse_u32_min(1),
        )?,
        cb_failure: r.get(
            "CB_FAILURE_THRESHOLD",
            None,
            5,
            "a whole number ≥ 1",
            parse_u32_min(1),
        )?,
        cb_output_decline: r.get(
            "CB_OUTPUT_DECLINE_THRESHOLD",
            None,
            70,
            "a percentage from 1 to 100",
            |s| parse_u32_min(1)(s).filter(|v| *v <= 100),
        )?,
        cb_permission_denial: r.get(
            "CB_PERMISSION_DENIAL_THRESHOLD",
            None,
            2,
            "a whole number ≥ 1",
            parse_u32_min(1),
        )?,
        cb_cooldown_minutes: r.get(
            "CB_COOLDOWN_MINUTES",
            None,
            30,
            "a whole number of minutes",
            parse_u32_min(0),
        )?,
        max_consecutive_test_loops: r.get(
            "MAX_CONSECUTIVE_TEST_LOOPS",
            None,
            3,
            "a whole number ≥ 1",
            parse_u32_min(1),
        )?,
        retry_backoff_seconds: r.get(
            "RETRY_BACKOFF_SECONDS",
            None,
            30,
            "a whole number of seconds",
            parse_u64,
        )?,
        loop_delay_seconds: r.get(
            "LOOP_DELAY_SECONDS",
            None,
            0,
            "a whole number of seconds",
            parse_u64,
        )?,
        optional_sections: r.get(
            "OPTIONAL_SECTIONS",
            None,
            crate::policy::fixplan::DEFAULT_OPTIONAL_SECTIONS
                .iter()
                .map(ToString::to_string)
                .collect(),
            "a comma-separated list of section names",
            parse_list,
        )?,
        dry_run: args.dry_run,
        json: args.json,
    };
    Ok(settings)
}

/// Reads `.hankrc` (if any) and the real environment, and resolves the settings.
pub fn load(args: &Flags, project_dir: &Path) -> Result<Settings> {
    let rc_path = project_dir.join(".hankrc");
    let rc = read_hankrc(&rc_path)?;
    let env = |k: &str| std::env::var(k).ok();
    resolve(
        args,
        project_dir,
        Layers {
            rc: &rc,
            rc_path: &rc_path,
            env: &env,
        },
    )
}

/// Reads and parses `.hankrc`; a missing file is empty.
pub fn read_hankrc(path: &Path) -> Result<BTreeMap<String, RcEntry>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).map_err(|_| {
                HankError::usage(format!("{}: not valid UTF-8 text", path.display()))
            })?;
            parse_hankrc(&text, path)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(HankError::io("failed to read", path, e)),
    }
}

/// The agent command, resolved to a program and leading arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCommand {
    pub program: PathBuf,
    pub leading_args: Vec<String>,
}

/// Resolves `CLAUDE_CODE_CMD`: an existing path (absolute or relative to the project), a name
/// looked up on `PATH`, or a command with arguments such as `npx @anthropic-ai/claude-code`.
pub fn resolve_agent(cmd: &Sourced<String>, project_dir: &Path) -> Result<AgentCommand> {
    let raw = cmd.value.trim();
    let as_path = |p: &str| {
        let path = Path::new(p);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            project_dir.join(path)
        }
    };
    let hint = "install Claude Code (`npm install -g @anthropic-ai/claude-code`) or set \
                CLAUDE_CODE_CMD / --claude-cmd to its path";
    if raw.contains('/') && as_path(raw).is_file() {
        return Ok(AgentCommand {
            program: as_path(raw),
            leading_args: Vec::new(),
        });
    }
    let mut words = raw.split_whitespace();
    let first = words.next().unwrap_or("claude");
    let rest: Vec<String> = words.map(ToString::to_string).collect();
    if first.contains('/') {
        let p = as_path(first);
        if p.is_file() {
            return Ok(AgentCommand {
                program: p,
                leading_args: rest,
            });
        }
        return Err(HankError::usage_hint(
            format!(
                "agent command not found at {} (from {})",
                p.display(),
                cmd.source
            ),
            hint,
        ));
    }
    match which::which(first) {
        Ok(p) => Ok(AgentCommand {
            program: p,
            leading_args: rest,
        }),
        Err(_) => Err(HankError::usage_hint(
            format!(
                "agent command `{first}` not found on PATH (from {}; PATH={})",
                cmd.source,
                std::env::var("PATH").unwrap_or_default()
            ),
            hint,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve_with(args: &Flags, env: &[(&str, &str)], rc: &str) -> Result<Settings> {
        let path = PathBuf::from("/p/.hankrc");
        let rc = parse_hankrc(rc, &path)?;
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        let lookup = move |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        resolve(
            args,
            Path::new("/p"),
            Layers {
                rc: &rc,
                rc_path: &path,
                env: &lookup,
            },
        )
    }

    #[test]
    fn precedence_flag_env_rc_default() {
        let rc = "MAX_CALLS_PER_HOUR=\"10\"\n";
        let s = resolve_with(&Flags::default(), &[], "").unwrap();
        assert_eq!(s.max_calls_per_hour.value, 100);
        assert_eq!(s.max_calls_per_hour.source, Source::Default);
        let s = resolve_with(&Flags::default(), &[], rc).unwrap();
        assert_eq!(
            (s.max_calls_per_hour.value, s.max_calls_per_hour.source),
            (10, Source::Hankrc { line: 1 })
        );
        let s = resolve_with(&Flags::default(), &[("MAX_CALLS_PER_HOUR", "20")], rc).unwrap();
        assert_eq!(
            (s.max_calls_per_hour.value, s.max_calls_per_hour.source),
            (20, Source::Env)
        );
        let args = Flags {
            calls: Some("30".into()),
            ..Flags::default()
        };
        let s = resolve_with(&args, &[("MAX_CALLS_PER_HOUR", "20")], rc).unwrap();
        assert_eq!(
            (s.max_calls_per_hour.value, s.max_calls_per_hour.source),
            (30, Source::Flag("--calls"))
        );
    }

    #[test]
    fn bool_flags_beat_env_and_rc() {
        let s = resolve_with(&Flags::default(), &[], "CB_AUTO_RESET=yes\n").unwrap();
        assert!(s.auto_reset_circuit.value);
        let s = resolve_with(&Flags::default(), &[("SESSION_CONTINUITY", "false")], "").unwrap();
        assert!(!s.session_continuity.value);
        let args = Flags {
            no_continue: true,
            ..Flags::default()
        };
        let s = resolve_with(&args, &[("SESSION_CONTINUITY", "true")], "").unwrap();
        assert!(!s.session_continuity.value);
    }

    #[test]
    fn invalid_values_name_their_origin() {
        type Case<'a> = (Flags, &'a [(&'a str, &'a str)], &'a str, &'a str);
        let cases: &[Case<'_>] = &[
            (
                Flags {
                    calls: Some("lots".into()),
                    ..Flags::default()
                },
                &[],
                "",
                "--calls",
            ),
            (
                Flags::default(),
                &[("MAX_LOOPS", "-1")],
                "",
                "environment variable MAX_LOOPS",
            ),
            (
                Flags::default(),
                &[],
                "# c\nCLAUDE_TIMEOUT_MINUTES=\"0\"\n",
                "/p/.hankrc line 2",
            ),
            (
                Flags {
                    timeout: Some("5x".into()),
                    ..Flags::default()
                },
                &[],
                "",
                "--timeout",
            ),
            (
                Flags::default(),
                &[],
                "ON_USAGE_LIMIT=sometimes\n",
                "line 1",
            ),
            (
                Flags {
                    permission_mode: Some("yolo".into()),
                    ..Flags::default()
                },
                &[],
                "",
                "--permission-mode",
            ),
            (
                Flags::default(),
                &[],
                "\n\nMAX_CALL_PER_HOUR=5\n",
                "line 3: unknown key MAX_CALL_PER_HOUR",
            ),
            (Flags::default(), &[], "MAX_LOOPS\n", "line 1: expected KEY"),
            (Flags::default(), &[], "MAX_LOOPS=\"5\n", "missing closing"),
            (
                Flags::default(),
                &[],
                "CLAUDE_MODEL=$(rm -rf ~)\n",
                "not expanded by a shell",
            ),
            (
                Flags {
                    max_cost: Some("nan".into()),
                    ..Flags::default()
                },
                &[],
                "",
                "--max-cost",
            ),
        ];
        for (args, env, rc, needle) in cases {
            let err = resolve_with(args, env, rc).unwrap_err().to_string();
            assert!(err.contains(needle), "{err:?} should contain {needle:?}");
        }
    }

    #[test]
    fn unknown_key_suggests_the_closest() {
        let err = parse_hankrc("MAX_CALL_PER_HOUR=5", Path::new(".hankrc")).unwrap_err();
        assert_eq!(err.hint(), Some("did you mean MAX_CALLS_PER_HOUR?"));
    }

    #[test]
    fn hankrc_forms() {
        let rc = parse_hankrc(
            "export MAX_LOOPS=5 # five\nCLAUDE_MODEL='opus'\nPROJECT_NAME=\"demo app\" # x\n\n# c\n",
            Path::new(".hankrc"),
        )
        .unwrap();
        assert_eq!(
            rc["MAX_LOOPS"],
            RcEntry {
                value: "5".into(),
                line: 1
            }
        );
        assert_eq!(rc["CLAUDE_MODEL"].value, "opus");
        assert_eq!(rc["PROJECT_NAME"].value, "demo app");
    }

    #[test]
    fn timeouts() {
        let table = [
            ("15", Some(900)),
            ("90s", Some(90)),
            ("2m", Some(120)),
            ("1h", Some(3600)),
            ("1h30m", Some(5400)),
            ("0", None),
            ("0s", None),
            ("", None),
            ("m", None),
            ("10x", None),
            ("5m3", None),
            ("99999999999999999999", None),
        ];
        for (input, secs) in table {
            assert_eq!(parse_timeout(input).map(|d| d.as_secs()), secs, "{input}");
        }
    }

    #[test]
    fn tool_lists_keep_parenthesised_commas() {
        assert_eq!(
            split_tools("Read, Edit,Bash(npm run a, b) ,, Bash(git *)"),
            vec!["Read", "Edit", "Bash(npm run a, b)", "Bash(git *)"]
        );
    }

    #[test]
    fn defaults_match_the_key_table() {
        let s = resolve_with(&Flags::default(), &[], "").unwrap();
        assert_eq!(s.timeout.value, Duration::from_secs(900));
        assert_eq!(s.cb_no_progress.value, 3);
        assert_eq!(s.cb_same_error.value, 5);
        assert_eq!(s.cb_failure.value, 5);
        assert_eq!(s.cb_output_decline.value, 70);
        assert_eq!(s.cb_permission_denial.value, 2);
        assert_eq!(s.cb_cooldown_minutes.value, 30);
        assert_eq!(s.max_consecutive_test_loops.value, 3);
        assert_eq!(s.retry_backoff_seconds.value, 30);
        assert_eq!(s.session_expiry_hours.value, 24);
        assert_eq!(s.prompt_file.value, PathBuf::from(".hank/PROMPT.md"));
        assert!(s.allowed_tools.value.iter().all(|t| t != "Bash(git *)"));
    }
}
