//! What git would report for a work tree, read in process: no git child, no program the
//! repository configures (filters, fsmonitor, hooks) ever runs.
//!
//! # Design: hank's own stat snapshot keyed on the index, not gix
//!
//! Progress needs *what changed between two moments*, not a full `git status`: a
//! [`Snapshot`] records HEAD's commit id, every index entry (a key of its mode, object id,
//! stage and flags) and every path git would show in the work-tree column or as untracked
//! (a key of what is on disk). Two snapshots differ on a path when its index entry, its work
//! tree state or its presence changed, which is the change kind set of `git status
//! --porcelain` (tracked edits, deletions, renames, type changes, the exec bit, new untracked
//! files that no rule ignores, the index, submodules and nested repositories).
//!
//! It reads what git itself reads: `.git/index` (versions 2–4, [`super::index`]), `HEAD`
//! and the refs (loose and `packed-refs`), the `.gitignore` of every directory walked,
//! `info/exclude` and `core.excludesFile` ([`super::ignore`]), and of the configuration only
//! `core.excludesFile`, `core.autocrlf`, `core.fileMode` and the extensions (system, global,
//! repository and `include.path` files). A tracked file is clean when its stat data equals the
//! index's (and is not racily clean: modified at or after the index was written); otherwise
//! its content is hashed as a blob (SHA-1) and compared with the index's id, as git does.
//! Where the content cannot be judged without running something — a path with a `filter`,
//! `text`, `eol`, `crlf`, `ident` or `working-tree-encoding` attribute, or `core.autocrlf` on —
//! the file counts as changed when its stat data changed (the documented rule).
//!
//! gix (gitoxide) was the alternative: it is not in the vetted crate list
//! (`crates.md`), its `status` feature brings ~100 crates (minutes of build on the shared
//! 2-core machine per profile, and a larger binary), and it still has to be told to switch
//! every driver program off. This reader is two small files plus `sha1`; at 100,000 files it
//! costs less than one `git status` of the same tree (`PERFORMANCE.md`). What it cannot
//! read — a split or sparse index, a SHA-256 or reftable repository, `core.worktree` — is an
//! error, and progress falls back to its walk of modification times.
//!
//! A fleet task worktree is read through the git directory hank pinned for it
//! ([`super::TaskWorktree::pin`]: the agent's own repository, `super::agent_repo`), never
//! through the worktree's `.git` file or a `commondir`.

use std::ffi::OsStr;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha1::{Digest, Sha1};

use super::ignore::{self, List};
use super::index;

/// Why a repository could not be read in process (the caller falls back to its walk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable(pub String);

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn no<T>(why: impl Into<String>) -> Result<T, Unreadable> {
    Err(Unreadable(why.into()))
}

/// Paths with a key each, sorted by name, stored compactly (one string for all names).
#[derive(Debug, Clone, Default)]
pub struct Table {
    names: String,
    rows: Vec<(u32, u32, u64)>,
}

impl Table {
    fn push(&mut self, name: &str, key: u64) {
        let start = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push_str(name);
        self.rows
            .push((start, u32::try_from(name.len()).unwrap_or(0), key));
    }

    fn name(&self, row: &(u32, u32, u64)) -> &str {
        let (s, l) = (row.0 as usize, row.1 as usize);
        self.names.get(s..s + l).unwrap_or("")
    }

    /// Sorts by name and merges the keys of a name given twice.
    fn finish(&mut self) {
        let mut rows = std::mem::take(&mut self.rows);
        rows.sort_by(|a, b| self.name(a).cmp(self.name(b)));
        let mut out: Vec<(u32, u32, u64)> = Vec::with_capacity(rows.len());
        for r in rows {
            match out.last_mut() {
                Some(last) if self.name(last) == self.name(&r) => {
                    last.2 = last.2.rotate_left(7) ^ r.2;
                }
                _ => out.push(r),
            }
        }
        self.rows = out;
    }

    /// The key of `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<u64> {
        self.rows
            .binary_search_by(|r| self.name(r).cmp(name))
            .ok()
            .and_then(|i| self.rows.get(i))
            .map(|r| r.2)
    }

    /// The rows whose names start with `dir` (`""` or ending in `/`).
    fn range_under(&self, dir: &str) -> (usize, usize) {
        let lo = self.rows.partition_point(|r| self.name(r) < dir);
        let hi = lo
            + self.rows[lo..].partition_point(|r| self.name(r).starts_with(dir) || dir.is_empty());
        (lo, hi)
    }

    /// [`Table::get`] among the rows of `range` ([`Table::range_under`]).
    fn get_in(&self, range: (usize, usize), name: &str) -> Option<u64> {
        let rows = self.rows.get(range.0..range.1)?;
        rows.binary_search_by(|r| self.name(r).cmp(name))
            .ok()
            .and_then(|i| rows.get(i))
            .map(|r| r.2)
    }

    /// Whether some name starts with `dir` (which ends in `/`).
    fn has_under(&self, dir: &str) -> bool {
        let i = self.rows.partition_point(|r| self.name(r) < dir);
        self.rows
            .get(i)
            .is_some_and(|r| self.name(r).starts_with(dir))
    }

    /// Every name with its key, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.rows.iter().map(|r| (self.name(r), r.2))
    }

    /// How many names it holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether it holds none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The names whose key differs between the two tables or that only one holds (merge of
    /// two sorted lists).
    #[must_use]
    pub fn changed(&self, later: &Table) -> Vec<String> {
        let (mut a, mut b) = (self.iter().peekable(), later.iter().peekable());
        let mut out = Vec::new();
        loop {
            match (a.peek(), b.peek()) {
                (None, None) => return out,
                (Some((n, _)), None) => {
                    out.push((*n).to_string());
                    a.next();
                }
                (None, Some((n, _))) => {
                    out.push((*n).to_string());
                    b.next();
                }
                (Some((na, ka)), Some((nb, kb))) => match na.cmp(nb) {
                    std::cmp::Ordering::Less => {
                        out.push((*na).to_string());
                        a.next();
                    }
                    std::cmp::Ordering::Greater => {
                        out.push((*nb).to_string());
                        b.next();
                    }
                    std::cmp::Ordering::Equal => {
                        if ka != kb {
                            out.push((*na).to_string());
                        }
                        a.next();
                        b.next();
                    }
                },
            }
        }
    }
}

