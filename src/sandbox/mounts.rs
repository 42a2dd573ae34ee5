//! The agent's own view of the file system, where hank makes it namespaces (issue 47): Landlock
//! does not govern `connect()` on a Unix socket at a path, so the user's sockets — an SSH agent
//! in `/tmp/ssh-*`, tmux's server in `/tmp/tmux-UID`, D-Bus, gpg-agent and Wayland in
//! `/run/user/UID`, Docker's `/run/docker.sock`, SSH control masters in `~/.ssh` — would be
//! reachable by name. In the agent's mount namespace (made with its network namespace, the same
//! process: `super::netns::unshare_net`) every top folder of `/` that is not the system's
//! read-only part (`/home`, `/root`, `/tmp`, `/run`, `/var`, `/srv`, `/mnt`, `/media`, any
//! other), and `/dev/shm`, is covered with an empty `tmpfs`; the paths the agent is granted
//! beneath them (its project, TMPDIR, its client's state and configuration, SANDBOX_READ…) are
//! bound back in place ([`hide_ungranted`]). A socket elsewhere is then simply not there. The
//! system's folders (`/usr`, `/etc`, `/proc`, `/sys`, `/dev`…) stay as they are; a socket in a
//! granted folder (the project's own) stays reachable.
//!
//! The namespace's mounts are private (`MS_PRIVATE`, recursively) before any is made: nothing
//! is seen outside the agent's process tree, and nothing is left when it ends.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, open};
use nix::mount::{MsFlags, mount};
use nix::sys::stat::Mode;

use crate::error::{HankError, Result};

/// The top folders of `/` left as they are: the system's read-only part (`super::SYSTEM_READ`)
/// and `/dev` (its devices are granted one by one).
const KEPT: &[&str] = &[
    "usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt", "proc", "sys", "dev",
    "nix", "boot",
];

/// Folders below a kept one that are covered too.
const ALSO_HIDDEN: &[&str] = &["/dev/shm"];

fn fail(what: &str, path: &Path, e: impl std::fmt::Display) -> HankError {
    HankError::usage(format!("mount namespace: {what} {}: {e}", path.display()))
}

/// The folders to cover (pure over the names found in `/`): each top folder not `KEPT`,
/// and `ALSO_HIDDEN`; a folder that is granted, or lies in a granted path, stays.
#[must_use]
pub fn places(top: &[String], granted: &[PathBuf]) -> Vec<PathBuf> {
    top.iter()
        .filter(|n| !KEPT.contains(&n.as_str()))
        .map(|n| Path::new("/").join(n))
        .chain(ALSO_HIDDEN.iter().map(PathBuf::from))
        .filter(|p| !granted.iter().any(|g| p.starts_with(g)))
        .collect()
}

/// The granted paths to bind back beneath `place` (pure): those strictly beneath it, but none
/// that lies in another of them (a bind brings what it holds).
#[must_use]
pub fn beneath(place: &Path, granted: &[PathBuf]) -> Vec<PathBuf> {
    let mut inside: Vec<PathBuf> = granted
        .iter()
        .filter(|g| g.starts_with(place) && g.as_path() != place)
        .cloned()
        .collect();
    inside.sort();
    inside.dedup();
    let mut out: Vec<PathBuf> = Vec::new();
    for g in inside {
        if !out.iter().any(|o| g.starts_with(o)) {
            out.push(g);
        }
    }
    out
}

/// A granted path held open before its place is covered.
struct Held {
    path: PathBuf,
    fd: OwnedFd,
    dir: bool,
}

