//! Keeping secrets out of hank's files and output: every secret value of the environment, and
//! anything shaped like an Anthropic key, is replaced by `[REDACTED]` wherever the agent's
//! answer could carry it (the analysis and its error signatures, the live view, `hank
//! analyze`, displayed command lines).
//!
//! Which variables are secret: names (case-insensitive) that end in `KEY`, or hold `TOKEN`,
//! `SECRET`, `PASSWORD`, `PASSWD`, `CREDENTIAL` or `API_KEY`/`APIKEY`, and the
//! `*_AUTH*` names of the agent vendors (`ANTHROPIC_`, `CLAUDE_`, `OPENAI_`, `CODEX_`,
//! `GEMINI_`, `GOOGLE_`, `OPENCODE_`, …). Values are taken without surrounding whitespace
//! (`\r` included); values shorter than [`MIN_SECRET_LEN`] are ignored (replacing them would
//! mangle ordinary text).
//!
//! How: every run of text made of overlapping [`MIN_SECRET_LEN`]-byte pieces of a secret is
//! replaced, so a secret cut short (a summary or an error line cut in the middle of it) loses
//! its remaining part too. Error signatures are normalized (digits → `N`, hex ids → `X`, …)
//! before hank sees them, so they are also matched against the pieces of each secret's
//! normalized form.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::analysis::{Analysis, LiveItem};

/// Shortest secret value (and piece of one) that is redacted.
pub const MIN_SECRET_LEN: usize = 8;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Vendors whose variables hold credentials under names the generic rules may miss
/// (`ANTHROPIC_AUTH_TOKEN` is caught by `TOKEN`, but e.g. `GOOGLE_APPLICATION_CREDENTIALS`
/// by `CREDENTIAL`).
const VENDOR_PREFIXES: &[&str] = &[
    "ANTHROPIC_",
    "CLAUDE_",
    "OPENAI_",
    "CODEX_",
    "GEMINI_",
    "GOOGLE_",
    "OPENCODE_",
    "AZURE_",
    "AWS_",
    "OPENROUTER_",
    "GROQ_",
    "MISTRAL_",
    "DEEPSEEK_",
    "XAI_",
];

/// Anything shaped like an Anthropic key (`sk-ant-api03-…`, `sk-ant-oat01-…`), set in the
/// environment or not.
static ANTHROPIC_KEY: LazyLock<Regex> =
    LazyLock::new(|| crate::analysis::re(r"sk-ant-[A-Za-z0-9_\-]*"));

/// Whether an environment variable of this name holds a secret.
#[must_use]
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.ends_with("KEY")
        || [
            "TOKEN",
            "SECRET",
            "PASSWORD",
            "PASSWD",
            "CREDENTIAL",
            "API_KEY",
            "APIKEY",
        ]
        .iter()
        .any(|w| n.contains(w))
        || (VENDOR_PREFIXES.iter().any(|p| n.starts_with(p)) && n.contains("AUTH"))
}

/// The secret values of an environment (name, value pairs): trimmed, long enough, distinct.
#[must_use]
pub fn secrets_of<I, K, V>(vars: I) -> Vec<String>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut out: Vec<String> = vars
        .into_iter()
        .filter(|(k, _)| is_secret_name(k.as_ref()))
        .map(|(_, v)| v.as_ref().trim().to_owned())
        .filter(|v| v.len() >= MIN_SECRET_LEN)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The secret values present in hank's environment.
pub fn secret_values() -> Vec<String> {
    secrets_of(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    )
}

/// The pieces of secrets to look for.
struct Pieces(HashSet<[u8; MIN_SECRET_LEN]>);

