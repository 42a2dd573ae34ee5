//! A fleet across CI jobs (the I/O half of `hank fleet plan` / `hank fleet run-task`; the rules
//! are [`crate::policy::fleet::plan_view`] and [`crate::policy::fleet::standings`]).
//!
//! In CI every task runs in a job of its own, in a fresh clone: there is no supervisor and no
//! integration worktree. What a job knows of the other tasks it reads from the remote: a
//! task's branch `hank/<slug>` (its work; every item of its section ticked there = delivered,
//! waiting for its merge) and its state ref `refs/hank/state/<slug>` (a live lease = another
//! job runs it). A task is merged when its items are ticked in the checked-out branch's plan.
//! Git runs through [`crate::stateref::remote_git`] (the user's credentials, as delivery does).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use jiff::Timestamp;

use crate::error::{HankError, Result};
use crate::git::Checkout;
use crate::policy::fleet::{self as rules, PlanView};
use crate::stateref::remote_git;

/// The task branch of `slug`.
#[must_use]
pub fn branch_of(slug: &str) -> String {
    format!("hank/{slug}")
}

/// Whether `remote` is a remote of the repository at `dir`.
///
/// # Errors
/// git cannot run.
pub fn has_remote(dir: &Path, remote: &str) -> Result<bool> {
    Ok(remote_git(dir)
        .act(&["remote", "get-url", "--", remote])?
        .success)
}

/// What the remote says of the open tasks: the tasks whose branch holds all their items
/// ticked (delivered), and the tasks whose state ref carries a lease that holds at `now`
/// (running, with the owner). One `ls-remote`, one fetch of the task branches there are,
/// one fetch per claimed state ref.
///
/// # Errors
/// git fails (no network, no access), or a state ref holds no bundle hank can read.
pub fn remote_standing(
    dir: &Path,
    remote: &str,
    view: &PlanView,
    optional_sections: &[String],
    now: Timestamp,
) -> Result<(BTreeSet<String>, BTreeMap<String, String>)> {
    let listed = remote_git(dir).out(&[
        "ls-remote",
        "--refs",
        "--",
        remote,
        "refs/heads/hank/*",
        "refs/hank/state/*",
    ])?;
    let refs: BTreeMap<&str, &str> = listed
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(oid, name)| (name.trim(), oid.trim()))
        .collect();
    let mut delivered = BTreeSet::new();
    let branches: Vec<(&rules::TaskSpec, &str)> = view
        .open
        .iter()
        .filter_map(|t| {
            refs.get(format!("refs/heads/{}", branch_of(&t.slug)).as_str())
                .map(|oid| (t, *oid))
        })
        .collect();
    if !branches.is_empty() {
        let specs: Vec<String> = branches
            .iter()
            .map(|(t, _)| {
                let b = branch_of(&t.slug);
                format!("+refs/heads/{b}:refs/remotes/{remote}/{b}")
            })
            .collect();
        let mut args = vec![
            "fetch",
            "-q",
            "--no-tags",
            "--no-write-fetch-head",
            "--",
            remote,
        ];
        args.extend(specs.iter().map(String::as_str));
        remote_git(dir).out(&args)?;
        for (t, oid) in branches {
            let plan =
                remote_git(dir).act(&["cat-file", "blob", &format!("{oid}:.hank/fix_plan.md")])?;
            if plan.success && rules::task_finished_in(&plan.stdout, &t.name, optional_sections) {
                delivered.insert(t.name.clone());
            }
        }
    }
    let mut running = BTreeMap::new();
    for t in &view.open {
        if !refs.contains_key(crate::store::portable::ref_name(&t.slug).as_str()) {
            continue;
        }
        if let Some((_, bundle)) = crate::stateref::fetch(dir, remote, &t.slug)?
            && let Some(lease) = bundle.lease.filter(|l| l.expires_at > now)
        {
            running.insert(t.name.clone(), lease.owner);
        }
    }
    Ok((delivered, running))
}

/// The working tree has no change git would commit (hank's runtime files aside): a task's
/// branch is switched to and its work committed, so nothing of the user's may be mixed in.
///
/// # Errors
/// A change is there (the error names the first files), or git fails.
pub fn require_clean(dir: &Path) -> Result<()> {
    let excludes: Vec<String> = crate::deliver::runtime_paths()
        .iter()
        .flat_map(|p| {
            [
                format!(":(exclude,glob){p}"),
                format!(":(exclude,glob){p}/**"),
            ]
        })
        .collect();
    let mut args = vec!["status", "--porcelain", "--untracked-files=all", "--", "."];
    args.extend(excludes.iter().map(String::as_str));
    let out = Checkout::at(dir)
        .git()
        .read(&args)
        .map_err(|e| HankError::Tool(e.context(&args[..2], dir)))?;
    let out = String::from_utf8_lossy(&out);
    let changed: Vec<&str> = out.lines().map(|l| l.get(3..).unwrap_or(l)).collect();
    if changed.is_empty() {
        return Ok(());
    }
    let mut list = changed
        .iter()
        .take(5)
        .map(|f| crate::sanitize::line(f))
        .collect::<Vec<_>>()
        .join(", ");
    if changed.len() > 5 {
        list.push_str(&format!(" and {} more", changed.len() - 5));
    }
    Err(HankError::usage_hint(
        format!(
            "{} has changes not committed ({list}): hank fleet run-task switches to the task's branch and commits its work there",
            dir.display()
        ),
        "commit or stash them first (in CI the checkout is a fresh clone)",
    ))
}

