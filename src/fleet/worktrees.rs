//! Git work of the fleet: the integration worktree, the tasks' worktrees (made, pinned,
//! removed), a task's commit.

use super::{Paths, TREE_GIT_TIMEOUT, stop_recorded_check, timed};
use crate::error::HankError;
use crate::error::Result;
use crate::git::{Checkout, GitError, Integration, TaskWorktree};
use crate::policy::fleet::TaskSpec;
use crate::store;
use std::fs;
use std::path::{Path, PathBuf};

/// The fleet's git in `at` ([`crate::git::Git::read`], counted in the fleet's git time).
pub(super) fn git(at: &Checkout, args: &[&str]) -> Result<Vec<u8>> {
    timed(|| at.git().read(args)).map_err(|e| HankError::Internal(e.context(args, at.dir())))
}

/// `git` that may fail as an answer (a merge that conflicts, a branch that does not exist).
pub(super) fn git_ok(at: &Checkout, args: &[&str]) -> Result<bool> {
    match timed(|| at.git().read(args)) {
        Ok(_) => Ok(true),
        Err(GitError::Failed(_)) => Ok(false),
        Err(e) => Err(HankError::Internal(e.context(args, at.dir()))),
    }
}

/// The fleet's git in `at` bounded by [`TREE_GIT_TIMEOUT`]: the commands that check out or
/// delete every file of the tree (`git worktree add`/`remove`, a reset, a clean).
fn tree_git(at: &Checkout, args: &[&str]) -> std::result::Result<Vec<u8>, GitError> {
    timed(|| at.git().timeout(TREE_GIT_TIMEOUT).read(args))
}

/// Commits everything in `dir` except hank's own runtime files and the task's plan (the
/// integration branch's plan is ticked by the fleet), hooks off: the one commit
/// ([`crate::git::commit::commit_all`]), counted in the fleet's git time. Returns whether a
/// commit was made.
pub(super) fn commit_all(at: &Checkout, message: &str) -> Result<bool> {
    let dir = at.dir();
    let c = super::timing::timed(|| {
        crate::git::commit::commit_all(
            at,
            &crate::git::commit::CommitAll {
                message,
                hooks: crate::git::Hooks::Off,
                leave_plan: true,
                timeout: crate::git::GIT_TIMEOUT,
            },
        )
    })?;
    // Never a file that looks like a secret (it stays in the worktree, uncommitted).
    for f in &c.secrets_skipped {
        errln!(
            "hank: fleet: warning: {} looks like a secret and is not ignored: left out of the commit in {}",
            crate::sanitize::line(f),
            dir.display()
        );
    }
    if let Some(out) = c.refused {
        return Err(HankError::Internal(format!(
            "git commit in {}: {}",
            dir.display(),
            crate::sanitize::line(out.trim())
        )));
    }
    Ok(c.made)
}

/// The integration branch exists (created from the checkout's HEAD on first use) and is
/// checked out in the integration worktree, clean.
pub(super) fn ensure_integration(paths: &Paths, into: &str) -> Result<()> {
    let root = &paths.checkout();
    let refname = format!("refs/heads/{into}");
    if !git_ok(root, &["check-ref-format", &refname])? {
        return Err(HankError::usage(format!(
            "--into {into:?} is not a valid branch name"
        )));
    }
    git(root, &["worktree", "prune"])?;
    if !git_ok(root, &["rev-parse", "-q", "--verify", &refname])? {
        git(root, &["branch", into, "HEAD"])?;
    }
    let int = paths.integration();
    if int.join(".git").exists() {
        // A fleet killed mid-merge (or mid-check): the merge was made on a detached HEAD, so
        // the branch is where it was; its check, if still running, is stopped; the worktree
        // goes back to the branch.
        stop_recorded_check(paths);
        let int = integration(paths)?;
        let _ = git_ok(int.checkout(), &["merge", "--abort"]);
        return checkout_integration(paths, &int, into);
    }
    // A worktree kept from an earlier fleet ([`keep_worktrees`]): checked out at the branch
    // and cleaned, far cheaper than a new checkout of every file.
    if take_spare(paths, &int)? {
        return checkout_integration(paths, &integration(paths)?, into);
    }
    if let Some(parent) = int.parent() {
        fs::create_dir_all(parent).map_err(|e| HankError::io("create", parent, e))?;
    }
    let int_s = int.to_string_lossy().into_owned();
    // A checkout of every file: bounded by [`TREE_GIT_TIMEOUT`] (at 100,000 files on a loaded
    // ext4 disk it ran past git's ordinary minute and failed the fleet).
    let args = ["worktree", "add", "-q", &int_s, into];
    let added = tree_git(root, &args);
    if let Err(e) = &added
        && !matches!(e, GitError::Failed(_))
    {
        return Err(HankError::Internal(e.context(&args, root.dir())));
    }
    if added.is_err() {
        return Err(HankError::usage_hint(
            format!("cannot check out the integration branch {into} in {int_s}"),
            "is it checked out somewhere else (`git worktree list`)? pass --into OTHER",
        ));
    }
    Ok(())
}

