//! What changed in the project during one loop: files (from git, or from modification times
//! outside git) and fix_plan items newly checked.
//!
//! This module does I/O but spawns nothing on the normal path: HEAD is read from `.git/HEAD`
//! and the refs, the index is parsed in-process, and changed files are found by a stat
//! snapshot of the work tree (honoring `.gitignore` roughly) taken before and after the loop.
//! The comparison logic is kept in pure functions over the collected facts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use crate::policy::fixplan;

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

/// File fingerprint taken by the worktree walk: size, modification time, inode and mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: i128,
    ino: u64,
    mode: u32,
}

fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    Stamp {
        size: meta.len(),
        mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        ino: meta.ino(),
        mode: meta.mode(),
    }
}

/// One walked file: its stamp, and for a file modified just before the snapshot (its mtime
/// is within [`RACY_WINDOW_NS`] of the walk), a hash of its content — the kernel's coarse
/// timestamps could otherwise hide a same-size rewrite in the same clock tick ("racy git").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    stamp: Stamp,
    content: Option<u64>,
}

/// Files this recent (relative to the walk) get a content hash.
const RACY_WINDOW_NS: i128 = 2_000_000_000;
/// Racy files larger than this are not hashed (their stamp alone decides).
const RACY_HASH_MAX: u64 = 4 * 1024 * 1024;

fn content_hash(path: &Path) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let bytes = std::fs::read(path).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    Some(h.finish())
}

/// The state of the project when a loop started.
#[derive(Debug, Clone)]
pub struct Baseline {
    plan_text: String,
    kind: BaselineKind,
}

#[derive(Debug, Clone)]
enum BaselineKind {
    Git(Box<GitBaseline>),
    Mtime { files: Snapshot },
}

type Snapshot = BTreeMap<String, Seen>;
/// Index entries: repository-relative path → stage, mode and object id of each stage.
type IndexEntries = BTreeMap<String, Vec<u8>>;

/// Where a repository keeps its files.
#[derive(Debug, Clone)]
struct Repo {
    /// Repository top level (the work tree).
    top: PathBuf,
    /// The project's path inside the repository (`""` or `sub/dir/`).
    prefix: String,
    /// `.git` (or the worktree's private git dir).
    git_dir: PathBuf,
    /// Where branches, packed-refs and config live (differs from `git_dir` in worktrees).
    common_dir: PathBuf,
    /// Bytes of an object id (20 for SHA-1, 32 for SHA-256 repositories).
    oid_len: usize,
}

#[derive(Debug, Clone)]
struct IndexSnapshot {
    /// Stamp of `.git/index` itself: when unchanged, the entries are not re-read.
    stamp: Stamp,
    entries: IndexEntries,
}

#[derive(Debug, Clone)]
struct GitBaseline {
    repo: Repo,
    /// HEAD commit, `None` before the first commit or when it cannot be resolved.
    head: Option<String>,
    /// The index, `None` when absent or in a format not read here (split index).
    index: Option<IndexSnapshot>,
    /// Stat snapshot of the project's work tree (ignored paths skipped).
    files: Snapshot,
    /// Ignore rules from `.git/info/exclude` and the `.gitignore` files above the project.
    outer_rules: Vec<IgnoreRule>,
}

/// Finds the repository holding `project` by looking for `.git` in it and its parents.
fn discover(project: &Path) -> Option<Repo> {
    let project = project.canonicalize().ok()?;
    let mut dir = project.as_path();
    loop {
        if let Some(git_dir) = git_dir_of(&dir.join(".git")) {
            let rel = project.strip_prefix(dir).ok()?;
            let mut prefix = rel.to_string_lossy().replace('\\', "/");
            if !prefix.is_empty() {
                prefix.push('/');
            }
            let common_dir = match std::fs::read_to_string(git_dir.join("commondir")) {
                Ok(text) if !text.trim().is_empty() => git_dir.join(text.trim()),
                _ => git_dir.clone(),
            };
            let config = std::fs::read_to_string(common_dir.join("config")).unwrap_or_default();
            let oid_len = if config_says_sha256(&config) { 32 } else { 20 };
            return Some(Repo {
                top: dir.to_path_buf(),
                prefix,
                git_dir,
                common_dir,
                oid_len,
            });
        }
        dir = dir.parent()?;
    }
}

