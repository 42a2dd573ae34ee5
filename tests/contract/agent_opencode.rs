//! The **real** opencode CLI (`opencode run --format json`) against the fake Chat Completions
//! API (`fake_openai_chat.rs`), with the argv and the JSONPath fields of the built-in profile
//! `templates/agents/opencode.toml`.
//!
//! No network is used: `HOME` is a temp dir whose `.config/opencode/opencode.json` defines a
//! provider `hank-fake` (opencode's bundled `@ai-sdk/openai-compatible` package, `baseURL` = the
//! fake, the key from `{env:HANK_FAKE_API_KEY}`), `OPENCODE_DISABLE_MODELS_FETCH=1` keeps it
//! from fetching the models.dev catalogue, and `npm_config_offline=true` keeps the background
//! install of its plugin package (`@opencode-ai/plugin` into the config folder) off the npm
//! registry. opencode retries a failed request 5 times and waits what `retry-after-ms` says in
//! between: the error replies send 20 ms.
//!
//! The cases that call the CLI directly check what the profile reads from its output (text,
//! status block, session id, tokens, cost, edits, commands, error kinds); the `hank_*` cases
//! run `hank run --agent opencode` with hank's built-in profile. With `HANK_CAPTURE_FIXTURES=DIR`, the direct cases write what the CLI printed to
//! `DIR/<scenario>.stdout|.stderr|.exit` (how `fixtures/agents/opencode/` was made; the
//! integration test `profile_opencode.rs` reads them with the profile).

use std::path::Path;
use std::time::Duration;

use hank::analysis::{Analysis, ErrorKind, Outcome};
use serde_json::{Value, json};

use crate::fake_openai::{CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, Reply};
use crate::fake_openai_chat::OpenAiChat;
use crate::harness::{self, Call, Direct, HankRun, PROMPT_ONE, PROMPT_TWO, events};
use crate::http::Fake;
use crate::http::status_text;
use crate::support::{self, Project};

type Case = fn();

/// Every opencode case, by name.
pub(crate) const CASES: &[(&str, Case)] = cases![
    plain_answer_is_read_by_the_profile,
    resume_sends_the_earlier_conversation,
    edits_and_commands_run_without_approval,
    quota_is_a_spend_limit,
    rate_limit_is_classified,
    auth_and_server_errors_are_classified,
    unknown_session_is_recognised,
    unknown_model_is_fatal,
    bad_flag_is_a_usage_error,
    ask_rules_are_rejected_unless_bypass_permissions,
    hank_reads_a_plain_answer,
    hank_resumes_the_session_in_the_next_loop,
    hank_counts_the_agents_edit_as_progress,
    hank_sandboxed_edits_commit_and_complete_the_plan,
    hank_stops_on_quota_with_spend_limit,
    hank_backs_off_after_a_rate_limit,
    hank_review_with_the_plan_agent_is_read,
];

/// The model the fake provider offers, as opencode names it (`provider/model`).
const MODEL: &str = "hank-fake/fake-model";
/// A fake API key (the fake never checks it; it is redacted in the request log).
const API_KEY: &str = "sk-hank-fake-contract-key";
/// What opencode waits between its retries when the fake says so (`retry-after-ms`).
const RETRY_AFTER_MS: &str = "20";
/// opencode's retries of a failed request (fixed in 1.18.33: `RETRY_MAX_RETRIES`).
const RETRIES: usize = 5;

/// `$HOME/.config/opencode/opencode.json`: a provider `hank-fake` on the fake API, its one
/// model with a price (so opencode reports a cost), no update check, no sharing.
fn opencode_config(base_url: &str) -> String {
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": false,
        "share": "disabled",
        "model": MODEL,
        "small_model": MODEL,
        "provider": {
            "hank-fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "hank contract fake",
                "options": {"baseURL": base_url, "apiKey": "{env:HANK_FAKE_API_KEY}"},
                "models": {
                    "fake-model": {
                        "name": "Fake model",
                        "tool_call": true,
                        "limit": {"context": 200_000, "output": 8192},
                        "cost": {"input": 3, "output": 15, "cache_read": 0.3}
                    }
                }
            }
        }
    });
    serde_json::to_string_pretty(&config).expect("config JSON")
}

