//! Error kinds from error texts, in the order of claude-contract.md §7, and the outcome of a
//! call from everything gathered.  **\[pure\]**
//!
//! Typed fields come first: `api_error` (2.1.330+), then a rejected
//! `api_error_params.rate_limit_info` / `rate_limit_event` (a subscription window), then the
//! wordings (spend caps, usage limits), `api_error_status`, the text rules, `api_error_type`
//! and the synthetic message's error category. An unknown typed value is ignored.
//!
//! Only texts that are errors by construction are matched: the result text of a call that
//! reported `is_error`, its `errors[]`, a synthetic assistant message with an `error`
//! category, stderr, and plain-text output of a call that exited non-zero. What the agent
//! quoted (tool results, file contents) is never read.

use std::sync::LazyLock;

use jiff::Timestamp;
use regex::Regex;

use super::parse::{Gathered, LimitInfo, ResultData};
use super::reset::reset_in_line;
use super::{AgentError, Clock, ErrorKind, Outcome, OutputShape, RunFacts, re};

/// Longest error message kept.
const MAX_MESSAGE: usize = 500;

static LEGACY_LIMIT: LazyLock<Regex> =
    LazyLock::new(|| re(r"Claude AI usage limit reached\|(\d{9,})"));
static LEGACY_WHOLE: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\s*Claude AI usage limit reached\|\d{9,}\s*$"));
/// A spend cap: waiting for a window reset does not lift it.
static SPEND: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\bmonthly spend(?:ing)? (?:limit|cap)|\bspend(?:ing)? (?:limit|cap) (?:reached|exceeded)|\borg(?:'|’)?s monthly usage limit|\borganization(?:'|’)?s monthly usage limit|\bout of (?:usage )?credits\b|\bYour org(?:anization)? is out of usage|\bmodel_requires_usage_credits\b|\busage credits? (?:are )?required\b",
    )
});
static HIT_LIMIT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?mi)^[^\w\n]*(?:API Error:\s*)?(?:You(?:'|’)ve hit your\b[^\n]*\blimit|You(?:'|’)ve reached your\b[^\n]*\blimit|You(?:'|’)re out of (?:extra )?usage|Claude (?:AI )?usage limit reached)",
    )
});
static OLD_LIMIT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:5-hour|five-hour|session|weekly|opus|sonnet|usage) limit (?:reached|hit|exceeded)|\busage_limit_reached\b|grace_daily_limit_reached",
    )
});
/// The text rules, in the contract's order: the first pattern that matches names the kind.
static TEXT_RULES: LazyLock<[(ErrorKind, Regex); 8]> = LazyLock::new(|| {
    [
        (
            ErrorKind::RateLimit,
            r"(?i)Request rejected \(429\)|rate_limit_error|API Error:\s*429\b|\b429\b|\brate[ _-]?limit|temporarily limiting requests|too many requests",
        ),
        (ErrorKind::Overloaded, r"(?i)\b529\b|overloaded"),
        (
            ErrorKind::Auth,
            r"(?i)API Error:\s*401\b|\b401 Unauthorized\b|Not logged in|Please run /login|Invalid API key|invalid x-api-key|authentication_failed|authentication_error|OAuth token (?:has )?(?:been )?(?:expired|revoked)|oauth_org_not_allowed|OAuth authentication is currently not allowed",
        ),
        (
            ErrorKind::Billing,
            r"(?i)API Error:\s*40[23]\b|\b403 Forbidden\b|permission_error|Credit balance is too low|billing_error|insufficient (?:credit|funds|balance)|payment required",
        ),
        (
            ErrorKind::Network,
            r"(?i)Unable to connect|ConnectionRefused|Connection (?:refused|reset|error)|ECONNREFUSED|ECONNRESET|ENOTFOUND|ETIMEDOUT|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|Request timed out|\btimed out\b|socket hang up|fetch failed|getaddrinfo|network error|connection_failed",
        ),
        (
            ErrorKind::Server,
            r"(?i)API Error:\s*5\d\d\b|\b50[0-4]\b|Internal server error|server_error|\bapi_error\b|empty or malformed response|Bad Gateway|Service Unavailable|Gateway Timeout",
        ),
        (ErrorKind::MaxTurns, r"(?i)Reached max(?:imum)? (?:number of )?turns"),
        (ErrorKind::Budget, r"(?i)Reached maximum budget"),
    ]
    .map(|(kind, pattern)| (kind, re(pattern)))
});
static UNKNOWN_SESSION: LazyLock<Regex> =
    LazyLock::new(|| re(r"No conversation found with session ID"));
static CLI_USAGE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?m)^\s*(?:error:|Error:|Usage:)|cannot be used with root/sudo privileges|must be a positive number|requires --verbose|Input must be provided",
    )
});

