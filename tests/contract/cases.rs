//! `hank run` end to end with the **real** Claude Code client against the scripted fake API
//! (`fake_api.rs`): files the client really writes count as progress, `--resume` continuity is
//! accepted by the client, permission denials, usage limits with their reset time, auth errors,
//! transient errors with backoff, max turns, unknown sessions.
//!
//! Each case runs once per real client listed in `HANK_REAL_CLAUDE` (see `main.rs`).
//! No network is used: `ANTHROPIC_BASE_URL` points at the fake on 127.0.0.1, `HOME` is a temp
//! dir, the client's own retries are off (`CLAUDE_CODE_MAX_RETRIES=0`).

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::fake_api::{self, Anthropic, Reply, status_text};
use crate::harness::{HankRun, clip};
use crate::http;
use crate::support::{Project, children_of, group_after, signal, wait_with_timeout};

/// How the client authenticates.
#[derive(Clone, Copy)]
enum Auth {
    ApiKey,
    /// Subscription auth: the only mode in which the client reads the unified limit headers.
    OAuth,
}

/// `hank` with the real client of this trial against the fake API.
struct Real {
    hank: HankRun<Anthropic>,
    claude: String,
}

impl std::ops::Deref for Real {
    type Target = HankRun<Anthropic>;
    fn deref(&self) -> &Self::Target {
        &self.hank
    }
}

impl Real {
    fn new(items: &[&str], script: Vec<Reply>) -> Self {
        Self::scripted(items, |_| script)
    }

    /// A git project with `items`, and the fake API playing the script built from it; the
    /// client's environment: the fake's URL, its own retries, telemetry and updates off.
    fn scripted(items: &[&str], script: impl FnOnce(&Project) -> Vec<Reply>) -> Self {
        let claude = crate::client().path.display().to_string();
        let hank = HankRun::new(items, script);
        let url = hank.api.url();
        let hank = hank
            .env("ANTHROPIC_BASE_URL", url)
            .env("CLAUDE_CODE_MAX_RETRIES", "0")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("IS_SANDBOX", "1")
            .env("TZ", "UTC");
        Self { hank, claude }
    }

    fn cmd(&self, auth: Auth, args: &[&str]) -> Command {
        self.cmd_with(&self.claude, auth, args)
    }

    /// `hank ARGS` with `claude_cmd` as CLAUDE_CODE_CMD and the client's environment.
    fn cmd_with(&self, claude_cmd: &str, auth: Auth, args: &[&str]) -> Command {
        let mut c = self.hank.cmd(&["--claude-cmd", claude_cmd]);
        match auth {
            Auth::ApiKey => c.env("ANTHROPIC_API_KEY", "sk-ant-api03-fake-contract-key"),
            Auth::OAuth => c.env(
                "CLAUDE_CODE_OAUTH_TOKEN",
                "sk-ant-oat01-fake-contract-token",
            ),
        };
        c.args(args);
        c
    }

    fn run(&self, auth: Auth, args: &[&str]) -> Output {
        self.cmd(auth, args).output().expect("run hank")
    }
}

/// Read the plan, tick `item`, write `src/<item>.txt`, answer with a status block.
fn work_on(real_plan: &str, dir: &Path, item: &str, status: &str) -> Vec<Reply> {
    vec![
        Reply::tool("Read", json!({"file_path": real_plan})),
        Reply::tool(
            "Edit",
            json!({"file_path": real_plan, "old_string": format!("- [ ] {item}"), "new_string": format!("- [x] {item}")}),
        ),
        Reply::tool(
            "Write",
            json!({"file_path": dir.join(format!("src/{item}.txt")).display().to_string(), "content": format!("{item} done\n")}),
        ),
        Reply::Text(status_text(
            status,
            false,
            &format!("after {item}, continue"),
        )),
    ]
}

/// Two loops: the client really edits fix_plan.md and writes files (progress from git), the
/// second loop resumes the first loop's session and the client accepts it.
pub(crate) fn real_client_writes_files_resumes_and_completes_the_plan() {
    let real = Real::scripted(&["one", "two"], |p| {
        let plan = p.dir.join(".hank/fix_plan.md").display().to_string();
        let mut script = work_on(&plan, &p.dir, "one", "IN_PROGRESS");
        script.extend(work_on(&plan, &p.dir, "two", "COMPLETE"));
        script
    });
    let o = real.run(Auth::ApiKey, &["--max-loops", "3"]);
    let ctx = real.context(&o);
    assert_eq!(o.status.code(), Some(0), "{ctx}");
    let s = real.p.status();
    assert_eq!(s["exit_reason"], "plan_complete", "{ctx}");
    assert_eq!(s["loop_count"], 2, "{ctx}");
    let finished = real.assert_items_done(&["one", "two"], &ctx);
    for f in &finished {
        assert!(f["cost_usd"].as_f64().unwrap() > 0.0, "{f}");
    }
    // Continuity: loop 2 was started with --resume and the client kept the session.
    assert!(real.resumed()[1], "loop 2 was started with --resume");
    assert_eq!(finished[0]["session_id"], finished[1]["session_id"]);
    let turns = real.api.turns();
    assert_eq!(turns.len(), 8, "4 turns per loop");
    let session = finished[0]["session_id"].as_str().unwrap();
    assert_eq!(turns[4].header("x-claude-code-session-id"), Some(session));
    let history = turns[4].body["messages"].to_string();
    assert!(
        history.contains("one done"),
        "loop 2's first request carries loop 1's conversation"
    );
    // Loop 2's own context (next item: two) is the newest message of the resumed session.
    let ctx2 = turns[4].loop_context().unwrap_or_default();
    assert!(
        ctx2.contains("Hank loop 2") && ctx2.contains("two"),
        "{ctx2}"
    );
}

