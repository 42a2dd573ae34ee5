//! The independent reviewer before "done" (`REVIEW_AGENT`, issue 39), end to end with the fake
//! reviewer (`fixtures/bin/reviewer`: the fake Claude Code CLI with its own folder,
//! `$FAKE_CLAUDE_DIR/review`, answering scripted verdicts) and the fake CLIs of the other
//! profiles (their read-only argv).

use std::path::PathBuf;

use crate::support::{Project, TICK_ONE, stderr};

const REVIEWED: &str =
    "# test project\nRETRY_BACKOFF_SECONDS=0\nREVIEW_AGENT=claude\nREVIEW_AGENT_CMD=reviewer\n";

fn block(verdict: &str, findings: &[&str]) -> String {
    let mut s = format!("I read the diff.\n---HANK_REVIEW---\nVERDICT: {verdict}\nFINDINGS:\n");
    for f in findings {
        s.push_str(&format!("- {f}\n"));
    }
    s + "---END_HANK_REVIEW---\n"
}

/// A git project whose one item the worker ticks on its first call (each call appends to
/// `src/work.txt`), reviewed by the fake reviewer; its review folder.
fn reviewed(extra: &str) -> (Project, PathBuf) {
    let p = Project::new(&["add the widget"]);
    p.hankrc(&format!("{REVIEWED}{extra}"));
    p.git_init();
    p.fake("effect.sh", TICK_ONE);
    let review = p.fake.join("review");
    std::fs::create_dir_all(&review).unwrap();
    (p, review)
}

