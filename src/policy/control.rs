//! `hank ctl`: the commands a running loop takes, their text form, and the rules for a
//! signed remote command (HMAC-SHA256 over the command, a nonce and a time). **\[pure\]**
//!
//! A remote message is one line:
//!
//! ```text
//! hank1 TIME NONCE SIGNATURE COMMAND…
//! ```
//!
//! `TIME` is Unix seconds, `NONCE` 16–64 characters of `[A-Za-z0-9_-]`, `SIGNATURE` the
//! lowercase hex HMAC-SHA256, keyed with the project's secret, of
//! `hank1\nTIME\nNONCE\nCOMMAND…` (the command as written: `pause`, `note some text`, `set
//! MAX_LOOPS=20`). It is refused when unsigned (no `hank1` line), malformed, tampered (the
//! signature does not match), stale (more than [`MAX_SKEW_SECS`] from now either way) or
//! replayed (the nonce was seen).

#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

use hmac::{Hmac, Mac};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::policy::run::{ContextNote, Control, NoteKind};

/// Longest `note`/`answer` text (characters).
pub const MAX_TEXT_CHARS: usize = 4000;

/// A remote command more than this far from now (seconds) is stale.
pub const MAX_SKEW_SECS: i64 = 300;

/// The version tag that starts a signed message.
pub const TAG: &str = "hank1";

/// One command for the running loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum Command {
    Pause,
    Resume,
    Stop,
    /// End a usage-limit, backoff or window wait now.
    RetryNow,
    /// Text for the next loop's context.
    Note {
        text: String,
    },
    /// An answer to the agent's questions.
    Answer {
        text: String,
    },
    /// A new value for one of the live limits (checked when given).
    Set {
        key: String,
        value: String,
    },
}

impl Command {
    /// The command as typed: `pause`, `note TEXT`, `set KEY=VALUE`.
    #[must_use]
    pub fn to_text(&self) -> String {
        match self {
            Self::Pause => "pause".into(),
            Self::Resume => "resume".into(),
            Self::Stop => "stop".into(),
            Self::RetryNow => "retry-now".into(),
            Self::Note { text } => format!("note {text}"),
            Self::Answer { text } => format!("answer {text}"),
            Self::Set { key, value } => format!("set {key}={value}"),
        }
    }

    /// The command's name (`pause`, `set`, …).
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Pause => "pause",
            Self::Resume => "resume",
            Self::Stop => "stop",
            Self::RetryNow => "retry-now",
            Self::Note { .. } => "note",
            Self::Answer { .. } => "answer",
            Self::Set { .. } => "set",
        }
    }
}

/// Parses a command from its words. `check_set(key, value)` validates a `set` (the settings'
/// own parsers); the error says what is wrong.
pub fn parse(
    words: &[&str],
    check_set: &dyn Fn(&str, &str) -> Result<(), String>,
) -> Result<Command, String> {
    let Some((name, rest)) = words.split_first() else {
        return Err("no command (expected pause, resume, stop, retry-now, note TEXT, answer TEXT or set KEY=VALUE)".into());
    };
    let text = rest.join(" ");
    let no_args = |c: Command| {
        if rest.is_empty() {
            Ok(c)
        } else {
            Err(format!("`{name}` takes no argument"))
        }
    };
    let with_text = |make: fn(String) -> Command| {
        let t = text.trim();
        if t.is_empty() {
            return Err(format!("`{name}` needs a TEXT"));
        }
        if t.chars().count() > MAX_TEXT_CHARS {
            return Err(format!(
                "the text of `{name}` is longer than {MAX_TEXT_CHARS} characters"
            ));
        }
        if t.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
            return Err(format!("the text of `{name}` holds control characters"));
        }
        Ok(make(t.to_string()))
    };
    match *name {
        "pause" => no_args(Command::Pause),
        "resume" => no_args(Command::Resume),
        "stop" => no_args(Command::Stop),
        "retry-now" => no_args(Command::RetryNow),
        "note" => with_text(|text| Command::Note { text }),
        "answer" => with_text(|text| Command::Answer { text }),
        "set" => {
            let Some((key, value)) = text.trim().split_once('=') else {
                return Err("`set` expects KEY=VALUE, e.g. set MAX_LOOPS=20".into());
            };
            let (key, value) = (key.trim().to_ascii_uppercase(), value.trim().to_string());
            check_set(&key, &value)?;
            Ok(Command::Set { key, value })
        }
        other => Err(format!(
            "`{other}` is not a command (expected pause, resume, stop, retry-now, note TEXT, answer TEXT or set KEY=VALUE)"
        )),
    }
}

