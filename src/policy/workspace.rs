//! Workspaces (issue 51): the repositories one change may span, as `.hank/workspace.toml`
//! names them, the plan's tasks checked against them, and the refusal of a repository that
//! is not fit to start from. **\[pure\]**
//!
//! The file's entries come in as plain data (`crate::workspace::load` reads the file); the
//! facts about each checkout come in as [`RepoFacts`] (`crate::workspace::facts` asks git).
//! Without the file a project is a workspace of one repository, itself: nothing here applies.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use super::fleet::TaskSpec;

/// The longest repository name (a folder in a task's folder, a word in a heading).
pub const MAX_NAME: usize = 40;

/// One repository of the workspace, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// `[repos.NAME]`: its folder in a task's folder, the name `(repos: …)` gives.
    pub name: String,
    /// The checkout, absolute when the project is (joined to the project's folder, `..`
    /// resolved by the text, links not followed).
    pub path: PathBuf,
    /// The path as the file gives it (for messages).
    pub given: String,
    /// The base branch, when the file names one (else the branch the checkout is on).
    pub base: Option<String>,
    /// The forge repository (`github.com/me/api`), when the file names one.
    pub forge: Option<String>,
}

/// One `[repos.NAME]` table as the file gives it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Entry {
    pub name: String,
    pub path: String,
    pub base: Option<String>,
    pub forge: Option<String>,
}

/// The repositories of a workspace file, in name order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Workspace {
    pub repos: Vec<Repo>,
}

impl Workspace {
    /// More than one repository: tasks must say which they change.
    #[must_use]
    pub fn is_multi(&self) -> bool {
        self.repos.len() > 1
    }

    /// The repository named `name`.
    #[must_use]
    pub fn repo(&self, name: &str) -> Option<&Repo> {
        self.repos.iter().find(|r| r.name == name)
    }

    /// The names, in order, comma-separated (for messages).
    #[must_use]
    pub fn names(&self) -> String {
        self.repos
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why `name` cannot name a repository (a folder and part of messages and headings): `None`
/// when it can. ASCII letters, digits, `-`, `_` and `.`, starting with a letter or digit, at
/// most [`MAX_NAME`] characters.
#[must_use]
pub fn bad_name(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("it is empty".to_string());
    }
    if name.chars().count() > MAX_NAME {
        return Some(format!("it is longer than {MAX_NAME} characters"));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Some("it must start with a letter or a digit".to_string());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Some(format!(
            "{c:?} is not allowed (letters, digits, `-`, `_` and `.` are)"
        ));
    }
    if name.contains("..") || name.ends_with(".lock") || name.ends_with('.') {
        return Some("git refuses it in a branch (`..`, a trailing `.` or `.lock`)".to_string());
    }
    None
}

/// Why `base` cannot be a branch name: `None` when it can (git's `check-ref-format` rules
/// that matter here).
#[must_use]
pub fn bad_branch(base: &str) -> Option<String> {
    let bad_char = base
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || "~^:?*[\\".contains(*c));
    if base.is_empty() {
        Some("it is empty".to_string())
    } else if let Some(c) = bad_char {
        Some(format!("{c:?} is not allowed in a branch name"))
    } else if base.starts_with(['-', '/'])
        || base.ends_with(['/', '.'])
        || base.ends_with(".lock")
        || base.contains("..")
        || base.contains("//")
        || base.contains("@{")
        || base.split('/').any(|p| p.starts_with('.'))
    {
        Some("git refuses it as a branch name".to_string())
    } else {
        None
    }
}

/// Why `forge` cannot name a forge repository (`[HOST/]OWNER/NAME`, as `GH_REPO`): `None`
/// when it can.
#[must_use]
pub fn bad_forge(forge: &str) -> Option<String> {
    let parts: Vec<&str> = forge.split('/').collect();
    if !(2..=3).contains(&parts.len())
        || parts
            .iter()
            .any(|p| p.is_empty() || p.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        Some("it must be [HOST/]OWNER/NAME, e.g. github.com/me/api".to_string())
    } else {
        None
    }
}

