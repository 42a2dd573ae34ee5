//! Shared helpers of hank's benchmark examples: generators of large, realistic agent outputs
//! and project trees (written into a temp dir, never into git), and a tiny timing harness
//! (`std::time::Instant`, median and min–max over repeated runs).

#![allow(dead_code)]

use std::fmt::Write as _;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

pub(crate) type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// A status block as the prompt template asks for it.
pub(crate) const STATUS_BLOCK: &str = "\n\n---HANK_STATUS---\nSTATUS: IN_PROGRESS\n\
TASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 3\nTESTS_STATUS: PASSING\n\
WORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: false\n\
RECOMMENDATION: continue with the config loader\n---END_HANK_STATUS---";

const SESSION: &str = "4b7c2e1a-9d3f-4e8b-a6c5-1f2e3d4c5b6a";

/// Deterministic pseudo-random numbers (xorshift), so generated inputs are reproducible.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const WORDS: &[&str] = &[
    "the",
    "config",
    "loader",
    "reads",
    "value",
    "from",
    "environment",
    "and",
    "falls",
    "back",
    "to",
    "default",
    "error",
    "test",
    "passes",
    "module",
    "function",
    "returns",
    "result",
    "struct",
    "field",
    "parse",
    "token",
    "stream",
    "line",
    "file",
    "path",
    "update",
    "check",
];

/// Prose-like text of about `bytes` bytes.
pub(crate) fn prose(rng: &mut Rng, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 16);
    while s.len() < bytes {
        let n = 6 + rng.below(12);
        for i in 0..n {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        }
        s.push_str(if rng.below(5) == 0 { ".\n\n" } else { ". " });
    }
    s
}

/// Source-code-like text of about `bytes` bytes (a tool result: a file's content).
pub(crate) fn code(rng: &mut Rng, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 64);
    let mut n = 0;
    while s.len() < bytes {
        n += 1;
        let _ = writeln!(
            s,
            "    pub fn {}_{n}(&self, {}: &str) -> Result<u64, Error> {{ \"{}\".len() as u64 }}",
            WORDS[rng.below(WORDS.len() as u64) as usize],
            WORDS[rng.below(WORDS.len() as u64) as usize],
            WORDS[rng.below(WORDS.len() as u64) as usize],
        );
    }
    s
}

fn usage() -> serde_json::Value {
    json!({"input_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 18000, "output_tokens": 240})
}

/// The final `result` event/object of a successful call with `text` as the answer.
pub(crate) fn result_event(text: &str) -> serde_json::Value {
    json!({
        "type": "result", "subtype": "success", "is_error": false, "duration_ms": 61234,
        "duration_api_ms": 57234, "num_turns": 40, "result": text, "stop_reason": "end_turn",
        "session_id": SESSION, "total_cost_usd": 0.4213, "usage": usage(),
        "modelUsage": {}, "permission_denials": [], "uuid": "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
    })
}

/// One turn of an agent transcript: an assistant message with text and a tool call, and the
/// user message carrying the tool result (a file's content, command output…).
pub(crate) fn turn(rng: &mut Rng, n: u64) -> [serde_json::Value; 2] {
    let (name, input, output) = match rng.below(4) {
        0 => (
            "Read",
            json!({"file_path": format!("/home/dev/proj/src/module_{}.rs", n % 97)}),
            {
                let n = 2_000 + rng.below(30_000) as usize;
                code(rng, n)
            },
        ),
        1 => (
            "Edit",
            json!({"file_path": format!("/home/dev/proj/src/module_{}.rs", n % 97),
                   "old_string": code(rng, 200), "new_string": code(rng, 300)}),
            "The file has been updated.".to_string(),
        ),
        2 => (
            "Bash",
            json!({"command": "cargo test --lib config", "description": "Run the config tests"}),
            format!(
                "running 12 tests\n{}test result: ok. 12 passed",
                code(rng, 1_500)
            ),
        ),
        _ => (
            "Grep",
            json!({"pattern": "fn parse", "path": "/home/dev/proj/src"}),
            code(rng, 800),
        ),
    };
    let id = format!("toolu_{n:08}");
    let len = 100 + rng.below(600) as usize;
    let text = prose(rng, len);
    [
        json!({"type": "assistant", "message": {"id": format!("msg_{n}"), "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": text},
                        {"type": "tool_use", "id": id, "name": name, "input": input}],
            "stop_reason": null, "usage": usage()},
            "parent_tool_use_id": null, "session_id": SESSION,
            "uuid": "6a5b4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d"}),
        json!({"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": id, "type": "tool_result", "content": output, "is_error": false}]},
            "parent_tool_use_id": null, "session_id": SESSION,
            "uuid": "6a5b4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d",
            "timestamp": "2026-11-22T10:00:05.123Z"}),
    ]
}

fn init_event() -> serde_json::Value {
    json!({"type": "system", "subtype": "init", "cwd": "/home/dev/proj", "session_id": SESSION,
        "tools": ["Task", "Bash", "Glob", "Grep", "Read", "Edit", "Write", "TodoWrite"],
        "mcp_servers": [], "model": "claude-sonnet-4-5-20250929", "permissionMode": "default",
        "apiKeySource": "none", "claude_code_version": "2.1.197"})
}

/// Output shapes the generator writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `--output-format json`: one result object whose answer is `bytes` long.
    Result,
    /// `--output-format json --verbose`: a JSON array of messages.
    Array,
    /// `--output-format stream-json --verbose`: one event per line.
    Stream,
    /// `--output-format text`.
    Text,
}

impl Shape {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "result" => Some(Self::Result),
            "array" => Some(Self::Array),
            "stream" | "stream-json" => Some(Self::Stream),
            "text" => Some(Self::Text),
            _ => None,
        }
    }
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Result => "result",
            Self::Array => "array",
            Self::Stream => "stream-json",
            Self::Text => "text",
        }
    }
}

