"""A stuck agent is visible (issue 45): what the console shows of the agent, and the idle
report when it makes no model call and no evaluator call for ``--agent-idle-s``.

* ``GetRunActivity`` on a real evaluator: when the agent last called (every agent RPC and
  every Step), answered on the harness channel only;
* :class:`LastLine`: the last line of what the agent printed, progress bars and escape
  codes included;
* end to end: a run whose agent prints and then sleeps is reported idle (console line,
  ``agent_idle`` event, ``result.json``), one that keeps calling the evaluator is not, and
  the console shows the agent's last line while it runs.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ale_robotics.client import AleClient, RemoteEnv
from ale_robotics.errors import PermissionDeniedError
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.harness.agent.activity import LastLine
from ale_robotics.v1 import ale_env_pb2 as pb

CLI = [sys.executable, "-m", "ale_robotics"]
ROOT = Path(__file__).resolve().parents[2]


RUN = "run-activity"


def _last_call(evaluator: RunningEvaluator) -> float:
    with AleClient(evaluator.harness_address, evaluator.harness_token) as h:
        reply = h._call(h.stub.GetRunActivity, pb.GetRunActivityRequest(run_id=RUN))
    return float(reply.last_agent_call_unix)


@pytest.mark.parametrize("transport", ["stream", "shm"])
def test_the_evaluator_says_when_the_agent_last_called(short_tmp: Path, transport: str) -> None:
    """Every agent RPC counts, and every Step of an open stream or of the data plane (one
    RPC opened them, the Steps after it are calls too)."""
    evaluator = serve(
        EvaluatorConfig(short_tmp / "state", None, task_id="td3-hopper-v1", run_id=RUN, workers=1),
        agent_listen=f"unix://{short_tmp}/a/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
    )
    try:
        assert _last_call(evaluator) == 0.0  # no agent call yet
        before = time.time()
        agent = AleClient(
            evaluator.agent_address, evaluator.agent_token, task_id="td3-hopper-v1", run_id=RUN
        )
        env = RemoteEnv(agent, transport=transport, own_client=False)  # type: ignore[arg-type]
        try:
            env.reset(seed=0)
            env.step(env.action_space.sample())
            assert before <= _last_call(evaluator) <= time.time()
            time.sleep(0.2)
            stepped = time.time()
            env.step(env.action_space.sample())
            assert _last_call(evaluator) >= stepped
        finally:
            env.close()
        with pytest.raises(PermissionDeniedError, match="harness-channel"):
            agent._call(agent.stub.GetRunActivity, pb.GetRunActivityRequest(run_id=RUN))
        agent.close()
    finally:
        evaluator.stop(grace=0.5)


def test_the_last_line_is_what_a_reader_of_the_log_would_see() -> None:
    last = LastLine()
    last.feed(b"epoch 1\nepo")
    assert last.line == "epoch 1"
    last.feed(b"ch 2\n\n   \n")
    assert last.line == "epoch 2"
    last.feed(b"\x1b[32mtraining 10%\rtraining 20%\r")  # a progress bar, coloured
    assert last.line == "training 20%"
    last.feed(b"x" * 500 + b"\n")
    assert last.line is not None and len(last.line) == 161 and last.line.endswith("…")
    last.feed(b"\xff\xfebroken utf-8\n")
    assert last.line is not None and last.line.endswith("broken utf-8")


def _run(tmp: Path, agent: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *CLI, "run", "td3-inverted-pendulum-v2", "--agent", agent, "--sandbox", "none",
            "--workers", "1", "--no-videos", "--run-dir", str(tmp / "run"),
            "--state-dir", str(tmp / "state"), *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )  # fmt: skip


SLEEPER = "import time; print('loading the model', flush=True); time.sleep(8)"
CALLER = """
import os, time
from ale_robotics.client import AleClient
c = AleClient.from_env()
c.get_spec()
with open(os.path.join(os.environ["ALE_SCRATCH_DIR"], "first_call"), "w") as f:
    f.write(repr(time.time()))
end = time.monotonic() + 8
while time.monotonic() < end:
    c.get_spec()
    time.sleep(0.5)
print('done calling', flush=True)
"""


def test_an_agent_that_calls_nothing_is_reported_idle(short_tmp: Path) -> None:
    proc = _run(short_tmp, shlex.join([sys.executable, "-c", SLEEPER]), "--agent-idle-s", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "IDLE" in proc.stderr and "no model or evaluator call" in proc.stderr
    assert "agent: loading the model" in proc.stderr  # the console shows its last line
    run_dir = short_tmp / "run"
    result = json.loads((run_dir / "result.json").read_text())
    assert result["agent_idle_reported"] is True
    assert result["agent_idle_longest_s"] >= 2
    events = [json.loads(ln) for ln in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    (idle,) = [e["payload"] for e in events if e["kind"] == "agent_idle"]
    assert idle["idle_after_s"] == 2 and idle["last_line"] == "loading the model"


def test_an_agent_that_keeps_calling_the_evaluator_is_not(short_tmp: Path) -> None:
    """Once it calls every 0.5 s it is never idle (whatever its start took on this host:
    a stretch before its first call, under load, may be reported, and only that one)."""
    proc = _run(short_tmp, shlex.join([sys.executable, "-c", CALLER]), "--agent-idle-s", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = short_tmp / "run"
    first_call = float((run_dir / "scratch" / "first_call").read_text())
    events = [json.loads(ln) for ln in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    for event in events:
        if event["kind"] == "agent_idle":
            when = dt.datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
            assert when < first_call, event
    assert "done calling" in (run_dir / "agent.log").read_text()