/// `path` joined to `project` with `.` and `..` resolved by the text (no link followed).
#[must_use]
pub fn resolve(project: &Path, path: &str) -> PathBuf {
    let joined = project.join(path);
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The workspace the file's entries make, checked: at least one repository, every name
/// usable ([`bad_name`]), no two names equal but for case (one folder on a case-insensitive
/// file system), every path given and no two repositories at one path, a base that is a
/// branch name ([`bad_branch`]), a forge as `[HOST/]OWNER/NAME`. The error names the key
/// (`repos.NAME.path`) and what was expected; `file` names the file in it.
pub fn of_entries(entries: Vec<Entry>, project: &Path, file: &str) -> Result<Workspace, String> {
    if entries.is_empty() {
        return Err(format!(
            "{file} names no repository: add a `[repos.NAME]` table with `path = \"../NAME\"` per repository, or remove the file"
        ));
    }
    let mut repos: Vec<Repo> = Vec::new();
    for e in entries {
        let key = format!("repos.{}", e.name);
        if let Some(why) = bad_name(&e.name) {
            return Err(format!(
                "{file}: [{key}]: {:?} cannot name a repository: {why}",
                e.name
            ));
        }
        if let Some(other) = repos.iter().find(|r| r.name.eq_ignore_ascii_case(&e.name)) {
            return Err(format!(
                "{file}: [{key}] and [repos.{}] differ only in case: they would be one folder; rename one",
                other.name
            ));
        }
        if e.path.trim().is_empty() {
            return Err(format!(
                "{file}: {key}.path is empty: give the repository's checkout, e.g. path = \"../{}\"",
                e.name
            ));
        }
        let path = resolve(project, e.path.trim());
        if let Some(other) = repos.iter().find(|r| r.path == path) {
            return Err(format!(
                "{file}: [{key}] and [repos.{}] are the same checkout {}: name each repository once",
                other.name,
                path.display()
            ));
        }
        if let Some(base) = &e.base
            && let Some(why) = bad_branch(base)
        {
            return Err(format!(
                "{file}: {key}.base = {base:?} is not a branch: {why}"
            ));
        }
        if let Some(forge) = &e.forge
            && let Some(why) = bad_forge(forge)
        {
            return Err(format!(
                "{file}: {key}.forge = {forge:?} is not a forge repository: {why}"
            ));
        }
        repos.push(Repo {
            name: e.name,
            path,
            given: e.path,
            base: e.base,
            forge: e.forge,
        });
    }
    repos.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Workspace { repos })
}

/// The plan's tasks against the workspace (`None`: no workspace file). Without a workspace a
/// task naming repositories is refused (there are none to name); in a workspace every name
/// must be one of its repositories, and in a workspace of several every task must name the
/// ones it changes. The error names the section and the repository.
pub fn check_tasks(tasks: &[TaskSpec], ws: Option<&Workspace>) -> Result<(), String> {
    for t in tasks {
        let Some(ws) = ws else {
            if !t.repos.is_empty() {
                return Err(format!(
                    "section {:?} names repositories ({}), but the project has no .hank/workspace.toml: add one naming them, or remove the `repos:`",
                    t.name,
                    t.repos.join(", ")
                ));
            }
            continue;
        };
        if t.repos.is_empty() && ws.is_multi() {
            return Err(format!(
                "section {:?} does not say which repositories it changes: the workspace has several ({}); add `(repos: NAME, …)` to its heading",
                t.name,
                ws.names()
            ));
        }
        if let Some(unknown) = t.repos.iter().find(|r| ws.repo(r).is_none()) {
            return Err(format!(
                "section {:?} names the repository {unknown:?}, which .hank/workspace.toml does not have (it has: {})",
                t.name,
                ws.names()
            ));
        }
    }
    Ok(())
}

/// The repositories a task works in, in the workspace's (name) order: the ones it names, or
/// every repository of a workspace of one.
#[must_use]
pub fn repos_of<'a>(task: &TaskSpec, ws: &'a Workspace) -> Vec<&'a Repo> {
    ws.repos
        .iter()
        .filter(|r| task.repos.is_empty() || task.repos.contains(&r.name))
        .collect()
}