/// The repository a project is in, as found from files only.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The top of the work tree.
    pub top: PathBuf,
    /// The git directory of this work tree (a linked worktree's own one).
    pub git_dir: PathBuf,
    /// The common git directory (objects, refs, config).
    pub common: PathBuf,
    /// The project's place in the work tree: `""` or `dir/sub/`.
    pub prefix: String,
}

/// Whether `dir` looks like a git directory (git's `is_git_directory`: `HEAD`, `objects/`,
/// `refs/`, the last two possibly in the common directory).
fn is_git_dir(dir: &Path) -> bool {
    if !dir.join("HEAD").is_file() {
        return false;
    }
    let common = common_of(dir);
    common.join("objects").is_dir() && common.join("refs").is_dir()
}

pub(super) fn common_of(git_dir: &Path) -> PathBuf {
    match read_text(&git_dir.join("commondir")) {
        Some(c) => {
            let c = c.trim_end_matches(['\n', '\r']);
            let p = Path::new(c);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                git_dir.join(p)
            }
        }
        None => git_dir.to_path_buf(),
    }
}

/// The git directory a `.git` entry of `dir` names: the directory itself, or the target of a
/// `gitdir: …` file. `None` when there is none or it is not a git directory.
pub(super) fn dot_git(dir: &Path) -> Option<PathBuf> {
    let dot = dir.join(".git");
    let meta = std::fs::symlink_metadata(&dot).ok()?;
    let git_dir = if meta.is_dir() {
        dot
    } else if meta.is_file() && meta.len() < 4096 {
        let text = read_text(&dot)?;
        let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        let p = Path::new(target);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            dir.join(p)
        }
    } else {
        return None;
    };
    is_git_dir(&git_dir).then_some(git_dir)
}

/// Finds the repository `project` is in: a work tree hank pinned (the fleet's task
/// worktrees), else the nearest `.git` above it.
///
/// # Errors
/// No repository, or one this reader does not handle (a bare one).
pub fn layout(project: &Path) -> Result<Layout, Unreadable> {
    layout_of(&super::Checkout::at(project))
}

/// [`layout`] of a handle: a task's worktree (the handle's, else this worker's task) is read
/// through the git dirs hank recorded at its pin ([`super::Checkout::reader_dirs`]).
///
/// # Errors
/// As [`layout`].
pub fn layout_of(at: &super::Checkout) -> Result<Layout, Unreadable> {
    let project = at.dir();
    let task = match at.task() {
        Some(t) => Some(t.checkout()),
        None => super::TaskWorktree::of_process().map(super::TaskWorktree::checkout),
    };
    let project = std::fs::canonicalize(project)
        .map_err(|e| Unreadable(format!("{}: {e}", project.display())))?;
    // A pinned work tree's git dir and common dir are what hank recorded (no `commondir`
    // read); any other's are found from its `.git`.
    let found = project.ancestors().find_map(|d| {
        task.as_ref()
            .filter(|t| t.task().is_some_and(|t| t.names(d)))
            .and_then(super::Checkout::reader_dirs)
            .map(|(g, c)| (d.to_path_buf(), g, Some(c)))
            .or_else(|| dot_git(d).map(|g| (d.to_path_buf(), g, None)))
    });
    let Some((top, git_dir, pinned_common)) = found else {
        return no("not inside a git work tree");
    };
    let rel = project.strip_prefix(&top).unwrap_or(Path::new(""));
    let mut prefix = String::new();
    for c in rel.components() {
        let Some(c) = c.as_os_str().to_str() else {
            return no("a project path that is not UTF-8");
        };
        if c == ".git" {
            return no("the project is inside a .git directory");
        }
        prefix.push_str(c);
        prefix.push('/');
    }
    let common = pinned_common.unwrap_or_else(|| common_of(&git_dir));
    Ok(Layout {
        top,
        git_dir,
        common,
        prefix,
    })
}

// ---------------------------------------------------------------------------------------------
// Configuration (the few keys this reader needs)

#[derive(Debug, Clone, Default)]
struct Config {
    excludes_file: Option<PathBuf>,
    /// `core.autocrlf` true or input: every file's content passes a conversion.
    autocrlf: bool,
    /// `core.fileMode` (default true): the exec bit counts.
    file_mode: bool,
    worktree_config: bool,
    /// `core.worktree`, resolved against the git directory.
    worktree: Option<PathBuf>,
    unsupported: Option<String>,
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn xdg_config() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|x| !x.is_empty())
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(".config")))
}

