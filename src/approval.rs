//! Configuration approval (the direnv model): configuration that changed while a run was in
//! progress — when the agent could have written it — takes effect only once the user approves
//! it.
//!
//! What is fingerprinted ([`fingerprint`]): `.hankrc` key by key (so the prompt file's path,
//! `PROMPT_FILE`, the agent command, the caps, `VERIFY_COMMAND`… each show as a key) and every
//! `.hank/agents/*.toml` (its whole text). Where: `config-approval.json`
//! ([`crate::store::schema::ConfigApproval`]) in the project's per-user folder
//! ([`userdir::project_dir`]), outside the project, where the agent cannot write.
//!
//! How: `hank run` records "run in progress" with the fingerprint at its start
//! ([`begin_run`]) and compares at its end ([`RunRecord::end`]); a record left by a run that
//! died without ending (kill -9) is compared by the next command that checks
//! ([`unapproved`]). Any difference is kept as *pending*, with the fingerprint last approved.
//! `hank run`, `hank doctor`, `hank agents`, `hank verify` and `hank import` then refuse to
//! use the configuration ([`require`]) — before anything from it is executed, not even the
//! client's `--version` — until `hank config accept` or `--accept-config`; with a terminal,
//! they list the changes and ask. Edits made between runs are the user's and need nothing;
//! the first run ever has no record and approves the configuration as it is; `hank enable`
//! and `hank setup` are the user too.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::agent::redact::is_secret_name;
use crate::error::{HankError, Result};
use crate::fsread::{self, Follow};
use crate::git::{Checkout, TaskWorktree};
use crate::store::schema::{
    CONFIG_APPROVAL_SCHEMA, ConfigApproval, ConfigFingerprint, ConfigPending, ConfigRun,
};
use crate::store::userdir;

/// The approval file's name in the project's per-user folder.
pub const FILE: &str = "config-approval.json";

fn hash(bytes: &[u8]) -> String {
    format!("hash:{:016x}", userdir::fnv1a(bytes))
}

/// The configuration of `project` now (reads `.hankrc` and `.hank/agents/*.toml`; never
/// fails: an unreadable file is fingerprinted as such).
#[must_use]
pub fn fingerprint(project: &Path) -> ConfigFingerprint {
    fingerprint_of(&Checkout::at(project))
}

/// [`fingerprint`] of a handle: a fleet task's git dirs are the ones hank recorded at its pin.
#[must_use]
pub fn fingerprint_of(at: &Checkout) -> ConfigFingerprint {
    let project = at.dir();
    let mut fp = ConfigFingerprint::default();
    let rc = project.join(".hankrc");
    match fsread::read(&rc, fsread::CONFIG_LIMIT, Follow::Yes) {
        Ok(bytes) => {
            let parsed = std::str::from_utf8(&bytes)
                .ok()
                .and_then(|t| crate::settings::parse_hankrc(t, &rc).ok());
            match parsed {
                Some(map) => {
                    fp.hankrc = Some(
                        map.into_iter()
                            .map(|(k, e)| {
                                let v = if is_secret_name(&k) {
                                    hash(e.value.as_bytes())
                                } else {
                                    e.value
                                };
                                (k, v)
                            })
                            .collect(),
                    );
                }
                None => {
                    fp.hankrc = Some(BTreeMap::new());
                    fp.hankrc_unparsed = Some(hash(&bytes));
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            fp.hankrc = Some(BTreeMap::new());
            fp.hankrc_unparsed = Some(format!("unreadable: {e}"));
        }
    }
    let agents = project.join(".hank").join("agents");
    if let Ok(entries) = std::fs::read_dir(&agents) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".toml") {
                continue;
            }
            let text = match fsread::read(&entry.path(), fsread::CONFIG_LIMIT, Follow::Yes) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(e) => format!("unreadable: {e}"),
            };
            fp.profiles.insert(format!(".hank/agents/{name}"), text);
        }
    }
    fp.git = git_fingerprint(at);
    fp
}

