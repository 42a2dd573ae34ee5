//! The portable run state on the remote: `refs/hank/state/<name>`, a commit whose tree holds
//! the bundle ([`crate::store::portable`]), read with `git ls-remote` / `fetch` and written
//! with a compare-and-swap push (`--force-with-lease=<ref>:<expected>`). Git runs through
//! [`remote_git`] (the acting git: the user's credentials; no hook or filter of the
//! repository).
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! the portable run state on the remote: `refs/hank/state/<name>` read with `ls-remote`/`fetch`,
//! written as a commit (`hash-object`, `mktree`, `commit-tree`) and a compare-and-swap push
//! (`--force-with-lease`; `push_file`, shared with `hank watch`'s claims), through
//! [`remote_git`] (120 s, the user's credentials), also the CI fleet's (`fleet/ci.rs`) and the
//! run state's hand-over's (`crate::handoff`)

use std::path::Path;
use std::time::Duration;

use crate::error::{HankError, Result};
use crate::git::{Checkout, Git, GitRun};
use crate::store::portable::{BUNDLE_FILE, encode, parse_bundle, ref_name};
use crate::store::schema::StateBundle;

/// The largest bundle read back from a ref (what hank keeps of a git command's output).
pub const MAX_BUNDLE_BYTES: u64 = crate::git::GIT_OUTPUT_LIMIT;
/// How long a git command that talks to the remote may take (a push or fetch over a slow
/// network included): the state ref's, the tracker's claims and a CI fleet's (`fleet::ci`).
pub const REMOTE_GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// The acting git in `dir` ([`Git::act`]: the user's credentials, no hook or filter of the
/// repository) bounded by [`REMOTE_GIT_TIMEOUT`]: the handle for git that talks to the remote.
#[must_use]
pub fn remote_git(dir: &Path) -> Git {
    Checkout::at(dir).git().timeout(REMOTE_GIT_TIMEOUT)
}

/// The remote's ref `r` fetched into the local ref of the same name (no tags, no FETCH_HEAD).
///
/// # Errors
/// git fails (no remote, no network, no access, no such ref).
pub fn fetch_ref(dir: &Path, remote: &str, r: &str) -> Result<()> {
    remote_git(dir).out(&[
        "fetch",
        "--no-tags",
        "--no-write-fetch-head",
        "--",
        remote,
        &format!("+{r}:{r}"),
    ])?;
    Ok(())
}

/// What the remote's state ref holds now: its commit and the bundle, or `None` when the ref
/// does not exist. The commit is fetched into the local ref of the same name.
///
/// # Errors
/// git fails (no remote, no network, no access) or the tree holds no bundle.
pub fn fetch(dir: &Path, remote: &str, name: &str) -> Result<Option<(String, StateBundle)>> {
    let r = ref_name(name);
    let listed = remote_git(dir).out(&["ls-remote", "--refs", "--", remote, &r])?;
    let Some(oid) = listed.lines().find_map(|l| {
        l.split_once('\t')
            .filter(|(_, n)| *n == r)
            .map(|(o, _)| o.to_string())
    }) else {
        return Ok(None);
    };
    fetch_ref(dir, remote, &r)?;
    let object = format!("{oid}:{BUNDLE_FILE}");
    let size: u64 = remote_git(dir)
        .out(&["cat-file", "-s", &object])?
        .trim()
        .parse()
        .unwrap_or(u64::MAX);
    if size >= MAX_BUNDLE_BYTES {
        return Err(HankError::Unreadable {
            path: format!("{remote} {r}").into(),
            problem: format!(
                "holds a bundle of {size} bytes; this hank reads at most {MAX_BUNDLE_BYTES}"
            ),
        });
    }
    let text = remote_git(dir).out(&["cat-file", "blob", &object])?;
    let text = text.trim();
    let bundle = parse_bundle(text.as_bytes(), Path::new(&format!("{remote} {r}")))?;
    Ok(Some((oid, bundle)))
}

