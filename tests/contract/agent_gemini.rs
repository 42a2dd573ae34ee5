//! The **real** gemini-cli against the fake Gemini API (`fake_gemini.rs`), driven by the argv
//! of hank's profile (`templates/agents/gemini.toml`), its output read by the profile's
//! JSONPaths and error rules (`hank::analysis::analyze_mapped`).
//!
//! Direct cases call the CLI the way hank's profile says and check what the profile reads from
//! its output: the answer and its status block, the session id, tokens; that `--resume` sends
//! the earlier conversation; that a `write_file`/`replace` call really edits the project with
//! no approval prompt; that quota, rate-limit, auth, overload and unknown-session answers are
//! classified by the profile's rules.
//!
//! No network is used: `GOOGLE_GEMINI_BASE_URL` points at the fake on 127.0.0.1, `HOME` is a
//! temp dir whose `~/.gemini/settings.json` selects API-key auth and turns usage statistics,
//! telemetry and update checks off, `general.maxAttempts` keeps gemini's own retries short.
//!
//! `HANK_CAPTURE_FIXTURES=<dir>`: each case also writes what the CLI printed there
//! (`<name>.stdout`, `.stderr`, `.exit`, `.argv`), which is how `fixtures/agents/gemini/` was made.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use hank::analysis::{ErrorKind, Outcome};
use serde_json::{Value, json};

use crate::fake_gemini::{self, Gemini, Reply};
use crate::harness::{self, Call, Direct, HankRun};
use crate::http::status_text;
use crate::support::{self, Project, signal, wait_with_timeout};

/// Every gemini case, by name (registered in `main.rs`).
pub(crate) const CASES: &[(&str, fn())] = cases![
    plain_answer_is_read_by_the_profile,
    resume_sends_the_earlier_conversation,
    yolo_edits_the_project_without_approval,
    daily_quota_is_a_usage_limit,
    zero_quota_is_a_billing_error,
    per_minute_limit_is_retried_then_a_rate_limit,
    invalid_api_key_is_an_auth_error,
    overloaded_model_is_overloaded,
    unknown_session_is_reported,
    stream_json_events_for_the_record,
    hank_edits_resumes_and_completes_the_plan,
    hank_sandboxed_edits_commit_and_complete_the_plan,
    hank_daily_quota_is_a_usage_limit,
    hank_rate_limit_backs_off_then_recovers,
    hank_invalid_key_is_agent_fatal,
    hank_unknown_session_starts_fresh,
    hank_review_in_plan_mode_is_read,
];

/// `~/.gemini/settings.json` of the temp HOME: API-key auth (needed with
/// `GOOGLE_GEMINI_BASE_URL`, which alone selects the unsupported "gateway" auth), no usage
/// statistics (they go to play.googleapis.com), no telemetry, no update check, and at most
/// `attempts` tries per request.
pub(crate) fn settings_json(attempts: u32) -> String {
    serde_json::to_string_pretty(&json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {
            "enableAutoUpdate": false,
            "enableAutoUpdateNotification": false,
            "maxAttempts": attempts
        }
    }))
    .unwrap()
}

/// Writes `settings_json(attempts)` into `home` and makes the temp folder `tmp` (gemini writes
/// error reports, gemini-client-error-*.json, there).
fn set_up_home(home: &Path, tmp: &Path, attempts: u32) {
    std::fs::create_dir_all(home.join(".gemini")).expect("mkdir");
    std::fs::write(home.join(".gemini/settings.json"), settings_json(attempts)).expect("settings");
    std::fs::create_dir_all(tmp).expect("mkdir");
}

/// A fake API key (never a real one; the fake redacts it in its log anyway).
pub(crate) const API_KEY: &str = "AIzaSyFAKE-contract-key-000000000000000";

/// A git project, a temp HOME set up for the fake, and the fake API.
type Gem = Direct<Gemini>;

fn gem(attempts: u32, script: Vec<Reply>) -> Gem {
    gem_scripted(attempts, |_| script)
}

/// Like [`gem`], the script built from the project directory.
fn gem_scripted(attempts: u32, script: impl FnOnce(&Path) -> Vec<Reply>) -> Gem {
    let g = Direct::new(
        "gemini",
        "# Demo\n\nA project for the contract cases.\n",
        script,
    );
    set_up_home(&g.home, &g.root.join("tmp"), attempts);
    g
}

