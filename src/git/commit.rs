//! The one commit of "everything the agent left": delivery's commit (`hank run --deliver`,
//! `hank deliver`, `hank fleet run-task`) and a fleet task's commit (`hank fleet`) are this
//! one procedure, [`commit_all`]: stage all, unstage hank's runtime files (the one list,
//! [`runtime_paths`]) and files that look like secrets, commit — with hank's identity when the
//! repository has none, the user's hooks only when [`Hooks::Run`] — and say whether something
//! was committed.

use std::time::Duration;

use super::{Checkout, GIT_TIMEOUT, GitRun, Hooks};
use crate::error::{HankError, Result};

/// hank's runtime files (the `.gitignore` entries hank writes): never committed.
#[must_use]
pub fn runtime_paths() -> Vec<String> {
    include_str!("../../templates/gitignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.trim_end_matches('/').to_string())
        .collect()
}

/// [`runtime_paths`] as git pathspecs that match each path and everything under it, and
/// match nothing quietly: what [`is_runtime_path`] decides in process, as git would.
#[must_use]
pub fn runtime_globs() -> Vec<String> {
    runtime_paths()
        .iter()
        .flat_map(|p| [format!(":(glob){p}"), format!(":(glob){p}/**")])
        .collect()
}

/// The plan of a fleet task's worktree (its one section): the fleet ticks the integration
/// branch's plan itself, so a task's commit leaves it out.
pub const TASK_PLAN_PATH: &str = ".hank/fix_plan.md";

/// What [`commit_all`] is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct CommitAll<'a> {
    pub message: &'a str,
    /// The user's hooks and filters ([`Hooks::Run`]: delivery, approved) or none.
    pub hooks: Hooks,
    /// The task's plan left out too ([`TASK_PLAN_PATH`]): a fleet task's commit.
    pub leave_plan: bool,
    /// How long the commit itself may run (a slow pre-commit hook); the other steps are
    /// bounded by [`GIT_TIMEOUT`].
    pub timeout: Duration,
}

/// What [`commit_all`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    /// A commit was made (`false`: nothing to commit).
    pub made: bool,
    /// Files left out because they look like secrets
    /// ([`crate::policy::secrets::looks_like_secret`]); they stay in the working tree,
    /// uncommitted.
    pub secrets_skipped: Vec<String>,
    /// git refused the commit (a pre-commit or commit-msg hook): its output, bounded like a
    /// pre-push hook's. Nothing was committed.
    pub refused: Option<String>,
}

fn run(dir: &Checkout, args: &[&str], timeout: Duration, hooks: Hooks) -> Result<GitRun> {
    dir.git()
        .timeout(timeout)
        .hooks(hooks)
        .act(args)
        .map_err(|e| HankError::Tool(e.context(args, dir.dir())))
}

fn ok(dir: &Checkout, args: &[&str]) -> Result<GitRun> {
    let r = run(dir, args, GIT_TIMEOUT, Hooks::Off)?;
    if r.success {
        Ok(r)
    } else {
        Err(HankError::Tool(format!(
            "`git {}` failed in {}: {}",
            args.join(" "),
            dir.dir().display(),
            crate::sanitize::line(r.stderr.trim())
        )))
    }
}

