//! The differential test of the in-process reader against real git: a generated corpus of
//! repositories, each taken through random rounds of every change kind the progress tests
//! cover (edits, deletions, renames staged and not, untracked files, ignored files by root
//! and nested `.gitignore` rules with negations and `info/exclude`, staging, unstaging,
//! `git rm --cached`, `git add -N`, the exec bit, `touch`, reverted edits, symlinks, commits,
//! nested repositories, a submodule edited and committed inside). After every round:
//!
//! - **static**: the paths the snapshot holds as dirty are exactly the paths `git status
//!   --porcelain=v2 --untracked-files=all --ignore-submodules=none --no-renames` shows in the work-tree
//!   column, as unmerged, or untracked;
//! - **delta**: the paths [`Table::changed`] names between the round's two snapshots (plus
//!   the files of the commits made, as `crate::worktree` adds them) are exactly the paths
//!   whose git status entry appeared, disappeared or changed, whose content changed while
//!   git showed them, or that a commit of the round touched.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::*;
use crate::git::git_in;

/// xorshift64*: a deterministic corpus without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        (!v.is_empty()).then(|| &v[self.below(v.len())])
    }
}

fn git_out(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = crate::git::Checkout::at(dir).git().read_unfiltered(args);
    out.unwrap_or_else(|e| panic!("git {args:?}: {e}"))
}

fn write(d: &Path, rel: &str, content: &str) {
    let p = d.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&p);
    std::fs::write(p, content).unwrap();
}

/// One `git status` entry: (kind and XY / flags, original path).
type Status = BTreeMap<String, (String, String)>;

/// `git status --porcelain=v2` of the project (hank's files left out), by path; and the
/// paths of its work-tree column, unmerged entries and untracked files.
fn status(d: &Path) -> (Status, BTreeSet<String>) {
    let out = git_out(
        d,
        &[
            "status",
            "--porcelain=v2",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=none",
            // Rename pairing is a presentation: an unchanged deleted file can become the
            // source of a rename when another path is added. Each side is its own entry.
            "--no-renames",
            "--",
            ".",
            ":!.hank",
            ":!.hankrc",
        ],
    );
    let mut all = Status::new();
    let mut work = BTreeSet::new();
    // Without renames every record is one NUL-ended token: `1 XY sub mH mI mW hH hI PATH`,
    // `u XY sub m1 m2 m3 mW h1 h2 h3 PATH`, `? PATH`.
    for token in out.split(|&b| b == 0).filter(|t| !t.is_empty()) {
        let text = String::from_utf8_lossy(token).into_owned();
        let n = match text.as_bytes().first() {
            Some(b'1') => 8,
            Some(b'u') => 10,
            Some(b'?') => 1,
            _ => continue,
        };
        let parts: Vec<&str> = text.splitn(n + 1, ' ').collect();
        let (fields, path) = parts.split_at(n.min(parts.len()));
        let (Some(kind), Some(path)) = (fields.first(), path.first()) else {
            continue;
        };
        let xy = fields.get(1).copied().unwrap_or("");
        let shown = *kind != "1" || xy.as_bytes().get(1) != Some(&b'.');
        if shown {
            work.insert((*path).to_string());
        }
        all.insert((*path).to_string(), (fields.join(" "), String::new()));
    }
    (all, work)
}

/// The bytes at each path git shows in the work-tree column or untracked (a symlink's
/// target; for a nested repository `dir/`, its own status and HEAD).
fn contents(d: &Path, work: &BTreeSet<String>) -> BTreeMap<String, Vec<u8>> {
    work.iter()
        .map(|p| {
            let path = d.join(p.trim_end_matches('/'));
            let bytes = if p.ends_with('/') || path.join(".git").exists() {
                let mut b = git_out(&path, &["status", "--porcelain=v2", "-z", "--branch"]);
                for line in String::from_utf8_lossy(&b.clone()).split('\0') {
                    if let Some(f) = line.rsplit(' ').next() {
                        b.extend(std::fs::read(path.join(f)).unwrap_or_default());
                    }
                }
                b
            } else if let Ok(t) = std::fs::read_link(&path) {
                t.as_os_str().as_bytes().to_vec()
            } else {
                std::fs::read(&path).unwrap_or_else(|_| b"<gone>".to_vec())
            };
            (p.clone(), bytes)
        })
        .collect()
}

fn head_hex(d: &Path) -> Option<String> {
    let out =
        crate::git::Checkout::at(d)
            .git()
            .read_unfiltered(&["rev-parse", "-q", "--verify", "HEAD"]);
    out.ok()
        .map(|o| String::from_utf8_lossy(&o).trim().to_string())
}

