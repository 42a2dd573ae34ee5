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

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use crate::http;
use serde_json::{Value, json};

/// The usage every answer reports (`response.completed.response.usage`).
pub(crate) const INPUT_TOKENS: u64 = 1200;
pub(crate) const CACHED_TOKENS: u64 = 200;
pub(crate) const OUTPUT_TOKENS: u64 = 40;

/// One scripted answer to a streaming `POST /v1/responses`.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// An assistant message with this text.
    Text(String),
    /// A `function_call` output item (`arguments` is sent as a JSON string).
    Function { name: String, arguments: Value },
    /// A `custom_tool_call` output item (a freeform tool such as `apply_patch` or `exec`).
    Custom { name: String, input: String },
    /// Creates or overwrites `path` (relative to the project, or absolute) with `content`,
    /// through the edit tool the request offers.
    WriteFile { path: String, content: String },
    /// Runs a shell command through the command tool the request offers.
    Shell(String),
    /// Sleeps this long, then answers a plain text (a hung API).
    Hang(Duration),
    /// An HTTP error with this JSON body and extra response headers.
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
        Self::Error {
            status,
            body: json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
            headers: Vec::new(),
        }
    }

    /// 429 `insufficient_quota`: the API key's account is out of credits.
    pub(crate) fn quota() -> Self {
        Self::error(
            429,
            "insufficient_quota",
            Some("insufficient_quota"),
            "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
        )
    }

    /// 429 `rate_limit_exceeded`: a per-minute token limit, with `retry-after`.
    pub(crate) fn rate_limit(retry_after_secs: u32) -> Self {
        let mut r = Self::error(
            429,
            "tokens",
            Some("rate_limit_exceeded"),
            &format!(
                "Rate limit reached for gpt-fake in organization org-fake on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200. Please try again in {retry_after_secs}s. Visit https://platform.openai.com/account/rate-limits to learn more."
            ),
        );
        if let Self::Error { headers, .. } = &mut r {
            headers.push(("retry-after".into(), retry_after_secs.to_string()));
            headers.push((
                "x-ratelimit-reset-tokens".into(),
                format!("{retry_after_secs}s"),
            ));
        }
        r
    }

    /// 429 `usage_limit_reached`: a ChatGPT plan's usage window, ending at `resets_at`.
    pub(crate) fn usage_limit(resets_at: i64) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(0))
            .unwrap_or(0);
        Self::Error {
            status: 429,
            body: json!({"error": {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": "plus",
                "resets_at": resets_at,
                "resets_in_seconds": (resets_at - now).max(0),
            }}),
            headers: Vec::new(),
        }
    }
}

/// A request as the fake received it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub method: String,
    pub path: String,
    /// Lower-case names; secret values are redacted.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Value::Null` when absent or not JSON).
    pub body: Value,
}

impl Request {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A streaming `POST …/responses` (one model call of a turn).
    pub(crate) fn is_turn(&self) -> bool {
        self.method == "POST" && self.path.ends_with("/responses") && self.body["stream"] == true
    }

    /// The input items (the whole conversation codex sends).
    pub(crate) fn input(&self) -> Vec<Value> {
        self.body["input"].as_array().cloned().unwrap_or_default()
    }

    /// The whole body as text (for `contains` checks).
    pub(crate) fn text(&self) -> String {
        self.body.to_string()
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
            .map(content_text)
            .collect()
    }

    /// The text the newest input item adds when it is a user message (the prompt of a turn);
    /// empty when the newest item is a tool output.
    pub(crate) fn last_user_text(&self) -> String {
        match self.input().last() {
            Some(i) if i["type"] == "message" && i["role"] == "user" => content_text(i),
            _ => String::new(),
        }
    }

    /// The outputs of the tool calls codex sent back, in order.
    pub(crate) fn tool_outputs(&self) -> Vec<String> {
        self.input()
            .iter()
            .filter(|i| {
                i["type"] == "function_call_output" || i["type"] == "custom_tool_call_output"
            })
            .map(|i| match &i["output"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                other => other.to_string(),
            })
            .collect()
    }

    /// The `<hank-loop-context>` block the newest user message starts with, if any.
    pub(crate) fn loop_context(&self) -> Option<String> {
        let text = self.last_user_text();
        let start = text.find("<hank-loop-context>")? + "<hank-loop-context>".len();
        let end = text[start..].find("</hank-loop-context>")? + start;
        Some(text[start..end].trim().to_string())
    }
}

