//! Workspaces (issue 51): `.hank/workspace.toml` read and checked
//! ([`crate::store::schema::WorkspaceFile`] → [`crate::policy::workspace::Workspace`]), the
//! facts git gives about each repository ([`facts`]) for the pure refusal
//! ([`crate::policy::workspace::refusals`]), the check a fleet makes before any task starts
//! ([`check_before_start`]), and the file `hank setup`/`hank enable --repo` write ([`write()`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{HankError, Result};
use crate::policy::fleet::TaskSpec;
use crate::policy::workspace::{self as rules, Entry, RepoFacts, Workspace};
use crate::store::schema::{WorkspaceFile, WorkspaceRepo};

/// The file, relative to the project.
pub const FILE: &str = ".hank/workspace.toml";
/// The most bytes of the file read.
const MAX_BYTES: u64 = 256 * 1024;
/// Paths of a dirty checkout kept for the message.
const DIRTY_SHOWN: usize = 10;
/// How long `git ls-remote` / `git push --dry-run` may take in `hank doctor`.
const REMOTE_TIMEOUT: Duration = Duration::from_secs(20);

/// The path of the workspace file of `root`.
#[must_use]
pub fn path(root: &Path) -> PathBuf {
    root.join(FILE)
}

/// The project's workspace: `None` without `.hank/workspace.toml` (a workspace of one
/// repository, the project itself, as before workspaces). A file that does not read, an
/// unknown key, a missing path, a name not usable as a folder or branch part, two names for
/// one checkout: an error naming the file and the key.
pub fn load(root: &Path) -> Result<Option<Workspace>> {
    let file = path(root);
    let text = match crate::fsread::read(&file, MAX_BYTES, crate::fsread::Follow::No) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(HankError::io("read", &file, e)),
    };
    let text = String::from_utf8(text).map_err(|_| HankError::Unreadable {
        path: file.clone(),
        problem: "it is not UTF-8 text".into(),
    })?;
    parse(&text, root).map(Some)
}

/// [`load`] on the file's text.
pub fn parse(text: &str, root: &Path) -> Result<Workspace> {
    let shown = FILE;
    let parsed: WorkspaceFile = toml::from_str(text).map_err(|e| {
        HankError::usage_hint(
            format!("{shown}: {}", e.to_string().trim()),
            "each repository is a table `[repos.NAME]` with `path = \"../NAME\"`, optionally `base = \"main\"` and `forge = \"github.com/OWNER/NAME\"`",
        )
    })?;
    let entries = parsed
        .repos
        .into_iter()
        .map(|(name, r)| Entry {
            name,
            path: r.path,
            base: r.base,
            forge: r.forge,
        })
        .collect();
    rules::of_entries(entries, root, shown).map_err(HankError::usage)
}

/// The text of a workspace file naming `repos` (`NAME=PATH` or `NAME=PATH@BASE`, as
/// `--repo` takes them), checked as [`load`] would check it.
pub fn file_text(root: &Path, repos: &[String]) -> Result<String> {
    let mut file = WorkspaceFile::default();
    for given in repos {
        let Some((name, rest)) = given.split_once('=') else {
            return Err(HankError::usage(format!(
                "--repo expects NAME=PATH or NAME=PATH@BASE (e.g. --repo api=../api@main), got {given:?}"
            )));
        };
        let (path, base) = match rest.rsplit_once('@') {
            Some((p, b)) => (p, Some(b.trim().to_string())),
            None => (rest, None),
        };
        let name = name.trim().to_string();
        if file.repos.contains_key(&name) {
            return Err(HankError::usage(format!(
                "--repo names the repository {name:?} twice"
            )));
        }
        file.repos.insert(
            name,
            WorkspaceRepo {
                path: path.trim().to_string(),
                base,
                forge: None,
            },
        );
    }
    let body = toml::to_string(&file)
        .map_err(|e| HankError::Internal(format!("the workspace file: {e}")))?;
    let text = format!(
        "# The repositories one change may span (hank's workspaces, docs/fleet.md). Per\n\
         # repository: path (its checkout; its `origin` is the remote), optionally base (the\n\
         # branch changes start from) and forge (OWNER/NAME when the remote's URL does not say).\n\n{body}"
    );
    parse(&text, root)?;
    Ok(text)
}

