//! A fleet task's agent commits in a repository of its own (issue 47).
//!
//! A task's worktree is a linked worktree of the user's repository (`git worktree add`: hank's
//! own view of the task — its HEAD on `hank/<slug>`, its index, a merge in progress — lives in
//! the checkout's records, `<common>/worktrees/<id>`, which the agent can neither write nor
//! read). The worktree's `.git` file names another git dir, made by hank for the task's agent:
//! `<common>/worktrees/<id>/agent` ([`AGENT_DIR`], `P`), the only git dir the agent may write.
//! P holds HEAD on the task's branch, the user's branches and tags copied as facts (a
//! `packed-refs` file: `git diff main` works; changing them changes nothing of the user's),
//! hank's index of the checkout (so the agent's `git status` is clean at the start), a merge in
//! progress when hank handed one back, a `config` of a few keys written by hank, and
//! `objects/` of its own with `objects/info/alternates` naming the checkout's objects, which
//! the agent may read but not write. The user's refs, reflogs, objects, `config`, `hooks/`
//! and `info/` are never writable by the agent, nor any other task's branch.
//!
//! hank moves `hank/<slug>` itself ([`import`]): the task's commits are read out of P by
//! `git pack-objects` (P's objects as an alternate, checked first: regular files only, the
//! alternates file as hank wrote it), indexed into the checkout by `git index-pack --stdin
//! --fix-thin` (every object's id computed from its content), their connectivity checked
//! with `git rev-list --objects`, and the branch moved by compare-and-swap from the tip hank
//! knows. hank's own git never runs in P (its `config` is the agent's) and never reads its
//! `commondir`: P's files are read in process (HEAD, the branch's ref), and progress's
//! in-process reader reads P as the agent's view. P goes with the worktree (`git worktree
//! remove`/`prune` delete its admin dir) and is made again, empty, for every task that takes
//! the worktree ([`make`]): no task's P carries over to another.

use std::path::{Path, PathBuf};

use super::{Checkout, GitError, TaskWorktree, small_file};

/// The agent's own git dir, in the worktree's admin dir.
pub const AGENT_DIR: &str = "agent";

/// What a task worktree's `.git` file holds once hank gave it its own repository `p`.
#[must_use]
pub fn dot_git_text(p: &Path) -> String {
    format!("gitdir: {}\n", p.display())
}

/// P's `objects/info/alternates`: the checkout's objects.
#[must_use]
pub fn alternates_text(common: &Path) -> String {
    format!("{}\n", common.join("objects").display())
}

fn io(what: &str, path: &Path, e: &std::io::Error) -> GitError {
    GitError::Output(format!("cannot {what} {}: {e}", path.display()))
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), GitError> {
    crate::store::write_atomic(path, bytes, false).map_err(|e| io("write", path, &e))
}

/// The text of `git ARGS` in `dir` (trimmed), `None` when it fails.
fn answer(at: &Checkout, args: &[&str]) -> Option<String> {
    at.git()
        .read(args)
        .ok()
        .map(|o| String::from_utf8_lossy(&o).trim().to_string())
        .filter(|t| !t.is_empty())
}

/// A git config value as one line of a config file, quoted (`None`: not writable safely).
fn config_value(v: &str) -> Option<String> {
    if v.chars().any(char::is_control) {
        return None;
    }
    Some(format!(
        "\"{}\"",
        v.replace('\\', "\\\\").replace('"', "\\\"")
    ))
}

/// The keys of the user's configuration P's `config` repeats (the identity the agent commits
/// with, how the work tree's files are compared): nothing that names a program.
const COPIED_KEYS: &str =
    "^(user\\.(name|email)|core\\.(filemode|autocrlf|ignorecase|symlinks|eol|precomposeunicode))$";

