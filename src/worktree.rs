//! Which files of a project changed between two moments, as git sees them.
//!
//! # Design: git's files read in process, no git child
//!
//! "What changed" is what `git status --porcelain` would report differently at the two
//! moments. Each snapshot is read in process by [`crate::git::snapshot`] (the index, HEAD,
//! every ignore source, the work tree's stat data; a content hash only where the stat data
//! does not settle it), so a loop starts no git process and nothing the repository
//! configures (filters, fsmonitor, hooks) can run. Why this reader and not gix, and what it
//! does not read (then the walk below answers): the module doc of
//! [`crate::git::snapshot`]. `tests/integration/progress.rs` and the differential test in
//! `crate::git::snapshot`'s tests hold it to `git status --porcelain` itself.
//!
//! # Progress semantics
//!
//! A snapshot ([`State`]) records HEAD, a key of every index entry (mode, id, stage, flags)
//! and a key of what is on disk for every path git would show in the work-tree column or as
//! untracked (its blob id, or its stat data where content cannot be judged without a filter;
//! for a submodule or a nested repository a key of its own snapshot). [`changes_since`] then
//! names a path when:
//!
//! - its index entry appeared, disappeared or changed (`git add`, `git rm`, `git mv`, a
//!   commit of a file changed in the loop, a reset…);
//! - it became dirty or untracked, stopped being so, or its content changed while dirty;
//! - HEAD moved (the agent committed): the files of `git diff --name-only base HEAD`, read in
//!   process too: the two commits' trees diffed by [`crate::git::odb`] (loose objects and
//!   packs, delta chains, alternates; no git child).
//!
//! # When the commits' files still come from git
//!
//! The tree diff answers exactly as `git diff --name-only --no-renames --relative
//! --ignore-submodules=none BASE HEAD -- . ':(exclude).hank' ':(exclude).hankrc'` (and `git
//! ls-tree -r` when a side is unborn); its differential test is `crate::git::odb`'s. Whenever
//! the reader says `Unreadable`, the answer is that git command's ([`committed_by_git`], a
//! tree-only command: no filter can run): replacement refs (`refs/replace/`) in use, an object
//! missing (a partial clone's promised object, a repository being pruned), an unknown pack or
//! index version (an index v1, a pack past version 3), a corrupt object or delta, an object
//! past `odb::MAX_OBJECT`, a delta chain past `odb::MAX_DELTA_CHAIN`, trees nested past
//! `odb::MAX_TREE_DEPTH`, a quoted path in `objects/info/alternates`. A SHA-256 or reftable
//! repository never gets here: its snapshot is already unreadable and progress walks the
//! tree. Grafts (`info/grafts`) and a shallow history change parents only, which a diff of two
//! given commits never reads: they need no fallback.
//!
//! So an edit reverted within the loop, a `touch`, a `chmod 600` do not count; a `chmod +x`
//! does, as for git.
//!
//! # Outside git
//!
//! When the project is not in a git work tree, or the reader cannot read its repository
//! (see [`crate::git::snapshot`]), a walk of the project (hidden directories, `target/` and
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

#[cfg(test)]
pub(crate) use crate::git::git_in;
use crate::git::{Checkout, GitError};
/// Files at most this large get a content hash in their fingerprint.
pub const HASH_FILE_MAX: u64 = 256 * 1024;
/// Bytes hashed per snapshot at most; past it fingerprints use stat data only.
pub const HASH_BUDGET: u64 = 64 * 1024 * 1024;
/// Most files the non-git walk records one by one (≈ 100 bytes each).
pub const MAX_WALK_FILES: usize = 250_000;
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

