//! The per-user state directory: what hank keeps about a project **outside** the project, where
//! the agent (which can write anything inside the project) cannot reach it — the approved
//! configuration fingerprint, the copy of the call ledger, usage-window readings shared by
//! every run of the same user.
//!
//! Location: `$XDG_STATE_HOME/hank` when `XDG_STATE_HOME` is an absolute path, else
//! `$HOME/.local/state/hank` (the XDG Base Directory default). Each project gets its own folder
//! `projects/<name>-<hash>`, where `<name>` is the project folder's name (for people reading the
//! directory) and `<hash>` a 64-bit FNV-1a of the project's canonical path (so two projects with
//! the same folder name never share one). Folders are created 0700; files written there use the
//! same atomic 0600 writes as `.hank/`.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{HankError, Result};

/// The root of hank's per-user state, from the environment (not created).
pub fn root() -> Result<PathBuf> {
    root_from(
        std::env::var_os("XDG_STATE_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

/// [`root`] with the environment passed in (testable).
pub fn root_from(xdg_state_home: Option<PathBuf>, home: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(x) = xdg_state_home.filter(|p| p.is_absolute()) {
        return Ok(x.join("hank"));
    }
    match home.filter(|p| p.is_absolute()) {
        Some(h) => Ok(h.join(".local").join("state").join("hank")),
        None => Err(HankError::usage(
            "cannot find the per-user state directory: neither XDG_STATE_HOME nor HOME is an \
             absolute path (set HOME)",
        )),
    }
}

/// The folder name of a project under `projects/` (pure: the canonical path in, the name out).
pub fn project_key(canonical_project: &Path) -> String {
    let name: String = canonical_project
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let name = if name.is_empty() {
        "root".to_string()
    } else {
        name
    };
    format!(
        "{name}-{:016x}",
        fnv1a(canonical_project.as_os_str().as_encoded_bytes())
    )
}

/// The per-user folder of the project at `project_root`, created (0700) when missing.
pub fn project_dir(project_root: &Path) -> Result<PathBuf> {
    let canonical = fs::canonicalize(project_root)
        .map_err(|e| HankError::io("resolve the project path", project_root, e))?;
    let dir = root()?.join("projects").join(project_key(&canonical));
    ensure_private_dir(&dir)?;
    remember(&dir, &canonical);
    Ok(dir)
}

/// The record naming the project a per-user folder is for (`hank serve` lists them).
pub const PROJECT_RECORD: &str = "project.json";

/// Writes `dir`'s [`PROJECT_RECORD`] when it is missing (one `stat` otherwise). A failed write
/// is not an error of the command that asked for the folder: the project is then only missing
/// from `hank serve`'s list until the next try.
fn remember(dir: &Path, canonical: &Path) {
    let path = dir.join(PROJECT_RECORD);
    if fs::symlink_metadata(&path).is_ok() {
        return;
    }
    let record = crate::store::schema::ProjectRecord {
        schema_version: crate::store::schema::PROJECT_RECORD_SCHEMA,
        path: canonical.to_path_buf(),
    };
    if let Ok(bytes) = serde_json::to_vec_pretty(&record) {
        let _ = crate::store::write_atomic(&path, &bytes, false);
    }
}

/// A project hank keeps per-user state for: its folder's name under `projects/` and the
/// project's path as its record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownProject {
    /// `<name>-<hash>` ([`project_key`]).
    pub key: String,
    pub path: PathBuf,
}

/// Every project under `root`'s `projects/` with a readable [`PROJECT_RECORD`] whose path
/// still has the key of its folder (a record copied into another folder is not believed),
/// sorted by key. A folder without a record (written by an older hank) is left out.
#[must_use]
pub fn known_projects(root: &Path) -> Vec<KnownProject> {
    let Ok(entries) = fs::read_dir(root.join("projects")) else {
        return Vec::new();
    };
    let mut out: Vec<KnownProject> = entries
        .flatten()
        .filter_map(|e| {
            let key = e.file_name().to_str()?.to_owned();
            let bytes = crate::fsread::read(
                &e.path().join(PROJECT_RECORD),
                64 * 1024,
                crate::fsread::Follow::No,
            )
            .ok()?;
            let record: crate::store::schema::ProjectRecord =
                serde_json::from_slice(&bytes).ok()?;
            (project_key(&record.path) == key).then_some(KnownProject {
                key,
                path: record.path,
            })
        })
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// A folder directly under the per-user root (`name` is a plain name such as `windows`),
/// created 0700 when missing.
pub fn shared_dir(name: &str) -> Result<PathBuf> {
    let dir = root()?.join(name);
    ensure_private_dir(&dir)?;
    Ok(dir)
}

/// Creates `dir` and its parents with mode 0700; refuses a symlink or a non-directory there.
/// An exclusive lock on the file `path` (created 0600, never opened through a link), held
/// until the file is closed.
///
/// # Errors
/// It cannot be opened or locked.
pub fn lock_file(path: &Path) -> Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| HankError::io("failed to open", path, e))?;
    file.lock()
        .map_err(|e| HankError::io("failed to lock", path, e))?;
    Ok(file)
}

fn ensure_private_dir(dir: &Path) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {
            if m.permissions().mode() & 0o077 != 0 {
                let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
            }
            Ok(())
        }
        Ok(_) => Err(HankError::Unreadable {
            path: dir.to_path_buf(),
            problem: "is not a directory (hank keeps its per-user state there; move it away)"
                .into(),
        }),
        Err(_) => fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| HankError::io("create", dir, e)),
    }
}

