//! Keeping secrets out of hank's files and output: the values of the API key and token
//! variables are replaced wherever the agent's answer could carry them.

use crate::analysis::Analysis;

/// Environment variables whose values must never reach hank's own files or output.
const SECRET_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_AUTH_TOKEN",
];

/// The secret values present in the environment (short values are ignored: replacing them
/// would mangle ordinary text).
pub fn secret_values() -> Vec<String> {
    SECRET_VARS
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .filter(|v| v.trim().len() >= 8)
        .collect()
}

/// Replaces every secret value in `text` with `[REDACTED]`.
pub fn redact(text: &mut String, secrets: &[String]) {
    for s in secrets {
        if text.contains(s.as_str()) {
            *text = text.replace(s.as_str(), "[REDACTED]");
        }
    }
}

/// A copy of `args` with every secret value replaced, for display (`--verbose`, `--dry-run`):
/// the agent command may carry words from CLAUDE_CODE_CMD.
#[must_use]
pub fn redacted(args: &[String], secrets: &[String]) -> Vec<String> {
    args.iter()
        .map(|a| {
            let mut a = a.clone();
            redact(&mut a, secrets);
            a
        })
        .collect()
}

/// Removes secrets from every text field of an analysis (the agent may echo them).
pub fn redact_analysis(a: &mut Analysis, secrets: &[String]) {
    if secrets.is_empty() {
        return;
    }
    if let Some(e) = a.error.as_mut() {
        redact(&mut e.message, secrets);
    }
    redact(&mut a.summary, secrets);
    if let Some(rec) = a.status.as_mut().and_then(|s| s.recommendation.as_mut()) {
        redact(rec, secrets);
    }
    for list in [
        &mut a.error_signatures,
        &mut a.questions,
        &mut a.completion_indicators,
    ] {
        for item in list.iter_mut() {
            redact(item, secrets);
        }
    }
    for d in &mut a.permission_denials {
        if let Some(c) = d.command.as_mut() {
            redact(c, secrets);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displayed_args_never_carry_a_secret() {
        let secrets = vec!["sk-ant-api03-SECRETVALUE".to_string()];
        let args = vec![
            "-p".to_string(),
            "--api-key=sk-ant-api03-SECRETVALUE".to_string(),
        ];
        assert_eq!(redacted(&args, &secrets), ["-p", "--api-key=[REDACTED]"]);
        assert_eq!(redacted(&args, &[]), args);
    }
}
