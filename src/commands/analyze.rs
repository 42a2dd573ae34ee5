//! `hank analyze FILE`: the I/O edge of the analyzer. Reads the saved output as a stream,
//! runs [`crate::analysis::analyze`] with the current time and explains the result (or prints it as
//! JSON with `--json`).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufReader, Read, Write as _};
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use jiff::tz::TimeZone;

use crate::analysis::{Analysis, AskedFormat, Clock, Outcome, RunFacts, analyze_as};
use crate::cli::AnalyzeArgs;
use crate::error::{HankError, Result};

use super::view::human_bytes;

/// Most stderr read (the CLI prints a few lines there; anything past this is not needed).
const MAX_STDERR: u64 = 4 * 1024 * 1024;

/// `FILE.out` → `FILE.err` (only for files ending in `.out`).
fn default_stderr_path(file: &Path) -> Option<PathBuf> {
    (file.extension()? == "out").then(|| file.with_extension("err"))
}

fn read_stderr(args: &AnalyzeArgs) -> Result<Vec<u8>> {
    let path = match &args.stderr {
        Some(p) => p.clone(),
        None => match default_stderr_path(&args.file) {
            Some(p) if p.is_file() => p,
            _ => return Ok(Vec::new()),
        },
    };
    let file = File::open(&path).map_err(|e| HankError::io("cannot read stderr file", &path, e))?;
    let mut buf = Vec::new();
    file.take(MAX_STDERR)
        .read_to_end(&mut buf)
        .map_err(|e| HankError::io("cannot read stderr file", &path, e))?;
    Ok(buf)
}

/// The loop number of a saved output named `loop-NNNNN.out`.
fn loop_number(file: &Path) -> Option<u64> {
    let name = file.file_name()?.to_str()?;
    name.strip_prefix("loop-")?
        .strip_suffix(".out")?
        .parse()
        .ok()
}

/// Most of `hank.log` read to find a loop's format (its newest part).
const MAX_LOG_READ: u64 = 8 * 1024 * 1024;

/// The format the loop log (`hank.log` beside the file) says hank asked for in that loop:
/// the last `loop N started (…, format: F)` line.
fn format_from_log(file: &Path) -> Option<AskedFormat> {
    use std::io::{Seek, SeekFrom};
    let n = loop_number(file)?;
    let log = file.parent()?.join("hank.log");
    let mut f = File::open(log).ok()?;
    let len = f.metadata().ok()?.len();
    if len > MAX_LOG_READ {
        f.seek(SeekFrom::Start(len - MAX_LOG_READ)).ok()?;
    }
    let mut bytes = Vec::new();
    f.take(MAX_LOG_READ).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let needle = format!("loop {n} started (");
    text.lines()
        .rev()
        .filter_map(|l| l.split_once(&needle).map(|(_, rest)| rest))
        .find_map(|rest| {
            let f = rest.split_once("format: ")?.1;
            AskedFormat::parse(f.split([')', ',']).next()?)
        })
}

/// `--format`, else the loop log's word, else auto; with where it came from.
fn asked_format(args: &AnalyzeArgs) -> Result<(AskedFormat, &'static str)> {
    if let Some(raw) = &args.format {
        return AskedFormat::parse(&raw.to_ascii_lowercase())
            .map(|f| (f, "--format"))
            .ok_or_else(|| {
                HankError::usage(format!(
                    "--format: expected json, stream-json, text or auto, got '{raw}'"
                ))
            });
    }
    if args.file.as_os_str() != "-"
        && let Some(f) = format_from_log(&args.file)
    {
        return Ok((f, "hank.log"));
    }
    Ok((AskedFormat::Auto, "default"))
}

