//! The analyzer against real-shaped answers of every client version: one table, each row
//! pinning the shape, outcome, error kind, reset time, window, session id and cost; and
//! properties (nothing panics, key order never matters).

use jiff::tz::TimeZone;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::tests::{SID, exit as code, fixture as fx};
use super::*;

/// Sunday 2026-11-22, 11:00 in Amsterdam (UTC+1).
fn clock() -> Clock {
    Clock::new(
        "2026-11-22T10:00:00Z".parse().unwrap(),
        TimeZone::get("Europe/Amsterdam").unwrap(),
    )
}

struct Row {
    name: String,
    out: Vec<u8>,
    err: Vec<u8>,
    facts: RunFacts,
    shape: OutputShape,
    outcome: Outcome,
    kind: Option<ErrorKind>,
    reset: Option<&'static str>,
    window: Option<&'static str>,
    session: Option<&'static str>,
    cost: f64,
    credential: Option<&'static str>,
    /// The format hank asked for (`Auto` for the rows that predate it).
    asked: AskedFormat,
}

impl Row {
    fn reset(mut self, at: &'static str) -> Self {
        self.reset = Some(at);
        self
    }
    fn window(mut self, w: &'static str) -> Self {
        self.window = Some(w);
        self
    }
    fn sid(mut self, s: &'static str) -> Self {
        self.session = Some(s);
        self
    }
    fn cost(mut self, c: f64) -> Self {
        self.cost = c;
        self
    }
    fn stderr(mut self, e: &str) -> Self {
        self.err = e.as_bytes().to_vec();
        self
    }
    fn credential(mut self, at: &'static str) -> Self {
        self.credential = Some(at);
        self
    }
    fn asked(mut self, f: AskedFormat) -> Self {
        self.asked = f;
        self
    }
}

/// What the analyzer reads from `stdout` alone, exit `exit`, on the fixed clock.
fn analyzed(stdout: &[u8], exit: i32) -> Analysis {
    analyze_bytes_in(stdout, b"", &code(exit), &clock())
}

/// A row over a fixture file.
fn file(
    name: &str,
    facts: RunFacts,
    shape: OutputShape,
    outcome: Outcome,
    kind: Option<ErrorKind>,
) -> Row {
    Row {
        name: name.to_owned(),
        out: fx(name),
        err: Vec::new(),
        facts,
        shape,
        outcome,
        kind,
        reset: None,
        window: None,
        session: None,
        cost: 0.0,
        credential: None,
        asked: AskedFormat::Auto,
    }
}

/// A row over an inline output.
fn out(
    stdout: &str,
    facts: RunFacts,
    shape: OutputShape,
    outcome: Outcome,
    kind: Option<ErrorKind>,
) -> Row {
    Row {
        name: stdout.chars().take(90).collect(),
        out: stdout.as_bytes().to_vec(),
        ..file("empty.out", facts, shape, outcome, kind)
    }
}

