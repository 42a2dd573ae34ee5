//! The signal handler every long-running command shares, from the process layer
//! ([`crate::proc::signals`]); [`install`] here reports a failure as a [`HankError`].

pub use crate::proc::signals::received;

use tokio::sync::watch;

use crate::error::{HankError, Result};

/// Counts SIGINT/SIGTERM/SIGHUP; the runner and the waits watch the count.
///
/// # Errors
/// The handlers cannot be installed.
pub fn install() -> Result<watch::Receiver<u32>> {
    crate::proc::signals::install()
        .map_err(|e| HankError::Internal(format!("failed to install signal handlers: {e}")))
}
