//! The **real** GitHub Copilot CLI (`copilot --output-format json`, the prompt on stdin)
//! against the fake Anthropic Messages API (`fake_api.rs`), with the argv and the JSONPath
//! fields of the built-in profile `templates/agents/copilot.toml`.
//!
//! No network is used: Copilot's own model provider setting (BYOK) points it at the fake —
//! `COPILOT_PROVIDER_BASE_URL`, `COPILOT_PROVIDER_TYPE=anthropic`, `COPILOT_PROVIDER_API_KEY`,
//! `COPILOT_MODEL` — and `COPILOT_OFFLINE=true` keeps it off GitHub (no login, telemetry,
//! update check or GitHub MCP server). Copilot retries a 429 or a 5xx five times, waiting what
//! `retry-after` says: the error replies send 0.
//!
//! The direct cases check what the profile reads from its output (text, status block, session
//! id, turns, edits, commands, error kinds); the `hank_*` cases run `hank run --agent copilot`
//! with hank's built-in profile, one of them under `SANDBOX=landlock`. With
//! `HANK_CAPTURE_FIXTURES=DIR`, the direct cases write what the CLI printed to
//! `DIR/<scenario>.stdout|.stderr|.exit`.

use std::path::Path;
use std::time::Duration;

use hank::analysis::{Analysis, ErrorKind, Outcome};
use serde_json::{Value, json};

use crate::fake_api::{Anthropic, Reply, status_text};
use crate::harness::{self, Call, Direct, HankRun, PROMPT_ONE, PROMPT_TWO, events};
use crate::support::{self, Project};

type Case = fn();

/// Every Copilot case, by name.
pub(crate) const CASES: &[(&str, Case)] = cases![
    plain_answer_is_read_by_the_profile,
    resume_sends_the_earlier_conversation,
    edits_and_commands_run_without_approval,
    api_errors_are_classified,
    unknown_session_is_recognised,
    hank_resumes_the_session_in_the_next_loop,
    hank_sandboxed_edits_commit_and_complete_the_plan,
    hank_usage_limit_is_a_limit,
];

/// The model Copilot is told to use (any name: the fake answers every model).
const MODEL: &str = "claude-sonnet-4.5";
/// A fake API key (the fake never checks it; it is redacted in the request log).
const API_KEY: &str = "sk-ant-hank-fake-contract-key";
/// Copilot's retries of a 429 or a 5xx (1.0.102).
const RETRIES: usize = 5;

/// The environment Copilot needs here besides HOME and PATH: its own provider, offline.
fn copilot_env(base_url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("COPILOT_OFFLINE", "true".into()),
        ("COPILOT_PROVIDER_BASE_URL", base_url.into()),
        ("COPILOT_PROVIDER_TYPE", "anthropic".into()),
        ("COPILOT_PROVIDER_API_KEY", API_KEY.into()),
        ("COPILOT_MODEL", MODEL.into()),
        ("TZ", "UTC".into()),
    ]
}

type Setup = Direct<Anthropic>;

/// The fake API plays the script built from the project's path.
fn scripted(script: impl FnOnce(&Path) -> Vec<Reply>) -> Setup {
    Direct::new("copilot", "# demo\n", script)
}

fn setup(script: Vec<Reply>) -> Setup {
    scripted(|_| script)
}

impl Direct<Anthropic> {
    /// Runs the real CLI with the profile's argv (resuming `session`), `prompt` on stdin.
    fn call(&self, session: Option<&str>, prompt: &str) -> Call {
        self.run_argv(harness::argv(&self.profile, session, None, None), prompt)
    }

    fn run_argv(&self, argv: Vec<String>, prompt: &str) -> Call {
        let mut cmd = self.command(&argv);
        cmd.envs(copilot_env(&self.api.url()));
        self.run(cmd, argv, prompt, Duration::from_secs(180), false)
    }
}

/// The session id of the `result` event.
fn session_of(stdout: &str) -> String {
    harness::first_string(stdout, |e| e["type"] == "result", "sessionId")
}

