//! Verified completion end to end: the fake agent claims "done" (a ticked plan, EXIT_SIGNAL,
//! test saturation) and hank runs the project's check (`VERIFY_COMMAND`) before it believes it.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::support::{
    Project, alive, gone, result_json, signal, stderr, stdout, wait_with_timeout,
};

/// Ticks every open fix_plan item (the agent's "done").
const TICK_ALL: &str = "sed -i 's/- \\[ \\]/- [x]/' .hank/fix_plan.md\n";
/// A source change (progress for the breaker).
const TOUCH: &str = "mkdir -p src && date +%s%N >> src/work.txt\n";
/// The real fix the check looks for.
const FIX: &str = "mkdir -p src && echo fixed > src/x\n";

/// A project with `items` checked by `VERIFY_COMMAND=command`, with `RETRY_BACKOFF_SECONDS=0`
/// and `hankrc` in its `.hankrc`.
fn checked(items: &[&str], command: &str, hankrc: &str) -> Project {
    let p = Project::new(items);
    p.hankrc(&format!(
        "RETRY_BACKOFF_SECONDS=0\nVERIFY_COMMAND=\"{command}\"\n{hankrc}"
    ));
    p
}

/// The agent's "done" with some work: the plan ticked and a source change.
fn claim() -> String {
    format!("{TICK_ALL}{TOUCH}")
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[test]
fn a_rejected_claim_followed_by_a_real_fix_ends_with_exit_0() {
    let p = checked(
        &["make src/x"],
        "echo 'test parse::bad_input ... FAILED'; test -f src/x",
        "",
    );
    // Loop 1 ticks the plan without doing the work; loop 2 does the work.
    p.fake("effect-1.sh", &claim());
    p.fake("effect-2.sh", FIX);
    let o = p.run_code(&[], 0);
    assert_eq!(p.calls(), 2);
    let s = p.status();
    assert_eq!(s["exit_reason"], "plan_complete");
    let v = &s["verification"];
    assert_eq!(
        v["command"],
        "echo 'test parse::bad_input ... FAILED'; test -f src/x"
    );
    assert_eq!(v["last"]["passed"], true);
    assert_eq!(v["last"]["kind"], "completion");
    // The accepted claim ends the row of rejections.
    assert_eq!(v["rejected_in_a_row"], 0);
    // The failing output reached the next call's context, within its budget.
    let (ctx2, _) = p.context_and_prompt(2);
    for want in [
        "REJECTED",
        "test -f src/x",
        "exit 1",
        "Failing tests: parse::bad_input",
        ".hank/logs/verify-00001.log",
    ] {
        assert!(ctx2.contains(want), "{want} missing in:\n{ctx2}");
    }
    let (ctx1, _) = p.context_and_prompt(1);
    assert!(!ctx1.contains("REJECTED"));
    // Records: two checks, the first failed; the exit says it was verified.
    let events = p.events();
    let checks = of_type(&events, "verification");
    assert_eq!(checks.len(), 2, "{events:?}");
    assert_eq!(checks[0]["passed"], false);
    assert_eq!(checks[0]["exit_code"], 1);
    assert_eq!(checks[1]["passed"], true);
    let exit = of_type(&events, "exit")[0];
    assert_eq!(exit["verified"], true);
    assert!(
        exit["message"].as_str().unwrap().contains("verified"),
        "{exit}"
    );
    let log = p.dir.join(".hank/logs/verify-00001.log");
    assert!(std::fs::read_to_string(&log).unwrap().contains("FAILED"));
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&log).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    assert!(stderr(&o).contains("rejected"), "{}", stderr(&o));
}

