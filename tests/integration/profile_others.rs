//! The four agent profiles of issue 50: Copilot CLI and Aider read against what the real
//! clients printed (`fixtures/agents/copilot/`, captured by the contract suite against the
//! fake Anthropic API), and goose and Cursor Agent — whose real clients could not be installed
//! here — driven through their stand-ins (`fixtures/bin/goose`, `fixtures/bin/cursor-agent`),
//! which print the output their public documentation describes. `hank agents` says which is
//! which.

use hank::agent::profile::{CallInput, PromptDelivery};
use hank::analysis::{ErrorKind, Outcome};
use hank::settings::OutputFormat;

use crate::support::{
    Project, TICK_ONE, analyze_captured, analyze_captured_error, builtin_profile,
    fake_agent_completes_the_plan, lines_of, stderr,
};

/// Copilot's captured answers: text, status block, session id (a UUID) and turns; its
/// captured errors each of the kind the contract suite saw.
#[test]
fn copilot_profile_reads_the_captured_answers() {
    let p = builtin_profile("copilot");
    for (name, turns) in [("plain", 1), ("resume", 1), ("edit", 6)] {
        let a = analyze_captured(&p, name);
        assert_eq!(a.outcome, Outcome::Success, "{name}: {a:?}");
        assert_eq!(a.session_id.as_deref().map(str::len), Some(36), "{name}");
        assert_eq!(a.num_turns, Some(turns), "{name}: {a:?}");
        assert!(a.status.is_some(), "{name}: {a:?}");
        assert!(!a.cost_reported, "{name}: Copilot reports no cost");
    }
    for (name, kind) in [
        ("rate_limit", ErrorKind::RateLimit),
        ("auth", ErrorKind::Auth),
        ("billing", ErrorKind::Billing),
        ("server_error", ErrorKind::Server),
        ("overloaded", ErrorKind::Overloaded),
        ("usage_limit", ErrorKind::UsageLimit),
    ] {
        let a = analyze_captured_error(&p, name, kind);
        assert!(
            a.session_id.is_some(),
            "{name}: the result names the session"
        );
    }
    let a = analyze_captured(&p, "usage_limit");
    let reset = a.error.and_then(|e| e.reset_at).map(|t| t.to_string());
    assert_eq!(
        reset.as_deref(),
        Some("2026-11-24T04:00:00Z"),
        "\"resets in 2 hours\" at the fixture's clock"
    );
    assert!(analyze_captured(&p, "unknown_session").unknown_session);
}

/// The argv of the four profiles, as their docs say: Copilot and Cursor resume by id, Aider
/// reads a message file, goose reads stdin; none takes hank's tool list.
#[test]
fn the_new_profiles_argv() {
    let file = "/tmp/p.md";
    let input = |session| CallInput {
        live: false,
        output_format: OutputFormat::Json,
        session,
        model: Some("m1"),
        permission_mode: None,
        allowed_tools: &[],
        prompt: Some("do it"),
        prompt_file: Some(file),
    };
    let id = "4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a";
    let copilot = builtin_profile("copilot");
    assert_eq!(
        copilot.argv(&input(Some(id))),
        [
            "--output-format",
            "json",
            "--allow-all-tools",
            "--no-ask-user",
            "--no-auto-update",
            "--resume",
            id,
            "--model",
            "m1"
        ]
    );
    assert_eq!(copilot.prompt, PromptDelivery::Stdin);
    let plan = CallInput {
        permission_mode: Some("plan"),
        ..input(None)
    };
    assert!(copilot.argv(&plan).contains(&"--plan".to_owned()));
    let aider = builtin_profile("aider");
    let argv = aider.argv(&input(Some(id)));
    assert!(!aider.resume && !argv.contains(&id.to_owned()), "{argv:?}");
    assert_eq!(
        argv[argv.len() - 4..],
        ["--model", "m1", "--message-file", file]
    );
    assert_eq!(aider.prompt, PromptDelivery::File);
    let goose = builtin_profile("goose");
    assert_eq!(
        goose.argv(&input(None)),
        [
            "run",
            "--no-session",
            "--output-format",
            "json",
            "--model",
            "m1",
            "-i",
            "-"
        ]
    );
    assert_eq!(
        goose.env.get("GOOSE_MODE").map(String::as_str),
        Some("auto")
    );
    let cursor = builtin_profile("cursor");
    assert_eq!(
        cursor.argv(&input(Some(id))),
        [
            "-p",
            "--output-format",
            "stream-json",
            "--force",
            "--resume",
            id,
            "--model",
            "m1",
            "do it"
        ]
    );
    for p in [copilot, aider, goose, cursor] {
        assert!(!p.allowed_tools, "{}", p.name);
    }
}

/// `hank --agent goose` with the stand-in: the instructions on stdin, two fresh loops complete
/// the plan, the last assistant text (with its status block) is the answer.
#[test]
fn hank_drives_the_goose_stand_in() {
    let (_p, fake, finished) = fake_agent_completes_the_plan("goose");
    for n in 1..=2 {
        assert_eq!(
            lines_of(&fake.join(format!("argv-{n}"))),
            ["run", "--no-session", "--output-format", "json", "-i", "-"]
        );
    }
    for f in &finished {
        assert!(f["session_id"].is_null(), "goose names no session: {f}");
        assert!(f["files_changed"].as_u64().unwrap_or(0) >= 1, "{f}");
    }
}