/// What git says about one repository's checkout before a fleet starts (gathered by
/// `crate::workspace::facts`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RepoFacts {
    /// The repository's name.
    pub name: String,
    /// The path is a folder.
    pub exists: bool,
    /// It is a git checkout with a commit (not bare).
    pub git: bool,
    /// It is the top of its checkout (not a folder inside another repository).
    pub top: bool,
    /// The branch checked out (`None`: detached).
    pub branch: Option<String>,
    /// The base branch exists locally (`true` when the file names none).
    pub base_exists: bool,
    /// Changed or untracked paths (the first few).
    pub dirty: Vec<String>,
    /// The `origin` remote's URL.
    pub origin: Option<String>,
}

/// Why each repository cannot start a change, one line per refusal, each naming the
/// repository: missing, not a git checkout, not the top of one, dirty, on a branch other
/// than its base (or detached), its base missing, no `origin` remote. Empty: every
/// repository may start. `ws` and `facts` pair by name; a repository without facts is
/// refused as missing.
#[must_use]
pub fn refusals(ws: &Workspace, facts: &[RepoFacts]) -> Vec<String> {
    let mut out = Vec::new();
    for r in &ws.repos {
        let at = format!("repository {:?} ({})", r.name, r.path.display());
        let Some(f) = facts.iter().find(|f| f.name == r.name) else {
            out.push(format!("{at} is missing"));
            continue;
        };
        if !f.exists {
            out.push(format!(
                "{at} is missing: clone it there or fix its path in .hank/workspace.toml"
            ));
            continue;
        }
        if !f.git {
            out.push(format!("{at} is not a git checkout with a commit"));
            continue;
        }
        if !f.top {
            out.push(format!(
                "{at} is a folder inside another git checkout, not a checkout of its own"
            ));
            continue;
        }
        if !f.dirty.is_empty() {
            out.push(format!(
                "{at} has uncommitted changes ({}): commit or stash them first",
                shown(&f.dirty)
            ));
        }
        match (&r.base, &f.branch) {
            (Some(base), _) if !f.base_exists => out.push(format!(
                "{at}: its base branch {base:?} does not exist: create it or fix repos.{}.base",
                r.name
            )),
            (Some(base), Some(b)) if b != base => out.push(format!(
                "{at} is on branch {b:?}, not its base {base:?}: `git -C {} switch {base}` first",
                r.path.display()
            )),
            (_, None) => out.push(format!(
                "{at} is on no branch (a detached HEAD): switch to its base branch first"
            )),
            _ => {}
        }
        if f.origin.is_none() {
            out.push(format!(
                "{at} has no `origin` remote: its branches go there (`git remote add origin URL`)"
            ));
        }
    }
    out
}

/// A few paths, and how many more.
fn shown(paths: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s = paths
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        s.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    s
}

/// The names of the repositories `tasks` change, each once, in workspace order.
#[must_use]
pub fn touched(tasks: &[TaskSpec], ws: &Workspace) -> Vec<String> {
    let named: BTreeSet<&str> = tasks
        .iter()
        .flat_map(|t| repos_of(t, ws))
        .map(|r| r.name.as_str())
        .collect();
    ws.repos
        .iter()
        .filter(|r| named.contains(r.name.as_str()))
        .map(|r| r.name.clone())
        .collect()
}

/// One repository's part of a task: its worktree `<task folder>/<repo>` on `hank/<slug>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCheckout {
    /// The repository's name (the worktree's folder name in the task's folder).
    pub repo: String,
    /// The repository's own checkout (where `git worktree add` runs).
    pub checkout: PathBuf,
    /// `<task folder>/<repo>`.
    pub path: PathBuf,
    /// `hank/<slug>`, the same in every repository the task changes.
    pub branch: String,
    /// The base the branch starts from when it does not exist yet (`None`: the branch the
    /// checkout is on).
    pub base: Option<String>,
}

/// A task's worktrees side by side in its folder `folder`: one per repository it changes
/// ([`repos_of`]), each `folder/<repo>` on branch `hank/<slug>`. The folder holds exactly
/// these: what the task's agent may change.
#[must_use]
pub fn task_layout(task: &TaskSpec, ws: &Workspace, folder: &Path) -> Vec<TaskCheckout> {
    repos_of(task, ws)
        .into_iter()
        .map(|r| TaskCheckout {
            repo: r.name.clone(),
            checkout: r.path.clone(),
            path: folder.join(&r.name),
            branch: format!("hank/{}", task.slug),
            base: r.base.clone(),
        })
        .collect()
}

