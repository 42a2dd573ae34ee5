//! Test harness: a temp project ready for the loop, the fake agent on PATH, `HOME` in a temp
//! dir, and helpers to read what the fake agent received and what hank wrote.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `git ARGS` in `dir` with a test identity and no system or global configuration; its
/// trimmed stdout (a failure fails the test, with git's stderr).
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stderr(Stdio::piped())
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `git ARGS` in `dir` with `HOME` at `home`: a test identity, `main` as the first branch,
/// no system configuration, quiet; a failure fails the test.
pub(crate) fn git_in(dir: &Path, home: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?}");
}

/// Makes `dir` a git repository with one commit of what it holds.
pub(crate) fn git_commit_all(dir: &Path, home: &Path) {
    git_in(dir, home, &["init", "-q"]);
    git_in(dir, home, &["add", "-A"]);
    git_in(dir, home, &["commit", "-q", "-m", "init"]);
}

/// The fake agent's answer to a call that hit the subscription's usage limit, resetting at
/// `reset` (epoch seconds).
pub(crate) fn usage_limit_json(reset: i64) -> String {
    error_json(&format!("Claude AI usage limit reached|{reset}"), Some(429))
}

/// Ctrl-C to a running `hank`: it must end with 130 within 10 s.
pub(crate) fn interrupt(child: Child) -> Output {
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let o = wait_with_timeout(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    o
}

/// The check named `name` in `hank doctor --json`'s `checks` (null when absent).
pub(crate) fn doctor_check(v: &Value, name: &str) -> Value {
    v["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Fails the test unless `text` contains `want` (the whole text in the message).
#[track_caller]
pub(crate) fn assert_contains(text: &str, want: &str) {
    assert!(text.contains(want), "missing {want:?} in:\n{text}");
}

/// Path of the built `hank` binary.
pub(crate) fn hank_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hank"))
}

/// `fixtures/` of the repository.
pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Is `program` on PATH?
pub(crate) fn cmd_exists(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// The tests of the nextest `slow` group (`.config/nextest.toml`): each is
/// `#[ignore = "slow: …"]` ([`SLOW_REASON`]), so a plain `cargo test` reports them as
/// ignored, with the reason. `cargo test -- --ignored` runs them (`.ci/run` runs the names
/// of `.config/nextest.toml` that way), `cargo nextest run --run-ignored all` too, in their
/// own group, one at a time.
pub(crate) const SLOW_TESTS: [&str; 8] = [
    "progress::an_edit_in_a_300000_file_tree_is_seen",
    "hostile_process::kill_9_sweep_leaves_no_survivor_and_no_uncounted_call",
    "faults::kill_9_at_spread_points_keeps_state_ledger_cap_and_lock",
    "faults::a_500_mb_flood_keeps_memory_bounded",
    "faults::garbage_outputs_are_analyzed_without_crashing",
    "runners::three_runners_plan_run_continue_and_respect_the_order",
    "fleet_budget::a_window_reading_from_one_task_defers_the_next_until_its_reset",
    "fleet_budget::a_slow_merge_does_not_stall_the_supervision_of_other_tasks",
];

/// The reason every slow test is ignored with (`architecture.rs` checks the attribute).
pub(crate) const SLOW_REASON: &str =
    "slow: cargo test -- --ignored (.ci/run runs them), or cargo nextest run --run-ignored all";

/// A project with `.hank/` files in a temp dir, plus a fake-agent control dir and a HOME.
pub(crate) struct Project {
    _root: tempfile::TempDir,
    pub dir: PathBuf,
    pub fake: PathBuf,
    pub home: PathBuf,
}

/// A success result with a HANK_STATUS block (all fields given).
pub(crate) fn result_json(status: &str, work_type: &str, exit_signal: bool, text: &str) -> String {
    let body = format!(
        "{text}\n\n---HANK_STATUS---\nSTATUS: {status}\nTASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 1\nTESTS_STATUS: PASSING\nWORK_TYPE: {work_type}\nEXIT_SIGNAL: {exit_signal}\nRECOMMENDATION: keep going\n---END_HANK_STATUS---"
    );
    serde_json::json!({
        "type": "result", "subtype": "success", "is_error": false, "duration_ms": 1000,
        "num_turns": 2, "result": body, "stop_reason": "end_turn",
        "session_id": "5b1c0e0a-1111-2222-3333-444444444444", "total_cost_usd": 0.01,
        "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
        "permission_denials": []
    })
    .to_string()
}

/// An error result (`is_error: true`, `subtype: success`) with `text` as the message.
pub(crate) fn error_json(text: &str, api_status: Option<u16>) -> String {
    serde_json::json!({
        "type": "result", "subtype": "success", "is_error": true, "duration_ms": 300,
        "api_error_status": api_status, "num_turns": 1, "result": text, "stop_reason": "stop_sequence",
        "session_id": "9d7e0b8c-1111-2222-3333-444444444444", "total_cost_usd": 0,
        "usage": {"input_tokens": 0, "output_tokens": 0}, "permission_denials": []
    })
    .to_string()
}

/// Ticks the first open fix_plan item and touches a source file (the agent's work).
pub(crate) const TICK_ONE: &str = "sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md\nmkdir -p src && date +%s%N >> src/work.txt\n";

impl Project {
    /// Hank's `.gitignore`, the first commit, and a bare repository `$HOME/remote.git`
    /// (branch `main`) as `origin`, not pushed to yet; its path.
    pub(crate) fn git_with_origin(&self) -> PathBuf {
        std::fs::write(
            self.dir.join(".gitignore"),
            include_str!("../../templates/gitignore"),
        )
        .expect("write");
        self.git_init();
        let remote = self.home.join("remote.git");
        let path = remote.to_str().expect("utf-8 path");
        git(&self.home, &["init", "-q", "--bare", "-b", "main", path]);
        git(&self.dir, &["remote", "add", "origin", path]);
        remote
    }

    /// [`Project::git_with_origin`], `main` pushed.
    pub(crate) fn git_pushed_to_origin(&self) -> PathBuf {
        let remote = self.git_with_origin();
        git(&self.dir, &["push", "-q", "origin", "main"]);
        remote
    }

    /// A project whose fix_plan has `items` open.
    pub(crate) fn new(items: &[&str]) -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("proj");
        let fake = root.path().join("fake");
        let home = root.path().join("home");
        for d in [&dir.join(".hank"), &fake, &home] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(dir.join(".hank/PROMPT.md"), "# Prompt\nDo the next task.\n")
            .expect("write");
        let mut plan = String::from("# Fix plan\n\n## Tasks\n");
        for item in items {
            plan.push_str(&format!("- [ ] {item}\n"));
        }
        std::fs::write(dir.join(".hank/fix_plan.md"), plan).expect("write");
        std::fs::write(dir.join(".hank/AGENT.md"), "# Agent notes\n").expect("write");
        std::fs::write(
            dir.join(".hankrc"),
            "# test project\nRETRY_BACKOFF_SECONDS=0\n",
        )
        .expect("write");
        Self {
            _root: root,
            dir,
            fake,
            home,
        }
    }

    /// Makes the project a git repository with one commit.
    pub(crate) fn git_init(&self) -> &Self {
        git_commit_all(&self.dir, &self.home);
        self
    }

    /// Writes `.hankrc`.
    pub(crate) fn hankrc(&self, text: &str) -> &Self {
        std::fs::write(self.dir.join(".hankrc"), text).expect("write");
        self
    }

    /// Writes a fake-agent control file (`response`, `response-2`, `effect.sh`, `exit-1`, …).
    pub(crate) fn fake(&self, name: &str, content: &str) -> &Self {
        std::fs::write(self.fake.join(name), content).expect("write");
        self
    }

    /// `hank` with a hermetic environment, run in the project.
    pub(crate) fn cmd(&self) -> Command {
        self.cmd_of(hank_bin())
    }

    /// `program` (an alias of hank, `script`, …) with hank's hermetic environment, run in the
    /// project.
    pub(crate) fn cmd_of(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        let path = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            fixtures().join("bin").display()
        );
        c.current_dir(&self.dir)
            .env_clear()
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("FAKE_CLAUDE_DIR", &self.fake)
            // The fake agent writes its call files in FAKE_CLAUDE_DIR, outside the project:
            // the sandbox's own tests (`sandbox.rs`) turn it on and allow that folder.
            .env("SANDBOX", "off")
            .env("NO_COLOR", "1")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null());
        c
    }

    /// The files a corrupt `state.json` was moved aside to (`.hank/state.json.corrupt-*`).
    pub(crate) fn corrupt_state_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.dir.join(".hank"))
            .expect("read .hank")
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("state.json.corrupt-")
            })
            .map(|e| e.path())
            .collect()
    }

    /// Runs `hank ARGS` to completion with `env` added to its environment.
    pub(crate) fn run_env<K, V>(&self, env: &[(K, V)], args: &[&str]) -> Output
    where
        K: AsRef<std::ffi::OsStr>,
        V: AsRef<std::ffi::OsStr>,
    {
        let mut c = self.cmd();
        for (k, v) in env {
            c.env(k, v);
        }
        c.args(args).output().expect("run hank")
    }

    /// The fake agent hits the usage limit, reset `secs` from now (epoch seconds returned): at
    /// every call, or at call `call` only.
    pub(crate) fn fake_usage_limit(&self, call: Option<u32>, secs: i64) -> i64 {
        let reset = jiff::Timestamp::now().as_second() + secs;
        let suffix = call.map(|n| format!("-{n}")).unwrap_or_default();
        self.fake(&format!("response{suffix}"), &usage_limit_json(reset))
            .fake(&format!("exit{suffix}"), "1");
        reset
    }

    /// Runs `hank ARGS` to completion.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run hank")
    }

    /// Starts `hank ARGS` in the background (stdout/stderr piped).
    /// `hank ARGS` run to its end, which must be exit code `code` with `reason` as
    /// status.json's `exit_reason` (hank's stderr in the failure message).
    pub(crate) fn run_to(&self, args: &[&str], code: i32, reason: &str) -> Output {
        let o = self.run(args);
        assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
        assert_eq!(self.status()["exit_reason"], reason, "{}", stderr(&o));
        o
    }

    pub(crate) fn spawn(&self, args: &[&str]) -> Child {
        self.cmd()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hank")
    }

    /// How many times the fake agent was called.
    pub(crate) fn calls(&self) -> u32 {
        std::fs::read_to_string(self.fake.join("calls"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The argv of call `n`.
    pub(crate) fn argv(&self, n: u32) -> Vec<String> {
        std::fs::read_to_string(self.fake.join(format!("argv-{n}")))
            .map(|s| s.lines().map(ToString::to_string).collect())
            .unwrap_or_default()
    }

    /// The stdin of call `n`.
    /// Everything call `n` read on stdin: the loop context block, then PROMPT.md.
    pub(crate) fn stdin(&self, n: u32) -> Vec<u8> {
        std::fs::read(self.fake.join(format!("stdin-{n}"))).unwrap_or_default()
    }

    /// Call `n`'s stdin split into (loop context, PROMPT.md bytes).
    pub(crate) fn context_and_prompt(&self, n: u32) -> (String, Vec<u8>) {
        split_context(&self.stdin(n))
    }

    pub(crate) fn read_json(&self, rel: &str) -> Value {
        let bytes = std::fs::read(self.dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    pub(crate) fn status(&self) -> Value {
        self.read_json(".hank/status.json")
    }

    pub(crate) fn state(&self) -> Value {
        self.read_json(".hank/state.json")
    }

    pub(crate) fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join(".hank/events.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("event line is JSON"))
            .collect()
    }

    /// Polls until `cond` holds on status.json, or panics after `timeout`.
    pub(crate) fn wait_status(&self, timeout: Duration, cond: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            if let Ok(bytes) = std::fs::read(self.dir.join(".hank/status.json"))
                && let Ok(v) = serde_json::from_slice::<Value>(&bytes)
                && cond(&v)
            {
                return v;
            }
            assert!(
                start.elapsed() < timeout,
                "status condition not reached in {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Polls until the fake agent has been called `n` times.
    pub(crate) fn wait_calls(&self, n: u32, timeout: Duration) {
        let start = Instant::now();
        while self.calls() < n {
            assert!(
                start.elapsed() < timeout,
                "agent not called {n} times in {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Sends `sig` to a child.
pub(crate) fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, sig).expect("kill");
}

/// Waits for a child with a deadline; returns its output.
pub(crate) fn wait_with_timeout(child: Child, timeout: Duration) -> Output {
    wait_or_kill(child, timeout, false)
        .unwrap_or_else(|_| panic!("hank did not exit within {timeout:?}"))
}

/// Waits for `child` up to `limit`: its output, or `Err` with what it wrote once it is killed
/// at the limit — its whole process group with `group` (a child started as a group leader).
pub(crate) fn wait_or_kill(
    mut child: Child,
    limit: Duration,
    group: bool,
) -> Result<Output, Output> {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return Ok(child.wait_with_output().expect("output"));
        }
        if start.elapsed() > limit {
            if group {
                let pid = i32::try_from(child.id()).expect("pid");
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let _ = child.kill();
            return Err(child.wait_with_output().expect("output"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process's stdout and stderr, labelled, for a failure message.
pub(crate) fn outputs(o: &Output) -> String {
    format!(
        "\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Alive and not a zombie (the container's PID 1 may not reap orphans).
pub(crate) fn alive(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|s| s.state != 'Z')
}

/// Waits up to 2 s for `pid` to be gone.
pub(crate) fn gone(pid: i32) -> bool {
    gone_within(pid, Duration::from_secs(2))
}

/// Waits up to `within` for `pid` to be gone.
pub(crate) fn gone_within(pid: i32, within: Duration) -> bool {
    let start = Instant::now();
    while alive(pid) {
        if start.elapsed() > within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Live (non-zombie) members of process group `pgid`, from `/proc`.
pub(crate) fn group_members(pgid: i32) -> Vec<i32> {
    live_pids(|s| s.pgrp == pgid)
}

/// Polls until process group `pgid` is empty or `within` passed; returns what is left.
pub(crate) fn group_after(pgid: i32, within: Duration) -> Vec<i32> {
    let start = Instant::now();
    loop {
        let left = group_members(pgid);
        if left.is_empty() || start.elapsed() > within {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Live children of `pid`.
pub(crate) fn children_of(pid: i32) -> Vec<i32> {
    live_pids(|s| s.ppid == pid)
}

/// The live (non-zombie) processes `pick` accepts, from `/proc`.
fn live_pids(pick: impl Fn(&ProcStat) -> bool) -> Vec<i32> {
    proc_stats()
        .into_iter()
        .filter(|s| s.state != 'Z' && pick(s))
        .map(|s| s.pid)
        .collect()
}

struct ProcStat {
    pid: i32,
    state: char,
    ppid: i32,
    pgrp: i32,
}

fn proc_stats() -> Vec<ProcStat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| proc_stat(e.ok()?.file_name().to_str()?.parse().ok()?))
        .collect()
}

/// `/proc/<pid>/stat`: the state, parent and process group of `pid` (None when it is gone).
fn proc_stat(pid: i32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1.to_string();
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some(ProcStat {
        pid,
        state,
        ppid,
        pgrp,
    })
}

/// Splits what the agent read on stdin into the `<hank-loop-context>` block's text and the
/// prompt after it (the block is always first; panics when it is missing).
pub(crate) fn split_context(stdin: &[u8]) -> (String, Vec<u8>) {
    let open = b"<hank-loop-context>\n";
    let close = b"\n</hank-loop-context>\n\n";
    assert!(
        stdin.starts_with(open),
        "stdin does not start with the loop context: {}",
        String::from_utf8_lossy(&stdin[..stdin.len().min(200)])
    );
    let end = stdin
        .windows(close.len())
        .position(|w| w == close)
        .expect("the loop context block is closed");
    let ctx = String::from_utf8_lossy(&stdin[open.len()..end]).into_owned();
    (ctx, stdin[end + close.len()..].to_vec())
}

// ---- helpers added by issue-25do ----

impl Project {
    /// The events of type `kind` in `.hank/events.jsonl`, in order.
    pub(crate) fn events_of(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["type"] == kind)
            .collect()
    }
}

/// A temp workspace for the commands that make a project (`setup`, `enable`, `migrate`) and
/// for projects written by hand: `work` is the cwd, `home` HOME, `fake` the fake agent's folder,
/// `empty-bin` an empty folder for PATHs without tools, all under `root`.
pub(crate) struct Workspace {
    pub(crate) root: tempfile::TempDir,
}

impl Workspace {
    pub(crate) fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        for d in ["home", "work", "fake", "empty-bin"] {
            std::fs::create_dir(root.path().join(d)).unwrap();
        }
        Self { root }
    }
    pub(crate) fn work(&self) -> PathBuf {
        self.root.path().join("work")
    }
    pub(crate) fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }
    /// Writes `content` to `rel` under `work`, making its folders.
    pub(crate) fn write(&self, rel: &str, content: &str) {
        let p = self.work().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    /// The file `rel` under `work` (empty when missing).
    pub(crate) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.work().join(rel)).unwrap_or_default()
    }
    /// The project's `.hank/fix_plan.md` under `work` (empty when missing).
    pub(crate) fn plan(&self) -> String {
        self.read(".hank/fix_plan.md")
    }
    /// Every folder (as `dir/`) and file under `work` except `.git/`, with its content, sorted
    /// (for "nothing changed" checks).
    pub(crate) fn tree(&self) -> Vec<(String, String)> {
        fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                let rel = p.strip_prefix(base).unwrap().display().to_string();
                if rel == ".git" || rel.starts_with(".git/") {
                    continue;
                }
                if p.is_dir() {
                    out.push((format!("{rel}/"), String::new()));
                    walk(base, &p, out);
                } else {
                    out.push((rel, std::fs::read_to_string(&p).unwrap_or_default()));
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.work(), &self.work(), &mut out);
        out.sort();
        out
    }
}

impl Project {
    /// Every call of the fake agent answers Claude Code's error result `message` (with the
    /// API's HTTP `status`, if any) and exits 1.
    pub(crate) fn fail_calls(&self, message: &str, status: Option<u16>) -> &Self {
        self.fake("response", &error_json(message, status))
            .fake("exit", "1")
    }

    /// Waits (up to 10 s) until the fake agent's grandchild recorded its PID, then 100 ms
    /// more (for it to be settled in its group); the PID.
    pub(crate) fn grandchild_pid(&self) -> i32 {
        let file = self.fake.join("grandchild.pid");
        let start = Instant::now();
        while !file.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no grandchild.pid"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(100));
        let text = std::fs::read_to_string(&file).unwrap();
        text.trim().parse().unwrap()
    }
}

/// Sends SIGTERM to a running `hank`; asserts that it ends with 130 within 10 s.
pub(crate) fn terminate(child: Child) -> Output {
    signal(&child, nix::sys::signal::Signal::SIGTERM);
    let o = wait_with_timeout(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    o
}

impl Project {
    /// [`Project::spawn`] with the variables `env` added.
    pub(crate) fn spawn_env(&self, env: &[(&str, &str)], args: &[&str]) -> Child {
        self.cmd()
            .envs(env.iter().copied())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hank")
    }
}

impl Project {
    /// `hank ARGS` run to its end, which must be exit code `code` (hank's stderr in the
    /// failure message).
    pub(crate) fn run_code(&self, args: &[&str], code: i32) -> Output {
        let o = self.run(args);
        assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
        o
    }
}

/// Asserts that the finished `hank` exited with `code` (its stderr shown when not); returns
/// its stderr.
pub(crate) fn exits(o: &Output, code: i32) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{err}");
    err
}

impl Project {
    /// Starts `hank ARGS` in the background and waits (up to 20 s each) until the agent was
    /// called once and `status.json` says `running`.
    pub(crate) fn start_call(&self, args: &[&str]) -> Child {
        let child = self.spawn(args);
        self.wait_calls(1, Duration::from_secs(20));
        self.wait_status(Duration::from_secs(20), |s| s["state"] == "running");
        child
    }
}

/// Writes `content` to the file `path`, making its folders first.
pub(crate) fn write_new(path: &Path, content: impl AsRef<[u8]>) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(path, content).unwrap();
}

/// Is `program` missing from PATH? Then a note naming the calling test (libtest names each
/// test's thread after it) says that it is skipped.
pub(crate) fn missing(program: &str) -> bool {
    if cmd_exists(program) {
        return false;
    }
    let test = std::thread::current().name().unwrap_or("?").to_string();
    eprintln!("SKIP {test}: {program} is not installed");
    true
}

impl Project {
    /// Starts `hank ARGS`, waits (up to 30 s) until that run is `waiting` or `stopped`, kills
    /// it and asserts that it was waiting at the call cap (`rate_limit`); its output.
    pub(crate) fn waits_at_the_call_cap(&self, args: &[&str]) -> Output {
        let (s, out) = status_once_it_waits(self, args);
        assert_eq!(s["wait_reason"], "rate_limit", "{s}: {}", stderr(&out));
        out
    }
}

// ---- helpers added by issue-25dn ----

/// Asks `probe` every 50 ms until it gives a value, which it returns; `None` once `within`
/// has passed without one.
pub(crate) fn poll<T>(within: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        if start.elapsed() > within {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Fails unless `text` contains each of `wants` (the whole text in the message).
#[track_caller]
pub(crate) fn assert_contains_all(text: &str, wants: &[&str]) {
    for want in wants {
        assert_contains(text, want);
    }
}

/// Starts `hank ARGS` in `p` and waits (up to 30 s) until that run waits or has stopped; then
/// kills it. Its status.json then, and its output.
pub(crate) fn status_once_it_waits(p: &Project, args: &[&str]) -> (Value, Output) {
    let mut child = p.spawn(args);
    let pid = child.id();
    let status = p.wait_status(Duration::from_secs(30), |s| {
        s["pid"] == pid && (s["state"] == "waiting" || s["state"] == "stopped")
    });
    child.kill().expect("kill hank");
    (status, child.wait_with_output().expect("output"))
}

// ---- helpers added by issue-25dc ----

/// The built-in agent profile `name` (`templates/agents/<name>.toml`), parsed by hank's own
/// parser.
pub(crate) fn builtin_profile(name: &str) -> hank::agent::profile::Profile {
    let rel = format!("templates/agents/{name}.toml");
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(&rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"));
    hank::agent::profile::parse(&text, &rel, name, hank::agent::profile::Origin::Builtin)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// What `profile` reads, at a fixed clock, from what its real CLI printed in the contract
/// suite: `fixtures/agents/<profile>/<name>.stdout`, `.stderr` and `.exit`.
pub(crate) fn analyze_captured(
    profile: &hank::agent::profile::Profile,
    name: &str,
) -> hank::analysis::Analysis {
    let dir = fixtures().join("agents").join(&profile.name);
    let read = |ext: &str| {
        std::fs::read(dir.join(format!("{name}.{ext}")))
            .unwrap_or_else(|e| panic!("{name}.{ext}: {e}"))
    };
    let code: i32 = String::from_utf8_lossy(&read("exit"))
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name}.exit"));
    let hank::agent::profile::Parser::Mapped(m) = &profile.parser else {
        panic!("the {} profile reads JSONPath fields", profile.name)
    };
    let facts = hank::analysis::RunFacts {
        exit_code: Some(code),
        ..hank::analysis::RunFacts::default()
    };
    let clock = hank::analysis::Clock::utc("2026-11-24T02:00:00Z".parse().expect("time"));
    hank::analysis::analyze_mapped(
        read("stdout").as_slice(),
        &read("stderr"),
        &facts,
        &clock,
        m,
    )
}

/// [`analyze_captured`] for an error the profile must classify: an agent error of `kind`
/// with a message.
pub(crate) fn analyze_captured_error(
    profile: &hank::agent::profile::Profile,
    name: &str,
    kind: hank::analysis::ErrorKind,
) -> hank::analysis::Analysis {
    let a = analyze_captured(profile, name);
    assert_eq!(
        a.outcome,
        hank::analysis::Outcome::AgentError,
        "{name}: {a:?}"
    );
    let e = a
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: an error"));
    assert_eq!(e.kind, kind, "{name}: {e:?}");
    assert!(!e.message.is_empty(), "{name}: {e:?}");
    a
}

/// The lines of the file at `path` (none when it is missing).
pub(crate) fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(ToOwned::to_owned)
        .collect()
}

impl Project {
    /// The folder driving the fake CLI `agent` (`fixtures/bin/<agent>`, its
    /// `FAKE_<AGENT>_DIR`), created empty.
    pub(crate) fn fake_agent_dir(&self, agent: &str) -> PathBuf {
        let dir = self
            .dir
            .parent()
            .expect("parent")
            .join(format!("fake-{agent}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    /// `hank --agent AGENT ARGS` with the fake CLI `agent` driven by [`Project::fake_agent_dir`].
    pub(crate) fn run_fake_agent(&self, agent: &str, args: &[&str]) -> Output {
        let var = format!("FAKE_{}_DIR", agent.to_uppercase());
        let dir = self.fake_agent_dir(agent);
        let mut all = vec!["--agent", agent];
        all.extend_from_slice(args);
        self.run_env(&[(var.as_str(), &dir)], &all)
    }

    /// The `agent_finished` events.
    pub(crate) fn agent_finished(&self) -> Vec<Value> {
        self.events_of("agent_finished")
    }

    /// The fake CLI `agent` answers every call with what the real one printed for `answer`
    /// (`fixtures/agents/<agent>/<answer>.stdout`, `.stderr`, `.exit`, captured by the
    /// contract suite).
    pub(crate) fn replay_captured(&self, agent: &str, answer: &str) {
        let fake = self.fake_agent_dir(agent);
        let captured = fixtures().join("agents").join(agent);
        for (ext, file) in [
            ("stdout", "response"),
            ("stderr", "stderr"),
            ("exit", "exit"),
        ] {
            std::fs::copy(captured.join(format!("{answer}.{ext}")), fake.join(file))
                .unwrap_or_else(|e| panic!("{agent}/{answer}.{ext}: {e}"));
        }
    }
}

/// `hank --agent AGENT --max-loops 2` over the items `a` and `b`, the fake CLI `agent` ticking
/// one item a loop: the plan completes (exit 0) with `agent`, claude is never called, the
/// prompt (the loop context first) reaches the CLI on stdin, and both loops succeed with
/// `agent`. The project, the fake's folder (`argv-N`, `stdin-N`) and the `agent_finished`
/// events.
pub(crate) fn fake_agent_completes_the_plan(agent: &str) -> (Project, PathBuf, Vec<Value>) {
    let p = Project::new(&["a", "b"]);
    let fake = p.fake_agent_dir(agent);
    std::fs::write(fake.join("effect.sh"), TICK_ONE).expect("write");
    let o = p.run_fake_agent(agent, &["--max-loops", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "plan_complete", "{}", stderr(&o));
    assert_eq!(p.status()["agent"], agent);
    assert_eq!(p.calls(), 0, "claude was never called");
    let stdin1 = std::fs::read_to_string(fake.join("stdin-1")).expect("stdin-1");
    assert!(stdin1.starts_with("<hank-loop-context>"), "{stdin1}");
    assert!(stdin1.contains("Do the next task."), "{stdin1}");
    let finished = p.agent_finished();
    assert_eq!(finished.len(), 2);
    for f in &finished {
        assert_eq!(f["outcome"], "success", "{f}");
        assert_eq!(f["agent"], agent, "{f}");
    }
    (p, fake, finished)
}
