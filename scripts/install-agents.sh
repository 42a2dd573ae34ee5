#!/usr/bin/env bash
# Installs the real agent CLIs other than Claude Code (pinned in scripts/agent-versions.env)
# into a cache folder for the contract suite, and prints `name=path` pairs joined with ':'.
#
#   export HANK_REAL_AGENTS=$(scripts/install-agents.sh)        # codex, gemini, opencode, copilot, aider
#   scripts/install-agents.sh codex                             # one of them
#   cargo test --test contract
#
# Environment: HANK_AGENTS_CACHE (default ~/.cache/hank-agents). Needs npm and the npm
# registry, and for aider python3 (with its venv module) and PyPI; nothing else is downloaded
# (native binaries arrive as optional dependencies, wheels from PyPI).
# Progress goes to stderr. Exits 1 if any requested CLI cannot be installed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=agent-versions.env
. "$here/agent-versions.env"
cache="${HANK_AGENTS_CACHE:-${HOME:-/tmp}/.cache/hank-agents}"

command -v npm >/dev/null 2>&1 || { echo "install-agents.sh: npm is required" >&2; exit 1; }

spec_of() { # NAME → package@version:binary
    case "$1" in
        codex) printf '%s' "$AGENT_CODEX" ;;
        gemini) printf '%s' "$AGENT_GEMINI" ;;
        opencode) printf '%s' "$AGENT_OPENCODE" ;;
        copilot) printf '%s' "$AGENT_COPILOT" ;;
        aider) printf '%s' "$AGENT_AIDER" ;;
        *) echo "install-agents.sh: expected codex, gemini, opencode, copilot or aider, got '$1'" >&2; return 1 ;;
    esac
}

works() { [ -x "$1" ] && "$1" --version 2>/dev/null | grep -q -F "$2"; }

install_pypi() { # NAME SPEC → prints name=path (a virtualenv of its own under the cache)
    local name="$1" spec="${2#pypi:}" pkg bin version prefix path
    pkg="${spec%:*}"; bin="${spec##*:}"
    version="${pkg##*==}"
    prefix="$cache/$name/$version"
    path="$prefix/bin/$bin"
    if ! works "$path" "$version"; then
        command -v python3 >/dev/null 2>&1 || { echo "install-agents.sh: python3 is required for $name" >&2; return 1; }
        echo "install-agents.sh: installing $pkg into $prefix" >&2
        rm -rf "$prefix"
        python3 -m venv "$prefix" >&2
        "$prefix/bin/python" -m pip install --quiet --disable-pip-version-check "$pkg" >&2
    fi
    if ! works "$path" "$version"; then
        echo "install-agents.sh: $path does not report version $version" >&2
        return 1
    fi
    printf '%s=%s' "$name" "$path"
}

install_one() { # NAME → prints name=path
    local name="$1" spec pkg version bin prefix path
    spec="$(spec_of "$name")"
    case "$spec" in pypi:*) install_pypi "$name" "$spec"; return ;; esac
    pkg="${spec%:*}"; bin="${spec##*:}"
    version="${pkg##*@}"
    prefix="$cache/$name/$version"
    path="$prefix/node_modules/.bin/$bin"
    if ! works "$path" "$version"; then
        echo "install-agents.sh: installing $pkg into $prefix" >&2
        mkdir -p "$prefix"
        npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$pkg" >&2
    fi
    if ! works "$path" "$version"; then
        echo "install-agents.sh: $path does not report version $version" >&2
        return 1
    fi
    printf '%s=%s' "$name" "$path"
}

if [ $# -eq 0 ]; then set -- codex gemini opencode copilot aider; fi
pairs=()
for n in "$@"; do
    pairs+=("$(install_one "$n")")
done
(IFS=:; printf '%s\n' "${pairs[*]}")
