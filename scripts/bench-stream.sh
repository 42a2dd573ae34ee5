#!/usr/bin/env bash
# What always reading the stream costs: the same N loops with hank asking Claude Code for
# `--output-format stream-json --verbose` (the default since FIRST_OUTPUT_TIMEOUT) and for
# `--output-format json` (a project profile without the stream variant, as before), against
# the instant fake agent answering with a recorded real answer. Prints, per mode: stdout bytes
# read per loop, CPU (user+sys of hank and everything it ran) per loop, and wall per loop.
# Method and results: PERFORMANCE.md ("Always streaming").
#
# usage: scripts/bench-stream.sh [-n N] [--answer FILE] [--tools K] [--profile debug|release] [--no-build]
#   -n N          loops per run (default 100)
#   --answer FILE a stream-json answer (default fixtures/claude/v2332_stream_success.jsonl,
#                 recorded from Claude Code 2.1.332)
#   --tools K     add K synthetic tool-use turns (an assistant tool_use line and a user
#                 tool_result line of 4 KiB each) before the result: a working loop
#   --profile P   build profile of the binaries (default release)
#   --no-build    use the binaries already built
# Binaries come from ${CARGO_TARGET_DIR:-/tmp/hank-bench-target}/<profile>.
set -euo pipefail

N=100 ANSWER="" TOOLS=0 PROFILE=release BUILD=1
while [ $# -gt 0 ]; do
  case "$1" in
    -n) N=$2; shift 2 ;;
    --answer) ANSWER=$2; shift 2 ;;
    --tools) TOOLS=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bench-stream.sh: unknown argument $1 (see --help)" >&2; exit 1 ;;
  esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ANSWER=${ANSWER:-$ROOT/fixtures/claude/v2332_stream_success.jsonl}
[ -f "$ANSWER" ] || { echo "bench-stream.sh: $ANSWER is not a file" >&2; exit 1; }
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
bench_build bench-stream.sh "$PROFILE" "$BUILD" instant_claude
HANK=$BIN/hank
AGENT=$BIN/examples/instant_claude
bench_work hank-bench-stream
unset CLAUDE_CODE_CMD MAX_LOOPS LIVE_OUTPUT IDLE_TIMEOUT FIRST_OUTPUT_TIMEOUT 2>/dev/null || true

# The answer, with K working turns before its result line.
python3 - "$ANSWER" "$TOOLS" > "$WORK/answer.jsonl" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
k = int(sys.argv[2])
result = [l for l in lines if '"type":"result"' in l]
rest = [l for l in lines if '"type":"result"' not in l]
sid = json.loads(result[0]).get("session_id", "s") if result else "s"
code = ("fn f() {}\n" * 410)[:4096]
for i in range(k):
    rest.append(json.dumps({"type": "assistant", "session_id": sid, "message": {"content": [
        {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": f"src/f{i}.rs"}}]}}))
    rest.append(json.dumps({"type": "user", "session_id": sid, "message": {"content": [
        {"type": "tool_result", "tool_use_id": f"t{i}", "content": code}]}}))
print("\n".join(rest + result))
PY

project() { # DIR
  mkdir -p "$1/.hank" "$1/src"
  printf '# Prompt\nDo the next task.\n' > "$1/.hank/PROMPT.md"
  printf '# Fix plan\n\n## Tasks\n' > "$1/.hank/fix_plan.md"
  for i in 1 2 3 4 5 6 7 8 9 10; do printf -- '- [ ] task %s\n' "$i" >> "$1/.hank/fix_plan.md"; done
  printf '# Agent notes\n' > "$1/.hank/AGENT.md"
  printf 'RETRY_BACKOFF_SECONDS=0\nLOG_RETENTION=0\n' > "$1/.hankrc"
  (cd "$1" && git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm init)
}
project "$WORK/stream"
project "$WORK/json"
# The json run: the built-in claude profile without its stream variant (hank then asks json).
mkdir -p "$WORK/json/.hank/agents"
python3 - "$ROOT/templates/agents/claude.toml" > "$WORK/json/.hank/agents/claude.toml" <<'PY'
import sys
text = open(sys.argv[1]).read()
drop = '[[args]]\nvalues = ["-p", "--output-format", "stream-json", "--verbose"]\nwhen = "live"\n'
assert drop in text, "the claude profile changed: update bench-stream.sh"
print(text.replace(drop, ""), end="")
PY

python3 - "$HANK" "$AGENT" "$N" "$WORK" <<'PY'
import os, resource, subprocess, sys, time, glob
hank, agent, n, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
env = dict(os.environ, INSTANT_CLAUDE_ANSWER=os.path.join(work, "answer.jsonl"),
           INSTANT_CLAUDE_TOUCH="src/work.txt", NO_COLOR="1")
print(f"answer: {os.path.getsize(os.path.join(work, 'answer.jsonl'))} bytes as stream-json; {n} loops per mode")
print(f"{'mode':<12} {'bytes/loop':>11} {'CPU ms/loop':>12} {'wall ms/loop':>13}  exit")
rows = {}
for mode in (["stream", "json"] if os.environ.get("BENCH_STREAM_FIRST") else ["json", "stream"]):
    d = os.path.join(work, mode)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run([hank, "run", "--claude-cmd", agent, "--max-loops", str(n), "--calls", "100000"],
                       cwd=d, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    outs = glob.glob(os.path.join(d, ".hank/logs/loop-*.out"))
    total = sum(os.path.getsize(f) for f in outs)
    if p.returncode != 3 or len(outs) != n:
        sys.exit(f"{mode}: exit {p.returncode}, {len(outs)} loops (want 3, {n}): {p.stderr.decode()[-2000:]}")
    asked = open(os.path.join(d, ".hank/logs/hank.log")).read()
    want = "format: stream-json" if mode == "stream" else "format: json"
    if want not in asked:
        sys.exit(f"{mode}: hank.log does not say '{want}'")
    rows[mode] = (total / n, cpu * 1000 / n, wall * 1000 / n)
    print(f"{mode:<12} {total / n:>11.0f} {cpu * 1000 / n:>12.2f} {wall * 1000 / n:>13.2f}  {p.returncode}")
j, s = rows["json"], rows["stream"]
print(f"{'difference':<12} {s[0] - j[0]:>+11.0f} {s[1] - j[1]:>+12.2f} {s[2] - j[2]:>+13.2f}")
PY
