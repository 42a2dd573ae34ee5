//! What a loop achieved, as plain facts: files changed (by kind) and fix_plan items newly
//! checked. **\[pure\]** `crate::progress` measures them (git, or file times outside git); the
//! breaker and the exit decision read them.

use serde::{Deserialize, Serialize};

/// Most changed paths kept in [`Progress::changed_paths`].
pub const MAX_CHANGED_PATHS: usize = 100;

/// Where the file facts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressSource {
    #[default]
    Git,
    Mtime,
}

/// What changed during a loop.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Progress {
    pub source: ProgressSource,
    /// Files changed (created, modified, deleted, renamed), `.hank/` excluded.
    pub files_changed: u32,
    /// Relative paths (`/`-separated), sorted, at most [`MAX_CHANGED_PATHS`].
    pub changed_paths: Vec<String>,
    /// Changed files that are neither tests nor docs.
    pub implementation_files_changed: u32,
    /// fix_plan items open before the loop and checked after it.
    pub plan_items_checked: u32,
    /// Their texts (whitespace-normalized), for the cost receipts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checked_items: Vec<String>,
    /// Changed files the plan names (by path, or by a file name with an extension): the
    /// plan's own work, even when they are tests ([`named_in_plan`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub plan_files_changed: u32,
    /// The loop turned the project's failing check green (VERIFY_EVERY_LOOP).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub check_fixed: bool,
}

impl Progress {
    /// Files changed or plan items checked.
    #[must_use]
    pub fn made_progress(&self) -> bool {
        self.files_changed > 0 || self.plan_items_checked > 0
    }

    /// Work that an error answer cannot undo: a fix_plan item checked, or the failing check
    /// turned green. An error result of such a loop is productive (a warning, not a failure);
    /// files changed alone are not enough (an agent that churns files while erroring is still
    /// stopped by the same-error rule).
    #[must_use]
    pub fn did_the_work(&self) -> bool {
        self.plan_items_checked > 0 || self.check_fixed
    }

    /// Builds the file facts from a set of changed relative paths (pure).
    #[must_use]
    pub fn from_paths(source: ProgressSource, paths: impl IntoIterator<Item = String>) -> Self {
        let mut all: Vec<String> = paths
            .into_iter()
            .map(|p| p.replace('\\', "/"))
            .filter(|p| !p.is_empty() && !is_hank_path(p))
            .collect();
        all.sort();
        all.dedup();
        let implementation = all
            .iter()
            .filter(|p| !is_test_path(p) && !is_doc_path(p))
            .count();
        let files_changed = u32::try_from(all.len()).unwrap_or(u32::MAX);
        all.truncate(MAX_CHANGED_PATHS);
        Progress {
            source,
            files_changed,
            changed_paths: all,
            implementation_files_changed: u32::try_from(implementation).unwrap_or(u32::MAX),
            plan_items_checked: 0,
            checked_items: Vec::new(),
            plan_files_changed: 0,
            check_fixed: false,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How many of `paths` the plan names: the whole relative path, or its file name when that
/// has an extension (`tests/test_cart.py` or `test_cart.py`), as a word of `plan` (case-
/// sensitive; a name inside a longer name does not count).
#[must_use]
pub fn named_in_plan(paths: &[String], plan: &str) -> u32 {
    let named = |needle: &str| {
        !needle.is_empty()
            && plan.match_indices(needle).any(|(i, _)| {
                let before = plan[..i].chars().next_back();
                let after = plan[i + needle.len()..].chars().next();
                let word = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '/');
                before.is_none_or(|c| !word(c) && c != '.') && after.is_none_or(|c| !word(c))
            })
    };
    let count = paths
        .iter()
        .filter(|p| {
            let file = p.rsplit('/').next().unwrap_or(p);
            named(p) || (file.contains('.') && !file.starts_with('.') && named(file))
        })
        .count();
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// Paths hank itself writes (never count as the agent's progress).
fn is_hank_path(path: &str) -> bool {
    let p = path.strip_prefix("./").unwrap_or(path);
    p == ".hank" || p.starts_with(".hank/") || p == ".hankrc"
}

/// `path` in lower case with `/` for every `\\`, for matching by name.
fn lower_slashed(path: &str) -> String {
    path.replace('\\', "/").to_lowercase()
}

/// The directories of a `/`-separated path (empty components skipped) and its last
/// component; `None` when there is no component.
fn dirs_and_file(p: &str) -> Option<(impl Iterator<Item = &str>, &str)> {
    let mut parts = p.split('/').filter(|s| !s.is_empty());
    let file = parts.next_back()?;
    Some((parts, file))
}

/// Whether a path looks like a test file or lives in a test directory.
#[must_use]
pub fn is_test_path(path: &str) -> bool {
    let p = lower_slashed(path);
    let Some((mut dirs, file)) = dirs_and_file(&p) else {
        return false;
    };
    if dirs.any(|d| {
        matches!(
            d,
            "test" | "tests" | "__tests__" | "spec" | "specs" | "testdata" | "e2e"
        )
    }) {
        // A root `specs/` holding markdown specifications is also a doc path (is_doc_path):
        // either way it is not implementation.
        return true;
    }
    let stem = file.split('.').next().unwrap_or(file);
    stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_tests")
        || stem.ends_with("_spec")
        || stem == "test"
        || stem == "tests"
        || stem == "conftest"
        || file.contains(".test.")
        || file.contains(".spec.")
        || file.ends_with("test.go")
        || file.ends_with(".bats")
}

/// Whether a path is documentation.
#[must_use]
pub fn is_doc_path(path: &str) -> bool {
    let p = lower_slashed(path);
    let Some((mut dirs, file)) = dirs_and_file(&p) else {
        return false;
    };
    if dirs.any(|d| matches!(d, "doc" | "docs" | "documentation")) {
        return true;
    }
    let ext = file.rsplit_once('.').map_or("", |(_, e)| e);
    if matches!(ext, "md" | "markdown" | "rst" | "adoc" | "txt") {
        return true;
    }
    let stem = file.split(['.', '-', '_']).next().unwrap_or(file);
    matches!(
        stem,
        "readme" | "changelog" | "license" | "licence" | "authors" | "contributing"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_the_plan_names() {
        let plan = "- [ ] Write tests/test_cart.py for the cart\n- [ ] cover `checkout.py`.\n- [x] notes in docs/\n";
        let table: [(&[&str], u32); 6] = [
            (&["tests/test_cart.py"], 1),
            (&["other/checkout.py"], 1),
            (&["tests/test_cart.py", "src/checkout.py", "src/pay.py"], 2),
            (&["tests/test_cart.pyc"], 0),
            (&["cart.py"], 0),
            (&["README"], 0),
        ];
        for (paths, n) in table {
            let paths: Vec<String> = paths.iter().map(|p| (*p).to_string()).collect();
            assert_eq!(named_in_plan(&paths, plan), n, "{paths:?}");
        }
    }
}
