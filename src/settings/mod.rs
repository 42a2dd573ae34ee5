//! Configuration: flags + environment + `.hankrc` → validated [`Settings`], each value with
//! the place it came from.
//!
//! Precedence: **command-line flag > environment variable > `.hankrc` > built-in default.**
//!
//! | module | role |
//! |---|---|
//! | [`keys`] | the table of keys: name (= environment variable), flag, default, expected value, help **\[pure\]** |
//! | [`hankrc`] | the `.hankrc` parser **\[pure\]** |
//! | [`live`] | the keys `hank ctl set` changes in a running loop: one typed definition each (name, parser, field, shown value), the table [`live::LIVE`] **\[pure\]** |
//! | [`resolve`] | flag > env > `.hankrc` > default, from the flags, an env lookup and the `.hankrc` text **\[pure\]** |
//! | [`flags`] | the raw flag values |
//! | this file | [`Settings`], [`load`] (the only I/O: reads `.hankrc` and the real environment), the agent command |
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! `.hankrc` parser + flag > env > `.hankrc` > default resolution, every value with its `Source`;
//! `live.rs` the keys `hank ctl set` changes in a running loop (one `Live` per key, the table
//! `LIVE`: adding a live key is one definition there plus its `r.live(…)` line in `resolve`);
//! `Flags` = the raw values of `hank run`'s settings flags, with their clap attributes (one
//! definition: `cli::RunArgs` flattens it and adds the flags that steer the command — `--monitor`,
//! `--force`, `--accept-config`…)

pub mod flags;
pub mod hankrc;
pub mod keys;
pub mod live;
pub mod resolve;

pub use flags::Flags;
pub use hankrc::parse_hankrc;
pub use keys::{DEFAULT_ALLOWED_TOOLS, KEYS};

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{HankError, Result};
use crate::fsread::Follow;
use crate::policy::breaker::BreakerConfig;
use crate::policy::budget::BudgetLimits;
use crate::policy::decide::{DecideConfig, UsageLimitPolicy};

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Built into hank ([`keys::KEYS`]).
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

/// How the agent prints its answer.
/// CLIENT_SETTINGS: which Claude Code settings the agent loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientSettings {
    /// Every source the client reads (user, project, local): the client's own default.
    #[default]
    All,
    /// Only the project's (`--setting-sources project,local`): a user-level hook or plugin
    /// cannot wedge an unattended run.
    Project,
}

/// DELIVER: what hank does with verified work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeliverMode {
    /// Left in the working tree (the default).
    #[default]
    None,
    /// Committed on a branch and pushed.
    Branch,
    /// Pushed, and a pull request opened against the branch the run started from.
    Pr,
}

impl DeliverMode {
    /// The value as written in `.hankrc`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Branch => "branch",
            Self::Pr => "pr",
        }
    }
}

/// CI_WAIT: whether hank waits for the checks of the pushed commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CiWait {
    /// With DELIVER=pr.
    #[default]
    Auto,
    On,
    Off,
}

