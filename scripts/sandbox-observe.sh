#!/usr/bin/env bash
# What the real clients write, and what hank's sandbox refuses them: runs contract trials
# (default: the sandboxed ones) under strace and prints the files refused (EACCES from
# Landlock) and the files written outside the project and the private TMPDIR, with the temp
# folders' random names folded. How the `[sandbox] write` lists of templates/agents/*.toml were
# made (docs/agent-profiles.md, "What each client writes").
#
#   export HANK_REAL_CLAUDE=$(scripts/install-claude.sh all) HANK_REAL_AGENTS=$(scripts/install-agents.sh)
#   scripts/sandbox-observe.sh                    # every client's sandboxed case
#   scripts/sandbox-observe.sh gemini-            # the trials whose name holds `gemini-`
#
# Needs strace. The trace is kept in ${OBSERVE_DIR:-/tmp/hank-sandbox-observe}/trace.
set -euo pipefail

filter="${1:-sandboxed}"
out="${OBSERVE_DIR:-/tmp/hank-sandbox-observe}"
command -v strace >/dev/null 2>&1 || { echo "sandbox-observe.sh: strace is required" >&2; exit 1; }
cd "$(dirname "$0")/.."

bin=$(cargo test --test contract --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*contract-[^"]*\)".*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "sandbox-observe.sh: cannot build the contract suite" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"
echo "sandbox-observe.sh: $bin $filter (trace: $out/trace)" >&2
status=0
strace -f -qq -e trace=%file -e signal=none -o "$out/trace" "$bin" --test-threads 1 -- "$filter" \
    >"$out/stdout" 2>&1 || status=$?
grep -E '^test |test result' "$out/stdout" >&2 || true

# Random parts of names: temp folders, pids, uuids, hashes.
fold() {
    sed -E 's/^[0-9]+ +//' |
        sed -E 's#/tmp/\.tmp[A-Za-z0-9]{6}#/T#g; s#hank-agent-tmp-[A-Za-z0-9]+#hank-agent-tmp-X#g' |
        sed -E 's/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/UUID/g' |
        sed -E 's/[0-9a-f]{12,}/HEX/g; s/\.[0-9]+\./.N./g; s/[0-9]{2,}/N/g'
}

echo "== refused (EACCES) by path"
grep -E '= -1 EACCES' "$out/trace" | grep -v -E '^[0-9]+ +(execve|access|faccessat)' | fold |
    grep -o -E '"/[^"]*"' | sort | uniq -c | sort -rn
echo "== written outside the project and TMPDIR (created, opened for writing, renamed, removed;"
echo "   three levels below HOME; the harness's own set-up of HOME is among them)"
grep -E 'O_WRONLY|O_RDWR|O_CREAT|mkdir|rename|unlink|rmdir|symlink' "$out/trace" |
    grep -v -E '= -1 |^[0-9]+ +execve' | fold | grep -o -E '"/[^"]*"' |
    sed -E 's#^"(/T/home/[^/"]+/[^/"]+/[^/"]+)/[^"]*"#"\1/…"#' |
    grep -v -E '^"/T/(proj|project|fake|api\.log)|^"/T/home/\.local/state/hank|hank-agent-tmp-X|^"/dev/(null|tty|zero)"|^"/proc/self/fd/' |
    sort | uniq -c | sort -rn
exit "$status"