/// Write `.hank/workspace.toml` naming `repos` ([`file_text`]); an existing file is kept
/// unless `replace`. Returns whether it was written.
pub fn write(root: &Path, repos: &[String], replace: bool) -> Result<bool> {
    if repos.is_empty() {
        return Ok(false);
    }
    let text = file_text(root, repos)?;
    let file = path(root);
    if file.exists() && !replace {
        return Err(HankError::usage_hint(
            format!("{} exists: --repo would replace it", file.display()),
            "edit the file, or remove it first",
        ));
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| HankError::io("create", dir, e))?;
    }
    crate::store::write_atomic(&file, text.as_bytes(), true)
        .map_err(|e| HankError::io("write", &file, e))?;
    Ok(true)
}

/// git's answer in `dir`, trimmed; `None` when it failed.
fn git_text(dir: &Path, args: &[&str]) -> Option<String> {
    crate::git::Checkout::at(dir)
        .git()
        .read(args)
        .ok()
        .map(|o| String::from_utf8_lossy(&o).trim().to_string())
}

/// What git says about each repository of `ws` (in its order). `root` is the project: when a
/// repository is the project itself its dirt is the fleet's own check (`hank fleet` refuses
/// a dirty project with the files hank writes left out), not this one.
#[must_use]
pub fn facts(root: &Path, ws: &Workspace) -> Vec<RepoFacts> {
    ws.repos.iter().map(|r| repo_facts(root, r)).collect()
}

fn repo_facts(root: &Path, r: &rules::Repo) -> RepoFacts {
    let mut f = RepoFacts {
        name: r.name.clone(),
        ..RepoFacts::default()
    };
    f.exists = r.path.is_dir();
    if !f.exists {
        return f;
    }
    let dir = r.path.as_path();
    f.git = git_text(dir, &["rev-parse", "--is-bare-repository"]).as_deref() == Some("false")
        && git_text(dir, &["rev-parse", "--verify", "--quiet", "HEAD"]).is_some();
    if !f.git {
        return f;
    }
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    f.top = git_text(dir, &["rev-parse", "--show-toplevel"])
        .is_some_and(|top| same(Path::new(&top), dir));
    f.branch = git_text(dir, &["symbolic-ref", "--quiet", "--short", "HEAD"]);
    f.base_exists = match &r.base {
        None => true,
        Some(base) => git_text(
            dir,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{base}"),
            ],
        )
        .is_some(),
    };
    if !same(dir, root) {
        f.dirty = git_text(
            dir,
            &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
        )
        .map(|s| {
            s.split('\0')
                .filter(|e| e.len() > 3)
                .take(DIRTY_SHOWN)
                .map(|e| crate::sanitize::line(&e[3..]))
                .collect()
        })
        .unwrap_or_default();
    }
    f.origin = git_text(dir, &["remote", "get-url", "--", "origin"]).filter(|u| !u.is_empty());
    f
}

/// Before any task of a fleet starts: the plan's tasks against the workspace (each section
/// naming known repositories, every section naming some in a workspace of several), then
/// each repository the tasks change fit to start from (present, a checkout of its own,
/// clean, on its base, with an `origin`). Every refusal names the repository; nothing is
/// changed anywhere. `None`: the project has no workspace file.
pub fn check_before_start(root: &Path, tasks: &[TaskSpec]) -> Result<Option<Workspace>> {
    let ws = load(root)?;
    rules::check_tasks(tasks, ws.as_ref()).map_err(|e| {
        HankError::usage(format!("{}: {e}", root.join(".hank/fix_plan.md").display()))
    })?;
    let Some(ws) = ws else {
        return Ok(None);
    };
    let used = used_by(tasks, &ws);
    let refused = rules::refusals(&used, &facts(root, &used));
    if !refused.is_empty() {
        return Err(HankError::usage_hint(
            format!(
                "the workspace is not ready; no task started:\n  {}",
                refused.join("\n  ")
            ),
            format!("fix each repository named above (the workspace is {FILE}), then run again"),
        ));
    }
    Ok(Some(ws))
}

