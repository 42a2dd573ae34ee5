//! A task's merge made in git's objects (git 2.38 or later): `git merge-tree --write-tree`
//! computes the merged tree with no index and no work tree, `git commit-tree` makes the merge
//! commit, the plan's ticks are a new blob and two new trees (`hash-object`, `mktree`) — so a
//! merge reads only the trees and files the two sides changed, not every file of a large tree
//! (a `git merge` in a worktree stats every file two or three times: its `stash create`, the
//! merge, the refresh). The integration worktree is used only when there is a check to run:
//! checked out at the merge for it. The branch still moves last, by compare-and-swap.

use super::{
    Cancel, MergeProblem, Options, Paths, git, integration, link_refused, run_check, timed,
};
use crate::error::HankError;
use crate::error::Result;
use crate::git::Checkout;
use crate::policy::fleet;
use crate::policy::fleet::TaskSpec;
use std::path::Path;

/// Whether `git merge-tree --write-tree` is there (git 2.38 or later), asked once.
/// `HANK_FLEET_MERGE_IN_WORKTREE=1` takes the older path (`git merge` in the integration
/// worktree) anyway: what its tests and the benchmark compare.
pub(super) fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if std::env::var_os("HANK_FLEET_MERGE_IN_WORKTREE").is_some_and(|v| v == "1") {
        return false;
    }
    *AVAILABLE.get_or_init(|| {
        crate::git::version()
            .as_deref()
            .and_then(version_of)
            .is_some_and(|v| v >= (2, 38))
    })
}

/// (major, minor) of `git version 2.47.3` (vendors' suffixes such as `.windows.1` ignored).
fn version_of(line: &str) -> Option<(u32, u32)> {
    let v = line.strip_prefix("git version ")?;
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

fn text(out: Vec<u8>) -> String {
    String::from_utf8_lossy(&out).trim().to_string()
}

/// The merge of `spec`'s branch into the integration branch at `old` (its tip when the merge
/// starts), made in objects; the check on its files when VERIFY_COMMAND is set; the branch
/// moved to it (compare-and-swap from `old`) only when all of it passed.
pub(super) fn merge(
    paths: &Paths,
    spec: &TaskSpec,
    done: &[String],
    opts: &Options,
    cancel: Cancel,
    old: &str,
) -> Result<std::result::Result<(), MergeProblem>> {
    let root = &paths.checkout();
    let int = integration(paths)?.checkout().clone();
    let into_ref = format!("refs/heads/{}", opts.into);
    let tip = text(git(
        root,
        &[
            "rev-parse",
            "--verify",
            &format!("refs/heads/hank/{}", spec.slug),
        ],
    )?);
    let tree = match merged_tree(root, old, &tip)? {
        Ok(tree) => tree,
        Err(files) => return Ok(Err(MergeProblem::Conflict(files))),
    };
    let ident = root.identity_args();
    let message = format!("hank fleet: merge task {}", spec.name);
    let merged = commit_tree(root, &ident, &tree, &[old, &tip], &message)?;
    if let Some(cmd) = opts.verify.as_deref() {
        // The check runs on the merge's files: the integration worktree at the merge, its
        // HEAD detached (the branch has not moved).
        git(&int, &["checkout", "-q", "-f", "--detach", &merged])?;
        let log = paths.log(&format!("{}.verify", spec.slug));
        let red = run_check(paths, int.dir(), cmd, opts.verify_timeout, &log, cancel);
        // Back on the branch (its files are the check's: every later use checks out first).
        git(&int, &["symbolic-ref", "HEAD", &into_ref])?;
        if let Err(tail) = red? {
            return Ok(Err(MergeProblem::Red(tail)));
        }
    }
    let new = tick(root, &ident, &merged, spec, done)?;
    git(root, &["update-ref", "-m", &message, &into_ref, &new, old])?;
    Ok(Ok(()))
}

/// `git merge-tree --write-tree OLD TIP`: the merged tree, or the files that conflict.
pub(super) fn merged_tree(
    root: &Checkout,
    old: &str,
    tip: &str,
) -> Result<std::result::Result<String, Vec<String>>> {
    let args = [
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        "-z",
        old,
        tip,
    ];
    let (code, out) = timed(|| root.git().answer(&args))
        .map_err(|e| HankError::Internal(e.context(&args, root.dir())))?;
    let out = String::from_utf8_lossy(&out);
    let mut fields = out.split('\0').filter(|f| !f.is_empty());
    let tree = fields.next().unwrap_or_default().to_string();
    let is_id = tree.len() >= 40 && tree.bytes().all(|b| b.is_ascii_hexdigit());
    match code {
        Some(0) if is_id => Ok(Ok(tree)),
        // 1: conflicts; the names follow the tree.
        Some(1) if is_id => Ok(Err(fields.map(ToString::to_string).collect())),
        _ => Err(HankError::Internal(format!(
            "git merge-tree in {} ended with {code:?} and no tree",
            root.dir().display()
        ))),
    }
}

pub(super) fn commit_tree(
    root: &Checkout,
    ident: &[&str],
    tree: &str,
    parents: &[&str],
    message: &str,
) -> Result<String> {
    let mut args = ident.to_vec();
    args.extend(["commit-tree", tree]);
    for p in parents {
        args.extend(["-p", p]);
    }
    args.extend(["-m", message]);
    Ok(text(git(root, &args)?))
}

/// The entries of a tree as `git ls-tree -z` lists them: (mode, type, id, name).
fn entries(root: &Checkout, tree: &str) -> Result<Vec<(String, String, String, String)>> {
    let out = git(root, &["ls-tree", "-z", tree])?;
    Ok(out
        .split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .filter_map(|e| {
            let e = String::from_utf8_lossy(e);
            let (meta, name) = e.split_once('\t')?;
            let mut m = meta.split(' ');
            Some((
                m.next()?.to_string(),
                m.next()?.to_string(),
                m.next()?.to_string(),
                name.to_string(),
            ))
        })
        .collect())
}

/// A tree like `entries` with `name`'s id replaced by `id`, written (`git mktree`).
fn replaced(
    root: &Checkout,
    entries: &[(String, String, String, String)],
    name: &str,
    id: &str,
) -> Result<String> {
    let mut input = Vec::new();
    for (mode, kind, old, n) in entries {
        let id = if n == name { id } else { old };
        input.extend_from_slice(format!("{mode} {kind} {id}\t{n}").as_bytes());
        input.push(0);
    }
    write_object(root, &["mktree", "-z"], &input)
}

/// Runs a git command that writes an object from `input` on its stdin; the object's id.
fn write_object(root: &Checkout, args: &[&str], input: &[u8]) -> Result<String> {
    let r = timed(|| root.git().act_input(args, input))
        .map_err(|e| HankError::Internal(e.context(args, root.dir())))?;
    let id = r.stdout.trim().to_string();
    if r.success && id.len() >= 40 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(id)
    } else {
        Err(HankError::Internal(format!(
            "git {} in {}: {}",
            args.join(" "),
            root.dir().display(),
            crate::sanitize::line(r.stderr.trim())
        )))
    }
}

