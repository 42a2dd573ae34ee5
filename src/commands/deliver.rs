//! `hank deliver`: delivers the last finished run's verified work now — the branch, a commit
//! of what the agent left, the push (a pre-push hook's refusal is kept for the agent), with
//! `pr` a pull request whose body is hank's evidence, then (CI_WAIT) the checks of the pushed
//! commit, fail closed: the verdict is the exit code. `.hank/delivery.json` and a `delivery`
//! event record each delivery. The delivery is `crate::deliver::outside`'s, the project, its
//! approval and lock [`super::context::deliver_last_run`]'s.

use crate::cli::DeliverArgs;
use crate::deliver::outside::Opts;
use crate::error::{HankError, Result};
use crate::settings::Flags;

use super::out;

/// `hank deliver`: the delivery of the last finished run, or the finishing of its open one
/// ([`super::context::deliver_last_run`]); with `--json` the record on stdout.
pub(crate) fn run(a: &DeliverArgs) -> Result<u8> {
    let flags = Flags {
        deliver: a.deliver.clone(),
        branch: a.branch.clone(),
        base: a.base.clone(),
        ..Flags::default()
    };
    let opts = Opts {
        no_wait: a.no_wait,
        change_set: a.change_set.clone(),
    };
    super::context::deliver_last_run(&flags, a.force, opts, |ended| {
        if a.json {
            // A change set's record, else the delivery's.
            let line = match &ended.change_set {
                Some(set) => serde_json::to_string(set),
                None => serde_json::to_string(&ended.shown),
            }
            .map_err(|e| HankError::Internal(e.to_string()))?;
            out(&format!("{line}\n"))?;
        }
        Ok(())
    })
}
