#!/usr/bin/env bash
# Runs the whole hank loop for N iterations against an instant fake agent and prints, per
# iteration: engine overhead (ms, agent's own time subtracted), child processes (execve calls, and
# processes started: the target is 1, the agent), peak RSS and
# the bytes hank adds to each agent call. With --cli it also measures `hank --version`,
# `hank status`, `hank analyze` on large generated transcripts, `hank monitor` idle CPU and
# the binary size. Method and results: PERFORMANCE.md.
#
# usage: scripts/bench-loop.sh [-n N] [--runs R] [--no-git] [--cli] [--analyze-mb MB] [--no-build]
#                              [--versus RALPH] [--sandbox-cost] [--rounds K] [--commit]
#   -n N            iterations per measured run (default 200)
#   --runs R        repetitions of each timed run; the median is reported (default 5)
#   --no-git        the project is not a git repository (progress from the stat walk only)
#   --files F       extra source files in the project (default 0)
#   --commit        the agent commits its work every loop (HEAD moves: progress names the
#                   commit's files); its own `git` is the agent's child, so the processes
#                   hank itself starts are counted apart
#   --fallback      with --commit: a replacement ref in the project (an unrelated blob
#                   replaced), so the in-process object reader refuses and every commit's
#                   files come from the `git diff` child, as before the reader (issue 40)
#   --cli           also run the CLI measurements
#   --analyze-mb MB size of the stream-json transcript for `hank analyze` (default 1024)
#   --no-build      use the binaries already built
#   --versus RALPH  side by side with another loop engine on the same instant agent: RALPH is
#                   ralph-orchestrator's `ralph` binary (`cargo install ralph-cli`); hank's own
#                   CPU per loop (sandbox off and on) against it, in K interleaved rounds
#   --sandbox-cost  the same side by side without another engine: hank's own CPU per loop with
#                   SANDBOX=off and SANDBOX=auto, and the sandbox's cost per call (their difference)
#   --rounds K      rounds of the side-by-side (default 3; the median is reported)
# Binaries come from ${CARGO_TARGET_DIR:-/tmp/hank-bench-target}/release (release profile).
set -euo pipefail

N=200 RUNS=5 GIT=1 CLI=0 ANALYZE_MB=1024 BUILD=1 FILES=0 VERSUS='' ROUNDS=3 COMMIT=0 FALLBACK=0
SANDBOX_COST=0
while [ $# -gt 0 ]; do
  case "$1" in
    -n) N=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --no-git) GIT=0; shift ;;
    --files) FILES=$2; shift 2 ;;
    --commit) COMMIT=1; shift ;;
    --fallback) FALLBACK=1; shift ;;
    --cli) CLI=1; shift ;;
    --versus) VERSUS=$2; shift 2 ;;
    --sandbox-cost) SANDBOX_COST=1; shift ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --analyze-mb) ANALYZE_MB=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "bench-loop.sh: unknown argument $1 (see --help)" >&2; exit 1 ;;
  esac
done
[ "$N" -ge 2 ] || { echo "bench-loop.sh: -n must be at least 2" >&2; exit 1; }

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
bench_build bench-loop.sh release "$BUILD" instant_claude gen_inputs
HANK=$BIN/hank
AGENT=$BIN/examples/instant_claude
GEN=$BIN/examples/gen_inputs
bench_work hank-bench
unset HANK_LOG CLAUDE_CODE_CMD MAX_LOOPS MAX_CALLS_PER_HOUR 2>/dev/null || true

# --- helpers (python3: wall time, rusage of children, pty) ------------------------------
cat > "$WORK/m.py" <<'PY'
import json, os, resource, statistics, subprocess, sys, time
def stats(xs):
    xs = sorted(xs)
    return {"median": statistics.median(xs), "min": xs[0], "max": xs[-1], "runs": len(xs)}
mode = sys.argv[1]
if mode == "once":          # once CMD…: wall, exit code, peak RSS of the process tree
    t = time.perf_counter()
    p = subprocess.run(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"wall": wall, "rc": p.returncode, "maxrss_kb": ru.ru_maxrss,
                      "cpu": ru.ru_utime + ru.ru_stime}))