#[test]
fn three_rejected_claims_halt_with_verification_failed() {
    let p = checked(&["the impossible"], "test -f src/never", "");
    p.fake(
        "response",
        &result_json("COMPLETE", "IMPLEMENTATION", true, "All done."),
    );
    p.fake("effect.sh", TOUCH);
    let o = p.run_code(&[], 2);
    let s = p.status();
    assert_eq!(s["exit_reason"], "verification_failed");
    assert_eq!(s["verification"]["rejected_in_a_row"], 3);
    // Loop 1 is one indicator; loops 2, 3 and 4 are claims, each rejected.
    assert_eq!(p.calls(), 4);
    let events = p.events();
    assert_eq!(of_type(&events, "verification").len(), 3);
    let exit = of_type(&events, "exit")[0];
    assert_eq!(exit["exit_code"], 2);
    assert_eq!(exit["verified"], false);
    let msg = exit["message"].as_str().unwrap();
    assert!(msg.contains(".hank/logs/verify-00003.log"), "{msg}");
    assert!(stderr(&o).contains("verify-00003.log"), "{}", stderr(&o));
    // Each rejection tells the agent how many are left.
    assert!(p.context_and_prompt(3).0.contains("rejection 1 of 3"));
    assert!(p.context_and_prompt(4).0.contains("rejection 2 of 3"));
}

#[test]
fn without_a_check_done_is_as_before() {
    let p = Project::new(&["one"]);
    p.fake("effect.sh", &claim());
    p.run_code(&[], 0);
    assert_eq!(p.calls(), 1);
    assert!(p.status().get("verification").is_none());
    assert!(of_type(&p.events(), "verification").is_empty());
    // --no-verify turns a configured check off for one run.
    let q = checked(&["one"], "false", "");
    q.fake("effect.sh", &claim());
    q.run_code(&["--no-verify"], 0);
    assert!(of_type(&q.events(), "verification").is_empty());
}

#[test]
fn the_agent_editing_verify_command_is_ignored() {
    let p = checked(&["make src/x"], "test -f src/x", "");
    p.fake(
        "effect-1.sh",
        &format!("{TICK_ALL}{TOUCH}printf 'RETRY_BACKOFF_SECONDS=0\\nVERIFY_COMMAND=\"true\"\\n' > .hankrc\n"),
    );
    p.fake("effect-2.sh", FIX);
    p.run_code(&[], 0);
    assert_eq!(
        p.calls(),
        2,
        "the edited `true` must not have passed loop 1's claim"
    );
    let events = p.events();
    let checks = of_type(&events, "verification");
    assert!(checks.iter().all(|c| c["command"] == "test -f src/x"));
    assert_eq!(checks[0]["passed"], false);
    let warned = of_type(&events, "warning").iter().any(|w| {
        w["message"]
            .as_str()
            .unwrap()
            .contains("VERIFY_COMMAND in .hankrc changed")
    });
    assert!(warned, "{events:?}");
}

#[test]
fn a_claim_that_contradicts_itself_is_not_completion() {
    let p = Project::new(&["one", "two"]);
    let mut blocked = result_json("BLOCKED", "IMPLEMENTATION", true, "Stuck but done?");
    blocked = blocked.replace("TESTS_STATUS: PASSING", "TESTS_STATUS: FAILING");
    p.fake("response", &blocked);
    p.fake("effect.sh", TOUCH);
    p.run_to(&["--max-loops", "3"], 3, "max_loops");
    let (ctx2, _) = p.context_and_prompt(2);
    assert!(ctx2.contains("Resolve it"), "{ctx2}");
    assert!(ctx2.contains("EXIT_SIGNAL: true"), "{ctx2}");
}

