//! Command-line definitions (clap derive) — nothing else. Values stay raw strings here;
//! `settings` validates them so errors can name the flag, key or `.hankrc` line. The options
//! of `setup`, `enable`, `enable-ci`, `import` ([`crate::project::args`]) and `monitor`
//! ([`crate::monitor::args`]), and the flags of `hank run` that are settings
//! ([`crate::settings::Flags`]), are defined once, next to the code that reads them, and used
//! here.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! the clap parser (values stay strings); used only by `lib.rs` and `commands/`. The options of
//! setup / enable / enable-ci / import (`project/args.rs`), monitor (`monitor/args.rs`) and `hank
//! run`'s settings flags (`settings/flags.rs`, `Flags`) are defined once there, with their clap
//! attributes, and passed as they are; no other module names clap (`architecture.rs`)

// `[KEY, default …]` in the help texts below is shown by `--help`, not a doc link.
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::monitor::MonitorArgs;
use crate::project::{EnableArgs, EnableCiArgs, ImportArgs, SetupArgs};
use crate::settings::{Flags, keys};

/// Runs Claude Code in a loop over your project and stops it at the right moment.
#[derive(Debug, Parser)]
#[command(
    name = "hank",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true,
    after_help = "Without a subcommand, `hank` runs the loop (`hank run`).\n\
                  Exit codes: 0 done, 1 error, 2 halted by a safety rule, 3 stopped at a limit, 130 interrupted."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// The loop's flags, for bare `hank`.
    #[command(flatten)]
    pub run: RunArgs,

    /// Print the loop status (same as `hank status`).
    #[arg(long, conflicts_with_all = ["reset_circuit", "reset_session", "circuit_status"])]
    pub status: bool,

    /// Reset the circuit breaker to CLOSED (same as `hank reset circuit`).
    #[arg(long)]
    pub reset_circuit: bool,

    /// Forget the agent session (same as `hank reset session`).
    #[arg(long)]
    pub reset_session: bool,

    /// Show the circuit breaker (same as `hank circuit`).
    #[arg(long)]
    pub circuit_status: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the loop in the current project (the default).
    Run(Box<RunArgs>),
    /// Live dashboard of a running or finished loop.
    Monitor(MonitorArgs),
    /// Print `.hank/status.json` readably.
    Status(StatusArgs),
    /// Create a new project folder ready for the loop.
    Setup(SetupArgs),
    /// Interactive wizard that adds hank to an existing project.
    Enable(EnableArgs),
    /// Add hank to an existing project without questions (for scripts and CI).
    EnableCi(EnableCiArgs),
    /// Turn a PRD or spec document into `.hank/` files.
    Import(ImportArgs),
    /// Move a flat layout (root PROMPT.md, fix_plan.md, …) into `.hank/`.
    Migrate(MigrateArgs),
    /// Analyze a saved agent output (e.g. `.hank/logs/loop-00003.out`) and explain it.
    Analyze(AnalyzeArgs),
    /// Manual overrides: reset the circuit breaker or the agent session.
    Reset(ResetArgs),
    /// Show the circuit breaker state and its recent transitions.
    Circuit(CircuitArgs),
    /// Steer the running loop or fleet: pause, resume, stop, retry-now, note, answer, set; status;
    /// init (the key of signed remote commands); poll (read CONTROL_TOPIC); sign.
    Ctl(CtlArgs),
    /// Run the project's check (VERIFY_COMMAND) now and print the result.
    Verify(VerifyArgs),
    /// What each fix_plan item cost: loops, calls, cost, tokens, wall time, windows used.
    Report(ReportArgs),
    /// Deliver the last finished run's verified work now: branch, commit, push, pull request
    /// with hank's evidence, then the checks of the pushed commit (the verdict is the exit code).
    Deliver(DeliverArgs),
    /// Check claude, git, tmux, the project layout and the configuration.
    Doctor(DoctorArgs),
    /// List the agent profiles (claude, codex, gemini, opencode, the project's own) and
    /// whether each is installed.
    Agents(AgentsArgs),
    /// Run the plan's `##` sections as parallel tasks, each in its own worktree, under one
    /// budget, merged into one integration branch (or one task per CI job: `plan`,
    /// `run-task`).
    Fleet(FleetArgs),
    /// The issue tracker as a work queue: each open issue carrying the label becomes a fleet
    /// task (one claim per issue on origin), delivered as a pull request that closes it, with
    /// hank's comment and labels on the issue.
    Watch(WatchArgs),
    /// A read-only live web view of every project's runs and fleets on 127.0.0.1 (the URL
    /// with its token is the first line printed).
    Serve(ServeArgs),
    /// Print shell completions.
    Completions(CompletionsArgs),
    /// Configuration changed during a run: see it (`status`) or approve it (`accept`).
    Config(ConfigArgs),
    /// Carry the run state from machine to machine: `save`, `restore`, `claim` (a ref under
    /// refs/hank/state/ on the remote, or a file with --to-dir / --from-dir).
    State(StateArgs),
    /// Internal: the `hank --monitor` loop pane's start (reads and deletes an environment
    /// file, then runs the command with that environment).
    #[command(name = "__with-env", hide = true)]
    WithEnv(WithEnvArgs),
    /// Internal: the sandboxed agent's start (confines itself with Landlock, then runs the
    /// agent in place: `crate::proc::agent::enter_sandbox`).
    #[command(name = "__sandbox", hide = true)]
    Sandbox(SandboxArgs),
}

