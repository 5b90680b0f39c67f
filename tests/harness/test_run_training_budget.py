"""An operator's training budget, synced with `ale-robotics registry sync`, is enforced by
the evaluator on practice sessions and reported: in GetSpec, in the refusal, in the
EvalResult and in a signed trajectory event."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ale_robotics.client import AleClient
from ale_robotics.evaluator import EvaluatorConfig, serve
from ale_robotics.tasks import Registry, default_registry, load_manifest

CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-hopper-v1"
BUDGET = 2000

AGENT = """
import numpy as np
from ale_robotics.client import AleClient, RemoteEnv
from ale_robotics.errors import ResourceExhaustedError

env = RemoteEnv.from_env()                   # practice: counts against the budget
obs, _ = env.reset(seed=0)
steps = 0
try:
    while steps < 2 * BUDGET:                # bounded: without enforcement, stop anyway
        obs, _, terminated, truncated, _ = env.step(np.zeros(3, np.float32))
        steps += 1
        if terminated or truncated:
            obs, _ = env.reset()
    print(f"not refused after {steps} steps")
except ResourceExhaustedError as exc:
    print(f"refused after {steps} steps ({exc.code.name}): {exc}")
try:
    env.reset(seed=1)
    print("reset allowed")
except ResourceExhaustedError:
    print("reset refused too")
env.close()
view = AleClient.from_env().get_spec()
print("spec says used", view.training_agent_steps_used, "of", view.training_agent_steps)

ev = RemoteEnv.from_env(kind="eval")         # evaluation does not count
ev.reset()
while not ev.eval_complete:
    _, _, terminated, truncated, _ = ev.step(np.zeros(3, np.float32))
    if (terminated or truncated) and not ev.eval_complete:
        ev.reset()
ev.close()
"""


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "XDG_STATE_HOME": str(tmp / "xdg")}


def _sync_budget(tmp: Path) -> None:
    """Sync a manifest that differs from the bundled one in td3-hopper-v1's budget only."""
    data = json.loads(load_manifest().model_dump_json())
    data["release"] = "v0.5-budget"
    data["tasks"][TASK]["compute_budget"]["training_steps"] = BUDGET
    path = tmp / "manifest.json"
    path.write_text(json.dumps(data))
    r = subprocess.run(
        [*CLI, "registry", "sync", str(path)],
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    shown = subprocess.run(
        [*CLI, "tasks", "show", TASK, "--json"],
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=60,
    )
    doc = json.loads(shown.stdout)
    assert doc["manifest"]["compute_budget"]["training_steps"] == BUDGET
    # the entry is still bound to the shipped config's bytes
    shipped = default_registry().entry(TASK).sha256
    assert doc["manifest"]["config_sha256"] == doc["config_sha256"] == shipped


def test_a_synced_budget_only_manifest_reaches_getspec(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sync_budget(short_tmp)
    monkeypatch.setenv("XDG_STATE_HOME", str(short_tmp / "xdg"))
    reg = Registry.bundled()  # reads the synced manifest, as `ale-robotics run` does
    running = serve(
        EvaluatorConfig(short_tmp / "state", None, workers=1, task_id=TASK, run_id="run-b1"),
        agent_listen=f"unix://{short_tmp}/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
        registry=reg,
    )
    try:
        with AleClient(running.agent_address, running.agent_token, task_id=TASK) as client:
            view = client.get_spec()
    finally:
        running.stop(grace=0.5)
    limits = view.raw.limits
    assert (limits.training_steps, limits.training_steps_unit) == (BUDGET, "agent_step")
    assert limits.training_agent_steps == BUDGET and limits.training_steps_enforced
    assert view.training_agent_steps == BUDGET and view.training_agent_steps_used == 0
    assert view.training_budget.startswith("2,000 agent steps; an agent step is one env")


def test_practice_is_refused_at_the_budget_and_the_result_shows_the_steps(
    short_tmp: Path,
) -> None:
    _sync_budget(short_tmp)
    agent = short_tmp / "agent.py"
    agent.write_text(AGENT.replace("BUDGET", str(BUDGET)))
    run = short_tmp / "run"
    proc = subprocess.run(
        [
            *CLI,
            "run",
            TASK,
            "--agent",
            f"{sys.executable} {agent}",
            "--sandbox",
            "none",
            "--episodes",
            "1",
            "--run-dir",
            str(run),
            "--state-dir",
            str(short_tmp / "state"),
        ],
        env=_env(short_tmp),
        capture_output=True,
        text=True,
        timeout=240,
        cwd=short_tmp,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = (run / "agent.log").read_text()
    assert f"refused after {BUDGET} steps (RESOURCE_EXHAUSTED): " in log, log
    refusal = next(x for x in log.splitlines() if x.startswith("refused after"))
    assert f"has taken {BUDGET:,} of its {BUDGET:,} agent steps" in refusal
    assert f"compute_budget.training_steps = {BUDGET:,} agent steps" in refusal
    assert "reset refused too" in log
    assert f"spec says used {BUDGET} of {BUDGET}" in log
    report = json.loads((run / "result.json").read_text())
    assert report["job_state"] == "SUCCEEDED", log
    training = report["eval_result"]["training"]
    assert training["agent_steps"] == training["agent_steps_budget"] == BUDGET
    assert training["enforced"] is True
    events = [json.loads(x) for x in (run / "trajectory.jsonl").read_text().splitlines()]
    signed = [e for e in events if e["kind"] == "training_steps"]
    assert signed and signed[-1]["payload"]["agent_steps"] == BUDGET
    assert signed[-1]["level"] == "trusted_evaluator"
    # the acceptance's other half: the agent's CPU time, measured by the run's cgroup
    if report["agent_cgroup"] != "none":
        assert report["agent_cpu_s"] > 0
    assert "trained 2,000 / 2,000 agent steps" in report["score"]["explanation"]
