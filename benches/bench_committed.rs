//! Benchmark of the files a loop's commits touched (`crate::worktree`'s `committed`): the
//! in-process tree diff (`hank::git::odb::changed_files`) against the git child it replaced
//! (`hank::worktree::committed_by_git`, `git diff --name-only` through the process layer).
//!
//! ```text
//! cargo bench --bench bench_committed [-- SIZES]   # SIZES: comma-separated, default 0,10000,100000
//! ```
//!
//! For each size, a generated git project (`SIZE` committed source files in nested
//! directories, as `bench_progress` makes them), its history packed by `git gc` (a cloned or
//! long-lived repository), then per round one commit as an agent makes it (`src/work.txt`
//! rewritten, `git commit -a`: its new objects loose, the rest in the pack), and both ways
//! of naming that commit's files, interleaved round by round (the first round is a warm-up).
//! Both answers are checked equal.

#[path = "../examples/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Stats, human};
use hank::git::odb;
use hank::worktree;

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    Command::new("git")
        .args(["-c", "user.name=b", "-c", "user.email=b@example.com"])
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default()
}

fn head(dir: &Path) -> Option<odb::Oid> {
    odb::parse_hex(&String::from_utf8_lossy(&git(dir, &["rev-parse", "HEAD"])))
}

fn main() -> common::Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<usize> = args
        .iter()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or("0,10000,100000", String::as_str)
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| "SIZES must be comma-separated numbers")?;
    let tmp = tempfile::tempdir()?;
    println!("## the files of a loop's commit (HEAD moved by one commit)\n");
    println!(
        "| files | in process (`odb::changed_files`) | git child (`git diff --name-only`) | ratio in process / git |"
    );
    println!("|---|---|---|---|");
    for n in sizes {
        let dir = tmp.path().join(format!("p{n}"));
        std::fs::create_dir_all(&dir)?;
        let t = Instant::now();
        common::project_tree(&dir, n, true)?;
        std::fs::create_dir_all(dir.join("src"))?;
        std::fs::write(dir.join("src/work.txt"), "0")?;
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "-m", "work"]);
        git(&dir, &["gc", "-q"]);
        eprintln!("{n} files generated and packed in {:.1?}", t.elapsed());
        let layout = hank::git::snapshot::layout(&dir).map_err(|e| e.to_string())?;
        let runs = 31;
        let (mut inproc, mut child) = (Vec::new(), Vec::new());
        for k in 0..=runs {
            let before = head(&dir);
            std::fs::write(dir.join("src/work.txt"), (k + 1).to_string())?;
            git(&dir, &["commit", "-q", "-am", "loop"]);
            let after = head(&dir);
            let t = Instant::now();
            let a = odb::changed_files(&layout, before, after).map_err(|e| e.to_string())?;
            let d1 = t.elapsed();
            let (b, c) = (before.map(|o| odb::hex(&o)), after.map(|o| odb::hex(&o)));
            let t = Instant::now();
            let g = worktree::committed_by_git(&dir, b.as_deref(), c.as_deref());
            let d2 = t.elapsed();
            if a != g || a != ["src/work.txt"] {
                return Err(format!("the answers differ: {a:?} against git's {g:?}").into());
            }
            if k > 0 {
                inproc.push(d1);
                child.push(d2);
            }
        }
        let (i, g) = (Stats::of(inproc), Stats::of(child));
        let cell = |s: &Stats| format!("{} ({}–{})", human(s.median), human(s.min), human(s.max));
        let ratio = i.median.as_secs_f64() / g.median.max(Duration::from_nanos(1)).as_secs_f64();
        println!("| {n} | {} | {} | {ratio:.3}× |", cell(&i), cell(&g));
    }
    Ok(())
}
