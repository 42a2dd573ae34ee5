//! A scripted fake of the OpenAI Responses API for the codex contract cases (`agent_codex.rs`):
//! std only (`TcpListener` + threads), HTTP/1.1 with keep-alive.
//!
//! `POST …/responses` with `"stream": true` is answered with server-sent events in a chunked
//! body, the way the real API streams them: `response.created`, `response.in_progress`, then per
//! output item `response.output_item.added`, its deltas (`response.output_text.delta`,
//! `response.function_call_arguments.delta`, `response.custom_tool_call_input.delta`) and
//! `response.output_item.done`, and last `response.completed` with the usage. Each streaming
//! request takes the next [`Reply`] of the script; when the script is used up, a plain
//! IN_PROGRESS answer is given. Anything else gets a 404 JSON error (codex's built-in provider
//! first tries a WebSocket upgrade on `GET …/responses`: the 404 makes it fall back to HTTPS).
//!
//! Tool calls adapt to the tools the request offers: codex 0.169's default model gets one
//! freeform tool `exec` (JavaScript that calls `tools.apply_patch(…)` / `tools.exec_command(…)`,
//! "code mode"); older models get `apply_patch` (freeform) and `exec_command` (function)
//! directly. [`Reply::WriteFile`] and [`Reply::Shell`] speak whichever the request offers.
//!
//! Every request is logged (method, path, headers with secrets redacted, body) in memory and,
//! optionally, to a file.

#![allow(dead_code)]

use std::io;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use crate::http;
use serde_json::{Value, json};

/// The usage every answer reports (`response.completed.response.usage`; a chat completion's
/// `usage`, where `prompt_tokens` counts the cached ones too, as the API does).
pub(crate) const INPUT_TOKENS: u64 = 1200;
pub(crate) const CACHED_TOKENS: u64 = 200;
pub(crate) const OUTPUT_TOKENS: u64 = 40;

/// One scripted answer to a conversation turn, of either API (this fake's Responses API or the
/// Chat Completions API of `fake_openai_chat.rs`).
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// An assistant message with this text.
    Text(String),
    /// A function call (`arguments` is sent as a JSON string); a `function_call` output item,
    /// or a chat completion's `tool_calls`.
    Function { name: String, arguments: Value },
    /// A `custom_tool_call` output item (a freeform tool such as `apply_patch` or `exec`;
    /// Responses API only).
    Custom { name: String, input: String },
    /// Creates or overwrites `path` (relative to the project, or absolute) with `content`,
    /// through the edit tool the request offers (Responses API only).
    WriteFile { path: String, content: String },
    /// Runs a shell command through the command tool the request offers (Responses API only).
    Shell(String),
    /// Sleeps this long, then answers a plain text (a hung API).
    Hang(Duration),
    /// An HTTP error.
    Error(http::ApiError),
}

impl Reply {
    pub(crate) fn text(t: &str) -> Self {
        Self::Text(t.to_string())
    }

    /// A function call with `input` as its arguments.
    pub(crate) fn tool(name: &str, input: Value) -> Self {
        Self::Function {
            name: name.to_string(),
            arguments: input,
        }
    }

    pub(crate) fn write_file(path: &str, content: &str) -> Self {
        Self::WriteFile {
            path: path.to_string(),
            content: content.to_string(),
        }
    }

    pub(crate) fn shell(cmd: &str) -> Self {
        Self::Shell(cmd.to_string())
    }

    /// An API error body as OpenAI sends it: `{"error":{message,type,param,code}}`.
    pub(crate) fn error(status: u16, kind: &str, code: Option<&str>, message: &str) -> Self {
        let body =
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
        Self::Error(http::ApiError::new(status, body))
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
        let secs = retry_after_secs.to_string();
        Self::error(
            429,
            "tokens",
            Some("rate_limit_exceeded"),
            &format!(
                "Rate limit reached for fake-model in organization org-fake on tokens per min (TPM): Limit 30000, Used 29800, Requested 1200. Please try again in {secs}s. Visit https://platform.openai.com/account/rate-limits to learn more."
            ),
        )
        .with_header("retry-after", &secs)
        .with_header("x-ratelimit-limit-tokens", "30000")
        .with_header("x-ratelimit-remaining-tokens", "200")
        .with_header("x-ratelimit-reset-tokens", &format!("{secs}s"))
    }

    /// 429 `usage_limit_reached`: a ChatGPT plan's usage window, ending at `resets_at`.
    pub(crate) fn usage_limit(resets_at: i64) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(0))
            .unwrap_or(0);
        let body = json!({"error": {
            "type": "usage_limit_reached",
            "message": "The usage limit has been reached",
            "plan_type": "plus",
            "resets_at": resets_at,
            "resets_in_seconds": (resets_at - now).max(0),
        }});
        Self::Error(http::ApiError::new(429, body))
    }

    /// Adds a response header to an [`Reply::Error`] (e.g. `retry-after-ms`, which opencode
    /// waits for between its retries).
    pub(crate) fn with_header(self, name: &str, value: &str) -> Self {
        match self {
            Self::Error(e) => Self::Error(e.with_header(name, value)),
            other => other,
        }
    }
}