/// A classified error text: its kind and, for usage limits, the reset time and the window
/// it gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classified {
    pub kind: ErrorKind,
    pub reset_at: Option<Timestamp>,
    /// `five_hour`, `seven_day`, `seven_day_opus`, `seven_day_sonnet` (from the wording).
    pub window: Option<&'static str>,
}

impl Classified {
    fn plain(kind: ErrorKind) -> Self {
        Self {
            kind,
            reset_at: None,
            window: None,
        }
    }
}

/// The window a usage-limit wording names.
fn window_of(phrase: &str) -> Option<&'static str> {
    let lower = phrase.to_lowercase();
    if lower.contains("opus") {
        Some("seven_day_opus")
    } else if lower.contains("sonnet") {
        Some("seven_day_sonnet")
    } else if lower.contains("weekly") || lower.contains("7-day") || lower.contains("seven-day") {
        Some("seven_day")
    } else if lower.contains("session") || lower.contains("5-hour") || lower.contains("five-hour") {
        Some("five_hour")
    } else {
        None
    }
}

/// Matches a spend-cap or usage-limit wording (matchers 1–3 of the contract, spend caps
/// first: `You've hit your monthly spend limit · your 5-hour limit resets 5pm` is a spend cap).
fn limit_wording(text: &str, clock: &Clock) -> Option<Classified> {
    if SPEND.is_match(text) {
        return Some(Classified::plain(ErrorKind::SpendLimit));
    }
    if let Some(c) = LEGACY_LIMIT.captures(text) {
        let reset_at = c
            .get(1)
            .and_then(|m| m.as_str().parse::<i64>().ok())
            .and_then(|s| Timestamp::from_second(s).ok());
        return Some(Classified {
            kind: ErrorKind::UsageLimit,
            reset_at,
            window: None,
        });
    }
    let m = HIT_LIMIT.find(text).or_else(|| OLD_LIMIT.find(text))?;
    let start = text[..m.start()].rfind('\n').map_or(0, |i| i + 1);
    let end = text[m.start()..]
        .find('\n')
        .map_or(text.len(), |i| m.start() + i);
    // The window is named before the first separator (`You've hit your weekly limit · …`).
    let phrase = text[start..end]
        .split(['·', '∙', '|'])
        .find(|part| part.contains(m.as_str().trim()) || OLD_LIMIT.is_match(part))
        .unwrap_or("");
    Some(Classified {
        kind: ErrorKind::UsageLimit,
        reset_at: reset_in_line(&text[start..end], clock),
        window: window_of(phrase),
    })
}

/// The kind a typed error string names (`api_error`, a synthetic message's `error`
/// category, `api_error_type`). Unknown strings give `None`.
#[must_use]
pub(super) fn typed_kind(value: &str) -> Option<ErrorKind> {
    let kind = match value.trim().to_ascii_lowercase().as_str() {
        "usage_limit_reached"
        | "usage_limit"
        | "session_limit_reached"
        | "weekly_limit_reached" => ErrorKind::UsageLimit,
        "model_requires_usage_credits"
        | "spend_limit_reached"
        | "monthly_spend_limit_reached"
        | "out_of_usage_credits"
        | "out_of_credits" => ErrorKind::SpendLimit,
        "connection_failed" | "connection_error" | "no_response" | "network_error"
        | "request_timeout" | "timeout" => ErrorKind::Network,
        "rate_limit" | "rate_limited" | "rate_limit_error" => ErrorKind::RateLimit,
        "overloaded" | "overloaded_error" => ErrorKind::Overloaded,
        "authentication_failed"
        | "authentication_error"
        | "oauth_org_not_allowed"
        | "invalid_api_key"
        | "not_logged_in"
        | "token_expired"
        | "oauth_token_expired"
        | "oauth_token_revoked" => ErrorKind::Auth,
        "billing_error" | "credit_balance_too_low" | "insufficient_credits" => ErrorKind::Billing,
        "server_error" | "api_error" | "internal_server_error" => ErrorKind::Server,
        _ => return None,
    };
    Some(kind)
}

/// Matches an error text against the known wordings, in the contract's order, with the API
/// status and the synthetic error category as further evidence. `None`: nothing matched.
/// A reset time printed without a zone is read as UTC (`classify_text_in` takes the zone).
#[must_use]
pub fn classify_text(
    text: &str,
    api_status: Option<u16>,
    category: Option<&str>,
    now: Timestamp,
) -> Option<Classified> {
    classify_text_in(text, api_status, category, &Clock::utc(now))
}

