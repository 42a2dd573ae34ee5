#!/usr/bin/env bash
# Makes the two files a hank release carries for one target, as the action's release path
# (scripts/action-install.sh) downloads them: dist/hank-<target>.tar.gz (the binaries `hank`
# and `hank-sandbox`)
# and dist/hank-<target>.tar.gz.sha256 (`<sha256>  hank-<target>.tar.gz`).
#
#   scripts/release-asset.sh [TARGET]    default: the host's target (rustc -vV)
#
# Attach both to the GitHub release whose tag the action's `version` input names.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-$(rustc -vV | sed -n 's/^host: //p')}"
[ -n "$target" ] || { echo "release-asset.sh: cannot tell the target (pass one)" >&2; exit 1; }
cargo build --release --locked --target "$target"
scripts/sandbox-static.sh --release --target "$target"
mkdir -p dist
asset="hank-$target.tar.gz"
# hank, and the sandbox's own small program (what each sandboxed agent call starts through).
tar -czf "dist/$asset" -C "target/$target/release" hank hank-sandbox
(cd dist && sha256sum "$asset" >"$asset.sha256")
echo "dist/$asset"
echo "dist/$asset.sha256"