fn read(dir: &std::path::Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

fn calls(dir: &std::path::Path) -> u32 {
    read(dir, "calls").trim().parse().unwrap_or(0)
}

/// `--dry-run` shows the reviewer's read-only command next to the worker's, calls neither.
#[test]
fn dry_run_shows_the_reviewers_read_only_command() {
    let (p, review) = reviewed("");
    let o = p.run_code(&["--dry-run"], 0);
    let out = crate::support::stdout(&o);
    crate::support::assert_contains(&out, "# reviewer (REVIEW_AGENT=claude)");
    crate::support::assert_contains(&out, "--permission-mode plan --allowedTools=Read,Grep,Glob");
    assert_eq!((p.calls(), calls(&review)), (0, 0));
    let o = p.run(&["--dry-run", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["reviewer"]["agent"], "claude");
    assert!(
        v["reviewer"]["program"]
            .as_str()
            .unwrap()
            .ends_with("reviewer"),
        "{v}"
    );
    let args: Vec<&str> = (v["reviewer"]["args"].as_array().unwrap().iter())
        .filter_map(|a| a.as_str())
        .collect();
    assert!(args.contains(&"--allowedTools=Read,Grep,Glob"), "{args:?}");
    assert!(
        !args.contains(&"--dangerously-skip-permissions"),
        "{args:?}"
    );
    // Without REVIEW_AGENT there is no reviewer to show.
    p.hankrc("RETRY_BACKOFF_SECONDS=0\n");
    let o = p.run(&["--dry-run", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["reviewer"].is_null(), "{v}");
}

#[test]
fn an_approval_lets_the_verified_run_stop_done() {
    let (p, review) = reviewed("");
    let o = p.run_to(&[], 0, "plan_complete");
    assert_eq!((p.calls(), calls(&review)), (1, 1), "{}", stderr(&o));
    // Read-only, fresh: plan mode, read tools only, no session resumed.
    let argv = read(&review, "argv-1");
    assert!(argv.contains("--permission-mode\nplan\n"), "{argv}");
    assert!(argv.contains("--allowedTools=Read,Grep,Glob\n"), "{argv}");
    assert!(!argv.contains("--resume"), "{argv}");
    // Its input: the format, the items done, the check, the run's diff.
    let stdin = read(&review, "stdin-1");
    for want in [
        "VERDICT: APPROVE | CHANGES",
        "- add the widget",
        "No VERIFY_COMMAND is set",
        "The diff of this run (from its start)",
        "src/work.txt",
    ] {
        assert!(stdin.contains(want), "{want} missing in {stdin}");
    }
    let events = p.events_of("review");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["verdict"], "approve");
    assert_eq!(events[0]["round"], 1);
    assert_eq!(p.status()["review"]["verdict"], "approve");
}

#[test]
fn blockers_go_back_to_the_worker_then_the_reviewer_looks_at_what_changed() {
    let (p, review) = reviewed("");
    let changes = block(
        "CHANGES",
        &[
            "[blocker] src/work.txt: the error case is not handled",
            "[minor] README.md: a typo in the title",
        ],
    );
    std::fs::write(review.join("verdict-1"), changes).unwrap();
    let o = p.run_to(&[], 0, "plan_complete");
    assert_eq!((p.calls(), calls(&review)), (2, 2), "{}", stderr(&o));
    // The worker's next context: the blockers, labelled; never the minor findings.
    let (context, _) = p.context_and_prompt(2);
    assert!(context.contains("The reviewer's findings"), "{context}");
    assert!(
        context.contains("the error case is not handled"),
        "{context}"
    );
    assert!(!context.contains("typo"), "{context}");
    // Round 2 reads what changed since round 1, and what round 1 found.
    let stdin = read(&review, "stdin-2");
    assert!(stdin.contains("since your last round"), "{stdin}");
    assert!(stdin.contains("Round 1: [blocker] src/work.txt"), "{stdin}");
    let verdicts: Vec<String> = p
        .events_of("review")
        .iter()
        .map(|e| e["verdict"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(verdicts, ["changes", "approve"]);
    assert_eq!(p.events_of("review")[0]["minors"], 1);
}

#[test]
fn an_unreadable_review_every_round_stops_review_rejected_after_three() {
    let (p, review) = reviewed("");
    std::fs::write(review.join("verdict"), "Looks good to me, approve!").unwrap();
    let o = p.run_to(&[], 2, "review_rejected");
    assert_eq!((p.calls(), calls(&review)), (3, 3), "{}", stderr(&o));
    let s = p.status();
    assert_eq!(s["review"]["verdict"], "unreadable", "{s}");
    assert_eq!(s["review"]["round"], 3, "{s}");
    let err = stderr(&o);
    assert!(err.contains("could not be read"), "{err}");
}

#[test]
fn review_calls_count_against_the_cost_cap_and_their_share() {
    // MAX_COST_USD: the review's cost is the run's.
    let (p, review) = reviewed("MAX_COST_USD=0.5\n");
    std::fs::write(review.join("cost"), "0.6").unwrap();
    std::fs::write(
        review.join("verdict"),
        block("CHANGES", &["[blocker] a: b"]),
    )
    .unwrap();
    let o = p.run_to(&[], 3, "cost_budget");
    assert_eq!((p.calls(), calls(&review)), (1, 1), "{}", stderr(&o));
    // REVIEW_MAX_SHARE: the third round would make reviews most of the run's cost (the
    // worker's answer to the first findings is reviewed whatever the share).
    let (p, review) = reviewed("");
    std::fs::write(review.join("cost"), "0.05").unwrap();
    std::fs::write(
        review.join("verdict"),
        block("CHANGES", &["[blocker] a: b"]),
    )
    .unwrap();
    let o = p.run_to(&[], 3, "review_budget");
    assert_eq!((p.calls(), calls(&review)), (3, 2), "{}", stderr(&o));
    // Every call is on the call ledger and in the totals.
    let st = p.state();
    assert_eq!(st["loop_count"], 5, "{st}");
}

/// A short run — one cheap worker loop, a dearer review — is not stopped `review_budget`
/// with its first findings: the worker answers them and the reviewer looks at the answer.
#[test]
fn a_short_run_has_its_answer_to_the_first_findings_reviewed_whatever_the_share() {
    let (p, review) = reviewed("");
    std::fs::write(review.join("cost"), "0.05").unwrap();
    std::fs::write(
        review.join("verdict-1"),
        block("CHANGES", &["[blocker] src/work.txt: the error case"]),
    )
    .unwrap();
    let o = p.run_to(&[], 0, "plan_complete");
    assert_eq!((p.calls(), calls(&review)), (2, 2), "{}", stderr(&o));
    let verdicts: Vec<String> = p
        .events_of("review")
        .iter()
        .map(|e| e["verdict"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(verdicts, ["changes", "approve"]);
}

#[test]
fn review_calls_count_against_the_call_cap() {
    let (p, review) = reviewed("MAX_CALLS_PER_HOUR=2\n");
    std::fs::write(
        review.join("verdict"),
        block("CHANGES", &["[blocker] a: b"]),
    )
    .unwrap();
    p.waits_at_the_call_cap(&[]);
    assert_eq!((p.calls(), calls(&review)), (1, 1));
}

/// The read-only argv of each built-in profile as the reviewer, with its fake CLI.
#[test]
fn each_profile_reviews_read_only() {
    let cases = [
        (
            "claude",
            &[
                "--permission-mode\nplan\n",
                "--allowedTools=Read,Grep,Glob\n",
            ][..],
            &["--resume"][..],
        ),
        (
            "codex",
            &["--sandbox\nread-only\n"][..],
            &["--dangerously-bypass-approvals-and-sandbox", "resume"][..],
        ),
        (
            "gemini",
            &["--approval-mode\nplan\n"][..],
            &["yolo", "--resume"][..],
        ),
        (
            "opencode",
            &["--agent=plan\n"][..],
            &["--auto\n", "--session"][..],
        ),
    ];
    for (agent, wants, never) in cases {
        let p = Project::new(&["a"]);
        p.git_init();
        p.fake("effect.sh", TICK_ONE);
        let fake = if agent == "claude" {
            p.fake.join("review")
        } else {
            p.fake_agent_dir(agent)
        };
        std::fs::create_dir_all(&fake).unwrap();
        let program = if agent == "claude" { "reviewer" } else { agent };
        p.hankrc(&format!(
            "RETRY_BACKOFF_SECONDS=0\nREVIEW_AGENT={agent}\nREVIEW_AGENT_CMD={program}\nREVIEW_MAX_ROUNDS=1\n"
        ));
        let var = if agent == "claude" {
            "FAKE_REVIEW_DIR".to_owned()
        } else {
            format!("FAKE_{}_DIR", agent.to_uppercase())
        };
        let o = p.run_env(&[(var.as_str(), &fake)], &[]);
        let code = o.status.code();
        assert!(
            code == Some(0) || code == Some(2),
            "{agent}: {}",
            stderr(&o)
        );
        let argv = read(&fake, "argv-1");
        for w in wants {
            assert!(argv.contains(w), "{agent}: {w} missing in {argv}");
        }
        for n in never {
            assert!(!argv.contains(n), "{agent}: {n} in {argv}");
        }
        assert_eq!(p.events_of("review").len(), 1, "{agent}");
    }
}

/// With the sandbox on (real Landlock), the reviewer reads the project and cannot write it;
/// the worker still can.
#[test]
fn the_sandboxed_reviewer_cannot_write_the_project() {
    let (p, review) = reviewed("");
    let probe = "if cat .hank/fix_plan.md >/dev/null; then echo read >> \"$FAKE_REVIEW_DIR/probe\"; fi\n\
        if echo x > reviewer-wrote.txt 2>/dev/null; then echo wrote >> \"$FAKE_REVIEW_DIR/probe\"; \
        else echo refused >> \"$FAKE_REVIEW_DIR/probe\"; fi\n";
    std::fs::write(review.join("effect-1.sh"), probe).unwrap();
    let out = p
        .cmd()
        .env("SANDBOX", "landlock")
        .env("SANDBOX_WRITE", &p.fake)
        .env("FAKE_REVIEW_DIR", &review)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(read(&review, "probe"), "read\nrefused\n");
    assert!(!p.dir.join("reviewer-wrote.txt").exists());
    assert!(p.dir.join("src/work.txt").exists(), "the worker wrote");
}

/// In a fleet each task's worker (a `hank run`, given `--review-agent` and the environment's
/// REVIEW_AGENT_CMD) is reviewed before its task is merged.
#[test]
fn each_fleet_task_is_reviewed_before_its_merge() {
    let p = crate::fleet::project("# Plan\n\n## Alpha\n- [ ] a1\n\n## Beta\n- [ ] b1\n");
    let o = p.run_env(
        &[("REVIEW_AGENT_CMD", "reviewer")],
        &["fleet", "--agents", "1", "--review-agent", "claude"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let review = p.fake.join("review");
    assert_eq!(calls(&review), 2, "one review per task: {}", stderr(&o));
    let files = crate::support::git(&p.dir, &["ls-tree", "--name-only", "hank/fleet"]);
    assert!(
        files.contains("alpha.txt") && files.contains("beta.txt"),
        "{files}"
    );
}

/// `hank doctor` checks the reviewer as a run would find it: ready, or failed with its fix.
#[test]
fn doctor_checks_the_reviewer() {
    let (p, _) = reviewed("");
    let doctor = |p: &Project| {
        let out = p.cmd().args(["doctor", "--json"]).output().expect("doctor");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        crate::support::doctor_check(&v, "review").clone()
    };
    let ready = doctor(&p);
    assert_eq!(ready["ok"], true, "{ready}");
    let detail = ready["detail"].as_str().unwrap_or_default();
    assert!(detail.starts_with("REVIEW_AGENT=claude ("), "{detail}");
    assert!(detail.contains("at most 3 round(s)"), "{detail}");
    p.hankrc("# test project\nREVIEW_AGENT=claude\nREVIEW_AGENT_CMD=no-such-reviewer\n");
    let missing = doctor(&p);
    assert_eq!(missing["ok"], false, "{missing}");
    assert!(
        missing["detail"]
            .as_str()
            .is_some_and(|d| d.contains("REVIEW_AGENT claude")),
        "{missing}"
    );
}

/// The reviewer's own usage limit is not a verdict: no round is spent on it, and with
/// `ON_USAGE_LIMIT=exit` the run stops `usage_limit` (it waits for the reset otherwise, as a
/// worker's call would: `policy::run` tests).
#[test]
fn a_reviewer_at_its_usage_limit_spends_no_round() {
    let (p, review) = reviewed("ON_USAGE_LIMIT=exit\n");
    let reset = jiff::Timestamp::now().as_second() + 3600;
    std::fs::write(
        review.join("response-1"),
        crate::support::usage_limit_json(reset),
    )
    .unwrap();
    let o = p.run(&[]);
    let s = p.status();
    assert_eq!(s["exit_reason"], "usage_limit", "{s}\n{}", stderr(&o));
    assert_eq!((p.calls(), calls(&review)), (1, 1), "{}", stderr(&o));
    assert!(p.events_of("review").is_empty(), "no round was counted");
    assert!(stderr(&o).contains("hit its usage limit"), "{}", stderr(&o));
}
