//! `progress::measure` against git itself: a table of change types, each in a fresh temp
//! repository, comparing the files hank counts with what `git status --porcelain` shows.
//!
//! The git that hank spawns reads the environment of this process, so each case runs in a
//! child copy of this test binary whose environment is clean: `HOME` in a temp dir (holding
//! the global ignore files of the case), `GIT_CONFIG_NOSYSTEM=1`, no other `GIT_*` variable,
//! no `XDG_CONFIG_HOME`. The parent tests only set that up and report the child's output.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hank::progress;

/// Selects the case a child process runs; unset in the parent.
const CHILD: &str = "HANK_PROGRESS_TEST_CHILD";

/// Runs `case` in a child test process with a hermetic environment and `HOME` = a temp dir
/// prepared by `home`.
fn in_child(case: &str, home: impl FnOnce(&Path)) {
    run_child(case, home, None);
}

/// [`in_child`] with `PATH` replaced by `path` (to hide git), its `HOME` empty.
fn in_child_with_path(case: &str, path: &Path) {
    run_child(case, |_| {}, Some(path));
}

fn run_child(case: &str, home: impl FnOnce(&Path), path: Option<&Path>) {
    let tmp = tempfile::tempdir().unwrap();
    let home_dir = tmp.path().join("home");
    fs::create_dir_all(&home_dir).unwrap();
    home(&home_dir);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "progress::child",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ]);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(k);
        }
    }
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let out = cmd
        .env_remove("XDG_CONFIG_HOME")
        .env("HOME", &home_dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("TMPDIR", tmp.path())
        .env(CHILD, case)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "case {case} failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "the child ran no test for {case}:\n{text}"
    );
}

#[test]
fn matches_git_status_with_core_excludes_file() {
    in_child("table:excludes_file", |home| {
        fs::write(
            home.join(".gitconfig"),
            "[core]\n\texcludesFile = ~/global-ignore\n",
        )
        .unwrap();
        fs::write(home.join("global-ignore"), "*.globalignore\n").unwrap();
    });
}

#[test]
fn matches_git_status_with_xdg_ignore() {
    in_child("table:xdg", |home| {
        fs::create_dir_all(home.join(".config/git")).unwrap();
        fs::write(home.join(".config/git/ignore"), "*.xdgignore\n").unwrap();
    });
}

#[test]
#[ignore = "slow: cargo test -- --ignored (.ci/run runs them), or cargo nextest run --run-ignored all"]
fn an_edit_in_a_300000_file_tree_is_seen() {
    in_child("large", |_| {});
}

#[test]
fn without_git_on_path_the_walk_answers() {
    let bin = tempfile::tempdir().unwrap();
    in_child_with_path("no_git", bin.path());
}

/// The child side: runs the case named in [`CHILD`], does nothing in a normal test run.
#[test]
fn child() {
    match std::env::var(CHILD).as_deref() {
        Ok("table:excludes_file") => table(Variant::ExcludesFile),
        Ok("table:xdg") => table(Variant::Xdg),
        Ok("large") => large_tree(300_000),
        Ok("no_git") => no_git(),
        Ok(other) => panic!("unknown case {other}"),
        Err(_) => {}
    }
}

// ---------------------------------------------------------------------------------------------
// helpers (child side)

