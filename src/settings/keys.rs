//! The configuration keys: one table, one entry per key. **\[pure\]**
//!
//! Each entry names the key (also its environment variable), its `hank run` flag, its
//! built-in default, what a valid value looks like and what it means. Everything else is
//! derived from [`KEYS`]: resolution parses the default text with the key's own parser (so a
//! default is written only here), `describe()` lists the keys in this order, `.hankrc`
//! suggestions for unknown keys come from these names, `hank run --help` shows [`flag_help`],
//! and a test checks the configuration table of `docs/settings.md` against this table.

#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::policy::fixplan::DEFAULT_OPTIONAL_SECTIONS;

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
    "Bash(git pull *)",
    "Bash(git fetch *)",
    "Bash(git checkout *)",
    "Bash(git branch *)",
    "Bash(git stash *)",
    "Bash(git merge *)",
    "Bash(git tag *)",
];

/// The values `CLAUDE_PERMISSION_MODE` accepts (`manual` is the new name of `default`).
pub const PERMISSION_MODES: &[&str] = &[
    "acceptEdits",
    "auto",
    "bypassPermissions",
    "default",
    "dontAsk",
    "manual",
    "plan",
];

/// A key's built-in value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultValue {
    /// Text parsed by the key's parser, exactly as if it had been written in `.hankrc`.
    Text(&'static str),
    /// A list, parsed as its comma-joined text; `summary` is how documentation names it
    /// when the list is too long to print.
    List {
        items: &'static [&'static str],
        summary: Option<&'static str>,
    },
    /// No value: the setting is left out (e.g. no `--model` is passed).
    Unset,
}

impl DefaultValue {
    /// The text the resolver parses, `None` when unset.
    #[must_use]
    pub fn text(self) -> Option<String> {
        match self {
            Self::Text(t) => Some(t.to_string()),
            Self::List { items, .. } => Some(items.join(",")),
            Self::Unset => None,
        }
    }

    /// How help and documentation show the default.
    #[must_use]
    pub fn display(self) -> String {
        match self {
            Self::List {
                summary: Some(s), ..
            } => s.to_string(),
            Self::Unset => "unset".to_string(),
            other => other.text().unwrap_or_default(),
        }
    }
}

/// What a valid value looks like (the end of "expected …" in error messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Text(&'static str),
    OneOf(&'static [&'static str]),
}

/// One configuration key.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The `.hankrc` key, also the environment variable.
    pub name: &'static str,
    /// The long `hank run` flag, if the key has one.
    pub flag: Option<&'static str>,
    pub default: DefaultValue,
    pub expect: Expect,
    /// One line for `--help` (sentence case, no final period).
    pub help: &'static str,
}

impl Key {
    /// The environment variable read for this key (its name).
    #[must_use]
    pub fn env(&self) -> &'static str {
        self.name
    }

    /// What a valid value looks like.
    #[must_use]
    pub fn expected(&self) -> String {
        match self.expect {
            Expect::Text(t) => t.to_string(),
            Expect::OneOf(values) => format!("one of {}", values.join(", ")),
        }
    }
}

const fn key(
    name: &'static str,
    flag: Option<&'static str>,
    default: DefaultValue,
    expect: &'static str,
    help: &'static str,
) -> Key {
    Key {
        name,
        flag,
        default,
        expect: Expect::Text(expect),
        help,
    }
}

const WHOLE_1: &str = "a whole number ≥ 1";
const BOOL: &str = "true or false";

