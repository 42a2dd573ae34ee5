#!/bin/sh
# Installs hank: builds it with cargo and puts `hank` plus its alias names
# (hank-monitor, hank-setup, hank-enable, hank-enable-ci, hank-import, hank-migrate)
# into ~/.local/bin, or PREFIX/bin with --prefix PREFIX.
#
#   ./install.sh [--prefix DIR] [--debug]     build and install
#   ./install.sh uninstall [--prefix DIR]      remove every installed name
set -eu

NAMES="hank-monitor hank-setup hank-enable hank-enable-ci hank-import hank-migrate"
prefix="${HOME:?HOME is not set}/.local"
action=install
profile=release

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
        install) action=install ;;
        uninstall) action=uninstall ;;
        --prefix)
            [ $# -ge 2 ] || { echo "install.sh: --prefix needs a directory" >&2; exit 1; }
            prefix="$2"; shift ;;
        --prefix=*) prefix="${1#--prefix=}" ;;
        --debug) profile=debug ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install.sh: unknown argument: $1 (see --help)" >&2; exit 1 ;;
    esac
    shift
done
bindir="$prefix/bin"

if [ "$action" = uninstall ]; then
    removed=0
    for name in hank hank-sandbox $NAMES; do
        if [ -e "$bindir/$name" ] || [ -L "$bindir/$name" ]; then
            rm -f "$bindir/$name"
            removed=$((removed + 1))
        fi
    done
    echo "hank: removed $removed file(s) from $bindir"
    exit 0
fi

command -v cargo >/dev/null 2>&1 || {
    echo "install.sh: cargo not found; install Rust from https://rustup.rs first" >&2
    exit 1
}
here=$(cd "$(dirname "$0")" && pwd)
if [ "$profile" = release ]; then
    cargo build --release --locked --manifest-path "$here/Cargo.toml"
    "$here/scripts/sandbox-static.sh" --release
else
    cargo build --locked --manifest-path "$here/Cargo.toml"
    "$here/scripts/sandbox-static.sh"
fi
target_dir="${CARGO_TARGET_DIR:-$here/target}"
built="$target_dir/$profile/hank"
[ -x "$built" ] || { echo "install.sh: build output $built not found" >&2; exit 1; }

mkdir -p "$bindir"
tmp="$bindir/.hank.tmp.$$"
cp "$built" "$tmp"
chmod 755 "$tmp"
mv -f "$tmp" "$bindir/hank"
# The sandbox's own small program: every sandboxed agent call starts through it (without it,
# hank starts them through itself, `hank __sandbox`, which loads more at every call).
if [ -x "$target_dir/$profile/hank-sandbox" ]; then
    cp "$target_dir/$profile/hank-sandbox" "$tmp"
    chmod 755 "$tmp"
    mv -f "$tmp" "$bindir/hank-sandbox"
fi
for name in $NAMES; do
    ln -sf hank "$bindir/$name"
done
echo "hank: installed hank and $(echo $NAMES | wc -w | tr -d ' ') alias(es) into $bindir"
case ":${PATH:-}:" in
    *":$bindir:"*) ;;
    *) echo "hank: note: $bindir is not on your PATH; add it, e.g. export PATH=\"$bindir:\$PATH\"" ;;
esac
"$bindir/hank" --version
