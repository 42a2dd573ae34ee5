//! `hank watch`: labelled issues at the fake GitHub become fleet tasks, one claim each on a
//! bare `origin`, one pull request each that closes its issue, hank's comment and labels on
//! each issue; conditional requests answered 304 are not counted against the rate budget.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::deliver::{at_fake_github, pulls};
use crate::deliver_loop::green_check;
use crate::fake_github::FakeGitHub;
use crate::support::{Project, git, stderr};

/// Ticks the task's item and writes `<worktree name>.txt`; in issue 2's worktree, with
/// `LEAK` set, also a file holding an AWS key id (the delivery's scan refuses the push).
const WORK: &str = r#"sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
n=$(basename "$PWD"); echo "$n" >> "$n.txt"
case "$n" in issue-2-*) [ -e "$FAKE_CLAUDE_DIR/leak" ] && echo "key AKIAABCDEFGHIJKLMNOP" > leak.txt ;; esac
true
"#;

fn setup() -> (Project, PathBuf, FakeGitHub) {
    let p = Project::new(&[]);
    p.fake("effect.sh", WORK);
    let remote = p.git_pushed_to_origin();
    let gh = FakeGitHub::start();
    gh.set(|w| {
        w.check_runs.push(green_check());
        w.issue(1, "Add the alpha file", "Please add it.", &["hank"]);
        w.issue(
            2,
            "Beta work",
            "Two steps:\n- [ ] first step\n- [ ] second step\n",
            &["hank", "enhancement"],
        );
        w.issue(3, "Not for hank", "", &["bug"]);
    });
    (p, remote, gh)
}

/// `hank watch ARGS` in `dir` at the fake GitHub.
fn watch_in(p: &Project, dir: &Path, gh: &FakeGitHub, args: &[&str]) -> Command {
    let mut c = p.cmd();
    c.current_dir(dir).arg("watch").args(args);
    at_fake_github(&mut c, gh);
    c
}

fn watch(p: &Project, gh: &FakeGitHub, args: &[&str]) -> Output {
    watch_in(p, &p.dir, gh, args).output().expect("hank watch")
}

