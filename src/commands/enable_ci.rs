//! `hank enable-ci`: the same without questions, for scripts and CI (`--json`).

use crate::error::Result;
use crate::project::{self, EnableCiArgs};

/// # Errors
/// See [`project::ci::run`] (with `--json`, errors are printed as JSON and only the code
/// returned).
pub(crate) fn run(args: &EnableCiArgs) -> Result<u8> {
    project::ci::run(&super::new_project_dir()?, args)
}
