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
    fp
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
    let list = match &a.pending {
        Some(p) => changes(&p.approved, &now),
        None => Vec::new(),
    };
    if list.is_empty() {
        a.pending = None;
    }
    if a != before {
        save(&path, &a)?;
    }
    Ok(list)
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