#[test]
fn required_items_cannot_be_deleted_or_moved_to_optional() {
    for (name, effect, word) in [
        (
            "deleted",
            "sed -i '/- \\[ \\] two/d' .hank/fix_plan.md\nsed -i 's/- \\[ \\] one/- [x] one/' .hank/fix_plan.md\n",
            "disappeared",
        ),
        (
            "moved",
            "sed -i 's/## Tasks/## Optional/' .hank/fix_plan.md\n",
            "moved under an optional section",
        ),
    ] {
        let p = Project::new(&["one", "two"]);
        p.fake("effect.sh", &format!("{effect}{TOUCH}"));
        let o = p.run(&["--max-loops", "2"]);
        assert_eq!(o.status.code(), Some(3), "{name}: {}", stderr(&o));
        assert_eq!(p.status()["exit_reason"], "max_loops", "{name}");
        let events = p.events();
        let warnings: Vec<&str> = of_type(&events, "warning")
            .iter()
            .filter_map(|w| w["message"].as_str())
            .filter(|m| m.contains("fix_plan.md"))
            .collect();
        assert_eq!(warnings.len(), 1, "{name}: warned once: {warnings:?}");
        assert!(
            warnings[0].contains("`two`") && warnings[0].contains(word),
            "{name}: {warnings:?}"
        );
        let exit = of_type(&events, "exit")[0]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(exit.contains("changed while open"), "{name}: {exit}");
    }
}

#[test]
fn deleted_test_files_are_listed_at_the_exit() {
    let p = Project::new(&["one"]);
    crate::support::write_new(
        &p.dir.join("tests/test_calc.py"),
        "def test_add():\n    assert 1 + 1 == 2\n",
    );
    std::fs::write(
        p.dir.join("tests/test_keep.py"),
        "def test_keep():\n    pass\n",
    )
    .unwrap();
    std::fs::write(p.dir.join("calc_test.go"), "package calc\n").unwrap();
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nVERIFY_COMMAND=\"true\"\n");
    p.fake(
        "effect.sh",
        &format!("{TICK_ALL}{TOUCH}rm tests/test_calc.py\n: > calc_test.go\n"),
    );
    p.run_code(&[], 0);
    let last = &p.status()["verification"]["last"];
    assert_eq!(
        last["removed_tests"],
        serde_json::json!(["calc_test.go", "tests/test_calc.py"])
    );
    let exit = of_type(&p.events(), "exit")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        exit.contains("tests/test_calc.py") && exit.contains("calc_test.go"),
        "{exit}"
    );
}

#[test]
fn a_red_baseline_is_told_to_the_first_loop() {
    let p = checked(&["make src/x"], "test -f src/x", "VERIFY_AT_START=true\n");
    p.fake("effect.sh", &format!("{FIX}{TICK_ALL}"));
    p.run_code(&[], 0);
    assert_eq!(p.calls(), 1);
    let (ctx1, _) = p.context_and_prompt(1);
    assert!(ctx1.contains("already failed"), "{ctx1}");
    let v = &p.status()["verification"];
    assert_eq!(v["baseline"]["passed"], false);
    assert_eq!(v["baseline"]["kind"], "baseline");
    assert_eq!(v["last"]["passed"], true);
    let checks = of_type(&p.events(), "verification").len();
    assert_eq!(checks, 2);
}

#[test]
fn per_loop_checks_are_the_tests_state_and_a_regression_is_no_progress() {
    let p = checked(
        &["one", "two", "three"],
        "test ! -f src/broken",
        "VERIFY_EVERY_LOOP=true\nCB_NO_PROGRESS_THRESHOLD=1\n",
    );
    // Loop 1 works; loop 2 changes files but breaks the check.
    p.fake("effect-1.sh", TOUCH);
    p.fake("effect-2.sh", &format!("{TOUCH}touch src/broken\n"));
    p.run_to(&["--max-loops", "5"], 2, "circuit_open");
    assert_eq!(p.calls(), 2);
    let events = p.events();
    let finished = of_type(&events, "agent_finished");
    // The agent said PASSING both times; the check says otherwise for loop 2.
    assert_eq!(finished[0]["tests_status"], "PASSING");
    assert_eq!(finished[1]["tests_status"], "FAILING");
    assert_eq!(finished[1]["files_changed"], 2);
    let checks = of_type(&events, "verification");
    assert_eq!(checks.len(), 2);
    assert!(checks.iter().all(|c| c["kind"] == "loop"));
    assert_eq!(p.status()["verification"]["last"]["passed"], false);
}

