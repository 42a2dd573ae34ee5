//! Putting a verified conversion into the target: the three files (PROMPT.md last, replaced
//! files backed up), the scaffold of a new project, the git commit.

use super::*;

/// Writes the three imported files, PROMPT.md last; an existing one (`--into --force`) is
/// first copied to `.hank/backup/<timestamp>/`. Returns their relative paths and the backup
/// message, if anything was replaced.
pub(super) fn write_imported(
    dir: &Path,
    conv: &Converted,
) -> Result<(Vec<String>, Option<String>)> {
    let specs = dir.join(".hank/specs");
    std::fs::create_dir_all(&specs).map_err(|e| HankError::io("creating folder", &specs, e))?;
    let mut backup = crate::project::backup::Backup::new(dir, &crate::project::backup::stamp_now());
    for (rel, content) in [
        (REQUIREMENTS_PATH, &conv.requirements_md),
        (FIX_PLAN_PATH, &conv.fix_plan_md),
        (PROMPT_PATH, &conv.prompt_md),
    ] {
        backup.save_if_changed(rel, content.as_bytes())?;
        generate::write_file(&dir.join(rel), content, true)?;
    }
    Ok((
        IMPORTED_FILES.iter().map(ToString::to_string).collect(),
        backup.message(),
    ))
}

/// The hank files other than the imported ones, for an existing project: only missing ones.
pub(super) fn write_scaffold(dir: &Path, spec: &ProjectSpec) -> Result<Vec<String>> {
    let mut written = Vec::new();
    for sub in [".hank", ".hank/specs", ".hank/logs"] {
        let p = dir.join(sub);
        std::fs::create_dir_all(&p).map_err(|e| HankError::io("creating folder", &p, e))?;
    }
    let gitignore = dir.join(".gitignore");
    let existing = match std::fs::read(&gitignore) {
        Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(HankError::io("reading", &gitignore, e)),
    };
    if let Some(content) = generate::merge_gitignore(existing.as_deref()) {
        generate::write_file(&gitignore, &content, true)?;
        written.push(".gitignore".to_string());
    }
    for file in generate::plan(spec)? {
        if file.path == PROMPT_PATH || file.path == FIX_PLAN_PATH {
            continue;
        }
        let path = dir.join(file.path);
        if !path.exists() {
            generate::write_file(&path, &file.content, false)?;
            written.push(file.path.to_string());
        }
    }
    Ok(written)
}

/// `git add -A` and a commit of the import, with hank's identity when the user has none.
pub(super) fn commit_import(dir: &Path, doc_name: &str) -> std::result::Result<(), String> {
    // Through the git door: nothing the repository configures runs.
    let message = format!("Import {} with hank", display_name(doc_name));
    match crate::git::Checkout::at(dir).commit_everything(&message) {
        Ok(_) => Ok(()),
        Err(crate::git::GitError::Spawn(_)) => Err("git is not on PATH".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

pub(super) fn install(
    target: &Target,
    spec: &ProjectSpec,
    conv: &Converted,
    doc: &Document,
    ctx: &mut Ctx,
) -> Result<(PathBuf, Vec<String>)> {
    match target {
        Target::Into { dir } => {
            let mut files = write_scaffold(dir, spec)?;
            let (imported, backup) = write_imported(dir, conv)?;
            files.extend(imported);
            if let Some(m) = backup {
                ctx.warn(m);
            }
            Ok((dir.clone(), files))
        }
        Target::New { parent, name } => {
            let existed = parent.join(name).exists();
            let (dir, written, git) = setup::create(parent, name, None, &[])?;
            let imported = match write_imported(&dir, conv) {
                Ok((f, _)) => f,
                Err(e) => {
                    // Leave no half-made project behind.
                    let _ = std::fs::remove_dir_all(&dir);
                    if existed {
                        let _ = std::fs::create_dir(&dir);
                    }
                    return Err(e);
                }
            };
            let mut files: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
            for f in imported {
                if !files.contains(&f) {
                    files.push(f);
                }
            }
            match git {
                setup::GitOutcome::Committed { .. } => {
                    if let Err(e) = commit_import(&dir, &doc.file_name) {
                        ctx.warn(format!("the import was not committed: {e}"));
                    }
                }
                setup::GitOutcome::Skipped(reason) => ctx.warn(reason),
            }
            Ok((dir, files))
        }
    }
}
