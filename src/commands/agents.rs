//! `hank agents`: the agent profiles hank knows here — built-in or the project's own — whether
//! each one's program is installed (and its version), what it can do, and which ones this
//! project's settings use.

use std::time::Duration;

use serde_json::json;

use super::{out, project_dir};
use crate::agent::client;
use crate::agent::profile::{self, Profile, PromptDelivery};
use crate::cli::AgentsArgs;
use crate::error::Result;
use crate::settings::{self, Settings};

/// One row of the listing.
struct Row {
    name: String,
    origin: String,
    description: String,
    /// The program found, or why not.
    program: std::result::Result<String, String>,
    version: Option<String>,
    resume: bool,
    allowed_tools: bool,
    prompt: &'static str,
    /// How hank tested the profile against its client (the profile's `tested`).
    tested: Option<String>,
    /// Position in the project's failover chain (0 = the agent of a plain `hank run`).
    in_chain: Option<usize>,
    error: Option<String>,
}

fn row(name: String, p: std::result::Result<Profile, String>, s: Option<&Settings>) -> Row {
    let in_chain = s.and_then(|s| s.agent_chain().iter().position(|n| *n == name));
    match p {
        Err(e) => Row {
            name,
            origin: String::new(),
            description: String::new(),
            program: Err(String::new()),
            version: None,
            resume: false,
            allowed_tools: false,
            prompt: "",
            tested: None,
            in_chain,
            error: Some(e),
        },
        Ok(p) => {
            let found = s.map(|s| profile::resolve(&p.name, s).map(|a| a.command));
            let (program, version) = match found {
                Some(Ok(cmd)) => {
                    let v = client::probe_with(
                        &cmd.program,
                        &cmd.leading_args,
                        &p.version_args,
                        Duration::from_secs(10),
                    )
                    .ok();
                    (Ok(cmd.program.display().to_string()), v)
                }
                Some(Err(e)) => (Err(e.to_string()), None),
                None => (Err("settings unreadable".into()), None),
            };
            Row {
                origin: p.origin.to_string(),
                description: p.description.clone(),
                program,
                version,
                resume: p.resume,
                allowed_tools: p.allowed_tools,
                prompt: match p.prompt {
                    PromptDelivery::Stdin => "stdin",
                    PromptDelivery::Argument => "argument",
                    PromptDelivery::File => "file",
                },
                tested: p.tested.clone(),
                in_chain,
                error: None,
                name,
            }
        }
    }
}

pub(crate) fn run(args: &AgentsArgs) -> Result<u8> {
    let dir = project_dir()?;
    crate::approval::require(&dir, args.accept_config, "hank agents")?;
    let settings = settings::load(&settings::Flags::default(), &dir);
    let mut notes = Vec::new();
    if let Err(e) = &settings {
        notes.push(format!("the project's settings cannot be read: {e}"));
    }
    let s = settings.as_ref().ok();
    let rows: Vec<Row> = profile::list(&dir)
        .into_iter()
        .map(|(n, p)| row(n, p, s))
        .collect();
    if args.json {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "name": r.name,
                    "origin": r.origin,
                    "description": r.description,
                    "installed": r.program.is_ok(),
                    "program": r.program.as_ref().ok(),
                    "problem": r.error.as_ref().or(r.program.as_ref().err()),
                    "version": r.version,
                    "resume": r.resume,
                    "allowed_tools": r.allowed_tools,
                    "prompt": r.prompt,
                    "tested": r.tested,
                    "chain_position": r.in_chain,
                })
            })
            .collect();
        out(&format!(
            "{}\n",
            json!({"agents": list, "chain": s.map(Settings::agent_chain), "notes": notes})
        ))?;
        return Ok(crate::exit::OK);
    }
    let mut text = String::new();
    for r in &rows {
        let mark = match r.in_chain {
            Some(0) => " (used by `hank run`)".to_owned(),
            Some(i) => format!(" (failover #{i})"),
            None => String::new(),
        };
        text.push_str(&format!("{}{mark}\n", r.name));
        if let Some(e) = &r.error {
            text.push_str(&format!("  unusable: {e}\n"));
            continue;
        }
        if !r.description.is_empty() {
            text.push_str(&format!("  {}\n", r.description));
        }
        text.push_str(&format!("  profile:  {}\n", r.origin));
        match &r.program {
            Ok(p) => text.push_str(&format!(
                "  program:  {p}{}\n",
                r.version
                    .as_deref()
                    .map(|v| format!(" ({v})"))
                    .unwrap_or_default()
            )),
            Err(e) => text.push_str(&format!("  program:  not installed — {e}\n")),
        }
        let caps = [
            (r.resume, "resumes sessions", "fresh context every loop"),
            (
                r.allowed_tools,
                "takes ALLOWED_TOOLS",
                "cannot be limited to ALLOWED_TOOLS (its own sandbox applies)",
            ),
        ];
        let caps: Vec<&str> = caps
            .iter()
            .map(|(yes, a, b)| if *yes { *a } else { *b })
            .collect();
        text.push_str(&format!(
            "  can:      {}; prompt on {}\n",
            caps.join("; "),
            r.prompt
        ));
        text.push_str(&format!(
            "  tested:   {}\n",
            r.tested
                .as_deref()
                .unwrap_or("not by hank (a profile of this project)")
        ));
    }
    if let Some(s) = s {
        text.push_str(&format!(
            "\nThis project runs: {} (AGENT / AGENTS; change with --agent or --agents)\n",
            s.agent_chain().join(" → ")
        ));
    }
    text.push_str(&format!(
        "Add or override a profile: {}/NAME.toml (see README, Agents)\n",
        profile::project_folder(&dir).display()
    ));
    for n in notes {
        text.push_str(&format!("note: {n}\n"));
    }
    out(&text)?;
    Ok(crate::exit::OK)
}