/// The order a change set's pull requests open in: a repository whose tasks come first in
/// the plan's waves opens first (the API before the web app calling it); repositories the
/// same wave first changes keep the workspace's order. Only repositories some task changes.
pub fn delivery_order(tasks: &[TaskSpec], ws: &Workspace) -> Result<Vec<String>, String> {
    let waves = super::fleet::waves(tasks)?;
    let wave_of = |name: &str| waves.iter().position(|w| w.iter().any(|n| n == name));
    let mut ranked: Vec<(usize, usize, String)> = Vec::new();
    for (i, r) in ws.repos.iter().enumerate() {
        let first = tasks
            .iter()
            .filter(|t| repos_of(t, ws).iter().any(|x| x.name == r.name))
            .filter_map(|t| wave_of(&t.name))
            .min();
        if let Some(w) = first {
            ranked.push((w, i, r.name.clone()));
        }
    }
    ranked.sort();
    Ok(ranked.into_iter().map(|(_, _, n)| n).collect())
}

/// The tasks that changed `repo`, in plan order: where a red check of its pull request sends
/// its findings.
#[must_use]
pub fn changed_by(tasks: &[TaskSpec], ws: &Workspace, repo: &str) -> Vec<String> {
    tasks
        .iter()
        .filter(|t| repos_of(t, ws).iter().any(|r| r.name == repo))
        .map(|t| t.name.clone())
        .collect()
}

/// The line each pull request of a change set carries, linking the others: `set` is every
/// repository of the set in [`delivery_order`] with its pull request's reference once opened
/// (`api#12`, or its forge's own form), `this` the repository whose body it is.
#[must_use]
pub fn change_set_line(this: &str, set: &[(String, Option<String>)]) -> String {
    let shown: Vec<String> = set
        .iter()
        .map(|(repo, pr)| match pr {
            Some(r) => r.clone(),
            None => format!("{repo} (not opened yet)"),
        })
        .collect();
    let position = set.iter().position(|(r, _)| r == this).map_or(0, |i| i + 1);
    format!(
        "Part of a change across {} ({} of {}, opened in this order; delivered when all are green).",
        shown.join(", "),
        position,
        set.len()
    )
}