#[allow(clippy::too_many_lines)]
fn rows() -> Vec<Row> {
    use ErrorKind as K;
    use Outcome as O;
    use OutputShape as S;
    let ok = || code(0);
    let fail = || code(1);
    let err = |k| Some(k);
    vec![
        // ---- the recorded/synthesized fixtures (2.1.197 shapes) ----
        file("success.json", ok(), S::ResultObject, O::Success, None).sid(SID).cost(0.1123),
        file("success_complete.json", ok(), S::ResultObject, O::Success, None).sid(SID).cost(0.0841),
        file("success_complete_no_exit.json", ok(), S::ResultObject, O::Success, None).sid(SID).cost(0.1123),
        file("success_questions.json", ok(), S::ResultObject, O::Success, None).sid(SID).cost(0.1123),
        file("success_testing.json", ok(), S::ResultObject, O::Success, None).sid(SID).cost(0.1123),
        file("success_build_errors.json", ok(), S::ResultObject, O::Success, None).sid(SID).cost(0.1123),
        file("permission_denied.json", ok(), S::ResultObject, O::Success, None).sid(SID).cost(0.1123),
        file("api_error_401.json", fail(), S::ResultObject, O::AgentError, err(K::Auth)).sid(SID),
        file("not_logged_in.json", fail(), S::ResultObject, O::AgentError, err(K::Auth)).sid(SID),
        file("credit_low.json", fail(), S::ResultObject, O::AgentError, err(K::Billing)).sid(SID),
        file("usage_limit_session.json", fail(), S::ResultObject, O::AgentError, err(K::UsageLimit))
            .sid(SID).reset("2026-11-23T04:09:00Z").window("five_hour"),
        file("usage_limit_weekly.json", fail(), S::ResultObject, O::AgentError, err(K::UsageLimit))
            .sid(SID).reset("2026-11-25T02:09:00Z").window("seven_day"),
        file("usage_limit_at.json", fail(), S::ResultObject, O::AgentError, err(K::UsageLimit))
            .sid(SID).reset("2027-04-23T19:00:00Z"),
        file("usage_limit_legacy.json", fail(), S::ResultObject, O::AgentError, err(K::UsageLimit))
            .sid(SID).reset("2025-05-26T14:00:00Z"),
        file("rate_limit_429.json", fail(), S::ResultObject, O::AgentError, err(K::RateLimit)).sid(SID),
        file("overloaded_529.json", fail(), S::ResultObject, O::AgentError, err(K::Overloaded)).sid(SID),
        file("overloaded_repeated.json", fail(), S::ResultObject, O::AgentError, err(K::Overloaded)).sid(SID),
        file("server_500.json", fail(), S::ResultObject, O::AgentError, err(K::Server)).sid(SID),
        file("network_refused.json", fail(), S::ResultObject, O::AgentError, err(K::Network)).sid(SID),
        file("max_turns.json", fail(), S::ResultObject, O::AgentError, err(K::MaxTurns)).sid(SID).cost(0.221),
        file("max_budget.json", fail(), S::ResultObject, O::AgentError, err(K::Budget)).sid(SID).cost(0.5312),
        file("sigint.json", ok(), S::ResultObject, O::AgentError, err(K::Interrupted)).sid(SID).cost(0.0312),
        file("array_verbose.json", ok(), S::MessageArray, O::Success, None).sid(SID).cost(0.0923),
        file("stream_success.jsonl", ok(), S::StreamJson, O::Success, None).sid(SID).cost(0.0923),
        file("stream_testing_only.jsonl", ok(), S::StreamJson, O::Success, None).sid(SID).cost(0.1123),
        file("stream_auth_error.jsonl", fail(), S::StreamJson, O::AgentError, err(K::Auth)).sid(SID),
        // The rate_limit_event's resetsAt and rateLimitType win over the wording.
        file("stream_usage_limit.jsonl", fail(), S::StreamJson, O::AgentError, err(K::UsageLimit))
            .sid(SID).reset("2026-11-24T06:00:00Z").window("five_hour"),
        file("stream_quoted_limit.jsonl", ok(), S::StreamJson, O::Success, None).sid(SID).cost(0.1123),
        file("stream_network_retries.jsonl", fail(), S::StreamJson, O::AgentError, err(K::Network)).sid(SID),
        file("stream_sigint.jsonl", ok(), S::StreamJson, O::AgentError, err(K::Interrupted)).sid(SID).cost(0.0101),
        file(
            "stream_truncated.jsonl",
            RunFacts { signal: Some(9), ..RunFacts::default() },
            S::Truncated, O::Crashed, err(K::Malformed),
        ).sid(SID),
        file("truncated.json", fail(), S::Truncated, O::Crashed, err(K::Malformed)),
        file("text_success.txt", ok(), S::Text, O::Success, None),
        file("text_not_logged_in.txt", fail(), S::Text, O::AgentError, err(K::Auth)),
        file("text_max_turns.txt", fail(), S::Text, O::AgentError, err(K::MaxTurns)),
        file("text_network.txt", fail(), S::Text, O::AgentError, err(K::Network)),
        file("text_usage_limit.txt", fail(), S::Text, O::AgentError, err(K::UsageLimit))
            .reset("2026-11-23T00:00:00Z"),
        file("text_legacy_limit.txt", fail(), S::Text, O::AgentError, err(K::UsageLimit))
            .reset("2025-06-14T18:00:00Z"),
        // No zone: the machine's zone (Amsterdam), 2am local = 01:00Z.
        file("text_old_limit.txt", fail(), S::Text, O::AgentError, err(K::UsageLimit))
            .reset("2026-11-23T01:00:00Z").window("five_hour"),
        file("empty.out", code(143), S::Empty, O::Crashed, err(K::NoOutput)),
        Row {
            err: fx("stderr_unknown_session.txt"),
            ..file("empty.out", fail(), S::Empty, O::AgentError, err(K::CliUsage))
        },
        // ---- 2.1.330 shapes (keys in another order, typed fields) ----
        file("v2330_success.json", ok(), S::ResultObject, O::Success, None)
            .sid(SID).cost(0.1874).credential("2026-11-23T22:00:00Z"),
        file("v2330_usage_limit.json", fail(), S::ResultObject, O::AgentError, err(K::UsageLimit))
            .sid(SID).reset("2026-11-24T06:00:00Z").window("five_hour").credential("2026-11-22T20:00:00Z"),
        file("v2330_spend_limit.json", fail(), S::ResultObject, O::AgentError, err(K::SpendLimit)).sid(SID),
        file("v2330_stream_weekly.jsonl", fail(), S::StreamJson, O::AgentError, err(K::UsageLimit))
            .sid(SID).reset("2026-11-27T09:00:00Z").window("seven_day"),
        file("text_bracket_log.txt", ok(), S::Text, O::Success, None),
        file("text_json_snippet.txt", ok(), S::Text, O::Success, None),
        out(
            r#"{"session_id":"s48","result":"You've hit your 5-hour limit · resets 5am (Europe/Amsterdam) · progress saved","api_error":"usage_limit_reached","is_error":true,"total_cost_usd":0,"type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::UsageLimit),
        ).sid("s48").reset("2026-11-23T04:00:00Z").window("five_hour"),
        out(
            r#"{"is_error":true,"api_error":"usage_limit_reached","result":"You've hit your weekly limit · resets Mon 9am","session_id":"s49","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::UsageLimit),
        ).sid("s49").reset("2026-11-23T08:00:00Z").window("seven_day"),
        out(
            r#"{"api_error":"model_requires_usage_credits","is_error":true,"result":"API Error: This model requires usage credits","session_id":"s50","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::SpendLimit),
        ).sid("s50"),
        out(
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"Your org is out of usage · ask your admin to raise the limit","session_id":"s51"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::SpendLimit),
        ).sid("s51"),
        out(
            r#"{"type":"result","subtype":"success","is_error":true,"result":"You're out of usage credits · resets 4am (UTC)","session_id":"s52"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::SpendLimit),
        ).sid("s52"),
        out(
            r#"{"api_error":"connection_failed","terminal_reason":"api_error","is_error":true,"result":"API Error: Connection error.","session_id":"s53","type":"result","subtype":"success","total_cost_usd":0.001}"#,
            fail(), S::ResultObject, O::AgentError, err(K::Network),
        ).sid("s53").cost(0.001),
        out(
            r#"{"api_error":"no_response","is_error":true,"result":"","session_id":"s54","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::Network),
        ).sid("s54"),
        out(
            r#"{"api_error":"rate_limit","api_error_status":429,"is_error":true,"result":"API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit","session_id":"s55","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::RateLimit),
        ).sid("s55"),
        out(
            r#"{"api_error":"overloaded","is_error":true,"result":"API Error: Repeated 529 Overloaded errors.","session_id":"s56","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::Overloaded),
        ).sid("s56"),
        out(
            r#"{"api_error":"authentication_failed","is_error":true,"result":"Invalid API key · Fix external API key","session_id":"s57","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::Auth),
        ).sid("s57"),
        out(
            r#"{"api_error":"billing_error","is_error":true,"result":"Credit balance is too low","session_id":"s58","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::Billing),
        ).sid("s58"),
        // An unknown typed value is ignored: the text decides.
        out(
            r#"{"api_error":"flux_capacitor_drained","is_error":true,"result":"API Error: 529 Overloaded. This is a server-side issue","session_id":"s59","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::Overloaded),
        ).sid("s59"),
        out(
            r#"{"api_error":"flux_capacitor_drained","api_error_status":500,"is_error":true,"result":"API Error: boom","session_id":"s60","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::Server),
        ).sid("s60"),
        // terminal_reason api_error is an error even without is_error.
        out(
            r#"{"terminal_reason":"api_error","api_error":"connection_failed","is_error":false,"result":"","session_id":"s61","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::Network),
        ).sid("s61"),
        out(
            r#"{"api_error_type":"overloaded_error","is_error":true,"result":"API Error: hiccup","session_id":"s62","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::Overloaded),
        ).sid("s62"),
        // A subscription window comes as a 429 rate_limit_error: the wording decides.
        out(
            r#"{"api_error_type":"rate_limit_error","api_error_status":429,"is_error":true,"result":"You've hit your session limit · resets 7pm","session_id":"s63","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::UsageLimit),
        ).sid("s63").reset("2026-11-22T18:00:00Z").window("five_hour"),
        out("Session limit reached ∙ resets 7pm\n", fail(), S::Text, O::AgentError, err(K::UsageLimit))
            .reset("2026-11-22T18:00:00Z").window("five_hour"),
        out("Weekly limit reached ∙ resets Mon 9am\n", fail(), S::Text, O::AgentError, err(K::UsageLimit))
            .reset("2026-11-23T08:00:00Z").window("seven_day"),
        out(
            r#"{"type":"result","subtype":"success","is_error":true,"result":"You've hit your Opus limit · resets 5am (Europe/Amsterdam)","session_id":"s66"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::UsageLimit),
        ).sid("s66").reset("2026-11-23T04:00:00Z").window("seven_day_opus"),
        out(
            r#"{"type":"result","subtype":"success","is_error":true,"result":"You’ve hit your Sonnet limit · resets in 3 days","session_id":"s67"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::UsageLimit),
        ).sid("s67").reset("2026-11-25T10:00:00Z").window("seven_day_sonnet"),
        out(
            "You've hit your limit · resets in 5 hours · /upgrade to Max to keep going\n",
            fail(), S::Text, O::AgentError, err(K::UsageLimit),
        ).reset("2026-11-22T15:00:00Z"),
        out("", fail(), S::Empty, O::AgentError, err(K::UsageLimit))
            .stderr("You've hit your weekly limit · resets Nov 25, 2:09am (UTC)\n")
            .reset("2026-11-25T02:09:00Z").window("seven_day"),
        out(
            r#"{"type":"result","subtype":"error_api","is_error":true,"errors":["You've hit your session limit · resets 5:09am (UTC)"],"session_id":"s70"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::UsageLimit),
        ).sid("s70").reset("2026-11-23T05:09:00Z").window("five_hour"),
        out(
            r#"{"type":"result","subtype":"success","is_error":true,"result":"","errors":["5-hour limit reached ∙ resets 2am"],"session_id":"s71"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::UsageLimit),
        ).sid("s71").reset("2026-11-23T01:00:00Z").window("five_hour"),
        out("Claude AI usage limit reached|1795500000", fail(), S::Text, O::AgentError, err(K::UsageLimit))
            .reset("2026-11-24T06:00:00Z"),
        // ---- errors written only as text ----
        out(
            r#"API Error: 401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            fail(), S::Text, O::AgentError, err(K::Auth),
        ),
        out("API Error: 403 Forbidden\n", fail(), S::Text, O::AgentError, err(K::Billing)),
        out("API Error: 429 Too Many Requests\n", fail(), S::Text, O::AgentError, err(K::RateLimit)),
        out("API Error: Request rejected (429) · Rate limited\n", fail(), S::Text, O::AgentError, err(K::RateLimit)),
        out("API Error: 529 Overloaded\n", fail(), S::Text, O::AgentError, err(K::Overloaded)),
        out("API Error: 503 Service Unavailable\n", fail(), S::Text, O::AgentError, err(K::Server)),
        out("", fail(), S::Empty, O::AgentError, err(K::Network))
            .stderr("Error: connect ECONNREFUSED 127.0.0.1:443\n"),
        out("", fail(), S::Empty, O::AgentError, err(K::Network))
            .stderr("getaddrinfo ENOTFOUND api.anthropic.com\n"),
        out("API Error: Request timed out.\n", fail(), S::Text, O::AgentError, err(K::Network)),
        out("TypeError: fetch failed\n", fail(), S::Text, O::AgentError, err(K::Network)),
        out("", fail(), S::Empty, O::AgentError, err(K::Network)).stderr("Error: socket hang up\n"),
        out("", fail(), S::Empty, O::AgentError, err(K::Network)).stderr("Error: ETIMEDOUT\n"),
        // A successful answer that quotes errors is a success.
        out(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"Handled `API Error: 401` and `You've hit your limit · resets 5am` in the client.","session_id":"s85","total_cost_usd":0.02}"#,
            ok(), S::ResultObject, O::Success, None,
        ).sid("s85").cost(0.02),
        // ---- text answers that start with `[` or `{` ----
        out("[{\"id\":1},{\"id\":2}]\nThose are the rows.\n", ok(), S::Text, O::Success, None),
        out("{BUILD} done\nEverything compiled.\n", ok(), S::Text, O::Success, None),
        out("[ ] write docs\n[x] write code\n", ok(), S::Text, O::Success, None),
        out(
            r#"{"session_id":"s88","is_error":false,"result":"Do"#,
            fail(), S::Truncated, O::Crashed, err(K::Malformed),
        ),
        // ---- one field of an unexpected type never drops the rest ----
        out(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s89","total_cost_usd":0.11,"permission_denials":{"tool_name":"Bash"}}"#,
            ok(), S::ResultObject, O::Success, None,
        ).sid("s89").cost(0.11),
        out(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s90","total_cost_usd":0.12,"usage":"lots"}"#,
            ok(), S::ResultObject, O::Success, None,
        ).sid("s90").cost(0.12),
        out(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s91","total_cost_usd":"0.42"}"#,
            ok(), S::ResultObject, O::Success, None,
        ).sid("s91").cost(0.42),
        out(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":42,"total_cost_usd":0.3}"#,
            ok(), S::ResultObject, O::Success, None,
        ).cost(0.3),
        out(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s93","total_cost_usd":1e308}"#,
            ok(), S::ResultObject, O::Success, None,
        ).sid("s93"),
        out(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s94","total_cost_usd":-5}"#,
            ok(), S::ResultObject, O::Success, None,
        ).sid("s94"),
        out(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s95","total_cost_usd":"NaN"}"#,
            ok(), S::ResultObject, O::Success, None,
        ).sid("s95"),
        out(
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"errors":"Reached maximum number of turns (5)","session_id":"s96","total_cost_usd":0.2,"num_turns":6}"#,
            fail(), S::ResultObject, O::AgentError, err(K::MaxTurns),
        ).sid("s96").cost(0.2),
        out(
            "{\n  \"session_id\": \"s97\",\n  \"total_cost_usd\": 0.05,\n  \"result\": \"ok\",\n  \"is_error\": false,\n  \"type\": \"result\",\n  \"subtype\": \"success\"\n}\n",
            ok(), S::ResultObject, O::Success, None,
        ).sid("s97").cost(0.05),
        out(
            concat!(
                r#"{"session_id":"s98","uuid":"u1","subtype":"init","type":"system"}"#, "\n",
                r#"{"message":{"content":[{"text":"Done.","type":"text"}]},"session_id":"s98","type":"assistant"}"#, "\n",
                r#"{"total_cost_usd":0.07,"result":"Done.","is_error":false,"session_id":"s98","subtype":"success","type":"result"}"#, "\n",
            ),
            ok(), S::StreamJson, O::Success, None,
        ).sid("s98").cost(0.07),
        out(
            r#"[{"session_id":"s99","subtype":"init","type":"system"},{"message":{"content":[{"text":"hi","type":"text"}]},"type":"assistant","session_id":"s99"},{"total_cost_usd":0.07,"result":"hi","is_error":false,"session_id":"s99","type":"result","subtype":"success"}]"#,
            ok(), S::MessageArray, O::Success, None,
        ).sid("s99").cost(0.07),
        out(
            r#"{"subagent_stats":"n/a","safety_stops":7,"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s100","total_cost_usd":0.01,"credential_expires_at":1795471200}"#,
            ok(), S::ResultObject, O::Success, None,
        ).sid("s100").cost(0.01).credential("2026-11-23T22:00:00Z"),
        out(
            r#"{"api_error":"future_kind","api_error_status":401,"is_error":true,"result":"API Error: 401 Unauthorized","session_id":"s101","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::Auth),
        ).sid("s101"),
        out(
            concat!(
                r#"{"uuid":"u1","session_id":"s102","type":"system","subtype":"init"}"#, "\n",
                r#"{"uuid":"u2","session_id":"s102","type":"assistant","message":{"content":[{"type":"text","text":"Work"#,
            ),
            RunFacts { timed_out: true, signal: Some(15), ..RunFacts::default() },
            S::Truncated, O::Timeout, None,
        ).sid("s102"),
        out(
            r#"{"api_error":"usage_limit_reached","api_error_params":{"rate_limit_info":{"status":"rejected","resetsAt":"1795500000"}},"is_error":true,"result":"You've hit your weekly limit","session_id":"s103","type":"result","subtype":"success"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::UsageLimit),
        ).sid("s103").reset("2026-11-24T06:00:00Z").window("seven_day"),
        out(
            r#"{"type":"result","subtype":"success","is_error":true,"result":"You've reached your usage limit · resets tomorrow at 9am","session_id":"s104"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::UsageLimit),
        ).sid("s104").reset("2026-11-23T08:00:00Z"),
        out(
            r#"{"type":"result","subtype":"success","is_error":true,"result":"grace_daily_limit_reached","session_id":"s105"}"#,
            fail(), S::ResultObject, O::AgentError, err(K::UsageLimit),
        ).sid("s105"),
        // ---- json / stream-json asked: only the client's JSON is an answer (issue 23).
        // Samples shaped like the peers' test data (ralph-claude-code, ralph-orchestrator's
        // cassettes, ralphex's delta streams) that read as a text success before.
        out("{not valid json}\n", ok(), S::Text, O::Crashed, err(K::Malformed)).asked(AskedFormat::Json),
        out("{ invalid json here }\n", ok(), S::Text, O::Crashed, err(K::Malformed)).asked(AskedFormat::Json),
        out("{ invalid json here }\n", ok(), S::Text, O::Crashed, err(K::Malformed)).asked(AskedFormat::StreamJson),
        out(
            concat!(
                r#"{"event":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#, "\n",
                r#"{"event":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}"#, "\n",
                r#"{"event":"message_stop"}"#, "\n",
            ),
            ok(), S::Text, O::Crashed, err(K::Malformed),
        ).asked(AskedFormat::StreamJson),
        out(
            concat!(
                r#"{"ts":0.12,"kind":"stdout","data":"Reading files"}"#, "\n",
                r#"{"ts":1.5,"kind":"stdout","data":"Done."}"#, "\n",
            ),
            ok(), S::Text, O::Crashed, err(K::Malformed),
        ).asked(AskedFormat::Json),
        out(
            concat!(
                r#"{"type":"text","text":"I updated the parser."}"#, "\n",
                r#"{"type":"tool_call","name":"write","args":{"path":"src/a.rs"}}"#, "\n",
            ),
            ok(), S::Text, O::Crashed, err(K::Malformed),
        ).asked(AskedFormat::StreamJson),
        out("All tasks done.\n", ok(), S::Text, O::Crashed, err(K::Malformed)).asked(AskedFormat::Json),
        // A stream cut before its result, every line whole.
        out(
            concat!(
                r#"{"type":"system","subtype":"init","session_id":"s120","uuid":"u1"}"#, "\n",
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Working"}]},"session_id":"s120","uuid":"u2"}"#, "\n",
            ),
            ok(), S::StreamJson, O::Crashed, err(K::Malformed),
        ).sid("s120").asked(AskedFormat::StreamJson),
        // A known error still wins over "malformed": in text and on stderr.
        out("", fail(), S::Empty, O::AgentError, err(K::CliUsage))
            .stderr("error: unknown option '--bogus'\n").asked(AskedFormat::Json),
        out("Not logged in · Please run /login\n", fail(), S::Text, O::AgentError, err(K::Auth))
            .asked(AskedFormat::Json),
        // A result after stray bytes is read (cost, session) but the answer is malformed.
        out(
            concat!(
                "npm WARN config something\n",
                r#"{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s121","total_cost_usd":5}"#, "\n",
            ),
            ok(), S::ResultObject, O::Crashed, err(K::Malformed),
        ).sid("s121").cost(5.0).asked(AskedFormat::Json),
        out(
            concat!(
                "ok",
                r#"{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s122","total_cost_usd":5}"#, "\n",
            ),
            ok(), S::ResultObject, O::Crashed, err(K::Malformed),
        ).sid("s122").cost(5.0).asked(AskedFormat::Json),
        out(
            concat!(
                r#"{"type":"system","subtype":"init","session_id":"s123"}"#, "\n",
                "debug: stray line\n",
                r#"{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s123","total_cost_usd":0.5}"#, "\n",
            ),
            ok(), S::StreamJson, O::Crashed, err(K::Malformed),
        ).sid("s123").cost(0.5).asked(AskedFormat::StreamJson),
        // A stray line before an error result: the error is what counts.
        out(
            concat!(
                "warning: something\n",
                r#"{"type":"result","subtype":"success","is_error":true,"result":"Invalid API key · Fix external API key","session_id":"s124","total_cost_usd":0}"#, "\n",
            ),
            fail(), S::ResultObject, O::AgentError, err(K::Auth),
        ).sid("s124").asked(AskedFormat::Json),
        // Recorded: 2.1.332 against the contract suite's fake API, asked for stream-json.
        file("v2332_stream_success.jsonl", ok(), S::StreamJson, O::Success, None)
            .sid("1631f38f-3a5f-4a60-b0ee-3234d6718665").cost(0.00108).asked(AskedFormat::StreamJson),
        // Clean answers are read the same in every mode.
        file("success.json", ok(), S::ResultObject, O::Success, None).sid(SID).cost(0.1123).asked(AskedFormat::Json),
        file("stream_success.jsonl", ok(), S::StreamJson, O::Success, None).sid(SID).cost(0.0923).asked(AskedFormat::StreamJson),
        file("success.json", ok(), S::ResultObject, O::Success, None).sid(SID).cost(0.1123).asked(AskedFormat::StreamJson),
        file("array_verbose.json", ok(), S::MessageArray, O::Success, None).sid(SID).cost(0.0923).asked(AskedFormat::Json),
        file("text_success.txt", ok(), S::Text, O::Success, None).asked(AskedFormat::Text),
        out("{ invalid json here }\n", ok(), S::Text, O::Success, None).asked(AskedFormat::Text),
    ]
}

