//! What the agent says or writes cannot make hank run away, lie, leak or hang (issue 13, the
//! data half): runaway answers stop, forged session ids never reach argv, secrets never reach
//! hank's files or output, escape sequences never reach the terminal, special files and
//! damaged state are clear errors or moved aside.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::support::{
    Project, TICK_ONE, error_json, result_json, stderr, stdout, wait_with_timeout,
};

/// A generous bound for runs that must end by themselves (a hang would take forever).
const ENDS_WITHIN: Duration = Duration::from_secs(90);

fn with_session(mut v: serde_json::Value, id: &str) -> String {
    v["session_id"] = json!(id);
    v.to_string()
}

/// A success answer saying `text`, the work in progress.
fn in_progress(text: &str) -> String {
    result_json("IN_PROGRESS", "IMPLEMENTATION", false, text)
}

fn result_value(text: &str) -> serde_json::Value {
    serde_json::from_str(&in_progress(text)).unwrap()
}

/// Item 3: an agent that only asks questions ends the run after at most 5 loops.
#[test]
fn an_agent_that_only_asks_questions_stops_with_needs_answers() {
    let p = Project::new(&["task"]);
    let question = "Should I use PostgreSQL or SQLite for the storage layer?";
    p.fake("response", &in_progress(question));
    let out = wait_with_timeout(p.spawn(&["--calls", "100"]), ENDS_WITHIN);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(p.calls() <= 5, "{} calls", p.calls());
    let st = p.status();
    assert_eq!(st["exit_reason"], "needs_answers");
    let err = stderr(&out);
    assert!(
        err.contains("PROMPT.md") && err.contains("fix_plan.md"),
        "{err}"
    );
}

/// Item 3: `error_during_execution` answers that hank did not cause count as failures.
#[test]
fn interrupted_answers_hank_did_not_cause_open_the_breaker() {
    let p = Project::new(&["task"]);
    let answer = json!({
        "type": "result", "subtype": "error_during_execution", "is_error": true,
        "duration_ms": 10, "num_turns": 1, "session_id": "9d7e0b8c-1111-2222-3333-444444444444",
        "total_cost_usd": 0.0, "usage": {"input_tokens": 0, "output_tokens": 0},
        "permission_denials": []
    });
    p.fake("response", &answer.to_string());
    let out = wait_with_timeout(p.spawn(&["--calls", "100"]), ENDS_WITHIN);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(p.calls() <= 5, "{} calls", p.calls());
    let st = p.status();
    assert_eq!(st["exit_reason"], "circuit_open");
    assert!(
        st["circuit_reason"]
            .as_str()
            .unwrap_or("")
            .contains("consecutive failed calls"),
        "{st}"
    );
}

/// Item 4: a forged session id never reaches the agent's argv.
#[test]
fn forged_session_ids_never_reach_argv() {
    let p = Project::new(&["a", "b", "c", "d", "e"]);
    p.fake("effect.sh", TICK_ONE);
    let ten_kb = "7".repeat(10 * 1024);
    let forged = [
        "--dangerously-skip-permissions",
        "$(touch pwned)",
        ten_kb.as_str(),
    ];
    for (i, id) in forged.iter().enumerate() {
        p.fake(
            &format!("response-{}", i + 1),
            &with_session(result_value("Worked."), id),
        );
    }
    let out = p.run_code(&["--max-loops", "4"], 3);
    for n in 2..=4 {
        let argv = p.argv(n);
        assert!(!argv.iter().any(|a| a == "--resume"), "call {n}: {argv:?}");
        for id in forged {
            assert!(!argv.iter().any(|a| a.contains(id)), "call {n}");
        }
        assert!(
            !argv.iter().any(|a| a.starts_with("--dangerously")),
            "call {n}"
        );
    }
    assert!(!p.dir.join("pwned").exists());
    let err = stderr(&out);
    assert!(err.contains("session id hank will not pass back"), "{err}");
    assert!(!err.contains(&ten_kb[..64]));
    // Nothing forged was stored either (the 4th answer, the fake's default, has a real id).
    let stored = p.state()["session"]["id"].as_str().unwrap_or("").to_owned();
    assert!(!forged.contains(&stored.as_str()), "{stored}");
    assert_eq!(stored, "11111111-2222-3333-4444-555555555554");
}