/// [`classify_text`] with the machine's local zone for reset times printed without one.
#[must_use]
pub(super) fn classify_text_in(
    text: &str,
    api_status: Option<u16>,
    category: Option<&str>,
    clock: &Clock,
) -> Option<Classified> {
    if let Some(c) = limit_wording(text, clock) {
        return Some(c);
    }
    if let Some(kind) = status_kind(text, api_status) {
        return Some(Classified::plain(kind));
    }
    text_kind(text)
        .or_else(|| category.and_then(typed_kind))
        .map(Classified::plain)
}

/// What `api_error_status` says.
fn status_kind(text: &str, api_status: Option<u16>) -> Option<ErrorKind> {
    let kind = match api_status? {
        429 => ErrorKind::RateLimit,
        529 => ErrorKind::Overloaded,
        401 => ErrorKind::Auth,
        402 => ErrorKind::Billing,
        // A 403 is a billing/permission refusal unless the text says it is a login problem.
        403 if text_rule_matches(ErrorKind::Auth, text) => ErrorKind::Auth,
        403 => ErrorKind::Billing,
        500..=599 => ErrorKind::Server,
        _ => return None,
    };
    Some(kind)
}

/// The text rules alone (after the limit wordings).
fn text_kind(text: &str) -> Option<ErrorKind> {
    TEXT_RULES
        .iter()
        .find(|(_, pattern)| pattern.is_match(text))
        .map(|(kind, _)| *kind)
}

/// Whether the text rule of `kind` matches `text`.
fn text_rule_matches(kind: ErrorKind, text: &str) -> bool {
    TEXT_RULES
        .iter()
        .any(|(k, pattern)| *k == kind && pattern.is_match(text))
}

/// The first non-empty line of `text`, trimmed and cut.
fn first_line(text: &str) -> String {
    let line = super::first_text_line(text);
    if line.len() <= MAX_MESSAGE {
        return line.to_owned();
    }
    format!("{}…", crate::sanitize::cut_bytes(line, MAX_MESSAGE))
}

fn error(
    kind: ErrorKind,
    message: String,
    api_status: Option<u16>,
    reset_at: Option<Timestamp>,
) -> AgentError {
    AgentError {
        kind,
        message,
        api_status,
        reset_at,
        window: None,
    }
}

/// The machine-readable verdicts the stream and the result gave, best first.
struct Typed<'a> {
    /// `api_error`, mapped (unknown values dropped).
    api_error: Option<ErrorKind>,
    /// `api_error_type`, mapped.
    api_error_type: Option<ErrorKind>,
    /// `api_error_params.rate_limit_info`.
    limit: Option<&'a LimitInfo>,
}

impl Typed<'_> {
    fn none() -> Self {
        Self {
            api_error: None,
            api_error_type: None,
            limit: None,
        }
    }
}

/// Whether a rejected window was reported (in the result or by a `rate_limit_event`).
fn rejected(g: &Gathered, typed: &Typed<'_>) -> bool {
    g.limit_rejected.is_some() || typed.limit.is_some_and(LimitInfo::rejected)
}

/// Classifies an error from its texts (best first: the answer, `errors[]`, stderr) with
/// everything else the stream said.
fn from_texts(
    g: &Gathered,
    texts: &[&str],
    api_status: Option<u16>,
    category: Option<&str>,
    typed: &Typed<'_>,
    clock: &Clock,
) -> AgentError {
    let message = texts
        .iter()
        .map(|t| first_line(t))
        .find(|l| !l.is_empty())
        .unwrap_or_else(|| {
            category
                .unwrap_or("the agent reported an error without a message")
                .to_owned()
        });
    let wording = texts.iter().find_map(|t| limit_wording(t, clock));
    let wording_kind = wording.map(|c| c.kind);
    let found = texts
        .iter()
        .find_map(|t| classify_text_in(t, api_status, None, clock));
    let kind = match typed.api_error {
        Some(ErrorKind::UsageLimit | ErrorKind::RateLimit)
            if wording_kind == Some(ErrorKind::SpendLimit) =>
        {
            ErrorKind::SpendLimit
        }
        Some(ErrorKind::RateLimit)
            if wording_kind == Some(ErrorKind::UsageLimit) || rejected(g, typed) =>
        {
            ErrorKind::UsageLimit
        }
        Some(k) => k,
        // A rejected window is the subscription limit, unless the text names a spend cap.
        None if rejected(g, typed) => {
            if wording_kind == Some(ErrorKind::SpendLimit) {
                ErrorKind::SpendLimit
            } else {
                ErrorKind::UsageLimit
            }
        }
        None => found
            .map(|c| c.kind)
            .or(typed.api_error_type)
            .or_else(|| category.and_then(typed_kind))
            .unwrap_or(ErrorKind::Unknown),
    };
    let mut e = error(kind, message, api_status, None);
    if kind == ErrorKind::UsageLimit {
        let from_wording = wording.filter(|c| c.kind == ErrorKind::UsageLimit);
        // The machine-readable reset time wins over the parsed wording.
        e.reset_at = typed
            .limit
            .and_then(|l| l.resets_at)
            .and_then(|s| Timestamp::from_second(s).ok())
            .or_else(|| event_reset(g))
            .or_else(|| from_wording.and_then(|c| c.reset_at));
        e.window = typed
            .limit
            .and_then(|l| l.window.clone())
            .or_else(|| g.limit_rejected.as_ref().and_then(|l| l.window.clone()))
            .or_else(|| from_wording.and_then(|c| c.window).map(str::to_owned));
    }
    e
}