/// Per repository of `ws` (in its order), the tasks of `merged` (each with the repositories
/// its heading names; none named: every repository, as [`repos_of`]) that changed it, in the
/// order given: what each repository's integration branch holds after a fleet. Only
/// repositories some task changed.
#[must_use]
pub fn merged_per_repository(
    ws: &Workspace,
    merged: &[(String, Vec<String>)],
) -> Vec<(String, Vec<String>)> {
    ws.repos
        .iter()
        .filter_map(|r| {
            let tasks: Vec<String> = merged
                .iter()
                .filter(|(_, repos)| repos.is_empty() || repos.contains(&r.name))
                .map(|(t, _)| t.clone())
                .collect();
            (!tasks.is_empty()).then(|| (r.name.clone(), tasks))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::fixplan;
    use crate::policy::fleet::{read_heading, tasks_from_plan};

    fn entry(name: &str, path: &str) -> Entry {
        Entry {
            name: name.to_string(),
            path: path.to_string(),
            ..Entry::default()
        }
    }

    fn two() -> Workspace {
        of_entries(
            vec![entry("web", "../web"), entry("api", "../api")],
            Path::new("/w/proj"),
            "ws.toml",
        )
        .unwrap()
    }

    #[test]
    fn headings_give_their_repositories_beside_after() {
        let table: [(&str, &str, &[&str], &[&str]); 7] = [
            ("Plain", "Plain", &[], &[]),
            ("Fix (the bug)", "Fix (the bug)", &[], &[]),
            ("A (after: B, C)", "A", &["B", "C"], &[]),
            (
                "Use it (repos: web; after: Add the endpoint)",
                "Use it",
                &["Add the endpoint"],
                &["web"],
            ),
            (
                "Both (after: X ;repos: api , web )",
                "Both",
                &["X"],
                &["api", "web"],
            ),
            ("Only (repos: api)", "Only", &[], &["api"]),
            // Not all clauses: the parenthesis is part of the name.
            ("N (repos: a; note)", "N (repos: a; note)", &[], &[]),
        ];
        for (text, name, after, repos) in table {
            let h = read_heading(text).unwrap();
            assert_eq!(h.name, name, "{text}");
            assert_eq!(h.after, after, "{text}");
            assert_eq!(h.repos, repos, "{text}");
        }
    }

    #[test]
    fn bad_clauses_are_refused_naming_the_section() {
        for (text, want) in [
            ("A (repos: )", "empty `repos:`"),
            ("A (repos: a; repos: b)", "`repos:` twice"),
            ("A (after: X; after: Y)", "`after:` twice"),
            ("A (repos: a, a)", "\"a\" twice"),
        ] {
            let err = read_heading(text).unwrap_err();
            assert!(err.contains(want) && err.contains("\"A ("), "{text}: {err}");
        }
        // Through the plan: the error reaches the caller.
        let err = tasks_from_plan("## A (repos: )\n- [ ] x\n", &[]).unwrap_err();
        assert!(err.contains("empty `repos:`"), "{err}");
    }

    #[test]
    fn a_plan_s_tasks_carry_their_repositories_and_names_stay_slugs() {
        let plan = "# Plan\n## Add the endpoint (repos: api)\n- [ ] route\n\
                    ## Use it in the UI (repos: web; after: Add the endpoint)\n- [ ] call\n\
                    ## Both (repos: api, web)\n- [ ] rename\n";
        let tasks = tasks_from_plan(plan, &fixplan::default_optional_sections()).unwrap();
        assert_eq!(tasks[1].name, "Use it in the UI");
        assert_eq!(tasks[1].slug, "use-it-in-the-ui");
        assert_eq!(tasks[1].after, ["Add the endpoint"]);
        assert_eq!(tasks[1].repos, ["web"]);
        assert_eq!(tasks[2].repos, ["api", "web"]);
        let ws = two();
        check_tasks(&tasks, Some(&ws)).unwrap();
        assert_eq!(touched(&tasks[..1], &ws), ["api"]);
        assert_eq!(touched(&tasks, &ws), ["api", "web"]);
        let names: Vec<&str> = repos_of(&tasks[2], &ws)
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(names, ["api", "web"]);
    }

    #[test]
    fn tasks_are_checked_against_the_workspace() {
        let opt = fixplan::default_optional_sections();
        let ws = two();
        let one = of_entries(vec![entry("api", "../api")], Path::new("/p"), "f").unwrap();
        let table: [(&str, Option<&Workspace>, Option<&str>); 6] = [
            ("## A\n- [ ] x\n", None, None),
            ("## A\n- [ ] x\n", Some(&one), None),
            (
                "## A\n- [ ] x\n",
                Some(&ws),
                Some("section \"A\" does not say which repositories"),
            ),
            (
                "## A (repos: db)\n- [ ] x\n",
                Some(&ws),
                Some("section \"A\" names the repository \"db\""),
            ),
            (
                "## A (repos: api)\n- [ ] x\n",
                None,
                Some("no .hank/workspace.toml"),
            ),
            ("## A (repos: api)\n- [ ] x\n", Some(&one), None),
        ];
        for (plan, ws, want) in table {
            let tasks = tasks_from_plan(plan, &opt).unwrap();
            match (check_tasks(&tasks, ws), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => assert!(e.contains(w), "{plan}: {e}"),
                (got, _) => panic!("{plan}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn entries_are_checked_naming_the_key() {
        let p = Path::new("/w/proj");
        let table: [(Vec<Entry>, &str); 8] = [
            (vec![], "names no repository"),
            (vec![entry("-x", "../x")], "[repos.-x]"),
            (vec![entry("a/b", "../x")], "'/' is not allowed"),
            (vec![entry("a..b", "../x")], "git refuses it"),
            (vec![entry("api", " ")], "repos.api.path is empty"),
            (
                vec![entry("api", "../api"), entry("API", "../api2")],
                "differ only in case",
            ),
            (
                vec![entry("api", "../api"), entry("b", "../x/../api")],
                "same checkout /w/api",
            ),
            (
                vec![Entry {
                    base: Some("ma in".into()),
                    ..entry("api", "../api")
                }],
                "repos.api.base = \"ma in\"",
            ),
        ];
        for (entries, want) in table {
            let err = of_entries(entries.clone(), p, "ws.toml").unwrap_err();
            assert!(err.contains(want), "{entries:?}: {err}");
        }
        let err = of_entries(
            vec![Entry {
                forge: Some("me".into()),
                ..entry("api", "../api")
            }],
            p,
            "ws.toml",
        )
        .unwrap_err();
        assert!(err.contains("repos.api.forge"), "{err}");
        let ok = of_entries(
            vec![Entry {
                base: Some("release/2".into()),
                forge: Some("github.com/me/api".into()),
                ..entry("api", "../api")
            }],
            p,
            "ws.toml",
        )
        .unwrap();
        assert_eq!(ok.repos[0].path, Path::new("/w/api"));
        assert_eq!(ok.repos[0].given, "../api");
        assert!(!ok.is_multi());
        assert_eq!(two().names(), "api, web");
        assert_eq!(resolve(p, "/abs/x/./y"), Path::new("/abs/x/y"));
    }

    fn fit(name: &str) -> RepoFacts {
        RepoFacts {
            name: name.to_string(),
            exists: true,
            git: true,
            top: true,
            branch: Some("main".into()),
            base_exists: true,
            dirty: vec![],
            origin: Some("/r/x.git".into()),
        }
    }

    #[test]
    fn unfit_repositories_are_refused_each_named() {
        let mut ws = two();
        ws.repos[0].base = Some("main".into());
        assert!(refusals(&ws, &[fit("api"), fit("web")]).is_empty());
        let table: [(RepoFacts, &str); 8] = [
            (
                RepoFacts {
                    exists: false,
                    ..fit("api")
                },
                "\"api\" (/w/api) is missing",
            ),
            (
                RepoFacts {
                    git: false,
                    ..fit("api")
                },
                "not a git checkout",
            ),
            (
                RepoFacts {
                    top: false,
                    ..fit("api")
                },
                "inside another git checkout",
            ),
            (
                RepoFacts {
                    dirty: (1..=5).map(|i| format!("f{i}")).collect(),
                    ..fit("api")
                },
                "uncommitted changes (f1, f2, f3 and 2 more)",
            ),
            (
                RepoFacts {
                    branch: Some("dev".into()),
                    ..fit("api")
                },
                "is on branch \"dev\", not its base \"main\"",
            ),
            (
                RepoFacts {
                    base_exists: false,
                    ..fit("api")
                },
                "base branch \"main\" does not exist",
            ),
            (
                RepoFacts {
                    branch: None,
                    ..fit("api")
                },
                "detached HEAD",
            ),
            (
                RepoFacts {
                    origin: None,
                    ..fit("api")
                },
                "no `origin` remote",
            ),
        ];
        for (facts, want) in table {
            let got = refusals(&ws, &[facts.clone(), fit("web")]);
            assert_eq!(got.len(), 1, "{facts:?}: {got:?}");
            assert!(
                got[0].contains("repository \"api\"") && got[0].contains(want),
                "{facts:?}: {got:?}"
            );
        }
        // The web repository has no base: any branch is its base; no facts: missing.
        let web_dev = RepoFacts {
            branch: Some("dev".into()),
            ..fit("web")
        };
        assert!(refusals(&ws, &[fit("api"), web_dev]).is_empty());
        let got = refusals(&ws, &[fit("api")]);
        assert_eq!(got, ["repository \"web\" (/w/web) is missing"]);
    }

    #[test]
    fn a_change_set_opens_in_dependency_order_and_links_the_others() {
        let ws = of_entries(
            vec![
                entry("web", "../web"),
                entry("api", "../api"),
                entry("db", "../db"),
            ],
            Path::new("/w/p"),
            "f",
        )
        .unwrap();
        let plan = "## UI (repos: web; after: Endpoint)\n- [ ] a\n\
                    ## Endpoint (repos: api)\n- [ ] b\n\
                    ## Rename (repos: api, web; after: UI)\n- [ ] c\n";
        let tasks = tasks_from_plan(plan, &[]).unwrap();
        // web is first changed in wave 2, api in wave 1; db by no task.
        assert_eq!(delivery_order(&tasks, &ws).unwrap(), ["api", "web"]);
        assert_eq!(changed_by(&tasks, &ws, "web"), ["UI", "Rename"]);
        assert_eq!(changed_by(&tasks, &ws, "api"), ["Endpoint", "Rename"]);
        assert!(changed_by(&tasks, &ws, "db").is_empty());
        let line = change_set_line(
            "web",
            &[
                ("api".into(), Some("me/api#12".into())),
                ("web".into(), None),
            ],
        );
        assert_eq!(
            line,
            "Part of a change across me/api#12, web (not opened yet) (2 of 2, opened in this order; delivered when all are green)."
        );
        let layout = task_layout(&tasks[2], &ws, Path::new("/u/wt/rename"));
        let got: Vec<(&str, &Path, &str)> = layout
            .iter()
            .map(|c| (c.repo.as_str(), c.path.as_path(), c.branch.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("api", Path::new("/u/wt/rename/api"), "hank/rename"),
                ("web", Path::new("/u/wt/rename/web"), "hank/rename"),
            ]
        );
        assert_eq!(layout[0].checkout, Path::new("/w/api"));
    }

    proptest::proptest! {
        /// A heading written with any name and clause lists (either order) reads back as
        /// written; a name never keeps a clause.
        #[test]
        fn headings_read_back_as_written(
            name in "[A-Za-z][A-Za-z0-9 ]{0,20}[A-Za-z0-9]",
            repos in proptest::collection::btree_set("[a-z][a-z0-9_-]{0,8}", 0..4),
            after in proptest::collection::vec("[A-Z][a-z ]{0,10}[a-z]", 0..3),
            repos_first in proptest::bool::ANY,
        ) {
            let repos: Vec<String> = repos.into_iter().collect();
            let mut clauses = Vec::new();
            if !repos.is_empty() {
                clauses.push(format!("repos: {}", repos.join(", ")));
            }
            if !after.is_empty() {
                clauses.push(format!("after: {}", after.join(", ")));
            }
            if !repos_first {
                clauses.reverse();
            }
            let text = if clauses.is_empty() {
                name.clone()
            } else {
                format!("{name} ({})", clauses.join("; "))
            };
            let h = read_heading(&text).unwrap();
            proptest::prop_assert_eq!(&h.name, name.trim());
            proptest::prop_assert_eq!(&h.repos, &repos);
            proptest::prop_assert_eq!(&h.after, &after);
        }
    }

    #[test]
    fn each_repository_holds_the_merged_tasks_that_named_it() {
        let ws = two();
        let m = |name: &str, repos: &[&str]| {
            (
                name.to_string(),
                repos.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            )
        };
        type Merged = Vec<(String, Vec<String>)>;
        type Want<'a> = Vec<(&'a str, Vec<&'a str>)>;
        // (merged tasks, want per repository)
        let table: [(Merged, Want<'_>); 4] = [
            (vec![], vec![]),
            (vec![m("A", &["api"])], vec![("api", vec!["A"])]),
            (
                vec![m("A", &["api"]), m("B", &["web"]), m("C", &["web", "api"])],
                vec![("api", vec!["A", "C"]), ("web", vec!["B", "C"])],
            ),
            // A task naming none (a workspace of one) is in every repository.
            (
                vec![m("X", &[])],
                vec![("api", vec!["X"]), ("web", vec!["X"])],
            ),
        ];
        for (merged, want) in table {
            let got = merged_per_repository(&ws, &merged);
            let want: Vec<(String, Vec<String>)> = want
                .into_iter()
                .map(|(r, ts)| (r.to_string(), ts.into_iter().map(String::from).collect()))
                .collect();
            assert_eq!(got, want, "{merged:?}");
        }
    }
}
