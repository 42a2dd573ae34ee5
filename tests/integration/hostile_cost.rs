//! An agent that hides what it cost or leaves processes behind (issue 24, items 3 and 5): a
//! process that keeps stdout open after the answer, an emptied call log, a forged lock record,
//! hank killed with SIGKILL during a wait or a check. Each test is the attack.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::support::{Project, TICK_ONE, alive, exits, gone_within, stderr};

fn wait_file(path: &Path, within: Duration) {
    let start = Instant::now();
    while !path.exists() || std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
        assert!(
            start.elapsed() < within,
            "{} not written in {within:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn pids_in(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn kill(pid: i32) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
}

/// Asserts that `object[field]` is the dollar amount `usd` (to 1e-9).
fn assert_usd(object: &Value, field: &str, usd: f64) {
    let got = object[field].as_f64().unwrap_or(f64::NAN);
    assert!((got - usd).abs() < 1e-9, "{field} is not {usd}: {object}");
}

/// A success answer that costs `usd`.
fn answer(usd: f64) -> String {
    format!(
        "{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"worked\",\
         \"session_id\":\"11111111-2222-3333-4444-555555555555\",\"total_cost_usd\":{usd},\
         \"usage\":{{\"input_tokens\":100,\"output_tokens\":20}}}}\n"
    )
}

/// The agent starts `env -i setsid sleep 1000 &` before its result (no marker, its own
/// session, stdout inherited): every answer is still read, analyzed and charged, `--max-cost`
/// binds, and the holders do not outlive their loop.
#[test]
fn a_pipe_held_by_an_env_i_setsid_process_does_not_hide_the_cost() {
    let p = Project::new(&["a", "b", "c", "d", "e", "f"]);
    p.fake("holder", "")
        .fake("effect.sh", TICK_ONE)
        .fake("response", &answer(1.0));
    let o = p.run(&["--max-cost", "3", "--max-loops", "6"]);
    let holders = pids_in(&p.fake.join("holder.pid"));
    let survivors: Vec<i32> = holders
        .iter()
        .copied()
        .filter(|pid| !gone_within(*pid, Duration::from_secs(3)))
        .collect();
    for pid in &holders {
        kill(*pid);
    }
    let status = p.status();
    assert_eq!(status["exit_reason"], "cost_budget", "{}", stderr(&o));
    assert_eq!(p.calls(), 3, "{}", stderr(&o));
    let state = p.state();
    assert_usd(&state["totals"], "cost_usd", 3.0);
    assert_eq!(status["last_loop"]["outcome"], "success", "{status}");
    assert!(survivors.is_empty(), "holders outlived hank: {survivors:?}");
}

/// A foreign process group of the user, in its own group, that hank never started.
fn bystander() -> std::process::Child {
    use std::os::unix::process::CommandExt;
    Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .unwrap()
}

/// A forged `agent PGID 0` record in `hank.lock` after an unclean death: the next start does
/// not signal that process group (its start time does not match).
#[test]
fn a_forged_lock_record_does_not_make_hank_signal_a_foreign_group() {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", TICK_ONE);
    let mut victim = bystander();
    let pgid = i32::try_from(victim.id()).unwrap();
    std::fs::write(
        p.dir.join(".hank/hank.lock"),
        format!("999999\nagent {pgid} 0\nverify {pgid} 0\n"),
    )
    .unwrap();
    let o = p.run(&["--max-loops", "1"]);
    let still = alive(pgid);
    let _ = victim.kill();
    let _ = victim.wait();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(still, "hank signalled a process group it never started");
    assert!(
        !stderr(&o).contains("left running by a hank that was killed"),
        "{}",
        stderr(&o)
    );
}

/// The same forgery with the victim's real start time (anyone can read it from
/// `/proc/PID/stat`) and a copied seal line: the record is not under this user's seal (a key
/// outside the project), so the next start signals nothing.
#[test]
fn a_forged_lock_record_with_the_real_start_time_is_not_acted_on() {
    let p = Project::new(&["a", "b", "c"]);
    p.fake("effect.sh", TICK_ONE);
    // A sealed record exists from an earlier run; the agent copies its seal line.
    let first = p.run(&["--max-loops", "1"]);
    assert_eq!(first.status.code(), Some(3), "{}", stderr(&first));
    let sealed = std::fs::read_to_string(p.dir.join(".hank/hank.lock")).unwrap();
    let seal = sealed
        .lines()
        .find(|l| l.starts_with("seal "))
        .unwrap_or("seal 00");
    let mut victim = bystander();
    let pgid = i32::try_from(victim.id()).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pgid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let ticks = after_comm.split_whitespace().nth(19).unwrap();
    std::fs::write(
        p.dir.join(".hank/hank.lock"),
        format!("999999\nagent {pgid} {ticks}\nverify {pgid} {ticks}\n{seal}\n"),
    )
    .unwrap();
    let o = p.run(&["--max-loops", "1"]);
    let still = alive(pgid);
    let _ = victim.kill();
    let _ = victim.wait();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        still,
        "hank signalled a process group named by a forged record"
    );
}

