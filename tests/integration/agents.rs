//! Agent profiles end to end: a project profile (`.hank/agents/NAME.toml`) drives a fake CLI
//! through JSONPath fields; failover from a limited agent to the next one and back; bad
//! profiles are refused before anything runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::{Project, TICK_ONE, error_json, fixtures, result_json, stderr, stdout};

/// A profile `name` for a CLI that prints Claude Code's result object, read through JSONPath
/// (not the native analyzer): the fake agent with its own control folder `fake_dir`. `keys` go
/// after `program` (top-level keys, then `[[args]]` tables), `fields` after the text, session
/// and token fields, `rest` at the end (`[[errors]]`, `[prices]`).
pub(crate) fn json_profile(
    name: &str,
    fake_dir: &Path,
    keys: &str,
    fields: &str,
    rest: &str,
) -> String {
    format!(
        r#"name = "{name}"
program = "{program}"
{keys}
[env]
FAKE_CLAUDE_DIR = "{fake}"

[output]
format = "json"

[output.fields]
text = "$.result"
session_id = "$.session_id"
input_tokens = "$.usage.input_tokens"
output_tokens = "$.usage.output_tokens"
{fields}{rest}"#,
        program = fixtures().join("bin/claude").display(),
        fake = fake_dir.display(),
    )
}

/// A profile named `demo` (see [`json_profile`]) with the prompt as an argument, `--session
/// ID` to resume, its costs reported and a usage-limit rule of its own.
fn demo_profile(fake_dir: &Path) -> String {
    json_profile(
        "demo",
        fake_dir,
        r#"description = "a fake CLI read through JSONPath"
prompt = "argument"
resume = true
allowed_tools = false

[[args]]
values = ["run", "--json"]
[[args]]
values = ["--session", "{session}"]
[[args]]
values = ["--model", "{model}"]
[[args]]
values = ["--", "{prompt}"]
"#,
        "is_error = \"$.is_error\"\ncost_usd = \"$.total_cost_usd\"\n",
        r#"
[[errors]]
regex = "(?i)quota exhausted"
kind = "usage_limit"
"#,
    )
}

/// Adds the demo profile to `p`; returns its fake control folder.
pub(crate) fn with_demo(p: &Project) -> PathBuf {
    let fake = p.dir.parent().unwrap().join("fake-demo");
    std::fs::create_dir_all(&fake).unwrap();
    crate::support::write_new(&p.dir.join(".hank/agents/demo.toml"), demo_profile(&fake));
    fake
}

/// Every call of the demo CLI (control folder `demo`) fails with `message` (exit 1).
fn demo_fails(demo: &Path, message: &str) {
    std::fs::write(demo.join("response"), error_json(message, None)).unwrap();
    std::fs::write(demo.join("exit"), "1").unwrap();
}

/// The argv of call `n` of the demo CLI: the options, and the prompt (the argument after
/// `--`; the fake writes one argument per line, so the prompt's lines are joined back).
fn argv_of(fake: &Path, n: u32) -> (Vec<String>, String) {
    let text = std::fs::read_to_string(fake.join(format!("argv-{n}"))).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = lines.iter().position(|l| *l == "--").unwrap();
    let options = lines[..cut].iter().map(|l| (*l).to_owned()).collect();
    (options, lines[cut + 1..].join("\n"))
}

