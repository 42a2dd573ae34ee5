//! `hank fleet --deliver pr`: one pull request per task (a task that comes after another
//! targets that task's branch), or with `--into X` one pull request of the integration
//! branch. A bare repository on disk as `origin`, the fake GitHub API on loopback.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use crate::deliver::{at_fake_github, files_of, pulls};
use crate::deliver_loop::green_check;
use crate::fake_github::FakeGitHub;
use crate::support::{Project, git, stderr};

/// Ticks the task's item and writes `<worktree name>.txt`; leaves an un-ignored `.env`.
const WORK: &str = r#"sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
n=$(basename "$PWD"); echo "$n" >> "$n.txt"; echo "TOKEN=s3cr3t-value-123" > .env
"#;

const PLAN: &str = "# Fix plan\n\n## Alpha\n- [ ] a1\n\n## Beta (after: Alpha)\n- [ ] b1\n";

fn setup() -> (Project, PathBuf) {
    let p = Project::new(&[]);
    std::fs::write(p.dir.join(".hank/fix_plan.md"), PLAN).unwrap();
    p.fake("effect.sh", WORK);
    let remote = p.git_pushed_to_origin();
    (p, remote)
}

/// `hank fleet ARGS` with green checks at the fake GitHub.
fn fleet(p: &Project, gh: &FakeGitHub, args: &[&str]) -> Output {
    gh.set(|w| w.check_runs.push(green_check()));
    at_fake_github(p.cmd().arg("fleet").args(args), gh)
        .output()
        .expect("hank fleet")
}

/// (head, base, request) of every pull request created, in order.
fn prs(gh: &FakeGitHub) -> Vec<(String, String, Value)> {
    pulls(gh)
        .iter()
        .map(|r| {
            let j = r.json();
            (
                j["head"].as_str().unwrap().to_string(),
                j["base"].as_str().unwrap().to_string(),
                j,
            )
        })
        .collect()
}

#[test]
fn fleet_deliver_pr_opens_one_pr_per_task_stacked_on_what_it_comes_after() {
    let (p, remote) = setup();
    let gh = FakeGitHub::start();
    let o = fleet(&p, &gh, &["--deliver", "pr"]);
    let err = stderr(&o) + &workers_logs(&p);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let prs = prs(&gh);
    let pairs: Vec<(&str, &str)> = prs
        .iter()
        .map(|(h, b, _)| (h.as_str(), b.as_str()))
        .collect();
    assert_eq!(pairs, [("hank/alpha", "main"), ("hank/beta", "hank/alpha")]);
    // Each body is that task's own evidence.
    assert!(prs[0].2["body"].as_str().unwrap().contains("- [x] a1"));
    assert!(prs[1].2["body"].as_str().unwrap().contains("- [x] b1"));
    // Both branches are on the remote with their work, never the .env.
    for (branch, file) in [("hank/alpha", "alpha.txt"), ("hank/beta", "beta.txt")] {
        let files = files_of(&remote, branch);
        assert!(files.lines().any(|f| f == file), "{branch}: {files}");
        assert!(!files.lines().any(|f| f == ".env"), "{branch}: {files}");
    }
    // The fleet still merged both into its (local) integration branch — without the .env.
    let files = files_of(&p.dir, "hank/fleet");
    assert!(
        files.contains("alpha.txt") && files.contains("beta.txt"),
        "{files}"
    );
    assert!(!files.lines().any(|f| f == ".env"), "{files}");
    // The user's main is untouched, here and on the remote.
    assert_eq!(git(&p.dir, &["branch", "--show-current"]), "main");
    let main_files = files_of(&remote, "main");
    assert!(!main_files.contains("alpha.txt"), "{main_files}");
}

