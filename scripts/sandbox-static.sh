#!/usr/bin/env bash
# Links the sandbox's own program, `hank-sandbox`, as a static-pie executable after an ordinary
# `cargo build` of the same profile (only the small binary is linked again: ~10 s).
#
#   scripts/sandbox-static.sh [CARGO ARGS…]     e.g. --release --target x86_64-unknown-linux-gnu
#
# Every sandboxed agent call execs `hank-sandbox`; statically linked it skips the dynamic
# loader's relocations and library loads, about 0.3 ms of each call on a small VM (issue 47;
# `scripts/bench-loop.sh --sandbox-cost`). It needs the C library's static archives (Debian:
# `libc6-dev`, present wherever Rust builds; Fedora: `glibc-static`). When they are missing, or
# the target cannot link statically (macOS, musl already static), the dynamic build is kept:
# the program behaves the same, it only starts slower. Prints which one it left.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if cargo rustc --locked --manifest-path "$here/Cargo.toml" --bin hank-sandbox "$@" \
    -- -C target-feature=+crt-static >"$log" 2>&1; then
    echo "sandbox-static.sh: hank-sandbox linked statically"
    exit 0
fi
echo "sandbox-static.sh: note: hank-sandbox could not be linked statically; keeping the dynamic one (it starts ~0.3 ms slower per agent call):" >&2
tail -n 5 "$log" >&2
# The failed link may have left no binary: build the ordinary one again.
cargo build --locked --manifest-path "$here/Cargo.toml" --bin hank-sandbox "$@"
