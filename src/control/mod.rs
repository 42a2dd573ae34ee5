//! The control channel of a running loop (`hank ctl`).
//!
//! - **Journal**: `control.jsonl` in the project's per-user folder
//!   (`Store::with_user_control`; never `.hank/`, which the agent can write), append-only,
//!   0600, never through a symlink, refused when another user owns it. `hank ctl CMD` appends a command with an id; the loop reads
//!   them through [`ControlInbox`] and appends an acknowledgement per id. A command without
//!   an acknowledgement is pending (delivered again after a restart: never lost); one with is
//!   never delivered again (never applied twice).
//! - **Secret**: `hank ctl init` writes a random per-project key, 0600, into the per-user
//!   folder ([`crate::store::userdir::project_dir`]), where the agent working in the project
//!   cannot read it.
//! - **Remote**: [`poll_remote`] reads the ntfy `CONTROL_TOPIC` by outbound HTTP (ntfy's
//!   JSON poll: `GET TOPIC/json?poll=1&since=ID`), verifies each message
//!   ([`crate::policy::control::verify`]: signature, time, nonce) and journals the good ones.
//!   Nonces and the last message id are kept in the per-user folder, under a lock (the
//!   loop's reader and `hank ctl poll --watch` may run at once). Hank never listens on a
//!   socket.
//! - **The loop's reader** (`remote.rs`): `hank run` polls `CONTROL_TOPIC` itself on a thread
//!   of its own and acknowledges each remote command it takes back on the topic.
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! `hank ctl`'s I/O: the journal `control.jsonl` in the per-user dir (`Store::with_user_control`;
//! never in `.hank/`, where the agent writes) (`submit`, `submit_to` with `--task`, `submit_to_run`
//! for the running loop's pid — `hank ctl` refuses a command when no loop or fleet runs —,
//! `submit_once` under a given id; `LiveControl::open_at` expires a pending command of another run
//! (`EXPIRED`), `ControlInbox::poll`/`ack`: pending until acked, never applied twice;
//! `poll_moved`/`settle`: the one stat-gated read, a read error warned once, for `LiveControl` and
//! the fleet's `FleetControl`), the per-project key in the per-user dir (`init_secret`,
//! `load_secret`), `poll_remote` (ntfy JSON poll of CONTROL_TOPIC → verified commands; nonces and
//! `since` in the per-user dir, under a lock), `send_remote`; `remote.rs` (`RemotePoller`: `hank
//! run`'s own reader of CONTROL_TOPIC on a thread, every 5 s, into the journal; acks of remote
//! commands published back on the topic tagged `hank-ack`, which the reader skips; `topic` refuses
//! a CONTROL_TOPIC that is a NOTIFY target); `LiveControl` (the loop's source: stat-gated polling,
//! ack as taken, a pause replayed after a restart, `Taken` for the events, `with_remote`)

pub mod remote;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;

use crate::error::{HankError, Result};
use crate::policy::control::{self, Command, MAX_SKEW_SECS};
use crate::store::schema::{ControlEntry, ControlSource, RemoteControlState};
use crate::store::{Store, userdir, write_atomic};

/// A command read from the journal, not yet acknowledged.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub id: String,
    pub at: Timestamp,
    pub source: ControlSource,
    pub command: Command,
    /// `hank ctl --task NAME`: for that task of the running fleet only.
    pub task: Option<String>,
    /// The loop it was given to (its pid); `None`: the next run that takes it.
    pub run: Option<u32>,
}

/// A command and, when the loop took it, its acknowledgement.
#[derive(Debug, Clone, PartialEq)]
pub struct Journaled {
    pub pending: Pending,
    pub ack: Option<(Timestamp, String)>,
}