/// The argv of every call: JSONL, every tool allowed, no ask_user, no self-update.
fn base() -> Vec<String> {
    [
        "--output-format",
        "json",
        "--allow-all-tools",
        "--no-ask-user",
        "--no-auto-update",
    ]
    .map(String::from)
    .to_vec()
}

/// One answer with a HANK_STATUS block: the profile finds the text, the status block, the
/// session id (a UUID) and one turn; the prompt reached the model as the newest user text.
fn plain_answer_is_read_by_the_profile() {
    let answer = status_text("IN_PROGRESS", false, "continue with the next item");
    let s = setup(vec![Reply::Text(answer.clone())]);
    let (call, ctx) = s.captured("plain", s.call(None, PROMPT_ONE));
    assert_eq!(call.code, Some(0), "{ctx}");
    assert_eq!(call.argv, base(), "{ctx}");
    let a = s.analyze(&call);
    harness::assert_status_answer(&a, &answer, "continue with the next item", &ctx);
    let id = session_of(&call.stdout);
    assert_eq!(id.len(), 36, "a UUID: {id}");
    assert_eq!(a.session_id.as_deref(), Some(id.as_str()));
    assert_eq!(a.num_turns, Some(1), "{a:#?}");
    // No tokens and no cost in Copilot's output (`usage` holds premium requests).
    assert_eq!(a.tokens.input, 0, "{a:#?}");
    assert!(!a.cost_reported, "{a:#?}");
    let result = events(&call.stdout)
        .into_iter()
        .find(|e| e["type"] == "result")
        .expect("a result event");
    assert_eq!(result["exitCode"], 0, "{ctx}");
    assert!(result["usage"]["premiumRequests"].is_number(), "{ctx}");
    let turns = s.api.turns();
    assert_eq!(turns.len(), 1, "{ctx}");
    assert_eq!(turns[0].body["model"], MODEL, "{ctx}");
    assert!(
        turns[0].last_user_text().contains(PROMPT_ONE.trim()),
        "{ctx}"
    );
    assert_eq!(turns[0].header("x-api-key"), Some("<redacted 29 bytes>"));
    let tools: Vec<String> = turns[0].body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    for tool in ["bash", "view", "edit", "create"] {
        assert!(tools.iter().any(|t| t == tool), "{tool}: {tools:?}");
    }
    // The session lives in COPILOT_HOME ($HOME/.copilot).
    assert!(
        s.home
            .join(".copilot/session-state")
            .join(&id)
            .join("events.jsonl")
            .is_file(),
        "{ctx}"
    );
}

/// `--resume <id>`: the same session id, and the second request carries the first call's
/// prompt and answer before the new prompt.
fn resume_sends_the_earlier_conversation() {
    let s = setup(vec![
        Reply::text("First answer: ALPHA handled."),
        Reply::Text(status_text("IN_PROGRESS", false, "go on with BETA")),
    ]);
    let first = s.call(None, PROMPT_ONE);
    assert_eq!(first.code, Some(0), "{}", s.context(&first));
    let id = session_of(&first.stdout);
    let (second, ctx) = s.captured("resume", s.call(Some(&id), PROMPT_TWO));
    s.assert_resumed(&second, &id, &ctx);
    assert_eq!(
        second.argv,
        [base(), vec!["--resume".into(), id.clone()]].concat(),
        "{ctx}"
    );
    let turns = s.api.turns();
    let body = turns[1].text();
    assert!(body.contains(PROMPT_ONE.trim()), "{ctx}");
    assert!(body.contains("First answer: ALPHA handled."), "{ctx}");
    assert!(
        turns[1].last_user_text().contains(PROMPT_TWO.trim()),
        "{ctx}"
    );
}