impl Direct<Gemini> {
    /// The profile's argv for a call (json output, not live).
    fn argv(&self, session: Option<&str>, model: Option<&str>) -> Vec<String> {
        harness::argv(&self.profile, session, model, None)
    }

    /// Runs `args` with `prompt` on stdin, as hank does (prompt = "stdin").
    fn run_args(&self, args: Vec<String>, prompt: &str) -> Call {
        let mut cmd = self.command(&args);
        cmd.env("TMPDIR", self.root.join("tmp"))
            .env("GEMINI_API_KEY", API_KEY)
            .env("GOOGLE_GEMINI_BASE_URL", self.api.url());
        self.run(cmd, args, prompt, Duration::from_secs(180), false)
    }

    fn call(&self, prompt: &str, session: Option<&str>, model: Option<&str>) -> Call {
        self.run_args(self.argv(session, model), prompt)
    }

    /// The chat files gemini keeps for this project (`~/.gemini/tmp/<project>/chats/`).
    fn chat_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let tmp = self.home.join(".gemini/tmp");
        for project in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(project.path().join("chats"))
                .into_iter()
                .flatten()
                .flatten()
            {
                out.push(f.path());
            }
        }
        out.sort();
        out
    }
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.chars().enumerate().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

const PROMPT: &str =
    "Work on the next item of the fix plan, then report with a HANK_STATUS block.\n";

// ---- direct cases ----------------------------------------------------------------------------

/// One answer with a status block, the model left to gemini (`auto`: its router asks a
/// flash-lite model to rate the prompt, then the chosen model answers): the profile finds the
/// text, the session id, tokens of both models.
fn plain_answer_is_read_by_the_profile() {
    let answer = status_text("IN_PROGRESS", false, "continue with the next item");
    let g = gem(1, vec![Reply::text(&answer)]);
    let (call, ctx) = g.captured("plain", g.call(PROMPT, None, None));
    assert_eq!(call.code, Some(0), "{ctx}");
    assert!(
        !call.argv.iter().any(|a| a == "--resume" || a == "--model"),
        "{ctx}"
    );
    let a = g.analyze(&call);
    assert_eq!(a.outcome, Outcome::Success, "{a:?}\n{ctx}");
    let status = a.status.as_ref().expect("a status block");
    assert_eq!(status.exit_signal, Some(false), "{a:?}");
    let session = a.session_id.clone().expect("a session id");
    assert!(is_uuid(&session), "{session}");
    // The text is the whole answer, joined from the streamed pieces, without the thought.
    let doc: Value = serde_json::from_str(&call.stdout).expect("one JSON document");
    assert_eq!(doc["response"], answer.as_str(), "{ctx}");
    // Tokens: the main model's usage (prompt less cached, answer + thoughts, cached) plus the
    // router's classifier call.
    assert_eq!(
        a.tokens.input,
        fake_gemini::PROMPT_TOKENS - fake_gemini::CACHED_TOKENS + 812,
        "{a:?}"
    );
    assert_eq!(
        a.tokens.output,
        fake_gemini::ANSWER_TOKENS + fake_gemini::THOUGHT_TOKENS + 21,
        "{a:?}"
    );
    assert_eq!(a.tokens.cache_read, fake_gemini::CACHED_TOKENS, "{a:?}");
    assert_eq!(a.num_turns, Some(1), "{a:?}");
    assert_eq!(a.cost_usd, 0.0, "gemini reports no cost");
    // What the API saw: the key in x-goog-api-key, the prompt from stdin as the user message,
    // one router request and one turn.
    let turns = g.api.turns();
    assert_eq!(turns.len(), 1, "{ctx}");
    assert!(turns[0].header("x-goog-api-key").is_some(), "{ctx}");
    assert!(
        turns[0].last_user_text().contains("Work on the next item"),
        "{ctx}"
    );
    let side: Vec<_> = g
        .api
        .requests()
        .into_iter()
        .filter(|r| r.rpc() == "generateContent")
        .collect();
    assert_eq!(side.len(), 1, "the router's classifier: {ctx}");
    // The session is kept on disk under the temp HOME, named after its id.
    let chats = g.chat_files();
    assert!(
        chats
            .iter()
            .any(|f| f.to_string_lossy().contains(&session[..8])),
        "{chats:?}"
    );
}