/// Reads the journal: every command in order with its acknowledgement. Lines that do not
/// read (a newer hank's, a torn last line) are skipped.
pub fn read_journal(store: &Store) -> Result<Vec<Journaled>> {
    let text = store.read_control()?;
    let mut out: Vec<Journaled> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<ControlEntry>(line) {
            Ok(ControlEntry::Command {
                id,
                at,
                source,
                command,
                task,
                run,
            }) => {
                if out.iter().all(|j| j.pending.id != id) {
                    out.push(Journaled {
                        pending: Pending {
                            id,
                            at,
                            source,
                            command,
                            task,
                            run,
                        },
                        ack: None,
                    });
                }
            }
            Ok(ControlEntry::Ack { id, at, outcome }) => {
                if let Some(j) = out
                    .iter_mut()
                    .find(|j| j.pending.id == id && j.ack.is_none())
                {
                    j.ack = Some((at, outcome));
                }
            }
            Err(_) => {}
        }
    }
    Ok(out)
}

/// A fresh command id: the time and 6 random bytes.
fn new_id(now: Timestamp) -> Result<String> {
    Ok(format!("c{}-{}", now.as_millisecond(), random_hex(6)?))
}

/// `n` random bytes as hex.
pub fn random_hex(n: usize) -> Result<String> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes)
        .map_err(|e| HankError::Internal(format!("no randomness from the system: {e}")))?;
    Ok(control::hex(&bytes))
}

/// Appends `command` to the journal; its id.
pub fn submit(
    store: &Store,
    command: Command,
    source: ControlSource,
    now: Timestamp,
) -> Result<String> {
    submit_to(store, command, source, None, now)
}

/// Appends `command` to the journal, for the fleet's task `task` only when given; its id.
pub fn submit_to(
    store: &Store,
    command: Command,
    source: ControlSource,
    task: Option<String>,
    now: Timestamp,
) -> Result<String> {
    let id = new_id(now)?;
    append_command(store, &id, command, source, task, None, now)?;
    Ok(id)
}

/// Appends `command` for the loop `run` (its pid) only: a run that starts and finds it
/// pending expires it ([`EXPIRED`]); its id.
pub fn submit_to_run(
    store: &Store,
    command: Command,
    source: ControlSource,
    run: u32,
    now: Timestamp,
) -> Result<String> {
    let id = new_id(now)?;
    append_command(store, &id, command, source, None, Some(run), now)?;
    Ok(id)
}

/// Appends `command` under the id `id` unless the journal already holds that id (`false`
/// then): the fleet forwards each command once, even when it forwards it again after a
/// restart.
pub fn submit_once(
    store: &Store,
    id: &str,
    command: Command,
    source: ControlSource,
    now: Timestamp,
) -> Result<bool> {
    if read_journal(store)?.iter().any(|j| j.pending.id == id) {
        return Ok(false);
    }
    append_command(store, id, command, source, None, None, now)?;
    Ok(true)
}

fn append_command(
    store: &Store,
    id: &str,
    command: Command,
    source: ControlSource,
    task: Option<String>,
    run: Option<u32>,
    now: Timestamp,
) -> Result<()> {
    let line = serde_json::to_string(&ControlEntry::Command {
        id: id.to_string(),
        at: now,
        source,
        command,
        task,
        run,
    })
    .map_err(|e| HankError::Internal(format!("control entry: {e}")))?;
    store.append_control(&line)
}

/// The reading side of the journal, for the loop and for a fleet: [`ControlInbox::poll`]
/// reads it whole; [`ControlInbox::poll_moved`] only when it moved since
/// [`ControlInbox::settle`] (one `stat` otherwise), with a read error warned about once.
pub struct ControlInbox {
    store: Store,
    /// Ids already handed out by this process (not acknowledged yet).
    delivered: HashSet<String>,
    /// The journal's stamp when it was last settled.
    seen: Option<Stamp>,
    /// The last read error, warned about once.
    failed: Option<String>,
}

