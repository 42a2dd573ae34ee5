//! Sending notifications (`NOTIFY`): a sender thread fed by a bounded queue, so that the
//! loop never waits for a target. Each request has a timeout; a failed one is retried with
//! backoff; a target that still fails is a warning, once per target per run. A full queue
//! drops the message (a warning, once). Which events become messages, and their text, is
//! [`crate::policy::notify`]; secrets are redacted here, as everywhere else.
//!
//! `http.rs` sends through hank's one HTTP client, [`crate::http`] (also for the control-topic
//! poller).
//!
//! **One notifier, two owners.** Every message is made by one constructor ([`Hook::new`]:
//! the targets, event classes and secrets of the settings) and one send ([`Hook::event`]:
//! the rules' filter [`Seen::message`], redaction, the queue). What differs is who holds the
//! hook, and that stays two on purpose:
//! - **a run** (`hank run`, each fleet task's `hank run`) owns its hook in its effects
//!   (`effects::Real`; every event of the run — the engine's news and the client's retries
//!   during a call — goes through `effects::output::Told`). The run's facts go with each
//!   message (cost so far, the plan's items, the last loop's questions), a target's failure is
//!   a warning on the run's terminal and in its log, and the end ([`Hook::finish`]) is awaited
//!   on the run's runtime, where the signal task that lets Ctrl-C skip it runs. Owned, not
//!   global: two runs in one process (the engine's tests, a supervisor driving runs itself)
//!   never share one hook's `Seen`, and the engine's tests run with no notifier at all.
//! - **a command outside a run** (`hank deliver`, `hank fleet` — its task events and its
//!   integration delivery, `deliver::tell_outside_run` —, `hank watch`'s issue events, the
//!   resumed delivery at `hank run`'s start) [`install`]s one hook for the process and
//!   [`offer`]s its events to it: they are told from deep inside the fleet's supervisor and
//!   the delivery procedures, which have no run to carry a handle; they have no run's cost or
//!   items, a failure is one line on stderr, and the end is the [`Installed`] guard's drop
//!   (blocking, on the command's thread, until sent or a new signal).
//!
//! ## At a glance (moved here from CLAUDE.md)
//!
//! the NOTIFY sender: `Notifier` (own thread, bounded queue of 64, timeout, retries with backoff,
//! one warning per failing target, bounded flush at exit), `Hook` (one constructor `Hook::new`, one
//! send `Hook::event`; two owners, on purpose — see the module's doc: a run's own, kept by
//! `effects::Real`, every event of the run told through `effects::output::Told` (the engine's news,
//! the client's retries during a call) with the run's cost, items and questions, its end awaited on
//! the run's runtime (`Hook::finish`); and the process-wide one of a command outside a run,
//! `install`/`offer`: `hank fleet` (`fleet/save.rs`'s task events, the integration delivery through
//! `deliver::tell_outside_run`), `hank deliver`, `hank watch`'s issue events, a resumed delivery),
//! `http.rs` (requests through hank's one HTTP client `crate::http`, `ureq` + rustls; never a
//! listening socket; a loopback URL bypasses `HTTP(S)_PROXY`); what a message says is `policy::notify` (words for a phone, the PR as
//! `click`; `Seen`: one message per event, a `hank ctl stop` told as "stopped by you")

pub mod http;

use std::collections::HashSet;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;

use crate::policy::notify::{EventClass, Happening, Message, RunFacts, Seen, Target, TargetKind};
use crate::store::{Event, EventKind};

