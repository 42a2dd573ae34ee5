//! Workspaces (issue 51): `.hank/workspace.toml` naming several repositories, plan sections
//! naming the ones they change (`(repos: …)`), every unfit repository refused by name before
//! any task starts, `hank doctor`'s line per repository, `hank setup --repo`.

use std::path::{Path, PathBuf};

use crate::fleet::{calls, project};
use crate::support::{Project, assert_contains, exits, git, stdout};

const PLAN: &str = "# Plan\n\n## Add the endpoint (repos: api)\n- [ ] route\n\n\
                    ## Use it in the UI (repos: web; after: Add the endpoint)\n- [ ] call it\n";

/// A repository `name` beside the project (branch `main`, one commit) with a bare `origin`
/// beside it, pushed; its checkout.
pub(crate) fn repo(p: &Project, name: &str) -> PathBuf {
    let root = p.dir.parent().unwrap();
    let dir = root.join(name);
    let bare = root.join(format!("{name}.git"));
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README"), format!("{name}\n")).unwrap();
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "init"]);
    git(
        root,
        &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
    );
    git(&dir, &["remote", "add", "origin", bare.to_str().unwrap()]);
    git(&dir, &["push", "-q", "origin", "main"]);
    dir
}

/// The fleet project with `plan`, `workspace` as its committed `.hank/workspace.toml`, and the
/// repositories `api` and `web` beside it.
fn workspace_project(plan: &str, workspace: &str) -> (Project, PathBuf, PathBuf) {
    let p = project(plan);
    let api = repo(&p, "api");
    let web = repo(&p, "web");
    std::fs::write(p.dir.join(".hank/workspace.toml"), workspace).unwrap();
    git(&p.dir, &["add", "-A"]);
    git(&p.dir, &["commit", "-q", "-m", "workspace"]);
    (p, api, web)
}

const TWO: &str = "[repos.api]\npath = \"../api\"\nbase = \"main\"\n\n[repos.web]\npath = \"../web\"\nbase = \"main\"\n";

/// Nothing started: no agent call, no fleet file, no `hank/` branch in any repository.
fn assert_nothing_started(p: &Project, repos: &[&Path]) {
    assert!(calls(p).is_empty());
    assert!(!p.dir.join(".hank/fleet.json").exists());
    for dir in std::iter::once(p.dir.as_path()).chain(repos.iter().copied()) {
        assert_eq!(git(dir, &["branch", "--list", "hank/*"]), "", "{dir:?}");
    }
}

#[test]
fn unfit_repositories_are_refused_by_name_before_any_task_starts() {
    let (p, api, web) = workspace_project(PLAN, TWO);
    // Dirty, and on the wrong branch: both named in one refusal.
    std::fs::write(api.join("scratch.txt"), "mine\n").unwrap();
    git(&web, &["switch", "-q", "-c", "dev"]);
    let err = exits(&p.run(&["fleet"]), 1);
    assert_contains(&err, "no task started");
    assert_contains(&err, "repository \"api\"");
    assert_contains(&err, "uncommitted changes (scratch.txt)");
    assert_contains(&err, "repository \"web\"");
    assert_contains(&err, "is on branch \"dev\", not its base \"main\"");
    assert_nothing_started(&p, &[&api, &web]);
    // Nothing in any repository changed: the user's file is where it was, web still on dev.
    assert_eq!(
        std::fs::read_to_string(api.join("scratch.txt")).unwrap(),
        "mine\n"
    );
    assert_eq!(git(&web, &["branch", "--show-current"]).trim(), "dev");
    // A dry run refuses the same way.
    let err = exits(&p.run(&["fleet", "--dry-run"]), 1);
    assert_contains(&err, "repository \"api\"");

    // Missing, and without an origin.
    std::fs::remove_file(api.join("scratch.txt")).unwrap();
    git(&web, &["switch", "-q", "main"]);
    git(&web, &["remote", "remove", "origin"]);
    std::fs::rename(&api, api.with_file_name("api-moved")).unwrap();
    let err = exits(&p.run(&["fleet"]), 1);
    assert_contains(&err, "repository \"api\"");
    assert_contains(&err, "is missing");
    assert_contains(&err, "repository \"web\"");
    assert_contains(&err, "no `origin` remote");
    assert_nothing_started(&p, &[&web]);
}

