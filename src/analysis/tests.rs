//! Fixture-driven tests of the whole analyzer (`fixtures/claude/`), the traps, and properties.

use std::path::PathBuf;

use proptest::prelude::*;

use super::*;

/// The session id of the recorded fixtures.
pub(super) const SID: &str = "4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a";

/// The fixture `fixtures/claude/<name>`.
pub(super) fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/claude")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn now() -> Timestamp {
    "2026-11-22T10:00:00Z".parse().unwrap()
}

/// A call that exited with `code`.
pub(super) fn exit(code: i32) -> RunFacts {
    RunFacts {
        exit_code: Some(code),
        ..RunFacts::default()
    }
}

fn run(stdout: &str, stderr: Option<&str>, facts: RunFacts) -> Analysis {
    let out = if stdout.is_empty() {
        Vec::new()
    } else {
        fixture(stdout)
    };
    let err = stderr.map(fixture).unwrap_or_default();
    analyze_bytes(&out, &err, &facts, now())
}

/// One row of `every_fixture_is_classified`: what the analyzer must make of a fixture.
struct Case {
    /// The stdout fixture ("" for none).
    out: &'static str,
    /// The stderr fixture.
    err: Option<&'static str>,
    facts: RunFacts,
    shape: OutputShape,
    outcome: Outcome,
    kind: Option<ErrorKind>,
    /// Whether the session id `SID` is read from it.
    session: bool,
}

/// A whole answer of `shape` in which the session id is known or not: no error kind is a
/// success, an error kind an agent error.
fn answer(
    shape: OutputShape,
    session: bool,
    out: &'static str,
    code: i32,
    kind: Option<ErrorKind>,
) -> Case {
    let outcome = match kind {
        None => Outcome::Success,
        Some(_) => Outcome::AgentError,
    };
    Case {
        out,
        err: None,
        facts: exit(code),
        shape,
        outcome,
        kind,
        session,
    }
}

/// `--output-format json`: one result object, session id known.
fn object(out: &'static str, code: i32, kind: Option<ErrorKind>) -> Case {
    answer(OutputShape::ResultObject, true, out, code, kind)
}

/// `--output-format stream-json`, session id known.
fn stream(out: &'static str, code: i32, kind: Option<ErrorKind>) -> Case {
    answer(OutputShape::StreamJson, true, out, code, kind)
}

/// Plain text: no session id.
fn text(out: &'static str, code: i32, kind: Option<ErrorKind>) -> Case {
    answer(OutputShape::Text, false, out, code, kind)
}

/// Nothing on stdout, `err` on stderr, exit 1.
fn stderr_only(err: &'static str, outcome: Outcome, kind: ErrorKind) -> Case {
    Case {
        out: "",
        err: Some(err),
        facts: exit(1),
        shape: OutputShape::Empty,
        outcome,
        kind: Some(kind),
        session: false,
    }
}

/// Nothing on stdout, a refusal of the command line on stderr.
fn cli_usage(err: &'static str) -> Case {
    stderr_only(err, Outcome::AgentError, ErrorKind::CliUsage)
}

/// A fixture that did not end as an answer (killed, timed out, cut short).
fn ended(
    out: &'static str,
    facts: RunFacts,
    shape: OutputShape,
    outcome: Outcome,
    kind: Option<ErrorKind>,
    session: bool,
) -> Case {
    Case {
        out,
        err: None,
        facts,
        shape,
        outcome,
        kind,
        session,
    }
}

/// Nothing on stdout or stderr, ended as `facts` say.
fn silent(facts: RunFacts, outcome: Outcome, kind: Option<ErrorKind>) -> Case {
    ended("empty.out", facts, OutputShape::Empty, outcome, kind, false)
}

/// `name` on stdout, nothing on stderr, exit `code`.
fn exited(name: &str, code: i32) -> Analysis {
    run(name, None, exit(code))
}

