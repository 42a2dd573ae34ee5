//! Hank runs an AI coding agent (Claude Code) in a loop over a project and stops it at the
//! right moment.
//!
//! Module map. The layers depend downwards only (checked by `tests/integration/architecture.rs`:
//! no cycles, clap only in `cli`/`commands` and the options files `project/args.rs`,
//! `monitor/args.rs`, `settings/flags.rs`, no I/O names in the pure core; clippy's
//! `disallowed_methods` denies the clock, files and processes inside `policy/` and
//! `analysis/`).
//!
//! | module | role |
//! |---|---|
//! | `cli` | the parser: every clap definition but the options of setup/enable/enable-ci/import and monitor, defined once next to their commands (`project::args`, `monitor::args`), and `hank run`'s settings flags (`settings::Flags`) |
//! | `commands` | one file per subcommand: resolve inputs, call the library, map to an exit code |
//! | `engine` | the loop's driver: executes `policy::run`'s steps through `effects::Effects` (reads hank's own files through `Settings`; every other effect is an `Effects` method) |
//! | `effects` | what the loop does to the world: the agent call, VERIFY_COMMAND, state/status/events/log/terminal, sleeping (`Real`) |
//! | [`settings`] | `.hankrc` + environment + flags → validated [`settings::Settings`], each value with its source |
//! | [`agent`] | the agent call: argv and loop context **\[pure\]**, an answer folded and judged (`agent::answer`) **\[pure\]**, client version, process groups, signals, secret redaction |
//! | [`analysis`] | agent output → [`analysis::Analysis`] **\[pure\]** |
//! | [`policy`] | breaker, budget, exit decision, fix_plan, session rules, progress facts, time **\[pure\]** |
//! | [`progress`] | measures a loop's progress: files (via [`worktree`]) and fix_plan items checked |
//! | [`worktree`] | what changed in the files: `git status` snapshots (pure `-z` parser), a walk outside git |
//! | `store` | the on-disk formats defined once (`store::schema`), atomic 0600 writes, lock, event log |
//! | [`http`] | hank's one HTTP client (`ureq`, rustls): timeouts, proxy, certificates |
//! | [`handoff`] | the run state handed from job to job: save, restore, claim of a state ref |
//! | [`report`] | human output on stderr: loop summaries, countdowns, live view, exit messages |
//! | `clock` | the wall clock, with the `HANK_NOW` test hook |
//! | `monitor` | `hank monitor` TUI and the `hank --monitor` tmux launcher |
//! | `project` | detect, task sources, templates, setup, enable, enable-ci, migrate, import |
//! | [`exit`], [`error`] | exit reasons and codes **\[pure\]**; typed errors |
//!
//! The loop, one iteration: integrity check → exit checks → breaker → budget (wait) →
//! record the call, spawn the agent → analyze → fold into state → decide → report.

/// `eprintln!` that never panics: a closed or broken stderr (an SSH drop, a closed window,
/// `hank run 2>&1 | head`) drops the text instead of killing hank mid-run; the log file keeps
/// what the loop did. Every human line on stderr goes through it.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `println!` that never panics (see [`errln!`]).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub mod agent;
pub mod analysis;
pub mod approval;
pub(crate) mod cli;
pub(crate) mod clock;
pub(crate) mod commands;
pub mod control;
pub mod deliver;
pub(crate) mod effects;
pub(crate) mod engine;
pub mod error;
pub mod exit;
pub mod fleet;
pub mod forge;
pub mod fsread;
pub mod git;
pub mod handoff;
pub mod http;
pub(crate) mod monitor;
pub mod notify;
pub mod policy;
pub mod proc;
pub mod progress;
pub(crate) mod project;
pub mod report;
pub mod sandbox;
pub mod sanitize;
pub(crate) mod serve;
pub mod settings;
pub mod stateref;
pub mod store;
pub mod tracker;
pub mod workspace;
pub mod worktree;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::error::HankError;

/// Program entry: `argv[0]` dispatch, parsing, running, error → exit code.
#[must_use]
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    ExitCode::from(run_with_args(args))
}

/// The sandbox's own small program, `hank-sandbox RULES -- PROGRAM ARGS…` (the same as `hank
/// __sandbox`, which stays for an install without it): the agent's start at every call, a
/// binary that holds only the confinement (`crate::proc::agent::enter_sandbox`), so that each
/// call does not load the whole of hank.
#[must_use]
pub fn sandbox_main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    ExitCode::from(match crate::proc::agent::enter_sandbox(&args) {
        Ok(code) => code,
        Err(err) => {
            report_error(&err);
            err.exit_code()
        }
    })
}

/// Maps an alias name (`hank-enable`, …) to the subcommand it stands for.
#[must_use]
pub fn alias_subcommand(argv0: &std::ffi::OsStr) -> Option<&'static str> {
    let name = std::path::Path::new(argv0).file_name()?.to_str()?;
    let name = name.strip_suffix(".exe").unwrap_or(name);
    match name {
        "hank-monitor" => Some("monitor"),
        "hank-setup" => Some("setup"),
        "hank-enable" => Some("enable"),
        "hank-enable-ci" => Some("enable-ci"),
        "hank-import" => Some("import"),
        "hank-migrate" => Some("migrate"),
        _ => None,
    }
}

