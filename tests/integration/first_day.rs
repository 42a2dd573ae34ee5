//! The first day, round three (issue 48's smaller items): a `.hankrc` with a byte-order mark
//! or several typos, `hank doctor` with a broken `.hankrc`, and the git identity hank commits
//! with.

use crate::support::{Project, stderr, stdout};

#[test]
fn every_hankrc_typo_is_named_at_once_and_a_byte_order_mark_is_ignored() {
    let p = Project::new(&["task"]);
    p.hankrc("\u{feff}MAX_LOOP=5\nRETRY_BACKOFF_SECONDS=0\nCLAUDE_MODL=opus\nVERIFY_COMAND=true\n");
    let out = p.run(&["run", "--max-loops", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    for want in [
        "3 lines are not settings",
        "line 1: unknown key MAX_LOOP (did you mean MAX_LOOPS?)",
        "line 3: unknown key CLAUDE_MODL",
        "line 4: unknown key VERIFY_COMAND",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    // The byte-order mark is no part of the first key (no mojibake).
    assert!(!err.contains('\u{feff}') && !err.contains("ï»¿"), "{err}");
    assert_eq!(p.calls(), 0);
    p.hankrc("\u{feff}MAX_LOOPS=1\nRETRY_BACKOFF_SECONDS=0\n");
    let out = p.run(&["run"]);
    assert_ne!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(p.calls(), 1);
}

#[test]
fn doctor_checks_the_client_while_hankrc_is_broken() {
    let p = Project::new(&["task"]);
    p.hankrc("MAX_LOOP=5\n");
    let out = p.run(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let config = crate::support::doctor_check(&v, "config");
    assert_eq!(config["ok"], false, "{v}");
    let claude = crate::support::doctor_check(&v, "claude");
    assert_eq!(claude["ok"], true, "{v}");
    assert!(
        claude["detail"]
            .as_str()
            .is_some_and(|d| d.contains(".hankrc is not read until it is fixed")),
        "{v}"
    );
}

#[test]
fn doctor_and_setup_say_which_identity_hank_commits_with() {
    let p = Project::new(&["task"]);
    p.git_init();
    let out = p.run(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let id = crate::support::doctor_check(&v, "identity");
    assert_eq!(id["ok"], true, "{v}");
    assert_eq!(id["warning"], true, "{v}");
    assert!(
        id["detail"]
            .as_str()
            .is_some_and(|d| d.contains("hank <hank@localhost>")),
        "{v}"
    );
    // With an identity, it is named.
    let out = p
        .cmd()
        .env("GIT_AUTHOR_EMAIL", "dev@example.com")
        .args(["doctor", "--json"])
        .output()
        .expect("doctor");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let id = crate::support::doctor_check(&v, "identity");
    assert_eq!(id["warning"], false, "{v}");
    assert!(
        id["detail"]
            .as_str()
            .is_some_and(|d| d.contains("dev@example.com")),
        "{v}"
    );
    // `hank setup` says it committed as hank.
    let root = tempfile::tempdir().expect("tempdir");
    let out = p
        .cmd()
        .current_dir(root.path())
        .args(["setup", "demo"])
        .output()
        .expect("setup");
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("made as `hank <hank@localhost>`") && err.contains("git config --global"),
        "{err}{}",
        stdout(&out)
    );
}

#[test]
fn status_json_never_passes_a_broken_status_through() {
    let p = Project::new(&["task"]);
    std::fs::write(
        p.dir.join(".hank/status.json"),
        b"\x1b]0;owned\x07\x1b[2J\xff\xfe{\"state\": \"running\"",
    )
    .expect("write");
    let out = p.run(&["status", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    assert!(stderr(&out).contains("status.json"), "{}", stderr(&out));
    assert!(!stderr(&out).contains('\u{1b}'), "{}", stderr(&out));
}

#[test]
fn an_import_without_ai_never_writes_an_unknown_type_into_the_prompt() {
    let p = Project::new(&["task"]);
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        root.path().join("calc.md"),
        "# Calc\n\nA small calculator.\n\n## Tasks\n- Add two numbers\n- Subtract two numbers\n- Print the result\n",
    )
    .expect("write");
    let out = p
        .cmd()
        .current_dir(root.path())
        .args(["import", "--no-ai", "calc.md"])
        .output()
        .expect("import");
    assert!(out.status.success(), "{}", stderr(&out));
    let prompt = std::fs::read_to_string(root.path().join("calc/.hank/PROMPT.md")).expect("prompt");
    assert!(
        prompt.contains("You work autonomously on calc."),
        "{prompt}"
    );
    assert!(!prompt.contains("(unknown)"), "{prompt}");
    let plan = std::fs::read_to_string(root.path().join("calc/.hank/fix_plan.md")).expect("plan");
    assert_eq!(plan.matches("- [ ]").count(), 3, "{plan}");
}

#[test]
fn a_json_answer_cut_off_with_raw_line_breaks_is_truncated_never_a_text_success() {
    let p = Project::new(&["task"]);
    let file = p.dir.join("answer.out");
    std::fs::write(
        &file,
        "{\"result\": \"Success but json is broken\nFiles created successfully\n",
    )
    .expect("write");
    let out = p.run(&["analyze", &file.display().to_string()]);
    let text = stdout(&out) + &stderr(&out);
    assert!(text.contains("truncated JSON"), "{text}");
}

#[test]
fn a_state_file_with_missing_fields_is_said_not_taken_silently() {
    let p = Project::new(&["task", "next task"]);
    std::fs::write(
        p.dir.join(".hank/state.json"),
        "{\"schema_version\": 2, \"loop_count\": 4}\n",
    )
    .expect("write");
    let out = p.run(&["run", "--max-loops", "1"]);
    let err = stderr(&out);
    assert!(err.contains("state.json lacked "), "{err}");
    assert!(err.contains("taken as their defaults"), "{err}");
    assert!(
        !err.contains("lacked loop_count") && !err.contains(", loop_count"),
        "{err}"
    );
    // The run saved every field: the next one says nothing.
    let out = p.run(&["run", "--max-loops", "1"]);
    assert!(
        !stderr(&out).contains("state.json lacked"),
        "{}",
        stderr(&out)
    );
}