/// The rules' view of an event (field for field).
fn happening(event: &Event) -> Happening<'_> {
    match &event.kind {
        EventKind::Waiting { reason, until } => Happening::Waiting {
            reason: *reason,
            until: *until,
        },
        EventKind::CircuitChanged { to, reason, .. } => {
            Happening::CircuitChanged { to: *to, reason }
        }
        EventKind::Verification(check) => Happening::Verification(check),
        EventKind::AgentSwitched {
            from,
            to,
            reason,
            until,
        } => Happening::AgentSwitched {
            from,
            to,
            reason,
            until: *until,
        },
        EventKind::Exit {
            exit_reason,
            exit_code,
            message,
            ..
        } => Happening::Exit {
            reason: *exit_reason,
            exit_code: *exit_code,
            message,
        },
        EventKind::FleetTask {
            task,
            state,
            branch,
            message,
            repos,
        } => Happening::FleetTask {
            task,
            state: *state,
            branch,
            message,
            repos,
        },
        EventKind::Delivery(d) => Happening::Delivery(crate::policy::notify::Delivered {
            branch: &d.branch,
            base: &d.base,
            remote: &d.remote,
            pushed: d.head.is_some(),
            pr_url: d.pr_url.as_deref(),
            pr_number: d.pr_number,
            checks: &d.checks,
            check_names: &d.check_names,
        }),
        EventKind::Control {
            command, outcome, ..
        } => Happening::Control { command, outcome },
        EventKind::ApiRetry(r) => Happening::ApiRetry(r.retrying()),
        EventKind::LoopStarted { .. }
        | EventKind::Review(_)
        | EventKind::AgentFinished(_)
        | EventKind::Warning { .. }
        | EventKind::EgressDenied { .. }
        | EventKind::Security { .. }
        | EventKind::AgentCrashed { .. }
        | EventKind::SandboxDenied { .. }
        | EventKind::ClientConfigChanged { .. }
        | EventKind::Issue { .. } => Happening::Other,
    }
}

/// Messages waiting to be sent at most; more are dropped.
pub const QUEUE: usize = 64;

/// How the sender treats a target.
#[derive(Debug, Clone, Copy)]
pub struct SendConfig {
    /// Whole-request timeout.
    pub timeout: Duration,
    /// Attempts per message and target (≥ 1).
    pub attempts: u32,
    /// Wait before the second attempt; doubled for each next one.
    pub backoff: Duration,
    /// How long dropping the notifier (the end of the run) waits for the queue to empty.
    pub flush: Duration,
}

impl Default for SendConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            attempts: 3,
            backoff: Duration::from_secs(2),
            flush: Duration::from_secs(10),
        }
    }
}

/// One message for every target.
struct Job {
    message: Message,
    event: serde_json::Value,
}

/// The sending half: cheap to call, never blocks.
pub struct Notifier {
    tx: Option<SyncSender<Job>>,
    worker: Option<JoinHandle<()>>,
    done: Option<Receiver<()>>,
    events: Vec<EventClass>,
    secrets: Vec<String>,
    warnings: Arc<Mutex<Vec<String>>>,
    dropped_warned: std::sync::atomic::AtomicBool,
    flush: Duration,
    /// Set when the run ends: what is still queued gets one attempt, no backoff.
    closing: Arc<std::sync::atomic::AtomicBool>,
    /// What the run told before (one message per event; a stop the user sent).
    seen: Mutex<Seen>,
}

impl Notifier {
    /// Starts the sender thread for `targets`.
    #[must_use]
    pub fn start(
        targets: Vec<Target>,
        events: Vec<EventClass>,
        secrets: Vec<String>,
        config: SendConfig,
    ) -> Self {
        let (tx, rx) = mpsc::sync_channel::<Job>(QUEUE);
        let (done_tx, done) = mpsc::channel();
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::clone(&warnings);
        let closing = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let closing_seen = Arc::clone(&closing);
        let worker = std::thread::Builder::new()
            .name("hank-notify".into())
            .spawn(move || {
                let mut warned = HashSet::new();
                for job in rx {
                    for (i, target) in targets.iter().enumerate() {
                        let closing =
                            || closing_seen.load(std::sync::atomic::Ordering::Relaxed);
                        if let Err(why) = deliver(target, &job, &config, &closing)
                            && warned.insert(i)
                        {
                            shared
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .push(format!(
                                    "notification to {} failed ({why}); later failures of this target are not reported",
                                    target.shown()
                                ));
                        }
                    }
                }
                let _ = done_tx.send(());
            })
            .ok();
        Self {
            tx: Some(tx),
            done: worker.as_ref().map(|_| done),
            worker,
            events,
            secrets,
            warnings,
            dropped_warned: std::sync::atomic::AtomicBool::new(false),
            flush: config.flush,
            closing,
            seen: Mutex::new(Seen::default()),
        }
    }