elif mode == "repeat":      # repeat N STDIN_FILE CMD…: wall of each run
    n, stdin_file, cmd = int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    data = open(stdin_file, "rb").read() if stdin_file != "-" else b""
    xs = []
    for _ in range(n + 1):
        t = time.perf_counter()
        subprocess.run(cmd, input=data, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        xs.append(time.perf_counter() - t)
    print(json.dumps(stats(xs[1:])))
elif mode == "stats":       # stats: one number a line on stdin
    print(json.dumps(stats([float(l) for l in sys.stdin if l.strip()])))
elif mode == "monitor":     # monitor SECONDS CMD…: CPU share of CMD idling under a pty
    import pty, signal
    secs, cmd = float(sys.argv[2]), sys.argv[3:]
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execvp(cmd[0], cmd)
    def cpu():
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    def drain(until):
        import select
        while time.time() < until:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try: os.read(fd, 65536)
                except OSError: return
    drain(time.time() + 1.0)          # start-up and first draw
    c0, t0 = cpu(), time.time()
    drain(t0 + secs)
    c1, t1 = cpu(), time.time()
    os.kill(pid, signal.SIGTERM); os.waitpid(pid, 0)
    print(json.dumps({"cpu_pct": 100 * (c1 - c0) / (t1 - t0), "seconds": t1 - t0}))
PY
py() { python3 "$WORK/m.py" "$@"; }
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d'"$1"')'; }
fmt_ms() { python3 -c 'import json,sys; d=json.load(sys.stdin); f=float(sys.argv[1]); print("%.3f ms (min %.3f, max %.3f, %d runs)" % (d["median"]*f, d["min"]*f, d["max"]*f, d["runs"]))' "$1"; }

# --- the benchmark project ----------------------------------------------------------------
TEMPLATE=$WORK/template
mkdir -p "$TEMPLATE/.hank/specs" "$TEMPLATE/src"
sed -e 's/{{project_name}}/bench/g' "$ROOT/templates/PROMPT.md" > "$TEMPLATE/.hank/PROMPT.md"
{
  echo "# Fix plan"; echo; echo "## High priority"
  for i in $(seq 1 10); do echo "- [ ] Task $i: implement part $i of the config loader"; done
  echo; echo "## Optional"; echo "- [ ] Polish the docs"
} > "$TEMPLATE/.hank/fix_plan.md"
printf '# Agent notes\n\nBuild: cargo build\nTest: cargo test\n' > "$TEMPLATE/.hank/AGENT.md"
printf 'PROJECT_NAME="bench"\nMAX_CALLS_PER_HOUR="100000"\nCLAUDE_TIMEOUT_MINUTES="15"\n' > "$TEMPLATE/.hankrc"
printf 'fn main() {}\n' > "$TEMPLATE/src/main.rs"
printf '/target/\n' > "$TEMPLATE/.gitignore"
if [ "$FILES" -gt 0 ]; then "$GEN" repo "$FILES" "$TEMPLATE" --no-git >/dev/null; fi
if [ "$COMMIT" = 1 ]; then
  [ "$GIT" = 1 ] || { echo "bench-loop.sh: --commit needs git (drop --no-git)" >&2; exit 1; }
  # Tracked from the start, so that the agent's `git commit -a` takes it.
  : > "$TEMPLATE/src/work.txt"
  export INSTANT_CLAUDE_COMMIT=1
fi
if [ "$GIT" = 1 ]; then
  git -C "$TEMPLATE" -c init.defaultBranch=main init -q
  git -C "$TEMPLATE" add -A
  git -C "$TEMPLATE" -c user.name=b -c user.email=b@example.com commit -q -m init
  if [ "$FALLBACK" = 1 ]; then
    a=$(echo a | git -C "$TEMPLATE" hash-object -w --stdin)
    b=$(echo b | git -C "$TEMPLATE" hash-object -w --stdin)
    git -C "$TEMPLATE" replace "$a" "$b"
  fi
fi

export CLAUDE_CODE_CMD=$AGENT INSTANT_CLAUDE_TOUCH=src/work.txt
# A fresh project, and no per-user state of an earlier run (its call ledger copy would be
# restored into the new project and grow with every run).
fresh() { rm -rf "$WORK/p" "$HOME/.local/state/hank"; cp -a "$TEMPLATE" "$WORK/p"; }
run_hank() { # run_hank LOOPS [prefix…] — one fresh run, prints the python 'once' JSON
  local loops=$1; shift
  fresh
  (cd "$WORK/p" && py once "$@" "$HANK" run --max-loops "$loops" --calls 100000)
}

