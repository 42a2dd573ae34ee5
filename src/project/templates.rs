//! The project templates (`templates/`), embedded in the binary, and their strict renderer.
//! **\[pure\]**
//!
//! A template refers to a variable as `{{name}}` (lowercase letters, digits, `_`). Rendering
//! is a single pass: a value is inserted as is and never scanned again, so task titles that
//! contain braces cannot inject anything. A variable the template uses but the caller did not
//! give, and a `{{` that does not open a well-formed variable, are errors.

use std::collections::BTreeMap;

use crate::error::{HankError, Result};

/// `templates/PROMPT.md`: the instructions sent to the agent every loop.
pub(crate) const PROMPT_MD: &str = include_str!("../../templates/PROMPT.md");
/// `templates/fix_plan.md`: the prioritized checklist.
pub(crate) const FIX_PLAN_MD: &str = include_str!("../../templates/fix_plan.md");
/// `templates/AGENT.md`: build/test/run notes.
pub(crate) const AGENT_MD: &str = include_str!("../../templates/AGENT.md");
/// `templates/hankrc`: the project's `.hankrc`.
pub(crate) const HANKRC: &str = include_str!("../../templates/hankrc");
/// `templates/gitignore`: hank's runtime files, for `.gitignore`.
pub(crate) const GITIGNORE: &str = include_str!("../../templates/gitignore");
/// `templates/import_prompt.md`: the conversion prompt of `hank import` (document as data).
pub(crate) const IMPORT_PROMPT_MD: &str = include_str!("../../templates/import_prompt.md");

/// Every embedded template with its file name in `templates/` (checked by the tests).
#[cfg(test)]
pub(crate) const ALL: [(&str, &str); 6] = [
    ("PROMPT.md", PROMPT_MD),
    ("fix_plan.md", FIX_PLAN_MD),
    ("AGENT.md", AGENT_MD),
    ("hankrc", HANKRC),
    ("gitignore", GITIGNORE),
    ("import_prompt.md", IMPORT_PROMPT_MD),
];

/// Values for the `{{name}}` variables of a template.
pub(crate) type Vars = BTreeMap<&'static str, String>;

/// Renders `template` (named `name` in error messages) with `vars`.
///
/// # Errors
/// A variable used by the template and missing from `vars`, or a malformed `{{…}}`.
pub(crate) fn render(name: &str, template: &str, vars: &Vars) -> Result<String> {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(HankError::Internal(format!(
                "template {name}: `{{{{` without a closing `}}}}`"
            )));
        };
        let var = &after[..end];
        let well_formed = !var.is_empty()
            && var
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !well_formed {
            return Err(HankError::Internal(format!(
                "template {name}: malformed variable `{{{{{var}}}}}` (expected lowercase letters, digits, `_`)"
            )));
        }
        let Some(value) = vars.get(var) else {
            return Err(HankError::Internal(format!(
                "template {name}: no value for variable `{var}`"
            )));
        };
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The variable names a template uses, in order of first use (for the tests' checks).
#[cfg(test)]
#[must_use]
pub(crate) fn variables(template: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let var = after[..end].to_string();
        if !names.contains(&var) {
            names.push(var);
        }
        rest = &after[end + 2..];
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&'static str, &str)]) -> Vars {
        pairs.iter().map(|(k, v)| (*k, (*v).to_string())).collect()
    }

    #[test]
    fn render_table() {
        type Case<'a> = (&'a str, &'a [(&'static str, &'a str)], Option<&'a str>);
        let cases: &[Case<'_>] = &[
            ("plain", &[], Some("plain")),
            ("a {{x}} b", &[("x", "1")], Some("a 1 b")),
            ("{{x}}{{x}}", &[("x", "ab")], Some("abab")),
            // values are not rescanned
            ("{{x}}", &[("x", "{{y}}")], Some("{{y}}")),
            ("{{x}}", &[], None),
            ("{{X}}", &[("x", "1")], None),
            ("{{ x }}", &[("x", "1")], None),
            ("{{}}", &[], None),
            ("open {{x", &[("x", "1")], None),
            ("single { brace } ok", &[], Some("single { brace } ok")),
        ];
        for (template, pairs, expected) in cases {
            let got = render("t", template, &vars(pairs)).ok();
            assert_eq!(got.as_deref(), *expected, "template {template:?}");
        }
    }

    #[test]
    fn error_names_template_and_variable() {
        let err = render("PROMPT.md", "{{nope}}", &Vars::new()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("PROMPT.md") && msg.contains("nope"), "{msg}");
    }

    #[test]
    fn every_template_uses_only_known_variables() {
        let known = [
            "project_name",
            "project_type",
            "project_label",
            "build_cmd",
            "test_cmd",
            "run_cmd",
            "lint_cmd",
            "verify_line",
            "max_calls",
            "allowed_tools",
            "tasks",
            "agent",
            "agents_line",
            // import_prompt.md
            "source_name",
            "document_format",
            "begin_marker",
            "end_marker",
            "hank_prompt",
            "document",
            "workspace_rules",
        ];
        for (name, text) in ALL {
            for var in variables(text) {
                assert!(known.contains(&var.as_str()), "{name} uses unknown {var}");
            }
        }
    }

    #[test]
    fn prompt_teaches_the_status_block_and_rules() {
        for needle in [
            "---HANK_STATUS---",
            "STATUS: IN_PROGRESS | COMPLETE | BLOCKED",
            "TASKS_COMPLETED_THIS_LOOP:",
            "FILES_MODIFIED:",
            "TESTS_STATUS: PASSING | FAILING | NOT_RUN",
            "WORK_TYPE: IMPLEMENTATION | TESTING | DOCUMENTATION | REFACTORING",
            "EXIT_SIGNAL: false | true",
            "RECOMMENDATION:",
            "---END_HANK_STATUS---",
            "One task per loop",
            "20%",
            "protected",
            "every item in `.hank/fix_plan.md` is checked and the tests pass",
        ] {
            assert!(PROMPT_MD.contains(needle), "PROMPT.md lacks {needle:?}");
        }
        // Every byte is sent every loop.
        assert!(
            PROMPT_MD.len() < 2200,
            "PROMPT.md grew to {} bytes",
            PROMPT_MD.len()
        );
    }

    #[test]
    fn gitignore_lists_the_runtime_files() {
        for path in [
            ".hank/logs/",
            ".hank/status.json",
            ".hank/state.json*",
            ".hank/events.jsonl",
            ".hank/live.log",
            ".hank/hank.lock",
            ".hank/backup/",
        ] {
            assert!(GITIGNORE.lines().any(|l| l == path), "{path}");
        }
    }

    proptest::proptest! {
        #[test]
        fn render_never_panics(template in "\\PC*", value in "\\PC*") {
            let vars = vars(&[("x", value.as_str())]);
            let out = render("t", &template, &vars);
            if !template.contains("{{") {
                proptest::prop_assert_eq!(out.ok(), Some(template));
            }
        }
    }
}