impl CiWait {
    /// Whether to wait when delivering in `mode`.
    #[must_use]
    pub fn applies(self, mode: DeliverMode) -> bool {
        match self {
            Self::Auto => mode == DeliverMode::Pr,
            Self::On => mode != DeliverMode::None,
            Self::Off => false,
        }
    }
}

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
    /// IDLE_TIMEOUT (zero: off).
    pub idle_timeout: Sourced<Duration>,
    /// FIRST_OUTPUT_TIMEOUT (zero: off).
    pub first_output_timeout: Sourced<Duration>,
    /// CLIENT_SETTINGS: which of Claude Code's settings files the agent loads.
    pub client_settings: Sourced<ClientSettings>,
    pub verbose: Sourced<bool>,
    pub output_format: Sourced<OutputFormat>,
    pub allowed_tools: Sourced<Vec<String>>,
    pub permission_mode: Sourced<Option<String>>,
    pub model: Sourced<Option<String>>,
    pub session_continuity: Sourced<bool>,
    pub session_expiry_hours: Sourced<u32>,
    pub max_loops: Sourced<u64>,
    /// MAX_RUNTIME (zero: unlimited).
    pub max_runtime: Sourced<Duration>,
    pub max_cost_usd: Sourced<f64>,
    /// FLEET_MIN_FREE_MEMORY in bytes (`hank fleet`'s admission).
    pub fleet_min_free_memory: Sourced<u64>,
    /// FLEET_KEEP_WORKTREES: the worktrees kept at a fleet's end for the next one.
    pub fleet_keep_worktrees: Sourced<bool>,
    /// MAX_MERGE_ATTEMPTS (`hank fleet`).
    pub max_merge_attempts: Sourced<u32>,
    /// TRACKER (`hank watch`): `github`, `gitlab`, unset = from the origin's host.
    pub tracker: Sourced<Option<String>>,
    /// TRACKER_LABEL (`hank watch`).
    pub tracker_label: Sourced<String>,
    /// WATCH_INTERVAL (`hank watch`).
    pub watch_interval: Sourced<Duration>,
    /// UNKNOWN_CALL_COST: charged for a call whose cost could not be read.
    pub unknown_call_cost: Sourced<f64>,
    pub on_usage_limit: Sourced<UsageLimitPolicy>,
    pub max_window_percent: Sourced<crate::policy::windows::WindowLimits>,
    pub claude_cmd: Sourced<String>,
    pub agent: Sourced<String>,
    pub agents: Sourced<Option<Vec<String>>>,
    pub agent_models: Sourced<Option<Vec<(String, String)>>>,
    /// REVIEW_AGENT (`--review-agent`): the independent reviewer's profile (`None`: no review).
    pub review_agent: Sourced<Option<String>>,
    /// REVIEW_MODEL: the reviewer's model.
    pub review_model: Sourced<Option<String>>,
    /// REVIEW_AGENT_CMD: the reviewer's program.
    pub review_agent_cmd: Sourced<Option<String>>,
    /// REVIEW_MAX_ROUNDS.
    pub review_max_rounds: Sourced<u32>,
    /// REVIEW_MAX_SHARE.
    pub review_max_share: Sourced<f64>,
    pub verify_command: Sourced<Option<String>>,
    pub verify_timeout: Sourced<Duration>,
    pub max_rejected_completions: Sourced<u32>,
    pub verify_at_start: Sourced<bool>,
    pub verify_every_loop: Sourced<bool>,
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
    pub retry_backoff_max: Sourced<Duration>,
    pub max_outage_minutes: Sourced<u32>,
    /// LOG_RETENTION: loops whose logs are kept (0: all).
    pub log_retention: Sourced<u64>,
    pub loop_delay_seconds: Sourced<u64>,
    pub optional_sections: Sourced<Vec<String>>,
    /// DELIVER: none, branch or pr.
    pub deliver: Sourced<DeliverMode>,
    /// DELIVER_BRANCH (`--branch`): unset = `hank/<the branch the run started from>`.
    pub deliver_branch: Sourced<Option<String>>,
    /// DELIVER_REMOTE.
    pub deliver_remote: Sourced<String>,
    /// DELIVER_BASE (`--base`): the pull request's target; unset = the branch the run started
    /// from, else the remote's default branch.
    pub deliver_base: Sourced<Option<String>>,
    /// DELIVER_ALLOW_FILES: paths/globs a delivery may push although they look like secrets.
    pub deliver_allow_files: Sourced<Option<Vec<String>>>,
    /// CI_WAIT.
    pub ci_wait: Sourced<CiWait>,
    /// CI_TIMEOUT.
    pub ci_timeout: Sourced<Duration>,
    /// CI_APPEAR_TIMEOUT.
    pub ci_appear_timeout: Sourced<Duration>,
    /// MAX_CI_ROUNDS.
    pub max_ci_rounds: Sourced<u32>,
    /// REVIEW_LOOP.
    pub review_loop: Sourced<bool>,
    /// AUTO_MERGE.
    pub auto_merge: Sourced<bool>,
    /// NOTIFY: where events are sent (`None`: nowhere).
    pub notify_targets: Sourced<Option<Vec<crate::policy::notify::Target>>>,
    /// NOTIFY_EVENTS: which events become messages.
    pub notify_events: Sourced<Vec<crate::policy::notify::EventClass>>,
    /// NEEDS_ANSWERS=wait (`true`): at `needs_answers` the loop waits for `hank ctl answer`.
    pub needs_answers_wait: Sourced<bool>,
    /// ANSWER_TIMEOUT: the longest such a wait lasts.
    pub answer_timeout: Sourced<Duration>,
    /// CONTROL_TOPIC: the ntfy topic URL signed remote commands are read from.
    pub control_topic: Sourced<Option<String>>,
    /// SANDBOX: how the agent's process tree is confined (`crate::sandbox`).
    pub sandbox: Sourced<crate::sandbox::Mode>,
    /// SANDBOX_READ: extra paths the sandboxed agent may read (`~` not yet expanded).
    pub sandbox_read: Sourced<Vec<String>>,
    /// SANDBOX_WRITE: extra paths the sandboxed agent may write (`~` not yet expanded).
    pub sandbox_write: Sourced<Vec<String>>,
    /// SANDBOX_ALLOW_HOSTS: `host:port` entries the egress proxy lets through.
    pub sandbox_allow_hosts: Sourced<Vec<String>>,
    /// `--dry-run` (flag only).
    pub dry_run: bool,
    /// `--json` (flag only).
    pub json: bool,
    /// Problems that did not stop resolution (an unreadable `VERBOSE` in the environment).
    pub warnings: Vec<String>,
    /// Every key's value as shown, in resolution order.
    shown: Vec<resolve::Shown>,
    /// The project folder with every link resolved, found once (the prompt file's check of
    /// every loop compares with it; a project moved during a run then fails closed).
    real_root: std::sync::OnceLock<PathBuf>,
}