/// `hank serve [--port P] [--bind ADDR]`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ServeArgs {
    /// The port to listen on [default: a free one].
    #[arg(long, value_name = "P")]
    pub port: Option<String>,
    /// The address to listen on [default: 127.0.0.1]; another than loopback serves the
    /// machine's network (the token is required either way).
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
}

/// `hank fleet [OPTIONS] [RUN FLAGS…]`, `hank fleet status [--json]`, `hank fleet plan
/// [--json]` and `hank fleet run-task NAME [RUN FLAGS…]`.
#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct FleetArgs {
    #[command(subcommand)]
    pub action: Option<FleetAction>,
    /// Tasks running at once.
    #[arg(long, value_name = "N", default_value = "2")]
    pub agents: String,
    /// The integration branch the finished tasks are merged into (created from HEAD)
    /// [default: hank/fleet]; with `--deliver pr`, one pull request of this branch.
    #[arg(long, value_name = "BRANCH")]
    pub into: Option<String>,
    /// A task starts only while this much memory is available (e.g. 2G, 512M)
    /// [FLEET_MIN_FREE_MEMORY, default 2G].
    #[arg(long, value_name = "SIZE")]
    pub min_free_memory: Option<String>,
    /// Merges of a task that conflict or turn the check red before it fails
    /// [MAX_MERGE_ATTEMPTS, default 2].
    #[arg(long, value_name = "N")]
    pub max_merge_attempts: Option<String>,
    /// JSON events on stdout, one per line (the fleet's and every task's, each with its task).
    #[arg(long)]
    pub json: bool,
    /// Print the tasks, their waves and what would run; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Run with uncommitted changes in the working tree (the tasks start from the last
    /// commit: what is not committed is left out, and said so).
    #[arg(long)]
    pub allow_dirty: bool,
    /// Queue the failed tasks again (every one, or the one named), each on its kept branch,
    /// then run the fleet.
    #[arg(long, value_name = "TASK", num_args = 0..=1, default_missing_value = "")]
    pub retry: Option<String>,
    /// Run the fleet in tmux: the supervisor, every running task's live output
    /// (`hank monitor --live`) and the dashboard.
    #[arg(long)]
    pub monitor: bool,
    /// With --monitor: close the layout as soon as the fleet ends (default: wait for a key).
    #[arg(long)]
    pub monitor_exit: bool,
    /// Internal (the `hank fleet --monitor` loop pane): record the exit code in
    /// `.hank/logs/tmux-exit-code`.
    #[arg(long, hide = true)]
    pub record_exit_code: bool,
    /// Flags of `hank run` given to every task (`--calls 3`, `--verify CMD`, `--agent NAME`…).
    #[arg(
        value_name = "RUN FLAGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub run_flags: Vec<String>,
}

