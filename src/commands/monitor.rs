//! `hank monitor`: the live dashboard (TUI), or one snapshot with `--once` / `--json`.

use crate::error::Result;
use crate::monitor::{self, MonitorArgs};

/// # Errors
/// Not a hank project, terminal or I/O errors.
pub(crate) fn run(args: &MonitorArgs) -> Result<u8> {
    monitor::run(args)
}
