//! A fleet task across several repositories of a workspace (issue 51): the git of the
//! task's other repositories, beside the project's own (everything else in the fleet is as
//! for one repository).
//!
//! In a workspace of several repositories ([`crate::policy::workspace::Workspace::is_multi`])
//! the fleet freezes at its start the repositories its tasks change, other than the project
//! itself ([`FleetRepo`]: name, checkout, base, and the VERIFY_COMMAND of that checkout's own
//! `.hankrc`), in [`Paths::repos`]. A task's run still happens in the project's worktree
//! `worktrees/<slug>`; each repository it names gets its worktree inside it,
//! `worktrees/<slug>/<repo>`, on `hank/<slug>` of that repository (made from that
//! repository's integration branch, kept as it is when the branch exists: `open`), with an
//! agent repository of its own (`git::agent_repo::make`, as the project's worktree has),
//! left out of the project worktree's status: for hank's reader by the list the supervisor
//! gives the worker (`git::snapshot` skips them), for the agent's own `git status` by a line
//! hank writes in its `info/exclude` there; hank's commit of the project's worktree comes
//! after they are removed. Its worker is told the folders and checkouts
//! ([`crate::git::TASK_REPOS_ENV`], `env_text`): its sandbox grants and its progress come
//! from that. At the task's end each repository's work is committed and its worktree removed
//! (`close`, the branch keeps the work); its merge is made in git's objects per repository
//! (`merge_each`: `merge-tree`, `commit-tree`, that repository's check in its own
//! integration worktree `worktrees/_integration-<repo>`), and the integration branches move
//! (`land`) only after every repository's merge and check and the project's passed. A
//! failure is handed back to the agent in each repository (`hand_back`: the integration
//! branch merged into the task's branch there). [`integration_branches`] gives what the
//! fleet left in each repository (for delivery).

use std::fs;
use std::path::{Path, PathBuf};

use super::{
    Cancel, INTEGRATION, MergeProblem, Options, Paths, admin_lock, git, git_ok, run_check,
};
use crate::error::{HankError, Result};
use crate::git::{Checkout, Integration, TaskWorktree};
use crate::policy::fleet::TaskSpec;
use crate::policy::workspace::{self as rules, TaskCheckout};

/// A repository of the workspace a fleet's tasks change, other than the project itself,
/// frozen at the fleet's start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetRepo {
    /// `[repos.NAME]`: its folder in a task's folder.
    pub name: String,
    /// The user's checkout (absolute): where its branches and records are.
    pub checkout: PathBuf,
    /// Its base branch (`None`: the branch the checkout is on).
    pub base: Option<String>,
    /// VERIFY_COMMAND of the checkout's own `.hankrc` (`None`: no merge check there).
    pub verify: Option<String>,
}

/// The repositories the fleet's `tasks` change in the project's workspace, other than the
/// project itself: none without a workspace of several repositories (the fleet as before).
pub(super) fn of_workspace(root: &Path, tasks: &[TaskSpec]) -> Result<Vec<FleetRepo>> {
    let Some(ws) = crate::workspace::load(root)? else {
        return Ok(Vec::new());
    };
    if !ws.is_multi() {
        return Ok(Vec::new());
    }
    let project = root.canonicalize().ok();
    let mut out = Vec::new();
    for name in rules::touched(tasks, &ws) {
        let Some(r) = ws.repo(&name) else {
            continue;
        };
        let checkout = r.path.canonicalize().unwrap_or_else(|_| r.path.clone());
        if project.as_ref() == Some(&checkout) {
            continue;
        }
        out.push(FleetRepo {
            name: r.name.clone(),
            verify: verify_of(&checkout)?,
            checkout,
            base: r.base.clone(),
        });
    }
    if !out.is_empty() && !super::objects::available() {
        return Err(HankError::usage_hint(
            "a fleet across several repositories merges in git's objects (`git merge-tree \
             --write-tree`): it needs git 2.38 or later",
            "upgrade git, or run each repository's tasks with `hank fleet` in that repository",
        ));
    }
    Ok(out)
}

/// VERIFY_COMMAND of the `.hankrc` in `checkout` (not followed through a link), when set.
fn verify_of(checkout: &Path) -> Result<Option<String>> {
    let file = checkout.join(".hankrc");
    let bytes = match crate::fsread::read(
        &file,
        crate::fsread::CONFIG_LIMIT,
        crate::fsread::Follow::No,
    ) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(HankError::io("read", &file, e)),
    };
    let rc = crate::settings::hankrc::parse_hankrc(&String::from_utf8_lossy(&bytes), &file)?;
    Ok(rc
        .get("VERIFY_COMMAND")
        .map(|e| e.value.trim().to_string())
        .filter(|v| !v.is_empty()))
}

