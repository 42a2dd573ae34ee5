//! The files that differ between two commits, as `git diff --name-only --no-renames
//! --relative --ignore-submodules=none A B -- . ':(exclude).hank' ':(exclude).hankrc'` names
//! them from the project's directory, and `git ls-tree -r --name-only C` for one commit (a
//! side unborn).
//!
//! Two trees are walked together in git's tree order (`base_name_compare`: a tree's name
//! sorts as if it ended in `/`, so `a.b` comes before the tree `a`), recursing only into
//! subtrees whose ids differ. A path is named when it was added or removed, or when its
//! (canonical) mode or id changed — a gitlink by its commit id; a blob replaced by a tree of
//! the same name names the file and every file of the tree (git sees two entries). Paths are
//! relative to the project's prefix; outside it nothing is read.

use super::{Kind, Odb, Oid, Unreadable, hex, no, parse_hex};
use crate::git::snapshot::Layout;

/// Deepest tree nesting walked; past it the answer is [`Unreadable`] (and git is asked).
pub const MAX_TREE_DEPTH: usize = 512;
/// Most tags peeled on the way to a commit.
const MAX_PEEL: usize = 16;

/// What one diff may cost: the agent writes the objects, and a few trees that name one
/// subtree a thousand times each (a "tree bomb") would name billions of paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most paths named; past it the answer is cut ([`Changed::cut`]).
    pub paths: usize,
    /// Most tree objects read.
    pub trees: usize,
    /// Most bytes of tree objects read.
    pub bytes: u64,
}

/// Progress's limits: far above any real commit's (a vendored tree of 100,000 files reads
/// in well under a second), far below what a tree bomb asks.
pub const LIMITS: Limits = Limits {
    paths: 200_000,
    trees: 100_000,
    bytes: 256 * 1024 * 1024,
};

/// The paths found, and whether the walk stopped at a limit before the end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changed {
    pub paths: Vec<String>,
    /// The walk stopped at [`Limits`]: `paths` is the first part of the answer only.
    pub cut: Option<String>,
}

/// The walk's answer so far and its costs.
struct Found {
    paths: Vec<String>,
    trees: usize,
    bytes: u64,
    limits: Limits,
}

/// Why a walk stopped: a limit (the answer so far stands, cut) or an unreadable object.
enum Stop {
    Limit(String),
    Unreadable(Unreadable),
}

impl From<Unreadable> for Stop {
    fn from(u: Unreadable) -> Self {
        Stop::Unreadable(u)
    }
}

impl Found {
    /// The tree `t`, counted against the limits.
    fn tree(&mut self, odb: &mut Odb, t: &Oid) -> Result<Vec<u8>, Stop> {
        if self.trees >= self.limits.trees {
            return Err(Stop::Limit(format!(
                "more than {} trees read",
                self.limits.trees
            )));
        }
        let data = read_kind(odb, t, Kind::Tree)?;
        self.trees += 1;
        self.bytes += data.len() as u64;
        if self.bytes > self.limits.bytes {
            return Err(Stop::Limit(format!(
                "more than {} bytes of trees read",
                self.limits.bytes
            )));
        }
        Ok(data)
    }

    fn push(&mut self, path: &[u8], name: &[u8]) -> Result<(), Stop> {
        if self.paths.len() >= self.limits.paths {
            return Err(Stop::Limit(format!(
                "more than {} paths",
                self.limits.paths
            )));
        }
        push_name(&mut self.paths, path, name);
        Ok(())
    }
}

const S_IFMT: u32 = 0o170_000;
const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;
const GITLINK: u32 = 0o160_000;

/// One entry of a tree object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    pub name: &'a [u8],
    /// Canonical, as git reads it (`canon_mode`): 040000, 100644, 100755, 120000, 160000.
    pub mode: u32,
    pub id: Oid,
}

impl Entry<'_> {
    fn is_tree(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
}

/// git's `canon_mode`.
fn canon(mode: u32) -> u32 {
    match mode & S_IFMT {
        S_IFREG => S_IFREG | if mode & 0o100 != 0 { 0o755 } else { 0o644 },
        S_IFLNK => S_IFLNK,
        S_IFDIR => S_IFDIR,
        _ => GITLINK,
    }
}

/// The entries of a tree object's content, in the order stored.
///
/// # Errors
/// A malformed tree.
pub fn tree_entries(data: &[u8]) -> Result<Vec<Entry<'_>>, Unreadable> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let bad = || Unreadable("a malformed tree".into());
        let sp = rest.iter().position(|&b| b == b' ').ok_or_else(bad)?;
        let (mode_text, after) = rest.split_at(sp);
        if mode_text.is_empty() || mode_text.len() > 7 {
            return Err(bad());
        }
        let mut mode = 0u32;
        for &c in mode_text {
            if !(b'0'..=b'7').contains(&c) {
                return Err(bad());
            }
            mode = mode * 8 + u32::from(c - b'0');
        }
        let after = &after[1..];
        let nul = after.iter().position(|&b| b == 0).ok_or_else(bad)?;
        let name = &after[..nul];
        let id = after.get(nul + 1..nul + 21).ok_or_else(bad)?;
        if name.is_empty() {
            return Err(bad());
        }
        let mut oid = [0u8; 20];
        oid.copy_from_slice(id);
        out.push(Entry {
            name,
            mode: canon(mode),
            id: oid,
        });
        rest = &after[nul + 21..];
    }
    Ok(out)
}