/// `objectformat = sha256` in the `[extensions]` section of a git config (pure).
fn config_says_sha256(config: &str) -> bool {
    config.lines().any(|l| {
        let l = l.trim().to_ascii_lowercase();
        l.strip_prefix("objectformat")
            .and_then(|r| r.trim_start().strip_prefix('='))
            .is_some_and(|v| v.trim() == "sha256")
    })
}

/// The git dir a `.git` entry stands for: the directory itself, or the `gitdir:` a `.git`
/// file points to (worktrees, submodules).
fn git_dir_of(dotgit: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(dotgit).ok()?;
    let dir = if meta.is_dir() {
        dotgit.to_path_buf()
    } else {
        let text = std::fs::read_to_string(dotgit).ok()?;
        let target = text.trim().strip_prefix("gitdir:")?.trim();
        let target = Path::new(target);
        if target.is_absolute() {
            target.to_path_buf()
        } else {
            dotgit.parent()?.join(target)
        }
    };
    dir.join("HEAD").is_file().then_some(dir)
}

/// HEAD's commit id, read from `HEAD`, loose refs and `packed-refs` (no process).
fn read_head(repo: &Repo) -> Option<String> {
    let head = std::fs::read_to_string(repo.git_dir.join("HEAD")).ok()?;
    let head = head.trim();
    match head.strip_prefix("ref:") {
        Some(name) => resolve_ref(repo, name.trim(), 0),
        None => (!head.is_empty()).then(|| head.to_string()),
    }
}

fn resolve_ref(repo: &Repo, name: &str, depth: u8) -> Option<String> {
    if depth > 5 || name.split('/').any(|part| part == "..") {
        return None;
    }
    for base in [&repo.git_dir, &repo.common_dir] {
        if let Ok(text) = std::fs::read_to_string(base.join(name)) {
            let text = text.trim();
            if let Some(next) = text.strip_prefix("ref:") {
                return resolve_ref(repo, next.trim(), depth + 1);
            }
            if !text.is_empty() {
                return Some(text.to_string());
            }
        }
    }
    let packed = std::fs::read_to_string(repo.common_dir.join("packed-refs")).ok()?;
    packed_ref(&packed, name)
}

/// The id of `name` in a `packed-refs` file (pure).
fn packed_ref(packed: &str, name: &str) -> Option<String> {
    packed
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('^'))
        .find_map(|l| {
            let (oid, r) = l.split_once(' ')?;
            (r.trim() == name).then(|| oid.to_string())
        })
}

fn read_index(repo: &Repo) -> Option<IndexSnapshot> {
    let path = repo.git_dir.join("index");
    let stamp = stamp_of(&std::fs::metadata(&path).ok()?);
    let data = std::fs::read(&path).ok()?;
    let entries = parse_index(&data, repo.oid_len)?;
    Some(IndexSnapshot { stamp, entries })
}

/// Git's offset varint (index v4 path compression): value and bytes used (pure).
fn varint(data: &[u8]) -> Option<(usize, usize)> {
    let mut used = 0;
    let mut c = *data.first()?;
    used += 1;
    let mut val = usize::from(c & 0x7f);
    while c & 0x80 != 0 {
        val = val.checked_add(1)?;
        c = *data.get(used)?;
        used += 1;
        val = val.checked_mul(128)?.checked_add(usize::from(c & 0x7f))?;
    }
    Some((val, used))
}

