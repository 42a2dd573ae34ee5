//! A scripted fake of the Gemini API (`generativelanguage`, `v1beta`) for the contract cases
//! of gemini-cli (`agent_gemini.rs`): std only (`TcpListener` + threads), HTTP/1.1 with
//! keep-alive.
//!
//! Routes, as gemini-cli 0.61 calls them with `GOOGLE_GEMINI_BASE_URL`:
//! - `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` — a conversation turn. It takes
//!   the next [`Reply`] of the script (a plain IN_PROGRESS answer when the script is used up)
//!   and streams it the way the real API does: `text/event-stream`, chunked transfer encoding,
//!   one `data: <GenerateContentResponse>` event per chunk, a thought part first, the text in
//!   several pieces, the usage (`usageMetadata`) complete on the last chunk with
//!   `finishReason: STOP`. A tool call is one `functionCall` part.
//! - `POST /v1beta/models/<model>:generateContent` — gemini-cli's side requests (the model
//!   router's complexity classifier, JSON checks): a JSON answer fitting the request.
//! - `POST /v1beta/models/<model>:countTokens` — a count.
//! - anything else: a 404 `google.rpc.Status` body.
//!
//! Scripted errors are answered with the real API's error envelope,
//! `{"error":{"code","message","status","details":[…]}}`, e.g. 429 `RESOURCE_EXHAUSTED` with a
//! `google.rpc.QuotaFailure` and a `google.rpc.RetryInfo { retryDelay }`.
//!
//! Every request is logged (method, path, headers with the API key redacted, body) in memory
//! and, when asked, to a file.

#![allow(dead_code)]

use std::io;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use crate::http;
use serde_json::{Value, json};

/// One scripted answer to a streaming turn.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// A text answer (`finishReason: STOP`).
    Text(String),
    /// A function call, optionally after some text in the same answer; gemini-cli runs the
    /// tool and sends its result in the next turn.
    Tool {
        text: Option<String>,
        name: String,
        args: Value,
    },
    /// Sleeps this long before answering a plain text (a hung API).
    Hang(Duration),
    /// An HTTP error with a `google.rpc.Status` body (`{"error": …}`).
    Error(http::ApiError),
}

/// The real API's `RetryInfo` detail.
fn retry_info(secs: u64) -> Value {
    json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{secs}s")})
}

fn quota_message(limit: u32, model: &str, retry_secs: u64) -> String {
    format!(
        "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: https://ai.dev/usage?tab=rate-limit. \n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: {limit}, model: {model}\nPlease retry in {retry_secs}.537s."
    )
}

impl Reply {
    pub(crate) fn text(t: &str) -> Self {
        Self::Text(t.to_string())
    }

    pub(crate) fn tool(name: &str, args: Value) -> Self {
        Self::Tool {
            text: None,
            name: name.to_string(),
            args,
        }
    }

    /// Some text, then a function call, in one answer (what models usually do).
    pub(crate) fn tool_after(text: &str, name: &str, args: Value) -> Self {
        Self::Tool {
            text: Some(text.to_string()),
            name: name.to_string(),
            args,
        }
    }

    /// An error with `status`, the `google.rpc.Code` name `code` and `message`.
    pub(crate) fn error(status: u16, code: &str, message: &str) -> Self {
        let body = json!({"error": {"code": status, "message": message, "status": code}});
        Self::Error(http::ApiError::new(status, body))
    }

    /// The free tier's daily request quota is used up: 429 `RESOURCE_EXHAUSTED`, a
    /// `QuotaFailure` whose quota id is per day, and a `RetryInfo` (gemini-cli treats any
    /// per-day quota as terminal, whatever the retry delay).
    pub(crate) fn daily_quota(model: &str, retry_secs: u64) -> Self {
        Self::quota(
            model,
            50,
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            retry_secs,
        )
    }

    /// A per-minute rate limit: the same 429 envelope with a per-minute quota id and a short
    /// `RetryInfo` (gemini-cli retries it itself, with backoff, up to `general.maxAttempts`).
    pub(crate) fn per_minute_limit(model: &str, retry_secs: u64) -> Self {
        Self::quota(
            model,
            5,
            "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            retry_secs,
        )
    }

    /// A model the key's tier cannot use at all: the same 429 envelope with `limit: 0`
    /// (gemini-cli treats it as terminal).
    pub(crate) fn zero_quota(model: &str) -> Self {
        Self::quota(
            model,
            0,
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            40,
        )
    }

