//! The fleet's git time and hank's own cost (`HANK_FLEET_TIMING`, `scripts/bench-fleet.sh`).

use std::fs;
use std::time::{Duration, Instant};

/// Wall time spent in git commands by this fleet, and how many (for `HANK_FLEET_TIMING`).
pub(super) static GIT_NANOS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
pub(super) static GIT_COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// The supervisor's waits so far (each ends in one wake-up; for `HANK_FLEET_TIMING`).
pub(super) static WAKES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A git command counted in the fleet's git time.
pub(super) fn timed<T>(f: impl FnOnce() -> T) -> T {
    use std::sync::atomic::Ordering;
    let start = Instant::now();
    let out = f();
    let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    GIT_NANOS.fetch_add(nanos, Ordering::Relaxed);
    GIT_COUNT.fetch_add(1, Ordering::Relaxed);
    out
}

/// The bound of a git command that touches every file of the tree (a worktree's removal).
pub(super) const TREE_GIT_TIMEOUT: Duration = Duration::from_secs(600);

/// CPU time (user + system) of this process so far, from `/proc/self/stat` (clock ticks of
/// 10 ms on Linux).
pub(super) fn own_cpu() -> Option<Duration> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command.
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// With `HANK_FLEET_TIMING` set: hank's own cost (its CPU, its peak memory) apart from the
/// git commands it ran, on stderr at the end of the fleet (for `scripts/bench-fleet.sh`).
pub(super) fn report_timing(tasks: usize, wall: Duration) {
    use std::sync::atomic::Ordering;
    if std::env::var_os("HANK_FLEET_TIMING").is_none() {
        return;
    }
    let git = Duration::from_nanos(GIT_NANOS.load(Ordering::Relaxed));
    let count = GIT_COUNT.load(Ordering::Relaxed);
    let cpu = own_cpu().unwrap_or_default();
    let hwm = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let per = u32::try_from(tasks.max(1)).unwrap_or(u32::MAX);
    let wakes = WAKES.load(Ordering::Relaxed);
    errln!(
        "hank: fleet timing: tasks {tasks} wall_ms {} git_commands {count} git_ms {} \
         git_ms_per_task {} own_cpu_ms {} own_cpu_ms_per_task {} supervisor_peak_rss_kb {hwm} \
         supervisor_wakes {wakes}",
        wall.as_millis(),
        git.as_millis(),
        (git / per).as_millis(),
        cpu.as_millis(),
        (cpu / per).as_millis(),
    );
}
