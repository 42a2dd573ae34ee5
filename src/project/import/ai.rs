//! The AI conversion: the prompt with the document between nonce markers, the argv, the
//! check of the answer and of the files the agent wrote (pure), and the call itself.

use super::*;

/// The marker lines around the document: a random nonce the document does not contain.
#[must_use]
pub(crate) fn markers(document: &str, nonce: u64) -> (String, String) {
    let mut n = nonce;
    for _ in 0..1000 {
        let id = format!("HANK_DOCUMENT_{n:016x}");
        if !document.contains(&id) {
            return (format!("<<<BEGIN {id}>>>"), format!("<<<END {id}>>>"));
        }
        n = n
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
    }
    // A document that contains a thousand guessed nonces: make the id longer than it.
    let id = format!("HANK_DOCUMENT_{}", "X".repeat(document.len().min(4096) + 1));
    (format!("<<<BEGIN {id}>>>"), format!("<<<END {id}>>>"))
}

/// The conversion prompt's part about a workspace of several repositories (issue 51): the
/// repositories (name, path, base) and the rule that every section heading of the plan names
/// the ones it changes, `(repos: …; after: …)`, as the fleet requires. Empty without a
/// workspace or with a workspace of one repository (the prompt is then as before
/// workspaces).  **\[pure\]**
#[must_use]
pub(crate) fn workspace_rules(ws: Option<&Workspace>) -> String {
    let Some(ws) = ws.filter(|w| w.is_multi()) else {
        return String::new();
    };
    let mut out = String::from(
        "## The repositories of this change\n\n\
         This project is a workspace of several repositories (`.hank/workspace.toml`); the \
         work lands in these, and in no other:\n\n",
    );
    for r in &ws.repos {
        let base = r
            .base
            .as_deref()
            .map_or_else(|| "the branch it is on".to_string(), |b| format!("`{b}`"));
        let _ = writeln!(
            out,
            "- `{}`: the checkout `{}`, base {base}",
            r.name, r.given
        );
    }
    let first = ws.repos.first().map_or("api", |r| r.name.as_str());
    let second = ws.repos.get(1).map_or("web", |r| r.name.as_str());
    let _ = write!(
        out,
        "\nIn `.hank/fix_plan.md`, instead of the priority sections, make one `##` section per \
         piece of work (each becomes a task that agents work on in parallel), in the order the \
         work should be done, and end every such heading with a parenthesis naming the \
         repositories it changes (`repos:`, comma-separated, only names from the list above) \
         and, when it needs other sections done first, those sections by their exact heading \
         text (`after:`), the two separated by `;`. For example:\n\n\
         ```\n\
         ## Add the endpoint (repos: {first})\n\
         - [ ] …\n\n\
         ## Use it in the UI (repos: {second}; after: Add the endpoint)\n\
         - [ ] …\n\
         ```\n\n\
         A section that changes several repositories names them all (`repos: {first}, \
         {second}`). Every section with tasks needs its `repos:`; keep `## Optional` (without \
         `repos:`) for optional tasks.\n\n"
    );
    out
}

/// The conversion prompt sent on stdin: `templates/import_prompt.md` with the document
/// between its markers, and the workspace's repositories when it has several
/// ([`workspace_rules`]).  **\[pure\]**
///
/// # Errors
/// A template error (a bug, caught by the tests).
pub(crate) fn conversion_prompt(
    doc: &Document,
    project_name: &str,
    standard_prompt: &str,
    ws: Option<&Workspace>,
    nonce: u64,
) -> Result<String> {
    let (begin, end) = markers(&doc.text, nonce);
    let mut vars = Vars::new();
    vars.insert("project_name", project_name.to_string());
    vars.insert("source_name", display_name(&doc.file_name));
    vars.insert("document_format", doc.format.label().to_string());
    vars.insert("begin_marker", begin);
    vars.insert("end_marker", end);
    vars.insert("hank_prompt", standard_prompt.trim_end().to_string());
    vars.insert("document", doc.text.trim_end().to_string());
    vars.insert("workspace_rules", workspace_rules(ws));
    templates::render("import_prompt.md", templates::IMPORT_PROMPT_MD, &vars)
}

/// The conversion agent's argv after the program: the command's own leading words, then
/// `-p --output-format json --allowedTools=Read,Write [--model M]`. The prompt goes on stdin.
/// **\[pure\]**
#[must_use]
pub(crate) fn conversion_argv(leading: &[String], model: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = leading.to_vec();
    args.extend(
        [
            "-p",
            "--output-format",
            "json",
            &format!("--allowedTools={IMPORT_TOOLS}"),
        ]
        .map(String::from),
    );
    if let Some(m) = model.map(str::trim).filter(|m| !m.is_empty()) {
        args.push("--model".into());
        args.push(m.to_string());
    }
    args
}

