#!/bin/sh
# Inspect's ReAct agent on an ALE task, with the operator's model: `ale_task`'s default
# solver (ReAct with bash, python and a text editor, each tool call run in the ALE run's
# sandbox), scored by the evaluator on hidden seeds. Tested with inspect-ai 0.3.285 (the
# release the `inspect` extra pins).
#
#   pip install 'ale-robotics[inspect]'
#   export OPENAI_API_KEY=sk-...                      # the operator's key
#   export OPENAI_BASE_URL=https://host.example/v1    # only for another OpenAI-compatible upstream
#   sh examples/agents/inspect_react.sh [TASK [MODEL [inspect eval options...]]]
#
# TASK: td3-inverted-pendulum-v2 by default; MODEL: openai/gpt-5 by default, or any model
# Inspect names (anthropic/claude-sonnet-4-5 with ANTHROPIC_API_KEY, ...). Run it from the
# directory the agent's workspace is to be (the runs go to ./runs, Inspect's log to ./logs):
# `ale-robotics runs list` and `inspect view` show them.
set -eu
task=${1:-td3-inverted-pendulum-v2}
model=${2:-openai/gpt-5}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
exec inspect eval ale_robotics/ale_task -T task_id="$task" --model "$model" "$@"
