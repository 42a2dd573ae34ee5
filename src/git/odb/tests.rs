//! The object reader and the tree diff against real git: a generated history (nested
//! directories, deletions, renames, the exec bit, symlinks, a gitlink, a file replaced by a
//! directory of the same name and back, `a.b` beside `a/`, hank's files at the top and in a
//! project subdirectory), compared with `git diff --name-only` and `git ls-tree -r` for many
//! commit pairs while its objects are loose, after `git gc`, after `git repack -adf
//! --depth=50` (long `OFS_DELTA` chains), repacked with `REF_DELTA` entries, fetched as a
//! thin pack completed by `index-pack --fix-thin`, through a linked worktree (objects in the
//! common directory) and through alternates (`git clone -s`).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::*;
use crate::git::git_in;
use crate::git::snapshot::layout;

/// xorshift64*: a deterministic corpus without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn git_out(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = crate::git::Checkout::at(dir).git().read_unfiltered(args);
    out.unwrap_or_else(|e| panic!("git {args:?}: {e}"))
}

fn names(out: &[u8]) -> Vec<String> {
    out.split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

fn head(dir: &Path) -> Oid {
    let out = git_out(dir, &["rev-parse", "HEAD"]);
    parse_hex(&String::from_utf8_lossy(&out)).unwrap()
}

/// The paths the history touches: `a` is a file at times and a directory at others.
const PATHS: &[&str] = &[
    "a",
    "a.b",
    "a/x",
    "a/y/z",
    "a-c",
    "b/c/d.txt",
    "b/c/e.txt",
    "b/f",
    "c d/\u{fc} \u{f1}.txt",
    "x/y/z/w/deep",
    ".hank/state.json",
    ".hankrc",
    ".hankish",
    "proj/p.txt",
    "proj/a",
    "proj/a.b",
    "proj/a/r",
    "proj/.hank/log",
    "proj/.hankrc",
    "proj/sub/q",
    "proj/sub/.hank/kept",
];

/// Makes room for a file at `rel`: a file where a parent directory must be, or a directory
/// where the file must be, is removed.
fn clear_for(d: &Path, rel: &str) {
    let mut at = d.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for p in &parts[..parts.len() - 1] {
        at.push(p);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| !m.is_dir()) {
            std::fs::remove_file(&at).unwrap();
        }
    }
    let full = d.join(rel);
    match std::fs::symlink_metadata(&full) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&full).unwrap(),
        Ok(_) => std::fs::remove_file(&full).unwrap(),
        Err(_) => {}
    }
}

/// A file of many similar lines (so that packs hold deltas), one line changed per version.
fn content(rng: &mut Rng, rel: &str) -> String {
    let mut s = String::new();
    let changed = rng.below(40);
    for i in 0..40 {
        if i == changed {
            s.push_str(&format!("{rel} line {i} version {}\n", rng.next()));
        } else {
            s.push_str(&format!(
                "{rel} line {i} of a file that stays mostly the same\n"
            ));
        }
    }
    s
}

fn existing_files(d: &Path) -> Vec<String> {
    PATHS
        .iter()
        .filter(|p| std::fs::symlink_metadata(d.join(p)).is_ok_and(|m| !m.is_dir()))
        .map(|p| (*p).to_string())
        .collect()
}

