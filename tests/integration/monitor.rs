//! hank monitor / hank --monitor end to end

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Project, exits, stderr, stdout};

const STATUS: &str = r#"{
  "schema_version": 1, "updated_at": "2026-11-22T10:00:00Z", "state": "waiting",
  "loop_count": 4, "calls_in_window": 100, "max_calls_per_hour": 100,
  "next_call_at": "2999-01-01T00:00:00Z", "tokens_in_window": 12000, "max_tokens_per_hour": 0,
  "wait_reason": "rate_limit", "waiting_until": "2999-01-01T00:00:00Z",
  "circuit_state": "HALF_OPEN", "circuit_reason": "2 loops without progress",
  "session_id": "abc", "total_cost_usd": 0.42,
  "total_tokens": {"input": 100, "output": 20, "cache_read": 0, "cache_creation": 0},
  "fix_plan": {"done": 3, "total": 7},
  "last_loop": {"number": 4, "outcome": "success", "exit_signal": false, "status": "IN_PROGRESS",
                "work_type": "TESTING", "files_changed": 0, "recommendation": "fix the flaky test",
                "cost_usd": 0.11, "duration_ms": 61000},
  "exit_reason": null, "exit_code": null
}"#;

/// Holds `.hank/hank.lock` as a running loop does (the status says the loop is active).
fn hold_lock(p: &Project) -> std::fs::File {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(p.dir.join(".hank/hank.lock"))
        .unwrap();
    f.lock().unwrap();
    f
}

#[test]
fn once_prints_text_and_json_snapshots() {
    let p = Project::new(&["one", "two"]);
    let _lock = hold_lock(&p);
    std::fs::write(p.dir.join(".hank/status.json"), STATUS).unwrap();
    std::fs::write(
        p.dir.join(".hank/events.jsonl"),
        "{\"schema_version\":1,\"type\":\"loop_started\",\"at\":\"2026-11-22T09:00:00Z\",\"loop\":4}\n\
         {\"schema_version\":1,\"type\":\"warning\",\"at\":\"2026-11-22T09:00:01Z\",\"message\":\"careful\"}\n",
    )
    .unwrap();
    std::fs::write(
        p.dir.join(".hank/live.log"),
        "\u{1b}[32mhello from the agent\u{1b}[0m\n",
    )
    .unwrap();

    let out = p.run_code(&["monitor", "--once"], 0);
    let text = stdout(&out);
    for want in [
        "WAITING · loop 4",
        "HALF_OPEN — 2 loops without progress",
        "100 / 100 this hour · next call in",
        "call cap reached",
        "$0.42",
        "0/2 done",
        "TESTING",
        "fix the flaky test",
        "warning: careful",
        "hello from the agent",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains('\u{1b}'), "escape sequences leak:\n{text}");

    // No terminal and no --once: one snapshot, exit 0.
    let out = p.run_code(&["monitor"], 0);
    assert!(stdout(&out).contains("WAITING · loop 4"));

    let out = p.run_code(&["monitor", "--once", "--json"], 0);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["project"], "proj");
    assert_eq!(v["status"]["loop_count"], 4);
    assert_eq!(v["status"]["wait_reason"], "rate_limit");
    assert_eq!(v["fix_plan"]["total"], 2);
    assert_eq!(v["events"][1]["type"], "warning");
    assert_eq!(v["live_tail"][0], "hello from the agent");

    // The alias name and --dir from elsewhere.
    let alias = p.home.join("hank-monitor");
    std::os::unix::fs::symlink(crate::support::hank_bin(), &alias).unwrap();
    let out = p
        .cmd_of(&alias)
        .current_dir(&p.home)
        .args(["--once", "--dir"])
        .arg(&p.dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("WAITING · loop 4"));
}

#[test]
fn missing_and_broken_files_are_survived() {
    let p = Project::new(&["one"]);
    let _lock = hold_lock(&p);
    let out = p.run_code(&["monitor", "--once"], 0);
    assert!(stdout(&out).contains("no status yet"), "{}", stdout(&out));

    std::fs::write(
        p.dir.join(".hank/status.json"),
        "{\"schema_version\":1,\"sta",
    )
    .unwrap();
    std::fs::write(p.dir.join(".hank/events.jsonl"), "not json\n{\"type\":").unwrap();
    std::fs::write(p.dir.join(".hank/state.json"), "[]").unwrap();
    let out = p.run_code(&["monitor", "--once"], 0);
    assert!(stdout(&out).contains("not valid JSON"), "{}", stdout(&out));

    std::fs::write(
        p.dir.join(".hank/status.json"),
        r#"{"schema_version":7,"state":"running"}"#,
    )
    .unwrap();
    let out = p.run_code(&["monitor", "--once", "--json"], 0);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["status"]["state"], "running");
    assert!(v["notes"][0].as_str().unwrap().contains("schema_version 7"));
}

