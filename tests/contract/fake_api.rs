//! A scripted fake of the Anthropic Messages API for the real-client contract tests
//! (`contract.rs`): std only (`TcpListener` + threads), HTTP/1.1 with keep-alive.
//!
//! `POST /v1/messages` with `"stream": true` is answered with server-sent events exactly as the
//! real API streams them (`message_start`, `content_block_start`, `content_block_delta` with
//! `text_delta` / `input_json_delta`, `content_block_stop`, `message_delta` with the stop reason
//! and usage, `message_stop`). Each streaming request takes the next [`Reply`] of the script;
//! when the script is used up, a plain IN_PROGRESS answer is given. Non-streaming message
//! requests get a short text message, `count_tokens` a count, anything else a 404 JSON error.
//! Every request is logged (method, path, headers with secrets redacted, body) in memory and
//! to a file, to debug what the client sent.

#![allow(dead_code)]

use std::io;
use std::net::TcpStream;
use std::time::Duration;

use crate::http;
use serde_json::{Value, json};

/// One scripted answer to a streaming `POST /v1/messages`.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// A text answer, `stop_reason: end_turn`.
    Text(String),
    /// One tool call (`stop_reason: tool_use`); the client runs it and asks again.
    Tool { name: String, input: Value },
    /// Sleeps this long before answering a plain text (a hung API).
    Hang(Duration),
    /// An HTTP error with an API error body (`{"type":"error","error":{type,message}}`) and
    /// extra response headers.
    Error {
        status: u16,
        kind: String,
        message: String,
        headers: Vec<(String, String)>,
    },
    /// Another reply with extra response headers (e.g. the unified rate-limit headers the
    /// real API sends on every answer to a subscription).
    Headed {
        headers: Vec<(String, String)>,
        reply: Box<Reply>,
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

    pub(crate) fn error(status: u16, kind: &str, message: &str) -> Self {
        Self::Error {
            status,
            kind: kind.to_string(),
            message: message.to_string(),
            headers: Vec::new(),
        }
    }

    /// A subscription usage limit: 429 with the `anthropic-ratelimit-unified-*` headers
    /// (honoured by the client only with OAuth auth, i.e. `CLAUDE_CODE_OAUTH_TOKEN`).
    pub(crate) fn usage_limit(reset_epoch: i64, claim: &str) -> Self {
        let reset = reset_epoch.to_string();
        let mut headers = vec![
            (
                "anthropic-ratelimit-unified-status".into(),
                "rejected".into(),
            ),
            ("anthropic-ratelimit-unified-reset".into(), reset.clone()),
            (
                "anthropic-ratelimit-unified-representative-claim".into(),
                claim.into(),
            ),
        ];
        let window = if claim == "seven_day" { "7d" } else { "5h" };
        headers.push((
            format!("anthropic-ratelimit-unified-{window}-status"),
            "rejected".into(),
        ));
        headers.push((format!("anthropic-ratelimit-unified-{window}-reset"), reset));
        Self::Error {
            status: 429,
            kind: "rate_limit_error".into(),
            message: "Rate limited".into(),
            headers,
        }
    }
}

/// The `anthropic-ratelimit-unified-*` headers the API sends with an answer that is allowed:
/// the overall status, the representative window and, per window (`5h`, `7d`), its
/// utilization (0–1), reset (epoch seconds) and status.
pub(crate) fn unified_windows(windows: &[(&str, f64, i64)]) -> Vec<(String, String)> {
    let status_of = |u: f64| {
        if u >= 1.0 {
            "rejected"
        } else if u >= 0.8 {
            "allowed_warning"
        } else {
            "allowed"
        }
    };
    let worst = windows
        .iter()
        .copied()
        .fold(None::<(&str, f64, i64)>, |acc, w| match acc {
            Some(a) if a.1 >= w.1 => Some(a),
            _ => Some(w),
        });
    let mut h: Vec<(String, String)> = Vec::new();
    if let Some((abbr, u, reset)) = worst {
        let claim = if abbr == "7d" {
            "seven_day"
        } else {
            "five_hour"
        };
        h.push((
            "anthropic-ratelimit-unified-status".into(),
            status_of(u).into(),
        ));
        h.push((
            "anthropic-ratelimit-unified-reset".into(),
            reset.to_string(),
        ));
        h.push((
            "anthropic-ratelimit-unified-representative-claim".into(),
            claim.into(),
        ));
    }
    for &(abbr, u, reset) in windows {
        h.push((
            format!("anthropic-ratelimit-unified-{abbr}-utilization"),
            u.to_string(),
        ));
        h.push((
            format!("anthropic-ratelimit-unified-{abbr}-reset"),
            reset.to_string(),
        ));
        h.push((
            format!("anthropic-ratelimit-unified-{abbr}-status"),
            status_of(u).into(),
        ));
    }
    h
}

/// The Anthropic Messages API ([`http::Provider`]); `http::Fake<Anthropic>` is the running
/// fake, its `url()` the value for `ANTHROPIC_BASE_URL`.
pub(crate) enum Anthropic {}

