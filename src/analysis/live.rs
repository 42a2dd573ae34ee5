//! Display items for the runner's `--live` mode, one stream-json line at a time.  **\[pure\]**

use serde::Serialize;

use super::parse::tool_detail;

/// Longest tool detail shown.
const DETAIL_CHARS: usize = 120;
/// Longest result summary shown.
const SUMMARY_CHARS: usize = 300;

/// One thing to show while the agent works.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LiveItem {
    /// A text block of an assistant message.
    Text(String),
    /// A tool use, with a one-line detail (Bash command, file path, pattern, description).
    Tool { name: String, detail: String },
    /// The session started.
    Init {
        session_id: Option<String>,
        model: Option<String>,
    },
    /// The CLI is retrying a failed API call: its attempt, the error with its HTTP status
    /// (`overloaded (HTTP 529)`), and as given the retries allowed, the delay before the
    /// next try, the status.
    Retry {
        attempt: u32,
        error: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        max_retries: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        delay_ms: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
    },
    /// The final result.
    Result { is_error: bool, summary: String },
}

/// One line of `s`, whitespace collapsed, cut to `max` characters (with `…`).
fn one_line(s: &str, max: usize) -> String {
    let collapsed = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match collapsed.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &collapsed[..i]),
        None => collapsed,
    }
}

/// Turns one stream-json line into display items (none for lines that show nothing or do not
/// parse).
#[must_use]
pub fn live_items(line: &[u8]) -> Vec<LiveItem> {
    let Some(ev) = super::parse::parse_event(line) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    match ev.kind.as_str().unwrap_or("") {
        "system" => match ev.subtype.as_str().unwrap_or("") {
            "init" => out.push(LiveItem::Init {
                session_id: ev.session_id.into_string(),
                model: ev.model.into_string(),
            }),
            "api_retry" => {
                let attempt = ev
                    .attempt
                    .as_u64()
                    .and_then(|a| u32::try_from(a).ok())
                    .unwrap_or(0);
                let mut error = ev
                    .error
                    .into_string()
                    .unwrap_or_else(|| "unknown".to_owned());
                let status = ev.error_status.as_u64().and_then(|s| u16::try_from(s).ok());
                if let Some(status) = status {
                    error = format!("{error} (HTTP {status})");
                }
                out.push(LiveItem::Retry {
                    attempt,
                    error,
                    max_retries: ev.max_retries.as_u64().and_then(|m| u32::try_from(m).ok()),
                    delay_ms: ev.retry_delay_ms.as_u64(),
                    status,
                });
            }
            _ => {}
        },
        "assistant" => {
            let Some(msg) = ev.message else { return out };
            for block in &msg.content.0 {
                match block.kind.as_str().unwrap_or("") {
                    "text" => {
                        if let Some(t) = block.text.as_str().filter(|t| !t.trim().is_empty()) {
                            out.push(LiveItem::Text(t.to_owned()));
                        }
                    }
                    "tool_use" => {
                        let name = block.name.as_str().unwrap_or("tool").to_owned();
                        let detail =
                            one_line(&tool_detail(&name, block.input.as_ref()), DETAIL_CHARS);
                        out.push(LiveItem::Tool { name, detail });
                    }
                    _ => {}
                }
            }
        }
        "result" => {
            let is_error = matches!(ev.is_error, super::parse::Scalar::Bool(true))
                || ev.subtype.as_str().is_some_and(|s| s.starts_with("error"));
            let text = ev.result.into_string().or_else(|| {
                ev.errors
                    .and_then(|e| e.into_iter().find_map(super::parse::Scalar::into_string))
            });
            let summary = one_line(text.as_deref().unwrap_or(""), SUMMARY_CHARS);
            out.push(LiveItem::Result { is_error, summary });
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_items() {
        let long = "x".repeat(300);
        let bash = format!(
            r#"{{"type":"assistant","message":{{"content":[{{"type":"text","text":"Running tests"}},{{"type":"tool_use","name":"Bash","input":{{"command":"cargo test\n  --all {long}"}}}}]}}}}"#
        );
        let cases: Vec<(String, Vec<LiveItem>)> = vec![
            (
                r#"{"type":"system","subtype":"init","session_id":"abc","model":"claude-sonnet-4-5"}"#.to_owned(),
                vec![LiveItem::Init { session_id: Some("abc".into()), model: Some("claude-sonnet-4-5".into()) }],
            ),
            (
                r#"{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":2210,"error_status":529,"error":"overloaded"}"#.to_owned(),
                vec![LiveItem::Retry { attempt: 3, error: "overloaded (HTTP 529)".into(), max_retries: Some(10), delay_ms: Some(2210), status: Some(529) }],
            ),
            (
                r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Read","input":{"file_path":"/p/src/lib.rs"}},{"type":"tool_use","name":"Grep","input":{"pattern":"fn main"}},{"type":"tool_use","name":"Task","input":{"description":"Explore code","prompt":"long"}},{"type":"thinking","thinking":"hmm"}]}}"#.to_owned(),
                vec![
                    LiveItem::Tool { name: "Read".into(), detail: "/p/src/lib.rs".into() },
                    LiveItem::Tool { name: "Grep".into(), detail: "fn main".into() },
                    LiveItem::Tool { name: "Task".into(), detail: "Explore code".into() },
                ],
            ),
            (
                r#"{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login"}"#.to_owned(),
                vec![LiveItem::Result { is_error: true, summary: "Not logged in · Please run /login".into() }],
            ),
            (
                r#"{"type":"result","subtype":"error_max_turns","is_error":false,"errors":["Reached maximum number of turns (3)"]}"#.to_owned(),
                vec![LiveItem::Result { is_error: true, summary: "Reached maximum number of turns (3)".into() }],
            ),
            (r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"secret"}]}}"#.to_owned(), vec![]),
            (r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}"#.to_owned(), vec![]),
            ("not json".to_owned(), vec![]),
            (String::new(), vec![]),
        ];
        for (line, want) in cases {
            assert_eq!(live_items(line.as_bytes()), want, "{line}");
        }
        let items = live_items(bash.as_bytes());
        assert_eq!(items[0], LiveItem::Text("Running tests".into()));
        let LiveItem::Tool { name, detail } = &items[1] else {
            panic!("{items:?}")
        };
        assert_eq!(name, "Bash");
        assert!(detail.starts_with("cargo test --all xxx"), "{detail}");
        assert_eq!(detail.chars().count(), DETAIL_CHARS + 1);
    }
}
