//! The client's configuration guarded around a call (issue 47). Landlock only grants: it cannot
//! take a file out of a folder it grants. A `[sandbox] config` entry outside the client's state
//! is simply read only to the agent ([`super::Rules::for_agent`]); an entry that lies in a path
//! the agent writes (Claude Code's auto memory in `~/.claude/projects/*/memory/`, codex's
//! `~/.codex/config.toml` in `~/.codex/`, gemini's `~/.gemini/settings.json`) is guarded
//! instead: hank keeps its files before each call ([`Guard::take`]) and after it undoes every
//! change ([`Guard::undo`]) — a file written or replaced is put back, a file made is removed, a
//! file removed is made again — each change one [`Change`] the run reports (a
//! `client_config_changed` event naming the file).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// A file is kept with its bytes when it is at most this big; a bigger one is compared by its
/// stamp only, and a change to it is reported but cannot be undone.
const KEEP_FILE: u64 = 1 << 20;
/// Bytes kept in all by one take; past them, files are compared by their stamp only.
const KEEP_TOTAL: u64 = 32 << 20;
/// Entries (files, links, folders) looked at by one walk, at most.
const MAX_ENTRIES: usize = 20_000;

/// What identifies a file's content without reading it: a write changes `ctime`, which no
/// user can set back. Trusted only once it has settled ([`Stamp::settled_at`]): a write in
/// the same tick of the file system's clock as the look that took the stamp could leave it
/// unchanged (git's "racily clean" entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    mode: u32,
}

/// How much older than the look that took it a stamp's `ctime` must be to be trusted: far
/// more than any file system's timestamp tick.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

impl Stamp {
    pub(super) fn of(m: &std::fs::Metadata) -> Self {
        Self {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            mode: m.mode(),
        }
    }

    /// Whether a look at `at` that found this stamp can vouch for the content from then on:
    /// its `ctime` is at least [`SETTLE`] older than `at`, so any later write — which sets
    /// `ctime` to the time of the write — gives another stamp. A `ctime` in the future (a
    /// clock set back) never settles.
    pub(super) fn settled_at(&self, at: std::time::SystemTime) -> bool {
        let Ok(since) = at.duration_since(std::time::UNIX_EPOCH) else {
            return false;
        };
        let (secs, nanos) = self.ctime;
        let ctime = u64::try_from(secs)
            .ok()
            .map(|s| std::time::Duration::new(s, u32::try_from(nanos).unwrap_or(0)));
        ctime.is_some_and(|c| c + SETTLE <= since)
    }
}

/// One guarded path as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kept {
    /// A regular file: its bytes (`None`: too big to keep) and stamp.
    File {
        bytes: Option<Vec<u8>>,
        stamp: Stamp,
    },
    /// A symbolic link and its target.
    Link(PathBuf),
}

/// What happened to a guarded file during the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Written, or replaced by something else.
    Modified,
    /// Made where there was nothing.
    Created,
    /// Removed.
    Removed,
}

impl ChangeKind {
    /// The word in the event (`modified`, `created`, `removed`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Modified => "modified",
            Self::Created => "created",
            Self::Removed => "removed",
        }
    }
}

/// A change of the client's configuration, and whether it was undone (`Err`: why not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: PathBuf,
    pub kind: ChangeKind,
    pub undone: std::result::Result<(), String>,
}

/// The guarded configuration as it was before a call.
#[derive(Debug, Default)]
pub struct Guard {
    /// The guarded entries, `*` components unresolved (resolved again by [`Guard::undo`], so
    /// a match made during the call is seen).
    roots: Vec<PathBuf>,
    /// Paths beneath a root that are the client's state (not guarded).
    skip: Vec<PathBuf>,
    files: BTreeMap<PathBuf, Kept>,
    /// When the walk that kept them began (a stamp is trusted only when settled then).
    taken_at: Option<std::time::SystemTime>,
}

