//! `hank completions SHELL`.

use clap::CommandFactory;

use crate::cli::{self, Cli};
use crate::error::Result;
use crate::exit;

use super::out;

/// `hank completions SHELL`.
pub(crate) fn run(args: &cli::CompletionsArgs) -> Result<u8> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "hank", &mut buf);
    out(&String::from_utf8_lossy(&buf))?;
    Ok(exit::OK)
}