/// What [`ControlInbox::poll_moved`] found.
#[derive(Debug)]
pub enum Polled {
    /// The journal did not move (or is missing): nothing was read.
    Same,
    /// The commands not handed out yet (maybe none).
    New(Vec<Pending>),
    /// The journal could not be read: the error's text the first time it is seen, `None`
    /// while the same error repeats.
    Failed(Option<String>),
}

impl ControlInbox {
    #[must_use]
    pub fn new(store: Store) -> Self {
        Self {
            store,
            delivered: HashSet::new(),
            seen: None,
            failed: None,
        }
    }

    /// The commands not acknowledged and not yet handed out by this inbox, oldest first.
    /// After a restart every unacknowledged command comes again.
    pub fn poll(&mut self) -> Result<Vec<Pending>> {
        let fresh: Vec<Pending> = read_journal(&self.store)?
            .into_iter()
            .filter(|j| j.ack.is_none() && !self.delivered.contains(&j.pending.id))
            .map(|j| j.pending)
            .collect();
        self.delivered.extend(fresh.iter().map(|p| p.id.clone()));
        Ok(fresh)
    }

    /// [`ControlInbox::poll`], only when the journal moved since the last
    /// [`ControlInbox::settle`].
    pub fn poll_moved(&mut self) -> Polled {
        let stamp = self.stamp();
        if stamp.is_none() || stamp == self.seen {
            return Polled::Same;
        }
        match self.poll() {
            Ok(pending) => {
                self.failed = None;
                Polled::New(pending)
            }
            Err(e) => {
                let e = e.to_string();
                if self.failed.as_ref() == Some(&e) {
                    Polled::Failed(None)
                } else {
                    self.failed = Some(e.clone());
                    Polled::Failed(Some(e))
                }
            }
        }
    }

    /// After the acknowledgements of a poll: our own acknowledgements moved the journal, so
    /// it is read again only when someone else moves it.
    pub fn settle(&mut self) {
        self.seen = self.stamp();
    }

    fn stamp(&self) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(self.store.control_path())
            .ok()
            .map(|m| (m.len(), m.modified().ok(), m.ino()))
    }

    /// Records what became of command `id` (`applied`, or `refused: why`).
    pub fn ack(&mut self, id: &str, outcome: &str, now: Timestamp) -> Result<()> {
        let line = serde_json::to_string(&ControlEntry::Ack {
            id: id.to_string(),
            at: now,
            outcome: outcome.to_string(),
        })
        .map_err(|e| HankError::Internal(format!("control entry: {e}")))?;
        self.store.append_control(&line)
    }
}

/// What the loop did with one journaled command (an event in `events.jsonl`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub id: String,
    /// The command as typed (`pause`, `set MAX_LOOPS=3`).
    pub command: String,
    /// What the journal's acknowledgement says (`applied`, `refused: why`).
    pub outcome: String,
}

/// The journal's size, change time and inode: it is read again only when one moved.
type Stamp = (u64, Option<std::time::SystemTime>, u64);

/// The running loop's control source: the journal, read only when it changed (one `stat`
/// per poll otherwise). Each command is acknowledged as it is handed to the loop, so it is
/// never applied twice; one without an acknowledgement comes again after a restart. A
/// pause the loop took before a restart (and no resume after it) holds again at start.
pub struct LiveControl {
    inbox: ControlInbox,
    /// Facts to hand out at the first poll (a pause from before a restart).
    replay: Vec<crate::policy::run::Control>,
    taken: Vec<Taken>,
    warnings: Vec<String>,
    /// The reader of `CONTROL_TOPIC`, when the loop reads it ([`remote::RemotePoller`]).
    remote: Option<remote::RemotePoller>,
}

/// The outcome of a command no loop took before the run it was given to ended: given before
/// the run that found it started.
pub const EXPIRED: &str = "expired";