/// The `config` entries (expanded under `home`, `*` kept) that the agent could write under
/// these write rules: those in (or equal to) a path of `writable`. The others are read only
/// to it already.
#[must_use]
pub fn guarded(config: &[String], writable: &[PathBuf], home: Option<&Path>) -> Vec<PathBuf> {
    config
        .iter()
        .filter_map(|e| super::expand(e, home))
        .filter(|e| {
            let fixed = fixed_part(e);
            writable.iter().any(|w| fixed.starts_with(w))
        })
        .collect()
}

/// The components of `path` before its first one with a `*` (pure).
fn fixed_part(path: &Path) -> PathBuf {
    path.components()
        .take_while(|c| !c.as_os_str().to_string_lossy().contains('*'))
        .collect()
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters (pure).
fn matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = match parts.split_first() {
        Some(x) => x,
        None => return pattern == name,
    };
    let Some(mut left) = name.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return left.is_empty();
    };
    for part in middle {
        match left.find(part) {
            Some(i) => left = &left[i + part.len()..],
            None => return false,
        }
    }
    left.len() >= last.len() && left.ends_with(last)
}

/// The existing paths an entry names (its `*` components matched against the folders' names).
fn resolve(entry: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::new()];
    for c in entry.components() {
        let part = c.as_os_str().to_string_lossy();
        if matches!(c, Component::Normal(_)) && part.contains('*') {
            found = found
                .iter()
                .filter_map(|dir| std::fs::read_dir(dir).ok().map(|r| (dir, r)))
                .flat_map(|(dir, r)| {
                    r.flatten()
                        .filter(|d| matches(&part, &d.file_name().to_string_lossy()))
                        .map(|d| dir.join(d.file_name()))
                        .collect::<Vec<_>>()
                })
                .collect();
        } else {
            for f in &mut found {
                f.push(c.as_os_str());
            }
        }
    }
    found
}

/// What a walk found: the files and links beneath the roots, kept while the budget lasts.
struct Walk<'a> {
    skip: &'a [PathBuf],
    keep_bytes: bool,
    kept: u64,
    entries: usize,
    files: BTreeMap<PathBuf, Kept>,
}

impl Walk<'_> {
    fn visit(&mut self, path: &Path) {
        if self.entries >= MAX_ENTRIES || self.skip.iter().any(|s| path.starts_with(s)) {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        self.entries += 1;
        let kind = meta.file_type();
        if kind.is_symlink() {
            if let Ok(target) = std::fs::read_link(path) {
                self.files.insert(path.to_path_buf(), Kept::Link(target));
            }
        } else if kind.is_dir() {
            let Ok(dir) = std::fs::read_dir(path) else {
                return;
            };
            let mut names: Vec<PathBuf> = dir.flatten().map(|d| d.path()).collect();
            names.sort();
            for p in names {
                self.visit(&p);
            }
        } else if kind.is_file() {
            let bytes = (self.keep_bytes
                && meta.len() <= KEEP_FILE
                && self.kept + meta.len() <= KEEP_TOTAL)
                .then(|| read_regular(path, &meta))
                .flatten();
            self.kept += bytes.as_ref().map_or(0, |b| b.len() as u64);
            let stamp = Stamp::of(&meta);
            self.files
                .insert(path.to_path_buf(), Kept::File { bytes, stamp });
        }
    }
}

/// The bytes of the regular file at `path` that `meta` describes, read without following a
/// link or blocking on a FIFO; `None` when it is no longer that file.
fn read_regular(path: &Path, meta: &std::fs::Metadata) -> Option<Vec<u8>> {
    use std::io::Read;
    let file = crate::fsread::open_regular(path, crate::fsread::Follow::No).ok()?;
    let opened = file.metadata().ok()?;
    if opened.ino() != meta.ino() || opened.dev() != meta.dev() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(KEEP_FILE + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= KEEP_FILE).then_some(bytes)
}

fn walk(roots: &[PathBuf], skip: &[PathBuf], keep_bytes: bool) -> BTreeMap<PathBuf, Kept> {
    let mut w = Walk {
        skip,
        keep_bytes,
        kept: 0,
        entries: 0,
        files: BTreeMap::new(),
    };
    for root in roots {
        for path in resolve(root) {
            w.visit(&path);
        }
    }
    w.files
}

