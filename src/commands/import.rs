//! `hank import FILE [NAME]`: a PRD or spec document becomes `.hank/` files.

use crate::error::Result;
use crate::project::{self, ImportArgs};

/// # Errors
/// See [`project::import::run`] (with `--json`, errors are printed as JSON and only the code
/// returned).
pub(crate) fn run(args: &ImportArgs) -> Result<u8> {
    // Inside a project, the agent call uses its `.hankrc` (CLAUDE_CODE_CMD…): approved first.
    if !args.no_ai
        && let Ok(dir) = super::project_dir()
    {
        crate::approval::require(&dir, false, "hank import")?;
    }
    project::import::run(&super::current_dir()?, args)
}