fn content_text(item: &Value) -> String {
    match &item["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The running fake; stops accepting when dropped.
pub(crate) struct FakeOpenAi {
    fake: http::Fake<Reply, Request>,
}

impl std::ops::Deref for FakeOpenAi {
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

impl FakeOpenAi {
    /// Starts on 127.0.0.1 (a free port) with `script`; logs requests to `log_file` too.
    pub(crate) fn start(script: Vec<Reply>, log_file: Option<&Path>) -> Self {
        let read = |i: http::Incoming| Request {
            method: i.method,
            path: i.path,
            headers: i.headers,
            body: i.body,
        };
        Self {
            fake: http::Fake::start("the fake OpenAI API", script, log_file, read, respond),
        }
    }

    /// The provider's `base_url` (with `/v1`, as codex expects).
    pub(crate) fn url(&self) -> String {
        format!("http://{}/v1", self.fake.addr())
    }
}

fn http_json(status: u16, extra: &[(String, String)], body: &Value) -> Vec<u8> {
    let headers = "content-type: application/json\r\nx-request-id: req_fake\r\n";
    http::response(status, headers, extra, body.to_string().as_bytes())
}

fn respond(s: &Shared, req: &Request, out: &mut TcpStream) -> std::io::Result<()> {
    if !req.is_turn() {
        let body = json!({"error": {"message": format!("no route {} {}", req.method, req.path), "type": "invalid_request_error", "param": null, "code": null}});
        out.write_all(&http_json(404, &[], &body))?;
        return out.flush();
    }
    let id = s.next_id();
    let reply = s
        .next_reply()
        .unwrap_or_else(|| Reply::Text(status_text("IN_PROGRESS", false, "unscripted turn")));
    let item = match reply {
        Reply::Error {
            status,
            body,
            headers,
        } => {
            out.write_all(&http_json(status, &headers, &body))?;
            return out.flush();
        }
        Reply::Hang(d) => {
            std::thread::sleep(d);
            Item::Message("late".into())
        }
        Reply::Text(t) => Item::Message(t),
        Reply::Function { name, arguments } => Item::Function {
            name,
            arguments: arguments.to_string(),
        },
        Reply::Custom { name, input } => Item::Custom { name, input },
        Reply::WriteFile { path, content } => {
            let patch = add_file_patch(&path, &content);
            if req.code_mode() {
                Item::Custom {
                    name: "exec".into(),
                    input: format!(
                        "const r = await tools.apply_patch({});\ntext(JSON.stringify(r));\n",
                        Value::String(patch)
                    ),
                }
            } else {
                Item::Custom {
                    name: "apply_patch".into(),
                    input: patch,
                }
            }
        }
        Reply::Shell(cmd) => {
            if req.code_mode() {
                Item::Custom {
                    name: "exec".into(),
                    input: format!(
                        "const r = await tools.exec_command({});\ntext(JSON.stringify(r));\n",
                        json!({"cmd": cmd})
                    ),
                }
            } else {
                Item::Function {
                    name: "exec_command".into(),
                    arguments: json!({"cmd": cmd}).to_string(),
                }
            }
        }
    };
    stream(out, id, &req.body["model"], &item)
}

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
    Function { name: String, arguments: String },
    Custom { name: String, input: String },
}

/// Splits on a char boundary near the middle (so the client must join deltas).
fn split_in_two(s: &str) -> Vec<String> {
    let mut mid = s.len() / 2;
    while !s.is_char_boundary(mid) {
        mid -= 1;
    }
    vec![s[..mid].to_string(), s[mid..].to_string()]
}

/// Writes one SSE event as one chunk of the chunked body.
fn event(out: &mut TcpStream, seq: &mut u64, mut data: Value) -> std::io::Result<()> {
    data["sequence_number"] = json!(*seq);
    *seq += 1;
    let kind = data["type"].as_str().unwrap_or("message").to_string();
    let payload = format!("event: {kind}\ndata: {data}\n\n");
    write!(out, "{:x}\r\n{payload}\r\n", payload.len())?;
    out.flush()
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
            for d in split_in_two(text) {
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
        Item::Function { name, arguments } => {
            let item_id = format!("fc_fake{id}");
            let call_id = format!("call_fake{id}");
            event(
                out,
                &mut seq,
                json!({"type": "response.output_item.added", "output_index": 0,
                       "item": {"id": item_id, "type": "function_call", "status": "in_progress", "call_id": call_id, "name": name, "arguments": ""}}),
            )?;
            for d in split_in_two(arguments) {
                event(
                    out,
                    &mut seq,
                    json!({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": 0, "delta": d}),
                )?;
            }
            event(
                out,
                &mut seq,
                json!({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": 0, "arguments": arguments}),
            )?;
            json!({"id": item_id, "type": "function_call", "status": "completed", "call_id": call_id, "name": name, "arguments": arguments})
        }
        Item::Custom { name, input } => {
            let item_id = format!("ctc_fake{id}");
            let call_id = format!("call_fake{id}");
            event(
                out,
                &mut seq,
                json!({"type": "response.output_item.added", "output_index": 0,
                       "item": {"id": item_id, "type": "custom_tool_call", "status": "in_progress", "call_id": call_id, "name": name, "input": ""}}),
            )?;
            for d in split_in_two(input) {
                event(
                    out,
                    &mut seq,
                    json!({"type": "response.custom_tool_call_input.delta", "item_id": item_id, "output_index": 0, "delta": d}),
                )?;
            }
            event(
                out,
                &mut seq,
                json!({"type": "response.custom_tool_call_input.done", "item_id": item_id, "output_index": 0, "input": input}),
            )?;
            json!({"id": item_id, "type": "custom_tool_call", "status": "completed", "call_id": call_id, "name": name, "input": input})
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
    out.write_all(b"0\r\n\r\n")?;
    out.flush()
}

/// An answer ending with a HANK_STATUS block.
pub(crate) fn status_text(status: &str, exit_signal: bool, recommendation: &str) -> String {
    format!(
        "Done with this step.\n\n---HANK_STATUS---\nSTATUS: {status}\nTASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 1\nTESTS_STATUS: PASSING\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: {exit_signal}\nRECOMMENDATION: {recommendation}\n---END_HANK_STATUS---"
    )
}