/// Every key hank reads from flags, the environment and `.hankrc`, in display order.
pub const KEYS: &[Key] = &[
    key(
        "MAX_CALLS_PER_HOUR",
        Some("--calls"),
        DefaultValue::Text("100"),
        WHOLE_1,
        "Maximum agent calls in any rolling hour (a hard cap that survives restarts)",
    ),
    key(
        "MAX_TOKENS_PER_HOUR",
        Some("--max-tokens-per-hour"),
        DefaultValue::Text("0"),
        "a whole number (0 = off)",
        "Maximum tokens in any rolling hour, 0 = off",
    ),
    key(
        "PROMPT_FILE",
        Some("--prompt"),
        DefaultValue::Text(".hank/PROMPT.md"),
        "a file path",
        "Prompt file sent to the agent on stdin every loop",
    ),
    key(
        "CLAUDE_TIMEOUT_MINUTES",
        Some("--timeout"),
        DefaultValue::Text("15"),
        "whole minutes or a duration like 90s, 2m, 1h",
        "Agent timeout per loop: minutes, or 90s / 2m / 1h",
    ),
    key(
        "IDLE_TIMEOUT",
        Some("--idle-timeout"),
        DefaultValue::Text("0"),
        "a duration like 20m, 90s, or a bare number of minutes (0 = off)",
        "An agent that prints nothing for this long is hung (stopped as at the timeout), 0 = off",
    ),
    key(
        "FIRST_OUTPUT_TIMEOUT",
        Some("--first-output-timeout"),
        DefaultValue::Text("3m"),
        "a duration like 3m, 90s, or a bare number of minutes (0 = off)",
        "A call with no output byte within this long is a startup hang: stopped, retried at once (2 in a row), 0 = off",
    ),
    key(
        "CLIENT_SETTINGS",
        Some("--client-settings"),
        DefaultValue::Text("all"),
        "project or all",
        "Which Claude Code settings the agent loads: all (yours too) or project (--setting-sources project,local)",
    ),
    key(
        "LIVE_OUTPUT",
        Some("--live"),
        DefaultValue::Text("false"),
        BOOL,
        "Show the agent's output live: text and one line per tool use (hank always reads the stream)",
    ),
    key(
        "VERBOSE",
        Some("--verbose"),
        DefaultValue::Text("false"),
        "true or false (also yes/no, on/off, or a number: 0 = off, ≥ 1 = on)",
        "More detail on stderr: the agent command, the prompt size and the analysis of each loop",
    ),
    key(
        "CLAUDE_OUTPUT_FORMAT",
        Some("--output-format"),
        DefaultValue::Text("json"),
        "json or text",
        "Agent output format: json or text",
    ),
    key(
        "ALLOWED_TOOLS",
        Some("--allowed-tools"),
        DefaultValue::List {
            items: DEFAULT_ALLOWED_TOOLS,
            summary: Some("file tools, Task, TodoWrite, everyday git subcommands"),
        },
        "a comma-separated list of tools, e.g. Read,Edit,Bash(npm test)",
        "Comma-separated tools the agent may use",
    ),
    Key {
        name: "CLAUDE_PERMISSION_MODE",
        flag: Some("--permission-mode"),
        default: DefaultValue::Unset,
        expect: Expect::OneOf(PERMISSION_MODES),
        help: "Claude permission mode",
    },
    key(
        "CLAUDE_MODEL",
        Some("--model"),
        DefaultValue::Unset,
        "a model name",
        "Claude model (alias or name)",
    ),
    key(
        "SESSION_CONTINUITY",
        Some("--no-continue"),
        DefaultValue::Text("true"),
        BOOL,
        "Resume the agent session across loops (--no-continue sets false)",
    ),
    key(
        "SESSION_EXPIRY_HOURS",
        Some("--session-expiry"),
        DefaultValue::Text("24"),
        "a whole number of hours ≥ 1",
        "Hours after which a session is not resumed",
    ),
    key(
        "MAX_LOOPS",
        Some("--max-loops"),
        DefaultValue::Text("0"),
        "a whole number (0 = unlimited)",
        "Stop after N loops in this run, 0 = unlimited",
    ),
    key(
        "MAX_RUNTIME",
        Some("--max-runtime"),
        DefaultValue::Text("0"),
        "a duration like 8h, 90m, 3600s, or a bare number of minutes (0 = unlimited)",
        "Stop the run after this long (checked before each call and during waits), 0 = unlimited",
    ),
    key(
        "MAX_COST_USD",
        Some("--max-cost"),
        DefaultValue::Text("0"),
        "an amount in USD ≥ 0 (0 = unlimited)",
        "Stop when this run has cost this many USD, 0 = unlimited",
    ),
    key(
        "FLEET_MIN_FREE_MEMORY",
        None,
        DefaultValue::Text("2G"),
        "a size such as 2G, 512M, 64K or a number of bytes",
        "`hank fleet` starts a task only while this much memory is available (`--min-free-memory`)",
    ),
    key(
        "FLEET_KEEP_WORKTREES",
        None,
        DefaultValue::Text("true"),
        BOOL,
        "`hank fleet`: keep one worktree per agent at the end for the next fleet (false: remove them; `hank fleet status` shows what they take)",
    ),
    key(
        "MAX_MERGE_ATTEMPTS",
        None,
        DefaultValue::Text("2"),
        "a whole number ≥ 1",
        "`hank fleet`: merges of a task that conflict or turn the check red before the task fails (`--max-merge-attempts`)",
    ),
    key(
        "TRACKER",
        None,
        DefaultValue::Unset,
        "github or gitlab",
        "`hank watch`: the issue tracker (`--tracker`); unset = GitLab when the origin's host names GitLab, else GitHub",
    ),
    key(
        "TRACKER_LABEL",
        None,
        DefaultValue::Text("hank"),
        "a label name",
        "`hank watch`: the label that makes an open issue a task (`--label`)",
    ),
    key(
        "WATCH_INTERVAL",
        None,
        DefaultValue::Text("60s"),
        "a duration like 60s, 5m, or a bare number of minutes",
        "`hank watch`: how long between two polls of the tracker (`--interval`)",
    ),
    key(
        "UNKNOWN_CALL_COST",
        None,
        DefaultValue::Text("1.00"),
        "an amount in USD ≥ 0",
        "The estimate charged for a call whose cost its answer should hold but does not (when no call of the last 24 h cost more)",
    ),
    key(
        "ON_USAGE_LIMIT",
        Some("--on-usage-limit"),
        DefaultValue::Text("wait"),
        "wait or exit",
        "On a subscription usage limit: wait for the reset, or exit",
    ),
    key(
        "MAX_WINDOW_PERCENT",
        Some("--max-window-percent"),
        DefaultValue::Text("off"),
        "window=percent pairs, e.g. five_hour=80,seven_day=90 (percent 1–100), or off",
        "Pause (or, with ON_USAGE_LIMIT=exit, stop) when a subscription usage window reaches this share",
    ),
    key(
        "CLAUDE_CODE_CMD",
        Some("--claude-cmd"),
        DefaultValue::Text("claude"),
        "a command name or path",
        "The agent command: a path, a name on PATH, or a command with arguments",
    ),
    key(
        "AGENT",
        Some("--agent"),
        DefaultValue::Text("claude"),
        "a profile name: claude, codex, gemini, opencode, copilot, aider, goose, cursor, or NAME for .hank/agents/NAME.toml",
        "The agent CLI to drive (its profile); `hank agents` lists them",
    ),
    key(
        "AGENTS",
        Some("--agents"),
        DefaultValue::Unset,
        "comma-separated profile names, e.g. claude,codex",
        "Failover order: the next agent takes over while one is at a usage limit or logged out",
    ),
    key(
        "AGENT_MODELS",
        Some("--agent-models"),
        DefaultValue::Unset,
        "comma-separated NAME=MODEL pairs, e.g. codex=gpt-5-codex,gemini=gemini-2.5-pro",
        "The model of each agent other than claude (claude's is CLAUDE_MODEL)",
    ),
    key(
        "REVIEW_AGENT",
        Some("--review-agent"),
        DefaultValue::Unset,
        "a profile name: claude, codex, gemini, opencode, copilot, aider, goose, cursor, or NAME for .hank/agents/NAME.toml",
        "An independent reviewer, read-only, before the run stops as done (another vendor's is best); unset = no review",
    ),
    key(
        "REVIEW_MODEL",
        None,
        DefaultValue::Unset,
        "a model name of the reviewer's CLI",
        "The reviewer's model (unset: its CLI's default)",
    ),
    key(
        "REVIEW_AGENT_CMD",
        None,
        DefaultValue::Unset,
        "a command name or path",
        "The reviewer's program, as CLAUDE_CODE_CMD is claude's (unset: its profile's)",
    ),
    key(
        "REVIEW_MAX_ROUNDS",
        None,
        DefaultValue::Text("3"),
        WHOLE_1,
        "Review rounds before an unapproved run stops (review_rejected)",
    ),
    key(
        "REVIEW_MAX_SHARE",
        None,
        DefaultValue::Text("0.3"),
        "a fraction from 0 to 1",
        "Stop reviewing (review_budget) once reviews cost more than this share of the run",
    ),
    key(
        "VERIFY_COMMAND",
        Some("--verify"),
        DefaultValue::Unset,
        "a shell command line, e.g. cargo test --locked",
        "The project's own check, run with /bin/sh before hank accepts \"done\" (--no-verify: off for this run)",
    ),
    key(
        "VERIFY_TIMEOUT",
        Some("--verify-timeout"),
        DefaultValue::Text("10m"),
        "whole minutes or a duration like 90s, 2m, 1h",
        "Time limit of one run of VERIFY_COMMAND",
    ),
    key(
        "MAX_REJECTED_COMPLETIONS",
        None,
        DefaultValue::Text("3"),
        WHOLE_1,
        "Rejected \"done\" claims in a row before the run stops (verification_failed)",
    ),
    key(
        "VERIFY_AT_START",
        Some("--verify-at-start"),
        DefaultValue::Text("false"),
        BOOL,
        "Run VERIFY_COMMAND before loop 1 (a baseline the first loop is told about)",
    ),
    key(
        "VERIFY_EVERY_LOOP",
        Some("--verify-every-loop"),
        DefaultValue::Text("false"),
        BOOL,
        "Run VERIFY_COMMAND after every loop: its result is the tests' state",
    ),
    key(
        "CB_AUTO_RESET",
        Some("--auto-reset-circuit"),
        DefaultValue::Text("false"),
        BOOL,
        "An OPEN circuit is reset to CLOSED at start instead of stopping",
    ),
    key(
        "ENABLE_NOTIFICATIONS",
        Some("--notify"),
        DefaultValue::Text("false"),
        BOOL,
        "Desktop notification when the loop ends",
    ),
    key(
        "NOTIFY",
        None,
        DefaultValue::Unset,
        crate::policy::notify::TARGETS_EXPECTED,
        "Where to send what happened and what to do next: ntfy:URL, webhook:URL, slack:URL, comma-separated",
    ),
    key(
        "NOTIFY_EVENTS",
        None,
        DefaultValue::Text("all"),
        crate::policy::notify::EVENTS_EXPECTED,
        "Which events NOTIFY sends",
    ),
    key(
        "NEEDS_ANSWERS",
        None,
        DefaultValue::Text("exit"),
        "exit or wait",
        "When the agent only asks questions: exit 2 (needs_answers), or wait for `hank ctl answer` (at most ANSWER_TIMEOUT)",
    ),
    key(
        "ANSWER_TIMEOUT",
        None,
        DefaultValue::Text("8h"),
        "a duration like 8h, 90m, or a bare number of minutes",
        "With NEEDS_ANSWERS=wait: how long to wait for an answer before stopping with needs_answers",
    ),
    key(
        "SANDBOX",
        Some("--sandbox"),
        DefaultValue::Text("auto"),
        "auto, landlock or off",
        "Confine the agent's process tree with Landlock: auto (when the kernel has ABI >= 4, else a warning), landlock (exit 1 when unavailable), off",
    ),
    key(
        "SANDBOX_READ",
        None,
        DefaultValue::Text(
            "~/.cargo/bin ~/.cargo/registry ~/.cargo/git ~/.rustup ~/.npm/_cacache ~/.npm/_npx ~/.nvm ~/.pyenv",
        ),
        "paths separated by spaces (~ is HOME)",
        "Extra paths the sandboxed agent may read (toolchains' programs and caches); missing ones are skipped, and one that is or holds a credential file (~/.cargo/credentials.toml, ~/.npmrc, ~/.ssh…) is refused with a warning",
    ),
    key(
        "SANDBOX_WRITE",
        None,
        DefaultValue::Text(""),
        "absolute paths separated by spaces (~ is HOME)",
        "Extra paths the sandboxed agent may read and write",
    ),
    key(
        "SANDBOX_ALLOW_HOSTS",
        None,
        DefaultValue::Text(""),
        "host:port or host entries separated by spaces or commas (port 443 when left out)",
        "Hosts the sandboxed agent may reach through hank's egress proxy besides its API",
    ),
    key(
        "CONTROL_TOPIC",
        None,
        DefaultValue::Unset,
        "an ntfy topic URL, https://SERVER/TOPIC (http:// only to loopback)",
        "ntfy topic the running loop (and `hank ctl poll`) reads signed remote commands from (`hank ctl init` makes the key)",
    ),
    key(
        "CB_NO_PROGRESS_THRESHOLD",
        None,
        DefaultValue::Text("3"),
        WHOLE_1,
        "Loops without progress before the circuit opens",
    ),
    key(
        "CB_SAME_ERROR_THRESHOLD",
        None,
        DefaultValue::Text("5"),
        WHOLE_1,
        "Loops with the same error before the circuit opens",
    ),
    key(
        "CB_FAILURE_THRESHOLD",
        None,
        DefaultValue::Text("5"),
        WHOLE_1,
        "Consecutive failed calls before the circuit opens",
    ),
    key(
        "CB_OUTPUT_DECLINE_THRESHOLD",
        None,
        DefaultValue::Text("70"),
        "a percentage from 1 to 100",
        "Output shrink (%) without progress before the circuit opens",
    ),
    key(
        "CB_PERMISSION_DENIAL_THRESHOLD",
        None,
        DefaultValue::Text("2"),
        WHOLE_1,
        "Consecutive loops with permission denials before stopping",
    ),
    key(
        "CB_COOLDOWN_MINUTES",
        None,
        DefaultValue::Text("30"),
        "a whole number of minutes",
        "OPEN → HALF_OPEN after this long (at a later start)",
    ),
    key(
        "MAX_CONSECUTIVE_TEST_LOOPS",
        None,
        DefaultValue::Text("3"),
        WHOLE_1,
        "Test-only loops in a row before stopping",
    ),
    key(
        "RETRY_BACKOFF_SECONDS",
        None,
        DefaultValue::Text("30"),
        "a whole number of seconds",
        "Base of the exponential backoff after a failed call (capped at RETRY_BACKOFF_MAX)",
    ),
    key(
        "RETRY_BACKOFF_MAX",
        None,
        DefaultValue::Text("15m"),
        "whole minutes or a duration like 90s, 2m, 1h",
        "Longest wait between retries after failed calls",
    ),
    key(
        "MAX_OUTAGE_MINUTES",
        None,
        DefaultValue::Text("120"),
        "a whole number of minutes (0 = off)",
        "API outages (overloaded, 5xx, network, rate limits) end the run only after this long without a successful call; 0: they count like other failures",
    ),
    key(
        "LOG_RETENTION",
        None,
        DefaultValue::Text("200"),
        "a whole number of loops (0 = keep every log)",
        "Per-loop logs kept in .hank/logs/ (the newest loops; older ones are deleted)",
    ),
    key(
        "LOOP_DELAY_SECONDS",
        None,
        DefaultValue::Text("0"),
        "a whole number of seconds",
        "Pause between loops",
    ),
    key(
        "DELIVER",
        Some("--deliver"),
        DefaultValue::Text("none"),
        "none, branch or pr",
        "How the work is delivered: none (left in the working tree), branch (pushed to hank/<branch>) or pr (and a pull request); `hank run` delivers a verified completion, `hank deliver` the last finished run",
    ),
    key(
        "DELIVER_BRANCH",
        Some("--branch"),
        DefaultValue::Unset,
        "a git branch name, e.g. hank/login-form",
        "The branch the work is delivered on (default hank/<the branch you started from>)",
    ),
    key(
        "DELIVER_BASE",
        Some("--base"),
        DefaultValue::Unset,
        "a git branch name, e.g. main",
        "The branch the pull request targets (default: the branch you started from, else the remote's default branch)",
    ),
    key(
        "DELIVER_REMOTE",
        None,
        DefaultValue::Text("origin"),
        "the name of a git remote",
        "The remote the branch is pushed to",
    ),
    key(
        "DELIVER_ALLOW_FILES",
        None,
        DefaultValue::Unset,
        "a comma-separated list of paths or globs, e.g. config/prod.tfvars,*.pem",
        "Files a delivery may push although they look like secrets (every pushed commit is scanned by name and content; a hit refuses the push with secrets_in_commits)",
    ),
    key(
        "CI_WAIT",
        None,
        DefaultValue::Text("auto"),
        "auto, true or false",
        "Wait for the checks of the pushed commit: auto = with DELIVER=pr",
    ),
    key(
        "CI_TIMEOUT",
        None,
        DefaultValue::Text("60m"),
        "a duration like 60m, 2h, 900s, or a bare number of minutes",
        "Longest wait for the checks of the pushed commit to finish",
    ),
    key(
        "CI_APPEAR_TIMEOUT",
        None,
        DefaultValue::Text("10m"),
        "a duration like 10m, 90s, or a bare number of minutes",
        "No check within this long is \"no CI\" (ci_missing), never green",
    ),
    key(
        "MAX_CI_ROUNDS",
        None,
        DefaultValue::Text("3"),
        WHOLE_1,
        "Failing-CI rounds sent back to the agent before the run stops (ci_failed)",
    ),
    key(
        "REVIEW_LOOP",
        None,
        DefaultValue::Text("false"),
        BOOL,
        "Send \"changes requested\" reviews and new review comments back to the agent",
    ),
    key(
        "AUTO_MERGE",
        None,
        DefaultValue::Text("false"),
        BOOL,
        "Arm the forge's auto-merge once the head's checks exist and are green (never on red or absent checks)",
    ),
    key(
        "OPTIONAL_SECTIONS",
        None,
        DefaultValue::List {
            items: DEFAULT_OPTIONAL_SECTIONS,
            summary: None,
        },
        "a comma-separated list of section names",
        "fix_plan sections that need not be done",
    ),
];