/// One round of random changes, staged with a gitlink set or moved, and committed.
fn round(d: &Path, rng: &mut Rng, i: usize) {
    for _ in 0..1 + rng.below(4) {
        let rel = PATHS[rng.below(PATHS.len())];
        match rng.below(8) {
            0..=2 => {
                clear_for(d, rel);
                std::fs::create_dir_all(d.join(rel).parent().unwrap()).unwrap();
                std::fs::write(d.join(rel), content(rng, rel)).unwrap();
            }
            3 => {
                let files = existing_files(d);
                if !files.is_empty() {
                    let f = &files[rng.below(files.len())];
                    std::fs::remove_file(d.join(f)).unwrap();
                }
            }
            4 => {
                // A rename: delete + add for --no-renames.
                let files = existing_files(d);
                if !files.is_empty() {
                    let f = files[rng.below(files.len())].clone();
                    let text = std::fs::read(d.join(&f)).unwrap_or_default();
                    std::fs::remove_file(d.join(&f)).unwrap();
                    clear_for(d, rel);
                    std::fs::create_dir_all(d.join(rel).parent().unwrap()).unwrap();
                    std::fs::write(d.join(rel), text).unwrap();
                }
            }
            5 => {
                let files = existing_files(d);
                if !files.is_empty() {
                    let f = d.join(&files[rng.below(files.len())]);
                    if let Ok(m) = std::fs::symlink_metadata(&f)
                        && m.is_file()
                    {
                        let mode = m.permissions().mode() ^ 0o111;
                        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode))
                            .unwrap();
                    }
                }
            }
            6 => {
                // A symlink (a file becomes a link: a type change).
                clear_for(d, rel);
                std::fs::create_dir_all(d.join(rel).parent().unwrap()).unwrap();
                std::os::unix::fs::symlink(format!("target-{}", rng.below(3)), d.join(rel))
                    .unwrap();
            }
            _ => {
                // The whole of a directory removed (a tree gone).
                let dir = ["a", "b", "proj/a", "proj/sub", "x"][rng.below(5)];
                clear_for(d, dir);
            }
        }
    }
    // One file changed every round: long delta chains once repacked.
    let chain = d.join("z/chain.txt");
    let mut lines: Vec<String> = std::fs::read_to_string(&chain)
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_else(|_| (0..300).map(|l| format!("line {l}")).collect());
    // A random walk: each version is nearest to the one before, so deltas chain.
    for _ in 0..3 {
        let l = rng.below(lines.len());
        lines[l] = format!("line {l} changed in round {i}: {}", rng.next());
    }
    std::fs::create_dir_all(d.join("z")).unwrap();
    std::fs::write(&chain, lines.join("\n")).unwrap();
    git_in(d, &["add", "-A"]);
    match rng.below(4) {
        0 => {
            let id = format!("{:016x}{:016x}{:08x}", rng.next(), rng.next(), i);
            let info = format!("160000,{id},gl");
            git_in(d, &["update-index", "--add", "--cacheinfo", &info]);
            let info = format!("160000,{id},proj/gl");
            git_in(d, &["update-index", "--add", "--cacheinfo", &info]);
        }
        1 => git_in(d, &["update-index", "--force-remove", "gl", "proj/gl"]),
        _ => {}
    }
    git_in(
        d,
        &["commit", "-q", "--allow-empty", "-m", &format!("r{i}")],
    );
}

/// Compares the reader with git in `project` (a directory of a work tree) for every adjacent
/// pair of `commits`, `extra` random pairs, and each commit alone; returns how many answers
/// named at least one path.
fn compare(project: &Path, commits: &[Oid], rng: &mut Rng, extra: usize) -> usize {
    std::fs::create_dir_all(project).unwrap();
    let lay = layout(project).unwrap();
    let mut pairs: Vec<(usize, usize)> = (1..commits.len()).map(|i| (i - 1, i)).collect();
    for _ in 0..extra {
        pairs.push((rng.below(commits.len()), rng.below(commits.len())));
    }
    let mut named = 0;
    for (x, y) in pairs {
        let (a, b) = (hex(&commits[x]), hex(&commits[y]));
        let mut args = vec![
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--name-only",
            "-z",
            "--no-renames",
            "--relative",
            "--ignore-submodules=none",
            &a,
            &b,
        ];
        // progress's pathspec (`worktree::PATHSPEC`; named here: git/ does not use worktree).
        args.extend(["--", ".", ":(exclude).hank", ":(exclude).hankrc"]);
        let want = names(&git_out(project, &args));
        let got = changed_files(&lay, Some(commits[x]), Some(commits[y])).unwrap();
        assert_eq!(got, want, "{} {a}..{b}", project.display());
        named += usize::from(!want.is_empty());
    }
    for c in commits.iter().step_by(3) {
        let want = names(&git_out(
            project,
            &["ls-tree", "-r", "--name-only", "-z", &hex(c)],
        ));
        assert_eq!(changed_files(&lay, None, Some(*c)).unwrap(), want);
        assert_eq!(changed_files(&lay, Some(*c), None).unwrap(), want);
    }
    named
}

