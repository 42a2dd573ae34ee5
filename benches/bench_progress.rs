//! Benchmark of the per-loop progress facts (`hank::progress`): `baseline` + `measure` on a
//! generated project (default 10,000 files, git repository), against what the old method
//! cost (spawning `git rev-parse` + `git status` at the baseline and `git status` after):
//!
//! ```text
//! cargo run --release --example bench_progress [-- FILES]
//! ```

#[path = "../examples/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{header, row, time_runs};
use hank::progress;

fn git_status(dir: &Path) -> usize {
    Command::new("git")
        .args(["-c", "core.fsmonitor=false", "-C"])
        .arg(dir)
        .args([
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            "--untracked-files=all",
            "--",
            ".",
        ])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_or(0, |o| o.stdout.len())
}

fn git_rev_parse(dir: &Path) -> usize {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--show-toplevel", "--show-prefix"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_or(0, |o| o.stdout.len())
}

fn main() -> common::Res<()> {
    let files: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()
        .map_err(|_| "FILES must be a number")?
        .unwrap_or(10_000);
    let tmp = tempfile::tempdir()?;
    println!("## progress facts\n");
    header("note");
    for (label, n) in [("small", 20usize), ("large", files)] {
        for with_git in [true, false] {
            let dir = tmp.path().join(format!("{label}-{with_git}"));
            std::fs::create_dir_all(&dir)?;
            common::project_tree(&dir, n, with_git)?;
            let kind = if with_git { "git" } else { "no git" };
            let s = time_runs(30, || {
                let base = progress::baseline(&dir, "- [ ] a\n");
                progress::measure(&dir, &base, "- [ ] a\n").files_changed
            });
            row(
                &format!("baseline+measure, {n} files, {kind}, nothing changed"),
                &s,
                "in-process (new)",
            );
            let work = dir.join("src/work.txt");
            let mut k = 0u64;
            let s = time_runs(30, || {
                let base = progress::baseline(&dir, "");
                k += 1;
                let _ = std::fs::write(&work, k.to_string());
                progress::measure(&dir, &base, "").files_changed
            });
            row(
                &format!("baseline+measure, {n} files, {kind}, one file changed"),
                &s,
                "in-process (new), includes the write",
            );
            if with_git {
                let s = time_runs(30, || {
                    git_rev_parse(&dir) + git_status(&dir) + git_status(&dir)
                });
                row(
                    &format!("old method, {n} files: rev-parse + 2 × status"),
                    &s,
                    "3 git processes (before this change)",
                );
            }
        }
    }
    Ok(())
}
