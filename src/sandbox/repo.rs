//! What a confined agent must not leave behind in the repository, and the place its rules
//! come from, recorded by hank itself.
//!
//! At the run's start ([`RepoGuard::record`]) hank notes what the project's `.git` is (a
//! folder, or a `gitdir:` file and the git directory it names, with its `commondir`), as it
//! stands before any agent ran. Before each call and after it ([`RepoGuard::check`]) that is
//! compared with what is there now: a `.git` made a file (`gitdir: $HOME`), a rewritten
//! `gitdir` or a `commondir` planted in the git directory would widen the next call's rules or
//! point hank's own git at configuration the agent wrote, so the run stops, naming the file.
//!
//! The files through which git runs programs later, in the user's own terminal and outside the
//! sandbox — the repository's `config` (every key: `core.pager`, `pager.*`,
//! `interactive.diffFilter`, `gpg.*`, `core.sshCommand`, `include.path`…), `config.worktree`,
//! `hooks/`, `info/` — and those of the repository's submodules are saved before each call
//! ([`RepoGuard::save`]); whatever the agent changed there is put back at the call's end
//! ([`RepoGuard::restore`]), and each file undone is reported. Landlock grants a folder with
//! all it holds (it cannot carve `.git/config` out of a writable project), so a plain run's
//! agent can write these files during its call: they are undone before hank, or the user,
//! runs git again.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Most bytes saved of one guarded file (a larger one is compared by size and time only, and
/// a change to it cannot be undone: the run stops).
const FILE_LIMIT: u64 = 1024 * 1024;
/// Most files saved in all (hooks and `info/` of the repository and its submodules).
const FILES_LIMIT: usize = 2000;
/// How deep a submodule's name may nest folders (`modules/a/b/c`).
const MODULE_DEPTH: usize = 4;
/// Most git directories guarded (the repository's and its submodules', nested ones too).
const MODULES_LIMIT: usize = 64;

/// What `.git` was at the run's start.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DotGit {
    /// A folder (device, inode).
    Dir(u64, u64),
    /// A `gitdir:` file with these bytes.
    File(Vec<u8>),
    /// None (not a repository, or a project in a folder of its repository).
    Absent,
    /// Something else (a link, a device).
    Other,
}

/// One guarded file as it was before the call.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Saved {
    /// Its bytes and permission bits, and what vouches for them without reading them again:
    /// the file's stamp and when it was looked at ([`super::guard::Stamp::settled_at`]).
    File(Vec<u8>, u32, Seen),
    /// Too large to keep: its size and modification time.
    Large(u64, i64, i64),
    /// A folder.
    Dir,
    /// A link (its target).
    Link(PathBuf),
}

/// The stamp a file had when its bytes were read, and the start of the look that read them
/// (or of the first of the looks since that found the same stamp).
#[derive(Debug, Clone, Copy)]
struct Seen {
    stamp: super::guard::Stamp,
    at: std::time::SystemTime,
}

/// Never part of a comparison: two saves of a file are the same when its bytes and mode are.
impl PartialEq for Seen {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Seen {}

/// One file hank put back, or could not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    /// The file, as shown (`.git/config`, `.git/hooks/pre-commit`).
    pub file: String,
    /// `changed`, `added`, `removed`.
    pub what: &'static str,
    /// Whether it is as it was again.
    pub restored: bool,
}

/// The project's repository as hank recorded it at the run's start.
#[derive(Debug, Clone)]
pub struct RepoGuard {
    project: PathBuf,
    dot_git: DotGit,
    /// The git directory and the common directory resolved at the start (`None`: no
    /// repository in the project).
    dirs: Option<(PathBuf, PathBuf)>,
    /// `commondir` of the git directory at the start (`None`: there was none).
    commondir: Option<Vec<u8>>,
    /// The guarded files before the current call.
    saved: BTreeMap<PathBuf, Saved>,
}

/// What changed the place the rules come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tampered {
    /// The file that changed.
    pub file: PathBuf,
    /// What it was and is, in words.
    pub what: String,
}

fn dot_git_of(project: &Path) -> DotGit {
    let dot = project.join(".git");
    match std::fs::symlink_metadata(&dot) {
        Ok(m) if m.is_dir() => DotGit::Dir(m.dev(), m.ino()),
        Ok(m) if m.is_file() => {
            match crate::fsread::read(&dot, crate::fsread::CONFIG_LIMIT, crate::fsread::Follow::No)
            {
                Ok(bytes) => DotGit::File(bytes),
                Err(_) => DotGit::Other,
            }
        }
        Ok(_) => DotGit::Other,
        Err(_) => DotGit::Absent,
    }
}

