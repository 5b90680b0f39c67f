"""An AI agent on the official ``anthropic`` SDK: a tool-use loop, the recipe for that SDK.

It is ``llm_agent.py`` on the Messages API: the same instructions and brief, the same four
tools (its ``Tools``: write a file, run a shell command in the scratch dir, submit, a job's
status), as Anthropic tools; each ``tool_use`` block of the model's answer is run and
answered with a ``tool_result`` until the model stops asking (``stop_reason`` other than
``tool_use``) or ``--max-turns`` is reached::

    export ALE_MODEL_API_KEY=sk-ant-...      # the operator's key: stays in the harness
    ale-robotics run td3-inverted-pendulum-v2 \\
        --agent "python examples/agents/anthropic_agent.py" \\
        --model-upstream https://api.anthropic.com --model claude-sonnet-4-5

``anthropic.Anthropic()`` reads ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``, which the
harness sets to the run's gateway. A refusal of the gateway (its token budget used, a model
off the allow-list) is raised as ``anthropic.APIStatusError`` without retries (the gateway
says ``x-should-retry: false``); its reason is printed and the agent stops.

Exit status: 0 when a submitted job succeeded; 1 otherwise; 2 when the gateway is not
configured.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from llm_agent import OUTPUT_CAP, SYSTEM, TOOLS, Tools, read_brief

# llm_agent's tools, in the Messages API's shape
ANTHROPIC_TOOLS: list[dict[str, Any]] = [
    {
        "name": t["function"]["name"],
        "description": t["function"]["description"],
        "input_schema": t["function"]["parameters"],
    }
    for t in TOOLS
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--max-turns", type=int, default=40, help="most model calls (default 40)")
    parser.add_argument("--model", default=os.environ.get("ALE_MODEL"), help="default: $ALE_MODEL")
    parser.add_argument("--max-tokens", type=int, default=OUTPUT_CAP, help="output cap per call")
    args = parser.parse_args(argv)
    if not args.model or not os.environ.get("ANTHROPIC_BASE_URL"):
        print(
            "error: no model gateway: run under `ale-robotics run --model-upstream URL "
            "--model NAME` (it sets ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY and ALE_MODEL)",
            file=sys.stderr,
        )
        return 2
    import anthropic

    client = anthropic.Anthropic()  # ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY: the gateway
    tools = Tools()
    messages: list[dict[str, Any]] = [{"role": "user", "content": read_brief()}]
    for turn in range(args.max_turns):
        try:
            reply = client.messages.create(
                model=args.model,
                max_tokens=args.max_tokens,
                system=SYSTEM,
                messages=messages,  # type: ignore[arg-type]
                tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
            )
        except anthropic.APIStatusError as exc:  # budget used, model refused, bad key
            print(f"model refused ({exc.status_code}): {_message(exc)}", flush=True)
            break
        except anthropic.APIError as exc:
            print(f"model error: {exc}", file=sys.stderr, flush=True)
            break
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in reply.content],
            }
        )
        results: list[dict[str, Any]] = []
        for block in reply.content:
            if block.type == "text" and block.text:
                print(f"[{turn}] model: {block.text}", flush=True)
            elif block.type == "tool_use":
                arguments = json.dumps(block.input)
                result = tools.call(block.name, arguments)
                print(f"[{turn}] {block.name}({arguments[:200]}) -> {result[:300]}", flush=True)
                results.append({"type": "tool_result", "tool_use_id": block.id, "content": result})
        if reply.stop_reason != "tool_use" or not results:
            break
        messages.append({"role": "user", "content": results})
    return 0 if "SUCCEEDED" in tools.jobs.values() else 1


def _message(exc: Any) -> str:
    """The refusal's own message (the gateway's reason), else the exception's text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return str(exc)


if __name__ == "__main__":
    sys.exit(main())