/// Covers every place ([`places`]) with an empty `tmpfs` and binds the granted paths beneath it
/// back (`read` and `write`, each as named and as its links resolved when hank froze the rules:
/// `super::Rules::for_agent`). Runs in the agent's process, in
/// its new mount namespace, before Landlock (whose rules then name the paths bound back).
///
/// What it made is returned as a [`View`]: the top folders of `/` it found, and each path it
/// bound back with the file it found there, to tell later whether the view is still true.
///
/// # Errors
/// A mount the kernel refused: the agent does not start.
pub fn hide_ungranted(read: &[PathBuf], write: &[PathBuf]) -> Result<View> {
    let root = Path::new("/");
    mount(
        None::<&str>,
        root,
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| fail("making private", root, e))?;
    // As hank resolved them when it froze the rules (with their links' targets): nothing is
    // resolved again here, from what the agent may have changed since.
    let granted: Vec<PathBuf> = read.iter().chain(write).cloned().collect();
    let top = top_folders().map_err(|e| fail("reading", root, e))?;
    let places: Vec<PathBuf> = places(&top, &granted)
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect();
    // Everything to bind back is opened before any place is covered (a path may pass through
    // another place, by a link).
    let mut plan: Vec<(PathBuf, Vec<Held>)> = Vec::new();
    let mut found = Vec::new();
    for place in places {
        let mut held = Vec::new();
        for path in beneath(&place, &granted) {
            let opened = open(&path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
                .ok()
                .and_then(|fd| Some((nix::sys::stat::fstat(&fd).ok()?, fd)));
            let Some((stat, fd)) = opened else {
                found.push((bytes(&path), None));
                continue;
            };
            found.push((bytes(&path), Some((stat.st_dev, stat.st_ino))));
            let dir = stat.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR;
            held.push(Held { path, fd, dir });
        }
        plan.push((place, held));
    }
    for (place, held) in &plan {
        mount(
            Some("tmpfs"),
            place.as_path(),
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=0755,size=1m"),
        )
        .map_err(|e| fail("covering", place, e))?;
        for h in held {
            bind_back(place, h)?;
        }
    }
    Ok(View { top, found })
}

/// The folders of `/` (their names, sorted; a name that is not UTF-8 is left out, as
/// [`places`] would).
fn top_folders() -> std::io::Result<Vec<String>> {
    let mut top: Vec<String> = std::fs::read_dir("/")?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    top.sort();
    Ok(top)
}

/// What [`hide_ungranted`] made a view of: the top folders of `/` it covered or kept, and each
/// granted path it bound back with the file found there (device and inode; `None`: nothing
/// was there). A view kept for a run (the namespace holder's, `super::netns::hold_here`) is
/// entered by a later call only while it is still true ([`View::still_true`]): a bind holds
/// the file found when it was made, so a path replaced since, or a top folder of `/` made
/// since (uncovered in the view), would make it false.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct View {
    top: Vec<String>,
    /// Each path as its bytes (a path need not be UTF-8).
    found: Vec<(Vec<u8>, Option<FileId>)>,
}

/// A file's device and inode.
type FileId = (u64, u64);

fn bytes(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().to_vec()
}

impl View {
    /// Whether `/` still has the same folders and each path bound back is still the file the
    /// view holds (or still nothing).
    #[must_use]
    pub fn still_true(&self) -> bool {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::MetadataExt;
        top_folders().is_ok_and(|top| top == self.top)
            && self.found.iter().all(|(path, id)| {
                let path = Path::new(std::ffi::OsStr::from_bytes(path));
                std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino())) == *id
            })
    }
}

/// Makes `h`'s path in the `tmpfs` over `place` (its folders, then a folder or an empty file)
/// and binds what was there onto it.
fn bind_back(place: &Path, h: &Held) -> Result<()> {
    if let Some(parent) = h.path.parent()
        && parent != place
    {
        std::fs::create_dir_all(parent).map_err(|e| fail("making", parent, e))?;
    }
    let made = if h.dir {
        std::fs::create_dir(&h.path)
    } else {
        std::fs::File::create(&h.path).map(drop)
    };
    match made {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(fail("making", &h.path, e)),
    }
    let source = format!("/proc/self/fd/{}", h.fd.as_raw_fd());
    mount(
        Some(source.as_str()),
        h.path.as_path(),
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| fail("binding back", &h.path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn a_view_is_true_until_a_bound_path_is_replaced_or_made_or_slash_changes() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let (kept, gone) = (tmp.path().join("kept"), tmp.path().join("gone"));
        std::fs::create_dir(&kept).unwrap();
        let id = |p: &Path| {
            let m = std::fs::metadata(p).unwrap();
            (m.dev(), m.ino())
        };
        let view = View {
            top: top_folders().unwrap(),
            found: vec![(bytes(&kept), Some(id(&kept))), (bytes(&gone), None)],
        };
        assert!(view.still_true());
        // `/` gained a folder since.
        let mut other = view.clone();
        other.top.push("hank-never-a-folder-here".into());
        assert!(!other.still_true());
        // A path that was not there now is.
        std::fs::create_dir(&gone).unwrap();
        assert!(!view.still_true());
        std::fs::remove_dir(&gone).unwrap();
        assert!(view.still_true());
        // The bound folder replaced by another at its path.
        std::fs::rename(&kept, tmp.path().join("old")).unwrap();
        std::fs::create_dir(&kept).unwrap();
        assert!(!view.still_true());
    }

    #[test]
    fn every_top_folder_but_the_systems_is_covered_unless_granted() {
        let top = names(&[
            "usr", "etc", "home", "root", "tmp", "run", "var", "proc", "work",
        ]);
        let granted = vec![PathBuf::from("/work"), PathBuf::from("/tmp/p")];
        let got = places(&top, &granted);
        let want: Vec<PathBuf> = ["/home", "/root", "/tmp", "/run", "/var", "/dev/shm"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn only_the_outermost_granted_paths_beneath_a_place_are_bound_back() {
        let granted: Vec<PathBuf> = [
            "/home/u/p",
            "/home/u/p/.git",
            "/home/u/.claude",
            "/home/u/.claude.json",
            "/home",
            "/tmp/t",
            "/home/u/.claude",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let got = beneath(Path::new("/home"), &granted);
        let want: Vec<PathBuf> = ["/home/u/.claude", "/home/u/.claude.json", "/home/u/p"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(got, want);
    }
}