fn describe(d: &DotGit) -> String {
    match d {
        DotGit::Dir(..) => "a folder".into(),
        DotGit::File(bytes) => format!(
            "a file naming {:?}",
            crate::sanitize::line(String::from_utf8_lossy(bytes).trim())
        ),
        DotGit::Absent => "absent".into(),
        DotGit::Other => "a link or special file".into(),
    }
}

fn read_small(path: &Path) -> Option<Vec<u8>> {
    crate::fsread::read(path, crate::fsread::CONFIG_LIMIT, crate::fsread::Follow::No).ok()
}

impl RepoGuard {
    /// Records the project's `.git` now (the run's start, before any agent ran); `pinned`, the
    /// git directory a fleet task's worker pinned from the checkout's records
    /// (the git handle's `crate::git::Checkout::reader_dirs`), is taken over the worktree's
    /// `.git` file.
    #[must_use]
    pub fn record(project: &Path, pinned: Option<PathBuf>) -> Self {
        let dot_git = dot_git_of(project);
        let git_dir = pinned.or_else(|| match &dot_git {
            DotGit::Dir(..) => Some(project.join(".git")),
            DotGit::File(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                let named = text.trim().strip_prefix("gitdir:")?.trim().to_string();
                Some(project.join(named))
            }
            DotGit::Absent | DotGit::Other => None,
        });
        let commondir = git_dir
            .as_ref()
            .and_then(|g| read_small(&g.join("commondir")));
        let dirs = git_dir.map(|g| {
            let common = commondir
                .as_ref()
                .map_or_else(|| g.clone(), |c| g.join(String::from_utf8_lossy(c).trim()));
            let common = std::fs::canonicalize(&common).unwrap_or(common);
            (g, common)
        });
        Self {
            project: project.to_path_buf(),
            dot_git,
            dirs,
            commondir,
            saved: BTreeMap::new(),
        }
    }

    /// The git directory and common directory recorded at the start.
    #[must_use]
    pub fn dirs(&self) -> Option<(&Path, &Path)> {
        self.dirs.as_ref().map(|(g, c)| (g.as_path(), c.as_path()))
    }

    /// `Err` when `.git`, or the git directory's `commondir`, is not what was recorded. A
    /// repository the agent made where there was none (`git init` in a new project) is
    /// recorded and guarded from then on; a `.git` file appearing is not (its `gitdir:` could
    /// name any folder).
    ///
    /// # Errors
    /// What changed.
    pub fn check(&mut self) -> Result<(), Tampered> {
        let now = dot_git_of(&self.project);
        if self.dot_git == DotGit::Absent && matches!(now, DotGit::Dir(..)) {
            let saved = std::mem::take(&mut self.saved);
            *self = Self::record(&self.project, None);
            self.saved = saved;
            return Ok(());
        }
        if now != self.dot_git {
            return Err(Tampered {
                file: self.project.join(".git"),
                what: format!(
                    "was {} when the run started, is {} now",
                    describe(&self.dot_git),
                    describe(&now)
                ),
            });
        }
        if let Some((git_dir, _)) = &self.dirs {
            let path = git_dir.join("commondir");
            let now = read_small(&path);
            if now != self.commondir {
                return Err(Tampered {
                    file: path,
                    what: match (&self.commondir, &now) {
                        (None, _) => "was planted during the run".into(),
                        (Some(_), None) => "was removed during the run".into(),
                        (Some(_), Some(_)) => "was rewritten during the run".into(),
                    },
                });
            }
        }
        Ok(())
    }

    /// Saves the guarded files as they are now (before a call).
    pub fn save(&mut self) {
        self.saved = self.guarded(&self.saved);
    }