#[test]
fn every_fixture_is_classified() {
    use ErrorKind as K;
    use Outcome as O;
    use OutputShape as S;
    let killed = RunFacts {
        signal: Some(9),
        ..RunFacts::default()
    };
    let cases = [
        object("success.json", 0, None),
        object("success_complete.json", 0, None),
        object("success_complete_no_exit.json", 0, None),
        object("success_questions.json", 0, None),
        object("success_testing.json", 0, None),
        object("success_build_errors.json", 0, None),
        object("permission_denied.json", 0, None),
        object("api_error_401.json", 1, Some(K::Auth)),
        object("not_logged_in.json", 1, Some(K::Auth)),
        // is_error:true is a failure even with exit 0.
        object("not_logged_in.json", 0, Some(K::Auth)),
        object("credit_low.json", 1, Some(K::Billing)),
        object("usage_limit_session.json", 1, Some(K::UsageLimit)),
        object("usage_limit_weekly.json", 1, Some(K::UsageLimit)),
        object("usage_limit_at.json", 1, Some(K::UsageLimit)),
        object("usage_limit_legacy.json", 1, Some(K::UsageLimit)),
        object("rate_limit_429.json", 1, Some(K::RateLimit)),
        object("overloaded_529.json", 1, Some(K::Overloaded)),
        object("overloaded_repeated.json", 1, Some(K::Overloaded)),
        object("server_500.json", 1, Some(K::Server)),
        object("network_refused.json", 1, Some(K::Network)),
        object("max_turns.json", 1, Some(K::MaxTurns)),
        object("max_budget.json", 1, Some(K::Budget)),
        // SIGINT: exit 0 and error_during_execution — not a success.
        object("sigint.json", 0, Some(K::Interrupted)),
        answer(S::MessageArray, true, "array_verbose.json", 0, None),
        stream("stream_success.jsonl", 0, None),
        stream("stream_testing_only.jsonl", 0, None),
        stream("stream_auth_error.jsonl", 1, Some(K::Auth)),
        stream("stream_usage_limit.jsonl", 1, Some(K::UsageLimit)),
        stream("stream_quoted_limit.jsonl", 0, None),
        stream("stream_network_retries.jsonl", 1, Some(K::Network)),
        stream("stream_sigint.jsonl", 0, Some(K::Interrupted)),
        ended(
            "stream_truncated.jsonl",
            killed,
            S::Truncated,
            O::Crashed,
            Some(K::Malformed),
            true,
        ),
        ended(
            "stream_truncated.jsonl",
            RunFacts {
                timed_out: true,
                signal: Some(15),
                ..RunFacts::default()
            },
            S::Truncated,
            O::Timeout,
            None,
            true,
        ),
        ended(
            "truncated.json",
            exit(1),
            S::Truncated,
            O::Crashed,
            Some(K::Malformed),
            false,
        ),
        text("text_success.txt", 0, None),
        Case {
            facts: RunFacts::default(),
            ..text("text_success.txt", 0, None)
        },
        text("text_not_logged_in.txt", 1, Some(K::Auth)),
        Case {
            facts: RunFacts::default(),
            ..text("text_not_logged_in.txt", 1, Some(K::Auth))
        },
        text("text_max_turns.txt", 1, Some(K::MaxTurns)),
        text("text_network.txt", 1, Some(K::Network)),
        text("text_usage_limit.txt", 1, Some(K::UsageLimit)),
        text("text_legacy_limit.txt", 1, Some(K::UsageLimit)),
        text("text_old_limit.txt", 1, Some(K::UsageLimit)),
        cli_usage("stderr_unknown_session.txt"),
        cli_usage("stderr_bad_permission_mode.txt"),
        cli_usage("stderr_no_prompt.txt"),
        cli_usage("stderr_stream_needs_verbose.txt"),
        cli_usage("stderr_root_bypass.txt"),
        cli_usage("stderr_invalid_session_id.txt"),
        stderr_only("stderr_stdin_warning.txt", O::Crashed, K::NoOutput),
        silent(exit(143), O::Crashed, Some(K::NoOutput)),
        silent(killed, O::Crashed, Some(K::NoOutput)),
        silent(
            RunFacts {
                timed_out: true,
                ..RunFacts::default()
            },
            O::Timeout,
            None,
        ),
        Case {
            facts: RunFacts {
                interrupted: true,
                ..exit(0)
            },
            outcome: O::AgentError,
            kind: Some(K::Interrupted),
            ..object("success.json", 0, None)
        },
    ];
    for c in cases {
        let (out, err, facts) = (c.out, c.err, c.facts);
        let a = run(out, err, facts);
        let label = format!("{out} / {err:?} / {facts:?}");
        assert_eq!(a.shape, c.shape, "{label}");
        assert_eq!(a.outcome, c.outcome, "{label}: {:?}", a.error);
        assert_eq!(a.error_kind(), c.kind, "{label}: {:?}", a.error);
        assert_eq!(a.session_id.as_deref() == Some(SID), c.session, "{label}");
        if a.outcome != Outcome::Success && a.outcome != Outcome::Timeout {
            let e = a.error.as_ref().unwrap();
            assert!(!e.message.is_empty(), "{label}");
        }
        let len = if out.is_empty() {
            0
        } else {
            fixture(out).len() as u64
        };
        assert_eq!(a.stdout_bytes, len, "{label}");
    }
}