/// A second call with the first call's session id resumes it: the request carries the first
/// prompt and answer, the session id stays the same.
fn resume_sends_the_earlier_conversation() {
    let g = gem(
        1,
        vec![
            Reply::text("First loop: I read the plan. The magic word is PERSIMMON."),
            Reply::text(&status_text("IN_PROGRESS", false, "second loop done")),
        ],
    );
    let model = Some("gemini-2.5-pro");
    let first = g.call("First loop prompt: read the plan.\n", None, model);
    g.capture("resume-first", &first);
    assert_eq!(first.code, Some(0), "{}", g.context(&first));
    let session = g.analyze(&first).session_id.expect("session id");
    let (second, ctx) = g.captured(
        "resume",
        g.call("Second loop prompt: go on.\n", Some(&session), model),
    );
    g.assert_resumed(&second, &session, &ctx);
    let i = second
        .argv
        .iter()
        .position(|a| a == "--resume")
        .expect("--resume in argv");
    assert_eq!(second.argv[i + 1], session);
    assert!(
        second
            .argv
            .windows(2)
            .any(|w| w == ["--model", "gemini-2.5-pro"]),
        "{ctx}"
    );
    let turns = g.api.turns();
    assert_eq!(turns[1].model(), "gemini-2.5-pro", "{ctx}");
    let convo = turns[1].conversation();
    let roles: Vec<&str> = convo.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["user", "model", "user"], "{convo:?}");
    assert!(convo[0].1.contains("First loop prompt"), "{convo:?}");
    assert!(convo[1].1.contains("PERSIMMON"), "{convo:?}");
    assert!(convo[2].1.contains("Second loop prompt"), "{convo:?}");
    // The session stays on disk under its id. Observed with gemini 0.61.0: the chat file's name
    // carries the minute it was written (`session-2026-11-29T03-22-<id8>.jsonl`), so a resume
    // that crosses a minute boundary leaves a second file for the same session. Every file
    // holding the session is named after it, and one of them has the resumed turn.
    let holding: Vec<(PathBuf, String)> = g
        .chat_files()
        .into_iter()
        .filter_map(|f| std::fs::read_to_string(&f).ok().map(|t| (f, t)))
        .filter(|(_, t)| t.contains(session.as_str()))
        .collect();
    assert!(!holding.is_empty(), "{:?}", g.chat_files());
    assert!(
        holding
            .iter()
            .all(|(f, _)| f.to_string_lossy().contains(&session[..8])),
        "{:?}",
        g.chat_files()
    );
    assert!(
        holding
            .iter()
            .any(|(_, t)| t.contains("Second loop prompt")),
        "{:?}",
        g.chat_files()
    );
}

/// The model asks for `write_file` and `replace`; gemini runs both without asking (yolo), sends
/// the results back, and the profile counts edits.
fn yolo_edits_the_project_without_approval() {
    let g = gem_scripted(1, |dir| {
        vec![
            Reply::tool_after(
                "I will write the notes file first.",
                "write_file",
                json!({"file_path": dir.join("src/notes.txt").display().to_string(), "content": "step one done\n"}),
            ),
            Reply::tool(
                "replace",
                json!({
                    "file_path": dir.join("README.md").display().to_string(),
                    "instruction": "Say that the demo has notes now.",
                    "old_string": "A project for the contract cases.",
                    "new_string": "A project for the contract cases, with notes in src/notes.txt."
                }),
            ),
            Reply::text(&status_text("IN_PROGRESS", false, "continue with step two")),
        ]
    });
    let notes = g.proj.join("src/notes.txt");
    let readme = g.proj.join("README.md");
    let (call, ctx) = g.captured("edit", g.call(PROMPT, None, Some("gemini-2.5-pro")));
    assert_eq!(call.code, Some(0), "{ctx}");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap_or_default(),
        "step one done\n",
        "write_file ran: {ctx}"
    );
    assert!(
        std::fs::read_to_string(&readme)
            .unwrap_or_default()
            .contains("with notes in src/notes.txt"),
        "replace ran: {ctx}"
    );
    let turns = g.api.turns();
    assert_eq!(turns.len(), 3, "{ctx}");
    let results: Vec<String> = turns[1..]
        .iter()
        .flat_map(|t| t.function_responses())
        .map(|(name, _)| name)
        .collect();
    assert_eq!(results, ["write_file", "replace"], "{ctx}");
    let a = g.analyze(&call);
    assert_eq!(a.outcome, Outcome::Success, "{a:?}\n{ctx}");
    assert!(a.status.is_some(), "{a:?}");
    assert_eq!(a.num_turns, Some(3), "{a:?}");
    let doc: Value = serde_json::from_str(&call.stdout).expect("json");
    assert_eq!(doc["stats"]["tools"]["totalCalls"], 2, "{ctx}");
    assert_eq!(
        doc["stats"]["files"]["totalLinesAdded"]
            .as_u64()
            .map(|n| n >= 1),
        Some(true)
    );
}