#[test]
fn the_rejection_context_stays_within_its_budget() {
    let p = checked(
        &["one"],
        "seq 1 20000; for i in $(seq 1 300); do echo test m$i::t ... FAILED; done; false",
        "",
    );
    p.fake("effect-1.sh", &claim());
    p.fake(
        "effect-2.sh",
        "sed -i 's/- \\[x\\]/- [ ]/' .hank/fix_plan.md\n",
    );
    p.run_code(&["--max-loops", "2"], 3);
    let (ctx2, _) = p.context_and_prompt(2);
    let start = ctx2
        .find("Your \"done\" was REJECTED")
        .expect("rejection in context");
    let part = &ctx2[start..];
    let end = part.find("\nOne task per loop").unwrap_or(part.len());
    assert!(end <= 1500, "{end} bytes:\n{}", &part[..end]);
    assert!(part.contains("Failing tests: m1::t"), "{part}");
}

#[test]
fn hank_verify_runs_the_check_now() {
    let p = checked(&["one"], "test -f src/x", "");
    let o = p.run_code(&["verify"], 2);
    assert!(
        stdout(&o).starts_with("FAILED: test -f src/x (exit 1"),
        "{}",
        stdout(&o)
    );
    crate::support::write_new(&p.dir.join("src/x"), "x");
    let o = p.run_code(&["verify", "--json"], 0);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["passed"], true);
    assert_eq!(v["kind"], "manual");
    assert_eq!(v["log"], ".hank/logs/verify-00002.log");
    assert_eq!(p.state()["last_verification"]["passed"], true);
    // --command overrides; no command at all is a usage error naming the key.
    let o = p.run_code(&["verify", "--command", "exit 7"], 2);
    assert!(stdout(&o).contains("exit 7"), "{}", stdout(&o));
    p.hankrc("RETRY_BACKOFF_SECONDS=0\n");
    let o = p.run_code(&["verify"], 1);
    assert!(stderr(&o).contains("VERIFY_COMMAND"), "{}", stderr(&o));
}

#[test]
fn status_shows_the_last_verification() {
    let p = checked(&["make src/x"], "test -f src/x", "");
    p.fake("effect-1.sh", &claim());
    p.fake("effect-2.sh", FIX);
    p.run_code(&[], 0);
    let o = p.run(&["status"]);
    let text = stdout(&o);
    assert!(text.contains("verify:       test -f src/x"), "{text}");
    assert!(text.contains("last:       completion — passed"), "{text}");
    let o = p.run(&["monitor", "--once"]);
    let text = stdout(&o);
    assert!(text.contains("verify") && text.contains("passed"), "{text}");
}