/// Whether git configuration key `key` (as `git config --list` prints it: section and name
/// lower case) names a program git may run or another configuration file to read (pure).
#[must_use]
pub fn is_program_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let (section, rest) = lower.split_once('.').unwrap_or((lower.as_str(), ""));
    let name = rest.rsplit('.').next().unwrap_or("");
    match section {
        // Programs, or more configuration read from elsewhere.
        "filter" | "include" | "includeif" | "alias" => true,
        // Credential helpers run with hank's environment on every push; `url.*.insteadOf`
        // and `remote.*.url`/`pushurl` decide where a push (and its credentials) goes.
        "credential" | "url" => true,
        "remote" => matches!(
            name,
            "url" | "pushurl" | "receivepack" | "uploadpack" | "proxy" | "vcs"
        ),
        "core" => matches!(
            name,
            "hookspath"
                | "fsmonitor"
                | "pager"
                | "sshcommand"
                | "attributesfile"
                | "editor"
                | "askpass"
                | "gitproxy"
        ),
        "diff" => matches!(name, "textconv" | "command" | "external"),
        "merge" => name == "driver",
        // Signing runs `gpg.program` (or its ssh/x509 twin) on every commit.
        "gpg" => name == "program",
        "commit" | "tag" | "push" => name == "gpgsign",
        "sequence" => name == "editor",
        "submodule" => name == "update",
        "uploadpack" => name == "packobjectshook",
        "protocol" => name == "allow",
        "http" => matches!(
            name,
            "proxy" | "sslverify" | "sslcainfo" | "sslcapath" | "extraheader" | "cookiefile"
        ),
        _ => false,
    }
}

/// What git would run from the repository `project` is in: hooks (names and content hashes,
/// `*.sample` left out), every key of the repository's configuration (not only those
/// [`is_program_key`] knows: a new git release adds keys that run programs), but the upstream
/// `git push --set-upstream` records for a branch, `.gitattributes` and every file of
/// `.git/info/`. The configuration files are read by `git config --file F
/// --list --no-includes` through the hardened runner ([`crate::git::Git::read`]): git's
/// own parser (a hand-written one could read a tricky file differently from git), which runs
/// no program of the repository.
fn git_fingerprint(at: &Checkout) -> BTreeMap<String, String> {
    let project = at.dir();
    let mut out = BTreeMap::new();
    let Some((git_dir, common)) = at.git_dirs() else {
        return out;
    };
    let hooks = common.join("hooks");
    if let Ok(entries) = std::fs::read_dir(&hooks) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".sample") {
                continue;
            }
            let value = match fsread::read(&entry.path(), fsread::CONFIG_LIMIT, Follow::No) {
                Ok(bytes) => hash(&bytes),
                Err(e) => format!("unreadable: {e}"),
            };
            out.insert(format!(".git/hooks/{name}"), value);
        }
    }
    let mut files = vec![(".gitattributes".to_string(), project.join(".gitattributes"))];
    // Everything of `info/` (attributes, exclude, sparse-checkout…), one level as git reads it.
    if let Ok(entries) = std::fs::read_dir(common.join("info")) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            files.push((format!(".git/info/{name}"), entry.path()));
        }
    }
    for (shown_as, path) in files {
        match fsread::read(&path, fsread::CONFIG_LIMIT, Follow::No) {
            Ok(bytes) => {
                out.insert(shown_as, hash(&bytes));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                out.insert(shown_as, format!("unreadable: {e}"));
            }
        }
    }
    for config in [common.join("config"), git_dir.join("config.worktree")] {
        if !config.is_file() {
            continue;
        }
        let file = config.to_string_lossy().into_owned();
        let listed = at
            .git()
            .read(&["config", "--file", &file, "--no-includes", "--list", "-z"]);
        match listed {
            Ok(bytes) => {
                let entries: Vec<(String, String)> = bytes
                    .split(|b| *b == 0)
                    .filter_map(|entry| {
                        let text = String::from_utf8_lossy(entry);
                        let (key, value) = text.split_once('\n').unwrap_or((&text, ""));
                        (!key.is_empty()).then(|| (key.to_string(), value.to_string()))
                    })
                    .collect();
                for (key, value) in &entries {
                    if is_upstream_of_a_remote(key, value, &entries) {
                        continue;
                    }
                    let k = format!("git config {key}");
                    // A key set twice keeps every value.
                    let v = out
                        .remove(&k)
                        .map_or_else(|| value.clone(), |old: String| format!("{old}\n{value}"));
                    out.insert(k, v);
                }
            }
            // hank itself was stopped (or git ran past its time): nothing is known of the
            // file, which is not a change ([`changes`] leaves its keys out).
            Err(e @ (crate::git::GitError::Interrupted | crate::git::GitError::Timeout)) => {
                out.insert(format!("git config in {file}"), format!("{INCOMPLETE}{e}"));
            }
            Err(e) => {
                out.insert(format!("git config in {file}"), format!("unreadable: {e}"));
            }
        }
    }
    out
}

