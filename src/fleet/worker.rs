//! A task's worker: its spawn, its end, its signals; the machine's memory reading.

use super::Paths;
use crate::error::HankError;
use crate::error::Result;
use crate::store::fleet_ledger;
use std::fs;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

/// Starts a task's worker: `hank run FLAGS` in its worktree, in a process group of its own,
/// output to its log, told where the fleet-wide ledger is. (The one spawn of the fleet.)
pub(super) fn spawn_worker(
    paths: &Paths,
    (wt, slug): (&Path, &str),
    flags: &[String],
    left: Option<Duration>,
    json: bool,
    repos: Option<&str>,
) -> Result<Child> {
    let exe = std::env::current_exe()
        .map_err(|e| HankError::Internal(format!("cannot find hank's own program: {e}")))?;
    let log_path = paths.log(slug);
    if let Some(p) = log_path.parent() {
        fs::create_dir_all(p).map_err(|e| HankError::io("create", p, e))?;
    }
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| HankError::io("open", &log_path, e))?;
    let mut args: Vec<std::ffi::OsString> = std::iter::once("run".into())
        .chain(with_runtime(flags, left).into_iter().map(Into::into))
        .collect();
    if json {
        // The task's own `--json` would go to its log: its events reach stdout through the
        // supervisor (`events::Tail`).
        args.retain(|a| a != "--json");
    }
    let ledger = paths.ledger();
    let mut env = vec![
        (std::ffi::OsStr::new(fleet_ledger::ENV), ledger.as_os_str()),
        // The worker pins its worktree's git directory from the checkout's records.
        (
            std::ffi::OsStr::new(crate::git::TASK_CHECKOUT_ENV),
            paths.root.as_os_str(),
        ),
    ];
    // A task of several repositories: the folders and checkouts of its other ones (its
    // sandbox's grants and its progress come from these, never from the worktree's files).
    if let Some(text) = repos {
        env.push((
            std::ffi::OsStr::new(crate::git::TASK_REPOS_ENV),
            std::ffi::OsStr::new(text),
        ));
    }
    crate::proc::spawn_to_log(exe.as_os_str(), &args, wt, &env, log)
        .map_err(|e| HankError::Internal(format!("cannot start hank run for a task: {e}")))
}

/// The task's `hank run` flags with MAX_RUNTIME set to what is left of the fleet's (the
/// user's own `--max-runtime` replaced): the runtime cap holds from the fleet's start.
pub(super) fn with_runtime(flags: &[String], left: Option<Duration>) -> Vec<String> {
    let Some(left) = left else {
        return flags.to_vec();
    };
    let mut out = Vec::with_capacity(flags.len() + 2);
    let mut skip = false;
    for f in flags {
        if skip {
            skip = false;
            continue;
        }
        if f == "--max-runtime" {
            skip = true;
            continue;
        }
        if f.starts_with("--max-runtime=") {
            continue;
        }
        out.push(f.clone());
    }
    // Whole seconds, at least one (a zero would mean unlimited).
    let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    out.push("--max-runtime".into());
    out.push(format!("{}s", secs.max(1)));
    out
}

pub(super) fn kill_group(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(p) = i32::try_from(pid) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(p), sig);
    }
}

pub(super) fn signal_pid(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(p) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), sig);
    }
}

/// MemAvailable of `/proc/meminfo` in bytes (`None` when unreadable).
pub(super) fn free_memory() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}
/// A task's worker: started by this fleet (its `Child`) or adopted from a fleet that was
/// killed (its pid and start time).
pub(super) enum Worker {
    Own(Child),
    Adopted { pid: u32, ticks: u64 },
}

impl Worker {
    pub(super) fn pid(&self) -> u32 {
        match self {
            Self::Own(c) => c.id(),
            Self::Adopted { pid, .. } => *pid,
        }
    }

    /// `Some(exit code)` once it ended (`None` for an adopted worker: read its status).
    pub(super) fn finished(&mut self) -> Option<Option<u8>> {
        match self {
            Self::Own(c) => match c.try_wait() {
                Ok(Some(s)) => Some(Some(exit_code_of(s))),
                Ok(None) => None,
                Err(_) => Some(None),
            },
            Self::Adopted { pid, ticks } => {
                let alive =
                    i32::try_from(*pid).is_ok_and(|p| crate::agent::process::is_running(p, *ticks));
                (!alive).then_some(None)
            }
        }
    }
}

pub(super) fn exit_code_of(s: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => u8::try_from(c).unwrap_or(crate::exit::ERROR),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(crate::exit::ERROR),
        _ => crate::exit::ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::with_runtime;
    use std::time::Duration;

    #[test]
    fn each_task_gets_what_is_left_of_the_fleets_runtime() {
        let flags = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(
            with_runtime(&flags(&["--calls", "3"]), None),
            flags(&["--calls", "3"])
        );
        assert_eq!(
            with_runtime(
                &flags(&["--max-runtime", "8h", "--calls", "3", "--max-runtime=2h"]),
                Some(Duration::from_millis(90_500))
            ),
            flags(&["--calls", "3", "--max-runtime", "91s"])
        );
        assert_eq!(
            with_runtime(&[], Some(Duration::ZERO)),
            flags(&["--max-runtime", "1s"]),
            "never zero (unlimited)"
        );
    }
}