/// The integration worktree (a killed fleet's, or a kept spare) at `into`, exactly:
/// checked out, reset, every other file removed (a spare's last task's files, a killed
/// check's output).
fn checkout_integration(paths: &Paths, int: &Integration, into: &str) -> Result<()> {
    let at = int.checkout();
    if !git_ok(at, &["checkout", "-q", "-f", into])? {
        return Err(HankError::usage_hint(
            format!(
                "cannot check out the integration branch {into} in {} (for {})",
                at.dir().display(),
                paths.root.display()
            ),
            "is it checked out somewhere else (`git worktree list`)? pass --into OTHER",
        ));
    }
    for args in [
        &["reset", "-q", "--hard", "HEAD"][..],
        &["clean", "-q", "-ffdx"][..],
    ] {
        tree_git(at, args).map_err(|e| HankError::Internal(e.context(args, at.dir())))?;
    }
    Ok(())
}

/// Copies the hank files a worktree needs and the branch does not have (untracked in the
/// user's checkout: `.hankrc`, `.hank/PROMPT.md`, `.hank/AGENT.md`, `.hank/agents/`).
pub(super) fn copy_missing_config(root: &Path, wt: &Path) -> Result<()> {
    no_links(wt, &[".hank", ".hank/agents"])?;
    for rel in [".hankrc", ".hank/PROMPT.md", ".hank/AGENT.md"] {
        let (from, to) = (root.join(rel), wt.join(rel));
        // Never through a link the branch holds (a dangling `.hank/AGENT.md` pointing
        // outside the project): refused, not followed.
        no_links(wt, &[rel])?;
        if from.is_file() && fs::symlink_metadata(&to).is_err() {
            if let Some(p) = to.parent() {
                fs::create_dir_all(p).map_err(|e| HankError::io("create", p, e))?;
            }
            fs::copy(&from, &to).map_err(|e| HankError::io("copy to", &to, e))?;
        }
    }
    let agents = root.join(".hank/agents");
    if let Ok(entries) = fs::read_dir(&agents) {
        for e in entries.flatten() {
            let to = wt.join(".hank/agents").join(e.file_name());
            if fs::symlink_metadata(&to).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(link_refused(wt, &to));
            }
            if e.path().is_file() && fs::symlink_metadata(&to).is_err() {
                fs::create_dir_all(wt.join(".hank/agents"))
                    .map_err(|err| HankError::io("create", wt.join(".hank/agents"), err))?;
                fs::copy(e.path(), &to).map_err(|err| HankError::io("copy to", &to, err))?;
            }
        }
    }
    Ok(())
}

/// Refuses when one of `rels` in `wt` is a symbolic link: hank's files are written and read
/// only as what they are, never through a link the agent (or a merged branch) planted.
pub(super) fn no_links(wt: &Path, rels: &[&str]) -> Result<()> {
    for rel in rels {
        let path = wt.join(rel);
        if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(link_refused(wt, &path));
        }
    }
    Ok(())
}

