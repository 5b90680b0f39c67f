"""Real agent software scores through the gateway, unchanged (issue 45): each recipe of
``examples/agents/`` run by ``ale-robotics run`` in bubblewrap (one also in the docker
sandbox) against the scripted upstream, which answers in the tool calls each client's
software runs (``scripted_upstream.submit_checkpoint_script``): the agent copies the shipped
checkpoint, submits it and waits, scoring 1.018 on td3-inverted-pendulum-v2, and the
transcript verifies against the signed trajectory.

Claude Code and the Codex CLI come from ``make agent-tools`` (skipped without them, failed
under ``ALE_REQUIRE_AGENT_TOOLS=1`` as in CI); the OpenAI Agents SDK is in the project's
environment (the dev extra). Slow: a run each, the agent about 20 s of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_tools_support import need_agent_tool
from docker_support import need_docker, sandbox_args
from scripted_upstream import UPSTREAM_KEY, ScriptedUpstream, submit_checkpoint_script

from ale_robotics.sandboxes.bwrap.command import sandbox_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot start here"),
]

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ale_robotics"]
MODEL = "scripted-model"


def _run(
    tmp: Path, script: str, agent: str, *extra: str, sandbox: str = "bwrap"
) -> tuple[subprocess.CompletedProcess[str], Path, ScriptedUpstream]:
    upstream = ScriptedUpstream(submit_checkpoint_script(script)).start()
    run_dir = tmp / "run"
    try:
        proc = subprocess.run(
            [
                *CLI, "run", "td3-inverted-pendulum-v2", "--agent", agent,
                *sandbox_args(sandbox), "--workers", "1", "--no-videos",
                "--run-dir", str(run_dir), "--state-dir", str(tmp / "state"),
                "--model-upstream", upstream.url + "/v1", "--model", MODEL, *extra,
            ],
            env={**os.environ, "ALE_MODEL_API_KEY": UPSTREAM_KEY},
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
            check=False,
        )  # fmt: skip
    finally:
        upstream.stop()
    return proc, run_dir, upstream


def _scored(proc: subprocess.CompletedProcess[str], run_dir: Path) -> dict[str, object]:
    log = (run_dir / "agent.log").read_text() if (run_dir / "agent.log").exists() else ""
    assert proc.returncode == 0, proc.stderr[-3000:] + log[-3000:]
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("score: ")), "")
    assert line.startswith("score: 1.018"), proc.stdout[-2000:] + log[-3000:]
    verify = subprocess.run(
        [*CLI, "trajectory", "verify", str(run_dir)], capture_output=True, text=True, check=False
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    result: dict[str, object] = json.loads((run_dir / "result.json").read_text())
    usage = result["model_usage"]
    assert isinstance(usage, dict) and usage["calls"] >= 3 and usage["refused_calls"] == 0
    return result


def test_claude_code(short_tmp: Path) -> None:
    tools = need_agent_tool("claude")
    proc, run_dir, upstream = _run(
        short_tmp, "claude-code", "bash examples/agents/claude_code.sh", "--agent-tools", str(tools)
    )
    _scored(proc, run_dir)
    for got in upstream.received:  # Claude Code's own requests, passed through
        assert got.path == "/v1/messages" and got.query == "beta=true"
        assert got.headers["x-api-key"] == UPSTREAM_KEY
        assert got.headers["User-Agent"].startswith("claude-cli/2.1.337")


def test_codex_cli(short_tmp: Path) -> None:
    tools = need_agent_tool("codex")
    proc, run_dir, upstream = _run(
        short_tmp, "codex", "bash examples/agents/codex_cli.sh", "--agent-tools", str(tools)
    )
    _scored(proc, run_dir)
    for got in upstream.received:
        assert got.path == "/v1/responses" and got.body.get("stream") is True
        assert got.headers["originator"].startswith("codex")


@pytest.mark.parametrize("flags", [(), ("--chat",)], ids=["responses", "chat"])
def test_openai_agents_sdk(short_tmp: Path, flags: tuple[str, ...]) -> None:
    agent = " ".join(["python examples/agents/openai_agents_sdk.py", *flags])
    proc, run_dir, upstream = _run(short_tmp, "tools", agent)
    _scored(proc, run_dir)
    paths = {got.path for got in upstream.received}
    assert paths == {"/v1/chat/completions" if flags else "/v1/responses"}


def test_anthropic_sdk_tool_loop(short_tmp: Path) -> None:
    proc, run_dir, upstream = _run(short_tmp, "tools", "python examples/agents/anthropic_agent.py")
    _scored(proc, run_dir)
    assert {got.path for got in upstream.received} == {"/v1/messages"}


def test_anthropic_sdk_tool_loop_in_the_docker_sandbox(short_tmp: Path) -> None:
    need_docker()
    proc, run_dir, _ = _run(
        short_tmp, "tools", "python examples/agents/anthropic_agent.py", sandbox="docker"
    )
    result = _scored(proc, run_dir)
    assert result["sandbox"] == "docker"
