#!/usr/bin/env bash
# NOTIFY's cost to the loop: runs N loops against the fake agent (fixtures/bin/claude) four
# ways — no NOTIFY, NOTIFY to a black hole (a loopback listener that accepts and never
# answers), NOTIFY to a dead port (nothing listens), CONTROL_TOPIC (read by the loop itself) a
# black hole — and prints, per way, the median wall
# time per loop (the run's wall time without the part after its last event) and the time from the run's last event to the process's exit (the bounded
# flush of the last message). Results: PERFORMANCE.md, "Notifications (issue 29)".
#
# usage: scripts/bench-notify.sh [-n N] [--runs R] [--hank PATH]
#   -n N         loops per run (default 40)
#   --runs R     runs per way; medians are reported (default 3)
#   --hank PATH  the hank binary (default target/debug/hank, built if missing)
set -euo pipefail

N=40 RUNS=3 HANK=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n) N=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --hank) HANK=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "bench-notify.sh: unknown argument $1 (see --help)" >&2; exit 1 ;;
  esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$HANK" ]; then
  HANK=$ROOT/target/debug/hank
  [ -x "$HANK" ] || (cd "$ROOT" && cargo build --quiet --bin hank)
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hank-bench-notify.XXXXXX")
cleanup() {
  [ -n "${HOLE_PID:-}" ] && kill "$HOLE_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The black hole: accepts every connection, reads nothing, answers nothing.
python3 - "$WORK/hole.port" <<'PY' &
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(128)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
held = []
while True:
    c, _ = s.accept(); held.append(c)
PY
HOLE_PID=$!
while [ ! -s "$WORK/hole.port" ]; do sleep 0.05; done
HOLE=$(cat "$WORK/hole.port")
DEAD=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

python3 - "$HANK" "$ROOT" "$WORK" "$N" "$RUNS" "$HOLE" "$DEAD" <<'PY'
import json, os, statistics, subprocess, sys, time
hank, root, work, n, runs, hole, dead = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
ways = [("none", ""), ("black hole", f"webhook:http://127.0.0.1:{hole}/h,ntfy:http://127.0.0.1:{hole}/t"), ("dead port", f"webhook:http://127.0.0.1:{dead}/h"),
        ("ctl topic hole", f"control:http://127.0.0.1:{hole}/ctl")]
def one(notify, i):
    d = os.path.join(work, f"p{i}")
    for sub in ("proj/.hank", "fake", "home"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    p = os.path.join(d, "proj")
    open(os.path.join(p, ".hank/PROMPT.md"), "w").write("# Prompt\n")
    open(os.path.join(p, ".hank/AGENT.md"), "w").write("# Agent\n")
    open(os.path.join(p, ".hank/fix_plan.md"), "w").write("# Plan\n\n## Tasks\n" + "".join(f"- [ ] t{k}\n" for k in range(n + 5)))
    rc = "RETRY_BACKOFF_SECONDS=0\nCB_NO_PROGRESS_THRESHOLD=1000\n"
    if notify.startswith("control:"):
        rc += f'CONTROL_TOPIC="{notify[len("control:"):]}"\n'
    elif notify:
        rc += f'NOTIFY="{notify}"\n'
    open(os.path.join(p, ".hankrc"), "w").write(rc)
    open(os.path.join(d, "fake/effect.sh"), "w").write("date +%s%N >> work.txt\n")
    env = {"PATH": os.path.join(root, "fixtures/bin") + ":/usr/bin:/bin", "HOME": os.path.join(d, "home"),
           "FAKE_CLAUDE_DIR": os.path.join(d, "fake"), "NO_COLOR": "1", "LANG": "C.UTF-8"}
    if notify.startswith("control:"):
        subprocess.run([hank, "ctl", "init"], cwd=p, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    r = subprocess.run([hank, "--max-loops", str(n)], cwd=p, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    total = time.monotonic() - t0
    assert r.returncode == 3, r.stderr.decode()[-2000:]
    events = [json.loads(l) for l in open(os.path.join(p, ".hank/events.jsonl"))]
    exit_at = os.stat(os.path.join(p, ".hank/events.jsonl")).st_mtime
    tail = time.time() - exit_at  # measured right after exit: an upper bound of the wait after the last event
    return (total - tail) / n, tail
i = 0
print(f"{n} loops per run, {runs} runs per way, {hank}")
for name, notify in ways:
    per_loop, tails = [], []
    for _ in range(runs):
        i += 1
        pl, t = one(notify, i)
        per_loop.append(pl * 1000); tails.append(t * 1000)
    print(f"{name:>14}: per loop {statistics.median(per_loop):7.1f} ms (min {min(per_loop):.1f}, max {max(per_loop):.1f}); "
          f"after the last event {statistics.median(tails):7.0f} ms (max {max(tails):.0f})")
PY