    /// The guarded files now: for the repository and each of its submodules' git
    /// directories, `config`, `config.worktree` and everything under `hooks/` and `info/`. A
    /// file whose settled stamp is the one it had in `known` is not read again (each call
    /// looks at every file, but reads only those changed since).
    fn guarded(&self, known: &BTreeMap<PathBuf, Saved>) -> BTreeMap<PathBuf, Saved> {
        let mut out = BTreeMap::new();
        let look = Look {
            known,
            at: std::time::SystemTime::now(),
        };
        let Some((git_dir, common)) = &self.dirs else {
            return out;
        };
        let mut roots = vec![common.clone()];
        if git_dir != common
            && let Some(s) = look.snap(&git_dir.join("config.worktree"))
        {
            out.insert(git_dir.join("config.worktree"), s);
        }
        let mut i = 0;
        while i < roots.len() {
            let root = roots[i].clone();
            i += 1;
            for name in ["config", "config.worktree"] {
                if let Some(s) = look.snap(&root.join(name)) {
                    out.insert(root.join(name), s);
                }
            }
            for dir in ["hooks", "info"] {
                look.walk(&root.join(dir), &mut out);
            }
            if roots.len() < MODULES_LIMIT {
                roots.extend(module_dirs(&root.join("modules"), 0));
            }
        }
        out
    }

    /// Puts back what the agent changed among the guarded files since [`RepoGuard::save`]:
    /// a changed or removed file is written again (its permission bits too), an added one
    /// removed. What was undone, or could not be.
    pub fn restore(&mut self) -> Vec<Undone> {
        let now = self.guarded(&self.saved);
        let mut out = Vec::new();
        for (path, before) in &self.saved {
            match now.get(path) {
                Some(n) if n == before => {}
                Some(_) => out.push(self.undo(path, "changed", Some(before))),
                None => out.push(self.undo(path, "removed", Some(before))),
            }
        }
        // Added ones, deepest first (a planted folder's files before the folder).
        for path in now.keys().rev() {
            if !self.saved.contains_key(path) {
                out.push(self.undo(path, "added", None));
            }
        }
        out.sort_by(|a, b| a.file.cmp(&b.file));
        self.saved = if out.is_empty() {
            now
        } else {
            self.guarded(&now)
        };
        out
    }

    fn shown(&self, path: &Path) -> String {
        let Some((_, common)) = &self.dirs else {
            return path.display().to_string();
        };
        match path.strip_prefix(common) {
            Ok(rel) if common.starts_with(&self.project) || common.ends_with(".git") => {
                format!(".git/{}", rel.display())
            }
            _ => path.display().to_string(),
        }
    }

    fn undo(&self, path: &Path, what: &'static str, before: Option<&Saved>) -> Undone {
        let restored = put_back(path, before).is_ok();
        Undone {
            file: self.shown(path),
            what,
            restored,
        }
    }
}

/// `path` made what it was: `before` (`None`: it did not exist).
fn put_back(path: &Path, before: Option<&Saved>) -> std::io::Result<()> {
    let remove = |p: &Path| -> std::io::Result<()> {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
            Ok(_) => std::fs::remove_file(p),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    };
    match before {
        None => remove(path),
        Some(Saved::Dir) => {
            if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
                remove(path)?;
                std::fs::create_dir_all(path)?;
            }
            Ok(())
        }
        Some(Saved::Link(target)) => {
            remove(path)?;
            std::os::unix::fs::symlink(target, path)
        }
        Some(Saved::File(bytes, mode, _)) => {
            // Whatever stands there now (a link planted in place of the file, a folder) goes.
            if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
                remove(path)?;
            }
            if let Some(parent) = path.parent() {
                if std::fs::symlink_metadata(parent).is_ok_and(|m| !m.is_dir()) {
                    remove(parent)?;
                }
                std::fs::create_dir_all(parent)?;
            }
            crate::store::write_atomic(path, bytes, false)?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(*mode))
        }
        Some(Saved::Large(..)) => Err(std::io::Error::other("too large to have been saved")),
    }
}

/// One look at the guarded files, vouched for by an earlier one where their stamps allow.
struct Look<'a> {
    known: &'a BTreeMap<PathBuf, Saved>,
    /// When this look began.
    at: std::time::SystemTime,
}