/// Parses a git index file, versions 2–4 (pure). `None` for anything else, a truncated file or
/// a split index (whose entries live in another file).
fn parse_index(data: &[u8], oid_len: usize) -> Option<IndexEntries> {
    let be32 = |at: usize| -> Option<u32> {
        let b = data.get(at..at.checked_add(4)?)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    if data.get(..4)? != b"DIRC" {
        return None;
    }
    let version = be32(4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = usize::try_from(be32(8)?).ok()?;
    let mut pos = 12usize;
    let mut entries = IndexEntries::new();
    let mut prev: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = pos;
        let mode = be32(start.checked_add(24)?)?;
        let oid_at = start.checked_add(40)?;
        let oid = data.get(oid_at..oid_at.checked_add(oid_len)?)?;
        let flags_at = oid_at + oid_len;
        let flags = data.get(flags_at..flags_at.checked_add(2)?)?;
        let flags = u16::from_be_bytes([flags[0], flags[1]]);
        let extended = flags & 0x4000 != 0;
        if extended && version < 3 {
            return None;
        }
        let stage = u8::try_from((flags >> 12) & 3).ok()?;
        let mut p = flags_at + 2 + if extended { 2 } else { 0 };
        let path = if version == 4 {
            let (strip, used) = varint(data.get(p..)?)?;
            p += used;
            let nul = data.get(p..)?.iter().position(|&b| b == 0)?;
            let keep = prev.len().checked_sub(strip)?;
            let mut full = prev[..keep].to_vec();
            full.extend_from_slice(&data[p..p + nul]);
            pos = p + nul + 1;
            full
        } else {
            let nul = data.get(p..)?.iter().position(|&b| b == 0)?;
            // Entries are NUL-padded (at least one NUL) to a multiple of 8 bytes.
            pos = start + ((p + nul - start + 8) & !7);
            data[p..p + nul].to_vec()
        };
        let value = entries
            .entry(String::from_utf8_lossy(&path).into_owned())
            .or_default();
        value.push(stage);
        value.extend_from_slice(&mode.to_be_bytes());
        value.extend_from_slice(oid);
        prev = path;
    }
    // Extensions until the trailing checksum; a split index ("link") is not read here.
    let body_end = data.len().checked_sub(oid_len)?;
    if pos > body_end {
        return None;
    }
    while pos.checked_add(8)? <= body_end {
        if data.get(pos..pos + 4)? == b"link" {
            return None;
        }
        let size = usize::try_from(be32(pos + 4)?).ok()?;
        pos = pos.checked_add(8)?.checked_add(size)?;
    }
    Some(entries)
}

/// Paths whose index entry appeared, disappeared or changed (pure).
fn diff_index(before: &IndexEntries, after: &IndexEntries) -> Vec<String> {
    let mut changed: Vec<String> = after
        .iter()
        .filter(|(p, v)| before.get(*p) != Some(*v))
        .map(|(p, _)| p.clone())
        .collect();
    changed.extend(before.keys().filter(|p| !after.contains_key(*p)).cloned());
    changed
}

/// One line of a `.gitignore` (or `info/exclude`), relative to the directory holding it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct IgnoreRule {
    /// Repository-relative directory of the file (`""` or `dir/`).
    base: String,
    pattern: String,
    negated: bool,
    dir_only: bool,
    /// Matches the whole path below `base` (the pattern had a `/` before its end), else
    /// the last path component only.
    anchored: bool,
}

/// Parses the lines of an ignore file (pure).
fn parse_ignore(text: &str, base: &str) -> Vec<IgnoreRule> {
    let mut rules = Vec::new();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        let line = if line.ends_with("\\ ") {
            line
        } else {
            line.trim_end()
        };
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (negated, line) = match line.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let (dir_only, line) = match line.strip_suffix('/') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let anchored = line.contains('/');
        let pattern = line.strip_prefix('/').unwrap_or(line);
        if pattern.is_empty() {
            continue;
        }
        rules.push(IgnoreRule {
            base: base.to_string(),
            pattern: pattern.to_string(),
            negated,
            dir_only,
            anchored,
        });
    }
    rules
}

/// Whether `path` (repository-relative) is ignored by `rules`; the last matching rule wins.
fn is_ignored<'a>(rules: impl Iterator<Item = &'a IgnoreRule>, path: &str, is_dir: bool) -> bool {
    let mut ignored = false;
    for rule in rules {
        if rule.dir_only && !is_dir {
            continue;
        }
        let Some(below) = path.strip_prefix(rule.base.as_str()) else {
            continue;
        };
        let subject = if rule.anchored {
            below
        } else {
            below.rsplit('/').next().unwrap_or(below)
        };
        let mut budget = 10_000u32;
        if glob(rule.pattern.as_bytes(), subject.as_bytes(), &mut budget) {
            ignored = !rule.negated;
        }
    }
    ignored
}