/// The loop's control fact for `command`; `check_set(key, value)` checks a `set` again
/// (the journal is a file: a line may not have come through `hank ctl`).
pub fn to_control(
    command: &Command,
    check_set: &dyn Fn(&str, &str) -> Result<(), String>,
) -> Result<Control, String> {
    Ok(match command {
        Command::Pause => Control::Pause,
        Command::Resume => Control::Resume,
        Command::Stop => Control::Stop,
        Command::RetryNow => Control::RetryNow,
        Command::Note { text } | Command::Answer { text } => {
            let kind = if matches!(command, Command::Note { .. }) {
                NoteKind::Note
            } else {
                NoteKind::Answer
            };
            let text: String = text.chars().take(MAX_TEXT_CHARS).collect();
            Control::Note(ContextNote { kind, text })
        }
        Command::Set { key, value } => {
            check_set(key, value)?;
            Control::Set {
                key: key.clone(),
                value: value.clone(),
            }
        }
    })
}

/// The bytes the signature covers.
#[must_use]
pub fn signed_text(time: i64, nonce: &str, command: &str) -> String {
    format!("{TAG}\n{time}\n{nonce}\n{command}")
}

/// The lowercase hex HMAC-SHA256 of `text` under `secret`.
#[must_use]
pub fn signature(secret: &[u8], text: &str) -> String {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(text.as_bytes());
    hex(&mac.finalize().into_bytes())
}

/// A signed message line for `command` (see the module's format).
#[must_use]
pub fn sign(secret: &[u8], time: i64, nonce: &str, command: &str) -> String {
    let sig = signature(secret, &signed_text(time, nonce, command));
    format!("{TAG} {time} {nonce} {sig} {command}")
}

/// A message's parts, before its signature is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed<'a> {
    pub time: i64,
    pub nonce: &'a str,
    pub sig: &'a str,
    pub command: &'a str,
}

/// Why a remote message is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not a `hank1` message at all.
    Unsigned,
    /// A `hank1` line whose parts do not read.
    Malformed(String),
    /// The signature does not match the command, nonce and time.
    Tampered,
    /// The time is more than [`MAX_SKEW_SECS`] away from now.
    Stale { skew_secs: i64 },
    /// The nonce was used before.
    Replayed,
    /// Signed, but not a command hank takes.
    Invalid(String),
}

impl Refusal {
    /// The warning's text.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Unsigned => "unsigned (not a `hank1 TIME NONCE SIGNATURE COMMAND` line)".into(),
            Self::Malformed(why) => format!("malformed: {why}"),
            Self::Tampered => {
                "tampered: the signature does not match (or another key signed it)".into()
            }
            Self::Stale { skew_secs } => format!(
                "stale: signed {}s {} now (at most {MAX_SKEW_SECS}s allowed)",
                skew_secs.abs(),
                if *skew_secs > 0 { "before" } else { "after" }
            ),
            Self::Replayed => "replayed: its nonce was already used".into(),
            Self::Invalid(why) => format!("signed but refused: {why}"),
        }
    }
}

/// Splits a message into its parts.
pub fn split(message: &str) -> Result<Signed<'_>, Refusal> {
    let message = message.trim();
    let mut parts = message.splitn(5, ' ');
    if parts.next() != Some(TAG) {
        return Err(Refusal::Unsigned);
    }
    let (Some(time), Some(nonce), Some(sig), Some(command)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::Malformed(
            "expected hank1 TIME NONCE SIGNATURE COMMAND".into(),
        ));
    };
    let time: i64 = time
        .parse()
        .map_err(|_| Refusal::Malformed(format!("time `{time}` is not Unix seconds")))?;
    let nonce_ok = (16..=64).contains(&nonce.len())
        && nonce
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !nonce_ok {
        return Err(Refusal::Malformed(
            "the nonce must be 16–64 letters, digits, - or _".into(),
        ));
    }
    if sig.len() != 64 || !sig.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(Refusal::Malformed(
            "the signature must be 64 hex digits".into(),
        ));
    }
    Ok(Signed {
        time,
        nonce,
        sig,
        command: command.trim(),
    })
}