/// SANDBOX=landlock with the real client: two loops of tool-using edits (Read, Edit, Write)
/// and Bash commands (`git add`, `git commit`: a shell, git and its writes in `.git` and
/// `/dev/null`) complete the plan with the client confined to the project, its TMPDIR and the
/// state paths of the claude profile's `[sandbox] state` (its configuration kept), and the egress proxy as its only way
/// to the (fake) API. What the client wrote outside the project is listed in
/// `docs/agent-profiles.md` ("What each client writes").
pub(crate) fn sandboxed_client_edits_commits_and_completes_the_plan() {
    let real = Real::scripted(&["one", "two"], |p| {
        let plan = p.dir.join(".hank/fix_plan.md").display().to_string();
        let mut script = work_on(&plan, &p.dir, "one", "IN_PROGRESS");
        let answer = script.pop().expect("the answer");
        script.extend([
            Reply::tool(
                "Bash",
                json!({"command": "git add -A", "description": "stage"}),
            ),
            Reply::tool(
                "Bash",
                json!({"command": "git commit -q -m 'feat: one'", "description": "commit"}),
            ),
            answer,
        ]);
        script.extend(work_on(&plan, &p.dir, "two", "COMPLETE"));
        script
    });
    // A user's HOME as the first confined run finds it: `~/.claude.json` exists, with its
    // configuration (an MCP server); `~/.claude/` holds the user's settings and memory. The
    // configuration is not the client's to change (issue 47): its lock, temp file + rename and
    // in-place write of `~/.claude.json` are refused and it works on without saving it; the
    // settings and memory in `~/.claude/` are guarded (it never touches them: no change to undo).
    const CLAUDE_JSON: &str = "{\"mcpServers\":{}}";
    const SETTINGS: &str = "{\"permissions\":{}}";
    const MEMORY: &str = "# Mine\n";
    std::fs::write(real.p.home.join(".claude.json"), CLAUDE_JSON).unwrap();
    std::fs::create_dir_all(real.p.home.join(".claude")).unwrap();
    std::fs::write(real.p.home.join(".claude/settings.json"), SETTINGS).unwrap();
    std::fs::write(real.p.home.join(".claude/CLAUDE.md"), MEMORY).unwrap();
    let real = Real {
        hank: real.hank.sandboxed(),
        claude: real.claude,
    };
    let (o, ctx) = real.output(
        real.cmd(Auth::ApiKey, &["--max-loops", "3"])
            .env("GIT_AUTHOR_NAME", "agent")
            .env("GIT_AUTHOR_EMAIL", "agent@example.com")
            .env("GIT_COMMITTER_NAME", "agent")
            .env("GIT_COMMITTER_EMAIL", "agent@example.com"),
    );
    assert_eq!(o.status.code(), Some(0), "{ctx}");
    assert_eq!(real.p.status()["exit_reason"], "plan_complete", "{ctx}");
    real.assert_items_done(&["one", "two"], &ctx);
    real.assert_confined(&[], &ctx);
    assert_eq!(real.resumed(), [false, true], "{ctx}");
    let log = crate::support::git(&real.p.dir, &["log", "--format=%s"]);
    assert_eq!(log.lines().next(), Some("feat: one"), "{ctx}");
    let f = &real.finished()[0];
    assert_eq!(f["permission_denials"], 0, "{ctx}");
    // Its own state was written where the profile lets it: the session (resumed in loop 2)
    // under `~/.claude/projects/`; its configuration was left as it was, and nothing of it had
    // to be undone.
    assert!(real.p.home.join(".claude/projects").is_dir(), "{ctx}");
    let read = |f: &str| std::fs::read_to_string(real.p.home.join(f)).unwrap_or_default();
    assert_eq!(read(".claude.json"), CLAUDE_JSON, "{ctx}");
    assert_eq!(read(".claude/settings.json"), SETTINGS, "{ctx}");
    assert_eq!(read(".claude/CLAUDE.md"), MEMORY, "{ctx}");
    assert_eq!(
        real.of_type("client_config_changed"),
        [] as [serde_json::Value; 0],
        "{ctx}"
    );
}