/// One failing call of `gemini-2.5-pro` with at most `attempts` tries and `replies`: gemini
/// exits with `code` and the profile reads an agent error of `kind`. Returns the call, its
/// context and how many turns the fake answered.
fn failing_call(
    name: &str,
    attempts: u32,
    replies: Vec<Reply>,
    code: i32,
    kind: ErrorKind,
) -> (Call, String, usize) {
    let g = gem(attempts, replies);
    let (call, a, ctx, turns) = g.outcome(name, g.call(PROMPT, None, Some("gemini-2.5-pro")));
    assert_eq!(call.code, Some(code), "{ctx}");
    assert_eq!(a.outcome, Outcome::AgentError, "{a:?}\n{ctx}");
    let e = a.error.expect("an error");
    assert_eq!(e.kind, kind, "{e:?}");
    (call, ctx, turns)
}

/// A per-day quota: 429 RESOURCE_EXHAUSTED, no retry, exit 173 (429 & 0xff), the error on
/// stderr only; the profile reads a usage limit.
fn daily_quota_is_a_usage_limit() {
    // Ten tries allowed: a daily quota is not retried whatever the setting.
    let quota = vec![Reply::daily_quota("gemini-2.5-pro", 23)];
    let (call, ctx, turns) = failing_call("quota", 10, quota, 173, ErrorKind::UsageLimit);
    assert!(
        call.stdout.is_empty(),
        "json mode prints errors on stderr: {ctx}"
    );
    assert!(
        call.stderr
            .contains("You have exhausted your daily quota on this model."),
        "{ctx}"
    );
    assert_eq!(turns, 1, "no retry: {ctx}");
    assert!(call.took < Duration::from_secs(30), "{ctx}");
}

/// `limit: 0` (no quota at all for this model on the key's tier): terminal, exit 173, the
/// API's own message; the profile reads a billing error (a paid plan or another model is
/// needed, waiting does not help).
fn zero_quota_is_a_billing_error() {
    let zero = vec![Reply::zero_quota("gemini-2.5-pro")];
    let (call, ctx, turns) = failing_call("zero_quota", 10, zero, 173, ErrorKind::Billing);
    assert_eq!(turns, 1, "no retry: {ctx}");
    assert!(call.stderr.contains("limit: 0"), "{ctx}");
}

/// A per-minute limit is retried by gemini itself (here `maxAttempts = 2`: one retry after
/// its 5 s initial backoff), then fails with exit 173; the profile reads a rate limit.
fn per_minute_limit_is_retried_then_a_rate_limit() {
    let limit = Reply::per_minute_limit("gemini-2.5-pro", 1);
    let replies = vec![limit.clone(), limit];
    let (call, ctx, turns) = failing_call("rate_limit", 2, replies, 173, ErrorKind::RateLimit);
    assert_eq!(turns, 2, "one retry: {ctx}");
    assert!(call.took >= Duration::from_secs(4), "{ctx}");
    assert!(call.stderr.contains("Retrying after"), "{ctx}");
}

/// 400 API_KEY_INVALID: exit 144 (400 & 0xff); the profile reads an auth error.
fn invalid_api_key_is_an_auth_error() {
    failing_call(
        "auth",
        1,
        vec![Reply::invalid_api_key()],
        144,
        ErrorKind::Auth,
    );
}

/// 503 UNAVAILABLE with one attempt allowed: exit 247 (503 & 0xff); overloaded.
fn overloaded_model_is_overloaded() {
    let overloaded = vec![Reply::overloaded()];
    failing_call("overloaded", 1, overloaded, 247, ErrorKind::Overloaded);
}

