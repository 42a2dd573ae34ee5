//! The run state handed from job to job: save, restore and claim one state ref
//! (`refs/hank/state/<name>` on a remote, [`crate::stateref`]; or a bundle in a folder, an
//! Actions artifact) of the project's run or of one task, each saying on stderr what it did.
//! `hank state` and `hank fleet run-task` both hand the state over through a [`Handoff`].
//!
//! A job that loses a compare-and-swap race (another job saved or claimed the task first) or
//! finds the task claimed by another job stops with exit 2 ([`crate::exit::HALTED`]); what a
//! restore trusts is [`crate::store::portable`]'s.

use std::path::{Path, PathBuf};

use jiff::{SignedDuration, Timestamp};

use crate::error::Result;
use crate::exit;
use crate::stateref::{self, Pushed};
use crate::store::portable as p;
use crate::store::schema::{Lease, StateBundle};

/// One state ref of the project at `dir`: whose (`name`: a task's slug, or the whole run),
/// who hands it over (`owner`), and the remote that holds it.
#[derive(Debug, Clone)]
pub struct Handoff {
    dir: PathBuf,
    name: String,
    owner: String,
    remote: String,
}

/// What a restore fetched: the ref's commit (none for a folder) and the bundle.
type Found = Option<(Option<String>, StateBundle)>;

