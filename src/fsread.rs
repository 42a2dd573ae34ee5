//! Reading a file hank needs: only a regular file, and never more than a limit.
//!
//! Every file hank reads is in the agent's reach (the project, `.hank/`), so it may have
//! become a FIFO (reading would block for ever), a device (`/dev/zero`: endless), a
//! directory, a symbolic link to any of those, or a huge file. [`read`] opens without
//! blocking (`O_NONBLOCK`, so opening a FIFO returns at once), looks at what it opened
//! (`fstat`, so a link swapped in between cannot fool it) and reads at most the limit. The
//! errors are `io::Error`s whose message says what the file is and what was expected, so the
//! caller's "failed to read PATH: …" names the file and the problem.
//!
//! [`Follow::No`] is for hank's own files under `.hank/`: a symbolic link there is refused
//! (`O_NOFOLLOW`), never followed out of the project.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! reading a file hank needs: a regular file only (`O_NONBLOCK` open, `fstat` of what was opened: a
//! FIFO, a device or a link out is an error naming it), at most a limit; `read_stamped` +
//! `Stamp::holds` (device, inode, size, mtime, ctime; none for a file changed in the last 50 ms):
//! the engine keeps fix_plan.md as the measure read it and the next look only `stat`s it

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Limit of small configuration files (`.hankrc`, agent profiles, `status.json`).
pub const CONFIG_LIMIT: u64 = 1024 * 1024;
/// Limit of the files the agent is given or keeps (PROMPT.md, fix_plan.md).
pub const DOCUMENT_LIMIT: u64 = 16 * 1024 * 1024;
/// Limit of hank's state files (`state.json`, the call log).
pub const STATE_LIMIT: u64 = 64 * 1024 * 1024;

/// Whether a symbolic link at the path is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// The user's files (PROMPT.md may be a link to a shared prompt): followed, and the
    /// target must be a regular file.
    Yes,
    /// Hank's own files: a link is refused.
    No,
}

/// What a file that is not a regular file is, in words.
pub(crate) fn kind_of(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Opens `path` for reading if it is a regular file (see the module doc).
///
/// # Errors
/// `NotFound` when it does not exist; `InvalidInput` (with a message naming what it is) when
/// it is not a regular file or is a link and `follow` is [`Follow::No`]; other I/O errors.
pub fn open_regular(path: &Path, follow: Follow) -> io::Result<File> {
    let mut flags = nix::fcntl::OFlag::O_NONBLOCK.bits();
    if follow == Follow::No {
        flags |= nix::fcntl::OFlag::O_NOFOLLOW.bits();
    }
    let file = match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(f) => f,
        Err(e) if follow == Follow::No && e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(invalid(
                "is a symbolic link; hank does not follow links among its own files (remove it)"
                    .into(),
            ));
        }
        Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => {
            // A socket or a FIFO without a writer on some systems.
            let what =
                std::fs::metadata(path).map_or("not a regular file", |m| kind_of(m.file_type()));
            return Err(invalid(format!("is {what}; expected a regular file")));
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(invalid(format!(
            "is {}; expected a regular file",
            kind_of(meta.file_type())
        )));
    }
    // Back to blocking reads (a regular file never blocks, but keep the usual semantics).
    let _ = nix::fcntl::fcntl(
        &file,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    );
    Ok(file)
}

/// The whole content of the regular file `path`, at most `limit` bytes.
///
/// # Errors
/// As [`open_regular`], and `InvalidData` when the file holds more than `limit` bytes.
pub fn read(path: &Path, limit: u64, follow: Follow) -> io::Result<Vec<u8>> {
    let file = open_regular(path, follow)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(bytes)
}

/// What tells a file's content apart without reading it again: device, inode, size, and the
/// modification and change times. A write that keeps all of them equal is possible only
/// within one tick of the filesystem's clock, so a stamp is taken only of a file whose last
/// change is older than [`Stamp::SETTLED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// How old a file's last change must be for its stamp to stand for its content (a few
    /// ticks of the coarsest kernel clock filesystems stamp files with, 100 Hz).
    pub const SETTLED: std::time::Duration = std::time::Duration::from_millis(50);

    fn of(m: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// The stamp of a file last changed before `now - SETTLED`, else `None`.
    fn settled(m: &std::fs::Metadata, now: std::time::SystemTime) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let changed = std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(
            u64::try_from(m.ctime()).ok()?,
            u32::try_from(m.ctime_nsec()).ok()?,
        ))?;
        let age = now.duration_since(changed).ok()?;
        (age >= Self::SETTLED).then(|| Stamp::of(m))
    }

    /// Whether the regular file at `path` still has this stamp (`follow` as for [`read`]).
    #[must_use]
    pub fn holds(&self, path: &Path, follow: Follow) -> bool {
        let meta = match follow {
            Follow::Yes => std::fs::metadata(path),
            Follow::No => std::fs::symlink_metadata(path),
        };
        meta.is_ok_and(|m| m.file_type().is_file() && Stamp::of(&m) == *self)
    }
}

/// [`read`], with the file's [`Stamp`] as it was opened (`None` when it changed too
/// recently to be told apart by its stamp).
///
/// # Errors
/// As [`read`].
pub fn read_stamped(
    path: &Path,
    limit: u64,
    follow: Follow,
) -> io::Result<(Vec<u8>, Option<Stamp>)> {
    let file = open_regular(path, follow)?;
    let stamp = file
        .metadata()
        .ok()
        .and_then(|m| Stamp::settled(&m, std::time::SystemTime::now()));
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok((bytes, stamp))
}

fn too_large(limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "is larger than {} (the most hank reads from this file)",
            human(limit)
        ),
    )
}