/// `hank watch [OPTIONS] [RUN FLAGS…]`.
#[derive(Debug, Clone, Args)]
pub(crate) struct WatchArgs {
    /// The tracker: github, gitlab, linear, jira, trello, plane or shortcut [TRACKER; default:
    /// the origin's forge]; credentials from the environment (docs/trackers.md).
    #[arg(long, value_name = "KIND")]
    pub tracker: Option<String>,
    /// The label that makes an open issue a task [TRACKER_LABEL, default hank].
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// Tasks running at once.
    #[arg(long, value_name = "N", default_value = "2")]
    pub agents: String,
    /// How each issue's work leaves the machine: pr (a pull request that closes it) or
    /// branch.
    #[arg(long, value_name = "MODE", default_value = "pr")]
    pub deliver: String,
    /// Take what is open now, wait for it to finish, exit with the fleet's exit code.
    #[arg(long)]
    pub once: bool,
    /// Between two polls [WATCH_INTERVAL, default 60s].
    #[arg(long, value_name = "DURATION")]
    pub interval: Option<String>,
    /// List the labelled issues, which would be taken and why the others are not; take none.
    #[arg(long)]
    pub dry_run: bool,
    /// Run with uncommitted changes in the working tree (left out of the tasks, said so).
    #[arg(long)]
    pub allow_dirty: bool,
    /// Flags of `hank run` given to every task (`--calls 3`, `--verify CMD`, `--agent NAME`…).
    #[arg(
        value_name = "RUN FLAGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub run_flags: Vec<String>,
}