impl Settings {
    /// The files the loop needs: PROMPT.md (or PROMPT_FILE), fix_plan.md, AGENT.md, `.hankrc`.
    #[must_use]
    pub fn required_files(&self) -> Vec<PathBuf> {
        vec![
            self.prompt_path(),
            self.project_dir.join(".hank/fix_plan.md"),
            self.project_dir.join(".hank/AGENT.md"),
            self.project_dir.join(".hankrc"),
        ]
    }

    /// The required files that are not there (the loop stops with `integrity_failure`).
    /// A file that is there but is not a regular file (a FIFO, a device, a directory, a link
    /// to one) is not "missing": [`Settings::check_special_files`] reports it.
    #[must_use]
    pub fn missing_files(&self) -> Vec<PathBuf> {
        self.required_files()
            .into_iter()
            .filter(|p| !p.is_file() && crate::fsread::not_regular(p, Follow::Yes).is_none())
            .collect()
    }

    /// A required file that is a FIFO, a device, a directory or a link to one is an error
    /// naming it (reading it would hang or make no sense).
    ///
    /// # Errors
    /// The first such file.
    pub fn check_special_files(&self) -> Result<()> {
        for p in self.required_files() {
            if let Some(what) = crate::fsread::not_regular(&p, Follow::Yes) {
                return Err(HankError::Unreadable {
                    path: p,
                    problem: format!("is {what}; expected a regular file"),
                });
            }
        }
        Ok(())
    }

    /// Both checks of the required files with one `stat` each (the loop makes them before
    /// every call): the missing ones, or an error naming the first that is there but is not a
    /// regular file.
    ///
    /// # Errors
    /// A required file is a FIFO, a device, a directory or a link to one.
    pub fn required_files_now(&self) -> Result<Vec<PathBuf>> {
        let mut missing = Vec::new();
        for p in self.required_files() {
            match std::fs::metadata(&p) {
                Ok(m) if m.file_type().is_file() => {}
                Ok(m) => {
                    return Err(HankError::Unreadable {
                        problem: format!(
                            "is {}; expected a regular file",
                            crate::fsread::kind_of(m.file_type())
                        ),
                        path: p,
                    });
                }
                Err(_) => missing.push(p),
            }
        }
        Ok(missing)
    }

