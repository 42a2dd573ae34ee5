//! `hank setup NAME`: a new project folder with `.hank/`, git init and a first commit.

use crate::cli::SetupArgs;
use crate::error::Result;
use crate::project;

/// # Errors
/// Invalid name, existing non-empty folder, I/O errors.
pub(crate) fn run(args: &SetupArgs) -> Result<u8> {
    let opts = project::SetupArgs {
        name: args.name.clone(),
        project_type: args.project_type.clone(),
        json: args.json,
    };
    project::setup::run(&super::current_dir()?, &opts)
}