#[test]
fn timeout_during_retries_names_what_was_retried() {
    let full = String::from_utf8(fixture("stream_network_retries.jsonl")).unwrap();
    // Keep init and the retries only: the timeout killed the CLI before it gave up.
    let cut: String = full.lines().take(5).map(|l| format!("{l}\n")).collect();
    let facts = RunFacts {
        timed_out: true,
        signal: Some(15),
        ..RunFacts::default()
    };
    let a = analyze_bytes(cut.as_bytes(), b"", &facts, now());
    assert_eq!(a.outcome, Outcome::Timeout);
    let e = a.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Network);
    assert_eq!(e.message, "still retrying the API (attempt 4: unknown)");
    let line = r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"error_status":529,"error":"overloaded"}"#;
    let a = analyze_bytes(line.as_bytes(), b"", &facts, now());
    assert_eq!(a.error_kind(), Some(ErrorKind::Overloaded));
}

#[test]
fn success_extracts_everything() {
    let a = exited("success.json", 0);
    assert_eq!(a.cost_usd, 0.1123);
    assert_eq!(
        a.tokens,
        Tokens {
            input: 1200,
            output: 350,
            cache_read: 18000,
            cache_creation: 2400
        }
    );
    assert_eq!(a.num_turns, Some(7));
    assert_eq!(a.duration_ms, Some(61234));
    let status = a.status.as_ref().unwrap();
    assert_eq!(status.status, Some(WorkStatus::InProgress));
    assert_eq!(status.files_modified, Some(3));
    assert_eq!(
        a.recommendation(),
        Some("Continue with the config loader (next fix_plan item)")
    );
    assert!(!a.exit_signal());
    assert!(
        a.completion_indicators.is_empty(),
        "{:?}",
        a.completion_indicators
    );
    assert!(a.questions.is_empty());
    // The text mentions "usage limit reached" and `"is_error": false`: no error, no signature.
    assert!(a.error.is_none());
    assert!(a.error_signatures.is_empty(), "{:?}", a.error_signatures);
    assert!(!a.testing_only);
    assert_eq!(a.output_len as usize, a.summary.len());
}

#[test]
fn completion_fixtures() {
    let a = exited("success_complete.json", 0);
    assert!(a.exit_signal());
    assert_eq!(
        a.completion_indicators,
        vec![
            "status_complete",
            "exit_signal",
            "phrase: all tasks are complete"
        ]
    );
    // STATUS COMPLETE with EXIT_SIGNAL false: exit_signal() is false, the indicator still fires.
    let a = exited("success_complete_no_exit.json", 0);
    assert!(!a.exit_signal());
    assert_eq!(a.completion_indicators, vec!["status_complete"]);
}

#[test]
fn questions_testing_and_signatures_from_fixtures() {
    let a = exited("success_questions.json", 0);
    assert_eq!(
        a.questions,
        vec![
            "Should I migrate the store to SQLite, or keep the JSON files?",
            "Would you like me to add a schema version first?"
        ]
    );
    assert!(exited("success_testing.json", 0).testing_only);
    assert!(exited("stream_testing_only.jsonl", 0).testing_only);
    // Edits happened: not test-only even though cargo test ran.
    assert!(!exited("stream_success.jsonl", 0).testing_only);
    let a = exited("success_build_errors.json", 0);
    assert_eq!(a.error_signatures, vec!["error[EN]: mismatched types"]);
}

