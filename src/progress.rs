//! What changed in the project during one loop: files (what `git status` shows, see
//! [`crate::worktree`]; modification times outside git) and fix_plan items newly checked.
//!
//! Per loop this costs one in-process snapshot of the repository in the steady state (no git
//! process: `crate::git::snapshot`): the snapshot [`measure`] takes at the end of a loop is the
//! next loop's baseline when that loop starts within [`REUSE_WINDOW`] (the engine's usual
//! case); after a wait, [`baseline`] takes a fresh one.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! progress of a loop: what `git status` shows, read in process (`crate::git::snapshot`: no git
//! spawn per loop; when HEAD moved, the commits' files by `crate::git::odb`'s tree diff, `git diff
//! --name-only` only where it says `Unreadable` — the cases are in `worktree.rs`'s module doc), the
//! walk outside git, fix_plan items checked

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::policy::fixplan;
use crate::worktree;

pub use crate::policy::progress::{
    MAX_CHANGED_PATHS, Progress, ProgressSource, is_doc_path, is_test_path,
};

/// The state of the project when a loop started.
#[derive(Debug, Clone)]
pub struct Baseline {
    plan_text: String,
    /// `None`: the plan alone is compared ([`Baseline::plan_only`]).
    files: Option<worktree::State>,
    /// A fleet task of several repositories: each other repository's worktree inside the
    /// project (its folder name, its folder) and its state ([`nested_repos`]).
    nested: Vec<(String, PathBuf, worktree::State)>,
}

impl Baseline {
    /// A baseline of the plan alone, no file snapshot: what a driver whose effects do not
    /// look at the project's files measures (the engine's unit tests).
    #[must_use]
    pub fn plan_only(plan_text: &str) -> Self {
        Self {
            plan_text: plan_text.to_string(),
            files: None,
            nested: Vec::new(),
        }
    }
}

/// How long after a loop's [`measure`] its snapshot still stands for the project at the next
/// [`baseline`]. Anything changed in between would count for the next loop; hank itself writes
/// only under `.hank/`, which never counts.
pub const REUSE_WINDOW: Duration = Duration::from_secs(2);

/// The last git snapshot taken by [`measure`]: project, when, and the snapshot.
static LAST: Mutex<Option<(PathBuf, Instant, worktree::State)>> = Mutex::new(None);

fn take_recent(project: &Path) -> Option<worktree::State> {
    let mut last = LAST.lock().ok()?;
    match last.take() {
        Some((p, at, state)) if p == project && at.elapsed() <= REUSE_WINDOW => Some(state),
        _ => None,
    }
}

fn keep_recent(project: &Path, state: worktree::State) {
    if let Ok(mut last) = LAST.lock() {
        *last = Some((project.to_path_buf(), Instant::now(), state));
    }
}

/// Records the project state at the start of a loop. Never fails: inside a git work tree it
/// is HEAD, the index and what `git status` would report, with a key of each such file's
/// content (so a file already dirty and edited again during the loop still counts);
/// elsewhere, or when the repository cannot be read, a walk of the project's files (see
/// [`crate::worktree`]). Reuses the snapshot of
/// the previous loop's [`measure`] when it is recent (see [`REUSE_WINDOW`]).
#[must_use]
pub fn baseline(project: &Path, plan_text: &str) -> Baseline {
    baseline_with(project, plan_text, &nested_repos())
}

/// The other repositories of a fleet task of several (issue 51): their worktrees inside the
/// task's own, by folder name, as the supervisor named them to this worker at its start
/// ([`crate::git::TASK_REPOS_ENV`], pinned once: never read from the worktree's files).
/// Empty for any other run.
fn nested_repos() -> Vec<(String, PathBuf)> {
    crate::git::TaskWorktree::nested_of_process()
        .iter()
        .map(|(name, t)| (name.clone(), t.work_tree().to_path_buf()))
        .collect()
}

/// [`baseline`] with the `nested` repositories' worktrees (folder name, folder) snapshotted
/// too: their changes count as the loop's, under `NAME/`.
fn baseline_with(project: &Path, plan_text: &str, nested: &[(String, PathBuf)]) -> Baseline {
    Baseline {
        plan_text: plan_text.to_string(),
        files: Some(take_recent(project).unwrap_or_else(|| worktree::State::capture(project))),
        nested: nested
            .iter()
            .map(|(name, dir)| (name.clone(), dir.clone(), worktree::State::capture(dir)))
            .collect(),
    }
}