/// How a configuration file that could not be read to its end is fingerprinted: hank was
/// interrupted, or git ran past its time. Such a reading is no evidence of a change.
const INCOMPLETE: &str = "incomplete: ";

/// Whether `key`=`value` is the upstream git records for a branch (`branch.NAME.remote`
/// naming a remote the same file configures, or `branch.NAME.merge`): written by `git push
/// --set-upstream` (delivery's own push), it decides nothing a remote's own keys do not
/// (pure). A `branch.NAME.remote` that is a URL, or names no configured remote, is kept.
fn is_upstream_of_a_remote(key: &str, value: &str, entries: &[(String, String)]) -> bool {
    let lower = key.to_ascii_lowercase();
    let Some(rest) = lower.strip_prefix("branch.") else {
        return false;
    };
    if rest.ends_with(".merge") {
        return true;
    }
    rest.ends_with(".remote")
        && !value.is_empty()
        && entries
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(&format!("remote.{value}.url")))
}

/// The paths among `changed` (repository-relative, as `git diff --name-only` prints them)
/// that are hank's configuration: `.hankrc`, anything under `.hank/agents/`, the prompt file
/// `prompt` and the verify command's script `verify_script` (pure).
#[must_use]
pub fn config_paths(changed: &[String], prompt: &str, verify_script: Option<&str>) -> Vec<String> {
    let norm = |p: &str| p.trim().trim_start_matches("./").to_string();
    let prompt = norm(prompt);
    let script = verify_script.map(norm);
    changed
        .iter()
        .map(|p| norm(p))
        .filter(|p| {
            p == ".hankrc"
                || p.starts_with(".hank/agents/")
                || (!prompt.is_empty() && *p == prompt)
                || script.as_deref().is_some_and(|s| !s.is_empty() && p == s)
        })
        .collect()
}

/// The script file of `verify_command` inside the project, as a repository-relative path:
/// its first word when that names a file by a relative path (`./scripts/check.sh`,
/// `scripts/check.sh`), or the first argument of an interpreter (`sh scripts/check.sh`,
/// `bash -e ./ci.sh`) (pure).
#[must_use]
pub fn verify_script(verify_command: &str) -> Option<String> {
    const INTERPRETERS: [&str; 8] = [
        "sh", "bash", "zsh", "dash", "python", "python3", "node", "perl",
    ];
    let mut words = verify_command.split_whitespace();
    let first = words.next()?;
    let candidate = if INTERPRETERS.contains(&first) {
        words.find(|w| !w.starts_with('-'))?
    } else {
        first
    };
    let relative = !candidate.starts_with('/') && !candidate.starts_with('~');
    let names_file = candidate.contains('/') || INTERPRETERS.contains(&first);
    (relative && names_file && !candidate.contains(".."))
        .then(|| candidate.trim_start_matches("./").to_string())
}

/// The files of `root`'s configuration that are not `.hankrc` or a profile, as
/// repository-relative paths: the prompt file (PROMPT_FILE) and the verify command's script
/// ([`verify_script`]); what [`config_paths`] takes.
#[must_use]
pub fn watched_files(root: &Path, s: &crate::settings::Settings) -> (String, Option<String>) {
    let prompt = &s.prompt_file.value;
    let prompt = prompt
        .strip_prefix(root)
        .unwrap_or(prompt)
        .to_string_lossy()
        .into_owned();
    let script = s.verify_command.value.as_deref().and_then(verify_script);
    (prompt, script)
}

