"""Real runs with and without a model gateway, for the model's cost beside the score
(issue 45): an eval set of two agents that reach their model through the run's gateway,
and a run of an agent that has no model.

The model is ``tests/gateway``'s scripted upstream on loopback, answering each call by
the model the call names and the tool results it carries (:class:`ByModel`), so that
runs made at once get their own answers: the reference agent
(``examples/agents/llm_agent.py --model M``) is told to copy the shipped pendulum
checkpoint, submit it and wait, and scores 1.018. ``terse`` (model-a) does it in 4
calls of 120 tokens each; ``chatty`` (model-b) thinks aloud twice more, in 6 calls of
480: 480 and 2880 tokens per run, the same score, so terse alone is on the Pareto
frontier.
"""

from __future__ import annotations

import contextvars
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from report_helpers import CLI, ROOT, SUBMIT, real_run
from scripted_upstream import COPY_CHECKPOINT, DONE, UPSTREAM_KEY, ScriptedUpstream, ToolCall, Turn

TASK = "td3-inverted-pendulum-v2"
COST_SET = "costs"
"""The eval set :func:`cost_runs` runs."""
EVAL_SET_OUTPUT = "eval-set.txt"
"""Beside the runs root: what ``eval-set`` printed on stdout (its tables)."""
AGENT = f"{sys.executable} examples/agents/llm_agent.py"
CALLS = {"terse": 4, "chatty": 6}
TOKENS = {"terse": 4 * 120, "chatty": 6 * 480}
"""What each label's run costs: the model's calls and tokens (input + output)."""

_TURN: contextvars.ContextVar[Turn] = contextvars.ContextVar("turn")


def _script(thinking: int, tokens_in: int, tokens_out: int) -> list[Turn]:
    """``thinking`` calls that only echo, then copy, submit, wait, and the final answer."""
    calls = [ToolCall("run", {"command": "echo thinking"})] * thinking + [
        ToolCall("run", {"command": COPY_CHECKPOINT}),
        ToolCall("submit", {}),
        ToolCall("status", {"job_id": "", "wait": True}),
    ]
    turns = [Turn(tool_calls=(c,), tokens_in=tokens_in, tokens_out=tokens_out) for c in calls]
    return [*turns, Turn(text=DONE, tokens_in=tokens_in, tokens_out=tokens_out)]


SCRIPTS = {"model-a": _script(0, 100, 20), "model-b": _script(2, 400, 80)}
LABELS = {"terse": "model-a", "chatty": "model-b"}


@dataclass
class ByModel(ScriptedUpstream):
    """The scripted upstream, answering each call with the turn of its model's script
    that follows the tool results the call carries: no state between calls, so the runs
    of an eval set made at once each get their own script."""

    scripts: dict[str, Sequence[Turn]] = field(default_factory=lambda: dict(SCRIPTS))

    async def _answer_now(self, request: web.Request) -> web.StreamResponse:
        body: dict[str, Any] = await request.json()
        answered = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        script = self.scripts[str(body.get("model"))]
        _TURN.set(script[min(answered, len(script) - 1)])
        return await super()._answer_now(request)

    def _turn(self) -> Turn:
        return _TURN.get()


def _env(base: Path) -> dict[str, str]:
    return {**os.environ, "XDG_STATE_HOME": str(base / "xdg"), "ALE_MODEL_API_KEY": UPSTREAM_KEY}


def cost_runs(base: Path) -> Path:
    """Under ``base/runs``: the eval set :data:`COST_SET` (``terse`` and ``chatty``, two
    repetitions each of full runs through the gateway) and ``plain``, a run without a
    gateway (the shipped checkpoint submitted by a script); returns the runs root."""
    upstream = ByModel([]).start()
    try:
        run_args = ["--workers", "1", "--state-dir", str(base / "state"), "--no-videos"]
        run_args += ["--model-upstream", upstream.url + "/v1"]
        run_args += ["--model", "model-a", "--model", "model-b"]
        spec = base / f"{COST_SET}.json"
        spec.write_text(
            json.dumps(
                {
                    "schema_version": 1,
                    "tasks": [TASK],
                    "agents": [
                        {"label": label, "cmd": f"{AGENT} --model {model}"}
                        for label, model in LABELS.items()
                    ],
                    "repetitions": 2,
                    "run_args": run_args,
                    "bootstrap": {"reps": 300, "profile_reps": 200, "seed": 3},
                }
            )
        )
        proc = subprocess.run(
            [*CLI, "eval-set", str(spec), "--runs-root", str(base / "runs"), "--jobs", "2"],
            env={**_env(base), "COLUMNS": "80"},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        logs = {
            str(log.relative_to(base)): log.read_text(errors="replace")[-2000:]
            for log in sorted((base / "runs" / COST_SET).rglob("rep*.log"))
        }
        assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-4000:], logs)
        (base / EVAL_SET_OUTPUT).write_text(proc.stdout)
    finally:
        upstream.stop()
    real_run(base, "plain", TASK, SUBMIT, "--label", "plain", "--no-videos")
    return base / "runs"
