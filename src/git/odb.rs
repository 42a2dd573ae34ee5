//! Git's object database read in process: loose objects and pack files, no git child.
//!
//! # What it reads
//!
//! An [`Odb`] is opened on a repository's objects directory (for a linked worktree the
//! common directory's, [`super::snapshot::Layout::common`]) and on every directory its
//! `objects/info/alternates` names (recursively, at most [`MAX_ALTERNATE_DEPTH`] deep, as git).
//! [`Odb::read`] finds an object by its SHA-1 id:
//!
//! - **loose**: `objects/xx/yyyy…`, zlib (`<type> <size>\0<content>`);
//! - **packed**: `objects/pack/pack-*.idx` version 2 (the fan-out table, the sorted ids, the
//!   32-bit offsets and the 64-bit table for packs past 2 GiB) and its `.pack` (version 2 or
//!   3): commit, tree, blob and tag entries, `OFS_DELTA` and `REF_DELTA` entries and their
//!   chains (a `REF_DELTA` base is looked up anywhere in the database).
//!
//! Inflation is `miniz_oxide` (pure Rust), streamed from `read_at` reads of the pack (no
//! mmap: the crate forbids `unsafe`). The packs' indexes are opened once per [`Odb`] (their
//! fan-out table kept in memory, the rest read on demand) and the pack directory is listed
//! again once when an id is not found (a `git gc` or `repack` may have run meanwhile).
//!
//! # Limits: [`Unreadable`], never a panic
//!
//! Every size read from a file is bounded before anything is allocated: an object larger than
//! [`MAX_OBJECT`], a delta chain longer than [`MAX_DELTA_CHAIN`], an index other than
//! version 2, a pack version other than 2 or 3, an offset outside its file, a corrupt zlib
//! stream or delta, a missing object (a partial clone's promised object) are all
//! [`Unreadable`]: the caller ([`changed_files`]'s, `crate::worktree`'s) then asks git.
//!
//! The tree diff is bounded too ([`LIMITS`]: paths named, trees and bytes read): the agent
//! writes the objects, and a few trees naming one subtree a thousand times each would name
//! billions of paths; past a limit the answer is cut ([`changed_files_within`]), and git,
//! which would take as long, is not asked.
//!
//! [`changed_files`] is the tree-to-tree diff progress needs (`git diff --name-only
//! --no-renames --relative` between two commits, hank's files excluded), in `odb/diff.rs`.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use miniz_oxide::inflate::stream::{InflateState, inflate};
use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};

pub use super::snapshot::Unreadable;

mod diff;
pub use diff::{
    Changed, Entry, LIMITS, Limits, MAX_TREE_DEPTH, changed_files, changed_files_within,
    tree_entries,
};

#[cfg(test)]
mod tests;

/// A SHA-1 object id.
pub type Oid = [u8; 20];

/// Largest object (and delta result) read: trees and commits are far smaller; past it the
/// answer is [`Unreadable`].
pub const MAX_OBJECT: u64 = 64 * 1024 * 1024;
/// Longest delta chain followed (git's own `pack.depth` caps at 4,095).
pub const MAX_DELTA_CHAIN: usize = 5_000;
/// How deep `objects/info/alternates` is followed (git's limit).
pub const MAX_ALTERNATE_DEPTH: usize = 5;
/// Most pack files looked at in one objects directory.
const MAX_PACKS: usize = 10_000;

/// An object's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Commit,
    Tree,
    Blob,
    Tag,
}

impl Kind {
    fn of_pack_type(t: u8) -> Option<Kind> {
        match t {
            1 => Some(Kind::Commit),
            2 => Some(Kind::Tree),
            3 => Some(Kind::Blob),
            4 => Some(Kind::Tag),
            _ => None,
        }
    }

    fn of_name(name: &[u8]) -> Option<Kind> {
        match name {
            b"commit" => Some(Kind::Commit),
            b"tree" => Some(Kind::Tree),
            b"blob" => Some(Kind::Blob),
            b"tag" => Some(Kind::Tag),
            _ => None,
        }
    }
}

