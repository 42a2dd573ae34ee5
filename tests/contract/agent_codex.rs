//! The **real** OpenAI Codex CLI (`codex exec`) against the fake Responses API
//! (`fake_openai.rs`), with the argv and the JSONPath fields of the built-in profile
//! `templates/agents/codex.toml`.
//!
//! No network is used: `HOME` is a temp dir whose `.codex/config.toml` defines a provider
//! `hank-fake` (`base_url` = the fake, `env_key = "OPENAI_API_KEY"`, `wire_api = "responses"`,
//! WebSockets off, codex's own retries off). The cases that call the CLI directly check what
//! the profile reads from its output (text, status block, session id, tokens, edits, error
//! kinds); the `hank_*` cases run `hank run --agent codex`.
//!
//! With `HANK_CAPTURE_FIXTURES=DIR`, the direct cases write what the CLI printed to
//! `DIR/<scenario>.stdout|.stderr|.exit` (how `fixtures/agents/codex/` was made).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use hank::analysis::{Analysis, ErrorKind, Outcome};
use serde_json::{Value, json};

use crate::fake_openai::{CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, OpenAi, Reply};
use crate::harness::{self, Call, Direct, HankRun, PROMPT_ONE, PROMPT_TWO, events};
use crate::http::status_text;
use crate::support::{self, Project};

type Case = fn();

/// Every codex case, by name.
pub(crate) const CASES: &[(&str, Case)] = cases![
    plain_answer_is_read_by_the_profile,
    resume_sends_the_earlier_conversation,
    edits_and_commands_run_without_approval,
    quota_is_a_spend_limit,
    rate_limit_is_classified,
    usage_limit_is_classified,
    auth_and_server_errors_are_classified,
    unknown_session_is_recognised,
    unreachable_api_is_a_network_error,
    hank_plain_answer_with_status,
    hank_second_loop_resumes_the_session,
    hank_edit_is_progress,
    hank_sandboxed_edits_commit_and_complete_the_plan,
    hank_quota_stops_with_spend_limit,
    hank_transient_errors_back_off_then_recover,
    hank_usage_limit_waits_or_exits,
    hank_review_reads_the_diff_read_only,
];

/// `$HOME/.codex/config.toml` that points codex at the fake.
pub(crate) fn codex_config(api_url: &str) -> String {
    format!(
        "# written by hank's contract suite: codex talks to the fake Responses API only\n\
         model_provider = \"hank-fake\"\n\
         \n\
         [model_providers.hank-fake]\n\
         name = \"hank contract fake\"\n\
         base_url = \"{api_url}\"\n\
         env_key = \"OPENAI_API_KEY\"\n\
         wire_api = \"responses\"\n\
         supports_websockets = false\n\
         request_max_retries = 0\n\
         stream_max_retries = 0\n"
    )
}

/// The profile's flags after `exec` (and `resume <id>`): JSON events, no git or sandbox
/// checks, the prompt on stdin.
const EXEC_FLAGS: [&str; 4] = [
    "--json",
    "--skip-git-repo-check",
    "--dangerously-bypass-approvals-and-sandbox",
    "-",
];

/// A fake API key (the fake never checks it; it is redacted in the request log).
pub(crate) const API_KEY: &str = "sk-proj-fake-contract-key";

/// A temp HOME with the codex config, a git project, and the fake API.
type Setup = Direct<OpenAi>;

fn setup(script: Vec<Reply>) -> Setup {
    let s = Direct::new("codex", "# demo\n", |_| script);
    std::fs::create_dir_all(s.home.join(".codex")).expect("mkdir");
    std::fs::write(
        s.home.join(".codex/config.toml"),
        codex_config(&s.api.url()),
    )
    .expect("write");
    s
}

impl Direct<OpenAi> {
    /// Runs the real CLI with the profile's argv (resuming `session` when set), `prompt` on
    /// stdin, in the project.
    fn call(&self, session: Option<&str>, prompt: &str) -> Call {
        self.call_within(session, prompt, Duration::from_secs(120), false)
    }

