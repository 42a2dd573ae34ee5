//! The filter drivers git's configuration defines, for [`super::git`]'s overrides, without a
//! `git config` spawn before every git command.
//!
//! # Design: a listing cached by the configuration files' stamps
//!
//! Hank's own git switches every filter driver off by name on its command line, so it must
//! know the names. Listing them costs a `git config` spawn (~1.2 ms, as much as the loop's
//! own `git status`), so the answer is kept and reused for as long as no file it came from
//! changed:
//!
//! - **What is listed** is a superset of what git reads: the standard configuration
//!   sequence (system, global, repository, worktree) *without* following includes, then every
//!   `include.path` and `includeIf.<anything>.path` target, recursively, whatever its condition
//!   (an `onbranch:` include that is off now may be on after the agent switches branches), plus
//!   each submodule's own configuration (`super::submodule_configs`) and its includes. A name
//!   switched off that git would not have used costs one `-c` argument, nothing else.
//! - **What is watched**: every file listed or named by an include (present or absent), the
//!   candidates of the standard sequence even when absent (`$GIT_CONFIG_SYSTEM` or
//!   `/etc/gitconfig`, `$GIT_CONFIG_GLOBAL` or `~/.gitconfig` and the XDG `git/config`, the
//!   common directory's `config`, the git directory's `config.worktree` and `commondir`), the
//!   `.git` entry of the project and each folder up to the work tree's top (repository
//!   discovery), and the list of submodule configuration files. A stamp is device, inode,
//!   type, mode, size, mtime and ctime of the path and, for a link, of its target.
//! - **Racy stamps**: a file whose ctime is within [`RACY`] of the listing could be rewritten
//!   in place within the same clock tick, leaving its stamp as it was (git's "racy git"
//!   problem for its index); its bytes (at most [`MAX_RACY_BYTES`]) are kept with the stamp
//!   and compared at each use. ctime cannot be set back by a user, so a rewrite that restores
//!   size and mtime is still seen.
//! - **Anything unusual** — an include written `~user/…`, `%(prefix)/…` or `:(…)…`, a
//!   configuration file that is not a regular file (a FIFO), more than [`MAX_FILES`] files,
//!   `git rev-parse` failing (not a repository, a broken config) — falls back to the listing of
//!   before, `git config --get-regexp '^filter\.'` with git's own include rules, on every call.
//!
//! Why not make attributes irrelevant instead (`--attr-source`/`GIT_ATTR_SOURCE` or
//! `attr.tree` pointing at an empty tree): git reads `$GIT_DIR/info/attributes` whatever the
//! attribute source (the agent can write it), the option needs git ≥ 2.40 (2.46 for
//! `attr.tree` falling back to the empty tree) while an older git silently ignores an unknown
//! `attr.tree`, the empty tree's id differs in SHA-256 repositories, and without the
//! repository's `text`/`eol` attributes `git status` would disagree with the user's. Parsing
//! the configuration without git would mean re-implementing its syntax, quoting and include
//! rules. The cache keeps git as the only parser and costs a few `stat` calls per git command.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::{Checkout, GitError, filter_driver, git_plain, submodule_configs};

/// A listing with a file changed less than this long before it is used once, not kept.
pub(super) const RACY: Duration = Duration::from_secs(2);
/// Most configuration files watched for one directory; past it, no cache.
pub(super) const MAX_FILES: usize = 64;
/// Deepest include chain followed (git stops at 10 too).
const MAX_INCLUDE_DEPTH: u8 = 10;
/// Directories whose listing is kept at once (`hank fleet` runs git in each task's worktree).
const MAX_ENTRIES: usize = 64;

/// What a path was when the listing was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    link: Meta,
    /// The target's, when the path is a symbolic link.
    target: Option<Meta>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meta {
    Absent,
    /// `stat` failed otherwise (the OS error number).
    Error(i32),
    Present {
        dev: u64,
        ino: u64,
        mode: u32,
        size: u64,
        mtime: (i64, i64),
        ctime: (i64, i64),
    },
}

const S_IFMT: u32 = 0o170_000;
const S_IFDIR: u32 = 0o040_000;

