//! One file per subcommand: each parses nothing (clap did, in [`crate::cli`]), resolves
//! what it needs, calls the library and maps the result to an exit code.
//!
//! | file | command |
//! |---|---|
//! | `run` | `hank` / `hank run` (the loop, `--dry-run`, `--monitor`) |
//! | `monitor` | `hank monitor` |
//! | `ctl` | `hank ctl` (the control journal, signed remote commands) |
//! | `status`, `circuit`, `reset`, `doctor`, `agents`, `completions`, `verify`, `report` | small commands |
//! | `analyze` | `hank analyze FILE` |
//! | `state` | `hank state save` / `restore` / `claim` (the portable run state) |
//! | `fleet` | `hank fleet` (parallel tasks, [`crate::fleet`]) and `hank fleet status` |
//! | `serve` | `hank serve` (the read-only web view, [`crate::serve`]) |
//! | `config` | `hank config status` / `hank config accept` (configuration approval) |
//! | `setup`, `enable`, `enable_ci`, `migrate`, `import` | project set-up |
//! | `watch` | `hank watch` (issues of a tracker as fleet tasks) |
//! | `fleet_ci` | `hank fleet plan` / `hank fleet run-task` (the fleet as CI jobs) |
//! | `deliver` | `hank deliver` |
//! | [`context`] | the project a command works on ([`context::Project`]), the checks commands that start tasks share, a delivery outside a loop |
//! | [`view`] | what several commands show alike (the receipts table, the status `--json` view, sizes) |
//!
//! A command takes what it shares with another from [`context`], [`view`] or the library's
//! rooms, never from another command's file (`tests/integration/architecture.rs` fails on a
//! `super::NAME` or `commands::NAME` of a command file): a delivery outside a loop is
//! `crate::deliver::outside` (`hank deliver`'s, a resumed one of `run` and `fleet`, a CI fleet
//! task's through [`context::deliver_last_run`]); `fleet_ci`'s loop is `hank run` itself,
//! handed in by the dispatcher (`lib.rs`).
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! `watch` is `hank watch`: a poll of the labelled issues and open PRs through
//! `tracker::Tracker`, the claims through `tracker::claims`, `policy::tracker::choose`, a claim
//! per issue taken, the started comment and `hank:working`, one `fleet::run` of the issues'
//! tasks with a heartbeat thread renewing the claims, then each issue answered from
//! `.hank/fleet.json` (done/failed comment, labels, claim marked done or released); `--once`,
//! else a poll every WATCH_INTERVAL. `doctor` also asks whether the API is reachable and warns
//! about user Stop hooks/plugins; `analyze --format` reads an answer in the format asked; `ctl`
//! records commands in the control journal, signs/sends/polls remote ones; `state`
//! saves/restores/claims the portable run state ([`crate::handoff`]) and prints the Actions job summary;
//! `fleet_ci` is one task per CI job: claim + restore through [`crate::handoff`], the task's section as
//! the plan while `hank run` runs (handed in by the dispatcher), the whole plan put back with its
//! ticks, `hank deliver`'s delivery ([`context::deliver_last_run`]) or the task branch pushed,
//! save.

pub(crate) mod agents;
pub(crate) mod analyze;
pub(crate) mod circuit;
pub(crate) mod completions;
pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod ctl;
pub(crate) mod deliver;
pub(crate) mod doctor;
pub(crate) mod enable;
pub(crate) mod enable_ci;
pub(crate) mod fleet;
pub(crate) mod fleet_ci;
pub(crate) mod import;
pub(crate) mod migrate;
pub(crate) mod monitor;
pub(crate) mod report;
pub(crate) mod reset;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod setup;
pub(crate) mod state;
pub(crate) mod status;
pub(crate) mod verify;
pub(crate) mod view;
pub(crate) mod watch;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{HankError, Result};
use crate::project;

pub(crate) use context::{approved_project, lock_or_hint, project_dir, require_hank_dir};

/// Runs `command`; with `record` (`--record-exit-code`: the loop pane of `hank --monitor` and
/// `hank fleet --monitor`) hank writes the exit code itself (see [`crate::monitor::tmux`]).
pub(crate) fn recording_exit_code(
    record: bool,
    command: impl FnOnce() -> Result<u8>,
) -> Result<u8> {
    let result = command();
    if record && let Ok(dir) = project_dir() {
        let code = match &result {
            Ok(c) => *c,
            Err(e) => e.exit_code(),
        };
        crate::monitor::tmux::record_exit_code(&dir, code);
    }
    result
}

/// For `enable`/`setup`/`import`: refuses to create a project inside another one.
pub(crate) fn refuse_nested(cwd: &Path) -> Result<()> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let parent = cwd.parent().filter(|_| !cwd.join(".hank").is_dir());
    let Some(parent) = parent else {
        return Ok(());
    };
    if let Some(outer) = project::locate::find_project(
        parent,
        home.as_deref(),
        |d| d.join(".hank").is_dir(),
        |d| d.join(".git").exists(),
    ) {
        return Err(HankError::usage_hint(
            format!(
                "{} is inside the hank project at {}",
                cwd.display(),
                outer.display()
            ),
            format!(
                "run hank from anywhere inside it (it finds {} by itself); a second project in a subfolder would have its own plan and state",
                outer.display()
            ),
        ));
    }
    Ok(())
}

pub(crate) fn out(text: &str) -> Result<()> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => Ok(()),
        // A reader that went away (`| head`) or a terminal that did (EIO): nothing to report to.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe || e.raw_os_error() == Some(5) => {
            Ok(())
        }
        Err(e) => Err(HankError::io("failed to write to", "standard output", e)),
    }
}

fn current_dir() -> Result<PathBuf> {
    std::env::current_dir().map_err(|e| HankError::io("reading", ".", e))
}

/// The current directory for a command that creates a project there (`enable`,
/// `enable-ci`): refused inside another hank project.
fn new_project_dir() -> Result<PathBuf> {
    let cwd = current_dir()?;
    refuse_nested(&cwd)?;
    Ok(cwd)
}