    /// [`Direct::call`] with a time limit; past it the CLI is killed (as hank's timeout would)
    /// when `kill_at_limit`, else the case fails.
    fn call_within(
        &self,
        session: Option<&str>,
        prompt: &str,
        limit: Duration,
        kill_at_limit: bool,
    ) -> Call {
        let argv = harness::argv(&self.profile, session, None, None);
        let mut cmd = self.command(&argv);
        cmd.env("OPENAI_API_KEY", API_KEY).env("TZ", "UTC");
        self.run(cmd, argv, prompt, limit, kill_at_limit)
    }
}

/// The thread id of the `thread.started` event.
fn thread_id(stdout: &str) -> String {
    harness::first_string(stdout, |e| e["type"] == "thread.started", "thread_id")
}

/// One answer with a HANK_STATUS block: the profile finds the text, the status block, the
/// session id and the tokens; the argv is `exec --json … -` with the prompt on stdin.
fn plain_answer_is_read_by_the_profile() {
    let answer = status_text("IN_PROGRESS", false, "continue with the next item");
    let s = setup(vec![Reply::Text(answer.clone())]);
    let (call, ctx) = s.captured("plain", s.call(None, PROMPT_ONE));
    assert_eq!(call.code, Some(0), "{ctx}");
    assert_eq!(call.argv, [&["exec"][..], &EXEC_FLAGS].concat(), "{ctx}");
    let a = s.analyze(&call);
    harness::assert_status_answer(&a, &answer, "continue with the next item", &ctx);
    assert_eq!(
        a.session_id.as_deref(),
        Some(thread_id(&call.stdout).as_str())
    );
    assert_eq!(a.tokens.input, INPUT_TOKENS, "{a:#?}");
    assert_eq!(a.tokens.output, OUTPUT_TOKENS, "{a:#?}");
    assert_eq!(a.tokens.cache_read, CACHED_TOKENS, "{a:#?}");
    assert_eq!(a.cost_usd, 0.0, "codex reports no cost");
    // The prompt arrived on stdin, as the newest user message.
    let turns = s.api.turns();
    assert_eq!(turns.len(), 1, "{ctx}");
    assert_eq!(turns[0].last_user_text(), PROMPT_ONE, "{ctx}");
    assert_eq!(
        turns[0].header("authorization"),
        Some("<redacted 32 bytes>")
    );
    // The session is kept under $CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<id>.jsonl.
    let id = a.session_id.unwrap_or_default();
    assert!(
        rollout_files(&s.home.join(".codex/sessions"))
            .iter()
            .any(|f| f.ends_with(&format!("-{id}.jsonl"))),
        "no rollout file for {id}"
    );
}

