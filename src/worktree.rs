//! Which files of a project changed between two moments, as git sees them.
//!
//! # Design: the git CLI, not a re-implementation
//!
//! "What changed" is exactly what `git status --porcelain=v2 -z` reports, so this module asks
//! git itself — through one private `git` function, which runs nothing the repository configures (the
//! filter drivers to switch off come from a `git config` listing kept while no configuration
//! file changes, see `worktree/filters.rs`). Each snapshot is one `git status` spawn (`--branch` for HEAD's id in the same
//! call, `--untracked-files=all`, `--ignore-submodules=none`, `.hank/` and `.hankrc` excluded
//! by pathspec); the `-z` output is read by the pure parser [`Porcelain`]. Git then decides
//! everything that is hard to get right: every ignore source (`.gitignore`, `info/exclude`,
//! `core.excludesFile`, the XDG `git/ignore`), the index (any version, split, sparse,
//! untracked cache, fsmonitor data), racy timestamps and stat-only changes (a `touch`, a
//! `chmod` that leaves the exec bit alone), submodules and nested repositories. It also uses
//! its index's stat cache and several threads, which a stat walk of the tree cannot match.
//!
//! gix (gitoxide) was the alternative. It is not a dependency today; its `status` needs a
//! large feature set (a hundred-odd crates, a much longer build on a shared 2-core machine)
//! and it still differs from git in corners (submodule status, some config keys), which is the
//! very problem this module removes. Spawning git costs ~1 ms of process start per call,
//! negligible next to the status itself on any tree where the cost matters.
//!
//! # Progress semantics
//!
//! A snapshot ([`State`]) records HEAD and, for every path git reports (modified, staged,
//! renamed, unmerged, untracked), the record git printed and a fingerprint of the file:
//! type, exec bit, size and a hash of the content for files up to [`HASH_FILE_MAX`] (stat data
//! past a per-snapshot byte budget); for a submodule or a nested repository, a hash of its own
//! `git status` and of its dirty files. [`changes_since`] then names a path when:
//!
//! - git reports it now and did not at the baseline (a clean file edited, a new file…);
//! - git reported it at the baseline and not now (reverted, committed, deleted and staged);
//! - git reports it both times but its record or its fingerprint differs (a file already dirty
//!   before the loop and edited again);
//! - HEAD moved (the agent committed): the files of `git diff --name-only base HEAD`.
//!
//! So an edit reverted within the loop, a `touch`, a `chmod 600` do not count; a `chmod +x`
//! does, as for git.
//!
//! # Outside git
//!
//! When the project is not in a git work tree, or git is missing, fails or times out
//! ([`GIT_TIMEOUT`]), a walk of the project (hidden directories, `target/` and
//! `node_modules/` skipped, symlinks not followed) records size, mtime, inode and mode of at
//! most [`MAX_WALK_FILES`] files in a compact table; past that the walk keeps only its start
//! time and counts the files modified since (deletions are then not seen). Nothing is read
//! into memory whole, so the memory stays bounded on any tree.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::git::git;
// The runners live in the git door (`crate::git`); their old paths stay.
#[cfg(test)]
pub(crate) use crate::git::git_in;
pub use crate::git::{
    GIT_OUTPUT_LIMIT, GIT_TIMEOUT, GitError, GitRun, git_run, git_run_input, run_git, run_git_for,
};
/// Files at most this large get a content hash in their fingerprint.
pub const HASH_FILE_MAX: u64 = 256 * 1024;
/// Bytes hashed per snapshot at most; past it fingerprints use stat data only.
pub const HASH_BUDGET: u64 = 64 * 1024 * 1024;
/// Most files the non-git walk records one by one (≈ 100 bytes each).
pub const MAX_WALK_FILES: usize = 250_000;
/// Nested repositories inside nested repositories are followed this deep.
const MAX_NESTING: u8 = 3;
/// A file modified this close to its snapshot may change again within the same timestamp
/// tick: its content hash is re-read rather than reused.
const RACY_WINDOW: Duration = Duration::from_secs(2);

/// Pathspecs limiting every git command to the project without hank's own files.
pub const PATHSPEC: [&str; 4] = ["--", ".", ":(exclude).hank", ":(exclude).hankrc"];

// ---------------------------------------------------------------------------------------------
// `git status --porcelain=v2 -z` (pure)

/// The kind of a porcelain v2 record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `1`: modified, added, deleted, type-changed (staged or not).
    Ordinary,
    /// `2`: renamed or copied in the index; has an original path.
    Renamed,
    /// `u`: unmerged.
    Unmerged,
    /// `?`: untracked.
    Untracked,
    /// `!`: ignored (only with `--ignored`).
    Ignored,
}

/// One item of porcelain v2 output. Byte slices borrow the output: paths are raw bytes
/// (`-z` never quotes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// `# key value` (`branch.oid`, `branch.head`, `stash`…).
    Header {
        key: &'a [u8],
        value: &'a [u8],
    },
    Record(Record<'a>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub kind: Kind,
    /// The space-separated fields between the kind and the path (`XY sub mH mI mW hH hI`…).
    pub fields: &'a [u8],
    pub path: &'a [u8],
    /// The path before a rename or copy (`2` records only).
    pub orig: Option<&'a [u8]>,
}

