//! `Bash(…)` permission rules: what the real client allows and denies, against hank's one
//! model of its matcher (`hank::policy::bash_rules::allows`).
//!
//! Each row is one `claude -p` call with `--allowedTools=Bash(RULE)` (the flag hank writes)
//! against the fake API, which asks for one `Bash` tool call with COMMAND and then ends the
//! turn. The client's own verdict is its result's `permission_denials` (the denied calls)
//! and the tool result it sent back; hank's verdict must be the same. The commands are
//! harmless when run: `npm` is a fake on `PATH` that prints a line, and the commands that must
//! be denied only reach a closed port on 127.0.0.1.
//!
//! The observed table (per client version) is printed on stderr and written in
//! `docs/claude-contract.md` ("Bash permission rules").

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::fake_api::{Anthropic, Reply};
use crate::http::Fake;

/// A command that must never run: it only reaches a closed port on 127.0.0.1.
const FETCH: &str = "curl -s http://127.0.0.1:9/x";

/// The rows: `RULE => COMMAND`, RULE the content of `Bash(…)` (`Bash` alone: a bare `Bash`),
/// COMMAND the line the model asks to run (`FETCH` stands for [`FETCH`]).
const TABLE: &str = r#"
Bash => npm test | tee out.txt
Bash => npm test > out.txt
Bash => npm test $(FETCH)
Bash => (npm test)
git diff:* => git diff
git diff:* => git diff HEAD~1 -- src
git diff:* => git diff-tree HEAD
git diff:* => git push origin main
git diff:* => git diff && FETCH
npm * => npm test
npm * => npm
npm * => npmx test
npm * => npm run build -- --watch
npm * => npm test && npm run build
npm * => npm test && FETCH
npm * => npm test; FETCH
npm * => npm test || FETCH
npm * => npm test | tee out.txt
npm * => npm test | FETCH
npm * => npm test -- 'a && b'
npm * => npm test $(FETCH)
npm * => npm test `FETCH`
npm * => npm test '$(FETCH)'
npm * => npm test "$(FETCH)"
npm * => npm test <(FETCH)
npm * => (npm test)
npm * => (npm test; FETCH)
npm * => npm test > out.txt
npm * => npm test 2>&1
npm * => npm test 2>/dev/null
npm * => npm test > /dev/null
npm * => npm test >> out.txt
npm * => npm test < in.txt
npm * => NODE_ENV=test npm test
npm * => CI=1 NODE_ENV=test npm test
npm * => env CI=1 npm test
npm * => timeout 60 npm test
npm * => timeout -s KILL 60 npm test
npm * => nice npm test
npm * => nice -n 5 npm test
npm * => nohup npm test
npm * => time npm test
npm run build => npm run build --prod
npm test => npm test
npm test => npm test --watch
npm test => npm testx
npm test => npm test > out.txt 2>/dev/null
npm test => CI=1 npm test
npm:* => npm test
npm:* => npmx test
"#;

/// (rule content of `Bash(…)`, command line the model asks to run); an empty rule is a bare
/// `Bash`.
fn rows() -> Vec<(&'static str, String)> {
    TABLE
        .lines()
        .filter_map(|l| l.split_once(" => "))
        .map(|(rule, cmd)| {
            let rule = if rule == "Bash" { "" } else { rule };
            (rule, cmd.replace("FETCH", FETCH))
        })
        .collect()
}

/// The `--allowedTools` entry of a rule: `Bash(RULE)`, or `Bash` for the empty rule.
fn tool(rule: &str) -> String {
    if rule.is_empty() {
        "Bash".into()
    } else {
        format!("Bash({rule})")
    }
}

/// What the client decided for one row.
#[derive(Debug)]
struct Seen {
    allowed: bool,
    /// The tool result the client sent back (for the failure message).
    tool_result: String,
}