    fn quota(model: &str, limit: u32, quota_id: &str, retry_secs: u64) -> Self {
        let body = json!({"error": {
            "code": 429,
            "message": quota_message(limit, model, retry_secs),
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{
                        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                        "quotaId": quota_id,
                        "quotaDimensions": {"location": "global", "model": model},
                        "quotaValue": limit.to_string()
                    }]
                },
                {
                    "@type": "type.googleapis.com/google.rpc.Help",
                    "links": [{"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]
                },
                retry_info(retry_secs)
            ]
        }});
        Self::Error(http::ApiError::new(429, body))
    }

    /// A wrong API key: 400 `INVALID_ARGUMENT` with `ErrorInfo { reason: API_KEY_INVALID }`.
    pub(crate) fn invalid_api_key() -> Self {
        let message = "API key not valid. Please pass a valid API key.";
        Self::Error(http::ApiError::new(
            400,
            json!({"error": {
                "code": 400,
                "message": message,
                "status": "INVALID_ARGUMENT",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "API_KEY_INVALID",
                        "domain": "googleapis.com",
                        "metadata": {"service": "generativelanguage.googleapis.com"}
                    },
                    {
                        "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
                        "locale": "en-US",
                        "message": message
                    }
                ]
            }}),
        ))
    }

    /// The model is overloaded: 503 `UNAVAILABLE`.
    pub(crate) fn overloaded() -> Self {
        Self::error(
            503,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
        )
    }
}

/// The Gemini API ([`http::Provider`]); `http::Fake<Gemini>` is the running fake, its
/// `url()` the value for `GOOGLE_GEMINI_BASE_URL`.
pub(crate) enum Gemini {}

impl http::Provider for Gemini {
    type Reply = Reply;
    const BASE_PATH: &'static str = "";

    /// A streaming conversation turn.
    fn is_turn(req: &http::Request<Gemini>) -> bool {
        req.method == "POST" && req.rpc() == "streamGenerateContent"
    }

    /// The text of the newest user message (its text parts joined). A user message holding
    /// only function responses has no text.
    fn last_user_text(req: &http::Request<Gemini>) -> String {
        match req.conversation().last() {
            Some((role, text)) if role == "user" => text.clone(),
            _ => String::new(),
        }
    }

    fn unscripted() -> Reply {
        Reply::Text(http::status_text("IN_PROGRESS", false, "unscripted turn"))
    }

    fn respond(s: &Shared, req: &http::Request<Self>, out: &mut TcpStream) -> io::Result<()> {
        let model = req.model().to_string();
        let send = |out: &mut TcpStream, bytes: Vec<u8>| http::send(out, &bytes);
        if req.method != "POST" || !req.path.starts_with("/v1beta/models/") {
            let body = json!({"error": {"code": 404, "message": format!("Requested entity was not found: {}", req.path), "status": "NOT_FOUND"}});
            return send(out, json_response(404, &body));
        }
        let id = s.next_id();
        match req.rpc() {
            "countTokens" => {
                let n = req.text().len() / 4;
                send(out, json_response(200, &json!({"totalTokens": n})))
            }
            "generateContent" => send(out, json_response(200, &side_answer(req, &model, id))),
            "streamGenerateContent" => match s.next_reply() {
                Reply::Error(e) => send(out, e.response(JSON_HEADERS)),
                Reply::Hang(d) => {
                    std::thread::sleep(d);
                    stream(out, &model, id, Some("late"), None)
                }
                Reply::Text(text) => stream(out, &model, id, Some(&text), None),
                Reply::Tool { text, name, args } => {
                    stream(out, &model, id, text.as_deref(), Some((&name, &args)))
                }
            },
            other => {
                let body = json!({"error": {"code": 404, "message": format!("Method not found: {other}"), "status": "NOT_FOUND"}});
                send(out, json_response(404, &body))
            }
        }
    }
}

impl http::Request<Gemini> {
    /// The model named in the path (`models/<model>:<method>`).
    pub(crate) fn model(&self) -> &str {
        self.path
            .split("/models/")
            .nth(1)
            .and_then(|rest| rest.split(':').next())
            .unwrap_or("")
    }

    /// The method after the colon (`streamGenerateContent`, `generateContent`, `countTokens`).
    pub(crate) fn rpc(&self) -> &str {
        self.path
            .split("/models/")
            .nth(1)
            .and_then(|rest| rest.split(':').nth(1))
            .map_or("", |m| m.split('?').next().unwrap_or(""))
    }