/// The error for an agent answer that is not a success, or `None`.  **\[pure\]**
#[must_use]
pub(crate) fn analysis_error(a: &Analysis, timeout: Duration) -> Option<HankError> {
    if a.outcome == Outcome::Success && a.error.is_none() {
        return None;
    }
    let retry = "try again later, or use --no-ai for the deterministic conversion";
    if a.outcome == Outcome::Timeout {
        return Some(HankError::usage_hint(
            format!(
                "the AI conversion timed out (timeout) after {}s; nothing was changed",
                timeout.as_secs()
            ),
            "raise --timeout (or CLAUDE_TIMEOUT_MINUTES), or use --no-ai",
        ));
    }
    let kind = a.error_kind().map_or("crashed", ErrorKind::as_str);
    let detail = a
        .error
        .as_ref()
        .map(|e| e.message.trim())
        .filter(|m| !m.is_empty())
        .map_or_else(String::new, |m| format!(": {m}"));
    let reset = a
        .error
        .as_ref()
        .and_then(|e| e.reset_at)
        .map_or_else(String::new, |t| format!(" (resets at {t})"));
    let hint = match a.error_kind() {
        Some(ErrorKind::Auth) => {
            "log in with `claude` (or set ANTHROPIC_API_KEY), or use --no-ai".to_string()
        }
        Some(ErrorKind::Billing) => "add credit to the account, or use --no-ai".to_string(),
        Some(ErrorKind::UsageLimit) => {
            format!("the usage limit resets later{reset}; {retry}")
        }
        Some(ErrorKind::CliUsage) => {
            "check CLAUDE_CODE_CMD / --claude-cmd and the claude version (`hank doctor`)"
                .to_string()
        }
        _ => retry.to_string(),
    };
    Some(HankError::usage_hint(
        format!("the AI conversion failed ({kind}){detail}{reset}; nothing was changed"),
        hint,
    ))
}

/// The three files as the agent left them (`None`: not written).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AgentFiles {
    pub prompt: Option<String>,
    pub fix_plan: Option<String>,
    pub requirements: Option<String>,
}

/// Checks what the agent wrote. A PROMPT.md without the HANK_STATUS block gets the standard
/// prompt appended (with a warning), so the loop can read the agent's answers.  **\[pure\]**
///
/// # Errors
/// A file missing or empty, or a fix_plan without checkbox items.
pub(crate) fn verify_agent_files(files: AgentFiles, standard_prompt: &str) -> Result<Converted> {
    let hint = "run the import again, or use --no-ai for the deterministic conversion";
    let named = [
        (PROMPT_PATH, &files.prompt),
        (FIX_PLAN_PATH, &files.fix_plan),
        (REQUIREMENTS_PATH, &files.requirements),
    ];
    let missing: Vec<&str> = named
        .iter()
        .filter(|(_, c)| c.as_deref().is_none_or(|c| c.trim().is_empty()))
        .map(|(p, _)| *p)
        .collect();
    if !missing.is_empty() {
        return Err(HankError::usage_hint(
            format!(
                "the AI conversion is incomplete: claude did not write {} (or left it empty); \
                 nothing was changed",
                missing.join(", ")
            ),
            hint,
        ));
    }
    let (prompt, fix_plan, requirements) = (
        files.prompt.unwrap_or_default(),
        files.fix_plan.unwrap_or_default(),
        files.requirements.unwrap_or_default(),
    );
    let plan = fixplan::parse(&fix_plan, &fixplan::default_optional_sections());
    if plan.total() == 0 {
        return Err(HankError::usage_hint(
            format!(
                "the AI conversion is unusable: claude's {FIX_PLAN_PATH} has no checkbox items \
                 (`- [ ] task`); nothing was changed"
            ),
            hint,
        ));
    }
    let mut warnings = Vec::new();
    let mut prompt_md = prompt;
    if !prompt_md.contains("---HANK_STATUS---") {
        warnings.push(format!(
            "claude's {PROMPT_PATH} lacked the HANK_STATUS instructions; the standard ones were appended"
        ));
        prompt_md = format!("{}\n\n{}", prompt_md.trim_end(), standard_prompt);
    }
    Ok(Converted {
        prompt_md,
        fix_plan_md: fix_plan,
        requirements_md: requirements,
        tasks_found: plan.total() as usize,
        tasks_dropped: 0,
        warnings,
    })
}