fn commit_files(d: &Path, from: Option<&str>) -> BTreeSet<String> {
    let Some(to) = head_hex(d) else {
        return BTreeSet::new();
    };
    let out = match from {
        Some(f) if f != to => git_out(
            d,
            &[
                "diff",
                "--name-only",
                "-z",
                "--no-renames",
                f,
                &to,
                "--",
                ".",
                ":!.hank",
                ":!.hankrc",
            ],
        ),
        Some(_) => Vec::new(),
        None => git_out(d, &["ls-tree", "-r", "--name-only", "-z", &to]),
    };
    out.split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// Tracked regular files of the project (from git), hank's excepted.
fn tracked(d: &Path) -> Vec<String> {
    let out = git_out(d, &["ls-files", "-z", "--", ".", ":!.hank", ":!.hankrc"]);
    out.split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .filter(|p| d.join(p).is_file() && !p.starts_with("sub") && p != ".gitmodules")
        .collect()
}

const NAMES: [&str; 14] = [
    "src/a.rs",
    "src/b.rs",
    "src/deep/c.rs",
    "docs/x.md",
    "x.log",
    "keep.log",
    "build/out.o",
    "pkg/local.txt",
    "pkg/kept.txt",
    "pkg/y.tmp",
    "new dir/ü ñ.txt",
    "node_modules/m/i.js",
    "excluded.bak",
    "tool.sh",
];

/// One random change of the kinds the progress tests cover; returns its name.
fn change(d: &Path, rng: &mut Rng, n: u64) -> &'static str {
    let files = tracked(d);
    let untracked: Vec<String> = NAMES
        .iter()
        .map(|s| s.to_string())
        .filter(|p| d.join(p).is_file() && !files.contains(p))
        .collect();
    let any = rng.pick(&files).cloned();
    match rng.below(19) {
        0 | 1 => {
            if let Some(f) = any {
                write(d, &f, &format!("edit {n}\n"));
            }
            "edit"
        }
        2 => {
            if let Some(f) = any {
                std::fs::remove_file(d.join(f)).unwrap();
            }
            "delete"
        }
        3 => {
            if let Some(f) = any {
                git_in(d, &["mv", "-f", &f, &format!("moved{n}.rs")]);
            }
            "git mv"
        }
        4 => {
            if let Some(f) = any {
                std::fs::rename(d.join(f), d.join(format!("renamed{n}.rs"))).unwrap();
            }
            "mv"
        }
        5 | 6 => {
            let name = NAMES[rng.below(NAMES.len())];
            write(d, name, &format!("new {n}\n"));
            "create (maybe ignored)"
        }
        7 => {
            if let Some(f) = rng.pick(&untracked).cloned().or(any) {
                git_in(d, &["add", "-f", "--", &f]);
            }
            "stage"
        }
        8 => {
            if let Some(f) = any {
                git_in(d, &["reset", "-q", "--", &f]);
            }
            "unstage"
        }
        9 => {
            if let Some(f) = any {
                let mode = if rng.below(2) == 0 { 0o755 } else { 0o600 };
                std::fs::set_permissions(d.join(f), std::fs::Permissions::from_mode(mode)).unwrap();
            }
            "chmod"
        }
        10 => {
            if let Some(f) = any {
                let file = std::fs::File::options()
                    .write(true)
                    .open(d.join(f))
                    .unwrap();
                file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
                    .unwrap();
            }
            "touch"
        }
        11 => {
            if let Some(f) = any {
                let before = std::fs::read(d.join(&f)).unwrap();
                std::fs::write(d.join(&f), b"transient\n").unwrap();
                std::fs::write(d.join(&f), before).unwrap();
            }
            "edit reverted"
        }
        12 => {
            let link = d.join("link");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(format!("target{}", rng.below(3)), &link).unwrap();
            "symlink"
        }
        13 => {
            git_in(d, &["add", "-A", "--", "src", "docs"]);
            git_in(
                d,
                &["commit", "-q", "--allow-empty", "-am", &format!("c{n}")],
            );
            "commit"
        }
        14 => {
            let rules = ["*.tmp\n!kept.txt\nlocal.txt\n", "kept.txt\n", ""];
            write(d, "pkg/.gitignore", rules[rng.below(rules.len())]);
            "nested .gitignore"
        }
        15 => {
            if let Some(f) = any {
                git_in(d, &["rm", "-q", "-f", "--cached", "--", &f]);
            }
            "rm --cached"
        }
        16 => {
            if let Some(f) = rng.pick(&untracked).cloned() {
                git_in(d, &["add", "-N", "-f", "--", &f]);
            }
            "add -N"
        }
        17 => {
            let nested = d.join(format!("nested{}", rng.below(2)));
            if nested.join(".git").exists() {
                write(&nested, "inner.txt", &format!("inner {n}\n"));
            } else {
                std::fs::create_dir_all(&nested).unwrap();
                git_in(&nested, &["init", "-q"]);
                write(&nested, "inner.txt", "inner\n");
            }
            "nested repository"
        }
        _ => {
            let sub = d.join("sub");
            write(&sub, "s.txt", &format!("sub {n}\n"));
            if rng.below(2) == 0 {
                git_in(&sub, &["commit", "-q", "-am", &format!("s{n}")]);
            }
            "submodule"
        }
    }
}