/// The cost opencode computes for one request of the fake (per-million prices above).
fn cost_of_one_request() -> f64 {
    let uncached = (INPUT_TOKENS - CACHED_TOKENS) as f64;
    (uncached * 3.0 + OUTPUT_TOKENS as f64 * 15.0 + CACHED_TOKENS as f64 * 0.3) / 1e6
}

/// The environment opencode needs here besides HOME and PATH.
fn opencode_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("HANK_FAKE_API_KEY", API_KEY),
        ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
        ("npm_config_offline", "true"),
        ("TZ", "UTC"),
    ]
}

fn write_config(home: &Path, api: &Fake<OpenAiChat>) {
    let dir = home.join(".config/opencode");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("opencode.json"), opencode_config(&api.url())).expect("write");
}

/// A temp HOME with the opencode config, a git project, and the fake API.
type Setup = Direct<OpenAiChat>;

/// The fake API plays the script built from the project's path.
fn scripted(script: impl FnOnce(&Path) -> Vec<Reply>) -> Setup {
    let s = Direct::new("opencode", "# demo\n", script);
    write_config(&s.home, &s.api);
    s
}

fn setup(script: Vec<Reply>) -> Setup {
    scripted(|_| script)
}

impl Direct<OpenAiChat> {
    /// Runs the real CLI with the profile's argv (resuming `session`, with `model` when set),
    /// `prompt` on stdin, in the project.
    fn call(&self, session: Option<&str>, model: Option<&str>, prompt: &str) -> Call {
        self.call_in_mode(session, model, None, prompt)
    }

    /// [`Direct::call`] with hank's PERMISSION_MODE `mode`.
    fn call_in_mode(
        &self,
        session: Option<&str>,
        model: Option<&str>,
        mode: Option<&str>,
        prompt: &str,
    ) -> Call {
        self.run_argv(harness::argv(&self.profile, session, model, mode), prompt)
    }

    /// Runs the real CLI with `argv`, `prompt` on stdin, in the project.
    fn run_argv(&self, argv: Vec<String>, prompt: &str) -> Call {
        let mut cmd = self.command(&argv);
        cmd.envs(opencode_env());
        self.run(cmd, argv, prompt, Duration::from_secs(180), false)
    }
}

/// The session id of the first event.
fn session_of(stdout: &str) -> String {
    harness::first_string(stdout, |_| true, "sessionID")
}

