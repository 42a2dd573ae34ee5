//! `hank setup NAME`: a new project folder with `.hank/`, git init and a first commit.

use crate::error::Result;
use crate::project::{self, SetupArgs};

/// # Errors
/// Invalid name, existing non-empty folder, I/O errors.
pub(crate) fn run(args: &SetupArgs) -> Result<u8> {
    project::setup::run(&super::current_dir()?, args)
}