/// Runs hank with the given argv (`argv[0]` included) and returns the exit code.
/// Can be called more than once in one process.
#[must_use]
pub fn run_with_args(mut args: Vec<OsString>) -> u8 {
    if let Some(sub) = args.first().and_then(|a| alias_subcommand(a)) {
        args[0] = OsString::from("hank");
        args.insert(1, OsString::from(sub));
    }
    // The sandboxed agent's start runs at every call: straight to it, without parsing the
    // whole command tree (`hank __sandbox` is internal; its arguments are read as they are).
    if args.get(1).is_some_and(|a| a == "__sandbox") {
        return match crate::proc::agent::enter_sandbox(&args[2..]) {
            Ok(code) => code,
            Err(err) => {
                report_error(&err);
                err.exit_code()
            }
        };
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(err) => {
            let code = match err.kind() {
                clap::error::ErrorKind::DisplayHelp
                | clap::error::ErrorKind::DisplayVersion
                | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => exit::OK,
                _ => exit::ERROR,
            };
            if code == exit::ERROR && wants_json_errors(&args) {
                // Scripts that asked for JSON get JSON, even for a bad flag.
                let first = err.to_string();
                let message = first.lines().next().unwrap_or("invalid arguments");
                let report = project::ci::CiReport::failure(&HankError::usage(
                    message.trim_start_matches("error: ").to_string(),
                ));
                if let Ok(json) = serde_json::to_string(&report) {
                    outln!("{json}");
                }
            }
            // Printing can only fail on a closed stream; nothing useful to do then.
            let _ = err.print();
            return code;
        }
    };
    match dispatch(cli, &args) {
        Ok(code) => code,
        Err(err) => {
            report_error(&err);
            err.exit_code()
        }
    }
}

/// `hank enable-ci … --json`: its errors, usage errors included, are JSON on stdout.
fn wants_json_errors(args: &[OsString]) -> bool {
    args.get(1).is_some_and(|a| a == "enable-ci") && args.iter().any(|a| a == "--json")
}

fn report_error(err: &HankError) {
    if let HankError::WithCode { .. } = err {
        // Already reported by the command.
        if err.to_string().is_empty() {
            return;
        }
    }
    errln!("hank: error: {err}");
    if let Some(hint) = err.hint() {
        errln!("hint: {hint}");
    }
}

fn dispatch(cli: Cli, args: &[OsString]) -> error::Result<u8> {
    use crate::commands as c;
    if cli.status {
        return c::status::run(&cli::StatusArgs::default());
    }
    if cli.reset_circuit {
        return c::reset::run(cli::ResetWhat::Circuit);
    }
    if cli.reset_session {
        return c::reset::run(cli::ResetWhat::Session);
    }
    if cli.circuit_status {
        return c::circuit::run(&cli::CircuitArgs::default());
    }
    match cli.command {
        None => c::run::run(&cli.run, args),
        Some(Command::Run(run)) => c::run::run(&run, args),
        Some(Command::Monitor(a)) => c::monitor::run(&a),
        Some(Command::Status(a)) => c::status::run(&a),
        Some(Command::Serve(a)) => c::serve::run(&a),
        Some(Command::Setup(a)) => c::setup::run(&a),
        Some(Command::Enable(a)) => c::enable::run(&a),
        Some(Command::EnableCi(a)) => c::enable_ci::run(&a),
        Some(Command::Import(a)) => c::import::run(&a),
        Some(Command::Migrate(a)) => c::migrate::run(&a),
        Some(Command::Analyze(a)) => c::analyze::run(&a),
        Some(Command::Reset(a)) => c::reset::run(a.what),
        Some(Command::Circuit(a)) => c::circuit::run(&a),
        Some(Command::Ctl(a)) => c::ctl::run(&a),
        Some(Command::Verify(a)) => c::verify::run(&a),
        Some(Command::Report(a)) => c::report::run(&a),
        Some(Command::Deliver(a)) => c::deliver::run(&a),
        Some(Command::Doctor(a)) => c::doctor::run(&a),
        Some(Command::Agents(a)) => c::agents::run(&a),
        // `hank fleet plan` / `run-task` are the fleet as CI jobs (`fleet_ci`).
        Some(Command::Fleet(a)) => c::recording_exit_code(a.record_exit_code, || match &a.action {
            Some(cli::FleetAction::Plan(p)) => c::fleet_ci::plan(&c::project_dir()?, p),
            // Its loop is `hank run` itself.
            Some(cli::FleetAction::RunTask(t)) => {
                c::fleet_ci::run_task(&c::project_dir()?, t, |run| c::run::run(run, &[]))
            }
            _ => c::fleet::run_checked(&a),
        }),
        Some(Command::Watch(a)) => c::watch::run(&a),
        Some(Command::Completions(a)) => c::completions::run(&a),
        Some(Command::Config(a)) => c::config::run(a.action),
        Some(Command::State(a)) => c::state::run(&a.action),
        Some(Command::WithEnv(a)) => crate::monitor::tmux::with_env(&a.file, &a.command),
        Some(Command::Sandbox(a)) => crate::proc::agent::enter_sandbox(&a.args),
    }
}
