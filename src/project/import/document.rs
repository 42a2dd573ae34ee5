//! The document: reading it (Markdown, plain text, JSON), its project name, and JSON as
//! Markdown.  **\[pure\]**

use super::*;

/// The kind of document, from its extension or its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DocFormat {
    Markdown,
    Text,
    Json,
}

impl DocFormat {
    /// How the format is named to the user and in the conversion prompt.
    #[must_use]
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Markdown => "Markdown",
            Self::Text => "plain text",
            Self::Json => "JSON",
        }
    }
}

/// A document ready to convert.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Document {
    /// The file name (no folder), for messages and the provenance line.
    pub file_name: String,
    pub format: DocFormat,
    /// The text, UTF-8, without a byte-order mark, line endings normalized to `\n`.
    pub text: String,
    /// The parsed value of a JSON document.
    pub json: Option<Value>,
}

/// Checks and decodes a document's bytes. `file_name` names it in errors.  **\[pure\]**
///
/// # Errors
/// Empty (or only whitespace), binary or not UTF-8, a `.json` file that is not JSON.
pub(crate) fn parse_document(file_name: &str, bytes: &[u8]) -> Result<Document> {
    let hint = "import a Markdown, plain text or JSON document";
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(HankError::usage_hint(
            format!("{file_name} is empty: there is nothing to import"),
            hint,
        ));
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) if !t.contains('\0') => t,
        _ => {
            return Err(HankError::usage_hint(
                format!("{file_name} is not a text document (binary data or not UTF-8)"),
                format!("{hint}, encoded as UTF-8"),
            ));
        }
    };
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let ext = Path::new(file_name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let parsed_json = || serde_json::from_str::<Value>(&text);
    let (format, json) = match ext.as_str() {
        "json" => match parsed_json() {
            Ok(v) => (DocFormat::Json, Some(v)),
            Err(e) => {
                return Err(HankError::usage_hint(
                    format!("{file_name} is not valid JSON: {e}"),
                    "fix the JSON, or rename the file to .md/.txt to import it as text",
                ));
            }
        },
        "md" | "markdown" | "mdown" | "mkd" => (DocFormat::Markdown, None),
        "txt" | "text" => (DocFormat::Text, None),
        _ => {
            let first = text.trim_start().chars().next();
            match parsed_json() {
                Ok(v) if matches!(first, Some('{' | '[')) => (DocFormat::Json, Some(v)),
                _ if split_sections(&text).iter().any(|s| s.0.is_some()) => {
                    (DocFormat::Markdown, None)
                }
                _ => (DocFormat::Text, None),
            }
        }
    };
    Ok(Document {
        file_name: file_name.to_string(),
        format,
        text,
        json,
    })
}

/// The default project name for a document: its file stem, lowercased, every run of other
/// characters than letters, digits and `_` turned into one `-` (`My PRD v2.md` → `my-prd-v2`);
/// `project` when nothing is left.  **\[pure\]**
#[must_use]
pub(crate) fn project_name_from_file(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let mut out = String::new();
    for c in stem.chars() {
        if c.is_alphanumeric() || c == '_' {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "project".to_string()
    } else {
        out.to_string()
    }
}

pub(super) fn humanize_key(key: &str) -> String {
    let spaced = key.replace(['_', '-'], " ");
    let mut chars = spaced.trim().chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

pub(super) fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The one-line title of an object in a list (`title`, `name`, `summary`, …), if it has one.
pub(super) fn item_title(map: &serde_json::Map<String, Value>) -> Option<String> {
    [
        "title",
        "name",
        "summary",
        "requirement",
        "task",
        "story",
        "description",
        "text",
    ]
    .iter()
    .find_map(|k| map.get(*k).and_then(Value::as_str))
    .map(str::to_string)
}

pub(super) fn item_done(map: &serde_json::Map<String, Value>) -> bool {
    map.get("done").and_then(Value::as_bool) == Some(true)
        || map.get("completed").and_then(Value::as_bool) == Some(true)
        || map
            .get("status")
            .and_then(Value::as_str)
            .is_some_and(|s| matches!(s.to_ascii_lowercase().as_str(), "done" | "closed"))
}

pub(super) fn json_md(value: &Value, depth: usize, out: &mut String) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match v {
                    Value::Object(_) | Value::Array(_) => {
                        let _ = writeln!(
                            out,
                            "\n{} {}\n",
                            "#".repeat(depth.clamp(1, 6)),
                            humanize_key(key)
                        );
                        json_md(v, depth + 1, out);
                    }
                    Value::Null => {}
                    scalar => {
                        let text = scalar_text(scalar).unwrap_or_default();
                        let prose = matches!(
                            key.as_str(),
                            "description" | "summary" | "overview" | "text" | "details"
                        );
                        if prose {
                            let _ = writeln!(out, "{text}\n");
                        } else {
                            let _ = writeln!(out, "{}: {text}\n", humanize_key(key));
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Object(map) => match item_title(map) {
                        Some(title) => {
                            let mark = if item_done(map) { "[x] " } else { "" };
                            let _ = writeln!(out, "- {mark}{}", tasks::clean_title(&title));
                        }
                        None => json_md(item, depth + 1, out),
                    },
                    Value::Array(_) => json_md(item, depth + 1, out),
                    Value::Null => {}
                    scalar => {
                        let text = scalar_text(scalar).unwrap_or_default();
                        let _ = writeln!(out, "- {}", tasks::clean_title(&text));
                    }
                }
            }
            out.push('\n');
        }
        Value::Null => {}
        scalar => {
            let _ = writeln!(out, "{}\n", scalar_text(scalar).unwrap_or_default());
        }
    }
}

/// Renders a JSON document as Markdown for extraction: object keys holding objects or lists
/// become headings, list entries bullets (objects by their `title`/`name`/…; `done: true` or
/// `status: "done"` makes a checked box), other values lines of text.  **\[pure\]**
#[must_use]
pub(crate) fn json_to_markdown(value: &Value) -> String {
    let mut out = String::new();
    json_md(value, 1, &mut out);
    out
}
