//! Delivery inside `hank run` (`DELIVER=branch|pr`): the fake agent, a bare repository on
//! disk as `origin`, and the fake GitHub API on loopback (the REST path). A verified
//! completion is committed, pushed and opened as a pull request with hank's evidence; a
//! pre-push hook's refusal, a red CI and a review request go back to the next loop, which
//! fixes, and the next verified completion delivers again.

use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::deliver::{
    TOKEN, assert_no_token, assert_pr_from_hank_main, at_fake_github, files_of, git_hook,
    head_branch, pulls, real_gh, through_real_gh,
};
use crate::fake_github::FakeGitHub;
use crate::support::{
    Project, TICK_ONE, assert_contains, assert_contains_all, git, signal, split_context, stderr,
    wait_with_timeout,
};

/// A git project on `main` with hank's `.gitignore`, one open item, a bare `origin`, and a
/// fake agent that does the item (and touches `src/work.txt` at every call).
struct Setup {
    p: Project,
    remote: PathBuf,
}

fn setup(item: &str) -> Setup {
    let p = Project::new(&[item]);
    let remote = p.git_pushed_to_origin();
    p.fake("effect.sh", TICK_ONE);
    Setup { p, remote }
}

impl Setup {
    /// `hank run` with `rc` as `.hankrc`, the REST path at the fake.
    fn run(&self, gh: &FakeGitHub, rc: &str) -> Output {
        self.p.hankrc(&format!("RETRY_BACKOFF_SECONDS=0\n{rc}"));
        at_fake_github(&mut self.p.cmd(), gh)
            .output()
            .expect("hank run")
    }

    /// `hank run` with `DELIVER=pr` started and waiting for checks that never appear (up to
    /// CI_APPEAR_TIMEOUT, 10 minutes).
    fn spawn_waiting_for_ci(&self, gh: &FakeGitHub) -> Child {
        self.p
            .hankrc("RETRY_BACKOFF_SECONDS=0\nDELIVER=pr\nCI_APPEAR_TIMEOUT=10m\n");
        let child = at_fake_github(&mut self.p.cmd(), gh)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("hank run");
        self.p.wait_status(Duration::from_secs(30), |st| {
            st["delivery"]["checks"] == "pending"
        });
        child
    }

    fn deliveries(&self) -> Vec<Value> {
        self.p.events_of("delivery")
    }

    /// The context (before the prompt) hank gave call `n`.
    fn context(&self, n: u32) -> String {
        split_context(&self.p.stdin(n)).0
    }
}

pub(crate) fn green_check() -> Value {
    json!({"id": 11, "name": "build", "status": "completed", "conclusion": "success"})
}

fn red_check() -> Value {
    json!({
        "id": 12, "name": "test (ubuntu)", "status": "completed", "conclusion": "failure",
        "output": {"title": "1 test failed", "summary": "login_test failed",
                   "text": "assertion failed at login.rs:7: expected 2, got 3"}
    })
}

fn pulls_created(gh: &FakeGitHub) -> usize {
    pulls(gh).len()
}

