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

use std::io;
use std::io::Write;
use std::net::TcpStream;

use crate::fake_openai::{CACHED_TOKENS, INPUT_TOKENS, JSON_HEADERS, OUTPUT_TOKENS, Reply};
use crate::http;
use serde_json::{Value, json};

/// The OpenAI Chat Completions API ([`http::Provider`]); `http::Fake<OpenAiChat>` is the
/// running fake, its `url()` the base URL clients take (`…/v1`).
pub(crate) enum OpenAiChat {}

impl http::Provider for OpenAiChat {
    type Reply = Reply;
    const BASE_PATH: &'static str = "/v1";

    /// A conversation turn: a chat completion that offers tools.
    fn is_turn(req: &http::Request<OpenAiChat>) -> bool {
        is_chat(req) && req.body["tools"].as_array().is_some_and(|t| !t.is_empty())
    }

    /// The text of the newest message if it is the user's, else "".
    fn last_user_text(req: &http::Request<OpenAiChat>) -> String {
        let last = req.body["messages"].as_array().and_then(|m| m.last());
        match last {
            Some(m) if m["role"] == "user" => http::parts_text(&m["content"]),
            _ => String::new(),
        }
    }

    fn unscripted() -> Reply {
        Reply::Text(http::status_text("IN_PROGRESS", false, "unscripted turn"))
    }

    fn respond(s: &Shared, req: &http::Request<Self>, out: &mut TcpStream) -> io::Result<()> {
        respond_chat(s, req, out, "Fake session title")
    }
}

/// Aider's use of the Chat Completions API: it offers the model no tools (the model answers
/// with SEARCH/REPLACE blocks in its text), so every chat completion is a turn but aider's
/// commit-message request, which gets [`COMMIT_SUBJECT`] without touching the script.
pub(crate) enum AiderChat {}

impl http::Provider for AiderChat {
    type Reply = Reply;
    const BASE_PATH: &'static str = "/v1";

    fn is_turn(req: &http::Request<AiderChat>) -> bool {
        is_chat(req) && !is_commit_message(req)
    }

    /// The text of the newest user message.
    fn last_user_text(req: &http::Request<AiderChat>) -> String {
        let last = req.body["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"));
        last.map(|m| http::parts_text(&m["content"]))
            .unwrap_or_default()
    }

    fn unscripted() -> Reply {
        Reply::Text(http::status_text("IN_PROGRESS", false, "unscripted turn"))
    }

    fn respond(
        s: &http::Scripted<Self>,
        req: &http::Request<Self>,
        out: &mut TcpStream,
    ) -> io::Result<()> {
        respond_chat(s, req, out, COMMIT_SUBJECT)
    }
}

/// The commit subject the fake gives aider's commit-message request.
pub(crate) const COMMIT_SUBJECT: &str = "feat: the agent's change";

/// Aider's commit-message request: its system prompt asks for a Git commit message.
fn is_commit_message<P: http::Provider>(req: &http::Request<P>) -> bool {
    req.body["messages"].as_array().is_some_and(|m| {
        m.iter().any(|m| {
            m["role"] == "system" && http::parts_text(&m["content"]).contains("commit message")
        })
    })
}

fn is_chat<P: http::Provider>(req: &http::Request<P>) -> bool {
    req.method == "POST" && req.path.ends_with("/chat/completions")
}

/// The answer to one request: a turn takes the next scripted reply, a side call gets `side`.
fn respond_chat<P: http::Provider<Reply = Reply>>(
    s: &http::Scripted<P>,
    req: &http::Request<P>,
    out: &mut TcpStream,
    side: &str,
) -> io::Result<()> {
    let model = req.body_model("fake-model");
    if req.method == "GET" && req.path.ends_with("/models") {
        let body = json!({"object": "list", "data": [
            {"id": "fake-model", "object": "model", "created": 1_700_000_000, "owned_by": "hank-contract"}
        ]});
        return http::send(out, &http(200, &body));
    }
    if !is_chat(req) {
        let body = json!({"error": {"message": format!("Unknown request URL: {} {}", req.method, req.path), "type": "invalid_request_error", "param": null, "code": "unknown_url"}});
        return http::send(out, &http(404, &body));
    }
    let id = s.next_id();
    let stream = req.body["stream"] == true;
    let reply = if req.is_turn() {
        s.next_reply()
    } else {
        Reply::text(side)
    };
    let text = match reply {
        Reply::Error(e) => return http::send(out, &e.response(JSON_HEADERS)),
        Reply::Custom { .. } | Reply::WriteFile { .. } | Reply::Shell(_) => {
            let body = json!({"error": {"message": "the Chat Completions fake answers text and function calls only", "type": "invalid_request_error", "param": null, "code": null}});
            return http::send(out, &http(400, &body));
        }
        Reply::Hang(d) => {
            std::thread::sleep(d);
            "late answer".to_string()
        }
        Reply::Text(t) => t,
        Reply::Function {
            name,
            arguments: input,
        } => {
            let call_id = format!("call_fake{id}");
            if !stream {
                let body = completion(
                    id,
                    &model,
                    json!({"role": "assistant", "content": null,
                    "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": input.to_string()}}]}),
                    "tool_calls",
                );
                return http::send(out, &http(200, &body));
            }
            let args = input.to_string();
            let mut deltas = vec![
                json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            ];
            for part in http::split_in_two(&args) {
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
        return http::send(out, &http(200, &body));
    }
    let deltas = http::split_in_two(&text)
        .into_iter()
        .map(|t| json!({"content": t}))
        .collect();
    stream_chunks(out, id, &model, deltas, "stop")
}

impl http::Request<OpenAiChat> {
    /// A side call without tools (the client's title generator).
    pub(crate) fn is_side_call(&self) -> bool {
        is_chat(self) && !self.is_turn()
    }

    /// The text of every message with `role`, in order.
    pub(crate) fn message_texts(&self, role: &str) -> Vec<String> {
        self.body["messages"]
            .as_array()
            .map(|m| {
                m.iter()
                    .filter(|m| m["role"] == role)
                    .map(|m| http::parts_text(&m["content"]))
                    .collect()
            })
            .unwrap_or_default()
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
}

type Shared = http::Scripted<OpenAiChat>;

/// A JSON answer with a `content-length`.
fn http(status: u16, body: &Value) -> Vec<u8> {
    http::response(status, JSON_HEADERS, &[], body.to_string().as_bytes())
}

fn usage() -> Value {
    json!({
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": OUTPUT_TOKENS,
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
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
    http::send(
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
        http::send_chunk(out, format!("data: {e}\n\n").as_bytes())?;
    }
    http::send_chunk(out, b"data: [DONE]\n\n")?;
    http::send(out, b"0\r\n\r\n")
}
