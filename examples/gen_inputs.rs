//! Generates large, realistic inputs for hank's benchmarks into a directory of your choice
//! (never into git):
//!
//! ```text
//! cargo run --release --example gen_inputs -- result|array|stream|text SIZE OUT_FILE
//! cargo run --release --example gen_inputs -- repo FILES OUT_DIR [--no-git]
//! ```
//! SIZE accepts `64k`, `100M`, `1G`. `repo` writes FILES source files in nested directories,
//! an ignored `target/`, a `.gitignore`, and commits them (unless `--no-git`).

mod common;

use std::path::Path;

fn main() -> common::Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: gen_inputs result|array|stream|text SIZE OUT_FILE | repo FILES OUT_DIR [--no-git]";
    let (Some(kind), Some(size), Some(out)) = (args.first(), args.get(1), args.get(2)) else {
        return Err(usage.into());
    };
    if kind == "repo" {
        let files: usize = size
            .parse()
            .map_err(|_| format!("FILES must be a number, got {size:?}"))?;
        let dir = Path::new(out);
        std::fs::create_dir_all(dir)?;
        common::project_tree(dir, files, !args.iter().any(|a| a == "--no-git"))?;
        println!("{files} files in {}", dir.display());
        return Ok(());
    }
    let shape = common::Shape::parse(kind).ok_or(usage)?;
    let bytes = common::parse_size(size).ok_or_else(|| format!("bad SIZE {size:?} (e.g. 100M)"))?;
    let written = common::generate(shape, bytes, Path::new(out))?;
    println!("{} {written} bytes → {out}", shape.name());
    Ok(())
}
