//! The gemini profile (`templates/agents/gemini.toml`) against what the real gemini-cli 0.61.0
//! printed (`fixtures/agents/gemini/`, captured by the contract suite against the fake Gemini
//! API), and hank driving the fake gemini CLI (`fixtures/bin/gemini`) through the profile.

use std::path::Path;

use hank::agent::profile::{self, Origin, Parser, Profile};
use hank::analysis::{Analysis, Clock, ErrorKind, Outcome, RunFacts, analyze_mapped};

use crate::support::{Project, TICK_ONE, fixtures, stderr};

const PROFILE: &str = include_str!("../../templates/agents/gemini.toml");

fn gemini_profile() -> Profile {
    profile::parse(
        PROFILE,
        "templates/agents/gemini.toml",
        "gemini",
        Origin::Builtin,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// What hank reads from the captured call `name` (stdout, stderr, exit code).
fn analyze_fixture(p: &Profile, name: &str) -> Analysis {
    let dir = fixtures().join("agents/gemini");
    let read = |ext: &str| std::fs::read(dir.join(format!("{name}.{ext}"))).unwrap_or_default();
    let code: i32 = String::from_utf8_lossy(&read("exit"))
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name}.exit"));
    let Parser::Mapped(m) = &p.parser else {
        panic!("the gemini profile reads JSONPath fields")
    };
    let facts = RunFacts {
        exit_code: Some(code),
        ..RunFacts::default()
    };
    let clock = Clock::utc("2026-11-24T02:00:00Z".parse().unwrap());
    analyze_mapped(
        read("stdout").as_slice(),
        &read("stderr"),
        &facts,
        &clock,
        m,
    )
}

#[test]
fn gemini_profile_reads_the_captured_answers() {
    let p = gemini_profile();
    for name in ["plain", "resume-first", "resume", "edit"] {
        let a = analyze_fixture(&p, name);
        assert_eq!(a.outcome, Outcome::Success, "{name}: {a:?}");
        let session = a.session_id.as_deref().unwrap_or("");
        assert_eq!(session.len(), 36, "{name}: a UUID session id: {a:?}");
        assert!(a.tokens.input > 0 && a.tokens.output > 0, "{name}: {a:?}");
        assert!(a.tokens.cache_read > 0, "{name}: {a:?}");
        assert_eq!(a.cost_usd, 0.0, "{name}: gemini reports no cost");
    }
    // The status block is read from `response`.
    for name in ["plain", "resume", "edit"] {
        let a = analyze_fixture(&p, name);
        let s = a.status.unwrap_or_else(|| panic!("{name}: a status block"));
        assert_eq!(s.exit_signal, Some(false), "{name}");
    }
    // plain: the router's flash-lite call plus one turn of the routed model.
    let a = analyze_fixture(&p, "plain");
    assert_eq!(a.tokens.input, 9210 - 4096 + 812, "{a:?}");
    assert_eq!(a.tokens.output, 57 + 31 + 21, "{a:?}");
    assert_eq!(a.tokens.cache_read, 4096, "{a:?}");
    assert_eq!(a.num_turns, Some(1), "{a:?}");
    // edit: three turns (write_file, replace, answer); both edit tools matched.
    let a = analyze_fixture(&p, "edit");
    assert_eq!(a.num_turns, Some(3), "{a:?}");
    // resume: the same session as the call it resumed.
    assert_eq!(
        analyze_fixture(&p, "resume").session_id,
        analyze_fixture(&p, "resume-first").session_id
    );
}

#[test]
fn gemini_profile_classifies_the_captured_errors() {
    let p = gemini_profile();
    for (name, kind) in [
        ("quota", ErrorKind::UsageLimit),
        ("rate_limit", ErrorKind::RateLimit),
        ("auth", ErrorKind::Auth),
        ("overloaded", ErrorKind::Overloaded),
        ("zero_quota", ErrorKind::Billing),
    ] {
        let a = analyze_fixture(&p, name);
        assert_eq!(a.outcome, Outcome::AgentError, "{name}: {a:?}");
        let e = a.error.unwrap_or_else(|| panic!("{name}: an error"));
        assert_eq!(e.kind, kind, "{name}: {e:?}");
        assert!(!e.message.is_empty(), "{name}: {e:?}");
    }
    let a = analyze_fixture(&p, "unknown_session");
    assert!(a.unknown_session, "{a:?}");
}

/// The argv the profile gives for each combination hank can ask for.
#[test]
fn gemini_profile_argv() {
    let p = gemini_profile();
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

/// The fake CLI's folder for project `p` (the profile is hank's built-in one).
fn with_gemini(p: &Project) -> std::path::PathBuf {
    let fake = p.dir.parent().unwrap().join("fake-gemini");
    std::fs::create_dir_all(&fake).unwrap();
    fake
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(ToOwned::to_owned)
        .collect()
}

/// `hank --agent gemini` with the fake CLI (on PATH from fixtures/bin): the prompt goes on
/// stdin, loop 2 resumes the session the fake printed, the work counts as progress.
#[test]
fn hank_drives_the_fake_gemini_cli() {
    let p = Project::new(&["a", "b"]);
    let fake = with_gemini(&p);
    std::fs::write(fake.join("effect.sh"), TICK_ONE).unwrap();
    let o = p.run_env(
        &[("FAKE_GEMINI_DIR", &fake)],
        &["--agent", "gemini", "--max-loops", "2"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "plan_complete", "{}", stderr(&o));
    assert_eq!(p.status()["agent"], "gemini");
    assert_eq!(p.calls(), 0, "claude was never called");
    let argv1 = lines(&fake.join("argv-1"));
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
    let stdin1 = std::fs::read_to_string(fake.join("stdin-1")).unwrap();
    assert!(stdin1.starts_with("<hank-loop-context>"), "{stdin1}");
    assert!(stdin1.contains("Do the next task."), "{stdin1}");
    let argv2 = lines(&fake.join("argv-2"));
    let i = argv2.iter().position(|a| a == "--resume").expect("resumed");
    assert_eq!(argv2[i + 1], "00000000-0000-4000-8000-000000000001");
    let finished: Vec<serde_json::Value> = p
        .events()
        .into_iter()
        .filter(|e| e["type"] == "agent_finished")
        .collect();
    assert_eq!(finished.len(), 2);
    for f in &finished {
        assert_eq!(f["outcome"], "success", "{f}");
        assert_eq!(f["agent"], "gemini", "{f}");
        assert_eq!(f["tokens"]["cache_read"], 8192, "{f}");
        assert_eq!(f["tokens"]["input"], 10228 + 812, "{f}");
    }
}

/// The fake CLI's error path: a daily-quota answer (stderr as the real CLI prints it, exit
/// 173) stops the run with `--on-usage-limit exit`.
#[test]
fn fake_gemini_quota_is_a_usage_limit() {
    let p = Project::new(&["a"]);
    let fake = with_gemini(&p);
    let captured = fixtures().join("agents/gemini");
    std::fs::copy(captured.join("quota.stderr"), fake.join("stderr")).unwrap();
    std::fs::write(fake.join("response"), "").unwrap();
    std::fs::write(fake.join("exit"), "173").unwrap();
    let o = p.run_env(
        &[("FAKE_GEMINI_DIR", &fake)],
        &["--agent", "gemini", "--on-usage-limit", "exit"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "usage_limit");
    assert_eq!(p.status()["last_loop"]["error_kind"], "usage_limit");
}