/// Writes an agent output of `shape` of about `bytes` bytes to `out`.
pub(crate) fn generate(shape: Shape, bytes: u64, out: &Path) -> Res<u64> {
    let mut w = BufWriter::with_capacity(1 << 20, fs::File::create(out)?);
    let mut rng = Rng::new(0x5eed ^ bytes);
    let mut written = 0u64;
    match shape {
        Shape::Result => {
            let body = usize::try_from(bytes)?.saturating_sub(600);
            let text = format!("{}{STATUS_BLOCK}", prose(&mut rng, body));
            let line = serde_json::to_vec(&result_event(&text))?;
            w.write_all(&line)?;
            w.write_all(b"\n")?;
            written += line.len() as u64 + 1;
        }
        Shape::Text => {
            let body = usize::try_from(bytes)?.saturating_sub(300);
            let mut left = body;
            while left > 0 {
                let chunk = prose(&mut rng, left.min(1 << 20));
                w.write_all(chunk.as_bytes())?;
                written += chunk.len() as u64;
                left = left.saturating_sub(chunk.len());
            }
            w.write_all(STATUS_BLOCK.as_bytes())?;
            written += STATUS_BLOCK.len() as u64;
        }
        Shape::Stream | Shape::Array => {
            let array = shape == Shape::Array;
            let emit = |w: &mut BufWriter<fs::File>,
                        v: &serde_json::Value,
                        first: bool|
             -> io::Result<u64> {
                let line = serde_json::to_vec(v)?;
                let sep: &[u8] = match (array, first) {
                    (true, true) => b"[",
                    (true, false) => b",\n",
                    (false, _) => b"",
                };
                w.write_all(sep)?;
                w.write_all(&line)?;
                if !array {
                    w.write_all(b"\n")?;
                }
                Ok(line.len() as u64 + 1)
            };
            written += emit(&mut w, &init_event(), true)?;
            let mut n = 0;
            while written + 2_000 < bytes {
                n += 1;
                for ev in turn(&mut rng, n) {
                    written += emit(&mut w, &ev, false)?;
                }
            }
            let answer = format!("{}{STATUS_BLOCK}", prose(&mut rng, 600));
            written += emit(&mut w, &result_event(&answer), false)?;
            if array {
                w.write_all(b"]\n")?;
                written += 2;
            }
        }
    }
    w.flush()?;
    Ok(written)
}

/// Parses `123`, `64k`, `100M`, `1G` (powers of 1024).
pub(crate) fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()?.to_ascii_lowercase() {
        'k' => (&s[..s.len() - 1], 1u64 << 10),
        'm' => (&s[..s.len() - 1], 1 << 20),
        'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

fn git(dir: &Path, args: &[&str]) -> Res<()> {
    let status = Command::new("git")
        .args([
            "-c",
            "user.name=Bench",
            "-c",
            "user.email=bench@example.com",
        ])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        return Err(format!("git {args:?} failed in {}", dir.display()).into());
    }
    Ok(())
}

/// A project of `files` source files in nested directories (≈100 per directory), an ignored
/// `target/` with build output, a `.gitignore`, and — when `git` — a repository with one commit.
pub(crate) fn project_tree(dir: &Path, files: usize, with_git: bool) -> Res<()> {
    let mut rng = Rng::new(42);
    for i in 0..files {
        let sub = dir.join(format!("src/pkg_{:03}/mod_{:02}", i / 1000, (i / 100) % 10));
        if i % 100 == 0 {
            fs::create_dir_all(&sub)?;
        }
        let len = 200 + rng.below(3_000) as usize;
        let body = code(&mut rng, len);
        fs::write(sub.join(format!("file_{i:05}.rs")), body)?;
    }
    fs::create_dir_all(dir.join("target/debug/deps"))?;
    for i in 0..(files / 4) {
        fs::write(
            dir.join(format!("target/debug/deps/obj_{i:05}.o")),
            [0u8; 64],
        )?;
    }
    fs::write(dir.join(".gitignore"), "/target/\n*.log\n.env\n")?;
    if with_git {
        git(dir, &["init", "-q"])?;
        git(dir, &["add", "-A"])?;
        git(dir, &["commit", "-q", "-m", "initial"])?;
    }
    Ok(())
}

/// Median, min and max of a set of timings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stats {
    pub median: Duration,
    pub min: Duration,
    pub max: Duration,
    pub runs: usize,
}

impl Stats {
    pub(crate) fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let runs = samples.len();
        let at = |i: usize| samples.get(i).copied().unwrap_or_default();
        Self {
            median: at(runs / 2),
            min: at(0),
            max: at(runs.saturating_sub(1)),
            runs,
        }
    }
}

/// Runs `f` `runs` times (after one warm-up run) and returns the timings.
pub(crate) fn time_runs<T>(runs: usize, mut f: impl FnMut() -> T) -> Stats {
    std::hint::black_box(f());
    let samples = (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .collect();
    Stats::of(samples)
}

/// Human duration with a unit that fits.
pub(crate) fn human(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns < 10_000 {
        format!("{ns} ns")
    } else if ns < 10_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{:.2} ms", ns as f64 / 1e6)
    }
}

/// One row of a results table (markdown, so it can be pasted into PERFORMANCE.md).
pub(crate) fn row(name: &str, s: &Stats, extra: &str) {
    println!(
        "| {name} | {} | {}–{} | {} | {extra} |",
        human(s.median),
        human(s.min),
        human(s.max),
        s.runs
    );
}

pub(crate) fn header(extra: &str) {
    println!("| bench | median | min–max | runs | {extra} |");
    println!("|---|---|---|---|---|");
}