/// Output that is not porcelain v2 `-z`: the byte offset and what was expected there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseError {
    pub at: usize,
    pub expected: &'static str,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "git status output, byte {}: expected {}",
            self.at, self.expected
        )
    }
}

/// Iterator over the items of `git status --porcelain=v2 -z` output (pure). Stops after the
/// first error.
#[derive(Debug, Clone)]
pub struct Porcelain<'a> {
    out: &'a [u8],
    at: usize,
    failed: bool,
}

impl<'a> Porcelain<'a> {
    #[must_use]
    pub fn new(out: &'a [u8]) -> Self {
        Porcelain {
            out,
            at: 0,
            failed: false,
        }
    }

    /// The next NUL-terminated token (the last one may lack its NUL).
    fn token(&mut self) -> Option<(usize, &'a [u8])> {
        let rest = self.out.get(self.at..).filter(|r| !r.is_empty())?;
        let start = self.at;
        let len = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        self.at = start + len + 1;
        Some((start, &rest[..len]))
    }

    fn parse(&mut self, start: usize, token: &'a [u8]) -> Result<Line<'a>, ParseError> {
        let err = |off: usize, expected| ParseError {
            at: start + off,
            expected,
        };
        let (&tag, rest) = token.split_first().ok_or(err(0, "a record or a header"))?;
        let rest = rest
            .strip_prefix(b" ")
            .ok_or(err(1, "a space after the record kind"))?;
        let (kind, fields) = match tag {
            b'#' => {
                let (key, value) = match rest.iter().position(|&b| b == b' ') {
                    Some(i) => (&rest[..i], &rest[i + 1..]),
                    None => (rest, &rest[rest.len()..]),
                };
                return Ok(Line::Header { key, value });
            }
            b'1' => (Kind::Ordinary, 7),
            b'2' => (Kind::Renamed, 8),
            b'u' => (Kind::Unmerged, 9),
            b'?' => (Kind::Untracked, 0),
            b'!' => (Kind::Ignored, 0),
            _ => return Err(err(0, "one of `#`, `1`, `2`, `u`, `?`, `!`")),
        };
        // The path starts after `fields` spaces; it may itself contain spaces.
        let mut split = 0;
        for _ in 0..fields {
            let next = rest
                .get(split..)
                .and_then(|r| r.iter().position(|&b| b == b' '))
                .ok_or(err(2 + split, "another space-separated field"))?;
            split += next + 1;
        }
        let (fields, path) = rest.split_at(split);
        if path.is_empty() {
            return Err(err(2 + split, "a path"));
        }
        let fields = fields.strip_suffix(b" ").unwrap_or(fields);
        let orig = if kind == Kind::Renamed {
            match self.token() {
                Some((_, orig)) if !orig.is_empty() => Some(orig),
                _ => return Err(err(token.len(), "the original path of a rename")),
            }
        } else {
            None
        };
        Ok(Line::Record(Record {
            kind,
            fields,
            path,
            orig,
        }))
    }
}

impl<'a> Iterator for Porcelain<'a> {
    type Item = Result<Line<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let (start, token) = self.token()?;
        let item = self.parse(start, token);
        self.failed = item.is_err();
        Some(item)
    }
}

/// HEAD's commit id in a `branch.oid` header value; `None` for `(initial)` (pure).
fn head_of(value: &[u8]) -> Option<String> {
    (!value.is_empty() && value.iter().all(u8::is_ascii_hexdigit))
        .then(|| String::from_utf8_lossy(value).into_owned())
}

/// Paths of `-z` output of `git diff --name-only` or `git ls-tree --name-only` (pure).
fn nul_separated(out: &[u8]) -> impl Iterator<Item = String> + '_ {
    out.split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
}

// ---------------------------------------------------------------------------------------------
// Fingerprints

/// What a path holds, enough to tell whether its content (as git sees it) changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Fp {
    /// File type bits (`S_IFMT`) of `lstat`; 0 when the path does not exist.
    kind: u32,
    /// Git tracks only the user exec bit of a file's mode.
    exec: bool,
    size: u64,
    mtime_ns: i64,
    ino: u64,
    /// Permission bits (compared by the walk outside git only).
    mode: u32,
    /// Hash of the content (a symlink's target; a nested repository's status), when read.
    content: Option<u64>,
}

const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;
const S_IFDIR: u32 = 0o040_000;