fn git_out(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args(["-c", "protocol.file.allow=always"])
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn git(dir: &Path, args: &[&str]) {
    let out = git_out(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn init(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Test"]);
    git(dir, &["config", "user.email", "test@example.com"]);
    git(dir, &["config", "commit.gpgsign", "false"]);
}

fn write(dir: &Path, rel: &str, content: &str) {
    let p = dir.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

fn commit_all(dir: &Path, msg: &str) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", msg]);
}

fn chmod(dir: &Path, rel: &str, mode: u32) {
    fs::set_permissions(dir.join(rel), fs::Permissions::from_mode(mode)).unwrap();
}

/// Sets a file's mtime `secs` seconds from now without touching its content.
fn touch(dir: &Path, rel: &str, secs: u64) {
    let f = fs::File::options().write(true).open(dir.join(rel)).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(secs))
        .unwrap();
}

/// The paths of `git status --porcelain -z` (all untracked files listed, submodules
/// compared fully, hank's own files left out), one `(XY, path, original path)` per entry.
fn porcelain(dir: &Path) -> BTreeSet<(String, String, String)> {
    let out = git_out(
        dir,
        &[
            "status",
            "--porcelain",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=none",
            "--",
            ".",
            ":!.hank",
            ":!.hankrc",
        ],
    );
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut tokens = text.split('\0').filter(|t| !t.is_empty());
    let mut entries = BTreeSet::new();
    while let Some(t) = tokens.next() {
        let (xy, path) = t.split_at(2);
        let orig = if xy.contains(['R', 'C']) {
            tokens.next().unwrap().to_string()
        } else {
            String::new()
        };
        entries.insert((xy.to_string(), path[1..].to_string(), orig));
    }
    entries
}

/// Paths whose `git status` entry appeared, disappeared or changed.
fn status_delta(
    before: &BTreeSet<(String, String, String)>,
    after: &BTreeSet<(String, String, String)>,
) -> BTreeSet<String> {
    before
        .symmetric_difference(after)
        .flat_map(|(_, path, orig)| [path.clone(), orig.clone()])
        .filter(|p| !p.is_empty())
        .collect()
}

fn head(dir: &Path) -> String {
    String::from_utf8(git_out(dir, &["rev-parse", "HEAD"]).stdout)
        .unwrap()
        .trim()
        .to_string()
}

/// Files changed by the commits between two HEADs (`git diff --name-only`).
fn commit_delta(dir: &Path, from: &str) -> BTreeSet<String> {
    let out = git_out(dir, &["diff", "--name-only", "-z", from, "HEAD"]);
    String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// the table

#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// `HOME/.gitconfig` sets `core.excludesFile` (ignores `*.globalignore`).
    ExcludesFile,
    /// `HOME/.config/git/ignore` ignores `*.xdgignore`.
    Xdg,
}

/// What to compare hank's answer with, besides the expected paths.
enum Oracle {
    /// The paths whose `git status --porcelain` entry changed during the loop.
    Status,
    /// Those plus `git diff --name-only <HEAD before> HEAD` (the agent committed).
    StatusAndCommits,
    /// git status shows the same entry before and after (the path was already dirty): the
    /// change is inside it. The reason is printed.
    InsideDirtyPath(&'static str),
}

type Step = fn(&Path);

struct Row {
    name: &'static str,
    /// Runs only in this variant (`None`: in the first one).
    variant: Option<Variant>,
    before: Step,
    during: Step,
    expected: &'static [&'static str],
    oracle: Oracle,
}

/// A project with one commit: sources, a `.gitignore` (`*.log`), a tracked symlink, a
/// script, hank's files.
fn base_repo(d: &Path) {
    init(d);
    for (rel, content) in [
        ("src/lib.rs", "fn a() {}\n"),
        ("old_name.rs", "// old\n"),
        ("gone.rs", "// gone\n"),
        ("dirty.rs", "// v1\n"),
        ("run.sh", "echo hi\n"),
        ("README.md", "# readme\n"),
        (".gitignore", "*.log\n"),
        (".hank/fix_plan.md", "- [ ] a\n"),
    ] {
        write(d, rel, content);
    }
    chmod(d, "run.sh", 0o644);
    std::os::unix::fs::symlink("src/lib.rs", d.join("link")).unwrap();
    commit_all(d, "init");
}

/// A repository next to the project, with one committed file, to add as a submodule.
fn upstream(d: &Path) -> PathBuf {
    let up = d.with_file_name("upstream");
    init(&up);
    write(&up, "f.txt", "up\n");
    commit_all(&up, "up");
    up
}

fn add_submodule(d: &Path) {
    let up = upstream(d);
    git(d, &["submodule", "add", "-q", up.to_str().unwrap(), "sub"]);
    git(d, &["commit", "-q", "-m", "sub"]);
    git(&d.join("sub"), &["config", "user.name", "Test"]);
    git(
        &d.join("sub"),
        &["config", "user.email", "test@example.com"],
    );
}

fn nested_repo(d: &Path, rel: &str) {
    let n = d.join(rel);
    init(&n);
    write(&n, "inner.txt", "inner\n");
    commit_all(&n, "inner");
}

fn rows() -> Vec<Row> {
    fn none(_: &Path) {}
    let row = |name, before: Step, during: Step, expected, oracle| Row {
        name,
        variant: None,
        before,
        during,
        expected,
        oracle,
    };
    use Oracle::{InsideDirtyPath, Status, StatusAndCommits};
    vec![
        row("nothing", none, none, &[], Status),
        row(
            "modified",
            none,
            |d| write(d, "src/lib.rs", "fn b() {}\n"),
            &["src/lib.rs"],
            Status,
        ),
        row(
            "added (untracked)",
            none,
            |d| write(d, "src/new.rs", "x"),
            &["src/new.rs"],
            Status,
        ),
        row(
            "added and staged, space and non-ASCII in the name",
            none,
            |d| {
                write(d, "dir/ü ñ.rs", "x");
                git(d, &["add", "dir/ü ñ.rs"]);
            },
            &["dir/ü ñ.rs"],
            Status,
        ),
        row(
            "ignored via .gitignore",
            none,
            |d| write(d, "debug.log", "l"),
            &[],
            Status,
        ),
        row(
            "ignored via .git/info/exclude",
            |d| write(d, ".git/info/exclude", "*.tmp\n"),
            |d| write(d, "scratch.tmp", "t"),
            &[],
            Status,
        ),
        Row {
            variant: Some(Variant::ExcludesFile),
            ..row(
                "ignored via core.excludesFile (global config)",
                none,
                |d| write(d, "x.globalignore", "g"),
                &[],
                Status,
            )
        },
        Row {
            variant: Some(Variant::Xdg),
            ..row(
                "ignored via ~/.config/git/ignore",
                none,
                |d| write(d, "x.xdgignore", "g"),
                &[],
                Status,
            )
        },
        row(
            "touched, content unchanged",
            none,
            |d| touch(d, "src/lib.rs", 5),
            &[],
            Status,
        ),
        row(
            "edit reverted within the loop",
            none,
            |d| {
                write(d, "src/lib.rs", "fn changed() {}\n");
                write(d, "src/lib.rs", "fn a() {}\n");
            },
            &[],
            Status,
        ),
        row(
            "chmod 600 (exec bit unchanged)",
            none,
            |d| chmod(d, "src/lib.rs", 0o600),
            &[],
            Status,
        ),
        row(
            "chmod +x",
            none,
            |d| chmod(d, "run.sh", 0o755),
            &["run.sh"],
            Status,
        ),
        row(
            "deleted",
            none,
            |d| fs::remove_file(d.join("gone.rs")).unwrap(),
            &["gone.rs"],
            Status,
        ),
        row(
            "renamed with git mv",
            none,
            |d| git(d, &["mv", "old_name.rs", "new_name.rs"]),
            &["new_name.rs", "old_name.rs"],
            Status,
        ),
        row(
            "renamed with mv (unstaged)",
            none,
            |d| fs::rename(d.join("old_name.rs"), d.join("new_name.rs")).unwrap(),
            &["new_name.rs", "old_name.rs"],
            Status,
        ),
        row(
            "submodule: file edited inside",
            add_submodule,
            |d| write(d, "sub/f.txt", "changed\n"),
            &["sub"],
            Status,
        ),
        row(
            "submodule: commit inside",
            add_submodule,
            |d| {
                write(d, "sub/g.txt", "g\n");
                commit_all(&d.join("sub"), "inner");
            },
            &["sub"],
            Status,
        ),
        row(
            "submodule already dirty, edited again",
            |d| {
                add_submodule(d);
                write(d, "sub/f.txt", "dirty\n");
            },
            |d| write(d, "sub/f.txt", "dirtier\n"),
            &["sub"],
            InsideDirtyPath("` M sub` before and after"),
        ),
        row(
            "embedded nested repo: file edited inside",
            |d| nested_repo(d, "nested"),
            |d| write(d, "nested/inner.txt", "changed\n"),
            &["nested/"],
            InsideDirtyPath("`?? nested/` before and after"),
        ),
        row(
            "embedded nested repo: commit inside",
            |d| nested_repo(d, "nested"),
            |d| {
                write(d, "nested/more.txt", "m\n");
                commit_all(&d.join("nested"), "more");
            },
            &["nested/"],
            InsideDirtyPath("`?? nested/` before and after"),
        ),
        row(
            "embedded nested repo: untouched",
            |d| nested_repo(d, "nested"),
            none,
            &[],
            Status,
        ),
        row(
            "nested repo created in the loop",
            none,
            |d| nested_repo(d, "fresh"),
            &["fresh/"],
            Status,
        ),
        row(
            "symlink created",
            none,
            |d| std::os::unix::fs::symlink("README.md", d.join("newlink")).unwrap(),
            &["newlink"],
            Status,
        ),
        row(
            "symlink retargeted",
            none,
            |d| {
                fs::remove_file(d.join("link")).unwrap();
                std::os::unix::fs::symlink("README.md", d.join("link")).unwrap();
            },
            &["link"],
            Status,
        ),
        row(
            "file under a non-ignored node_modules/",
            none,
            |d| write(d, "node_modules/pkg/index.js", "m"),
            &["node_modules/pkg/index.js"],
            Status,
        ),
        row(
            "file under a non-ignored target/",
            none,
            |d| write(d, "target/debug/out", "o"),
            &["target/debug/out"],
            Status,
        ),
        row(
            "agent commit",
            none,
            |d| {
                write(d, "src/lib.rs", "fn c() {}\n");
                git(d, &["commit", "-q", "-am", "c"]);
            },
            &["src/lib.rs"],
            StatusAndCommits,
        ),
        row(
            "agent commit plus an uncommitted edit",
            none,
            |d| {
                write(d, "one.rs", "1");
                commit_all(d, "one");
                write(d, "README.md", "# more\n");
            },
            &["README.md", "one.rs"],
            StatusAndCommits,
        ),
        row(
            "dirty before, untouched",
            |d| write(d, "dirty.rs", "// v2\n"),
            none,
            &[],
            Status,
        ),
        row(
            "dirty before, touched only",
            |d| write(d, "dirty.rs", "// v2\n"),
            |d| touch(d, "dirty.rs", 5),
            &[],
            Status,
        ),
        row(
            "dirty before, edited again",
            |d| write(d, "dirty.rs", "// v2\n"),
            |d| write(d, "dirty.rs", "// v3\n"),
            &["dirty.rs"],
            InsideDirtyPath("` M dirty.rs` before and after"),
        ),
        row(
            "untracked before, edited again",
            |d| write(d, "notes.txt", "n"),
            |d| write(d, "notes.txt", "more notes"),
            &["notes.txt"],
            InsideDirtyPath("`?? notes.txt` before and after"),
        ),
        row(
            "dirty before, reverted",
            |d| write(d, "dirty.rs", "// v2\n"),
            |d| git(d, &["checkout", "-q", "--", "dirty.rs"]),
            &["dirty.rs"],
            Status,
        ),
        row(
            "dirty before, staged",
            |d| write(d, "dirty.rs", "// v2\n"),
            |d| git(d, &["add", "dirty.rs"]),
            &["dirty.rs"],
            Status,
        ),
        row(
            "staged before, committed",
            |d| {
                write(d, "dirty.rs", "// v2\n");
                git(d, &["add", "dirty.rs"]);
            },
            |d| git(d, &["commit", "-q", "-m", "staged earlier"]),
            &["dirty.rs"],
            StatusAndCommits,
        ),
        row(
            "merge conflict (unmerged)",
            |d| {
                git(d, &["checkout", "-q", "-b", "other"]);
                write(d, "dirty.rs", "// other\n");
                git(d, &["commit", "-q", "-am", "other"]);
                git(d, &["checkout", "-q", "main"]);
                write(d, "dirty.rs", "// main\n");
                git(d, &["commit", "-q", "-am", "main"]);
            },
            |d| {
                let out = git_out(d, &["merge", "-q", "other"]);
                assert!(!out.status.success(), "the merge should conflict");
            },
            &["dirty.rs"],
            Status,
        ),
        row(
            "hank's own files",
            none,
            |d| {
                write(d, ".hank/fix_plan.md", "- [x] a\n");
                write(d, ".hank/logs/loop-00001.out", "log");
                write(d, ".hankrc", "MAX_LOOPS=1\n");
            },
            &[],
            Status,
        ),
    ]
}

fn table(variant: Variant) {
    let mut failures = Vec::new();
    println!("| change | `git status --porcelain` after the loop | files_changed |");
    println!("|---|---|---|");
    for row in rows() {
        if row.variant.unwrap_or(Variant::ExcludesFile) != variant {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("proj");
        base_repo(&d);
        (row.before)(&d);
        let status_before = porcelain(&d);
        let head_before = head(&d);
        let base = progress::baseline(&d, "");
        (row.during)(&d);
        let p = progress::measure(&d, &base, "");
        let status_after = porcelain(&d);

        let got: BTreeSet<String> = p.changed_paths.iter().cloned().collect();
        let expected: BTreeSet<String> = row.expected.iter().map(|s| s.to_string()).collect();
        let git_says = match row.oracle {
            Oracle::Status => Some(status_delta(&status_before, &status_after)),
            Oracle::StatusAndCommits => {
                let mut all = status_delta(&status_before, &status_after);
                all.extend(commit_delta(&d, &head_before));
                Some(all)
            }
            Oracle::InsideDirtyPath(_) => None,
        };
        let shown: Vec<String> = status_after
            .iter()
            .map(|(xy, path, orig)| {
                if orig.is_empty() {
                    format!("`{xy} {path}`")
                } else {
                    format!("`{xy} {orig} -> {path}`")
                }
            })
            .collect();
        let note = match row.oracle {
            Oracle::InsideDirtyPath(why) => format!(" (git: {why})"),
            _ => String::new(),
        };
        println!(
            "| {} | {} | {}{note} |",
            row.name,
            if shown.is_empty() {
                "—".to_string()
            } else {
                shown.join(" ")
            },
            p.files_changed
        );
        if got != expected || p.files_changed as usize != expected.len() {
            failures.push(format!(
                "{}: hank counted {got:?} ({}), expected {expected:?}",
                row.name, p.files_changed
            ));
        }
        if let Some(git) = git_says
            && git != expected
        {
            failures.push(format!(
                "{}: git's view {git:?} differs from the expected {expected:?}",
                row.name
            ));
        }
        if p.source != progress::ProgressSource::Git {
            failures.push(format!("{}: source {:?}", row.name, p.source));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `files` committed files in 1,000-file directories; an edit to the last one and a new file
/// after it are both seen, and nothing else.
fn large_tree(files: usize) {
    // On tmpfs when there is one: the disk, not hank, would set this test's duration.
    let shm = Path::new("/dev/shm");
    let tmp = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let d = tmp.path().join("proj");
    init(&d);
    let t = std::time::Instant::now();
    // The commit is built by `git fast-import` (one pack) and checked out by `git reset
    // --hard` (files and a fresh index): the same repository as writing the files and running
    // `git add -A && git commit`, without 300,000 loose objects to write and delete.
    let mut stream = Vec::with_capacity(files * 48);
    stream.extend_from_slice(
        b"commit refs/heads/main\ncommitter Test <test@example.com> 0 +0000\ndata 5\nlarge\n",
    );
    for i in 0..files {
        let content = format!("{i}\n");
        let dir = i / 1000;
        stream.extend_from_slice(
            format!(
                "M 100644 inline d{dir:03}/f{i:06}.txt\ndata {}\n{content}\n",
                content.len()
            )
            .as_bytes(),
        );
    }
    let mut import = Command::new("git")
        .arg("-C")
        .arg(&d)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = import.stdin.take().unwrap();
        stdin.write_all(&stream).unwrap();
    }
    assert!(import.wait().unwrap().success(), "git fast-import");
    git(&d, &["reset", "-q", "--hard", "main"]);
    let tracked = git_out(&d, &["ls-files"]);
    assert_eq!(
        tracked.stdout.iter().filter(|&&b| b == b'\n').count(),
        files,
        "every file is committed and checked out"
    );
    println!("{files} files generated and committed in {:?}", t.elapsed());
    let last_dir = (files - 1) / 1000;
    let last = format!("d{last_dir:03}/f{:06}.txt", files - 1);
    let t = std::time::Instant::now();
    let base = progress::baseline(&d, "");
    write(&d, &last, "edited\n");
    write(&d, &format!("d{last_dir:03}/zz_new.txt"), "new\n");
    let p = progress::measure(&d, &base, "");
    println!("baseline + measure in {:?}", t.elapsed());
    assert_eq!(p.source, progress::ProgressSource::Git);
    assert_eq!(
        p.changed_paths,
        vec![last.clone(), format!("d{last_dir:03}/zz_new.txt")]
    );
    assert_eq!(p.files_changed, 2);
    assert_eq!(porcelain(&d).len(), 2);
}

/// git cannot be run at all: a project holding a `.git` directory still gets its changes,
/// from the walk, and nothing panics.
fn no_git() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, ".git/HEAD", "ref: refs/heads/main\n");
    write(d, "src/lib.rs", "fn a() {}\n");
    write(d, "gone.rs", "g");
    let base = progress::baseline(d, "");
    write(d, "src/new.rs", "n");
    fs::remove_file(d.join("gone.rs")).unwrap();
    write(d, ".hank/logs/x", "l");
    let p = progress::measure(d, &base, "");
    assert_eq!(p.source, progress::ProgressSource::Mtime);
    assert_eq!(p.changed_paths, vec!["gone.rs", "src/new.rs"]);
}