fn rollout_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(rollout_files(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}

/// `codex exec resume <id> … -`: the same session id, and the second request carries the
/// first call's prompt and answer before the new prompt. The usage codex prints on the resumed
/// run counts the whole thread (both calls).
fn resume_sends_the_earlier_conversation() {
    let s = setup(vec![
        Reply::text("First answer: ALPHA handled."),
        Reply::Text(status_text("IN_PROGRESS", false, "go on with BETA")),
    ]);
    let first = s.call(None, PROMPT_ONE);
    assert_eq!(first.code, Some(0), "{}", s.context(&first));
    let id = thread_id(&first.stdout);
    let (second, ctx) = s.captured("resume", s.call(Some(&id), PROMPT_TWO));
    let a = s.assert_resumed(&second, &id, &ctx);
    assert_eq!(
        second.argv,
        [&["exec", "resume", id.as_str()][..], &EXEC_FLAGS].concat(),
        "{ctx}"
    );
    let turns = s.api.turns();
    let users = turns[1].message_texts("user");
    let assistants = turns[1].message_texts("assistant");
    assert!(users.iter().any(|t| t == PROMPT_ONE), "{users:#?}");
    assert_eq!(assistants, ["First answer: ALPHA handled."], "{ctx}");
    assert_eq!(turns[1].last_user_text(), PROMPT_TWO, "{ctx}");
    assert_eq!(turns[1].header("session-id"), Some(id.as_str()), "{ctx}");
    // Cumulative usage: the resumed run reports both calls.
    assert_eq!(a.tokens.input, 2 * INPUT_TOKENS, "{a:#?}");
    assert_eq!(a.tokens.output, 2 * OUTPUT_TOKENS, "{a:#?}");
}

/// The model writes a file (apply_patch) and commits it (a shell command): codex does both
/// with no approval prompt, and the profile counts the edit and reads the command.
fn edits_and_commands_run_without_approval() {
    let s = setup(vec![
        Reply::write_file("src/feature.txt", "feature done\nsecond line\n"),
        Reply::shell(
            "git add -A && git -c user.name=codex -c user.email=codex@example.invalid commit -q -m 'feat: feature' && git log --oneline -1",
        ),
        Reply::Text(status_text("IN_PROGRESS", false, "next item")),
    ]);
    let (call, ctx) = s.captured("edit", s.call(None, PROMPT_ONE));
    assert_eq!(call.code, Some(0), "{ctx}");
    assert_eq!(
        s.read("src/feature.txt"),
        "feature done\nsecond line\n",
        "{ctx}"
    );
    assert_eq!(s.last_commit(), "feat: feature", "{ctx}");
    let a = s.analyze(&call);
    assert_eq!(a.outcome, Outcome::Success, "{ctx}");
    assert!(a.status.is_some(), "{a:#?}");
    let evs = events(&call.stdout);
    let changes: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "file_change")
        .collect();
    assert_eq!(changes.len(), 1, "{ctx}");
    assert_eq!(changes[0]["item"]["changes"][0]["kind"], "add", "{ctx}");
    let commands: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "command_execution")
        .collect();
    assert_eq!(commands.len(), 1, "{ctx}");
    assert_eq!(commands[0]["item"]["exit_code"], 0, "{ctx}");
    // What codex sent back for the tool calls.
    let turns = s.api.turns();
    assert_eq!(turns.len(), 3, "{ctx}");
    let outputs = turns[2].tool_outputs();
    assert!(
        outputs.iter().any(|o| o.contains("feat: feature")),
        "{outputs:#?}"
    );
}

/// One failing call: exit code, the error kind the profile's rules give, and no retries.
fn failing_call(name: &str, reply: Reply) -> (Call, Analysis, String, usize) {
    let s = setup(vec![reply]);
    s.outcome(name, s.call(None, PROMPT_ONE))
}

/// 429 `insufficient_quota` (API credits gone): exit 1, "Quota exceeded…", a spend limit.
fn quota_is_a_spend_limit() {
    let (call, a, ctx, requests) = failing_call("quota", Reply::quota());
    assert_eq!(call.code, Some(1), "{ctx}");
    assert_eq!(requests, 1, "no retry: {ctx}");
    assert!(call.took < Duration::from_secs(20), "{ctx}");
    assert_eq!(a.outcome, Outcome::AgentError, "{ctx}");
    assert_eq!(a.error_kind(), Some(ErrorKind::SpendLimit), "{ctx}\n{a:#?}");
    let msg = &a.error.as_ref().expect("error").message;
    assert!(msg.contains("Quota exceeded"), "{msg}");
}

/// 429 `rate_limit_exceeded` with `retry-after`: exit 1, a rate limit.
fn rate_limit_is_classified() {
    let (call, a, ctx, requests) = failing_call("rate_limit", Reply::rate_limit(2));
    assert_eq!(call.code, Some(1), "{ctx}");
    assert_eq!(requests, 1, "stream_max_retries = 0: {ctx}");
    assert_eq!(a.outcome, Outcome::AgentError, "{ctx}");
    assert_eq!(a.error_kind(), Some(ErrorKind::RateLimit), "{ctx}\n{a:#?}");
}