/// hank killed with SIGKILL while it waits at the call cap (`--calls 1`), right after a loop
/// whose next loop was to start at once: the loop, its cost and its tokens are on disk (the
/// token cap holds on restart).
#[test]
fn a_kill_9_during_a_rate_wait_loses_neither_the_loop_nor_its_tokens() {
    let p = Project::new(&["a", "b", "c"]);
    p.fake("effect.sh", TICK_ONE);
    let mut child = p.spawn(&["--calls", "1"]);
    p.wait_status(Duration::from_secs(30), |s| s["state"] == "waiting");
    child.kill().unwrap();
    child.wait().unwrap();
    let state = p.state();
    assert_eq!(state["totals"]["loops"], 1, "{state}");
    assert_usd(&state["totals"], "cost_usd", 0.01);
    let ledger = hank::store::Store::new(&p.dir)
        .read_state()
        .unwrap()
        .ledger
        .entries;
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0].tokens, 170, "{ledger:?}");
    // The token cap counts them on restart: 170 tokens of 100 allowed → waiting, no call.
    let mut again = p.spawn(&["--calls", "100", "--max-tokens-per-hour", "100"]);
    let pid = again.id();
    let s = p.wait_status(Duration::from_secs(30), |s| {
        s["state"] == "waiting" && s["pid"] == pid
    });
    again.kill().unwrap();
    again.wait().unwrap();
    assert_eq!(s["wait_reason"], "token_limit", "{s}");
    assert_eq!(p.calls(), 1);
}

/// `hank verify` killed with SIGKILL while its check runs: the next start stops the leftover
/// check (its group, recorded in the lock with its start time) and says so.
#[test]
fn a_check_left_by_a_killed_hank_verify_is_stopped_by_the_next_start() {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", TICK_ONE);
    let pidfile = p.fake.join("check.pid");
    let check = format!("echo $$ > {}; exec sleep 300", pidfile.display());
    let mut child = p
        .cmd()
        .args(["verify", "--command", &check])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_file(&pidfile, Duration::from_secs(20));
    let check_pid = pids_in(&pidfile)[0];
    // hank records the check's group right after the spawn.
    let lock_path = p.dir.join(".hank/hank.lock");
    let start = Instant::now();
    while !std::fs::read_to_string(&lock_path)
        .unwrap_or_default()
        .contains("\nverify ")
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        alive(check_pid),
        "the check should outlive a SIGKILL of hank"
    );
    let lock = std::fs::read_to_string(p.dir.join(".hank/hank.lock")).unwrap();
    assert!(lock.contains("\nverify "), "{lock}");
    let o = p.run(&["--max-loops", "1"]);
    let stopped = gone_within(check_pid, Duration::from_secs(5));
    kill(check_pid);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stopped, "the leftover check is still running");
    crate::support::assert_contains(
        &stderr(&o),
        "VERIFY_COMMAND left running by a hank that was killed",
    );
    let lock = std::fs::read_to_string(p.dir.join(".hank/hank.lock")).unwrap();
    assert!(!lock.contains("verify "), "{lock}");
}

/// The agent empties `.hank/state.json.calls` (and hank is started again): the copy outside
/// the project keeps the hour's calls, `-c 3` still means 3 calls in the hour, not 6.
#[test]
fn emptying_the_call_log_does_not_forget_the_call_cap() {
    let p = Project::new(&["a", "b", "c", "d", "e", "f", "g"]);
    p.fake(
        "effect.sh",
        &format!("{TICK_ONE}: > .hank/state.json.calls\n"),
    );
    p.run_code(&["-c", "3", "--max-loops", "3"], 3);
    assert_eq!(p.calls(), 3);
    std::fs::write(p.dir.join(".hank/state.json.calls"), b"").unwrap();
    let out = p.waits_at_the_call_cap(&["-c", "3", "--max-loops", "3"]);
    assert_eq!(p.calls(), 3, "{}", stderr(&out));
    crate::support::assert_contains(&stderr(&out), "its copy outside the project holds");
}