/// The reset time a stream's `rate_limit_event` gave, when it rejected the call.
fn event_reset(g: &Gathered) -> Option<Timestamp> {
    g.limit_rejected
        .as_ref()
        .and_then(|l| l.resets_at)
        .and_then(|s| Timestamp::from_second(s).ok())
}

/// The error a result reports, if it reports one.
fn result_error(g: &Gathered, r: &ResultData, stderr: &str, clock: &Clock) -> Option<AgentError> {
    let joined = r.errors.join("\n");
    let subtype_kind = match r.subtype.as_str() {
        "error_max_turns" => Some(ErrorKind::MaxTurns),
        "error_max_budget_usd" => Some(ErrorKind::Budget),
        "error_during_execution" => Some(ErrorKind::Interrupted),
        s if s.starts_with("error") => Some(ErrorKind::Unknown),
        _ => None,
    };
    let typed = Typed {
        api_error: r.api_error.as_deref().and_then(typed_kind),
        api_error_type: r.api_error_type.as_deref().and_then(typed_kind),
        limit: r.limit.as_ref(),
    };
    if let Some(kind) = subtype_kind {
        let message = if joined.trim().is_empty() {
            r.text
                .as_deref()
                .map(first_line)
                .unwrap_or_else(|| r.subtype.clone())
        } else {
            first_line(&joined)
        };
        // An unknown error subtype may still carry a recognizable API error.
        if kind == ErrorKind::Unknown {
            let texts = [joined.as_str(), r.text.as_deref().unwrap_or(""), stderr];
            let mut e = from_texts(g, &texts, r.api_status, None, &typed, clock);
            e.message = message;
            return Some(e);
        }
        return Some(error(kind, message, r.api_status, None));
    }
    let text = r.text.as_deref().unwrap_or("");
    // 2.1.330 may say it with typed fields only: a known `api_error`, or `terminal_reason`.
    let typed_error = typed.api_error.is_some()
        || r.terminal_reason.as_deref() == Some("api_error")
        || typed.limit.is_some_and(LimitInfo::rejected);
    if r.is_error || typed_error {
        let category = g.synthetic.as_ref().map(|s| s.category.as_str());
        let texts = [text, joined.as_str(), stderr];
        return Some(from_texts(g, &texts, r.api_status, category, &typed, clock));
    }
    // Old clients returned the bare legacy limit string as a "successful" answer.
    if LEGACY_WHOLE.is_match(text) {
        return Some(from_texts(g, &[text], r.api_status, None, &typed, clock));
    }
    None
}

/// What stderr says, when stdout gave no answer.
fn stderr_error(stderr: &str, shape: OutputShape, clock: &Clock) -> Option<AgentError> {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        return None;
    }
    if let Some(m) = UNKNOWN_SESSION.find(stderr) {
        return Some(error(
            ErrorKind::CliUsage,
            first_line(&stderr[m.start()..]),
            None,
            None,
        ));
    }
    if let Some(c) = classify_text_in(trimmed, None, None, clock) {
        let line = stderr
            .lines()
            .find(|l| classify_text_in(l, None, None, clock).is_some())
            .map_or_else(|| first_line(trimmed), first_line);
        let mut e = error(c.kind, line, None, c.reset_at);
        e.window = c.window.map(str::to_owned);
        return Some(e);
    }
    let no_json = matches!(shape, OutputShape::Empty | OutputShape::Text);
    let m = CLI_USAGE.find(stderr).filter(|_| no_json)?;
    let start = stderr[..m.start()].rfind('\n').map_or(0, |i| i + 1);
    Some(error(
        ErrorKind::CliUsage,
        first_line(&stderr[start..]),
        None,
        None,
    ))
}

/// The verdict on a call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub outcome: Outcome,
    pub error: Option<AgentError>,
    pub unknown_session: bool,
}

/// An error from one text with no typed fields (plain text, stderr, a synthetic message).
fn from_one_text(g: &Gathered, text: &str, category: Option<&str>, clock: &Clock) -> AgentError {
    from_texts(g, &[text], None, category, &Typed::none(), clock)
}

