//! `hank enable`: the interactive wizard that adds hank to an existing project.

use crate::error::Result;
use crate::project::{self, EnableArgs};

/// # Errors
/// See [`project::enable::run`].
pub(crate) fn run(args: &EnableArgs) -> Result<u8> {
    project::enable::run(&super::new_project_dir()?, args)
}
