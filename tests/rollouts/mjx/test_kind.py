"""The ``mjx`` kind's promises that need no JAX: registration, config rules, resources, errors.

The contract suite (tests/rollouts/test_kind_contract.py) runs over every registered kind,
``mjx`` included, whether or not its extra is installed; these add what is particular to
it: its module loads without JAX (every task-config parse loads its kind), it refuses env
families it has no JAX step for, it declares what its workers need, and a host without
the extra gets an error naming the install.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import random_weights
from mjx_helpers import CHEETAH, PENDULUM, task_as

import ale_robotics.rollouts.mjx as mjx_pkg
from ale_robotics.model.kind_registry import get_kind, kind_names
from ale_robotics.rollouts.mjx import FAMILY_IDS, MjxKind, MjxUnavailable
from ale_robotics.rollouts.mjx import kind as kind_module
from ale_robotics.tasks import TaskSpec


def test_registered_under_its_name() -> None:
    assert "mjx" in kind_names()
    kind = get_kind("mjx")
    assert isinstance(kind, MjxKind) and kind.settings == frozenset()


def test_parsing_a_task_of_the_kind_imports_no_jax() -> None:
    """An agent's client parses task configs (GetSpec): that must not pay for JAX, nor need it."""
    code = (
        "import sys, json\n"
        "from ale_robotics.tasks import TaskSpec, default_registry\n"
        f"doc = json.loads(default_registry().entry({CHEETAH!r}).raw)\n"
        "doc['eval']['backend'] = 'mjx'; doc['eval'].pop('threads', None)\n"
        "task = TaskSpec.model_validate(doc)\n"
        "assert task.eval.rollout == 'mjx'\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib')"
        " or m.startswith('mujoco.mjx'))\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("task_id", [CHEETAH, PENDULUM])
def test_accepts_the_families_it_steps(task_id: str) -> None:
    task = task_as(task_id, "mjx")
    assert task.eval.rollout == "mjx" and task.env.gym_id in FAMILY_IDS


def test_refuses_an_env_it_has_no_jax_step_for() -> None:
    with pytest.raises(ValueError, match=r"td3-reacher-v1: eval.backend 'mjx' has no JAX step"):
        task_as("td3-reacher-v1", "mjx")


def test_refuses_a_setting_it_does_not_read() -> None:
    raw = task_as(CHEETAH, "mujoco_rollout").model_dump(mode="json")
    raw["eval"].update(backend="mjx", threads=2)
    with pytest.raises(ValueError, match=r"eval\.threads applies only to eval\.backend"):
        TaskSpec.model_validate(raw)


def test_declares_what_its_workers_need() -> None:
    """The executor reads this to start the kind's workers without RLIMIT_AS (XLA and CUDA
    reserve far more address space than the 4 GiB an evaluation worker gets)."""
    needs = get_kind("mjx").worker_needs  # type: ignore[attr-defined]
    assert needs.unlimited_address_space is True and needs.max_workers == 1
    for name in ("gymnasium", "mujoco_rollout"):
        assert getattr(get_kind(name), "worker_needs", None) is None


def test_a_missing_extra_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without JAX the kind still loads and validates tasks; running a shard says what to do."""
    monkeypatch.setitem(sys.modules, "jax", None)  # "import jax" now raises ImportError
    monkeypatch.delitem(sys.modules, "ale_robotics.rollouts.mjx.rollout", raising=False)
    monkeypatch.delitem(sys.modules, "ale_robotics.rollouts.mjx.families", raising=False)
    monkeypatch.delattr(mjx_pkg, "rollout", raising=False)
    monkeypatch.delattr(mjx_pkg, "families", raising=False)
    task = task_as(CHEETAH, "mjx", steps=2)
    with pytest.raises(MjxUnavailable, match=r"pip install 'ale-robotics\[mjx\]'"):
        get_kind("mjx").run_shard(task, random_weights(task), [(0, 1)])


def test_xla_defaults_leave_an_operator_s_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    kind_module.configure_xla()
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
    assert os.environ["XLA_FLAGS"].split() == [
        "--xla_force_host_platform_device_count=2",
        "--xla_gpu_deterministic_ops=true",
    ]
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_deterministic_ops=false")
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE")
    kind_module.configure_xla()
    assert os.environ["XLA_FLAGS"] == "--xla_gpu_deterministic_ops=false"
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"


def test_xla_defaults_are_not_set_once_jax_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """Set after JAX started they would only mislead whoever reads the environment."""
    monkeypatch.setitem(sys.modules, "jax", object())
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    kind_module.configure_xla()
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in os.environ and "XLA_FLAGS" not in os.environ