/// git's `base_name_compare`: a tree's name compares as if it ended in `/`.
pub(super) fn order(a: &Entry<'_>, b: &Entry<'_>) -> std::cmp::Ordering {
    let n = a.name.len().min(b.name.len());
    match a.name[..n].cmp(&b.name[..n]) {
        std::cmp::Ordering::Equal => {}
        other => return other,
    }
    let tail = |e: &Entry<'_>| match e.name.get(n) {
        Some(&c) => c,
        None if e.is_tree() => b'/',
        None => 0,
    };
    tail(a).cmp(&tail(b))
}

/// The object `oid` read and checked to be of `kind`.
fn read_kind(odb: &mut Odb, oid: &Oid, kind: Kind) -> Result<Vec<u8>, Unreadable> {
    let o = odb.read(oid)?;
    if o.kind != kind {
        return no(format!("{} is a {:?}, not a {kind:?}", hex(oid), o.kind));
    }
    Ok(o.data)
}

/// The root tree of `oid` (a commit, a tag peeled to one, or a tree).
fn root_tree(odb: &mut Odb, oid: &Oid) -> Result<Oid, Unreadable> {
    let mut id = *oid;
    for _ in 0..MAX_PEEL {
        let o = odb.read(&id)?;
        let field = match o.kind {
            Kind::Tree => return Ok(id),
            Kind::Commit => b"tree ".as_slice(),
            Kind::Tag => b"object ".as_slice(),
            Kind::Blob => return no(format!("{} is a blob", hex(oid))),
        };
        let line = o
            .data
            .split(|&b| b == b'\n')
            .find(|l| l.starts_with(field))
            .and_then(|l| std::str::from_utf8(&l[field.len()..]).ok())
            .and_then(parse_hex)
            .ok_or_else(|| Unreadable(format!("{} names no {:?}", hex(&id), field)))?;
        id = line;
    }
    no(format!(
        "{} peels through more than {MAX_PEEL} tags",
        hex(oid)
    ))
}

/// The tree at `prefix` (`""` or `dir/sub/`) under `root`; `None` when there is none.
fn subtree(odb: &mut Odb, root: Oid, prefix: &str) -> Result<Option<Oid>, Unreadable> {
    let mut at = root;
    for part in prefix.split('/').filter(|p| !p.is_empty()) {
        let data = read_kind(odb, &at, Kind::Tree)?;
        let found = tree_entries(&data)?
            .into_iter()
            .find(|e| e.name == part.as_bytes() && e.is_tree());
        match found {
            Some(e) => at = e.id,
            None => return Ok(None),
        }
    }
    Ok(Some(at))
}

/// Whether git would read objects through replacements (`refs/replace/`): then its answer,
/// not this reader's.
fn replaced(layout: &Layout) -> bool {
    let loose =
        std::fs::read_dir(layout.common.join("refs/replace")).is_ok_and(|mut d| d.next().is_some());
    let packed = std::fs::read(layout.common.join("packed-refs"))
        .is_ok_and(|t| memchr::memmem::find(&t, b" refs/replace/").is_some());
    loose || packed
}

/// The project-relative files that differ between the commits `before` and `after` (see the
/// module doc); with one side `None` (unborn), every file of the other side's tree under the
/// project (hank's files included, as `ls-tree` lists them).
///
/// # Errors
/// [`Unreadable`] whenever this reader cannot give git's exact answer: `refs/replace/` in use,
/// an object missing or unreadable (see [`super`]), a tree deeper than [`MAX_TREE_DEPTH`], a
/// walk past [`LIMITS`].
pub fn changed_files(
    layout: &Layout,
    before: Option<Oid>,
    after: Option<Oid>,
) -> Result<Vec<String>, Unreadable> {
    let c = changed_files_within(layout, before, after, LIMITS)?;
    match c.cut {
        Some(why) => Err(Unreadable(format!("too large: {why}"))),
        None => Ok(c.paths),
    }
}

