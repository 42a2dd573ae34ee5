//! Benchmark of the per-loop state save (`hank::store`) against the size of the call ledger.
//!
//! ```text
//! cargo bench --bench bench_store [-- SIZES [LOOPS]]   # SIZES default 100,1000,10000
//!                                                      # LOOPS default max(3000, 4 × size)
//! TMPDIR=/dev/shm cargo bench --bench bench_store      # the same on tmpfs
//! ```
//!
//! For each size W, a project in `$TMPDIR` whose ledger holds W calls spread evenly over the
//! last hour, loaded once with `Store::load_state` as the engine does. Then, LOOPS times, what
//! the engine's happy path does to the store per loop: the clock advances by 1/W hour (so the
//! window keeps holding W calls), `record_call` + `save_state_with(.., false)` (the pre-spawn
//! save: this is what is timed), then `add_tokens_to_last` (the fold; its save is the next
//! loop's pre-spawn save). The first 100 loops are a warm-up. The mean includes whatever
//! periodic work the store does (compaction of the call log: the default LOOPS lets it run at
//! least twice at every size; the table counts them), the median and p99 show its spread.
//! "save only" is the median of `save_state_with` alone, without the in-memory
//! `record_call` (which prunes the ledger, O(calls in the window)).

#[path = "../examples/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{Stats, human};
use hank::policy::budget::LedgerEntry;
use hank::store::{State, Store};
use jiff::{SignedDuration, Timestamp};

const WARMUP: usize = 100;

fn file_kb(path: &std::path::Path) -> String {
    std::fs::metadata(path).map_or_else(
        |_| "—".to_string(),
        |m| format!("{:.1} KB", m.len() as f64 / 1024.0),
    )
}

fn at(t0: Timestamp, nanos: i128) -> Timestamp {
    let d = SignedDuration::from_nanos(i64::try_from(nanos).unwrap_or(i64::MAX));
    t0.checked_add(d).unwrap_or(t0)
}

fn run(size: usize, loops: usize) -> common::Res<()> {
    let tmp = tempfile::tempdir()?;
    let store = Store::new(tmp.path());
    store.ensure_dirs()?;
    let t0: Timestamp = "2026-11-22T10:00:00Z".parse()?;
    let step = 3_600_000_000_000i128 / size as i128;
    let mut state = State::default();
    for i in 0..size {
        state.ledger.entries.push(LedgerEntry {
            at: at(t0, -3_600_000_000_000 + (i as i128 + 1) * step),
            tokens: 20_000 + i as u64,
        });
    }
    store.save_state(&state)?;
    let mut state = store.load_state(t0)?.state;
    let log = store.dir().join("state.json.calls");
    let log_len = || std::fs::metadata(&log).map_or(0, |m| m.len());
    let mut samples = Vec::with_capacity(loops);
    let mut saves = Vec::with_capacity(loops);
    let mut total = Duration::ZERO;
    let mut compactions = 0;
    let mut len = log_len();
    for k in 0..loops + WARMUP {
        let now = at(t0, (k as i128 + 1) * step);
        let t = Instant::now();
        state.ledger.record_call(now);
        let s = Instant::now();
        store.save_state_with(&state, false)?;
        let save = s.elapsed();
        let took = t.elapsed();
        state.ledger.add_tokens_to_last(20_000);
        let new_len = log_len();
        if k >= WARMUP {
            samples.push(took);
            saves.push(save);
            total += took;
            compactions += usize::from(new_len < len);
        }
        len = new_len;
    }
    let in_window = state.ledger.entries.len();
    let mean = total / u32::try_from(loops.max(1)).unwrap_or(u32::MAX);
    let mut sorted = samples.clone();
    sorted.sort();
    let p99 = sorted
        .get(sorted.len() * 99 / 100)
        .copied()
        .unwrap_or_default();
    let s = Stats::of(samples);
    println!(
        "| {size} ({in_window}) | {loops} | {} | {} | {} | {} – {} | {} | {compactions} | {} | {} |",
        human(s.median),
        human(mean),
        human(p99),
        human(s.min),
        human(s.max),
        human(Stats::of(saves).median),
        file_kb(&store.path(hank::store::HankFile::State)),
        file_kb(&store.dir().join("state.json.calls")),
    );
    Ok(())
}

fn main() -> common::Res<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let sizes: Vec<usize> = args
        .first()
        .map_or("100,1000,10000", String::as_str)
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|n| *n > 0)
        .collect();
    let loops: Option<usize> = args.get(1).and_then(|s| s.parse().ok());
    let tmp = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
    println!("# state save per loop (after {WARMUP} warm-up loops, project in {tmp})");
    println!();
    println!(
        "| calls in window (after) | loops | median | mean | p99 | min – max | save only | compactions | state.json | state.json.calls |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for size in sizes {
        run(size, loops.unwrap_or(size.saturating_mul(4).max(3000)))?;
    }
    Ok(())
}