/// Commits everything in `dir` (new, changed and deleted files) but hank's runtime files
/// (even where `.gitignore` does not list them), the task's plan when asked, and files that
/// look like secrets — `.env`, private keys… — (they stay in the working tree, named in
/// [`Committed::secrets_skipped`]). A merge in progress is committed even when it stages
/// nothing new. Without an identity in git's configuration the commit is hank's
/// ([`Checkout::identity_args`]). A commit a hook refused is [`Committed::refused`] with the
/// hook's output. HEAD is not checked here: the callers check the branch they expect.
///
/// # Errors
/// git cannot run, or staging/unstaging failed (then nothing was committed).
pub fn commit_all(dir: &Checkout, c: &CommitAll<'_>) -> Result<Committed> {
    // A fleet task's agent committed in its own repository: its commits come in first
    // (hank moves the branch), or nothing is committed.
    if let Some(task) = dir.task() {
        match super::agent_repo::import(task) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => return Err(HankError::Tool(why)),
            Err(e) => {
                return Err(HankError::Tool(format!(
                    "the task's commits in {}: {e}",
                    dir.dir().display()
                )));
            }
        }
    }
    let r = run(dir, &["add", "--all", "--", "."], GIT_TIMEOUT, c.hooks)?;
    if !r.success {
        return Err(HankError::Tool(format!(
            "`git add` failed in {}: {}",
            dir.dir().display(),
            crate::sanitize::line(r.stderr.trim())
        )));
    }
    // What `git add` staged, named in process: hank's runtime files (and the task's plan)
    // are unstaged again by name (an exclude pathspec of an ignored path makes `git add`
    // fail), and only when one was staged: a reset by glob reads the whole index and tree,
    // half a second at 100,000 files.
    let listing = staged_changes(dir)?;
    let (runtime, listing): (Vec<_>, Vec<_>) = listing
        .into_iter()
        .partition(|(_, path)| is_runtime_path(path) || (c.leave_plan && path == TASK_PLAN_PATH));
    let names: Vec<String> = runtime.into_iter().map(|(_, path)| path).collect();
    unstage(dir, &names)?;
    let secrets_skipped = unstage_secrets_of(dir, &listing)?;
    let merging = run(
        dir,
        &["rev-parse", "-q", "--verify", "MERGE_HEAD"],
        GIT_TIMEOUT,
        Hooks::Off,
    )?
    .success;
    // Something staged outside the project's folder (in a repository it is a folder of) is
    // not in the listing: git is asked about the whole index when the listing has nothing.
    let staged = listing.len() > secrets_skipped.len()
        || !run(
            dir,
            &["diff", "--cached", "--quiet"],
            GIT_TIMEOUT,
            Hooks::Off,
        )?
        .success;
    if !merging && !staged {
        return Ok(Committed {
            made: false,
            secrets_skipped,
            refused: None,
        });
    }
    let mut args = dir.identity_args();
    args.extend(["commit", "--quiet"]);
    if c.hooks == Hooks::Off {
        args.push("--no-verify");
    }
    args.extend(["-m", c.message]);
    let r = run(dir, &args, c.timeout, c.hooks)?;
    let refused = (!r.success).then(|| tail_chars(&format!("{}\n{}", r.stderr, r.stdout)));
    Ok(Committed {
        made: r.success,
        secrets_skipped,
        refused,
    })
}

/// The end of a hook's output kept for the agent (cleaned later by the rules).
#[must_use]
pub fn tail_chars(output: &str) -> String {
    let keep = crate::policy::deliver::MAX_HOOK_OUTPUT_CHARS * 4;
    let n = output.chars().count();
    if n > keep {
        output.chars().skip(n - keep).collect()
    } else {
        output.to_string()
    }
}

/// The index's changes from HEAD after a `git add`: (deleted, path) for every path staged
/// in `dir`'s folder, relative to it (as the project names its files, and as a literal
/// pathspec given in `dir` names them).
fn staged_changes(dir: &Checkout) -> Result<Vec<(bool, String)>> {
    let out = ok(
        dir,
        &[
            "diff",
            "--cached",
            "--name-status",
            "--no-renames",
            "--relative",
            "-z",
        ],
    )?
    .stdout;
    let mut fields = out.split('\0').filter(|f| !f.is_empty());
    let mut changes = Vec::new();
    while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
        changes.push((status.starts_with('D'), path.to_string()));
    }
    Ok(changes)
}

/// `paths` taken out of the index again (back to HEAD's version), by literal name.
///
/// # Errors
/// git cannot run or the reset failed (then nothing may be committed).
fn unstage(dir: &Checkout, paths: &[String]) -> Result<()> {
    for chunk in paths.chunks(500) {
        let specs: Vec<String> = chunk.iter().map(|p| format!(":(literal){p}")).collect();
        let mut args = vec!["reset", "--quiet", "--"];
        args.extend(specs.iter().map(String::as_str));
        ok(dir, &args)?;
    }
    Ok(())
}

/// Takes the staged files that look like secrets out of the index (added or changed; a
/// deletion leaks nothing and stays); their names.
///
/// # Errors
/// git cannot run, or the files could not be taken out (then nothing may be committed).
pub fn unstage_secrets(dir: &Checkout) -> Result<Vec<String>> {
    let listing = staged_changes(dir)?;
    unstage_secrets_of(dir, &listing)
}

/// [`unstage_secrets`] over the staged changes already listed.
fn unstage_secrets_of(dir: &Checkout, listing: &[(bool, String)]) -> Result<Vec<String>> {
    let secrets: Vec<String> = listing
        .iter()
        .filter(|(deleted, p)| !deleted && crate::policy::secrets::looks_like_secret(p))
        .map(|(_, p)| p.clone())
        .collect();
    // Without the reset a secret would be committed: refuse the commit instead.
    unstage(dir, &secrets).map_err(|e| {
        HankError::Tool(format!(
            "could not leave {} out of the commit: {e}",
            secrets.join(", ")
        ))
    })?;
    Ok(secrets)
}