/// Acknowledges as [`EXPIRED`] every pending command of `journal` given to another loop than
/// `own` (the pid of the run that opens the journal, at `now`): a command applies to the loop
/// that was running when it was given, never to a later one (a Ctrl-C'd loop's untaken `stop`
/// must not stop the next run). What was expired, for the run's `control` events.
fn expire(
    inbox: &mut ControlInbox,
    journal: &[Journaled],
    own: u32,
    now: Timestamp,
) -> Result<Vec<Taken>> {
    let mut out = Vec::new();
    for j in journal
        .iter()
        .filter(|j| j.ack.is_none() && j.pending.run.is_some_and(|r| r != own))
    {
        let outcome = format!(
            "{EXPIRED}: given at {} to a run that ended before it took it",
            j.pending.at
        );
        inbox.ack(&j.pending.id, &outcome, now)?;
        out.push(Taken {
            id: j.pending.id.clone(),
            command: j.pending.command.to_text(),
            outcome,
        });
    }
    Ok(out)
}

impl LiveControl {
    /// The control source of the project `store` belongs to.
    #[must_use]
    pub fn open(store: Store) -> Self {
        Self::open_at(store, None)
    }

    /// [`LiveControl::open`] for the run `own` (its pid, the lock's holder; `now`): the
    /// commands still pending for another run expire ([`EXPIRED`]).
    #[must_use]
    pub fn open_at(store: Store, own: Option<(u32, Timestamp)>) -> Self {
        let mut replay = Vec::new();
        let mut taken = Vec::new();
        let mut warnings = Vec::new();
        let mut inbox = ControlInbox::new(store.clone());
        match read_journal(&store) {
            Ok(journal) => {
                if let Some((pid, now)) = own {
                    match expire(&mut inbox, &journal, pid, now) {
                        Ok(expired) => taken.extend(expired),
                        Err(e) => warnings.push(format!(
                            "the control journal: commands of an ended run could not be expired: {e}"
                        )),
                    }
                }
                if let Some(j) = last_pause_or_resume(&journal)
                    && j.pending.command == Command::Pause
                {
                    replay.push(crate::policy::run::Control::Pause);
                    taken.push(Taken {
                        id: j.pending.id.clone(),
                        command: j.pending.command.to_text(),
                        outcome: "applied again: paused before the restart".into(),
                    });
                }
            }
            Err(e) => warnings.push(format!("the control journal: {e}")),
        }
        Self {
            inbox,
            replay,
            taken,
            warnings,
            remote: None,
        }
    }

    /// Also reads `CONTROL_TOPIC` (its commands come through the journal; each one taken is
    /// acknowledged back on the topic).
    #[must_use]
    pub fn with_remote(mut self, remote: Option<remote::RemotePoller>) -> Self {
        self.remote = remote;
        self
    }

    /// The commands that came since the last poll, as the loop's control facts, each
    /// acknowledged in the journal (`set` checked again: a bad one is refused, not applied).
    pub fn poll(&mut self, now: Timestamp) -> Vec<crate::policy::run::Control> {
        let mut out = std::mem::take(&mut self.replay);
        if let Some(r) = &self.remote {
            self.warnings.extend(r.take_warnings());
        }
        let pending = match self.inbox.poll_moved() {
            Polled::New(pending) => pending,
            Polled::Same => return out,
            Polled::Failed(warning) => {
                self.warnings
                    .extend(warning.map(|e| format!("hank ctl commands cannot be read: {e}")));
                return out;
            }
        };
        for p in pending {
            let (control, outcome) = match (
                &p.task,
                control::to_control(&p.command, &crate::settings::live::check),
            ) {
                // `hank ctl --task` was for a fleet's task; no fleet took it.
                (Some(task), _) => (
                    None,
                    format!("refused: it was for the fleet's task {task:?}, and no fleet took it"),
                ),
                (None, Ok(c)) => (Some(c), "applied".to_string()),
                (None, Err(why)) => (None, format!("refused: {why}")),
            };
            if let Err(e) = self.inbox.ack(&p.id, &outcome, now) {
                // Not acknowledged: not applied either (it comes again after a restart).
                self.warnings.push(format!(
                    "hank ctl {} not taken: its acknowledgement could not be written: {e}",
                    p.command.to_text()
                ));
                continue;
            }
            out.extend(control);
            if p.source == ControlSource::Remote
                && let Some(r) = &self.remote
            {
                r.ack(format!("{} {}: {outcome}", p.id, p.command.to_text()));
            }
            self.taken.push(Taken {
                id: p.id,
                command: p.command.to_text(),
                outcome,
            });
        }
        self.inbox.settle();
        out
    }