echo "# hank loop benchmark"
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -sr)"
echo "hank:    $("$HANK" --version) ($HANK)"
echo "sandbox: ${SANDBOX:-auto} (SANDBOX; the side by side runs both)"
echo "project: git=$GIT, agent commits=$COMMIT (fallback to git: $FALLBACK), $(find "$TEMPLATE" -type f -not -path '*/.git/*' | wc -l) files; N=$N iterations, $RUNS runs"
echo

# Sanity: a run must end at max_loops (exit 3) after N calls.
out=$(run_hank "$N")
rc=$(echo "$out" | jget '["rc"]')
calls=$(grep -c . "$WORK/p/src/work.txt" || true)
if [ "$rc" != 3 ] || [ "$calls" != "$N" ]; then
  echo "bench-loop.sh: expected exit 3 after $N calls, got exit $rc after $calls calls" >&2
  tail -5 "$WORK/p/.hank/logs/hank.log" >&2 || true
  exit 1
fi
if [ "$COMMIT" = 1 ]; then
  commits=$(git -C "$WORK/p" rev-list --count HEAD)
  [ "$commits" = $((N + 1)) ] || { echo "bench-loop.sh: the agent made $((commits - 1)) commits in $N calls" >&2; exit 1; }
fi

# 1. time per iteration: (T(N) - T(1)) / (N - 1), minus the agent alone.
: > "$WORK/tn"; : > "$WORK/t1"
for _ in $(seq 1 "$RUNS"); do
  run_hank "$N" | jget '["wall"]' >> "$WORK/tn"
  run_hank 1 | jget '["wall"]' >> "$WORK/t1"
done
tn=$(py stats < "$WORK/tn"); t1=$(py stats < "$WORK/t1")
prompt=$WORK/p/.hank/PROMPT.md
agent=$(cd "$WORK/p" && py repeat 400 "$prompt" "$AGENT" -p --output-format json)
read -r per_iter per_min per_max agent_ms overhead <<<"$(python3 - "$tn" "$t1" "$agent" "$N" <<'PY'
import json, sys
tn, t1, ag, n = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
per = lambda a, b: (a - b) / (n - 1) * 1000
med = per(tn["median"], t1["median"])
print("%.3f %.3f %.3f %.3f %.3f" % (med, per(tn["min"], t1["max"]), per(tn["max"], t1["min"]),
      ag["median"] * 1000, med - ag["median"] * 1000))
PY
)"
echo "## per iteration"
echo
echo "| metric | value |"
echo "|---|---|"
echo "| wall per iteration, (T(N)−T(1))/(N−1) | $per_iter ms (range $per_min–$per_max) |"
echo "| instant agent alone (spawn+run+exit, 400 runs) | $agent_ms ms median |"
echo "| **engine overhead per iteration** | **$overhead ms** |"
echo "| T(1): start-up + 1 iteration + exit | $(echo "$t1" | fmt_ms 1000) |"
echo "| T($N) | $(echo "$tn" | fmt_ms 1000) |"