    /// Queues the message of `event`, if it makes one; returns at once. `false` when the
    /// message was dropped (queue full, or no sender thread).
    pub fn event(&self, event: &Event, facts: &RunFacts) -> bool {
        let told = self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .message(event.at, &happening(event), facts, &self.events);
        let Some(mut m) = told else {
            return true;
        };
        crate::agent::redact::redact(&mut m.title, &self.secrets);
        crate::agent::redact::redact(&mut m.body, &self.secrets);
        crate::agent::redact::redact(&mut m.command, &self.secrets);
        if let Some(url) = &mut m.click {
            crate::agent::redact::redact(url, &self.secrets);
        }
        let mut event = serde_json::to_value(event).unwrap_or_default();
        redact_json(&mut event, &self.secrets);
        let Some(tx) = &self.tx else { return false };
        match tx.try_send(Job { message: m, event }) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                if !self
                    .dropped_warned
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    self.push_warning(format!(
                        "notifications are behind (more than {QUEUE} queued): some were dropped"
                    ));
                }
                false
            }
        }
    }

    fn push_warning(&self, w: String) {
        self.warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(w);
    }

    /// The warnings since the last call (each failing target once).
    #[must_use]
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Drop for Notifier {
    /// Closes the queue and gives the sender up to `flush` to send what is queued (the
    /// run's last message); a sender still busy after that is left behind.
    fn drop(&mut self) {
        self.tx = None;
        self.closing
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(done) = self.done.take() {
            let slice = Duration::from_millis(100);
            let mut waited = Duration::ZERO;
            let mut said = false;
            let finished = loop {
                match done.recv_timeout(slice.min(self.flush.saturating_sub(waited))) {
                    Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break true,
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                }
                waited += slice;
                if waited >= self.flush {
                    break false;
                }
                if !said && waited >= Duration::from_secs(1) {
                    said = true;
                    eprintln!(
                        "hank: sending the last notifications (at most {} s; Ctrl-C skips this)",
                        self.flush.as_secs()
                    );
                }
            };
            if finished && let Some(w) = self.worker.take() {
                let _ = w.join();
            }
        }
        // Failures of the last messages: no loop is left to report them.
        let left = self.warnings.lock().unwrap_or_else(PoisonError::into_inner);
        for w in left.iter() {
            eprintln!("hank: warning: {}", crate::sanitize::line(w));
        }
    }
}

