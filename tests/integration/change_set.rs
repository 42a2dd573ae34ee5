//! The delivery of a change set (issue 51 layer 5): two repositories of a workspace, each
//! with a bare `origin` on disk and its integration branch prepared with git (as a fleet over
//! the workspace leaves it), the fake GitHub on loopback as both forges (`o/api`, `o/web`).
//! `hank deliver --change-set BRANCH` starts the set the way the fleet does at its end;
//! `hank deliver` resumes it.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::deliver::at_fake_github;
use crate::deliver_loop::green_check;
use crate::fake_github::FakeGitHub;
use crate::support::{Project, git, stderr};

const PLAN: &str = "# Plan\n\n## Add the endpoint (repos: api)\n- [ ] route\n\n\
                    ## Use it in the UI (repos: web; after: Add the endpoint)\n- [ ] call it\n";

/// web first in the file: the set still opens api first (the plan's order).
const WORKSPACE: &str = "[repos.web]\npath = \"../web\"\nbase = \"main\"\nforge = \"o/web\"\n\n\
                         [repos.api]\npath = \"../api\"\nbase = \"main\"\nforge = \"o/api\"\n";

const INTO: &str = "hank/fleet";

/// The project with its workspace, and `api` and `web` beside it, each with `hank/fleet`
/// holding one commit of work (not pushed).
fn setup() -> (Project, PathBuf, PathBuf) {
    let p = crate::fleet::project(PLAN);
    let api = crate::workspace::repo(&p, "api");
    let web = crate::workspace::repo(&p, "web");
    std::fs::write(p.dir.join(".hank/workspace.toml"), WORKSPACE).unwrap();
    p.hankrc("CI_APPEAR_TIMEOUT=2s\nCI_TIMEOUT=20s\n");
    for (dir, file) in [(&api, "route.rs"), (&web, "call.js")] {
        work_on(dir, file, "1");
    }
    (p, api, web)
}

/// A commit of `file` (holding `text`) on the integration branch of `dir` (made from main
/// when it does not exist); the checkout stays on main.
fn work_on(dir: &Path, file: &str, text: &str) {
    if git(dir, &["branch", "--list", INTO]).is_empty() {
        git(dir, &["branch", INTO]);
    }
    git(dir, &["checkout", "-q", INTO]);
    std::fs::write(dir.join(file), format!("{text}\n")).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", &format!("work {text}")]);
    git(dir, &["checkout", "-q", "main"]);
}

fn deliver(p: &Project, gh: &FakeGitHub, args: &[&str]) -> Output {
    at_fake_github(p.cmd().arg("deliver").args(args), gh)
        .output()
        .expect("hank deliver")
}

