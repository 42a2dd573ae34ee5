//! The agent session: when it is resumed, kept, replaced or dropped. **\[pure\]**
//!
//! Continuity (HANK.md §4): the `session_id` of the last successful answer is passed back as
//! `--resume ID` while SESSION_CONTINUITY is on and the session was used less than
//! SESSION_EXPIRY_HOURS ago. A client that no longer knows the id (`No conversation found`) is
//! retried at once without it — unless the call that failed did not resume anything, which
//! cannot be fixed by retrying. Completion, an open circuit and a permission halt end the
//! session, so the next run starts a fresh conversation.

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::analysis::{Analysis, Outcome};
use crate::exit::ExitReason;

/// The agent session hank resumes (in `state.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub id: String,
    pub started_at: Timestamp,
    pub last_used_at: Timestamp,
}

/// The session to resume now, if any.
#[must_use]
pub fn usable(
    session: Option<&Session>,
    continuity: bool,
    expiry_hours: u32,
    now: Timestamp,
) -> Option<&Session> {
    let session = session.filter(|_| continuity)?;
    let age = now.duration_since(session.last_used_at);
    (age < SignedDuration::from_hours(i64::from(expiry_hours))).then_some(session)
}

/// The session after an answer: dropped when the client did not know it, replaced (or
/// refreshed) by the id of a successful answer, else unchanged. `resumed` is the id this call
/// passed with `--resume`; a session keeps its start time only while the same id goes on.
#[must_use]
pub fn after_answer(
    current: Option<&Session>,
    resumed: Option<&str>,
    a: &Analysis,
    now: Timestamp,
) -> Option<Session> {
    if a.unknown_session {
        return None;
    }
    let Some(id) = a
        .session_id
        .as_deref()
        .filter(|_| a.outcome == Outcome::Success)
    else {
        return current.cloned();
    };
    let started_at = match (current, resumed) {
        (Some(s), Some(r)) if s.id == id && r == id => s.started_at,
        _ => now,
    };
    Some(Session {
        id: id.to_string(),
        started_at,
        last_used_at: now,
    })
}

/// How an agent CLI spells its session ids: what hank accepts before passing an id back on a
/// command line. The id comes from the agent's answer (or from `state.json`, which the agent
/// can write), so it is checked every time it is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdAlphabet {
    /// Claude Code: a UUID (`8-4-4-4-12` hex digits).
    Uuid,
    /// Any other CLI: 1 to [`MAX_SESSION_ID_LEN`] characters of `A-Z a-z 0-9 . _ : -`, not
    /// starting with `-` (so it can never be read as an option).
    Conservative,
}

/// Longest session id hank passes back.
pub const MAX_SESSION_ID_LEN: usize = 128;

/// The session a call resumes: the `stored` id (one the settings let resume) when the
/// profile `resumes` and the id is one its CLI makes (state.json is in the agent's reach).
///
/// # Errors
/// The stored id is not one `agent` makes: the warning to show; the session is dropped.
pub fn resume_id(
    stored: Option<&str>,
    resumes: bool,
    alphabet: IdAlphabet,
    agent: &str,
) -> Result<Option<String>, String> {
    let Some(id) = stored.filter(|_| resumes) else {
        return Ok(None);
    };
    check_id(id, alphabet)
        .map(|()| Some(id.to_owned()))
        .map_err(|why| {
            format!(
                "the stored session id is not one {agent} makes ({why}); starting a fresh session"
            )
        })
}

