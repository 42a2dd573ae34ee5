//! `hank migrate [DIR]`: a flat layout (root PROMPT.md, fix_plan.md, …) moves into `.hank/`,
//! with a backup.

use crate::cli::MigrateArgs;
use crate::error::{HankError, Result};
use crate::project;

/// `hank migrate`.
///
/// # Errors
/// Nothing to migrate (exit 1), a conflicting destination, I/O errors.
pub(crate) fn run(args: &MigrateArgs) -> Result<u8> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => super::current_dir()?,
    };
    if !dir.is_dir() {
        return Err(HankError::usage(format!("{}: not a folder", dir.display())));
    }
    let stamp = jiff::Zoned::now().strftime("%Y%m%d-%H%M%S").to_string();
    let result = project::migrate::migrate_dir(&dir, &stamp);
    let (code, message, moved, backup, created) = match &result {
        Ok(project::migrate::MigrateOutcome::AlreadyMigrated) => (
            crate::exit::OK,
            format!(
                "{} is already migrated (.hank/PROMPT.md exists)",
                dir.display()
            ),
            vec![],
            None,
            vec![],
        ),
        Ok(project::migrate::MigrateOutcome::NothingToMigrate) => (
            crate::exit::ERROR,
            format!(
                "nothing to migrate in {}: no PROMPT.md with fix_plan.md or @fix_plan.md at its root \
                 (use `hank enable` to add hank to a project)",
                dir.display()
            ),
            vec![],
            None,
            vec![],
        ),
        Ok(project::migrate::MigrateOutcome::Migrated {
            moves,
            backup,
            created,
            left,
        }) => {
            let mut message = format!(
                "migrated {} file(s) into .hank/; backup in {}/ (git-ignored)",
                moves.len(),
                backup.strip_prefix(&dir).unwrap_or(backup).display()
            );
            if !left.is_empty() {
                message.push_str(&format!(
                    "; left in place (a newer twin was moved): {}",
                    left.join(", ")
                ));
            }
            (
                crate::exit::OK,
                message,
                moves
                    .iter()
                    .map(|m| format!("{} -> {}", m.from, m.to))
                    .collect(),
                Some(backup.display().to_string()),
                created
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>(),
            )
        }
        Err(err) => {
            if !args.json {
                return Err(HankError::usage_hint(
                    err.to_string(),
                    err.hint().unwrap_or("nothing was moved").to_string(),
                ));
            }
            (crate::exit::ERROR, err.to_string(), vec![], None, vec![])
        }
    };
    if args.json {
        let obj = serde_json::json!({
            "success": code == crate::exit::OK,
            "code": code,
            "message": message,
            "moved": moved,
            "backup": backup,
            "files_created": created,
        });
        outln!("{obj}");
    } else if code == crate::exit::OK {
        errln!("{message}");
        for m in &moved {
            errln!("  {m}");
        }
        for c in &created {
            errln!("  created {c}");
        }
    } else {
        return Err(HankError::WithCode { code, message });
    }
    Ok(code)
}
