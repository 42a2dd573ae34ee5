//! The scan of what a delivery pushes: every commit in `<start>..<tip>` (the commits the push
//! sends that hank does not already know to be the user's or the remote's), each added or
//! changed file checked by its name and its content ([`crate::policy::secrets`]). Read with
//! git's plumbing (`rev-list`, `diff-tree`, `cat-file`) through the checkout's acting git
//! ([`crate::git::Git::act`], hooks off): no filter, textconv or hook runs. A file larger than
//! [`secrets::MAX_SCANNED_BLOB`] is checked by its name only.

use std::path::Path;

use crate::error::{HankError, Result};
use crate::git::{Checkout, Git};
use crate::policy::secrets::{self, Hit};

/// What the scan found: the files that look like secrets (not allowed), and the files too
/// large to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    pub hits: Vec<Hit>,
    pub skipped: Vec<String>,
}

/// Scans the commits reachable from `tip` and from none of `known` (commits, or refs that
/// exist; a ref that does not exist is left out). `allow`: the `DELIVER_ALLOW_FILES` patterns.
///
/// # Errors
/// git cannot run or cannot read the history.
pub fn scan(dir: &Path, tip: &str, known: &[String], allow: &[String]) -> Result<Scan> {
    let git = Checkout::at(dir).git();
    let mut args: Vec<String> = vec!["rev-list".into(), "--end-of-options".into(), tip.into()];
    for k in known {
        let commit = format!("{k}^{{commit}}");
        let verify = [
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &commit,
        ];
        let exists = git
            .act(&verify)
            .map_err(|e| HankError::Tool(e.context(&verify, dir)))?
            .success;
        if exists {
            args.push(format!("^{k}"));
        }
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let commits = git.out(&argv)?;
    let mut out = Scan::default();
    // Each blob is read once, whatever commits add it.
    let mut read: std::collections::HashMap<String, Option<String>> =
        std::collections::HashMap::new();
    for commit in commits.lines().map(str::trim).filter(|c| !c.is_empty()) {
        let raw = git.out(&[
            "diff-tree",
            "-r",
            "-c",
            "--root",
            "--no-renames",
            "--no-commit-id",
            "--no-ext-diff",
            "--no-textconv",
            "-z",
            commit,
        ])?;
        // As git printed it, less the blank ends.
        let raw = raw.trim();
        for (blob, path) in changed_blobs(raw) {
            if secrets::allowed(&path, allow) {
                continue;
            }
            if let Some(why) = secrets::why_named(&path) {
                out.hits.push(Hit {
                    commit: commit.to_string(),
                    path,
                    why: why.to_string(),
                });
                continue;
            }
            if !read.contains_key(&blob) {
                let why = content_of(&git, &blob)?.map_or_else(
                    || {
                        out.skipped.push(path.clone());
                        None
                    },
                    |text| secrets::why_content(&text),
                );
                read.insert(blob.clone(), why);
            }
            if let Some(Some(why)) = read.get(&blob) {
                out.hits.push(Hit {
                    commit: commit.to_string(),
                    path,
                    why: why.clone(),
                });
            }
        }
    }
    out.skipped.sort();
    out.skipped.dedup();
    Ok(out)
}

/// A blob's content (lossy text), `None` when it is larger than [`secrets::MAX_SCANNED_BLOB`].
fn content_of(git: &Git, blob: &str) -> Result<Option<String>> {
    let size: u64 = git
        .out(&["cat-file", "-s", blob])?
        .trim()
        .parse()
        .map_err(|_| HankError::Tool(format!("`git cat-file -s {blob}` did not print a size")))?;
    if size > secrets::MAX_SCANNED_BLOB {
        return Ok(None);
    }
    git.out(&["cat-file", "blob", blob]).map(Some)
}

/// The (blob, path) pairs `git diff-tree -r -c -z` reports added or changed in a commit
/// (its result's side; deletions, submodules and symlinks' targets' absence left out).
fn changed_blobs(raw: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut fields = raw.split('\0');
    while let Some(meta) = fields.next() {
        let meta = meta.trim_start_matches('\n');
        if meta.is_empty() {
            continue;
        }
        let Some(path) = fields.next() else { break };
        let parents = meta.chars().take_while(|c| *c == ':').count();
        let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        // parents + 1 modes, parents + 1 ids, the status.
        let (Some(mode), Some(id)) = (parts.get(parents), parts.get(2 * parents + 1)) else {
            continue;
        };
        let deleted = id.bytes().all(|b| b == b'0');
        if deleted || *mode == "160000" || *mode == "000000" {
            continue;
        }
        out.push(((*id).to_string(), path.to_string()));
    }
    out
}

/// What the remote has of a delivery, asked of the remote itself (`git ls-remote` of its push
/// URL, where the push goes): the
/// commits its `base` and `branch` point at (the ones present here are left out of the scan).
/// Remote-tracking refs are not used: the agent can move them (`git update-ref
/// refs/remotes/origin/main <commit>`) to hide a commit from the scan. The remote's URL and
/// credential helpers are approved configuration ([`super::refuse_unapproved_git_config`]),
/// checked first.
///
/// # Errors
/// The configuration is not approved, or the remote cannot be asked (the push would fail the
/// same way; the message names the remote).
pub fn known_on_remote(dir: &Path, remote: &str, base: &str, branch: &str) -> Result<Vec<String>> {
    super::refuse_unapproved_git_config(dir, remote)?;
    let refs: Vec<String> = [base, branch]
        .iter()
        .filter(|b| !b.is_empty())
        .map(|b| format!("refs/heads/{b}"))
        .collect();
    if refs.is_empty() {
        return Ok(Vec::new());
    }
    // Where the push goes (`remote.*.pushurl` when set, as in a fork setup).
    let git = Checkout::at(dir).git();
    let get_url = ["remote", "get-url", "--push", "--end-of-options", remote];
    let push_url = git
        .act(&get_url)
        .map_err(|e| HankError::Tool(e.context(&get_url, dir)))?;
    let target = if push_url.success && !push_url.stdout.trim().is_empty() {
        push_url.stdout.trim().to_string()
    } else {
        remote.to_string()
    };
    let mut args = vec!["ls-remote", "--end-of-options", target.as_str()];
    args.extend(refs.iter().map(String::as_str));
    let r = git
        .act(&args)
        .map_err(|e| HankError::Tool(e.context(&args, dir)))?;
    if !r.success {
        return Err(HankError::Tool(format!(
            "cannot ask {remote} what it has of {} (`git ls-remote`): {}",
            refs.join(", "),
            crate::sanitize::line(r.stderr.trim())
        )));
    }
    Ok(remote_commits(&r.stdout, &refs))
}

/// The commits of `git ls-remote` output whose ref is one of `refs` (pure).
fn remote_commits(listing: &str, refs: &[String]) -> Vec<String> {
    listing
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .filter(|(sha, name)| {
            refs.iter().any(|r| r == name.trim())
                && sha.len() >= 40
                && sha.bytes().all(|b| b.is_ascii_hexdigit())
        })
        .map(|(sha, _)| sha.to_string())
        .collect()
}

/// Refuses the push when [`scan`] finds a file: the error names each (commit, path, why) and
/// ends the command with exit 1; [`crate::exit::ExitReason::SecretsInCommits`] is the reason
/// a caller records.
///
/// # Errors
/// A hit ([`HankError::WithCode`] 1 with the refusal), or git cannot read the history.
pub fn refuse_secrets(
    dir: &Path,
    tip: &str,
    known: &[String],
    allow: &[String],
    remote: &str,
    branch: &str,
) -> Result<()> {
    let found = scan(dir, tip, known, allow)?;
    if found.hits.is_empty() {
        return Ok(());
    }
    Err(HankError::WithCode {
        code: crate::exit::ERROR,
        message: secrets::refusal(remote, branch, &found.hits, &found.skipped),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_commits_keep_only_the_asked_refs() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let listing = format!(
            "{a}\trefs/heads/main\n{b}\trefs/heads/hank/x\n{b}\trefs/heads/other\nnot a line\nzz\trefs/heads/main\n"
        );
        let refs = vec![
            "refs/heads/main".to_string(),
            "refs/heads/hank/x".to_string(),
        ];
        assert_eq!(remote_commits(&listing, &refs), vec![a, b]);
        assert!(remote_commits("", &refs).is_empty());
    }

    #[test]
    fn diff_tree_lines() {
        let z = "0".repeat(40);
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let c = "c".repeat(40);
        let raw = format!(
            ":000000 100644 {z} {a} A\0.env\0:100644 100644 {a} {b} M\0src/x.rs\0:100644 000000 {a} {z} D\0gone.pem\0:000000 160000 {z} {c} A\0sub\0::100644 100644 100644 {a} {b} {c} MM\0merged.txt\0"
        );
        assert_eq!(
            changed_blobs(&raw),
            vec![
                (a.clone(), ".env".to_string()),
                (b, "src/x.rs".to_string()),
                (c, "merged.txt".to_string()),
            ]
        );
    }
}
