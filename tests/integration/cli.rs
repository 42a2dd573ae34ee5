//! The command line outside the loop itself: parsing, exit codes, aliases, config errors,
//! dry-run, status, doctor, completions.

use crate::support::{Project, TICK_ONE, exits, hank_bin, result_json, stderr, stdout};

#[test]
fn help_and_version_exit_0_and_usage_errors_exit_1() {
    let p = Project::new(&["a"]);
    assert_eq!(p.run(&["--help"]).status.code(), Some(0));
    let v = p.run_code(&["--version"], 0);
    assert!(stdout(&v).starts_with("hank "));
    let bad = p.run(&["--no-such-flag"]);
    assert_eq!(
        bad.status.code(),
        Some(1),
        "clap's usage error must map to 1"
    );
    p.run_code(&["reset", "everything"], 1);
}

#[test]
fn alias_names_dispatch_to_subcommands() {
    let p = Project::new(&["a"]);
    let link = p.home.join("hank-monitor");
    std::os::unix::fs::symlink(hank_bin(), &link).unwrap();
    let o = std::process::Command::new(&link)
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("--once"), "{}", stdout(&o));
}

#[test]
fn invalid_hankrc_value_names_the_line() {
    let p = Project::new(&["a"]);
    p.hankrc("# comment\n\nMAX_CALLS_PER_HOUR=\"many\"\n");
    let err = stderr(&p.run_code(&["run"], 1));
    assert!(err.contains(".hankrc line 3"), "{err}");
    assert!(err.contains("MAX_CALLS_PER_HOUR"), "{err}");
    assert_eq!(p.calls(), 0);
}

#[test]
fn unknown_hankrc_key_is_an_error_with_a_suggestion() {
    let p = Project::new(&["a"]);
    p.hankrc("MAX_LOOP=3\n");
    let err = stderr(&p.run_code(&[], 1));
    assert!(err.contains("line 1: unknown key MAX_LOOP"), "{err}");
    assert!(err.contains("did you mean MAX_LOOPS?"), "{err}");
}

#[test]
fn invalid_flag_and_env_values_name_their_origin() {
    let p = Project::new(&["a"]);
    let o = p.run_code(&["-t", "soon"], 1);
    assert!(stderr(&o).contains("--timeout"), "{}", stderr(&o));
    let o = p.run_env(&[("MAX_LOOPS", "x")], &[]);
    crate::support::assert_contains(&exits(&o, 1), "environment variable MAX_LOOPS");
}

#[test]
fn missing_agent_is_a_clear_error_before_any_loop() {
    let p = Project::new(&["a"]);
    let err = stderr(&p.run_code(&["--claude-cmd", "no-such-claude-binary"], 1));
    crate::support::assert_contains(&err, "`no-such-claude-binary` not found on PATH");
    assert!(!p.dir.join(".hank/status.json").exists());
    let o = p.run_code(&["--claude-cmd", "./bin/claude"], 1);
    assert!(stderr(&o).contains("not found at"), "{}", stderr(&o));
}