/// The model reads and edits README.md, makes a folder and a file and commits with a shell
/// command: Copilot does all of it with no approval prompt, and the profile counts the two
/// edits and reads the commands.
fn edits_and_commands_run_without_approval() {
    let s = scripted(|proj| {
        let readme = proj.join("README.md").display().to_string();
        let feature = proj.join("src/feature.txt").display().to_string();
        vec![
            Reply::tool("view", json!({"path": readme})),
            Reply::tool(
                "edit",
                json!({"path": readme, "old_str": "# demo", "new_str": "# demo\n\nEdited by the agent."}),
            ),
            Reply::tool(
                "bash",
                json!({"command": "mkdir -p src", "description": "Make src"}),
            ),
            Reply::tool(
                "create",
                json!({"path": feature, "file_text": "feature done\nsecond line\n"}),
            ),
            Reply::tool(
                "bash",
                json!({"command": "git add -A && git -c user.name=agent -c user.email=agent@example.invalid commit -q -m 'feat: feature' && git log --oneline -1", "description": "Commit the work"}),
            ),
            Reply::Text(status_text("IN_PROGRESS", false, "next item")),
        ]
    });
    let (call, ctx) = s.captured("edit", s.call(None, PROMPT_ONE));
    assert_eq!(call.code, Some(0), "{ctx}");
    assert_eq!(
        s.read("README.md"),
        "# demo\n\nEdited by the agent.\n",
        "{ctx}"
    );
    assert_eq!(
        s.read("src/feature.txt"),
        "feature done\nsecond line\n",
        "{ctx}"
    );
    assert_eq!(s.last_commit(), "feat: feature", "{ctx}");
    let a = s.analyze(&call);
    assert_eq!(a.outcome, Outcome::Success, "{ctx}");
    assert!(a.status.is_some(), "{a:#?}");
    assert_eq!(a.num_turns, Some(6), "{a:#?}");
    let done: Vec<(String, bool)> = events(&call.stdout)
        .iter()
        .filter(|e| e["type"] == "tool.execution_complete")
        .map(|e| {
            let id = e["data"]["toolCallId"].as_str().unwrap_or("").to_string();
            (id, e["data"]["success"] == true)
        })
        .collect();
    assert_eq!(done.len(), 5, "{ctx}");
    assert!(done.iter().all(|(_, ok)| *ok), "{done:?}\n{ctx}");
    // The commit's one-line log went back to the model.
    let turns = s.api.turns();
    assert!(turns[5].text().contains("feat: feature"), "{ctx}");
}

/// A failing call: what it printed, the analysis, the context and how many turns the fake
/// answered.
fn failing_call(name: &str, replies: Vec<Reply>) -> (Call, Analysis, String, usize) {
    let s = setup(replies);
    s.outcome(name, s.call(None, PROMPT_ONE))
}

/// `n` copies of `reply` (the first request and Copilot's retries).
fn times(n: usize, reply: &Reply) -> Vec<Reply> {
    vec![reply.clone(); n]
}

/// An API error with `retry-after: 0` (Copilot waits what it says between its retries).
fn api_error(status: u16, kind: &str, message: &str) -> Reply {
    match Reply::error(status, kind, message) {
        Reply::Error {
            status,
            kind,
            message,
            mut headers,
        } => {
            headers.push(("retry-after".into(), "0".into()));
            Reply::Error {
                status,
                kind,
                message,
                headers,
            }
        }
        other => other,
    }
}

/// The `session.error` event of a failed call.
fn session_error(stdout: &str) -> Value {
    events(stdout)
        .into_iter()
        .find(|e| e["type"] == "session.error")
        .expect("a session.error event")
}

