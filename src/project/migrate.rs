//! `hank migrate [DIR]`: moves a flat layout (root `PROMPT.md`, `fix_plan.md` or
//! `@fix_plan.md`, `@AGENT.md` or `AGENT.md`, `specs/`) into `.hank/`.
//!
//! Order: plan the moves and check that no destination exists → copy every source into
//! `.hank/backup/<ts>/` (git-ignored) → rename each into `.hank/` → create what the loop still
//! needs (`.hankrc`, `.gitignore` entries, `AGENT.md`) without touching existing files.
//! Nothing is moved unless the backup is complete.

use std::path::{Path, PathBuf};

use crate::error::{HankError, Result};

use super::generate::{self, ProjectSpec};
use super::scan;

/// True when `dir` has a flat layout to migrate: a root `PROMPT.md` plus `fix_plan.md` or
/// `@fix_plan.md`, and no `.hank/PROMPT.md`.
#[must_use]
pub(crate) fn flat_layout_detected(dir: &Path) -> bool {
    dir.join("PROMPT.md").is_file()
        && (dir.join("fix_plan.md").is_file() || dir.join("@fix_plan.md").is_file())
        && !dir.join(".hank/PROMPT.md").exists()
}

/// One move of the migration (relative paths).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Move {
    pub from: &'static str,
    pub to: &'static str,
}

/// What a migration did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MigrateOutcome {
    /// `.hank/PROMPT.md` already exists.
    AlreadyMigrated,
    /// No flat layout found.
    NothingToMigrate,
    /// Files moved; `backup` holds copies of them; `created` lists files added afterwards;
    /// `left` lists flat files not moved (duplicates), which stay in place.
    Migrated {
        moves: Vec<Move>,
        backup: PathBuf,
        created: Vec<PathBuf>,
        left: Vec<&'static str>,
    },
}

