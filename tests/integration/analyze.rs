//! hank analyze end to end

use std::path::PathBuf;

use assert_cmd::Command;
use predicates::prelude::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/claude")
        .join(name)
}

fn hank() -> Command {
    let mut cmd = Command::cargo_bin("hank").unwrap();
    // `analyze` reads no configuration; HOME still points at an empty private directory.
    let home = std::env::temp_dir().join(format!("hank-analyze-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    cmd.env("HOME", &home);
    cmd
}

#[test]
fn explains_fixtures_in_text() {
    let cases = [
        (
            "success_complete.json",
            vec![
                "outcome:      success",
                "EXIT_SIGNAL:               true",
                "status_complete",
                "session id:   4b7c2e1a",
            ],
        ),
        (
            "usage_limit_session.json",
            vec![
                "outcome:      agent error",
                "error:        usage_limit (HTTP 429)",
                "resets at:",
            ],
        ),
        (
            "stream_quoted_limit.jsonl",
            vec!["shape:        stream-json", "outcome:      success"],
        ),
        (
            "permission_denied.json",
            vec![
                "denied:       Bash `npm install left-pad`",
                "denied:       Write",
            ],
        ),
        (
            "text_not_logged_in.txt",
            vec!["shape:        plain text", "error:        auth"],
        ),
    ];
    for (name, wants) in cases {
        let out = hank().arg("analyze").arg(fixture(name)).assert().success();
        let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        for want in wants {
            assert!(
                stdout.contains(want),
                "{name}: missing {want:?} in\n{stdout}"
            );
        }
    }
}

#[test]
fn json_output_parses() {
    let out = hank()
        .args(["analyze", "--json", "--exit-code", "0"])
        .arg(fixture("sigint.json"))
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["shape"], "result_object");
    assert_eq!(v["outcome"], "agent_error");
    assert_eq!(v["error"]["kind"], "interrupted");
    assert_eq!(v["session_id"], "4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a");

    let out = hank()
        .args(["analyze", "--json"])
        .arg(fixture("stream_usage_limit.jsonl"))
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["error"]["kind"], "usage_limit");
    assert_eq!(v["error"]["reset_at"], "2026-11-24T06:00:00Z");
}

#[test]
fn stderr_file_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("loop-00001.out");
    std::fs::write(&out, b"").unwrap();
    std::fs::copy(
        fixture("stderr_unknown_session.txt"),
        dir.path().join("loop-00001.err"),
    )
    .unwrap();
    let res = hank()
        .args(["analyze", "--json", "--exit-code", "1"])
        .arg(&out)
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&res.get_output().stdout).unwrap();
    assert_eq!(v["error"]["kind"], "cli_usage");
    assert_eq!(v["unknown_session"], true);

    let res = hank()
        .args(["analyze", "--json", "-"])
        .write_stdin(std::fs::read(fixture("api_error_401.json")).unwrap())
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&res.get_output().stdout).unwrap();
    assert_eq!(v["error"]["kind"], "auth");

    let res = hank()
        .args(["analyze", "--json", "--stderr"])
        .arg(fixture("stderr_bad_permission_mode.txt"))
        .arg(fixture("empty.out"))
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&res.get_output().stdout).unwrap();
    assert_eq!(v["error"]["kind"], "cli_usage");
}

#[test]
fn missing_file_is_exit_1_naming_it() {
    hank()
        .args(["analyze", "/nonexistent/loop-00009.out"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("/nonexistent/loop-00009.out"));
    hank()
        .args(["analyze", "--stderr", "/nonexistent/x.err"])
        .arg(fixture("success.json"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("/nonexistent/x.err"));
}

/// `--format`: in json / stream-json an answer that is not the client's JSON is malformed;
/// without the flag the loop log (`hank.log` beside the file) says what was asked, else auto.
#[test]
fn format_flag_and_the_loop_logs_word() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let out = logs.join("loop-00007.out");
    std::fs::write(&out, "{ invalid json here }\n").unwrap();
    let analyze = |args: &[&str]| {
        let o = hank().arg("analyze").args(args).arg(&out).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // No log: auto, a text success.
    let (code, text, _) = analyze(&[]);
    assert_eq!(code, Some(0));
    assert!(text.contains("asked format: auto (default)"), "{text}");
    assert!(text.contains("outcome:      success"), "{text}");
    // Asked for json: malformed (crashed).
    let (_, text, _) = analyze(&["--format", "json"]);
    assert!(text.contains("asked format: json (--format)"), "{text}");
    assert!(text.contains("outcome:      crashed"), "{text}");
    assert!(text.contains("error:        malformed"), "{text}");
    // The loop log names the format of loop 7 (the last line for it wins).
    std::fs::write(
        logs.join("hank.log"),
        "2026-11-26T01:00:00Z loop 7 started (agent: claude, resume: false, format: text)\n\
         2026-11-26T02:00:00Z loop 70 started (agent: claude, resume: false, format: text)\n\
         2026-11-26T03:00:00Z loop 7 started (agent: claude, resume: true, format: stream-json)\n",
    )
    .unwrap();
    let (_, text, _) = analyze(&["--json"]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["outcome"], "crashed", "{v}");
    assert_eq!(v["error"]["kind"], "malformed", "{v}");
    let (_, text, _) = analyze(&[]);
    crate::support::assert_contains(&text, "asked format: stream-json (hank.log)");
    // The flag wins over the log.
    let (_, text, _) = analyze(&["--format", "text"]);
    assert!(text.contains("outcome:      success"), "{text}");
    // A bad value names the flag and what is expected.
    let (code, _, err) = analyze(&["--format", "yaml"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("--format") && err.contains("json, stream-json, text or auto"),
        "{err}"
    );
}