/// Each API error ends the call with one `session.error` event (errorType, statusCode, the
/// message after Copilot's retries), a `result` with exitCode 1, and exit 1; the profile
/// classifies it: 429 → rate limit, 401 → auth (tried 3 times), 402 → billing (not retried),
/// 500 → server, 529 → overloaded, a 429 whose text says a usage limit → usage limit.
fn api_errors_are_classified() {
    let cases: Vec<(&str, Reply, usize, ErrorKind, &str)> = vec![
        (
            "rate_limit",
            api_error(
                429,
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            ),
            1 + RETRIES,
            ErrorKind::RateLimit,
            "rate_limit",
        ),
        (
            "auth",
            api_error(401, "authentication_error", "invalid x-api-key"),
            3,
            ErrorKind::Auth,
            "authentication",
        ),
        (
            "billing",
            api_error(402, "billing_error", "Your account has no payment method"),
            1,
            ErrorKind::Billing,
            "query",
        ),
        (
            "server_error",
            api_error(500, "api_error", "Internal server error"),
            1 + RETRIES,
            ErrorKind::Server,
            "query",
        ),
        (
            "overloaded",
            api_error(529, "overloaded_error", "Overloaded"),
            1 + RETRIES,
            ErrorKind::Overloaded,
            "query",
        ),
        (
            "usage_limit",
            api_error(
                429,
                "rate_limit_error",
                "You have reached your usage limit. Your limit resets in 2 hours.",
            ),
            1 + RETRIES,
            ErrorKind::UsageLimit,
            "rate_limit",
        ),
    ];
    for (name, reply, requests, kind, error_type) in cases {
        // More replies than Copilot asks for: the count of requests is Copilot's own.
        let (call, a, ctx, turns) = failing_call(name, times(requests + 2, &reply));
        assert_eq!(call.code, Some(1), "{name}: {ctx}");
        assert_eq!(turns, requests, "{name}: {ctx}");
        let e = session_error(&call.stdout);
        assert_eq!(e["data"]["errorType"], error_type, "{name}: {ctx}");
        assert_eq!(a.outcome, Outcome::AgentError, "{name}: {ctx}");
        assert_eq!(a.error_kind(), Some(kind), "{name}: {ctx}\n{a:#?}");
        assert!(
            a.session_id.is_some(),
            "{name}: the result names the session"
        );
        if kind == ErrorKind::UsageLimit {
            let reset = a.error.as_ref().and_then(|e| e.reset_at);
            let in_two_hours = jiff::Timestamp::now().as_second() + 7200;
            assert!(
                reset.is_some_and(|r| (r.as_second() - in_two_hours).abs() < 300),
                "the reset read from the message: {a:#?}"
            );
        }
    }
}

/// `--resume` with an id Copilot does not have: stderr names it, nothing on stdout, exit 1, no
/// request; hank's unknown session.
fn unknown_session_is_recognised() {
    let s = setup(vec![]);
    let (call, ctx) = s.captured(
        "unknown_session",
        s.call(Some("4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a"), PROMPT_TWO),
    );
    assert_eq!(call.code, Some(1), "{ctx}");
    assert!(call.stdout.trim().is_empty(), "{ctx}");
    assert!(
        call.stderr.contains("No session, task, or name matched"),
        "{ctx}"
    );
    assert!(s.api.requests().is_empty(), "{ctx}");
    assert!(s.analyze(&call).unknown_session, "{ctx}");
}

// ---- through hank ----------------------------------------------------------------------------

/// A hank project run with the real Copilot (COPILOT_CMD) and the fake API.
fn hank(items: &[&str], script: impl FnOnce(&Project) -> Vec<Reply>) -> HankRun<Anthropic> {
    let mut h = HankRun::new(items, script)
        .env("COPILOT_CMD", crate::agents::agent().path)
        .args(&["--agent", "copilot"]);
    let url = h.api.url();
    for (k, v) in copilot_env(&url) {
        h = h.env(k, v);
    }
    h
}

/// The tool calls that do one plan item: tick it in fix_plan.md, write `src/<item>.txt`.
fn work_on(p: &Project, item: &str, status: &str) -> Vec<Reply> {
    let plan = p.dir.join(".hank/fix_plan.md").display().to_string();
    let file = p.dir.join(format!("src/{item}.txt")).display().to_string();
    vec![
        Reply::tool("view", json!({"path": plan})),
        Reply::tool(
            "edit",
            json!({"path": plan, "old_str": format!("- [ ] {item}"), "new_str": format!("- [x] {item}")}),
        ),
        Reply::tool(
            "bash",
            json!({"command": "mkdir -p src", "description": "Make src"}),
        ),
        Reply::tool(
            "create",
            json!({"path": file, "file_text": format!("{item} done\n")}),
        ),
        Reply::Text(status_text(
            status,
            false,
            &format!("after {item}, continue"),
        )),
    ]
}