/// Runs the real client once: the fake API asks for `Bash(command)` under `--allowedTools=
/// Bash(rule)`; the verdict is whether the client's result lists a permission denial.
fn observe(claude: &Path, rule: &str, command: &str) -> Result<Seen, String> {
    let tmp = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let home = tmp.path().join("home");
    let work = tmp.path().join("work");
    let bin = tmp.path().join("bin");
    for d in [&home, &work, &bin] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let npm = bin.join("npm");
    std::fs::write(&npm, "#!/bin/sh\necho \"fake npm $*\"\n").map_err(|e| e.to_string())?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&npm, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    let script = vec![
        Reply::tool(
            "Bash",
            json!({"command": command, "description": "run the command"}),
        ),
        Reply::text("done"),
    ];
    let api = Fake::<Anthropic>::start(script, Some(&tmp.path().join("api.log")));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let o = Command::new(claude)
        .current_dir(&work)
        .env_clear()
        .env("HOME", &home)
        .env("PATH", path)
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-api03-fake-contract-key")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("IS_SANDBOX", "1")
        .env("TZ", "UTC")
        .args(["-p", "--output-format", "json", "--max-turns", "3"])
        .arg(format!("--allowedTools={}", tool(rule)))
        .arg("run the command")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", claude.display()))?;
    let out = String::from_utf8_lossy(&o.stdout);
    let result: Value = out
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| {
            format!(
                "{} × {command:?}: no JSON result; stdout {out:?}, stderr {:?}",
                tool(rule),
                String::from_utf8_lossy(&o.stderr)
            )
        })?;
    let denials = result["permission_denials"].as_array().ok_or_else(|| {
        format!(
            "{} × {command:?}: no permission_denials in {result}",
            tool(rule)
        )
    })?;
    let turns = api.turns();
    let tool_result = turns
        .get(1)
        .map(|t| {
            t.body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .map(Value::to_string)
                .unwrap_or_default()
        })
        .ok_or_else(|| {
            format!(
                "{} × {command:?}: the client did not come back after the tool call; result {result}",
                tool(rule)
            )
        })?;
    let denied_here = denials
        .iter()
        .any(|d| d["tool_input"]["command"].as_str() == Some(command));
    if denials.len() > usize::from(denied_here) {
        return Err(format!(
            "{} × {command:?}: denials of other calls: {denials:?}",
            tool(rule)
        ));
    }
    Ok(Seen {
        allowed: !denied_here,
        tool_result,
    })
}

/// The table, row by row: the client's verdict and hank's must agree.
pub(crate) fn bash_rules_agree_with_the_real_client() {
    let client = crate::client();
    let rows = rows();
    // Four clients at a time: each row is an independent process and fake API.
    let mut seen: Vec<Option<Result<Seen, String>>> = (0..rows.len()).map(|_| None).collect();
    for (chunk_no, chunk) in rows.chunks(4).enumerate() {
        let handles: Vec<_> = chunk
            .iter()
            .map(|(rule, cmd)| {
                let (path, rule, cmd) = (client.path.clone(), (*rule).to_string(), cmd.clone());
                std::thread::spawn(move || observe(&path, &rule, &cmd))
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            seen[chunk_no * 4 + i] = Some(
                h.join()
                    .unwrap_or_else(|_| Err("the observing thread panicked".into())),
            );
        }
    }
    let mut table = format!(
        "Bash rules, Claude Code {} (client | hank | rule | command):\n",
        client.version
    );
    let mut problems = Vec::new();
    for ((rule, cmd), seen) in rows.iter().zip(seen) {
        let hank = hank::policy::bash_rules::allows(&[tool(rule)], cmd);
        match seen {
            Some(Ok(s)) => {
                let verdict = |b: bool| if b { "allow" } else { "deny " };
                table.push_str(&format!(
                    "  {} | {} | {} | {cmd}\n",
                    verdict(s.allowed),
                    verdict(hank),
                    tool(rule)
                ));
                if s.allowed != hank {
                    problems.push(format!(
                        "{} × {cmd:?}: the client {} it, hank's matcher says {}; tool result: {}",
                        tool(rule),
                        if s.allowed { "allows" } else { "denies" },
                        if hank { "allowed" } else { "denied" },
                        s.tool_result
                    ));
                }
            }
            Some(Err(e)) => problems.push(e),
            None => problems.push(format!("{} × {cmd:?}: not observed", tool(rule))),
        }
    }
    eprintln!("{table}");
    assert!(problems.is_empty(), "{table}\n{}", problems.join("\n"));
}
