#!/usr/bin/env bash
# Peak resident memory of `hank run` on hostile answer sizes (issue 13, item 8): prints the
# peak RSS of hank (getrusage RUSAGE_CHILDREN of a python parent that ran only hank) for
#   flood-live    1 GiB of stream-json lines, with --live (every line goes to the live view)
#   flood-text    1 GiB of plain text
#   line-250m     one result line of 250 MiB (read whole: ≤ 2 × 250 MiB + 32 MB allowed)
#   line-300m     one result line of 300 MiB (over the cap: `output_too_large`)
# and the outcome / error kind hank recorded for each. Method and results: PERFORMANCE.md.
#
# usage: scripts/bench-memory.sh [--no-build] [CASE…]
# Binaries come from ${CARGO_TARGET_DIR:-/tmp/hank-bench-target}/release (release profile).
# Needs python3, about 1.3 GB free in $TMPDIR (the loop log and hank's spill file).
set -euo pipefail

BUILD=1
CASES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    flood-live|flood-text|line-250m|line-300m) CASES+=("$1"); shift ;;
    *) echo "bench-memory.sh: unknown argument $1 (see --help)" >&2; exit 1 ;;
  esac
done
[ ${#CASES[@]} -gt 0 ] || CASES=(flood-live flood-text line-250m line-300m)

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-/tmp/hank-bench-target}
if [ "$BUILD" = 1 ]; then
  (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo build --release --quiet --bin hank)
fi
HANK=$TARGET/release/hank
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The fake agent: prints what $BENCH_CASE asks for, as fast as the pipe takes it.
mkdir -p "$WORK/bin" "$WORK/home"
cat > "$WORK/bin/claude" <<'AGENT'
#!/usr/bin/env bash
if [ "${1:-}" = "--version" ]; then echo "2.1.330 (Claude Code)"; exit 0; fi
cat > /dev/null
result='{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.01,"session_id":"5b1c0e0a-1111-2222-3333-444444444444","usage":{"input_tokens":1,"output_tokens":1},"result":"'
line='{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"working on it, still working, nothing to see here, a line of about two hundred bytes"}]},"session_id":"s"}'
case "$BENCH_CASE" in
  flood-live) yes "$line" | head -n $((1073741824 / (${#line} + 1))); printf '%sdone"}\n' "$result" ;;
  flood-text) yes 'plain text output of the agent, line after line, nothing else' | head -c 1073741824 ;;
  line-250m) printf '%s' "$result"; head -c 262144000 /dev/zero | tr '\0' x; printf '"}\n' ;;
  line-300m) printf '%s' "$result"; head -c 314572800 /dev/zero | tr '\0' x; printf '"}\n' ;;
esac
AGENT
chmod +x "$WORK/bin/claude"

cat > "$WORK/m.py" <<'PY'
import json, os, resource, subprocess, sys, time
env = dict(os.environ)
t = time.time()
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": p.returncode, "maxrss_kib": ru.ru_maxrss, "wall": time.time() - t}))
PY

printf '%-11s %12s %8s %s\n' case peak_rss wall "outcome / error kind"
for c in "${CASES[@]}"; do
  P=$WORK/proj-$c
  mkdir -p "$P/.hank"
  printf '# Prompt\n' > "$P/.hank/PROMPT.md"
  printf '# Plan\n\n- [ ] a\n' > "$P/.hank/fix_plan.md"
  printf '# Agent\n' > "$P/.hank/AGENT.md"
  printf 'CLAUDE_TIMEOUT_MINUTES="15"\n' > "$P/.hankrc"
  live=()
  [ "$c" = flood-live ] && live=(--live)
  out=$(cd "$P" && env -i PATH="$WORK/bin:/usr/bin:/bin" HOME="$WORK/home" BENCH_CASE="$c" \
    NO_COLOR=1 python3 "$WORK/m.py" "$HANK" run --max-loops 1 "${live[@]}")
  rss=$(printf '%s' "$out" | python3 -c 'import json,sys; print("%.1f MB" % (json.load(sys.stdin)["maxrss_kib"]/1024))')
  wall=$(printf '%s' "$out" | python3 -c 'import json,sys; print("%.1f s" % json.load(sys.stdin)["wall"])')
  what=$(python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["last_loop"]; print(l.get("outcome"), l.get("error_kind") or "")' "$P/.hank/status.json")
  printf '%-11s %12s %8s %s\n' "$c" "$rss" "$wall" "$what"
  rm -rf "$P"
done
