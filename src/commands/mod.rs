//! One file per subcommand: each parses nothing (clap did, in [`crate::cli`]), resolves
//! what it needs, calls the library and maps the result to an exit code.
//!
//! | file | command |
//! |---|---|
//! | `run` | `hank` / `hank run` (the loop, `--dry-run`, `--monitor`) |
//! | `monitor` | `hank monitor` |
//! | `status`, `circuit`, `reset`, `doctor`, `completions` | small commands |
//! | `analyze` | `hank analyze FILE` |
//! | `setup`, `enable`, `enable_ci`, `migrate`, `import` | project set-up |

pub mod analyze;
pub mod circuit;
pub mod completions;
pub mod doctor;
pub mod enable;
pub mod enable_ci;
pub mod import;
pub mod migrate;
pub mod monitor;
pub mod reset;
pub mod run;
pub mod setup;
pub mod status;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cli;
use crate::error::{HankError, Result};
use crate::project;
use crate::store::Store;

pub(crate) fn project_dir() -> Result<PathBuf> {
    std::env::current_dir().map_err(|e| HankError::io("cannot read", "the current directory", e))
}

pub(crate) fn out(text: &str) -> Result<()> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(HankError::io("failed to write to", "standard output", e)),
    }
}

pub(crate) fn require_hank_dir(dir: &Path) -> Result<Store> {
    let store = Store::new(dir);
    if !store.dir().is_dir() {
        return Err(HankError::usage_hint(
            format!("{} is not a hank project (no .hank/ folder)", dir.display()),
            "run `hank enable` here, or `hank setup NAME` for a new project",
        ));
    }
    Ok(store)
}

/// The clap definitions and the plain options they become (the defaults live in two places;
/// a test keeps them equal).
impl From<&cli::ProjectOptions> for project::ProjectOptions {
    fn from(o: &cli::ProjectOptions) -> Self {
        Self {
            from: o.from.iter().map(|f| (*f).into()).collect(),
            prd: o.prd.clone(),
            label: o.label.clone(),
            limit: o.limit,
            project_name: o.project_name.clone(),
            project_type: o.project_type.clone(),
            calls: o.calls,
            force: o.force,
        }
    }
}

impl From<cli::FromSource> for project::FromSource {
    fn from(f: cli::FromSource) -> Self {
        match f {
            cli::FromSource::Beads => Self::Beads,
            cli::FromSource::Github => Self::Github,
            cli::FromSource::Prd => Self::Prd,
            cli::FromSource::None => Self::None,
        }
    }
}

fn current_dir() -> Result<PathBuf> {
    std::env::current_dir().map_err(|e| HankError::io("reading", ".", e))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    /// The defaults clap shows are the library's defaults.
    #[test]
    fn clap_defaults_are_the_library_defaults() {
        let cli = Cli::parse_from(["hank", "enable-ci"]);
        let Some(Command::EnableCi(a)) = cli.command else {
            panic!("enable-ci parses");
        };
        assert_eq!(a.opts.limit, crate::project::sources::DEFAULT_LIMIT);
        let cli = Cli::parse_from(["hank", "import", "x.md"]);
        let Some(Command::Import(a)) = cli.command else {
            panic!("import parses");
        };
        assert_eq!(a.limit, crate::project::import::DEFAULT_TASK_LIMIT);
    }
}