#[test]
fn a_project_profile_drives_its_cli_through_jsonpath() {
    let p = Project::new(&["a", "b"]);
    let demo = with_demo(&p);
    std::fs::write(demo.join("effect.sh"), TICK_ONE).unwrap();
    std::fs::write(
        demo.join("response"),
        result_json("IN_PROGRESS", "IMPLEMENTATION", false, "did one"),
    )
    .unwrap();
    p.run_to(
        &["--agent", "demo", "--agent-models", "demo=m-7"],
        0,
        "plan_complete",
    );
    assert_eq!(p.status()["agent"], "demo");
    assert_eq!(p.calls(), 0, "claude was never called");
    // Loop 1: fresh; the prompt (context + PROMPT.md) is the last argument, stdin is empty.
    let (a1, prompt) = argv_of(&demo, 1);
    assert_eq!(a1, ["run", "--json", "--model", "m-7"]);
    assert!(prompt.starts_with("<hank-loop-context>"), "{prompt}");
    assert!(prompt.contains("Do the next task."), "{prompt}");
    // Its CLI takes no tool list: the context carries it instead.
    crate::support::assert_contains(&prompt, "Use only these tools and commands: Write, Read");
    assert_eq!(std::fs::read(demo.join("stdin-1")).unwrap(), b"");
    // Loop 2 resumes the session the JSONPath found.
    let (a2, _) = argv_of(&demo, 2);
    assert_eq!(
        a2,
        [
            "run",
            "--json",
            "--session",
            "5b1c0e0a-1111-2222-3333-444444444444",
            "--model",
            "m-7"
        ]
    );
    let f = p.events_of("agent_finished");
    assert_eq!(f.len(), 2);
    for e in &f {
        assert_eq!(e["agent"], "demo", "{e}");
        assert_eq!(e["outcome"], "success", "{e}");
        assert_eq!(e["status"], "IN_PROGRESS", "{e}");
        assert_eq!(e["tokens"]["input"], 100, "{e}");
        assert!((e["cost_usd"].as_f64().unwrap() - 0.01).abs() < 1e-9, "{e}");
    }
    let usage = &p.state()["agents"]["usage"]["demo"];
    assert_eq!(usage["calls"], 2, "{usage}");
}

#[test]
fn a_profile_error_rule_classifies_the_answer() {
    let p = Project::new(&["a"]);
    let demo = with_demo(&p);
    demo_fails(&demo, "Quota exhausted for today");
    p.run_code(&["--agent", "demo", "--on-usage-limit", "exit"], 3);
    let f = p.events_of("agent_finished");
    assert_eq!(f[0]["error_kind"], "usage_limit", "{}", f[0]);
    assert_eq!(p.status()["exit_reason"], "usage_limit");
}

