//! Resolution: command-line flag > environment variable > `.hankrc` > built-in default, each
//! value with the place it came from. **\[pure\]**
//!
//! The caller passes the flags, an environment lookup and the `.hankrc` text; defaults come
//! from [`super::keys::KEYS`], parsed by the same parser as a user's value.

#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{HankError, Result};
use crate::policy::decide::UsageLimitPolicy;

use super::hankrc::{RcEntry, parse_hankrc};
use super::keys::{self, Key, PERMISSION_MODES};
use super::live;
use super::{CiWait, ClientSettings, DeliverMode, Flags, OutputFormat, Settings, Source, Sourced};

/// Where values come from besides the flags.
pub struct Layers<'a> {
    /// Environment lookup.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The `.hankrc` text ("" when there is none) and its path, for messages.
    pub rc_text: &'a str,
    pub rc_path: &'a Path,
}

/// One resolved value as `describe()` shows it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Shown {
    pub key: &'static str,
    pub value: String,
    pub source: Source,
}

/// What to do with an environment value that does not parse.
#[derive(Clone, Copy)]
enum BadEnv {
    /// An error naming the variable (the variable is hank's own).
    Refuse,
    /// A warning, and the next layer is used (the name is shared with other tools).
    Ignore,
}

struct Resolver<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    /// [`Flags::named`]: the flags given under a command's own names.
    named: &'static [(&'static str, &'static str)],
    rc: BTreeMap<String, RcEntry>,
    rc_path: &'a Path,
    shown: Vec<Shown>,
    warnings: Vec<String>,
}