/// Gitignore-style wildcard match: `*` and `?` stop at `/`, `**` crosses it, `[a-z]`/`[!x]`
/// classes, `\` escapes. `budget` bounds the backtracking (pure).
fn glob(p: &[u8], s: &[u8], budget: &mut u32) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    match p.first() {
        None => s.is_empty(),
        Some(b'*') if p.get(1) == Some(&b'*') => {
            let rest = &p[2..];
            if let Some(after_slash) = rest.strip_prefix(b"/") {
                // `**/` matches zero or more whole directories.
                if glob(after_slash, s, budget) {
                    return true;
                }
                (0..s.len()).any(|i| s[i] == b'/' && glob(after_slash, &s[i + 1..], budget))
            } else {
                (0..=s.len()).any(|i| glob(rest, &s[i..], budget))
            }
        }
        Some(b'*') => {
            let rest = &p[1..];
            for i in 0..=s.len() {
                if glob(rest, &s[i..], budget) {
                    return true;
                }
                if i < s.len() && s[i] == b'/' {
                    break;
                }
            }
            false
        }
        Some(b'?') => s.first().is_some_and(|&c| c != b'/') && glob(&p[1..], &s[1..], budget),
        Some(b'[') => match (s.first(), class(&p[1..])) {
            (Some(&c), Some((matches, used))) if c != b'/' => {
                matches(c) && glob(&p[1 + used..], &s[1..], budget)
            }
            (Some(&c), None) => c == b'[' && glob(&p[1..], &s[1..], budget),
            _ => false,
        },
        Some(b'\\') if p.len() > 1 => s.first() == Some(&p[1]) && glob(&p[2..], &s[1..], budget),
        Some(&c) => s.first() == Some(&c) && glob(&p[1..], &s[1..], budget),
    }
}

/// A `[...]` class after its `[`: a matcher and the bytes used including `]` (pure).
fn class(p: &[u8]) -> Option<(impl Fn(u8) -> bool + '_, usize)> {
    let (negated, body_start) = match p.first() {
        Some(b'!' | b'^') => (true, 1),
        _ => (false, 0),
    };
    // A `]` right after the opening (or after `!`) is a literal.
    let close = p
        .iter()
        .enumerate()
        .skip(body_start + 1)
        .find(|(_, b)| **b == b']')
        .map(|(i, _)| i)?;
    let body = &p[body_start..close];
    let matcher = move |c: u8| {
        let mut hit = false;
        let mut i = 0;
        while i < body.len() {
            if i + 2 < body.len() && body[i + 1] == b'-' {
                hit |= body[i] <= c && c <= body[i + 2];
                i += 3;
            } else {
                hit |= body[i] == c;
                i += 1;
            }
        }
        hit != negated
    };
    Some((matcher, close + 1))
}

/// Directory names never walked outside git.
fn skip_dir(name: &str) -> bool {
    name.starts_with('.') || name == "target" || name == "node_modules"
}

/// Directory names treated as ignored inside git even without a `.gitignore` saying so.
const DEFAULT_IGNORED_DIRS: [&str; 2] = ["target", "node_modules"];

/// Most files recorded by the walk (a guard against walking a home directory).
const MAX_WALK_FILES: usize = 200_000;

/// How a walk decides what to skip.
struct WalkRules<'a> {
    /// `None` outside git (hidden dirs, `target`, `node_modules` skipped).
    git: Option<GitWalk<'a>>,
}

struct GitWalk<'a> {
    prefix: &'a str,
    tracked: Option<&'a IndexEntries>,
    rules: Vec<IgnoreRule>,
}

impl GitWalk<'_> {
    fn is_tracked(&self, repo_rel: &str) -> bool {
        self.tracked.is_some_and(|t| t.contains_key(repo_rel))
    }

    fn has_tracked_under(&self, repo_rel_dir: &str) -> bool {
        let dir = format!("{repo_rel_dir}/");
        self.tracked.is_some_and(|t| {
            t.range(dir.clone()..)
                .next()
                .is_some_and(|(k, _)| k.starts_with(&dir))
        })
    }

    fn skip_dir(&self, rel: &str, name: &str) -> bool {
        if name == ".git" || rel == ".hank" {
            return true;
        }
        let repo_rel = format!("{}{rel}", self.prefix);
        let ignored =
            DEFAULT_IGNORED_DIRS.contains(&name) || is_ignored(self.rules.iter(), &repo_rel, true);
        ignored && !self.has_tracked_under(&repo_rel)
    }

    fn skip_file(&self, rel: &str) -> bool {
        if rel == ".hankrc" {
            return true;
        }
        let repo_rel = format!("{}{rel}", self.prefix);
        is_ignored(self.rules.iter(), &repo_rel, false) && !self.is_tracked(&repo_rel)
    }
}

fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