pub(super) fn link_refused(wt: &Path, path: &Path) -> HankError {
    HankError::usage_hint(
        format!(
            "{} is a symbolic link: hank's files in {} must be regular files (refused, not \
             followed)",
            path.display(),
            wt.display()
        ),
        "remove the link (and commit its removal on the task's branch)",
    )
}

/// The task's worktree on `hank/<slug>`: made from the integration branch as it stands now
/// (or from the task's branch when it exists: a resumed task), with the task's plan. A spare
/// worktree of an earlier task ([`retire_worktree`]) is reused when there is one: moved to the
/// task's place, checked out at the task's start and cleaned (`git clean -ffdx`: nothing of
/// the earlier task is left, hank's runtime files included), which on a large tree is far
/// cheaper than a new checkout after a removal. A marker (`<slug>.making` beside the
/// worktrees) is written first and removed last: a worktree found with its marker was
/// half-made (a kill -9) and is made again, never used as it is.
pub(super) fn ensure_worktree(paths: &Paths, spec: &TaskSpec, into: &str) -> Result<TaskWorktree> {
    let wt = paths.worktree(&spec.slug);
    let making = paths
        .user
        .join("worktrees")
        .join(format!("{}.making", spec.slug));
    let half = fs::symlink_metadata(&making).is_ok();
    if !half && fs::symlink_metadata(wt.join(".git")).is_ok() {
        // Resumed: git runs there through the git directory hank finds, never its `.git`;
        // the task's own repository is kept (its commits are the task's), or made.
        let repo = pin(paths, &wt)?;
        if repo.agent.is_none() {
            agent_repo(&repo)?;
        }
        let task = pin(paths, &wt)?;
        // Its other repositories' worktrees inside it, kept or made again from their branches.
        super::repos::open(paths, spec, into, &task)?;
        return Ok(task);
    }
    if let Some(parent) = making.parent() {
        fs::create_dir_all(parent).map_err(|e| HankError::io("create", parent, e))?;
    }
    store::write_atomic(&making, b"", false).map_err(|e| HankError::io("write", &making, e))?;
    let branch = format!("hank/{}", spec.slug);
    let exists = git_ok(
        &paths.checkout(),
        &[
            "rev-parse",
            "-q",
            "--verify",
            &format!("refs/heads/{branch}"),
        ],
    )?;
    let half_there =
        half && fs::symlink_metadata(wt.join(".git")).is_ok() && pin(paths, &wt).is_ok();
    if half && !half_there && fs::symlink_metadata(&wt).is_ok() {
        // A half-made add: its folder goes, git forgets it.
        let _ = fs::remove_dir_all(&wt);
        let _admin = admin_lock();
        let _ = git_ok(&paths.checkout(), &["worktree", "prune"]);
    }
    if half_there || take_spare(paths, &wt)? {
        reset_worktree(&pin(paths, &wt)?, &branch, exists, into)?;
    } else {
        add_worktree(paths, &wt, &branch, exists, into)?;
    }
    copy_missing_config(&paths.root, &wt)?;
    // The agent's own repository, made new for this task (issue 47), and the worktree pinned
    // again with it.
    agent_repo(&pin(paths, &wt)?)?;
    let task = pin(paths, &wt)?;
    // A task of several repositories: a worktree of each other one inside it (issue 51).
    super::repos::open(paths, spec, into, &task)?;
    let plan = format!(
        "# Fix plan — task {:?} of a hank fleet\n\n{}{}",
        spec.name,
        super::repos::plan_line(paths, spec).unwrap_or_default(),
        spec.section
    );
    let path = wt.join(".hank").join("fix_plan.md");
    store::write_atomic(&path, plan.as_bytes(), false)
        .map_err(|e| HankError::io("write", path, e))?;
    fs::remove_file(&making).map_err(|e| HankError::io("remove", &making, e))?;
    Ok(task)
}

