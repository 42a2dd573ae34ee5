//! An agent that works against hank's process handling (issue 13): it rewrites its own loop
//! log, deletes `.hank/` or runs `git clean -fdX`, keeps running after its answer, leaves
//! `setsid` daemons that ignore SIGTERM, floods stdout, and hank is killed with SIGKILL at
//! random points. What hank records comes from what it observed itself.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::support::{Project, TICK_ONE, alive, result_json, signal, stderr, wait_with_timeout};

/// The canonical project directory, as hank writes it in `HANK_RUN_PROJECT`.
fn project_key(p: &Project) -> String {
    std::fs::canonicalize(&p.dir).unwrap().display().to_string()
}

/// Live processes (not zombies) whose environment says they belong to this project's runs.
fn marked(p: &Project) -> Vec<i32> {
    let needle = format!("\0HANK_RUN_PROJECT={}\0", project_key(p));
    let me = std::process::id();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if u32::try_from(pid).ok() == Some(me) || !alive(pid) {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let mut env0 = vec![0u8];
        env0.extend_from_slice(&env);
        env0.push(0);
        if env0.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// Waits up to `within` for no marked process of the project to be left; returns those left.
fn marked_after(p: &Project, within: Duration) -> Vec<i32> {
    let start = Instant::now();
    loop {
        let left = marked(p);
        if left.is_empty() || start.elapsed() >= within {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill_all(pids: &[i32]) {
    for pid in pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), Signal::SIGKILL);
    }
}

fn wait_file(path: &Path, within: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < within,
            "{} not created in {within:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A `setsid` daemon that ignores SIGTERM and closes the agent's pipes; its PID goes to
/// `$FAKE_CLAUDE_DIR/NAME.pid` (the script waits until it is written).
fn daemon(name: &str) -> String {
    format!(
        "setsid bash -c 'trap \"\" TERM; echo $$ > \"$FAKE_CLAUDE_DIR/{name}.pid.tmp\"; \
         mv \"$FAKE_CLAUDE_DIR/{name}.pid.tmp\" \"$FAKE_CLAUDE_DIR/{name}.pid\"; exec sleep 300' \
         > /dev/null 2>&1 < /dev/null &\n\
         while [ ! -e \"$FAKE_CLAUDE_DIR/{name}.pid\" ]; do sleep 0.02; done\n"
    )
}

fn read_pid(p: &Project, name: &str) -> i32 {
    std::fs::read_to_string(p.fake.join(format!("{name}.pid")))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn cost(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// Asserts that the state's totals are `usd` spent and `input` input tokens.
fn assert_spent(state: &Value, usd: f64, input: u64) {
    let totals = &state["totals"];
    assert!((cost(&totals["cost_usd"]) - usd).abs() < 1e-9, "{totals}");
    assert_eq!(totals["tokens"]["input"], input, "{totals}");
}

fn calls_in_log(p: &Project) -> usize {
    let text = std::fs::read_to_string(p.dir.join(".hank/state.json.calls")).unwrap_or_default();
    let mut ids: Vec<u64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["id"].as_u64())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len()
}

// ---------------------------------------------------------------------------------------------
// 1. The answer is what hank read from the pipe

/// The agent rewrites `.hank/logs/loop-N.out` after answering with a huge cost, other tokens
/// and another session: hank records the cost, tokens and session it read itself, and
/// `--max-cost` is enforced on those.
#[test]
fn a_rewritten_loop_log_does_not_change_what_hank_records() {
    let p = Project::new(&["a", "b", "c"]);
    let forged = serde_json::json!({
        "type": "result", "subtype": "success", "is_error": false, "result": "forged",
        "session_id": "ffffffff-ffff-ffff-ffff-ffffffffffff", "total_cost_usd": 1000.0,
        "usage": {"input_tokens": 9_000_000, "output_tokens": 9_000_000}
    })
    .to_string();
    // A helper that keeps the agent's stdout open, ignores SIGTERM and overwrites the log
    // once the answer was printed (hank used to re-read the log by path at that point).
    p.fake(
        "effect.sh",
        &format!(
            "{TICK_ONE}n=$(cat \"$FAKE_CLAUDE_DIR/calls\")\n\
             log=$(printf '.hank/logs/loop-%05d.out' \"$n\")\n\
             (trap '' TERM; sleep 0.5; printf '%s\\n' '{forged}' > \"$log\") &\n"
        ),
    );
    p.run_code(&["--max-loops", "2", "--max-cost", "5"], 3);
    assert_eq!(p.calls(), 2);
    let log = std::fs::read_to_string(p.dir.join(".hank/logs/loop-00001.out")).unwrap();
    assert!(
        log.contains("forged"),
        "the agent did rewrite its log: {log}"
    );
    let state = p.state();
    assert_spent(&state, 0.02, 200);
    assert_eq!(
        state["session"]["id"], "11111111-2222-3333-4444-555555555552",
        "{}",
        state["session"]
    );
}

// ---------------------------------------------------------------------------------------------
// 2. One loop per project, whatever the agent deletes

/// Starts `hank run --max-loops 1` whose first call deletes files with `wipe`, then waits for
/// the test's `go`. Returns the running hank once the wipe is done.
fn start_wiping_run(p: &Project, wipe: &str) -> Child {
    p.fake(
        "effect-1.sh",
        &format!(
            "{wipe}\ntouch \"$FAKE_CLAUDE_DIR/wiped\"\n\
             while [ ! -e \"$FAKE_CLAUDE_DIR/go\" ]; do sleep 0.02; done\n"
        ),
    );
    let child = p.spawn(&["--max-loops", "1"]);
    wait_file(&p.fake.join("wiped"), Duration::from_secs(30));
    child
}

/// The second `hank run` is refused while the first one runs, then the first finishes and
/// its state has the call, cost and tokens of the answer it read.
fn second_run_refused_and_first_counts(p: &Project, first: Child) {
    let o = p.run_code(&["--max-loops", "1"], 1);
    assert!(
        stderr(&o).contains("already running"),
        "the second run must say a loop is running: {}",
        stderr(&o)
    );
    assert_eq!(p.calls(), 1, "the second run called the agent");
    std::fs::write(p.fake.join("go"), "").unwrap();
    let o = wait_with_timeout(first, Duration::from_secs(60));
    let state = p.state();
    assert_eq!(
        state["totals"]["loops"],
        1,
        "{}: {}",
        stderr(&o),
        state["totals"]
    );
    assert_spent(&state, 0.01, 100);
    assert_eq!(calls_in_log(p), 1, "the call log was written again");
}

#[test]
fn rm_rf_hank_does_not_let_a_second_loop_start_nor_lose_the_answer() {
    let p = Project::new(&["a", "b"]);
    let first = start_wiping_run(&p, "rm -rf .hank");
    // The user (or the agent) sets the project up again: only the lock can refuse now.
    std::fs::create_dir_all(p.dir.join(".hank")).unwrap();
    std::fs::write(p.dir.join(".hank/PROMPT.md"), "# Prompt\n").unwrap();
    std::fs::write(p.dir.join(".hank/fix_plan.md"), "# Plan\n\n- [ ] a\n").unwrap();
    std::fs::write(p.dir.join(".hank/AGENT.md"), "# Agent\n").unwrap();
    second_run_refused_and_first_counts(&p, first);
}

#[test]
fn git_clean_fdx_does_not_let_a_second_loop_start_nor_lose_the_answer() {
    let p = Project::new(&["a", "b"]);
    std::fs::write(
        p.dir.join(".gitignore"),
        include_str!("../../templates/gitignore"),
    )
    .unwrap();
    p.git_init();
    let first = start_wiping_run(&p, "git clean -fdXq");
    assert!(
        !p.dir.join(".hank/hank.lock").exists(),
        "git clean removed the lock file"
    );
    second_run_refused_and_first_counts(&p, first);
}

// ---------------------------------------------------------------------------------------------
// 7. A complete answer is kept when the agent does not exit

#[test]
fn an_agent_that_keeps_running_after_its_result_is_stopped_and_its_answer_kept() {
    let p = Project::new(&["a", "b"]);
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nCLAUDE_TIMEOUT_MINUTES=15\n");
    let answer = result_json("IN_PROGRESS", "IMPLEMENTATION", false, "did it");
    p.fake(
        "effect.sh",
        &format!("{TICK_ONE}printf '%s\\n' '{answer}'\ntrap '' TERM\nexec sleep 600\n"),
    );
    let child = p.spawn(&["--max-loops", "1"]);
    // Generous bound: the point is "seconds, not the 15 min timeout".
    let o = wait_with_timeout(child, Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let status = p.status();
    assert_eq!(status["last_loop"]["outcome"], "success", "{status}");
    let state = p.state();
    assert!((cost(&state["totals"]["cost_usd"]) - 0.01).abs() < 1e-9);
    assert!(marked_after(&p, Duration::from_secs(5)).is_empty());
}

// ---------------------------------------------------------------------------------------------
// 9. No survivor

#[test]
fn a_setsid_daemon_ignoring_sigterm_does_not_outlive_a_normal_loop() {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", &format!("{TICK_ONE}{}", daemon("daemon")));
    p.run_code(&["--max-loops", "1"], 3);
    let pid = read_pid(&p, "daemon");
    let left = marked_after(&p, Duration::from_secs(5));
    kill_all(&left);
    assert!(!alive(pid), "the setsid daemon survived the loop");
    assert!(left.is_empty(), "survivors: {left:?}");
}

/// Starts `hank` with an agent whose effect `effect` (every call's, or one call's) starts a
/// `setsid` daemon, then ignores SIGTERM and sleeps; returns once the daemon runs.
fn start_stubborn(p: &Project, effect: &str) -> Child {
    p.fake(
        effect,
        &format!("{}trap '' TERM\nsleep 300\n", daemon("daemon")),
    );
    let child = p.spawn(&[]);
    wait_file(&p.fake.join("daemon.pid"), Duration::from_secs(30));
    child
}

#[test]
fn a_setsid_daemon_does_not_survive_ctrl_c_and_a_second_ctrl_c_skips_the_grace() {
    let p = Project::new(&["a", "b"]);
    let child = start_stubborn(&p, "effect.sh");
    let sent = Instant::now();
    signal(&child, Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(200));
    signal(&child, Signal::SIGINT);
    let o = wait_with_timeout(child, Duration::from_secs(60));
    let took = sent.elapsed();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let left = marked_after(&p, Duration::from_secs(5));
    kill_all(&left);
    assert!(left.is_empty(), "survivors after Ctrl-C: {left:?}");
    // Both the agent and its daemon ignore SIGTERM: only the second Ctrl-C (SIGKILL at once)
    // ends the run before the 5 s grace.
    assert!(took < Duration::from_secs(5), "two Ctrl-C took {took:?}");
}

#[test]
fn a_setsid_daemon_does_not_survive_a_timeout() {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", &format!("{}sleep 300\n", daemon("daemon")));
    let o = p.run(&["--max-loops", "1", "--timeout", "2s"]);
    let left = marked_after(&p, Duration::from_secs(5));
    kill_all(&left);
    assert!(
        left.is_empty(),
        "survivors after a timeout: {left:?}: {}",
        stderr(&o)
    );
    let status = p.status();
    assert_eq!(status["last_loop"]["outcome"], "timeout", "{status}");
}

/// hank killed with SIGKILL while its agent (ignoring SIGTERM) and a `setsid` daemon run;
/// `hank reset` in between does not erase the record; the next run stops both and says so.
#[test]
fn what_a_killed_hank_left_is_stopped_by_the_next_start_even_after_reset() {
    let p = Project::new(&["a", "b"]);
    let mut child = start_stubborn(&p, "effect-1.sh");
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !marked(&p).is_empty(),
        "the agent should outlive a SIGKILL of hank"
    );
    let lock = std::fs::read_to_string(p.dir.join(".hank/hank.lock")).unwrap();
    assert!(lock.contains("\nagent "), "{lock}");
    p.run_code(&["reset", "session"], 0);
    let lock = std::fs::read_to_string(p.dir.join(".hank/hank.lock")).unwrap();
    assert!(
        lock.contains("\nagent "),
        "reset erased the orphan record: {lock}"
    );

    p.fake("effect.sh", TICK_ONE);
    let o = p.run(&["--max-loops", "1"]);
    let left = marked_after(&p, Duration::from_secs(5));
    kill_all(&left);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(left.is_empty(), "survivors after the next start: {left:?}");
    crate::support::assert_contains(&stderr(&o), "left running by a hank that was killed");
    let lock = std::fs::read_to_string(p.dir.join(".hank/hank.lock")).unwrap();
    assert!(!lock.contains("agent "), "{lock}");
}

// ---------------------------------------------------------------------------------------------
// 8. Bounded input

/// One answer line over 256 MiB: a clear `output_too_large`, counted as a failed call.
#[test]
fn an_answer_line_over_the_cap_is_output_too_large() {
    let p = Project::new(&["a", "b"]);
    p.fake(
        "effect.sh",
        "printf '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"'\n\
         head -c 270000000 /dev/zero | tr '\\0' x\nprintf '\"}\\n'\nexit 0\n",
    );
    p.fake("response", "");
    p.run_code(&["--max-loops", "1"], 3);
    let status = p.status();
    assert_eq!(
        status["last_loop"]["error_kind"], "output_too_large",
        "{status}"
    );
    let finished = p.events_of("agent_finished");
    assert_eq!(finished.len(), 1);
    assert_eq!(
        p.state()["breaker"]["failure_streak"],
        1,
        "{}",
        p.state()["breaker"]
    );
    let _ = std::fs::remove_file(p.dir.join(".hank/logs/loop-00001.out"));
}

// ---------------------------------------------------------------------------------------------
// kill -9 sweep

/// A tiny xorshift generator: the sweep is reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The fake agent of the sweep: counts itself, ticks a task, forks a child and a `setsid`
/// daemon that ignore SIGTERM, works a random short time, answers (0.01 USD), and itself
/// ignores SIGTERM half of the time. With `calm` in the fake's folder (the checking run after
/// each kill) it only counts itself, ticks and answers.
const SWEEP_AGENT: &str = r#"
echo x >> "$FAKE_CLAUDE_DIR/invocations"
sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
date +%s%N >> work.txt
[ -e "$FAKE_CLAUDE_DIR/calm" ] && exit 0
(trap '' TERM; exec sleep 300) &
setsid bash -c 'trap "" TERM; exec sleep 300' > /dev/null 2>&1 < /dev/null &
if [ $((RANDOM % 2)) = 0 ]; then trap '' TERM; fi
sleep "0.$((RANDOM % 30))"
"#;

fn sweep_project(seed: u64, iterations: u64) -> (u64, usize) {
    let items: Vec<String> = (0..200).map(|i| format!("task {i}")).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let p = Project::new(&refs);
    p.fake("effect.sh", SWEEP_AGENT);
    let mut rng = Rng(seed | 1);
    let mut points = 0;
    let calm = p.fake.join("calm");
    for i in 0..iterations {
        let _ = std::fs::remove_file(&calm);
        let mut child = p.spawn(&["--calls", "10000"]);
        let delay = rng.below(900);
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap();
        child.wait().unwrap();
        points += 1;
        // The next start stops everything that is left, and counts every call made.
        std::fs::write(&calm, "").unwrap();
        let o = p.run(&["--max-loops", "1", "--calls", "10000"]);
        assert!(
            matches!(o.status.code(), Some(3)),
            "seed {seed} iteration {i} (kill after {delay} ms): {}",
            stderr(&o)
        );
        let left = marked_after(&p, Duration::from_secs(3));
        kill_all(&left);
        assert!(
            left.is_empty(),
            "seed {seed} iteration {i} (kill after {delay} ms): survivors {left:?}"
        );
        let invoked = std::fs::read_to_string(p.fake.join("invocations"))
            .unwrap_or_default()
            .lines()
            .count();
        let state = p.state();
        let loops = usize::try_from(state["totals"]["loops"].as_u64().unwrap()).unwrap();
        let logged = calls_in_log(&p);
        assert!(
            logged >= invoked && loops >= invoked,
            "seed {seed} iteration {i} (kill after {delay} ms): {invoked} agent invocations, \
             {logged} calls in the ledger, {loops} loops counted"
        );
        // A completed answer (the restart's own call at least) is counted with its cost.
        assert!(cost(&state["totals"]["cost_usd"]) >= 0.01 * (i + 1) as f64 - 1e-9);
    }
    (points, calls_in_log(&p))
}

/// 100+ SIGKILLs of hank at random points over agents that fork, `setsid` and ignore
/// SIGTERM; after each, the next start leaves no survivor and no call is under-counted.
#[test]
#[ignore = "slow: cargo test -- --ignored (.ci/run runs them), or cargo nextest run --run-ignored all"]
fn kill_9_sweep_leaves_no_survivor_and_no_uncounted_call() {
    let seed = std::env::var("HANK_SWEEP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("kill -9 sweep seed: {seed} (HANK_SWEEP_SEED={seed} to replay)");
    const PROJECTS: u64 = 8;
    const PER_PROJECT: u64 = 13;
    let handles: Vec<_> = (0..PROJECTS)
        .map(|k| {
            let s = seed.wrapping_add(k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            std::thread::spawn(move || sweep_project(s, PER_PROJECT))
        })
        .collect();
    let mut points = 0;
    for h in handles {
        let (n, _) = h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        points += n;
    }
    assert!(points >= 100, "{points} kill points");
}