/// Plain-text output: an error only when the CLI exited non-zero (or the text is exactly the
/// legacy limit string), never because a successful answer mentions an error.
fn text_error(g: &Gathered, facts: &RunFacts, clock: &Clock) -> Option<AgentError> {
    let cap = g.text.as_ref()?;
    let text = cap.text();
    if LEGACY_WHOLE.is_match(&text) {
        return Some(from_one_text(g, &text, None, clock));
    }
    let failed = facts.exit_code.is_some_and(|c| c != 0);
    // Exit status unknown (a saved file): only a lone short line can be an error message.
    let lone_line = facts.exit_code.is_none()
        && facts.signal.is_none()
        && cap.complete()
        && text.len() <= 300
        && text.lines().filter(|l| !l.trim().is_empty()).count() == 1;
    if lone_line {
        return classify_text_in(&text, None, None, clock)
            .map(|_| from_one_text(g, &text, None, clock));
    }
    if !failed {
        return None;
    }
    // The CLI prints a short error line in text mode; a long text is an answer.
    let short = cap.complete() && text.len() <= 2048;
    if short {
        return Some(from_one_text(g, &text, None, clock));
    }
    Some(error(ErrorKind::Unknown, first_line(&text), None, None))
}

/// A stream that ended while the CLI was retrying: what it was retrying on. With no HTTP
/// status and no category the CLI could not reach the API at all (network).
fn retry_error(g: &Gathered, clock: &Clock) -> Option<AgentError> {
    let r = g.retry.as_ref()?;
    let fallback = if r.status.is_none() {
        ErrorKind::Network
    } else {
        ErrorKind::Unknown
    };
    let kind =
        classify_text_in("", r.status, Some(&r.category), clock).map_or(fallback, |c| c.kind);
    let status = r.status.map(|s| format!(", HTTP {s}")).unwrap_or_default();
    let message = format!(
        "still retrying the API (attempt {}: {}{status})",
        r.attempt, r.category
    );
    Some(error(kind, message, r.status, None))
}

/// In a JSON format: an answer that is not clean client JSON. A `result` found after stray
/// bytes is read (its cost and session count) but the call is `malformed` unless the result
/// itself reports an error; an answer with no result at all (text, foreign JSON, `{not valid
/// json}`) is `malformed` unless its text or stderr names a known error. `None`: the answer
/// is the client's JSON, or no JSON format was asked for.
fn broken_json(
    g: &Gathered,
    content: Option<&AgentError>,
    stderr_err: Option<&AgentError>,
    facts: &RunFacts,
    stderr: &str,
) -> Option<Verdict> {
    if !g.asked_json {
        return None;
    }
    let stray = g.stray_bytes > 0;
    let text_only = g.result.is_none() && g.read.shape == OutputShape::Text;
    if !stray && !text_only {
        return None;
    }
    let known = |e: &&AgentError| e.kind != ErrorKind::Unknown;
    if let Some(e) = content.filter(known).or_else(|| stderr_err.filter(known)) {
        return Some(Verdict {
            outcome: Outcome::AgentError,
            error: Some(e.clone()),
            unknown_session: false,
        });
    }
    let how = match (facts.signal, facts.exit_code) {
        (Some(sig), _) => format!("killed by signal {sig}"),
        (None, Some(code)) => format!("exited with code {code}"),
        (None, None) => "ended".to_owned(),
    };
    let mut message = if g.result.is_some() {
        format!(
            "the agent {how} with stray output around its JSON result ({} bytes that are not the client's JSON)",
            g.stray_bytes
        )
    } else {
        format!("the agent {how} without a JSON result (a JSON output format was asked for)")
    };
    let line = crash_line(stderr);
    if !line.is_empty() {
        message.push_str(": ");
        message.push_str(&line);
    }
    Some(Verdict {
        outcome: Outcome::Crashed,
        error: Some(error(ErrorKind::Malformed, message, None, None)),
        unknown_session: false,
    })
}

/// Decides the outcome of a call from what was gathered, stderr and the run facts.
/// What a failed call that gave no answer is: no output at all, or output hank cannot read.
pub(crate) fn no_answer_kind(shape: OutputShape) -> ErrorKind {
    match shape {
        OutputShape::Empty => ErrorKind::NoOutput,
        _ => ErrorKind::Malformed,
    }
}

/// How the agent's process ended, for messages ("killed by signal 9", "exited with code 1").
pub(crate) fn how_it_ended(facts: &RunFacts) -> String {
    match (facts.signal, facts.exit_code) {
        (Some(sig), _) => format!("killed by signal {sig}"),
        (None, Some(code)) => format!("exited with code {code}"),
        (None, None) => "ended".to_owned(),
    }
}