# 2. child processes per iteration, and timer expiries (sleeps) on the happy path.
if command -v strace >/dev/null; then
  fresh
  (cd "$WORK/p" && strace -f -qq -o "$WORK/strace" -e trace=execve,clock_nanosleep,nanosleep,epoll_wait,openat,clone,clone3,fork,vfork \
    "$HANK" run --max-loops "$N" --calls 100000 >/dev/null 2>&1) || true
  # A call another thread interrupts is split: `execve(… <unfinished …>`, then `<… execve
  # resumed>…= 0`; both forms count.
  execs=$(grep -cE '(execve\(|execve resumed>).*= 0$' "$WORK/strace" || true)
  sleeps=$(grep -cE '(clock_)?nanosleep\(' "$WORK/strace" || true)
  expiries=$(grep -cE 'epoll_wait\([0-9]+, \[\], [0-9]+, [1-9][0-9]*\) += 0$' "$WORK/strace" || true)
  echo "| child processes per iteration (execve, hank itself excluded) | $(python3 -c "print(round(($execs - 1) / $N, 3))") ($((execs - 1)) in $N iterations) |"
  # Processes started: distinct pids that executed a program, hank itself excluded. The
  # sandbox's `hank __sandbox` re-executes in the agent's process, so one process (the
  # agent) can show 2 execve calls.
  procs_started=$(grep -E '(execve\(|execve resumed>).*= 0$' "$WORK/strace" | awk '{print $1}' | sort -u | wc -l)
  procs_started=$((procs_started - 1))
  echo "| processes started per iteration (distinct pids that ran execve; target 1, the agent) | $(python3 -c "print(round($procs_started / $N, 3))") ($procs_started in $N iterations) |"
  # The processes hank itself started (an agent that commits starts git of its own): distinct
  # pids that ran execve whose parent is hank's process or one of its threads.
  by_hank=$(python3 - "$WORK/strace" <<'PY'
import re, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
main = int(lines[0].split()[0])
hank, parent, pending, execd = {main}, {}, {}, set()
for l in lines:
    m = re.match(r"(\d+) +(.*)", l)
    if not m:
        continue
    pid, rest = int(m.group(1)), m.group(2)
    c = re.match(r"(clone3?|v?fork)\((.*)", rest)
    r = re.match(r"<\.\.\. (clone3?|v?fork) resumed>(.*)", rest)
    if c and "<unfinished" in rest:
        pending[pid] = c.group(2)
        continue
    call = c.group(2) if c else (pending.pop(pid, "") + r.group(2) if r else None)
    if call is not None:
        ret = re.search(r"= (\d+)$", rest)
        if ret:
            child = int(ret.group(1))
            parent[child] = pid
            if "CLONE_THREAD" in call and pid in hank:
                hank.add(child)
        continue
    if (rest.startswith("execve(") or rest.startswith("<... execve resumed>")) and rest.endswith("= 0"):
        execd.add(pid)
print(len([p for p in execd if p != main and parent.get(p) in hank]))
PY
)
  echo "| processes hank started per iteration (their parent is hank; target 1, the agent) | $(python3 -c "print(round($by_hank / $N, 3))") ($by_hank in $N iterations) |"
  echo "| sleeps (nanosleep) / timer expiries in epoll_wait over the run | $sleeps / $expiries |"
  # hank's own look at processes (the survivor sweep): files opened under /proc, per loop.
  procs=$(grep -cE 'openat\([^,]+, "/proc/' "$WORK/strace" || true)
  echo "| files opened under /proc per iteration (processes on the machine: $(ls /proc | grep -c '^[0-9]')) | $(python3 -c "print(round($procs / $N, 2))") ($procs in $N iterations) |"
else
  echo "| child processes per iteration | strace not installed |"
fi

# 3. peak RSS, 1 vs 10×N iterations.
rss1=$(run_hank 1 | jget '["maxrss_kb"]')
big=$((N * 5)); [ "$big" -lt 1000 ] && big=1000
rssn=$(run_hank "$big" | jget '["maxrss_kb"]')
echo "| peak RSS (hank + agent tree), 1 iteration | $((rss1 / 1024)).$(( (rss1 % 1024) * 10 / 1024 )) MB |"
echo "| peak RSS, $big iterations | $((rssn / 1024)).$(( (rssn % 1024) * 10 / 1024 )) MB |"
state_kb=$(( $(stat -c %s "$WORK/p/.hank/state.json") / 1024 ))
echo "| state.json after $big iterations | $state_kb KB |"

# 4. bytes hank adds to each agent call.
fresh
# (The record is kept in the project: a sandboxed agent may write nowhere else.)
(cd "$WORK/p" && INSTANT_CLAUDE_RECORD=record.txt "$HANK" run --max-loops 20 --calls 100000 >/dev/null 2>&1) || true
ctx=$(cut -d' ' -f1 "$WORK/p/record.txt" | py stats)
argvb=$(cut -d' ' -f2 "$WORK/p/record.txt" | py stats)
stdinb=$(cut -d' ' -f3 "$WORK/p/record.txt" | py stats)
echo "| bytes added per call (--append-system-prompt), median / max | $(echo "$ctx" | jget '["median"]') / $(echo "$ctx" | jget '["max"]') |"
echo "| whole argv bytes (incl. --allowedTools), median | $(echo "$argvb" | jget '["median"]') |"
echo "| stdin = the user's PROMPT.md (not added by hank) | $(echo "$stdinb" | jget '["median"]') |"
echo
echo "context hank sends on loop 2 (from --dry-run --json):"
fresh
(cd "$WORK/p" && "$HANK" run --max-loops 1 --calls 100000 >/dev/null 2>&1 || true
 "$HANK" run --dry-run --json --calls 100000 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin); a = d["args"]