#[test]
fn fleet_deliver_pr_into_a_branch_opens_one_pr_for_it() {
    let (p, remote) = setup();
    let gh = FakeGitHub::start();
    let o = fleet(&p, &gh, &["--into", "release", "--deliver", "pr"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let prs = prs(&gh);
    assert_eq!(prs.len(), 1, "{prs:?}");
    assert_eq!((prs[0].0.as_str(), prs[0].1.as_str()), ("release", "main"));
    let body = prs[0].2["body"].as_str().unwrap();
    assert!(body.contains("| Alpha | merged | 1 |"), "{body}");
    assert!(body.contains("| Beta | merged | 1 |"), "{body}");
    // The tasks did not push their own branches; the integration branch is on the remote,
    // at the commit whose checks were read.
    let refs = git(&remote, &["for-each-ref", "--format=%(refname)"]);
    assert!(!refs.contains("hank/alpha"), "{refs}");
    let sha = git(&remote, &["rev-parse", "release"]);
    assert_eq!(gh.world.lock().unwrap().commits_asked, vec![sha.clone()]);
    let files = files_of(&remote, "release");
    assert!(
        files.contains("alpha.txt") && files.contains("beta.txt"),
        "{files}"
    );
    assert!(!files.lines().any(|f| f == ".env"), "{files}");
    let d = p.read_json(".hank/delivery.json");
    assert_eq!(d["exit_reason"], "delivered");
    assert_eq!(d["checks"], "green");
    assert_eq!(d["head"], sha.as_str());
    assert!(err.contains("PR #1 release → main"), "{err}");
    // Told as a run's delivery is: a `delivery` event in the checkout's events.jsonl (the
    // one that NOTIFY offers).
    let told = p.events_of("delivery");
    let last = told.last().expect("a delivery event");
    assert_eq!(last["exit_reason"], "delivered");
    assert_eq!(last["checks"], "green");
}

/// The forge refuses the integration branch's pull request: the fleet stops `forge_failed`
/// (exit 1) with the forge's error, the branch pushed; `hank deliver` then finishes that
/// delivery from its record (the same branch, base and fleet records), not a new one.
#[test]
fn a_fleet_delivery_that_failed_at_the_forge_is_finished_by_hank_deliver() {
    let (p, remote) = setup();
    let gh = FakeGitHub::start();
    gh.set(|w| w.refuse_pulls = 1);
    let o = fleet(&p, &gh, &["--into", "release", "--deliver", "pr"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the pull request could not be opened"),
        "{err}"
    );
    assert!(
        err.contains("Resource not accessible by integration"),
        "{err}"
    );
    assert!(err.contains("`hank deliver` finishes"), "{err}");
    let d = p.read_json(".hank/delivery.json");
    assert_eq!(d["exit_reason"], "forge_failed");
    let sha = git(&remote, &["rev-parse", "release"]);
    assert!(gh.world.lock().unwrap().pulls.is_empty());

    let o = at_fake_github(p.cmd().arg("deliver"), &gh)
        .output()
        .expect("hank deliver");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("finishing the last run's delivery (forge_failed"),
        "{err}"
    );
    // The refused request, then the one `hank deliver` made: the same branch, base and body.
    let prs = prs(&gh);
    assert_eq!(prs.len(), 2, "{prs:?}");
    assert_eq!(gh.world.lock().unwrap().pulls.len(), 1);
    assert_eq!((prs[1].0.as_str(), prs[1].1.as_str()), ("release", "main"));
    assert_eq!(prs[1].2["body"], prs[0].2["body"]);
    let body = prs[1].2["body"].as_str().unwrap();
    assert!(body.contains("| Alpha | merged | 1 |"), "{body}");
    // The user's branch stayed checked out; the integration branch was not moved.
    assert_eq!(git(&p.dir, &["branch", "--show-current"]), "main");
    assert_eq!(git(&remote, &["rev-parse", "release"]), sha);
    let d = p.read_json(".hank/delivery.json");
    assert_eq!(d["exit_reason"], "delivered");
}

/// `hank fleet` again after its delivery failed at the forge finishes that delivery from its
/// record (no task runs again, one pull request), and the fleet is then finished.
#[test]
fn hank_fleet_again_finishes_a_delivery_that_failed_at_the_forge() {
    let (p, _remote) = setup();
    let gh = FakeGitHub::start();
    gh.set(|w| w.refuse_pulls = 1);
    let args = ["--into", "release", "--deliver", "pr"];
    let o = fleet(&p, &gh, &args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let calls = p.calls();
    let o = fleet(&p, &gh, &args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("finishing its delivery"), "{err}");
    assert_eq!(p.calls(), calls, "no task ran again");
    assert_eq!(gh.world.lock().unwrap().pulls.len(), 1);
    assert_eq!(
        p.read_json(".hank/delivery.json")["exit_reason"],
        "delivered"
    );
    let o = fleet(&p, &gh, &args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("the fleet is finished"), "{err}");
    assert_eq!(gh.world.lock().unwrap().pulls.len(), 1);
}

/// What the fleet's workers wrote (`fleet-logs/*.log` in the per-user folders), for a failure
/// message.
fn workers_logs(p: &Project) -> String {
    let mut text = String::new();
    let projects = std::fs::read_dir(p.home.join(".local/state/hank/projects"));
    for project in projects.into_iter().flatten().flatten() {
        let logs = std::fs::read_dir(project.path().join("fleet-logs"));
        for log in logs.into_iter().flatten().flatten() {
            if log.path().extension().is_some_and(|x| x == "log") {
                text.push_str(&std::fs::read_to_string(log.path()).unwrap_or_default());
            }
        }
    }
    text
}