pub(crate) fn verdict(g: &Gathered, stderr: &str, facts: &RunFacts, clock: &Clock) -> Verdict {
    let unknown_session = UNKNOWN_SESSION.is_match(stderr);
    let content = match &g.result {
        Some(r) => result_error(g, r, stderr, clock),
        None => match &g.synthetic {
            Some(s) => Some(from_one_text(g, &s.text, Some(&s.category), clock)),
            None => match &g.limit_rejected {
                Some(limit) => {
                    let mut e = error(
                        ErrorKind::UsageLimit,
                        "usage limit reached (rate_limit_event rejected)".to_owned(),
                        None,
                        event_reset(g),
                    );
                    e.window.clone_from(&limit.window);
                    Some(e)
                }
                None => text_error(g, facts, clock),
            },
        },
    };
    let answered = g.result.is_some() || g.text.is_some();
    let stderr_err = if content.is_none() && (g.result.is_none() || unknown_session) {
        stderr_error(stderr, g.read.shape, clock)
    } else {
        None
    };

    if facts.timed_out {
        let error = if facts.startup_hang {
            Some(error(
                ErrorKind::StartupHang,
                "the agent printed nothing before FIRST_OUTPUT_TIMEOUT (a startup hang)".to_owned(),
                None,
                None,
            ))
        } else {
            content.or(stderr_err).or_else(|| retry_error(g, clock))
        };
        return Verdict {
            outcome: Outcome::Timeout,
            error,
            unknown_session,
        };
    }
    if facts.interrupted || (g.result.is_none() && g.user_interrupt && content.is_none()) {
        let message = if facts.interrupted {
            "interrupted by the user (Ctrl-C / SIGTERM)"
        } else {
            "the request was interrupted"
        };
        return Verdict {
            outcome: Outcome::AgentError,
            error: Some(error(
                ErrorKind::Interrupted,
                message.to_owned(),
                None,
                None,
            )),
            unknown_session,
        };
    }
    if g.result.is_none() && (g.too_large || facts.stdout_cut) {
        return Verdict {
            outcome: Outcome::AgentError,
            error: Some(error(
                ErrorKind::OutputTooLarge,
                super::TOO_LARGE_MESSAGE.to_owned(),
                None,
                None,
            )),
            unknown_session,
        };
    }
    if let Some(v) = broken_json(g, content.as_ref(), stderr_err.as_ref(), facts, stderr) {
        return Verdict {
            unknown_session,
            ..v
        };
    }
    if let Some(e) = content {
        return Verdict {
            outcome: Outcome::AgentError,
            error: Some(e),
            unknown_session,
        };
    }
    if g.result.is_some() {
        return Verdict {
            outcome: Outcome::Success,
            error: None,
            unknown_session,
        };
    }
    if let Some(e) = stderr_err {
        return Verdict {
            outcome: Outcome::AgentError,
            error: Some(e),
            unknown_session,
        };
    }
    let killed = facts.signal.is_some();
    if answered && !killed {
        // Plain text from a call that did not fail.
        return Verdict {
            outcome: Outcome::Success,
            error: None,
            unknown_session,
        };
    }
    let kind = no_answer_kind(g.read.shape);
    let how = how_it_ended(facts);
    let what = match g.read.shape {
        OutputShape::Empty => "with no output".to_owned(),
        OutputShape::Truncated => "with truncated JSON output".to_owned(),
        _ => "without a result".to_owned(),
    };
    let mut message = format!("the agent {how} {what}");
    let line = crash_line(stderr);
    if !line.is_empty() {
        message.push_str(": ");
        message.push_str(&line);
    }
    Verdict {
        outcome: Outcome::Crashed,
        error: Some(error(kind, message, None, None)),
        unknown_session,
    }
}

