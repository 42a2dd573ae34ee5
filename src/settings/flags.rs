//! The raw flag values the resolver reads first (flag > environment > `.hankrc` > default).

/// The command-line values of `hank run`, raw: [`super::resolve`] validates them so that
/// errors can name the flag. `crate::cli::RunArgs` is their clap definition; each key's flag,
/// default and meaning are in [`super::keys::KEYS`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// `--calls` (MAX_CALLS_PER_HOUR).
    pub calls: Option<String>,
    /// `--max-tokens-per-hour` (MAX_TOKENS_PER_HOUR).
    pub max_tokens_per_hour: Option<String>,
    /// `--prompt` (PROMPT_FILE).
    pub prompt: Option<String>,
    /// `--timeout` (CLAUDE_TIMEOUT_MINUTES).
    pub timeout: Option<String>,
    /// `--idle-timeout` (IDLE_TIMEOUT).
    pub idle_timeout: Option<String>,
    /// `--first-output-timeout` (FIRST_OUTPUT_TIMEOUT).
    pub first_output_timeout: Option<String>,
    /// `--client-settings` (CLIENT_SETTINGS).
    pub client_settings: Option<String>,
    /// `--live` (LIVE_OUTPUT).
    pub live: bool,
    /// `--verbose` (VERBOSE).
    pub verbose: bool,
    /// `--output-format` (CLAUDE_OUTPUT_FORMAT).
    pub output_format: Option<String>,
    /// `--allowed-tools` (ALLOWED_TOOLS).
    pub allowed_tools: Option<String>,
    /// `--permission-mode` (CLAUDE_PERMISSION_MODE).
    pub permission_mode: Option<String>,
    /// `--model` (CLAUDE_MODEL).
    pub model: Option<String>,
    /// `--no-continue` (SESSION_CONTINUITY=false).
    pub no_continue: bool,
    /// `--session-expiry` (SESSION_EXPIRY_HOURS).
    pub session_expiry: Option<String>,
    /// `--max-loops` (MAX_LOOPS).
    pub max_loops: Option<String>,
    /// `--max-runtime` (MAX_RUNTIME).
    pub max_runtime: Option<String>,
    /// `--max-cost` (MAX_COST_USD).
    pub max_cost: Option<String>,
    /// `--on-usage-limit` (ON_USAGE_LIMIT).
    pub on_usage_limit: Option<String>,
    /// `--max-window-percent` (MAX_WINDOW_PERCENT).
    pub max_window_percent: Option<String>,
    /// `--claude-cmd` (CLAUDE_CODE_CMD).
    pub claude_cmd: Option<String>,
    /// `--agent` (AGENT).
    pub agent: Option<String>,
    /// `--agents` (AGENTS).
    pub agents: Option<String>,
    /// `--agent-models` (AGENT_MODELS).
    pub agent_models: Option<String>,
    /// `--verify` (VERIFY_COMMAND).
    pub verify: Option<String>,
    /// `--no-verify`: no verification in this run, whatever VERIFY_COMMAND says.
    pub no_verify: bool,
    /// `--verify-timeout` (VERIFY_TIMEOUT).
    pub verify_timeout: Option<String>,
    /// `--verify-at-start` (VERIFY_AT_START).
    pub verify_at_start: bool,
    /// `--verify-every-loop` (VERIFY_EVERY_LOOP).
    pub verify_every_loop: bool,
    /// `--auto-reset-circuit` (CB_AUTO_RESET).
    pub auto_reset_circuit: bool,
    /// `--deliver` (DELIVER).
    pub deliver: Option<String>,
    /// `--branch` (DELIVER_BRANCH).
    pub branch: Option<String>,
    /// `--base` (DELIVER_BASE).
    pub base: Option<String>,
    /// `--dry-run`: print the agent command and prompt for one loop, call nothing (flag only).
    pub dry_run: bool,
    /// `--notify` (ENABLE_NOTIFICATIONS).
    pub notify: bool,
    /// `--json`: JSON-lines events on stdout (flag only).
    pub json: bool,
}