impl Fp {
    fn of_meta(meta: &std::fs::Metadata) -> Fp {
        let kind = meta.mode() & S_IFMT;
        Fp {
            kind,
            exec: kind == S_IFREG && meta.mode() & 0o100 != 0,
            size: if kind == S_IFDIR { 0 } else { meta.size() },
            mtime_ns: meta
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec()),
            ino: meta.ino(),
            mode: meta.mode() & 0o7777,
            content: None,
        }
    }

    /// Same content and git-visible mode: compares hashes when both sides have one, else
    /// the stat data.
    fn same(&self, other: &Fp) -> bool {
        if self.kind != other.kind || self.exec != other.exec || self.size != other.size {
            return false;
        }
        match (self.content, other.content) {
            (Some(a), Some(b)) => a == b,
            _ => self.mtime_ns == other.mtime_ns && self.ino == other.ino,
        }
    }

    /// A hash of what [`Fp::same`] compares (for combining many into one).
    fn key(&self, h: &mut impl Hasher) {
        (self.kind, self.exec, self.size).hash(h);
        match self.content {
            Some(c) => c.hash(h),
            None => (self.mtime_ns, self.ino).hash(h),
        }
    }
}

/// Content-hash budget and a reusable read buffer for one snapshot.
struct Hashing {
    left: u64,
    buf: Vec<u8>,
}

impl Hashing {
    fn new() -> Self {
        Hashing {
            left: HASH_BUDGET,
            buf: Vec::new(),
        }
    }

    /// Hash of a regular file's bytes, when it is small enough and the budget allows. Opened
    /// non-blocking (a FIFO swapped in after the `lstat` cannot hang the loop) and checked to
    /// still be a regular file.
    fn file(&mut self, path: &Path, size: u64) -> Option<u64> {
        if size > HASH_FILE_MAX || size > self.left {
            return None;
        }
        let file = std::fs::File::options()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(path)
            .ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        self.buf.clear();
        file.take(HASH_FILE_MAX + 1)
            .read_to_end(&mut self.buf)
            .ok()?;
        self.left = self.left.saturating_sub(self.buf.len() as u64);
        let mut h = DefaultHasher::new();
        self.buf.hash(&mut h);
        Some(h.finish())
    }
}

/// Now, read from the clock the kernel stamps files with. Linux stamps a file's mtime and
/// ctime from its coarse clock, which lags the precise one by up to a scheduler tick: a file
/// written a few milliseconds after a snapshot taken with `SystemTime::now()` can carry an
/// older time than the snapshot's and be missed. Times from this clock never run ahead of a
/// later stamp.
fn stamp_clock() -> SystemTime {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use nix::time::{ClockId, clock_gettime};
        if let Ok(t) = clock_gettime(ClockId::CLOCK_REALTIME_COARSE)
            && let (Ok(secs), Ok(nanos)) = (u64::try_from(t.tv_sec()), u32::try_from(t.tv_nsec()))
        {
            return SystemTime::UNIX_EPOCH + Duration::new(secs, nanos);
        }
    }
    SystemTime::now()
}

fn ns_since_epoch(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Fingerprint of `path` (never followed if a symlink). `reuse` is the same path's
/// fingerprint in the previous snapshot and the time it was taken: its content hash is kept
/// when the stat data is identical and the file was not modified just before it.
fn fingerprint(path: &Path, hashing: &mut Hashing, depth: u8, reuse: Option<(&Fp, i64)>) -> Fp {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Fp::default();
    };
    let mut fp = Fp::of_meta(&meta);
    fp.content = match fp.kind {
        S_IFREG => match reuse {
            Some((old, taken))
                if old.content.is_some()
                    && Fp {
                        content: None,
                        ..*old
                    } == fp
                    && fp.mtime_ns < taken.saturating_sub(RACY_WINDOW.as_nanos() as i64) =>
            {
                old.content
            }
            _ => hashing.file(path, fp.size),
        },
        S_IFLNK => std::fs::read_link(path).ok().map(|target| {
            let mut h = DefaultHasher::new();
            target.as_os_str().as_bytes().hash(&mut h);
            h.finish()
        }),
        S_IFDIR => nested_repo_hash(path, hashing, depth),
        _ => None,
    };
    fp
}

/// For a submodule or a nested repository (a directory with its own `.git`): a hash of its
/// `git status` (HEAD included) and of the fingerprints of the files it reports, so that an
/// edit inside a repository that was already dirty still shows. `None` for other
/// directories or when git gives no answer (the directory's stat data then decides).
fn nested_repo_hash(dir: &Path, hashing: &mut Hashing, depth: u8) -> Option<u64> {
    if depth >= MAX_NESTING || std::fs::symlink_metadata(dir.join(".git")).is_err() {
        return None;
    }
    // The ceiling keeps git from answering for the outer repository if `.git` is bogus.
    let out = git(dir, &STATUS_ARGS, GIT_TIMEOUT, dir.parent()).ok()?;
    let mut h = DefaultHasher::new();
    out.hash(&mut h);
    for line in Porcelain::new(&out) {
        if let Line::Record(r) = line.ok()? {
            let path = dir.join(std::ffi::OsStr::from_bytes(r.path));
            fingerprint(&path, hashing, depth + 1, None).key(&mut h);
        }
    }
    Some(h.finish())
}

// ---------------------------------------------------------------------------------------------
// Snapshots