/// The headers of a JSON answer (an error's too).
pub(crate) const JSON_HEADERS: &str =
    "content-type: application/json\r\nx-request-id: req_fake\r\n";

/// The OpenAI Responses API ([`http::Provider`]); `http::Fake<OpenAi>` is the running fake,
/// its `url()` the provider's `base_url` (with `/v1`, as codex expects).
pub(crate) enum OpenAi {}

impl http::Provider for OpenAi {
    type Reply = Reply;
    const BASE_PATH: &'static str = "/v1";

    /// A streaming `POST …/responses` (one model call of a turn).
    fn is_turn(req: &http::Request<OpenAi>) -> bool {
        req.method == "POST" && req.path.ends_with("/responses") && req.body["stream"] == true
    }

    /// The text the newest input item adds when it is a user message (the prompt of a
    /// turn); empty when the newest item is a tool output.
    fn last_user_text(req: &http::Request<OpenAi>) -> String {
        match req.input().last() {
            Some(i) if i["type"] == "message" && i["role"] == "user" => {
                http::parts_text(&i["content"])
            }
            _ => String::new(),
        }
    }

    fn unscripted() -> Reply {
        Reply::Text(http::status_text("IN_PROGRESS", false, "unscripted turn"))
    }

    fn respond(s: &Shared, req: &http::Request<Self>, out: &mut TcpStream) -> io::Result<()> {
        if !req.is_turn() {
            let body = json!({"error": {"message": format!("no route {} {}", req.method, req.path), "type": "invalid_request_error", "param": null, "code": null}});
            return http::send(out, &http::ApiError::new(404, body).response(JSON_HEADERS));
        }
        let id = s.next_id();
        let item = match s.next_reply() {
            Reply::Error(e) => return http::send(out, &e.response(JSON_HEADERS)),
            Reply::Hang(d) => {
                std::thread::sleep(d);
                Item::Message("late".into())
            }
            Reply::Text(t) => Item::Message(t),
            Reply::Function { name, arguments } => {
                Item::call(CallKind::Function, &name, arguments.to_string())
            }
            Reply::Custom { name, input } => Item::call(CallKind::Custom, &name, input),
            Reply::WriteFile { path, content } => {
                let patch = add_file_patch(&path, &content);
                if req.code_mode() {
                    Item::code_mode("apply_patch", &Value::String(patch).to_string())
                } else {
                    Item::call(CallKind::Custom, "apply_patch", patch)
                }
            }
            Reply::Shell(cmd) => {
                let args = json!({"cmd": cmd}).to_string();
                if req.code_mode() {
                    Item::code_mode("exec_command", &args)
                } else {
                    Item::call(CallKind::Function, "exec_command", args)
                }
            }
        };
        stream(out, id, &req.body["model"], &item)
    }
}

impl http::Request<OpenAi> {
    /// The input items (the whole conversation codex sends).
    pub(crate) fn input(&self) -> Vec<Value> {
        self.body["input"].as_array().cloned().unwrap_or_default()
    }

    /// Does the request offer code mode's freeform `exec` tool (codex 0.169's default model)?
    pub(crate) fn code_mode(&self) -> bool {
        self.tool_names().iter().any(|n| n == "exec")
    }