/// Keys other hank commands write into `.hankrc` (accepted, informational for the loop).
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

/// The key of this name.
#[must_use]
pub fn find(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// A key `.hankrc` may hold: a setting or an informational key.
#[must_use]
pub fn is_known(name: &str) -> bool {
    find(name).is_some() || INFO_KEYS.contains(&name)
}

/// The `--help` line of the flag of key `name`: its meaning, the key and the default.
#[must_use]
pub fn flag_help(name: &str) -> String {
    match find(name) {
        Some(k) if k.default == DefaultValue::Unset => format!("{} [{}]", k.help, k.name),
        Some(k) => format!("{} [{}, default {}]", k.help, k.name, k.default.display()),
        None => name.to_string(),
    }
}

/// The closest key to a misspelt one (at most 3 edits away).
#[must_use]
pub fn suggest(unknown: &str) -> Option<&'static str> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The default SANDBOX_READ grants the toolchains' programs and caches and never a
    /// credential file (`~/.cargo` holds the crates.io token: only its `bin`, `registry`, `git`).
    #[test]
    fn the_default_sandbox_read_grants_no_credential_file() {
        let home = std::path::Path::new("/home/u");
        let default = find("SANDBOX_READ")
            .and_then(|k| k.default.text())
            .unwrap_or_default();
        let entries: Vec<String> = default.split_whitespace().map(str::to_string).collect();
        assert!(entries.iter().any(|e| e == "~/.cargo/bin"), "{default}");
        assert!(
            crate::sandbox::refused_grants(&entries, &[], Some(home)).is_empty(),
            "{default}"
        );
        assert!(crate::sandbox::refused_grant("~/.cargo", Some(home)).is_some());
    }

    #[test]
    fn names_are_unique_and_well_formed() {
        for (i, k) in KEYS.iter().enumerate() {
            assert!(
                k.name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
                "{}",
                k.name
            );
            assert!(
                KEYS[i + 1..].iter().all(|o| o.name != k.name),
                "{} twice",
                k.name
            );
            assert!(
                !INFO_KEYS.contains(&k.name),
                "{} is also informational",
                k.name
            );
            if let Some(flag) = k.flag {
                assert!(flag.starts_with("--"), "{flag}");
                assert!(
                    KEYS[i + 1..].iter().all(|o| o.flag != Some(flag)),
                    "{flag} twice"
                );
            }
        }
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggest("MAX_CALL_PER_HOUR"), Some("MAX_CALLS_PER_HOUR"));
        assert_eq!(suggest("MAX_LOOP"), Some("MAX_LOOPS"));
        assert_eq!(suggest("SOMETHING_ELSE_ENTIRELY"), None);
    }

    #[test]
    fn flag_help_names_the_key_and_the_default() {
        assert_eq!(
            flag_help("MAX_CALLS_PER_HOUR"),
            "Maximum agent calls in any rolling hour (a hard cap that survives restarts) \
             [MAX_CALLS_PER_HOUR, default 100]"
        );
        assert_eq!(
            flag_help("CLAUDE_MODEL"),
            "Claude model (alias or name) [CLAUDE_MODEL]"
        );
    }

    /// `hank run --help` takes each flag's help from the table.
    #[test]
    fn run_help_comes_from_the_table() {
        use clap::CommandFactory;
        let cmd = crate::cli::Cli::command();
        for k in KEYS {
            let Some(flag) = k.flag else { continue };
            let long = flag.trim_start_matches("--");
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .unwrap_or_else(|| panic!("{flag} is not a `hank run` flag"));
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            assert!(
                help.contains(k.name),
                "{flag}: {help:?} does not name {}",
                k.name
            );
            if k.name != "SESSION_CONTINUITY" {
                assert_eq!(help, flag_help(k.name), "{flag}");
            }
        }
    }

    /// One row of the configuration table of `docs/settings.md`: `| key | flag | default | meaning |`.
    fn readme_rows(readme: &str) -> Vec<(String, String, String)> {
        let section = readme
            .split("\n## Configuration\n")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .unwrap_or_else(|| panic!("docs/settings.md has no `## Configuration` section"));
        let plain = |cell: &str| cell.replace('`', "").trim().to_string();
        section
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| {
                let cells: Vec<String> = l.replace("\\|", "/").split('|').map(plain).collect();
                assert!(cells.len() >= 5, "README row has too few cells: {l}");
                (cells[1].clone(), cells[2].clone(), cells[3].clone())
            })
            .collect()
    }

    /// What differs between the README's table and [`KEYS`], one line per row.
    fn readme_problems(readme: &str) -> Vec<String> {
        let rows = readme_rows(readme);
        let mut problems = Vec::new();
        for k in KEYS {
            let Some((_, flag, default)) = rows.iter().find(|(name, _, _)| name == k.name) else {
                problems.push(format!("{}: no row in the README table", k.name));
                continue;
            };
            let flags: Vec<&str> = flag
                .split(|c: char| c.is_whitespace() || c == ',')
                .collect();
            match k.flag {
                Some(f) if !flags.contains(&f) => problems.push(format!(
                    "{}: the README says flag `{flag}`, the key table says `{f}`",
                    k.name
                )),
                None if !flag.is_empty() => problems.push(format!(
                    "{}: the README says flag `{flag}`, the key table has no flag",
                    k.name
                )),
                _ => {}
            }
            let want = k.default.display();
            // The README may add a remark after the value: `0 (unlimited)`.
            let same = *default == want
                || default
                    .strip_prefix(want.as_str())
                    .is_some_and(|rest| rest.starts_with(" ("));
            if !same {
                problems.push(format!(
                    "{}: the README says default `{default}`, the key table says `{want}`",
                    k.name
                ));
            }
        }
        for (name, _, _) in &rows {
            if find(name).is_none() {
                problems.push(format!("{name}: a README row but not a key"));
            }
        }
        problems
    }

    /// The README's table names every key with its flag and its default, and nothing else.
    #[test]
    fn readme_configuration_table_matches_the_keys() {
        let problems = readme_problems(include_str!("../../docs/settings.md"));
        assert!(
            problems.is_empty(),
            "docs/settings.md's configuration table differs from settings::keys::KEYS:\n  {}",
            problems.join("\n  ")
        );
    }

    #[test]
    fn readme_check_names_the_row_that_differs() {
        let readme = include_str!("../../docs/settings.md")
            .replace(
                "| `MAX_LOOPS` | `--max-loops N` | 0 (unlimited) |",
                "| `MAX_LOOPS` | `--max-loops N` | 7 |",
            )
            .replace(
                "| `LOOP_DELAY_SECONDS` | |",
                "| `LOOP_DELAY_SECONDS` | `--delay` |",
            )
            .replace("| `CLAUDE_MODEL` |", "| `CLAUDE_MODELS` |");
        assert_eq!(
            readme_problems(&readme),
            vec![
                "CLAUDE_MODEL: no row in the README table",
                "MAX_LOOPS: the README says default `7`, the key table says `0`",
                "LOOP_DELAY_SECONDS: the README says flag `--delay`, the key table has no flag",
                "CLAUDE_MODELS: a README row but not a key",
            ]
        );
    }

    /// The commented defaults in the `.hankrc` template are the table's defaults.
    #[test]
    fn hankrc_template_shows_the_defaults() {
        let template = include_str!("../../templates/hankrc");
        let mut seen = 0;
        for line in template.lines() {
            let line = line.trim_start_matches('#');
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            let Some(k) = find(name) else { continue };
            let value = value.trim_matches('"');
            if value.contains("{{") {
                continue;
            }
            seen += 1;
            let want = k.default.text().unwrap_or_default();
            assert_eq!(value, want, "templates/hankrc: {name}");
        }
        assert!(seen > 10, "only {seen} keys found in templates/hankrc");
    }
}