impl Guard {
    /// Keeps the files of `roots` (entries as [`guarded`] gives them) but those beneath a
    /// path of `state` (the client's own state inside its configuration).
    #[must_use]
    pub fn take(roots: Vec<PathBuf>, state: &[PathBuf]) -> Self {
        let skip: Vec<PathBuf> = state
            .iter()
            .filter(|s| {
                roots.iter().any(|r| {
                    let fixed = fixed_part(r);
                    s.starts_with(&fixed) && **s != fixed
                })
            })
            .cloned()
            .collect();
        let taken_at = Some(std::time::SystemTime::now());
        let files = walk(&roots, &skip, true);
        Self {
            roots,
            skip,
            files,
            taken_at,
        }
    }

    /// Whether nothing is guarded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// The changes since [`Guard::take`], each undone where it can be.
    #[must_use]
    pub fn undo(self) -> Vec<Change> {
        if self.roots.is_empty() {
            return Vec::new();
        }
        let now = walk(&self.roots, &self.skip, false);
        let mut changes = Vec::new();
        for (path, was) in &self.files {
            let kind = match now.get(path) {
                None => ChangeKind::Removed,
                Some(is) if same(was, is, path, self.taken_at) => continue,
                Some(_) => ChangeKind::Modified,
            };
            changes.push(Change {
                path: path.clone(),
                kind,
                undone: put_back(path, was),
            });
        }
        // Made during the call: removed (deepest first, so a made folder's files go first).
        for path in now.keys().filter(|p| !self.files.contains_key(*p)).rev() {
            changes.push(Change {
                path: path.clone(),
                kind: ChangeKind::Created,
                undone: std::fs::remove_file(path).map_err(|e| e.to_string()),
            });
        }
        changes
    }
}

/// Whether a file is as it was: the same stamp, settled when it was taken at `taken_at`, or
/// (a file rewritten) the same bytes and mode.
fn same(was: &Kept, is: &Kept, path: &Path, taken_at: Option<std::time::SystemTime>) -> bool {
    match (was, is) {
        (Kept::Link(a), Kept::Link(b)) => a == b,
        (Kept::File { bytes, stamp }, Kept::File { stamp: now, .. }) => {
            if stamp == now && taken_at.is_some_and(|t| stamp.settled_at(t)) {
                return true;
            }
            let Some(bytes) = bytes else {
                return false;
            };
            let now_bytes = std::fs::symlink_metadata(path)
                .ok()
                .and_then(|m| read_regular(path, &m));
            stamp.mode == now.mode && now_bytes.as_ref() == Some(bytes)
        }
        _ => false,
    }
}

/// Puts `path` back as it was: whatever is there now removed, the kept file written through a
/// temporary file and a rename in its folder (or the link made again).
fn put_back(path: &Path, was: &Kept) -> std::result::Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let parent = path.parent().ok_or_else(|| "no parent folder".to_owned())?;
    let fail = |e: std::io::Error| e.to_string();
    if let Kept::File { bytes: None, .. } = was {
        return Err(format!(
            "larger than {KEEP_FILE} bytes: not kept, not restored"
        ));
    }
    std::fs::create_dir_all(parent).map_err(fail)?;
    if let Ok(m) = std::fs::symlink_metadata(path)
        && m.is_dir()
    {
        std::fs::remove_dir_all(path).map_err(fail)?;
    }
    match was {
        Kept::Link(target) => {
            if std::fs::symlink_metadata(path).is_ok() {
                std::fs::remove_file(path).map_err(fail)?;
            }
            std::os::unix::fs::symlink(target, path).map_err(fail)
        }
        Kept::File { bytes, stamp } => {
            let bytes = bytes.as_deref().unwrap_or_default();
            let mut tmp = tempfile::Builder::new()
                .prefix(".hank-restore-")
                .tempfile_in(parent)
                .map_err(fail)?;
            tmp.write_all(bytes).map_err(fail)?;
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(stamp.mode & 0o7777))
                .map_err(fail)?;
            tmp.persist(path)
                .map(|_| ())
                .map_err(|e| e.error.to_string())
        }
    }
}

#[cfg(test)]
mod tests;
