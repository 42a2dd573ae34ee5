//! A scripted fake of the OpenAI **Chat Completions** API for the contract cases of agent CLIs
//! that speak it (opencode through its bundled `@ai-sdk/openai-compatible` provider): std only
//! (`TcpListener` + threads), HTTP/1.1 with keep-alive.
//!
//! `POST /v1/chat/completions` with `"stream": true` is answered the way the real API streams:
//! `text/event-stream` sent with chunked transfer encoding, one `data: {chat.completion.chunk}`
//! event per delta (the role first, then the content or the `tool_calls` deltas with the
//! arguments split in two, then the `finish_reason`), a last chunk with empty `choices` and the
//! `usage` (asked for with `stream_options.include_usage`), and `data: [DONE]`.
//!
//! A request that offers `tools` is a conversation turn and takes the next [`Reply`] of the
//! script (a plain IN_PROGRESS answer when the script is used up). A request without tools is a
//! side call (opencode's title generator) and gets a short title without touching the script,
//! so the order of the script never depends on whether the client asked for a title.
//! `GET /v1/models` lists one model; anything else is a 404 in the API's error shape.
//! Every request is logged (method, path, headers with secrets redacted, body) in memory and
//! to a file, to debug what the client sent.

#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::http;
use serde_json::{Value, json};

/// `usage.prompt_tokens` of every streamed answer (cached tokens included, as the API counts).
pub(crate) const PROMPT_TOKENS: u64 = 1200;
/// `usage.prompt_tokens_details.cached_tokens` of every streamed answer.
pub(crate) const CACHED_TOKENS: u64 = 200;
/// `usage.completion_tokens` of every streamed answer.
pub(crate) const COMPLETION_TOKENS: u64 = 40;

/// One scripted answer to a conversation turn.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// A text answer, `finish_reason: stop`.
    Text(String),
    /// One function call (`finish_reason: tool_calls`); the client runs it and asks again.
    Tool { name: String, input: Value },
    /// Sleeps this long, then answers a short text (a hung API).
    Hang(Duration),
    /// An HTTP error: the status, the JSON body and extra response headers.
    Error {
        status: u16,
        body: Value,
        headers: Vec<(String, String)>,
    },
}

impl Reply {
    pub(crate) fn text(t: &str) -> Self {
        Self::Text(t.to_string())
    }

    pub(crate) fn tool(name: &str, input: Value) -> Self {
        Self::Tool {
            name: name.to_string(),
            input,
        }
    }

    /// An error in the API's shape: `{"error": {message, type, param, code}}`.
    pub(crate) fn error(status: u16, kind: &str, code: Option<&str>, message: &str) -> Self {
        Self::Error {
            status,
            body: json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
            headers: Vec::new(),
        }
    }

    /// 429 `insufficient_quota`: the account's credits or monthly budget are used up.
    pub(crate) fn quota() -> Self {
        Self::error(
            429,
            "insufficient_quota",
            Some("insufficient_quota"),
            "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
        )
    }

    /// 429 `rate_limit_exceeded` (tokens per minute), with the API's rate-limit headers and
    /// `retry-after`.
    pub(crate) fn rate_limit(retry_after_secs: u64) -> Self {
        let Self::Error { status, body, .. } = Self::error(
            429,
            "tokens",
            Some("rate_limit_exceeded"),
            &format!(
                "Rate limit reached for fake-model in organization org-fake on tokens per min (TPM): Limit 30000, Used 29800, Requested 1200. Please try again in {retry_after_secs}s. Visit https://platform.openai.com/account/rate-limits to learn more."
            ),
        ) else {
            unreachable!()
        };
        Self::Error {
            status,
            body,
            headers: vec![
                ("retry-after".into(), retry_after_secs.to_string()),
                ("x-ratelimit-limit-tokens".into(), "30000".into()),
                ("x-ratelimit-remaining-tokens".into(), "200".into()),
                (
                    "x-ratelimit-reset-tokens".into(),
                    format!("{retry_after_secs}s"),
                ),
            ],
        }
    }

    /// Adds a response header to an [`Reply::Error`] (e.g. `retry-after-ms`, which opencode
    /// waits for between its retries).
    pub(crate) fn with_header(self, name: &str, value: &str) -> Self {
        match self {
            Self::Error {
                status,
                body,
                mut headers,
            } => {
                headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
                headers.push((name.to_string(), value.to_string()));
                Self::Error {
                    status,
                    body,
                    headers,
                }
            }
            other => other,
        }
    }
}