pub(super) fn nonce() -> u64 {
    let mut h = std::hash::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

pub(super) fn spinner(file: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} converting {msg} with claude · {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(file.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

pub(super) fn read_agent_file(work: &Path, rel: &str) -> Result<Option<String>> {
    let path = work.join(rel);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(HankError::io("reading", &path, e)),
    };
    let problem = if !meta.is_file() {
        Some("is not a regular file")
    } else if meta.len() > MAX_AGENT_FILE_BYTES {
        Some("is too large")
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(HankError::usage(format!(
            "the AI conversion is unusable: claude's {rel} {problem}; nothing was changed"
        )));
    }
    let bytes = std::fs::read(&path).map_err(|e| HankError::io("reading", &path, e))?;
    String::from_utf8(bytes).map(Some).map_err(|_| {
        HankError::usage(format!(
            "the AI conversion is unusable: claude's {rel} is not UTF-8 text; nothing was changed"
        ))
    })
}

pub(super) fn convert_ai(
    doc: &Document,
    spec: &ProjectSpec,
    ws: Option<&Workspace>,
    agent: &AgentCommand,
    settings: &settings::Settings,
    ctx: &mut Ctx,
) -> Result<Converted> {
    if doc.text.len() > MAX_AI_DOCUMENT_BYTES {
        return Err(HankError::usage_hint(
            format!(
                "{} is too large for the AI conversion ({} bytes; at most {MAX_AI_DOCUMENT_BYTES})",
                doc.file_name,
                doc.text.len()
            ),
            "split the document, or use --no-ai",
        ));
    }
    let standard = standard_prompt(spec)?;
    let stdin = conversion_prompt(doc, &spec.name, &standard, ws, nonce())?;
    let args = conversion_argv(&agent.leading_args, settings.model.value.as_deref());
    let tmp = tempfile::Builder::new()
        .prefix("hank-import-")
        .tempdir()
        .map_err(|e| HankError::io("creating a temp folder in", std::env::temp_dir(), e))?;
    let work = tmp.path().join("work");
    let specs = work.join(".hank/specs");
    std::fs::create_dir_all(&specs).map_err(|e| HankError::io("creating folder", &specs, e))?;
    let out_log = tmp.path().join("agent.out");
    let timeout = settings.timeout.value;
    let runtime = crate::proc::runtime()
        .map_err(|e| HankError::Internal(format!("failed to start the async runtime: {e}")))?;
    // SANDBOX: the conversion runs confined like a loop's call, in its temp folder: it reads
    // the document on stdin and writes the three files there, so it is given no access to the
    // project at all (hank moves the verified files in); Claude Code's own state and its API
    // as the built-in claude profile names them.
    let (sandbox, sandbox_warnings) = crate::effects::agent::Sandboxing::open(settings)?;
    for w in sandbox_warnings {
        ctx.warn(w);
    }
    let mut env_set = Vec::new();
    let claude = crate::agent::profile::load_builtin("claude")?;
    let rules = sandbox.rules_for(
        &claude.sandbox,
        &agent.program,
        &work,
        settings,
        &mut env_set,
    );
    let bar = spinner(&doc.file_name);
    let marker = crate::agent::process::Marker::new(&work);
    let called = runtime.block_on(async {
        let cancel = crate::agent::signals::install()?;
        let removed = crate::effects::agent::removed_for(&[], rules.is_some());
        let env_remove: Vec<&str> = removed.iter().map(String::as_str).collect();
        let spawn = Spawn {
            program: &agent.program,
            args: &args,
            cwd: &work,
            stdin: stdin.into_bytes(),
            stdout_log: out_log.clone(),
            stderr_log: tmp.path().join("agent.err"),
            timeout,
            grace: GRACE,
            live: false,
            env_remove: &env_remove,
            env_set: &env_set,
            stop_after_result: true,
            marker: Some(&marker),
            idle_timeout: None,
            first_output_timeout: None,
            sandbox: rules.as_ref(),
        };
        call::call(
            spawn,
            &crate::agent::profile::Parser::Claude,
            analysis::AskedFormat::Auto,
            cancel,
            |_| {},
            |_| {},
            || analysis::Clock::new(jiff::Timestamp::now(), jiff::tz::TimeZone::system()),
        )
        .await
        .map_err(HankError::usage)
    });
    bar.finish_and_clear();
    sandbox.end_call();
    let denied = sandbox.take_denied();
    if !denied.is_empty() {
        let hosts: Vec<String> = denied
            .iter()
            .map(|d| format!("{} at {}", d.host, d.at))
            .collect();
        ctx.warn(format!(
            "sandbox: the conversion was refused {} (not an allowed host: SANDBOX_ALLOW_HOSTS)",
            hosts.join(", ")
        ));
    }
    let call::Called { outcome, analysis } = called?;
    if outcome.facts.interrupted {
        return Err(HankError::WithCode {
            code: exit::INTERRUPTED,
            message: "interrupted: the import was stopped and nothing was changed".into(),
        });
    }
    ctx.cost_usd = analysis.cost_usd;
    if let Some(err) = analysis_error(&analysis, timeout) {
        return Err(err);
    }
    let files = AgentFiles {
        prompt: read_agent_file(&work, PROMPT_PATH)?,
        fix_plan: read_agent_file(&work, FIX_PLAN_PATH)?,
        requirements: read_agent_file(&work, REQUIREMENTS_PATH)?,
    };
    verify_agent_files(files, &standard).map_err(|e| {
        if analysis.permission_denials.is_empty() {
            return e;
        }
        let denied: Vec<String> = analysis
            .permission_denials
            .iter()
            .map(|d| d.command.clone().unwrap_or_else(|| d.tool.clone()))
            .collect();
        HankError::usage_hint(
            format!("{e} (claude was denied: {})", denied.join(", ")),
            e.hint().unwrap_or("use --no-ai").to_string(),
        )
    })
}
