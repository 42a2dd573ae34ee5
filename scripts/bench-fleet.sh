#!/usr/bin/env bash
# `hank fleet` benchmark (issue 26): T independent tasks, a stand-in agent of fixed duration D
# (fixtures/bin/claude with `sleep`), `--agents A`. Prints the fleet's wall time against the
# ideal (ceil(T/A) × one task's time, one task's time measured as a fleet of one task), hank's
# own cost per task apart from git (the supervisor's CPU and its wake-ups; `HANK_FLEET_TIMING`), the git part
# (wall time of every git command the supervisor ran), and the peak memory of each task's
# `hank run` and of the supervisor. Method and results: PERFORMANCE.md.
#
# usage: scripts/bench-fleet.sh [--tasks T] [--agents A] [--duration D] [--files F] [--warm] [--bin PATH] [--no-build]
#   --tasks T     independent tasks (default 8)
#   --agents A    tasks at once (default 4)
#   --duration D  seconds each agent call takes (default 3)
#   --files F     extra files in the repository (default 0; try 10000, 100000)
#   --warm        measure each fleet after an earlier one in the same project (its kept worktrees
#                 reused: a project's second and later fleets); the default is a project's first
#   --bin PATH    the hank binary to measure (default: a release build)
#   --no-build    use ${CARGO_TARGET_DIR:-/tmp/hank-bench-target}/release/hank as it is
set -euo pipefail

T=8 A=4 D=3 F=0 BIN= BUILD=1 WARM=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tasks) T=$2; shift 2 ;;
    --agents) A=$2; shift 2 ;;
    --duration) D=$2; shift 2 ;;
    --files) F=$2; shift 2 ;;
    --bin) BIN=$2; BUILD=0; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --warm) WARM=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "bench-fleet.sh: unknown argument $1 (see --help)" >&2; exit 1 ;;
  esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-/tmp/hank-bench-target}
if [ "$BUILD" = 1 ]; then
  (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo build --release --quiet --bin hank)