impl Look<'_> {
    fn snap(&self, path: &Path) -> Option<Saved> {
        let m = std::fs::symlink_metadata(path).ok()?;
        if m.file_type().is_symlink() {
            return Some(Saved::Link(std::fs::read_link(path).ok()?));
        }
        if m.is_dir() {
            return Some(Saved::Dir);
        }
        if m.len() > FILE_LIMIT {
            return Some(Saved::Large(m.len(), m.mtime(), m.mtime_nsec()));
        }
        let stamp = super::guard::Stamp::of(&m);
        if let Some(Saved::File(bytes, mode, seen)) = self.known.get(path)
            && seen.stamp == stamp
            && stamp.settled_at(seen.at)
        {
            return Some(Saved::File(bytes.clone(), *mode, *seen));
        }
        let mode = m.permissions().mode() & 0o7777;
        let seen = Seen { stamp, at: self.at };
        match crate::fsread::read(path, FILE_LIMIT, crate::fsread::Follow::No) {
            Ok(bytes) => Some(Saved::File(bytes, mode, seen)),
            Err(_) => Some(Saved::Large(m.len(), m.mtime(), m.mtime_nsec())),
        }
    }

    /// `dir` and what it holds, links not followed, at most [`FILES_LIMIT`] entries in all.
    fn walk(&self, dir: &Path, out: &mut BTreeMap<PathBuf, Saved>) {
        let Some(s) = self.snap(dir) else {
            return;
        };
        let is_dir = s == Saved::Dir;
        out.insert(dir.to_path_buf(), s);
        if !is_dir {
            return;
        }
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                if out.len() >= FILES_LIMIT {
                    return;
                }
                let p = e.path();
                if let Some(s) = self.snap(&p) {
                    if s == Saved::Dir {
                        stack.push(p.clone());
                    }
                    out.insert(p, s);
                }
            }
        }
    }
}