/// A request as the fake received it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub method: String,
    pub path: String,
    /// Lower-case names; `authorization` / `api-key` / `cookie` values are redacted.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Value::Null` when absent or not JSON).
    pub body: Value,
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

impl Request {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn is_chat(&self) -> bool {
        self.method == "POST" && self.path.ends_with("/chat/completions")
    }

    /// A conversation turn: a chat completion that offers tools.
    pub(crate) fn is_turn(&self) -> bool {
        self.is_chat() && self.body["tools"].as_array().is_some_and(|t| !t.is_empty())
    }

    /// A side call without tools (the client's title generator).
    pub(crate) fn is_side_call(&self) -> bool {
        self.is_chat() && !self.is_turn()
    }

    /// The whole body as text (for `contains` checks).
    pub(crate) fn text(&self) -> String {
        self.body.to_string()
    }

    /// The text of every message with `role`, in order.
    pub(crate) fn message_texts(&self, role: &str) -> Vec<String> {
        self.body["messages"]
            .as_array()
            .map(|m| {
                m.iter()
                    .filter(|m| m["role"] == role)
                    .map(|m| content_text(&m["content"]))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The text of the newest message if it is the user's (what this turn added), else "".
    pub(crate) fn last_user_text(&self) -> String {
        let last = self.body["messages"].as_array().and_then(|m| m.last());
        match last {
            Some(m) if m["role"] == "user" => content_text(&m["content"]),
            _ => String::new(),
        }
    }

    /// The results of tool calls the client sent back (`role: tool` messages).
    pub(crate) fn tool_results(&self) -> Vec<String> {
        self.message_texts("tool")
    }

    /// The names of the tools offered.
    pub(crate) fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The `<hank-loop-context>` block this turn's newest user message starts a loop with,
    /// if it does (the first request of each hank loop).
    pub(crate) fn loop_context(&self) -> Option<String> {
        let text = self.last_user_text();
        let start = text.find("<hank-loop-context>")? + "<hank-loop-context>".len();
        let end = text[start..].find("</hank-loop-context>")? + start;
        Some(text[start..end].trim().to_string())
    }
}

/// The running fake; stops accepting when dropped.
pub(crate) struct FakeOpenAiChat {
    fake: http::Fake<Reply, Request>,
}

impl std::ops::Deref for FakeOpenAiChat {
    type Target = http::Fake<Reply, Request>;
    fn deref(&self) -> &Self::Target {
        &self.fake
    }
}

impl http::Turn for Request {
    fn is_turn(&self) -> bool {
        Request::is_turn(self)
    }
}

type Shared = http::Scripted<Reply, Request>;

impl FakeOpenAiChat {
    /// Starts on 127.0.0.1 (a free port) with `script`; logs requests to `log_file` too.
    pub(crate) fn start(script: Vec<Reply>, log_file: Option<&Path>) -> Self {
        let read = |i: http::Incoming| Request {
            method: i.method,
            path: i.path,
            headers: i.headers,
            body: i.body,
        };
        Self {
            fake: http::Fake::start("the fake API", script, log_file, read, respond),
        }
    }

    /// The base URL clients take (`…/v1`).
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.fake.addr())
    }
}

/// A whole response with a `content-length`.
fn http(status: u16, extra: &[(String, String)], body: &Value) -> Vec<u8> {
    let headers = "content-type: application/json\r\nx-request-id: req_fake\r\n";
    http::response(status, headers, extra, body.to_string().as_bytes())
}

fn respond(s: &Shared, req: &Request, out: &mut impl Write) -> std::io::Result<()> {
    let model = req.body["model"]
        .as_str()
        .unwrap_or("fake-model")
        .to_string();
    if req.method == "GET" && req.path.ends_with("/models") {
        let body = json!({"object": "list", "data": [
            {"id": "fake-model", "object": "model", "created": 1_700_000_000, "owned_by": "hank-contract"}
        ]});
        return write_all(out, &http(200, &[], &body));
    }
    if !req.is_chat() {
        let body = json!({"error": {"message": format!("Unknown request URL: {} {}", req.method, req.path), "type": "invalid_request_error", "param": null, "code": "unknown_url"}});
        return write_all(out, &http(404, &[], &body));
    }
    let id = s.next_id();
    let stream = req.body["stream"] == true;
    let reply = if req.is_turn() {
        s.next_reply()
            .unwrap_or_else(|| Reply::Text(status_text("IN_PROGRESS", false, "unscripted turn")))
    } else {
        Reply::text("Fake session title")
    };
    let text = match reply {
        Reply::Error {
            status,
            body,
            headers,
        } => return write_all(out, &http(status, &headers, &body)),
        Reply::Hang(d) => {
            std::thread::sleep(d);
            "late answer".to_string()
        }
        Reply::Text(t) => t,
        Reply::Tool { name, input } => {
            let call_id = format!("call_fake{id}");
            if !stream {
                let body = completion(
                    id,
                    &model,
                    json!({"role": "assistant", "content": null,
                    "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": input.to_string()}}]}),
                    "tool_calls",
                );
                return write_all(out, &http(200, &[], &body));
            }
            let args = input.to_string();
            let mut deltas = vec![
                json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            ];
            for part in split_in_two(&args) {
                deltas.push(json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}));
            }
            return stream_chunks(out, id, &model, deltas, "tool_calls");
        }
    };
    if !stream {
        let body = completion(
            id,
            &model,
            json!({"role": "assistant", "content": text}),
            "stop",
        );
        return write_all(out, &http(200, &[], &body));
    }
    let deltas = split_in_two(&text)
        .into_iter()
        .map(|t| json!({"content": t}))
        .collect();
    stream_chunks(out, id, &model, deltas, "stop")
}