impl Resolver<'_> {
    /// The value from the first layer that has one (flag → environment → `.hankrc`).
    fn layered<T>(
        &mut self,
        key: &'static Key,
        flag: Option<&str>,
        bad_env: BadEnv,
        parse: &dyn Fn(&str) -> Option<T>,
    ) -> Result<Option<Sourced<T>>> {
        if let Some(raw) = flag {
            let named = self.named.iter().find(|(k, _)| *k == key.name).map(|n| n.1);
            let flag_name = named.or(key.flag).unwrap_or(key.name);
            return match parse(raw) {
                Some(value) => Ok(Some(Sourced {
                    value,
                    source: Source::Flag(flag_name),
                })),
                None => Err(HankError::usage(format!(
                    "invalid value `{raw}` for {flag_name}: expected {}",
                    key.expected()
                ))),
            };
        }
        let name = key.env();
        if let Some(raw) = (self.env)(name).filter(|v| !v.trim().is_empty()) {
            match (parse(raw.trim()), bad_env) {
                (Some(value), _) => {
                    return Ok(Some(Sourced {
                        value,
                        source: Source::Env,
                    }));
                }
                (None, BadEnv::Ignore) => self.warnings.push(format!(
                    "environment variable {name}=`{raw}` ignored: expected {}",
                    key.expected()
                )),
                (None, BadEnv::Refuse) => {
                    return Err(HankError::usage(format!(
                        "invalid value `{raw}` in environment variable {name}: expected {}",
                        key.expected()
                    )));
                }
            }
        }
        let Some(entry) = self.rc.get(key.name) else {
            return Ok(None);
        };
        match parse(&entry.value) {
            Some(value) => Ok(Some(Sourced {
                value,
                source: Source::Hankrc { line: entry.line },
            })),
            None => Err(HankError::usage(format!(
                "{} line {}: invalid value `{}` for {}: expected {}",
                self.rc_path.display(),
                entry.line,
                entry.value,
                key.name,
                key.expected()
            ))),
        }
    }

    /// A key with a default.
    fn get<T: Show>(
        &mut self,
        name: &str,
        flag: Option<&str>,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Sourced<T>> {
        self.get_with(name, flag, BadEnv::Refuse, parse)
    }

    /// A live key ([`live`]) resolved like any other, with its one parser.
    fn live<T: Show>(&mut self, key: &live::Live<T>, flag: Option<&str>) -> Result<Sourced<T>> {
        // A definition left out of the table would be checked nowhere (every test resolves).
        debug_assert!(
            live::find(key.name).is_some(),
            "{} is not in settings::live::LIVE",
            key.name
        );
        self.get(key.name, flag, key.parse)
    }

    fn get_with<T: Show>(
        &mut self,
        name: &str,
        flag: Option<&str>,
        bad_env: BadEnv,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Sourced<T>> {
        let key = find(name)?;
        let v = match self.layered(key, flag, bad_env, &parse)? {
            Some(v) => v,
            None => Sourced {
                value: default_of(key, &parse)?,
                source: Source::Default,
            },
        };
        self.show(key, &v);
        Ok(v)
    }

    /// A key that may be unset.
    fn get_opt<T>(
        &mut self,
        name: &str,
        flag: Option<&str>,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Sourced<Option<T>>>
    where
        Option<T>: Show,
    {
        let key = find(name)?;
        let v = match self.layered(key, flag, BadEnv::Refuse, &parse)? {
            Some(Sourced { value, source }) => Sourced {
                value: Some(value),
                source,
            },
            None if key.default == keys::DefaultValue::Unset => Sourced {
                value: None,
                source: Source::Default,
            },
            None => Sourced {
                value: Some(default_of(key, &parse)?),
                source: Source::Default,
            },
        };
        self.show(key, &v);
        Ok(v)
    }

    fn show<T: Show>(&mut self, key: &'static Key, v: &Sourced<T>) {
        self.shown.push(Shown {
            key: key.name,
            value: v.value.show(),
            source: v.source.clone(),
        });
    }
}

fn find(name: &str) -> Result<&'static Key> {
    keys::find(name).ok_or_else(|| HankError::Internal(format!("no configuration key {name}")))
}

/// The key's default, parsed like any other value (a default that does not parse is a bug,
/// caught by the tests, reported rather than panicking).
fn default_of<T>(key: &Key, parse: &dyn Fn(&str) -> Option<T>) -> Result<T> {
    let text = key.default.text().unwrap_or_default();
    parse(&text).ok_or_else(|| {
        HankError::Internal(format!(
            "the built-in default `{text}` of {} is not {}",
            key.name,
            key.expected()
        ))
    })
}

/// Resolves every setting from the flags and the layers.
/// `2G`, `512M`, `64K`, `1048576` → bytes (FLEET_MIN_FREE_MEMORY, `--min-free-memory`).
#[must_use]
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.char_indices().last()? {
        (i, 'G' | 'g') => (&t[..i], 1u64 << 30),
        (i, 'M' | 'm') => (&t[..i], 1 << 20),
        (i, 'K' | 'k') => (&t[..i], 1 << 10),
        _ => (t, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

pub fn resolve(flags: &Flags, project_dir: &Path, layers: Layers<'_>) -> Result<Settings> {
    let mut r = Resolver {
        env: layers.env,
        named: flags.named,
        rc: parse_hankrc(layers.rc_text, layers.rc_path)?,
        rc_path: layers.rc_path,
        shown: Vec::new(),
        warnings: Vec::new(),
    };
    let on = |set: bool| set.then_some("true");
    let mut settings = Settings {
        project_dir: project_dir.to_path_buf(),
        max_calls_per_hour: r.live(&live::MAX_CALLS_PER_HOUR, flags.calls.as_deref())?,
        max_tokens_per_hour: r.get(
            "MAX_TOKENS_PER_HOUR",
            flags.max_tokens_per_hour.as_deref(),
            parse_u64,
        )?,
        prompt_file: r.get("PROMPT_FILE", flags.prompt.as_deref(), |s| {
            (!s.trim().is_empty()).then(|| PathBuf::from(s.trim()))
        })?,
        timeout: r.get(
            "CLAUDE_TIMEOUT_MINUTES",
            flags.timeout.as_deref(),
            parse_timeout,
        )?,
        idle_timeout: r.get(
            "IDLE_TIMEOUT",
            flags.idle_timeout.as_deref(),
            parse_timeout_or_off,
        )?,
        first_output_timeout: r.get(
            "FIRST_OUTPUT_TIMEOUT",
            flags.first_output_timeout.as_deref(),
            parse_timeout_or_off,
        )?,
        client_settings: r.get("CLIENT_SETTINGS", flags.client_settings.as_deref(), |s| {
            one_of(
                s,
                &[
                    ("all", ClientSettings::All),
                    ("project", ClientSettings::Project),
                ],
            )
        })?,
        live: r.get("LIVE_OUTPUT", on(flags.live), parse_bool)?,
        verbose: r.get_with(
            "VERBOSE",
            on(flags.verbose),
            BadEnv::Ignore,
            parse_verbosity,
        )?,
        output_format: r.get(
            "CLAUDE_OUTPUT_FORMAT",
            flags.output_format.as_deref(),
            |s| {
                one_of(
                    s,
                    &[("json", OutputFormat::Json), ("text", OutputFormat::Text)],
                )
            },
        )?,
        allowed_tools: r.get("ALLOWED_TOOLS", flags.allowed_tools.as_deref(), parse_list)?,
        permission_mode: r.get_opt(
            "CLAUDE_PERMISSION_MODE",
            flags.permission_mode.as_deref(),
            |s| {
                PERMISSION_MODES
                    .iter()
                    .find(|m| **m == s.trim())
                    .map(|m| (*m).to_string())
            },
        )?,
        model: r.get_opt("CLAUDE_MODEL", flags.model.as_deref(), |s| {
            let s = s.trim();
            (!s.is_empty() && !s.starts_with('-')).then(|| s.to_string())
        })?,
        session_continuity: r.get(
            "SESSION_CONTINUITY",
            flags.no_continue.then_some("false"),
            parse_bool,
        )?,
        session_expiry_hours: r.get(
            "SESSION_EXPIRY_HOURS",
            flags.session_expiry.as_deref(),
            parse_u32_min(1),
        )?,
        max_loops: r.live(&live::MAX_LOOPS, flags.max_loops.as_deref())?,
        max_runtime: ci_max_runtime(
            r.live(&live::MAX_RUNTIME, flags.max_runtime.as_deref())?,
            &r.env,
        ),
        max_cost_usd: r.live(&live::MAX_COST_USD, flags.max_cost.as_deref())?,
        fleet_min_free_memory: r.get("FLEET_MIN_FREE_MEMORY", None, parse_size)?,
        fleet_keep_worktrees: r.get("FLEET_KEEP_WORKTREES", None, parse_bool)?,
        max_merge_attempts: r.get("MAX_MERGE_ATTEMPTS", None, parse_u32_min(1))?,
        tracker: r.get_opt("TRACKER", None, |s| {
            crate::policy::tracker::TrackerKind::parse(s).map(|k| k.as_str().to_string())
        })?,
        tracker_label: r.get("TRACKER_LABEL", None, |s| {
            let s = s.trim();
            (!s.is_empty() && !s.contains([',', '\n', '\r'])).then(|| s.to_string())
        })?,
        watch_interval: r.get("WATCH_INTERVAL", None, parse_timeout)?,
        unknown_call_cost: r.get("UNKNOWN_CALL_COST", None, |s| {
            parse_usd(s).filter(|v| *v <= 100_000.0)
        })?,
        on_usage_limit: r.get("ON_USAGE_LIMIT", flags.on_usage_limit.as_deref(), |s| {
            one_of(
                s,
                &[
                    ("wait", UsageLimitPolicy::Wait),
                    ("exit", UsageLimitPolicy::Exit),
                ],
            )
        })?,
        max_window_percent: r.live(
            &live::MAX_WINDOW_PERCENT,
            flags.max_window_percent.as_deref(),
        )?,
        claude_cmd: r.get("CLAUDE_CODE_CMD", flags.claude_cmd.as_deref(), not_blank)?,
        agent: r.get("AGENT", flags.agent.as_deref(), |s| {
            let s = s.trim();
            crate::policy::failover::valid_name(s).then(|| s.to_string())
        })?,
        agents: r.get_opt("AGENTS", flags.agents.as_deref(), |s| {
            let list = parse_list(s)?;
            list.iter()
                .all(|n| crate::policy::failover::valid_name(n))
                .then_some(list)
        })?,
        agent_models: r.get_opt("AGENT_MODELS", flags.agent_models.as_deref(), parse_pairs)?,
        review_agent: r.get_opt("REVIEW_AGENT", flags.review_agent.as_deref(), |s| {
            let s = s.trim();
            crate::policy::failover::valid_name(s).then(|| s.to_string())
        })?,
        review_model: r.get_opt("REVIEW_MODEL", None, not_blank)?,
        review_agent_cmd: r.get_opt("REVIEW_AGENT_CMD", None, not_blank)?,
        review_max_rounds: r.get("REVIEW_MAX_ROUNDS", None, parse_u32_min(1))?,
        review_max_share: r.get("REVIEW_MAX_SHARE", None, |s| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && (0.0..=1.0).contains(v))
        })?,
        verify_command: {
            let v = r.get_opt("VERIFY_COMMAND", flags.verify.as_deref(), not_blank)?;
            if flags.no_verify {
                Sourced {
                    value: None,
                    source: Source::Flag("--no-verify"),
                }
            } else {
                v
            }
        },
        verify_timeout: r.get(
            "VERIFY_TIMEOUT",
            flags.verify_timeout.as_deref(),
            parse_timeout,
        )?,
        max_rejected_completions: r.get("MAX_REJECTED_COMPLETIONS", None, parse_u32_min(1))?,
        verify_at_start: r.get("VERIFY_AT_START", on(flags.verify_at_start), parse_bool)?,
        verify_every_loop: r.get("VERIFY_EVERY_LOOP", on(flags.verify_every_loop), parse_bool)?,
        auto_reset_circuit: r.get("CB_AUTO_RESET", on(flags.auto_reset_circuit), parse_bool)?,
        notify: r.get("ENABLE_NOTIFICATIONS", on(flags.notify), parse_bool)?,
        cb_no_progress: r.get("CB_NO_PROGRESS_THRESHOLD", None, parse_u32_min(1))?,
        cb_same_error: r.get("CB_SAME_ERROR_THRESHOLD", None, parse_u32_min(1))?,
        cb_failure: r.get("CB_FAILURE_THRESHOLD", None, parse_u32_min(1))?,
        cb_output_decline: r.get("CB_OUTPUT_DECLINE_THRESHOLD", None, |s| {
            parse_u32_min(1)(s).filter(|v| *v <= 100)
        })?,
        cb_permission_denial: r.get("CB_PERMISSION_DENIAL_THRESHOLD", None, parse_u32_min(1))?,
        cb_cooldown_minutes: r.get("CB_COOLDOWN_MINUTES", None, parse_u32_min(0))?,
        max_consecutive_test_loops: r.get("MAX_CONSECUTIVE_TEST_LOOPS", None, parse_u32_min(1))?,
        retry_backoff_seconds: r.get("RETRY_BACKOFF_SECONDS", None, parse_u64)?,
        retry_backoff_max: r.get("RETRY_BACKOFF_MAX", None, parse_timeout)?,
        max_outage_minutes: r.get("MAX_OUTAGE_MINUTES", None, parse_u32_min(0))?,
        log_retention: r.get("LOG_RETENTION", None, parse_u64)?,
        loop_delay_seconds: r.get("LOOP_DELAY_SECONDS", None, parse_u64)?,
        optional_sections: r.get("OPTIONAL_SECTIONS", None, parse_list)?,
        deliver: r.get("DELIVER", flags.deliver.as_deref(), |s| {
            one_of(
                s,
                &[
                    ("none", DeliverMode::None),
                    ("branch", DeliverMode::Branch),
                    ("pr", DeliverMode::Pr),
                ],
            )
        })?,
        deliver_branch: r.get_opt("DELIVER_BRANCH", flags.branch.as_deref(), branch_name)?,
        deliver_base: r.get_opt("DELIVER_BASE", flags.base.as_deref(), branch_name)?,
        deliver_allow_files: r.get_opt("DELIVER_ALLOW_FILES", None, |s| {
            let items: Vec<String> = s
                .split(',')
                .map(str::trim)
                .filter(|i| !i.is_empty())
                .map(str::to_string)
                .collect();
            (!items.is_empty()).then_some(items)
        })?,
        deliver_remote: r.get("DELIVER_REMOTE", None, |s| {
            let s = s.trim();
            crate::policy::deliver::valid_remote_name(s).then(|| s.to_string())
        })?,
        ci_wait: r.get("CI_WAIT", None, |s| {
            match s.trim().to_ascii_lowercase().as_str() {
                "auto" => Some(CiWait::Auto),
                other => parse_bool(other).map(|on| if on { CiWait::On } else { CiWait::Off }),
            }
        })?,
        ci_timeout: r.get("CI_TIMEOUT", None, parse_timeout)?,
        ci_appear_timeout: r.get("CI_APPEAR_TIMEOUT", None, parse_timeout)?,
        max_ci_rounds: r.get("MAX_CI_ROUNDS", None, parse_u32_min(1))?,
        review_loop: r.get("REVIEW_LOOP", None, parse_bool)?,
        auto_merge: r.get("AUTO_MERGE", None, parse_bool)?,
        notify_targets: r.get_opt("NOTIFY", None, |s| {
            crate::policy::notify::parse_targets(s).ok()
        })?,
        notify_events: r.get("NOTIFY_EVENTS", None, crate::policy::notify::parse_events)?,
        needs_answers_wait: r.get("NEEDS_ANSWERS", None, |s| {
            one_of(s, &[("exit", false), ("wait", true)])
        })?,
        answer_timeout: r.get("ANSWER_TIMEOUT", None, parse_timeout)?,
        sandbox: r.get("SANDBOX", flags.sandbox.as_deref(), |s| {
            one_of(
                s,
                &[
                    ("auto", crate::sandbox::Mode::Auto),
                    ("landlock", crate::sandbox::Mode::Landlock),
                    ("off", crate::sandbox::Mode::Off),
                ],
            )
        })?,
        sandbox_read: r.get("SANDBOX_READ", None, |s| {
            Some(s.split_whitespace().map(str::to_string).collect())
        })?,
        sandbox_write: r.get("SANDBOX_WRITE", None, |s| {
            Some(s.split_whitespace().map(str::to_string).collect())
        })?,
        sandbox_allow_hosts: r.get("SANDBOX_ALLOW_HOSTS", None, |s| {
            crate::sandbox::parse_hosts(s)
        })?,
        control_topic: r.get_opt("CONTROL_TOPIC", None, |s| {
            let s = s.trim();
            (crate::policy::notify::url_allowed(s)
                && crate::policy::notify::ntfy_parts(s).is_some())
            .then(|| s.to_string())
        })?,
        dry_run: flags.dry_run,
        json: flags.json,
        warnings: Vec::new(),
        shown: Vec::new(),
        real_root: std::sync::OnceLock::new(),
    };
    settings.warnings = r.warnings;
    settings.shown = r.shown;
    Ok(settings)
}

/// How a resolved value is shown by `--dry-run` and `hank doctor`.
pub(super) trait Show {
    fn show(&self) -> String;
}

macro_rules! show_display {
    ($($t:ty),*) => {$(
        impl Show for $t {
            fn show(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
show_display!(u32, u64, f64, bool, String);

impl Show for PathBuf {
    fn show(&self) -> String {
        self.display().to_string()
    }
}

impl Show for Duration {
    fn show(&self) -> String {
        format_duration(*self)
    }
}

impl Show for Vec<String> {
    fn show(&self) -> String {
        self.join(",")
    }
}

impl Show for Option<Vec<String>> {
    fn show(&self) -> String {
        self.as_ref()
            .map_or_else(|| "unset".to_string(), |v| v.join(","))
    }
}

impl Show for Option<Vec<(String, String)>> {
    fn show(&self) -> String {
        self.as_ref().map_or_else(
            || "unset".to_string(),
            |v| {
                v.iter()
                    .map(|(a, b)| format!("{a}={b}"))
                    .collect::<Vec<_>>()
                    .join(",")
            },
        )
    }
}

impl Show for Option<String> {
    fn show(&self) -> String {
        self.clone().unwrap_or_else(|| "unset".to_string())
    }
}

impl Show for crate::sandbox::Mode {
    fn show(&self) -> String {
        self.name().to_string()
    }
}

impl Show for ClientSettings {
    fn show(&self) -> String {
        match self {
            Self::All => "all",
            Self::Project => "project",
        }
        .to_string()
    }
}

impl Show for DeliverMode {
    fn show(&self) -> String {
        self.as_str().to_string()
    }
}

impl Show for CiWait {
    fn show(&self) -> String {
        match self {
            Self::Auto => "auto",
            Self::On => "true",
            Self::Off => "false",
        }
        .to_string()
    }
}

impl Show for OutputFormat {
    fn show(&self) -> String {
        match self {
            Self::Json => "json",
            Self::Text => "text",
        }
        .to_string()
    }
}

impl Show for crate::policy::windows::WindowLimits {
    fn show(&self) -> String {
        self.to_string()
    }
}

impl Show for Option<Vec<crate::policy::notify::Target>> {
    fn show(&self) -> String {
        self.as_ref().map_or_else(
            || "unset".to_string(),
            |v| {
                v.iter()
                    .map(crate::policy::notify::Target::shown)
                    .collect::<Vec<_>>()
                    .join(",")
            },
        )
    }
}

impl Show for Vec<crate::policy::notify::EventClass> {
    fn show(&self) -> String {
        if self.len() == crate::policy::notify::EventClass::ALL.len() {
            return "all".into();
        }
        self.iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Show for UsageLimitPolicy {
    fn show(&self) -> String {
        match self {
            Self::Wait => "wait",
            Self::Exit => "exit",
        }
        .to_string()
    }
}

/// Formats a duration the way the timeout flag accepts it.
pub(crate) fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// Parses true/false, yes/no, on/off, 1/0 (any case).
fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// A boolean, or a verbosity level as other tools write it (`VERBOSE=2`): ≥ 1 is on.
fn parse_verbosity(s: &str) -> Option<bool> {
    parse_bool(s).or_else(|| s.trim().parse::<u64>().ok().map(|n| n >= 1))
}

/// A duration as WATCH_INTERVAL and `--interval` take it (`60s`, `5m`, a bare number of
/// minutes; zero refused).
#[must_use]
pub fn parse_interval(s: &str) -> Option<Duration> {
    parse_timeout(s)
}

/// Parses a timeout: a bare integer is minutes; `90s`, `2m`, `1h`, `1h30m` also work. Zero is
/// refused.
fn parse_timeout(s: &str) -> Option<Duration> {
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

/// A timeout, or `0` for off (`Duration::ZERO`).
pub(super) fn parse_timeout_or_off(s: &str) -> Option<Duration> {
    if s.trim() == "0" {
        Some(Duration::ZERO)
    } else {
        parse_timeout(s)
    }
}

/// An amount in USD, `$` optional: finite and not negative.
pub(super) fn parse_usd(s: &str) -> Option<f64> {
    s.trim()
        .trim_start_matches('$')
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// One of the `choices`' words (any case), as its value.
fn one_of<T: Copy>(s: &str, choices: &[(&str, T)]) -> Option<T> {
    let s = s.trim().to_ascii_lowercase();
    choices.iter().find(|(word, _)| *word == s).map(|(_, v)| *v)
}

/// The value trimmed, unless it is blank.
fn not_blank(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// A branch name git accepts (DELIVER_BRANCH, DELIVER_BASE), trimmed.
fn branch_name(s: &str) -> Option<String> {
    let s = s.trim();
    crate::policy::deliver::valid_branch_name(s).then(|| s.to_string())
}

pub(super) fn parse_u32_min(min: u32) -> impl Fn(&str) -> Option<u32> {
    move |s| s.trim().parse::<u32>().ok().filter(|v| *v >= min)
}

pub(super) fn parse_u64(s: &str) -> Option<u64> {
    s.trim().parse::<u64>().ok()
}

/// `name=model,name=model` (names are profile names; a model may not start with `-`).
fn parse_pairs(s: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, model) = item.split_once('=')?;
        let (name, model) = (name.trim(), model.trim());
        if !crate::policy::failover::valid_name(name) || model.is_empty() || model.starts_with('-')
        {
            return None;
        }
        out.push((name.to_string(), model.to_string()));
    }
    (!out.is_empty()).then_some(out)
}

fn parse_list(s: &str) -> Option<Vec<String>> {
    let items = split_tools(s);
    (!items.is_empty()).then_some(items)
}

/// Splits a comma-separated tool list, keeping commas inside parentheses
/// (`Bash(npm run build, test)` stays one item).
fn split_tools(s: &str) -> Vec<String> {
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

/// MAX_RUNTIME set nowhere, inside GitHub Actions: the job's limit (`HANK_JOB_TIMEOUT_MINUTES`)
/// minus a margin ([`crate::policy::ci::job_max_runtime`]).
fn ci_max_runtime(v: Sourced<Duration>, env: &dyn Fn(&str) -> Option<String>) -> Sourced<Duration> {
    if v.source != Source::Default {
        return v;
    }
    match crate::policy::ci::job_max_runtime(
        env("GITHUB_ACTIONS").as_deref(),
        env(crate::policy::ci::JOB_TIMEOUT_VAR).as_deref(),
    ) {
        Some(value) => Sourced {
            value,
            source: Source::Env,
        },
        None => v,
    }
}

/// [`resolve`] for tests: `args` a `hank run` command line, `env` the whole environment and
/// `rc` the text of `project_dir/.hankrc`.
#[cfg(test)]
pub(crate) fn resolve_args(
    args: &[&str],
    project_dir: &Path,
    env: &[(&str, &str)],
    rc: &str,
) -> Result<Settings> {
    let lookup = |k: &str| {
        env.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| (*v).to_string())
    };
    resolve(
        &Flags::from_command_line(args),
        project_dir,
        Layers {
            env: &lookup,
            rc_text: rc,
            rc_path: &project_dir.join(".hankrc"),
        },
    )
}

#[cfg(test)]
mod tests {

    use super::*;

    use crate::policy::breaker::BreakerConfig;
    use crate::policy::budget::BudgetLimits;
    use crate::policy::decide::DecideConfig;

    fn resolve_with(args: &[&str], env: &[(&str, &str)], rc: &str) -> Result<Settings> {
        resolve_args(args, Path::new("/p"), env, rc)
    }

    #[test]
    fn precedence_flag_env_rc_default() {
        let rc = "MAX_CALLS_PER_HOUR=\"10\"\n";
        let s = resolve_with(&[], &[], "").unwrap();
        assert_eq!(s.max_calls_per_hour.value, 100);
        assert_eq!(s.max_calls_per_hour.source, Source::Default);
        let s = resolve_with(&[], &[], rc).unwrap();
        assert_eq!(
            (s.max_calls_per_hour.value, s.max_calls_per_hour.source),
            (10, Source::Hankrc { line: 1 })
        );
        let s = resolve_with(&[], &[("MAX_CALLS_PER_HOUR", "20")], rc).unwrap();
        assert_eq!(
            (s.max_calls_per_hour.value, s.max_calls_per_hour.source),
            (20, Source::Env)
        );
        let s = resolve_with(&["--calls", "30"], &[("MAX_CALLS_PER_HOUR", "20")], rc).unwrap();
        assert_eq!(
            (s.max_calls_per_hour.value, s.max_calls_per_hour.source),
            (30, Source::Flag("--calls"))
        );
        // A blank environment variable does not hide the layers below it.
        let s = resolve_with(&[], &[("MAX_CALLS_PER_HOUR", " ")], rc).unwrap();
        assert_eq!(s.max_calls_per_hour.value, 10);
    }

    #[test]
    fn bool_flags_beat_env_and_rc() {
        let s = resolve_with(&[], &[], "CB_AUTO_RESET=yes\n").unwrap();
        assert!(s.auto_reset_circuit.value);
        let s = resolve_with(&[], &[("SESSION_CONTINUITY", "false")], "").unwrap();
        assert!(!s.session_continuity.value);
        let flags = ["--no-continue", "--live"];
        let s = resolve_with(&flags, &[("SESSION_CONTINUITY", "true")], "").unwrap();
        assert!(!s.session_continuity.value);
        assert_eq!(s.session_continuity.source, Source::Flag("--no-continue"));
        assert_eq!(
            (s.live.value, s.live.source),
            (true, Source::Flag("--live"))
        );
    }

    /// A command's own flag for a setting (`hank verify --timeout`, `--command`) is named in its
    /// errors and as the value's source, not the `hank run` flag of the same setting.
    #[test]
    fn a_commands_own_flag_names_are_its_errors_and_sources() {
        let named = |timeout: &str, command: &str| Flags {
            verify: Some(command.to_owned()),
            verify_timeout: Some(timeout.to_owned()),
            named: &[
                ("VERIFY_COMMAND", "--command"),
                ("VERIFY_TIMEOUT", "--timeout"),
            ],
            ..Flags::default()
        };
        let with = |f: &Flags| {
            let layers = Layers {
                env: &|_: &str| None,
                rc_text: "",
                rc_path: Path::new("/p/.hankrc"),
            };
            resolve(f, Path::new("/p"), layers)
        };
        let err = with(&named("5x", "make test")).unwrap_err().to_string();
        assert!(
            err.contains("invalid value `5x` for --timeout: expected"),
            "{err}"
        );
        let err = with(&named("5m", " ")).unwrap_err().to_string();
        assert!(err.contains("for --command"), "{err}");
        let s = with(&named("5m", "make test")).unwrap();
        assert_eq!(s.verify_timeout.source, Source::Flag("--timeout"));
        assert_eq!(s.verify_timeout.value, Duration::from_secs(300));
        // Without names, the run's own flag.
        let plain = Flags {
            named: &[],
            ..named("5x", "make test")
        };
        let err = with(&plain).unwrap_err().to_string();
        assert!(err.contains("for --verify-timeout"), "{err}");
    }

    #[test]
    fn invalid_values_name_their_origin() {
        type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str, &'a str);
        let cases: &[Case<'_>] = &[
            (
                &["--calls", "lots"],
                &[],
                "",
                "invalid value `lots` for --calls: expected a whole number ≥ 1",
            ),
            (
                &[],
                &[("MAX_LOOPS", "-1")],
                "",
                "invalid value `-1` in environment variable MAX_LOOPS: expected a whole number",
            ),
            (
                &[],
                &[],
                "# c\nCLAUDE_TIMEOUT_MINUTES=\"0\"\n",
                "/p/.hankrc line 2: invalid value `0` for CLAUDE_TIMEOUT_MINUTES: expected",
            ),
            (&["--timeout", "5x"], &[], "", "--timeout"),
            (
                &[],
                &[],
                "ON_USAGE_LIMIT=sometimes\n",
                "line 1: invalid value `sometimes` for ON_USAGE_LIMIT: expected wait or exit",
            ),
            (
                &["--permission-mode", "yolo"],
                &[],
                "",
                "for --permission-mode: expected one of acceptEdits, auto, bypassPermissions",
            ),
            (
                &[],
                &[],
                "\n\nMAX_CALL_PER_HOUR=5\n",
                "line 3: unknown key MAX_CALL_PER_HOUR",
            ),
            (&[], &[], "MAX_LOOPS\n", "line 1: expected KEY"),
            (&[], &[], "MAX_LOOPS=\"5\n", "missing closing"),
            (
                &[],
                &[],
                "CLAUDE_MODEL=$(rm -rf ~)\n",
                "not expanded by a shell",
            ),
            (&["--max-cost", "nan"], &[], "", "--max-cost"),
            (
                &[],
                &[],
                "VERBOSE=loud\n",
                "line 1: invalid value `loud` for VERBOSE",
            ),
            (
                &[],
                &[],
                "CB_OUTPUT_DECLINE_THRESHOLD=101\n",
                "expected a percentage from 1 to 100",
            ),
        ];
        for (flags, env, rc, needle) in cases {
            let err = resolve_with(flags, env, rc).unwrap_err().to_string();
            assert!(err.contains(needle), "{err:?} should contain {needle:?}");
        }
    }

    /// `VERBOSE` is a name other tools use too: levels are accepted, and an unreadable value
    /// in the environment is a warning, never a refusal to start.
    #[test]
    fn verbose_accepts_levels_and_never_blocks_from_the_environment() {
        let table = [
            ("true", true),
            ("yes", true),
            ("ON", true),
            ("1", true),
            ("2", true),
            ("10", true),
            ("false", false),
            ("no", false),
            ("off", false),
            ("0", false),
        ];
        for (value, want) in table {
            let s = resolve_with(&[], &[("VERBOSE", value)], "").unwrap();
            assert_eq!(
                (s.verbose.value, &s.verbose.source),
                (want, &Source::Env),
                "{value}"
            );
            assert!(s.warnings.is_empty(), "{value}: {:?}", s.warnings);
        }
        for value in ["debug", "-1", "1.5"] {
            let s = resolve_with(&[], &[("VERBOSE", value)], "VERBOSE=on\n").unwrap();
            assert_eq!(
                (s.verbose.value, &s.verbose.source),
                (true, &Source::Hankrc { line: 1 }),
                "{value}"
            );
            assert_eq!(s.warnings.len(), 1, "{value}");
            assert!(
                s.warnings[0]
                    .starts_with(&format!("environment variable VERBOSE=`{value}` ignored")),
                "{:?}",
                s.warnings
            );
        }
        let s = resolve_with(&["--verbose"], &[("VERBOSE", "0")], "").unwrap();
        assert_eq!(
            (s.verbose.value, s.verbose.source),
            (true, Source::Flag("--verbose"))
        );
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
        for secs in [59, 60, 90, 3600, 5400] {
            let d = Duration::from_secs(secs);
            assert_eq!(parse_timeout(&format_duration(d)), Some(d), "{secs}");
        }
    }

    /// The value parsers several keys share.
    #[test]
    fn shared_value_parsers() {
        assert_eq!(parse_timeout_or_off(" 0 "), Some(Duration::ZERO));
        assert_eq!(parse_timeout_or_off("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_timeout_or_off("0s"), None);
        for (raw, want) in [
            ("$12.5", Some(12.5)),
            (" 0 ", Some(0.0)),
            ("-1", None),
            ("nan", None),
            ("inf", None),
        ] {
            assert_eq!(parse_usd(raw), want, "{raw}");
        }
        let modes = [("branch", DeliverMode::Branch), ("pr", DeliverMode::Pr)];
        assert_eq!(one_of(" PR ", &modes), Some(DeliverMode::Pr));
        assert_eq!(one_of("prs", &modes), None);
        assert_eq!(not_blank(" x "), Some("x".to_string()));
        assert_eq!(not_blank(" \t"), None);
        assert_eq!(branch_name(" hank/x "), Some("hank/x".to_string()));
        assert_eq!(branch_name("a..b"), None);
    }

    #[test]
    fn tool_lists_keep_parenthesised_commas() {
        assert_eq!(
            split_tools("Read, Edit,Bash(npm run a, b) ,, Bash(git *)"),
            vec!["Read", "Edit", "Bash(npm run a, b)", "Bash(git *)"]
        );
    }

    /// Every key's default parses with its own parser, and agrees with the policy modules'
    /// own `Default` impls (used by their tests and by old state files).
    #[test]
    fn defaults_come_from_the_key_table() {
        let s = resolve_with(&[], &[], "").unwrap();
        assert!(s.warnings.is_empty());
        assert_eq!(s.timeout.value, Duration::from_secs(15 * 60));
        assert_eq!(s.prompt_file.value, PathBuf::from(".hank/PROMPT.md"));
        assert_eq!(s.allowed_tools.value, keys::DEFAULT_ALLOWED_TOOLS);
        assert!(s.allowed_tools.value.iter().all(|t| t != "Bash(git *)"));
        assert_eq!(
            s.optional_sections.value,
            crate::policy::fixplan::default_optional_sections()
        );
        assert_eq!((&s.model.value, &s.permission_mode.value), (&None, &None));
        assert!(s.session_continuity.value && !s.verbose.value && !s.live.value);
        assert_eq!(s.breaker_config(), BreakerConfig::default());
        assert_eq!(s.budget_limits(), BudgetLimits::default());
        assert_eq!(
            s.decide_config(),
            DecideConfig {
                allowed_tools: keys::DEFAULT_ALLOWED_TOOLS
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
                ..DecideConfig::default()
            }
        );
    }

    /// `describe()` lists every key of the table once, in table order, with its source.
    #[test]
    fn describe_follows_the_key_table() {
        let s = resolve_with(
            &["--calls", "7"],
            &[("CLAUDE_MODEL", "opus")],
            "MAX_LOOPS=3\n",
        )
        .unwrap();
        let rows = s.describe();
        let names: Vec<&str> = rows.iter().map(|(k, _, _)| *k).collect();
        let want: Vec<&str> = keys::KEYS.iter().map(|k| k.name).collect();
        assert_eq!(names, want);
        let row = |k: &str| {
            rows.iter()
                .find(|(n, _, _)| *n == k)
                .map(|(_, v, s)| (v.as_str(), s.as_str()))
                .unwrap()
        };
        assert_eq!(row("MAX_CALLS_PER_HOUR"), ("7", "flag --calls"));
        assert_eq!(row("CLAUDE_MODEL"), ("opus", "environment"));
        assert_eq!(row("MAX_LOOPS"), ("3", ".hankrc line 1"));
        assert_eq!(row("CLAUDE_TIMEOUT_MINUTES"), ("15m", "default"));
        assert_eq!(row("CLAUDE_PERMISSION_MODE"), ("unset", "default"));
        assert_eq!(row("CLAUDE_OUTPUT_FORMAT"), ("json", "default"));
        assert_eq!(row("ON_USAGE_LIMIT"), ("wait", "default"));
        assert_eq!(row("MAX_COST_USD"), ("0", "default"));
        assert_eq!(
            row("OPTIONAL_SECTIONS"),
            ("Optional,Future,Nice to Have", "default")
        );
    }
}