/// P's `config`: a repository of its own (no `commondir`, no `worktree`) with the few keys of
/// the user's effective configuration [`COPIED_KEYS`] names (read through hank's view of the
/// worktree `wt`), written by hank.
fn agent_config(wt: &Checkout) -> String {
    let mut core =
        String::from("\trepositoryformatversion = 0\n\tbare = false\n\tlogallrefupdates = true\n");
    let mut user = String::new();
    let listed = answer(wt, &["config", "--get-regexp", COPIED_KEYS]).unwrap_or_default();
    for line in listed.lines() {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        let Some(value) = config_value(value) else {
            continue;
        };
        match key.split_once('.') {
            Some(("user", name)) => user.push_str(&format!("\t{name} = {value}\n")),
            Some(("core", name)) => core.push_str(&format!("\t{name} = {value}\n")),
            _ => {}
        }
    }
    let mut config = format!("[core]\n{core}");
    if !user.is_empty() {
        config.push_str("[user]\n");
        config.push_str(&user);
    }
    config
}

/// Makes the task agent's own repository for the pinned worktree `repo`, from hank's view of
/// it (its HEAD, branch tip, index and merge in progress), replacing whatever P held, and
/// points the worktree's `.git` file at it. The caller pins the worktree again (so the record
/// names P). Its path.
///
/// # Errors
/// A file cannot be written, or git cannot read the checkout's refs.
pub fn make(repo: &TaskWorktree) -> Result<PathBuf, GitError> {
    let t = repo;
    let p = t.admin.join(AGENT_DIR);
    if std::fs::symlink_metadata(&p).is_ok() {
        std::fs::remove_dir_all(&p).map_err(|e| io("remove", &p, &e))?;
    }
    for d in [
        "objects/info",
        "objects/pack",
        "refs/heads",
        "refs/tags",
        "info",
    ] {
        let d = p.join(d);
        std::fs::create_dir_all(&d).map_err(|e| io("create", &d, &e))?;
    }
    let head = small_file(&t.admin.join("HEAD"))
        .ok_or_else(|| GitError::Output(format!("no HEAD in {}", t.admin.display())))?;
    write(&p.join("HEAD"), &head)?;
    // The user's branches and tags, as facts: a copy the agent may change for itself.
    let refs = Checkout::at(&t.common).git().read(&[
        "for-each-ref",
        "--format=%(objectname) %(refname)",
        "refs/heads",
        "refs/tags",
    ])?;
    write(&p.join("packed-refs"), &refs)?;
    // The task's branch as a loose ref too (its tip as hank's view has it).
    if let Some(branch) = String::from_utf8_lossy(&head)
        .trim()
        .strip_prefix("ref: ")
        .map(str::to_string)
        && let Some(tip) = answer(&repo.checkout(), &["rev-parse", "-q", "--verify", "HEAD"])
    {
        let path = p.join(&branch);
        if branch.starts_with("refs/heads/") && !branch.contains("..") {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io("create", parent, &e))?;
            }
            write(&path, format!("{tip}\n").as_bytes())?;
        }
    }
    write(&p.join("config"), agent_config(&repo.checkout()).as_bytes())?;
    write(
        &p.join("objects/info/alternates"),
        alternates_text(&t.common).as_bytes(),
    )?;
    // hank's index of the checkout, a merge in progress, the user's excludes: copied.
    for (from, to) in [
        (t.admin.join("index"), p.join("index")),
        (t.admin.join("MERGE_HEAD"), p.join("MERGE_HEAD")),
        (t.admin.join("MERGE_MSG"), p.join("MERGE_MSG")),
        (t.admin.join("MERGE_MODE"), p.join("MERGE_MODE")),
        (t.common.join("info/exclude"), p.join("info/exclude")),
    ] {
        if std::fs::symlink_metadata(&from).is_ok_and(|m| m.is_file()) {
            std::fs::copy(&from, &to).map_err(|e| io("copy to", &to, &e))?;
        }
    }
    point_dot_git(&repo.work_tree, dot_git_text(&p).as_bytes())?;
    Ok(p)
}

/// Writes the worktree's `.git` file (whatever the agent left there — a link, a folder — is
/// removed first, never written through).
fn point_dot_git(wt: &Path, text: &[u8]) -> Result<(), GitError> {
    let dot = wt.join(".git");
    match std::fs::symlink_metadata(&dot) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&dot).map_err(|e| io("remove", &dot, &e))?,
        Ok(_) => std::fs::remove_file(&dot).map_err(|e| io("remove", &dot, &e))?,
        Err(_) => {}
    }
    write(&dot, text)
}