    /// `.hank/fix_plan.md` as text (invalid UTF-8 replaced), if it can be read (a regular
    /// file of at most [`crate::fsread::DOCUMENT_LIMIT`] bytes).
    #[must_use]
    pub fn read_fix_plan(&self) -> Option<String> {
        self.read_fix_plan_stamped().map(|(text, _)| text)
    }

    /// [`Self::read_fix_plan`] with the file's stamp, so a later look can tell whether it
    /// changed without reading it ([`Self::fix_plan_holds`]).
    #[must_use]
    pub fn read_fix_plan_stamped(&self) -> Option<(String, Option<crate::fsread::Stamp>)> {
        crate::fsread::read_stamped(
            &self.project_dir.join(".hank/fix_plan.md"),
            crate::fsread::DOCUMENT_LIMIT,
            Follow::Yes,
        )
        .ok()
        .map(|(b, stamp)| (String::from_utf8_lossy(&b).into_owned(), stamp))
    }

    /// Whether `.hank/fix_plan.md` is still the file `stamp` was taken of (one `stat`).
    #[must_use]
    pub fn fix_plan_holds(&self, stamp: &crate::fsread::Stamp) -> bool {
        stamp.holds(&self.project_dir.join(".hank/fix_plan.md"), Follow::Yes)
    }

    /// The prompt file's bytes: a regular file of at most [`crate::fsread::DOCUMENT_LIMIT`]
    /// bytes **inside the project** — read at every loop, so a link swapped in during a run
    /// that leads out of the project (or a PROMPT_FILE outside it) is an error naming it,
    /// never a file from elsewhere sent to the agent. A link within the project is followed.
    ///
    /// # Errors
    /// It cannot be read, is outside the project, is not a regular file, or is too large
    /// (the error names it).
    pub fn read_prompt(&self) -> Result<Vec<u8>> {
        let path = self.prompt_path();
        let real =
            std::fs::canonicalize(&path).map_err(|e| HankError::io("failed to read", &path, e))?;
        let root = match self.real_root.get() {
            Some(root) => root,
            None => {
                let root = std::fs::canonicalize(&self.project_dir)
                    .map_err(|e| HankError::io("failed to resolve", &self.project_dir, e))?;
                self.real_root.get_or_init(|| root)
            }
        };
        if !real.starts_with(root) {
            return Err(HankError::Unreadable {
                path,
                problem: format!(
                    "leads to {}, outside the project; the prompt file (PROMPT_FILE) must be a \
                     regular file inside the project",
                    real.display()
                ),
            });
        }
        // The resolved path, without following a link swapped in since.
        crate::fsread::read(&real, crate::fsread::DOCUMENT_LIMIT, Follow::No)
            .map_err(|e| HankError::io("failed to read", &path, e))
    }

