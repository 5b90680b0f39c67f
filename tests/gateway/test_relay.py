"""The relay as the harness starts it: it listens, forks the relay, and becomes the agent."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gateway_helpers import MODEL, Start
from scripted_upstream import UPSTREAM_KEY, Turn

from ale_robotics.gateway import relay
from ale_robotics.harness.agent.model_gateway import UPSTREAM_KEY_ENV, ModelSettings, model_gateway
from ale_robotics.trajectory import TrajectoryWriter

AGENT = textwrap.dedent(
    """
    import openai
    r = openai.OpenAI().chat.completions.create(
        model=__import__("os").environ["ALE_MODEL"], messages=[{"role": "user", "content": "hi"}]
    )
    print("ANSWER", r.choices[0].message.content)
    raise SystemExit(7)
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_agent_behind_the_relay_reaches_the_gateway_and_keeps_its_exit_code(
    start_gateway: Start,
) -> None:
    gateway, _ = start_gateway([Turn(text="relayed")])
    port = _free_port()
    env = {**os.environ, **gateway.agent_env(f"http://127.0.0.1:{port}")}
    argv = [sys.executable, "-I", relay.__file__, "--unix", str(gateway.socket_path)]
    proc = subprocess.run(
        [*argv, "--port", str(port), "--", sys.executable, "-c", AGENT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 7, proc.stderr
    assert "ANSWER relayed" in proc.stdout
    assert gateway.usage().calls == 1


def test_the_harness_side_records_the_gateway_in_the_trajectory(
    short_tmp: Path, start_gateway: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)
    _, upstream = start_gateway([Turn(text="direct", tokens_in=3, tokens_out=4)])
    traj = TrajectoryWriter(short_tmp / "run" / "trajectory.jsonl", "run-x")
    (short_tmp / "run").mkdir(exist_ok=True)
    settings = ModelSettings(upstream.url, (MODEL,), None)
    with model_gateway(
        settings,
        run_dir=short_tmp / "run",
        trajectory=traj,
        task_budget=50,
        isolated_network=False,
    ) as access:
        assert access.wrap(["a"]) == ["a"]  # no sandbox: no relay
        proc = subprocess.run(
            [sys.executable, "-c", AGENT],
            env={**os.environ, **access.env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert "ANSWER direct" in proc.stdout, proc.stderr
    assert access.usage is not None and access.usage.tokens == 7
    assert access.usage.budget_tokens == 50  # the task's, without --model-budget-tokens
    kinds = [line for line in traj.path.read_text().splitlines()]
    assert '"kind":"model_gateway_started"' in kinds[0] and '"upstream_key":"set"' in kinds[0]
    assert UPSTREAM_KEY not in traj.path.read_text()
    assert '"kind":"model_call"' in kinds[1] and '"kind":"model_gateway_stopped"' in kinds[2]
    assert not access.socket_dir.exists()
