//! Where the project is: the nearest folder with `.hank/`, found upward from the current
//! directory like git does.

use std::path::{Path, PathBuf};

use crate::error::{HankError, Result};

/// The project the command works on: the nearest folder with `.hank/`, looking upward from
/// the current directory like git does (stopping at the repository root or `$HOME`). When it
/// is not the current directory, the command says which project it uses. Without one, the
/// current directory (the command then says it is not a hank project).
pub(crate) fn discover() -> Result<PathBuf> {
    let cwd = std::env::current_dir()
        .map_err(|e| HankError::io("cannot read", "the current directory", e))?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match find_project(
        &cwd,
        home.as_deref(),
        |d| d.join(".hank").is_dir(),
        |d| d.join(".git").exists(),
    ) {
        Some(found) if found != cwd => {
            errln!("hank: using the project at {}", found.display());
            Ok(found)
        }
        _ => Ok(cwd),
    }
}

/// The nearest of `start` and its ancestors for which `is_project` holds; the walk stops
/// after a repository root (`is_repo_root`) or `home`, and never goes above them (pure: the
/// file checks are passed in).
#[must_use]
pub(crate) fn find_project(
    start: &Path,
    home: Option<&Path>,
    is_project: impl Fn(&Path) -> bool,
    is_repo_root: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    for dir in start.ancestors() {
        if is_project(dir) {
            return Some(dir.to_path_buf());
        }
        if is_repo_root(dir) || home.is_some_and(|h| h == dir) {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projects_are_found_upward_within_the_repository() {
        let projects = [
            "/home/u/app",
            "/home/u/other/nested",
            "/home/u/mono/.hankless",
        ];
        let repos = ["/home/u/mono", "/home/u/app"];
        let is_project = |d: &Path| projects.iter().any(|p| Path::new(p) == d);
        let is_repo = |d: &Path| repos.iter().any(|p| Path::new(p) == d);
        let home = Some(Path::new("/home/u"));
        let table = [
            ("/home/u/app", Some("/home/u/app")),
            ("/home/u/app/src/deep", Some("/home/u/app")),
            ("/home/u/other/nested/x", Some("/home/u/other/nested")),
            // The repository root ends the walk: a project above it is another one.
            ("/home/u/mono/pkg", None),
            // So does HOME.
            ("/home/u/notes", None),
            ("/tmp/x", None),
        ];
        for (start, want) in table {
            assert_eq!(
                find_project(Path::new(start), home, is_project, is_repo),
                want.map(PathBuf::from),
                "{start}"
            );
        }
    }
}