impl Pieces {
    fn of<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut set = HashSet::new();
        for s in secrets {
            for w in s.as_bytes().windows(MIN_SECRET_LEN) {
                if let Ok(a) = <[u8; MIN_SECRET_LEN]>::try_from(w) {
                    set.insert(a);
                }
            }
        }
        Self(set)
    }

    /// Also the pieces of each secret as an error signature shows it (normalized), skipping
    /// pieces made only of the normalizer's placeholders and separators.
    fn with_normalized(mut self, secrets: &[String]) -> Self {
        for s in secrets {
            let norm = crate::analysis::normalize_signature(s);
            for w in norm.as_bytes().windows(MIN_SECRET_LEN) {
                if w.iter().all(|b| b"NX-_.:/ ".contains(b)) {
                    continue;
                }
                if let Ok(a) = <[u8; MIN_SECRET_LEN]>::try_from(w) {
                    self.0.insert(a);
                }
            }
        }
        self
    }

    /// `text` with every run covered by pieces replaced; `None` when nothing matched.
    fn apply(&self, text: &str) -> Option<String> {
        let bytes = text.as_bytes();
        if self.0.is_empty() || bytes.len() < MIN_SECRET_LEN {
            return None;
        }
        let mut covered_to = 0usize; // end of the current covered run
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (i, w) in bytes.windows(MIN_SECRET_LEN).enumerate() {
            let Ok(a) = <[u8; MIN_SECRET_LEN]>::try_from(w) else {
                continue;
            };
            if !self.0.contains(&a) {
                continue;
            }
            let end = i + MIN_SECRET_LEN;
            match runs.last_mut() {
                Some(last) if i <= covered_to => last.1 = end.max(last.1),
                _ => runs.push((i, end)),
            }
            covered_to = end;
        }
        if runs.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (mut start, mut end) in runs {
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            while !text.is_char_boundary(end) {
                end += 1;
            }
            if start < at {
                start = at;
            }
            out.push_str(&text[at..start]);
            if !out.ends_with(REDACTED) {
                out.push_str(REDACTED);
            }
            at = end;
        }
        out.push_str(&text[at..]);
        Some(out)
    }
}

fn redact_with(text: &mut String, pieces: &Pieces) {
    // The one sanitizer first: a secret split by escape sequences or control characters
    // (`sk-ant-…\x1b[0m…`) is whole again when it is matched.
    if let std::borrow::Cow::Owned(clean) =
        crate::sanitize::for_terminal(text, crate::sanitize::Lines::Keep)
    {
        *text = clean;
    }
    if text.contains("sk-ant-") {
        *text = ANTHROPIC_KEY.replace_all(text, REDACTED).into_owned();
    }
    if crate::policy::secrets::TOKEN_SHAPES.is_match(text) {
        *text = crate::policy::secrets::TOKEN_SHAPES
            .replace_all(text, REDACTED)
            .into_owned();
    }
    if let Some(r) = pieces.apply(text) {
        *text = r;
    }
}

/// Removes control characters and escape sequences ([`crate::sanitize::for_terminal`], lines
/// kept), then replaces every secret value (and every piece of one, see the module doc) and
/// anything shaped like an Anthropic key in `text` with `[REDACTED]`.
pub fn redact(text: &mut String, secrets: &[String]) {
    redact_with(text, &Pieces::of(secrets.iter().map(String::as_str)));
}

/// A copy of `args` with every secret value replaced, for display (`--verbose`, `--dry-run`):
/// the agent command may carry words from CLAUDE_CODE_CMD.
#[must_use]
pub fn redacted(args: &[String], secrets: &[String]) -> Vec<String> {
    let pieces = Pieces::of(secrets.iter().map(String::as_str));
    args.iter()
        .map(|a| {
            let mut a = a.clone();
            redact_with(&mut a, &pieces);
            a
        })
        .collect()
}

