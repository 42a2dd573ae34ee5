//! Issue 35 item 1: hank's own git cannot be steered by what the agent writes. Each test is
//! the attack, played by the fake agent: a task worktree's `.git` file rewritten (to the
//! user's checkout, to the integration worktree), HEAD switched to `main` before a delivery,
//! symbolic links among hank's files (`.hank/AGENT.md`, `.hank/fix_plan.md`).

use crate::deliver::head_branch;
use crate::fake_github::FakeGitHub;
use crate::fleet::{fleet_json, project_doing};
use crate::support::{Project, TICK_ONE, git, stderr};

/// The fake agent's work in a task worktree (tick the first item, write `<slug>.txt`), then
/// `extra`.
fn work_then(extra: &str) -> String {
    format!(
        "sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\nn=$(basename \"$PWD\"); echo \"$n\" >> \"$n.txt\"\n{extra}"
    )
}

const ONE_TASK: &str = "# Fix plan\n\n## Alpha\n- [ ] a1\n";

/// Subjects of `git log REV` in the checkout.
fn subjects(p: &Project, rev: &str) -> String {
    git(&p.dir, &["log", "--format=%s", rev])
}

/// The user's checkout: branch, HEAD, status with the index (everything that must not move).
fn checkout(p: &Project) -> (String, String, String) {
    (
        head_branch(p),
        git(&p.dir, &["rev-parse", "HEAD"]),
        git(&p.dir, &["status", "--porcelain", "--untracked-files=all"]),
    )
}

fn task_state(p: &Project) -> (String, String) {
    let v = fleet_json(p);
    let t = &v["tasks"][0];
    (
        t["state"].as_str().unwrap_or_default().to_string(),
        t["message"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn a_task_agent_pointing_its_git_file_at_the_checkout_moves_nothing_of_the_user() {
    let p = project_doing(ONE_TASK, "");
    // The user has staged work in the checkout.
    std::fs::write(p.dir.join("staged.txt"), "mine\n").unwrap();
    git(&p.dir, &["add", "staged.txt"]);
    let attack = format!(
        "printf 'gitdir: %s\\n' '{}' > .git\n",
        p.dir.join(".git").display()
    );
    p.fake("effect.sh", &work_then(&attack));
    let before = checkout(&p);
    let o = p.run(&["fleet"]);
    // The user's branch, HEAD and index are untouched.
    assert_eq!(checkout(&p), before, "{}", stderr(&o));
    assert!(
        !subjects(&p, "HEAD").contains("hank fleet"),
        "{}",
        subjects(&p, "HEAD")
    );
    // The task's commit is on its own branch, and merged for real (or not reported merged).
    let (state, message) = task_state(&p);
    if state == "merged" {
        assert!(subjects(&p, "hank/alpha").contains("hank fleet: task Alpha"));
        let files = git(&p.dir, &["ls-tree", "--name-only", "hank/fleet"]);
        assert!(files.contains("alpha.txt"), "{files}");
    } else {
        assert!(!message.contains("merged"), "{message}");
    }
}

#[test]
fn a_task_agent_pointing_its_git_file_at_the_integration_worktree_commits_nothing_there() {
    let attack = "int=$(git -C \"$(git rev-parse --git-common-dir)/..\" worktree list --porcelain \
                  | awk '/^worktree /{w=$2} /^branch refs\\/heads\\/hank\\/fleet$/{print w}')\n\
                  cp \"$int/.git\" .git\n";
    let p = project_doing(ONE_TASK, &work_then(attack));
    let o = p.run(&["fleet"]);
    // Nothing was committed straight onto hank/fleet: the task's work came in through a merge
    // of its own branch, which holds the task's commit.
    let first_parent = git(
        &p.dir,
        &["log", "--first-parent", "--format=%s", "hank/fleet"],
    );
    assert!(
        !first_parent.contains("hank fleet: task Alpha"),
        "committed straight onto hank/fleet:\n{first_parent}\n{}",
        stderr(&o)
    );
    let (state, _) = task_state(&p);
    if state == "merged" {
        assert!(subjects(&p, "hank/alpha").contains("hank fleet: task Alpha"));
        assert!(
            first_parent.contains("hank fleet: merge task Alpha"),
            "{first_parent}"
        );
    }
}

#[test]
fn an_agent_that_switches_to_main_gets_no_delivery_commit_on_main() {
    let p = Project::new(&["Fix login"]);
    let remote = p.git_pushed_to_origin();
    p.fake("effect.sh", &format!("{TICK_ONE}git checkout -q main\n"));
    let main_before = git(&p.dir, &["rev-parse", "main"]);
    let gh = FakeGitHub::start();
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nDELIVER=branch\n");
    let out = crate::deliver::at_fake_github(&mut p.cmd(), &gh)
        .output()
        .expect("hank run");
    let err = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("delivery refused") && err.contains("on `main`"),
        "{err}"
    );
    assert_eq!(git(&p.dir, &["rev-parse", "main"]), main_before, "{err}");
    let pushed = git(&remote, &["for-each-ref", "--format=%(refname)"]);
    assert_eq!(pushed.trim(), "refs/heads/main", "{pushed}");
}

#[test]
fn a_dangling_agent_md_link_on_the_branch_is_never_written_through() {
    let p = project_doing(ONE_TASK, &work_then(""));
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("written-through");
    // The integration branch holds `.hank/AGENT.md` as a link out of the project …
    git(&p.dir, &["checkout", "-q", "-b", "hank/fleet"]);
    let _ = std::fs::remove_file(p.dir.join(".hank/AGENT.md"));
    std::os::unix::fs::symlink(&target, p.dir.join(".hank/AGENT.md")).unwrap();
    git(&p.dir, &["add", "-f", ".hank/AGENT.md"]);
    git(&p.dir, &["commit", "-q", "-m", "link"]);
    git(&p.dir, &["checkout", "-q", "main"]);
    // … and the user's checkout has its own (untracked) AGENT.md to copy.
    std::fs::write(p.dir.join(".hank/AGENT.md"), "notes\n").unwrap();
    let o = p.run(&["fleet", "--allow-dirty"]);
    assert!(!target.exists(), "written through the link: {}", stderr(&o));
    assert!(stderr(&o).contains("symbolic link"), "{}", stderr(&o));
}

#[test]
fn a_fix_plan_link_merged_from_a_task_is_refused_and_never_followed() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("plan.md");
    let text = "# Fix plan\n\n## Alpha\n- [ ] a1\n";
    std::fs::write(&target, text).unwrap();
    // The agent commits `.hank/fix_plan.md` as a link to a file outside, and keeps its
    // working copy a file so its run completes.
    let attack = format!(
        "cp .hank/fix_plan.md ../keep-$$ && rm .hank/fix_plan.md && ln -s '{}' .hank/fix_plan.md\n\
         git add -f .hank/fix_plan.md && git -c user.name=a -c user.email=a@a commit -qm link\n\
         rm .hank/fix_plan.md && mv ../keep-$$ .hank/fix_plan.md\n",
        target.display()
    );
    let p = project_doing(ONE_TASK, &work_then(&attack));
    let o = p.run(&["fleet"]);
    let err = stderr(&o);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), text, "{err}");
    assert!(!err.contains("internal error"), "{err}");
    let (state, message) = task_state(&p);
    assert_eq!(state, "failed", "{message}\n{err}");
    assert!(message.contains("symbolic link"), "{message}");
    let files = git(&p.dir, &["ls-tree", "--name-only", "hank/fleet"]);
    assert!(!files.contains("alpha.txt"), "{files}");
}