fn history(d: &Path, rng: &mut Rng, rounds: usize) -> Vec<Oid> {
    let mut commits = Vec::new();
    for i in 0..rounds {
        round(d, rng, i);
        commits.push(head(d));
    }
    commits
}

fn count_objects(d: &Path) -> String {
    String::from_utf8_lossy(&git_out(d, &["count-objects", "-v"])).into_owned()
}

/// The pack entries of `d` by type (`git verify-pack -v` of every pack).
fn pack_kinds(d: &Path) -> String {
    let mut all = String::new();
    for e in std::fs::read_dir(d.join(".git/objects/pack"))
        .unwrap()
        .flatten()
    {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "idx") {
            let s = p.to_string_lossy().into_owned();
            all.push_str(&String::from_utf8_lossy(&git_out(
                d,
                &["verify-pack", "-v", &s],
            )));
        }
    }
    all
}

/// How many entries of `d`'s packs are `REF_DELTA`s and `OFS_DELTA`s, read by [`Pack`].
fn delta_entries(d: &Path) -> (usize, usize) {
    let (mut by_ref, mut by_ofs) = (0, 0);
    for p in list_packs(&d.join(".git/objects")).unwrap() {
        let s = p.path.with_extension("idx").to_string_lossy().into_owned();
        for line in String::from_utf8_lossy(&git_out(d, &["verify-pack", "-v", &s])).lines() {
            let Some(id) = line.split(' ').next().and_then(parse_hex) else {
                continue;
            };
            let at = p.find(&id).unwrap().unwrap();
            match p.header(at).unwrap().base {
                Base::Id(_) => by_ref += 1,
                Base::Offset(_) => by_ofs += 1,
                Base::None(_) => {}
            }
        }
    }
    (by_ref, by_ofs)
}

#[test]
fn the_tree_diff_is_gits_loose_packed_and_delta_chained() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("repo");
    std::fs::create_dir_all(&d).unwrap();
    git_in(&d, &["init", "-q"]);
    let mut rng = Rng(0x0dd_5eed);
    let commits = history(&d, &mut rng, 60);
    let proj = d.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    // Loose objects only.
    assert!(
        count_objects(&d).contains("packs: 0"),
        "{}",
        count_objects(&d)
    );
    let named = compare(&d, &commits, &mut rng, 60);
    assert!(named > 40, "a corpus that changes little: {named}");
    compare(&proj, &commits, &mut rng, 30);

    // Packed, with deltas.
    git_in(&d, &["gc", "-q", "--prune=now"]);
    assert!(
        count_objects(&d).contains("count: 0"),
        "{}",
        count_objects(&d)
    );
    compare(&d, &commits, &mut rng, 60);
    compare(&proj, &commits, &mut rng, 30);

    // Long OFS_DELTA chains.
    git_in(&d, &["repack", "-adfq", "--depth=50", "--window=250"]);
    let kinds = pack_kinds(&d);
    let longest = kinds
        .lines()
        .filter_map(|l| l.strip_prefix("chain length = "))
        .filter_map(|l| l.split(':').next()?.parse::<usize>().ok())
        .max();
    assert!(longest >= Some(20), "no long chain: {longest:?}");
    assert!(
        matches!(delta_entries(&d), (0, n) if n > 50),
        "{:?}",
        delta_entries(&d)
    );
    compare(&d, &commits, &mut rng, 60);

    // REF_DELTA entries (no offset deltas).
    git_in(
        &d,
        &[
            "-c",
            "repack.useDeltaBaseOffset=false",
            "repack",
            "-adfq",
            "--depth=50",
        ],
    );
    assert!(
        matches!(delta_entries(&d), (n, 0) if n > 50),
        "{:?}",
        delta_entries(&d)
    );
    compare(&d, &commits, &mut rng, 60);
    compare(&proj, &commits, &mut rng, 30);

    // A linked worktree reads the common directory's objects.
    let wt = tmp.path().join("wt");
    git_in(
        &d,
        &["worktree", "add", "-q", "--detach", &wt.to_string_lossy()],
    );
    compare(&wt, &commits, &mut rng, 30);
    compare(&wt.join("proj"), &commits, &mut rng, 10);
}

