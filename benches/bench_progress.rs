//! Benchmark of the per-loop progress facts (`hank::progress`) against `git status`.
//!
//! ```text
//! cargo bench --bench bench_progress [-- SIZES]      # SIZES: comma-separated, default 1000,10000,100000
//! ```
//!
//! For each size, a generated git project (`SIZE` committed source files, `SIZE/4` ignored
//! build files) in `$TMPDIR`, and per loop (one file rewritten each time, as an agent would):
//!
//! - **hank, steady state**: `progress::baseline` + `progress::measure`, the baseline reusing
//!   the previous measure's snapshot as the engine's back-to-back loops do (one `git status`);
//! - **hank, cold**: a fresh snapshot at the baseline and one at the measure (a loop that
//!   starts after a wait: `git rev-parse` + 2 × `git status`);
//! - **`git status --porcelain`**, run the way a user would, and the exact command hank runs.
//!
//! The four are interleaved round by round (the first round is a warm-up), so that the load
//! of a shared machine weighs on all of them alike.
//! The ratio is hank's steady state over `git status --porcelain`. Peak RSS is hank's own
//! (`VmHWM` of a fresh process that only runs 20 loops; its RSS before the first loop is
//! shown too), and git's (`/usr/bin/time -f %M` around one `git status`, when available).

#[path = "../examples/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Stats, human};
use hank::{progress, worktree};

fn git_status(dir: &Path, args: &[&str]) -> usize {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_or(0, |o| o.stdout.len())
}

const PLAIN: [&str; 2] = ["status", "--porcelain"];

fn vm_hwm_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Child mode: 20 loops on `dir`, then prints `before_kb peak_kb`.
fn rss_child(dir: &Path) {
    let before = vm_hwm_kb();
    let work = dir.join("src/work.txt");
    for k in 0..20 {
        let base = progress::baseline(dir, "- [ ] a\n");
        let _ = std::fs::write(&work, format!("{k}"));
        std::hint::black_box(progress::measure(dir, &base, "- [x] a\n"));
    }
    println!("{before} {}", vm_hwm_kb());
}

fn git_max_rss_kb(dir: &Path) -> Option<u64> {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M", "git", "-C"])
        .arg(dir)
        .args(PLAIN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .last()?
        .trim()
        .parse()
        .ok()
}

fn mb(kb: u64) -> String {
    format!("{:.1} MB", kb as f64 / 1024.0)
}

fn main() -> common::Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--rss-child") {
        let dir = args.get(i + 1).ok_or("--rss-child DIR")?;
        rss_child(Path::new(dir));
        return Ok(());
    }
    let sizes: Vec<usize> = args
        .iter()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or("1000,10000,100000", String::as_str)
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| "SIZES must be comma-separated numbers")?;
    // The exact `git status` of a snapshot (`worktree::State::capture`).
    let as_hank = [&worktree::STATUS_ARGS[..], &worktree::PATHSPEC[..]].concat();
    let tmp = tempfile::tempdir()?;
    println!("## progress facts, per loop (one file rewritten per loop)\n");
    println!(
        "| files | hank steady (baseline + measure) | hank cold | `git status --porcelain` | git status as hank runs it | ratio steady / git status | hank peak RSS (before loops) | git status peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for n in sizes {
        let dir = tmp.path().join(format!("p{n}"));
        std::fs::create_dir_all(&dir)?;
        let t = Instant::now();
        common::project_tree(&dir, n, true)?;
        eprintln!("{n} files generated in {:.1?}", t.elapsed());
        let runs = if n >= 50_000 { 21 } else { 41 };
        let work = dir.join("src/work.txt");
        let mut k = 0u64;
        let mut base = Some(progress::baseline(&dir, ""));
        // One loop of hank in the steady state: the measure, then the next loop's baseline
        // taken right away (it reuses the measure's snapshot, as in the engine).
        let mut steady = || {
            k += 1;
            let _ = std::fs::write(&work, k.to_string());
            let t = Instant::now();
            let b = base.take().unwrap_or_else(|| progress::baseline(&dir, ""));
            let p = progress::measure(&dir, &b, "");
            base = Some(progress::baseline(&dir, ""));
            let d = t.elapsed();
            assert!(p.files_changed >= 1);
            d
        };
        // A loop after a wait: fresh snapshots at both ends.
        let cold = |k: u64| {
            let t = Instant::now();
            let b = worktree::State::capture(&dir);
            let _ = std::fs::write(dir.join("src/cold.txt"), k.to_string());
            let c = worktree::changes_since(&dir, &b);
            assert!(!c.paths.is_empty());
            t.elapsed()
        };
        let git = |args: &[&str]| {
            let t = Instant::now();
            std::hint::black_box(git_status(&dir, args));
            t.elapsed()
        };
        // Interleaved, so that the load of a shared machine weighs on all four alike.
        let mut samples: [Vec<Duration>; 4] = Default::default();
        for round in 0..=runs {
            let s = [steady(), cold(round as u64), git(&PLAIN), git(&as_hank)];
            if round > 0 {
                for (v, d) in samples.iter_mut().zip(s) {
                    v.push(d);
                }
            }
        }
        let [steady, cold, plain, as_hank] = samples.map(Stats::of);
        let rss = Command::new(std::env::current_exe()?)
            .arg("--rss-child")
            .arg(&dir)
            .stderr(Stdio::null())
            .output()?;
        let rss = String::from_utf8_lossy(&rss.stdout).to_string();
        let mut rss = rss
            .split_whitespace()
            .map(|v| v.parse::<u64>().unwrap_or(0));
        let (before, peak) = (rss.next().unwrap_or(0), rss.next().unwrap_or(0));
        let git_rss = git_max_rss_kb(&dir).map_or("n/a".to_string(), mb);
        let ratio = steady.median.as_secs_f64() / plain.median.as_secs_f64().max(1e-9);
        let cell = |s: &Stats| format!("{} ({}–{})", human(s.median), human(s.min), human(s.max));
        println!(
            "| {n} | {} | {} | {} | {} | {ratio:.2}× | {} ({}) | {git_rss} |",
            cell(&steady),
            cell(&cold),
            cell(&plain),
            cell(&as_hank),
            mb(peak),
            mb(before),
        );
    }
    Ok(())
}
