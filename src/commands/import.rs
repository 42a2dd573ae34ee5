//! `hank import FILE [NAME]`: a PRD or spec document becomes `.hank/` files.

use crate::error::Result;
use crate::project::{self, ImportArgs};

/// # Errors
/// See [`project::import::run`] (with `--json`, errors are printed as JSON and only the code
/// returned).
pub(crate) fn run(args: &ImportArgs) -> Result<u8> {
    project::import::run(&super::current_dir()?, args)
}