/// The worktree handed back to git's own layout before `git worktree move` or `remove` (which
/// check that its `.git` file names its admin dir), its agent's repository deleted: a spare
/// carries no task's P.
///
/// # Errors
/// The `.git` file cannot be written.
pub fn release(repo: &TaskWorktree) -> Result<(), GitError> {
    let t = repo;
    let p = t.admin.join(AGENT_DIR);
    if std::fs::symlink_metadata(&p).is_ok() {
        std::fs::remove_dir_all(&p).map_err(|e| io("remove", &p, &e))?;
    }
    point_dot_git(
        &repo.work_tree,
        format!("gitdir: {}\n", t.admin.display()).as_bytes(),
    )
}

/// The agent's ref `name` (`refs/heads/…`) in P, read in process: its loose file or its line
/// in `packed-refs` (regular files only, never through a link); `None` when it has none.
fn agent_ref(p: &Path, name: &str) -> Option<String> {
    let valid = |t: &str| t.len() == 40 && t.bytes().all(|b| b.is_ascii_hexdigit());
    if !name.contains("..")
        && let Some(bytes) = small_file(&p.join(name))
    {
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        return valid(&text).then_some(text);
    }
    let packed =
        crate::fsread::read(&p.join("packed-refs"), 64 << 20, crate::fsread::Follow::No).ok()?;
    String::from_utf8_lossy(&packed).lines().find_map(|l| {
        let (id, r) = l.split_once(' ')?;
        (r == name && valid(id)).then(|| id.to_string())
    })
}

/// Most entries of P's `objects/` looked at before an import.
const MAX_OBJECT_FILES: usize = 1_000_000;

/// Whether everything under P's `objects/` is a folder or a regular file (a link would have
/// hank's git read a file the agent cannot: another repository's pack); the first that is not.
fn irregular_object_file(objects: &Path) -> Option<PathBuf> {
    let mut stack = vec![(objects.to_path_buf(), 0u8)];
    let mut seen = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Some(dir);
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_OBJECT_FILES {
                return Some(objects.to_path_buf());
            }
            let Ok(ft) = e.file_type() else {
                return Some(e.path());
            };
            if ft.is_dir() && depth < 4 {
                stack.push((e.path(), depth + 1));
            } else if !ft.is_file() {
                return Some(e.path());
            }
        }
    }
    None
}

