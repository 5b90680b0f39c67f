#!/usr/bin/env bash
# Codex CLI (npm @openai/codex, tested 0.171.0) as an ALE agent: the recipe.
#
#   npm install -g --prefix /opt/ale-agent-tools @openai/codex@0.171.0
#   export ALE_MODEL_API_KEY=sk-...            # the operator's key: stays in the harness
#   ale-robotics run td3-inverted-pendulum-v2 \
#       --agent-tools /opt/ale-agent-tools \
#       --agent "bash examples/agents/codex_cli.sh" \
#       --model-upstream https://api.openai.com/v1 --model gpt-5.1-codex
#
# Codex ignores OPENAI_BASE_URL and OPENAI_API_KEY: its built-in "openai" provider calls
# api.openai.com with CODEX_API_KEY (or a ChatGPT login), and tries a WebSocket on
# GET /v1/responses before HTTP. So the recipe declares a provider of its own, "ale": the
# gateway's URL, its key read from OPENAI_API_KEY (env_key), the Responses API over HTTP
# (a custom provider makes no WebSocket attempt). Also, each measured
# (docs/agent-software-notes.md):
#   --dangerously-bypass-approvals-and-sandbox  run commands without Codex's own sandbox:
#       ALE's sandbox is the boundary, and Codex's bwrap cannot nest in it (every command
#       fails "Creating new namespace failed: nesting depth ... exceeded (ENOSPC)");
#   -c web_search=disabled, --disable multi_agent  no provider-side web_search tool (the
#       gateway refuses it) and no "namespace" tool;
#   --disable plugins, -c analytics.enabled=false  no lookups of github.com, chatgpt.com,
#       ab.chatgpt.com at start;
#   -c allow_login_shell=false  commands run in `bash -c`, not `bash -lc` (a login shell
#       resets PATH from /etc/profile where it can read it, losing `ale-robotics`);
#   </dev/null  `codex exec` also reads a prompt from stdin when it is not a terminal.
# Extra arguments are passed to codex exec (e.g. -c model_reasoning_effort=high).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v ale-robotics >/dev/null && [ -n "${VIRTUAL_ENV:-}" ]; then
    export PATH="$VIRTUAL_ENV/bin:$PATH"
fi
brief="${ALE_TASK_DIR:+$ALE_TASK_DIR/brief.md}"
prompt="$(cat "${brief:-/dev/null}" 2>/dev/null || true)

$(cat "$here/cli_agent_prompt.md")"
exec codex exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox \
    -c model_provider=ale \
    -c model_providers.ale.name=ale \
    -c "model_providers.ale.base_url=$OPENAI_BASE_URL" \
    -c model_providers.ale.env_key=OPENAI_API_KEY \
    -c model_providers.ale.wire_api=responses \
    -c web_search=disabled --disable multi_agent \
    --disable plugins -c analytics.enabled=false -c check_for_update_on_startup=false \
    -c allow_login_shell=false \
    -m "$ALE_MODEL" "$@" "$prompt" </dev/null