pub(crate) fn run(args: &AnalyzeArgs) -> Result<u8> {
    let (asked, asked_from) = asked_format(args)?;
    let stderr = read_stderr(args)?;
    let facts = RunFacts {
        exit_code: args.exit_code,
        ..RunFacts::default()
    };
    let now = Timestamp::now();
    // Reset times printed without a zone are in the machine's local time.
    let clock = Clock::new(now, TimeZone::system());
    let analysis = if args.file.as_os_str() == "-" {
        analyze_as(std::io::stdin().lock(), &stderr, &facts, &clock, asked)
    } else {
        let file = File::open(&args.file)
            .map_err(|e| HankError::io("cannot read agent output", &args.file, e))?;
        if file.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(HankError::usage(format!(
                "{} is a directory; expected a saved agent output file (e.g. .hank/logs/loop-00001.out)",
                args.file.display()
            )));
        }
        analyze_as(
            BufReader::with_capacity(256 * 1024, file),
            &stderr,
            &facts,
            &clock,
            asked,
        )
    };
    let mut analysis = analysis;
    crate::agent::redact::redact_analysis(&mut analysis, &crate::agent::redact::secret_values());
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&analysis)
            .map_err(|e| HankError::Internal(format!("cannot encode the analysis as JSON: {e}")))?;
        s.push('\n');
        s
    } else {
        // The explanation quotes the agent: no control characters or escape sequences.
        let mut s = format!("asked format: {} ({asked_from})\n", asked.as_str());
        s.push_str(&explain(&analysis, now));
        crate::sanitize::for_terminal(&s, crate::sanitize::Lines::Keep).into_owned()
    };
    let mut out = std::io::stdout().lock();
    // A closed stdout (e.g. `| head`) is not an error worth reporting.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    Ok(crate::exit::OK)
}

fn outcome_str(o: Outcome) -> &'static str {
    match o {
        Outcome::Success => "success",
        Outcome::AgentError => "agent error",
        Outcome::Timeout => "timeout",
        Outcome::Crashed => "crashed",
    }
}

fn shape_str(a: &Analysis) -> &'static str {
    use crate::analysis::OutputShape as S;
    match a.shape {
        S::ResultObject => "JSON result object",
        S::MessageArray => "JSON message array",
        S::StreamJson => "stream-json",
        S::Text => "plain text",
        S::Empty => "empty",
        S::Truncated => "truncated JSON",
    }
}