/// [`baseline`] on tokio's blocking pool, so the runtime's own thread stays free to count
/// SIGINT/SIGTERM/SIGHUP while a large tree is read (or while git runs for a commit's files,
/// which a signal stops, see [`crate::worktree`]).
pub async fn baseline_off_thread(project: PathBuf, plan_text: String) -> Baseline {
    let (p, t) = (project.clone(), plan_text.clone());
    match tokio::task::spawn_blocking(move || baseline(&p, &t)).await {
        Ok(b) => b,
        Err(_) => baseline(&project, &plan_text),
    }
}

/// [`measure`] on tokio's blocking pool (see [`baseline_off_thread`]).
pub async fn measure_off_thread(
    project: PathBuf,
    base: Baseline,
    plan_text_after: String,
) -> Progress {
    let (p, b, t) = (project.clone(), base.clone(), plan_text_after.clone());
    match tokio::task::spawn_blocking(move || measure(&p, &b, &t)).await {
        Ok(progress) => progress,
        Err(_) => measure(&project, &base, &plan_text_after),
    }
}

/// What changed since `base`: the paths whose `git status` entry appeared, disappeared or
/// changed, whose content changed while already dirty, and — when HEAD moved — the files of
/// the commits made (what `git diff --name-only base..HEAD` names, read in process by
/// [`crate::git::odb`]). An edit reverted within the loop, a
/// `touch` or a `chmod` that keeps the exec bit are not changes, as for git. Outside git,
/// files created, deleted or whose size, mtime, inode or mode changed. Paths under `.hank/`
/// and `.hankrc` never count; fix_plan ticks come through [`Progress::plan_items_checked`].
#[must_use]
pub fn measure(project: &Path, base: &Baseline, plan_text_after: &str) -> Progress {
    let mut progress = match &base.files {
        Some(files) => files_changed(project, files, &base.nested),
        None => Progress::from_paths(ProgressSource::Mtime, Vec::new()),
    };
    progress.checked_items = fixplan::newly_checked_items(&base.plan_text, plan_text_after);
    progress.plan_items_checked = fixplan::newly_checked(&base.plan_text, plan_text_after);
    progress.plan_files_changed =
        crate::policy::progress::named_in_plan(&progress.changed_paths, plan_text_after);
    progress
}