/// In text mode, one non-JSON line over the line cap (256 MiB; the attack used 2 GB) is
/// `output_too_large`, a failed call, not a success.
#[test]
fn a_text_line_over_the_cap_is_output_too_large_in_text_mode() {
    let p = Project::new(&["a", "b"]);
    p.fake(
        "effect.sh",
        "head -c 270000000 /dev/zero | tr '\\0' x\nprintf '\\nall done\\n'\nexit 0\n",
    );
    p.fake("response", "");
    let o = p.run(&["--max-loops", "1", "--output-format", "text"]);
    let _ = std::fs::remove_file(p.dir.join(".hank/logs/loop-00001.out"));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let status = p.status();
    assert_eq!(
        status["last_loop"]["error_kind"], "output_too_large",
        "{status}"
    );
    assert_eq!(p.state()["breaker"]["failure_streak"], 1);
}

/// An answer cut short before its result: it reached the API (something came back) but says
/// no cost. (Nothing at all on stdout within 2 s cannot have reached the API: `crashes.rs`.)
const CUT_SHORT: &str = "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s-1\"}\n{\"type\":\"result\",\"subtype\":\"succ";

/// Claude Code always reports a cost: answers whose cost cannot be read (a broken
/// `total_cost_usd`, an answer cut short) are charged the highest cost of the last 24 h, shown as
/// estimated (status, events, log, `hank report`), and `--max-cost` binds on them.
#[test]
fn answers_without_a_readable_cost_are_charged_an_estimate() {
    let p = Project::new(&["a", "b", "c", "d", "e", "f"]);
    p.fake("effect.sh", TICK_ONE)
        .fake("response-1", &answer(2.0))
        .fake(
            "response-2",
            "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"ok\",\"total_cost_usd\":\"free\"}\n",
        )
        .fake("response-3", CUT_SHORT)
        .fake("response", &answer(0.1));
    let o = p.run(&["--max-cost", "5", "--max-loops", "6"]);
    assert_eq!(p.status()["exit_reason"], "cost_budget", "{}", stderr(&o));
    assert_eq!(p.calls(), 3, "{}", stderr(&o));
    let status = p.status();
    assert_usd(&status, "total_cost_usd", 6.0);
    assert_usd(&status, "estimated_cost_usd", 4.0);
    assert_eq!(status["last_loop"]["cost_estimated"], true, "{status}");
    let f = p.events_of("agent_finished");
    let flags: Vec<bool> = f
        .iter()
        .map(|e| e["cost_estimated"].as_bool().unwrap_or(false))
        .collect();
    assert_eq!(flags, [false, true, true]);
    crate::support::assert_contains(
        &stderr(&o),
        "held no readable cost; charged an estimate of $2.00",
    );
    let st = p.run(&["status"]);
    let shown = format!("{}{}", String::from_utf8_lossy(&st.stdout), stderr(&st));
    assert!(shown.contains("of which $4.0000 estimated"), "{shown}");
    let r = p.run(&["report"]);
    assert!(
        String::from_utf8_lossy(&r.stdout).contains("of which $4.00 estimated")
            || stderr(&r).contains("of which $4.00 estimated"),
        "{}{}",
        String::from_utf8_lossy(&r.stdout),
        stderr(&r)
    );
}

/// With no reported cost in the last 24 h, the estimate is UNKNOWN_CALL_COST.
#[test]
fn without_recent_costs_the_estimate_is_unknown_call_cost() {
    let p = Project::new(&["a", "b", "c"]);
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nUNKNOWN_CALL_COST=2.5\n")
        .fake("effect.sh", TICK_ONE)
        .fake("response", CUT_SHORT);
    let o = p.run(&["--max-cost", "4", "--max-loops", "3"]);
    assert_eq!(p.status()["exit_reason"], "cost_budget", "{}", stderr(&o));
    assert_eq!(p.calls(), 2);
    assert_usd(&p.status(), "total_cost_usd", 5.0);
}

/// A profile for an agent that never reports a cost (the fake prints Claude's result, read
/// through JSONPath without `cost_usd`), with or without `[prices]`.
fn costless_profile(p: &Project, prices: &str) {
    let text = crate::agents::json_profile(
        "costless",
        &p.fake,
        "resume = false\n",
        "cache_read_tokens = \"$.usage.cache_read_input_tokens\"\n",
        prices,
    );
    crate::support::write_new(&p.dir.join(".hank/agents/costless.toml"), text);
}