#[test]
fn thin_packs_and_alternates_read_as_git_does() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("repo");
    let bare = tmp.path().join("bare.git");
    let clone = tmp.path().join("clone");
    let shared = tmp.path().join("shared");
    std::fs::create_dir_all(&d).unwrap();
    git_in(&d, &["init", "-q"]);
    let mut rng = Rng(0x7417_9ac5);
    let mut commits = history(&d, &mut rng, 20);
    let (b, c, s) = (
        bare.to_string_lossy().into_owned(),
        clone.to_string_lossy().into_owned(),
        shared.to_string_lossy().into_owned(),
    );
    git_in(tmp.path(), &["init", "-q", "--bare", &b]);
    git_in(&d, &["push", "-q", &b, "HEAD:refs/heads/main"]);
    git_in(tmp.path(), &["clone", "-q", &b, &c]);
    // More history fetched as a thin pack, kept as a pack (fix-thin: REF_DELTA on bases
    // appended whole).
    commits.extend(history(&d, &mut rng, 20));
    git_in(&d, &["push", "-q", &b, "HEAD:refs/heads/main"]);
    git_in(
        &clone,
        &[
            "-c",
            "fetch.unpackLimit=1",
            "-c",
            "transfer.unpackLimit=1",
            "fetch",
            "-q",
            "origin",
        ],
    );
    git_in(&clone, &["reset", "-q", "--hard", "origin/main"]);
    let packs = std::fs::read_dir(clone.join(".git/objects/pack"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .count();
    assert!(packs >= 2, "the fetch left no pack of its own");
    assert!(delta_entries(&clone).0 > 0, "{:?}", delta_entries(&clone));
    assert!(
        count_objects(&clone).contains("count: 0"),
        "{}",
        count_objects(&clone)
    );
    compare(&clone, &commits, &mut rng, 60);
    compare(&clone.join("proj"), &commits, &mut rng, 20);

    // Alternates: a shared clone's own commits are loose, the rest in the origin's objects.
    git_in(&d, &["gc", "-q", "--prune=now"]);
    git_in(tmp.path(), &["clone", "-q", "-s", &d.to_string_lossy(), &s]);
    assert!(shared.join(".git/objects/info/alternates").is_file());
    commits.extend(history(&shared, &mut rng, 10));
    compare(&shared, &commits, &mut rng, 40);
}

#[test]
fn replacement_refs_and_missing_objects_are_unreadable() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    git_in(d, &["init", "-q"]);
    std::fs::write(d.join("f"), "1").unwrap();
    git_in(d, &["add", "-A"]);
    git_in(d, &["commit", "-q", "-m", "1"]);
    let one = head(d);
    std::fs::write(d.join("f"), "2").unwrap();
    git_in(d, &["commit", "-q", "-am", "2"]);
    let two = head(d);
    let lay = layout(d).unwrap();
    assert_eq!(
        changed_files(&lay, Some(one), Some(two)).unwrap(),
        vec!["f"]
    );
    let missing = [7u8; 20];
    assert!(changed_files(&lay, Some(one), Some(missing)).is_err());
    git_in(d, &["replace", &hex(&two), &hex(&one)]);
    assert!(changed_files(&lay, Some(one), Some(two)).is_err());
}