#[test]
fn outside_a_project_is_a_usage_error() {
    let p = Project::new(&[]);
    let out = p.run_code(&["monitor", "--once", "--dir", "/nonexistent/dir"], 1);
    crate::support::assert_contains(&stderr(&out), "--dir /nonexistent/dir");
    let out = p
        .cmd()
        .current_dir(&p.home)
        .args(["monitor", "--once"])
        .output()
        .unwrap();
    crate::support::assert_contains(&exits(&out, 1), ".hank/");
}

#[test]
fn monitor_flag_without_tmux_is_a_usage_error() {
    let p = Project::new(&["one"]);
    let out = p
        .cmd()
        .env("PATH", p.home.as_os_str())
        .args(["--monitor"])
        .output()
        .unwrap();
    crate::support::assert_contains(&exits(&out, 1), "tmux");
    assert_eq!(p.calls(), 0);
}

/// The fake agent's effect that keeps a call running until the test creates `release` in the
/// fake's folder (at most 30 s).
const UNTIL_RELEASED: &str =
    "for _ in $(seq 600); do [ -e \"$FAKE_CLAUDE_DIR/release\" ] && break; sleep 0.05; done\n";

/// A private tmux server (its own socket directory); killed on drop.
pub(crate) struct Tmux {
    pub(crate) tmpdir: PathBuf,
    home: PathBuf,
}

/// A project with `items` and a private tmux server for the calling test; `None` (with a note)
/// when tmux is not installed.
fn with_tmux(items: &[&str]) -> Option<(Project, Tmux)> {
    if crate::support::missing("tmux") {
        return None;
    }
    let p = Project::new(items);
    let tmux = Tmux::for_project(&p);
    Some((p, tmux))
}

impl Tmux {
    /// `hank ARGS` in the project, its tmux commands on this server; asserts its exit `code`.
    fn hank(&self, p: &Project, args: &[&str], code: i32) -> Output {
        let out = p.run_env(&[("TMUX_TMPDIR", &self.tmpdir)], args);
        exits(&out, code);
        out
    }

    /// A private server for the project's test (its socket folder under the test's HOME).
    pub(crate) fn for_project(p: &Project) -> Tmux {
        let tmpdir = p.home.join("tmux");
        std::fs::create_dir_all(&tmpdir).unwrap();
        Tmux {
            tmpdir,
            home: p.home.clone(),
        }
    }