impl Meta {
    fn of(r: std::io::Result<std::fs::Metadata>) -> Meta {
        match r {
            Ok(m) if m.mode() & S_IFMT == S_IFDIR => Meta::Present {
                // A directory's times change with every file created in it (`.git/`): only
                // its identity matters.
                dev: m.dev(),
                ino: m.ino(),
                mode: m.mode(),
                size: 0,
                mtime: (0, 0),
                ctime: (0, 0),
            },
            Ok(m) => Meta::Present {
                dev: m.dev(),
                ino: m.ino(),
                mode: m.mode(),
                size: m.size(),
                mtime: (m.mtime(), m.mtime_nsec()),
                ctime: (m.ctime(), m.ctime_nsec()),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Meta::Absent,
            Err(e) => Meta::Error(e.raw_os_error().unwrap_or(-1)),
        }
    }

    /// Changed at or after `since` (seconds, nanoseconds since the epoch).
    fn changed_since(&self, since: (i64, i64)) -> bool {
        match self {
            Meta::Present { mtime, ctime, .. } => *ctime >= since || *mtime >= since,
            _ => false,
        }
    }
}

fn stamp(path: &Path) -> Stamp {
    let lstat = std::fs::symlink_metadata(path);
    let is_link = matches!(&lstat, Ok(m) if m.file_type().is_symlink());
    let link = Meta::of(lstat);
    let target = is_link.then(|| Meta::of(std::fs::metadata(path)));
    Stamp { link, target }
}

/// The environment git sees that changes which files it reads.
fn env_key() -> Vec<Option<OsString>> {
    [
        "HOME",
        "XDG_CONFIG_HOME",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
    ]
    .iter()
    .map(std::env::var_os)
    .collect()
}

struct Entry {
    dir: PathBuf,
    ceiling: Option<PathBuf>,
    env: Vec<Option<OsString>>,
    subs: Vec<PathBuf>,
    watched: Vec<Watched>,
    names: Vec<String>,
}

/// One watched path: its stamp and, when the stamp was racy at the listing, the bytes it
/// held then (a configuration file is small), compared on each use instead.
#[derive(Debug)]
struct Watched {
    path: PathBuf,
    stamp: Stamp,
    content: Option<Vec<u8>>,
}

/// Largest racy file whose bytes are kept for comparison; a larger one is not kept at all.
const MAX_RACY_BYTES: u64 = 64 * 1024;

impl Watched {
    /// The path's stamp now; for a stamp changed since `since`, its bytes too (`None` when
    /// they cannot be kept: the listing is then used once).
    fn take(path: &Path, since: (i64, i64)) -> Option<Watched> {
        let stamp = stamp(path);
        let racy =
            stamp.link.changed_since(since) || stamp.target.is_some_and(|t| t.changed_since(since));
        let content = if racy { Some(read_small(path)?) } else { None };
        Some(Watched {
            path: path.to_path_buf(),
            stamp,
            content,
        })
    }