fn expand_path(value: &str, base: &Path) -> PathBuf {
    if let Some(rest) = value.strip_prefix("~/")
        && let Some(h) = home()
    {
        return h.join(rest);
    }
    let p = Path::new(value);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

fn truthy(v: &str) -> bool {
    matches!(
        v.to_ascii_lowercase().as_str(),
        "true" | "yes" | "on" | "1" | ""
    )
}

impl Config {
    /// Reads git's configuration files in git's order (system, global, repository).
    fn read(layout: &Layout) -> Config {
        let mut c = Config {
            file_mode: true,
            ..Config::default()
        };
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        if !env("GIT_CONFIG_NOSYSTEM").is_some_and(|v| truthy(&v.to_string_lossy())) {
            let system = env("GIT_CONFIG_SYSTEM")
                .map_or_else(|| PathBuf::from("/etc/gitconfig"), PathBuf::from);
            c.file(&system, 0);
        }
        if let Some(g) = env("GIT_CONFIG_GLOBAL") {
            c.file(Path::new(&g), 0);
        } else {
            if let Some(x) = xdg_config() {
                c.file(&x.join("git/config"), 0);
            }
            if let Some(h) = home() {
                c.file(&h.join(".gitconfig"), 0);
            }
        }
        c.file(&layout.common.join("config"), 0);
        if c.worktree_config {
            c.file(&layout.git_dir.join("config.worktree"), 0);
        }
        c
    }

    fn file(&mut self, path: &Path, depth: u8) {
        let Some(text) = read_text(path) else {
            return;
        };
        let base = path.parent().unwrap_or(Path::new("/")).to_path_buf();
        let mut section = String::new();
        for raw in text.lines() {
            let mut line = raw.trim();
            if line.starts_with('[') {
                let Some(end) = line.find(']') else { continue };
                let head = &line[1..end];
                section = match head.split_once(char::is_whitespace) {
                    Some((s, sub)) => format!(
                        "{}.{}",
                        s.to_ascii_lowercase(),
                        sub.trim().trim_matches('"')
                    ),
                    None => head.to_ascii_lowercase(),
                };
                line = line[end + 1..].trim();
                if line.is_empty() {
                    continue;
                }
            }
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let (key, value) = match line.split_once('=') {
                Some((k, v)) => (k.trim().to_ascii_lowercase(), config_value(v)),
                None => (line.to_ascii_lowercase(), String::new()),
            };
            self.set(&section, &key, &value, &base, depth);
        }
    }

    fn set(&mut self, section: &str, key: &str, value: &str, base: &Path, depth: u8) {
        match (section, key) {
            ("core", "excludesfile") => self.excludes_file = Some(expand_path(value, base)),
            ("core", "autocrlf") => {
                self.autocrlf = value.eq_ignore_ascii_case("input") || truthy(value);
            }
            ("core", "filemode") => self.file_mode = truthy(value),
            ("core", "worktree") => self.worktree = Some(PathBuf::from(value)),
            ("core", "bare") if truthy(value) => {
                self.unsupported = Some("a bare repository".into());
            }
            ("extensions", "objectformat") if !value.eq_ignore_ascii_case("sha1") => {
                self.unsupported = Some(format!("object format {value}"));
            }
            ("extensions", "refstorage") if !value.eq_ignore_ascii_case("files") => {
                self.unsupported = Some(format!("ref storage {value}"));
            }
            ("extensions", "worktreeconfig") => self.worktree_config = truthy(value),
            ("include", "path") if depth < 8 => {
                let p = expand_path(value, base);
                self.file(&p, depth + 1);
            }
            _ => {}
        }
    }
}

/// A configuration value: quotes removed, an unquoted comment cut, `\\` `\"` unescaped.
fn config_value(raw: &str) -> String {
    let mut out = String::new();
    let (mut quoted, mut chars) = (false, raw.trim().chars());
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => {}
            },
            '#' | ';' if !quoted => break,
            _ => out.push(c),
        }
    }
    out.trim_end().to_string()
}

// ---------------------------------------------------------------------------------------------
// HEAD

/// HEAD's commit id; `None` on an unborn branch.
fn head(layout: &Layout) -> Result<Option<[u8; 20]>, Unreadable> {
    let text = read_text(&layout.git_dir.join("HEAD"))
        .ok_or_else(|| Unreadable("HEAD cannot be read as a regular file".into()))?;
    let mut target = text.trim().to_string();
    for _ in 0..5 {
        let Some(name) = target.strip_prefix("ref:").map(str::trim) else {
            return super::odb::parse_hex(&target)
                .map(Some)
                .ok_or_else(|| Unreadable("HEAD is neither a ref nor an id".into()));
        };
        if name.contains("..") || !name.starts_with("refs/") {
            return no(format!("HEAD names {name}"));
        }
        let name = name.to_string();
        // Per-worktree refs live in the worktree's git directory, the rest in the common one.
        let loose = [layout.git_dir.join(&name), layout.common.join(&name)]
            .into_iter()
            .find_map(|p| read_text(&p));
        match loose {
            Some(t) => target = t.trim().to_string(),
            None => return Ok(packed_ref(&layout.common, &name)),
        }
    }
    no("a chain of symbolic refs")
}

fn packed_ref(common: &Path, name: &str) -> Option<[u8; 20]> {
    let text = read_capped(&common.join("packed-refs"), 256 * 1024 * 1024)
        .map(|b| String::from_utf8_lossy(&b).into_owned())?;
    text.lines().find_map(|l| {
        let (oid, r) = l.split_once(' ')?;
        (r == name).then(|| super::odb::parse_hex(oid)).flatten()
    })
}

// ---------------------------------------------------------------------------------------------
// Content

/// The object id git gives `content` as a blob (SHA-1 of `blob LEN\0CONTENT`).
fn blob_id_of(content: &[u8]) -> [u8; 20] {
    let mut h = Sha1::new();
    h.update(format!("blob {}\0", content.len()).as_bytes());
    h.update(content);
    h.finalize().into()
}

