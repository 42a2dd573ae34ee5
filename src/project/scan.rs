//! Reads a project folder into [`ProjectFiles`] for the pure detector: root entries, `docs/`
//! (two levels), `src/main.rs`, the manifests' contents (each capped at 1 MiB) and
//! `.git/config`; which of `bd`, `gh`, `git` are on PATH.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use super::detect::{self, ProjectFacts, ProjectFiles};

const MAX_READ: u64 = 1024 * 1024;

const MANIFESTS: &[&str] = &[
    "Cargo.toml",
    "package.json",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    "go.mod",
    ".git/config",
];

fn list(dir: &Path, prefix: &str, depth: u32, out: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let rel = format!("{prefix}{name}");
        if is_dir {
            out.insert(format!("{rel}/"));
            if depth > 1 {
                list(&entry.path(), &format!("{rel}/"), depth - 1, out);
            }
        } else {
            out.insert(rel);
        }
    }
}

fn read_capped(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut buf = Vec::new();
    file.take(MAX_READ).read_to_end(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// Collects what detection needs from `dir`. Unreadable entries are skipped.
#[must_use]
pub(crate) fn scan_dir(dir: &Path) -> ProjectFiles {
    let mut files = ProjectFiles {
        dir_name: std::fs::canonicalize(dir)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "project".into()),
        ..ProjectFiles::default()
    };
    list(dir, "", 1, &mut files.paths);
    list(&dir.join("docs"), "docs/", 2, &mut files.paths);
    if dir.join("src/main.rs").is_file() {
        files.paths.insert("src/main.rs".into());
    }
    for name in MANIFESTS {
        let path = dir.join(name);
        if path.is_file()
            && let Some(content) = read_capped(&path)
        {
            files.contents.insert((*name).to_string(), content);
        }
    }
    for tool in [
        "bd",
        "gh",
        "git",
        "uv",
        "claude",
        "codex",
        "gemini",
        "opencode",
        "copilot",
        "aider",
        "goose",
        "cursor-agent",
    ] {
        if which::which(tool).is_ok() {
            files.tools.insert(tool.to_string());
        }
    }
    files
}

/// Scans and detects in one step.
#[must_use]
pub(crate) fn detect_dir(dir: &Path) -> ProjectFacts {
    detect::detect(&scan_dir(dir))
}
