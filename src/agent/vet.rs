//! What hank accepts from an agent's answer before it believes, stores or shows any of it.
//! **\[pure\]**
//!
//! The agent writes its own answer, so every number and id in it is a claim:
//! - a session id goes back on a command line only in the CLI's own alphabet
//!   ([`crate::policy::session::check_id`]); another is dropped (the next call is fresh);
//! - a cost that is not a finite number in `0..=`[`MAX_CALL_COST_USD`], or a token count over
//!   [`MAX_CALL_TOKENS`], is rejected (counted as unknown: 0) instead of poisoning the totals
//!   and the budgets;
//! - every text field that reaches status.json, events.jsonl or the terminal is cut to
//!   [`MAX_FIELD_BYTES`] (with `…`), so one huge RECOMMENDATION cannot crowd the event log.
//!
//! Each rejection comes back as a warning for the loop to report (never quoting the rejected
//! value itself, which may be huge or hostile).

#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::analysis::Analysis;
use crate::policy::session::{self, IdAlphabet};

/// The largest cost one call may report (USD). A real call costs cents to a few dollars.
pub const MAX_CALL_COST_USD: f64 = 1000.0;
/// The largest token count (of any kind) one call may report.
pub const MAX_CALL_TOKENS: u64 = 1_000_000_000;
/// Longest agent-derived text field kept (bytes, cut on a character boundary).
pub const MAX_FIELD_BYTES: usize = 2048;
/// Most questions, completion indicators or denials kept from one answer.
pub const MAX_ITEMS: usize = 50;