    /// What was taken since the last call, and warnings (a journal that cannot be read).
    pub fn take_log(&mut self) -> (Vec<Taken>, Vec<String>) {
        (
            std::mem::take(&mut self.taken),
            std::mem::take(&mut self.warnings),
        )
    }
}

/// The last `pause` or `resume` the loop (or the fleet) applied: acknowledged and not
/// refused.
pub fn last_pause_or_resume(journal: &[Journaled]) -> Option<&Journaled> {
    journal
        .iter()
        .rev()
        .find(|j| matches!(j.pending.command, Command::Pause | Command::Resume) && taken(j))
}

/// The command was acknowledged and not refused.
#[must_use]
pub fn taken(j: &Journaled) -> bool {
    j.ack
        .as_ref()
        .is_some_and(|(_, o)| !o.starts_with("refused"))
}

/// The per-project secret's file (in the per-user folder).
pub fn secret_path(project_root: &Path) -> Result<PathBuf> {
    Ok(userdir::project_dir(project_root)?.join("control.key"))
}

/// Writes a new random secret (32 bytes, hex) 0600; refuses to replace one unless `rotate`.
pub fn init_secret(project_root: &Path, rotate: bool) -> Result<String> {
    let path = secret_path(project_root)?;
    if !rotate && std::fs::symlink_metadata(&path).is_ok() {
        return Err(HankError::usage_hint(
            format!(
                "{} already holds this project's control key",
                path.display()
            ),
            "hank ctl init --rotate makes a new one (commands signed with the old key are then refused)",
        ));
    }
    let secret = random_hex(32)?;
    write_atomic(&path, format!("{secret}\n").as_bytes(), true)
        .map_err(|e| HankError::io("failed to write", &path, e))?;
    Ok(secret)
}

/// The project's secret, or an error saying to run `hank ctl init`.
pub fn load_secret(project_root: &Path) -> Result<Vec<u8>> {
    let path = secret_path(project_root)?;
    let bytes = crate::fsread::read_if_exists(&path, 4096, crate::fsread::Follow::No)
        .map_err(|e| HankError::io("failed to read", &path, e))?;
    let Some(bytes) = bytes else {
        return Err(HankError::usage_hint(
            format!("no control key at {}", path.display()),
            "run hank ctl init (it prints the key once)",
        ));
    };
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    if text.len() < 32 {
        return Err(HankError::usage(format!(
            "{}: expected the hex key written by hank ctl init",
            path.display()
        )));
    }
    Ok(text.into_bytes())
}

/// A signed message for `command`, as a phone or another machine sends it.
pub fn sign_now(project_root: &Path, command: &Command, now: Timestamp) -> Result<String> {
    let secret = load_secret(project_root)?;
    let nonce = random_hex(12)?;
    Ok(control::sign(
        &secret,
        now.as_second(),
        &nonce,
        &command.to_text(),
    ))
}

/// What one poll of the control topic did.
#[derive(Debug, Default)]
pub struct RemoteReport {
    /// Ids of the commands journaled.
    pub accepted: Vec<(String, Command)>,
    /// One warning per refused message, saying why.
    pub refused: Vec<String>,
}

fn remote_state_path(project_root: &Path) -> Result<PathBuf> {
    Ok(userdir::project_dir(project_root)?.join("control-remote.json"))
}

/// One ntfy message of a JSON poll.
#[derive(serde::Deserialize)]
struct NtfyLine {
    #[serde(default)]
    id: String,
    #[serde(default)]
    event: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    tags: Vec<String>,
}