/// The loop context reaches the agent on every loop of a resumed session: on loop N the
/// request the API receives carries loop N's own context (loop number, next item, and on
/// loop 2 the denial of loop 1), never a replay of loop 1's. Clients from 2.1.257 on replay
/// the first `--append-system-prompt` on `--resume`; hank's context rides on stdin instead.
pub(crate) fn every_resumed_loop_receives_its_own_context() {
    let items = ["one", "two", "three", "four"];
    let real = Real::scripted(&items, |p| {
        let plan = p.dir.join(".hank/fix_plan.md").display().to_string();
        let mut script = vec![Reply::tool(
            "Bash",
            json!({"command": "curl -s http://127.0.0.1:9/x.sh", "description": "fetch"}),
        )];
        script.extend(work_on(&plan, &p.dir, "one", "IN_PROGRESS"));
        script.extend(work_on(&plan, &p.dir, "two", "IN_PROGRESS"));
        script.extend(work_on(&plan, &p.dir, "three", "IN_PROGRESS"));
        script
    });
    let o = real.run(Auth::ApiKey, &["--max-loops", "3"]);
    let ctx = real.context(&o);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    let finished = real.finished();
    assert_eq!(finished.len(), 3, "{ctx}");
    let session = finished[0]["session_id"].clone();
    for f in &finished {
        assert_eq!(f["outcome"], "success", "{ctx}");
        assert_eq!(f["session_id"], session, "one resumed session: {ctx}");
    }
    assert_eq!(real.resumed(), [false, true, true], "{ctx}");
    // The first request of each loop is the one whose newest message carries a context.
    let contexts: Vec<String> = real
        .api
        .turns()
        .iter()
        .filter_map(http::Request::loop_context)
        .collect();
    let newest: Vec<String> = real
        .api
        .turns()
        .iter()
        .map(|t| clip(&t.last_user_text(), 3000).to_string())
        .collect();
    assert_eq!(
        contexts.len(),
        3,
        "{contexts:#?}\nnewest messages: {newest:#?}"
    );
    for (i, c) in contexts.iter().enumerate() {
        let n = i + 1;
        assert!(c.contains(&format!("Hank loop {n}.")), "loop {n}: {c}");
        assert!(
            c.contains(&format!("next: {}", items[i])),
            "loop {n} names its own next item: {c}"
        );
    }
    assert!(
        contexts[1].contains("curl -s http://127.0.0.1:9/x.sh"),
        "{}",
        contexts[1]
    );
    assert!(contexts[1].contains("Do not retry"), "{}", contexts[1]);
    assert!(!contexts[0].contains("Denied"), "{}", contexts[0]);
    assert!(
        !contexts[2].contains("Denied"),
        "the denial is relayed once: {}",
        contexts[2]
    );
    // The system prompt carries no loop context at all (nothing for a snapshot to freeze).
    for t in real.api.turns() {
        assert!(
            !t.body["system"].to_string().contains("Hank loop"),
            "{}",
            t.body["system"]
        );
    }
}

/// A Bash call outside ALLOWED_TOOLS: the client denies it, hank reads the denial from the
/// result, tells the agent in the next loop's context, and stops after two such loops.
pub(crate) fn denied_bash_is_relayed_then_stops_with_permission_denied() {
    let bash = || {
        Reply::tool(
            "Bash",
            json!({"command": "curl -s http://127.0.0.1:9/install.sh", "description": "fetch the installer"}),
        )
    };
    let script = vec![
        bash(),
        Reply::Text(status_text("BLOCKED", false, "need curl")),
        bash(),
        Reply::Text(status_text("BLOCKED", false, "still need curl")),
    ];
    let real = Real::new(&["a", "b"], script);
    let o = real.run(Auth::ApiKey, &["--max-loops", "4"]);
    let ctx = real.context(&o);
    assert_eq!(o.status.code(), Some(2), "{ctx}");
    assert_eq!(real.p.status()["exit_reason"], "permission_denied", "{ctx}");
    let finished = real.finished();
    assert_eq!(finished.len(), 2, "{ctx}");
    assert_eq!(finished[0]["permission_denials"], 1, "{ctx}");
    let turns = real.api.turns();
    assert_eq!(turns.len(), 4, "{ctx}");
    // The tool result the client sent back is an error (the denial).
    let result = &turns[1].body["messages"];
    assert!(result.to_string().contains("\"is_error\":true"), "{result}");
    // Loop 2's context names the denied command.
    let ctx2 = turns[2].loop_context().unwrap_or_default();
    assert!(ctx2.contains("curl"), "loop 2 context: {ctx2}");
}

