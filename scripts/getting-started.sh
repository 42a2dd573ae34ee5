#!/usr/bin/env bash
# Walks the README's "Getting started" as a new user would, from a clean HOME: every command of
# the section is run as written there, in order (the README's block is checked to hold them),
# with what a machine of the project has instead of the outside world:
#   - the agent is the fake Claude Code of fixtures/bin/claude (FAKE_CLAUDE_DIR: each call does
#     the first open item of the plan, and makes the demo a cargo crate so `cargo test` passes);
#   - $EDITOR is a script that writes the next plan (the sections of the first run, the fleet's,
#     the pull request's);
#   - the forge is scripts/fake-github.py on 127.0.0.1 (GH_REPO/GH_TOKEN/GITHUB_API_URL, as
#     `gh auth login` would give) and `origin` a bare repository on disk.
# Step 1's clone is the checkout this script runs from, and install.sh builds the debug
# profile (--debug: CI has it warm; the release build of the README takes ~15 minutes).
# Used by .ci/run; run it by hand with `bash scripts/getting-started.sh`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
readme="$repo/README.md"

work=$(mktemp -d)
fake_pid=""
cleanup() {
    [ -z "$fake_pid" ] || kill "$fake_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
step() { printf '== getting started: %s\n' "$*"; }
fail() { printf 'getting-started: %s\n' "$*" >&2; exit 1; }
# Each command this script runs as the README's must be in its Getting started block.
section=$(sed -n '/^## Getting started/,/^## /p' "$readme")
readme_says() {
    grep -qF -- "$1" <<<"$section" || fail "the README's Getting started no longer says: $1"
}

# A clean machine: a new HOME, Rust and git as installed, the fake agent as `claude`.
export CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}"
export HOME="$work/home"
mkdir -p "$HOME" "$work/bin" "$work/agent"
ln -s "$repo/fixtures/bin/claude" "$work/bin/claude"
export PATH="$HOME/.local/bin:$work/bin:$CARGO_HOME/bin:/usr/local/bin:/usr/bin:/bin"
export FAKE_CLAUDE_DIR="$work/agent" SANDBOX=off NO_COLOR=1
unset GIT_DIR GIT_WORK_TREE GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL \
    GH_TOKEN GITHUB_TOKEN GH_HOST GH_REPO HANK_NOW NOTIFY CONTROL_TOPIC 2>/dev/null || true
cat > "$FAKE_CLAUDE_DIR/effect.sh" <<'EOF'
[ -f Cargo.toml ] || cargo init -q --name demo
mkdir -p notes && date +%s%N > "notes/$(date +%s%N).txt"
sed -i '0,/- \[ \]/s//- [x]/' .hank/fix_plan.md
EOF

# $EDITOR: the user writing the plan, a new version at each edit.
cat > "$work/bin/edit-plan" <<'EOF'
#!/usr/bin/env bash
n=$(( $(cat "$FAKE_CLAUDE_DIR/edits" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$FAKE_CLAUDE_DIR/edits"
case $n in
  1) items='## Parser
- [ ] Parse the input file
- [ ] Report parse errors with line numbers' ;;
  2) items='## Output
- [ ] Print the report as a table

## Docs
- [ ] Document the input format' ;;
  *) items='## Release
- [ ] Add a --version flag' ;;
esac
if [ "$n" = 1 ]; then
  # The template's sections go: the plan is the user's own.
  sed '/^## /,$d' "$1" > "$1.new" && printf '%s\n' "$items" >> "$1.new" && mv "$1.new" "$1"
else
  printf '\n%s\n' "$items" >> "$1"
fi
EOF
chmod +x "$work/bin/edit-plan"
export EDITOR="$work/bin/edit-plan"

step "1. install"
readme_says "./install.sh"
readme_says "hank doctor"
(cd "$repo" && ./install.sh --debug)
command -v hank >/dev/null || fail "hank is not on PATH after ./install.sh (~/.local/bin)"
[ "$(command -v hank)" = "$HOME/.local/bin/hank" ] || fail "hank is $(command -v hank)"

readme_says 'git config --global user.name "Your Name" && git config --global user.email you@example.com'
git config --global user.name "Your Name" && git config --global user.email you@example.com

step "2. a project"
cd "$HOME"
readme_says "hank setup demo --project-type rust && cd demo"
hank setup demo --project-type rust && cd demo
hank doctor >"$work/doctor.txt" 2>&1 || { cat "$work/doctor.txt" >&2; fail "hank doctor is not ready"; }
readme_says '$EDITOR .hank/fix_plan.md'
$EDITOR .hank/fix_plan.md

step "3. the first run"
readme_says "hank run "
hank run
grep -q -- '- \[ \]' .hank/fix_plan.md && fail "the first run left open items"
readme_says 'git add -A && git commit -m "hank: first run"'
git add -A && git commit -m "hank: first run"

step "4. the first fleet"
readme_says '$EDITOR .hank/fix_plan.md && git commit -am "plan: next tasks"'
$EDITOR .hank/fix_plan.md && git commit -am "plan: next tasks"
readme_says "hank fleet --dry-run && hank fleet --agents 2"
hank fleet --dry-run && hank fleet --agents 2
readme_says "git merge hank/fleet"
git merge hank/fleet
grep -q -- '- \[x\] Print the report as a table' .hank/fix_plan.md || fail "the fleet's work is not merged"
grep -q -- '- \[x\] Document the input format' .hank/fix_plan.md || fail "the fleet's work is not merged"

step "5. the first pull request"
git init -q --bare "$work/origin.git"
git remote add origin "$work/origin.git" && git push -q -u origin HEAD
python3 "$repo/scripts/fake-github.py" "$work/github.port" &
fake_pid=$!
for _ in $(seq 50); do [ -s "$work/github.port" ] && break; sleep 0.1; done
[ -s "$work/github.port" ] || fail "the fake GitHub did not start"
export GH_REPO=o/r GH_TOKEN=fake-token GITHUB_API_URL="http://127.0.0.1:$(cat "$work/github.port")"
readme_says '$EDITOR .hank/fix_plan.md && git commit -am "plan: the PR'
$EDITOR .hank/fix_plan.md && git commit -am "plan: the PR's task"
readme_says "hank run --deliver pr"
branch=$(git branch --show-current)
hank run --deliver pr
grep -q "POST /repos/o/r/pulls" "$work/github.port.log" || fail "no pull request was opened"
git -C "$work/origin.git" rev-parse -q --verify refs/heads/hank/$branch >/dev/null \
    || fail "hank/$branch was not pushed"
[ "$(hank status --json | sed -n 's/.*"exit_reason": *"\([a-z_]*\)".*/\1/p' | head -1)" = delivered ] \
    || fail "the run did not end delivered: $(hank status)"
step "done: every step of the README's Getting started worked"