i = a.index("--append-system-prompt") if "--append-system-prompt" in a else -1
print("```"); print(a[i + 1] if i >= 0 else "(none)"); print("```")')
echo

# --- side by side with another loop engine (--versus) -----------------------------------------
# Own cost = the CPU time (user + system) of the engine's whole process tree, less the agent's:
# ((CPU(N) − CPU(1)) / (N − 1)) − the agent's CPU per call. Both engines run the same instant
# agent on copies of the same project, interleaved round by round.
if [ -n "$VERSUS" ] || [ "$SANDBOX_COST" = 1 ]; then
  ENGINES="hank hank-sandboxed"
  if [ -n "$VERSUS" ]; then
    [ -x "$VERSUS" ] || { echo "bench-loop.sh: --versus $VERSUS is not an executable" >&2; exit 1; }
    case "$("$VERSUS" --version 2>/dev/null)" in
      ralph\ *) ;;
      *) echo "bench-loop.sh: --versus expects ralph-orchestrator's ralph binary (ralph --version says 'ralph X.Y.Z')" >&2; exit 1 ;;
    esac
    ENGINES="$ENGINES ralph"
  fi
  mkdir -p "$WORK/agentbin"
  ln -sf "$AGENT" "$WORK/agentbin/claude"
  cp "$WORK/template/.hank/PROMPT.md" "$WORK/template/PROMPT.md"
  printf 'cli:\n  backend: "claude"\nevent_loop:\n  prompt_file: "PROMPT.md"\n  completion_promise: "LOOP_COMPLETE"\n  max_iterations: 100000\n' \
    > "$WORK/template/ralph.yml"
  if [ "$GIT" = 1 ]; then
    git -C "$WORK/template" add -A
    git -C "$WORK/template" -c user.name=b -c user.email=b@example.com commit -q -m ralph
  fi
  mkdir -p "$WORK/agentcpu/src"
  agent_cpu=$(cd "$WORK/agentcpu" && python3 - "$AGENT" <<'PY'
import resource, subprocess, sys
n = 300
before = resource.getrusage(resource.RUSAGE_CHILDREN)
for _ in range(n):
    subprocess.run([sys.argv[1], "-p", "--output-format", "json"], input=b"prompt",
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
after = resource.getrusage(resource.RUSAGE_CHILDREN)
print((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / n)
PY
)
  engine() { # engine NAME LOOPS — one fresh run; prints the python 'once' JSON
    local name=$1 loops=$2
    fresh
    case "$name" in
      hank) (cd "$WORK/p" && SANDBOX=off py once "$HANK" run --max-loops "$loops" --calls 100000) ;;
      hank-sandboxed) (cd "$WORK/p" && SANDBOX=auto py once "$HANK" run --max-loops "$loops" --calls 100000) ;;
      ralph) (cd "$WORK/p" && PATH="$WORK/agentbin:$PATH" py once "$VERSUS" run -c ralph.yml -a \
                --max-iterations "$loops" --skip-preflight -q) ;;
    esac
    local calls
    calls=$(grep -c . "$WORK/p/src/work.txt" 2>/dev/null || true)
    [ "$calls" = "$loops" ] || { echo "bench-loop.sh: $name made $calls calls instead of $loops" >&2; exit 1; }
  }
  : > "$WORK/versus"
  for round in $(seq 1 "$ROUNDS"); do
    for name in $ENGINES; do
      big=$(engine "$name" "$N"); one=$(engine "$name" 1)
      echo "$round $name $big $one" >> "$WORK/versus"
    done
  done
  echo
  if [ -n "$VERSUS" ]; then
    echo "## side by side: $("$VERSUS" --version) (--versus), $ROUNDS interleaved rounds of $N loops against 1"
  else
    echo "## the sandbox's cost (--sandbox-cost), $ROUNDS interleaved rounds of $N loops against 1"
  fi
  echo
  echo "filesystem of the projects: $(stat -f -c %T "$WORK") ($WORK); agent CPU per call: $(python3 -c "print('%.3f ms' % ($agent_cpu * 1000))")"
  echo
  python3 - "$WORK/versus" "$N" "$agent_cpu" <<'PY'
