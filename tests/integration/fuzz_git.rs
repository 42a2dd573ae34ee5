//! Fuzz targets for the readers of agent-written git data: the index (`hank::git::index`)
//! and the object database's pack index and pack (`hank::git::odb`). The agent writes these
//! files; whatever they hold, the readers answer (an entry, an object, or an error) without a
//! panic, an abort or unbounded memory. The mutations start from a real index and a real pack
//! (made by git) and flip, cut and splice their bytes.
//!
//! By hand: `PROPTEST_CASES=100000 cargo test --release --test integration fuzz_ -- --ignored`.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::Config;

fn config() -> Config {
    Config {
        failure_persistence: None,
        ..Config::default()
    }
}

/// A repository with a few commits, packed: its index, its `.idx` and `.pack` bytes, and the
/// ids of its objects.
struct Seed {
    index: Vec<u8>,
    idx: Vec<u8>,
    pack: Vec<u8>,
    ids: Vec<[u8; 20]>,
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@e"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn seed() -> &'static Seed {
    static SEED: std::sync::OnceLock<Seed> = std::sync::OnceLock::new();
    SEED.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        git(d, &["init", "-q"]);
        for i in 0..4 {
            std::fs::create_dir_all(d.join(format!("src/m{i}"))).expect("mkdir");
            std::fs::write(
                d.join(format!("src/m{i}/f.txt")),
                format!("{i}\n").repeat(40),
            )
            .expect("write");
            std::fs::write(d.join("top.txt"), format!("round {i}\n").repeat(30)).expect("write");
            git(d, &["add", "-A"]);
            git(d, &["commit", "-qm", &format!("c{i}")]);
        }
        git(d, &["gc", "-q", "--aggressive", "--prune=now"]);
        let pack_dir = d.join(".git/objects/pack");
        let find = |ext: &str| -> PathBuf {
            std::fs::read_dir(&pack_dir)
                .expect("pack dir")
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == ext))
                .expect("pack file")
        };
        let ids = git(d, &["rev-list", "--objects", "--all"])
            .lines()
            .filter_map(|l| hank::git::odb::parse_hex(l.split(' ').next().unwrap_or("")))
            .collect();
        Seed {
            index: std::fs::read(d.join(".git/index")).expect("index"),
            idx: std::fs::read(find("idx")).expect("idx"),
            pack: std::fs::read(find("pack")).expect("pack"),
            ids,
        }
    })
}

/// A mutation of `good`: bytes flipped at places, a cut, a spliced run.
#[derive(Debug, Clone)]
struct Mutation {
    flips: Vec<(usize, u8)>,
    cut: Option<usize>,
    splice: Option<(usize, Vec<u8>)>,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    (
        prop::collection::vec((any::<usize>(), 1u8..=255), 0..8),
        prop::option::of(any::<usize>()),
        prop::option::of((any::<usize>(), prop::collection::vec(any::<u8>(), 0..64))),
    )
        .prop_map(|(flips, cut, splice)| Mutation { flips, cut, splice })
}

fn apply(good: &[u8], m: &Mutation) -> Vec<u8> {
    let mut b = good.to_vec();
    if b.is_empty() {
        return b;
    }
    for (at, x) in &m.flips {
        let i = at % b.len();
        b[i] ^= x;
    }
    if let Some((at, run)) = &m.splice {
        let i = at % b.len();
        let end = (i + run.len()).min(b.len());
        b.splice(i..end, run.iter().copied());
    }
    if let Some(at) = m.cut {
        b.truncate(at % (b.len() + 1));
    }
    b
}

fn read_index(bytes: &[u8]) {
    let mut n = 0u64;
    let _ = hank::git::index::read(bytes, |_| n += 1);
}

/// An objects directory holding the pack (`idx`, `pack`), every seed object read from it.
fn read_pack(idx: &[u8], pack: &[u8]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let packs = dir.path().join("pack");
    std::fs::create_dir_all(&packs).expect("mkdir");
    std::fs::write(packs.join("pack-f.idx"), idx).expect("write");
    std::fs::write(packs.join("pack-f.pack"), pack).expect("write");
    if let Ok(mut odb) = hank::git::odb::Odb::open(dir.path()) {
        for id in &seed().ids {
            if let Ok(o) = odb.read(id) {
                assert!(o.data.len() as u64 <= hank::git::odb::MAX_OBJECT);
            }
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    #[ignore = "fuzzing run: PROPTEST_CASES=100000 cargo test --release --test integration fuzz_ -- --ignored"]
    fn fuzz_index_reader(m in mutation(), raw in prop::collection::vec(any::<u8>(), 0..512)) {
        read_index(&apply(&seed().index, &m));
        let mut dirc = b"DIRC\0\0\0\x02".to_vec();
        dirc.extend_from_slice(&raw);
        read_index(&dirc);
    }

    #[test]
    #[ignore = "fuzzing run: PROPTEST_CASES=100000 cargo test --release --test integration fuzz_ -- --ignored"]
    fn fuzz_pack_reader(mi in mutation(), mp in mutation()) {
        let s = seed();
        read_pack(&apply(&s.idx, &mi), &s.pack);
        read_pack(&s.idx, &apply(&s.pack, &mp));
    }
}

/// The targets run in the normal suite too, on a fixed set of mutations, so they cannot rot.
#[test]
fn fuzz_git_readers_smoke() {
    let s = seed();
    read_index(&s.index);
    read_pack(&s.idx, &s.pack);
    for at in (0..s.index.len()).step_by(7) {
        let m = Mutation {
            flips: vec![(at, 0x5a)],
            cut: None,
            splice: None,
        };
        read_index(&apply(&s.index, &m));
        read_index(&s.index[..at]);
    }
    for at in (0..s.pack.len()).step_by(s.pack.len() / 64 + 1) {
        let m = Mutation {
            flips: vec![(at, 0xa5)],
            cut: None,
            splice: None,
        };
        read_pack(&s.idx, &apply(&s.pack, &m));
    }
    for at in (0..s.idx.len()).step_by(s.idx.len() / 64 + 1) {
        let m = Mutation {
            flips: vec![(at, 0xff)],
            cut: Some(s.idx.len() - at / 2),
            splice: None,
        };
        read_pack(&apply(&s.idx, &m), &s.pack);
    }
}
