//! The raw flag values the resolver reads first (flag > environment > `.hankrc` > default).

/// The command-line values of `hank run`, raw (validated by [`super::load`] so that errors can name
/// the flag). `crate::cli::RunArgs` is their clap definition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// Maximum agent calls in any rolling hour (MAX_CALLS_PER_HOUR, default 100).
    pub calls: Option<String>,
    /// Maximum tokens in any rolling hour, 0 = off (MAX_TOKENS_PER_HOUR, default 0).
    pub max_tokens_per_hour: Option<String>,
    /// Prompt file sent to the agent every loop (PROMPT_FILE, default .hank/PROMPT.md).
    pub prompt: Option<String>,
    /// Agent timeout per loop: minutes, or 90s / 2m / 1h (CLAUDE_TIMEOUT_MINUTES, default 15).
    pub timeout: Option<String>,
    /// Stream the agent's output live (stream-json) (LIVE_OUTPUT).
    pub live: bool,
    /// More detail on stderr (VERBOSE).
    pub verbose: bool,
    /// Agent output format: json or text (CLAUDE_OUTPUT_FORMAT, default json).
    pub output_format: Option<String>,
    /// Comma-separated tools the agent may use (ALLOWED_TOOLS).
    pub allowed_tools: Option<String>,
    /// Claude permission mode (CLAUDE_PERMISSION_MODE).
    pub permission_mode: Option<String>,
    /// Claude model (CLAUDE_MODEL).
    pub model: Option<String>,
    /// Start a fresh agent session every loop (SESSION_CONTINUITY=false).
    pub no_continue: bool,
    /// Hours after which a session is not resumed (SESSION_EXPIRY_HOURS, default 24).
    pub session_expiry: Option<String>,
    /// Stop after N loops in this run, 0 = unlimited (MAX_LOOPS).
    pub max_loops: Option<String>,
    /// Stop when this run has cost this many USD, 0 = unlimited (MAX_COST_USD).
    pub max_cost: Option<String>,
    /// On a subscription usage limit: wait for the reset, or exit (ON_USAGE_LIMIT, default wait).
    pub on_usage_limit: Option<String>,
    /// The agent command: a path or a name on PATH (CLAUDE_CODE_CMD, default claude).
    pub claude_cmd: Option<String>,
    /// An OPEN circuit is reset to CLOSED at start instead of stopping (CB_AUTO_RESET).
    pub auto_reset_circuit: bool,
    /// Print the agent command and prompt for one loop, call nothing, exit 0.
    pub dry_run: bool,
    /// Desktop notification when the loop ends (ENABLE_NOTIFICATIONS).
    pub notify: bool,
    /// JSON-lines events on stdout (human output stays on stderr).
    pub json: bool,
    /// Run inside tmux with a live output pane and the dashboard.
    pub monitor: bool,
}