/// 429 `usage_limit_reached` (ChatGPT plan window): exit 1, a usage limit.
fn usage_limit_is_classified() {
    let reset = jiff::Timestamp::now().as_second() + 2 * 3600;
    let (call, a, ctx, _) = failing_call("usage_limit", Reply::usage_limit(reset));
    assert_eq!(call.code, Some(1), "{ctx}");
    assert_eq!(a.error_kind(), Some(ErrorKind::UsageLimit), "{ctx}\n{a:#?}");
    let msg = &a.error.as_ref().expect("error").message;
    assert!(msg.contains("try again at"), "{msg}");
}

/// 401 → auth; 500 → server; both exit 1 after one request.
fn auth_and_server_errors_are_classified() {
    let (call, a, ctx, _) = failing_call(
        "auth",
        Reply::error(
            401,
            "invalid_request_error",
            Some("invalid_api_key"),
            "Incorrect API key provided: sk-proj-****-key. You can find your API key at https://platform.openai.com/account/api-keys.",
        ),
    );
    assert_eq!(call.code, Some(1), "{ctx}");
    assert_eq!(a.error_kind(), Some(ErrorKind::Auth), "{ctx}\n{a:#?}");
    let (call, a, ctx, requests) = failing_call(
        "server_error",
        Reply::error(
            500,
            "server_error",
            None,
            "The server had an error while processing your request. Sorry about that!",
        ),
    );
    assert_eq!(call.code, Some(1), "{ctx}");
    assert_eq!(requests, 1, "request_max_retries = 0: {ctx}");
    assert_eq!(a.error_kind(), Some(ErrorKind::Server), "{ctx}\n{a:#?}");
}

/// Resuming a session id codex does not have: stderr only, exit 1, hank's unknown session.
fn unknown_session_is_recognised() {
    let s = setup(vec![]);
    let (call, ctx) = s.captured(
        "unknown_session",
        s.call(Some("01a20b35-0000-7000-8000-000000000000"), PROMPT_TWO),
    );
    assert_eq!(call.code, Some(1), "{ctx}");
    assert!(call.stdout.trim().is_empty(), "{ctx}");
    assert!(s.api.turns().is_empty(), "{ctx}");
    let a = s.analyze(&call);
    assert!(a.unknown_session, "{ctx}\n{a:#?}");
}

/// Connection refused: codex keeps printing `Reconnecting... waiting for network` and never
/// ends by itself (its retry keys do not apply); killed like hank's timeout does, the output
/// reads as a network error.
fn unreachable_api_is_a_network_error() {
    let s = setup(vec![]);
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    std::fs::write(
        s.home.join(".codex/config.toml"),
        codex_config(&format!("http://{closed}/v1")),
    )
    .expect("write");
    let (call, ctx) = s.captured(
        "network",
        s.call_within(None, PROMPT_ONE, Duration::from_secs(8), true),
    );
    assert_eq!(call.code, None, "still running after 8 s: {ctx}");
    assert!(call.stdout.contains("waiting for network"), "{ctx}");
    let a = s.analyze(&call);
    assert_eq!(a.outcome, Outcome::Timeout, "{ctx}\n{a:#?}");
    assert_eq!(a.error_kind(), Some(ErrorKind::Network), "{ctx}\n{a:#?}");
}

// ---- through hank: `hank --agent codex` -------------------------------------------------------

/// A git project run with hank's built-in codex profile, `$HOME/.codex/config.toml` pointing
/// at the fake, and the real CLI as `CODEX_CMD`.
fn hank_run(items: &[&str], script: impl FnOnce(&Project) -> Vec<Reply>) -> HankRun<OpenAi> {
    let run = HankRun::new(items, script)
        .env("CODEX_CMD", crate::agents::agent().path)
        .env("OPENAI_API_KEY", API_KEY)
        .env("TZ", "UTC")
        .args(&["--agent", "codex"]);
    std::fs::create_dir_all(run.p.home.join(".codex")).expect("mkdir");
    std::fs::write(
        run.p.home.join(".codex/config.toml"),
        codex_config(&run.api.url()),
    )
    .expect("write");
    run
}

/// The hosts codex calls on its own, which the sandbox's proxy refuses (observed with 0.171.0).
const CODEX_BACKGROUND: &[&str] = &["github.com:443", "api.github.com:443", "ab.chatgpt.com:443"];