#[test]
fn real_shaped_answers_table() {
    let rows = rows();
    assert!(rows.len() >= 60, "{} rows", rows.len());
    let clock = clock();
    for r in &rows {
        let a = analyze_as(&r.out[..], &r.err, &r.facts, &clock, r.asked);
        let n = &format!("{} (asked {})", r.name, r.asked.as_str());
        assert_eq!(a.shape, r.shape, "shape of {n}");
        assert_eq!(a.outcome, r.outcome, "outcome of {n}: {:?}", a.error);
        assert_eq!(a.error_kind(), r.kind, "kind of {n}: {:?}", a.error);
        let reset = a.error.as_ref().and_then(|e| e.reset_at);
        let want: Option<Timestamp> = r.reset.map(|s| s.parse().unwrap());
        assert_eq!(reset, want, "reset of {n}");
        let window = a.error.as_ref().and_then(|e| e.window.as_deref());
        assert_eq!(window, r.window, "window of {n}");
        assert_eq!(a.session_id.as_deref(), r.session, "session of {n}");
        assert_eq!(a.cost_usd, r.cost, "cost of {n}");
        let cred: Option<Timestamp> = r.credential.map(|s| s.parse().unwrap());
        assert_eq!(a.credential_expires_at, cred, "credential of {n}");
        assert_eq!(a.stdout_bytes, r.out.len() as u64, "bytes of {n}");
        if r.outcome == Outcome::Success {
            assert!(a.error.is_none(), "{n}");
        }
    }
}

