"""An AI agent on the OpenAI Agents SDK (``openai-agents``): the recipe for that SDK.

It is ``llm_agent.py``'s loop written the Agents SDK's way: the same instructions and brief,
the same four tools (its ``Tools``: write a file, run a shell command in the scratch dir,
submit, a job's status), and ``Runner`` driving the model until it answers without a tool
call. Run it as a user of the SDK would::

    export ALE_MODEL_API_KEY=sk-...          # the operator's key: stays in the harness
    ale-robotics run td3-inverted-pendulum-v2 \\
        --agent "python examples/agents/openai_agents_sdk.py" \\
        --model-upstream https://api.openai.com/v1 --model gpt-4.1

What the SDK needs from the harness, and gets: ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``
(the run's gateway; the SDK's default client reads them), ``ALE_MODEL``. What it must not
do offline: export traces, which it does by default to OpenAI's servers whatever the base
URL (a connection to the outside on every run, and one refused in a sandbox, which it
retries for seconds at exit): ``set_tracing_disabled(True)`` turns that off, as
``OPENAI_AGENTS_DISABLE_TRACING=1`` would. The SDK speaks the Responses API by default;
``--chat`` makes it use chat completions, for an upstream without ``/v1/responses``.

Exit status: 0 when a submitted job succeeded; 1 otherwise (nothing submitted, a failed job,
the model refused: its reason is printed, e.g. "model token budget of N used"); 2 when the
gateway is not configured.
"""

from __future__ import annotations

import argparse
import os
import sys

from llm_agent import SYSTEM, Tools, read_brief


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--max-turns", type=int, default=40, help="most model calls (default 40)")
    parser.add_argument("--model", default=os.environ.get("ALE_MODEL"), help="default: $ALE_MODEL")
    parser.add_argument("--chat", action="store_true", help="chat completions, not Responses")
    args = parser.parse_args(argv)
    if not args.model or not os.environ.get("OPENAI_BASE_URL"):
        print(
            "error: no model gateway: run under `ale-robotics run --model-upstream URL "
            "--model NAME` (it sets OPENAI_BASE_URL, OPENAI_API_KEY and ALE_MODEL)",
            file=sys.stderr,
        )
        return 2
    import openai
    from agents import (
        Agent,
        AgentsException,
        Runner,
        function_tool,
        set_default_openai_api,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)  # else traces go to OpenAI's servers, off the sandbox
    if args.chat:
        set_default_openai_api("chat_completions")
    tools = Tools()

    def logged(name: str, result: str) -> str:
        print(f"{name} -> {result[:300]}", flush=True)
        return result

    @function_tool
    def write_file(path: str, content: str) -> str:
        """Write a text file (path relative to the scratch directory)."""
        return logged("write_file", tools.call("write_file", _args(path=path, content=content)))

    @function_tool
    def run(command: str, timeout_s: float = 600) -> str:
        """Run a shell command in the scratch directory; returns exit code and output."""
        return logged("run", tools.call("run", _args(command=command, timeout_s=timeout_s)))

    @function_tool
    def submit() -> str:
        """Submit the submission directory for evaluation; returns a job id."""
        return logged("submit", tools.call("submit", "{}"))

    @function_tool
    def status(job_id: str = "", wait: bool = False) -> str:
        """A job's state and progress; wait=true waits until it ends."""
        return logged("status", tools.call("status", _args(job_id=job_id, wait=wait)))

    agent = Agent(
        name="ale-agent",
        instructions=SYSTEM,
        model=args.model,
        tools=[write_file, run, submit, status],
    )
    try:
        result = Runner.run_sync(agent, read_brief(), max_turns=args.max_turns)
        print(f"model: {result.final_output}", flush=True)
    except openai.APIStatusError as exc:  # a refusal of the gateway: budget, model, key
        print(f"model refused ({exc.status_code}): {_message(exc)}", flush=True)
    except (openai.APIError, AgentsException) as exc:
        print(f"agent stopped: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    return 0 if "SUCCEEDED" in tools.jobs.values() else 1


def _args(**kwargs: object) -> str:
    import json

    return json.dumps(kwargs)


def _message(exc: object) -> str:
    """The refusal's own message (the gateway's reason), else the exception's text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
    return str(exc)


if __name__ == "__main__":
    sys.exit(main())