fi
HANK=${BIN:-$TARGET/release/hank}
[ -x "$HANK" ] || { echo "bench-fleet.sh: no hank binary at $HANK" >&2; exit 1; }
WORK=$(mktemp -d)
SAMPLER=
cleanup() {
  if [ -n "$SAMPLER" ]; then kill "$SAMPLER" 2>/dev/null || true; wait "$SAMPLER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# make_project DIR TASKS: a git repository with F extra files and TASKS independent sections.
make_project() {
  local dir=$1 tasks=$2
  mkdir -p "$dir/.hank"
  printf '# Prompt\nDo the next task.\n' > "$dir/.hank/PROMPT.md"
  printf '# Agent notes\n' > "$dir/.hank/AGENT.md"
  printf 'RETRY_BACKOFF_SECONDS=0\n' > "$dir/.hankrc"
  printf '.hank/logs/\n.hank/status.json\n.hank/state.json*\n.hank/events.jsonl\n.hank/live.log\n.hank/hank.lock\n.hank/fleet.json\n' > "$dir/.gitignore"
  { echo "# Fix plan"; for i in $(seq 1 "$tasks"); do printf '\n## Task %s\n- [ ] item %s\n' "$i" "$i"; done; } > "$dir/.hank/fix_plan.md"
  if [ "$F" -gt 0 ]; then
    python3 - "$dir" "$F" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "src", "d%03d" % (i // 1000))
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%06d.txt" % i), "w") as f:
        f.write("file %d\n" % i)
PY
  fi
  (cd "$dir" && git -c init.defaultBranch=main init -q && git add -A \
    && git -c user.name=b -c user.email=b@b commit -qm init)
}

mkdir -p "$WORK/fake" "$WORK/home"
echo "$D" > "$WORK/fake/sleep"
cat > "$WORK/fake/effect.sh" <<'SH'
sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
n=$(basename "$PWD"); echo "$n" > "$n.txt"
SH
export HOME=$WORK/home PATH="$ROOT/fixtures/bin:$PATH" FAKE_CLAUDE_DIR=$WORK/fake \
  GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 NO_COLOR=1 HANK_FLEET_TIMING=1 \
  SANDBOX=off  # the stand-in agent reads its files in FAKE_CLAUDE_DIR, outside the project
unset XDG_STATE_HOME

# run_fleet DIR AGENTS → prints wall ms; the timing line goes to $DIR.err
run_fleet() {
  local dir=$1 agents=$2 start end
  start=$(date +%s%N)
  (cd "$dir" && "$HANK" fleet --agents "$agents" --min-free-memory 0 2> "$dir.err") \
    || { echo "bench-fleet.sh: hank fleet failed:" >&2; cat "$dir.err" >&2; exit 1; }
  end=$(date +%s%N)
  echo $(( (end - start) / 1000000 ))
}

# prime DIR AGENTS: with --warm, a fleet run first in DIR, then its branches and fleet.json
# removed so that the measured fleet runs every task again (on the worktrees it kept).
prime() {
  [ "$WARM" = 1 ] || return 0
  echo 0 > "$WORK/fake/sleep"   # the first fleet only makes the worktrees: an instant agent
  run_fleet "$1" "$2" > /dev/null
  echo "$D" > "$WORK/fake/sleep"
  (cd "$1" && git for-each-ref --format='%(refname:short)' 'refs/heads/hank/' | xargs -r git branch -qD \
    && rm -f .hank/fleet.json)
}

echo "# tasks $T, agents $A, agent duration ${D}s, extra files $F, warm $WARM, binary $HANK"
make_project "$WORK/one" 1
prime "$WORK/one" 1
ONE=$(run_fleet "$WORK/one" 1)
echo "one task alone (fleet of 1): ${ONE} ms"
grep 'fleet timing' "$WORK/one.err" | sed 's/^hank: /  /'

make_project "$WORK/many" "$T"
prime "$WORK/many" "$A"
# Peak RSS of every hank process (sampled every 20 ms): pid → max VmRSS kB.
(
  while :; do
    for p in $(pgrep -x hank); do
      case "$(readlink "/proc/$p/cwd" 2>/dev/null)" in
        "$WORK"/*) awk -v p="$p" '/^VmRSS:/{print p, $2}' "/proc/$p/status" 2>/dev/null ;;
      esac
    done
    sleep 0.02
  done
) > "$WORK/rss" &
SAMPLER=$!
WALL=$(run_fleet "$WORK/many" "$A")
kill "$SAMPLER" 2>/dev/null || true; wait "$SAMPLER" 2>/dev/null || true; SAMPLER=
WAVES=$(( (T + A - 1) / A ))
echo "fleet of $T, --agents $A: ${WALL} ms"
awk -v w="$WALL" -v one="$ONE" -v waves="$WAVES" -v d="$D" 'BEGIN {
  printf "  ideal = %d × one task = %d ms → ratio %.3f\n", waves, waves*one, w/(waves*one);
  printf "  ideal = %d × agent duration = %d ms → ratio %.3f\n", waves, waves*d*1000, w/(waves*d*1000) }'
grep 'fleet timing' "$WORK/many.err" | sed 's/^hank: /  /'
SUP=$(grep -o 'supervisor_peak_rss_kb [0-9]*' "$WORK/many.err" | awk '{print $2}')
sort -k1,1n -k2,2n "$WORK/rss" | awk '{m[$1] = ($2 > m[$1] ? $2 : m[$1])} END {
  n = 0; max = 0; sum = 0
  for (p in m) { n++; sum += m[p]; if (m[p] > max) max = m[p] }
  printf "  hank processes seen: %d; peak RSS max %.1f MB, mean %.1f MB\n", n, max/1024, (n ? sum/n/1024 : 0) }'
echo "  supervisor peak RSS: $(( ${SUP:-0} / 1024 )) MB"