/// The pull requests the fake holds: (repository, number, head, body).
fn pulls(gh: &FakeGitHub) -> Vec<(String, u64, String, String)> {
    gh.world
        .lock()
        .unwrap()
        .pulls
        .iter()
        .map(|p| {
            (
                p["base_repo"].as_str().unwrap().to_string(),
                p["number"].as_u64().unwrap(),
                p["head"]["ref"].as_str().unwrap().to_string(),
                p["body"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// How many pull requests were asked to be opened in `repo` (`owner/name`).
fn opens_in(gh: &FakeGitHub, repo: &str) -> usize {
    gh.requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path == format!("/repos/{repo}/pulls"))
        .count()
}

fn set_of(p: &Project) -> Value {
    p.read_json(".hank/change-set.json")
}

#[test]
fn a_change_set_opens_one_linked_pull_request_per_repository_in_order_and_is_delivered_green() {
    let (p, api, web) = setup();
    let gh = FakeGitHub::start();
    gh.set(|w| w.check_runs.push(green_check()));
    let o = deliver(&p, &gh, &["--change-set", INTO]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let prs = pulls(&gh);
    let order: Vec<(&str, u64, &str)> = prs
        .iter()
        .map(|(r, n, h, _)| (r.as_str(), *n, h.as_str()))
        .collect();
    assert_eq!(order, [("o/api", 1, INTO), ("o/web", 2, INTO)]);
    // Each body links the other by its number, and carries its own task's records.
    assert!(prs[0].3.contains("o/web#2"), "{}", prs[0].3);
    assert!(prs[1].3.contains("o/api#1"), "{}", prs[1].3);
    assert!(prs[0].3.contains("Add the endpoint") || prs[0].3.contains("hank fleet"));
    // Each repository's branch is on its own remote, at the commit whose checks were read.
    let asked = gh.world.lock().unwrap().commits_asked.clone();
    for dir in [&api, &web] {
        let bare = dir.with_extension("git");
        let sha = git(&bare, &["rev-parse", INTO]);
        assert_eq!(sha, git(dir, &["rev-parse", INTO]));
        assert!(asked.contains(&sha), "{asked:?}");
    }
    let set = set_of(&p);
    assert_eq!(set["state"], "delivered");
    assert_eq!(set["exit_reason"], "delivered");
    assert_eq!(set["repos"][0]["name"], "api");
    assert_eq!(set["repos"][1]["tasks"][0], "Use it in the UI");
    assert!(err.contains("the change set is delivered"), "{err}");
    // Delivered: `hank deliver` has no set to resume.
    assert!(!err.contains("resuming"), "{err}");
}

#[test]
fn a_forge_failure_stops_the_set_naming_the_repository_and_hank_deliver_resumes_it() {
    let (p, _api, web) = setup();
    let gh = FakeGitHub::start();
    gh.set(|w| {
        w.check_runs.push(green_check());
        w.refuse_pulls = 1;
        w.refuse_pulls_of = Some("o/web".into());
    });
    let o = deliver(&p, &gh, &["--change-set", INTO]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("stopped at opening the pull request of web"),
        "{err}"
    );
    assert!(err.contains("`hank deliver` resumes"), "{err}");
    let set = set_of(&p);
    assert_eq!(set["state"], "stopped");
    assert_eq!(set["exit_reason"], "forge_failed");
    assert_eq!(set["repos"][0]["pr_number"], 1);
    assert_eq!((opens_in(&gh, "o/api"), opens_in(&gh, "o/web")), (1, 1));
    let pushed = git(&web.with_extension("git"), &["rev-parse", INTO]);

    let o = deliver(&p, &gh, &["--json"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("resuming the change set of hank/fleet"),
        "{err}"
    );
    // `--json`: the set's record on stdout.
    let shown: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(shown["state"], "delivered");
    assert_eq!(shown["repos"][1]["pr_ref"], "o/web#2");
    // api's pull request was not opened again; web's was; api's body now links web's.
    assert_eq!((opens_in(&gh, "o/api"), opens_in(&gh, "o/web")), (1, 2));
    let prs = pulls(&gh);
    assert_eq!(prs.len(), 2, "{prs:?}");
    assert!(prs[0].3.contains("o/web#2"), "{}", prs[0].3);
    assert!(prs[1].3.contains("o/api#1"), "{}", prs[1].3);
    // Nothing pushed again: web's remote branch is where it was.
    assert_eq!(
        git(&web.with_extension("git"), &["rev-parse", INTO]),
        pushed
    );
    assert_eq!(set_of(&p)["state"], "delivered");
}

#[test]
fn a_red_check_in_one_repository_is_not_delivered_and_names_it_with_its_findings() {
    let (p, _api, web) = setup();
    let gh = FakeGitHub::start();
    // api's commit is asked about first (green), web's second (red), a fix third (green).
    gh.set(|w| {
        w.check_runs_per_commit = vec![
            vec![green_check()],
            vec![serde_json::json!({
                "id": 12, "name": "test (ubuntu)", "status": "completed", "conclusion": "failure",
                "output": {"title": "1 test failed", "summary": "call_test failed",
                           "text": "assertion failed at call.js:3"}
            })],
            vec![green_check()],
        ];
    });
    let o = deliver(&p, &gh, &["--change-set", INTO]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("the change set is not delivered"), "{err}");
    assert!(
        err.contains("web: o/web#2") && err.contains("test (ubuntu)"),
        "{err}"
    );
    assert!(err.contains("findings for Use it in the UI"), "{err}");
    let set = set_of(&p);
    assert_eq!(set["state"], "red");
    assert_eq!(set["exit_reason"], "ci_failed");
    assert_eq!(set["repos"][0]["checks"], "green");
    assert_eq!(set["repos"][1]["checks"], "failed");
    let findings = set["repos"][1]["findings"].as_str().unwrap();
    assert!(findings.contains("test (ubuntu)"), "{findings}");

    // The fix lands on web's branch: `hank deliver` pushes web again (api not), waits for
    // web's new commit only, and the set is delivered.
    work_on(&web, "call.js", "2");
    let o = deliver(&p, &gh, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(
        git(&web.with_extension("git"), &["rev-parse", INTO]),
        git(&web, &["rev-parse", INTO])
    );
    assert!(err.contains("web: pushed"), "{err}");
    assert!(!err.contains("api: pushed"), "{err}");
    assert_eq!(pulls(&gh).len(), 2, "no pull request opened again");
    assert_eq!(gh.world.lock().unwrap().commits_asked.len(), 3);
    assert_eq!(set_of(&p)["state"], "delivered");
}

/// The fleet's hook: a workspace of two repositories whose tasks change only the project's
/// own (`app`, `path = "."`: a fleet runs there today) delivers its change set at its end —
/// one pull request, of `app`'s integration branch, its body the set's line and its tasks'
/// records; the untouched `lib` gets none. A forge failure stops it; `hank fleet` again
/// finishes it from its record. Then `--deliver branch` is refused there.
#[test]
fn a_fleet_over_a_workspace_delivers_its_change_set_at_its_end() {
    let p = Project::new(&[]);
    std::fs::write(
        p.dir.join(".hank/fix_plan.md"),
        "# Fix plan\n\n## Alpha (repos: app)\n- [ ] a1\n\n## Beta (repos: app; after: Alpha)\n- [ ] b1\n",
    )
    .unwrap();
    p.fake(
        "effect.sh",
        "sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\nn=$(basename \"$PWD\"); echo \"$n\" >> \"$n.txt\"\n",
    );
    let lib = crate::workspace::repo(&p, "lib");
    std::fs::write(
        p.dir.join(".hank/workspace.toml"),
        "[repos.app]\npath = \".\"\nforge = \"o/app\"\n\n[repos.lib]\npath = \"../lib\"\nforge = \"o/lib\"\n",
    )
    .unwrap();
    let remote = p.git_pushed_to_origin();
    let gh = FakeGitHub::start();
    gh.set(|w| {
        w.check_runs.push(green_check());
        w.refuse_pulls = 1;
        w.refuse_pulls_of = Some("o/app".into());
    });
    let fleet = || {
        at_fake_github(p.cmd().args(["fleet", "--deliver", "pr"]), &gh)
            .output()
            .expect("hank fleet")
    };
    // The forge refuses app's pull request: the fleet stops naming the step.
    let o = fleet();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("hank: fleet: the change set stopped at opening the pull request of app"),
        "{err}"
    );
    let calls = crate::fleet::calls(&p);
    // `hank fleet` again finishes the set from its record: no task runs again.
    let o = fleet();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("finishing its change set"), "{err}");
    assert_eq!(crate::fleet::calls(&p), calls, "no task ran again");
    let prs = pulls(&gh);
    assert_eq!(prs.len(), 1, "{prs:?}");
    let (repo, number, head, body) = &prs[0];
    assert_eq!((repo.as_str(), *number, head.as_str()), ("o/app", 1, INTO));
    assert!(
        body.contains("Part of a change across app (this pull request)"),
        "{body}"
    );
    assert!(body.contains("| Alpha | merged |"), "{body}");
    assert!(err.contains("the change set is delivered"), "{err}");
    let sha = git(&remote, &["rev-parse", INTO]);
    assert_eq!(gh.world.lock().unwrap().commits_asked, vec![sha]);
    assert_eq!(set_of(&p)["state"], "delivered");
    assert_eq!(git(&lib, &["branch", "--list", "hank/*"]), "");
    // Finished: the next step is the set's pull request.
    let o = fleet();
    let err = stderr(&o);
    assert!(
        err.contains(
            "merge the change set's pull requests, in this order: https://github.com/o/app/pull/1"
        ),
        "{err}"
    );

    std::fs::remove_file(p.dir.join(".hank/fleet.json")).unwrap();
    let o = at_fake_github(p.cmd().args(["fleet", "--deliver", "branch"]), &gh)
        .output()
        .expect("hank fleet");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("in a workspace of several repositories"),
        "{err}"
    );
}

/// A red check at the fleet's end: the fleet exits 2 naming the repository, its pull request
/// and the tasks the findings are for, and its next step is the fix and `hank deliver` (not
/// `--retry`: no task failed).
#[test]
fn a_fleet_whose_change_set_is_red_names_the_repository_and_the_next_step() {
    let p = Project::new(&[]);
    std::fs::write(
        p.dir.join(".hank/fix_plan.md"),
        "# Fix plan\n\n## Alpha (repos: app)\n- [ ] a1\n",
    )
    .unwrap();
    p.fake(
        "effect.sh",
        "sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\necho a > a.txt\n",
    );
    crate::workspace::repo(&p, "lib");
    std::fs::write(
        p.dir.join(".hank/workspace.toml"),
        "[repos.app]\npath = \".\"\nforge = \"o/app\"\n\n[repos.lib]\npath = \"../lib\"\nforge = \"o/lib\"\n",
    )
    .unwrap();
    p.git_pushed_to_origin();
    let gh = FakeGitHub::start();
    gh.set(|w| {
        w.check_runs.push(serde_json::json!({
            "id": 12, "name": "test", "status": "completed", "conclusion": "failure",
            "output": {"title": "1 test failed", "summary": "a_test failed", "text": "boom"}
        }));
    });
    let o = at_fake_github(p.cmd().args(["fleet", "--deliver", "pr"]), &gh)
        .output()
        .expect("hank fleet");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("hank: fleet: app: o/app#1 https://github.com/o/app/pull/1 failed: test; findings for Alpha"),
        "{err}"
    );
    assert!(err.contains("then `hank deliver` pushes it"), "{err}");
    assert!(!err.contains("--retry"), "{err}");
    let set = set_of(&p);
    assert_eq!(set["state"], "red");
    assert!(
        set["repos"][0]["findings"]
            .as_str()
            .unwrap()
            .contains("boom")
    );
}

/// The "done means", end to end: a fleet of two agents across `api` and `web` (three
/// tasks, one in both; the fleet's integration branch is `hank/fleet`, it has no `--into`),
/// each with a bare `origin` on disk and the fake forge. Each
/// repository's integration branch holds exactly its tasks' work; the forge refuses web's
/// pull request once, so the set stops naming web; `hank deliver` resumes it to delivered,
/// api's pull request opened once, both bodies linking the other by number.
/// Not covered here: a red check fed back to its task (the fix round is not built yet; a red
/// set is covered by `a_red_check_in_one_repository_is_not_delivered_and_names_it_with_its_findings`).
#[test]
fn a_fleet_across_two_repositories_delivers_their_linked_change_set_end_to_end() {
    use crate::workspace::{ACROSS, ACROSS_PLAN, files_on};
    let p = crate::fleet::project_doing(ACROSS_PLAN, ACROSS);
    let api = crate::workspace::repo(&p, "api");
    let web = crate::workspace::repo(&p, "web");
    std::fs::write(p.dir.join(".hank/workspace.toml"), WORKSPACE).unwrap();
    p.hankrc("CI_APPEAR_TIMEOUT=2s\nCI_TIMEOUT=20s\n");
    git(&p.dir, &["add", "-A"]);
    git(&p.dir, &["commit", "-q", "-m", "workspace"]);
    let gh = FakeGitHub::start();
    gh.set(|w| {
        w.check_runs.push(green_check());
        w.refuse_pulls = 1;
        w.refuse_pulls_of = Some("o/web".into());
    });
    let o = at_fake_github(
        p.cmd().args(["fleet", "--agents", "2", "--deliver", "pr"]),
        &gh,
    )
    .output()
    .expect("hank fleet");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the change set stopped at opening the pull request of web"),
        "{err}"
    );
    let mut called = crate::fleet::calls(&p);
    called.sort();
    assert_eq!(
        called,
        ["add-the-endpoint", "both", "use-it-in-the-ui"],
        "{err}"
    );
    assert_eq!(
        files_on(&api, INTO),
        ["README", "add-the-endpoint.txt", "both.txt"]
    );
    assert_eq!(
        files_on(&web, INTO),
        ["README", "both.txt", "use-it-in-the-ui.txt"]
    );
    // Both branches pushed; api's pull request opened first.
    for dir in [&api, &web] {
        assert_eq!(
            git(&dir.with_extension("git"), &["rev-parse", INTO]),
            git(dir, &["rev-parse", INTO])
        );
    }
    assert_eq!((opens_in(&gh, "o/api"), opens_in(&gh, "o/web")), (1, 1));

    let o = deliver(&p, &gh, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!((opens_in(&gh, "o/api"), opens_in(&gh, "o/web")), (1, 2));
    let prs = pulls(&gh);
    assert_eq!(prs.len(), 2, "{prs:?}");
    assert_eq!((prs[0].0.as_str(), prs[0].1), ("o/api", 1));
    assert_eq!((prs[1].0.as_str(), prs[1].1), ("o/web", 2));
    assert!(prs[0].3.contains("o/web#2"), "{}", prs[0].3);
    assert!(prs[1].3.contains("o/api#1"), "{}", prs[1].3);
    let set = set_of(&p);
    assert_eq!(set["state"], "delivered");
    assert_eq!(set["repos"][0]["pr_ref"], "o/api#1");
    assert_eq!(set["repos"][1]["pr_ref"], "o/web#2");
}