/// The repositories of `ws` that `tasks` change, as a workspace of their own.
fn used_by(tasks: &[TaskSpec], ws: &Workspace) -> Workspace {
    let touched = rules::touched(tasks, ws);
    Workspace {
        repos: ws
            .repos
            .iter()
            .filter(|r| touched.contains(&r.name))
            .cloned()
            .collect(),
    }
}

/// Before a fleet that will deliver a change set starts: each repository the tasks change
/// answers at its `origin` and takes a push (`git push --dry-run`, as `hank doctor` asks);
/// every one that does not is named in one refusal, before any task starts, so that no task's
/// work waits on a repository it can never be delivered to.
pub fn refuse_without_push(root: &Path, ws: &Workspace, tasks: &[TaskSpec]) -> Result<()> {
    refuse_unpushable(root, &used_by(tasks, ws))
}

/// [`refuse_without_push`] for every repository of `used` (`hank watch`, whose issues may
/// name any of them, asks it of the whole workspace before it claims one).
pub fn refuse_unpushable(root: &Path, used: &Workspace) -> Result<()> {
    let mut refused = Vec::new();
    for (r, f) in used.repos.iter().zip(facts(root, used)) {
        if let Err(why) = remote_facts(r, &f).push {
            refused.push(format!(
                "repository {:?} ({}): its origin does not take a push: {why}",
                r.name,
                r.path.display()
            ));
        }
    }
    if refused.is_empty() {
        return Ok(());
    }
    Err(HankError::usage_hint(
        format!(
            "the change set could not be delivered; no task started:\n  {}",
            refused.join("\n  ")
        ),
        "check each repository's remote and your login there (`hank doctor` shows them), or run \
         without --deliver pr",
    ))
}

/// A fleet as CI jobs (`hank fleet plan`/`run-task`: one checkout each), and `hank fleet` in a
/// workspace of one repository, run tasks in the project's own repository only: a task that
/// would change another repository of the workspace is refused (naming the tasks and
/// repositories) rather than run in the wrong one. A workspace whose repositories are the
/// project itself (`path = "."`) runs as a project without one. (`hank fleet` in a workspace
/// of several runs a task across them: `crate::fleet::repos`.)
pub fn require_project_only(root: &Path, ws: &Workspace, tasks: &[TaskSpec]) -> Result<()> {
    let project = root.canonicalize().ok();
    let is_project = |r: &rules::Repo| project.is_some() && r.path.canonicalize().ok() == project;
    let elsewhere: Vec<String> = tasks
        .iter()
        .flat_map(|t| {
            rules::repos_of(t, ws)
                .into_iter()
                .filter(|r| !is_project(r))
                .map(move |r| format!("{:?} in {:?}", t.name, r.name))
        })
        .collect();
    refuse_elsewhere(&elsewhere)
}

/// `hank watch`: its issues' tasks name no repository, so a workspace with any repository
/// other than the project itself is refused (naming them) rather than worked in the wrong one.
pub fn require_no_other_repository(root: &Path, ws: &Workspace) -> Result<()> {
    let project = root.canonicalize().ok();
    let elsewhere: Vec<String> = ws
        .repos
        .iter()
        .filter(|r| project.is_none() || r.path.canonicalize().ok() != project)
        .map(|r| format!("{:?}", r.name))
        .collect();
    refuse_elsewhere(&elsewhere)
}

fn refuse_elsewhere(elsewhere: &[String]) -> Result<()> {
    if elsewhere.is_empty() {
        return Ok(());
    }
    Err(HankError::usage_hint(
        format!(
            "this hank runs a fleet's tasks only in the project's own repository, and these would change another repository of {FILE}: {}",
            elsewhere.join(", ")
        ),
        "run them across the workspace with `hank fleet` here (a workspace of several repositories), or the tasks of each repository with `hank fleet` in that repository",
    ))
}

