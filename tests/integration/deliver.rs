//! `hank deliver`: a real bare-repository remote for every push, the fake GitHub API on
//! loopback for the REST path, and the real `gh` (when installed) against the same fake.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::fake_github::{FakeGitHub, Recorded, World};
use crate::support::{
    Project, assert_contains, assert_contains_all, doctor_check, fixtures, git, poll, signal,
    stderr, stdout, wait_with_timeout,
};

/// The token every delivery test gives hank (it must never show up in what hank writes).
pub(crate) const TOKEN: &str = "ghp_faketoken0123456789abcdefghijklmnop";

/// `c` with the git identity of the commits a delivery makes.
fn git_identity(c: &mut Command) -> &mut Command {
    c.env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
}

/// `c` with GitHub's REST path at the fake (repository `o/r`, [`TOKEN`]) and a git identity.
pub(crate) fn at_fake_github<'c>(c: &'c mut Command, gh: &FakeGitHub) -> &'c mut Command {
    git_identity(
        c.env("GH_REPO", "o/r")
            .env("GH_TOKEN", TOKEN)
            .env("GITHUB_API_URL", gh.url()),
    )
}

/// A `PATH` of `bins` first, then the system's folders.
fn path_with(bins: &[&Path]) -> String {
    let mut dirs: Vec<String> = bins.iter().map(|b| b.display().to_string()).collect();
    dirs.push("/usr/local/bin:/usr/bin:/bin".to_string());
    dirs.join(":")
}

/// Writes `text` to `path` as an executable (a git hook, a fake program).
fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// Installs the git hook `name` of the project `p` running `script`.
pub(crate) fn git_hook(p: &Project, name: &str, script: &str) -> PathBuf {
    let hook = p.dir.join(".git/hooks").join(name);
    write_executable(&hook, script);
    hook
}

/// A folder `$HOME/<name>-bin` holding the program `name` that runs `script` (to put first on
/// `PATH`).
fn fake_program(p: &Project, name: &str, script: &str) -> PathBuf {
    let bin = p.home.join(format!("{name}-bin"));
    std::fs::create_dir_all(&bin).unwrap();
    write_executable(&bin.join(name), script);
    bin
}

/// The real `gh` (Debian's package; `.ci/run` installs it), or `None` when it is not
/// installed: then the test `test` is skipped with a note, or fails under HANK_REQUIRE_GH (CI).
pub(crate) fn real_gh(test: &str) -> Option<PathBuf> {
    let found = ["/usr/bin/gh", "/usr/local/bin/gh"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("HANK_REQUIRE_GH").is_none(),
            "HANK_REQUIRE_GH is set (CI) but gh is not installed"
        );
        eprintln!("{test}: skipped (gh is not installed)");
    }
    found
}

/// `hank` in `p` with the real `gh` (`real_gh`) first on `PATH` and the fake as its HTTP proxy
/// (gh then asks `api.github.localhost`), a git identity.
pub(crate) fn through_real_gh(p: &Project, real_gh: &Path, gh: &FakeGitHub) -> Command {
    let bin = p.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(real_gh, bin.join("gh")).unwrap();
    let mut c = p.cmd();
    c.env("PATH", path_with(&[&bin, &fixtures().join("bin")]))
        .env("GH_HOST", "github.localhost")
        .env("GH_TOKEN", "x-real-gh-token")
        .env("GH_REPO", "o/r")
        .env("GH_CONFIG_DIR", p.home.join("gh-config"))
        .env("HTTP_PROXY", gh.url());
    git_identity(&mut c);
    c
}

/// The pull requests created at the fake (`POST /repos/o/r/pulls`), in order.
pub(crate) fn pulls(gh: &FakeGitHub) -> Vec<Recorded> {
    gh.requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/repos/o/r/pulls")
        .collect()
}

/// The request that created the first pull request.
pub(crate) fn created_pr(gh: &FakeGitHub) -> Recorded {
    pulls(gh).into_iter().next().expect("a PR was created")
}

/// The first pull request created at the fake, which must be from `hank/main` into `main` with
/// each of `evidence` in its body; its JSON.
#[track_caller]
pub(crate) fn assert_pr_from_hank_main(gh: &FakeGitHub, evidence: &[&str]) -> Value {
    let pr = created_pr(gh).json();
    assert_eq!(pr["head"], "hank/main");
    assert_eq!(pr["base"], "main");
    assert_contains_all(pr["body"].as_str().unwrap(), evidence);
    pr
}