/// A line of a crash's output that says nothing of what went wrong: a stack frame (`at …`,
/// `File "…", line N`), a runtime's banner (`Node.js v20.1.0`), a caret or brace line.
static CRASH_NOISE: LazyLock<Regex> =
    LazyLock::new(|| re(r#"^(?:at\s|File\s+"|Node\.js v\d|[\^~{}\[\]()\s]+$)"#));

/// The line of a crash's error output that says what went wrong: the last non-empty line
/// that is not noise (`CRASH_NOISE`) — a Python traceback's `PermissionError: …`, not its
/// `Traceback (most recent call last):` —, else the last non-empty line; trimmed, cut.
#[must_use]
pub fn crash_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .rev()
        .find(|l| !CRASH_NOISE.is_match(l))
        .or_else(|| lines.last())
        .copied()
        .unwrap_or("");
    first_line(line)
}

/// The crash of a call ([`super::Crash`]): the agent exited non-zero (not stopped by hank:
/// no timeout, no interrupt) without a model answer.
pub(crate) fn crash_of(outcome: Outcome, facts: &RunFacts, stderr: &str) -> Option<super::Crash> {
    if outcome != Outcome::Crashed || facts.timed_out || facts.interrupted {
        return None;
    }
    let exit_code = facts.exit_code.filter(|c| *c != 0)?;
    let lines: Vec<String> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(first_line)
        .collect();
    let tail = lines[lines.len().saturating_sub(super::CRASH_TAIL_LINES)..].to_vec();
    Some(super::Crash {
        exit_code,
        line: crash_line(stderr),
        tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-11-22T10:00:00Z".parse().unwrap()
    }

    #[test]
    fn every_wording_maps_to_its_kind() {
        use ErrorKind::*;
        type Case<'a> = (&'a str, Option<u16>, Option<&'a str>, Option<ErrorKind>);
        let cases: &[Case<'_>] = &[
            (
                "Claude AI usage limit reached|1748268000",
                None,
                None,
                Some(UsageLimit),
            ),
            (
                "You've hit your session limit · resets 5:09am (UTC)",
                Some(429),
                None,
                Some(UsageLimit),
            ),
            (
                "You've hit your weekly limit · resets Nov 25, 2:09am (UTC)",
                Some(429),
                None,
                Some(UsageLimit),
            ),
            (
                "You’ve hit your Opus limit · resets 3pm (Europe/Paris)",
                Some(429),
                None,
                Some(UsageLimit),
            ),
            // Spend caps are not windows, even when they name a reset.
            (
                "You've hit your org's monthly usage limit",
                Some(429),
                None,
                Some(SpendLimit),
            ),
            (
                "You're out of usage credits · resets 4am (UTC)",
                None,
                None,
                Some(SpendLimit),
            ),
            ("You're out of extra usage", None, None, Some(UsageLimit)),
            (
                "5-hour limit reached ∙ resets 2am",
                None,
                None,
                Some(UsageLimit),
            ),
            (
                "Claude usage limit reached. Your limit will reset at 3pm (America/Bogota).",
                None,
                None,
                Some(UsageLimit),
            ),
            (
                "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.",
                Some(429),
                None,
                Some(RateLimit),
            ),
            (
                "API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit",
                None,
                None,
                Some(RateLimit),
            ),
            (
                "API Error: Server is temporarily limiting requests (not your usage limit) · Rate limited",
                None,
                None,
                Some(RateLimit),
            ),
            (
                "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}",
                None,
                None,
                Some(RateLimit),
            ),
            (
                "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.",
                Some(529),
                None,
                Some(Overloaded),
            ),
            (
                "API Error: Repeated 529 Overloaded errors. The API is at capacity — this is usually temporary.",
                None,
                None,
                Some(Overloaded),
            ),
            (
                "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
                None,
                None,
                Some(Overloaded),
            ),
            ("Not logged in · Please run /login", None, None, Some(Auth)),
            (
                "Invalid API key · Fix external API key",
                Some(401),
                None,
                Some(Auth),
            ),
            (
                "Invalid API key · Fix external API key",
                None,
                None,
                Some(Auth),
            ),
            (
                "OAuth token has expired. Please obtain a new token or refresh your existing token.",
                None,
                None,
                Some(Auth),
            ),
            (
                "OAuth token revoked · Please run /login",
                None,
                None,
                Some(Auth),
            ),
            ("Credit balance is too low", Some(400), None, Some(Billing)),
            (
                "API Error: Unable to connect to API (ConnectionRefused)",
                None,
                None,
                Some(Network),
            ),
            (
                "getaddrinfo ENOTFOUND api.anthropic.com",
                None,
                None,
                Some(Network),
            ),
            ("API Error: Request timed out.", None, None, Some(Network)),
            (
                "API Error: 500 Internal server error. This is a server-side issue…",
                Some(500),
                None,
                Some(Server),
            ),
            ("API Error: 502 Bad Gateway", None, None, Some(Server)),
            (
                "API Error: API returned an empty or malformed response (HTTP 200) — check for a proxy",
                None,
                None,
                Some(Server),
            ),
            ("Error: Reached max turns (5)", None, None, Some(MaxTurns)),
            ("Reached maximum budget ($0.50)", None, None, Some(Budget)),
            (
                "something odd",
                None,
                Some("authentication_failed"),
                Some(Auth),
            ),
            ("something odd", None, Some("billing_error"), Some(Billing)),
            ("something odd", None, Some("rate_limit"), Some(RateLimit)),
            ("something odd", None, Some("overloaded"), Some(Overloaded)),
            ("something odd", None, Some("server_error"), Some(Server)),
            (
                "API Error: 400 messages: text content blocks must be non-empty",
                Some(400),
                Some("unknown"),
                None,
            ),
            ("something odd", None, None, None),
        ];
        for (text, status, cat, want) in cases {
            let got = classify_text(text, *status, *cat, now()).map(|c| c.kind);
            assert_eq!(got, *want, "{text}");
        }
    }

    #[test]
    fn usage_limit_reset_times() {
        let cases = [
            (
                "Claude AI usage limit reached|1748268000",
                "2025-05-26T14:00:00Z",
            ),
            (
                "You've hit your session limit · resets 5:09am (UTC)",
                "2026-11-23T05:09:00Z",
            ),
            (
                "You've hit your limit · resets 1am (Europe/Oslo)",
                "2026-11-23T00:00:00Z",
            ),
            (
                "You've hit your weekly limit · resets Nov 25, 2:09am (UTC)",
                "2026-11-25T02:09:00Z",
            ),
            (
                "You've hit your limit · resets Apr 23 at 4pm (America/Recife)",
                "2027-04-23T19:00:00Z",
            ),
            ("5-hour limit reached ∙ resets 2am", "2026-11-23T02:00:00Z"),
        ];
        for (text, want) in cases {
            let c = classify_text(text, Some(429), None, now()).unwrap();
            assert_eq!(c.reset_at, Some(want.parse().unwrap()), "{text}");
        }
    }

    /// The line of a crash's output that says what went wrong: the last one that is not a
    /// frame, a banner or punctuation.
    #[test]
    fn a_crash_is_named_by_its_last_meaningful_line() {
        let rows = [
            (
                "Traceback (most recent call last):\n  File \"/a.py\", line 3, in <module>\n    open('/x')\nPermissionError: [Errno 13] Permission denied: '/x'\n",
                "PermissionError: [Errno 13] Permission denied: '/x'",
            ),
            (
                "/app/cli.js:10\n    throw e;\n    ^\n\nTypeError: x is not a function\n    at main (/app/cli.js:10:5)\n    at node:internal/main:1:1\n\nNode.js v20.11.0\n",
                "TypeError: x is not a function",
            ),
            ("segfault\n\n", "segfault"),
            ("   \n", ""),
            ("", ""),
            ("    at only (/a.js:1:1)\n", "at only (/a.js:1:1)"),
        ];
        for (stderr, want) in rows {
            assert_eq!(crash_line(stderr), want, "{stderr:?}");
        }
    }

    /// Only an agent that exited non-zero without a model answer, not stopped by hank, is a
    /// crash; its message and the crash name the last line, its tail keeps the last lines.
    #[test]
    fn a_crash_is_a_non_zero_exit_without_an_answer() {
        let tb = "Traceback (most recent call last):\n  File \"/a.py\", line 1\nPermissionError: denied\n";
        let exit = |code: i32| RunFacts {
            exit_code: Some(code),
            ..RunFacts::default()
        };
        let killed = RunFacts {
            signal: Some(9),
            ..RunFacts::default()
        };
        let timed_out = RunFacts {
            exit_code: Some(1),
            timed_out: true,
            ..RunFacts::default()
        };
        let answer = "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"ok\",\"total_cost_usd\":0.1}\n";
        type Row<'a> = (&'a str, &'a str, RunFacts, bool);
        let rows: Vec<Row<'_>> = vec![
            ("exit 1, nothing on stdout", "", exit(1), true),
            ("exit 1, stray text", "oops\n", exit(1), true),
            ("exit 0, nothing on stdout", "", exit(0), false),
            ("killed by a signal", "", killed, false),
            ("stopped at the timeout", "", timed_out, false),
            ("exit 1 with an answer", answer, exit(1), false),
        ];
        for (name, stdout, facts, want) in rows {
            let a = crate::analysis::analyze_as(
                stdout.as_bytes(),
                tb.as_bytes(),
                &facts,
                &Clock::utc(now()),
                crate::analysis::AskedFormat::StreamJson,
            );
            assert_eq!(a.crash.is_some(), want, "{name}: {a:?}");
            if let Some(c) = &a.crash {
                assert_eq!(c.line, "PermissionError: denied", "{name}");
                assert_eq!(c.tail.len(), 3, "{name}");
                assert_eq!(c.tail[0], "Traceback (most recent call last):", "{name}");
                let message = a.error.as_ref().map(|e| e.message.as_str()).unwrap_or("");
                assert!(
                    message.ends_with(": PermissionError: denied"),
                    "{name}: {message}"
                );
            }
        }
        let long: String = (0..20).map(|i| format!("line {i}\n")).collect();
        let a = crate::analysis::analyze_bytes(b"", long.as_bytes(), &exit(2), now());
        let c = a.crash.unwrap();
        assert_eq!(c.tail.len(), crate::analysis::CRASH_TAIL_LINES);
        assert_eq!(c.tail.last().map(String::as_str), Some("line 19"));
        assert_eq!(c.exit_code, 2);
    }
}