#[test]
fn git_tree_order_puts_a_dot_b_before_the_tree_a() {
    let e = |name: &'static [u8], mode| Entry {
        name,
        mode,
        id: [0; 20],
    };
    use std::cmp::Ordering::*;
    // (a, b, order)
    let cases = [
        (e(b"a.b", 0o100_644), e(b"a", 0o040_000), Less),
        (e(b"a", 0o100_644), e(b"a.b", 0o100_644), Less),
        (e(b"a", 0o040_000), e(b"a-c", 0o100_644), Greater),
        (e(b"a", 0o100_644), e(b"a", 0o040_000), Less),
        (e(b"a", 0o160_000), e(b"a", 0o100_644), Equal),
        (e(b"a0", 0o100_644), e(b"a", 0o040_000), Greater),
    ];
    for (a, b, want) in cases {
        assert_eq!(diff::order(&a, &b), want, "{a:?} {b:?}");
    }
}

#[test]
fn corrupt_objects_and_deltas_never_panic() {
    // Deltas: every truncation and a few bad ones.
    let base = b"hello world, hello git".to_vec();
    // src 22, dst 11; copy 5 from 0; insert " there".
    let delta = [
        22u8,
        11,
        0x90 | 0x01,
        0,
        5,
        6,
        b' ',
        b't',
        b'h',
        b'e',
        b'r',
        b'e',
    ];
    assert_eq!(apply_delta(&base, &delta).unwrap(), b"hello there");
    for cut in 0..delta.len() {
        assert!(apply_delta(&base, &delta[..cut]).is_err(), "cut at {cut}");
    }
    assert!(apply_delta(&base, &[22, 1, 0]).is_err(), "opcode 0");
    assert!(
        apply_delta(&base, &[22, 5, 0x91, 20, 5]).is_err(),
        "copy outside"
    );
    assert!(
        apply_delta(&base, &[9, 1, 1, b'x']).is_err(),
        "wrong base size"
    );
    assert!(
        apply_delta(&base, &[22, 0xff, 0xff, 0xff, 0xff, 0x7f]).is_err(),
        "a result past the cap"
    );
    // Trees.
    for bad in [&b"100644 a"[..], b"100644 a\0short", b"1x0644 a\0", b" a\0"] {
        assert!(diff::tree_entries(bad).is_err(), "{bad:?}");
    }
    // Every byte of a pack and a loose object flipped or cut: an answer or Unreadable.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    git_in(d, &["init", "-q"]);
    for i in 0..3 {
        std::fs::write(d.join("f"), format!("{i}\n").repeat(50)).unwrap();
        git_in(d, &["add", "-A"]);
        git_in(d, &["commit", "-q", "-m", "c"]);
    }
    let tip = head(d);
    let loose_tree = {
        let lay = layout(d).unwrap();
        let mut odb = Odb::open(&lay.common.join("objects")).unwrap();
        let c = odb.read(&tip).unwrap();
        assert_eq!(c.kind, Kind::Commit);
        parse_hex(std::str::from_utf8(&c.data[5..45]).unwrap()).unwrap()
    };
    let h = hex(&loose_tree);
    let loose = d.join(".git/objects").join(&h[..2]).join(&h[2..]);
    let good = std::fs::read(&loose).unwrap();
    for at in 0..good.len() {
        let mut bytes = good.clone();
        bytes[at] ^= 0x5a;
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(&loose, &bytes).unwrap();
        let mut odb = Odb::open(&d.join(".git/objects")).unwrap();
        let _ = odb.read(&loose_tree);
        std::fs::write(&loose, &good[..at]).unwrap();
        let mut odb = Odb::open(&d.join(".git/objects")).unwrap();
        assert!(odb.read(&loose_tree).is_err() || at == good.len());
    }
    std::fs::write(&loose, &good).unwrap();
    git_in(d, &["gc", "-q", "--prune=now"]);
    let pack = std::fs::read_dir(d.join(".git/objects/pack"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "pack"))
        .unwrap();
    let good = std::fs::read(&pack).unwrap();
    std::fs::set_permissions(&pack, std::fs::Permissions::from_mode(0o644)).unwrap();
    for at in 12..good.len() - 20 {
        let mut bytes = good.clone();
        bytes[at] ^= 0xa5;
        std::fs::write(&pack, &bytes).unwrap();
        if let Ok(mut odb) = Odb::open(&d.join(".git/objects")) {
            let _ = odb.read(&tip);
            let lay = layout(d).unwrap();
            let _ = changed_files(&lay, None, Some(tip));
        }
    }
}

