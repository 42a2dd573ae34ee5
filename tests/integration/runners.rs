//! The fleet as CI jobs (`hank fleet plan`, `hank fleet run-task`): "runners" are fresh clones
//! of one bare remote on disk, each with a HOME of its own, run as the generated workflow runs
//! them — plan, one task per runner, a task stopped at `--max-runtime` continued by a later
//! runner with its ledger and state, a dependent task started once its predecessor is merged.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::fleet::calls;
use crate::state::{calls_in, next_job};
use crate::support::{Project, assert_contains, git, poll, stderr, stdout};

/// The fake agent: ticks the first open item of the plan it is given and appends to
/// `src/<task>.txt` (the task named by the plan's `##` heading), so that tasks never touch
/// the same file.
const WORK: &str = r#"t=$(grep -m1 '^## ' .hank/fix_plan.md | cut -c4- | cut -d' ' -f1)
sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
mkdir -p src && echo "$t" >> "src/$t.txt"
echo "$t" >> "$FAKE_CLAUDE_DIR/log"
"#;

const PLAN: &str = "# Fix plan\n\n## Alpha\n- [ ] a1\n- [ ] a2\n\n## Beta\n- [ ] b1\n\n\
                    ## Gamma (after: Alpha)\n- [ ] g1\n";

/// The project pushed to a bare `origin` (its `main`), with `hankrc`.
fn origin(hankrc: &str) -> (Project, PathBuf) {
    let p = Project::new(&[]);
    std::fs::write(p.dir.join(".hank/fix_plan.md"), PLAN).unwrap();
    p.hankrc(hankrc);
    let remote = p.git_pushed_to_origin();
    identity(&p.dir);
    (p, remote)
}

/// A runner: a fresh clone of `remote` with a HOME (per-user state), a git identity and a
/// fake agent of its own.
fn runner(remote: &Path) -> Project {
    let q = next_job(remote);
    identity(&q.dir);
    q.fake("effect.sh", WORK);
    q
}

/// The runner's git identity (the action sets one when the runner has none).
fn identity(dir: &Path) {
    git(dir, &["config", "user.name", "runner"]);
    git(dir, &["config", "user.email", "runner@example.com"]);
}

fn plan(p: &Project) -> Vec<Value> {
    plan_saying(p).0
}