/// Two loops: the second resumes the first loop's session (`--resume <id>`), its request
/// carries loop 1's conversation and loop 2's own context; each loop's work is progress.
fn hank_resumes_the_session_in_the_next_loop() {
    let h = hank(&["one", "two", "three"], |p| {
        let mut s = work_on(p, "one", "IN_PROGRESS");
        s.extend(work_on(p, "two", "IN_PROGRESS"));
        s
    });
    let o = h.run(&["--max-loops", "2"]);
    let ctx = h.context(&o);
    h.assert_items_done(&["one", "two"], &ctx);
    assert_eq!(h.resumed(), [false, true], "{ctx}");
    let finished = h.finished();
    assert_eq!(
        finished[0]["session_id"], finished[1]["session_id"],
        "{ctx}"
    );
    let turns = h.api.turns();
    let loop2 = turns
        .iter()
        .find(|t| t.loop_context().is_some_and(|c| c.contains("Hank loop 2")))
        .unwrap_or_else(|| panic!("loop 2's first request: {ctx}"));
    assert!(
        loop2.text().contains("after one, continue"),
        "loop 2 carries loop 1's answer: {ctx}"
    );
}

/// SANDBOX=landlock with the real Copilot: two loops (the second resumes the first's session)
/// of `view`, `edit`, `bash` and `create`, and a shell `git add`/`git commit`, complete the
/// plan with Copilot confined to the project, its TMPDIR and its own folders (the profile's
/// `[sandbox] state`); its provider's host comes from COPILOT_PROVIDER_BASE_URL, so the egress
/// proxy lets the fake through with no SANDBOX_ALLOW_HOSTS.
fn hank_sandboxed_edits_commit_and_complete_the_plan() {
    let h = hank(&["one", "two"], |p| {
        let mut s = work_on(p, "one", "IN_PROGRESS");
        let answer = s.pop().expect("the answer");
        s.extend([
            Reply::tool(
                "bash",
                json!({"command": "git add -A && git commit -q -m 'feat: one'", "description": "Commit the work"}),
            ),
            answer,
        ]);
        s.extend(work_on(p, "two", "COMPLETE"));
        s
    })
    .sandboxed()
    .env("GIT_AUTHOR_NAME", "agent")
    .env("GIT_AUTHOR_EMAIL", "agent@example.com")
    .env("GIT_COMMITTER_NAME", "agent")
    .env("GIT_COMMITTER_EMAIL", "agent@example.com");
    let o = h.run(&["--max-loops", "3"]);
    let ctx = h.context(&o);
    assert_eq!(o.status.code(), Some(0), "{ctx}");
    assert_eq!(h.p.status()["exit_reason"], "plan_complete", "{ctx}");
    h.assert_items_done(&["one", "two"], &ctx);
    h.assert_confined(&[], &ctx);
    assert!(h.of_type("client_config_changed").is_empty(), "{ctx}");
    assert_eq!(h.resumed(), [false, true], "{ctx}");
    let log = support::git(&h.p.dir, &["log", "--format=%s"]);
    assert_eq!(log.lines().next(), Some("feat: one"), "{ctx}");
}

/// A usage-limit answer (a 429 whose text says the limit and when it resets, after Copilot's
/// retries): with `--on-usage-limit exit` hank stops with usage_limit, exit 3.
fn hank_usage_limit_is_a_limit() {
    let reply = api_error(
        429,
        "rate_limit_error",
        "You have reached your usage limit. Your limit resets in 2 hours.",
    );
    let h = hank(&["a"], |_| times(1 + RETRIES, &reply));
    let o = h.run(&["--on-usage-limit", "exit"]);
    let ctx = h.context(&o);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    let s = h.p.status();
    assert_eq!(s["exit_reason"], "usage_limit", "{s}\n{ctx}");
    assert_eq!(h.finished()[0]["error_kind"], "usage_limit", "{ctx}");
}