#[test]
fn claude_cmd_may_be_a_path() {
    let p = Project::new(&["a"]);
    let fake = crate::support::fixtures().join("bin/claude");
    let o = p
        .cmd()
        .env("PATH", "/usr/bin:/bin")
        .env("CLAUDE_CODE_CMD", &fake)
        .args(["--max-loops", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.calls(), 1);
}

#[test]
fn not_a_project_and_flat_layout_get_hints() {
    let p = Project::new(&["a"]);
    let empty = p.home.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = p.cmd().current_dir(&empty).output().unwrap();
    crate::support::assert_contains(&exits(&o, 1), "hank enable");
    std::fs::write(empty.join("PROMPT.md"), "x").unwrap();
    std::fs::write(empty.join("@fix_plan.md"), "- [ ] a").unwrap();
    let o = p.cmd().current_dir(&empty).output().unwrap();
    crate::support::assert_contains(&exits(&o, 1), "hank migrate");
}

#[test]
fn dry_run_prints_the_command_and_prompt_and_calls_nothing() {
    let p = Project::new(&["first task"]);
    p.hankrc("CLAUDE_MODEL=\"opus\"\n");
    let o = p.run_code(&["--dry-run", "--calls", "7"], 0);
    let out = stdout(&o);
    // The stream is asked for whatever --live says (FIRST_OUTPUT_TIMEOUT, IDLE_TIMEOUT).
    crate::support::assert_contains(&out, "-p --output-format stream-json --verbose");
    assert!(out.contains("--model opus"), "{out}");
    assert!(out.contains("Do the next task."), "{out}");
    assert!(out.contains("MAX_CALLS_PER_HOUR"), "{out}");
    assert!(out.contains("flag --calls"), "{out}");
    assert!(out.contains(".hankrc line 1"), "{out}");
    assert_eq!(p.calls(), 0);
    assert!(!p.dir.join(".hank/state.json").exists());

    let o = p.run(&["--dry-run", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["args"][0], "-p");
    assert!(v["context_bytes"].as_u64().unwrap() <= 600);
}

/// `-v` prints, per loop, the agent argv (quoted for reading), the stdin sizes and a one-line
/// analysis; without it those lines are absent. `VERBOSE=2` counts as on; an unreadable
/// `VERBOSE` in the environment is a warning, not a refusal to start.
#[test]
fn verbose_prints_the_agent_command_and_the_analysis() {
    let p = Project::new(&["a", "b", "c", "d", "e"]);
    p.fake(
        "response",
        &result_json("IN_PROGRESS", "IMPLEMENTATION", false, "did a"),
    )
    .fake("effect.sh", TICK_ONE);
    let err = stderr(&p.run_code(&["--max-loops", "1", "-v"], 3));
    let line = |prefix: &str| {
        err.lines()
            .map(str::trim)
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{err}"))
            .to_string()
    };
    let quoted: Vec<String> = p
        .argv(1)
        .iter()
        .map(|a| hank::report::shell_quote(a))
        .collect();
    let agent = line("agent: ");
    assert!(
        agent.ends_with(&quoted.join(" ")),
        "{agent}\nargv: {quoted:?}"
    );
    crate::support::assert_contains(&agent, " -p --output-format stream-json --verbose");
    assert!(agent.contains(" '--allowedTools=Write,Read,"), "{agent}");
    let (context, prompt) = p.context_and_prompt(1);
    assert_eq!(
        line("stdin: "),
        format!(
            "stdin: loop context {} bytes + prompt {} bytes",
            context.len(),
            prompt.len()
        )
    );
    assert_eq!(
        line("analysis: "),
        "analysis: shape=result_object outcome=success error=- session=5b1c0e0a… cost=$0.0100 \
         tokens=120 denials=0 signatures=0"
    );

    let err = stderr(&p.run_code(&["--max-loops", "1"], 3));
    assert!(
        !err.contains("agent: ") && !err.contains("stdin: loop context"),
        "{err}"
    );
    assert!(!err.contains("analysis: "), "{err}");

    let o = p.run_env(&[("VERBOSE", "2")], &["--max-loops", "1"]);
    crate::support::assert_contains(&exits(&o, 3), "analysis: shape=");

    let o = p.run_env(&[("VERBOSE", "debug")], &["--max-loops", "1"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    crate::support::assert_contains(&err, "environment variable VERBOSE=`debug` ignored");
    assert!(!err.contains("analysis: "), "{err}");
}

#[test]
fn status_before_and_after_a_run() {
    let p = Project::new(&["a"]);
    let o = p.run_code(&["status"], 0);
    assert!(stdout(&o).contains("no status yet"));
    assert_eq!(p.run(&["--max-loops", "1"]).status.code(), Some(3));
    let o = p.run(&["status"]);
    assert!(stdout(&o).contains("max_loops"), "{}", stdout(&o));
    let o = p.run(&["--status"]);
    assert!(stdout(&o).contains("state:"), "{}", stdout(&o));
    let o = p.run(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["exit_reason"], "max_loops");
}

#[test]
fn doctor_reports_checks_and_sources() {
    let p = Project::new(&["a"]);
    let o = p.run(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(0), "{v}");
    let claude = crate::support::doctor_check(&v, "claude");
    let detail = claude["detail"].as_str().unwrap();
    assert!(
        detail.contains("2.1.332") && detail.contains("inside the tested range"),
        "{detail}"
    );
    assert!(
        v["settings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["key"] == "RETRY_BACKOFF_SECONDS" && s["source"] == ".hankrc line 2")
    );
}

/// The client's version against the tested range: doctor says where it stands; `hank run`
/// refuses a client older than the oldest tested one (exit 1, the upgrade command, no call),
/// runs a newer one with a warning, and removes CLAUDE_CODE_RETRY_WATCHDOG from the agent's
/// environment with a warning.
#[test]
fn client_version_range_and_environment() {
    let p = Project::new(&["a", "b"]);
    let claude_check = |p: &Project| {
        let o = p.run(&["doctor", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let c = crate::support::doctor_check(&v, "claude");
        (o.status.code(), c)
    };

    p.fake("version", "2.0.77 (Claude Code)\n");
    let (code, c) = claude_check(&p);
    assert_eq!(code, Some(1), "{c}");
    assert_eq!(c["ok"], false);
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains("older than the oldest supported"),
        "{c}"
    );
    let err = stderr(&p.run_code(&["--max-loops", "1"], 1));
    assert!(err.contains("2.0.77") && err.contains("2.1.197"), "{err}");
    crate::support::assert_contains(&err, "npm install -g @anthropic-ai/claude-code@latest");
    assert_eq!(p.calls(), 0);

    p.fake("version", "9.0.1 (Claude Code)\n");
    let (code, c) = claude_check(&p);
    assert_eq!(code, Some(0), "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains("newer than the newest tested"),
        "{c}"
    );

    p.fake(
        "effect.sh",
        "env > \"$FAKE_CLAUDE_DIR/env-$(cat \"$FAKE_CLAUDE_DIR/calls\")\"\n",
    );
    let o = p.run_env(
        &[("CLAUDE_CODE_RETRY_WATCHDOG", "1")],
        &["--max-loops", "1"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    crate::support::assert_contains(&err, "newer than the newest tested release");
    crate::support::assert_contains(&err, "CLAUDE_CODE_RETRY_WATCHDOG is set: removed");
    let env = std::fs::read_to_string(p.fake.join("env-1")).unwrap();
    assert!(
        env.contains("FAKE_CLAUDE_DIR="),
        "the agent inherits the rest: {env}"
    );
    assert!(!env.contains("CLAUDE_CODE_RETRY_WATCHDOG"), "{env}");
    let warnings = p.events_of("warning");
    assert_eq!(warnings.len(), 2, "{warnings:?}");
}

/// A login that expires within 12 hours (`credential_expires_at` in the answer) gives one
/// warning, not one per loop (the 12-hour rule itself is a table test in `decide`).
#[test]
fn credential_expiring_overnight_is_warned_once() {
    let p = Project::new(&["a", "b"]);
    let soon = jiff::Timestamp::now().as_second() + 3 * 3600;
    let answer = |expires: i64, n: u32| {
        serde_json::json!({
            "type": "result", "subtype": "success", "is_error": false, "num_turns": 1,
            "result": "step\n---HANK_STATUS---\nSTATUS: IN_PROGRESS\nEXIT_SIGNAL: false\n---END_HANK_STATUS---",
            "session_id": format!("5b1c0e0a-1111-2222-3333-44444444444{n}"), "total_cost_usd": 0.01,
            "credential_expires_at": expires
        })
        .to_string()
    };
    p.fake("response-1", &answer(soon, 1));
    p.fake("response-2", &answer(soon, 2));
    let err = stderr(&p.run_code(&["--max-loops", "2"], 3));
    assert_eq!(
        err.matches("the client's login expires at").count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("in 2h59m") || err.contains("in 3h00m"),
        "{err}"
    );
}

#[test]
fn completions_for_bash() {
    let p = Project::new(&["a"]);
    let o = p.run_code(&["completions", "bash"], 0);
    assert!(stdout(&o).contains("_hank"));
}

#[test]
fn reset_circuit_and_session() {
    let p = Project::new(&["a"]);
    assert_eq!(p.run(&["--max-loops", "1"]).status.code(), Some(3));
    assert!(p.state()["session"].is_object());
    assert_eq!(p.run(&["reset", "session"]).status.code(), Some(0));
    assert!(p.state()["session"].is_null());
    assert_eq!(p.run(&["--reset-circuit"]).status.code(), Some(0));
    assert_eq!(p.state()["breaker"]["state"], "CLOSED");
    let o = p.run(&["circuit", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["state"], "CLOSED");
}

#[test]
fn enable_ci_json_reports_usage_errors_as_json() {
    let p = Project::new(&["a"]);
    let o = p.run_code(&["enable-ci", "--json", "--from", "bogus"], 1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["success"], false);
    assert_eq!(v["code"], 1);
    assert!(v["message"].as_str().unwrap().contains("bogus"));
}