/// The fleet's repositories `spec` names (in the workspace's order).
pub(super) fn nested<'a>(paths: &'a Paths, spec: &TaskSpec) -> Vec<&'a FleetRepo> {
    paths
        .repos
        .iter()
        .filter(|r| spec.repos.contains(&r.name))
        .collect()
}

/// The task's worktrees in its other repositories: `worktrees/<slug>/<repo>` on `hank/<slug>`,
/// made from the repository's integration branch `into`.
fn layout(paths: &Paths, spec: &TaskSpec, into: &str) -> Vec<TaskCheckout> {
    let folder = paths.worktree(&spec.slug);
    nested(paths, spec)
        .into_iter()
        .map(|r| TaskCheckout {
            repo: r.name.clone(),
            checkout: r.checkout.clone(),
            path: folder.join(&r.name),
            branch: format!("hank/{}", spec.slug),
            base: Some(into.to_string()),
        })
        .collect()
}

/// A task's worktree in one of its other repositories, pinned from that repository's records.
fn pin(c: &TaskCheckout) -> Result<TaskWorktree> {
    TaskWorktree::pin(&c.checkout, &c.path).map_err(|e| {
        HankError::Internal(format!(
            "repository {:?}: the worktree {}: {e}",
            c.repo,
            c.path.display()
        ))
    })
}

fn agent_repo(t: &TaskWorktree) -> Result<()> {
    crate::git::agent_repo::make(t).map(|_| ()).map_err(|e| {
        HankError::Internal(format!(
            "the task's own repository in {}: {e}",
            t.work_tree().display()
        ))
    })
}

/// The other repositories' folders left out of the project worktree's status (its agent's
/// `info/exclude`, written by hank; see [`crate::git::agent_repo::exclude_folders`]).
pub(super) fn exclude_in(paths: &Paths, spec: &TaskSpec, project: &TaskWorktree) -> Result<()> {
    let names: Vec<String> = nested(paths, spec).iter().map(|r| r.name.clone()).collect();
    crate::git::agent_repo::exclude_folders(project, &names).map_err(|e| {
        HankError::Internal(format!(
            "the task's own repository in {}: {e}",
            project.work_tree().display()
        ))
    })
}

/// The task's worktrees in its other repositories made inside its project worktree
/// `project` ([`crate::workspace::open_task_folder`]: all or none; a worktree already there
/// on its branch kept, a branch that exists taken as it is), each with the agent's own
/// repository (kept when there is one), and their folders left out of the project's status.
pub(super) fn open(
    paths: &Paths,
    spec: &TaskSpec,
    into: &str,
    project: &TaskWorktree,
) -> Result<()> {
    let layout = layout(paths, spec, into);
    if layout.is_empty() {
        return Ok(());
    }
    {
        let _admin = admin_lock();
        for c in &layout {
            // A worktree of an earlier fleet whose folder is gone no longer holds the branch.
            let _ = git_ok(&Checkout::at(&c.checkout), &["worktree", "prune"]);
        }
        crate::workspace::open_task_folder(&layout)?;
    }
    for c in &layout {
        let t = pin(c)?;
        if t.agent.is_none() {
            agent_repo(&t)?;
        }
    }
    exclude_in(paths, spec, project)
}

/// The line of a task's plan naming its other repositories' folders (`None`: it has none).
pub(super) fn plan_line(paths: &Paths, spec: &TaskSpec) -> Option<String> {
    let names: Vec<String> = nested(paths, spec)
        .iter()
        .map(|r| format!("{}/", r.name))
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "Repositories this task changes (each a folder here with its own git, on branch hank/{}): {}\n\n",
            spec.slug,
            names.join(", ")
        )
    })
}

/// What the task's worker is told of its other repositories ([`crate::git::TASK_REPOS_ENV`]):
/// `None` when it has none.
pub(super) fn env_text(paths: &Paths, spec: &TaskSpec) -> Result<Option<String>> {
    let repos: Vec<(String, PathBuf)> = nested(paths, spec)
        .iter()
        .map(|r| (r.name.clone(), r.checkout.clone()))
        .collect();
    if repos.is_empty() {
        return Ok(None);
    }
    crate::git::task_repos_text(&repos).map(Some).ok_or_else(|| {
        HankError::usage(format!(
            "task {:?}: a repository's checkout path cannot be given to its worker (a line break, or not UTF-8)",
            spec.name
        ))
    })
}