#[test]
fn denials_are_extracted() {
    let a = exited("permission_denied.json", 0);
    assert_eq!(
        a.permission_denials,
        vec![
            Denial {
                tool: "Bash".into(),
                command: Some("npm install left-pad".into())
            },
            Denial {
                tool: "Write".into(),
                command: None
            },
        ]
    );
}

#[test]
fn usage_limit_reset_times_from_fixtures() {
    let cases = [
        ("usage_limit_session.json", "2026-11-23T04:09:00Z"),
        ("usage_limit_weekly.json", "2026-11-25T02:09:00Z"),
        ("usage_limit_at.json", "2027-04-23T19:00:00Z"),
        ("usage_limit_legacy.json", "2025-05-26T14:00:00Z"),
        // rate_limit_event.resetsAt wins over the wording.
        ("stream_usage_limit.jsonl", "2026-11-24T06:00:00Z"),
        ("text_usage_limit.txt", "2026-11-23T00:00:00Z"),
        ("text_old_limit.txt", "2026-11-23T02:00:00Z"),
    ];
    for (name, want) in cases {
        let a = exited(name, 1);
        let e = a.error.unwrap();
        assert_eq!(e.kind, ErrorKind::UsageLimit, "{name}");
        assert_eq!(e.reset_at, Some(want.parse().unwrap()), "{name}");
    }
    let a = exited("usage_limit_session.json", 1);
    assert_eq!(a.error.unwrap().api_status, Some(429));
}

#[test]
fn unknown_session_is_flagged() {
    let a = run("", Some("stderr_unknown_session.txt"), exit(1));
    assert!(a.unknown_session);
    assert_eq!(
        a.error.unwrap().message,
        "No conversation found with session ID: 0f1e2d3c-4b5a-4968-8776-655443322110"
    );
    assert_eq!(
        a.error_signatures,
        vec!["No conversation found with session ID: X"]
    );
    assert!(!run("", Some("stderr_no_prompt.txt"), exit(1)).unknown_session);
}

#[test]
fn quoted_errors_are_never_read() {
    let a = exited("stream_quoted_limit.jsonl", 0);
    assert_eq!(a.outcome, Outcome::Success);
    assert!(a.error.is_none());
    assert!(a.error_signatures.is_empty(), "{:?}", a.error_signatures);
    // A tool result that is the very first thing after init, then a clean result.
    let stream = concat!(
        r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"You've hit your session limit · resets 5:09am (UTC)","is_error":true}]}}"#,
        "\n",
        r#"{"type":"result","subtype":"success","is_error":false,"result":"Done. The string `You've hit your limit` is now parsed.","session_id":"s"}"#,
        "\n"
    );
    let a = analyze_bytes(stream.as_bytes(), b"", &exit(0), now());
    assert_eq!(a.outcome, Outcome::Success);
    assert!(a.error.is_none());
}

#[test]
fn result_json_with_is_error_field_text_gives_no_signature() {
    let text = r#"{"type":"result","subtype":"success","is_error":false,"result":"The payload is {\"is_error\": false, \"error\": null}\n\"is_error\": false\nAll good."}"#;
    let a = analyze_bytes(text.as_bytes(), b"", &exit(0), now());
    assert_eq!(a.outcome, Outcome::Success);
    assert!(a.error_signatures.is_empty(), "{:?}", a.error_signatures);
}

#[test]
fn failed_calls_have_signatures_from_their_message_and_stderr() {
    let a = exited("rate_limit_429.json", 1);
    assert_eq!(a.error_signatures.len(), 1);
    assert!(
        a.error_signatures[0].starts_with("API Error: Request rejected (N)"),
        "{:?}",
        a.error_signatures
    );
    let a = analyze_bytes(b"", b"fatal: ECONNREFUSED 127.0.0.1:443\n", &exit(1), now());
    assert_eq!(a.error_kind(), Some(ErrorKind::Network));
    assert_eq!(a.error_signatures, vec!["fatal: ECONNREFUSED N.N.N.N:N"]);
}

