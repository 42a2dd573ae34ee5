//! Issue 23: calls that hang before their first byte (FIRST_OUTPUT_TIMEOUT), silence after
//! some output without `--live` (IDLE_TIMEOUT), and answers in a JSON format that are not the
//! client's JSON (malformed, cost still counted), and error results that did the work.

use std::process::Output;

use serde_json::Value;

use crate::support::{Project, TICK_ONE, stderr};

/// A result that reports an error (`error_during_execution`, the client's diagnostic) for a
/// call that may have done its work; $0.02.
const ERROR_RESULT: &str = "{\"type\":\"result\",\"subtype\":\"error_during_execution\",\"is_error\":true,\"errors\":[\"[ede_diagnostic] result_type=user\"],\"session_id\":\"5b1c0e0a-1111-2222-3333-444444444444\",\"total_cost_usd\":0.02}\n";

/// `hank run ARGS` in `p` with `RETRY_BACKOFF_SECONDS=0`, `MAX_LOOPS=loops` and `hankrc` in
/// `.hankrc`: its output and its stderr.
fn run(p: &Project, loops: u32, hankrc: &str, args: &[&str]) -> (Output, String) {
    p.hankrc(&format!(
        "RETRY_BACKOFF_SECONDS=0\nMAX_LOOPS={loops}\n{hankrc}"
    ));
    let o = p.run(&[&["run"], args].concat());
    let err = stderr(&o);
    (o, err)
}

/// An effect that changes a file every call without ticking the plan.
const CHURN: &str = "date +%s%N >> churn.txt\n";

fn kinds(p: &Project) -> Vec<String> {
    p.events_of("agent_finished")
        .iter()
        .map(|e| e["error_kind"].as_str().unwrap_or("-").to_owned())
        .collect()
}

#[test]
fn startup_hangs_are_retried_at_once_uncounted_and_the_third_counts() {
    let p = Project::new(&["a", "b"]);
    for n in 1..=3 {
        p.fake(&format!("sleep-{n}"), "30");
    }
    let (_, err) = run(&p, 3, "FIRST_OUTPUT_TIMEOUT=1s\n", &[]);
    assert_eq!(p.calls(), 3, "{err}");
    assert!(
        err.contains("loop 1: no output within FIRST_OUTPUT_TIMEOUT (1s): a startup hang; retrying at once (hang 1 of 2"),
        "{err}"
    );
    assert!(err.contains("retrying at once (hang 2 of 2"), "{err}");
    crate::support::assert_contains(
        &err,
        "loop 3: no output within FIRST_OUTPUT_TIMEOUT (1s): startup hang 3 in a row, counted as a timeout",
    );
    assert_eq!(kinds(&p), ["startup_hang"; 3], "{err}");
    for e in p.events_of("agent_finished") {
        assert_eq!(e["outcome"], "timeout", "{e}");
    }
    let state = p.state();
    // Only the third counted: one failed call in the breaker.
    assert_eq!(state["breaker"]["failure_streak"], 1, "{state}");
    assert_eq!(state["startup_hangs"], 3, "{state}");
}

#[test]
fn two_startup_hangs_then_an_answer_leave_the_breaker_untouched() {
    let p = Project::new(&["a", "b"]);
    p.fake("sleep-1", "30")
        .fake("sleep-2", "30")
        .fake("effect-3.sh", TICK_ONE);
    let (_, err) = run(&p, 3, "FIRST_OUTPUT_TIMEOUT=1s\n", &[]);
    assert_eq!(p.calls(), 3, "{err}");
    assert_eq!(kinds(&p), ["startup_hang", "startup_hang", "-"], "{err}");
    let state = p.state();
    assert_eq!(state["breaker"]["failure_streak"], 0, "{state}");
    assert_eq!(state["breaker"]["no_progress_streak"], 0, "{state}");
    assert!(state.get("startup_hangs").is_none(), "{state}");
    assert_eq!(state["consecutive_failures"], 0, "{state}");
}

#[test]
fn first_output_timeout_zero_turns_the_deadline_off() {
    let p = Project::new(&["a"]);
    p.fake("sleep-1", "2");
    let (_, err) = run(&p, 1, "FIRST_OUTPUT_TIMEOUT=0\n", &[]);
    assert_eq!(kinds(&p), ["-"], "{err}");
    assert!(!err.contains("startup hang"), "{err}");
}

#[test]
fn an_agent_that_prints_then_goes_silent_is_stopped_by_idle_timeout_without_live() {
    let p = Project::new(&["a"]);
    p.fake(
        "early-1",
        "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"5b1c0e0a-1111-2222-3333-444444444444\"}\n",
    )
    .fake("sleep-1", "60");
    let (_, err) = run(&p, 1, "IDLE_TIMEOUT=2s\nFIRST_OUTPUT_TIMEOUT=1s\n", &[]);
    assert_eq!(p.calls(), 1, "{err}");
    let f = p.events_of("agent_finished");
    assert_eq!(f.len(), 1, "{err}");
    assert_eq!(f[0]["outcome"], "timeout", "{err}");
    // It printed: an idle timeout, not a startup hang.
    assert_ne!(f[0]["error_kind"], "startup_hang", "{err}");
    // hank asked for the stream although --live was not given.
    let argv = p.argv(1).join(" ");
    crate::support::assert_contains(&argv, "--output-format stream-json --verbose");
}

