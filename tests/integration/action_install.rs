//! The action's release path (`scripts/action-install.sh`, the "Install hank" step of
//! `action.yml`): the asset for the runner's OS and architecture, installed only when its
//! SHA-256 matches; a clear error for a runner without a build, a missing release, a bad
//! checksum, or a version asked of an action used from a path. `gh` is the fake of
//! `fixtures/bin/gh` (assets from a folder), nothing leaves the machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{fixtures, stderr, stdout};

struct Runner {
    _dir: tempfile::TempDir,
    temp: PathBuf,
    releases: PathBuf,
    github_path: PathBuf,
}

fn runner() -> Runner {
    let dir = tempfile::tempdir().unwrap();
    let temp = dir.path().join("runner-temp");
    let releases = dir.path().join("releases");
    std::fs::create_dir_all(&temp).unwrap();
    std::fs::create_dir_all(&releases).unwrap();
    let github_path = dir.path().join("github-path");
    Runner {
        _dir: dir,
        temp,
        releases,
        github_path,
    }
}

/// A release `tag` whose asset for `target` holds a `hank` that prints `version`; the
/// checksum file says `sum` (`None`: the asset's real SHA-256).
fn release(r: &Runner, tag: &str, target: &str, version: &str, sum: Option<&str>) {
    let dir = r.releases.join(tag);
    let stage = r.temp.join("stage");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&stage).unwrap();
    let hank = stage.join("hank");
    std::fs::write(&hank, format!("#!/bin/sh\necho 'hank {version}'\n")).unwrap();
    run_ok(Command::new("chmod").args(["755"]).arg(&hank));
    let asset = format!("hank-{target}.tar.gz");
    run_ok(
        Command::new("tar")
            .arg("-czf")
            .arg(dir.join(&asset))
            .arg("-C")
            .arg(&stage)
            .arg("hank"),
    );
    let real =
        String::from_utf8(run_ok(Command::new("sha256sum").arg(dir.join(&asset))).stdout).unwrap();
    let real = real.split_whitespace().next().unwrap().to_string();
    std::fs::write(
        dir.join(format!("{asset}.sha256")),
        format!("{}  {asset}\n", sum.unwrap_or(&real)),
    )
    .unwrap();
}

fn run_ok(c: &mut Command) -> Output {
    let o = c.output().unwrap();
    assert!(o.status.success(), "{c:?}: {}", stderr(&o));
    o
}

fn install(r: &Runner, version: &str, os: &str, arch: &str, repo: &str) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/action-install.sh");
    Command::new("bash")
        .arg(script)
        .env_clear()
        .env(
            "PATH",
            format!(
                "{}:/usr/local/bin:/usr/bin:/bin",
                fixtures().join("bin").display()
            ),
        )
        .env("HANK_VERSION", version)
        .env("ACTION_REPOSITORY", repo)
        .env("RUNNER_OS", os)
        .env("RUNNER_ARCH", arch)
        .env("RUNNER_TEMP", &r.temp)
        .env("GITHUB_PATH", &r.github_path)
        .env("FAKE_GH_RELEASES", &r.releases)
        .output()
        .unwrap()
}

fn installed(r: &Runner) -> PathBuf {
    r.temp.join("hank-bin/hank")
}

#[test]
fn the_release_asset_of_the_runner_is_installed_when_its_checksum_matches() {
    let r = runner();
    release(&r, "v1.2.0", "x86_64-unknown-linux-gnu", "1.2.0 x64", None);
    release(&r, "v1.2.0", "aarch64-apple-darwin", "1.2.0 mac", None);
    let o = install(&r, "v1.2.0", "Linux", "X64", "someone/hank");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("hank 1.2.0 x64"), "{}", stdout(&o));
    let added = std::fs::read_to_string(&r.github_path).unwrap();
    assert_eq!(added.trim(), r.temp.join("hank-bin").display().to_string());
    // Another runner kind takes its own asset.
    let o = install(&r, "v1.2.0", "macOS", "ARM64", "someone/hank");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("hank 1.2.0 mac"), "{}", stdout(&o));
}

#[test]
fn a_bad_checksum_a_missing_release_or_an_unknown_runner_installs_nothing() {
    let r = runner();
    release(
        &r,
        "v1.3.0",
        "x86_64-unknown-linux-gnu",
        "1.3.0",
        Some("0000000000000000000000000000000000000000000000000000000000000000"),
    );
    let o = install(&r, "v1.3.0", "Linux", "X64", "someone/hank");
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("does not match its checksum"),
        "{}",
        stdout(&o)
    );
    assert!(!installed(&r).exists());

    // No asset for this runner in the release.
    let o = install(&r, "v1.3.0", "Linux", "ARM64", "someone/hank");
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("cannot download hank-aarch64-unknown-linux-gnu.tar.gz"));
    assert!(!installed(&r).exists());

    for (os, arch) in [("Windows", "X64"), ("Linux", "ARM")] {
        let o = install(&r, "v1.3.0", os, arch, "someone/hank");
        assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
        assert!(
            stdout(&o).contains(&format!("no release build for {os}/{arch}")),
            "{}",
            stdout(&o)
        );
    }
    // An action used from a path has no releases.
    let o = install(&r, "v1.3.0", "Linux", "X64", "");
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("used from a path"), "{}", stdout(&o));
    assert!(!installed(&r).exists());
    assert!(!r.github_path.exists());
}