/// How a push of the state ref ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// The ref now points at this commit.
    Done(String),
    /// The ref moved since it was read (another job saved or claimed first): nothing changed.
    Lost(String),
}

/// Writes `bundle` as a commit (its tree: [`BUNDLE_FILE`], its parent: `expected`) and
/// pushes it to `remote`'s state ref only if the ref still is `expected` (`None`: does not
/// exist yet).
///
/// # Errors
/// git fails for another reason than the ref having moved.
pub fn push(
    dir: &Path,
    remote: &str,
    bundle: &StateBundle,
    expected: Option<&str>,
) -> Result<Pushed> {
    let r = ref_name(&bundle.name);
    let message = format!("hank state {} saved by {}", bundle.name, bundle.saved_by);
    push_file(
        dir,
        remote,
        &r,
        BUNDLE_FILE,
        &encode(bundle)?,
        &message,
        expected,
    )
}

/// `git push` of `commit` to the remote's ref `r` (`None`: deletes it), only if the remote's
/// ref still is `expected` (`""`: absent): `--force-with-lease`, no hook.
///
/// # Errors
/// git cannot run.
pub(crate) fn leased_push(
    dir: &Path,
    remote: &str,
    r: &str,
    expected: &str,
    commit: Option<&str>,
) -> Result<GitRun> {
    let lease = format!("--force-with-lease={r}:{expected}");
    let refspec = format!("{}:{r}", commit.unwrap_or(""));
    let args = [
        "push",
        "--no-verify",
        "--porcelain",
        &lease,
        "--",
        remote,
        &refspec,
    ];
    remote_git(dir)
        .act(&args)
        .map_err(|e| HankError::Tool(e.context(&args, dir)))
}

/// Writes `bytes` as the one file `file` of a commit (parent: `expected`) and pushes it to
/// `remote`'s ref `r` only if that ref still is `expected` (`None`: only if it does not exist
/// — a create-only compare-and-swap). The state refs' and `hank watch`'s claims' write.
///
/// # Errors
/// git fails for another reason than the ref having moved.
pub fn push_file(
    dir: &Path,
    remote: &str,
    r: &str,
    file: &str,
    bytes: &[u8],
    message: &str,
    expected: Option<&str>,
) -> Result<Pushed> {
    let write = |args: &[&str], input: &[u8]| -> Result<GitRun> {
        remote_git(dir)
            .act_input(args, input)
            .and_then(GitRun::checked)
            .map_err(|e| HankError::Tool(e.context(args, dir)))
    };
    let blob = write(&["hash-object", "-w", "--stdin"], bytes)?;
    let listing = format!("100644 blob {}\t{file}\n", blob.stdout.trim());
    let tree = write(&["mktree"], listing.as_bytes())?;
    let tree = tree.stdout.trim().to_string();
    let mut args = crate::git::IDENTITY_ARGS.to_vec();
    args.extend(["commit-tree", &tree, "-m", message]);
    if let Some(p) = expected {
        args.extend(["-p", p]);
    }
    let commit = remote_git(dir).out(&args)?.trim().to_string();
    let pushed = leased_push(dir, remote, r, expected.unwrap_or(""), Some(&commit))?;
    let r = r.to_string();
    if pushed.success {
        let _ = remote_git(dir).act(&["update-ref", &r, &commit]);
        return Ok(Pushed::Done(commit));
    }
    let said = format!("{}\n{}", pushed.stdout, pushed.stderr);
    // Refused because the ref moved: by our lease check ("stale info"), by the remote's
    // fast-forward rule, or by the remote's own ref lock when two pushes meet there.
    let moved = [
        "stale info",
        "[rejected]",
        "fetch first",
        "cannot lock ref",
        "reference already exists",
        "but expected",
    ];
    if moved.iter().any(|m| said.contains(m)) {
        return Ok(Pushed::Lost(said.trim().to_string()));
    }
    Err(HankError::Tool(format!(
        "git push {remote} {r} failed: {}",
        said.trim()
    )))
}