/// One object: its type and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub kind: Kind,
    pub data: Vec<u8>,
}

fn no<T>(why: impl Into<String>) -> Result<T, Unreadable> {
    Err(Unreadable(why.into()))
}

/// An id in hex.
#[must_use]
pub fn hex(oid: &Oid) -> String {
    oid.iter().map(|b| format!("{b:02x}")).collect()
}

/// The id of 40 hex digits, `None` otherwise.
#[must_use]
pub fn parse_hex(text: &str) -> Option<Oid> {
    let text = text.trim();
    if text.len() != 40 {
        return None;
    }
    let mut oid = [0u8; 20];
    for (i, b) in oid.iter_mut().enumerate() {
        *b = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(oid)
}

/// One opened pack: its index's fan-out table and both files.
#[derive(Debug)]
struct Pack {
    idx: File,
    idx_len: u64,
    pack: File,
    pack_len: u64,
    fanout: Box<[u32; 256]>,
    path: PathBuf,
}

/// Reads exactly `buf.len()` bytes at `at`.
fn read_exact_at(file: &File, buf: &mut [u8], at: u64) -> Result<(), Unreadable> {
    file.read_exact_at(buf, at)
        .map_err(|e| Unreadable(format!("read at {at}: {e}")))
}

fn be32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

impl Pack {
    /// Opens `idx` (version 2) and the `.pack` beside it (version 2 or 3).
    fn open(idx_path: &Path) -> Result<Pack, Unreadable> {
        let idx =
            File::open(idx_path).map_err(|e| Unreadable(format!("{}: {e}", idx_path.display())))?;
        let idx_len = idx
            .metadata()
            .map_err(|e| Unreadable(format!("{}: {e}", idx_path.display())))?
            .len();
        let mut head = [0u8; 8 + 256 * 4];
        if idx_len < head.len() as u64 + 40 {
            return no(format!("{}: too short", idx_path.display()));
        }
        read_exact_at(&idx, &mut head, 0)?;
        if head[..4] != [0xff, b't', b'O', b'c'] || be32(&head[4..8]) != 2 {
            return no(format!(
                "{}: not a version 2 pack index",
                idx_path.display()
            ));
        }
        let mut fanout = Box::new([0u32; 256]);
        for (i, f) in fanout.iter_mut().enumerate() {
            *f = be32(&head[8 + 4 * i..]);
        }
        if fanout.windows(2).any(|w| w[0] > w[1]) {
            return no(format!(
                "{}: a fan-out table out of order",
                idx_path.display()
            ));
        }
        let n = u64::from(fanout[255]);
        // ids, crcs, offsets, the two trailing checksums: at least this long.
        if idx_len < 8 + 1024 + n * 28 + 40 {
            return no(format!("{}: truncated", idx_path.display()));
        }
        let pack_path = idx_path.with_extension("pack");
        let pack = File::open(&pack_path)
            .map_err(|e| Unreadable(format!("{}: {e}", pack_path.display())))?;
        let pack_len = pack
            .metadata()
            .map_err(|e| Unreadable(format!("{}: {e}", pack_path.display())))?
            .len();
        let mut ph = [0u8; 12];
        if pack_len < 12 + 20 {
            return no(format!("{}: too short", pack_path.display()));
        }
        read_exact_at(&pack, &mut ph, 0)?;
        let version = be32(&ph[4..8]);
        if &ph[..4] != b"PACK" || !(version == 2 || version == 3) {
            return no(format!(
                "{}: pack version {version} is not read",
                pack_path.display()
            ));
        }
        if u64::from(be32(&ph[8..12])) != n {
            return no(format!(
                "{}: its index counts other objects",
                pack_path.display()
            ));
        }
        Ok(Pack {
            idx,
            idx_len,
            pack,
            pack_len,
            fanout,
            path: pack_path,
        })
    }

    fn count(&self) -> u64 {
        u64::from(self.fanout[255])
    }

    /// The offset of `oid` in the pack, `None` when this pack does not hold it.
    fn find(&self, oid: &Oid) -> Result<Option<u64>, Unreadable> {
        let first = oid[0] as usize;
        let lo = if first == 0 {
            0
        } else {
            self.fanout[first - 1]
        };
        let hi = self.fanout[first];
        if lo >= hi {
            return Ok(None);
        }
        let ids_at = 8 + 1024;
        let span = u64::from(hi - lo) * 20;
        if span > MAX_OBJECT {
            return no(format!(
                "{}: an index bucket too large",
                self.path.display()
            ));
        }
        let mut ids = vec![0u8; usize::try_from(span).unwrap_or(0)];
        read_exact_at(&self.idx, &mut ids, ids_at + u64::from(lo) * 20)?;
        let (mut a, mut b) = (0usize, (hi - lo) as usize);
        let pos = loop {
            if a >= b {
                return Ok(None);
            }
            let mid = a + (b - a) / 2;
            let id = &ids[mid * 20..mid * 20 + 20];
            match id.cmp(&oid[..]) {
                std::cmp::Ordering::Equal => break u64::from(lo) + mid as u64,
                std::cmp::Ordering::Less => a = mid + 1,
                std::cmp::Ordering::Greater => b = mid,
            }
        };
        let n = self.count();
        let off_at = ids_at + n * 24 + pos * 4;
        let mut four = [0u8; 4];
        read_exact_at(&self.idx, &mut four, off_at)?;
        let small = be32(&four);
        let offset = if small & 0x8000_0000 == 0 {
            u64::from(small)
        } else {
            let big_at = ids_at + n * 28 + u64::from(small & 0x7fff_ffff) * 8;
            if big_at + 8 > self.idx_len.saturating_sub(40) {
                return no(format!("{}: a 64-bit offset outside", self.path.display()));
            }
            let mut eight = [0u8; 8];
            read_exact_at(&self.idx, &mut eight, big_at)?;
            u64::from_be_bytes(eight)
        };
        if offset < 12 || offset >= self.pack_len.saturating_sub(20) {
            return no(format!(
                "{}: an offset outside the pack",
                self.path.display()
            ));
        }
        Ok(Some(offset))
    }

    /// The entry header at `offset`: its pack type, its size and where its data (or, for a
    /// delta, the base reference) starts.
    fn header(&self, offset: u64) -> Result<Header, Unreadable> {
        let mut buf = [0u8; 32];
        let avail = self.pack_len.saturating_sub(offset).min(buf.len() as u64);
        let buf = &mut buf[..usize::try_from(avail).unwrap_or(0)];
        read_exact_at(&self.pack, buf, offset)?;
        let bad = || Unreadable(format!("{}: a bad entry at {offset}", self.path.display()));
        let mut i = 0;
        let mut c = *buf.first().ok_or_else(bad)?;
        let kind = (c >> 4) & 7;
        let mut size = u64::from(c & 15);
        let mut shift = 4;
        while c & 0x80 != 0 {
            i += 1;
            c = *buf.get(i).ok_or_else(bad)?;
            if shift > 60 {
                return Err(bad());
            }
            size |= u64::from(c & 0x7f) << shift;
            shift += 7;
        }
        i += 1;
        let base = match kind {
            6 => {
                let mut c = *buf.get(i).ok_or_else(bad)?;
                let mut back = u64::from(c & 0x7f);
                while c & 0x80 != 0 {
                    i += 1;
                    c = *buf.get(i).ok_or_else(bad)?;
                    if back > (u64::MAX >> 8) {
                        return Err(bad());
                    }
                    back = ((back + 1) << 7) | u64::from(c & 0x7f);
                }
                i += 1;
                if back == 0 || back > offset {
                    return Err(bad());
                }
                Base::Offset(offset - back)
            }
            7 => {
                let id = buf.get(i..i + 20).ok_or_else(bad)?;
                let mut oid = [0u8; 20];
                oid.copy_from_slice(id);
                i += 20;
                Base::Id(oid)
            }
            1..=4 => Base::None(Kind::of_pack_type(kind).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        Ok(Header {
            size,
            base,
            data_at: offset + i as u64,
        })
    }

    /// Inflates the zlib stream at `at`, which must give exactly `size` bytes.
    fn inflate_at(&self, at: u64, size: u64) -> Result<Vec<u8>, Unreadable> {
        if size > MAX_OBJECT {
            return no(format!(
                "{}: an object of {size} bytes (more than {MAX_OBJECT})",
                self.path.display()
            ));
        }
        inflate_from(&self.pack, at, self.pack_len, size)
            .map_err(|why| Unreadable(format!("{}: {why} at {at}", self.path.display())))
    }
}

/// Where a pack entry's content comes from.
#[derive(Debug, Clone, Copy)]
enum Base {
    /// A whole object of this type.
    None(Kind),
    /// A delta on the entry at this offset of the same pack.
    Offset(u64),
    /// A delta on the object with this id.
    Id(Oid),
}

#[derive(Debug, Clone, Copy)]
struct Header {
    size: u64,
    base: Base,
    data_at: u64,
}

/// Inflates the zlib stream starting at `at` in `file` (of `len` bytes), expecting exactly
/// `size` bytes out.
fn inflate_from(file: &File, mut at: u64, len: u64, size: u64) -> Result<Vec<u8>, String> {
    let size = usize::try_from(size).map_err(|_| "too large".to_string())?;
    // One byte more than expected: a stream giving more is caught.
    let mut out = vec![0u8; size + 1];
    let mut written = 0usize;
    let mut state = InflateState::new_boxed(DataFormat::Zlib);
    let chunk = (size / 2 + 256).clamp(512, 64 * 1024);
    let mut input = vec![0u8; chunk];
    loop {
        let want = (len.saturating_sub(at)).min(chunk as u64);
        if want == 0 {
            return Err("a zlib stream cut short".into());
        }
        let want = usize::try_from(want).unwrap_or(chunk);
        file.read_exact_at(&mut input[..want], at)
            .map_err(|e| e.to_string())?;
        let mut fed = &input[..want];
        loop {
            let r = inflate(&mut state, fed, &mut out[written..], MZFlush::None);
            written += r.bytes_written;
            fed = &fed[r.bytes_consumed..];
            at += r.bytes_consumed as u64;
            match r.status {
                Ok(MZStatus::StreamEnd) => {
                    if written != size {
                        return Err(format!("{written} bytes inflated, {size} expected"));
                    }
                    out.truncate(size);
                    return Ok(out);
                }
                Ok(_) | Err(MZError::Buf) => {
                    if written > size {
                        return Err("a zlib stream longer than its object".into());
                    }
                    if fed.is_empty() {
                        break;
                    }
                    if r.bytes_consumed == 0 && r.bytes_written == 0 {
                        return Err("a zlib stream that does not end".into());
                    }
                }
                Err(e) => return Err(format!("zlib: {e:?}")),
            }
        }
    }
}

/// Applies a git delta to `base` (bounded by [`MAX_OBJECT`]).
fn apply_delta(base: &[u8], delta: &[u8]) -> Result<Vec<u8>, Unreadable> {
    let bad = |why: &str| Unreadable(format!("a bad delta: {why}"));
    let mut i = 0usize;
    let varint = |i: &mut usize| -> Result<u64, Unreadable> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let c = *delta.get(*i).ok_or_else(|| bad("cut short"))?;
            *i += 1;
            if shift > 63 {
                return Err(bad("a size too long"));
            }
            v |= u64::from(c & 0x7f) << shift;
            shift += 7;
            if c & 0x80 == 0 {
                return Ok(v);
            }
        }
    };
    let src = varint(&mut i)?;
    let dst = varint(&mut i)?;
    if src != base.len() as u64 {
        return Err(bad("its base has another size"));
    }
    if dst > MAX_OBJECT {
        return no(format!("a delta result of {dst} bytes"));
    }
    let dst = usize::try_from(dst).map_err(|_| bad("too large"))?;
    let mut out = Vec::with_capacity(dst);
    while let Some(&cmd) = delta.get(i) {
        i += 1;
        if cmd & 0x80 != 0 {
            let mut off = 0usize;
            let mut len = 0usize;
            for bit in 0..4 {
                if cmd & (1 << bit) != 0 {
                    off |= usize::from(*delta.get(i).ok_or_else(|| bad("cut short"))?) << (8 * bit);
                    i += 1;
                }
            }
            for bit in 0..3 {
                if cmd & (0x10 << bit) != 0 {
                    len |= usize::from(*delta.get(i).ok_or_else(|| bad("cut short"))?) << (8 * bit);
                    i += 1;
                }
            }
            if len == 0 {
                len = 0x10000;
            }
            let piece = off
                .checked_add(len)
                .and_then(|end| base.get(off..end))
                .ok_or_else(|| bad("a copy outside its base"))?;
            if out.len() + piece.len() > dst {
                return Err(bad("longer than announced"));
            }
            out.extend_from_slice(piece);
        } else if cmd != 0 {
            let n = usize::from(cmd);
            let piece = delta.get(i..i + n).ok_or_else(|| bad("cut short"))?;
            i += n;
            if out.len() + n > dst {
                return Err(bad("longer than announced"));
            }
            out.extend_from_slice(piece);
        } else {
            return Err(bad("opcode 0"));
        }
    }
    if out.len() != dst {
        return Err(bad("shorter than announced"));
    }
    Ok(out)
}

/// One objects directory and its packs (opened on first need).
#[derive(Debug)]
struct Dir {
    path: PathBuf,
    packs: Option<Vec<Pack>>,
}

impl Dir {
    fn packs(&mut self) -> Result<&[Pack], Unreadable> {
        if self.packs.is_none() {
            self.packs = Some(list_packs(&self.path)?);
        }
        Ok(self.packs.as_deref().unwrap_or(&[]))
    }
}

/// The packs of an objects directory (an `.idx` without its `.pack` is left out, as git does).
fn list_packs(objects: &Path) -> Result<Vec<Pack>, Unreadable> {
    let dir = objects.join("pack");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut idx: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "idx"))
        .collect();
    if idx.len() > MAX_PACKS {
        return no(format!("more than {MAX_PACKS} packs in {}", dir.display()));
    }
    idx.sort();
    let mut packs = Vec::with_capacity(idx.len());
    for p in idx {
        if !p.with_extension("pack").is_file() {
            continue;
        }
        packs.push(Pack::open(&p)?);
    }
    Ok(packs)
}