impl http::Provider for Anthropic {
    type Reply = Reply;
    const BASE_PATH: &'static str = "";

    /// A streaming `POST /v1/messages` (the conversation turns).
    fn is_turn(req: &http::Request<Anthropic>) -> bool {
        req.method == "POST"
            && req.path.starts_with("/v1/messages")
            && !req.path.contains("count_tokens")
            && req.body["stream"] == true
    }

    /// Every text block of the newest user message, joined. Messages after it with another
    /// role that the client adds itself (2.1.330 appends a `role: system` message with skills
    /// and the date) are skipped.
    fn last_user_text(req: &http::Request<Anthropic>) -> String {
        let last = req.body["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] != "system"));
        match last {
            Some(m) if m["role"] == "user" => http::parts_text(&m["content"]),
            _ => String::new(),
        }
    }

    fn unscripted() -> Reply {
        Reply::Text(status_text("IN_PROGRESS", false, "unscripted turn"))
    }

    fn respond(s: &Shared, req: &http::Request<Self>, out: &mut TcpStream) -> io::Result<()> {
        let model = req.body_model("claude-fake");
        if req.method == "POST" && req.path.starts_with("/v1/messages/count_tokens") {
            return http::send(
                out,
                &http(200, "application/json", &[], br#"{"input_tokens":100}"#),
            );
        }
        if req.method != "POST" || !req.path.starts_with("/v1/messages") {
            let body = json!({"type": "error", "error": {"type": "not_found_error", "message": format!("no route {}", req.path)}});
            return http::send(
                out,
                &http(404, "application/json", &[], body.to_string().as_bytes()),
            );
        }
        let id = s.next_id();
        if !req.is_turn() {
            let body = json!({
                "id": format!("msg_fake{id}"), "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": "Fake title"}], "stop_reason": "end_turn",
                "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 3}
            });
            return http::send(
                out,
                &http(200, "application/json", &[], body.to_string().as_bytes()),
            );
        }
        http::send(out, &answer(id, &model, s.next_reply(), &[]))
    }
}

type Shared = http::Scripted<Anthropic>;

fn http(status: u16, content_type: &str, extra: &[(String, String)], body: &[u8]) -> Vec<u8> {
    let headers = format!("content-type: {content_type}\r\nrequest-id: req_fake\r\n");
    http::response(status, &headers, extra, body)
}

fn answer(id: u64, model: &str, reply: Reply, extra: &[(String, String)]) -> Vec<u8> {
    match reply {
        Reply::Headed { headers, reply } => {
            let mut all = extra.to_vec();
            all.extend(headers);
            answer(id, model, *reply, &all)
        }
        Reply::Hang(d) => {
            std::thread::sleep(d);
            let block = json!({"type": "text", "text": ""});
            let deltas = vec![json!({"type": "text_delta", "text": "late"})];
            sse(id, model, block, deltas, "end_turn", extra)
        }
        Reply::Error {
            status,
            kind,
            message,
            headers,
        } => {
            let body = json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"});
            let mut all = extra.to_vec();
            all.extend(headers);
            http(
                status,
                "application/json",
                &all,
                body.to_string().as_bytes(),
            )
        }
        Reply::Text(text) => {
            let block = json!({"type": "text", "text": ""});
            let deltas = http::split_in_two(&text)
                .into_iter()
                .map(|t| json!({"type": "text_delta", "text": t}))
                .collect();
            sse(id, model, block, deltas, "end_turn", extra)
        }
        Reply::Tool { name, input } => {
            let block = json!({"type": "tool_use", "id": format!("toolu_fake{id}"), "name": name, "input": {}});
            let deltas = http::split_in_two(&input.to_string())
                .into_iter()
                .map(|t| json!({"type": "input_json_delta", "partial_json": t}))
                .collect();
            sse(id, model, block, deltas, "tool_use", extra)
        }
    }
}

fn sse(
    id: u64,
    model: &str,
    block: Value,
    deltas: Vec<Value>,
    stop: &str,
    extra: &[(String, String)],
) -> Vec<u8> {
    let mut events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {
                "id": format!("msg_fake{id}"), "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 120, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}
            }}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": block}),
        ),
        ("ping", json!({"type": "ping"})),
    ];
    for d in deltas {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": d}),
        ));
    }
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 30}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let body: String = events
        .into_iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    let mut headers = vec![("cache-control".to_string(), "no-cache".to_string())];
    headers.extend_from_slice(extra);
    http(
        200,
        "text/event-stream; charset=utf-8",
        &headers,
        body.as_bytes(),
    )
}

/// An answer ending with a HANK_STATUS block.
pub(crate) fn status_text(status: &str, exit_signal: bool, recommendation: &str) -> String {
    http::status_block(
        "Done with this step.",
        "NOT_RUN",
        status,
        exit_signal,
        recommendation,
    )
}