fn write_all(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    out.write_all(bytes)?;
    out.flush()
}

fn usage() -> Value {
    json!({
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
        "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
        "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
    })
}

/// A non-streaming `chat.completion` object.
fn completion(id: u64, model: &str, message: Value, finish: &str) -> Value {
    json!({
        "id": format!("chatcmpl-fake{id}"), "object": "chat.completion", "created": 1_700_000_000,
        "model": model, "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": usage()
    })
}

/// Streams `deltas` as `chat.completion.chunk` events, one HTTP chunk each.
fn stream_chunks(
    out: &mut impl Write,
    id: u64,
    model: &str,
    deltas: Vec<Value>,
    finish: &str,
) -> std::io::Result<()> {
    write_all(
        out,
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\ncache-control: no-cache\r\nx-request-id: req_fake\r\nconnection: keep-alive\r\n\r\n",
    )?;
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({
            "id": format!("chatcmpl-fake{id}"), "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": model, "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            "usage": null
        })
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        None,
    )];
    events.extend(deltas.into_iter().map(|d| chunk(d, None)));
    events.push(chunk(json!({}), Some(finish)));
    events.push(json!({
        "id": format!("chatcmpl-fake{id}"), "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": model, "system_fingerprint": "fp_fake", "choices": [], "usage": usage()
    }));
    for e in events {
        send_chunk(out, format!("data: {e}\n\n").as_bytes())?;
    }
    send_chunk(out, b"data: [DONE]\n\n")?;
    write_all(out, b"0\r\n\r\n")
}

fn send_chunk(out: &mut impl Write, data: &[u8]) -> std::io::Result<()> {
    let mut bytes = format!("{:x}\r\n", data.len()).into_bytes();
    bytes.extend_from_slice(data);
    bytes.extend_from_slice(b"\r\n");
    write_all(out, &bytes)
}

/// Splits on a char boundary near the middle (so the client must join deltas).
fn split_in_two(s: &str) -> Vec<String> {
    let mut mid = s.len() / 2;
    while !s.is_char_boundary(mid) {
        mid -= 1;
    }
    vec![s[..mid].to_string(), s[mid..].to_string()]
}

/// An answer ending with a HANK_STATUS block.
pub(crate) fn status_text(status: &str, exit_signal: bool, recommendation: &str) -> String {
    format!(
        "Worked on the next item.\n\n---HANK_STATUS---\nSTATUS: {status}\nTASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 1\nTESTS_STATUS: PASSING\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: {exit_signal}\nRECOMMENDATION: {recommendation}\n---END_HANK_STATUS---"
    )
}