/// [`changed_files`] within `limits`: past one of them the walk stops and the paths found so
/// far are the answer, marked [`Changed::cut`] (never unbounded time or memory, whatever
/// trees the agent committed).
///
/// # Errors
/// As [`changed_files`], but a limit.
pub fn changed_files_within(
    layout: &Layout,
    before: Option<Oid>,
    after: Option<Oid>,
    limits: Limits,
) -> Result<Changed, Unreadable> {
    if before.is_none() && after.is_none() {
        return Ok(Changed::default());
    }
    if replaced(layout) {
        return no("replacement refs (refs/replace/) are in use");
    }
    let mut odb = Odb::open(&layout.common.join("objects"))?;
    let at = |odb: &mut Odb, c: Option<Oid>| -> Result<Option<Oid>, Unreadable> {
        match c {
            Some(c) => {
                let root = root_tree(odb, &c)?;
                subtree(odb, root, &layout.prefix)
            }
            None => Ok(None),
        }
    };
    let a = at(&mut odb, before)?;
    let b = at(&mut odb, after)?;
    let mut out = Found {
        paths: Vec::new(),
        trees: 0,
        bytes: 0,
        limits,
    };
    let mut path = Vec::new();
    let walked = match (before.is_some() && after.is_some(), a, b) {
        (true, a, b) => walk(&mut odb, a, b, &mut path, 0, &mut out),
        (false, Some(t), None) | (false, None, Some(t)) => {
            list(&mut odb, t, &mut path, 0, &mut out)
        }
        (false, _, _) => Ok(()),
    };
    match walked {
        Ok(()) => Ok(Changed {
            paths: out.paths,
            cut: None,
        }),
        Err(Stop::Limit(why)) => Ok(Changed {
            paths: out.paths,
            cut: Some(why),
        }),
        Err(Stop::Unreadable(u)) => Err(u),
    }
}

fn push_name(out: &mut Vec<String>, path: &[u8], name: &[u8]) {
    let mut full = Vec::with_capacity(path.len() + name.len());
    full.extend_from_slice(path);
    full.extend_from_slice(name);
    out.push(String::from_utf8_lossy(&full).into_owned());
}

/// Every file (and gitlink) under the tree `t`, `path` before each name.
fn list(
    odb: &mut Odb,
    t: Oid,
    path: &mut Vec<u8>,
    depth: usize,
    out: &mut Found,
) -> Result<(), Stop> {
    if depth > MAX_TREE_DEPTH {
        return Err(Stop::Unreadable(Unreadable(format!(
            "trees nested deeper than {MAX_TREE_DEPTH}"
        ))));
    }
    let data = out.tree(odb, &t)?;
    for e in tree_entries(&data)? {
        one_side(odb, &e, path, depth, out)?;
    }
    Ok(())
}

/// An entry only one side has: the file, or every file of the tree.
fn one_side(
    odb: &mut Odb,
    e: &Entry<'_>,
    path: &mut Vec<u8>,
    depth: usize,
    out: &mut Found,
) -> Result<(), Stop> {
    if e.is_tree() {
        let len = path.len();
        path.extend_from_slice(e.name);
        path.push(b'/');
        let r = list(odb, e.id, path, depth + 1, out);
        path.truncate(len);
        r
    } else {
        out.push(path, e.name)
    }
}

/// hank's own files, excluded at the project's top.
fn excluded(name: &[u8]) -> bool {
    name == b".hank" || name == b".hankrc"
}

/// The files that differ between the trees `a` and `b` (either may be missing: empty).
fn walk(
    odb: &mut Odb,
    a: Option<Oid>,
    b: Option<Oid>,
    path: &mut Vec<u8>,
    depth: usize,
    out: &mut Found,
) -> Result<(), Stop> {
    if a == b {
        return Ok(());
    }
    if depth > MAX_TREE_DEPTH {
        return Err(Stop::Unreadable(Unreadable(format!(
            "trees nested deeper than {MAX_TREE_DEPTH}"
        ))));
    }
    let da = match a {
        Some(t) => out.tree(odb, &t)?,
        None => Vec::new(),
    };
    let db = match b {
        Some(t) => out.tree(odb, &t)?,
        None => Vec::new(),
    };
    let (ea, eb) = (tree_entries(&da)?, tree_entries(&db)?);
    let (mut i, mut j) = (0, 0);
    let keep = |e: &Entry<'_>| depth > 0 || !excluded(e.name);
    loop {
        let step = match (ea.get(i), eb.get(j)) {
            (None, None) => return Ok(()),
            (Some(x), None) => (Some(x), None),
            (None, Some(y)) => (None, Some(y)),
            (Some(x), Some(y)) => match order(x, y) {
                std::cmp::Ordering::Less => (Some(x), None),
                std::cmp::Ordering::Greater => (None, Some(y)),
                std::cmp::Ordering::Equal => (Some(x), Some(y)),
            },
        };
        match step {
            (Some(x), None) => {
                i += 1;
                if keep(x) {
                    one_side(odb, x, path, depth, out)?;
                }
            }
            (None, Some(y)) => {
                j += 1;
                if keep(y) {
                    one_side(odb, y, path, depth, out)?;
                }
            }
            (Some(x), Some(y)) => {
                i += 1;
                j += 1;
                if !keep(x) || (x.mode == y.mode && x.id == y.id) {
                    continue;
                }
                if x.is_tree() && y.is_tree() {
                    let len = path.len();
                    path.extend_from_slice(x.name);
                    path.push(b'/');
                    let r = walk(odb, Some(x.id), Some(y.id), path, depth + 1, out);
                    path.truncate(len);
                    r?;
                } else {
                    out.push(path, x.name)?;
                }
            }
            (None, None) => return Ok(()),
        }
    }
}
