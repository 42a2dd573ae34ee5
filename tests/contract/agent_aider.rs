//! The **real** Aider (`aider --message-file FILE`, PyPI aider-chat) against the fake Chat
//! Completions API (`fake_openai_chat.rs`, its `AiderChat` flavour: aider offers no tools),
//! with the argv and the rules of the built-in profile `templates/agents/aider.toml`.
//!
//! No network is used: the model is `openai/fake-model` and `OPENAI_API_BASE` points litellm's
//! OpenAI client at the fake; `LITELLM_LOCAL_MODEL_COST_MAP` (the profile's `[env]`) keeps
//! litellm's price table local. Aider itself still tries to download that table once and
//! prints the failure: its output says so, and it goes on.
//!
//! Aider's model answers with SEARCH/REPLACE blocks in its text. A block for a file that is not
//! in the chat makes aider add the file and ask the model again (one more request), then apply
//! the edit and commit it with a message it asks of the model (a request the fake answers with
//! [`COMMIT_SUBJECT`]). Aider exits 0 whatever happened: an API error is the last thing it
//! prints, after its own retries (a 429 or a 5xx: about 80 s of backoff).
//!
//! With `HANK_CAPTURE_FIXTURES=DIR`, the direct cases write what aider printed to
//! `DIR/<scenario>.stdout|.stderr|.exit`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hank::agent::profile::CallInput;
use hank::analysis::{ErrorKind, Outcome};
use hank::settings::OutputFormat;

use crate::fake_openai::Reply;
use crate::fake_openai_chat::{AiderChat, COMMIT_SUBJECT};
use crate::harness::{Call, Direct, HankRun, PROMPT_ONE};
use crate::http::status_text;
use crate::support::{self, Project};

type Case = fn();

/// Every Aider case, by name.
pub(crate) const CASES: &[(&str, Case)] = cases![
    plain_answer_is_read_by_the_profile,
    edits_are_applied_and_committed_by_aider,
    auth_error_is_classified,
    usage_limit_is_a_limit,
    hank_completes_the_plan_in_fresh_loops,
    hank_sandboxed_edits_commit_and_complete_the_plan,
    hank_usage_limit_is_a_limit,
];

/// The model aider is told to use: litellm's OpenAI client with the fake's model name.
const MODEL: &str = "openai/fake-model";
/// A fake API key (the fake never checks it).
const API_KEY: &str = "sk-hank-fake-contract-key";
/// How long a call may take: aider's backoff on a 429 or a 5xx lasts about 80 s.
const LIMIT: Duration = Duration::from_secs(240);

/// The environment aider needs here besides HOME and PATH.
fn aider_env(base_url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OPENAI_API_BASE", base_url.into()),
        ("OPENAI_API_KEY", API_KEY.into()),
        ("GIT_AUTHOR_NAME", "agent".into()),
        ("GIT_AUTHOR_EMAIL", "agent@example.com".into()),
        ("GIT_COMMITTER_NAME", "agent".into()),
        ("GIT_COMMITTER_EMAIL", "agent@example.com".into()),
        ("TZ", "UTC".into()),
    ]
}

type Setup = Direct<AiderChat>;

fn scripted(script: impl FnOnce(&Path) -> Vec<Reply>) -> Setup {
    Direct::new("aider", "# demo\n", script)
}

fn setup(script: Vec<Reply>) -> Setup {
    scripted(|_| script)
}

impl Direct<AiderChat> {
    /// Runs the real aider with the profile's argv, `prompt` in its message file (outside the
    /// project, as hank's is in the run's log folder).
    fn call(&self, prompt: &str) -> Call {
        let file = self.root.join("prompt.md");
        std::fs::write(&file, prompt).expect("write the prompt file");
        let file = file.display().to_string();
        let argv = self.profile.argv(&CallInput {
            live: false,
            output_format: OutputFormat::Json,
            session: None,
            model: Some(MODEL),
            permission_mode: None,
            allowed_tools: &[],
            prompt: None,
            prompt_file: Some(&file),
        });
        let mut cmd = self.command(&argv);
        cmd.envs(aider_env(&self.api.url()));
        self.run(cmd, argv, "", LIMIT, false)
    }
}