/// A fleet task's worker (`hank run` in the task's worktree, told the checkout in
/// `HANK_TASK_CHECKOUT`) measures progress in the task's own repository even after its agent
/// pointed the worktree's `.git` file at the user's checkout: the user's staged file is not
/// counted as the task's change.
#[test]
fn a_task_workers_progress_reads_its_own_repository_after_the_git_file_is_rewritten() {
    let p = project_doing(ONE_TASK, "");
    std::fs::write(p.dir.join("staged.txt"), "mine\n").unwrap();
    git(&p.dir, &["add", "staged.txt"]);
    let wt = p.home.join("wt");
    git(
        &p.dir,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "hank/alpha",
            &wt.display().to_string(),
        ],
    );
    let attack = format!(
        "printf 'gitdir: %s\\n' '{}' > .git\n",
        p.dir.join(".git").display()
    );
    p.fake("effect.sh", &work_then(&attack));
    let o = p
        .cmd()
        .current_dir(&wt)
        .env("HANK_TASK_CHECKOUT", &p.dir)
        .args(["run", "--max-loops", "1"])
        .output()
        .unwrap();
    let status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(wt.join(".hank/status.json")).unwrap())
            .unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    // `wt.txt` (the plan is not counted): nothing of the checkout's index.
    assert_eq!(
        status["last_loop"]["files_changed"],
        1,
        "{status}\n{}",
        stderr(&o)
    );
}

/// A worker told a checkout that does not record its worktree refuses to run (exit 1).
#[test]
fn a_task_worker_outside_its_checkouts_records_refuses_to_run() {
    let p = project_doing(ONE_TASK, "");
    let other = Project::new(&[]);
    other.git_init();
    let o = p
        .cmd()
        .env("HANK_TASK_CHECKOUT", &other.dir)
        .args(["run", "--max-loops", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is not the fleet task worktree its checkout records"),
        "{}",
        stderr(&o)
    );
}
