//! `hank enable-ci`: the same without questions, for scripts and CI (`--json`).

use crate::cli::EnableCiArgs;
use crate::error::Result;
use crate::project;

/// # Errors
/// See [`project::ci::run`] (with `--json`, errors are printed as JSON and only the code
/// returned).
pub(crate) fn run(args: &EnableCiArgs) -> Result<u8> {
    let opts = project::EnableCiArgs {
        opts: (&args.opts).into(),
        json: args.json,
        quiet: args.quiet,
    };
    project::ci::run(&super::new_project_dir()?, &opts)
}
