//! `hank monitor --live` (every running task's live output, from `.hank/fleet.json`) and
//! `hank fleet --monitor` (the supervisor, that follower and the dashboard in tmux).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::monitor::Tmux;
use crate::support::{Project, cmd_exists, stderr, stdout};

/// The longest any expected line may take to appear (a bound, not a timing assertion).
const WAIT: Duration = Duration::from_secs(30);

/// One task of a hand-written `fleet.json`.
fn task(name: &str, state: &str, worktree: Option<&Path>, message: &str) -> serde_json::Value {
    json!({
        "name": name,
        "state": state,
        "branch": format!("hank/{name}"),
        "worktree": worktree.map(|w| w.display().to_string()),
        "message": message,
    })
}

fn write_fleet(p: &Project, state: &str, tasks: &[serde_json::Value]) {
    let file = json!({
        "schema_version": 1,
        "into": "hank/fleet",
        "state": state,
        "tasks": tasks,
    });
    // As the supervisor writes it: temp + rename (a reader never sees half a file).
    let tmp = p.dir.join(".hank/fleet.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
    std::fs::rename(&tmp, p.dir.join(".hank/fleet.json")).unwrap();
}

/// A task's worktree (a folder with `.hank/`) under the test's HOME.
fn worktree(p: &Project, name: &str) -> PathBuf {
    let wt = p.home.join("worktrees").join(name);
    std::fs::create_dir_all(wt.join(".hank")).unwrap();
    wt
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// The follower's output, line by line, as it comes.
struct Lines {
    child: Child,
    rx: Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn start(p: &Project) -> Self {
        let mut child = p
            .cmd()
            .args(["monitor", "--live"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            rx,
            seen: Vec::new(),
        }
    }

    /// Waits for a line containing `want` and returns it.
    fn expect(&mut self, want: &str) -> String {
        let start = Instant::now();
        while start.elapsed() < WAIT {
            if let Ok(line) = self.rx.recv_timeout(Duration::from_millis(100)) {
                self.seen.push(line.clone());
                if line.contains(want) {
                    return line;
                }
            }
        }
        panic!(
            "no line with {want:?} from hank monitor --live; it printed:\n{}",
            self.seen.join("\n")
        );
    }
}

impl Lines {
    /// A line containing `want` printed already, or the next one.
    fn saw(&mut self, want: &str) -> String {
        match self.seen.iter().find(|l| l.contains(want)) {
            Some(l) => l.clone(),
            None => self.expect(want),
        }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two tasks: one running from the start (its backlog shown), one started later (shown from
/// its first line); one `live.log` truncated and written again, then replaced by a FIFO (the
/// follower neither hangs nor stops following the other task), then by a regular file again;
/// the other replaced by a link to a file outside (never read); their ends and the fleet's.
#[test]
fn the_follower_picks_up_tasks_survives_truncation_fifos_and_links() {
    let p = Project::new(&[]);
    let (wa, wb) = (worktree(&p, "alpha"), worktree(&p, "beta"));
    let (la, lb) = (wa.join(".hank/live.log"), wb.join(".hank/live.log"));
    std::fs::write(&la, "old one\nold two\n").unwrap();
    write_fleet(
        &p,
        "running",
        &[
            task("alpha", "running", Some(&wa), "running"),
            task("beta", "pending", None, ""),
        ],
    );
    let mut out = Lines::start(&p);
    out.expect("fleet: running, 2 task(s)");
    out.expect("[alpha] ● running");
    out.expect("[alpha] old two");
    append(&la, "alpha live 1\n");
    out.expect("[alpha] alpha live 1");
    // A line written in two pieces is shown once, whole.
    append(&la, "half a");
    append(&la, " line\n");
    assert_eq!(out.expect("half a"), "[alpha] half a line");

    // beta starts later: from its first line.
    std::fs::write(&lb, "beta first\n").unwrap();
    write_fleet(
        &p,
        "running",
        &[
            task("alpha", "running", Some(&wa), "running"),
            task("beta", "running", Some(&wb), "running"),
        ],
    );
    out.expect("[beta] ▶ started on hank/beta");
    out.expect("[beta] beta first");

    // alpha's next call truncates its live.log.
    std::fs::write(&la, "cut\n").unwrap();
    out.expect("[alpha] ── live.log started again");
    out.expect("[alpha] cut");

    // A FIFO planted in its place: said once, and the follower goes on (beta still shown).
    std::fs::remove_file(&la).unwrap();
    nix::unistd::mkfifo(&la, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    out.expect("[alpha] live.log is a FIFO");
    append(&lb, "beta after the fifo\n");
    out.expect("[beta] beta after the fifo");

    // beta's live.log becomes a link to a file outside the worktree: refused, never read.
    let secret = p.home.join("secret.txt");
    std::fs::write(&secret, "SECRET-CONTENT\n").unwrap();
    std::fs::remove_file(&lb).unwrap();
    std::os::unix::fs::symlink(&secret, &lb).unwrap();
    out.expect("[beta] live.log is a symbolic link");
    // Its whole `.hank` becomes a link to a folder outside: refused too, never read.
    let outside = p.home.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("live.log"), "OUTSIDE-CONTENT\n").unwrap();
    std::fs::remove_dir_all(wb.join(".hank")).unwrap();
    std::os::unix::fs::symlink(&outside, wb.join(".hank")).unwrap();
    out.expect("[beta] live.log is under a .hank that is a symbolic link");

    // A regular file again: read from its start.
    std::fs::remove_file(&la).unwrap();
    std::fs::write(&la, "alpha back\n").unwrap();
    out.expect("[alpha] alpha back");

    // The ends: merged, failed, the fleet done.
    write_fleet(
        &p,
        "failed",
        &[
            task("alpha", "merged", None, "merged"),
            task("beta", "failed", None, "the check failed"),
        ],
    );
    out.expect("[alpha] ■ merged into hank/fleet");
    let failed = out.expect("[beta] ✗ failed");
    assert!(
        failed.contains("the check failed") && failed.contains("hank/beta"),
        "{failed}"
    );
    out.expect("fleet: failed");
    assert!(
        out.seen
            .iter()
            .all(|l| !l.contains("SECRET-CONTENT") && !l.contains("OUTSIDE-CONTENT")),
        "the link was followed:\n{}",
        out.seen.join("\n")
    );
    // Not a terminal: no colour codes.
    assert!(out.seen.iter().all(|l| !l.contains('\u{1b}')));
    // Each notice and line once.
    assert_eq!(
        out.seen.iter().filter(|l| l.contains("old two")).count(),
        1,
        "{:?}",
        out.seen
    );
}

/// `--once` prints the running tasks' recent output and exits; without a fleet it is an
/// error naming the file; `--live` with `--json` is refused.
#[test]
fn live_once_and_its_errors() {
    let p = Project::new(&[]);
    let o = p.run(&["monitor", "--live", "--once"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    crate::support::assert_contains(&stderr(&o), ".hank/fleet.json");
    let o = p.run(&["monitor", "--live", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));

    let wa = worktree(&p, "alpha");
    let mut long = String::new();
    for i in 0..2000 {
        long.push_str(&format!("line {i}\n"));
    }
    std::fs::write(wa.join(".hank/live.log"), long).unwrap();
    write_fleet(&p, "running", &[task("alpha", "running", Some(&wa), "")]);
    let o = p.run(&["monitor", "--live", "--once"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    // The end of the file, whole lines only, never the whole file.
    assert!(text.contains("[alpha] line 1999\n"), "{text}");
    assert!(!text.contains("[alpha] line 0\n"), "{text}");
    let first = text
        .lines()
        .find(|l| l.starts_with("[alpha] line "))
        .unwrap();
    assert!(
        first
            .strip_prefix("[alpha] line ")
            .unwrap()
            .parse::<u32>()
            .is_ok(),
        "{first}"
    );
}

/// `hank fleet --monitor --monitor-exit`: the supervisor, the dashboard's task row and the
/// running task's live line on screen; the layout closes with the fleet, its exit code kept.
#[test]
fn fleet_monitor_shows_the_supervisor_the_dashboard_and_the_tasks_live_output() {
    if !cmd_exists("tmux") {
        eprintln!(
            "SKIP fleet_monitor_shows_the_supervisor_the_dashboard_and_the_tasks_live_output: tmux not installed"
        );
        return;
    }
    let p = crate::fleet::project("# Plan\n\n## Alpha\n- [ ] one\n");
    // The agent says something (a stream-json text), then waits for the test to have seen it.
    says_then_waits(&p, "alpha is working on item one", "release", "alpha.txt");
    let tmux = Tmux::for_project(&p);
    let out = p.run_env(
        &[("TMUX_TMPDIR", &tmux.tmpdir)],
        &["fleet", "--agents", "1", "--monitor", "--monitor-exit"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "tmux attach -t proj",
        "{}",
        stderr(&out)
    );
    crate::support::assert_contains(&stderr(&out), "the fleet runs in tmux session 'proj'");

    tmux.showing(
        "proj",
        &[
            // The supervisor's pane.
            "task \"Alpha\" started on hank/alpha",
            // The dashboard's task row.
            "Alpha · running",
            // The follower: the running task's live line, prefixed.
            "[Alpha] alpha is working on item one",
        ],
    );
    p.fake("release", "");

    // The fleet ends (the task merged, exit 0, recorded) and the layout closes with it.
    assert_eq!(tmux.closed_with(&p, "proj", "the fleet"), "0");
    let fleet: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.dir.join(".hank/fleet.json")).unwrap()).unwrap();
    assert_eq!(fleet["tasks"][0]["state"], "merged", "{fleet}");
}

/// Without tmux, `hank fleet --monitor` is refused before anything runs, saying how to watch
/// without it.
#[test]
fn fleet_monitor_without_tmux_is_a_usage_error() {
    let p = crate::fleet::project("# Plan\n\n## Alpha\n- [ ] one\n");
    let out = p
        .cmd()
        .env("PATH", p.home.as_os_str())
        .args(["fleet", "--monitor"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    crate::support::assert_contains(&stderr(&out), "hank monitor --live");
    let out = p
        .cmd()
        .env("PATH", p.home.as_os_str())
        .args(["fleet", "--monitor", "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    crate::support::assert_contains(&stdout(&out), "wave 1:");
    let out = p.run(&["fleet", "--monitor-exit", "--agents", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    crate::support::assert_contains(&stderr(&out), "--monitor-exit goes with --monitor");
    assert_eq!(p.calls(), 0);
    assert!(!p.dir.join(".hank/fleet.json").exists());
}

/// The fake agent's effect: it says `text` (a stream-json assistant line; `WT` becomes the
/// name of the folder it works in, `$wt`), waits (at most 30 s) for `$FAKE_CLAUDE_DIR/<release>`,
/// ticks its item and writes `<done>` (both may name `$wt`).
fn says_then_waits(p: &Project, text: &str, release: &str, done: &str) {
    let said = json!({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "text", "text": text}]},
        "session_id": "5b1c0e0a-1111-2222-3333-444444444444"});
    p.fake(
        "effect.sh",
        &format!(
            "wt=$(basename \"$PWD\")\n\
             printf '%s\\n' '{said}' | sed \"s/WT/$wt/\"\n\
             for _ in $(seq 600); do [ -e \"$FAKE_CLAUDE_DIR/{release}\" ] && break; sleep 0.05; done\n\
             sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\n\
             echo done > \"{done}\"\n"
        ),
    );
}

/// Against a real fleet (`--agents 1`, so the second task starts while the follower
/// watches): each task's live line prefixed, its start and merge said, the fleet's end; while
/// the fleet runs, `hank fleet --monitor` is refused in the terminal (no tmux session).
#[test]
fn the_follower_follows_a_real_fleet_and_a_second_fleet_monitor_is_refused() {
    let p = crate::fleet::project("# Plan\n\n## Alpha\n- [ ] one\n\n## Beta\n- [ ] two\n");
    // Each task's agent says where it works, then waits for its own release file.
    says_then_waits(&p, "working in WT", "release-$wt", "$wt.txt");
    let mut out = Lines::start(&p);
    out.expect("waiting for a fleet to start here");
    let fleet = p.spawn(&["fleet", "--agents", "1", "--live"]);
    out.expect("[Alpha] ▶ started on hank/alpha");
    out.expect("[Alpha] working in alpha");

    let tmux = Tmux::for_project(&p);
    let o = p.run_env(&[("TMUX_TMPDIR", &tmux.tmpdir)], &["fleet", "--monitor"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    crate::support::assert_contains(&stderr(&o), "another hank fleet runs");
    if cmd_exists("tmux") {
        assert!(!tmux.has_session("proj"));
    }

    // Alpha's worker ends; Beta may start while Alpha is merged (the two are said in the
    // order they happen).
    p.fake("release-alpha", "");
    out.saw("[Alpha] ■ merged into hank/fleet");
    out.saw("[Beta] ▶ started on hank/beta");
    out.saw("[Beta] working in beta");
    p.fake("release-beta", "");
    out.saw("[Beta] ■ merged into hank/fleet");
    out.saw("fleet: done");
    let o = crate::support::wait_with_timeout(fleet, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The order a reader needs: a task's lines come between its start and its end.
    let at = |want: &str| out.seen.iter().position(|l| l.contains(want)).unwrap();
    assert!(at("[Alpha] ▶") < at("working in alpha"));
    assert!(at("working in alpha") < at("[Alpha] ■"));
    assert!(at("[Beta] ▶") < at("working in beta"));
    assert!(at("working in beta") < at("[Beta] ■"));
    assert!(at("[Beta] ■") < at("fleet: done"));
}