/// 401 (bad key) and 400 "credit balance too low": the client reports auth / billing; hank
/// stops at once with agent_fatal (retrying cannot help).
pub(crate) fn auth_and_billing_errors_are_agent_fatal() {
    let cases = [
        (
            Reply::error(401, "authentication_error", "invalid x-api-key"),
            "auth",
        ),
        (
            Reply::error(
                400,
                "invalid_request_error",
                "Your credit balance is too low to access the Anthropic API.",
            ),
            "billing",
        ),
    ];
    for (reply, kind) in cases {
        let real = Real::new(&["a"], vec![reply]);
        let o = real.run(Auth::ApiKey, &[]);
        let ctx = real.context(&o);
        assert_eq!(o.status.code(), Some(2), "{kind}: {ctx}");
        let s = real.p.status();
        assert_eq!(s["exit_reason"], "agent_fatal", "{kind}: {ctx}");
        assert_eq!(s["last_loop"]["error_kind"], kind, "{ctx}");
        assert_eq!(real.api.turns().len(), 1);
    }
}

/// 529, 429 (API key) and 500: each is a transient failure with a backoff wait, then the
/// next loop succeeds.
pub(crate) fn transient_errors_back_off_then_recover() {
    let script = vec![
        Reply::error(529, "overloaded_error", "Overloaded"),
        Reply::error(
            429,
            "rate_limit_error",
            "This request would exceed your account's rate limit. Please try again later.",
        ),
        Reply::error(500, "api_error", "Internal server error"),
        Reply::Text(status_text("IN_PROGRESS", false, "recovered")),
    ];
    let real = Real::new(&["a", "b"], script);
    real.p.hankrc("RETRY_BACKOFF_SECONDS=1\n");
    let o = real.run(Auth::ApiKey, &["--max-loops", "4"]);
    let ctx = real.context(&o);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    assert_eq!(
        real.error_kinds(),
        vec![
            json!("overloaded"),
            json!("rate_limit"),
            json!("server"),
            Value::Null
        ],
        "{ctx}"
    );
    assert_eq!(real.wait_reasons(), vec![json!("backoff"); 3], "{ctx}");
    assert_eq!(real.p.status()["last_loop"]["outcome"], "success");
    assert_eq!(
        real.api.turns().len(),
        4,
        "the client did not retry on its own"
    );
}

/// An overloaded API the client retries on its own (529 twice, then an answer, with the
/// client's retries on): hank shows the retries as a wait — one `api_retry` event for the
/// call (its attempt, the status, the next try), none left in status.json after the call —
/// and the call is a success.
pub(crate) fn client_retries_of_an_overloaded_api_show_as_a_wait() {
    let script = vec![
        Reply::error(529, "overloaded_error", "Overloaded"),
        Reply::error(529, "overloaded_error", "Overloaded"),
        Reply::Text(status_text("IN_PROGRESS", false, "recovered")),
    ];
    let real = Real::new(&["a", "b"], script);
    let mut cmd = real.cmd(Auth::ApiKey, &["--max-loops", "1"]);
    cmd.env("CLAUDE_CODE_MAX_RETRIES", "3");
    let (o, ctx) = real.output(&mut cmd);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    let retries = real.p.events_of("api_retry");
    assert_eq!(retries.len(), 1, "{ctx}");
    assert_eq!(retries[0]["attempt"], 1, "{ctx}");
    assert_eq!(retries[0]["http_status"], 529, "{ctx}");
    assert!(retries[0]["next_at"].is_string(), "{ctx}");
    let s = real.p.status();
    assert_eq!(s["last_loop"]["outcome"], "success", "{ctx}");
    assert!(s.get("api_retry").is_none(), "{ctx}");
    assert_eq!(
        real.api.turns().len(),
        3,
        "the client did not retry on its own"
    );
}

/// A subscription usage limit (OAuth + unified headers): hank waits until the reset time the
/// client reports (+60 s), in json and in stream-json (`--live`) mode; `--on-usage-limit exit`
/// stops with 3.
pub(crate) fn usage_limit_waits_for_the_reported_reset() {
    for (mode, args) in [
        ("json", vec![]),
        ("stream-json", vec!["--live"]),
        ("exit policy", vec!["--on-usage-limit", "exit"]),
    ] {
        let now = jiff::Timestamp::now().as_second();
        let reset = (now / 60 + 3) * 60;
        let script = vec![Reply::usage_limit(reset, "five_hour")];
        let real = Real::new(&["a"], script);
        let mut cmd = real.cmd(Auth::OAuth, &args);
        cmd.env("TZ", "Europe/Oslo");
        if mode == "exit policy" {
            let (o, ctx) = real.output(&mut cmd);
            assert_eq!(o.status.code(), Some(3), "{ctx}");
            assert_eq!(real.p.status()["exit_reason"], "usage_limit");
            continue;
        }
        let child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let s = real
            .p
            .wait_status(Duration::from_secs(60), |s| s["state"] == "waiting");
        assert_eq!(s["wait_reason"], "usage_limit", "{mode}: {s}");
        let until: jiff::Timestamp = s["waiting_until"].as_str().unwrap().parse().unwrap();
        let delta = until.as_second() - reset;
        assert!(
            (0..=120).contains(&delta),
            "{mode}: waiting until {until}, reset {reset} (delta {delta} s)"
        );
        assert_eq!(s["last_loop"]["error_kind"], "usage_limit");
        signal(&child, Signal::SIGINT);
        let o = wait_with_timeout(child, Duration::from_secs(20));
        assert_eq!(o.status.code(), Some(130), "{}", real.context(&o));
        eprintln!("usage limit ({mode}): reset {reset}, hank waits until {until}");
    }
}