    /// The session to resume now under SESSION_CONTINUITY and SESSION_EXPIRY_HOURS.
    #[must_use]
    pub fn resumable<'a>(
        &self,
        session: Option<&'a crate::policy::session::Session>,
        now: jiff::Timestamp,
    ) -> Option<&'a crate::policy::session::Session> {
        crate::policy::session::usable(
            session,
            self.session_continuity.value,
            self.session_expiry_hours.value,
            now,
        )
    }

    /// The agents of this run, in failover order: `--agent` on the command line runs that one
    /// agent; else `AGENTS` when set; else `AGENT`. Duplicates are dropped.
    #[must_use]
    pub fn agent_chain(&self) -> Vec<String> {
        let list = match (&self.agent.source, &self.agents.value) {
            (Source::Flag(_), _) | (_, None) => vec![self.agent.value.clone()],
            (_, Some(list)) => list.clone(),
        };
        let mut out: Vec<String> = Vec::new();
        for n in list {
            if !out.contains(&n) {
                out.push(n);
            }
        }
        out
    }

    /// The model for `agent`: CLAUDE_MODEL for claude (else its AGENT_MODELS entry), the
    /// AGENT_MODELS entry for every other agent.
    #[must_use]
    pub fn model_for(&self, agent: &str) -> Option<&str> {
        let listed = self
            .agent_models
            .value
            .as_ref()
            .and_then(|v| v.iter().find(|(n, _)| n == agent))
            .map(|(_, m)| m.as_str());
        if agent == crate::policy::failover::DEFAULT_AGENT {
            self.model.value.as_deref().or(listed)
        } else {
            listed
        }
    }

    /// The breaker thresholds.
    #[must_use]
    pub fn breaker_config(&self) -> BreakerConfig {
        BreakerConfig {
            no_progress_threshold: self.cb_no_progress.value,
            same_error_threshold: self.cb_same_error.value,
            failure_threshold: self.cb_failure.value,
            output_decline_pct: self.cb_output_decline.value,
            cooldown_minutes: self.cb_cooldown_minutes.value,
            max_outage_minutes: self.max_outage_minutes.value,
        }
    }

    /// The loop state machine's settings for a run started at `now` (`failover`: AGENTS
    /// names more than one agent).
    #[must_use]
    pub fn run_config(
        &self,
        now: jiff::Timestamp,
        failover: bool,
    ) -> crate::policy::run::RunConfig {
        crate::policy::run::RunConfig {
            deadline: crate::policy::run::RunConfig::deadline_of(now, self.max_runtime.value),
            loop_delay: jiff::SignedDuration::from_secs(
                i64::try_from(self.loop_delay_seconds.value).unwrap_or(i64::MAX),
            ),
            on_usage_limit: self.on_usage_limit.value,
            failover,
            decide: self.decide_config(),
            answer_wait: self.needs_answers_wait.value.then(|| {
                jiff::SignedDuration::try_from(self.answer_timeout.value)
                    .unwrap_or(jiff::SignedDuration::MAX)
            }),
            review: self.review_config(),
        }
    }

    /// REVIEW_*: the reviewer's rounds and share (`None`: no REVIEW_AGENT).
    #[must_use]
    pub fn review_config(&self) -> Option<crate::policy::review::ReviewConfig> {
        self.review_agent
            .value
            .is_some()
            .then_some(crate::policy::review::ReviewConfig {
                max_rounds: self.review_max_rounds.value,
                max_share: self.review_max_share.value,
            })
    }

    /// The call/token budget.
    #[must_use]
    pub fn budget_limits(&self) -> BudgetLimits {
        BudgetLimits {
            max_calls_per_hour: self.max_calls_per_hour.value,
            max_tokens_per_hour: self.max_tokens_per_hour.value,
        }
    }

    /// The limits a fleet holds over every task's calls (the budget, MAX_COST_USD).
    #[must_use]
    pub fn fleet_limits(&self) -> crate::policy::fleet::FleetLimits {
        crate::policy::fleet::FleetLimits {
            budget: self.budget_limits(),
            max_cost_usd: self.max_cost_usd.value,
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
            retry_backoff_max_secs: self.retry_backoff_max.value.as_secs(),
            allowed_tools: self.allowed_tools.value.clone(),
        }
    }

    /// The prompt file, absolute.
    #[must_use]
    pub fn prompt_path(&self) -> PathBuf {
        self.project_dir.join(&self.prompt_file.value)
    }

    /// `(key, value, source)` for every key, in [`keys::KEYS`] order, for `--dry-run` and
    /// `hank doctor`.
    #[must_use]
    pub fn describe(&self) -> Vec<(&'static str, String, String)> {
        KEYS.iter()
            .filter_map(|k| self.shown.iter().find(|s| s.key == k.name))
            .map(|s| (s.key, s.value.clone(), s.source.to_string()))
            .collect()
    }
}

