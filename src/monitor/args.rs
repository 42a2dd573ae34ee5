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
    /// The project directory (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}