/// git has an identity to commit with in `dir` (`user.name` and `user.email`): a task's work
/// is committed on its branch, and a run is not started that could not keep its work.
///
/// # Errors
/// One is missing (the error says how to set it), or git fails.
pub fn require_identity(dir: &Path) -> Result<()> {
    // Git's own answer: `user.name`/`user.email`, or GIT_AUTHOR_*/GIT_COMMITTER_* in the
    // environment, or whatever else git accepts for a commit.
    for var in ["GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"] {
        let r = remote_git(dir).act(&["var", var])?;
        if !r.success || r.stdout.trim().is_empty() {
            let said = r
                .stderr
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("fatal:"))
                .map(|l| format!(" (git: {})", crate::sanitize::line(l)))
                .unwrap_or_default();
            return Err(HankError::usage_hint(
                format!(
                    "git has no identity to commit with in {}{said}: hank fleet run-task commits the task's work on its branch",
                    dir.display()
                ),
                "set one (`git config user.name NAME`, `git config user.email ADDRESS`, or GIT_AUTHOR_NAME/GIT_AUTHOR_EMAIL and GIT_COMMITTER_NAME/GIT_COMMITTER_EMAIL); the hank action sets github-actions[bot] when none is set",
            ));
        }
    }
    Ok(())
}

/// Puts the checkout on the task's branch: the local branch when there is one, else the
/// remote's (a task a former job stopped at a limit: its work continues), else a new branch
/// from HEAD. `true` when the work came from the remote.
///
/// # Errors
/// git refuses the fetch or the switch.
pub fn checkout_task_branch(dir: &Path, remote: Option<&str>, branch: &str) -> Result<bool> {
    let local = format!("refs/heads/{branch}");
    let has_local = remote_git(dir)
        .act(&["show-ref", "--verify", "--quiet", &local])?
        .success;
    let mut from_remote = false;
    if !has_local && let Some(remote) = remote {
        let listed = remote_git(dir).out(&["ls-remote", "--heads", "--", remote, &local])?;
        if listed.lines().any(|l| l.ends_with(&local)) {
            let tracking = format!("refs/remotes/{remote}/{branch}");
            remote_git(dir).out(&[
                "fetch",
                "-q",
                "--no-tags",
                "--",
                remote,
                &format!("+{local}:{tracking}"),
            ])?;
            remote_git(dir).out(&["branch", "--no-track", branch, &tracking])?;
            from_remote = true;
        }
    }
    crate::deliver::prepare_branch(dir, branch)?;
    Ok(from_remote)
}

/// The configuration files that differ between the commit `from` and HEAD (`.hankrc`,
/// `.hank/agents/`, the prompt file, the verify command's script:
/// [`crate::approval::config_paths`]): on a task branch an earlier job's agent may have
/// changed them.
///
/// # Errors
/// git fails.
pub fn config_changed(
    dir: &Path,
    from: &str,
    prompt: &str,
    verify_script: Option<&str>,
) -> Result<Vec<String>> {
    let args = ["diff", "--name-only", "-z", from, "HEAD"];
    let out = Checkout::at(dir)
        .git()
        .read(&args)
        .map_err(|e| HankError::Tool(e.context(&args, dir)))?;
    let changed: Vec<String> = out
        .split(|b| *b == 0)
        .filter(|l| !l.is_empty())
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    Ok(
        crate::approval::config_paths(&changed, prompt, verify_script)
            .iter()
            .map(|l| crate::sanitize::line(l).to_string())
            .collect(),
    )
}

/// Puts the checkout back where the job started: on `branch`, or detached at `commit` when it
/// was not on a branch.
///
/// # Errors
/// git refuses the switch.
pub fn switch_back(dir: &Path, branch: Option<&str>, commit: &str) -> Result<()> {
    let args: Vec<&str> = match branch {
        Some(b) => vec!["switch", "-q", "--no-guess", b],
        None => vec!["switch", "-q", "--detach", commit],
    };
    remote_git(dir).out(&args).map(|_| ())
}