/// The files changed since `files` (see [`measure`]), with those of each nested repository's
/// worktree since its own state, named `NAME/PATH`.
fn files_changed(
    project: &Path,
    files: &worktree::State,
    nested: &[(String, PathBuf, worktree::State)],
) -> Progress {
    let mut changes = worktree::changes_since(project, files);
    for (name, dir, state) in nested {
        let inner = worktree::changes_since(dir, state);
        changes
            .paths
            .extend(inner.paths.into_iter().map(|p| format!("{name}/{p}")));
    }
    if let Some(now) = changes.now.filter(|s| s.source() == worktree::Source::Git) {
        keep_recent(project, now);
    }
    let source = match changes.source {
        worktree::Source::Git => ProgressSource::Git,
        worktree::Source::Walk => ProgressSource::Mtime,
    };
    Progress::from_paths(source, changes.paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worktree::git_in;
    use std::fs;

    fn write(dir: &Path, rel: &str, content: &str) {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    /// A repo with a first commit holding `src/lib.rs`, `old_name.rs`, `gone.rs`, `dirty.rs`,
    /// `README.md`, `.hank/fix_plan.md`.
    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git_in(d, &["init", "-q"]);
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
        git_in(d, &["add", "-A"]);
        git_in(d, &["commit", "-q", "-m", "init"]);
        dir
    }

    /// Something done to the project before or during a loop.
    type Step = fn(&Path);

    /// The baseline of `d` (read from `source`), then `during`, then what changed.
    fn around(
        d: &Path,
        plan: &str,
        source: worktree::Source,
        during: Step,
        name: &str,
    ) -> Progress {
        let base = baseline(d, plan);
        assert_eq!(base.files.as_ref().unwrap().source(), source, "{name}");
        during(d);
        measure(d, &base, plan)
    }

    #[test]
    fn git_cases() {
        // (name, before the baseline, during the loop, expected changed paths)
        let cases: Vec<(&str, Step, Step, Vec<&str>)> = vec![
            ("nothing", |_| {}, |_| {}, vec![]),
            (
                "new file",
                |_| {},
                |d| write(d, "src/new.rs", "x"),
                vec!["src/new.rs"],
            ),
            (
                "modified file",
                |_| {},
                |d| write(d, "src/lib.rs", "fn b() {}\n"),
                vec!["src/lib.rs"],
            ),
            (
                "committed change (HEAD moved)",
                |_| {},
                |d| {
                    write(d, "src/lib.rs", "fn c() {}\n");
                    git_in(d, &["commit", "-q", "-am", "c"]);
                },
                vec!["src/lib.rs"],
            ),
            (
                "dirty before, unchanged",
                |d| write(d, "dirty.rs", "// v2 local edit\n"),
                |_| {},
                vec![],
            ),
            (
                "untracked before, unchanged",
                |d| write(d, "notes.txt", "n"),
                |_| {},
                vec![],
            ),
            (
                "dirty before, changed again",
                |d| write(d, "dirty.rs", "// v2\n"),
                |d| write(d, "dirty.rs", "// v3 longer\n"),
                vec!["dirty.rs"],
            ),
            (
                "dirty before, committed",
                |d| write(d, "dirty.rs", "// v2\n"),
                |d| git_in(d, &["commit", "-q", "-am", "dirty"]),
                vec!["dirty.rs"],
            ),
            (
                "dirty before, reverted",
                |d| write(d, "dirty.rs", "// v2\n"),
                |d| git_in(d, &["checkout", "-q", "--", "dirty.rs"]),
                vec!["dirty.rs"],
            ),
            (
                "deleted file",
                |_| {},
                |d| fs::remove_file(d.join("gone.rs")).unwrap(),
                vec!["gone.rs"],
            ),
            (
                ".hank changes ignored",
                |_| {},
                |d| {
                    write(d, ".hank/fix_plan.md", "- [x] a\n");
                    write(d, ".hank/logs/loop-00001.out", "log");
                    write(d, ".hankrc", "MAX_LOOPS=1\n");
                },
                vec![],
            ),
            (
                "rename",
                |_| {},
                |d| git_in(d, &["mv", "old_name.rs", "new_name.rs"]),
                vec!["new_name.rs", "old_name.rs"],
            ),
            (
                "staged new file",
                |_| {},
                |d| {
                    write(d, "a b.rs", "x");
                    git_in(d, &["add", "a b.rs"]);
                },
                vec!["a b.rs"],
            ),
            (
                "two commits",
                |_| {},
                |d| {
                    write(d, "one.rs", "1");
                    git_in(d, &["add", "one.rs"]);
                    git_in(d, &["commit", "-q", "-m", "1"]);
                    write(d, "two.rs", "2");
                    git_in(d, &["add", "two.rs"]);
                    git_in(d, &["commit", "-q", "-m", "2"]);
                },
                vec!["one.rs", "two.rs"],
            ),
        ];
        for (name, before, during, expected) in cases {
            let dir = repo();
            let d = dir.path();
            before(d);
            let p = around(d, "", worktree::Source::Git, during, name);
            assert_eq!(p.source, ProgressSource::Git, "{name}");
            assert_eq!(p.changed_paths, expected, "{name}");
            assert_eq!(p.files_changed as usize, expected.len(), "{name}");
            assert_eq!(p.made_progress(), !expected.is_empty(), "{name}");
        }
    }

    #[test]
    fn git_initial_commit_and_subdirectory_project() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git_in(d, &["init", "-q"]);
        let base = baseline(d, "");
        write(d, "first.rs", "1");
        git_in(d, &["add", "-A"]);
        git_in(d, &["commit", "-q", "-m", "first"]);
        assert_eq!(measure(d, &base, "").changed_paths, vec!["first.rs"]);

        // The project is a subdirectory of the repository: only its files count, relative.
        let project = d.join("app");
        write(&project, "src/main.rs", "fn main() {}\n");
        git_in(d, &["add", "-A"]);
        git_in(d, &["commit", "-q", "-m", "app"]);
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
        let dir = repo();
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
        // (name, during the loop, expected)
        let cases: Vec<(&str, Step, Vec<&str>)> = vec![
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
            let p = around(d, "- [ ] a\n", worktree::Source::Walk, during, name);
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
    fn git_decides_what_is_ignored() {
        let dir = repo();
        let d = dir.path();
        write(d, "forced/kept.bin", "k");
        write(d, ".gitignore", "*.log\nbuild/\nforced/\n");
        git_in(d, &["add", "-f", ".gitignore", "forced/kept.bin"]);
        git_in(d, &["commit", "-q", "-m", "ignore"]);
        write(d, "pkg/.gitignore", "local.txt\n");
        write(d, "nested/.git/HEAD", "ref: refs/heads/main\n");
        write(d, "nested/inner.rs", "n");
        let base = baseline(d, "");
        write(d, "x.log", "l");
        write(d, "build/out.o", "o");
        write(d, "pkg/local.txt", "l");
        write(d, "forced/kept.bin", "changed");
        write(d, ".github/workflows/ci.yml", "on: push\n");
        // Not ignored by any rule: git shows them, so they count (the old walk skipped them).
        write(d, "target/debug/x", "t");
        write(d, "node_modules/m/i.js", "m");
        let p = measure(d, &base, "");
        assert_eq!(
            p.changed_paths,
            vec![
                ".github/workflows/ci.yml",
                "forced/kept.bin",
                "node_modules/m/i.js",
                "target/debug/x"
            ]
        );
    }

    #[test]
    fn git_failing_at_measure_falls_back_to_modification_times() {
        let dir = repo();
        let d = dir.path();
        let base = baseline(d, "");
        assert_eq!(base.files.as_ref().unwrap().source(), worktree::Source::Git);
        fs::remove_dir_all(d.join(".git")).unwrap();
        write(d, "src/new.rs", "n");
        let p = measure(d, &base, "");
        assert_eq!(p.source, ProgressSource::Mtime);
        assert_eq!(p.changed_paths, vec!["src/new.rs"]);
        // Nothing was kept from the failed measure: the next baseline is a walk.
        assert_eq!(
            baseline(d, "").files.unwrap().source(),
            worktree::Source::Walk
        );
    }

    #[test]
    fn racy_same_size_rewrite_is_seen() {
        let dir = repo();
        let d = dir.path();
        write(d, "src/lib.rs", "fn x() {}\n");
        let f = d.join("src/lib.rs");
        let mtime = fs::metadata(&f).unwrap().modified().unwrap();
        let base = baseline(d, "");
        // Same size, same inode, mtime forced back to the baseline's: only the content differs.
        fs::write(&f, "fn y() {}\n").unwrap();
        fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(measure(d, &base, "").changed_paths, vec!["src/lib.rs"]);
    }

    #[test]
    fn staged_before_then_committed_falls_back_to_git() {
        let dir = repo();
        let d = dir.path();
        write(d, "dirty.rs", "// v2\n");
        git_in(d, &["add", "dirty.rs"]);
        let base = baseline(d, "");
        git_in(d, &["commit", "-q", "-m", "staged earlier"]);
        assert_eq!(measure(d, &base, "").changed_paths, vec!["dirty.rs"]);
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

    #[test]
    fn changes_in_a_nested_repository_count_under_its_folder() {
        let dir = repo();
        let d = dir.path();
        let api = d.join("api");
        fs::create_dir_all(&api).unwrap();
        git_in(&api, &["init", "-q"]);
        write(&api, "README", "api\n");
        git_in(&api, &["add", "-A"]);
        git_in(&api, &["commit", "-q", "-m", "init"]);
        let nested = [("api".to_string(), api.clone())];
        // (what the loop does in the nested repository, the paths counted under `api/`)
        let cases: [(&str, Step, &[&str]); 3] = [
            ("nothing", |_| {}, &[]),
            (
                "a new file",
                |a| write(a, "src/route.rs", "x"),
                &["api/src/route.rs"],
            ),
            (
                "a commit",
                |a| {
                    write(a, "README", "changed\n");
                    git_in(a, &["commit", "-qam", "edit"]);
                },
                &["api/README"],
            ),
        ];
        for (name, during, want) in cases {
            let base = baseline_with(d, "- [ ] a\n", &nested);
            during(&api);
            let p = measure(d, &base, "- [ ] a\n");
            let inner: Vec<&str> = p
                .changed_paths
                .iter()
                .map(String::as_str)
                .filter(|p| p.starts_with("api/") && *p != "api/")
                .collect();
            assert_eq!(inner, want, "{name}");
        }
    }
}
