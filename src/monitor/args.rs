//! The options of `hank monitor`: one definition, with its clap attributes, read by
//! `crate::cli` into the parser and passed as they are to [`super::run`].

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Clone, Default, Args)]
pub(crate) struct MonitorArgs {
    /// Print one snapshot and exit (also what happens without a terminal).
    #[arg(long)]
    pub once: bool,
    /// Print one snapshot as JSON and exit.
    #[arg(long)]
    pub json: bool,
    /// Follow the live output of every running task of the fleet here (`.hank/fleet.json`):
    /// each line prefixed with its task, tasks said as they start and end; with --once,
    /// what is there now, then exit.
    #[arg(long, conflicts_with = "json")]
    pub live: bool,
    /// The project directory (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}