/// The heads and bodies of the pull requests opened.
fn prs(gh: &FakeGitHub) -> Vec<(String, String)> {
    pulls(gh)
        .iter()
        .map(|r| {
            let j = r.json();
            (
                j["head"].as_str().unwrap().to_string(),
                j["body"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn claim_refs(remote: &Path) -> Vec<String> {
    git(
        remote,
        &["for-each-ref", "--format=%(refname)", "refs/hank/claims/"],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// The shared rate budget's file of the fake's token.
fn budget(p: &Project) -> Value {
    let dir = p.home.join(".local/state/hank/tracker");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .expect("a rate budget file");
    serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap()
}

#[test]
fn two_labelled_issues_give_two_prs_that_close_them_and_nothing_twice() {
    let (p, remote, gh) = setup();
    let dry = watch(&p, &gh, &["--dry-run"]);
    let out = String::from_utf8_lossy(&dry.stdout).into_owned();
    assert_eq!(dry.status.code(), Some(0), "{}", stderr(&dry));
    assert!(
        out.contains("#1 Add the alpha file\twould take\t1 item(s)"),
        "{out}"
    );
    assert!(out.contains("#2 Beta work\twould take\t2 item(s)"), "{out}");
    assert!(!out.contains("#3"), "{out}");
    assert!(claim_refs(&remote).is_empty(), "a dry run claims nothing");

    let o = watch(&p, &gh, &["--once", "--agents", "2"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let prs = prs(&gh);
    assert_eq!(prs.len(), 2, "{prs:?}\n{err}");
    for (n, head) in [
        (1, "hank/issue-1-add-the-alpha-file"),
        (2, "hank/issue-2-beta-work"),
    ] {
        let (_, body) = prs
            .iter()
            .find(|(h, _)| h == head)
            .unwrap_or_else(|| panic!("{head} in {prs:?}"));
        assert!(body.contains(&format!("Closes #{n}")), "{body}");
        let w = gh.world.lock().unwrap();
        // hank watch's one comment, edited in place (the delivery's own one-line note with the
        // PR link is the run's, as for any item imported from an issue).
        let comments: Vec<String> = w
            .comments_on(n)
            .into_iter()
            .filter(|c| c.starts_with("<!-- hank:watch -->"))
            .collect();
        assert_eq!(
            comments.len(),
            1,
            "one comment, edited in place: {comments:?}"
        );
        assert!(
            comments[0].contains("hank delivered this issue"),
            "{comments:?}"
        );
        assert!(comments[0].contains("/pull/"), "{comments:?}");
        let labels = w.labels_of(n);
        assert!(labels.iter().any(|l| l == "hank:done"), "{labels:?}");
        assert!(!labels.iter().any(|l| l == "hank:working"), "{labels:?}");
    }
    {
        let w = gh.world.lock().unwrap();
        assert!(w.comments_on(3).is_empty());
        assert_eq!(w.labels_of(3), ["bug"]);
        // The started comment was edited, not a second one posted.
        assert!(
            w.requests
                .iter()
                .any(|r| r.method == "PATCH" && r.path.contains("/issues/comments/"))
        );
    }
    assert_eq!(
        claim_refs(&remote),
        ["refs/hank/claims/github-1", "refs/hank/claims/github-2"]
    );
    // The checkout's events say what the watch did with each issue.
    let mut told: Vec<(u64, String)> = p
        .events_of("issue")
        .iter()
        .map(|e| {
            (
                e["issue"].as_u64().unwrap(),
                e["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    told.sort();
    assert_eq!(
        told,
        [
            (1, "claimed".to_string()),
            (1, "delivered".to_string()),
            (2, "claimed".to_string()),
            (2, "delivered".to_string())
        ]
    );
    // `hank fleet status` shows each task's issue.
    let st = p.run(&["fleet", "status"]);
    let text = stderr(&st) + &String::from_utf8_lossy(&st.stdout);
    assert!(
        text.contains("issue: #1 https://github.com/o/r/issues/1"),
        "{text}"
    );

    // Again: nothing new (done, with an open PR and a delivered claim).
    let o = watch(&p, &gh, &["--once"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("nothing to take"), "{err}");
    assert_eq!(gh.world.lock().unwrap().pulls.len(), 2);

    // A third time, nothing changed: the listings are 304s, not counted against the budget.
    let before = budget(&p);
    let o = watch(&p, &gh, &["--once"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let after = budget(&p);
    assert_eq!(after["counted"], before["counted"], "{before} → {after}");
    assert_eq!(
        after["not_modified"].as_u64().unwrap(),
        before["not_modified"].as_u64().unwrap() + 2,
        "{before} → {after}"
    );
    assert!(gh.world.lock().unwrap().not_modified >= 2);
}

#[test]
fn a_failed_task_leaves_hank_failed_and_a_comment_with_its_why() {
    let (p, remote, gh) = setup();
    p.fake("leak", "");
    let o = watch(&p, &gh, &["--once", "--agents", "2"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let w = gh.world.lock().unwrap();
    let labels = w.labels_of(2);
    assert!(labels.iter().any(|l| l == "hank:failed"), "{labels:?}");
    assert!(!labels.iter().any(|l| l == "hank:working"), "{labels:?}");
    let comments = w.comments_on(2);
    assert_eq!(
        comments.len(),
        1,
        "no PR, so no delivery note: {comments:?}"
    );
    assert!(
        comments[0].contains("hank could not finish this issue"),
        "{comments:?}"
    );
    assert!(comments[0].contains("Why: its run stopped"), "{comments:?}");
    assert!(
        comments[0].contains("remove the `hank:failed` label"),
        "{comments:?}"
    );
    // Issue 1 went through; issue 2's claim is released (its label keeps it from being retaken).
    assert!(w.labels_of(1).iter().any(|l| l == "hank:done"));
    assert_eq!(claim_refs(&remote), ["refs/hank/claims/github-1"]);
    let failed = p.events_of("issue");
    assert!(
        failed.iter().any(|e| e["issue"] == 2
            && e["action"] == "failed"
            && e["url"] == "https://github.com/o/r/issues/2"),
        "{failed:?}"
    );
}

#[test]
fn two_watchers_on_two_clones_open_one_pr_per_issue() {
    let (p, remote, gh) = setup();
    let clone = p.home.join("clone");
    git(
        &p.home,
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    for f in [
        ".hank/PROMPT.md",
        ".hank/AGENT.md",
        ".hank/fix_plan.md",
        ".hankrc",
    ] {
        if !clone.join(f).exists() {
            std::fs::copy(p.dir.join(f), clone.join(f)).unwrap();
        }
    }
    let mut a = watch_in(&p, &p.dir, &gh, &["--once", "--agents", "2"]);
    let mut b = watch_in(&p, &clone, &gh, &["--once", "--agents", "2"]);
    let a = a.stderr(std::process::Stdio::piped()).spawn().unwrap();
    let b = b.stderr(std::process::Stdio::piped()).spawn().unwrap();
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let err = format!("A:\n{}\nB:\n{}", stderr(&a), stderr(&b));
    assert_eq!(a.status.code(), Some(0), "{err}");
    assert_eq!(b.status.code(), Some(0), "{err}");
    // Each issue was claimed once, by one of them; the other was refused the claim or saw it.
    for n in [1, 2] {
        let claimed = format!("#{n} claimed (");
        assert_eq!(err.matches(&claimed).count(), 1, "{err}");
    }
    let mut heads: Vec<String> = prs(&gh).into_iter().map(|(h, _)| h).collect();
    heads.sort();
    assert_eq!(
        heads,
        ["hank/issue-1-add-the-alpha-file", "hank/issue-2-beta-work"],
        "{err}"
    );
}

#[test]
fn gitlab_issues_are_claimed_labelled_and_answered_with_a_note() {
    let p = Project::new(&[]);
    p.fake("effect.sh", WORK);
    let remote = p.git_pushed_to_origin();
    let gl = crate::fake_gitlab::FakeGitLab::start();
    {
        let mut w = gl.world.lock().unwrap();
        w.issue(1, "Add the alpha file", &["hank"]);
        w.issue(2, "Not for hank", &["bug"]);
    }
    let o = p
        .cmd()
        .args([
            "watch",
            "--tracker",
            "gitlab",
            "--once",
            "--deliver",
            "branch",
        ])
        .env("GH_REPO", "o/r")
        .env("GITLAB_TOKEN", "glpat-test-token-0000")
        .env("GITLAB_API_URL", gl.url())
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let w = gl.world.lock().unwrap();
    let notes = w.notes_on(1);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("hank delivered this issue"), "{notes:?}");
    assert!(notes[0].contains("Branch pushed"), "{notes:?}");
    let labels = w.labels_of(1);
    assert!(labels.iter().any(|l| l == "hank:done"), "{labels:?}");
    assert!(!labels.iter().any(|l| l == "hank:working"), "{labels:?}");
    assert!(w.notes_on(2).is_empty());
    assert_eq!(w.labels_of(2), ["bug"]);
    assert_eq!(claim_refs(&remote), ["refs/hank/claims/gitlab-1"]);
    let branches = git(&remote, &["branch", "--list", "hank/issue-1-*"]);
    assert!(
        branches.contains("hank/issue-1-add-the-alpha-file"),
        "{branches}\n{err}"
    );
}

#[test]
fn without_once_the_watch_keeps_polling_and_takes_a_new_issue() {
    let p = Project::new(&[]);
    p.fake("effect.sh", WORK);
    let _remote = p.git_pushed_to_origin();
    let gh = FakeGitHub::start();
    gh.set(|w| w.check_runs.push(green_check()));
    let mut child = watch_in(&p, &p.dir, &gh, &["--interval", "1s"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let listed = |gh: &FakeGitHub| {
        gh.requests()
            .iter()
            .filter(|r| r.path.contains("/issues?"))
            .count()
    };
    // It polled once and found nothing; the issue labelled afterwards is taken at a later poll.
    assert!(
        crate::support::poll(std::time::Duration::from_secs(20), || (listed(&gh) >= 1)
            .then_some(()))
        .is_some()
    );
    gh.set(|w| w.issue(1, "Late work", "", &["hank"]));
    let done = crate::support::poll(std::time::Duration::from_secs(60), || {
        let w = gh.world.lock().unwrap();
        w.labels_of(1)
            .iter()
            .any(|l| l == "hank:done")
            .then_some(())
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        done.is_some(),
        "issue 1 was not delivered by the running watch"
    );
    assert!(listed(&gh) >= 2);
    assert_eq!(gh.world.lock().unwrap().pulls.len(), 1);
}

#[test]
fn a_rate_limited_listing_waits_for_retry_after_visibly_then_goes_on() {
    let (p, _remote, gh) = setup();
    gh.set(|w| w.throttle_issues = 1);
    let o = watch(&p, &gh, &["--dry-run"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("the tracker's rate budget is spent; waiting until"),
        "{err}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("#1 Add the alpha file\twould take"), "{out}");
    let listings = gh
        .requests()
        .iter()
        .filter(|r| r.path.contains("/issues?"))
        .count();
    assert_eq!(listings, 2, "the refused listing, then the one served");
    let b = budget(&p);
    assert!(b["retry_at"].is_string(), "{b}");
}

/// Writes a claim of issue `n` whose lease ends at `lease_until` straight onto the remote.
fn plant_claim(remote: &Path, n: u64, owner: &str, lease_until: &str) {
    let claim = format!(
        r#"{{"tracker":"github","issue":{n},"owner":"{owner}","state":"working","claimed_at":"2026-01-01T00:00:00Z","heartbeat_at":"2026-01-01T00:00:00Z","lease_until":"{lease_until}"}}"#
    );
    let blob = {
        let mut c = Command::new("git");
        c.args(["hash-object", "-w", "--stdin"])
            .current_dir(remote)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(claim.as_bytes())
            .unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string()
    };
    let tree = {
        let mut c = Command::new("git");
        c.args(["mktree"])
            .current_dir(remote)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("100644 blob {blob}\tclaim.json\n").as_bytes())
            .unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string()
    };
    let commit = git(remote, &["commit-tree", &tree, "-m", "planted claim"]);
    git(
        remote,
        &[
            "update-ref",
            &format!("refs/hank/claims/github-{n}"),
            commit.trim(),
        ],
    );
}

#[test]
fn a_claim_under_its_lease_holds_and_an_expired_one_is_taken_over() {
    let (p, remote, gh) = setup();
    plant_claim(&remote, 1, "other@box pid 7", "2999-01-01T00:00:00Z");
    plant_claim(&remote, 2, "gone@box pid 8", "2000-01-01T00:00:00Z");
    let o = watch(&p, &gh, &["--dry-run"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        out.contains("#1 Add the alpha file\tnot taken: claimed by other@box pid 7"),
        "{out}"
    );
    assert!(
        out.contains("#2 Beta work\twould take over (the lease of gone@box pid 8 expired)"),
        "{out}"
    );
    let o = watch(&p, &gh, &["--once"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("#2: the lease of gone@box pid 8 expired; taking it over"),
        "{err}"
    );
    let heads: Vec<String> = prs(&gh).into_iter().map(|(h, _)| h).collect();
    assert_eq!(heads, ["hank/issue-2-beta-work"], "{err}");
    assert!(gh.world.lock().unwrap().comments_on(1).is_empty());
}

#[test]
fn a_forge_the_tasks_could_not_open_prs_on_is_refused_before_any_claim() {
    let installed = ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join("glab").exists());
    if installed {
        eprintln!("skipped: glab is installed (the test needs a machine without it)");
        return;
    }
    let p = Project::new(&[]);
    let remote = p.git_pushed_to_origin();
    let gl = crate::fake_gitlab::FakeGitLab::start();
    gl.world
        .lock()
        .unwrap()
        .issue(1, "Add the alpha file", &["hank"]);
    // GitLab's issues are readable with the token, but no forge login opens pull requests.
    let o = p
        .cmd()
        .args(["watch", "--tracker", "gitlab", "--once"])
        .env("GH_REPO", "gitlab.example.com/o/r")
        .env("GITLAB_TOKEN", "glpat-test-token-0000")
        .env("GITLAB_API_URL", gl.url())
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("glab"), "{err}");
    assert!(claim_refs(&remote).is_empty(), "{err}");
    assert!(gl.world.lock().unwrap().notes.is_empty());
}

/// Without GH_TOKEN the watch asks through the real `gh` (its own login): the listings'
/// conditional requests go through it too, and an unchanged listing answered 304 is not
/// counted against the budget.
#[test]
fn through_the_real_gh_an_unchanged_listing_is_a_304_not_counted() {
    let Some(real) = crate::deliver::real_gh("watch through the real gh") else {
        return;
    };
    let (p, _remote, gh) = setup();
    // gh's own login (hosts.yml), not GH_TOKEN: so hank has no token and takes gh.
    let config = p.home.join("gh-config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("hosts.yml"),
        "github.localhost:\n    oauth_token: x-real-gh-token\n    user: hank-test\n    git_protocol: https\n",
    )
    .unwrap();
    let dry = |p: &Project| {
        let _ = std::fs::remove_file(p.home.join("bin/gh"));
        let mut c = crate::deliver::through_real_gh(p, &real, &gh);
        c.env_remove("GH_TOKEN").args(["watch", "--dry-run"]);
        let o = c.output().expect("hank watch");
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        o
    };
    let first = dry(&p);
    let text = stderr(&first) + &String::from_utf8_lossy(&first.stdout);
    assert!(
        text.contains("through gh") || text.contains("(gh)"),
        "{text}"
    );
    assert!(text.contains("Add the alpha file"), "{text}");
    let before = budget(&p);
    let second = dry(&p);
    let after = budget(&p);
    assert!(
        after["not_modified"].as_u64().unwrap_or(0) > before["not_modified"].as_u64().unwrap_or(0),
        "{before} → {after}\n{}",
        stderr(&second)
    );
    assert_eq!(after["counted"], before["counted"], "{before} → {after}");
}

/// Ticks the task's item and writes `<worktree name>.txt` in each repository the task's
/// plan names (the fleet's `Repositories…:` line).
const ACROSS: &str = r#"sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
n=$(basename "$PWD")
for r in $(sed -n 's/^Repositories[^:]*: //p' .hank/fix_plan.md | tr -d ',/'); do
  echo "$n" >> "$r/$n.txt"
done
true
"#;

/// A workspace of two repositories beside the project: issue 4 names both (`repos:`) and
/// becomes one fleet delivered as a change set — two linked pull requests, `Closes #4` in the
/// tracker's own repository (api's forge is `o/r`) and a link to the issue in web's — its
/// comment naming both; issue 7 (web alone) runs next as its own set; issue 5 names none and
/// is answered failed with the line to add.
/// The project with a workspace of `api` (its forge the tracker's `o/r`) and `web` beside
/// it, committed and pushed; the two checkouts.
fn workspace_setup() -> (Project, PathBuf, PathBuf) {
    let p = Project::new(&[]);
    p.fake("effect.sh", ACROSS);
    let _remote = p.git_pushed_to_origin();
    let api = crate::workspace::repo(&p, "api");
    let web = crate::workspace::repo(&p, "web");
    std::fs::write(
        p.dir.join(".hank/workspace.toml"),
        "[repos.api]\npath = \"../api\"\nbase = \"main\"\nforge = \"o/r\"\n\n\
         [repos.web]\npath = \"../web\"\nbase = \"main\"\nforge = \"o/web\"\n",
    )
    .unwrap();
    git(&p.dir, &["add", "-A"]);
    git(&p.dir, &["commit", "-q", "-m", "workspace"]);
    git(&p.dir, &["push", "-q", "origin", "main"]);
    (p, api, web)
}

#[test]
fn in_a_workspace_of_several_an_issue_naming_its_repositories_gives_a_linked_set() {
    let (p, api, web) = workspace_setup();
    let gh = FakeGitHub::start();
    gh.set(|w| {
        w.check_runs.push(green_check());
        w.issue(
            4,
            "Endpoint and UI",
            "Repos: api, web\n- [ ] add the route\n- [ ] call it\n",
            &["hank"],
        );
        w.issue(5, "Somewhere", "Please do it.", &["hank"]);
        w.issue(7, "Web only", "repos: web\n- [ ] restyle\n", &["hank"]);
    });

    let dry = watch(&p, &gh, &["--dry-run"]);
    let out = String::from_utf8_lossy(&dry.stdout).into_owned();
    assert_eq!(dry.status.code(), Some(0), "{}", stderr(&dry));
    assert!(
        out.contains("#4 Endpoint and UI\twould take\t2 item(s) → hank/issue-4-endpoint-and-ui-set in api, web"),
        "{out}"
    );
    assert!(
        out.contains("#5 Somewhere\tnot taken: the workspace has several repositories (api, web) and the issue names none of them; add a line 'repos: api, web'"),
        "{out}"
    );

    let o = watch(&p, &gh, &["--once"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let head = "hank/issue-4-endpoint-and-ui-set";
    let opened: Vec<(String, String, String, String)> = gh
        .world
        .lock()
        .unwrap()
        .pulls
        .iter()
        .map(|p| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                s(&p["base_repo"]),
                s(&p["head"]["ref"]),
                s(&p["body"]),
                s(&p["html_url"]),
            )
        })
        .collect();
    let repos: Vec<(&str, &str)> = opened
        .iter()
        .map(|(r, h, _, _)| (r.as_str(), h.as_str()))
        .collect();
    // Issue 4's set, then issue 7's own (its fleet after 4's, into its own branch).
    let head7 = "hank/issue-7-web-only-set";
    assert_eq!(
        repos,
        [("o/r", head), ("o/web", head), ("o/web", head7)],
        "{err}"
    );
    assert!(
        opened[2]
            .2
            .contains("Part of https://github.com/o/r/issues/7"),
        "{}",
        opened[2].2
    );
    let (api_body, web_body) = (&opened[0].2, &opened[1].2);
    assert!(api_body.contains("o/web#2"), "{api_body}");
    assert!(web_body.contains("o/r#1"), "{web_body}");
    assert!(api_body.contains("Closes #4"), "{api_body}");
    assert!(!web_body.contains("Closes"), "{web_body}");
    assert!(
        web_body.contains("Part of https://github.com/o/r/issues/4 (#4)"),
        "{web_body}"
    );
    // Each repository's integration branch holds the task's work, pushed to its origin.
    for dir in [&api, &web] {
        let files = git(dir, &["ls-tree", "--name-only", head]);
        assert!(
            files.contains("issue-4-endpoint-and-ui.txt"),
            "{files}\n{err}"
        );
        let bare = dir.with_extension("git");
        assert_eq!(
            git(&bare, &["rev-parse", head]),
            git(dir, &["rev-parse", head])
        );
    }
    let w = gh.world.lock().unwrap();
    let comment = w
        .comments_on(4)
        .into_iter()
        .find(|c| c.starts_with("<!-- hank:watch -->"))
        .unwrap_or_default();
    assert!(comment.contains("hank delivered this issue"), "{comment}");
    for (_, _, _, url) in &opened[..2] {
        assert!(comment.contains(url.as_str()), "{url} in {comment}");
    }
    assert!(w.labels_of(4).iter().any(|l| l == "hank:done"));
    assert!(w.labels_of(7).iter().any(|l| l == "hank:done"));
    assert!(
        w.comments_on(7)
            .iter()
            .any(|c| c.contains(opened[2].3.as_str())),
        "{err}"
    );
    // Issue 5: answered failed, with the line to add; nothing ran for it.
    let five = w.comments_on(5).join("\n");
    assert!(five.contains("add a line 'repos: api, web'"), "{five}");
    assert!(w.labels_of(5).iter().any(|l| l == "hank:failed"));
    assert!(!repos.iter().any(|(_, h)| h.contains("issue-5")));
}

/// A red check in one repository of the issue's set: the issue is answered failed with the
/// set's reason (the repository and its check), its claim given back.
#[test]
fn in_a_workspace_a_red_set_leaves_the_issue_failed_naming_the_repository_and_check() {
    let (p, _api, _web) = workspace_setup();
    let gh = FakeGitHub::start();
    gh.set(|w| {
        // api's commit green, web's (and every later one) red.
        w.check_runs_per_commit = vec![
            vec![green_check()],
            vec![serde_json::json!({
                "id": 12, "name": "test (ubuntu)", "status": "completed", "conclusion": "failure",
                "output": {"title": "1 test failed", "summary": "call_test failed",
                           "text": "assertion failed at call.js:3"}
            })],
        ];
        w.issue(
            6,
            "Both sides",
            "repos: api, web\n- [ ] change both\n",
            &["hank"],
        );
    });
    let o = watch(&p, &gh, &["--once"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let w = gh.world.lock().unwrap();
    let comment = w
        .comments_on(6)
        .into_iter()
        .find(|c| c.starts_with("<!-- hank:watch -->"))
        .unwrap_or_default();
    assert!(
        comment.contains("hank could not finish this issue"),
        "{comment}"
    );
    assert!(comment.contains("checks failed"), "{comment}");
    assert!(comment.contains("test (ubuntu)"), "{comment}");
    assert!(comment.contains("web:"), "{comment}");
    assert!(w.labels_of(6).iter().any(|l| l == "hank:failed"), "{err}");
    drop(w);
    // The claim given back (the failed label keeps it from being taken again).
    let origin = git(&p.dir, &["remote", "get-url", "origin"]);
    assert!(claim_refs(Path::new(&origin)).is_empty(), "{err}");
}