#[test]
fn text_that_starts_like_json_keeps_its_whole_answer() {
    let a = analyzed(&fx("text_bracket_log.txt"), 0);
    assert!(
        a.summary.starts_with("[BUILD] ok\n[TEST] 42 passed"),
        "{}",
        a.summary
    );
    assert_eq!(a.output_len, fx("text_bracket_log.txt").len() as u64);
    let input = "[{\"id\":1},{\"id\":2}]\nThose are the rows.\n";
    let a = analyzed(input.as_bytes(), 0);
    assert_eq!(a.summary, input);
    let a = analyzed(&fx("text_json_snippet.txt"), 0);
    assert!(
        a.summary.starts_with("{\"name\": \"demo\""),
        "{}",
        a.summary
    );
}

#[test]
fn spend_limit_message_and_no_window() {
    let a = analyzed(&fx("v2330_spend_limit.json"), 1);
    let e = a.error.unwrap();
    assert_eq!(e.kind.as_str(), "spend_limit");
    assert!(e.message.contains("monthly spend limit"), "{}", e.message);
    assert_eq!(e.reset_at, None);
    assert_eq!(e.window, None);
    let v = serde_json::to_value(analyzed(&fx("v2330_usage_limit.json"), 1)).unwrap();
    assert_eq!(v["error"]["window"], "five_hour");
    assert_eq!(v["credential_expires_at"], "2026-11-22T20:00:00Z");
}