import json, statistics, sys
rows = [l.split(" ", 2) for l in open(sys.argv[1]) if l.strip()]
n, agent = int(sys.argv[2]), float(sys.argv[3])
per = {}
for rnd, name, rest in rows:
    big, one = (json.loads(x) for x in rest.replace("} {", "}\n{").splitlines())
    cpu = (big["cpu"] - one["cpu"]) / (n - 1) - agent
    wall = (big["wall"] - one["wall"]) / (n - 1)
    per.setdefault(name, []).append((cpu * 1000, wall * 1000))
med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for k, v in per.items()}
print("| engine | own CPU per loop (median) | rounds | wall per loop (median) | CPU ratio to ralph |")
print("|---|---|---|---|---|")
for k in ("hank", "hank-sandboxed", "ralph"):
    if k in med:
        cpus = ", ".join("%.2f" % c for c, _ in per[k])
        ratio = med[k][0] / med["ralph"][0] if med.get("ralph", (0,))[0] > 0 else float("nan")
        label = {"hank": "hank (SANDBOX=off)", "hank-sandboxed": "hank (SANDBOX=auto)", "ralph": "ralph-orchestrator"}[k]
        print("| %s | %.2f ms | %s | %.2f ms | %.2f× |" % (label, med[k][0], cpus, med[k][1], ratio))
if "hank" in med and "hank-sandboxed" in med:
    print()
    print("sandbox cost per call (SANDBOX=auto − off, own CPU per loop, medians): %.2f ms" % (med["hank-sandboxed"][0] - med["hank"][0]))
    # The rounds are interleaved: each round's off and auto ran side by side under the same
    # load, so the median of the per-round differences is the steadier figure on a busy machine.
    diffs = [a - b for (a, _), (b, _) in zip(per["hank-sandboxed"], per["hank"])]
    print("sandbox cost per call, median of the per-round differences: %.2f ms (%s)" % (statistics.median(diffs), ", ".join("%.2f" % d for d in diffs)))
PY
fi

[ "$CLI" = 1 ] || exit 0

# --- CLI measurements ------------------------------------------------------------------------
echo
echo "## CLI"
echo
echo "| metric | value |"
echo "|---|---|"
v=$(py repeat 200 - "$HANK" --version | fmt_ms 1000)
echo "| hank --version | $v |"
fresh
(cd "$WORK/p" && "$HANK" run --max-loops 3 --calls 100000 >/dev/null 2>&1) || true
s=$(cd "$WORK/p" && py repeat 200 - "$HANK" status | fmt_ms 1000)
echo "| hank status | $s |"
sj=$(cd "$WORK/p" && py repeat 200 - "$HANK" status --json | fmt_ms 1000)
echo "| hank status --json | $sj |"
if command -v strip >/dev/null; then
  strip -o "$WORK/hank.stripped" "$HANK"
  echo "| release binary, as built / stripped | $(( $(stat -c %s "$HANK") / 1024 )) KB / $(( $(stat -c %s "$WORK/hank.stripped") / 1024 )) KB |"
fi
mon=$(cd "$WORK/p" && py monitor 10 "$HANK" monitor | jget '["cpu_pct"]')
echo "| hank monitor idle CPU (10 s under a pty) | $(printf '%.2f' "$mon") % of a core |"
for spec in "stream:${ANALYZE_MB}M" "result:100M" "array:256M" "text:256M"; do
  shape=${spec%%:*} size=${spec#*:}
  "$GEN" "$shape" "$size" "$WORK/in.$shape" >/dev/null
  bytes=$(stat -c %s "$WORK/in.$shape")
  r=$(py once "$HANK" analyze --json "$WORK/in.$shape")
  seen=$("$HANK" analyze --json "$WORK/in.$shape" 2>/dev/null | jget '.get("shape")' || echo "?")
  python3 - "$r" "$bytes" "$shape" "$seen" <<'PY'
import json, sys
r, n, shape, seen = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
print("| hank analyze %s %d MB | %.2f s, %.0f MB/s, peak RSS %.1f MB (%.2f× input), read as %s, exit %d |" % (
    shape, n / 1e6, r["wall"], n / 1e6 / r["wall"], r["maxrss_kb"] / 1024,
    r["maxrss_kb"] * 1024 / n, seen, r["rc"]))
PY
  rm -f "$WORK/in.$shape"
done
