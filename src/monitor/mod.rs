//! `hank monitor` (dashboard of a running or finished loop), `hank monitor --live` (the live
//! output of a fleet's running tasks), `hank --monitor` (the loop in a tmux session with a
//! live output pane and the dashboard) and `hank fleet --monitor` (the same for a fleet).
//!
//! | module | role |
//! |---|---|
//! | [`snapshot`] | reads `.hank/` tolerantly into a [`snapshot::Snapshot`] |
//! | [`view`] | pure render of a snapshot: ratatui frame, or plain text **\[pure\]** |
//! | [`status_text`] | the one text rendering of a status (`hank status`, the `run` section of `--once`) **\[pure\]** |
//! | [`args`] | the options of `hank monitor` (one definition, with its clap attributes) |
//! | [`app`] | the terminal app loop (poll files, redraw, keys) |
//! | [`live`] | `--live`: the fleet's tasks to follow, their notices, offsets, framing, prefixes **\[pure\]** |
//! | [`follow`] | `--live`: the loop that reads `fleet.json` and each running task's `live.log` |
//! | [`tmux`] | the tmux command builder **\[pure\]** and the launcher (`hank --monitor`, `hank fleet --monitor`) |
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! `hank monitor` TUI (pure view of a snapshot) and the `hank --monitor` / `hank fleet --monitor`
//! tmux launcher (`tmux.rs`, `Layout::Run` / `Layout::Fleet`: the loop pane runs `hank run` or
//! `hank fleet --record-exit-code … --live`, the live pane `tail -F` or `hank monitor --live`);
//! `live.rs` **\[pure\]** and `follow.rs` are `hank monitor --live`: `fleet.json` read each turn
//! (`Watch::update` → start/end notices, `targets` the running/verifying/merging tasks), each
//! task's `.hank/live.log` opened `O_NOFOLLOW|O_NONBLOCK` as a regular file only
//! (`fsread::open_regular`) and read from its `Cursor` (offset, inode, first bytes:
//! truncated/replaced → from the start; ≤ 64 KiB a turn; line framing), lines `prefixed` with the
//! task and its colour; `args.rs` its options; `status_text.rs` the one text rendering of a status
//! **\[pure\]** (`hank status` prints it, `monitor --once` prints it as its `run` section with the
//! fleet, plan file, window gauges, events and live output around it); `app.rs` the event loop and
//! its keys (`on_key`, pure: `p`/`u` pause/resume, `n`/`a` a line typed for a note/answer, sent
//! through `control::submit`)

pub(crate) mod app;
pub(crate) mod args;
pub(crate) mod follow;
pub(crate) mod live;
pub(crate) mod snapshot;
pub(crate) mod status_text;
pub(crate) mod tmux;
pub(crate) mod view;

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use jiff::Timestamp;
use jiff::tz::TimeZone;

pub(crate) use args::MonitorArgs;

use crate::error::{HankError, Result};
use crate::exit;

/// Writes to stdout; a closed pipe (`hank monitor --once | head`) is not an error.
pub(crate) fn print_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(HankError::io("write", "standard output", e))
        }
        _ => Ok(()),
    }
}

fn project_root(dir: Option<&PathBuf>) -> Result<PathBuf> {
    let (root, what) = match dir {
        Some(d) => (d.clone(), format!("--dir {}", d.display())),
        None => (
            crate::project::locate::discover()?,
            "the current directory".to_string(),
        ),
    };
    if !root.is_dir() {
        return Err(HankError::usage(format!("{what}: not a directory")));
    }
    let root = std::fs::canonicalize(&root).unwrap_or(root);
    if !root.join(".hank").is_dir() {
        return Err(HankError::usage_hint(
            format!("{what} ({}) has no .hank/ directory", root.display()),
            "run `hank monitor` in the project root, or pass --dir DIR",
        ));
    }
    Ok(root)
}

/// `hank monitor`.
pub(crate) fn run(args: &MonitorArgs) -> Result<u8> {
    let root = project_root(args.dir.as_ref())?;
    if args.live {
        return follow::run(&root, args.once);
    }
    let paths = snapshot::Paths::new(&root);
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if !args.once && !args.json && terminal {
        app::run_tui(&paths)?;
        return Ok(exit::OK);
    }
    let snap = snapshot::load(&paths);
    if args.json {
        let mut text = serde_json::to_string_pretty(&snap)
            .map_err(|e| HankError::Internal(format!("cannot serialize the snapshot: {e}")))?;
        text.push('\n');
        print_stdout(&text)?;
    } else {
        print_stdout(&view::render_text(
            &snap,
            Timestamp::now(),
            &TimeZone::system(),
        ))?;
    }
    Ok(exit::OK)
}

/// `hank --monitor`: starts the loop in tmux. `forwarded` are the user's other `hank run`
/// arguments, exactly as given (without `--monitor`).
pub(crate) fn launch_tmux(
    forwarded: &[OsString],
    project: &std::path::Path,
    keep_open: bool,
) -> Result<u8> {
    tmux::launch(forwarded, project, keep_open, tmux::Layout::Run)
}

/// `hank fleet --monitor`: starts the fleet's supervisor in tmux, with the live output of its
/// running tasks (`hank monitor --live`) and the dashboard. `forwarded` are the `hank fleet`
/// arguments to give it (without `--monitor`).
pub(crate) fn launch_fleet_tmux(
    forwarded: &[OsString],
    project: &std::path::Path,
    keep_open: bool,
) -> Result<u8> {
    tmux::launch(forwarded, project, keep_open, tmux::Layout::Fleet)
}