/// Stats every file under `project` that the rules do not skip (symlinks are not followed).
fn walk(project: &Path, mut rules: WalkRules<'_>) -> Snapshot {
    let racy_after = now_ns() - RACY_WINDOW_NS;
    let mut files = Snapshot::new();
    let mut stack: Vec<(PathBuf, String)> = vec![(project.to_path_buf(), String::new())];
    let mut entries: Vec<std::fs::DirEntry> = Vec::new();
    while let Some((dir, rel)) = stack.pop() {
        let Ok(listing) = std::fs::read_dir(&dir) else {
            continue;
        };
        entries.clear();
        entries.extend(listing.flatten());
        if let Some(git) = rules.git.as_mut() {
            // A nested repository is not part of this one's work tree.
            if !rel.is_empty() && entries.iter().any(|e| e.file_name() == ".git") {
                continue;
            }
            if entries.iter().any(|e| e.file_name() == ".gitignore")
                && let Ok(text) = std::fs::read_to_string(dir.join(".gitignore"))
            {
                let base = if rel.is_empty() {
                    git.prefix.to_string()
                } else {
                    format!("{}{rel}/", git.prefix)
                };
                git.rules.extend(parse_ignore(&text, &base));
            }
        }
        for entry in &entries {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let rel_path = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            let Ok(ft) = entry.file_type() else {
                continue;
            };
            if ft.is_dir() {
                let skip = match &rules.git {
                    Some(git) => git.skip_dir(&rel_path, &name),
                    None => skip_dir(&name),
                };
                if !skip {
                    stack.push((entry.path(), rel_path));
                }
                continue;
            }
            if rules.git.as_ref().is_some_and(|g| g.skip_file(&rel_path)) {
                continue;
            }
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if files.len() >= MAX_WALK_FILES {
                return files;
            }
            let stamp = stamp_of(&meta);
            let content =
                (stamp.mtime_ns >= racy_after && meta.is_file() && stamp.size <= RACY_HASH_MAX)
                    .then(|| content_hash(&entry.path()))
                    .flatten();
            files.insert(rel_path, Seen { stamp, content });
        }
    }
    files
}

/// Paths that appeared, disappeared or changed between two snapshots. A file with the same
/// stamp whose content was hashed at the baseline (racy) is re-hashed.
fn diff_snapshots(project: &Path, before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut changed: Vec<String> = after
        .iter()
        .filter(|(p, now)| match before.get(*p) {
            None => true,
            Some(then) if then.stamp != now.stamp => true,
            Some(then) => then
                .content
                .is_some_and(|h| content_hash(&project.join(p.as_str())) != Some(h)),
        })
        .map(|(p, _)| p.clone())
        .collect();
    changed.extend(before.keys().filter(|p| !after.contains_key(*p)).cloned());
    changed
}

/// Ignore rules that apply above the project: `info/exclude` and the `.gitignore` of each
/// directory from the top level down to (not including) the project.
fn outer_rules(repo: &Repo) -> Vec<IgnoreRule> {
    let mut rules = std::fs::read_to_string(repo.common_dir.join("info/exclude"))
        .map(|t| parse_ignore(&t, ""))
        .unwrap_or_default();
    let mut base = String::new();
    let mut dir = repo.top.clone();
    let parts: Vec<&str> = repo.prefix.split('/').filter(|s| !s.is_empty()).collect();
    for part in parts {
        if let Ok(text) = std::fs::read_to_string(dir.join(".gitignore")) {
            rules.extend(parse_ignore(&text, &base));
        }
        dir.push(part);
        base.push_str(part);
        base.push('/');
    }
    rules
}

fn git_walk(project: &Path, g: &GitBaseline) -> Snapshot {
    walk(
        project,
        WalkRules {
            git: Some(GitWalk {
                prefix: &g.repo.prefix,
                tracked: g.index.as_ref().map(|i| &i.entries),
                rules: g.outer_rules.clone(),
            }),
        },
    )
}

fn git_baseline(project: &Path) -> Option<GitBaseline> {
    let repo = discover(project)?;
    let mut g = GitBaseline {
        head: read_head(&repo),
        index: read_index(&repo),
        outer_rules: outer_rules(&repo),
        repo,
        files: Snapshot::new(),
    };
    g.files = git_walk(project, &g);
    Some(g)
}

/// Runs git in `dir` with hank's fixed options; stdout on success. Only used when HEAD moved
/// and nothing on disk or in the index explains it (see [`measure`]).
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

