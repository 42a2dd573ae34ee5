//! `hank monitor`: the live dashboard (TUI), or one snapshot with `--once` / `--json`.

use crate::cli::MonitorArgs;
use crate::error::Result;
use crate::monitor;

/// # Errors
/// Not a hank project, terminal or I/O errors.
pub(crate) fn run(args: &MonitorArgs) -> Result<u8> {
    monitor::run(&monitor::MonitorOptions {
        once: args.once,
        json: args.json,
        dir: args.dir.clone(),
    })
}