#[derive(Debug, Clone, Subcommand)]
pub(crate) enum FleetAction {
    /// The fleet's tasks and their states (`.hank/fleet.json`).
    Status {
        /// As JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// The tasks that can start now (their `after` merged, not delivered, not claimed by
    /// another job): one per line, or with --json an array for a CI matrix.
    Plan(FleetPlanArgs),
    /// Run exactly one task in this checkout on its branch hank/<slug>: claim and restore its
    /// state (refs/hank/state/<slug>), run its items, save the state, deliver per DELIVER.
    RunTask(FleetRunTaskArgs),
    /// Remove the worktrees an ended fleet kept for the next one (one per agent and the
    /// integration worktree's, outside the project); a task's own worktree is never removed.
    Clean,
}

/// `hank fleet plan [--json]`.
#[derive(Debug, Clone, Args)]
pub(crate) struct FleetPlanArgs {
    /// As a JSON array on stdout (name, slug, branch, after, items of each task).
    #[arg(long)]
    pub json: bool,
    /// The remote holding the task branches and state refs (`none`: look at nothing remote).
    #[arg(long, value_name = "NAME", default_value = "origin")]
    pub remote: String,
}

/// `hank fleet run-task NAME [RUN FLAGS…]`.
#[derive(Debug, Clone, Args)]
pub(crate) struct FleetRunTaskArgs {
    /// The task: its `##` heading text or its slug.
    pub name: String,
    /// The remote holding the task branch and its state ref (`none`: keep everything local).
    #[arg(long, value_name = "NAME", default_value = "origin")]
    pub remote: String,
    /// Who this job is, for the claim [default: HANK_STATE_OWNER, else the Actions
    /// run/attempt/job, else host:pid].
    #[arg(long, value_name = "ID")]
    pub owner: Option<String>,
    /// How long the claim holds, in minutes.
    #[arg(long, value_name = "MINUTES", default_value_t = 360)]
    pub ttl: u32,
    /// Flags of `hank run` for the task's loop (`--max-runtime 5h`, `--calls 3`, …).
    #[arg(
        value_name = "RUN FLAGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub run_flags: Vec<String>,
}

/// `hank run`'s flags alone (a fleet checks the flags it passes on to its tasks).
#[derive(Debug, Parser)]
#[command(name = "hank fleet", no_binary_name = true)]
pub(crate) struct RunFlagsOnly {
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct StateArgs {
    #[command(subcommand)]
    pub action: StateAction,
}

#[derive(Debug, Clone, Subcommand)]
pub(crate) enum StateAction {
    /// Save the run state to refs/hank/state/<task or run> on the remote (compare-and-swap),
    /// or into a folder with --to-dir.
    Save(StateSaveArgs),
    /// Merge the saved run state into the local one (never loosening it), optionally claiming
    /// the task.
    Restore(StateRestoreArgs),
    /// Claim a task so that no other job runs it until the lease expires.
    Claim(StateClaimArgs),
    /// Print the job summary (Markdown, for $GITHUB_STEP_SUMMARY): how the run ended, when it
    /// continues, the receipts table, the pull request.
    Summary,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct StateCommon {
    /// The task whose state this is [default: the whole project's run, `run`].
    #[arg(long, value_name = "NAME")]
    pub task: Option<String>,
    /// The remote holding the state refs.
    #[arg(long, value_name = "NAME", default_value = "origin")]
    pub remote: String,
    /// Who this job is [default: HANK_STATE_OWNER, else the Actions run/attempt/job, else
    /// host:pid].
    #[arg(long, value_name = "ID")]
    pub owner: Option<String>,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct StateSaveArgs {
    #[command(flatten)]
    pub common: StateCommon,
    /// Write the bundle into this folder (an Actions artifact) instead of pushing.
    #[arg(long, value_name = "DIR")]
    pub to_dir: Option<std::path::PathBuf>,
    /// Give up this job's claim on the task with the save.
    #[arg(long)]
    pub release: bool,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct StateRestoreArgs {
    #[command(flatten)]
    pub common: StateCommon,
    /// Read the bundle from this folder instead of the remote.
    #[arg(long, value_name = "DIR")]
    pub from_dir: Option<std::path::PathBuf>,
    /// Claim the task as well (see `hank state claim`).
    #[arg(long)]
    pub claim: bool,
    /// How long a claim holds, in minutes.
    #[arg(long, value_name = "MINUTES", default_value_t = 360)]
    pub ttl: u32,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct StateClaimArgs {
    #[command(flatten)]
    pub common: StateCommon,
    /// How long the claim holds, in minutes.
    #[arg(long, value_name = "MINUTES", default_value_t = 360)]
    pub ttl: u32,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    pub action: ConfigAction,
}

#[derive(Debug, Clone, Copy, Subcommand)]
pub(crate) enum ConfigAction {
    /// List configuration changes waiting for approval (exit 0 either way).
    Status,
    /// Approve the configuration as it is now.
    Accept,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct WithEnvArgs {
    pub file: PathBuf,
    #[arg(last = true, required = true)]
    pub command: Vec<std::ffi::OsString>,
}

/// `hank __sandbox --read P… --write P… --port N -- PROGRAM ARGS…` (read as they are).
#[derive(Debug, Clone, Args)]
pub(crate) struct SandboxArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub args: Vec<std::ffi::OsString>,
}

/// `hank run`'s command line: the flags that are settings ([`Flags`], each also a `.hankrc`
/// key and an environment variable) and the ones that steer the command itself.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub flags: Flags,
    /// Run inside tmux with a live output pane and the dashboard.
    #[arg(long)]
    pub monitor: bool,
    /// Run even from inside a Claude Code session (CLAUDECODE=1) without a terminal to ask.
    #[arg(long)]
    pub force: bool,
    /// Approve configuration changed during the last run (same as `hank config accept`).
    #[arg(long)]
    pub accept_config: bool,
    /// Internal (the `--monitor` loop pane): record the exit code in
    /// `.hank/logs/tmux-exit-code`.
    #[arg(long, hide = true)]
    pub record_exit_code: bool,
    /// With --monitor: close the layout as soon as the loop ends (default: wait for a key).
    #[arg(long, requires = "monitor")]
    pub monitor_exit: bool,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct StatusArgs {
    /// Print the raw status.json.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ReportArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Only runs from this number on (1 = the first run), or loops since a date
    /// (2026-11-24, local midnight) or an RFC 3339 time.
    #[arg(long, value_name = "RUN|DATE")]
    pub since: Option<String>,
    /// Per task and per item across the last `hank fleet` (each task's runs, kept by the
    /// fleet in the per-user folder).
    #[arg(long)]
    pub fleet: bool,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct VerifyArgs {
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// The command to run instead of VERIFY_COMMAND.
    #[arg(long, value_name = "CMD")]
    pub command: Option<String>,
    #[arg(long, value_name = "D", help = keys::flag_help("VERIFY_TIMEOUT"))]
    pub timeout: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct AnalyzeArgs {
    /// The saved agent stdout (e.g. `.hank/logs/loop-00003.out`); `-` reads stdin.
    pub file: PathBuf,
    /// The agent's stderr, if saved (defaults to FILE with `.err` when it exists).
    #[arg(long, value_name = "FILE")]
    pub stderr: Option<PathBuf>,
    /// The agent's exit code, if known.
    #[arg(long, value_name = "CODE", allow_negative_numbers = true)]
    pub exit_code: Option<i32>,
    /// Print the analysis as JSON.
    #[arg(long)]
    pub json: bool,
    /// The output format the agent was asked for: json, stream-json, text or auto (default:
    /// what .hank/logs/hank.log says for that loop, else auto). In json and stream-json an
    /// answer that is not the client's JSON is malformed.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct ResetArgs {
    /// What to reset.
    #[arg(value_enum)]
    pub what: ResetWhat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ResetWhat {
    /// The circuit breaker (→ CLOSED, counters cleared).
    Circuit,
    /// The agent session (the next loop starts a new conversation).
    Session,
    /// The saved usage-limit or backoff wait, and the agents' usage limits: the next start
    /// calls at once.
    Wait,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct CtlArgs {
    /// Send the command signed to CONTROL_TOPIC instead of this project's journal (needs
    /// the key from `hank ctl init`).
    #[arg(long)]
    pub remote: bool,
    /// `init`: replace an existing key.
    #[arg(long)]
    pub rotate: bool,
    /// `status`: print as JSON.
    #[arg(long)]
    pub json: bool,
    /// `poll`: read the topic again every 15 s until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// With a running `hank fleet`: `note`, `answer`, `set` or `retry-now` for this task only
    /// (its name in `hank fleet status`).
    #[arg(long, value_name = "NAME")]
    pub task: Option<String>,
    /// `settings::live::ctl_words_help`: the commands, and the keys `set` takes.
    #[arg(
        required = true,
        num_args = 1..,
        value_name = "COMMAND",
        help = crate::settings::live::ctl_words_help()
    )]
    pub words: Vec<String>,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct CircuitArgs {
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct AgentsArgs {
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
    /// Approve configuration changed during the last run (same as `hank config accept`).
    #[arg(long)]
    pub accept_config: bool,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct DeliverArgs {
    /// branch (push only) or pr (push and open a pull request) [DELIVER; none means pr here]
    #[arg(long, value_name = "branch|pr")]
    pub deliver: Option<String>,
    #[arg(long, value_name = "NAME", help = keys::flag_help("DELIVER_BRANCH"))]
    pub branch: Option<String>,
    /// The branch the pull request targets (default: the branch you are on, else the
    /// remote's default branch).
    #[arg(long, value_name = "NAME")]
    pub base: Option<String>,
    /// Do not wait for the checks of the pushed commit, whatever CI_WAIT says.
    #[arg(long)]
    pub no_wait: bool,
    /// Deliver even when the last run did not end with verified work (the body says how it
    /// ended).
    #[arg(long)]
    pub force: bool,
    /// Print the delivery record (as `.hank/delivery.json`) on stdout.
    #[arg(long)]
    pub json: bool,
    /// Deliver a new change set of the workspace's branch NAME in each repository (what a
    /// fleet over a workspace does at its end).
    #[arg(long, value_name = "NAME", hide = true)]
    pub change_set: Option<String>,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct DoctorArgs {
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
    /// Approve configuration changed during the last run (same as `hank config accept`).
    #[arg(long)]
    pub accept_config: bool,
    #[arg(long, value_name = "PATH", help = keys::flag_help("CLAUDE_CODE_CMD"))]
    pub claude_cmd: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct MigrateArgs {
    /// Project folder (default: current directory).
    pub dir: Option<PathBuf>,
    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}
