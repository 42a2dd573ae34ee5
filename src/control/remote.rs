//! The running loop's reader of `CONTROL_TOPIC`: a thread of its own polls the ntfy topic
//! ([`super::poll_remote`]: signature, time, nonce, replay refusal — the checks of `hank ctl
//! poll`) and journals the good commands; the loop's [`super::LiveControl`] takes them from
//! the journal like local ones (one `stat` per poll). The loop never waits for the network:
//! a slow or dead server only delays remote commands.
//!
//! Each remote command the loop takes is acknowledged back on the topic (an ntfy message
//! tagged [`ACK_TAG`], which the reader skips: it is never a command), through a bounded
//! queue to the same thread.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{HankError, Result};
use crate::policy::time::Clock;
use crate::store::Store;

/// Time between two polls of the topic (ntfy.sh lets a client make one request every 5 s
/// on average).
pub const POLL_EVERY: Duration = Duration::from_secs(5);

/// One request's timeout (a dead server holds the thread this long, never the loop).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Acknowledgements waiting to be published at most; more are dropped (the journal and the
/// events still hold them).
const ACK_QUEUE: usize = 16;

/// The tag of hank's acknowledgements on the control topic.
pub const ACK_TAG: &str = "hank-ack";

/// The topic the loop reads, checked: `None` when `CONTROL_TOPIC` is unset; an error when
/// it is also a `NOTIFY` target (hank would read its own notifications as commands).
pub fn topic(s: &crate::settings::Settings) -> Result<Option<String>> {
    let Some(topic) = s.control_topic.value.clone() else {
        return Ok(None);
    };
    let same = s
        .notify_targets
        .value
        .iter()
        .flatten()
        .any(|t| t.url.trim_end_matches('/') == topic.trim_end_matches('/'));
    if same {
        return Err(HankError::usage(
            "CONTROL_TOPIC is also a NOTIFY target: hank would read its own notifications as (unsigned) commands; use another topic",
        ));
    }
    Ok(Some(topic))
}

/// The reader thread's handle, kept by [`super::LiveControl`]. Dropping it ends the thread
/// at its next wake-up (a request in flight is not waited for).
pub struct RemotePoller {
    acks: Option<SyncSender<String>>,
    warnings: Arc<Mutex<Vec<String>>>,
    /// Acknowledgements queued and not yet published.
    unsent: Arc<AtomicUsize>,
}

/// How long the end of the run waits for queued acknowledgements to leave.
const ACK_FLUSH: Duration = Duration::from_secs(3);

impl RemotePoller {
    /// Starts reading `topic` for the project at `root` every `every`; the first poll is
    /// made at once. `Ok(None)` (with a warning) when the project has no control key.
    pub fn start(
        root: PathBuf,
        store: Store,
        topic: String,
        every: Duration,
    ) -> Result<(Option<Self>, Option<String>)> {
        if let Err(e) = super::load_secret(&root) {
            return Ok((
                None,
                Some(format!(
                    "CONTROL_TOPIC is set but remote commands are not read: {e} (hank ctl init makes the key)"
                )),
            ));
        }
        let clock = crate::clock::SystemClock::from_env()?;
        let (tx, rx) = mpsc::sync_channel::<String>(ACK_QUEUE);
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::clone(&warnings);
        let unsent = Arc::new(AtomicUsize::new(0));
        let sent = Arc::clone(&unsent);
        std::thread::Builder::new()
            .name("hank-control-topic".into())
            .spawn(move || {
                let reader = Reader {
                    root,
                    store,
                    topic,
                    every,
                    clock,
                    warnings: shared,
                    failed: None,
                    unsent: sent,
                };
                reader.run(&rx);
            })
            .map_err(|e| {
                HankError::Internal(format!("cannot start the CONTROL_TOPIC reader: {e}"))
            })?;
        Ok((
            Some(Self {
                acks: Some(tx),
                warnings,
                unsent,
            }),
            None,
        ))
    }

    /// Queues an acknowledgement for the topic (dropped when the queue is full).
    pub fn ack(&self, text: String) {
        if let Some(tx) = &self.acks
            && tx.try_send(text).is_ok()
        {
            self.unsent.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The reader's warnings since the last call (refused messages, a failing server once).
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Drop for RemotePoller {
    /// Ends the reader; acknowledgements still queued get at most 3 s to leave.
    fn drop(&mut self) {
        self.acks = None;
        let start = Instant::now();
        while self.unsent.load(Ordering::SeqCst) > 0 && start.elapsed() < ACK_FLUSH {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

struct Reader {
    root: PathBuf,
    store: Store,
    topic: String,
    every: Duration,
    clock: crate::clock::SystemClock,
    warnings: Arc<Mutex<Vec<String>>>,
    /// The last poll error, warned about once until a poll succeeds.
    failed: Option<String>,
    unsent: Arc<AtomicUsize>,
}

impl Reader {
    fn run(mut self, acks: &Receiver<String>) {
        loop {
            self.poll();
            let next = Instant::now() + self.every;
            loop {
                let left = next.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                match acks.recv_timeout(left) {
                    Ok(text) => {
                        self.publish_ack(&text);
                        self.unsent.fetch_sub(1, Ordering::SeqCst);
                    }
                    Err(RecvTimeoutError::Timeout) => break,
                    // The loop ended.
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        }
    }

    fn warn(&self, w: String) {
        self.warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(w);
    }

    fn poll(&mut self) {
        match super::poll_remote(
            &self.root,
            &self.store,
            &self.topic,
            self.clock.now(),
            REQUEST_TIMEOUT,
        ) {
            Ok(report) => {
                if self.failed.take().is_some() {
                    self.warn("CONTROL_TOPIC can be read again".into());
                }
                for r in report.refused {
                    self.warn(r);
                }
            }
            Err(e) => {
                let e = e.to_string();
                if self.failed.as_ref() != Some(&e) {
                    self.warn(format!(
                        "{e}; remote commands wait until it can be read (tried every {} s)",
                        self.every.as_secs()
                    ));
                    self.failed = Some(e);
                }
            }
        }
    }

    /// ntfy's JSON publish of `text` to the control topic, tagged as an acknowledgement.
    fn publish_ack(&self, text: &str) {
        let Some((base, topic)) = crate::policy::notify::ntfy_parts(&self.topic) else {
            return;
        };
        let body = serde_json::json!({
            "topic": topic,
            "title": "hank: command taken",
            "message": text,
            "tags": [ACK_TAG],
        });
        // Best effort: the journal and the events hold the acknowledgement anyway.
        let _ = crate::notify::http::post(
            &format!("{base}/"),
            "application/json",
            &body.to_string(),
            REQUEST_TIMEOUT,
        );
    }
}
