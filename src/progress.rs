//! What changed in the project during one loop: files (from git, or from modification times
//! outside git) and fix_plan items newly checked.
//!
//! This module does I/O (runs git, walks the tree); the comparison logic is kept in pure
//! functions over the collected facts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use crate::fixplan;

/// Most changed paths kept in [`Progress::changed_paths`].
pub const MAX_CHANGED_PATHS: usize = 100;

/// Where the file facts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressSource {
    #[default]
    Git,
    Mtime,
}

/// What changed during a loop.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Progress {
    pub source: ProgressSource,
    /// Files changed (created, modified, deleted, renamed), `.hank/` excluded.
    pub files_changed: u32,
    /// Relative paths (`/`-separated), sorted, at most [`MAX_CHANGED_PATHS`].
    pub changed_paths: Vec<String>,
    /// Changed files that are neither tests nor docs.
    pub implementation_files_changed: u32,
    /// fix_plan items open before the loop and checked after it.
    pub plan_items_checked: u32,
}

impl Progress {
    /// Files changed or plan items checked.
    #[must_use]
    pub fn made_progress(&self) -> bool {
        self.files_changed > 0 || self.plan_items_checked > 0
    }

    /// Builds the file facts from a set of changed relative paths (pure).
    #[must_use]
    pub fn from_paths(source: ProgressSource, paths: impl IntoIterator<Item = String>) -> Self {
        let mut all: Vec<String> = paths
            .into_iter()
            .map(|p| p.replace('\\', "/"))
            .filter(|p| !p.is_empty() && !is_hank_path(p))
            .collect();
        all.sort();
        all.dedup();
        let implementation = all
            .iter()
            .filter(|p| !is_test_path(p) && !is_doc_path(p))
            .count();
        let files_changed = u32::try_from(all.len()).unwrap_or(u32::MAX);
        all.truncate(MAX_CHANGED_PATHS);
        Progress {
            source,
            files_changed,
            changed_paths: all,
            implementation_files_changed: u32::try_from(implementation).unwrap_or(u32::MAX),
            plan_items_checked: 0,
        }
    }
}

/// Paths hank itself writes (never count as the agent's progress).
fn is_hank_path(path: &str) -> bool {
    let p = path.strip_prefix("./").unwrap_or(path);
    p == ".hank" || p.starts_with(".hank/") || p == ".hankrc"
}

/// Whether a path looks like a test file or lives in a test directory.
#[must_use]
pub fn is_test_path(path: &str) -> bool {
    let p = path.replace('\\', "/").to_lowercase();
    let mut parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
    let Some(file) = parts.pop() else {
        return false;
    };
    if parts.iter().any(|d| {
        matches!(
            *d,
            "test" | "tests" | "__tests__" | "spec" | "specs" | "testdata" | "e2e"
        )
    }) {
        // A root `specs/` holding markdown specifications is also a doc path (is_doc_path):
        // either way it is not implementation.
        return true;
    }
    let stem = file.split('.').next().unwrap_or(file);
    stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_tests")
        || stem.ends_with("_spec")
        || stem == "test"
        || stem == "tests"
        || stem == "conftest"
        || file.contains(".test.")
        || file.contains(".spec.")
        || file.ends_with("test.go")
        || file.ends_with(".bats")
}

/// Whether a path is documentation.
#[must_use]
pub fn is_doc_path(path: &str) -> bool {
    let p = path.replace('\\', "/").to_lowercase();
    let mut parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
    let Some(file) = parts.pop() else {
        return false;
    };
    if parts
        .iter()
        .any(|d| matches!(*d, "doc" | "docs" | "documentation"))
    {
        return true;
    }
    let ext = file.rsplit_once('.').map_or("", |(_, e)| e);
    if matches!(ext, "md" | "markdown" | "rst" | "adoc" | "txt") {
        return true;
    }
    let stem = file.split(['.', '-', '_']).next().unwrap_or(file);
    matches!(
        stem,
        "readme" | "changelog" | "license" | "licence" | "authors" | "contributing"
    )
}

