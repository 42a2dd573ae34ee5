//! One claim per issue, across machines: the ref `refs/hank/claims/<tracker>-<key>` on the
//! `origin` remote, whose commit holds `claim.json` ([`Claim`]: owner, lease, heartbeat).
//! Created with a create-only compare-and-swap push (`--force-with-lease=<ref>:` with an empty
//! expected value: only if absent), renewed and taken over with the lease on the commit read
//! ([`crate::stateref::push_file`]); released (a failed task) by a push that deletes it, with
//! the same lease. Git runs through the one door ([`crate::git`]).

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{HankError, Result};
use crate::policy::tracker::{Claim, ItemKey, TrackerKind, claim_ref};
use crate::stateref::{Pushed, fetch_ref, leased_push, push_file, remote_git};

/// The file in a claim's commit.
pub const CLAIM_FILE: &str = "claim.json";

/// The claim refs on the remote: item key → the ref's commit.
///
/// # Errors
/// git cannot ask the remote.
pub fn list(dir: &Path, remote: &str, tracker: TrackerKind) -> Result<BTreeMap<ItemKey, String>> {
    let prefix = format!("refs/hank/claims/{}-", tracker.as_str());
    let pattern = format!("{prefix}*");
    let out = remote_git(dir).out(&["ls-remote", "--refs", "--", remote, &pattern])?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let (oid, name) = l.split_once('\t')?;
            let n = ItemKey::parse(name.strip_prefix(&prefix)?)?;
            Some((n, oid.to_string()))
        })
        .collect())
}

/// What the claim at `oid` says (fetched into the local ref of the same name).
///
/// # Errors
/// git cannot fetch it, or it holds no readable claim.
pub fn read(
    dir: &Path,
    remote: &str,
    tracker: TrackerKind,
    issue: &ItemKey,
    oid: &str,
) -> Result<Claim> {
    let r = claim_ref(tracker, issue);
    fetch_ref(dir, remote, &r)?;
    let text = remote_git(dir).out(&["cat-file", "blob", &format!("{oid}:{CLAIM_FILE}")])?;
    serde_json::from_str(&text).map_err(|e| HankError::Unreadable {
        path: format!("{remote} {r}").into(),
        problem: format!("is not a claim: {e}"),
    })
}

/// The claims of `issues` that exist on the remote.
///
/// # Errors
/// git cannot ask the remote; a claim does not read.
pub fn read_all(
    dir: &Path,
    remote: &str,
    tracker: TrackerKind,
    issues: &[ItemKey],
) -> Result<BTreeMap<ItemKey, (String, Claim)>> {
    let refs = list(dir, remote, tracker)?;
    let mut out = BTreeMap::new();
    for n in issues {
        if let Some(oid) = refs.get(n) {
            out.insert(
                n.clone(),
                (oid.clone(), read(dir, remote, tracker, n, oid)?),
            );
        }
    }
    Ok(out)
}

/// Writes `claim` if the remote's ref still is `expected` (`None`: only if there is none).
///
/// # Errors
/// git fails for another reason than the ref having moved.
pub fn write(dir: &Path, remote: &str, claim: &Claim, expected: Option<&str>) -> Result<Pushed> {
    let bytes = serde_json::to_vec_pretty(claim)
        .map_err(|e| HankError::Internal(format!("cannot encode a claim: {e}")))?;
    let r = claim_ref(claim.tracker, &claim.issue);
    let message = format!(
        "hank watch: {} {} by {}",
        claim.issue, claim.state, claim.owner
    );
    push_file(dir, remote, &r, CLAIM_FILE, &bytes, &message, expected)
}

/// Deletes the claim if the remote's ref still is `expected`; whether it was.
///
/// # Errors
/// git cannot run.
pub fn release(
    dir: &Path,
    remote: &str,
    tracker: TrackerKind,
    issue: &ItemKey,
    expected: &str,
) -> Result<bool> {
    let r = claim_ref(tracker, issue);
    let out = leased_push(dir, remote, &r, expected, None)?;
    if out.success {
        let _ = remote_git(dir).act(&["update-ref", "-d", &r]);
    }
    Ok(out.success)
}

/// Who this watcher is: `user@host pid N`.
#[must_use]
pub fn owner() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "someone".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    crate::sanitize::line(&format!("{user}@{host} pid {}", std::process::id()))
}