fn corpus_repo(root: &Path, seed: u64) -> std::path::PathBuf {
    let up = root.join(format!("upstream{seed}"));
    std::fs::create_dir_all(&up).unwrap();
    git_in(&up, &["init", "-q"]);
    write(&up, "s.txt", "s\n");
    git_in(&up, &["add", "-A"]);
    git_in(&up, &["commit", "-q", "-m", "s"]);
    let d = root.join(format!("proj{seed}"));
    std::fs::create_dir_all(&d).unwrap();
    git_in(&d, &["init", "-q"]);
    write(
        &d,
        ".gitignore",
        "*.log\n!keep.log\nbuild/\n/excluded-root\n",
    );
    write(&d, ".git/info/exclude", "*.bak\n");
    for (i, f) in [
        "src/a.rs",
        "src/b.rs",
        "src/deep/c.rs",
        "docs/x.md",
        "tool.sh",
    ]
    .iter()
    .enumerate()
    {
        write(&d, f, &format!("v{i}\n"));
    }
    write(&d, ".hank/fix_plan.md", "- [ ] a\n");
    git_in(&d, &["add", "-A"]);
    git_in(
        &d,
        &["submodule", "add", "-q", &up.to_string_lossy(), "sub"],
    );
    git_in(&d, &["commit", "-q", "-m", "init"]);
    d
}

#[test]
fn agrees_with_git_status_over_a_generated_corpus() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut rounds = 0;
    // HANK_CORPUS_SEEDS=N runs more repositories (a longer search for a disagreement).
    let seeds = std::env::var("HANK_CORPUS_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4u64);
    for seed in 1..=seeds {
        let d = corpus_repo(tmp.path(), seed);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed.wrapping_mul(0x1234_5678_9abc));
        let layout = layout(&d).unwrap();
        let mut prev = take(&layout, None).unwrap();
        for round in 0..30u64 {
            rounds += 1;
            let (status0, work0) = status(&d);
            let content0 = contents(&d, &work0);
            let head0 = head_hex(&d);
            // The baseline is the previous round's snapshot (its content keys reused), as in
            // the engine's back-to-back loops; every fourth round takes a fresh one.
            let base = if round % 4 == 0 {
                take(&layout, None).unwrap()
            } else {
                prev.clone()
            };
            let mut did = Vec::new();
            for k in 0..=rng.below(3) {
                did.push(change(&d, &mut rng, round * 10 + k as u64));
            }
            let now = take(&layout, Some(&base)).unwrap();
            let (status1, work1) = status(&d);
            let content1 = contents(&d, &work1);

            // Static: what the snapshot holds as dirty is what git shows.
            let ours: BTreeSet<String> = now.dirty.iter().map(|(n, _)| n.to_string()).collect();
            if ours != work1 {
                failures.push(format!(
                    "seed {seed} round {round} {did:?}: dirty {ours:?}, git shows {work1:?}"
                ));
            }
            // Delta: what changed between the two moments.
            let mut got: BTreeSet<String> = base.index.changed(&now.index).into_iter().collect();
            got.extend(base.dirty.changed(&now.dirty));
            let mut want: BTreeSet<String> = BTreeSet::new();
            for p in status0.keys().chain(status1.keys()) {
                if status0.get(p) != status1.get(p) {
                    want.insert(p.clone());
                }
            }
            for (p, c) in &content1 {
                if content0.get(p).is_some_and(|c0| c0 != c) {
                    want.insert(p.clone());
                }
            }
            let commits = if now.head != base.head {
                commit_files(&d, head0.as_deref())
            } else {
                BTreeSet::new()
            };
            want.extend(commits.iter().cloned());
            got.extend(commits);
            if got != want {
                failures.push(format!(
                    "seed {seed} round {round} {did:?}: counted {got:?}, git's view {want:?}"
                ));
            }
            prev = now;
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {rounds} rounds differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn unreadable_repositories_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    assert!(layout(d).is_err());
    git_in(d, &["init", "-q"]);
    write(d, "a", "a");
    git_in(d, &["add", "a"]);
    let l = layout(d).unwrap();
    assert_eq!(l.prefix, "");
    assert!(take(&l, None).is_ok());
    git_in(d, &["update-index", "--split-index"]);
    assert!(take(&l, None).is_err());
    git_in(d, &["update-index", "--no-split-index"]);
    git_in(d, &["config", "core.worktree", "/elsewhere"]);
    assert!(take(&l, None).is_err());
}

#[test]
fn content_under_a_filter_counts_by_stat() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    git_in(d, &["init", "-q"]);
    write(d, ".gitattributes", "*.bin filter=lfs\n");
    write(d, "a.bin", "a");
    write(d, "a.txt", "a");
    git_in(d, &["add", "-A"]);
    git_in(d, &["commit", "-q", "-m", "a"]);
    let l = layout(d).unwrap();
    let base = take(&l, None).unwrap();
    assert!(base.dirty.is_empty(), "{:?}", base.dirty);
    // A touch: git (without the filter) sees no change in a.txt; a.bin cannot be judged
    // without running the filter, so its changed stat data counts.
    for f in ["a.bin", "a.txt"] {
        let file = std::fs::File::options()
            .write(true)
            .open(d.join(f))
            .unwrap();
        file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(9))
            .unwrap();
    }
    let now = take(&l, Some(&base)).unwrap();
    assert_eq!(base.dirty.changed(&now.dirty), vec!["a.bin"]);
}

