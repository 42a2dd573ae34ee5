//! The git index (`.git/index`, versions 2, 3 and 4) read without git: each entry's path,
//! mode, object id, stage, flags and the stat data git cached for it. Read as a stream (a
//! 100,000-entry index is ~10 MB; nothing of it is kept but what the visitor keeps). What
//! this reader does not know — a split index (`link`), a sparse index (`sdir`), a SHA-256
//! repository — is an error, and the caller falls back to its walk.

use std::io::{BufRead, Read};

/// One index entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Repository-relative, `/`-separated.
    pub path: Vec<u8>,
    pub mode: u32,
    /// The object id (SHA-1).
    pub oid: [u8; 20],
    /// 0 for a merged entry, 1–3 for the sides of a conflict.
    pub stage: u8,
    /// `skip-worktree` (sparse checkout): git does not look at the work tree for it.
    pub skip_worktree: bool,
    /// `git add -N`: the path is known, its content not yet staged.
    pub intent_to_add: bool,
    /// The stat data cached when git last saw the file (32-bit fields as git stores them).
    pub stat: Stat,
}

/// Stat data of an index entry (each field truncated to 32 bits, as git stores it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stat {
    pub ctime: (u32, u32),
    pub mtime: (u32, u32),
    pub dev: u32,
    pub ino: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u32,
}

/// Why the index could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexError(pub String);

impl std::fmt::Display for IndexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "git index: {}", self.0)
    }
}

fn err<T>(what: impl Into<String>) -> Result<T, IndexError> {
    Err(IndexError(what.into()))
}

fn read_n<const N: usize>(r: &mut impl Read) -> Result<[u8; N], IndexError> {
    let mut b = [0u8; N];
    r.read_exact(&mut b)
        .map_err(|e| IndexError(format!("truncated: {e}")))?;
    Ok(b)
}

fn be32(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(x)
}

/// Longest path accepted (a bound on a corrupt or planted index).
const MAX_PATH: usize = 64 * 1024;

/// Reads the index from `r`, handing each entry to `visit` in index order (sorted by path,
/// then stage). Returns the number of entries.
///
/// # Errors
/// Not an index, a version other than 2–4, a truncated entry, or an extension this reader
/// cannot honour (split or sparse index).
pub fn read(mut r: impl BufRead, mut visit: impl FnMut(Entry)) -> Result<u32, IndexError> {
    let header: [u8; 12] = read_n(&mut r)?;
    if &header[..4] != b"DIRC" {
        return err("no DIRC signature");
    }
    let version = be32(&header, 4);
    if !(2..=4).contains(&version) {
        return err(format!("version {version} is not supported"));
    }
    let count = be32(&header, 8);
    let mut prev: Vec<u8> = Vec::new();
    for _ in 0..count {
        let fixed: [u8; 62] = read_n(&mut r)?;
        let stat = Stat {
            ctime: (be32(&fixed, 0), be32(&fixed, 4)),
            mtime: (be32(&fixed, 8), be32(&fixed, 12)),
            dev: be32(&fixed, 16),
            ino: be32(&fixed, 20),
            uid: be32(&fixed, 28),
            gid: be32(&fixed, 32),
            size: be32(&fixed, 36),
        };
        let mode = be32(&fixed, 24);
        let mut oid = [0u8; 20];
        oid.copy_from_slice(&fixed[40..60]);
        let flags = u16::from_be_bytes([fixed[60], fixed[61]]);
        let mut entry_len = 62usize;
        let (mut skip_worktree, mut intent_to_add) = (false, false);
        if flags & 0x4000 != 0 {
            if version < 3 {
                return err("extended flags in a version 2 index");
            }
            let ext = u16::from_be_bytes(read_n::<2>(&mut r)?);
            skip_worktree = ext & 0x4000 != 0;
            intent_to_add = ext & 0x2000 != 0;
            entry_len += 2;
        }
        let stage = ((flags >> 12) & 3) as u8;
        let path = if version == 4 {
            // The number of bytes to drop from the previous path, then the rest, NUL-ended.
            let strip = read_varint(&mut r)?;
            let keep = prev
                .len()
                .checked_sub(usize::try_from(strip).unwrap_or(usize::MAX))
                .ok_or_else(|| IndexError("a path strips more than its predecessor".into()))?;
            let mut suffix = Vec::new();
            r.by_ref()
                .take(MAX_PATH as u64)
                .read_until(0, &mut suffix)
                .map_err(|e| IndexError(e.to_string()))?;
            if suffix.pop() != Some(0) {
                return err("a path without its NUL");
            }
            let mut p = prev[..keep].to_vec();
            p.extend_from_slice(&suffix);
            p
        } else {
            let mut p = Vec::new();
            r.by_ref()
                .take(MAX_PATH as u64)
                .read_until(0, &mut p)
                .map_err(|e| IndexError(e.to_string()))?;
            if p.pop() != Some(0) {
                return err("a path without its NUL");
            }
            // Entries are padded with NULs to a multiple of 8 bytes (1 to 8 NULs in all).
            let used = entry_len + p.len() + 1;
            let pad = (8 - used % 8) % 8;
            let mut skip = [0u8; 8];
            r.read_exact(&mut skip[..pad])
                .map_err(|e| IndexError(format!("truncated: {e}")))?;
            p
        };
        if path.is_empty() {
            return err("an empty path");
        }
        prev.clone_from(&path);
        visit(Entry {
            path,
            mode,
            oid,
            stage,
            skip_worktree,
            intent_to_add,
            stat,
        });
    }
    // Extensions: 4-byte signature, 4-byte size, data; the last 20 bytes are the checksum.
    loop {
        let mut sig = [0u8; 4];
        match r.read(&mut sig[..1]) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return err(e.to_string()),
        }
        r.read_exact(&mut sig[1..])
            .map_err(|e| IndexError(format!("truncated: {e}")))?;
        if !sig[0].is_ascii_uppercase() && sig != *b"link" && sig != *b"sdir" {
            // Not an extension signature: the trailing checksum (or garbage) — done.
            break;
        }
        match &sig {
            b"link" => return err("a split index is not supported"),
            b"sdir" => return err("a sparse index is not supported"),
            _ => {}
        }
        let size = u32::from_be_bytes(read_n::<4>(&mut r)?);
        std::io::copy(&mut r.by_ref().take(u64::from(size)), &mut std::io::sink())
            .map_err(|e| IndexError(e.to_string()))?;
    }
    Ok(count)
}

