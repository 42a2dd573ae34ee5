//! Building the agent's argv and the loop context. **[pure]**
//!
//! The prompt never goes into argv: it is sent on stdin (argv strings are limited to 128 KiB
//! and a variadic flag such as `--allowedTools` would swallow a positional prompt). The tool
//! list uses the `--allowedTools=A,B` form for the same reason.

use crate::config::OutputFormat;

/// What the argv depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgvInput<'a> {
    /// Arguments that come with the command itself (`npx @anthropic-ai/claude-code`).
    pub leading_args: &'a [String],
    pub output_format: OutputFormat,
    pub live: bool,
    pub resume: Option<&'a str>,
    pub model: Option<&'a str>,
    pub permission_mode: Option<&'a str>,
    pub allowed_tools: &'a [String],
    pub context: &'a str,
}

/// The agent's arguments (without the program).
#[must_use]
pub fn build_argv(input: &ArgvInput<'_>) -> Vec<String> {
    let mut argv: Vec<String> = input.leading_args.to_vec();
    argv.push("-p".into());
    argv.push("--output-format".into());
    if input.live {
        argv.push("stream-json".into());
        argv.push("--verbose".into());
    } else {
        argv.push(
            match input.output_format {
                OutputFormat::Json => "json",
                OutputFormat::Text => "text",
            }
            .into(),
        );
    }
    if let Some(id) = input.resume {
        argv.push("--resume".into());
        argv.push(id.into());
    }
    if let Some(m) = input.model {
        argv.push("--model".into());
        argv.push(m.into());
    }
    if let Some(m) = input.permission_mode {
        argv.push("--permission-mode".into());
        argv.push(m.into());
    }
    if !input.allowed_tools.is_empty() {
        argv.push(format!("--allowedTools={}", input.allowed_tools.join(",")));
    }
    if !input.context.is_empty() {
        argv.push("--append-system-prompt".into());
        argv.push(input.context.into());
    }
    argv
}

/// What the loop context says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextInput<'a> {
    pub loop_number: u64,
    pub open_items: u32,
    pub total_items: u32,
    pub next_item: Option<&'a str>,
    /// Circuit state when it is not CLOSED, with its reason.
    pub circuit: Option<(&'a str, &'a str)>,
    pub last_recommendation: Option<&'a str>,
    /// Commands/tools denied in the last loop.
    pub denied: Vec<String>,
    /// The last loop asked questions.
    pub asked_questions: bool,
    /// The last call failed with this error kind.
    pub last_error: Option<&'a str>,
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut out: String = flat.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// The loop context for `--append-system-prompt`: short (≤ 600 bytes on a normal loop —
/// every byte is paid for on every call); longer only to relay denials, questions or errors.
#[must_use]
pub fn build_context(c: &ContextInput<'_>) -> String {
    let mut out = format!("Hank loop {}.", c.loop_number);
    if c.total_items > 0 {
        out.push_str(&format!(
            " fix_plan: {} required of {} items open",
            c.open_items, c.total_items
        ));
        if let Some(next) = c.next_item {
            out.push_str(&format!("; next: {}", one_line(next, 140)));
        }
        out.push('.');
    }
    if let Some((state, reason)) = c.circuit {
        out.push_str(&format!(
            "\nCircuit {state}: {}. Make visible progress.",
            one_line(reason, 80)
        ));
    }
    if let Some(rec) = c.last_recommendation.filter(|r| !r.trim().is_empty()) {
        out.push_str(&format!(
            "\nYour last recommendation: {}",
            one_line(rec, 140)
        ));
    }
    if let Some(kind) = c.last_error {
        out.push_str(&format!("\nThe last call failed ({kind})."));
    }
    if !c.denied.is_empty() {
        let list: Vec<String> = c
            .denied
            .iter()
            .take(5)
            .map(|d| format!("`{}`", one_line(d, 80)))
            .collect();
        out.push_str(&format!(
            "\nDenied last loop: {}. Do not retry them; use allowed tools or record the need in fix_plan.md.",
            list.join(", ")
        ));
    }
    if c.asked_questions {
        out.push_str("\nNobody answers questions here: decide and proceed.");
    }
    out.push_str("\nOne task per loop; end with the HANK_STATUS block.");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base<'a>(tools: &'a [String], lead: &'a [String]) -> ArgvInput<'a> {
        ArgvInput {
            leading_args: lead,
            output_format: OutputFormat::Json,
            live: false,
            resume: None,
            model: None,
            permission_mode: None,
            allowed_tools: tools,
            context: "ctx",
        }
    }

    #[test]
    fn argv_shapes() {
        let tools = vec!["Read".to_string(), "Bash(git add *)".to_string()];
        let none: Vec<String> = Vec::new();
        assert_eq!(
            build_argv(&base(&tools, &none)),
            [
                "-p",
                "--output-format",
                "json",
                "--allowedTools=Read,Bash(git add *)",
                "--append-system-prompt",
                "ctx"
            ]
        );
        let live = ArgvInput {
            live: true,
            resume: Some("abc"),
            model: Some("opus"),
            permission_mode: Some("acceptEdits"),
            ..base(&tools, &none)
        };
        assert_eq!(
            build_argv(&live),
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--resume",
                "abc",
                "--model",
                "opus",
                "--permission-mode",
                "acceptEdits",
                "--allowedTools=Read,Bash(git add *)",
                "--append-system-prompt",
                "ctx"
            ]
        );
        let lead = vec!["@anthropic-ai/claude-code".to_string()];
        let text = ArgvInput {
            output_format: OutputFormat::Text,
            ..base(&none, &lead)
        };
        assert_eq!(
            build_argv(&text),
            [
                "@anthropic-ai/claude-code",
                "-p",
                "--output-format",
                "text",
                "--append-system-prompt",
                "ctx"
            ]
        );
    }

    #[test]
    fn normal_context_stays_under_600_bytes() {
        let long = "x".repeat(5000);
        let c = ContextInput {
            loop_number: 123_456,
            open_items: 999,
            total_items: 9999,
            next_item: Some(&long),
            circuit: Some(("HALF_OPEN", &long)),
            last_recommendation: Some(&long),
            ..ContextInput::default()
        };
        let ctx = build_context(&c);
        assert!(ctx.len() <= 600, "{} bytes: {ctx}", ctx.len());
        assert!(ctx.contains("Hank loop 123456"));
        assert!(ctx.contains("HANK_STATUS"));
    }

    #[test]
    fn denials_and_questions_are_relayed() {
        let c = ContextInput {
            loop_number: 2,
            denied: vec!["npm install".into()],
            asked_questions: true,
            ..ContextInput::default()
        };
        let ctx = build_context(&c);
        assert!(ctx.contains("`npm install`"));
        assert!(ctx.contains("Do not retry"));
        assert!(ctx.contains("decide and proceed"));
    }
}