/// Reads the control topic once (`GET TOPIC/json?poll=1&since=…`), verifies each message
/// and journals the good ones. Refusals are warnings, never commands.
pub fn poll_remote(
    project_root: &Path,
    store: &Store,
    topic_url: &str,
    now: Timestamp,
    timeout: Duration,
) -> Result<RemoteReport> {
    let secret = load_secret(project_root)?;
    let state_path = remote_state_path(project_root)?;
    // One reader at a time (the loop's and `hank ctl poll --watch`): the nonces and `since`
    // are read, checked and written under this lock, so no command is journaled twice.
    let _lock = lock_remote_state(&state_path)?;
    let mut state: RemoteControlState =
        crate::fsread::read_if_exists(&state_path, 1 << 20, crate::fsread::Follow::No)
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
    // The first poll reads only what is recent enough to be valid.
    let since = state
        .since
        .clone()
        .unwrap_or_else(|| format!("{}s", MAX_SKEW_SECS));
    let mut report = RemoteReport::default();
    let mut since = since;
    // A busy or flooded topic is read in bounded pages, each from the last message taken: a
    // flood costs time, never every poll, and a signed command after it is still read.
    for _ in 0..REMOTE_PAGES {
        let url = format!(
            "{}/json?poll=1&since={since}",
            topic_url.trim_end_matches('/')
        );
        let mut failure = None;
        let whole = crate::notify::http::get_lines(
            &url,
            timeout,
            REMOTE_LINE_MAX,
            crate::notify::http::MAX_BODY,
            |line| {
                if failure.is_none()
                    && let Err(e) = take_remote_line(
                        line,
                        &secret,
                        now,
                        &crate::settings::live::check,
                        store,
                        &mut state,
                        &mut report,
                    )
                {
                    failure = Some(e);
                }
            },
        )
        .map_err(|e| {
            HankError::usage(format!(
                "could not read the control topic CONTROL_TOPIC ({}): {e}",
                crate::policy::notify::Target {
                    kind: crate::policy::notify::TargetKind::Ntfy,
                    url: topic_url.to_string()
                }
                .shown()
            ))
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
        match &state.since {
            Some(id) if !whole && *id != since => since = id.clone(),
            _ => break,
        }
    }
    // Nonces older than twice the allowed skew can no longer pass the time check.
    let horizon = now.as_second() - 2 * MAX_SKEW_SECS;
    state.nonces.retain(|_, t| *t >= horizon);
    let bytes = serde_json::to_vec_pretty(&state)
        .map_err(|e| HankError::Internal(format!("control state: {e}")))?;
    write_atomic(&state_path, &bytes, true)
        .map_err(|e| HankError::io("failed to write", &state_path, e))?;
    Ok(report)
}

/// Most pages of the control topic read in one poll ([`crate::notify::http::MAX_BODY`] each).
const REMOTE_PAGES: usize = 16;

/// Longest line of the topic's JSON kept (ntfy messages are at most 4 KiB of text).
const REMOTE_LINE_MAX: usize = 64 * 1024;

/// One line of the topic's JSON poll: a message moves `since`; a signed command hank has not
/// seen is journaled, anything else refused with why.
fn take_remote_line(
    line: &str,
    secret: &[u8],
    now: Timestamp,
    check: &dyn Fn(&str, &str) -> std::result::Result<(), String>,
    store: &Store,
    state: &mut RemoteControlState,
    report: &mut RemoteReport,
) -> Result<()> {
    if line.trim().is_empty() {
        return Ok(());
    }
    let Ok(m) = serde_json::from_str::<NtfyLine>(line) else {
        return Ok(());
    };
    if m.event != "message" {
        return Ok(());
    }
    if !m.id.is_empty() {
        state.since = Some(m.id.clone());
    }
    // hank's own acknowledgements on the topic are never commands.
    if m.tags.iter().any(|t| t == remote::ACK_TAG) {
        return Ok(());
    }
    let seen = |n: &str| state.nonces.contains_key(n);
    match control::verify(&m.message, secret, now, &seen, check) {
        Ok((command, nonce)) => {
            let time = control::split(&m.message).map_or(now.as_second(), |s| s.time);
            state.nonces.insert(nonce, time);
            let id = submit(store, command.clone(), ControlSource::Remote, now)?;
            report.accepted.push((id, command));
        }
        Err(refusal) => report.refused.push(format!(
            "remote command refused, {} (ntfy message {})",
            refusal.describe(),
            if m.id.is_empty() { "without id" } else { &m.id }
        )),
    }
    Ok(())
}

/// An exclusive lock beside the remote state file, released when the file closes.
fn lock_remote_state(state_path: &Path) -> Result<std::fs::File> {
    userdir::lock_file(&state_path.with_extension("lock"))
}

/// Publishes a signed `command` to the control topic (ntfy: the message is the body).
pub fn send_remote(
    project_root: &Path,
    topic_url: &str,
    command: &Command,
    now: Timestamp,
    timeout: Duration,
) -> Result<String> {
    let message = sign_now(project_root, command, now)?;
    crate::notify::http::post(topic_url, "text/plain", &message, timeout)
        .map_err(|e| HankError::usage(format!("could not publish to CONTROL_TOPIC: {e}")))?;
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".hank")).unwrap();
        let store = Store::new(dir.path());
        (dir, store)
    }

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_journal_survives_a_restart_and_never_applies_twice() {
        let (_d, store) = store();
        let now = t("2026-11-26T10:00:00Z");
        let a = submit(&store, Command::Pause, ControlSource::Local, now).unwrap();
        let b = submit(
            &store,
            Command::Note { text: "hi".into() },
            ControlSource::Local,
            now,
        )
        .unwrap();
        assert_ne!(a, b);
        let mut inbox = ControlInbox::new(store.clone());
        let got = inbox.poll().unwrap();
        assert_eq!(
            got.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            [a.as_str(), b.as_str()]
        );
        assert!(inbox.poll().unwrap().is_empty(), "handed out once");
        inbox.ack(&a, "applied", now).unwrap();
        // A restart: a new inbox sees only the unacknowledged command.
        let mut again = ControlInbox::new(store.clone());
        let got = again.poll().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id, b);
        assert_eq!(got[0].command, Command::Note { text: "hi".into() });
        // A torn last line is skipped, the rest still reads.
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(store.control_path())
            .unwrap();
        f.write_all(b"{\"type\":\"command\",\"id\":").unwrap();
        let journal = read_journal(&store).unwrap();
        assert_eq!(journal.len(), 2);
        assert_eq!(journal[0].ack.as_ref().unwrap().1, "applied");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(store.control_path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_command_for_another_run_expires_and_one_for_the_next_run_is_taken() {
        use crate::policy::run::Control;
        let (_d, store) = store();
        let now = t("2026-11-26T10:00:00Z");
        let old = submit_to_run(&store, Command::Stop, ControlSource::Local, 41, now).unwrap();
        let next = submit(&store, Command::Pause, ControlSource::Remote, now).unwrap();
        let own = submit_to_run(&store, Command::RetryNow, ControlSource::Local, 42, now).unwrap();
        let mut live = LiveControl::open_at(store.clone(), Some((42, now)));
        assert_eq!(live.poll(now), [Control::Pause, Control::RetryNow]);
        let journal = read_journal(&store).unwrap();
        let outcome = |id: &str| {
            let j = journal.iter().find(|j| j.pending.id == id).unwrap();
            j.ack.as_ref().unwrap().1.clone()
        };
        assert!(outcome(&old).starts_with(EXPIRED), "{}", outcome(&old));
        assert_eq!(outcome(&next), "applied");
        assert_eq!(outcome(&own), "applied");
        let (taken, _) = live.take_log();
        assert!(taken[0].outcome.starts_with(EXPIRED) && taken[0].command == "stop");
    }

    #[test]
    fn the_live_source_acknowledges_refuses_and_replays_a_pause() {
        use crate::policy::run::Control;
        let (_d, store) = store();
        let now = t("2026-11-26T10:00:00Z");
        let mut live = LiveControl::open(store.clone());
        assert!(live.poll(now).is_empty(), "no journal: nothing");
        let pause = submit(&store, Command::Pause, ControlSource::Local, now).unwrap();
        // A `set` written by hand, not through `hank ctl`: refused when taken.
        let bad = submit(
            &store,
            Command::Set {
                key: "AGENT".into(),
                value: "codex".into(),
            },
            ControlSource::Local,
            now,
        )
        .unwrap();
        assert_eq!(live.poll(now), [Control::Pause]);
        assert!(
            live.poll(now).is_empty(),
            "unchanged journal: nothing again"
        );
        let (taken, warnings) = live.take_log();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(taken.len(), 2);
        assert_eq!(
            (taken[0].id.as_str(), taken[0].outcome.as_str()),
            (pause.as_str(), "applied")
        );
        assert_eq!(taken[1].id, bad);
        assert!(
            taken[1].outcome.starts_with("refused: AGENT cannot be set"),
            "{}",
            taken[1].outcome
        );
        let journal = read_journal(&store).unwrap();
        assert!(journal.iter().all(|j| j.ack.is_some()));

        // A restart: the applied pause holds again, nothing is acknowledged twice.
        let mut again = LiveControl::open(store.clone());
        assert_eq!(again.poll(now), [Control::Pause]);
        assert!(again.poll(now).is_empty());
        let (taken, _) = again.take_log();
        assert_eq!(taken.len(), 1);
        assert!(taken[0].outcome.starts_with("applied again"));
        let resume = submit(&store, Command::Resume, ControlSource::Local, now).unwrap();
        assert_eq!(again.poll(now), [Control::Resume]);
        assert_eq!(again.take_log().0[0].id, resume);
        // After a resume, a restart is not paused.
        let mut third = LiveControl::open(store.clone());
        assert!(third.poll(now).is_empty());
        let acks = read_journal(&store).unwrap();
        assert_eq!(acks.len(), 3);
        assert!(acks.iter().all(|j| j.ack.is_some()));
    }

    #[test]
    fn a_command_for_a_fleet_task_is_refused_by_a_plain_loop() {
        let (_d, store) = store();
        let now = t("2026-11-26T10:00:00Z");
        let id = submit_to(
            &store,
            Command::Note { text: "hi".into() },
            ControlSource::Local,
            Some("Beta".into()),
            now,
        )
        .unwrap();
        let mut live = LiveControl::open(store.clone());
        assert!(live.poll(now).is_empty());
        let (taken, _) = live.take_log();
        assert_eq!(taken[0].id, id);
        assert!(
            taken[0]
                .outcome
                .starts_with("refused: it was for the fleet's task \"Beta\""),
            "{}",
            taken[0].outcome
        );
        // Forwarded copies are written once per id.
        assert!(submit_once(&store, "x.beta", Command::Stop, ControlSource::Local, now).unwrap());
        assert!(!submit_once(&store, "x.beta", Command::Stop, ControlSource::Local, now).unwrap());
        assert_eq!(read_journal(&store).unwrap().len(), 2);
    }

    #[test]
    fn a_symlinked_journal_is_not_followed() {
        let (d, store) = store();
        let outside = d.path().join("outside");
        std::fs::write(&outside, "").unwrap();
        std::os::unix::fs::symlink(&outside, store.control_path()).unwrap();
        submit(
            &store,
            Command::Stop,
            ControlSource::Local,
            t("2026-11-26T10:00:00Z"),
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "");
        assert_eq!(read_journal(&store).unwrap().len(), 1);
    }
}