/// The branch checked out in `p`.
pub(crate) fn head_branch(p: &Project) -> String {
    git(&p.dir, &["rev-parse", "--abbrev-ref", "HEAD"])
}

/// The files of `branch` in the repository `repo`, a line each.
pub(crate) fn files_of(repo: &Path, branch: &str) -> String {
    git(repo, &["ls-tree", "-r", "--name-only", branch])
}

/// Fails if one of `files` that hank wrote in `p` carries [`TOKEN`].
#[track_caller]
pub(crate) fn assert_no_token(p: &Project, files: &[&str]) {
    for f in files {
        let text = std::fs::read_to_string(p.dir.join(f)).unwrap();
        assert!(!text.contains(TOKEN), "{f}");
    }
}

/// Waits until the fake was asked for check runs (hank is in its CI wait).
fn wait_for_ci_poll(gh: &FakeGitHub) {
    poll(Duration::from_secs(30), || {
        gh.requests()
            .iter()
            .any(|r| r.path.contains("/check-runs"))
            .then_some(())
    })
    .expect("no CI wait");
}

/// The events of a run that completed with its check passing, item `[#12] Fix login` done.
fn finished_run_events() -> String {
    [
        json!({"schema_version":2,"type":"verification","at":"2026-11-24T10:00:00Z","kind":"baseline","passed":false,"command":"make test","exit_code":2,"duration_ms":1500,"log":".hank/logs/verify-00001.log","loop":0}),
        json!({"schema_version":2,"type":"agent_finished","at":"2026-11-24T10:05:00Z","loop":1,"outcome":"success","plan_items":["[#12] Fix login"],"cost_usd":0.42,"duration_ms":65000,"num_turns":3,"tokens":{"input":1000,"output":200},"recommendation":"Login fixed, please merge"}),
        json!({"schema_version":2,"type":"verification","at":"2026-11-24T10:06:00Z","kind":"completion","passed":true,"command":"make test","exit_code":0,"duration_ms":1800,"log":".hank/logs/verify-00002.log","loop":1}),
        json!({"schema_version":2,"type":"exit","at":"2026-11-24T10:06:01Z","exit_reason":"plan_complete","exit_code":0,"message":"every required fix_plan item is done (1/1)","verified":true}),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n")
        + "\n"
}

/// A git project with hank's files, a finished verified run, work left by the agent, and a
/// bare repository as `origin`.
pub(crate) struct Setup {
    pub(crate) p: Project,
    remote: PathBuf,
}

/// [`setup`] and the fake GitHub, its world set by `world`.
pub(crate) fn setup_at(world: impl FnOnce(&mut World)) -> (Setup, FakeGitHub) {
    let s = setup();
    let gh = FakeGitHub::start();
    gh.set(world);
    (s, gh)
}

pub(crate) fn setup() -> Setup {
    let p = Project::new(&["[#12] Fix login"]);
    let remote = p.git_pushed_to_origin();
    std::fs::write(p.dir.join(".hank/events.jsonl"), finished_run_events()).unwrap();
    std::fs::write(p.dir.join("login.rs"), "fn login() {}\n").unwrap();
    Setup { p, remote }
}

impl Setup {
    /// `hank deliver ARGS` with the REST path at the fake (the fake `gh` of fixtures/bin
    /// cannot answer `gh api`, so hank falls back to the token).
    pub(crate) fn deliver_rest(&self, gh: &FakeGitHub, rc: &str, args: &[&str]) -> Output {
        self.p.hankrc(&format!("RETRY_BACKOFF_SECONDS=0\n{rc}"));
        at_fake_github(self.p.cmd().arg("deliver").args(args), gh)
            .output()
            .expect("hank deliver")
    }

    /// `hank deliver` (`CI_WAIT=false`, a git identity, `env` added) with a fake `program`
    /// first on `PATH` (then `path`): a script that logs its argv to `$log` and runs `script`.
    /// The delivery must succeed; the log.
    fn deliver_through(
        &self,
        program: &str,
        script: &str,
        path: &[&Path],
        env: &[(&str, &str)],
    ) -> String {
        let log = self.p.home.join(format!("{program}.log"));
        let script = format!(
            "#!/bin/sh\nlog='{}'\necho \"argv: $*\" >> \"$log\"\n{script}",
            log.display()
        );
        let bin = fake_program(&self.p, program, &script);
        self.p.hankrc("CI_WAIT=false\n");
        let mut c = self.p.cmd();
        c.arg("deliver")
            .env("PATH", path_with(&[&[bin.as_path()], path].concat()))
            .envs(env.iter().copied());
        let out = git_identity(&mut c).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        std::fs::read_to_string(&log).unwrap()
    }

    /// [`Setup::deliver_rest`], which must end with exit code `code`.
    pub(crate) fn deliver_ending(
        &self,
        gh: &FakeGitHub,
        rc: &str,
        args: &[&str],
        code: i32,
    ) -> Output {
        let out = self.deliver_rest(gh, rc, args);
        assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
        out
    }

    fn delivery(&self) -> Value {
        self.p.read_json(".hank/delivery.json")
    }
}

pub(crate) fn green_check() -> Value {
    json!({"id": 11, "name": "build", "status": "completed", "conclusion": "success", "html_url": "https://ci/11"})
}

#[test]
fn a_pr_is_opened_with_the_evidence_body_and_green_checks_deliver() {
    let (s, gh) = setup_at(|w| w.check_runs.push(green_check()));
    let out = s.deliver_ending(&gh, "", &[], 0);

    // The branch is on the remote, with the agent's work committed and hank's runtime files not.
    let files = files_of(&s.remote, "hank/main");
    assert!(files.lines().any(|f| f == "login.rs"), "{files}");
    assert!(!files.contains("events.jsonl"), "{files}");
    assert_eq!(head_branch(&s.p), "hank/main");
    // The user's main is untouched on the remote.
    let main_files = files_of(&s.remote, "main");
    assert!(!main_files.contains("login.rs"), "{main_files}");

    let reqs = gh.requests();
    let create = created_pr(&gh);
    let pr = assert_pr_from_hank_main(
        &gh,
        &[
            "- [x] [#12] Fix login",
            "| baseline | `make test` | failed (exit 2) | 1.5s |",
            "| end | `make test` | passed (exit 0) | 1.8s |",
            "| [#12] Fix login | 1 | 3 | $0.42 | 1200 | 1m05s |",
            "Stop reason: `plan_complete`",
            "```text\nLogin fixed, please merge",
            "Closes #12",
        ],
    );
    assert_eq!(pr["title"], "[#12] Fix login");
    // The token travels in the header only.
    assert_eq!(
        create.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    for r in &reqs {
        assert!(
            !r.target.contains(TOKEN) && !r.body.contains(TOKEN),
            "{r:?}"
        );
    }
    // The issue the item came from gets the PR link.
    let comment = reqs
        .iter()
        .find(|r| r.method == "POST" && r.path == "/repos/o/r/issues/12/comments")
        .expect("issue commented");
    assert!(
        comment.json()["body"]
            .as_str()
            .unwrap()
            .contains("https://github.com/o/r/pull/1")
    );
    // The checks of exactly the pushed commit were read.
    let sha = git(&s.remote, &["rev-parse", "hank/main"]);
    assert!(
        reqs.iter().any(|r| r
            .path
            .starts_with(&format!("/repos/o/r/commits/{sha}/check-runs"))),
        "{reqs:?}"
    );
    let d = s.delivery();
    assert_eq!(d["exit_reason"], "delivered");
    assert_eq!(d["checks"], "green");
    assert_eq!(d["head"], sha.as_str());
    assert_eq!(d["pr_url"], "https://github.com/o/r/pull/1");
    let last = s.p.events().last().cloned().unwrap();
    assert_eq!(last["type"], "delivery");
    assert_eq!(last["pr_number"], 1);
    // Nothing hank wrote carries the token.
    assert_no_token(&s.p, &[".hank/delivery.json", ".hank/events.jsonl"]);
    assert!(!stderr(&out).contains(TOKEN));
}

#[test]
fn no_checks_within_the_appear_timeout_is_ci_missing() {
    let (s, gh) = setup_at(|_| {});
    let out = s.deliver_ending(&gh, "CI_APPEAR_TIMEOUT=1s\n", &[], 2);
    assert_contains(&stderr(&out), "no CI is not green");
    let d = s.delivery();
    assert_eq!(d["exit_reason"], "ci_missing");
    assert_eq!(d["checks"], "missing");
}

#[test]
fn red_checks_are_ci_failed_with_their_log_tails_for_the_agent() {
    let (s, gh) = setup_at(|w| {
        w.check_runs.push(green_check());
        w.check_runs.push(json!({
            "id": 12, "name": "test (ubuntu)", "status": "completed", "conclusion": "failure",
            "output": {"title": "2 tests failed", "summary": "login_test failed", "text": format!("assertion failed at login.rs:1\ntoken {TOKEN}")}
        }));
        w.statuses
            .push(json!({"context": "ci/lint", "state": "pending"}));
    });
    s.deliver_ending(&gh, "", &[], 2);
    let d = s.delivery();
    assert_eq!(d["exit_reason"], "ci_failed");
    assert_eq!(d["check_names"], json!(["test (ubuntu)"]));
    let fb = d["feedback"].as_str().unwrap();
    assert!(fb.contains("## Failing check: test (ubuntu)"), "{fb}");
    assert!(fb.contains("assertion failed at login.rs:1"), "{fb}");
    assert!(!fb.contains(TOKEN), "{fb}");
}

#[test]
fn a_pre_push_hook_rejection_is_captured_for_the_agent() {
    let s = setup();
    let hook = git_hook(
        &s.p,
        "pre-push",
        "#!/bin/sh\necho 'lint: login.rs:1 missing docs' >&2\nexit 1\n",
    );
    let gh = FakeGitHub::start();
    let out = s.deliver_ending(&gh, "", &[], 2);
    assert_contains(&stderr(&out), "lint: login.rs:1 missing docs");
    let d = s.delivery();
    assert_eq!(d["exit_reason"], "push_rejected");
    assert!(
        d["feedback"]
            .as_str()
            .unwrap()
            .contains("lint: login.rs:1 missing docs")
    );
    // Nothing reached the remote, and no PR was opened.
    let refs = git(&s.remote, &["for-each-ref", "--format=%(refname)"]);
    assert!(!refs.contains("hank/main"), "{refs}");
    assert!(!gh.requests().iter().any(|r| r.method == "POST"));

    // Once the hook passes, the same delivery goes through.
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    gh.set(|w| w.check_runs.push(green_check()));
    s.deliver_ending(&gh, "", &[], 0);
    assert_eq!(s.delivery()["exit_reason"], "delivered");
}

#[test]
fn branch_mode_pushes_without_a_forge_and_refuses_unverified_work() {
    let (s, gh) = setup_at(|_| {});
    s.deliver_ending(&gh, "DELIVER=branch\n", &["--branch", "feature/login"], 0);
    assert_eq!(s.delivery()["exit_reason"], "delivered");
    assert_eq!(s.delivery()["checks"], "not_waited");
    let files = files_of(&s.remote, "feature/login");
    assert!(files.contains("login.rs"), "{files}");
    assert!(gh.requests().is_empty());

    // A run that did not complete is not delivered (exit 1, nothing changed).
    let s = setup();
    let events = finished_run_events().replace("\"plan_complete\"", "\"max_loops\"");
    std::fs::write(s.p.dir.join(".hank/events.jsonl"), events).unwrap();
    let out = s.deliver_ending(&gh, "", &[], 1);
    assert_contains(&stderr(&out), "ended with `max_loops`");
    assert_eq!(head_branch(&s.p), "main");

    // A bad setting names itself.
    let out = s.deliver_ending(&gh, "DELIVER=sometimes\n", &[], 1);
    assert_contains(&stderr(&out), "DELIVER: expected none, branch or pr");
}

#[test]
fn review_requests_are_kept_for_the_agent_and_auto_merge_waits_for_green() {
    let (s, gh) = setup_at(|w| {
        w.check_runs.push(green_check());
        w.reviews.push(json!({"id": 5, "user": {"login": "ann"}, "state": "CHANGES_REQUESTED", "body": "Please rename login()"}));
        w.review_comments.push(json!({"id": 9, "user": {"login": "ann"}, "path": "login.rs", "line": 1, "body": "typo here"}));
    });
    s.deliver_ending(&gh, "REVIEW_LOOP=true\nAUTO_MERGE=true\n", &[], 0);
    let d = s.delivery();
    assert_eq!(d["auto_merge_armed"], true);
    assert_eq!(d["reviews_seen"], 9);
    let fb = d["feedback"].as_str().unwrap();
    assert!(
        fb.contains("Changes requested by ann\nPlease rename login()"),
        "{fb}"
    );
    assert!(
        fb.contains("Comment by ann on login.rs:1\ntypo here"),
        "{fb}"
    );
    let reqs = gh.requests();
    let gql = reqs
        .iter()
        .find(|r| r.path == "/graphql")
        .expect("auto-merge armed");
    assert_eq!(gql.json()["variables"]["id"], "PR_node1");
    // Armed only after the checks were read.
    let checks_at = reqs
        .iter()
        .position(|r| r.path.contains("/check-runs"))
        .unwrap();
    assert!(reqs.iter().position(|r| r.path == "/graphql").unwrap() > checks_at);

    // Red checks never arm it.
    let (s, gh) = setup_at(|w| {
        w.check_runs.push(
            json!({"id": 3, "name": "build", "status": "completed", "conclusion": "cancelled"}),
        )
    });
    s.deliver_ending(&gh, "AUTO_MERGE=true\n", &[], 2);
    assert!(!gh.requests().iter().any(|r| r.path == "/graphql"));
}

/// The real `gh` (Debian's package; `.ci/run` installs it) against the fake, as its proxy.
#[test]
fn the_real_gh_opens_the_pr_and_reads_the_checks() {
    let Some(real_gh) = real_gh("the_real_gh_opens_the_pr_and_reads_the_checks") else {
        return;
    };
    let (s, gh) = setup_at(|w| w.check_runs.push(green_check()));
    s.p.hankrc("AUTO_MERGE=true\n");
    let out = through_real_gh(&s.p, &real_gh, &gh)
        .arg("deliver")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reqs = gh.requests();
    let seen: Vec<String> = reqs
        .iter()
        .map(|r| format!("{} {}", r.method, r.target))
        .collect();
    // gh sends absolute-form requests to its proxy, at api.<GH_HOST>.
    assert!(
        seen.contains(&"GET http://api.github.localhost/user".to_string()),
        "{seen:?}"
    );
    let create = created_pr(&gh);
    assert_eq!(create.json()["head"], "hank/main");
    assert!(
        create.json()["body"]
            .as_str()
            .unwrap()
            .contains("Closes #12")
    );
    assert_eq!(
        create.header("authorization"),
        Some("token x-real-gh-token")
    );
    assert!(
        create
            .header("user-agent")
            .unwrap_or("")
            .starts_with("GitHub CLI"),
        "{:?}",
        create.headers
    );
    assert!(seen.iter().any(|s| s.contains("/check-runs")), "{seen:?}");
    assert!(
        seen.iter()
            .any(|s| s == "POST http://api.github.localhost/graphql"),
        "{seen:?}"
    );
    assert_eq!(s.delivery()["exit_reason"], "delivered");
    assert_eq!(s.delivery()["auto_merge_armed"], true);
    eprintln!(
        "gh sent:\n{}",
        reqs.iter()
            .map(|r| format!("{} {} {:?}", r.method, r.target, r.headers))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn doctor_checks_the_remote_the_login_and_the_push_permission() {
    let (s, gh) = setup_at(|w| w.can_push = false);
    s.p.hankrc("DELIVER=pr\n");
    let doctor = |gh: &FakeGitHub, remote: &str| -> Value {
        s.p.hankrc(&format!("DELIVER=pr\nDELIVER_REMOTE={remote}\n"));
        let out = at_fake_github(s.p.cmd().args(["doctor", "--json"]), gh)
            .output()
            .unwrap();
        assert!(!String::from_utf8_lossy(&out.stdout).contains(TOKEN));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let find = doctor_check;
    let v = doctor(&gh, "origin");
    assert_eq!(find(&v, "remote")["ok"], true, "{v}");
    assert_eq!(find(&v, "forge")["ok"], true, "{v}");
    assert_contains(
        find(&v, "forge")["detail"].as_str().unwrap(),
        "as hank-bot for o/r",
    );
    let push = find(&v, "push");
    assert_eq!(push["ok"], false, "{v}");
    assert!(
        push["fix"].as_str().unwrap().contains("write access"),
        "{v}"
    );
    assert_eq!(v["ok"], false);

    let v = doctor(&gh, "upstream");
    let remote = find(&v, "remote");
    assert_eq!(remote["ok"], false, "{v}");
    assert!(
        remote["fix"]
            .as_str()
            .unwrap()
            .contains("git remote add upstream"),
        "{v}"
    );
}

#[test]
fn hank_run_dry_run_says_where_it_would_deliver() {
    let s = setup();
    s.p.hankrc("DELIVER=pr\n");
    let out = s.p.run(&["--dry-run"]);
    assert_contains(
        &stderr(&out),
        "DELIVER=pr (.hankrc line 1): the loop would work on branch `hank/main` and deliver a verified completion to `origin`",
    );
    // Nothing switched.
    assert_eq!(head_branch(&s.p), "main");
}

/// GitLab at the argv boundary: a fake `glab` records what hank runs and answers like
/// `glab api --include` (no real glab in the tests).
#[test]
fn gitlab_merge_requests_go_through_glab_api() {
    let s = setup();
    git(
        &s.p.dir,
        &["remote", "set-url", "origin", "https://gitlab.com/g/p.git"],
    );
    git(
        &s.p.dir,
        &[
            "remote",
            "set-url",
            "--push",
            "origin",
            s.remote.to_str().unwrap(),
        ],
    );
    let calls = s.deliver_through(
        "glab",
        r#"echo "stdin: $(cat)" >> "$log"
case "$*" in
*merge_requests) printf 'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n\r\n{"iid":4,"web_url":"https://gitlab.com/g/p/-/merge_requests/4","sha":"abc"}' ;;
*) printf 'HTTP/1.1 201 Created\r\n\r\n{"id":1}' ;;
esac
"#,
        &[],
        &[("GITLAB_TOKEN", TOKEN)],
    );
    assert!(
        calls.contains(
            "argv: api --include --method POST --input - projects/g%2Fp/merge_requests\n"
        ),
        "{calls}"
    );
    assert!(calls.contains("\"source_branch\":\"hank/main\""), "{calls}");
    assert!(calls.contains("\"target_branch\":\"main\""), "{calls}");
    assert!(
        calls.contains(
            "argv: api --include --method POST --input - projects/g%2Fp/issues/12/notes\n"
        ),
        "{calls}"
    );
    assert!(!calls.contains(TOKEN), "{calls}");
    assert_eq!(
        s.delivery()["pr_url"],
        "https://gitlab.com/g/p/-/merge_requests/4"
    );
    // The push went to the push URL (the bare repository).
    assert!(
        git(&s.remote, &["for-each-ref", "--format=%(refname)"]).contains("refs/heads/hank/main")
    );
}

/// Runs `hank` in `p` to a verified completion: VERIFY_COMMAND (with `rc` after it in the
/// `.hankrc`) checks `src/x`, which the agent makes while it ticks the item, then runs `more`.
fn run_making_src_x(p: &Project, rc: &str, more: &str) {
    p.hankrc(&format!(
        "RETRY_BACKOFF_SECONDS=0\nVERIFY_COMMAND=\"test -f src/x\"\n{rc}"
    ));
    p.fake(
        "effect.sh",
        &format!(
            "mkdir -p src && echo fixed > src/x\nsed -i 's/- \\[ \\]/- [x]/' .hank/fix_plan.md\n{more}"
        ),
    );
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// The whole path on hank's real records: a `hank run` with the fake agent that completes
/// with its check passing, then `hank deliver`.
#[test]
fn a_real_run_then_deliver_puts_its_records_in_the_pr() {
    let p = Project::new(&["[#12] make src/x"]);
    let remote = p.git_with_origin();
    run_making_src_x(&p, "VERIFY_AT_START=true\n", "");
    let s = Setup { p, remote };
    let gh = FakeGitHub::start();
    gh.set(|w| w.check_runs.push(green_check()));
    s.deliver_ending(
        &gh,
        "VERIFY_COMMAND=\"test -f src/x\"\nVERIFY_AT_START=true\n",
        &[],
        0,
    );
    assert_pr_from_hank_main(
        &gh,
        &[
            "- [x] [#12] make src/x",
            "| baseline | `test -f src/x` | failed (exit 1) |",
            "| end | `test -f src/x` | passed (exit 0) |",
            "Stop reason: `plan_complete`",
            "Closes #12",
        ],
    );
    let files = files_of(&s.remote, "hank/main");
    assert!(files.lines().any(|f| f == "src/x"), "{files}");
    // status.json carries the delivery; `hank status` shows it.
    let st = s.p.status();
    assert_eq!(st["exit_reason"], "plan_complete");
    assert_eq!(st["delivery"]["pr_url"], "https://github.com/o/r/pull/1");
    assert_eq!(st["delivery"]["checks"], "green");
    let shown = s.p.run(&["status"]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("delivery:     pr on hank/main (")
            && text.contains("→ https://github.com/o/r/pull/1, checks green (delivered)"),
        "{text}"
    );
}

/// The agent cannot redirect the delivery: a `.hankrc` it changed during the run (here
/// DELIVER_REMOTE) needs the user's approval before `hank deliver` uses it.
#[test]
fn a_delivery_setting_the_agent_changed_needs_approval() {
    let p = Project::new(&["make src/x"]);
    p.git_init();
    run_making_src_x(&p, "", "echo 'DELIVER_REMOTE=evil' >> .hankrc\n");
    let out = p.run(&["deliver", "--deliver", "branch"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_contains(&stderr(&out), "hank config accept");
    assert!(!p.dir.join(".hank/delivery.json").exists());
}

/// REST over HTTPS is spoken in-process (no `curl`, no program holding the token): through
/// `HTTPS_PROXY` it asks for a tunnel to the API's host, and the token never crosses the proxy
/// in the clear (it would travel inside TLS). The fake proxy refuses the tunnel: the delivery
/// says the forge could not be reached, and the token is in no output.
#[test]
fn https_rest_tunnels_through_the_proxy_with_the_token_inside_tls() {
    use std::io::{Read, Write};
    let s = setup();
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = proxy.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let keep = seen.clone();
    std::thread::spawn(move || {
        for conn in proxy.incoming() {
            let Ok(mut conn) = conn else { break };
            let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut buf = [0u8; 4096];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            keep.lock().unwrap().extend_from_slice(&got);
            let _ = conn.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
        }
    });
    s.p.hankrc("CI_WAIT=false\nRETRY_BACKOFF_SECONDS=0\n");
    let mut c = s.p.cmd();
    c.arg("deliver")
        .env("PATH", path_with(&[&fixtures().join("bin")]))
        .env("GH_REPO", "o/r")
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_API_URL", "https://api.github.example")
        .env("HTTPS_PROXY", format!("http://127.0.0.1:{port}"))
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy");
    let out = git_identity(&mut c).output().unwrap();
    let err = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("api.github.example"), "{err}");
    let seen = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
    assert!(
        seen.starts_with("CONNECT api.github.example:443 HTTP/1.1\r\n"),
        "{seen}"
    );
    for text in [&seen, &err, &stdout(&out)] {
        assert!(!text.contains(TOKEN), "{text}");
    }
}

/// Ctrl-C ends the CI wait at once: exit 130, the delivery recorded with its checks pending.
#[test]
fn ctrl_c_ends_the_ci_wait_with_130() {
    let (s, gh) = setup_at(|_| {});
    s.p.hankrc("RETRY_BACKOFF_SECONDS=0\nCI_APPEAR_TIMEOUT=10m\n");
    let child: Child = at_fake_github(s.p.cmd().arg("deliver"), &gh)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_ci_poll(&gh);
    std::thread::sleep(std::time::Duration::from_millis(300));
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let out = wait_with_timeout(child, std::time::Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let d = s.delivery();
    assert_eq!(d["exit_reason"], "interrupted");
    assert_eq!(d["checks"], "pending");
}

/// An agent plants `.git/hooks/pre-push` during a plain `hank run`: the next `hank deliver`
/// refuses before running it, listing the hook; after `hank config accept` it runs.
#[test]
fn a_hook_planted_during_a_run_is_not_run_by_deliver_before_approval() {
    let p = Project::new(&["[#12] make src/x"]);
    let remote = p.git_with_origin();
    run_making_src_x(
        &p,
        "",
        "printf '#!/bin/sh\\ntouch \"%s/hook-ran\"\\n' \"$FAKE_CLAUDE_DIR\" > .git/hooks/pre-push\n\
         chmod +x .git/hooks/pre-push\n",
    );
    let s = Setup { p, remote };
    let gh = FakeGitHub::start();
    gh.set(|w| w.check_runs.push(green_check()));
    let out = s.deliver_ending(&gh, "", &[], 1);
    let err = stderr(&out);
    assert_contains(&err, ".git/hooks/pre-push: added");
    assert_contains(&err, "hank config accept");
    assert!(!s.p.fake.join("hook-ran").exists(), "{err}");
    assert!(!s.p.dir.join(".hank/delivery.json").exists());
    let listed = s.p.run(&["config", "status"]);
    assert_contains(
        &crate::support::stdout(&listed),
        ".git/hooks/pre-push: added",
    );

    let o = s.p.run(&["config", "accept"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    s.deliver_ending(&gh, "", &[], 0);
    assert!(s.p.fake.join("hook-ran").exists());
}

/// A filter driver and the `.gitattributes` that applies it, written by the agent during a
/// run, are listed by `hank config status` and refused by `hank deliver`.
#[test]
fn a_filter_and_gitattributes_planted_during_a_run_are_listed() {
    let p = Project::new(&["[#12] make src/x"]);
    let remote = p.git_with_origin();
    run_making_src_x(
        &p,
        "",
        "git config filter.x.clean \"touch $FAKE_CLAUDE_DIR/filter-ran; cat\"\n\
         echo '* filter=x' > .gitattributes\n",
    );
    let listed = p.run(&["config", "status"]);
    let text = crate::support::stdout(&listed);
    assert_contains(&text, "git config filter.x.clean added");
    assert_contains(&text, ".gitattributes: added");
    let s = Setup { p, remote };
    let gh = FakeGitHub::start();
    let out = s.deliver_ending(&gh, "", &[], 1);
    assert_contains(&stderr(&out), "git config filter.x.clean added");
    assert!(!s.p.fake.join("filter-ran").exists());
}

#[test]
fn hank_deliver_refuses_secrets_committed_during_a_run_and_defuses_the_agents_text() {
    let (s, gh) = setup_at(|w| w.check_runs.push(green_check()));
    // The agent committed secrets during a plain run.
    let script = s.p.home.join("commits-secrets.sh");
    std::fs::write(&script, crate::deliver_loop::COMMITS_SECRETS).unwrap();
    let o = Command::new("bash")
        .arg(&script)
        .current_dir(&s.p.dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = s.deliver_ending(&gh, "", &[], 1);
    let err = stderr(&out);
    assert_contains_all(
        &err,
        &[
            ".env",
            "keys/deploy_key",
            "credentials.json",
            ".npmrc",
            "prod.tfvars",
        ],
    );
    assert_eq!(s.delivery()["exit_reason"], "secrets_in_commits");
    assert!(!git(&s.remote, &["branch", "--list"]).contains("hank/main"));
    assert!(pulls(&gh).is_empty());

    // A clean delivery whose agent summary tries to close, ping and render.
    let (s, gh) = setup_at(|w| w.check_runs.push(green_check()));
    let events = finished_run_events().replace(
        "Login fixed, please merge",
        "Closes #9, resolves owner/repo#10, fixes https://github.com/o/r/issues/11 @someone <img src=https://evil.example/x.png>",
    );
    std::fs::write(s.p.dir.join(".hank/events.jsonl"), events).unwrap();
    s.deliver_ending(&gh, "", &[], 0);
    let body = created_pr(&gh).json()["body"].as_str().unwrap().to_string();
    for effective in ["Closes #9", "resolves owner/repo#10", "fixes https://"] {
        assert!(!body.contains(effective), "{effective}: {body}");
    }
    // The mention and the image are inside the fenced block only: inert.
    let (_, fenced) = body.split_once("```text\n").expect("a fenced summary");
    let (_, after) = fenced.split_once("\n```\n").expect("the fence closes");
    assert!(
        !after.contains("@someone") && !after.contains("<img"),
        "{body}"
    );
    // hank's own closing line (from the plan's issue link) stays.
    assert!(body.contains("\nCloses #12"), "{body}");
}