/// File fingerprint: size and modification time (nanoseconds since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: i128,
}

/// The state of the project when a loop started.
#[derive(Debug, Clone)]
pub struct Baseline {
    plan_text: String,
    kind: BaselineKind,
}

#[derive(Debug, Clone)]
enum BaselineKind {
    Git(GitBaseline),
    Mtime { files: BTreeMap<String, Stamp> },
}

#[derive(Debug, Clone)]
struct GitBaseline {
    /// Repository top level.
    top: PathBuf,
    /// The project's path inside the repository (`""` or `sub/dir/`).
    prefix: String,
    /// HEAD commit, `None` before the first commit.
    head: Option<String>,
    /// Files dirty at the baseline (repository-relative) and their fingerprint then.
    dirty: BTreeMap<String, Option<Stamp>>,
}

/// `git status --porcelain=v2 --branch -z` facts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct GitStatus {
    head: Option<String>,
    /// Repository-relative paths that are staged, unstaged, untracked, or both sides of a
    /// rename/copy.
    dirty: Vec<String>,
}

/// Parses `git status --porcelain=v2 --branch -z --untracked-files=all` output (pure).
fn parse_status_v2(out: &[u8]) -> GitStatus {
    let text = String::from_utf8_lossy(out);
    let mut status = GitStatus::default();
    let mut records = text.split('\0');
    while let Some(rec) = records.next() {
        if let Some(oid) = rec.strip_prefix("# branch.oid ") {
            let oid = oid.trim();
            if oid != "(initial)" && !oid.is_empty() {
                status.head = Some(oid.to_string());
            }
            continue;
        }
        let mut kind = rec.chars();
        let (fields_before_path, is_rename) = match (kind.next(), kind.next()) {
            (Some('1'), Some(' ')) => (8, false),
            (Some('2'), Some(' ')) => (9, true),
            (Some('u'), Some(' ')) => (10, false),
            (Some('?'), Some(' ')) => (1, false),
            _ => continue,
        };
        if let Some(path) = rec
            .splitn(fields_before_path + 1, ' ')
            .nth(fields_before_path)
            && !path.is_empty()
        {
            status.dirty.push(path.to_string());
        }
        if is_rename
            && let Some(orig) = records.next()
            && !orig.is_empty()
        {
            status.dirty.push(orig.to_string());
        }
    }
    status
}

/// Runs git in `dir` with hank's fixed options; stdout on success.
fn git(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .arg("-c")
        .arg("core.fsmonitor=false")
        .arg("-c")
        .arg("core.quotepath=off")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("LC_ALL", "C")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

fn git_status(top: &Path, prefix: &str) -> Option<GitStatus> {
    let pathspec = if prefix.is_empty() {
        ".".to_string()
    } else {
        format!(":/{prefix}")
    };
    let out = git(
        top,
        &[
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            "--untracked-files=all",
            "--",
            &pathspec,
        ],
    )?;
    Some(parse_status_v2(&out))
}

fn nul_paths(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out)
        .split(['\0', '\n'])
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

fn fingerprint(top: &Path, rel: &str) -> Option<Stamp> {
    std::fs::symlink_metadata(top.join(rel))
        .ok()
        .map(|m| stamp_of(&m))
}

fn git_baseline(project: &Path) -> Option<GitBaseline> {
    let out = git(project, &["rev-parse", "--show-toplevel", "--show-prefix"])?;
    let text = String::from_utf8_lossy(&out);
    let mut lines = text.lines();
    let top = PathBuf::from(lines.next()?.trim_end());
    let prefix = lines.next().unwrap_or("").trim_end().to_string();
    let status = git_status(&top, &prefix)?;
    let dirty = status
        .dirty
        .iter()
        .map(|p| (p.clone(), fingerprint(&top, p)))
        .collect();
    Some(GitBaseline {
        top,
        prefix,
        head: status.head,
        dirty,
    })
}

/// Repository-relative paths changed since the baseline, per the rules in [`measure`].
fn git_changes(base: &GitBaseline) -> Option<Vec<String>> {
    let now = git_status(&base.top, &base.prefix)?;
    let mut changed: Vec<String> = Vec::new();
    if now.head != base.head
        && let Some(head_now) = &now.head
    {
        let range = match &base.head {
            Some(head_before) => git(
                &base.top,
                &[
                    "diff",
                    "--name-only",
                    "-z",
                    "--no-renames",
                    head_before,
                    head_now,
                ],
            ),
            None => git(&base.top, &["ls-tree", "-r", "--name-only", "-z", head_now]),
        };
        changed.extend(range.map(|o| nul_paths(&o)).unwrap_or_default());
    }
    for path in &now.dirty {
        match base.dirty.get(path) {
            None => changed.push(path.clone()),
            Some(before) => {
                if fingerprint(&base.top, path) != *before {
                    changed.push(path.clone());
                }
            }
        }
    }
    let now_dirty: std::collections::BTreeSet<&String> = now.dirty.iter().collect();
    changed.extend(
        base.dirty
            .keys()
            .filter(|p| !now_dirty.contains(p))
            .cloned(),
    );
    Some(changed)
}

/// Keeps paths under the project and makes them project-relative (pure).
fn relative_to_project(paths: Vec<String>, prefix: &str) -> Vec<String> {
    paths
        .into_iter()
        .filter_map(|p| p.strip_prefix(prefix).map(str::to_string))
        .collect()
}

fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
    Stamp {
        size: meta.len(),
        mtime_ns,
    }
}