/// The arguments of the `git status` of a snapshot (its pathspec, [`PATHSPEC`], follows).
pub const STATUS_ARGS: [&str; 6] = [
    "status",
    "--porcelain=v2",
    "-z",
    "--branch",
    "--untracked-files=all",
    "--ignore-submodules=none",
];

/// Paths with a value each, stored compactly: one string holding every path, and a table
/// sorted by path.
#[derive(Debug, Clone)]
struct PathTable<T> {
    names: String,
    rows: Vec<(usize, usize, T)>,
}

impl<T> Default for PathTable<T> {
    fn default() -> Self {
        PathTable {
            names: String::new(),
            rows: Vec::new(),
        }
    }
}

impl<T: Copy> PathTable<T> {
    fn push(&mut self, name: &str, value: T) {
        let start = self.names.len();
        self.names.push_str(name);
        self.rows.push((start, name.len(), value));
    }

    fn name(&self, row: &(usize, usize, T)) -> &str {
        self.names.get(row.0..row.0 + row.1).unwrap_or("")
    }

    fn sort(&mut self) {
        let mut rows = std::mem::take(&mut self.rows);
        rows.sort_by(|a, b| self.name(a).cmp(self.name(b)));
        self.rows = rows;
    }

    fn get(&self, name: &str) -> Option<&T> {
        self.rows
            .binary_search_by(|r| self.name(r).cmp(name))
            .ok()
            .and_then(|i| self.rows.get(i))
            .map(|r| &r.2)
    }

    /// The names of this table that `later` no longer has.
    fn gone_from<'a, U: Copy>(
        &'a self,
        later: &'a PathTable<U>,
    ) -> impl Iterator<Item = String> + 'a {
        self.iter()
            .filter(|(name, _)| later.get(name).is_none())
            .map(|(name, _)| name.to_string())
    }

    fn iter(&self) -> impl Iterator<Item = (&str, &T)> {
        self.rows.iter().map(|r| (self.name(r), &r.2))
    }

    fn len(&self) -> usize {
        self.rows.len()
    }
}

/// One path git reports: a hash of its record(s) and its fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dirty {
    record: u64,
    fp: Fp,
}

#[derive(Debug, Clone)]
struct GitState {
    /// The project's directory inside the repository (`""` or `sub/dir/`).
    prefix: String,
    /// HEAD's commit, `None` before the first commit.
    head: Option<String>,
    taken: SystemTime,
    dirty: PathTable<Dirty>,
}

#[derive(Debug, Clone)]
struct WalkState {
    taken: SystemTime,
    /// `None` when the project had more than [`MAX_WALK_FILES`] files.
    files: Option<PathTable<Fp>>,
}

/// The project's files at one moment: what git reported, or a walk outside git.
#[derive(Debug, Clone)]
pub struct State(Inner);

#[derive(Debug, Clone)]
enum Inner {
    Git(Box<GitState>),
    Walk(WalkState),
}

/// Where the changed files came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Git,
    Walk,
}

impl State {
    /// Snapshots `project`: through git inside a work tree (two spawns: `rev-parse` for the
    /// project's place in the repository, then `status`), by a walk otherwise. Never fails.
    #[must_use]
    pub fn capture(project: &Path) -> State {
        match git_prefix(project).and_then(|prefix| git_state(project, prefix, None)) {
            Ok(g) => State(Inner::Git(Box::new(g))),
            Err(_) => State(Inner::Walk(walk_state(project))),
        }
    }

    /// Where this snapshot came from.
    #[must_use]
    pub fn source(&self) -> Source {
        match self.0 {
            Inner::Git(_) => Source::Git,
            Inner::Walk(_) => Source::Walk,
        }
    }

    /// How many paths it holds (git: the paths git reported; walk: files recorded).
    #[must_use]
    pub fn len(&self) -> usize {
        match &self.0 {
            Inner::Git(g) => g.dirty.len(),
            Inner::Walk(w) => w.files.as_ref().map_or(0, PathTable::len),
        }
    }