#[test]
fn a_fifo_planted_in_the_repository_never_blocks() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    git_in(d, &["init", "-q"]);
    write(d, "a", "a");
    git_in(d, &["add", "a"]);
    git_in(d, &["commit", "-q", "-m", "a"]);
    let l = layout(d).unwrap();
    // The configuration and an ignore file as FIFOs: skipped (not regular files).
    for f in [".git/config", ".gitignore", ".git/info/exclude"] {
        let _ = std::fs::remove_file(d.join(f));
        nix::unistd::mkfifo(&d.join(f), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    }
    let s = take(&l, None).unwrap();
    assert_eq!(s.index.len(), 1);
    // HEAD and the index as FIFOs: unreadable, never a hang.
    for f in [".git/index", ".git/HEAD"] {
        std::fs::remove_file(d.join(f)).unwrap();
        nix::unistd::mkfifo(&d.join(f), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    }
    assert!(take(&l, None).is_err());
}

/// An index git has not refreshed (the project copied with `cp -a`: new inodes and ctimes):
/// a file found clean by its content is taken as clean at the same stat data next time
/// without hashing it again — and still counts as changed when its content, its stat data
/// or the index's id of it changes.
#[test]
fn files_clean_under_a_stale_index_are_hashed_once() {
    let tmp = tempfile::tempdir().unwrap();
    let orig = tmp.path().join("orig");
    std::fs::create_dir(&orig).unwrap();
    git_in(&orig, &["init", "-q"]);
    write(&orig, "a.txt", "a\n");
    write(&orig, "b.txt", "b\n");
    git_in(&orig, &["add", "-A"]);
    git_in(&orig, &["commit", "-q", "-m", "a"]);
    // A copy (as `cp -a` makes one: new inodes and ctimes, the index as it was).
    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let (src, dst) = (e.path(), to.join(e.file_name()));
            if e.file_type().unwrap().is_dir() {
                copy_tree(&src, &dst);
            } else {
                std::fs::copy(&src, &dst).unwrap();
            }
        }
    }
    let d = tmp.path().join("copy");
    copy_tree(&orig, &d);
    // Old enough for the verified keys to be kept (files modified in the last 2 s are not).
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    for f in ["a.txt", "b.txt"] {
        let file = std::fs::File::options()
            .write(true)
            .open(d.join(f))
            .unwrap();
        file.set_modified(old).unwrap();
    }
    let l = layout(&d).unwrap();
    let first = take(&l, None).unwrap();
    assert!(first.dirty.is_empty(), "{:?}", first.dirty);
    assert_eq!(first.verified.len(), 2, "both hashed and found clean");
    let second = take(&l, Some(&first)).unwrap();
    assert!(second.dirty.is_empty());
    assert_eq!(
        second.verified, first.verified,
        "taken as verified, not hashed again"
    );
    // The content changes (and so the stat data): dirty.
    write(&d, "a.txt", "changed\n");
    // The index's id changes while the file stays: dirty too.
    let blob = blob_hex(b"other\n");
    std::fs::write(d.join("other.tmp"), "other\n").unwrap();
    git_in(&d, &["hash-object", "-w", "other.tmp"]);
    std::fs::remove_file(d.join("other.tmp")).unwrap();
    git_in(
        &d,
        &[
            "update-index",
            "--cacheinfo",
            &format!("100644,{blob},b.txt"),
        ],
    );
    let third = take(&l, Some(&second)).unwrap();
    let dirty: Vec<&str> = third.dirty.iter().map(|(n, _)| n).collect();
    assert_eq!(dirty, ["a.txt", "b.txt"]);
    let (_, git_dirty) = status(&d);
    assert_eq!(
        git_dirty.iter().map(String::as_str).collect::<Vec<_>>(),
        ["a.txt", "b.txt"]
    );
}
