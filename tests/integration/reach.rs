//! The agent's reach, round two (issue 24): what the agent can write in the project cannot
//! make hank run its code (through hank's own git), steer the next run, write outside the
//! project, or smuggle text past hank's sanitizer and delimiters. Each test is the attack.

use std::path::Path;
use std::time::Duration;

use crate::support::{Project, TICK_ONE, signal, stderr, wait_with_timeout};

/// A generous bound for runs that must end by themselves (a hang would take forever).
const ENDS_WITHIN: Duration = Duration::from_secs(90);

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// Item 2: a clean/smudge/process filter configured in `.git/config` for the project's files
/// never runs in hank's own `git status`, even when the agent touches a filtered file; and
/// had it run, it would have seen no secret of hank's environment.
#[test]
fn a_filter_configured_in_the_repository_never_runs() {
    let p = Project::new(&["a", "b", "c"]);
    std::fs::write(p.dir.join("notes.txt"), "tracked\n").unwrap();
    std::fs::write(p.dir.join(".gitattributes"), "*.txt filter=x\n").unwrap();
    p.git_init();
    let marker = p.fake.join("filter-ran");
    let env_dump = p.fake.join("filter-env");
    let script = p.fake.join("filter.sh");
    std::fs::write(
        &script,
        format!(
            "touch '{}'\nenv > '{}'\nsetsid sleep 300 >&2 &\ncat\n",
            marker.display(),
            env_dump.display()
        ),
    )
    .unwrap();
    append(
        &p.dir.join(".git/config"),
        &format!(
            "[filter \"x\"]\n\tclean = sh '{s}'\n\tsmudge = sh '{s}'\n\tprocess = sh '{s}'\n\trequired = true\n",
            s = script.display()
        ),
    );
    // The agent touches the filtered file (and does some work) in every call.
    p.fake(
        "effect.sh",
        &format!("sleep 1.1; touch notes.txt\n{TICK_ONE}"),
    );
    let child = p
        .cmd()
        .env("ANTHROPIC_API_KEY", "sk-ant-api03-filtersecret-0123456789")
        .args(["--max-loops", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_with_timeout(child, ENDS_WITHIN);
    let err = stderr(&out);
    assert_eq!(p.calls(), 2, "{err}");
    assert!(
        !marker.exists(),
        "the repository's filter ran as hank's child; its environment:\n{}",
        std::fs::read_to_string(&env_dump).unwrap_or_default()
    );
    // Progress was still measured (the work file counts).
    let events = p.events();
    assert!(
        events
            .iter()
            .filter(|e| e["type"] == "agent_finished")
            .all(|e| e["files_changed"].as_u64() >= Some(1)),
        "{events:?}"
    );
}

/// Item 2: a git call that never ends (the agent replaced `.git/config` with a FIFO, so git
/// blocks opening it) ends with hank on Ctrl-C: hank exits 130 promptly, not after git's
/// timeout.
#[test]
fn ctrl_c_ends_a_git_call_that_hangs() {
    let p = Project::new(&["a", "b", "c"]);
    p.git_init();
    p.fake(
        "effect.sh",
        &format!("{TICK_ONE}rm -f .git/config && mkfifo .git/config\n"),
    );
    let child = p.spawn(&["--max-loops", "3"]);
    p.wait_calls(1, ENDS_WITHIN);
    // Hank is now in its `git status` after the call, blocked on the FIFO.
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let started = std::time::Instant::now();
    let out = wait_with_timeout(child, ENDS_WITHIN);
    let waited = started.elapsed();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    // git's own timeout is 60 s: ending well before it means the signal ended the call.
    assert!(waited < Duration::from_secs(30), "{waited:?}");
    assert_eq!(p.calls(), 1);
}