/// The moves for the flat files that exist (`exists` says whether a relative path exists),
/// and the flat files left in place because a preferred twin is moved instead.  **\[pure\]**
#[must_use]
pub(crate) fn plan_moves(exists: &dyn Fn(&str) -> bool) -> (Vec<Move>, Vec<&'static str>) {
    let mut moves = vec![Move {
        from: "PROMPT.md",
        to: ".hank/PROMPT.md",
    }];
    let mut left = Vec::new();
    let groups: [(&[&'static str], &'static str); 3] = [
        (&["fix_plan.md", "@fix_plan.md"], ".hank/fix_plan.md"),
        (&["@AGENT.md", "AGENT.md"], ".hank/AGENT.md"),
        (&["specs"], ".hank/specs"),
    ];
    for (candidates, to) in groups {
        let present: Vec<&'static str> = candidates.iter().copied().filter(|c| exists(c)).collect();
        if let Some((first, rest)) = present.split_first() {
            moves.push(Move { from: first, to });
            left.extend_from_slice(rest);
        }
    }
    (moves, left)
}

fn copy_recursive(from: &Path, to: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(from).map_err(|e| HankError::io("reading", from, e))?;
    if meta.is_dir() {
        std::fs::create_dir_all(to).map_err(|e| HankError::io("creating folder", to, e))?;
        let entries = std::fs::read_dir(from).map_err(|e| HankError::io("listing", from, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| HankError::io("listing", from, e))?;
            copy_recursive(&entry.path(), &to.join(entry.file_name()))?;
        }
    } else {
        std::fs::copy(from, to).map_err(|e| HankError::io("backing up", from, e))?;
    }
    Ok(())
}

/// Migrates `dir`, with `stamp` (e.g. `20261122-100000`) naming the backup folder.
///
/// # Errors
/// A destination already exists (nothing moved then), or an I/O error naming the file.
pub(crate) fn migrate_dir(dir: &Path, stamp: &str) -> Result<MigrateOutcome> {
    if dir.join(".hank/PROMPT.md").exists() {
        return Ok(MigrateOutcome::AlreadyMigrated);
    }
    if !flat_layout_detected(dir) {
        return Ok(MigrateOutcome::NothingToMigrate);
    }
    let (moves, left) = plan_moves(&|p| dir.join(p).exists());
    for m in &moves {
        if dir.join(m.to).exists() {
            return Err(HankError::usage_hint(
                format!(
                    "cannot migrate: {} already exists (would be replaced by {})",
                    m.to, m.from
                ),
                "move one of them out of the way and run `hank migrate` again",
            ));
        }
    }
    let base = dir.join(super::backup::BACKUP_DIR);
    std::fs::create_dir_all(&base).map_err(|e| HankError::io("creating folder", &base, e))?;
    let mut backup = base.join(stamp);
    let mut n = 1;
    while backup.exists() {
        backup = base.join(format!("{stamp}-{n}"));
        n += 1;
    }
    std::fs::create_dir_all(&backup).map_err(|e| HankError::io("creating folder", &backup, e))?;
    for from in moves.iter().map(|m| m.from).chain(left.iter().copied()) {
        copy_recursive(&dir.join(from), &backup.join(from))?;
    }
    let hank = dir.join(".hank");
    std::fs::create_dir_all(&hank).map_err(|e| HankError::io("creating folder", &hank, e))?;
    // PROMPT.md is moved last so that an interrupted migration is detected again.
    for m in moves.iter().skip(1).chain(moves.first()) {
        let (from, to) = (dir.join(m.from), dir.join(m.to));
        std::fs::rename(&from, &to).map_err(|e| HankError::io("moving", &from, e))?;
    }
    let facts = scan::detect_dir(dir);
    let created = generate::create_project_files(
        dir,
        &ProjectSpec::from_facts(&facts),
        generate::Existing::Keep,
    )?
    .written;
    Ok(MigrateOutcome::Migrated {
        moves,
        backup,
        created,
        left,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_moves_table() {
        type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a [&'a str]);
        let cases: &[Case<'_>] = &[
            (
                &["PROMPT.md", "fix_plan.md"],
                &[
                    ("PROMPT.md", ".hank/PROMPT.md"),
                    ("fix_plan.md", ".hank/fix_plan.md"),
                ],
                &[],
            ),
            (
                &["PROMPT.md", "@fix_plan.md", "@AGENT.md", "specs"],
                &[
                    ("PROMPT.md", ".hank/PROMPT.md"),
                    ("@fix_plan.md", ".hank/fix_plan.md"),
                    ("@AGENT.md", ".hank/AGENT.md"),
                    ("specs", ".hank/specs"),
                ],
                &[],
            ),
            (
                &["PROMPT.md", "fix_plan.md", "@fix_plan.md", "AGENT.md"],
                &[
                    ("PROMPT.md", ".hank/PROMPT.md"),
                    ("fix_plan.md", ".hank/fix_plan.md"),
                    ("AGENT.md", ".hank/AGENT.md"),
                ],
                &["@fix_plan.md"],
            ),
        ];
        for (present, want_moves, want_left) in cases {
            let (moves, left) = plan_moves(&|p| present.contains(&p));
            let got: Vec<(&str, &str)> = moves.iter().map(|m| (m.from, m.to)).collect();
            assert_eq!(&got, want_moves, "{present:?}");
            assert_eq!(&left, want_left, "{present:?}");
        }
    }

    fn touch(dir: &Path, rel: &str, content: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    #[test]
    fn detection_table() {
        let cases: &[(&[&str], bool)] = &[
            (&["PROMPT.md", "fix_plan.md"], true),
            (&["PROMPT.md", "@fix_plan.md"], true),
            (&["PROMPT.md"], false),
            (&["fix_plan.md"], false),
            (&["PROMPT.md", "fix_plan.md", ".hank/PROMPT.md"], false),
        ];
        for (files, want) in cases {
            let dir = tempfile::tempdir().unwrap();
            for f in *files {
                touch(dir.path(), f, "x");
            }
            assert_eq!(flat_layout_detected(dir.path()), *want, "{files:?}");
        }
    }

    #[test]
    fn migrates_with_backup_then_reports_already_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        touch(d, "PROMPT.md", "my prompt");
        touch(d, "@fix_plan.md", "- [ ] one");
        touch(d, "@AGENT.md", "notes");
        touch(d, "specs/api.md", "api");
        let outcome = migrate_dir(d, "20261122-100000").unwrap();
        let MigrateOutcome::Migrated {
            moves,
            backup,
            created,
            left,
        } = outcome
        else {
            panic!("not migrated");
        };
        assert_eq!(moves.len(), 4);
        assert!(left.is_empty());
        assert_eq!(backup, d.join(".hank/backup/20261122-100000"));
        assert!(
            std::fs::read_to_string(d.join(".gitignore"))
                .unwrap()
                .lines()
                .any(|l| l == ".hank/backup/"),
            "the backup folder is git-ignored"
        );
        let contents = [
            (d.join(".hank/PROMPT.md"), "my prompt"),
            (d.join(".hank/fix_plan.md"), "- [ ] one"),
            (d.join(".hank/specs/api.md"), "api"),
            (backup.join("specs/api.md"), "api"),
            (backup.join("PROMPT.md"), "my prompt"),
        ];
        for (path, want) in contents {
            assert_eq!(std::fs::read_to_string(&path).unwrap(), want, "{path:?}");
        }
        assert!(!d.join("PROMPT.md").exists());
        assert!(created.contains(&PathBuf::from(".hankrc")));
        assert!(generate::missing_required(d).is_empty());
        assert_eq!(
            migrate_dir(d, "x").unwrap(),
            MigrateOutcome::AlreadyMigrated
        );
    }

    #[test]
    fn conflict_moves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        touch(d, "PROMPT.md", "p");
        touch(d, "fix_plan.md", "f");
        touch(d, ".hank/fix_plan.md", "existing");
        let err = migrate_dir(d, "t").unwrap_err().to_string();
        assert!(err.contains(".hank/fix_plan.md"), "{err}");
        assert!(d.join("PROMPT.md").exists());
        assert_eq!(
            std::fs::read_to_string(d.join(".hank/fix_plan.md")).unwrap(),
            "existing"
        );
    }

    #[test]
    fn nothing_to_migrate() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            migrate_dir(dir.path(), "t").unwrap(),
            MigrateOutcome::NothingToMigrate
        );
    }
}
