//! One file per subcommand: each parses nothing (clap did, in [`crate::cli`]), resolves
//! what it needs, calls the library and maps the result to an exit code.
//!
//! | file | command |
//! |---|---|
//! | `run` | `hank` / `hank run` (the loop, `--dry-run`, `--monitor`) |
//! | `monitor` | `hank monitor` |
//! | `status`, `circuit`, `reset`, `doctor`, `agents`, `completions`, `verify`, `report` | small commands |
//! | `analyze` | `hank analyze FILE` |
//! | `setup`, `enable`, `enable_ci`, `migrate`, `import` | project set-up |

pub(crate) mod agents;
pub(crate) mod analyze;
pub(crate) mod circuit;
pub(crate) mod completions;
pub(crate) mod doctor;
pub(crate) mod enable;
pub(crate) mod enable_ci;
pub(crate) mod import;
pub(crate) mod migrate;
pub(crate) mod monitor;
pub(crate) mod report;
pub(crate) mod reset;
pub(crate) mod run;
pub(crate) mod setup;
pub(crate) mod status;
pub(crate) mod verify;

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

/// The clap definitions and the plain options they become.
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
            agents: o.agents.clone(),
            force: o.force,
            repair: o.repair,
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
