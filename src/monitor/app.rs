//! The `hank monitor` terminal app: polls the project's files and redraws the dashboard.
//!
//! Blocks on `crossterm::event::poll` with a timeout (never busy-loops): the watched files
//! are stat-ed every [`POLL`] and reloaded only when their size or mtime changed; the screen
//! is redrawn on a change, a resize, or once a second for the countdowns. `ratatui::try_init`
//! installs a panic hook that restores the terminal; normal exits restore it here.
//!
//! Keys steer the loop through the control journal (`hank ctl`'s, in the per-user folder):
//! `p` pause, `u` resume, `n` a note and `a` an answer (a line typed at the bottom, Enter
//! sends, Esc cancels). What a key does is [`on_key`], pure and table-tested.

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
use crate::policy::control::{Command, MAX_TEXT_CHARS};

/// The keys that steer the loop, shown at the bottom right.
pub(crate) const KEY_HINT: &str = " p pause · u resume · n note · a answer ";

/// What is being typed at the bottom of the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prompt {
    Note,
    Answer,
}

impl Prompt {
    fn label(self) -> &'static str {
        match self {
            Self::Note => "note",
            Self::Answer => "answer",
        }
    }
}

/// The dashboard's input: single keys, or a line of text for a note or an answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Input {
    #[default]
    Keys,
    Typing(Prompt, String),
}

/// What a key does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyAction {
    Nothing,
    Quit,
    Reload,
    /// Record this command in the control journal.
    Send(Command),
    /// The input line changed (a prompt opened, a character typed or erased, cancelled).
    Redraw,
}