/// `--resume` with an id gemini does not know: exit 42, a message on stderr, no request.
fn unknown_session_is_reported() {
    let g = gem(1, Vec::new());
    let (call, ctx) = g.captured(
        "unknown_session",
        g.call(PROMPT, Some("0b5e1a52-7f7e-4a4c-9d7c-3b1d2f0e9a11"), None),
    );
    assert_eq!(call.code, Some(42), "{ctx}");
    assert!(g.api.turns().is_empty(), "{ctx}");
    let a = g.analyze(&call);
    assert!(a.unknown_session, "{a:?}\n{ctx}");
}

/// `--output-format stream-json` (not used by the profile): the events gemini prints, kept as
/// fixtures for a future jsonl profile (live mode).
fn stream_json_events_for_the_record() {
    let g = gem_scripted(1, |dir| {
        vec![
            Reply::tool_after(
                "Writing the notes.",
                "write_file",
                json!({"file_path": dir.join("notes.txt").display().to_string(), "content": "hi\n"}),
            ),
            Reply::text(&status_text("IN_PROGRESS", false, "next")),
            Reply::daily_quota("gemini-2.5-pro", 23),
        ]
    });
    let stream_argv = |session: Option<&str>| -> Vec<String> {
        g.argv(session, Some("gemini-2.5-pro"))
            .into_iter()
            .map(|a| {
                if a == "json" {
                    "stream-json".to_string()
                } else {
                    a
                }
            })
            .collect()
    };
    let call = g.run_args(stream_argv(None), PROMPT);
    let ctx = g.context(&call);
    g.capture("plain.stream-json", &call);
    assert_eq!(call.code, Some(0), "{ctx}");
    let events: Vec<Value> = call
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
        .collect();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"init"), "{ctx}");
    assert_eq!(types.last(), Some(&"result"), "{ctx}");
    assert!(
        types.contains(&"tool_use") && types.contains(&"tool_result"),
        "{ctx}"
    );
    // The answer arrives in pieces (`delta: true`): they must be concatenated, not joined by
    // newlines, to rebuild the status block.
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "message" && e["role"] == "assistant")
        .filter_map(|e| e["content"].as_str())
        .collect();
    assert!(text.ends_with("---END_HANK_STATUS---"), "{text}");
    let session = events[0]["session_id"]
        .as_str()
        .expect("session_id")
        .to_string();
    let quota = g.run_args(stream_argv(Some(&session)), PROMPT);
    g.capture("quota.stream-json", &quota);
    assert_eq!(quota.code, Some(173), "{}", g.context(&quota));
    let last: Value =
        serde_json::from_str(quota.stdout.lines().last().unwrap_or("{}")).expect("a result event");
    assert_eq!(last["status"], "error", "{last}");
}

// ---- through hank ----------------------------------------------------------------------------

/// `hank --agent gemini` in a git project with the real CLI (`GEMINI_CMD`), the fake API and
/// a temp HOME set up as for the direct cases.
fn hank(
    items: &[&str],
    attempts: u32,
    script: impl FnOnce(&Project) -> Vec<Reply>,
) -> HankRun<Gemini> {
    let h = HankRun::new(items, script);
    let tmp = h.p.dir.parent().expect("parent").join("tmp");
    set_up_home(&h.p.home, &tmp, attempts);
    let url = h.api.url();
    h.env("GEMINI_CMD", crate::agents::agent().path)
        .env("GEMINI_API_KEY", API_KEY)
        .env("GOOGLE_GEMINI_BASE_URL", url)
        .env("TMPDIR", tmp)
        .args(&["--agent", "gemini"])
}

/// Tick `item` in fix_plan.md (`replace`), write `src/<item>.txt` (`write_file`), answer with
/// a status block.
fn work_on(p: &Project, item: &str, status: &str) -> Vec<Reply> {
    let plan = p.dir.join(".hank/fix_plan.md").display().to_string();
    vec![
        Reply::tool_after(
            &format!("I will tick {item} in the plan."),
            "replace",
            json!({
                "file_path": plan,
                "instruction": format!("Mark the item {item} as done."),
                "old_string": format!("- [ ] {item}"),
                "new_string": format!("- [x] {item}")
            }),
        ),
        Reply::tool(
            "write_file",
            json!({"file_path": p.dir.join(format!("src/{item}.txt")).display().to_string(), "content": format!("{item} done\n")}),
        ),
        Reply::Text(status_text(
            status,
            false,
            &format!("after {item}, continue"),
        )),
    ]
}