/// The goose stand-in failing with a rate limit on stderr (exit 1): hank's rule reads it.
#[test]
fn goose_failure_on_stderr_is_classified() {
    let p = Project::new(&["a"]);
    let fake = p.fake_agent_dir("goose");
    std::fs::write(fake.join("response"), "").expect("write");
    std::fs::write(
        fake.join("stderr"),
        "Error: Rate limit exceeded: 429 Too Many Requests\n",
    )
    .expect("write");
    std::fs::write(fake.join("exit"), "1").expect("write");
    p.hankrc("RETRY_BACKOFF_SECONDS=1\n");
    let o = p.run_fake_agent("goose", &["--max-loops", "1"]);
    assert_eq!(
        p.status()["last_loop"]["error_kind"],
        "rate_limit",
        "{}",
        stderr(&o)
    );
}

/// `hank --agent cursor` with the stand-in: the prompt as the last argument, loop 2 resumes the
/// session the stand-in named, the work counts as progress.
#[test]
fn hank_drives_the_cursor_stand_in() {
    let p = Project::new(&["a", "b"]);
    let fake = p.fake_agent_dir("cursor");
    std::fs::write(fake.join("effect.sh"), TICK_ONE).expect("write");
    let o = p.run_fake_agent("cursor", &["--max-loops", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "plan_complete", "{}", stderr(&o));
    let first = lines_of(&fake.join("argv-1"));
    assert_eq!(
        first[..4],
        ["-p", "--output-format", "stream-json", "--force"]
    );
    assert!(
        first.iter().any(|a| a.contains("<hank-loop-context>")),
        "{first:?}"
    );
    let second = lines_of(&fake.join("argv-2"));
    let session = "c0ffee00-1234-4abc-8def-000000000001";
    assert_eq!(second[4..6], ["--resume", session]);
    for f in p.agent_finished() {
        assert_eq!(f["outcome"], "success", "{f}");
        assert_eq!(f["session_id"], session, "{f}");
    }
}

/// The Cursor stand-in failing the documented way (exit 1, the message on stderr, no
/// `result`): a usage limit is read as one.
#[test]
fn cursor_usage_limit_on_stderr_is_a_limit() {
    let p = Project::new(&["a"]);
    let fake = p.fake_agent_dir("cursor");
    std::fs::write(fake.join("response"), "").expect("write");
    std::fs::write(
        fake.join("stderr"),
        "Error: You've hit your usage limit. Try again in 3 hours.\n",
    )
    .expect("write");
    std::fs::write(fake.join("exit"), "1").expect("write");
    let o = p.run_fake_agent("cursor", &["--on-usage-limit", "exit"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "usage_limit", "{}", stderr(&o));
}

/// `hank agents` lists the eight built-in profiles, each with how it was tested: the four
/// without a real client here say so.
#[test]
fn hank_agents_lists_eight_profiles_and_how_each_was_tested() {
    let p = Project::new(&["a"]);
    let o = p.run(&["agents", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let agents = v["agents"].as_array().expect("agents");
    let names: Vec<&str> = agents.iter().filter_map(|a| a["name"].as_str()).collect();
    for name in [
        "claude", "codex", "gemini", "opencode", "copilot", "aider", "goose", "cursor",
    ] {
        assert!(names.contains(&name), "{name}: {names:?}");
    }
    for a in agents {
        let tested = a["tested"].as_str().unwrap_or_default();
        match a["name"].as_str() {
            Some("goose" | "cursor") => {
                assert!(
                    tested.starts_with("NOT tested against the real client"),
                    "{a}"
                );
            }
            _ => assert!(tested.starts_with("contract suite"), "{a}"),
        }
    }
    let text = p.run(&["agents"]);
    assert!(
        String::from_utf8_lossy(&text.stdout)
            .contains("tested:   NOT tested against the real client"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
}

/// Aider's captured answers (plain text, exit 0 every time): the answers are successes with
/// their status block; the API errors it printed last are read by the profile's `end` rules.
#[test]
fn aider_profile_reads_the_captured_answers() {
    let p = builtin_profile("aider");
    for name in ["plain", "edit"] {
        let a = analyze_captured(&p, name);
        assert_eq!(a.outcome, Outcome::Success, "{name}: {a:?}");
        assert!(a.status.is_some(), "{name}: {a:?}");
        assert_eq!(a.session_id, None, "{name}");
    }
    analyze_captured_error(&p, "auth", ErrorKind::Auth);
    let a = analyze_captured_error(&p, "usage_limit", ErrorKind::UsageLimit);
    assert!(
        a.error.is_some_and(|e| e.message.starts_with("litellm.")),
        "the error line"
    );
}

/// Failover across the new profiles as across the others: goose (its stand-in) answers a usage
/// limit, the next loop goes to Cursor Agent (its stand-in), which completes the plan.
#[test]
fn a_limited_goose_fails_over_to_cursor() {
    let p = Project::new(&["a", "b"]);
    let goose = p.fake_agent_dir("goose");
    std::fs::write(goose.join("response"), "").expect("write");
    std::fs::write(
        goose.join("stderr"),
        "Error: usage limit reached for this provider, try again in 3 hours\n",
    )
    .expect("write");
    std::fs::write(goose.join("exit"), "1").expect("write");
    let cursor = p.fake_agent_dir("cursor");
    std::fs::write(cursor.join("effect.sh"), TICK_ONE).expect("write");
    let o = p.run_env(
        &[("FAKE_GOOSE_DIR", &goose), ("FAKE_CURSOR_DIR", &cursor)],
        &["--agents", "goose,cursor", "--max-loops", "3"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "plan_complete", "{}", stderr(&o));
    let switched = p.events_of("agent_switched");
    assert_eq!(switched.len(), 1, "{}", stderr(&o));
    assert_eq!(switched[0]["to"], "cursor", "{}", switched[0]);
    let finished = p.agent_finished();
    assert_eq!(finished[0]["agent"], "goose");
    assert_eq!(finished[0]["error_kind"], "usage_limit");
    assert!(
        finished[1..].iter().all(|f| f["agent"] == "cursor"),
        "{finished:?}"
    );
}