/// Claude reports a usage limit that resets a few seconds ahead: the next loops go to the
/// second agent at once (no wait), and once the reset has passed hank returns to claude, which
/// resumes nothing of the other agent's session. Every switch is an event.
#[test]
fn failover_to_the_next_agent_and_back_after_the_reset() {
    let items = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let p = Project::new(&items);
    let demo = with_demo(&p);
    p.fake_usage_limit(Some(1), 4);
    p.fake("effect.sh", TICK_ONE);
    std::fs::write(demo.join("effect.sh"), TICK_ONE).unwrap();
    std::fs::write(demo.join("sleep"), "1").unwrap();
    p.run_to(&["--agents", "claude,demo"], 0, "plan_complete");
    let f = p.events_of("agent_finished");
    let agents: Vec<&str> = f.iter().map(|e| e["agent"].as_str().unwrap()).collect();
    assert_eq!(agents[0], "claude");
    assert_eq!(f[0]["error_kind"], "usage_limit");
    assert_eq!(agents[1], "demo", "{agents:?}");
    assert_eq!(
        *agents.last().unwrap(),
        "claude",
        "back to claude: {agents:?}"
    );
    // No wait happened: the limited agent was replaced, not waited for.
    assert!(
        !p.events().iter().any(|e| e["type"] == "waiting"),
        "{:?}",
        p.events()
    );
    let switches: Vec<(String, String)> = p
        .events()
        .into_iter()
        .filter(|e| e["type"] == "agent_switched")
        .map(|e| {
            (
                e["from"].as_str().unwrap().to_owned(),
                e["to"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        switches,
        [
            ("claude".to_owned(), "demo".to_owned()),
            ("demo".to_owned(), "claude".to_owned())
        ]
    );
    // The agent that took over was told so.
    let (_, first_demo) = argv_of(&demo, 1);
    crate::support::assert_contains(&first_demo, "You continue work the agent `claude` started");
    // Claude's return (its second call): its context says the demo agent worked before it;
    // it resumes no session of the other CLI.
    let back = 2;
    let argv = p.argv(back);
    assert!(!argv.iter().any(|a| a == "--resume"), "{argv:?}");
    let (ctx, _) = p.context_and_prompt(back);
    assert!(ctx.contains("the agent `demo` started"), "{ctx}");
    let usage = &p.state()["agents"]["usage"];
    assert!(usage["claude"]["calls"].as_u64().unwrap() >= 2, "{usage}");
    assert!(usage["demo"]["calls"].as_u64().unwrap() >= 1, "{usage}");
}

/// When every agent of the chain is limited, hank waits for the first one back.
#[test]
fn every_agent_limited_waits_for_the_first_reset() {
    let p = Project::new(&["a"]);
    let demo = with_demo(&p);
    let now = jiff::Timestamp::now().as_second();
    p.fail_calls(
        &format!("Claude AI usage limit reached|{}", now + 3600),
        Some(429),
    );
    demo_fails(&demo, "Quota exhausted, resets in 2 hours");
    p.run_code(&["--agents", "claude,demo", "--on-usage-limit", "exit"], 3);
    let limited = &p.status()["agents_limited"];
    assert_eq!(limited["claude"]["kind"], "usage_limit", "{limited}");
    assert_eq!(limited["demo"]["kind"], "usage_limit", "{limited}");
    let claude_until: jiff::Timestamp = limited["claude"]["until"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(claude_until.as_second(), now + 3600);
    // A new run knows both limits (state.json) and does not call either agent before the
    // first reset: with ON_USAGE_LIMIT=wait it waits (visible in status.json).
    let calls = p.calls();
    let child = p.spawn(&["--agents", "claude,demo"]);
    let s = p.wait_status(Duration::from_secs(20), |s| s["state"] == "waiting");
    assert_eq!(s["wait_reason"], "usage_limit");
    crate::support::signal(&child, nix::sys::signal::Signal::SIGINT);
    let _ = crate::support::wait_with_timeout(child, Duration::from_secs(10));
    assert_eq!(p.calls(), calls, "no call while every agent is limited");
}

#[test]
fn a_bad_profile_is_refused_with_its_file_and_key() {
    let p = Project::new(&["a"]);
    let fake = with_demo(&p);
    let text = demo_profile(&fake).replace("format = \"json\"", "format = \"xml\"");
    std::fs::write(p.dir.join(".hank/agents/demo.toml"), text).unwrap();
    let o = p.run_code(&["--agent", "demo"], 1);
    let err = stderr(&o);
    assert!(
        err.contains(
            ".hank/agents/demo.toml: `output.format`: expected json, jsonl or text, got \"xml\""
        ),
        "{err}"
    );
    assert_eq!(p.calls(), 0);
    let o = p.run_code(&["--agent", "nope"], 1);
    crate::support::assert_contains(&stderr(&o), "unknown agent \"nope\"");
}

#[test]
fn hank_agents_lists_builtins_and_project_profiles() {
    let p = Project::new(&["a"]);
    with_demo(&p);
    p.hankrc("AGENTS=claude,demo\n");
    let o = p.run_code(&["agents", "--json"], 0);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["chain"], serde_json::json!(["claude", "demo"]));
    let list = v["agents"].as_array().unwrap();
    let claude = list.iter().find(|a| a["name"] == "claude").unwrap();
    assert_eq!(claude["origin"], "built-in");
    assert_eq!(claude["installed"], true);
    assert_eq!(claude["version"], "2.1.332 (Claude Code)");
    let demo = list.iter().find(|a| a["name"] == "demo").unwrap();
    assert_eq!(demo["chain_position"], 1);
    assert_eq!(demo["resume"], true);
    assert_eq!(demo["allowed_tools"], false);
    assert_eq!(demo["prompt"], "argument");
    let o = p.run(&["agents"]);
    let text = stdout(&o);
    assert!(text.contains("demo (failover #1)"), "{text}");
    assert!(text.contains("This project runs: claude → demo"), "{text}");
}

/// A built-in profile against its fake CLI (`fixtures/bin/NAME`, driven by
/// `$FAKE_<NAME>_DIR`): two loops that tick the plan, the second resuming the first one's
/// session, read through the profile. Returns the fake's folder.
fn builtin_agent_runs_two_loops(name: &str, resume_flag: &[&str]) -> (Project, PathBuf) {
    let p = Project::new(&["a", "b"]);
    let fake = p.dir.parent().unwrap().join(format!("fake-{name}"));
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(fake.join("effect.sh"), TICK_ONE).unwrap();
    let var = format!("FAKE_{}_DIR", name.to_ascii_uppercase());
    let o = p
        .cmd()
        .env(&var, &fake)
        .args(["--agent", name])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
    assert_eq!(p.status()["exit_reason"], "plan_complete", "{name}");
    assert_eq!(p.calls(), 0, "{name}: claude was never called");
    let f = p.events_of("agent_finished");
    assert_eq!(f.len(), 2, "{name}");
    for e in &f {
        assert_eq!(e["agent"], name, "{e}");
        assert_eq!(e["outcome"], "success", "{e}");
        assert!(
            e["status"].is_string(),
            "{name}: the status block was read: {e}"
        );
        assert_eq!(e["plan_items_checked"], 1, "{e}");
    }
    let session = f[0]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no session"));
    let argv2 = std::fs::read_to_string(fake.join("argv-2")).unwrap();
    let argv2: Vec<&str> = argv2.lines().collect();
    let at = argv2
        .windows(resume_flag.len() + 1)
        .position(|w| w[..resume_flag.len()] == *resume_flag && w[resume_flag.len()] == session);
    assert!(at.is_some(), "{name}: loop 2 resumes {session}: {argv2:?}");
    (p, fake)
}

#[test]
fn builtin_codex_profile_with_its_fake_cli() {
    let (p, fake) = builtin_agent_runs_two_loops("codex", &["resume"]);
    // The prompt goes on stdin (`-`), with the loop context at its head.
    let stdin = std::fs::read_to_string(fake.join("stdin-1")).unwrap();
    assert!(stdin.starts_with("<hank-loop-context>"), "{stdin}");
    let argv1 = std::fs::read_to_string(fake.join("argv-1")).unwrap();
    assert!(argv1.starts_with("exec\n--json\n"), "{argv1}");
    assert!(argv1.ends_with("\n-\n"), "{argv1}");
    assert!(!argv1.contains("resume"), "{argv1}");
    let usage = &p.state()["agents"]["usage"]["codex"];
    assert_eq!(usage["calls"], 2, "{usage}");
}

/// Claude reports a usage limit; the fake codex carries the plan while claude is limited.
#[test]
fn failover_from_claude_to_the_codex_fake() {
    let p = Project::new(&["a", "b", "c"]);
    let fake = p.dir.parent().unwrap().join("fake-codex");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(fake.join("effect.sh"), TICK_ONE).unwrap();
    p.fake_usage_limit(None, 3600);
    let o = p.run_env(&[("FAKE_CODEX_DIR", &fake)], &["--agents", "claude,codex"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(p.calls(), 1, "claude once, then limited for an hour");
    let agents: Vec<String> = p
        .events_of("agent_finished")
        .iter()
        .map(|e| e["agent"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(agents, ["claude", "codex", "codex", "codex"]);
    let limited = &p.status()["agents_limited"]["claude"];
    assert_eq!(limited["kind"], "usage_limit", "{limited}");
    let err = stderr(&o);
    assert!(err.contains("agent claude → codex"), "{err}");
}
