"""Reference AI agent: a small tool-using loop on the official ``openai`` SDK.

It is the pattern for plugging any model-driven agent into ALE Robotics. The harness runs
the agent offline, in its sandbox, with the run's model gateway in front of the operator's
model (``ale-robotics run TASK --agent "python examples/agents/llm_agent.py"
--model-upstream URL --model NAME [--model-budget-tokens N]``) and gives it the variables
the SDKs read:

=================== =============================================================
``OPENAI_BASE_URL`` the gateway's OpenAI-compatible endpoint (``.../v1``)
``OPENAI_API_KEY``  the run's gateway key (not the operator's; dead after the run)
``ANTHROPIC_*``     the same for the Anthropic protocol (``/v1/messages``)
``ALE_MODEL``       the model to ask (the first of the run's allow-list)
``ALE_TASK_DIR``    the task packet: ``brief.md``, ``task.json``, ``contract.json``, ``paper/``
=================== =============================================================

``openai.OpenAI()`` then needs no argument; a CLI coding agent (Claude Code, Codex CLI,
OpenHands, aider...) works the same way once its base URL and key settings point at those
variables. Each call is metered against the run's token budget and recorded in the run's
trajectory; past the budget the gateway answers 429 (``openai.RateLimitError``, "model
token budget of N used"), and this agent stops there.

The loop: the brief (``$ALE_TASK_DIR/brief.md``, else the task as ``GetSpec`` gives it)
goes to the model with four tools, and each tool call's result goes back, until the model
answers without a tool call or ``--max-turns`` is reached:

* ``write_file(path, content)``: a text file, relative to the scratch dir (its cwd);
* ``run(command, timeout_s)``: a shell command in the scratch dir; its exit code and output;
* ``submit()``: ``SubmitBatchEval`` of the submission dir (``$ALE_SUBMISSION_DIR``);
* ``status(job_id, wait)``: the job's state and progress (never the score: the harness
  reports that).

Exit status: 0 when a submitted job succeeded, 1 otherwise (nothing submitted, a job that
failed, the model budget used first), 2 when the gateway is not configured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SYSTEM = (
    "You are an AI agent evaluated by ALE Robotics on a robotics task from a paper. You work "
    "offline in a sandbox: your scratch directory is the working directory, your submission "
    "directory is $ALE_SUBMISSION_DIR, your read-only workspace is $ALE_WORKSPACE. Use the "
    "tools to write and run code, put the artifact the contract asks for in the submission "
    "directory, submit it, and check its status. Reply without a tool call when done."
)
OUTPUT_CAP = 8000
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write a text file (path relative to the scratch directory).",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run",
            "description": "Run a shell command in the scratch directory; returns exit code "
            "and output (the last 8000 characters).",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout_s": {"type": "number", "default": 600},
                },
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Submit the submission directory for evaluation; returns a job id.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "status",
            "description": "A job's state and progress; wait=true waits until it ends.",
            "parameters": {
                "type": "object",
                "properties": {"job_id": {"type": "string"}, "wait": {"type": "boolean"}},
            },
        },
    },
]


def read_brief() -> str:
    """The task brief: the packet's ``brief.md``, else what ``GetSpec`` says."""
    task_dir = os.environ.get("ALE_TASK_DIR")
    if task_dir and (Path(task_dir) / "brief.md").is_file():
        return (Path(task_dir) / "brief.md").read_text(encoding="utf-8")
    from ale_robotics.client import AleClient

    with AleClient.from_env() as client:
        spec = client.get_spec()
    brief = getattr(spec, "brief", "") or ""
    if brief:
        return brief
    contract = spec.contract.model_dump_json(indent=1) if spec.contract is not None else "{}"
    return f"# Task {spec.task.id}\n\n{spec.task.model_dump_json(indent=1)}\n\n{contract}"


class Tools:
    """The tools' implementations; each returns the text the model gets back."""

    def __init__(self) -> None:
        self.jobs: dict[str, str] = {}  # job id -> last state seen

    def write_file(self, path: str, content: str) -> str:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode())} bytes to {target}"

    def run(self, command: str, timeout_s: float = 600) -> str:
        try:
            done = subprocess.run(
                command,
                shell=True,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"timed out after {timeout_s} s"
        output = (done.stdout + done.stderr)[-OUTPUT_CAP:]
        return f"exit code {done.returncode}\n{output}"

    def submit(self) -> str:
        from ale_robotics.client import AleClient

        with AleClient.from_env() as client:
            job_id = client.submit()
        self.jobs[job_id] = "QUEUED"
        return f"submitted: job {job_id}"

    def status(self, job_id: str = "", wait: bool = False) -> str:
        from ale_robotics.client import AleClient

        with AleClient.from_env() as client:
            s = client.status(job_id)  # no job_id: the run's newest job
            if wait:
                s = client.wait(s.job_id)
        self.jobs[s.job_id] = s.state
        reason = f", {s.failure_reason}" if s.failure_reason else ""
        return f"job {s.job_id}: {s.state} ({s.episodes_done}/{s.episodes_total} episodes{reason})"

    def call(self, name: str, arguments: str) -> str:
        try:
            args = json.loads(arguments or "{}")
            method = {
                "write_file": self.write_file,
                "run": self.run,
                "submit": self.submit,
                "status": self.status,
            }[name]
            return str(method(**args))
        except Exception as exc:  # the model sees what went wrong and can try again
            return f"error: {type(exc).__name__}: {exc}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--max-turns", type=int, default=40, help="most model calls (default 40)")
    parser.add_argument("--model", default=os.environ.get("ALE_MODEL"), help="default: $ALE_MODEL")
    args = parser.parse_args(argv)
    if not args.model or not os.environ.get("OPENAI_BASE_URL"):
        print(
            "error: no model gateway: run under `ale-robotics run --model-upstream URL "
            "--model NAME` (it sets OPENAI_BASE_URL, OPENAI_API_KEY and ALE_MODEL)",
            file=sys.stderr,
        )
        return 2
    import openai

    client = openai.OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY: the run's gateway
    tools = Tools()
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": read_brief()},
    ]
    for turn in range(args.max_turns):
        try:
            reply = client.chat.completions.create(
                model=args.model,
                messages=messages,
                tools=TOOLS,  # type: ignore[arg-type]
            )
        except openai.RateLimitError as exc:  # the run's model token budget is used
            print(f"model refused: {exc}", flush=True)
            break
        except openai.APIError as exc:
            print(f"model error: {exc}", file=sys.stderr, flush=True)
            break
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if message.content:
            print(f"[{turn}] model: {message.content}", flush=True)
        if not message.tool_calls:
            break
        for tc in message.tool_calls:
            if tc.type != "function":
                continue
            result = tools.call(tc.function.name, tc.function.arguments)
            print(
                f"[{turn}] {tc.function.name}({tc.function.arguments[:200]}) -> {result[:300]}",
                flush=True,
            )
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": result})
    return 0 if "SUCCEEDED" in tools.jobs.values() else 1


if __name__ == "__main__":
    sys.exit(main())