/// Directory names never walked in mtime mode.
fn skip_dir(name: &str) -> bool {
    name.starts_with('.') || name == "target" || name == "node_modules"
}

/// Most files recorded by the mtime walk (a guard against walking a home directory).
const MAX_WALK_FILES: usize = 200_000;

fn walk(project: &Path) -> BTreeMap<String, Stamp> {
    let mut files = BTreeMap::new();
    let mut stack: Vec<(std::path::PathBuf, String)> = vec![(project.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel_path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let Ok(ft) = entry.file_type() else {
                continue;
            };
            if ft.is_dir() {
                if !skip_dir(&name) {
                    stack.push((entry.path(), rel_path));
                }
            } else if let Ok(meta) = entry.metadata() {
                if files.len() >= MAX_WALK_FILES {
                    return files;
                }
                files.insert(rel_path, stamp_of(&meta));
            }
        }
    }
    files
}

/// Paths whose stamp differs, appeared or disappeared between two snapshots (pure).
fn diff_snapshots(
    before: &BTreeMap<String, Stamp>,
    after: &BTreeMap<String, Stamp>,
) -> Vec<String> {
    let mut changed: Vec<String> = after
        .iter()
        .filter(|(p, s)| before.get(*p) != Some(*s))
        .map(|(p, _)| p.clone())
        .collect();
    changed.extend(before.keys().filter(|p| !after.contains_key(*p)).cloned());
    changed
}

/// Records the project state at the start of a loop. Never fails: inside a git work tree it
/// records HEAD and the dirty files (2 git processes); elsewhere, or when git is missing or
/// fails, it records size and mtime of every file (skipping `.git`, `.hank`, `target`,
/// `node_modules` and hidden directories).
#[must_use]
pub fn baseline(project: &Path, plan_text: &str) -> Baseline {
    let kind = match git_baseline(project) {
        Some(g) => BaselineKind::Git(g),
        None => BaselineKind::Mtime {
            files: walk(project),
        },
    };
    Baseline {
        plan_text: plan_text.to_string(),
        kind,
    }
}

