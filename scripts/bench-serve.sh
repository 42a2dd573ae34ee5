#!/usr/bin/env bash
# The first paint of `hank serve`'s run page for a project of 1,000 loops (PERFORMANCE.md,
# issue 52): Chromium (headless, from the system) loads the page 15 times; the median and the
# spread of the first contentful paint and of the server's response are printed. A
# measurement, not a test: nothing fails on a slow machine.
#
# Usage: scripts/bench-serve.sh [--debug] [--no-build]
#   --debug     measure the debug build (default: release)
#   --no-build  use the binary already built
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
profile=release build=1
for a in "$@"; do
  case $a in
    --debug) profile=debug ;;
    --no-build) build=0 ;;
    *) echo "bench-serve: unknown option $a (expected --debug or --no-build)" >&2; exit 1 ;;
  esac
done
bench_build bench-serve "$profile" "$build"
echo "bench-serve: $profile build, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$ROOT/scripts/browser-serve.py" --bench "$BIN/hank"