#[test]
fn without_a_local_zone_a_zoneless_reset_is_utc() {
    let now = clock().now;
    let a = analyze_bytes(&fx("text_old_limit.txt"), b"", &code(1), now);
    assert_eq!(
        a.error.unwrap().reset_at,
        Some("2026-11-23T02:00:00Z".parse().unwrap())
    );
}

#[test]
fn credential_expiry_in_every_form() {
    for (value, want) in [
        (json!(1_795_471_200), Some("2026-11-23T22:00:00Z")),
        (json!(1_795_471_200_000_u64), Some("2026-11-23T22:00:00Z")),
        (json!(1_795_471_200.5), Some("2026-11-23T22:00:00Z")),
        (json!("2026-11-23T22:00:00Z"), Some("2026-11-23T22:00:00Z")),
        (
            json!("2026-11-23T23:00:00+01:00"),
            Some("2026-11-23T22:00:00Z"),
        ),
        (json!("1795471200"), Some("2026-11-23T22:00:00Z")),
        (json!(0), None),
        (json!(-3), None),
        (json!("soon"), None),
        (json!(null), None),
        (json!({"at": 1}), None),
        (json!(1e300), None),
    ] {
        let obj = json!({"type":"result","subtype":"success","is_error":false,"result":"ok",
                         "session_id":"s","credential_expires_at": value});
        let a = analyzed(obj.to_string().as_bytes(), 0);
        let want: Option<Timestamp> = want.map(|s| s.parse().unwrap());
        assert_eq!(a.credential_expires_at, want, "{value}");
        assert_eq!(a.session_id.as_deref(), Some("s"), "{value}");
    }
}

