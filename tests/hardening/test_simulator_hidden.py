"""A task whose simulator runs only in the evaluator: the agent's sandbox has no simulator.

``training.simulator: "evaluator"`` makes the evaluator the one party that can count the
agent's training steps, so the sandbox must leave the agent no simulator of its own:
inside a real bubblewrap sandbox, ``import mujoco`` (and every package built on it)
fails, and so does loading ``libmujoco.so`` by its host path, while the SDK still works
and trains through a practice session whose steps the evaluator counts. A task whose
agent simulates itself keeps MuJoCo importable (the hiding is the task's, not global).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pytest

from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.harness.agent.hidden_modules import (
    SIMULATOR_PACKAGES,
    module_path,
    sandbox_hidden_paths,
)
from ale_robotics.sandboxes.bwrap.command import bwrap_command, sandbox_available
from ale_robotics.tasks import Registry, default_registry
from ale_robotics.tasks.spec import SimulatorSpec

REPRO = "td3-walker2d-repro-v1"  # batch, training.simulator "evaluator"
AGENT_SIDE = "td3-hopper-v1"  # interactive, the simulator stays importable by the agent
RUN = "run-simhidden-1"
STEPS = 25

needs_bwrap = pytest.mark.skipif(
    not sandbox_available(),
    reason="bubblewrap is not installed or cannot create namespaces here "
    "(apt-get install bubblewrap; unprivileged user namespaces must be enabled)",
)


def _libmujoco() -> Path:
    """The MuJoCo shared library's host path (inside the bindings' package directory)."""
    root = module_path("mujoco")
    assert root is not None, "mujoco is not installed: the suite needs it"
    libs = sorted(root.glob("libmujoco.so*"))
    assert libs, f"no libmujoco.so in {root}"
    return libs[0].resolve()


PROBE = r"""
import ctypes, importlib, json, os, sys
out = {}
for name in ("mujoco", "dm_control", "metaworld", "gymnasium_robotics"):
    try:
        importlib.import_module(name)
        out[name] = "imported"
    except ImportError as exc:
        out[name] = f"ImportError: {exc}"
try:
    ctypes.CDLL(sys.argv[1])
    out["cdll"] = "loaded"
except OSError as exc:
    out["cdll"] = f"OSError: {exc}"
pkg = os.path.dirname(sys.argv[1])
out["listing"] = sorted(os.listdir(pkg)) if os.path.isdir(pkg) else None
if sys.argv[2] == "train":
    import numpy as np
    from ale_robotics.client import AleClient, RemoteEnv
    spec = AleClient.from_env().get_spec()
    out["spec"] = [spec.task.id, spec.raw.mode, spec.task.training.simulator]
    out["capabilities"] = list(spec.raw.capabilities)
    env = RemoteEnv.from_env()  # a practice session: the evaluator simulates
    obs, _ = env.reset(seed=3)
    out["obs_shape"] = list(obs.shape)
    for _ in range(int(sys.argv[3])):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()
    out["used"] = AleClient.from_env().get_spec().training_agent_steps_used
    out["simulators_loaded"] = sorted(
        m for m in sys.modules if m.split(".")[0] in ("mujoco", "dm_control", "metaworld")
    )
