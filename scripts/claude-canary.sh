#!/usr/bin/env bash
# The Claude Code canary: a report for maintainers, not part of CI's pass/fail.
#
# Installs npm's current `latest` @anthropic-ai/claude-code (and the newest tested pin from
# scripts/claude-versions.env), runs the contract suite (`cargo test --test contract`) against
# both, and prints what differs from the newest pin: contract cases whose result differs, and
# the lines of `claude --help` that changed. When `latest` is the newest pin, it says so and
# runs the suite against it alone.
#
#   scripts/claude-canary.sh            # report on stdout, progress on stderr
#   CLAUDE_CANARY_PIN=2.1.330 scripts/claude-canary.sh   # compare with another release
#
# Needs npm, the npm registry and cargo; nothing else is downloaded. The contract suite uses
# the fake API on 127.0.0.1 only. Exits 0 whatever the suite finds (it is a report); exits 1
# only when a client cannot be installed or the suite cannot be built.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=claude-versions.env
. "$here/claude-versions.env"
# The release `latest` is compared with (default: the newest tested pin).
CLAUDE_NEWEST="${CLAUDE_CANARY_PIN:-$CLAUDE_NEWEST}"

command -v npm >/dev/null 2>&1 || { echo "claude-canary.sh: npm is required" >&2; exit 1; }
latest="$(npm view @anthropic-ai/claude-code dist-tags.latest 2>/dev/null | tr -d '[:space:]')"
case "$latest" in
    [0-9]*.[0-9]*.[0-9]*) ;;
    *) echo "claude-canary.sh: npm did not say which version is latest (got '$latest')" >&2; exit 1 ;;
esac
echo "claude-canary.sh: npm latest is $latest; newest tested pin is $CLAUDE_NEWEST" >&2

pin_bin="$("$here/install-claude.sh" "$CLAUDE_NEWEST")" || exit 1
if [ "$latest" = "$CLAUDE_NEWEST" ]; then
    latest_bin="$pin_bin"
    clients="$pin_bin"
else
    latest_bin="$("$here/install-claude.sh" "$latest")" || exit 1
    clients="$pin_bin:$latest_bin"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log="$work/contract.log"
echo "claude-canary.sh: running the contract suite against $clients" >&2
start=$(date +%s)
(cd "$root" && HANK_REAL_CLAUDE="$clients" cargo test --test contract >"$log" 2>&1)
suite_rc=$?
secs=$(( $(date +%s) - start ))
if ! grep -q '^test ' "$log"; then
    echo "claude-canary.sh: the contract suite did not run:" >&2
    tail -20 "$log" >&2
    exit 1
fi

# `test 2.1.332::case ... ok` → "case ok" per version.
results() { # VERSION
    grep -E "^test +$1::" "$log" | sed -E "s/^test +$1::([^ ]+) +\.\.\. +([a-zA-Z]+).*/\1 \2/" | sort
}
results "$CLAUDE_NEWEST" >"$work/pin.txt"
results "$latest" >"$work/latest.txt"

echo "# Claude Code canary ($(date -u +%Y-%m-%dT%H:%MZ))"
echo
echo "npm latest: $latest    newest tested pin: $CLAUDE_NEWEST    oldest: $CLAUDE_OLDEST"
trials=$(wc -l <"$work/pin.txt")
[ "$latest" = "$CLAUDE_NEWEST" ] || trials=$(( trials + $(wc -l <"$work/latest.txt") ))
echo "contract suite: exit $suite_rc in ${secs}s ($trials Claude Code trials; other agents' cases are not run here)"
echo
echo "## contract cases on $latest"
awk '{n[$2]++} END {for (k in n) printf "  %s: %d\n", k, n[k]}' "$work/latest.txt" | sort
failed="$(awk '$2 != "ok" && $2 != "ignored" {print "  " $1 " (" $2 ")"}' "$work/latest.txt")"
[ -n "$failed" ] && { echo "  not ok:"; echo "$failed"; }
echo
if [ "$latest" = "$CLAUDE_NEWEST" ]; then
    echo "## differences from the newest pin"
    echo "  none: npm latest is the newest pin ($CLAUDE_NEWEST)"
    exit 0
fi
echo "## contract results that differ from $CLAUDE_NEWEST"
diff_cases="$(join -a1 -a2 -e missing -o 0,1.2,2.2 "$work/pin.txt" "$work/latest.txt" | awk '$2 != $3 {printf "  %s: %s on %s, %s on %s\n", $1, $2, pin, $3, lat}' pin="$CLAUDE_NEWEST" lat="$latest")"
echo "${diff_cases:-  none}"
echo
echo "## \`claude --help\` lines that changed ($CLAUDE_NEWEST → $latest)"
"$pin_bin" --help >"$work/help-pin.txt" 2>&1
"$latest_bin" --help >"$work/help-latest.txt" 2>&1
help_diff="$(diff "$work/help-pin.txt" "$work/help-latest.txt" | grep -E '^[<>]' | sed 's/^/  /')"
echo "${help_diff:-  none}"
echo
echo "Next steps when something differs: record it in docs/claude-contract.md, fix hank, then"
echo "move CLAUDE_NEWEST in scripts/claude-versions.env."
exit 0