/// Checks a session id against `alphabet`; the error says what is wrong (without quoting the
/// id, which may be long or hostile).
///
/// # Errors
/// The id is empty, too long, starts with `-`, or holds a character outside the alphabet.
pub fn check_id(id: &str, alphabet: IdAlphabet) -> Result<(), String> {
    if id.is_empty() {
        return Err("it is empty".into());
    }
    if id.len() > MAX_SESSION_ID_LEN {
        return Err(format!(
            "it is {} bytes long (at most {MAX_SESSION_ID_LEN})",
            id.len()
        ));
    }
    if id.starts_with('-') {
        return Err("it starts with '-'".into());
    }
    match alphabet {
        IdAlphabet::Uuid => {
            let shape_ok = id.len() == 36
                && id.char_indices().all(|(i, c)| {
                    if matches!(i, 8 | 13 | 18 | 23) {
                        c == '-'
                    } else {
                        c.is_ascii_hexdigit()
                    }
                });
            if shape_ok {
                Ok(())
            } else {
                Err("it is not a UUID".into())
            }
        }
        IdAlphabet::Conservative => {
            if id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
            {
                Ok(())
            } else {
                Err("it holds characters outside A-Z a-z 0-9 . _ : -".into())
            }
        }
    }
}

/// What to do when the client answered "No conversation found".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownSession {
    /// The call resumed a session: forget it and call again at once without it.
    RetryFresh,
    /// The call resumed nothing, so retrying cannot help: stop (`agent_fatal`).
    Fatal,
}

/// See [`UnknownSession`].
#[must_use]
pub fn on_unknown_session(resumed: bool) -> UnknownSession {
    if resumed {
        UnknownSession::RetryFresh
    } else {
        UnknownSession::Fatal
    }
}