#[test]
fn sections_must_name_known_repositories_in_a_workspace_of_several() {
    for (plan, want) in [
        (
            "# Plan\n## Add the endpoint\n- [ ] route\n",
            "section \"Add the endpoint\" does not say which repositories it changes",
        ),
        (
            "# Plan\n## Add the endpoint (repos: db)\n- [ ] route\n",
            "section \"Add the endpoint\" names the repository \"db\"",
        ),
        (
            "# Plan\n## A (repos: api; repos: web)\n- [ ] x\n",
            "`repos:` twice",
        ),
    ] {
        let (p, api, web) = workspace_project(plan, TWO);
        let err = exits(&p.run(&["fleet"]), 1);
        assert_contains(&err, want);
        assert_contains(&err, "fix_plan.md");
        assert_nothing_started(&p, &[&api, &web]);
    }
    // Without a workspace file, `repos:` has nothing to name.
    let p = project(PLAN);
    let err = exits(&p.run(&["fleet"]), 1);
    assert_contains(&err, "no .hank/workspace.toml");
    assert_nothing_started(&p, &[]);
}

#[test]
fn a_bad_workspace_file_is_refused_naming_the_file_and_key() {
    for (file, want) in [
        (
            "[repos.api]\npath = \"../api\"\nbrnach = \"main\"\n",
            "unknown field `brnach`",
        ),
        ("[repos.api]\nbase = \"main\"\n", "missing field `path`"),
        ("[repos.\"a/b\"]\npath = \"../api\"\n", "[repos.a/b]"),
        (
            "[repos.api]\npath = \"../api\"\nbase = \"a..b\"\n",
            "repos.api.base",
        ),
    ] {
        let (p, api, web) = workspace_project(PLAN, file);
        let err = exits(&p.run(&["fleet"]), 1);
        assert_contains(&err, ".hank/workspace.toml");
        assert_contains(&err, want);
        assert_nothing_started(&p, &[&api, &web]);
    }
}

#[test]
fn doctor_shows_each_repository_of_the_workspace() {
    let (p, api, web) = workspace_project(PLAN, TWO);
    std::fs::write(web.join("scratch.txt"), "x\n").unwrap();
    let o = p.run(&["doctor"]);
    let text = stdout(&o);
    assert_contains(&text, "workspace 2 repositories: api, web");
    let api_line = text
        .lines()
        .find(|l| l.contains(" repo ") && l.contains("api (../api)"))
        .unwrap_or_else(|| panic!("no api line in:\n{text}"));
    assert!(api_line.starts_with("ok"), "{api_line}");
    assert_contains(api_line, "clean, on main, origin");
    assert_contains(api_line, "answers and would take a push (dry run)");
    let web_line = text
        .lines()
        .find(|l| l.contains("repository \"web\""))
        .unwrap_or_else(|| panic!("no web line in:\n{text}"));
    assert!(web_line.starts_with("FAIL"), "{web_line}");
    assert_contains(web_line, "uncommitted changes (scratch.txt)");
    assert_eq!(o.status.code(), Some(1));
    // An origin that does not answer.
    std::fs::remove_file(web.join("scratch.txt")).unwrap();
    std::fs::remove_dir_all(api.with_file_name("api.git")).unwrap();
    let text = stdout(&p.run(&["doctor"]));
    let api_line = text
        .lines()
        .find(|l| l.contains("api (../api)"))
        .unwrap_or_else(|| panic!("no api line in:\n{text}"));
    assert!(
        api_line.starts_with("FAIL") && api_line.contains("does not answer"),
        "{api_line}"
    );
    assert_eq!(git(&api, &["branch", "--list", "hank/*"]), "");
}

#[test]
fn setup_and_enable_write_the_workspace_file_from_repo_flags() {
    let p = Project::new(&[]);
    let parent = p.dir.parent().unwrap().to_path_buf();
    let o = p
        .cmd()
        .current_dir(&parent)
        .args([
            "setup",
            "multi",
            "--repo",
            "api=../api@main",
            "--repo",
            "web=../web",
        ])
        .output()
        .unwrap();
    exits(&o, 0);
    let dir = parent.join("multi");
    let text = std::fs::read_to_string(dir.join(".hank/workspace.toml")).unwrap();
    assert_contains(&text, "[repos.api]\npath = \"../api\"\nbase = \"main\"");
    assert_contains(&text, "[repos.web]\npath = \"../web\"");
    // In the first commit: the new project is clean.
    assert_eq!(git(&dir, &["status", "--porcelain"]), "");
    // A bad flag: refused, nothing made.
    let o = p
        .cmd()
        .current_dir(&parent)
        .args(["setup", "bad", "--repo", "api"])
        .output()
        .unwrap();
    assert_contains(&exits(&o, 1), "NAME=PATH");
    assert!(!parent.join("bad").exists());
    // `enable-ci --repair --repo` adds the file to an enabled project; an existing one is kept.
    let o = p
        .cmd()
        .args(["enable-ci", "--repair", "--repo", "db=../db"])
        .output()
        .unwrap();
    exits(&o, 0);
    let text = std::fs::read_to_string(p.dir.join(".hank/workspace.toml")).unwrap();
    assert_contains(&text, "[repos.db]");
    let o = p
        .cmd()
        .args(["enable-ci", "--repair", "--repo", "other=../other"])
        .output()
        .unwrap();
    exits(&o, 0);
    assert_eq!(
        std::fs::read_to_string(p.dir.join(".hank/workspace.toml")).unwrap(),
        text
    );
}

