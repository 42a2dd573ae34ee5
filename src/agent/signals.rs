//! The signal handler every long-running command shares: SIGINT, SIGTERM and SIGHUP each
//! raise a counter that the runner and the waits watch (a second Ctrl-C skips the grace).

use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::watch;

/// Every SIGINT/SIGTERM/SIGHUP counted by [`install`]'s handler, for code that cannot watch
/// the channel (a blocking `git` call polls it).
static RECEIVED: AtomicU32 = AtomicU32::new(0);

/// How many SIGINT/SIGTERM/SIGHUP the handler has counted in this process so far.
#[must_use]
pub fn received() -> u32 {
    RECEIVED.load(Ordering::SeqCst)
}

use crate::error::{HankError, Result};

/// Counts SIGINT/SIGTERM/SIGHUP; the runner and the waits watch the count.
pub fn install() -> Result<watch::Receiver<u32>> {
    use tokio::signal::unix::{SignalKind, signal};
    let err =
        |e: std::io::Error| HankError::Internal(format!("failed to install signal handlers: {e}"));
    let mut int = signal(SignalKind::interrupt()).map_err(err)?;
    let mut term = signal(SignalKind::terminate()).map_err(err)?;
    let mut hup = signal(SignalKind::hangup()).map_err(err)?;
    let (tx, rx) = watch::channel(0u32);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
            RECEIVED.fetch_add(1, Ordering::SeqCst);
            tx.send_modify(|n| *n += 1);
        }
    });
    Ok(rx)
}