/// Ticks the first open fix_plan item.
const TICK: &str = "sed -i '0,/- \\[ \\]/s//- [x]/' .hank/fix_plan.md";

/// One loop: hank sends the prompt on stdin, codex answers with a status block, hank reads
/// the outcome, status, session id and tokens through the profile.
fn hank_plain_answer_with_status() {
    let run = hank_run(&["a", "b"], |_| {
        vec![Reply::Text(status_text("IN_PROGRESS", false, "do b next"))]
    });
    let o = run.run(&["--max-loops", "1"]);
    let ctx = run.context(&o);
    assert_eq!(o.status.code(), Some(3), "max_loops: {ctx}");
    assert_eq!(run.p.status()["exit_reason"], "max_loops", "{ctx}");
    assert_eq!(run.p.status()["agent"], "codex", "{ctx}");
    let f = run.finished();
    assert_eq!(f.len(), 1, "{ctx}");
    assert_eq!(f[0]["agent"], "codex", "{ctx}");
    assert_eq!(f[0]["outcome"], "success", "{ctx}");
    assert_eq!(f[0]["status"], "IN_PROGRESS", "{ctx}");
    assert_eq!(f[0]["recommendation"], "do b next", "{ctx}");
    assert_eq!(f[0]["tokens"]["input"], INPUT_TOKENS, "{ctx}");
    assert_eq!(f[0]["tokens"]["output"], OUTPUT_TOKENS, "{ctx}");
    assert_eq!(f[0]["tokens"]["cache_read"], CACHED_TOKENS, "{ctx}");
    let out =
        std::fs::read_to_string(run.p.dir.join(".hank/logs/loop-00001.out")).unwrap_or_default();
    assert_eq!(
        f[0]["session_id"].as_str(),
        Some(thread_id(&out).as_str()),
        "{ctx}"
    );
    // The prompt reached codex on stdin: the loop context, then PROMPT.md.
    let turns = run.api.turns();
    assert_eq!(turns.len(), 1, "{ctx}");
    let prompt = turns[0].last_user_text();
    assert!(prompt.starts_with("<hank-loop-context>"), "{prompt}");
    assert!(prompt.contains("Hank loop 1"), "{prompt}");
    assert!(prompt.contains("Do the next task."), "{prompt}");
}

/// Two loops: loop 2 runs `codex exec resume <loop 1's thread id>`; codex sends loop 1's
/// conversation and loop 2's own context; both loops report the same session.
fn hank_second_loop_resumes_the_session() {
    let run = hank_run(&["a", "b", "c"], |_| {
        vec![
            Reply::Text(status_text("IN_PROGRESS", false, "loop one answer")),
            Reply::Text(status_text("IN_PROGRESS", false, "loop two answer")),
        ]
    });
    let o = run.run(&["--max-loops", "2"]);
    let ctx = run.context(&o);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    let (f, _) = run.assert_second_loop_resumed(&ctx);
    let turns = run.api.turns();
    let assistants = turns[1].message_texts("assistant");
    assert!(
        assistants.iter().any(|t| t.contains("loop one answer")),
        "loop 2 carries loop 1's answer: {assistants:#?}"
    );
    let users = turns[1].message_texts("user");
    assert!(
        users.iter().any(|t| t.contains("Hank loop 1")),
        "loop 2 carries loop 1's prompt"
    );
    // codex prints the thread's usage so far (loop 2's numbers include loop 1's); the profile
    // says so (`tokens = "session_total"`) and hank counts each loop's own tokens.
    assert_eq!(f[1]["tokens"]["input"], INPUT_TOKENS, "{ctx}");
    assert_eq!(f[1]["tokens"]["output"], OUTPUT_TOKENS, "{ctx}");
}