#[test]
fn a_dry_run_shows_each_task_s_repositories_and_watch_and_ci_jobs_refuse_other_repositories() {
    let (p, api, web) = workspace_project(PLAN, TWO);
    let o = p.run(&["fleet", "--dry-run"]);
    let text = stdout(&o);
    exits(&o, 0);
    assert_contains(
        &text,
        "Add the endpoint — branch hank/add-the-endpoint in api, 1 open item(s)",
    );
    assert_contains(
        &text,
        "Use it in the UI (after: Add the endpoint) — branch hank/use-it-in-the-ui in web, 1 open item(s)",
    );
    // `hank watch` delivers each issue as a change set: `--deliver branch` is refused.
    let err = exits(&p.run(&["watch", "--once", "--deliver", "branch"]), 1);
    assert_contains(&err, "in a workspace of several repositories");
    // The fleet as CI jobs too: a job runs in the checkout alone.
    let err = exits(&p.run(&["fleet", "plan", "--remote", "none"]), 1);
    assert_contains(&err, "only in the project's own repository");
    assert_nothing_started(&p, &[&api, &web]);
}

#[test]
fn a_workspace_of_the_project_itself_runs_the_fleet_as_before() {
    let p = project("# Plan\n\n## One (repos: self)\n- [ ] a\n");
    std::fs::write(
        p.dir.join(".hank/workspace.toml"),
        "[repos.self]\npath = \".\"\n",
    )
    .unwrap();
    git(&p.dir, &["add", "-A"]);
    git(&p.dir, &["commit", "-q", "-m", "workspace"]);
    // Its branches go to an origin: the refusal says so first.
    let err = exits(&p.run(&["fleet"]), 1);
    assert_contains(&err, "repository \"self\"");
    assert_contains(&err, "no `origin` remote");
    let bare = p.home.join("self.git");
    git(&p.home, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    git(&p.dir, &["remote", "add", "origin", bare.to_str().unwrap()]);
    let err = exits(&p.run(&["fleet"]), 0);
    assert_eq!(calls(&p), ["one"], "{err}");
    assert_eq!(
        crate::fleet::fleet_json(&p)["tasks"][0]["state"],
        "merged",
        "{err}"
    );
}

#[test]
fn with_delivery_doctor_asks_each_repository_s_forge_for_the_login_and_push() {
    use crate::fake_github::FakeGitHub;
    let (p, _api, _web) = workspace_project(
        PLAN,
        "[repos.api]\npath = \"../api\"\nforge = \"o/r\"\n\n[repos.web]\npath = \"../web\"\nforge = \"o/web\"\n",
    );
    p.hankrc("DELIVER=pr\n");
    let gh = FakeGitHub::start();
    let o = crate::deliver::at_fake_github(p.cmd().args(["doctor"]), &gh)
        .output()
        .unwrap();
    let text = stdout(&o);
    let line = |what: &str| {
        text.lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what:?} in:\n{text}"))
            .to_string()
    };
    let api = line("api: ");
    assert!(api.starts_with("ok"), "{api}");
    assert_contains(&api, "as hank-bot for o/r, may push");
    // Its own `forge` key, not GH_REPO: the fake has no o/web.
    assert_contains(&line("web: "), "o/web");
    gh.set(|w| w.can_push = false);
    let o = crate::deliver::at_fake_github(p.cmd().args(["doctor"]), &gh)
        .output()
        .unwrap();
    let text = stdout(&o);
    let api = text
        .lines()
        .find(|l| l.contains("api: "))
        .unwrap_or_default();
    assert!(
        api.starts_with("FAIL") && api.contains("may not push to o/r"),
        "{text}"
    );
}

/// The stand-in agent of a task across repositories: ticks the first open item, writes
/// `<slug>.txt` in each repository folder its plan names (and `fix.txt` in each once a red
/// check was handed back), notes the call.
pub(crate) const ACROSS: &str = r#"sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
n=$(basename "$PWD")
for r in $(sed -n 's/^Repositories[^:]*: //p' .hank/fix_plan.md | tr -d ',/'); do
  echo "$n" > "$r/$n.txt"
  if grep -q 'VERIFY_COMMAND failed' .hank/fix_plan.md; then echo fixed > "$r/fix.txt"; fi