/// The blob id git gives `content`, in hex (tests).
#[must_use]
pub fn blob_hex(content: &[u8]) -> String {
    blob_id_of(content)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The blob id of the regular file at `path` (streamed; opened non-blocking, checked to
/// still be a regular file of `size` bytes).
fn file_blob_id(path: &Path, size: u64, buf: &mut [u8]) -> Option<[u8; 20]> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::File::options()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() != size {
        return None;
    }
    let mut h = Sha1::new();
    h.update(format!("blob {size}\0").as_bytes());
    let mut seen = 0u64;
    loop {
        let n = file.read(buf).ok()?;
        if n == 0 {
            break;
        }
        seen += n as u64;
        h.update(&buf[..n]);
    }
    (seen == size).then(|| h.finalize().into())
}

fn link_blob_id(path: &Path) -> Option<[u8; 20]> {
    std::fs::read_link(path)
        .ok()
        .map(|t| blob_id_of(t.as_os_str().as_bytes()))
}

const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;
const S_IFDIR: u32 = 0o040_000;
const GITLINK: u32 = 0o160_000;

/// Most bytes hashed per snapshot for untracked files (a tracked file whose stat data
/// changed is always hashed whole, as git does); past it their keys are stat data.
pub const UNTRACKED_HASH_BUDGET: u64 = 64 * 1024 * 1024;
/// Untracked files at most this large get a content key.
pub const UNTRACKED_HASH_MAX: u64 = 256 * 1024;
/// Submodules and nested repositories inside each other are followed this deep.
const MAX_NESTING: u8 = 3;
/// Directory depth of the walk (a bound on a planted tree).
const MAX_DEPTH: usize = 256;

/// The stat data this reader compares, from `std` or from an `fstatat`.
#[derive(Debug, Clone, Copy)]
struct St {
    mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
    uid: u32,
    gid: u32,
}

impl From<&std::fs::Metadata> for St {
    fn from(m: &std::fs::Metadata) -> St {
        St {
            mode: m.mode(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            ino: m.ino(),
            uid: m.uid(),
            gid: m.gid(),
        }
    }
}

impl From<&nix::sys::stat::FileStat> for St {
    fn from(s: &nix::sys::stat::FileStat) -> St {
        St {
            mode: s.st_mode,
            size: u64::try_from(s.st_size).unwrap_or(0),
            mtime: (s.st_mtime, s.st_mtime_nsec),
            ctime: (s.st_ctime, s.st_ctime_nsec),
            ino: s.st_ino,
            uid: s.st_uid,
            gid: s.st_gid,
        }
    }
}

/// `lstat` of the tracked files of one directory after another: the directory is opened once
/// (`O_PATH`) and each file is looked up in it (`fstatat`), so the kernel does not resolve the
/// whole path again for every file.
#[derive(Default)]
struct DirStat {
    dir: Vec<u8>,
    fd: Option<std::os::fd::OwnedFd>,
    opened: bool,
}

impl DirStat {
    fn lstat(&mut self, top: &Path, repo_path: &[u8]) -> Option<St> {
        use nix::fcntl::{AtFlags, OFlag, open};
        let (dir, name) = match repo_path.iter().rposition(|&b| b == b'/') {
            Some(i) => (&repo_path[..i], &repo_path[i + 1..]),
            None => (&b""[..], repo_path),
        };
        if !self.opened || dir != self.dir.as_slice() {
            self.opened = true;
            self.dir = dir.to_vec();
            let path = top.join(OsStr::from_bytes(dir));
            self.fd = open(
                &path,
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .ok();
        }
        let fd = self.fd.as_ref()?;
        nix::sys::stat::fstatat(fd, OsStr::from_bytes(name), AtFlags::AT_SYMLINK_NOFOLLOW)
            .ok()
            .map(|s| St::from(&s))
    }
}

/// A timestamp as nanoseconds since the epoch.
fn ns((secs, nsec): (i64, i64)) -> i128 {
    i128::from(secs) * 1_000_000_000 + i128::from(nsec)
}

fn key_of(parts: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// A key of a path's stat data (the rule where content cannot be judged).
fn stat_key(st: &St) -> u64 {
    key_of((st.mode, st.size, st.mtime, st.ctime, st.ino))
}

/// Whether `meta` equals the stat data the index cached (git's `ie_match_stat`, every field
/// it may compare; a stricter comparison only costs a content check).
fn same_stat(s: &index::Stat, st: &St) -> bool {
    let t = |x: i64| x as u32;
    s.mtime == (t(st.mtime.0), t(st.mtime.1))
        && s.ctime == (t(st.ctime.0), t(st.ctime.1))
        && s.ino == st.ino as u32
        && s.size == st.size as u32
        && s.uid == st.uid
        && s.gid == st.gid
}

// ---------------------------------------------------------------------------------------------
// Attributes that need a program or a conversion to judge content

/// The `.gitattributes` patterns whose files' content git converts (filter, text, eol, crlf,
/// ident, working-tree-encoding), as lists matched like ignore patterns.
#[derive(Debug, Default)]
struct Converted {
    lists: Vec<List>,
    /// A macro (`[attr]`) sets one of them: every file is judged by its stat data.
    all: bool,
}

const CONVERTING: [&str; 6] = [
    "filter",
    "text",
    "eol",
    "crlf",
    "ident",
    "working-tree-encoding",
];

impl Converted {
    fn add(&mut self, base: &[u8], text: &[u8]) {
        let mut risky = Vec::new();
        for line in text.split(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(line);
            let mut words = line.split_whitespace();
            let Some(pattern) = words.next() else {
                continue;
            };
            if pattern.starts_with('#') {
                continue;
            }
            let converts = words.any(|w| {
                let w = w.split('=').next().unwrap_or(w);
                !w.starts_with('-') && !w.starts_with('!') && CONVERTING.contains(&w)
            });
            if !converts {
                continue;
            }
            if pattern.starts_with("[attr]") {
                self.all = true;
            } else {
                risky.extend_from_slice(pattern.trim_start_matches('!').as_bytes());
                risky.push(b'\n');
            }
        }
        let list = List::parse(base, &risky);
        if !list.is_empty() {
            self.lists.push(list);
        }
    }

    fn converts(&self, path: &[u8]) -> bool {
        self.all
            || self
                .lists
                .iter()
                .any(|l| l.decide(path, false) == Some(true))
    }
}

// ---------------------------------------------------------------------------------------------
// The snapshot

/// What git would report for a project at one moment (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// HEAD's commit id, `None` before the first commit.
    pub head: Option<[u8; 20]>,
    /// Every index entry of the project: a key of its mode, id, stage and flags.
    pub index: Table,
    /// Every path whose work-tree state differs from the index, or untracked and not
    /// ignored (`dir/` for a nested repository): a key of what is there.
    pub dirty: Table,
    /// Per dirty path (same order): a key of its stat data and its content key (0: none),
    /// reused by the next snapshot when the stat data is the same and old enough.
    reuse: Vec<(u64, u64)>,
    /// Tracked files found clean by their content although their stat data differs from the
    /// index's (an index git has not refreshed: after a copy, a checkout elsewhere): a key of
    /// the stat data and the index's id. The next snapshot takes the same key as clean
    /// without hashing the file again (git would have refreshed the index instead; hank never
    /// writes it).
    verified: std::collections::HashMap<String, u64>,
}

/// Names never looked at: hank's own files at the top of the project.
fn hank_own(name: &str) -> bool {
    name == ".hankrc" || name == ".hank" || name.starts_with(".hank/")
}

/// A dirty path being recorded.
struct Row {
    name: String,
    key: u64,
    stat: u64,
    content: u64,
}

fn row(name: &str, key: u64) -> Row {
    Row {
        name: name.to_string(),
        key,
        stat: 0,
        content: 0,
    }
}

/// An index this large (bytes) has its stat calls spread over threads.
const PARALLEL_INDEX_BYTES: u64 = 256 * 1024;
/// Most threads doing stat calls.
const MAX_STAT_THREADS: usize = 4;
/// Index entries handed to a thread at a time.
const STAT_CHUNK: usize = 2048;

/// What the stat check of an index entry needs (shared by the threads).
struct Check<'a> {
    top: &'a Path,
    plen: usize,
    index_mtime: (u32, u32),
    file_mode: bool,
}

impl Check<'_> {
    /// `None` when `e`'s stat data shows the file as the index last saw it (the common
    /// case); else the entry, to judge by content.
    fn unsettled(&self, dirs: &mut DirStat, e: index::Entry) -> Option<Pending> {
        let mut seen = None;
        if e.stage == 0
            && !e.intent_to_add
            && e.mode & S_IFMT != GITLINK
            && let Some(m) = dirs.lstat(self.top, &e.path)
        {
            let kind = m.mode & S_IFMT;
            let exec_same = !self.file_mode
                || kind != S_IFREG
                || (m.mode & 0o100 != 0) == (e.mode & 0o100 != 0);
            if kind == e.mode & S_IFMT
                && exec_same
                && e.stat.mtime < self.index_mtime
                && same_stat(&e.stat, &m)
            {
                return None;
            }
            // Judged by content later: that judgement uses this stat, not a second one.
            seen = Some(m);
        }
        let name = String::from_utf8_lossy(e.path.get(self.plen..).unwrap_or(&[])).into_owned();
        Some(Pending {
            name,
            mode: e.mode,
            oid: e.oid,
            stage: e.stage,
            ita: e.intent_to_add,
            stat: e.stat,
            seen,
        })
    }
}

/// A tracked entry whose stat data did not settle it: judged once the index (and with it
/// every tracked `.gitattributes`) has been read.
struct Pending {
    name: String,
    mode: u32,
    oid: [u8; 20],
    stage: u8,
    ita: bool,
    stat: index::Stat,
    /// The file's `lstat` when the stat check made one (`None`: missing, or not checked).
    seen: Option<St>,
}

struct Reader<'a> {
    layout: &'a Layout,
    config: Config,
    converted: Converted,
    /// The index file's own mtime: entries modified at or after it are racily clean.
    index_mtime: (u32, u32),
    /// Repository-wide ignore lists: `info/exclude`, then `core.excludesFile`.
    global: Vec<List>,
    budget: u64,
    buf: Vec<u8>,
    depth: u8,
    prev: Option<&'a Snapshot>,
    /// Content keys are reused only for files modified before this (ns since the epoch).
    reuse_before: i128,
    index: Table,
    dirty: Vec<Row>,
    verified: std::collections::HashMap<String, u64>,
}