/// `--max-turns 1` passed through CLAUDE_CODE_CMD: the client ends with error_max_turns after
/// one tool turn; hank classifies it as max_turns.
pub(crate) fn max_turns_is_classified() {
    let script = vec![
        Reply::tool("Glob", json!({"pattern": "*.md"})),
        Reply::Text(status_text("IN_PROGRESS", false, "never reached")),
    ];
    let real = Real::new(&["a"], script);
    let cmd = format!("{} --max-turns 1", real.claude);
    let (o, ctx) = real.output(&mut real.cmd_with(&cmd, Auth::ApiKey, &["--max-loops", "1"]));
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    let s = real.p.status();
    assert_eq!(s["last_loop"]["error_kind"], "max_turns", "{ctx}");
}

/// A stored session the client does not know: hank drops it and retries at once without it.
pub(crate) fn unknown_session_is_dropped_and_the_client_starts_fresh() {
    let script = vec![Reply::Text(status_text(
        "IN_PROGRESS",
        false,
        "fresh start",
    ))];
    let real = Real::new(&["a", "b"], script);
    real.plant_stale_session(None);
    let o = real.run(Auth::ApiKey, &["--max-loops", "2"]);
    let ctx = real.context(&o);
    real.assert_started_fresh(&o, "No conversation found", &ctx);
}

/// Bash commands the default ALLOWED_TOOLS permit (`git add`, `git commit`) really run: the
/// client commits its work, HEAD moves, and hank still counts the committed files as progress.
pub(crate) fn allowed_git_commands_run_and_committed_work_is_progress() {
    let real = Real::scripted(&["a", "b"], |p| {
        let file = p.dir.join("src/feature.rs").display().to_string();
        vec![
            Reply::tool(
                "Write",
                json!({"file_path": file, "content": "pub fn f() {}\n"}),
            ),
            Reply::tool(
                "Bash",
                json!({"command": "git add -A", "description": "stage"}),
            ),
            Reply::tool(
                "Bash",
                json!({"command": "git commit -q -m 'feat: f'", "description": "commit"}),
            ),
            Reply::Text(status_text("IN_PROGRESS", false, "next: b")),
        ]
    });
    let (o, ctx) = real.output(
        real.cmd(Auth::ApiKey, &["--max-loops", "1"])
            .env("GIT_AUTHOR_NAME", "agent")
            .env("GIT_AUTHOR_EMAIL", "agent@example.com")
            .env("GIT_COMMITTER_NAME", "agent")
            .env("GIT_COMMITTER_EMAIL", "agent@example.com"),
    );
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    let log = crate::support::git(&real.p.dir, &["log", "--format=%s"]);
    assert_eq!(log, "feat: f\ninit", "{ctx}");
    let f = &real.finished()[0];
    assert_eq!(f["permission_denials"], 0, "{ctx}");
    assert!(f["files_changed"].as_u64().unwrap() >= 1, "{f}");
}

