//! `hank import FILE [NAME]`: a PRD or spec document becomes `.hank/` files.

use crate::cli::ImportArgs;
use crate::error::Result;
use crate::project;

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
    let opts = project::ImportArgs {
        file: args.file.clone(),
        name: args.name.clone(),
        into: args.into.clone(),
        force: args.force,
        no_ai: args.no_ai,
        limit: args.limit,
        claude_cmd: args.claude_cmd.clone(),
        timeout: args.timeout.clone(),
        model: args.model.clone(),
        json: args.json,
    };
    project::import::run(&super::current_dir()?, &opts)
}