#[test]
fn summary_is_cut_on_a_char_boundary() {
    let long = "é".repeat(5000);
    let obj =
        serde_json::json!({"type":"result","subtype":"success","is_error":false,"result":long});
    let a = analyze_bytes(obj.to_string().as_bytes(), b"", &exit(0), now());
    assert_eq!(a.output_len, 10_000);
    assert!(a.summary.len() <= SUMMARY_BYTES + '…'.len_utf8());
    assert!(a.summary.ends_with('…'));
}

#[test]
fn text_quoting_an_error_with_exit_zero_is_success() {
    let text = b"I fixed the handler for 'Not logged in \xc2\xb7 Please run /login'.\nAll good.\n";
    let a = analyze_bytes(text, b"", &exit(0), now());
    assert_eq!(a.outcome, Outcome::Success);
}

#[test]
fn analysis_serializes_with_stable_names() {
    let a = exited("usage_limit_session.json", 1);
    let v = serde_json::to_value(&a).unwrap();
    assert_eq!(v["shape"], "result_object");
    assert_eq!(v["outcome"], "agent_error");
    assert_eq!(v["error"]["kind"], "usage_limit");
    assert_eq!(v["error"]["reset_at"], "2026-11-23T04:09:00Z");
}

fn json_fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just(",".to_owned()),
        Just(":".to_owned()),
        Just("\n".to_owned()),
        Just("\"type\":\"result\"".to_owned()),
        Just("\"type\":\"assistant\"".to_owned()),
        Just("\"subtype\":\"success\"".to_owned()),
        Just("\"is_error\":true".to_owned()),
        Just("\"result\":\"You've hit your limit · resets 25:99pm (Nowhere/Zone)\"".to_owned()),
        Just("\"rate_limit_info\":{\"status\":\"rejected\",\"resetsAt\":-1}".to_owned()),
        Just("\"resetsAt\":99999999999999999999".to_owned()),
        Just("\"message\":{\"content\":[{\"type\":\"tool_use\",\"name\":\"Bash\",\"input\":{\"command\":null}}]}".to_owned()),
        Just("\"usage\":{\"input_tokens\":1e400}".to_owned()),
        Just("\"error\":\"rate_limit\"".to_owned()),
        Just("---HANK_STATUS---\\nSTATUS: COMPLETE".to_owned()),
        "[a-z0-9 \"\\\\]{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn never_panics_on_bytes(out in proptest::collection::vec(any::<u8>(), 0..2048),
                             err in proptest::collection::vec(any::<u8>(), 0..256),
                             code in proptest::option::of(any::<i32>())) {
        let facts = RunFacts { exit_code: code, ..RunFacts::default() };
        let a = analyze_bytes(&out, &err, &facts, now());
        prop_assert_eq!(a.stdout_bytes, out.len() as u64);
        prop_assert!(a.error_signatures.len() <= derive::MAX_SIGNATURES);
    }

    #[test]
    fn never_panics_on_json_fragments(parts in proptest::collection::vec(json_fragment(), 0..40)) {
        let out = parts.concat();
        let a = analyze_bytes(out.as_bytes(), out.as_bytes(), &exit(1), now());
        prop_assert_eq!(a.stdout_bytes, out.len() as u64);
        let _ = live_items(out.as_bytes());
        let _ = parse_status_block(&out);
    }

    #[test]
    fn reset_parsing_never_panics(s in "\\PC{0,60}") {
        let _ = reset_from_line(&s, now());
        let _ = classify_text(&s, None, None, now());
    }
}