/// What `hank doctor` says of one repository beyond [`facts`]: whether its `origin`
/// answers (`git ls-remote`) and whether a push would be taken (`git push --dry-run` of its
/// base to a branch name no one uses; for a remote on this disk, also whether its folder may
/// be written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFacts {
    /// `Err`: why `git ls-remote origin` failed.
    pub reachable: std::result::Result<(), String>,
    /// `Err`: why a push would be refused.
    pub push: std::result::Result<(), String>,
}

/// [`RemoteFacts`] of a repository whose [`RepoFacts`] found an `origin`.
#[must_use]
pub fn remote_facts(r: &rules::Repo, f: &RepoFacts) -> RemoteFacts {
    let dir = r.path.as_path();
    let short = |e: crate::git::GitError| crate::sanitize::line(&e.to_string());
    let reachable = crate::git::Checkout::at(dir)
        .git()
        .timeout(REMOTE_TIMEOUT)
        .read(&["ls-remote", "--heads", "--", "origin"])
        .map(|_| ())
        .map_err(short);
    let push = if reachable.is_err() {
        Err("the remote did not answer".to_string())
    } else {
        let local = f.origin.as_deref().and_then(local_remote);
        let writable = match &local {
            Some(p) => nix::unistd::access(p.as_path(), nix::unistd::AccessFlags::W_OK)
                .map_err(|e| format!("{} may not be written: {e}", p.display())),
            None => Ok(()),
        };
        writable.and_then(|()| {
            crate::git::Checkout::at(dir)
                .git()
                .timeout(REMOTE_TIMEOUT)
                .read(&[
                    "push",
                    "--dry-run",
                    "--porcelain",
                    "--",
                    "origin",
                    "HEAD:refs/heads/hank/doctor-push-check",
                ])
                .map(|_| ())
                .map_err(short)
        })
    };
    RemoteFacts { reachable, push }
}

/// The folder of a remote on this disk (`/srv/api.git`, `file:///srv/api.git`), `None` for a
/// network remote.
fn local_remote(url: &str) -> Option<PathBuf> {
    let p = url.strip_prefix("file://").unwrap_or(url);
    let p = Path::new(p);
    (p.is_absolute() && p.exists()).then(|| p.to_path_buf())
}

/// How long one `git worktree add` / `remove` may take (a checkout of every file).
const WORKTREE_TIMEOUT: Duration = Duration::from_secs(600);

/// A task's folder made ([`rules::task_layout`]): in each repository the task changes, its
/// worktree `<folder>/<repo>` on `hank/<slug>` (the branch made from the repository's base
/// when it does not exist, taken as it is when it does: a task resumed after a kill keeps
/// its work). A worktree already there on its branch is kept. When one repository fails,
/// what this call made in the others is undone (worktrees removed, new branches deleted):
/// no repository is left half-changed. The error names the repository.
pub fn open_task_folder(layout: &[rules::TaskCheckout]) -> Result<()> {
    let mut made: Vec<(&rules::TaskCheckout, bool)> = Vec::new();
    for c in layout {
        match open_one(c) {
            Ok(Some(created)) => made.push((c, created)),
            Ok(None) => {}
            Err(e) => {
                for (m, created) in made.iter().rev() {
                    undo(m, *created);
                }
                return Err(e);
            }
        }
    }
    Ok(())
}