/// The task's work in each of its other repositories committed on its branch there (the
/// agent's commits imported first), then every one of those worktrees removed (the branches
/// keep the work). `Ok(Err(why))`: a repository refused (HEAD elsewhere, a changed record):
/// nothing removed, for the user to look at.
pub(super) fn close(
    paths: &Paths,
    spec: &TaskSpec,
    message: &str,
) -> Result<std::result::Result<(), String>> {
    if let Err(why) = commit_each(paths, spec, message)? {
        return Ok(Err(why));
    }
    remove(paths, spec)?;
    Ok(Ok(()))
}

/// Each other repository's work committed on the task's branch there.
pub(super) fn commit_each(
    paths: &Paths,
    spec: &TaskSpec,
    message: &str,
) -> Result<std::result::Result<(), String>> {
    for c in layout(paths, spec, "") {
        if fs::symlink_metadata(c.path.join(".git")).is_err() {
            continue;
        }
        let t = pin(&c)?;
        let named = |why: String| Ok(Err(format!("repository {:?}: {why}", c.repo)));
        match crate::git::agent_repo::import(&t) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => return named(why),
            Err(e) => return named(format!("its commits could not be imported: {e}")),
        }
        if let Err(e) = t.checkout().expect_branch(&c.branch) {
            return named(e.to_string());
        }
        super::commit_all(&t.checkout(), message)?;
    }
    Ok(Ok(()))
}

/// The task's worktrees in its other repositories removed (their agents' repositories
/// first), the branches kept.
pub(super) fn remove(paths: &Paths, spec: &TaskSpec) -> Result<()> {
    let layout = layout(paths, spec, "");
    for c in &layout {
        if let Ok(t) = pin(c) {
            let _ = crate::git::agent_repo::release(&t);
        }
    }
    let _admin = admin_lock();
    // The project's worktree holds more than these: it stays (`close_task_folder` removes
    // the folder only when it is empty).
    crate::workspace::close_task_folder(&layout, &paths.worktree(&spec.slug))
}

/// The tips of the task's integration branches a merge is tried on, one word each after the
/// project's (only merges move them, one at a time): what a handed-back conflict is judged
/// against ([`crate::policy::fleet::merge_failure_counts`]).
pub(super) fn tips(paths: &Paths, spec: &TaskSpec, into: &str) -> Result<String> {
    let mut out = String::new();
    for r in nested(paths, spec) {
        let at = Checkout::at(&r.checkout);
        let tip = git(
            &at,
            &["rev-parse", "--verify", &format!("refs/heads/{into}")],
        )?;
        out.push_str(&format!(
            " {}:{}",
            r.name,
            String::from_utf8_lossy(&tip).trim()
        ));
    }
    Ok(out)
}

/// One repository's merge made and checked, its branch not moved yet.
pub(super) struct Landing {
    checkout: PathBuf,
    into_ref: String,
    old: String,
    new: String,
}

fn text(out: Vec<u8>) -> String {
    String::from_utf8_lossy(&out).trim().to_string()
}

