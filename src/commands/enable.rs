//! `hank enable`: the interactive wizard that adds hank to an existing project.

use crate::cli::EnableArgs;
use crate::error::Result;
use crate::project;

/// # Errors
/// See [`project::enable::run`].
pub(crate) fn run(args: &EnableArgs) -> Result<u8> {
    let opts = project::EnableArgs {
        opts: (&args.opts).into(),
        yes: args.yes,
    };
    project::enable::run(&super::new_project_dir()?, &opts)
}