/// SANDBOX=landlock with the real gemini: two loops (the second resumes the first's session)
/// of `replace`, `write_file` and a `run_shell_command` (`git add`/`git commit`) complete the
/// plan with gemini confined to the project, its TMPDIR and `~/.gemini/` (the profile's
/// `[sandbox] state`), and the egress proxy as its only way to the fake
/// (`GOOGLE_GEMINI_BASE_URL`, the profile's API). What gemini wrote outside the project is
/// listed in `docs/agent-profiles.md` ("What each client writes").
fn hank_sandboxed_edits_commit_and_complete_the_plan() {
    let h = hank(&["one", "two"], 1, |p| {
        let mut s = work_on(p, "one", "IN_PROGRESS");
        let answer = s.pop().expect("the answer");
        s.extend([
            Reply::tool(
                "run_shell_command",
                json!({"command": "git add -A && git commit -q -m 'feat: one'", "description": "Commit the work."}),
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
    // The client never touched its own configuration: nothing was guarded away.
    assert!(h.of_type("client_config_changed").is_empty(), "{ctx}");
    assert_eq!(h.resumed(), [false, true], "{ctx}");
    let log = support::git(&h.p.dir, &["log", "--format=%s"]);
    assert_eq!(log.lines().next(), Some("feat: one"), "{ctx}");
}

/// Two loops with gemini: it really edits fix_plan.md and writes files (progress), loop 2
/// resumes loop 1's session with loop 1's conversation and its own loop context, the plan is
/// complete after loop 2; tokens are recorded.
fn hank_edits_resumes_and_completes_the_plan() {
    let h = hank(&["one", "two"], 1, |p| {
        let mut s = work_on(p, "one", "IN_PROGRESS");
        s.extend(work_on(p, "two", "COMPLETE"));
        s
    });
    let o = h.run(&["--max-loops", "3"]);
    let ctx = h.context(&o);
    assert_eq!(o.status.code(), Some(0), "{ctx}");
    let s = h.p.status();
    assert_eq!(s["exit_reason"], "plan_complete", "{ctx}");
    assert_eq!(s["loop_count"], 2, "{ctx}");
    assert_eq!(s["agent"], "gemini", "{ctx}");
    assert_eq!(h.p.calls(), 0, "the fake claude was never called");
    let finished = h.assert_items_done(&["one", "two"], &ctx);
    for f in &finished {
        assert_eq!(f["agent"], "gemini", "{f}");
        // Three turns of the main model and one router call per loop.
        use fake_gemini::{ANSWER_TOKENS, CACHED_TOKENS, PROMPT_TOKENS, THOUGHT_TOKENS};
        assert_eq!(f["tokens"]["cache_read"], 3 * CACHED_TOKENS, "{f}");
        assert_eq!(
            f["tokens"]["input"],
            3 * (PROMPT_TOKENS - CACHED_TOKENS) + 812,
            "{f}"
        );
        assert_eq!(
            f["tokens"]["output"],
            3 * (ANSWER_TOKENS + THOUGHT_TOKENS) + 21,
            "{f}"
        );
    }
    assert_eq!(h.resumed(), [false, true], "{ctx}");
    let session = finished[0]["session_id"].as_str().expect("session id");
    assert!(is_uuid(session), "{session}");
    assert_eq!(finished[1]["session_id"], session, "one session: {ctx}");
    // Loop 2's first request carries loop 1's conversation and loop 2's own context.
    let turns = h.api.turns();
    assert_eq!(turns.len(), 6, "3 turns per loop: {ctx}");
    assert!(
        turns[3].text().contains("one done"),
        "loop 1's work in loop 2's history"
    );
    let ctx2 = turns[3].loop_context().unwrap_or_default();
    assert!(
        ctx2.contains("Hank loop 2") && ctx2.contains("two"),
        "{ctx2}"
    );
    let ctx1 = turns[0].loop_context().unwrap_or_default();
    assert!(ctx1.contains("Hank loop 1"), "{ctx1}");
}

/// A daily quota: with `--on-usage-limit exit` hank stops with usage_limit (exit 3); by
/// default it waits (gemini gives no reset time) until interrupted.
fn hank_daily_quota_is_a_usage_limit() {
    let h = hank(&["a"], 1, |_| {
        vec![Reply::daily_quota("gemini-2.5-pro", 23)]
    });
    let o = h.run(&["--max-loops", "2", "--on-usage-limit", "exit"]);
    let ctx = h.context(&o);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    let s = h.p.status();
    assert_eq!(s["exit_reason"], "usage_limit", "{ctx}");
    assert_eq!(s["last_loop"]["error_kind"], "usage_limit", "{ctx}");
    let f = &h.finished()[0];
    assert_eq!(f["outcome"], "agent_error", "{f}");
    assert!(
        f["error_message"]
            .as_str()
            .unwrap_or("")
            .contains("exhausted your daily quota"),
        "{f}"
    );

    let h = hank(&["a"], 1, |_| {
        vec![Reply::daily_quota("gemini-2.5-pro", 23)]
    });
    let child = h
        .cmd(&["--max-loops", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hank");
    let s =
        h.p.wait_status(Duration::from_secs(90), |s| s["state"] == "waiting");
    assert_eq!(s["wait_reason"], "usage_limit", "{s}");
    assert_eq!(s["last_loop"]["error_kind"], "usage_limit", "{s}");
    eprintln!(
        "gemini daily quota: hank waits until {}",
        s["waiting_until"]
    );
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let o = wait_with_timeout(child, Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(130), "{}", h.context(&o));
}

/// A per-minute limit that gemini does not retry (`maxAttempts = 1`): hank reads rate_limit,
/// backs off, and the next loop succeeds.
fn hank_rate_limit_backs_off_then_recovers() {
    let h = hank(&["a", "b"], 1, |_| {
        vec![
            Reply::per_minute_limit("gemini-2.5-pro", 1),
            Reply::Text(status_text("IN_PROGRESS", false, "recovered")),
        ]
    });
    h.p.hankrc("RETRY_BACKOFF_SECONDS=1\n");
    let o = h.run(&["--max-loops", "2"]);
    let ctx = h.context(&o);
    assert_eq!(o.status.code(), Some(3), "max loops: {ctx}");
    assert_eq!(h.error_kinds(), [json!("rate_limit"), Value::Null], "{ctx}");
    assert!(
        !h.wait_reasons().is_empty(),
        "a wait after the rate limit: {ctx}"
    );
    assert_eq!(h.p.status()["last_loop"]["outcome"], "success", "{ctx}");
}

/// A wrong API key stops the run: auth is agent_fatal (exit 2), one request only.
fn hank_invalid_key_is_agent_fatal() {
    let h = hank(&["a"], 1, |_| vec![Reply::invalid_api_key()]);
    let o = h.run(&["--max-loops", "3"]);
    let ctx = h.context(&o);
    assert_eq!(o.status.code(), Some(2), "{ctx}");
    let s = h.p.status();
    assert_eq!(s["exit_reason"], "agent_fatal", "{ctx}");
    assert_eq!(s["last_loop"]["error_kind"], "auth", "{ctx}");
    assert_eq!(h.api.turns().len(), 1, "{ctx}");
}

/// A session gemini does not know (state.json from elsewhere): gemini exits 42, hank drops
/// the session and the retry without it succeeds.
fn hank_unknown_session_starts_fresh() {
    let h = hank(&["a", "b"], 1, |_| {
        vec![Reply::Text(status_text(
            "IN_PROGRESS",
            false,
            "fresh start",
        ))]
    });
    // The session belongs to gemini (`agents.current`), else hank would park it as claude's.
    h.plant_stale_session(Some("gemini"));
    let o = h.run(&["--max-loops", "2"]);
    let ctx = h.context(&o);
    h.assert_started_fresh(&o, "Error resuming session", &ctx);
}

/// REVIEW_AGENT=gemini with the real gemini as worker and reviewer: after the worker's
/// "done", the reviewer (`--approval-mode plan`, a fresh session) gets the run's diff and its
/// verdict is read.
fn hank_review_in_plan_mode_is_read() {
    let h = hank(&["one"], 1, |p| {
        let mut s = work_on(p, "one", "COMPLETE");
        s.push(Reply::Text(
            "Read it.\n---HANK_REVIEW---\nVERDICT: APPROVE\nFINDINGS:\n- [minor] src/one.txt: fine\n---END_HANK_REVIEW---".into(),
        ));
        s
    })
    .env("REVIEW_AGENT", "gemini");
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