/// `hank run --agent costless --max-cost 0.6 --max-loops LOOPS` in `p`.
fn run_costless(p: &Project, loops: &str) -> Output {
    p.run(&[
        "--agent",
        "costless",
        "--max-cost",
        "0.6",
        "--max-loops",
        loops,
    ])
}

/// An agent that reports no cost is charged its tokens at the profile's prices (shown as
/// estimated), and `--max-cost` binds on that.
#[test]
fn an_agent_without_costs_is_charged_its_tokens_at_the_profile_prices() {
    let p = Project::new(&["a", "b", "c", "d"]);
    p.fake("effect.sh", TICK_ONE);
    // 100 input, 20 output, 50 cache-read tokens per call: $0.10 + $0.20 + $0.05.
    costless_profile(
        &p,
        "\n[prices]\ninput = 1000.0\noutput = 10000.0\ncache_read = 1000.0\n",
    );
    let o = run_costless(&p, "4");
    assert_eq!(p.status()["exit_reason"], "cost_budget", "{}", stderr(&o));
    assert_eq!(p.calls(), 2, "{}", stderr(&o));
    let status = p.status();
    assert_usd(&status, "total_cost_usd", 0.7);
    assert_eq!(status["last_loop"]["cost_estimated"], true, "{status}");
    assert!(!stderr(&o).contains("cannot bind"), "{}", stderr(&o));
}

/// Without prices, hank says at start that MAX_COST_USD cannot bind that agent.
#[test]
fn an_agent_without_costs_or_prices_is_named_at_start() {
    let p = Project::new(&["a", "b"]);
    p.fake("effect.sh", TICK_ONE);
    costless_profile(&p, "");
    let o = run_costless(&p, "1");
    crate::support::assert_contains(&exits(&o, 3), "MAX_COST_USD cannot bind costless");
    let bad = Project::new(&["a"]);
    costless_profile(&bad, "\n[prices]\ninput = -1\n");
    let o = bad.run_code(&["--agent", "costless", "--max-loops", "1"], 1);
    assert!(stderr(&o).contains("prices.input"), "{}", stderr(&o));
}

/// The agent starts a private tmux server with a clean environment (`env -i`: no marker; the
/// server is a daemon in its own session): it does not survive the loop.
#[test]
fn a_private_tmux_server_started_with_env_i_does_not_outlive_the_loop() {
    if crate::support::missing("tmux") {
        return;
    }
    let p = Project::new(&["a", "b"]);
    let sock = p.fake.join("tmux.sock");
    p.fake(
        "effect.sh",
        &format!(
            "{TICK_ONE}env -i PATH=/usr/bin:/bin tmux -S '{sock}' new-session -d 'sleep 1000'\n\
             env -i PATH=/usr/bin:/bin tmux -S '{sock}' display -p '#{{pid}}' > \"$FAKE_CLAUDE_DIR/tmux.pid\"\n",
            sock = sock.display()
        ),
    );
    let o = p.run(&["--max-loops", "1"]);
    let server = pids_in(&p.fake.join("tmux.pid"));
    assert_eq!(server.len(), 1, "{}", stderr(&o));
    let stopped = gone_within(server[0], Duration::from_secs(5));
    kill(server[0]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stopped, "the private tmux server outlived the loop");
}

/// hank killed with SIGKILL while its agent runs, after the agent started an `env -i setsid`
/// process (no marker, out of its group): hank recorded it in the lock while the agent ran,
/// and the next start stops it.
#[test]
fn an_env_i_daemon_left_by_a_killed_hank_is_stopped_by_the_next_start() {
    let p = Project::new(&["a", "b"]);
    p.fake("holder-1", "").fake("sleep-1", "300");
    let mut child = p.spawn(&[]);
    wait_file(&p.fake.join("holder.pid"), Duration::from_secs(30));
    let daemon = pids_in(&p.fake.join("holder.pid"))[0];
    let lock_path = p.dir.join(".hank/hank.lock");
    let start = Instant::now();
    while !std::fs::read_to_string(&lock_path)
        .unwrap_or_default()
        .contains(&format!("\nproc {daemon} "))
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(alive(daemon), "the daemon should outlive a SIGKILL of hank");
    p.fake("effect.sh", TICK_ONE);
    let o = p.run(&["--max-loops", "1"]);
    let stopped = gone_within(daemon, Duration::from_secs(5));
    kill(daemon);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stopped, "the env -i daemon survived the next start");
    crate::support::assert_contains(&stderr(&o), "left running by a hank that was killed");
    let lock = std::fs::read_to_string(&lock_path).unwrap();
    assert!(!lock.contains("proc "), "{lock}");
}