/// A new worktree at `wt` on `branch` (made from `into` when it does not exist yet).
fn add_worktree(paths: &Paths, wt: &Path, branch: &str, exists: bool, into: &str) -> Result<()> {
    let wt_s = wt.to_string_lossy().into_owned();
    if let Some(parent) = wt.parent() {
        fs::create_dir_all(parent).map_err(|e| HankError::io("create", parent, e))?;
    }
    let add: Vec<&str> = if exists {
        vec!["worktree", "add", "-q", &wt_s, branch]
    } else {
        vec!["worktree", "add", "-q", "-b", branch, &wt_s, into]
    };
    let _admin = admin_lock();
    // A checkout of every file: bounded by [`TREE_GIT_TIMEOUT`].
    tree_git(&paths.checkout(), &add)
        .map_err(|e| HankError::Internal(e.context(&add, &paths.root)))?;
    Ok(())
}

/// A reused (or half-made) worktree at the task's start: `branch` checked out (made from
/// `into` when it does not exist), every other file removed.
fn reset_worktree(wt: &TaskWorktree, branch: &str, exists: bool, into: &str) -> Result<()> {
    let at = wt.checkout();
    let checkout: Vec<&str> = if exists {
        vec!["checkout", "-q", "-f", branch]
    } else {
        vec!["checkout", "-q", "-f", "-B", branch, into]
    };
    for args in [checkout, vec!["clean", "-q", "-ffdx"]] {
        tree_git(&at, &args).map_err(|e| HankError::Internal(e.context(&args, at.dir())))?;
    }
    Ok(())
}

/// The folder of spare worktrees (finished tasks' worktrees kept for reuse).
pub(super) const SPARE: &str = "_spare";

/// Moves a spare worktree to `wt` (`git worktree move`); `false` when there is none.
fn take_spare(paths: &Paths, wt: &Path) -> Result<bool> {
    let dir = paths.user.join("worktrees").join(SPARE);
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(false);
    };
    let _admin = admin_lock();
    for e in entries.flatten() {
        let (from, to) = (e.path(), wt.to_string_lossy().into_owned());
        let from_s = from.to_string_lossy().into_owned();
        if git_ok(&paths.checkout(), &["worktree", "move", &from_s, &to])? {
            return Ok(true);
        }
        // Not a worktree git knows (any more): it goes.
        let _ = fs::remove_dir_all(&from);
        let _ = git_ok(&paths.checkout(), &["worktree", "prune"]);
    }
    Ok(false)
}

/// A finished task's worktree (merged, or failed with its work committed) kept as a spare
/// for the next task: its HEAD detached (the task's branch is free for the user), moved under
/// [`SPARE`]. Removed instead when that fails.
pub(super) fn retire_worktree(paths: &Paths, wt: &Path) {
    let dir = paths.user.join("worktrees").join(SPARE);
    let name = wt
        .file_name()
        .map_or_else(|| "w".to_string(), |n| n.to_string_lossy().into_owned());
    let mut to = dir.join(&name);
    let mut n = 1;
    while fs::symlink_metadata(&to).is_ok() {
        n += 1;
        to = dir.join(format!("{name}-{n}"));
    }
    // Detached by writing HEAD (a `checkout --detach` would read every file of the tree);
    // the task's own repository deleted, the `.git` file git's own again (a spare carries no
    // task's repository).
    let moved = pin(paths, wt).is_ok_and(|r| {
        let at = r.checkout();
        crate::git::agent_repo::release(&r).is_ok()
            && git(&at, &["rev-parse", "-q", "--verify", "HEAD"]).is_ok_and(|head| {
                let head = String::from_utf8_lossy(&head).trim().to_string();
                git_ok(&at, &["update-ref", "--no-deref", "HEAD", &head]).unwrap_or(false)
            })
    }) && fs::create_dir_all(&dir).is_ok()
        && {
            let (from, to) = (wt.to_string_lossy(), to.to_string_lossy());
            let _admin = admin_lock();
            git_ok(&paths.checkout(), &["worktree", "move", &from, &to]).unwrap_or(false)
        };
    if !moved {
        remove_worktree(paths, wt);
    }
}