/// Whether `path` (repository-relative) is one of hank's runtime files or under one of its
/// runtime folders ([`runtime_paths`]; a `*` stands for any part of one path segment): what
/// `git reset -- SPECS` of [`runtime_globs`] would match, decided in process.
#[must_use]
pub fn is_runtime_path(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    runtime_paths().iter().any(|pattern| {
        let pattern: Vec<&str> = pattern.split('/').collect();
        segments.len() >= pattern.len()
            && pattern
                .iter()
                .zip(&segments)
                .all(|(p, s)| segment_matches(p, s))
    })
}

/// One path segment against a pattern whose `*` matches any run of characters.
fn segment_matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::git_in;
    use std::path::Path;

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        git_in(d.path(), &["init", "-q"]);
        std::fs::write(d.path().join("a.txt"), "a\n").unwrap();
        git_in(d.path(), &["add", "a.txt"]);
        git_in(d.path(), &["commit", "-q", "-m", "first"]);
        d
    }

    fn commit(dir: &Path, leave_plan: bool) -> Committed {
        commit_all(
            &Checkout::at(dir),
            &CommitAll {
                message: "work",
                hooks: Hooks::Off,
                leave_plan,
                timeout: GIT_TIMEOUT,
            },
        )
        .unwrap()
    }

    fn committed_files(dir: &Path) -> String {
        let r = run(
            &Checkout::at(dir),
            &["show", "--name-only", "--format=", "HEAD"],
            GIT_TIMEOUT,
            Hooks::Off,
        )
        .unwrap();
        r.stdout
    }

    #[test]
    fn the_work_is_committed_without_runtime_files_secrets_or_hooks() {
        let d = repo();
        let p = d.path();
        std::fs::create_dir_all(p.join(".hank/logs")).unwrap();
        std::fs::write(p.join(".hank/logs/loop-1.out"), "x").unwrap();
        std::fs::write(p.join(".hank/status.json"), "{}").unwrap();
        std::fs::write(p.join(".hank/fix_plan.md"), "- [x] a\n").unwrap();
        std::fs::write(p.join(".env"), "TOKEN=1\n").unwrap();
        std::fs::write(p.join("b.txt"), "b\n").unwrap();
        // A hook that would refuse: never run with hooks off.
        std::fs::write(p.join(".git/hooks/pre-commit"), "#!/bin/sh\nexit 1\n").unwrap();
        std::fs::set_permissions(
            p.join(".git/hooks/pre-commit"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let c = commit(p, true);
        assert!(c.made && c.refused.is_none(), "{c:?}");
        assert_eq!(c.secrets_skipped, vec![".env".to_string()]);
        let files = committed_files(p);
        assert_eq!(files.trim(), "b.txt", "{files}");
        assert!(p.join(".env").exists());
        // Nothing left to commit: no commit, said so.
        assert!(!commit(p, true).made);
        // The plan is committed when it is not a task's.
        let c = commit(p, false);
        assert!(c.made);
        assert_eq!(committed_files(p).trim(), ".hank/fix_plan.md");
    }

    #[test]
    fn a_repository_without_an_identity_gets_hanks() {
        let d = repo();
        let p = d.path();
        std::fs::write(p.join("c.txt"), "c\n").unwrap();
        assert!(commit(p, false).made);
        let r = run(
            &Checkout::at(p),
            &["log", "-1", "--format=%ae"],
            GIT_TIMEOUT,
            Hooks::Off,
        )
        .unwrap();
        // git_in commits with its own -c identity; the repository has none configured
        // unless the user's global configuration gives one.
        let global = run(
            &Checkout::at(p),
            &["config", "user.email"],
            GIT_TIMEOUT,
            Hooks::Off,
        )
        .unwrap();
        let want = if global.success {
            global.stdout.trim().to_string()
        } else {
            "hank@localhost".to_string()
        };
        assert_eq!(r.stdout.trim(), want);
    }

    #[test]
    fn runtime_paths_are_named_in_process_as_gits_glob_pathspecs_name_them() {
        // Every path below is tracked in a repository; `git ls-files -- <runtime globs>` is
        // what git's own matching says, and the in-process match must say the same.
        let d = repo();
        let p = d.path();
        let paths = [
            ".hank/logs/loop-1.out",
            ".hank/logs/deep/x/y.log",
            ".hank/logs.txt",
            ".hank/status.json",
            ".hank/status.json.bak",
            ".hank/status.jsonl",
            ".hank/state.json",
            ".hank/state.json.tmp-1",
            ".hank/state.jsonx/inner",
            ".hank/events.jsonl",
            ".hank/live.log",
            ".hank/hank.lock",
            ".hank/backup/1/fix_plan.md",
            ".hank/backup",
            ".hank/fleet.json",
            ".hank/delivery.json",
            ".hank/.tmp-abc",
            ".hank/.tmp-",
            ".hank/x.tmp-1",
            ".hank/fix_plan.md",
            ".hank/PROMPT.md",
            "sub/.hank/status.json",
            "hank/status.json",
            ".hankrc",
            "src/main.rs",
        ];
        for rel in paths {
            let path = p.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            if !path.exists() {
                std::fs::write(&path, "x").unwrap();
            }
        }
        git_in(p, &["add", "-A", "-f", "--", "."]);
        let globs = runtime_globs();
        let mut args = vec!["ls-files", "-z", "--"];
        args.extend(globs.iter().map(String::as_str));
        let by_git = run(&Checkout::at(p), &args, GIT_TIMEOUT, Hooks::Off)
            .unwrap()
            .stdout;
        let mut by_git: Vec<&str> = by_git.split('\0').filter(|s| !s.is_empty()).collect();
        by_git.sort_unstable();
        let all = run(
            &Checkout::at(p),
            &["ls-files", "-z"],
            GIT_TIMEOUT,
            Hooks::Off,
        )
        .unwrap()
        .stdout;
        let mut in_process: Vec<&str> = all
            .split('\0')
            .filter(|s| !s.is_empty() && is_runtime_path(s))
            .collect();
        in_process.sort_unstable();
        assert_eq!(in_process, by_git);
        assert!(by_git.contains(&".hank/logs/deep/x/y.log") && !by_git.contains(&".hank/logs.txt"));
    }

    #[test]
    fn a_glob_segment_matches_as_git_does() {
        for (pattern, text, want) in [
            ("state.json*", "state.json", true),
            ("state.json*", "state.json.1", true),
            ("state.json*", "state.jso", false),
            (".tmp-*", ".tmp-", true),
            (".tmp-*", "x.tmp-1", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "acb", false),
            ("a*a", "a", false),
            ("logs", "logs", true),
            ("logs", "logs2", false),
        ] {
            assert_eq!(segment_matches(pattern, text), want, "{pattern} {text}");
        }
    }

    #[test]
    fn a_runtime_file_staged_by_the_agent_is_left_out_and_a_tracked_one_keeps_heads_version() {
        let d = repo();
        let p = d.path();
        // A runtime file the user committed once: its change is not committed by hank.
        std::fs::create_dir_all(p.join(".hank")).unwrap();
        std::fs::write(p.join(".hank/status.json"), "{\"old\":1}").unwrap();
        git_in(p, &["add", "-f", ".hank/status.json"]);
        git_in(p, &["commit", "-q", "-m", "tracked status"]);
        std::fs::write(p.join(".hank/status.json"), "{\"new\":1}").unwrap();
        std::fs::write(p.join(".hank/live.log"), "x").unwrap();
        git_in(p, &["add", "-f", ".hank/live.log"]);
        std::fs::write(p.join("c.txt"), "c\n").unwrap();
        let c = commit(p, false);
        assert!(c.made);
        assert_eq!(committed_files(p).trim(), "c.txt");
        // Nothing of hank's is left staged either.
        let r = run(
            &Checkout::at(p),
            &["diff", "--cached", "--name-only"],
            GIT_TIMEOUT,
            Hooks::Off,
        )
        .unwrap();
        assert_eq!(r.stdout.trim(), "");
        // Only runtime files changed: nothing to commit.
        std::fs::write(p.join(".hank/status.json"), "{\"newer\":1}").unwrap();
        assert!(!commit(p, false).made);
    }

    #[test]
    fn in_a_project_that_is_a_folder_of_its_repository_runtime_files_and_secrets_stay_out() {
        let d = repo();
        let p = d.path().join("proj");
        std::fs::create_dir_all(p.join(".hank/logs")).unwrap();
        std::fs::write(p.join(".hank/status.json"), "{}").unwrap();
        std::fs::write(p.join(".hank/logs/loop-1.out"), "x").unwrap();
        std::fs::write(p.join(".env"), "TOKEN=1\n").unwrap();
        std::fs::write(p.join("work.txt"), "w\n").unwrap();
        let c = commit(&p, false);
        assert!(c.made);
        assert_eq!(c.secrets_skipped, [".env"]);
        assert_eq!(committed_files(&p).trim(), "proj/work.txt");
        // Only something staged outside the folder: still committed, as before.
        std::fs::write(d.path().join("top.txt"), "t\n").unwrap();
        git_in(d.path(), &["add", "top.txt"]);
        let c = commit(&p, false);
        assert!(c.made);
        assert_eq!(committed_files(&p).trim(), "top.txt");
    }
}