/// One worktree made: `Some(whether its branch was created)`, `None` when it was there.
fn open_one(c: &rules::TaskCheckout) -> Result<Option<bool>> {
    let at = |what: String| {
        HankError::usage(format!(
            "repository {:?}: {what} ({})",
            c.repo,
            c.path.display()
        ))
    };
    if c.path.join(".git").exists() {
        let on = git_text(&c.path, &["symbolic-ref", "--quiet", "--short", "HEAD"]);
        if on.as_deref() == Some(c.branch.as_str()) {
            return Ok(None);
        }
        return Err(at(format!(
            "the task's folder holds a checkout on {}, not {}",
            on.as_deref().unwrap_or("no branch"),
            c.branch
        )));
    }
    if std::fs::read_dir(&c.path).is_ok_and(|mut d| d.next().is_some()) {
        return Err(at("the task's folder for it is not empty".to_string()));
    }
    if let Some(parent) = c.path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| HankError::io("create", parent, e))?;
    }
    let path = c.path.to_string_lossy().into_owned();
    let exists = git_text(
        &c.checkout,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{}", c.branch),
        ],
    )
    .is_some();
    let base = c
        .base
        .as_ref()
        .map_or_else(|| "HEAD".to_string(), |b| format!("refs/heads/{b}"));
    let args: Vec<&str> = if exists {
        vec!["worktree", "add", &path, &c.branch]
    } else {
        vec!["worktree", "add", "-b", &c.branch, &path, &base]
    };
    crate::git::Checkout::at(&c.checkout)
        .git()
        .timeout(WORKTREE_TIMEOUT)
        .read(&args)
        .map_err(|e| at(format!("`git worktree add` failed: {e}")))?;
    Ok(Some(!exists))
}

/// What [`open_one`] made, undone (best effort: the error being reported is the first one).
fn undo(c: &rules::TaskCheckout, created: bool) {
    let path = c.path.to_string_lossy().into_owned();
    let _ = crate::git::Checkout::at(&c.checkout)
        .git()
        .timeout(WORKTREE_TIMEOUT)
        .read(&["worktree", "remove", "--force", &path]);
    if created {
        let _ = crate::git::Checkout::at(&c.checkout)
            .git()
            .read(&["branch", "-D", &c.branch]);
    }
}