/// One answer with a HANK_STATUS block: the profile finds the text, the status block, the
/// session id, the tokens and the cost; the argv is `run --format json --title "" --model M`
/// with the prompt on stdin, and the new session asks the model for no title.
fn plain_answer_is_read_by_the_profile() {
    let answer = status_text("IN_PROGRESS", false, "continue with the next item");
    let s = setup(vec![Reply::Text(answer.clone())]);
    let (call, ctx) = s.captured("plain", s.call(None, Some(MODEL), PROMPT_ONE));
    assert_eq!(call.code, Some(0), "{ctx}");
    assert_eq!(
        call.argv,
        ["run", "--format", "json", "--title", "", "--model", MODEL],
        "{ctx}"
    );
    let a = s.analyze(&call);
    harness::assert_status_answer(&a, &answer, "continue with the next item", &ctx);
    let id = session_of(&call.stdout);
    assert!(id.starts_with("ses_"), "{id}");
    assert_eq!(a.session_id.as_deref(), Some(id.as_str()));
    assert_eq!(a.tokens.input, INPUT_TOKENS - CACHED_TOKENS, "{a:#?}");
    assert_eq!(a.tokens.output, OUTPUT_TOKENS, "{a:#?}");
    assert_eq!(a.tokens.cache_read, CACHED_TOKENS, "{a:#?}");
    assert_eq!(a.tokens.cache_creation, 0, "{a:#?}");
    assert_eq!(a.num_turns, Some(1), "{a:#?}");
    assert!(
        (a.cost_usd - cost_of_one_request()).abs() < 1e-9,
        "cost {} vs {}",
        a.cost_usd,
        cost_of_one_request()
    );
    // One request: the turn (no title request), with the prompt as the newest user message.
    let requests = s.api.requests();
    assert_eq!(requests.len(), 1, "{ctx}");
    let turn = &requests[0];
    assert!(turn.is_turn(), "{ctx}");
    assert_eq!(turn.body["model"], "fake-model", "{ctx}");
    assert_eq!(turn.body["stream"], true, "{ctx}");
    assert_eq!(turn.last_user_text(), PROMPT_ONE, "{ctx}");
    assert_eq!(turn.header("authorization"), Some("<redacted 32 bytes>"));
    assert_eq!(turn.header("x-session-id"), Some(id.as_str()), "{ctx}");
    for tool in ["bash", "edit", "read", "write"] {
        assert!(turn.tool_names().iter().any(|t| t == tool), "{ctx}");
    }
    // The session lives in opencode's database under XDG_DATA_HOME ($HOME/.local/share).
    assert!(
        s.home.join(".local/share/opencode/opencode.db").is_file(),
        "{ctx}"
    );
}

/// `--session <id>`: the same session id, and the second request carries the first call's
/// prompt and answer before the new prompt. Usage is per call (the resumed call reports its
/// own request only).
fn resume_sends_the_earlier_conversation() {
    let s = setup(vec![
        Reply::text("First answer: ALPHA handled."),
        Reply::Text(status_text("IN_PROGRESS", false, "go on with BETA")),
    ]);
    let first = s.call(None, None, PROMPT_ONE);
    assert_eq!(first.code, Some(0), "{}", s.context(&first));
    let id = session_of(&first.stdout);
    let (second, ctx) = s.captured("resume", s.call(Some(&id), None, PROMPT_TWO));
    let a = s.assert_resumed(&second, &id, &ctx);
    assert_eq!(
        second.argv,
        ["run", "--format", "json", "--session", id.as_str()],
        "{ctx}"
    );
    let turns = s.api.turns();
    assert_eq!(turns[1].message_texts("user"), [PROMPT_ONE, PROMPT_TWO]);
    assert_eq!(
        turns[1].message_texts("assistant"),
        ["First answer: ALPHA handled."],
        "{ctx}"
    );
    assert_eq!(turns[1].last_user_text(), PROMPT_TWO, "{ctx}");
    assert_eq!(turns[1].header("x-session-id"), Some(id.as_str()), "{ctx}");
    assert_eq!(a.tokens.input, INPUT_TOKENS - CACHED_TOKENS, "{a:#?}");
}