done
echo "$n" >> "$FAKE_CLAUDE_DIR/log"
"#;

pub(crate) const ACROSS_PLAN: &str = "# Plan\n\n## Add the endpoint (repos: api)\n- [ ] route\n\n\
                           ## Use it in the UI (repos: web; after: Add the endpoint)\n- [ ] call it\n\n\
                           ## Both (repos: api, web)\n- [ ] both\n";

/// The files of `branch` in the repository at `dir`.
pub(crate) fn files_on(dir: &Path, branch: &str) -> Vec<String> {
    git(dir, &["ls-tree", "-r", "--name-only", branch])
        .lines()
        .map(ToString::to_string)
        .collect()
}

/// A user's checkout as the fleet must leave it: on `main`, clean, no worktree but itself.
fn assert_untouched(dir: &Path) {
    assert_eq!(git(dir, &["branch", "--show-current"]).trim(), "main");
    assert_eq!(
        git(dir, &["status", "--porcelain", "--untracked-files=all"]),
        "",
        "{dir:?}"
    );
    assert_eq!(
        git(dir, &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "{dir:?}"
    );
}

#[test]
fn a_fleet_across_two_repositories_merges_each_task_into_each_repository_it_names() {
    let (p, api, web) = workspace_project(ACROSS_PLAN, TWO);
    p.fake("effect.sh", ACROSS);
    let err = exits(&p.run(&["fleet", "--agents", "2"]), 0);
    let mut called = calls(&p);
    called.sort();
    assert_eq!(
        called,
        ["add-the-endpoint", "both", "use-it-in-the-ui"],
        "{err}"
    );
    assert_eq!(
        files_on(&api, "hank/fleet"),
        ["README", "add-the-endpoint.txt", "both.txt"],
        "{err}"
    );
    assert_eq!(
        files_on(&web, "hank/fleet"),
        ["README", "both.txt", "use-it-in-the-ui.txt"],
        "{err}"
    );
    // Each task's branch in each repository it named, and none elsewhere.
    assert_eq!(
        git(
            &api,
            &["branch", "--list", "hank/*", "--format=%(refname:short)"]
        ),
        "hank/add-the-endpoint\nhank/both\nhank/fleet"
    );
    assert_eq!(
        git(
            &web,
            &["branch", "--list", "hank/*", "--format=%(refname:short)"]
        ),
        "hank/both\nhank/fleet\nhank/use-it-in-the-ui"
    );
    // The project's integration branch has the plan ticked, no repository's file.
    let plan = git(&p.dir, &["show", "hank/fleet:.hank/fix_plan.md"]);
    assert_eq!(plan.matches("- [x]").count(), 3, "{plan}");
    assert!(
        !files_on(&p.dir, "hank/fleet")
            .iter()
            .any(|f| f.ends_with(".txt"))
    );
    for dir in [&api, &web] {
        assert_untouched(dir);
    }
    // The fleet's record: each task with its repositories, merged.
    let status = crate::fleet::fleet_status(&p);
    let tasks = status["tasks"].as_array().unwrap();
    for (name, repos) in [
        ("Add the endpoint", vec!["api"]),
        ("Use it in the UI", vec!["web"]),
        ("Both", vec!["api", "web"]),
    ] {
        let t = tasks.iter().find(|t| t["name"] == name).unwrap();
        assert_eq!(t["state"], "merged", "{name}: {t}");
        assert_eq!(t["repos"], serde_json::json!(repos), "{name}");
    }
    // What delivery reads: each repository's integration branch and the tasks in it.
    let ints = hank::fleet::repos::integration_branches(&p.dir).unwrap();
    let seen: Vec<(&str, &str, Vec<String>, bool)> = ints
        .iter()
        .map(|i| {
            let checkout = if i.repo == "api" { &api } else { &web };
            (
                i.repo.as_str(),
                i.branch.as_str(),
                i.tasks.clone(),
                i.checkout == checkout.canonicalize().unwrap() && i.base.as_deref() == Some("main"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "api",
                "hank/fleet",
                vec!["Add the endpoint".to_string(), "Both".to_string()],
                true
            ),
            (
                "web",
                "hank/fleet",
                vec!["Use it in the UI".to_string(), "Both".to_string()],
                true
            ),
        ]
    );
    let text = stdout(&p.run(&["fleet", "status"]));
    assert_contains(&text, "repositories: api, web");
    assert_contains(
        &stdout(&p.run(&["monitor", "--once"])),
        "hank/both in api, web",
    );
    // Each task's events carry its repositories.
    let events = p.events_of("fleet_task");
    assert!(
        events
            .iter()
            .any(|e| e["task"] == "Both" && e["repos"] == serde_json::json!(["api", "web"])),
        "{events:?}"
    );
}

#[test]
fn a_red_check_of_one_repository_goes_back_to_the_task_and_its_second_attempt_merges() {
    let (p, api, web) = workspace_project(ACROSS_PLAN, TWO);
    p.fake("effect.sh", ACROSS);
    // web's own check: its merge result must hold fix.txt.
    std::fs::write(web.join(".hankrc"), "VERIFY_COMMAND=\"test -f fix.txt\"\n").unwrap();
    git(&web, &["add", "-A"]);
    git(&web, &["commit", "-q", "-m", "check"]);
    let err = exits(&p.run(&["fleet", "--agents", "1"]), 0);
    let t = crate::fleet::fleet_json(&p);
    let tasks = t["tasks"].as_array().unwrap();
    let ui = tasks
        .iter()
        .find(|t| t["name"] == "Use it in the UI")
        .unwrap();
    assert_eq!(ui["state"], "merged", "{err}");
    assert_eq!(ui["merge_attempts"], 1, "{err}");
    // Handed back once per task that changed web: each ran twice.
    let called = calls(&p);
    assert_eq!(called.len(), 5, "{called:?} {err}");
    assert!(files_on(&web, "hank/fleet").contains(&"fix.txt".to_string()));
    // All or nothing: Both's first attempt, red in web, moved api's branch no more than web's.
    for dir in [&api, &web] {
        let log = git(dir, &["log", "--format=%s", "hank/fleet"]);
        assert_eq!(
            log.matches("hank fleet: merge task Both").count(),
            1,
            "{log}"
        );
    }
    // api has no check: its merges went through on the first attempt, its files exact.
    assert_eq!(
        files_on(&api, "hank/fleet"),
        ["README", "add-the-endpoint.txt", "both.txt", "fix.txt"],
        "{err}"
    );
    for dir in [&api, &web] {
        assert_untouched(dir);
    }
}

#[test]
fn a_sandboxed_task_writes_only_the_repositories_it_names() {
    if !hank::sandbox::available() {
        eprintln!("skipped: this kernel has no Landlock ABI 4");
        return;
    }
    let (p, api, web) = workspace_project("# Plan\n\n## Api only (repos: api)\n- [ ] route\n", TWO);
    // The agent works in `api/` (a commit of its own there), then tries the repositories it
    // was not given: web's checkout and its git, api's own checkout and its refs.
    let attempts = [
        web.join("stolen.txt"),
        web.join(".git/refs/heads/evil"),
        api.join("direct.txt"),
        api.join(".git/refs/heads/evil"),
    ];
    let mut work = String::from(
        "sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\n\
         echo route > api/route.txt\n\
         git -C api add route.txt && git -C api commit -qm 'agent work' && echo committed >> \"$FAKE_CLAUDE_DIR/log\"\n",
    );
    for a in &attempts {
        work.push_str(&format!(
            "echo x > '{}' 2>/dev/null && echo wrote >> \"$FAKE_CLAUDE_DIR/log\"\n",
            a.display()
        ));
    }
    work.push_str("echo api-only >> \"$FAKE_CLAUDE_DIR/log\"\ntrue\n");
    p.fake("effect.sh", &work);
    let o = p
        .cmd()
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .args(["fleet"])
        .output()
        .unwrap();
    let err = exits(&o, 0);
    assert_eq!(calls(&p), ["committed", "api-only"], "{err}");
    for a in &attempts {
        assert!(!a.exists(), "{a:?} was written");
    }
    // Its work in api merged, its own commit among it; web untouched.
    assert!(files_on(&api, "hank/fleet").contains(&"route.txt".to_string()));
    assert_contains(
        &git(&api, &["log", "--format=%s", "hank/fleet"]),
        "agent work",
    );
    assert_eq!(git(&web, &["branch", "--list", "hank/*"]), "");
    for dir in [&api, &web] {
        assert_untouched(dir);
    }
}

#[test]
fn a_fleet_across_repositories_killed_with_its_workers_resumes_each_task_in_its_folder() {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let (p, api, web) = workspace_project(ACROSS_PLAN, TWO);
    p.fake("effect.sh", ACROSS);
    // The first two calls do their work, then hang until killed.
    p.fake("sleep-1", "60");
    p.fake("sleep-2", "60");
    let mut child = p.spawn(&["fleet", "--agents", "2"]);
    let running = crate::support::poll(std::time::Duration::from_secs(30), || {
        let v = crate::fleet::fleet_json(&p);
        let tasks: Vec<(i32, String)> = v["tasks"]
            .as_array()?
            .iter()
            .filter(|t| t["state"] == "running")
            .filter_map(|t| {
                Some((
                    i32::try_from(t["pid"].as_i64()?).ok()?,
                    t["worktree"].as_str()?.to_string(),
                ))
            })
            .collect();
        (tasks.len() == 2 && calls(&p).len() == 2).then_some(tasks)
    })
    .unwrap_or_else(|| panic!("{}", crate::fleet::fleet_json(&p)));
    // A crash of everything: the supervisor and each task's process group.
    crate::support::signal(&child, Signal::SIGKILL);
    let _ = child.wait();
    for (pid, _) in &running {
        let _ = killpg(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    // Each task's folder holds its repositories' worktrees with the killed run's work.
    let mut written = Vec::new();
    for (_, wt) in &running {
        let wt = PathBuf::from(wt);
        let slug = wt.file_name().unwrap().to_string_lossy().into_owned();
        for r in ["api", "web"] {
            let f = wt.join(r).join(format!("{slug}.txt"));
            if f.exists() {
                assert_eq!(
                    git(&wt.join(r), &["branch", "--show-current"]),
                    format!("hank/{slug}")
                );
                written.push(format!("{r}/{slug}.txt"));
            }
        }
    }
    assert!(!written.is_empty(), "{running:?}");
    let err = exits(&p.run(&["fleet", "--agents", "2"]), 0);
    assert_eq!(
        files_on(&api, "hank/fleet"),
        ["README", "add-the-endpoint.txt", "both.txt"],
        "{err}"
    );
    assert_eq!(
        files_on(&web, "hank/fleet"),
        ["README", "both.txt", "use-it-in-the-ui.txt"],
        "{err}"
    );
    let v = crate::fleet::fleet_json(&p);
    assert!(
        v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] == "merged"),
        "{v}"
    );
    for dir in [&api, &web] {
        assert_untouched(dir);
    }
}

#[test]
fn the_project_named_among_the_repositories_is_the_task_s_own_worktree() {
    let p =
        crate::fleet::project_doing("# Plan\n\n## Both (repos: self, api)\n- [ ] both\n", ACROSS);
    let api = repo(&p, "api");
    std::fs::write(
        p.dir.join(".hank/workspace.toml"),
        "[repos.self]\npath = \".\"\n\n[repos.api]\npath = \"../api\"\n",
    )
    .unwrap();
    git(&p.dir, &["add", "-A"]);
    git(&p.dir, &["commit", "-q", "-m", "workspace"]);
    let bare = p.home.join("self.git");
    git(&p.home, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    git(&p.dir, &["remote", "add", "origin", bare.to_str().unwrap()]);
    let err = exits(&p.run(&["fleet"]), 0);
    assert_eq!(calls(&p), ["both"], "{err}");
    // Only api is a folder of the task (its plan names only it); the project is the worktree.
    assert_eq!(
        files_on(&api, "hank/fleet"),
        ["README", "both.txt"],
        "{err}"
    );
    let plan = git(&p.dir, &["show", "hank/fleet:.hank/fix_plan.md"]);
    assert!(plan.contains("- [x] both"), "{plan}");
    assert!(
        !files_on(&p.dir, "hank/fleet")
            .iter()
            .any(|f| f.starts_with("api"))
    );
    assert_untouched(&api);
}

#[test]
fn a_conflict_in_one_repository_goes_back_to_the_task_named_by_its_path_there() {
    let (p, api, web) = workspace_project(
        "# Plan\n\n## A (repos: api)\n- [ ] a\n\n## B (repos: api)\n- [ ] b\n",
        TWO,
    );
    // Both tasks write api/shared.txt; the one handed back a conflict resolves it.
    p.fake(
        "effect.sh",
        r#"sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
n=$(basename "$PWD")
if grep -q 'conflicts in' .hank/fix_plan.md; then
  grep 'conflicts in' .hank/fix_plan.md >> "$FAKE_CLAUDE_DIR/conflicts"
  echo "resolved by $n" > api/shared.txt
else
  echo "$n" > api/shared.txt
fi
echo "$n" >> "$FAKE_CLAUDE_DIR/log"
"#,
    );
    let err = exits(&p.run(&["fleet", "--agents", "2"]), 0);
    let conflicts = std::fs::read_to_string(p.fake.join("conflicts")).unwrap_or_default();
    assert_contains(&conflicts, "conflicts in: api/shared.txt");
    let v = crate::fleet::fleet_json(&p);
    let tasks = v["tasks"].as_array().unwrap();
    assert!(tasks.iter().all(|t| t["state"] == "merged"), "{v} {err}");
    let again = tasks.iter().find(|t| t["merge_attempts"] == 1).unwrap();
    let slug = again["branch"]
        .as_str()
        .unwrap()
        .trim_start_matches("hank/");
    assert_eq!(
        git(&api, &["show", "hank/fleet:shared.txt"]),
        format!("resolved by {slug}")
    );
    assert_eq!(calls(&p).len(), 3, "{err}");
    assert_eq!(git(&web, &["branch", "--list", "hank/*"]), "");
    for dir in [&api, &web] {
        assert_untouched(dir);
    }
}

#[test]
fn loops_that_change_only_a_named_repository_count_as_progress() {
    let (p, api, _web) = workspace_project("# Plan\n\n## Slow (repos: api)\n- [ ] s\n", TWO);
    // Three loops change only api/ (past CB_NO_PROGRESS_THRESHOLD=3 if they did not count);
    // the fourth ticks the item.
    p.fake(
        "effect.sh",
        r#"echo "$(basename "$PWD")" >> "$FAKE_CLAUDE_DIR/log"
k=$(wc -l < "$FAKE_CLAUDE_DIR/log")
echo "step $k" > "api/step-$k.txt"
if [ "$k" -ge 4 ]; then sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md; fi
"#,
    );
    let err = exits(&p.run(&["fleet"]), 0);
    assert_eq!(calls(&p).len(), 4, "{err}");
    assert_eq!(
        crate::fleet::fleet_json(&p)["tasks"][0]["state"],
        "merged",
        "{err}"
    );
    assert_eq!(
        files_on(&api, "hank/fleet"),
        [
            "README",
            "step-1.txt",
            "step-2.txt",
            "step-3.txt",
            "step-4.txt"
        ]
    );
}

#[test]
fn conflict_markers_left_in_a_repository_are_handed_back_not_merged() {
    let (p, api, _web) = workspace_project(
        "# Plan\n\n## A (repos: api)\n- [ ] a\n\n## B (repos: api)\n- [ ] b\n",
        TWO,
    );
    // The task handed a conflict leaves it unresolved once (its markers committed by hank),
    // then resolves it when told of the markers.
    p.fake(
        "effect.sh",
        r#"sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
n=$(basename "$PWD")
if grep -q 'holds conflict markers' .hank/fix_plan.md; then
  grep 'holds conflict markers' .hank/fix_plan.md >> "$FAKE_CLAUDE_DIR/markers"
  echo "resolved by $n" > api/shared.txt
elif ! grep -q 'conflicts in' .hank/fix_plan.md; then
  echo "$n" > api/shared.txt
fi
echo "$n" >> "$FAKE_CLAUDE_DIR/log"
"#,
    );
    let o = p
        .cmd()
        .env("MAX_MERGE_ATTEMPTS", "3")
        .args(["fleet", "--agents", "2"])
        .output()
        .unwrap();
    let err = exits(&o, 0);
    let markers = std::fs::read_to_string(p.fake.join("markers")).unwrap_or_default();
    assert_contains(&markers, "conflict markers: api/shared.txt");
    let shared = git(&api, &["show", "hank/fleet:shared.txt"]);
    assert!(shared.starts_with("resolved by "), "{shared} {err}");
    let log = git(&api, &["log", "-p", "hank/fleet", "--", "shared.txt"]);
    assert!(
        !log.contains("+<<<<<<<"),
        "markers reached the integration branch: {log}"
    );
    assert_eq!(calls(&p).len(), 4, "{err}");
}

#[test]
fn a_repository_the_agent_commits_into_the_project_never_reaches_its_integration_branch() {
    let (p, api, _web) = workspace_project("# Plan\n\n## Sneaky (repos: api)\n- [ ] s\n", TWO);
    // The agent commits its api folder into the project's branch (a submodule).
    p.fake(
        "effect.sh",
        "sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\necho x > api/x.txt\n\
         git add -f api 2>/dev/null && git -c user.name=t -c user.email=t@t commit -qm sneak\n\
         echo sneaky >> \"$FAKE_CLAUDE_DIR/log\"\n",
    );
    let err = exits(&p.run(&["fleet"]), 0);
    assert_contains(
        &git(&p.dir, &["log", "--format=%s", "hank/sneaky"]),
        "sneak",
    );
    // The project's branch as merged holds no api (its folder was removed before hank's
    // commit); api's work is on api's own integration branch.
    assert_eq!(
        git(&p.dir, &["ls-tree", "hank/fleet", "--", "api"]),
        "",
        "{err}"
    );
    assert_eq!(files_on(&api, "hank/fleet"), ["README", "x.txt"], "{err}");
}

#[test]
fn a_repository_s_git_file_changed_by_the_agent_stops_the_task() {
    let (p, api, _web) =
        workspace_project("# Plan\n\n## Turn (repos: api)\n- [ ] t\n- [ ] u\n", TWO);
    // The agent points its api folder's git at the user's own repository.
    p.fake(
        "effect.sh",
        &format!(
            "sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\nprintf 'gitdir: {}\\n' > api/.git\necho turn >> \"$FAKE_CLAUDE_DIR/log\"\n",
            api.join(".git").display()
        ),
    );
    let o = p.run(&["fleet"]);
    let err = crate::support::stderr(&o);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert_eq!(calls(&p), ["turn"], "no call after the change: {err}");
    let t = &crate::fleet::fleet_json(&p)["tasks"][0];
    assert_eq!(t["state"], "failed", "{err}");
    assert_contains(t["message"].as_str().unwrap(), "api/.git");
    assert_eq!(
        git(
            &api,
            &["branch", "--list", "hank/fleet", "--format=%(objectname)"]
        ),
        git(&api, &["rev-parse", "main"]),
        "api's integration branch did not move"
    );
    assert_eq!(git(&api, &["branch", "--show-current"]), "main");
}

#[test]
fn a_task_that_changes_another_repository_s_configuration_is_not_merged_there() {
    let (p, api, web) = workspace_project(
        "# Plan\n\n## Rewire the check (repos: web)\n- [ ] w\n\n## Add the endpoint (repos: api)\n- [ ] a\n",
        TWO,
    );
    // web's own check, and the script it runs: what the next fleet reads from web's checkout.
    std::fs::write(web.join(".hankrc"), "VERIFY_COMMAND=\"sh check.sh\"\n").unwrap();
    std::fs::write(web.join("check.sh"), "exit 0\n").unwrap();
    git(&web, &["add", "-A"]);
    git(&web, &["commit", "-q", "-m", "check"]);
    p.fake(
        "effect.sh",
        r#"sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
if [ -d web ]; then
  printf 'VERIFY_COMMAND="touch %s/evil-ran"\n' "$FAKE_CLAUDE_DIR" > web/.hankrc
  echo 'touch "$FAKE_CLAUDE_DIR/evil-ran"' >> web/check.sh
  echo ui > web/ui.txt
fi
[ -d api ] && echo api > api/endpoint.txt
true
"#,
    );
    let o = p.run(&["fleet", "--agents", "1"]);
    let err = crate::support::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_contains(
        &err,
        "changed hank's configuration (web/.hankrc, web/check.sh)",
    );
    assert!(!p.fake.join("evil-ran").exists(), "{err}");
    let t = crate::fleet::fleet_json(&p);
    let states: Vec<(String, String)> = t["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().into(),
                t["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        states.contains(&("Rewire the check".into(), "failed".into())),
        "{states:?}"
    );
    assert!(
        states.contains(&("Add the endpoint".into(), "merged".into())),
        "{states:?}"
    );
    // Not on web's integration branch; kept on the task's branch there for the user to read.
    let rc = git(&web, &["show", "hank/fleet:.hankrc"]);
    assert!(!rc.contains("evil-ran"), "{rc}");
    assert!(git(&web, &["show", "hank/rewire-the-check:.hankrc"]).contains("evil-ran"));
    assert!(files_on(&api, "hank/fleet").contains(&"endpoint.txt".to_string()));
    for dir in [&api, &web] {
        assert_untouched(dir);
    }
}

#[test]
fn a_repository_whose_origin_takes_no_push_is_refused_before_a_change_set_fleet_starts() {
    let (p, api, web) = workspace_project(
        PLAN,
        "[repos.api]\npath = \"../api\"\nforge = \"o/api\"\n\n[repos.web]\npath = \"../web\"\nforge = \"o/web\"\n",
    );
    // web's origin is a folder that is no repository: nothing could ever be delivered there.
    let nowhere = web.with_file_name("not-a-remote");
    std::fs::create_dir_all(&nowhere).unwrap();
    git(
        &web,
        &["remote", "set-url", "origin", nowhere.to_str().unwrap()],
    );
    let gh = crate::fake_github::FakeGitHub::start();
    let o = crate::deliver::at_fake_github(p.cmd().args(["fleet", "--deliver", "pr"]), &gh)
        .output()
        .unwrap();
    let err = exits(&o, 1);
    assert_contains(&err, "no task started");
    assert_contains(&err, "repository \"web\"");
    assert_contains(&err, "does not take a push");
    assert!(!err.contains("repository \"api\""), "{err}");
    assert_nothing_started(&p, &[&api, &web]);
}