/// An answer of SEARCH/REPLACE blocks: `edits` are (file, search, replace), then `text`.
fn blocks(edits: &[(&str, &str, &str)], text: &str) -> String {
    let mut out = String::from("I will make the change.\n\n");
    for (file, search, replace) in edits {
        out.push_str(&format!(
            "{file}\n```\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n```\n\n"
        ));
    }
    out.push_str(text);
    out
}

/// The same answer twice: the first names files that are not in the chat (aider adds them
/// and asks again), the second is applied.
fn twice(answer: &str) -> Vec<Reply> {
    vec![Reply::Text(answer.into()), Reply::Text(answer.into())]
}

/// The argv of a call with hank's prompt file `file`.
fn argv_with(file: &str) -> Vec<String> {
    let mut v: Vec<String> = [
        "--yes-always",
        "--no-check-update",
        "--no-show-release-notes",
        "--analytics-disable",
        "--no-pretty",
        "--no-fancy-input",
        "--no-show-model-warnings",
        "--no-gitignore",
        "--edit-format",
        "diff",
        "--model",
        MODEL,
        "--message-file",
    ]
    .map(String::from)
    .to_vec();
    v.push(file.into());
    v
}

/// One plain answer with a HANK_STATUS block: aider prints it among its own lines, exit 0; the
/// profile's text is the whole output, with the status block; no session, tokens or cost.
fn plain_answer_is_read_by_the_profile() {
    let answer = status_text("IN_PROGRESS", false, "continue with the next item");
    let s = setup(vec![Reply::Text(answer.clone())]);
    let (call, ctx) = s.captured("plain", s.call(PROMPT_ONE));
    assert_eq!(call.code, Some(0), "{ctx}");
    let file = s.root.join("prompt.md").display().to_string();
    assert_eq!(call.argv, argv_with(&file), "{ctx}");
    assert!(call.stdout.contains("Aider v"), "{ctx}");
    assert!(call.stdout.contains(&answer), "{ctx}");
    let a = s.analyze(&call);
    assert_eq!(a.outcome, Outcome::Success, "{ctx}\n{a:#?}");
    let status = a.status.as_ref().expect("the status block");
    assert_eq!(status.exit_signal, Some(false), "{a:#?}");
    assert_eq!(a.session_id, None, "{a:#?}");
    assert!(!a.cost_reported, "{a:#?}");
    let turns = s.api.turns();
    assert_eq!(turns.len(), 1, "{ctx}");
    assert_eq!(turns[0].body["model"], "fake-model", "{ctx}");
    assert!(turns[0].last_user_text().starts_with(PROMPT_ONE), "{ctx}");
    assert!(
        turns[0].body["tools"].is_null(),
        "aider offers no tools: {ctx}"
    );
    // Aider's own files: its chat history in the project, its caches in ~/.aider.
    assert!(s.proj.join(".aider.chat.history.md").is_file(), "{ctx}");
    assert!(s.home.join(".aider/caches").is_dir(), "{ctx}");
}

/// SEARCH/REPLACE blocks for README.md and a new src/feature.txt: aider adds README.md to the
/// chat, asks again, applies both edits and commits them with the message the model gave.
fn edits_are_applied_and_committed_by_aider() {
    let answer = blocks(
        &[
            ("README.md", "# demo\n", "# demo\n\nEdited by the agent.\n"),
            ("src/feature.txt", "", "feature done\n"),
        ],
        &status_text("IN_PROGRESS", false, "next item"),
    );
    let s = setup(twice(&answer));
    let (call, ctx) = s.captured("edit", s.call(PROMPT_ONE));
    assert_eq!(call.code, Some(0), "{ctx}");
    assert_eq!(
        s.read("README.md"),
        "# demo\n\nEdited by the agent.\n",
        "{ctx}"
    );
    assert_eq!(s.read("src/feature.txt"), "feature done\n", "{ctx}");
    assert_eq!(s.last_commit(), COMMIT_SUBJECT, "{ctx}");
    assert!(call.stdout.contains("Applied edit to README.md"), "{ctx}");
    assert_eq!(s.api.turns().len(), 2, "{ctx}");
    assert_eq!(
        s.api.requests().len(),
        3,
        "two turns and the commit message: {ctx}"
    );
    let a = s.analyze(&call);
    assert_eq!(a.outcome, Outcome::Success, "{ctx}");
    assert!(a.status.is_some(), "{a:#?}");
}

