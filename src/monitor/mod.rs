//! `hank monitor` (TUI) and `hank --monitor` (tmux launcher). (in progress)

use clap::Args;

#[derive(Debug, Clone, Default, Args)]
pub struct MonitorArgs {
    /// Print one snapshot and exit.
    #[arg(long)]
    pub once: bool,
    /// With --once: print the snapshot as JSON.
    #[arg(long)]
    pub json: bool,
}

use crate::error::{HankError, Result};

/// `hank monitor`.
pub fn run(_args: &MonitorArgs) -> Result<u8> {
    Err(HankError::Other("monitor is being built".into()))
}

/// `hank --monitor`: starts the loop in tmux. `forwarded` are the user's other `hank run`
/// arguments, exactly as given (without `--monitor`).
pub fn launch_tmux(_forwarded: &[std::ffi::OsString]) -> Result<u8> {
    Err(HankError::Other("--monitor is being built".into()))
}
