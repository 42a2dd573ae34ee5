//! The contract suite: `hank run` with the **real** Claude Code clients against a scripted
//! fake Anthropic API on 127.0.0.1 (`fake_api.rs`), every case once per client.
//!
//! The clients come from `scripts/install-claude.sh` (npm; the tested versions are listed in
//! `scripts/claude-versions.env`, the one place they live) and are found through
//! `HANK_REAL_CLAUDE=/path/one:/path/two` (what the script prints). Each case is a trial named
//! `<version>::<case>`.
//!
//! Without `HANK_REAL_CLAUDE` the cases are reported as **ignored** in the test summary (with a
//! closing line saying why), never as passed; under `CI=true` a missing client is a failure.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! the real clients against a fake API, every case once per client (`HANK_REAL_CLAUDE`);
//! `agent_*.rs` one suite per other CLI (`HANK_REAL_AGENTS`; `agent_copilot.rs` on the Anthropic
//! fake, `agent_aider.rs` on `fake_openai_chat::AiderChat`, aider from PyPI); `http.rs` the
//! transport, the `Provider` trait each fake implements on a marker type (`fake_api::Anthropic`,
//! `fake_openai::OpenAi`, `fake_openai_chat::OpenAiChat` — it reuses the Responses fake's `Reply`
//! —, `fake_gemini::Gemini`: turns, the newest user text, the answer) and the scripted `Fake<P>` /
//! `Request<P>` they share (script, request log, ids, `turns()`, `loop_context()`, `ApiError`,
//! `status_text`); `harness.rs` what the suites share: `Direct<P>` (a direct call of an agent CLI
//! with its built-in profile's argv in a temp HOME and git project, `Call`, the fixture capture,
//! `outcome` of a failing call, `assert_resumed`; `assert_status_answer`, `first_string`),
//! `HankRun<P>` (`hank` against a fake with the agent's environment; events, error kinds, waits,
//! resumes, the failure context; the shared asserts `assert_items_done`, `assert_stopped_at_once`,
//! `assert_second_loop_resumed`, a stale session planted and `assert_started_fresh`); the case
//! tables are `cases![…]` (`main.rs`); `bash_rules.rs` a table of `Bash(…)` rules × commands run
//! through the real client, asserting `policy::bash_rules` agrees; the review cases
//! (`a_real_reviewer_reads_the_diff_and_its_verdict_is_read`, and `hank_review_*` in each
//! `agent_*.rs`): the real CLI as worker and as the read-only reviewer (`REVIEW_AGENT`), its
//! verdict read

// Test helpers outside the trials may panic on setup failures: that is a test failure.
#![allow(clippy::expect_used, clippy::unwrap_used)]

/// A table of cases by name: `cases![a, m::b]` is `&[("a", a), ("b", m::b)]`, each name
/// the function's own (the trial names).
macro_rules! cases {
    ($($module:ident :: $case:ident),* $(,)?) => {
        &[$((stringify!($case), $module::$case as fn())),*]
    };
    ($($case:ident),* $(,)?) => {
        &[$((stringify!($case), $case as fn())),*]
    };
}

mod agent_aider;
mod agent_codex;
mod agent_copilot;
mod agent_gemini;
mod agent_opencode;
mod agents;
mod bash_rules;
mod cases;
mod fake_api;
mod fake_gemini;
mod fake_openai;
mod fake_openai_chat;
mod harness;
mod http;
#[path = "../integration/support.rs"]
mod support;

use std::cell::RefCell;
use std::path::PathBuf;
use std::process::Command;

use libtest_mimic::{Arguments, Failed, Trial};

/// A real client under test.
#[derive(Debug, Clone)]
pub struct Client {
    pub path: PathBuf,
    /// `2.1.330`, from `claude --version`.
    pub version: String,
}

thread_local! {
    static CLIENT: RefCell<Option<Client>> = const { RefCell::new(None) };
}

/// The client of the trial running on this thread.
pub fn client() -> Client {
    CLIENT
        .with(|c| c.borrow().clone())
        .expect("a trial sets its client")
}

type Case = fn();

