//! The one commit of "everything the agent left": delivery's commit (`hank run --deliver`,
//! `hank deliver`, `hank fleet run-task`) and a fleet task's commit (`hank fleet`) are this
//! one procedure, [`commit_all`]: stage all, unstage hank's runtime files (the one list,
//! [`runtime_paths`]) and files that look like secrets, commit — with hank's identity when the
//! repository has none, the user's hooks only when [`Hooks::Run`] — and say whether something
//! was committed.

use std::path::Path;
use std::time::Duration;

use super::{GIT_TIMEOUT, GitRun, Hooks, git_run_with};
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
/// match nothing quietly (`git reset -- SPECS` unstages hank's own files).
#[must_use]
pub fn runtime_globs() -> Vec<String> {
    runtime_paths()
        .iter()
        .flat_map(|p| [format!(":(glob){p}"), format!(":(glob){p}/**")])
        .collect()
}

/// The plan of a fleet task's worktree (its one section): the fleet ticks the integration
/// branch's plan itself, so a task's commit leaves it out.
pub const TASK_PLAN_SPEC: &str = ":(glob).hank/fix_plan.md";

/// What [`commit_all`] is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct CommitAll<'a> {
    pub message: &'a str,
    /// The user's hooks and filters ([`Hooks::Run`]: delivery, approved) or none.
    pub hooks: Hooks,
    /// The task's plan left out too ([`TASK_PLAN_SPEC`]): a fleet task's commit.
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

fn run(dir: &Path, args: &[&str], timeout: Duration, hooks: Hooks) -> Result<GitRun> {
    git_run_with(dir, args, None, timeout, hooks).map_err(|e| {
        HankError::Tool(format!(
            "`git {}` in {}: {e}",
            args.join(" "),
            dir.display()
        ))
    })
}

fn ok(dir: &Path, args: &[&str]) -> Result<GitRun> {
    let r = run(dir, args, GIT_TIMEOUT, Hooks::Off)?;
    if r.success {
        Ok(r)
    } else {
        Err(HankError::Tool(format!(
            "`git {}` failed in {}: {}",
            args.join(" "),
            dir.display(),
            crate::sanitize::line(r.stderr.trim())
        )))
    }
}

/// Commits everything in `dir` (new, changed and deleted files) but hank's runtime files
/// (even where `.gitignore` does not list them), the task's plan when asked, and files that
/// look like secrets — `.env`, private keys… — (they stay in the working tree, named in
/// [`Committed::secrets_skipped`]). A merge in progress is committed even when it stages
/// nothing new. Without `user.email` in the repository's configuration the commit is hank's
/// (`hank <hank@localhost>`). A commit a hook refused is [`Committed::refused`] with the
/// hook's output. HEAD is not checked here: the callers check the branch they expect.
///
/// # Errors
/// git cannot run, or staging/unstaging failed (then nothing was committed).
pub fn commit_all(dir: &Path, c: &CommitAll<'_>) -> Result<Committed> {
    let r = run(dir, &["add", "--all", "--", "."], GIT_TIMEOUT, c.hooks)?;
    if !r.success {
        return Err(HankError::Tool(format!(
            "`git add` failed in {}: {}",
            dir.display(),
            crate::sanitize::line(r.stderr.trim())
        )));
    }
    // Unstaged again (an exclude pathspec of an ignored path makes `git add` fail); a glob
    // pathspec matches nothing quietly.
    let globs = runtime_globs();
    let mut reset = vec!["reset", "--quiet", "--"];
    reset.extend(globs.iter().map(String::as_str));
    if c.leave_plan {
        reset.push(TASK_PLAN_SPEC);
    }
    ok(dir, &reset)?;
    let secrets_skipped = unstage_secrets(dir)?;
    let merging = run(
        dir,
        &["rev-parse", "-q", "--verify", "MERGE_HEAD"],
        GIT_TIMEOUT,
        Hooks::Off,
    )?
    .success;
    let staged = !run(
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
    let has_identity = run(dir, &["config", "user.email"], GIT_TIMEOUT, Hooks::Off)?.success;
    let mut args: Vec<&str> = Vec::new();
    if !has_identity {
        args.extend(["-c", "user.name=hank", "-c", "user.email=hank@localhost"]);
    }
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

/// Takes the staged files that look like secrets out of the index (added or changed; a
/// deletion leaks nothing and stays); their names.
///
/// # Errors
/// git cannot run, or the files could not be taken out (then nothing may be committed).
pub fn unstage_secrets(dir: &Path) -> Result<Vec<String>> {
    let staged = ok(
        dir,
        &[
            "diff",
            "--cached",
            "--name-only",
            "--no-renames",
            "--diff-filter=d",
            "-z",
        ],
    )?
    .stdout;
    let secrets: Vec<String> = staged
        .split('\0')
        .filter(|p| !p.is_empty() && crate::policy::secrets::looks_like_secret(p))
        .map(str::to_string)
        .collect();
    if secrets.is_empty() {
        return Ok(secrets);
    }
    let specs: Vec<String> = secrets.iter().map(|p| format!(":(literal){p}")).collect();
    let mut args = vec!["reset", "--quiet", "--"];
    args.extend(specs.iter().map(String::as_str));
    // Without the reset a secret would be committed: refuse the commit instead.
    ok(dir, &args).map_err(|e| {
        HankError::Tool(format!(
            "could not leave {} out of the commit: {e}",
            secrets.join(", ")
        ))
    })?;
    Ok(secrets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::git_in;

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
            dir,
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
            dir,
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
        let r = run(p, &["log", "-1", "--format=%ae"], GIT_TIMEOUT, Hooks::Off).unwrap();
        // git_in commits with its own -c identity; the repository has none configured
        // unless the user's global configuration gives one.
        let global = run(p, &["config", "user.email"], GIT_TIMEOUT, Hooks::Off).unwrap();
        let want = if global.success {
            global.stdout.trim().to_string()
        } else {
            "hank@localhost".to_string()
        };
        assert_eq!(r.stdout.trim(), want);
    }
}