    /// The conversation (`contents`) as `(role, text of every text part)`.
    pub(crate) fn conversation(&self) -> Vec<(String, String)> {
        self.body["contents"]
            .as_array()
            .map(|c| {
                c.iter()
                    .map(|m| {
                        let role = m["role"].as_str().unwrap_or("").to_string();
                        (role, http::parts_text(&m["parts"]))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The function responses in the newest message (`(name, response)`).
    pub(crate) fn function_responses(&self) -> Vec<(String, Value)> {
        self.body["contents"]
            .as_array()
            .and_then(|c| c.last())
            .and_then(|m| m["parts"].as_array())
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| {
                        let f = p.get("functionResponse")?;
                        Some((
                            f["name"].as_str().unwrap_or("").to_string(),
                            f["response"].clone(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

type Shared = http::Scripted<Gemini>;

/// The headers of a JSON answer (an error's too).
const JSON_HEADERS: &str = "content-type: application/json; charset=UTF-8\r\nvary: Origin, X-Origin, Referer\r\nserver: scaffolding on HTTPServer2\r\n";

fn json_response(status: u16, body: &Value) -> Vec<u8> {
    http::response(status, JSON_HEADERS, &[], body.to_string().as_bytes())
}

/// The answer to a non-streaming `generateContent`: gemini-cli's model router asks for a
/// `{complexity_reasoning, complexity_score}` object, other JSON checks for the fields their
/// schema requires; anything else gets a short text.
fn side_answer(req: &http::Request<Gemini>, model: &str, id: u64) -> Value {
    let body = req.text();
    let text = if body.contains("complexity_score") {
        json!({"complexity_reasoning": "A routine, single-step change.", "complexity_score": 25})
            .to_string()
    } else if body.contains("next_speaker") {
        json!({"reasoning": "The model finished its turn.", "next_speaker": "user"}).to_string()
    } else {
        "OK".to_string()
    };
    json!({
        "candidates": [{
            "content": {"parts": [{"text": text}], "role": "model"},
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {"promptTokenCount": 812, "candidatesTokenCount": 21, "totalTokenCount": 833},
        "modelVersion": model,
        "responseId": format!("fake-side-{id}")
    })
}

/// Prompt, answer, thought and cached token counts of every streamed answer.
pub(crate) const PROMPT_TOKENS: u64 = 9210;
pub(crate) const CACHED_TOKENS: u64 = 4096;
pub(crate) const ANSWER_TOKENS: u64 = 57;
pub(crate) const THOUGHT_TOKENS: u64 = 31;

/// Streams one answer: a thought part, the text in pieces, then the function call if any;
/// the last event carries `finishReason: STOP` and the whole usage.
fn stream(
    out: &mut TcpStream,
    model: &str,
    id: u64,
    text: Option<&str>,
    call: Option<(&str, &Value)>,
) -> std::io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-disposition: attachment\r\nvary: Origin, X-Origin, Referer\r\ntransfer-encoding: chunked\r\nserver: scaffolding on HTTPServer2\r\nconnection: keep-alive\r\n\r\n";
    out.write_all(head.as_bytes())?;
    let mut parts_per_event: Vec<Vec<Value>> = vec![vec![
        json!({"text": "**Planning the step**\n\nI will do what the prompt asks.", "thought": true}),
    ]];
    if let Some(t) = text {
        for piece in split_in_three(t) {
            parts_per_event.push(vec![json!({"text": piece})]);
        }
    }
    if let Some((name, args)) = call {
        parts_per_event.push(vec![json!({"functionCall": {"name": name, "args": args}})]);
    }
    let last = parts_per_event.len() - 1;
    for (i, parts) in parts_per_event.into_iter().enumerate() {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        let usage = if i == last {
            candidate["finishReason"] = json!("STOP");
            json!({
                "promptTokenCount": PROMPT_TOKENS,
                "candidatesTokenCount": ANSWER_TOKENS,
                "totalTokenCount": PROMPT_TOKENS + ANSWER_TOKENS + THOUGHT_TOKENS,
                "cachedContentTokenCount": CACHED_TOKENS,
                "thoughtsTokenCount": THOUGHT_TOKENS,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": PROMPT_TOKENS}],
                "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": CACHED_TOKENS}]
            })
        } else {
            json!({"promptTokenCount": PROMPT_TOKENS, "totalTokenCount": PROMPT_TOKENS,
                   "promptTokensDetails": [{"modality": "TEXT", "tokenCount": PROMPT_TOKENS}]})
        };
        let event = json!({
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": format!("fakeResp{id}")
        });
        http::send_chunk(out, format!("data: {event}\r\n\r\n").as_bytes())?;
    }
    http::send(out, b"0\r\n\r\n")
}

/// Splits on char boundaries into up to three pieces (so the client must join them).
fn split_in_three(s: &str) -> Vec<String> {
    let mut cuts = vec![0];
    for k in 1..3 {
        let mut at = s.len() * k / 3;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        cuts.push(at);
    }
    cuts.push(s.len());
    cuts.dedup();
    cuts.windows(2)
        .map(|w| s[w[0]..w[1]].to_string())
        .filter(|p| !p.is_empty())
        .collect()
}
