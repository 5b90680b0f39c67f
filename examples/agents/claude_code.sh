#!/usr/bin/env bash
# Claude Code (npm @anthropic-ai/claude-code, tested 2.1.337) as an ALE agent: the recipe.
#
#   npm install -g --prefix /opt/ale-agent-tools @anthropic-ai/claude-code@2.1.337
#   export ALE_MODEL_API_KEY=sk-ant-...        # the operator's key: stays in the harness
#   ale-robotics run td3-inverted-pendulum-v2 \
#       --agent-tools /opt/ale-agent-tools \
#       --agent "bash examples/agents/claude_code.sh" \
#       --model-upstream https://api.anthropic.com --model claude-sonnet-4-5
#
# Claude Code reads ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY, which the harness sets to the
# run's model gateway; it asks for the model given with --model ($ALE_MODEL, the first
# --model of the run). Headless: -p PROMPT runs one task and exits, and
# --dangerously-skip-permissions runs its tools without asking (ALE's sandbox is the
# boundary). Claude Code refuses that flag as root: under a root harness with
# --sandbox none, add --agent-env IS_SANDBOX=1 (inside --sandbox bwrap or docker the agent
# is uid 65534, not root). Without an API key it prints "Not logged in · Please run /login"
# and calls nothing.
#
# Offline: without the DISABLE variables it looks up api.anthropic.com (telemetry, a
# connectivity check of HEAD /api/hello on the base URL) on every start; with them it
# makes only its model calls (POST /v1/messages?beta=true). Its own model choices (a
# sub-agent of its Agent tool asks for "haiku", i.e. claude-haiku-*, which the gateway
# refuses with 403 unless allowed) are pinned to $ALE_MODEL. Measured:
# docs/agent-software-notes.md. Extra arguments are passed to claude (e.g. --max-turns 50).
set -euo pipefail
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 \
    DISABLE_ERROR_REPORTING=1
export ANTHROPIC_DEFAULT_HAIKU_MODEL="$ALE_MODEL" ANTHROPIC_DEFAULT_SONNET_MODEL="$ALE_MODEL" \
    ANTHROPIC_DEFAULT_OPUS_MODEL="$ALE_MODEL" ANTHROPIC_SMALL_FAST_MODEL="$ALE_MODEL" \
    CLAUDE_CODE_SUBAGENT_MODEL="$ALE_MODEL"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# `ale-robotics submit`, which the prompt names, is in the harness's Python environment
if ! command -v ale-robotics >/dev/null && [ -n "${VIRTUAL_ENV:-}" ]; then
    export PATH="$VIRTUAL_ENV/bin:$PATH"
fi
brief="${ALE_TASK_DIR:+$ALE_TASK_DIR/brief.md}"
prompt="$(cat "${brief:-/dev/null}" 2>/dev/null || true)

$(cat "$here/cli_agent_prompt.md")"
exec claude -p "$prompt" --model "$ALE_MODEL" --dangerously-skip-permissions "$@" </dev/null