/// A task's folder removed: each repository's worktree (its branch kept: the work is there),
/// then the folder when nothing else is left in it. The first failure is returned, naming
/// the repository; the others are still removed.
pub fn close_task_folder(layout: &[rules::TaskCheckout], folder: &Path) -> Result<()> {
    let mut first: Option<HankError> = None;
    for c in layout {
        if !c.path.exists() {
            continue;
        }
        let path = c.path.to_string_lossy().into_owned();
        if let Err(e) = crate::git::Checkout::at(&c.checkout)
            .git()
            .timeout(WORKTREE_TIMEOUT)
            .read(&["worktree", "remove", "--force", &path])
        {
            first.get_or_insert_with(|| {
                HankError::Tool(format!(
                    "repository {:?}: `git worktree remove {path}`: {e}",
                    c.repo
                ))
            });
        }
    }
    let _ = std::fs::remove_dir(folder);
    first.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_s_keys_are_checked_naming_the_file() {
        let root = Path::new("/w/proj");
        let ws = parse(
            "[repos.api]\npath = \"../api\"\nbase = \"main\"\n\n[repos.web]\npath = \"/srv/web\"\nforge = \"github.com/me/web\"\n",
            root,
        )
        .unwrap();
        assert_eq!(ws.names(), "api, web");
        assert_eq!(ws.repos[0].path, Path::new("/w/api"));
        assert_eq!(ws.repos[1].forge.as_deref(), Some("github.com/me/web"));
        for (text, want) in [
            (
                "[repos.api]\npath = \"../api\"\nbranch = \"x\"\n",
                "unknown field `branch`",
            ),
            ("[repos.api]\nbase = \"main\"\n", "missing field `path`"),
            (
                "[repos.api]\npath = \"a\"\n[repos.api]\npath = \"b\"\n",
                "duplicate",
            ),
            ("[repo.api]\npath = \"a\"\n", "unknown field `repo`"),
            ("[repos.\"a b\"]\npath = \"a\"\n", "[repos.a b]"),
            ("", "names no repository"),
        ] {
            let err = parse(text, root).unwrap_err().to_string();
            assert!(err.contains(FILE) && err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn repo_flags_make_a_file_that_reads_back() {
        let root = Path::new("/w/proj");
        let text = file_text(root, &["api=../api@main".into(), "web=../web".into()]).unwrap();
        let ws = parse(&text, root).unwrap();
        assert_eq!(ws.repos[0].base.as_deref(), Some("main"));
        assert_eq!(ws.repos[1].base, None);
        assert_eq!(ws.repos[1].given, "../web");
        for (bad, want) in [
            (vec!["api"], "NAME=PATH"),
            (vec!["api=a", "api=b"], "twice"),
            (vec!["a/b=x"], "[repos.a/b]"),
        ] {
            let given: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            let err = file_text(root, &given).unwrap_err().to_string();
            assert!(err.contains(want), "{bad:?}: {err}");
        }
        assert_eq!(local_remote("file:///"), Some(PathBuf::from("/")));
        assert_eq!(local_remote("git@github.com:me/api.git"), None);
    }

    /// A repository at `dir` on `main` with one commit.
    fn repo_at(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        crate::git::Checkout::at(dir)
            .git()
            .read(&["init", "-q", "-b", "main"])
            .unwrap();
        std::fs::write(dir.join("README"), "x\n").unwrap();
        crate::git::Checkout::at(dir)
            .git()
            .read(&["add", "-A"])
            .unwrap();
        crate::git::Checkout::at(dir)
            .git()
            .read(&[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                "init",
            ])
            .unwrap();
    }

    fn branches(dir: &Path) -> String {
        git_text(
            dir,
            &["branch", "--list", "hank/*", "--format=%(refname:short)"],
        )
        .unwrap()
    }

    #[test]
    fn a_task_folder_holds_a_worktree_per_named_repository_and_fails_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("proj");
        std::fs::create_dir_all(&root).unwrap();
        repo_at(&tmp.path().join("api"));
        repo_at(&tmp.path().join("web"));
        let ws = parse(
            "[repos.api]\npath = \"../api\"\nbase = \"main\"\n[repos.web]\npath = \"../web\"\n[repos.db]\npath = \"../db\"\n",
            &root,
        )
        .unwrap();
        let opt = crate::policy::fixplan::default_optional_sections();
        let tasks = crate::policy::fleet::tasks_from_plan(
            "## Both (repos: api, web)\n- [ ] x\n## Db (repos: db, api)\n- [ ] y\n",
            &opt,
        )
        .unwrap();
        let folder = tmp.path().join("wt/both");
        let layout = rules::task_layout(&tasks[0], &ws, &folder);
        open_task_folder(&layout).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["api", "web"], "exactly the named repositories");
        for r in ["api", "web"] {
            assert_eq!(
                git_text(&folder.join(r), &["symbolic-ref", "--short", "HEAD"]).unwrap(),
                "hank/both"
            );
            assert!(folder.join(r).join("README").is_file());
        }
        // Work in one, then a resume: kept as it is.
        std::fs::write(folder.join("api/new.txt"), "work\n").unwrap();
        open_task_folder(&layout).unwrap();
        assert!(folder.join("api/new.txt").is_file());
        // A task whose second repository is missing: nothing is left in the first.
        let folder2 = tmp.path().join("wt/db");
        let layout2 = rules::task_layout(&tasks[1], &ws, &folder2);
        assert_eq!(layout2[0].repo, "api");
        let err = open_task_folder(&layout2).unwrap_err().to_string();
        assert!(err.contains("repository \"db\""), "{err}");
        assert!(!folder2.join("api").exists());
        assert_eq!(branches(&tmp.path().join("api")), "hank/both");
        // Closed: the worktrees and the folder go, the branches (the work) stay.
        close_task_folder(&layout, &folder).unwrap();
        assert!(!folder.exists());
        assert_eq!(branches(&tmp.path().join("web")), "hank/both");
        // Opened again from the existing branches.
        open_task_folder(&layout).unwrap();
        assert_eq!(
            git_text(&folder.join("web"), &["symbolic-ref", "--short", "HEAD"]).unwrap(),
            "hank/both"
        );
        close_task_folder(&layout, &folder).unwrap();
    }
}
