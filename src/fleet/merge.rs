//! A finished task's merge: commit, checks on a detached HEAD, the check of the result,
//! the compare-and-swap of the integration branch, a failure handed back to the agent.

use super::{
    Options, Paths, TAIL_BYTES, agent_repo, commit_all, ensure_worktree, git, git_ok, integration,
    kill_group, no_links, pin, retire_worktree,
};
use crate::error::HankError;
use crate::error::Result;
use crate::git::{Checkout, TaskWorktree};
use crate::policy::fleet::TaskSpec;
use crate::policy::{fixplan, fleet};
use crate::store;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The user's interrupts (1 = stop gracefully, 2 = now), as the supervisor counts them.
pub(super) type Cancel = tokio::sync::watch::Receiver<u32>;

/// Where the merge check's process group is recorded while it runs (`{pgid} {start ticks}`),
/// so that a fleet restarted after a kill -9 stops a check that outlived it.
pub(super) fn check_record(paths: &Paths) -> PathBuf {
    paths.user.join("fleet-check.pid")
}

/// Stops the merge check a killed fleet left running (its group, when its leader is still the
/// process recorded), and forgets the record.
pub(super) fn stop_recorded_check(paths: &Paths) {
    let path = check_record(paths);
    let Ok(text) = fs::read_to_string(&path) else {
        return;
    };
    let mut words = text.split_whitespace().map(str::parse::<u64>);
    if let (Some(Ok(pgid)), Some(Ok(ticks))) = (words.next(), words.next())
        && let Ok(pgid) = i32::try_from(pgid)
        && pgid > 1
        && crate::proc::agent::start_ticks(pgid) == Some(ticks)
    {
        errln!("hank: fleet: stopping the merge check a killed fleet left running (group {pgid})");
        if let Ok(pid) = u32::try_from(pgid) {
            kill_group(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
    let _ = fs::remove_file(&path);
}

/// Runs VERIFY_COMMAND on a merge result in `dir` through the one runner of checks
/// ([`crate::effects::check::run_command_with_hook`]: `sh -c`, its own process group, SIGTERM
/// then SIGKILL at `timeout` (VERIFY_TIMEOUT) or on Ctrl-C), its group recorded in
/// [`check_record`] while it runs; `Err(tail of its output)` when it failed or ran past the
/// timeout. Called on a blocking thread of the supervisor's runtime.
pub(super) fn run_check(
    paths: &Paths,
    dir: &Path,
    command: &str,
    timeout: Duration,
    log: &Path,
    cancel: Cancel,
) -> Result<std::result::Result<(), String>> {
    let record = check_record(paths);
    let ran = tokio::runtime::Handle::try_current()
        .map_err(|e| HankError::Internal(format!("the merge check needs the runtime: {e}")))?
        .block_on(crate::effects::check::run_command_with_hook(
            command,
            dir,
            log,
            timeout,
            cancel,
            |pgid| {
                // Best effort: without the record a kill -9 of the fleet leaves the check to
                // finish on its own.
                if let Some(ticks) = crate::proc::agent::start_ticks(pgid) {
                    let _ = crate::store::write_atomic(
                        &record,
                        format!("{pgid} {ticks}\n").as_bytes(),
                        false,
                    );
                }
            },
        ))
        .map_err(|e| HankError::Internal(format!("cannot run VERIFY_COMMAND: {e}")))?;
    let _ = fs::remove_file(&record);
    if ran.exit_code == Some(0) && !ran.timed_out && !ran.interrupted {
        return Ok(Ok(()));
    }
    if ran.timed_out {
        return Ok(Err(format!(
            "VERIFY_COMMAND ran past VERIFY_TIMEOUT ({}s) and was stopped",
            timeout.as_secs()
        )));
    }
    let text = fs::read(log).unwrap_or_default();
    let tail = &text[text.len().saturating_sub(TAIL_BYTES)..];
    Ok(Err(crate::sanitize::for_terminal(
        &String::from_utf8_lossy(tail),
        crate::sanitize::Lines::Keep,
    )
    .into_owned()))
}

/// The items checked in a task worktree's plan.
pub(super) fn done_items(wt: &Path) -> Vec<String> {
    let text = fs::read_to_string(wt.join(".hank/fix_plan.md")).unwrap_or_default();
    fixplan::parse(&text, &fixplan::default_optional_sections())
        .items
        .into_iter()
        .filter(|i| i.done)
        .map(|i| i.text)
        .collect()
}

/// Why a merge did not land.
pub(super) enum MergeProblem {
    /// The task changed hank's configuration ([`crate::approval::config_paths`]): it stays on
    /// the task's branch, for the user to look at.
    Config(Vec<String>),
    Conflict(Vec<String>),
    Markers(String),
    Red(String),
    /// Refused for good (not handed back to the agent): HEAD is not on the task's branch, or
    /// the branch holds a symbolic link among hank's files.
    Refused(String),
}

impl MergeProblem {
    pub(super) fn describe(&self, into: &str) -> String {
        match self {
            Self::Config(files) => format!(
                "the task changed hank's configuration ({}): not merged into {into} without \
                 your approval; look at it with `git diff {into}...hank/<task> -- FILES` and \
                 merge it yourself if you want it",
                files.join(", ")
            ),
            Self::Conflict(files) => {
                format!("merging into {into} conflicts in: {}", files.join(", "))
            }
            Self::Markers(list) => format!("the branch holds conflict markers: {list}"),
            Self::Red(tail) => format!("VERIFY_COMMAND failed on the merge result:\n{tail}"),
            Self::Refused(why) => why.clone(),
        }
    }
}

/// Merges the task into the integration branch of every repository it changes: first in
/// each of its other repositories (a workspace of several, [`super::repos::merge_each`]:
/// made and checked, no branch moved), then in the project ([`merge_project`]); the other
/// repositories' integration branches move only once the project's merge passed too (all or
/// nothing).
pub(super) fn merge_task(
    paths: &Paths,
    spec: &TaskSpec,
    done: &[String],
    opts: &Options,
    cancel: Cancel,
) -> Result<std::result::Result<(), MergeProblem>> {
    let landings = match super::repos::merge_each(paths, spec, opts, &cancel)? {
        Ok(l) => l,
        Err(problem) => return Ok(Err(problem)),
    };
    let merged = merge_project(paths, spec, done, opts, cancel)?;
    if merged.is_ok() {
        super::repos::land(&landings, spec)?;
    }
    Ok(merged)
}

/// Commits the task's work, merges it into the integration branch (in the integration
/// worktree), runs the check on the result, ticks the task's items in the integration plan.
/// The branch moves only when all of it passed.
fn merge_project(
    paths: &Paths,
    spec: &TaskSpec,
    done: &[String],
    opts: &Options,
    cancel: Cancel,
) -> Result<std::result::Result<(), MergeProblem>> {
    let branch = format!("hank/{}", spec.slug);
    let int = integration(paths)?.checkout().clone();
    let nested: Vec<String> = super::repos::nested(paths, spec)
        .iter()
        .map(|r| r.name.clone())
        .collect();
    if let Some(problem) = refused_before_merge(paths, &branch, opts, &nested)? {
        return Ok(Err(problem));
    }
    // The merge, its check and the plan's ticks are made on a detached HEAD at the branch's
    // tip; the branch moves (compare-and-swap) only once all of it passed, so a kill at any
    // point leaves it where it was.
    let into_ref = format!("refs/heads/{}", opts.into);
    let old = String::from_utf8_lossy(&git(&int, &["rev-parse", "--verify", &into_ref])?)
        .trim()
        .to_string();
    if super::objects::available() {
        return super::objects::merge(paths, spec, done, opts, cancel, &old);
    }
    // Before git 2.38: `git merge` on the integration worktree's detached HEAD.
    detach_at(&int, &old)?;
    let outcome = merge_detached(paths, spec, done, opts, cancel);
    let back = |int: &Checkout| -> Result<()> {
        git(int, &["reset", "-q", "--hard", &old])?;
        git(int, &["checkout", "-q", &opts.into])?;
        Ok(())
    };
    match outcome {
        Ok(Ok(())) => {
            let new = String::from_utf8_lossy(&git(&int, &["rev-parse", "HEAD"])?)
                .trim()
                .to_string();
            let message = format!("hank fleet: merge task {}", spec.name);
            if let Err(e) = git(&int, &["update-ref", "-m", &message, &into_ref, &new, &old]) {
                back(&int)?;
                return Err(e);
            }
            // HEAD is the branch's new tip: attached again without a checkout.
            git(&int, &["symbolic-ref", "HEAD", &into_ref])?;
            Ok(Ok(()))
        }
        other => {
            back(&int)?;
            other
        }
    }
}

/// The integration worktree's HEAD detached at `old` (the branch's tip). When HEAD already
/// is that commit (the worktree was left on the branch), only HEAD is written: a checkout
/// would read every file of the tree for nothing (half a second at 100,000 files).
fn detach_at(int: &Checkout, old: &str) -> Result<()> {
    let head = git(int, &["rev-parse", "-q", "--verify", "HEAD"])?;
    if String::from_utf8_lossy(&head).trim() == old {
        git(
            int,
            &[
                "update-ref",
                "--no-deref",
                "-m",
                "hank fleet: merge",
                "HEAD",
                old,
            ],
        )?;
    } else {
        git(int, &["checkout", "-q", "--detach", old])?;
    }
    Ok(())
}

/// What refuses a task's branch before any merge is tried: symbolic links among hank's
/// files, a change of hank's configuration, conflict markers.
fn refused_before_merge(
    paths: &Paths,
    branch: &str,
    opts: &Options,
    nested: &[String],
) -> Result<Option<MergeProblem>> {
    // hank's files on the branch are regular files: a link would have the supervisor read and
    // write through it after the merge.
    let root = paths.checkout();
    let tree = git(
        &root,
        &["ls-tree", "-r", "-z", branch, "--", ".hank", ".hankrc"],
    )?;
    let links: Vec<String> = tree
        .split(|&b| b == 0)
        .filter(|e| e.starts_with(b"120000 "))
        .filter_map(|e| e.splitn(2, |&b| b == b'\t').nth(1))
        .map(|p| crate::sanitize::line(&String::from_utf8_lossy(p)))
        .collect();
    if !links.is_empty() {
        return Ok(Some(MergeProblem::Refused(format!(
            "{branch} holds symbolic links among hank's files ({}): refused, never followed; \
             hank's files must be regular files",
            links.join(", ")
        ))));
    }
    // A task's other repositories are folders of its worktree, never part of the project:
    // one committed into the project's branch (a submodule the agent added) is refused.
    if !nested.is_empty() {
        let mut args = vec!["ls-tree", "-z", branch, "--"];
        args.extend(nested.iter().map(String::as_str));
        let listed = git(&root, &args)?;
        let held: Vec<String> = listed
            .split(|&b| b == 0)
            .filter(|e| !e.is_empty())
            .filter_map(|e| e.splitn(2, |&b| b == b'\t').nth(1))
            .map(|p| crate::sanitize::line(&String::from_utf8_lossy(p)))
            .collect();
        if !held.is_empty() {
            return Ok(Some(MergeProblem::Refused(format!(
                "{branch} holds the task's other repositories in the project ({}): refused; \
                 their work goes to their own branches",
                held.join(", ")
            ))));
        }
    }
    // Configuration (what the next task would run) never travels through a merge.
    let range = format!("{}...{branch}", opts.into);
    let out = git(&root, &["diff", "--name-only", "-z", &range])?;
    let changed: Vec<String> = out
        .split(|b| *b == 0)
        .filter(|l| !l.is_empty())
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    let config =
        crate::approval::config_paths(&changed, &opts.watched.0, opts.watched.1.as_deref());
    if !config.is_empty() {
        return Ok(Some(MergeProblem::Config(
            config
                .iter()
                .map(|f| crate::sanitize::line(f).to_string())
                .collect(),
        )));
    }
    let marked = markers_in(&root, branch, changed);
    if marked.is_empty() {
        Ok(None)
    } else {
        Ok(Some(MergeProblem::Markers(marked.join(", "))))
    }
}

/// Conflict markers never reach an integration branch: the files of `changed` (the ones the
/// task changed: the others are the integration branch's own, never the task's doing, so not
/// every file of the tree is read) that hold one on `branch`, in the repository at `root`.
pub(super) fn markers_in(root: &Checkout, branch: &str, changed: Vec<String>) -> Vec<String> {
    let changed: Vec<String> = changed
        .into_iter()
        .filter(|f| f != ".hank" && !f.starts_with(".hank/"))
        .map(|f| format!(":(literal){f}"))
        .collect();
    let mut marked = Vec::new();
    for chunk in changed.chunks(500) {
        let mut args = vec!["grep", "-l", "-E", "^(<<<<<<<|>>>>>>>) ", branch, "--"];
        args.extend(chunk.iter().map(String::as_str));
        if let Ok(out) = super::timing::timed(|| root.git().read(&args)) {
            marked.extend(String::from_utf8_lossy(&out).lines().map(|l| {
                l.strip_prefix(&format!("{branch}:"))
                    .unwrap_or(l)
                    .to_string()
            }));
        }
    }
    marked
}

/// [`merge_task`]'s work on the detached HEAD of the integration worktree: the merge,
/// the check, the plan's ticks. Leaves the worktree for its caller to reset.
pub(super) fn merge_detached(
    paths: &Paths,
    spec: &TaskSpec,
    done: &[String],
    opts: &Options,
    cancel: Cancel,
) -> Result<std::result::Result<(), MergeProblem>> {
    let int = integration(paths)?.checkout().clone();
    let ident = int.identity_args();
    let branch = format!("hank/{}", spec.slug);
    let message = format!("hank fleet: merge task {}", spec.name);
    let mut args = ident.clone();
    args.extend([
        "merge",
        "-q",
        "--no-ff",
        "--no-edit",
        "-m",
        &message,
        &branch,
    ]);
    if !git_ok(&int, &args)? {
        let out = git(&int, &["diff", "--name-only", "--diff-filter=U"]).unwrap_or_default();
        let files: Vec<String> = String::from_utf8_lossy(&out)
            .lines()
            .map(ToString::to_string)
            .collect();
        let _ = git_ok(&int, &["merge", "--abort"]);
        return Ok(Err(MergeProblem::Conflict(files)));
    }
    if let Some(cmd) = opts.verify.as_deref() {
        let log = paths.log(&format!("{}.verify", spec.slug));
        if let Err(tail) = run_check(paths, int.dir(), cmd, opts.verify_timeout, &log, cancel)? {
            return Ok(Err(MergeProblem::Red(tail)));
        }
    }
    let plan_path = int.dir().join(".hank").join("fix_plan.md");
    no_links(int.dir(), &[".hank", ".hank/fix_plan.md"])?;
    if let Ok(plan) = fs::read_to_string(&plan_path) {
        let ticked = fleet::tick_items(&plan, &spec.name, done);
        if ticked != plan {
            fs::write(&plan_path, ticked).map_err(|e| HankError::io("write", &plan_path, e))?;
            commit_ticks(&int, &ident)?;
        }
    }
    Ok(Ok(()))
}

/// Commits the plan's ticks (and only them) on the integration worktree's detached HEAD. The
/// index is HEAD's after the merge (unless the check staged something): the plan is staged
/// and the commit written from the index, with no look at the other files of the tree (a
/// `git commit -- PATH` refreshes every one of them: most of a merge's time at 100,000
/// files). When the check did stage something, `git commit -- PATH` leaves it out.
fn commit_ticks(int: &Checkout, ident: &[&str]) -> Result<()> {
    const MESSAGE: &str = "hank fleet: tick the task's items";
    if !git_ok(int, &["diff", "--cached", "--quiet"])? {
        let mut args = ident.to_vec();
        args.extend([
            "commit",
            "-q",
            "--no-verify",
            "-m",
            MESSAGE,
            "--",
            ".hank/fix_plan.md",
        ]);
        git(int, &args)?;
        return Ok(());
    }
    git(int, &["update-index", "--", ".hank/fix_plan.md"])?;
    let tree = git(int, &["write-tree"])?;
    let tree = String::from_utf8_lossy(&tree).trim().to_string();
    let mut args = ident.to_vec();
    args.extend(["commit-tree", &tree, "-p", "HEAD", "-m", MESSAGE]);
    let commit = git(int, &args)?;
    let commit = String::from_utf8_lossy(&commit).trim().to_string();
    git(int, &["update-ref", "-m", MESSAGE, "HEAD", &commit])?;
    Ok(())
}

/// Gives a failed merge back to the task's worktree: the integration branch merged into it
/// (conflicts left for the agent), and one more item in its plan naming the problem.
pub(super) fn return_to_agent(
    paths: &Paths,
    wt: &TaskWorktree,
    problem: &MergeProblem,
    into: &str,
) -> Result<()> {
    let _ = paths;
    let at = wt.checkout();
    // The task's plan is the worktree's own (not committed): set aside while the integration
    // branch (whose plan has other tasks' items ticked) is merged in, then put back.
    let path = wt.work_tree().join(".hank/fix_plan.md");
    let mut plan = fs::read_to_string(&path).unwrap_or_default();
    let _ = git_ok(&at, &["checkout", "-q", "--", ".hank/fix_plan.md"]);
    let mut args = at.identity_args();
    args.extend(["merge", "-q", "--no-edit", into]);
    let _ = git_ok(&at, &args)?;
    let mut what = problem.describe(into);
    if what.len() > TAIL_BYTES {
        let cut = what.len() - TAIL_BYTES;
        let cut = (cut..what.len())
            .find(|i| what.is_char_boundary(*i))
            .unwrap_or(what.len());
        what = what[cut..].to_string();
    }
    let quoted: String = what
        .lines()
        .map(|l| {
            let safe = crate::agent::argv::escape_delimiters(l.as_bytes());
            format!("  > {}\n", String::from_utf8_lossy(&safe))
        })
        .collect();
    if !plan.ends_with('\n') {
        plan.push('\n');
    }
    plan.push_str(&format!(
        "- [ ] Make this branch merge cleanly into {into} with the check green: resolve every \
         conflict (no conflict markers left), keeping the intent of both sides\n{quoted}"
    ));
    store::write_atomic(&path, plan.as_bytes(), false).map_err(|e| HankError::io("write", path, e))
}

/// The merge of a finished task and what follows it in git (the worktree removed once merged
/// or failed for good, else the problem handed back to its agent), on a blocking thread;
/// `Some(problem)` when it did not land. `last`: this failure would be the task's last.
pub(super) fn merge_off_thread(
    paths: &Paths,
    spec: &TaskSpec,
    opts: &Options,
    job: &MergeJob,
    cancel: Cancel,
) -> Result<Option<Merged>> {
    // The integration tip this merge is tried on (only merges move it, one at a time).
    let tip = String::from_utf8_lossy(&git(
        &paths.checkout(),
        &[
            "rev-parse",
            "--verify",
            &format!("refs/heads/{}", opts.into),
        ],
    )?)
    .trim()
    .to_string()
        + &super::repos::tips(paths, spec, &opts.into)?;
    let Err(problem) = merge_task(paths, spec, &job.done, opts, cancel)? else {
        return Ok(None);
    };
    let counts = fleet::merge_failure_counts(
        matches!(problem, MergeProblem::Conflict(_)),
        job.handed_back_at.as_deref(),
        &tip,
    );
    let last = job.last && counts;
    // Refused for good, the task's last attempt, or a configuration change (the user's to
    // look at, on the branch): nothing goes back to an agent.
    if !(last || matches!(problem, MergeProblem::Refused(_) | MergeProblem::Config(_))) {
        // Back to the agent in a worktree of its own (its run's was freed at its commit):
        // its plan with the items it ticked, the integration branch merged in.
        let wt = ensure_worktree(paths, spec, &opts.into)?;
        let path = wt.work_tree().join(".hank/fix_plan.md");
        if let Ok(plan) = fs::read_to_string(&path) {
            let ticked = fleet::tick_items(&plan, &spec.name, &job.done);
            store::write_atomic(&path, ticked.as_bytes(), false)
                .map_err(|e| HankError::io("write", &path, e))?;
        }
        return_to_agent(paths, &wt, &problem, &opts.into)?;
        // The agent's repository made again from hank's view: the merge in progress, its
        // index with the conflicts, the branch's tip.
        agent_repo(&pin(paths, wt.work_tree())?)?;
        let project = pin(paths, wt.work_tree())?;
        // Its other repositories: each one's integration branch merged in there too.
        super::repos::hand_back(paths, spec, &opts.into, &project)?;
    }
    Ok(Some(Merged {
        problem,
        tip,
        counts,
    }))
}

/// What a merge is given: its last attempt or not, the tip a handed-back conflict was
/// resolved against, the items the task's run ticked.
pub(super) struct MergeJob {
    pub(super) last: bool,
    pub(super) handed_back_at: Option<String>,
    pub(super) done: Vec<String>,
}

/// A finished task's work committed on its branch (through the git directory hank recorded,
/// with HEAD on the task's branch, or refused: `Err(why)`), the items its plan ticks read,
/// and its worktree retired ([`retire_worktree`]): free for the next task before the merge.
pub(super) fn commit_task(
    paths: &Paths,
    spec: &TaskSpec,
) -> Result<std::result::Result<Vec<String>, String>> {
    let wt = paths.worktree(&spec.slug);
    // Its other repositories (a workspace of several): committed there and their worktrees
    // removed first (the branches keep the work), or refused naming the repository.
    let message = format!("hank fleet: task {}", spec.name);
    if let Err(why) = super::repos::close(paths, spec, &message)? {
        return Ok(Err(why));
    }
    let repo = pin(paths, &wt)?;
    // The agent's commits brought in from its own repository (hank moves the branch), or
    // refused: its HEAD elsewhere, a record changed (issue 47).
    match crate::git::agent_repo::import(&repo) {
        Ok(Ok(())) => {}
        Ok(Err(why)) => return Ok(Err(why)),
        Err(e) => return Ok(Err(format!("its commits could not be imported: {e}"))),
    }
    if let Err(e) = repo
        .checkout()
        .expect_branch(&format!("hank/{}", spec.slug))
    {
        // Kept as the agent left it, for the user to look at; never merged.
        return Ok(Err(e.to_string()));
    }
    commit_all(&repo.checkout(), &message)?;
    let done = done_items(&wt);
    retire_worktree(paths, &wt);
    Ok(Ok(done))
}

/// A merge that did not land: its problem, the integration tip it was tried on, and whether it
/// counts against MAX_MERGE_ATTEMPTS ([`fleet::merge_failure_counts`]).
pub(super) struct Merged {
    pub(super) problem: MergeProblem,
    pub(super) tip: String,
    pub(super) counts: bool,
}