/// The task's items ticked in the merge's `.hank/fix_plan.md`: a commit on `merged` changing
/// only that file, or `merged` itself when nothing is to tick (or there is no plan). A plan
/// that is not a regular file in a `.hank` folder is refused, never followed.
fn tick(
    root: &Checkout,
    ident: &[&str],
    merged: &str,
    spec: &TaskSpec,
    done: &[String],
) -> Result<String> {
    let top = entries(root, merged)?;
    let Some((mode, _, hank, _)) = top.iter().find(|e| e.3 == ".hank") else {
        return Ok(merged.to_string());
    };
    if mode != "040000" {
        return Err(link_refused(Path::new(merged), Path::new(".hank")));
    }
    let hank_entries = entries(root, hank)?;
    let Some((mode, _, blob, _)) = hank_entries.iter().find(|e| e.3 == "fix_plan.md") else {
        return Ok(merged.to_string());
    };
    if mode != "100644" && mode != "100755" {
        return Err(link_refused(
            Path::new(merged),
            Path::new(".hank/fix_plan.md"),
        ));
    }
    let plan = git(root, &["cat-file", "blob", blob])?;
    let Ok(plan) = String::from_utf8(plan) else {
        return Ok(merged.to_string());
    };
    let ticked = fleet::tick_items(&plan, &spec.name, done);
    if ticked == plan {
        return Ok(merged.to_string());
    }
    let blob = write_object(root, &["hash-object", "-w", "--stdin"], ticked.as_bytes())?;
    let hank = replaced(root, &hank_entries, "fix_plan.md", &blob)?;
    let tree = replaced(root, &top, ".hank", &hank)?;
    commit_tree(
        root,
        ident,
        &tree,
        &[merged],
        "hank fleet: tick the task's items",
    )
}

#[cfg(test)]
mod tests {
    use super::version_of;

    #[test]
    fn gits_version_line_is_read_as_major_and_minor() {
        for (line, want) in [
            ("git version 2.47.3", Some((2, 47))),
            ("git version 2.38.0", Some((2, 38))),
            ("git version 2.34.1", Some((2, 34))),
            ("git version 2.39.5 (Apple Git-154)", Some((2, 39))),
            ("git version 2.45.2.windows.1", Some((2, 45))),
            ("git version 3.0", Some((3, 0))),
            ("not git", None),
        ] {
            assert_eq!(version_of(line), want, "{line}");
        }
    }
}