/// Sends `job` to `target`, with retries; why it failed in the end.
fn deliver(
    target: &Target,
    job: &Job,
    config: &SendConfig,
    closing: &dyn Fn() -> bool,
) -> Result<(), String> {
    let (url, body) = request(target, job);
    let mut wait = config.backoff;
    let mut last = String::new();
    let attempts = if closing() { 1 } else { config.attempts.max(1) };
    for attempt in 0..attempts {
        if attempt > 0 {
            // The run ended meanwhile: no more retries.
            if closing() {
                break;
            }
            std::thread::sleep(wait);
            wait = wait.saturating_mul(2);
        }
        match http::post(&url, "application/json", &body, config.timeout) {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The URL and JSON body for a target.
fn request(target: &Target, job: &Job) -> (String, String) {
    let m = &job.message;
    match target.kind {
        TargetKind::Ntfy => {
            let (base, topic) = target.ntfy_parts().unwrap_or_default();
            let mut body = json!({
                "topic": topic,
                "title": m.title,
                "message": m.body,
                "priority": m.priority,
                "tags": ["hank", m.class.as_str()],
            });
            // ntfy's JSON publish names the tap action `click` (the `Click` header's field).
            if let Some(url) = &m.click {
                body["click"] = json!(url);
            }
            (format!("{base}/"), body.to_string())
        }
        TargetKind::Webhook => {
            let body = json!({
                "event": job.event,
                "class": m.class,
                "title": m.title,
                "message": m.body,
                "next": m.next,
                "command": m.command,
                "url": m.click,
            });
            (target.url.clone(), body.to_string())
        }
        TargetKind::Slack => {
            let body = json!({ "text": format!("*{}*\n{}", m.title, m.body) });
            (target.url.clone(), body.to_string())
        }
    }
}

fn redact_json(v: &mut serde_json::Value, secrets: &[String]) {
    match v {
        serde_json::Value::String(s) => crate::agent::redact::redact(s, secrets),
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| redact_json(x, secrets)),
        serde_json::Value::Object(o) => o.values_mut().for_each(|x| redact_json(x, secrets)),
        _ => {}
    }
}

/// What the loop keeps for its notifications: the sender and the last loop's questions.
pub struct Hook {
    notifier: Option<Notifier>,
    questions: Mutex<Vec<String>>,
    project: String,
    run: String,
    tz: jiff::tz::TimeZone,
}

impl Hook {
    /// The hook of a run: a sender when `NOTIFY` names targets.
    #[must_use]
    pub fn new(s: &crate::settings::Settings, started: jiff::Timestamp) -> Self {
        let tz = jiff::tz::TimeZone::system();
        let notifier = s.notify_targets.value.clone().map(|targets| {
            Notifier::start(
                targets,
                s.notify_events.value.clone(),
                crate::agent::redact::secret_values(),
                SendConfig::default(),
            )
        });
        let project = s
            .project_dir
            .file_name()
            .map_or_else(|| "project".into(), |n| n.to_string_lossy().into_owned());
        // The run as a reader tells it apart: when it started (no process id).
        let run = format!(
            "started {}",
            started.to_zoned(tz.clone()).strftime("%a %-d %b %H:%M")
        );
        Self {
            notifier,
            questions: Mutex::new(Vec::new()),
            project,
            run,
            tz,
        }
    }

    /// The end of the run: lets the sender deliver what is queued (at most
    /// [`SendConfig::flush`]) on a thread of its own, and returns when it is done or at the
    /// next signal (a Ctrl-C during this wait skips it). The run's signal task keeps running
    /// meanwhile, which a wait inside `drop` on the runtime's thread would not allow.
    pub async fn finish(&mut self, mut cancel: tokio::sync::watch::Receiver<u32>) {
        let Some(notifier) = self.notifier.take() else {
            return;
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        if !flush_on_thread(notifier, move || {
            let _ = tx.send(());
        }) {
            return;
        }
        // Only a signal that comes from now on ends the wait.
        cancel.borrow_and_update();
        tokio::select! {
            _ = rx => {}
            _ = cancel.changed() => {}
        }
    }

    /// The last loop's questions (`status.json` shows them while the loop waits for an
    /// answer).
    #[must_use]
    pub fn asked(&self) -> Vec<String> {
        self.questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Remembers the last loop's questions (sent with `needs_answers`).
    pub fn questions(&self, q: &[String]) {
        *self
            .questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = q.to_vec();
    }

    /// Queues `event`'s message (if any) and returns the sender's warnings so far.
    pub fn event(&self, event: &Event, cost_usd: f64, items: (u32, u32)) -> Vec<String> {
        let Some(n) = &self.notifier else {
            return Vec::new();
        };
        let facts = RunFacts {
            project: self.project.clone(),
            run: self.run.clone(),
            task: None,
            cost_usd,
            items_done: items.0 as usize,
            items_total: items.1 as usize,
            questions: self
                .questions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            tz: self.tz.clone(),
        };
        n.event(event, &facts);
        n.take_warnings()
    }
}

/// The notifier of a command outside a run (`hank fleet`, `hank deliver`, `hank watch`, a
/// resumed delivery), installed once per process; their events are offered to it with
/// [`offer`] (see the module's "one notifier, two owners").
static GLOBAL: Mutex<Option<Hook>> = Mutex::new(None);

/// Drops `sender` (its drop delivers what is queued) on a thread of its own, then calls
/// `done`; false when the thread could not be started (`sender` was dropped here then).
fn flush_on_thread<T: Send + 'static>(sender: T, done: impl FnOnce() + Send + 'static) -> bool {
    std::thread::Builder::new()
        .name("hank-notify-flush".into())
        .spawn(move || {
            drop(sender);
            done();
        })
        .is_ok()
}

/// Holds the process's notifier; dropping it sends what is queued (at most
/// [`SendConfig::flush`]) and prints the senders' warnings.
pub struct Installed(());

impl Drop for Installed {
    /// The flush runs on a thread of its own; a SIGINT/SIGTERM/SIGHUP from now on ends the
    /// wait for it (as at the end of `hank run`).
    fn drop(&mut self) {
        let Some(hook) = GLOBAL.lock().unwrap_or_else(PoisonError::into_inner).take() else {
            return;
        };
        let before = crate::proc::signals::received();
        let (tx, rx) = mpsc::channel::<()>();
        if !flush_on_thread(hook, move || {
            let _ = tx.send(());
        }) {
            return;
        }
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Err(mpsc::RecvTimeoutError::Timeout)
                    if crate::proc::signals::received() == before => {}
                _ => return,
            }
        }
    }
}

/// Starts the process's notifier when `NOTIFY` names targets (`hank fleet`, `hank deliver`,
/// `hank watch`, a resumed delivery): the same [`Hook::new`] a run's effects make.
#[must_use]
pub fn install(s: &crate::settings::Settings, now: jiff::Timestamp) -> Installed {
    if s.notify_targets.value.is_some() {
        *GLOBAL.lock().unwrap_or_else(PoisonError::into_inner) = Some(Hook::new(s, now));
    }
    Installed(())
}

/// Offers `event` to the process's notifier, if one is installed, through the run's own
/// [`Hook::event`] (never blocks: the message is queued); a failing target is one warning on
/// stderr.
pub fn offer(event: &Event) {
    let guard = GLOBAL.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(hook) = guard.as_ref() {
        for w in hook.event(event, 0.0, (0, 0)) {
            eprintln!("hank: warning: {}", crate::sanitize::line(&w));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::ExitReason;
    use crate::store::EventKind;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn facts() -> RunFacts {
        RunFacts {
            project: "p".into(),
            run: "r".into(),
            task: None,
            cost_usd: 0.0,
            items_done: 0,
            items_total: 0,
            questions: vec![],
            tz: jiff::tz::TimeZone::UTC,
        }
    }

    fn exit_event() -> Event {
        Event::new(
            jiff::Timestamp::UNIX_EPOCH,
            EventKind::Exit {
                exit_reason: Some(ExitReason::MaxLoops),
                exit_code: 3,
                message: "MAX_LOOPS reached with sk-ant-api03-SECRETSECRET".into(),
                verified: None,
            },
        )
    }

    /// A black hole: accepts connections and never answers until released. The caller's
    /// `event` returns while every request is still unanswered (the queue takes the rest).
    #[test]
    fn a_black_hole_endpoint_never_holds_the_caller() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (accepted_tx, accepted_rx) = mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            accepted_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        });
        let target = Target {
            kind: TargetKind::Webhook,
            url: format!("http://127.0.0.1:{port}/h"),
        };
        let n = Notifier::start(
            vec![target],
            EventClass::ALL.to_vec(),
            vec![],
            SendConfig {
                timeout: Duration::from_secs(60),
                attempts: 1,
                backoff: Duration::ZERO,
                flush: Duration::ZERO,
            },
        );
        let mut queued = 0;
        for _ in 0..(QUEUE * 3) {
            queued += usize::from(n.event(&exit_event(), &facts()));
        }
        // The sender holds one message in flight (the endpoint has not answered); the
        // queue took at most QUEUE more; the rest were dropped without waiting.
        accepted_rx.recv().unwrap();
        assert!(queued <= QUEUE + 1, "{queued}");
        assert!(
            n.take_warnings()
                .iter()
                .any(|w| w.contains("some were dropped")),
        );
        release_tx.send(()).unwrap();
        drop(n);
        server.join().unwrap();
    }

    #[test]
    fn a_dead_target_is_one_warning_naming_it() {
        // A port nobody listens on: bind, note the port, close.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let n = Notifier::start(
            vec![Target {
                kind: TargetKind::Ntfy,
                url: format!("http://127.0.0.1:{port}/topic"),
            }],
            EventClass::ALL.to_vec(),
            vec![],
            SendConfig {
                timeout: Duration::from_secs(5),
                attempts: 2,
                backoff: Duration::from_millis(1),
                flush: Duration::from_secs(30),
            },
        );
        let warnings = n.warnings.clone();
        for _ in 0..3 {
            n.event(&exit_event(), &facts());
        }
        drop(n); // waits for the queue to drain
        let w = warnings.lock().unwrap().clone();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains(&format!("ntfy:http://127.0.0.1:{port}/…")),
            "{w:?}"
        );
    }

    #[test]
    fn messages_are_redacted_and_shaped_per_target() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let mut bodies = Vec::new();
            for _ in 0..3 {
                let (mut conn, _) = listener.accept().unwrap();
                let mut buf = vec![0u8; 65536];
                let mut got = Vec::new();
                loop {
                    let k = conn.read(&mut buf).unwrap();
                    got.extend_from_slice(&buf[..k]);
                    let text = String::from_utf8_lossy(&got).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if body.len() >= len {
                            bodies
                                .push((head.lines().next().unwrap().to_string(), body.to_string()));
                            break;
                        }
                    }
                }
                conn.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .unwrap();
            }
            bodies
        });
        let base = format!("http://127.0.0.1:{port}");
        let n = Notifier::start(
            vec![
                Target {
                    kind: TargetKind::Ntfy,
                    url: format!("{base}/alerts"),
                },
                Target {
                    kind: TargetKind::Webhook,
                    url: format!("{base}/hook"),
                },
                Target {
                    kind: TargetKind::Slack,
                    url: format!("{base}/slack"),
                },
            ],
            EventClass::ALL.to_vec(),
            vec!["sk-ant-api03-SECRETSECRET".into()],
            SendConfig::default(),
        );
        assert!(n.event(&exit_event(), &facts()));
        drop(n);
        let bodies = server.join().unwrap();
        assert_eq!(bodies[0].0, "POST / HTTP/1.1");
        let ntfy: serde_json::Value = serde_json::from_str(&bodies[0].1).unwrap();
        assert_eq!(ntfy["topic"], "alerts");
        assert_eq!(ntfy["title"], "hank · p: run ended: max_loops (exit 3)");
        assert_eq!(bodies[1].0, "POST /hook HTTP/1.1");
        let hook: serde_json::Value = serde_json::from_str(&bodies[1].1).unwrap();
        assert_eq!(hook["event"]["type"], "exit");
        assert_eq!(hook["class"], "run_end");
        assert!(hook["command"].as_str().unwrap().contains("--max-loops"));
        assert_eq!(bodies[2].0, "POST /slack HTTP/1.1");
        let slack: serde_json::Value = serde_json::from_str(&bodies[2].1).unwrap();
        assert!(slack["text"].as_str().unwrap().starts_with("*hank · p:"));
        for (_, b) in &bodies {
            assert!(!b.contains("SECRETSECRET"), "{b}");
        }
    }
}