impl Handoff {
    /// The state of `task` (the whole run when `None`) on `remote`, handed over by `owner`
    /// (by default `HANK_STATE_OWNER`, else the Actions run/attempt/job, else host:pid).
    ///
    /// # Errors
    /// A task name that cannot name a ref.
    pub fn new(dir: &Path, task: Option<&str>, remote: &str, owner: Option<&str>) -> Result<Self> {
        let name = task.map_or_else(|| p::RUN_NAME.to_string(), str::to_string);
        p::check_name(&name)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            name,
            owner: owner.map_or_else(p::owner_id, str::to_string),
            remote: remote.to_string(),
        })
    }

    /// Saves the local state: pushed to the ref with a compare-and-swap, or written into
    /// `to_dir`; `release` gives up this job's claim with it. Exit 2 when another job holds
    /// the task or saved first.
    ///
    /// # Errors
    /// The state files or git failing.
    pub fn save(&self, to_dir: Option<&Path>, release: bool, now: Timestamp) -> Result<u8> {
        let name = &self.name;
        let store = p::store_of(&self.dir)?;
        if let Some(to) = to_dir {
            let previous = p::read_from_dir(to, name)?;
            let mut bundle = p::collect(&store, name, &self.owner, now, previous.as_ref())?;
            if release {
                bundle.lease = None;
            }
            let path = p::write_to_dir(to, &bundle)?;
            errln!(
                "hank: saved the state of {name} ({} calls, {} receipts) to {}",
                bundle.calls.len(),
                bundle.receipts.len(),
                path.display()
            );
            return Ok(exit::OK);
        }
        let remote = &self.remote;
        let previous = stateref::fetch(&self.dir, remote, name)?;
        let prev_bundle = previous.as_ref().map(|(_, b)| b);
        if p::held_by_other(prev_bundle.and_then(|b| b.lease.as_ref()), &self.owner, now) {
            return Ok(held(name, prev_bundle.and_then(|b| b.lease.as_ref())));
        }
        let mut bundle = p::collect(&store, name, &self.owner, now, prev_bundle)?;
        if release {
            bundle.lease = None;
        }
        match stateref::push(
            &self.dir,
            remote,
            &bundle,
            previous.as_ref().map(|(o, _)| o.as_str()),
        )? {
            Pushed::Done(oid) => {
                errln!(
                    "hank: saved the state of {name} ({} calls, {} receipts) to {remote} {} ({})",
                    bundle.calls.len(),
                    bundle.receipts.len(),
                    p::ref_name(name),
                    oid.get(..12).unwrap_or(&oid)
                );
                Ok(exit::OK)
            }
            Pushed::Lost(said) => Ok(lost(name, "saved", &said)),
        }
    }

    /// Merges the saved state (from the ref, or from `from_dir`) into the local one; with
    /// `claim` (a lease of that many minutes) the task is claimed too (not from a folder).
    /// Exit 2 when another job holds the task.
    ///
    /// # Errors
    /// The state files or git failing.
    pub fn restore(
        &self,
        from_dir: Option<&Path>,
        claim: Option<u32>,
        now: Timestamp,
    ) -> Result<u8> {
        let name = &self.name;
        let found: Found = match from_dir {
            Some(from) => p::read_from_dir(from, name)?.map(|b| (None, b)),
            None => stateref::fetch(&self.dir, &self.remote, name)?.map(|(o, b)| (Some(o), b)),
        };
        if claim.is_some()
            && let Some((_, b)) = &found
            && p::held_by_other(b.lease.as_ref(), &self.owner, now)
        {
            return Ok(held(name, b.lease.as_ref()));
        }
        match &found {
            Some((_, bundle)) => {
                let (calls, receipts) = p::apply(&self.dir, bundle, now)?;
                errln!(
                    "hank: restored the state of {name} saved by {} at {} ({calls} call(s) and {receipts} receipt(s) added)",
                    bundle.saved_by,
                    bundle.saved_at
                );
            }
            None => errln!("hank: no saved state of {name} yet; starting from the local state"),
        }
        match (claim, from_dir) {
            (Some(_), Some(_)) => {
                errln!(
                    "hank: --claim is not taken with --from-dir (a folder has no compare-and-swap); the concurrency group of the job keeps two jobs of {name} apart"
                );
                Ok(exit::OK)
            }
            (Some(ttl), None) => self.claim_known(ttl, now, Some(found)),
            (None, _) => Ok(exit::OK),
        }
    }

    /// Claims the task: a lease for `ttl` minutes in the state ref, pushed with a
    /// compare-and-swap. Exit 2 when another job holds it or wrote the ref first.
    ///
    /// # Errors
    /// The state files or git failing.
    pub fn claim(&self, ttl: u32, now: Timestamp) -> Result<u8> {
        self.claim_known(ttl, now, None)
    }

    /// [`Handoff::claim`]; `known`: what a restore just fetched (`None`: fetch now).
    fn claim_known(&self, ttl: u32, now: Timestamp, known: Option<Found>) -> Result<u8> {
        let (name, owner) = (&self.name, &self.owner);
        let current = match known {
            Some(k) => k.and_then(|(o, b)| o.map(|o| (o, b))),
            None => stateref::fetch(&self.dir, &self.remote, name)?,
        };
        if let Some((_, b)) = &current
            && p::held_by_other(b.lease.as_ref(), owner, now)
        {
            return Ok(held(name, b.lease.as_ref()));
        }
        let expires_at = now
            .checked_add(SignedDuration::from_mins(i64::from(ttl)))
            .unwrap_or(now);
        let mut bundle = match &current {
            Some((_, b)) => b.clone(),
            None => p::collect(&p::store_of(&self.dir)?, name, owner, now, None)?,
        };
        bundle.lease = Some(Lease {
            owner: owner.clone(),
            expires_at,
        });
        match stateref::push(
            &self.dir,
            &self.remote,
            &bundle,
            current.as_ref().map(|(o, _)| o.as_str()),
        )? {
            Pushed::Done(_) => {
                errln!("hank: {owner} claimed {name} until {expires_at}");
                Ok(exit::OK)
            }
            Pushed::Lost(said) => Ok(lost(name, "claimed or saved", &said)),
        }
    }
}

/// Another job holds the task: said, exit 2.
fn held(name: &str, lease: Option<&Lease>) -> u8 {
    if let Some(l) = lease {
        errln!(
            "hank: task {name} is claimed by {} until {}: another job runs it; this one stops (exit 2)",
            l.owner,
            l.expires_at
        );
    }
    exit::HALTED
}

/// Another job wrote the ref first: said, exit 2.
fn lost(name: &str, what: &str, said: &str) -> u8 {
    errln!(
        "hank: another job {what} refs/hank/state/{name} first (the push's compare-and-swap failed); nothing was changed; this job stops (exit 2)\n  git said: {said}"
    );
    exit::HALTED
}