/// Removes secrets from every text field of an analysis (the agent may echo them anywhere:
/// its text, errors, tool names, the session id). A session id that held one is dropped.
pub fn redact_analysis(a: &mut Analysis, secrets: &[String]) {
    let pieces = Pieces::of(secrets.iter().map(String::as_str));
    let r = |t: &mut String| redact_with(t, &pieces);
    if let Some(e) = a.error.as_mut() {
        r(&mut e.message);
        if let Some(w) = e.window.as_mut() {
            r(w);
        }
    }
    r(&mut a.summary);
    if let Some(rec) = a.status.as_mut().and_then(|s| s.recommendation.as_mut()) {
        r(rec);
    }
    for list in [&mut a.questions, &mut a.completion_indicators] {
        list.iter_mut().for_each(r);
    }
    a.refused_paths.iter_mut().for_each(r);
    if let Some(c) = a.crash.as_mut() {
        r(&mut c.line);
        c.tail.iter_mut().for_each(r);
    }
    for d in &mut a.permission_denials {
        r(&mut d.tool);
        if let Some(c) = d.command.as_mut() {
            r(c);
        }
    }
    if let Some(id) = a.session_id.as_mut() {
        r(id);
        if id.contains(REDACTED) {
            a.session_id = None;
        }
    }
    // Signatures were normalized from the raw lines: match the normalized pieces too.
    let normalized = Pieces::of(secrets.iter().map(String::as_str)).with_normalized(secrets);
    for s in &mut a.error_signatures {
        redact_with(s, &normalized);
    }
}