/// The model reads and edits README.md, writes a new file and commits with a shell command:
/// opencode does all of it with no approval prompt, and the profile counts two edits and
/// reads the command.
fn edits_and_commands_run_without_approval() {
    let s = scripted(|proj| {
        let readme = proj.join("README.md").display().to_string();
        let feature = proj.join("src/feature.txt").display().to_string();
        vec![
            Reply::tool("read", json!({"filePath": readme})),
            Reply::tool(
                "edit",
                json!({"filePath": readme, "oldString": "# demo", "newString": "# demo\n\nEdited by the agent."}),
            ),
            Reply::tool(
                "write",
                json!({"filePath": feature, "content": "feature done\nsecond line\n"}),
            ),
            Reply::tool(
                "bash",
                json!({"command": "git add -A && git -c user.name=agent -c user.email=agent@example.invalid commit -q -m 'feat: feature' && git log --oneline -1", "description": "Commit the work"}),
            ),
            Reply::Text(status_text("IN_PROGRESS", false, "next item")),
        ]
    });
    let (call, ctx) = s.captured("edit", s.call(None, None, PROMPT_ONE));
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
    assert!(!call.stderr.contains("permission requested"), "{ctx}");
    let a = s.analyze(&call);
    assert_eq!(a.outcome, Outcome::Success, "{ctx}");
    assert!(a.status.is_some(), "{a:#?}");
    assert_eq!(a.num_turns, Some(5), "{a:#?}");
    assert_eq!(a.tokens.input, 5 * (INPUT_TOKENS - CACHED_TOKENS), "{a:#?}");
    let tools: Vec<(String, String)> = events(&call.stdout)
        .iter()
        .filter(|e| e["type"] == "tool_use")
        .map(|e| {
            (
                e["part"]["tool"].as_str().unwrap_or("").to_string(),
                e["part"]["state"]["status"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    let completed = |t: &str| (t.to_string(), "completed".to_string());
    assert_eq!(
        tools,
        [
            completed("read"),
            completed("edit"),
            completed("write"),
            completed("bash")
        ],
        "{ctx}"
    );
    // What opencode sent back for the tool calls (the commit's one-line log among them).
    let turns = s.api.turns();
    assert_eq!(turns.len(), 5, "{ctx}");
    let results = turns[4].tool_results();
    assert_eq!(results.len(), 4, "{results:#?}");
    assert!(
        results.iter().any(|r| r.contains("feat: feature")),
        "{results:#?}"
    );
}

/// One failing call: what it printed, the analysis, the context and how many turns the fake
/// answered.
fn failing_call(name: &str, replies: Vec<Reply>) -> (Call, Analysis, String, usize) {
    let s = setup(replies);
    s.outcome(name, s.call(None, None, PROMPT_ONE))
}

/// `n` copies of `reply` (the first request and opencode's retries).
fn times(n: usize, reply: &Reply) -> Vec<Reply> {
    vec![reply.clone(); n]
}

/// The `error` event of a failed call.
fn error_event(stdout: &str) -> Value {
    events(stdout)
        .into_iter()
        .find(|e| e["type"] == "error")
        .expect("an error event")
}

/// 429 `insufficient_quota`: opencode retries it 5 times like any 429, then prints one
/// `error` event and exits 1; the profile calls it a spend limit.
fn quota_is_a_spend_limit() {
    let reply = Reply::quota().with_header("retry-after-ms", RETRY_AFTER_MS);
    let (call, a, ctx, requests) = failing_call("quota", times(1 + RETRIES, &reply));
    assert_eq!(call.code, Some(1), "{ctx}");
    assert_eq!(requests, 1 + RETRIES, "1 request + 5 retries: {ctx}");
    assert!(call.took < Duration::from_secs(90), "{ctx}");
    let e = error_event(&call.stdout);
    assert_eq!(e["error"]["name"], "APIError", "{ctx}");
    assert_eq!(e["error"]["data"]["statusCode"], 429, "{ctx}");
    assert_eq!(a.outcome, Outcome::AgentError, "{ctx}");
    assert_eq!(a.error_kind(), Some(ErrorKind::SpendLimit), "{ctx}\n{a:#?}");
    let msg = &a.error.as_ref().expect("error").message;
    assert!(msg.starts_with("You exceeded your current quota"), "{msg}");
    assert!(a.session_id.is_some(), "{a:#?}");
}

/// 429 `rate_limit_exceeded`: 5 retries, then exit 1; a rate limit. (Hank's reset reader does
/// not read the API's "Please try again in 2s", and `retry-after` is relative: no reset time.)
fn rate_limit_is_classified() {
    let reply = Reply::rate_limit(2).with_header("retry-after-ms", RETRY_AFTER_MS);
    let (call, a, ctx, requests) = failing_call("rate_limit", times(1 + RETRIES, &reply));
    assert_eq!(call.code, Some(1), "{ctx}");
    assert_eq!(requests, 1 + RETRIES, "{ctx}");
    assert_eq!(a.outcome, Outcome::AgentError, "{ctx}");
    assert_eq!(a.error_kind(), Some(ErrorKind::RateLimit), "{ctx}\n{a:#?}");
    let e = a.error.as_ref().expect("error");
    assert!(e.message.contains("Rate limit reached"), "{e:?}");
}

/// 401 → auth after one request (not retried); 500 → server after 5 retries; both exit 1.
fn auth_and_server_errors_are_classified() {
    let (call, a, ctx, requests) = failing_call(
        "auth",
        vec![Reply::error(
            401,
            "invalid_request_error",
            Some("invalid_api_key"),
            "Incorrect API key provided: sk-hank-****-key. You can find your API key at https://platform.openai.com/account/api-keys.",
        )],
    );
    assert_eq!(call.code, Some(1), "{ctx}");
    assert_eq!(requests, 1, "a 401 is not retried: {ctx}");
    assert_eq!(a.error_kind(), Some(ErrorKind::Auth), "{ctx}\n{a:#?}");
    let reply = Reply::error(
        500,
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    )
    .with_header("retry-after-ms", RETRY_AFTER_MS);
    let (call, a, ctx, requests) = failing_call("server_error", times(1 + RETRIES, &reply));
    assert_eq!(call.code, Some(1), "{ctx}");
    assert_eq!(requests, 1 + RETRIES, "{ctx}");
    assert_eq!(a.error_kind(), Some(ErrorKind::Server), "{ctx}\n{a:#?}");
}

/// `--session` with an id opencode does not have: `Error: Session not found` on stderr, no
/// stdout, exit 1, no request; hank's unknown session.
fn unknown_session_is_recognised() {
    let s = setup(vec![]);
    let (call, ctx) = s.captured(
        "unknown_session",
        s.call(Some("ses_0123456789abcdefghijklmnop"), None, PROMPT_TWO),
    );
    assert_eq!(call.code, Some(1), "{ctx}");
    assert!(call.stdout.trim().is_empty(), "{ctx}");
    assert!(call.stderr.contains("Session not found"), "{ctx}");
    assert!(s.api.requests().is_empty(), "{ctx}");
    let a = s.analyze(&call);
    assert!(a.unknown_session, "{ctx}\n{a:#?}");
}

/// `--model` naming a model the config does not have: one `UnknownError` event ("Unexpected
/// server error…"; only `--print-logs` names the model), exit 1, no request; the profile makes
/// it a usage error (hank stops instead of retrying).
fn unknown_model_is_fatal() {
    let s = setup(vec![]);
    let (call, ctx) = s.captured(
        "unknown_model",
        s.call(None, Some("hank-fake/no-such-model"), PROMPT_ONE),
    );
    assert_eq!(call.code, Some(1), "{ctx}");
    assert!(s.api.requests().is_empty(), "{ctx}");
    assert_eq!(
        error_event(&call.stdout)["error"]["name"],
        "UnknownError",
        "{ctx}"
    );
    let a = s.analyze(&call);
    assert_eq!(a.outcome, Outcome::AgentError, "{ctx}");
    assert_eq!(a.error_kind(), Some(ErrorKind::CliUsage), "{ctx}\n{a:#?}");
}

/// An option `run` does not know: its help on stderr, nothing on stdout, exit 1; the profile
/// calls it a usage error.
fn bad_flag_is_a_usage_error() {
    let s = setup(vec![]);
    let argv = ["run", "--format", "json", "--no-such-flag"].map(String::from);
    let (call, ctx) = s.captured("bad_flag", s.run_argv(argv.to_vec(), PROMPT_ONE));
    assert_eq!(call.code, Some(1), "{ctx}");
    assert!(call.stdout.is_empty(), "{ctx}");
    assert!(call.stderr.starts_with("opencode run [message..]"), "{ctx}");
    let a = s.analyze(&call);
    assert_eq!(a.error_kind(), Some(ErrorKind::CliUsage), "{ctx}\n{a:#?}");
}

/// A write outside the project (opencode's default rule for that is "ask"): without `--auto`
/// `run` rejects it, says so on stderr, and ends the run at once with exit 0 and no text (hank
/// sees no answer); PERMISSION_MODE=bypassPermissions adds `--auto` and the write happens.
fn ask_rules_are_rejected_unless_bypass_permissions() {
    let outside = |proj: &Path| proj.parent().unwrap().join("outside.txt");
    let write = |proj: &Path| {
        Reply::tool(
            "write",
            json!({"filePath": outside(proj).display().to_string(), "content": "outside\n"}),
        )
    };
    let s = scripted(|proj| {
        vec![
            write(proj),
            write(proj),
            Reply::Text(status_text("IN_PROGRESS", false, "wrote outside")),
        ]
    });
    let (call, ctx) = s.captured("denied", s.call(None, None, PROMPT_ONE));
    assert_eq!(call.code, Some(0), "{ctx}");
    assert!(!outside(&s.proj).exists(), "{ctx}");
    assert!(
        call.stderr
            .contains("permission requested: external_directory (")
            && call.stderr.contains("); auto-rejecting"),
        "{ctx}"
    );
    let rejected: Vec<Value> = events(&call.stdout)
        .into_iter()
        .filter(|e| e["type"] == "tool_use" && e["part"]["state"]["status"] == "error")
        .collect();
    assert_eq!(rejected.len(), 1, "{ctx}");
    assert_eq!(
        rejected[0]["part"]["state"]["error"],
        "The user rejected permission to use this specific tool call.",
        "{ctx}"
    );
    assert_eq!(
        s.api.turns().len(),
        1,
        "the run stops after the rejection: {ctx}"
    );
    let a = s.analyze(&call);
    assert_eq!(a.outcome, Outcome::Crashed, "{ctx}\n{a:#?}");
    assert_eq!(a.error_kind(), Some(ErrorKind::Malformed), "{a:#?}");

    let call = s.call_in_mode(None, None, Some("bypassPermissions"), PROMPT_ONE);
    let ctx = s.context(&call);
    assert_eq!(
        call.argv,
        ["run", "--format", "json", "--title", "", "--auto"],
        "{ctx}"
    );
    assert_eq!(call.code, Some(0), "{ctx}");
    assert_eq!(
        std::fs::read_to_string(outside(&s.proj)).unwrap_or_default(),
        "outside\n",
        "{ctx}"
    );
    assert!(!call.stderr.contains("auto-rejecting"), "{ctx}");
    assert_eq!(s.analyze(&call).outcome, Outcome::Success, "{ctx}");
}

// ---- through hank ----------------------------------------------------------------------------

/// A hank project run with the real opencode (OPENCODE_CMD) and the fake API: a git project
/// with `items`, the opencode config in the project's HOME, and the fake API playing the
/// script built from the project.
fn hank(items: &[&str], script: impl FnOnce(&Project) -> Vec<Reply>) -> HankRun<OpenAiChat> {
    let mut h = HankRun::new(items, script)
        .env("OPENCODE_CMD", crate::agents::agent().path)
        .args(&["--agent", "opencode"]);
    for (k, v) in opencode_env() {
        h = h.env(k, v);
    }
    write_config(&h.p.home, &h.api);
    h
}

/// One loop, one plain answer with a status block: success, the session id, tokens and cost
/// recorded; the prompt (with hank's loop context) went to opencode on stdin.
fn hank_reads_a_plain_answer() {
    let h = hank(&["one", "two"], |_| {
        vec![Reply::Text(status_text(
            "IN_PROGRESS",
            false,
            "continue with two",
        ))]
    });
    let o = h.run(&["--max-loops", "1"]);
    let ctx = h.context(&o);
    let finished = h.finished();
    assert_eq!(finished.len(), 1, "{ctx}");
    let f = &finished[0];
    assert_eq!(f["outcome"], "success", "{f}\n{ctx}");
    assert!(
        f["session_id"]
            .as_str()
            .is_some_and(|s| s.starts_with("ses_")),
        "{f}"
    );
    assert!(f["cost_usd"].as_f64().unwrap_or(0.0) > 0.0, "{f}");
    let s = h.p.status();
    assert_eq!(s["exit_reason"], "max_loops", "{s}\n{ctx}");
    assert_eq!(s["last_loop"]["outcome"], "success", "{s}");
    let turns = h.api.turns();
    assert_eq!(turns.len(), 1, "{ctx}");
    let loop_ctx = turns[0].loop_context().unwrap_or_default();
    assert!(
        loop_ctx.contains("Hank loop 1") && loop_ctx.contains("one"),
        "{loop_ctx}"
    );
    assert!(
        turns[0].last_user_text().contains("Do the next task."),
        "{ctx}"
    );
}

/// Two loops: the second resumes the first loop's session (`--session <id>`) and its first
/// request carries loop 1's conversation and loop 2's own context.
fn hank_resumes_the_session_in_the_next_loop() {
    let h = hank(&["one", "two", "three"], |_| {
        vec![
            Reply::Text(status_text("IN_PROGRESS", false, "loop one done")),
            Reply::Text(status_text("IN_PROGRESS", false, "loop two done")),
        ]
    });
    let o = h.run(&["--max-loops", "2"]);
    let ctx = h.context(&o);
    let (_, session) = h.assert_second_loop_resumed(&ctx);
    let turns = h.api.turns();
    assert_eq!(
        turns[1].header("x-session-id"),
        Some(session.as_str()),
        "{ctx}"
    );
    assert!(
        turns[1]
            .message_texts("assistant")
            .iter()
            .any(|t| t.contains("loop one done")),
        "loop 2 carries loop 1's answer: {ctx}"
    );
}

/// The agent edits fix_plan.md and writes a source file through opencode's tools: hank counts
/// the checked item and the changed file.
fn hank_counts_the_agents_edit_as_progress() {
    let h = hank(&["one", "two"], |p| {
        let plan = p.dir.join(".hank/fix_plan.md").display().to_string();
        let file = p.dir.join("src/one.txt").display().to_string();
        vec![
            Reply::tool("read", json!({"filePath": plan})),
            Reply::tool(
                "edit",
                json!({"filePath": plan, "oldString": "- [ ] one", "newString": "- [x] one"}),
            ),
            Reply::tool("write", json!({"filePath": file, "content": "one done\n"})),
            Reply::Text(status_text("IN_PROGRESS", false, "after one, continue")),
        ]
    });
    let o = h.run(&["--max-loops", "1"]);
    let ctx = h.context(&o);
    h.assert_items_done(&["one"], &ctx);
}

/// SANDBOX=landlock with the real opencode: two loops (the second resumes the first's
/// session) of `read`, `edit`, `write` and `bash` (`git add`/`git commit`) complete the plan
/// with opencode confined to the project, its TMPDIR and its XDG folders (the profile's
/// `[sandbox] write`), and the egress proxy as its only way to the fake. The fake is a custom
/// provider of `opencode.json`: its host is allowed with SANDBOX_ALLOW_HOSTS. What opencode
/// wrote outside the project is listed in `docs/agent-profiles.md` ("What each client writes").
fn hank_sandboxed_edits_commit_and_complete_the_plan() {
    let work_on = |p: &Project, item: &str, status: &str| {
        let plan = p.dir.join(".hank/fix_plan.md").display().to_string();
        let file = p.dir.join(format!("src/{item}.txt")).display().to_string();
        vec![
            Reply::tool("read", json!({"filePath": plan})),
            Reply::tool(
                "edit",
                json!({"filePath": plan, "oldString": format!("- [ ] {item}"), "newString": format!("- [x] {item}")}),
            ),
            Reply::tool(
                "write",
                json!({"filePath": file, "content": format!("{item} done\n")}),
            ),
            Reply::Text(status_text(
                status,
                false,
                &format!("after {item}, continue"),
            )),
        ]
    };
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
    });
    let url = h.api.url();
    let h = h
        .sandboxed()
        .env("SANDBOX_ALLOW_HOSTS", url)
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
    // The client never touched its own configuration: nothing was guarded away.
    assert!(h.of_type("client_config_changed").is_empty(), "{ctx}");
    assert_eq!(h.resumed(), [false, true], "{ctx}");
    let log = support::git(&h.p.dir, &["log", "--format=%s"]);
    assert_eq!(log.lines().next(), Some("feat: one"), "{ctx}");
}

/// A quota 429: hank stops with spend_limit (waiting cannot help).
fn hank_stops_on_quota_with_spend_limit() {
    let reply = Reply::quota().with_header("retry-after-ms", RETRY_AFTER_MS);
    let h = hank(&["one"], |_| times(1 + RETRIES, &reply));
    let o = h.run(&["--max-loops", "3"]);
    let ctx = h.context(&o);
    h.assert_stopped_at_once(&o, "spend_limit", &ctx);
}

/// A per-minute rate limit: hank records rate_limit, waits, and the next loop succeeds in the
/// same session.
fn hank_backs_off_after_a_rate_limit() {
    let limited = Reply::rate_limit(1).with_header("retry-after-ms", RETRY_AFTER_MS);
    let h = hank(&["one", "two"], |_| {
        let mut script = times(1 + RETRIES, &limited);
        script.push(Reply::Text(status_text("IN_PROGRESS", false, "recovered")));
        script
    });
    h.p.hankrc("RETRY_BACKOFF_SECONDS=1\n");
    let o = h.run(&["--max-loops", "2"]);
    let ctx = h.context(&o);
    assert_eq!(h.error_kinds(), [json!("rate_limit"), Value::Null], "{ctx}");
    let waits = h.of_type("waiting").len();
    assert!(waits >= 1, "{ctx}");
    assert_eq!(h.p.status()["last_loop"]["outcome"], "success", "{ctx}");
}

/// REVIEW_AGENT=opencode with the real opencode as worker and reviewer: after the worker's
/// "done", the reviewer (`--agent=plan`, a new session) gets the run's diff and its verdict is
/// read.
fn hank_review_with_the_plan_agent_is_read() {
    let h = hank(&["one"], |p| {
        let plan = p.dir.join(".hank/fix_plan.md").display().to_string();
        let file = p.dir.join("src/one.txt").display().to_string();
        vec![
            Reply::tool(
                "edit",
                json!({"filePath": plan, "oldString": "- [ ] one", "newString": "- [x] one"}),
            ),
            Reply::tool("write", json!({"filePath": file, "content": "one done\n"})),
            Reply::Text(status_text("COMPLETE", false, "all done")),
            Reply::Text(
                "Read it.\n---HANK_REVIEW---\nVERDICT: APPROVE\nFINDINGS:\n- [minor] src/one.txt: fine\n---END_HANK_REVIEW---".into(),
            ),
        ]
    })
    .env("REVIEW_AGENT", "opencode");
    let o = h.run(&["--max-loops", "2"]);
    let ctx = h.context(&o);
    assert_eq!(o.status.code(), Some(0), "{ctx}");
    let reviews = h.of_type("review");
    assert_eq!(reviews.len(), 1, "{ctx}");
    assert_eq!(reviews[0]["verdict"], "approve", "{ctx}");
    let turns = h.api.turns();
    assert!(
        turns
            .iter()
            .any(|t| t.text().contains("---HANK_REVIEW---") && t.text().contains("one done")),
        "the reviewer's request with the diff: {ctx}"
    );
}