/// Whether a run that stops for `reason` ends the session (the next run starts fresh).
#[must_use]
pub fn ends_session(reason: ExitReason) -> bool {
    matches!(
        reason,
        ExitReason::ProjectComplete
            | ExitReason::PlanComplete
            | ExitReason::TestSaturation
            | ExitReason::CircuitOpen
            | ExitReason::PermissionDenied
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn session(id: &str, started: &str, used: &str) -> Session {
        Session {
            id: id.into(),
            started_at: t(started),
            last_used_at: t(used),
        }
    }

    #[test]
    fn usable_table() {
        let s = session("a", "2026-11-23T00:00:00Z", "2026-11-23T10:00:00Z");
        // (continuity, expiry hours, now, usable)
        let cases = [
            (true, 24, "2026-11-23T12:00:00Z", true),
            (true, 24, "2026-11-24T09:59:59Z", true),
            (true, 24, "2026-11-24T10:00:00Z", false),
            (true, 1, "2026-11-23T11:00:01Z", false),
            (false, 24, "2026-11-23T10:00:01Z", false),
        ];
        for (continuity, hours, now, want) in cases {
            let got = usable(Some(&s), continuity, hours, t(now)).is_some();
            assert_eq!(got, want, "{continuity} {hours} {now}");
        }
        assert!(usable(None, true, 24, t("2026-11-23T10:00:00Z")).is_none());
    }

    #[test]
    fn after_answer_table() {
        let now = t("2026-11-23T12:00:00Z");
        let cur = session("a", "2026-11-23T00:00:00Z", "2026-11-23T10:00:00Z");
        let answer = |id: Option<&str>, outcome: Outcome, unknown: bool| Analysis {
            session_id: id.map(ToString::to_string),
            outcome,
            unknown_session: unknown,
            ..Analysis::default()
        };
        // Same id resumed: keeps its start, refreshes its use.
        let s = after_answer(
            Some(&cur),
            Some("a"),
            &answer(Some("a"), Outcome::Success, false),
            now,
        )
        .unwrap();
        assert_eq!((s.started_at, s.last_used_at), (cur.started_at, now));
        // A new id (fresh call, or the client forked): a new session.
        let s = after_answer(
            Some(&cur),
            None,
            &answer(Some("b"), Outcome::Success, false),
            now,
        )
        .unwrap();
        assert_eq!((s.id.as_str(), s.started_at), ("b", now));
        // A failed answer does not replace the session.
        let s = after_answer(
            Some(&cur),
            Some("a"),
            &answer(Some("x"), Outcome::AgentError, false),
            now,
        );
        assert_eq!(s.as_ref(), Some(&cur));
        // No id at all: unchanged.
        assert_eq!(
            after_answer(
                Some(&cur),
                Some("a"),
                &answer(None, Outcome::Success, false),
                now
            )
            .as_ref(),
            Some(&cur)
        );
        // The client did not know it: dropped.
        assert_eq!(
            after_answer(
                Some(&cur),
                Some("a"),
                &answer(None, Outcome::AgentError, true),
                now
            ),
            None
        );
    }

    #[test]
    fn resume_id_table() {
        use IdAlphabet::{Conservative as C, Uuid as U};
        let uuid = "4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a";
        let bad = "the stored session id is not one claude makes (it starts with '-'); starting a fresh session";
        // (stored, the profile resumes, alphabet, result)
        type Case<'a> = (
            Option<&'a str>,
            bool,
            IdAlphabet,
            Result<Option<&'a str>, &'a str>,
        );
        let cases: &[Case] = &[
            (None, true, U, Ok(None)),
            (Some(uuid), false, U, Ok(None)),
            (Some("--x"), false, U, Ok(None)),
            (Some(uuid), true, U, Ok(Some(uuid))),
            (Some("ses_1"), true, C, Ok(Some("ses_1"))),
            (Some("--x"), true, U, Err(bad)),
        ];
        for (stored, resumes, alphabet, want) in cases {
            let got = resume_id(*stored, *resumes, *alphabet, "claude");
            let got = got.as_ref().map(Option::as_deref).map_err(String::as_str);
            assert_eq!(got, *want, "{stored:?} {resumes} {alphabet:?}");
        }
    }

    #[test]
    fn check_id_table() {
        use IdAlphabet::{Conservative as C, Uuid as U};
        let long = "a".repeat(MAX_SESSION_ID_LEN + 1);
        let ten_kb = "7".repeat(10 * 1024);
        let max = "b".repeat(MAX_SESSION_ID_LEN);
        // (id, alphabet, accepted)
        let cases: &[(&str, IdAlphabet, bool)] = &[
            ("4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a", U, true),
            ("4B7C2E1A-9D3F-4E8B-A6C5-1F2E3D4C5B6A", U, true),
            ("4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6", U, false),
            ("4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6az", U, false),
            ("4b7c2e1a9d3f-4e8b-a6c5-1f2e3d4c5b6a-", U, false),
            ("gb7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a", U, false),
            ("--dangerously-skip-permissions", U, false),
            ("--dangerously-skip-permissions", C, false),
            ("-x", C, false),
            ("$(touch /tmp/pwned)", C, false),
            ("`id`", C, false),
            ("a b", C, false),
            (
                "a
b", C, false,
            ),
            ("a=b", C, false),
            ("", C, false),
            ("", U, false),
            ("ses_3f9a:1.2-x_Y", C, true),
            ("4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a", C, true),
            ("é", C, false),
            (&long, C, false),
            (&max, C, true),
            (&ten_kb, C, false),
            (&ten_kb, U, false),
        ];
        for (id, alphabet, ok) in cases {
            let got = check_id(id, *alphabet);
            assert_eq!(
                got.is_ok(),
                *ok,
                "{:?} {alphabet:?}: {got:?}",
                &id[..id.len().min(40)]
            );
            if let Err(why) = got {
                assert!(
                    !why.contains(&id[..id.len().min(8)]) || id.is_empty(),
                    "{why}"
                );
            }
        }
    }

    #[test]
    fn unknown_session_and_endings() {
        assert_eq!(on_unknown_session(true), UnknownSession::RetryFresh);
        assert_eq!(on_unknown_session(false), UnknownSession::Fatal);
        for r in &ExitReason::ALL {
            let ends = ends_session(*r);
            let want = matches!(
                r,
                ExitReason::ProjectComplete
                    | ExitReason::PlanComplete
                    | ExitReason::TestSaturation
                    | ExitReason::CircuitOpen
                    | ExitReason::PermissionDenied
            );
            assert_eq!(ends, want, "{r:?}");
        }
    }
}