/// Brings the task agent's commits into the checkout: the branch HEAD of P is on (it must be
/// the branch of hank's view, `hank/<slug>`) imported — objects verified, connectivity
/// checked — and `refs/heads/hank/<slug>` moved to it by compare-and-swap; hank's index of the
/// worktree then follows the new tip (its stat data kept). `Ok(Err(why))`: refused (HEAD on
/// another branch, a tampered record, objects that are not regular files, commits that do not
/// hold together); nothing moved. Nothing to do for a worktree without P.
///
/// # Errors
/// git cannot run.
pub fn import(repo: &TaskWorktree) -> Result<std::result::Result<(), String>, GitError> {
    let t = repo;
    let Some(p) = &t.agent else {
        return Ok(Ok(()));
    };
    if let Some((file, what)) = t.tampered() {
        return Ok(Err(format!("{}: {what}: refused", file.display())));
    }
    let head = small_file(&t.admin.join("HEAD")).unwrap_or_default();
    let head = String::from_utf8_lossy(&head).trim().to_string();
    let Some(branch) = head
        .strip_prefix("ref: ")
        .filter(|b| b.starts_with("refs/heads/"))
    else {
        return Ok(Ok(()));
    };
    let short = branch.strip_prefix("refs/heads/").unwrap_or(branch);
    let agent_head = small_file(&p.join("HEAD")).unwrap_or_default();
    let agent_head = String::from_utf8_lossy(&agent_head).trim().to_string();
    if agent_head != head {
        let on = agent_head.strip_prefix("ref: refs/heads/").map_or_else(
            || "detached".to_string(),
            |b| format!("on {}", crate::sanitize::line(b)),
        );
        return Ok(Err(format!(
            "HEAD of {} is {on} instead of the branch hank made for it, {short}: refused",
            repo.work_tree.display()
        )));
    }
    let Some(tip) = agent_ref(p, branch) else {
        return Ok(Err(format!(
            "the task's branch {short} is gone from its repository {}: refused",
            p.display()
        )));
    };
    let old = answer(
        &Checkout::at(&t.common),
        &["rev-parse", "-q", "--verify", branch],
    )
    .unwrap_or_default();
    if tip == old {
        return Ok(Ok(()));
    }
    let objects = p.join("objects");
    if let Some(bad) = irregular_object_file(&objects) {
        return Ok(Err(format!(
            "{} is not a regular file or folder in the task's repository: its commits are not imported",
            bad.display()
        )));
    }
    let mut revs = format!("{tip}\n");
    if !old.is_empty() {
        revs.push_str(&format!("^{old}\n"));
    }
    let pack = Checkout::at(&t.common).git().io(
        &["pack-objects", "--revs", "--stdout", "-q"],
        &[("GIT_ALTERNATE_OBJECT_DIRECTORIES", &objects)],
        revs.as_bytes(),
    );
    let Ok(pack) = pack else {
        return Ok(Err(format!(
            "the task's commits ({short} at {tip}) cannot be read from its repository: not imported"
        )));
    };
    Checkout::at(&t.common)
        .git()
        .io(&["index-pack", "--stdin", "--fix-thin"], &[], &pack)?;
    let mut check = vec!["rev-list", "--objects", "--quiet", tip.as_str()];
    if !old.is_empty() {
        check.extend(["--not", old.as_str()]);
    }
    if Checkout::at(&t.common).git().read(&check).is_err() {
        return Ok(Err(format!(
            "the task's commits ({short} at {tip}) are incomplete: not imported"
        )));
    }
    let mut update = vec![
        "update-ref",
        "-m",
        "hank fleet: the task's commits",
        branch,
        tip.as_str(),
    ];
    // Created when hank's view has no such branch yet, else moved from the tip hank knows.
    update.push(if old.is_empty() {
        "0000000000000000000000000000000000000000"
    } else {
        old.as_str()
    });
    Checkout::at(&t.common).git().read(&update)?;
    // hank's index follows the branch (unmerged entries dropped: the agent resolved them).
    repo.checkout()
        .git()
        .read(&["read-tree", "--reset", "HEAD"])?;
    // A merge hank handed back that the agent committed is over.
    let merge_head = t.admin.join("MERGE_HEAD");
    if let Some(m) = small_file(&merge_head) {
        let m = String::from_utf8_lossy(&m).trim().to_string();
        if repo
            .checkout()
            .git()
            .read(&["merge-base", "--is-ancestor", m.as_str(), "HEAD"])
            .is_ok()
        {
            for f in ["MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "AUTO_MERGE"] {
                let _ = std::fs::remove_file(t.admin.join(f));
            }
        }
    }
    Ok(Ok(()))
}

/// The folders `names` of the worktree left out of the agent's `git status` (and of the
/// progress reader's view, which reads P): lines `/NAME/` added to P's `info/exclude`, which
/// hank writes at [`make`]. For a task of several repositories, whose other repositories'
/// worktrees are folders of its own (each a repository of its own, not a file of this one).
/// Nothing to do for a worktree without P.
///
/// # Errors
/// The file cannot be read or written.
pub fn exclude_folders(repo: &TaskWorktree, names: &[String]) -> Result<(), GitError> {
    let Some(p) = &repo.agent else {
        return Ok(());
    };
    if names.is_empty() {
        return Ok(());
    }
    let path = p.join("info/exclude");
    let mut text = small_file(&path).unwrap_or_default();
    if !text.is_empty() && !text.ends_with(b"\n") {
        text.push(b'\n');
    }
    for n in names {
        let line = format!("/{n}/\n");
        if !String::from_utf8_lossy(&text)
            .lines()
            .any(|l| format!("{l}\n") == line)
        {
            text.extend_from_slice(line.as_bytes());
        }
    }
    write(&path, &text)
}