/// A tree object of `n` entries `<prefix><i>`, each `mode` and `id`, written with git.
fn bomb_tree(d: &Path, n: usize, prefix: &str, mode: &str, id: &Oid) -> Oid {
    let mut names: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    // git's tree order (no name is a prefix of another's with a `/` here: plain sort).
    names.sort();
    let mut bytes = Vec::new();
    for name in names {
        bytes.extend_from_slice(format!("{mode} {name}\0").as_bytes());
        bytes.extend_from_slice(id);
    }
    let file = d.join("tree.bin");
    std::fs::write(&file, &bytes).unwrap();
    let f = file.to_string_lossy().into_owned();
    let out = git_out(d, &["hash-object", "-w", "-t", "tree", &f]);
    std::fs::remove_file(&file).unwrap();
    parse_hex(String::from_utf8_lossy(&out).trim()).unwrap()
}

fn commit_of(d: &Path, tree: &Oid) -> Oid {
    let out = git_out(
        d,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit-tree",
            &hex(tree),
            "-m",
            "bomb",
        ],
    );
    parse_hex(String::from_utf8_lossy(&out).trim()).unwrap()
}

#[test]
fn a_tree_bomb_is_cut_at_the_limits_never_walked_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git_in(d, &["init", "-q"]);
    std::fs::write(d.join("empty"), "").unwrap();
    let blob = git_out(d, &["hash-object", "-w", "empty"]);
    let blob = parse_hex(String::from_utf8_lossy(&blob).trim()).unwrap();
    // 1,000 × 1,000 × 1,000 = a billion paths from three small trees.
    let t0 = bomb_tree(d, 1000, "f", "100644", &blob);
    let t1 = bomb_tree(d, 1000, "d", "40000", &t0);
    let t2 = bomb_tree(d, 1000, "d", "40000", &t1);
    let bomb = commit_of(d, &t2);
    let lay = layout(d).unwrap();
    let c = changed_files_within(&lay, None, Some(bomb), LIMITS).unwrap();
    assert_eq!(c.paths.len(), LIMITS.paths);
    assert!(
        c.cut.as_deref().is_some_and(|w| w.contains("paths")),
        "{c:?}"
    );
    assert!(changed_files(&lay, None, Some(bomb)).is_err());
    // Against an ordinary commit too (the walk of two trees).
    let small = commit_of(d, &bomb_tree(d, 3, "f", "100644", &blob));
    let c = changed_files_within(&lay, Some(small), Some(bomb), LIMITS).unwrap();
    assert!(c.cut.is_some());
    // Empty trees name nothing but cost reads: the tree limit stops them.
    let empty = git_out(d, &["hash-object", "-w", "-t", "tree", "/dev/null"]);
    let empty = parse_hex(String::from_utf8_lossy(&empty).trim()).unwrap();
    let e1 = bomb_tree(d, 1000, "e", "40000", &empty);
    let e2 = bomb_tree(d, 1000, "e", "40000", &e1);
    let hollow = commit_of(d, &e2);
    let few = Limits {
        paths: 10,
        trees: 500,
        bytes: u64::MAX,
    };
    let c = changed_files_within(&lay, None, Some(hollow), few).unwrap();
    assert!(c.paths.is_empty());
    assert!(
        c.cut.as_deref().is_some_and(|w| w.contains("trees")),
        "{c:?}"
    );
    let c = changed_files_within(
        &lay,
        None,
        Some(hollow),
        Limits {
            bytes: 100_000,
            ..LIMITS
        },
    )
    .unwrap();
    assert!(
        c.cut.as_deref().is_some_and(|w| w.contains("bytes")),
        "{c:?}"
    );
    // Within the limits the answer is whole.
    let c = changed_files_within(&lay, None, Some(small), LIMITS).unwrap();
    assert_eq!((c.paths.len(), c.cut), (3, None));
}