/// `text` cut to at most `max` bytes on a character boundary, with `…` when cut.
#[must_use]
pub fn cap(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

fn cap_in_place(text: &mut String) {
    if text.len() > MAX_FIELD_BYTES {
        *text = cap(text, MAX_FIELD_BYTES);
    }
}

/// Checks and bounds one analyzed answer in place (after redaction); returns the warnings.
pub fn vet(a: &mut Analysis, ids: IdAlphabet) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(id) = a.session_id.as_deref()
        && let Err(why) = session::check_id(id, ids)
    {
        warnings.push(format!(
            "the agent reported a session id hank will not pass back ({why}); the next call starts a fresh session"
        ));
        a.session_id = None;
    }
    if !(a.cost_usd.is_finite() && (0.0..=MAX_CALL_COST_USD).contains(&a.cost_usd)) {
        warnings.push(format!(
            "the agent reported a cost that is not a number between $0 and ${MAX_CALL_COST_USD:.0} for one call; it is not counted"
        ));
        a.cost_usd = 0.0;
    }
    let t = a.tokens;
    if [t.input, t.output, t.cache_read, t.cache_creation]
        .iter()
        .any(|&n| n > MAX_CALL_TOKENS)
    {
        warnings.push(format!(
            "the agent reported more than {MAX_CALL_TOKENS} tokens for one call; its token counts are not counted"
        ));
        a.tokens = crate::analysis::Tokens::default();
    }
    if let Some(e) = a.error.as_mut() {
        cap_in_place(&mut e.message);
        if let Some(w) = e.window.as_mut() {
            cap_in_place(w);
        }
    }
    if let Some(rec) = a.status.as_mut().and_then(|s| s.recommendation.as_mut()) {
        cap_in_place(rec);
    }
    for list in [
        &mut a.questions,
        &mut a.completion_indicators,
        &mut a.error_signatures,
    ] {
        list.truncate(MAX_ITEMS);
        list.iter_mut().for_each(cap_in_place);
    }
    a.permission_denials.truncate(MAX_ITEMS);
    for d in &mut a.permission_denials {
        cap_in_place(&mut d.tool);
        if let Some(c) = d.command.as_mut() {
            cap_in_place(c);
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{AgentError, Denial, ErrorKind, Outcome, StatusBlock, Tokens};

    fn answer() -> Analysis {
        Analysis {
            session_id: Some("4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a".into()),
            cost_usd: 0.25,
            tokens: Tokens {
                input: 100,
                output: 20,
                cache_read: 5,
                cache_creation: 0,
            },
            ..Analysis::default()
        }
    }

    #[test]
    fn numbers_table() {
        // (cost, tokens input, cost kept, tokens kept, warnings)
        let cases: &[(f64, u64, f64, u64, usize)] = &[
            (0.25, 100, 0.25, 100, 0),
            (0.0, 0, 0.0, 0, 0),
            (1000.0, MAX_CALL_TOKENS, 1000.0, MAX_CALL_TOKENS, 0),
            (1000.01, 100, 0.0, 100, 1),
            (1e308, 100, 0.0, 100, 1),
            (f64::INFINITY, 100, 0.0, 100, 1),
            (f64::NAN, 100, 0.0, 100, 1),
            (-0.5, 100, 0.0, 100, 1),
            (0.25, MAX_CALL_TOKENS + 1, 0.25, 0, 1),
            (0.25, u64::MAX, 0.25, 0, 1),
            (f64::NEG_INFINITY, u64::MAX, 0.0, 0, 2),
        ];
        for &(cost, input, want_cost, want_input, n) in cases {
            let mut a = answer();
            a.cost_usd = cost;
            a.tokens.input = input;
            let w = vet(&mut a, IdAlphabet::Uuid);
            assert_eq!(w.len(), n, "{cost} {input}: {w:?}");
            assert!(
                a.cost_usd.to_bits() == want_cost.to_bits(),
                "{cost}: {}",
                a.cost_usd
            );
            assert_eq!(a.tokens.input, want_input, "{cost} {input}");
            if want_input == 0 && input != 0 {
                assert_eq!(a.tokens, Tokens::default());
            }
        }
    }

    #[test]
    fn session_ids_table() {
        let ten_kb = "f".repeat(10 * 1024);
        // (id, alphabet, kept)
        let cases: &[(&str, IdAlphabet, bool)] = &[
            (
                "4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a",
                IdAlphabet::Uuid,
                true,
            ),
            ("--dangerously-skip-permissions", IdAlphabet::Uuid, false),
            (
                "--dangerously-skip-permissions",
                IdAlphabet::Conservative,
                false,
            ),
            ("$(touch pwned)", IdAlphabet::Conservative, false),
            (&ten_kb, IdAlphabet::Conservative, false),
            ("ses_abc123", IdAlphabet::Conservative, true),
            ("ses_abc123", IdAlphabet::Uuid, false),
        ];
        for (id, alphabet, kept) in cases {
            let mut a = answer();
            a.session_id = Some((*id).to_owned());
            let w = vet(&mut a, *alphabet);
            assert_eq!(a.session_id.is_some(), *kept, "{alphabet:?}");
            assert_eq!(w.len(), usize::from(!kept));
            for line in &w {
                assert!(!line.contains(&id[..id.len().min(12)]), "{line}");
                assert!(line.len() < 300);
            }
        }
    }

    #[test]
    fn text_fields_are_capped() {
        let huge = "r".repeat(4 * 1024 * 1024);
        let mut a = Analysis {
            outcome: Outcome::AgentError,
            error: Some(AgentError {
                kind: ErrorKind::Unknown,
                message: "é".repeat(MAX_FIELD_BYTES),
                api_status: None,
                reset_at: None,
                window: None,
            }),
            status: Some(StatusBlock {
                recommendation: Some(huge.clone()),
                ..StatusBlock::default()
            }),
            questions: vec![huge.clone(); 80],
            permission_denials: vec![
                Denial {
                    tool: huge.clone(),
                    command: Some(huge.clone()),
                };
                3
            ],
            ..answer()
        };
        vet(&mut a, IdAlphabet::Uuid);
        let rec = a.recommendation().unwrap_or_default();
        assert!(
            rec.len() <= MAX_FIELD_BYTES && rec.ends_with('…'),
            "{}",
            rec.len()
        );
        let msg = &a
            .error
            .as_ref()
            .map(|e| e.message.clone())
            .unwrap_or_default();
        assert!(msg.len() <= MAX_FIELD_BYTES && msg.ends_with('…'));
        assert_eq!(a.questions.len(), MAX_ITEMS);
        assert!(a.questions.iter().all(|q| q.len() <= MAX_FIELD_BYTES));
        assert!(a.permission_denials.iter().all(|d| {
            d.tool.len() <= MAX_FIELD_BYTES
                && d.command
                    .as_ref()
                    .is_some_and(|c| c.len() <= MAX_FIELD_BYTES)
        }));
        // Short fields stay as they are.
        assert_eq!(cap("short", MAX_FIELD_BYTES), "short");
        assert_eq!(cap("abcdef", 5), "ab…");
    }
}