print("PROBE " + json.dumps(out))
"""


@pytest.fixture
def repro_evaluator(short_tmp: Path, registry: Registry) -> Iterator[RunningEvaluator]:
    """A real evaluator bound to one run of the batch task; its agent socket alone in its
    directory, as the sandbox requires."""
    volume = short_tmp / "ws" / "submission"
    volume.mkdir(parents=True)
    (short_tmp / "ws" / "scratch").mkdir()
    running = serve(
        EvaluatorConfig(short_tmp / "state", volume, task_id=REPRO, run_id=RUN, workers=1),
        agent_listen=f"unix://{short_tmp}/agent/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
        registry=registry,
    )
    try:
        yield running
    finally:
        running.stop(grace=0.5)


def _sandboxed(ev: RunningEvaluator, tmp: Path, task_id: str, mode: str) -> dict[str, object]:
    ws = tmp / "ws"
    argv = [sys.executable, "-c", PROBE, str(_libmujoco()), mode, str(STEPS)]
    cmd = bwrap_command(
        argv,
        workspace=ws,
        scratch_dir=ws / "scratch",
        submission_dir=ws / "submission",
        agent_socket=tmp / "agent" / "a.sock",
        block_imports=sandbox_hidden_paths(default_registry().get(task_id)),
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "ALE_ENDPOINT": ev.agent_address,
        "ALE_TOKEN": ev.agent_token,
        "ALE_TASK_ID": task_id,
        "ALE_RUN_ID": RUN,
        "ALE_SUBMISSION_DIR": str(ws / "submission"),
        "OPENBLAS_NUM_THREADS": "1",
    }
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PROBE "))
    out: dict[str, object] = json.loads(line[len("PROBE ") :])
    return out


def test_every_installed_package_of_the_family_is_hidden_and_nothing_else() -> None:
    reg = default_registry()
    repro = reg.get(REPRO)
    hidden = sandbox_hidden_paths(repro)
    expected = [
        p.resolve() for n in SIMULATOR_PACKAGES["mujoco"] if (p := module_path(n)) is not None
    ]
    assert hidden == expected and _libmujoco().parent in hidden
    # dm_control tasks simulate with the same bindings: the same packages go
    assert sandbox_hidden_paths(reg.get("tdmpc2-cheetah-run-v1")) == expected
    # metaworld.policies (env.agent_hidden_modules) lies inside the hidden metaworld
    assert sandbox_hidden_paths(reg.get("tdmpc2-mw-push-v1")) == expected
    assert sandbox_hidden_paths(reg.get(AGENT_SIDE)) == []
    # every simulator a task config can name has its family
    names = get_args(SimulatorSpec.model_fields["name"].annotation)
    assert set(names) == set(SIMULATOR_PACKAGES)


@needs_bwrap
def test_the_simulator_is_gone_but_the_sdk_trains_through_practice_sessions(
    repro_evaluator: RunningEvaluator, short_tmp: Path
) -> None:
    out = _sandboxed(repro_evaluator, short_tmp, REPRO, "train")
    for name in ("mujoco", "dm_control", "metaworld", "gymnasium_robotics"):
        assert str(out[name]).startswith(f"ImportError: {name} is hidden from agents"), out
        assert "training.simulator 'evaluator'" in str(out[name])
    assert str(out["cdll"]).startswith("OSError: "), out["cdll"]
    assert out["listing"] == ["__init__.py"]  # neither the .so nor the bindings can be read
    # the SDK imports no simulator, parses the task's spec and trains remotely
    assert out["spec"] == [REPRO, "batch", "evaluator"]
    assert "practice_sessions" in out["capabilities"]  # type: ignore[operator]
    assert "eval_sessions" not in out["capabilities"]  # type: ignore[operator]
    assert out["obs_shape"] == [17]
    assert out["simulators_loaded"] == []
    # the evaluator counted every step the sandboxed agent took
    assert out["used"] == STEPS
    assert repro_evaluator.evaluator.training.used(RUN) == STEPS


@needs_bwrap
def test_a_task_whose_agent_simulates_keeps_mujoco_importable(
    repro_evaluator: RunningEvaluator, short_tmp: Path
) -> None:
    """Same sandbox, same evaluator, but the hidden paths of td3-hopper-v1 (none): the
    simulator is there, so the hiding above is the task's doing, not the sandbox's."""
    out = _sandboxed(repro_evaluator, short_tmp, AGENT_SIDE, "probe")
    assert out["mujoco"] == "imported", out
    assert out["dm_control"] == "imported", out
    assert out["cdll"] == "loaded"
    assert _libmujoco().name in out["listing"]  # type: ignore[operator]
