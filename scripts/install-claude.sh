#!/usr/bin/env bash
# Installs the real Claude Code client (npm package @anthropic-ai/claude-code, pinned) into a
# cache folder for hank's contract tests, and prints the path of its `claude` binary on stdout.
#
#   scripts/install-claude.sh            # install (or reuse) and print the path
#   export HANK_REAL_CLAUDE=$(scripts/install-claude.sh)
#   cargo test --test integration contract
#
# Environment: HANK_CLAUDE_CACHE (default ~/.cache/hank-claude), HANK_CLAUDE_VERSION (default
# the pinned version below). Needs npm and the npm registry; nothing else is downloaded (the
# native binary arrives as an optional dependency of the package). Progress goes to stderr.
set -euo pipefail

version="${HANK_CLAUDE_VERSION:-2.1.197}"
cache="${HANK_CLAUDE_CACHE:-${HOME:-/tmp}/.cache/hank-claude}"
prefix="$cache/$version"
bin="$prefix/node_modules/.bin/claude"

command -v npm >/dev/null 2>&1 || { echo "install-claude.sh: npm is required" >&2; exit 1; }

works() { [ -x "$1" ] && "$1" --version 2>/dev/null | grep -q "^$version "; }

if ! works "$bin"; then
    echo "install-claude.sh: installing @anthropic-ai/claude-code@$version into $prefix" >&2
    mkdir -p "$prefix"
    # --ignore-scripts is not used: the postinstall step links the native binary.
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
        "@anthropic-ai/claude-code@$version" >&2
fi
if ! works "$bin"; then
    echo "install-claude.sh: $bin does not report version $version" >&2
    exit 1
fi
printf '%s\n' "$bin"