/// `Ok(None)` for a missing file, else [`read`].
///
/// # Errors
/// As [`read`], except `NotFound`.
pub fn read_if_exists(path: &Path, limit: u64, follow: Follow) -> io::Result<Option<Vec<u8>>> {
    match read(path, limit, follow) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// What stands at `path` when it is not a regular file (a link is looked through when
/// `follow`): `None` for a regular file or nothing at all.
#[must_use]
pub fn not_regular(path: &Path, follow: Follow) -> Option<&'static str> {
    let meta = match follow {
        Follow::Yes => std::fs::metadata(path),
        Follow::No => std::fs::symlink_metadata(path),
    };
    match meta {
        Ok(m) if m.file_type().is_file() => None,
        Ok(m) => Some(kind_of(m.file_type())),
        Err(_) => None,
    }
}

fn human(n: u64) -> String {
    if n >= 1024 * 1024 && n.is_multiple_of(1024 * 1024) {
        format!("{} MiB", n / (1024 * 1024))
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_stamp_is_taken_only_of_a_settled_file_and_breaks_on_any_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.md");
        let written = std::time::Instant::now();
        std::fs::write(&p, b"- [ ] one\n").unwrap();
        // Just written: a rewrite within the same clock tick could keep every field.
        let (text, stamp) = read_stamped(&p, 100, Follow::Yes).unwrap();
        assert_eq!(text, b"- [ ] one\n");
        if written.elapsed() < Stamp::SETTLED {
            assert_eq!(stamp, None);
        }
        std::thread::sleep(Stamp::SETTLED + std::time::Duration::from_millis(20));
        let (_, stamp) = read_stamped(&p, 100, Follow::Yes).unwrap();
        let stamp = stamp.expect("a settled file has a stamp");
        assert!(stamp.holds(&p, Follow::Yes));
        // Same length, new content: the change time moved.
        std::fs::write(&p, b"- [x] one\n").unwrap();
        assert!(!stamp.holds(&p, Follow::Yes));
        // Replaced by a rename, or gone.
        let (_, stamp) = {
            std::thread::sleep(Stamp::SETTLED + std::time::Duration::from_millis(20));
            read_stamped(&p, 100, Follow::Yes).unwrap()
        };
        let stamp = stamp.unwrap();
        std::fs::write(dir.path().join("new"), b"- [x] one\n").unwrap();
        std::fs::rename(dir.path().join("new"), &p).unwrap();
        assert!(!stamp.holds(&p, Follow::Yes));
        std::fs::remove_file(&p).unwrap();
        assert!(!stamp.holds(&p, Follow::Yes));
        // Too large is refused as by `read`.
        std::fs::write(&p, b"0123456789").unwrap();
        assert!(read_stamped(&p, 5, Follow::Yes).is_err());
    }

    #[test]
    fn special_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("plain"), b"hello").unwrap();
        nix::unistd::mkfifo(
            &d.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        std::fs::create_dir(d.join("dir")).unwrap();
        symlink("/dev/zero", d.join("zero")).unwrap();
        symlink(d.join("fifo"), d.join("to-fifo")).unwrap();
        symlink(d.join("plain"), d.join("to-plain")).unwrap();
        symlink(d.join("nowhere"), d.join("dangling")).unwrap();
        // (name, follow, Ok(content) | Err(words in the message))
        type Want = Result<&'static [u8], &'static str>;
        let cases: &[(&str, Follow, Want)] = &[
            ("plain", Follow::Yes, Ok(b"hello")),
            ("plain", Follow::No, Ok(b"hello")),
            ("to-plain", Follow::Yes, Ok(b"hello")),
            ("to-plain", Follow::No, Err("symbolic link")),
            ("fifo", Follow::Yes, Err("FIFO")),
            ("fifo", Follow::No, Err("FIFO")),
            ("to-fifo", Follow::Yes, Err("FIFO")),
            ("dir", Follow::Yes, Err("directory")),
            ("zero", Follow::Yes, Err("character device")),
            ("zero", Follow::No, Err("symbolic link")),
        ];
        for (name, follow, want) in cases {
            let got = read(&d.join(name), 1024, *follow);
            match (want, got) {
                (Ok(bytes), Ok(b)) => assert_eq!(&b, bytes, "{name}"),
                (Err(words), Err(e)) => {
                    assert!(e.to_string().contains(words), "{name}: {e}");
                    assert!(
                        e.to_string().contains("expected a regular file") || words.contains("link"),
                        "{name}: {e}"
                    );
                }
                (w, g) => panic!("{name} {follow:?}: want {w:?}, got {g:?}"),
            }
        }
        assert_eq!(
            read_if_exists(&d.join("missing"), 10, Follow::Yes).unwrap(),
            None
        );
        assert_eq!(
            read_if_exists(&d.join("dangling"), 10, Follow::Yes).unwrap(),
            None
        );
        assert_eq!(
            not_regular(&d.join("fifo"), Follow::Yes),
            Some("a FIFO (named pipe)")
        );
        assert_eq!(not_regular(&d.join("to-plain"), Follow::Yes), None);
        assert_eq!(
            not_regular(&d.join("to-plain"), Follow::No),
            Some("a symbolic link")
        );
        assert_eq!(not_regular(&d.join("missing"), Follow::Yes), None);
    }

    #[test]
    fn the_limit_is_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![b'x'; 2048]).unwrap();
        assert_eq!(read(&p, 2048, Follow::Yes).unwrap().len(), 2048);
        let e = read(&p, 2047, Follow::Yes).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("larger than 2047 bytes"), "{e}");
        let e = read(&p, 1024, Follow::Yes).unwrap_err();
        assert!(e.to_string().contains("larger than 1 KiB"), "{e}");
    }
}
