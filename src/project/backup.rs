//! Copies of the files hank is about to replace, in `.hank/backup/<timestamp>/` (git-ignored):
//! no command that writes project files loses what the user wrote, `--force` included.
//!
//! The folder is created on the first copy, so a run that replaces nothing leaves no empty
//! folder; two runs in the same second get `<timestamp>-1`, `-2`, ….

use std::path::{Path, PathBuf};

use crate::error::{HankError, Result};

/// Where backups go, relative to the project folder.
pub(crate) const BACKUP_DIR: &str = ".hank/backup";

/// The folder name of a backup made now (`20261122-100000`, local time).
#[must_use]
pub(crate) fn stamp_now() -> String {
    jiff::Zoned::now().strftime("%Y%m%d-%H%M%S").to_string()
}

/// One backup folder, filled file by file.
#[derive(Debug)]
pub(crate) struct Backup {
    project: PathBuf,
    stamp: String,
    folder: Option<PathBuf>,
    saved: Vec<PathBuf>,
}

impl Backup {
    /// A backup of files under `project`, in `.hank/backup/<stamp>/` once something is saved.
    #[must_use]
    pub(crate) fn new(project: &Path, stamp: &str) -> Self {
        Self {
            project: project.to_path_buf(),
            stamp: stamp.to_string(),
            folder: None,
            saved: Vec::new(),
        }
    }

    fn folder(&mut self) -> Result<PathBuf> {
        if let Some(f) = &self.folder {
            return Ok(f.clone());
        }
        let base = self.project.join(BACKUP_DIR);
        std::fs::create_dir_all(&base).map_err(|e| HankError::io("creating folder", &base, e))?;
        let mut n = 0u32;
        loop {
            let name = if n == 0 {
                self.stamp.clone()
            } else {
                format!("{}-{n}", self.stamp)
            };
            let candidate = base.join(name);
            match std::fs::create_dir(&candidate) {
                Ok(()) => {
                    self.folder = Some(candidate.clone());
                    return Ok(candidate);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(e) => return Err(HankError::io("creating folder", &candidate, e)),
            }
        }
    }

    /// Copies the project file `rel` into the backup (same relative path) when it exists and
    /// its content differs from `new_content` (a file replaced by itself needs no copy).
    ///
    /// # Errors
    /// The file cannot be read or copied: the caller must not replace it then.
    pub(crate) fn save_if_changed(&mut self, rel: &str, new_content: &[u8]) -> Result<()> {
        let path = self.project.join(rel);
        let old = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(HankError::io("backing up", &path, e)),
        };
        if old == new_content {
            return Ok(());
        }
        let target = self.folder()?.join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| HankError::io("creating folder", parent, e))?;
        }
        crate::store::write_file_atomic(
            &target,
            &old,
            &crate::store::AtomicWrite {
                mode: 0o600,
                durable: true,
                replace: false,
            },
        )
        .map_err(|e| HankError::io("backing up", &path, e))?;
        self.saved.push(PathBuf::from(rel));
        Ok(())
    }

    /// The backup folder relative to the project, when anything was saved.
    #[must_use]
    pub(crate) fn location(&self) -> Option<PathBuf> {
        self.folder
            .as_ref()
            .map(|f| f.strip_prefix(&self.project).unwrap_or(f).to_path_buf())
    }

    /// The files saved (relative paths).
    #[must_use]
    pub(crate) fn saved(&self) -> &[PathBuf] {
        &self.saved
    }

    /// "backed up N file(s) to …", when anything was saved.
    #[must_use]
    pub(crate) fn message(&self) -> Option<String> {
        let loc = self.location()?;
        Some(format!(
            "backed up {} file(s) hank replaced to {}/: {}",
            self.saved.len(),
            loc.display(),
            self.saved
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_only_changed_existing_files_once_per_folder() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join(".hank")).unwrap();
        std::fs::write(d.join(".hank/fix_plan.md"), "- [ ] mine\n").unwrap();
        std::fs::write(d.join(".hankrc"), "SAME=1\n").unwrap();
        let mut b = Backup::new(d, "20261122-100000");
        b.save_if_changed(".hank/fix_plan.md", b"new").unwrap();
        b.save_if_changed(".hankrc", b"SAME=1\n").unwrap();
        b.save_if_changed(".hank/AGENT.md", b"new").unwrap();
        assert_eq!(b.saved(), &[PathBuf::from(".hank/fix_plan.md")]);
        assert_eq!(
            b.location(),
            Some(PathBuf::from(".hank/backup/20261122-100000"))
        );
        assert_eq!(
            std::fs::read_to_string(d.join(".hank/backup/20261122-100000/.hank/fix_plan.md"))
                .unwrap(),
            "- [ ] mine\n"
        );
        assert!(b.message().unwrap().contains(".hank/fix_plan.md"));
        // A second backup in the same second gets its own folder.
        let mut again = Backup::new(d, "20261122-100000");
        again
            .save_if_changed(".hank/fix_plan.md", b"other")
            .unwrap();
        assert_eq!(
            again.location(),
            Some(PathBuf::from(".hank/backup/20261122-100000-1"))
        );
        // Nothing saved: no folder, no message.
        let none = Backup::new(d, "x");
        assert!(none.location().is_none() && none.message().is_none());
        assert!(!d.join(".hank/backup/x").exists());
    }
}