/// The key's effect on the input and what the dashboard does (pure).
pub(crate) fn on_key(input: &mut Input, key: &KeyEvent) -> KeyAction {
    if key.kind == KeyEventKind::Release {
        return KeyAction::Nothing;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match input {
        Input::Keys => match key.code {
            _ if is_quit(key) => KeyAction::Quit,
            _ if ctrl => KeyAction::Nothing,
            KeyCode::Char('r') => KeyAction::Reload,
            KeyCode::Char('p') => KeyAction::Send(Command::Pause),
            KeyCode::Char('u') => KeyAction::Send(Command::Resume),
            KeyCode::Char('n') => {
                *input = Input::Typing(Prompt::Note, String::new());
                KeyAction::Redraw
            }
            KeyCode::Char('a') => {
                *input = Input::Typing(Prompt::Answer, String::new());
                KeyAction::Redraw
            }
            _ => KeyAction::Nothing,
        },
        Input::Typing(prompt, text) => match key.code {
            KeyCode::Esc => {
                *input = Input::Keys;
                KeyAction::Redraw
            }
            KeyCode::Char('c') if ctrl => {
                *input = Input::Keys;
                KeyAction::Redraw
            }
            KeyCode::Enter => {
                let text = text.trim().to_string();
                let prompt = *prompt;
                *input = Input::Keys;
                if text.is_empty() {
                    return KeyAction::Redraw;
                }
                KeyAction::Send(match prompt {
                    Prompt::Note => Command::Note { text },
                    Prompt::Answer => Command::Answer { text },
                })
            }
            KeyCode::Backspace => {
                text.pop();
                KeyAction::Redraw
            }
            KeyCode::Char(c) if !ctrl && !c.is_control() => {
                if text.chars().count() < MAX_TEXT_CHARS {
                    text.push(c);
                }
                KeyAction::Redraw
            }
            _ => KeyAction::Nothing,
        },
    }
}

/// The bottom line while typing, or after a command was sent.
fn input_line(input: &Input, said: Option<&str>) -> Option<String> {
    match input {
        Input::Typing(prompt, text) => Some(format!(
            "{} (Enter sends, Esc cancels): {text}_",
            prompt.label()
        )),
        Input::Keys => said.map(str::to_string),
    }
}

/// Records `command` in the project's control journal; what to show.
fn send(paths: &Paths, command: Command) -> String {
    let sent = crate::store::Store::new(&paths.root)
        .with_user_control()
        .and_then(|store| {
            crate::control::submit(
                &store,
                command.clone(),
                crate::store::schema::ControlSource::Local,
                Timestamp::now(),
            )
        });
    let shown = crate::sanitize::line(&command.to_text());
    match sent {
        Ok(id) => format!(
            "sent `{shown}` ({id}): taken within 2 s while the loop waits, else before its next call"
        ),
        Err(e) => format!("`{shown}` not sent: {e}"),
    }
}

/// Draws `text` over the last row of `area`, from column `x` on.
fn overlay(f: &mut ratatui::Frame<'_>, text: &str, right: bool) {
    let area = f.area();
    if area.height == 0 {
        return;
    }
    let width = u16::try_from(text.chars().count())
        .unwrap_or(u16::MAX)
        .min(area.width);
    let x = if right {
        area.x + area.width - width
    } else {
        area.x
    };
    let row = ratatui::layout::Rect::new(
        x,
        area.y + area.height - 1,
        if right { width } else { area.width },
        1,
    );
    f.render_widget(ratatui::widgets::Clear, row);
    f.render_widget(
        ratatui::widgets::Paragraph::new(text.to_string())
            .style(ratatui::style::Style::new().add_modifier(ratatui::style::Modifier::REVERSED)),
        row,
    );
}

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
    let mut input = Input::Keys;
    let mut said: Option<String> = None;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        if dirty || last_draw.elapsed() >= REDRAW {
            let now = Timestamp::now();
            let line = input_line(&input, said.as_deref());
            terminal
                .draw(|f| {
                    view::render(f, &snap, now, &tz);
                    match &line {
                        Some(l) => overlay(f, l, false),
                        None if f.area().width >= 100 => overlay(f, KEY_HINT, true),
                        None => {}
                    }
                })
                .map_err(|e| terminal_error(&e))?;
            last_draw = Instant::now();
            dirty = false;
        }
        let until_poll = POLL.saturating_sub(last_poll.elapsed());
        let until_draw = REDRAW.saturating_sub(last_draw.elapsed());
        let timeout = until_poll.min(until_draw);
        if event::poll(timeout).map_err(|e| terminal_error(&e))? {
            match event::read().map_err(|e| terminal_error(&e))? {
                Event::Key(key) => match on_key(&mut input, &key) {
                    KeyAction::Quit => return Ok(()),
                    KeyAction::Nothing => {}
                    KeyAction::Reload => {
                        snap = load(paths).keep_last_good(&snap);
                        dirty = true;
                    }
                    KeyAction::Send(command) => {
                        said = Some(send(paths, command));
                        dirty = true;
                    }
                    KeyAction::Redraw => {
                        said = None;
                        dirty = true;
                    }
                },
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

    #[test]
    fn keys_steer_the_loop_and_a_prompt_takes_a_line() {
        use KeyAction::{Nothing, Quit, Redraw, Reload, Send};
        let k = |code| KeyEvent::new(code, KeyModifiers::NONE);
        let ch = |c| k(KeyCode::Char(c));
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        // (keys typed from the key mode, the action of the last key, the input after it)
        let typing = |p: Prompt, t: &str| Input::Typing(p, t.to_string());
        let cases: Vec<(Vec<KeyEvent>, KeyAction, Input)> = vec![
            (vec![ch('p')], Send(Command::Pause), Input::Keys),
            (vec![ch('u')], Send(Command::Resume), Input::Keys),
            (vec![ch('r')], Reload, Input::Keys),
            (vec![ch('q')], Quit, Input::Keys),
            (vec![ctrl_c], Quit, Input::Keys),
            (vec![ch('x')], Nothing, Input::Keys),
            (
                vec![KeyEvent::new(KeyCode::Char('p'), KeyModifiers::CONTROL)],
                Nothing,
                Input::Keys,
            ),
            (vec![ch('n')], Redraw, typing(Prompt::Note, "")),
            (vec![ch('a')], Redraw, typing(Prompt::Answer, "")),
            // In a prompt, q and p are text, not commands.
            (
                vec![ch('n'), ch('q'), ch('p')],
                Redraw,
                typing(Prompt::Note, "qp"),
            ),
            (
                vec![ch('n'), ch('h'), ch('i'), ch('!'), k(KeyCode::Backspace)],
                Redraw,
                typing(Prompt::Note, "hi"),
            ),
            (
                vec![
                    ch('n'),
                    ch(' '),
                    ch('h'),
                    ch('i'),
                    ch(' '),
                    k(KeyCode::Enter),
                ],
                Send(Command::Note { text: "hi".into() }),
                Input::Keys,
            ),
            (
                vec![ch('a'), ch('4'), ch('2'), k(KeyCode::Enter)],
                Send(Command::Answer { text: "42".into() }),
                Input::Keys,
            ),
            // Enter on nothing sends nothing; Esc and Ctrl-C cancel without quitting.
            (
                vec![ch('n'), ch(' '), k(KeyCode::Enter)],
                Redraw,
                Input::Keys,
            ),
            (vec![ch('n'), ch('x'), k(KeyCode::Esc)], Redraw, Input::Keys),
            (vec![ch('a'), ch('x'), ctrl_c], Redraw, Input::Keys),
            (
                vec![ch('n'), k(KeyCode::Tab)],
                Nothing,
                typing(Prompt::Note, ""),
            ),
        ];
        for (keys, want, after) in cases {
            let mut input = Input::Keys;
            let mut last = Nothing;
            for key in &keys {
                last = on_key(&mut input, key);
            }
            assert_eq!((&last, &input), (&want, &after), "{keys:?}");
        }
        // A key release does nothing (terminals that report them send both).
        let mut input = Input::Keys;
        let mut release = ch('p');
        release.kind = KeyEventKind::Release;
        assert_eq!(on_key(&mut input, &release), Nothing);
        // The text is bounded like `hank ctl note`.
        let mut input = typing(Prompt::Note, &"x".repeat(MAX_TEXT_CHARS));
        on_key(&mut input, &ch('y'));
        assert_eq!(input, typing(Prompt::Note, &"x".repeat(MAX_TEXT_CHARS)));
        assert_eq!(
            input_line(&typing(Prompt::Answer, "ok"), None).as_deref(),
            Some("answer (Enter sends, Esc cancels): ok_")
        );
        assert_eq!(input_line(&Input::Keys, None), None);
    }
}
