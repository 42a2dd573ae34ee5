//! Issue 35 item 4, from the agent's side: the forge token hank holds (`GH_TOKEN` in hank's
//! environment during `hank run --deliver pr`, `hank fleet run-task`) is in no process the
//! agent can read. It is removed from the agent's environment, and the agent cannot read
//! hank's own environment through `/proc/<pid>/environ` either: hank is not dumpable while it
//! runs a loop, and a sandboxed agent is outside hank's Landlock domain.
//!
//! Observed on this kernel (6.18): an agent running as root reads `/proc/<hank>/environ`
//! whatever hank does (non-dumpable, Landlock, even with `CAP_SYS_PTRACE` dropped; only an
//! agent with no capability at all is refused). The second test therefore runs only as a
//! user, and docs/safety.md says so.

use crate::support::{Project, TICK_ONE, stderr};

/// The token's value: whatever holds it, the probe finds it.
const TOKEN: &str = "ghp_ProbeTokenZq8vR2mTx7LpK4nW9bYc3HdF6gJ1";

/// The probe: its own environment, then every `/proc/*/environ` it can read.
const PROBE: &str = r#"
if env | grep -q ProbeToken; then echo own-env >> probe.log; fi
for f in /proc/[0-9]*/environ; do
  if tr '\0' '\n' < "$f" 2>/dev/null | grep -q ProbeToken; then echo "read ${f} $(tr '\0' ' ' < ${f%environ}cmdline) $(grep NoNewPrivs ${f%environ}status)" >> probe.log; fi
done
echo probed >> probe.log
"#;

fn probe(sandbox: &str) -> (Vec<String>, String) {
    let p = Project::new(&["task"]);
    p.git_init();
    p.fake("effect-1.sh", &format!("{PROBE}{TICK_ONE}"));
    let out = p
        .cmd()
        .env("SANDBOX", sandbox)
        .env("SANDBOX_WRITE", p.fake.display().to_string())
        .env("GH_TOKEN", TOKEN)
        .args(["run", "--max-loops", "1"])
        .output()
        .expect("run hank");
    let log = std::fs::read_to_string(p.dir.join("probe.log")).unwrap_or_default();
    (log.lines().map(str::to_string).collect(), stderr(&out))
}

#[test]
fn the_agent_never_holds_the_token_in_its_environment() {
    let (log, err) = probe("off");
    assert!(log.iter().any(|l| l == "probed"), "{err}");
    assert!(!log.iter().any(|l| l == "own-env"), "{log:?}\n{err}");
}

fn as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    })
}

#[test]
fn an_agent_cannot_read_the_token_from_hanks_process() {
    if as_root() {
        eprintln!("SKIPPED: as root every process's environment is readable (see the module doc)");
        return;
    }
    let modes: &[&str] = if hank::sandbox::available() {
        &["off", "landlock"]
    } else {
        &["off"]
    };
    for mode in modes {
        let (log, err) = probe(mode);
        assert!(log.iter().any(|l| l == "probed"), "{err}");
        let read: Vec<&String> = log.iter().filter(|l| l.starts_with("read ")).collect();
        assert!(
            read.is_empty(),
            "SANDBOX={mode}: the agent read the token: {read:?}"
        );
    }
}

#[test]
fn a_sandboxed_agent_never_holds_the_token_either() {
    if !hank::sandbox::available() {
        eprintln!("SKIPPED: Landlock is not available on this kernel");
        return;
    }
    let (log, err) = probe("landlock");
    assert!(log.iter().any(|l| l == "probed"), "{err}");
    assert!(!log.iter().any(|l| l == "own-env"), "{log:?}");
}