    fn unchanged(&self) -> bool {
        stamp(&self.path) == self.stamp
            && self
                .content
                .as_ref()
                .is_none_or(|c| read_small(&self.path).is_some_and(|now| now == *c))
    }
}

/// The bytes of a regular file of at most [`MAX_RACY_BYTES`] (a link followed, as git does);
/// `None` for anything else (a FIFO planted in its place is not waited on: `fsread`).
fn read_small(path: &Path) -> Option<Vec<u8>> {
    crate::fsread::read(path, MAX_RACY_BYTES, crate::fsread::Follow::Yes).ok()
}

static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// The filter driver names to switch off for a git command in `dir` (see the module doc).
pub(super) fn names(
    at: &Checkout,
    timeout: Duration,
    ceiling: Option<&Path>,
) -> Result<Vec<String>, GitError> {
    let dir = at.dir();
    let subs = submodule_configs(at);
    let env = env_key();
    if let Some(names) = cached(dir, ceiling, &env, &subs) {
        return Ok(names);
    }
    let Some((names, watched)) = fill(at, timeout, ceiling, &subs)? else {
        return active_listing(at, timeout, ceiling, &subs);
    };
    if let Some(watched) = watched {
        let mut cache = CACHE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.retain(|e| !(e.dir == dir && e.ceiling.as_deref() == ceiling));
        if cache.len() >= MAX_ENTRIES {
            cache.remove(0);
        }
        cache.push(Entry {
            dir: dir.to_path_buf(),
            ceiling: ceiling.map(Path::to_path_buf),
            env,
            subs,
            watched,
            names: names.clone(),
        });
    }
    Ok(names)
}

fn since_epoch(t: SystemTime) -> (i64, i64) {
    let d = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    (
        i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        i64::from(d.subsec_nanos()),
    )
}

/// The kept names, when every watched path still has its stamp.
fn cached(
    dir: &Path,
    ceiling: Option<&Path>,
    env: &[Option<OsString>],
    subs: &[PathBuf],
) -> Option<Vec<String>> {
    let cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let e = cache
        .iter()
        .find(|e| e.dir == dir && e.ceiling.as_deref() == ceiling)?;
    let same = e.env == env && e.subs == subs && e.watched.iter().all(Watched::unchanged);
    same.then(|| e.names.clone())
}

/// Lists the names with every file they may come from (`None` for the files when the listing
/// cannot be kept); `None` when something is unusual (the caller then lists the old way).
/// The stamps (and racy files' bytes) are taken before the listing, so a change made while
/// it runs is seen at the next call.
#[allow(clippy::type_complexity)]
fn fill(
    at: &Checkout,
    timeout: Duration,
    ceiling: Option<&Path>,
    subs: &[PathBuf],
) -> Result<Option<(Vec<String>, Option<Vec<Watched>>)>, GitError> {
    let started = SystemTime::now();
    let since = since_epoch(started.checked_sub(RACY).unwrap_or(started));
    let args = [
        "rev-parse",
        "--absolute-git-dir",
        "--git-common-dir",
        "--show-toplevel",
    ];
    let out = match git_plain(at, &[], &args, timeout, ceiling) {
        Ok(out) => out,
        Err(GitError::Failed(_) | GitError::Output(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(mut watch) = candidates(at.dir(), &out) else {
        return Ok(None);
    };
    watch.extend(subs.iter().map(|p| normal(p)));
    for _ in 0..4 {
        let stamps: Option<Vec<Watched>> = watch.iter().map(|p| Watched::take(p, since)).collect();
        let Some((names, files)) = list_all(at, timeout, ceiling, subs)? else {
            return Ok(None);
        };
        let new: Vec<PathBuf> = files.into_iter().filter(|f| !watch.contains(f)).collect();
        if new.is_empty() {
            return Ok(Some((names, stamps)));
        }
        watch.extend(new);
        if watch.len() > MAX_FILES {
            return Ok(None);
        }
    }
    Ok(None)
}

/// The files git's configuration sequence and repository discovery depend on, from `git
/// rev-parse --absolute-git-dir --git-common-dir --show-toplevel` run in `dir`.
fn candidates(dir: &Path, rev_parse: &[u8]) -> Option<Vec<PathBuf>> {
    let mut lines = rev_parse.split(|&b| b == b'\n');
    let git_dir = PathBuf::from(OsStr::from_bytes(lines.next()?));
    let common = dir.join(OsStr::from_bytes(lines.next()?));
    let top = PathBuf::from(OsStr::from_bytes(lines.next()?));
    if !git_dir.is_absolute() || !top.is_absolute() {
        return None;
    }
    let mut out = vec![
        common.join("config"),
        git_dir.join("config.worktree"),
        git_dir.join("commondir"),
    ];
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    out.push(
        env("GIT_CONFIG_SYSTEM").map_or_else(|| PathBuf::from("/etc/gitconfig"), PathBuf::from),
    );
    if let Some(g) = env("GIT_CONFIG_GLOBAL") {
        out.push(PathBuf::from(g));
    } else {
        let home = env("HOME").map(PathBuf::from);
        if let Some(h) = &home {
            out.push(h.join(".gitconfig"));
        }
        match (env("XDG_CONFIG_HOME"), &home) {
            (Some(x), _) => out.push(Path::new(&x).join("git/config")),
            (None, Some(h)) => out.push(h.join(".config/git/config")),
            (None, None) => {}
        }
    }
    // Repository discovery: a `.git` created between `dir` and the top changes the repository.
    let dir = normal(dir);
    let top = normal(&top);
    for a in dir.ancestors() {
        out.push(a.join(".git"));
        if a == top || !a.starts_with(&top) {
            break;
        }
    }
    Some(out.iter().map(|p| normal(p)).collect())
}

/// `path` without `.` components and with `..` folded lexically (for comparing paths only).
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// What the listings found so far: filter names, the files they came from or name, and the
/// include targets still to list (with their depth).
#[derive(Default)]
struct Found {
    names: Vec<String>,
    files: Vec<PathBuf>,
    queue: Vec<(PathBuf, u8)>,
}

impl Found {
    /// Takes one listing in; `false` when it holds something this module does not resolve.
    fn absorb(
        &mut self,
        out: &[u8],
        dir: &Path,
        home: Option<&Path>,
        depth: u8,
    ) -> Result<bool, GitError> {
        let Some(entries) = parse_listing(out) else {
            return Ok(false);
        };
        for (origin, key, value) in entries {
            let origin = normal(&dir.join(origin));
            if let Some(name) = filter_driver(key)? {
                self.names.push(name);
            }
            if is_include(key) {
                let Some(target) = value.and_then(|v| include_target(v, &origin, home)) else {
                    return Ok(false);
                };
                let target = normal(&target);
                if !self.files.contains(&target) {
                    self.files.push(target.clone());
                    self.queue.push((target, depth + 1));
                }
            }
            if !self.files.contains(&origin) {
                self.files.push(origin);
            }
        }
        Ok(true)
    }
}

/// Every filter name of the standard sequence, the submodules' configurations and every
/// include target (whatever its condition), and every file they came from or name.
#[allow(clippy::type_complexity)]
fn list_all(
    at: &Checkout,
    timeout: Duration,
    ceiling: Option<&Path>,
    subs: &[PathBuf],
) -> Result<Option<(Vec<String>, Vec<PathBuf>)>, GitError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut found = Found {
        queue: subs.iter().map(|p| (normal(p), 0)).collect(),
        ..Found::default()
    };
    found.files = found.queue.iter().map(|(p, _)| p.clone()).collect();
    let standard = ["config", "--no-includes", "-z", "--show-origin", "--list"];
    let Some(out) = listed(git_plain(at, &[], &standard, timeout, ceiling))? else {
        return Ok(None);
    };
    if !found.absorb(&out, at.dir(), home.as_deref(), 0)? {
        return Ok(None);
    }
    while let Some((file, depth)) = found.queue.pop() {
        if depth > MAX_INCLUDE_DEPTH || found.files.len() > MAX_FILES {
            return Ok(None);
        }
        match std::fs::metadata(&file) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Ok(m) if m.is_file() => {}
            // /dev/null (`GIT_CONFIG_GLOBAL=/dev/null`) reads as empty.
            Ok(_) if file == Path::new("/dev/null") => continue,
            // A FIFO, a directory, an unreadable path: the old listing decides.
            _ => return Ok(None),
        }
        let Some(file_arg) = file.to_str() else {
            return Ok(None);
        };
        let args = [
            "config",
            "--file",
            file_arg,
            "--no-includes",
            "-z",
            "--show-origin",
            "--list",
        ];
        let Some(out) = listed(git_plain(at, &[], &args, timeout, ceiling))? else {
            return Ok(None);
        };
        if !found.absorb(&out, at.dir(), home.as_deref(), depth)? {
            return Ok(None);
        }
    }
    found.names.sort();
    found.names.dedup();
    Ok(Some((found.names, found.files)))
}

/// A listing's output; `None` when git refused (the old listing then decides).
fn listed(r: Result<Vec<u8>, GitError>) -> Result<Option<Vec<u8>>, GitError> {
    match r {
        Ok(out) => Ok(Some(out)),
        Err(GitError::Failed(_) | GitError::Output(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The listing of before, with git's own include rules (on every call): the standard
/// sequence, then each submodule configuration file with its includes.
fn active_listing(
    at: &Checkout,
    timeout: Duration,
    ceiling: Option<&Path>,
    subs: &[PathBuf],
) -> Result<Vec<String>, GitError> {
    let mut names = Vec::new();
    let mut add = |out: &[u8]| -> Result<(), GitError> {
        for key in out.split(|&b| b == 0).filter(|k| !k.is_empty()) {
            if let Some(name) = filter_driver(key)? {
                names.push(name);
            }
        }
        Ok(())
    };
    let args = ["config", "-z", "--name-only", "--get-regexp", "^filter\\."];
    match git_plain(at, &[], &args, timeout, ceiling) {
        Ok(out) => add(&out)?,
        // `git config --get-regexp` exits 1 when nothing matches.
        Err(GitError::Failed(s)) if s.code() == Some(1) => {}
        Err(e) => return Err(e),
    }
    // `git status` enters submodules itself, where their own configuration applies (the
    // overrides reach those git processes too, through the environment git passes on).
    for file in subs {
        let file_arg = file.to_string_lossy().into_owned();
        let args = [
            "config",
            "--file",
            file_arg.as_str(),
            "--includes",
            "-z",
            "--name-only",
            "--get-regexp",
            "^filter\\.",
        ];
        match git_plain(at, &[], &args, timeout, ceiling) {
            Ok(out) => add(&out)?,
            Err(GitError::Failed(s)) if s.code() == Some(1) => {}
            Err(e) => return Err(e),
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// `git config -z --show-origin --list` output: (origin file, key, value) per entry, hank's
/// own command-line settings left out; `None` when another origin is not a file (pure).
#[allow(clippy::type_complexity)]
fn parse_listing(out: &[u8]) -> Option<Vec<(&OsStr, &[u8], Option<&[u8]>)>> {
    let mut parts = out.split(|&b| b == 0);
    let mut entries = Vec::new();
    while let Some(origin) = parts.next() {
        if origin.is_empty() {
            break;
        }
        let kv = parts.next().filter(|kv| !kv.is_empty())?;
        // Hank's own `-c` settings (its environment's `GIT_CONFIG_PARAMETERS` is dropped).
        if origin == b"command line:" {
            continue;
        }
        let path = origin.strip_prefix(b"file:")?;
        let (key, value) = match kv.iter().position(|&b| b == b'\n') {
            Some(i) => (&kv[..i], Some(&kv[i + 1..])),
            None => (kv, None),
        };
        entries.push((OsStr::from_bytes(path), key, value));
    }
    Some(entries)
}

/// `include.path` or `includeif.<condition>.path` (keys as `--list` prints them) (pure).
fn is_include(key: &[u8]) -> bool {
    key == b"include.path" || (key.starts_with(b"includeif.") && key.ends_with(b".path"))
}

/// The file an include value names, resolved as git does: `~/` from `home`, an absolute
/// path as is, anything else relative to the including file's folder. `None` for what this
/// module does not resolve (`~user/`, `%(prefix)/`, `:(…)`, empty) (pure).
fn include_target(value: &[u8], origin: &Path, home: Option<&Path>) -> Option<PathBuf> {
    if value.is_empty() || value.starts_with(b"%(") || value.starts_with(b":(") {
        return None;
    }
    if let Some(rest) = value.strip_prefix(b"~/") {
        return Some(home?.join(OsStr::from_bytes(rest)));
    }
    if value.starts_with(b"~") {
        return None;
    }
    let p = Path::new(OsStr::from_bytes(value));
    if p.is_absolute() {
        return Some(p.to_path_buf());
    }
    Some(origin.parent()?.join(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::git_in;

    #[test]
    fn listings_are_parsed() {
        let out = b"file:/h/.gitconfig\0user.name\nA B\0file:.git/config\0include.path\nx.cfg\0\
                    file:.git/x.cfg\0filter.q.clean\ncat\0file:.git/config\0core.bare\0";
        let e = parse_listing(out).unwrap();
        assert_eq!(e.len(), 4);
        assert_eq!(
            e[1],
            (
                OsStr::new(".git/config"),
                &b"include.path"[..],
                Some(&b"x.cfg"[..])
            )
        );
        assert_eq!(e[3].2, None);
        assert!(parse_listing(b"").unwrap().is_empty());
        assert!(
            parse_listing(b"command line:\0a.b\nc\0")
                .unwrap()
                .is_empty()
        );
        assert!(parse_listing(b"blob:HEAD:x\0a.b\nc\0").is_none());
        assert!(parse_listing(b"file:x\0").is_none());
    }

    #[test]
    fn includes_resolve_like_git() {
        let origin = Path::new("/r/.git/config");
        let home = Some(Path::new("/h"));
        let t = |v: &str| include_target(v.as_bytes(), origin, home);
        assert_eq!(t("x.cfg"), Some(PathBuf::from("/r/.git/x.cfg")));
        assert_eq!(t("../y"), Some(PathBuf::from("/r/.git/../y")));
        assert_eq!(t("/abs/z"), Some(PathBuf::from("/abs/z")));
        assert_eq!(t("~/c"), Some(PathBuf::from("/h/c")));
        assert_eq!(include_target(b"~/c", origin, None), None);
        for odd in ["", "~bob/c", "%(prefix)/etc/c", ":(optional)c"] {
            assert_eq!(t(odd), None, "{odd}");
        }
        assert!(is_include(b"include.path"));
        assert!(is_include(b"includeif.onbranch:a.b.path"));
        assert!(is_include(b"includeif.gitdir:~/w/.path"));
        assert!(!is_include(b"include.other"));
        assert_eq!(normal(Path::new("/r/.git/./../y")), PathBuf::from("/r/y"));
    }

    fn append(path: &Path, text: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn the_listing_is_kept_until_a_file_it_came_from_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("r");
        std::fs::create_dir_all(&dir).unwrap();
        git_in(&dir, &["init", "-q"]);
        let t = crate::git::GIT_TIMEOUT;
        let at = Checkout::at(&dir);
        let subs = submodule_configs(&at);
        let env = env_key();
        // Just written (racy): kept with the bytes of the racy files.
        assert_eq!(names(&at, t, None).unwrap(), Vec::<String>::new());
        assert_eq!(cached(&dir, None, &env, &subs), Some(vec![]));
        {
            let cache = CACHE.lock().unwrap();
            let e = cache.iter().find(|e| e.dir == dir).unwrap();
            let config = e.watched.iter().find(|w| w.path.ends_with(".git/config"));
            assert!(config.unwrap().content.is_some(), "{:?}", e.watched);
        }
        // Rewritten in place at once, same size, mtime put back: stat may not tell (same
        // clock tick), the bytes do.
        let config = dir.join(".git/config");
        let mtime = std::fs::metadata(&config).unwrap().modified().unwrap();
        let text = std::fs::read_to_string(&config).unwrap();
        let evil = text.replacen("[core]", "[filt]", 1);
        assert_eq!(evil.len(), text.len());
        {
            use std::io::{Seek, Write};
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&config)
                .unwrap();
            f.seek(std::io::SeekFrom::Start(0)).unwrap();
            f.write_all(evil.as_bytes()).unwrap();
            f.set_modified(mtime).unwrap();
        }
        assert_eq!(cached(&dir, None, &env, &subs), None);
        std::fs::write(&config, &text).unwrap();
        std::thread::sleep(RACY + Duration::from_millis(100));
        assert!(names(&at, t, None).unwrap().is_empty());
        assert_eq!(cached(&dir, None, &env, &subs), Some(vec![]));
        // An include of a file that does not exist yet, a conditional one that is off.
        append(
            &dir.join(".git/config"),
            "[include]\n\tpath = a.cfg\n[includeIf \"onbranch:zz\"]\n\tpath = ../b.cfg\n",
        );
        assert_eq!(cached(&dir, None, &env, &subs), None);
        std::fs::write(dir.join("b.cfg"), "[filter \"off-now\"]\n\tclean = x\n").unwrap();
        assert_eq!(names(&at, t, None).unwrap(), vec!["off-now".to_string()]);
        std::thread::sleep(RACY + Duration::from_millis(100));
        assert_eq!(names(&at, t, None).unwrap(), vec!["off-now".to_string()]);
        assert!(cached(&dir, None, &env, &subs).is_some());
        // The absent include target appears: the kept listing is dropped.
        std::fs::write(dir.join(".git/a.cfg"), "[filter \"new\"]\n\tsmudge = y\n").unwrap();
        assert_eq!(cached(&dir, None, &env, &subs), None);
        assert_eq!(
            names(&at, t, None).unwrap(),
            vec!["new".to_string(), "off-now".to_string()]
        );
        // Something it does not resolve: listed git's way on every call, never kept.
        append(
            &dir.join(".git/config"),
            "[include]\n\tpath = :(optional)c.cfg\n",
        );
        std::thread::sleep(RACY + Duration::from_millis(100));
        assert_eq!(
            names(&at, t, None).unwrap(),
            vec!["new".to_string()],
            "git's own include rules (the onbranch include is off)"
        );
        assert_eq!(cached(&dir, None, &env, &subs), None);
    }

    #[test]
    fn a_stamp_sees_a_rewrite_that_keeps_size_and_mtime() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("c");
        std::fs::write(&f, "[a]\n\tb = 1\n").unwrap();
        let mtime = std::fs::metadata(&f).unwrap().modified().unwrap();
        let before = stamp(&f);
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&f, "[a]\n\tb = 2\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let after = stamp(&f);
        let (
            Meta::Present {
                mtime: m1,
                size: s1,
                ino: i1,
                ..
            },
            Meta::Present {
                mtime: m2,
                size: s2,
                ino: i2,
                ..
            },
        ) = (before.link, after.link)
        else {
            panic!("{before:?} {after:?}");
        };
        assert_eq!((m1, s1, i1), (m2, s2, i2));
        assert_ne!(before, after, "only the ctime tells");
        assert_eq!(stamp(&d.path().join("none")).link, Meta::Absent);
    }
}