/// The configuration of the task worktree `wt` against the checkout `root`'s approved one:
/// what differs (empty: the same). The checkout's own pending changes are refused first
/// (nothing is approved then). A new worktree is not a first run: it gets no approval of its
/// own.
pub fn worktree_changes(root: &Path, wt: &TaskWorktree) -> Result<Vec<String>> {
    let pending = unapproved(root)?;
    if !pending.is_empty() {
        return Err(refusal(&pending, "a fleet task"));
    }
    Ok(changes(&fingerprint(root), &fingerprint_of(&wt.checkout())))
}

/// A value for display: secret ones hidden, others on one sanitized line, cut.
fn shown(key: &str, value: &str) -> String {
    if is_secret_name(key) {
        return "(secret value hidden)".to_string();
    }
    let line = crate::sanitize::line(value);
    let cut: String = line.chars().take(80).collect();
    if cut.len() < line.len() {
        format!("\"{cut}…\"")
    } else {
        format!("\"{cut}\"")
    }
}

/// What differs between the approved configuration and `now`, one line per key or file
/// (pure).
#[must_use]
pub fn changes(approved: &ConfigFingerprint, now: &ConfigFingerprint) -> Vec<String> {
    let mut out = Vec::new();
    match (&approved.hankrc, &now.hankrc) {
        (None, Some(_)) => out.push(".hankrc: created".to_string()),
        (Some(_), None) => out.push(".hankrc: deleted".to_string()),
        _ => {}
    }
    if now.hankrc_unparsed.is_some() {
        // Its keys cannot be compared: the file as a whole changed.
        if approved.hankrc_unparsed != now.hankrc_unparsed {
            out.push(".hankrc: changed (it does not parse now)".to_string());
        }
    }
    let empty = BTreeMap::new();
    let (old, new) = (
        approved.hankrc.as_ref().unwrap_or(&empty),
        now.hankrc.as_ref().unwrap_or(&empty),
    );
    let keys_compared = now.hankrc_unparsed.is_none();
    for (k, v) in new.iter().filter(|_| keys_compared) {
        match old.get(k) {
            None => out.push(format!(".hankrc: {k} added: {}", shown(k, v))),
            Some(o) if o != v => {
                if is_secret_name(k) {
                    out.push(format!(".hankrc: {k} changed (secret value hidden)"));
                } else {
                    out.push(format!(
                        ".hankrc: {k} changed: {} → {}",
                        shown(k, o),
                        shown(k, v)
                    ));
                }
            }
            Some(_) => {}
        }
    }
    for (k, v) in old.iter().filter(|_| keys_compared) {
        if !new.contains_key(k) {
            out.push(format!(".hankrc: {k} removed (was {})", shown(k, v)));
        }
    }
    for (name, text) in &now.profiles {
        match approved.profiles.get(name) {
            None => out.push(format!("{name}: added")),
            Some(t) if t != text => out.push(format!("{name}: changed")),
            Some(_) => {}
        }
    }
    for name in approved.profiles.keys() {
        if !now.profiles.contains_key(name) {
            out.push(format!("{name}: removed"));
        }
    }
    // A configuration file read only in part (hank interrupted) says nothing of its keys.
    let incomplete = |fp: &ConfigFingerprint| fp.git.values().any(|v| v.starts_with(INCOMPLETE));
    let skip_config = incomplete(approved) || incomplete(now);
    let compared = |name: &str| !(skip_config && name.starts_with("git config "));
    for (name, value) in now.git.iter().filter(|(n, _)| compared(n)) {
        let is_config = name.starts_with("git config ");
        match approved.git.get(name) {
            None if is_config => out.push(format!("{name} added: {}", shown(name, value))),
            None => out.push(format!("{name}: added")),
            Some(v) if v != value && is_config => {
                out.push(format!(
                    "{name} changed: {} → {}",
                    shown(name, v),
                    shown(name, value)
                ));
            }
            Some(v) if v != value => out.push(format!("{name}: changed")),
            Some(_) => {}
        }
    }
    for name in approved.git.keys().filter(|n| compared(n)) {
        if !now.git.contains_key(name) {
            out.push(format!("{name}: removed"));
        }
    }
    out
}