    /// Whether it holds no path.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The project's place in its repository (`""` or `dir/`); fails outside a work tree.
fn git_prefix(project: &Path) -> Result<String, GitError> {
    let out = git(
        project,
        &["rev-parse", "--is-inside-work-tree", "--show-prefix"],
        GIT_TIMEOUT,
        None,
    )?;
    let text = String::from_utf8_lossy(&out);
    let mut lines = text.lines();
    if lines.next() != Some("true") {
        return Err(GitError::Output("not inside a work tree".into()));
    }
    Ok(lines.next().unwrap_or("").to_string())
}

/// Project-relative name of a repository-relative path; `None` outside the project (pure).
fn project_name(prefix: &str, path: &[u8]) -> Option<String> {
    let rel = path.strip_prefix(prefix.as_bytes())?;
    (!rel.is_empty()).then(|| String::from_utf8_lossy(rel).into_owned())
}

fn git_state(
    project: &Path,
    prefix: String,
    prev: Option<&GitState>,
) -> Result<GitState, GitError> {
    let mut args: Vec<&str> = STATUS_ARGS.to_vec();
    args.extend(PATHSPEC);
    let taken = stamp_clock();
    let out = git(project, &args, GIT_TIMEOUT, None)?;
    let mut head = None;
    let mut dirty = PathTable::default();
    let mut hashing = Hashing::new();
    let prev_taken = prev.map_or(0, |p| ns_since_epoch(p.taken));
    let mut add = |name: String, record: u64, dirty: &mut PathTable<Dirty>| {
        let reuse = prev
            .and_then(|p| p.dirty.get(&name))
            .map(|d| (&d.fp, prev_taken));
        let fp = fingerprint(&project.join(&name), &mut hashing, 0, reuse);
        dirty.push(&name, Dirty { record, fp });
    };
    for line in Porcelain::new(&out) {
        match line.map_err(|e| GitError::Output(e.to_string()))? {
            Line::Header { key, value } => {
                if key == b"branch.oid" {
                    head = head_of(value);
                }
            }
            Line::Record(r) => {
                let mut h = DefaultHasher::new();
                (r.kind as u8, r.fields, r.orig).hash(&mut h);
                let record = h.finish();
                if let Some(name) = project_name(&prefix, r.path) {
                    add(name, record, &mut dirty);
                }
                // The old name of a rename is a changed path too.
                if let Some(name) = r.orig.and_then(|o| project_name(&prefix, o)) {
                    add(name, record.rotate_left(1), &mut dirty);
                }
            }
        }
    }
    dirty.sort();
    // A path may appear twice (the old name of a rename, re-created untracked): merge.
    let mut merged: PathTable<Dirty> = PathTable::default();
    for (name, d) in dirty.iter() {
        match merged.rows.last_mut() {
            Some(last) if merged.names.get(last.0..last.0 + last.1) == Some(name) => {
                last.2.record ^= d.record.rotate_left(7);
            }
            _ => merged.push(name, *d),
        }
    }
    Ok(GitState {
        prefix,
        head,
        taken,
        dirty: merged,
    })
}

/// Paths whose state differs between two git snapshots (pure).
fn diff_dirty(base: &PathTable<Dirty>, now: &PathTable<Dirty>) -> Vec<String> {
    let mut changed: Vec<String> = now
        .iter()
        .filter(|(name, d)| {
            base.get(name)
                .is_none_or(|b| b.record != d.record || !b.fp.same(&d.fp))
        })
        .map(|(name, _)| name.to_string())
        .collect();
    changed.extend(base.gone_from(now));
    changed
}

/// Files of the commits between two HEADs (project-relative, `.hank/` excluded).
fn committed(project: &Path, before: Option<&str>, after: Option<&str>) -> Vec<String> {
    let out = match (before, after) {
        (Some(b), Some(a)) => {
            let mut args = vec![
                "diff",
                "--no-ext-diff",
                "--no-textconv",
                "--name-only",
                "-z",
                "--no-renames",
                "--relative",
                "--ignore-submodules=none",
                b,
                a,
            ];
            args.extend(PATHSPEC);
            git(project, &args, GIT_TIMEOUT, None)
        }
        // The first commit (or HEAD made unborn): every file of the one tree there is.
        (None, Some(c)) | (Some(c), None) => git(
            project,
            &["ls-tree", "-r", "--name-only", "-z", c],
            GIT_TIMEOUT,
            None,
        ),
        (None, None) => return Vec::new(),
    };
    out.map(|o| nul_separated(&o).collect()).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The walk outside git

/// Directory names never walked outside git.
fn skip_dir(name: &[u8]) -> bool {
    name.starts_with(b".") || name == b"target" || name == b"node_modules"
}

/// Visits every file under `project` that the walk does not skip, with its project-relative
/// path and `lstat` data. Symlinks are not followed.
fn walk(project: &Path, mut visit: impl FnMut(&str, &Path, &std::fs::Metadata)) {
    let mut stack: Vec<(PathBuf, String)> = vec![(project.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(listing) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in listing.flatten() {
            let name = entry.file_name();
            let Ok(ft) = entry.file_type() else {
                continue;
            };
            let rel_path = if rel.is_empty() {
                name.to_string_lossy().into_owned()
            } else {
                format!("{rel}/{}", name.to_string_lossy())
            };
            if ft.is_dir() {
                if !skip_dir(name.as_bytes()) {
                    stack.push((entry.path(), rel_path));
                }
                continue;
            }
            if let Ok(meta) = entry.metadata() {
                visit(&rel_path, &entry.path(), &meta);
            }
        }
    }
}

fn walk_state(project: &Path) -> WalkState {
    let taken = stamp_clock();
    let racy_after = ns_since_epoch(taken).saturating_sub(RACY_WINDOW.as_nanos() as i64);
    let mut hashing = Hashing::new();
    let mut files = Some(PathTable::default());
    walk(project, |rel, path, meta| {
        let Some(table) = files.as_mut() else {
            return;
        };
        if table.len() >= MAX_WALK_FILES {
            files = None;
            return;
        }
        // A file written just now gets its content hashed: a same-size rewrite within one
        // timestamp tick would otherwise go unseen.
        let mut fp = Fp::of_meta(meta);
        if fp.mtime_ns >= racy_after && fp.kind == S_IFREG {
            fp.content = hashing.file(path, fp.size);
        }
        table.push(rel, fp);
    });
    if let Some(t) = files.as_mut() {
        t.sort();
    }
    WalkState { taken, files }
}

/// Files created, deleted or modified between two walks. A file whose stat data is the same
/// but whose content was hashed at the baseline (it was being written then) is re-hashed.
fn diff_walks(project: &Path, base: &PathTable<Fp>, now: &PathTable<Fp>) -> Vec<String> {
    let mut hashing = Hashing::new();
    let mut changed: Vec<String> = now
        .iter()
        .filter(|(name, fp)| match base.get(name) {
            None => true,
            // Outside git the whole mode counts.
            Some(b)
                if Fp {
                    content: None,
                    ..*b
                } != Fp {
                    content: None,
                    ..**fp
                } =>
            {
                true
            }
            Some(b) => b
                .content
                .is_some_and(|h| hashing.file(&project.join(name), b.size) != Some(h)),
        })
        .map(|(name, _)| name.to_string())
        .collect();
    changed.extend(base.gone_from(now));
    changed
}

/// Files (walk rules) modified or created at or after `since`: the bounded-memory answer when
/// no per-file baseline exists.
fn modified_since(project: &Path, since: SystemTime) -> Vec<String> {
    let since = ns_since_epoch(since);
    let mut changed = Vec::new();
    walk(project, |rel, _, meta| {
        let ctime = meta
            .ctime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.ctime_nsec());
        if Fp::of_meta(meta).mtime_ns >= since || ctime >= since {
            changed.push(rel.to_string());
        }
    });
    changed
}

// ---------------------------------------------------------------------------------------------
// The comparison

/// What changed since a snapshot.
#[derive(Debug, Clone)]
pub struct Changes {
    pub source: Source,
    /// Project-relative paths, `/`-separated, unsorted, possibly repeated; hank's own files
    /// are not filtered here.
    pub paths: Vec<String>,
    /// The snapshot taken now, usable as the next baseline (`None` when git failed now and
    /// the answer came from modification times).
    pub now: Option<State>,
}

/// Names the paths that changed in `project` since `base` (see the module doc). A git
/// baseline takes one `git status` now (and one `git diff` only when HEAD moved); if git
/// fails now, files modified since the baseline's time answer instead.
#[must_use]
pub fn changes_since(project: &Path, base: &State) -> Changes {
    match &base.0 {
        Inner::Git(b) => match git_state(project, b.prefix.clone(), Some(b)) {
            Ok(now) => {
                let mut paths = diff_dirty(&b.dirty, &now.dirty);
                if now.head != b.head {
                    paths.extend(committed(project, b.head.as_deref(), now.head.as_deref()));
                }
                Changes {
                    source: Source::Git,
                    paths,
                    now: Some(State(Inner::Git(Box::new(now)))),
                }
            }
            Err(_) => Changes {
                source: Source::Walk,
                paths: modified_since(project, b.taken),
                now: None,
            },
        },
        Inner::Walk(b) => {
            let now = walk_state(project);
            let paths = match (&b.files, &now.files) {
                (Some(before), Some(after)) => diff_walks(project, before, after),
                _ => modified_since(project, b.taken),
            };
            Changes {
                source: Source::Walk,
                paths,
                now: Some(State(Inner::Walk(now))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::{filter_driver, filter_overrides, git_in, git_plain, submodule_configs};

    #[test]
    fn files_written_after_a_snapshot_are_stamped_no_earlier_than_it() {
        // New files carry the kernel's coarse time unless someone asked for a fine one; a
        // snapshot read from the precise clock was sometimes ahead of them (a CI run missed
        // the file written right after its baseline).
        let dir = tempfile::tempdir().unwrap();
        for i in 0..500 {
            let taken = ns_since_epoch(stamp_clock());
            let path = dir.path().join(format!("f{i}"));
            std::fs::write(&path, "x").unwrap();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            assert!(Fp::of_meta(&meta).mtime_ns >= taken, "file {i}");
        }
        assert_eq!(modified_since(dir.path(), SystemTime::now()).len(), 0);
    }

    fn parse(out: &[u8]) -> Result<Vec<Line<'_>>, ParseError> {
        Porcelain::new(out).collect()
    }

    fn rec<'a>(kind: Kind, fields: &'a str, path: &'a str, orig: Option<&'a str>) -> Line<'a> {
        Line::Record(Record {
            kind,
            fields: fields.as_bytes(),
            path: path.as_bytes(),
            orig: orig.map(str::as_bytes),
        })
    }

    const H: &str = "78981922613b2afb6025042ff6bd878ac1994e85";

    #[test]
    fn porcelain_records() {
        let one = format!("1 .M N... 100644 100644 100644 {H} {H} src/a b.rs\0");
        let two = format!("2 R. N... 100644 100644 100644 {H} {H} R100 new name\0old name\0");
        let unmerged = format!("u UU N... 100644 100644 100644 100644 {H} {H} {H} conflict.rs\0");
        let sub = format!("1 .M S.MU 160000 160000 160000 {H} {H} sub\0");
        let f1 = format!(".M N... 100644 100644 100644 {H} {H}");
        let f2 = format!("R. N... 100644 100644 100644 {H} {H} R100");
        let fu = format!("UU N... 100644 100644 100644 100644 {H} {H} {H}");
        let fs = format!(".M S.MU 160000 160000 160000 {H} {H}");
        // (output, expected items)
        let cases: Vec<(String, Vec<Line>)> = vec![
            (String::new(), vec![]),
            (
                format!("# branch.oid {H}\0# branch.head main\0"),
                vec![
                    Line::Header {
                        key: b"branch.oid",
                        value: H.as_bytes(),
                    },
                    Line::Header {
                        key: b"branch.head",
                        value: b"main",
                    },
                ],
            ),
            (
                one.clone(),
                vec![rec(Kind::Ordinary, &f1, "src/a b.rs", None)],
            ),
            (
                two.clone(),
                vec![rec(Kind::Renamed, &f2, "new name", Some("old name"))],
            ),
            (
                unmerged,
                vec![rec(Kind::Unmerged, &fu, "conflict.rs", None)],
            ),
            (sub, vec![rec(Kind::Ordinary, &fs, "sub", None)]),
            (
                "? dir/ü ñ.txt\0? nested/\0! target/x\0".into(),
                vec![
                    rec(Kind::Untracked, "", "dir/ü ñ.txt", None),
                    rec(Kind::Untracked, "", "nested/", None),
                    rec(Kind::Ignored, "", "target/x", None),
                ],
            ),
            // A path with a newline, and a last record without its NUL.
            (
                format!("{two}? line\nbreak"),
                vec![
                    rec(Kind::Renamed, &f2, "new name", Some("old name")),
                    rec(Kind::Untracked, "", "line\nbreak", None),
                ],
            ),
        ];
        for (out, expected) in &cases {
            assert_eq!(parse(out.as_bytes()).as_ref(), Ok(expected), "{out:?}");
        }
    }

    #[test]
    fn porcelain_errors_never_panic() {
        // (output, offset of the error)
        let cases: &[(&[u8], usize)] = &[
            (b"x foo\0", 0),
            (b"1\0", 1),
            (b"1 .M N... 100644\0", 10),
            (b"? \0", 2),
            (b"2 R. N... 100644 100644 100644 a b R100 new\0", 43),
            (b"\0", 0),
        ];
        for (out, at) in cases {
            let items = parse(out);
            assert_eq!(items.map_err(|e| e.at), Err(*at), "{out:?}");
        }
        let full = format!("1 .M N... 100644 100644 100644 {H} {H} a\0? b\0");
        for cut in 0..full.len() {
            let _ = parse(&full.as_bytes()[..cut]);
        }
        assert_eq!(head_of(H.as_bytes()), Some(H.to_string()));
        assert_eq!(head_of(b"(initial)"), None);
        assert_eq!(
            nul_separated(b"a\0b c\0\0").collect::<Vec<_>>(),
            vec!["a", "b c"]
        );
        assert_eq!(project_name("app/", b"app/src/x"), Some("src/x".into()));
        assert_eq!(project_name("app/", b"other/x"), None);
        assert_eq!(project_name("", b"x"), Some("x".into()));
    }

    #[test]
    fn fingerprints_compare_what_git_sees() {
        let f = Fp {
            kind: S_IFREG,
            exec: false,
            size: 3,
            mtime_ns: 1,
            ino: 7,
            mode: 0o644,
            content: Some(42),
        };
        // (changed fingerprint, same?)
        let cases = [
            (Fp { mtime_ns: 99, ..f }, true),
            (Fp { ino: 99, ..f }, true),
            (Fp { mode: 0o600, ..f }, true),
            (Fp { exec: true, ..f }, false),
            (
                Fp {
                    content: Some(43),
                    ..f
                },
                false,
            ),
            (Fp { size: 4, ..f }, false),
            (Fp { kind: S_IFLNK, ..f }, false),
            (Fp { content: None, ..f }, true),
            (
                Fp {
                    content: None,
                    mtime_ns: 2,
                    ..f
                },
                false,
            ),
            (Fp::default(), false),
        ];
        for (other, same) in cases {
            assert_eq!(f.same(&other), same, "{other:?}");
            assert_eq!(other.same(&f), same, "{other:?}");
        }
    }

    #[test]
    fn dirty_tables_diff() {
        let fp = Fp {
            kind: S_IFREG,
            content: Some(1),
            ..Fp::default()
        };
        let table = |rows: &[(&str, u64, u64)]| {
            let mut t = PathTable::default();
            for (name, record, content) in rows {
                t.push(
                    name,
                    Dirty {
                        record: *record,
                        fp: Fp {
                            content: Some(*content),
                            ..fp
                        },
                    },
                );
            }
            t.sort();
            t
        };
        let base = table(&[("a", 1, 1), ("b", 1, 1), ("c", 1, 1), ("d", 1, 1)]);
        let now = table(&[("e", 1, 1), ("a", 1, 1), ("b", 2, 1), ("c", 1, 2)]);
        let mut changed = diff_dirty(&base, &now);
        changed.sort();
        assert_eq!(changed, vec!["b", "c", "d", "e"]);
        assert!(diff_dirty(&base, &base).is_empty());
    }

    #[test]
    fn filter_names_and_their_overrides() {
        let names = |out: &[u8]| -> Vec<String> {
            let mut v: Vec<String> = out
                .split(|&b| b == 0)
                .filter_map(|k| filter_driver(k).unwrap())
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let names = names(b"filter.x.clean\0filter.a.b.smudge\0filter.x.required\0");
        assert_eq!(names, vec!["a.b".to_string(), "x".to_string()]);
        // `-c filter.a=b.clean=` would set `filter.a`: such a name is refused, not missed.
        assert!(filter_driver(b"filter.a=b.clean").is_err());
        assert!(filter_driver(b"filter.\xff.clean").is_err());
        let o = filter_overrides(&["x".to_string()]);
        assert_eq!(
            o,
            vec![
                "-c",
                "filter.x.clean=",
                "-c",
                "filter.x.smudge=",
                "-c",
                "filter.x.process=",
                "-c",
                "filter.x.required=false"
            ]
        );
        assert_eq!(filter_driver(b"").unwrap(), None);
        assert_eq!(filter_driver(b"filter").unwrap(), None);
        assert_eq!(filter_driver(b"core.x").unwrap(), None);
    }

    #[test]
    fn a_filter_in_a_submodules_own_config_never_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let run = git_in;
        let sub_src = tmp.path().join("sub-src");
        let top = tmp.path().join("top");
        std::fs::create_dir_all(&sub_src).unwrap();
        std::fs::create_dir_all(&top).unwrap();
        std::fs::write(sub_src.join("a.txt"), "a\n").unwrap();
        std::fs::write(sub_src.join(".gitattributes"), "*.txt filter=y\n").unwrap();
        run(&sub_src, &["init", "-q"]);
        run(&sub_src, &["add", "-A"]);
        run(&sub_src, &["commit", "-q", "-m", "s"]);
        run(&top, &["init", "-q"]);
        let src = sub_src.to_string_lossy().into_owned();
        run(&top, &["submodule", "add", "-q", &src, "sub"]);
        run(&top, &["commit", "-q", "-m", "t"]);
        let marker = tmp.path().join("ran");
        let config = top.join(".git/modules/sub/config");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!(
            "[filter \"y\"]\n\tclean = \"sh -c 'touch {}; cat'\"\n",
            marker.display()
        ));
        std::fs::write(&config, text).unwrap();
        assert_eq!(submodule_configs(&top), vec![config.clone()]);
        std::thread::sleep(Duration::from_millis(1100));
        let _ = std::fs::write(top.join("sub/a.txt"), "a\n");
        let out = git(&top, &STATUS_ARGS, GIT_TIMEOUT, None);
        assert!(out.is_ok(), "{out:?}");
        assert!(!marker.exists(), "the submodule's filter ran");
        // The same status without the overrides runs it: the attack is real.
        let _ = git_plain(&top, &[], &STATUS_ARGS, GIT_TIMEOUT, None);
        assert!(marker.exists(), "the check above proves nothing");
    }

    /// Runs the shell command `script` as a git alias (through [`git`]) in `dir`.
    fn git_alias(dir: &Path, script: &str, timeout: Duration) -> Result<Vec<u8>, GitError> {
        let alias = format!("alias.hank-test=!{script}");
        git(dir, &["-c", &alias, "hank-test"], timeout, None)
    }

    #[test]
    fn a_pipe_held_open_after_git_exits_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let t = std::time::Instant::now();
        // The alias starts a process in its own session holding git's stdout, and exits.
        let r = git_alias(dir.path(), "setsid sleep 5 & echo held", GIT_TIMEOUT);
        assert!(matches!(r, Err(GitError::Output(_))), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    }

    #[test]
    fn git_timeout_kills_the_process_group() {
        let dir = tempfile::tempdir().unwrap();
        // An alias runs a shell: it and its child are killed together.
        let t = std::time::Instant::now();
        let r = git_alias(dir.path(), "sleep 30 | cat", Duration::from_millis(300));
        assert!(matches!(r, Err(GitError::Timeout)), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(10));
        assert!(matches!(
            git(
                dir.path(),
                &["rev-parse", "--show-prefix"],
                GIT_TIMEOUT,
                Some(dir.path())
            ),
            Err(GitError::Failed(_))
        ));
    }
}