#[test]
fn a_check_past_verify_timeout_is_a_failed_check() {
    let p = checked(
        &["one"],
        "sleep 120",
        "VERIFY_TIMEOUT=1s\nMAX_REJECTED_COMPLETIONS=1\n",
    );
    p.fake("effect.sh", &claim());
    let child = p.spawn(&[]);
    let o = wait_with_timeout(child, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let last = &p.status()["verification"]["last"];
    assert_eq!(last["timed_out"], true);
    assert_eq!(last["passed"], false);
    assert_eq!(p.status()["exit_reason"], "verification_failed");
}

#[test]
fn ctrl_c_during_a_check_stops_it_and_its_children() {
    let p = checked(&["one"], "sleep 300 & echo $! > check.pid; wait", "");
    p.fake("effect.sh", &claim());
    let child = p.spawn(&[]);
    let pid_file = p.dir.join("check.pid");
    let start = Instant::now();
    while !pid_file.is_file()
        || std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .is_empty()
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the check never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    signal(&child, Signal::SIGINT);
    let o = wait_with_timeout(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(gone(pid), "the check's child survived");
    let s = p.status();
    assert_eq!(s["exit_reason"], "interrupted");
    assert_eq!(s["verification"]["last"]["interrupted"], true);
}

/// A check whose program does not exist could not run: exit 1 naming the program, not a
/// failed check (exit 2).
#[test]
fn a_check_that_could_not_run_is_an_error_naming_the_program() {
    let p = checked(&["one"], "hank-no-such-runner -q", "");
    let o = p.run_code(&["verify"], 1);
    let err = stderr(&o);
    assert!(err.contains("could not run"), "{err}");
    assert!(err.contains("`hank-no-such-runner` was not found"), "{err}");
    crate::support::write_new(&p.dir.join("check.sh"), "#!/bin/sh\nexit 0\n");
    let o = p.run_code(&["verify", "--command", "./check.sh"], 1);
    assert!(
        stderr(&o).contains("`./check.sh` is not executable"),
        "{}",
        stderr(&o)
    );
}

/// The run's own check of a "done" claim could not run (its program is missing): the run
/// stops at once with exit 1 `check_could_not_run`, naming the program; the claim is not
/// rejected and the agent is not called again to fix it.
#[test]
fn a_claim_whose_check_could_not_run_stops_naming_the_program() {
    let p = checked(&["one"], "hank-no-such-runner -q", "");
    p.fake("effect.sh", &claim());
    let o = p.run_code(&[], 1);
    assert_eq!(p.calls(), 1);
    let s = p.status();
    assert_eq!(s["exit_reason"], "check_could_not_run");
    assert_eq!(s["verification"]["rejected_in_a_row"], 0);
    let err = stderr(&o);
    assert!(
        err.contains("could not run: `hank-no-such-runner` was not found"),
        "{err}"
    );
    assert!(!err.contains("rejected: the check failed"), "{err}");
    let exit = of_type(&p.events(), "exit")[0].clone();
    assert_eq!(exit["exit_code"], 1);
    let msg = exit["message"].as_str().unwrap();
    assert!(msg.contains("install `hank-no-such-runner`"), "{msg}");
}

/// `hank status` after manual checks shows the last one, with or without a run's status.
#[test]
fn status_shows_the_last_manual_verify() {
    let p = checked(&["one"], "true", "");
    p.run_code(&["verify"], 0);
    p.run_code(&["verify"], 0);
    let text = stdout(&p.run(&["status"]));
    assert!(text.contains("last:       manual — passed"), "{text}");
    // A run whose status has no check of its own yet (here: it stopped at MAX_LOOPS before
    // any claim) still shows the manual one.
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nVERIFY_COMMAND=\"true\"\nMAX_LOOPS=1\n");
    p.fake("effect-1.sh", TOUCH);
    p.run_code(&[], 3);
    p.run_code(&["verify"], 0);
    let text = stdout(&p.run(&["status"]));
    assert!(text.contains("last:       manual — passed"), "{text}");
    assert!(!text.contains("not run yet"), "{text}");
    // The monitor's snapshot says the same.
    let once = p.run(&["monitor", "--once"]);
    let text = stdout(&once) + &stderr(&once);
    assert!(text.contains("manual — passed"), "{text}");
    assert!(!text.contains("not run yet"), "{text}");
}

/// `hank doctor` checks that VERIFY_COMMAND's program exists: "not ready", naming it.
#[test]
fn doctor_names_a_check_program_that_does_not_exist() {
    let p = checked(&["one"], "hank-no-such-runner -q", "");
    let o = p.run(&["doctor", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let check = crate::support::doctor_check(&v, "verify");
    assert_eq!(check["ok"], false, "{v}");
    let detail = check["detail"].as_str().unwrap();
    assert!(
        detail.contains("not ready") && detail.contains("`hank-no-such-runner`"),
        "{detail}"
    );
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nVERIFY_COMMAND=\"test -f src/x\"\n");
    let v: Value = serde_json::from_str(stdout(&p.run(&["doctor", "--json"])).trim()).unwrap();
    assert_eq!(
        crate::support::doctor_check(&v, "verify")["ok"],
        true,
        "{v}"
    );
}