#[derive(Debug, Clone)]
struct GitState {
    layout: crate::git::snapshot::Layout,
    snap: crate::git::snapshot::Snapshot,
    taken: SystemTime,
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
    /// Snapshots `project`: its repository read in process inside a work tree (no git
    /// child), by a walk otherwise. Never fails.
    #[must_use]
    pub fn capture(project: &Path) -> State {
        match crate::git::snapshot::layout(project).and_then(|l| git_state(l, None)) {
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

    /// How many paths it holds (git: the paths git would report; walk: files recorded).
    #[must_use]
    pub fn len(&self) -> usize {
        match &self.0 {
            Inner::Git(g) => g.snap.dirty.len(),
            Inner::Walk(w) => w.files.as_ref().map_or(0, PathTable::len),
        }
    }

    /// Whether it holds no path.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn git_state(
    layout: crate::git::snapshot::Layout,
    prev: Option<&GitState>,
) -> Result<GitState, crate::git::snapshot::Unreadable> {
    let taken = stamp_clock();
    let snap = crate::git::snapshot::take(&layout, prev.map(|p| &p.snap))?;
    Ok(GitState {
        layout,
        snap,
        taken,
    })
}

fn hex(oid: Option<[u8; 20]>) -> Option<String> {
    oid.map(|o| o.iter().map(|b| format!("{b:02x}")).collect())
}

/// A git command that reads trees only (no work tree, so no filter can run): hardened as
/// every git hank runs, without the filter listing.
fn trees(project: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    Checkout::at(project).git().read_unfiltered(args)
}

/// Files of the commits between two HEADs (project-relative, `.hank/` excluded): the trees
/// diffed in process ([`crate::git::odb::changed_files_within`]); git's answer
/// ([`committed_by_git`]) whenever the reader says [`crate::git::snapshot::Unreadable`]. A
/// diff past [`crate::git::odb::LIMITS`] (a "tree bomb" the agent committed) is cut there:
/// git, which would take as long and as much memory, is not asked.
fn committed(
    project: &Path,
    layout: &crate::git::snapshot::Layout,
    before: Option<[u8; 20]>,
    after: Option<[u8; 20]>,
) -> Vec<String> {
    match crate::git::odb::changed_files_within(layout, before, after, crate::git::odb::LIMITS) {
        Ok(c) => c.paths,
        Err(_) => committed_by_git(project, hex(before).as_deref(), hex(after).as_deref()),
    }
}

/// `committed` by a git child (its fallback; `benches/bench_committed.rs` compares the two):
/// `git diff --name-only` between the two commits (hex ids), or
/// `git ls-tree -r` of the one there is.
pub fn committed_by_git(project: &Path, before: Option<&str>, after: Option<&str>) -> Vec<String> {
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
            trees(project, &args)
        }
        // The first commit (or HEAD made unborn): every file of the one tree there is.
        (None, Some(c)) | (Some(c), None) => {
            trees(project, &["ls-tree", "-r", "--name-only", "-z", c])
        }
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
/// baseline takes one in-process snapshot now (and one `git diff` only when HEAD moved); if
/// the repository cannot be read now, files modified since the baseline's time answer.
#[must_use]
pub fn changes_since(project: &Path, base: &State) -> Changes {
    match &base.0 {
        Inner::Git(b) => match git_state(b.layout.clone(), Some(b)) {
            Ok(now) => {
                let mut paths = b.snap.index.changed(&now.snap.index);
                paths.extend(b.snap.dirty.changed(&now.snap.dirty));
                if now.snap.head != b.snap.head {
                    paths.extend(committed(project, &b.layout, b.snap.head, now.snap.head));
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
    use crate::git::{GIT_TIMEOUT, filter_driver, filter_overrides, git_in, submodule_configs};

    /// The reading git of the door ([`crate::git::Git::read`]) in `dir`.
    fn git(dir: &Path, args: &[&str], timeout: Duration) -> Result<Vec<u8>, GitError> {
        Checkout::at(dir).git().timeout(timeout).read(args)
    }

    #[test]
    fn committed_files_come_from_the_object_reader_and_from_git_when_it_cannot() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        git_in(d, &["init", "-q"]);
        std::fs::write(d.join("f1"), "1").unwrap();
        git_in(d, &["add", "-A"]);
        git_in(d, &["commit", "-q", "-m", "1"]);
        let lay = crate::git::snapshot::layout(d).unwrap();
        let head = || {
            crate::git::odb::parse_hex(&String::from_utf8_lossy(
                &trees(d, &["rev-parse", "HEAD"]).unwrap(),
            ))
        };
        let a = head();
        std::fs::create_dir_all(d.join(".hank")).unwrap();
        std::fs::write(d.join(".hank/x"), "x").unwrap();
        std::fs::write(d.join("f2"), "2").unwrap();
        git_in(d, &["add", "-A"]);
        git_in(d, &["commit", "-q", "-m", "2"]);
        let b = head();
        assert_eq!(committed(d, &lay, a, b), vec!["f2"]);
        assert_eq!(committed(d, &lay, None, b), vec![".hank/x", "f1", "f2"]);
        // Replaced objects: the reader refuses, git answers (here: nothing changed, the
        // replacement makes b read as a).
        let (ha, hb) = (hex(a).unwrap(), hex(b).unwrap());
        git_in(d, &["replace", &hb, &ha]);
        assert!(crate::git::odb::changed_files(&lay, a, b).is_err());
        assert_eq!(committed(d, &lay, a, b), Vec::<String>::new());
        assert_eq!(
            committed_by_git(d, Some(&ha), Some(&hb)),
            Vec::<String>::new()
        );
    }

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
        assert_eq!(
            nul_separated(b"a\0b c\0\0").collect::<Vec<_>>(),
            vec!["a", "b c"]
        );
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
        assert_eq!(submodule_configs(&Checkout::at(&top)), vec![config.clone()]);
        std::thread::sleep(Duration::from_millis(1100));
        let _ = std::fs::write(top.join("sub/a.txt"), "a\n");
        let out = git(&top, &STATUS_ARGS, GIT_TIMEOUT);
        assert!(out.is_ok(), "{out:?}");
        assert!(!marker.exists(), "the submodule's filter ran");
        // The same status without the overrides runs it: the attack is real.
        let _ = Checkout::at(&top).git().read_unfiltered(&STATUS_ARGS);
        assert!(marker.exists(), "the check above proves nothing");
    }

    /// Runs the shell command `script` as a git alias (through [`git`]) in `dir`.
    fn git_alias(dir: &Path, script: &str, timeout: Duration) -> Result<Vec<u8>, GitError> {
        let alias = format!("alias.hank-test=!{script}");
        git(dir, &["-c", &alias, "hank-test"], timeout)
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
            Checkout::at(dir.path())
                .git()
                .ceiling(dir.path())
                .read(&["rev-parse", "--show-prefix"]),
            Err(GitError::Failed(_))
        ));
    }
}
