//! The gemini profile (`templates/agents/gemini.toml`) against what the real gemini-cli 0.61.0
//! printed (`fixtures/agents/gemini/`, captured by the contract suite against the fake Gemini
//! API), and hank driving the fake gemini CLI (`fixtures/bin/gemini`) through the profile.

use hank::agent::profile;
use hank::analysis::{ErrorKind, Outcome};

use crate::support::{
    Project, analyze_captured, analyze_captured_error, builtin_profile,
    fake_agent_completes_the_plan, lines_of, stderr,
};

#[test]
fn gemini_profile_reads_the_captured_answers() {
    let p = builtin_profile("gemini");
    for name in ["plain", "resume-first", "resume", "edit"] {
        let a = analyze_captured(&p, name);
        assert_eq!(a.outcome, Outcome::Success, "{name}: {a:?}");
        let session = a.session_id.as_deref().unwrap_or("");
        assert_eq!(session.len(), 36, "{name}: a UUID session id: {a:?}");
        assert!(a.tokens.input > 0 && a.tokens.output > 0, "{name}: {a:?}");
        assert!(a.tokens.cache_read > 0, "{name}: {a:?}");
        assert_eq!(a.cost_usd, 0.0, "{name}: gemini reports no cost");
    }
    // The status block is read from `response`.
    for name in ["plain", "resume", "edit"] {
        let a = analyze_captured(&p, name);
        let s = a.status.unwrap_or_else(|| panic!("{name}: a status block"));
        assert_eq!(s.exit_signal, Some(false), "{name}");
    }
    // plain: the router's flash-lite call plus one turn of the routed model.
    let a = analyze_captured(&p, "plain");
    assert_eq!(a.tokens.input, 9210 - 4096 + 812, "{a:?}");
    assert_eq!(a.tokens.output, 57 + 31 + 21, "{a:?}");
    assert_eq!(a.tokens.cache_read, 4096, "{a:?}");
    assert_eq!(a.num_turns, Some(1), "{a:?}");
    // edit: three turns (write_file, replace, answer); both edit tools matched.
    let a = analyze_captured(&p, "edit");
    assert_eq!(a.num_turns, Some(3), "{a:?}");
    // resume: the same session as the call it resumed.
    assert_eq!(
        analyze_captured(&p, "resume").session_id,
        analyze_captured(&p, "resume-first").session_id
    );
}

#[test]
fn gemini_profile_classifies_the_captured_errors() {
    let p = builtin_profile("gemini");
    for (name, kind) in [
        ("quota", ErrorKind::UsageLimit),
        ("rate_limit", ErrorKind::RateLimit),
        ("auth", ErrorKind::Auth),
        ("overloaded", ErrorKind::Overloaded),
        ("zero_quota", ErrorKind::Billing),
    ] {
        analyze_captured_error(&p, name, kind);
    }
    let a = analyze_captured(&p, "unknown_session");
    assert!(a.unknown_session, "{a:?}");
}

/// The argv the profile gives for each combination hank can ask for.
#[test]
fn gemini_profile_argv() {
    let p = builtin_profile("gemini");
    let call = |session, model, live| {
        p.argv(&profile::CallInput {
            live,
            output_format: hank::settings::OutputFormat::Json,
            session,
            model,
            permission_mode: Some("plan"),
            allowed_tools: &["Read".to_owned()],
            prompt: None,
            prompt_file: None,
        })
    };
    let base = [
        "--output-format",
        "json",
        "--approval-mode",
        "yolo",
        "--skip-trust",
    ];
    assert_eq!(call(None, None, false), [&base[..], &["-p", ""]].concat());
    assert_eq!(
        call(Some("s-1"), Some("gemini-2.5-pro"), true),
        [
            &base[..],
            &["--resume", "s-1", "--model", "gemini-2.5-pro", "-p", ""]
        ]
        .concat()
    );
    assert_eq!(p.prompt, profile::PromptDelivery::Stdin);
    assert!(p.resume && !p.allowed_tools);
    assert_eq!(p.program_env.as_deref(), Some("GEMINI_CMD"));
}

/// `hank --agent gemini` with the fake CLI (on PATH from fixtures/bin): the prompt goes on
/// stdin, loop 2 resumes the session the fake printed, the work counts as progress.
#[test]
fn hank_drives_the_fake_gemini_cli() {
    let (_p, fake, finished) = fake_agent_completes_the_plan("gemini");
    let argv1 = lines_of(&fake.join("argv-1"));
    assert_eq!(
        argv1,
        [
            "--output-format",
            "json",
            "--approval-mode",
            "yolo",
            "--skip-trust",
            "-p",
            ""
        ]
    );
    let argv2 = lines_of(&fake.join("argv-2"));
    let i = argv2.iter().position(|a| a == "--resume").expect("resumed");
    assert_eq!(argv2[i + 1], "00000000-0000-4000-8000-000000000001");
    for f in &finished {
        assert_eq!(f["tokens"]["cache_read"], 8192, "{f}");
        assert_eq!(f["tokens"]["input"], 10228 + 812, "{f}");
    }
}

/// The fake CLI's error path: a daily-quota answer (stderr as the real CLI prints it, exit
/// 173) stops the run with `--on-usage-limit exit`.
#[test]
fn fake_gemini_quota_is_a_usage_limit() {
    let p = Project::new(&["a"]);
    p.replay_captured("gemini", "quota");
    let o = p.run_fake_agent("gemini", &["--on-usage-limit", "exit"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "usage_limit");
    assert_eq!(p.status()["last_loop"]["error_kind"], "usage_limit");
}