/// The model writes a file and ticks the plan through a shell command; codex runs both with
/// no approval, and hank counts the file and the checked item as progress.
fn hank_edit_is_progress() {
    let run = hank_run(&["one", "two"], |_| {
        vec![
            Reply::write_file("src/one.txt", "one done\n"),
            Reply::shell(TICK),
            Reply::Text(status_text("IN_PROGRESS", false, "two next")),
        ]
    });
    let o = run.run(&["--max-loops", "1"]);
    let ctx = run.context(&o);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    run.assert_items_done(&["one"], &ctx);
}

/// SANDBOX=landlock with the real codex: two loops (the second resumes the first's thread) of
/// file writes and shell commands (`sed` on the plan, `git add`/`git commit`) complete the plan
/// with codex confined to the project, its TMPDIR and `~/.codex/` (the profile's
/// `[sandbox] write`), and the egress proxy as its only way to the fake. The fake is a custom
/// provider of `~/.codex/config.toml`, not `OPENAI_BASE_URL`: its host is allowed the way a
/// user allows one, with SANDBOX_ALLOW_HOSTS. What codex wrote outside the project is listed in
/// `docs/agent-profiles.md` ("What each client writes").
fn hank_sandboxed_edits_commit_and_complete_the_plan() {
    let run = hank_run(&["one", "two"], |_| {
        vec![
            Reply::write_file("src/one.txt", "one done\n"),
            Reply::shell(TICK),
            Reply::shell("git add -A && git commit -q -m 'feat: one'"),
            Reply::Text(status_text("IN_PROGRESS", false, "two next")),
            Reply::write_file("src/two.txt", "two done\n"),
            Reply::shell(TICK),
            Reply::Text(status_text("COMPLETE", false, "all done")),
        ]
    });
    let url = run.api.url();
    let run = run
        .sandboxed()
        .env("SANDBOX_ALLOW_HOSTS", url)
        .env("GIT_AUTHOR_NAME", "agent")
        .env("GIT_AUTHOR_EMAIL", "agent@example.com")
        .env("GIT_COMMITTER_NAME", "agent")
        .env("GIT_COMMITTER_EMAIL", "agent@example.com");
    let o = run.run(&["--max-loops", "3"]);
    let ctx = run.context(&o);
    assert_eq!(o.status.code(), Some(0), "{ctx}");
    assert_eq!(run.p.status()["exit_reason"], "plan_complete", "{ctx}");
    run.assert_items_done(&["one", "two"], &ctx);
    // codex 0.171.0 calls GitHub (github.com, api.github.com) and its feature-flag host
    // (ab.chatgpt.com) on its own at start; the proxy refuses them and the work goes on.
    run.assert_confined(CODEX_BACKGROUND, &ctx);
    // The client never touched its own configuration: nothing was guarded away.
    assert!(run.of_type("client_config_changed").is_empty(), "{ctx}");
    assert_eq!(run.resumed(), [false, true], "{ctx}");
    let log = support::git(&run.p.dir, &["log", "--format=%s"]);
    assert_eq!(log.lines().next(), Some("feat: one"), "{ctx}");
}

/// 429 `insufficient_quota`: the loop is an agent error of kind spend_limit and hank stops
/// at once (waiting does not lift a spend cap).
fn hank_quota_stops_with_spend_limit() {
    let run = hank_run(&["a"], |_| vec![Reply::quota()]);
    let o = run.run(&["--max-loops", "3"]);
    let ctx = run.context(&o);
    run.assert_stopped_at_once(&o, "spend_limit", &ctx);
    assert_eq!(run.api.turns().len(), 1, "no retry by codex: {ctx}");
}

/// A per-minute rate limit, then a 500, then an answer: hank backs off after each failure
/// (codex's own retries are off) and recovers.
fn hank_transient_errors_back_off_then_recover() {
    let run = hank_run(&["a", "b"], |_| {
        vec![
            Reply::rate_limit(1),
            Reply::error(
                500,
                "server_error",
                None,
                "The server had an error while processing your request. Sorry about that!",
            ),
            Reply::Text(status_text("IN_PROGRESS", false, "recovered")),
        ]
    });
    run.p.hankrc("RETRY_BACKOFF_SECONDS=1\n");
    let o = run.run(&["--max-loops", "3"]);
    let ctx = run.context(&o);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    assert_eq!(
        run.error_kinds(),
        [json!("rate_limit"), json!("server"), Value::Null],
        "{ctx}"
    );
    assert_eq!(
        run.wait_reasons(),
        [json!("backoff"), json!("backoff")],
        "{ctx}"
    );
    assert_eq!(run.p.status()["last_loop"]["outcome"], "success", "{ctx}");
    assert_eq!(run.api.turns().len(), 3, "{ctx}");
}