/// Every contract case, by name.
const CASES: &[(&str, Case)] = cases![
    cases::every_resumed_loop_receives_its_own_context,
    cases::real_client_writes_files_resumes_and_completes_the_plan,
    cases::sandboxed_client_edits_commits_and_completes_the_plan,
    cases::denied_bash_is_relayed_then_stops_with_permission_denied,
    cases::auth_and_billing_errors_are_agent_fatal,
    cases::transient_errors_back_off_then_recover,
    cases::client_retries_of_an_overloaded_api_show_as_a_wait,
    cases::an_interrupted_call_is_charged_an_estimate_said_as_such,
    cases::usage_limit_waits_for_the_reported_reset,
    cases::max_turns_is_classified,
    cases::unknown_session_is_dropped_and_the_client_starts_fresh,
    cases::allowed_git_commands_run_and_committed_work_is_progress,
    cases::hung_request_timeout_and_signals_leave_no_client_process,
    cases::unreachable_api_is_a_network_error_with_backoff,
    cases::live_mode_with_the_real_client,
    cases::usage_windows_are_read_into_status,
    cases::client_settings_project_skips_the_users_stop_hook,
    cases::json_answers_stream_and_read_strictly_without_live,
    cases::a_real_reviewer_reads_the_diff_and_its_verdict_is_read,
    bash_rules::bash_rules_agree_with_the_real_client,
];

/// Runs a case; its panic (a failed assertion) is the trial's failure, with its message.
pub(crate) fn run_caught(case: impl FnOnce() + std::panic::UnwindSafe) -> Result<(), Failed> {
    std::panic::catch_unwind(case).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_else(|| "panicked".to_string());
        Failed::from(msg)
    })
}

/// The clients named by `HANK_REAL_CLAUDE` (colon-separated paths), each with its version;
/// an entry that is not a working client is an error.
fn clients() -> Result<Vec<Client>, String> {
    let Ok(list) = std::env::var("HANK_REAL_CLAUDE") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for path in list.split(':').filter(|p| !p.trim().is_empty()) {
        let path = PathBuf::from(path.trim());
        let o = Command::new(&path)
            .arg("--version")
            .output()
            .map_err(|e| format!("HANK_REAL_CLAUDE: {}: {e}", path.display()))?;
        let text = String::from_utf8_lossy(&o.stdout);
        let version = text
            .split_whitespace()
            .next()
            .filter(|v| o.status.success() && v.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .ok_or_else(|| {
                format!(
                    "HANK_REAL_CLAUDE: {} --version printed {text:?}, expected `X.Y.Z (Claude Code)`",
                    path.display()
                )
            })?
            .to_string();
        out.push(Client { path, version });
    }
    Ok(out)
}

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let mut trials = Vec::new();
    let mut skipped = None;
    match clients() {
        Err(e) => trials.push(Trial::test("clients", move || Err(Failed::from(e.clone())))),
        Ok(list) if list.is_empty() => {
            let why = "HANK_REAL_CLAUDE is not set (export HANK_REAL_CLAUDE=$(scripts/install-claude.sh))";
            for (name, _) in CASES {
                if ci {
                    let msg = format!("CI=true requires the real clients: {why}");
                    trials.push(Trial::test(*name, move || Err(Failed::from(msg.clone()))));
                } else {
                    trials.push(
                        Trial::test(*name, move || Err(Failed::from(why)))
                            .with_kind("no client")
                            .with_ignored_flag(true),
                    );
                }
            }
            if !ci {
                skipped = Some(why);
            }
        }
        Ok(list) => {
            for c in list {
                for (name, case) in CASES {
                    let client = c.clone();
                    let case = *case;
                    trials.push(Trial::test(format!("{}::{name}", c.version), move || {
                        CLIENT.with(|slot| *slot.borrow_mut() = Some(client.clone()));
                        run_caught(case)
                    }));
                }
            }
        }
    }
    let agent_notes = agents::trials(ci, &mut trials);
    let conclusion = libtest_mimic::run(&args, trials);
    // `--list` output is read by test runners (nextest wants only `name: test` lines on
    // stdout): the notes go to stderr there.
    let note = |text: String| {
        if args.list {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    };
    for n in agent_notes {
        note(format!("contract: {n}\n"));
    }
    if let Some(why) = skipped {
        note(format!(
            "contract: {} real-client cases SKIPPED (reported as ignored): {why}\n",
            CASES.len()
        ));
    }
    conclusion.exit_code()
}
