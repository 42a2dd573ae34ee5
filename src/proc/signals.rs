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

/// Counts SIGINT/SIGTERM/SIGHUP; the runner and the waits watch the count. Called inside a
/// tokio runtime (the counting task runs on it).
///
/// # Errors
/// A handler cannot be installed.
pub fn install() -> std::io::Result<watch::Receiver<u32>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
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