/// 401: litellm's AuthenticationError, not retried, printed last; exit 0 all the same. The
/// profile's `end` rule makes it an auth error.
fn auth_error_is_classified() {
    let s = setup(vec![Reply::error(
        401,
        "invalid_request_error",
        Some("invalid_api_key"),
        "Incorrect API key provided",
    )]);
    let (call, a, ctx, turns) = s.outcome("auth", s.call(PROMPT_ONE));
    assert_eq!(call.code, Some(0), "{ctx}");
    assert_eq!(turns, 1, "a 401 is not retried: {ctx}");
    assert!(call.stdout.contains("litellm.AuthenticationError"), "{ctx}");
    assert_eq!(a.outcome, Outcome::AgentError, "{ctx}");
    assert_eq!(a.error_kind(), Some(ErrorKind::Auth), "{ctx}\n{a:#?}");
}

/// A 429 whose text says a usage limit and its reset: aider retries (about 80 s), then prints
/// the error last; the profile reads a usage limit with the reset from the message.
fn usage_limit_is_a_limit() {
    let reply = Reply::error(
        429,
        "usage_limit_reached",
        Some("usage_limit_reached"),
        "You have reached your usage limit. Your limit resets in 2 hours.",
    );
    let s = setup(vec![reply; 40]);
    let (call, a, ctx, turns) = s.outcome("usage_limit", s.call(PROMPT_ONE));
    assert_eq!(call.code, Some(0), "{ctx}");
    assert!(turns > 1, "retried: {ctx}");
    assert_eq!(a.outcome, Outcome::AgentError, "{ctx}");
    assert_eq!(a.error_kind(), Some(ErrorKind::UsageLimit), "{ctx}\n{a:#?}");
}

// ---- through hank ----------------------------------------------------------------------------

/// A hank project run with the real aider (AIDER_CMD), the fake API and the fake's model.
fn hank(items: &[&str], script: impl FnOnce(&Project) -> Vec<Reply>) -> HankRun<AiderChat> {
    let mut h = HankRun::new(items, script)
        .env("AIDER_CMD", crate::agents::agent().path)
        .env("AGENT_MODELS", format!("aider={MODEL}"))
        .args(&["--agent", "aider"]);
    let url = h.api.url();
    for (k, v) in aider_env(&url) {
        h = h.env(k, v);
    }
    h
}

/// The two answers (aider adds the files and asks again) that do one plan item: tick it in
/// fix_plan.md, write `src/<item>.txt`.
fn work_on(item: &str, status: &str) -> Vec<Reply> {
    twice(&blocks(
        &[
            (
                ".hank/fix_plan.md",
                &format!("- [ ] {item}\n"),
                &format!("- [x] {item}\n"),
            ),
            (&format!("src/{item}.txt"), "", &format!("{item} done\n")),
        ],
        &status_text(status, false, &format!("after {item}, continue")),
    ))
}