/// The git directories of the submodules under `modules` (each a folder with a `HEAD`),
/// nested ones included up to [`MODULE_DEPTH`].
fn module_dirs(modules: &Path, depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if depth > MODULE_DEPTH {
        return out;
    }
    let Ok(entries) = std::fs::read_dir(modules) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if !std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        if std::fs::symlink_metadata(p.join("HEAD")).is_ok() {
            out.push(p);
        } else {
            // A submodule named with a slash (`modules/a/b`).
            out.extend(module_dirs(&p, depth + 1));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository's git directory as `git init` leaves it (made by hand: this room does
    /// not run git).
    fn init(dir: &Path) {
        let git = dir.join(".git");
        for d in ["hooks", "info", "objects", "refs/heads"] {
            std::fs::create_dir_all(git.join(d)).expect("mkdir");
        }
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").expect("write");
        std::fs::write(git.join("config"), "[core]\n\tbare = false\n").expect("write");
        std::fs::write(git.join("info/exclude"), "# exclude\n").expect("write");
        std::fs::write(git.join("hooks/pre-push.sample"), "#!/bin/sh\n").expect("write");
    }

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        init(d.path());
        d
    }

    #[test]
    fn a_git_made_a_file_or_a_planted_commondir_is_tampering() {
        let d = repo();
        let mut g = RepoGuard::record(d.path(), None);
        assert_eq!(g.check(), Ok(()));
        std::fs::write(d.path().join(".git/commondir"), "/tmp\n").expect("write");
        let t = g.check().expect_err("commondir");
        assert!(t.file.ends_with(".git/commondir"), "{t:?}");
        std::fs::remove_file(d.path().join(".git/commondir")).expect("rm");
        assert_eq!(g.check(), Ok(()));
        std::fs::rename(d.path().join(".git"), d.path().join(".git-real")).expect("mv");
        std::fs::write(d.path().join(".git"), "gitdir: /root\n").expect("write");
        let t = g.check().expect_err(".git");
        assert!(t.what.contains("was a folder"), "{t:?}");
        assert!(t.what.contains("/root"), "{t:?}");
    }

    #[test]
    fn config_hooks_and_info_written_during_a_call_are_put_back() {
        let d = repo();
        let git = d.path().join(".git");
        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\ntrue\n").expect("write");
        std::fs::set_permissions(
            git.join("hooks/pre-commit"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        let config = std::fs::read(git.join("config")).expect("config");
        let mut g = RepoGuard::record(d.path(), None);
        g.save();
        assert_eq!(g.restore(), vec![]);
        // The agent's call.
        std::fs::write(git.join("config"), "[core]\n\tpager = evil\n").expect("write");
        std::fs::write(git.join("hooks/pre-commit"), "evil").expect("write");
        std::fs::write(git.join("hooks/post-checkout"), "evil").expect("write");
        std::fs::remove_file(git.join("info/exclude")).expect("rm");
        let undone = g.restore();
        let files: Vec<(&str, &str, bool)> = undone
            .iter()
            .map(|u| (u.file.as_str(), u.what, u.restored))
            .collect();
        assert_eq!(
            files,
            vec![
                (".git/config", "changed", true),
                (".git/hooks/post-checkout", "added", true),
                (".git/hooks/pre-commit", "changed", true),
                (".git/info/exclude", "removed", true),
            ]
        );
        assert_eq!(std::fs::read(git.join("config")).expect("config"), config);
        assert!(!git.join("hooks/post-checkout").exists());
        let m = std::fs::metadata(git.join("hooks/pre-commit")).expect("meta");
        assert_eq!(m.permissions().mode() & 0o777, 0o755);
        assert!(git.join("info/exclude").is_file());
        // A hooks folder replaced by a link is a folder again.
        std::fs::remove_dir_all(git.join("hooks")).expect("rm");
        std::os::unix::fs::symlink("/tmp", git.join("hooks")).expect("link");
        let undone = g.restore();
        assert!(undone.iter().all(|u| u.restored), "{undone:?}");
        assert!(
            std::fs::symlink_metadata(git.join("hooks"))
                .expect("meta")
                .is_dir()
        );
        assert!(git.join("hooks/pre-commit").is_file());
    }

    #[test]
    fn a_settled_file_is_not_read_again_and_a_fresh_one_always_is() {
        let d = repo();
        let config = d.path().join(".git/config");
        let m = std::fs::symlink_metadata(&config).expect("meta");
        let stamp = super::super::guard::Stamp::of(&m);
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        // What an earlier look read, vouched for by a stamp that had settled then.
        let known: BTreeMap<PathBuf, Saved> = [(
            config.clone(),
            Saved::File(b"as read before".to_vec(), 0o644, Seen { stamp, at: later }),
        )]
        .into();
        let look = Look {
            known: &known,
            at: std::time::SystemTime::now(),
        };
        match look.snap(&config) {
            Some(Saved::File(bytes, ..)) => assert_eq!(bytes, b"as read before"),
            other => panic!("{other:?}"),
        }
        // The same stamp from a look that took it in the same instant the file was written
        // vouches for nothing: the file is read.
        let fresh: BTreeMap<PathBuf, Saved> = [(
            config.clone(),
            Saved::File(
                b"as read before".to_vec(),
                0o644,
                Seen {
                    stamp,
                    at: std::time::SystemTime::now(),
                },
            ),
        )]
        .into();
        let look = Look {
            known: &fresh,
            at: std::time::SystemTime::now(),
        };
        match look.snap(&config) {
            Some(Saved::File(bytes, ..)) => assert_eq!(bytes, b"[core]\n\tbare = false\n"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_write_right_after_the_save_with_the_same_size_is_still_put_back() {
        let d = repo();
        let git = d.path().join(".git");
        let mut g = RepoGuard::record(d.path(), None);
        g.save();
        // Written at once, same length: the stamp may not have moved, the bytes did.
        std::fs::write(git.join("config"), "[core]\n\tbare = fals3\n").expect("write");
        let undone = g.restore();
        assert_eq!(undone.len(), 1, "{undone:?}");
        assert_eq!(
            std::fs::read_to_string(git.join("config")).expect("read"),
            "[core]\n\tbare = false\n"
        );
    }

    #[test]
    fn a_submodules_config_is_guarded_too() {
        let d = repo();
        let module = d.path().join(".git/modules/lib");
        std::fs::create_dir_all(&module).expect("mkdir");
        std::fs::write(module.join("HEAD"), "ref: refs/heads/main\n").expect("write");
        std::fs::write(module.join("config"), "[core]\n").expect("write");
        let mut g = RepoGuard::record(d.path(), None);
        g.save();
        std::fs::write(module.join("config"), "[core]\n\tfsmonitor = evil\n").expect("write");
        let undone = g.restore();
        assert_eq!(undone.len(), 1, "{undone:?}");
        assert_eq!(undone[0].file, ".git/modules/lib/config");
        assert_eq!(
            std::fs::read_to_string(module.join("config")).expect("read"),
            "[core]\n"
        );
    }

    #[test]
    fn no_repository_guards_nothing() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut g = RepoGuard::record(d.path(), None);
        assert_eq!(g.check(), Ok(()));
        g.save();
        assert_eq!(g.restore(), vec![]);
        // A repository the agent made (`git init`) is guarded from then on.
        init(d.path());
        assert_eq!(g.check(), Ok(()));
        assert!(g.dirs().is_some());
        g.save();
        std::fs::write(d.path().join(".git/hooks/pre-commit"), "evil").expect("write");
        assert_eq!(g.restore().len(), 1);
        // A `.git` file appearing where there was nothing is tampering.
        let e = tempfile::tempdir().expect("tempdir");
        let mut g = RepoGuard::record(e.path(), None);
        std::fs::write(e.path().join(".git"), "gitdir: /root\n").expect("write");
        assert!(g.check().is_err());
    }
}