fn nul_paths(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out)
        .split(['\0', '\n'])
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// Project-relative paths changed since the baseline.
fn git_changes(project: &Path, g: &GitBaseline) -> Vec<String> {
    let now = git_walk(project, g);
    let mut changed = diff_snapshots(project, &g.files, &now);
    if let (Some(before), IndexNow::Changed(snap)) =
        (&g.index, read_index_if_changed(&g.repo, g.index.as_ref()))
    {
        changed.extend(relative_to_project(
            diff_index(&before.entries, &snap.entries),
            &g.repo.prefix,
        ));
    }
    let head_now = read_head(&g.repo);
    if changed.is_empty()
        && head_now != g.head
        && let Some(head_now) = head_now
    {
        // HEAD moved and nothing on disk or in the index changed: the agent committed work
        // staged before the loop. Only git knows which files: ask it (rare path).
        let range = match &g.head {
            Some(before) => git(
                &g.repo.top,
                &[
                    "diff",
                    "--name-only",
                    "-z",
                    "--no-renames",
                    before,
                    &head_now,
                ],
            ),
            None => git(
                &g.repo.top,
                &["ls-tree", "-r", "--name-only", "-z", &head_now],
            ),
        };
        let paths = range.map(|o| nul_paths(&o)).unwrap_or_default();
        changed.extend(relative_to_project(paths, &g.repo.prefix));
    }
    changed
}

enum IndexNow {
    Same,
    Changed(IndexSnapshot),
    Unreadable,
}

/// Re-reads the index only when its own stamp changed.
fn read_index_if_changed(repo: &Repo, before: Option<&IndexSnapshot>) -> IndexNow {
    let path = repo.git_dir.join("index");
    let stamp = std::fs::metadata(&path).ok().map(|m| stamp_of(&m));
    match (before, stamp) {
        (Some(b), Some(s)) if b.stamp == s => IndexNow::Same,
        (_, Some(_)) => read_index(repo).map_or(IndexNow::Unreadable, IndexNow::Changed),
        (_, None) => IndexNow::Unreadable,
    }
}

/// Keeps paths under the project and makes them project-relative (pure).
fn relative_to_project(paths: Vec<String>, prefix: &str) -> Vec<String> {
    paths
        .into_iter()
        .filter_map(|p| p.strip_prefix(prefix).map(str::to_string))
        .collect()
}

/// Records the project state at the start of a loop. Never fails and spawns nothing: inside
/// a git work tree it reads HEAD (`.git/HEAD`, refs, packed-refs) and the index, and stats
/// the project's files, skipping `.git`, `.hank`, nested repositories and what `.gitignore`
/// (root, nested, `info/exclude`) ignores — plus `target/` and `node_modules/` — unless
/// tracked; elsewhere it stats every file, skipping hidden directories, `target` and
/// `node_modules`.
#[must_use]
pub fn baseline(project: &Path, plan_text: &str) -> Baseline {
    let kind = match git_baseline(project) {
        Some(g) => BaselineKind::Git(Box::new(g)),
        None => BaselineKind::Mtime {
            files: walk(project, WalkRules { git: None }),
        },
    };
    Baseline {
        plan_text: plan_text.to_string(),
        kind,
    }
}