/// Takes a snapshot of the project at `layout` (`prev`: the last snapshot of the same
/// project, whose content keys are reused for files whose stat data did not change).
///
/// # Errors
/// The repository cannot be read by this reader (see the module doc).
pub fn take(layout: &Layout, prev: Option<&Snapshot>) -> Result<Snapshot, Unreadable> {
    take_at(layout, prev, 0)
}

fn take_at(layout: &Layout, prev: Option<&Snapshot>, depth: u8) -> Result<Snapshot, Unreadable> {
    let config = Config::read(layout);
    if let Some(why) = &config.unsupported {
        return no(why.clone());
    }
    // A submodule's git directory names its work tree (`core.worktree`): read only when that
    // is the work tree at hand.
    if let Some(wt) = &config.worktree {
        let wt = std::fs::canonicalize(layout.git_dir.join(wt)).ok();
        if wt.is_none() || wt != std::fs::canonicalize(&layout.top).ok() {
            return no("core.worktree names another work tree");
        }
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
    let r = Reader {
        layout,
        config,
        converted: Converted::default(),
        index_mtime: (0, 0),
        global: Vec::new(),
        budget: UNTRACKED_HASH_BUDGET,
        buf: vec![0u8; 64 * 1024],
        depth,
        prev,
        reuse_before: now - 2_000_000_000,
        index: Table::default(),
        dirty: Vec::new(),
        verified: std::collections::HashMap::new(),
    };
    r.snapshot()
}

impl Reader<'_> {
    fn snapshot(mut self) -> Result<Snapshot, Unreadable> {
        let head = head(self.layout)?;
        if let Some(a) = read_small(&self.layout.git_dir.join("info/attributes")) {
            self.converted.add(b"", &a);
        }
        for f in [
            Some(self.layout.common.join("info/exclude")),
            self.config
                .excludes_file
                .clone()
                .or_else(|| xdg_config().map(|x| x.join("git/ignore"))),
        ]
        .into_iter()
        .flatten()
        {
            if let Some(text) = read_small(&f) {
                self.global.push(List::parse(b"", &text));
            }
        }
        let pending = self.read_index()?;
        self.untracked();
        for p in pending {
            self.judge(p);
        }
        self.index.finish();
        let mut rows = std::mem::take(&mut self.dirty);
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows.dedup_by(|b, a| {
            if a.name == b.name {
                a.key = a.key.rotate_left(7) ^ b.key;
                true
            } else {
                false
            }
        });
        let mut dirty = Table::default();
        let mut reuse = Vec::with_capacity(rows.len());
        for r in rows {
            dirty.push(&r.name, r.key);
            reuse.push((r.stat, r.content));
        }
        Ok(Snapshot {
            head,
            index: self.index,
            dirty,
            reuse,
            verified: self.verified,
        })
    }

    /// Reads the index: every entry of the project into [`Reader::index`], and the ones whose
    /// stat data does not show them clean returned for [`Reader::judge`].
    fn read_index(&mut self) -> Result<Vec<Pending>, Unreadable> {
        let path = self.layout.git_dir.join("index");
        let file = match open_regular(&path) {
            Ok(f) => f,
            // No index yet (a fresh `git init`): nothing is tracked.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return no(format!("{}: {e}", path.display())),
        };
        let meta = file
            .metadata()
            .map_err(|e| Unreadable(format!("{}: {e}", path.display())))?;
        self.index_mtime = (meta.mtime() as u32, meta.mtime_nsec() as u32);
        let index_mtime = self.index_mtime;
        let file_mode = self.config.file_mode;
        let prefix = self.layout.prefix.clone();
        let top = self.layout.top.clone();
        let mut table = Table::default();
        let mut attributes: Vec<Vec<u8>> = Vec::new();
        let mut pending = Vec::new();
        let mut bad_name = false;
        // The stat calls, the bulk of a snapshot, run on up to [`MAX_STAT_THREADS`] threads
        // for a large index (as git's preloading does), in chunks handed over as they are read.
        let threads = if meta.len() < PARALLEL_INDEX_BYTES {
            1
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_STAT_THREADS))
        };
        let check = Check {
            top: &top,
            plen: prefix.len(),
            index_mtime,
            file_mode,
        };
        let read = std::thread::scope(|scope| {
            let (done_tx, done_rx) = std::sync::mpsc::channel::<Vec<Pending>>();
            let mut workers = Vec::new();
            for _ in 1..threads {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<index::Entry>>(2);
                let done = done_tx.clone();
                let check = &check;
                scope.spawn(move || {
                    let mut dirs = DirStat::default();
                    for chunk in rx {
                        let unsettled = chunk
                            .into_iter()
                            .filter_map(|e| check.unsettled(&mut dirs, e))
                            .collect();
                        if done.send(unsettled).is_err() {
                            return;
                        }
                    }
                });
                workers.push(tx);
            }
            drop(done_tx);
            let mut dirs = DirStat::default();
            let mut chunk = Vec::new();
            let mut turn = 0usize;
            let read = index::read(std::io::BufReader::with_capacity(256 * 1024, file), |e| {
                if e.path.ends_with(b".gitattributes")
                    && (e.path.starts_with(prefix.as_bytes())
                        || prefix.as_bytes().starts_with(dir_of(&e.path)))
                {
                    attributes.push(e.path.clone());
                }
                let Some(rel) = e.path.strip_prefix(prefix.as_bytes()) else {
                    return;
                };
                let Ok(name) = std::str::from_utf8(rel) else {
                    bad_name = true;
                    return;
                };
                if hank_own(name) {
                    return;
                }
                table.push(
                    name,
                    key_of((e.mode, e.oid, e.stage, e.intent_to_add, e.skip_worktree)),
                );
                if e.skip_worktree {
                    return;
                }
                if workers.is_empty() {
                    pending.extend(check.unsettled(&mut dirs, e));
                    return;
                }
                chunk.push(e);
                if chunk.len() >= STAT_CHUNK {
                    // Round robin over the workers and this thread.
                    let t = turn % threads;
                    turn += 1;
                    let c = std::mem::take(&mut chunk);
                    match workers.get(t) {
                        Some(w) => {
                            if let Err(back) = w.send(c) {
                                pending.extend(
                                    back.0
                                        .into_iter()
                                        .filter_map(|e| check.unsettled(&mut dirs, e)),
                                );
                            }
                        }
                        None => pending
                            .extend(c.into_iter().filter_map(|e| check.unsettled(&mut dirs, e))),
                    }
                }
            });
            pending.extend(
                std::mem::take(&mut chunk)
                    .into_iter()
                    .filter_map(|e| check.unsettled(&mut dirs, e)),
            );
            drop(workers);
            for unsettled in done_rx {
                pending.extend(unsettled);
            }
            read
        });
        read.map_err(|e| Unreadable(e.to_string()))?;
        if bad_name {
            return no("a tracked path that is not UTF-8");
        }
        for p in attributes {
            let file = self.layout.top.join(OsStr::from_bytes(&p));
            if let Some(text) = read_small(&file) {
                self.converted.add(dir_of(&p), &text);
            }
        }
        self.index = table;
        Ok(pending)
    }

    fn content_converted(&self, repo_path: &[u8]) -> bool {
        self.config.autocrlf || self.converted.converts(repo_path)
    }

    /// The work-tree state of a tracked path its stat data did not settle.
    fn judge(&mut self, t: Pending) {
        let name = t.name.as_str();
        let repo_path = format!("{}{name}", self.layout.prefix);
        let path = self.layout.top.join(&repo_path);
        let Some(st) = t
            .seen
            .or_else(|| std::fs::symlink_metadata(&path).ok().map(|m| St::from(&m)))
        else {
            // Deleted (a conflict's sides are in the index key).
            self.dirty.push(row(name, 1));
            return;
        };
        let kind = st.mode & S_IFMT;
        let skey = stat_key(&st);
        if t.stage != 0 {
            self.dirty.push(row(name, key_of((2u8, skey))));
            return;
        }
        if t.mode & S_IFMT == GITLINK {
            if kind == S_IFDIR
                && let Some(key) = self.submodule(&path, Some(t.oid))
            {
                self.dirty.push(row(name, key));
            }
            return;
        }
        if kind != t.mode & S_IFMT || (kind != S_IFREG && kind != S_IFLNK) {
            self.dirty.push(row(name, key_of((3u8, kind, skey))));
            return;
        }
        let exec = kind == S_IFREG && st.mode & 0o100 != 0;
        let exec_changed =
            self.config.file_mode && kind == S_IFREG && exec != (t.mode & 0o100 != 0);
        let stat_same = same_stat(&t.stat, &st);
        if self.content_converted(repo_path.as_bytes()) {
            // Content not judged without a filter: changed when the stat data changed.
            if !exec_changed && !t.ita && stat_same {
                return;
            }
            self.dirty.push(Row {
                stat: skey,
                ..row(name, key_of((4u8, exec, skey)))
            });
            return;
        }
        // Clean by its content at this very stat data before (and not modified just before).
        let verified = key_of((skey, t.oid));
        let settled = ns(st.mtime) < self.reuse_before;
        if !exec_changed
            && !t.ita
            && settled
            && self.prev.and_then(|p| p.verified.get(name)) == Some(&verified)
        {
            self.verified.insert(name.to_string(), verified);
            return;
        }
        let content = self.reused(name, skey, &st).or_else(|| {
            let id = if kind == S_IFLNK {
                link_blob_id(&path)
            } else {
                file_blob_id(&path, st.size, &mut self.buf)
            };
            id.map(|id| key_of((5u8, id)))
        });
        let Some(content) = content else {
            self.dirty.push(row(name, key_of((4u8, exec, skey))));
            return;
        };
        if !exec_changed && !t.ita && content == key_of((5u8, t.oid)) {
            if settled && !stat_same {
                self.verified.insert(name.to_string(), verified);
            }
            return;
        }
        self.dirty.push(Row {
            name: name.to_string(),
            key: key_of((6u8, exec, content)),
            stat: skey,
            content,
        });
    }

    /// The content key the previous snapshot computed for `name`, when its stat data is the
    /// same and the file was not modified just before that snapshot.
    fn reused(&self, name: &str, skey: u64, st: &St) -> Option<u64> {
        let prev = self.prev?;
        let i = prev
            .dirty
            .rows
            .binary_search_by(|r| prev.dirty.name(r).cmp(name))
            .ok()?;
        let (stat, content) = *prev.reuse.get(i)?;
        (content != 0 && stat == skey && ns(st.mtime) < self.reuse_before).then_some(content)
    }

    /// A submodule or nested repository at `dir`: `None` when it is clean against `recorded`
    /// (the commit the index records), else a key of its HEAD, index and dirty paths.
    fn submodule(&self, dir: &Path, recorded: Option<[u8; 20]>) -> Option<u64> {
        let Some(git_dir) = dot_git(dir) else {
            // Not checked out: git reports nothing for it.
            return None;
        };
        if self.depth >= MAX_NESTING {
            return Some(key_of(8u8));
        }
        let layout = Layout {
            top: dir.to_path_buf(),
            common: common_of(&git_dir),
            git_dir,
            prefix: String::new(),
        };
        let Ok(s) = take_at(&layout, None, self.depth + 1) else {
            return Some(key_of(7u8));
        };
        if recorded.is_some() && s.head == recorded && s.dirty.is_empty() {
            return None;
        }
        let mut h = DefaultHasher::new();
        (s.head, s.index.len()).hash(&mut h);
        for (n, k) in s.index.iter().chain(s.dirty.iter()) {
            (n, k).hash(&mut h);
        }
        Some(h.finish())
    }

    /// Untracked files that no rule ignores, below the project.
    fn untracked(&mut self) {
        let top = self.layout.top.clone();
        let prefix = self.layout.prefix.clone();
        // The ignore lists of the directories above the project.
        let mut lists: Vec<List> = Vec::new();
        let mut base = String::new();
        for part in prefix.split('/').filter(|s| !s.is_empty()) {
            let dir = top.join(&base);
            lists.push(
                read_small(&dir.join(".gitignore"))
                    .map(|t| List::parse(base.as_bytes(), &t))
                    .unwrap_or_default(),
            );
            if let Some(text) = read_small(&dir.join(".gitattributes")) {
                self.converted.add(base.as_bytes(), &text);
            }
            base.push_str(part);
            base.push('/');
            if ignore::ignored(
                &lists,
                &self.global,
                base.trim_end_matches('/').as_bytes(),
                true,
            ) {
                return;
            }
        }
        self.walk(&top.join(&prefix), &prefix, &mut lists, 0);
    }

    fn walk(&mut self, dir: &Path, rel: &str, lists: &mut Vec<List>, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let Ok(listing) = std::fs::read_dir(dir) else {
            return;
        };
        let pushed = match read_small(&dir.join(".gitignore")) {
            Some(text) => {
                lists.push(List::parse(rel.as_bytes(), &text));
                true
            }
            None => false,
        };
        if let Some(text) = read_small(&dir.join(".gitattributes")) {
            self.converted.add(rel.as_bytes(), &text);
        }
        let plen = self.layout.prefix.len();
        // The index rows below this directory: each lookup searches only them.
        let under = self.index.range_under(rel.get(plen..).unwrap_or(""));
        let mut subdirs: Vec<(PathBuf, String)> = Vec::new();
        let mut repo_rel = String::with_capacity(rel.len() + 64);
        for entry in listing.flatten() {
            let fname = entry.file_name();
            let Some(fname) = fname.to_str() else {
                continue;
            };
            if fname == ".git" {
                continue;
            }
            repo_rel.clear();
            repo_rel.push_str(rel);
            repo_rel.push_str(fname);
            let repo_rel = repo_rel.as_str();
            let name = repo_rel.get(plen..).unwrap_or("");
            if hank_own(name) {
                continue;
            }
            let Ok(ft) = entry.file_type() else { continue };
            let is_ignored =
                |is_dir: bool| ignore::ignored(lists, &self.global, repo_rel.as_bytes(), is_dir);
            if ft.is_dir() {
                // A submodule (or a file turned into a directory): the index side decides.
                if self.index.get_in(under, name).is_some() || is_ignored(true) {
                    continue;
                }
                let path = entry.path();
                if !self.index.has_under(&format!("{name}/")) && dot_git(&path).is_some() {
                    // A fleet task's other repository (its worktree inside the task's, named
                    // by the supervisor at the worker's start): not a file of this one.
                    if super::TaskWorktree::nested_of_process()
                        .iter()
                        .any(|(_, t)| t.names(&path))
                    {
                        continue;
                    }
                    // An untracked nested repository: one `dir/` entry, as git shows it.
                    let key = self.submodule(&path, None).unwrap_or(0);
                    self.dirty.push(row(&format!("{name}/"), key));
                    continue;
                }
                subdirs.push((path, format!("{repo_rel}/")));
                continue;
            }
            if !(ft.is_file() || ft.is_symlink())
                || self.index.get_in(under, name).is_some()
                || is_ignored(false)
            {
                continue;
            }
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let st = St::from(&meta);
            let skey = stat_key(&st);
            let content = match self.reused(name, skey, &st) {
                Some(c) => Some(c),
                None if ft.is_symlink() => link_blob_id(&path).map(|id| key_of((5u8, id))),
                None if meta.size() <= UNTRACKED_HASH_MAX && meta.size() <= self.budget => {
                    self.budget -= meta.size();
                    file_blob_id(&path, meta.size(), &mut self.buf).map(|id| key_of((5u8, id)))
                }
                None => None,
            };
            let exec = self.config.file_mode && meta.mode() & 0o100 != 0;
            self.dirty.push(match content {
                Some(c) => Row {
                    name: name.to_string(),
                    key: key_of((9u8, exec, c)),
                    stat: skey,
                    content: c,
                },
                None => row(name, key_of((4u8, exec, skey))),
            });
        }
        for (path, sub_rel) in subdirs {
            self.walk(&path, &sub_rel, lists, depth + 1);
        }
        if pushed {
            lists.pop();
        }
    }
}

/// The directory part of a repository path, with its `/` (`""` at the top).
fn dir_of(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[..=i],
        None => b"",
    }
}

/// Opens a file of the repository for reading: non-blocking, so a FIFO the agent planted at
/// `.git/config`, `HEAD` or the index cannot hang the loop, and refused unless it is a
/// regular file.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
    if file.metadata()?.is_file() {
        Ok(file)
    } else {
        Err(std::io::Error::other("not a regular file"))
    }
}

/// At most `cap` bytes of the regular file at `path` ([`open_regular`]).
fn read_capped(path: &Path, cap: u64) -> Option<Vec<u8>> {
    let file = open_regular(path).ok()?;
    let mut out = Vec::new();
    file.take(cap).read_to_end(&mut out).ok()?;
    Some(out)
}

/// A small file's bytes (`.gitignore`, excludes, attributes, configuration: at most 1 MiB).
fn read_small(path: &Path) -> Option<Vec<u8>> {
    read_capped(path, 1024 * 1024)
}

/// [`read_small`] as text.
fn read_text(path: &Path) -> Option<String> {
    read_small(path).map(|b| String::from_utf8_lossy(&b).into_owned())
}

#[cfg(test)]
mod tests;