#[test]
fn a_stream_without_a_result_is_malformed_in_json_mode() {
    let p = Project::new(&["a"]);
    p.fake(
        "response",
        concat!(
            "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"5b1c0e0a-1111-2222-3333-444444444444\"}\n",
            "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"Working on it\"}]}}\n",
        ),
    );
    let (_, err) = run(&p, 1, "", &[]);
    let f = p.events_of("agent_finished");
    assert_eq!(f[0]["outcome"], "crashed", "{err}");
    assert_eq!(f[0]["error_kind"], "malformed", "{err}");
}

#[test]
fn invalid_json_every_loop_while_changing_a_file_opens_the_breaker() {
    let p = Project::new(&["a", "b"]);
    p.git_init();
    p.fake("response", "{ invalid json here }\n")
        .fake("effect.sh", CHURN);
    let (o, err) = run(&p, 12, "", &[]);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("circuit_open"), "{err}");
    assert!(p.calls() <= 6, "{} calls: {err}", p.calls());
    assert!(
        kinds(&p).iter().all(|k| k == "malformed"),
        "{:?}",
        kinds(&p)
    );
    for e in p.events_of("agent_finished") {
        assert_eq!(e["outcome"], "crashed", "{e}");
    }
}

#[test]
fn a_stray_line_before_a_costly_result_is_charged_and_the_cap_binds() {
    let p = Project::new(&["a"]);
    let result = "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"done\",\"session_id\":\"5b1c0e0a-1111-2222-3333-444444444444\",\"total_cost_usd\":5}\n";
    p.fake("response-1", &format!("npm WARN stray line\n{result}"))
        .fake("response", &format!("ok{result}"));
    let (o, err) = run(&p, 5, "", &["--max-cost", "6"]);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("cost_budget"), "{err}");
    // $5 per call: the first call leaves $1 of the cap, the second reaches it; no third.
    assert_eq!(p.calls(), 2, "{err}");
    let state = p.state();
    let total = state["totals"]["cost_usd"].as_f64().unwrap_or(0.0);
    assert!((total - 10.0).abs() < 1e-9, "{state}");
    assert_eq!(kinds(&p), ["malformed", "malformed"], "{err}");
}

#[test]
fn error_results_that_tick_the_plan_are_productive_and_the_run_completes() {
    let items = ["a", "b", "c", "d", "e", "f"];
    let p = Project::new(&items);
    p.git_init();
    p.fake("response", ERROR_RESULT).fake("effect.sh", TICK_ONE);
    let (o, err) = run(&p, 10, "", &[]);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(p.calls(), 6, "{err}");
    crate::support::assert_contains(
        &err,
        "loop 5: the agent reported interrupted but checked a fix_plan item: counted as productive",
    );
    let state = p.state();
    assert_eq!(state["breaker"]["state"], "CLOSED", "{state}");
    assert_eq!(state["breaker"]["same_error_streak"], 0, "{state}");
}

#[test]
fn error_results_that_only_churn_files_still_open_the_breaker() {
    let p = Project::new(&["a", "b"]);
    p.git_init();
    p.fake("response", ERROR_RESULT).fake("effect.sh", CHURN);
    let (o, err) = run(&p, 10, "", &[]);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("same error in 5 consecutive loops"), "{err}");
}

#[test]
fn client_settings_project_passes_setting_sources() {
    let p = Project::new(&["a"]);
    p.hankrc("RETRY_BACKOFF_SECONDS=0\nMAX_LOOPS=1\nCLIENT_SETTINGS=project\n");
    let o = p.run(&["run"]);
    let argv = p.argv(1);
    let at = argv.iter().position(|a| a == "--setting-sources");
    assert!(at.is_some(), "{argv:?} {}", stderr(&o));
    assert_eq!(argv[at.unwrap_or(0) + 1], "project,local");
    // The default loads every source: no flag.
    let q = Project::new(&["a"]);
    q.hankrc("RETRY_BACKOFF_SECONDS=0\nMAX_LOOPS=1\n");
    q.run(&["run"]);
    assert!(!q.argv(1).iter().any(|a| a == "--setting-sources"));
    // A bad value names the key and what was expected.
    let r = Project::new(&["a"]);
    r.hankrc("CLIENT_SETTINGS=user\n");
    let o = r.run_code(&["run"], 1);
    let err = stderr(&o);
    assert!(
        err.contains("CLIENT_SETTINGS") && err.contains("project or all"),
        "{err}"
    );
    assert_eq!(r.calls(), 0);
}

/// Asserts that the text `check[field]` contains `text`.
fn assert_says(check: &Value, field: &str, text: &str) {
    let said = check[field].as_str().unwrap_or("");
    assert!(
        said.contains(text),
        "{field} does not say {text:?}: {check}"
    );
}