/// The offset varint of index v4 (git's `decode_varint`).
fn read_varint(r: &mut impl Read) -> Result<u64, IndexError> {
    let [mut c] = read_n::<1>(r)?;
    let mut val = u64::from(c & 127);
    while c & 128 != 0 {
        val = val
            .checked_add(1)
            .and_then(|v| v.checked_mul(128))
            .ok_or_else(|| IndexError("a varint overflows".into()))?;
        [c] = read_n::<1>(r)?;
        val += u64::from(c & 127);
    }
    Ok(val)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::git_in;

    fn entries(dir: &std::path::Path) -> Vec<Entry> {
        let bytes = std::fs::read(dir.join(".git/index")).unwrap();
        let mut out = Vec::new();
        read(&bytes[..], |e| out.push(e)).unwrap();
        out
    }

    #[test]
    fn reads_what_git_wrote_in_every_version() {
        for version in ["2", "3", "4"] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            git_in(d, &["init", "-q"]);
            std::fs::create_dir_all(d.join("src/deep")).unwrap();
            std::fs::write(d.join("src/deep/a b.rs"), "a").unwrap();
            std::fs::write(d.join("src/lib.rs"), "lib").unwrap();
            std::fs::write(d.join("x"), "").unwrap();
            std::fs::write(d.join("late"), "l").unwrap();
            git_in(d, &["add", "src", "x"]);
            git_in(d, &["add", "-N", "late"]);
            git_in(d, &["update-index", "--index-version", version]);
            if version != "2" {
                git_in(d, &["update-index", "--skip-worktree", "x"]);
            }
            let e = entries(d);
            let paths: Vec<&[u8]> = e.iter().map(|e| e.path.as_slice()).collect();
            assert_eq!(
                paths,
                vec![&b"late"[..], b"src/deep/a b.rs", b"src/lib.rs", b"x"],
                "v{version}"
            );
            assert!(e[0].intent_to_add, "v{version}");
            assert_eq!(e[2].mode, 0o100_644);
            assert_eq!(e[2].stat.size, 3);
            assert_eq!(e[3].skip_worktree, version != "2", "v{version}");
            // `git hash-object src/lib.rs`
            assert_eq!(
                e[2].oid
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>(),
                crate::git::snapshot::blob_hex(b"lib")
            );
        }
    }

    #[test]
    fn split_and_broken_indexes_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git_in(d, &["init", "-q"]);
        std::fs::write(d.join("a"), "a").unwrap();
        git_in(d, &["add", "a"]);
        let bytes = std::fs::read(d.join(".git/index")).unwrap();
        for cut in 0..bytes.len().saturating_sub(20) {
            let _ = read(&bytes[..cut], |_| {});
        }
        assert!(read(&b"DIRX\0\0\0\x02\0\0\0\0"[..], |_| {}).is_err());
        git_in(d, &["update-index", "--split-index"]);
        let bytes = std::fs::read(d.join(".git/index")).unwrap();
        assert!(read(&bytes[..], |_| {}).is_err());
    }
}