/// Peak resident memory of this process in KiB (Linux), for the throughput report.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Writes ~`target` bytes of realistic stream-json (init, tool uses, big tool results,
/// assistant text, a final result) to `w`.
fn write_big_stream(w: &mut impl std::io::Write, target: u64) -> std::io::Result<u64> {
    let init = fixture("stream_success.jsonl");
    let first_line = init
        .split(|b| *b == b'\n')
        .next()
        .unwrap_or_default()
        .to_vec();
    let mut written = 0u64;
    w.write_all(&first_line)?;
    w.write_all(b"\n")?;
    written += first_line.len() as u64 + 1;
    let body =
        "fn main() { println!(\"hello\"); } // usage limit reached \\\"is_error\\\": true\\n"
            .repeat(60);
    let mut i = 0u64;
    while written < target {
        i += 1;
        let tool = format!(
            r#"{{"type":"assistant","message":{{"id":"msg_{i}","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{{"type":"text","text":"Step {i}: reading the next file."}},{{"type":"tool_use","id":"toolu_{i}","name":"Bash","input":{{"command":"cargo test -p core module_{i}"}}}}],"stop_reason":null,"usage":{{"input_tokens":12,"output_tokens":40}}}},"parent_tool_use_id":null,"session_id":"{SID}","uuid":"u{i}"}}"#
        );
        let result = format!(
            r#"{{"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"toolu_{i}","type":"tool_result","content":"{body}","is_error":false}}]}},"parent_tool_use_id":null,"session_id":"{SID}","uuid":"r{i}","tool_use_result":{{"stdout":"{body}","stderr":"","interrupted":false}}}}"#
        );
        for line in [tool, result] {
            w.write_all(line.as_bytes())?;
            w.write_all(b"\n")?;
            written += line.len() as u64 + 1;
        }
    }
    let last = fixture("success.json");
    w.write_all(&last)?;
    Ok(written + last.len() as u64)
}

/// Throughput over ~200 MB of stream-json (run with `cargo test --lib throughput -- --ignored
/// --nocapture`).
#[test]
#[ignore = "writes 200 MB to a temp file; run by hand to measure"]
fn throughput_200mb_stream() {
    use std::io::{BufReader, BufWriter};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let mut w = BufWriter::new(std::fs::File::create(&path).unwrap());
    let size = write_big_stream(&mut w, 200 * 1024 * 1024).unwrap();
    drop(w);
    let rss_before = peak_rss_kib();
    let start = std::time::Instant::now();
    let file = std::fs::File::open(&path).unwrap();
    let a = analyze(
        BufReader::with_capacity(256 * 1024, file),
        b"",
        &exit(0),
        now(),
    );
    let secs = start.elapsed().as_secs_f64();
    let rss_after = peak_rss_kib();
    assert_eq!(a.stdout_bytes, size);
    assert_eq!(a.shape, OutputShape::StreamJson);
    assert_eq!(a.outcome, Outcome::Success);
    assert!(a.error.is_none());
    assert_eq!(a.session_id.as_deref(), Some(SID));
    eprintln!(
        "analyzed {:.1} MB in {secs:.2} s = {:.1} MB/s; peak RSS before {rss_before:?} KiB, after {rss_after:?} KiB",
        size as f64 / 1e6,
        size as f64 / 1e6 / secs
    );
}

/// Output past the caps is `output_too_large` in every format: a non-JSON text line over the
/// line cap (first or later line, plain text or text that starts with `{`) is not a success.
#[test]
fn a_text_line_over_the_cap_is_output_too_large() {
    use std::io::Read;
    let facts = RunFacts {
        exit_code: Some(0),
        ..RunFacts::default()
    };
    let clock = Clock::utc(jiff::Timestamp::UNIX_EPOCH);
    let big = super::MAX_LINE_BYTES as u64 + 10;
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        ("plain first line", Vec::new(), b"\nall done\n".to_vec()),
        ("plain later line", b"working\n".to_vec(), b"\n".to_vec()),
        ("brace text", b"{ not json ".to_vec(), b"\n".to_vec()),
    ];
    for (name, head, tail) in cases {
        let input = std::io::BufReader::new(
            (&head[..])
                .chain(std::io::repeat(b'x').take(big))
                .chain(&tail[..]),
        );
        let a = analyze_in(input, b"", &facts, &clock);
        assert_eq!(
            a.error_kind(),
            Some(ErrorKind::OutputTooLarge),
            "{name}: {a:?}"
        );
    }
    let a = analyze_in(&b"all done\n"[..], b"", &facts, &clock);
    assert_eq!(a.outcome, Outcome::Success, "{a:?}");
}