/// 64-bit FNV-1a: stable across builds and platforms (std's hasher is not).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_projects_are_the_folders_with_a_record_of_their_own_path() {
        let root = tempfile::tempdir().unwrap();
        let a = PathBuf::from("/work/alpha");
        let b = PathBuf::from("/work/beta");
        for p in [&a, &b] {
            let dir = root.path().join("projects").join(project_key(p));
            fs::create_dir_all(&dir).unwrap();
            remember(&dir, p);
        }
        // A record copied into another folder, a folder without one, a broken one.
        let copied = root.path().join("projects/gamma-0000000000000000");
        fs::create_dir_all(&copied).unwrap();
        remember(&copied, &a);
        fs::create_dir_all(root.path().join("projects/old-1111111111111111")).unwrap();
        let broken = root.path().join("projects/broken-2222222222222222");
        fs::create_dir_all(&broken).unwrap();
        fs::write(broken.join(PROJECT_RECORD), "{").unwrap();
        let got = known_projects(root.path());
        let paths: Vec<&Path> = got.iter().map(|k| k.path.as_path()).collect();
        assert_eq!(paths, [a.as_path(), b.as_path()]);
        assert_eq!(got[0].key, project_key(&a));
        // Written once, 0600; a second call leaves it as it is.
        let record = root
            .path()
            .join("projects")
            .join(project_key(&a))
            .join(PROJECT_RECORD);
        assert_eq!(
            fs::metadata(&record).unwrap().permissions().mode() & 0o777,
            0o600
        );
        remember(record.parent().unwrap(), &b);
        assert_eq!(known_projects(root.path())[0].path, a);
        assert!(known_projects(&root.path().join("missing")).is_empty());
    }

    #[test]
    fn root_prefers_an_absolute_xdg_state_home() {
        let table = [
            (Some("/x/state"), Some("/home/u"), Some("/x/state/hank")),
            (
                Some("relative"),
                Some("/home/u"),
                Some("/home/u/.local/state/hank"),
            ),
            (None, Some("/home/u"), Some("/home/u/.local/state/hank")),
            (None, Some("rel"), None),
            (None, None, None),
        ];
        for (xdg, home, want) in table {
            let got = root_from(xdg.map(PathBuf::from), home.map(PathBuf::from)).ok();
            assert_eq!(got, want.map(PathBuf::from), "xdg={xdg:?} home={home:?}");
        }
    }

    #[test]
    fn project_keys_are_stable_readable_and_distinct() {
        let a = project_key(Path::new("/home/u/src/my app"));
        let b = project_key(Path::new("/home/v/src/my app"));
        assert!(a.starts_with("my_app-"), "{a}");
        assert_ne!(a, b);
        assert_eq!(a, project_key(Path::new("/home/u/src/my app")));
        assert_eq!(project_key(Path::new("/")).split('-').next(), Some("root"));
        // FNV-1a's published test vector: the empty input.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    }
}