/// The directories `objects/info/alternates` of `objects` names (relative ones resolved
/// against `objects`), comments and blank lines skipped.
fn alternates_of(objects: &Path) -> Result<Vec<PathBuf>, Unreadable> {
    let file = objects.join("info/alternates");
    let text = match std::fs::read(&file) {
        Ok(t) if t.len() <= 1024 * 1024 => t,
        Ok(_) => return no(format!("{}: too large", file.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return no(format!("{}: {e}", file.display())),
    };
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(&text).lines() {
        let line = line.trim_end_matches('\r');
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('"') {
            return no(format!("{}: a quoted path", file.display()));
        }
        let p = Path::new(line);
        out.push(if p.is_absolute() {
            p.to_path_buf()
        } else {
            objects.join(p)
        });
    }
    Ok(out)
}

/// A repository's object database: its objects directory and its alternates.
#[derive(Debug)]
pub struct Odb {
    dirs: Vec<Dir>,
}

impl Odb {
    /// Opens the objects directory `objects` and, recursively, its alternates.
    ///
    /// # Errors
    /// An alternates file that cannot be read, or a chain deeper than
    /// [`MAX_ALTERNATE_DEPTH`].
    pub fn open(objects: &Path) -> Result<Odb, Unreadable> {
        let mut dirs: Vec<Dir> = Vec::new();
        let mut seen: Vec<PathBuf> = Vec::new();
        let mut todo = vec![(objects.to_path_buf(), 0usize)];
        while let Some((path, depth)) = todo.pop() {
            let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            if depth > MAX_ALTERNATE_DEPTH {
                return no(format!("alternates deeper than {MAX_ALTERNATE_DEPTH}"));
            }
            if !path.is_dir() {
                if depth == 0 {
                    return no(format!("{}: not a directory", path.display()));
                }
                // git warns and goes on without a missing alternate.
                continue;
            }
            let alts = alternates_of(&path)?;
            dirs.push(Dir { path, packs: None });
            // Depth first, in the file's order.
            for a in alts.into_iter().rev() {
                todo.push((a, depth + 1));
            }
        }
        Ok(Odb { dirs })
    }

    /// The object `oid`.
    ///
    /// # Errors
    /// Not found (after listing the packs again), or unreadable (see the module doc).
    pub fn read(&mut self, oid: &Oid) -> Result<Object, Unreadable> {
        match self.find_read(oid)? {
            Some(o) => Ok(o),
            None => {
                // A repack may have moved it: list the packs again, once.
                for d in &mut self.dirs {
                    d.packs = None;
                }
                self.find_read(oid)?
                    .ok_or_else(|| Unreadable(format!("object {} not found", hex(oid))))
            }
        }
    }

    /// Where `oid` is: read whole when loose, located when packed.
    fn locate(&mut self, oid: &Oid) -> Result<Option<Located>, Unreadable> {
        for d in 0..self.dirs.len() {
            if let Some(o) = read_loose(&self.dirs[d].path, oid)? {
                return Ok(Some(Located::Loose(o)));
            }
            for (p, pack) in self.dirs[d].packs()?.iter().enumerate() {
                if let Some(offset) = pack.find(oid)? {
                    return Ok(Some(Located::Packed(d, p, offset)));
                }
            }
        }
        Ok(None)
    }

    fn find_read(&mut self, oid: &Oid) -> Result<Option<Object>, Unreadable> {
        match self.locate(oid)? {
            None => Ok(None),
            Some(Located::Loose(o)) => Ok(Some(o)),
            Some(Located::Packed(d, p, offset)) => self.read_packed(d, p, offset).map(Some),
        }
    }

    /// The entry at `offset` of pack `p` of directory `d`, its delta chain followed (through
    /// `REF_DELTA` bases anywhere in the database) and applied.
    fn read_packed(
        &mut self,
        mut d: usize,
        mut p: usize,
        mut offset: u64,
    ) -> Result<Object, Unreadable> {
        let mut deltas: Vec<Vec<u8>> = Vec::new();
        let mut delta_bytes = 0usize;
        let base = loop {
            let pack = self.dirs[d]
                .packs
                .as_ref()
                .and_then(|v| v.get(p))
                .ok_or_else(|| Unreadable("a pack closed while read".into()))?;
            let h = pack.header(offset)?;
            let kind = match h.base {
                Base::None(kind) => Some(kind),
                Base::Offset(_) | Base::Id(_) => None,
            };
            if let Some(kind) = kind {
                break Object {
                    kind,
                    data: pack.inflate_at(h.data_at, h.size)?,
                };
            }
            if deltas.len() >= MAX_DELTA_CHAIN {
                return no(format!("a delta chain longer than {MAX_DELTA_CHAIN}"));
            }
            let delta = pack.inflate_at(h.data_at, h.size)?;
            delta_bytes += delta.len();
            if delta_bytes as u64 > 2 * MAX_OBJECT {
                return no("a delta chain of more than twice the object cap");
            }
            deltas.push(delta);
            match h.base {
                Base::Offset(at) => offset = at,
                Base::Id(id) => match pack.find(&id)? {
                    Some(at) => offset = at,
                    None => match self.locate(&id)? {
                        Some(Located::Loose(o)) => break o,
                        Some(Located::Packed(d2, p2, at)) => (d, p, offset) = (d2, p2, at),
                        None => {
                            return no(format!("the delta base {} not found", hex(&id)));
                        }
                    },
                },
                Base::None(_) => {}
            }
        };
        deltas.iter().rev().try_fold(base, |o, delta| {
            Ok(Object {
                kind: o.kind,
                data: apply_delta(&o.data, delta)?,
            })
        })
    }
}

/// Where an object is.
enum Located {
    Loose(Object),
    Packed(usize, usize, u64),
}

/// The loose object `oid` of `objects`, `None` when there is no such file.
fn read_loose(objects: &Path, oid: &Oid) -> Result<Option<Object>, Unreadable> {
    let h = hex(oid);
    let path = objects.join(&h[..2]).join(&h[2..]);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return no(format!("{}: {e}", path.display())),
    };
    let len = file
        .metadata()
        .map_err(|e| Unreadable(format!("{}: {e}", path.display())))?
        .len();
    if len > MAX_OBJECT + 1024 {
        return no(format!(
            "{}: larger than {MAX_OBJECT} bytes",
            path.display()
        ));
    }
    let mut packed = vec![0u8; usize::try_from(len).unwrap_or(0)];
    read_exact_at(&file, &mut packed, 0)?;
    // The header first (at most 64 bytes), then the whole of the announced size.
    let bad = |why: &str| Unreadable(format!("{}: {why}", path.display()));
    let mut state = InflateState::new_boxed(DataFormat::Zlib);
    let mut head = [0u8; 64];
    let r = inflate(&mut state, &packed, &mut head, MZFlush::None);
    let (consumed, got) = (r.bytes_consumed, r.bytes_written);
    if let Err(e) = r.status
        && e != MZError::Buf
    {
        return Err(bad(&format!("zlib: {e:?}")));
    }
    let nul = head[..got]
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| bad("no header"))?;
    let (name, size) = head[..nul].split_at(
        head[..nul]
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| bad("no header"))?,
    );
    let kind = Kind::of_name(name).ok_or_else(|| bad("an unknown type"))?;
    let size: u64 = std::str::from_utf8(&size[1..])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("a bad size"))?;
    if size > MAX_OBJECT {
        return no(format!(
            "{}: larger than {MAX_OBJECT} bytes",
            path.display()
        ));
    }
    let size = usize::try_from(size).map_err(|_| bad("too large"))?;
    let mut data = vec![0u8; size + 1];
    let already = &head[nul + 1..got];
    if already.len() > size {
        return Err(bad("longer than its header says"));
    }
    data[..already.len()].copy_from_slice(already);
    let mut written = already.len();
    let mut fed = &packed[consumed..];
    let mut ended = matches!(r.status, Ok(MZStatus::StreamEnd));
    while !ended {
        let r = inflate(&mut state, fed, &mut data[written..], MZFlush::None);
        written += r.bytes_written;
        fed = &fed[r.bytes_consumed..];
        match r.status {
            Ok(MZStatus::StreamEnd) => ended = true,
            Ok(_) | Err(MZError::Buf) if r.bytes_consumed + r.bytes_written > 0 => {}
            _ => return Err(bad("a zlib stream cut short or corrupt")),
        }
        if written > size {
            return Err(bad("longer than its header says"));
        }
    }
    if written != size {
        return Err(bad("shorter than its header says"));
    }
    data.truncate(size);
    Ok(Some(Object { kind, data }))
}