/// Removes secrets from one live item (`--live` on the terminal and in `live.log`).
pub fn redact_live(item: &mut LiveItem, secrets: &[String]) {
    let pieces = Pieces::of(secrets.iter().map(String::as_str));
    let r = |t: &mut String| redact_with(t, &pieces);
    match item {
        LiveItem::Text(t) => r(t),
        LiveItem::Tool { name, detail } => {
            r(name);
            r(detail);
        }
        LiveItem::Init { session_id, model } => {
            session_id.iter_mut().for_each(r);
            model.iter_mut().for_each(r);
        }
        LiveItem::Retry { error, .. } => r(error),
        LiveItem::Result { summary, .. } => r(summary),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{AgentError, Denial, ErrorKind, Outcome};

    const KEY: &str = "sk-ant-api03-Zq8vR2mTx7LpK4nW9bYc3HdF6gJ1sA5eU0oIiQwErTyUuP";

    /// Every 8-byte piece of `secret` that is in `text`.
    fn leaks(text: &str, secret: &str) -> Vec<String> {
        secret
            .as_bytes()
            .windows(MIN_SECRET_LEN)
            .filter_map(|w| std::str::from_utf8(w).ok())
            .filter(|w| text.contains(w))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn secret_names_table() {
        let cases = [
            ("ANTHROPIC_API_KEY", true),
            ("anthropic_api_key", true),
            ("CLAUDE_CODE_OAUTH_TOKEN", true),
            ("ANTHROPIC_AUTH_TOKEN", true),
            ("OPENAI_API_KEY", true),
            ("GEMINI_API_KEY", true),
            ("GOOGLE_API_KEY", true),
            ("GOOGLE_APPLICATION_CREDENTIALS", true),
            ("GITHUB_TOKEN", true),
            ("GH_TOKEN", true),
            ("AWS_SECRET_ACCESS_KEY", true),
            ("DB_PASSWORD", true),
            ("MYSQL_PWD_PASSWD", true),
            ("STRIPE_SECRET", true),
            ("SOME_APIKEY_V2", true),
            ("CODEX_AUTH", true),
            ("HOME", false),
            ("PATH", false),
            ("ANTHROPIC_BASE_URL", false),
            ("ANTHROPIC_MODEL", false),
            ("CLAUDE_CODE_CMD", false),
            ("TERM", false),
        ];
        for (name, secret) in cases {
            assert_eq!(is_secret_name(name), secret, "{name}");
        }
    }

    #[test]
    fn secret_values_are_trimmed_and_filtered() {
        let env = [
            ("ANTHROPIC_API_KEY", format!("  {KEY}\r\n")),
            ("OPENAI_API_KEY", "short".to_owned()),
            ("HOME", "/home/someone/long/path".to_owned()),
            ("GH_TOKEN", "ghp_abcdefghijklmnop".to_owned()),
            ("CLAUDE_CODE_OAUTH_TOKEN", KEY.to_owned()),
        ];
        let got = secrets_of(env.iter().map(|(k, v)| (*k, v.as_str())));
        assert_eq!(got, vec!["ghp_abcdefghijklmnop".to_owned(), KEY.to_owned()]);
    }

    #[test]
    fn redact_table() {
        let secrets = vec![KEY.to_owned(), "hunter2hunter2".to_owned()];
        let half = &KEY[..KEY.len() / 2];
        let tail = &KEY[KEY.len() / 2..];
        // (text, expected)
        let cases: Vec<(String, String)> = vec![
            (format!("key={KEY} end"), "key=[REDACTED] end".into()),
            (format!("{KEY}{KEY}"), "[REDACTED]".into()),
            (format!("cut here: {half}…"), "cut here: [REDACTED]…".into()),
            (format!("…{tail} and more"), "…[REDACTED] and more".into()),
            ("pw hunter2hunter2!".into(), "pw [REDACTED]!".into()),
            (
                "an unknown key sk-ant-api03-QQQQQQQQ-RRRR".into(),
                "an unknown key [REDACTED]".into(),
            ),
            ("no secret here".into(), "no secret here".into()),
            ("short".into(), "short".into()),
            ("é".repeat(20), "é".repeat(20)),
        ];
        for (text, want) in cases {
            let mut t = text.clone();
            redact(&mut t, &secrets);
            assert_eq!(t, want, "{text}");
            assert!(leaks(&t, KEY).is_empty(), "{t}");
        }
    }

    #[test]
    fn displayed_args_never_carry_a_secret() {
        let secrets = vec!["sk-ant-api03-SECRETVALUE".to_string()];
        let args = vec![
            "-p".to_string(),
            "--api-key=sk-ant-api03-SECRETVALUE".to_string(),
        ];
        assert_eq!(redacted(&args, &secrets), ["-p", "--api-key=[REDACTED]"]);
        let plain = vec!["-p".to_string(), "--model".to_string(), "opus".to_string()];
        assert_eq!(redacted(&plain, &[]), plain);
    }

    #[test]
    fn every_field_and_the_normalized_signatures_are_redacted() {
        let secret = "Zq8vR2mTx7LpK4nW9bYc3HdF6gJ1sA5eU0oIiQwErTyUuP".to_owned();
        let line = format!("Error: request failed with key {secret} at 12:00");
        let mut a = Analysis {
            outcome: Outcome::AgentError,
            error: Some(AgentError {
                kind: ErrorKind::Unknown,
                message: line.clone(),
                api_status: None,
                reset_at: None,
                window: None,
            }),
            session_id: Some(secret.clone()),
            summary: line.clone(),
            questions: vec![format!("Should I use {secret}?")],
            permission_denials: vec![Denial {
                tool: format!("Tool{secret}"),
                command: Some(format!("echo {secret}")),
            }],
            error_signatures: crate::analysis::signatures([line.as_str()]),
            ..Analysis::default()
        };
        assert!(!leaks(&a.error_signatures.join(" "), &secret).is_empty());
        redact_analysis(&mut a, std::slice::from_ref(&secret));
        let all = format!("{a:?}");
        assert!(leaks(&all, &secret).is_empty(), "{all}");
        assert_eq!(a.session_id, None);
        assert!(a.error_signatures.iter().all(|s| s.contains(REDACTED)));
        let norm = crate::analysis::normalize_signature(&secret);
        for w in norm.as_bytes().windows(MIN_SECRET_LEN) {
            let w = std::str::from_utf8(w).unwrap_or("");
            assert!(!a.error_signatures.iter().any(|s| s.contains(w)), "{w}");
        }
    }

    #[test]
    fn live_items_are_redacted() {
        let secrets = vec![KEY.to_owned()];
        let mut items = vec![
            LiveItem::Text(format!("the key is {KEY}")),
            LiveItem::Tool {
                name: KEY.to_owned(),
                detail: format!("echo {KEY}"),
            },
            LiveItem::Init {
                session_id: Some(KEY.to_owned()),
                model: None,
            },
            LiveItem::Retry {
                attempt: 1,
                error: KEY.to_owned(),
                max_retries: None,
                delay_ms: None,
                status: None,
            },
            LiveItem::Result {
                is_error: true,
                summary: KEY.to_owned(),
            },
        ];
        for item in &mut items {
            redact_live(item, &secrets);
        }
        let all = format!("{items:?}");
        assert!(leaks(&all, KEY).is_empty(), "{all}");
    }
}
