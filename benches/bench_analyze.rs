//! Benchmarks of the response analyzer (every output shape, small and large) and of the pure
//! decision path of one loop. Plain binary, `std::time::Instant`, median and min–max:
//!
//! ```text
//! cargo run --release --example bench_analyze [-- LARGE_MB]   # default 256
//! ```
//! Inputs are generated into a temp dir (deleted at the end). Prints markdown tables.

#[path = "../examples/common/mod.rs"]
mod common;

use std::fs::File;
use std::io::BufReader;
use std::time::Duration;

use common::{Shape, Stats, generate, header, row, time_runs};
use hank::agent::argv::{self, ContextInput};
use hank::agent::profile::CallInput;
use hank::analysis::{self, RunFacts};
use hank::policy::breaker::{Breaker, BreakerConfig};
use hank::policy::budget::{BudgetLimits, Ledger};
use hank::policy::decide::{self, AfterLoop, DecideConfig};
use hank::policy::fixplan;
use hank::progress::{Progress, ProgressSource};
use jiff::{SignedDuration, Timestamp};

fn throughput(bytes: u64, d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs <= 0.0 {
        return "-".into();
    }
    format!("{:.0} MB/s", bytes as f64 / 1e6 / secs)
}

fn main() -> common::Res<()> {
    let large_mb: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()
        .map_err(|_| "LARGE_MB must be a number")?
        .unwrap_or(256);
    let dir = tempfile::tempdir()?;
    let facts = RunFacts {
        exit_code: Some(0),
        ..RunFacts::default()
    };
    let now = Timestamp::now();

    println!("## analyzer\n");
    header("input / throughput");
    let sizes = [("small", 8 * 1024, 400), ("large", large_mb << 20, 5)];
    for (label, bytes, runs) in sizes {
        for shape in [Shape::Result, Shape::Array, Shape::Stream, Shape::Text] {
            // The issue sizes a single result object at 100 MB; larger ones are not realistic.
            let bytes = if shape == Shape::Result {
                bytes.min(100 << 20)
            } else {
                bytes
            };
            let path = dir.path().join(format!("{label}.{}", shape.name()));
            let written = generate(shape, bytes, &path)?;
            let mut last = None;
            let stats: Stats = time_runs(runs, || {
                let f = File::open(&path).ok()?;
                let a = analysis::analyze(BufReader::with_capacity(1 << 16, f), b"", &facts, now);
                last = Some((a.shape, a.status.is_some(), a.outcome));
                Some(a.stdout_bytes)
            });
            let (shape_seen, has_status, outcome) = last.ok_or("analysis did not run")?;
            row(
                &format!("analyze {} {label}", shape.name()),
                &stats,
                &format!(
                    "{} B → {shape_seen:?}, status block {has_status}, {outcome:?} / {}",
                    written,
                    throughput(written, stats.median)
                ),
            );
            std::fs::remove_file(&path)?;
        }
    }

    println!("\n## pure decision path (one loop)\n");
    header("note");
    let success = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/claude/success.json"
    ))?;
    let s = time_runs(2000, || analysis::analyze_bytes(&success, b"", &facts, now));
    row("analyze_bytes success.json", &s, "1.4 KB result object");

    let plan_text: String = (1..=30)
        .map(|i| {
            format!(
                "## Phase {}\n- [{}] task number {i} with some words\n",
                i / 10,
                if i < 10 { "x" } else { " " }
            )
        })
        .collect();
    let optional = fixplan::default_optional_sections();
    let s = time_runs(2000, || fixplan::parse(&plan_text, &optional));
    row("fixplan::parse 30 items", &s, "");
    let s = time_runs(2000, || fixplan::newly_checked(&plan_text, &plan_text));
    row("fixplan::newly_checked 30 items", &s, "");

    let analysis = analysis::analyze_bytes(&success, b"", &facts, now);
    let progress = Progress::from_paths(ProgressSource::Git, ["src/lib.rs".to_string()]);
    let dcfg = DecideConfig::default();
    let bcfg = BreakerConfig::default();
    let plan = fixplan::parse(&plan_text, &optional);
    let mut ledger = Ledger::default();
    for i in 0..100 {
        ledger.record_call(now - SignedDuration::from_secs(30 * i));
    }
    let history: Vec<_> = (0..20)
        .map(|n| decide::record_loop(n, now, &analysis, &progress, &dcfg))
        .collect();
    let tools: Vec<String> = hank::settings::DEFAULT_ALLOWED_TOOLS
        .iter()
        .map(|s| (*s).to_string())
        .chain(std::iter::once("Bash(cargo test *)".to_string()))
        .collect();
    let s = time_runs(2000, || {
        let limits = BudgetLimits {
            max_calls_per_hour: 100_000,
            ..BudgetLimits::default()
        };
        let check = ledger.check(now, &limits);
        let context = argv::build_context(&ContextInput {
            loop_number: 42,
            open_items: plan.total() - plan.done(),
            total_items: plan.total(),
            next_item: plan.next_open().map(|i| i.text.as_str()),
            circuit: None,
            last_recommendation: Some("continue with the config loader"),
            denied: Vec::new(),
            asked_questions: false,
            last_error: None,
            handover_from: None,
            tools_by_choice: None,
            verification: None,
            contradiction: false,
        });
        let args = argv::build_argv(
            &[],
            &CallInput {
                allowed_tools: &tools,
                ..CallInput::json(Some("0b5e4a3c-1d2e-4f60-8a9b-0c1d2e3f4a5b"))
            },
        );
        let stdin = argv::compose_stdin(&context, b"# Prompt\nDo the next task.\n");
        let record = decide::record_loop(43, now, &analysis, &progress, &dcfg);
        let mut breaker = Breaker::default();
        let t = breaker.record(&analysis, &progress, now, &bcfg);
        let d = decide::after_loop(&AfterLoop {
            analysis: &analysis,
            history: &history,
            breaker: &breaker,
            plan_complete: plan.is_complete(),
            claims: true,
            loops_this_run: 43,
            cost_this_run: 1.0,
            consecutive_failures: 0,
            now,
            cfg: &dcfg,
        });
        (
            check,
            args.len() + stdin.len(),
            record.files_changed,
            t.is_some(),
            d,
        )
    });
    row(
        "budget + context + argv + record + breaker + decide",
        &s,
        "everything pure between two agent calls",
    );
    Ok(())
}
