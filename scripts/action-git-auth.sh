# Sourced by the action's own steps that reach the remote (restore/claim, run-task, save,
# deliver), never by a step where only the agent runs: git authenticates to the Actions server
# with $GH_TOKEN through GIT_CONFIG_* in this step's environment. Nothing is written to
# .git/config (checkout runs with persist-credentials: false), so the token leaves with the
# step. hank keeps GH_TOKEN and every GIT_CONFIG_* variable out of an agent's environment.
if [ -n "${GH_TOKEN:-}" ]; then
  hank_git_server="${GITHUB_SERVER_URL:-https://github.com}"
  hank_git_basic=$(printf 'x-access-token:%s' "$GH_TOKEN" | base64 | tr -d '\n')
  echo "::add-mask::${hank_git_basic}"
  # The empty value first resets any header an earlier checkout left for the same server.
  export GIT_CONFIG_COUNT=2
  export GIT_CONFIG_KEY_0="http.${hank_git_server}/.extraheader" GIT_CONFIG_VALUE_0=""
  export GIT_CONFIG_KEY_1="http.${hank_git_server}/.extraheader"
  export GIT_CONFIG_VALUE_1="AUTHORIZATION: basic ${hank_git_basic}"
  unset hank_git_server hank_git_basic
fi
