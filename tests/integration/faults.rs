//! `hank run` under faults: kill -9 at many points, signals in every phase, misbehaving agents
//! (hangs, floods, garbage bytes, early exits), broken disks and files, secrets and hostile
//! file contents, plus property tests of the pure parsers (module `fuzz`).
//!
//! Everything runs against the fake agent (`fixtures/bin/claude`) or small agent scripts
//! written into the test's temp dir and passed with `--claude-cmd`. Tests that need root
//! (tmpfs mounts) print a visible SKIP line when they cannot run.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::support::{
    Project, TICK_ONE, alive, group_after, group_members, result_json, signal, stderr,
    wait_with_timeout,
};

/// Records the fake agent's PID (the leader of its process group) in `agent.pids`.
const RECORD_PID: &str = "echo $PPID >> \"$FAKE_CLAUDE_DIR/agent.pids\"\n";

/// The PIDs the fake agent recorded, in call order.
fn agent_pids(p: &Project) -> Vec<i32> {
    std::fs::read_to_string(p.fake.join("agent.pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Waits until the fake agent recorded `n` PIDs; returns the last.
fn wait_agent_pid(p: &Project, n: usize) -> i32 {
    let start = Instant::now();
    loop {
        let pids = agent_pids(p);
        if pids.len() >= n {
            return pids[n - 1];
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "agent pid {n} never recorded"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls for up to `within` until every agent started so far has recorded its PID (the fake
/// agent counts the call before it records) and every PID recorded after the first `known`
/// is gone; returns how many of those are still alive then (an agent that outlived hank).
fn agents_alive_after(p: &Project, known: usize, within: Duration) -> usize {
    let start = Instant::now();
    loop {
        let pids = agent_pids(p);
        let left = pids.iter().skip(known).filter(|pid| alive(**pid)).count();
        let all_recorded = pids.len() >= p.calls() as usize;
        if (left == 0 && all_recorded) || start.elapsed() >= within {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Peak resident set (VmHWM, KiB) of a live process.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Waits for `child`, sampling its VmHWM; returns the output and the highest sample (KiB).
fn wait_measuring(mut child: Child, timeout: Duration) -> (Output, u64) {
    let start = Instant::now();
    let mut peak = 0;
    loop {
        if let Some(kib) = peak_rss_kib(child.id()) {
            peak = peak.max(kib);
        }
        if child.try_wait().expect("try_wait").is_some() {
            return (child.wait_with_output().expect("output"), peak);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            panic!("hank did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Writes `lines` copies of `line`, then `tail`, to `path` (big outputs, generated once).
fn big_file(path: &Path, line: &[u8], lines: usize, tail: &[u8]) {
    let f = std::fs::File::create(path).expect("create big file");
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    for _ in 0..lines {
        w.write_all(line).expect("write");
    }
    w.write_all(tail).expect("write");
    w.flush().expect("flush");
}

/// Points the fake agent's `response` at `target` (a symlink: no copy of big files).
fn respond_with_file(p: &Project, target: &Path) {
    std::os::unix::fs::symlink(target, p.fake.join("response")).expect("symlink response");
}

/// An executable agent script in the fake dir; returns its path for `--claude-cmd`.
/// An agent program running `body` for each call; like a real client it answers `--version`
/// (hank asks once per run) without running `body`.
fn agent_script(p: &Project, name: &str, body: &str) -> String {
    let path = p.fake.join(name);
    let version = "[ \"${1:-}\" = --version ] && { echo '2.1.330 (Claude Code)'; exit 0; }\n";
    std::fs::write(&path, format!("#!/usr/bin/env bash\n{version}{body}")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path.display().to_string()
}

/// One loop over a one-item plan with `args` and the agent [`agent_script`] `name` running
/// `body`; the project, hank's output and how long the run took.
fn run_with_agent(name: &str, body: &str, args: &[&str]) -> (Project, Output, Duration) {
    let p = Project::new(&["a"]);
    let cmd = agent_script(&p, name, body);
    let start = Instant::now();
    let o = p.run(&[&["--claude-cmd", &cmd, "--max-loops", "1"], args].concat());
    (p, o, start.elapsed())
}

/// `state.json` and `status.json` parse when present; returns (state, status).
fn parsed_files(p: &Project) -> (Option<Value>, Option<Value>) {
    let read = |name: &str| {
        let path = p.dir.join(".hank").join(name);
        std::fs::read(&path).ok().map(|b| {
            serde_json::from_slice::<Value>(&b)
                .unwrap_or_else(|e| panic!("{name} does not parse after a fault: {e}"))
        })
    };
    (read("state.json"), read("status.json"))
}

/// Calls on the ledger as the next run reads them: `state.json` (schema 1 carried them
/// inline) and its call log `state.json.calls` (schema 2). `state` is the parsed state.json.
fn ledger_len(p: &Project, state: &Value) -> usize {
    assert!(state.is_object());
    hank::store::Store::new(&p.dir)
        .read_state()
        .unwrap_or_else(|e| panic!("the ledger does not read after a fault: {e}"))
        .ledger
        .entries
        .len()
}

fn no_panic(o: &Output) {
    let err = stderr(o);
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "hank panicked: {err}"
    );
}

/// Asserts that hank did not panic and exited with `code` (its stderr shown when not); returns
/// its stderr.
fn exits(o: &Output, code: i32) -> String {
    no_panic(o);
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{err}");
    err
}

fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

// ---------------------------------------------------------------------------------------------
// kill -9

/// 15 runs killed with SIGKILL at delays spread over 0–1.4 s, against an agent that sleeps
/// 0.05–0.2 s per call: no agent outlives hank by more than 1 s, the files always parse, the
/// ledger never under-counts the calls, the hourly cap holds across restarts, the lock of a
/// dead PID is taken over.
#[test]
#[ignore = "slow: cargo test -- --ignored (.ci/run runs them), or cargo nextest run --run-ignored all"]
fn kill_9_at_spread_points_keeps_state_ledger_cap_and_lock() {
    const CAP: u32 = 12;
    let items: Vec<String> = (0..40).map(|i| format!("task {i}")).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let p = Project::new(&refs);
    p.fake(
        "effect.sh",
        &format!("{RECORD_PID}date +%s%N >> work.txt\n"),
    );
    let mut orphans_right_after = 0usize;
    let mut orphans_after_1s = 0usize;
    let mut tmp_files = 0usize;
    let cap = CAP.to_string();
    for i in 0..15u64 {
        let sleep = 0.05 + 0.15 * f64::from(u32::try_from((i * 7) % 15).unwrap()) / 14.0;
        p.fake("sleep", &format!("{sleep:.3}"));
        let known = agent_pids(&p).len();
        let mut child = p.spawn(&["--calls", &cap]);
        std::thread::sleep(Duration::from_millis(i * 100));
        child.kill().expect("kill -9");
        child.wait().expect("reap");
        let fresh: Vec<i32> = agent_pids(&p).into_iter().skip(known).collect();
        orphans_right_after += fresh.iter().filter(|pid| alive(**pid)).count();
        orphans_after_1s += agents_alive_after(&p, known, Duration::from_secs(1));

        let (state, status) = parsed_files(&p);
        let calls = p.calls();
        if let Some(state) = &state {
            assert!(
                ledger_len(&p, state) >= calls as usize,
                "iteration {i}: ledger {} < calls {calls}",
                ledger_len(&p, state)
            );
        } else {
            assert_eq!(calls, 0, "iteration {i}: calls made but no state.json");
        }
        if let Some(status) = &status {
            assert!(status["state"].is_string());
        }
        assert!(calls <= CAP, "iteration {i}: {calls} calls > cap {CAP}");
        tmp_files = std::fs::read_dir(p.dir.join(".hank"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
                    .count()
            })
            .unwrap_or(0);
    }
    // The lock of the dead PID is taken over: a new run starts and reports itself.
    let child = p.spawn(&["--calls", &cap]);
    let pid = child.id();
    let s = p.wait_status(Duration::from_secs(30), |s| {
        s["pid"] == pid && (s["state"] == "waiting" || s["state"] == "running")
    });
    signal(&child, Signal::SIGINT);
    let o = wait_with_timeout(child, Duration::from_secs(15));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let calls = p.calls();
    assert!(calls <= CAP, "{calls} calls > cap {CAP} after the restarts");
    let (state, _) = parsed_files(&p);
    assert!(ledger_len(&p, &state.unwrap()) >= calls as usize);
    eprintln!(
        "kill -9 x15: {calls} agent calls (cap {CAP}); final run state {}; agents alive right after \
         kill -9: {orphans_right_after}, still alive 1 s later: {orphans_after_1s}; leftover .tmp-* files: {tmp_files}",
        s["state"]
    );
    assert_eq!(
        orphans_after_1s, 0,
        "an orphaned fake agent outlived hank by more than 1 s"
    );
}

/// A kill -9 in the middle of an atomic write leaves `.hank/.tmp-*` behind: the next run removes
/// the old ones once it holds the project (a young one may be another hank command's live write).
#[test]
fn temp_files_left_by_a_killed_hank_are_removed_at_the_next_start() {
    let p = Project::new(&["task"]);
    let hank = p.dir.join(".hank");
    let old = hank.join(".tmp-killed");
    let young = hank.join(".tmp-live");
    std::fs::write(&old, "half a state file").expect("write");
    std::fs::write(&young, "a live write").expect("write");
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&old)
        .and_then(|f| f.set_modified(long_ago))
        .expect("age the temp file");
    let o = p.run(&["--max-loops", "1"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(!old.exists(), "the killed hank's temp file is still there");
    assert!(
        young.exists(),
        "a temp file younger than 10 minutes was removed"
    );
}

/// kill -9 of hank while a hung agent runs: the agent's group is separate, so it survives
/// hank (nothing in-process can stop that), but the next run is not blocked by it.
#[test]
fn an_orphaned_agent_after_kill_9_does_not_block_the_next_run() {
    let p = Project::new(&["a", "b"]);
    p.fake("effect-1.sh", RECORD_PID)
        .fake("sleep-1", "300")
        .fake("grandchild-1", "");
    let mut child = p.spawn(&[]);
    let agent = wait_agent_pid(&p, 1);
    let gc = p.fake.join("grandchild.pid");
    let t = Instant::now();
    while !gc.exists() {
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().expect("kill -9");
    child.wait().expect("reap");
    std::thread::sleep(Duration::from_millis(300));
    let orphans = group_members(agent);
    p.fake("effect.sh", TICK_ONE);
    let start = Instant::now();
    let o = p.run(&["--max-loops", "1"]);
    let took = start.elapsed();
    // Clean up what this test started before asserting.
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(agent), Signal::SIGKILL);
    eprintln!(
        "kill -9 with a hung agent: {} process(es) of the agent's group survived hank; \
         the next run finished in {took:?}",
        orphans.len()
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.calls(), 2);
    let (state, _) = parsed_files(&p);
    assert_eq!(ledger_len(&p, &state.unwrap()), 2);
}

// ---------------------------------------------------------------------------------------------
// Signals

#[derive(Clone, Copy, Debug)]
enum Phase {
    Call,
    Wait,
    Analysis,
}

/// Sends `sig` during `phase`; hank must exit 130 with state saved and the agent's group empty.
fn signal_case(sig: Signal, phase: Phase) {
    let p = Project::new(&["a", "b", "c"]);
    let mut args: Vec<&str> = Vec::new();
    match phase {
        Phase::Call => {
            p.fake("effect.sh", RECORD_PID)
                .fake("sleep", "300")
                .fake("grandchild", "");
        }
        Phase::Wait => {
            p.fake(
                "effect.sh",
                &format!("{RECORD_PID}date +%s%N >> work.txt\n"),
            );
            args.extend(["--calls", "1"]);
        }
        Phase::Analysis => {
            // ~80 MB of stream-json: the analysis takes a while after the agent exits.
            let big = p.dir.parent().unwrap().join("big.jsonl");
            let line = br#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"working on it, still working, nothing to see here"}]},"session_id":"s"}"#;
            let mut l = line.to_vec();
            l.push(b'\n');
            let tail = format!(
                "{}\n",
                result_json("IN_PROGRESS", "IMPLEMENTATION", false, "ok")
            );
            big_file(&big, &l, 80 * 1024 * 1024 / l.len(), tail.as_bytes());
            respond_with_file(&p, &big);
            p.fake(
                "effect.sh",
                &format!("{RECORD_PID}date +%s%N >> work.txt\n"),
            );
        }
    }
    let child = p.spawn(&args);
    let agent = wait_agent_pid(&p, 1);
    match phase {
        Phase::Call => {
            let gc = p.fake.join("grandchild.pid");
            let t = Instant::now();
            while !gc.exists() {
                assert!(t.elapsed() < Duration::from_secs(10));
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Phase::Wait => {
            let s = p.wait_status(Duration::from_secs(20), |s| s["state"] == "waiting");
            assert_eq!(s["wait_reason"], "rate_limit");
        }
        Phase::Analysis => {
            // The agent is gone once hank drained its output: hank is analyzing now.
            let t = Instant::now();
            while alive(agent) {
                assert!(t.elapsed() < Duration::from_secs(60));
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    let sent = Instant::now();
    signal(&child, sig);
    let o = wait_with_timeout(child, Duration::from_secs(30));
    let took = sent.elapsed();
    no_panic(&o);
    assert_eq!(
        o.status.code(),
        Some(130),
        "{sig:?} {phase:?}: {}",
        stderr(&o)
    );
    let (state, status) = parsed_files(&p);
    let (state, status) = (state.unwrap(), status.unwrap());
    assert_eq!(status["state"], "stopped", "{sig:?} {phase:?}");
    assert_eq!(status["exit_reason"], "interrupted", "{sig:?} {phase:?}");
    assert_eq!(status["exit_code"], 130, "{sig:?} {phase:?}");
    assert_eq!(
        ledger_len(&p, &state),
        1,
        "{sig:?} {phase:?}: the one call is on the ledger"
    );
    if let Phase::Analysis = phase {
        assert_eq!(
            state["history"].as_array().map_or(0, Vec::len),
            1,
            "{sig:?}: the analyzed loop was folded and saved before stopping"
        );
    }
    let left = group_after(agent, Duration::from_secs(2));
    assert!(
        left.is_empty(),
        "{sig:?} {phase:?}: survivors in the agent's group: {left:?}"
    );
    if let Ok(gc) = std::fs::read_to_string(p.fake.join("grandchild.pid")) {
        let gc: i32 = gc.trim().parse().unwrap();
        assert!(!alive(gc), "{sig:?} {phase:?}: grandchild {gc} survived");
    }
    eprintln!("{sig:?} during {phase:?}: exit 130 after {took:?}");
}

/// `sig` in each phase in turn (a fresh project each time).
fn in_every_phase(sig: Signal) {
    for phase in [Phase::Call, Phase::Wait, Phase::Analysis] {
        signal_case(sig, phase);
    }
}

#[test]
fn sigint_in_every_phase() {
    in_every_phase(Signal::SIGINT);
}

#[test]
fn sigterm_in_every_phase() {
    in_every_phase(Signal::SIGTERM);
}

// ---------------------------------------------------------------------------------------------
// Agent misbehaviour

/// An agent (and its grandchild) that ignores SIGTERM is SIGKILLed after the grace period.
#[test]
fn agent_ignoring_sigterm_is_killed_after_the_grace() {
    let (p, o, took) = run_with_agent(
        "stubborn.sh",
        "cat > /dev/null\ntrap '' TERM\necho $$ > \"$FAKE_CLAUDE_DIR/agent.pid\"\n\
         sleep 300 &\necho $! > \"$FAKE_CLAUDE_DIR/grandchild.pid\"\nwait\nwait\n",
        &["-t", "2s"],
    );
    exits(&o, 3);
    assert!(took < Duration::from_secs(25), "took {took:?}");
    assert_eq!(p.status()["last_loop"]["outcome"], "timeout");
    for f in ["agent.pid", "grandchild.pid"] {
        let pid: i32 = std::fs::read_to_string(p.fake.join(f))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(group_after(pid, Duration::from_secs(2)).is_empty());
        assert!(!alive(pid), "{f} {pid} survived SIGKILL");
    }
    eprintln!("TERM-ignoring agent: hank exited after {took:?} (timeout 2 s + grace 5 s)");
}

/// 500 MB of stream-json: hank's peak RSS stays bounded and the final result is still found.
#[test]
#[ignore = "slow: cargo test -- --ignored (.ci/run runs them), or cargo nextest run --run-ignored all"]
fn a_500_mb_flood_keeps_memory_bounded() {
    let p = Project::new(&["a"]);
    let big = p.dir.parent().unwrap().join("flood.jsonl");
    let mut line =
        br#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":""#
            .to_vec();
    line.extend(std::iter::repeat_n(b'x', 900));
    line.extend_from_slice(b"\"}]},\"session_id\":\"s\"}\n");
    let tail = format!(
        "{}\n",
        result_json("IN_PROGRESS", "IMPLEMENTATION", false, "flooded")
    );
    let lines = 500 * 1024 * 1024 / line.len();
    big_file(&big, &line, lines, tail.as_bytes());
    respond_with_file(&p, &big);
    let start = Instant::now();
    let child = p.spawn(&["--max-loops", "1"]);
    let (o, peak_kib) = wait_measuring(child, Duration::from_secs(300));
    let took = start.elapsed();
    exits(&o, 3);
    let logged = std::fs::metadata(p.dir.join(".hank/logs/loop-00001.out"))
        .unwrap()
        .len();
    assert_eq!(logged, std::fs::metadata(&big).unwrap().len());
    assert_eq!(p.status()["last_loop"]["outcome"], "success");
    eprintln!(
        "500 MB flood: hank peak RSS (VmHWM) {} KiB, {took:?}",
        peak_kib
    );
    assert!(peak_kib > 0, "VmHWM was never sampled");
    assert!(peak_kib < 64 * 1024, "peak RSS {peak_kib} KiB ≥ 64 MiB");
}

/// Garbage outputs: invalid UTF-8, NUL bytes, a 50 MB line with and without JSON.
#[test]
#[ignore = "slow: cargo test -- --ignored (.ci/run runs them), or cargo nextest run --run-ignored all"]
fn garbage_outputs_are_analyzed_without_crashing() {
    let ok = result_json("IN_PROGRESS", "IMPLEMENTATION", false, "fine");
    let nul_escape = result_json("IN_PROGRESS", "IMPLEMENTATION", false, "a\u{0}b");
    let mut raw_invalid = ok.clone().into_bytes();
    let at = raw_invalid.windows(4).position(|w| w == b"fine").unwrap();
    raw_invalid.splice(at..at, [0xff, 0xfe, 0x80]);
    let mut huge_json =
        br#"{"type":"result","subtype":"success","is_error":false,"result":""#.to_vec();
    huge_json.extend(std::iter::repeat_n(b'y', 50 * 1024 * 1024));
    huge_json.extend_from_slice(br#"","session_id":"x","total_cost_usd":0.01}"#);
    // (name, stdout, expected outcome, peak RSS limit in MiB). A JSON line is parsed whole up
    // to the analyzer's 64 MiB line cap, so the 50 MB JSON line costs ~5× its size: bounded,
    // but not small (see the report).
    let cases: Vec<(&str, Vec<u8>, Option<&str>, u64)> = vec![
        (
            "invalid utf-8 text",
            b"\xff\xfe\xfd not text \x80\x81\n".to_vec(),
            None,
            64,
        ),
        ("nul bytes", b"\0\0\0\0abc\0\n\0".to_vec(), None, 64),
        (
            "json with \\u0000",
            nul_escape.into_bytes(),
            Some("success"),
            64,
        ),
        ("json with raw invalid utf-8", raw_invalid, None, 64),
        ("50 MB text line", vec![b'z'; 50 * 1024 * 1024], None, 64),
        ("50 MB json line", huge_json, None, 400),
    ];
    for (name, bytes, want, limit_mib) in cases {
        let p = Project::new(&["a"]);
        let file = p.dir.parent().unwrap().join("out.bin");
        std::fs::write(&file, &bytes).unwrap();
        respond_with_file(&p, &file);
        let child = p.spawn(&["--max-loops", "1"]);
        let (o, peak) = wait_measuring(child, Duration::from_secs(120));
        no_panic(&o);
        assert!(
            matches!(o.status.code(), Some(2 | 3)),
            "{name}: exit {:?}: {}",
            o.status.code(),
            stderr(&o)
        );
        let s = p.status();
        let _ = p.events();
        let outcome = s["last_loop"]["outcome"]
            .as_str()
            .unwrap_or("?")
            .to_string();
        if let Some(want) = want {
            assert_eq!(outcome, want, "{name}");
        }
        eprintln!(
            "{name}: exit {:?}, outcome {outcome}, error {}, peak RSS {peak} KiB",
            o.status.code(),
            s["last_loop"]["error_kind"]
        );
        assert!(peak < limit_mib * 1024, "{name}: peak RSS {peak} KiB");
    }
}

/// The agent exits without reading a 1 MB prompt: a broken pipe is not hank's failure.
#[test]
fn agent_exiting_before_reading_stdin() {
    let p = Project::new(&["a"]);
    std::fs::write(p.dir.join(".hank/PROMPT.md"), "x".repeat(1 << 20)).unwrap();
    p.fake("nostdin", "");
    let o = p.run(&["--max-loops", "1"]);
    exits(&o, 3);
    assert_eq!(p.status()["last_loop"]["outcome"], "success");
}

/// The agent closes stdout at once and lingers: hank waits for the exit, not for EOF only.
#[test]
fn agent_closing_stdout_early() {
    let (p, o, took) = run_with_agent(
        "closer.sh",
        "exec 1>&-\ncat > /dev/null\nsleep 1\necho 'went away' >&2\nexit 0\n",
        &[],
    );
    exits(&o, 3);
    assert!(took >= Duration::from_secs(1));
    let s = p.status();
    assert_ne!(s["last_loop"]["outcome"], "success");
    eprintln!(
        "stdout closed early: outcome {}, error {}",
        s["last_loop"]["outcome"], s["last_loop"]["error_kind"]
    );
}

/// The agent deletes hank's files: fix_plan.md → integrity_failure (2); all of `.hank/` → a
/// clear stop, never a panic.
#[test]
fn agent_deleting_hank_files() {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", "rm -f .hank/fix_plan.md\n");
    let o = p.run(&[]);
    exits(&o, 2);
    assert_eq!(p.status()["exit_reason"], "integrity_failure");
    assert_eq!(p.calls(), 1);

    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", "rm -rf .hank\n");
    let o = p.run(&[]);
    no_panic(&o);
    eprintln!(
        "agent ran `rm -rf .hank`: exit {:?}: {}",
        o.status.code(),
        stderr(&o).lines().next_back().unwrap_or("")
    );
    assert!(matches!(o.status.code(), Some(1 | 2)), "{}", stderr(&o));
    assert_eq!(p.calls(), 1, "no second call after .hank/ vanished");
}

// ---------------------------------------------------------------------------------------------
// Disk and files

/// A tmpfs mounted over a directory for the duration of a test (root only).
struct Mount(PathBuf);

impl Mount {
    /// Mounts a tmpfs of `size` over `dir`, keeping `dir`'s files; `None` when mounting is
    /// impossible (not root, no privilege).
    fn tmpfs_over(dir: &Path, size: &str) -> Option<Self> {
        if !is_root() {
            return None;
        }
        let saved = dir.with_extension("saved");
        std::fs::rename(dir, &saved).ok()?;
        std::fs::create_dir(dir).ok()?;
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            std::fs::remove_dir(dir).ok()?;
            std::fs::rename(&saved, dir).ok()?;
            return None;
        }
        let m = Self(dir.to_path_buf());
        let copied = Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", saved.display()))
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(copied, "copy into the tmpfs");
        Some(m)
    }

    fn remount_ro(&self) {
        let ok = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "remount ro");
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Read-only `.hank/`: exit 1 with an error naming the file, no panic. As root chmod cannot
/// deny anything, so the directory becomes a read-only tmpfs instead.
#[test]
fn read_only_hank_dir_is_a_clear_error() {
    let p = Project::new(&["a", "b", "c"]);
    assert_eq!(p.run(&["--max-loops", "1"]).status.code(), Some(3));
    let before = std::fs::read(p.dir.join(".hank/state.json")).unwrap();
    let hank = p.dir.join(".hank");
    let _mount = if is_root() {
        let Some(m) = Mount::tmpfs_over(&hank, "4m") else {
            eprintln!("SKIP read_only_hank_dir: running as root and cannot mount a tmpfs");
            return;
        };
        m.remount_ro();
        Some(m)
    } else {
        for e in walk(&hank) {
            let mode = if e.is_dir() { 0o555 } else { 0o444 };
            std::fs::set_permissions(&e, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        None
    };
    let err = exits(&p.run(&["--max-loops", "1"]), 1);
    eprintln!("read-only .hank/: exit 1: {}", err.trim());
    assert!(err.contains(".hank/"), "the error names the file: {err}");
    assert_eq!(
        p.calls(),
        1,
        "the agent is not called when nothing can be recorded"
    );
    assert_eq!(
        std::fs::read(p.dir.join(".hank/state.json")).unwrap(),
        before
    );
    if !is_root() {
        for e in walk(&hank) {
            let _ = std::fs::set_permissions(&e, std::fs::Permissions::from_mode(0o755));
        }
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.filter_map(|e| e.ok()) {
            let path = e.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// A full disk under `.hank/` (tiny tmpfs): before the run, and filled by the agent during
/// a call. Hank stops with exit 1 naming the file; the last good state.json survives intact.
#[test]
fn full_disk_is_a_clear_error_and_keeps_the_last_state() {
    for during_call in [false, true] {
        let p = Project::new(&["a", "b", "c"]);
        assert_eq!(p.run(&["--max-loops", "1"]).status.code(), Some(3));
        let hank = p.dir.join(".hank");
        let Some(_mount) = Mount::tmpfs_over(&hank, "512k") else {
            eprintln!("SKIP full_disk: needs root and tmpfs mounts");
            return;
        };
        let fill = "head -c 4M /dev/zero > .hank/filler 2>/dev/null; true\n";
        if during_call {
            p.fake("effect.sh", fill);
        } else {
            let _ = Command::new("bash")
                .arg("-c")
                .arg(fill)
                .current_dir(&p.dir)
                .status();
        }
        let before = std::fs::read(hank.join("state.json")).unwrap();
        let err = exits(&p.run(&["--max-loops", "1"]), 1);
        eprintln!(
            "full disk (during call: {during_call}): exit 1, calls {}: {}",
            p.calls(),
            err.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("")
        );
        assert!(
            err.contains("No space left") || err.contains(".hank/"),
            "{err}"
        );
        let (state, _) = parsed_files(&p);
        let state = state.expect("state.json survives");
        assert!(
            ledger_len(&p, &state) >= p.calls() as usize,
            "ledger under-counts"
        );
        if !during_call {
            assert_eq!(p.calls(), 1, "no call when the ledger cannot be saved");
            assert_eq!(std::fs::read(hank.join("state.json")).unwrap(), before);
        }
    }
}

#[test]
fn logs_being_a_file_is_a_clear_error() {
    let p = Project::new(&["a"]);
    std::fs::write(p.dir.join(".hank/logs"), "not a dir").unwrap();
    let o = p.run(&[]);
    exits(&o, 1);
    assert!(stderr(&o).contains(".hank/logs"), "{}", stderr(&o));
    assert_eq!(p.calls(), 0);
}

#[test]
fn status_json_deleted_during_a_call_is_recreated() {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", TICK_ONE);
    p.fake(
        "effect-1.sh",
        &format!("{TICK_ONE}rm -f .hank/status.json .hank/events.jsonl\n"),
    );
    let o = p.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = p.status();
    assert_eq!(s["state"], "completed");
    assert_eq!(s["loop_count"], 2);
    assert!(p.events().iter().any(|e| e["type"] == "exit"));
}

/// During a long wait (rate limit, usage limit: up to hours) a deleted status.json stays
/// missing until the wait ends, so `hank monitor` / CI see nothing.
#[test]
fn status_json_deleted_during_a_wait_is_recreated() {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", "date +%s%N >> work.txt\n");
    let child = p.spawn(&["--calls", "1"]);
    p.wait_status(Duration::from_secs(20), |s| s["state"] == "waiting");
    std::fs::remove_file(p.dir.join(".hank/status.json")).unwrap();
    let s = p.wait_status(Duration::from_secs(5), |s| s["state"] == "waiting");
    signal(&child, Signal::SIGINT);
    let _ = wait_with_timeout(child, Duration::from_secs(10));
    assert_eq!(s["wait_reason"], "rate_limit");
}

#[test]
fn bad_hankrc_values_and_keys_name_file_and_line() {
    let cases = [
        ("MAX_CALLS_PER_HOUR=abc", "MAX_CALLS_PER_HOUR"),
        ("MAX_CALL_PER_HOUR=5", "unknown key"),
        ("CLAUDE_TIMEOUT_MINUTES=-5", "CLAUDE_TIMEOUT_MINUTES"),
        ("just some words", "expected"),
        ("MAX_LOOPS=\"3", "closing"),
        ("ON_USAGE_LIMIT=sometimes", "ON_USAGE_LIMIT"),
        ("CLAUDE_OUTPUT_FORMAT=xml", "CLAUDE_OUTPUT_FORMAT"),
        ("lower_case=1", "key"),
    ];
    for (line, needle) in cases {
        let p = Project::new(&["a"]);
        p.hankrc(&format!("# comment\n{line}\nRETRY_BACKOFF_SECONDS=0\n"));
        let o = p.run(&[]);
        no_panic(&o);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{line}: {err}");
        assert!(err.contains(".hankrc"), "{line}: {err}");
        assert!(err.contains("line 2"), "{line}: {err}");
        assert!(err.contains(needle), "{line}: wanted {needle:?} in {err}");
        assert_eq!(p.calls(), 0, "{line}");
    }
}

// ---------------------------------------------------------------------------------------------
// Security

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

/// The files hank keeps its state in are private (0600).
#[test]
fn state_files_are_0600() {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", TICK_ONE);
    assert_eq!(p.run(&[]).status.code(), Some(0));
    for f in [
        "state.json",
        "state.json.calls",
        "status.json",
        "events.jsonl",
        "hank.lock",
        "logs/hank.log",
    ] {
        assert_eq!(mode(&p.dir.join(".hank").join(f)), 0o600, "{f}");
    }
}

/// Loop logs hold everything the agent printed (its environment, file contents): they must be
/// 0600 like every other file hank writes (HANK.md §2).
#[test]
fn loop_logs_are_0600() {
    let p = Project::new(&["a"]);
    p.fake("stderr", "some stderr\n");
    assert_eq!(
        p.run(&["--max-loops", "1", "--live"]).status.code(),
        Some(3)
    );
    for f in ["logs/loop-00001.out", "logs/loop-00001.err", "live.log"] {
        assert_eq!(mode(&p.dir.join(".hank").join(f)), 0o600, "{f}");
    }
}

const KEY: &str = "sk-ant-api03-HANKTESTSECRET-0123456789";
const TOKEN: &str = "sk-ant-oat01-HANKTESTTOKEN-9876543210";

/// Runs two loops with the secrets in hank's environment and `effect` as the agent's side
/// effect; returns every place outside the agent's own logs where a secret appeared.
fn secret_leaks(effect: &str, failing: bool) -> Vec<String> {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", effect);
    if failing {
        p.fake("response", "").fake("exit", "1");
    }
    let o = p
        .cmd()
        .env("ANTHROPIC_API_KEY", KEY)
        .env("CLAUDE_CODE_OAUTH_TOKEN", TOKEN)
        .args(["--max-loops", "2", "--json"])
        .output()
        .unwrap();
    no_panic(&o);
    let err = std::fs::read_to_string(p.dir.join(".hank/logs/loop-00001.err")).unwrap();
    assert!(err.contains(KEY), "the fake agent saw the key (sanity)");
    let mut leaks = Vec::new();
    for path in walk(&p.dir.join(".hank")) {
        if path.is_dir() {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("loop-") {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).to_string();
        if text.contains(KEY) || text.contains(TOKEN) {
            leaks.push(name);
        }
    }
    for (name, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        if text.contains(KEY) || text.contains(TOKEN) {
            leaks.push(format!("hank's {name}"));
        }
    }
    leaks
}

/// The API key and OAuth token in hank's environment never reach status.json, state.json,
/// events, hank.log or hank's own output when the agent dumps its environment on stderr, on
/// success and on failure. The rule: only `logs/loop-*.err` (the agent's stderr, verbatim)
/// and `logs/loop-*.out` (its stdout) may contain what the agent printed.
#[test]
fn secrets_never_leave_the_agent_logs() {
    for failing in [false, true] {
        let leaks = secret_leaks("env >&2\n", failing);
        assert!(
            leaks.is_empty(),
            "failing={failing}: secret copied into {leaks:?}"
        );
    }
}

/// An agent error line that contains the key is copied (as `error_message`) into events.jsonl,
/// hank's `--json` stdout and its stderr summary: hank should redact the values of
/// ANTHROPIC_API_KEY / CLAUDE_CODE_OAUTH_TOKEN / ANTHROPIC_AUTH_TOKEN from agent text.
#[test]
fn a_secret_in_an_agent_error_line_is_redacted() {
    let leaks = secret_leaks("echo \"Error: bad key $ANTHROPIC_API_KEY\" >&2\n", true);
    assert!(leaks.is_empty(), "secret copied into {leaks:?}");
}

/// A fix_plan item full of shell metacharacters reaches the agent's context byte for byte and
/// is never interpreted.
#[test]
fn metacharacters_in_fix_plan_reach_the_agent_verbatim() {
    let p = Project::new(&["placeholder"]);
    let marker = p.dir.parent().unwrap().join("pwned");
    let item = format!(
        "$(touch {m}) `touch {m}` ; touch {m} | & > < * ? ~ ! \\ 'q' \"d\" %s {{}} $HOME",
        m = marker.display()
    );
    std::fs::write(
        p.dir.join(".hank/fix_plan.md"),
        format!("# Fix plan\n\n## Tasks\n- [ ] {item}\n- [ ] second\n"),
    )
    .unwrap();
    let prompt = "Prompt $(touch /nonexistent/x) `id` ; \\ \0 \u{1b}[31m end\n";
    std::fs::write(p.dir.join(".hank/PROMPT.md"), prompt).unwrap();
    let o = p.run(&["--max-loops", "1"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let (ctx, sent) = p.context_and_prompt(1);
    assert_eq!(sent, prompt.as_bytes());
    assert!(ctx.contains(&item), "context: {ctx}");
    assert!(!marker.exists(), "a metacharacter was interpreted");
}

/// One loop with `.hank/NAME` a symlink to a file outside the project that holds `ORIGINAL`;
/// hank's output and what the file holds afterwards.
fn run_with_link_at(name: &str) -> (Output, String) {
    let p = Project::new(&["a"]);
    std::fs::create_dir_all(p.dir.join(".hank/logs")).unwrap();
    p.fake("stderr", "agent stderr\n");
    let outside = p.dir.parent().unwrap().join("outside.txt");
    std::fs::write(&outside, "ORIGINAL").unwrap();
    std::os::unix::fs::symlink(&outside, p.dir.join(".hank").join(name)).unwrap();
    let o = p.run(&["--max-loops", "1"]);
    no_panic(&o);
    (o, std::fs::read_to_string(&outside).unwrap())
}

/// Symlinked `.hank/` files pointing outside the project are never written through.
#[test]
fn symlinked_hank_files_are_not_followed() {
    for name in [
        "status.json",
        "state.json",
        "events.jsonl",
        "logs/hank.log",
        "hank.lock",
    ] {
        let (o, after) = run_with_link_at(name);
        eprintln!(
            "symlinked {name}: exit {:?}, target {}",
            o.status.code(),
            if after == "ORIGINAL" {
                "untouched"
            } else {
                "WRITTEN"
            }
        );
        assert_eq!(after, "ORIGINAL", "{name}: wrote through the symlink");
    }
}

/// The loop logs are opened with `File::create`, which follows a planted symlink and truncates
/// its target (any file the user can write, outside the project).
#[test]
fn symlinked_loop_logs_are_not_followed() {
    for name in ["logs/loop-00001.out", "logs/loop-00001.err"] {
        let (o, after) = run_with_link_at(name);
        assert_eq!(
            after,
            "ORIGINAL",
            "{name}: wrote through the symlink: {}",
            stderr(&o)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Fuzzing: `PROPTEST_CASES=100000 cargo test --release --test integration fuzz_ -- --ignored`

mod fuzz {
    use proptest::prelude::*;
    use proptest::test_runner::Config;

    use hank::analysis::{RunFacts, analyze_bytes, parse_status_block};

    /// Pieces of real outputs, so random concatenations reach the deep parser paths.
    const FRAGMENTS: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\n",
        " ",
        "\\",
        "\\u0000",
        "\\ud800",
        "null",
        "true",
        "-1e999",
        "\"type\":\"result\"",
        "\"subtype\":\"success\"",
        "\"is_error\":true",
        "\"is_error\":false",
        "\"result\":\"",
        "\"session_id\":\"abc\"",
        "\"total_cost_usd\":1e308",
        "\"usage\":{\"input_tokens\":18446744073709551615}",
        "\"api_error_status\":429",
        "\"errors\":[\"Reached maximum number of turns (3)\"]",
        "\"permission_denials\":[{\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"rm -rf /\"}}]",
        "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s\"}",
        "{\"type\":\"rate_limit_event\",\"rate_limit_info\":{\"status\":\"rejected\",\"resetsAt\":99999999999}}",
        "---HANK_STATUS---",
        "---END_HANK_STATUS---",
        "STATUS: COMPLETE",
        "EXIT_SIGNAL: true",
        "WORK_TYPE: TESTING",
        "TASKS_COMPLETED_THIS_LOOP: 99999999999999999999",
        "RECOMMENDATION: ",
        "```",
        "HANK_STATUS:",
        "  STATUS: BLOCKED",
        "Claude AI usage limit reached|",
        "1748268000",
        "-9223372036854775808",
        "You've hit your limit · resets ",
        "5:09am",
        "Apr 31 at 25pm",
        "(Mars/Olympus)",
        "(Europe/Oslo)",
        "Invalid API key",
        "529",
        "Overloaded",
        "No conversation found with session ID: ",
        "é",
        "\u{0}",
        "\u{feff}",
        "\r\n",
        "\t",
    ];

    fn fragments() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(FRAGMENTS), 0..48).prop_map(|v| v.concat())
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            fragments(),
            any::<String>(),
            "[-#*\\[\\] xX\n a-z:=\"'_]{0,200}"
        ]
    }

    fn facts() -> impl Strategy<Value = RunFacts> {
        (
            prop::option::of(any::<i32>()),
            prop::option::of(1i32..64),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(exit_code, signal, timed_out, interrupted)| RunFacts {
                exit_code,
                signal,
                timed_out,
                interrupted,
                stdout_cut: false,
                startup_hang: false,
            })
    }

    fn config() -> Config {
        // Config::default() reads PROPTEST_CASES (256 when unset); no regression files.
        Config {
            failure_persistence: None,
            ..Config::default()
        }
    }

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_795_000_000).unwrap()
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        #[ignore = "fuzzing run: PROPTEST_CASES=100000 cargo test --release --test integration fuzz_ -- --ignored"]
        fn fuzz_analyzer(
            out in prop_oneof![text().prop_map(String::into_bytes), prop::collection::vec(any::<u8>(), 0..2048)],
            err in prop_oneof![text().prop_map(String::into_bytes), prop::collection::vec(any::<u8>(), 0..512)],
            f in facts(),
        ) {
            let a = analyze_bytes(&out, &err, &f, now());
            prop_assert_eq!(a.stdout_bytes, out.len() as u64);
            prop_assert!(a.cost_usd.is_finite() && a.cost_usd >= 0.0, "cost {}", a.cost_usd);
            let json = serde_json::to_string(&a);
            prop_assert!(json.is_ok(), "Analysis serializes");
        }

        #[test]
        #[ignore = "fuzzing run: PROPTEST_CASES=100000 cargo test --release --test integration fuzz_ -- --ignored"]
        fn fuzz_hankrc(body in prop_oneof![
            text(),
            prop::collection::vec(
                ("[A-Z_]{1,24}", "=", "[\"' a-z0-9#.$()\\\\-]{0,24}").prop_map(|(k, e, v)| format!("{k}{e}{v}")),
                0..12,
            ).prop_map(|v| v.join("\n")),
        ]) {
            let file = std::path::Path::new("/p/.hankrc");
            match hank::settings::parse_hankrc(&body, file) {
                Ok(map) => {
                    for k in map.keys() {
                        prop_assert!(body.contains(k.as_str()), "key {} not in the text", k);
                    }
                }
                Err(e) => prop_assert!(e.to_string().contains(".hankrc"), "error names the file: {}", e),
            }
        }

        #[test]
        #[ignore = "fuzzing run: PROPTEST_CASES=100000 cargo test --release --test integration fuzz_ -- --ignored"]
        fn fuzz_fix_plan(body in text(), optional in prop::collection::vec("[A-Za-z ]{0,12}", 0..3)) {
            let plan = hank::policy::fixplan::parse(&body, &optional);
            prop_assert!(plan.done() <= plan.total());
            prop_assert!(plan.open_required() <= plan.total() - plan.done());
            if plan.is_complete() {
                prop_assert!(plan.total() > 0 && plan.open_required() == 0);
            }
            prop_assert_eq!(hank::policy::fixplan::newly_checked(&body, &body), 0);
        }

        #[test]
        #[ignore = "fuzzing run: PROPTEST_CASES=100000 cargo test --release --test integration fuzz_ -- --ignored"]
        fn fuzz_status_block(body in text(), prefix in text()) {
            let _ = parse_status_block(&body);
            // A well-formed block after any text is found, and wins.
            let block = format!(
                "{prefix}\n---HANK_STATUS---\nSTATUS: COMPLETE\nEXIT_SIGNAL: true\nRECOMMENDATION: stop\n---END_HANK_STATUS---\n"
            );
            let parsed = parse_status_block(&block);
            prop_assert!(parsed.is_some(), "block not found after {:?}", prefix);
        }
    }

    /// The fuzz targets also run (with few cases) in the normal suite, so they cannot rot.
    #[test]
    fn fuzz_smoke_runs_in_the_normal_suite() {
        let f = RunFacts {
            exit_code: Some(1),
            signal: None,
            timed_out: false,
            interrupted: false,
            stdout_cut: false,
            startup_hang: false,
        };
        for frag in FRAGMENTS {
            let _ = analyze_bytes(frag.as_bytes(), frag.as_bytes(), &f, now());
            let _ = parse_status_block(frag);
            let _ = hank::policy::fixplan::parse(frag, &[]);
            let _ = hank::settings::parse_hankrc(frag, std::path::Path::new(".hankrc"));
        }
        let all = FRAGMENTS.concat();
        let a = analyze_bytes(all.as_bytes(), b"", &f, now());
        assert_eq!(a.stdout_bytes, all.len() as u64);
    }
}
