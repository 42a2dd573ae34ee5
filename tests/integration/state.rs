//! `hank state save` / `restore` / `claim`: the run state carried through a bare-repository
//! remote (refs/hank/state/…) or a folder, from one "job" (clone, HOME) to another.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::support::{Project, TICK_ONE, assert_contains, git, status_once_it_waits, stderr};

/// The first job's project: a git repository pushed to a bare `origin`.
fn first_job() -> (Project, PathBuf) {
    let p = Project::new(&["a", "b", "c", "d", "e", "f"]);
    let remote = p.git_pushed_to_origin();
    (p, remote)
}

/// [`first_job`] after a run of `n` calls (its hourly cap), which stopped at `--max-loops`.
fn first_job_after(n: u32) -> (Project, PathBuf) {
    let (a, remote) = first_job();
    a.fake("effect.sh", TICK_ONE);
    let n_text = n.to_string();
    let o = a.run(&["-c", &n_text, "--max-loops", &n_text]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(a.calls(), n);
    (a, remote)
}

/// Another job: a fresh clone of `remote` with a HOME (per-user state) of its own.
pub(crate) fn next_job(remote: &Path) -> Project {
    let q = Project::new(&[]);
    std::fs::remove_dir_all(&q.dir).unwrap();
    git(
        &q.home,
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            q.dir.to_str().unwrap(),
        ],
    );
    q
}

/// The calls in `p`'s call ledger (`.hank/state.json.calls`).
pub(crate) fn calls_in(p: &Project) -> usize {
    std::fs::read_to_string(p.dir.join(".hank/state.json.calls"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// Job 1 makes the hour's 3 calls and saves; job 2, in another clone with another HOME,
/// restores and must wait for the hourly cap instead of calling again.
#[test]
fn a_saved_state_carries_the_hourly_cap_to_another_clone() {
    let (a, remote) = first_job_after(3);
    let o = a.run(&["state", "save"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_contains(&stderr(&o), "refs/hank/state/run");
    assert!(!git(&remote, &["rev-parse", "refs/hank/state/run"]).is_empty());

    let b = next_job(&remote);
    let o = b.run(&["state", "restore"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_contains(&stderr(&o), "3 call(s)");
    assert_eq!(calls_in(&b), 3);
    // The receipts came along: the first job's events are in the second's events.jsonl.
    let events = b.events();
    assert!(
        events.iter().any(|e| e["type"] == "agent_finished"),
        "{events:?}"
    );

    let (s, out) = status_once_it_waits(&b, &["-c", "3", "--max-loops", "3"]);
    assert_eq!(s["wait_reason"], "rate_limit", "{s}: {}", stderr(&out));
    assert_eq!(b.calls(), 0, "{}", stderr(&out));

    // A second restore adds nothing (the union, not a sum).
    let o = b.run(&["state", "restore"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(calls_in(&b), 3);
}

/// Two jobs claim the same task at the same moment: exactly one gets it, the other stops with
/// exit 2; a later claim by another owner is refused while the lease holds.
#[test]
fn a_second_claim_of_a_task_is_refused() {
    let (a, remote) = first_job();
    let b = next_job(&remote);
    // `hank state claim` of task t1 by `owner`, in `p`.
    let claim = |p: &Project, owner: &str| {
        let mut c = p.cmd();
        c.args(["state", "claim", "--task", "t1", "--owner", owner]);
        c
    };
    let ha = claim(&a, "job-a").stderr(Stdio::piped()).spawn().unwrap();
    let hb = claim(&b, "job-b").stderr(Stdio::piped()).spawn().unwrap();
    let oa = ha.wait_with_output().unwrap();
    let ob = hb.wait_with_output().unwrap();
    let codes = [oa.status.code(), ob.status.code()];
    assert!(
        codes == [Some(0), Some(2)] || codes == [Some(2), Some(0)],
        "{codes:?}\nA: {}\nB: {}",
        stderr(&oa),
        stderr(&ob)
    );
    let ((winner, winner_name), (loser, loser_name)) = if codes[0] == Some(0) {
        ((&a, "job-a"), (&b, "job-b"))
    } else {
        ((&b, "job-b"), (&a, "job-a"))
    };
    // The loser tries again: refused, naming the holder.
    let o = claim(loser, loser_name).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    crate::support::assert_contains(&stderr(&o), &format!("claimed by {winner_name}"));
    let o = loser
        .cmd()
        .args([
            "state", "restore", "--task", "t1", "--claim", "--owner", loser_name,
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // The holder saves and releases; then the other job may claim.
    let o = winner
        .cmd()
        .args([
            "state",
            "save",
            "--task",
            "t1",
            "--release",
            "--owner",
            winner_name,
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = claim(loser, loser_name).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Without a push: the same bundle as a file in a folder (an Actions artifact).
#[test]
fn the_state_goes_through_a_folder_too() {
    let (a, remote) = first_job_after(2);
    let art = a.home.join("artifact");
    let o = a.run(&[
        "state",
        "save",
        "--task",
        "t2",
        "--to-dir",
        art.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let file = art.join("hank-state-t2.json");
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600
    );
    let b = next_job(&remote);
    let restore = || {
        b.run(&[
            "state",
            "restore",
            "--task",
            "t2",
            "--from-dir",
            art.to_str().unwrap(),
        ])
    };
    let o = restore();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(calls_in(&b), 2);
    // Nothing was pushed.
    assert!(git(&remote, &["for-each-ref", "refs/hank"]).is_empty());
    // A damaged bundle is refused, naming the file, and the local state is left alone.
    std::fs::write(&file, "{not json").unwrap();
    let o = restore();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_contains(&stderr(&o), "hank-state-t2.json");
    assert_eq!(calls_in(&b), 2);
    // A bad task name is a usage error.
    let o = b.run(&["state", "save", "--task", "../x"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_contains(&stderr(&o), "--task");
}