#[test]
fn a_verified_completion_opens_a_pr_with_hanks_evidence_and_never_pushes_a_secret() {
    let s = setup("[#12] Fix login");
    // The agent does the item, and leaves a .env that nothing ignores.
    s.p.fake(
        "effect.sh",
        &format!("{TICK_ONE}echo 'fn login() {{}}' > login.rs\necho 'API_KEY=sk-live-1234567890' > .env\n"),
    );
    let gh = FakeGitHub::start();
    gh.set(|w| w.check_runs.push(green_check()));
    let out = s.run(
        &gh,
        "DELIVER=pr\nVERIFY_COMMAND=\"test -f login.rs\"\nVERIFY_AT_START=true\n",
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(s.p.calls(), 1);
    let st = s.p.status();
    assert_eq!(st["exit_reason"], "delivered", "{st}");
    assert_eq!(st["delivery"]["pr_number"], 1);
    assert_eq!(st["delivery"]["checks"], "green");

    // The loop worked on hank/main; the remote has the work, not the secret, not hank's files.
    assert_eq!(head_branch(&s.p), "hank/main");
    let files = files_of(&s.remote, "hank/main");
    assert!(files.lines().any(|f| f == "login.rs"), "{files}");
    assert!(!files.lines().any(|f| f == ".env"), "{files}");
    assert!(!files.contains("events.jsonl"), "{files}");
    let history = git(&s.remote, &["log", "--all", "--name-only", "--format="]);
    assert!(!history.lines().any(|f| f == ".env"), "{history}");
    // The run did not lose the file; it says so, and the delivery event names it.
    assert!(
        std::fs::read_to_string(s.p.dir.join(".env"))
            .unwrap()
            .contains("API_KEY")
    );
    assert!(err.contains(".env looks like a secret"), "{err}");
    let d = s.deliveries();
    assert!(
        d.iter().any(|e| e["secrets_skipped"] == json!([".env"])),
        "{d:?}"
    );
    // The user's main is untouched.
    let main_files = files_of(&s.remote, "main");
    assert!(!main_files.contains("login.rs"), "{main_files}");

    // The PR: against main, hank's evidence as its body.
    assert_pr_from_hank_main(
        &gh,
        &[
            "- [x] [#12] Fix login",
            "`test -f login.rs` | failed (exit 1)",
            "`test -f login.rs` | passed (exit 0)",
            "Stop reason: `plan_complete`",
            "Closes #12",
        ],
    );
    assert!(
        gh.requests()
            .iter()
            .any(|r| r.method == "POST" && r.path == "/repos/o/r/issues/12/comments")
    );
    // The checks of exactly the pushed commit.
    let sha = git(&s.remote, &["rev-parse", "hank/main"]);
    assert_eq!(gh.world.lock().unwrap().commits_asked, vec![sha.clone()]);
    assert_eq!(d.last().unwrap()["head"], sha.as_str());
    // Pending, then green, each recorded; the exit comes after the delivery.
    let checks: Vec<&str> = d.iter().map(|e| e["checks"].as_str().unwrap()).collect();
    assert_eq!(checks, ["pending", "green"]);
    let events = s.p.events();
    assert_eq!(events.last().unwrap()["type"], "exit");
    assert_eq!(events.last().unwrap()["exit_reason"], "delivered");
    // No token anywhere hank wrote.
    assert_no_token(
        &s.p,
        &[
            ".hank/delivery.json",
            ".hank/events.jsonl",
            ".hank/status.json",
        ],
    );
    assert!(!err.contains(TOKEN));
}

/// `DELIVER=branch` with the git hook `hook` running `script`, which refuses until the work has
/// a LINT_OK file; the agent's second call, told each of `told`, adds it. The run delivers after
/// two calls, LINT_OK on the remote's `hank/main`.
fn refused_until_lint_ok(hook: &str, script: &str, told: &[&str]) -> (Setup, FakeGitHub) {
    let s = setup("Write the docs");
    git_hook(&s.p, hook, script);
    s.p.fake("effect-2.sh", "touch LINT_OK\n");
    let gh = FakeGitHub::start();
    let out = s.run(&gh, "DELIVER=branch\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(s.p.calls(), 2);
    assert_contains_all(&s.context(2), told);
    let files = files_of(&s.remote, "hank/main");
    assert!(files.lines().any(|f| f == "LINT_OK"), "{files}");
    assert_eq!(s.p.status()["exit_reason"], "delivered");
    (s, gh)
}

#[test]
fn a_pre_push_hook_rejection_goes_to_the_agent_and_the_fix_is_delivered() {
    let (s, gh) = refused_until_lint_ok(
        "pre-push",
        "#!/bin/sh\nif ! git ls-tree -r --name-only HEAD | grep -qx LINT_OK; then echo 'lint: docs/missing.md: no LINT_OK' >&2; exit 1; fi\n",
        // Loop 2 is told why the push was refused, with the hook's output.
        &[
            "The delivery was refused by a git hook or the remote",
            "lint: docs/missing.md: no LINT_OK",
        ],
    );
    assert!(!s.context(1).contains("refused"));
    let d = s.deliveries();
    let reasons: Vec<&str> = d
        .iter()
        .map(|e| e["exit_reason"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(reasons, ["push_rejected", "delivered"]);
    assert_eq!(d[1]["round"], 2);
    // No forge in branch mode.
    assert!(gh.requests().is_empty());
}

#[test]
fn a_hook_that_keeps_refusing_stops_the_run_after_two_rounds() {
    let s = setup("Write the docs");
    git_hook(&s.p, "pre-push", "#!/bin/sh\necho 'never' >&2\nexit 1\n");
    let gh = FakeGitHub::start();
    let out = s.run(&gh, "DELIVER=branch\n");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // The first call and two rounds back to the agent.
    assert_eq!(s.p.calls(), 3);
    assert_eq!(s.p.status()["exit_reason"], "push_rejected");
    let refs = git(&s.remote, &["for-each-ref", "--format=%(refname)"]);
    assert!(!refs.contains("hank/main"), "{refs}");
}

#[test]
fn red_ci_goes_to_the_next_loop_and_green_delivers() {
    let s = setup("Fix login");
    let gh = FakeGitHub::start();
    gh.set(|w| {
        w.check_runs_per_commit = vec![vec![green_check(), red_check()], vec![green_check()]]
    });
    let out = s.run(&gh, "DELIVER=pr\n");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(s.p.calls(), 2);
    let ctx = s.context(2);
    assert!(ctx.contains("CI failed on the pushed branch"), "{ctx}");
    assert!(ctx.contains("## Failing check: test (ubuntu)"), "{ctx}");
    assert!(
        ctx.contains("assertion failed at login.rs:7: expected 2, got 3"),
        "{ctx}"
    );
    // One PR, two pushed commits, each judged on its own checks.
    assert_eq!(pulls_created(&gh), 1);
    let asked = gh.world.lock().unwrap().commits_asked.clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[1], git(&s.remote, &["rev-parse", "hank/main"]));
    let d = s.deliveries();
    let checks: Vec<&str> = d.iter().map(|e| e["checks"].as_str().unwrap()).collect();
    assert_eq!(checks, ["pending", "failed", "pending", "green"]);
    assert_eq!(d[1]["check_names"], json!(["test (ubuntu)"]));
    assert!(err.contains("PR #1 hank/main → main"), "{err}");
    assert!(err.contains("checks red (test (ubuntu))"), "{err}");
    assert_eq!(s.p.status()["exit_reason"], "delivered");
    // The monitor shows the PR and its checks, and each delivery step in the events.
    let o = s.p.run(&["monitor", "--once"]);
    let text = crate::support::stdout(&o);
    // (`monitor --once` prints the status renderer's `delivery:` line; the TUI has a row.)
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("delivery: "))
        .unwrap_or_else(|| panic!("no delivery line in:\n{text}"));
    assert!(row.contains("→ https://github.com/o/r/pull/1"), "{row}");
    assert!(row.contains("checks green (delivered)"), "{row}");
    assert!(text.contains("delivery: PR #1 hank/main → main"), "{text}");
}

#[test]
fn ci_that_stays_red_stops_with_ci_failed_after_max_ci_rounds() {
    let s = setup("Fix login");
    let gh = FakeGitHub::start();
    gh.set(|w| w.check_runs.push(red_check()));
    let out = s.run(&gh, "DELIVER=pr\nMAX_CI_ROUNDS=1\n");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(s.p.calls(), 2);
    let st = s.p.status();
    assert_eq!(st["exit_reason"], "ci_failed");
    assert_eq!(st["delivery"]["checks"], "failed");
}

#[test]
fn no_ci_is_ci_missing_never_green() {
    let s = setup("Fix login");
    let gh = FakeGitHub::start();
    let out = s.run(&gh, "DELIVER=pr\nCI_APPEAR_TIMEOUT=1s\n");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(s.p.calls(), 1);
    assert_eq!(s.p.status()["exit_reason"], "ci_missing");
    assert_eq!(s.p.status()["delivery"]["checks"], "missing");
}

#[test]
fn a_changes_requested_review_goes_to_the_agent_once() {
    let s = setup("Fix login");
    let gh = FakeGitHub::start();
    gh.set(|w| {
        w.check_runs.push(green_check());
        w.reviews.push(json!({"id": 5, "user": {"login": "ann"}, "state": "CHANGES_REQUESTED", "body": "Please rename login()"}));
    });
    let out = s.run(&gh, "DELIVER=pr\nREVIEW_LOOP=true\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(s.p.calls(), 2);
    let ctx = s.context(2);
    assert!(ctx.contains("A review of the pull request"), "{ctx}");
    assert!(ctx.contains("Please rename login()"), "{ctx}");
    let d = s.deliveries();
    assert_eq!(d.last().unwrap()["reviews_seen"], 5);
    assert_eq!(s.p.status()["exit_reason"], "delivered");
}

#[test]
fn a_missing_remote_is_refused_before_any_call() {
    let s = setup("Fix login");
    git(&s.p.dir, &["remote", "remove", "origin"]);
    let gh = FakeGitHub::start();
    let out = s.run(&gh, "DELIVER=branch\n");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_contains(
        &stderr(&out),
        "git remote `origin` (DELIVER_REMOTE) does not exist",
    );
    assert_eq!(s.p.calls(), 0);
    assert_eq!(head_branch(&s.p), "main");
}

#[test]
fn ctrl_c_during_the_ci_wait_ends_the_run_interrupted() {
    let s = setup("Fix login");
    let gh = FakeGitHub::start();
    // No check ever appears: the run waits (up to CI_APPEAR_TIMEOUT) with checks pending.
    let child = s.spawn_waiting_for_ci(&gh);
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let out = wait_with_timeout(child, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let st = s.p.status();
    assert_eq!(st["exit_reason"], "interrupted");
    assert_eq!(st["delivery"]["exit_reason"], "interrupted");
    // The push had happened; the PR is open.
    assert_eq!(pulls_created(&gh), 1);
}

/// While the loop waits for CI, status.json's delivery says until when (CI_TIMEOUT after the
/// push once checks are seen) and how many checks are pending, and `hank status` shows it.
#[test]
fn the_ci_countdown_is_in_status_json_and_hank_status() {
    let s = setup("Fix login");
    let gh = FakeGitHub::start();
    let running =
        |name: &str| json!({"id": 21, "name": name, "status": "in_progress", "conclusion": null});
    gh.set(|w| w.check_runs = vec![running("build"), running("test")]);
    s.p.hankrc("RETRY_BACKOFF_SECONDS=0\nDELIVER=pr\nCI_TIMEOUT=30m\n");
    let child = at_fake_github(&mut s.p.cmd(), &gh)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hank run");
    let st = s.p.wait_status(Duration::from_secs(30), |st| {
        st["delivery"]["checks_pending"] == 2
    });
    let due: jiff::Timestamp = st["delivery"]["checks_due"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let left = due.duration_since(jiff::Timestamp::now()).as_secs();
    assert!((25 * 60..=30 * 60).contains(&left), "{st}");
    let shown = s.p.run_code(&["status"], 0);
    assert_contains_all(
        &crate::support::stdout(&shown),
        &["waiting:      for CI until", "2 checks pending"],
    );
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let out = wait_with_timeout(child, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    // The record of the step that ended carries no countdown.
    let delivered = s.p.status();
    assert!(
        delivered["delivery"].get("checks_due").is_none(),
        "{delivered}"
    );
}

/// The real `gh` (Debian's package) against the fake, as its HTTP proxy: the loop's red round
/// and green round go through `gh api`.
#[test]
fn the_real_gh_carries_a_red_then_green_round() {
    let Some(real_gh) = real_gh("the_real_gh_carries_a_red_then_green_round") else {
        return;
    };
    let s = setup("Fix login");
    let gh = FakeGitHub::start();
    gh.set(|w| w.check_runs_per_commit = vec![vec![red_check()], vec![green_check()]]);
    s.p.hankrc("RETRY_BACKOFF_SECONDS=0\nDELIVER=pr\n");
    let out = through_real_gh(&s.p, &real_gh, &gh).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(s.p.calls(), 2);
    assert!(s.context(2).contains("assertion failed at login.rs:7"));
    let reqs = gh.requests();
    // gh sends absolute-form requests to its proxy, at api.<GH_HOST>.
    assert!(
        reqs.iter().any(|r| r
            .target
            .starts_with("http://api.github.localhost/repos/o/r/commits/")),
        "{reqs:?}"
    );
    assert_eq!(pulls_created(&gh), 1);
    assert_eq!(gh.world.lock().unwrap().commits_asked.len(), 2);
    assert_eq!(s.p.status()["exit_reason"], "delivered");
}

#[test]
fn a_pre_commit_hook_refusal_goes_to_the_agent_in_the_push_rounds() {
    refused_until_lint_ok(
        "pre-commit",
        "#!/bin/sh\ngit diff --cached --name-only | grep -qx LINT_OK || { echo 'pre-commit: stage LINT_OK first' >&2; exit 1; }\n",
        &[
            "was refused by a git hook (pre-commit",
            "pre-commit: stage LINT_OK first",
        ],
    );
}

#[test]
fn hank_ctl_stop_during_the_ci_wait_ends_the_run() {
    let s = setup("Fix login");
    let gh = FakeGitHub::start();
    let child = s.spawn_waiting_for_ci(&gh);
    let o = s.p.run(&["ctl", "stop"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = wait_with_timeout(child, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(s.p.status()["delivery"]["exit_reason"], "interrupted");
    assert!(
        s.p.events()
            .iter()
            .any(|e| e["type"] == "control" && e["command"] == "stop"),
        "the stop was taken and recorded"
    );
}

/// The agent never holds the forge's token: `hank run --deliver pr` with `GH_TOKEN`,
/// `GITHUB_TOKEN`, a GitLab token and a NOTIFY target in hank's environment, while the fake
/// agent writes its own environment out; hank still opens the PR with its token.
#[test]
fn the_agent_never_sees_the_forge_token_hank_delivers_with() {
    let s = setup("Fix login");
    s.p.fake(
        "effect.sh",
        &format!("{TICK_ONE}env > \"$FAKE_CLAUDE_DIR/agent-env\"\n"),
    );
    let gh = FakeGitHub::start();
    gh.set(|w| w.check_runs.push(green_check()));
    s.p.hankrc("RETRY_BACKOFF_SECONDS=0\nDELIVER=pr\n");
    let out = at_fake_github(&mut s.p.cmd(), &gh)
        .env("GITHUB_TOKEN", "ghs-actions-token-0123456789")
        .env("GITLAB_TOKEN", "glpat-0123456789abcdef")
        .env("CI_JOB_TOKEN", "ci-job-token-0123456789")
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "http.https://github.com/.extraheader")
        .env(
            "GIT_CONFIG_VALUE_0",
            "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46c2VjcmV0",
        )
        .output()
        .expect("hank run");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(pulls_created(&gh), 1);
    let env = std::fs::read_to_string(s.p.fake.join("agent-env")).unwrap();
    for secret in [
        TOKEN,
        "ghs-actions-token-0123456789",
        "glpat-0123456789abcdef",
        "ci-job-token-0123456789",
        "eC1hY2Nlc3MtdG9rZW46c2VjcmV0",
    ] {
        assert!(!env.contains(secret), "{secret} reached the agent:\n{env}");
    }
    for name in [
        "GH_TOKEN=",
        "GITHUB_TOKEN=",
        "GITLAB_TOKEN=",
        "CI_JOB_TOKEN=",
    ] {
        assert!(!env.lines().any(|l| l.starts_with(name)), "{name}\n{env}");
    }
    // Hank's own settings the agent may keep (the repository it works on) are still there.
    assert!(env.lines().any(|l| l == "GH_REPO=o/r"), "{env}");
}

/// The agent's words in the PR body close, mention and render nothing: its recommendation
/// says `Closes #9`, `resolves owner/repo#10`, an issue URL, `@someone` and an `<img>`; the
/// body the fake GitHub received keeps hank's own `Closes #12` as the only closing line.
#[test]
fn closing_keywords_and_mentions_in_the_agents_words_are_defused_in_the_pr() {
    let s = setup("[#12] Fix login");
    let text = "Done.";
    let answer = crate::support::result_json("COMPLETE", "IMPLEMENTATION", true, text).replace(
        "RECOMMENDATION: keep going",
        "RECOMMENDATION: Closes #9, resolves owner/repo#10, fixes https://github.com/o/r/issues/11 @someone <img src=https://evil.example/t.png>",
    );
    s.p.fake("response", &answer);
    let gh = FakeGitHub::start();
    gh.set(|w| w.check_runs.push(green_check()));
    let out = s.run(&gh, "DELIVER=pr\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let pr = crate::deliver::created_pr(&gh).json();
    let body = pr["body"].as_str().unwrap();
    assert!(
        body.contains("evil.example"),
        "the words are kept, inert: {body}"
    );
    let closing = regex::Regex::new(
        r"(?i)\b(close[sd]?|fix(e[sd])?|resolve[sd]?)\b:?\s*(([\w.-]+/[\w.-]+)?#\d|https?://)",
    )
    .unwrap();
    let closes: Vec<&str> = closing.find_iter(body).map(|m| m.as_str()).collect();
    assert_eq!(closes, ["Closes #1"], "{body}");
    assert!(body.contains("Closes #12"), "{body}");
    assert!(!body.contains("@someone"), "{body}");
    let img = body.find("<img").expect("the img kept as text");
    let fence = body[..img]
        .rfind("```text")
        .expect("inside the summary's code block");
    assert!(!body[fence..img].contains("\n```\n"), "{body}");
}

/// A run whose pull request the forge refused: branch pushed, the run stops `forge_failed`
/// (exit 1) with the forge's own error. Ends with the run's project and the fake.
fn stopped_at_the_forge() -> (Setup, FakeGitHub) {
    let s = setup("[#12] Fix login");
    s.p.fake(
        "effect.sh",
        &format!("{TICK_ONE}echo 'fn login() {{}}' > login.rs\n"),
    );
    let gh = FakeGitHub::start();
    gh.set(|w| {
        w.check_runs.push(green_check());
        w.refuse_pulls = 1;
    });
    let out = s.run(&gh, "DELIVER=pr\nVERIFY_COMMAND=\"test -f login.rs\"\n");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let st = s.p.status();
    assert_eq!(st["exit_reason"], "forge_failed", "{st}");
    let exit = s.p.events_of("exit");
    let why = exit.last().unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert_contains_all(
        &why,
        &[
            "the pull request could not be opened",
            "Resource not accessible by integration",
            "hank deliver",
        ],
    );
    assert_eq!(exit.last().unwrap()["exit_reason"], "forge_failed");
    // The branch is on the remote; no pull request yet.
    assert!(
        files_of(&s.remote, "hank/main")
            .lines()
            .any(|f| f == "login.rs")
    );
    assert_eq!(pulls_created(&gh), 1);
    assert!(gh.world.lock().unwrap().pulls.is_empty());
    (s, gh)
}

/// The pull request a resumed delivery opened carries the evidence of the run that did the
/// work, and the issue it closes is told.
#[track_caller]
fn assert_resumed_with_the_runs_evidence(s: &Setup, gh: &FakeGitHub, out: &Output) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_contains(&err, "finishing the last run's delivery (forge_failed");
    assert_eq!(s.p.calls(), 1, "no new run");
    assert_eq!(gh.world.lock().unwrap().pulls.len(), 1);
    let pr = pulls(gh).last().unwrap().json();
    assert_eq!(
        (pr["head"].as_str(), pr["base"].as_str()),
        (Some("hank/main"), Some("main"))
    );
    let body = pr["body"].as_str().unwrap();
    assert_contains_all(
        body,
        &[
            "- [x] [#12] Fix login",
            "`test -f login.rs` | passed (exit 0)",
            "Closes #12",
        ],
    );
    assert!(!body.contains("No fix_plan item was checked off"), "{body}");
    assert!(
        gh.requests()
            .iter()
            .any(|r| r.method == "POST" && r.path == "/repos/o/r/issues/12/comments")
    );
    let d = s.deliveries();
    assert_eq!(d.last().unwrap()["checks"], "green", "{d:?}");
    assert_eq!(d.last().unwrap()["exit_reason"], "delivered");
}

#[test]
fn a_refused_pull_request_stops_forge_failed_and_hank_deliver_finishes_it() {
    let (s, gh) = stopped_at_the_forge();
    let out = at_fake_github(&mut s.p.cmd(), &gh)
        .arg("deliver")
        .output()
        .expect("hank deliver");
    assert_resumed_with_the_runs_evidence(&s, &gh, &out);
    // Finished: nothing is left to resume.
    let again = at_fake_github(&mut s.p.cmd(), &gh)
        .arg("deliver")
        .output()
        .expect("hank deliver");
    assert!(!stderr(&again).contains("finishing the last run's delivery"));
}

#[test]
fn hank_run_deliver_again_finishes_the_stopped_delivery_without_a_new_run() {
    let (s, gh) = stopped_at_the_forge();
    let out = at_fake_github(&mut s.p.cmd(), &gh)
        .args(["run", "--deliver", "pr"])
        .output()
        .expect("hank run");
    assert_resumed_with_the_runs_evidence(&s, &gh, &out);
}

#[test]
fn after_ci_missing_hank_deliver_waits_for_the_checks_again_and_says_the_next_step() {
    let s = setup("[#12] Fix login");
    s.p.fake(
        "effect.sh",
        &format!("{TICK_ONE}echo 'fn login() {{}}' > login.rs\n"),
    );
    let gh = FakeGitHub::start();
    let out = s.run(
        &gh,
        "DELIVER=pr\nCI_APPEAR_TIMEOUT=1s\nVERIFY_COMMAND=\"test -f login.rs\"\n",
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(s.p.status()["exit_reason"], "ci_missing");
    // The wait showed when the checks were due and how long was left; the stop says the
    // next step in words.
    assert_contains_all(&err, &["waiting (checks) until", "left"]);
    assert_contains_all(&err, &["CI_WAIT=false", "--deliver branch"]);
    // CI appears; `hank deliver` finishes the delivery: the same pull request, its checks.
    gh.set(|w| w.check_runs.push(green_check()));
    let out = at_fake_github(&mut s.p.cmd(), &gh)
        .arg("deliver")
        .output()
        .expect("hank deliver");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("not verified"), "{err}");
    assert_contains(&err, "finishing the last run's delivery (ci_missing");
    assert_eq!(pulls_created(&gh), 1);
    assert_eq!(s.deliveries().last().unwrap()["checks"], "green");
}

/// The agent commits secrets itself (`git add -f`): what is pushed is scanned, not only what
/// hank stages.
pub(crate) const COMMITS_SECRETS: &str = r#"mkdir -p keys notes
printf 'DATABASE_URL=postgres://app:hunter2@db.internal/prod\nSTRIPE_KEY=sk_live_51Hx\n' > .env
printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n' > keys/deploy_key
printf '{"type":"service_account","client_email":"ci@p.iam.gserviceaccount.com"}\n' > credentials.json
printf '//registry.npmjs.org/:_authToken=npm_Zq8vR2mTx7LpK4nW9bYc3HdF6gJ1sA5eU0oI\n' > .npmrc
printf 'db_password = "correct-horse-battery"\n' > prod.tfvars
printf 'export GH_TOKEN=ghp_Zq8vR2mTx7LpK4nW9bYc3HdF6gJ1sA5eU0oIiQw\n' > notes/setup.md
git add -f .env keys/deploy_key credentials.json .npmrc prod.tfvars notes/setup.md
git -c user.name=agent -c user.email=agent@example.com commit -q -m 'add config'
"#;

#[test]
fn secrets_the_agent_commits_itself_refuse_the_push() {
    let s = setup("[#12] Fix login");
    s.p.fake("effect.sh", &format!("{TICK_ONE}{COMMITS_SECRETS}"));
    let gh = FakeGitHub::start();
    let out = s.run(&gh, "DELIVER=pr\n");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(s.p.status()["exit_reason"], "secrets_in_commits", "{err}");
    assert_contains_all(
        &err,
        &[
            "secrets_in_commits",
            ".env: a credentials file",
            "keys/deploy_key: a key file",
            "credentials.json: a credentials file",
            ".npmrc: a credentials file",
            "prod.tfvars: a private key, key store or secret variables file",
            "[secrets_in_commits, exit 1]",
            "notes/setup.md: contains a GitHub token",
            "DELIVER_ALLOW_FILES",
        ],
    );
    // Nothing pushed, no pull request.
    let branches = git(&s.remote, &["branch", "--list"]);
    assert!(!branches.contains("hank/main"), "{branches}");
    assert_eq!(pulls_created(&gh), 0);
}

#[test]
fn a_file_allowed_on_purpose_is_pushed() {
    let s = setup("[#12] Fix login");
    s.p.fake(
        "effect.sh",
        &format!(
            "{TICK_ONE}printf 'region = \"eu-west-1\"\\n' > prod.tfvars\ngit add -f prod.tfvars\ngit -c user.name=a -c user.email=a@example.com commit -q -m vars\n"
        ),
    );
    let gh = FakeGitHub::start();
    let refused = s.run(&gh, "DELIVER=branch\n");
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert_contains(&stderr(&refused), "prod.tfvars");

    let s = setup("[#12] Fix login");
    s.p.fake(
        "effect.sh",
        &format!(
            "{TICK_ONE}printf 'region = \"eu-west-1\"\\n' > prod.tfvars\ngit add -f prod.tfvars\ngit -c user.name=a -c user.email=a@example.com commit -q -m vars\n"
        ),
    );
    let out = s.run(&gh, "DELIVER=branch\nDELIVER_ALLOW_FILES=prod.tfvars\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let files = files_of(&s.remote, "hank/main");
    assert!(files.lines().any(|f| f == "prod.tfvars"), "{files}");
}

/// The agent moves the remote-tracking ref of the base onto its own secret commit, so that a
/// scan trusting `refs/remotes/origin/main` would think the remote has it: the scan asks the
/// remote itself, and the push is refused.
#[test]
fn a_moved_remote_tracking_ref_hides_no_secret_from_the_scan() {
    let s = setup("[#12] Fix login");
    s.p.fake(
        "effect.sh",
        &format!(
            "{TICK_ONE}{COMMITS_SECRETS}git update-ref refs/remotes/origin/main HEAD\ngit update-ref refs/remotes/origin/hank/main HEAD\n"
        ),
    );
    let gh = FakeGitHub::start();
    let out = s.run(&gh, "DELIVER=branch\n");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(s.p.status()["exit_reason"], "secrets_in_commits", "{err}");
    assert_contains(&err, "keys/deploy_key: a key file");
    let branches = git(&s.remote, &["branch", "--list"]);
    assert!(!branches.contains("hank/main"), "{branches}");
}

/// During the run the agent points the push somewhere else (another remote URL, a credential
/// helper of its own): the push is refused and names the keys; nothing reaches either place.
#[test]
fn git_configuration_the_agent_changed_refuses_the_push() {
    let s = setup("[#12] Fix login");
    let elsewhere = s.p.home.join("elsewhere.git");
    git(
        &s.p.home,
        &["init", "-q", "--bare", &elsewhere.display().to_string()],
    );
    let marker = s.p.home.join("helper-ran");
    s.p.fake(
        "effect.sh",
        &format!(
            "{TICK_ONE}git config remote.origin.pushurl '{}'\ngit config credential.helper '!touch {}; true'\n",
            elsewhere.display(),
            marker.display()
        ),
    );
    let gh = FakeGitHub::start();
    let out = s.run(&gh, "DELIVER=branch\n");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_contains_all(
        &err,
        &[
            "refused",
            "git config remote.origin.pushurl",
            "git config credential.helper",
            "hank config accept",
        ],
    );
    for bare in [&s.remote, &elsewhere] {
        let branches = git(bare, &["branch", "--list"]);
        assert!(!branches.contains("hank/main"), "{branches}");
    }
    assert!(!marker.exists(), "the agent's credential helper ran");
}

/// A pre-push hook the agent planted during this very run does not run at its delivery
/// (the configuration it changed is not approved while the run is still going).
#[test]
fn a_hook_planted_during_the_run_does_not_run_at_its_delivery() {
    let s = setup("[#12] Fix login");
    let marker = s.p.home.join("hook-ran");
    s.p.fake(
        "effect.sh",
        &format!(
            "{TICK_ONE}printf '#!/bin/sh\\nenv > {}\\n' > .git/hooks/pre-push\nchmod +x .git/hooks/pre-push\n",
            marker.display()
        ),
    );
    let gh = FakeGitHub::start();
    let out = s.run(&gh, "DELIVER=branch\n");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let branches = git(&s.remote, &["branch", "--list"]);
    assert!(branches.contains("hank/main"), "{branches}");
    assert!(!marker.exists(), "the agent's hook ran at the push");
}

/// REVIEW_AGENT rejects the work every round: with DELIVER=pr it still goes up, as a draft
/// pull request nobody waits for or merges, and the run stops `review_rejected` (exit 2).
#[test]
fn work_the_reviewer_rejected_is_delivered_as_a_draft_and_the_run_stops_rejected() {
    let s = setup("Fix login");
    let review = s.p.fake.join("review");
    std::fs::create_dir_all(&review).expect("review folder");
    std::fs::write(
        review.join("verdict"),
        "---HANK_REVIEW---\nVERDICT: CHANGES\nFINDINGS:\n- [blocker] src/work.txt: not what the item asks\n---END_HANK_REVIEW---\n",
    )
    .expect("verdict");
    let gh = FakeGitHub::start();
    gh.set(|w| w.check_runs.push(green_check()));
    let out = s.run(
        &gh,
        "DELIVER=pr\nREVIEW_AGENT=claude\nREVIEW_AGENT_CMD=reviewer\nREVIEW_MAX_ROUNDS=1\n",
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let st = s.p.status();
    assert_eq!(st["exit_reason"], "review_rejected", "{st}");
    let created = pulls(&gh);
    assert_eq!(created.len(), 1, "{err}");
    let body: Value = serde_json::from_str(&created[0].body).expect("PR request JSON");
    assert_eq!(body["draft"], true, "{body}");
    assert_contains(
        body["body"].as_str().unwrap_or_default(),
        "not what the item asks",
    );
    // Pushed, never waited for.
    let files = files_of(&s.remote, "hank/main");
    assert!(files.lines().any(|f| f == "src/work.txt"), "{files}");
    assert_ne!(st["delivery"]["checks"], "green", "{st}");
}
