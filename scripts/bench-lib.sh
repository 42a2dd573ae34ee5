# shellcheck shell=bash
# Sourced by scripts/bench-loop.sh and scripts/bench-stream.sh (after they set ROOT): the
# build of the binaries a benchmark runs and its hermetic work folder.

# bench_build NAME PROFILE BUILD [EXAMPLE...]
# Builds hank, hank-sandbox (scripts/sandbox-static.sh) and the EXAMPLEs in PROFILE (release or debug) under
# ${CARGO_TARGET_DIR:-/tmp/hank-bench-target} when BUILD is 1, and sets BIN to that profile's
# folder (hank is $BIN/hank, an example $BIN/examples/NAME). A missing binary is an error
# naming it, from the script NAME; exit 1.
bench_build() {
  local name=$1 profile=$2 build=$3
  shift 3
  local target=${CARGO_TARGET_DIR:-/tmp/hank-bench-target} flag=() examples=() e
  [ "$profile" = release ] && flag=(--release)
  for e in "$@"; do examples+=(--example "$e"); done
  if [ "$build" = 1 ]; then
    (cd "$ROOT" && CARGO_TARGET_DIR=$target cargo build "${flag[@]}" --quiet --bin hank "${examples[@]}")
    # The sandbox's own program, linked as install.sh links it (every sandboxed call execs it).
    (cd "$ROOT" && CARGO_TARGET_DIR=$target scripts/sandbox-static.sh "${flag[@]}" --quiet >/dev/null)
  fi
  BIN=$target/$profile
  for e in hank "${@/#/examples/}"; do
    [ -x "$BIN/$e" ] || { echo "$name: $BIN/$e is missing (run without --no-build)" >&2; exit 1; }
  done
}

# bench_work PREFIX
# Makes WORK, a folder under ${TMPDIR:-/tmp} removed at exit, with HOME in it and no global or
# system git configuration.
bench_work() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  export HOME=$WORK/home GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
  mkdir -p "$HOME"
}
