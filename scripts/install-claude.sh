#!/usr/bin/env bash
# Installs the real Claude Code clients hank is tested against (npm package
# @anthropic-ai/claude-code; versions in scripts/claude-versions.env) into a cache folder for
# the contract suite, and prints their `claude` paths on stdout, joined with ':'.
#
#   export HANK_REAL_CLAUDE=$(scripts/install-claude.sh)     # oldest and newest tested
#   scripts/install-claude.sh newest                         # one: oldest | newest | X.Y.Z
#   cargo test --test contract
#
# Environment: HANK_CLAUDE_CACHE (default ~/.cache/hank-claude). Needs npm and the npm
# registry; nothing else is downloaded (the native binary arrives as an optional dependency
# of the package). Progress goes to stderr. Exits 1 if any requested client cannot be installed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=claude-versions.env
. "$here/claude-versions.env"
cache="${HANK_CLAUDE_CACHE:-${HOME:-/tmp}/.cache/hank-claude}"

command -v npm >/dev/null 2>&1 || { echo "install-claude.sh: npm is required" >&2; exit 1; }

works() { [ -x "$1" ] && "$1" --version 2>/dev/null | grep -q "^$2 "; }

install_one() { # VERSION → prints the binary's path
    local version="$1" prefix="$cache/$1" bin="$cache/$1/node_modules/.bin/claude"
    if ! works "$bin" "$version"; then
        echo "install-claude.sh: installing @anthropic-ai/claude-code@$version into $prefix" >&2
        mkdir -p "$prefix"
        # --ignore-scripts is not used: the postinstall step links the native binary.
        npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
            "@anthropic-ai/claude-code@$version" >&2
    fi
    if ! works "$bin" "$version"; then
        echo "install-claude.sh: $bin does not report version $version" >&2
        return 1
    fi
    printf '%s' "$bin"
}

case "${1:-all}" in
    all) versions=("$CLAUDE_OLDEST" "$CLAUDE_NEWEST") ;;
    oldest) versions=("$CLAUDE_OLDEST") ;;
    newest) versions=("$CLAUDE_NEWEST") ;;
    [0-9]*) versions=("$1") ;;
    *) echo "install-claude.sh: expected all, oldest, newest or a version X.Y.Z, got '$1'" >&2; exit 1 ;;
esac

paths=()
for v in "${versions[@]}"; do
    paths+=("$(install_one "$v")")
done
(IFS=:; printf '%s\n' "${paths[*]}")