/// The task's branch merged into the integration branch of each of its other repositories,
/// in git's objects, each merge checked with that repository's VERIFY_COMMAND in its own
/// integration worktree: the merges to land, or the first problem (a conflict's files named
/// `REPO/PATH`, a red check naming the repository). No branch moves here.
pub(super) fn merge_each(
    paths: &Paths,
    spec: &TaskSpec,
    opts: &Options,
    cancel: &Cancel,
) -> Result<std::result::Result<Vec<Landing>, MergeProblem>> {
    let mut out = Vec::new();
    let into_ref = format!("refs/heads/{}", opts.into);
    let message = format!("hank fleet: merge task {}", spec.name);
    for r in nested(paths, spec) {
        let at = Checkout::at(&r.checkout);
        let old = text(git(&at, &["rev-parse", "--verify", &into_ref])?);
        let tip = text(git(
            &at,
            &[
                "rev-parse",
                "--verify",
                &format!("refs/heads/hank/{}", spec.slug),
            ],
        )?);
        // Conflict markers the task's branch holds there (a hand-back left unresolved).
        let range = format!("{}...hank/{}", opts.into, spec.slug);
        let changed: Vec<String> = git(&at, &["diff", "--name-only", "-z", &range])?
            .split(|b| *b == 0)
            .filter(|l| !l.is_empty())
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        // That repository's hank configuration (its `.hankrc`, the script its VERIFY_COMMAND
        // runs: what the next fleet reads from its checkout and runs unconfined) never travels
        // through a merge either, as the project's does not.
        let script = r.verify.as_deref().and_then(crate::approval::verify_script);
        let config = crate::approval::config_paths(&changed, "", script.as_deref());
        if !config.is_empty() {
            let named = config
                .iter()
                .map(|f| format!("{}/{}", r.name, crate::sanitize::line(f)));
            return Ok(Err(MergeProblem::Config(named.collect())));
        }
        let branch = format!("hank/{}", spec.slug);
        let marked = super::markers_in(&at, &branch, changed);
        if !marked.is_empty() {
            let named: Vec<String> = marked.iter().map(|f| format!("{}/{f}", r.name)).collect();
            return Ok(Err(MergeProblem::Markers(named.join(", "))));
        }
        let tree = match super::objects::merged_tree(&at, &old, &tip)? {
            Ok(tree) => tree,
            Err(files) => {
                return Ok(Err(MergeProblem::Conflict(
                    files.iter().map(|f| format!("{}/{f}", r.name)).collect(),
                )));
            }
        };
        let new =
            super::objects::commit_tree(&at, &at.identity_args(), &tree, &[&old, &tip], &message)?;
        if let Some(cmd) = &r.verify {
            let dir = integration_dir(paths, &r.name);
            let int = Integration::pin(&r.checkout, &dir)
                .map_err(|e| HankError::Internal(format!("the worktree {}: {e}", dir.display())))?;
            let ic = int.checkout();
            git(ic, &["checkout", "-q", "-f", "--detach", &new])?;
            let log = paths.log(&format!("{}.{}.verify", spec.slug, r.name));
            let red = run_check(
                paths,
                ic.dir(),
                cmd,
                opts.verify_timeout,
                &log,
                cancel.clone(),
            );
            // Back on the branch (its files are the check's: every later use checks out).
            git(ic, &["symbolic-ref", "HEAD", &into_ref])?;
            if let Err(tail) = red? {
                return Ok(Err(MergeProblem::Red(format!(
                    "in repository {}:\n{tail}",
                    r.name
                ))));
            }
        }
        out.push(Landing {
            checkout: r.checkout.clone(),
            into_ref: into_ref.clone(),
            old,
            new,
        });
    }
    Ok(Ok(out))
}

/// Each repository's integration branch moved to its checked merge (compare-and-swap from the
/// tip the merge was made on).
pub(super) fn land(landings: &[Landing], spec: &TaskSpec) -> Result<()> {
    let message = format!("hank fleet: merge task {}", spec.name);
    for l in landings {
        git(
            &Checkout::at(&l.checkout),
            &["update-ref", "-m", &message, &l.into_ref, &l.new, &l.old],
        )?;
    }
    Ok(())
}

/// A failed merge handed back in each of the task's other repositories (its worktrees made
/// again by the task's prepare): that repository's integration branch merged into the task's
/// branch there (conflicts left for the agent), the agent's repository made again from it,
/// the folders left out of the project's status again.
pub(super) fn hand_back(
    paths: &Paths,
    spec: &TaskSpec,
    into: &str,
    project: &TaskWorktree,
) -> Result<()> {
    for c in layout(paths, spec, into) {
        let t = pin(&c)?;
        let at = t.checkout();
        let mut args = at.identity_args();
        args.extend(["merge", "-q", "--no-edit", into]);
        let _ = git_ok(&at, &args)?;
        agent_repo(&pin(&c)?)?;
    }
    exclude_in(paths, spec, project)
}

/// The integration worktree of the repository `name`: `worktrees/_integration-<name>`.
pub(super) fn integration_dir(paths: &Paths, name: &str) -> PathBuf {
    paths
        .user
        .join("worktrees")
        .join(format!("{INTEGRATION}-{name}"))
}