/// What changed since `base`. A file counts when it appeared, disappeared, or its size,
/// mtime, inode or mode changed (content re-hashed for files touched just before the
/// baseline); in git, also when its index entry changed (staged, committed after an edit made
/// before the loop). A file already dirty at the baseline and untouched does not count. When
/// HEAD moved and none of this explains it, one `git diff` names the committed files — the
/// only case that spawns a process. Paths under `.hank/` and `.hankrc` never count; fix_plan
/// ticks come through [`Progress::plan_items_checked`].
#[must_use]
pub fn measure(project: &Path, base: &Baseline, plan_text_after: &str) -> Progress {
    let mut progress = match &base.kind {
        BaselineKind::Git(g) => Progress::from_paths(ProgressSource::Git, git_changes(project, g)),
        BaselineKind::Mtime { files } => {
            let now = walk(project, WalkRules { git: None });
            Progress::from_paths(ProgressSource::Mtime, diff_snapshots(project, files, &now))
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

    /// Builds a v2/v3 index entry the way git lays it out.
    fn index_entry(path: &str, mode: u32, oid: u8, stage: u16, v4_strip: Option<usize>) -> Vec<u8> {
        let mut e = vec![0u8; 24];
        e.extend_from_slice(&mode.to_be_bytes());
        e.extend_from_slice(&[0u8; 12]);
        e.extend_from_slice(&[oid; 20]);
        let len = u16::try_from(path.len()).unwrap().min(0xfff);
        e.extend_from_slice(&((stage << 12) | len).to_be_bytes());
        match v4_strip {
            Some(strip) => {
                assert!(strip < 128);
                e.push(u8::try_from(strip).unwrap());
                e.extend_from_slice(path.as_bytes());
                e.push(0);
            }
            None => {
                e.extend_from_slice(path.as_bytes());
                let padded = (e.len() + 8) & !7;
                e.resize(padded, 0);
            }
        }
        e
    }

    fn index_file(version: u32, entries: &[Vec<u8>], ext: &[u8]) -> Vec<u8> {
        let mut d = b"DIRC".to_vec();
        d.extend_from_slice(&version.to_be_bytes());
        d.extend_from_slice(&u32::try_from(entries.len()).unwrap().to_be_bytes());
        for e in entries {
            d.extend_from_slice(e);
        }
        d.extend_from_slice(ext);
        d.extend_from_slice(&[0xab; 20]);
        d
    }

    #[test]
    fn index_parsing() {
        let v2 = index_file(
            2,
            &[
                index_entry("a.rs", 0o100644, 1, 0, None),
                index_entry("src/lib.rs", 0o100755, 2, 0, None),
                index_entry("src/lib.rs", 0o100644, 3, 2, None),
            ],
            b"TREE\0\0\0\x02xy",
        );
        let e = parse_index(&v2, 20).unwrap();
        assert_eq!(e.keys().collect::<Vec<_>>(), vec!["a.rs", "src/lib.rs"]);
        assert_eq!(e["src/lib.rs"].len(), 2 * 25, "both stages kept");
        // v4: prefix compression against the previous path.
        let v4 = index_file(
            4,
            &[
                index_entry("src/a.rs", 0o100644, 1, 0, Some(0)),
                index_entry("b.rs", 0o100644, 2, 0, Some(4)),
                index_entry("tests/t.rs", 0o100644, 3, 0, Some(8)),
            ],
            b"",
        );
        let e = parse_index(&v4, 20).unwrap();
        assert_eq!(
            e.keys().collect::<Vec<_>>(),
            vec!["src/a.rs", "src/b.rs", "tests/t.rs"]
        );
        // Changed oid, new and removed paths.
        let other = index_file(
            2,
            &[
                index_entry("a.rs", 0o100644, 9, 0, None),
                index_entry("new.rs", 0o100644, 1, 0, None),
            ],
            b"",
        );
        let before = parse_index(&v2, 20).unwrap();
        let after = parse_index(&other, 20).unwrap();
        assert_eq!(
            diff_index(&before, &after),
            vec!["a.rs", "new.rs", "src/lib.rs"]
        );
        // Garbage, truncation, unknown versions and split indexes are refused, never a panic.
        let split = index_file(
            2,
            &[index_entry("a", 0o100644, 1, 0, None)],
            b"link\0\0\0\0",
        );
        for bad in [
            &b""[..],
            b"DIRC",
            b"DIRC\0\0\0\x05\0\0\0\0",
            &v2[..40],
            &v2[..v2.len() - 30],
            &split,
        ] {
            assert_eq!(parse_index(bad, 20), None, "{bad:?}");
        }
        for cut in 0..v4.len() {
            let _ = parse_index(&v4[..cut], 20);
        }
        assert_eq!(varint(&[0x81, 0x00]), Some((256, 2)));
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x80]), None);
    }

    #[test]
    fn real_index_matches_git() {
        let (home, dir) = repo();
        let d = dir.path();
        write(d, "staged.rs", "s");
        run_git(d, home.path(), &["add", "staged.rs"]);
        let repo = discover(d).unwrap();
        let idx = read_index(&repo).unwrap();
        assert_eq!(
            idx.entries.keys().collect::<Vec<_>>(),
            vec![
                ".hank/fix_plan.md",
                "README.md",
                "dirty.rs",
                "gone.rs",
                "old_name.rs",
                "src/lib.rs",
                "staged.rs"
            ]
        );
        // HEAD resolves through the loose ref, then through packed-refs.
        let head = read_head(&repo).unwrap();
        assert_eq!(head.len(), 40);
        run_git(d, home.path(), &["pack-refs", "--all"]);
        assert!(!d.join(".git/refs/heads/main").exists());
        assert_eq!(read_head(&repo), Some(head));
        // Index v4 written by git itself.
        run_git(d, home.path(), &["update-index", "--index-version", "4"]);
        assert_eq!(read_index(&repo).unwrap().entries, idx.entries);
    }

    #[test]
    fn packed_refs_and_config() {
        let packed = "# pack-refs with: peeled fully-peeled sorted\n\
            1111 refs/heads/dev\n2222 refs/heads/main\n^3333\n";
        assert_eq!(
            packed_ref(packed, "refs/heads/main").as_deref(),
            Some("2222")
        );
        assert_eq!(packed_ref(packed, "refs/heads/nope"), None);
        assert!(config_says_sha256(
            "[extensions]\n\tobjectFormat = sha256\n"
        ));
        assert!(!config_says_sha256("[core]\n\tbare = false\n"));
    }

    #[test]
    fn ignore_rules() {
        let rules = parse_ignore(
            "# comment\n\n*.log\n/build/\ndocs/gen/\n!keep.log\nsub/**/out\n\
             a?c.txt\n[abc]x.tmp\n**/cache\n",
            "",
        );
        let nested = parse_ignore("local.txt\n", "pkg/");
        let all: Vec<IgnoreRule> = rules.iter().chain(&nested).cloned().collect();
        // (path, is_dir, ignored)
        let cases: &[(&str, bool, bool)] = &[
            ("x.log", false, true),
            ("deep/er/x.log", false, true),
            ("keep.log", false, false),
            ("build", true, true),
            ("build", false, false),
            ("src/build", true, false),
            ("docs/gen", true, true),
            ("sub/out", false, true),
            ("sub/a/b/out", false, true),
            ("abc.txt", false, true),
            ("ac.txt", false, false),
            ("bx.tmp", false, true),
            ("dx.tmp", false, false),
            ("cache", true, true),
            ("a/b/cache", false, true),
            ("pkg/local.txt", false, true),
            ("local.txt", false, false),
            ("src/main.rs", false, false),
        ];
        for (path, is_dir, ignored) in cases {
            assert_eq!(is_ignored(all.iter(), path, *is_dir), *ignored, "{path}");
        }
        let mut budget = 10_000;
        assert!(!glob(b"*a*a*a*a*a*a*a*a*b", &[b'a'; 64], &mut budget));
        let mut budget = 100;
        assert!(glob(b"[!a-c]z", b"dz", &mut budget));
        let mut budget = 100;
        assert!(glob(b"[z", b"[z", &mut budget));
    }

    #[test]
    fn git_walk_honors_gitignore_and_tracked_files() {
        let (home, dir) = repo();
        let d = dir.path();
        write(d, ".gitignore", "*.log\nbuild/\n");
        write(d, "forced/kept.bin", "k");
        write(d, ".gitignore", "*.log\nbuild/\nforced/\n");
        run_git(
            d,
            home.path(),
            &["add", "-f", ".gitignore", "forced/kept.bin"],
        );
        run_git(d, home.path(), &["commit", "-q", "-m", "ignore"]);
        write(d, "pkg/.gitignore", "local.txt\n");
        let base = baseline(d, "");
        write(d, "x.log", "l");
        write(d, "build/out.o", "o");
        write(d, "target/debug/x", "t");
        write(d, "node_modules/m/i.js", "m");
        write(d, "pkg/local.txt", "l");
        write(d, "nested/.git/HEAD", "ref: refs/heads/main\n");
        write(d, "nested/inner.rs", "n");
        write(d, "forced/kept.bin", "changed");
        write(d, ".github/workflows/ci.yml", "on: push\n");
        let p = measure(d, &base, "");
        assert_eq!(
            p.changed_paths,
            vec![".github/workflows/ci.yml", "forced/kept.bin"]
        );
    }

    #[test]
    fn racy_same_size_rewrite_is_seen() {
        let (_home, dir) = repo();
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
        let (home, dir) = repo();
        let d = dir.path();
        write(d, "dirty.rs", "// v2\n");
        run_git(d, home.path(), &["add", "dirty.rs"]);
        let base = baseline(d, "");
        run_git(d, home.path(), &["commit", "-q", "-m", "staged earlier"]);
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
}
