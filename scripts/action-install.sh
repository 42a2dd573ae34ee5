#!/usr/bin/env bash
# The hank action's "Install hank" step (action.yml). With HANK_VERSION (the input `version`):
# the release asset hank-<target>.tar.gz of ACTION_REPOSITORY for this runner (RUNNER_OS and
# RUNNER_ARCH: Linux or macOS, X64 or ARM64), downloaded with `gh release download` (GH_TOKEN)
# and checked against hank-<target>.tar.gz.sha256 before anything is installed. Without it:
# hank built from the action's own source (GITHUB_ACTION_PATH, `cargo build --release
# --locked`). The binary goes to $RUNNER_TEMP/hank-bin, which is added to $GITHUB_PATH.
# scripts/release-asset.sh makes the two files a release carries.
set -euo pipefail

fail() {
    echo "::error::$*"
    exit 1
}

bin="${RUNNER_TEMP:?RUNNER_TEMP is not set}/hank-bin"
mkdir -p "$bin"
if [ -n "${HANK_VERSION:-}" ]; then
    [ -n "${ACTION_REPOSITORY:-}" ] ||
        fail "version: $HANK_VERSION names a release, but this action is used from a path (no repository to download it from); leave version empty to build hank from the action's source"
    case "${RUNNER_OS:-}/${RUNNER_ARCH:-}" in
        Linux/X64) target=x86_64-unknown-linux-gnu ;;
        Linux/ARM64) target=aarch64-unknown-linux-gnu ;;
        macOS/X64) target=x86_64-apple-darwin ;;
        macOS/ARM64) target=aarch64-apple-darwin ;;
        *) fail "hank has no release build for ${RUNNER_OS:-?}/${RUNNER_ARCH:-?} (Linux and macOS, X64 and ARM64)" ;;
    esac
    asset="hank-$target.tar.gz"
    dl="$RUNNER_TEMP/hank-release"
    rm -rf "$dl"
    mkdir -p "$dl"
    gh release download "$HANK_VERSION" --repo "$ACTION_REPOSITORY" \
        --pattern "$asset" --pattern "$asset.sha256" --dir "$dl" --clobber ||
        fail "cannot download $asset and $asset.sha256 of release $HANK_VERSION of $ACTION_REPOSITORY; leave version empty to build hank from the action's source"
    want=$(cut -d' ' -f1 <"$dl/$asset.sha256")
    if command -v sha256sum >/dev/null; then
        got=$(sha256sum "$dl/$asset" | cut -d' ' -f1)
    else
        got=$(shasum -a 256 "$dl/$asset" | cut -d' ' -f1)
    fi
    if [ -z "$want" ] || [ "$want" != "$got" ]; then
        fail "$asset of release $HANK_VERSION does not match its checksum ($asset.sha256: ${want:-empty}; the file: $got); nothing installed"
    fi
    tar -xzf "$dl/$asset" -C "$dl" hank || fail "$asset of release $HANK_VERSION has no file hank"
    install -m 0755 "$dl/hank" "$bin/hank"
    # Releases before the sandbox's own program have only hank (which then starts the agent).
    if tar -xzf "$dl/$asset" -C "$dl" hank-sandbox 2>/dev/null; then
        install -m 0755 "$dl/hank-sandbox" "$bin/hank-sandbox"
    fi
else
    cargo build --release --locked --manifest-path "${GITHUB_ACTION_PATH:?}/Cargo.toml"
    "$GITHUB_ACTION_PATH/scripts/sandbox-static.sh" --release
    install -m 0755 "$GITHUB_ACTION_PATH/target/release/hank" "$bin/hank"
    install -m 0755 "$GITHUB_ACTION_PATH/target/release/hank-sandbox" "$bin/hank-sandbox"
fi
echo "$bin" >>"${GITHUB_PATH:?GITHUB_PATH is not set}"
"$bin/hank" --version