/// The fleet is over: the integration worktree becomes a spare too, and the spares are
/// kept for the next fleet of the project (its first tasks and its integration worktree then
/// start from them instead of checking out every file), at most `keep` of them (the others
/// deleted side by side). How many are kept, and their folder.
pub(super) fn keep_worktrees(paths: &Paths, keep: usize) -> (usize, PathBuf) {
    let int = paths.integration();
    if fs::symlink_metadata(&int).is_ok() {
        retire_worktree(paths, &int);
    }
    let dir = paths.user.join("worktrees").join(SPARE);
    let mut spares: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    spares.sort();
    let extra = spares.split_off(keep.min(spares.len()));
    delete_side_by_side(paths, &extra);
    (spares.len(), dir)
}

/// Every spare worktree removed (`hank fleet clean`): how many.
pub(super) fn remove_spares(paths: &Paths) -> usize {
    let dir = paths.user.join("worktrees").join(SPARE);
    let Ok(entries) = fs::read_dir(&dir) else {
        return 0;
    };
    let spares: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    delete_side_by_side(paths, &spares);
    let _ = fs::remove_dir(&dir);
    spares.len()
}

/// Spare worktrees deleted, their folders side by side, then git forgets them.
fn delete_side_by_side(paths: &Paths, spares: &[PathBuf]) {
    if spares.is_empty() {
        return;
    }
    std::thread::scope(|s| {
        for spare in spares {
            s.spawn(move || {
                let _ = fs::remove_dir_all(spare);
            });
        }
    });
    let _admin = admin_lock();
    let _ = git_ok(&paths.checkout(), &["worktree", "prune"]);
}

/// Opens the task worktree `wt` from the checkout's own records ([`TaskWorktree::pin`]): the
/// handle every git command of the fleet in `wt` goes through.
pub(super) fn pin(paths: &Paths, wt: &Path) -> Result<TaskWorktree> {
    TaskWorktree::pin(&paths.root, wt)
        .map_err(|e| HankError::Internal(format!("the worktree {}: {e}", wt.display())))
}

/// The integration worktree opened from the checkout's own records ([`Integration::pin`]).
pub(super) fn integration(paths: &Paths) -> Result<Integration> {
    let int = paths.integration();
    Integration::pin(&paths.root, &int)
        .map_err(|e| HankError::Internal(format!("the worktree {}: {e}", int.display())))
}

/// Makes the task agent's own repository in the pinned worktree `repo`
/// ([`crate::git::agent_repo::make`]); the caller pins the worktree again.
pub(super) fn agent_repo(repo: &TaskWorktree) -> Result<()> {
    crate::git::agent_repo::make(repo).map(|_| ()).map_err(|e| {
        HankError::Internal(format!(
            "the task's own repository in {}: {e}",
            repo.work_tree().display()
        ))
    })
}

pub(super) fn remove_worktree(paths: &Paths, wt: &Path) {
    // `git worktree remove` checks the `.git` file names the worktree's admin dir.
    if let Ok(r) = pin(paths, wt) {
        let _ = crate::git::agent_repo::release(&r);
    }
    let _admin = admin_lock();
    let wt_s = wt.to_string_lossy().into_owned();
    // A deletion of every file: bounded by [`TREE_GIT_TIMEOUT`], not the usual minute (at
    // 100,000 files on a loaded machine it took longer, and the fallback below then deleted
    // the tree in hank's own process).
    if tree_git(&paths.checkout(), &["worktree", "remove", "--force", &wt_s]).is_ok() {
        return;
    }
    let _ = fs::remove_dir_all(wt);
    let _ = git_ok(&paths.checkout(), &["worktree", "prune"]);
}

/// Held while a worktree is added, removed or pruned: git reads every worktree's admin folder
/// in those commands, and one being written by a concurrent `git worktree add` makes them fail
/// ("failed to read .git/worktrees/X/commondir"). Only these are serialized; merges, commits
/// and checks in the worktrees run concurrently.
pub(super) static WORKTREE_ADMIN: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(super) fn admin_lock() -> std::sync::MutexGuard<'static, ()> {
    WORKTREE_ADMIN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
