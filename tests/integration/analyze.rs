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