/// Item 4: a session id planted in state.json is not resumed.
#[test]
fn a_session_id_planted_in_state_json_is_dropped() {
    let p = Project::new(&["a", "b"]);
    p.run_code(&["--max-loops", "1"], 3);
    let path = p.dir.join(".hank/state.json");
    let mut state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    state["session"]["id"] = json!("--dangerously-skip-permissions");
    std::fs::write(&path, state.to_string()).unwrap();
    let out = p.run_code(&["--max-loops", "1"], 3);
    let argv = p.argv(2);
    assert!(!argv.iter().any(|a| a.contains("dangerously")), "{argv:?}");
    assert!(!argv.iter().any(|a| a == "--resume"), "{argv:?}");
    crate::support::assert_contains(&stderr(&out), "stored session id");
}

/// Every file under `dir`, recursively (without following links).
fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            files_under(&p, out);
        } else if ft.is_file() {
            out.push(p);
        }
    }
}

/// The 8-byte pieces of `secret` found in `bytes`.
fn leaked(bytes: &[u8], secret: &str) -> Vec<String> {
    secret
        .as_bytes()
        .windows(8)
        .filter(|w| bytes.windows(8).any(|b| b == *w))
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect()
}

/// Item 5: the key echoed everywhere the agent can put it reaches none of hank's files or
/// output. The raw agent logs (`logs/loop-*.out|.err|.prompt`) are the agent's own bytes,
/// kept as printed (README), and are not checked.
#[test]
fn secrets_never_reach_hanks_files_or_output() {
    let key = "sk-ant-api03-Zq8vR2mTx7LpK4nW9bYc3HdF6gJ1sA5eU0oIiQwErTyUuPzzAA";
    let other = "oa-Kx93mZpQ7wLr2Vb8NcT5yHd4";
    let p = Project::new(&["a", "b", "c"]);
    let mut v = result_value(&format!(
        "I found the key {key} and {other}.\nError: request failed for {key}"
    ));
    v["session_id"] = json!(key);
    v["permission_denials"] = json!([{"tool_name": format!("Tool{key}"), "tool_input": {"command": format!("echo {key}")}}]);
    p.fake("response-1", &v.to_string());
    p.fake(
        "response-2",
        &error_json(
            &format!("API Error: invalid key {key} ({other})"),
            Some(401),
        ),
    );
    p.fake(
        "stderr",
        &format!("Error: leaked {key}\r\nError: {other}\n"),
    );
    let run = |args: &[&str]| {
        p.cmd()
            .env("ANTHROPIC_API_KEY", format!("  {key}\r\n"))
            .env("OPENAI_API_KEY", format!("{other}\r"))
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["--max-loops", "3", "--json", "--verbose"]);
    assert!(out.status.code().is_some(), "{}", stderr(&out));
    assert!(p.calls() >= 2, "{}", stderr(&out));
    let mut outputs = vec![out.stdout.clone(), out.stderr.clone()];
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["monitor", "--once"],
        &["analyze", ".hank/logs/loop-00001.out"],
        &["analyze", ".hank/logs/loop-00002.out", "--json"],
    ] {
        let o = run(args);
        outputs.push(o.stdout);
        outputs.push(o.stderr);
    }
    let mut files = Vec::new();
    files_under(&p.dir.join(".hank"), &mut files);
    assert!(files.len() > 4, "{files:?}");
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("loop-") {
            continue;
        }
        let bytes = std::fs::read(f).unwrap();
        for secret in [key, other] {
            let l = leaked(&bytes, secret);
            assert!(l.is_empty(), "{}: {l:?}", f.display());
        }
    }
    for (i, o) in outputs.iter().enumerate() {
        for secret in [key, other] {
            let l = leaked(o, secret);
            assert!(
                l.is_empty(),
                "output {i}: {l:?}\n{}",
                String::from_utf8_lossy(o)
            );
        }
    }
    assert!(
        String::from_utf8_lossy(&outputs[1]).contains("[REDACTED]"),
        "{}",
        String::from_utf8_lossy(&outputs[1])
    );
}

const HOSTILE: &str = "title \u{1b}]0;pwned\u{7} red \u{1b}[31mRED\u{1b}[0m csi \u{9b}2J cr \rover";

fn assert_clean(what: &str, text: &str) {
    for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\r'] {
        assert!(!text.contains(bad), "{what} holds {bad:?}:\n{text:?}");
    }
}