/// Each repository's integration branch `into` exists (made from its base), and a repository
/// with a merge check has its integration worktree on it, clean.
pub(super) fn ensure_integrations(paths: &Paths, into: &str) -> Result<()> {
    for r in &paths.repos {
        let at = Checkout::at(&r.checkout);
        let refname = format!("refs/heads/{into}");
        if !git_ok(&at, &["rev-parse", "-q", "--verify", &refname])? {
            let base = r
                .base
                .as_ref()
                .map_or_else(|| "HEAD".to_string(), |b| format!("refs/heads/{b}"));
            git(&at, &["branch", into, &base])?;
        }
        if r.verify.is_none() {
            continue;
        }
        let dir = integration_dir(paths, &r.name);
        let _admin = admin_lock();
        let _ = git_ok(&at, &["worktree", "prune"]);
        if let Ok(int) = Integration::pin(&r.checkout, &dir) {
            let ic = int.checkout();
            if git_ok(ic, &["checkout", "-q", "-f", into])? {
                git(ic, &["reset", "-q", "--hard", "HEAD"])?;
                git(ic, &["clean", "-q", "-ffdx"])?;
                continue;
            }
        }
        if fs::symlink_metadata(&dir).is_ok() {
            let _ = fs::remove_dir_all(&dir);
            let _ = git_ok(&at, &["worktree", "prune"]);
        }
        if let Some(parent) = dir.parent() {
            fs::create_dir_all(parent).map_err(|e| HankError::io("create", parent, e))?;
        }
        let dir_s = dir.to_string_lossy().into_owned();
        if !git_ok(&at, &["worktree", "add", "-q", &dir_s, into])? {
            return Err(HankError::usage_hint(
                format!(
                    "repository {:?}: cannot check out its integration branch {into} in {dir_s}",
                    r.name
                ),
                format!(
                    "is it checked out somewhere else (`git -C {} worktree list`)? pass --into OTHER",
                    r.checkout.display()
                ),
            ));
        }
    }
    Ok(())
}

/// The repositories' integration worktrees removed at the fleet's end (their branches stay).
pub(super) fn remove_integrations(paths: &Paths) {
    let _admin = admin_lock();
    for r in &paths.repos {
        let dir = integration_dir(paths, &r.name);
        if fs::symlink_metadata(&dir).is_err() {
            continue;
        }
        let at = Checkout::at(&r.checkout);
        let dir_s = dir.to_string_lossy().into_owned();
        if !git_ok(&at, &["worktree", "remove", "--force", &dir_s]).unwrap_or(false) {
            let _ = fs::remove_dir_all(&dir);
            let _ = git_ok(&at, &["worktree", "prune"]);
        }
    }
}

/// One repository's integration branch as a fleet left it ([`integration_branches`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoIntegration {
    /// `[repos.NAME]`.
    pub repo: String,
    /// The user's checkout of it.
    pub checkout: PathBuf,
    /// The integration branch there (the fleet's `--into`).
    pub branch: String,
    /// Its base branch (`None`: the branch the checkout is on).
    pub base: Option<String>,
    /// The tasks merged into it, in the plan's order.
    pub tasks: Vec<String>,
}

/// The integration branches the fleet of the project at `root` made in the other
/// repositories of its workspace (not the project's own: that is `fleet.json`'s `into`), each
/// with the tasks merged into it, in the workspace's order; only repositories some merged
/// task changed. Empty without a fleet or a workspace of several repositories. For delivery
/// of a change set (one pull request per repository).
///
/// # Errors
/// `fleet.json` or the workspace file cannot be read.
pub fn integration_branches(root: &Path) -> Result<Vec<RepoIntegration>> {
    let Some(file) = super::read(root)? else {
        return Ok(Vec::new());
    };
    let Some(ws) = crate::workspace::load(root)? else {
        return Ok(Vec::new());
    };
    if !ws.is_multi() {
        return Ok(Vec::new());
    }
    let merged: Vec<(String, Vec<String>)> = file
        .tasks
        .iter()
        .filter(|t| t.state() == crate::policy::fleet::TaskState::Merged)
        .map(|t| (t.name.clone(), t.repos.clone()))
        .collect();
    let project = root.canonicalize().ok();
    Ok(rules::merged_per_repository(&ws, &merged)
        .into_iter()
        .filter_map(|(name, tasks)| {
            let r = ws.repo(&name)?;
            let checkout = r.path.canonicalize().unwrap_or_else(|_| r.path.clone());
            (project.as_ref() != Some(&checkout)).then(|| RepoIntegration {
                repo: name,
                checkout,
                branch: file.into.clone(),
                base: r.base.clone(),
                tasks,
            })
        })
        .collect())
}