    /// Every tool name the request offers, top level (`tools`) and inside the
    /// `additional_tools` input item, namespaces flattened.
    pub(crate) fn tool_names(&self) -> Vec<String> {
        fn walk(tools: &Value, out: &mut Vec<String>) {
            for t in tools.as_array().into_iter().flatten() {
                if t["type"] == "namespace" {
                    walk(&t["tools"], out);
                } else if let Some(n) = t["name"].as_str() {
                    out.push(n.to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.body["tools"], &mut out);
        for item in self.input() {
            if item["type"] == "additional_tools" {
                walk(&item["tools"], &mut out);
            }
        }
        out
    }

    /// The text of every message with `role`, in order.
    pub(crate) fn message_texts(&self, role: &str) -> Vec<String> {
        self.input()
            .iter()
            .filter(|i| i["type"] == "message" && i["role"] == role)
            .map(|i| http::parts_text(&i["content"]))
            .collect()
    }

    /// The outputs of the tool calls codex sent back, in order.
    pub(crate) fn tool_outputs(&self) -> Vec<String> {
        self.input()
            .iter()
            .filter(|i| {
                i["type"] == "function_call_output" || i["type"] == "custom_tool_call_output"
            })
            .map(|i| match &i["output"] {
                out @ (Value::String(_) | Value::Array(_)) => http::parts_text(out),
                other => other.to_string(),
            })
            .collect()
    }
}

type Shared = http::Scripted<OpenAi>;

/// A patch that adds `path` with `content` (every line prefixed with `+`).
fn add_file_patch(path: &str, content: &str) -> String {
    let mut p = format!("*** Begin Patch\n*** Add File: {path}\n");
    for line in content.lines() {
        p.push('+');
        p.push_str(line);
        p.push('\n');
    }
    p.push_str("*** End Patch\n");
    p
}

/// The output item of a streamed answer.
enum Item {
    Message(String),
    /// A tool call; `payload` is a function's arguments (a JSON string) or a freeform tool's
    /// input.
    Call {
        kind: CallKind,
        name: String,
        payload: String,
    },
}

/// The two kinds of tool call output items.
#[derive(Clone, Copy)]
enum CallKind {
    /// `function_call` (`arguments`).
    Function,
    /// `custom_tool_call` (`input`), a freeform tool such as `apply_patch` or `exec`.
    Custom,
}

impl CallKind {
    /// The item id's prefix, the item type, the payload's field and the prefix of its delta
    /// and done events.
    fn shape(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Self::Function => (
                "fc",
                "function_call",
                "arguments",
                "response.function_call_arguments",
            ),
            Self::Custom => (
                "ctc",
                "custom_tool_call",
                "input",
                "response.custom_tool_call_input",
            ),
        }
    }
}

impl Item {
    fn call(kind: CallKind, name: &str, payload: String) -> Self {
        Self::Call {
            kind,
            name: name.to_string(),
            payload,
        }
    }

    /// Code mode's freeform `exec` tool running `tools.<tool>(<arg>)` and printing its result.
    fn code_mode(tool: &str, arg: &str) -> Self {
        Self::call(
            CallKind::Custom,
            "exec",
            format!("const r = await tools.{tool}({arg});\ntext(JSON.stringify(r));\n"),
        )
    }
}

/// Writes one SSE event as one chunk of the chunked body.
fn event(out: &mut TcpStream, seq: &mut u64, mut data: Value) -> std::io::Result<()> {
    data["sequence_number"] = json!(*seq);
    *seq += 1;
    let kind = data["type"].as_str().unwrap_or("message").to_string();
    let payload = format!("event: {kind}\ndata: {data}\n\n");
    http::send_chunk(out, payload.as_bytes())
}

fn stream(out: &mut TcpStream, id: u64, model: &Value, item: &Item) -> std::io::Result<()> {
    let model = model.as_str().unwrap_or("gpt-fake");
    let rid = format!("resp_fake{id}");
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let response = |status: &str, output: Value, usage: Value| {
        json!({
            "id": rid, "object": "response", "created_at": created, "status": status,
            "model": model, "output": output, "usage": usage,
            "parallel_tool_calls": false, "tool_choice": "auto", "store": false,
        })
    };
    out.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nx-request-id: req_fake\r\nconnection: keep-alive\r\n\r\n",
    )?;
    let mut seq = 0;
    event(
        out,
        &mut seq,
        json!({"type": "response.created", "response": response("in_progress", json!([]), Value::Null)}),
    )?;
    event(
        out,
        &mut seq,
        json!({"type": "response.in_progress", "response": response("in_progress", json!([]), Value::Null)}),
    )?;
    let done = match item {
        Item::Message(text) => {
            let item_id = format!("msg_fake{id}");
            let started = json!({"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []});
            event(
                out,
                &mut seq,
                json!({"type": "response.output_item.added", "output_index": 0, "item": started}),
            )?;
            event(
                out,
                &mut seq,
                json!({"type": "response.content_part.added", "item_id": item_id, "output_index": 0, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": []}}),
            )?;
            for d in http::split_in_two(text) {
                event(
                    out,
                    &mut seq,
                    json!({"type": "response.output_text.delta", "item_id": item_id, "output_index": 0, "content_index": 0, "delta": d}),
                )?;
            }
            let part = json!({"type": "output_text", "text": text, "annotations": []});
            event(
                out,
                &mut seq,
                json!({"type": "response.output_text.done", "item_id": item_id, "output_index": 0, "content_index": 0, "text": text}),
            )?;
            event(
                out,
                &mut seq,
                json!({"type": "response.content_part.done", "item_id": item_id, "output_index": 0, "content_index": 0, "part": part}),
            )?;
            json!({"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]})
        }
        Item::Call {
            kind,
            name,
            payload,
        } => {
            let (prefix, item_type, field, events) = kind.shape();
            let item_id = format!("{prefix}_fake{id}");
            let call_id = format!("call_fake{id}");
            event(
                out,
                &mut seq,
                json!({"type": "response.output_item.added", "output_index": 0,
                       "item": {"id": item_id, "type": item_type, "status": "in_progress", "call_id": call_id, "name": name, field: ""}}),
            )?;
            for d in http::split_in_two(payload) {
                event(
                    out,
                    &mut seq,
                    json!({"type": format!("{events}.delta"), "item_id": item_id, "output_index": 0, "delta": d}),
                )?;
            }
            event(
                out,
                &mut seq,
                json!({"type": format!("{events}.done"), "item_id": item_id, "output_index": 0, field: payload}),
            )?;
            json!({"id": item_id, "type": item_type, "status": "completed", "call_id": call_id, "name": name, field: payload})
        }
    };
    event(
        out,
        &mut seq,
        json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
    )?;
    let usage = json!({
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": CACHED_TOKENS},
        "output_tokens": OUTPUT_TOKENS,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
    });
    event(
        out,
        &mut seq,
        json!({"type": "response.completed", "response": response("completed", json!([done]), usage)}),
    )?;
    http::send(out, b"0\r\n\r\n")
}