fn file_of(project: &Path) -> Result<PathBuf> {
    Ok(userdir::project_dir(project)?.join(FILE))
}

fn load(path: &Path) -> Result<ConfigApproval> {
    match fsread::read(path, fsread::CONFIG_LIMIT, Follow::No) {
        Ok(bytes) => serde_json::from_slice::<ConfigApproval>(&bytes).map_err(|e| {
            HankError::usage_hint(
                format!("{}: not a configuration approval file: {e}", path.display()),
                "hank wrote it; remove it to approve the configuration as it is now",
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigApproval::default()),
        Err(e) => Err(HankError::io("failed to read", path, e)),
    }
}

fn save(path: &Path, a: &ConfigApproval) -> Result<()> {
    let mut a = a.clone();
    a.schema_version = CONFIG_APPROVAL_SCHEMA;
    let bytes = serde_json::to_vec_pretty(&a)
        .map_err(|e| HankError::Internal(format!("approval file: {e}")))?;
    crate::store::write_atomic(path, &bytes, true).map_err(|e| HankError::io("write", path, e))
}

/// The start time of process `pid` (`/proc/PID/stat` field 22), if it is alive.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces and parentheses) start at 3.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn run_alive(run: &ConfigRun) -> bool {
    process_start(run.pid) == Some(run.pid_start)
}

fn now_text() -> String {
    jiff::Timestamp::now().to_string()
}

/// Marks what differs between `from` and `now` as pending (keeping an older pending
/// baseline: that is what the user approved last).
fn mark(a: &mut ConfigApproval, from: ConfigFingerprint, now: &ConfigFingerprint) {
    if a.pending.is_none() && !changes(&from, now).is_empty() {
        a.pending = Some(ConfigPending {
            found_at: now_text(),
            approved: from,
        });
    }
}

/// The configuration changes of `project` waiting for the user's approval (empty: none).
/// A run record left by a run that died is settled first: what changed since its start is
/// pending. Pending changes that were undone are dropped.
pub fn unapproved(project: &Path) -> Result<Vec<String>> {
    let path = file_of(project)?;
    let mut a = load(&path)?;
    let before = a.clone();
    let now = fingerprint(project);
    if let Some(run) = a.run.take_if(|r| !run_alive(r)) {
        mark(&mut a, run.fingerprint, &now);
    }
    let mut list = match &a.pending {
        Some(p) => changes(&p.approved, &now),
        None => Vec::new(),
    };
    if list.is_empty() {
        a.pending = None;
    }
    if a != before {
        save(&path, &a)?;
    }
    // A run in progress (this very command's, say, before its delivery): what its agent
    // changed since it started is not approved either.
    if let Some(run) = &a.run {
        for c in changes(&run.fingerprint, &now) {
            if !list.contains(&c) {
                list.push(c);
            }
        }
    }
    Ok(list)
}

/// Whether a line of [`changes`] is about the repository's git configuration (a key of
/// [`is_program_key`]) rather than a hook, attributes, `.hankrc` or a profile.
#[must_use]
pub fn is_git_config_change(line: &str) -> bool {
    line.starts_with("git config ")
}

/// `hank config accept`: approves the configuration as it is now; returns what was pending.
pub fn accept(project: &Path) -> Result<Vec<String>> {
    let list = unapproved(project)?;
    let path = file_of(project)?;
    let mut a = load(&path)?;
    if a.pending.take().is_some() {
        save(&path, &a)?;
    }
    Ok(list)
}

/// The refusal listing the changes (exit 1).
fn refusal(list: &[String], command: &str) -> HankError {
    let mut msg = format!(
        "the configuration changed while a hank run was in progress (the agent could have \
         written it); {command} will not use it before you approve it:"
    );
    for line in list {
        msg.push_str("\n  - ");
        msg.push_str(line);
    }
    HankError::usage_hint(
        msg,
        "review the changes, then run `hank config accept` (or pass --accept-config)",
    )
}

/// Before `command` uses (and executes anything from) the project's configuration: nothing
/// pending, or `accept` (`--accept-config`), or — with a terminal on stdin and stderr — the
/// user answers yes to the list. Otherwise an error listing the changes (exit 1).
pub fn require(project: &Path, accept_flag: bool, command: &str) -> Result<()> {
    let list = unapproved(project)?;
    if list.is_empty() {
        return Ok(());
    }
    if accept_flag {
        accept(project)?;
        errln!(
            "hank: configuration changes accepted (--accept-config):\n  - {}",
            list.join("\n  - ")
        );
        return Ok(());
    }
    if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "hank: the configuration changed while a hank run was in progress (the agent \
             could have written it):\n  - {}",
            list.join("\n  - ")
        );
        let _ = write!(err, "Accept these changes for {command}? [y/N] ");
        let _ = err.flush();
        drop(err);
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            accept(project)?;
            return Ok(());
        }
    }
    Err(refusal(&list, command))
}