/// Any JSON value (bounded depth).
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,20}".prop_map(Value::String),
        Just(Value::String(
            "You've hit your limit · resets 5am (Europe/Oslo)".into()
        )),
        Just(Value::String("usage_limit_reached".into())),
        Just(Value::String("rejected".into())),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-zA-Z_]{1,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const RESULT_KEYS: [&str; 22] = [
    "type",
    "subtype",
    "is_error",
    "result",
    "errors",
    "session_id",
    "uuid",
    "total_cost_usd",
    "usage",
    "num_turns",
    "duration_ms",
    "permission_denials",
    "api_error",
    "api_error_status",
    "api_error_type",
    "api_error_params",
    "terminal_reason",
    "credential_expires_at",
    "subagent_stats",
    "safety_stops",
    "rate_limit_info",
    "message",
];

/// A result-like object whose known keys hold random values of random types.
fn any_result_object() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        (proptest::sample::select(RESULT_KEYS.to_vec()), any_json()),
        0..14,
    )
    .prop_map(|pairs| {
        let mut m = serde_json::Map::new();
        for (k, v) in pairs {
            m.insert(k.to_owned(), v);
        }
        // `type` stays a result (a random `type` would make it something else).
        m.insert("type".into(), json!("result"));
        Value::Object(m).to_string()
    })
}