/// The readable explanation printed by `hank analyze`.
#[must_use]
pub(crate) fn explain(a: &Analysis, now: Timestamp) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "shape:        {} ({})",
        shape_str(a),
        human_bytes(a.stdout_bytes)
    );
    let _ = writeln!(s, "outcome:      {}", outcome_str(a.outcome));
    if let Some(e) = &a.error {
        let status = e
            .api_status
            .map(|c| format!(" (HTTP {c})"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "error:        {}{status}: {}",
            e.kind.as_str(),
            e.message
        );
        if let Some(at) = e.reset_at {
            let wait = at.duration_since(now);
            let mins = wait.as_secs().max(0) / 60;
            let _ = writeln!(s, "resets at:    {at} (in {}h{:02}m)", mins / 60, mins % 60);
        }
        if let Some(w) = &e.window {
            let _ = writeln!(s, "window:       {w}");
        }
    }
    if let Some(at) = a.credential_expires_at {
        let secs = at.duration_since(now).as_secs();
        if secs >= 0 {
            let mins = secs / 60;
            let _ = writeln!(
                s,
                "credential:   expires at {at} (in {}h{:02}m)",
                mins / 60,
                mins % 60
            );
        } else {
            let _ = writeln!(s, "credential:   expired at {at}");
        }
    }
    if a.unknown_session {
        let _ = writeln!(
            s,
            "session:      unknown to the CLI: hank drops it and retries without --resume"
        );
    }
    if let Some(id) = &a.session_id {
        let _ = writeln!(s, "session id:   {id}");
    }
    if a.cost_usd > 0.0 {
        let _ = writeln!(s, "cost:         ${:.4}", a.cost_usd);
    }
    if a.tokens.sum() > 0 {
        let t = &a.tokens;
        let _ = writeln!(
            s,
            "tokens:       {} in, {} out, {} cache read, {} cache write",
            t.input, t.output, t.cache_read, t.cache_creation
        );
    }
    if let Some(n) = a.num_turns {
        let _ = writeln!(s, "turns:        {n}");
    }
    if let Some(ms) = a.duration_ms {
        let _ = writeln!(s, "duration:     {:.1}s", ms as f64 / 1000.0);
    }
    for d in &a.permission_denials {
        match &d.command {
            Some(c) => {
                let _ = writeln!(s, "denied:       {} `{c}`", d.tool);
            }
            None => {
                let _ = writeln!(s, "denied:       {}", d.tool);
            }
        }
    }
    match &a.status {
        None => {
            let _ = writeln!(s, "status block: none");
        }
        Some(b) => {
            let _ = writeln!(s, "status block:");
            let fields = [
                ("STATUS", b.status.map(|v| enum_name(&v))),
                (
                    "TASKS_COMPLETED_THIS_LOOP",
                    b.tasks_completed.map(|v| v.to_string()),
                ),
                ("FILES_MODIFIED", b.files_modified.map(|v| v.to_string())),
                ("TESTS_STATUS", b.tests_status.map(|v| enum_name(&v))),
                ("WORK_TYPE", b.work_type.map(|v| enum_name(&v))),
                ("EXIT_SIGNAL", b.exit_signal.map(|v| v.to_string())),
                ("RECOMMENDATION", b.recommendation.clone()),
            ];
            for (key, value) in fields {
                let key = format!("{key}:");
                let value = value.unwrap_or_else(|| "?".to_owned());
                let _ = writeln!(s, "  {key:<26} {value}");
            }
        }
    }
    let list = |s: &mut String, title: &str, items: &[String]| {
        if items.is_empty() {
            let _ = writeln!(s, "{title:<13} none");
        } else {
            let _ = writeln!(s, "{title}");
            for i in items {
                let _ = writeln!(s, "  - {i}");
            }
        }
    };
    list(&mut s, "completion:", &a.completion_indicators);
    let _ = writeln!(
        s,
        "test only:    {}",
        if a.testing_only { "yes" } else { "no" }
    );
    list(&mut s, "questions:", &a.questions);
    list(&mut s, "signatures:", &a.error_signatures);
    let _ = writeln!(s, "answer:       {} bytes", a.output_len);
    if !a.summary.trim().is_empty() {
        let _ = writeln!(s, "\n{}", a.summary.trim_end());
    }
    s
}

/// A status-block enum spelled as in the block (`IN_PROGRESS`).
fn enum_name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_path_defaults_next_to_out_files() {
        assert_eq!(
            default_stderr_path(Path::new(".hank/logs/loop-00003.out")),
            Some(PathBuf::from(".hank/logs/loop-00003.err"))
        );
        assert_eq!(default_stderr_path(Path::new("x.json")), None);
        assert_eq!(default_stderr_path(Path::new("-")), None);
    }

    #[test]
    fn explanation_names_the_essentials() {
        let now: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        let out = r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"You've hit your session limit · resets 5:09am (UTC)","session_id":"abc","total_cost_usd":0,"credential_expires_at":1795428000}"#;
        let a = crate::analysis::analyze_bytes(out.as_bytes(), b"", &RunFacts::default(), now);
        let text = explain(&a, now);
        for want in [
            "outcome:      agent error",
            "error:        usage_limit (HTTP 429): You've hit your session limit",
            "resets at:    2026-11-23T05:09:00Z (in 19h09m)",
            "window:       five_hour",
            "credential:   expires at 2026-11-23T10:00:00Z (in 24h00m)",
            "session id:   abc",
            "status block: none",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 * 1024 * 1024), "3.0 MiB");
    }
}