/// A `hank run` in progress, recorded outside the project.
#[derive(Debug)]
pub struct RunRecord {
    path: PathBuf,
    project: PathBuf,
    start: ConfigFingerprint,
    /// Whether the record on disk is this run's (another live run's record is left alone).
    owned: bool,
}

/// Records "run in progress" with the configuration now (call after [`require`]).
pub fn begin_run(project: &Path) -> Result<RunRecord> {
    let path = file_of(project)?;
    let mut a = load(&path)?;
    let start = fingerprint(project);
    let owned = !a.run.as_ref().is_some_and(run_alive);
    if owned {
        let pid = std::process::id();
        a.run = Some(ConfigRun {
            pid,
            pid_start: process_start(pid).unwrap_or(0),
            started_at: now_text(),
            fingerprint: start.clone(),
        });
        save(&path, &a)?;
    }
    Ok(RunRecord {
        path,
        project: project.to_path_buf(),
        start,
        owned,
    })
}

impl RunRecord {
    /// The run ended: what changed since its start is pending (returned, to be reported).
    pub fn end(self) -> Result<Vec<String>> {
        let mut a = load(&self.path)?;
        let now = fingerprint(&self.project);
        let list = changes(&self.start, &now);
        mark(&mut a, self.start, &now);
        if self.owned && a.run.as_ref().is_some_and(|r| r.pid == std::process::id()) {
            a.run = None;
        }
        save(&self.path, &a)?;
        Ok(list)
    }
}

/// A hank command that runs git or the forge on the project, recorded as a run (what changed
/// while it ran — a hook's side effect — is pending at its end, reported on stderr).
#[derive(Debug)]
pub struct Recorded {
    record: Option<RunRecord>,
    command: &'static str,
}

/// Records `command` as a run until the returned guard is dropped (call after [`require`]).
pub fn record(project: &Path, command: &'static str) -> Result<Recorded> {
    Ok(Recorded {
        record: Some(begin_run(project)?),
        command,
    })
}