/// `hank fleet plan --json` in `p`: the tasks listed, and what it said on stderr.
fn plan_saying(p: &Project) -> (Vec<Value>, String) {
    let o = p.run(&["fleet", "plan", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("plan --json is JSON");
    (v.as_array().expect("an array").clone(), stderr(&o))
}

fn names(tasks: &[Value]) -> Vec<String> {
    tasks
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A file of the remote's `branch`.
fn remote_file(remote: &Path, branch: &str, path: &str) -> String {
    git(remote, &["show", &format!("{branch}:{path}")])
}

fn wait_for_claim(remote: &Path, name: &str) {
    let r = format!("refs/hank/state/{name}");
    poll(Duration::from_secs(30), || {
        let out = Command::new("git")
            .args(["show", &format!("{r}:hank-state.json")])
            .current_dir(remote)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git");
        (out.status.success() && String::from_utf8_lossy(&out.stdout).contains("\"lease\""))
            .then_some(())
    })
    .unwrap_or_else(|| panic!("no claim of {name} appeared on the remote"));
}

fn done(o: &Output, code: i32) {
    assert_eq!(o.status.code(), Some(code), "{}", stderr(o));
}

/// plan → Alpha and Beta in two runners at once (a third runner's claim of Alpha refused) →
/// Alpha stops at --max-runtime and is continued by a new runner with its ledger → Gamma
/// listed and run only once Alpha is merged.
#[test]
#[ignore = "slow: cargo test -- --ignored (.ci/run runs them), or cargo nextest run --run-ignored all"]
fn three_runners_plan_run_continue_and_respect_the_order() {
    let (_origin, remote) = origin("RETRY_BACKOFF_SECONDS=0\nDELIVER=branch\n");
    let r1 = runner(&remote);

    // The plan job: Alpha and Beta can start; Gamma waits for Alpha.
    let (tasks, said) = plan_saying(&r1);
    assert_contains(&said, "Gamma waits for Alpha to be merged");
    assert_eq!(names(&tasks), ["Alpha", "Beta"]);
    assert_eq!(tasks[0]["slug"], "alpha");
    assert_eq!(tasks[0]["branch"], "hank/alpha");
    assert_eq!(tasks[0]["after"], serde_json::json!([]));
    assert_eq!(tasks[0]["items"], serde_json::json!(["a1", "a2"]));

    // Two run-task jobs at once; Alpha's agent is slow, so its run stops at --max-runtime
    // after its first call.
    r1.fake("sleep", "1.5");
    // Beta is started by two jobs at the same moment (a re-run racing the scheduled one): one
    // claim wins, the other job stops with exit 2 before any agent call.
    let r2 = runner(&remote);
    let r2b = runner(&remote);
    r2.fake("sleep", "1.5");
    r2b.fake("sleep", "1.5");
    let alpha = r1.spawn(&["fleet", "run-task", "Alpha", "--max-runtime", "1s"]);
    let beta = r2.spawn(&["fleet", "run-task", "beta"]);
    let beta_twin = r2b.spawn(&["fleet", "run-task", "Beta"]);
    // A third job of Alpha while the first holds it: refused, no agent call.
    wait_for_claim(&remote, "alpha");
    let r3 = runner(&remote);
    let o = r3.run(&["fleet", "run-task", "Alpha"]);
    done(&o, 2);
    assert_contains(&stderr(&o), "is claimed by");
    assert!(calls(&r3).is_empty());
    let alpha = alpha.wait_with_output().unwrap();
    let beta = beta.wait_with_output().unwrap();
    let beta_twin = beta_twin.wait_with_output().unwrap();
    done(&alpha, 3);
    assert_eq!(calls(&r1), ["Alpha"], "{}", stderr(&alpha));
    let (beta, r2, lost) = match (beta.status.code(), beta_twin.status.code()) {
        (Some(0), Some(2)) => (beta, r2, (beta_twin, r2b)),
        (Some(2), Some(0)) => (beta_twin, r2b, (beta, r2)),
        other => panic!("{other:?}\nA: {}\nB: {}", stderr(&beta), stderr(&beta_twin)),
    };
    let said = stderr(&lost.0);
    assert!(
        said.contains("is claimed by")
            || said.contains("first (the push's compare-and-swap failed)"),
        "{said}"
    );
    assert!(calls(&lost.1).is_empty(), "{said}");
    assert_eq!(calls(&r2), ["Beta"], "{}", stderr(&beta));
    assert_contains(&stderr(&beta), "pushed hank/beta");
    // The stopped task's work and state went to the remote; the claim was released.
    let wip = remote_file(&remote, "hank/alpha", ".hank/fix_plan.md");
    assert!(wip.contains("- [x] a1\n- [ ] a2"), "{wip}");
    assert!(wip.contains("## Beta\n- [ ] b1"), "{wip}");
    assert!(remote_file(&remote, "hank/alpha", "src/Alpha.txt").contains("Alpha"));
    let bundle = remote_file(&remote, "refs/hank/state/alpha", "hank-state.json");
    assert!(!bundle.contains("\"lease\""), "{bundle}");
    // Beta's branch holds its finished work: the whole plan with Beta's item ticked.
    let b = remote_file(&remote, "hank/beta", ".hank/fix_plan.md");
    assert!(
        b.contains("## Beta\n- [x] b1") && b.contains("- [ ] a1"),
        "{b}"
    );

    // The next scheduled plan: Alpha only (Beta waits for its merge, Gamma for Alpha).
    let r4 = runner(&remote);
    let (tasks, said) = plan_saying(&r4);
    assert_contains(&said, "Beta is finished on hank/beta");
    assert_eq!(names(&tasks), ["Alpha"]);
    // Gamma cannot start yet.
    let o = r4.run(&["fleet", "run-task", "Gamma"]);
    done(&o, 1);
    assert_contains(&stderr(&o), "comes after Alpha, not merged yet");
    // Alpha continues in the new runner: the first job's call is in its ledger, its work
    // continues from a1 ticked (one more call, not two).
    let o = r4.run(&["fleet", "run-task", "Alpha"]);
    done(&o, 0);
    let e = stderr(&o);
    assert!(e.contains("restored the state of alpha"), "{e}");
    assert!(e.contains("(1 call(s) and"), "{e}");
    // The session and the loop count came along: the agent resumes the first job's session.
    assert!(
        e.contains("loop 2: calling the agent (resuming the session)"),
        "{e}"
    );
    assert!(e.contains("continuing the work of hank/alpha"), "{e}");
    assert_eq!(calls(&r4), ["Alpha"], "{e}");
    assert!(calls_in(&r4) >= 2, "{e}");
    let fin = remote_file(&remote, "hank/alpha", ".hank/fix_plan.md");
    assert!(fin.contains("- [x] a1\n- [x] a2"), "{fin}");
    assert_eq!(
        remote_file(&remote, "hank/alpha", "src/Alpha.txt"),
        "Alpha\nAlpha"
    );
    // Its state ref carries both jobs' calls.
    let bundle: Value = serde_json::from_str(&remote_file(
        &remote,
        "refs/hank/state/alpha",
        "hank-state.json",
    ))
    .unwrap();
    assert_eq!(
        bundle["calls"].as_array().map(Vec::len),
        Some(2),
        "{bundle}"
    );

    // Someone merges Alpha's and Beta's branches into main (the pull requests).
    let m = runner(&remote);
    git(
        &m.dir,
        &["fetch", "-q", "origin", "hank/alpha", "hank/beta"],
    );
    git(&m.dir, &["merge", "-q", "--no-edit", "origin/hank/alpha"]);
    git(&m.dir, &["merge", "-q", "--no-edit", "origin/hank/beta"]);
    git(&m.dir, &["push", "-q", "origin", "main"]);

    // Now Gamma can start, and nothing else is listed.
    let r5 = runner(&remote);
    assert_eq!(names(&plan(&r5)), ["Gamma"]);
    let o = r5.run(&["fleet", "run-task", "Gamma"]);
    done(&o, 0);
    assert_eq!(calls(&r5), ["Gamma"], "{}", stderr(&o));
    let g = remote_file(&remote, "hank/gamma", ".hank/fix_plan.md");
    assert!(
        g.contains("- [x] a2") && g.contains("- [x] b1") && g.contains("- [x] g1"),
        "{g}"
    );
    // Once Gamma's merged too, the plan is empty; running a merged task does nothing.
    git(&m.dir, &["fetch", "-q", "origin", "hank/gamma"]);
    git(&m.dir, &["merge", "-q", "--no-edit", "origin/hank/gamma"]);
    git(&m.dir, &["push", "-q", "origin", "main"]);
    let r6 = runner(&remote);
    assert!(plan(&r6).is_empty());
    let o = r6.run(&["fleet", "run-task", "Gamma"]);
    done(&o, 0);
    assert_contains(&stderr(&o), "merged already");
    assert!(calls(&r6).is_empty());
}

/// An unknown task is an error naming the known tasks; outside CI, without a remote, the plan
/// reads the checkout alone and a task runs with `--remote none`, its work on its branch.
#[test]
fn run_task_outside_ci_and_an_unknown_task() {
    let (p, _remote) = origin("RETRY_BACKOFF_SECONDS=0\n");
    p.fake("effect.sh", WORK);
    let o = p.run(&["fleet", "run-task", "Delta"]);
    done(&o, 1);
    let e = stderr(&o);
    assert!(e.contains("no task \"Delta\""), "{e}");
    assert!(e.contains("Alpha, Beta, Gamma"), "{e}");
    assert!(p.calls() == 0);

    // A local change is never mixed into a task's branch.
    std::fs::write(p.dir.join("notes.txt"), "mine\n").unwrap();
    let o = p.run(&["fleet", "run-task", "Beta", "--remote", "none"]);
    done(&o, 1);
    assert_contains(&stderr(&o), "notes.txt");
    std::fs::remove_file(p.dir.join("notes.txt")).unwrap();

    // Without a git identity nothing runs (its work could not be committed); git guesses
    // none here (user.useConfigOnly), as on a machine whose host name has no domain.
    git(&p.dir, &["config", "--unset", "user.email"]);
    git(&p.dir, &["config", "user.useConfigOnly", "true"]);
    let o = p.run(&["fleet", "run-task", "Beta", "--remote", "none"]);
    done(&o, 1);
    assert_contains(&stderr(&o), "git has no identity to commit with");
    assert_contains(&stderr(&o), "GIT_AUTHOR_EMAIL");
    assert!(p.calls() == 0);
    identity(&p.dir);

    let o = p.run(&["fleet", "plan", "--remote", "none"]);
    done(&o, 0);
    assert_eq!(
        stdout(&o),
        "Alpha\thank/alpha\t2 open item(s)\nBeta\thank/beta\t1 open item(s)\n"
    );
    let o = p.run(&["fleet", "plan", "--remote", "upstream"]);
    done(&o, 1);
    assert_contains(&stderr(&o), "no git remote \"upstream\"");

    let o = p.run(&["fleet", "run-task", "Beta", "--remote", "none"]);
    done(&o, 0);
    assert_eq!(calls(&p), ["Beta"], "{}", stderr(&o));
    assert_eq!(git(&p.dir, &["branch", "--show-current"]), "hank/beta");
    let plan = std::fs::read_to_string(p.dir.join(".hank/fix_plan.md")).unwrap();
    assert_eq!(plan, PLAN.replace("- [ ] b1", "- [x] b1"));
    assert_eq!(git(&p.dir, &["status", "--porcelain"]), "");
}

/// An identity given only by GIT_AUTHOR_*/GIT_COMMITTER_* is one git accepts: the task runs
/// and its work is committed with it.
#[test]
fn run_task_takes_an_identity_from_the_environment() {
    let (p, _remote) = origin("RETRY_BACKOFF_SECONDS=0\n");
    p.fake("effect.sh", WORK);
    git(&p.dir, &["config", "--unset", "user.email"]);
    git(&p.dir, &["config", "--unset", "user.name"]);
    git(&p.dir, &["config", "user.useConfigOnly", "true"]);
    let env = [
        ("GIT_AUTHOR_NAME", "Env Author"),
        ("GIT_AUTHOR_EMAIL", "author@example.test"),
        ("GIT_COMMITTER_NAME", "Env Committer"),
        ("GIT_COMMITTER_EMAIL", "committer@example.test"),
    ];
    let o = p
        .spawn_env(&env, &["fleet", "run-task", "Beta", "--remote", "none"])
        .wait_with_output()
        .unwrap();
    done(&o, 0);
    assert_eq!(calls(&p), ["Beta"], "{}", stderr(&o));
    assert_eq!(
        git(&p.dir, &["log", "-1", "--format=%ae %ce", "hank/beta"]),
        "author@example.test committer@example.test"
    );
}

/// A run-task job as the action runs it (`DELIVER=pr`, `CI_WAIT=false`): the finished task's
/// pull request is opened from `hank/<slug>` into the branch the job started on, through the
/// fake GitHub API; the state ref records the delivery in its receipts.
#[test]
fn a_finished_task_is_delivered_as_a_pull_request() {
    let (_origin, remote) = origin("RETRY_BACKOFF_SECONDS=0\n");
    let gh = crate::fake_github::FakeGitHub::start();
    let r = runner(&remote);
    let o = r
        .cmd()
        .args(["fleet", "run-task", "Beta"])
        .env("DELIVER", "pr")
        .env("CI_WAIT", "false")
        .env("GH_REPO", "o/r")
        .env("GH_TOKEN", "ghs-fake-token-for-runners")
        .env("GITHUB_API_URL", gh.url())
        .output()
        .unwrap();
    done(&o, 0);
    let e = stderr(&o);
    assert!(e.contains("pull request #1"), "{e}");
    let pr = crate::deliver::created_pr(&gh).json();
    assert_eq!(pr["head"], "hank/beta");
    assert_eq!(pr["base"], "main");
    assert!(
        pr["body"].as_str().unwrap_or_default().contains("b1"),
        "{pr}"
    );
    // The branch carries the whole plan with Beta's item ticked, and the work.
    let plan = remote_file(&remote, "hank/beta", ".hank/fix_plan.md");
    assert_eq!(plan, PLAN.replace("- [ ] b1", "- [x] b1").trim_end());
    assert!(remote_file(&remote, "hank/beta", "src/Beta.txt").contains("Beta"));
    assert_eq!(
        r.read_json(".hank/delivery.json")["pr_url"],
        "https://github.com/o/r/pull/1"
    );
    let bundle = remote_file(&remote, "refs/hank/state/beta", "hank-state.json");
    assert!(bundle.contains("\"delivery\""), "{bundle}");
    assert!(!bundle.contains("ghs-fake-token-for-runners"));
}

/// The generated workflow's plan step consumes `hank fleet plan --json` as written: its jq
/// program, taken from the workflow, keeps every task for an empty `tasks` input, the tasks
/// named (by name or slug) otherwise, and gives `[]` for an unknown name.
#[test]
fn the_workflow_plan_step_filters_the_plan_output() {
    if !crate::support::cmd_exists("jq") {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "jq is required under CI=true"
        );
        eprintln!("note: jq not installed; test skipped");
        return;
    }
    let (p, _remote) = origin("RETRY_BACKOFF_SECONDS=0\n");
    let o = p.run(&["enable-ci", "--github-actions", "--action", "o/hank@v1"]);
    done(&o, 0);
    let wf = std::fs::read_to_string(p.dir.join(".github/workflows/hank.yml")).unwrap();
    let start = wf
        .find("jq -c --arg only \"${TASKS:-}\" \\\n")
        .expect("the jq call");
    let rest = &wf[start..];
    let open = rest.find('\'').unwrap() + 1;
    let close = rest[open..].find('\'').unwrap() + open;
    let program = &rest[open..close];
    let o = p.run(&["fleet", "plan", "--json"]);
    done(&o, 0);
    let plan_json = stdout(&o);
    let filter = |only: &str| -> Value {
        let mut c = Command::new("jq")
            .args(["-c", "--arg", "only", only, program])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        c.stdin
            .take()
            .unwrap()
            .write_all(plan_json.as_bytes())
            .unwrap();
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "jq failed on {only:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let all = filter("");
    assert_eq!(names(all.as_array().unwrap()), ["Alpha", "Beta"]);
    assert_eq!(all[1]["slug"], "beta");
    let some = filter(" beta , Gamma");
    assert_eq!(names(some.as_array().unwrap()), ["Beta"]);
    assert_eq!(names(filter("Alpha").as_array().unwrap()), ["Alpha"]);
    assert_eq!(filter("nope"), serde_json::json!([]));
}

/// A task branch whose `.hankrc` differs from the commit the job started from (an earlier
/// job's agent may have written it) is not run unapproved: exit 1 naming the file, no agent
/// call, the claim released; `--accept-config` runs it.
#[test]
fn a_configuration_changed_on_the_task_branch_needs_approval() {
    let (p, remote) = origin("RETRY_BACKOFF_SECONDS=0\n");
    git(&p.dir, &["switch", "-q", "-c", "hank/alpha"]);
    std::fs::write(
        p.dir.join(".hankrc"),
        "RETRY_BACKOFF_SECONDS=0\nMAX_COST_USD=9999\n",
    )
    .unwrap();
    git(&p.dir, &["commit", "-q", "-am", "an agent raised the cap"]);
    git(&p.dir, &["push", "-q", "origin", "hank/alpha"]);

    let r = runner(&remote);
    let o = r.run(&["fleet", "run-task", "Alpha"]);
    done(&o, 1);
    let e = stderr(&o);
    assert!(
        e.contains("hank/alpha changes hank's configuration (.hankrc)"),
        "{e}"
    );
    assert!(e.contains("--accept-config"), "{e}");
    assert!(calls(&r).is_empty(), "{e}");
    // The checkout is back on main: a second try checks the same change.
    assert_eq!(git(&r.dir, &["branch", "--show-current"]), "main");
    let o = r.run(&["fleet", "run-task", "Alpha"]);
    done(&o, 1);
    let bundle = remote_file(&remote, "refs/hank/state/alpha", "hank-state.json");
    assert!(!bundle.contains("\"lease\""), "{bundle}");

    let o = r.run(&[
        "fleet",
        "run-task",
        "Alpha",
        "--accept-config",
        "--max-loops",
        "1",
    ]);
    done(&o, 3);
    assert_contains(&stderr(&o), "running with the configuration of hank/alpha");
    assert_eq!(calls(&r), ["Alpha"]);
}

/// Inside Actions, a task whose agent hits a usage limit that resets after the job's end stops
/// at once (exit 3) with the wait saved in its state ref; the next job restores the wait and
/// ends at once too, without calling the agent, until the reset.
#[test]
fn a_usage_limit_wait_past_the_job_is_carried_to_the_next_job() {
    let (_origin, remote) = origin("RETRY_BACKOFF_SECONDS=0\n");
    let in_actions = |p: &Project| {
        let mut c = p.cmd();
        c.args(["fleet", "run-task", "Beta"])
            .env("GITHUB_ACTIONS", "true")
            .env("HANK_JOB_TIMEOUT_MINUTES", "60")
            .env("GITHUB_STEP_SUMMARY", p.home.join("summary.md"));
        c.output().unwrap()
    };
    let r1 = runner(&remote);
    // The limited call does no work.
    r1.fake_usage_limit(None, 3 * 3600);
    r1.fake("effect.sh", "");
    let o = in_actions(&r1);
    done(&o, 3);
    assert_eq!(r1.calls(), 1, "{}", stderr(&o));
    let bundle: Value = serde_json::from_str(&remote_file(
        &remote,
        "refs/hank/state/beta",
        "hank-state.json",
    ))
    .unwrap();
    assert!(bundle["state"]["wait"]["until"].is_string(), "{bundle}");
    assert!(bundle.get("lease").is_none(), "{bundle}");

    let r2 = runner(&remote);
    let o = in_actions(&r2);
    done(&o, 3);
    assert_eq!(r2.calls(), 0, "{}", stderr(&o));
    let summary = std::fs::read_to_string(r2.home.join("summary.md")).unwrap_or_default();
    assert!(summary.contains("hank continues after "), "{summary}");
}