/// What changed since `base` (at most 2 git processes). In git: files in the range of
/// commits HEAD moved over, plus staged, unstaged and untracked files; a file already dirty
/// at the baseline counts only if it changed since, and one dirty then but clean now counts
/// (committed or reverted). Paths under `.hank/` and `.hankrc` never count; fix_plan ticks
/// come through [`Progress::plan_items_checked`].
#[must_use]
pub fn measure(project: &Path, base: &Baseline, plan_text_after: &str) -> Progress {
    let mut progress = match &base.kind {
        BaselineKind::Git(g) => {
            let paths = git_changes(g).unwrap_or_default();
            Progress::from_paths(ProgressSource::Git, relative_to_project(paths, &g.prefix))
        }
        BaselineKind::Mtime { files } => {
            let now = walk(project);
            Progress::from_paths(ProgressSource::Mtime, diff_snapshots(files, &now))
        }
    };
    progress.plan_items_checked = fixplan::newly_checked(&base.plan_text, plan_text_after);
    progress
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn run_git(dir: &Path, home: &Path, args: &[&str]) {
        let out = Command::new("git")
            .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
            .args([
                "-c",
                "init.defaultBranch=main",
                "-c",
                "commit.gpgsign=false",
            ])
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", home)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn write(dir: &Path, rel: &str, content: &str) {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    /// A repo with a first commit holding `src/lib.rs`, `old_name.rs`, `gone.rs`, `dirty.rs`,
    /// `README.md`, `.hank/fix_plan.md`.
    fn repo() -> (tempfile::TempDir, tempfile::TempDir) {
        let home = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        run_git(d, home.path(), &["init", "-q"]);
        for (rel, content) in [
            ("src/lib.rs", "fn a() {}\n"),
            ("old_name.rs", "// old\n"),
            ("gone.rs", "// gone\n"),
            ("dirty.rs", "// v1\n"),
            ("README.md", "# readme\n"),
            (".hank/fix_plan.md", "- [ ] a\n"),
        ] {
            write(d, rel, content);
        }
        run_git(d, home.path(), &["add", "-A"]);
        run_git(d, home.path(), &["commit", "-q", "-m", "init"]);
        (home, dir)
    }

    type Step = fn(&Path, &Path);

    #[test]
    fn git_cases() {
        // (name, before the baseline, during the loop, expected changed paths)
        let cases: Vec<(&str, Step, Step, Vec<&str>)> = vec![
            ("nothing", |_, _| {}, |_, _| {}, vec![]),
            (
                "new file",
                |_, _| {},
                |d, _| write(d, "src/new.rs", "x"),
                vec!["src/new.rs"],
            ),
            (
                "modified file",
                |_, _| {},
                |d, _| write(d, "src/lib.rs", "fn b() {}\n"),
                vec!["src/lib.rs"],
            ),
            (
                "committed change (HEAD moved)",
                |_, _| {},
                |d, h| {
                    write(d, "src/lib.rs", "fn c() {}\n");
                    run_git(d, h, &["commit", "-q", "-am", "c"]);
                },
                vec!["src/lib.rs"],
            ),
            (
                "dirty before, unchanged",
                |d, _| write(d, "dirty.rs", "// v2 local edit\n"),
                |_, _| {},
                vec![],
            ),
            (
                "untracked before, unchanged",
                |d, _| write(d, "notes.txt", "n"),
                |_, _| {},
                vec![],
            ),
            (
                "dirty before, changed again",
                |d, _| write(d, "dirty.rs", "// v2\n"),
                |d, _| write(d, "dirty.rs", "// v3 longer\n"),
                vec!["dirty.rs"],
            ),
            (
                "dirty before, committed",
                |d, _| write(d, "dirty.rs", "// v2\n"),
                |d, h| run_git(d, h, &["commit", "-q", "-am", "dirty"]),
                vec!["dirty.rs"],
            ),
            (
                "dirty before, reverted",
                |d, _| write(d, "dirty.rs", "// v2\n"),
                |d, h| run_git(d, h, &["checkout", "-q", "--", "dirty.rs"]),
                vec!["dirty.rs"],
            ),
            (
                "deleted file",
                |_, _| {},
                |d, _| fs::remove_file(d.join("gone.rs")).unwrap(),
                vec!["gone.rs"],
            ),
            (
                ".hank changes ignored",
                |_, _| {},
                |d, _| {
                    write(d, ".hank/fix_plan.md", "- [x] a\n");
                    write(d, ".hank/logs/loop-00001.out", "log");
                    write(d, ".hankrc", "MAX_LOOPS=1\n");
                },
                vec![],
            ),
            (
                "rename",
                |_, _| {},
                |d, h| run_git(d, h, &["mv", "old_name.rs", "new_name.rs"]),
                vec!["new_name.rs", "old_name.rs"],
            ),
            (
                "staged new file",
                |_, _| {},
                |d, h| {
                    write(d, "a b.rs", "x");
                    run_git(d, h, &["add", "a b.rs"]);
                },
                vec!["a b.rs"],
            ),
            (
                "two commits",
                |_, _| {},
                |d, h| {
                    write(d, "one.rs", "1");
                    run_git(d, h, &["add", "one.rs"]);
                    run_git(d, h, &["commit", "-q", "-m", "1"]);
                    write(d, "two.rs", "2");
                    run_git(d, h, &["add", "two.rs"]);
                    run_git(d, h, &["commit", "-q", "-m", "2"]);
                },
                vec!["one.rs", "two.rs"],
            ),
        ];
        for (name, before, during, expected) in cases {
            let (home, dir) = repo();
            let d = dir.path();
            before(d, home.path());
            let base = baseline(d, "");
            assert!(matches!(base.kind, BaselineKind::Git(_)), "{name}");
            during(d, home.path());
            let p = measure(d, &base, "");
            assert_eq!(p.source, ProgressSource::Git, "{name}");
            assert_eq!(p.changed_paths, expected, "{name}");
            assert_eq!(p.files_changed as usize, expected.len(), "{name}");
            assert_eq!(p.made_progress(), !expected.is_empty(), "{name}");
        }
    }

    #[test]
    fn git_initial_commit_and_subdirectory_project() {
        let home = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        run_git(d, home.path(), &["init", "-q"]);
        let base = baseline(d, "");
        write(d, "first.rs", "1");
        run_git(d, home.path(), &["add", "-A"]);
        run_git(d, home.path(), &["commit", "-q", "-m", "first"]);
        assert_eq!(measure(d, &base, "").changed_paths, vec!["first.rs"]);

        // The project is a subdirectory of the repository: only its files count, relative.
        let project = d.join("app");
        write(&project, "src/main.rs", "fn main() {}\n");
        run_git(d, home.path(), &["add", "-A"]);
        run_git(d, home.path(), &["commit", "-q", "-m", "app"]);
        let base = baseline(&project, "");
        write(d, "outside.rs", "o");
        write(&project, "src/main.rs", "fn main() { x }\n");
        write(&project, "tests/it.rs", "t");
        write(&project, ".hank/status.json", "{}");
        let p = measure(&project, &base, "");
        assert_eq!(p.changed_paths, vec!["src/main.rs", "tests/it.rs"]);
        assert_eq!(p.implementation_files_changed, 1);
    }

    #[test]
    fn plan_ticks_count_as_progress() {
        let (_home, dir) = repo();
        let base = baseline(dir.path(), "- [ ] a\n- [ ] b\n");
        let p = measure(dir.path(), &base, "- [x] a\n- [ ] b\n");
        assert_eq!((p.files_changed, p.plan_items_checked), (0, 1));
        assert!(p.made_progress());
    }

    fn set_mtime(path: &Path, secs: u64) {
        let f = fs::File::options().write(true).open(path).unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
            .unwrap();
    }

    #[test]
    fn mtime_cases() {
        type MStep = fn(&Path);
        // (name, during the loop, expected)
        let cases: Vec<(&str, MStep, Vec<&str>)> = vec![
            ("nothing", |_| {}, vec![]),
            (
                "new file",
                |d| write(d, "src/new.rs", "n"),
                vec!["src/new.rs"],
            ),
            (
                "modified, same size",
                |d| {
                    write(d, "src/lib.rs", "fn z() {}\n");
                    set_mtime(&d.join("src/lib.rs"), 2_000_000_000);
                },
                vec!["src/lib.rs"],
            ),
            (
                "deleted",
                |d| fs::remove_file(d.join("gone.rs")).unwrap(),
                vec!["gone.rs"],
            ),
            (
                "ignored places",
                |d| {
                    write(d, ".hank/logs/x.log", "l");
                    write(d, ".hankrc", "A=1\n");
                    write(d, "target/debug/out", "o");
                    write(d, "node_modules/x/index.js", "o");
                    write(d, ".cache/x", "o");
                },
                vec![],
            ),
        ];
        for (name, during, expected) in cases {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            write(d, "src/lib.rs", "fn a() {}\n");
            set_mtime(&d.join("src/lib.rs"), 1_000_000_000);
            write(d, "gone.rs", "g");
            write(d, ".hank/fix_plan.md", "- [ ] a\n");
            let base = baseline(d, "- [ ] a\n");
            assert!(matches!(base.kind, BaselineKind::Mtime { .. }), "{name}");
            during(d);
            let p = measure(d, &base, "- [ ] a\n");
            assert_eq!(p.source, ProgressSource::Mtime, "{name}");
            assert_eq!(p.changed_paths, expected, "{name}");
        }
        // A missing project directory never fails.
        let base = baseline(Path::new("/nonexistent/hank/project"), "");
        assert_eq!(
            measure(Path::new("/nonexistent/hank/project"), &base, "").files_changed,
            0
        );
    }

    #[test]
    fn status_v2_parsing() {
        let out = b"# branch.oid 0123abcd\0# branch.head main\0\
            1 .M N... 100644 100644 100644 aaa bbb src/lib.rs\0\
            2 R. N... 100644 100644 100644 aaa bbb R100 new name.rs\0old name.rs\0\
            u UU N... 100644 100644 100644 100644 aaa bbb ccc conflict.rs\0\
            ? untracked dir/file.txt\0! ignored.log\0";
        let s = parse_status_v2(out);
        assert_eq!(s.head.as_deref(), Some("0123abcd"));
        assert_eq!(
            s.dirty,
            vec![
                "src/lib.rs",
                "new name.rs",
                "old name.rs",
                "conflict.rs",
                "untracked dir/file.txt"
            ]
        );
        let s = parse_status_v2(b"# branch.oid (initial)\0? a\0");
        assert_eq!(s.head, None);
        assert_eq!(parse_status_v2(b"garbage\xff\0 1\0"), GitStatus::default());
    }

    #[test]
    fn path_classes() {
        // (path, test, doc)
        let cases: &[(&str, bool, bool)] = &[
            ("src/lib.rs", false, false),
            ("tests/integration/main.rs", true, false),
            ("src/foo_test.go", true, false),
            ("pkg/test_utils.py", true, false),
            ("web/app.test.ts", true, false),
            ("web/__tests__/x.js", true, false),
            ("spec/models/user_spec.rb", true, false),
            ("conftest.py", true, false),
            ("test/run.bats", true, false),
            ("README.md", false, true),
            ("docs/guide.html", false, true),
            ("CHANGELOG", false, true),
            ("LICENSE-MIT", false, true),
            ("src\\main.rs", false, false),
            ("contest.rs", false, false),
            ("latest.rs", false, false),
            ("", false, false),
        ];
        for (path, test, doc) in cases {
            assert_eq!(is_test_path(path), *test, "test {path:?}");
            assert_eq!(is_doc_path(path), *doc, "doc {path:?}");
        }
        let p = Progress::from_paths(
            ProgressSource::Git,
            ["b.rs", "a.rs", "a.rs", "README.md", ".hank/x", "tests/t.rs"].map(String::from),
        );
        assert_eq!(
            p.changed_paths,
            vec!["README.md", "a.rs", "b.rs", "tests/t.rs"]
        );
        assert_eq!((p.files_changed, p.implementation_files_changed), (4, 2));
        let many =
            Progress::from_paths(ProgressSource::Mtime, (0..150).map(|i| format!("f{i:03}")));
        assert_eq!(
            (many.files_changed, many.changed_paths.len()),
            (150, MAX_CHANGED_PATHS)
        );
    }
}