/// Item 10: control characters and escape sequences from the agent reach no terminal output.
#[test]
fn escape_sequences_never_reach_the_terminal() {
    let p = Project::new(&["a", "b"]);
    let mut v = result_value(&format!("Did it. {HOSTILE}"));
    let text = v["result"].as_str().unwrap().replace(
        "RECOMMENDATION: keep going",
        &format!("RECOMMENDATION: {HOSTILE}"),
    );
    v["result"] = json!(text);
    p.fake("response-1", &v.to_string());
    p.fake(
        "response-2",
        &error_json(&format!("API Error: {HOSTILE}"), Some(500)),
    );
    let out = p.run_code(&["--max-loops", "2", "--verbose"], 3);
    let err = stderr(&out);
    assert!(err.contains("RED"), "{err}");
    assert_clean("run stderr", &err);
    for args in [
        &["status"][..],
        &["monitor", "--once"],
        &["analyze", ".hank/logs/loop-00001.out"],
        &["analyze", ".hank/logs/loop-00002.out"],
    ] {
        let o = p.run(args);
        assert_clean(&format!("{args:?}"), &stdout(&o));
        assert_clean(&format!("{args:?} stderr"), &stderr(&o));
    }
}

/// Item 10: the live view and live.log are sanitized too.
#[test]
fn the_live_view_is_sanitized() {
    let p = Project::new(&["a"]);
    let lines = [
        json!({"type":"system","subtype":"init","session_id":"5b1c0e0a-1111-2222-3333-444444444444","model":"m\u{1b}[31m"}),
        json!({"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text": HOSTILE},{"type":"tool_use","id":"t1","name":"Bash\u{1b}]0;x\u{7}","input":{"command": HOSTILE}}]},"session_id":"5b1c0e0a-1111-2222-3333-444444444444"}),
        json!({"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"ok\n---HANK_STATUS---\nSTATUS: IN_PROGRESS\nEXIT_SIGNAL: false\n---END_HANK_STATUS---","session_id":"5b1c0e0a-1111-2222-3333-444444444444","total_cost_usd":0.01}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    p.fake("response", &body);
    let out = p.run_code(&["--max-loops", "1", "--live"], 3);
    let err = stderr(&out);
    assert!(err.contains("RED"), "{err}");
    assert_clean("live stderr", &err);
    let live = std::fs::read_to_string(p.dir.join(".hank/live.log")).unwrap();
    assert!(live.contains("RED"), "{live}");
    assert_clean("live.log", &live);
}

/// A FIFO (0600) at `path`.
fn fifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

/// The file `rel` of the project `d` removed and `make` putting something else at its path.
fn replaced(d: &Path, rel: &str, make: impl FnOnce(&Path)) {
    let path = d.join(rel);
    std::fs::remove_file(&path).unwrap();
    make(&path);
}

/// Item 11: special files are clear errors naming the file, never a hang.
#[test]
fn special_files_are_clear_errors_not_hangs() {
    // (what to do to the project, the file the error must name, words it must hold)
    type Setup = fn(&Path);
    let cases: &[(&str, Setup, &str, &str)] = &[
        (
            ".hankrc → /dev/zero",
            |d| {
                replaced(d, ".hankrc", |p| {
                    std::os::unix::fs::symlink("/dev/zero", p).unwrap()
                })
            },
            ".hankrc",
            "character device",
        ),
        (
            "PROMPT.md a FIFO",
            |d| replaced(d, ".hank/PROMPT.md", fifo),
            "PROMPT.md",
            "FIFO",
        ),
        (
            "fix_plan.md a directory",
            |d| replaced(d, ".hank/fix_plan.md", |p| std::fs::create_dir(p).unwrap()),
            "fix_plan.md",
            "directory",
        ),
        (
            "state.json a directory",
            |d| std::fs::create_dir(d.join(".hank/state.json")).unwrap(),
            "state.json",
            "directory",
        ),
        (
            "state.json a FIFO",
            |d| fifo(&d.join(".hank/state.json")),
            "state.json",
            "FIFO",
        ),
    ];
    for (name, setup, file, words) in cases {
        let p = Project::new(&["a"]);
        setup(&p.dir);
        let out = wait_with_timeout(p.spawn(&["--max-loops", "1"]), ENDS_WITHIN);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(file) && err.contains(words), "{name}: {err}");
        assert!(!err.contains("missing required file"), "{name}: {err}");
        assert_eq!(p.calls(), 0, "{name}");
    }
}