/// `hank doctor --json` in `p` with ANTHROPIC_BASE_URL at 127.0.0.1:`port`.
fn doctor_at(p: &Project, port: u16) -> Output {
    p.cmd()
        .args(["doctor", "--json"])
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .output()
        .unwrap()
}

/// The `hank doctor --json` check named `name`.
fn doctor_check(o: &Output, name: &str) -> Value {
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    v["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name).cloned())
        .unwrap_or(Value::Null)
}

#[test]
fn doctor_reports_the_api_from_the_clients_own_connectivity_check() {
    let p = Project::new(&["a"]);
    let o = p.run(&["doctor", "--json"]);
    let api = doctor_check(&o, "api");
    assert_eq!(api["ok"], true, "{api}");
    assert_says(&api, "detail", "answered HTTP 200");
    p.fake(
        "doctor",
        "Claude Code doctor\n\nAPI connectivity\n- API (custom host): failed after 14 ms: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)\n- ANTHROPIC_BASE_URL: set to a custom host\n\nRemote Control\n",
    );
    let o = p.run_code(&["doctor", "--json"], 1);
    let api = doctor_check(&o, "api");
    assert_eq!(api["ok"], false, "{api}");
    assert_says(&api, "detail", "ECONNREFUSED");
    assert_says(&api, "fix", "ANTHROPIC_BASE_URL");
    assert_eq!(p.calls(), 0, "doctor never calls the model");
}

#[test]
fn doctor_without_a_connectivity_check_makes_a_bounded_request_to_the_base_url() {
    use std::io::{Read, Write};
    let p = Project::new(&["a"]);
    // 2.1.197 has no connectivity section: hank asks the base URL itself (a fake on 127.0.0.1).
    p.fake("version", "2.1.197 (Claude Code)\n");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let mut buf = [0u8; 1024];
            let n = s.read(&mut buf).unwrap_or(0);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
            return String::from_utf8_lossy(&buf[..n]).into_owned();
        }
        String::new()
    });
    let o = doctor_at(&p, port);
    let request = server.join().unwrap();
    assert!(
        request.starts_with("HEAD /api/hello HTTP/1.1\r\n"),
        "{request}"
    );
    let api = doctor_check(&o, "api");
    assert_eq!(api["ok"], true, "{api}");
    assert_says(&api, "detail", "HTTP/1.1 200 OK");

    // Nothing listens: unreachable, with the fix.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let o = doctor_at(&p, port);
    assert_eq!(o.status.code(), Some(1));
    let api = doctor_check(&o, "api");
    assert_eq!(api["ok"], false, "{api}");
    assert_says(&api, "detail", "not reachable");
}

#[test]
fn doctor_warns_about_user_stop_hooks_and_plugins_and_names_client_settings() {
    let p = Project::new(&["a"]);
    crate::support::write_new(
        &p.home.join(".claude/settings.json"),
        r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"notify-send done"}]}]},"enabledPlugins":{"wedger@market":true,"off@market":false}}"#,
    );
    let o = p.run(&["doctor", "--json"]);
    assert_eq!(o.status.code(), Some(0), "a warning does not fail doctor");
    let s = doctor_check(&o, "settings");
    assert_eq!(s["ok"], true, "{s}");
    assert_eq!(s["warning"], true, "{s}");
    let detail = s["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains("Stop hooks") && detail.contains("wedger@market"),
        "{s}"
    );
    assert!(!detail.contains("off@market"), "{s}");
    assert_says(&s, "fix", "CLIENT_SETTINGS=project");
    let text = p.run(&["doctor"]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("warn settings"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
    // With CLIENT_SETTINGS=project the hooks are not loaded: said, not warned.
    p.hankrc("CLIENT_SETTINGS=project\n");
    let o = p.run(&["doctor", "--json"]);
    let s = doctor_check(&o, "settings");
    assert_eq!(s["warning"], false, "{s}");
    assert_says(&s, "detail", "not loaded");
}

#[test]
fn an_error_result_whose_loop_turned_the_failing_check_green_is_productive() {
    let p = Project::new(&["a", "b"]);
    p.git_init();
    // Loop 1 answers and leaves the check red; loop 2 fixes it but its result is an error.
    p.fake("response-2", ERROR_RESULT)
        .fake("effect-2.sh", "mkdir -p src && touch src/fixed\n");
    let (_, err) = run(
        &p,
        2,
        "VERIFY_COMMAND=\"test -f src/fixed\"\nVERIFY_EVERY_LOOP=true\n",
        &[],
    );
    assert_eq!(p.calls(), 2, "{err}");
    crate::support::assert_contains(
        &err,
        "loop 2: the agent reported interrupted but turned the failing check green: counted as productive",
    );
    let state = p.state();
    assert_eq!(state["breaker"]["failure_streak"], 0, "{state}");
    assert_eq!(state["breaker"]["same_error_streak"], 0, "{state}");
    assert!(
        !p.events()
            .iter()
            .any(|e| e["type"] == "waiting" && e["reason"] == "backoff")
    );
}