/// Texts built from limit wordings, times, zones and separators.
fn limit_text() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        Just("You've hit your ".to_owned()),
        Just("session limit".to_owned()),
        Just("5-hour limit".to_owned()),
        Just("weekly limit".to_owned()),
        Just("Opus limit".to_owned()),
        Just("monthly spend limit".to_owned()),
        Just("Session limit reached".to_owned()),
        Just(" · ".to_owned()),
        Just(" ∙ ".to_owned()),
        Just("resets ".to_owned()),
        Just("resets in ".to_owned()),
        Just("at ".to_owned()),
        Just("Mon ".to_owned()),
        Just("Nov 25, ".to_owned()),
        Just("tomorrow ".to_owned()),
        Just("(Europe/Amsterdam)".to_owned()),
        Just("(Nowhere/Zone)".to_owned()),
        Just("progress saved".to_owned()),
        Just("days ".to_owned()),
        Just("hours".to_owned()),
        (0u32..40, 0u32..70, proptest::bool::ANY)
            .prop_map(|(h, m, pm)| format!("{h}:{m:02}{} ", if pm { "pm" } else { "am" })),
        (0u64..100_000).prop_map(|n| format!("{n} ")),
        "\\PC{0,8}",
    ];
    proptest::collection::vec(part, 0..12).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn result_keys_of_any_type_never_panic(obj in any_result_object(), pretty in any::<bool>()) {
        let text = if pretty {
            serde_json::from_str::<Value>(&obj).map(|v| serde_json::to_string_pretty(&v).unwrap()).unwrap()
        } else {
            obj
        };
        let a = analyze_bytes_in(text.as_bytes(), text.as_bytes(), &code(1), &clock());
        prop_assert!(a.cost_usd.is_finite() && a.cost_usd >= 0.0);
        prop_assert!(a.cost_usd <= parse::MAX_CALL_COST_USD);
        prop_assert_eq!(a.stdout_bytes, text.len() as u64);
        // A complete JSON object of the client's is never taken for text or truncated.
        prop_assert_eq!(a.shape, OutputShape::ResultObject);
        // A stream or array of the same object parses too.
        let lines = format!("{text}\n{text}\n");
        let a = analyzed(lines.as_bytes(), 0);
        prop_assert!(a.cost_usd.is_finite() && a.cost_usd >= 0.0);
        let array = format!("[{text},{text}]");
        let a = analyzed(array.as_bytes(), 0);
        prop_assert_eq!(a.shape, OutputShape::MessageArray);
    }

    #[test]
    fn any_json_value_never_panics(v in any_json()) {
        let text = v.to_string();
        let a = analyzed(text.as_bytes(), 0);
        prop_assert_eq!(a.stdout_bytes, text.len() as u64);
        prop_assert!(a.cost_usd.is_finite() && a.cost_usd >= 0.0);
    }

    #[test]
    fn limit_wordings_never_panic_and_reset_in_the_future(text in limit_text(), where_ in 0u8..4) {
        let c = clock();
        let a = match where_ {
            0 => analyze_bytes_in(text.as_bytes(), b"", &code(1), &c),
            1 => analyze_bytes_in(b"", text.as_bytes(), &code(1), &c),
            2 => {
                let obj = json!({"type":"result","subtype":"success","is_error":true,"result":text});
                analyze_bytes_in(obj.to_string().as_bytes(), b"", &code(1), &c)
            }
            _ => {
                let obj = json!({"type":"result","subtype":"error_api","is_error":true,"errors":[text]});
                analyze_bytes_in(obj.to_string().as_bytes(), b"", &code(1), &c)
            }
        };
        if let Some(e) = &a.error {
            // Only the legacy `|<epoch>` form can name a past time.
            if let Some(at) = e.reset_at {
                prop_assert!(at >= c.now, "{text:?} → {at}");
            }
            if e.kind == ErrorKind::SpendLimit {
                prop_assert!(e.reset_at.is_none() && e.window.is_none());
            }
        }
        let _ = reset_in_line(&text, &c);
    }

    #[test]
    fn key_order_never_matters(order in Just((0..9).collect::<Vec<usize>>()).prop_shuffle()) {
        let pairs = [
            ("type", json!("result")),
            ("subtype", json!("success")),
            ("is_error", json!(true)),
            ("result", json!("You've hit your weekly limit · resets Mon 9am")),
            ("session_id", json!("s-order")),
            ("total_cost_usd", json!(0.5)),
            ("api_error", json!("usage_limit_reached")),
            ("api_error_params", json!({"rate_limit_info":{"status":"rejected","resetsAt":1_795_500_000,"rateLimitType":"seven_day"}})),
            ("credential_expires_at", json!(1_795_471_200)),
        ];
        let body: Vec<String> = order
            .iter()
            .map(|&i| format!("{}:{}", json!(pairs[i].0), pairs[i].1))
            .collect();
        let text = format!("{{{}}}", body.join(","));
        let a = analyzed(text.as_bytes(), 1);
        prop_assert_eq!(a.shape, OutputShape::ResultObject);
        prop_assert_eq!(a.error_kind(), Some(ErrorKind::UsageLimit));
        let e = a.error.unwrap();
        prop_assert_eq!(e.reset_at, Some("2026-11-24T06:00:00Z".parse().unwrap()));
        prop_assert_eq!(e.window.as_deref(), Some("seven_day"));
        prop_assert_eq!(a.session_id.as_deref(), Some("s-order"));
        prop_assert_eq!(a.cost_usd, 0.5);
        prop_assert_eq!(a.credential_expires_at, Some("2026-11-23T22:00:00Z".parse().unwrap()));
    }
}