/// Item 6 + 11: a damaged state.json is moved aside with a warning naming the backup, and an
/// OPEN breaker in it stays OPEN (its future opening time clamped to now).
#[test]
fn a_damaged_state_keeps_an_open_breaker() {
    let p = Project::new(&["a"]);
    std::fs::write(
        p.dir.join(".hank/state.json"),
        r#"{"schema_version":2,"breaker":{"state":"OPEN","reason":"no progress in 3 consecutive loops","opened_at":"2099-01-01T00:00:00Z"},"totals":"broken"}"#,
    )
    .unwrap();
    let out = p.run(&["--max-loops", "1"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(p.calls(), 0);
    assert!(err.contains("state.json.corrupt-"), "{err}");
    assert!(err.contains("stays OPEN"), "{err}");
    let aside = p.corrupt_state_files();
    assert_eq!(aside.len(), 1);
    let state = p.state();
    assert_eq!(state["breaker"]["state"], "OPEN");
    let opened = state["breaker"]["opened_at"].as_str().unwrap_or("");
    assert!(opened < "2099", "{opened}");
}

/// Item 6: `{}` is not a state file: moved aside, not read as a fresh state.
#[test]
fn an_empty_object_state_is_moved_aside() {
    let p = Project::new(&["a", "b"]);
    std::fs::write(p.dir.join(".hank/state.json"), "{}").unwrap();
    let out = p.run(&["--max-loops", "1"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("schema_version") && err.contains("moved it aside"),
        "{err}"
    );
}

/// Item 6: a poisoned cost or token count is rejected, never stored; the next run starts
/// normally (no state moved aside).
#[test]
fn poisoned_numbers_are_rejected() {
    let p = Project::new(&["a", "b", "c"]);
    p.fake("effect.sh", TICK_ONE);
    let mut v = result_value("Worked.");
    // (The analyzer itself already counts costs over $100,000 as unknown.)
    v["total_cost_usd"] = json!(5000.0);
    v["usage"]["input_tokens"] = json!(5_000_000_000_000u64);
    p.fake("response-1", &v.to_string());
    let out = p.run(&["--max-loops", "2", "--max-cost", "5"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("cost that is not a number"), "{err}");
    assert!(err.contains("tokens for one call"), "{err}");
    let state = p.state();
    let total = state["totals"]["cost_usd"].as_f64().unwrap();
    assert!(total.is_finite() && total < 1.0, "{state}");
    assert!(state["totals"]["tokens"]["input"].as_u64().unwrap() < 1_000_000);
    let out = p.run(&["--max-loops", "1"]);
    assert!(!stderr(&out).contains("moved it aside"), "{}", stderr(&out));
}

/// Item 11: symlinks planted among hank's own files are replaced, never followed, and the
/// run goes on.
#[test]
fn symlinked_logs_and_events_are_replaced_not_followed() {
    let p = Project::new(&["a", "b"]);
    let outside = tempfile::tempdir().unwrap();
    let outside_file = outside.path().join("events.jsonl");
    std::fs::write(&outside_file, "keep\n").unwrap();
    let out_dir = outside.path().join("logs");
    std::fs::create_dir(&out_dir).unwrap();
    std::os::unix::fs::symlink(&out_dir, p.dir.join(".hank/logs")).unwrap();
    std::os::unix::fs::symlink(&outside_file, p.dir.join(".hank/events.jsonl")).unwrap();
    let out = p.run(&["--max-loops", "1"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("was a symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(&outside_file).unwrap(), "keep\n");
    assert!(std::fs::read_dir(&out_dir).unwrap().next().is_none());
    assert!(p.dir.join(".hank/logs").is_dir());
    assert!(!p.events().is_empty());
    // An agent that plants them again mid-run does not stop the next run either.
    p.fake(
        "effect.sh",
        &format!(
            "rm -f .hank/events.jsonl && ln -s {} .hank/events.jsonl\n",
            outside_file.display()
        ),
    );
    p.run_code(&["--max-loops", "1"], 3);
    assert_eq!(std::fs::read_to_string(&outside_file).unwrap(), "keep\n");
}

/// Item 11: a 4 MiB RECOMMENDATION does not empty events.jsonl; the field is cut.
#[test]
fn a_huge_recommendation_is_cut_not_emptying_the_event_log() {
    let p = Project::new(&["a", "b"]);
    let mut v = result_value("Worked.");
    let huge = "r".repeat(4 * 1024 * 1024 + 10);
    let text = v["result"].as_str().unwrap().replace(
        "RECOMMENDATION: keep going",
        &format!("RECOMMENDATION: {huge}"),
    );
    v["result"] = json!(text);
    p.fake("response", &v.to_string());
    p.run_code(&["--max-loops", "2"], 3);
    let events = p.events();
    let finished: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "agent_finished")
        .collect();
    assert_eq!(finished.len(), 2, "{events:?}");
    let rec = finished[0]["recommendation"].as_str().unwrap_or("");
    assert!(rec.len() <= 2048 && rec.ends_with('…'), "{}", rec.len());
    let st = p.status();
    assert!(
        st["last_loop"]["recommendation"]
            .as_str()
            .unwrap_or("")
            .len()
            <= 2048
    );
}
