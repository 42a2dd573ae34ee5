//! The opencode profile (`templates/agents/opencode.toml`) against what the real opencode 1.18.33
//! printed (`fixtures/agents/opencode/`, captured by the contract suite against the fake Chat
//! Completions API), and hank driving the fake opencode CLI (`fixtures/bin/opencode`) through
//! the profile.

use hank::agent::profile::{self, CallInput};
use hank::analysis::{ErrorKind, Outcome};
use hank::settings::OutputFormat;

use crate::support::{
    Project, analyze_captured, analyze_captured_error, builtin_profile,
    fake_agent_completes_the_plan, lines_of, stderr,
};

/// The fake API's usage per request: 1200 prompt tokens of which 200 cached, 40 completion
/// tokens; opencode's `tokens.input` leaves the cached ones out; $3 / $15 / $0.30 per million.
const INPUT: u64 = 1000;
const OUTPUT: u64 = 40;
const CACHED: u64 = 200;
const COST: f64 = 0.00366;

#[test]
fn opencode_profile_reads_the_captured_answers() {
    let p = builtin_profile("opencode");
    for (name, requests) in [("plain", 1), ("resume", 1), ("edit", 5)] {
        let a = analyze_captured(&p, name);
        assert_eq!(a.outcome, Outcome::Success, "{name}: {a:?}");
        let session = a.session_id.as_deref().unwrap_or("");
        assert!(
            session.starts_with("ses_") && session.len() == 30,
            "{name}: {a:?}"
        );
        assert_eq!(a.num_turns, Some(requests), "{name}: {a:?}");
        let n = u64::from(requests);
        assert_eq!(a.tokens.input, n * INPUT, "{name}: {a:?}");
        assert_eq!(a.tokens.output, n * OUTPUT, "{name}: {a:?}");
        assert_eq!(a.tokens.cache_read, n * CACHED, "{name}: {a:?}");
        assert_eq!(a.tokens.cache_creation, 0, "{name}: {a:?}");
        assert!(
            (a.cost_usd - f64::from(requests) * COST).abs() < 1e-9,
            "{name}: {a:?}"
        );
        let s = a
            .status
            .unwrap_or_else(|| panic!("{name}: the status block"));
        assert_eq!(s.exit_signal, Some(false), "{name}");
        assert!(!a.testing_only, "{name}");
    }
}

#[test]
fn opencode_profile_classifies_the_captured_errors() {
    let p = builtin_profile("opencode");
    for (name, kind) in [
        ("quota", ErrorKind::SpendLimit),
        ("rate_limit", ErrorKind::RateLimit),
        ("auth", ErrorKind::Auth),
        ("server_error", ErrorKind::Server),
        ("network", ErrorKind::Network),
        ("unknown_model", ErrorKind::CliUsage),
    ] {
        let a = analyze_captured_error(&p, name, kind);
        assert!(
            a.session_id.is_some(),
            "{name}: the error event names the session"
        );
    }
    let a = analyze_captured(&p, "quota");
    let e = a.error.unwrap();
    assert!(
        e.message.starts_with("You exceeded your current quota"),
        "{e:?}"
    );
    let a = analyze_captured(&p, "unknown_session");
    assert!(a.unknown_session, "{a:?}");
    let a = analyze_captured(&p, "bad_flag");
    assert_eq!(a.error_kind(), Some(ErrorKind::CliUsage), "{a:?}");
    // A rejected permission: exit 0, no text, a tool part in error.
    let a = analyze_captured(&p, "denied");
    assert_eq!(a.outcome, Outcome::Crashed, "{a:?}");
    assert_eq!(a.error_kind(), Some(ErrorKind::Malformed), "{a:?}");
}

/// The argv for each combination hank can ask for.
#[test]
fn opencode_profile_argv() {
    let p = builtin_profile("opencode");
    let call = |session, model, mode, live| {
        p.argv(&CallInput {
            live,
            output_format: OutputFormat::Text,
            session,
            model,
            permission_mode: mode,
            allowed_tools: &["Read".to_owned()],
            prompt: None,
            prompt_file: None,
        })
    };
    let base = ["run", "--format", "json"];
    assert_eq!(
        call(None, None, None, false),
        [&base[..], &["--title", ""]].concat()
    );
    assert_eq!(
        call(
            Some("ses_1"),
            Some("anthropic/claude-sonnet-4-5"),
            None,
            true
        ),
        [
            &base[..],
            &[
                "--session",
                "ses_1",
                "--model",
                "anthropic/claude-sonnet-4-5"
            ]
        ]
        .concat()
    );
    for (mode, flag) in [
        ("bypassPermissions", "--auto"),
        ("auto", "--auto"),
        ("plan", "--agent=plan"),
        ("acceptEdits", "--auto=false"),
        ("default", "--auto=false"),
        ("manual", "--auto=false"),
        ("dontAsk", "--auto=false"),
    ] {
        assert_eq!(
            call(Some("ses_1"), None, Some(mode), false),
            [&base[..], &["--session", "ses_1", flag]].concat(),
            "{mode}"
        );
    }
    assert_eq!(p.prompt, profile::PromptDelivery::Stdin);
    assert!(p.resume && !p.allowed_tools);
    assert_eq!(p.program_env.as_deref(), Some("OPENCODE_CMD"));
    assert_eq!(
        p.env.get("OPENCODE_DISABLE_AUTOUPDATE").map(String::as_str),
        Some("1")
    );
}

/// `hank --agent opencode` with the fake CLI (on PATH from fixtures/bin): the prompt goes on
/// stdin, loop 2 resumes the session the fake printed, the work counts as progress.
#[test]
fn hank_drives_the_fake_opencode_cli() {
    let (_p, fake, finished) = fake_agent_completes_the_plan("opencode");
    assert_eq!(
        lines_of(&fake.join("argv-1")),
        ["run", "--format", "json", "--title", ""]
    );
    assert_eq!(
        lines_of(&fake.join("argv-2")),
        [
            "run",
            "--format",
            "json",
            "--session",
            "ses_df4b33c3bffeFakeSession00001"
        ]
    );
    for f in &finished {
        assert_eq!(f["session_id"], "ses_df4b33c3bffeFakeSession00001", "{f}");
        assert_eq!(f["tokens"]["input"], INPUT, "{f}");
        assert_eq!(f["tokens"]["cache_read"], CACHED, "{f}");
        assert!(f["files_changed"].as_u64().unwrap_or(0) >= 1, "{f}");
    }
}

/// The fake CLI replaying the captured quota answer (exit 1): hank stops with spend_limit.
#[test]
fn fake_opencode_quota_is_a_spend_limit() {
    let p = Project::new(&["a"]);
    p.replay_captured("opencode", "quota");
    let o = p.run_fake_agent("opencode", &[]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "spend_limit", "{}", stderr(&o));
    assert_eq!(p.status()["last_loop"]["error_kind"], "spend_limit");
}