/// A ChatGPT plan's usage limit: `--on-usage-limit exit` stops with usage_limit; otherwise
/// hank waits. codex prints the reset as "try again at 3:55 AM" (local time); hank waits until
/// then (+60 s) when its reader knows that wording, else its 60-minute default.
fn hank_usage_limit_waits_or_exits() {
    let now = jiff::Timestamp::now().as_second();
    let reset = (now / 60 + 3) * 60;
    let run = hank_run(&["a"], |_| vec![Reply::usage_limit(reset)]);
    let o = run.run(&["--on-usage-limit", "exit"]);
    let ctx = run.context(&o);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    assert_eq!(run.p.status()["exit_reason"], "usage_limit", "{ctx}");
    assert_eq!(run.finished()[0]["error_kind"], "usage_limit", "{ctx}");

    let run = hank_run(&["a"], |_| vec![Reply::usage_limit(reset)]);
    let child = run
        .cmd(&[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hank");
    let s = run
        .p
        .wait_status(Duration::from_secs(60), |s| s["state"] == "waiting");
    assert_eq!(s["wait_reason"], "usage_limit", "{s}");
    assert_eq!(s["last_loop"]["error_kind"], "usage_limit", "{s}");
    let until: jiff::Timestamp = s["waiting_until"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .expect("waiting_until");
    let to_reset = until.as_second() - reset;
    let to_default = until.as_second() - (now + 3600);
    assert!(
        (0..=120).contains(&to_reset) || (0..=180).contains(&to_default),
        "waiting until {until}: neither the reset {reset} nor the 60-minute default"
    );
    eprintln!(
        "codex usage limit: reset {reset}, hank waits until {until} ({})",
        if (0..=120).contains(&to_reset) {
            "the reset"
        } else {
            "60-minute default"
        }
    );
    support::signal(&child, nix::sys::signal::Signal::SIGINT);
    let o = support::wait_with_timeout(child, Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(130), "{}", run.context(&o));
}

/// REVIEW_AGENT=codex with the real codex as worker and reviewer: after the worker's "done",
/// the reviewer (`codex exec --sandbox read-only`, a fresh thread) gets the run's diff on
/// stdin, its attempt to write a file is refused, and its verdict is read.
fn hank_review_reads_the_diff_read_only() {
    let run = hank_run(&["one"], |_| {
        vec![
            Reply::write_file("src/one.txt", "one done\n"),
            Reply::shell(TICK),
            Reply::Text(status_text("COMPLETE", true, "all done")),
            Reply::write_file("src/reviewer.txt", "no\n"),
            Reply::Text(
                "Read it.\n---HANK_REVIEW---\nVERDICT: APPROVE\nFINDINGS:\n- [minor] src/one.txt: fine\n---END_HANK_REVIEW---".into(),
            ),
        ]
    })
    .env("REVIEW_AGENT", "codex");
    let o = run.run(&["--max-loops", "2"]);
    let ctx = run.context(&o);
    assert_eq!(o.status.code(), Some(0), "{ctx}");
    let reviews = run.of_type("review");
    assert_eq!(reviews.len(), 1, "{ctx}");
    assert_eq!(reviews[0]["verdict"], "approve", "{ctx}");
    assert!(!run.p.dir.join("src/reviewer.txt").exists(), "{ctx}");
    let turns = run.api.turns();
    let review = turns
        .iter()
        .find(|t| t.last_user_text().contains("---HANK_REVIEW---"))
        .expect("the reviewer's request");
    assert!(review.last_user_text().contains("one done"), "{ctx}");
}