/// The verdict on a remote message: its command, or why it is refused. `seen(nonce)` says
/// whether the nonce was used before; the caller records an accepted nonce.
pub fn verify(
    message: &str,
    secret: &[u8],
    now: Timestamp,
    seen: &dyn Fn(&str) -> bool,
    check_set: &dyn Fn(&str, &str) -> Result<(), String>,
) -> Result<(Command, String), Refusal> {
    let m = split(message)?;
    let want = signature(secret, &signed_text(m.time, m.nonce, m.command));
    if !constant_time_eq(want.as_bytes(), m.sig.to_ascii_lowercase().as_bytes()) {
        return Err(Refusal::Tampered);
    }
    let skew = now.as_second().saturating_sub(m.time);
    if skew.abs() > MAX_SKEW_SECS {
        return Err(Refusal::Stale { skew_secs: skew });
    }
    if seen(m.nonce) {
        return Err(Refusal::Replayed);
    }
    let words: Vec<&str> = m.command.split(' ').filter(|w| !w.is_empty()).collect();
    let cmd = parse(&words, check_set).map_err(Refusal::Invalid)?;
    Ok((cmd, m.nonce.to_string()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Lowercase hex.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What `hank ctl` has done to a running fleet so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetSteer {
    /// `pause` taken and no `resume` since: no task starts.
    pub paused: bool,
    /// `stop` taken: no task starts, the fleet ends once its running tasks stopped.
    pub stopping: bool,
    /// `set KEY=VALUE` taken for every task, in order (one per key, the last one): given to
    /// each task started later.
    pub sets: Vec<(String, String)>,
}

/// What the fleet does with one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steered {
    /// The running tasks the command is forwarded to (none when refused).
    pub forward_to: Vec<String>,
    /// The acknowledgement, before the forwarding's own result (`refused: why` when refused).
    pub outcome: String,
    pub refused: bool,
}

/// The commands that may name one task of the fleet (`hank ctl --task NAME`); `pause`,
/// `resume` and `stop` steer the whole fleet.
#[must_use]
pub fn takes_task(command: &Command) -> bool {
    !matches!(command, Command::Pause | Command::Resume | Command::Stop)
}

/// The fleet's rule for `command` (for the task `task` only, when given), with the tasks
/// running now: `state` is updated and the tasks to forward it to are named. A `set` is
/// checked before (a bad one never comes here).
pub fn steer_fleet(
    state: &mut FleetSteer,
    command: &Command,
    task: Option<&str>,
    running: &[String],
) -> Steered {
    let refuse = |why: String| Steered {
        forward_to: Vec::new(),
        outcome: format!("refused: {why}"),
        refused: true,
    };
    if let Some(name) = task {
        if !takes_task(command) {
            return refuse(format!(
                "{} steers the whole fleet; --task goes with note, answer, set and retry-now",
                command.name()
            ));
        }
        if !running.iter().any(|r| r == name) {
            return refuse(format!("task {name:?} is not running now"));
        }
        return Steered {
            forward_to: vec![name.to_string()],
            outcome: format!("forwarded to task {name}"),
            refused: false,
        };
    }
    let after = match command {
        Command::Pause => {
            state.paused = true;
            "; no task starts until resume"
        }
        Command::Resume => {
            state.paused = false;
            "; tasks start again"
        }
        Command::Stop => {
            state.stopping = true;
            "; no task starts, the fleet ends when they stopped (exit 130)"
        }
        Command::Set { key, value } => {
            state.sets.retain(|(k, _)| k != key);
            state.sets.push((key.clone(), value.clone()));
            "; tasks started later get it too"
        }
        Command::Note { .. } | Command::Answer { .. } if running.is_empty() => {
            return refuse(format!("no task is running to take the {}", command.name()));
        }
        Command::RetryNow | Command::Note { .. } | Command::Answer { .. } => "",
    };
    let to = if running.is_empty() {
        "no task is running".to_string()
    } else {
        format!(
            "forwarded to {} task{}: {}",
            running.len(),
            if running.len() == 1 { "" } else { "s" },
            running.join(", ")
        )
    };
    Steered {
        forward_to: running.to_vec(),
        outcome: format!("{to}{after}"),
        refused: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(_: &str, _: &str) -> Result<(), String> {
        Ok(())
    }

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
    const NONCE: &str = "n0nce-0000000001";

    fn now() -> Timestamp {
        "2026-11-26T10:00:00Z".parse().unwrap()
    }

    #[test]
    fn commands_become_the_loops_control_facts() {
        let note = |kind, text: &str| {
            Ok(Control::Note(ContextNote {
                kind,
                text: text.into(),
            }))
        };
        let refuse = |_: &str, _: &str| Err::<(), String>("no".into());
        type Taken = Result<Control, String>;
        let cases: Vec<(Command, Taken, Taken)> = vec![
            (Command::Pause, Ok(Control::Pause), Ok(Control::Pause)),
            (Command::Resume, Ok(Control::Resume), Ok(Control::Resume)),
            (Command::Stop, Ok(Control::Stop), Ok(Control::Stop)),
            (
                Command::RetryNow,
                Ok(Control::RetryNow),
                Ok(Control::RetryNow),
            ),
            (
                Command::Note { text: "v2".into() },
                note(NoteKind::Note, "v2"),
                note(NoteKind::Note, "v2"),
            ),
            (
                Command::Answer { text: "yes".into() },
                note(NoteKind::Answer, "yes"),
                note(NoteKind::Answer, "yes"),
            ),
            (
                Command::Set {
                    key: "MAX_LOOPS".into(),
                    value: "3".into(),
                },
                Ok(Control::Set {
                    key: "MAX_LOOPS".into(),
                    value: "3".into(),
                }),
                Err("no".into()),
            ),
        ];
        for (command, accepted, refused) in cases {
            assert_eq!(to_control(&command, &ok), accepted, "{command:?}");
            assert_eq!(to_control(&command, &refuse), refused, "{command:?}");
        }
        // A note written into the journal by hand is still bounded.
        let long = Command::Note {
            text: "x".repeat(MAX_TEXT_CHARS + 10),
        };
        let Ok(Control::Note(n)) = to_control(&long, &ok) else {
            panic!("a note")
        };
        assert_eq!(n.text.chars().count(), MAX_TEXT_CHARS);
    }

    #[test]
    fn commands_parse_and_print_back() {
        let cases: Vec<(&[&str], Command)> = vec![
            (&["pause"], Command::Pause),
            (&["resume"], Command::Resume),
            (&["stop"], Command::Stop),
            (&["retry-now"], Command::RetryNow),
            (
                &["note", "use", "the", "v2", "API"],
                Command::Note {
                    text: "use the v2 API".into(),
                },
            ),
            (
                &["answer", "Postgres"],
                Command::Answer {
                    text: "Postgres".into(),
                },
            ),
            (
                &["set", "max_loops=20"],
                Command::Set {
                    key: "MAX_LOOPS".into(),
                    value: "20".into(),
                },
            ),
        ];
        for (words, want) in cases {
            let got = parse(words, &ok).unwrap();
            assert_eq!(got, want);
            let text = got.to_text();
            let again: Vec<&str> = text.split(' ').collect();
            assert_eq!(parse(&again, &ok).unwrap(), want);
        }
        for (words, want) in [
            (vec![], "no command"),
            (vec!["pause", "now"], "takes no argument"),
            (vec!["note"], "needs a TEXT"),
            (vec!["set", "MAX_LOOPS"], "expects KEY=VALUE"),
            (vec!["reboot"], "is not a command"),
        ] {
            let err = parse(&want_words(&words), &ok).unwrap_err();
            assert!(err.contains(want), "{words:?}: {err}");
        }
        let long = "x".repeat(MAX_TEXT_CHARS + 1);
        assert!(parse(&["note", &long], &ok).unwrap_err().contains("longer"));
        let refuse = |k: &str, _: &str| Err(format!("{k} refused"));
        assert_eq!(
            parse(&["set", "AGENT=codex"], &refuse).unwrap_err(),
            "AGENT refused"
        );
    }

    fn want_words<'a>(w: &[&'a str]) -> Vec<&'a str> {
        w.to_vec()
    }

    #[test]
    fn a_signed_command_is_taken_once() {
        let msg = sign(SECRET, now().as_second() - 30, NONCE, "set MAX_LOOPS=5");
        let never = |_: &str| false;
        let (cmd, nonce) = verify(&msg, SECRET, now(), &never, &ok).unwrap();
        assert_eq!(
            cmd,
            Command::Set {
                key: "MAX_LOOPS".into(),
                value: "5".into()
            }
        );
        assert_eq!(nonce, NONCE);
        let seen = |n: &str| n == NONCE;
        assert_eq!(
            verify(&msg, SECRET, now(), &seen, &ok),
            Err(Refusal::Replayed)
        );
    }

    #[test]
    fn refusals_say_which() {
        let t = now().as_second();
        let never = |_: &str| false;
        let good = sign(SECRET, t, NONCE, "pause");
        let cases: Vec<(String, &str)> = vec![
            ("pause".into(), "unsigned"),
            ("hank1 12 x".into(), "malformed"),
            (
                format!("hank1 {t} short {} pause", "0".repeat(64)),
                "malformed",
            ),
            (good.replace("pause", "stop"), "tampered"),
            (sign(b"another key", t, NONCE, "pause"), "tampered"),
            (
                sign(SECRET, t - 301, NONCE, "pause"),
                "stale: signed 301s before",
            ),
            (
                sign(SECRET, t + 400, NONCE, "pause"),
                "stale: signed 400s after",
            ),
            (sign(SECRET, t, NONCE, "reboot"), "signed but refused"),
        ];
        for (msg, want) in cases {
            let err = verify(&msg, SECRET, now(), &never, &ok).unwrap_err();
            assert!(
                err.describe().starts_with(want),
                "{msg}: {}",
                err.describe()
            );
        }
        assert!(verify(&good, SECRET, now(), &never, &ok).is_ok());
        // The edge of the window is accepted.
        let edge = sign(SECRET, t - MAX_SKEW_SECS, NONCE, "pause");
        assert!(verify(&edge, SECRET, now(), &never, &ok).is_ok());
    }

    #[test]
    fn signature_is_hmac_sha256() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature(b"Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
    #[test]
    fn fleet_steering_rules() {
        let running = vec!["Alpha".to_string(), "Beta".to_string()];
        let note = Command::Note { text: "hi".into() };
        let set = |v: &str| Command::Set {
            key: "MAX_LOOPS".into(),
            value: v.into(),
        };
        // (state before, command, --task, running, forwarded to, outcome starts with, state after)
        type Case<'a> = (
            FleetSteer,
            Command,
            Option<&'a str>,
            &'a [String],
            &'a [&'a str],
            &'a str,
            FleetSteer,
        );
        let paused = FleetSteer {
            paused: true,
            ..FleetSteer::default()
        };
        let stopping = FleetSteer {
            stopping: true,
            ..FleetSteer::default()
        };
        let with_set = |v: &str| FleetSteer {
            sets: vec![("MAX_LOOPS".into(), v.into())],
            ..FleetSteer::default()
        };
        let none: &[String] = &[];
        let cases: Vec<Case> = vec![
            (
                FleetSteer::default(),
                Command::Pause,
                None,
                &running,
                &["Alpha", "Beta"],
                "forwarded to 2 tasks: Alpha, Beta; no task starts until resume",
                paused.clone(),
            ),
            (
                paused.clone(),
                Command::Resume,
                None,
                &running,
                &["Alpha", "Beta"],
                "forwarded to 2 tasks: Alpha, Beta; tasks start again",
                FleetSteer::default(),
            ),
            (
                FleetSteer::default(),
                Command::Pause,
                None,
                none,
                &[],
                "no task is running; no task starts until resume",
                paused.clone(),
            ),
            (
                FleetSteer::default(),
                Command::Stop,
                None,
                &running[..1],
                &["Alpha"],
                "forwarded to 1 task: Alpha; no task starts",
                stopping.clone(),
            ),
            (
                FleetSteer::default(),
                note.clone(),
                None,
                &running,
                &["Alpha", "Beta"],
                "forwarded to 2 tasks",
                FleetSteer::default(),
            ),
            (
                FleetSteer::default(),
                note.clone(),
                None,
                none,
                &[],
                "refused: no task is running to take the note",
                FleetSteer::default(),
            ),
            (
                FleetSteer::default(),
                note.clone(),
                Some("Beta"),
                &running,
                &["Beta"],
                "forwarded to task Beta",
                FleetSteer::default(),
            ),
            (
                FleetSteer::default(),
                note.clone(),
                Some("Gamma"),
                &running,
                &[],
                "refused: task \"Gamma\" is not running now",
                FleetSteer::default(),
            ),
            (
                FleetSteer::default(),
                Command::Pause,
                Some("Alpha"),
                &running,
                &[],
                "refused: pause steers the whole fleet",
                FleetSteer::default(),
            ),
            (
                FleetSteer::default(),
                Command::RetryNow,
                None,
                none,
                &[],
                "no task is running",
                FleetSteer::default(),
            ),
            (
                with_set("3"),
                set("7"),
                None,
                &running,
                &["Alpha", "Beta"],
                "forwarded to 2 tasks: Alpha, Beta; tasks started later get it too",
                with_set("7"),
            ),
            // A --task set is for that task only: later tasks do not get it.
            (
                FleetSteer::default(),
                set("7"),
                Some("Alpha"),
                &running,
                &["Alpha"],
                "forwarded to task Alpha",
                FleetSteer::default(),
            ),
        ];
        for (before, command, task, running, to, outcome, after) in cases {
            let mut state = before;
            let got = steer_fleet(&mut state, &command, task, running);
            assert_eq!(got.forward_to, to, "{command:?} {task:?}");
            assert!(
                got.outcome.starts_with(outcome),
                "{command:?} {task:?}: {}",
                got.outcome
            );
            assert_eq!(got.refused, got.outcome.starts_with("refused"));
            assert_eq!(state, after, "{command:?} {task:?}");
        }
    }
}
