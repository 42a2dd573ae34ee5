//! `hank config status` / `hank config accept`: configuration that changed while a run was in
//! progress, and its approval ([`crate::approval`]).

use crate::approval;
use crate::cli::ConfigAction;
use crate::error::Result;

use super::{out, project_dir};

fn listed(list: &[String]) -> String {
    list.iter().map(|l| format!("  - {l}\n")).collect()
}

/// Prints the pending changes (`status`) or approves the configuration as it is (`accept`).
pub(crate) fn run(action: ConfigAction) -> Result<u8> {
    let dir = project_dir()?;
    match action {
        ConfigAction::Status => {
            let list = approval::unapproved(&dir)?;
            if list.is_empty() {
                out(
                    "The configuration is approved: nothing changed while a run was in progress.\n",
                )?;
            } else {
                out(&format!(
                    "Changed while a run was in progress, waiting for `hank config accept`:\n{}",
                    listed(&list)
                ))?;
            }
        }
        ConfigAction::Accept => {
            let list = approval::accept(&dir)?;
            if list.is_empty() {
                out("Nothing to accept: the configuration is approved.\n")?;
            } else {
                out(&format!("Accepted:\n{}", listed(&list)))?;
            }
        }
    }
    Ok(0)
}