/// Two loops, each a fresh aider (it keeps no session a call can name): the plan completes,
/// each loop's edits applied and committed by aider, the loop context and prompt read from
/// the message file.
fn hank_completes_the_plan_in_fresh_loops() {
    let h = hank(&["one", "two"], |_| {
        let mut s = work_on("one", "IN_PROGRESS");
        s.extend(work_on("two", "COMPLETE"));
        s
    });
    let o = h.run(&["--max-loops", "3"]);
    let ctx = h.context(&o);
    assert_eq!(o.status.code(), Some(0), "{ctx}");
    assert_eq!(h.p.status()["exit_reason"], "plan_complete", "{ctx}");
    h.assert_items_done(&["one", "two"], &ctx);
    assert_eq!(h.resumed(), [false, false], "{ctx}");
    let turns = h.api.turns();
    let first = turns[0].loop_context().unwrap_or_default();
    assert!(first.contains("Hank loop 1"), "{ctx}");
    assert!(
        turns[0].last_user_text().contains("Do the next task."),
        "{ctx}"
    );
    let log = support::git(&h.p.dir, &["log", "--format=%s"]);
    assert_eq!(
        log.lines().take(2).collect::<Vec<_>>(),
        [COMMIT_SUBJECT, COMMIT_SUBJECT],
        "{ctx}"
    );
}

/// The folders a virtualenv's aider reads: the venv (its `bin/` is the program's folder, its
/// `lib/` is not) and the Python it was made from (`home` in `pyvenv.cfg`, one level up).
fn venv_reads() -> Vec<PathBuf> {
    let bin = crate::agents::agent().path;
    let venv = bin
        .parent()
        .and_then(Path::parent)
        .expect("the venv of aider's bin/")
        .to_path_buf();
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).unwrap_or_default();
    let mut out = vec![venv];
    if let Some(home) = cfg.lines().find_map(|l| {
        l.strip_prefix("home")
            .map(|r| r.trim_start_matches([' ', '=']))
    }) && let Some(prefix) = Path::new(home.trim()).parent()
    {
        out.push(prefix.to_path_buf());
    }
    out
}

/// SANDBOX=landlock with the real aider: two fresh loops of SEARCH/REPLACE edits and aider's
/// own `git commit` complete the plan with aider confined to the project, its TMPDIR and
/// ~/.aider (the profile's `[sandbox] state`); the venv and its Python are readable through
/// SANDBOX_READ (hank grants an install's program folder, not a venv's lib/), and the fake's
/// host comes from OPENAI_API_BASE (the profile's `api`). Aider's download of litellm's price
/// table (raw.githubusercontent.com) is refused by the egress proxy; the work goes on.
fn hank_sandboxed_edits_commit_and_complete_the_plan() {
    let reads: Vec<String> = venv_reads()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let h = hank(&["one", "two"], |_| {
        let mut s = work_on("one", "IN_PROGRESS");
        s.extend(work_on("two", "COMPLETE"));
        s
    })
    .sandboxed()
    .env("SANDBOX_READ", reads.join(" "));
    let o = h.run(&["--max-loops", "3"]);
    let ctx = h.context(&o);
    assert_eq!(o.status.code(), Some(0), "{ctx}");
    assert_eq!(h.p.status()["exit_reason"], "plan_complete", "{ctx}");
    h.assert_items_done(&["one", "two"], &ctx);
    h.assert_confined(&["raw.githubusercontent.com:443"], &ctx);
    assert!(h.of_type("client_config_changed").is_empty(), "{ctx}");
    let log = support::git(&h.p.dir, &["log", "--format=%s"]);
    assert_eq!(log.lines().next(), Some(COMMIT_SUBJECT), "{ctx}");
}

/// A usage-limit answer after aider's retries: with `--on-usage-limit exit` hank stops with
/// usage_limit, exit 3.
fn hank_usage_limit_is_a_limit() {
    let reply = Reply::error(
        429,
        "usage_limit_reached",
        Some("usage_limit_reached"),
        "You have reached your usage limit. Your limit resets in 2 hours.",
    );
    let h = hank(&["a"], |_| vec![reply; 40]);
    let o = h.run(&["--on-usage-limit", "exit"]);
    let ctx = h.context(&o);
    assert_eq!(o.status.code(), Some(3), "{ctx}");
    assert_eq!(h.p.status()["exit_reason"], "usage_limit", "{ctx}");
    assert_eq!(h.finished()[0]["error_kind"], "usage_limit", "{ctx}");
}