/// The client process hank spawned (its process-group leader), once it exists.
fn client_pid(hank: &std::process::Child) -> i32 {
    let hank = i32::try_from(hank.id()).unwrap();
    let start = std::time::Instant::now();
    loop {
        if let Some(pid) = children_of(hank).first() {
            return *pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no client process"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A hung API: hank's timeout stops the real client and everything in its process group
/// (timeout), and SIGINT / SIGTERM during the request stop it the same way (exit 130).
pub(crate) fn hung_request_timeout_and_signals_leave_no_client_process() {
    for how in ["timeout", "SIGINT", "SIGTERM"] {
        let script = vec![Reply::Hang(Duration::from_secs(120))];
        let real = Real::new(&["a"], script);
        // Under load the client may need seconds to start: only the timeout case uses a short
        // timeout (and does not need the request to have been made).
        let timeout = if how == "timeout" { "3s" } else { "120s" };
        let child = real
            .cmd(Auth::ApiKey, &["-t", timeout, "--max-loops", "1"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let client = client_pid(&child);
        let start = std::time::Instant::now();
        while how != "timeout" && real.api.turns().is_empty() {
            assert!(start.elapsed() < Duration::from_secs(60), "no request");
            std::thread::sleep(Duration::from_millis(20));
        }
        match how {
            "SIGINT" => signal(&child, Signal::SIGINT),
            "SIGTERM" => signal(&child, Signal::SIGTERM),
            _ => {}
        }
        let o = wait_with_timeout(child, Duration::from_secs(30));
        let ctx = real.context(&o);
        let left = group_after(client, Duration::from_secs(3));
        assert!(left.is_empty(), "{how}: client group survivors {left:?}");
        let s = real.p.status();
        if how == "timeout" {
            assert_eq!(o.status.code(), Some(3), "{ctx}");
            assert_eq!(s["last_loop"]["outcome"], "timeout", "{ctx}");
        } else {
            assert_eq!(o.status.code(), Some(130), "{how}: {ctx}");
            assert_eq!(s["exit_reason"], "interrupted");
        }
        eprintln!(
            "real client, {how}: hank exit {:?} after {:?}",
            o.status.code(),
            start.elapsed()
        );
    }
}

/// Ctrl-C during a call whose first request was answered (a tool call) and whose second hangs.
/// The real clients write no result on a signal (SIGTERM or SIGINT alike, 2.1.197 and
/// 2.1.332): the call has no reported cost, so it is charged an estimate, and every record
/// says so (`cost_estimated` in the event and status.json, the warning naming the basis).
pub(crate) fn an_interrupted_call_is_charged_an_estimate_said_as_such() {
    let real = Real::scripted(&["a"], |p| {
        let file = p.dir.join("src/a.txt").display().to_string();
        vec![
            Reply::tool("Write", json!({"file_path": file, "content": "a\n"})),
            Reply::Hang(Duration::from_secs(120)),
        ]
    });
    let child = real
        .cmd(Auth::ApiKey, &["--max-loops", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while real.api.turns().len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no second request"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(&child, Signal::SIGINT);
    let o = wait_with_timeout(child, Duration::from_secs(30));
    let ctx = real.context(&o);
    assert_eq!(o.status.code(), Some(130), "{ctx}");
    let finished = real.p.events_of("agent_finished");
    assert_eq!(finished.len(), 1, "{ctx}");
    let f = &finished[0];
    // A client that one day writes its result on a signal is charged what it reported.
    let estimated = f["cost_estimated"].as_bool().unwrap_or(false);
    let last = &real.p.status()["last_loop"];
    assert_eq!(
        last["cost_estimated"].as_bool().unwrap_or(false),
        estimated,
        "{ctx}"
    );
    if estimated {
        assert!(ctx.contains("charged an estimate"), "{ctx}");
    } else {
        assert!(f["cost_usd"].as_f64().unwrap_or(0.0) > 0.0, "{ctx}");
    }
}

/// No API at all (connection refused): a network error, a backoff wait, not a fatal stop.
pub(crate) fn unreachable_api_is_a_network_error_with_backoff() {
    let real = Real::new(&["a"], Vec::new());
    // A port nothing listens on: bind, read the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (o, ctx) = real.output(
        real.cmd(Auth::ApiKey, &["--max-loops", "1"])
            .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}")),
    );
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    let s = real.p.status();
    assert_eq!(s["last_loop"]["error_kind"], "network", "{ctx}");
    assert!(
        real.p
            .events()
            .iter()
            .any(|e| e["type"] == "waiting" && e["reason"] == "backoff")
            || s["exit_reason"] == "max_loops",
        "{ctx}"
    );
}

/// `--live` (stream-json) with the real client: the live log shows the tool call and the
/// text as they stream, and the result is still analyzed (session, cost, status block).
pub(crate) fn live_mode_with_the_real_client() {
    let real = Real::scripted(&["a", "b"], |p| {
        let file = p.dir.join("notes.txt").display().to_string();
        vec![
            Reply::tool("Write", json!({"file_path": file, "content": "live\n"})),
            Reply::Text(status_text("IN_PROGRESS", false, "live works")),
        ]
    });
    let o = real.run(Auth::ApiKey, &["--live", "--max-loops", "1"]);
    let ctx = real.context(&o);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    let live = std::fs::read_to_string(real.p.dir.join(".hank/live.log")).unwrap_or_default();
    assert!(live.contains("Write"), "live.log: {live}\n{ctx}");
    assert!(live.contains("Done with this step"), "live.log: {live}");
    let f = &real.finished()[0];
    assert_eq!(f["outcome"], "success", "{ctx}");
    assert_eq!(f["recommendation"], "live works");
    assert!(f["session_id"].is_string());
    assert_eq!(
        std::fs::read_to_string(real.p.dir.join("notes.txt")).unwrap(),
        "live\n"
    );
}

/// Subscription windows: the fake API sends the unified rate-limit headers with its answer
/// (as the real API does for OAuth auth), the client reports them in a `rate_limit_event`
/// (2.1.197: the representative window only; 2.1.330: every window in `unifiedWindows`), and
/// hank, asked for MAX_WINDOW_PERCENT without `--live`, requests stream-json, reads the
/// windows into `status.json` and stops at the limit with `usage_window` (exit policy).
pub(crate) fn usage_windows_are_read_into_status() {
    let now = jiff::Timestamp::now().as_second();
    let (five, seven) = (now + 3 * 3600, now + 4 * 86_400);
    let (real, o, out) = with_windows(
        &[("5h", 0.42, five), ("7d", 0.86, seven)],
        &[
            "--max-window-percent",
            "five_hour=80,seven_day=85",
            "--on-usage-limit",
            "exit",
            "--max-loops",
            "3",
        ],
        "",
    );
    let ctx = real.context(&o);
    assert!(out.contains(r#""type":"rate_limit_event""#), "{ctx}");
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    let s = real.p.status();
    assert_eq!(s["exit_reason"], "usage_window", "{s}");
    assert_eq!(
        real.api.turns().len(),
        1,
        "stopped before a second call: {ctx}"
    );
    let w = &s["usage_windows"];
    assert_eq!(w["seven_day"]["utilization"], 0.86, "{s}");
    assert_eq!(w["seven_day"]["status"], "allowed_warning", "{s}");
    assert_eq!(w["seven_day"]["limit_percent"], 85, "{s}");
    let at: jiff::Timestamp = w["seven_day"]["resets_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(at.as_second(), seven);
    // Only 2.1.330 reports the windows that are not the representative one.
    if at_least(&crate::client().version, (2, 1, 330)) {
        assert_eq!(w["five_hour"]["utilization"], 0.42, "{s}");
        assert_eq!(w["five_hour"]["status"], "allowed", "{s}");
    } else {
        assert!(w.get("five_hour").is_none(), "{s}");
    }

    // Below the limits (every window `allowed`): the loop goes on; the event still comes.
    let (real, o, _) = with_windows(
        &[("5h", 0.12, five), ("7d", 0.30, seven)],
        &["--max-window-percent", "five_hour=80", "--max-loops", "1"],
        " (allowed)",
    );
    let ctx = real.context(&o);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    let s = real.p.status();
    assert_eq!(s["exit_reason"], "max_loops", "{s}");
    assert!(s["usage_windows"].is_object(), "{s}");
}

/// One answer with the unified headers of `windows` (`(abbr, utilization, reset)`), hank run
/// with OAuth auth and `args`: the run, its output and loop 1's stdout, whose
/// `rate_limit_event` lines are printed (with `label`).
fn with_windows(
    windows: &[(&str, f64, i64)],
    args: &[&str],
    label: &str,
) -> (Real, Output, String) {
    let script = vec![Reply::Headed {
        headers: fake_api::unified_windows(windows),
        reply: Box::new(Reply::Text(status_text("IN_PROGRESS", false, "go on"))),
    }];
    let real = Real::new(&["a", "b"], script);
    let o = real.run(Auth::OAuth, args);
    let out = std::fs::read_to_string(real.p.dir.join(".hank/logs/loop-00001.out")).unwrap();
    for line in out.lines().filter(|l| l.contains("rate_limit_event")) {
        eprintln!(
            "{} rate_limit_event{label}: {line}",
            crate::client().version
        );
    }
    (real, o, out)
}

/// `version` (`2.1.330`) is at least `min`.
fn at_least(version: &str, min: (u32, u32, u32)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let v = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    v >= min
}

/// CLIENT_SETTINGS=project: the client accepts `--setting-sources project,local` and does not
/// run a Stop hook from the user's `~/.claude/settings.json`; with the default (`all`) it does
/// (the hook writes a marker file).
pub(crate) fn client_settings_project_skips_the_users_stop_hook() {
    let run = |setting: &str| {
        let real = Real::new(
            &["a", "b"],
            vec![Reply::Text(status_text("IN_PROGRESS", false, "settings"))],
        );
        let marker = real.p.home.join("stop-hook-ran");
        // A user's HOME with `~/.claude.json` (the client cannot create it confined: it writes
        // it through a temp file and a rename in HOME, and falls back to writing it in place)
        // and the user's own settings in `~/.claude/settings.json`.
        std::fs::write(real.p.home.join(".claude.json"), "{}").unwrap();
        let hook = json!({"hooks": {"Stop": [{"hooks": [{"type": "command",
            "command": format!("touch {}", marker.display())}]}]}});
        std::fs::create_dir_all(real.p.home.join(".claude")).unwrap();
        std::fs::write(real.p.home.join(".claude/settings.json"), hook.to_string()).unwrap();
        let o = real.run(
            Auth::ApiKey,
            &["--max-loops", "1", "--client-settings", setting],
        );
        let ctx = real.context(&o);
        assert_eq!(o.status.code(), Some(3), "{setting}: {ctx}");
        assert_eq!(real.finished()[0]["outcome"], "success", "{setting}: {ctx}");
        let argv =
            std::fs::read_to_string(real.p.dir.join(".hank/logs/hank.log")).unwrap_or_default();
        (marker.exists(), argv, ctx)
    };
    let (ran, _, ctx) = run("project");
    assert!(
        !ran,
        "the user's Stop hook ran with CLIENT_SETTINGS=project\n{ctx}"
    );
    let (ran, _, ctx) = run("all");
    assert!(
        ran,
        "the user's Stop hook did not run with CLIENT_SETTINGS=all\n{ctx}"
    );
}

/// Without `--live` hank asks the real client for stream-json (so FIRST_OUTPUT_TIMEOUT and
/// IDLE_TIMEOUT see it work) and reads the answer strictly: a success with its session, cost
/// and status block; the first byte comes well inside FIRST_OUTPUT_TIMEOUT.
pub(crate) fn json_answers_stream_and_read_strictly_without_live() {
    let real = Real::new(
        &["a", "b"],
        vec![Reply::Text(status_text("IN_PROGRESS", false, "streamed"))],
    );
    let o = real.run(
        Auth::ApiKey,
        &[
            "--max-loops",
            "1",
            "--first-output-timeout",
            "30s",
            "--idle-timeout",
            "2m",
        ],
    );
    let ctx = real.context(&o);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    let out =
        std::fs::read_to_string(real.p.dir.join(".hank/logs/loop-00001.out")).unwrap_or_default();
    assert!(out.lines().count() >= 2, "not a stream: {ctx}");
    // What streaming costs in bytes (PERFORMANCE.md): the whole stream against its result line,
    // which is what `--output-format json` prints.
    let result_line = out
        .lines()
        .find(|l| l.contains("\"type\":\"result\""))
        .map_or(0, str::len);
    let sizes: Vec<String> = out
        .lines()
        .map(|l| {
            let kind = serde_json::from_str::<Value>(l)
                .ok()
                .and_then(|v| v["type"].as_str().map(str::to_owned))
                .unwrap_or_default();
            format!("{kind}:{}", l.len())
        })
        .collect();
    if let Some(keep) = std::env::var_os("HANK_CONTRACT_KEEP") {
        let to =
            std::path::Path::new(&keep).join(format!("{}-stream.out", crate::client().version));
        let _ = std::fs::write(to, &out);
    }
    eprintln!(
        "{}: stream-json answer {} bytes in {} lines ({}); its result line {} bytes",
        crate::client().version,
        out.len(),
        out.lines().count(),
        sizes.join(" "),
        result_line
    );
    assert!(
        out.lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('{')),
        "{ctx}"
    );
    let f = &real.finished()[0];
    assert_eq!(f["outcome"], "success", "{ctx}");
    assert_eq!(f["recommendation"], "streamed", "{ctx}");
    assert!(f["session_id"].is_string(), "{ctx}");
    let log = std::fs::read_to_string(real.p.dir.join(".hank/logs/hank.log")).unwrap_or_default();
    assert!(log.contains("format: stream-json"), "{log}");
}

/// REVIEW_AGENT=claude with the real client as the reviewer too: after the worker's verified
/// "done", the reviewer (a fresh session, `--permission-mode plan`, read tools only) reads the
/// run's diff on stdin, tries a write that plan mode refuses, and answers a verdict hank reads.
pub(crate) fn a_real_reviewer_reads_the_diff_and_its_verdict_is_read() {
    let real = Real::scripted(&["one"], |p| {
        let plan = p.dir.join(".hank/fix_plan.md").display().to_string();
        let mut script = work_on(&plan, &p.dir, "one", "COMPLETE");
        script.extend([
            Reply::tool(
                "Write",
                json!({"file_path": p.dir.join("src/reviewer.txt").display().to_string(), "content": "no\n"}),
            ),
            Reply::Text(
                "I read the diff.\n---HANK_REVIEW---\nVERDICT: APPROVE\nFINDINGS:\n- [minor] src/one.txt: say what was done\n---END_HANK_REVIEW---".into(),
            ),
        ]);
        script
    });
    let claude = real.claude.clone();
    let real = Real {
        hank: real
            .hank
            .env("REVIEW_AGENT", "claude")
            .env("REVIEW_AGENT_CMD", &claude),
        claude,
    };
    let o = real.run(Auth::ApiKey, &["--max-loops", "3"]);
    let ctx = real.context(&o);
    assert_eq!(o.status.code(), Some(0), "{ctx}");
    let reviews = real.of_type("review");
    assert_eq!(reviews.len(), 1, "{ctx}");
    assert_eq!(reviews[0]["verdict"], "approve", "{ctx}");
    assert_eq!(reviews[0]["minors"], 1, "{ctx}");
    assert!(
        !real.p.dir.join("src/reviewer.txt").exists(),
        "plan mode refused the write"
    );
    // The reviewer's first request: its prompt with the run's diff, not the worker's session.
    let turns = real.api.turns();
    let first = turns
        .iter()
        .find(|t| t.last_user_text().contains("---HANK_REVIEW---"))
        .expect("the reviewer's request");
    let text = first.last_user_text();
    assert!(text.contains("one done"), "the diff: {text}");
    assert!(
        first.loop_context().is_none(),
        "no loop context for the reviewer"
    );
}
