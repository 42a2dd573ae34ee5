//! The `hank monitor` terminal app: polls the project's files and redraws the dashboard.
//!
//! Blocks on `crossterm::event::poll` with a timeout (never busy-loops): the watched files
//! are stat-ed every [`POLL`] and reloaded only when their size or mtime changed; the screen
//! is redrawn on a change, a resize, or once a second for the countdowns. `ratatui::try_init`
//! installs a panic hook that restores the terminal; normal exits restore it here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use jiff::tz::TimeZone;
use ratatui::DefaultTerminal;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::snapshot::{Fingerprint, Paths, load};
use super::view;
use crate::error::{HankError, Result};

/// How often the files are checked for changes.
pub(crate) const POLL: Duration = Duration::from_millis(250);
/// How often the screen is redrawn without a change (countdowns, "updated … ago").
pub(crate) const REDRAW: Duration = Duration::from_secs(1);

fn terminal_error(e: &std::io::Error) -> HankError {
    HankError::Tool(format!("terminal error in hank monitor: {e}"))
}

/// `q`, Esc and Ctrl-C quit.
#[must_use]
pub(crate) fn is_quit(key: &KeyEvent) -> bool {
    key.kind != KeyEventKind::Release
        && (matches!(key.code, KeyCode::Char('q') | KeyCode::Esc)
            || (key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL)))
}

/// Runs the dashboard until the user quits. The terminal is restored on every path out.
pub(crate) fn run_tui(paths: &Paths) -> Result<()> {
    let mut terminal = ratatui::try_init().map_err(|e| {
        // try_init may have enabled raw mode before failing.
        ratatui::restore();
        HankError::Tool(format!("cannot start the terminal UI: {e}"))
    })?;
    let stop = watch_termination();
    let result = event_loop(&mut terminal, paths, &stop);
    ratatui::restore();
    result
}

/// SIGTERM / SIGHUP (a `kill`, a closed terminal) set the flag, so the loop ends and the
/// terminal is restored instead of being left in raw mode. Watched on a small thread.
fn watch_termination() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let runtime = crate::proc::runtime();
    if let Ok(runtime) = runtime {
        // Register the handlers before the thread starts, so no early signal is missed.
        let handlers = runtime.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            Some((
                signal(SignalKind::terminate()).ok()?,
                signal(SignalKind::hangup()).ok()?,
            ))
        });
        if let Some((mut term, mut hup)) = handlers {
            std::thread::spawn(move || {
                runtime.block_on(async {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = hup.recv() => {}
                    }
                });
                flag.store(true, Ordering::SeqCst);
                // After a hangup crossterm's poll can spin on the closed terminal and never
                // return: if the loop has not ended within a second, end the process here.
                std::thread::sleep(Duration::from_secs(1));
                ratatui::restore();
                std::process::exit(0);
            });
        }
    }
    stop
}

fn event_loop(terminal: &mut DefaultTerminal, paths: &Paths, stop: &AtomicBool) -> Result<()> {
    let tz = TimeZone::system();
    let mut fingerprint = Fingerprint::read(paths);
    let mut snap = load(paths);
    let mut dirty = true;
    let mut last_draw = Instant::now();
    let mut last_poll = Instant::now();
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        if dirty || last_draw.elapsed() >= REDRAW {
            let now = Timestamp::now();
            terminal
                .draw(|f| view::render(f, &snap, now, &tz))
                .map_err(|e| terminal_error(&e))?;
            last_draw = Instant::now();
            dirty = false;
        }
        let until_poll = POLL.saturating_sub(last_poll.elapsed());
        let until_draw = REDRAW.saturating_sub(last_draw.elapsed());
        let timeout = until_poll.min(until_draw);
        if event::poll(timeout).map_err(|e| terminal_error(&e))? {
            match event::read().map_err(|e| terminal_error(&e))? {
                Event::Key(key) if is_quit(&key) => return Ok(()),
                Event::Key(key) if key.code == KeyCode::Char('r') => {
                    snap = load(paths).keep_last_good(&snap);
                    dirty = true;
                }
                Event::Resize(..) => {
                    terminal.autoresize().map_err(|e| terminal_error(&e))?;
                    dirty = true;
                }
                _ => {}
            }
        }
        if last_poll.elapsed() >= POLL {
            last_poll = Instant::now();
            let current = Fingerprint::read(paths);
            if current != fingerprint {
                fingerprint = current;
                snap = load(paths).keep_last_good(&snap);
                dirty = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quit_keys() {
        let key = |code, modifiers| KeyEvent::new(code, modifiers);
        let cases = [
            (key(KeyCode::Char('q'), KeyModifiers::NONE), true),
            (key(KeyCode::Esc, KeyModifiers::NONE), true),
            (key(KeyCode::Char('c'), KeyModifiers::CONTROL), true),
            (key(KeyCode::Char('c'), KeyModifiers::NONE), false),
            (key(KeyCode::Char('r'), KeyModifiers::NONE), false),
            (key(KeyCode::Enter, KeyModifiers::NONE), false),
        ];
        for (k, want) in cases {
            assert_eq!(is_quit(&k), want, "{k:?}");
        }
    }
}