    fn cmd(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(args)
            .env_remove("TMUX")
            .env("TMUX_TMPDIR", &self.tmpdir)
            .env("HOME", &self.home)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs tmux on this server with only the environment `env` (a server started by someone
    /// else, without the caller's variables); asserts that it succeeded.
    fn start_clean(&self, env: &[(&str, OsString)], args: &[&str]) {
        let o = Command::new("tmux")
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("TMUX_TMPDIR", &self.tmpdir)
            // The fake agent writes its call files outside the project (see support.rs).
            .env("SANDBOX", "off")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }

    pub(crate) fn has_session(&self, name: &str) -> bool {
        self.cmd(&["has-session", "-t", &format!("={name}")])
            .status
            .success()
    }

    /// Waits up to 30 s (while session `name` lives) for its panes to show every one of
    /// `wanted`; asserts that they did. The last screen.
    pub(crate) fn showing(&self, name: &str, wanted: &[&str]) -> String {
        let start = Instant::now();
        let mut screen = String::new();
        while start.elapsed() < Duration::from_secs(30) && self.has_session(name) {
            screen = self.capture_all(name);
            if wanted.iter().all(|w| screen.contains(w)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        for w in wanted {
            assert!(screen.contains(w), "{w:?} not on screen:\n{screen}");
        }
        screen
    }

    /// Waits up to 60 s for session `name` to end with the run it shows (`what`): the exit code
    /// hank recorded for it (`.hank/logs/tmux-exit-code`).
    pub(crate) fn closed_with(&self, p: &Project, name: &str, what: &str) -> String {
        let start = Instant::now();
        while self.has_session(name) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the session outlived {what}:\n{}",
                self.capture_all(name)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let code = std::fs::read_to_string(p.dir.join(".hank/logs/tmux-exit-code"))
            .expect("tmux-exit-code");
        code.trim().to_string()
    }

    /// Every pane of session `name`, wrapped lines joined.
    pub(crate) fn capture_all(&self, name: &str) -> String {
        let panes = self.cmd(&[
            "list-panes",
            "-s",
            "-t",
            &format!("={name}"),
            "-F",
            "#{pane_id}",
        ]);
        stdout(&panes)
            .lines()
            .map(|id| stdout(&self.cmd(&["capture-pane", "-p", "-J", "-t", id])))
            .collect::<Vec<_>>()
            .join("\n=====\n")
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

#[test]
fn monitor_flag_runs_the_loop_in_tmux_and_ends_with_it() {
    let Some((p, tmux)) = with_tmux(&["one", "two", "three"]) else {
        return;
    };
    // The agent runs until the test has seen the dashboard show the running loop.
    p.fake("effect.sh", UNTIL_RELEASED);
    let out = tmux.hank(
        &p,
        &[
            "--monitor",
            "--monitor-exit",
            "--max-loops",
            "1",
            "--model",
            "it's $HOME",
        ],
        0,
    );
    assert_eq!(
        stdout(&out).trim(),
        "tmux attach -t proj",
        "{}",
        stderr(&out)
    );

    // The dashboard pane shows the project's state: the running loop.
    tmux.showing("proj", &["fix plan", "proj", "RUNNING"]);
    p.fake("release", "");

    // The session ends with the loop (--max-loops 1 → exit code 3, recorded).
    assert_eq!(tmux.closed_with(&p, "proj", "the loop"), "3");
    assert_eq!(p.calls(), 1);
    // The forwarded argument arrived intact.
    let argv = p.argv(1);
    let model = argv
        .iter()
        .position(|a| a == "--model")
        .map(|i| argv[i + 1].clone());
    assert_eq!(model.as_deref(), Some("it's $HOME"), "{argv:?}");
}

/// A closed terminal (tmux server killed → SIGHUP, stdin at EOF) ends the dashboard; it must
/// not stay behind spinning on the dead terminal.
#[test]
fn monitor_exits_when_its_terminal_goes_away() {
    let Some((p, server)) = with_tmux(&["a"]) else {
        return;
    };
    let tmux = |args: &[&str]| server.cmd(args);
    let cmd = format!(
        "cd '{}' && exec '{}' monitor",
        p.dir.display(),
        crate::support::hank_bin().display()
    );
    let o = tmux(&["new-session", "-d", "-x", "100", "-y", "30", &cmd]);
    assert!(o.status.success(), "{}", stderr(&o));
    let pane = tmux(&["list-panes", "-F", "#{pane_pid}"]);
    let pid: i32 = stdout(&pane).trim().parse().unwrap();
    // Started: the dashboard is on the screen (its " run " box), and the process is alive.
    let start = Instant::now();
    loop {
        let screen = stdout(&tmux(&["capture-pane", "-p"]));
        if screen.contains(" run ") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the monitor never drew its dashboard:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(crate::support::alive(pid), "the monitor did not start");
    let _ = tmux(&["kill-server"]);
    assert!(
        crate::support::gone_within(pid, Duration::from_secs(5)),
        "monitor {pid} outlived its terminal"
    );
}

fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A bad flag or `.hankrc` under `--monitor` is the same error as `hank run`'s, in the user's
/// terminal, and no tmux session is started.
#[test]
fn monitor_flag_validates_first() {
    let Some((p, tmux)) = with_tmux(&["a"]) else {
        return;
    };
    let err = stderr(&tmux.hank(&p, &["--monitor", "--max-loops", "many"], 1));
    assert!(err.contains("--max-loops"), "{err}");
    p.hankrc("MAX_LOOPZ=3\n");
    let err = stderr(&tmux.hank(&p, &["--monitor"], 1));
    crate::support::assert_contains(&err, "unknown key MAX_LOOPZ");
    assert!(!tmux.has_session("proj"));
    assert_eq!(p.calls(), 0);
}

/// A tmux server started earlier, with another environment: the loop still gets the
/// caller's environment (keys, HOME, the fake agent's settings), and no env file stays behind.
#[test]
fn monitor_flag_passes_the_callers_environment_to_an_old_server() {
    let Some((p, tmux)) = with_tmux(&["a"]) else {
        return;
    };
    let private_tmp = p.home.join("tmp");
    std::fs::create_dir_all(&private_tmp).unwrap();
    // The server starts without the caller's variables.
    tmux.start_clean(
        &[
            ("PATH", "/usr/bin:/bin".into()),
            ("HOME", "/nonexistent".into()),
        ],
        &["new-session", "-d", "-s", "other", "sleep 600"],
    );
    p.fake(
        "effect.sh",
        "printf '%s|%s' \"$ANTHROPIC_API_KEY\" \"$HOME\" > \"$FAKE_CLAUDE_DIR/seen\"\n",
    );
    let out = p
        .cmd()
        .env("TMUX_TMPDIR", &tmux.tmpdir)
        .env("TMPDIR", &private_tmp)
        .env("ANTHROPIC_API_KEY", "sk-ant-api03-caller-only-value")
        .args(["--monitor", "--monitor-exit", "--max-loops", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    wait_until("the loop's session ends", Duration::from_secs(60), || {
        !tmux.has_session("proj")
    });
    assert_eq!(p.calls(), 1);
    let seen = std::fs::read_to_string(p.fake.join("seen")).unwrap();
    assert_eq!(
        seen,
        format!("sk-ant-api03-caller-only-value|{}", p.home.display())
    );
    let code = std::fs::read_to_string(p.dir.join(".hank/logs/tmux-exit-code")).unwrap();
    assert_eq!(code.trim(), "3");
    let left: Vec<_> = std::fs::read_dir(&private_tmp).unwrap().collect();
    assert!(left.is_empty(), "env file left behind: {left:?}");
}

/// Without `--monitor-exit` the final screen stays until a key is pressed.
#[test]
fn monitor_flag_keeps_the_final_screen_until_a_key() {
    let Some((p, tmux)) = with_tmux(&["a"]) else {
        return;
    };
    tmux.hank(&p, &["--monitor", "--max-loops", "1"], 0);
    let mut screen = String::new();
    wait_until("the exit screen", Duration::from_secs(60), || {
        screen = tmux.capture_all("proj");
        screen.contains("Press any key")
    });
    assert!(screen.contains("exited with code 3"), "{screen}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(tmux.has_session("proj"), "the layout closed by itself");
    let panes = tmux.cmd(&["list-panes", "-s", "-t", "=proj", "-F", "#{pane_id}"]);
    let first = stdout(&panes).lines().next().unwrap().to_string();
    let _ = tmux.cmd(&["send-keys", "-t", &first, "x"]);
    wait_until(
        "the layout closes after the key",
        Duration::from_secs(20),
        || !tmux.has_session("proj"),
    );
}

/// Inside tmux, `--monitor` opens a window in the current session and returns the loop's
/// exit code when it ends.
#[test]
fn monitor_flag_inside_tmux_opens_a_window_and_returns_the_code() {
    let Some((p, tmux)) = with_tmux(&["a"]) else {
        return;
    };
    p.fake("effect.sh", UNTIL_RELEASED);
    let result = p.home.join("result");
    let script = format!(
        "cd '{}' && '{}' --monitor --monitor-exit --max-loops 1; echo $? > '{}'; sleep 600",
        p.dir.display(),
        crate::support::hank_bin().display(),
        result.display()
    );
    let path = format!(
        "{}:/usr/bin:/bin",
        crate::support::fixtures().join("bin").display()
    );
    tmux.start_clean(
        &[
            ("PATH", path.into()),
            ("HOME", p.home.clone().into()),
            ("FAKE_CLAUDE_DIR", p.fake.clone().into()),
            ("NO_COLOR", "1".into()),
        ],
        &[
            "new-session",
            "-d",
            "-s",
            "outer",
            "-x",
            "200",
            "-y",
            "50",
            &script,
        ],
    );
    wait_until("the loop's window opens", Duration::from_secs(30), || {
        let w = tmux.cmd(&["list-windows", "-t", "=outer", "-F", "#{window_name}"]);
        stdout(&w).lines().any(|n| n == "proj")
    });
    assert!(!tmux.has_session("proj"), "a second session was created");
    p.fake("release", "");
    wait_until("the exit code comes back", Duration::from_secs(60), || {
        std::fs::read_to_string(&result).is_ok_and(|r| !r.trim().is_empty())
    });
    assert_eq!(std::fs::read_to_string(&result).unwrap().trim(), "3");
    assert_eq!(p.calls(), 1);
}
