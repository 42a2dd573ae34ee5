//! hank's integration tests: one binary (`cargo test --test integration`), one module per
//! feature, all hermetic (temp dirs, HOME in a temp dir, the fake agent from `fixtures/bin`).

// Test helpers outside #[test] functions may panic on setup failures: that is a test failure.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod action_install;
mod actions;
mod agents;
mod analyze;
mod architecture;
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
