//! An instant fake `claude` for hank's loop benchmark (`scripts/bench-loop.sh`): reads the
//! prompt on stdin to EOF (unless stdin is a terminal), prints a fixed successful result with a HANK_STATUS block, and
//! spawns nothing (the shell fake in `fixtures/bin/claude` runs `cat`, which would count as a
//! child process of its own).
//!
//! Environment (all optional):
//! - `INSTANT_CLAUDE_TOUCH=FILE`  append a line to FILE (relative to the cwd): real progress;
//! - `INSTANT_CLAUDE_TICK=1`      check the first open `- [ ]` item of `.hank/fix_plan.md`;
//! - `INSTANT_CLAUDE_COMMIT=1`    commit the work tree (`git commit -qam`, after the touch) as
//!   an agent that commits does: HEAD moves every loop. Its `git` is the agent's own child
//!   (`bench-loop.sh --commit` counts the processes hank starts apart from the agent's);
//! - `INSTANT_CLAUDE_RECORD=FILE` append `context_bytes argv_bytes stdin_bytes` for this call
//!   (`context_bytes` is the `--append-system-prompt` value: the text hank adds to the prompt);
//! - `INSTANT_CLAUDE_ANSWER=FILE` a stream-json answer (e.g. a real client's, recorded): printed
//!   whole when the call asks for `stream-json`, else only its `result` line (what
//!   `--output-format json` prints), instead of the fixed result (`scripts/bench-stream.sh`).

use std::fs::OpenOptions;
use std::io::{IsTerminal, Read, Write};

const RESULT: &str = concat!(
    r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":1,"duration_api_ms":1,"#,
    r#""num_turns":1,"result":"Did the next task.\n\n---HANK_STATUS---\nSTATUS: IN_PROGRESS\n"#,
    r#"TASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 1\nTESTS_STATUS: PASSING\n"#,
    r#"WORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: false\nRECOMMENDATION: continue with the next task\n"#,
    r#"---END_HANK_STATUS---","stop_reason":"end_turn","#,
    r#""session_id":"0b5e4a3c-1d2e-4f60-8a9b-0c1d2e3f4a5b","total_cost_usd":0.0001,"#,
    r#""usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":10},"#,
    r#""permission_denials":[],"uuid":"1a2b3c4d-0000-4000-8000-000000000001"}"#,
    "\n"
);

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--version") {
        println!("2.1.197 (Claude Code)");
        return Ok(());
    }
    // A loop engine that runs its agent under a terminal (a pty) never closes stdin: the
    // prompt is then in the argv (`-p PROMPT`) and stdin is not read.
    let mut prompt = Vec::new();
    if !std::io::stdin().is_terminal() {
        std::io::stdin().read_to_end(&mut prompt)?;
    }

    if let Some(path) = std::env::var_os("INSTANT_CLAUDE_TOUCH") {
        let mut f = OpenOptions::new().create(true).append(true).open(path)?;
        writeln!(f, "work {}", std::process::id())?;
    }
    if std::env::var_os("INSTANT_CLAUDE_COMMIT").is_some() {
        let _ = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=agent",
                "-c",
                "user.email=agent@example.com",
            ])
            .args(["commit", "-q", "--no-verify", "-am", "loop"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
    if std::env::var_os("INSTANT_CLAUDE_TICK").is_some() {
        let plan = ".hank/fix_plan.md";
        if let Ok(text) = std::fs::read_to_string(plan)
            && let Some(at) = text.find("- [ ]")
        {
            let mut ticked = text;
            ticked.replace_range(at..at + 5, "- [x]");
            std::fs::write(plan, ticked)?;
        }
    }
    if let Some(path) = std::env::var_os("INSTANT_CLAUDE_RECORD") {
        let context = args
            .iter()
            .position(|a| a == "--append-system-prompt")
            .and_then(|i| args.get(i + 1))
            .map_or(0, String::len);
        let argv_bytes: usize = args.iter().map(|a| a.len() + 1).sum();
        let mut f = OpenOptions::new().create(true).append(true).open(path)?;
        writeln!(f, "{context} {argv_bytes} {}", prompt.len())?;
    }
    let mut out = std::io::stdout().lock();
    if let Some(path) = std::env::var_os("INSTANT_CLAUDE_ANSWER") {
        let answer = std::fs::read_to_string(path)?;
        if args.iter().any(|a| a == "stream-json") {
            out.write_all(answer.as_bytes())?;
        } else if let Some(line) = answer.lines().find(|l| l.contains("\"type\":\"result\"")) {
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
        }
        return out.flush();
    }
    out.write_all(RESULT.as_bytes())?;
    out.flush()
}