/// Reads `.hankrc` (if any) and the real environment, and resolves the settings.
pub fn load(flags: &Flags, project_dir: &Path) -> Result<Settings> {
    let rc_path = project_dir.join(".hankrc");
    let rc_text = match crate::fsread::read(&rc_path, crate::fsread::CONFIG_LIMIT, Follow::Yes) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| {
            HankError::usage(format!("{}: not valid UTF-8 text", rc_path.display()))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(HankError::io("failed to read", &rc_path, e)),
    };
    let env = |k: &str| std::env::var(k).ok();
    resolve::resolve(
        flags,
        project_dir,
        resolve::Layers {
            env: &env,
            rc_text: &rc_text,
            rc_path: &rc_path,
        },
    )
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
    resolve_program(
        cmd,
        project_dir,
        "install Claude Code (`npm install -g @anthropic-ai/claude-code`) or set \
         CLAUDE_CODE_CMD / --claude-cmd to its path",
    )
}

/// Resolves an agent program: an existing path (absolute or relative to the project), a name
/// looked up on `PATH`, or a command with arguments; `hint` says how to fix a missing one.
pub fn resolve_program(
    cmd: &Sourced<String>,
    project_dir: &Path,
    hint: &str,
) -> Result<AgentCommand> {
    let raw = cmd.value.trim();
    let as_path = |p: &str| {
        let path = Path::new(p);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            project_dir.join(path)
        }
    };
    if raw.contains('/') && as_path(raw).is_file() {
        return Ok(AgentCommand {
            program: as_path(raw),
            leading_args: Vec::new(),
        });
    }
    let mut words = raw.split_whitespace();
    let Some(first) = words.next() else {
        return Err(HankError::usage_hint(
            format!("the agent command is empty (from {})", cmd.source),
            hint,
        ));
    };
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

    /// The loop's one-stat check agrees with the two checks it replaces: present files pass,
    /// missing ones are listed, a FIFO (or a link to one) or a folder is an error naming it,
    /// and the prompt's project root, found once, still refuses a prompt leading outside.
    #[test]
    fn required_files_with_one_stat_each() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join(".hank")).unwrap();
        let s = resolve::resolve_args(&[], d, &[], "").unwrap();
        let all = s.required_files();
        assert_eq!(s.required_files_now().unwrap(), all);
        assert_eq!(s.missing_files(), all);
        for p in &all {
            std::fs::write(p, "x").unwrap();
        }
        assert!(s.required_files_now().unwrap().is_empty());
        assert!(s.check_special_files().is_ok());
        assert_eq!(s.read_prompt().unwrap(), b"x");
        // A link within the project is followed; a folder or a FIFO is named.
        let agent = d.join(".hank/AGENT.md");
        std::fs::remove_file(&agent).unwrap();
        std::fs::create_dir(&agent).unwrap();
        let err = s.required_files_now().unwrap_err().to_string();
        assert!(
            err.contains("AGENT.md") && err.contains("directory"),
            "{err}"
        );
        assert!(s.check_special_files().is_err());
        std::fs::remove_dir(&agent).unwrap();
        nix::unistd::mkfifo(&agent, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = s.required_files_now().unwrap_err().to_string();
        assert!(err.contains("AGENT.md"), "{err}");
        std::fs::remove_file(&agent).unwrap();
        assert_eq!(s.required_files_now().unwrap(), [agent]);
        // The prompt swapped for a link out of the project after the root was found.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let prompt = s.prompt_path();
        std::fs::remove_file(&prompt).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), &prompt).unwrap();
        let err = s.read_prompt().unwrap_err().to_string();
        assert!(err.contains("outside the project"), "{err}");
    }

    /// The agent command's default lives in the key table only: an empty command is an
    /// error, never a silent `claude`.
    #[test]
    fn an_empty_agent_command_is_an_error() {
        let cmd = Sourced {
            value: "  ".to_string(),
            source: Source::Env,
        };
        let err = resolve_agent(&cmd, Path::new("/nonexistent"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("agent command is empty (from environment)"),
            "{err}"
        );
    }
}
