//! The raw flag values the resolver reads first (flag > environment > `.hankrc` > default),
//! defined once with their clap attributes: `crate::cli::RunArgs` flattens them into `hank
//! run` (and bare `hank`, `hank fleet`'s and `hank fleet run-task`'s run flags) and hands them
//! to [`super::load`] as they are.

// `[KEY, default …]` in the help texts below is shown by `--help`, not a doc link.
#![allow(rustdoc::broken_intra_doc_links)]

use super::keys;

/// The command-line values of `hank run` that are settings, raw: [`super::resolve`] validates
/// them so that errors can name the flag. Each keyed flag is also a `.hankrc` key and an
/// environment variable; its help (with the key's default) comes from [`keys::KEYS`] through
/// [`keys::flag_help`].
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct Flags {
    #[arg(short = 'c', long = "calls", value_name = "N", help = keys::flag_help("MAX_CALLS_PER_HOUR"))]
    pub calls: Option<String>,
    #[arg(long, value_name = "N", help = keys::flag_help("MAX_TOKENS_PER_HOUR"))]
    pub max_tokens_per_hour: Option<String>,
    #[arg(short = 'p', long = "prompt", value_name = "FILE", help = keys::flag_help("PROMPT_FILE"))]
    pub prompt: Option<String>,
    #[arg(short = 't', long = "timeout", value_name = "DURATION", help = keys::flag_help("CLAUDE_TIMEOUT_MINUTES"))]
    pub timeout: Option<String>,
    #[arg(long, value_name = "DURATION", help = keys::flag_help("IDLE_TIMEOUT"))]
    pub idle_timeout: Option<String>,
    #[arg(long, value_name = "DURATION", help = keys::flag_help("FIRST_OUTPUT_TIMEOUT"))]
    pub first_output_timeout: Option<String>,
    #[arg(long, value_name = "MODE", help = keys::flag_help("SANDBOX"))]
    pub sandbox: Option<String>,
    #[arg(long, value_name = "WHICH", help = keys::flag_help("CLIENT_SETTINGS"))]
    pub client_settings: Option<String>,
    #[arg(long, help = keys::flag_help("LIVE_OUTPUT"))]
    pub live: bool,
    #[arg(short = 'v', long, help = keys::flag_help("VERBOSE"))]
    pub verbose: bool,
    #[arg(long, value_name = "FORMAT", help = keys::flag_help("CLAUDE_OUTPUT_FORMAT"))]
    pub output_format: Option<String>,
    #[arg(long, value_name = "LIST", help = keys::flag_help("ALLOWED_TOOLS"))]
    pub allowed_tools: Option<String>,
    #[arg(long, value_name = "MODE", help = keys::flag_help("CLAUDE_PERMISSION_MODE"))]
    pub permission_mode: Option<String>,
    #[arg(long, value_name = "MODEL", help = keys::flag_help("CLAUDE_MODEL"))]
    pub model: Option<String>,
    /// Start a fresh agent session every loop [SESSION_CONTINUITY=false].
    #[arg(long)]
    pub no_continue: bool,
    #[arg(long, value_name = "HOURS", help = keys::flag_help("SESSION_EXPIRY_HOURS"))]
    pub session_expiry: Option<String>,
    #[arg(long, value_name = "N", help = keys::flag_help("MAX_LOOPS"))]
    pub max_loops: Option<String>,
    #[arg(long, value_name = "DURATION", help = keys::flag_help("MAX_RUNTIME"))]
    pub max_runtime: Option<String>,
    #[arg(long, value_name = "USD", help = keys::flag_help("MAX_COST_USD"))]
    pub max_cost: Option<String>,
    #[arg(long, value_name = "wait|exit", help = keys::flag_help("ON_USAGE_LIMIT"))]
    pub on_usage_limit: Option<String>,
    #[arg(long, value_name = "WINDOW=PERCENT,…", help = keys::flag_help("MAX_WINDOW_PERCENT"))]
    pub max_window_percent: Option<String>,
    #[arg(long, value_name = "PATH", help = keys::flag_help("CLAUDE_CODE_CMD"))]
    pub claude_cmd: Option<String>,
    #[arg(long, value_name = "NAME", help = keys::flag_help("AGENT"))]
    pub agent: Option<String>,
    #[arg(long, value_name = "NAME", help = keys::flag_help("REVIEW_AGENT"))]
    pub review_agent: Option<String>,
    #[arg(long, value_name = "LIST", help = keys::flag_help("AGENTS"))]
    pub agents: Option<String>,
    #[arg(long, value_name = "LIST", help = keys::flag_help("AGENT_MODELS"))]
    pub agent_models: Option<String>,
    #[arg(long, value_name = "CMD", help = keys::flag_help("VERIFY_COMMAND"))]
    pub verify: Option<String>,
    /// No verification in this run, whatever VERIFY_COMMAND says.
    #[arg(long, conflicts_with = "verify")]
    pub no_verify: bool,
    #[arg(long, value_name = "D", help = keys::flag_help("VERIFY_TIMEOUT"))]
    pub verify_timeout: Option<String>,
    #[arg(long, help = keys::flag_help("VERIFY_AT_START"))]
    pub verify_at_start: bool,
    #[arg(long, help = keys::flag_help("VERIFY_EVERY_LOOP"))]
    pub verify_every_loop: bool,
    #[arg(long, help = keys::flag_help("CB_AUTO_RESET"))]
    pub auto_reset_circuit: bool,
    #[arg(long, value_name = "none|branch|pr", help = keys::flag_help("DELIVER"))]
    pub deliver: Option<String>,
    #[arg(long, value_name = "NAME", help = keys::flag_help("DELIVER_BRANCH"))]
    pub branch: Option<String>,
    #[arg(long, value_name = "NAME", help = keys::flag_help("DELIVER_BASE"))]
    pub base: Option<String>,
    /// Print the agent command and prompt for one loop, call nothing, exit 0.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long, help = keys::flag_help("ENABLE_NOTIFICATIONS"))]
    pub notify: bool,
    /// JSON-lines events on stdout (human output stays on stderr).
    #[arg(long)]
    pub json: bool,
    /// The flags a command gives these values under its own names (key, flag): `hank verify
    /// --timeout` sets VERIFY_TIMEOUT, and an invalid value names `--timeout`, the flag typed.
    #[arg(skip)]
    pub named: &'static [(&'static str, &'static str)],
}

#[cfg(test)]
impl Flags {
    /// The settings flags of a `hank run` command line (`["--calls", "7"]`), parsed by this
    /// definition; a line it refuses fails the test.
    pub(crate) fn from_command_line(args: &[&str]) -> Self {
        #[derive(clap::Parser)]
        #[command(no_binary_name = true)]
        struct Line {
            #[command(flatten)]
            flags: Flags,
        }
        <Line as clap::Parser>::try_parse_from(args).unwrap().flags
    }
}