impl Drop for Recorded {
    fn drop(&mut self) {
        let Some(record) = self.record.take() else {
            return;
        };
        match record.end() {
            Ok(changed) if !changed.is_empty() => errln!(
                "hank: warning: the configuration changed while {} ran; the next hank command \
                 needs your approval first (`hank config accept`):\n  - {}",
                self.command,
                changed.join("\n  - ")
            ),
            Ok(_) => {}
            Err(e) => errln!("hank: warning: cannot record the configuration's approval: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(rc: &[(&str, &str)], profiles: &[(&str, &str)]) -> ConfigFingerprint {
        ConfigFingerprint {
            hankrc: Some(
                rc.iter()
                    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                    .collect(),
            ),
            hankrc_unparsed: None,
            git: BTreeMap::new(),
            profiles: profiles
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
        }
    }

    #[test]
    fn changes_name_keys_and_files_and_hide_secrets() {
        let a = fp(
            &[
                ("MAX_LOOPS", "5"),
                ("ANTHROPIC_API_KEY", "hash:1"),
                ("MODEL", "x"),
            ],
            &[(".hank/agents/claude.toml", "a")],
        );
        let b = fp(
            &[
                ("MAX_LOOPS", "100000"),
                ("ANTHROPIC_API_KEY", "hash:2"),
                ("CLAUDE_CODE_CMD", "/tmp/evil"),
            ],
            &[
                (".hank/agents/claude.toml", "b"),
                (".hank/agents/x.toml", "c"),
            ],
        );
        let got = changes(&a, &b);
        assert_eq!(
            got,
            vec![
                ".hankrc: ANTHROPIC_API_KEY changed (secret value hidden)",
                ".hankrc: CLAUDE_CODE_CMD added: \"/tmp/evil\"",
                ".hankrc: MAX_LOOPS changed: \"5\" → \"100000\"",
                ".hankrc: MODEL removed (was \"x\")",
                ".hank/agents/claude.toml: changed",
                ".hank/agents/x.toml: added",
            ]
        );
        assert!(changes(&a, &a).is_empty());
        let none = ConfigFingerprint::default();
        assert_eq!(changes(&none, &fp(&[], &[])), vec![".hankrc: created"]);
        assert_eq!(changes(&fp(&[], &[]), &none), vec![".hankrc: deleted"]);
    }

    #[test]
    fn config_paths_pick_hanks_configuration_out_of_the_changed_paths() {
        let changed: Vec<String> = [
            ".hankrc",
            "src/main.rs",
            ".hank/agents/claude.toml",
            ".hank/PROMPT.md",
            "scripts/check.sh",
            "./docs/prompt.md",
            ".hankrc.bak",
            "scripts/other.sh",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let table: [(&str, Option<&str>, &[&str]); 4] = [
            (
                ".hank/PROMPT.md",
                Some("scripts/check.sh"),
                &[
                    ".hankrc",
                    ".hank/agents/claude.toml",
                    ".hank/PROMPT.md",
                    "scripts/check.sh",
                ],
            ),
            (
                "docs/prompt.md",
                None,
                &[".hankrc", ".hank/agents/claude.toml", "docs/prompt.md"],
            ),
            (
                "./.hank/PROMPT.md",
                Some("./scripts/check.sh"),
                &[
                    ".hankrc",
                    ".hank/agents/claude.toml",
                    ".hank/PROMPT.md",
                    "scripts/check.sh",
                ],
            ),
            ("", Some(""), &[".hankrc", ".hank/agents/claude.toml"]),
        ];
        for (prompt, script, want) in table {
            assert_eq!(
                config_paths(&changed, prompt, script),
                want,
                "{prompt} {script:?}"
            );
        }
        assert!(config_paths(&["src/x".to_string()], ".hank/PROMPT.md", None).is_empty());
    }

    #[test]
    fn the_verify_script_is_a_relative_file_the_command_runs() {
        let table: [(&str, Option<&str>); 9] = [
            ("./scripts/check.sh", Some("scripts/check.sh")),
            ("scripts/check.sh --fast", Some("scripts/check.sh")),
            ("sh ./ci.sh", Some("ci.sh")),
            ("bash -e scripts/t.sh", Some("scripts/t.sh")),
            ("cargo test", None),
            ("make test", None),
            ("/usr/bin/check", None),
            ("../outside.sh", None),
            ("", None),
        ];
        for (cmd, want) in table {
            assert_eq!(verify_script(cmd).as_deref(), want, "{cmd}");
        }
    }

    #[test]
    fn program_keys_are_those_git_runs_or_reads_more_config_from() {
        for k in [
            "core.hookspath",
            "core.fsmonitor",
            "filter.x.clean",
            "filter.x.process",
            "include.path",
            "includeif.gitdir:/x.path",
            "diff.x.textconv",
            "merge.x.driver",
            "alias.co",
        ] {
            assert!(is_program_key(k), "{k}");
        }
        for k in [
            "credential.helper",
            "credential.https://github.com.helper",
            "remote.origin.url",
            "remote.origin.pushurl",
            "url.https://evil.example/.insteadof",
            "gpg.program",
            "gpg.ssh.program",
            "commit.gpgsign",
            "core.askpass",
            "http.proxy",
            "http.https://github.com.extraheader",
            "protocol.ext.allow",
            "submodule.x.update",
        ] {
            assert!(is_program_key(k), "{k}");
        }
        for k in [
            "user.email",
            "branch.main.remote",
            "core.bare",
            "remote.origin.fetch",
            "http.postbuffer",
        ] {
            assert!(!is_program_key(k), "{k}");
        }
    }

    #[test]
    fn git_changes_name_hooks_config_keys_and_attributes() {
        let mut a = fp(&[], &[]);
        a.git
            .insert(".git/hooks/pre-commit".into(), "hash:1".into());
        a.git
            .insert("git config core.hookspath".into(), "hooks".into());
        let mut b = a.clone();
        b.git.insert(".git/hooks/pre-push".into(), "hash:2".into());
        b.git
            .insert(".git/hooks/pre-commit".into(), "hash:3".into());
        b.git
            .insert("git config filter.x.clean".into(), "evil".into());
        b.git
            .insert("git config core.hookspath".into(), "/tmp/h".into());
        b.git.insert(".gitattributes".into(), "hash:4".into());
        assert_eq!(
            changes(&a, &b),
            vec![
                ".git/hooks/pre-commit: changed",
                ".git/hooks/pre-push: added",
                ".gitattributes: added",
                "git config core.hookspath changed: \"hooks\" → \"/tmp/h\"",
                "git config filter.x.clean added: \"evil\"",
            ]
        );
        assert_eq!(
            changes(&b, &a),
            vec![
                ".git/hooks/pre-commit: changed",
                "git config core.hookspath changed: \"/tmp/h\" → \"hooks\"",
                ".git/hooks/pre-push: removed",
                ".gitattributes: removed",
                "git config filter.x.clean: removed",
            ]
        );
    }

    #[test]
    fn a_configuration_read_only_in_part_is_no_change() {
        let mut a = fp(&[], &[]);
        a.git
            .insert("git config remote.origin.url".into(), "u".into());
        a.git.insert("git config pager.log".into(), "less".into());
        let mut b = fp(&[], &[]);
        b.git.insert(
            "git config in /p/.git/config".into(),
            format!("{INCOMPLETE}git was stopped: hank was interrupted"),
        );
        assert_eq!(changes(&a, &b), Vec::<String>::new());
        // A hook is still compared: it was read.
        b.git
            .insert(".git/hooks/pre-commit".into(), "hash:1".into());
        assert_eq!(changes(&a, &b), vec![".git/hooks/pre-commit: added"]);
        // A file that cannot be read for another reason is a change.
        let mut c = fp(&[], &[]);
        c.git.insert(
            "git config in /p/.git/config".into(),
            "unreadable: permission denied".into(),
        );
        assert_eq!(changes(&a, &c).len(), 3);
    }

    #[test]
    fn an_upstream_naming_a_configured_remote_is_not_fingerprinted() {
        let e = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect()
        };
        let entries = e(&[
            ("remote.origin.url", "/r.git"),
            ("branch.x.remote", "origin"),
        ]);
        assert!(is_upstream_of_a_remote(
            "branch.x.remote",
            "origin",
            &entries
        ));
        assert!(is_upstream_of_a_remote(
            "branch.x.merge",
            "refs/heads/x",
            &entries
        ));
        assert!(!is_upstream_of_a_remote(
            "branch.x.remote",
            "https://evil.example/r.git",
            &entries
        ));
        assert!(!is_upstream_of_a_remote(
            "branch.x.remote",
            "evil",
            &entries
        ));
        assert!(!is_upstream_of_a_remote(
            "branch.x.pushremote",
            "origin",
            &entries
        ));
        assert!(!is_upstream_of_a_remote("pager.log", "less", &entries));
    }

    #[test]
    fn shown_values_are_one_clean_line() {
        assert_eq!(shown("MODEL", "a\u{1b}]0;x\u{7}b"), "\"ab\"");
        assert!(!shown("MODEL", "a\u{1b}[2Jb").contains('\u{1b}'));
        assert_eq!(shown("GITHUB_TOKEN", "abc"), "(secret value hidden)");
    }

    #[test]
    fn the_start_time_of_this_process_is_read() {
        let me = std::process::id();
        assert!(process_start(me).is_some());
        assert_eq!(process_start(me), process_start(me));
    }
}
