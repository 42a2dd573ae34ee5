//! A scripted [`DeliverGit`] for tests of delivery (no process, no repository): the commit is
//! made, every head is [`SHA`], nothing looks like a secret, the push goes through; each call
//! is named in `calls`.

use std::path::Path;
use std::sync::Mutex;

use super::drive::{DeliverGit, Place};
use super::{Committed, Push};
use crate::error::{HankError, Result};
use crate::policy::deliver::machine::Want;

/// The commit every scripted head is.
pub(crate) const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

/// Delivery's git, scripted.
#[derive(Default)]
pub(crate) struct ScriptedGit {
    pub calls: Mutex<Vec<String>>,
    /// The remote does not exist: a run's delivery cannot start.
    pub no_remote: bool,
}

impl ScriptedGit {
    fn call(&self, what: String) {
        self.calls.lock().unwrap().push(what);
    }
}

/// Where a scripted run's delivery goes: `hank/main` onto `main` at `origin`.
pub(crate) fn place() -> Place {
    Place {
        branch: "hank/main".into(),
        base: "main".into(),
        remote: "origin".into(),
    }
}

impl DeliverGit for ScriptedGit {
    fn commit_all(&self, _dir: &Path, branch: &str, _message: &str) -> Result<Committed> {
        self.call(format!("commit {branch}"));
        Ok(Committed {
            made: true,
            ..Committed::default()
        })
    }
    fn head(&self, _dir: &Path) -> Result<String> {
        Ok(SHA.into())
    }
    fn scan(
        &self,
        _dir: &Path,
        sha: &str,
        _to: &Place,
        _allow: &[String],
    ) -> Result<super::scan::Scan> {
        self.call(format!("scan {sha}"));
        Ok(super::scan::Scan::default())
    }
    fn push(&self, _dir: &Path, remote: &str, branch: &str) -> Result<Push> {
        self.call(format!("push {remote} {branch}"));
        Ok(Push::Pushed)
    }
    fn locate(&self, _dir: &Path, want: &Want) -> Result<(Place, String)> {
        self.call(format!("locate {}", want.remote));
        if self.no_remote {
            let what = format!("git remote `{}` does not exist", want.remote);
            return Err(HankError::usage(what));
        }
        Ok((place(), "https://forge.test/o/r.git".into()))
    }
    fn switch(&self, _dir: &Path, branch: &str) -> Result<()> {
        self.call(format!("switch {branch}"));
        Ok(())
    }
    fn branch_head(&self, _dir: &Path, branch: &str) -> Result<String> {
        self.call(format!("head of {branch}"));
        Ok(SHA.into())
    }
    fn push_branch(&self, _dir: &Path, remote: &str, branch: &str) -> Result<Push> {
        self.call(format!("push branch {remote} {branch}"));
        Ok(Push::Pushed)
    }
}
